/*
 * test_misuse.c — objects that survive concurrent misuse (issue 9): a destroy racing the calls
 * that use the object, a log callback reset while it runs, buffers owned by other objects, and
 * the single-threaded defects the outside probe found in the core and the engine. Every case
 * failed before its fix (under ASan, UBSan or TSan for the races); the races loop enough times
 * to have caught the original defects reliably. Runs under both sanitizers in CI.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

#include "common.h"

#define N 4096 /* floats per buffer: enough work that the free lands while launches are queued */

/* Iterations of each race: the original defects showed within 200 to 2,000. */
static int iterations(void) { return tc_backend_is("cpu") ? 400 : 200; }

/* The device under test, a stream and the built-in kernels (common.h); or with a second stream
 * and buffers x and y of N floats. */
typedef tc_fixture fx;
typedef tc_fixture2 fx2;

/* A thread that races the main thread's destroy of the object it uses: it sets `started` once
 * under way, and leaves what its call returned in `status`. */
typedef struct racer {
    void *obj; /* what it uses */
    _Atomic int started;
    acg_status status;
} racer;

/* Starts fn(r) on a thread and returns once it is under way. */
static pthread_t race_start(void *(*fn)(void *), racer *r) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, r), 0);
    while (!atomic_load(&r->started)) {
    }
    return t;
}

/* ---- a buffer freed while another thread launches kernels on it (defect 3) ---------------- */

typedef struct launcher {
    racer r; /* first, so the thread started with it gets the launcher; obj: the buffer;
                status: the last launch's */
    acg_stream *s;
    const tc_kernels *k;
    int ok;
} launcher;

static void *launch_until_refused(void *arg) {
    launcher *l = arg;
    acg_status st = ACG_OK;
    for (int i = 0; i < 1000000 && st == ACG_OK; i++) {
        st = tc_add(l->s, l->k, l->r.obj, 0, l->r.obj, 0, N, 1.0f);
        if (st == ACG_OK) {
            l->ok++;
        }
        atomic_store(&l->r.started, 1);
    }
    l->r.status = st;
    return NULL;
}

static void test_free_races_launches(void **state) {
    fx *f = *state;
    for (int it = 0; it < iterations(); it++) {
        launcher l = {.r.obj = tc_buffer(f->dev, N * sizeof(float)), .s = f->s, .k = &f->k};
        pthread_t t = race_start(launch_until_refused, &l.r);
        /* The free waits for the launches queued before it; later ones are refused. */
        TC_OK(acg_buffer_free(l.r.obj));
        pthread_join(t, NULL);
        if (l.r.status != ACG_OK) {
            assert_int_equal(l.r.status, ACG_ERR_INVALID_HANDLE);
        }
        assert_true(l.ok >= 1);
    }
    TC_OK(acg_stream_synchronize(f->s));
}

/* ---- a device closed while another thread creates a stream on it (defect 4) --------------- */

static void *create_and_destroy_stream(void *arg) {
    racer *c = arg;
    acg_stream *s = NULL;
    atomic_store(&c->started, 1);
    c->status = acg_stream_create(c->obj, &s);
    if (c->status == ACG_OK) {
        c->status = acg_stream_destroy(s);
    }
    return NULL;
}

static void test_close_races_stream_create(void **state) {
    (void)state;
    int won = 0, lost = 0;
    for (int it = 0; it < iterations(); it++) {
        racer c = {.obj = tc_open()};
        pthread_t t = race_start(create_and_destroy_stream, &c);
        /* Refused while the stream lives; once closed, the creation is refused instead. */
        acg_status st;
        while ((st = acg_device_close(c.obj)) == ACG_ERR_IN_USE) {
        }
        TC_OK(st);
        pthread_join(t, NULL);
        if (c.status == ACG_OK) {
            won++;
        } else {
            assert_int_equal(c.status, ACG_ERR_INVALID_HANDLE);
            lost++;
        }
    }
    print_message("stream creation ran first %d times, the close %d times\n", won, lost);
}

/* ---- a stream destroyed while another thread synchronizes it (defect 5) ------------------- */

