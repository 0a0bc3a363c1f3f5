/*
 * launch.c — `acg bench launch`: what it costs the host to launch N small dependent kernels one
 * by one (eager) against replaying the same N launches captured as one graph.
 *
 * Every launch is add_scalar_f32 with (y, y, 1.0f), that is y = y + 1 over E elements, so
 * each launch depends on the one before. Per step the bench times the host submit (N launches,
 * or one acg_graph_launch) and the whole step (submit plus acg_stream_synchronize). A graph of
 * one node and a step of one launch are timed too, so the marginal cost of one more node or
 * launch is (step(N) - step(1)) / (N - 1), free of the fixed synchronize round trip.
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
#include "bench.h"
#include "cli.h"

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

typedef enum step_kind { EAGER, EAGER_1, GRAPH, GRAPH_1, RAW, N_KINDS } step_kind;

static const char *const kind_names[N_KINDS] = {"eager", "eager x1", "graph", "graph x1",
                                                "graph raw"};

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
    acg_graph *graph[N_KINDS]; /* [GRAPH]: N nodes, [GRAPH_1]: one node */
    bool graphs;
    raw_driver raw;           /* launch NULL: no raw row (the graph is no driver object) */
    step_kind kinds[N_KINDS]; /* (n_kinds) the kinds measured here */
    int n_kinds;
    const char *no_raw; /* why there is no raw row */
    acg_arg args[3];
    acg_dims dims;
    uint64_t applied;           /* launches run on y since it was last zeroed */
    float *host;                /* (elements) y copied back */
    double *submit_ns[N_KINDS]; /* (steps) */
    double *step_ns[N_KINDS];   /* (steps) */
    double median_submit_us[N_KINDS];
    double median_step_us[N_KINDS];
    const char *what; /* the operation that failed, for the error line */
} launch_bench;

/* ---- one step -------------------------------------------------------------------------------- */

static uint32_t kind_launches(const launch_bench *b, step_kind k) {
    return k == EAGER || k == GRAPH || k == RAW ? b->cfg->kernels : 1;
}

static bool measured(const launch_bench *b, step_kind k) {
    for (int i = 0; i < b->n_kinds; i++) {
        if (b->kinds[i] == k)
            return true;
    }
    return false;
}

/* One replay of the N-node graph by the driver's own calls. */
static acg_status raw_step(launch_bench *b, uint64_t *t1) {
    int r = b->raw.launch(b->raw.exec, b->raw.stream);
    *t1 = bench_now_ns();
    b->what = "cuGraphLaunch of the graph's CUgraphExec";
    if (r == 0) {
        r = b->raw.sync(b->raw.stream);
        b->what = "cuStreamSynchronize of the stream's CUstream";
    }
    b->raw.failed = r;
    return r == 0 ? ACG_OK : ACG_ERR_DEVICE;
}

/* Runs one step of kind k; with submit/step non-NULL stores its times in ns. */
static acg_status run_step(launch_bench *b, step_kind k, double *submit, double *step) {
    acg_status st = ACG_OK;
    uint64_t t0 = bench_now_ns();
    if (k == RAW) {
        uint64_t t1 = 0;
        if ((st = raw_step(b, &t1)) != ACG_OK)
            return st;
        uint64_t t2 = bench_now_ns();
        b->applied += kind_launches(b, k);
        if (submit)
            *submit = (double)(t1 - t0);
        if (step)
            *step = (double)(t2 - t0);
        return ACG_OK;
    }
    if (k == EAGER || k == EAGER_1) {
        uint32_t n = kind_launches(b, k);
        for (uint32_t i = 0; i < n && st == ACG_OK; i++)
            st = acg_kernel_launch(b->stream, b->kernel, &b->dims, b->args, 3);
        b->what = "launching add_scalar_f32";
    } else {
        st = acg_graph_launch(b->graph[k], b->stream);
        b->what = "launching the graph";
    }
    uint64_t t1 = bench_now_ns();
    if (st != ACG_OK)
        return st;
    st = acg_stream_synchronize(b->stream);
    uint64_t t2 = bench_now_ns();
    if (st != ACG_OK) {
        b->what = "synchronizing the stream";
        return st;
    }
    b->applied += kind_launches(b, k);
    if (submit)
        *submit = (double)(t1 - t0);
    if (step)
        *step = (double)(t2 - t0);
    return ACG_OK;
}

