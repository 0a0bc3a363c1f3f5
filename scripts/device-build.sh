#!/usr/bin/env bash
# device-build.sh — builds libacg.a, the acg tool and (when cmocka is found) the cmocka tests with
# a plain C compiler, for a machine without CMake (the lent GPU machine may have none).
#
#   scripts/device-build.sh [--cuda auto|on|off] [--tests auto|on|off] [--jobs N] BUILD_DIR
#
# It mirrors CMakeLists.txt's Release build, with its globs, so files added to a layer are
# picked up: the same per-layer include paths, the same defines and flags, and the layers'
# kernel sets: for each source that CMakeLists.txt's acg_add_kernels() calls name (else the
# core's src/core/elementwise.acg.c and the model's src/model/ops.acg.c), the files
# cmake/acgKernelTool.cmake generates, byte for byte, into BUILD_DIR/acg_kernels/<set>: the
# OpenCL C with acg/kernel.h inlined and its _cl.h, with --cuda the fatbin and its _cuda.h, the
# C translation unit and the set's <set>_kernels.h and .c, compiled into the library with the
# layer's paths. Besides them, the OpenCL C the CMake files embed as text (cmake/embed.cmake's
# shape) and, with --cuda, the CUDA fatbins nvcc builds from the .cu files they list, embedded as
# aligned byte arrays. The opencl backend is never built here, nor SPIR-V. A .cu file that is
# missing, or nvcc missing or failing, means no fatbin: the build goes on without
# ACG_HAVE_CUDA_KERNELS (a kernel set's source without its cuda code) and says so. No cuda
# backend sources (src/backends/cuda/*.c) means no cuda backend.
#
# Writes BUILD_DIR/{libacg.a, libacg_tool_support.a, libacg_bench.a, acg, tests/test_*,
# generated/*.h, acg_kernels/<set>/*} and BUILD_DIR/build-info.txt (one "key=value" a line:
# cuda, fatbins, kernel_sets, tests, objects), which scripts/device-check.sh reads.
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

