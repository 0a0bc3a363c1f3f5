/* kernels.cl - the OpenCL C 1.2 of the reference model's kernels (kernels.c registers them).
 *
 * The cpu code (kernels_cpu.c with simd_scalar.c), split so that one work item computes each
 * output element with the same operations in the same order: the one arithmetic of arith.h,
 * written again below for OpenCL (explicit fma, acg's exp, no contraction; the backend builds
 * with correctly rounded division and square root), so results match the cpu backend bit for
 * bit. Work items past the counts return at once (the grid may be rounded up), and ids read
 * from buffers are checked as the cpu checks them. Each buffer argument arrives as a pointer
 * and a byte offset, so the same launch works for any window of any buffer. */
#pragma OPENCL FP_CONTRACT OFF

#define AT(type, p, off) ((global type *)((global char *)(p) + (off)))

/* ---- the one arithmetic (arith.h) ---------------------------------------------------------- */

#define LANES 32

static float tree32(float *s) {
    for (uint w = LANES / 2; w >= 1; w /= 2) {
        for (uint l = 0; l < w; l++) {
            s[l] = s[l] + s[l + w];
        }
    }
    return s[0];
}

static float dot32(global const float *a, global const float *b, uint n) {
    float s[LANES];
    for (uint l = 0; l < LANES; l++) {
        s[l] = 0.0f;
    }
    for (uint k = 0; k < n; k++) {
        s[k % LANES] = fma(a[k], b[k], s[k % LANES]);
    }
    return tree32(s);
}

/* The sum of the a[k] >= tau (every a[k] when all is set). */
static float sum32(global const float *a, uint n, float tau, bool all) {
    float s[LANES];
    for (uint l = 0; l < LANES; l++) {
        s[l] = 0.0f;
    }
    for (uint k = 0; k < n; k++) {
        if (all || a[k] >= tau) {
            s[k % LANES] = s[k % LANES] + a[k];
        }
    }
    return tree32(s);
}

static float acg_expf(float x) {
    if (!(x <= 88.72283935546875f)) {
        return x != x ? x : INFINITY;
    }
    if (x < -87.0f) {
        return 0.0f;
    }
    float t = x * 1.44269502162933349609375f;
    float n = (t + 12582912.0f) - 12582912.0f;
    float r = fma(n, -0.693145751953125f, x);
    r = fma(n, -1.428606765330187045e-06f, r);
    float p = 1.98412701138295233249664306640625e-4f;
    p = fma(p, r, 1.38888892251998186111450195312500e-3f);
    p = fma(p, r, 8.33333376795053482055664062500000e-3f);
    p = fma(p, r, 4.16666679084300994873046875000000e-2f);
    p = fma(p, r, 1.66666671633720397949218750000000e-1f);
    p = fma(p, r, 0.5f);
    p = fma(p, r, 1.0f);
    p = fma(p, r, 1.0f);
    int ni = (int)n, hi = ni / 2;
    float s1 = as_float((uint)(ni - hi + 127) << 23);
    float s2 = as_float((uint)(hi + 127) << 23);
    return (p * s1) * s2;
}

kernel void swiglu_f32(global float *y, ulong y_off, global float *x, ulong x_off,
                       global float *g, ulong g_off) {
    size_t i = get_global_id(0);
    float v = AT(float, x, x_off)[i];
    AT(float, y, y_off)[i] = (v * (1.0f / (1.0f + acg_expf(-v)))) * AT(float, g, g_off)[i];
}

kernel void embed_f32(global float *out, ulong out_off, global float *table, ulong table_off,
                      global int *tokens, ulong tokens_off, uint dim, uint vocab, uint n) {
    size_t i = get_global_id(0), t = get_global_id(1);
    if (i >= dim || t >= n) {
        return;
    }
    int id = AT(int, tokens, tokens_off)[t];
    AT(float, out, out_off)[t * dim + i] =
        id >= 0 && (uint)id < vocab ? AT(float, table, table_off)[(size_t)id * dim + i] : 0.0f;
}

