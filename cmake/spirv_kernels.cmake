# spirv_kernels.cmake — each layer's OpenCL C kernels (the same *.cl the opencl backend builds at
# run time), compiled at build time to one SPIR-V module per layer for the level_zero backend,
# checked with spirv-val (a module that fails fails the build) and embedded in a C header, which
# the layer's kernel definitions include for their spirv field under ACG_HAVE_SPIRV_KERNELS. The
# root CMakeLists.txt includes this file when ACG_SPIRV_KERNELS is on.
#
# Needs clang and llvm-spirv of one LLVM version (llvm-spirv reads only its own LLVM's bitcode;
# Debian: clang-14 llvm-spirv-14) and spirv-val (Debian: spirv-tools). Without them it says what
# to install and defines nothing but ACG_SPIRV_KERNELS_BUILT OFF.
#
# Defines:
#   ACG_SPIRV_KERNELS_BUILT   ON when the modules are built
#   acg_spirv_module(<src.cl> <symbol> <out_header>)  the function (src relative to the source
#       tree or absolute; out_header absolute): spirv/<header stem>.spv, and a header defining
#       `<symbol>[]` and `<symbol>_size` (cmake/embed_binary.cmake, aligned to 8)
#   ACG_CORE_SPIRV_EMBEDDED   generated/core_kernels_spv.h   (acg__core_kernels_spv), for
#                             acg_core_objects' sources
#   ACG_MODEL_SPIRV_EMBEDDED  generated/model_kernels_spv.h  (acg__model_kernels_spv), for
#                             acg_model_objects' sources
#   ACG_TEST_SPIRV_EMBEDDED   generated/test_kernels_spv.h   (tc_test_kernels_spv), made by the
#                             target acg_spirv_test_kernels: tests/ is another directory
#   ACG_SPIRV_MODULES         the modules, "spv;source" for each, for tests/spirv/check.sh
#   ACG_SPIRV_KERNEL_DEFINES  ACG_HAVE_SPIRV_KERNELS=1, for the core, model and test targets
#   ACG_SPIRV_VAL, ACG_SPIRV_DIS  the spirv-tools programs (spirv-dis may be NOTFOUND)
set(ACG_SPIRV_KERNELS_BUILT OFF)

set(_acg_spirv_install "install clang-14, llvm-spirv-14 and spirv-tools: scripts/install-deps.sh")
find_program(ACG_LLVM_SPIRV NAMES llvm-spirv-14 llvm-spirv
    DOC "llvm-spirv, LLVM bitcode to SPIR-V (the level_zero backend's kernels)")
find_program(ACG_SPIRV_VAL NAMES spirv-val DOC "spirv-val, the SPIR-V validator (spirv-tools)")
find_program(ACG_SPIRV_DIS NAMES spirv-dis DOC "spirv-dis, the SPIR-V disassembler (spirv-tools)")
if(NOT ACG_LLVM_SPIRV OR NOT ACG_SPIRV_VAL)
    message(STATUS "acg: llvm-spirv or spirv-val not found; the kernels carry no SPIR-V for the "
                   "level_zero backend; ${_acg_spirv_install}")
    return()
endif()
# clang of llvm-spirv's own LLVM version: a newer clang's bitcode is unreadable to it.
execute_process(COMMAND ${ACG_LLVM_SPIRV} --version OUTPUT_VARIABLE _acg_out ERROR_QUIET)
if(NOT _acg_out MATCHES "LLVM version ([0-9]+)")
    message(STATUS "acg: ${ACG_LLVM_SPIRV} --version names no LLVM version; the kernels carry no "
                   "SPIR-V; ${_acg_spirv_install}")
    return()
endif()
set(_acg_llvm ${CMAKE_MATCH_1})
find_program(ACG_SPIRV_CLANG NAMES clang-${_acg_llvm} clang
    DOC "clang of llvm-spirv's LLVM version, OpenCL C to LLVM bitcode")
set(_acg_clang_llvm "")
if(ACG_SPIRV_CLANG)
    execute_process(COMMAND ${ACG_SPIRV_CLANG} --version OUTPUT_VARIABLE _acg_out ERROR_QUIET)
    if(_acg_out MATCHES "clang version ([0-9]+)")
        set(_acg_clang_llvm ${CMAKE_MATCH_1})
    endif()
endif()
if(NOT _acg_clang_llvm STREQUAL _acg_llvm)
    message(STATUS "acg: no clang ${_acg_llvm} for ${ACG_LLVM_SPIRV} (found: "
                   "'${ACG_SPIRV_CLANG}' ${_acg_clang_llvm}); the kernels carry no SPIR-V; "
                   "${_acg_spirv_install}")
    return()
endif()
set(ACG_SPIRV_KERNELS_BUILT ON)
message(STATUS "acg: SPIR-V kernels with ${ACG_SPIRV_CLANG} and ${ACG_LLVM_SPIRV}")

