/*
 * decode.c — `acg bench decode`: what one decode step of the reference model costs with its
 * steps replayed as graphs, against the same steps run eagerly, for each batch size.
 *
 * For each batch size b two models serve the same weights on one device, one with graphs on
 * and one with graphs off, each with max_batch b. Each gets b greedy requests of a short prompt
 * (distinct token ids per row), steps until every request has read its prompt and sampled its
 * first token, runs a few untimed decode steps, and then N timed ones. A timed step is one
 * acg_model_step of b rows of one token: admission, the attention plan, the uploads, the
 * forward (replayed or eager), sampling and the read-back of the tokens, which waits for the
 * device. The two models take turns of RUN_STEPS steps, the order swapping every turn, so drift
 * on a shared machine hits both alike, while each steps back to back within its turn as a
 * server steps its model: one step each in turn left every step to wake a device whose threads
 * slept through the other model's step, which no engine serving one model pays. Every figure is
 * a median. Every timed step is checked to be a pure decode step of b rows, and afterwards both
 * models must have generated the same tokens.
 *
 * acg_step_report splits each step into phases (admission, the attention plan, uploads, queuing
 * the forward, waiting for the tokens, retiring them); their medians show where a step's time
 * goes. Each batch size's graph step is also read against what the machine can do, measured in
 * the same run: the weights a step reads against the host's read bandwidth (the better of two
 * loops, see measure_machine), and the step's matmul operations against an FMA loop's peak.
 * Then PROFILE_STEPS more graph steps run with a trace observer that adds up what the device's
 * stream ran in each (matmul, attention, other kernels, copies, waits, the pool's hand-off),
 * where the backend times its streams (the cpu backend does).
 *
 * With --tp N, run as every rank of `mpirun -np N`, the models are split over the ranks by
 * tensor parallelism (model.h), each rank on its own device: every rank creates the same models
 * and runs the same steps, since each step is a collective, and rank 0 alone prints. A split
 * step adds two allreduces per layer and one of the logits, whose cost is measured alone too,
 * per batch size, on a device group of the bench's own: 2 x n_layers allreduces of b x dim
 * floats and one of b x vocab_size queued on a stream and synchronized, the median of as many
 * repeats as timed steps. What the split costs is then
 * the graph step's time at --tp N against --tp 1, read against that figure.
 *
 * With --steps-per-launch 1,4,16 it measures instead what a token costs when one launch decodes
 * N steps, graphs on, against one step per launch (decode_loop.c).
 *
 * With --trace FILE the library's trace of the whole bench (every model's creation and capture,
 * every step's phases, every stream entry) is written to FILE in the Chrome trace-event format
 * (tools/support/tool_trace.h); with --tp N every rank writes its own, FILE.rank<r>. The hook
 * then costs its share of every timed step.
 */
#include "bench-impl.h"
#include "decode_loop.h"
#include "ranks.h"
#include "tool_trace.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acg/model.h>

const char bench_decode_usage[] =
    "usage: acg bench decode [--backend B] [--preset P | --model F] [--batch 1,8,32] [--steps N]\n"
    "                        [--steps-per-launch 1,4,16] [--tp N (under mpirun -np N)]\n"
    "                        [--trace FILE] [--json]\n";

#define PROMPT_LEN 4u     /* tokens of every request's prompt */
#define WARMUP_STEPS 3u   /* untimed decode steps before the timed ones */
#define RUN_STEPS 8u      /* timed steps a model runs back to back before the other's turn */
#define SPARE_TOKENS 1u   /* no request finishes during the timed steps */
#define PROFILE_STEPS 16u /* traced graph steps after the timed ones: where a step's time goes */
/* More new tokens a request may need, seq_len permitting: while the last prompts are read in
 * chunks, the requests already decoding sample a token per step. */
#define PREFILL_ALLOWANCE 64u
#define MIN_BATCH 1u
#define MAX_BATCH 1024u /* acg_model_options.max_batch's limit */
#define MAX_BATCH_SIZES 16u
#define MAX_STEPS 100000u
#define MIN_STEP_TOKENS 64u
#define BATCH_LIST_MAX 256u /* characters of a --batch list */
#define MAX_TP 64u          /* a device group's limit */

static const uint32_t default_batches[] = {1, 8, 32};

enum { EAGER, GRAPH, N_MODES };

static const acg_graph_mode mode_graphs[N_MODES] = {ACG_GRAPHS_OFF, ACG_GRAPHS_ON};
static const char *const mode_names[N_MODES] = {"graphs off", "graphs on"};

/* The phases of acg_step_report, in step order. */
enum { ADMIT, PLAN, UPLOAD, LAUNCH, WAIT, RETIRE, N_PHASES };
static const char *const phase_names[N_PHASES] = {"admit",  "plan", "upload",
                                                  "launch", "wait", "retire"};

/* Where a traced graph step's time goes on the device, by what its stream ran: the model's
 * matmuls, its attention, its other kernels, copies (and fills), and the rest: waits for other
 * streams, host functions and allreduces. */
enum { K_MATMUL, K_ATTENTION, K_OTHER, K_COPY, K_WAITS, N_KINDS };
static const char *const kind_names[N_KINDS] = {"matmul", "attention", "other", "copies", "waits"};
/* Besides the kinds, per step: the replays' spans, the hand-off (the stream worker's wait after
 * its own parts of split kernels for the pool's), split launches and all launches. */
enum { P_REPLAY = N_KINDS, P_HANDOFF, P_SPLIT, P_KERNELS, N_PROFILE };

/* What the trace hook adds up while `on`, from the stream workers; the bench takes the sums
 * after each traced step (which has then ended on the device: its tokens were read back). */
typedef struct step_profile {
    _Atomic int on;
    _Atomic uint64_t sum[N_PROFILE];
} step_profile;

typedef struct decode_config {
    bench_common common; /* --backend, --json */
    const char *preset;  /* --preset; NULL with --model */
    const char *model;   /* --model: a llama2.c checkpoint */
    uint32_t batch[MAX_BATCH_SIZES];
    size_t n_batch;
    uint32_t steps;
    uint64_t tp;                             /* --tp: the ranks the models are split over */
    const char *trace;                       /* --trace FILE */
    uint32_t depths[DECODE_LOOP_MAX_DEPTHS]; /* --steps-per-launch, 1 first; none: not asked */
    size_t n_depths;
} decode_config;

typedef struct decode_result {
    uint32_t batch;
    double step_us[N_MODES];    /* median wall time of one decode step */
    double submit_us[N_MODES];  /* median host time to queue it (acg_step_report.submit_ms) */
    uint32_t replayed[N_MODES]; /* timed steps acg_step_report.graphed calls replayed */
    uint32_t buckets_captured;  /* by the graphs-on model */
    double capture_ms;          /* its capture time at creation */
    double phase_us[N_MODES][N_PHASES]; /* median of each phase */
    double allreduce_us;       /* median time of a step's allreduces alone; NaN with one rank */
    bool profiled;             /* the device timed the traced steps' streams */
    double profile[N_PROFILE]; /* medians over them: us, but P_SPLIT and P_KERNELS counts */
} decode_result;

