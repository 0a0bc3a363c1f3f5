/* scale_add.acg.c — a kernel written once (<acg/kernel.h>, docs/kernels.md): this text is the C
 * of the cpu backend, the OpenCL C of opencl (and the SPIR-V of level_zero) and the CUDA C of
 * cuda. acg_add_kernels(scale_add SET scale_add ...) in CMakeLists.txt builds it for every
 * backend the installed acg has; scale_add.c registers it as "scale_add/scale_add". */
#include <acg/kernel.h>

/* y[i] = a * x[i] + y[i] */
ACG_KERNEL(scale_add, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x), ACG_F32(a)) {
    const uint32_t i = acg_id(0);
    y[i] = a * x[i] + y[i];
}
