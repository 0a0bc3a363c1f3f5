/*
 * test_concurrency.c — streams used from several threads at once, cross-stream ordering, and
 * the ordering the core imposes on graphs that share a pool. Runs under ThreadSanitizer in CI.
 */
#include <string.h>

#include "common.h"

#define N 64

/* The device under test, streams s (t.s) and b, and buffers x and y of N floats (common.h). */
typedef tc_fixture2 fx;

typedef struct shared_stream_job {
    acg_stream *s;
    const tc_kernels *k;
    acg_buffer *y;
    int launches;
    acg_status status;
} shared_stream_job;

static void *add_ones(void *arg) {
    shared_stream_job *job = arg;
    job->status = ACG_OK;
    for (int i = 0; i < job->launches && job->status == ACG_OK; i++) {
        job->status = tc_add(job->s, job->k, job->y, 0, job->y, 0, N, 1.0f);
    }
    return NULL;
}

/* Two threads submitting to one stream: every launch runs exactly once (adds of 1 commute). */
static void test_shared_stream(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    TC_OK(tc_fill(s, &f->t.k, f->y, 0, N, 0.0f));
    shared_stream_job jobs[2] = {{s, &f->t.k, f->y, 3000, ACG_OK},
                                 {s, &f->t.k, f->y, 3000, ACG_OK}};
    tc_run_threads(2, add_ones, jobs, sizeof jobs[0]);
    for (int i = 0; i < 2; i++) {
        TC_OK(jobs[i].status);
    }
    TC_EXPECT_FLOATS(s, f->y, N, 6000.0f);
}

typedef struct private_job {
    acg_stream *s;
    acg_buffer *y;
    const tc_kernels *k;
    int seed;
    acg_status status; /* of the first failing call */
    int equal;
} private_job;

/* Each thread captures and replays its own graph on its own stream while the others do too.
 * Buffers come from the main thread: an allocation during any capture on the device would
 * invalidate the captures in flight, by design. */
static void *capture_and_replay(void *arg) {
    private_job *job = arg;
    acg_graph *g = NULL;
    float got[N], want[N];
    acg_status st = tc_fill(job->s, job->k, job->y, 0, N, (float)job->seed);
    if (st == ACG_OK) {
        st = acg_stream_begin_capture(job->s, NULL);
    }
    for (int i = 0; i < 16 && st == ACG_OK; i++) {
        st = tc_add(job->s, job->k, job->y, 0, job->y, 0, N, 0.5f);
    }
    if (st == ACG_OK) {
        st = acg_stream_end_capture(job->s, &g);
    }
    for (int r = 0; r < 200 && st == ACG_OK; r++) {
        st = acg_graph_launch(g, job->s);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(job->s, got, job->y, 0, sizeof got);
    }
    job->status = st;
    tc_splat(want, N, (float)job->seed + 200 * 16 * 0.5f);
    job->equal = st == ACG_OK && memcmp(got, want, sizeof got) == 0;
    acg_graph_destroy(g);
    return NULL;
}

static void test_parallel_captures(void **state) {
    tc_fixture *f = *state;
    tc_need_graphs(f->dev, f->s);
    enum { THREADS = 4 };
    private_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (private_job){
            tc_stream(f->dev), tc_buffer(f->dev, N * sizeof(float)), &f->k, i * 100, ACG_OK, 0};
    }
    tc_run_threads(THREADS, capture_and_replay, jobs, sizeof jobs[0]);
    for (int i = 0; i < THREADS; i++) {
        TC_OK(jobs[i].status);
        assert_true(jobs[i].equal);
        TC_OK(acg_buffer_free(jobs[i].y));
        TC_OK(acg_stream_destroy(jobs[i].s));
    }
}

/* Two streams hand one buffer back and forth through events 500 times each way: every step
 * sees the previous one's result, so the final value counts all of them. */
static void test_event_ping_pong(void **state) {
    fx *f = *state;
    acg_stream *a = f->t.s, *b = f->b;
    const tc_kernels *k = &f->t.k;
    acg_event *ea = tc_event(f->t.dev), *eb = tc_event(f->t.dev);
    TC_OK(tc_fill(a, k, f->y, 0, N, 0.0f));
    for (int i = 0; i < 500; i++) {
        /* y = 2y + 1 on a, then y = y + 1 on b: order matters, so a lost edge shows. */
        TC_OK(tc_axpy(a, k, f->y, 0, f->y, 0, N, 1.0f));
        TC_OK(tc_add(a, k, f->y, 0, f->y, 0, N, 1.0f));
        TC_OK(acg_event_record(ea, a));
        TC_OK(acg_stream_wait_event(b, ea));
        TC_OK(tc_add(b, k, f->y, 0, f->y, 0, N, -1.0f));
        TC_OK(acg_event_record(eb, b));
        TC_OK(acg_stream_wait_event(a, eb));
    }
    TC_OK(acg_event_synchronize(eb));
    /* In order, each round maps 0 to (2*0 + 1) - 1 = 0; a round whose -1 ran first would give
     * 2*(-1) + 1 = -1, a fixed point that the check sees. */
    TC_EXPECT_FLOATS(a, f->y, N, 0.0f);
    /* From 1, y = 2y + 1 twenty times: any reordering changes the value. */
    TC_OK(tc_fill(a, k, f->y, 0, N, 1.0f));
    for (int i = 0; i < 20; i++) {
        TC_OK(tc_axpy(a, k, f->y, 0, f->y, 0, N, 1.0f)); /* y = 2y */
        TC_OK(acg_event_record(ea, a));
        TC_OK(acg_stream_wait_event(b, ea));
        TC_OK(tc_add(b, k, f->y, 0, f->y, 0, N, 1.0f)); /* y = y + 1 */
        TC_OK(acg_event_record(eb, b));
        TC_OK(acg_stream_wait_event(a, eb));
    }
    TC_OK(acg_stream_synchronize(a));
    TC_OK(acg_stream_synchronize(b));
    float v = 1.0f;
    for (int i = 0; i < 20; i++) {
        v = 2.0f * v + 1.0f;
    }
    TC_EXPECT_FLOATS(a, f->y, N, v);
    TC_OK(acg_event_destroy(ea));
    TC_OK(acg_event_destroy(eb));
}

