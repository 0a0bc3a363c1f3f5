/*
 * test_trace.c — the trace hook (acg/trace.h): off by default; installed, it is told what the
 * library does with every field filled in (a stream's entries on its worker's timeline, a
 * runner's creation bucket by bucket, replays and eager runs with their reasons, a model step's
 * phases in order), spans pair and nest per thread, categories filter, a replaced or removed
 * hook is told nothing more once the setter returned (even with calls of it running), and bad
 * configurations are refused with nothing changed. Runs on the cpu backend, whose workers time
 * their streams.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acg/engine.h>
#include <acg/model.h>
#include <acg/trace.h>

#include "common.h"

/* ---- a recording hook ---------------------------------------------------------------------- */

#define MAX_EVENTS 20000
#define MAX_ARGS 12

typedef struct rec_arg {
    char key[32];
    acg_trace_arg_type type;
    uint64_t u;
    bool b;
    double d;
    char s[320];
} rec_arg;

typedef struct rec {
    size_t size;
    acg_trace_phase phase;
    uint32_t category;
    char category_name[16];
    char name[64];
    uint64_t ts, dur;
    uint32_t thread, stream;
    uint32_t n_args;
    rec_arg args[MAX_ARGS];
} rec;

typedef struct recorder {
    pthread_mutex_t lock;
    rec *events; /* (MAX_EVENTS) */
    size_t n;
    size_t dropped;     /* past MAX_EVENTS */
    _Atomic int inside; /* calls running now */
    _Atomic uint64_t calls;
    unsigned sleep_us; /* each call sleeps this long (to catch a setter that does not wait) */
    acg_status nested; /* what acg_trace_set_hook said from inside a call (ACG_OK: not tried) */
    bool try_nested;
} recorder;

static void hook(const acg_trace_event *ev, void *user) {
    recorder *r = user;
    atomic_fetch_add(&r->inside, 1);
    atomic_fetch_add(&r->calls, 1);
    if (r->sleep_us > 0) {
        struct timespec nap = {0, (long)r->sleep_us * 1000};
        nanosleep(&nap, NULL);
    }
    if (r->try_nested) {
        acg_trace_config c = ACG_TRACE_CONFIG_INIT;
        r->nested = acg_trace_set_hook(&c);
    }
    pthread_mutex_lock(&r->lock);
    if (r->n == MAX_EVENTS) {
        r->dropped++;
    } else {
        rec *e = &r->events[r->n++];
        memset(e, 0, sizeof *e);
        e->size = ev->size;
        e->phase = ev->phase;
        e->category = ev->category;
        snprintf(e->category_name, sizeof e->category_name, "%s", ev->category_name);
        snprintf(e->name, sizeof e->name, "%s", ev->name);
        e->ts = ev->ts_ns;
        e->dur = ev->dur_ns;
        e->thread = ev->thread;
        e->stream = ev->stream;
        e->n_args = ev->n_args < MAX_ARGS ? ev->n_args : MAX_ARGS;
        for (uint32_t i = 0; i < e->n_args; i++) {
            const acg_trace_arg *a = &ev->args[i];
            rec_arg *to = &e->args[i];
            snprintf(to->key, sizeof to->key, "%s", a->key);
            to->type = a->type;
            to->u = a->type == ACG_TRACE_ARG_UINT ? a->value.u : 0;
            to->b = a->type == ACG_TRACE_ARG_BOOL ? a->value.b : false;
            to->d = a->type == ACG_TRACE_ARG_DOUBLE ? a->value.d : 0.0;
            snprintf(to->s, sizeof to->s, "%s", a->type == ACG_TRACE_ARG_STRING ? a->value.s : "");
        }
    }
    pthread_mutex_unlock(&r->lock);
    atomic_fetch_sub(&r->inside, 1);
}

