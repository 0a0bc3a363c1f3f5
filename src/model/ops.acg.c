/* ops.acg.c — the reference model's kernels, each written once (include/acg/kernel.h) as the
 * code of one work item: the OpenCL C the opencl backend builds, the SPIR-V of level_zero, the
 * cuda code of the kernels that need no lanes, and a portable C version of every kernel.
 * kernels.c registers them; model.h documents each one.
 *
 * Each output element is computed with the same operations in the same order as the cpu code
 * (kernels_cpu.c with simd_scalar.c), following the one arithmetic of arith.h
 * (docs/arithmetic.md): 32 partials and a halving tree for every reduction, acg_exp, fma
 * written out, correctly rounded division and square root. So the bits are the cpu oracle's on
 * every backend. Work items past the counts return at once (the grid may be rounded up), and
 * ids read from buffers are checked as the cpu checks them.
 *
 * Where the cpu backend has faster code of its own (SIMD loops, a thread split, a loop over
 * rows instead of a search per element) or cuda has a kernel sharing a work item between lanes
 * (kernels.cu), those run there instead, and test_model_kernels compares them with these bit
 * for bit. */
#include <acg/kernel.h>

#if ACG_TARGET_C
#include "model-impl.h" /* the shape rules (kernels.c) */
#endif

/* ---- the one arithmetic (arith.h) ---------------------------------------------------------- */

#define LANES 32u

/* The halving tree over 32 partials; returns s[0]. */
ACG_FUNC float tree32(float *s) {
    for (uint32_t w = LANES / 2; w >= 1; w /= 2) {
        for (uint32_t l = 0; l < w; l++) {
            s[l] = s[l] + s[l + w];
        }
    }
    return s[0];
}

ACG_FUNC float dot32(ACG_GLOBAL const float *a, ACG_GLOBAL const float *b, uint32_t n) {
    float s[LANES];
    for (uint32_t l = 0; l < LANES; l++) {
        s[l] = 0.0f;
    }
    for (uint32_t k = 0; k < n; k++) {
        s[k % LANES] = acg_fma(a[k], b[k], s[k % LANES]);
    }
    return tree32(s);
}

/* The sum of the a[k] >= tau (every a[k] when all is set). */
ACG_FUNC float sum32(ACG_GLOBAL const float *a, uint32_t n, float tau, bool all) {
    float s[LANES];
    for (uint32_t l = 0; l < LANES; l++) {
        s[l] = 0.0f;
    }
    for (uint32_t k = 0; k < n; k++) {
        if (all || a[k] >= tau) {
            s[k % LANES] = s[k % LANES] + a[k];
        }
    }
    return tree32(s);
}

/* ---- the kernels ------------------------------------------------------------------------- */

ACG_KERNEL(swiglu_f32, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x),
           ACG_BUF(const float, g)) {
    const uint32_t i = acg_id(0);
    const float v = x[i];
    y[i] = (v * acg_div(1.0f, 1.0f + acg_exp(-v))) * g[i];
}

ACG_KERNEL(embed_f32, ACG_SHAPE(acg__model_embed_shape, 2), ACG_BUF(float, out),
           ACG_BUF(const float, table), ACG_BUF(const int32_t, tokens), ACG_U32(dim),
           ACG_U32(vocab), ACG_U32(n)) {
    const uint32_t i = acg_id(0), t = acg_id(1);
    if (i >= dim || t >= n) {
        return;
    }
    const int32_t id = tokens[t];
    out[(size_t)t * dim + i] = id >= 0 && (uint32_t)id < vocab ? table[(size_t)id * dim + i] : 0.0f;
}

ACG_KERNEL(rmsnorm_f32, ACG_SHAPE(acg__model_rmsnorm_shape, 1), ACG_BUF(float, out),
           ACG_BUF(const float, x), ACG_BUF(const float, w), ACG_U32(dim), ACG_U32(n),
           ACG_F32(eps)) {
    const uint32_t t = acg_id(0);
    if (t >= n) {
        return;
    }
    ACG_GLOBAL const float *xr = x + (size_t)t * dim;
    ACG_GLOBAL float *o = out + (size_t)t * dim;
    float ss = dot32(xr, xr, dim);
    ss = acg_div(ss, (float)dim);
    ss = ss + eps;
    ss = acg_div(1.0f, acg_sqrt(ss));
    for (uint32_t j = 0; j < dim; j++) {
        o[j] = w[j] * (ss * xr[j]);
    }
}

