# The opencl backend: built when the headers and the ICD loader are found; command buffers are
# resolved at run time, so one build serves every OpenCL implementation.
option(ACG_WITH_OPENCL "Build the OpenCL backend when OpenCL is found" ON)
if(ACG_WITH_OPENCL)
    find_package(OpenCL 3.0 QUIET)
    if(OpenCL_FOUND)
        acg_add_backend(opencl SOURCES opencl.c kernel.c memory.c cmdbuf.c LIBS OpenCL::OpenCL
            TEST_DIRS tests/opencl)
    else()
        message(STATUS "acg: OpenCL not found; the opencl backend is not built")
    endif()
endif()