kernel void rmsnorm_f32(global float *out, ulong out_off, global float *x, ulong x_off,
                        global float *w, ulong w_off, uint dim, uint n, float eps) {
    size_t t = get_global_id(0);
    if (t >= n) {
        return;
    }
    global float *xr = AT(float, x, x_off) + t * dim, *o = AT(float, out, out_off) + t * dim;
    global float *ww = AT(float, w, w_off);
    float ss = dot32(xr, xr, dim);
    ss = ss / (float)dim;
    ss = ss + eps;
    ss = 1.0f / sqrt(ss);
    for (uint j = 0; j < dim; j++) {
        o[j] = ww[j] * (ss * xr[j]);
    }
}

/* out (n, n_out) = x (n, n_in) w^T: one dot product per work item. */
kernel void matmul_f32(global float *out, ulong out_off, global float *x, ulong x_off,
                       global float *w, ulong w_off, uint n_in, uint n_out, uint n) {
    size_t j = get_global_id(0), r = get_global_id(1);
    if (j >= n_out || r >= n) {
        return;
    }
    global float *xr = AT(float, x, x_off) + r * n_in, *wj = AT(float, w, w_off) + j * n_in;
    AT(float, out, out_off)[r * n_out + j] = dot32(wj, xr, n_in);
}

/* The row of token t and its position, from the plan; false for padding or a position the
 * block table cannot hold. */
static bool token_place(global int *offsets, global int *kv_lens, uint batch, uint t,
                        uint max_pos, uint *row, uint *pos) {
    for (uint r = 0; r < batch; r++) {
        long lo = offsets[r], hi = offsets[r + 1];
        if (lo <= (long)t && (long)t < hi) {
            long p = (long)kv_lens[r] - (hi - lo) + ((long)t - lo);
            if (p < 0 || p >= (long)max_pos) {
                return false;
            }
            *row = r;
            *pos = (uint)p;
            return true;
        }
    }
    return false;
}

kernel void rope_f32(global float *x, ulong x_off, global float *cos_t, ulong cos_off,
                     global float *sin_t, ulong sin_off, global int *offsets, ulong offsets_off,
                     global int *kv_lens, ulong kv_lens_off, uint width, uint head_size, uint n,
                     uint batch, uint max_pos) {
    size_t pair = get_global_id(0), t = get_global_id(1);
    if (pair >= width / 2 || t >= n) {
        return;
    }
    uint row, pos;
    if (!token_place(AT(int, offsets, offsets_off), AT(int, kv_lens, kv_lens_off), batch,
                     (uint)t, max_pos, &row, &pos)) {
        return;
    }
    uint i = 2 * (uint)pair, n_freq = head_size / 2, f = (i % head_size) / 2;
    float c = AT(float, cos_t, cos_off)[(size_t)pos * n_freq + f];
    float s = AT(float, sin_t, sin_off)[(size_t)pos * n_freq + f];
    global float *v = AT(float, x, x_off) + t * width;
    float v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * c - v1 * s;
    v[i + 1] = v0 * s + v1 * c;
}

/* The page holding position pos of row r, or -1 when the table names no usable page. */
static long page_of(global int *table, uint table_width, uint page_size, uint n_pages, uint r,
                    uint pos) {
    int page = table[(size_t)r * table_width + pos / page_size];
    return page >= 0 && (uint)page < n_pages ? page : -1;
}

