/*
 * test_waits.c — waiting for the device without stopping it: a free waits for the streams that
 * used the memory and for no other, a device synchronize or a graph destroy leaves the device
 * usable by other threads while it waits, and captures end (instantiate) while other threads
 * allocate, free and synchronize.
 *
 * A "gate" holds a stream's later work until the test opens it: a host function on the cpu
 * backend, a barrier on an OpenCL user event on the opencl backend (work issued on the native
 * queue and declared as foreign work, as an engine would).
 */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#if defined(TC_HAVE_OPENCL)
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#endif

#define N 1024
#define GUARD_S 60 /* a call that must return and blocks instead fails the test after this */

/* The device under test, streams a (t.s) and b, and buffers x and y of N floats (common.h). */
typedef tc_fixture2 fx;

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
#if defined(TC_HAVE_OPENCL)
    cl_event user;
#endif
} gate;

static void gate_host(void *user) {
    gate *g = user;
    pthread_mutex_lock(&g->mu);
    while (!g->open) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    pthread_mutex_unlock(&g->mu);
}

/* Whether the backend has a gate to hold a stream with: cpu, or opencl where it is compiled in. */
static bool have_gate(void) {
    bool opencl = false;
#if defined(TC_HAVE_OPENCL)
    opencl = tc_backend_is("opencl");
#endif
    return tc_backend_is("cpu") || opencl;
}

/* Ends a case whose backend has no gate, as skipped. The case makes its calls up to the gate
 * first, on every backend, and releases what it made before it comes here. */
static _Noreturn void skip_no_gate(void) {
    tc_skip("no gate for the %s backend to hold a stream with", tc_backend());
}

/* Holds the stream's later work until gate_open; acc lists the buffers the held work uses.
 * Returns false, doing nothing, where the backend has no gate (have_gate). */
static bool gate_close(gate *g, acg_stream *s, const acg_access *acc, size_t n) {
    if (!have_gate()) {
        return false;
    }
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (tc_backend_is("cpu")) {
        TC_OK(acg_stream_launch_host(s, gate_host, g, acc, n));
        return true;
    }
#if defined(TC_HAVE_OPENCL)
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(s, &h));
    cl_command_queue q = h.handle;
    cl_context ctx = NULL;
    assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL),
                     CL_SUCCESS);
    cl_int err = CL_SUCCESS;
    g->user = clCreateUserEvent(ctx, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clEnqueueBarrierWithWaitList(q, 1, &g->user, NULL), CL_SUCCESS);
    TC_OK(acg_stream_declare_foreign(s, "gate", acc, n));
#endif
    return true;
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
#if defined(TC_HAVE_OPENCL)
    if (g->user != NULL) {
        clSetUserEventStatus(g->user, CL_COMPLETE);
        clReleaseEvent(g->user);
        g->user = NULL;
    }
#endif
}

static void gate_destroy(gate *g) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* A call run on its own thread, to see whether it blocks. */
typedef struct task {
    pthread_t thread;
    acg_status (*fn)(void *arg);
    void *arg;
    acg_status st;
    atomic_bool done;
} task;

static void *task_main(void *p) {
    task *t = p;
    t->st = t->fn(t->arg);
    atomic_store(&t->done, true);
    return NULL;
}

static void task_start(task *t, acg_status (*fn)(void *), void *arg) {
    t->fn = fn;
    t->arg = arg;
    atomic_init(&t->done, false);
    assert_int_equal(pthread_create(&t->thread, NULL, task_main, t), 0);
}

/* Whether the task is still blocked after a while (a task that should block gets time to
 * reach its wait; one that finishes early shows the wait is missing). */
static bool task_blocked(task *t) {
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    return !atomic_load(&t->done);
}

static acg_status task_join(task *t) {
    pthread_join(t->thread, NULL);
    return t->st;
}

static acg_status free_buffer(void *buf) { return acg_buffer_free(buf); }
static acg_status free_pinned(void *p) { return acg_pinned_free(p); }
static acg_status sync_device(void *dev) { return acg_device_synchronize(dev); }
static acg_status destroy_graph(void *g) { return acg_graph_destroy(g); }

/* What other threads do on a device while a wait is under way: all of it takes the device's
 * lock at some point, so it hangs (and the guard fails the test) if the wait holds it. */
static void use_device(acg_device *dev, const tc_kernels *k) {
    tc_hang_guard(GUARD_S, "using the device while another thread waits for it");
    acg_stream *s = tc_stream(dev);
    acg_buffer *b = tc_buffer(dev, N * sizeof(float));
    TC_OK(tc_fill(s, k, b, 0, N, 5.0f));
    TC_EXPECT_FLOATS(s, b, N, 5.0f);
    TC_OK(acg_buffer_free(b));
    acg_event *e = tc_event(dev);
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_stream_destroy(s));
    tc_hang_guard(0, NULL);
}

