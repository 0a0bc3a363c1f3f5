/* kernels.cu - the CUDA C of the reference model's kernels (kernels.c registers them; the build
 * compiles this file into one fatbin that kernels.c embeds: cmake/cuda_kernels.cmake).
 *
 * kernels.cl, work item by work item: one thread computes each output element with the same
 * operations in the same order as the cpu code (kernels_cpu.c with simd_scalar.c), following
 * the one arithmetic of arith.h (docs/arithmetic.md). No kernel shares work between threads:
 * there is no shared memory and no barrier, so any block shape computes the same bits.
 *
 * - Every rounding operation is written as its intrinsic: __fadd_rn, __fsub_rn, __fmul_rn,
 *   __fdiv_rn and __fsqrt_rn (correctly rounded, never contracted or approximated), fmaf where
 *   arith.h has fmaf. So the results do not depend on nvcc's flags; the build still passes
 *   --fmad=false -prec-div=true -prec-sqrt=true -ftz=false as a second guard.
 * - A reduction runs over its terms in blocks of 32 with the loop over the 32 partials unrolled,
 *   so they stay in registers: partial l still takes the terms k = l, l + 32, ... in ascending
 *   k, exactly as kernels.cl's s[k % 32] does. The block counter is 64-bit, so it cannot wrap
 *   for any 32-bit count.
 * - Calling convention (the cuda backend's): a buffer argument is one pointer, the window's
 *   byte offset already added; a u32 is unsigned int, an f32 float; then the launch's global
 *   sizes acg_gx, acg_gy, acg_gz. The grid is rounded up to whole blocks: a thread past the
 *   global size in any dimension returns at once, then each kernel checks its counts as
 *   kernels.cl does. */

/* A thread's work item in dimension d (x, y or z): kernels.cl's get_global_id. */
#define ACG_ID(d) ((unsigned long long)blockIdx.d * blockDim.d + threadIdx.d)

/* True for the threads the rounding up to whole blocks added. */
#define ACG_PAST_GRID() (ACG_ID(x) >= acg_gx || ACG_ID(y) >= acg_gy || ACG_ID(z) >= acg_gz)

#define ACG_GRID unsigned int acg_gx, unsigned int acg_gy, unsigned int acg_gz

/* ---- the one arithmetic (arith.h) ---------------------------------------------------------- */

#define LANES 32u

/* One step of the halving tree: s[l] += s[l + w] for l < w. */
__device__ static void fold(float s[LANES], unsigned int w) {
#pragma unroll
    for (unsigned int l = 0; l < w; l++) {
        s[l] = __fadd_rn(s[l], s[l + w]);
    }
}

/* The halving tree over 32 partials; returns s[0]. Written step by step so that every index is
 * a constant and the partials stay in registers. */
__device__ static float tree32(float s[LANES]) {
    fold(s, 16);
    fold(s, 8);
    fold(s, 4);
    fold(s, 2);
    fold(s, 1);
    return s[0];
}

__device__ static void zero32(float s[LANES]) {
#pragma unroll
    for (unsigned int l = 0; l < LANES; l++) {
        s[l] = 0.0f;
    }
}

/* sum over k < n of a[k] * b[k], in the one order. */
__device__ static float dot32(const float *a, const float *b, unsigned int n) {
    float s[LANES];
    zero32(s);
    for (unsigned long long k = 0; k < n; k += LANES) {
#pragma unroll
        for (unsigned int l = 0; l < LANES; l++) {
            if (k + l < n) {
                s[l] = fmaf(a[k + l], b[k + l], s[l]);
            }
        }
    }
    return tree32(s);
}

/* The sum of the a[k] >= tau (every a[k] when all is set); a skipped term leaves its partial. */
__device__ static float sum32(const float *a, unsigned int n, float tau, bool all) {
    float s[LANES];
    zero32(s);
    for (unsigned long long k = 0; k < n; k += LANES) {
#pragma unroll
        for (unsigned int l = 0; l < LANES; l++) {
            if (k + l < n && (all || a[k + l] >= tau)) {
                s[l] = __fadd_rn(s[l], a[k + l]);
            }
        }
    }
    return tree32(s);
}

