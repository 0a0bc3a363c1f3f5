/*
 * launch.c — `acg bench launch`: what it costs the host to launch N small dependent kernels one
 * by one (eager) against replaying the same N launches captured as one graph; and, for a graph
 * whose input changes every step (one scalar of its first node), what that change costs: a
 * per-node update (acg_graph_update_kernel_node) against a recapture and acg_graph_update.
 *
 * Every launch is add_scalar_f32 with (y, y, 1.0f), that is y = y + 1 over E elements, so
 * each launch depends on the one before. Per step the bench times the host submit (N launches,
 * or one acg_graph_launch) and the whole step (submit plus acg_stream_synchronize). Steps of
 * fewer launches, and graphs of fewer nodes, are timed too: up to MAX_COUNTS node counts from 1
 * to N, evenly spaced. The cost of one more launch or node is the slope of a least-squares line
 * through the median step times at those counts, and its intercept the fixed cost of a step,
 * the synchronize round trip included. A slope that is not above its standard error is noise,
 * and is reported as not measurable rather than as a number (a difference of two noisy medians
 * once said -11.7 ns a node).
 *
 * Where the graph is one driver object (a CUgraphExec on cuda, acg_graph_get_native), the same
 * graph is also replayed with the driver's own launch call on the stream's native object and
 * synchronized natively: the "graph raw" row, so what acg adds to a replay is visible.
 *
 * The machine is shared and noisy: the kinds of step are interleaved, one of each per round in
 * rotating order, so drift hits them alike, and every figure is a median. The work is
 * checked: y is copied back and compared with the number of launches applied, exactly (the
 * buffer is reset before that count could leave the integers a float holds exactly).
 */
#include "bench-impl.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <acg/acg.h>

const char bench_launch_usage[] = "usage: acg bench launch [--backend B] [--kernels N] [--steps S] "
                                  "[--elements E] [--json]\n";

#define WARMUP_MIN_ROUNDS 3
#define WARMUP_MIN_NS 150000000ull /* 0.15 s */
#define TARGET_NS 1300000000ull    /* timed rounds when --steps is not given: about 1.3 s */
#define MIN_AUTO_STEPS 5
#define MAX_AUTO_STEPS 100000
#define EXACT_FLOAT_LIMIT (1u << 24) /* every integer up to 2^24 is exact in a float */

#define MAX_COUNTS 5 /* node counts the per-node cost is fitted over */

/* UPDATE and RECAPTURE change one scalar of the N-node graph's first node before its replay:
 * by acg_graph_update_kernel_node, or by capturing the N launches again and acg_graph_update. */
typedef enum launch_mode { EAGER, GRAPH, RAW, UPDATE, RECAPTURE, N_MODES } launch_mode;

static const char *const mode_names[N_MODES] = {"eager", "graph", "graph raw", "node update",
                                                "recapture"};

/* What one step runs: a mode at one of the node counts. RAW, UPDATE and RECAPTURE run only at
 * the last, N. */
typedef struct step_kind {
    launch_mode mode;
    size_t at; /* index in launch_bench.counts */
} step_kind;

#define MAX_KINDS (2 * MAX_COUNTS + 3)

/* The CUDA driver's own calls for the raw row, declared here (the tool is built without the
 * CUDA headers): CUresult is an enum, CUgraphExec and CUstream are pointers. */
typedef int (*cu_get_proc_fn)(const char *symbol, void **pfn, int version, uint64_t flags,
                              int *status);
typedef int (*cu_graph_launch_fn)(void *exec, void *stream);
typedef int (*cu_stream_sync_fn)(void *stream);

typedef struct raw_driver {
    void *exec, *stream; /* the graph's CUgraphExec, the stream's CUstream */
    cu_graph_launch_fn launch;
    cu_stream_sync_fn sync;
    int failed; /* the CUresult of a failed call */
} raw_driver;

typedef struct launch_config {
    bench_common common; /* --backend, --json */
    uint32_t kernels;
    uint32_t elements;
    uint64_t steps; /* 0: chosen from the warm-up */
} launch_config;