/* out (n, n_out) = x (n, n_in) w^T: one dot product per work item. */
ACG_KERNEL(matmul_f32, ACG_SHAPE(acg__model_matmul_shape, 2), ACG_BUF(float, out),
           ACG_BUF(const float, x), ACG_BUF(const float, w), ACG_U32(n_in), ACG_U32(n_out),
           ACG_U32(n)) {
    const uint32_t j = acg_id(0), r = acg_id(1);
    if (j >= n_out || r >= n) {
        return;
    }
    out[(size_t)r * n_out + j] = dot32(w + (size_t)j * n_in, x + (size_t)r * n_in, n_in);
}

/* The row of token t and its position, from the plan; false for padding or a position the
 * block table cannot hold. */
ACG_FUNC bool token_place(ACG_GLOBAL const int32_t *offsets, ACG_GLOBAL const int32_t *kv_lens,
                          uint32_t batch, uint32_t t, uint32_t max_pos, uint32_t *row,
                          uint32_t *pos) {
    for (uint32_t r = 0; r < batch; r++) {
        const int64_t lo = offsets[r], hi = offsets[r + 1];
        if (lo <= (int64_t)t && (int64_t)t < hi) {
            const int64_t p = (int64_t)kv_lens[r] - (hi - lo) + ((int64_t)t - lo);
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

ACG_KERNEL(rope_f32, ACG_SHAPE(acg__model_rope_shape, 2), ACG_BUF(float, x),
           ACG_BUF(const float, cos_t), ACG_BUF(const float, sin_t),
           ACG_BUF(const int32_t, offsets), ACG_BUF(const int32_t, kv_lens), ACG_U32(width),
           ACG_U32(head_size), ACG_U32(n), ACG_U32(batch), ACG_U32(max_pos)) {
    const uint32_t pair = acg_id(0), t = acg_id(1);
    if (pair >= width / 2 || t >= n) {
        return;
    }
    uint32_t row = 0, pos = 0;
    if (!token_place(offsets, kv_lens, batch, t, max_pos, &row, &pos)) {
        return;
    }
    const uint32_t i = 2 * pair, n_freq = head_size / 2, f = (i % head_size) / 2;
    const float c = cos_t[(size_t)pos * n_freq + f], s = sin_t[(size_t)pos * n_freq + f];
    ACG_GLOBAL float *v = x + (size_t)t * width;
    const float v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * c - v1 * s;
    v[i + 1] = v0 * s + v1 * c;
}

/* The page holding position pos of row r, or -1 when the table names no usable page. */
ACG_FUNC int64_t page_of(ACG_GLOBAL const int32_t *table, uint32_t table_width, uint32_t page_size,
                         uint32_t n_pages, uint32_t r, uint32_t pos) {
    const int32_t page = table[(size_t)r * table_width + pos / page_size];
    return page >= 0 && (uint32_t)page < n_pages ? page : -1;
}

ACG_KERNEL(kv_store_f32, ACG_SHAPE(acg__model_kv_store_shape, 2), ACG_BUF(float, kc),
           ACG_BUF(float, vc), ACG_BUF(const float, k), ACG_BUF(const float, v),
           ACG_BUF(const int32_t, table), ACG_BUF(const int32_t, offsets),
           ACG_BUF(const int32_t, kv_lens), ACG_U32(kv_dim), ACG_U32(n), ACG_U32(batch),
           ACG_U32(width), ACG_U32(page_size), ACG_U32(n_pages)) {
    const uint32_t e = acg_id(0), t = acg_id(1);
    uint32_t r = 0, pos = 0;
    if (e >= kv_dim || t >= n || page_size == 0 ||
        !token_place(offsets, kv_lens, batch, t, width * page_size, &r, &pos)) {
        return;
    }
    const int64_t page = page_of(table, width, page_size, n_pages, r, pos);
    if (page <= 0) { /* never write the sink page */
        return;
    }
    const size_t at = ((size_t)page * page_size + pos % page_size) * kv_dim + e;
    kc[at] = k[(size_t)t * kv_dim + e];
    vc[at] = v[(size_t)t * kv_dim + e];
}

/* One work item per (head, token) does the whole head in its own slice of the att scratch. */
ACG_KERNEL(attention_f32, ACG_SHAPE(acg__model_attention_shape, 2), ACG_BUF(float, out),
           ACG_BUF(float, att), ACG_BUF(const float, q), ACG_BUF(const float, kcache),
           ACG_BUF(const float, vcache), ACG_BUF(const int32_t, table),
           ACG_BUF(const int32_t, offsets), ACG_BUF(const int32_t, kv_lens), ACG_U32(n_heads),
           ACG_U32(n_kv_heads), ACG_U32(hs), ACG_U32(n), ACG_U32(batch), ACG_U32(width),
           ACG_U32(page_size), ACG_U32(n_pages)) {
    const uint32_t h = acg_id(0), t = acg_id(1);
    if (h >= n_heads || t >= n) {
        return;
    }
    const uint32_t span = width * page_size, kv_dim = n_kv_heads * hs, group = n_heads / n_kv_heads;
    const float scale = acg_sqrt((float)hs);
    ACG_GLOBAL float *o = out + ((size_t)t * n_heads + h) * hs;
    for (uint32_t i = 0; i < hs; i++) {
        o[i] = 0.0f;
    }
    uint32_t r = 0, pos = 0;
    if (page_size == 0 || !token_place(offsets, kv_lens, batch, t, span, &r, &pos)) {
        return;
    }
    ACG_GLOBAL const float *qh = q + ((size_t)t * n_heads + h) * hs;
    ACG_GLOBAL float *sc = att + ((size_t)t * n_heads + h) * span;
    const size_t kv_off = (size_t)(h / group) * hs;
    for (uint32_t p = 0; p <= pos; p++) {
        const int64_t page = page_of(table, width, page_size, n_pages, r, p);
        float score = 0.0f;
        if (page >= 0) {
            score = dot32(qh, kcache + ((size_t)page * page_size + p % page_size) * kv_dim + kv_off,
                          hs);
        }
        sc[p] = acg_div(score, scale);
    }
    float max = sc[0];
    for (uint32_t p = 1; p <= pos; p++) {
        if (sc[p] > max) {
            max = sc[p];
        }
    }
    for (uint32_t p = 0; p <= pos; p++) {
        sc[p] = acg_exp(sc[p] - max);
    }
    const float sum = sum32(sc, pos + 1, 0.0f, true);
    for (uint32_t p = 0; p <= pos; p++) {
        sc[p] = acg_div(sc[p], sum);
    }
    /* Each output element: 32 partials over the positions, then the tree. */
    for (uint32_t i = 0; i < hs; i++) {
        float s[LANES];
        for (uint32_t l = 0; l < LANES; l++) {
            s[l] = 0.0f;
        }
        for (uint32_t p = 0; p <= pos; p++) {
            int64_t page = page_of(table, width, page_size, n_pages, r, p);
            if (page < 0) {
                page = 0; /* the sink page: zeros */
            }
            const float xv =
                vcache[((size_t)page * page_size + p % page_size) * kv_dim + kv_off + i];
            s[p % LANES] = acg_fma(sc[p], xv, s[p % LANES]);
        }
        o[i] = tree32(s);
    }
}

ACG_KERNEL(gather_last_f32, ACG_SHAPE(acg__model_gather_last_shape, 2), ACG_BUF(float, out),
           ACG_BUF(const float, x), ACG_BUF(const int32_t, offsets), ACG_U32(dim), ACG_U32(batch),
           ACG_U32(n)) {
    const uint32_t i = acg_id(0), r = acg_id(1);
    if (i >= dim || r >= batch) {
        return;
    }
    const int32_t lo = offsets[r], hi = offsets[r + 1];
    out[(size_t)r * dim + i] =
        lo < hi && hi >= 1 && (uint32_t)hi <= n ? x[(size_t)(hi - 1) * dim + i] : 0.0f;
}

/* The sampler's random number for (seed, counter): splitmix64's finalizer over the pair, so
 * every draw of a request is a fresh, reproducible number. */
ACG_FUNC uint64_t draw_bits(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + (counter + 1) * ACG_U64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * ACG_U64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * ACG_U64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* One row of "sample_f32": see model.h and docs/model.md. */
ACG_FUNC void sample_row(ACG_GLOBAL const float *logits, ACG_GLOBAL float *p, uint32_t vocab,
                         ACG_GLOBAL uint32_t *state, ACG_GLOBAL int32_t *result) {
    const float temperature = acg_as_float(state[3]), top_p = acg_as_float(state[4]);
    float max = 0.0f;
    if (temperature > 0.0f) {
        max = acg_div(logits[0], temperature);
        for (uint32_t i = 1; i < vocab; i++) {
            const float v = acg_div(logits[i], temperature);
            if (v > max) {
                max = v;
            }
        }
    }
    /* Greedy at temperature 0, and where the scaled logits overflow (a tiny temperature or an
     * infinite logit): the distribution is then all on the largest logit. No draw is made. */
    if (!(temperature > 0.0f) || !acg_isfinite(max)) {
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
    for (uint32_t i = 0; i < vocab; i++) {
        p[i] = acg_exp(acg_div(logits[i], temperature) - max);
    }
    const float sum = sum32(p, vocab, 0.0f, true);
    for (uint32_t i = 0; i < vocab; i++) {
        p[i] = acg_div(p[i], sum);
    }
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p: a bisection over the bit patterns of tau (positive floats order as integers). */
    uint32_t lo = 0;
    if (top_p > 0.0f && top_p < 1.0f && sum32(p, vocab, 0.0f, false) >= top_p) {
        uint32_t hi = 0x3f800001u; /* just above 1.0f */
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            if (sum32(p, vocab, acg_as_float(mid), false) >= top_p) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    const float tau = acg_as_float(lo);
    const uint64_t seed = (uint64_t)state[1] << 32 | state[0];
    const uint32_t counter = state[2];
    const float u = (float)(draw_bits(seed, counter) >> 40) * (1.0f / 16777216.0f);
    const float target = u * sum32(p, vocab, tau, false);
    float cdf = 0.0f;
    int32_t pick = -1;
    for (uint32_t i = 0; i < vocab; i++) {
        if (p[i] >= tau) {
            pick = (int32_t)i; /* the last of the nucleus, should rounding leave target unmet */
            cdf = cdf + p[i];
            if (target < cdf) {
                break;
            }
        }
    }
    state[2] = counter + 1;
    result[0] = pick < 0 ? 0 : pick;
    result[1] = (int32_t)counter;
}

/* The state words of one seat: ACG_SAMPLER_STATE_WORDS in model.h. */
#define SAMPLER_STATE_WORDS 8u

ACG_KERNEL(sample_f32, ACG_SHAPE(acg__model_sample_shape, 1), ACG_BUF(int32_t, result),
           ACG_BUF(const float, logits), ACG_BUF(float, probs), ACG_BUF(const int32_t, seats),
           ACG_BUF(uint32_t, states), ACG_U32(vocab), ACG_U32(batch), ACG_U32(n_states)) {
    const uint32_t r = acg_id(0);
    if (r >= batch) {
        return;
    }
    ACG_GLOBAL int32_t *res = result + 2 * (size_t)r;
    const int32_t seat = seats[r];
    if (seat < 0 || (uint32_t)seat >= n_states || vocab == 0) {
        res[0] = -1;
        res[1] = -1;
        return;
    }
    sample_row(logits + (size_t)r * vocab, probs + (size_t)r * vocab, vocab,
               states + (size_t)seat * SAMPLER_STATE_WORDS, res);
}

/* Between the steps of a launch that decodes many (model.h, "Decoding steps per launch"), one
 * work item over every row, in row order: a row still decoding (its seat >= 0) files the token
 * and draw counter it sampled into its ring at this step, spends one token of its budget
 * (ctl[r]), and stops when the budget is spent, when the token is the end of sequence and the
 * row stops there (ctl[batch + r]), or when the token lies outside the vocabulary (its seat becomes
 * -1, so nothing more is sampled for it and its inputs stay as they were); otherwise the token
 * becomes its next input and its KV length in the plan grows by one. loop[0] counts the steps;
 * loop[1], the launch's loop condition, says whether any row decodes on. */
ACG_KERNEL(decode_advance_i32, ACG_SHAPE(acg__model_decode_advance_shape, 1),
           ACG_BUF(const int32_t, result), ACG_BUF(int32_t, tokens), ACG_BUF(int32_t, seats),
           ACG_BUF(int32_t, kv_lens), ACG_BUF(int32_t, ctl), ACG_BUF(int32_t, ring),
           ACG_BUF(uint32_t, loop), ACG_U32(batch), ACG_U32(steps), ACG_U32(vocab), ACG_I32(eos)) {
    if (acg_id(0) != 0) {
        return;
    }
    const uint32_t step = loop[0];
    uint32_t decoding = 0;
    for (uint32_t r = 0; r < batch; r++) {
        if (seats[r] < 0) {
            continue;
        }
        const int32_t token = result[2 * (size_t)r];
        if (step < steps) {
            ring[2 * ((size_t)r * steps + step)] = token;
            ring[2 * ((size_t)r * steps + step) + 1] = result[2 * (size_t)r + 1];
        }
        ctl[r] = ctl[r] - 1;
        if (ctl[r] <= 0 || token < 0 || (uint32_t)token >= vocab ||
            (ctl[(size_t)batch + r] != 0 && token == eos)) {
            seats[r] = -1;
        } else {
            tokens[r] = token;
            kv_lens[r] = kv_lens[r] + 1;
            decoding++;
        }
    }
    loop[0] = step + 1;
    loop[1] = decoding != 0 ? 1u : 0u;
}
