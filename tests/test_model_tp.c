/*
 * test_model_tp.c — the reference model split over ranks by tensor parallelism (model.h,
 * "Tensor parallelism"), with the ranks forked from the test and joined through
 * tests/fork_comm (no MPI needed):
 *   - greedy tokens with 2 and 3 ranks equal one rank's on the tiny and small presets (3 ranks
 *     leave a rank of tiny, which has 2 KV heads, without any); a token may differ only where
 *     one rank's two best logits nearly tie, which the test says, showing both; until then the
 *     logits stay close to one rank's;
 *   - replayed equals eager bit for bit, tokens and logits, with every number of ranks;
 *   - every rank samples the same tokens from the same logits, bit for bit;
 *   - a comm of one rank is the one-process model, bit for bit;
 *   - a capture that fails on one rank for one bucket: every rank drops that bucket (the others
 *     saying another rank did), serves it eagerly, and no token or logit changes;
 *   - ranks given different options or requests fail with ACG_ERR_COMM, naming the difference;
 *   - bad input, and a device without collectives (ACG_ERR_UNSUPPORTED), refused before
 *     anything is allocated or communicated.
 * Ranks other than 0 are child processes: they check with CHECK (no cmocka), report through
 * their exit status and write their results into a shared mapping, which rank 0 asserts.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "common.h"
#include "fork_comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <acg/model.h>

/* The model's test hook (src/model/model-impl.h, whose includes the tests do not see): while
 * armed, this process's captures of the bucket (batch, tokens) fail; batch 0 disarms it. */
void acg__model_fail_capture(uint32_t batch, uint32_t tokens);

#define N_REQ 3 /* prompts per run */
#define N_NEW 8 /* tokens each generates */
#define MAX_PROMPT 16
#define MAX_BUCKETS 8
#define MAX_BATCH 4
#define MAX_STEP_TOKENS 16
#define TIMEOUT_MS 60000 /* a comm call's limit: a hung rank fails the test, not CTest */

/* One logit is "nearly" the best where it lies within this much of it: a sum of dim or
 * hidden_dim products in another order moves a logit of these presets by far less (the test
 * prints the largest difference it saw), and two random logits are rarely this close. */
#define NEAR_TIE 1e-3f

/* ---- one run: the same requests on a model, and what came of them ---------------------------- */

/* What a run generated, and what its runner did with each bucket; logits follow the struct,
 * (N_REQ, N_NEW, vocab): the logits each generated token was sampled from. */
typedef struct run_out {
    int32_t tokens[N_REQ][N_NEW];
    uint32_t n_buckets;
    acg_bucket_key keys[MAX_BUCKETS];
    acg_bucket_state states[MAX_BUCKETS];
    char reasons[MAX_BUCKETS][256];
    uint32_t replayed[MAX_BUCKETS], eager[MAX_BUCKETS]; /* steps served per bucket */
    int32_t status;                                     /* 0, or the line a check failed at */
    float logits[];
} run_out;

static size_t run_bytes(int32_t vocab) {
    return sizeof(run_out) + (size_t)N_REQ * N_NEW * (size_t)vocab * sizeof(float);
}

/* Where the logits of request req's token t begin in run_out.logits. */
static size_t row_at(int32_t vocab, uint32_t req, uint32_t t) {
    return ((size_t)req * N_NEW + t) * (size_t)vocab;
}

/* Memory every rank sees: n results of run_bytes(vocab) each, made before the fork. */
static void *shared_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

static run_out *rank_out(void *shared, int32_t vocab, int rank) {
    return (run_out *)((char *)shared + (size_t)rank * run_bytes(vocab));
}

/* The prompts: <s>, then ids drawn from seed among the ordinary tokens, of three lengths whose
 * prefill (19 tokens) is chunked by the step budget (16). */
static const uint32_t prompt_len[N_REQ] = {5, 11, 3};

typedef struct prompt_set {
    int32_t ids[N_REQ][MAX_PROMPT];
} prompt_set;