typedef struct launch_bench {
    const launch_config *cfg;
    acg_device *dev;
    const acg_capability *cap;
    acg_stream *stream;
    acg_buffer *y; /* (elements) f32 */
    acg_kernel *kernel;
    acg_graph_pool *pool;
    uint32_t counts[MAX_COUNTS]; /* (n_counts) node counts, rising from 1 to N */
    size_t n_counts;
    acg_graph *graph[MAX_COUNTS]; /* (n_counts) [i]: counts[i] nodes */
    bool graphs;
    raw_driver raw;             /* launch NULL: no raw row (the graph is no driver object) */
    step_kind kinds[MAX_KINDS]; /* (n_kinds) the kinds measured here */
    size_t n_kinds;
    uint64_t per_round; /* launches one round of every kind applies to y */
    const char *no_raw; /* why there is no raw row */
    acg_arg args[3];
    acg_dims dims;
    float node_a; /* the scalar of the N-node graph's first node: 1 or 2, as last updated */
    const char *no_update, *no_recapture;  /* why those rows are not measured */
    uint64_t applied;                      /* launches run on y since it was last zeroed */
    float *host;                           /* (elements) y copied back */
    double *submit_ns[MAX_KINDS];          /* (steps) per kind */
    double *step_ns[MAX_KINDS];            /* (steps) per kind */
    double submit_us[N_MODES][MAX_COUNTS]; /* medians; NaN where not measured */
    double step_us[N_MODES][MAX_COUNTS];
    tool_fit fit[N_MODES]; /* [EAGER], [GRAPH]: step us over the node counts */
    const char *what;      /* the operation that failed, for the error line */
} launch_bench;

/* ---- one step -------------------------------------------------------------------------------- */

/* The node counts of the fit: up to MAX_COUNTS, evenly spaced from 1 to N, none twice. */
static void choose_counts(launch_bench *b) {
    uint32_t n = b->cfg->kernels;
    b->n_counts = 0;
    for (uint32_t i = 0; i < MAX_COUNTS; i++) {
        uint32_t c = 1 + (uint32_t)((uint64_t)(n - 1) * i / (MAX_COUNTS - 1));
        if (b->n_counts == 0 || c != b->counts[b->n_counts - 1]) {
            b->counts[b->n_counts++] = c;
        }
    }
}

/* The index of N, the largest count. */
static size_t last(const launch_bench *b) { return b->n_counts - 1; }

/* Whether mode was measured at N (then at every count, but RAW at N alone). */
static bool measured(const launch_bench *b, launch_mode m) {
    return !isnan(b->step_us[m][last(b)]);
}

/* One replay of the N-node graph by the driver's own calls. */
static acg_status raw_step(launch_bench *b, uint64_t *t1) {
    int r = b->raw.launch(b->raw.exec, b->raw.stream);
    *t1 = tool_now_ns();
    b->what = "cuGraphLaunch of the graph's CUgraphExec";
    if (r == 0) {
        r = b->raw.sync(b->raw.stream);
        b->what = "cuStreamSynchronize of the stream's CUstream";
    }
    b->raw.failed = r;
    return r == 0 ? ACG_OK : ACG_ERR_DEVICE;
}

/* What a replay of graph `at` adds to y: one per node, but the N-node graph's first node adds
 * its scalar. */
static uint64_t graph_applies(const launch_bench *b, size_t at) {
    return at == last(b) ? b->counts[at] - 1 + (uint64_t)b->node_a : b->counts[at];
}

/* Captures `count` launches of y = y + 1 into a graph, the first adding `first` instead.
 * Returns a status; b->what says what failed. */
static acg_status capture_graph(launch_bench *b, uint32_t count, float first, acg_graph **out) {
    acg_status st = acg_stream_begin_capture(b->stream, b->pool);
    b->what = "beginning the capture";
    const acg_arg first_args[3] = {b->args[0], b->args[1], acg_arg_f32(first)};
    for (uint32_t i = 0; i < count && st == ACG_OK; i++) {
        st = acg_kernel_launch(b->stream, b->kernel, &b->dims, i == 0 ? first_args : b->args, 3);
        b->what = "recording add_scalar_f32 in the capture";
        if (st != ACG_OK) {
            acg_graph *g = NULL;
            if (acg_stream_end_capture(b->stream, &g) == ACG_OK) {
                acg_graph_destroy(g);
            }
            return st;
        }
    }
    if (st == ACG_OK) {
        st = acg_stream_end_capture(b->stream, out);
        b->what = "ending the capture";
    }
    return st;
}

