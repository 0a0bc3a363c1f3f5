/*
 * graph.c — `acg graph`: pictures of what the reference model's runner captured. The model is
 * built as `acg run` builds it, with graphs required, and the graph that one slot of a bucket
 * replays is written as Graphviz DOT (acg_graph_write_dot) or as SVG, which Graphviz's `dot`
 * renders; --list prints the buckets instead.
 *
 * Several buckets (no --bucket): --dot writes one file holding one digraph per bucket, each
 * after a comment naming its bucket (`dot -Tsvg -O FILE` renders each into a file of its own);
 * --svg writes one SVG per bucket, FILE's name with "-<index>-<label>-<batch>x<tokens>" put
 * before its ".svg", since one SVG holds one graph.
 *
 * Every file goes through a tool_output (tool_cli.h): a regular file is written under a
 * temporary name in its own directory and renamed into place once whole, so a failure leaves
 * nothing half-written; a symbolic link stays one, the file it names replaced; a FIFO or a
 * device is written in place. The output paths are checked (by opening them) before the model
 * is built, which takes the longest. dot's SVG comes back through a pipe and is written by this
 * process, so a failed write is seen even though dot ignores its own. When `dot` is missing, the
 * DOT text is written next to the requested SVG (its name ending in ".dot" instead) and the
 * command fails, saying which package to install.
 */
#include "commands.h"
#include "tool_cli.h"
#include "tool_report.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <acg/model.h>

extern char **environ;

const char cmd_graph_usage[] =
    "usage: acg graph [--backend B] [--model FILE --tokenizer FILE | --preset tiny|small]\n"
    "                 [--batch N] [--bucket N] [--slot S] [--buffers] (--dot FILE | --svg FILE)\n"
    "       acg graph [--backend B] [--model FILE --tokenizer FILE | --preset tiny|small]\n"
    "                 [--batch N] [--bucket N] [--slot S] --list\n";

#define MAX_BATCH 1024u /* acg_model_options.max_batch's limit */
#define MAX_SLOT 1u     /* a runner has at most 2 slots */

typedef struct graph_options {
    const char *backend, *model, *tokenizer, *preset;
    const char *dot, *svg; /* where the graphs go ("-": --dot to stdout) */
    uint64_t batch, bucket, slot;
    bool all, buffers, list;
} graph_options;

/* ---- options --------------------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, graph_options *o) {
    *o = (graph_options){.batch = 32, .all = true};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (tool_is_help(argv[i])) {
            fputs(cmd_graph_usage, stdout);
            return -1;
        }
        const char **strings[] = {&o->backend, &o->model, &o->tokenizer,
                                  &o->preset,  &o->dot,   &o->svg};
        static const char *const string_names[] = {"--backend", "--model", "--tokenizer",
                                                   "--preset",  "--dot",   "--svg"};
        bool matched = false;
        for (size_t k = 0; k < sizeof strings / sizeof strings[0] && !matched; k++) {
            if ((m = tool_option(argc, argv, &i, string_names[k], &v)) < 0) {
                return tool_usage_error(cmd_graph_usage, "%s needs a value", string_names[k]);
            }
            if (m > 0) {
                *strings[k] = v;
                matched = true;
            }
        }
        if (matched) {
            continue;
        }
        int rc = TOOL_EXIT_OK;
        if ((m = tool_option(argc, argv, &i, "--batch", &v)) != 0) {
            rc = tool_option_u64(cmd_graph_usage, "", "--batch", m > 0 ? v : NULL, 1, MAX_BATCH,
                                 &o->batch);
        } else if ((m = tool_option(argc, argv, &i, "--slot", &v)) != 0) {
            rc = tool_option_u64(cmd_graph_usage, "", "--slot", m > 0 ? v : NULL, 0, MAX_SLOT,
                                 &o->slot);
        } else if ((m = tool_option(argc, argv, &i, "--bucket", &v)) != 0) {
            /* The range is the model's, known once it is built. */
            if (m < 0) {
                return tool_usage_error(cmd_graph_usage, "--bucket needs a value");
            }
            if (!tool_parse_u64(v, 0, UINT32_MAX, &o->bucket)) {
                return tool_usage_error(cmd_graph_usage,
                                        "--bucket takes a bucket's index, a whole number "
                                        "(acg graph --list shows them)");
            }
            o->all = false;
        }
        if (m != 0) {
            if (rc != TOOL_EXIT_OK) {
                return rc;
            }
            continue;
        }
        if (strcmp(argv[i], "--buffers") == 0) {
            o->buffers = true;
            continue;
        }
        if (strcmp(argv[i], "--list") == 0) {
            o->list = true;
            continue;
        }
        return tool_usage_error(cmd_graph_usage, "unknown argument '%s'", argv[i]);
    }
    if (o->dot != NULL && o->svg != NULL) {
        return tool_usage_error(cmd_graph_usage, "--dot and --svg exclude each other");
    }
    if (o->list && (o->dot != NULL || o->svg != NULL)) {
        return tool_usage_error(cmd_graph_usage, "--list writes no graph: leave out --%s",
                                o->dot != NULL ? "dot" : "svg");
    }
    if (!o->list && o->dot == NULL && o->svg == NULL) {
        return tool_usage_error(cmd_graph_usage,
                                "where should the graphs go? --dot FILE or --svg FILE (--list "
                                "lists the buckets)");
    }
    if ((o->dot != NULL && o->dot[0] == '\0') || (o->svg != NULL && o->svg[0] == '\0')) {
        return tool_usage_error(cmd_graph_usage, "--%s needs a file name",
                                o->dot != NULL ? "dot" : "svg");
    }
    if (o->svg != NULL && strcmp(o->svg, "-") == 0) {
        return tool_usage_error(cmd_graph_usage, "--svg needs a file (--dot - writes to stdout)");
    }
    int rc = tool_model_options(cmd_graph_usage, o->model, o->tokenizer, &o->preset);
    if (rc != TOOL_EXIT_OK) {
        return rc;
    }
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    if (o->preset != NULL && acg_model_preset_get_config(o->preset, &c) != ACG_OK) {
        return tool_usage_error(cmd_graph_usage, "%s", acg_last_error());
    }
    return 0;
}

