/*
 * test_model_serving.c — the serving engine at its edges, on the device under test:
 *
 *   - KV page exhaustion: requests wait for pages, in order, and none corrupts another; a
 *     request that can never fit is refused at submission.
 *   - A lost device: the model's calls say so, and destroying it still succeeds.
 *   - The error paths of the serving API; a step refused at any row changes no request.
 *   - An allocation-failure sweep of a model's life, and the structs of older and newer
 *     callers.
 *
 * Generation against the reference, batch invariance and sampling are test_model.c's; both
 * drive the model through model_fixture.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h>

#include "model_fixture.h"

/* ==== 4. KV page exhaustion ================================================================== */

static void test_kv_exhaustion(void **state) {
    (void)state;
    acg_model_weights *w = tc_model_preset("tiny");
    static const uint32_t lens[] = {10, 20, 5, 17, 1, 54};
    static const uint32_t news[] = {12, 12, 20, 15, 9, 10};
    /* pages of 16 tokens: 2, 2, 2, 2, 1 and 4 (all of them) */
    enum { N = 6 };
    static int32_t prompts[N][64];
    job jobs[N];
    for (uint32_t i = 0; i < N; i++) {
        make_prompt(prompts[i], lens[i], 512, 300 + i);
        jobs[i] = (job){prompts[i], lens[i], news[i], i % 2 ? 0.9f : 0.0f, 1.0f, 40 + i};
    }
    acg_device *dev = tc_open();
    /* 4 pages besides the sink: room for two of the requests at a time. */
    acg_model *m = model_new(dev, w, 4, 16, 5, ACG_GRAPHS_ON);
    outcome alone[N], together[N];
    run_alone(m, jobs, N, alone);

    /* Never: more pages than the cache has, or past seq_len. */
    int32_t big[250];
    make_prompt(big, 250, 512, 9);
    uint64_t id = 12345;
    job never = {big, 55, 10, 0.0f, 1.0f, 0}; /* 65 tokens: 5 pages */
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = never.prompt;
    q.prompt_len = never.prompt_len;
    q.max_new_tokens = never.max_new;
    TC_EXPECT(ERR_EXHAUSTED, acg_model_submit(m, &q, &id));
    TC_LAST_ERROR_HAS("KV pages");
    q.prompt_len = 250;
    q.max_new_tokens = 7;
    TC_EXPECT(ERR_EXHAUSTED, acg_model_submit(m, &q, &id));
    TC_LAST_ERROR_HAS("seq_len");
    assert_int_equal(id, 12345);

    uint64_t ids[N];
    for (uint32_t i = 0; i < N; i++) {
        ids[i] = submit(m, &jobs[i]);
    }
    acg_request_state seen[N] = {ACG_REQUEST_WAITING};
    bool was_waiting_after_start[N] = {false};
    acg_step_report rep;
    for (uint32_t step = 0; step_served(m, step, 1000, &rep); step++) {
        assert_true(rep.rows <= 2); /* the pages admit two requests at most */
        uint32_t running = 0;
        for (uint32_t i = 0; i < N; i++) {
            acg_request_status s = ACG_REQUEST_STATUS_INIT;
            TC_OK(acg_model_get_request(m, ids[i], &s));
            seen[i] = s.state;
            running += s.state == ACG_REQUEST_RUNNING;
            was_waiting_after_start[i] |= s.state == ACG_REQUEST_WAITING;
            /* first come, first served: nobody runs while an earlier request waits */
            for (uint32_t e = 0; e < i && s.state != ACG_REQUEST_WAITING; e++) {
                assert_int_not_equal(seen[e], ACG_REQUEST_WAITING);
            }
        }
        assert_true(running <= 2);
        if (step == 0) {
            assert_int_equal(seen[0], ACG_REQUEST_RUNNING);
            assert_int_equal(seen[1], ACG_REQUEST_RUNNING);
            for (uint32_t i = 2; i < N; i++) {
                assert_int_equal(seen[i], ACG_REQUEST_WAITING);
            }
        }
    }
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(seen[i], ACG_REQUEST_FINISHED);
        assert_true(was_waiting_after_start[i] == (i >= 2));
        collect(m, ids[i], &jobs[i], &together[i]);
        expect_same("kv-starved vs alone", i, &together[i], &alone[i]);
    }
    expect_graph_use(m, ACG_GRAPHS_ON);
    TC_OK(acg_model_destroy(m));
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

