/*
 * test_model_kernels.c — the reference model's kernels against llama2.c-style references.
 *
 * The references are plain single-sequence C written the way llama2.c writes its forward pass:
 * one sequence, a contiguous (position, kv_dim) K/V cache, one query at a time. The device runs
 * the batched, paged kernels on a step of several rows (a decode row, a prompt, a continued
 * prompt, empty padding rows between and after them, padding tokens after the last row) whose
 * pages lie scattered in a KV cache, and each real token's output row is compared with the
 * reference for its sequence, bit for bit on every backend: the references sum and exponentiate
 * in the one arithmetic (model/arith.h: 32 strided partials and a halving tree, acg's exp),
 * which every backend's kernels follow.
 *
 * It also pins down:
 *  - batch invariance: a row run alone (batch 1) gives the bytes it gets inside the batch;
 *  - padding: zeros from attention and gather_last, untouched by rope, never stored by
 *    kv_store, which never writes the sink page either;
 *  - untrusted data (token ids, page ids, query offsets, KV lengths, seats out of range): the
 *    launch succeeds and writes nothing outside its windows. Every buffer window lies between
 *    two guard regions of poison, checked after every run;
 *  - sample_f32: greedy takes the first largest logit; draws follow the algorithm acg.h
 *    describes (the reference here is written from that description), report and advance the
 *    counter, vary from launch to launch, and a small top-p keeps only the top token;
 *  - the shape rules: each buffer's exact reach (one float short is ACG_ERR_OUT_OF_RANGE), grids
 *    that do not cover the counts, bad head counts, reaches that overflow 64 bits, wrong argument
 *    counts and types; and that a grid rounded up gives the exact grid's result;
 *  - that the kernels are the model's: absent until acg_model_register_kernels, which registers
 *    them once (and fails cleanly at any allocation), and that they unregister only once no
 *    open device has loaded them.
 */
#include "common.h"

#include <acg/model.h>

#include "llama2_ref.h"
#include "model/arith.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Heads (grouped-query: two per KV head), the KV cache's pages, the vocabulary, the step. */
enum { NH = 4, NKV = 2, HS = 8, DIM = NH * HS, KVD = NKV * HS };
enum { PS = 4, TW = 5, SPAN = TW * PS, NP = 24 };
enum { VOCAB = 50, N_OUT = 23, MAXB = 8, MAXN = 24, QMAX = 64, SW = ACG_SAMPLER_STATE_WORDS };
enum { GUARD = 256 };                 /* poison bytes either side of every window */
static const float POISON = -1234.5f; /* what an output holds before a launch */
static const float zeros[QMAX];

/* ---- random numbers ----------------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnd64(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rnd_fill(rng *r, float *dst, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = lo + (hi - lo) * (float)(rnd64(r) >> 40) * (1.0f / 16777216.0f);
    }
}

typedef union fu {
    float f;
    uint32_t u;
} fu;
static uint32_t fbits(float f) { return (fu){.f = f}.u; }
static float bitsf(uint32_t u) { return (fu){.u = u}.f; }

/* ---- the references (llama2.c) ------------------------------------------------------------ */

/* llama2.c's loops are llama2_ref.h's; here, what only the kernels' tests need. */

/* The rope tables the kernel takes, (SPAN, HS / 2), from llama2.c's formula. */
static float cos_tab[SPAN * HS / 2], sin_tab[SPAN * HS / 2];

static void make_tables(void) {
    for (int pos = 0; pos < SPAN; pos++) {
        for (int i = 0; i < HS; i += 2) {
            float freq = 1.0f / powf(10000.0f, i / (float)HS), val = pos * freq;
            cos_tab[pos * HS / 2 + i / 2] = cosf(val);
            sin_tab[pos * HS / 2 + i / 2] = sinf(val);
        }
    }
}

/* The sampler as acg.h describes it, written from the description: the nucleus is the tokens at
 * or above the largest probability tau whose tokens (p >= tau) hold at least top_p of the mass;
 * every token when top_p is not in (0, 1) or no tau qualifies. */
static float ref_mass(const float *p, int n, float tau) {
    float kept[VOCAB] = {0.0f}; /* the terms below tau as +0: they leave their partial as is */
    for (int i = 0; i < n; i++) {
        kept[i] = p[i] >= tau ? p[i] : 0.0f;
    }
    return acg__sum(kept, (uint32_t)n);
}

static void ref_sample(const float *logits, int vocab, uint32_t *state, int32_t out[2]) {
    float temperature = bitsf(state[3]), top_p = bitsf(state[4]), p[VOCAB], tau = 0.0f;
    if (!(temperature > 0.0f)) {
        out[0] = 0;
        for (int i = 1; i < vocab; i++) {
            out[0] = logits[i] > logits[out[0]] ? i : out[0];
        }
        out[1] = -1;
        return;
    }
    for (int i = 0; i < vocab; i++) {
        p[i] = logits[i] / temperature;
    }
    tc_ref_softmax(p, vocab);
    for (int i = 0; top_p > 0.0f && top_p < 1.0f && i < vocab; i++) {
        tau = p[i] > tau && ref_mass(p, vocab, p[i]) >= top_p ? p[i] : tau;
    }
    uint64_t seed = (uint64_t)state[1] << 32 | state[0], counter = state[2];
    uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (1.0f / 16777216.0f), target = u * ref_mass(p, vocab, tau);
    float cdf = 0.0f;
    out[0] = -1;
    for (int i = 0; i < vocab && !(out[0] >= 0 && cdf > target); i++) {
        if (p[i] >= tau) {
            out[0] = i;
            cdf += p[i];
        }
    }
    out[1] = (int32_t)counter;
    state[2] = (uint32_t)counter + 1;
}

/* ---- launches with guarded buffers -------------------------------------------------------- */

typedef struct larg {
    acg_arg arg;         /* as launched (a buffer's points into buf once uploaded) */
    unsigned char *host; /* a buffer's initial contents, then what the launch left there */
    size_t bytes;        /* the window's size */
    acg_buffer *buf;     /* the device buffer: the window with GUARD bytes either side */
} larg;

typedef struct launch {
    const char *name;
    size_t n_args;
    larg a[ACG_MAX_KERNEL_ARGS];
    acg_dims dims; /* the exact grid */
    bool bare;     /* no guards: each window fills its buffer exactly (for the shape rules) */
} launch;

/* The device under test and a stream of it, for every case. */
static acg_device *dev;
static acg_stream *stream;

/* Starts a launch of kernel name on grid (g0, g1) with arguments as spec says, one letter each:
 * 'b' a buffer (const void *data or NULL for POISON floats, unsigned bytes), 'u' an unsigned
 * u32, 'f' a double passed as f32. */
static void L_make(launch *L, const char *name, uint32_t g0, uint32_t g1, const char *spec, ...) {
    memset(L, 0, sizeof *L);
    L->name = name;
    L->dims = (acg_dims){{g0, g1, 1}, {0, 0, 0}};
    va_list ap;
    va_start(ap, spec);
    for (; *spec != '\0'; spec++) {
        larg *a = &L->a[L->n_args++];
        if (*spec == 'b') {
            const unsigned char *data = va_arg(ap, const void *);
            a->arg = acg_arg_buffer(NULL, 0);
            a->bytes = va_arg(ap, unsigned);
            a->host = malloc(a->bytes);
            assert_non_null(a->host);
            for (size_t i = 0; i < a->bytes; i += 4) {
                memcpy(a->host + i, data != NULL ? data + i : (const void *)&POISON, 4);
            }
        } else {
            a->arg = *spec == 'u' ? acg_arg_u32(va_arg(ap, unsigned))
                                  : acg_arg_f32((float)va_arg(ap, double));
        }
    }
    va_end(ap);
}

