/*
 * test_model_loop.c — decoding many steps per launch (model.h, "Decoding steps per launch").
 *
 * - decode_advance_i32, the kernel between a loop's steps, against a host reference on crafted
 *   rows: a row that decodes on, one that spends its budget, one that meets </s> and stops
 *   there, one that meets it and does not, a token outside the vocabulary, padding; over
 *   several steps, with every window between guards.
 * - Generation: the same requests on a model of one step per launch and on models of 4 and 16,
 *   graphs on and off: every request's tokens, draw counters and kept logits equal bit for bit
 *   (memcmp), with budgets that end inside a launch, greedy and sampled rows, a prompt admitted
 *   while others decode; the loop models launch fewer times and report launches of many steps.
 * - A loop launch leaves the next launch of the same rows nothing to upload (acg_model_stats
 *   uploads); a step of another bucket between them makes it upload again.
 * - A launch whose sampled token is refused changes nothing, and its retry is the good model's.
 * - steps_per_launch out of range is refused; on a device without loops in graphs the model
 *   decodes one step per launch, with the same bits.
 */
#include "model_fixture.h"

#include <stdlib.h>
#include <string.h>

/* The model's test hook (generate.c): the row whose next sampled token reads as vocab_size;
 * UINT32_MAX disarms it. */
void acg__model_fail_sample(uint32_t row);

/* ---- the kernel between steps ---------------------------------------------------------------- */

enum { KB = 6, KSTEPS = 4, KVOCAB = 100, KEOS = 2, GUARD = 64 };

typedef struct advance_state {
    int32_t result[2 * KB], tokens[KB], seats[KB], kv_lens[KB], ctl[2 * KB];
    int32_t ring[2 * KB * KSTEPS];
    uint32_t loop[2];
} advance_state;

/* The kernel's rule, on the host. */
static void advance_ref(advance_state *a) {
    const uint32_t step = a->loop[0];
    uint32_t decoding = 0;
    for (uint32_t r = 0; r < KB; r++) {
        if (a->seats[r] < 0) {
            continue;
        }
        const int32_t token = a->result[2 * r];
        if (step < KSTEPS) {
            a->ring[2 * (r * KSTEPS + step)] = token;
            a->ring[2 * (r * KSTEPS + step) + 1] = a->result[2 * r + 1];
        }
        a->ctl[r]--;
        if (a->ctl[r] <= 0 || token < 0 || token >= KVOCAB ||
            (a->ctl[KB + r] != 0 && token == KEOS)) {
            a->seats[r] = -1;
        } else {
            a->tokens[r] = token;
            a->kv_lens[r]++;
            decoding++;
        }
    }
    a->loop[0] = step + 1;
    a->loop[1] = decoding != 0;
}

/* One buffer per argument, its window between two guards of poison. */
typedef struct guarded {
    acg_buffer *buf;
    size_t bytes;
} guarded;

static guarded guarded_new(acg_device *dev, acg_stream *s, const void *data, size_t bytes) {
    guarded g = {tc_buffer(dev, bytes + 2 * GUARD), bytes};
    TC_OK(acg_fill(s, g.buf, 0, bytes + 2 * GUARD, 0xdeadbeefu, 4));
    TC_OK(acg_copy_h2d(s, g.buf, GUARD, data, bytes));
    return g;
}

/* Reads the window back, checking both guards. */
static void guarded_read(acg_stream *s, const guarded *g, void *out) {
    uint8_t *all = malloc(g->bytes + 2 * GUARD);
    assert_non_null(all);
    TC_OK(acg_copy_d2h(s, all, g->buf, 0, g->bytes + 2 * GUARD));
    for (size_t i = 0; i < GUARD; i += 4) {
        uint32_t lo, hi;
        memcpy(&lo, all + i, 4);
        memcpy(&hi, all + GUARD + g->bytes + i, 4);
        assert_int_equal(lo, 0xdeadbeefu);
        assert_int_equal(hi, 0xdeadbeefu);
    }
    memcpy(out, all + GUARD, g->bytes);
    free(all);
}