static recorder *recorder_new(void) {
    recorder *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->events = calloc(MAX_EVENTS, sizeof *r->events);
    assert_non_null(r->events);
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

static void recorder_free(recorder *r) {
    pthread_mutex_destroy(&r->lock);
    free(r->events);
    free(r);
}

static void install(recorder *r, uint32_t categories) {
    acg_trace_config c = ACG_TRACE_CONFIG_INIT;
    c.fn = hook;
    c.user = r;
    c.categories = categories;
    TC_OK(acg_trace_set_hook(&c));
}

static void uninstall(void) { TC_OK(acg_trace_set_hook(NULL)); }

static const rec_arg *arg(const rec *e, const char *key) {
    for (uint32_t i = 0; i < e->n_args; i++) {
        if (strcmp(e->args[i].key, key) == 0) {
            return &e->args[i];
        }
    }
    return NULL;
}

static size_t count(const recorder *r, const char *name, acg_trace_phase phase) {
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        n += strcmp(r->events[i].name, name) == 0 && r->events[i].phase == phase;
    }
    return n;
}

static const rec *find(const recorder *r, const char *name, acg_trace_phase phase) {
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->events[i].name, name) == 0 && r->events[i].phase == phase) {
            return &r->events[i];
        }
    }
    return NULL;
}

/* On every thread, B and E pair by name and nest, timestamps never go back, and every event's
 * fields are those of its category. */
static void check_well_formed(const recorder *r) {
    assert_int_equal(r->dropped, 0);
    enum { MAX_THREADS = 64, MAX_DEPTH = 32 };
    struct {
        uint32_t thread;
        uint64_t last;
        const rec *open[MAX_DEPTH];
        int depth;
    } t[MAX_THREADS];
    int n_threads = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rec *e = &r->events[i];
        assert_int_equal(e->size, sizeof(acg_trace_event));
        const char *want = e->category == ACG_TRACE_MODEL    ? "model"
                           : e->category == ACG_TRACE_ENGINE ? "engine"
                                                             : "stream";
        assert_true(e->category == ACG_TRACE_MODEL || e->category == ACG_TRACE_ENGINE ||
                    e->category == ACG_TRACE_STREAM);
        assert_string_equal(e->category_name, want);
        assert_true(e->thread > 0);
        /* Only stream events are on a stream's timeline, and they are complete spans. */
        assert_true((e->stream != 0) == (e->category == ACG_TRACE_STREAM));
        assert_true(e->category != ACG_TRACE_STREAM || e->phase == ACG_TRACE_COMPLETE);
        assert_true(e->phase == ACG_TRACE_COMPLETE || e->dur == 0);
        int k = 0;
        while (k < n_threads && t[k].thread != e->thread) {
            k++;
        }
        if (k == n_threads) {
            assert_true(n_threads < MAX_THREADS);
            t[k].thread = e->thread;
            t[k].last = 0;
            t[k].depth = 0;
            n_threads++;
        }
        /* Told in the order they happen: a complete span once it ended. */
        uint64_t moment = e->phase == ACG_TRACE_COMPLETE ? e->ts + e->dur : e->ts;
        assert_true(moment >= t[k].last);
        t[k].last = moment;
        if (e->phase == ACG_TRACE_BEGIN) {
            assert_true(t[k].depth < MAX_DEPTH);
            t[k].open[t[k].depth++] = e;
        } else if (e->phase == ACG_TRACE_END) {
            assert_true(t[k].depth > 0);
            const rec *b = t[k].open[--t[k].depth];
            assert_string_equal(b->name, e->name);
            assert_int_equal(b->category, e->category);
        }
    }
    for (int k = 0; k < n_threads; k++) {
        assert_int_equal(t[k].depth, 0);
    }
}

/* ---- the fixture: the cpu backend's device, a stream, its kernels and a recorder ------------- */

/* The cpu backend's device (its workers time their streams), a stream, the built-in kernels and
 * a recorder; no hook is installed. */
typedef struct fx {
    tc_fixture t;
    recorder *r;
} fx;

static int setup_on(void **state, const char *spec) {
    fx *f = tc_fixture_new_on(sizeof *f, spec);
    f->r = recorder_new();
    *state = f;
    return 0;
}

static int setup(void **state) { return setup_on(state, "cpu"); }

/* On a device whose kernels may be split over two threads. */
static int setup_two_threads(void **state) { return setup_on(state, "cpu:0?threads=2"); }

/* A case that failed with its hook installed left it: it goes first, so that no stream worker
 * calls it while the device closes, and the recorder, its user context, last. */
static int teardown(void **state) {
    fx *f = *state;
    recorder *r = f->r;
    uninstall();
    int rc = tc_fixture_teardown(state);
    recorder_free(r);
    return rc;
}

/* ---- off by default, and off again ---------------------------------------------------------- */