/* Changes the N-node graph's first scalar to the other of 1 and 2, as `mode` does it. */
static acg_status change_input(launch_bench *b, launch_mode mode) {
    float a = b->node_a == 1.0f ? 2.0f : 1.0f;
    acg_graph *g = b->graph[last(b)];
    acg_status st;
    if (mode == UPDATE) {
        const acg_arg args[3] = {b->args[0], b->args[1], acg_arg_f32(a)};
        st = acg_graph_update_kernel_node(g, 0, NULL, args, 3);
        b->what = "updating the first node's scalar";
    } else {
        acg_graph *from = NULL;
        st = capture_graph(b, b->counts[last(b)], a, &from);
        if (st == ACG_OK) {
            st = acg_graph_update(g, from);
            b->what = "updating the graph from the new capture";
            acg_status d = acg_graph_destroy(from);
            st = st != ACG_OK ? st : d;
        }
    }
    if (st == ACG_OK) {
        b->node_a = a;
    }
    /* An update may instantiate the graph again: the raw row's CUgraphExec is the graph's
     * current one, asked for again (acg_graph_get_native: valid until the next update). */
    acg_native_handle exec = ACG_NATIVE_HANDLE_INIT;
    if (st == ACG_OK && b->raw.launch != NULL && (st = acg_graph_get_native(g, &exec)) == ACG_OK) {
        b->raw.exec = exec.handle;
    }
    return st;
}

/* Runs one step of kind k; with submit/step non-NULL stores its times in ns. */
static acg_status run_step(launch_bench *b, step_kind k, double *submit, double *step) {
    acg_status st = ACG_OK;
    uint64_t launches = k.mode == EAGER ? b->counts[k.at] : graph_applies(b, k.at);
    uint64_t t0 = tool_now_ns();
    if (k.mode == RAW) {
        uint64_t t1 = 0;
        if ((st = raw_step(b, &t1)) != ACG_OK) {
            return st;
        }
        uint64_t t2 = tool_now_ns();
        b->applied += launches;
        if (submit) {
            *submit = (double)(t1 - t0);
        }
        if (step) {
            *step = (double)(t2 - t0);
        }
        return ACG_OK;
    }
    if (k.mode == UPDATE || k.mode == RECAPTURE) {
        if ((st = change_input(b, k.mode)) != ACG_OK) {
            return st;
        }
        launches = graph_applies(b, k.at);
        st = acg_graph_launch(b->graph[k.at], b->stream);
        b->what = "launching the graph";
    } else if (k.mode == EAGER) {
        for (uint32_t i = 0; i < launches && st == ACG_OK; i++) {
            st = acg_kernel_launch(b->stream, b->kernel, &b->dims, b->args, 3);
        }
        b->what = "launching add_scalar_f32";
    } else {
        st = acg_graph_launch(b->graph[k.at], b->stream);
        b->what = "launching the graph";
    }
    uint64_t t1 = tool_now_ns();
    if (st != ACG_OK) {
        return st;
    }
    st = acg_stream_synchronize(b->stream);
    uint64_t t2 = tool_now_ns();
    if (st != ACG_OK) {
        b->what = "synchronizing the stream";
        return st;
    }
    b->applied += launches;
    if (submit) {
        *submit = (double)(t1 - t0);
    }
    if (step) {
        *step = (double)(t2 - t0);
    }
    return ACG_OK;
}

/* ---- checking the work ----------------------------------------------------------------------- */

/* Sets y to zero and waits for it. */
static acg_status zero_y(launch_bench *b) {
    size_t bytes = (size_t)b->cfg->elements * sizeof(float);
    acg_status st = acg_fill(b->stream, b->y, 0, bytes, 0, sizeof(float));
    if (st == ACG_OK) {
        st = acg_stream_synchronize(b->stream);
    }
    b->applied = 0;
    return st;
}

/* Copies y back and compares every element with the launches applied; then zeroes y.
 * Returns an exit status (the error line printed). */
static int check_and_reset(launch_bench *b) {
    size_t bytes = (size_t)b->cfg->elements * sizeof(float);
    acg_status st = acg_copy_d2h(b->stream, b->host, b->y, 0, bytes);
    if (st != ACG_OK) {
        return tool_fail(st, "copying y back to check it");
    }
    float expected = (float)b->applied;
    for (uint32_t i = 0; i < b->cfg->elements; i++) {
        if (b->host[i] != expected) {
            return tool_failf("bench launch: wrong result",
                              "y[%u] = %.1f after %llu launches of y = y + 1, expected %.1f", i,
                              (double)b->host[i], (unsigned long long)b->applied, (double)expected);
        }
    }
    if ((st = zero_y(b)) != ACG_OK) {
        return tool_fail(st, "zeroing y");
    }
    return TOOL_EXIT_OK;
}

