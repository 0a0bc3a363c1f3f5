# acgKernelTool.cmake — the build-time steps of acg_add_kernels (acgKernels.cmake):
#   cmake -DMODE=opencl -DINPUT=src -DHEADER=acg/kernel.h -DOUTPUT=x.cl -DEMBED=x_cl.h -DNAME=sym
#       the source as OpenCL C with acg/kernel.h inlined (the only header a device compiler
#       sees), written to OUTPUT and embedded in EMBED as `static const unsigned char sym[]`,
#       ending in NUL (unsigned: a comment may hold any UTF-8)
#   cmake -DMODE=binary -DINPUT=file -DOUTPUT=x.h -DNAME=sym
#       a binary (SPIR-V, a fatbin) embedded as `static const unsigned char sym[]`, 8-byte
#       aligned as drivers expect an image in memory
#   cmake -DMODE=source -DINPUT=src -DOUTPUT=x.c -DSET=set -DSTEM=stem
#         -DFORMATS=opencl,spirv,cuda,vulkan
#       the C translation unit: each kernel's implementations, the source itself, and
#       `<set>__kernels_<stem>`, the list of its kernels' definitions
#   -P acgKernelTool.cmake

cmake_policy(VERSION 3.25)

# The bytes of a file as a C initializer, 16 a line.
function(_acg_c_bytes file out_var size_var)
    file(READ "${file}" hex HEX)
    string(LENGTH "${hex}" digits)
    math(EXPR size "${digits} / 2")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)
    string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
    string(REGEX REPLACE "\n    $" "" bytes "${bytes}")
    set(${out_var} "${bytes}" PARENT_SCOPE)
    set(${size_var} ${size} PARENT_SCOPE)
endfunction()

# Writes file only when its content changes, so that what depends on it is not rebuilt.
function(_acg_write file content)
    if(EXISTS "${file}")
        file(READ "${file}" old)
        if(old STREQUAL content)
            return()
        endif()
    endif()
    file(WRITE "${file}" "${content}")
endfunction()

# The kernels of a source: the name after each `ACG_KERNEL(` that begins a line.
function(_acg_kernel_names src out_var)
    file(STRINGS "${src}" lines REGEX "^[ \t]*ACG_KERNEL[ \t]*\\(")
    set(names)
    foreach(l IN LISTS lines)
        if(NOT l MATCHES "^[ \t]*ACG_KERNEL[ \t]*\\([ \t]*([A-Za-z_][A-Za-z0-9_]*)")
            message(FATAL_ERROR "${src}: cannot read the kernel's name in: ${l}")
        endif()
        if(CMAKE_MATCH_1 IN_LIST names)
            message(FATAL_ERROR "${src}: the kernel ${CMAKE_MATCH_1} is defined twice")
        endif()
        list(APPEND names ${CMAKE_MATCH_1})
    endforeach()
    if(NOT names)
        message(FATAL_ERROR "${src}: no line begins with ACG_KERNEL(")
    endif()
    set(${out_var} ${names} PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "opencl")
    file(READ "${INPUT}" text)
    file(READ "${HEADER}" header)
    set(pattern "(^|\n)[ \t]*#[ \t]*include[ \t]*[<\"]acg/kernel\\.h[>\"][^\n]*")
    if(NOT text MATCHES "${pattern}")
        message(FATAL_ERROR "${INPUT} does not include <acg/kernel.h>")
    endif()
    # Where the header was, and the line numbers of the source kept for the compilers' messages.
    string(REGEX REPLACE "${pattern}" "\\1@ACG_KERNEL_H@\n#line @LINE@ \"${INPUT}\"" text
        "${text}")
    string(FIND "${text}" "@ACG_KERNEL_H@" at)
    string(SUBSTRING "${text}" 0 ${at} before)
    string(REGEX MATCHALL "\n" newlines "${before}")
    list(LENGTH newlines line)
    math(EXPR line "${line} + 2")
    string(REPLACE "@LINE@" "${line}" text "${text}")
    string(REPLACE "@ACG_KERNEL_H@" "#line 1 \"acg/kernel.h\"\n${header}" text "${text}")
    _acg_write("${OUTPUT}" "${text}")
    _acg_c_bytes("${OUTPUT}" bytes size)
    string(CONCAT c "/* Generated from ${INPUT} by acgKernelTool.cmake; do not edit. */\n"
        "static const unsigned char ${NAME}[] = {\n    ${bytes}\n    0x00};\n")
    _acg_write("${EMBED}" "${c}")