static void test_decode_advance(void **state) {
    tc_fixture *t = *state;
    TC_OK(acg_model_register_kernels());
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(t->dev, "decode_advance_i32", &k));
    /* Rows: 0 decodes on; 1 has one token of budget left; 2 meets </s> and stops there; 3 meets
     * </s> and goes on; 4 samples outside the vocabulary; 5 is padding. */
    advance_state a;
    memset(&a, 0, sizeof a);
    const int32_t seats[KB] = {3, 0, 1, 2, 4, -1};
    const int32_t budgets[KB] = {9, 1, 9, 9, 9, 0};
    const int32_t stops[KB] = {1, 0, 1, 0, 0, 0};
    for (uint32_t r = 0; r < KB; r++) {
        a.seats[r] = seats[r];
        a.tokens[r] = 10 + (int32_t)r;
        a.kv_lens[r] = 5 + (int32_t)r;
        a.ctl[r] = budgets[r];
        a.ctl[KB + r] = stops[r];
    }
    memset(a.ring, 0xff, sizeof a.ring);
    advance_state want = a;
    guarded g[7] = {
        guarded_new(t->dev, t->s, a.result, sizeof a.result),
        guarded_new(t->dev, t->s, a.tokens, sizeof a.tokens),
        guarded_new(t->dev, t->s, a.seats, sizeof a.seats),
        guarded_new(t->dev, t->s, a.kv_lens, sizeof a.kv_lens),
        guarded_new(t->dev, t->s, a.ctl, sizeof a.ctl),
        guarded_new(t->dev, t->s, a.ring, sizeof a.ring),
        guarded_new(t->dev, t->s, a.loop, sizeof a.loop),
    };
    const int32_t samples[3][KB] = {
        {20, 21, KEOS, KEOS, KVOCAB, 7}, {30, 31, 32, 33, 34, 35}, {40, 41, 42, 43, 44, 45}};
    for (uint32_t step = 0; step < 3; step++) {
        for (uint32_t r = 0; r < KB; r++) {
            want.result[2 * r] = samples[step][r];
            want.result[2 * r + 1] = (int32_t)(100 * step + r);
        }
        TC_OK(acg_copy_h2d(t->s, g[0].buf, GUARD, want.result, sizeof want.result));
        advance_ref(&want);
        acg_arg args[11];
        for (uint32_t i = 0; i < 7; i++) {
            args[i] = acg_arg_buffer(g[i].buf, GUARD);
        }
        args[7] = acg_arg_u32(KB);
        args[8] = acg_arg_u32(KSTEPS);
        args[9] = acg_arg_u32(KVOCAB);
        args[10] = acg_arg_i32(KEOS);
        const acg_dims d = {{1, 1, 1}, {1, 1, 1}};
        TC_OK(acg_kernel_launch(t->s, k, &d, args, 11));
        advance_state got;
        memcpy(got.result, want.result, sizeof got.result);
        guarded_read(t->s, &g[1], got.tokens);
        guarded_read(t->s, &g[2], got.seats);
        guarded_read(t->s, &g[3], got.kv_lens);
        guarded_read(t->s, &g[4], got.ctl);
        guarded_read(t->s, &g[5], got.ring);
        guarded_read(t->s, &g[6], got.loop);
        assert_memory_equal(&got, &want, sizeof got);
    }
    /* After three steps only row 0 and row 3 decoded on... and row 3 on too. */
    assert_int_equal(want.seats[0], 3);
    assert_int_equal(want.seats[1], -1);
    assert_int_equal(want.seats[2], -1);
    assert_int_equal(want.seats[3], 2);
    assert_int_equal(want.seats[4], -1);
    assert_int_equal(want.loop[0], 3);
    assert_int_equal(want.loop[1], 1);
    /* A ring too small for the steps leaves its buffer; an empty grid is refused. */
    const acg_dims none = {{0, 1, 1}, {1, 1, 1}};
    acg_arg args[11];
    for (uint32_t i = 0; i < 7; i++) {
        args[i] = acg_arg_buffer(g[i].buf, GUARD);
    }
    args[7] = acg_arg_u32(KB);
    args[8] = acg_arg_u32(KSTEPS + 8);
    args[9] = acg_arg_u32(KVOCAB);
    args[10] = acg_arg_i32(KEOS);
    TC_EXPECT(ERR_OUT_OF_RANGE,
              acg_kernel_launch(t->s, k, &(acg_dims){{1, 1, 1}, {1, 1, 1}}, args, 11));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(t->s, k, &none, args, 11));
    for (uint32_t i = 0; i < 7; i++) {
        TC_OK(acg_buffer_free(g[i].buf));
    }
}

