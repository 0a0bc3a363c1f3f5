/* test_cpu_pool.c — the cpu backend's thread pool: a kernel whose definition offers parts
 * (acg_kernel_desc.cpu_parts) gives the same bits on any thread count, eagerly and replayed;
 * it is really split when the launch is worth it and not when it is small; threads=N and
 * ACG_CPU_THREADS are checked at device open; opening a device with a pool fails cleanly at
 * every allocation; and two streams splitting kernels at once stay correct (the TSan build runs
 * this too). The pool is the cpu backend's: on another backend the executable skips. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acg/trace.h>

/* ---- the kernel: out (rows) = x (rows, width) . w (width) -----------------------------------
 * Each row is summed in index order by whichever part owns it, so the partition never changes
 * a result. A launch is worth one part per 4 rows: small launches stay whole. */

enum { WIDTH = 64, MAX_ROWS = 1000 };

static _Atomic uint32_t parts_calls; /* calls of rowdot_parts */
static _Atomic uint32_t whole_runs;  /* launches run by rowdot_cpu */
static _Atomic uint32_t parts_run;   /* parts run by rowdot_part */
static _Atomic uint32_t most_parts;  /* the largest n_parts a part saw */

static void rowdot_rows(const acg_cpu_arg *a, uint32_t begin, uint32_t end) {
    float *out = a[0].p;
    const float *x = a[1].p, *w = a[2].p;
    const uint32_t width = a[3].u32;
    for (uint32_t r = begin; r < end; r++) {
        float s = 0.0f;
        for (uint32_t k = 0; k < width; k++) {
            s += x[(size_t)r * width + k] * w[k];
        }
        out[r] = s;
    }
}

static void rowdot_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    atomic_fetch_add(&whole_runs, 1);
    rowdot_rows(a, 0, a[4].u32);
}

static uint32_t rowdot_parts(const acg_cpu_arg *a, const uint32_t global[3], uint32_t max_parts) {
    (void)global;
    atomic_fetch_add(&parts_calls, 1);
    uint32_t n = a[4].u32 / 4;
    return n < max_parts ? n : max_parts;
}

static void rowdot_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                        uint32_t n_parts) {
    (void)global;
    const uint64_t rows = a[4].u32;
    rowdot_rows(a, (uint32_t)(rows * part / n_parts), (uint32_t)(rows * (part + 1) / n_parts));
    atomic_fetch_add(&parts_run, 1);
    uint32_t seen = atomic_load(&most_parts);
    while (seen < n_parts && !atomic_compare_exchange_weak(&most_parts, &seen, n_parts)) {
    }
}

static void counters_reset(void) {
    atomic_store(&parts_calls, 0);
    atomic_store(&whole_runs, 0);
    atomic_store(&parts_run, 0);
    atomic_store(&most_parts, 0);
}

static const char *rowdot_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    const uint64_t width = a[3].value.u32, rows = a[4].value.u32;
    extent[0] = tc_mul_sat(4, rows);
    extent[1] = tc_mul_sat(tc_mul_sat(4, width), rows);
    extent[2] = tc_mul_sat(4, width);
    return d->global[0] < rows ? "the grid must cover the rows" : NULL;
}

static acg_kernel_desc rowdot_desc(const char *name) {
    acg_kernel_desc d = tc_rows_kernel_desc(name);
    d.shape = rowdot_shape;
    d.cpu.fn = rowdot_cpu;
    d.cpu_parts.parts = rowdot_parts;
    d.cpu_parts.fn = rowdot_part;
    return d;
}

/* ---- a device with the kernel and its buffers ----------------------------------------------- */

typedef struct fx {
    acg_device *dev;
    acg_kernel *k;
    tc_rows_io io; /* out (MAX_ROWS floats), x (x_host) and w (w_host) */
} fx;

static float x_host[MAX_ROWS * WIDTH], w_host[WIDTH];

