# acg_add_backend(NAME SOURCES file... [INCLUDE_DIRS dir...] [LIBS lib...])
#
# Adds a backend to the build: an object library acg_backend_<NAME> of SOURCES (relative to the
# backend.cmake calling it) that sees the backend interface (src/core/backend/acg-backend.h), the
# core's layer header (src/core/export/acg-layer.h), the public headers, INCLUDE_DIRS and what
# LIBS' targets bring, and nothing else of src/: its own headers it includes by name, from its
# folder. Its objects go into libacg; LIBS are linked into libacg too. NAME is the backend's name
# (acg_backend_i.name) and the prefix of its two symbols: acg__backend_<NAME> (its table) and
# acg__<NAME>_env (its ACG_* variables). Called from src/backends/<NAME>/backend.cmake, which
# CMakeLists.txt includes for each folder of ACG_BACKEND_FOLDERS.
function(acg_add_backend name)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;INCLUDE_DIRS;LIBS")
    if(arg_UNPARSED_ARGUMENTS OR NOT arg_SOURCES)
        message(FATAL_ERROR "acg_add_backend(${name}): SOURCES file... [INCLUDE_DIRS dir...] "
                            "[LIBS lib...]; got ${arg_UNPARSED_ARGUMENTS}")
    endif()
    list(TRANSFORM arg_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
    set(t acg_backend_${name})
    add_library(${t} OBJECT ${arg_SOURCES})
    target_include_directories(${t} PRIVATE ${ACG_BACKEND_INCLUDE_DIRS} ${arg_INCLUDE_DIRS})
    target_include_directories(${t} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
    target_compile_definitions(${t} PRIVATE _POSIX_C_SOURCE=200809L ACG_BUILDING=1)
    target_link_libraries(${t} PRIVATE ${arg_LIBS})
    set_target_properties(${t} PROPERTIES C_VISIBILITY_PRESET hidden)
    set(ACG_BACKENDS ${ACG_BACKENDS} ${name} PARENT_SCOPE)
    set(ACG_BACKEND_LIBS ${ACG_BACKEND_LIBS} ${arg_LIBS} PARENT_SCOPE)
endfunction()
