/*
 * run.c — `acg run`: the reference model generating text for a set of prompts, every request
 * batched with the others (continuous batching), each step replayed from a captured bucket.
 *
 * Prints each request's text (its prompt, then the continuation) and a summary; progress goes
 * to stderr. With --verify the same requests run again with graphs off, and any token that
 * differs fails the command.
 *
 * With --tp N the model is split over N ranks by tensor parallelism (model.h): the command runs
 * as every rank of `mpirun -np N`, each on its own device, joined through libacg_mpi. Every rank
 * loads the same weights and serves the same requests; rank 0 alone prints (every rank samples
 * the same tokens), and any rank's failure is printed naming the rank.
 *
 * The start-up is reported: on a terminal, each bucket's capture as it happens (the library's
 * trace events, acg/trace.h, through the same hook --trace uses), then, unless --json, a table
 * of the buckets (captured or dropped and why, the graph memory of each, the pool's total and
 * its ratio to the largest bucket's own); --json carries the same. With --trace FILE the
 * library's trace of the whole run is written to FILE in the Chrome trace-event format
 * (tools/support/tool_trace.h); with --tp N every rank writes its own, FILE.rank<r>.
 */
#include "commands.h"
#include "ranks.h"
#include "tool_cli.h"
#include "tool_report.h"
#include "tool_trace.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acg/model.h>

const char cmd_run_usage[] =
    "usage: acg run [--backend B] [--model FILE --tokenizer FILE | --preset tiny|small]\n"
    "               [--prompt TEXT] [--prompts FILE] [--steps N] [--temperature T] [--top-p P]\n"
    "               [--seed S] [--batch N] [--graphs on|off|require] [--verify] [--json]\n"
    "               [--trace FILE] [--tp N (under mpirun -np N)]\n";

/* The prompts `acg run` serves when given none. */
static const char *const default_prompts[] = {
    "Once upon a time",
    "The little robot looked at the sky and",
    "In a small village by the sea, there lived",
    "Tom and Lily went to the park. They",
    "The best way to learn something new is",
    "A graph captured once can be replayed",
    "She opened the box and found",
    "Every morning the old cat",
};

#define N_DEFAULT_PROMPTS (sizeof default_prompts / sizeof default_prompts[0])
#define MAX_PROMPTS 1024
#define MAX_PROMPT_BYTES 4096

