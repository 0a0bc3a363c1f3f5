/*
 * decode_loop.c — `acg bench decode --steps-per-launch 1,4,16`: what a decoded token costs when
 * one launch runs N decode steps (model.h, "Decoding steps per launch"), graphs on, against one
 * step per launch (N = 1, always measured too).
 *
 * For each batch size b one model per N serves the same weights on one device, graphs on, each
 * with max_batch b and steps_per_launch N. Each gets b greedy requests of a short prompt, steps
 * until every request decodes, runs untimed warm-up launches, then timed launches until each
 * row generated `--steps` tokens. The models take turns of RUN_TOKENS tokens, the order
 * swapping every turn, so drift on a shared machine hits all alike. A launch is one
 * acg_model_step: its wall time, and its host part (admission, the plan, the uploads, queuing
 * the forward, retiring the tokens: everything but the wait for the device), each divided by
 * the decode steps it ran, give a decode step's time (a token of every row) and the host's share
 * of it; the figures are medians over the launches. Afterwards every model must have generated the
 * same tokens as N = 1's. Where the device has no loops in graphs every model decodes one step per
 * launch, which the table shows (steps per launch 1).
 */
#include "decode_loop.h"
#include "bench-impl.h"

#include <stdlib.h>
#include <string.h>

#include <acg/model.h>

#define PROMPT_LEN 4u
#define RUN_TOKENS 64u     /* decode steps a model runs before the next one's turn */
#define WARMUP_LAUNCHES 2u /* as decode_loop_needed counts them */
#define MAX_LAUNCHES (1u << 20)

/* The host phases of acg_step_report, all but the wait. */
enum { ADMIT, PLAN, UPLOAD, LAUNCH, RETIRE, N_HOST_PHASES };
static const char *const host_phase_names[N_HOST_PHASES] = {"admit", "plan", "upload", "launch",
                                                            "retire"};

typedef struct loop_model {
    uint32_t n; /* steps_per_launch asked for */
    acg_model *model;
    uint64_t *ids;                /* (batch) */
    double *wall, *host;          /* (launches) per token, ns */
    double *phase[N_HOST_PHASES]; /* (launches) per launch, ns */
    uint32_t launches, cap;       /* timed launches so far */
    uint32_t generated;           /* timed tokens per row so far */
    uint32_t longest;             /* most decode steps one launch ran */
    uint32_t replayed;            /* timed launches replayed from a graph */
} loop_model;

static int create(const decode_loop_config *c, uint32_t batch, loop_model *lm) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = batch;
    o.max_step_tokens = batch > 64 ? batch : 64;
    uint32_t tokens = PROMPT_LEN + c->max_new;
    o.kv_pages = batch * ((tokens + o.page_size - 1) / o.page_size) + 1;
    o.graphs = ACG_GRAPHS_ON;
    o.steps_per_launch = lm->n;
    acg_status st = acg_model_create(c->dev, c->weights, &o, &lm->model);
    if (st != ACG_OK) {
        return tool_fail(st, "creating a model");
    }
    const int32_t vocab = acg_model_weights_get_config(c->weights)->vocab_size;
    const int32_t first = vocab > (int32_t)ACG_TOKEN_BYTE0 ? ACG_TOKEN_BYTE0 : 0;
    for (uint32_t r = 0; r < batch; r++) {
        int32_t prompt[PROMPT_LEN];
        for (uint32_t k = 0; k < PROMPT_LEN; k++) {
            prompt[k] =
                first + (int32_t)(((uint64_t)r * PROMPT_LEN + k) % (uint32_t)(vocab - first));
        }
        acg_request q = ACG_REQUEST_INIT;
        q.prompt = prompt;
        q.prompt_len = PROMPT_LEN;
        q.max_new_tokens = c->max_new;
        if ((st = acg_model_submit(lm->model, &q, &lm->ids[r])) != ACG_OK) {
            return tool_fail(st, "submitting a request");
        }
    }
    /* Steps until every request read its prompt and sampled a token (max_step_tokens at a time:
     * each step reads at least one prompt token, which bounds the steps). */
    for (uint32_t step = 0;; step++) {
        uint32_t decoding = 0;
        for (uint32_t r = 0; r < batch; r++) {
            acg_request_status rs = ACG_REQUEST_STATUS_INIT;
            if ((st = acg_model_get_request(lm->model, lm->ids[r], &rs)) != ACG_OK) {
                return tool_fail(st, "reading a request");
            }
            decoding += rs.n_generated > 0;
        }
        if (decoding == batch) {
            return TOOL_EXIT_OK;
        }
        if (step == batch * PROMPT_LEN) {
            return tool_failf("bench decode: prompts not read",
                              "%u of %u requests decoding after %u steps", decoding, batch, step);
        }
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        if ((st = acg_model_step(lm->model, &rep)) != ACG_OK) {
            return tool_fail(st, "reading the prompts");
        }
    }
}