static float *LF(const launch *L, int i) { return (float *)(void *)L->a[i].host; }
static int32_t *LI(const launch *L, int i) { return (int32_t *)(void *)L->a[i].host; }
static bool is_buf(const larg *a) { return a->arg.type == ACG_ARG_BUFFER; }

static void L_free(launch *L) {
    for (size_t i = 0; i < L->n_args; i++) {
        free(L->a[i].host);
    }
}

static void L_upload(launch *L) {
    for (size_t i = 0, g = L->bare ? 0 : GUARD; i < L->n_args; i++) {
        larg *a = &L->a[i];
        if (is_buf(a)) {
            unsigned char *staging = malloc(a->bytes + 2 * g);
            assert_non_null(staging);
            memset(staging, 0xa5, a->bytes + 2 * g);
            memcpy(staging + g, a->host, a->bytes);
            a->buf = tc_buffer(dev, a->bytes + 2 * g);
            a->arg = acg_arg_buffer(a->buf, g);
            tc_upload(stream, a->buf, staging, a->bytes + 2 * g);
            free(staging);
        }
    }
}

static void L_args(const launch *L, acg_arg *args) {
    for (size_t i = 0; i < L->n_args; i++) {
        args[i] = L->a[i].arg;
    }
}

/* Launches the uploaded L on dims (its exact grid when NULL) and waits when it was queued. */
static acg_status L_launch(const launch *L, const acg_dims *dims) {
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, L->name, &k));
    acg_arg args[ACG_MAX_KERNEL_ARGS];
    L_args(L, args);
    acg_status st = acg_kernel_launch(stream, k, dims != NULL ? dims : &L->dims, args, L->n_args);
    if (st == ACG_OK) {
        TC_OK(acg_stream_synchronize(stream));
    }
    return st;
}

/* Reads every buffer back into its host copy after checking that both guards hold poison. */
static void L_read(launch *L) {
    for (size_t i = 0, g = L->bare ? 0 : GUARD; i < L->n_args; i++) {
        larg *a = &L->a[i];
        if (!is_buf(a)) {
            continue;
        }
        unsigned char *back = malloc(a->bytes + 2 * g);
        assert_non_null(back);
        tc_download(stream, back, a->buf, a->bytes + 2 * g);
        for (size_t j = 0; j < a->bytes + 2 * g; j++) {
            if ((j < g || j >= g + a->bytes) && back[j] != 0xa5) {
                fail_msg("%s: argument %zu: the guard byte at %ld from the window was written",
                         L->name, i, (long)j - (long)g);
            }
        }
        memcpy(a->host, back + g, a->bytes);
        free(back);
    }
}

static void L_release(launch *L) {
    for (size_t i = 0; i < L->n_args; i++) {
        if (L->a[i].buf != NULL) {
            TC_OK(acg_buffer_free(L->a[i].buf));
            L->a[i].buf = NULL;
        }
    }
}

/* Uploads, launches on dims (the exact grid when NULL), reads back and frees the device side. */
static acg_status L_run(launch *L, const acg_dims *dims) {
    L_upload(L);
    acg_status st = L_launch(L, dims);
    if (st == ACG_OK) {
        L_read(L);
    }
    L_release(L);
    return st;
}

/* got against want bit for bit, naming the first element that differs. */
static void expect_equal(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (fbits(got[i]) != fbits(want[i])) {
            fail_msg("%s: element %zu is %.9g (%08x), the reference %.9g (%08x)", what, i, got[i],
                     fbits(got[i]), want[i], fbits(want[i]));
        }
    }
}

/* Runs `part` (a launch of some rows alone) and expects its output (argument 0) to be the bytes
 * `whole` (those rows' output inside a larger launch) holds; frees part. */
static void expect_part(launch *part, const float *whole) {
    TC_OK(L_run(part, NULL));
    TC_BYTES_EQUAL(LF(part, 0), whole, part->a[0].bytes);
    L_free(part);
}

/* ---- a step of the paged model ------------------------------------------------------------ */

typedef struct seq {
    int q_len, kv_len;
    int32_t pages[TW];                  /* its block-table row: its pages, then the sink page */
    float k[SPAN * KVD], v[SPAN * KVD]; /* llama2.c's caches: (position, kv_dim) */
} seq;

typedef struct step {
    uint32_t batch, n;
    int32_t table[MAXB * TW], offsets[MAXB + 1], kv_lens[MAXB];
    const seq *tok_seq[MAXN]; /* each token's sequence (NULL: padding) and position */
    int tok_pos[MAXN];
} step;

/* A step of rows (NULL: a padding row, q_len 0, kv_len 0, sink pages), then pad tokens. */
static void make_step(step *st, const seq *const *rows, uint32_t n_rows, uint32_t pad) {
    memset(st, 0, sizeof *st);
    st->batch = n_rows;
    for (uint32_t r = 0; r < n_rows; r++) {
        st->offsets[r + 1] = st->offsets[r];
        if (rows[r] != NULL) {
            st->kv_lens[r] = rows[r]->kv_len;
            memcpy(st->table + r * TW, rows[r]->pages, sizeof rows[r]->pages);
            for (int j = 0; j < rows[r]->q_len; j++) {
                st->tok_seq[st->offsets[r + 1]] = rows[r];
                st->tok_pos[st->offsets[r + 1]++] = rows[r]->kv_len - rows[r]->q_len + j;
            }
        }
    }
    st->n = (uint32_t)st->offsets[n_rows] + pad;
}

/* Where position pos of sequence q lies in a (NP, PS, KVD) cache. */
static size_t slot(const seq *q, int pos) {
    return ((size_t)q->pages[pos / PS] * PS + (size_t)(pos % PS)) * KVD;
}

typedef struct world {
    seq s[3];
    step st; /* s[0], s[1], padding, s[2], padding; then 2 padding tokens */
    float kc[NP * PS * KVD], vc[NP * PS * KVD]; /* every sequence up to kv_len in its pages */
    float kc_old[NP * PS * KVD], vc_old[NP * PS * KVD]; /* before the step: garbage in its slots */
    float k[MAXN * KVD], v[MAXN * KVD], q[MAXN * QMAX]; /* each token's K, V and query */
    float x[MAXN * DIM], norm_w[DIM], mat_w[N_OUT * DIM], table[VOCAB * DIM];
    float logits[MAXB * VOCAB];
    int32_t tokens[MAXN], seats[MAXB];
    uint32_t states[MAXB * SW];
} world;