static void make_prompts(prompt_set *p, int32_t vocab) {
    for (uint32_t i = 0; i < N_REQ; i++) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
        p->ids[i][0] = ACG_TOKEN_BOS;
        for (uint32_t k = 1; k < prompt_len[i]; k++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            p->ids[i][k] = 3 + (int32_t)((z >> 33) % (uint64_t)(vocab - 3));
        }
    }
}

static acg_model_options model_options(const acg_comm *comm, acg_graph_mode graphs) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = MAX_BATCH;
    o.max_step_tokens = MAX_STEP_TOKENS;
    o.graphs = graphs;
    o.keep_logits = true;
    o.comm = comm;
    return o;
}

/* Submits prompt i of p, to generate max_new tokens greedily. 0, or the failed line. */
static int submit_prompt(acg_model *m, const prompt_set *p, uint32_t i, uint32_t max_new,
                         uint64_t *id) {
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = p->ids[i];
    q.prompt_len = prompt_len[i];
    q.max_new_tokens = max_new;
    CHECK(acg_model_submit(m, &q, id) == ACG_OK);
    return 0;
}

/* Serves the prompts greedily on a model of w on dev (split over comm's ranks) and fills out:
 * step by step, so that the logits of every generated token are kept. 0, or the failed line. */
static int generate(acg_device *dev, const acg_model_weights *w, const acg_comm *comm,
                    acg_graph_mode graphs, const prompt_set *prompts, run_out *out) {
    const int32_t vocab = acg_model_weights_get_config(w)->vocab_size;
    acg_model_options o = model_options(comm, graphs);
    acg_model *m = NULL;
    CHECK(acg_model_create(dev, w, &o, &m) == ACG_OK);
    acg_runner *runner = acg_model_get_runner(m);
    out->n_buckets = acg_runner_get_bucket_count(runner);
    CHECK(out->n_buckets <= MAX_BUCKETS);
    for (uint32_t b = 0; b < out->n_buckets; b++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        CHECK(acg_runner_get_report(runner, b, &rep) == ACG_OK);
        out->keys[b] = rep.key;
        out->keys[b].label = NULL; /* the runner's string: not for another process */
        out->states[b] = rep.state;
        memcpy(out->reasons[b], rep.reason, sizeof out->reasons[b]);
        out->replayed[b] = out->eager[b] = 0;
    }
    uint64_t ids[N_REQ];
    for (uint32_t i = 0; i < N_REQ; i++) {
        CHECK(submit_prompt(m, prompts, i, N_NEW, &ids[i]) == 0);
    }
    uint32_t seen[N_REQ] = {0};
    for (int steps = 0;; steps++) {
        CHECK(steps < 1000);
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        CHECK(acg_model_step(m, &rep) == ACG_OK);
        if (rep.rows == 0) {
            break;
        }
        CHECK(rep.bucket < out->n_buckets);
        (rep.graphed ? out->replayed : out->eager)[rep.bucket]++;
        for (uint32_t i = 0; i < N_REQ; i++) {
            acg_request_status s = ACG_REQUEST_STATUS_INIT;
            CHECK(acg_model_get_request(m, ids[i], &s) == ACG_OK);
            if (s.n_generated == seen[i]) {
                continue;
            }
            CHECK(s.n_generated == seen[i] + 1 && s.n_generated <= N_NEW && s.logits != NULL);
            out->tokens[i][seen[i]] = s.tokens[s.n_tokens - 1];
            memcpy(out->logits + row_at(vocab, i, seen[i]), s.logits,
                   (size_t)vocab * sizeof(float));
            seen[i]++;
        }
    }
    for (uint32_t i = 0; i < N_REQ; i++) {
        CHECK(seen[i] == N_NEW);
    }
    CHECK(acg_model_destroy(m) == ACG_OK);
    return 0;
}