/* Stream work with a hook that was removed (and one that never was installed) reaches no hook. */
static void test_off_gets_nothing(void **state) {
    fx *f = *state;
    install(f->r, ACG_TRACE_ALL);
    uninstall();
    acg_buffer *buf = tc_buffer(f->t.dev, 4096);
    for (int i = 0; i < 8; i++) {
        TC_OK(acg_fill(f->t.s, buf, 0, 4096, (uint32_t)i, 4));
    }
    TC_OK(acg_stream_synchronize(f->t.s));
    assert_int_equal(atomic_load(&f->r->calls), 0);
    TC_OK(acg_buffer_free(buf));
    /* Removing twice is harmless. */
    uninstall();
}

/* ---- streams ------------------------------------------------------------------------------ */

/* Each entry a cpu stream ran is one complete span on the stream's timeline, from its worker
 * thread, with its name and size: a kernel by name, a fill, a copy. */
static void test_stream_entries(void **state) {
    fx *f = *state;
    acg_device *dev = f->t.dev;
    acg_stream *s = f->t.s;
    recorder *r = f->r;
    acg_buffer *a = tc_buffer(dev, 4096), *b = tc_buffer(dev, 4096);
    install(r, ACG_TRACE_ALL);
    uint64_t before = acg_trace_now_ns();
    TC_OK(acg_fill(s, a, 0, 4096, 0, 4));
    TC_OK(tc_fill(s, &f->t.k, a, 0, 1024, 2.0f));
    TC_OK(acg_copy_d2d(s, b, 0, a, 0, 4096));
    TC_OK(acg_stream_synchronize(s));
    uint64_t after = acg_trace_now_ns();
    uninstall();
    check_well_formed(r);
    assert_int_equal(r->n, 3);
    const char *names[] = {"fill", "fill_f32", "copy"};
    for (size_t i = 0; i < 3; i++) {
        const rec *e = &r->events[i];
        assert_string_equal(e->name, names[i]);
        assert_int_equal(e->phase, ACG_TRACE_COMPLETE);
        assert_int_equal(e->category, ACG_TRACE_STREAM);
        assert_int_equal(e->stream, r->events[0].stream);
        assert_true(e->stream > 0);
        /* The worker, not this thread. */
        assert_int_not_equal(e->thread, acg_trace_get_thread_id());
        assert_true(e->ts >= before && e->ts + e->dur <= after);
        assert_true(i == 0 || e->ts >= r->events[i - 1].ts + r->events[i - 1].dur);
    }
    assert_int_equal(arg(&r->events[0], "bytes")->u, 4096);
    assert_int_equal(arg(&r->events[1], "grid")->u, 1024);
    assert_int_equal(arg(&r->events[2], "bytes")->u, 4096);
    /* Another stream is another timeline. */
    uint32_t first = r->events[0].stream;
    acg_stream *s2 = tc_stream(dev);
    r->n = 0;
    install(r, ACG_TRACE_STREAM);
    TC_OK(acg_fill(s2, b, 0, 64, 0, 4));
    TC_OK(acg_stream_synchronize(s2));
    uninstall();
    assert_int_equal(r->n, 1);
    assert_true(r->events[0].stream != 0 && r->events[0].stream != first);
    TC_OK(acg_stream_destroy(s2));
    TC_OK(acg_buffer_free(a));
    TC_OK(acg_buffer_free(b));
}

/* A cpu replay is one span on the stream's timeline holding one span per op it ran, in order
 * and each inside it; a kernel says how it was split (the tests' kernels offer no parts: one,
 * and no wait; test_cpu_pool reads a split one). */