typedef struct decode_bench {
    const decode_config *cfg;
    bench_ranks ranks; /* --tp */
    acg_model_weights *weights;
    const acg_model_config *mc;
    acg_device *dev;
    acg_model *model[N_MODES];
    /* With several ranks, what times a step's allreduces: the ranks' devices, a stream and the
     * values reduced */
    acg_device_group *group;
    acg_stream *stream;
    acg_buffer *reduced;                 /* (max batch, dim) */
    double *allreduce_ns;                /* (steps) */
    uint64_t *ids[N_MODES];              /* (max batch) the requests of each model */
    double *step_ns[N_MODES];            /* (steps) */
    double *submit_ns[N_MODES];          /* (steps) */
    double *phase_ns[N_MODES][N_PHASES]; /* (steps) */
    double weight_bytes;                 /* read by one step's matmuls, norms and classifier */
    double flops_per_token;              /* of one token's matmuls (2 per multiply-add) */
    unsigned threads;                    /* host threads of the machine measurements */
    double read_gbs;                     /* the better of the two below: the step's limit */
    double read_flat_gbs;                /* one buffer of weight_bytes, read once */
    double read_split_gbs;               /* the step's matrices, as its matmuls read them */
    double peak_gflops;                  /* host FMA peak */
    const char *peak_level;
    int32_t prompt[PROMPT_LEN];
    uint32_t max_new; /* max_new_tokens of every request */
    step_profile profile;
    double profile_steps[N_PROFILE][PROFILE_STEPS];
    const tool_trace *trace; /* --trace's, which tells profile_observe too; else NULL */
    decode_result results[MAX_BATCH_SIZES];
} decode_bench;

/* New tokens a request needs when it starts decoding together with all the others: its first
 * from the prompt, the warm-up, the timed and the traced steps, and a spare. */
static uint32_t needed_tokens(uint32_t steps) {
    return 1 + WARMUP_STEPS + steps + PROFILE_STEPS + SPARE_TOKENS;
}

/* ---- one model ------------------------------------------------------------------------------- */

/* Creates the model of one mode for `batch` rows, its KV cache just large enough. */
static int create_model(decode_bench *b, int mode, uint32_t batch) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = batch;
    o.max_step_tokens = batch > MIN_STEP_TOKENS ? batch : MIN_STEP_TOKENS;
    uint32_t tokens = PROMPT_LEN + b->max_new;
    o.kv_pages = batch * ((tokens + o.page_size - 1) / o.page_size) + 1; /* and the sink */
    o.graphs = mode_graphs[mode];
    o.comm = b->ranks.comm;
    acg_status st = acg_model_create(b->dev, b->weights, &o, &b->model[mode]);
    if (st != ACG_OK) {
        char what[96];
        snprintf(what, sizeof what, "creating the model (%s, batch %u)", mode_names[mode], batch);
        return bench_ranks_fail(&b->ranks, st, what);
    }
    return TOOL_EXIT_OK;
}

/* Submits `batch` greedy requests, row r's prompt made of distinct ids. */
static int submit(decode_bench *b, int mode, uint32_t batch) {
    int32_t vocab = b->mc->vocab_size;
    /* Past the special tokens where the vocabulary has room for them. */
    int32_t first = vocab > (int32_t)ACG_TOKEN_BYTE0 ? ACG_TOKEN_BYTE0 : 0;
    uint32_t span = (uint32_t)(vocab - first);
    for (uint32_t r = 0; r < batch; r++) {
        for (uint32_t k = 0; k < PROMPT_LEN; k++) {
            b->prompt[k] = first + (int32_t)(((uint64_t)r * PROMPT_LEN + k) % span);
        }
        acg_request q = ACG_REQUEST_INIT;
        q.prompt = b->prompt;
        q.prompt_len = PROMPT_LEN;
        q.max_new_tokens = b->max_new;
        acg_status st = acg_model_submit(b->model[mode], &q, &b->ids[mode][r]);
        if (st != ACG_OK) {
            return bench_ranks_fail(&b->ranks, st, "submitting a request");
        }
    }
    return TOOL_EXIT_OK;
}

/* Steps until every request has read its prompt and sampled a token, so that each step after
 * is a decode step of every row. Every step reads at least one prompt token, which bounds the
 * steps. The requests that finish their prompts first sample a token in each step after, so
 * they lead the others, and must still have tokens to generate for the decode steps to come. */
static int prefill(decode_bench *b, int mode, uint32_t batch) {
    uint32_t limit = batch * PROMPT_LEN + 1;
    for (uint32_t s = 0;; s++) {
        uint32_t decoding = 0, lead = 0;
        for (uint32_t r = 0; r < batch; r++) {
            acg_request_status rs = ACG_REQUEST_STATUS_INIT;
            acg_status st = acg_model_get_request(b->model[mode], b->ids[mode][r], &rs);
            if (st != ACG_OK) {
                return bench_ranks_fail(&b->ranks, st, "reading a request");
            }
            decoding += rs.state == ACG_REQUEST_RUNNING && rs.n_generated > 0;
            lead = rs.n_generated > lead ? rs.n_generated : lead;
        }
        if (lead > 0 && lead - 1 + needed_tokens(b->cfg->steps) > b->max_new) {
            return bench_ranks_failf(
                &b->ranks, "bench decode: too many steps",
                "%s, batch %u: after %u steps reading the prompts the leading "
                "request has %u of its %u new tokens left (seq_len %d), fewer than "
                "%u warm-up, %u timed and %u traced decode steps need",
                mode_names[mode], batch, s, b->max_new - lead, b->max_new, b->mc->seq_len,
                WARMUP_STEPS, b->cfg->steps, PROFILE_STEPS);
        }
        if (decoding == batch) {
            return TOOL_EXIT_OK;
        }
        if (s == limit) {
            return bench_ranks_failf(&b->ranks, "bench decode: prompts not read",
                                     "%s, batch %u: %u of %u requests decoding after %u steps",
                                     mode_names[mode], batch, decoding, batch, s);
        }
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        acg_status st = acg_model_step(b->model[mode], &rep);
        if (st != ACG_OK) {
            return bench_ranks_fail(&b->ranks, st, "stepping through the prompts");
        }
        if (rep.rows == 0) {
            return bench_ranks_failf(&b->ranks, "bench decode: prompts not read",
                                     "%s, batch %u: nothing to run with %u of %u requests decoding",
                                     mode_names[mode], batch, decoding, batch);
        }
    }
}

/* One decode step of `batch` rows; with ns non-NULL stores its wall time, and with phases
 * non-NULL each phase's time at index s of phases[p]. */
static int decode_step(decode_bench *b, int mode, uint32_t batch, double *ns, double *submit_ns,
                       double *const *phases, uint32_t s, uint32_t *replayed) {
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    uint64_t t0 = tool_now_ns();
    acg_status st = acg_model_step(b->model[mode], &rep);
    uint64_t t1 = tool_now_ns();
    if (st != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "running a decode step");
    }
    if (rep.rows != batch || rep.tokens != batch || rep.generated != batch) {
        return bench_ranks_failf(
            &b->ranks, "bench decode: not a decode step",
            "%s, batch %u: %u rows, %u query tokens, %u generated; expected %u of each",
            mode_names[mode], batch, rep.rows, rep.tokens, rep.generated, batch);
    }
    if (ns) {
        *ns = (double)(t1 - t0);
    }
    if (submit_ns) {
        *submit_ns = rep.submit_ms * 1e6;
    }
    if (phases) {
        const double ms[N_PHASES] = {rep.admit_ms,  rep.plan_ms, rep.upload_ms,
                                     rep.launch_ms, rep.wait_ms, rep.retire_ms};
        for (int p = 0; p < N_PHASES; p++) {
            phases[p][s] = ms[p] * 1e6;
        }
    }
    if (replayed) {
        *replayed += rep.graphed;
    }
    return TOOL_EXIT_OK;
}

