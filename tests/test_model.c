/*
 * test_model.c — generation, end to end: the model on the device under test against a plain-C
 * reference that reads like llama2.c's run.c (one sequence, a contiguous KV cache, one token at
 * a time), and the serving engine against itself.
 *
 *   - Greedy generation equals the reference token for token (the "tiny" and "small" presets
 *     and a llama2.c checkpoint written and loaded back), replayed and eager, on every backend:
 *     the reference sums and exponentiates in the one arithmetic (model/arith.h) that every
 *     backend's kernels follow, so there are no near-ties to allow for.
 *   - Batch invariance: each of 16 requests (prompts of 1..40 tokens, chunked prefill) produces
 *     exactly the tokens it produces alone, greedy and sampled, with graphs on and off.
 *   - Sampling: replayed equals eager; the draw counters count 0, 1, 2, ...; seeds matter.
 *   - KV page exhaustion: requests wait for pages, in order, and none corrupts another; a
 *     request that can never fit is refused at submission.
 *   - The error paths of the serving API, and an allocation-failure sweep of a model's life.
 *
 * The cases on the small preset end in "_small": under ThreadSanitizer only test_model.cpu runs
 * them (tests/CMakeLists.txt), as they take minutes there and add no concurrency the tiny
 * preset's cases do not already exercise on the other backends.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h>

#include "common.h"
#include "core/acg-impl.h" /* acg__device_inject_fault */
#include "llama2_ref.h"

/* Most tokens a test request generates, and its longest prompt. */
#define MAX_NEW 64
#define MAX_PROMPT 256

/* ==== the reference: llama2.c's forward(), one token at a time (llama2_ref.h) ============= */

/* The first largest logit, and by how much it exceeds the runner-up. */
static int argmax_gap(const float *v, int n, float *gap) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (v[i] > v[best]) {
            best = i;
        }
    }
    float second = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (i != best && v[i] > second) {
            second = v[i];
        }
    }
    *gap = v[best] - second;
    return best;
}

/* Reads the prompt token by token, then generates n_new tokens greedily. */
static void ref_generate(tc_ref_model *r, const int32_t *prompt, uint32_t n_prompt, uint32_t n_new,
                         int32_t *out, float *gaps) {
    int token = prompt[0];
    uint32_t n = 0;
    for (int pos = 0; n < n_new; pos++) {
        assert_true(pos < r->c.seq_len);
        const float *logits = tc_ref_forward(r, token, pos);
        if ((uint32_t)pos + 1 < n_prompt) {
            token = prompt[pos + 1];
            continue;
        }
        token = argmax_gap(logits, r->c.vocab_size, &gaps[n]);
        out[n++] = token;
    }
}

/* ==== driving the model ===================================================================== */

typedef struct job {
    const int32_t *prompt;
    uint32_t prompt_len, max_new;
    float temperature, top_p;
    uint64_t seed;
} job;

/* What a request generated. */
typedef struct outcome {
    uint32_t n;
    int32_t tokens[MAX_NEW];
    uint32_t counters[MAX_NEW];
} outcome;

/* A prompt of n ids: <s>, then ids drawn from seed among the ordinary tokens. */
static void make_prompt(int32_t *dst, uint32_t n, int32_t vocab, uint64_t seed) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 12345;
    dst[0] = ACG_TOKEN_BOS;
    for (uint32_t i = 1; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        dst[i] = 3 + (int32_t)((z >> 33) % (uint64_t)(vocab - 3));
    }
}

/* A model of the weights on dev with these options; model_new's pages hold 16 tokens and it
 * has one slot. */
static acg_model *model_new_with(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
                                 uint32_t max_step_tokens, uint32_t kv_pages, acg_graph_mode graphs,
                                 uint32_t page_size, uint32_t n_slots) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = max_batch;
    o.max_step_tokens = max_step_tokens;
    o.kv_pages = kv_pages;
    o.graphs = graphs;
    o.page_size = page_size;
    o.n_slots = n_slots;
    acg_model *m = NULL;
    TC_OK(acg_model_create(dev, w, &o, &m));
    assert_non_null(m);
    return m;
}

static acg_model *model_new(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
                            uint32_t max_step_tokens, uint32_t kv_pages, acg_graph_mode graphs) {
    return model_new_with(dev, w, max_batch, max_step_tokens, kv_pages, graphs, 16, 1);
}

static uint64_t submit(acg_model *m, const job *j) {
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = j->prompt;
    q.prompt_len = j->prompt_len;
    q.max_new_tokens = j->max_new;
    q.temperature = j->temperature;
    q.top_p = j->top_p;
    q.seed = j->seed;
    uint64_t id = 0;
    TC_OK(acg_model_submit(m, &q, &id));
    return id;
}