/* ---- checking the work ----------------------------------------------------------------------- */

/* Sets y to zero and waits for it. */
static acg_status zero_y(launch_bench *b) {
    size_t bytes = (size_t)b->cfg->elements * sizeof(float);
    acg_status st = acg_fill(b->stream, b->y, 0, bytes, 0, sizeof(float));
    if (st == ACG_OK)
        st = acg_stream_synchronize(b->stream);
    b->applied = 0;
    return st;
}

/* Copies y back and compares every element with the launches applied; then zeroes y.
 * Returns an exit status (the error line printed). */
static int check_and_reset(launch_bench *b) {
    size_t bytes = (size_t)b->cfg->elements * sizeof(float);
    acg_status st = acg_copy_d2h(b->stream, b->host, b->y, 0, bytes);
    if (st != ACG_OK)
        return cli_fail(st, "copying y back to check it");
    float expected = (float)b->applied;
    for (uint32_t i = 0; i < b->cfg->elements; i++) {
        if (b->host[i] != expected)
            return cli_failf("bench launch: wrong result",
                             "y[%u] = %.1f after %llu launches of y = y + 1, expected %.1f", i,
                             (double)b->host[i], (unsigned long long)b->applied, (double)expected);
    }
    if ((st = zero_y(b)) != ACG_OK)
        return cli_fail(st, "zeroing y");
    return CLI_EXIT_OK;
}

/* ---- rounds ---------------------------------------------------------------------------------- */

/* One step of each kind, the order rotating with the round. Samples go to index `sample`,
 * or nowhere for a warm-up round (sample < 0). Returns an exit status. */