# Formats hex bytes on stdin 16 a line, as cmake/embed_binary.cmake and acgKernelTool.cmake do:
# "0x2f," each, the lines joined by a newline and 4 spaces, no newline after the last.
c_bytes16() {
    awk 'NR > 1 && (NR - 1) % 16 == 0 { printf "\n    " } { printf "0x%s,", $1 }'
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
        hex_bytes "$1" | c_bytes16
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
# The layers' own comes from their kernel sets (below); what the CMake files still list as text
# (tests/test_kernels.cl, for the tests) is embedded here.
n_cl=0
while IFS=';' read -r in out sym; do
    [[ -n $in ]] || continue
    [[ -f $in ]] || die "$in (listed in the CMake files) is missing"
    embed_text "$in" "$gen/$out.h" "$sym"
    n_cl=$((n_cl + 1))
done < <(cmake_triples cl)
say "embedded $n_cl OpenCL C source(s) as text"

# ---- CUDA --------------------------------------------------------------------------------------

with_cuda=0
cuda_sources=()
for f in src/backends/cuda/*.c; do [[ -f $f ]] && cuda_sources+=("$f"); done
if [[ $cuda != off ]]; then
    if ((${#cuda_sources[@]} > 0)); then
        with_cuda=1
    elif [[ $cuda == on ]]; then
        say "no cuda backend sources (src/backends/cuda/*.c): building without the cuda backend"
    fi
fi

NVCC=${NVCC:-$(command -v nvcc || true)}
[[ -n $NVCC || ! -x /usr/local/cuda/bin/nvcc ]] || NVCC=/usr/local/cuda/bin/nvcc

# nvcc's options as cmake/acgKernels.cmake (or cmake/cuda_kernels.cmake) sets them
# (ACG_CUDA_NVCC_FLAGS, and -gencode for each of ACG_CUDA_ARCHS that this nvcc knows plus PTX
# for ACG_CUDA_PTX_ARCH), or these defaults: nothing contracted, division and square root
# correctly rounded, subnormals kept, so the kernels match the cpu backend bit for bit; sm_90 is
# the H200.
cmake_set() {
    local f
    for f in cmake/acgKernels.cmake cmake/cuda_kernels.cmake; do
        if [[ -f $f ]]; then
            sed -n "s/^set($1 \"\{0,1\}\([^\")]*\)\"\{0,1\}.*)$/\1/p" "$f"
        fi
    done | head -n 1
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

# The fatbins of the .cu files (the kernel sets' are below): each .cu with its header and
# symbol, from the CMake files when they list them, else the kernel files of this layout.
fatbin_triples() {
    local t
    t=$(cmake_triples cu)
    if [[ -n $t ]]; then
        printf '%s\n' "$t"
    else
        printf '%s\n' "src/model/kernels.cu;model_kernels_cuda;acg__model_kernels_fatbin" \
            "tests/cuda/test_kernels.cu;test_kernels_cuda;tc_test_kernels_fatbin" \
            "src/backends/cuda/loop.cu;cuda_loop_kernel;acg__cu_loop_fatbin"
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
        # -Iinclude: a .cu may include acg/kernel.h (src/model/kernels.cu does, for acg_exp).
        echo "$NVCC -fatbin ${nvcc_flags[*]} -Iinclude -o $fb $in" >"$build/obj/$out.nvcc.log"
        if ! "$NVCC" -fatbin "${nvcc_flags[@]}" -Iinclude -o "$fb" "$in" \
            >>"$build/obj/$out.nvcc.log" 2>&1; then
            cat "$build/obj/$out.nvcc.log" >&2
            fatbin_notes+=("nvcc failed on $in")
            continue
        fi
        embed_binary "$fb" "$gen/$out.h" "$sym"
        n_fatbin=$((n_fatbin + 1))
    done < <(fatbin_triples)
fi

# ---- kernel sets: acg_add_kernels (cmake/acgKernels.cmake, cmake/acgKernelTool.cmake) ----------

# The layer a library source belongs to, as CMakeLists.txt's object libraries split them.
layer_of() {
    case $1 in
    src/library.c) echo library ;;
    src/core/*.c) echo core ;;
    src/backends/cpu/*.c | src/backends/cuda/*.c) echo backend ;;
    src/backends/*) echo skip ;; # opencl and any other backend: not built here
    src/mpi/*) echo skip ;;      # libacg_mpi needs MPI, which the GPU machine lacks: --tp is off
    src/engine/*.c) echo engine ;;
    src/model/*.c) echo model ;;
    *) echo other ;;
    esac
}

# The kernel sets CMakeLists.txt and tests/CMakeLists.txt build, one "target;set;descs_only;
# sources" a line (descs_only 1 for DESCS_ONLY, the sources separated by spaces, relative to the
# root): read from their acg_add_kernels() calls, comments left out, else the layers' two of
# this layout.
kernel_sets() {
    local call target set descs key srcs w found=0
    local words=()
    while IFS= read -r call; do
        local dir=${call%%$'\t'*} # the CMakeLists.txt's folder, "" or "tests/"
        call=${call#*$'\t'}
        call=${call#*(}
        call=${call%)}
        call=${call//\"/}
        for w in PROJECT_SOURCE_DIR CMAKE_SOURCE_DIR CMAKE_CURRENT_SOURCE_DIR; do
            call=${call//"\${$w}/"/}
        done
        [[ $call != *'$'* ]] || die "cannot read acg_add_kernels($call) in CMakeLists.txt"
        read -r -a words <<<"$call"
        target=${words[0]:-}
        set=
        descs=0
        key=
        srcs=
        for w in "${words[@]:1}"; do
            case $w in
            SET | SOURCES) key=$w ;;
            DESCS_ONLY) descs=1 key= ;;
            *)
                case $key in
                SET) set=$w key= ;;
                SOURCES) srcs+=${srcs:+ }$dir$w ;;
                *) die "acg_add_kernels($call) in CMakeLists.txt: what is '$w'?" ;;
                esac
                ;;
            esac
        done
        [[ -n $target && -n $set && -n $srcs ]] ||
            die "acg_add_kernels($call) in CMakeLists.txt: give SET <name> SOURCES <file>..."
        printf '%s;%s;%s;%s\n' "$target" "$set" "$descs" "$srcs"
        found=1
    done < <(for f in CMakeLists.txt tests/CMakeLists.txt; do
        [[ -f $f ]] || continue
        sed 's/#.*//' "$f" | tr '\n\t' '  ' |
            grep -oE 'acg_add_kernels[[:space:]]*\([^)]*\)' | sed "s|^|${f%CMakeLists.txt}\t|" ||
            true
    done)
    if ((!found)); then
        if [[ -f src/core/elementwise.acg.c ]]; then
            printf '%s\n' "acg_core_objects;acg__core;1;src/core/elementwise.acg.c"
        fi
        if [[ -f src/model/ops.acg.c ]]; then
            printf '%s\n' "acg_model_objects;acg__model;1;src/model/ops.acg.c"
        fi
    fi
}