/* Checks that the request finished with its prompt and max_new tokens, copies them and the
 * draw counters out, and releases it. */
static void collect(acg_model *m, uint64_t id, const job *j, outcome *o) {
    acg_request_status s = ACG_REQUEST_STATUS_INIT;
    TC_OK(acg_model_get_request(m, id, &s));
    assert_int_equal(s.state, ACG_REQUEST_FINISHED);
    assert_int_equal(s.n_generated, j->max_new);
    assert_int_equal(s.n_tokens, j->prompt_len + j->max_new);
    assert_memory_equal(s.tokens, j->prompt, (size_t)j->prompt_len * sizeof(int32_t));
    assert_null(s.logits); /* the model does not keep them */
    assert_true(j->max_new <= MAX_NEW);
    o->n = s.n_generated;
    memcpy(o->tokens, s.tokens + j->prompt_len, (size_t)o->n * sizeof(int32_t));
    memcpy(o->counters, s.draw_counters, (size_t)o->n * sizeof(uint32_t));
    TC_OK(acg_model_release_request(m, id));
    TC_EXPECT(ERR_NOT_FOUND, acg_model_get_request(m, id, &s));
}

/* Each job in turn, alone in the model. */
static void run_alone(acg_model *m, const job *jobs, uint32_t n, outcome *out) {
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = submit(m, &jobs[i]);
        TC_OK(acg_model_run_all(m));
        collect(m, id, &jobs[i], &out[i]);
    }
}

/* Every job at once. The steps respect the model's budgets; the prompt tokens are read once. */
static void run_together(acg_model *m, const job *jobs, uint32_t n, uint32_t max_batch,
                         uint32_t max_step_tokens, outcome *out) {
    uint64_t ids[64];
    assert_true(n <= 64);
    acg_model_stats before = ACG_MODEL_STATS_INIT, after = ACG_MODEL_STATS_INIT;
    TC_OK(acg_model_get_stats(m, &before));
    uint64_t prompt_tokens = 0, new_tokens = 0;
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = submit(m, &jobs[i]);
        prompt_tokens += jobs[i].prompt_len;
        new_tokens += jobs[i].max_new;
    }
    uint32_t widest = 0, most_rows = 0;
    for (uint32_t steps = 0;; steps++) {
        assert_true(steps < 10000);
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        TC_OK(acg_model_step(m, &rep));
        if (rep.rows == 0) {
            break;
        }
        assert_true(rep.rows <= max_batch);
        assert_true(rep.tokens <= max_step_tokens);
        assert_true(rep.generated <= rep.rows);
        /* The phases are each a part of the step, and together the whole of it. */
        const double phases[] = {rep.admit_ms,  rep.plan_ms, rep.upload_ms,
                                 rep.launch_ms, rep.wait_ms, rep.retire_ms};
        double total = 0.0;
        for (size_t p = 0; p < sizeof phases / sizeof phases[0]; p++) {
            assert_true(phases[p] >= 0.0 && phases[p] <= rep.ms);
            total += phases[p];
        }
        assert_true(fabs(total - rep.ms) <= 1e-9 + 1e-9 * rep.ms);
        assert_true(rep.submit_ms <= rep.ms);
        widest = rep.tokens > widest ? rep.tokens : widest;
        most_rows = rep.rows > most_rows ? rep.rows : most_rows;
    }
    TC_OK(acg_model_get_stats(m, &after));
    assert_int_equal(after.prompt_tokens - before.prompt_tokens, prompt_tokens);
    assert_int_equal(after.generated_tokens - before.generated_tokens, new_tokens);
    if (prompt_tokens > max_step_tokens) {
        assert_int_equal(widest, max_step_tokens); /* the budget filled: prefill was chunked */
    }
    if (n > 1 && max_batch > 1) {
        assert_true(most_rows > 1); /* requests shared steps */
    }
    for (uint32_t i = 0; i < n; i++) {
        collect(m, ids[i], &jobs[i], &out[i]);
    }
}

/* Asserts that two runs of the same request generated the same tokens and draw counters. */
static void expect_same(const char *what, uint32_t req, const outcome *a, const outcome *b) {
    assert_int_equal(a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->tokens[i] != b->tokens[i] || a->counters[i] != b->counters[i]) {
            print_error("%s: request %u differs at generated token %u: %d (counter %u) vs %d "
                        "(counter %u)\n",
                        what, req, i, a->tokens[i], a->counters[i], b->tokens[i], b->counters[i]);
            fail();
        }
    }
}

