/* cuda_native.h — what the cuda backend's tests on acg's CUDA test driver use to work beside
 * acg as an engine calling CUDA itself does: driver entry points, buffers' device addresses,
 * and the bits a 32-bit memset takes (compiled into test_cuda_backend and test_cuda_engine). */
#ifndef ACG_TESTS_CUDA_NATIVE_H
#define ACG_TESTS_CUDA_NATIVE_H

#include <cuda.h>

#include "backend_scene.h" /* bs_driver */

/* The entry point `name` at ABI `version`, through the bound driver's cuGetProcAddress_v2;
 * asserts that the driver serves it. */
void *cu_entry(const bs_driver *drv, const char *name, int version);

/* The native form of buffer b (acg_buffer_get_native); asserts that it is a CUdeviceptr. */
acg_native_buffer cu_native_buffer(acg_buffer *b);

/* The bits of v, as cuMemsetD32 takes a float's. */
unsigned cu_bits_of(float v);

#endif
