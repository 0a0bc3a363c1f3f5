# The cuda backend: built when the toolkit's headers are found. The driver is loaded at run time
# (dlopen), so the library never links libcuda and one build runs with or without a GPU; the
# kernels are compiled by nvcc into fatbins embedded in the library (cmake/cuda_kernels.cmake).
# The toolkit's headers only: the driver and NCCL are dlopen'ed.
option(ACG_WITH_CUDA "Build the CUDA backend when the CUDA toolkit is found" ON)
if(ACG_WITH_CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
        acg_add_backend(cuda SOURCES loader.c cuda.c kernel.c graph.c nccl.c
            INCLUDE_DIRS ${CUDAToolkit_INCLUDE_DIRS} LIBS ${CMAKE_DL_LIBS})
    else()
        message(STATUS "acg: CUDA toolkit not found; the cuda backend is not built")
    endif()
endif()
