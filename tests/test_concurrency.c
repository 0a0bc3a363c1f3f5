/*
 * test_concurrency.c — streams used from several threads at once, cross-stream ordering, and
 * the ordering the core imposes on graphs that share a pool. Runs under ThreadSanitizer in CI.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"

#define N 64

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
    (void)state;
    acg_device *dev = tc_open();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *s = tc_stream(dev);
    acg_buffer *y = tc_buffer(dev, N * sizeof(float));
    TC_OK(tc_fill(s, &k, y, 0, N, 0.0f));
    shared_stream_job jobs[2] = {{s, &k, y, 3000, ACG_OK}, {s, &k, y, 3000, ACG_OK}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, add_ones, &jobs[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        TC_OK(jobs[i].status);
    }
    float got[N], want[N];
    tc_download(s, got, y, sizeof got);
    tc_splat(want, N, 6000.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
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
    (void)state;
    acg_device *dev = tc_open();
    acg_stream *probe = tc_stream(dev);
    bool graphs = tc_has_graphs(dev, probe);
    TC_OK(acg_stream_destroy(probe));
    if (!graphs) {
        tc_close(dev);
        tc_skip("no graphs");
    }
    tc_kernels k;
    tc_kernels_get(dev, &k);
    enum { THREADS = 4 };
    private_job jobs[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (private_job){
            tc_stream(dev), tc_buffer(dev, N * sizeof(float)), &k, i * 100, ACG_OK, 0};
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, capture_and_replay, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    for (int i = 0; i < THREADS; i++) {
        TC_OK(jobs[i].status);
        assert_true(jobs[i].equal);
        TC_OK(acg_buffer_free(jobs[i].y));
        TC_OK(acg_stream_destroy(jobs[i].s));
    }
    tc_close(dev);
}

/* Two streams hand one buffer back and forth through events 500 times each way: every step
 * sees the previous one's result, so the final value counts all of them. */
static void test_event_ping_pong(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *a = tc_stream(dev), *b = tc_stream(dev);
    acg_event *ea = tc_event(dev), *eb = tc_event(dev);
    acg_buffer *y = tc_buffer(dev, N * sizeof(float));
    TC_OK(tc_fill(a, &k, y, 0, N, 0.0f));
    for (int i = 0; i < 500; i++) {
        /* y = 2y + 1 on a, then y = y + 1 on b: order matters, so a lost edge shows. */
        TC_OK(tc_axpy(a, &k, y, 0, y, 0, N, 1.0f));
        TC_OK(tc_add(a, &k, y, 0, y, 0, N, 1.0f));
        TC_OK(acg_event_record(ea, a));
        TC_OK(acg_stream_wait_event(b, ea));
        TC_OK(tc_add(b, &k, y, 0, y, 0, N, -1.0f));
        TC_OK(acg_event_record(eb, b));
        TC_OK(acg_stream_wait_event(a, eb));
    }
    TC_OK(acg_event_synchronize(eb));
    float got[N], want[N];
    tc_download(a, got, y, sizeof got);
    /* In order, each round maps 0 to (2*0 + 1) - 1 = 0; a round whose -1 ran first would give
     * 2*(-1) + 1 = -1, a fixed point that the check sees. */
    tc_splat(want, N, 0.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    /* From 1, y = 2y + 1 twenty times: any reordering changes the value. */
    TC_OK(tc_fill(a, &k, y, 0, N, 1.0f));
    for (int i = 0; i < 20; i++) {
        TC_OK(tc_axpy(a, &k, y, 0, y, 0, N, 1.0f)); /* y = 2y */
        TC_OK(acg_event_record(ea, a));
        TC_OK(acg_stream_wait_event(b, ea));
        TC_OK(tc_add(b, &k, y, 0, y, 0, N, 1.0f)); /* y = y + 1 */
        TC_OK(acg_event_record(eb, b));
        TC_OK(acg_stream_wait_event(a, eb));
    }
    TC_OK(acg_stream_synchronize(a));
    TC_OK(acg_stream_synchronize(b));
    tc_download(a, got, y, sizeof got);
    float v = 1.0f;
    for (int i = 0; i < 20; i++) {
        v = 2.0f * v + 1.0f;
    }
    tc_splat(want, N, v);
    TC_BYTES_EQUAL(want, got, sizeof got);
    TC_OK(acg_event_destroy(ea));
    TC_OK(acg_event_destroy(eb));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_stream_destroy(a));
    TC_OK(acg_stream_destroy(b));
    tc_close(dev);
}