# The one arithmetic (docs/arithmetic.md), as the opencl backend builds the same source
# (-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt, src/backends/opencl/opencl.c): the
# sources say FP_CONTRACT OFF and -ffp-contract=off says it again, and no fast-math option.
# SPIR-V carries no rounding of division and sqrt: the level_zero backend passes
# -cl-fp32-correctly-rounded-divide-sqrt when it builds the module.
# The frontend does not optimize (-disable-llvm-passes, as Intel's opencl-clang does for its
# drivers, which optimize the module themselves): llvm-spirv 14 cannot translate the `freeze`
# that LLVM 14's optimizations introduce, nor lay out the blocks they reorder. -O2 keeps clang
# from marking the functions optnone and noinline.
set(ACG_SPIRV_CLANG_FLAGS -cl-std=CL1.2 -target spir64 -cl-fp32-correctly-rounded-divide-sqrt
    -ffp-contract=off -O2 -Xclang -disable-llvm-passes -Wall -Wextra -emit-llvm)
if(ACG_WERROR)
    list(APPEND ACG_SPIRV_CLANG_FLAGS -Werror)
endif()
# SPIR-V 1.0, which every Level Zero driver takes, validated under the OpenCL 1.2 environment
# the source is written for; every kernel marked ContractionOff, so the driver fuses nothing
# either (llvm-spirv's default marks only the kernels that do floating-point arithmetic).
set(ACG_LLVM_SPIRV_FLAGS --spirv-max-version=1.0 --spirv-fp-contract=off)
set(ACG_SPIRV_VAL_FLAGS --target-env opencl1.2)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/spirv)

function(acg_spirv_module src symbol out_header)
    if(NOT IS_ABSOLUTE ${src})
        set(src ${PROJECT_SOURCE_DIR}/${src})
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    get_filename_component(stem ${out_header} NAME_WE)
    set(bc ${PROJECT_BINARY_DIR}/spirv/${stem}.bc)
    set(spv ${PROJECT_BINARY_DIR}/spirv/${stem}.spv)
    # The module gets its name only once valid, so a failed validation is not up to date at the
    # next build.
    add_custom_command(OUTPUT ${spv}
        BYPRODUCTS ${bc}
        COMMAND ${ACG_SPIRV_CLANG} ${ACG_SPIRV_CLANG_FLAGS} -c ${src} -o ${bc}
        COMMAND ${ACG_LLVM_SPIRV} ${ACG_LLVM_SPIRV_FLAGS} ${bc} -o ${spv}.tmp
        COMMAND ${ACG_SPIRV_VAL} ${ACG_SPIRV_VAL_FLAGS} ${spv}.tmp
        COMMAND ${CMAKE_COMMAND} -E rename ${spv}.tmp ${spv}
        DEPENDS ${src} ${PROJECT_SOURCE_DIR}/cmake/spirv_kernels.cmake
        COMMENT "Compiling ${rel} to SPIR-V"
        VERBATIM)
    add_custom_command(OUTPUT ${out_header}
        COMMAND ${CMAKE_COMMAND} -DINPUT=${spv} -DOUTPUT=${out_header} -DNAME=${symbol}
                -P ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        DEPENDS ${spv} ${PROJECT_SOURCE_DIR}/cmake/embed_binary.cmake
        COMMENT "Embedding ${rel}'s SPIR-V"
        VERBATIM)
endfunction()

# The kernels: "source;header;symbol", one module and one header (generated/<header>.h) each.
set(ACG_SPIRV_EMBEDDED)
set(ACG_SPIRV_MODULES)
foreach(triple "src/core/elementwise.cl;core_kernels_spv;acg__core_kernels_spv"
               "src/model/kernels.cl;model_kernels_spv;acg__model_kernels_spv"
               "tests/test_kernels.cl;test_kernels_spv;tc_test_kernels_spv")
    list(GET triple 0 src)
    list(GET triple 1 out)
    list(GET triple 2 symbol)
    set(hdr ${PROJECT_BINARY_DIR}/generated/${out}.h)
    acg_spirv_module(${src} ${symbol} ${hdr})
    list(APPEND ACG_SPIRV_EMBEDDED ${hdr})
    list(APPEND ACG_SPIRV_MODULES ${PROJECT_BINARY_DIR}/spirv/${out}.spv
        ${PROJECT_SOURCE_DIR}/${src})
endforeach()
# Each header is a source of one target only (two targets must not share one custom command's
# output).
list(GET ACG_SPIRV_EMBEDDED 0 ACG_CORE_SPIRV_EMBEDDED)
list(GET ACG_SPIRV_EMBEDDED 1 ACG_MODEL_SPIRV_EMBEDDED)
list(GET ACG_SPIRV_EMBEDDED 2 ACG_TEST_SPIRV_EMBEDDED)
add_custom_target(acg_spirv_test_kernels DEPENDS ${ACG_TEST_SPIRV_EMBEDDED})
set(ACG_SPIRV_KERNEL_DEFINES ACG_HAVE_SPIRV_KERNELS=1)
