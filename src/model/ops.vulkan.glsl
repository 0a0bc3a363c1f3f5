#version 460
/* ops.vulkan.glsl — the reference model's kernels (ops.acg.c) for the vulkan backend: the same
 * work item as the one source, in GLSL (acg/kernel.glsl says why it is written twice), with the
 * same operations in the same order, each rounded once, so that every output element has the
 * cpu oracle's bits (docs/arithmetic.md). acg_add_kernels compiles each ACG_VK_<kernel> part to
 * its own SPIR-V module.
 *
 * What changes from the C is spelling only. A pointer that the C offsets by a size_t product is
 * a buffer reference moved by that 64-bit product (ACG_VK_ADVANCE), indexed from 0 with the
 * C's 32-bit counters; a helper that takes a pointer takes such a reference; a helper's pointer
 * out-parameter is inout. A C ternary that reads memory in one arm is an if, so that no
 * compiler speculates the read of an id the kernel has just refused.
 *
 * Loops over long rows take blocks of items per iteration, the block's items unrolled in
 * order, so that each item meets the same operations in the same order as in the C (a partial
 * s[k % 32] takes its terms k ascending all the same). Mesa's lavapipe ends every loop of a
 * work item once the work item has run 65535 iterations of loops in all (llvmpipe's
 * LP_MAX_TGSI_LOOP_ITERATIONS, a guard against hangs shared by every loop of the shader), and
 * says nothing: a row of 32000 logits, which the sampler reads some 36 times, must take no
 * more than that. With the blocks below a work item stays well inside it for the presets and
 * llama2.c's models: the sampler runs about 3 vocab / 8 + 34 vocab / 64 iterations (29000 for
 * 32000 logits; a vocabulary up to some 70000), attention about pos (hs / 32 + 4) + hs pos / 32
 * (a context up to some 8000 positions for a head of 64). */
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);
ACG_VK_BUFFER(acg_i32, int);
ACG_VK_BUFFER(acg_u32, uint);

/* x + i, the one source's pointer arithmetic (i a size_t there). */
acg_f32 f32_at(acg_f32 x, uint64_t i) { return ACG_VK_ADVANCE(acg_f32, x, i, 4); }
acg_i32 i32_at(acg_i32 x, uint64_t i) { return ACG_VK_ADVANCE(acg_i32, x, i, 4); }
acg_u32 u32_at(acg_u32 x, uint64_t i) { return ACG_VK_ADVANCE(acg_u32, x, i, 4); }

/* ---- the one arithmetic (arith.h) ---------------------------------------------------------- */

#define LANES 32u
/* Items per iteration: a dot product's block is one per partial; a plain sum's, cheap items,
 * two per partial; the sampler's items that each divide or take an exp, 8. Larger blocks cut
 * iterations further, but lavapipe compiles the sampler for seconds more with each doubling. */
#define SUM_BLOCK 64u
#define HEAVY_BLOCK 8u

/* The halving tree over 32 partials; returns s[0]. Each level is written out, so that every
 * index is a constant (s stays in registers) and no level is a loop iteration. */
float tree32(inout float s[LANES]) {
    [[unroll]] for (uint l = 0u; l < 16u; l++) {
        s[l] = acg_add(s[l], s[l + 16u]);
    }
    [[unroll]] for (uint l = 0u; l < 8u; l++) {
        s[l] = acg_add(s[l], s[l + 8u]);
    }
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        s[l] = acg_add(s[l], s[l + 4u]);
    }
    s[0] = acg_add(s[0], s[2]);
    s[1] = acg_add(s[1], s[3]);
    s[0] = acg_add(s[0], s[1]);
    return s[0];
}

/* Whole blocks of 32 terms, then the last terms (fewer than 32) each under its test: the
 * partial s[k % 32] takes a[k] b[k] for k ascending, as in the C. */
float dot32(acg_f32 a, acg_f32 b, uint n) {
    float s[LANES];
    [[unroll]] for (uint l = 0u; l < LANES; l++) {
        s[l] = 0.0;
    }
    uint k = 0u;
    for (; n - k >= LANES; k += LANES) {
        [[unroll]] for (uint l = 0u; l < LANES; l++) {
            s[l] = acg_fma(a.v[k + l], b.v[k + l], s[l]);
        }
    }
    [[unroll]] for (uint l = 0u; l < LANES; l++) {
        if (l < n - k) {
            s[l] = acg_fma(a.v[k + l], b.v[k + l], s[l]);
        }
    }
    return tree32(s);
}

