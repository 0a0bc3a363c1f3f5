/*
 * simd_impl.h — the vector code of simd_x86.c, written once for vectors of S_VL floats and
 * included once per width: ACG_SIMD_WIDTH 8 (AVX2 + FMA) and 16 (AVX-512F). simd_x86.c sets
 * the functions' target around each inclusion; this file undefines its macros at its end, so it
 * has no include guard.
 *
 * The 32 partials of a reduction are S_NV = 32 / S_VL vectors: vector h holds partials
 * h * S_VL .. h * S_VL + S_VL - 1, and each lane performs exactly the fused multiply-adds (or
 * additions) of the scalar loop for its partial, in the same order. A tail (n % 32 terms)
 * loads with a mask, which fills the missing terms with zeros and never reads past the array,
 * and then keeps the old partial in every lane without a term: a zero term would not always
 * leave a partial as it was (fma(0, 0, -0) is +0, and a partial can be -0 when a product
 * underflows). The halving tree adds the same two lanes as arith.h's acg__tree32: vector
 * h += vector h + S_NV / 2 for the steps above one vector, then lane l += lane l + w within it.
 * Elementwise functions apply the scalar expression's operations in the same order per lane.
 */

/* Unroll the next loop completely, so that arrays of vectors indexed by its counter live in
 * registers: S_UNROLL for a constant trip count, S_UNROLL_SHAPE for one that is a constant only
 * once the function is inlined (a tile's shape). GCC honours its pragma after inlining; clang
 * applies its own before, to the loop with an unknown count, so there clang is left to unroll
 * the inlined loop by itself, which it does. S_UNROLL_SLICES: the slices of dot_tile, all of
 * them for AVX-512's two, for AVX2's four GCC does best with two at a time. */
#if defined(__clang__)
#define S_UNROLL _Pragma("clang loop unroll(full)")
#define S_UNROLL_SHAPE
#define S_UNROLL_SLICES _Pragma("clang loop unroll(full)")
#else
#define S_UNROLL _Pragma("GCC unroll 16")
#define S_UNROLL_SHAPE _Pragma("GCC unroll 16")
#define S_UNROLL_SLICES _Pragma("GCC unroll 2")
#endif

/* One step of a hsum_many: out[i] = the sum of two shuffles (immediates lo and hi, the lanes
 * each step pairs) of in[2i] and in[2i + 1], for i < n. */
#define S_HSTEP(out, in, n, shuffle, lo, hi)                                                       \
    do {                                                                                           \
        S_UNROLL                                                                                   \
        for (int i_ = 0; i_ < (n); i_++) {                                                         \
            (out)[i_] = s_add(shuffle((in)[2 * i_], (in)[2 * i_ + 1], lo),                         \
                              shuffle((in)[2 * i_], (in)[2 * i_ + 1], hi));                        \
        }                                                                                          \
    } while (0)

#if ACG_SIMD_WIDTH == 8

#define S_VL 8u
#define S_NAME "avx2"
#define S_FN(f) avx2_##f
#define s_vf __m256
#define s_vi __m256i
#define s_vm __m256 /* a lane mask: all ones or all zeros per lane */
#define s_zero() _mm256_setzero_ps()
#define s_set1(f) _mm256_set1_ps(f)
#define s_load(p) _mm256_loadu_ps(p)
#define s_store(p, v) _mm256_storeu_ps((p), (v))
#define s_add(a, b) _mm256_add_ps((a), (b))
#define s_sub(a, b) _mm256_sub_ps((a), (b))
#define s_mul(a, b) _mm256_mul_ps((a), (b))
#define s_div(a, b) _mm256_div_ps((a), (b))
#define s_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define s_cmp(a, b, pred) _mm256_cmp_ps((a), (b), (pred))
#define s_sel(m, a, b) _mm256_blendv_ps((b), (a), (m)) /* a where m, else b */
#define s_neg(a) _mm256_xor_ps((a), _mm256_set1_ps(-0.0f))
#define s_cvtt(a) _mm256_cvttps_epi32(a)
#define s_iset1(i) _mm256_set1_epi32(i)
#define s_iadd(a, b) _mm256_add_epi32((a), (b))
#define s_isub(a, b) _mm256_sub_epi32((a), (b))
#define s_isrli(a, c) _mm256_srli_epi32((a), (c))
#define s_israi(a, c) _mm256_srai_epi32((a), (c))
#define s_islli(a, c) _mm256_slli_epi32((a), (c))
#define s_ibits(a) _mm256_castsi256_ps(a)

/* The lanes below c (c <= 8). */
static inline s_vm avx2_first(uint32_t c) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)c), iota));
}

/* Loads the lanes of m, zeros elsewhere, reading nothing outside them. */
static inline s_vf avx2_load_m(const float *p, s_vm m) {
    return _mm256_maskload_ps(p, _mm256_castps_si256(m));
}

static inline void avx2_store_m(float *p, s_vm m, s_vf v) {
    _mm256_maskstore_ps(p, _mm256_castps_si256(m), v);
}

/* fma(a, b, c) in the lanes of m, c elsewhere. */
static inline s_vf avx2_fma_m(s_vf a, s_vf b, s_vf c, s_vm m) {
    return s_sel(m, s_fma(a, b, c), c);
}