elseif(MODE STREQUAL "binary")
    _acg_c_bytes("${INPUT}" bytes size)
    if(size EQUAL 0)
        message(FATAL_ERROR "acgKernelTool.cmake: ${INPUT} is empty")
    endif()
    string(CONCAT c "/* Generated from ${INPUT} by acgKernelTool.cmake; do not edit. */\n"
        "_Alignas(8) static const unsigned char ${NAME}[] = {\n    ${bytes}\n};\n")
    _acg_write("${OUTPUT}" "${c}")
elseif(MODE STREQUAL "source")
    _acg_kernel_names("${INPUT}" names)
    string(REPLACE "," ";" formats "${FORMATS}")
    set(c "/* Generated from ${INPUT} by acgKernelTool.cmake; do not edit. */\n")
    string(APPEND c "#include \"acg/acg.h\"\n\n#include \"${STEM}_cl.h\"\n")
    if(spirv IN_LIST formats)
        string(APPEND c "#include \"${STEM}_spv.h\"\n")
    endif()
    if(cuda IN_LIST formats)
        string(APPEND c "#include \"${STEM}_cuda.h\"\n")
    endif()
    if(vulkan IN_LIST formats)
        foreach(k ${names})
            string(APPEND c "#include \"${STEM}_vk_${k}.h\"\n")
        endforeach()
    endif()
    string(APPEND c "\n/* Each kernel's code for the backends that load it (acg_kernel_impl). */\n")
    set(list "")
    foreach(k ${names})
        string(APPEND c "static const acg_kernel_impl ${k}__acg_impls[] = {\n"
            "    {\"opencl\", ACG_KERNEL_FORMAT_OPENCL_C, ${SET}__${STEM}_cl, 0, \"${k}\"},\n")
        if(spirv IN_LIST formats)
            string(APPEND c "    {\"level_zero\", ACG_KERNEL_FORMAT_SPIRV_OPENCL, "
                "${SET}__${STEM}_spv, sizeof ${SET}__${STEM}_spv, \"${k}\"},\n")
        endif()
        if(cuda IN_LIST formats)
            string(APPEND c "    {\"cuda\", ACG_KERNEL_FORMAT_CUDA_IMAGE, ${SET}__${STEM}_cuda, "
                "sizeof ${SET}__${STEM}_cuda, \"${k}\"},\n")
        endif()
        if(vulkan IN_LIST formats)
            string(APPEND c "    {\"vulkan\", ACG_KERNEL_FORMAT_SPIRV_VULKAN, "
                "${SET}__${STEM}_vk_${k}, sizeof ${SET}__${STEM}_vk_${k}, \"main\"},\n")
        endif()
        string(APPEND c "};\n")
        string(APPEND list "    &${k}__acg_desc,\n")
    endforeach()
    list(LENGTH names n)
    string(APPEND c "\n#define ACG_KERNEL_IMPLS 1\n#include \"${INPUT}\"\n\n"
        "static const acg_kernel_desc *const acg__kernels[] = {\n${list}};\n\n"
        "const acg_kernel_desc *const *${SET}__kernels_${STEM}(size_t *n);\n"
        "const acg_kernel_desc *const *${SET}__kernels_${STEM}(size_t *n) {\n"
        "    *n = ${n};\n    return acg__kernels;\n}\n")
    _acg_write("${OUTPUT}" "${c}")
else()
    message(FATAL_ERROR "acgKernelTool.cmake: MODE '${MODE}' is not opencl, binary or source")
endif()
