/*
 * split.c — `acg bench split`: what splitting a kernel over the cpu backend's thread pool costs
 * and saves, against running it whole, as the work per launch grows; the row of no work is the
 * pool's own dispatch cost. Kernel authors read their parts() threshold off the table: split a
 * launch only above the work where "saved" turns positive.
 *
 * The kernel is registered by the bench: out (rows) f32, each element put through `iters`
 * dependent steps v = v * 0.5 + 1 (no work at iters 0), with a flag saying whether its parts()
 * offers as many parts as the device allows (split) or one (whole). Per work level, a graph of
 * --launches launches of each kind is replayed in turn, rounds interleaved so drift hits both
 * alike, and every figure is a median per launch. Both kinds write their own buffer the same
 * number of times, and the bench checks that the two end equal, bit for bit.
 */
#include "bench-impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <acg/acg.h>

const char bench_split_usage[] = "usage: acg bench split [--backend B] [--launches N] "
                                 "[--steps S] [--json]\n";

#define ROWS 64u
#define WARMUP_ROUNDS 3
static const uint32_t levels[] = {0, 16, 24, 32, 48, 64, 256, 1024}; /* iters per element */
#define N_LEVELS (sizeof levels / sizeof levels[0])

enum { WHOLE, SPLIT, N_MODES };

/* ---- the kernel: out (rows) f32; u32 rows, iters, split, level ----------------------------- */

static _Atomic uint32_t device_threads; /* the max_parts parts() was offered */
static pthread_t worker;                /* the stream's worker, which calls parts() */
static _Atomic uint32_t parts_run[N_LEVELS], parts_helped[N_LEVELS]; /* helped: by the pool */

static void steps_rows(const acg_cpu_arg *a, uint32_t begin, uint32_t end) {
    float *out = a[0].p;
    const uint32_t iters = a[2].u32;
    for (uint32_t r = begin; r < end; r++) {
        float v = out[r];
        for (uint32_t i = 0; i < iters; i++) {
            v = v * 0.5f + 1.0f;
        }
        out[r] = v;
    }
}

static void steps_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    steps_rows(a, 0, a[1].u32);
}

static uint32_t steps_parts(const acg_cpu_arg *a, const uint32_t global[3], uint32_t max_parts) {
    (void)global;
    atomic_store_explicit(&device_threads, max_parts, memory_order_relaxed);
    worker = pthread_self(); /* the pool publishes the dispatch after this */
    return a[3].u32 != 0 ? max_parts : 1;
}

static void steps_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                       uint32_t n_parts) {
    (void)global;
    const uint64_t rows = a[1].u32;
    steps_rows(a, (uint32_t)(rows * part / n_parts), (uint32_t)(rows * (part + 1) / n_parts));
    atomic_fetch_add_explicit(&parts_run[a[4].u32], 1, memory_order_relaxed);
    if (!pthread_equal(pthread_self(), worker)) {
        atomic_fetch_add_explicit(&parts_helped[a[4].u32], 1, memory_order_relaxed);
    }
}

static const char *steps_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    extent[0] = 4 * (uint64_t)a[1].value.u32;
    return d->global[0] < a[1].value.u32 ? "the grid must cover the rows" : NULL;
}

static acg_status register_kernel(void) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = "bench_split_steps_f32";
    d.n_args = 5;
    d.types[0] = ACG_ARG_BUFFER;
    d.types[1] = d.types[2] = d.types[3] = d.types[4] = ACG_ARG_U32;
    d.bytes_per_item[0] = 4;
    d.shape = steps_shape;
    d.cpu.fn = steps_cpu;
    d.cpu_parts.parts = steps_parts;
    d.cpu_parts.fn = steps_part;
    return acg_kernel_register(&d);
}

/* ---- the bench ------------------------------------------------------------------------------ */

typedef struct split_config {
    bench_common common; /* --backend, --json */
    uint32_t launches;
    uint32_t steps;
} split_config;