/* a + b in the lanes of m, a elsewhere. */
static inline s_vf avx2_add_m(s_vf a, s_vf b, s_vm m) { return s_sel(m, s_add(a, b), a); }

static inline s_vm avx2_and_m(s_vm a, s_vm b) { return _mm256_and_ps(a, b); }

/* The tree's steps 4, 2 and 1 within one vector: returns lane 0. */
static inline float avx2_hsum(s_vf y) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

/* The same steps for 8 vectors at once, two vectors' lanes shuffled into one before each add:
 * result lane 4u + m is vector 2m + u's sum (S_LANE). */
static inline s_vf avx2_hsum_many(const s_vf u[8]) {
    s_vf p[4], r[2], s[1];
    S_HSTEP(p, u, 4, _mm256_permute2f128_ps, 0x20, 0x31);
    S_HSTEP(r, p, 2, _mm256_shuffle_ps, 0x44, 0xee);
    S_HSTEP(s, r, 1, _mm256_shuffle_ps, 0x88, 0xdd);
    return s[0];
}

/* The lanes whose bit is set in bits. */
static inline s_vm avx2_mask_bits(uint32_t bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i b = _mm256_and_si256(_mm256_set1_epi32((int)bits), bit);
    return _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, bit));
}

/* Lanes idx[0 .. 8) of v. */
static inline s_vf avx2_permute(s_vf v, const int32_t *idx) {
    return _mm256_permutevar8x32_ps(v, _mm256_loadu_si256((const __m256i *)(const void *)idx));
}

/* Stores lanes 0 .. c - 1 of v, c one of 8 and 4. */
static inline void avx2_store_low(float *p, s_vf v, uint32_t c) {
    if (c == 8) {
        _mm256_storeu_ps(p, v);
    } else {
        _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    }
}

#define S_PERM_ROW(R, r)                                                                           \
    {                                                                                              \
        S_PIDX(R, r, 0), S_PIDX(R, r, 1), S_PIDX(R, r, 2), S_PIDX(R, r, 3), S_PIDX(R, r, 4),       \
            S_PIDX(R, r, 5), S_PIDX(R, r, 6), S_PIDX(R, r, 7)                                      \
    }

#elif ACG_SIMD_WIDTH == 16

#define S_VL 16u
#define S_NAME "avx512"
#define S_FN(f) avx512_##f
#define s_vf __m512
#define s_vi __m512i
#define s_vm __mmask16
#define s_zero() _mm512_setzero_ps()
#define s_set1(f) _mm512_set1_ps(f)
#define s_load(p) _mm512_loadu_ps(p)
#define s_store(p, v) _mm512_storeu_ps((p), (v))
#define s_add(a, b) _mm512_add_ps((a), (b))
#define s_sub(a, b) _mm512_sub_ps((a), (b))
#define s_mul(a, b) _mm512_mul_ps((a), (b))
#define s_div(a, b) _mm512_div_ps((a), (b))
#define s_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define s_cmp(a, b, pred) _mm512_cmp_ps_mask((a), (b), (pred))
#define s_sel(m, a, b) _mm512_mask_blend_ps((m), (b), (a)) /* a where m, else b */
#define s_neg(a)                                                                                   \
    _mm512_castsi512_ps(                                                                           \
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u)))
#define s_cvtt(a) _mm512_cvttps_epi32(a)
#define s_iset1(i) _mm512_set1_epi32(i)
#define s_iadd(a, b) _mm512_add_epi32((a), (b))
#define s_isub(a, b) _mm512_sub_epi32((a), (b))
#define s_isrli(a, c) _mm512_srli_epi32((a), (c))
#define s_israi(a, c) _mm512_srai_epi32((a), (c))
#define s_islli(a, c) _mm512_slli_epi32((a), (c))
#define s_ibits(a) _mm512_castsi512_ps(a)

static inline s_vm avx512_first(uint32_t c) { return (s_vm)(0xffffu >> (16u - c)); }

static inline s_vf avx512_load_m(const float *p, s_vm m) { return _mm512_maskz_loadu_ps(m, p); }

static inline void avx512_store_m(float *p, s_vm m, s_vf v) { _mm512_mask_storeu_ps(p, m, v); }

static inline s_vf avx512_fma_m(s_vf a, s_vf b, s_vf c, s_vm m) {
    return _mm512_mask3_fmadd_ps(a, b, c, m);
}

static inline s_vf avx512_add_m(s_vf a, s_vf b, s_vm m) { return _mm512_mask_add_ps(a, m, a, b); }

static inline s_vm avx512_and_m(s_vm a, s_vm b) { return (s_vm)(a & b); }

static inline float avx512_hsum(s_vf z) {
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1));
    __m256 y = _mm256_add_ps(_mm512_castps512_ps256(z), hi);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

/* Steps 8, 4, 2 and 1 for 16 vectors: result lane 4u + m is vector 4m + u's sum. */
static inline s_vf avx512_hsum_many(const s_vf u[16]) {
    s_vf p[8], q[4], r[2], s[1];
    S_HSTEP(p, u, 8, _mm512_shuffle_f32x4, 0x44, 0xee);
    S_HSTEP(q, p, 4, _mm512_shuffle_f32x4, 0x88, 0xdd);
    S_HSTEP(r, q, 2, _mm512_shuffle_ps, 0x44, 0xee);
    S_HSTEP(s, r, 1, _mm512_shuffle_ps, 0x88, 0xdd);
    return s[0];
}