static world *make_world(uint32_t seed) {
    static const int shape[3][2] = {{1, 7}, {5, 5}, {3, 13}}; /* decode, prompt, continued */
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    rng r = {seed};
    rnd_fill(&r, w->kc, NP * PS * KVD, -1.0f, 1.0f); /* pages of no sequence: garbage */
    rnd_fill(&r, w->vc, NP * PS * KVD, -1.0f, 1.0f);
    memset(w->kc, 0, PS * KVD * sizeof(float)); /* the sink page */
    memset(w->vc, 0, PS * KVD * sizeof(float));
    for (uint32_t i = 0, next = 0; i < 3; i++) {
        seq *q = &w->s[i];
        q->q_len = shape[i][0];
        q->kv_len = shape[i][1];
        rnd_fill(&r, q->k, SPAN * KVD, -1.0f, 1.0f);
        rnd_fill(&r, q->v, SPAN * KVD, -1.0f, 1.0f);
        for (int p = 0; p < TW; p++) { /* scattered pages: a stride of 7 through 1..23 */
            q->pages[p] = p * PS < q->kv_len ? 1 + (int32_t)((seed + 7 * next++) % 23) : 0;
        }
        for (int pos = 0; pos < q->kv_len; pos++) {
            memcpy(&w->kc[slot(q, pos)], &q->k[pos * KVD], KVD * sizeof(float));
            memcpy(&w->vc[slot(q, pos)], &q->v[pos * KVD], KVD * sizeof(float));
        }
    }
    const seq *rows[5] = {&w->s[0], &w->s[1], NULL, &w->s[2], NULL};
    make_step(&w->st, rows, 5, 2);
    memcpy(w->kc_old, w->kc, sizeof w->kc);
    memcpy(w->vc_old, w->vc, sizeof w->vc);
    rnd_fill(&r, w->k, MAXN * KVD, -1.0f, 1.0f);
    rnd_fill(&r, w->v, MAXN * KVD, -1.0f, 1.0f);
    for (uint32_t t = 0; t < w->st.n; t++) {
        const seq *q = w->st.tok_seq[t];
        if (q != NULL) {
            int pos = w->st.tok_pos[t];
            memcpy(&w->k[t * KVD], &q->k[pos * KVD], KVD * sizeof(float));
            memcpy(&w->v[t * KVD], &q->v[pos * KVD], KVD * sizeof(float));
            rnd_fill(&r, &w->kc_old[slot(q, pos)], KVD, 5.0f, 6.0f);
            rnd_fill(&r, &w->vc_old[slot(q, pos)], KVD, 5.0f, 6.0f);
        }
    }
    rnd_fill(&r, w->q, MAXN * QMAX, -2.0f, 2.0f);
    rnd_fill(&r, w->x, MAXN * DIM, -3.0f, 3.0f);
    rnd_fill(&r, w->norm_w, DIM, -1.0f, 1.0f);
    rnd_fill(&r, w->mat_w, N_OUT * DIM, -1.0f, 1.0f);
    rnd_fill(&r, w->table, VOCAB * DIM, -1.0f, 1.0f);
    rnd_fill(&r, w->logits, MAXB * VOCAB, -3.0f, 3.0f);
    for (int i = 0; i < MAXN; i++) {
        w->tokens[i] = (int32_t)(rnd64(&r) % VOCAB);
    }
    for (int i = 0; i < MAXB; i++) {
        uint32_t *s = &w->states[i * SW];
        s[0] = (uint32_t)rnd64(&r);
        s[1] = (uint32_t)rnd64(&r);
        s[2] = (uint32_t)(rnd64(&r) % 100000);
        s[3] = fbits(i % 2 ? 0.8f : 0.0f);
        s[4] = fbits(0.9f);
        w->seats[i] = (i * 3 + 1) % MAXB; /* a permutation */
    }
    return w;
}

/* The step of sequence i alone (batch 1, no padding), and its first token in the world's. */
static int alone(step *one, const world *w, int i) {
    const seq *rows[1] = {&w->s[i]};
    make_step(one, rows, 1, 0);
    uint32_t t = 0;
    while (w->st.tok_seq[t] != &w->s[i]) {
        t++;
    }
    return (int)t;
}

/* ---- launch builders: every buffer exactly as large as the kernel's reach ---------------- */

static void mk_embed(launch *L, const float *table, const int32_t *tokens, unsigned n) {
    L_make(L, "embed_f32", DIM, n, "bbbuuu", NULL, 4 * n * DIM, table, 4 * VOCAB * DIM, tokens,
           4 * n, DIM, VOCAB, n);
}

static void mk_rmsnorm(launch *L, const float *x, const float *w, unsigned n) {
    L_make(L, "rmsnorm_f32", n, 1, "bbbuuf", NULL, 4 * n * DIM, x, 4 * n * DIM, w, 4 * DIM, DIM, n,
           1e-5);
}

static void mk_matmul(launch *L, const float *x, const float *w, unsigned n) {
    L_make(L, "matmul_f32", N_OUT, n, "bbbuuu", NULL, 4 * n * N_OUT, x, 4 * n * DIM, w,
           4 * N_OUT * DIM, DIM, N_OUT, n);
}

static void mk_rope(launch *L, const float *x, unsigned width, const step *st, unsigned max_pos) {
    L_make(L, "rope_f32", width / 2, st->n, "bbbbbuuuuu", x, 4 * st->n * width, cos_tab,
           2 * max_pos * HS, sin_tab, 2 * max_pos * HS, st->offsets, 4 * (st->batch + 1),
           st->kv_lens, 4 * st->batch, width, HS, st->n, st->batch, max_pos);
}

static void mk_kv_store(launch *L, const float *kc, const float *vc, const float *k, const float *v,
                        const step *st) {
    L_make(L, "kv_store_f32", KVD, st->n, "bbbbbbbuuuuuu", kc, 4 * NP * PS * KVD, vc,
           4 * NP * PS * KVD, k, 4 * st->n * KVD, v, 4 * st->n * KVD, st->table, 4 * st->batch * TW,
           st->offsets, 4 * (st->batch + 1), st->kv_lens, 4 * st->batch, KVD, st->n, st->batch, TW,
           PS, NP);
}

/* Heads (nh, nkv) of size hs over the world's cache: nkv * hs must be KVD. att is scratch. */
static void mk_attention(launch *L, const float *q, const float *kc, const float *vc,
                         const step *st, unsigned nh, unsigned nkv, unsigned hs) {
    L_make(L, "attention_f32", nh, st->n, "bbbbbbbbuuuuuuuu", NULL, 4 * st->n * nh * hs, NULL,
           4 * st->n * nh * SPAN, q, 4 * st->n * nh * hs, kc, 4 * NP * PS * nkv * hs, vc,
           4 * NP * PS * nkv * hs, st->table, 4 * st->batch * TW, st->offsets, 4 * (st->batch + 1),
           st->kv_lens, 4 * st->batch, nh, nkv, hs, st->n, st->batch, TW, PS, NP);
}

static void mk_gather(launch *L, const float *x, const step *st) {
    L_make(L, "gather_last_f32", DIM, st->batch, "bbbuuu", NULL, 4 * st->batch * DIM, x,
           4 * st->n * DIM, st->offsets, 4 * (st->batch + 1), DIM, st->batch, st->n);
}

/* probs is scratch. */
static void mk_sample(launch *L, const float *logits, unsigned batch, const int32_t *seats,
                      const uint32_t *states, unsigned n_states) {
    L_make(L, "sample_f32", batch, 1, "bbbbbuuu", NULL, 8 * batch, logits, 4 * batch * VOCAB, NULL,
           4 * batch * VOCAB, seats, 4 * batch, states, 4 * SW * n_states, VOCAB, batch, n_states);
}

enum { K_EMBED, K_RMSNORM, K_MATMUL, K_ROPE, K_KV_STORE, K_ATTENTION, K_GATHER, K_SAMPLE, K_N };

