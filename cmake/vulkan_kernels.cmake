# vulkan_kernels.cmake — the tests' Vulkan kernel (tests/test_kernels.vulkan.glsl, the twin of
# tests/test_kernels.cl) compiled at build time to a SPIR-V module for the vulkan backend with
# the entry point tk_rowscale, checked with spirv-val (a module that fails fails the build) and
# embedded in a C header, with the tools and flags of cmake/acgKernels.cmake. The root
# CMakeLists.txt includes this file after acgKernels.cmake when ACG_KERNELS_VULKAN is on.
#
# Defines:
#   ACG_TEST_VULKAN_EMBEDDED   generated/test_kernels_vk.h (tc_test_kernels_vk), made by the
#                              target acg_vulkan_test_kernels
#   ACG_VULKAN_KERNEL_DEFINES  ACG_HAVE_VULKAN_KERNELS=1, for the test targets
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/spirv)
set(_acg_src ${PROJECT_SOURCE_DIR}/tests/test_kernels.vulkan.glsl)
set(_acg_spv ${PROJECT_BINARY_DIR}/spirv/test_kernels_vk.spv)
set(ACG_TEST_VULKAN_EMBEDDED ${PROJECT_BINARY_DIR}/generated/test_kernels_vk.h)
add_custom_command(OUTPUT ${_acg_spv}
    COMMAND ${ACG_GLSLANG} ${ACG_GLSLANG_FLAGS} --source-entrypoint main -e tk_rowscale
            -I${PROJECT_SOURCE_DIR}/include -o ${_acg_spv}.tmp ${_acg_src}
    COMMAND ${ACG_SPIRV_VAL} ${ACG_SPIRV_VAL_VULKAN_FLAGS} ${_acg_spv}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${_acg_spv}.tmp ${_acg_spv}
    DEPENDS ${_acg_src} ${PROJECT_SOURCE_DIR}/include/acg/kernel.glsl
            ${PROJECT_SOURCE_DIR}/cmake/vulkan_kernels.cmake
    COMMENT "Compiling tests/test_kernels.vulkan.glsl to SPIR-V"
    VERBATIM)
add_custom_command(OUTPUT ${ACG_TEST_VULKAN_EMBEDDED}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${_acg_spv} -DOUTPUT=${ACG_TEST_VULKAN_EMBEDDED}
            -DNAME=tc_test_kernels_vk -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    DEPENDS ${_acg_spv} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
    COMMENT "Embedding tests/test_kernels.vulkan.glsl's SPIR-V"
    VERBATIM)
add_custom_target(acg_vulkan_test_kernels DEPENDS ${ACG_TEST_VULKAN_EMBEDDED})
set(ACG_VULKAN_KERNEL_DEFINES ACG_HAVE_VULKAN_KERNELS=1)
