/*
 * run_report.c — what `acg run` tells (run.c runs it): on a terminal each bucket's capture as it
 * happens, from the library's trace events (the hook --trace uses too); the buckets' table; each
 * request's text (its prompt, then the continuation) and the summary, or all of it as JSON.
 */
#include "run.h"
#include "tool_cli.h"
#include "tool_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- output ---------------------------------------------------------------------------------- */

/* Writes bytes a terminal shows safely: printable ASCII and newlines as they are, UTF-8 as it
 * is, other control bytes as \xNN. */
static void put_text(FILE *out, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n' || c >= 0x80 || (c >= 0x20 && c != 0x7f)) {
            fputc(c, out);
        } else {
            fprintf(out, "\\x%02x", c);
        }
    }
}

/* The continuation's text, each generated token decoded after the one before it, as one
 * string (malloc'd; NULL when out of memory). */
static char *continuation_string(const run_state *st, const run_request *r) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (f == NULL) {
        return NULL;
    }
    int32_t prev = r->n_ids > 0 ? r->ids[r->n_ids - 1] : ACG_TOKEN_BOS;
    for (uint32_t i = 0; i < r->n_generated; i++) {
        const char *piece = acg_tokenizer_decode(st->tok, prev, r->generated[i]);
        if (piece != NULL) {
            fputs(piece, f);
        }
        prev = r->generated[i];
    }
    fclose(f);
    return buf;
}

/* ---- start-up: capture progress, the buckets' report, the trace ------------------------------ */

static uint64_t arg_u64(const acg_trace_event *ev, const char *key) {
    for (uint32_t i = 0; i < ev->n_args; i++) {
        if (strcmp(ev->args[i].key, key) == 0 && ev->args[i].type == ACG_TRACE_ARG_UINT) {
            return ev->args[i].value.u;
        }
    }
    return 0;
}

static const char *arg_string(const acg_trace_event *ev, const char *key) {
    for (uint32_t i = 0; i < ev->n_args; i++) {
        if (strcmp(ev->args[i].key, key) == 0 && ev->args[i].type == ACG_TRACE_ARG_STRING) {
            return ev->args[i].value.s;
        }
    }
    return "";
}