kernel void kv_store_f32(global float *kc, ulong kc_off, global float *vc, ulong vc_off,
                         global float *k, ulong k_off, global float *v, ulong v_off,
                         global int *table, ulong table_off, global int *offsets,
                         ulong offsets_off, global int *kv_lens, ulong kv_lens_off, uint kv_dim,
                         uint n, uint batch, uint width, uint page_size, uint n_pages) {
    size_t e = get_global_id(0), t = get_global_id(1);
    uint r, pos;
    if (e >= kv_dim || t >= n || page_size == 0 ||
        !token_place(AT(int, offsets, offsets_off), AT(int, kv_lens, kv_lens_off), batch,
                     (uint)t, width * page_size, &r, &pos)) {
        return;
    }
    long page = page_of(AT(int, table, table_off), width, page_size, n_pages, r, pos);
    if (page <= 0) { /* never write the sink page */
        return;
    }
    size_t at = ((size_t)page * page_size + pos % page_size) * kv_dim + e;
    AT(float, kc, kc_off)[at] = AT(float, k, k_off)[t * kv_dim + e];
    AT(float, vc, vc_off)[at] = AT(float, v, v_off)[t * kv_dim + e];
}

/* One work item per (head, token) does the whole head in its own slice of the att scratch. */
kernel void attention_f32(global float *out, ulong out_off, global float *att, ulong att_off,
                          global float *q, ulong q_off, global float *kc, ulong kc_off,
                          global float *vc, ulong vc_off, global int *table, ulong table_off,
                          global int *offsets, ulong offsets_off, global int *kv_lens,
                          ulong kv_lens_off, uint n_heads, uint n_kv_heads, uint hs, uint n,
                          uint batch, uint width, uint page_size, uint n_pages) {
    size_t h = get_global_id(0), t = get_global_id(1);
    if (h >= n_heads || t >= n) {
        return;
    }
    const uint span = width * page_size, kv_dim = n_kv_heads * hs, group = n_heads / n_kv_heads;
    const float scale = sqrt((float)hs);
    global int *tab = AT(int, table, table_off);
    global float *o = AT(float, out, out_off) + (t * n_heads + h) * hs;
    for (uint i = 0; i < hs; i++) {
        o[i] = 0.0f;
    }
    uint r = 0, pos = 0;
    if (page_size == 0 || !token_place(AT(int, offsets, offsets_off),
                                       AT(int, kv_lens, kv_lens_off), batch, (uint)t, span, &r,
                                       &pos)) {
        return;
    }
    global float *qh = AT(float, q, q_off) + (t * n_heads + h) * hs;
    global float *sc = AT(float, att, att_off) + (t * n_heads + h) * span;
    global float *kcache = AT(float, kc, kc_off), *vcache = AT(float, vc, vc_off);
    size_t kv_off = (size_t)(h / group) * hs;
    for (uint p = 0; p <= pos; p++) {
        long page = page_of(tab, width, page_size, n_pages, r, p);
        float score = 0.0f;
        if (page >= 0) {
            score = dot32(qh, kcache + ((size_t)page * page_size + p % page_size) * kv_dim + kv_off,
                          hs);
        }
        sc[p] = score / scale;
    }
    float max = sc[0];
    for (uint p = 1; p <= pos; p++) {
        if (sc[p] > max) {
            max = sc[p];
        }
    }
    for (uint p = 0; p <= pos; p++) {
        sc[p] = acg_expf(sc[p] - max);
    }
    float sum = sum32(sc, pos + 1, 0.0f, true);
    for (uint p = 0; p <= pos; p++) {
        sc[p] = sc[p] / sum;
    }
    /* Each output element: 32 partials over the positions, then the tree. */
    for (uint i = 0; i < hs; i++) {
        float s[LANES];
        for (uint l = 0; l < LANES; l++) {
            s[l] = 0.0f;
        }
        for (uint p = 0; p <= pos; p++) {
            long page = page_of(tab, width, page_size, n_pages, r, p);
            if (page < 0) {
                page = 0; /* the sink page: zeros */
            }
            float x = vcache[((size_t)page * page_size + p % page_size) * kv_dim + kv_off + i];
            s[p % LANES] = fma(sc[p], x, s[p % LANES]);
        }
        o[i] = tree32(s);
    }
}

