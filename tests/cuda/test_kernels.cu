/* test_kernels.cu - the CUDA C of the kernels the tests register (test_kernel_register.c's
 * tk_rowscale), compiled by the build into one fatbin the tests embed
 * (cmake/cuda_kernels.cmake), so the same tests run on the cuda backend.
 *
 * Each kernel is its test's OpenCL C, work item by work item, under the cuda backend's
 * convention: a buffer argument is one pointer (the window's byte offset already added), a
 * scalar its C type, then the launch's global sizes acg_gx, acg_gy, acg_gz; a thread past the
 * global size in any dimension returns at once. Rounding operations are written as intrinsics,
 * which nvcc never contracts, so the cpu backend's bits come out. */

/* A thread's work item in dimension d (x, y or z). */
#define ACG_ID(d) ((unsigned long long)blockIdx.d * blockDim.d + threadIdx.d)

/* True for the threads the rounding up to whole blocks added. */
#define ACG_PAST_GRID() (ACG_ID(x) >= acg_gx || ACG_ID(y) >= acg_gy || ACG_ID(z) >= acg_gz)

#define ACG_GRID unsigned int acg_gx, unsigned int acg_gy, unsigned int acg_gz

/* out (n, width) = x (n, width) * w (width) per row; out may be x itself. */
extern "C" __global__ void tk_rowscale(float *out, const float *x, const float *w,
                                       unsigned int width, unsigned int n, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t c = ACG_ID(x), r = ACG_ID(y);
    if (c >= width || r >= n) {
        return;
    }
    out[r * width + c] = __fmul_rn(x[r * width + c], w[c]);
}