static int run_round(launch_bench *b, uint64_t round, int64_t sample) {
    uint64_t per_round = 3 * (uint64_t)b->cfg->kernels + 2;
    if (b->applied + per_round > EXACT_FLOAT_LIMIT) {
        int rc = check_and_reset(b);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    for (int i = 0; i < b->n_kinds; i++) {
        step_kind k = b->kinds[(round + (uint64_t)i) % (uint64_t)b->n_kinds];
        double *submit = sample >= 0 ? &b->submit_ns[k][sample] : NULL;
        double *step = sample >= 0 ? &b->step_ns[k][sample] : NULL;
        acg_status st = run_step(b, k, submit, step);
        if (st != ACG_OK && k == RAW)
            return cli_failf("bench launch", "%s failed with CUDA error %d", b->what,
                             b->raw.failed);
        if (st != ACG_OK)
            return cli_fail(st, b->what);
    }
    return CLI_EXIT_OK;
}

/* Captures `count` launches into a graph. Returns an exit status. */
static int capture(launch_bench *b, uint32_t count, acg_graph **out) {
    acg_status st = acg_stream_begin_capture(b->stream, b->pool);
    if (st != ACG_OK)
        return cli_fail(st, "beginning the capture");
    for (uint32_t i = 0; i < count; i++) {
        st = acg_kernel_launch(b->stream, b->kernel, &b->dims, b->args, 3);
        if (st != ACG_OK) {
            int rc = cli_fail(st, "recording add_scalar_f32 in the capture");
            acg_graph *g = NULL;
            if (acg_stream_end_capture(b->stream, &g) == ACG_OK)
                acg_graph_destroy(g);
            return rc;
        }
    }
    st = acg_stream_end_capture(b->stream, out);
    if (st != ACG_OK)
        return cli_fail(st, "ending the capture");
    return CLI_EXIT_OK;
}

/* Binds the raw row: the graph's CUgraphExec, the stream's CUstream, and cuGraphLaunch and
 * cuStreamSynchronize of the driver the cuda backend loaded (ACG_CUDA_DRIVER, else
 * libcuda.so.1), resolved through cuGetProcAddress_v2 at their ABI versions as the backend
 * resolves its own. Where the graph is no driver object, leaves the row out with the reason.
 * Returns an exit status. */
static int raw_bind(launch_bench *b) {
    acg_native_handle exec = ACG_NATIVE_HANDLE_INIT, stream = ACG_NATIVE_HANDLE_INIT;
    acg_status st = acg_graph_get_native(b->graph[GRAPH], &exec);
    if (st == ACG_OK)
        st = acg_stream_get_native(b->stream, &stream);
    if (st != ACG_OK)
        return cli_fail(st, "asking for the driver objects of the graph and the stream");
    if (exec.kind != ACG_NATIVE_CUDA_GRAPH_EXEC || stream.kind != ACG_NATIVE_CUDA_STREAM) {
        b->no_raw = "its graphs are not one driver object (only cuda's are)";
        return CLI_EXIT_OK;
    }
    const char *path = getenv("ACG_CUDA_DRIVER");
    if (path == NULL || path[0] == '\0')
        path = "libcuda.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the backend's, already loaded */
    cu_get_proc_fn get = NULL;
    if (h != NULL)
        *(void **)&get = dlsym(h, "cuGetProcAddress_v2");
    int found_launch = -1, found_sync = -1; /* CU_GET_PROC_ADDRESS_SUCCESS is 0 */
    void *launch = NULL, *sync = NULL;
    if (get != NULL && get("cuGraphLaunch", &launch, 10000, 0, &found_launch) == 0)
        get("cuStreamSynchronize", &sync, 2000, 0, &found_sync);
    if (h != NULL)
        dlclose(h); /* RTLD_NOLOAD took a reference; the backend holds its own */
    if (found_launch != 0 || found_sync != 0 || launch == NULL || sync == NULL)
        return cli_failf("bench launch",
                         "cannot resolve cuGraphLaunch and cuStreamSynchronize "
                         "in the CUDA driver %s",
                         path);
    *(void **)&b->raw.launch = launch;
    *(void **)&b->raw.sync = sync;
    b->raw.exec = exec.handle;
    b->raw.stream = stream.handle;
    return CLI_EXIT_OK;
}

/* Warms up, runs the timed rounds (--steps of them, or as many as fit in TARGET_NS), takes
 * the medians. */
static int measure(launch_bench *b, uint64_t *steps_out) {
    uint64_t round = 0;
    uint64_t t0 = bench_now_ns();
    int rc;
    do {
        if ((rc = run_round(b, round++, -1)) != CLI_EXIT_OK)
            return rc;
    } while (round < WARMUP_MIN_ROUNDS || bench_now_ns() - t0 < WARMUP_MIN_NS);

    uint64_t capacity = b->cfg->steps ? b->cfg->steps : MAX_AUTO_STEPS;
    for (int k = 0; k < N_KINDS; k++) {
        b->submit_ns[k] = malloc(capacity * sizeof(double));
        b->step_ns[k] = malloc(capacity * sizeof(double));
        if (!b->submit_ns[k] || !b->step_ns[k])
            return cli_failf("bench launch", "out of memory for %llu samples",
                             (unsigned long long)capacity);
    }
    uint64_t steps = 0;
    t0 = bench_now_ns();
    while (steps < capacity &&
           (b->cfg->steps || steps < MIN_AUTO_STEPS || bench_now_ns() - t0 < TARGET_NS)) {
        if ((rc = run_round(b, round++, (int64_t)steps)) != CLI_EXIT_OK)
            return rc;
        steps++;
    }
    if ((rc = check_and_reset(b)) != CLI_EXIT_OK)
        return rc;

    for (int k = 0; k < N_KINDS; k++) {
        bool ran = measured(b, (step_kind)k);
        b->median_submit_us[k] = ran ? bench_median(b->submit_ns[k], steps) / 1e3 : NAN;
        b->median_step_us[k] = ran ? bench_median(b->step_ns[k], steps) / 1e3 : NAN;
    }
    *steps_out = steps;
    return CLI_EXIT_OK;
}

/* ---- report ---------------------------------------------------------------------------------- */

/* Marginal ns of one more launch (EAGER) or node (GRAPH); NaN with one kernel. */
static double ns_per_node(const launch_bench *b, step_kind k) {
    uint32_t n = b->cfg->kernels;
    if (n < 2)
        return NAN;
    return (b->median_step_us[k] - b->median_step_us[k + 1]) * 1e3 / (double)(n - 1);
}

static void report_json(const launch_bench *b, uint64_t steps, double seconds) {
    bench_json j;
    bench_json_begin(&j, stdout);
    bench_json_object_begin(&j, NULL);
    bench_json_device(&j, b->dev);
    bench_json_uint(&j, "kernels", b->cfg->kernels);
    bench_json_uint(&j, "elements", b->cfg->elements);
    bench_json_uint(&j, "steps", steps);
    bench_json_bool(&j, "graphs", b->graphs);
    bench_json_number(&j, "eager_submit_us", b->median_submit_us[EAGER]);
    bench_json_number(&j, "graph_submit_us", b->median_submit_us[GRAPH]);
    bench_json_number(&j, "eager_step_us", b->median_step_us[EAGER]);
    bench_json_number(&j, "graph_step_us", b->median_step_us[GRAPH]);
    bench_json_number(&j, "step_ratio", b->median_step_us[EAGER] / b->median_step_us[GRAPH]);
    bench_json_number(&j, "submit_ratio", b->median_submit_us[EAGER] / b->median_submit_us[GRAPH]);
    bench_json_number(&j, "graph_ns_per_node", ns_per_node(b, GRAPH));
    bench_json_number(&j, "eager_ns_per_launch", ns_per_node(b, EAGER));
    bench_json_number(&j, "eager1_step_us", b->median_step_us[EAGER_1]);
    bench_json_number(&j, "graph1_step_us", b->median_step_us[GRAPH_1]);
    bench_json_number(&j, "raw_submit_us", b->median_submit_us[RAW]);
    bench_json_number(&j, "raw_step_us", b->median_step_us[RAW]);
    bench_json_number(&j, "acg_over_raw_step", b->median_step_us[GRAPH] / b->median_step_us[RAW]);
    bench_json_bool(&j, "verified", true);
    bench_json_number(&j, "seconds", seconds);
    bench_json_object_end(&j);
    bench_json_end(&j);
}

static void report_table(const launch_bench *b, uint64_t steps, double seconds) {
    bench_print_title(&b->cfg->common, b->dev);
    printf("%u dependent kernels per step on %u elements, %llu steps of each mode, %.1f s\n\n",
           b->cfg->kernels, b->cfg->elements, (unsigned long long)steps, seconds);
    static const char *const headers[] = {"mode", "launches", "submit us/step", "step us",
                                          "ns/node"};
    static const int widths[] = {-9, 8, 14, 10, 8};
    bench_table t;
    bench_table_begin(&t, stdout, 5, widths, headers);
    static const step_kind order[] = {EAGER, GRAPH, RAW, EAGER_1, GRAPH_1};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        step_kind k = order[i];
        if (!measured(b, k))
            continue;
        bench_table_cell(&t, "%s", kind_names[k]);
        bench_table_cell(&t, "%u", kind_launches(b, k));
        bench_table_cell(&t, "%.2f", b->median_submit_us[k]);
        bench_table_cell(&t, "%.2f", b->median_step_us[k]);
        if (k == EAGER || k == GRAPH)
            bench_table_cell(&t, "%.1f", ns_per_node(b, k));
        else
            bench_table_cell(&t, "-");
    }
    printf("\nmedians over the steps; ns/node = (step(N) - step(1)) / (N - 1)\n");
    if (b->graphs)
        printf("eager/graph: step %.2fx, submit %.2fx (above 1: the graph is faster)\n",
               b->median_step_us[EAGER] / b->median_step_us[GRAPH],
               b->median_submit_us[EAGER] / b->median_submit_us[GRAPH]);
    else
        printf("graphs: unsupported on %s (capability.graphs is false): eager figures only\n",
               acg_device_get_spec(b->dev));
    if (measured(b, RAW))
        printf("acg/raw: step %.3fx, submit %.2fx (acg_graph_launch against the driver's own "
               "cuGraphLaunch of the same graph)\n",
               b->median_step_us[GRAPH] / b->median_step_us[RAW],
               b->median_submit_us[GRAPH] / b->median_submit_us[RAW]);
    else if (b->graphs)
        printf("graph raw: not measured on %s: %s\n", acg_device_get_spec(b->dev), b->no_raw);
    printf("checked: y = y + 1 applied as often as launched, all %u elements exact\n",
           b->cfg->elements);
}