/* Whether two runs generated the same tokens from the same logits, bit for bit. */
static bool same_bits(const run_out *a, const run_out *b, int32_t vocab) {
    return memcmp(a->tokens, b->tokens, sizeof a->tokens) == 0 &&
           memcmp(a->logits, b->logits, (size_t)N_REQ * N_NEW * (size_t)vocab * sizeof(float)) == 0;
}

/* ---- ranks ------------------------------------------------------------------------------------
 */

/* What every rank of a case is given: the weights and the prompts made for them; for the cases
 * that generate, where their results go and the capture that fails. */
typedef struct tp_case {
    const acg_model_weights *w;
    int32_t vocab;
    prompt_set prompts;
    void *shared;  /* n_ranks results of rank_generate, or NULL */
    int fail_rank; /* the rank whose capture of fail_key fails, or -1 */
    acg_bucket_key fail_key;
} tp_case;

static void case_init(tp_case *c, const acg_model_weights *w) {
    *c = (tp_case){w, acg_model_weights_get_config(w)->vocab_size, {{{0}}}, NULL, -1, {0}};
    make_prompts(&c->prompts, c->vocab);
}

/* A rank's part of a case, on a device of its own: 0, or the line a check failed at. */
typedef int (*rank_fn)(fc_group *fc, int rank, acg_device *dev, const tp_case *c);

/* One rank: the prompts with graphs on (into the shared result) and off, which must agree bit
 * for bit; with a failing capture, a third run whose capture of that bucket fails on one rank,
 * which must give the same bits again. */
static int rank_generate(fc_group *fc, int rank, acg_device *dev, const tp_case *c) {
    run_out *out = rank_out(c->shared, c->vocab, rank);
    run_out *other = calloc(1, run_bytes(c->vocab));
    CHECK(other != NULL);
    int bad = generate(dev, c->w, fc_comm(fc), ACG_GRAPHS_ON, &c->prompts, out);
    if (bad == 0) {
        bad = generate(dev, c->w, fc_comm(fc), ACG_GRAPHS_OFF, &c->prompts, other);
    }
    if (bad == 0 && !same_bits(out, other, c->vocab)) {
        fprintf(stderr, "rank %d: replayed and eager runs differ\n", rank);
        bad = __LINE__;
    }
    if (bad == 0 && c->fail_rank >= 0) {
        if (rank == c->fail_rank) {
            acg__model_fail_capture(c->fail_key.batch, c->fail_key.tokens);
        }
        /* Into the shared result, for rank 0 to see the reports; the clean run is kept here. */
        memcpy(other, out, run_bytes(c->vocab));
        bad = generate(dev, c->w, fc_comm(fc), ACG_GRAPHS_ON, &c->prompts, out);
        acg__model_fail_capture(0, 0);
        if (bad == 0 && !same_bits(out, other, c->vocab)) {
            fprintf(stderr, "rank %d: a dropped bucket changed the tokens or logits\n", rank);
            bad = __LINE__;
        }
    }
    free(other);
    out->status = bad;
    return bad;
}

/* This rank's part of a case: fn on a device it opens. */
static int on_own_device(fc_group *fc, int rank, rank_fn fn, const tp_case *c) {
    acg_device *dev = NULL;
    CHECK(acg_device_open(tc_spec(), &dev) == ACG_OK);
    int bad = fn(fc, rank, dev, c);
    acg_device_close(dev);
    return bad;
}

/* Runs fn on n_ranks ranks forked from the test (whose comm calls give up after timeout_ms),
 * each on a device it opens; rank 0 asserts that every rank passed, naming the line a rank that
 * generated failed at, and that the group's memory segment has no name left. */
static void run_ranks(int n_ranks, unsigned timeout_ms, rank_fn fn, const tp_case *c) {
    fc_group *fc = fc_create(n_ranks, timeout_ms);
    assert_non_null(fc);
    int rank = fc_fork(fc);
    int bad = on_own_device(fc, rank, fn, c);
    if (rank != 0) {
        _exit(bad != 0);
    }
    int children = fc_wait_children(fc);
    bool named = tc_shm_segment_named(fc_pid(fc, 0));
    fc_destroy(fc);
    for (int r = 0; c->shared != NULL && r < n_ranks; r++) {
        if (rank_out(c->shared, c->vocab, r)->status != 0) {
            fail_msg("%d ranks: rank %d failed its check at line %d", n_ranks, r,
                     rank_out(c->shared, c->vocab, r)->status);
        }
    }
    assert_int_equal(bad, 0);
    assert_int_equal(children, 0);
    assert_false(named);
}