static void *synchronize_stream(void *arg) {
    racer *y = arg;
    atomic_store(&y->started, 1);
    y->status = acg_stream_synchronize(y->obj);
    return NULL;
}

static void test_destroy_races_synchronize(void **state) {
    fx2 *f = *state;
    for (int it = 0; it < iterations(); it++) {
        racer z = {.obj = tc_stream(f->t.dev)};
        for (int i = 0; i < 8; i++) {
            TC_OK(tc_add(z.obj, &f->t.k, f->y, 0, f->y, 0, N, 1.0f));
        }
        pthread_t t = race_start(synchronize_stream, &z);
        /* Waits for the synchronize to return, or the synchronize finds the stream gone. */
        TC_OK(acg_stream_destroy(z.obj));
        pthread_join(t, NULL);
        if (z.status != ACG_OK) {
            assert_int_equal(z.status, ACG_ERR_INVALID_HANDLE);
        }
    }
}

/* Two threads destroying one object: exactly one succeeds, the other is refused. */
typedef struct destroyer {
    acg_event *e;
    acg_status status;
} destroyer;

static void *destroy_event(void *arg) {
    destroyer *d = arg;
    d->status = acg_event_destroy(d->e);
    return NULL;
}

static void test_double_destroy(void **state) {
    fx *f = *state;
    for (int it = 0; it < iterations(); it++) {
        acg_event *e = NULL;
        TC_OK(acg_event_create(f->dev, &e));
        destroyer d[2] = {{e, ACG_OK}, {e, ACG_OK}};
        tc_run_threads(2, destroy_event, d, sizeof d[0]);
        assert_true((d[0].status == ACG_OK) != (d[1].status == ACG_OK));
        assert_int_equal(d[0].status + d[1].status, ACG_ERR_INVALID_HANDLE);
    }
}

/* ---- a log callback reset while another thread is inside it (defect 2) ------------------- */

typedef struct log_ctx {
    _Atomic int calls;
    char last[256];
} log_ctx;

static void log_into(acg_log_level level, const char *msg, void *user) {
    (void)level;
    log_ctx *c = user;
    atomic_fetch_add(&c->calls, 1);
    /* Linger, so the reset lands while this runs. */
    for (int i = 0; i < 20; i++) {
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

static _Atomic int logging_done;

static void *log_a_lot(void *arg) {
    (void)arg;
    while (!atomic_load(&logging_done)) {
        /* A failed call logs its detail at debug level. */
        acg_stream_synchronize(NULL);
    }
    return NULL;
}

static void test_log_reset_waits(void **state) {
    (void)state;
    acg_log_level level = acg_get_log_level();
    acg_set_log_level(ACG_LOG_DEBUG);
    atomic_store(&logging_done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, log_a_lot, NULL), 0);
    int calls = 0;
    for (int it = 0; it < 200; it++) {
        log_ctx *c = calloc(1, sizeof *c);
        acg_set_log_callback(log_into, c);
        while (atomic_load(&c->calls) == 0) {
        }
        acg_set_log_callback(NULL, NULL);
        /* The reset returned: no call of log_into is running or will run with c. */
        calls += atomic_load(&c->calls);
        free(c);
    }
    atomic_store(&logging_done, 1);
    pthread_join(t, NULL);
    acg_set_log_level(level);
    assert_true(calls >= 200);
}

/* A callback may reset the callback from inside itself without deadlocking. */
static void reset_from_inside(acg_log_level level, const char *msg, void *user) {
    (void)level, (void)msg;
    atomic_fetch_add((_Atomic int *)user, 1);
    acg_set_log_callback(NULL, NULL);
}

static void test_log_reset_from_callback(void **state) {
    (void)state;
    acg_log_level level = acg_get_log_level();
    acg_set_log_level(ACG_LOG_DEBUG);
    _Atomic int calls = 0, later = 0;
    acg_set_log_callback(reset_from_inside, &calls);
    acg_stream_synchronize(NULL);
    acg_set_log_callback(reset_from_inside, &later);
    acg_stream_synchronize(NULL); /* the first callback was reset: only the second runs */
    acg_set_log_level(level);
    assert_int_equal(atomic_load(&calls), 1);
    assert_int_equal(atomic_load(&later), 1);
}

/* ---- buffers owned by another object (defect 13) ------------------------------------------ */

/* An attention plan of 2 rows of up to 64 tokens and 2 query tokens. */
static acg_attn_plan *small_plan(acg_device *dev) {
    acg_attn_plan_config pc = ACG_ATTN_PLAN_CONFIG_INIT;
    pc.batch = 2;
    pc.max_seq_len = 64;
    pc.max_query_tokens = 2;
    acg_attn_plan *plan = NULL;
    TC_OK(acg_attn_plan_create(dev, &pc, &plan));
    return plan;
}

/* The buffers of a KV cache and of an attention plan are refused to acg_buffer_free; once their
 * owners are destroyed nothing of the device is left (the fixture's teardown closes it). */
static void test_owned_buffers_refused(void **state) {
    fx *f = *state;
    acg_device *dev = f->dev;
    acg_kv_config kc = ACG_KV_CONFIG_INIT;
    kc.n_pages = 4;
    kc.kv_dim = 8;
    acg_kv_cache *kv = NULL;
    TC_OK(acg_kv_cache_create(dev, &kc, &kv));
    acg_buffer *kb = NULL, *vb = NULL;
    TC_OK(acg_kv_cache_get_buffers(kv, &kb, &vb));
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(kb));
    TC_LAST_ERROR_HAS("KV cache");
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(vb));
    /* A user's view of an owned buffer is the user's. */
    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(kb, 0, 16, &view));
    TC_EXPECT(ERR_IN_USE, acg_kv_cache_destroy(kv)); /* the view holds K */
    TC_OK(acg_buffer_free(view));
    TC_OK(acg_kv_cache_destroy(kv));

    acg_attn_plan *plan = small_plan(dev);
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(plan, &v));
    acg_buffer *views[] = {v.block_table, v.query_offsets, v.kv_lens, v.metadata};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        TC_EXPECT(ERR_IN_USE, acg_buffer_free(views[i]));
        TC_LAST_ERROR_HAS("attention plan");
    }
    TC_OK(acg_attn_plan_destroy(plan));
}