/* ---- generation ----------------------------------------------------------------------------- */

/* What a finished request of a model that keeps logits holds (get_bits). */
static void finished_bits(acg_model *m, uint64_t id, request_bits *b) {
    get_bits(m, id, b);
    assert_int_equal(b->state, ACG_REQUEST_FINISHED);
    assert_true(b->has_logits);
}

static acg_model *loop_model(acg_device *dev, const acg_model_weights *w, uint32_t steps,
                             acg_graph_mode graphs) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 4;
    o.max_step_tokens = 16;
    o.kv_pages = 24;
    o.page_size = 8;
    o.graphs = graphs;
    o.keep_logits = true;
    o.steps_per_launch = steps;
    acg_model *m = NULL;
    TC_OK(acg_model_create(dev, w, &o, &m));
    return m;
}

enum { N_JOBS = 6 };

/* Budgets that end inside launches of 4 and of 16, greedy and sampled rows, and two requests
 * that wait for a seat (max_batch 4) and are admitted between launches. */
static void jobs_make(int32_t prompts[N_JOBS][24], job *jobs) {
    static const uint32_t lens[N_JOBS] = {3, 7, 1, 12, 5, 20};
    static const uint32_t news[N_JOBS] = {21, 6, 1, 17, 33, 9};
    for (uint32_t i = 0; i < N_JOBS; i++) {
        make_prompt(prompts[i], lens[i], 512, 70 + i);
        jobs[i] =
            (job){prompts[i], lens[i], news[i], i % 2 ? 0.8f : 0.0f, i % 3 ? 0.9f : 1.0f, 1000 + i};
    }
}

/* Runs every job at once on m and returns what each request holds; counts the launches and the
 * longest of them (decode steps). */
static void run_jobs(acg_model *m, const job *jobs, request_bits *out, uint32_t *launches,
                     uint32_t *longest) {
    uint64_t ids[N_JOBS];
    for (uint32_t i = 0; i < N_JOBS; i++) {
        ids[i] = submit(m, &jobs[i]);
    }
    *launches = *longest = 0;
    acg_step_report rep;
    for (uint32_t n = 0; step_served(m, n, 10000, &rep); n++) {
        (*launches)++;
        assert_true(rep.steps >= 1);
        assert_true(rep.generated <= rep.rows * rep.steps);
        *longest = rep.steps > *longest ? rep.steps : *longest;
    }
    for (uint32_t i = 0; i < N_JOBS; i++) {
        finished_bits(m, ids[i], &out[i]);
        assert_int_equal(out[i].n_generated, jobs[i].max_new);
        TC_OK(acg_model_release_request(m, ids[i]));
    }
}

static void test_same_bits(void **state) {
    tc_fixture *t = *state;
    acg_model_weights *w = tc_model_preset("tiny");
    int32_t prompts[N_JOBS][24];
    job jobs[N_JOBS];
    jobs_make(prompts, jobs);
    const bool loops = tc_cap()->graph_loops;
    static const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF};
    for (size_t g = 0; g < sizeof modes / sizeof modes[0]; g++) {
        if (modes[g] == ACG_GRAPHS_ON && !tc_cap()->graphs) {
            continue;
        }
        request_bits want[N_JOBS], got[N_JOBS];
        uint32_t base_launches, longest;
        acg_model *one = loop_model(t->dev, w, 1, modes[g]);
        run_jobs(one, jobs, want, &base_launches, &longest);
        assert_int_equal(longest, 1);
        TC_OK(acg_model_destroy(one));
        static const uint32_t depths[] = {4, 16};
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
            uint32_t launches;
            acg_model *m = loop_model(t->dev, w, depths[d], modes[g]);
            run_jobs(m, jobs, got, &launches, &longest);
            for (uint32_t i = 0; i < N_JOBS; i++) {
                if (memcmp(&got[i], &want[i], sizeof got[i]) != 0) {
                    fail_msg("%s, %s, steps_per_launch %u: request %u differs from one step "
                             "per launch",
                             tc_spec(), mode_name(modes[g]), depths[d], i);
                }
            }
            if (loops) {
                assert_int_equal(longest, depths[d] < 33 ? depths[d] : 33);
                assert_true(launches < base_launches);
            } else {
                assert_int_equal(longest, 1); /* no loops here: one step per launch */
                assert_int_equal(launches, base_launches);
            }
            expect_graph_use(m, modes[g]);
            TC_OK(acg_model_destroy(m));
        }
    }
    TC_OK(acg_model_weights_free(w));
}