/* ---- comparing a split model with one rank ----------------------------------------------------
 */

/* The split run's tokens equal one rank's, request by request, until a near tie of one rank's
 * logits (said, and the rest of that request not compared: its context differs from then on);
 * until then the logits stay within NEAR_TIE / 4 of one rank's. Returns the largest logit
 * difference seen. */
static float expect_same_tokens(const char *preset, int n_ranks, const run_out *one,
                                const run_out *split, int32_t vocab) {
    float widest = 0.0f;
    for (uint32_t i = 0; i < N_REQ; i++) {
        for (uint32_t t = 0; t < N_NEW; t++) {
            const float *want = one->logits + row_at(vocab, i, t);
            const float *got = split->logits + row_at(vocab, i, t);
            int second;
            int best = tc_best_two(want, vocab, &second);
            assert_int_equal(best, one->tokens[i][t]);
            int32_t token = split->tokens[i][t];
            if (token == best) {
                for (int32_t k = 0; k < vocab; k++) {
                    float d = fabsf(want[k] - got[k]);
                    widest = d > widest ? d : widest;
                }
                if (widest > NEAR_TIE / 4) {
                    fail_msg("%s, %d ranks: prompt %u, token %u: a logit moved by %g from one "
                             "rank's",
                             preset, n_ranks, i, t, (double)widest);
                }
                continue;
            }
            float gap = want[best] - want[token];
            print_message("%s, %d ranks: prompt %u, token %u: %d ranks chose %d, one rank %d; one "
                          "rank's logits: %.9g for %d, %.9g for %d (the runner-up is %d), a gap "
                          "of %g\n",
                          preset, n_ranks, i, t, n_ranks, token, best, (double)want[best], best,
                          (double)want[token], token, second, (double)gap);
            if (!(gap <= NEAR_TIE)) {
                fail_msg("%s, %d ranks: prompt %u, token %u differs from one rank's, whose two "
                         "logits are %g apart: no near tie",
                         preset, n_ranks, i, t, (double)gap);
            }
            break;
        }
    }
    return widest;
}

/* A case needs split models to run here: a device with collectives, whose ranks can be forked;
 * else it is skipped. */
static void need_split_models(void) {
    if (!tc_cap()->collectives) {
        tc_skip("no collectives: a split model is refused (test_bad_input checks it)");
    }
    if (!fc_ranks_can_fork("split models")) {
        tc_skip("split models: ranks cannot be forked here");
    }
}

/* Runs fn on n_ranks ranks (run_ranks) with the tiny preset and its prompts. */
static void run_on_tiny(int n_ranks, unsigned timeout_ms, rank_fn fn) {
    acg_model_weights *w = tc_model_preset("tiny");
    tp_case c;
    case_init(&c, w);
    run_ranks(n_ranks, timeout_ms, fn, &c);
    TC_OK(acg_model_weights_free(w));
}

/* ==== 1. tokens, ranks and replay ============================================================ */

/* One rank (no comm, and a comm of one rank: the same bits), replayed and eager alike; then each
 * of the given numbers of ranks (0 ends the list), each rank replayed and eager alike and every
 * rank alike, against one rank. Frees w. */