/* A device fault in a step's replay: the step fails with ACG_ERR_DEVICE_LOST, so does every
 * later step at once, and the model is destroyed all the same, leaving nothing on the device
 * (its close would count what is left). */
static void test_device_lost(void **state) {
    (void)state;
    acg_device *dev = tc_open_lost();
    acg_model_weights *w = tc_model_preset("tiny");
    acg_model *m = model_new(dev, w, 1, 16, 8, ACG_GRAPHS_REQUIRE);
    int32_t prompt[8];
    make_prompt(prompt, 8, 512, 5);
    job j = {prompt, 8, 4, 0.0f, 1.0f, 1};
    submit(m, &j);
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    TC_EXPECT(ERR_DEVICE_LOST, acg_model_step(m, &rep));
    TC_EXPECT(ERR_DEVICE_LOST, acg_model_step(m, &rep));
    TC_LAST_ERROR_HAS("was lost to an earlier fault");
    TC_OK(acg_model_destroy(m));
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

/* ==== 5. error paths ========================================================================= */

/* acg_model_create refuses options o with ACG_ERR_INVALID_ARGUMENT, saying needle (NULL: not
 * checked), and leaves its out-parameter as it was. */
static void expect_options_refused(acg_device *dev, const acg_model_weights *w,
                                   const acg_model_options *o, const char *needle) {
    acg_model *const sentinel = (acg_model *)&sentinel;
    acg_model *m = sentinel;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, o, &m));
    if (needle != NULL) {
        TC_LAST_ERROR_HAS(needle);
    }
    assert_ptr_equal(m, sentinel);
}

