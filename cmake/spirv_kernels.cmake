# spirv_kernels.cmake — the tests' OpenCL C kernels (tests/test_kernels.cl) compiled at build
# time to a SPIR-V module for the level_zero backend, checked with spirv-val (a module that fails
# fails the build) and embedded in a C header, with the tools and flags of cmake/acgKernels.cmake
# (which builds the library's one-source kernels the same way). The root CMakeLists.txt includes
# this file after acgKernels.cmake when ACG_KERNELS_SPIRV is on.
#
# Defines:
#   ACG_TEST_SPIRV_EMBEDDED   generated/test_kernels_spv.h   (tc_test_kernels_spv), made by the
#                             target acg_spirv_test_kernels: tests/ is another directory
#   ACG_SPIRV_MODULES         every SPIR-V module of the build, "spv;source" for each (the
#                             one-source kernels' too), for tests/spirv/check.sh
#   ACG_SPIRV_KERNEL_DEFINES  ACG_HAVE_SPIRV_KERNELS=1, for the test targets
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/spirv)
set(_acg_src ${PROJECT_SOURCE_DIR}/tests/test_kernels.cl)
set(_acg_spv ${PROJECT_BINARY_DIR}/spirv/test_kernels_spv.spv)
set(ACG_TEST_SPIRV_EMBEDDED ${PROJECT_BINARY_DIR}/generated/test_kernels_spv.h)
# The module gets its name only once valid, so a failed validation is not up to date at the
# next build.
add_custom_command(OUTPUT ${_acg_spv}
    BYPRODUCTS ${_acg_spv}.bc
    COMMAND ${ACG_SPIRV_CLANG} ${ACG_SPIRV_CLANG_FLAGS} -c ${_acg_src} -o ${_acg_spv}.bc
    COMMAND ${ACG_LLVM_SPIRV} ${ACG_LLVM_SPIRV_FLAGS} ${_acg_spv}.bc -o ${_acg_spv}.tmp
    COMMAND ${ACG_SPIRV_VAL} ${ACG_SPIRV_VAL_FLAGS} ${_acg_spv}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${_acg_spv}.tmp ${_acg_spv}
    DEPENDS ${_acg_src} ${PROJECT_SOURCE_DIR}/cmake/spirv_kernels.cmake
    COMMENT "Compiling tests/test_kernels.cl to SPIR-V"
    VERBATIM)
add_custom_command(OUTPUT ${ACG_TEST_SPIRV_EMBEDDED}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${_acg_spv} -DOUTPUT=${ACG_TEST_SPIRV_EMBEDDED}
            -DNAME=tc_test_kernels_spv -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    DEPENDS ${_acg_spv} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    COMMENT "Embedding tests/test_kernels.cl's SPIR-V"
    VERBATIM)
add_custom_target(acg_spirv_test_kernels DEPENDS ${ACG_TEST_SPIRV_EMBEDDED})
set(ACG_SPIRV_MODULES
    ${PROJECT_BINARY_DIR}/acg_kernels/acg__core/elementwise.spv
    ${PROJECT_BINARY_DIR}/acg_kernels/acg__core/elementwise.cl
    ${PROJECT_BINARY_DIR}/acg_kernels/acg__model/ops.spv
    ${PROJECT_BINARY_DIR}/acg_kernels/acg__model/ops.cl
    ${_acg_spv} ${_acg_src})
set(ACG_SPIRV_KERNEL_DEFINES ACG_HAVE_SPIRV_KERNELS=1)