static void test_replay_ops(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    recorder *r = f->r;
    acg_buffer *a = tc_buffer(f->t.dev, 1u << 20), *b = tc_buffer(f->t.dev, 1u << 20);
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(acg_fill(s, a, 0, 4096, 0, 4));
    TC_OK(tc_fill(s, &f->t.k, a, 0, 1u << 18, 2.0f));
    TC_OK(tc_fill(s, &f->t.k, b, 0, 16, 3.0f));
    TC_OK(acg_copy_d2d(s, b, 4096, a, 0, 4096));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    install(r, ACG_TRACE_STREAM);
    TC_OK(acg_graph_launch(g, s));
    TC_OK(acg_stream_synchronize(s));
    uninstall();
    check_well_formed(r);
    assert_int_equal(r->n, 5);
    /* The ops first, each told once it ended; the replay, told last, holds them. */
    const rec *replay = &r->events[4];
    assert_string_equal(replay->name, "replay");
    assert_int_equal(arg(replay, "ops")->u, 4);
    const char *names[] = {"fill", "fill_f32", "fill_f32", "copy"};
    for (size_t i = 0; i < 4; i++) {
        const rec *e = &r->events[i];
        assert_string_equal(e->name, names[i]);
        assert_int_equal(e->phase, ACG_TRACE_COMPLETE);
        assert_int_equal(e->stream, replay->stream);
        assert_int_equal(e->thread, replay->thread);
        assert_true(e->ts >= replay->ts && e->ts + e->dur <= replay->ts + replay->dur);
        assert_true(i == 0 || e->ts >= r->events[i - 1].ts + r->events[i - 1].dur);
        assert_true((arg(e, "parts") != NULL) == (i == 1 || i == 2));
    }
    assert_int_equal(arg(&r->events[1], "grid")->u, 1u << 18);
    for (size_t i = 1; i <= 2; i++) {
        assert_int_equal(arg(&r->events[i], "parts")->u, 1);
        assert_int_equal(arg(&r->events[i], "wait_ns")->u, 0);
    }
    /* Untraced, the same graph tells nothing and computes the same. */
    r->n = 0;
    TC_OK(acg_graph_launch(g, s));
    TC_OK(acg_stream_synchronize(s));
    assert_int_equal(r->n, 0);
    float got[4];
    TC_OK(acg_copy_d2h(s, got, b, 4096, sizeof got));
    const float want[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(a));
    TC_OK(acg_buffer_free(b));
}

/* ---- runners ------------------------------------------------------------------------------ */

#define ROW 64 /* floats per row of the recipe's input and output */

static size_t io_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    (void)i;
    return (size_t)b->batch * ROW * sizeof(float);
}

/* The step: the output is the input, through a temporary of the step's own. */
static acg_status forward(void *user, acg_stream *s, const acg_step_io *io) {
    (void)user;
    size_t n = io_bytes(NULL, 0, io->bucket);
    acg_buffer *tmp = NULL;
    acg_status st = acg_stream_alloc(s, n, &tmp);
    if (st == ACG_OK) {
        st = acg_copy_d2d(s, tmp, 0, io->inputs[0], 0, n);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2d(s, io->outputs[0], 0, tmp, 0, n);
    }
    if (tmp != NULL) {
        acg_status fr = acg_stream_free(s, tmp);
        st = st == ACG_OK ? fr : st;
    }
    return st;
}

static const acg_bucket_key buckets[] = {{"decode", 0, 2, 2}, {"decode", 0, 8, 8}};

static acg_runner *make_runner(fx *f, acg_graph_mode graphs, uint64_t memory_limit) {
    const acg_recipe rc = tc_recipe("trace-test", NULL, io_bytes, forward);
    acg_runner_config c = tc_runner_config(&rc, buckets, 2, f->t.s, graphs);
    c.n_slots = 1;
    c.memory_limit = memory_limit;
    acg_runner *r = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    return r;
}

/* One step of bucket b on s, waited for. */
static void step(acg_runner *runner, uint32_t b, acg_stream *s) {
    acg_lease lease;
    TC_OK(acg_runner_lease(runner, b, &lease));
    TC_OK(acg_runner_run(runner, &lease, s));
    TC_OK(acg_runner_release(runner, &lease));
    TC_OK(acg_stream_synchronize(s));
}

/* A runner created and stepped once (bucket b) with f's recorder, afresh, told `categories`;
 * what it was told is well formed. */
static acg_runner *traced_step(fx *f, uint32_t categories, acg_graph_mode graphs,
                               uint64_t memory_limit, uint32_t b) {
    f->r->n = 0;
    install(f->r, categories);
    acg_runner *runner = make_runner(f, graphs, memory_limit);
    step(runner, b, f->t.s);
    uninstall();
    check_well_formed(f->r);
    return runner;
}

/* Creation, bucket by bucket, largest first: measured, warmed up and captured, with the graph
 * memory; then a replay, and a batch no bucket holds. */