static void test_errors(void **state) {
    (void)state;
    acg_model_weights *w = tc_model_preset("tiny");
    acg_device *dev = tc_open();
    acg_model *const sentinel = (acg_model *)&sentinel;
    acg_model *m = sentinel;
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;

    /* acg_model_create */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_create(NULL, w, NULL, &m));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_create(dev, NULL, NULL, &m));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_create(dev, (const acg_model_weights *)&o, NULL, &m));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, NULL, NULL));
    o.size = 4; /* does not even hold the size field */
    expect_options_refused(dev, w, &o, "options.size");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 0;
    expect_options_refused(dev, w, &o, "max_batch");
    o.max_batch = 1025;
    o.max_step_tokens = 2048;
    expect_options_refused(dev, w, &o, "max_batch");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_step_tokens = o.max_batch - 1;
    expect_options_refused(dev, w, &o, "max_step_tokens");
    o.max_step_tokens = 0;
    expect_options_refused(dev, w, &o, NULL);
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_step_tokens = 16 * 256 + 1; /* above 16 * seq_len */
    expect_options_refused(dev, w, &o, "max_step_tokens");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.page_size = 0;
    expect_options_refused(dev, w, &o, "page_size");
    o.page_size = 65537;
    expect_options_refused(dev, w, &o, "page_size");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.kv_pages = 1;
    expect_options_refused(dev, w, &o, "kv_pages");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.n_slots = 3;
    expect_options_refused(dev, w, &o, NULL);
    assert_ptr_equal(m, sentinel); /* untouched on every error */

    m = model_new(dev, w, 2, 4, 0, ACG_GRAPHS_OFF);

    /* acg_model_submit */
    int32_t prompt[4] = {1, 5, 6, 7};
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = prompt;
    q.prompt_len = 4;
    q.max_new_tokens = 2;
    uint64_t id = 777;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, NULL, &id));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &q, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_submit(NULL, &q, &id));
    /* A newer caller's request that sets a field this library does not have. */
    struct {
        acg_request q;
        uint64_t newer;
    } longer = {q, 1};
    longer.q.size = sizeof longer;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &longer.q, &id));
    TC_LAST_ERROR_HAS("size");
    acg_request bad = q;
    bad.prompt = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
    TC_LAST_ERROR_HAS("prompt");
    bad = q;
    bad.prompt_len = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
    TC_LAST_ERROR_HAS("prompt_len");
    bad = q;
    bad.max_new_tokens = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
    TC_LAST_ERROR_HAS("max_new_tokens");
    const int32_t out_of_range[] = {-1, 512, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < 4; i++) {
        int32_t p[3] = {1, 2, out_of_range[i]};
        bad = q;
        bad.prompt = p;
        bad.prompt_len = 3;
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
        TC_LAST_ERROR_HAS("prompt[2]");
    }
    const float temperatures[] = {-1.0f, -0.0001f, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 5; i++) {
        bad = q;
        bad.temperature = temperatures[i];
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
        TC_LAST_ERROR_HAS("temperature");
    }
    const float top_ps[] = {0.0f, -0.5f, 1.0001f, 2.0f, NAN, INFINITY};
    for (size_t i = 0; i < 6; i++) {
        bad = q;
        bad.top_p = top_ps[i];
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &bad, &id));
        TC_LAST_ERROR_HAS("top_p");
    }
    assert_int_equal(id, 777); /* untouched on every error */
    bad = q;
    bad.prompt_len = 250;
    bad.max_new_tokens = 7;
    int32_t long_prompt[250];
    make_prompt(long_prompt, 250, 512, 4);
    bad.prompt = long_prompt;
    TC_EXPECT(ERR_EXHAUSTED, acg_model_submit(m, &bad, &id));
    TC_LAST_ERROR_HAS("seq_len");
    bad.max_new_tokens = 6; /* exactly seq_len: accepted */
    TC_OK(acg_model_submit(m, &bad, &id));
    TC_OK(acg_model_release_request(m, id)); /* a waiting request */
    TC_EXPECT(ERR_NOT_FOUND, acg_model_release_request(m, id));

    /* acg_model_get_request, acg_model_release_request, acg_model_get_stats */
    acg_request_status rs = ACG_REQUEST_STATUS_INIT;
    TC_EXPECT(ERR_NOT_FOUND, acg_model_get_request(m, 0, &rs));
    TC_EXPECT(ERR_NOT_FOUND, acg_model_get_request(m, 424242, &rs));
    TC_EXPECT(ERR_NOT_FOUND, acg_model_release_request(m, 0));
    TC_EXPECT(ERR_NOT_FOUND, acg_model_release_request(m, 424242));
    TC_OK(acg_model_submit(m, &q, &id));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_get_request(m, id, NULL));
    TC_OK(acg_model_get_request(m, id, &rs));
    assert_int_equal(rs.state, ACG_REQUEST_WAITING);
    assert_int_equal(rs.n_tokens, 4);
    assert_int_equal(rs.n_generated, 0);
    acg_model_stats stats = ACG_MODEL_STATS_INIT;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_get_stats(m, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_get_stats(NULL, &stats));
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(m, &rep)); /* admits it and reads the prompt, generating one token */
    assert_int_equal(rep.admitted, 1);
    assert_int_equal(rep.rows, 1);
    assert_int_equal(rep.tokens, 4);
    assert_int_equal(rep.generated, 1);
    TC_OK(acg_model_get_request(m, id, &rs));
    assert_int_equal(rs.state, ACG_REQUEST_RUNNING);
    assert_int_equal(rs.n_generated, 1);
    TC_OK(acg_model_release_request(m, id)); /* a running request: its pages come back */
    TC_OK(acg_model_step(m, &rep));
    assert_int_equal(rep.rows, 0);
    TC_OK(acg_model_step(m, NULL));
    TC_OK(acg_model_run_all(m));
    assert_non_null(acg_model_get_runner(m));
    assert_non_null(acg_model_get_stream(m));

    /* a destroyed model */
    TC_OK(acg_model_destroy(m));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_submit(m, &q, &id));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_step(m, &rep));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_run_all(m));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_get_request(m, id, &rs));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_release_request(m, id));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_get_stats(m, &stats));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_destroy(m));
    assert_null(acg_model_get_runner(m));
    assert_null(acg_model_get_stream(m));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_step(NULL, &rep));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_run_all(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_get_request(NULL, 1, &rs));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_release_request(NULL, 1));
    TC_OK(acg_model_destroy(NULL));

    /* graphs required: every bucket captured on a graph device, refused elsewhere */
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 2;
    o.max_step_tokens = 4;
    o.graphs = ACG_GRAPHS_REQUIRE;
    m = sentinel;
    if (tc_cap()->graphs) {
        TC_OK(acg_model_create(dev, w, &o, &m));
        acg_runner *runner = acg_model_get_runner(m);
        TC_OK(acg_model_get_stats(m, &stats));
        assert_int_equal(stats.buckets_captured, acg_runner_get_bucket_count(runner));
        assert_int_equal(stats.buckets_dropped, 0);
        for (uint32_t b = 0; b < acg_runner_get_bucket_count(runner); b++) {
            acg_bucket_report br = ACG_BUCKET_REPORT_INIT;
            TC_OK(acg_runner_get_report(runner, b, &br));
            assert_int_equal(br.state, ACG_BUCKET_CAPTURED);
        }
        TC_OK(acg_model_submit(m, &q, &id));
        TC_OK(acg_model_step(m, &rep));
        assert_true(rep.graphed);
        TC_OK(acg_model_destroy(m));
    } else {
        TC_EXPECT(ERR_UNSUPPORTED, acg_model_create(dev, w, &o, &m));
        assert_ptr_equal(m, sentinel);
    }
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

