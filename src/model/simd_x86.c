/* simd_x86.c — the AVX2 and AVX-512 tables of simd.h: simd_impl.h's code compiled twice in this
 * one file, each time for its instruction set (a target pragma, so the rest of the library stays
 * baseline x86-64), and handed out only to a CPU that runs it. Both tables compute the scalar
 * table's bits (simd_impl.h says how); elsewhere than on x86-64 both are NULL. */
#include <stddef.h>

#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "arith.h"

/* The rows of positions p0 .. p0 + cnt - 1 of a cache by simd_scalar.c's rule, plus i0 floats,
 * walking the block table a page at a time rather than dividing per position. A position whose
 * page id is unusable gets NULL, or with page0 the row of page 0 that the scalar attn_values
 * reads for it. */
static inline void kv_rows(const float **rows, const acg__kv_rows *kv, uint32_t p0, uint32_t cnt,
                           int page0, uint32_t i0) {
    uint32_t ps = kv->page_size, pi = p0 / ps, po = p0 % ps;
    for (uint32_t t = 0; t < cnt; pi++, po = 0) {
        int32_t page = kv->table[pi];
        const float *row = NULL;
        if (page >= 0 && (uint32_t)page < kv->n_pages) {
            row = kv->cache + ((size_t)page * ps + po) * kv->kv_dim + kv->off + i0;
        } else if (page0) {
            row = kv->cache + (size_t)po * kv->kv_dim + kv->off + i0;
        }
        uint32_t n = ps - po < cnt - t ? ps - po : cnt - t;
        for (uint32_t i = 0; i < n; i++) {
            rows[t + i] = row != NULL ? row + (size_t)i * kv->kv_dim : NULL;
        }
        t += n;
    }
}

/* The instruction set of the functions between SIMD_TARGET_PUSH(t) and SIMD_TARGET_POP(). */
#define SIMD_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SIMD_TARGET_PUSH(t)                                                                        \
    SIMD_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define SIMD_TARGET_POP() SIMD_PRAGMA(clang attribute pop)
#else
#define SIMD_TARGET_PUSH(t) SIMD_PRAGMA(GCC push_options) SIMD_PRAGMA(GCC target(t))
#define SIMD_TARGET_POP() SIMD_PRAGMA(GCC pop_options)
#endif

SIMD_TARGET_PUSH("avx2,fma")
#define ACG_SIMD_WIDTH 8
#include "simd_impl.h"
#undef ACG_SIMD_WIDTH
SIMD_TARGET_POP()

SIMD_TARGET_PUSH("avx512f,avx2,fma")
#define ACG_SIMD_WIDTH 16
#include "simd_impl.h"
#undef ACG_SIMD_WIDTH
SIMD_TARGET_POP()

const acg__simd_ops *acg__simd_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        return &avx2_ops;
    }
    return NULL;
}

const acg__simd_ops *acg__simd_avx512(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
        return &avx512_ops;
    }
    return NULL;
}

#else

const acg__simd_ops *acg__simd_avx2(void) { return NULL; }

const acg__simd_ops *acg__simd_avx512(void) { return NULL; }

#endif
