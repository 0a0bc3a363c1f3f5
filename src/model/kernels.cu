/* kernels.cu - the CUDA C of the reference model's kernels that share a work item between the
 * lanes of a warp or a block (acg_kernel_desc.cuda_lanes): rmsnorm, matmul, attention and the
 * sampler. Their one source (ops.acg.c) gives every other backend its code, and cuda the other
 * kernels; kernels.c registers these in its place on cuda, and test_model_kernels compares them
 * with it bit for bit. The build compiles this file into one fatbin that kernels.c embeds
 * (cmake/cuda_kernels.cmake).
 *
 * ops.acg.c, work item by work item: each output element is computed with the same operations
 * in the same order as the cpu code (kernels_cpu.c with simd_scalar.c), following the one
 * arithmetic of arith.h (docs/arithmetic.md), so the bits are the cpu oracle's.
 *
 * - Every rounding operation is written as its intrinsic: __fadd_rn, __fsub_rn, __fmul_rn,
 *   __fdiv_rn and __fsqrt_rn (correctly rounded, never contracted or approximated), fmaf where
 *   arith.h has fmaf. So the results do not depend on nvcc's flags; the build still passes
 *   --fmad=false -prec-div=true -prec-sqrt=true -ftz=false as a second guard.
 * - A reduction's 32 partials are where the order puts them: partial l takes the terms
 *   k = l, l + 32, ... in ascending k, then the halving tree adds s[l + w] to s[l] for
 *   w = 16, 8, 4, 2, 1. A kernel whose work item is one thread keeps the 32 partials in
 *   registers (loops over them unrolled); a kernel given a warp per work item
 *   (acg_kernel_desc.cuda_lanes = 32: matmul, rmsnorm, attention) keeps partial l in lane l and
 *   forms the tree with shuffles, the same additions of the same values; the sampler has a
 *   block of 1024 threads per row and gives each of its searches a warp.
 * - Calling convention (the cuda backend's): a buffer argument is one pointer, the window's
 *   byte offset already added; a u32 is unsigned int, an f32 float; then the launch's global
 *   sizes acg_gx, acg_gy, acg_gz. The grid is rounded up to whole blocks: a work item past the
 *   global size in any dimension returns at once (all its lanes together), then each kernel
 *   checks its counts as ops.acg.c does. */

#include <acg/kernel.h> /* acg_exp */

/* A thread's work item in dimension d (x, y or z): acg/kernel.h's acg_id. */
#define ACG_ID(d) ((unsigned long long)blockIdx.d * blockDim.d + threadIdx.d)

#define GRID_ARGS unsigned int acg_gx, unsigned int acg_gy, unsigned int acg_gz

/* For a kernel of `lanes` threads per work item (cuda_lanes): its work item along x, its lane,
 * and true for the work items the rounding up to whole blocks added. */
#define ACG_ITEM_X(lanes) (((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / (lanes))
#define ACG_LANE(lanes) (threadIdx.x % (lanes))
#define ACG_PAST_GRID_LANES(lanes)                                                                 \
    (ACG_ITEM_X(lanes) >= acg_gx || ACG_ID(y) >= acg_gy || ACG_ID(z) >= acg_gz)

#define FULL_WARP 0xffffffffu

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

/* The halving tree over 32 partials held one per lane of a warp (lane l holds s[l]): each step
 * adds lane l + w's value to lane l's, as fold does; every lane returns s[0]. */
__device__ static float warp_tree(float s) {
#pragma unroll
    for (unsigned int w = 16; w >= 1; w /= 2) {
        s = __fadd_rn(s, __shfl_down_sync(FULL_WARP, s, w));
    }
    return __shfl_sync(FULL_WARP, s, 0);
}

/* dot32 by a warp: lane l forms partial l. Every lane returns the result. */
__device__ static float warp_dot(const float *a, const float *b, unsigned int n,
                                 unsigned int lane) {
    float s = 0.0f;
    for (unsigned long long k = lane; k < n; k += LANES) {
        s = fmaf(a[k], b[k], s);
    }
    return warp_tree(s);
}

