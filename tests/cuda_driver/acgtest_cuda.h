/* acgtest_cuda.h — the control API of acg's CUDA test driver (libacg_test_cuda.so).
 *
 * The test driver stands in for libcuda.so.1 where no GPU is: the cuda backend dlopens the path
 * in ACG_CUDA_DRIVER instead of the real driver and resolves every entry point of
 * src/backends/cuda/entry_points.h through its cuGetProcAddress_v2. Device memory is host
 * memory, each stream is a host thread, and a kernel runs acg's own cpu implementation of the
 * kernel of the same name (acgtest_cuda_bind_kernels). fake_cuda.c lists what it simplifies.
 * It is built for the tests only and never installed.
 *
 * Tests reach these functions with dlsym on the driver the backend already loaded, e.g.
 *     void *drv = dlopen(getenv("ACG_CUDA_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
 *     acgtest_cuda_live_fn live;
 *     *(void **)&live = dlsym(drv, "acgtest_cuda_live");
 * Every function here is thread-safe and may be called before the driver is used.
 *
 * Environment, read once, at the driver's first use:
 *   ACGTEST_CUDA_VERSION    the driver's version (cuDriverGetVersion, and the highest
 *                            cudaVersion cuGetProcAddress takes); default 13000. An entry point
 *                            newer than it is reported as not found, as an older driver would.
 *   ACGTEST_CUDA_DEVICES    how many devices cuDeviceGetCount reports, 0 to 8; default 1.
 *   ACGTEST_CUDA_MEM_MB     each device's memory (cuDeviceTotalMem); default 16384.
 *   ACGTEST_CUDA_HIDE       a comma-separated list of entry points cuGetProcAddress reports as
 *                            not found (a driver that lacks them, e.g. cuGraphExecUpdate).
 *   ACGTEST_CUDA_FAIL       "name:nth:code": as acgtest_cuda_fail(name, nth, code) from the
 *                            start ("*" for any entry point).
 *   ACGTEST_CUDA_INIT_FAIL  a CUresult cuInit returns every time (e.g. 100, NO_DEVICE).
 */
#ifndef ACG_TESTS_CUDA_DRIVER_ACGTEST_CUDA_H
#define ACG_TESTS_CUDA_DRIVER_ACGTEST_CUDA_H

#include "../driver_common/acgtest_api.h"
#include "acg/acg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACGTEST_CUDA_API ACGTEST_API

/* Gives the driver the kernels it runs: cuLibraryGetKernel(&k, lib, name) looks the CUDA
 * function `name` up with `lookup` and launches of k call the desc's cpu.fn (the cpu backend's
 * implementation) on the stream's worker thread. The cuda backend calls it right after loading
 * a driver that exports it; the real driver does not. The desc must stay valid until
 * cuLibraryGetKernel returns; what launches need is copied. NULL unbinds. Without a lookup, or
 * for a function the library's image does not hold, cuLibraryGetKernel gives
 * CUDA_ERROR_NOT_FOUND. What an image holds, and each function's parameters (which
 * cuFuncGetParamInfo reports), the driver reads from the image itself, never from the desc: a
 * fatbin nvcc made, or a test's own image (the fatbin magic, then "acgtest-cuda-image\n" and
 * one line per function, its name and its parameters' sizes: "my_k 8 4 4 4 4\n"; NUL ends it;
 * see fake_kernel.c). lookup is called without the driver's lock held. */
/* The lookup: the definition whose cuda code is the image of size bytes (a library's) and holds
 * the function name. */
typedef const acg_kernel_desc *(*acgtest_cuda_lookup_fn)(const void *image, size_t size,
                                                         const char *name);
ACGTEST_FUNCTION(void, acgtest_cuda_bind_kernels, (acgtest_cuda_lookup_fn lookup));

/* Makes the nth (1-based) call from now of entry point `name` return `code` (a CUresult)
 * without doing anything else. name NULL or "*": the nth call of any entry point except
 * cuGetErrorName and cuGetErrorString. nth 0 clears the pending injection. One injection is
 * pending at a time: a new one replaces it; it fires once. An unknown name is reported on
 * stderr and never fires. The call still counts in acgtest_cuda_calls. */
ACGTEST_FUNCTION(void, acgtest_cuda_fail, (const char *name, unsigned nth, int code));

/* Gives device `device`'s primary context the fault `code` (a CUresult; 0 clears it), as work
 * that faulted on a GPU would (CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ILLEGAL_ADDRESS, ...): from
 * then on every call that uses the context returns it (cuCtxSetCurrent, the primary context's
 * retain and release, device queries and library unloads do not), including releases, which
 * still release, and queued work no longer runs. The context's teardown (its last
 * cuDevicePrimaryCtxRelease) clears it, as a new context would start clean. An unknown device
 * is reported on stderr. */
ACGTEST_FUNCTION(void, acgtest_cuda_set_sticky, (int device, int code));

/* How many times entry point `name` was called since the start or the last
 * acgtest_cuda_reset_counts, failed and injected calls included. NULL: the sum over every
 * entry point except cuGetErrorName and cuGetErrorString. 0 for an unknown name. */
ACGTEST_FUNCTION(unsigned long, acgtest_cuda_calls, (const char *name));

/* How many driver objects are alive: device allocations, pinned allocations, host
 * registrations, streams, events, libraries, graphs, graph execs and primary context retains,
 * plus the objects a context's teardown (its last cuDevicePrimaryCtxRelease) or the driver's
 * unload had to free for an owner that leaked them: a leak hidden by a teardown still shows.
 * A conditional node's body graphs and a graph's conditional handles are parts of their graph
 * (no call destroys them), counted with it; cuStreamEndCapture of a capture into an existing
 * graph makes no new one. A test checks that it comes back to its value at the start. */
ACGTEST_FUNCTION(long, acgtest_cuda_live, (void));

/* Sets every call count to zero (the live count is not a count of calls, and stays). */
ACGTEST_FUNCTION(void, acgtest_cuda_reset_counts, (void));

#ifdef __cplusplus
}
#endif

#endif /* ACG_TESTS_CUDA_DRIVER_ACGTEST_CUDA_H */