static void test_runner_creation_and_replay(void **state) {
    fx *f = *state;
    recorder *r = f->r;
    install(r, ACG_TRACE_ALL);
    acg_runner *runner = make_runner(f, ACG_GRAPHS_ON, 0);
    step(runner, 0, f->t.s);
    uint32_t b = 0;
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_select(runner, "decode", 0, 9, 1, &b));
    uninstall();
    check_well_formed(r);
    uint32_t me = acg_trace_get_thread_id();

    const rec *create = find(r, "runner create", ACG_TRACE_BEGIN);
    assert_non_null(create);
    assert_int_equal(create->thread, me);
    assert_string_equal(arg(create, "recipe")->s, "trace-test");
    assert_int_equal(arg(create, "buckets")->u, 2);
    assert_string_equal(arg(create, "graphs")->s, "on");
    const rec *created = find(r, "runner create", ACG_TRACE_END);
    assert_true(arg(created, "ok")->b);
    assert_int_equal(arg(created, "captured")->u, 2);
    assert_int_equal(arg(created, "dropped")->u, 0);
    size_t pool = 0;
    TC_OK(acg_runner_get_pool_bytes(runner, &pool));
    assert_int_equal(arg(created, "pool_bytes")->u, pool);
    assert_true(pool > 0);

    assert_int_equal(count(r, "measure", ACG_TRACE_BEGIN), 2);
    assert_int_equal(count(r, "warm-up", ACG_TRACE_BEGIN), 2);
    assert_int_equal(count(r, "capture", ACG_TRACE_BEGIN), 2);
    /* Captures come largest first, k of n, each with what its report says. */
    uint32_t k = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rec *e = &r->events[i];
        if (strcmp(e->name, "capture") != 0) {
            continue;
        }
        assert_int_equal(e->category, ACG_TRACE_ENGINE);
        if (e->phase == ACG_TRACE_BEGIN) {
            k++;
            assert_int_equal(arg(e, "k")->u, k);
            assert_int_equal(arg(e, "n")->u, 2);
            assert_int_equal(arg(e, "bucket")->u, k == 1 ? 1 : 0);
            assert_int_equal(arg(e, "batch")->u, k == 1 ? 8 : 2);
            assert_string_equal(arg(e, "label")->s, "decode");
            continue;
        }
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        TC_OK(acg_runner_get_report(runner, k == 1 ? 1 : 0, &rep));
        assert_true(arg(e, "captured")->b);
        assert_null(arg(e, "reason"));
        assert_int_equal(arg(e, "graph_bytes")->u, rep.graph_bytes);
        assert_int_equal(arg(e, "pool_growth")->u, rep.pool_growth);
        assert_int_equal(arg(e, "eager_peak")->u, rep.eager_peak);
        assert_true(rep.graph_bytes > 0);
        assert_true(arg(e, "pool_bytes")->u > 0 && arg(e, "pool_bytes")->u <= pool);
    }
    const rec *measured = find(r, "measure", ACG_TRACE_END);
    assert_true(arg(measured, "ok")->b && arg(measured, "eager_peak")->u > 0);

    /* The step: a replay on this thread, and the graph's one entry on the stream. */
    const rec *replay = find(r, "replay", ACG_TRACE_BEGIN);
    assert_non_null(replay);
    assert_int_equal(replay->category, ACG_TRACE_ENGINE);
    assert_int_equal(replay->thread, me);
    assert_int_equal(arg(replay, "bucket")->u, 0);
    assert_int_equal(arg(replay, "slot")->u, 0);
    assert_true(arg(replay, "graphed")->b);
    assert_null(arg(replay, "reason"));
    assert_int_equal(count(r, "eager", ACG_TRACE_BEGIN), 0);
    const rec *entry = NULL;
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->events[i].name, "replay") == 0 && r->events[i].category == ACG_TRACE_STREAM) {
            entry = &r->events[i];
        }
    }
    assert_non_null(entry);
    assert_int_equal(entry->phase, ACG_TRACE_COMPLETE);
    assert_true(arg(entry, "ops")->u >= 3);
    /* Each of the graph's ops (copies here) is told too, inside the replay's span. */
    uint64_t inside = 0;
    for (size_t i = 0; i < r->n; i++) {
        const rec *e = &r->events[i];
        inside += e != entry && e->category == ACG_TRACE_STREAM && e->stream == entry->stream &&
                  e->ts >= entry->ts && e->ts + e->dur <= entry->ts + entry->dur;
    }
    assert_int_equal(inside, arg(entry, "ops")->u);

    const rec *none = find(r, "no bucket fits", ACG_TRACE_INSTANT);
    assert_non_null(none);
    assert_int_equal(arg(none, "batch")->u, 9);
    assert_string_equal(arg(none, "label")->s, "decode");

    TC_OK(acg_runner_destroy(runner));
}