/* ---- plan builds check the stream even when nothing changed (defect 8) -------------------- */

static void test_unchanged_plan_checks_stream(void **state) {
    fx *f = *state;
    acg_device *dev = f->dev, *other = tc_open_cpu();
    acg_stream *s = f->s, *elsewhere = tc_stream(other);
    acg_stager *stager = NULL;
    acg_stager_config sc = ACG_STAGER_CONFIG_INIT;
    TC_OK(acg_stager_create(dev, &sc, &stager));
    acg_attn_plan *plan = small_plan(dev);
    uint32_t pages[] = {1};
    acg_attn_row rows[] = {{pages, 1, 3, 1}};
    TC_OK(acg_attn_plan_build(plan, stager, s, rows, 1));
    TC_OK(acg_attn_plan_build(plan, stager, s, rows, 1)); /* unchanged: nothing uploaded */
    acg_attn_plan_stats stats = ACG_ATTN_PLAN_STATS_INIT;
    TC_OK(acg_attn_plan_get_stats(plan, &stats));
    assert_int_equal(stats.unchanged, 1);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_attn_plan_build(plan, stager, elsewhere, rows, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_build(plan, stager, NULL, rows, 1));
    if (tc_has_graphs(dev, s)) {
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_build(plan, stager, s, rows, 1));
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(s, &g));
        TC_OK(acg_graph_destroy(g));
    }
    acg_stream *dead = tc_stream(dev);
    TC_OK(acg_stream_destroy(dead));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_build(plan, stager, dead, rows, 1));
    TC_OK(acg_attn_plan_get_stats(plan, &stats));
    assert_int_equal(stats.builds, 2);
    TC_OK(acg_attn_plan_destroy(plan));
    TC_OK(acg_stager_destroy(stager));
    TC_OK(acg_stream_destroy(elsewhere));
    tc_close(other);
}

/* ---- graph update between one-node graphs (defect 1; UBSan) ------------------------------- */

