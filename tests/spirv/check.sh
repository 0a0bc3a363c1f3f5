#!/bin/sh
# check.sh SPIRV_VAL SPIRV_DIS MODULE SOURCE [MODULE SOURCE ...] — the layers' SPIR-V modules
# (cmake/spirv_kernels.cmake), each compiled from SOURCE: valid under the OpenCL 1.2 environment,
# and in the one arithmetic (docs/arithmetic.md): every kernel ContractionOff (the driver fuses
# nothing), no mad (a multiply-add the driver may fuse or not), no fma but the ones the source
# writes (more would be a contraction), no native_ or half_ functions and no FPFastMathMode
# (relaxed math). Exits 77 when spirv-dis is missing.
set -u
VAL=$1
DIS=$2
shift 2
if ! command -v "$DIS" >/dev/null 2>&1; then
    echo "spirv-dis not found (install spirv-tools): the modules' arithmetic is not checked"
    exit 77
fi
TMP=${TMPDIR:-/tmp}/acg-spirv.$$
mkdir -p "$TMP" || exit 1
trap 'rm -rf "$TMP"' EXIT
failures=0
checked=0
fail() {
    echo "FAIL: $1"
    failures=$((failures + 1))
}
while [ $# -ge 2 ]; do
    spv=$1
    src=$2
    shift 2
    checked=$((checked + 1))
    before=$failures
    name=$(basename "$spv")
    if ! "$VAL" --target-env opencl1.2 "$spv"; then
        fail "$name is not valid SPIR-V for OpenCL 1.2"
        continue
    fi
    if ! "$DIS" "$spv" -o "$TMP/asm"; then
        fail "$name does not disassemble"
        continue
    fi
    ext='OpExtInst %[^ ]+ %[^ ]+'
    if grep -E "$ext mad( |\$)" "$TMP/asm"; then
        fail "$name has mad: a multiply-add the driver may or may not fuse"
    fi
    if grep -E "$ext (native|half)_" "$TMP/asm"; then
        fail "$name has native_ or half_ functions, whose precision is the driver's"
    fi
    if grep -E "FPFastMathMode" "$TMP/asm"; then
        fail "$name relaxes floating-point math (FPFastMathMode)"
    fi
    n_kernels=0
    # shellcheck disable=SC2013 # the ids are words
    for id in $(sed -n 's/^ *OpEntryPoint Kernel \(%[^ ]*\) .*/\1/p' "$TMP/asm"); do
        n_kernels=$((n_kernels + 1))
        if ! grep -qE "OpExecutionMode $id ContractionOff\$" "$TMP/asm"; then
            fail "$name: kernel $id is not ContractionOff: the driver may fuse a*b+c"
        fi
    done
    if [ "$n_kernels" -eq 0 ]; then
        fail "$name has no kernel"
    fi
    n_fma=$(grep -cE "$ext fma( |\$)" "$TMP/asm")
    n_written=$(grep -oE '(^|[^A-Za-z0-9_])(acg_)?fma[[:space:]]*\(' "$src" | wc -l)
    if [ "$n_fma" -gt "$n_written" ]; then
        fail "$name has $n_fma fma where $(basename "$src") writes $n_written: a contraction"
    fi
    if [ "$failures" -eq "$before" ]; then
        echo "$name: valid; $n_kernels kernels ContractionOff; $n_fma fma ($(basename "$src")" \
            "writes $n_written), no mad, no relaxed math"
    fi
done
if [ "$checked" -eq 0 ] || [ $# -ne 0 ]; then
    fail "usage: check.sh SPIRV_VAL SPIRV_DIS MODULE SOURCE [MODULE SOURCE ...]"
fi
echo "spirv: $checked modules, $failures failures"
[ "$failures" -eq 0 ]