/* A step runs eagerly for a reason, and says it: graphs off, or the bucket was dropped (here
 * for want of memory: the limit holds nothing). */
static void test_eager_reasons(void **state) {
    fx *f = *state;
    recorder *r = f->r;
    acg_runner *off = traced_step(f, ACG_TRACE_ENGINE, ACG_GRAPHS_OFF, 0, 1);
    /* Graphs off: nothing measured or captured. */
    assert_int_equal(count(r, "capture", ACG_TRACE_BEGIN), 0);
    assert_int_equal(count(r, "measure", ACG_TRACE_BEGIN), 0);
    assert_string_equal(arg(find(r, "runner create", ACG_TRACE_BEGIN), "graphs")->s, "off");
    const rec *eager = find(r, "eager", ACG_TRACE_BEGIN);
    assert_non_null(eager);
    assert_false(arg(eager, "graphed")->b);
    assert_string_equal(arg(eager, "reason")->s, "graphs off");
    assert_true(arg(find(r, "eager", ACG_TRACE_END), "ok")->b);
    TC_OK(acg_runner_destroy(off));

    acg_runner *starved = traced_step(f, ACG_TRACE_ENGINE, ACG_GRAPHS_ON, 1, 0);
    assert_int_equal(count(r, "bucket dropped", ACG_TRACE_INSTANT), 2);
    assert_int_equal(count(r, "capture", ACG_TRACE_END), 2);
    for (size_t i = 0; i < r->n; i++) {
        const rec *e = &r->events[i];
        if (strcmp(e->name, "capture") == 0 && e->phase == ACG_TRACE_END) {
            assert_false(arg(e, "captured")->b);
            assert_int_equal(arg(e, "graph_bytes")->u, 0);
            assert_true(tc_contains(arg(e, "reason")->s, "budget"));
        }
        if (strcmp(e->name, "bucket dropped") == 0) {
            assert_true(tc_contains(arg(e, "reason")->s, "budget"));
        }
    }
    eager = find(r, "eager", ACG_TRACE_BEGIN);
    assert_non_null(eager);
    assert_int_equal(arg(eager, "bucket")->u, 0);
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    TC_OK(acg_runner_get_report(starved, 0, &rep));
    char want[400];
    snprintf(want, sizeof want, "bucket dropped: %s", rep.reason);
    assert_string_equal(arg(eager, "reason")->s, want);
    assert_int_equal(arg(find(r, "runner create", ACG_TRACE_END), "dropped")->u, 2);
    TC_OK(acg_runner_destroy(starved));
}

/* ---- model steps ---------------------------------------------------------------------------- */

/* Each step is a span holding its phases in order (admit, plan, upload, launch, wait, retire),
 * on the caller's thread; the launch holds the replay, the uploads the stager's; the step's end
 * says what it did. A hook that takes the model's category alone is told nothing else. */