typedef struct run_options {
    const char *backend, *model, *tokenizer, *preset, *prompt, *prompts_file;
    const char *trace; /* --trace FILE */
    uint64_t steps, seed, batch, tp;
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

/* ---- failures -------------------------------------------------------------------------------- */

/* tool_fail and tool_failf, naming the rank when there are several: each rank reports its own. */
static int run_fail(const run_state *st, acg_status status, const char *what) {
    return bench_ranks_fail(&st->ranks, status, what);
}

static int run_failf(const run_state *st, const char *what, const char *fmt, ...) TOOL_PRINTF(3, 4);

static int run_failf(const run_state *st, const char *what, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return bench_ranks_failf(&st->ranks, what, "%s", detail);
}

/* Whether this process prints: with several ranks, rank 0 alone. */
static bool prints(const run_state *st) { return bench_ranks_prints(&st->ranks); }

/* ---- options --------------------------------------------------------------------------------- */

/* The ranges of the numeric options: each checks its option and writes its usage error. */
#define MAX_STEPS (1u << 20)
#define MAX_BATCH 1024u /* acg_model_options.max_batch's limit */
#define MAX_TP 64u      /* a device group's limit */
#define MAX_TEMPERATURE 1e6

static int parse_options(int argc, char **argv, run_options *o) {
    *o = (run_options){.steps = 32,
                       .seed = 0,
                       .batch = 32,
                       .temperature = 0.0,
                       .top_p = 1.0,
                       .graphs = ACG_GRAPHS_AUTO};
    o->tp = 1; /* one rank, no MPI */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (tool_is_help(argv[i])) {
            fputs(cmd_run_usage, stdout);
            return -1;
        }
#define STRING_OPTION(name, field)                                                                 \
    if ((m = tool_option(argc, argv, &i, name, &v)) != 0) {                                        \
        if (m < 0) {                                                                               \
            return tool_usage_error(cmd_run_usage, "%s needs a value", name);                      \
        }                                                                                          \
        o->field = v;                                                                              \
        continue;                                                                                  \
    }
        STRING_OPTION("--backend", backend)
        STRING_OPTION("--model", model)
        STRING_OPTION("--tokenizer", tokenizer)
        STRING_OPTION("--preset", preset)
        STRING_OPTION("--prompt", prompt)
        STRING_OPTION("--prompts", prompts_file)
        STRING_OPTION("--trace", trace)
#undef STRING_OPTION
        /* The other options take a value too: say so when it is missing. */
        static const char *const valued[] = {"--steps", "--seed",   "--batch", "--temperature",
                                             "--top-p", "--graphs", "--tp"};
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) {
            int save = i;
            if (tool_option(argc, argv, &i, valued[k], &v) < 0) {
                return tool_usage_error(cmd_run_usage, "%s needs a value", valued[k]);
            }
            i = save;
        }
        int rc = TOOL_EXIT_OK;
        if ((m = tool_option(argc, argv, &i, "--steps", &v)) != 0) {
            rc = tool_option_u64(cmd_run_usage, "", "--steps", m > 0 ? v : NULL, 1, MAX_STEPS,
                                 &o->steps);
        } else if ((m = tool_option(argc, argv, &i, "--seed", &v)) != 0) {
            rc = tool_option_u64(cmd_run_usage, "", "--seed", m > 0 ? v : NULL, 0, UINT64_MAX,
                                 &o->seed);
        } else if ((m = tool_option(argc, argv, &i, "--batch", &v)) != 0) {
            rc = tool_option_u64(cmd_run_usage, "", "--batch", m > 0 ? v : NULL, 1, MAX_BATCH,
                                 &o->batch);
        } else if ((m = tool_option(argc, argv, &i, "--tp", &v)) != 0) {
            rc = tool_option_u64(cmd_run_usage, "", "--tp", m > 0 ? v : NULL, 1, MAX_TP, &o->tp);
        } else if ((m = tool_option(argc, argv, &i, "--temperature", &v)) != 0) {
            rc = tool_option_double(cmd_run_usage, "", "--temperature", m > 0 ? v : NULL, 0.0,
                                    MAX_TEMPERATURE, false, &o->temperature);
        } else if ((m = tool_option(argc, argv, &i, "--top-p", &v)) != 0) {
            /* A share of the probability mass to sample from: some of it, at most all. */
            rc = tool_option_double(cmd_run_usage, "", "--top-p", m > 0 ? v : NULL, 0.0, 1.0, true,
                                    &o->top_p);
        }
        if (m != 0) {
            if (rc != TOOL_EXIT_OK) {
                return rc;
            }
            continue;
        }
        if ((m = tool_option(argc, argv, &i, "--graphs", &v)) != 0) {
            if (m > 0 && strcmp(v, "on") == 0) {
                o->graphs = ACG_GRAPHS_ON;
            } else if (m > 0 && strcmp(v, "off") == 0) {
                o->graphs = ACG_GRAPHS_OFF;
            } else if (m > 0 && strcmp(v, "require") == 0) {
                o->graphs = ACG_GRAPHS_REQUIRE;
            } else {
                return tool_usage_error(cmd_run_usage, "--graphs takes on, off or require");
            }
            continue;
        }
        if (strcmp(argv[i], "--verify") == 0) {
            o->verify = true;
            continue;
        }
        if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
            continue;
        }
        return tool_usage_error(cmd_run_usage, "unknown argument '%s'", argv[i]);
    }
    int rc = tool_model_options(cmd_run_usage, o->model, o->tokenizer, &o->preset);
    if (rc != TOOL_EXIT_OK) {
        return rc;
    }
    if (o->trace != NULL && o->trace[0] == '\0') {
        return tool_usage_error(cmd_run_usage, "--trace needs a file name");
    }
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    if (o->preset != NULL && acg_model_preset_get_config(o->preset, &c) != ACG_OK) {
        return tool_usage_error(cmd_run_usage, "%s", acg_last_error());
    }
    return 0;
}

