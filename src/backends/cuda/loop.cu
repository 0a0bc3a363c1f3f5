/* loop.cu — the kernel that ends every run of a loop's body (loop.c): it counts the run in the
 * loop's counter (zeroed at each replay) and tells the WHILE node whether to run the body again:
 * while the condition word the body wrote is non-zero and fewer than max runs were made.
 * cudaGraphSetConditional is a device-runtime builtin: no relocatable code is needed. */
#include <cuda_runtime.h>

extern "C" __global__ void acg_loop_next(cudaGraphConditionalHandle handle, const unsigned *cond,
                                         unsigned *counter, unsigned max) {
    unsigned runs = ++*counter;
    cudaGraphSetConditional(handle, (*cond != 0u && runs < max) ? 1u : 0u);
}