/* Values that round when multiplied and summed, so any change in the operations shows. */
static void fill_inputs(void) {
    uint32_t z = 12345;
    for (size_t i = 0; i < MAX_ROWS * WIDTH; i++) {
        z = z * 1664525u + 1013904223u;
        x_host[i] = (float)(z >> 8) / 16777216.0f - 0.5f;
    }
    for (size_t i = 0; i < WIDTH; i++) {
        z = z * 1664525u + 1013904223u;
        w_host[i] = (float)(z >> 8) / 8388608.0f - 1.0f;
    }
}

/* The host's reference over x_host and w_host: the first `rows` rows of out. */
static void rowdot_host(float *out, uint32_t rows) {
    acg_cpu_arg a[5];
    a[0].p = out;
    a[1].p = x_host;
    a[2].p = w_host;
    a[3].u32 = WIDTH;
    a[4].u32 = rows;
    rowdot_rows(a, 0, rows);
}

static void fx_open(fx *f, const char *spec) {
    memset(f, 0, sizeof *f);
    TC_OK(acg_device_open(spec, &f->dev));
    TC_OK(acg_kernel_get(f->dev, "tp_rowdot", &f->k));
    tc_rows_io_open(&f->io, f->dev, MAX_ROWS * sizeof(float), x_host, sizeof x_host, w_host,
                    sizeof w_host);
}

static void fx_close(fx *f) {
    tc_rows_io_close(&f->io);
    TC_OK(acg_device_close(f->dev));
}

static acg_status rowdot(acg_stream *s, const acg_kernel *k, acg_buffer *out, const acg_buffer *x,
                         const acg_buffer *w, uint32_t rows) {
    const acg_dims d = {{rows, 1, 1}, {0, 0, 0}};
    const acg_arg args[] = {acg_arg_buffer(out, 0), acg_arg_buffer(x, 0), acg_arg_buffer(w, 0),
                            acg_arg_u32(WIDTH), acg_arg_u32(rows)};
    return acg_kernel_launch(s, k, &d, args, 5);
}

/* The kernel over the first `rows` rows of f's buffers, on f's stream. */
static acg_status fx_rowdot(fx *f, uint32_t rows) {
    return rowdot(f->io.s, f->k, f->io.out, f->io.x, f->io.w, rows);
}

/* The rows a case launches: whole (below 8 rows), split unevenly, and split in many rows. */
static const uint32_t row_counts[] = {3, 7, 37, 257, MAX_ROWS};
#define N_ROW_COUNTS (sizeof row_counts / sizeof row_counts[0])

/* Runs each row count eagerly, then captured and replayed, into eager[i] and replay[i]. */
static void run_all(fx *f, float (*eager)[MAX_ROWS], float (*replay)[MAX_ROWS]) {
    for (size_t i = 0; i < N_ROW_COUNTS; i++) {
        uint32_t rows = row_counts[i];
        tc_poison(f->io.s, f->io.out);
        TC_OK(fx_rowdot(f, rows));
        tc_download(f->io.s, eager[i], f->io.out, sizeof eager[i]);

        tc_poison(f->io.s, f->io.out);
        TC_OK(acg_stream_begin_capture(f->io.s, NULL));
        TC_OK(fx_rowdot(f, rows));
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(f->io.s, &g));
        for (int r = 0; r < 3; r++) {
            TC_OK(tc_replay(g, f->io.s, f->io.out, sizeof replay[i], replay[i]));
        }
        TC_OK(acg_graph_destroy(g));
    }
}

static int setup(void **state) {
    (void)state;
    acg_kernel_desc d = rowdot_desc("tp_rowdot");
    return acg_kernel_register(&d) == ACG_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return acg_kernel_unregister("tp_rowdot") == ACG_OK ? 0 : -1;
}

/* ---- cases ---------------------------------------------------------------------------------- */

