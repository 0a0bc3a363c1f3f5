/*
 * acg/kernel.h — one kernel source for every backend.
 *
 * A file that includes this header and defines its kernels with ACG_KERNEL is at once C (the
 * cpu backend's code), OpenCL C 1.2 (the opencl backend's, and SPIR-V through clang for
 * level_zero) and CUDA C++ (cuda). Each kernel is written as the code of ONE work item; the
 * header gives it acg's calling convention on each backend, its work item's index, and acg's
 * arithmetic, so that it computes the same bits on every backend:
 *
 *     #include <acg/kernel.h>
 *
 *     // y[i] = a * x[i] + y[i]
 *     ACG_KERNEL(axpy, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x), ACG_F32(a)) {
 *         const uint32_t i = acg_id(0);
 *         y[i] = a * x[i] + y[i];
 *     }
 *
 * acg_add_kernels() (the CMake function installed with the package: docs/kernels.md) builds such
 * a file for every backend the installed acg has and generates the code that registers its
 * kernels as one set.
 *
 * ACG_KERNEL(name, rule, params...) — params are, in the launch's argument order:
 *   ACG_BUF(type, name [, f1 [, f2]])  a buffer of items of `type` (add const to read only); the
 *       body sees a pointer to the launch's window (its offset applied). Its item size is
 *       sizeof(type), which the window's offset must be a multiple of. Under ACG_GRID it reaches
 *       sizeof(type) * f1 * f2 bytes, each factor the name of an integer scalar parameter or
 *       ACG_GRID_X, ACG_GRID_Y, ACG_GRID_Z (the launch's global size), ACG_ONE when omitted.
 *   ACG_I32(name), ACG_U32(name), ACG_I64(name), ACG_U64(name), ACG_F32(name)  scalars.
 * rule says how far the buffers reach, which acg_kernel_launch checks before anything runs:
 *   ACG_ELEMENTWISE        1-D; every buffer reaches global[0] items (acg.h's
 *                          ACG_KERNEL_ELEMENTWISE).
 *   ACG_GRID(c0 [, c1 [, c2]])  as many dimensions as covers; each c is the integer scalar
 *                          parameter the grid must cover in that dimension, or ACG_ONE for none
 *                          (acg_kernel_desc.grid_covers); buffers reach what ACG_BUF's factors
 *                          say (acg_kernel_desc.reach).
 *   ACG_SHAPE(fn, dims)    the acg_kernel_shape_fn fn (declared for C only: #if ACG_TARGET_C).
 * At most 16 parameters, at least one. The body follows the macro as a function body; it
 * returns nothing, and a work item past the counts it computes returns at once (a grid may be
 * larger than the work).
 *
 * In the body:
 *   acg_id(d), acg_size(d)  the work item's index and the launch's global size in dimension d
 *                           (uint32_t, d a constant 0..2).
 *   ACG_GLOBAL              the address space of buffer memory: write a pointer derived from a
 *                           buffer parameter, or a helper's pointer parameter, as
 *                           `ACG_GLOBAL const float *row` (OpenCL C needs it; empty elsewhere).
 *   ACG_FUNC                before a helper function the kernels call (`ACG_FUNC float f(...)`).
 *   ACG_U64_C(c)            a 64-bit unsigned constant.
 *   int32_t, uint32_t, int64_t, uint64_t, size_t, bool, float   on every backend.
 *
 * The one arithmetic (docs/arithmetic.md): + - * on floats round once each and are never fused
 * into a multiply-add (the build turns contraction off: -ffp-contract=off, OpenCL's FP_CONTRACT
 * OFF, nvcc's --fmad=false; acg_add_kernels passes them); the rest is written as calls:
 *   acg_fma(a, b, c)   a * b + c rounded once
 *   acg_add, acg_sub, acg_mul (a, b)   +, - and * rounded once whatever nvcc's flags (in C,
 *                      gcc may still fuse them unless given -ffp-contract=off)
 *   acg_div(a, b)      a / b correctly rounded (also `/`, under the build's flags)
 *   acg_sqrt(x)        correctly rounded square root
 *   acg_exp(x)         acg's e^x: the same bits everywhere (error below one ulp; 0 below -87,
 *                      +inf from 88.72283935546875, NaN for NaN); never the platform's exp
 *   acg_as_float(u), acg_as_uint(f)   the bits of a float, and back
 *   acg_isnan(x), acg_isfinite(x)
 * The platform's other math functions (expf, logf, sinf, ...) differ between backends; a kernel
 * that wants equal bits does not call them. No barriers, local memory or atomics: a work item
 * reads and writes only memory no other work item of the launch writes.
 *
 * The source is the intersection of C11, OpenCL C 1.2 and C++ (nvcc): no implicit void *
 * conversions, no designated initializers, no VLAs, no library calls; C-only code (a shape
 * callback, say) goes under `#if ACG_TARGET_C`. The only header a device compiler sees is this
 * one: acg_add_kernels inlines it into the OpenCL C it embeds, and other #include lines must be
 * under `#if ACG_TARGET_C`.
 */