/* Both models ran the same greedy requests: their tokens must agree. */
static int compare_tokens(decode_bench *b, uint32_t batch) {
    for (uint32_t r = 0; r < batch; r++) {
        acg_request_status rs[N_MODES] = {ACG_REQUEST_STATUS_INIT, ACG_REQUEST_STATUS_INIT};
        for (int m = 0; m < N_MODES; m++) {
            acg_status st = acg_model_get_request(b->model[m], b->ids[m][r], &rs[m]);
            if (st != ACG_OK) {
                return bench_ranks_fail(&b->ranks, st, "reading a request");
            }
        }
        uint32_t n =
            rs[EAGER].n_tokens < rs[GRAPH].n_tokens ? rs[EAGER].n_tokens : rs[GRAPH].n_tokens;
        for (uint32_t i = 0; i < n; i++) {
            if (rs[EAGER].tokens[i] != rs[GRAPH].tokens[i]) {
                return bench_ranks_failf(
                    &b->ranks, "bench decode: graphs change the tokens",
                    "batch %u, request %u, token %u: %d with graphs off, %d on", batch, r, i,
                    rs[EAGER].tokens[i], rs[GRAPH].tokens[i]);
            }
        }
        if (rs[EAGER].n_tokens != rs[GRAPH].n_tokens) {
            return bench_ranks_failf(&b->ranks, "bench decode: graphs change the tokens",
                                     "batch %u, request %u: %u tokens with graphs off, %u on",
                                     batch, r, rs[EAGER].n_tokens, rs[GRAPH].n_tokens);
        }
    }
    return TOOL_EXIT_OK;
}

/* ---- one batch size -------------------------------------------------------------------------- */

static int measure(decode_bench *b, uint32_t batch, decode_result *res) {
    int rc = TOOL_EXIT_OK;
    for (int m = 0; m < N_MODES && rc == TOOL_EXIT_OK; m++) {
        if ((rc = submit(b, m, batch)) == TOOL_EXIT_OK) {
            rc = prefill(b, m, batch);
        }
    }
    for (uint32_t s = 0; s < WARMUP_STEPS && rc == TOOL_EXIT_OK; s++) {
        for (int m = 0; m < N_MODES && rc == TOOL_EXIT_OK; m++) {
            rc = decode_step(b, m, batch, NULL, NULL, NULL, 0, NULL);
        }
    }
    for (uint32_t s0 = 0; s0 < b->cfg->steps && rc == TOOL_EXIT_OK; s0 += RUN_STEPS) {
        uint32_t s1 = s0 + RUN_STEPS < b->cfg->steps ? s0 + RUN_STEPS : b->cfg->steps;
        for (int i = 0; i < N_MODES && rc == TOOL_EXIT_OK; i++) {
            int m = (int)((s0 / RUN_STEPS + (uint32_t)i) % N_MODES);
            for (uint32_t s = s0; s < s1 && rc == TOOL_EXIT_OK; s++) {
                rc = decode_step(b, m, batch, &b->step_ns[m][s], &b->submit_ns[m][s],
                                 b->phase_ns[m], s, &res->replayed[m]);
            }
        }
    }
    if (rc == TOOL_EXIT_OK) {
        rc = compare_tokens(b, batch);
    }
    if (rc != TOOL_EXIT_OK) {
        return rc;
    }
    for (int m = 0; m < N_MODES; m++) {
        res->step_us[m] = tool_median(b->step_ns[m], b->cfg->steps) / 1e3;
        res->submit_us[m] = tool_median(b->submit_ns[m], b->cfg->steps) / 1e3;
        for (int p = 0; p < N_PHASES; p++) {
            res->phase_us[m][p] = tool_median(b->phase_ns[m][p], b->cfg->steps) / 1e3;
        }
    }
    return TOOL_EXIT_OK;
}

/* What the split adds to a step of `batch` rows, alone: a step's 2 x n_layers allreduces (after
 * each block's attention and feed-forward) of batch x dim floats and the logits' of batch x
 * vocab_size, queued on the bench's stream and synchronized; WARMUP_STEPS untimed repeats, then
 * as many timed as steps. */
static int measure_allreduce(decode_bench *b, uint32_t batch, decode_result *res) {
    size_t count = (size_t)batch * (size_t)b->mc->dim;
    uint32_t per_step = 2u * (uint32_t)b->mc->n_layers;
    for (uint32_t s = 0; s < WARMUP_STEPS + b->cfg->steps; s++) {
        acg_status st = ACG_OK;
        uint64_t t0 = tool_now_ns();
        for (uint32_t k = 0; k < per_step && st == ACG_OK; k++) {
            st = acg_allreduce(b->stream, b->group, b->reduced, 0, count);
        }
        if (st == ACG_OK) {
            st = acg_allreduce(b->stream, b->group, b->reduced, 0,
                               (size_t)batch * (size_t)b->mc->vocab_size);
        }
        if (st == ACG_OK) {
            st = acg_stream_synchronize(b->stream);
        }
        uint64_t t1 = tool_now_ns();
        if (st != ACG_OK) {
            return bench_ranks_fail(&b->ranks, st, "timing a step's allreduces");
        }
        if (s >= WARMUP_STEPS) {
            b->allreduce_ns[s - WARMUP_STEPS] = (double)(t1 - t0);
        }
    }
    res->allreduce_us = tool_median(b->allreduce_ns, b->cfg->steps) / 1e3;
    return TOOL_EXIT_OK;
}

static const acg_trace_arg *event_arg(const acg_trace_event *e, const char *key) {
    for (uint32_t i = 0; i < e->n_args; i++) {
        if (strcmp(e->args[i].key, key) == 0 && e->args[i].type == ACG_TRACE_ARG_UINT) {
            return &e->args[i];
        }
    }
    return NULL;
}

/* The trace hook's observer (tool_trace.h): stream entries, by kind. A kernel says how it was
 * split ("parts", "wait_ns"); the model's matmuls and attention go by their kernels' names. */
static void profile_observe(const acg_trace_event *e, void *user) {
    step_profile *p = user;
    if (!atomic_load_explicit(&p->on, memory_order_relaxed) || e->category != ACG_TRACE_STREAM ||
        e->phase != ACG_TRACE_COMPLETE) {
        return;
    }
    const acg_trace_arg *parts = event_arg(e, "parts"), *wait = event_arg(e, "wait_ns");
    int k;
    if (strcmp(e->name, "replay") == 0) {
        k = P_REPLAY;
    } else if (parts != NULL) {
        k = strcmp(e->name, "matmul_f32") == 0      ? K_MATMUL
            : strcmp(e->name, "attention_f32") == 0 ? K_ATTENTION
                                                    : K_OTHER;
        atomic_fetch_add(&p->sum[P_KERNELS], 1);
        atomic_fetch_add(&p->sum[P_SPLIT], parts->value.u > 1);
        atomic_fetch_add(&p->sum[P_HANDOFF], wait != NULL ? wait->value.u : 0);
    } else if (strcmp(e->name, "copy") == 0 || strcmp(e->name, "fill") == 0) {
        k = K_COPY;
    } else {
        k = K_WAITS; /* a wait for another stream, a host function, an allreduce */
    }
    atomic_fetch_add(&p->sum[k], e->dur_ns);
}