/* The sum of the a[k] >= tau (every a[k] when all is set) in the one order, by a warp: a
 * skipped term leaves its lane's partial as it is. Every lane returns the result. */
__device__ static float warp_sum(const float *a, unsigned int n, float tau, bool all,
                                 unsigned int lane) {
    float s = 0.0f;
    for (unsigned long long k = lane; k < n; k += LANES) {
        const float v = a[k];
        if (all || v >= tau) {
            s = __fadd_rn(s, v);
        }
    }
    return warp_tree(s);
}

/* A running "first maximum": (v, i) replaces (*bv, *bi) when it is larger, or equal at a lower
 * index; a NaN never does, and *bi < 0 means none yet. This order is total, so combining
 * candidates in any grouping finds what a scan in ascending index finds with `v > max`
 * (which keeps the first of equal maxima, +0 and -0 included, and never takes a NaN). */
__device__ static void keep_first_max(float v, long long i, float *bv, long long *bi) {
    if (i >= 0 && v == v && (*bi < 0 || v > *bv || (v == *bv && i < *bi))) {
        *bv = v;
        *bi = i;
    }
}

/* keep_first_max over the lanes of a warp; every lane ends with the warp's. */
__device__ static void warp_first_max(float *bv, long long *bi) {
#pragma unroll
    for (unsigned int w = 16; w >= 1; w /= 2) {
        const float ov = __shfl_xor_sync(FULL_WARP, *bv, w);
        const long long oi = __shfl_xor_sync(FULL_WARP, *bi, w);
        keep_first_max(ov, oi, bv, bi);
    }
}

/* ---- kernels -------------------------------------------------------------------------------- */

/* A warp per row (cuda_lanes 32). out may be x itself (the in-place pair): lane l reads and
 * writes only the elements j = l, l + 32, ... */
extern "C" __global__ void __launch_bounds__(256)
    rmsnorm_f32(float *out, const float *x, const float *w, unsigned int dim, unsigned int n,
                float eps, GRID_ARGS) {
    if (ACG_PAST_GRID_LANES(LANES)) {
        return;
    }
    const unsigned int lane = ACG_LANE(LANES);
    const size_t t = ACG_ITEM_X(LANES);
    if (t >= n) {
        return;
    }
    const float *xr = x + t * dim;
    float *o = out + t * dim;
    float ss = warp_dot(xr, xr, dim, lane);
    ss = __fdiv_rn(ss, __uint2float_rn(dim));
    ss = __fadd_rn(ss, eps);
    ss = __fdiv_rn(1.0f, __fsqrt_rn(ss));
    for (unsigned int j = lane; j < dim; j += LANES) {
        o[j] = __fmul_rn(w[j], __fmul_rn(ss, xr[j]));
    }
}

/* out (n, n_out) = x (n, n_in) w^T: a warp per dot product (cuda_lanes 32), so that the lanes
 * read a weight row together. */
