# backend_scene.cmake — the CMake half of tests/backend_scene.h: a mode of a backend's test
# executable (bs_main's --expect-... flags) registered as a CTest test, each a process of its
# own since a process loads a driver once. Included by tests/cuda and tests/level_zero.
include_guard(GLOBAL)

# acg_backend_mode(<exe> <label> <flag> <name> <text> [<var=value>...]): the test <exe>.<name>
# runs `<exe> <flag> <text>`, labelled <label>, within 60 s, with ACG_LOG=error and the given
# environment.
function(acg_backend_mode exe label flag name text)
    add_test(NAME ${exe}.${name} COMMAND ${exe} ${flag} "${text}")
    set_tests_properties(${exe}.${name} PROPERTIES LABELS "${label}" TIMEOUT 60
        ENVIRONMENT "ACG_LOG=error;${ARGN}")
endfunction()