static inline s_vm avx512_mask_bits(uint32_t bits) { return (s_vm)bits; }

static inline s_vf avx512_permute(s_vf v, const int32_t *idx) {
    return _mm512_permutexvar_ps(_mm512_loadu_si512((const void *)idx), v);
}

/* Stores lanes 0 .. c - 1 of v, c one of 16, 8 and 4. */
static inline void avx512_store_low(float *p, s_vf v, uint32_t c) {
    if (c == 16) {
        _mm512_storeu_ps(p, v);
    } else if (c == 8) {
        _mm256_storeu_ps(p, _mm512_castps512_ps256(v));
    } else {
        _mm_storeu_ps(p, _mm512_castps512_ps128(v));
    }
}

#define S_PERM_ROW(R, r)                                                                           \
    {                                                                                              \
        S_PIDX(R, r, 0), S_PIDX(R, r, 1), S_PIDX(R, r, 2), S_PIDX(R, r, 3), S_PIDX(R, r, 4),       \
            S_PIDX(R, r, 5), S_PIDX(R, r, 6), S_PIDX(R, r, 7), S_PIDX(R, r, 8), S_PIDX(R, r, 9),   \
            S_PIDX(R, r, 10), S_PIDX(R, r, 11), S_PIDX(R, r, 12), S_PIDX(R, r, 13),                \
            S_PIDX(R, r, 14), S_PIDX(R, r, 15)                                                     \
    }

#else
#error "simd_impl.h: ACG_SIMD_WIDTH must be 8 or 16"
#endif

#define S_NV (ACG_LANES / S_VL)
/* The lane of S_FN(hsum_many)'s result that holds vector o's sum. */
#define S_LANE(o) (4u * ((o) % (S_VL / 4u)) + (o) / (S_VL / 4u))
/* The lane of that result holding output j * R + r of a tile of R rows, for lane i of row r's
 * outputs in order (i < S_VL / R); the permutations that put each row's outputs in order. */
#define S_PIDX(R, r, i) ((int32_t)S_LANE(((i) % (S_VL / (R))) * (R) + (r)))
static const int32_t S_FN(perm)[7][S_VL] = {S_PERM_ROW(1, 0), S_PERM_ROW(2, 0), S_PERM_ROW(2, 1),
                                            S_PERM_ROW(4, 0), S_PERM_ROW(4, 1), S_PERM_ROW(4, 2),
                                            S_PERM_ROW(4, 3)};
#define S_ALWAYS static inline __attribute__((always_inline))
#define s_first S_FN(first)
#define s_load_m S_FN(load_m)
#define s_store_m S_FN(store_m)
#define s_fma_m S_FN(fma_m)
#define s_add_m S_FN(add_m)
#define s_and_m S_FN(and_m)

/* ---- reductions ------------------------------------------------------------------------- */

/* The tree over the partials acc[S_NV]; returns s[0]. */
S_ALWAYS float S_FN(tree)(s_vf acc[S_NV]) {
    S_UNROLL
    for (uint32_t w = S_NV / 2; w >= 1; w /= 2) {
        S_UNROLL
        for (uint32_t h = 0; h < w; h++) {
            acc[h] = s_add(acc[h], acc[h + w]);
        }
    }
    return S_FN(hsum)(acc[0]);
}

/* The terms a reduction adds to its partials: fma(a, b, s) (dot), a (sum), or a where a >= tau
 * (sum_ge). */
#define S_DOT 0
#define S_SUM 1
#define S_SUM_GE 2

/* Partials acc plus the S_VL terms of kind at a (and b), vt holding tau. */
S_ALWAYS s_vf S_FN(term)(int kind, s_vf acc, const float *a, const float *b, s_vf vt) {
    if (kind == S_DOT) {
        return s_fma(s_load(a), s_load(b), acc);
    }
    if (kind == S_SUM) {
        return s_add(acc, s_load(a));
    }
    s_vf v = s_load(a);
    return s_add_m(acc, v, s_cmp(v, vt, _CMP_GE_OQ));
}

/* The same for the terms in the lanes of m only, reading nothing outside them. */
S_ALWAYS s_vf S_FN(term_m)(int kind, s_vf acc, const float *a, const float *b, s_vf vt, s_vm m) {
    if (kind == S_DOT) {
        return s_fma_m(s_load_m(a, m), s_load_m(b, m), acc, m);
    }
    s_vf v = s_load_m(a, m);
    if (kind == S_SUM) {
        return s_add_m(acc, v, m);
    }
    return s_add_m(acc, v, s_and_m(m, s_cmp(v, vt, _CMP_GE_OQ)));
}