static void test_model_steps(void **state) {
    fx *f = *state;
    acg_device *dev = f->t.dev;
    recorder *r = f->r;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load("tiny", 1, &w));
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 2;
    o.max_step_tokens = 64;
    acg_model *m = NULL;
    install(r, ACG_TRACE_ALL);
    TC_OK(acg_model_create(dev, w, &o, &m));
    const int32_t prompt[] = {1, 50, 60, 70};
    acg_request q = ACG_REQUEST_INIT;
    q.prompt = prompt;
    q.prompt_len = 4;
    q.max_new_tokens = 3;
    uint64_t id = 0;
    TC_OK(acg_model_submit(m, &q, &id));
    uint32_t steps = 0;
    for (;;) {
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        TC_OK(acg_model_step(m, &rep));
        if (rep.rows == 0) {
            break;
        }
        steps++;
    }
    uninstall();
    check_well_formed(r);
    uint32_t me = acg_trace_get_thread_id();
    /* steps that ran, and the last one that found nothing to run */
    assert_int_equal(count(r, "step", ACG_TRACE_BEGIN), steps + 1);
    static const char *const phases[] = {"admit", "plan", "upload", "launch", "wait", "retire"};
    size_t phase = 0, ran = 0;
    bool in_step = false, in_launch = false, replayed_in_launch = false;
    int depth = 0; /* model and engine spans open on this thread inside the step */
    for (size_t i = 0; i < r->n; i++) {
        const rec *e = &r->events[i];
        if (e->thread != me || e->phase == ACG_TRACE_COMPLETE || e->phase == ACG_TRACE_INSTANT) {
            continue;
        }
        if (strcmp(e->name, "step") == 0) {
            assert_int_equal(e->category, ACG_TRACE_MODEL);
            if (e->phase == ACG_TRACE_BEGIN) {
                in_step = true;
                phase = 0;
                depth = 0;
                continue;
            }
            in_step = false;
            if (arg(e, "rows")->u == 0) {
                assert_int_equal(phase, 1); /* admitted nothing: admit alone */
                continue;
            }
            ran++;
            assert_int_equal(phase, 6);
            assert_true(arg(e, "ok")->b);
            assert_true(arg(e, "graphed")->b);
            assert_int_equal(arg(e, "rows")->u, 1);
            assert_string_equal(arg(e, "label")->s, "step");
            continue;
        }
        if (!in_step) {
            continue;
        }
        if (e->phase == ACG_TRACE_BEGIN) {
            if (depth == 0) {
                /* A direct child of the step: the next phase. */
                assert_int_equal(e->category, ACG_TRACE_MODEL);
                assert_true(phase < 6);
                assert_string_equal(e->name, phases[phase]);
                phase++;
                in_launch = strcmp(e->name, "launch") == 0;
            } else if (in_launch && strcmp(e->name, "replay") == 0) {
                replayed_in_launch = true;
            }
            depth++;
        } else {
            depth--;
        }
    }
    assert_int_equal(ran, steps);
    assert_true(replayed_in_launch);
    assert_true(count(r, "stager upload", ACG_TRACE_BEGIN) > 0);
    assert_true(count(r, "matmul_f32", ACG_TRACE_COMPLETE) > 0);

    /* The model's category alone. */
    acg_model *m2 = NULL;
    r->n = 0;
    install(r, ACG_TRACE_MODEL);
    o.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_model_create(dev, w, &o, &m2));
    TC_OK(acg_model_submit(m2, &q, &id));
    TC_OK(acg_model_run_all(m2));
    uninstall();
    check_well_formed(r);
    assert_true(r->n > 0);
    for (size_t i = 0; i < r->n; i++) {
        assert_int_equal(r->events[i].category, ACG_TRACE_MODEL);
    }
    const rec *last = NULL;
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->events[i].name, "step") == 0 && r->events[i].phase == ACG_TRACE_END &&
            arg(&r->events[i], "rows")->u > 0) {
            last = &r->events[i];
        }
    }
    assert_non_null(last);
    assert_false(arg(last, "graphed")->b);

    TC_OK(acg_model_destroy(m2));
    TC_OK(acg_model_destroy(m));
    TC_OK(acg_model_weights_free(w));
}

/* ---- replacing a hook ----------------------------------------------------------------------- */

/* The setter returns only once no call of the old hook runs, even while one is running on a
 * worker (each call sleeps), and the old hook is told nothing afterwards. */