#ifndef ACG_KERNEL_H
#define ACG_KERNEL_H

/* Which compiler reads the file: exactly one of these is 1. */
#if defined(__OPENCL_C_VERSION__)
#define ACG_TARGET_OPENCL 1
#define ACG_TARGET_CUDA 0
#define ACG_TARGET_C 0
#elif defined(__CUDACC__)
#define ACG_TARGET_OPENCL 0
#define ACG_TARGET_CUDA 1
#define ACG_TARGET_C 0
#else
#define ACG_TARGET_OPENCL 0
#define ACG_TARGET_CUDA 0
#define ACG_TARGET_C 1
#endif

/* ---- each language's spelling ------------------------------------------------------------- */

#if ACG_TARGET_OPENCL

#pragma OPENCL FP_CONTRACT OFF
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;
#define ACG_GLOBAL global
#define ACG_FUNC static inline
#define ACG_U64_C(c) c##UL
#define ACG__KUNUSED __attribute__((unused))
#define acg_fma(a, b, c) fma((float)(a), (float)(b), (float)(c))
#define acg_div(a, b) ((float)(a) / (float)(b)) /* the backends build correctly rounded */
#define acg_sqrt(x) sqrt((float)(x))
#define acg_as_float(u) as_float((uint)(u))
#define acg_as_uint(f) as_uint((float)(f))
#define acg_add(a, b) ((float)(a) + (float)(b))
#define acg_sub(a, b) ((float)(a) - (float)(b))
#define acg_mul(a, b) ((float)(a) * (float)(b))

#elif ACG_TARGET_CUDA

#include <stddef.h>
#include <stdint.h>
#define ACG_GLOBAL
#define ACG_FUNC __device__ static inline
#define ACG_U64_C(c) c##ULL
#define ACG__KUNUSED __attribute__((unused))
/* Intrinsics that round as IEEE says whatever nvcc's flags. */
#define acg_fma(a, b, c) __fmaf_rn((float)(a), (float)(b), (float)(c))
#define acg_div(a, b) __fdiv_rn((float)(a), (float)(b))
#define acg_sqrt(x) __fsqrt_rn((float)(x))
#define acg_as_float(u) __uint_as_float((unsigned int)(u))
#define acg_as_uint(f) __float_as_uint((float)(f))
#define acg_add(a, b) __fadd_rn((float)(a), (float)(b))
#define acg_sub(a, b) __fsub_rn((float)(a), (float)(b))
#define acg_mul(a, b) __fmul_rn((float)(a), (float)(b))

#else /* C */