/* The model's test hook (src/model/model-impl.h, whose includes the tests do not see): the first
 * step after the call that samples at batch row `row` reads that row's token as vocab_size;
 * UINT32_MAX disarms it. */
void acg__model_fail_sample(uint32_t row);

static void expect_same_bits(acg_model *a, acg_model *b, const uint64_t *ids, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        request_bits x, y;
        get_bits(a, ids[i], &x);
        get_bits(b, ids[i], &y);
        assert_memory_equal(&x, &y, sizeof x);
    }
}

/* A step refused for a bad sampled token at row 1 changes nothing, the row before it included:
 * no request advances, nothing is counted, and the next step (its retry) gives the same bits,
 * tokens and logits, as on a model that never had the bad step. Row 0 decodes; row 1 ends a
 * chunked prompt, so it samples. */
static void test_refused_step_changes_nothing(void **state) {
    (void)state;
    acg_model_weights *w = tc_model_preset("tiny");
    acg_device *dev = tc_open();
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 2;
    o.max_step_tokens = 8;
    o.kv_pages = 8;
    o.page_size = 16;
    o.keep_logits = true;
    acg_model *bad = NULL, *good = NULL;
    TC_OK(acg_model_create(dev, w, &o, &bad));
    TC_OK(acg_model_create(dev, w, &o, &good));
    int32_t p0[3], p1[10];
    make_prompt(p0, 3, 512, 31);
    make_prompt(p1, 10, 512, 32);
    const job jobs[2] = {{p0, 3, 4, 0.0f, 1.0f, 1}, {p1, 10, 4, 0.0f, 1.0f, 2}};
    uint64_t ids[2];
    for (uint32_t i = 0; i < 2; i++) {
        ids[i] = submit(bad, &jobs[i]);
        assert_int_equal(submit(good, &jobs[i]), ids[i]);
    }
    /* Step 1: p0 whole and 5 tokens of p1. */
    acg_step_report rep = ACG_STEP_REPORT_INIT, want = ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(bad, &rep));
    TC_OK(acg_model_step(good, &want));
    assert_int_equal(rep.rows, 2);
    assert_int_equal(rep.tokens, 8);
    assert_int_equal(rep.generated, 1);
    expect_same_bits(bad, good, ids, 2);

    /* Step 2 on `bad` only: row 0 decodes p0's request, row 1 reads the rest of p1 and samples
     * a token outside the vocabulary. */
    request_bits before[2];
    get_bits(bad, ids[0], &before[0]);
    get_bits(bad, ids[1], &before[1]);
    acg_model_stats stats_before = ACG_MODEL_STATS_INIT, stats_after = ACG_MODEL_STATS_INIT;
    TC_OK(acg_model_get_stats(bad, &stats_before));
    acg__model_fail_sample(1);
    TC_EXPECT(ERR_INTERNAL, acg_model_step(bad, &rep));
    TC_LAST_ERROR_HAS("row 1 sampled token 512, outside 0..511");
    acg__model_fail_sample(UINT32_MAX);
    for (uint32_t i = 0; i < 2; i++) {
        request_bits after;
        get_bits(bad, ids[i], &after);
        assert_memory_equal(&before[i], &after, sizeof after);
    }
    TC_OK(acg_model_get_stats(bad, &stats_after));
    assert_int_equal(stats_after.steps, stats_before.steps);
    assert_int_equal(stats_after.prompt_tokens, stats_before.prompt_tokens);
    assert_int_equal(stats_after.generated_tokens, stats_before.generated_tokens);

    /* The retry is the step `good` runs next, bit for bit, and so is every step after it. */
    rep = (acg_step_report)ACG_STEP_REPORT_INIT;
    want = (acg_step_report)ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(bad, &rep));
    TC_OK(acg_model_step(good, &want));
    assert_int_equal(rep.rows, 2);
    assert_int_equal(rep.tokens, 1 + 5);
    assert_int_equal(rep.generated, 2);
    assert_int_equal(rep.rows, want.rows);
    assert_int_equal(rep.tokens, want.tokens);
    assert_int_equal(rep.generated, want.generated);
    assert_int_equal(rep.bucket, want.bucket);
    expect_same_bits(bad, good, ids, 2);
    TC_OK(acg_model_run_all(bad));
    TC_OK(acg_model_run_all(good));
    expect_same_bits(bad, good, ids, 2);
    TC_OK(acg_model_get_stats(bad, &stats_before));
    TC_OK(acg_model_get_stats(good, &stats_after));
    assert_int_equal(stats_before.steps, stats_after.steps);
    assert_int_equal(stats_before.prompt_tokens, stats_after.prompt_tokens);
    assert_int_equal(stats_before.generated_tokens, stats_after.generated_tokens);
    TC_OK(acg_model_destroy(bad));
    TC_OK(acg_model_destroy(good));
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