/* PROFILE_STEPS more graph steps with the hook told what the device's streams ran (a trace of
 * the bench's own unless --trace installed one), each step's sums taken after it; medians.
 * Not timed with the others: the hook costs its share. A device whose streams are not timed
 * tells nothing, and the batch says it was not profiled. */
static int profile_steps(decode_bench *b, uint32_t batch, decode_result *res) {
    tool_trace *own = NULL;
    int rc = TOOL_EXIT_OK;
    if (b->trace == NULL) {
        tool_trace_options o = {.path = NULL,
                                .process = "acg bench decode",
                                .pid = (int64_t)getpid(),
                                .observe = profile_observe,
                                .user = &b->profile,
                                .observe_categories = ACG_TRACE_STREAM};
        rc = tool_trace_open(&o, &own);
        if (rc == TOOL_EXIT_OK) {
            rc = tool_trace_start(own);
        }
    }
    for (int k = 0; k < N_PROFILE; k++) {
        atomic_store(&b->profile.sum[k], 0);
    }
    atomic_store(&b->profile.on, 1);
    uint64_t seen = 0;
    for (uint32_t s = 0; s < PROFILE_STEPS && rc == TOOL_EXIT_OK; s++) {
        rc = decode_step(b, GRAPH, batch, NULL, NULL, NULL, 0, NULL);
        for (int k = 0; k < N_PROFILE; k++) {
            uint64_t v = atomic_exchange(&b->profile.sum[k], 0);
            seen += v;
            b->profile_steps[k][s] = k == P_SPLIT || k == P_KERNELS ? (double)v : (double)v / 1e3;
        }
    }
    atomic_store(&b->profile.on, 0);
    rc = tool_trace_finish(own, rc);
    if (rc == TOOL_EXIT_OK) {
        res->profiled = seen > 0;
        for (int k = 0; k < N_PROFILE; k++) {
            res->profile[k] = tool_median(b->profile_steps[k], PROFILE_STEPS);
        }
    }
    return rc;
}

static int run_batch(decode_bench *b, uint32_t batch, decode_result *res) {
    memset(res, 0, sizeof *res);
    res->batch = batch;
    res->allreduce_us = NAN;
    int rc = TOOL_EXIT_OK;
    for (int m = 0; m < N_MODES && rc == TOOL_EXIT_OK; m++) {
        rc = create_model(b, m, batch);
    }
    if (rc == TOOL_EXIT_OK) {
        acg_model_stats s = ACG_MODEL_STATS_INIT;
        acg_status st = acg_model_get_stats(b->model[GRAPH], &s);
        if (st != ACG_OK) {
            rc = bench_ranks_fail(&b->ranks, st, "reading the model's stats");
        } else {
            res->buckets_captured = s.buckets_captured;
            res->capture_ms = s.capture_ms;
        }
    }
    if (rc == TOOL_EXIT_OK) {
        rc = measure(b, batch, res);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = profile_steps(b, batch, res);
    }

    /* Teardown failures after a good run are failures too: they are library bugs. */
    for (int m = 0; m < N_MODES; m++) {
        acg_status st = acg_model_destroy(b->model[m]);
        if (st != ACG_OK && rc == TOOL_EXIT_OK) {
            rc = bench_ranks_fail(&b->ranks, st, "destroying a model");
        }
        b->model[m] = NULL;
    }
    if (rc == TOOL_EXIT_OK && b->group) {
        rc = measure_allreduce(b, batch, res);
    }
    return rc;
}

/* ---- report ---------------------------------------------------------------------------------- */

static double tokens_per_s(const decode_result *r, int mode) {
    return (double)r->batch * 1e6 / r->step_us[mode];
}

/* The weights a graph step read, per second of it (GB/s). */
static double achieved_gbs(const decode_bench *b, const decode_result *r) {
    return b->weight_bytes / (r->step_us[GRAPH] * 1e3);
}

/* The matmul operations of a graph step, per second of it (GFLOP/s). */
static double achieved_gflops(const decode_bench *b, const decode_result *r) {
    return b->flops_per_token * r->batch / (r->step_us[GRAPH] * 1e3);
}

static int report_json(const decode_bench *b, double seconds) {
    const decode_config *cfg = b->cfg;
    tool_json j;
    tool_json_begin(&j, stdout);
    tool_json_object_begin(&j, NULL);
    bench_json_device(&j, b->dev);
    tool_json_string(&j, "preset", cfg->preset);
    tool_json_string(&j, "model", cfg->model);
    tool_json_int(&j, "dim", b->mc->dim);
    tool_json_int(&j, "n_layers", b->mc->n_layers);
    tool_json_int(&j, "vocab_size", b->mc->vocab_size);
    tool_json_int(&j, "seq_len", b->mc->seq_len);
    tool_json_uint(&j, "tp", cfg->tp);
    tool_json_uint(&j, "steps", cfg->steps);
    tool_json_uint(&j, "warmup_steps", WARMUP_STEPS);
    tool_json_uint(&j, "prompt_tokens", PROMPT_LEN);
    tool_json_uint(&j, "max_new_tokens", b->max_new);
    tool_json_number(&j, "weight_bytes_per_step", b->weight_bytes);
    tool_json_number(&j, "flops_per_token", b->flops_per_token);
    tool_json_uint(&j, "host_threads", b->threads);
    tool_json_number(&j, "host_read_gbs", b->read_gbs);
    tool_json_number(&j, "host_read_flat_gbs", b->read_flat_gbs);
    tool_json_number(&j, "host_read_matrices_gbs", b->read_split_gbs);
    tool_json_number(&j, "host_fma_peak_gflops", b->peak_gflops);
    tool_json_string(&j, "host_fma_level", b->peak_level);
    tool_json_array_begin(&j, "results");
    for (size_t i = 0; i < cfg->n_batch; i++) {
        const decode_result *r = &b->results[i];
        tool_json_object_begin(&j, NULL);
        tool_json_uint(&j, "batch", r->batch);
        tool_json_number(&j, "eager_step_us", r->step_us[EAGER]);
        tool_json_number(&j, "graph_step_us", r->step_us[GRAPH]);
        tool_json_number(&j, "step_ratio", r->step_us[EAGER] / r->step_us[GRAPH]);
        tool_json_number(&j, "eager_submit_us", r->submit_us[EAGER]);
        tool_json_number(&j, "graph_submit_us", r->submit_us[GRAPH]);
        tool_json_number(&j, "allreduce_step_us", r->allreduce_us);
        tool_json_number(&j, "submit_ratio", r->submit_us[EAGER] / r->submit_us[GRAPH]);
        tool_json_number(&j, "tokens_per_s_graph", tokens_per_s(r, GRAPH));
        tool_json_number(&j, "tokens_per_s_eager", tokens_per_s(r, EAGER));
        tool_json_uint(&j, "graph_replayed_steps", r->replayed[GRAPH]);
        tool_json_uint(&j, "eager_replayed_steps", r->replayed[EAGER]);
        tool_json_uint(&j, "graph_buckets_captured", r->buckets_captured);
        tool_json_number(&j, "graph_capture_ms", r->capture_ms);
        tool_json_number(&j, "graph_weight_gbs", achieved_gbs(b, r));
        tool_json_number(&j, "graph_gflops", achieved_gflops(b, r));
        for (int m = 0; m < N_MODES; m++) {
            tool_json_object_begin(&j, m == GRAPH ? "graph_phases_us" : "eager_phases_us");
            for (int p = 0; p < N_PHASES; p++) {
                tool_json_number(&j, phase_names[p], r->phase_us[m][p]);
            }
            tool_json_object_end(&j);
        }
        if (r->profiled) {
            tool_json_object_begin(&j, "graph_step_device_us");
            tool_json_uint(&j, "steps", PROFILE_STEPS);
            tool_json_number(&j, "replay", r->profile[P_REPLAY]);
            for (int k = 0; k < N_KINDS; k++) {
                tool_json_number(&j, kind_names[k], r->profile[k]);
            }
            tool_json_number(&j, "handoff", r->profile[P_HANDOFF]);
            tool_json_number(&j, "split_launches", r->profile[P_SPLIT]);
            tool_json_number(&j, "launches", r->profile[P_KERNELS]);
            tool_json_object_end(&j);
        } else {
            tool_json_null(&j, "graph_step_device_us");
        }
        tool_json_bool(&j, "tokens_match", true);
        tool_json_object_end(&j);
    }
    tool_json_array_end(&j);
    tool_json_number(&j, "seconds", seconds);
    tool_json_object_end(&j);
    return tool_json_end(&j);
}