/* The sum of the a[k] >= tau (every a[k] when all is set), in blocks of SUM_BLOCK and then
 * the last terms each under its test: term k goes to s[k % 32] (a block starts at a multiple
 * of 32), in ascending k. */
float sum32(acg_f32 a, uint n, float tau, bool all) {
    float s[LANES];
    [[unroll]] for (uint l = 0u; l < LANES; l++) {
        s[l] = 0.0;
    }
    uint k = 0u;
    for (; n - k >= SUM_BLOCK; k += SUM_BLOCK) {
        [[unroll]] for (uint l = 0u; l < SUM_BLOCK; l++) {
            const float v = a.v[k + l];
            if (all || v >= tau) {
                s[l % LANES] = acg_add(s[l % LANES], v);
            }
        }
    }
    [[unroll]] for (uint l = 0u; l < SUM_BLOCK; l++) {
        if (l < n - k) {
            const float v = a.v[k + l];
            if (all || v >= tau) {
                s[l % LANES] = acg_add(s[l % LANES], v);
            }
        }
    }
    return tree32(s);
}

/* The row of token t and its position, from the plan; false for padding or a position the
 * block table cannot hold (row and pos then as they were). */
bool token_place(acg_i32 offsets, acg_i32 kv_lens, uint batch, uint t, uint max_pos,
                 inout uint row, inout uint pos) {
    for (uint r = 0u; r < batch; r++) {
        const int64_t lo = offsets.v[r], hi = offsets.v[r + 1u];
        if (lo <= int64_t(t) && int64_t(t) < hi) {
            const int64_t p = int64_t(kv_lens.v[r]) - (hi - lo) + (int64_t(t) - lo);
            if (p < 0l || p >= int64_t(max_pos)) {
                return false;
            }
            row = r;
            pos = uint(p);
            return true;
        }
    }
    return false;
}

/* The page holding position pos of row r, or -1 when the table names no usable page. */
int64_t page_of(acg_i32 table, uint table_width, uint page_size, uint n_pages, uint r, uint pos) {
    const int page = i32_at(table, uint64_t(r) * table_width + pos / page_size).v[0];
    return page >= 0 && uint(page) < n_pages ? int64_t(page) : -1l;
}

/* The sampler's random number for (seed, counter): splitmix64's finalizer over the pair. */
uint64_t draw_bits(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + (counter + 1ul) * 0x9E3779B97F4A7C15ul;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ul;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBul;
    return z ^ (z >> 31);
}

/* Blocks of b items that cover n items, the last one maybe short (no sum that can wrap). */
uint blocks(uint n, uint b) { return n / b + (n % b != 0u ? 1u : 0u); }

/* One row of "sample_f32": see model.h and docs/model.md. Each pass over the row takes its
 * items in blocks (item i0 + l under the test l < n - i0), in the C's order. */
