/* acgtest_nccl.h — the control API of acg's test NCCL (libacg_test_nccl.so).
 *
 * The test NCCL stands in for libnccl.so.2 next to acg's CUDA test driver: the cuda backend
 * dlopens the path in ACG_NCCL_LIBRARY and resolves the functions of
 * src/backends/cuda/nccl_abi.h, which this library exports with NCCL's ABI. It knows one rank
 * only: ncclCommInitRank with more is ncclInvalidUsage. Its allreduce of one rank changes
 * nothing in place, copies out of place in stream order (the driver's cuMemcpyDtoDAsync), and
 * then queues a host function that counts a run (cuLaunchHostFunc): both go through the test
 * driver's own entry points, so inside a stream capture they become graph nodes that every
 * replay runs, as NCCL's kernels do. A communicator holds an event of the context current at
 * its initialization, as NCCL's resources live in it, so a leaked one shows in
 * acgtest_cuda_live too. fake_nccl.c lists what it simplifies. Built for the tests only.
 *
 * Tests reach these functions with dlsym on the library the backend already loaded, e.g.
 *     void *h = dlopen(getenv("ACG_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
 *     acgtest_nccl_calls_fn calls;
 *     *(void **)&calls = dlsym(h, "acgtest_nccl_calls");
 * The backend tells this library from a real NCCL by its export of acgtest_nccl_calls. Every
 * function here is thread-safe.
 *
 * Environment, read once, at the library's first use:
 *   ACGTEST_NCCL_VERSION  what ncclGetVersion reports (NCCL's code); default 22809 (2.28.9).
 *   ACGTEST_NCCL_FAIL     "name:nth:code": as acgtest_nccl_fail(name, nth, code) from the start.
 */
#ifndef ACG_TESTS_CUDA_DRIVER_ACGTEST_NCCL_H
#define ACG_TESTS_CUDA_DRIVER_ACGTEST_NCCL_H

#include "../driver_common/acgtest_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACGTEST_NCCL_API ACGTEST_API

/* Makes the nth (1-based) call from now of function `name` return `code` (an ncclResult_t)
 * without doing anything else. name NULL or "*": the nth call of any function except
 * ncclGetErrorString and ncclGetLastError. nth 0 clears the pending injection. One injection is
 * pending at a time; it fires once. An unknown name is reported on stderr and never fires. The
 * call still counts in acgtest_nccl_calls. */
ACGTEST_FUNCTION(void, acgtest_nccl_fail, (const char *name, unsigned nth, int code));

/* How many times function `name` was called since the start or the last
 * acgtest_nccl_reset_counts, failed and injected calls included. NULL: the sum over every
 * function except ncclGetErrorString and ncclGetLastError. 0 for an unknown name. */
ACGTEST_FUNCTION(unsigned long, acgtest_nccl_calls, (const char *name));

/* How many allreduces ran on a stream (eagerly, or as a node of a replayed graph) since the
 * start or the last acgtest_nccl_reset_counts. */
ACGTEST_FUNCTION(unsigned long, acgtest_nccl_runs, (void));

/* How many communicators are alive (initialized, not yet destroyed or aborted). */
ACGTEST_FUNCTION(long, acgtest_nccl_live, (void));

/* Makes ncclCommGetAsyncError report `code` for every communicator from now on, as a
 * communicator that failed asynchronously (a peer lost) does; 0 clears it. */
ACGTEST_FUNCTION(void, acgtest_nccl_set_async_error, (int code));

/* Sets every call count and the run count to zero (the live count stays). */
ACGTEST_FUNCTION(void, acgtest_nccl_reset_counts, (void));

#ifdef __cplusplus
}
#endif

#endif /* ACG_TESTS_CUDA_DRIVER_ACGTEST_NCCL_H */