/* The reduction of kind over n terms (b is read by S_DOT only: the others pass a). */
S_ALWAYS float S_FN(reduce)(int kind, const float *a, const float *b, uint32_t n, float tau) {
    s_vf acc[S_NV], vt = s_set1(tau);
    S_UNROLL
    for (uint32_t h = 0; h < S_NV; h++) {
        acc[h] = s_zero();
    }
    uint32_t nb = n / ACG_LANES, rem = n % ACG_LANES;
    for (uint32_t i = 0; i < nb; i++) {
        const float *ai = a + (size_t)i * ACG_LANES, *bi = b + (size_t)i * ACG_LANES;
        S_UNROLL
        for (uint32_t h = 0; h < S_NV; h++) {
            acc[h] = S_FN(term)(kind, acc[h], ai + h * S_VL, bi + h * S_VL, vt);
        }
    }
    const float *ai = a + (size_t)nb * ACG_LANES, *bi = b + (size_t)nb * ACG_LANES;
    S_UNROLL
    for (uint32_t h = 0; h < S_NV; h++) {
        if (rem > h * S_VL) {
            s_vm m = s_first(rem - h * S_VL < S_VL ? rem - h * S_VL : S_VL);
            acc[h] = S_FN(term_m)(kind, acc[h], ai + h * S_VL, bi + h * S_VL, vt, m);
        }
    }
    return S_FN(tree)(acc);
}

static float S_FN(dot)(const float *a, const float *b, uint32_t n) {
    return S_FN(reduce)(S_DOT, a, b, n, 0.0f);
}

static float S_FN(sum)(const float *a, uint32_t n) { return S_FN(reduce)(S_SUM, a, a, n, 0.0f); }

static float S_FN(sum_ge)(const float *a, uint32_t n, float tau) {
    return S_FN(reduce)(S_SUM_GE, a, a, n, tau);
}

/* ---- many dot products at once ---------------------------------------------------------- */

/* The dot products of R rows x[r] with J rows w[j] (R * J == S_VL), n terms each: one
 * vector of results, output o = j * R + r in lane S_LANE(o). Each term is fma(w, x, s), or
 * fma(x, w, s) with swap (the operands in the caller's scalar order). The partials are taken
 * one vector slice h at a time (lanes h * S_VL .. of every 32-term block), so the R * J
 * accumulators of a slice stay in registers; slices are independent partials, so the order per
 * partial is the scalar one. */
S_ALWAYS s_vf S_FN(dot_tile)(const float *const *x, const float *const *w, uint32_t n, uint32_t R,
                             uint32_t J, int swap, size_t pf) {
    s_vf part[S_VL][S_NV], u[S_VL];
    uint32_t nb = n / ACG_LANES, rem = n % ACG_LANES;
    S_UNROLL_SLICES
    for (uint32_t h = 0; h < S_NV; h++) {
        s_vf acc[S_VL];
        S_UNROLL
        for (uint32_t o = 0; o < S_VL; o++) {
            acc[o] = s_zero();
        }
        for (uint32_t i = 0; i < nb; i++) {
            size_t k = (size_t)i * ACG_LANES + h * S_VL;
            s_vf xv[4];
            S_UNROLL_SHAPE
            for (uint32_t r = 0; r < R; r++) {
                xv[r] = s_load(x[r] + k);
            }
            S_UNROLL_SHAPE
            for (uint32_t j = 0; j < J; j++) {
                s_vf wv = s_load(w[j] + k);
                if (h * S_VL % 16 == 0) { /* once per 64-byte line */
                    _mm_prefetch((const char *)(w[j] + pf + k), _MM_HINT_T1);
                }
                S_UNROLL_SHAPE
                for (uint32_t r = 0; r < R; r++) {
                    acc[j * R + r] =
                        swap ? s_fma(xv[r], wv, acc[j * R + r]) : s_fma(wv, xv[r], acc[j * R + r]);
                }
            }
        }
        if (rem > h * S_VL) {
            size_t k = (size_t)nb * ACG_LANES + h * S_VL;
            s_vm m = s_first(rem - h * S_VL < S_VL ? rem - h * S_VL : S_VL);
            s_vf xv[4];
            S_UNROLL_SHAPE
            for (uint32_t r = 0; r < R; r++) {
                xv[r] = s_load_m(x[r] + k, m);
            }
            S_UNROLL_SHAPE
            for (uint32_t j = 0; j < J; j++) {
                s_vf wv = s_load_m(w[j] + k, m);
                S_UNROLL_SHAPE
                for (uint32_t r = 0; r < R; r++) {
                    acc[j * R + r] = swap ? s_fma_m(xv[r], wv, acc[j * R + r], m)
                                          : s_fma_m(wv, xv[r], acc[j * R + r], m);
                }
            }
        }
        if (h + 1 < S_NV) {
            S_UNROLL
            for (uint32_t o = 0; o < S_VL; o++) {
                part[o][h] = acc[o];
            }
            continue;
        }
        /* The tree's steps above one vector, the last slice still in registers. */
        S_UNROLL
        for (uint32_t o = 0; o < S_VL; o++) {
            part[o][h] = acc[o];
            S_UNROLL
            for (uint32_t w2 = S_NV / 2; w2 >= 1; w2 /= 2) {
                S_UNROLL
                for (uint32_t g = 0; g < w2; g++) {
                    part[o][g] = s_add(part[o][g], part[o][g + w2]);
                }
            }
            u[o] = part[o][0];
        }
    }
    return S_FN(hsum_many)(u);
}

/* The same products as dot_tile, in the same lanes, with the weight rows taken one after
 * another: all S_NV slices of row j against the R rows of x, row j read from start to end
 * before row j + 1. At small batches a step streams its weights from memory, and one stream at
 * a time is what the hardware prefetcher follows best (docs/model.md has the measurements);
 * dot_tile's J rows a slice at a time keep the R * J accumulators of one slice in registers,
 * which pays once a tile has rows enough to reuse each weight. Only the AVX2 table has it (see
 * matmul_order). */
