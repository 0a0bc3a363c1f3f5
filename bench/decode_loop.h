/*
 * decode_loop.h — `acg bench decode --steps-per-launch`: decoding N steps per launch against one
 * (decode_loop.c), run by decode.c on its device and weights.
 */
#ifndef ACG_BENCH_DECODE_LOOP_H
#define ACG_BENCH_DECODE_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include <acg/model.h>

#include "tool_report.h"

#define DECODE_LOOP_MAX_DEPTHS 8u

typedef struct decode_loop_config {
    acg_device *dev;
    const acg_model_weights *weights;
    const uint32_t *batch; /* (n_batch) */
    size_t n_batch;
    const uint32_t *depths; /* (n_depths) steps per launch, 1 first */
    size_t n_depths;
    uint32_t tokens;  /* timed tokens per row */
    uint32_t max_new; /* every request's max_new_tokens: room for the prompt step, the warm-up
                         launches, the timed tokens and a launch's overshoot */
} decode_loop_config;

/* The warm-up and timed tokens a row may need beyond its first (the prompt's) for `tokens`
 * timed tokens at most `deepest` steps per launch. */
static inline uint32_t decode_loop_needed(uint32_t tokens, uint32_t deepest) {
    return 2u * deepest + tokens + deepest + 1u;
}

typedef struct decode_loop_result {
    uint32_t batch, depth;
    uint32_t longest;             /* most decode steps a launch ran (1 where there are no loops) */
    uint32_t launches, replayed;  /* timed launches, and those replayed from a graph */
    double step_us, host_step_us; /* medians over the launches: a decode step's time (a token of
                                     every row), its host part */
    double launch_phase_us[5];    /* medians of a launch's admit, plan, upload, launch, retire */
} decode_loop_result;

/* Measures every batch size at every depth; results holds n_batch x n_depths, batch-major.
 * Returns a tool exit status, having said what failed. */
int decode_loop_run(const decode_loop_config *c, decode_loop_result *results);
/* The table of the results, and their JSON array ("steps_per_launch") into j. */
void decode_loop_table(const decode_loop_config *c, const decode_loop_result *results);
void decode_loop_json(tool_json *j, const decode_loop_config *c, const decode_loop_result *results);

#endif /* ACG_BENCH_DECODE_LOOP_H */
