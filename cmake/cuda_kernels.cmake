# cuda_kernels.cmake — each layer's CUDA C kernels (*.cu), compiled by nvcc into one fatbin per
# layer and embedded in a C header, which the layer's kernel definitions include for their cuda
# field under ACG_HAVE_CUDA_KERNELS. The root CMakeLists.txt includes this file when the cuda
# backend is built and find_package(CUDAToolkit) found nvcc (CUDAToolkit_NVCC_EXECUTABLE); the
# library's targets stay C only (no enable_language(CUDA)).
#
# Defines:
#   acg_cuda_fatbin(<src.cu> <symbol> <out_header>)  the function (src relative to the source
#       tree or absolute; out_header absolute); the header defines `<symbol>[]` and
#       `<symbol>_size` (cmake/embed_binary.cmake)
#   ACG_CORE_CUDA_EMBEDDED   generated/core_kernels_cuda.h   (acg__core_kernels_fatbin), for
#                            acg_core_objects' sources
#   ACG_MODEL_CUDA_EMBEDDED  generated/model_kernels_cuda.h  (acg__model_kernels_fatbin), for
#                            acg_model_objects' sources
#   ACG_TEST_CUDA_EMBEDDED   generated/test_kernels_cuda.h   (tc_test_kernels_fatbin), made by
#                            the target acg_cuda_test_kernels: tests/ is another directory, and
#                            a custom command's output is only known to its own directory
#   ACG_CUDA_EMBEDDED        the three headers
#   ACG_CUDA_KERNEL_DEFINES  ACG_HAVE_CUDA_KERNELS=1, for the core, model and test targets
#   ACG_CUDA_GENCODE         the nvcc -gencode options in use
#
# The one arithmetic (docs/arithmetic.md) needs nothing contracted, division and square root
# correctly rounded, and subnormals kept: the kernels write those operations as intrinsics, and
# these flags make sure of it. Never --use_fast_math.
set(ACG_CUDA_NVCC_FLAGS --fmad=false -prec-div=true -prec-sqrt=true -ftz=false -O3)

# Real code for each architecture that nvcc knows, and PTX for one (compute_90 by default), which
# the driver compiles for a newer GPU.
set(ACG_CUDA_ARCHS "80;90;100" CACHE STRING "GPU architectures the cuda kernels are built for")
set(ACG_CUDA_PTX_ARCH "90" CACHE STRING "The architecture whose PTX the fatbins also carry")
execute_process(COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} --list-gpu-arch
    OUTPUT_VARIABLE _acg_nvcc_archs RESULT_VARIABLE _acg_nvcc_rc ERROR_QUIET)
set(ACG_CUDA_GENCODE)
set(_acg_cuda_built)
foreach(arch ${ACG_CUDA_ARCHS})
    if(_acg_nvcc_rc EQUAL 0 AND NOT _acg_nvcc_archs MATCHES "compute_${arch}([^0-9]|$)")
        message(STATUS "acg: nvcc ${CUDAToolkit_VERSION} has no sm_${arch}; "
                       "the cuda kernels are built without it")
        continue()
    endif()
    list(APPEND ACG_CUDA_GENCODE -gencode arch=compute_${arch},code=sm_${arch})
    list(APPEND _acg_cuda_built ${arch})
endforeach()
if(NOT _acg_cuda_built)
    message(FATAL_ERROR "acg: nvcc ${CUDAToolkit_VERSION} builds none of ACG_CUDA_ARCHS "
                        "(${ACG_CUDA_ARCHS})")
endif()
set(_acg_ptx compute_${ACG_CUDA_PTX_ARCH})
list(APPEND ACG_CUDA_GENCODE -gencode arch=${_acg_ptx},code=${_acg_ptx})
string(REPLACE ";" ", sm_" _acg_cuda_built "${_acg_cuda_built}")
message(STATUS "acg: cuda kernels for sm_${_acg_cuda_built}, and PTX ${_acg_ptx}")
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/cuda) # the fatbins (nvcc makes no directory)

function(acg_cuda_fatbin src symbol out_header)
    if(NOT IS_ABSOLUTE ${src})
        set(src ${PROJECT_SOURCE_DIR}/${src})
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    get_filename_component(stem ${out_header} NAME_WE)
    set(fatbin ${PROJECT_BINARY_DIR}/cuda/${stem}.fatbin)
    add_custom_command(OUTPUT ${fatbin}
        COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -fatbin ${ACG_CUDA_NVCC_FLAGS} ${ACG_CUDA_GENCODE}
                -o ${fatbin} ${src}
        DEPENDS ${src} ${PROJECT_SOURCE_DIR}/cmake/cuda_kernels.cmake
        COMMENT "Compiling ${rel} to a fatbin"
        VERBATIM)
    add_custom_command(OUTPUT ${out_header}
        COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${out_header} -DNAME=${symbol}
                -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        DEPENDS ${fatbin} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        COMMENT "Embedding ${rel}'s fatbin"
        VERBATIM)
endfunction()

# The kernels: "source;header;symbol", one fatbin and one header (generated/<header>.h) each.
set(ACG_CUDA_EMBEDDED)
foreach(triple "src/core/elementwise.cu;core_kernels_cuda;acg__core_kernels_fatbin"
               "src/model/kernels.cu;model_kernels_cuda;acg__model_kernels_fatbin"
               "tests/cuda/test_kernels.cu;test_kernels_cuda;tc_test_kernels_fatbin")
    list(GET triple 0 src)
    list(GET triple 1 out)
    list(GET triple 2 symbol)
    set(hdr ${PROJECT_BINARY_DIR}/generated/${out}.h)
    acg_cuda_fatbin(${src} ${symbol} ${hdr})
    list(APPEND ACG_CUDA_EMBEDDED ${hdr})
endforeach()
# Each header is a source of one target only (two targets must not share one custom command's
# output): the core's and the model's object libraries, and acg_cuda_test_kernels for tests/.
list(GET ACG_CUDA_EMBEDDED 0 ACG_CORE_CUDA_EMBEDDED)
list(GET ACG_CUDA_EMBEDDED 1 ACG_MODEL_CUDA_EMBEDDED)
list(GET ACG_CUDA_EMBEDDED 2 ACG_TEST_CUDA_EMBEDDED)
add_custom_target(acg_cuda_test_kernels DEPENDS ${ACG_TEST_CUDA_EMBEDDED})
set(ACG_CUDA_KERNEL_DEFINES ACG_HAVE_CUDA_KERNELS=1)