/* A valid launch of model kernel `which` on the world's step. */
static void mk_case(launch *L, int which, const world *w) {
    const step *st = &w->st;
    switch (which) {
    case K_EMBED:
        mk_embed(L, w->table, w->tokens, st->n);
        break;
    case K_RMSNORM:
        mk_rmsnorm(L, w->x, w->norm_w, st->n);
        break;
    case K_MATMUL:
        mk_matmul(L, w->x, w->mat_w, st->n);
        break;
    case K_ROPE:
        mk_rope(L, w->q, DIM, st, SPAN);
        break;
    case K_KV_STORE:
        mk_kv_store(L, w->kc_old, w->vc_old, w->k, w->v, st);
        break;
    case K_ATTENTION:
        mk_attention(L, w->q, w->kc, w->vc, st, NH, NKV, HS);
        break;
    case K_GATHER:
        mk_gather(L, w->x, st);
        break;
    default:
        mk_sample(L, w->logits, st->batch, w->seats, w->states, MAXB);
        break;
    }
}

static int setup(void **state) {
    (void)state;
    TC_OK(acg_model_register_kernels()); /* the first test unregisters them on its way */
    dev = tc_open();
    stream = tc_stream(dev);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    TC_OK(acg_stream_destroy(stream));
    tc_close(dev);
    return 0;
}

/* ---- registration --------------------------------------------------------------------------- */

/* A kernel body for definitions that are refused before anything runs. */
static void never_called(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)a;
    (void)global;
    fail();
}

/* The kernels belong to the model: unknown until it registers them, registered once however
 * often it is asked, their names taken, and unregistered only after the devices that loaded
 * them closed. */
static void test_registration(void **state) {
    (void)state;
    acg_kernel *k = NULL;
    TC_OK(acg_model_unregister_kernels()); /* setup registered them */
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "swiglu_f32", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "sample_f32", &k));
    TC_OK(acg_model_unregister_kernels()); /* nothing registered: nothing to do */
    TC_OK(acg_model_register_kernels());
    TC_OK(acg_model_register_kernels());
    TC_OK(acg_kernel_get(dev, "swiglu_f32", &k));
    assert_string_equal(acg_kernel_get_name(k), "swiglu_f32");

    acg_kernel_desc mine = ACG_KERNEL_DESC_INIT;
    mine.name = "matmul_f32";
    mine.n_args = 1;
    mine.types[0] = ACG_ARG_BUFFER;
    mine.bytes_per_item[0] = 4;
    mine.flags = ACG_KERNEL_ELEMENTWISE;
    mine.cpu.fn = never_called;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&mine));
    TC_LAST_ERROR_HAS("already registered");

    TC_EXPECT(ERR_IN_USE, acg_model_unregister_kernels());
    TC_LAST_ERROR_HAS("swiglu_f32");
    /* The kernels no open device loaded are gone; the next registration restores them. */
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "matmul_f32", &k));
    TC_OK(acg_model_register_kernels());
    TC_OK(acg_kernel_get(dev, "matmul_f32", &k));
}

static acg_status register_and_unregister(void *ctx) {
    (void)ctx;
    acg_status st = acg_model_register_kernels();
    TC_OK(acg_model_unregister_kernels()); /* what a failed call registered goes too */
    return st;
}

/* Registering runs out of memory at any of its allocations: the call fails cleanly, and what it
 * registered before is unregistered with the rest. */
