#!/bin/sh
# Installs the Debian packages acg needs to build and test, or says how to.
# Exit 0 when everything is installed (quietly when nothing was missing); as root, installs what
# is missing; otherwise prints the command to run and exits 1.
set -eu

# The one list of packages. Backends add theirs here. OpenCL: the headers and the ICD loader to
# build the opencl backend, PoCL to run it (and the conformance suite) on the CPU, and clinfo to
# see what the machine offers. libc6-dev is listed because gcc only recommends it and
# recommends are not installed.
PACKAGES="cmake make gcc libc6-dev pkg-config libcmocka-dev"
# tests/cxx compiles the public headers as C++.
PACKAGES="$PACKAGES g++"
PACKAGES="$PACKAGES pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo"
# The fuzz stage of .ci/run: clang and its libFuzzer runtime (libclang_rt.fuzzer); its format
# stage: clang-format (scripts/check-format.sh).
PACKAGES="$PACKAGES clang-14 libclang-rt-14-dev clang-format-14"
# The level_zero backend's kernels: OpenCL C to SPIR-V at build time (with clang-14), spirv-val.
PACKAGES="$PACKAGES llvm-spirv-14 spirv-tools"
# The level_zero backend: the loader's headers to build it, the loader (with its validation
# layer) to run its tests against acg's test driver; no Intel driver, which needs a GPU.
PACKAGES="$PACKAGES libze-dev libze1"
# The vulkan backend: the headers to build it, the loader and Mesa's lavapipe (a conformant
# Vulkan driver on the CPU) to run its suites, the Khronos validation layer that checks every
# call they make, glslang-tools to compile its kernels' GLSL to SPIR-V (spirv-tools, above,
# validates them), and vulkan-tools for vulkaninfo.
PACKAGES="$PACKAGES libvulkan-dev libvulkan1 mesa-vulkan-drivers vulkan-validationlayers"
PACKAGES="$PACKAGES glslang-tools vulkan-tools"
# tests/cli writes checkpoint and tokenizer files, good and malformed, with python3's struct.
PACKAGES="$PACKAGES python3"
# libacg_mpi, the MPI process group (src/mpi), and its tests under mpirun (tests/mpi): Open MPI's
# headers and libraries, and mpirun.
PACKAGES="$PACKAGES libopenmpi-dev openmpi-bin"
# Graphviz's dot: tests/test_dot renders the DOT that acg_graph_write_dot writes (and says so when
# dot is missing), and pictures of captured graphs are drawn with it.
PACKAGES="$PACKAGES graphviz"
# The coverage stage of .ci/run (scripts/coverage.sh): gcovr reads gcc's gcov data.
PACKAGES="$PACKAGES gcovr"

missing=""
for pkg in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    if [ "$status" != "installed" ]; then
        missing="$missing $pkg"
    fi
done
missing=${missing# }

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "install-deps: installing $missing"
    apt-get update
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
else
    echo "install-deps: missing packages: $missing" >&2
    echo "install-deps: run as root:" >&2
    echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing" >&2
    exit 1
fi
