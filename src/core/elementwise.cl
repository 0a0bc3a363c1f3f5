/* elementwise.cl - the OpenCL C of the core's kernels (elementwise.c), built once per device.
 *
 * Each buffer argument arrives as a pointer and a byte offset (OpenCL passes buffers without
 * offsets, and sub-buffers have alignment rules), so the same launch works for any window of
 * any buffer. Contraction into fused multiply-adds is off so results match the cpu backend bit
 * for bit. */
#pragma OPENCL FP_CONTRACT OFF

#define AT(type, p, off) ((global type *)((global char *)(p) + (off)))

kernel void fill_f32(global float *y, ulong y_off, float value) {
    size_t i = get_global_id(0);
    AT(float, y, y_off)[i] = value;
}

kernel void add_scalar_f32(global float *y, ulong y_off, global float *x, ulong x_off, float a) {
    size_t i = get_global_id(0);
    AT(float, y, y_off)[i] = AT(float, x, x_off)[i] + a;
}

kernel void axpy_f32(global float *y, ulong y_off, global float *x, ulong x_off, float a) {
    size_t i = get_global_id(0);
    global float *yy = AT(float, y, y_off);
    yy[i] = a * AT(float, x, x_off)[i] + yy[i];
}

kernel void copy_f32(global float *dst, ulong dst_off, global float *src, ulong src_off) {
    size_t i = get_global_id(0);
    AT(float, dst, dst_off)[i] = AT(float, src, src_off)[i];
}