/* Every thread count gives the same bits as the host's row-by-row loop, eagerly and replayed,
 * capturing from the description and natively. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        uint32_t threads;
    } devices[] = {
        {"cpu:0?threads=1", 1},
        {"cpu:0?threads=2", 2},
        {"cpu:0?threads=3", 3},
        {"cpu:0?threads=8", 8},
        {"cpu:0?capture=native&threads=3", 3},
    };
    static float want[N_ROW_COUNTS][MAX_ROWS], eager[N_ROW_COUNTS][MAX_ROWS],
        replay[N_ROW_COUNTS][MAX_ROWS];
    const uint32_t poison = 0xdeadbeefu;
    for (size_t i = 0; i < N_ROW_COUNTS; i++) {
        rowdot_host(want[i], row_counts[i]);
        for (uint32_t r = row_counts[i]; r < MAX_ROWS; r++) {
            memcpy(&want[i][r], &poison, sizeof poison);
        }
    }
    for (size_t t = 0; t < sizeof devices / sizeof devices[0]; t++) {
        fx f;
        fx_open(&f, devices[t].spec);
        assert_int_equal(acg_device_get_capability(f.dev)->host_threads, devices[t].threads);
        run_all(&f, eager, replay);
        for (size_t i = 0; i < N_ROW_COUNTS; i++) {
            TC_BYTES_EQUAL(eager[i], want[i], sizeof want[i]);
            TC_BYTES_EQUAL(replay[i], want[i], sizeof want[i]);
        }
        fx_close(&f);
    }
}

/* The stream's kernel spans a trace hook is told: how each launch was split. */
typedef struct split_seen {
    pthread_mutex_t mu;
    uint32_t n;
    uint64_t parts[8], wait_ns[8];
    bool wait_told[8];
} split_seen;

static void split_hook(const acg_trace_event *e, void *user) {
    split_seen *s = user;
    if (e->category != ACG_TRACE_STREAM || strcmp(e->name, "tp_rowdot") != 0) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n < 8) {
        for (uint32_t i = 0; i < e->n_args; i++) {
            if (strcmp(e->args[i].key, "parts") == 0) {
                s->parts[s->n] = e->args[i].value.u;
            } else if (strcmp(e->args[i].key, "wait_ns") == 0) {
                s->wait_ns[s->n] = e->args[i].value.u;
                s->wait_told[s->n] = true;
            }
        }
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* What the counters say since counters_reset: the kernel's parts counted `calls` times, `parts`
 * parts run (at most `most` to a launch) and `whole` launches run whole. */
static void expect_counts(uint32_t calls, uint32_t parts, uint32_t most, uint32_t whole) {
    assert_int_equal(atomic_load(&parts_calls), calls);
    assert_int_equal(atomic_load(&parts_run), parts);
    assert_int_equal(atomic_load(&most_parts), most);
    assert_int_equal(atomic_load(&whole_runs), whole);
}

/* One eager launch over every row on f's device, whose name says `threads`, counted afresh. */
static void eager_every_row(fx *f, const char *threads) {
    assert_true(tc_contains(acg_device_get_capability(f->dev)->name, threads));
    counters_reset();
    TC_OK(fx_rowdot(f, MAX_ROWS));
    TC_OK(acg_stream_synchronize(f->io.s));
}

/* A launch worth several parts runs as min(threads, rows / 4) parts, eagerly and replayed; a
 * small one, and any launch on one thread, runs the whole function. A trace says so of each
 * launch a replay ran. */
static void test_split_when_worth_it(void **state) {
    (void)state;
    fx f;
    fx_open(&f, "cpu:0?threads=3");
    eager_every_row(&f, "3 thread(s) per kernel");
    expect_counts(1, 3, 3, 0);

    counters_reset();
    TC_OK(acg_stream_begin_capture(f.io.s, NULL));
    TC_OK(fx_rowdot(&f, 9)); /* two parts */
    TC_OK(fx_rowdot(&f, 5)); /* one: whole */
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f.io.s, &g));
    assert_int_equal(atomic_load(&parts_calls), 0); /* nothing ran at capture */
    TC_OK(tc_replay(g, f.io.s, NULL, 0, NULL));
    TC_OK(tc_replay(g, f.io.s, NULL, 0, NULL));
    expect_counts(4, 4, 2, 2);
    static split_seen seen = {PTHREAD_MUTEX_INITIALIZER, 0, {0}, {0}, {false}};
    acg_trace_config tc = ACG_TRACE_CONFIG_INIT;
    tc.fn = split_hook;
    tc.user = &seen;
    tc.categories = ACG_TRACE_STREAM;
    TC_OK(acg_trace_set_hook(&tc));
    TC_OK(tc_replay(g, f.io.s, NULL, 0, NULL));
    TC_OK(acg_trace_set_hook(NULL));
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.parts[0], 2);
    assert_true(seen.wait_told[0]);
    assert_int_equal(seen.parts[1], 1);
    assert_true(seen.wait_told[1]);
    assert_int_equal(seen.wait_ns[1], 0);
    TC_OK(acg_graph_destroy(g));
    fx_close(&f);

    fx_open(&f, "cpu:0?threads=1");
    eager_every_row(&f, "1 thread(s) per kernel");
    expect_counts(0, 0, 0, 1);
    fx_close(&f);
}