/* acg__expf of arith.h: the same constants and the same operations in the same order. */
__device__ static float acg_expf(float x) {
    if (!(x <= 88.72283935546875f)) {
        return x != x ? x : __uint_as_float(0x7f800000u); /* NaN stays NaN; else +inf */
    }
    if (x < -87.0f) {
        return 0.0f;
    }
    float t = __fmul_rn(x, 1.44269502162933349609375f);
    float n = __fsub_rn(__fadd_rn(t, 12582912.0f), 12582912.0f);
    float r = fmaf(n, -0.693145751953125f, x);
    r = fmaf(n, -1.428606765330187045e-06f, r);
    float p = 1.98412701138295233249664306640625e-4f;
    p = fmaf(p, r, 1.38888892251998186111450195312500e-3f);
    p = fmaf(p, r, 8.33333376795053482055664062500000e-3f);
    p = fmaf(p, r, 4.16666679084300994873046875000000e-2f);
    p = fmaf(p, r, 1.66666671633720397949218750000000e-1f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int ni = (int)n, hi = ni / 2;
    float s1 = __uint_as_float((unsigned int)(ni - hi + 127) << 23);
    float s2 = __uint_as_float((unsigned int)(hi + 127) << 23);
    return __fmul_rn(__fmul_rn(p, s1), s2);
}

/* ---- kernels -------------------------------------------------------------------------------- */

extern "C" __global__ void swiglu_f32(float *y, const float *x, const float *g, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x);
    float v = x[i];
    y[i] = __fmul_rn(__fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(1.0f, acg_expf(-v)))), g[i]);
}

extern "C" __global__ void embed_f32(float *out, const float *table, const int *tokens,
                                     unsigned int dim, unsigned int vocab, unsigned int n,
                                     ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x), t = ACG_ID(y);
    if (i >= dim || t >= n) {
        return;
    }
    int id = tokens[t];
    out[t * dim + i] = id >= 0 && (unsigned int)id < vocab ? table[(size_t)id * dim + i] : 0.0f;
}

extern "C" __global__ void rmsnorm_f32(float *out, const float *x, const float *w, unsigned int dim,
                                       unsigned int n, float eps, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t t = ACG_ID(x);
    if (t >= n) {
        return;
    }
    /* out may be x itself (the in-place pair): each element is read before it is written. */
    const float *xr = x + t * dim;
    float *o = out + t * dim;
    float ss = dot32(xr, xr, dim);
    ss = __fdiv_rn(ss, __uint2float_rn(dim));
    ss = __fadd_rn(ss, eps);
    ss = __fdiv_rn(1.0f, __fsqrt_rn(ss));
    for (unsigned int j = 0; j < dim; j++) {
        o[j] = __fmul_rn(w[j], __fmul_rn(ss, xr[j]));
    }
}

/* out (n, n_out) = x (n, n_in) w^T: one dot product per work item. */
extern "C" __global__ void matmul_f32(float *out, const float *x, const float *w, unsigned int n_in,
                                      unsigned int n_out, unsigned int n, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t j = ACG_ID(x), r = ACG_ID(y);
    if (j >= n_out || r >= n) {
        return;
    }
    const float *xr = x + r * n_in, *wj = w + j * n_in;
    out[r * n_out + j] = dot32(wj, xr, n_in);
}

/* The row of token t and its position, from the plan; false for padding or a position the
 * block table cannot hold. */
__device__ static bool token_place(const int *offsets, const int *kv_lens, unsigned int batch,
                                   unsigned int t, unsigned int max_pos, unsigned int *row,
                                   unsigned int *pos) {
    for (unsigned int r = 0; r < batch; r++) {
        long long lo = offsets[r], hi = offsets[r + 1];
        if (lo <= (long long)t && (long long)t < hi) {
            long long p = (long long)kv_lens[r] - (hi - lo) + ((long long)t - lo);
            if (p < 0 || p >= (long long)max_pos) {
                return false;
            }
            *row = r;
            *pos = (unsigned int)p;
            return true;
        }
    }
    return false;
}

extern "C" __global__ void rope_f32(float *x, const float *cos_t, const float *sin_t,
                                    const int *offsets, const int *kv_lens, unsigned int width,
                                    unsigned int head_size, unsigned int n, unsigned int batch,
                                    unsigned int max_pos, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t pair = ACG_ID(x), t = ACG_ID(y);
    if (pair >= width / 2 || t >= n) {
        return;
    }
    unsigned int row, pos;
    if (!token_place(offsets, kv_lens, batch, (unsigned int)t, max_pos, &row, &pos)) {
        return;
    }
    unsigned int i = 2 * (unsigned int)pair, n_freq = head_size / 2, f = (i % head_size) / 2;
    float c = cos_t[(size_t)pos * n_freq + f];
    float s = sin_t[(size_t)pos * n_freq + f];
    float *v = x + t * width;
    float v0 = v[i], v1 = v[i + 1];
    v[i] = __fsub_rn(__fmul_rn(v0, c), __fmul_rn(v1, s));
    v[i + 1] = __fadd_rn(__fmul_rn(v0, s), __fmul_rn(v1, c));
}