/* ==== 6. allocation failures ================================================================= */

typedef struct sweep_ctx {
    acg_device *dev;
    const acg_model_weights *w;
    bool keep_logits;
} sweep_ctx;

/* A model's short life: created (graphs on), one request submitted, one step, destroyed. */
static acg_status model_life(void *user) {
    const sweep_ctx *ctx = user;
    static const int32_t prompt[3] = {1, 40, 41};
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 2;
    o.max_step_tokens = 4;
    o.graphs = ACG_GRAPHS_ON;
    o.keep_logits = ctx->keep_logits;
    acg_model *m = NULL;
    acg_status st = acg_model_create(ctx->dev, ctx->w, &o, &m);
    if (st != ACG_OK) {
        return st;
    }
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = prompt;
    q.prompt_len = 3;
    q.max_new_tokens = 2;
    uint64_t id;
    st = acg_model_submit(m, &q, &id);
    if (st == ACG_OK) {
        st = acg_model_step(m, NULL);
    }
    acg_status dst = acg_model_destroy(m);
    return st != ACG_OK ? st : dst;
}

/* Every allocation of the life fails in turn: a clean ACG_ERR_OUT_OF_MEMORY (or a recovery:
 * a bucket whose capture failed is served eagerly), and nothing leaks. */
static void test_alloc_fail(void **state) {
    (void)state;
    /* The model's kernels hold memory of the allocator that registered them: the counting
     * allocator must register them itself (the first life below), and they go before it does. */
    TC_OK(acg_model_unregister_kernels());
    tc_alloc_install();
    sweep_ctx ctx = {tc_open(), NULL, false};
    acg_model_weights *w = tc_model_preset("tiny");
    ctx.w = w;
    TC_OK(model_life(&ctx)); /* the device's kernels are built once, and stay */
    TC_OK(model_life(&ctx));
    uint64_t points[2];
    for (int keep = 0; keep < 2; keep++) {
        ctx.keep_logits = keep;
        tc_log_capture_begin(ACG_LOG_ERROR); /* dropped buckets are logged */
        points[keep] = tc_alloc_sweep(model_life, &ctx, true);
        tc_log_capture_end();
        print_message("model allocation-failure sweep%s: %llu allocation points\n",
                      keep ? " (logits kept)" : "", (unsigned long long)points[keep]);
    }
    assert_true(points[0] > 20 && points[1] > 20);
    TC_OK(acg_model_weights_free(w));
    tc_close(ctx.dev);
    TC_OK(acg_model_unregister_kernels());
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
}