# $1 a source (absolute), $2 the .cl to write: the source as OpenCL C, each line that includes
# acg/kernel.h replaced by the header with #line directives around it (MODE=opencl; like it, the
# line after the first include is the one every #line names).
kernel_opencl() {
    local src=$1 out=$2 header=$root/include/acg/kernel.h at lines first='' prev=1 n t=$'\t'
    local pat="^[ $t]*#[ $t]*include[ $t]*[<\"]acg/kernel\\.h[>\"]"
    lines=$(grep -nE "$pat" "$src" | cut -d: -f1) || die "$src does not include <acg/kernel.h>"
    n=$(wc -l <"$src")
    n=${n//[[:space:]]/}
    {
        for at in $lines; do
            first=${first:-$((at + 1))}
            if ((at > prev)); then sed -n "${prev},$((at - 1))p" "$src"; fi
            printf '#line 1 "acg/kernel.h"\n'
            cat "$header"
            printf '\n#line %s "%s"' "$first" "$src"
            # The include's own newline, which the last line may lack.
            if ((at <= n)); then printf '\n'; fi
            prev=$((at + 1))
        done
        sed -n "${prev},\$p" "$src"
    } >"$out.tmp"
    mv "$out.tmp" "$out"
}

# $1 the input the comment names, $2 the file embedded, $3 the header, $4 its symbol, $5 text or
# binary: MODE=opencl's NUL-terminated text (unsigned: a comment may hold any UTF-8), or
# MODE=binary's 8-byte aligned bytes.
kernel_embed() {
    [[ -s $2 ]] || die "$2 is empty"
    {
        printf '/* Generated from %s by acgKernelTool.cmake; do not edit. */\n' "$1"
        if [[ $5 == text ]]; then
            printf 'static const unsigned char %s[] = {\n    ' "$4"
        else
            printf '_Alignas(8) static const unsigned char %s[] = {\n    ' "$4"
        fi
        hex_bytes "$2" | c_bytes16
        if [[ $5 == text ]]; then printf '\n    0x00};\n'; else printf '\n};\n'; fi
    } >"$3.tmp"
    mv "$3.tmp" "$3"
}

# The kernels of a source, one name a line: the identifier after each `ACG_KERNEL(` that begins a
# line, as acgKernelTool.cmake reads them.
kernel_names() {
    local src=$1 line seen=" "
    local re='^[[:blank:]]*ACG_KERNEL[[:blank:]]*\([[:blank:]]*([A-Za-z_][A-Za-z0-9_]*)'
    while IFS= read -r line; do
        [[ $line =~ $re ]] || die "$src: cannot read the kernel's name in: $line"
        [[ $seen != *" ${BASH_REMATCH[1]} "* ]] ||
            die "$src: the kernel ${BASH_REMATCH[1]} is defined twice"
        seen+="${BASH_REMATCH[1]} "
        printf '%s\n' "${BASH_REMATCH[1]}"
    done < <(grep -E '^[[:blank:]]*ACG_KERNEL[[:blank:]]*\(' "$src" || true)
    [[ $seen != " " ]] || die "$src: no line begins with ACG_KERNEL("
}

# $1 set, $2 stem, $3 source (absolute), $4 1 with its fatbin, $5 the .c, then the kernels: the
# translation unit of MODE=source, FORMATS=opencl or opencl,cuda (no SPIR-V here).
kernel_tu() {
    local set=$1 stem=$2 src=$3 cuda=$4 out=$5 k
    shift 5
    {
        printf '/* Generated from %s by acgKernelTool.cmake; do not edit. */\n' "$src"
        printf '#include "acg/acg.h"\n\n#include "%s_cl.h"\n' "$stem"
        if ((cuda)); then printf '#include "%s_cuda.h"\n' "$stem"; fi
        printf "\n/* Each kernel's code for the backends that load it (acg_kernel_impl). */\n"
        for k; do
            printf 'static const acg_kernel_impl %s__acg_impls[] = {\n' "$k"
            printf '    {"opencl", ACG_KERNEL_FORMAT_OPENCL_C, %s__%s_cl, 0, "%s"},\n' \
                "$set" "$stem" "$k"
            if ((cuda)); then
                printf '    {"cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, %s__%s_cuda, ' "$set" "$stem"
                printf 'sizeof %s__%s_cuda, "%s"},\n' "$set" "$stem" "$k"
            fi
            printf '};\n'
        done
        printf '\n#define ACG_KERNEL_IMPLS 1\n#include "%s"\n\n' "$src"
        printf 'static const acg_kernel_desc *const acg__kernels[] = {\n'
        printf '    &%s__acg_desc,\n' "$@"
        printf '};\n\n'
        printf 'const acg_kernel_desc *const *%s__kernels_%s(size_t *n);\n' "$set" "$stem"
        printf 'const acg_kernel_desc *const *%s__kernels_%s(size_t *n) {\n' "$set" "$stem"
        printf '    *n = %s;\n    return acg__kernels;\n}\n' "$#"
    } >"$out.tmp"
    mv "$out.tmp" "$out"
}

# $1 set, $2 1 for DESCS_ONLY, $3 its folder, then its stems: <set>_kernels.h and .c, the text
# acg_add_kernels writes at configure time.
kernel_set_files() {
    local set=$1 descs=$2 dir=$3 guard stem
    shift 3
    guard=$(printf '%s_KERNELS_H' "$set" | LC_ALL=C tr '[:lower:]' '[:upper:]')
    {
        printf '/* Generated by acg_add_kernels(): the kernels of the set "%s"; do not edit. */\n' \
            "$set"
        printf '#ifndef %s\n#define %s\n\n' "$guard" "$guard"
        printf '#include <stddef.h>\n\n#include <acg/acg.h>\n\n'
        printf '#ifdef __cplusplus\nextern "C" {\n#endif\n\n'
        if ((!descs)); then
            printf '/* Registers the kernels as the set "%s" (acg_kernel_register_set: each one\n' \
                "$set"
            printf ' * "%s/<kernel>"), all or nothing; ACG_ERR_OUT_OF_MEMORY when even the list\n' \
                "$set"
            printf ' * cannot be made. */\nacg_status %s_register_kernels(void);\n' "$set"
            printf '/* acg_kernel_unregister_set("%s"). */\n' "$set"
            printf 'acg_status %s_unregister_kernels(void);\n' "$set"
        fi
        printf "/* The kernels' definitions, their implementations included, in the sources' "
        printf 'order. */\nsize_t %s_kernel_count(void);\n' "$set"
        printf 'const acg_kernel_desc *%s_kernel_desc(size_t i); /* NULL past the count */\n\n' \
            "$set"
        printf '#ifdef __cplusplus\n}\n#endif\n\n#endif /* %s */\n' "$guard"
    } >"$dir/${set}_kernels.h.tmp"
    mv "$dir/${set}_kernels.h.tmp" "$dir/${set}_kernels.h"
    {
        printf '/* Generated by acg_add_kernels(): the kernel set "%s"; do not edit. */\n' "$set"
        printf '#include <stdlib.h>\n\n#include "%s_kernels.h"\n\n' "$set"
        for stem; do
            printf 'const acg_kernel_desc *const *%s__kernels_%s(size_t *n);\n' "$set" "$stem"
        done
        printf '\nsize_t %s_kernel_count(void) {\n    size_t n = 0, total = 0;\n' "$set"
        for stem; do
            printf '    %s__kernels_%s(&n);\n    total += n;\n' "$set" "$stem"
        done
        printf '    return total;\n}\n\n'
        printf 'const acg_kernel_desc *%s_kernel_desc(size_t i) {\n' "$set"
        printf '    const acg_kernel_desc *const *list;\n    size_t n = 0;\n'
        for stem; do
            printf '    list = %s__kernels_%s(&n);\n' "$set" "$stem"
            printf '    if (i < n) {\n        return list[i];\n    }\n    i -= n;\n'
        done
        printf '    return NULL;\n}\n\n'
        if ((!descs)); then
            printf 'acg_status %s_register_kernels(void) {\n' "$set"
            printf '    const size_t n = %s_kernel_count();\n' "$set"
            printf '    acg_kernel_desc *d = malloc(n * sizeof *d);\n'
            printf '    if (d == NULL) {\n        return ACG_ERR_OUT_OF_MEMORY;\n    }\n'
            printf '    for (size_t i = 0; i < n; i++) {\n        d[i] = *%s_kernel_desc(i);\n' \
                "$set"
            printf '    }\n    const acg_status st = acg_kernel_register_set("%s", d, n);\n' "$set"
            printf '    free(d);\n    return st;\n}\n\n'
            printf 'acg_status %s_unregister_kernels(void) {\n' "$set"
            printf '    return acg_kernel_unregister_set("%s");\n}\n' "$set"
        fi
    } >"$dir/${set}_kernels.c.tmp"
    mv "$dir/${set}_kernels.c.tmp" "$dir/${set}_kernels.c"
}

# Each set into $build/acg_kernels/<set>, as acg_add_kernels generates it into the build folder;
# the folder joins its layer's include path, and its .c files join the library (kernel_tus:
# "layer;file").
kernel_tus=()
test_tus=() # "test;file": a test's own kernel sets
test_kdirs=()
kdirs_core=()
kdirs_engine=()
kdirs_model=()
kdirs_library=()
n_sets=0
want_cuda_code=0
if ((with_cuda)) || [[ $cuda == on ]]; then want_cuda_code=1; fi
sets=$(kernel_sets)
while IFS=';' read -r target set descs srcs; do
    [[ -n $target ]] || continue
    [[ $set =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
        die "acg_add_kernels($target): SET '$set' must be a C identifier"
    case $target in
    acg_core_objects) layer=core ;;
    acg_engine_objects) layer=engine ;;
    acg_model_objects) layer=model ;;
    test_*) layer="test" ;; # a test's own kernels: compiled into that test (below)
    *) layer=$(layer_of "${srcs%% *}") ;;
    esac
    if [[ $layer == skip ]]; then
        say "note: the kernel set $set is $target's, which is not built here"
        continue
    fi
    dir=$build/acg_kernels/$set
    mkdir -p "$dir"
    stems=()
    for src in $srcs; do
        [[ -f $src ]] || die "$src (acg_add_kernels($target) in CMakeLists.txt) is missing"
        stem=${src##*/}
        stem=${stem%%.*}
        [[ $stem =~ ^[A-Za-z_][A-Za-z0-9_]*$ && " ${stems[*]} " != *" $stem "* ]] ||
            die "acg_add_kernels($target): $src: a source's name up to its first dot must be" \
                "a C identifier, once per set"
        stems+=("$stem")
        [[ $src == /* ]] || src=$root/$src
        base=$dir/$stem
        kernel_opencl "$src" "$base.cl"
        kernel_embed "$src" "$base.cl" "${base}_cl.h" "${set}__${stem}_cl" text
        # Its fatbin, as acg_add_kernels builds it (-x cu: the source is C to its name).
        cuda_code=0
        if ((want_cuda_code)); then
            n_fatbin_wanted=$((n_fatbin_wanted + 1))
            if [[ -z $NVCC ]]; then
                fatbin_notes+=("no nvcc for ${src#"$root"/}")
            else
                nvcc_cmd=("$NVCC" -x cu -fatbin "${nvcc_flags[@]}" "-I$root/include" -o
                    "$base.fatbin" "$src")
                log=$build/obj/acg_kernels/$set/$stem.nvcc.log
                mkdir -p "${log%/*}"
                echo "${nvcc_cmd[*]}" >"$log"
                if "${nvcc_cmd[@]}" >>"$log" 2>&1; then
                    kernel_embed "$base.fatbin" "$base.fatbin" "${base}_cuda.h" \
                        "${set}__${stem}_cuda" binary
                    cuda_code=1
                    n_fatbin=$((n_fatbin + 1))
                else
                    cat "$log" >&2
                    fatbin_notes+=("nvcc failed on ${src#"$root"/}")
                fi
            fi
        fi
        names=$(kernel_names "$src")
        # shellcheck disable=SC2086 # the names are C identifiers, one a line
        kernel_tu "$set" "$stem" "$src" "$cuda_code" "$base.c" $names
        if [[ $layer == test ]]; then
            test_tus+=("$target;$base.c")
        else
            kernel_tus+=("$layer;$base.c")
        fi
    done
    kernel_set_files "$set" "$descs" "$dir" "${stems[@]}"
    if [[ $layer == test ]]; then
        test_tus+=("$target;$dir/${set}_kernels.c")
    else
        kernel_tus+=("$layer;$dir/${set}_kernels.c")
    fi
    case $layer in
    test) test_kdirs+=("-I$dir") ;;
    core | other) kdirs_core+=("-I$dir") ;;
    engine) kdirs_engine+=("-I$dir") ;;
    model) kdirs_model+=("-I$dir") ;;
    library) kdirs_library+=("-I$dir") ;;
    esac
    n_sets=$((n_sets + 1))
done <<<"$sets"
say "generated $n_sets kernel set(s) into $build/acg_kernels"

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
lib_defs=(-D_POSIX_C_SOURCE=200809L -DACG_BUILDING=1)
((have_kernels)) && lib_defs+=(-DACG_HAVE_CUDA_KERNELS=1)
# The cuda backend's loop kernels (src/backends/cuda/loop.cu), embedded with the others.
[[ -f $gen/cuda_loop_kernel.h ]] && ((have_kernels)) && lib_defs+=(-DACG_HAVE_CUDA_LOOP=1)
lib_flags=("${cflags[@]}" -fvisibility=hidden "${lib_defs[@]}" -Iinclude)
# The build's list of backends, as CMakeLists.txt writes it (in ACG_BACKEND_FOLDERS' order).
mkdir -p "$build/backends"
backend_list="X(cpu)"
((with_cuda)) && backend_list="X(cuda) X(cpu)"
printf '%s\n' "/* acg-backends.h: written by scripts/device-build.sh. The backends of this build, in order of" \
    " * preference for acg_device_open(NULL). */" "#define ACG__BACKENDS(X) $backend_list" \
    >"$build/backends/acg-backends.h.tmp"
# Rewritten only when it changes, so an unchanged list recompiles nothing.
if cmp -s "$build/backends/acg-backends.h.tmp" "$build/backends/acg-backends.h"; then
    rm -f "$build/backends/acg-backends.h.tmp"
else
    mv "$build/backends/acg-backends.h.tmp" "$build/backends/acg-backends.h"
fi
inc_core=(-Isrc "-I$build/backends" "${kdirs_core[@]}")
inc_backend=(-Isrc/core/backend -Isrc/core/export "-I$gen" "${cuda_includes[@]}")
inc_engine=(-Isrc/core/export -Isrc/engine "${kdirs_engine[@]}")
inc_model=(-Isrc/core/export -Isrc/model "-I$gen" "${kdirs_model[@]}")
inc_library=(-Isrc/core/export -Isrc/engine -Isrc/model "-I$build/backends" "${kdirs_library[@]}")
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
while IFS= read -r src; do
    # A kernel source is C only through its generated translation unit (below), which includes
    # it after its kernels' implementations.
    [[ $src == *.acg.c ]] && continue
    layer=$(layer_of "$src")
    case $layer in
    skip) continue ;;
    core) inc=("${inc_core[@]}") ;;
    backend) inc=("${inc_backend[@]}") ;;
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
for tu in "${kernel_tus[@]}"; do
    layer=${tu%%;*}
    tu=${tu#*;}
    case $layer in
    engine) inc=("${inc_engine[@]}") ;;
    model) inc=("${inc_model[@]}") ;;
    library) inc=("${inc_library[@]}") ;;
    *) inc=("${inc_core[@]}") ;;
    esac
    obj=$build/obj/${tu#"$build"/}
    obj=${obj%.c}.o
    objects+=("$obj")
    compile "$tu" "$obj" "${lib_flags[@]}" "${inc[@]}"
done
finish "compiling the library"
rm -f "$build/libacg.a"
# One call: members of one name (the core's elementwise.o and its kernel set's) are both kept
# only when added together; a second `ar r` would replace the first.
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
            "-I$gen" -Itools/support "${test_kdirs[@]}")
        ((have_kernels)) && test_flags+=(-DACG_HAVE_CUDA_KERNELS=1)
        # What the tests share (tests/*.c that are not a test: common.c, fork_comm.c, the
        # fixtures and the llama2.c reference), as an archive each test takes what it needs from.
        helpers=()
        for src in tests/*.c; do
            case $(basename "$src") in test_*.c | *.acg.c) continue ;; esac
            helpers+=("$build/obj/tests/$(basename "$src" .c).o")
            compile "$src" "${helpers[-1]}" "${test_flags[@]}"
        done
        names=()
        for src in tests/test_*.c; do
            name=$(basename "$src" .c)
            names+=("$name")
            compile "$src" "$build/obj/tests/$name.o" "${test_flags[@]}"
        done
        # A test's kernel sets (acg_add_kernels in tests/CMakeLists.txt), into its own objects.
        declare -A test_objs=()
        for tu in "${test_tus[@]}"; do
            t=${tu%%;*}
            tu=${tu#*;}
            obj=$build/obj/tests/$t/$(basename "$(dirname "$tu")")_$(basename "$tu" .c).o
            compile "$tu" "$obj" "${test_flags[@]}"
            test_objs[$t]+=" $obj"
        done
        finish "compiling the tests"
        rm -f "$build/libacg_test_support.a"
        ar rcs "$build/libacg_test_support.a" "${helpers[@]}"
        for name in "${names[@]}"; do
            while ((running >= jobs)); do reap; done
            # shellcheck disable=SC2086 # the objects' paths are the build's, without spaces
            "$CC" -o "$build/tests/$name" "$build/obj/tests/$name.o" ${test_objs[$name]:-} \
                "$build/libacg_test_support.a" "$build/libacg_tool_support.a" "$build/libacg.a" \
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
    echo "kernel_sets=$n_sets"
    echo "objects=${#objects[@]}"
    echo "tests=$built_tests"
} >"$build/build-info.txt"