/* One launch of the model's `batch` rows; timed: its per-token wall and host times are kept. */
static int launch(uint32_t batch, loop_model *lm, bool timed) {
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    uint64_t t0 = tool_now_ns();
    acg_status st = acg_model_step(lm->model, &rep);
    uint64_t t1 = tool_now_ns();
    if (st != ACG_OK) {
        return tool_fail(st, "running a decode launch");
    }
    if (rep.rows != batch || rep.steps == 0 || rep.generated != batch * rep.steps) {
        return tool_failf("bench decode: not a decode launch",
                          "steps_per_launch %u, batch %u: %u rows, %u steps, %u generated", lm->n,
                          batch, rep.rows, rep.steps, rep.generated);
    }
    lm->longest = rep.steps > lm->longest ? rep.steps : lm->longest;
    if (!timed) {
        return TOOL_EXIT_OK;
    }
    if (lm->launches == lm->cap) {
        return tool_failf("bench decode", "more launches than %u", lm->cap);
    }
    const double ms[N_HOST_PHASES] = {rep.admit_ms, rep.plan_ms, rep.upload_ms, rep.launch_ms,
                                      rep.retire_ms};
    double host_ms = 0.0;
    for (int p = 0; p < N_HOST_PHASES; p++) {
        lm->phase[p][lm->launches] = ms[p] * 1e6;
        host_ms += ms[p];
    }
    lm->wall[lm->launches] = (double)(t1 - t0) / rep.steps;
    lm->host[lm->launches] = host_ms * 1e6 / rep.steps;
    lm->launches++;
    lm->generated += rep.steps;
    lm->replayed += rep.graphed;
    return TOOL_EXIT_OK;
}

/* Every model's tokens are N = 1's (models[0]). */
static int compare(const decode_loop_config *c, uint32_t batch, loop_model *models) {
    for (size_t k = 1; k < c->n_depths; k++) {
        for (uint32_t r = 0; r < batch; r++) {
            acg_request_status a = ACG_REQUEST_STATUS_INIT, b = ACG_REQUEST_STATUS_INIT;
            acg_status st = acg_model_get_request(models[0].model, models[0].ids[r], &a);
            if (st == ACG_OK) {
                st = acg_model_get_request(models[k].model, models[k].ids[r], &b);
            }
            if (st != ACG_OK) {
                return tool_fail(st, "reading a request");
            }
            uint32_t n = a.n_tokens < b.n_tokens ? a.n_tokens : b.n_tokens;
            if (memcmp(a.tokens, b.tokens, n * sizeof *a.tokens) != 0) {
                return tool_failf("bench decode: loops change the tokens",
                                  "batch %u, request %u: steps_per_launch %u differs from 1", batch,
                                  r, models[k].n);
            }
        }
    }
    return TOOL_EXIT_OK;
}

static int run_batch(const decode_loop_config *c, uint32_t batch, decode_loop_result *out) {
    loop_model models[DECODE_LOOP_MAX_DEPTHS];
    memset(models, 0, sizeof models);
    int rc = TOOL_EXIT_OK;
    for (size_t k = 0; k < c->n_depths && rc == TOOL_EXIT_OK; k++) {
        loop_model *lm = &models[k];
        lm->n = c->depths[k];
        lm->cap = c->tokens + 1;
        lm->ids = malloc(batch * sizeof *lm->ids);
        lm->wall = malloc(lm->cap * sizeof *lm->wall);
        lm->host = malloc(lm->cap * sizeof *lm->host);
        bool phases = true;
        for (int p = 0; p < N_HOST_PHASES; p++) {
            lm->phase[p] = malloc(lm->cap * sizeof *lm->phase[p]);
            phases = phases && lm->phase[p] != NULL;
        }
        if (!lm->ids || !lm->wall || !lm->host || !phases) {
            rc = tool_failf("bench decode", "out of host memory");
        } else {
            rc = create(c, batch, lm);
        }
    }
    for (uint32_t w = 0; w < WARMUP_LAUNCHES && rc == TOOL_EXIT_OK; w++) {
        for (size_t k = 0; k < c->n_depths && rc == TOOL_EXIT_OK; k++) {
            rc = launch(batch, &models[k], false);
        }
    }
    for (uint32_t turn = 0; rc == TOOL_EXIT_OK; turn++) {
        bool left = false;
        for (size_t i = 0; i < c->n_depths && rc == TOOL_EXIT_OK; i++) {
            loop_model *lm = &models[(i + turn) % c->n_depths];
            uint32_t goal =
                (turn + 1) * RUN_TOKENS < c->tokens ? (turn + 1) * RUN_TOKENS : c->tokens;
            while (lm->generated < goal && rc == TOOL_EXIT_OK) {
                rc = launch(batch, lm, true);
            }
            left = left || lm->generated < c->tokens;
        }
        if (!left) {
            break;
        }
    }
    if (rc == TOOL_EXIT_OK) {
        rc = compare(c, batch, models);
    }
    for (size_t k = 0; k < c->n_depths && rc == TOOL_EXIT_OK; k++) {
        decode_loop_result *r = &out[k];
        r->batch = batch;
        r->depth = models[k].n;
        r->longest = models[k].longest;
        r->launches = models[k].launches;
        r->replayed = models[k].replayed;
        r->step_us = tool_median(models[k].wall, models[k].launches) / 1e3;
        r->host_step_us = tool_median(models[k].host, models[k].launches) / 1e3;
        for (int p = 0; p < N_HOST_PHASES; p++) {
            r->launch_phase_us[p] = tool_median(models[k].phase[p], models[k].launches) / 1e3;
        }
    }
    for (size_t k = 0; k < c->n_depths; k++) {
        if (models[k].model != NULL) {
            acg_status st = acg_model_destroy(models[k].model);
            if (st != ACG_OK && rc == TOOL_EXIT_OK) {
                rc = tool_fail(st, "destroying a model");
            }
        }
        free(models[k].ids);
        free(models[k].wall);
        free(models[k].host);
        for (int p = 0; p < N_HOST_PHASES; p++) {
            free(models[k].phase[p]);
        }
    }
    return rc;
}