static void test_update_one_node_graphs(void **state) {
    fx2 *f = *state;
    acg_stream *s = f->t.s;
    tc_need_graphs(f->t.dev, s);
    if (!tc_cap()->graph_update) {
        tc_skip("no graph update");
    }
    acg_graph *g[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_OK(tc_fill(s, &f->t.k, f->y, 0, N, (float)(i + 1)));
        TC_OK(acg_stream_end_capture(s, &g[i]));
        size_t nodes = 0;
        TC_OK(acg_graph_get_node_count(g[i], &nodes));
        assert_int_equal(nodes, 1);
    }
    TC_OK(acg_graph_update(g[0], g[1]));
    TC_OK(acg_graph_launch(g[0], s));
    TC_EXPECT_FLOATS(s, f->y, N, 2.0f);
    TC_OK(acg_graph_destroy(g[1]));
    TC_OK(acg_graph_destroy(g[0]));
}

/* ---- two handles of one device are told apart in messages ------------------------------- */

static void test_wrong_device_names_handles(void **state) {
    fx *f = *state;
    acg_device *b = tc_open();
    acg_stream *s = f->s;
    acg_buffer *y = tc_buffer(b, 64);
    acg_event *e = NULL;
    TC_OK(acg_event_create(b, &e));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_event_record(e, s));
    const char *msg = acg_last_error();
    const char *first = strstr(msg, "(open #");
    assert_non_null(first);
    const char *second = strstr(first + 1, "(open #");
    assert_non_null(second);
    assert_true(strncmp(first, second, strcspn(first, ")")) != 0);
    float x = 0;
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_h2d(s, y, 0, &x, sizeof x));
    TC_LAST_ERROR_HAS("(open #");
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_buffer_free(y));
    tc_close(b);
}

/* ---- a destroy from inside a call that uses the object is refused, not deadlocked -------- */

typedef struct self_destroy {
    acg_runner *r;
    acg_status status;
} self_destroy;

static acg_status destroying_forward(void *user, acg_stream *s, const acg_step_io *io) {
    (void)s, (void)io;
    self_destroy *d = user;
    d->status = acg_runner_destroy(d->r);
    return ACG_OK;
}

static size_t one_float(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user, (void)i, (void)b;
    return sizeof(float);
}

static void test_destroy_from_callback(void **state) {
    fx *f = *state;
    acg_stream *s = f->s;
    self_destroy d = {NULL, ACG_OK};
    acg_recipe rc = ACG_RECIPE_INIT;
    rc.name = "self";
    rc.user = &d;
    rc.n_inputs = 1;
    rc.n_outputs = 1;
    rc.input_bytes = one_float;
    rc.output_bytes = one_float;
    rc.forward = destroying_forward;
    acg_bucket_key key = {"step", 0, 1, 1};
    acg_runner_config c = ACG_RUNNER_CONFIG_INIT;
    c.recipe = &rc;
    c.buckets = &key;
    c.n_buckets = 1;
    c.stream = s;
    c.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_runner_create(f->dev, &c, &d.r));
    acg_lease lease;
    TC_OK(acg_runner_lease(d.r, 0, &lease));
    TC_OK(acg_runner_run(d.r, &lease, s));
    assert_int_equal(d.status, ACG_ERR_IN_USE);
    TC_OK(acg_runner_release(d.r, &lease));
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_runner_destroy(d.r));
}

static const struct CMUnitTest tests[] = {
    TC_FIXTURE_CASE(test_free_races_launches),
    cmocka_unit_test(test_close_races_stream_create),
    TC_FIXTURE2_CASE(test_destroy_races_synchronize, N * sizeof(float)),
    TC_FIXTURE_CASE(test_double_destroy),
    cmocka_unit_test(test_log_reset_waits),
    cmocka_unit_test(test_log_reset_from_callback),
    TC_FIXTURE_CASE(test_owned_buffers_refused),
    TC_FIXTURE_CASE(test_unchanged_plan_checks_stream),
    TC_FIXTURE2_CASE(test_update_one_node_graphs, N * sizeof(float)),
    TC_FIXTURE_CASE(test_wrong_device_names_handles),
    TC_FIXTURE_CASE(test_destroy_from_callback),
};
TC_MAIN("test_misuse", tests)