static void test_registration_out_of_memory(void **state) {
    (void)state;
    TC_OK(acg_model_unregister_kernels()); /* no device is open between cases */
    tc_alloc_install();
    uint64_t points = tc_alloc_sweep(register_and_unregister, NULL, false);
    assert_true(points >= 9); /* one definition each, and the registry's table */
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* ---- elementwise and row-local kernels ---------------------------------------------------- */

/* swiglu_f32 against the reference; a window of it alone gives the same bytes. */
static void test_swiglu(void **state) {
    (void)state;
    enum { N = 1000 };
    static float a[N], b[N], want[N];
    rng r = {1};
    rnd_fill(&r, a, N, -10.0f, 10.0f);
    rnd_fill(&r, b, N, -2.0f, 2.0f);
    for (int i = 0; i < N; i++) {
        want[i] = tc_ref_swiglu(a[i], b[i]);
    }
    launch L, part;
    L_make(&L, "swiglu_f32", N, 1, "bbb", NULL, 4 * N, a, 4 * N, b, 4 * N);
    TC_OK(L_run(&L, NULL));
    expect_equal(LF(&L, 0), want, N, "swiglu_f32");
    L_make(&part, "swiglu_f32", 37, 1, "bbb", NULL, 4 * 37, a + 100, 4 * 37, b + 100, 4 * 37);
    expect_part(&part, LF(&L, 0) + 100);
    L_free(&L);
}

/* embed_f32 copies each token's row, and zeros for ids outside the table. */
static void test_embed(void **state) {
    (void)state;
    world *w = make_world(2);
    int32_t *tok = w->tokens;
    tok[1] = -1, tok[4] = VOCAB, tok[5] = INT32_MIN, tok[9] = INT32_MAX, tok[10] = VOCAB - 1;
    launch L, one;
    mk_embed(&L, w->table, tok, 12);
    TC_OK(L_run(&L, NULL));
    for (int t = 0; t < 12; t++) {
        bool in = tok[t] >= 0 && tok[t] < VOCAB;
        TC_BYTES_EQUAL(LF(&L, 0) + t * DIM, in ? w->table + tok[t] * DIM : zeros, 4 * DIM);
    }
    mk_embed(&one, w->table, tok + 10, 1);
    expect_part(&one, LF(&L, 0) + 10 * DIM);
    L_free(&L);
    free(w);
}

/* rmsnorm_f32 and matmul_f32 per row against the references; each row alone, and five rows from
 * the middle, give the bytes of the batch of eleven (the cpu's 4-row tiles and its single-row
 * path agree). */
static void test_rmsnorm_matmul(void **state) {
    (void)state;
    world *w = make_world(3);
    launch norm, mat, sub;
    mk_rmsnorm(&norm, w->x, w->norm_w, w->st.n);
    mk_matmul(&mat, w->x, w->mat_w, w->st.n);
    TC_OK(L_run(&norm, NULL));
    TC_OK(L_run(&mat, NULL));
    for (uint32_t t = 0; t < w->st.n; t++) {
        float want[DIM];
        tc_ref_rmsnorm(want, w->x + t * DIM, w->norm_w, DIM, 1e-5f);
        expect_equal(LF(&norm, 0) + t * DIM, want, DIM, "rmsnorm_f32");
        tc_ref_matmul(want, w->x + t * DIM, w->mat_w, DIM, N_OUT);
        expect_equal(LF(&mat, 0) + t * N_OUT, want, N_OUT, "matmul_f32");
        mk_rmsnorm(&sub, w->x + t * DIM, w->norm_w, 1);
        expect_part(&sub, LF(&norm, 0) + t * DIM);
        mk_matmul(&sub, w->x + t * DIM, w->mat_w, 1);
        expect_part(&sub, LF(&mat, 0) + t * N_OUT);
    }
    mk_matmul(&sub, w->x + 3 * DIM, w->mat_w, 5);
    expect_part(&sub, LF(&mat, 0) + 3 * N_OUT);
    L_free(&norm);
    L_free(&mat);
    free(w);
}

/* ---- paged kernels ------------------------------------------------------------------------ */

/* rope_f32 rotates each real token like llama2.c at its position, K rows and Q rows, leaves
 * padding untouched, gives each row alone the same bytes, and leaves positions >= max_pos. */
static void test_rope(void **state) {
    (void)state;
    world *w = make_world(4);
    const step *st = &w->st;
    for (unsigned width = KVD; width <= DIM; width += DIM - KVD) {
        launch L, one;
        mk_rope(&L, w->q, width, st, SPAN);
        TC_OK(L_run(&L, NULL));
        for (uint32_t t = 0; t < st->n; t++) {
            float want[DIM];
            memcpy(want, w->q + t * width, 4 * width);
            if (st->tok_seq[t] != NULL) {
                tc_ref_rope(want, (int)width, HS, st->tok_pos[t]);
            }
            expect_equal(LF(&L, 0) + t * width, want, width, "rope");
        }
        for (int i = 0; i < 3; i++) {
            step one_st;
            int t0 = alone(&one_st, w, i);
            mk_rope(&one, w->q + t0 * width, width, &one_st, SPAN);
            expect_part(&one, LF(&L, 0) + t0 * width);
        }
        mk_rope(&one, w->q, width, st, 6);
        TC_OK(L_run(&one, NULL));
        for (uint32_t t = 0; t < st->n; t++) {
            bool rotated = st->tok_seq[t] != NULL && st->tok_pos[t] < 6;
            TC_BYTES_EQUAL(LF(&one, 0) + t * width, (rotated ? LF(&L, 0) : w->q) + t * width,
                           4 * width);
        }
        L_free(&one);
        L_free(&L);
    }
    free(w);
}

/* kv_store_f32 puts each real token's K and V at its position's page and slot and nothing
 * anywhere else: the cache afterwards is llama2.c's caches laid out in pages, the sink page
 * zero. Each row alone writes exactly its own slots. */
static void test_kv_store(void **state) {
    (void)state;
    world *w = make_world(5);
    launch L;
    mk_kv_store(&L, w->kc_old, w->vc_old, w->k, w->v, &w->st);
    TC_OK(L_run(&L, NULL));
    TC_BYTES_EQUAL(LF(&L, 0), w->kc, sizeof w->kc);
    TC_BYTES_EQUAL(LF(&L, 1), w->vc, sizeof w->vc);
    TC_BYTES_EQUAL(LF(&L, 0), zeros, 4 * PS * KVD);
    L_free(&L);
    static float want[NP * PS * KVD];
    for (int i = 0; i < 3; i++) {
        step one;
        int t0 = alone(&one, w, i);
        mk_kv_store(&L, w->kc_old, w->vc_old, w->k + t0 * KVD, w->v + t0 * KVD, &one);
        TC_OK(L_run(&L, NULL));
        memcpy(want, w->vc_old, sizeof want);
        for (uint32_t t = 0; t < one.n; t++) {
            size_t at = slot(&w->s[i], one.tok_pos[t]);
            memcpy(want + at, w->vc + at, KVD * sizeof(float));
        }
        TC_BYTES_EQUAL(LF(&L, 1), want, sizeof want);
        L_free(&L);
    }
    free(w);
}

/* attention_f32 of each real token over the paged cache equals llama2.c's attention over its
 * sequence's contiguous caches, for several head layouts (grouped-query and not); padding
 * tokens get zeros; each row alone gives the bytes it gets in the batch. */
static void test_attention(void **state) {
    (void)state;
    static const unsigned layouts[4][3] = {{NH, NKV, HS}, {2, 2, 8}, {8, 2, 8}, {2, 1, 16}};
    world *w = make_world(6);
    const step *st = &w->st;
    for (int c = 0; c < 4; c++) {
        unsigned nh = layouts[c][0], nkv = layouts[c][1], hs = layouts[c][2], qw = nh * hs;
        launch L, one;
        mk_attention(&L, w->q, w->kc, w->vc, st, nh, nkv, hs);
        TC_OK(L_run(&L, NULL));
        for (uint32_t t = 0; t < st->n; t++) {
            float want[QMAX], att[SPAN], column[SPAN];
            const seq *q = st->tok_seq[t];
            if (q == NULL) {
                TC_BYTES_EQUAL(LF(&L, 0) + t * qw, zeros, 4 * qw);
                continue;
            }
            tc_ref_attention(want, w->q + t * qw, q->k, q->v, st->tok_pos[t], (int)nh, (int)nkv,
                             (int)hs, att, column);
            expect_equal(LF(&L, 0) + t * qw, want, qw, "attention_f32");
        }
        for (int i = 0; i < 3; i++) {
            step one_st;
            int t0 = alone(&one_st, w, i);
            mk_attention(&one, w->q + t0 * qw, w->kc, w->vc, &one_st, nh, nkv, hs);
            expect_part(&one, LF(&L, 0) + t0 * qw);
        }
        L_free(&L);
    }
    free(w);
}

/* gather_last_f32 copies each row's last token, and zeros for the empty (padding) rows. */
static void test_gather_last(void **state) {
    (void)state;
    world *w = make_world(7);
    const step *st = &w->st;
    launch L, one;
    mk_gather(&L, w->x, st);
    TC_OK(L_run(&L, NULL));
    for (uint32_t r = 0; r < st->batch; r++) {
        int32_t hi = st->offsets[r + 1];
        const float *want = hi > st->offsets[r] ? w->x + (hi - 1) * DIM : zeros;
        TC_BYTES_EQUAL(LF(&L, 0) + r * DIM, want, 4 * DIM);
    }
    step one_st;
    int t0 = alone(&one_st, w, 2);
    mk_gather(&one, w->x + t0 * DIM, &one_st);
    expect_part(&one, LF(&L, 0) + 3 * DIM);
    L_free(&L);
    free(w);
}

/* Untrusted plans: query offsets that decrease, overshoot n or go negative, KV lengths negative
 * or huge, page ids negative, past n_pages or the sink page. Every launch succeeds inside its
 * windows (the guards hold), and what the contract fixes holds. */
static void test_untrusted_metadata(void **state) {
    (void)state;
    world *w = make_world(8);
    static const int32_t offsets[6] = {0, 6, 2, 9, 12, -3}; /* 11 tokens */
    static const int32_t kv_lens[5] = {4, -5, 100000, INT32_MAX, INT32_MIN};
    static const int32_t bad_pages[5] = {-1, NP, INT32_MAX, INT32_MIN, 0};
    step garbage = w->st, bad = w->st, sink = w->st;
    memcpy(garbage.offsets, offsets, sizeof offsets);
    memcpy(garbage.kv_lens, kv_lens, sizeof kv_lens);
    for (int i = 0; i < MAXB * TW; i++) {
        bad.table[i] = bad_pages[(i / TW + i % TW) % 5]; /* each row meets every bad id */
        sink.table[i] = 0;
    }
    launch L;

    /* rope: tokens 0-1 (negative positions) and 9-10 (huge ones) untouched */
    mk_rope(&L, w->q, DIM, &garbage, SPAN);
    TC_OK(L_run(&L, NULL));
    TC_BYTES_EQUAL(LF(&L, 0), w->q, 4 * 2 * DIM);
    TC_BYTES_EQUAL(LF(&L, 0) + 9 * DIM, w->q + 9 * DIM, 4 * 2 * DIM);
    L_free(&L);

    /* gather_last: [0,6) token 5; [6,2) empty; [2,9) token 8; [9,12) past n: zeros or
     * untouched; [12,-3) empty */
    mk_gather(&L, w->x, &garbage);
    TC_OK(L_run(&L, NULL));
    TC_BYTES_EQUAL(LF(&L, 0), w->x + 5 * DIM, 4 * DIM);
    TC_BYTES_EQUAL(LF(&L, 0) + DIM, zeros, 4 * DIM);
    TC_BYTES_EQUAL(LF(&L, 0) + 2 * DIM, w->x + 8 * DIM, 4 * DIM);
    for (int i = 0; i < DIM; i++) {
        assert_true(LF(&L, 0)[3 * DIM + i] == (LF(&L, 0)[3 * DIM] == 0.0f ? 0.0f : POISON));
    }
    TC_BYTES_EQUAL(LF(&L, 0) + 4 * DIM, zeros, 4 * DIM);
    L_free(&L);

    /* kv_store and attention on garbage plans stay inside; with only bad page ids (or only the
     * sink page) the cache stays as it was, and attention reads zeros (the sink page's). */
    const step *plans[3] = {&garbage, &bad, &sink};
    for (int p = 0; p < 3; p++) {
        mk_kv_store(&L, w->kc_old, w->vc_old, w->k, w->v, plans[p]);
        TC_OK(L_run(&L, NULL));
        if (p > 0) {
            TC_BYTES_EQUAL(LF(&L, 0), w->kc_old, sizeof w->kc_old);
            TC_BYTES_EQUAL(LF(&L, 1), w->vc_old, sizeof w->vc_old);
        }
        L_free(&L);
        mk_attention(&L, w->q, w->kc, w->vc, plans[p], NH, NKV, HS);
        TC_OK(L_run(&L, NULL));
        for (uint32_t t = 0; p > 0 && t < w->st.n; t++) {
            TC_BYTES_EQUAL(LF(&L, 0) + t * DIM, zeros, 4 * DIM);
        }
        L_free(&L);
    }
    free(w);
}

/* ---- sample_f32 --------------------------------------------------------------------------- */

static uint32_t *state_of(uint32_t *states, int seat) { return states + seat * SW; }

/* Temperature <= 0 takes the first largest logit, reports no counter and leaves the state; a
 * seat outside 0..n_states-1 gives {-1, -1} and touches no state; a row that draws still does. */
static void test_sample_greedy_and_seats(void **state) {
    (void)state;
    world *w = make_world(9);
    int32_t seats[MAXB] = {0, 1, 2, -1, 4, INT32_MIN, INT32_MAX, 3}, want[2 * MAXB];
    for (int r = 0; r < 3; r++) {
        w->logits[r * VOCAB + 3 + 7 * r] = 9.0f; /* a tie: the first one wins */
        w->logits[r * VOCAB + 40 - r] = 9.0f;
        w->states[r * SW + 3] = fbits(r == 2 ? -1.0f : 0.0f);
    }
    w->states[3 * SW + 3] = fbits(1.0f);
    launch L;
    mk_sample(&L, w->logits, MAXB, seats, w->states, 4);
    TC_OK(L_run(&L, NULL));
    for (int r = 0; r < MAXB; r++) {
        want[2 * r] = want[2 * r + 1] = -1;
        if (r < 3 || r == 7) {
            ref_sample(w->logits + r * VOCAB, VOCAB, &w->states[seats[r] * SW], &want[2 * r]);
        }
    }
    assert_int_equal(want[0], 3); /* the reference too takes the first */
    assert_memory_equal(LI(&L, 0), want, 16 * sizeof(int32_t));
    assert_int_equal(LI(&L, 0)[15], want[15]);
    TC_BYTES_EQUAL(L.a[4].host, w->states, 4 * SW * sizeof(uint32_t));
    launch one; /* the drawing row alone, from the same state */
    mk_sample(&one, w->logits + 7 * VOCAB, 1, &seats[7], w->states, 4);
    state_of((uint32_t *)(void *)one.a[4].host, 3)[2]--; /* ref_sample advanced w's */
    expect_part(&one, LF(&L, 0) + 14);
    L_free(&L);
    free(w);
}

/* Draws match the reference for many seeds, temperatures and top-p values on every backend,
 * report the counter and advance it by one, and leave the other words of the state alone. */
static void test_sample_reference(void **state) {
    (void)state;
    static const float temps[3] = {0.5f, 1.0f, 1.7f}, top_ps[4] = {1.0f, 0.9f, 0.5f, 0.2f};
    world *w = make_world(10);
    rng r = {10};
    int draws = 0, mismatches = 0;
    for (int seed = 0; seed < 200; seed++) {
        rnd_fill(&r, w->logits, 4 * VOCAB, -4.0f, 4.0f);
        for (int i = 0; i < MAXB; i++) {
            uint32_t *s = state_of(w->states, i);
            s[0] = (uint32_t)rnd64(&r);
            s[1] = (uint32_t)rnd64(&r);
            s[2] = (uint32_t)(rnd64(&r) % 1000000);
            s[3] = fbits(temps[(seed + i) % 3]);
            s[4] = fbits(top_ps[(seed / 3 + i) % 4]);
        }
        uint32_t want_states[MAXB * SW];
        memcpy(want_states, w->states, sizeof want_states);
        launch L;
        mk_sample(&L, w->logits, 4, w->seats, w->states, MAXB);
        TC_OK(L_run(&L, NULL));
        for (int row = 0; row < 4; row++) {
            int32_t want[2];
            ref_sample(w->logits + row * VOCAB, VOCAB, state_of(want_states, w->seats[row]), want);
            assert_int_equal(LI(&L, 0)[2 * row + 1], state_of(w->states, w->seats[row])[2]);
            mismatches += LI(&L, 0)[2 * row] != want[0];
            draws++;
        }
        TC_BYTES_EQUAL(L.a[4].host, want_states, sizeof want_states);
        L_free(&L);
    }
    printf("sample_f32: %d of %d draws differ from the reference\n", mismatches, draws);
    assert_int_equal(mismatches, 0);
    free(w);
}

/* Where logit / temperature overflows (a temperature of 1e-39, or an infinite logit), the
 * distribution is all on the largest logit: the sampler takes the first one and makes no draw
 * (counter untouched, reported -1), instead of NaN probabilities and token 0. */
static void test_sample_overflow(void **state) {
    (void)state;
    world *w = make_world(12);
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < VOCAB; i++) {
                w->logits[r * VOCAB + i] = (float)(i % 7);
            }
            uint32_t *s = state_of(w->states, w->seats[r]);
            s[2] = 5;
            s[3] = fbits(pass == 0 ? 1e-39f : 1.0f);
            s[4] = fbits(r == 0 ? 0.5f : 1.0f);
        }
        if (pass == 1) {
            w->logits[20] = INFINITY;
            w->logits[VOCAB + 33] = INFINITY;
        }
        launch L;
        mk_sample(&L, w->logits, 2, w->seats, w->states, MAXB);
        TC_OK(L_run(&L, NULL));
        const int32_t *res = LI(&L, 0);
        assert_int_equal(res[0], pass == 0 ? 6 : 20);
        assert_int_equal(res[2], pass == 0 ? 6 : 33);
        assert_int_equal(res[1], -1);
        assert_int_equal(res[3], -1);
        assert_int_equal(state_of(w->states, w->seats[0])[2], 5);
        assert_int_equal(state_of(w->states, w->seats[1])[2], 5);
        L_free(&L);
    }
    free(w);
}