#if ACG_SIMD_WIDTH == 8
S_ALWAYS s_vf S_FN(dot_stream)(const float *const *x, const float *const *w, uint32_t n, uint32_t R,
                               uint32_t J) {
    s_vf u[S_VL];
    uint32_t nb = n / ACG_LANES, rem = n % ACG_LANES;
    S_UNROLL_SHAPE
    for (uint32_t j = 0; j < J; j++) {
        s_vf acc[2][S_NV];
        S_UNROLL_SHAPE
        for (uint32_t r = 0; r < R; r++) {
            S_UNROLL
            for (uint32_t h = 0; h < S_NV; h++) {
                acc[r][h] = s_zero();
            }
        }
        const float *wj = w[j];
        for (uint32_t i = 0; i < nb; i++) {
            size_t k = (size_t)i * ACG_LANES;
            S_UNROLL
            for (uint32_t h = 0; h < S_NV; h++) {
                s_vf wv = s_load(wj + k + h * S_VL);
                S_UNROLL_SHAPE
                for (uint32_t r = 0; r < R; r++) {
                    acc[r][h] = s_fma(wv, s_load(x[r] + k + h * S_VL), acc[r][h]);
                }
            }
        }
        S_UNROLL
        for (uint32_t h = 0; h < S_NV; h++) {
            if (rem > h * S_VL) {
                size_t k = (size_t)nb * ACG_LANES + h * S_VL;
                s_vm m = s_first(rem - h * S_VL < S_VL ? rem - h * S_VL : S_VL);
                s_vf wv = s_load_m(wj + k, m);
                S_UNROLL_SHAPE
                for (uint32_t r = 0; r < R; r++) {
                    acc[r][h] = s_fma_m(wv, s_load_m(x[r] + k, m), acc[r][h], m);
                }
            }
        }
        /* The tree's steps above one vector. */
        S_UNROLL_SHAPE
        for (uint32_t r = 0; r < R; r++) {
            S_UNROLL
            for (uint32_t w2 = S_NV / 2; w2 >= 1; w2 /= 2) {
                S_UNROLL
                for (uint32_t g = 0; g < w2; g++) {
                    acc[r][g] = s_add(acc[r][g], acc[r][g + w2]);
                }
            }
            u[j * R + r] = acc[r][0];
        }
    }
    return S_FN(hsum_many)(u);
}
#endif

/* Rows r0 .. r0 + R - 1 of a matmul against the S_VL weight rows wr (the first nj real), by
 * dot_stream or by dot_tile. */
S_ALWAYS void S_FN(matmul_rows)(float *out, const float *x, const float *const *wr, uint32_t nj,
                                uint32_t n_in, uint32_t n_out, uint32_t r0, uint32_t jc, uint32_t R,
                                int stream, size_t pf) {
    uint32_t J = S_VL / R;
    const float *xr[4];
    for (uint32_t r = 0; r < R; r++) {
        xr[r] = x + (size_t)(r0 + r) * n_in;
    }
    for (uint32_t js = 0; js < nj; js += J) {
#if ACG_SIMD_WIDTH == 8
        s_vf res = stream ? S_FN(dot_stream)(xr, wr + js, n_in, R, J)
                          : S_FN(dot_tile)(xr, wr + js, n_in, R, J, 0, pf);
#else
        (void)stream;
        s_vf res = S_FN(dot_tile)(xr, wr + js, n_in, R, J, 0, pf);
#endif
        S_UNROLL_SHAPE
        for (uint32_t r = 0; r < R; r++) {
            /* Row r's outputs to lanes 0 .. J - 1, in order of j. */
            s_vf v = S_FN(permute)(res, S_FN(perm)[R - 1 + r]);
            float *dst = out + (size_t)(r0 + r) * n_out + jc + js;
            if (nj - js >= J) {
                S_FN(store_low)(dst, v, J);
            } else {
                s_store_m(dst, s_first(nj - js), v);
            }
        }
    }
}

/* One instance per tile shape and order, each compiled with its constants: a compiler may merge
 * calls that differ only in a constant argument before it inlines them, and then unrolls
 * nothing. */
#define S_MATMUL_ROWS(R_, ORDER_, STREAM_)                                                         \
    static __attribute__((noinline)) void S_FN(matmul_##ORDER_##_##R_)(                            \
        float *out, const float *x, const float *const *wr, uint32_t nj, uint32_t n_in,            \
        uint32_t n_out, uint32_t r0, uint32_t jc, size_t pf) {                                     \
        S_FN(matmul_rows)(out, x, wr, nj, n_in, n_out, r0, jc, R_, STREAM_, pf);                   \
    }
S_MATMUL_ROWS(1, tile, 0)
S_MATMUL_ROWS(2, tile, 0)
S_MATMUL_ROWS(4, tile, 0)
#if ACG_SIMD_WIDTH == 8
S_MATMUL_ROWS(1, stream, 1)
S_MATMUL_ROWS(2, stream, 1)
#endif

#define S_AHEAD 16u /* rows */
/* The largest batch whose matmuls stream, unless ACG_CPU_MATMUL_STREAM says otherwise, as
 * measured on the machine docs/model.md names: AVX-512's tiles are as fast from two rows on,
 * AVX2's (four slices a row, where AVX-512 has two) from three. */