/* Runs both models to the end, checks that the n requests ids finished alike on both, bit for
 * bit, and destroys them. */
static void finish_alike(acg_model *a, acg_model *b, const uint64_t *ids, uint32_t n) {
    TC_OK(acg_model_run_all(a));
    TC_OK(acg_model_run_all(b));
    for (uint32_t i = 0; i < n; i++) {
        request_bits x, y;
        finished_bits(a, ids[i], &x);
        finished_bits(b, ids[i], &y);
        assert_memory_equal(&x, &y, sizeof x);
    }
    TC_OK(acg_model_destroy(a));
    TC_OK(acg_model_destroy(b));
}

static uint64_t uploads_of(const acg_model *m) {
    acg_model_stats s = ACG_MODEL_STATS_INIT;
    TC_OK(acg_model_get_stats(m, &s));
    return s.uploads;
}

/* One step of m, which must run `steps` decode steps and queue `uploads` copies (UINT32_MAX:
 * at least one). */
static void step_uploading(acg_model *m, uint32_t steps, uint32_t uploads) {
    const uint64_t before = uploads_of(m);
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(m, &rep));
    assert_int_equal(rep.steps, steps);
    const uint64_t queued = uploads_of(m) - before;
    if (uploads == UINT32_MAX) {
        assert_true(queued > 0);
    } else {
        assert_int_equal(queued, uploads);
    }
}

/* A loop launch leaves the next launch of the same rows nothing to upload: the device holds the
 * plan's KV lengths, the tokens and the control as the loop advanced them (the model reads them
 * back and compares). A step of another bucket between two loop launches (a prompt admitted)
 * makes the next one upload again, and the tokens stay the one-step model's. */
static void test_loop_uploads(void **state) {
    tc_fixture *t = *state;
    if (!tc_cap()->graph_loops) {
        tc_skip("%s has no loops in graphs", tc_spec());
    }
    acg_model_weights *w = tc_model_preset("tiny");
    int32_t p0[5], p1[3];
    make_prompt(p0, 5, 512, 93);
    make_prompt(p1, 3, 512, 94);
    const job jobs[2] = {{p0, 5, 30, 0.0f, 1.0f, 1}, {p1, 3, 11, 0.8f, 0.9f, 2}};
    static const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF};
    for (size_t g = 0; g < sizeof modes / sizeof modes[0]; g++) {
        if (modes[g] == ACG_GRAPHS_ON && !tc_cap()->graphs) {
            continue;
        }
        acg_model *m = loop_model(t->dev, w, 4, modes[g]);
        acg_model *one = loop_model(t->dev, w, 1, modes[g]);
        uint64_t ids[2];
        ids[0] = submit(m, &jobs[0]);
        assert_int_equal(submit(one, &jobs[0]), ids[0]);
        step_uploading(m, 1, UINT32_MAX); /* the prompt */
        step_uploading(m, 4, UINT32_MAX); /* the first loop: after a step of another bucket */
        step_uploading(m, 4, 0);
        step_uploading(m, 4, 0);
        ids[1] = submit(m, &jobs[1]);
        assert_int_equal(submit(one, &jobs[1]), ids[1]);
        step_uploading(m, 1, UINT32_MAX); /* a decode row and a prompt */
        step_uploading(m, 4, UINT32_MAX);
        step_uploading(m, 4, 0);
        finish_alike(m, one, ids, 2);

        /* Four rows fill the bucket of 4; the last one's budget ends inside the second loop.
         * The next launch, three rows in the same bucket, finds the stopped row's token, KV
         * length and control where its padding goes: it uploads them. */
        m = loop_model(t->dev, w, 4, modes[g]);
        one = loop_model(t->dev, w, 1, modes[g]);
        int32_t p4[4][2];
        uint64_t four[4];
        for (uint32_t i = 0; i < 4; i++) {
            make_prompt(p4[i], 2, 512, 95 + i);
            const job j = {p4[i], 2, i == 3 ? 6 : 20, 0.0f, 1.0f, 3 + i};
            four[i] = submit(m, &j);
            assert_int_equal(submit(one, &j), four[i]);
        }
        step_uploading(m, 1, UINT32_MAX); /* the prompts */
        step_uploading(m, 4, UINT32_MAX);
        step_uploading(m, 4, 0); /* the last row's sixth token ends it at step 0 */
        step_uploading(m, 4, 3); /* the plan, the tokens (their padding) and the control */
        step_uploading(m, 4, 0);
        finish_alike(m, one, four, 4);
    }
    TC_OK(acg_model_weights_free(w));
}