/* Replayed steps on a graph device with graphs on; none otherwise. */
static void expect_graph_use(const acg_model *m, acg_graph_mode mode) {
    acg_model_stats s = ACG_MODEL_STATS_INIT;
    TC_OK(acg_model_get_stats(m, &s));
    assert_true(s.steps > 0);
    if (mode != ACG_GRAPHS_OFF && tc_cap()->graphs) {
        assert_true(s.buckets_captured > 0);
        assert_int_equal(s.buckets_dropped, 0);
        assert_true(s.graphed_steps > 0);
    } else {
        assert_int_equal(s.buckets_captured, 0);
        assert_int_equal(s.graphed_steps, 0);
    }
}

static const char *mode_name(acg_graph_mode mode) {
    return mode == ACG_GRAPHS_OFF ? "graphs off" : "graphs on";
}

static acg_model_weights *preset(const char *name) {
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load(name, 7, &w));
    return w;
}

/* ==== 1. greedy generation against the reference ============================================ */

typedef struct ref_job {
    uint32_t prompt_len, max_new;
} ref_job;

/* The reference's tokens, then the model's with graphs on and off (every prompt batched with
 * the others), equal token for token. The weights are freed once both models exist (they hold
 * their own copy). */
static void against_reference(const char *name, acg_model_weights *w, const ref_job *rj, uint32_t n,
                              uint32_t max_batch, uint32_t max_step_tokens, uint32_t page_size) {
    const acg_model_config *c = acg_model_weights_get_config(w);
    static int32_t prompts[8][MAX_PROMPT];
    int32_t want[8][MAX_NEW];
    float gaps[8][MAX_NEW];
    job jobs[8];
    assert_true(n <= 8);
    tc_ref_model r;
    tc_ref_model_init(&r, w);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(rj[i].prompt_len <= MAX_PROMPT && rj[i].max_new <= MAX_NEW);
        make_prompt(prompts[i], rj[i].prompt_len, c->vocab_size, 100 + i);
        jobs[i] = (job){prompts[i], rj[i].prompt_len, rj[i].max_new, 0.0f, 1.0f, i};
        ref_generate(&r, prompts[i], rj[i].prompt_len, rj[i].max_new, want[i], gaps[i]);
    }
    tc_ref_model_free(&r);

    acg_device *dev = tc_open();
    const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF};
    acg_model *models[2];
    for (int mi = 0; mi < 2; mi++) {
        models[mi] = model_new_with(dev, w, max_batch, max_step_tokens, 0, modes[mi], page_size, 1);
    }
    TC_OK(acg_model_weights_free(w));
    for (int mi = 0; mi < 2; mi++) {
        acg_model *m = models[mi];
        outcome got[8];
        run_together(m, jobs, n, max_batch, max_step_tokens, got);
        expect_graph_use(m, modes[mi]);
        TC_OK(acg_model_destroy(m));
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t t = 0; t < rj[i].max_new; t++) {
                assert_int_equal(got[i].counters[t], UINT32_MAX);
                if (got[i].tokens[t] == want[i][t]) {
                    continue;
                }
                fail_msg("%s, %s: prompt %u (%u tokens) generated %d where the reference has %d "
                         "at token %u (reference top-2 gap %g)",
                         name, mode_name(modes[mi]), i, rj[i].prompt_len, got[i].tokens[t],
                         want[i][t], t, (double)gaps[i][t]);
            }
        }
    }
    tc_close(dev);
}

static void test_reference_tiny(void **state) {
    (void)state;
    acg_model_weights *w = preset("tiny");
    /* Chunked prefill (step budget 16), and a request that reaches seq_len (256) exactly. */
    const ref_job rj[] = {{1, 24}, {5, 24}, {13, 20}, {40, 16}, {200, 56}};
    against_reference("tiny", w, rj, 5, 4, 16, 16);
}

static void test_reference_small(void **state) {
    (void)state;
    acg_model_weights *w = preset("small");
    /* one page of 300 tokens holds a whole sequence (seq_len 256) */
    const ref_job rj[] = {{6, 8}, {5, 8}};
    against_reference("small", w, rj, 2, 2, 8, 300);
}