/* ==== 6. structs of older and newer callers ================================================ */

/* Options and a request from older headers take the defaults of the fields they lack; the
 * request status, step report and stats are written only up to an older caller's size; a
 * request that stops before prompt_len is refused, and a report whose size was never set is
 * refused before the step admits anything. */
static void test_struct_versions(void **state) {
    (void)state;
    acg_model_weights *w = tc_model_preset("tiny");
    acg_device *dev = tc_open();
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.size = offsetof(acg_model_options, n_slots);
    o.max_batch = 2;
    o.max_step_tokens = 4;
    o.graphs = ACG_GRAPHS_OFF;
    o.n_slots = 5; /* past the caller's size: the default (1 slot) is used */
    acg_model *m = NULL;
    TC_OK(acg_model_create(dev, w, &o, &m));

    int32_t prompt[4] = {1, 5, 6, 7};
    acg_request q = ACG_REQUEST_INIT;
    q.size = offsetof(acg_request, max_new_tokens);
    q.prompt = prompt;
    q.prompt_len = 4;
    q.max_new_tokens = 0; /* past the caller's size: the default (16) is used */
    uint64_t id = 0, none = 12345;
    TC_OK(acg_model_submit(m, &q, &id));
    q.size = offsetof(acg_request, prompt_len);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_submit(m, &q, &none));
    TC_LAST_ERROR_HAS("acg_request.size is 16");
    assert_int_equal(none, 12345);

    acg_step_report rep;
    memset(&rep, 0, sizeof rep);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_step(m, &rep));
    TC_LAST_ERROR_HAS("acg_model_step: out->size is 0");
    acg_request_status rs = ACG_REQUEST_STATUS_INIT;
    TC_OK(acg_model_get_request(m, id, &rs));
    assert_int_equal(rs.state, ACG_REQUEST_WAITING); /* the refused step admitted nothing */

    rep.size = offsetof(acg_step_report, generated);
    rep.generated = 99;
    TC_OK(acg_model_step(m, &rep));
    assert_int_equal(rep.size, offsetof(acg_step_report, generated));
    assert_int_equal(rep.rows, 1);
    assert_int_equal(rep.tokens, 4);
    assert_int_equal(rep.generated, 99); /* past the caller's size: untouched */
    TC_OK(acg_model_run_all(m));

    memset(&rs, 0, sizeof rs);
    rs.size = offsetof(acg_request_status, n_generated);
    rs.n_generated = 77;
    TC_OK(acg_model_get_request(m, id, &rs));
    assert_int_equal(rs.state, ACG_REQUEST_FINISHED);
    assert_int_equal(rs.n_tokens, 4 + 16);
    assert_int_equal(rs.n_generated, 77);
    rs.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_get_request(m, id, &rs));

    acg_model_stats stats;
    memset(&stats, 0, sizeof stats);
    stats.size = offsetof(acg_model_stats, prompt_tokens);
    TC_OK(acg_model_get_stats(m, &stats));
    assert_true(stats.steps >= 16);
    assert_int_equal(stats.prompt_tokens, 0);
    stats.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_get_stats(m, &stats));
    TC_OK(acg_model_destroy(m));
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_kv_exhaustion), cmocka_unit_test(test_device_lost),
    cmocka_unit_test(test_errors),        cmocka_unit_test(test_refused_step_changes_nothing),
    cmocka_unit_test(test_alloc_fail),    cmocka_unit_test(test_struct_versions),
};
TC_MAIN("test_model_serving", tests)
