# acg_add_backend(NAME SOURCES file... [INCLUDE_DIRS dir...] [LIBS lib...]
#                 [TEST_DIRS dir...] [TEST_ENV var=value...] [TESTS_IF variable])
#
# Adds a backend to the build: an object library acg_backend_<NAME> of SOURCES (relative to the
# backend.cmake calling it) that sees the backend interface (src/core/backend/acg-backend.h), the
# core's layer header (src/core/export/acg-layer.h), the public headers, INCLUDE_DIRS and what
# LIBS' targets bring, and nothing else of src/: its own headers it includes by name, from its
# folder. Its objects go into libacg; LIBS are linked into libacg too. NAME is the backend's name
# (acg_backend_i.name) and the prefix of its two symbols: acg__backend_<NAME> (its table) and
# acg__<NAME>_env (its ACG_* variables). Called from src/backends/<NAME>/backend.cmake, which
# CMakeLists.txt includes for each folder of ACG_BACKEND_FOLDERS.
#
# Its tests: every device suite of tests/ runs on it as <test>.<NAME>, with TEST_ENV added to
# the suites' environment (what finds a test driver, say); TEST_DIRS (relative to the source
# root, in order: a test driver before the tests using it) are added when tests are built; and
# where TESTS_IF names a variable that is false when the tests are configured (a kernel compiler
# the build lacks), none of its suites run, and the build says so.
function(acg_add_backend name)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "TESTS_IF" "SOURCES;INCLUDE_DIRS;LIBS;TEST_DIRS;TEST_ENV")
    if(arg_UNPARSED_ARGUMENTS OR NOT arg_SOURCES)
        message(FATAL_ERROR "acg_add_backend(${name}): SOURCES file... [INCLUDE_DIRS dir...] "
                            "[LIBS lib...] [TEST_DIRS dir...] [TEST_ENV var=value...] "
                            "[TESTS_IF variable]; got ${arg_UNPARSED_ARGUMENTS}")
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
    set(ACG_BACKEND_TEST_DIRS_${name} ${arg_TEST_DIRS} PARENT_SCOPE)
    set(ACG_BACKEND_TEST_ENV_${name} ${arg_TEST_ENV} PARENT_SCOPE)
    set(ACG_BACKEND_TESTS_IF_${name} ${arg_TESTS_IF} PARENT_SCOPE)
endfunction()