/* Uniform in [-1, 1), from an LCG. */
static float uniform(uint64_t *z) {
    *z = *z * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(*z >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

/* n floats: offset + scale * uniform. */
static void write_floats(FILE *f, size_t n, float offset, float scale, uint64_t *z) {
    for (size_t i = 0; i < n; i++) {
        float v = offset + scale * uniform(z);
        assert_int_equal(fwrite(&v, sizeof v, 1, f), 1);
    }
}

/* Writes a llama2.c checkpoint by hand: the 7-int32 header (vocab_size positive: the
 * classifier is the embedding table), then every tensor in run.c's order, the two legacy RoPE
 * tables holding NaN (a reader must skip them). Unlike acg_model_weights_create_random's
 * weights, the embedding is small, the norms are not all 1 and the blocks write loudly into the
 * residual stream, so a tied classifier does not keep repeating the last token. */
static void write_checkpoint(const char *path, const acg_model_config *c, uint64_t seed) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const int32_t header[7] = {c->dim,        c->hidden_dim, c->n_layers, c->n_heads,
                               c->n_kv_heads, c->vocab_size, c->seq_len};
    assert_int_equal(fwrite(header, sizeof header, 1, f), 1);
    const size_t L = (size_t)c->n_layers, dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim,
                 head_size = dim / (size_t)c->n_heads, kv_dim = (size_t)c->n_kv_heads * head_size;
    const float in_dim = 3.0f / sqrtf((float)dim), in_hidden = 3.0f / sqrtf((float)hidden);
    uint64_t z = seed;
    write_floats(f, (size_t)c->vocab_size * dim, 0.0f, 0.25f, &z);          /* token_embedding */
    write_floats(f, L * dim, 1.0f, 0.5f, &z);                               /* rms_att */
    write_floats(f, L * dim * dim, 0.0f, in_dim, &z);                       /* wq */
    write_floats(f, L * kv_dim * dim, 0.0f, in_dim, &z);                    /* wk */
    write_floats(f, L * kv_dim * dim, 0.0f, in_dim, &z);                    /* wv */
    write_floats(f, L * dim * dim, 0.0f, in_dim, &z);                       /* wo */
    write_floats(f, L * dim, 1.0f, 0.5f, &z);                               /* rms_ffn */
    write_floats(f, L * hidden * dim, 0.0f, in_dim, &z);                    /* w1 */
    write_floats(f, L * dim * hidden, 0.0f, in_hidden, &z);                 /* w2 */
    write_floats(f, L * hidden * dim, 0.0f, in_dim, &z);                    /* w3 */
    write_floats(f, dim, 1.0f, 0.5f, &z);                                   /* rms_final */
    write_floats(f, 2 * (size_t)c->seq_len * head_size / 2, NAN, 0.0f, &z); /* freq_cis */
    assert_int_equal(fclose(f), 0);
}

/* A llama2.c checkpoint written by hand, with a tied classifier, grouped-query attention (5
 * heads sharing 1 KV head) and widths that are not multiples of 4. */
static void test_reference_checkpoint(void **state) {
    (void)state;
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.dim = 40;
    c.hidden_dim = 102;
    c.n_layers = 3;
    c.n_heads = 5;
    c.n_kv_heads = 1;
    c.vocab_size = 301;
    c.seq_len = 64;
    c.shared_classifier = true;
    assert_int_equal(tc_tmpdir_create("acg-test-model"), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", tc_tmp_path("model.bin"));
    write_checkpoint(path, &c, 99);
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_load(path, &w));
    const acg_model_config *lc = acg_model_weights_get_config(w);
    assert_int_equal(lc->dim, 40);
    assert_int_equal(lc->hidden_dim, 102);
    assert_int_equal(lc->n_layers, 3);
    assert_int_equal(lc->n_heads, 5);
    assert_int_equal(lc->n_kv_heads, 1);
    assert_int_equal(lc->vocab_size, 301);
    assert_int_equal(lc->seq_len, 64);
    assert_true(lc->shared_classifier);
    assert_ptr_equal(acg_model_weights_get_tensors(w)->classifier,
                     acg_model_weights_get_tensors(w)->token_embedding);
    /* 3 + 61 tokens reach seq_len exactly; pages of 5 tokens, steps of 7. */
    const ref_job rj[] = {{3, 61}, {9, 12}, {30, 34}};
    against_reference("checkpoint", w, rj, 3, 2, 7, 5); /* unmaps the file */
    assert_int_equal(tc_tmpdir_remove(), 0);
}

/* ==== 2. batch invariance ==================================================================== */

#define N_BATCH 16

static void test_batch_invariance(void **state) {
    (void)state;
    static const uint32_t lens[N_BATCH] = {1,  40, 3,  33, 7, 25, 2,  38,
                                           12, 5,  31, 17, 9, 36, 20, 14};
    static const uint32_t news[N_BATCH] = {12, 5, 9, 16, 3, 11, 7, 14, 6, 10, 4, 15, 8, 13, 2, 1};
    acg_model_weights *w = preset("tiny");
    static int32_t prompts[N_BATCH][40];
    job greedy[N_BATCH], sampled[N_BATCH];
    for (uint32_t i = 0; i < N_BATCH; i++) {
        make_prompt(prompts[i], lens[i], 512, 200 + i);
        greedy[i] = (job){prompts[i], lens[i], news[i], 0.0f, 1.0f, 0};
        sampled[i] = (job){prompts[i], lens[i], news[i], 0.8f, 0.9f, 1000 + i};
    }
    acg_device *dev = tc_open();
    static outcome alone[2][2][N_BATCH], together[2][2][N_BATCH]; /* [mode][sampled][request] */
    const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF};
    for (int mi = 0; mi < 2; mi++) {
        acg_model *m = model_new(dev, w, 16, 32, 0, modes[mi]);
        for (int s = 0; s < 2; s++) {
            const job *jobs = s ? sampled : greedy;
            run_alone(m, jobs, N_BATCH, alone[mi][s]);
            run_together(m, jobs, N_BATCH, 16, 32, together[mi][s]);
            for (uint32_t i = 0; i < N_BATCH; i++) {
                char what[64];
                snprintf(what, sizeof what, "%s, %s, batched vs alone", mode_name(modes[mi]),
                         s ? "sampled" : "greedy");
                expect_same(what, i, &together[mi][s][i], &alone[mi][s][i]);
                for (uint32_t t = 0; t < news[i]; t++) {
                    assert_int_equal(together[mi][s][i].counters[t], s ? t : UINT32_MAX);
                }
            }
        }
        uint32_t resampled = 0; /* requests whose sampled tokens are not the greedy ones */
        for (uint32_t i = 0; i < N_BATCH; i++) {
            resampled += memcmp(together[mi][0][i].tokens, together[mi][1][i].tokens,
                                news[i] * sizeof(int32_t)) != 0;
        }
        assert_true(resampled > N_BATCH / 2);
        expect_graph_use(m, modes[mi]);
        TC_OK(acg_model_destroy(m));
    }
    for (int s = 0; s < 2; s++) {
        for (uint32_t i = 0; i < N_BATCH; i++) {
            expect_same(s ? "sampled, replayed vs eager" : "greedy, replayed vs eager", i,
                        &alone[0][s][i], &alone[1][s][i]);
        }
    }
    tc_close(dev);
    TC_OK(acg_model_weights_free(w));
}