static void split_against_one(const char *name, acg_model_weights *w, const int *ranks) {
    tp_case c;
    case_init(&c, w);
    const int32_t vocab = c.vocab;
    run_out *one = calloc(1, run_bytes(vocab)), *other = calloc(1, run_bytes(vocab));
    assert_non_null(one);
    assert_non_null(other);

    acg_device *dev = tc_open();
    assert_int_equal(generate(dev, w, NULL, ACG_GRAPHS_ON, &c.prompts, one), 0);
    assert_int_equal(generate(dev, w, NULL, ACG_GRAPHS_OFF, &c.prompts, other), 0);
    assert_true(same_bits(one, other, vocab));
    fc_group *single = fc_create(1, TIMEOUT_MS);
    assert_non_null(single);
    assert_int_equal(generate(dev, w, fc_comm(single), ACG_GRAPHS_ON, &c.prompts, other), 0);
    assert_true(same_bits(one, other, vocab));
    fc_destroy(single);
    tc_close(dev); /* no device may be open across a fork */

    for (; *ranks != 0; ranks++) {
        const int n_ranks = *ranks;
        c.shared = shared_alloc((size_t)n_ranks * run_bytes(vocab));
        run_ranks(n_ranks, TIMEOUT_MS, rank_generate, &c);
        run_out *rank0 = rank_out(c.shared, vocab, 0);
        for (int r = 1; r < n_ranks; r++) {
            if (!same_bits(rank0, rank_out(c.shared, vocab, r), vocab)) {
                fail_msg("%s, %d ranks: rank %d generated other tokens or logits than rank 0", name,
                         n_ranks, r);
            }
        }
        float widest = expect_same_tokens(name, n_ranks, one, rank0, vocab);
        print_message("%s, %d ranks: tokens as one rank's; logits within %g of one rank's\n", name,
                      n_ranks, (double)widest);
        for (uint32_t i = 0; i < N_REQ; i++) {
            print_message("  prompt %u: one rank", i);
            for (uint32_t t = 0; t < N_NEW; t++) {
                print_message(" %d", one->tokens[i][t]);
            }
            print_message(", %d ranks", n_ranks);
            for (uint32_t t = 0; t < N_NEW; t++) {
                print_message(" %d", rank0->tokens[i][t]);
            }
            print_message("\n");
        }
        munmap(c.shared, (size_t)n_ranks * run_bytes(vocab));
    }
    free(one);
    free(other);
    TC_OK(acg_model_weights_free(w));
}

static const int two_and_three[] = {2, 3, 0};

static void test_tiny(void **state) {
    (void)state;
    need_split_models();
    split_against_one("tiny", tc_model_preset("tiny"), two_and_three);
}

static void test_small(void **state) {
    (void)state;
    need_split_models();
    split_against_one("small", tc_model_preset("small"), two_and_three);
}

/* Random weights of config c, of seed, whose classifier is the token embedding (the presets'
 * are separate): c's size and shared_classifier are set here. */
static acg_model_weights *random_weights(acg_model_config c, uint64_t seed) {
    c.size = sizeof c;
    c.shared_classifier = true;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_create_random(&c, seed, &w));
    return w;
}

/* A classifier that is the token embedding: each rank scores its rows of the embedding table;
 * a vocabulary of 67 splits unevenly over 2 and 3 ranks. */
static void test_shared_classifier(void **state) {
    (void)state;
    need_split_models();
    const acg_model_config c = {.dim = 32,
                                .hidden_dim = 48,
                                .n_layers = 2,
                                .n_heads = 4,
                                .n_kv_heads = 2,
                                .vocab_size = 67,
                                .seq_len = 64};
    split_against_one("shared classifier", random_weights(c, 11), two_and_three);
}

/* More ranks than tokens to score (a vocabulary of 4 over 5 ranks): rank 0 scores none and adds
 * zeros to every logit, as ranks 1 .. 4 hold no KV head and add zeros to the attention sum. */
static void test_rank_without_tokens(void **state) {
    (void)state;
    need_split_models();
    static const int five[] = {5, 0};
    const acg_model_config c = {.dim = 8,
                                .hidden_dim = 8,
                                .n_layers = 1,
                                .n_heads = 2,
                                .n_kv_heads = 1,
                                .vocab_size = 4,
                                .seq_len = 32};
    split_against_one("4 tokens", random_weights(c, 11), five);
}

