/*
 * run.h — what the two files of `acg run` share: run.c (options, prompts, loading, generation,
 * verification, the command) and run_report.c (what it tells: the captures' progress and the
 * buckets' table at start-up, each request's text and the summary at the end).
 */
#ifndef ACG_TOOL_RUN_H
#define ACG_TOOL_RUN_H

#include "ranks.h"
#include "tool_cli.h"
#include "tool_trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <acg/model.h>

#define MAX_PROMPTS 1024

typedef struct run_options {
    const char *backend, *model, *tokenizer, *preset, *prompt, *prompts_file;
    const char *trace; /* --trace FILE */
    uint64_t steps, seed, batch, tp;
    uint64_t steps_per_launch; /* --steps-per-launch: decode steps a launch may run */
    double temperature, top_p;
    acg_graph_mode graphs;
    bool verify, json;
} run_options;

typedef struct run_request {
    char *text;   /* the prompt */
    int32_t *ids; /* its tokens */
    size_t n_ids;
    uint64_t id;        /* in the model */
    int32_t *generated; /* (n_generated) copied once finished */
    uint32_t n_generated;
} run_request;

/* Progress of the captures at start-up, from the trace hook's "capture" events (main thread). */
typedef struct run_progress {
    uint64_t k, n;  /* the bucket being captured: k of n */
    bool line_open; /* a progress line waits for its newline */
} run_progress;

typedef struct run_state {
    run_options o;
    run_request req[MAX_PROMPTS];
    size_t n_req;
    acg_device *dev;
    acg_model_weights *weights;
    acg_tokenizer *tok;
    bool progress;     /* stderr is a terminal */
    bench_ranks ranks; /* --tp: the ranks' process group; only rank 0 prints */
    tool_trace *trace; /* --trace, and the capture progress on a terminal */
    run_progress capture;
    /* What the graphs-on run's creation did: each bucket's report and the pool's bytes. */
    acg_bucket_report *buckets; /* (n_buckets), each key.label pointing into labels */
    char (*labels)[64];         /* (n_buckets) copies: the runner's die with the model */
    uint32_t n_buckets;
    size_t pool_bytes;
} run_state;

/* tool_fail and tool_failf, naming the rank when there are several: each rank reports its own. */
int run_fail(const run_state *st, acg_status status, const char *what);
int run_failf(const run_state *st, const char *what, const char *fmt, ...) TOOL_PRINTF(3, 4);

/* Whether this process prints: with several ranks, rank 0 alone. */
static inline bool run_prints(const run_state *st) { return bench_ranks_prints(&st->ranks); }

/* run_report.c. The trace the run writes (--trace) and, on a terminal, the captures' progress
 * drawn from its events. */
int run_open_trace(run_state *st);
/* Keeps the graphs-on model's bucket reports and pool bytes, for the table and --json. */
int run_keep_buckets(run_state *st, const acg_model *model);
/* The buckets' table: captured or dropped and why, each one's graph memory, the pool's. */
void run_print_buckets(const run_state *st);
/* Each request's text and the summary (or all of it as JSON with --json). */
int run_print_report(const run_state *st, const acg_model_stats *s, double seconds);

#endif /* ACG_TOOL_RUN_H */