/* A probe request generates the same tokens, draw for draw, alone and at every position of a
 * batch of 7, on the device under test and on the cpu oracle, and on the cpu backend with 1, 2
 * and 3 threads splitting its kernels: nothing around a request or about the machine changes
 * its arithmetic. The small preset, whose matmuls and classifier are large enough to be split. */
#define N_POS 7

static void probe_runs(acg_device *dev, const acg_model_weights *w, const job *probe,
                       const job *fillers, outcome *alone, outcome *at /* [N_POS] */) {
    acg_model *m = model_new(dev, w, N_POS, 32, 0, ACG_GRAPHS_ON);
    run_alone(m, probe, 1, alone);
    for (uint32_t pos = 0; pos < N_POS; pos++) {
        job jobs[N_POS];
        outcome got[N_POS];
        for (uint32_t i = 0, f = 0; i < N_POS; i++) {
            jobs[i] = i == pos ? *probe : fillers[f++];
        }
        run_together(m, jobs, N_POS, N_POS, 32, got);
        at[pos] = got[pos];
    }
    TC_OK(acg_model_destroy(m));
}

static void test_batch_positions_and_devices_small(void **state) {
    (void)state;
    acg_model_weights *w = preset("small");
    int32_t vocab = acg_model_weights_get_config(w)->vocab_size;
    static int32_t prompts[N_POS][5 + 2 * N_POS];
    job fillers[N_POS - 1];
    for (uint32_t i = 0; i < N_POS; i++) {
        make_prompt(prompts[i], 5 + 2 * i, vocab, 300 + i);
    }
    const job probe = {prompts[0], 5, 12, 0.9f, 0.95f, 4242};
    for (uint32_t i = 0; i + 1 < N_POS; i++) {
        fillers[i] =
            (job){prompts[i + 1], 5 + 2 * (i + 1), 4 + 2 * i, i % 2 ? 0.0f : 1.1f, 0.8f, 77 + i};
    }
    outcome want, alone, at[N_POS];
    acg_device *oracle = tc_open_cpu();
    probe_runs(oracle, w, &probe, fillers, &want, at);
    for (uint32_t pos = 0; pos < N_POS; pos++) {
        expect_same("cpu oracle, in a batch vs alone", pos, &at[pos], &want);
    }
    TC_OK(acg_device_close(oracle));
    acg_device *dev = tc_open();
    probe_runs(dev, w, &probe, fillers, &alone, at);
    expect_same("device under test vs the cpu oracle", 0, &alone, &want);
    for (uint32_t pos = 0; pos < N_POS; pos++) {
        expect_same("device under test, in a batch vs alone", pos, &at[pos], &want);
    }
    tc_close(dev);
    if (tc_backend_is("cpu")) {
        static const char *const specs[] = {"cpu:0?threads=1", "cpu:0?threads=2",
                                            "cpu:0?threads=3"};
        for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
            acg_device *d = NULL;
            TC_OK(acg_device_open(specs[i], &d));
            probe_runs(d, w, &probe, fillers, &alone, at);
            expect_same(specs[i], 0, &alone, &want);
            for (uint32_t pos = 0; pos < N_POS; pos++) {
                expect_same(specs[i], pos, &at[pos], &want);
            }
            TC_OK(acg_device_close(d));
        }
    }
    TC_OK(acg_model_weights_free(w));
}

