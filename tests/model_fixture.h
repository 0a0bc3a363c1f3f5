/*
 * model_fixture.h — what the model's suites share (test_model.c: generation against the
 * reference, batch invariance, sampling; test_model_serving.c: KV exhaustion, device loss, the
 * serving API's errors, allocation failures, struct versions): requests as jobs, run alone or
 * together, and their outcomes compared.
 */
#ifndef ACG_TESTS_MODEL_FIXTURE_H
#define ACG_TESTS_MODEL_FIXTURE_H

#include "common.h"

#include <acg/model.h>

/* Most tokens a test request generates, and its longest prompt. */
#define MAX_NEW 64
#define MAX_PROMPT 256

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
void make_prompt(int32_t *dst, uint32_t n, int32_t vocab, uint64_t seed);

/* A model of the weights on dev with these options; model_new's pages hold 16 tokens and it
 * has one slot. */
acg_model *model_new_with(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
                          uint32_t max_step_tokens, uint32_t kv_pages, acg_graph_mode graphs,
                          uint32_t page_size, uint32_t n_slots);

acg_model *model_new(acg_device *dev, const acg_model_weights *w, uint32_t max_batch,
                     uint32_t max_step_tokens, uint32_t kv_pages, acg_graph_mode graphs);

uint64_t submit(acg_model *m, const job *j);

/* Checks that the request finished with its prompt and max_new tokens, copies them and the
 * draw counters out, and releases it. */
void collect(acg_model *m, uint64_t id, const job *j, outcome *o);

/* The step-th step of a run of m into *rep, asserting that it succeeds and that the run has
 * taken fewer than limit steps (a run that never ends fails); whether it served any row (false:
 * nothing was left to do). */
bool step_served(acg_model *m, uint32_t step, uint32_t limit, acg_step_report *rep);

/* Each job in turn, alone in the model. */
void run_alone(acg_model *m, const job *jobs, uint32_t n, outcome *out);

/* Every job at once. The steps respect the model's budgets; the prompt tokens are read once. */
void run_together(acg_model *m, const job *jobs, uint32_t n, uint32_t max_batch,
                  uint32_t max_step_tokens, outcome *out);

/* What a request holds, to compare bit for bit: its state, tokens and draw counters, and its
 * latest logits where the model keeps them (has_logits). */
typedef struct request_bits {
    acg_request_state state;
    uint32_t n_tokens, n_generated;
    int32_t tokens[MAX_PROMPT + MAX_NEW];
    uint32_t counters[MAX_NEW];
    bool has_logits;
    float logits[512]; /* the tiny preset's vocabulary */
} request_bits;

/* Copies what request id of m holds into *b (every byte of it set). */
void get_bits(acg_model *m, uint64_t id, request_bits *b);

/* Asserts that two runs of the same request generated the same tokens and draw counters. */
void expect_same(const char *what, uint32_t req, const outcome *a, const outcome *b);

/* Replayed steps on a graph device with graphs on; none otherwise. */
void expect_graph_use(const acg_model *m, acg_graph_mode mode);

const char *mode_name(acg_graph_mode mode);

#endif /* ACG_TESTS_MODEL_FIXTURE_H */
