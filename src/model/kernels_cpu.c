/* kernels_cpu.c — the cpu backend's own code for the reference model's kernels where it is
 * faster than their one source (ops.acg.c): SIMD loops, a split over the pool's threads, a
 * loop over rows where the one source searches the plan for every element.
 *
 * Every reduction (dot products, sums of squares, softmax sums) and every exp follows the one
 * arithmetic of arith.h, through the vector loops of simd.h, so each output element is computed
 * the same way whatever rows surround it, whichever SIMD level runs, and on every backend:
 * ops.acg.c computes the same bits. Ids read from buffers are checked before use. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "model-impl.h"
#include "simd.h"

/* ---- splitting over the cpu backend's threads ----------------------------------------------
 * A launch is split only when each part gets at least SPLIT_WORK multiply-adds (or like
 * operations), some 2-3 us of one thread's work: `acg bench split` has splitting pay from about
 * 1.4 us of work a launch on a two-core machine, the pool's hand-off costing some 0.3 us (and
 * `acg bench decode` shows a step's hand-off in all). Attention at batch 1 is the kernel this
 * decides: a few thousand positions' worth of its operations take ~0.3 ns each. Parts own whole
 * output elements (columns of a matmul, (token, head) pairs of attention, rows of sampling), so
 * the partition never changes how an element is computed. */
#define SPLIT_WORK 8192.0

static uint32_t parts_for(double work, uint64_t units, uint32_t max_parts) {
    double by_work = work / SPLIT_WORK;
    uint64_t n = by_work < (double)max_parts ? (uint64_t)by_work : max_parts;
    n = n < units ? n : units;
    return n < 1 ? 1 : (uint32_t)n;
}

/* Units [*lo, *hi) of part p of n over `units`, boundaries rounded down to multiples of
 * `align` (the last part ends at units). */
static void part_range(uint64_t units, uint32_t p, uint32_t n, uint64_t align, uint64_t *lo,
                       uint64_t *hi) {
    *lo = units * p / n / align * align;
    *hi = p + 1 == n ? units : units * (p + 1) / n / align * align;
}

void acg__model_cpu_swiglu_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    acg__simd()->swiglu(a[0].p, a[1].p, a[2].p, global[0]);
}

uint32_t acg__model_cpu_swiglu_f32_parts(const acg_cpu_arg *a, const uint32_t global[3],
                                         uint32_t max_parts) {
    (void)a;
    return parts_for(16.0 * global[0], global[0] / 64, max_parts); /* exp: ~16 operations */
}

void acg__model_cpu_swiglu_f32_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                                    uint32_t n_parts) {
    uint64_t lo, hi;
    part_range(global[0], part, n_parts, 64, &lo, &hi);
    float *y = a[0].p;
    const float *x = a[1].p, *g = a[2].p;
    acg__simd()->swiglu(y + lo, x + lo, g + lo, (uint32_t)(hi - lo));
}

void acg__model_cpu_rmsnorm_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    float *out = a[0].p;
    const float *x = a[1].p, *w = a[2].p;
    const uint32_t dim = a[3].u32, n = a[4].u32;
    const float eps = a[5].f32;
    const acg__simd_ops *v = acg__simd();
    for (uint32_t t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * dim;
        float ss = v->dot(xr, xr, dim);
        ss = ss / (float)dim;
        ss = ss + eps;
        ss = 1.0f / sqrtf(ss);
        v->rms_apply(out + (size_t)t * dim, w, xr, ss, dim);
    }
}

/* out (n, n_out) = x (n, n_in) w^T: each output the one-order dot product of its weight row
 * and its input row. */
void acg__model_cpu_matmul_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    const uint32_t n_in = a[3].u32, n_out = a[4].u32, n = a[5].u32;
    acg__simd()->matmul(a[0].p, a[1].p, a[2].p, n_in, n_out, n, 0, n_out);
}

/* A weight read from memory costs about as long as this many multiply-adds from registers: a
 * core streams some 5 G floats a second and multiplies 16 lanes twice a cycle. At small batches
 * a matmul's time is its weights' streaming, not its multiply-adds. */
#define MATMUL_WEIGHT_WORK 16.0

