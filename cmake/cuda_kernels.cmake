# cuda_kernels.cmake — the CUDA C that stays beside the one sources: the model's kernels that
# share a work item between lanes (src/model/kernels.cu) and the tests' kernels, each compiled by
# nvcc into one fatbin and embedded in a C header. The root CMakeLists.txt includes this file
# after cmake/acgKernels.cmake, whose nvcc, flags and -gencode options it uses, when
# ACG_KERNELS_CUDA is on; the library's targets stay C only (no enable_language(CUDA)).
#
# Defines:
#   acg_cuda_fatbin(<src.cu> <symbol> <out_header>)  the function (src relative to the source
#       tree or absolute; out_header absolute); the header defines `<symbol>[]` and
#       `<symbol>_size` (cmake/embed_binary.cmake)
#   ACG_MODEL_CUDA_EMBEDDED  generated/model_kernels_cuda.h  (acg__model_kernels_fatbin), for
#                            acg_model_objects' sources
#   ACG_TEST_CUDA_EMBEDDED   generated/test_kernels_cuda.h   (tc_test_kernels_fatbin), made by
#                            the target acg_cuda_test_kernels: tests/ is another directory, and
#                            a custom command's output is only known to its own directory
#   ACG_CUDA_KERNEL_DEFINES  ACG_HAVE_CUDA_KERNELS=1, for the model and test targets
# and gives the cuda backend's object library generated/cuda_loop_kernel.h
# (acg__cu_loop_fatbin) with ACG_HAVE_CUDA_LOOP=1.
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/cuda) # the fatbins (nvcc makes no directory)

function(acg_cuda_fatbin src symbol out_header)
    if(NOT IS_ABSOLUTE ${src})
        set(src ${PROJECT_SOURCE_DIR}/${src})
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    get_filename_component(stem ${out_header} NAME_WE)
    set(fatbin ${PROJECT_BINARY_DIR}/cuda/${stem}.fatbin)
    add_custom_command(OUTPUT ${fatbin}
        COMMAND ${ACG_NVCC} -fatbin ${ACG_CUDA_NVCC_FLAGS} ${ACG_CUDA_GENCODE}
                -I${PROJECT_SOURCE_DIR}/include -o ${fatbin} ${src}
        DEPENDS ${src} ${PROJECT_SOURCE_DIR}/include/acg/kernel.h
                ${PROJECT_SOURCE_DIR}/cmake/cuda_kernels.cmake
        COMMENT "Compiling ${rel} to a fatbin"
        VERBATIM)
    add_custom_command(OUTPUT ${out_header}
        COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${out_header} -DNAME=${symbol}
                -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        DEPENDS ${fatbin} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        COMMENT "Embedding ${rel}'s fatbin"
        VERBATIM)
endfunction()

# The kernels: "source;header;symbol", one fatbin and one header (generated/<header>.h) each
# (scripts/device-build.sh reads these lines too).
set(ACG_CUDA_EMBEDDED)
foreach(triple "src/model/kernels.cu;model_kernels_cuda;acg__model_kernels_fatbin"
               "tests/cuda/test_kernels.cu;test_kernels_cuda;tc_test_kernels_fatbin"
               "src/backends/cuda/loop.cu;cuda_loop_kernel;acg__cu_loop_fatbin")
    list(GET triple 0 src)
    list(GET triple 1 out)
    list(GET triple 2 symbol)
    set(hdr ${PROJECT_BINARY_DIR}/generated/${out}.h)
    acg_cuda_fatbin(${src} ${symbol} ${hdr})
    list(APPEND ACG_CUDA_EMBEDDED ${hdr})
endforeach()
# The cuda backend's own kernels, which begin and end a loop's runs (src/backends/cuda/loop.cu):
# the backend's object library compiles with them and says so (ACG_HAVE_CUDA_LOOP); without nvcc
# the backend has no loops.
list(GET ACG_CUDA_EMBEDDED 2 _acg_loop_hdr)
if(TARGET acg_backend_cuda)
    target_sources(acg_backend_cuda PRIVATE ${_acg_loop_hdr})
    target_include_directories(acg_backend_cuda PRIVATE ${PROJECT_BINARY_DIR}/generated)
    target_compile_definitions(acg_backend_cuda PRIVATE ACG_HAVE_CUDA_LOOP=1)
endif()
# Each header is a source of one target only (two targets must not share one custom command's
# output): the model's object library, and acg_cuda_test_kernels for tests/.
list(GET ACG_CUDA_EMBEDDED 0 ACG_MODEL_CUDA_EMBEDDED)
list(GET ACG_CUDA_EMBEDDED 1 ACG_TEST_CUDA_EMBEDDED)
add_custom_target(acg_cuda_test_kernels DEPENDS ${ACG_TEST_CUDA_EMBEDDED})
set(ACG_CUDA_KERNEL_DEFINES ACG_HAVE_CUDA_KERNELS=1)
