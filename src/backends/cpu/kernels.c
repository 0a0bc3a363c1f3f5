/* kernels.c — the cpu backend's kernel library: plain C loops over the 1-D grid.
 * The build turns off contraction into fused multiply-adds (-ffp-contract=off), so results do
 * not depend on the compiler's choice and every backend can match the cpu oracle bit for bit. */
#include <string.h>

#include "backends/cpu/cpu.h"

static void fill_f32(const cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float v = a[1].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = v;
    }
}

static void add_scalar_f32(const cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float *x = a[1].p;
    const float s = a[2].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = x[i] + s;
    }
}

static void axpy_f32(const cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float *x = a[1].p;
    const float alpha = a[2].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = alpha * x[i] + y[i];
    }
}

static void copy_f32(const cpu_arg *a, const uint32_t global[3]) {
    memmove(a[0].p, a[1].p, (size_t)global[0] * sizeof(float));
}

static const cpu_kernel kernels[] = {
    {"fill_f32", fill_f32},
    {"add_scalar_f32", add_scalar_f32},
    {"axpy_f32", axpy_f32},
    {"copy_f32", copy_f32},
};

const cpu_kernel *acg__cpu_kernel_find(const char *name) {
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (strcmp(kernels[i].name, name) == 0) {
            return &kernels[i];
        }
    }
    return NULL;
}