/* Parts own columns: each thread streams its share of the weight rows once. */
uint32_t acg__model_cpu_matmul_f32_parts(const acg_cpu_arg *a, const uint32_t global[3],
                                         uint32_t max_parts) {
    (void)global;
    const uint32_t n_in = a[3].u32, n_out = a[4].u32, n = a[5].u32;
    double weights = (double)n_in * n_out, macs = weights * n;
    double work = macs > weights * MATMUL_WEIGHT_WORK ? macs : weights * MATMUL_WEIGHT_WORK;
    return parts_for(work, n_out / 16, max_parts);
}

void acg__model_cpu_matmul_f32_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                                    uint32_t n_parts) {
    (void)global;
    const uint32_t n_in = a[3].u32, n_out = a[4].u32, n = a[5].u32;
    uint64_t lo, hi;
    part_range(n_out, part, n_parts, 16, &lo, &hi);
    acg__simd()->matmul(a[0].p, a[1].p, a[2].p, n_in, n_out, n, (uint32_t)lo, (uint32_t)hi);
}

/* The row of token t and its position, from the plan; false for padding or a position the
 * block table cannot hold. */
static bool token_place(const int32_t *offsets, const int32_t *kv_lens, uint32_t batch, uint32_t t,
                        uint32_t max_pos, uint32_t *row, uint32_t *pos) {
    for (uint32_t r = 0; r < batch; r++) {
        int64_t lo = offsets[r], hi = offsets[r + 1];
        if (lo <= (int64_t)t && (int64_t)t < hi) {
            int64_t p = (int64_t)kv_lens[r] - (hi - lo) + ((int64_t)t - lo);
            if (p < 0 || p >= (int64_t)max_pos) {
                return false;
            }
            *row = r;
            *pos = (uint32_t)p;
            return true;
        }
    }
    return false;
}

void acg__model_cpu_rope_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    float *x = a[0].p;
    const float *cos_t = a[1].p, *sin_t = a[2].p;
    const int32_t *offsets = a[3].p, *kv_lens = a[4].p;
    const uint32_t width = a[5].u32, head_size = a[6].u32, n = a[7].u32, batch = a[8].u32,
                   max_pos = a[9].u32, half = head_size / 2;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t row, pos;
        if (!token_place(offsets, kv_lens, batch, t, max_pos, &row, &pos)) {
            continue;
        }
        float *v = x + (size_t)t * width;
        for (uint32_t i = 0; i < width; i += 2) {
            uint32_t f = (i % head_size) / 2;
            float c = cos_t[(size_t)pos * half + f], s = sin_t[(size_t)pos * half + f];
            float v0 = v[i], v1 = v[i + 1];
            v[i] = v0 * c - v1 * s;
            v[i + 1] = v0 * s + v1 * c;
        }
    }
}

/* The page holding position pos of row r, or -1 when the table names no usable page. */
static int64_t page_of(const int32_t *table, uint32_t table_width, uint32_t page_size,
                       uint32_t n_pages, uint32_t r, uint32_t pos) {
    int32_t page = table[(size_t)r * table_width + pos / page_size];
    return page >= 0 && (uint32_t)page < n_pages ? page : -1;
}

void acg__model_cpu_kv_store_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    float *kc = a[0].p, *vc = a[1].p;
    const float *k = a[2].p, *v = a[3].p;
    const int32_t *table = a[4].p, *offsets = a[5].p, *kv_lens = a[6].p;
    const uint32_t kv_dim = a[7].u32, n = a[8].u32, batch = a[9].u32, width = a[10].u32,
                   page_size = a[11].u32, n_pages = a[12].u32;
    for (uint32_t t = 0; t < n; t++) {
        uint32_t r, pos;
        if (page_size == 0 ||
            !token_place(offsets, kv_lens, batch, t, width * page_size, &r, &pos)) {
            continue;
        }
        int64_t page = page_of(table, width, page_size, n_pages, r, pos);
        if (page <= 0) { /* never write the sink page */
            continue;
        }
        size_t at = ((size_t)page * page_size + pos % page_size) * kv_dim;
        memcpy(kc + at, k + (size_t)t * kv_dim, (size_t)kv_dim * sizeof(float));
        memcpy(vc + at, v + (size_t)t * kv_dim, (size_t)kv_dim * sizeof(float));
    }
}