/* Two graphs of one pool use the same scratch memory; replayed alternately on two streams
 * with no user synchronization, the core must still keep them from overlapping. */
static void test_pool_orders_replays_across_streams(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *s1 = tc_stream(dev), *s2 = tc_stream(dev);
    if (!tc_has_graphs(dev, s1)) {
        TC_OK(acg_stream_destroy(s1));
        TC_OK(acg_stream_destroy(s2));
        tc_close(dev);
        tc_skip("no graphs");
    }
    acg_graph_pool *pool = tc_pool(dev);
    acg_buffer *out1 = tc_buffer(dev, N * sizeof(float));
    acg_buffer *out2 = tc_buffer(dev, N * sizeof(float));
    acg_graph *g[2];
    acg_buffer *outs[2] = {out1, out2};
    acg_stream *streams[2] = {s1, s2};
    for (int i = 0; i < 2; i++) {
        acg_buffer *scratch;
        TC_OK(acg_stream_begin_capture(streams[i], pool));
        TC_OK(acg_stream_alloc(streams[i], N * sizeof(float), &scratch));
        /* scratch = i + 1, then 64 times scratch += 1, then out += scratch */
        TC_OK(tc_fill(streams[i], &k, scratch, 0, N, (float)(i + 1)));
        for (int j = 0; j < 64; j++) {
            TC_OK(tc_add(streams[i], &k, scratch, 0, scratch, 0, N, 1.0f));
        }
        TC_OK(tc_axpy(streams[i], &k, outs[i], 0, scratch, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(streams[i], &g[i]));
    }
    TC_OK(tc_fill(s1, &k, out1, 0, N, 0.0f));
    TC_OK(tc_fill(s1, &k, out2, 0, N, 0.0f));
    TC_OK(acg_stream_synchronize(s1));
    for (int r = 0; r < 300; r++) {
        TC_OK(acg_graph_launch(g[0], s1));
        TC_OK(acg_graph_launch(g[1], s2));
    }
    TC_OK(acg_stream_synchronize(s1));
    TC_OK(acg_stream_synchronize(s2));
    float got[N], want[N];
    tc_download(s1, got, out1, sizeof got);
    tc_splat(want, N, 300.0f * 65.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    tc_download(s1, got, out2, sizeof got);
    tc_splat(want, N, 300.0f * 66.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_graph_destroy(g[i]));
    }
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_buffer_free(out1));
    TC_OK(acg_buffer_free(out2));
    TC_OK(acg_stream_destroy(s1));
    TC_OK(acg_stream_destroy(s2));
    tc_close(dev);
}

/* An event outlives the stream it was recorded on, and a queued wait outlives the event. */
static void test_lifetimes_across_streams(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *a = tc_stream(dev), *b = tc_stream(dev);
    acg_event *e = tc_event(dev);
    acg_buffer *y = tc_buffer(dev, N * sizeof(float));
    TC_OK(tc_fill(a, &k, y, 0, N, 3.0f));
    for (int i = 0; i < 200; i++) {
        TC_OK(tc_add(a, &k, y, 0, y, 0, N, 1.0f));
    }
    TC_OK(acg_event_record(e, a));
    TC_OK(acg_stream_wait_event(b, e));
    TC_OK(acg_event_destroy(e));
    TC_OK(tc_add(b, &k, y, 0, y, 0, N, 1.0f));
    TC_OK(acg_stream_destroy(a));
    float got[N], want[N];
    tc_download(b, got, y, sizeof got);
    tc_splat(want, N, 204.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);

    e = tc_event(dev);
    a = tc_stream(dev);
    TC_OK(tc_add(a, &k, y, 0, y, 0, N, 1.0f));
    TC_OK(acg_event_record(e, a));
    TC_OK(acg_stream_destroy(a));
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_stream_destroy(b));
    tc_close(dev);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_shared_stream),
    cmocka_unit_test(test_parallel_captures),
    cmocka_unit_test(test_event_ping_pong),
    cmocka_unit_test(test_pool_orders_replays_across_streams),
    cmocka_unit_test(test_lifetimes_across_streams),
};
TC_MAIN("test_concurrency", tests)