/* ==== 2. a capture that fails on one rank ==================================================== */

/* Rank 1 of 3 fails to capture the decode bucket of 4 rows (the one the 3 requests decode in):
 * every rank drops it, rank 1 with the capture's error, the others because another rank did,
 * and serves it eagerly; every other bucket is replayed, and no bit of the output changes. */
static void test_capture_fails_on_one_rank(void **state) {
    (void)state;
    need_split_models();
    if (!tc_cap()->graphs) {
        tc_skip("no graphs: nothing to capture");
    }
    acg_model_weights *w = tc_model_preset("tiny");
    tp_case c;
    case_init(&c, w);
    const int32_t vocab = c.vocab;
    const int n_ranks = 3;
    c.shared = shared_alloc((size_t)n_ranks * run_bytes(vocab));
    c.fail_rank = 1;
    c.fail_key = (acg_bucket_key){NULL, 0, 4, 4};
    run_ranks(n_ranks, TIMEOUT_MS, rank_generate, &c);
    for (int r = 0; r < n_ranks; r++) {
        const run_out *o = rank_out(c.shared, vocab, r);
        bool found = false;
        for (uint32_t b = 0; b < o->n_buckets; b++) {
            bool failing = o->keys[b].batch == 4 && o->keys[b].tokens == 4;
            found |= failing;
            if (!failing) {
                assert_int_equal(o->states[b], ACG_BUCKET_CAPTURED);
                assert_int_equal(o->eager[b], 0);
                continue;
            }
            print_message("rank %d: bucket (batch 4, tokens 4) %s: %s; %u steps eager\n", r,
                          o->states[b] == ACG_BUCKET_DROPPED ? "dropped" : "kept", o->reasons[b],
                          o->eager[b]);
            assert_int_equal(o->states[b], ACG_BUCKET_DROPPED);
            assert_true(o->eager[b] > 0);
            assert_int_equal(o->replayed[b], 0);
            if (r == 1) {
                assert_true(tc_contains(o->reasons[b], "capture failed"));
                assert_true(tc_contains(o->reasons[b], "ACG_ERR_CAPTURE_INVALIDATED"));
            } else {
                assert_true(tc_contains(o->reasons[b], "another rank"));
            }
        }
        assert_true(found);
    }
    munmap(c.shared, (size_t)n_ranks * run_bytes(vocab));
    TC_OK(acg_model_weights_free(w));
}

/* ==== 3. ranks that disagree ================================================================= */

/* Rank 1 asks for another max_batch: both creations fail, naming it. Then rank 1 submits a
 * request more than rank 0: both fail the first step, naming the rows over the ranks. */
static int rank_disagrees(fc_group *fc, int rank, acg_device *dev, const tp_case *c) {
    acg_model_options o = model_options(fc_comm(fc), ACG_GRAPHS_OFF);
    o.max_batch = rank == 1 ? 2 : MAX_BATCH;
    acg_model *m = NULL;
    CHECK(acg_model_create(dev, c->w, &o, &m) == ACG_ERR_COMM);
    CHECK(strstr(acg_last_error(), "disagree on max_batch") != NULL);
    CHECK(strstr(acg_last_error(), "2 .. 4") != NULL);
    CHECK(m == NULL);

    o.max_batch = MAX_BATCH;
    CHECK(acg_model_create(dev, c->w, &o, &m) == ACG_OK);
    for (uint32_t i = 0; i < (rank == 1 ? 2u : 1u); i++) {
        uint64_t id;
        CHECK(submit_prompt(m, &c->prompts, i, 2, &id) == 0);
    }
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    CHECK(acg_model_step(m, &rep) == ACG_ERR_COMM);
    CHECK(strstr(acg_last_error(), "step 0") != NULL);
    CHECK(strstr(acg_last_error(), "rows 1 .. 2") != NULL);
    CHECK(acg_model_destroy(m) == ACG_OK);
    return 0;
}

