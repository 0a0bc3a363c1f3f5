#!/bin/sh
# check.sh SOURCE_DIR — acg_add_kernels (cmake/acgKernels.cmake) and its build-time tool
# (cmake/acgKernelTool.cmake) refuse what they must, each naming the cause: a project that
# misuses the function fails to configure, a kernel source the tool cannot read fails its step.
set -u
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
checked=0

# expect NAME NEEDLE COMMAND...: the command fails and its output holds NEEDLE.
expect() {
    name=$1
    needle=$2
    shift 2
    checked=$((checked + 1))
    if "$@" >"$work/out" 2>&1; then
        echo "FAIL: $name: succeeded"
        failures=$((failures + 1))
    elif ! grep -qF -- "$needle" "$work/out"; then
        echo "FAIL: $name: no '$needle' in:"
        cat "$work/out"
        failures=$((failures + 1))
    else
        echo "ok: $name"
    fi
}

cat >"$work/k.acg.c" <<'K'
#include <acg/kernel.h>
ACG_KERNEL(k1, ACG_ELEMENTWISE, ACG_BUF(float, y)) {
    y[acg_id(0)] = 1.0f;
}
K
printf 'int main(void) { return 0; }\n' >"$work/main.c"

# project NAME CALLS...: a project that includes the function and makes the calls.
project() {
    dir=$work/$1
    shift
    mkdir -p "$dir"
    {
        echo "cmake_minimum_required(VERSION 3.25)"
        echo "project(p C)"
        echo "set(ACG_KERNELS_INCLUDE_DIR $src/include)"
        echo "set(ACG_KERNELS_BACKENDS cpu)"
        echo "include($src/cmake/acgKernels.cmake)"
        echo "add_executable(app $work/main.c)"
        for call in "$@"; do
            echo "$call"
        done
    } >"$dir/CMakeLists.txt"
    cmake -S "$dir" -B "$dir/b"
}

expect "not a target" "is not a target" \
    project notarget "acg_add_kernels(nosuch SET s SOURCES $work/k.acg.c)"
expect "set not an identifier" "must be a C identifier" \
    project badset "acg_add_kernels(app SET a/b SOURCES $work/k.acg.c)"
expect "no sources" "give SET <name> SOURCES" project nosources "acg_add_kernels(app SET s)"
expect "a set twice" "is made already" project twice \
    "acg_add_kernels(app SET s SOURCES $work/k.acg.c)" \
    "acg_add_kernels(app SET s SOURCES $work/k.acg.c)"
cp "$work/k.acg.c" "$work/s_kernels.acg.c"
expect "the generated set's name" "not s_kernels" \
    project stem "acg_add_kernels(app SET s SOURCES $work/s_kernels.acg.c)"
expect "no acg/kernel.h" "acgKernels.cmake: ACG_KERNELS_INCLUDE_DIR (" \
    cmake -DACG_KERNELS_INCLUDE_DIR="$work" -P "$src/cmake/acgKernels.cmake"

# The tool, as the build runs it.
tool() {
    cmake "$@" -P "$src/cmake/acgKernelTool.cmake"
}
printf '/* nothing */\n' >"$work/none.acg.c"
expect "no kernel" "no line begins with ACG_KERNEL(" \
    tool -DMODE=source -DINPUT="$work/none.acg.c" -DOUTPUT="$work/o.c" -DSET=s -DSTEM=none \
    -DFORMATS=opencl
cat "$work/k.acg.c" "$work/k.acg.c" >"$work/dup.acg.c"
expect "a kernel twice" "the kernel k1 is defined twice" \
    tool -DMODE=source -DINPUT="$work/dup.acg.c" -DOUTPUT="$work/o.c" -DSET=s -DSTEM=dup \
    -DFORMATS=opencl
printf 'ACG_KERNEL(1bad, ACG_ELEMENTWISE, ACG_BUF(float, y)) {}\n' >"$work/name.acg.c"
expect "an unreadable name" "cannot read the kernel's name" \
    tool -DMODE=source -DINPUT="$work/name.acg.c" -DOUTPUT="$work/o.c" -DSET=s -DSTEM=name \
    -DFORMATS=opencl
grep -v 'include' "$work/k.acg.c" >"$work/noinc.acg.c"
expect "no include of the header" "does not include <acg/kernel.h>" \
    tool -DMODE=opencl -DINPUT="$work/noinc.acg.c" -DHEADER="$src/include/acg/kernel.h" \
    -DOUTPUT="$work/o.cl" -DEMBED="$work/o_cl.h" -DNAME=s
: >"$work/empty.bin"
expect "an empty binary" "is empty" \
    tool -DMODE=binary -DINPUT="$work/empty.bin" -DOUTPUT="$work/o.h" -DNAME=s
expect "an unknown mode" "is not opencl, binary or source" tool -DMODE=nosuch

echo "acg_add_kernels: $checked refusals checked, $failures failures"
[ "$failures" -eq 0 ]