/* With keep_logits, the logits each generated token was sampled from reach the host. On the
 * device under test they equal the cpu oracle's byte for byte, replayed and eager, alone and
 * at each position of a batch; a greedy token is the first index of their maximum; and a
 * request shows none before its first token or when the model does not keep them. */
#define LOGIT_TOKENS 6
#define LOGIT_JOBS 3

/* Runs jobs together on a fresh model; out gets the logits of each of jobs[probe]'s tokens
 * (LOGIT_TOKENS, vocab). */
static void logits_run(acg_device *dev, const acg_model_weights *w, acg_graph_mode graphs,
                       const job *jobs, uint32_t n, uint32_t probe, float *out) {
    const size_t vocab = (size_t)acg_model_weights_get_config(w)->vocab_size;
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = LOGIT_JOBS;
    o.max_step_tokens = 32;
    o.graphs = graphs;
    o.keep_logits = true;
    acg_model *m = NULL;
    TC_OK(acg_model_create(dev, w, &o, &m));
    uint64_t ids[LOGIT_JOBS];
    uint32_t seen[LOGIT_JOBS] = {0};
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = submit(m, &jobs[i]);
        acg_request_status s = ACG_REQUEST_STATUS_INIT;
        TC_OK(acg_model_get_request(m, ids[i], &s));
        assert_null(s.logits); /* nothing generated yet */
    }
    for (uint32_t steps = 0;; steps++) {
        assert_true(steps < 1000);
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        TC_OK(acg_model_step(m, &rep));
        if (rep.rows == 0) {
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            acg_request_status s = ACG_REQUEST_STATUS_INIT;
            TC_OK(acg_model_get_request(m, ids[i], &s));
            if (s.n_generated == seen[i]) {
                continue;
            }
            assert_int_equal(s.n_generated, seen[i] + 1);
            assert_non_null(s.logits);
            seen[i] = s.n_generated;
            int32_t token = s.tokens[s.n_tokens - 1];
            if (jobs[i].temperature == 0.0f) {
                size_t best = 0;
                for (size_t v = 1; v < vocab; v++) {
                    best = s.logits[v] > s.logits[best] ? v : best;
                }
                assert_int_equal(token, (int32_t)best);
            }
            if (i == probe) {
                memcpy(out + (size_t)(s.n_generated - 1) * vocab, s.logits, vocab * sizeof(float));
            }
        }
    }
    assert_int_equal(seen[probe], LOGIT_TOKENS);
    TC_OK(acg_model_destroy(m));
}

static void expect_same_logits(const char *what, const float *want, const float *got,
                               size_t vocab) {
    for (uint32_t t = 0; t < LOGIT_TOKENS; t++) {
        const float *a = want + (size_t)t * vocab, *b = got + (size_t)t * vocab;
        if (memcmp(a, b, vocab * sizeof(float)) != 0) {
            size_t v = 0;
            while (memcmp(&a[v], &b[v], sizeof(float)) == 0) {
                v++;
            }
            print_error("%s: token %u's logits differ first at %zu: %a vs %a\n", what, t, v,
                        (double)a[v], (double)b[v]);
            fail();
        }
    }
}

