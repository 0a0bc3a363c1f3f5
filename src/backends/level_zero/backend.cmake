# The level_zero backend: built when the loader's headers are found (libze-dev). The loader is
# opened at run time (dlopen), so one build runs where no loader or no Intel GPU is; the kernels
# are SPIR-V built from the layers' one source at build time.
option(ACG_WITH_LEVEL_ZERO "Build the Level Zero backend when its loader headers are found" ON)
if(ACG_WITH_LEVEL_ZERO)
    find_path(ACG_LEVEL_ZERO_INCLUDE_DIR level_zero/ze_api.h)
    if(ACG_LEVEL_ZERO_INCLUDE_DIR)
        acg_add_backend(level_zero SOURCES loader.c level_zero.c stream.c queue.c graph.c
            INCLUDE_DIRS ${ACG_LEVEL_ZERO_INCLUDE_DIR} LIBS ${CMAKE_DL_LIBS})
    else()
        message(STATUS "acg: Level Zero headers not found (libze-dev); the level_zero backend "
                       "is not built")
    endif()
endif()