typedef struct split_bench {
    const split_config *cfg;
    acg_device *dev;
    acg_stream *stream;
    acg_kernel *kernel;
    acg_graph_pool *pool;
    acg_buffer *out[N_MODES];            /* (ROWS) f32 each */
    acg_graph *graph[N_LEVELS][N_MODES]; /* --launches launches each */
    double *ns[N_LEVELS][N_MODES];       /* (steps) per replay */
    double us[N_LEVELS][N_MODES];        /* median per launch */
    uint32_t threads;
} split_bench;

static int capture(split_bench *b, uint32_t level, int mode, acg_graph **out) {
    const acg_dims d = acg_dims_1d(ROWS);
    const acg_arg args[] = {acg_arg_buffer(b->out[mode], 0), acg_arg_u32(ROWS),
                            acg_arg_u32(levels[level]), acg_arg_u32(mode == SPLIT),
                            acg_arg_u32(level)};
    acg_status st = acg_stream_begin_capture(b->stream, b->pool);
    if (st != ACG_OK) {
        return tool_fail(st, "beginning the capture");
    }
    for (uint32_t i = 0; i < b->cfg->launches && st == ACG_OK; i++) {
        st = acg_kernel_launch(b->stream, b->kernel, &d, args, 5);
    }
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(b->stream, &g);
    if (st != ACG_OK || end != ACG_OK) {
        acg_graph_destroy(g);
        return tool_fail(st != ACG_OK ? st : end, "capturing the launches");
    }
    *out = g;
    return TOOL_EXIT_OK;
}

/* Replays every graph once, in an order rotating with the round; sample < 0: warm-up. */
static int run_round(split_bench *b, uint32_t round, int64_t sample) {
    for (uint32_t i = 0; i < N_LEVELS * N_MODES; i++) {
        uint32_t at = (i + round) % (N_LEVELS * N_MODES);
        uint32_t level = at / N_MODES, mode = at % N_MODES;
        uint64_t t0 = tool_now_ns();
        acg_status st = acg_graph_launch(b->graph[level][mode], b->stream);
        if (st == ACG_OK) {
            st = acg_stream_synchronize(b->stream);
        }
        uint64_t t1 = tool_now_ns();
        if (st != ACG_OK) {
            return tool_fail(st, "replaying a graph");
        }
        if (sample >= 0) {
            b->ns[level][mode][sample] = (double)(t1 - t0);
        }
    }
    return TOOL_EXIT_OK;
}

/* Both kinds ran as often on buffers that started equal: they must end equal. */
static int check(split_bench *b) {
    float host[N_MODES][ROWS];
    for (int m = 0; m < N_MODES; m++) {
        acg_status st = acg_copy_d2h(b->stream, host[m], b->out[m], 0, sizeof host[m]);
        if (st != ACG_OK) {
            return tool_fail(st, "copying the results back");
        }
    }
    if (memcmp(host[WHOLE], host[SPLIT], sizeof host[WHOLE]) != 0) {
        return tool_failf("bench split: wrong result", "the split kernel's output differs from "
                                                       "the whole kernel's");
    }
    return TOOL_EXIT_OK;
}

static int measure(split_bench *b) {
    int rc;
    for (uint32_t r = 0; r < WARMUP_ROUNDS; r++) {
        if ((rc = run_round(b, r, -1)) != TOOL_EXIT_OK) {
            return rc;
        }
    }
    for (size_t l = 0; l < N_LEVELS; l++) {
        for (int m = 0; m < N_MODES; m++) {
            b->ns[l][m] = malloc(b->cfg->steps * sizeof(double));
            if (!b->ns[l][m]) {
                return tool_failf("bench split", "out of memory for %u samples", b->cfg->steps);
            }
        }
    }
    for (uint32_t s = 0; s < b->cfg->steps; s++) {
        if ((rc = run_round(b, WARMUP_ROUNDS + s, s)) != TOOL_EXIT_OK) {
            return rc;
        }
    }
    for (size_t l = 0; l < N_LEVELS; l++) {
        for (int m = 0; m < N_MODES; m++) {
            b->us[l][m] = tool_median(b->ns[l][m], b->cfg->steps) / 1e3 / b->cfg->launches;
        }
    }
    b->threads = atomic_load(&device_threads);
    b->threads = b->threads ? b->threads : 1; /* never asked: one thread, no pool */
    return check(b);
}

