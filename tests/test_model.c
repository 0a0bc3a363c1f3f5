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
 *
 * The serving engine at its edges (KV exhaustion, a lost device, the API's errors, allocation
 * failures, struct versions) is test_model_serving.c's; both drive the model through
 * model_fixture.h.
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

#include "llama2_ref.h"
#include "model_fixture.h"

/* ==== the reference: llama2.c's forward(), one token at a time (llama2_ref.h) ============= */

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
        int second;
        token = tc_best_two(logits, r->c.vocab_size, &second);
        gaps[n] = logits[token] - logits[second]; /* by how much the greedy token won */
        out[n++] = token;
    }
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
    acg_model_weights *w = tc_model_preset("tiny");
    /* Chunked prefill (step budget 16), and a request that reaches seq_len (256) exactly. */
    const ref_job rj[] = {{1, 24}, {5, 24}, {13, 20}, {40, 16}, {200, 56}};
    against_reference("tiny", w, rj, 5, 4, 16, 16);
}

static void test_reference_small(void **state) {
    (void)state;
    acg_model_weights *w = tc_model_preset("small");
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
    static const acg_model_config c = {.size = sizeof c,
                                       .dim = 40,
                                       .hidden_dim = 102,
                                       .n_layers = 3,
                                       .n_heads = 5,
                                       .n_kv_heads = 1,
                                       .vocab_size = 301,
                                       .seq_len = 64,
                                       .shared_classifier = true};
    assert_int_equal(tc_tmpdir_create("acg-test-model"), 0);
    char path[512];
    snprintf(path, sizeof path, "%s", tc_tmp_path("model.bin"));
    write_checkpoint(path, &c, 99);
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_load(path, &w));
    tc_expect_model_config(acg_model_weights_get_config(w), &c);
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
    acg_model_weights *w = tc_model_preset("tiny");
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
    acg_model_weights *w = tc_model_preset("small");
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
    acg_step_report rep;
    for (uint32_t steps = 0; step_served(m, steps, 1000, &rep); steps++) {
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
    acg_model_weights *w = tc_model_preset("small");
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
    acg_model_weights *w = tc_model_preset("tiny");
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
        busy = 0;
        for (int mi = 0; mi < 3; mi++) {
            acg_step_report rep;
            busy += step_served(models[mi], steps, 1000, &rep);
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

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reference_tiny),
    cmocka_unit_test(test_reference_small),
    cmocka_unit_test(test_reference_checkpoint),
    cmocka_unit_test(test_batch_invariance),
    cmocka_unit_test(test_batch_positions_and_devices_small),
    cmocka_unit_test(test_logits_across_backends_small),
    cmocka_unit_test(test_sampling),
};
TC_MAIN("test_model", tests)
