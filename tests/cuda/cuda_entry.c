/* cuda_entry.c — see cuda_entry.h. */
#include "cuda_entry.h"

#include <cuda.h>
#include <cudaTypedefs.h>

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
