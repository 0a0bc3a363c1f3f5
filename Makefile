# GNU make wrapper around CMake. `make run` builds and runs the reference model, `make test` runs
# the suite.
#   make run | test | build | deps | clean | install [PREFIX=/usr/local] [BUILD=build]
#   make device-check | device-check-dry [DEVICE_OUT=build-device-check]

BUILD ?= build
PREFIX ?= /usr/local
BUILD_TYPE ?= RelWithDebInfo
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all run test build deps clean install device-check device-check-dry

all: build

deps:
	sh scripts/install-deps.sh

# Configuring again is quick once the cache exists, and repairs a build folder whose first
# configure failed.
build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

run: deps
	$(MAKE) --no-print-directory build
	$(BUILD)/acg run --backend cpu

test: deps
	$(MAKE) --no-print-directory build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-coverage

# The prepared check for a lent GPU machine (scripts/device-check.sh): a Release build with CUDA
# on, the device tests on the real driver, the tool's benchmarks and the PyTorch peer, one JSON
# file a step in DEVICE_OUT. device-check-dry runs its CPU side here, on the cpu backend.
DEVICE_OUT ?= build-device-check

device-check:
	bash scripts/device-check.sh $(DEVICE_OUT)

device-check-dry:
	bash scripts/device-check.sh --dry-run $(DEVICE_OUT)