/* Runs fn(arg) on its own thread while g holds a stream's work: the call must still be waiting
 * after a while, other threads must use f's device meanwhile (use_device), and once g opens
 * the call must return ACG_OK. Destroys g. */
static void expect_waits_for_gate(gate *g, acg_status (*fn)(void *), void *arg, const fx *f) {
    task t;
    task_start(&t, fn, arg);
    bool blocked = task_blocked(&t);
    use_device(f->t.dev, &f->t.k);
    gate_open(g);
    TC_OK(task_join(&t)); /* under ASan a free that did not wait is a use after free */
    assert_true(blocked);
    gate_destroy(g);
}

/* A free waits for the stream that used the buffer, and only for it. */
static void test_free_waits_for_its_streams(void **state) {
    fx *f = *state;
    acg_stream *a = f->t.s, *b = f->b;
    acg_buffer *held = tc_buffer(f->t.dev, N * sizeof(float));
    acg_buffer *other = tc_buffer(f->t.dev, N * sizeof(float));
    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(held, 0, N * sizeof(float) / 2, &view));
    TC_OK(tc_fill(b, &f->t.k, other, 0, N, 1.0f));
    TC_OK(acg_stream_synchronize(b));
    gate g;
    /* The held work uses `held` through its view: the mark reaches the root allocation. */
    acg_access acc = {.buffer = view, .mode = ACG_ACCESS_WRITE};
    if (!gate_close(&g, a, &acc, 1)) {
        TC_FREE_BUFFERS(view, other, held);
        skip_no_gate();
    }
    TC_OK(tc_fill(a, &f->t.k, held, 0, N, 2.0f)); /* queued behind the gate */
    TC_OK(tc_fill(b, &f->t.k, other, 0, N, 3.0f));

    /* `other` was used on b only: its free does not wait for a. */
    tc_hang_guard(GUARD_S, "a free waiting for a stream that never used the buffer");
    TC_OK(acg_buffer_free(other));
    tc_hang_guard(0, NULL);
    use_device(f->t.dev, &f->t.k);

    TC_OK(acg_buffer_free(view));
    expect_waits_for_gate(&g, free_buffer, held, f); /* for the gated work on a */
}

/* acg_pinned_free waits for the stream that copies into the memory, and only for it. */
static void test_pinned_free_waits_for_its_streams(void **state) {
    fx *f = *state;
    if (!tc_has_pinned_memory(f->t.dev)) {
        tc_skip("no pinned memory");
    }
    acg_stream *a = f->t.s, *b = f->b;
    TC_OK(tc_fill(b, &f->t.k, f->y, 0, N, 4.0f));
    TC_OK(acg_stream_synchronize(b));
    float *held = tc_pinned(f->t.dev, N * sizeof(float));
    float *other = tc_pinned(f->t.dev, N * sizeof(float));
    TC_OK(acg_copy_d2h(b, other, f->y, 0, N * sizeof(float)));
    gate g;
    if (!gate_close(&g, a, NULL, 0)) {
        TC_OK(acg_pinned_free(other));
        TC_OK(acg_pinned_free(held));
        skip_no_gate();
    }
    TC_OK(acg_copy_d2h(a, held, f->y, 0, N * sizeof(float))); /* behind the gate */

    tc_hang_guard(GUARD_S, "a pinned free waiting for a stream that never copied into it");
    TC_OK(acg_pinned_free(other));
    tc_hang_guard(0, NULL);

    expect_waits_for_gate(&g, free_pinned, held, f);
}

/* acg_device_synchronize waits for every stream without holding the device. */
static void test_device_synchronize_leaves_device_usable(void **state) {
    fx *f = *state;
    gate g;
    if (!gate_close(&g, f->t.s, NULL, 0)) {
        skip_no_gate();
    }
    TC_OK(tc_fill(f->t.s, &f->t.k, f->y, 0, N, 6.0f));
    expect_waits_for_gate(&g, sync_device, f->t.dev, f);
    /* It returned after the gated work ran. */
    TC_EXPECT_FLOATS(f->t.s, f->y, N, 6.0f);
}

/* acg_graph_destroy waits for the graph's replay without holding the device. */
static void test_graph_destroy_leaves_device_usable(void **state) {
    fx *f = *state;
    acg_stream *a = f->t.s;
    tc_need_graphs(f->t.dev, a);
    acg_graph *graph = NULL;
    TC_OK(acg_stream_begin_capture(a, NULL));
    TC_OK(tc_fill(a, &f->t.k, f->y, 0, N, 7.0f));
    TC_OK(acg_stream_end_capture(a, &graph));
    gate g;
    if (!gate_close(&g, a, NULL, 0)) {
        TC_OK(acg_graph_destroy(graph));
        skip_no_gate();
    }
    TC_OK(acg_graph_launch(graph, a)); /* the replay waits behind the gate */
    expect_waits_for_gate(&g, destroy_graph, graph, f);
    TC_EXPECT_FLOATS(a, f->y, N, 7.0f);
}

