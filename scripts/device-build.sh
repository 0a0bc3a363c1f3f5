#!/usr/bin/env bash
# device-build.sh — builds libacg.a, the acg tool and (when cmocka is found) the cmocka tests with
# a plain C compiler, for a machine without CMake (the lent GPU machine may have none).
#
#   scripts/device-build.sh [--cuda auto|on|off] [--tests auto|on|off] [--jobs N] BUILD_DIR
#
# It mirrors CMakeLists.txt's Release build, with its globs, so files added to a layer are
# picked up: the same per-layer include paths, the same defines and flags, the embedded OpenCL C
# headers (cmake/embed.cmake's shape) and, with --cuda, the CUDA fatbins built by nvcc from the
# .cu files and embedded as aligned byte arrays. The opencl backend is never built here. A .cu
# file that is missing, or nvcc missing or failing, means no fatbin: the build goes on without
# ACG_HAVE_CUDA_KERNELS and says so. No cuda backend sources (src/backends/cuda/*.c) means no
# ACG_WITH_CUDA.
#
# Writes BUILD_DIR/{libacg.a, libacg_tool_support.a, libacg_bench.a, acg, tests/test_*,
# generated/*.h} and BUILD_DIR/build-info.txt (one "key=value" a line: cuda, fatbins, tests,
# objects), which scripts/device-check.sh reads.
# Environment: CC (default cc), NVCC (default nvcc on PATH, then /usr/local/cuda/bin/nvcc),
# ACG_NVCC_FLAGS (replaces the default nvcc flags), CMOCKA_INCLUDE_DIR and CMOCKA_LIBRARY (a
# cmocka outside the system's paths; the tests get its folder as their run path).
# Exit: 0 built, 1 a step failed, 2 bad arguments.
set -euo pipefail

usage() {
    sed -n '4p' "$0" | sed 's/^#   /usage: /' >&2
    exit 2
}

cuda=auto
tests=auto
jobs=$(nproc 2>/dev/null || echo 2)
build=
while (($#)); do
    case $1 in
    --cuda) cuda=${2:?--cuda needs auto, on or off}; shift 2 ;;
    --tests) tests=${2:?--tests needs auto, on or off}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs N}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "device-build: unknown option $1" >&2; usage ;;
    *) [[ -z $build ]] || usage; build=$1; shift ;;
    esac
done
[[ -n $build ]] || usage
case $cuda in auto | on | off) ;; *) usage ;; esac
case $tests in auto | on | off) ;; *) usage ;; esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
mkdir -p "$build/generated" "$build/obj" "$build/tests"
build=$(cd "$build" && pwd)
gen=$build/generated
CC=${CC:-cc}

say() { printf 'device-build: %s\n' "$*"; }
die() { printf 'device-build: %s\n' "$*" >&2; exit 1; }

# ---- embedding ---------------------------------------------------------------------------------

# Writes the bytes of $1 as hex, one byte a line ("2f"), for the embedders below.
hex_bytes() {
    od -An -v -tx1 "$1" | tr -s ' \n' '\n' | sed '/^$/d'
}

# Formats hex bytes on stdin as cmake/embed.cmake does: "0x2f," each, all on one line (its
# 16-a-line regex matches nothing in CMake's regex dialect, so the array is one line there too).
c_bytes() {
    awk '{ printf "0x%s,", $1 }'
}

# $1 text file, $2 header, $3 symbol: a NUL-terminated char array, as cmake/embed.cmake writes.
embed_text() {
    {
        printf '/* Generated from %s by scripts/device-build.sh; do not edit. */\n' "$root/$1"
        printf 'static const char %s[] = {\n    ' "$3"
        hex_bytes "$1" | c_bytes
        printf '0x00};\n'
    } >"$2.tmp"
    mv "$2.tmp" "$2"
}