#define S_STREAM_MAX (S_VL == 16 ? 1u : 2u)

/* Weight rows S_VL at a time (read from memory once), against the rows of x in tiles of up to
 * four (AVX-512) or two (AVX2) rows, by dot_stream or dot_tile. The stream order is AVX2's in
 * both tables: with 512-bit loads it read the weights 10-15% slower where it was measured (Zen 4,
 * whose 512-bit loads take two 256-bit halves), and both compute the same bits. */
static void S_FN(matmul_order)(float *out, const float *x, const float *w, uint32_t n_in,
                               uint32_t n_out, uint32_t n, uint32_t j0, uint32_t j1, int stream) {
#if ACG_SIMD_WIDTH == 16
    if (stream) {
        avx2_matmul_order(out, x, w, n_in, n_out, n, j0, j1, 1);
        return;
    }
#endif
    for (uint32_t jc = j0; jc < j1; jc += S_VL) {
        uint32_t nj = j1 - jc < S_VL ? j1 - jc : S_VL;
        const float *wr[S_VL];
        for (uint32_t t = 0; t < S_VL; t++) {
            wr[t] = w + (size_t)(jc + (t < nj ? t : nj - 1)) * n_in;
        }
        uint32_t r = 0;
#if ACG_SIMD_WIDTH == 8
        if (stream) {
            for (; n - r >= 2; r += 2) {
                S_FN(matmul_stream_2)(out, x, wr, nj, n_in, n_out, r, jc, 0);
            }
            if (r < n) {
                S_FN(matmul_stream_1)(out, x, wr, nj, n_in, n_out, r, jc, 0);
            }
            continue;
        }
#endif
        /* The rows S_AHEAD on, fetched into L2 while these compute: with dot_tile's slices the
         * hardware's prefetcher alone leaves much of the memory bandwidth unused. */
        size_t pf = j1 - jc >= S_AHEAD + S_VL ? (size_t)S_AHEAD * n_in : 0;
        if (S_VL >= 16) {
            for (; n - r >= 4; r += 4) {
                S_FN(matmul_tile_4)(out, x, wr, nj, n_in, n_out, r, jc, pf);
            }
        }
        for (; n - r >= 2; r += 2) {
            S_FN(matmul_tile_2)(out, x, wr, nj, n_in, n_out, r, jc, pf);
        }
        if (r < n) {
            S_FN(matmul_tile_1)(out, x, wr, nj, n_in, n_out, r, jc, pf);
        }
    }
}

static void S_FN(matmul)(float *out, const float *x, const float *w, uint32_t n_in, uint32_t n_out,
                         uint32_t n, uint32_t j0, uint32_t j1) {
    int stream = n <= acg__matmul_stream_max(S_STREAM_MAX);
    S_FN(matmul_order)(out, x, w, n_in, n_out, n, j0, j1, stream);
}

/* ---- elementwise ------------------------------------------------------------------------ */

/* acg__expf per lane: the same operations, the clamps as selects. */
S_ALWAYS s_vf S_FN(expf)(s_vf x) {
    s_vf t = s_mul(x, s_set1(ACG_LOG2E));
    s_vf n = s_sub(s_add(t, s_set1(ACG_ROUND_MAGIC)), s_set1(ACG_ROUND_MAGIC));
    s_vf r = s_fma(n, s_set1(-ACG_LN2_HI), x);
    r = s_fma(n, s_set1(-ACG_LN2_LO), r);
    s_vf p = s_set1(ACG_EXP_C7);
    p = s_fma(p, r, s_set1(ACG_EXP_C6));
    p = s_fma(p, r, s_set1(ACG_EXP_C5));
    p = s_fma(p, r, s_set1(ACG_EXP_C4));
    p = s_fma(p, r, s_set1(ACG_EXP_C3));
    p = s_fma(p, r, s_set1(ACG_EXP_C2));
    p = s_fma(p, r, s_set1(1.0f));
    p = s_fma(p, r, s_set1(1.0f));
    /* ni / 2 rounds toward zero, as C's division: add the sign bit before the shift. */
    s_vi ni = s_cvtt(n);
    s_vi half = s_israi(s_iadd(ni, s_isrli(ni, 31)), 1);
    s_vf s1 = s_ibits(s_islli(s_iadd(s_isub(ni, half), s_iset1(127)), 23));
    s_vf s2 = s_ibits(s_islli(s_iadd(half, s_iset1(127)), 23));
    s_vf y = s_mul(s_mul(p, s1), s2);
    y = s_sel(s_cmp(x, s_set1(ACG_EXP_LO), _CMP_LT_OQ), s_zero(), y);
    s_vf above = s_sel(s_cmp(x, x, _CMP_UNORD_Q), x, s_set1(INFINITY));
    return s_sel(s_cmp(x, s_set1(ACG_EXP_HI), _CMP_NLE_UQ), above, y);
}

static void S_FN(exp_sub)(float *y, const float *x, float sub, uint32_t n) {
    s_vf vs = s_set1(sub);
    uint32_t i = 0;
    for (; n - i >= S_VL; i += S_VL) {
        s_store(y + i, S_FN(expf)(s_sub(s_load(x + i), vs)));
    }
    if (i < n) {
        s_vm m = s_first(n - i);
        s_store_m(y + i, m, S_FN(expf)(s_sub(s_load_m(x + i, m), vs)));
    }
}

