/*
 * arith.h — the one arithmetic of the model's kernels, as scalar C: the reference that the
 * SIMD code (simd.h) and the OpenCL C (arith.cl) compute bit for bit. docs/arithmetic.md says
 * why and works an example.
 *
 * - A reduction of n terms uses 32 partial sums: partial l takes the terms k = l, l + 32,
 *   l + 64, ... in ascending k (a dot product with one fused multiply-add per term, a sum with
 *   one addition), then a halving tree: s[l] += s[l + 16] for l < 16, then + 8, + 4, + 2, + 1.
 *   The result is s[0]. Terms that a conditional sum skips leave their partial as it was.
 * - exp is acg__expf below (acg/kernel.h's acg_exp), built from multiplications, additions, fmaf
 * and exact scaling by powers of two; never the platform's expf.
 * - Division and square root are IEEE's (correctly rounded); nothing else is contracted or
 *   reassociated (the build passes -ffp-contract=off; fmaf is always written out).
 */
#ifndef ACG_MODEL_ARITH_H
#define ACG_MODEL_ARITH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <acg/kernel.h>

#define ACG_LANES 32u

/* The halving tree over 32 partials; returns s[0]. */
static inline float acg__tree32(float s[ACG_LANES]) {
    for (uint32_t w = ACG_LANES / 2; w >= 1; w /= 2) {
        for (uint32_t l = 0; l < w; l++) {
            s[l] = s[l] + s[l + w];
        }
    }
    return s[0];
}

/* sum over k < n of a[k] * b[k], in the one order. */
static inline float acg__dot(const float *a, const float *b, uint32_t n) {
    float s[ACG_LANES] = {0.0f};
    for (uint32_t k = 0; k < n; k++) {
        s[k % ACG_LANES] = fmaf(a[k], b[k], s[k % ACG_LANES]);
    }
    return acg__tree32(s);
}

/* sum over k < n of a[k], in the one order. */
static inline float acg__sum(const float *a, uint32_t n) {
    float s[ACG_LANES] = {0.0f};
    for (uint32_t k = 0; k < n; k++) {
        s[k % ACG_LANES] = s[k % ACG_LANES] + a[k];
    }
    return acg__tree32(s);
}

static inline float acg__bits_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Limits of acg__expf: above ACG_EXP_HI the result is +inf (at ACG_EXP_HI itself it rounds to
 * +inf too); below ACG_EXP_LO it is 0: the true value is then below 2^-125, near the end of
 * the normal floats, so no backend has to produce a subnormal. Within them the error is below
 * one ulp (checked against exp() over every float of the range). */
#define ACG_EXP_HI 88.72283935546875f
#define ACG_EXP_LO -87.0f

/* Coefficients: ln 2 split so that n * ACG_LN2_HI is exact for |n| <= 128, and 1/k! for the
 * degree-7 Taylor polynomial of e^r on |r| <= ln(2)/2 (error below 2^-26 relative). */
#define ACG_LOG2E 1.44269502162933349609375f
#define ACG_LN2_HI 0.693145751953125f
#define ACG_LN2_LO 1.428606765330187045e-06f
#define ACG_ROUND_MAGIC 12582912.0f /* 1.5 * 2^23: (t + M) - M rounds t to an integer */
#define ACG_EXP_C7 1.98412701138295233249664306640625e-4f /* 1/5040 */
#define ACG_EXP_C6 1.38888892251998186111450195312500e-3f /* 1/720 */
#define ACG_EXP_C5 8.33333376795053482055664062500000e-3f /* 1/120 */
#define ACG_EXP_C4 4.16666679084300994873046875000000e-2f /* 1/24 */
#define ACG_EXP_C3 1.66666671633720397949218750000000e-1f /* 1/6 */
#define ACG_EXP_C2 0.5f

/* e^x: acg's own exp, acg/kernel.h's acg_exp (the one every kernel source uses on every
 * backend). The SIMD loops (simd_impl.h) compute it with the constants above, and test_simd
 * compares them with this over every float of the range. */
static inline float acg__expf(float x) { return acg_exp(x); }

#endif /* ACG_MODEL_ARITH_H */