# $1 binary file, $2 header, $3 symbol: an 8-byte aligned byte array and its size, in the shape
# cmake/embed_binary.cmake writes (an include guard, 16 bytes a line).
embed_binary() {
    local n guard
    n=$(wc -c <"$1")
    n=${n//[[:space:]]/}
    guard=$(printf 'ACG_GENERATED_%s_H' "$3" | tr '[:lower:]' '[:upper:]')
    {
        printf '/* Generated from %s by scripts/device-build.sh; do not edit. */\n' "$1"
        printf '#ifndef %s\n#define %s\n\n#include <stddef.h>\n\n' "$guard" "$guard"
        printf '_Alignas(8) const unsigned char %s[] = {\n    ' "$3"
        hex_bytes "$1" |
            awk 'NR > 1 && (NR - 1) % 16 == 0 { printf "\n    " } { printf "0x%s,", $1 }'
        printf '\n};\nconst size_t %s_size = %s;\n\n#endif /* %s */\n' "$3" "$n" "$guard"
    } >"$2.tmp"
    mv "$2.tmp" "$2"
}

# The "input;header-name;symbol" triples the CMake files list for an extension ($1: cl or cu),
# one a line: read from the CMake files, so that a kernel source added there is embedded here.
# The SPIR-V modules (*_spv, cmake/spirv_kernels.cmake) are the level_zero backend's, not built
# here.
cmake_triples() {
    cat CMakeLists.txt cmake/*.cmake tests/CMakeLists.txt 2>/dev/null |
        grep -oE "\"(src|tests)/[A-Za-z0-9_/.-]+\\.$1;[A-Za-z0-9_]+;[A-Za-z0-9_]+\"" |
        grep -v '_spv;' | tr -d '"' | sort -u || true
}

# OpenCL C is embedded whether or not the opencl backend is built: the kernel definitions hold it.
n_cl=0
while IFS=';' read -r in out sym; do
    [[ -n $in ]] || continue
    [[ -f $in ]] || die "$in (listed in the CMake files) is missing"
    embed_text "$in" "$gen/$out.h" "$sym"
    n_cl=$((n_cl + 1))
done < <(cmake_triples cl)
((n_cl > 0)) || die "found no OpenCL C sources to embed in CMakeLists.txt"
say "embedded $n_cl OpenCL C source(s)"

# ---- CUDA --------------------------------------------------------------------------------------

with_cuda=0
cuda_sources=()
for f in src/backends/cuda/*.c; do [[ -f $f ]] && cuda_sources+=("$f"); done
if [[ $cuda != off ]]; then
    if ((${#cuda_sources[@]} > 0)); then
        with_cuda=1
    elif [[ $cuda == on ]]; then
        say "no cuda backend sources (src/backends/cuda/*.c): building without ACG_WITH_CUDA"
    fi
fi

NVCC=${NVCC:-$(command -v nvcc || true)}
[[ -n $NVCC || ! -x /usr/local/cuda/bin/nvcc ]] || NVCC=/usr/local/cuda/bin/nvcc

# nvcc's options as cmake/cuda_kernels.cmake sets them (ACG_CUDA_NVCC_FLAGS, and -gencode for
# each of ACG_CUDA_ARCHS that this nvcc knows plus PTX for ACG_CUDA_PTX_ARCH), or these defaults:
# nothing contracted, division and square root correctly rounded, subnormals kept, so the
# kernels match the cpu backend bit for bit; sm_90 is the H200.
cmake_set() {
    sed -n "s/^set($1 \"\{0,1\}\([^\")]*\)\"\{0,1\}.*)$/\1/p" cmake/cuda_kernels.cmake 2>/dev/null |
        head -n 1
}
nvcc_options() {
    local flags archs ptx known arch
    flags=$(cmake_set ACG_CUDA_NVCC_FLAGS)
    archs=$(cmake_set ACG_CUDA_ARCHS)
    ptx=$(cmake_set ACG_CUDA_PTX_ARCH)
    printf '%s\n' "${flags:---fmad=false -prec-div=true -prec-sqrt=true -ftz=false -O3}"
    known=$("$NVCC" --list-gpu-arch 2>/dev/null || true)
    for arch in ${archs//;/ }; do
        # An architecture this nvcc lacks is left out, as cmake/cuda_kernels.cmake does.
        [[ -z $known || $'\n'$known$'\n' == *$'\n'"compute_$arch"$'\n'* ]] || continue
        printf -- '-gencode arch=compute_%s,code=sm_%s\n' "$arch" "$arch"
    done
    [[ -n $archs ]] || printf -- '-gencode arch=compute_90,code=sm_90\n'
    printf -- '-gencode arch=compute_%s,code=compute_%s\n' "${ptx:-90}" "${ptx:-90}"
}
nvcc_flags=()
if [[ -n ${ACG_NVCC_FLAGS:-} ]]; then
    read -r -a nvcc_flags <<<"$ACG_NVCC_FLAGS"
elif [[ -n $NVCC ]]; then
    read -r -a nvcc_flags <<<"$(nvcc_options | tr '\n' ' ')"
fi

# The fatbins: each .cu with its header and symbol, from the CMake files when they list them,
# else the kernel files of this layout.
fatbin_triples() {
    local t
    t=$(cmake_triples cu)
    if [[ -n $t ]]; then
        printf '%s\n' "$t"
    else
        printf '%s\n' "src/core/elementwise.cu;core_kernels_cuda;acg__core_kernels_fatbin" \
            "src/model/kernels.cu;model_kernels_cuda;acg__model_kernels_fatbin" \
            "tests/cuda/test_kernels.cu;test_kernels_cuda;tc_test_kernels_fatbin"
    fi
}

n_fatbin=0
n_fatbin_wanted=0
fatbin_notes=()
if ((with_cuda)) || [[ $cuda == on ]]; then
    while IFS=';' read -r in out sym; do
        [[ -n $in ]] || continue
        n_fatbin_wanted=$((n_fatbin_wanted + 1))
        if [[ ! -f $in ]]; then
            fatbin_notes+=("$in missing")
            continue
        fi
        if [[ -z $NVCC ]]; then
            fatbin_notes+=("no nvcc for $in")
            continue
        fi
        fb=$build/obj/$out.fatbin
        echo "$NVCC -fatbin ${nvcc_flags[*]} -o $fb $in" >"$build/obj/$out.nvcc.log"
        if ! "$NVCC" -fatbin "${nvcc_flags[@]}" -o "$fb" "$in" >>"$build/obj/$out.nvcc.log" 2>&1
        then
            cat "$build/obj/$out.nvcc.log" >&2
            fatbin_notes+=("nvcc failed on $in")
            continue
        fi
        embed_binary "$fb" "$gen/$out.h" "$sym"
        n_fatbin=$((n_fatbin + 1))
    done < <(fatbin_triples)
fi
have_kernels=0
if ((n_fatbin > 0 && n_fatbin == n_fatbin_wanted)); then
    have_kernels=1
    say "built $n_fatbin CUDA fatbin(s) with $NVCC"
elif ((n_fatbin_wanted > 0)); then
    say "no CUDA fatbins (${fatbin_notes[*]:-}): building without ACG_HAVE_CUDA_KERNELS"
fi

# The toolkit's headers, for a backend that includes cuda.h or cudaTypedefs.h.
cuda_includes=()
if ((with_cuda)) && [[ -n $NVCC ]]; then
    tk=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
    for d in "$tk/include" "$tk/targets/$(uname -m)-linux/include"; do
        [[ -f $d/cuda.h ]] && cuda_includes+=("-I$d")
    done
fi

# ---- flags: CMakeLists.txt's Release build -----------------------------------------------------

cflags=(-std=c11 -O3 -DNDEBUG -fPIC -Wall -Wextra -Wpedantic -ffp-contract=off -pthread)
lib_defs=(-D_POSIX_C_SOURCE=200809L -DACG_BUILDING=1 -DACG_WITH_CPU=1)
((with_cuda)) && lib_defs+=(-DACG_WITH_CUDA=1)
((have_kernels)) && lib_defs+=(-DACG_HAVE_CUDA_KERNELS=1)
lib_flags=("${cflags[@]}" -fvisibility=hidden "${lib_defs[@]}" -Iinclude)
inc_core=(-Isrc "-I$gen" "${cuda_includes[@]}")
inc_engine=(-Isrc/core/export -Isrc/engine)
inc_model=(-Isrc/core/export -Isrc/model "-I$gen")
inc_library=(-Isrc/core/export -Isrc/engine -Isrc/model)
libs=(-lm -pthread -ldl)

# ---- parallel compiles -------------------------------------------------------------------------

failed=0
running=0
reap() {
    if ! wait -n; then failed=1; fi
    running=$((running - 1))
}
# $1 source, $2 object, then the compiler's flags.
compile() {
    local src=$1 obj=$2
    shift 2
    mkdir -p "$(dirname "$obj")"
    while ((running >= jobs)); do reap; done
    "$CC" "$@" -c "$src" -o "$obj" &
    running=$((running + 1))
}
finish() {
    while ((running > 0)); do reap; done
    ((failed == 0)) || die "$1 failed (the compiler's messages are above)"
}

# ---- the library -------------------------------------------------------------------------------

objects=()
layer_of() {
    case $1 in
    src/library.c) echo library ;;
    src/core/*.c | src/backends/cpu/*.c | src/backends/cuda/*.c) echo core ;;
    src/backends/*) echo skip ;; # opencl and any other backend: not built here
    src/mpi/*) echo skip ;;      # libacg_mpi needs MPI, which the GPU machine lacks: --tp is off
    src/engine/*.c) echo engine ;;
    src/model/*.c) echo model ;;
    *) echo other ;;
    esac
}
while IFS= read -r src; do
    layer=$(layer_of "$src")
    case $layer in
    skip) continue ;;
    core) inc=("${inc_core[@]}") ;;
    engine) inc=("${inc_engine[@]}") ;;
    model) inc=("${inc_model[@]}") ;;
    library) inc=("${inc_library[@]}") ;;
    other)
        say "note: $src is in no layer CMakeLists.txt names: compiled with the core's paths"
        inc=("${inc_core[@]}")
        ;;
    esac
    [[ $src == src/backends/cuda/* ]] && ((!with_cuda)) && continue
    obj=$build/obj/${src%.c}.o
    objects+=("$obj")
    compile "$src" "$obj" "${lib_flags[@]}" "${inc[@]}"
done < <(find src -name '*.c' | LC_ALL=C sort)
finish "compiling the library"
rm -f "$build/libacg.a"
ar rcs "$build/libacg.a" "${objects[@]}"
say "libacg.a: ${#objects[@]} objects (cuda backend: $with_cuda, cuda kernels: $have_kernels)"

# ---- the tool ----------------------------------------------------------------------------------

# As CMakeLists.txt builds it: the tools' support library and the benchmarks as libraries (the
# tests link the first), and the tool, each part with only the include paths it may use.
tool_flags=("${cflags[@]}" -D_POSIX_C_SOURCE=200809L -Iinclude -Itools/support)
# $1 a glob of sources, then their include paths: compiles them, their objects into tool_objects.
tool_compile() {
    local glob=$1 src obj
    shift
    tool_objects=()
    for src in $glob; do
        obj=$build/obj/${src%.c}.o
        tool_objects+=("$obj")
        compile "$src" "$obj" "${tool_flags[@]}" "$@"
    done
    finish "compiling $glob"
}
# $1 the archive, $2 a glob of its sources, then their include paths.
tool_library() {
    local archive=$build/$1
    shift
    tool_compile "$@"
    rm -f "$archive"
    ar rcs "$archive" "${tool_objects[@]}"
}
tool_library libacg_tool_support.a 'tools/support/*.c' -Isrc/core/export
tool_library libacg_bench.a 'bench/*.c' -Ibench
tool_compile 'tools/acg/*.c' -Ibench -Itools/acg
"$CC" -o "$build/acg" "${tool_objects[@]}" "$build/libacg_bench.a" "$build/libacg_tool_support.a" \
    "$build/libacg.a" "${libs[@]}"
say "acg: built"

# ---- the tests ---------------------------------------------------------------------------------

# cmocka: its header and library, where the environment names them or in the usual places.
find_cmocka() {
    local d
    cmocka_inc=${CMOCKA_INCLUDE_DIR:-}
    cmocka_lib=${CMOCKA_LIBRARY:-}
    if [[ -z $cmocka_inc ]]; then
        for d in /usr/include /usr/local/include /opt/homebrew/include; do
            [[ -f $d/cmocka.h ]] && { cmocka_inc=$d; break; }
        done
    fi
    if [[ -z $cmocka_lib ]]; then
        for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib; do
            for f in "$d/libcmocka.so" "$d/libcmocka.a"; do
                [[ -f $f ]] && { cmocka_lib=$f; break 2; }
            done
        done
    fi
    [[ -n $cmocka_inc && -n $cmocka_lib ]]
}

built_tests=0
if [[ $tests != off ]]; then
    if find_cmocka; then
        # The tests see the generated headers and ACG_HAVE_CUDA_KERNELS too (a test registers
        # kernels from tests/cuda/test_kernels.cu's fatbin).
        test_flags=("${cflags[@]}" -D_POSIX_C_SOURCE=200809L "-I$cmocka_inc" -Isrc -Itests -Iinclude
            "-I$gen" -Itools/support)
        ((have_kernels)) && test_flags+=(-DACG_HAVE_CUDA_KERNELS=1)
        compile tests/common.c "$build/obj/tests/common.o" "${test_flags[@]}"
        compile tests/fork_comm.c "$build/obj/tests/fork_comm.o" "${test_flags[@]}"
        names=()
        for src in tests/test_*.c; do
            name=$(basename "$src" .c)
            names+=("$name")
            compile "$src" "$build/obj/tests/$name.o" "${test_flags[@]}"
        done
        finish "compiling the tests"
        for name in "${names[@]}"; do
            while ((running >= jobs)); do reap; done
            "$CC" -o "$build/tests/$name" "$build/obj/tests/$name.o" "$build/obj/tests/common.o" \
                "$build/obj/tests/fork_comm.o" "$build/libacg_tool_support.a" "$build/libacg.a" \
                "$cmocka_lib" "-Wl,-rpath,${cmocka_lib%/*}" "${libs[@]}" &
            running=$((running + 1))
        done
        finish "linking the tests"
        built_tests=${#names[@]}
        say "tests: $built_tests built against $cmocka_lib"
    elif [[ $tests == on ]]; then
        die "cmocka not found (set CMOCKA_INCLUDE_DIR and CMOCKA_LIBRARY)"
    else
        say "cmocka not found: the tests are not built"
    fi
fi

{
    echo "cuda=$with_cuda"
    echo "cuda_kernels=$have_kernels"
    echo "fatbins=$n_fatbin/$n_fatbin_wanted"
    echo "fatbin_notes=${fatbin_notes[*]:-}"
    echo "objects=${#objects[@]}"
    echo "tests=$built_tests"
} >"$build/build-info.txt"