/* Successive launches on one state report counters 77, 78, ... and leave it at 77 + 64; the
 * draws of a flat distribution vary, and the same state again repeats them. With top-p 0.01,
 * the largest logit is always picked. */
static void test_sample_sequence(void **state) {
    (void)state;
    world *w = make_world(11);
    for (int pass = 0; pass < 3; pass++) {
        uint32_t *s = state_of(w->states, w->seats[0]);
        s[2] = 77;
        s[3] = fbits(pass == 2 ? 2.0f : 1.0f);
        s[4] = fbits(pass == 2 ? 0.01f : 1.0f);
        for (int i = 0; i < VOCAB; i++) {
            w->logits[i] = pass == 2 ? (i == 17 ? 3.0f : (float)(i % 5) * 0.1f) : 0.0f;
        }
        int32_t tokens[2][64];
        for (int run = 0; run < (pass == 1 ? 2 : 1); run++) {
            launch L;
            mk_sample(&L, w->logits, 1, w->seats, w->states, MAXB);
            L_upload(&L);
            for (int i = 0; i < 64; i++) {
                TC_OK(L_launch(&L, NULL));
                L_read(&L);
                tokens[run][i] = LI(&L, 0)[0];
                assert_true(tokens[run][i] >= 0 && tokens[run][i] < VOCAB);
                assert_int_equal(LI(&L, 0)[1], 77 + i);
            }
            assert_int_equal(state_of((uint32_t *)(void *)L.a[4].host, w->seats[0])[2], 77 + 64);
            L_release(&L);
            L_free(&L);
        }
        bool all_same = true;
        for (int i = 1; i < 64; i++) {
            all_same = all_same && tokens[0][i] == tokens[0][0];
        }
        assert_true(pass == 2 ? all_same && tokens[0][0] == 17 : !all_same);
        if (pass == 1) {
            assert_memory_equal(tokens[0], tokens[1], sizeof tokens[0]);
        }
    }
    free(w);
}