/* ---- prompts --------------------------------------------------------------------------------- */

static int add_prompt(run_state *st, const char *text) {
    if (st->n_req == MAX_PROMPTS) {
        return run_failf(st, "reading prompts", "more than %d prompts", MAX_PROMPTS);
    }
    char *copy = strdup(text);
    if (copy == NULL) {
        return run_failf(st, "reading prompts", "out of memory");
    }
    st->req[st->n_req++].text = copy;
    return TOOL_EXIT_OK;
}

/* Reads the next line of f into line (max + 1 bytes), without its '\n', NUL-terminated, and
 * gives its length in *n. Unlike fgets it counts the bytes, so the caller sees a NUL byte that
 * would otherwise end the prompt early. 1: a line; 0: the end of the file (or an error, which
 * ferror tells); -1: the line holds more than max bytes. */
static int read_line(FILE *f, char *line, size_t max, size_t *n) {
    size_t len = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (len == max) {
            return -1;
        }
        line[len++] = (char)c;
    }
    line[len] = '\0';
    *n = len;
    return c == '\n' || len > 0 ? 1 : 0;
}

static int read_prompts(run_state *st) {
    if (st->o.prompt != NULL) {
        int rc = add_prompt(st, st->o.prompt);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    if (st->o.prompts_file != NULL) {
        FILE *f = fopen(st->o.prompts_file, "r");
        if (f == NULL) {
            return run_failf(st, "reading prompts", "cannot open '%s': %s", st->o.prompts_file,
                             strerror(errno));
        }
        char line[MAX_PROMPT_BYTES];
        size_t n = 0, line_no = 0;
        int rc = TOOL_EXIT_OK, got;
        while (rc == TOOL_EXIT_OK && (got = read_line(f, line, MAX_PROMPT_BYTES - 2, &n)) != 0) {
            line_no++;
            if (got < 0) {
                rc = run_failf(st, "reading prompts", "'%s': line %zu is longer than %d bytes",
                               st->o.prompts_file, line_no, MAX_PROMPT_BYTES - 2);
                break;
            }
            if (memchr(line, '\0', n) != NULL) {
                rc = run_failf(st, "reading prompts", "'%s': line %zu holds a NUL byte",
                               st->o.prompts_file, line_no);
                break;
            }
            while (n > 0 && line[n - 1] == '\r') {
                line[--n] = '\0';
            }
            if (n > 0) {
                rc = add_prompt(st, line);
            }
        }
        if (rc == TOOL_EXIT_OK && ferror(f)) {
            rc = run_failf(st, "reading prompts", "reading '%s' failed: %s", st->o.prompts_file,
                           strerror(errno));
        }
        fclose(f);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
        if (st->n_req == 0) {
            return run_failf(st, "reading prompts", "'%s' holds no prompt", st->o.prompts_file);
        }
    }
    bool none = st->n_req == 0;
    for (size_t i = 0; none && i < N_DEFAULT_PROMPTS; i++) {
        int rc = add_prompt(st, default_prompts[i]);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    return TOOL_EXIT_OK;
}

static int encode_prompts(run_state *st) {
    for (size_t i = 0; i < st->n_req; i++) {
        run_request *r = &st->req[i];
        size_t cap = strlen(r->text) + 3;
        r->ids = malloc(cap * sizeof *r->ids);
        if (r->ids == NULL) {
            return run_failf(st, "encoding prompts", "out of memory");
        }
        acg_status s = acg_tokenizer_encode(st->tok, r->text, true, false, r->ids, cap, &r->n_ids);
        if (s != ACG_OK) {
            return run_fail(st, s, "encoding a prompt");
        }
    }
    return TOOL_EXIT_OK;
}

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
static int open_trace(run_state *st) {
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
static int keep_buckets(run_state *st, const acg_model *model) {
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
static void print_buckets(const run_state *st) {
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

/* ---- generation ------------------------------------------------------------------------------ */

static double now_s(void) { return (double)tool_now_ns() / 1e9; }

/* Serves every request on a model with graph mode `graphs`; fills generated[] of each. */
static int generate(run_state *st, acg_graph_mode graphs, const char *label, acg_model_stats *stats,
                    double *seconds) {
    acg_model_options mo = ACG_MODEL_OPTIONS_INIT;
    mo.max_batch = (uint32_t)st->o.batch;
    if (mo.max_step_tokens < mo.max_batch) {
        mo.max_step_tokens = mo.max_batch;
    }
    mo.graphs = graphs;
    mo.comm = st->ranks.comm;
    acg_model *model = NULL;
    if (prints(st) && (st->progress || !st->o.json)) {
        fprintf(stderr, "acg: %s: preparing the model%s\n", label,
                graphs == ACG_GRAPHS_OFF ? "" : " and capturing its buckets");
    }
    acg_status s = acg_model_create(st->dev, st->weights, &mo, &model);
    if (s != ACG_OK) {
        return run_fail(st, s, "creating the model");
    }
    int rc = TOOL_EXIT_OK;
    if (st->buckets == NULL) {
        /* The first run (with the graph mode asked for): the report's buckets. */
        rc = keep_buckets(st, model);
        if (rc == TOOL_EXIT_OK && prints(st) && !st->o.json && graphs != ACG_GRAPHS_OFF &&
            st->n_buckets > 0 && st->buckets[0].state != ACG_BUCKET_EAGER) {
            print_buckets(st);
        }
    }
    for (size_t i = 0; i < st->n_req && rc == TOOL_EXIT_OK; i++) {
        run_request *r = &st->req[i];
        acg_request q = ACG_REQUEST_INIT;
        q.prompt = r->ids;
        q.prompt_len = (uint32_t)r->n_ids;
        q.max_new_tokens = (uint32_t)st->o.steps;
        q.temperature = (float)st->o.temperature;
        q.top_p = (float)st->o.top_p;
        q.seed = st->o.seed + i;
        if ((s = acg_model_submit(model, &q, &r->id)) != ACG_OK) {
            rc = run_fail(st, s, "submitting a request");
        }
    }
    double t0 = now_s();
    uint64_t step = 0, tokens = 0;
    while (rc == TOOL_EXIT_OK) {
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        if ((s = acg_model_step(model, &rep)) != ACG_OK) {
            rc = run_fail(st, s, "running a step");
            break;
        }
        if (rep.rows == 0) {
            break;
        }
        step++;
        tokens += rep.generated;
        if (st->progress) {
            fprintf(stderr, "\racg: %s: step %llu, %u rows, %llu tokens generated   ", label,
                    (unsigned long long)step, rep.rows, (unsigned long long)tokens);
        }
    }
    *seconds = now_s() - t0;
    if (st->progress) {
        fputc('\n', stderr);
    }
    for (size_t i = 0; i < st->n_req && rc == TOOL_EXIT_OK; i++) {
        run_request *r = &st->req[i];
        acg_request_status rs = ACG_REQUEST_STATUS_INIT;
        if ((s = acg_model_get_request(model, r->id, &rs)) != ACG_OK) {
            rc = run_fail(st, s, "reading a request");
            break;
        }
        free(r->generated);
        r->generated = malloc((rs.n_generated + 1) * sizeof *r->generated);
        if (r->generated == NULL) {
            rc = run_failf(st, "reading a request", "out of memory");
            break;
        }
        memcpy(r->generated, rs.tokens + rs.n_tokens - rs.n_generated,
               rs.n_generated * sizeof *r->generated);
        r->n_generated = rs.n_generated;
    }
    if (rc == TOOL_EXIT_OK && (s = acg_model_get_stats(model, stats)) != ACG_OK) {
        rc = run_fail(st, s, "reading the model's statistics");
    }
    acg_model_destroy(model);
    return rc;
}

/* With several ranks: whether every rank generated the same tokens as this one, request by
 * request (the count, then the tokens padded with -1 to --steps), with one allreduce_min_i32 of
 * the values and their complements (the least of ~v is ~(the greatest of v)). */
static int verify_ranks(run_state *st) {
    size_t width = (size_t)st->o.steps + 1;
    int32_t *v = malloc(2 * width * sizeof *v);
    int rc = v != NULL ? TOOL_EXIT_OK : run_failf(st, "verifying the ranks", "out of memory");
    for (size_t i = 0; i < st->n_req && rc == TOOL_EXIT_OK; i++) {
        const run_request *r = &st->req[i];
        for (size_t k = 0; k < width; k++) {
            v[k] = k == 0                ? (int32_t)r->n_generated
                   : k <= r->n_generated ? r->generated[k - 1]
                                         : -1;
            v[width + k] = ~v[k];
        }
        const acg_comm *comm = st->ranks.comm;
        acg_status s = comm->allreduce_min_i32(comm->user, v, 2 * width);
        if (s != ACG_OK) {
            rc = run_fail(st, s, "verifying the ranks");
            break;
        }
        if (v[0] != ~v[width]) {
            rc = run_failf(st, "verify", "request %zu: the ranks generated %d .. %d tokens", i,
                           v[0], ~v[width]);
        }
        for (size_t k = 1; k < width && rc == TOOL_EXIT_OK; k++) {
            if (v[k] != ~v[width + k]) {
                rc = run_failf(st, "verify",
                               "request %zu: token %zu differs between the ranks "
                               "(%d .. %d)",
                               i, k - 1, v[k], ~v[width + k]);
            }
        }
    }
    free(v);
    return rc;
}

/* Runs the same requests with graphs off and compares every token; with several ranks, also
 * every rank's tokens with every other's. */
static int verify(run_state *st) {
    int32_t **graphed = calloc(st->n_req, sizeof *graphed);
    uint32_t *n = calloc(st->n_req, sizeof *n);
    int rc = graphed && n ? TOOL_EXIT_OK : run_failf(st, "verifying", "out of memory");
    if (rc == TOOL_EXIT_OK && st->ranks.comm != NULL) {
        rc = verify_ranks(st);
    }
    for (size_t i = 0; i < st->n_req && rc == TOOL_EXIT_OK; i++) {
        graphed[i] = st->req[i].generated;
        n[i] = st->req[i].n_generated;
        st->req[i].generated = NULL;
    }
    acg_model_stats stats = ACG_MODEL_STATS_INIT;
    double seconds;
    if (rc == TOOL_EXIT_OK) {
        rc = generate(st, ACG_GRAPHS_OFF, "verify (eager)", &stats, &seconds);
    }
    for (size_t i = 0; i < st->n_req && rc == TOOL_EXIT_OK; i++) {
        const run_request *r = &st->req[i];
        uint32_t k = 0;
        while (k < n[i] && k < r->n_generated && graphed[i][k] == r->generated[k]) {
            k++;
        }
        if (k < n[i] || k < r->n_generated) {
            rc = run_failf(st, "verify",
                           "request %zu: token %u differs: %d with graphs, %d eager (%u and %u "
                           "tokens)",
                           i, k, k < n[i] ? graphed[i][k] : -1,
                           k < r->n_generated ? r->generated[k] : -1, n[i], r->n_generated);
        }
    }
    if (rc == TOOL_EXIT_OK && !st->o.json && prints(st)) {
        fprintf(stderr, "acg: verify: %zu requests, every token equal to the eager run%s\n",
                st->n_req, st->ranks.comm != NULL ? " and to every other rank's" : "");
    }
    for (size_t i = 0; graphed != NULL && i < st->n_req; i++) {
        free(graphed[i]);
    }
    free(graphed);
    free(n);
    return rc;
}

/* ---- report ---------------------------------------------------------------------------------- */

static int print_report(const run_state *st, const acg_model_stats *s, double seconds) {
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

/* ---- the command ----------------------------------------------------------------------------- */

static int load(run_state *st) {
    acg_status s;
    if (st->o.preset != NULL) {
        acg_model_config c = ACG_MODEL_CONFIG_INIT;
        if ((s = acg_model_preset_get_config(st->o.preset, &c)) != ACG_OK) {
            return run_fail(st, s, "reading the preset");
        }
        if ((s = acg_model_preset_load(st->o.preset, 1, &st->weights)) != ACG_OK) {
            return run_fail(st, s, "building the preset");
        }
        if ((s = acg_tokenizer_preset(c.vocab_size, &st->tok)) != ACG_OK) {
            return run_fail(st, s, "building the preset's tokenizer");
        }
        if (!st->o.json && prints(st)) {
            fprintf(stderr,
                    "acg: the %s preset has random weights, so its text means nothing; "
                    "--model and --tokenizer load a trained llama2.c checkpoint\n",
                    st->o.preset);
        }
    } else {
        if ((s = acg_model_weights_load(st->o.model, &st->weights)) != ACG_OK) {
            return run_fail(st, s, "loading the model");
        }
        int32_t vocab = acg_model_weights_get_config(st->weights)->vocab_size;
        if ((s = acg_tokenizer_load(st->o.tokenizer, vocab, &st->tok)) != ACG_OK) {
            return run_fail(st, s, "loading the tokenizer");
        }
    }
    if ((s = acg_device_open(bench_ranks_device(&st->ranks, st->o.backend), &st->dev)) != ACG_OK) {
        return run_fail(st, s, "opening the device");
    }
    return TOOL_EXIT_OK;
}

int cmd_run(int argc, char **argv) {
    run_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        return tool_failf("run", "out of memory");
    }
    int rc = parse_options(argc, argv, &st->o);
    if (rc != 0) {
        free(st);
        return rc < 0 ? TOOL_EXIT_OK : rc;
    }
    rc = bench_ranks_join(&st->ranks, st->o.tp, "run");
    st->progress = isatty(STDERR_FILENO) && !st->o.json && prints(st);
    if (rc == TOOL_EXIT_OK) {
        rc = open_trace(st);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = read_prompts(st);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = load(st);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = encode_prompts(st);
    }
    acg_model_stats stats = ACG_MODEL_STATS_INIT;
    double seconds = 0;
    if (rc == TOOL_EXIT_OK) {
        rc = generate(st, st->o.graphs, "generating", &stats, &seconds);
    }
    if (rc == TOOL_EXIT_OK && st->o.verify) {
        rc = verify(st);
    }
    rc = tool_trace_finish(st->trace, rc);
    if (rc == TOOL_EXIT_OK && prints(st)) {
        rc = print_report(st, &stats, seconds);
    }
    for (size_t i = 0; i < st->n_req; i++) {
        free(st->req[i].text);
        free(st->req[i].ids);
        free(st->req[i].generated);
    }
    free(st->buckets);
    free(st->labels);
    acg_tokenizer_free(st->tok);
    acg_model_weights_free(st->weights);
    if (st->dev != NULL) {
        acg_device_close(st->dev);
    }
    bench_ranks_leave(&st->ranks, rc);
    free(st);
    return rc;
}
