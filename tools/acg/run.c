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
#include "run.h"
#include "commands.h"
#include "tool_cli.h"
#include "tool_report.h" /* tool_now_ns */
#include "tool_trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <acg/model.h>

const char cmd_run_usage[] =
    "usage: acg run [--backend B] [--model FILE --tokenizer FILE | --preset tiny|small]\n"
    "               [--prompt TEXT] [--prompts FILE] [--steps N] [--temperature T] [--top-p P]\n"
    "               [--seed S] [--batch N] [--graphs on|off|require] [--verify] [--json]\n"
    "               [--steps-per-launch N] [--trace FILE] [--tp N (under mpirun -np N)]\n";

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
#define MAX_PROMPT_BYTES 4096

/* ---- failures -------------------------------------------------------------------------------- */

int run_fail(const run_state *st, acg_status status, const char *what) {
    return bench_ranks_fail(&st->ranks, status, what);
}

int run_failf(const run_state *st, const char *what, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return bench_ranks_failf(&st->ranks, what, "%s", detail);
}

/* ---- options --------------------------------------------------------------------------------- */

/* The ranges of the numeric options: each checks its option and writes its usage error. */
#define MAX_STEPS (1u << 20)
#define MAX_BATCH 1024u /* acg_model_options.max_batch's limit */
#define MAX_TP 64u      /* a device group's limit */
#define MAX_TEMPERATURE 1e6
#define MAX_STEPS_PER_LAUNCH 1024u /* acg_model_options.steps_per_launch's limit */

static int parse_options(int argc, char **argv, run_options *o) {
    *o = (run_options){.steps = 32,
                       .seed = 0,
                       .batch = 32,
                       .temperature = 0.0,
                       .top_p = 1.0,
                       .graphs = ACG_GRAPHS_AUTO,
                       .steps_per_launch = 1};
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
        static const char *const valued[] = {
            "--steps", "--seed",   "--batch", "--temperature",
            "--top-p", "--graphs", "--tp",    "--steps-per-launch"};
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
        } else if ((m = tool_option(argc, argv, &i, "--steps-per-launch", &v)) != 0) {
            rc = tool_option_u64(cmd_run_usage, "", "--steps-per-launch", m > 0 ? v : NULL, 1,
                                 MAX_STEPS_PER_LAUNCH, &o->steps_per_launch);
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
    mo.steps_per_launch = (uint32_t)st->o.steps_per_launch;
    mo.comm = st->ranks.comm;
    acg_model *model = NULL;
    if (run_prints(st) && (st->progress || !st->o.json)) {
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
        rc = run_keep_buckets(st, model);
        if (rc == TOOL_EXIT_OK && run_prints(st) && !st->o.json && graphs != ACG_GRAPHS_OFF &&
            st->n_buckets > 0 && st->buckets[0].state != ACG_BUCKET_EAGER) {
            run_print_buckets(st);
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
    if (rc == TOOL_EXIT_OK && !st->o.json && run_prints(st)) {
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
        if (!st->o.json && run_prints(st)) {
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
    st->progress = isatty(STDERR_FILENO) && !st->o.json && run_prints(st);
    if (rc == TOOL_EXIT_OK) {
        rc = run_open_trace(st);
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
    if (rc == TOOL_EXIT_OK && run_prints(st)) {
        rc = run_print_report(st, &stats, seconds);
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