#if defined(__FAST_MATH__)
#error "acg/kernel.h: -ffast-math (or -Ofast) changes the arithmetic the kernels must share"
#endif
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "acg/acg.h"
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* gcc ignores it: the build passes -ffp-contract=off */
#endif
#define ACG_GLOBAL
#define ACG_FUNC static inline
#define ACG_U64_C(c) UINT64_C(c)
#if defined(__GNUC__)
#define ACG__KUNUSED __attribute__((unused))
#else
#define ACG__KUNUSED
#endif
static inline float acg_fma(float a, float b, float c) { return fmaf(a, b, c); }
/* The cpu backend's arguments, read through functions: a member name passed through the macros
 * below would be expanded by a user's macro of that name. */
static inline void *acg__cpu_p(const acg_cpu_arg *a) { return a->p; }
static inline int32_t acg__cpu_i32(const acg_cpu_arg *a) { return a->i32; }
static inline uint32_t acg__cpu_u32(const acg_cpu_arg *a) { return a->u32; }
static inline int64_t acg__cpu_i64(const acg_cpu_arg *a) { return a->i64; }
static inline uint64_t acg__cpu_u64(const acg_cpu_arg *a) { return a->u64; }
static inline float acg__cpu_f32(const acg_cpu_arg *a) { return a->f32; }
static inline float acg_add(float a, float b) { return a + b; }
static inline float acg_sub(float a, float b) { return a - b; }
static inline float acg_mul(float a, float b) { return a * b; }
static inline float acg_div(float a, float b) { return a / b; }
static inline float acg_sqrt(float x) { return sqrtf(x); }
static inline float acg_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t acg_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

#endif

/* NaN is the one float unequal to itself; x - x is 0 for every finite x and NaN for inf. */
#define acg_isnan(x) ((x) != (x))
#define acg_isfinite(x) ((x) - (x) == 0.0f)

/* e^x, acg's own (docs/arithmetic.md): n = round(x log2 e); r = x - n ln 2 in two fused steps,
 * ln 2 split so that n * its high part is exact for |n| <= 128; the degree-7 Taylor polynomial
 * of e^r on |r| <= ln(2)/2 by Horner with fma; then the result scaled by 2^n in two exact steps
 * (2^(n - n/2) * 2^(n/2)), so that n = 128 needs no special case. Below -87 the true value is
 * under 2^-125, and the result is 0 so that no backend has to produce a subnormal. */
ACG__KUNUSED ACG_FUNC float acg_exp(float x) {
    if (!(x <= 88.72283935546875f)) {
        return acg_isnan(x) ? x : acg_as_float(0x7f800000u);
    }
    if (x < -87.0f) {
        return 0.0f;
    }
    const float t = acg_mul(x, 1.44269502162933349609375f);        /* log2 e */
    const float n = acg_sub(acg_add(t, 12582912.0f), 12582912.0f); /* rounds t */
    float r = acg_fma(n, -0.693145751953125f, x);                  /* ln 2, high part */
    r = acg_fma(n, -1.428606765330187045e-06f, r);                 /* ln 2, low part */
    float p = 1.98412701138295233249664306640625e-4f;              /* 1/7! */
    p = acg_fma(p, r, 1.38888892251998186111450195312500e-3f);     /* 1/6! */
    p = acg_fma(p, r, 8.33333376795053482055664062500000e-3f);     /* 1/5! */
    p = acg_fma(p, r, 4.16666679084300994873046875000000e-2f);     /* 1/4! */
    p = acg_fma(p, r, 1.66666671633720397949218750000000e-1f);     /* 1/3! */
    p = acg_fma(p, r, 0.5f);
    p = acg_fma(p, r, 1.0f);
    p = acg_fma(p, r, 1.0f);
    const int32_t ni = (int32_t)n, nh = ni / 2; /* (OpenCL C reserves `half`) */
    const float s1 = acg_as_float((uint32_t)(ni - nh + 127) << 23);
    const float s2 = acg_as_float((uint32_t)(nh + 127) << 23);
    return acg_mul(acg_mul(p, s1), s2);
}