/* Attention for the (token, head) pairs u0 <= u < u1, u = t * n_heads + h. */
static void attention_units(const acg_cpu_arg *a, uint64_t u0, uint64_t u1) {
    float *out = a[0].p, *att = a[1].p;
    const float *q = a[2].p, *kc = a[3].p, *vc = a[4].p;
    const int32_t *table = a[5].p, *offsets = a[6].p, *kv_lens = a[7].p;
    const uint32_t n_heads = a[8].u32, n_kv_heads = a[9].u32, hs = a[10].u32, batch = a[12].u32,
                   width = a[13].u32, page_size = a[14].u32, n_pages = a[15].u32;
    const uint32_t span = width * page_size, kv_dim = n_kv_heads * hs, group = n_heads / n_kv_heads;
    const float scale = sqrtf((float)hs);
    const acg__simd_ops *v = acg__simd();
    for (uint64_t u = u0; u < u1; u++) {
        uint32_t t = (uint32_t)(u / n_heads), h = (uint32_t)(u % n_heads);
        uint32_t r = 0, pos = 0;
        float *o = out + ((size_t)t * n_heads + h) * hs;
        if (page_size == 0 || !token_place(offsets, kv_lens, batch, t, span, &r, &pos)) {
            memset(o, 0, (size_t)hs * sizeof(float));
            continue;
        }
        const float *qh = q + ((size_t)t * n_heads + h) * hs;
        float *sc = att + ((size_t)t * n_heads + h) * span;
        uint32_t kv_off = (h / group) * hs, n_pos = pos + 1;
        const int32_t *row = table + (size_t)r * width;
        const acg__kv_rows keys = {kc, row, page_size, n_pages, kv_dim, kv_off};
        const acg__kv_rows values = {vc, row, page_size, n_pages, kv_dim, kv_off};
        v->attn_scores(sc, qh, &keys, hs, scale, n_pos);
        float max = sc[0];
        for (uint32_t p = 1; p < n_pos; p++) {
            if (sc[p] > max) {
                max = sc[p];
            }
        }
        v->exp_sub(sc, sc, max, n_pos);
        v->div(sc, sc, v->sum(sc, n_pos), n_pos);
        v->attn_values(o, sc, &values, hs, n_pos);
    }
}

void acg__model_cpu_attention_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    attention_units(a, 0, (uint64_t)a[11].u32 * a[8].u32);
}

/* Parts own (token, head) pairs; the work is what the step's queries read: for each row, its
 * query tokens times the positions they attend to. */
uint32_t acg__model_cpu_attention_f32_parts(const acg_cpu_arg *a, const uint32_t global[3],
                                            uint32_t max_parts) {
    (void)global;
    const int32_t *offsets = a[6].p, *kv_lens = a[7].p;
    const uint32_t n_heads = a[8].u32, hs = a[10].u32, n = a[11].u32, batch = a[12].u32;
    double work = 0.0;
    for (uint32_t r = 0; r < batch; r++) {
        int64_t q_len = (int64_t)offsets[r + 1] - offsets[r];
        if (q_len > 0 && kv_lens[r] > 0) {
            work += (double)q_len * kv_lens[r];
        }
    }
    return parts_for(work * n_heads * hs * 2.0, (uint64_t)n * n_heads, max_parts);
}

void acg__model_cpu_attention_f32_part(const acg_cpu_arg *a, const uint32_t global[3],
                                       uint32_t part, uint32_t n_parts) {
    (void)global;
    uint64_t lo, hi;
    part_range((uint64_t)a[11].u32 * a[8].u32, part, n_parts, 1, &lo, &hi);
    attention_units(a, lo, hi);
}

/* The sampler's random number for (seed, counter): splitmix64's finalizer over the pair, so
 * every draw of a request is a fresh, reproducible number. */
