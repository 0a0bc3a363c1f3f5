/* cuda_native.c — see cuda_native.h. */
#include "cuda_native.h"

#include <string.h>

#include "common.h" /* TC_OK */

void *cu_entry(const bs_driver *drv, const char *name, int version) {
    PFN_cuGetProcAddress_v12000 get_proc;
    *(void **)&get_proc = bs_driver_symbol(drv, "cuGetProcAddress_v2");
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_int_equal(get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q), CUDA_SUCCESS);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(fn);
    return fn;
}

acg_native_buffer cu_native_buffer(acg_buffer *b) {
    acg_native_buffer nb = ACG_NATIVE_BUFFER_INIT;
    TC_OK(acg_buffer_get_native(b, &nb));
    assert_int_equal(nb.kind, ACG_NATIVE_CUDA_DEVICEPTR);
    return nb;
}

CUdeviceptr cu_address(acg_buffer *b) { return (CUdeviceptr)cu_native_buffer(b).address; }

void cu_engine_bind(const bs_driver *drv, cu_engine *eng) {
    *(void **)&eng->alloc = cu_entry(drv, "cuMemAlloc", 3020);
    *(void **)&eng->release = cu_entry(drv, "cuMemFree", 3020);
    *(void **)&eng->memset32 = cu_entry(drv, "cuMemsetD32Async", 3020);
    *(void **)&eng->h2d = cu_entry(drv, "cuMemcpyHtoDAsync", 3020);
    *(void **)&eng->d2d = cu_entry(drv, "cuMemcpyDtoDAsync", 3020);
    *(void **)&eng->d2h = cu_entry(drv, "cuMemcpyDtoHAsync", 3020);
    *(void **)&eng->sync = cu_entry(drv, "cuStreamSynchronize", 2000);
}

unsigned cu_bits_of(float v) {
    unsigned b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* ---- the model's matmul on a tall grid ------------------------------------------------------ */

void cu_tall_open(cu_tall *t, acg_device *dev) {
    memset(t, 0, sizeof *t);
    TC_OK(acg_kernel_get(dev, "matmul_f32", &t->matmul));
    t->out = tc_buffer(dev, CU_TALL_ROWS * sizeof(float));
    t->x = tc_buffer(dev, CU_TALL_ROWS * sizeof(float));
    t->w = tc_buffer(dev, sizeof(float));
}

void cu_tall_rows(const cu_tall *t, uint32_t n, acg_arg args[6], acg_dims *dims) {
    const acg_arg a[6] = {acg_arg_buffer(t->out, 0),
                          acg_arg_buffer(t->x, 0),
                          acg_arg_buffer(t->w, 0),
                          acg_arg_u32(1),
                          acg_arg_u32(1),
                          acg_arg_u32(n)};
    memcpy(args, a, sizeof a);
    *dims = (acg_dims){{1, n, 1}, {0, 0, 0}};
}

void cu_tall_close(cu_tall *t) {
    TC_OK(acg_buffer_free(t->w));
    TC_OK(acg_buffer_free(t->x));
    TC_OK(acg_buffer_free(t->out));
}