static void test_disagreement(void **state) {
    (void)state;
    need_split_models();
    run_on_tiny(2, TIMEOUT_MS, rank_disagrees);
}

/* ==== 3b. a rank that dies mid-run ============================================================ */

/* Three ranks serve with graphs; rank 2 leaves (no goodbye, as a crash) after two steps. The
 * others' next step fails with ACG_ERR_COMM within seconds, not a hang. */
static int rank_dies(fc_group *fc, int rank, acg_device *dev, const tp_case *c) {
    acg_model_options o = model_options(fc_comm(fc), ACG_GRAPHS_ON);
    acg_model *m = NULL;
    CHECK(acg_model_create(dev, c->w, &o, &m) == ACG_OK);
    CHECK(!tc_shm_segment_named(fc_pid(fc, 0))); /* the group's segment has no name any more */
    uint64_t id;
    CHECK(submit_prompt(m, &c->prompts, 0, 32, &id) == 0);
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    for (int step = 0; step < 2; step++) {
        CHECK(acg_model_step(m, &rep) == ACG_OK);
    }
    if (rank == 2) {
        _exit(0);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    acg_status st = ACG_OK;
    for (int step = 0; step < 30 && st == ACG_OK; step++) {
        st = acg_model_step(m, &rep);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "rank %d: %s after %.2f s: %s\n", rank, acg_status_name(st), took,
            acg_last_error());
    CHECK(st == ACG_ERR_COMM);
    CHECK(took < 10.0);
    acg_model_destroy(m);
    return 0;
}

static void test_rank_dies(void **state) {
    (void)state;
    need_split_models();
    run_on_tiny(3, 2000, rank_dies); /* the step's agreement gives up after 2 s */
}

/* ==== 4. bad input ============================================================================ */

/* A comm whose callbacks must not be reached: each call counts in the int its user points at,
 * and fails. */
static acg_status counted_call(void *user) {
    (*(int *)user)++;
    return ACG_ERR_COMM;
}

static acg_status counted_min(void *user, int32_t *v, size_t n) {
    (void)v;
    (void)n;
    return counted_call(user);
}

static acg_status counted_broadcast(void *user, void *data, size_t bytes, int32_t root) {
    (void)data;
    (void)bytes;
    (void)root;
    return counted_call(user);
}

/* A counted comm of rank `rank` of n_ranks, less the callback named `without` (NULL: none), of
 * size `size` (0: the whole struct). */
typedef struct comm_shape {
    int32_t rank, n_ranks;
    const char *without;
    size_t size;
} comm_shape;

static bool left_out(const comm_shape *k, const char *callback) {
    return k->without != NULL && strcmp(k->without, callback) == 0;
}

static acg_comm counted_comm(const comm_shape *k, int *calls) {
    acg_comm c = ACG_COMM_INIT;
    c.user = calls;
    c.barrier = left_out(k, "barrier") ? NULL : counted_call;
    c.allreduce_min_i32 = left_out(k, "allreduce_min_i32") ? NULL : counted_min;
    c.broadcast = left_out(k, "broadcast") ? NULL : counted_broadcast;
    c.rank = k->rank;
    c.n_ranks = k->n_ranks;
    if (k->size != 0) {
        c.size = k->size;
    }
    return c;
}

/* create with a counted comm of shape k is refused with want, mentioning needle, without
 * allocating or communicating anything. */
static void expect_refused(acg_device *dev, const acg_model_weights *w, const comm_shape *k,
                           acg_status want, const char *needle) {
    int calls = 0;
    acg_comm comm = counted_comm(k, &calls);
    acg_model_options o = model_options(&comm, ACG_GRAPHS_OFF);
    acg_model *m = NULL;
    uint64_t allocations = tc_alloc_count();
    tc_expect_(want, acg_model_create(dev, w, &o, &m), "acg_model_create", __FILE__, __LINE__);
    TC_LAST_ERROR_HAS(needle);
    assert_null(m);
    assert_int_equal(calls, 0);
    assert_int_equal(tc_alloc_count(), allocations);
}

/* Comms every model refuses (ACG_ERR_INVALID_ARGUMENT), and what the error names. */
static const struct bad_comm {
    comm_shape k;
    const char *needle;
} bad_comms[] = {
    {.k = {.rank = 0, .n_ranks = 65}, .needle = "65 ranks"},
    {.k = {.rank = 0, .n_ranks = 0}, .needle = "0 ranks"}, /* n_ranks not given */
    {.k = {.rank = 2, .n_ranks = 2}, .needle = "rank 2 of 2"},
    {.k = {.rank = -1, .n_ranks = 2}, .needle = "rank -1 of 2"},
    {.k = {.rank = 0, .n_ranks = 2, .without = "allreduce_min_i32"}, .needle = "allreduce_min_i32"},
    {.k = {.rank = 0, .n_ranks = 2, .without = "barrier"}, .needle = "barrier"},
    {.k = {.rank = 0, .n_ranks = 2, .without = "broadcast"}, .needle = "broadcast"},
    /* An older caller's, which ends before rank and n_ranks. */
    {.k = {.rank = 0, .n_ranks = 2, .size = offsetof(acg_comm, rank)}, .needle = "0 ranks"},
    {.k = {.rank = 0, .n_ranks = 2, .size = 4097}, .needle = "acg_comm"}, /* size never set */
};

static void test_bad_input(void **state) {
    (void)state;
    /* The counting allocator, to see that nothing is allocated: the model's kernels hold memory
     * of the allocator that registered them, so they go first. */
    TC_OK(acg_model_unregister_kernels());
    tc_alloc_install();
    acg_device *dev = tc_open();
    acg_model_weights *w = tc_model_preset("tiny");
    /* Feed-forward units fewer than the ranks. */
    const acg_model_config narrow = {.dim = 8,
                                     .hidden_dim = 4,
                                     .n_layers = 1,
                                     .n_heads = 2,
                                     .n_kv_heads = 1,
                                     .vocab_size = 16,
                                     .seq_len = 16};
    acg_model_weights *few_units = random_weights(narrow, 1);

    for (size_t i = 0; i < sizeof bad_comms / sizeof bad_comms[0]; i++) {
        expect_refused(dev, w, &bad_comms[i].k, ACG_ERR_INVALID_ARGUMENT, bad_comms[i].needle);
    }
    const comm_shape five = {.rank = 0, .n_ranks = 5}, two = {.rank = 0, .n_ranks = 2};
    expect_refused(dev, few_units, &five, ACG_ERR_INVALID_ARGUMENT, "hidden_dim 4");
    if (!tc_cap()->collectives) {
        /* Refused before anything is allocated or any rank is waited for. */
        expect_refused(dev, w, &two, ACG_ERR_UNSUPPORTED, "collectives");
        print_message("%s has no collectives: a model over 2 ranks refused\n", tc_spec());
    }
    /* n_ranks 4 of hidden 4 is fine as far as the checks go: it needs the other ranks. */

    /* An older caller's options end before comm: whatever lies there is not read. */
    int calls = 0;
    acg_comm c = counted_comm(&two, &calls);
    acg_model_options o = model_options(&c, ACG_GRAPHS_OFF);
    o.size = offsetof(acg_model_options, comm);
    acg_model *m = NULL;
    TC_OK(acg_model_create(dev, w, &o, &m));
    assert_int_equal(calls, 0);
    TC_OK(acg_model_destroy(m));

    TC_OK(acg_model_weights_free(few_units));
    TC_OK(acg_model_weights_free(w));
    tc_close(dev);
    TC_OK(acg_model_unregister_kernels());
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_tiny),
    cmocka_unit_test(test_small),
    cmocka_unit_test(test_shared_classifier),
    cmocka_unit_test(test_rank_without_tokens),
    cmocka_unit_test(test_capture_fails_on_one_rank),
    cmocka_unit_test(test_disagreement),
    cmocka_unit_test(test_rank_dies),
};
TC_MAIN("test_model_tp", tests)