/* Parts really run at once: each of two parts waits until both have started, which only a
 * second thread can make happen (one thread alone would wait out the 10 s guard). */
static _Atomic uint32_t arrived;
static _Atomic int timed_out;

static void rendezvous_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)a;
    (void)global;
    fail(); /* two parts are always offered on a device of two threads */
}

static uint32_t rendezvous_parts(const acg_cpu_arg *a, const uint32_t global[3],
                                 uint32_t max_parts) {
    (void)a;
    (void)global;
    return max_parts < 2 ? max_parts : 2;
}

static void rendezvous_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                            uint32_t n_parts) {
    (void)a;
    (void)global;
    (void)part;
    (void)n_parts;
    atomic_fetch_add(&arrived, 1);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (atomic_load(&arrived) % 2 != 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 10) {
            atomic_store(&timed_out, 1);
            return;
        }
    }
}

static void test_parts_run_at_once(void **state) {
    (void)state;
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = "tp_rendezvous";
    d.cpu.fn = rendezvous_cpu;
    d.cpu_parts.parts = rendezvous_parts;
    d.cpu_parts.fn = rendezvous_part;
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = NULL;
    TC_OK(acg_device_open("cpu:0?threads=2", &dev));
    acg_stream *s = tc_stream(dev);
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tp_rendezvous", &k));
    const acg_dims one = {{1, 1, 1}, {0, 0, 0}};
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_kernel_launch(s, k, &one, NULL, 0));
        TC_OK(acg_stream_synchronize(s));
        assert_int_equal(atomic_load(&arrived), 2 * (i + 1));
        assert_int_equal(atomic_load(&timed_out), 0);
    }
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tp_rendezvous"));
}

/* threads=N takes a whole number in 1..256; anything else, an unknown option, a repeated one
 * or a dangling '&' is refused at open, naming it. */
static void test_bad_thread_option(void **state) {
    (void)state;
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"cpu:0?threads=0", "threads=0 is not a whole number in [1, 256]"},
        {"cpu:0?threads=-1", "threads=-1 is not"},
        {"cpu:0?threads=257", "threads=257 is not"},
        {"cpu:0?threads=99999999999", "threads=99999999999 is not"},
        {"cpu:0?threads=two", "threads=two is not"},
        {"cpu:0?threads=2x", "threads=2x is not"},
        {"cpu:0?threads= 2", "threads= 2 is not"},
        {"cpu:0?threads=", "threads= is not"},
        {"cpu:0?threads=2&threads=3", "threads is given twice"},
        {"cpu:0?capture=native&capture=native", "capture is given twice"},
        {"cpu:0?threads=2&", "not \"\""},
        {"cpu:0?threads=2&cores=2", "not \"cores=2\""},
        {"cpu:0?threads", "not \"threads\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        acg_device *dev = NULL;
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open(bad[i].spec, &dev));
        TC_LAST_ERROR_HAS("acg_device_open");
        TC_LAST_ERROR_HAS(bad[i].why);
        assert_null(dev);
    }
    acg_device *dev = NULL;
    TC_OK(acg_device_open("cpu:0?threads=256&capture=native", &dev));
    assert_true(acg_device_get_capability(dev)->native_capture);
    assert_true(tc_contains(acg_device_get_capability(dev)->name, "256 thread(s) per kernel"));
    assert_string_equal(acg_device_get_spec(dev), "cpu:0?threads=256&capture=native");
    tc_close(dev);
}