int decode_loop_run(const decode_loop_config *c, decode_loop_result *results) {
    int rc = TOOL_EXIT_OK;
    for (size_t i = 0; i < c->n_batch && rc == TOOL_EXIT_OK; i++) {
        rc = run_batch(c, c->batch[i], &results[i * c->n_depths]);
    }
    return rc;
}

void decode_loop_table(const decode_loop_config *c, const decode_loop_result *results) {
    printf(
        "per batch size b and N steps per launch: b greedy requests of a %u-token prompt, "
        "graphs on;\n%u timed tokens per row, the models in turns of %u; a decode step's time (a "
        "token of every row)\nand its host part (admit, plan, upload, launch, retire: all "
        "but the wait) are medians over\nthe launches\n\n",
        PROMPT_LEN, c->tokens, RUN_TOKENS);
    static const char *const headers[] = {"batch",        "N",     "steps/launch", "us/step",
                                          "host us/step", "tok/s", "vs N=1",       "host vs N=1",
                                          "replayed"};
    static const int widths[] = {5, 4, 12, 8, 13, 8, 6, 11, 8};
    tool_table t;
    tool_table_begin(&t, stdout, 9, widths, headers);
    for (size_t i = 0; i < c->n_batch; i++) {
        const decode_loop_result *base = &results[i * c->n_depths];
        for (size_t k = 0; k < c->n_depths; k++) {
            const decode_loop_result *r = &base[k];
            tool_table_cell(&t, "%u", r->batch);
            tool_table_cell(&t, "%u", r->depth);
            tool_table_cell(&t, "%u", r->longest);
            tool_table_cell(&t, "%.1f", r->step_us);
            tool_table_cell(&t, "%.2f", r->host_step_us);
            tool_table_cell(&t, "%.0f", r->batch * 1e6 / r->step_us);
            tool_table_cell(&t, "%.2f", base[0].step_us / r->step_us);
            tool_table_cell(&t, "%.3f", r->host_step_us / base[0].host_step_us);
            tool_table_cell(&t, "%u/%u", r->replayed, r->launches);
        }
    }
    printf("\nvs N=1: N=1's time per step over this one's (above 1: faster); host vs N=1: this "
           "one's host time\nper step over N=1's. Every model's tokens equal N=1's.\n");
}

void decode_loop_json(tool_json *j, const decode_loop_config *c,
                      const decode_loop_result *results) {
    tool_json_array_begin(j, "steps_per_launch");
    for (size_t i = 0; i < c->n_batch; i++) {
        const decode_loop_result *base = &results[i * c->n_depths];
        for (size_t k = 0; k < c->n_depths; k++) {
            const decode_loop_result *r = &base[k];
            tool_json_object_begin(j, NULL);
            tool_json_uint(j, "batch", r->batch);
            tool_json_uint(j, "steps_per_launch", r->depth);
            tool_json_uint(j, "longest_launch_steps", r->longest);
            tool_json_uint(j, "launches", r->launches);
            tool_json_uint(j, "replayed_launches", r->replayed);
            tool_json_number(j, "step_us", r->step_us);
            tool_json_number(j, "host_step_us", r->host_step_us);
            tool_json_number(j, "tokens_per_s", r->batch * 1e6 / r->step_us);
            tool_json_number(j, "speedup_vs_1", base[0].step_us / r->step_us);
            tool_json_number(j, "host_ratio_vs_1", r->host_step_us / base[0].host_step_us);
            tool_json_object_begin(j, "launch_host_phases_us");
            for (int p = 0; p < N_HOST_PHASES; p++) {
                tool_json_number(j, host_phase_names[p], r->launch_phase_us[p]);
            }
            tool_json_object_end(j);
            tool_json_bool(j, "tokens_match", true);
            tool_json_object_end(j);
        }
    }
    tool_json_array_end(j);
}
