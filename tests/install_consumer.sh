#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs examples/hello_graph against it
# twice: through find_package(acg) and through pkg-config, and examples/custom_kernel through
# find_package(acg). Proves the installed package works.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)

cmake -S "$src/examples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/hello_graph" cpu
LD_LIBRARY_PATH="$libdir" "$work/cmake/custom_kernel" cpu

export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 "$src/examples/hello_graph.c" -o "$work/hello_pc" $(pkg-config --cflags --libs acg)
LD_LIBRARY_PATH="$libdir" "$work/hello_pc" cpu