static void test_logits_across_backends_small(void **state) {
    (void)state;
    acg_model_weights *w = preset("small");
    const size_t vocab = (size_t)acg_model_weights_get_config(w)->vocab_size;
    static int32_t prompts[LOGIT_JOBS][9];
    for (uint32_t i = 0; i < LOGIT_JOBS; i++) {
        make_prompt(prompts[i], 5 + 2 * i, (int32_t)vocab, 900 + i);
    }
    const job probe = {prompts[0], 5, LOGIT_TOKENS, 0.9f, 0.95f, 31};
    const job others[LOGIT_JOBS - 1] = {{prompts[1], 7, 9, 0.0f, 1.0f, 0},
                                        {prompts[2], 9, 4, 1.2f, 0.7f, 5}};
    float *want = malloc(LOGIT_TOKENS * vocab * sizeof(float));
    float *got = malloc(LOGIT_TOKENS * vocab * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);

    acg_device *oracle = tc_open_cpu();
    logits_run(oracle, w, ACG_GRAPHS_OFF, &probe, 1, 0, want);
    TC_OK(acg_device_close(oracle));
    acg_device *dev = tc_open();
    const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF};
    for (size_t g = 0; g < sizeof modes / sizeof modes[0]; g++) {
        char what[96];
        logits_run(dev, w, modes[g], &probe, 1, 0, got);
        snprintf(what, sizeof what, "alone, %s, vs the cpu oracle", mode_name(modes[g]));
        expect_same_logits(what, want, got, vocab);
        for (uint32_t pos = 0; pos < LOGIT_JOBS; pos++) {
            job jobs[LOGIT_JOBS];
            for (uint32_t i = 0, o = 0; i < LOGIT_JOBS; i++) {
                jobs[i] = i == pos ? probe : others[o++];
            }
            logits_run(dev, w, modes[g], jobs, LOGIT_JOBS, pos, got);
            snprintf(what, sizeof what, "at position %u of %u, %s, vs the cpu oracle", pos,
                     LOGIT_JOBS, mode_name(modes[g]));
            expect_same_logits(what, want, got, vocab);
        }
    }
    tc_close(dev);
    free(want);
    free(got);
    TC_OK(acg_model_weights_free(w));
}

/* ==== 3. sampling ============================================================================ */

static void test_sampling(void **state) {
    (void)state;
    acg_model_weights *w = preset("tiny");
    int32_t p0[9], p1[23], p2[4];
    make_prompt(p0, 9, 512, 1);
    make_prompt(p1, 23, 512, 2);
    make_prompt(p2, 4, 512, 3);
    /* More requests than rows: seats, and with them sampler states, are reused. Requests 0 and
     * 1 differ only by seed; 0 and 2 are the same request. Request 8's temperature is so small
     * that logit / temperature overflows: it decodes greedily, without draws, as request 7. */
    const job jobs[] = {
        {p0, 9, 24, 1.0f, 1.0f, 1},   {p0, 9, 24, 1.0f, 1.0f, 2}, {p0, 9, 24, 1.0f, 1.0f, 1},
        {p1, 23, 17, 0.8f, 0.9f, 77}, {p2, 4, 20, 0.0f, 1.0f, 5}, {p1, 23, 9, 1.5f, 0.5f, 3},
        {p2, 4, 30, 0.7f, 1.0f, 0},   {p0, 9, 11, 0.0f, 0.3f, 8}, {p0, 9, 11, 1e-38f, 1.0f, 8},
    };
    const uint32_t n = sizeof jobs / sizeof jobs[0];
    acg_device *dev = tc_open();
    /* Replayed with one slot, eager, and replayed with two slots: three models of one device
     * stepped in turn, from weights freed once the models exist. */
    outcome out[3][9];
    const acg_graph_mode modes[] = {ACG_GRAPHS_ON, ACG_GRAPHS_OFF, ACG_GRAPHS_ON};
    acg_model *models[3];
    uint64_t ids[3][9];
    for (int mi = 0; mi < 3; mi++) {
        models[mi] = model_new_with(dev, w, 4, 16, 0, modes[mi], 16, mi == 2 ? 2 : 1);
    }
    TC_OK(acg_model_weights_free(w));
    for (int mi = 0; mi < 3; mi++) {
        for (uint32_t i = 0; i < n; i++) {
            ids[mi][i] = submit(models[mi], &jobs[i]);
        }
    }
    for (uint32_t busy = 3, steps = 0; busy > 0; steps++) {
        assert_true(steps < 1000);
        busy = 0;
        for (int mi = 0; mi < 3; mi++) {
            acg_step_report rep = ACG_STEP_REPORT_INIT;
            TC_OK(acg_model_step(models[mi], &rep));
            busy += rep.rows > 0;
        }
    }
    for (int mi = 0; mi < 3; mi++) {
        for (uint32_t i = 0; i < n; i++) {
            collect(models[mi], ids[mi][i], &jobs[i], &out[mi][i]);
        }
        expect_graph_use(models[mi], modes[mi]);
        TC_OK(acg_model_destroy(models[mi]));
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t t = 0; t < out[mi][i].n; t++) {
                /* each draw a fresh random number: counters 0, 1, 2, ... */
                assert_int_equal(out[mi][i].counters[t],
                                 jobs[i].temperature > 1e-30f ? t : UINT32_MAX);
                assert_true(out[mi][i].tokens[t] >= 0 && out[mi][i].tokens[t] < 512);
            }
        }
        expect_same("same seed, same request", 0, &out[mi][0], &out[mi][2]);
        expect_same("overflowing temperature vs greedy", 8, &out[mi][8], &out[mi][7]);
        assert_int_not_equal(memcmp(out[mi][0].tokens, out[mi][1].tokens, 24 * sizeof(int32_t)), 0);
    }
    for (uint32_t i = 0; i < n; i++) {
        expect_same("replayed vs eager", i, &out[0][i], &out[1][i]);
        expect_same("two slots vs one", i, &out[2][i], &out[0][i]);
    }
    tc_close(dev);
}