static void report_table(const decode_bench *b, double seconds) {
    const decode_config *cfg = b->cfg;
    bench_print_title(&cfg->common, b->dev);
    printf("%s %s: dim %d, %d layers, vocab %d, seq_len %d\n", cfg->preset ? "preset" : "model",
           cfg->preset ? cfg->preset : cfg->model, b->mc->dim, b->mc->n_layers, b->mc->vocab_size,
           b->mc->seq_len);
    if (cfg->tp > 1) {
        printf("split over %llu ranks by tensor parallelism, a device each, every rank running "
               "the same steps\n",
               (unsigned long long)cfg->tp);
    }
    printf("per batch size b: b greedy requests of a %u-token prompt; %u timed decode steps with\n"
           "graphs off and on, in turns of %u, after %u warm-up steps; %.1f s\n\n",
           PROMPT_LEN, cfg->steps, RUN_STEPS, WARMUP_STEPS, seconds);
    /* The last column, a step's allreduces, only where there are any. */
    static const char *const headers[] = {
        "batch",           "eager step us", "graph step us", "ratio",          "eager submit us",
        "graph submit us", "tok/s graph",   "tok/s eager",   "replayed steps", "allreduce us"};
    static const int widths[] = {5, 13, 13, 6, 15, 15, 11, 11, 14, 12};
    tool_table t;
    tool_table_begin(&t, stdout, cfg->tp > 1 ? 10 : 9, widths, headers);
    for (size_t i = 0; i < cfg->n_batch; i++) {
        const decode_result *r = &b->results[i];
        tool_table_cell(&t, "%u", r->batch);
        tool_table_cell(&t, "%.1f", r->step_us[EAGER]);
        tool_table_cell(&t, "%.1f", r->step_us[GRAPH]);
        tool_table_cell(&t, "%.2f", r->step_us[EAGER] / r->step_us[GRAPH]);
        tool_table_cell(&t, "%.1f", r->submit_us[EAGER]);
        tool_table_cell(&t, "%.1f", r->submit_us[GRAPH]);
        tool_table_cell(&t, "%.0f", tokens_per_s(r, GRAPH));
        tool_table_cell(&t, "%.0f", tokens_per_s(r, EAGER));
        tool_table_cell(&t, "%u/%u", r->replayed[GRAPH], cfg->steps);
        if (cfg->tp > 1) {
            tool_table_cell(&t, "%.1f", r->allreduce_us);
        }
    }
    printf("\nthe graph step against the machine (measured now, %u host threads): weights %.1f MiB "
           "a step,\nhost read bandwidth %.1f GB/s (one buffer %.1f, the step's matrices as its "
           "matmuls read them %.1f),\nFMA peak %.1f GFLOP/s (%s)\n",
           b->threads, b->weight_bytes / 1048576.0, b->read_gbs, b->read_flat_gbs,
           b->read_split_gbs, b->peak_gflops, b->peak_level);
    if (cfg->tp > 1) {
        printf("(rank 0's share, on its share of the cores: a rank reads its part of each "
               "layer, and the\nwhole classifier)\n");
    }
    static const char *const mheaders[] = {"batch", "weights GB/s", "of read bw", "GFLOP/s",
                                           "of FMA peak"};
    static const int mwidths[] = {5, 12, 10, 9, 11};
    tool_table_begin(&t, stdout, 5, mwidths, mheaders);
    for (size_t i = 0; i < cfg->n_batch; i++) {
        const decode_result *r = &b->results[i];
        tool_table_cell(&t, "%u", r->batch);
        tool_table_cell(&t, "%.1f", achieved_gbs(b, r));
        tool_table_cell(&t, "%.0f%%", 100.0 * achieved_gbs(b, r) / b->read_gbs);
        tool_table_cell(&t, "%.1f", achieved_gflops(b, r));
        tool_table_cell(&t, "%.0f%%", 100.0 * achieved_gflops(b, r) / b->peak_gflops);
    }
    printf("\nwhere a step's time goes (median us of each phase):\n");
    static const char *const pheaders[] = {"batch",  "mode",   "admit", "plan",
                                           "upload", "launch", "wait",  "retire"};
    static const int pwidths[] = {5, -10, 8, 8, 8, 8, 9, 8};
    tool_table_begin(&t, stdout, 8, pwidths, pheaders);
    for (size_t i = 0; i < cfg->n_batch; i++) {
        const decode_result *r = &b->results[i];
        for (int m = 0; m < N_MODES; m++) {
            tool_table_cell(&t, "%u", r->batch);
            tool_table_cell(&t, "%s", mode_names[m]);
            for (int p = 0; p < N_PHASES; p++) {
                tool_table_cell(&t, "%.1f", r->phase_us[m][p]);
            }
        }
    }
    bool any = false;
    for (size_t i = 0; i < cfg->n_batch; i++) {
        any = any || b->results[i].profiled;
    }
    if (any) {
        printf("\nwhere a graph step's time goes on the device (median us per step, %u traced "
               "steps):\n",
               PROFILE_STEPS);
        static const char *const kheaders[] = {"batch",     "replay",   "matmul",
                                               "attention", "other",    "copies",
                                               "waits",     "hand-off", "split/launches"};
        static const int kwidths[] = {5, 8, 8, 9, 8, 8, 8, 8, 14};
        tool_table_begin(&t, stdout, 9, kwidths, kheaders);
        for (size_t i = 0; i < cfg->n_batch; i++) {
            const decode_result *r = &b->results[i];
            if (!r->profiled) {
                continue;
            }
            tool_table_cell(&t, "%u", r->batch);
            tool_table_cell(&t, "%.1f", r->profile[P_REPLAY]);
            for (int k = 0; k < N_KINDS; k++) {
                tool_table_cell(&t, "%.1f", r->profile[k]);
            }
            tool_table_cell(&t, "%.1f", r->profile[P_HANDOFF]);
            tool_table_cell(&t, "%.0f/%.0f", r->profile[P_SPLIT], r->profile[P_KERNELS]);
        }
    } else {
        printf("\nwhere a graph step's time goes on the device: not told (this backend does not "
               "time its streams)\n");
    }
    printf("\nmedians over the steps; a step is one acg_model_step of b rows of one token:\n"
           "plan, uploads, forward, sampling and the wait for its tokens\n");
    printf("ratio = eager / graph (above 1: the graph is faster); submit = host time to admit,\n"
           "plan, upload and queue the step, before waiting for it; replayed steps = timed steps\n"
           "of the graphs-on model that replayed a graph\n");
    printf("weights GB/s = weight bytes a step reads / graph step time; GFLOP/s = 2 x the step's\n"
           "matmul multiply-adds / graph step time; phases: admit (batching, bucket, lease), plan\n"
           "(attention plan), upload (tokens, seats), launch (queue the replay or the eager\n"
           "launches), wait (for the sampled tokens), retire (tokens into the requests)\n");
    if (cfg->tp > 1) {
        printf("allreduce us = a step's allreduces timed alone: 2 a layer (%d layers) of b x %d "
               "floats and\nthe logits' b x %d, on a stream of this rank's device, synchronized; "
               "a split step also\nagrees with the other ranks on what it runs (in admit)\n",
               b->mc->n_layers, b->mc->dim, b->mc->vocab_size);
    }
    if (any) {
        printf("device time: what the step's stream ran, told by the trace hook (not among the "
               "timed steps,\nwhich it would slow): replay = the graph's whole replay; matmul, "
               "attention = those kernels;\nother = the other kernels; copies = copies and "
               "fills; waits = waits for other streams,\nhost functions and allreduces; "
               "hand-off = the stream worker's wait, after its own parts of\nsplit kernels, for "
               "the pool's (included in the kernels' times); split/launches = kernels\nrun on "
               "more than one thread / all kernels run\n");
    }
    printf("checked: every timed step decoded b rows; graphs on and off generated the same "
           "tokens\n");
}

