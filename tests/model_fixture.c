/* model_fixture.c — the model suites' requests and runs (model_fixture.h). */
#include "model_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void make_prompt(int32_t *dst, uint32_t n, int32_t vocab, uint64_t seed) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 12345;
    dst[0] = ACG_TOKEN_BOS;
    for (uint32_t i = 1; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        dst[i] = 3 + (int32_t)((z >> 33) % (uint64_t)(vocab - 3));
    }
}

acg_model *model_new_with(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
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

acg_model *model_new(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
                     uint32_t max_step_tokens, uint32_t kv_pages, acg_graph_mode graphs) {
    return model_new_with(dev, w, max_batch, max_step_tokens, kv_pages, graphs, 16, 1);
}

uint64_t submit(acg_model *m, const job *j) {
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

void collect(acg_model *m, uint64_t id, const job *j, outcome *o) {
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

bool step_served(acg_model *m, uint32_t step, uint32_t limit, acg_step_report *rep) {
    assert_true(step < limit);
    *rep = (acg_step_report)ACG_STEP_REPORT_INIT;
    TC_OK(acg_model_step(m, rep));
    return rep->rows > 0;
}

void run_alone(acg_model *m, const job *jobs, uint32_t n, outcome *out) {
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = submit(m, &jobs[i]);
        TC_OK(acg_model_run_all(m));
        collect(m, id, &jobs[i], &out[i]);
    }
}

void run_together(acg_model *m, const job *jobs, uint32_t n, uint32_t max_batch,
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
    acg_step_report rep;
    for (uint32_t steps = 0; step_served(m, steps, 10000, &rep); steps++) {
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

void get_bits(acg_model *m, uint64_t id, request_bits *b) {
    acg_request_status s = ACG_REQUEST_STATUS_INIT;
    TC_OK(acg_model_get_request(m, id, &s));
    memset(b, 0, sizeof *b);
    b->state = s.state;
    b->n_tokens = s.n_tokens;
    b->n_generated = s.n_generated;
    assert_true(s.n_tokens <= MAX_PROMPT + MAX_NEW && s.n_generated <= MAX_NEW);
    memcpy(b->tokens, s.tokens, (size_t)s.n_tokens * sizeof *s.tokens);
    memcpy(b->counters, s.draw_counters, (size_t)s.n_generated * sizeof *s.draw_counters);
    b->has_logits = s.logits != NULL;
    if (s.logits != NULL) {
        memcpy(b->logits, s.logits, sizeof b->logits);
    }
}

void expect_same(const char *what, uint32_t req, const outcome *a, const outcome *b) {
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

void expect_graph_use(const acg_model *m, acg_graph_mode mode) {
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

const char *mode_name(acg_graph_mode mode) {
    return mode == ACG_GRAPHS_OFF ? "graphs off" : "graphs on";
}
