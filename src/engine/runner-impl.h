/* runner-impl.h — what the files of a runner share: runner.c creates and destroys it, with
 * runner_statics.c (its static buffers), runner_budget.c (eager peaks, what capture may take)
 * and runner_capture.c (warm-ups, captures, dropped buckets); serve.c serves steps with it
 * (selection, leases, runs). */
#ifndef ACG_ENGINE_RUNNER_IMPL_H
#define ACG_ENGINE_RUNNER_IMPL_H

#include "engine-impl.h"

#define MAX_SLOTS 2

typedef struct bucket {
    acg_bucket_report report; /* report.key.label points at label */
    char label[64];
    acg_graph **graphs;   /* (n_slots, n_parts); NULL entries when not captured */
    acg_buffer **inputs;  /* (n_slots, n_inputs) views at this bucket's shape */
    acg_buffer **outputs; /* (n_outputs) views at this bucket's shape */
    uint32_t next_slot;
    acg_event *slot_free[MAX_SLOTS]; /* after each slot's latest step (made at first lease) */
    uint64_t ticket[MAX_SLOTS];      /* the lease holding each slot, 0 when free */
    acg_status status;               /* why it was dropped, as a status */
} bucket;

struct acg_runner {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg_recipe recipe;
    acg_stream *stream;
    acg_graph_mode mode;
    bool piecewise;
    uint32_t n_buckets, n_slots, n_parts;
    bucket *buckets;      /* in the caller's order */
    uint32_t *order;      /* bucket indices, largest first */
    acg_buffer **inputs;  /* (n_slots, n_inputs) at the largest shape */
    acg_buffer **outputs; /* (n_outputs) at the largest shape, shared by every bucket */
    acg_graph_pool *pool;
    bool statics_ready;
    pthread_mutex_t lock; /* slot rotation and lazy statics */
};

/* The recipe's callbacks, called through acg__runner_call_recipe. */
enum { CB_FORWARD, CB_REGION, CB_BETWEEN };

/* Whether a sorts before b, largest first (batch, then tokens). */
bool acg__runner_larger(const acg_bucket_key *a, const acg_bucket_key *b);
/* ACG_ERR_INVALID_HANDLE unless r is a live runner (held until the caller returns). */
acg_status acg__runner_check(const acg_runner *r, const char *fn);
/* A min-reduction over the ranks, its failure named as acg_runner_create's (runner.c). */
acg_status acg__runner_agree_min(const acg_comm *comm, int32_t *values, size_t n);

/* Allocates the static buffers and every bucket's views of them (r->lock held, or creation);
 * on a failure nothing stays claimed (runner_statics.c). */
acg_status acg__runner_claim_statics(acg_runner *r);
/* Frees the static buffers and their views, however far claiming them got. */
void acg__runner_release_statics(acg_runner *r);

/* The budget (runner_budget.c): each bucket's eager peak, measured in slot 0 (*largest: the
 * greatest); the buckets in r->order by it, largest first, agreed over comm's ranks (comm may
 * be NULL); and whether capturing bucket b keeps `reserve` bytes free under limit (else why). */
acg_status acg__runner_measure_peaks(acg_runner *r, uint64_t *largest);
acg_status acg__runner_order_by_peak(acg_runner *r, const acg_comm *comm);
bool acg__runner_fits(acg_runner *r, uint32_t b, uint64_t limit, uint64_t reserve, char *why,
                      size_t why_size);

/* Capture (runner_capture.c): measures, orders and warms up every bucket, then captures every
 * bucket that fits, largest first, keeping what every rank kept. */
acg_status acg__runner_capture_all(acg_runner *r, const acg_runner_config *c);
/* Discards bucket b's graphs (any it has). */
void acg__runner_drop_graphs(acg_runner *r, uint32_t b);
/* Begins a bucket's creation span ("measure", "warm-up", "capture"); k is its place in the
 * largest-first order, from 1 (0: not given). */
void acg__runner_trace_bucket_begin(acg__trace_span *sp, const char *name, const acg_runner *r,
                                    uint32_t b, uint32_t k);

/* Running a step (serve.c). */
/* The inputs and outputs of bucket b's slot. */
acg_step_io acg__runner_step_io(const acg_runner *r, uint32_t b, uint32_t slot);
/* Calls a recipe callback; a failure names the recipe, the callback and the bucket. */
acg_status acg__runner_call_recipe(const acg_runner *r, int cb, uint32_t part, acg_stream *s,
                                   const acg_step_io *io);
/* Runs bucket b's step eagerly on s (piecewise: every region and what lies between). */
acg_status acg__runner_run_eager(acg_runner *r, uint32_t b, uint32_t slot, acg_stream *s);

#endif /* ACG_ENGINE_RUNNER_IMPL_H */