/* ---- setup, run, teardown -------------------------------------------------------------------- */

/* What a step reads and computes, from the model's shape, and what the machine can do. A step
 * reads every weight matrix once (whatever the batch: a matmul reads each weight row once per
 * tile of batch rows), the norms' weights and one embedding row per token, which is left out.
 * Split over N ranks, a rank reads its share of each layer's matrices and of the classifier, and
 * every norm (model.h), on its share of the host's cores (mpirun binds each rank to cores
 * of its own where there are enough): the figures are then rank 0's, on cores / N threads.
 *
 * The read bandwidth is the better of two loops on the threads a step computes on (the device's
 * host_threads, else the cores): one buffer as large as the weights read once in contiguous
 * shares, and the step's own matrices, each its own buffer, every thread streaming its share of
 * one after another, passes back to back (bench_read_bandwidth_split), which is how the matmuls
 * read them at small batches. The limit a step is read against is then what a plain loop
 * reaches on this machine with the step's weights and threads. */
static void measure_machine(decode_bench *b) {
    const acg_model_config *c = b->mc;
    double dim = c->dim, hidden = c->hidden_dim,
           kv_dim = (double)c->dim / c->n_heads * c->n_kv_heads, ranks = (double)b->cfg->tp;
    double per_layer = dim * dim * 2 + dim * kv_dim * 2 + dim * hidden * 3; /* wq wo wk wv w1-3 */
    double matmul_params = (c->n_layers * per_layer + dim * c->vocab_size) / ranks;
    b->weight_bytes = 4.0 * (matmul_params + (2.0 * c->n_layers + 1) * dim);
    b->flops_per_token = 2.0 * matmul_params;
    const acg_capability *cap = acg_device_get_capability(b->dev);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN) / (long)b->cfg->tp;
    if (cap != NULL && cap->host_threads > 0 && (long)cap->host_threads < cpus) {
        cpus = (long)cap->host_threads; /* fewer threads than cores: cpu:0?threads=N */
    }
    b->threads = cpus < 1 ? 1 : cpus > BENCH_MAX_THREADS ? BENCH_MAX_THREADS : (unsigned)cpus;
    const double layer[] = {dim * dim,    dim * kv_dim, dim * kv_dim, dim * dim,
                            dim * hidden, dim * hidden, dim * hidden};
    size_t n = 0, *sizes = malloc(((size_t)c->n_layers * 7 + 1) * sizeof *sizes);
    for (int l = 0; sizes != NULL && l < c->n_layers; l++) {
        for (size_t k = 0; k < 7; k++) {
            sizes[n++] = (size_t)(4.0 * layer[k] / ranks);
        }
    }
    if (sizes != NULL) {
        sizes[n++] = (size_t)(4.0 * dim * c->vocab_size / ranks);
    }
    b->read_flat_gbs = bench_read_bandwidth((size_t)b->weight_bytes, b->threads);
    b->read_split_gbs = sizes != NULL ? bench_read_bandwidth_split(sizes, n, b->threads) : NAN;
    free(sizes);
    b->read_gbs = fmax(b->read_flat_gbs, b->read_split_gbs);
    b->peak_gflops = bench_fma_peak(b->threads, &b->peak_level);
}

/* With several ranks: the bench's own device group (a collective call), its stream, and the
 * values its allreduces sum (as many as the widest, the logits'), zeros, so that sums of them
 * stay zero (no denormal or overflow changes what an allreduce costs). */
static int open_group(decode_bench *b, uint32_t max_batch) {
    size_t width = b->mc->vocab_size > b->mc->dim ? (size_t)b->mc->vocab_size : (size_t)b->mc->dim;
    size_t bytes = (size_t)max_batch * width * sizeof(float);
    acg_status st = acg_device_group_create(b->dev, b->ranks.comm, &b->group);
    if (st != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "creating the device group");
    }
    if ((st = acg_stream_create(b->dev, &b->stream)) != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "creating a stream");
    }
    if ((st = acg_buffer_alloc(b->dev, bytes, &b->reduced)) != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "allocating the values to reduce");
    }
    if ((st = acg_fill(b->stream, b->reduced, 0, bytes, 0, sizeof(float))) == ACG_OK) {
        st = acg_stream_synchronize(b->stream);
    }
    if (st != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "clearing the values to reduce");
    }
    return TOOL_EXIT_OK;
}