/* ACG_CPU_THREADS sets the thread count where the spec does not; a bad value is refused at
 * open, naming the variable and the value; acg_device_describe (acg info) reports either. */
static void test_thread_variable(void **state) {
    (void)state;
    acg_device *dev = NULL;
    acg_capability cap;
    static const char *const bad[] = {"0", "-2", "257", "many", "3x", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(setenv("ACG_CPU_THREADS", bad[i], 1), 0);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu:0", &dev));
        char want[64];
        snprintf(want, sizeof want, "ACG_CPU_THREADS=%s is not a whole number in [1, 256]", bad[i]);
        TC_LAST_ERROR_HAS(want);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu:0?capture=native", &dev));
        memset(&cap, 0, sizeof cap);
        cap.size = sizeof cap;
        TC_OK(acg_device_describe("cpu", 0, &cap));
        assert_true(tc_contains(cap.name, "ACG_CPU_THREADS="));
        assert_true(tc_contains(cap.name, "refused"));
        /* The option wins over the variable. */
        TC_OK(acg_device_open("cpu:0?threads=2", &dev));
        tc_close(dev);
    }
    assert_int_equal(setenv("ACG_CPU_THREADS", "3", 1), 0);
    TC_OK(acg_device_open("cpu:0", &dev));
    assert_true(tc_contains(acg_device_get_capability(dev)->name, "3 thread(s) per kernel"));
    tc_close(dev);
    memset(&cap, 0, sizeof cap);
    cap.size = sizeof cap;
    TC_OK(acg_device_describe("cpu", 0, &cap));
    assert_true(tc_contains(cap.name, "3 thread(s) per kernel"));
    TC_OK(acg_device_open("cpu:0?threads=1", &dev));
    assert_true(tc_contains(acg_device_get_capability(dev)->name, "1 thread(s) per kernel"));
    tc_close(dev);
    assert_int_equal(unsetenv("ACG_CPU_THREADS"), 0);
    TC_OK(acg_device_open("cpu:0", &dev)); /* one per core */
    assert_true(tc_contains(acg_device_get_capability(dev)->name, "thread(s) per kernel"));
    tc_close(dev);
}

/* Two streams of one device split kernels at the same time, eagerly and replaying: one of
 * them has the pool, the other runs its parts itself, and both get the host's bits. The
 * graphs are captured before the race (a capture is not what this case races). */
enum { ROUNDS = 40 };

typedef struct racer {
    acg_stream *s;
    const acg_kernel *k;
    acg_buffer *out;
    const acg_buffer *x, *w;
    acg_graph *g;
    uint32_t rows;
    const float *want; /* (rows) */
    acg_status status;
    int mismatches;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    float back[MAX_ROWS];
    acg_status st = ACG_OK;
    for (int i = 0; i < ROUNDS && st == ACG_OK; i++) {
        st = i % 2 == 0 ? rowdot(r->s, r->k, r->out, r->x, r->w, r->rows)
                        : acg_graph_launch(r->g, r->s);
        if (st == ACG_OK) {
            st = acg_copy_d2h(r->s, back, r->out, 0, r->rows * sizeof(float));
        }
        if (st == ACG_OK && memcmp(back, r->want, r->rows * sizeof(float)) != 0) {
            r->mismatches++;
        }
    }
    r->status = st;
    return NULL;
}

