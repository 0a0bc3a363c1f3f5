/* elementwise.cu - the CUDA C of the core's kernels (elementwise.c), compiled by the build into
 * one fatbin that elementwise.c's definitions embed (cmake/cuda_kernels.cmake).
 *
 * Each kernel is elementwise.cl's, work item by work item, under the cuda backend's convention:
 * a buffer argument is one pointer (the backend has added the window's byte offset), a scalar
 * its C type, then the launch's global sizes acg_gx, acg_gy, acg_gz. The grid is rounded up to
 * whole blocks, so a thread past the global size in any dimension returns at once. Every
 * rounding operation is written as its intrinsic (__fadd_rn, __fmul_rn), which nvcc never
 * contracts into a fused multiply-add, so the results match the cpu backend bit for bit
 * whatever the flags; the build also passes --fmad=false. */

/* A thread's work item in dimension d (x, y or z). */
#define ACG_ID(d) ((unsigned long long)blockIdx.d * blockDim.d + threadIdx.d)

/* True for the threads the rounding up to whole blocks added. */
#define ACG_PAST_GRID() (ACG_ID(x) >= acg_gx || ACG_ID(y) >= acg_gy || ACG_ID(z) >= acg_gz)

#define ACG_GRID unsigned int acg_gx, unsigned int acg_gy, unsigned int acg_gz

extern "C" __global__ void fill_f32(float *y, float value, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x);
    y[i] = value;
}

extern "C" __global__ void add_scalar_f32(float *y, const float *x, float a, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x);
    y[i] = __fadd_rn(x[i], a);
}

extern "C" __global__ void axpy_f32(float *y, const float *x, float a, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x);
    y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
}

extern "C" __global__ void copy_f32(float *dst, const float *src, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x);
    dst[i] = src[i];
}