static void S_FN(div)(float *y, const float *x, float d, uint32_t n) {
    s_vf vd = s_set1(d);
    uint32_t i = 0;
    for (; n - i >= S_VL; i += S_VL) {
        s_store(y + i, s_div(s_load(x + i), vd));
    }
    if (i < n) {
        s_vm m = s_first(n - i);
        s_store_m(y + i, m, s_div(s_load_m(x + i, m), vd));
    }
}

S_ALWAYS s_vf S_FN(swiglu1)(s_vf v, s_vf g) {
    s_vf one = s_set1(1.0f);
    return s_mul(s_mul(v, s_div(one, s_add(one, S_FN(expf)(s_neg(v))))), g);
}

static void S_FN(swiglu)(float *y, const float *x, const float *g, uint32_t n) {
    uint32_t i = 0;
    for (; n - i >= S_VL; i += S_VL) {
        s_store(y + i, S_FN(swiglu1)(s_load(x + i), s_load(g + i)));
    }
    if (i < n) {
        s_vm m = s_first(n - i);
        s_store_m(y + i, m, S_FN(swiglu1)(s_load_m(x + i, m), s_load_m(g + i, m)));
    }
}

static void S_FN(rms_apply)(float *o, const float *w, const float *x, float ss, uint32_t n) {
    s_vf vs = s_set1(ss);
    uint32_t i = 0;
    for (; n - i >= S_VL; i += S_VL) {
        s_store(o + i, s_mul(s_load(w + i), s_mul(vs, s_load(x + i))));
    }
    if (i < n) {
        s_vm m = s_first(n - i);
        s_store_m(o + i, m, s_mul(s_load_m(w + i, m), s_mul(vs, s_load_m(x + i, m))));
    }
}

/* ---- attention -------------------------------------------------------------------------- */

/* S_VL positions at a time, as a matmul of q with their rows (a sink row scores 0). */
static void S_FN(attn_scores)(float *sc, const float *q, const acg__kv_rows *k, uint32_t hs,
                              float scale, uint32_t n_pos) {
    for (uint32_t p0 = 0; p0 < n_pos; p0 += S_VL) {
        uint32_t np = n_pos - p0 < S_VL ? n_pos - p0 : S_VL;
        const float *rows[S_VL];
        uint32_t sink = 0;
        kv_rows(rows, k, p0, np, 0, 0);
        for (uint32_t t = 0; t < S_VL; t++) {
            if (t >= np) {
                rows[t] = rows[np - 1];
            }
            if (rows[t] == NULL) {
                rows[t] = q; /* computed and discarded */
                sink |= 1u << t;
            }
        }
        s_vf d = S_FN(permute)(S_FN(dot_tile)(&q, rows, hs, 1, S_VL, 1, 0), S_FN(perm)[0]);
        d = s_div(s_sel(S_FN(mask_bits)(sink), s_zero(), d), s_set1(scale));
        s_store_m(sc + p0, s_first(np), d);
    }
}

#define S_AV_CH 4u                    /* vectors of o per pass over the positions */
#define S_AV_G (S_VL == 16 ? 4u : 2u) /* partials accumulated in registers at once */
#define S_AV_SEG 256u                 /* positions whose rows are looked up at once */

/* acc[0 .. NC) += p * row[0 .. NC vectors), the last vector loading the lanes of mlast only. */
S_ALWAYS void S_FN(av_row)(s_vf *acc, float p, const float *row, s_vm mlast, uint32_t NC) {
    s_vf pv = s_set1(p);
    S_UNROLL_SHAPE
    for (uint32_t c = 0; c < NC; c++) {
        s_vf v = c + 1 < NC ? s_load(row + c * S_VL) : s_load_m(row + c * S_VL, mlast);
        acc[c] = s_fma(pv, v, acc[c]);
    }
}

/* part[l][0 .. NC) += prob[q] * rows[q][0 .. NC vectors) for the q < cnt with q % 32 == l, in
 * ascending q; the last vector loads the lanes of mlast only. */
S_ALWAYS void S_FN(av_segment)(s_vf *part, int first, const float *prob, const float *const *rows,
                               uint32_t cnt, s_vm mlast, uint32_t NC) {
    for (uint32_t g = 0; g < ACG_LANES; g += S_AV_G) {
        s_vf acc[S_AV_G][S_AV_CH];
        S_UNROLL
        for (uint32_t t = 0; t < S_AV_G; t++) {
            S_UNROLL_SHAPE
            for (uint32_t c = 0; c < NC; c++) {
                acc[t][c] = first ? s_zero() : part[(g + t) * S_AV_CH + c];
            }
        }
        uint32_t q = g;
        for (; q + S_AV_G <= cnt; q += ACG_LANES) {
            S_UNROLL
            for (uint32_t t = 0; t < S_AV_G; t++) {
                S_FN(av_row)(acc[t], prob[q + t], rows[q + t], mlast, NC);
            }
        }
        S_UNROLL
        for (uint32_t t = 0; t < S_AV_G; t++) {
            if (q + t < cnt) {
                S_FN(av_row)(acc[t], prob[q + t], rows[q + t], mlast, NC);
            }
        }
        S_UNROLL
        for (uint32_t t = 0; t < S_AV_G; t++) {
            S_UNROLL_SHAPE
            for (uint32_t c = 0; c < NC; c++) {
                part[(g + t) * S_AV_CH + c] = acc[t][c];
            }
        }
    }
}