/* ---- launch shapes ------------------------------------------------------------------------ */

/* Launches L's kernel on args and dims, expecting `want` and a message that has needle. */
static void expect_refusal(const launch *L, const acg_arg *args, size_t n_args,
                           const acg_dims *dims, acg_status want, const char *needle) {
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, L->name, &k));
    acg_status got = acg_kernel_launch(stream, k, dims, args, n_args);
    if (got != want) {
        fail_msg("%s: %s, expected %s: %s", L->name, acg_status_name(got), acg_status_name(want),
                 acg_last_error());
    }
    TC_LAST_ERROR_HAS(needle);
}

/* Every model kernel: a grid rounded up past the counts (global[0] to a multiple of 64,
 * global[1] of 8, one more at least) leaves every buffer as the exact grid does; each buffer's
 * exact reach fits and one float less is ACG_ERR_OUT_OF_RANGE naming the argument; a grid one
 * short in a dimension, one argument too few, and a scalar or a buffer of the wrong type are
 * ACG_ERR_INVALID_ARGUMENT. */
static void test_launch_shapes(void **state) {
    (void)state;
    world *w = make_world(14);
    for (int k = 0; k < K_N; k++) {
        launch L, rounded;
        int dims_used = k == K_RMSNORM || k == K_SAMPLE ? 1 : 2;
        mk_case(&L, k, w);
        mk_case(&rounded, k, w);
        acg_dims d = L.dims;
        d.global[0] = (d.global[0] / 64 + 1) * 64;
        d.global[1] = dims_used == 2 ? (d.global[1] / 8 + 1) * 8 : 1;
        TC_OK(L_run(&L, NULL));
        TC_OK(L_run(&rounded, &d));
        for (size_t i = 0; i < L.n_args; i++) {
            assert_true(!is_buf(&L.a[i]) || !memcmp(rounded.a[i].host, L.a[i].host, L.a[i].bytes));
        }
        L_free(&rounded);

        L.bare = true;
        TC_OK(L_run(&L, NULL));
        for (size_t i = 0; i < L.n_args; i++) {
            if (is_buf(&L.a[i])) {
                char needle[48];
                snprintf(needle, sizeof needle, "argument %zu reaches", i);
                L.a[i].bytes -= 4;
                L_upload(&L);
                TC_EXPECT(ERR_OUT_OF_RANGE, L_launch(&L, NULL));
                TC_LAST_ERROR_HAS(needle);
                L_release(&L);
                L.a[i].bytes += 4;
            }
        }
        L_upload(&L);
        acg_arg args[ACG_MAX_KERNEL_ARGS];
        L_args(&L, args);
        for (int i = 0; i < dims_used; i++) {
            d = L.dims;
            d.global[i]--;
            expect_refusal(&L, args, L.n_args, &d, ACG_ERR_INVALID_ARGUMENT, "the grid must cover");
        }
        expect_refusal(&L, args, L.n_args - 1, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                       "arguments, the kernel takes");
        acg_arg last = args[L.n_args - 1];
        args[L.n_args - 1] = acg_arg_i32(1);
        expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT, "is a i32");
        args[L.n_args - 1] = last;
        args[0] = acg_arg_u32(0);
        expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                       "argument 0 is a u32");
        L_release(&L);
        L_free(&L);
    }
    free(w);
}

/* Counts a kernel cannot take: an odd head_size or one that does not divide the width (rope),
 * n_kv_heads 0 or not dividing n_heads (attention), and counts whose reach overflows 64 bits,
 * refused as out of range rather than wrapped into a small window. */
static void test_bad_counts(void **state) {
    (void)state;
    world *w = make_world(15);
    launch L;
    acg_arg args[ACG_MAX_KERNEL_ARGS];
    for (int k = K_ROPE; k <= K_ATTENTION; k++) {
        mk_case(&L, k, w);
        L.bare = true;
        L_upload(&L);
        L_args(&L, args);
        if (k == K_ROPE) {
            static const unsigned bad[3][2] = {{28, 7}, {DIM, 12}, {DIM, 0}}; /* width, hs */
            for (int i = 0; i < 3; i++) {
                args[5] = acg_arg_u32(bad[i][0]);
                args[6] = acg_arg_u32(bad[i][1]);
                expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                               "head_size must be even and divide width");
            }
        } else if (k == K_KV_STORE) { /* the caches reach 4 * 2^66 bytes: 16 when wrapped */
            args[7] = args[11] = args[12] = acg_arg_u32(1u << 22);
            acg_dims dims = {{1u << 22, w->st.n, 1}, {0, 0, 0}};
            expect_refusal(&L, args, L.n_args, &dims, ACG_ERR_OUT_OF_RANGE, "argument 0 reaches");
        } else {
            for (unsigned nkv = 0; nkv <= 3; nkv += 3) {
                args[9] = acg_arg_u32(nkv);
                expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                               "n_kv_heads must divide n_heads");
            }
            /* att reaches 4 * n * n_heads * 2^31 * 2^31 bytes: 0 when wrapped */
            args[9] = acg_arg_u32(NKV);
            args[13] = args[14] = acg_arg_u32(1u << 31);
            expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_OUT_OF_RANGE, "argument 1 reaches");
            /* No pages at all: a bad page id would read a sink page that does not exist. */
            L_args(&L, args);
            args[15] = acg_arg_u32(0);
            expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                           "n_pages must be at least 1");
        }
        L_release(&L);
        L_free(&L);
    }
    free(w);
}

