#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds and runs the examples against it as
# README.md's "Using acg in your program" says: examples/hello_graph, custom_kernel, decode_step
# and scale_add through find_package(acg) alone, and hello_graph through pkg-config with the run
# path from the package's libdir. decode_step's and scale_add's kernels are written once
# (*.acg.c) and built by the package's acg_add_kernels, so the package's kernel build is tried
# too. Nothing runs with LD_LIBRARY_PATH: the run path must find libacg.so, as it will for a
# user. Proves the installed package works.
#
# decode_step and scale_add (which compares its kernel with a host loop bit for bit) run on the
# cpu backend, then on every other backend `acg info --json` says is available: opencl where
# OpenCL runs (PoCL here), vulkan where a Vulkan driver does (lavapipe here), cuda and level_zero
# on a real device, or on the project's test drivers as the device tests do. CTest gives this test none of the device tests' environment (their
# ACG_TEST_ENV_<backend> is tests/CMakeLists.txt's, and the root CMakeLists.txt registers this
# test), so the script sets the same itself from the build it installs: ACG_CUDA_DRIVER when the
# build has ACG_CUDA_TEST_DRIVER on and built tests/cuda_driver, ZE_ENABLE_ALT_DRIVERS and the
# loader's validation layer when it has ACG_LEVEL_ZERO_TEST_DRIVER on and built tests/ze_driver.
# A driver already named in the environment is kept. The test drivers run each kernel's cpu code
# in place of its GPU code: there the runs check the kernels' registration, images and launches,
# not the GPU's bits (scripts/device-check.sh does that on a lent GPU).
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
"$work/cmake/scale_add" cpu

# The test drivers, as tests/CMakeLists.txt points the device tests at them.
option_on() {
    grep -qE "^$1:BOOL=(ON|TRUE|1|YES|Y)$" "$build/CMakeCache.txt" 2>/dev/null
}
drivers=()
cuda_driver=$build/tests/cuda_driver/libacg_test_cuda.so
if [[ -n ${ACG_CUDA_DRIVER:-} ]]; then
    drivers+=("ACG_CUDA_DRIVER=$ACG_CUDA_DRIVER")
elif option_on ACG_CUDA_TEST_DRIVER && [[ -f $cuda_driver ]]; then
    drivers+=("ACG_CUDA_DRIVER=$cuda_driver")
fi
ze_driver=$build/tests/ze_driver/libacg_test_ze.so
if [[ -z ${ZE_ENABLE_ALT_DRIVERS:-} ]] && option_on ACG_LEVEL_ZERO_TEST_DRIVER &&
    [[ -f $ze_driver ]]; then
    drivers+=("ZE_ENABLE_ALT_DRIVERS=$ze_driver" ZE_ENABLE_VALIDATION_LAYER=1
        ZE_ENABLE_PARAMETER_VALIDATION=1)
fi

# Each other backend the installed acg finds a device of, and the code the examples' build made
# for it (acg_add_kernels leaves a backend out when its compiler is missing, and says so).
available=$(env "${drivers[@]}" "$work/prefix/bin/acg" info --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(' '.join(b['name'] for b in d['backends'] if b['available'] and b['name'] != 'cpu'))")
kernels=$work/cmake/acg_kernels/scale_add
for backend in $available; do
    case $backend in
    cuda) code=$kernels/scale_add.fatbin ;;
    level_zero) code=$kernels/scale_add.spv ;;
    vulkan) code=$kernels/scale_add_scale_add.vk.spv ;;
    *) code=$kernels/scale_add.cl ;;
    esac
    if [[ ! -f $code ]]; then
        echo "install_consumer: $backend is available, but the examples' build made no code" \
            "for it (${code##*/}): not run there"
        continue
    fi
    env "${drivers[@]}" "$work/cmake/decode_step" "$backend"
    env "${drivers[@]}" "$work/cmake/scale_add" "$backend"
done

export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name acg.pc | head -n 1)")
libdir=$(pkg-config --variable=libdir acg)
# shellcheck disable=SC2046
cc -std=c11 "$src/examples/hello_graph.c" -o "$work/hello_pc" $(pkg-config --cflags --libs acg) \
    -Wl,-rpath,"$libdir"
"$work/hello_pc" cpu