/* ---- rounds ---------------------------------------------------------------------------------- */

/* One step of each kind, the order rotating with the round. Samples go to index `sample`,
 * or nowhere for a warm-up round (sample < 0). Returns an exit status. */
static int run_round(launch_bench *b, uint64_t round, int64_t sample) {
    if (b->applied + b->per_round > EXACT_FLOAT_LIMIT) {
        int rc = check_and_reset(b);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < b->n_kinds; i++) {
        size_t k = (size_t)((round + i) % b->n_kinds);
        double *submit = sample >= 0 ? &b->submit_ns[k][sample] : NULL;
        double *step = sample >= 0 ? &b->step_ns[k][sample] : NULL;
        acg_status st = run_step(b, b->kinds[k], submit, step);
        if (st != ACG_OK && b->kinds[k].mode == RAW) {
            return tool_failf("bench launch", "%s failed with CUDA error %d", b->what,
                              b->raw.failed);
        }
        if (st != ACG_OK) {
            return tool_fail(st, b->what);
        }
    }
    return TOOL_EXIT_OK;
}

/* Captures `count` launches into a graph. Returns an exit status. */
static int capture(launch_bench *b, uint32_t count, acg_graph **out) {
    acg_status st = capture_graph(b, count, 1.0f, out);
    return st == ACG_OK ? TOOL_EXIT_OK : tool_fail(st, b->what);
}

/* Binds the raw row: the graph's CUgraphExec, the stream's CUstream, and cuGraphLaunch and
 * cuStreamSynchronize of the driver the cuda backend loaded (ACG_CUDA_DRIVER, else
 * libcuda.so.1), resolved through cuGetProcAddress_v2 at their ABI versions as the backend
 * resolves its own. Where the graph is no driver object, leaves the row out with the reason.
 * Returns an exit status. */