/* A work item: its index and the launch's global size in each dimension. */
typedef struct acg_item {
    uint32_t id[3];
    uint32_t size[3];
} acg_item;

#define acg_id(d) (acg__it.id[d])
#define acg_size(d) (acg__it.size[d])

/* ---- parameters ---------------------------------------------------------------------------
 * Each parameter is a tuple (kind, type, name, f1, f2, acg_arg_type, acg_cpu_arg accessor) that
 * every context below unpacks its own way. Contexts and accessors have acg__ names, which a
 * user's macros cannot take, since they travel through macro arguments and would be expanded. The
 * factor and grid tokens (ACG_ONE, ACG_GRID_X...) are never macros: they are pasted into names. */

#define ACG_BUF(...) ACG__BUF(__VA_ARGS__, ACG_ONE, ACG_ONE, ~)
#define ACG__BUF(type, name, f1, f2, ...) (ACG__KB, type, name, f1, f2, ACG_ARG_BUFFER, acg__cpu_p)
#define ACG_I32(name) (ACG__KS, int32_t, name, ACG_ONE, ACG_ONE, ACG_ARG_I32, acg__cpu_i32)
#define ACG_U32(name) (ACG__KS, uint32_t, name, ACG_ONE, ACG_ONE, ACG_ARG_U32, acg__cpu_u32)
#define ACG_I64(name) (ACG__KS, int64_t, name, ACG_ONE, ACG_ONE, ACG_ARG_I64, acg__cpu_i64)
#define ACG_U64(name) (ACG__KS, uint64_t, name, ACG_ONE, ACG_ONE, ACG_ARG_U64, acg__cpu_u64)
#define ACG_F32(name) (ACG__KS, float, name, ACG_ONE, ACG_ONE, ACG_ARG_F32, acg__cpu_f32)

#define ACG_ELEMENTWISE (ACG__RE, 1)
#define ACG_GRID(...) (ACG__RG, __VA_ARGS__)
#define ACG_SHAPE(fn, dims) (ACG__RS, fn, dims)

/* ---- the preprocessor's loops ---------------------------------------------------------- */

#define ACG__CAT(a, b) ACG__CAT_(a, b)
#define ACG__CAT_(a, b) a##b
#define ACG__EXPAND(...) __VA_ARGS__
#define ACG__HEAD(a, ...) a
#define ACG__TAIL(a, ...) __VA_ARGS__
#define ACG__COMMA() ,
#define ACG__NOTHING()
#define ACG__NARG(...)                                                                             \
    ACG__NARG_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define ACG__NARG_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, n, ...) n

/* m(k, i, x) for each x, i its index, sep() between. */
#define ACG__MAP(m, sep, k, ...)                                                                   \
    ACG__CAT(ACG__MAP, ACG__NARG(__VA_ARGS__))(m, sep, k, 0, __VA_ARGS__)
#define ACG__MAP1(m, s, k, i, x) m(k, i, x)
#define ACG__MAP2(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP1(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP3(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP2(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP4(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP3(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP5(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP4(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP6(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP5(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP7(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP6(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP8(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP7(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP9(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP8(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP10(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP9(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP11(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP10(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP12(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP11(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP13(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP12(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP14(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP13(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP15(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP14(m, s, k, i + 1, __VA_ARGS__)
#define ACG__MAP16(m, s, k, i, x, ...) m(k, i, x) s() ACG__MAP15(m, s, k, i + 1, __VA_ARGS__)

/* A parameter x in context ctx: ACG__<ctx>_<kind>(k, i, type, name, f1, f2, arg type, field). */
#define ACG__P(ctx, k, i, x) ACG__P_(ctx, k, i, ACG__EXPAND x)
#define ACG__P_(...) ACG__P__(__VA_ARGS__)
#define ACG__P__(ctx, k, i, kind, t, n, f1, f2, at, fld)                                           \
    ACG__##ctx##_##kind(k, i, t, n, f1, f2, at, fld)

