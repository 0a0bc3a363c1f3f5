/* cuda_entry.h — a CUDA driver entry point as an engine calling CUDA itself resolves it, for the
 * cuda backend's tests on acg's CUDA test driver (compiled into test_cuda_backend and
 * test_cuda_engine). */
#ifndef ACG_TESTS_CUDA_ENTRY_H
#define ACG_TESTS_CUDA_ENTRY_H

#include "backend_scene.h" /* bs_driver */

/* The entry point `name` at ABI `version`, through the bound driver's cuGetProcAddress_v2;
 * asserts that the driver serves it. */
void *cu_entry(const bs_driver *drv, const char *name, int version);

#endif