/* Captures end (and instantiate, without the device lock) while other threads allocate, free
 * and synchronize the device; the others' frees and synchronizes invalidate captures that are
 * still recording, and every graph that does come out replays what was captured. */
typedef struct race {
    const fx *f; /* its y is freed once the pool is gone: a discarded graph may be parked in it */
    acg_graph_pool *pool;
    atomic_int stop;
    int graphs;
} race;

enum { RACE_ROUNDS = 150 };

static void *race_capture(void *p) {
    race *r = p;
    acg_device *dev = r->f->t.dev;
    const tc_kernels *k = &r->f->t.k;
    acg_stream *s = tc_stream(dev), *f = tc_stream(dev);
    acg_event *fork = tc_event(dev), *join = tc_event(dev);
    acg_buffer *y = r->f->y;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        acg_graph *g = NULL;
        acg_status st = acg_stream_begin_capture(s, r->pool);
        if (st == ACG_OK) {
            /* Two streams, so the end meets a forked stream and its join. */
            acg_event_record(fork, s);
            acg_stream_wait_event(f, fork);
            tc_fill(f, k, y, 0, N / 2, (float)i);
            acg_event_record(join, f);
            acg_stream_wait_event(s, join);
            tc_fill(s, k, y, N / 2 * sizeof(float), N / 2, (float)i);
            st = acg_stream_end_capture(s, &g);
        }
        /* Where the capture was invalidated before f forked into it, f ran its fill eagerly:
         * finish that before a replay writes the same memory. */
        acg_stream_synchronize(f);
        if (st == ACG_OK) {
            r->graphs++;
            TC_OK(acg_graph_launch(g, s));
            TC_OK(acg_stream_synchronize(s));
            TC_EXPECT_FLOATS(s, y, N, (float)i);
            TC_OK(i % 2 ? acg_graph_destroy(g) : acg_graph_discard(g));
        } else if (st != ACG_ERR_CAPTURE_INVALIDATED && st != ACG_ERR_IN_USE) {
            TC_OK(st);
        }
    }
    atomic_store(&r->stop, 1);
    TC_OK(acg_event_destroy(join));
    TC_OK(acg_event_destroy(fork));
    TC_OK(acg_stream_destroy(f));
    TC_OK(acg_stream_destroy(s));
    return NULL;
}

static void *race_others(void *p) {
    race *r = p;
    acg_device *dev = r->f->t.dev;
    acg_stream *s = tc_stream(dev);
    for (int i = 0; !atomic_load(&r->stop); i++) {
        acg_buffer *b = NULL;
        acg_status st = acg_buffer_alloc(dev, N * sizeof(float), &b);
        if (st == ACG_OK) {
            tc_fill(s, &r->f->t.k, b, 0, N, 1.0f);
            while ((st = acg_buffer_free(b)) == ACG_ERR_CAPTURE_INVALIDATED) {
            }
            TC_OK(st);
        }
        st = i % 4 == 0 ? acg_device_synchronize(dev) : acg_stream_synchronize(s);
        if (st != ACG_ERR_CAPTURE_INVALIDATED) {
            TC_OK(st);
        }
    }
    TC_OK(acg_stream_destroy(s));
    return NULL;
}

static void test_end_capture_races(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    acg_event *e = tc_event(f->t.dev);
    bool multi = tc_has_multi_stream_capture(f->t.dev, f->t.s, f->b, e);
    TC_OK(acg_event_destroy(e));
    if (!multi) {
        tc_skip("no multi-stream capture");
    }
    race r = {.f = f, .pool = tc_pool(f->t.dev)};
    atomic_init(&r.stop, 0);
    pthread_t cap, other;
    tc_hang_guard(GUARD_S * 4, "captures racing frees and synchronizes");
    assert_int_equal(pthread_create(&cap, NULL, race_capture, &r), 0);
    assert_int_equal(pthread_create(&other, NULL, race_others, &r), 0);
    pthread_join(cap, NULL);
    pthread_join(other, NULL);
    tc_hang_guard(0, NULL);
    print_message("%d of %d captures made graphs\n", r.graphs, RACE_ROUNDS);
    /* A backend that keeps discarded graphs (level_zero) may still hold the last one that was
     * discarded, if no capture succeeded after it: the pool's end releases it (and the fixture
     * frees y after it). */
    TC_OK(acg_graph_pool_destroy(r.pool));
}

#define T(fn) TC_FIXTURE2_CASE(fn, N * sizeof(float))
static const struct CMUnitTest tests[] = {
    T(test_free_waits_for_its_streams),
    T(test_pinned_free_waits_for_its_streams),
    T(test_device_synchronize_leaves_device_usable),
    T(test_graph_destroy_leaves_device_usable),
    T(test_end_capture_races),
};
#undef T
TC_MAIN("test_waits", tests)
