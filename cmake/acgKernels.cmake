# acgKernels.cmake — acg_add_kernels(): kernels written once (include/acg/kernel.h), built for
# every backend the acg in use has, with the code that registers them. Installed with acg's CMake
# package (find_package(acg) includes it) and used by acg's own build for its kernels; the
# guide is docs/kernels.md.
#
#   acg_add_kernels(<target> SET <name> SOURCES <file>... [DESCS_ONLY])
#
# For each source (a file of ACG_KERNEL definitions, each `ACG_KERNEL(` at the start of its
# line), at build time:
#   - its C, compiled into <target> with -ffp-contract=off: the cpu backend's functions and each
#     kernel's acg_kernel_desc;
#   - its OpenCL C, acg/kernel.h inlined, embedded as text (an impls entry for "opencl");
#   - where clang, llvm-spirv (of one LLVM version) and spirv-val are found and the acg in use
#     has level_zero: a SPIR-V module compiled from that OpenCL C and validated (an entry for
#     "level_zero");
#   - where nvcc is found and the acg in use has cuda: a fatbin for ACG_CUDA_ARCHS (an entry for
#     "cuda");
#   - where the source has GLSL beside it (<stem>.vulkan.glsl), glslangValidator and spirv-val
#     are found and the acg in use has vulkan: a SPIR-V module of each kernel (an entry for
#     "vulkan").
# A missing compiler leaves its backend out with a message at configure time; the kernels then
# say ACG_ERR_UNSUPPORTED on that backend. Generated into <binary dir>/acg_kernels/<name>, which
# is added to <target>'s private include path, with the header <name>_kernels.h:
#   acg_status <name>_register_kernels(void);    the kernels as the set <name> (each
#                                                 "<name>/<kernel>": acg_kernel_register_set)
#   acg_status <name>_unregister_kernels(void);
#   size_t <name>_kernel_count(void);             the definitions, to register otherwise
#   const acg_kernel_desc *<name>_kernel_desc(size_t i);
# DESCS_ONLY leaves out the two registration functions. <name> is a C identifier.
#
# Set before including this file (find_package(acg) sets them):
#   ACG_KERNELS_INCLUDE_DIR  the directory holding acg/kernel.h
#   ACG_KERNELS_BACKENDS     the backends of the acg in use (cpu;opencl;cuda;level_zero)
# Defines ACG_KERNELS_SPIRV and ACG_KERNELS_CUDA (ON when that code is built), and the tools
# and flags acg's own build shares: ACG_SPIRV_CLANG, ACG_SPIRV_CLANG_FLAGS, ACG_LLVM_SPIRV,
# ACG_LLVM_SPIRV_FLAGS, ACG_SPIRV_VAL, ACG_SPIRV_VAL_FLAGS, ACG_SPIRV_DIS, ACG_NVCC,
# ACG_CUDA_NVCC_FLAGS, ACG_CUDA_GENCODE; and ACG_KERNEL_TOOL, the build-time script.
# Once per directory: what it finds is set in the including directory's scope, and a sibling
# directory's find_package(acg) must find it again.
include_guard(DIRECTORY)
set(ACG_KERNEL_TOOL ${CMAKE_CURRENT_LIST_DIR}/acgKernelTool.cmake)
if(NOT ACG_KERNELS_INCLUDE_DIR OR NOT EXISTS ${ACG_KERNELS_INCLUDE_DIR}/acg/kernel.h)
    message(FATAL_ERROR "acgKernels.cmake: ACG_KERNELS_INCLUDE_DIR ('${ACG_KERNELS_INCLUDE_DIR}') "
                        "holds no acg/kernel.h")
endif()