/* What splitting cost beyond dividing the work evenly over the threads (us per launch). */
static double overhead_us(const split_bench *b, size_t l) {
    return b->us[l][SPLIT] - b->us[l][WHOLE] / b->threads;
}

/* The share of parts the pool's threads ran (the rest ran on the worker), in percent. */
static double pool_share(size_t l) {
    uint32_t run = atomic_load(&parts_run[l]);
    return run ? 100.0 * atomic_load(&parts_helped[l]) / run : NAN;
}

/* The least whole-launch time at which splitting saved time, at this level and every larger
 * one; NaN when it never did. */
static double break_even_us(const split_bench *b) {
    double at = NAN;
    for (size_t l = N_LEVELS; l-- > 0;) {
        if (b->us[l][WHOLE] - b->us[l][SPLIT] <= 0) {
            break;
        }
        at = b->us[l][WHOLE];
    }
    return at;
}

static int report_json(const split_bench *b, double seconds) {
    tool_json j;
    tool_json_begin(&j, stdout);
    tool_json_object_begin(&j, NULL);
    bench_json_device(&j, b->dev);
    tool_json_uint(&j, "threads", b->threads);
    tool_json_uint(&j, "rows", ROWS);
    tool_json_uint(&j, "launches", b->cfg->launches);
    tool_json_uint(&j, "steps", b->cfg->steps);
    tool_json_array_begin(&j, "levels");
    for (size_t l = 0; l < N_LEVELS; l++) {
        tool_json_object_begin(&j, NULL);
        tool_json_uint(&j, "iters", levels[l]);
        tool_json_number(&j, "whole_us", b->us[l][WHOLE]);
        tool_json_number(&j, "split_us", b->us[l][SPLIT]);
        tool_json_number(&j, "saved_us", b->us[l][WHOLE] - b->us[l][SPLIT]);
        tool_json_number(&j, "overhead_us", overhead_us(b, l));
        tool_json_number(&j, "pool_share_pct", pool_share(l));
        tool_json_object_end(&j);
    }
    tool_json_array_end(&j);
    tool_json_number(&j, "break_even_whole_us", break_even_us(b));
    tool_json_bool(&j, "verified", true);
    tool_json_number(&j, "seconds", seconds);
    tool_json_object_end(&j);
    return tool_json_end(&j);
}

static void report_table(const split_bench *b, double seconds) {
    bench_print_title(&b->cfg->common, b->dev);
    printf("%u rows per launch split into %u part(s), graphs of %u launches, %u steps, %.1f s\n\n",
           ROWS, b->threads, b->cfg->launches, b->cfg->steps, seconds);
    static const char *const headers[] = {"steps/row", "whole us", "split us", "saved us",
                                          "speedup",   "overhead", "pool %"};
    static const int widths[] = {9, 9, 9, 9, 7, 8, 6};
    tool_table t;
    tool_table_begin(&t, stdout, 7, widths, headers);
    for (size_t l = 0; l < N_LEVELS; l++) {
        tool_table_cell(&t, "%u", levels[l]);
        tool_table_cell(&t, "%.2f", b->us[l][WHOLE]);
        tool_table_cell(&t, "%.2f", b->us[l][SPLIT]);
        tool_table_cell(&t, "%.2f", b->us[l][WHOLE] - b->us[l][SPLIT]);
        tool_table_cell(&t, "%.2f", b->us[l][WHOLE] / b->us[l][SPLIT]);
        tool_table_cell(&t, "%.2f", overhead_us(b, l));
        tool_table_cell(&t, "%.0f", pool_share(l));
    }
    printf("\nmedians per launch within a graph replay; whole: parts() says 1, split: one part "
           "per thread;\noverhead: split - whole / threads; pool %%: parts the pool's threads "
           "ran (the worker runs the rest)\n");
    printf("splitting saved time from %.2f us of work per launch up\n", break_even_us(b));
    printf("checked: split and whole outputs equal, bit for bit\n");
}