#define S_AV_SEGMENT(NC_)                                                                          \
    static __attribute__((noinline)) void S_FN(av_segment_##NC_)(                                  \
        s_vf * part, int first, const float *prob, const float *const *rows, uint32_t cnt,         \
        s_vm mlast) {                                                                              \
        S_FN(av_segment)(part, first, prob, rows, cnt, mlast, NC_);                                \
    }
S_AV_SEGMENT(1)
S_AV_SEGMENT(2)
S_AV_SEGMENT(3)
S_AV_SEGMENT(4)

/* Vectorized across i: the 32 partials of S_AV_CH vectors of o live in part (32 x S_AV_CH
 * vectors on the stack), and the tree adds whole vectors of them. */
static void S_FN(attn_values)(float *o, const float *prob, const acg__kv_rows *v, uint32_t hs,
                              uint32_t n_pos) {
    s_vf part[ACG_LANES * S_AV_CH];
    const float *rows[S_AV_SEG];
    for (uint32_t i0 = 0; i0 < hs; i0 += S_AV_CH * S_VL) {
        uint32_t width = hs - i0 < S_AV_CH * S_VL ? hs - i0 : S_AV_CH * S_VL;
        uint32_t nc = (width + S_VL - 1) / S_VL;
        s_vm mlast = s_first(width - (nc - 1) * S_VL);
        if (n_pos == 0) {
            for (uint32_t l = 0; l < ACG_LANES * S_AV_CH; l++) {
                part[l] = s_zero();
            }
        }
        for (uint32_t p0 = 0; p0 < n_pos; p0 += S_AV_SEG) {
            uint32_t cnt = n_pos - p0 < S_AV_SEG ? n_pos - p0 : S_AV_SEG;
            /* The sink page holds zeros: its rows are read from page 0, as the scalar code
             * reads them. */
            kv_rows(rows, v, p0, cnt, 1, i0);
            switch (nc) {
            case 1:
                S_FN(av_segment_1)(part, p0 == 0, prob + p0, rows, cnt, mlast);
                break;
            case 2:
                S_FN(av_segment_2)(part, p0 == 0, prob + p0, rows, cnt, mlast);
                break;
            case 3:
                S_FN(av_segment_3)(part, p0 == 0, prob + p0, rows, cnt, mlast);
                break;
            default:
                S_FN(av_segment_4)(part, p0 == 0, prob + p0, rows, cnt, mlast);
                break;
            }
        }
        for (uint32_t c = 0; c < nc; c++) {
            s_vf t[ACG_LANES / 2];
            S_UNROLL
            for (uint32_t l = 0; l < ACG_LANES / 2; l++) {
                t[l] = s_add(part[l * S_AV_CH + c], part[(l + ACG_LANES / 2) * S_AV_CH + c]);
            }
            S_UNROLL
            for (uint32_t w = ACG_LANES / 4; w >= 1; w /= 2) {
                S_UNROLL
                for (uint32_t l = 0; l < w; l++) {
                    t[l] = s_add(t[l], t[l + w]);
                }
            }
            if (c + 1 < nc) {
                s_store(o + i0 + c * S_VL, t[0]);
            } else {
                s_store_m(o + i0 + c * S_VL, mlast, t[0]);
            }
        }
    }
}

static const acg__simd_ops S_FN(ops) = {
    .name = S_NAME,
    .dot = S_FN(dot),
    .sum = S_FN(sum),
    .sum_ge = S_FN(sum_ge),
    .matmul = S_FN(matmul),
    .matmul_order = S_FN(matmul_order),
    .exp_sub = S_FN(exp_sub),
    .div = S_FN(div),
    .swiglu = S_FN(swiglu),
    .rms_apply = S_FN(rms_apply),
    .attn_scores = S_FN(attn_scores),
    .attn_values = S_FN(attn_values),
};

#undef S_VL
#undef S_NAME
#undef S_FN
#undef s_vf
#undef s_vi
#undef s_vm
#undef s_zero
#undef s_set1
#undef s_load
#undef s_store
#undef s_add
#undef s_sub
#undef s_mul
#undef s_div
#undef s_fma
#undef s_cmp
#undef s_sel
#undef s_neg
#undef s_cvtt
#undef s_iset1
#undef s_iadd
#undef s_isub
#undef s_isrli
#undef s_israi
#undef s_islli
#undef s_ibits
#undef S_NV
#undef S_UNROLL
#undef S_UNROLL_SHAPE
#undef S_UNROLL_SLICES
#undef S_HSTEP
#undef S_DOT
#undef S_SUM
#undef S_SUM_GE
#undef S_LANE
#undef S_PIDX
#undef S_PERM_ROW
#undef S_ALWAYS
#undef s_first
#undef s_load_m
#undef s_store_m
#undef s_fma_m
#undef s_add_m
#undef s_and_m
#undef S_AHEAD
#undef S_STREAM_MAX
#undef S_MATMUL_ROWS
#undef S_AV_SEGMENT
#undef S_AV_CH
#undef S_AV_G
#undef S_AV_SEG
