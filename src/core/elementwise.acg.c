/* elementwise.acg.c — the core's four kernels, written once (include/acg/kernel.h) for every
 * backend: acg_add_kernels builds this file into each form a backend of the build takes (C, and
 * OpenCL C, SPIR-V or a CUDA image where the build has their compilers), and elementwise.c makes
 * them the core's kernels. acg.h documents each (acg_kernel_get). */
#include <acg/kernel.h>

ACG_KERNEL(fill_f32, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_F32(value)) { y[acg_id(0)] = value; }

ACG_KERNEL(add_scalar_f32, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x),
           ACG_F32(a)) {
    const uint32_t i = acg_id(0);
    y[i] = x[i] + a;
}

ACG_KERNEL(axpy_f32, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x), ACG_F32(a)) {
    const uint32_t i = acg_id(0);
    y[i] = a * x[i] + y[i];
}

/* The launch's offsets select the windows; the two are one window or disjoint (acg_kernel_launch
 * refuses other overlaps), so copying item by item is a copy. */
ACG_KERNEL(copy_f32, ACG_ELEMENTWISE, ACG_BUF(float, dst), ACG_BUF(const float, src)) {
    const uint32_t i = acg_id(0);
    dst[i] = src[i];
}