static bool arg_bool(const acg_trace_event *ev, const char *key) {
    for (uint32_t i = 0; i < ev->n_args; i++) {
        if (strcmp(ev->args[i].key, key) == 0 && ev->args[i].type == ACG_TRACE_ARG_BOOL) {
            return ev->args[i].value.b;
        }
    }
    return false;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* The trace hook's observer on a terminal: "capturing bucket k of n (label, batch, tokens)" as
 * each capture begins, its graph memory (or why it was dropped) when it ends, one line
 * rewritten in place, ended once the runner is created. The engine's events come from the
 * thread creating the model, this one. */
static void observe_capture(const acg_trace_event *ev, void *user) {
    run_state *st = user;
    run_progress *p = &st->capture;
    if (strcmp(ev->name, "capture") == 0 && ev->phase == ACG_TRACE_BEGIN) {
        p->k = arg_u64(ev, "k");
        p->n = arg_u64(ev, "n");
        fprintf(stderr, "\r\033[Kacg: capturing bucket %llu of %llu (%s, batch %llu, tokens %llu)",
                (unsigned long long)p->k, (unsigned long long)p->n, arg_string(ev, "label"),
                (unsigned long long)arg_u64(ev, "batch"),
                (unsigned long long)arg_u64(ev, "tokens"));
        p->line_open = true;
    } else if (strcmp(ev->name, "capture") == 0 && ev->phase == ACG_TRACE_END) {
        if (arg_bool(ev, "captured")) {
            fprintf(stderr, ": graph memory %.2f MiB (pool %.2f MiB)",
                    mib(arg_u64(ev, "graph_bytes")), mib(arg_u64(ev, "pool_bytes")));
        } else {
            fprintf(stderr, ": dropped: %.100s\n", arg_string(ev, "reason"));
            p->line_open = false;
        }
    } else if (strcmp(ev->name, "runner create") == 0 && ev->phase == ACG_TRACE_END &&
               p->line_open) {
        fputc('\n', stderr);
        p->line_open = false;
    }
    fflush(stderr);
}

/* --trace's file: FILE, or FILE.rank<r> with several ranks. Checked before any work. */
int run_open_trace(run_state *st) {
    char path[4096];
    const char *file = st->o.trace;
    if (file != NULL && st->ranks.comm != NULL) {
        snprintf(path, sizeof path, "%s.rank%ld", file, (long)st->ranks.rank);
        file = path;
    }
    if (file == NULL && !st->progress) {
        return TOOL_EXIT_OK;
    }
    char process[64];
    snprintf(process, sizeof process, st->ranks.comm != NULL ? "acg run (rank %ld)" : "acg run",
             (long)st->ranks.rank);
    tool_trace_options o = {.path = file,
                            .process = process,
                            .pid = (int64_t)getpid(),
                            .observe = st->progress ? observe_capture : NULL,
                            .user = st,
                            .observe_categories = ACG_TRACE_ENGINE};
    int rc = tool_trace_open(&o, &st->trace);
    return rc == TOOL_EXIT_OK ? tool_trace_start(st->trace) : rc;
}

/* Keeps what the runner's creation did, bucket by bucket, for the report. */
int run_keep_buckets(run_state *st, const acg_model *model) {
    const acg_runner *runner = acg_model_get_runner(model);
    uint32_t n = acg_runner_get_bucket_count(runner);
    st->buckets = calloc(n + 1, sizeof *st->buckets);
    st->labels = calloc(n + 1, sizeof *st->labels);
    if (st->buckets == NULL || st->labels == NULL) {
        return run_failf(st, "reading the buckets", "out of memory");
    }
    st->n_buckets = n;
    acg_status s = acg_runner_get_pool_bytes(runner, &st->pool_bytes);
    for (uint32_t b = 0; b < n && s == ACG_OK; b++) {
        acg_bucket_report *r = &st->buckets[b];
        r->size = sizeof *r;
        s = acg_runner_get_report(runner, b, r);
        if (s == ACG_OK) {
            snprintf(st->labels[b], sizeof st->labels[b], "%s", r->key.label);
            r->key.label = st->labels[b];
        }
    }
    return s == ACG_OK ? TOOL_EXIT_OK : run_fail(st, s, "reading the buckets");
}

static const char *state_name(acg_bucket_state state) {
    return state == ACG_BUCKET_CAPTURED  ? "captured"
           : state == ACG_BUCKET_DROPPED ? "dropped"
                                         : "eager";
}

/* The largest graph memory of a captured bucket: what the pool would hold for it alone. */
static uint64_t largest_graph(const run_state *st) {
    uint64_t most = 0;
    for (uint32_t b = 0; b < st->n_buckets; b++) {
        most = st->buckets[b].graph_bytes > most ? st->buckets[b].graph_bytes : most;
    }
    return most;
}

/* The start-up table, on stderr: every bucket, what became of it and what its graphs cost. */
void run_print_buckets(const run_state *st) {
    static const char *const headers[] = {"bucket",      "batch",      "tokens",
                                          "state",       "eager peak", "graph mem",
                                          "pool growth", "capture ms", "reason"};
    static const int widths[] = {6, 5, 6, -8, 10, 9, 11, 10, -6};
    fprintf(stderr, "acg: buckets (memory in MiB):\n");
    tool_table t;
    tool_table_begin(&t, stderr, 9, widths, headers);
    for (uint32_t b = 0; b < st->n_buckets; b++) {
        const acg_bucket_report *r = &st->buckets[b];
        tool_table_cell(&t, "%u", b);
        tool_table_cell(&t, "%u", r->key.batch);
        tool_table_cell(&t, "%u", r->key.tokens);
        tool_table_cell(&t, "%s", state_name(r->state));
        tool_table_cell(&t, "%.2f", mib(r->eager_peak));
        tool_table_cell(&t, "%.2f", mib(r->graph_bytes));
        tool_table_cell(&t, "%.2f", mib(r->pool_growth));
        tool_table_cell(&t, "%.1f", r->capture_ms);
        tool_table_cell(&t, "%s", r->state == ACG_BUCKET_DROPPED ? r->reason : "");
    }
    uint64_t largest = largest_graph(st);
    if (largest > 0) {
        fprintf(stderr,
                "acg: graph pool %.2f MiB for all buckets: %.2f x the largest bucket's own "
                "(%.2f MiB)\n",
                mib(st->pool_bytes), (double)st->pool_bytes / (double)largest, mib(largest));
    } else {
        fprintf(stderr, "acg: graph pool %.2f MiB: no bucket was captured\n", mib(st->pool_bytes));
    }
}

/* ---- report ---------------------------------------------------------------------------------- */

int run_print_report(const run_state *st, const acg_model_stats *s, double seconds) {
    double tps = seconds > 0 ? (double)s->generated_tokens / seconds : 0.0;
    double step_ms = s->steps ? s->step_ms / (double)s->steps : 0.0;
    if (st->o.json) {
        tool_json j;
        tool_json_begin(&j, stdout);
        tool_json_object_begin(&j, NULL);
        tool_json_string(&j, "backend", acg_device_get_capability(st->dev)->backend);
        tool_json_array_begin(&j, "requests");
        for (size_t i = 0; i < st->n_req; i++) {
            const run_request *r = &st->req[i];
            char *cont = continuation_string(st, r);
            tool_json_object_begin(&j, NULL);
            tool_json_string(&j, "prompt", r->text);
            tool_json_string(&j, "continuation", cont);
            tool_json_array_begin(&j, "tokens");
            for (uint32_t k = 0; k < r->n_generated; k++) {
                tool_json_int(&j, NULL, r->generated[k]);
            }
            tool_json_array_end(&j);
            tool_json_object_end(&j);
            free(cont);
        }
        tool_json_array_end(&j);
        tool_json_uint(&j, "n_requests", st->n_req);
        tool_json_uint(&j, "tokens", s->generated_tokens);
        tool_json_uint(&j, "prompt_tokens", s->prompt_tokens);
        tool_json_number(&j, "tokens_per_s", tps);
        tool_json_uint(&j, "steps", s->steps);
        tool_json_uint(&j, "graphed_steps", s->graphed_steps);
        tool_json_number(&j, "mean_step_ms", step_ms);
        tool_json_uint(&j, "buckets_captured", s->buckets_captured);
        tool_json_uint(&j, "buckets_dropped", s->buckets_dropped);
        tool_json_number(&j, "capture_ms", s->capture_ms);
        tool_json_array_begin(&j, "buckets");
        for (uint32_t b = 0; b < st->n_buckets; b++) {
            const acg_bucket_report *r = &st->buckets[b];
            tool_json_object_begin(&j, NULL);
            tool_json_uint(&j, "bucket", b);
            tool_json_string(&j, "label", r->key.label);
            tool_json_uint(&j, "batch", r->key.batch);
            tool_json_uint(&j, "tokens", r->key.tokens);
            tool_json_string(&j, "state", state_name(r->state));
            tool_json_bool(&j, "captured", r->state == ACG_BUCKET_CAPTURED);
            tool_json_string(&j, "reason", r->state == ACG_BUCKET_DROPPED ? r->reason : NULL);
            tool_json_uint(&j, "graph_bytes", r->graph_bytes);
            tool_json_uint(&j, "pool_growth", r->pool_growth);
            tool_json_uint(&j, "eager_peak", r->eager_peak);
            tool_json_number(&j, "capture_ms", r->capture_ms);
            tool_json_object_end(&j);
        }
        tool_json_array_end(&j);
        tool_json_uint(&j, "pool_bytes", st->pool_bytes);
        uint64_t largest = largest_graph(st);
        tool_json_number(&j, "pool_ratio",
                         largest > 0 ? (double)st->pool_bytes / (double)largest : NAN);
        tool_json_bool(&j, "verified", st->o.verify);
        tool_json_uint(&j, "tp", st->o.tp);
        tool_json_object_end(&j);
        return tool_json_end(&j);
    }
    for (size_t i = 0; i < st->n_req; i++) {
        const run_request *r = &st->req[i];
        printf("[%zu] ", i);
        char *cont = continuation_string(st, r);
        put_text(stdout, r->text);
        put_text(stdout, cont != NULL ? cont : "");
        free(cont);
        printf("\n\n");
    }
    printf("requests %zu, tokens %llu (prompt %llu), %.1f tokens/s, %llu steps (%llu replayed), "
           "mean step %.2f ms\n",
           st->n_req, (unsigned long long)s->generated_tokens, (unsigned long long)s->prompt_tokens,
           tps, (unsigned long long)s->steps, (unsigned long long)s->graphed_steps, step_ms);
    printf("buckets captured %u, dropped %u, capture time %.1f ms\n", s->buckets_captured,
           s->buckets_dropped, s->capture_ms);
    if (st->ranks.comm != NULL) {
        printf("tensor parallel over %llu ranks (rank 0 prints)\n", (unsigned long long)st->o.tp);
    }
    return TOOL_EXIT_OK;
}
