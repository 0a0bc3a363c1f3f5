/* test_kernels.cl: the OpenCL C of the kernel tests register (test_kernel_register.c): the
 * opencl backend builds it at run time, the build compiles it to SPIR-V for level_zero. */
#pragma OPENCL FP_CONTRACT OFF

#define AT(p, off) ((global float *)((global char *)(p) + (off)))

/* out (n, width) = x (n, width) * w (width) per row. */
kernel void tk_rowscale(global float *out, ulong out_off, global float *x, ulong x_off,
                        global float *w, ulong w_off, uint width, uint n) {
    size_t c = get_global_id(0), r = get_global_id(1);
    if (c >= width || r >= n) {
        return;
    }
    AT(out, out_off)[r * width + c] = AT(x, x_off)[r * width + c] * AT(w, w_off)[c];
}
