/*
 * simd.h — the vector loops of the model's cpu kernels, one table per instruction set.
 *
 * Every function computes exactly what its scalar definition in simd_scalar.c computes, bit for
 * bit: the order of arith.h, with the same fused multiply-adds. The vector tables (simd_x86.c)
 * only compute several lanes of that order at once; tests/test_simd.c compares each with the
 * scalar table on every CPU that runs it. acg__simd() picks the best table the CPU runs, or
 * the one ACG_CPU_SIMD names.
 */
#ifndef ACG_MODEL_SIMD_H
#define ACG_MODEL_SIMD_H

#include <stdint.h>

/* Where an attention kernel finds position p of one row: page table[p / page_size], or the
 * sink page 0 (zeros) when that id is not below n_pages; then `off` floats into the row of kv_dim
 * floats at p % page_size. */
typedef struct acg__kv_rows {
    const float *cache;   /* k or v cache: n_pages * page_size rows of kv_dim floats */
    const int32_t *table; /* this request's row of the block table */
    uint32_t page_size, n_pages, kv_dim, off;
} acg__kv_rows;

typedef struct acg__simd_ops {
    const char *name; /* "scalar", "avx2", "avx512" */
    /* sum of a[k] * b[k] (arith.h's acg__dot) */
    float (*dot)(const float *a, const float *b, uint32_t n);
    /* sum of a[k] (acg__sum) */
    float (*sum)(const float *a, uint32_t n);
    /* sum of the a[k] >= tau, in the same order (skipped terms leave their partial) */
    float (*sum_ge)(const float *a, uint32_t n, float tau);
    /* out[r * n_out + j] = dot(w + j * n_in, x + r * n_in, n_in) for r < n, j0 <= j < j1 */
    void (*matmul)(float *out, const float *x, const float *w, uint32_t n_in, uint32_t n_out,
                   uint32_t n, uint32_t j0, uint32_t j1);
    /* the same, each weight row read start to end in turn (stream 1: the order for a few rows of
     * x) or several rows a slice at a time (0: the batched tiles); the same bits either way.
     * matmul picks stream for n <= acg__matmul_stream_max(the table's cut-over). */
    void (*matmul_order)(float *out, const float *x, const float *w, uint32_t n_in, uint32_t n_out,
                         uint32_t n, uint32_t j0, uint32_t j1, int stream);
    /* y[i] = acg__expf(x[i] - sub) */
    void (*exp_sub)(float *y, const float *x, float sub, uint32_t n);
    /* y[i] = x[i] / d */
    void (*div)(float *y, const float *x, float d, uint32_t n);
    /* y[i] = (x[i] * (1 / (1 + acg__expf(-x[i])))) * g[i] */
    void (*swiglu)(float *y, const float *x, const float *g, uint32_t n);
    /* o[i] = w[i] * (ss * x[i]) */
    void (*rms_apply)(float *o, const float *w, const float *x, float ss, uint32_t n);
    /* sc[p] = dot(q, k row p, hs) / scale, for p < n_pos (a row of the sink page scores 0) */
    void (*attn_scores)(float *sc, const float *q, const acg__kv_rows *k, uint32_t hs, float scale,
                        uint32_t n_pos);
    /* o[i] = sum over p < n_pos of prob[p] * (v row p)[i], for i < hs: for each i the order
     * of arith.h over p (partial p % 32, fused multiply-adds, then the tree) */
    void (*attn_values)(float *o, const float *prob, const acg__kv_rows *v, uint32_t hs,
                        uint32_t n_pos);
} acg__simd_ops;

/* The table in use: the one ACG_CPU_SIMD names ("scalar", "avx2", "avx512"), else the best
 * this CPU runs. Decided once per process; a name the CPU cannot run is logged and the best
 * is used. */
const acg__simd_ops *acg__simd(void);
/* The table of that name if this CPU runs it, else NULL (tests compare every level). */
const acg__simd_ops *acg__simd_level(const char *name);

/* The largest batch whose matmuls stream: ACG_CPU_MATMUL_STREAM (a count, 0 for never) where
 * it is set to one, else the table's own cut-over `dflt`. Read once per process; a value that is
 * not a count is logged and ignored. */
uint32_t acg__matmul_stream_max(uint32_t dflt);

/* The tables (simd_scalar.c, simd_x86.c); NULL where the build has no such code. */
extern const acg__simd_ops acg__simd_scalar;
const acg__simd_ops *acg__simd_avx2(void);
const acg__simd_ops *acg__simd_avx512(void);

#endif /* ACG_MODEL_SIMD_H */