extern "C" __global__ void __launch_bounds__(256)
    matmul_f32(float *out, const float *x, const float *w, unsigned int n_in, unsigned int n_out,
               unsigned int n, GRID_ARGS) {
    if (ACG_PAST_GRID_LANES(LANES)) {
        return;
    }
    const unsigned int lane = ACG_LANE(LANES);
    const size_t j = ACG_ITEM_X(LANES), r = ACG_ID(y);
    if (j >= n_out || r >= n) {
        return;
    }
    const float v = warp_dot(w + j * n_in, x + r * n_in, n_in, lane);
    if (lane == 0) {
        out[r * n_out + j] = v;
    }
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

/* The page holding position pos of row r, or -1 when the table names no usable page. */
__device__ static long long page_of(const int *table, unsigned int table_width,
                                    unsigned int page_size, unsigned int n_pages, unsigned int r,
                                    unsigned int pos) {
    int page = table[(size_t)r * table_width + pos / page_size];
    return page >= 0 && (unsigned int)page < n_pages ? page : -1;
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

/* A warp per (head, token) (cuda_lanes 32) does the whole head in its own slice of the att
 * scratch. Lane l scores the positions p = l, l + 32, ..., so it holds partial l of the softmax
 * sum; the output element i is lane i % 32's, with its 32 partials over the positions in
 * registers as a one-thread kernel has them. */
extern "C" __global__ void __launch_bounds__(256)
    attention_f32(float *out, float *att, const float *q, const float *kc, const float *vc,
                  const int *table, const int *offsets, const int *kv_lens, unsigned int n_heads,
                  unsigned int n_kv_heads, unsigned int hs, unsigned int n, unsigned int batch,
                  unsigned int width, unsigned int page_size, unsigned int n_pages, GRID_ARGS) {
    if (ACG_PAST_GRID_LANES(LANES)) {
        return;
    }
    const unsigned int lane = ACG_LANE(LANES);
    const size_t h = ACG_ITEM_X(LANES), t = ACG_ID(y);
    if (h >= n_heads || t >= n) {
        return;
    }
    const unsigned int span = width * page_size, kv_dim = n_kv_heads * hs,
                       group = n_heads / n_kv_heads;
    const float scale = __fsqrt_rn(__uint2float_rn(hs));
    float *o = out + (t * n_heads + h) * hs;
    unsigned int r = 0, pos = 0;
    if (page_size == 0 || !token_place(offsets, kv_lens, batch, (unsigned int)t, span, &r, &pos)) {
        for (unsigned int i = lane; i < hs; i += LANES) {
            o[i] = 0.0f;
        }
        return;
    }
    const float *qh = q + (t * n_heads + h) * hs;
    float *sc = att + (t * n_heads + h) * span;
    const size_t kv_off = (size_t)(h / group) * hs;
    /* The scores, and their first maximum as the scan `if (sc[p] > max) max = sc[p]` from
     * max = sc[0] finds it: sc[0] when that is NaN, else the first of the largest others. */
    float best = 0.0f, first = 0.0f;
    long long best_p = -1;
    for (unsigned int p = lane; p <= pos; p += LANES) {
        long long page = page_of(table, width, page_size, n_pages, r, p);
        float score = 0.0f;
        if (page >= 0) {
            score =
                dot32(qh, kc + ((size_t)page * page_size + p % page_size) * kv_dim + kv_off, hs);
        }
        const float v = __fdiv_rn(score, scale);
        sc[p] = v;
        first = p == 0 ? v : first;
        keep_first_max(v, p, &best, &best_p);
    }
    warp_first_max(&best, &best_p);
    first = __shfl_sync(FULL_WARP, first, 0);
    const float max = first != first ? first : best;
    /* exp, and partial l of the sum over the lane's own positions. */
    const unsigned int n_pos = pos + 1;
    float part = 0.0f;
    for (unsigned int p = lane; p < n_pos; p += LANES) {
        const float e = acg_exp(__fsub_rn(sc[p], max));
        sc[p] = e;
        part = __fadd_rn(part, e);
    }
    const float sum = warp_tree(part);
    for (unsigned int p = lane; p < n_pos; p += LANES) {
        sc[p] = __fdiv_rn(sc[p], sum);
    }
    __syncwarp(); /* every lane reads every position's weight below */
    for (unsigned int i = lane; i < hs; i += LANES) {
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

__device__ static bool is_finite(float x) {
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

/* The sampler's block: one row per block of SAMPLE_THREADS threads (cuda_lanes), 32 warps. */
#define SAMPLE_THREADS 1024u
#define SAMPLE_WARPS (SAMPLE_THREADS / LANES)

/* What the threads of a sampler block share. */
struct sample_shared {
    float v[SAMPLE_WARPS];
    long long i[SAMPLE_WARPS];
    float f[SAMPLE_WARPS];
};

/* The block's first maximum (keep_first_max) of each thread's (bv, bi): its index, -1 for none.
 * Every thread of the block must call it. */
__device__ static long long block_first_max(float bv, long long bi, sample_shared *sh) {
    const unsigned int warp = threadIdx.x / LANES;
    warp_first_max(&bv, &bi);
    if (threadIdx.x % LANES == 0) {
        sh->v[warp] = bv;
        sh->i[warp] = bi;
    }
    __syncthreads();
    float v = 0.0f;
    long long i = -1;
    for (unsigned int w = 0; w < SAMPLE_WARPS; w++) {
        keep_first_max(sh->v[w], sh->i[w], &v, &i);
    }
    __syncthreads(); /* sh is free again */
    return i;
}

/* Warp 0's value x, for every thread of the block. Every thread must call it. */
__device__ static float block_from_warp0(float x, sample_shared *sh) {
    if (threadIdx.x == 0) {
        sh->f[0] = x;
    }
    __syncthreads();
    x = sh->f[0];
    __syncthreads();
    return x;
}

/* One row of "sample_f32" (see model.h), by the whole block: the same operations as the one
 * thread of ops.acg.c does, shared out. The scaled logits' maximum and the greedy argmax are
 * first maxima (keep_first_max); each sum is a warp's, partial l in lane l; the nucleus
 * threshold is searched 31 candidates at a time, one warp each (see below); the draw's running
 * sum is sequential and thread 0's. */
__device__ static void sample_row(const float *logits, float *p, unsigned int vocab,
                                  unsigned int *state, int *result, sample_shared *sh) {
    const unsigned int tid = threadIdx.x, warp = tid / LANES, lane = tid % LANES;
    const float temperature = __uint_as_float(state[3]), top_p = __uint_as_float(state[4]);
    float max = 0.0f;
    if (temperature > 0.0f) {
        float bv = 0.0f;
        long long bi = -1;
        for (unsigned int i = tid; i < vocab; i += SAMPLE_THREADS) {
            keep_first_max(__fdiv_rn(logits[i], temperature), i, &bv, &bi);
        }
        bi = block_first_max(bv, bi, sh);
        const float v0 = __fdiv_rn(logits[0], temperature);
        max = v0 != v0 || bi < 0 ? v0 : __fdiv_rn(logits[bi], temperature);
    }
    /* Greedy at temperature 0, and where the scaled logits overflow (a tiny temperature or an
     * infinite logit): the distribution is then all on the largest logit, the first of equals
     * (index 0 when logits[0] is NaN, as `logits[i] > logits[best]` from best = 0 finds). No
     * draw is made. */
    if (!(temperature > 0.0f) || !is_finite(max)) {
        float bv = 0.0f;
        long long bi = -1;
        for (unsigned int i = tid; i < vocab; i += SAMPLE_THREADS) {
            keep_first_max(logits[i], i, &bv, &bi);
        }
        bi = block_first_max(bv, bi, sh);
        if (tid == 0) {
            result[0] = logits[0] != logits[0] || bi < 0 ? 0 : (int)bi;
            result[1] = -1;
        }
        return;
    }
    for (unsigned int i = tid; i < vocab; i += SAMPLE_THREADS) {
        p[i] = acg_exp(__fsub_rn(__fdiv_rn(logits[i], temperature), max));
    }
    __syncthreads();
    float sum = 0.0f;
    if (warp == 0) {
        sum = warp_sum(p, vocab, 0.0f, true, lane);
    }
    sum = block_from_warp0(sum, sh);
    for (unsigned int i = tid; i < vocab; i += SAMPLE_THREADS) {
        p[i] = __fdiv_rn(p[i], sum);
    }
    __syncthreads();
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p (positive floats order as their bit patterns). The mass, a conditional sum, can
     * only fall as tau grows, so "mass(tau) >= top_p" holds up to one bit pattern and not past
     * it: ops.acg.c finds that one by bisection between 0 and just above 1.0f, and so does
     * this search, which splits the interval (lo, hi) at 31 candidates a round, warp w
     * testing lo + (hi - lo) * w / 32 (warp 0 tests tau = 0 first: without it the nucleus is
     * everything, lo = 0). Six rounds instead of thirty, the same answer. */
    unsigned int lo = 0, hi = 0x3f800001u; /* hi: just above 1.0f, where no p reaches */
    if (top_p > 0.0f && top_p < 1.0f) {
        for (bool first = true; hi - lo > 1; first = false) {
            const unsigned int span = hi - lo;
            const unsigned int c =
                warp == 0 ? lo : lo + (unsigned int)((unsigned long long)span * warp / LANES);
            bool reaches = true;
            if (warp != 0 || first) {
                reaches = warp_sum(p, vocab, __uint_as_float(c), false, lane) >= top_p;
            }
            if (lane == 0) {
                sh->i[warp] = reaches;
            }
            __syncthreads();
            if (first && sh->i[0] == 0) { /* block-uniform: mass(0) misses top_p */
                break;
            }
            unsigned int new_lo = lo, new_hi = hi;
            for (unsigned int w = 1; w < SAMPLE_WARPS; w++) {
                const unsigned int cw = lo + (unsigned int)((unsigned long long)span * w / LANES);
                if (sh->i[w] != 0) {
                    new_lo = cw > new_lo ? cw : new_lo;
                } else {
                    new_hi = cw < new_hi ? cw : new_hi;
                }
            }
            __syncthreads(); /* sh is free again */
            lo = new_lo;
            hi = new_hi;
        }
    }
    const float tau = __uint_as_float(lo);
    float mass = 0.0f;
    if (warp == 0) {
        mass = warp_sum(p, vocab, tau, false, lane);
    }
    if (tid != 0) {
        return;
    }
    const unsigned long long seed = (unsigned long long)state[1] << 32 | state[0];
    const unsigned int counter = state[2];
    /* 24 random bits (exact in a float) times 2^-24. */
    const float u =
        __fmul_rn(__ull2float_rn(draw_bits(seed, counter) >> 40), 5.9604644775390625e-8f);
    const float target = __fmul_rn(u, mass);
    /* The running sum is one chain of additions: thread 0 adds, eight loads ahead. */
    float cdf = 0.0f;
    int pick = -1;
    bool done = false;
    for (unsigned int i0 = 0; i0 < vocab && !done; i0 += 8) {
        float c[8];
#pragma unroll
        for (unsigned int k = 0; k < 8; k++) {
            c[k] = i0 + k < vocab ? p[i0 + k] : -1.0f;
        }
#pragma unroll
        for (unsigned int k = 0; k < 8; k++) {
            if (!done && c[k] >= tau) {
                pick =
                    (int)(i0 + k); /* the last of the nucleus, should rounding leave target unmet */
                cdf = __fadd_rn(cdf, c[k]);
                done = target < cdf;
            }
        }
    }
    state[2] = counter + 1;
    result[0] = pick < 0 ? 0 : pick;
    result[1] = (int)counter;
}

/* The state words of one seat: ACG_SAMPLER_STATE_WORDS in model.h. */
#define SAMPLER_STATE_WORDS 8

/* A block per row (cuda_lanes SAMPLE_THREADS). */
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_f32(int *result, const float *logits, float *probs, const int *seats,
               unsigned int *states, unsigned int vocab, unsigned int batch, unsigned int n_states,
               GRID_ARGS) {
    __shared__ sample_shared sh;
    if (ACG_PAST_GRID_LANES(SAMPLE_THREADS)) {
        return;
    }
    const size_t r = ACG_ITEM_X(SAMPLE_THREADS);
    if (r >= batch) {
        return;
    }
    int *res = result + 2 * r;
    int seat = seats[r];
    if (seat < 0 || (unsigned int)seat >= n_states || vocab == 0) {
        if (threadIdx.x == 0) {
            res[0] = -1;
            res[1] = -1;
        }
        return;
    }
    sample_row(logits + r * vocab, probs + r * vocab, vocab,
               states + (size_t)seat * SAMPLER_STATE_WORDS, res, &sh);
}