/* ---- files ----------------------------------------------------------------------------------- */

#define WRITING "writing a graph" /* what a failed output file's report says */

/* Reports a failed write of errno e into o. Returns TOOL_EXIT_FAILURE. */
static int write_failed(const tool_output *o, int e) {
    return tool_failf(WRITING, "'%s': %s", o->path, strerror(e));
}

/* Copies the whole of in (rewound) to out. False with errno set when a write fails. */
static bool copy_file(FILE *in, FILE *out) {
    char buf[16384];
    size_t n;
    rewind(in);
    errno = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            if (errno == 0) {
                errno = EIO;
            }
            return false;
        }
    }
    if (ferror(in)) {
        errno = errno != 0 ? errno : EIO;
        return false;
    }
    return true;
}

/* ---- rendering ------------------------------------------------------------------------------- */

typedef enum render_result { RENDER_OK, RENDER_NO_DOT, RENDER_FAILED } render_result;

/* Reads dot's standard output from fd to its end, into svg. A write that fails stops the
 * writing, not the reading, so dot is never left blocked; *write_error is its errno (0: none). */
static void pump_svg(int fd, FILE *svg, int *write_error) {
    char buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        errno = 0;
        if (*write_error == 0 && fwrite(buf, 1, (size_t)n, svg) != (size_t)n) {
            *write_error = errno != 0 ? errno : EIO;
        }
    }
}

/* Runs Graphviz's `dot -Tsvg` (found on PATH) with dot_text as its standard input and a pipe
 * as its standard output, whose bytes this process writes into svg: dot exits 0 when its own
 * writes fail, so they are not left to it. Its messages go to a temporary file, the first of
 * them into why. *write_error: as pump_svg's. */
