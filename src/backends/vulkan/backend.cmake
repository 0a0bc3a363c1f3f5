# The vulkan backend: built when the Vulkan headers are found (libvulkan-dev). The loader is
# opened at run time (dlopen), so one build runs where no loader or no Vulkan device is; the
# suites run on Mesa's lavapipe (mesa-vulkan-drivers), a conformant driver on the CPU.
option(ACG_WITH_VULKAN "Build the Vulkan backend when the Vulkan headers are found" ON)
if(ACG_WITH_VULKAN)
    find_path(ACG_VULKAN_INCLUDE_DIR vulkan/vulkan.h)
    if(ACG_VULKAN_INCLUDE_DIR)
        # The vulkan suites run with the Khronos validation layer checking every call, where
        # it is installed (vulkan-validationlayers): an error it reports fails the suite.
        find_file(ACG_VULKAN_VALIDATION_LAYER VkLayer_khronos_validation.json
            PATHS /usr/share/vulkan/explicit_layer.d /usr/local/share/vulkan/explicit_layer.d
            NO_DEFAULT_PATH)
        # Not under ThreadSanitizer: the layer's own threads (it follows timeline semaphores
        # on threads of its own) race in its own code as TSan sees it, which is no finding of
        # acg's; the other builds run with it.
        set(env)
        if(ACG_VULKAN_VALIDATION_LAYER AND "thread" IN_LIST ACG_SANITIZE)
            message(STATUS "acg: the vulkan suites run without the validation layer under TSan")
        elseif(ACG_VULKAN_VALIDATION_LAYER)
            set(env ACG_VULKAN_VALIDATION=1)
        else()
            message(STATUS "acg: the Vulkan validation layer is not installed "
                           "(vulkan-validationlayers); the vulkan suites run without it")
        endif()
        # Under AddressSanitizer: lavapipe allocates host memory for every group it runs, which
        # the slow unwinder that .ci/run asks for (fast_unwind_on_malloc=0, for PoCL's frames)
        # makes minutes per suite, and the quarantine gigabytes; the vulkan suites keep the fast
        # unwinder and a small quarantine (acg's own leaks are still found).
        if("address" IN_LIST ACG_SANITIZE)
            list(APPEND env "ASAN_OPTIONS=fast_unwind_on_malloc=1:quarantine_size_mb=16")
        endif()
        # Without SPIR-V for Vulkan (glslangValidator or spirv-val missing) no kernel runs
        # there: not tested.
        # Its kernels are slow here: lavapipe's fma rounds twice, so the kernels compute theirs
        # with integers (include/acg/kernel.glsl); tests/CMakeLists.txt gives test_model time.
        list(APPEND ACG_SLOW_KERNEL_BACKENDS vulkan)
        acg_add_backend(vulkan SOURCES loader.c device.c stream.c kernel.c graph.c
            INCLUDE_DIRS ${ACG_VULKAN_INCLUDE_DIR} LIBS ${CMAKE_DL_LIBS}
            TEST_DIRS tests/vulkan TEST_ENV ${env} TESTS_IF ACG_VULKAN_KERNELS_BUILT)
    else()
        message(STATUS "acg: Vulkan headers not found (libvulkan-dev); the vulkan backend is "
                       "not built")
    endif()
endif()
