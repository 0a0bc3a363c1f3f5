/* cuda_native.h — what the cuda backend's tests on acg's CUDA test driver use to work beside
 * acg as an engine calling CUDA itself does: the test driver's description, driver entry
 * points, buffers' device addresses, the bits a 32-bit memset takes, and the model's matmul on
 * a grid taller than CUDA launches (compiled into test_cuda_backend, test_cuda_engine,
 * test_cuda_cublas and test_cuda_nccl). */
#ifndef ACG_TESTS_CUDA_NATIVE_H
#define ACG_TESTS_CUDA_NATIVE_H

#include <stdint.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend_scene.h" /* bs_driver */

/* acg's CUDA test driver (tests/cuda_driver/acgtest_cuda.h), named by ACG_CUDA_DRIVER: a sweep
 * refuses calls with CUDA_ERROR_INVALID_VALUE, and a device's fault is the sticky error of its
 * context (acgtest_cuda_set_sticky). */
#define CU_TEST_DRIVER                                                                             \
    BS_DRIVER("ACG_CUDA_DRIVER", "acgtest_cuda", CUDA_ERROR_INVALID_VALUE,                         \
              "acgtest_cuda_set_sticky")

/* The entry point `name` at ABI `version`, through the bound driver's cuGetProcAddress_v2;
 * asserts that the driver serves it. */
void *cu_entry(const bs_driver *drv, const char *name, int version);

/* The native form of buffer b (acg_buffer_get_native); asserts that it is a CUdeviceptr. */
acg_native_buffer cu_native_buffer(acg_buffer *b);
/* Its device address (a view's is its parent's plus its offset). */
CUdeviceptr cu_address(acg_buffer *b);

/* The driver calls an engine makes itself on a stream's native CUstream. */
typedef struct cu_engine {
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 release;
    PFN_cuMemsetD32Async_v3020 memset32;
    PFN_cuMemcpyHtoDAsync_v3020 h2d;
    PFN_cuMemcpyDtoDAsync_v3020 d2d;
    PFN_cuMemcpyDtoHAsync_v3020 d2h;
    PFN_cuStreamSynchronize_v2000 sync;
} cu_engine;

/* Binds them from the bound driver (cu_entry). */
void cu_engine_bind(const bs_driver *drv, cu_engine *eng);

/* The bits of v, as cuMemsetD32 takes a float's. */
unsigned cu_bits_of(float v);

/* ---- the model's matmul on a tall grid ------------------------------------------------------ */

/* The model's matmul (grid (n_out, n)) with one column and one input gives a grid of n blocks in
 * y on small buffers: CU_TALL_ROWS is one more than CUDA launches. */
#define CU_TALL_ROWS 65536u

typedef struct cu_tall {
    acg_kernel *matmul;
    acg_buffer *out, *x; /* (CU_TALL_ROWS) floats each */
    acg_buffer *w;       /* (1) float */
} cu_tall;

/* Gets matmul_f32 on dev (the model's kernels registered) and makes its buffers. */
void cu_tall_open(cu_tall *t, acg_device *dev);
/* The matmul's arguments and grid for n rows. */
void cu_tall_rows(const cu_tall *t, uint32_t n, acg_arg args[6], acg_dims *dims);
/* Frees the buffers, asserting each. */
void cu_tall_close(cu_tall *t);

#endif
