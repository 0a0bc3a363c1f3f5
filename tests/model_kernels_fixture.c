/* model_kernels_fixture.c — the kernels suites' fixture (model_kernels_fixture.h). */
#include "model_kernels_fixture.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rnd64(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rnd_fill(rng *r, float *dst, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = lo + (hi - lo) * (float)(rnd64(r) >> 40) * (1.0f / 16777216.0f);
    }
}

float cos_tab[SPAN * HS / 2], sin_tab[SPAN * HS / 2];

void make_tables(void) {
    for (int pos = 0; pos < SPAN; pos++) {
        for (int i = 0; i < HS; i += 2) {
            float freq = 1.0f / powf(10000.0f, i / (float)HS), val = pos * freq;
            cos_tab[pos * HS / 2 + i / 2] = cosf(val);
            sin_tab[pos * HS / 2 + i / 2] = sinf(val);
        }
    }
}

acg_device *dev;
acg_stream *stream;

void L_make(launch *L, const char *name, uint32_t g0, uint32_t g1, const char *spec, ...) {
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

void L_free(launch *L) {
    L_release(L);
    for (size_t i = 0; i < L->n_args; i++) {
        free(L->a[i].host);
    }
}

void L_upload(launch *L) {
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

void L_args(const launch *L, acg_arg *args) {
    for (size_t i = 0; i < L->n_args; i++) {
        args[i] = L->a[i].arg;
    }
}

acg_status L_launch(const launch *L, const acg_dims *dims) {
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

void L_read(launch *L) {
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

void L_release(launch *L) {
    for (size_t i = 0; i < L->n_args; i++) {
        if (L->a[i].buf != NULL) {
            TC_OK(acg_buffer_free(L->a[i].buf));
            L->a[i].buf = NULL;
        }
    }
}

acg_status L_run(launch *L, const acg_dims *dims) {
    L_upload(L);
    acg_status st = L_launch(L, dims);
    if (st == ACG_OK) {
        L_read(L);
    }
    L_release(L);
    return st;
}

void expect_equal(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (fbits(got[i]) != fbits(want[i])) {
            fail_msg("%s: element %zu is %.9g (%08x), the reference %.9g (%08x)", what, i, got[i],
                     fbits(got[i]), want[i], fbits(want[i]));
        }
    }
}

void expect_part(launch *part, const float *whole) {
    TC_OK(L_run(part, NULL));
    TC_BYTES_EQUAL(LF(part, 0), whole, part->a[0].bytes);
    L_free(part);
}

void make_step(step *st, const seq *const *rows, uint32_t n_rows, uint32_t pad) {
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

size_t slot(const seq *q, int pos) {
    return ((size_t)q->pages[pos / PS] * PS + (size_t)(pos % PS)) * KVD;
}

world *make_world(uint32_t seed) {
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

int alone(step *one, const world *w, int i) {
    const seq *rows[1] = {&w->s[i]};
    make_step(one, rows, 1, 0);
    uint32_t t = 0;
    while (w->st.tok_seq[t] != &w->s[i]) {
        t++;
    }
    return (int)t;
}

void mk_embed(launch *L, const float *table, const int32_t *tokens, unsigned n) {
    L_make(L, "embed_f32", DIM, n, "bbbuuu", NULL, 4 * n * DIM, table, 4 * VOCAB * DIM, tokens,
           4 * n, DIM, VOCAB, n);
}

void mk_rmsnorm(launch *L, const float *x, const float *w, unsigned n) {
    L_make(L, "rmsnorm_f32", n, 1, "bbbuuf", NULL, 4 * n * DIM, x, 4 * n * DIM, w, 4 * DIM, DIM, n,
           1e-5);
}

void mk_matmul(launch *L, const float *x, const float *w, unsigned n) {
    L_make(L, "matmul_f32", N_OUT, n, "bbbuuu", NULL, 4 * n * N_OUT, x, 4 * n * DIM, w,
           4 * N_OUT * DIM, DIM, N_OUT, n);
}

void mk_rope(launch *L, const float *x, unsigned width, const step *st, unsigned max_pos) {
    L_make(L, "rope_f32", width / 2, st->n, "bbbbbuuuuu", x, 4 * st->n * width, cos_tab,
           2 * max_pos * HS, sin_tab, 2 * max_pos * HS, st->offsets, 4 * (st->batch + 1),
           st->kv_lens, 4 * st->batch, width, HS, st->n, st->batch, max_pos);
}

void mk_kv_store(launch *L, const float *kc, const float *vc, const float *k, const float *v,
                 const step *st) {
    L_make(L, "kv_store_f32", KVD, st->n, "bbbbbbbuuuuuu", kc, 4 * NP * PS * KVD, vc,
           4 * NP * PS * KVD, k, 4 * st->n * KVD, v, 4 * st->n * KVD, st->table, 4 * st->batch * TW,
           st->offsets, 4 * (st->batch + 1), st->kv_lens, 4 * st->batch, KVD, st->n, st->batch, TW,
           PS, NP);
}

void mk_attention(launch *L, const float *q, const float *kc, const float *vc, const step *st,
                  unsigned nh, unsigned nkv, unsigned hs) {
    L_make(L, "attention_f32", nh, st->n, "bbbbbbbbuuuuuuuu", NULL, 4 * st->n * nh * hs, NULL,
           4 * st->n * nh * SPAN, q, 4 * st->n * nh * hs, kc, 4 * NP * PS * nkv * hs, vc,
           4 * NP * PS * nkv * hs, st->table, 4 * st->batch * TW, st->offsets, 4 * (st->batch + 1),
           st->kv_lens, 4 * st->batch, nh, nkv, hs, st->n, st->batch, TW, PS, NP);
}

void mk_gather(launch *L, const float *x, const step *st) {
    L_make(L, "gather_last_f32", DIM, st->batch, "bbbuuu", NULL, 4 * st->batch * DIM, x,
           4 * st->n * DIM, st->offsets, 4 * (st->batch + 1), DIM, st->batch, st->n);
}

void mk_sample(launch *L, const float *logits, unsigned batch, const int32_t *seats,
               const uint32_t *states, unsigned n_states) {
    L_make(L, "sample_f32", batch, 1, "bbbbbuuu", NULL, 8 * batch, logits, 4 * batch * VOCAB, NULL,
           4 * batch * VOCAB, seats, 4 * batch, states, 4 * SW * n_states, VOCAB, batch, n_states);
}

void mk_case(launch *L, int which, const world *w) {
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

int kernels_setup(void **state) {
    (void)state;
    TC_OK(acg_model_register_kernels()); /* the first test unregisters them on its way */
    dev = tc_open();
    stream = tc_stream(dev);
    return 0;
}

int kernels_teardown(void **state) {
    (void)state;
    TC_OK(acg_stream_destroy(stream));
    tc_close(dev);
    return 0;
}

int world_setup(void **state) {
    uint32_t seed = (uint32_t)(uintptr_t)*state;
    kernels_setup(state);
    *state = make_world(seed);
    return 0;
}

int world_teardown(void **state) {
    free(*state);
    return kernels_teardown(state);
}
