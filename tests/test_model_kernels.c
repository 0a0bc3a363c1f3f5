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
 *  - that the kernels are the model's: absent until acg_model_register_kernels, which registers
 *    them once (and fails cleanly at any allocation), and that they unregister only once no
 *    open device has loaded them.
 *
 * sample_f32 has a suite of its own (test_model_sampler.c), and so have the shape rules
 * (test_model_shapes.c); all three share model_kernels_fixture.h.
 */
#include "model_kernels_fixture.h"

#include "llama2_ref.h"
#include "model/arith.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registration --------------------------------------------------------------------------- */

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
    mine.cpu.fn = tc_never_called;
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
    world *w = *state;
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
}

/* rmsnorm_f32 and matmul_f32 per row against the references; each row alone, and five rows from
 * the middle, give the bytes of the batch of eleven (the cpu's 4-row tiles and its single-row
 * path agree). */
static void test_rmsnorm_matmul(void **state) {
    world *w = *state;
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
}

/* ---- paged kernels ------------------------------------------------------------------------ */

/* rope_f32 rotates each real token like llama2.c at its position, K rows and Q rows, leaves
 * padding untouched, gives each row alone the same bytes, and leaves positions >= max_pos. */
static void test_rope(void **state) {
    world *w = *state;
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
}

/* kv_store_f32 puts each real token's K and V at its position's page and slot and nothing
 * anywhere else: the cache afterwards is llama2.c's caches laid out in pages, the sink page
 * zero. Each row alone writes exactly its own slots. */
static void test_kv_store(void **state) {
    world *w = *state;
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
}

/* attention_f32 of each real token over the paged cache equals llama2.c's attention over its
 * sequence's contiguous caches, for several head layouts (grouped-query and not); padding
 * tokens get zeros; each row alone gives the bytes it gets in the batch. */
static void test_attention(void **state) {
    static const unsigned layouts[4][3] = {{NH, NKV, HS}, {2, 2, 8}, {8, 2, 8}, {2, 1, 16}};
    world *w = *state;
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
}

/* gather_last_f32 copies each row's last token, and zeros for the empty (padding) rows. */
static void test_gather_last(void **state) {
    world *w = *state;
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
}

/* Untrusted plans: query offsets that decrease, overshoot n or go negative, KV lengths negative
 * or huge, page ids negative, past n_pages or the sink page. Every launch succeeds inside its
 * windows (the guards hold), and what the contract fixes holds. */
static void test_untrusted_metadata(void **state) {
    world *w = *state;
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
    /* Every kernel of the one source with code of its own somewhere was compared: K_N cases and
     * swiglu. decode_advance_i32 has none (the one source runs everywhere): test_model_loop
     * checks it against its rule. */
    assert_int_equal(n, (size_t)K_N + 2);
    /* A loaded kernel belongs to its device until it closes. */
    TC_OK(acg_stream_destroy(stream));
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("one"));
    dev = tc_open();
    stream = tc_stream(dev);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_registration, kernels_setup, kernels_teardown),
    cmocka_unit_test(test_registration_out_of_memory),
    cmocka_unit_test_setup_teardown(test_swiglu, kernels_setup, kernels_teardown),
    WORLD_CASE(test_embed, 2),
    WORLD_CASE(test_rmsnorm_matmul, 3),
    WORLD_CASE(test_rope, 4),
    WORLD_CASE(test_kv_store, 5),
    WORLD_CASE(test_attention, 6),
    WORLD_CASE(test_gather_last, 7),
    WORLD_CASE(test_untrusted_metadata, 8),
    cmocka_unit_test_setup_teardown(test_one_source, kernels_setup, kernels_teardown),
};
KERNELS_MAIN("test_model_kernels", tests)
