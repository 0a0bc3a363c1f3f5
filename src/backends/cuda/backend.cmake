# The cuda backend: built when the toolkit's headers are found. The driver is loaded at run time
# (dlopen), so the library never links libcuda and one build runs with or without a GPU; the
# kernels are compiled by nvcc into fatbins embedded in the library (cmake/cuda_kernels.cmake).
# The toolkit's headers only: the driver and NCCL are dlopen'ed.
option(ACG_WITH_CUDA "Build the CUDA backend when the CUDA toolkit is found" ON)
if(ACG_WITH_CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
        # No GPU runs CI: the cuda suites run against acg's CUDA test driver
        # (tests/cuda_driver). The device check script (scripts/device-check.sh) runs them on a
        # real GPU with the real driver.
        option(ACG_CUDA_TEST_DRIVER "Run the cuda tests against acg's CUDA test driver" ON)
        set(env)
        if(ACG_CUDA_TEST_DRIVER)
            set(env "ACG_CUDA_DRIVER=$<TARGET_FILE:acg_test_cuda>")
        endif()
        acg_add_backend(cuda SOURCES loader.c cuda.c kernel.c graph.c loop.c nccl.c
            INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS} LIBS ${CMAKE_DL_LIBS}
            TEST_DIRS tests/cuda_driver tests/cuda TEST_ENV ${env})
    else()
        message(STATUS "acg: CUDA toolkit not found; the cuda backend is not built")
    endif()
endif()