static int raw_bind(launch_bench *b) {
    acg_native_handle exec = ACG_NATIVE_HANDLE_INIT, stream = ACG_NATIVE_HANDLE_INIT;
    acg_status st = acg_graph_get_native(b->graph[last(b)], &exec);
    if (st == ACG_OK) {
        st = acg_stream_get_native(b->stream, &stream);
    }
    if (st != ACG_OK) {
        return tool_fail(st, "asking for the driver objects of the graph and the stream");
    }
    if (exec.kind != ACG_NATIVE_CUDA_GRAPH_EXEC || stream.kind != ACG_NATIVE_CUDA_STREAM) {
        b->no_raw = "its graphs are not one driver object (only cuda's are)";
        return TOOL_EXIT_OK;
    }
    const char *path = getenv("ACG_CUDA_DRIVER");
    if (path == NULL || path[0] == '\0') {
        path = "libcuda.so.1";
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the backend's, already loaded */
    cu_get_proc_fn get = NULL;
    if (h != NULL) {
        *(void **)&get = dlsym(h, "cuGetProcAddress_v2");
    }
    int found_launch = -1, found_sync = -1; /* CU_GET_PROC_ADDRESS_SUCCESS is 0 */
    void *launch = NULL, *sync = NULL;
    if (get != NULL && get("cuGraphLaunch", &launch, 10000, 0, &found_launch) == 0) {
        get("cuStreamSynchronize", &sync, 2000, 0, &found_sync);
    }
    if (h != NULL) {
        dlclose(h); /* RTLD_NOLOAD took a reference; the backend holds its own */
    }
    if (found_launch != 0 || found_sync != 0 || launch == NULL || sync == NULL) {
        return tool_failf("bench launch",
                          "cannot resolve cuGraphLaunch and cuStreamSynchronize "
                          "in the CUDA driver %s",
                          path);
    }
    *(void **)&b->raw.launch = launch;
    *(void **)&b->raw.sync = sync;
    b->raw.exec = exec.handle;
    b->raw.stream = stream.handle;
    return TOOL_EXIT_OK;
}

/* Warms up, runs the timed rounds (--steps of them, or as many as fit in TARGET_NS), takes
 * the medians and fits the lines. */
static int measure(launch_bench *b, uint64_t *steps_out) {
    uint64_t round = 0;
    uint64_t t0 = tool_now_ns();
    int rc;
    do {
        if ((rc = run_round(b, round++, -1)) != TOOL_EXIT_OK) {
            return rc;
        }
    } while (round < WARMUP_MIN_ROUNDS || tool_now_ns() - t0 < WARMUP_MIN_NS);

    uint64_t capacity = b->cfg->steps ? b->cfg->steps : MAX_AUTO_STEPS;
    for (size_t k = 0; k < b->n_kinds; k++) {
        b->submit_ns[k] = malloc(capacity * sizeof(double));
        b->step_ns[k] = malloc(capacity * sizeof(double));
        if (!b->submit_ns[k] || !b->step_ns[k]) {
            return tool_failf("bench launch", "out of memory for %llu samples",
                              (unsigned long long)capacity);
        }
    }
    uint64_t steps = 0;
    t0 = tool_now_ns();
    while (steps < capacity &&
           (b->cfg->steps || steps < MIN_AUTO_STEPS || tool_now_ns() - t0 < TARGET_NS)) {
        if ((rc = run_round(b, round++, (int64_t)steps)) != TOOL_EXIT_OK) {
            return rc;
        }
        steps++;
    }
    if ((rc = check_and_reset(b)) != TOOL_EXIT_OK) {
        return rc;
    }

    for (size_t k = 0; k < b->n_kinds; k++) {
        const step_kind *kind = &b->kinds[k];
        b->submit_us[kind->mode][kind->at] = tool_median(b->submit_ns[k], steps) / 1e3;
        b->step_us[kind->mode][kind->at] = tool_median(b->step_ns[k], steps) / 1e3;
    }
    for (int m = EAGER; m <= GRAPH; m++) {
        double x[MAX_COUNTS];
        for (size_t i = 0; i < b->n_counts; i++) {
            x[i] = (double)b->counts[i];
        }
        b->fit[m] = tool_fit_line(x, b->step_us[m], measured(b, (launch_mode)m) ? b->n_counts : 0);
    }
    *steps_out = steps;
    return TOOL_EXIT_OK;
}

/* ---- report ---------------------------------------------------------------------------------- */

/* The step time at N of mode m, and its submit time. */
static double step_us(const launch_bench *b, launch_mode m) { return b->step_us[m][last(b)]; }

static double submit_us(const launch_bench *b, launch_mode m) { return b->submit_us[m][last(b)]; }

/* The cost of one more launch (EAGER) or node (GRAPH) in ns: the fit's slope where it measured
 * one, else NaN (null in JSON). */
static double ns_per_node(const launch_bench *b, launch_mode m) {
    return tool_fit_slope_measured(&b->fit[m]) ? b->fit[m].slope * 1e3 : NAN;
}

/* The fit of mode m as a JSON object: its line, whether the slope is a measurement, and the
 * points it went through. */
static void json_fit(tool_json *j, const launch_bench *b, launch_mode m, const char *key) {
    const tool_fit *f = &b->fit[m];
    tool_json_object_begin(j, key);
    tool_json_number(j, "intercept_us", f->intercept);
    tool_json_number(j, "slope_ns", f->slope * 1e3);
    tool_json_number(j, "slope_stderr_ns", f->slope_stderr * 1e3);
    tool_json_bool(j, "measured", tool_fit_slope_measured(f));
    tool_json_array_begin(j, "step_us");
    for (size_t i = 0; i < b->n_counts; i++) {
        tool_json_number(j, NULL, b->step_us[m][i]);
    }
    tool_json_array_end(j);
    tool_json_object_end(j);
}

static int report_json(const launch_bench *b, uint64_t steps, double seconds) {
    tool_json j;
    tool_json_begin(&j, stdout);
    tool_json_object_begin(&j, NULL);
    bench_json_device(&j, b->dev);
    tool_json_uint(&j, "kernels", b->cfg->kernels);
    tool_json_uint(&j, "elements", b->cfg->elements);
    tool_json_uint(&j, "steps", steps);
    tool_json_bool(&j, "graphs", b->graphs);
    tool_json_number(&j, "eager_submit_us", submit_us(b, EAGER));
    tool_json_number(&j, "graph_submit_us", submit_us(b, GRAPH));
    tool_json_number(&j, "eager_step_us", step_us(b, EAGER));
    tool_json_number(&j, "graph_step_us", step_us(b, GRAPH));
    tool_json_number(&j, "step_ratio", step_us(b, EAGER) / step_us(b, GRAPH));
    tool_json_number(&j, "submit_ratio", submit_us(b, EAGER) / submit_us(b, GRAPH));
    tool_json_number(&j, "graph_ns_per_node", ns_per_node(b, GRAPH));
    tool_json_number(&j, "eager_ns_per_launch", ns_per_node(b, EAGER));
    tool_json_number(&j, "eager1_step_us", b->step_us[EAGER][0]);
    tool_json_number(&j, "graph1_step_us", b->step_us[GRAPH][0]);
    tool_json_array_begin(&j, "node_counts");
    for (size_t i = 0; i < b->n_counts; i++) {
        tool_json_uint(&j, NULL, b->counts[i]);
    }
    tool_json_array_end(&j);
    json_fit(&j, b, EAGER, "eager_fit");
    json_fit(&j, b, GRAPH, "graph_fit");
    tool_json_number(&j, "raw_submit_us", submit_us(b, RAW));
    tool_json_number(&j, "raw_step_us", step_us(b, RAW));
    tool_json_number(&j, "acg_over_raw_step", step_us(b, GRAPH) / step_us(b, RAW));
    tool_json_number(&j, "node_update_step_us", step_us(b, UPDATE));
    tool_json_number(&j, "recapture_step_us", step_us(b, RECAPTURE));
    tool_json_number(&j, "node_update_over_replay", step_us(b, UPDATE) / step_us(b, GRAPH));
    tool_json_number(&j, "recapture_over_node_update", step_us(b, RECAPTURE) / step_us(b, UPDATE));
    tool_json_bool(&j, "verified", true);
    tool_json_number(&j, "seconds", seconds);
    tool_json_object_end(&j);
    return tool_json_end(&j);
}

/* A table cell of a figure, or "-" where there is none. */
static void cell(tool_table *t, const char *fmt, double v) {
    if (isfinite(v)) {
        tool_table_cell(t, fmt, v);
    } else {
        tool_table_cell(t, "-");
    }
}

/* The fits' lines in a table, and a sentence for each slope that is not a measurement. */
static void report_fits(const launch_bench *b) {
    printf("\nper launch or node: the least-squares line of the step time over the node counts\n");
    static const char *const headers[] = {"mode", "fixed us", "ns/node", "+/- ns"};
    static const int widths[] = {-9, 8, 8, 7};
    tool_table t;
    tool_table_begin(&t, stdout, 4, widths, headers);
    for (int m = EAGER; m <= GRAPH; m++) {
        const tool_fit *f = &b->fit[m];
        if (measured(b, (launch_mode)m)) {
            tool_table_cell(&t, "%s", mode_names[m]);
            cell(&t, "%.2f", f->intercept);
            cell(&t, "%.1f", ns_per_node(b, (launch_mode)m));
            cell(&t, "%.1f", f->slope_stderr * 1e3);
        }
    }
    for (int m = EAGER; m <= GRAPH; m++) {
        if (!measured(b, (launch_mode)m) || tool_fit_slope_measured(&b->fit[m])) {
            continue;
        }
        printf("%s: the cost per %s cannot be measured at %u kernels: ", mode_names[m],
               m == EAGER ? "launch" : "node", b->cfg->kernels);
        if (b->n_counts < 3) {
            printf("a fit needs three node counts or more\n");
        } else {
            printf("the fit's slope is not above its uncertainty (more --kernels narrow it)\n");
        }
    }
}

/* The steps whose input changes: the replay with the graph as it is, against the same replay
 * after a node update, and after a recapture and acg_graph_update. */
static void report_inputs(const launch_bench *b) {
    if (!b->graphs) {
        return;
    }
    printf("\nan input that changes every step (the first node's scalar), %u nodes:\n",
           b->cfg->kernels);
    static const char *const headers[] = {"step", "step us", "x replay"};
    static const int widths[] = {-28, 10, 9};
    static const char *const labels[] = {"replay, unchanged", "node update + replay",
                                         "recapture + update + replay"};
    const launch_mode modes[] = {GRAPH, UPDATE, RECAPTURE};
    const char *why[] = {NULL, b->no_update, b->no_recapture};
    tool_table t;
    tool_table_begin(&t, stdout, 3, widths, headers);
    for (int i = 0; i < 3; i++) {
        if (measured(b, modes[i])) {
            tool_table_cell(&t, "%s", labels[i]);
            tool_table_cell(&t, "%.2f", step_us(b, modes[i]));
            tool_table_cell(&t, "%.2f", step_us(b, modes[i]) / step_us(b, GRAPH));
        }
    }
    for (int i = 1; i < 3; i++) {
        if (!measured(b, modes[i])) {
            printf("%s: not measured on %s: %s\n", labels[i], acg_device_get_spec(b->dev), why[i]);
        }
    }
}

static void report_table(const launch_bench *b, uint64_t steps, double seconds) {
    bench_print_title(&b->cfg->common, b->dev);
    printf("%u dependent kernels per step on %u elements, %llu steps of each kind, %.1f s\n\n",
           b->cfg->kernels, b->cfg->elements, (unsigned long long)steps, seconds);
    static const char *const headers[] = {"mode", "launches", "submit us/step", "step us"};
    static const int widths[] = {-9, 8, 14, 10};
    tool_table t;
    tool_table_begin(&t, stdout, 4, widths, headers);
    for (int m = 0; m < N_MODES; m++) {
        if (!measured(b, (launch_mode)m)) {
            continue;
        }
        tool_table_cell(&t, "%s", mode_names[m]);
        tool_table_cell(&t, "%u", b->cfg->kernels);
        tool_table_cell(&t, "%.2f", submit_us(b, (launch_mode)m));
        tool_table_cell(&t, "%.2f", step_us(b, (launch_mode)m));
    }
    printf("\nstep us at each node count (medians over the steps):\n");
    static const char *const count_headers[] = {"nodes", "eager", "graph"};
    static const int count_widths[] = {8, 10, 10};
    tool_table_begin(&t, stdout, b->graphs ? 3 : 2, count_widths, count_headers);
    for (size_t i = 0; i < b->n_counts; i++) {
        tool_table_cell(&t, "%u", b->counts[i]);
        tool_table_cell(&t, "%.2f", b->step_us[EAGER][i]);
        if (b->graphs) {
            tool_table_cell(&t, "%.2f", b->step_us[GRAPH][i]);
        }
    }
    report_fits(b);
    printf("\n");
    if (b->graphs) {
        printf("eager/graph: step %.2fx, submit %.2fx (above 1: the graph is faster)\n",
               step_us(b, EAGER) / step_us(b, GRAPH), submit_us(b, EAGER) / submit_us(b, GRAPH));
    } else {
        printf("graphs: unsupported on %s (capability.graphs is false): eager figures only\n",
               acg_device_get_spec(b->dev));
    }
    if (measured(b, RAW)) {
        printf("acg/raw: step %.3fx, submit %.2fx (acg_graph_launch against the driver's own "
               "cuGraphLaunch of the same graph)\n",
               step_us(b, GRAPH) / step_us(b, RAW), submit_us(b, GRAPH) / submit_us(b, RAW));
    } else if (b->graphs) {
        printf("graph raw: not measured on %s: %s\n", acg_device_get_spec(b->dev), b->no_raw);
    }
    report_inputs(b);
    printf("checked: y = y + 1 applied as often as launched, all %u elements exact\n",
           b->cfg->elements);
}

/* ---- setup, run, teardown -------------------------------------------------------------------- */

static int run(const launch_config *cfg) {
    launch_bench b;
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    for (int m = 0; m < N_MODES; m++) {
        for (size_t i = 0; i < MAX_COUNTS; i++) {
            b.submit_us[m][i] = NAN;
            b.step_us[m][i] = NAN;
        }
    }
    choose_counts(&b);
    uint64_t t_start = tool_now_ns();
    size_t bytes = (size_t)cfg->elements * sizeof(float);
    acg_status st = ACG_OK;
    int rc = bench_device_open(&cfg->common, &b.dev, &b.cap);
    if (rc != TOOL_EXIT_OK) {
        return rc;
    }
    rc = TOOL_EXIT_FAILURE;
    b.graphs = b.cap && b.cap->graphs;
    if ((st = acg_stream_create(b.dev, &b.stream)) != ACG_OK) {
        rc = tool_fail(st, "creating a stream");
        goto out_close_device;
    }
    if ((st = acg_buffer_alloc(b.dev, bytes, &b.y)) != ACG_OK) {
        rc = tool_fail(st, "allocating y");
        goto out_destroy_stream;
    }
    b.host = malloc(bytes);
    if (!b.host) {
        rc = tool_failf("bench launch", "out of host memory for %zu bytes", bytes);
        goto out_free_y;
    }
    if ((st = acg_kernel_get(b.dev, "add_scalar_f32", &b.kernel)) != ACG_OK) {
        rc = tool_fail(st, "loading kernel add_scalar_f32");
        goto out_free_host;
    }
    b.args[0] = acg_arg_buffer(b.y, 0);
    b.args[1] = acg_arg_buffer(b.y, 0);
    b.args[2] = acg_arg_f32(1.0f);
    b.dims = acg_dims_1d(cfg->elements);
    b.node_a = 1.0f;
    if ((st = zero_y(&b)) != ACG_OK) {
        rc = tool_fail(st, "zeroing y");
        goto out_free_host;
    }
    if (b.graphs) {
        if ((st = acg_graph_pool_create(b.dev, &b.pool)) != ACG_OK) {
            rc = tool_fail(st, "creating a graph pool");
            goto out_free_host;
        }
        for (size_t i = 0; i < b.n_counts; i++) {
            if ((rc = capture(&b, b.counts[i], &b.graph[i])) != TOOL_EXIT_OK) {
                goto out_destroy_graphs;
            }
        }
        if ((rc = raw_bind(&b)) != TOOL_EXIT_OK) {
            goto out_destroy_graphs;
        }
    }
    for (size_t i = 0; i < b.n_counts; i++) {
        b.kinds[b.n_kinds++] = (step_kind){EAGER, i};
        if (b.graphs) {
            b.kinds[b.n_kinds++] = (step_kind){GRAPH, i};
        }
    }
    if (b.raw.launch != NULL) {
        b.kinds[b.n_kinds++] = (step_kind){RAW, last(&b)};
    }
    b.no_update = "no per-node update (capability.graph_node_update is false)";
    b.no_recapture = "no graph update (capability.graph_update is false)";
    if (b.graphs && b.cap->graph_node_update) {
        b.kinds[b.n_kinds++] = (step_kind){UPDATE, last(&b)};
    }
    if (b.graphs && b.cap->graph_update) {
        b.kinds[b.n_kinds++] = (step_kind){RECAPTURE, last(&b)};
    }
    for (size_t k = 0; k < b.n_kinds; k++) {
        b.per_round += 2 * (uint64_t)b.counts[b.kinds[k].at]; /* a scalar adds 2 at most */
    }

    uint64_t steps = 0;
    if ((rc = measure(&b, &steps)) != TOOL_EXIT_OK) {
        goto out_destroy_graphs;
    }
    double seconds = (double)(tool_now_ns() - t_start) / 1e9;
    if (cfg->common.json) {
        rc = report_json(&b, steps, seconds);
    } else {
        report_table(&b, steps, seconds);
    }

    /* Teardown failures after a good run are failures too: they are library bugs. */
out_destroy_graphs:
    for (size_t i = 0; i < MAX_COUNTS; i++) {
        if ((st = acg_graph_destroy(b.graph[i])) != ACG_OK && rc == TOOL_EXIT_OK) {
            rc = tool_fail(st, "destroying a graph");
        }
    }
    if ((st = acg_graph_pool_destroy(b.pool)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the graph pool");
    }
    for (size_t k = 0; k < MAX_KINDS; k++) {
        free(b.submit_ns[k]);
        free(b.step_ns[k]);
    }
out_free_host:
    free(b.host);
out_free_y:
    if ((st = acg_buffer_free(b.y)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "freeing y");
    }
out_destroy_stream:
    if ((st = acg_stream_destroy(b.stream)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the stream");
    }
out_close_device:
    return bench_device_close(b.dev, rc);
}

/* ---- command line ---------------------------------------------------------------------------- */

int bench_launch(int argc, char **argv) {
    launch_config cfg = {.common = {"bench launch", bench_launch_usage, "cpu", false}};
    uint64_t kernels = 256, steps = 0, elements = 16;
    const bench_count counts[] = {{"--kernels", 1000000, &kernels},
                                  {"--steps", 10000000, &steps},
                                  {"--elements", EXACT_FLOAT_LIMIT, &elements}};
    int rc = bench_parse_counts(argc, argv, &cfg.common, counts, sizeof counts / sizeof counts[0]);
    if (rc != BENCH_OPTION_TAKEN) {
        return rc;
    }
    cfg.kernels = (uint32_t)kernels;
    cfg.elements = (uint32_t)elements;
    cfg.steps = steps;
    return run(&cfg);
}
