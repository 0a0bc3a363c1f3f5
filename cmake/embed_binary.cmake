# Embeds a binary file (a fatbin, a SPIR-V module) in C as an 8-byte aligned byte array and its
# size:
#   cmake -DINPUT=file -DOUTPUT=file.h -DNAME=symbol -P embed_binary.cmake
# writes a header defining `const unsigned char NAME[]` and `const size_t NAME_size`. The
# definitions are not static: one translation unit includes the header (the layer's kernel
# definitions), and a static initializer takes the size as `sizeof NAME`, a constant expression.
# 8-byte alignment is what the driver expects of an image in memory (nvcc's own embedding
# aligns its fatbins to 8); a SPIR-V module, 32-bit words, needs 4.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR size "${digits} / 2")
if(size EQUAL 0)
    message(FATAL_ERROR "embed_binary.cmake: ${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 16 bytes a line (CMake's regular expressions have no {16}).
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
string(REGEX REPLACE "\n    $" "" bytes "${bytes}")
string(TOUPPER "ACG_GENERATED_${NAME}_H" guard)
file(WRITE "${OUTPUT}"
    "/* Generated from ${INPUT} by cmake/embed_binary.cmake; do not edit. */\n"
    "#ifndef ${guard}\n"
    "#define ${guard}\n"
    "\n"
    "#include <stddef.h>\n"
    "\n"
    "_Alignas(8) const unsigned char ${NAME}[] = {\n"
    "    ${bytes}\n"
    "};\n"
    "const size_t ${NAME}_size = ${size};\n"
    "\n"
    "#endif /* ${guard} */\n")
