#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs the examples against it as
# README.md's "Using acg in your program" says: examples/hello_graph, custom_kernel and
# decode_step through find_package(acg) alone, and hello_graph through pkg-config with the run
# path from the package's libdir. Neither runs with LD_LIBRARY_PATH: the run path must find
# libacg.so, as it will for a user. Proves the installed package works.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
unset LD_LIBRARY_PATH

cmake -S "$src/examples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/hello_graph" cpu
"$work/cmake/custom_kernel" cpu
"$work/cmake/decode_step" cpu
# Where OpenCL runs (PoCL here), decode_step there too: its kernels' OpenCL C, through a set.
if "$work/prefix/bin/acg" info --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if any(b['name'] == 'opencl' and b['available'] for b in d['backends']) else 1)"; then
    "$work/cmake/decode_step" opencl
fi

export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name acg.pc | head -n 1)")
libdir=$(pkg-config --variable=libdir acg)
# shellcheck disable=SC2046
cc -std=c11 "$src/examples/hello_graph.c" -o "$work/hello_pc" $(pkg-config --cflags --libs acg) \
    -Wl,-rpath,"$libdir"
"$work/hello_pc" cpu