/* ==== 4. KV page exhaustion ================================================================== */

static void test_kv_exhaustion(void **state) {
    (void)state;
    acg_model_weights *w = preset("tiny");
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
    for (uint32_t step = 0;; step++) {
        assert_true(step < 1000);
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        TC_OK(acg_model_step(m, &rep));
        if (rep.rows == 0) {
            break;
        }
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
    acg_device *dev = tc_open();
    if (acg__device_inject_fault(dev) == ACG_ERR_UNSUPPORTED) {
        tc_close(dev);
        skip(); /* the backends' own tests provoke their drivers' faults */
    }
    acg_model_weights *w = preset("tiny");
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

static void test_errors(void **state) {
    (void)state;
    acg_model_weights *w = preset("tiny");
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
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("options.size");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("max_batch");
    o.max_batch = 1025;
    o.max_step_tokens = 2048;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("max_batch");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_step_tokens = o.max_batch - 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("max_step_tokens");
    o.max_step_tokens = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.max_step_tokens = 16 * 256 + 1; /* above 16 * seq_len */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("max_step_tokens");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.page_size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("page_size");
    o.page_size = 65537;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("page_size");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.kv_pages = 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
    TC_LAST_ERROR_HAS("kv_pages");
    o = (acg_model_options)ACG_MODEL_OPTIONS_INIT;
    o.n_slots = 3;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_create(dev, w, &o, &m));
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

/* What a request holds between steps, to compare bit for bit. */
typedef struct request_bits {
    acg_request_state state;
    uint32_t n_tokens, n_generated;
    int32_t tokens[MAX_PROMPT + MAX_NEW];
    uint32_t counters[MAX_NEW];
    float logits[512]; /* the tiny preset's vocabulary */
} request_bits;

static void get_bits(acg_model *m, uint64_t id, request_bits *b) {
    acg_request_status s = ACG_REQUEST_STATUS_INIT;
    TC_OK(acg_model_get_request(m, id, &s));
    memset(b, 0, sizeof *b);
    b->state = s.state;
    b->n_tokens = s.n_tokens;
    b->n_generated = s.n_generated;
    assert_true(s.n_tokens <= MAX_PROMPT + MAX_NEW && s.n_generated <= MAX_NEW);
    memcpy(b->tokens, s.tokens, (size_t)s.n_tokens * sizeof *s.tokens);
    memcpy(b->counters, s.draw_counters, (size_t)s.n_generated * sizeof *s.draw_counters);
    if (s.logits != NULL) {
        memcpy(b->logits, s.logits, sizeof b->logits);
    }
}

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
    acg_model_weights *w = preset("tiny");
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
    acg_model_weights *w = preset("tiny");
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
    acg_model_weights *w = preset("tiny");
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

int main(int argc, char **argv) {
    tc_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_tiny),
        cmocka_unit_test(test_reference_small),
        cmocka_unit_test(test_reference_checkpoint),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_batch_positions_and_devices_small),
        cmocka_unit_test(test_logits_across_backends_small),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_kv_exhaustion),
        cmocka_unit_test(test_device_lost),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_refused_step_changes_nothing),
        cmocka_unit_test(test_alloc_fail),
        cmocka_unit_test(test_struct_versions),
    };
    return cmocka_run_group_tests_name(tc_group("test_model"), tests, NULL, NULL);
}