/* The page holding position pos of row r, or -1 when the table names no usable page. */
__device__ static long long page_of(const int *table, unsigned int table_width,
                                    unsigned int page_size, unsigned int n_pages, unsigned int r,
                                    unsigned int pos) {
    int page = table[(size_t)r * table_width + pos / page_size];
    return page >= 0 && (unsigned int)page < n_pages ? page : -1;
}

extern "C" __global__ void kv_store_f32(float *kc, float *vc, const float *k, const float *v,
                                        const int *table, const int *offsets, const int *kv_lens,
                                        unsigned int kv_dim, unsigned int n, unsigned int batch,
                                        unsigned int width, unsigned int page_size,
                                        unsigned int n_pages, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t e = ACG_ID(x), t = ACG_ID(y);
    unsigned int r, pos;
    if (e >= kv_dim || t >= n || page_size == 0 ||
        !token_place(offsets, kv_lens, batch, (unsigned int)t, width * page_size, &r, &pos)) {
        return;
    }
    long long page = page_of(table, width, page_size, n_pages, r, pos);
    if (page <= 0) { /* never write the sink page */
        return;
    }
    size_t at = ((size_t)page * page_size + pos % page_size) * kv_dim + e;
    kc[at] = k[t * kv_dim + e];
    vc[at] = v[t * kv_dim + e];
}

/* Element i of position p's row in a value cache: page 0, the sink page (zeros), stands in for
 * a page the table does not name. */
__device__ static float value_at(const float *vcache, const int *tab, unsigned int width,
                                 unsigned int page_size, unsigned int n_pages, unsigned int r,
                                 unsigned int p, unsigned int kv_dim, size_t kv_off,
                                 unsigned int i) {
    long long page = page_of(tab, width, page_size, n_pages, r, p);
    if (page < 0) {
        page = 0;
    }
    return vcache[((size_t)page * page_size + p % page_size) * kv_dim + kv_off + i];
}

/* One work item per (head, token) does the whole head in its own slice of the att scratch. */
extern "C" __global__ void attention_f32(float *out, float *att, const float *q, const float *kc,
                                         const float *vc, const int *table, const int *offsets,
                                         const int *kv_lens, unsigned int n_heads,
                                         unsigned int n_kv_heads, unsigned int hs, unsigned int n,
                                         unsigned int batch, unsigned int width,
                                         unsigned int page_size, unsigned int n_pages, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t h = ACG_ID(x), t = ACG_ID(y);
    if (h >= n_heads || t >= n) {
        return;
    }
    const unsigned int span = width * page_size, kv_dim = n_kv_heads * hs,
                       group = n_heads / n_kv_heads;
    const float scale = __fsqrt_rn(__uint2float_rn(hs));
    float *o = out + (t * n_heads + h) * hs;
    for (unsigned int i = 0; i < hs; i++) {
        o[i] = 0.0f;
    }
    unsigned int r = 0, pos = 0;
    if (page_size == 0 || !token_place(offsets, kv_lens, batch, (unsigned int)t, span, &r, &pos)) {
        return;
    }
    const float *qh = q + (t * n_heads + h) * hs;
    float *sc = att + (t * n_heads + h) * span;
    const size_t kv_off = (size_t)(h / group) * hs;
    for (unsigned int p = 0; p <= pos; p++) {
        long long page = page_of(table, width, page_size, n_pages, r, p);
        float score = 0.0f;
        if (page >= 0) {
            score =
                dot32(qh, kc + ((size_t)page * page_size + p % page_size) * kv_dim + kv_off, hs);
        }
        sc[p] = __fdiv_rn(score, scale);
    }
    float max = sc[0];
    for (unsigned int p = 1; p <= pos; p++) {
        if (sc[p] > max) {
            max = sc[p];
        }
    }
    for (unsigned int p = 0; p <= pos; p++) {
        sc[p] = acg_expf(__fsub_rn(sc[p], max));
    }
    const unsigned int n_pos = pos + 1;
    float sum = sum32(sc, n_pos, 0.0f, true);
    for (unsigned int p = 0; p <= pos; p++) {
        sc[p] = __fdiv_rn(sc[p], sum);
    }
    /* Each output element: 32 partials over the positions (partial p % 32), then the tree. */
    for (unsigned int i = 0; i < hs; i++) {
        float s[LANES];
        zero32(s);
        for (unsigned long long p0 = 0; p0 < n_pos; p0 += LANES) {
#pragma unroll
            for (unsigned int l = 0; l < LANES; l++) {
                const unsigned int p = (unsigned int)p0 + l;
                if (p0 + l < n_pos) {
                    float x =
                        value_at(vc, table, width, page_size, n_pages, r, p, kv_dim, kv_off, i);
                    s[l] = fmaf(sc[p], x, s[l]);
                }
            }
        }
        o[i] = tree32(s);
    }
}