static render_result render_svg(FILE *dot_text, FILE *svg, int *write_error, char *why,
                                size_t why_size) {
    static char arg0[] = "dot", arg1[] = "-Tsvg";
    char *args[] = {arg0, arg1, NULL};
    *write_error = 0;
    FILE *err = tmpfile();
    if (err == NULL) {
        snprintf(why, why_size, "a temporary file for dot's messages: %s", strerror(errno));
        return RENDER_FAILED;
    }
    render_result result = RENDER_FAILED;
    int out[2];
    if (pipe(out) != 0) {
        snprintf(why, why_size, "a pipe for dot's output: %s", strerror(errno));
        goto out_close_err;
    }
    /* Only the child's dup2 copy of the write end may stay open in it, or the reading here
     * would never see the end. */
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    fcntl(out[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fileno(dot_text), STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fileno(err), STDERR_FILENO);
    pid_t pid;
    rewind(dot_text); /* the child reads from the shared file offset */
    int e = posix_spawnp(&pid, "dot", &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    int status = 0;
    if (e == ENOENT) {
        result = RENDER_NO_DOT;
        goto out_close_pipe;
    }
    if (e != 0) {
        snprintf(why, why_size, "cannot start dot: %s", strerror(e));
        goto out_close_pipe;
    }
    pump_svg(out[0], svg, write_error);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(why, why_size, "waiting for dot: %s", strerror(errno));
            goto out_close_pipe;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        result = RENDER_OK;
        goto out_close_pipe;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        result = RENDER_NO_DOT; /* a C library that reports a failed exec this way */
        goto out_close_pipe;
    }
    char line[256] = "";
    rewind(err);
    if (fgets(line, sizeof line, err) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
    }
    if (WIFEXITED(status)) {
        snprintf(why, why_size, "dot -Tsvg failed with exit status %d%s%s", WEXITSTATUS(status),
                 line[0] ? ": " : "", line);
    } else {
        snprintf(why, why_size, "dot -Tsvg was killed by signal %d",
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
out_close_pipe:
    close(out[0]);
out_close_err:
    fclose(err);
    return result;
}

/* ---- the command ----------------------------------------------------------------------------- */

typedef struct graph_state {
    graph_options o;
    tool_output dot;  /* --dot FILE; with --svg, the DOT kept when dot is missing */
    tool_output *svg; /* (n_svg) with --svg: n_selected, or the one of --bucket opened early */
    FILE **texts;     /* (n_selected) with --svg: each bucket's DOT, rendered one by one */
    uint32_t first, n_selected, n_svg;
    acg_model_weights *weights;
    acg_tokenizer *tok;
    acg_device *dev;
    acg_model *model;
    acg_runner *runner;
} graph_state;

/* FILE with its ".svg" replaced by (or, without one, followed by) suffix; malloc'd. */
static char *sibling_path(const char *file, const char *suffix) {
    size_t len = strlen(file);
    const char *slash = strrchr(file, '/');
    size_t name_at = slash != NULL ? (size_t)(slash - file) + 1 : 0;
    if (len - name_at > 4 && strcmp(file + len - 4, ".svg") == 0) {
        len -= 4;
    }
    size_t size = len + strlen(suffix) + 1;
    char *p = malloc(size);
    if (p != NULL) {
        snprintf(p, size, "%.*s%s", (int)len, file, suffix);
    }
    return p;
}

/* Builds the weights, opens the device, and creates the model: graphs required, or (for
 * --list, to show what was dropped and why) on; slots enough for --slot. */
static int build_model(graph_state *st) {
    const graph_options *o = &st->o;
    acg_status s;
    if (o->preset != NULL) {
        if ((s = acg_model_preset_load(o->preset, 1, &st->weights)) != ACG_OK) {
            return tool_fail(s, "building the preset");
        }
    } else {
        if ((s = acg_model_weights_load(o->model, &st->weights)) != ACG_OK) {
            return tool_fail(s, "loading the model");
        }
        /* Not needed for the graphs, but checked as `acg run` checks it. */
        int32_t vocab = acg_model_weights_get_config(st->weights)->vocab_size;
        if ((s = acg_tokenizer_load(o->tokenizer, vocab, &st->tok)) != ACG_OK) {
            return tool_fail(s, "loading the tokenizer");
        }
    }
    if ((s = acg_device_open(o->backend, &st->dev)) != ACG_OK) {
        return tool_fail(s, "opening the device");
    }
    acg_model_options mo = ACG_MODEL_OPTIONS_INIT;
    mo.max_batch = (uint32_t)o->batch;
    if (mo.max_step_tokens < mo.max_batch) {
        mo.max_step_tokens = mo.max_batch;
    }
    mo.graphs = o->list ? ACG_GRAPHS_ON : ACG_GRAPHS_REQUIRE;
    mo.n_slots = (uint32_t)o->slot + 1;
    if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "acg: graph: preparing the model and capturing its buckets\n");
    }
    if ((s = acg_model_create(st->dev, st->weights, &mo, &st->model)) != ACG_OK) {
        return tool_fail(s, "creating the model");
    }
    st->runner = acg_model_get_runner(st->model);
    return TOOL_EXIT_OK;
}

/* Picks the buckets: --bucket's, or all. An index the model does not have is a bad command
 * line, found only now that the model exists: one line naming the valid range. */
static int select_buckets(graph_state *st) {
    uint32_t n = acg_runner_get_bucket_count(st->runner);
    if (st->o.all) {
        st->first = 0;
        st->n_selected = n;
        return TOOL_EXIT_OK;
    }
    if (st->o.bucket >= n) {
        return tool_usage_error("",
                                "--bucket %llu: the model has buckets 0..%u (--list shows them)",
                                (unsigned long long)st->o.bucket, n - 1);
    }
    st->first = (uint32_t)st->o.bucket;
    st->n_selected = 1;
    return TOOL_EXIT_OK;
}

static const char *state_name(acg_bucket_state s) {
    return s == ACG_BUCKET_CAPTURED ? "captured" : s == ACG_BUCKET_DROPPED ? "dropped" : "eager";
}

static int list_buckets(graph_state *st) {
    static const int widths[] = {6, -10, 6, 7, -9, 6, 10};
    static const char *const headers[] = {"bucket", "label", "batch",    "tokens",
                                          "state",  "nodes", "graph KiB"};
    tool_table t;
    tool_table_begin(&t, stdout, 7, widths, headers);
    for (uint32_t b = st->first; b < st->first + st->n_selected; b++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        acg_status s = acg_runner_get_report(st->runner, b, &rep);
        if (s != ACG_OK) {
            return tool_fail(s, "reading a bucket's report");
        }
        const acg_graph *g = NULL;
        size_t nodes = 0;
        bool graphed = rep.state == ACG_BUCKET_CAPTURED &&
                       acg_runner_get_graph(st->runner, b, (uint32_t)st->o.slot, 0, &g) == ACG_OK &&
                       acg_graph_get_node_count(g, &nodes) == ACG_OK;
        tool_table_cell(&t, "%u", b);
        tool_table_cell(&t, "%s", rep.key.label);
        tool_table_cell(&t, "%u", rep.key.batch);
        tool_table_cell(&t, "%u", rep.key.tokens);
        tool_table_cell(&t, "%s", state_name(rep.state));
        if (graphed) {
            tool_table_cell(&t, "%zu", nodes);
            tool_table_cell(&t, "%.1f", (double)rep.graph_bytes / 1024.0);
        } else {
            tool_table_cell(&t, "-");
            tool_table_cell(&t, "-");
        }
    }
    /* The reasons are sentences: under the table, not in it. */
    for (uint32_t b = st->first; b < st->first + st->n_selected; b++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        if (acg_runner_get_report(st->runner, b, &rep) == ACG_OK &&
            rep.state == ACG_BUCKET_DROPPED) {
            printf("bucket %u dropped: %s\n", b, rep.reason);
        }
    }
    return TOOL_EXIT_OK;
}

/* The label's bytes, but those other than letters, digits, '-', '_' and '.' as '_': safe in a
 * file name and inside a DOT comment. */
static void plain_label(const char *label, char *out, size_t size) {
    size_t n = 0;
    for (const char *c = label; *c != '\0' && n + 1 < size; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.';
        out[n++] = plain ? *c : '_';
    }
    out[n] = '\0';
}

/* Writes bucket b's graph, after a comment naming the bucket, to out: file's stream, or (file
 * NULL) stdout or a temporary file, which name names when a write fails. */
static int write_bucket(graph_state *st, uint32_t b, FILE *out, const tool_output *file,
                        const char *name) {
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    const acg_graph *g = NULL;
    acg_status s = acg_runner_get_report(st->runner, b, &rep);
    if (s == ACG_OK) {
        s = acg_runner_get_graph(st->runner, b, (uint32_t)st->o.slot, 0, &g);
    }
    if (s != ACG_OK) {
        return tool_fail(s, "finding the graph");
    }
    char label[64];
    plain_label(rep.key.label, label, sizeof label);
    fprintf(out, "/* acg graph: bucket %u (%s, batch %u, tokens %u), slot %llu */\n", b, label,
            rep.key.batch, rep.key.tokens, (unsigned long long)st->o.slot);
    s = acg_graph_write_dot(g, out, st->o.buffers ? ACG_DOT_BUFFERS : 0);
    if (s == ACG_ERR_IO && file != NULL) {
        return tool_failf(WRITING, "'%s': %s", file->path, acg_last_error()); /* which says why */
    }
    if (s == ACG_ERR_IO) {
        return tool_failf(WRITING, "%s: %s", name, acg_last_error());
    }
    if (s != ACG_OK) {
        return tool_fail(s, WRITING);
    }
    return TOOL_EXIT_OK;
}

/* Whether o writes into what stdout is (--dot /dev/stdout), where a "wrote" line would land in
 * the graph. */
static bool is_stdout(const tool_output *o) {
    struct stat a, b;
    return o->f != NULL && fstat(fileno(o->f), &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Says what a written file holds. */
static void report_file(const graph_state *st, const char *path, uint32_t b) {
    if (st->o.dot != NULL && strcmp(st->o.dot, "-") == 0) {
        return; /* stdout is the DOT */
    }
    if (st->n_selected > 1 && st->o.dot != NULL) {
        printf("wrote %s: buckets %u..%u, slot %llu, one digraph each\n", path, st->first,
               st->first + st->n_selected - 1, (unsigned long long)st->o.slot);
        return;
    }
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    const acg_graph *g = NULL;
    size_t nodes = 0;
    acg_runner_get_report(st->runner, b, &rep);
    if (acg_runner_get_graph(st->runner, b, (uint32_t)st->o.slot, 0, &g) == ACG_OK) {
        acg_graph_get_node_count(g, &nodes);
    }
    printf("wrote %s: bucket %u (%s, batch %u, tokens %u), slot %llu, %zu nodes\n", path, b,
           rep.key.label, rep.key.batch, rep.key.tokens, (unsigned long long)st->o.slot, nodes);
}

/* --dot: every selected bucket into one file (or stdout). */
static int write_dot(graph_state *st) {
    bool to_stdout = strcmp(st->o.dot, "-") == 0;
    FILE *out = to_stdout ? stdout : st->dot.f;
    for (uint32_t i = 0; i < st->n_selected; i++) {
        int rc =
            write_bucket(st, st->first + i, out, to_stdout ? NULL : &st->dot, "standard output");
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    if (to_stdout) {
        errno = 0;
        if (fflush(stdout) != 0 || ferror(stdout)) {
            return tool_failf(WRITING, "standard output: %s", strerror(errno != 0 ? errno : EIO));
        }
        return TOOL_EXIT_OK;
    }
    bool quiet = is_stdout(&st->dot);
    int rc = tool_output_commit(&st->dot);
    if (rc == TOOL_EXIT_OK && !quiet) {
        report_file(st, st->dot.path, st->first);
    }
    return rc;
}

/* A bucket's SVG name with several buckets: FILE-<index>-<label>-<batch>x<tokens>.svg. */
static char *bucket_svg_path(const graph_state *st, uint32_t b) {
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    acg_runner_get_report(st->runner, b, &rep);
    char label[64], suffix[128];
    plain_label(rep.key.label, label, sizeof label);
    snprintf(suffix, sizeof suffix, "-%u-%s-%ux%u.svg", b, label, rep.key.batch, rep.key.tokens);
    return sibling_path(st->o.svg, suffix);
}

/* Opens the DOT file kept beside the SVG's name for when dot is missing: FILE.dot. */
static int open_kept_dot(graph_state *st) {
    char *dot_path = sibling_path(st->o.svg, ".dot");
    if (dot_path == NULL) {
        return tool_failf(WRITING, "out of memory");
    }
    int rc = tool_output_open(&st->dot, WRITING, dot_path);
    free(dot_path);
    return rc;
}

/* dot is missing: every selected bucket's DOT into the kept file (opened now if it was not
 * before), committed. */
static int keep_dot(graph_state *st) {
    int rc = st->dot.f != NULL ? TOOL_EXIT_OK : open_kept_dot(st);
    for (uint32_t i = 0; rc == TOOL_EXIT_OK && i < st->n_selected; i++) {
        if (!copy_file(st->texts[i], st->dot.f)) {
            rc = write_failed(&st->dot, errno);
        }
    }
    return rc == TOOL_EXIT_OK ? tool_output_commit(&st->dot) : rc;
}

/* --svg: every selected bucket's DOT into a temporary file of its own, then each rendered
 * (when dot is missing, the DOT kept instead), then every SVG committed. */
static int write_svg(graph_state *st) {
    if (st->svg == NULL) {
        st->svg = calloc(st->n_selected, sizeof *st->svg);
        st->n_svg = st->svg != NULL ? st->n_selected : 0;
    }
    st->texts = calloc(st->n_selected, sizeof *st->texts);
    if (st->svg == NULL || st->texts == NULL) {
        return tool_failf(WRITING, "out of memory");
    }
    for (uint32_t i = 0; i < st->n_selected; i++) {
        if ((st->texts[i] = tmpfile()) == NULL) {
            return tool_failf(WRITING, "a temporary file for the DOT text: %s", strerror(errno));
        }
        int rc = write_bucket(st, st->first + i, st->texts[i], NULL,
                              "a temporary file for the DOT text");
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    for (uint32_t i = 0; i < st->n_selected; i++) {
        if (st->svg[i].f == NULL) {
            char *path =
                st->n_selected == 1 ? strdup(st->o.svg) : bucket_svg_path(st, st->first + i);
            if (path == NULL) {
                return tool_failf(WRITING, "out of memory");
            }
            int rc = tool_output_open(&st->svg[i], WRITING, path);
            free(path);
            if (rc != TOOL_EXIT_OK) {
                return rc;
            }
        }
        char why[512] = "";
        int write_error = 0;
        render_result r = render_svg(st->texts[i], st->svg[i].f, &write_error, why, sizeof why);
        if (r == RENDER_NO_DOT) {
            if (keep_dot(st) == TOOL_EXIT_OK) {
                tool_failf("rendering SVG",
                           "Graphviz's dot is not installed (not found on PATH): install the "
                           "Debian package graphviz (apt-get install graphviz); the DOT text "
                           "was written to '%s'",
                           st->dot.path);
            }
            return TOOL_EXIT_FAILURE;
        }
        if (r != RENDER_OK) {
            return tool_failf("rendering SVG", "%s", why);
        }
        if (write_error != 0) {
            return write_failed(&st->svg[i], write_error);
        }
    }
    for (uint32_t i = 0; i < st->n_selected; i++) {
        bool quiet = is_stdout(&st->svg[i]);
        int rc = tool_output_commit(&st->svg[i]);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
        if (!quiet) {
            report_file(st, st->svg[i].path, st->first + i);
        }
    }
    return TOOL_EXIT_OK;
}

/* Opens the files the command will write, before the model is built: a bad path fails fast.
 * With --svg and every bucket, FILE names the SVGs (bucket_svg_path) but is not written: a
 * directory there is refused all the same. The DOT kept when dot is missing is opened here too,
 * checking FILE's folder, unless the one SVG is written in place (a FIFO, a device: beside
 * /dev/stdout is no place for a file), when it is opened only if dot is missing. */
static int open_outputs(graph_state *st) {
    if (st->o.dot != NULL) {
        return strcmp(st->o.dot, "-") == 0 ? TOOL_EXIT_OK
                                           : tool_output_open(&st->dot, WRITING, st->o.dot);
    }
    if (st->o.svg == NULL) {
        return TOOL_EXIT_OK;
    }
    if (st->o.all) {
        struct stat sb;
        if (stat(st->o.svg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            return tool_failf(WRITING, "'%s': %s", st->o.svg, strerror(EISDIR));
        }
    } else {
        st->svg = calloc(1, sizeof *st->svg);
        if (st->svg == NULL) {
            return tool_failf(WRITING, "out of memory");
        }
        st->n_svg = 1;
        int rc = tool_output_open(&st->svg[0], WRITING, st->o.svg);
        if (rc != TOOL_EXIT_OK || st->svg[0].tmp[0] == '\0') {
            return rc; /* written in place */
        }
    }
    return open_kept_dot(st);
}

int cmd_graph(int argc, char **argv) {
    graph_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        return tool_failf("graph", "out of memory");
    }
    int rc = parse_options(argc, argv, &st->o);
    if (rc != 0) {
        free(st);
        return rc < 0 ? TOOL_EXIT_OK : rc;
    }
    rc = open_outputs(st);
    if (rc == TOOL_EXIT_OK) {
        rc = build_model(st);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = select_buckets(st);
    }
    if (rc == TOOL_EXIT_OK) {
        rc = st->o.list ? list_buckets(st) : st->o.dot != NULL ? write_dot(st) : write_svg(st);
    }
    /* Whatever was not committed is removed. */
    tool_output_abandon(&st->dot);
    for (uint32_t i = 0; i < st->n_svg; i++) {
        tool_output_abandon(&st->svg[i]);
    }
    for (uint32_t i = 0; st->texts != NULL && i < st->n_selected; i++) {
        if (st->texts[i] != NULL) {
            fclose(st->texts[i]);
        }
    }
    free(st->svg);
    free(st->texts);
    acg_model_destroy(st->model);
    acg_tokenizer_free(st->tok);
    acg_model_weights_free(st->weights);
    if (st->dev != NULL) {
        acg_device_close(st->dev);
    }
    free(st);
    return rc;
}