void sample_row(acg_f32 logits, acg_f32 p, uint vocab, acg_u32 state, acg_i32 result) {
    const float temperature = acg_as_float(state.v[3]), top_p = acg_as_float(state.v[4]);
    float mx = 0.0;
    if (temperature > 0.0) {
        mx = acg_div(logits.v[0], temperature);
        for (uint b = 0u; b < blocks(vocab - 1u, HEAVY_BLOCK); b++) {
            const uint i0 = 1u + b * HEAVY_BLOCK;
            [[unroll]] for (uint l = 0u; l < HEAVY_BLOCK; l++) {
                if (l < vocab - i0) {
                    const float v = acg_div(logits.v[i0 + l], temperature);
                    if (v > mx) {
                        mx = v;
                    }
                }
            }
        }
    }
    /* Greedy at temperature 0, and where the scaled logits overflow: no draw is made. The
     * largest logit so far is kept beside its index (the C reads logits[best] again). */
    if (!(temperature > 0.0) || !acg_isfinite(mx)) {
        uint best = 0u;
        float best_v = logits.v[0];
        for (uint b = 0u; b < blocks(vocab - 1u, SUM_BLOCK); b++) {
            const uint i0 = 1u + b * SUM_BLOCK;
            [[unroll]] for (uint l = 0u; l < SUM_BLOCK; l++) {
                if (l < vocab - i0) {
                    const float v = logits.v[i0 + l];
                    if (v > best_v) {
                        best = i0 + l;
                        best_v = v;
                    }
                }
            }
        }
        result.v[0] = int(best);
        result.v[1] = -1;
        return;
    }
    for (uint b = 0u; b < blocks(vocab, HEAVY_BLOCK); b++) {
        const uint i0 = b * HEAVY_BLOCK;
        [[unroll]] for (uint l = 0u; l < HEAVY_BLOCK; l++) {
            if (l < vocab - i0) {
                p.v[i0 + l] = acg_exp(acg_sub(acg_div(logits.v[i0 + l], temperature), mx));
            }
        }
    }
    const float sum = sum32(p, vocab, 0.0, true);
    for (uint b = 0u; b < blocks(vocab, HEAVY_BLOCK); b++) {
        const uint i0 = b * HEAVY_BLOCK;
        [[unroll]] for (uint l = 0u; l < HEAVY_BLOCK; l++) {
            if (l < vocab - i0) {
                p.v[i0 + l] = acg_div(p.v[i0 + l], sum);
            }
        }
    }
    /* The nucleus is every token at or above the largest threshold tau whose mass reaches
     * top_p: a bisection over the bit patterns of tau (positive floats order as integers). */
    uint lo = 0u;
    if (top_p > 0.0 && top_p < 1.0 && sum32(p, vocab, 0.0, false) >= top_p) {
        uint hi = 0x3f800001u; /* just above 1.0f */
        while (hi - lo > 1u) {
            const uint mid = lo + (hi - lo) / 2u;
            if (sum32(p, vocab, acg_as_float(mid), false) >= top_p) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    const float tau = acg_as_float(lo);
    const uint64_t seed = uint64_t(state.v[1]) << 32 | uint64_t(state.v[0]);
    const uint counter = state.v[2];
    const float u = acg_mul(float(uint(draw_bits(seed, uint64_t(counter)) >> 40)),
                            5.9604644775390625e-8); /* 2^-24: the C's 1.0f / 16777216.0f */
    const float target = acg_mul(u, sum32(p, vocab, tau, false));
    float cdf = 0.0;
    int pick = -1;
    bool reached = false;
    for (uint b = 0u; b < blocks(vocab, SUM_BLOCK) && !reached; b++) {
        const uint i0 = b * SUM_BLOCK;
        [[unroll]] for (uint l = 0u; l < SUM_BLOCK; l++) {
            if (!reached && l < vocab - i0) {
                const float v = p.v[i0 + l];
                if (v >= tau) {
                    pick = int(i0 + l); /* the last of the nucleus, should rounding leave
                                           target unmet */
                    cdf = acg_add(cdf, v);
                    reached = target < cdf;
                }
            }
        }
    }
    state.v[2] = counter + 1u;
    result.v[0] = pick < 0 ? 0 : pick;
    result.v[1] = int(counter);
}

/* The state words of one seat: ACG_SAMPLER_STATE_WORDS in model.h. */
#define SAMPLER_STATE_WORDS 8u

/* ---- the kernels ------------------------------------------------------------------------- */

#if defined(ACG_VK_swiglu_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
    acg_f32 g;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    const float v = x.v[i];
    y.v[i] = acg_mul(acg_mul(v, acg_div(1.0, acg_add(1.0, acg_exp(-v)))), g.v[i]);
}

#elif defined(ACG_VK_embed_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 table;
    acg_i32 tokens;
    uint dim;
    uint vocab;
    uint n;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0), t = acg_id(1);
    if (i >= dim || t >= n) {
        return;
    }
    const int id = tokens.v[t];
    float v = 0.0;
    if (id >= 0 && uint(id) < vocab) {
        v = f32_at(table, uint64_t(id) * dim + i).v[0];
    }
    f32_at(out_, uint64_t(t) * dim + i).v[0] = v;
}

#elif defined(ACG_VK_rmsnorm_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 x;
    acg_f32 w;
    uint dim;
    uint n;
    float eps;
};
void main() {
    ACG_VK_ITEM();
    const uint t = acg_id(0);
    if (t >= n) {
        return;
    }
    /* out and x may be one window (model.h): each x[j] is read before o[j] is written. */
    acg_f32 xr = f32_at(x, uint64_t(t) * dim);
    acg_f32 o = f32_at(out_, uint64_t(t) * dim);
    float ss = dot32(xr, xr, dim);
    ss = acg_div(ss, float(dim));
    ss = acg_add(ss, eps);
    ss = acg_div(1.0, acg_sqrt(ss));
    for (uint j = 0u; j < dim; j++) {
        o.v[j] = acg_mul(w.v[j], acg_mul(ss, xr.v[j]));
    }
}

#elif defined(ACG_VK_matmul_f32)
/* out (n, n_out) = x (n, n_in) w^T: one dot product per work item. */
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 x;
    acg_f32 w;
    uint n_in;
    uint n_out;
    uint n;
};
void main() {
    ACG_VK_ITEM();
    const uint j = acg_id(0), r = acg_id(1);
    if (j >= n_out || r >= n) {
        return;
    }
    f32_at(out_, uint64_t(r) * n_out + j).v[0] =
        dot32(f32_at(w, uint64_t(j) * n_in), f32_at(x, uint64_t(r) * n_in), n_in);
}