/* A launch of many steps whose sampled token is refused changes nothing; its retry, and every
 * launch after it, is what a model that never failed does. */
static void test_refused_launch(void **state) {
    tc_fixture *t = *state;
    if (!tc_cap()->graph_loops) {
        tc_skip("%s has no loops in graphs", tc_spec());
    }
    acg_model_weights *w = tc_model_preset("tiny");
    acg_model *bad = loop_model(t->dev, w, 8, ACG_GRAPHS_ON);
    acg_model *good = loop_model(t->dev, w, 8, ACG_GRAPHS_ON);
    int32_t p0[4], p1[6];
    make_prompt(p0, 4, 512, 91);
    make_prompt(p1, 6, 512, 92);
    const job jobs[2] = {{p0, 4, 12, 0.0f, 1.0f, 1}, {p1, 6, 12, 0.0f, 1.0f, 2}};
    uint64_t ids[2];
    for (uint32_t i = 0; i < 2; i++) {
        ids[i] = submit(bad, &jobs[i]);
        assert_int_equal(submit(good, &jobs[i]), ids[i]);
    }
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(bad, &rep)); /* the prompts, one token each */
    TC_OK(acg_model_step(good, &rep));
    assert_int_equal(rep.steps, 1);
    acg__model_fail_sample(1);
    TC_EXPECT(ERR_INTERNAL, acg_model_step(bad, &rep));
    TC_LAST_ERROR_HAS("row 1 sampled token 512 at step 0 of the launch");
    acg__model_fail_sample(UINT32_MAX);
    TC_OK(acg_model_run_all(bad));
    TC_OK(acg_model_run_all(good));
    for (uint32_t i = 0; i < 2; i++) {
        request_bits x, y;
        finished_bits(bad, ids[i], &x);
        finished_bits(good, ids[i], &y);
        assert_memory_equal(&x, &y, sizeof x);
    }
    TC_OK(acg_model_destroy(bad));
    TC_OK(acg_model_destroy(good));
    TC_OK(acg_model_weights_free(w));
}

static void test_options(void **state) {
    tc_fixture *t = *state;
    acg_model_weights *w = tc_model_preset("tiny");
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 2;
    o.steps_per_launch = 1025;
    acg_model *m = NULL;
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_model_create(t->dev, w, &o, &m),
                  "steps_per_launch 1025 is outside 1..1024");
    /* 0 means one step, as 1 does; 1024 is taken. */
    o.steps_per_launch = 0;
    TC_OK(acg_model_create(t->dev, w, &o, &m));
    assert_int_equal(acg_runner_get_bucket_count(acg_model_get_runner(m)), 3); /* 1, 2; mixed */
    TC_OK(acg_model_destroy(m));
    o.steps_per_launch = 1024;
    o.graphs = ACG_GRAPHS_OFF;
    tc_log_capture_begin(ACG_LOG_INFO);
    TC_OK(acg_model_create(t->dev, w, &o, &m));
    tc_log_capture_end();
    /* Loop buckets beside every decode bucket where loops exist; none elsewhere, with the reason
     * in the log. */
    const bool loops = tc_cap()->graph_loops;
    assert_int_equal(acg_runner_get_bucket_count(acg_model_get_runner(m)), loops ? 5 : 3);
    assert_true(loops || tc_log_find("decodes one step per launch", NULL));
    TC_OK(acg_model_destroy(m));
    TC_OK(acg_model_weights_free(w));
}

static const struct CMUnitTest tests[] = {
    TC_FIXTURE_CASE(test_decode_advance), TC_FIXTURE_CASE(test_same_bits),
    TC_FIXTURE_CASE(test_refused_launch), TC_FIXTURE_CASE(test_loop_uploads),
    TC_FIXTURE_CASE(test_options),
};
TC_MAIN("test_model_loop", tests)