extern "C" __global__ void gather_last_f32(float *out, const float *x, const int *offsets,
                                           unsigned int dim, unsigned int batch, unsigned int n,
                                           ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t i = ACG_ID(x), r = ACG_ID(y);
    if (i >= dim || r >= batch) {
        return;
    }
    int lo = offsets[r], hi = offsets[r + 1];
    out[r * dim + i] =
        lo < hi && hi >= 1 && (unsigned int)hi <= n ? x[(size_t)(hi - 1) * dim + i] : 0.0f;
}

/* ---- sampling ------------------------------------------------------------------------------- */

/* The sampler's random number for (seed, counter): splitmix64's finalizer over the pair, so
 * every draw of a request is a fresh, reproducible number. */
__device__ static unsigned long long draw_bits(unsigned long long seed,
                                               unsigned long long counter) {
    unsigned long long z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Probability mass of the tokens whose probability is at least tau, in the one order. */
__device__ static float mass_from(const float *p, unsigned int vocab, float tau) {
    return sum32(p, vocab, tau, false);
}

__device__ static bool is_finite(float x) {
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

/* One row of "sample_f32": see model.h. */
__device__ static void sample_row(const float *logits, float *p, unsigned int vocab,
                                  unsigned int *state, int *result) {
    const float temperature = __uint_as_float(state[3]), top_p = __uint_as_float(state[4]);
    float max = 0.0f;
    if (temperature > 0.0f) {
        max = __fdiv_rn(logits[0], temperature);
        for (unsigned int i = 1; i < vocab; i++) {
            float v = __fdiv_rn(logits[i], temperature);
            if (v > max) {
                max = v;
            }
        }
    }
    /* Greedy at temperature 0, and where the scaled logits overflow (a tiny temperature or an
     * infinite logit): the distribution is then all on the largest logit. No draw is made. */
    if (!(temperature > 0.0f) || !is_finite(max)) {
        unsigned int best = 0;
        for (unsigned int i = 1; i < vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        result[0] = (int)best;
        result[1] = -1;
        return;
    }
    for (unsigned int i = 0; i < vocab; i++) {
        p[i] = acg_expf(__fsub_rn(__fdiv_rn(logits[i], temperature), max));
    }
    float sum = sum32(p, vocab, 0.0f, true);
    for (unsigned int i = 0; i < vocab; i++) {
        p[i] = __fdiv_rn(p[i], sum);
    }
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p: a bisection over the bit patterns of tau (positive floats order as integers). */
    unsigned int lo = 0;
    if (top_p > 0.0f && top_p < 1.0f && mass_from(p, vocab, 0.0f) >= top_p) {
        unsigned int hi = 0x3f800001u; /* just above 1.0f */
        while (hi - lo > 1) {
            unsigned int mid = lo + (hi - lo) / 2;
            if (mass_from(p, vocab, __uint_as_float(mid)) >= top_p) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    const float tau = __uint_as_float(lo);
    const unsigned long long seed = (unsigned long long)state[1] << 32 | state[0];
    const unsigned int counter = state[2];
    /* 24 random bits (exact in a float) times 2^-24. */
    const float u =
        __fmul_rn(__ull2float_rn(draw_bits(seed, counter) >> 40), 5.9604644775390625e-8f);
    const float target = __fmul_rn(u, mass_from(p, vocab, tau));
    float cdf = 0.0f;
    int pick = -1;
    for (unsigned int i = 0; i < vocab; i++) {
        if (p[i] >= tau) {
            pick = (int)i; /* the last of the nucleus, should rounding leave target unmet */
            cdf = __fadd_rn(cdf, p[i]);
            if (target < cdf) {
                break;
            }
        }
    }
    state[2] = counter + 1;
    result[0] = pick < 0 ? 0 : pick;
    result[1] = (int)counter;
}

/* The state words of one seat: ACG_SAMPLER_STATE_WORDS in model.h. */
#define SAMPLER_STATE_WORDS 8

extern "C" __global__ void sample_f32(int *result, const float *logits, float *probs,
                                      const int *seats, unsigned int *states, unsigned int vocab,
                                      unsigned int batch, unsigned int n_states, ACG_GRID) {
    if (ACG_PAST_GRID()) {
        return;
    }
    size_t r = ACG_ID(x);
    if (r >= batch) {
        return;
    }
    int *res = result + 2 * r;
    int seat = seats[r];
    if (seat < 0 || (unsigned int)seat >= n_states || vocab == 0) {
        res[0] = -1;
        res[1] = -1;
        return;
    }
    sample_row(logits + r * vocab, probs + r * vocab, vocab,
               states + (size_t)seat * SAMPLER_STATE_WORDS, res);
}