#elif defined(ACG_VK_rope_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 x;
    acg_f32 cos_t;
    acg_f32 sin_t;
    acg_i32 offsets;
    acg_i32 kv_lens;
    uint width;
    uint head_size;
    uint n;
    uint batch;
    uint max_pos;
};
void main() {
    ACG_VK_ITEM();
    const uint pair = acg_id(0), t = acg_id(1);
    if (pair >= width / 2u || t >= n) {
        return;
    }
    uint row = 0u, pos = 0u;
    if (!token_place(offsets, kv_lens, batch, t, max_pos, row, pos)) {
        return;
    }
    const uint i = 2u * pair, n_freq = head_size / 2u, f = (i % head_size) / 2u;
    const float c = f32_at(cos_t, uint64_t(pos) * n_freq + f).v[0];
    const float s = f32_at(sin_t, uint64_t(pos) * n_freq + f).v[0];
    acg_f32 v = f32_at(x, uint64_t(t) * width);
    const float v0 = v.v[i], v1 = v.v[i + 1u];
    v.v[i] = acg_sub(acg_mul(v0, c), acg_mul(v1, s));
    v.v[i + 1u] = acg_add(acg_mul(v0, s), acg_mul(v1, c));
}

#elif defined(ACG_VK_kv_store_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 kc;
    acg_f32 vc;
    acg_f32 k;
    acg_f32 v;
    acg_i32 table;
    acg_i32 offsets;
    acg_i32 kv_lens;
    uint kv_dim;
    uint n;
    uint batch;
    uint width;
    uint page_size;
    uint n_pages;
};
void main() {
    ACG_VK_ITEM();
    const uint e = acg_id(0), t = acg_id(1);
    uint r = 0u, pos = 0u;
    if (e >= kv_dim || t >= n || page_size == 0u ||
        !token_place(offsets, kv_lens, batch, t, width * page_size, r, pos)) {
        return;
    }
    const int64_t page = page_of(table, width, page_size, n_pages, r, pos);
    if (page <= 0l) { /* never write the sink page */
        return;
    }
    const uint64_t at = (uint64_t(page) * page_size + pos % page_size) * kv_dim + e;
    f32_at(kc, at).v[0] = f32_at(k, uint64_t(t) * kv_dim + e).v[0];
    f32_at(vc, at).v[0] = f32_at(v, uint64_t(t) * kv_dim + e).v[0];
}

#elif defined(ACG_VK_attention_f32)
/* One work item per (head, token) does the whole head in its own slice of the att scratch. */
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 att;
    acg_f32 q;
    acg_f32 kcache;
    acg_f32 vcache;
    acg_i32 table;
    acg_i32 offsets;
    acg_i32 kv_lens;
    uint n_heads;
    uint n_kv_heads;
    uint hs;
    uint n;
    uint batch;
    uint width;
    uint page_size;
    uint n_pages;
};
void main() {
    ACG_VK_ITEM();
    const uint h = acg_id(0), t = acg_id(1);
    if (h >= n_heads || t >= n) {
        return;
    }
    const uint span = width * page_size, kv_dim = n_kv_heads * hs, group = n_heads / n_kv_heads;
    const float scale = acg_sqrt(float(hs));
    acg_f32 o = f32_at(out_, (uint64_t(t) * n_heads + h) * hs);
    for (uint i = 0u; i < hs; i++) {
        o.v[i] = 0.0;
    }
    uint r = 0u, pos = 0u;
    if (page_size == 0u || !token_place(offsets, kv_lens, batch, t, span, r, pos)) {
        return;
    }
    acg_f32 qh = f32_at(q, (uint64_t(t) * n_heads + h) * hs);
    acg_f32 sc = f32_at(att, (uint64_t(t) * n_heads + h) * span);
    const uint64_t kv_off = uint64_t(h / group) * hs;
    for (uint p = 0u; p <= pos; p++) {
        const int64_t page = page_of(table, width, page_size, n_pages, r, p);
        float score = 0.0;
        if (page >= 0l) {
            score = dot32(
                qh, f32_at(kcache, (uint64_t(page) * page_size + p % page_size) * kv_dim + kv_off),
                hs);
        }
        sc.v[p] = acg_div(score, scale);
    }
    float mx = sc.v[0];
    for (uint p = 1u; p <= pos; p++) {
        if (sc.v[p] > mx) {
            mx = sc.v[p];
        }
    }
    for (uint p = 0u; p <= pos; p++) {
        sc.v[p] = acg_exp(acg_sub(sc.v[p], mx));
    }
    const float sum = sum32(sc, pos + 1u, 0.0, true);
    for (uint p = 0u; p <= pos; p++) {
        sc.v[p] = acg_div(sc.v[p], sum);
    }
    /* Each output element: 32 partials over the positions, then the tree; the positions in
     * blocks of 32, position p0 + l going to partial l (p0 a multiple of 32). */
    for (uint i = 0u; i < hs; i++) {
        float s[LANES];
        [[unroll]] for (uint l = 0u; l < LANES; l++) {
            s[l] = 0.0;
        }
        for (uint b = 0u; b < blocks(pos + 1u, LANES); b++) {
            const uint p0 = b * LANES;
            [[unroll]] for (uint l = 0u; l < LANES; l++) {
                if (l <= pos - p0) {
                    const uint p = p0 + l;
                    int64_t page = page_of(table, width, page_size, n_pages, r, p);
                    if (page < 0l) {
                        page = 0l; /* the sink page: zeros */
                    }
                    const float xv = f32_at(vcache, (uint64_t(page) * page_size + p % page_size) *
                                                            kv_dim +
                                                        kv_off + i)
                                         .v[0];
                    s[l] = acg_fma(sc.v[p], xv, s[l]);
                }
            }
        }
        o.v[i] = tree32(s);
    }
}