static uint64_t draw_bits(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float bits_float(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Probability mass of the tokens whose probability is at least tau, in the one order. */
static float mass_from(const float *p, uint32_t vocab, float tau) {
    return acg__simd()->sum_ge(p, vocab, tau);
}

/* One row of "sample_f32": see model.h and docs/model.md. */
static void sample_row(const float *logits, float *p, uint32_t vocab, uint32_t *state,
                       int32_t *result) {
    const float temperature = bits_float(state[3]), top_p = bits_float(state[4]);
    float max = 0.0f;
    if (temperature > 0.0f) {
        max = logits[0] / temperature;
        for (uint32_t i = 1; i < vocab; i++) {
            float v = logits[i] / temperature;
            if (v > max) {
                max = v;
            }
        }
    }
    /* Greedy at temperature 0, and where the scaled logits overflow (a tiny temperature or an
     * infinite logit): the distribution is then all on the largest logit. No draw is made. */
    if (!(temperature > 0.0f) || !isfinite(max)) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < vocab; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        result[0] = (int32_t)best;
        result[1] = -1;
        return;
    }
    const acg__simd_ops *v = acg__simd();
    v->div(p, logits, temperature, vocab);
    v->exp_sub(p, p, max, vocab);
    v->div(p, p, v->sum(p, vocab), vocab);
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p: a bisection over the bit patterns of tau (positive floats order as integers). */
    uint32_t lo = 0;
    if (top_p > 0.0f && top_p < 1.0f && mass_from(p, vocab, 0.0f) >= top_p) {
        uint32_t hi = 0x3f800001u; /* just above 1.0f */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (mass_from(p, vocab, bits_float(mid)) >= top_p) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    const float tau = bits_float(lo);
    const uint64_t seed = (uint64_t)state[1] << 32 | state[0];
    const uint32_t counter = state[2];
    const float u = (float)(draw_bits(seed, counter) >> 40) * (1.0f / 16777216.0f);
    const float target = u * mass_from(p, vocab, tau);
    float cdf = 0.0f;
    int32_t pick = -1;
    for (uint32_t i = 0; i < vocab; i++) {
        if (p[i] >= tau) {
            pick = (int32_t)i; /* the last of the nucleus, should rounding leave target unmet */
            cdf += p[i];
            if (target < cdf) {
                break;
            }
        }
    }
    state[2] = counter + 1;
    result[0] = pick < 0 ? 0 : pick;
    result[1] = (int32_t)counter;
}

/* Sampling for rows r0 <= r < r1. */
static void sample_rows(const acg_cpu_arg *a, uint32_t r0, uint32_t r1) {
    int32_t *result = a[0].p;
    const float *logits = a[1].p;
    float *probs = a[2].p;
    const int32_t *seats = a[3].p;
    uint32_t *states = a[4].p;
    const uint32_t vocab = a[5].u32, n_states = a[7].u32;
    for (uint32_t r = r0; r < r1; r++) {
        int32_t seat = seats[r];
        if (seat < 0 || (uint32_t)seat >= n_states || vocab == 0) {
            result[2 * r] = -1;
            result[2 * r + 1] = -1;
            continue;
        }
        sample_row(logits + (size_t)r * vocab, probs + (size_t)r * vocab, vocab,
                   states + (size_t)seat * ACG_SAMPLER_STATE_WORDS, &result[2 * r]);
    }
}

void acg__model_cpu_sample_f32(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    sample_rows(a, 0, a[6].u32);
}

/* Parts own rows. A row with a nucleus bisects over its probabilities some 30 times. Rows of
 * one launch name different seats (model.h: rows sharing a seat race, on every backend), so
 * parts never share a state. */
uint32_t acg__model_cpu_sample_f32_parts(const acg_cpu_arg *a, const uint32_t global[3],
                                         uint32_t max_parts) {
    (void)global;
    const uint32_t vocab = a[5].u32, batch = a[6].u32;
    return parts_for(40.0 * vocab * batch, batch, max_parts);
}

void acg__model_cpu_sample_f32_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                                    uint32_t n_parts) {
    (void)global;
    uint64_t lo, hi;
    part_range(a[6].u32, part, n_parts, 1, &lo, &hi);
    sample_rows(a, (uint32_t)lo, (uint32_t)hi);
}