/* Frees whatever open_group made. Returns rc, or after a good run a teardown failure. */
static int close_group(decode_bench *b, int rc) {
    acg_status st = acg_stream_destroy(b->stream);
    if (st != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = bench_ranks_fail(&b->ranks, st, "destroying the stream");
    }
    if ((st = acg_buffer_free(b->reduced)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = bench_ranks_fail(&b->ranks, st, "freeing the values to reduce");
    }
    if ((st = acg_device_group_destroy(b->group)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = bench_ranks_fail(&b->ranks, st, "destroying the device group");
    }
    return rc;
}

/* The device: --backend's, or with several ranks one that has collectives (bench_ranks_device).
 * A failure names the rank, since each rank opens its own. */
static int open_device(decode_bench *b) {
    bench_common c = b->cfg->common;
    c.backend = bench_ranks_device(&b->ranks, c.backend);
    if (b->ranks.comm == NULL) {
        return bench_device_open(&c, &b->dev, NULL);
    }
    acg_status st = acg_device_open(c.backend, &b->dev);
    if (st != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "opening the device");
    }
    return TOOL_EXIT_OK;
}

/* --steps-per-launch: each batch size at each depth, on the bench's device and weights. */
static int run_loops(decode_bench *b, uint64_t t_start) {
    const decode_config *cfg = b->cfg;
    uint32_t deepest = 1;
    for (size_t k = 0; k < cfg->n_depths; k++) {
        deepest = cfg->depths[k] > deepest ? cfg->depths[k] : deepest;
    }
    const uint32_t room =
        b->mc->seq_len > (int32_t)PROMPT_LEN ? (uint32_t)b->mc->seq_len - PROMPT_LEN : 0;
    const uint32_t needed = 1 + decode_loop_needed(cfg->steps, deepest);
    if (needed > room) {
        return tool_usage_error(bench_decode_usage,
                                "bench decode: --steps %u at %u steps per launch needs requests "
                                "of %u tokens, more than the model's seq_len %d",
                                cfg->steps, deepest, PROMPT_LEN + needed, b->mc->seq_len);
    }
    decode_loop_result *results = calloc(cfg->n_batch * cfg->n_depths, sizeof *results);
    if (results == NULL) {
        return tool_failf("bench decode", "out of host memory");
    }
    int rc = open_device(b);
    const decode_loop_config lc = {b->dev,      b->weights,    cfg->batch, cfg->n_batch,
                                   cfg->depths, cfg->n_depths, cfg->steps, needed};
    if (rc == TOOL_EXIT_OK) {
        rc = decode_loop_run(&lc, results);
    }
    if (rc == TOOL_EXIT_OK && cfg->common.json) {
        tool_json j;
        tool_json_begin(&j, stdout);
        tool_json_object_begin(&j, NULL);
        bench_json_device(&j, b->dev);
        tool_json_string(&j, "preset", cfg->preset);
        tool_json_string(&j, "model", cfg->model);
        tool_json_uint(&j, "steps", cfg->steps);
        tool_json_uint(&j, "prompt_tokens", PROMPT_LEN);
        decode_loop_json(&j, &lc, results);
        tool_json_number(&j, "seconds", (double)(tool_now_ns() - t_start) / 1e9);
        tool_json_object_end(&j);
        rc = tool_json_end(&j);
    } else if (rc == TOOL_EXIT_OK) {
        bench_print_title(&cfg->common, b->dev);
        printf("%s %s: dim %d, %d layers, vocab %d, seq_len %d; %.1f s\n",
               cfg->preset ? "preset" : "model", cfg->preset ? cfg->preset : cfg->model, b->mc->dim,
               b->mc->n_layers, b->mc->vocab_size, b->mc->seq_len,
               (double)(tool_now_ns() - t_start) / 1e9);
        decode_loop_table(&lc, results);
    }
    free(results);
    return bench_device_close(b->dev, rc);
}

/* Runs every batch size with the ranks joined. */
static int run_joined(decode_bench *b) {
    const decode_config *cfg = b->cfg;
    uint64_t t_start = tool_now_ns();
    acg_status st;
    if (cfg->preset) {
        acg_model_config c = ACG_MODEL_CONFIG_INIT;
        /* Every rank finds the usage errors here: rank 0 says them. */
        if ((st = acg_model_preset_get_config(cfg->preset, &c)) != ACG_OK) {
            if (bench_ranks_prints(&b->ranks)) {
                tool_usage_error(bench_decode_usage, "bench decode: %s", acg_last_error());
            }
            return TOOL_EXIT_USAGE;
        }
        if ((st = acg_model_preset_load(cfg->preset, 1, &b->weights)) != ACG_OK) {
            return bench_ranks_fail(&b->ranks, st, "building the preset");
        }
    } else if ((st = acg_model_weights_load(cfg->model, &b->weights)) != ACG_OK) {
        return bench_ranks_fail(&b->ranks, st, "loading the model");
    }
    b->mc = acg_model_weights_get_config(b->weights);
    int rc = TOOL_EXIT_OK;
    if (cfg->n_depths != 0) {
        rc = run_loops(b, t_start);
        goto out_free_weights;
    }
    /* A request may hold seq_len tokens, the prompt included. */
    uint32_t room =
        b->mc->seq_len > (int32_t)PROMPT_LEN ? (uint32_t)b->mc->seq_len - PROMPT_LEN : 0;
    uint32_t needed = needed_tokens(cfg->steps);
    if (needed > room) {
        rc = TOOL_EXIT_USAGE;
        if (bench_ranks_prints(&b->ranks)) {
            tool_usage_error(bench_decode_usage,
                             "bench decode: --steps %u needs requests of %u tokens, more than the "
                             "model's seq_len %d",
                             cfg->steps, PROMPT_LEN + needed, b->mc->seq_len);
        }
        goto out_free_weights;
    }
    b->max_new = room - needed < PREFILL_ALLOWANCE ? room : needed + PREFILL_ALLOWANCE;
    uint32_t max_batch = 0;
    for (size_t i = 0; i < cfg->n_batch; i++) {
        max_batch = cfg->batch[i] > max_batch ? cfg->batch[i] : max_batch;
    }
    bool allocated = true;
    for (int m = 0; m < N_MODES; m++) {
        b->ids[m] = malloc(max_batch * sizeof(uint64_t));
        b->step_ns[m] = malloc(cfg->steps * sizeof(double));
        b->submit_ns[m] = malloc(cfg->steps * sizeof(double));
        allocated = allocated && b->ids[m] && b->step_ns[m] && b->submit_ns[m];
        for (int p = 0; p < N_PHASES; p++) {
            b->phase_ns[m][p] = malloc(cfg->steps * sizeof(double));
            allocated = allocated && b->phase_ns[m][p];
        }
    }
    b->allreduce_ns = malloc(cfg->steps * sizeof(double));
    if (!allocated || !b->allreduce_ns) {
        rc = bench_ranks_failf(&b->ranks, "bench decode", "out of host memory");
        goto out_free_host;
    }
    if ((rc = open_device(b)) != TOOL_EXIT_OK) {
        goto out_free_host;
    }
    /* Only the rank that prints measures the machine, alone: the others wait for it in the
     * first collective, which naps (acg_mpi.h) and leaves it the cores. */
    if (bench_ranks_prints(&b->ranks)) {
        measure_machine(b);
    }
    if (b->ranks.comm != NULL) {
        rc = open_group(b, max_batch);
    }
    for (size_t i = 0; i < cfg->n_batch && rc == TOOL_EXIT_OK; i++) {
        rc = run_batch(b, cfg->batch[i], &b->results[i]);
    }
    if (rc == TOOL_EXIT_OK && bench_ranks_prints(&b->ranks)) {
        double seconds = (double)(tool_now_ns() - t_start) / 1e9;
        if (cfg->common.json) {
            rc = report_json(b, seconds);
        } else {
            report_table(b, seconds);
        }
    }
    rc = close_group(b, rc);
    rc = bench_device_close(b->dev, rc);
out_free_host:
    for (int m = 0; m < N_MODES; m++) {
        free(b->ids[m]);
        free(b->step_ns[m]);
        free(b->submit_ns[m]);
        for (int p = 0; p < N_PHASES; p++) {
            free(b->phase_ns[m][p]);
        }
    }
    free(b->allreduce_ns);
out_free_weights:
    if ((st = acg_model_weights_free(b->weights)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = bench_ranks_fail(&b->ranks, st, "freeing the weights");
    }
    return rc;
}

static int run(const decode_config *cfg) {
    decode_bench b;
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    int rc = bench_ranks_join(&b.ranks, cfg->tp, "bench decode");
    tool_trace *trace = NULL;
    if (rc == TOOL_EXIT_OK && cfg->trace != NULL) {
        /* Each rank its own file, checked before any work. */
        char path[4096];
        const char *file = cfg->trace;
        char process[64];
        snprintf(process, sizeof process, "acg bench decode");
        if (b.ranks.comm != NULL) {
            snprintf(path, sizeof path, "%s.rank%ld", cfg->trace, (long)b.ranks.rank);
            snprintf(process, sizeof process, "acg bench decode (rank %ld)", (long)b.ranks.rank);
            file = path;
        }
        tool_trace_options o = {.path = file,
                                .process = process,
                                .pid = (int64_t)getpid(),
                                .observe = profile_observe,
                                .user = &b.profile,
                                .observe_categories = ACG_TRACE_STREAM};
        rc = tool_trace_open(&o, &trace);
        b.trace = trace;
        if (rc == TOOL_EXIT_OK) {
            rc = tool_trace_start(trace);
        }
    }
    if (rc == TOOL_EXIT_OK) {
        rc = run_joined(&b);
    }
    rc = tool_trace_finish(trace, rc);
    bench_ranks_leave(&b.ranks, rc);
    return rc;
}

/* ---- command line ---------------------------------------------------------------------------- */

/* Parses "1,8,32" into out: whole numbers in [lo, hi], at most max of them. */
static bool parse_list(const char *text, uint64_t lo, uint64_t hi, size_t max, uint32_t *out,
                       size_t *n) {
    char list[BATCH_LIST_MAX + 1];
    size_t len = strlen(text);
    if (len == 0 || len > BATCH_LIST_MAX) {
        return false;
    }
    memcpy(list, text, len + 1);
    *n = 0;
    for (char *item = list;;) {
        char *comma = strchr(item, ',');
        if (comma) {
            *comma = '\0';
        }
        uint64_t v = 0;
        if (*n == max || !tool_parse_u64(item, lo, hi, &v)) {
            return false;
        }
        out[(*n)++] = (uint32_t)v;
        if (!comma) {
            return true;
        }
        item = comma + 1;
    }
}

/* --steps-per-launch: depths in [1, 1024], each once, 1 (one step per launch) put first when the
 * list lacks it. */
static bool parse_depths(const char *text, decode_config *cfg) {
    uint32_t d[DECODE_LOOP_MAX_DEPTHS];
    size_t n = 0;
    if (!parse_list(text, 1, 1024, DECODE_LOOP_MAX_DEPTHS - 1, d, &n)) {
        return false;
    }
    cfg->n_depths = 0;
    cfg->depths[cfg->n_depths++] = 1;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < cfg->n_depths; k++) {
            seen = seen || cfg->depths[k] == d[i];
        }
        if (!seen) {
            cfg->depths[cfg->n_depths++] = d[i];
        }
    }
    return true;
}