kernel void gather_last_f32(global float *out, ulong out_off, global float *x, ulong x_off,
                            global int *offsets, ulong offsets_off, uint dim, uint batch,
                            uint n) {
    size_t i = get_global_id(0), r = get_global_id(1);
    if (i >= dim || r >= batch) {
        return;
    }
    global int *off = AT(int, offsets, offsets_off);
    int lo = off[r], hi = off[r + 1];
    AT(float, out, out_off)[r * dim + i] = lo < hi && hi >= 1 && (uint)hi <= n
                                               ? AT(float, x, x_off)[(size_t)(hi - 1) * dim + i]
                                               : 0.0f;
}

/* The sampler's random number for (seed, counter): splitmix64's finalizer over the pair, so
 * every draw of a request is a fresh, reproducible number. */
static ulong draw_bits(ulong seed, ulong counter) {
    ulong z = seed + (counter + 1) * 0x9E3779B97F4A7C15UL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}

/* Probability mass of the tokens whose probability is at least tau, in the one order. */
static float mass_from(global float *p, uint vocab, float tau) {
    return sum32(p, vocab, tau, false);
}

/* One row of "sample_f32": see model.h. */
static void sample_row(global float *logits, global float *p, uint vocab, global uint *state,
                       global int *result) {
    const float temperature = as_float(state[3]), top_p = as_float(state[4]);
    float max = 0.0f;
    if (temperature > 0.0f) {
        max = logits[0] / temperature;
        for (uint i = 1; i < vocab; i++) {
            float v = logits[i] / temperature;
            if (v > max) {
                max = v;
            }
        }
    }
    /* Greedy at temperature 0, and where the scaled logits overflow (a tiny temperature or an
     * infinite logit): the distribution is then all on the largest logit. No draw is made. */
    if (!(temperature > 0.0f) || !isfinite(max)) {
        uint best = 0;
        for (uint i = 1; i < vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        result[0] = (int)best;
        result[1] = -1;
        return;
    }
    for (uint i = 0; i < vocab; i++) {
        p[i] = acg_expf(logits[i] / temperature - max);
    }
    float sum = sum32(p, vocab, 0.0f, true);
    for (uint i = 0; i < vocab; i++) {
        p[i] = p[i] / sum;
    }
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p: a bisection over the bit patterns of tau (positive floats order as integers). */
    uint lo = 0;
    if (top_p > 0.0f && top_p < 1.0f && mass_from(p, vocab, 0.0f) >= top_p) {
        uint hi = 0x3f800001u; /* just above 1.0f */
        while (hi - lo > 1) {
            uint mid = lo + (hi - lo) / 2;
            if (mass_from(p, vocab, as_float(mid)) >= top_p) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    const float tau = as_float(lo);
    const ulong seed = (ulong)state[1] << 32 | state[0];
    const uint counter = state[2];
    const float u = (float)(draw_bits(seed, counter) >> 40) * (1.0f / 16777216.0f);
    const float target = u * mass_from(p, vocab, tau);
    float cdf = 0.0f;
    int pick = -1;
    for (uint i = 0; i < vocab; i++) {
        if (p[i] >= tau) {
            pick = (int)i; /* the last of the nucleus, should rounding leave target unmet */
            cdf += p[i];
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

kernel void sample_f32(global int *result, ulong result_off, global float *logits,
                       ulong logits_off, global float *probs, ulong probs_off, global int *seats,
                       ulong seats_off, global uint *states, ulong states_off, uint vocab,
                       uint batch, uint n_states) {
    size_t r = get_global_id(0);
    if (r >= batch) {
        return;
    }
    global int *res = AT(int, result, result_off) + 2 * r;
    int seat = AT(int, seats, seats_off)[r];
    if (seat < 0 || (uint)seat >= n_states || vocab == 0) {
        res[0] = -1;
        res[1] = -1;
        return;
    }
    sample_row(AT(float, logits, logits_off) + r * vocab, AT(float, probs, probs_off) + r * vocab,
               vocab, AT(uint, states, states_off) + (size_t)seat * SAMPLER_STATE_WORDS, res);
}