#elif defined(ACG_VK_gather_last_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 x;
    acg_i32 offsets;
    uint dim;
    uint batch;
    uint n;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0), r = acg_id(1);
    if (i >= dim || r >= batch) {
        return;
    }
    const int lo = offsets.v[r], hi = offsets.v[r + 1u];
    float v = 0.0;
    if (lo < hi && hi >= 1 && uint(hi) <= n) {
        v = f32_at(x, uint64_t(hi - 1) * dim + i).v[0];
    }
    f32_at(out_, uint64_t(r) * dim + i).v[0] = v;
}

#elif defined(ACG_VK_sample_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_i32 result;
    acg_f32 logits;
    acg_f32 probs;
    acg_i32 seats;
    acg_u32 states;
    uint vocab;
    uint batch;
    uint n_states;
};
void main() {
    ACG_VK_ITEM();
    const uint r = acg_id(0);
    if (r >= batch) {
        return;
    }
    acg_i32 res = i32_at(result, 2ul * uint64_t(r));
    const int seat = seats.v[r];
    if (seat < 0 || uint(seat) >= n_states || vocab == 0u) {
        res.v[0] = -1;
        res.v[1] = -1;
        return;
    }
    sample_row(f32_at(logits, uint64_t(r) * vocab), f32_at(probs, uint64_t(r) * vocab), vocab,
               u32_at(states, uint64_t(seat) * SAMPLER_STATE_WORDS), res);
}

#elif defined(ACG_VK_decode_advance_i32)
/* Between the steps of a launch that decodes many: one work item over every row, in row order
 * (ops.acg.c says what each row does). */
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_i32 result;
    acg_i32 tokens;
    acg_i32 seats;
    acg_i32 kv_lens;
    acg_i32 ctl;
    acg_i32 ring;
    acg_u32 loop;
    uint batch;
    uint steps;
    uint vocab;
    int eos;
};
void main() {
    ACG_VK_ITEM();
    if (acg_id(0) != 0u) {
        return;
    }
    const uint step = loop.v[0];
    uint decoding = 0u;
    for (uint r = 0u; r < batch; r++) {
        if (seats.v[r] < 0) {
            continue;
        }
        const int token = i32_at(result, 2ul * uint64_t(r)).v[0];
        if (step < steps) {
            acg_i32 slot = i32_at(ring, 2ul * (uint64_t(r) * steps + step));
            slot.v[0] = token;
            slot.v[1] = i32_at(result, 2ul * uint64_t(r) + 1ul).v[0];
        }
        ctl.v[r] = ctl.v[r] - 1;
        if (ctl.v[r] <= 0 || token < 0 || uint(token) >= vocab ||
            (i32_at(ctl, uint64_t(batch) + r).v[0] != 0 && token == eos)) {
            seats.v[r] = -1;
        } else {
            tokens.v[r] = token;
            kv_lens.v[r] = kv_lens.v[r] + 1;
            decoding++;
        }
    }
    loop.v[0] = step + 1u;
    loop.v[1] = decoding != 0u ? 1u : 0u;
}

#else
#error "ops.vulkan.glsl: define ACG_VK_<kernel>"
#endif