# ---- SPIR-V for level_zero: clang and llvm-spirv of one LLVM version, and spirv-val ----------
set(ACG_KERNELS_SPIRV OFF)
set(_acg_spirv_install "install clang-14, llvm-spirv-14 and spirv-tools (Debian)")
if(level_zero IN_LIST ACG_KERNELS_BACKENDS)
    find_program(ACG_LLVM_SPIRV NAMES llvm-spirv-14 llvm-spirv
        DOC "llvm-spirv, LLVM bitcode to SPIR-V (the level_zero backend's kernels)")
    find_program(ACG_SPIRV_VAL NAMES spirv-val DOC "spirv-val, the SPIR-V validator (spirv-tools)")
    find_program(ACG_SPIRV_DIS NAMES spirv-dis DOC "spirv-dis, the SPIR-V disassembler")
    set(_acg_llvm "")
    if(ACG_LLVM_SPIRV AND ACG_SPIRV_VAL)
        execute_process(COMMAND ${ACG_LLVM_SPIRV} --version OUTPUT_VARIABLE _acg_out ERROR_QUIET)
        if(_acg_out MATCHES "LLVM version ([0-9]+)")
            set(_acg_llvm ${CMAKE_MATCH_1})
        endif()
    endif()
    # clang of llvm-spirv's own LLVM version: a newer clang's bitcode is unreadable to it.
    set(_acg_clang_llvm "")
    if(_acg_llvm)
        find_program(ACG_SPIRV_CLANG NAMES clang-${_acg_llvm} clang
            DOC "clang of llvm-spirv's LLVM version, OpenCL C to LLVM bitcode")
        if(ACG_SPIRV_CLANG)
            execute_process(COMMAND ${ACG_SPIRV_CLANG} --version OUTPUT_VARIABLE _acg_out
                ERROR_QUIET)
            if(_acg_out MATCHES "clang version ([0-9]+)")
                set(_acg_clang_llvm ${CMAKE_MATCH_1})
            endif()
        endif()
    endif()
    if(_acg_llvm AND _acg_clang_llvm STREQUAL _acg_llvm)
        set(ACG_KERNELS_SPIRV ON)
        message(STATUS "acg kernels: SPIR-V with ${ACG_SPIRV_CLANG} and ${ACG_LLVM_SPIRV}")
    else()
        message(STATUS "acg kernels: no SPIR-V for level_zero (llvm-spirv '${ACG_LLVM_SPIRV}', "
                       "clang '${ACG_SPIRV_CLANG}', spirv-val '${ACG_SPIRV_VAL}'); "
                       "${_acg_spirv_install}")
    endif()
endif()
# The one arithmetic (docs/arithmetic.md), as the opencl backend builds the same text
# (-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt): FP_CONTRACT OFF in the source and
# -ffp-contract=off again, no fast-math. SPIR-V carries no rounding of division and sqrt: the
# level_zero backend passes -cl-fp32-correctly-rounded-divide-sqrt when it builds the module.
# The frontend does not optimize (-disable-llvm-passes, as Intel's opencl-clang does for its
# drivers, which optimize the module themselves): llvm-spirv 14 cannot translate the `freeze`
# that LLVM 14's optimizations introduce, nor lay out the blocks they reorder. -O2 keeps clang
# from marking the functions optnone and noinline.
set(ACG_SPIRV_CLANG_FLAGS -x cl -cl-std=CL1.2 -target spir64
    -cl-fp32-correctly-rounded-divide-sqrt -ffp-contract=off -O2 -Xclang -disable-llvm-passes
    -Wall -Wextra -emit-llvm)
if(ACG_WERROR)
    list(APPEND ACG_SPIRV_CLANG_FLAGS -Werror)
endif()
# SPIR-V 1.0, which every Level Zero driver takes, validated under the OpenCL 1.2 environment
# the source is written for; every kernel marked ContractionOff, so the driver fuses nothing
# either (llvm-spirv's default marks only the kernels that do floating-point arithmetic).
set(ACG_LLVM_SPIRV_FLAGS --spirv-max-version=1.0 --spirv-fp-contract=off)
set(ACG_SPIRV_VAL_FLAGS --target-env opencl1.2)