/* ---- setup, run, teardown -------------------------------------------------------------------- */

static int run(const launch_config *cfg) {
    launch_bench b;
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    uint64_t t_start = bench_now_ns();
    size_t bytes = (size_t)cfg->elements * sizeof(float);
    acg_status st = ACG_OK;
    int rc = bench_device_open(&cfg->common, &b.dev, &b.cap);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = CLI_EXIT_FAILURE;
    b.graphs = b.cap && b.cap->graphs;
    if ((st = acg_stream_create(b.dev, &b.stream)) != ACG_OK) {
        rc = cli_fail(st, "creating a stream");
        goto out_close_device;
    }
    if ((st = acg_buffer_alloc(b.dev, bytes, &b.y)) != ACG_OK) {
        rc = cli_fail(st, "allocating y");
        goto out_destroy_stream;
    }
    b.host = malloc(bytes);
    if (!b.host) {
        rc = cli_failf("bench launch", "out of host memory for %zu bytes", bytes);
        goto out_free_y;
    }
    if ((st = acg_kernel_get(b.dev, "add_scalar_f32", &b.kernel)) != ACG_OK) {
        rc = cli_fail(st, "loading kernel add_scalar_f32");
        goto out_free_host;
    }
    b.args[0] = acg_arg_buffer(b.y, 0);
    b.args[1] = acg_arg_buffer(b.y, 0);
    b.args[2] = acg_arg_f32(1.0f);
    b.dims = acg_dims_1d(cfg->elements);
    if ((st = zero_y(&b)) != ACG_OK) {
        rc = cli_fail(st, "zeroing y");
        goto out_free_host;
    }
    if (b.graphs) {
        if ((st = acg_graph_pool_create(b.dev, &b.pool)) != ACG_OK) {
            rc = cli_fail(st, "creating a graph pool");
            goto out_free_host;
        }
        if ((rc = capture(&b, cfg->kernels, &b.graph[GRAPH])) != CLI_EXIT_OK ||
            (rc = capture(&b, 1, &b.graph[GRAPH_1])) != CLI_EXIT_OK ||
            (rc = raw_bind(&b)) != CLI_EXIT_OK)
            goto out_destroy_graphs;
    }
    b.kinds[b.n_kinds++] = EAGER;
    b.kinds[b.n_kinds++] = EAGER_1;
    if (b.graphs) {
        b.kinds[b.n_kinds++] = GRAPH;
        b.kinds[b.n_kinds++] = GRAPH_1;
    }
    if (b.raw.launch != NULL)
        b.kinds[b.n_kinds++] = RAW;

    uint64_t steps = 0;
    if ((rc = measure(&b, &steps)) != CLI_EXIT_OK)
        goto out_destroy_graphs;
    double seconds = (double)(bench_now_ns() - t_start) / 1e9;
    if (cfg->common.json)
        report_json(&b, steps, seconds);
    else
        report_table(&b, steps, seconds);

    /* Teardown failures after a good run are failures too: they are library bugs. */
out_destroy_graphs:
    for (int k = 0; k < N_KINDS; k++)
        if ((st = acg_graph_destroy(b.graph[k])) != ACG_OK && rc == CLI_EXIT_OK)
            rc = cli_fail(st, "destroying a graph");
    if ((st = acg_graph_pool_destroy(b.pool)) != ACG_OK && rc == CLI_EXIT_OK)
        rc = cli_fail(st, "destroying the graph pool");
    for (int k = 0; k < N_KINDS; k++) {
        free(b.submit_ns[k]);
        free(b.step_ns[k]);
    }
out_free_host:
    free(b.host);
out_free_y:
    if ((st = acg_buffer_free(b.y)) != ACG_OK && rc == CLI_EXIT_OK)
        rc = cli_fail(st, "freeing y");
out_destroy_stream:
    if ((st = acg_stream_destroy(b.stream)) != ACG_OK && rc == CLI_EXIT_OK)
        rc = cli_fail(st, "destroying the stream");
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
    if (rc != BENCH_OPTION_TAKEN)
        return rc;
    cfg.kernels = (uint32_t)kernels;
    cfg.elements = (uint32_t)elements;
    cfg.steps = steps;
    return run(&cfg);
}