/* A shaped kernel's buffers must not overlap, except the pair it declares in place: matmul's
 * out over its x is refused (a tile would overwrite inputs another still reads), rmsnorm's out
 * may be its x, and gives what a separate out gives. */
static void test_in_place(void **state) {
    (void)state;
    enum { D = 8, R = 3 };
    acg_kernel *matmul, *rmsnorm;
    TC_OK(acg_kernel_get(dev, "matmul_f32", &matmul));
    TC_OK(acg_kernel_get(dev, "rmsnorm_f32", &rmsnorm));
    float host[2 * R * D + D], weights[D * D];
    rng r = {16};
    rnd_fill(&r, host, 2 * R * D + D, -1.0f, 1.0f);
    rnd_fill(&r, weights, D * D, -1.0f, 1.0f);
    acg_buffer *b = tc_buffer(dev, sizeof host), *w = tc_buffer(dev, sizeof weights);
    TC_OK(acg_copy_h2d(stream, b, 0, host, sizeof host));
    TC_OK(acg_copy_h2d(stream, w, 0, weights, sizeof weights));
    acg_dims dm = {{D, R, 1}, {0, 0, 0}};
    const acg_arg mm[] = {acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(w, 0),
                          acg_arg_u32(D / 2),   acg_arg_u32(D),       acg_arg_u32(R)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(stream, matmul, &dm, mm, 6));
    TC_LAST_ERROR_HAS("does not work in place");
    /* rmsnorm: x is b[0 .. R*D), the norm weight b[2*R*D ..); in place, then into b[R*D ..) */
    acg_dims dn = {{R, 1, 1}, {0, 0, 0}};
    const size_t f = sizeof(float);
    const acg_arg apart[] = {acg_arg_buffer(b, R * D * f),
                             acg_arg_buffer(b, 0),
                             acg_arg_buffer(b, 2 * R * D * f),
                             acg_arg_u32(D),
                             acg_arg_u32(R),
                             acg_arg_f32(1e-5f)};
    TC_OK(acg_kernel_launch(stream, rmsnorm, &dn, apart, 6));
    const acg_arg same[] = {
        acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(b, 2 * R * D * f),
        acg_arg_u32(D),       acg_arg_u32(R),       acg_arg_f32(1e-5f)};
    TC_OK(acg_kernel_launch(stream, rmsnorm, &dn, same, 6));
    /* out over x shifted by one element overlaps without being the same window */
    const acg_arg shifted[] = {
        acg_arg_buffer(b, f), acg_arg_buffer(b, 0), acg_arg_buffer(b, 2 * R * D * f),
        acg_arg_u32(D),       acg_arg_u32(R),       acg_arg_f32(1e-5f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(stream, rmsnorm, &dn, shifted, 6));
    TC_LAST_ERROR_HAS("without being the same window");
    float got[2 * R * D + D];
    TC_OK(acg_copy_d2h(stream, got, b, 0, sizeof got));
    TC_OK(acg_stream_synchronize(stream));
    TC_BYTES_EQUAL(got, got + R * D, R * D * f);
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_buffer_free(w));
}

/* ---- the one source ------------------------------------------------------------------------
 * Each kernel's one source (src/model/ops.acg.c) gives every backend its code, but where the
 * model registers code of its own in its place (the cpu backend's SIMD loops and splits, cuda's
 * lanes kernels), that code must compute the same bits. The one source's definitions, as
 * acg_add_kernels generated them, registered as the set "one", run each case beside the
 * model's on the device under test. */

size_t acg__model_kernel_count(void);
const acg_kernel_desc *acg__model_kernel_desc(size_t i);

/* Runs L as the model's kernel and as the one source's, and expects every buffer alike. */
static void expect_one_source(launch *L, launch *one, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "one/%s", L->name);
    one->name = name;
    TC_OK(L_run(L, NULL));
    TC_OK(L_run(one, NULL));
    for (size_t i = 0; i < L->n_args; i++) {
        if (is_buf(&L->a[i]) && memcmp(L->a[i].host, one->a[i].host, L->a[i].bytes) != 0) {
            const float *a = (const float *)(void *)L->a[i].host;
            const float *b = (const float *)(void *)one->a[i].host;
            size_t at = 0;
            while (fbits(a[at]) == fbits(b[at])) {
                at++;
            }
            fail_msg("%s: argument %zu element %zu: the model's %08x, the one source's %08x", what,
                     i, at, fbits(a[at]), fbits(b[at]));
        }
    }
    L_free(L);
    L_free(one);
}

static void test_one_source(void **state) {
    (void)state;
    /* acg's cuda and Level Zero test drivers run a definition's cpu code in place of a device
     * function they find by name (and image), and may take the model's for the one source's:
     * there the comparison would prove nothing, so it is skipped, and runs on a real GPU. */
    if ((tc_backend_is("cuda") && getenv("ACG_CUDA_DRIVER") != NULL) ||
        (tc_backend_is("level_zero") && getenv("ZE_ENABLE_ALT_DRIVERS") != NULL)) {
        print_message("test_one_source: skipped on acg's %s test driver, which runs cpu code\n",
                      tc_backend());
        skip();
    }
    const size_t n = acg__model_kernel_count();
    acg_kernel_desc *descs = calloc(n, sizeof *descs);
    assert_non_null(descs);
    for (size_t i = 0; i < n; i++) {
        descs[i] = *acg__model_kernel_desc(i);
    }
    TC_OK(acg_kernel_register_set("one", descs, n));
    free(descs);
    launch L, one;
    enum { N = 1000 };
    static float a[N], b[N];
    rng r = {21};
    rnd_fill(&r, a, N, -10.0f, 10.0f);
    rnd_fill(&r, b, N, -2.0f, 2.0f);
    L_make(&L, "swiglu_f32", N, 1, "bbb", NULL, 4 * N, a, 4 * N, b, 4 * N);
    L_make(&one, "swiglu_f32", N, 1, "bbb", NULL, 4 * N, a, 4 * N, b, 4 * N);
    expect_one_source(&L, &one, "swiglu_f32");
    size_t cases = 1;
    for (uint32_t seed = 30; seed < 33; seed++) {
        world *w = make_world(seed);
        for (int k = 0; k < K_N; k++) {
            mk_case(&L, k, w);
            mk_case(&one, k, w);
            expect_one_source(&L, &one, L.name);
            cases++;
        }
        free(w);
    }
    assert_int_equal(cases, 1 + 3 * K_N);
    /* Every kernel of the one source was compared: K_N cases and swiglu. */
    assert_int_equal(n, (size_t)K_N + 1);
    /* A loaded kernel belongs to its device until it closes. */
    TC_OK(acg_stream_destroy(stream));
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("one"));
    dev = tc_open();
    stream = tc_stream(dev);
}

int main(int argc, char **argv) {
    tc_init(argc, argv);
    make_tables();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registration, setup, teardown),
        cmocka_unit_test(test_registration_out_of_memory),
        cmocka_unit_test_setup_teardown(test_swiglu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rmsnorm_matmul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kv_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gather_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_untrusted_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_greedy_and_seats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_launch_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_source, setup, teardown),
    };
    return cmocka_run_group_tests_name(tc_group("test_model_kernels"), tests, NULL, NULL);
}