/* The work item's function: its parameters. */
#define ACG__DECL(k, i, x) ACG__P(acg__decl, k, i, x)
#define ACG__acg__decl_ACG__KB(k, i, t, n, f1, f2, at, fld) ACG__KUNUSED ACG_GLOBAL t *n
#define ACG__acg__decl_ACG__KS(k, i, t, n, f1, f2, at, fld) ACG__KUNUSED t n

/* Forward declaration, then the body the macro's user writes. */
#define ACG__ITEM_FN(k, ...)                                                                       \
    ACG_FUNC void k##__acg_item(ACG__KUNUSED const acg_item acg__it,                               \
                                ACG__MAP(ACG__DECL, ACG__COMMA, k, __VA_ARGS__))

/* ---- ACG_KERNEL on each backend --------------------------------------------------------- */

#if ACG_TARGET_OPENCL

/* kernel void k(global T *y__acg_p, ulong y__acg_o, float a, ...): a buffer is a pointer and a
 * byte offset (acg.h: ACG_KERNEL_FORMAT_OPENCL_C). */
#define ACG__CLP(k, i, x) ACG__P(acg__clp, k, i, x)
#define ACG__acg__clp_ACG__KB(k, i, t, n, f1, f2, at, fld) global t *n##__acg_p, ulong n##__acg_o
#define ACG__acg__clp_ACG__KS(k, i, t, n, f1, f2, at, fld) t n
#define ACG__CLA(k, i, x) ACG__P(acg__cla, k, i, x)
#define ACG__acg__cla_ACG__KB(k, i, t, n, f1, f2, at, fld)                                         \
    (global t *)((global const char *)n##__acg_p + n##__acg_o)
#define ACG__acg__cla_ACG__KS(k, i, t, n, f1, f2, at, fld) n

#define ACG_KERNEL(k, rule, ...)                                                                   \
    ACG__ITEM_FN(k, __VA_ARGS__);                                                                  \
    kernel void k(ACG__MAP(ACG__CLP, ACG__COMMA, k, __VA_ARGS__)) {                                \
        const acg_item acg__it = {                                                                 \
            {(uint32_t)get_global_id(0), (uint32_t)get_global_id(1), (uint32_t)get_global_id(2)},  \
            {(uint32_t)get_global_size(0), (uint32_t)get_global_size(1),                           \
             (uint32_t)get_global_size(2)}};                                                       \
        k##__acg_item(acg__it, ACG__MAP(ACG__CLA, ACG__COMMA, k, __VA_ARGS__));                    \
    }                                                                                              \
    ACG__ITEM_FN(k, __VA_ARGS__)

#elif ACG_TARGET_CUDA

/* extern "C" __global__ void k(T *y, float a, ..., unsigned gx, gy, gz): a buffer is a pointer
 * to its window; the grid is run in whole blocks (acg.h: ACG_KERNEL_FORMAT_CUDA_IMAGE). */
#define ACG__CUP(k, i, x) ACG__P(acg__cup, k, i, x)
#define ACG__acg__cup_ACG__KB(k, i, t, n, f1, f2, at, fld) t *n
#define ACG__acg__cup_ACG__KS(k, i, t, n, f1, f2, at, fld) t n
#define ACG__CUA(k, i, x) ACG__P(acg__cua, k, i, x)
#define ACG__acg__cua_ACG__KB(k, i, t, n, f1, f2, at, fld) n
#define ACG__acg__cua_ACG__KS(k, i, t, n, f1, f2, at, fld) n

#define ACG_KERNEL(k, rule, ...)                                                                   \
    ACG__ITEM_FN(k, __VA_ARGS__);                                                                  \
    extern "C" __global__ void k(ACG__MAP(ACG__CUP, ACG__COMMA, k, __VA_ARGS__),                   \
                                 unsigned int acg__gx, unsigned int acg__gy,                       \
                                 unsigned int acg__gz) {                                           \
        const unsigned long long acg__x =                                                          \
            (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;                             \
        const unsigned long long acg__y =                                                          \
            (unsigned long long)blockIdx.y * blockDim.y + threadIdx.y;                             \
        const unsigned long long acg__z =                                                          \
            (unsigned long long)blockIdx.z * blockDim.z + threadIdx.z;                             \
        if (acg__x >= acg__gx || acg__y >= acg__gy || acg__z >= acg__gz) {                         \
            return;                                                                                \
        }                                                                                          \
        const acg_item acg__it = {{(uint32_t)acg__x, (uint32_t)acg__y, (uint32_t)acg__z},          \
                                  {acg__gx, acg__gy, acg__gz}};                                    \
        k##__acg_item(acg__it, ACG__MAP(ACG__CUA, ACG__COMMA, k, __VA_ARGS__));                    \
    }                                                                                              \
    ACG__ITEM_FN(k, __VA_ARGS__)

#else /* C: the cpu backend's function, and the kernel's definition */

/* The arguments as locals, read once before the loops (a store through a buffer could alias
 * the argument array, so reading them in the loop would reload them at every work item). */
#define ACG__CPL(k, i, x) ACG__P(acg__cpl, k, i, x)
#define ACG__acg__cpl_ACG__KB(k, i, t, n, f1, f2, at, fld)                                         \
    t *const acg__a_##n = (t *)fld(&acg__a[i]);
#define ACG__acg__cpl_ACG__KS(k, i, t, n, f1, f2, at, fld) const t acg__a_##n = fld(&acg__a[i]);
#define ACG__CPA(k, i, x) ACG__P(acg__cpa, k, i, x)
#define ACG__acg__cpa_ACG__KB(k, i, t, n, f1, f2, at, fld) acg__a_##n
#define ACG__acg__cpa_ACG__KS(k, i, t, n, f1, f2, at, fld) acg__a_##n

#define ACG__TYPE(k, i, x) ACG__P(acg__type, k, i, x)
#define ACG__acg__type_ACG__KB(k, i, t, n, f1, f2, at, fld) at
#define ACG__acg__type_ACG__KS(k, i, t, n, f1, f2, at, fld) at
#define ACG__BPI(k, i, x) ACG__P(acg__bpi, k, i, x)
#define ACG__acg__bpi_ACG__KB(k, i, t, n, f1, f2, at, fld) sizeof(t)
#define ACG__acg__bpi_ACG__KS(k, i, t, n, f1, f2, at, fld) 0

/* enum { k__by_<param> = ACG_BY_ARG(i), ... }: a factor's name as acg_kernel_desc says it. */
#define ACG__BY(k, i, x) ACG__P(acg__by, k, i, x)
#define ACG__acg__by_ACG__KB(k, i, t, n, f1, f2, at, fld) k##__by_##n = ACG_BY_ARG(i),
#define ACG__acg__by_ACG__KS(k, i, t, n, f1, f2, at, fld) k##__by_##n = ACG_BY_ARG(i),
#define ACG__REACH(k, i, x) ACG__P(acg__reach, k, i, x)
#define ACG__acg__reach_ACG__KB(k, i, t, n, f1, f2, at, fld)                                       \
    {                                                                                              \
        sizeof(t), { k##__by_##f1, k##__by_##f2 }                                                  \
    }
#define ACG__acg__reach_ACG__KS(k, i, t, n, f1, f2, at, fld)                                       \
    {                                                                                              \
        0, { 0, 0 }                                                                                \
    }
#define ACG__COVER(k, i, c) k##__by_##c

/* The rule's fields: ACG__RULE_<kind>(k, (params), rule arguments). */
#define ACG__RULE(k, rule, params) ACG__RULE_(k, params, ACG__EXPAND rule)
#define ACG__RULE_(...) ACG__RULE__(__VA_ARGS__)
#define ACG__RULE__(k, params, kind, ...) ACG__RULE_##kind(k, params, __VA_ARGS__)
#define ACG__RULE_ACG__RE(k, params, one) .dims = 1, .flags = ACG_KERNEL_ELEMENTWISE
#define ACG__RULE_ACG__RS(k, params, fn, d) .dims = (d), .shape = (fn)
#define ACG__RULE_ACG__RG(k, params, ...)                                                          \
    .dims = ACG__NARG(__VA_ARGS__),                                                                \
    .grid_covers = {ACG__MAP(ACG__COVER, ACG__COMMA, k, __VA_ARGS__)},                             \
    .reach = {ACG__MAP(ACG__REACH, ACG__COMMA, k, ACG__EXPAND params)}

/* The implementations of the other backends: the generated code that includes this source
 * (acg_add_kernels) defines ACG_KERNEL_IMPLS and, before the source, an array k__acg_impls of
 * acg_kernel_impl for each kernel. */
#ifdef ACG_KERNEL_IMPLS
#define ACG__IMPLS(k)                                                                              \
    , .impls = k##__acg_impls, .n_impls = sizeof k##__acg_impls / sizeof k##__acg_impls[0]
#else
#define ACG__IMPLS(k)
#endif

/* static void k__acg_cpu(args, global): every work item of the grid, x fastest; and
 * k__acg_desc, the kernel's acg_kernel_desc. */
#define ACG_KERNEL(k, rule, ...)                                                                   \
    ACG__ITEM_FN(k, __VA_ARGS__);                                                                  \
    static void k##__acg_cpu(const acg_cpu_arg *acg__a, const uint32_t acg__g[3]) {                \
        ACG__MAP(ACG__CPL, ACG__NOTHING, k, __VA_ARGS__)                                           \
        acg_item acg__it = {{0, 0, 0}, {acg__g[0], acg__g[1], acg__g[2]}};                         \
        for (uint32_t acg__z = 0; acg__z < acg__g[2]; acg__z++) {                                  \
            for (uint32_t acg__y = 0; acg__y < acg__g[1]; acg__y++) {                              \
                for (uint32_t acg__x = 0; acg__x < acg__g[0]; acg__x++) {                          \
                    acg__it.id[0] = acg__x;                                                        \
                    acg__it.id[1] = acg__y;                                                        \
                    acg__it.id[2] = acg__z;                                                        \
                    k##__acg_item(acg__it, ACG__MAP(ACG__CPA, ACG__COMMA, k, __VA_ARGS__));        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    enum {                                                                                         \
        ACG__MAP(ACG__BY, ACG__NOTHING, k, __VA_ARGS__) k##__by_ACG_ONE = ACG_BY_ONE,              \
        k##__by_ACG_GRID_X = ACG_BY_GLOBAL(0),                                                     \
        k##__by_ACG_GRID_Y = ACG_BY_GLOBAL(1),                                                     \
        k##__by_ACG_GRID_Z = ACG_BY_GLOBAL(2)                                                      \
    };                                                                                             \
    ACG__KUNUSED static const acg_kernel_desc k##__acg_desc = {                                    \
        .size = sizeof(acg_kernel_desc),                                                           \
        .name = #k,                                                                                \
        .n_args = ACG__NARG(__VA_ARGS__),                                                          \
        .types = {ACG__MAP(ACG__TYPE, ACG__COMMA, k, __VA_ARGS__)},                                \
        .bytes_per_item = {ACG__MAP(ACG__BPI, ACG__COMMA, k, __VA_ARGS__)},                        \
        .exactness = ACG_KERNEL_EXACT_EVERY_BACKEND,                                               \
        .cpu = {k##__acg_cpu},                                                                     \
        ACG__RULE(k, rule, (__VA_ARGS__)) ACG__IMPLS(k)};                                          \
    ACG__ITEM_FN(k, __VA_ARGS__)

#endif

#endif /* ACG_KERNEL_H */
