/* cuda_native.c — see cuda_native.h. */
#include "cuda_native.h"

#include <string.h>

#include <cudaTypedefs.h>

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

unsigned cu_bits_of(float v) {
    unsigned b;
    memcpy(&b, &v, sizeof b);
    return b;
}