# ---- SPIR-V for vulkan: glslangValidator and spirv-val ------------------------------------
# A source's Vulkan code is GLSL written beside it (<stem>.vulkan.glsl: acg/kernel.glsl says
# why), each kernel compiled to a module of its own and validated for Vulkan 1.2. A source
# without one has no vulkan code.
set(ACG_KERNELS_VULKAN OFF)
if(vulkan IN_LIST ACG_KERNELS_BACKENDS)
    find_program(ACG_GLSLANG NAMES glslangValidator
        DOC "glslangValidator, GLSL to SPIR-V (the vulkan backend's kernels)")
    find_program(ACG_SPIRV_VAL NAMES spirv-val DOC "spirv-val, the SPIR-V validator (spirv-tools)")
    if(ACG_GLSLANG AND ACG_SPIRV_VAL)
        set(ACG_KERNELS_VULKAN ON)
        message(STATUS "acg kernels: SPIR-V for vulkan with ${ACG_GLSLANG}")
    else()
        message(STATUS "acg kernels: no SPIR-V for vulkan (glslangValidator '${ACG_GLSLANG}', "
                       "spirv-val '${ACG_SPIRV_VAL}'); install glslang-tools and spirv-tools")
    endif()
endif()
# -g0: no debug information in the embedded modules.
set(ACG_GLSLANG_FLAGS --target-env vulkan1.2 -S comp -g0 --quiet)
set(ACG_SPIRV_VAL_VULKAN_FLAGS --target-env vulkan1.2)

# ---- fatbins for cuda ---------------------------------------------------------------------
set(ACG_KERNELS_CUDA OFF)
if(cuda IN_LIST ACG_KERNELS_BACKENDS)
    find_program(ACG_NVCC NAMES nvcc HINTS ${CUDAToolkit_NVCC_EXECUTABLE} ENV CUDA_PATH
        PATHS /usr/local/cuda PATH_SUFFIXES bin DOC "nvcc, the cuda backend's kernels")
    if(ACG_NVCC)
        set(ACG_KERNELS_CUDA ON)
    else()
        message(STATUS "acg kernels: nvcc not found; no cuda code (install the CUDA toolkit or "
                       "set ACG_NVCC)")
    endif()
endif()
# Nothing contracted, division and square root correctly rounded, subnormals kept: acg/kernel.h
# writes those operations as intrinsics, and these flags make sure of the rest. Never
# --use_fast_math.
set(ACG_CUDA_NVCC_FLAGS --fmad=false -prec-div=true -prec-sqrt=true -ftz=false -O3)
# Real code for each architecture that nvcc knows, and PTX for one (compute_90 by default), which
# the driver compiles for a newer GPU.
set(ACG_CUDA_ARCHS "80;90;100" CACHE STRING "GPU architectures the cuda kernels are built for")
set(ACG_CUDA_PTX_ARCH "90" CACHE STRING "The architecture whose PTX the fatbins also carry")
set(ACG_CUDA_GENCODE)
if(ACG_KERNELS_CUDA)
    execute_process(COMMAND ${ACG_NVCC} --list-gpu-arch
        OUTPUT_VARIABLE _acg_nvcc_archs RESULT_VARIABLE _acg_nvcc_rc ERROR_QUIET)
    set(_acg_cuda_built)
    foreach(arch ${ACG_CUDA_ARCHS})
        if(_acg_nvcc_rc EQUAL 0 AND NOT _acg_nvcc_archs MATCHES "compute_${arch}([^0-9]|$)")
            message(STATUS "acg kernels: ${ACG_NVCC} has no sm_${arch}; built without it")
            continue()
        endif()
        list(APPEND ACG_CUDA_GENCODE -gencode arch=compute_${arch},code=sm_${arch})
        list(APPEND _acg_cuda_built ${arch})
    endforeach()
    if(NOT _acg_cuda_built)
        message(FATAL_ERROR "acg kernels: ${ACG_NVCC} builds none of ACG_CUDA_ARCHS "
                            "(${ACG_CUDA_ARCHS})")
    endif()
    set(_acg_ptx compute_${ACG_CUDA_PTX_ARCH})
    list(APPEND ACG_CUDA_GENCODE -gencode arch=${_acg_ptx},code=${_acg_ptx})
    string(REPLACE ";" ", sm_" _acg_cuda_built "${_acg_cuda_built}")
    message(STATUS "acg kernels: cuda code for sm_${_acg_cuda_built}, and PTX ${_acg_ptx}")