int bench_decode(int argc, char **argv) {
    decode_config cfg = {.common = {"bench decode", bench_decode_usage, NULL, false},
                         .preset = NULL,
                         .model = NULL,
                         .steps = 32,
                         .tp = 1};
    cfg.n_batch = sizeof default_batches / sizeof default_batches[0];
    memcpy(cfg.batch, default_batches, sizeof default_batches);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        uint64_t steps = 0;
        int m = bench_common_option(argc, argv, &i, &cfg.common);
        if (m == BENCH_OPTION_TAKEN) {
            continue;
        }
        if (m != BENCH_OPTION_OTHER) {
            return m;
        }
        if ((m = tool_option(argc, argv, &i, "--preset", &v)) != 0) {
            if (m < 0 || !v[0]) {
                return tool_usage_error(bench_decode_usage, "bench decode: --preset needs P");
            }
            cfg.preset = v;
        } else if ((m = tool_option(argc, argv, &i, "--model", &v)) != 0) {
            if (m < 0 || !v[0]) {
                return tool_usage_error(bench_decode_usage, "bench decode: --model needs F");
            }
            cfg.model = v;
        } else if ((m = tool_option(argc, argv, &i, "--batch", &v)) != 0) {
            if (m < 0 ||
                !parse_list(v, MIN_BATCH, MAX_BATCH, MAX_BATCH_SIZES, cfg.batch, &cfg.n_batch)) {
                return tool_usage_error(bench_decode_usage,
                                        "bench decode: --batch takes a comma list of at most %u "
                                        "whole numbers in [%u, %u]",
                                        MAX_BATCH_SIZES, MIN_BATCH, MAX_BATCH);
            }
        } else if ((m = tool_option(argc, argv, &i, "--steps", &v)) != 0) {
            int rc = tool_option_u64(bench_decode_usage, "bench decode: ", "--steps",
                                     m > 0 ? v : NULL, 1, MAX_STEPS, &steps);
            if (rc != TOOL_EXIT_OK) {
                return rc;
            }
            cfg.steps = (uint32_t)steps;
        } else if ((m = tool_option(argc, argv, &i, "--steps-per-launch", &v)) != 0) {
            if (m < 0 || !parse_depths(v, &cfg)) {
                return tool_usage_error(bench_decode_usage,
                                        "bench decode: --steps-per-launch takes a comma list of at "
                                        "most %u whole numbers in [1, 1024]",
                                        DECODE_LOOP_MAX_DEPTHS - 1);
            }
        } else if ((m = tool_option(argc, argv, &i, "--trace", &v)) != 0) {
            if (m < 0 || !v[0]) {
                return tool_usage_error(bench_decode_usage, "bench decode: --trace needs FILE");
            }
            cfg.trace = v;
        } else if ((m = tool_option(argc, argv, &i, "--tp", &v)) != 0) {
            int rc = tool_option_u64(bench_decode_usage, "bench decode: ", "--tp", m > 0 ? v : NULL,
                                     1, MAX_TP, &cfg.tp);
            if (rc != TOOL_EXIT_OK) {
                return rc;
            }
        } else {
            return bench_unknown_argument(&cfg.common, argv[i]);
        }
    }
    if (cfg.preset && cfg.model) {
        return tool_usage_error(bench_decode_usage,
                                "bench decode: --preset and --model exclude each other");
    }
    if (!cfg.model && !cfg.preset) {
        cfg.preset = "tiny";
    }
    if (cfg.n_depths != 0 && cfg.tp > 1) {
        return tool_usage_error(bench_decode_usage,
                                "bench decode: --steps-per-launch serves one rank: an allreduce "
                                "cannot be in a loop's body");
    }
    return run(&cfg);
}