static void test_two_streams_at_once(void **state) {
    (void)state;
    static float want[MAX_ROWS];
    rowdot_host(want, MAX_ROWS);
    fx f;
    fx_open(&f, "cpu:0?threads=3");
    racer r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (racer){tc_stream(f.dev),
                       f.k,
                       tc_buffer(f.dev, MAX_ROWS * sizeof(float)),
                       f.io.x,
                       f.io.w,
                       NULL,
                       MAX_ROWS - (uint32_t)i,
                       want,
                       ACG_OK,
                       0};
        TC_OK(acg_stream_begin_capture(r[i].s, NULL));
        TC_OK(rowdot(r[i].s, r[i].k, r[i].out, r[i].x, r[i].w, r[i].rows));
        TC_OK(acg_stream_end_capture(r[i].s, &r[i].g));
    }
    counters_reset();
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    for (int i = 0; i < 2; i++) {
        TC_OK(r[i].status);
        assert_int_equal(r[i].mismatches, 0);
        TC_OK(acg_graph_destroy(r[i].g));
        TC_OK(acg_buffer_free(r[i].out));
        TC_OK(acg_stream_destroy(r[i].s));
    }
    assert_int_equal(atomic_load(&parts_run), 2 * ROUNDS * 3);
    fx_close(&f);
}

/* Every allocation of opening a device with a pool, one split launch and closing can fail:
 * each run returns ACG_ERR_OUT_OF_MEMORY and leaves nothing behind. */
static acg_status sweep_scenario(void *ctx) {
    (void)ctx;
    acg_kernel_desc d = rowdot_desc("tp_sweep");
    acg_status st = acg_kernel_register(&d);
    if (st != ACG_OK) {
        return st;
    }
    acg_device *dev = NULL;
    acg_stream *s = NULL;
    acg_kernel *k = NULL;
    acg_buffer *out = NULL, *x = NULL, *w = NULL;
    float back[64];
    if ((st = acg_device_open("cpu:0?threads=3", &dev)) != ACG_OK) {
        goto out_unregister;
    }
    if ((st = acg_stream_create(dev, &s)) != ACG_OK ||
        (st = acg_kernel_get(dev, "tp_sweep", &k)) != ACG_OK ||
        (st = acg_buffer_alloc(dev, 64 * sizeof(float), &out)) != ACG_OK ||
        (st = acg_buffer_alloc(dev, 64 * WIDTH * sizeof(float), &x)) != ACG_OK ||
        (st = acg_buffer_alloc(dev, WIDTH * sizeof(float), &w)) != ACG_OK ||
        (st = acg_copy_h2d(s, x, 0, x_host, 64 * WIDTH * sizeof(float))) != ACG_OK ||
        (st = acg_copy_h2d(s, w, 0, w_host, sizeof w_host)) != ACG_OK ||
        (st = rowdot(s, k, out, x, w, 64)) != ACG_OK ||
        (st = acg_copy_d2h(s, back, out, 0, sizeof back)) != ACG_OK) {
        goto out_free;
    }
out_free:
    acg_buffer_free(w);
    acg_buffer_free(x);
    acg_buffer_free(out);
    acg_stream_destroy(s);
    acg_device_close(dev);
out_unregister:
    acg_kernel_unregister("tp_sweep");
    return st;
}

/* The pool's scenario under every allocation failure; installing the allocator is refused if
 * a kernel were left registered. */
static void test_alloc_sweep(void **state) {
    (void)state;
    tc_alloc_sweep_case("cpu pool", sweep_scenario, NULL, false, 5);
}

int main(int argc, char **argv) {
    tc_init(argc, argv);
    if (!tc_backend_is("cpu")) {
        printf("skipped: %s: the thread pool is the cpu backend's\n", tc_backend());
        return 77;
    }
    fill_inputs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_bits_any_thread_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_when_worth_it, setup, teardown),
        cmocka_unit_test(test_parts_run_at_once),
        cmocka_unit_test(test_bad_thread_option),
        cmocka_unit_test(test_thread_variable),
        cmocka_unit_test_setup_teardown(test_two_streams_at_once, setup, teardown),
        cmocka_unit_test(test_alloc_sweep),
    };
    return cmocka_run_group_tests_name(tc_group("test_cpu_pool"), tests, NULL, NULL);
}
