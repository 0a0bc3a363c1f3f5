# Embeds an ASCII text file in C as a NUL-terminated char array:
#   cmake -DINPUT=file -DOUTPUT=file.h -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x[0-9a-f][0-9a-f],){16}" "\\0\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}"
    "/* Generated from ${INPUT} by cmake/embed.cmake; do not edit. */\n"
    "static const char ${NAME}[] = {\n    ${bytes}0x00};\n")
