# The level_zero backend: built when the loader's headers are found (libze-dev). The loader is
# opened at run time (dlopen), so one build runs where no loader or no Intel GPU is; the kernels
# are SPIR-V built from the layers' one source at build time.
option(ACG_WITH_LEVEL_ZERO "Build the Level Zero backend when its loader headers are found" ON)
if(ACG_WITH_LEVEL_ZERO)
    find_path(ACG_LEVEL_ZERO_INCLUDE_DIR level_zero/ze_api.h)
    if(ACG_LEVEL_ZERO_INCLUDE_DIR)
        # The level_zero suites: the real Level Zero loader loads acg's test driver
        # (tests/ze_driver), with the loader's validation layer checking every call the backend
        # makes. Without SPIR-V (clang, llvm-spirv or spirv-val missing) no kernel runs there:
        # not tested.
        option(ACG_LEVEL_ZERO_TEST_DRIVER
            "Run the level_zero tests against acg's Level Zero test driver" ON)
        set(env)
        if(ACG_LEVEL_ZERO_TEST_DRIVER)
            set(env "ZE_ENABLE_ALT_DRIVERS=$<TARGET_FILE:acg_test_ze>"
                ZE_ENABLE_VALIDATION_LAYER=1 ZE_ENABLE_PARAMETER_VALIDATION=1)
        endif()
        acg_add_backend(level_zero SOURCES loader.c level_zero.c stream.c queue.c graph.c
            INCLUDE_DIRS ${ACG_LEVEL_ZERO_INCLUDE_DIR} LIBS ${CMAKE_DL_LIBS}
            TEST_DIRS tests/ze_driver tests/level_zero TEST_ENV ${env}
            TESTS_IF ACG_SPIRV_KERNELS_BUILT)
    else()
        message(STATUS "acg: Level Zero headers not found (libze-dev); the level_zero backend "
                       "is not built")
    endif()
endif()