/* Two graphs of one pool use the same scratch memory; replayed alternately on two streams
 * with no user synchronization, the core must still keep them from overlapping. */
static void test_pool_orders_replays_across_streams(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    acg_graph_pool *pool = tc_pool(f->t.dev);
    acg_buffer *outs[2] = {f->x, f->y};
    acg_stream *streams[2] = {f->t.s, f->b};
    acg_graph *g[2];
    for (int i = 0; i < 2; i++) {
        acg_buffer *scratch;
        TC_OK(acg_stream_begin_capture(streams[i], pool));
        TC_OK(acg_stream_alloc(streams[i], N * sizeof(float), &scratch));
        /* scratch = i + 1, then 64 times scratch += 1, then out += scratch */
        TC_OK(tc_fill(streams[i], &f->t.k, scratch, 0, N, (float)(i + 1)));
        for (int j = 0; j < 64; j++) {
            TC_OK(tc_add(streams[i], &f->t.k, scratch, 0, scratch, 0, N, 1.0f));
        }
        TC_OK(tc_axpy(streams[i], &f->t.k, outs[i], 0, scratch, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(streams[i], &g[i]));
    }
    TC_OK(tc_fill(f->t.s, &f->t.k, outs[0], 0, N, 0.0f));
    TC_OK(tc_fill(f->t.s, &f->t.k, outs[1], 0, N, 0.0f));
    TC_OK(acg_stream_synchronize(f->t.s));
    for (int r = 0; r < 300; r++) {
        TC_OK(acg_graph_launch(g[0], streams[0]));
        TC_OK(acg_graph_launch(g[1], streams[1]));
    }
    TC_OK(acg_stream_synchronize(streams[0]));
    TC_OK(acg_stream_synchronize(streams[1]));
    TC_EXPECT_FLOATS(f->t.s, outs[0], N, 300.0f * 65.0f);
    TC_EXPECT_FLOATS(f->t.s, outs[1], N, 300.0f * 66.0f);
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_graph_destroy(g[i]));
    }
    TC_OK(acg_graph_pool_destroy(pool));
}

/* An event outlives the stream it was recorded on, and a queued wait outlives the event. The
 * streams recorded on are the case's own, destroyed while the fixture's stream b waits. */
static void test_lifetimes_across_streams(void **state) {
    fx *f = *state;
    const tc_kernels *k = &f->t.k;
    acg_stream *a = tc_stream(f->t.dev);
    acg_event *e = tc_event(f->t.dev);
    TC_OK(tc_fill(a, k, f->y, 0, N, 3.0f));
    for (int i = 0; i < 200; i++) {
        TC_OK(tc_add(a, k, f->y, 0, f->y, 0, N, 1.0f));
    }
    TC_OK(acg_event_record(e, a));
    TC_OK(acg_stream_wait_event(f->b, e));
    TC_OK(acg_event_destroy(e));
    TC_OK(tc_add(f->b, k, f->y, 0, f->y, 0, N, 1.0f));
    TC_OK(acg_stream_destroy(a));
    TC_EXPECT_FLOATS(f->b, f->y, N, 204.0f);

    e = tc_event(f->t.dev);
    a = tc_stream(f->t.dev);
    TC_OK(tc_add(a, k, f->y, 0, f->y, 0, N, 1.0f));
    TC_OK(acg_event_record(e, a));
    TC_OK(acg_stream_destroy(a));
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));
    TC_OK(acg_event_destroy(e));
}

#define T(fn) TC_FIXTURE2_CASE(fn, N * sizeof(float))
static const struct CMUnitTest tests[] = {
    T(test_shared_stream),
    TC_FIXTURE_CASE(test_parallel_captures),
    T(test_event_ping_pong),
    T(test_pool_orders_replays_across_streams),
    T(test_lifetimes_across_streams),
};
#undef T
TC_MAIN("test_concurrency", tests)