static int run(const split_config *cfg) {
    split_bench b;
    memset(&b, 0, sizeof b);
    b.cfg = cfg;
    uint64_t t_start = tool_now_ns();
    acg_status st = register_kernel();
    if (st != ACG_OK) {
        return tool_fail(st, "registering the bench's kernel");
    }
    int rc = bench_device_open(&cfg->common, &b.dev, NULL);
    if (rc != TOOL_EXIT_OK) {
        goto out_unregister;
    }
    rc = TOOL_EXIT_FAILURE;
    if ((st = acg_stream_create(b.dev, &b.stream)) != ACG_OK ||
        (st = acg_kernel_get(b.dev, "bench_split_steps_f32", &b.kernel)) != ACG_OK ||
        (st = acg_graph_pool_create(b.dev, &b.pool)) != ACG_OK) {
        rc = tool_fail(st, "setting up (the kernel is the cpu backend's: --backend cpu)");
        goto out_destroy;
    }
    for (int m = 0; m < N_MODES; m++) {
        if ((st = acg_buffer_alloc(b.dev, ROWS * sizeof(float), &b.out[m])) != ACG_OK ||
            (st = acg_fill(b.stream, b.out[m], 0, ROWS * sizeof(float), 0, 4)) != ACG_OK) {
            rc = tool_fail(st, "allocating the output");
            goto out_destroy;
        }
    }
    for (size_t l = 0; l < N_LEVELS; l++) {
        for (int m = 0; m < N_MODES; m++) {
            if ((rc = capture(&b, (uint32_t)l, m, &b.graph[l][m])) != TOOL_EXIT_OK) {
                goto out_destroy;
            }
        }
    }
    if ((rc = measure(&b)) != TOOL_EXIT_OK) {
        goto out_destroy;
    }
    double seconds = (double)(tool_now_ns() - t_start) / 1e9;
    if (cfg->common.json) {
        rc = report_json(&b, seconds);
    } else {
        report_table(&b, seconds);
    }

out_destroy:
    for (size_t l = 0; l < N_LEVELS; l++) {
        for (int m = 0; m < N_MODES; m++) {
            if ((st = acg_graph_destroy(b.graph[l][m])) != ACG_OK && rc == TOOL_EXIT_OK) {
                rc = tool_fail(st, "destroying a graph");
            }
            free(b.ns[l][m]);
        }
    }
    if ((st = acg_graph_pool_destroy(b.pool)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the graph pool");
    }
    for (int m = 0; m < N_MODES; m++) {
        if ((st = acg_buffer_free(b.out[m])) != ACG_OK && rc == TOOL_EXIT_OK) {
            rc = tool_fail(st, "freeing the output");
        }
    }
    if ((st = acg_stream_destroy(b.stream)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the stream");
    }
    rc = bench_device_close(b.dev, rc);
out_unregister:
    if ((st = acg_kernel_unregister("bench_split_steps_f32")) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "unregistering the bench's kernel");
    }
    return rc;
}

/* ---- command line ---------------------------------------------------------------------------- */

int bench_split(int argc, char **argv) {
    split_config cfg = {.common = {"bench split", bench_split_usage, "cpu", false}};
    uint64_t launches = 64, steps = 50;
    const bench_count counts[] = {{"--launches", 10000, &launches}, {"--steps", 100000, &steps}};
    int rc = bench_parse_counts(argc, argv, &cfg.common, counts, sizeof counts / sizeof counts[0]);
    if (rc != BENCH_OPTION_TAKEN) {
        return rc;
    }
    cfg.launches = (uint32_t)launches;
    cfg.steps = (uint32_t)steps;
    return run(&cfg);
}