endif()

# ---- the function -------------------------------------------------------------------------

# A module of one source embedded as a C array: ${base}.<ext> becomes ${base}_<suffix>.h, the
# array ${set}__${stem}_<suffix>, an impls entry of <format>. A macro, so that it appends to the
# caller's formats and generated.
macro(_acg_kernels_embed ext suffix format)
    add_custom_command(OUTPUT ${base}_${suffix}.h
        COMMAND ${CMAKE_COMMAND} -DMODE=binary -DINPUT=${base}.${ext}
                -DOUTPUT=${base}_${suffix}.h -DNAME=${set}__${stem}_${suffix} -P ${ACG_KERNEL_TOOL}
        DEPENDS ${base}.${ext} ${ACG_KERNEL_TOOL}
        VERBATIM)
    list(APPEND formats ${format})
    list(APPEND generated ${base}_${suffix}.h)
endmacro()


function(acg_add_kernels target)
    cmake_parse_arguments(PARSE_ARGV 1 arg "DESCS_ONLY" "SET" "SOURCES")
    if(NOT TARGET ${target})
        message(FATAL_ERROR "acg_add_kernels: '${target}' is not a target")
    endif()
    if(NOT arg_SET MATCHES "^[A-Za-z_][A-Za-z0-9_]*$" OR arg_SET MATCHES "/")
        message(FATAL_ERROR "acg_add_kernels(${target}): SET '${arg_SET}' must be a C identifier")
    endif()
    if(NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR "acg_add_kernels(${target}): give SET <name> SOURCES <file>... "
                            "(unparsed: ${arg_UNPARSED_ARGUMENTS})")
    endif()
    set(set ${arg_SET})
    # A set is one call: a second would rewrite the set's list without the first call's kernels.
    get_property(sets GLOBAL PROPERTY ACG_KERNEL_SETS)
    if(set IN_LIST sets)
        message(FATAL_ERROR "acg_add_kernels(${target}): the set '${set}' is made already; give "
                            "one call every source of a set")
    endif()
    set_property(GLOBAL APPEND PROPERTY ACG_KERNEL_SETS ${set})
    set(out ${CMAKE_CURRENT_BINARY_DIR}/acg_kernels/${set})
    file(MAKE_DIRECTORY ${out})
    set(header ${ACG_KERNELS_INCLUDE_DIR}/acg/kernel.h)
    set(generated)
    set(stems)
    foreach(src ${arg_SOURCES})
        get_filename_component(src ${src} ABSOLUTE)
        get_filename_component(stem ${src} NAME_WE)
        if(NOT stem MATCHES "^[A-Za-z_][A-Za-z0-9_]*$" OR stem IN_LIST stems
           OR stem STREQUAL "${set}_kernels")
            message(FATAL_ERROR "acg_add_kernels(${target}): ${src}: a source's name up to its "
                                "first dot must be a C identifier, once per set, and not "
                                "${set}_kernels (the generated set's)")
        endif()
        list(APPEND stems ${stem})
        set(base ${out}/${stem})
        set(formats opencl)
        # The OpenCL C, acg/kernel.h inlined: the text the opencl backend builds at run time.
        add_custom_command(OUTPUT ${base}.cl ${base}_cl.h
            COMMAND ${CMAKE_COMMAND} -DMODE=opencl -DINPUT=${src} -DHEADER=${header}
                    -DOUTPUT=${base}.cl -DEMBED=${base}_cl.h -DNAME=${set}__${stem}_cl
                    -P ${ACG_KERNEL_TOOL}
            DEPENDS ${src} ${header} ${ACG_KERNEL_TOOL}
            COMMENT "acg kernels: ${stem} as OpenCL C"
            VERBATIM)
        list(APPEND generated ${base}_cl.h)
        if(ACG_KERNELS_SPIRV)
            # The module gets its name only once valid, so a failed validation is not up to date
            # at the next build.
            add_custom_command(OUTPUT ${base}.spv
                BYPRODUCTS ${base}.bc
                COMMAND ${ACG_SPIRV_CLANG} ${ACG_SPIRV_CLANG_FLAGS} -c ${base}.cl -o ${base}.bc
                COMMAND ${ACG_LLVM_SPIRV} ${ACG_LLVM_SPIRV_FLAGS} ${base}.bc -o ${base}.spv.tmp
                COMMAND ${ACG_SPIRV_VAL} ${ACG_SPIRV_VAL_FLAGS} ${base}.spv.tmp
                COMMAND ${CMAKE_COMMAND} -E rename ${base}.spv.tmp ${base}.spv
                DEPENDS ${base}.cl
                COMMENT "acg kernels: ${stem} as SPIR-V"
                VERBATIM)
            _acg_kernels_embed(spv spv spirv)
        endif()
        get_filename_component(dir ${src} DIRECTORY)
        set(glsl ${dir}/${stem}.vulkan.glsl)
        if(ACG_KERNELS_VULKAN AND EXISTS ${glsl})
            # One module per kernel: the kernels' names as the tool reads them.
            file(STRINGS ${src} lines REGEX "^[ \t]*ACG_KERNEL[ \t]*\\(")
            set(vk_names)
            foreach(l IN LISTS lines)
                if(l MATCHES "^[ \t]*ACG_KERNEL[ \t]*\\([ \t]*([A-Za-z_][A-Za-z0-9_]*)")
                    list(APPEND vk_names ${CMAKE_MATCH_1})
                endif()
            endforeach()
            foreach(k ${vk_names})
                add_custom_command(OUTPUT ${base}_${k}.vk.spv
                    COMMAND ${ACG_GLSLANG} ${ACG_GLSLANG_FLAGS} -DACG_VK_${k}=1
                            -I${ACG_KERNELS_INCLUDE_DIR} -o ${base}_${k}.vk.spv.tmp ${glsl}
                    COMMAND ${ACG_SPIRV_VAL} ${ACG_SPIRV_VAL_VULKAN_FLAGS} ${base}_${k}.vk.spv.tmp
                    COMMAND ${CMAKE_COMMAND} -E rename ${base}_${k}.vk.spv.tmp ${base}_${k}.vk.spv
                    DEPENDS ${glsl} ${ACG_KERNELS_INCLUDE_DIR}/acg/kernel.glsl
                    COMMENT "acg kernels: ${stem}'s ${k} as SPIR-V for Vulkan"
                    VERBATIM)
                add_custom_command(OUTPUT ${base}_vk_${k}.h
                    COMMAND ${CMAKE_COMMAND} -DMODE=binary -DINPUT=${base}_${k}.vk.spv
                            -DOUTPUT=${base}_vk_${k}.h -DNAME=${set}__${stem}_vk_${k}
                            -P ${ACG_KERNEL_TOOL}
                    DEPENDS ${base}_${k}.vk.spv ${ACG_KERNEL_TOOL}
                    VERBATIM)
                list(APPEND generated ${base}_vk_${k}.h)
            endforeach()
            list(APPEND formats vulkan)
        endif()
        if(ACG_KERNELS_CUDA)
            add_custom_command(OUTPUT ${base}.fatbin
                COMMAND ${ACG_NVCC} -x cu -fatbin ${ACG_CUDA_NVCC_FLAGS} ${ACG_CUDA_GENCODE}
                        -I${ACG_KERNELS_INCLUDE_DIR} -o ${base}.fatbin ${src}
                DEPENDS ${src} ${header}
                COMMENT "acg kernels: ${stem} as a fatbin"
                VERBATIM)
            _acg_kernels_embed(fatbin cuda cuda)
        endif()
        # The C: the source included after each kernel's implementations (its names are read
        # from the source at build time).
        string(REPLACE ";" "," formats_arg "${formats}")
        add_custom_command(OUTPUT ${base}.c
            COMMAND ${CMAKE_COMMAND} -DMODE=source -DINPUT=${src} -DOUTPUT=${base}.c
                    -DSET=${set} -DSTEM=${stem} -DFORMATS=${formats_arg} -P ${ACG_KERNEL_TOOL}
            DEPENDS ${src} ${ACG_KERNEL_TOOL}
            COMMENT "acg kernels: ${stem}'s definitions"
            VERBATIM)
        set_source_files_properties(${base}.c PROPERTIES
            COMPILE_OPTIONS "$<$<C_COMPILER_ID:GNU,Clang,AppleClang>:-ffp-contract=off>"
            OBJECT_DEPENDS "${src};${header}")
        list(APPEND generated ${base}.c)
    endforeach()
    # The set: its definitions in order, and its registration.
    set(decls "")
    set(count "")
    set(pick "")
    foreach(stem ${stems})
        string(APPEND decls "const acg_kernel_desc *const *${set}__kernels_${stem}(size_t *n);\n")
        string(APPEND count "    ${set}__kernels_${stem}(&n);\n    total += n;\n")
        string(APPEND pick "    list = ${set}__kernels_${stem}(&n);\n"
                           "    if (i < n) {\n        return list[i];\n    }\n    i -= n;\n")
    endforeach()
    set(register_h "")
    set(register_c "")
    if(NOT arg_DESCS_ONLY)
        string(CONCAT register_h
            "/* Registers the kernels as the set \"${set}\" (acg_kernel_register_set: each one\n"
            " * \"${set}/<kernel>\"), all or nothing; ACG_ERR_OUT_OF_MEMORY when even the list\n"
            " * cannot be made. */\n"
            "acg_status ${set}_register_kernels(void);\n"
            "/* acg_kernel_unregister_set(\"${set}\"). */\n"
            "acg_status ${set}_unregister_kernels(void);\n")
        string(CONCAT register_c
            "acg_status ${set}_register_kernels(void) {\n"
            "    const size_t n = ${set}_kernel_count();\n"
            "    acg_kernel_desc *d = malloc(n * sizeof *d);\n"
            "    if (d == NULL) {\n        return ACG_ERR_OUT_OF_MEMORY;\n    }\n"
            "    for (size_t i = 0; i < n; i++) {\n        d[i] = *${set}_kernel_desc(i);\n    }\n"
            "    const acg_status st = acg_kernel_register_set(\"${set}\", d, n);\n"
            "    free(d);\n    return st;\n}\n\n"
            "acg_status ${set}_unregister_kernels(void) {\n"
            "    return acg_kernel_unregister_set(\"${set}\");\n}\n")
    endif()
    string(TOUPPER "${set}_KERNELS_H" guard)
    file(CONFIGURE OUTPUT ${out}/${set}_kernels.h CONTENT
"/* Generated by acg_add_kernels(): the kernels of the set \"${set}\"; do not edit. */
#ifndef ${guard}
#define ${guard}

#include <stddef.h>

#include <acg/acg.h>

#ifdef __cplusplus
extern \"C\" {
#endif

${register_h}/* The kernels' definitions, their implementations included, in the sources' order. */
size_t ${set}_kernel_count(void);
const acg_kernel_desc *${set}_kernel_desc(size_t i); /* NULL past the count */

#ifdef __cplusplus
}
#endif

#endif /* ${guard} */
")
    file(CONFIGURE OUTPUT ${out}/${set}_kernels.c CONTENT
"/* Generated by acg_add_kernels(): the kernel set \"${set}\"; do not edit. */
#include <stdlib.h>

#include \"${set}_kernels.h\"

${decls}
size_t ${set}_kernel_count(void) {
    size_t n = 0, total = 0;
${count}    return total;
}

const acg_kernel_desc *${set}_kernel_desc(size_t i) {
    const acg_kernel_desc *const *list;
    size_t n = 0;
${pick}    return NULL;
}

${register_c}")
    target_sources(${target} PRIVATE ${generated} ${out}/${set}_kernels.c)
    target_include_directories(${target} PRIVATE ${out})
endfunction()