static void test_replace_waits_for_calls(void **state) {
    fx *f = *state;
    acg_buffer *buf = tc_buffer(f->t.dev, 256);
    recorder *old = f->r, *next = recorder_new();
    old->sleep_us = 2000;
    install(old, ACG_TRACE_STREAM);
    for (int i = 0; i < 100; i++) {
        TC_OK(acg_fill(f->t.s, buf, 0, 256, (uint32_t)i, 4));
    }
    /* Until the worker is inside a call of the old hook. */
    while (atomic_load(&old->calls) == 0) {
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    install(next, ACG_TRACE_STREAM);
    assert_int_equal(atomic_load(&old->inside), 0);
    uint64_t told = atomic_load(&old->calls);
    TC_OK(acg_stream_synchronize(f->t.s));
    uninstall();
    assert_int_equal(atomic_load(&old->calls), told);
    assert_true(told < 100);
    /* Every fill went to one hook or the other, after it was installed. */
    assert_int_equal(told + atomic_load(&next->calls), 100);
    TC_OK(acg_buffer_free(buf));
    recorder_free(next);
}

/* ---- bad configurations --------------------------------------------------------------------- */

static void test_bad_config(void **state) {
    fx *f = *state;
    recorder *r = f->r;
    acg_trace_config c = ACG_TRACE_CONFIG_INIT;
    c.fn = hook;
    c.user = r;
    c.categories = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_trace_set_hook(&c));
    TC_LAST_ERROR_HAS("categories");
    c.categories = ACG_TRACE_ALL | (1u << 7);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_trace_set_hook(&c));
    c.categories = ACG_TRACE_ALL;
    c.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_trace_set_hook(&c));
    TC_LAST_ERROR_HAS("acg_trace_config");
    c.size = offsetof(acg_trace_config, fn); /* without its hook */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_trace_set_hook(&c));
    /* Newer headers: a longer struct whose extra bytes are not zero. */
    struct {
        acg_trace_config c;
        uint64_t later;
    } longer = {ACG_TRACE_CONFIG_INIT, 1};
    longer.c.size = sizeof longer;
    longer.c.fn = hook;
    longer.c.user = r;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_trace_set_hook(&longer.c));
    /* Nothing was installed by any of them. */
    acg_stream *s = f->t.s;
    acg_buffer *buf = tc_buffer(f->t.dev, 256);
    TC_OK(acg_fill(s, buf, 0, 256, 0, 4));
    TC_OK(acg_stream_synchronize(s));
    assert_int_equal(atomic_load(&r->calls), 0);
    /* ... and the same longer struct with zeros is taken; an older one (through categories'
     * offset, so categories defaults to all) too. */
    longer.later = 0;
    TC_OK(acg_trace_set_hook(&longer.c));
    c.size = offsetof(acg_trace_config, categories);
    c.categories = 0; /* past the size: not read */
    TC_OK(acg_trace_set_hook(&c));
    /* From inside the hook, the setter is refused rather than waiting for its own call, and
     * the hook stays. */
    r->try_nested = true;
    TC_OK(acg_fill(s, buf, 0, 256, 0, 4));
    TC_OK(acg_stream_synchronize(s));
    uint64_t calls = atomic_load(&r->calls);
    assert_true(calls >= 1);
    assert_int_equal(r->nested, ACG_ERR_IN_USE);
    r->try_nested = false;
    TC_OK(acg_fill(s, buf, 0, 256, 0, 4));
    TC_OK(acg_stream_synchronize(s));
    assert_int_equal(atomic_load(&r->calls), calls + 1);
    /* A config without a hook removes it, whatever its categories. */
    acg_trace_config none = ACG_TRACE_CONFIG_INIT;
    none.categories = 0;
    TC_OK(acg_trace_set_hook(&none));
    TC_OK(acg_fill(s, buf, 0, 256, 0, 4));
    TC_OK(acg_stream_synchronize(s));
    assert_int_equal(atomic_load(&r->calls), calls + 1);
    TC_OK(acg_buffer_free(buf));
}

/* ---- threads and the clock ------------------------------------------------------------------ */

static void *other_thread(void *out) {
    uint32_t *id = out;
    id[0] = acg_trace_get_thread_id();
    id[1] = acg_trace_get_thread_id();
    return NULL;
}

static void test_threads_and_clock(void **state) {
    (void)state;
    uint32_t me = acg_trace_get_thread_id();
    assert_true(me > 0);
    assert_int_equal(acg_trace_get_thread_id(), me);
    uint32_t other[2] = {0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(other[0] > 0 && other[0] != me);
    assert_int_equal(other[0], other[1]);
    uint64_t a = acg_trace_now_ns(), b = acg_trace_now_ns();
    assert_true(b >= a);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t mono = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    assert_true(mono >= b && mono - b < 1000000000u);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_off_gets_nothing),
        T(test_stream_entries),
        cmocka_unit_test_setup_teardown(test_replay_ops, setup_two_threads, teardown),
        T(test_runner_creation_and_replay),
        T(test_eager_reasons),
        T(test_model_steps),
        T(test_replace_waits_for_calls),
        T(test_bad_config),
        cmocka_unit_test(test_threads_and_clock),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
