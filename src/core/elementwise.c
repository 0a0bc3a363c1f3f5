/* elementwise.c — the core's own kernels: four elementwise f32 kernels, defined once with their
 * C code for the cpu backend, their OpenCL C (elementwise.cl, embedded by the build), where the
 * build has nvcc their CUDA C (elementwise.cu, compiled into a fatbin and embedded), and where
 * it has clang and llvm-spirv elementwise.cl again as SPIR-V (compiled and embedded). They
 * are registered from the start and never unregistered; every other kernel belongs to the layer
 * that registers it. The build turns off contraction into fused multiply-adds
 * (-ffp-contract=off), so a*b+c rounds twice here as in OpenCL C and every backend matches the
 * cpu backend bit for bit. */
#include <string.h>

#include "core/acg-impl.h"
#include "core_kernels_cl.h"

/* The fatbin holding every kernel of elementwise.cu, under the kernel's own name. */
#ifdef ACG_HAVE_CUDA_KERNELS
#include "core_kernels_cuda.h"
#define CUDA_CODE(fn_)                                                                             \
    { acg__core_kernels_fatbin, sizeof acg__core_kernels_fatbin, #fn_ }
#define CUDA_IMPL(fn_)                                                                             \
    {"cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, acg__core_kernels_fatbin,                               \
     sizeof acg__core_kernels_fatbin, #fn_},
#define N_CUDA 1u
#else
#define CUDA_CODE(fn_)                                                                             \
    { NULL, 0, NULL }
#define CUDA_IMPL(fn_)
#define N_CUDA 0u
#endif

/* The SPIR-V module compiled from elementwise.cl, for the level_zero backend. */
#ifdef ACG_HAVE_SPIRV_KERNELS
#include "core_kernels_spv.h"
#define SPIRV_CODE(fn_)                                                                            \
    { acg__core_kernels_spv, sizeof acg__core_kernels_spv, #fn_ }
#define SPIRV_IMPL(fn_)                                                                            \
    {"level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, acg__core_kernels_spv,                          \
     sizeof acg__core_kernels_spv, #fn_},
#define N_SPIRV 1u
#else
#define SPIRV_CODE(fn_)                                                                            \
    { NULL, 0, NULL }
#define SPIRV_IMPL(fn_)
#define N_SPIRV 0u
#endif

static void fill_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float v = a[1].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = v;
    }
}

static void add_scalar_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float *x = a[1].p;
    const float s = a[2].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = x[i] + s;
    }
}

static void axpy_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    const float *x = a[1].p;
    const float alpha = a[2].f32;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = alpha * x[i] + y[i];
    }
}

static void copy_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    memmove(a[0].p, a[1].p, (size_t)global[0] * sizeof(float));
}

#define B ACG_ARG_BUFFER
#define F ACG_ARG_F32

#define LIST(...) __VA_ARGS__

/* An elementwise f32 kernel: 1-D, 4 bytes per item of each buffer. The core's definitions are
 * not copied at registration, so each carries the list of implementations (.impls, a static
 * array per kernel) that a copy would hold: the same code as its opencl, cuda and spirv. */
#define ELEMENTWISE(fn_, n_args_, types_, bytes_)                                                  \
    {                                                                                              \
        .name = #fn_, .core = true,                                                                \
        .d = {                                                                                     \
            .size = sizeof(acg_kernel_desc),                                                       \
            .name = #fn_,                                                                          \
            .n_args = n_args_,                                                                     \
            .types = {types_},                                                                     \
            .bytes_per_item = {bytes_},                                                            \
            .dims = 1,                                                                             \
            .flags = ACG_KERNEL_ELEMENTWISE,                                                       \
            .exactness = ACG_KERNEL_EXACT_EVERY_BACKEND,                                           \
            .cpu = {fn_},                                                                          \
            .opencl = {acg__core_kernels_cl, #fn_},                                                \
            .cuda = CUDA_CODE(fn_),                                                                \
            .spirv = SPIRV_CODE(fn_),                                                              \
            .impls = (const acg_kernel_impl[]){{"opencl", ACG_KERNEL_FORMAT_OPENCL_C,              \
                                                acg__core_kernels_cl, 0, #fn_},                    \
                                               CUDA_IMPL(fn_) SPIRV_IMPL(fn_)},                    \
            .n_impls = 1u + N_CUDA + N_SPIRV,                                                      \
        },                                                                                         \
    }

static const acg__kernel_def kernels[] = {
    ELEMENTWISE(fill_f32, 2, LIST(B, F), LIST(4, 0)),
    ELEMENTWISE(add_scalar_f32, 3, LIST(B, B, F), LIST(4, 4, 0)),
    ELEMENTWISE(axpy_f32, 3, LIST(B, B, F), LIST(4, 4, 0)),
    ELEMENTWISE(copy_f32, 2, LIST(B, B), LIST(4, 4)),
};

#undef ELEMENTWISE
#undef CUDA_CODE
#undef CUDA_IMPL
#undef N_CUDA
#undef SPIRV_CODE
#undef SPIRV_IMPL
#undef N_SPIRV
#undef LIST
#undef B
#undef F

const acg__kernel_def *acg__core_kernels(size_t *count) {
    *count = sizeof kernels / sizeof kernels[0];
    return kernels;
}
