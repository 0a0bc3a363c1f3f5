/* loop.cu — the two kernels of a loop (loop.c), one work item each. acg_loop_begin runs just
 * before the loop's WHILE node, every time the graph reaches it (a nested loop's, at every run of
 * the outer body: a handle's default is applied once per launch only): it zeroes the loop's run
 * counter and sets the handle, so the body runs once at least. acg_loop_next ends every run of
 * the body: it counts the run and tells the WHILE node whether to run the body again, while the
 * condition word the body wrote is non-zero and fewer than max runs were made.
 * cudaGraphSetConditional is a device-runtime builtin: no relocatable code is needed. */
#include <cuda_runtime.h>

extern "C" __global__ void acg_loop_begin(cudaGraphConditionalHandle handle, unsigned *counter) {
    *counter = 0u;
    cudaGraphSetConditional(handle, 1u);
}

extern "C" __global__ void acg_loop_next(cudaGraphConditionalHandle handle, const unsigned *cond,
                                         unsigned *counter, unsigned max) {
    unsigned runs = ++*counter;
    cudaGraphSetConditional(handle, (*cond != 0u && runs < max) ? 1u : 0u);
}
