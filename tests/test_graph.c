/* test_graph.c — capture and replay: replay equals eager bit for bit, update, pools, scratch,
 * graph descriptions, and the lifetime rules of what a graph references. */
#include "common.h"
#include "core/acg-impl.h"

#include <stdlib.h>
#include <string.h>

enum { N = 4096 };
#define NB ((size_t)N * sizeof(float))

typedef struct fx {
    acg_device *dev;
    acg_stream *a, *b;
    acg_graph_pool *pool;
    tc_kernels k;
    acg_buffer *x, *y, *z, *w; /* N floats each */
    float *pin_in, *pin_out;   /* N floats each, pinned */
    acg_event *e1, *e2;
    /* knobs the work functions read, so two captures can differ in arguments only */
    float scalar;
    acg_buffer *out;
    bool extra_kernel;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->dev = tc_open();
    f->a = tc_stream(f->dev);
    f->b = tc_stream(f->dev);
    f->pool = tc_pool(f->dev);
    tc_kernels_get(f->dev, &f->k);
    f->x = tc_buffer(f->dev, NB);
    f->y = tc_buffer(f->dev, NB);
    f->z = tc_buffer(f->dev, NB);
    f->w = tc_buffer(f->dev, NB);
    f->pin_in = tc_pinned(f->dev, NB);
    f->pin_out = tc_pinned(f->dev, NB);
    f->e1 = tc_event(f->dev);
    f->e2 = tc_event(f->dev);
    f->scalar = 1.0f;
    f->out = f->z;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_event_destroy(f->e1));
    TC_OK(acg_event_destroy(f->e2));
    TC_OK(acg_pinned_free(f->pin_in));
    TC_OK(acg_pinned_free(f->pin_out));
    TC_OK(acg_buffer_free(f->x));
    TC_OK(acg_buffer_free(f->y));
    TC_OK(acg_buffer_free(f->z));
    TC_OK(acg_buffer_free(f->w));
    TC_OK(acg_graph_pool_destroy(f->pool));
    TC_OK(acg_stream_destroy(f->a));
    TC_OK(acg_stream_destroy(f->b));
    tc_close(f->dev);
    free(f);
    return 0;
}

/* ---- work sequences ----------------------------------------------------------------------- */

#define TRY(call)                                                                                  \
    do {                                                                                           \
        acg_status st_ = (call);                                                                   \
        if (st_ != ACG_OK) {                                                                       \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

/* (a) a chain of kernels on one stream; the result lands in f->out. */
static acg_status work_chain(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    TRY(tc_fill(a, &f->k, f->x, 0, N, 1.25f));         /* x = 1.25 */
    TRY(tc_add(a, &f->k, f->y, 0, f->x, 0, N, 0.5f));  /* y = 1.75 */
    TRY(tc_axpy(a, &f->k, f->y, 0, f->x, 0, N, 1.5f)); /* y = 3.625 */
    TRY(tc_copy(a, &f->k, f->out, 0, f->y, 0, N));     /* out = 3.625 */
    TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, f->scalar));
    if (f->extra_kernel) {
        TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, 1.0f));
    }
    return ACG_OK;
}

static void chain_reference(float *want, float scalar) { tc_splat(want, N, 3.625f + scalar); }

/* (b) fork/join: b forks from a at e1, works, and a joins it at e2. */
static acg_status work_fork_join(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    TRY(tc_fill(a, &f->k, f->x, 0, N, 2.0f)); /* x = 2 */
    TRY(acg_event_record(f->e1, a));
    TRY(acg_stream_wait_event(b, f->e1));
    TRY(tc_add(b, &f->k, f->y, 0, f->x, 0, N, 3.0f)); /* y = 5 (on b) */
    TRY(acg_event_record(f->e2, b));
    TRY(tc_add(a, &f->k, f->w, 0, f->x, 0, N, 1.0f)); /* w = 3 (on a, concurrently) */
    TRY(acg_stream_wait_event(a, f->e2));
    TRY(tc_axpy(a, &f->k, f->w, 0, f->y, 0, N, 0.5f)); /* w = 5.5 */
    return ACG_OK;
}

/* (c) copies: h2d from pinned, d2d, fill, a kernel, d2h into pinned. */
static acg_status work_copies(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    uint32_t one;
    float v = 1.0f;
    memcpy(&one, &v, 4);
    TRY(acg_copy_h2d(a, f->x, 0, f->pin_in, NB));
    TRY(acg_copy_d2d(a, f->y, 0, f->x, 0, NB));
    TRY(acg_fill(a, f->z, 0, NB, one, 4));
    TRY(tc_axpy(a, &f->k, f->z, 0, f->y, 0, N, 2.0f)); /* z = 2 * in + 1 */
    TRY(acg_copy_d2h(a, f->pin_out, f->z, 0, NB));
    return ACG_OK;
}

static void copies_reference(const float *in, float *want) {
    for (size_t i = 0; i < N; i++) {
        want[i] = 2.0f * in[i] + 1.0f;
    }
}

/* Poisons every device buffer of the fixture and the pinned output. */
static void poison_all(fx *f) {
    tc_poison(f->a, f->x);
    tc_poison(f->a, f->y);
    tc_poison(f->a, f->z);
    tc_poison(f->a, f->w);
    memset(f->pin_out, 0xee, NB);
}

/* A case that needs graphs, or captures over two streams, checks on a device without them that
 * it says so and refuses them, and ends there, skipped. Past this point the case holds nothing
 * but the fixture's objects. */
#define NEED_GRAPHS(f)                                                                             \
    do {                                                                                           \
        if (!tc_has_graphs((f)->dev, (f)->a)) {                                                    \
            tc_skip("no graphs");                                                                  \
        }                                                                                          \
    } while (0)
#define NEED_MULTI_STREAM_CAPTURE(f)                                                               \
    do {                                                                                           \
        NEED_GRAPHS(f);                                                                            \
        if (!tc_has_multi_stream_capture((f)->dev, (f)->a, (f)->b, (f)->e1)) {                     \
            tc_skip("no multi-stream capture");                                                    \
        }                                                                                          \
    } while (0)

/* Captured copies from and to pinned memory need pinned memory (else they are pageable). */
#define NEED_PINNED(f)                                                                             \
    do {                                                                                           \
        if (!tc_has_pinned_memory((f)->dev)) {                                                     \
            tc_skip("no pinned memory");                                                           \
        }                                                                                          \
    } while (0)

static acg_graph *capture(fx *f, tc_work_fn fn) {
    acg_graph *g = NULL;
    TC_OK(tc_capture(fn, f, f->a, f->b, f->pool, &g));
    assert_non_null(g);
    return g;
}

/* ---- replay equals eager ------------------------------------------------------------------ */

/* (a) A captured kernel chain replays to the eager result, bit for bit, replay after replay. */
static void test_replay_chain(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    float eager[N], replay[N], want[N];
    poison_all(f);
    TC_OK(tc_run_eager(work_chain, f, f->a, f->b, f->z, NB, eager));
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(eager, want, NB);

    acg_graph *g = capture(f, work_chain);
    assert_ptr_equal(acg_graph_get_device(g), f->dev);
    for (int i = 0; i < 3; i++) {
        poison_all(f);
        TC_OK(tc_replay(g, f->a, f->z, NB, replay));
        TC_BYTES_EQUAL(replay, eager, NB);
    }
    /* Replay on another stream of the device works the same. */
    poison_all(f);
    TC_OK(tc_replay(g, f->b, f->z, NB, replay));
    TC_BYTES_EQUAL(replay, eager, NB);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_destroy(NULL));
}

/* Capture records work instead of running it: nothing is written until the graph replays. */
static void test_capture_does_not_run(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    poison_all(f);
    acg_graph *g = capture(f, work_chain);
    float back[N], replay[N];
    uint32_t poison = 0xdeadbeefu;
    tc_download(f->a, back, f->z, NB);
    for (size_t i = 0; i < N; i++) {
        assert_memory_equal(&back[i], &poison, 4);
    }
    TC_OK(tc_replay(g, f->a, f->z, NB, replay));
    float want[N];
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g));
}

/* (b) A fork/join capture over two streams replays to the eager result. */
static void test_replay_fork_join(void **state) {
    fx *f = *state;
    NEED_MULTI_STREAM_CAPTURE(f);
    float eager[N], replay[N], want[N];
    poison_all(f);
    TC_OK(tc_run_eager(work_fork_join, f, f->a, f->b, f->w, NB, eager));
    tc_splat(want, N, 5.5f);
    TC_BYTES_EQUAL(eager, want, NB);

    acg_graph *g = capture(f, work_fork_join);
    acg_capture_state cs = ACG_CAPTURE_ACTIVE;
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    for (int i = 0; i < 3; i++) {
        poison_all(f);
        TC_OK(tc_replay(g, f->a, f->w, NB, replay));
        TC_BYTES_EQUAL(replay, eager, NB);
    }
    TC_OK(acg_graph_destroy(g));
}

/* (c) Copies from and to pinned memory, d2d and fill replay to the eager result; a replay
 * reads the pinned input as it is at replay time. */
static void test_replay_copies(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    NEED_PINNED(f);
    float eager[N], want[N];
    tc_fill_floats(f->pin_in, N, 21);
    poison_all(f);
    TC_OK(work_copies(f, f->a, f->b));
    TC_OK(acg_stream_synchronize(f->a));
    memcpy(eager, f->pin_out, NB);
    copies_reference(f->pin_in, want);
    TC_BYTES_EQUAL(eager, want, NB);

    acg_graph *g = capture(f, work_copies);
    poison_all(f);
    TC_OK(tc_replay(g, f->a, NULL, 0, NULL));
    TC_BYTES_EQUAL(f->pin_out, eager, NB);

    /* The host rewrites the pinned input in place; the next replay sees it. */
    tc_fill_floats(f->pin_in, N, 22);
    copies_reference(f->pin_in, want);
    poison_all(f);
    TC_OK(tc_replay(g, f->a, NULL, 0, NULL));
    TC_BYTES_EQUAL(f->pin_out, want, NB);
    TC_OK(acg_graph_destroy(g));
}

/* ---- graph update ------------------------------------------------------------------------- */

/* acg_graph_update moves new scalars and buffers into a graph of the same topology; `from`
 * stays valid and unchanged. */
static void test_graph_update(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    float replay[N], want[N];
    f->scalar = 1.0f;
    acg_graph *g1 = capture(f, work_chain);
    f->scalar = 7.0f;
    acg_graph *g2 = capture(f, work_chain);
    f->scalar = -2.0f;
    f->out = f->w;
    acg_graph *g3 = capture(f, work_chain);
    f->out = f->z;

    poison_all(f);
    TC_OK(tc_replay(g1, f->a, f->z, NB, replay));
    chain_reference(want, 1.0f);
    TC_BYTES_EQUAL(replay, want, NB);

    const bool upd = tc_has_graph_update(g1, g2);
    if (upd) {
        TC_OK(acg_graph_update(g1, g2));
        poison_all(f);
        TC_OK(tc_replay(g1, f->a, f->z, NB, replay));
        chain_reference(want, 7.0f);
        TC_BYTES_EQUAL(replay, want, NB);
        poison_all(f);
        TC_OK(tc_replay(g2, f->a, f->z, NB, replay)); /* from is unchanged */
        TC_BYTES_EQUAL(replay, want, NB);

        /* A new output buffer: g1 now writes w, and leaves z alone. */
        TC_OK(acg_graph_update(g1, g3));
        poison_all(f);
        TC_OK(tc_replay(g1, f->a, f->w, NB, replay));
        chain_reference(want, -2.0f);
        TC_BYTES_EQUAL(replay, want, NB);
        float zback[N];
        uint32_t poison = 0xdeadbeefu;
        tc_download(f->a, zback, f->z, NB);
        assert_memory_equal(&zback[0], &poison, 4);
        assert_memory_equal(&zback[N - 1], &poison, 4);
    } else {
        /* Refused updates change nothing: each graph replays what it captured. */
        TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update(g1, g3));
        poison_all(f);
        TC_OK(tc_replay(g1, f->a, f->z, NB, replay));
        chain_reference(want, 1.0f);
        TC_BYTES_EQUAL(replay, want, NB);
        poison_all(f);
        TC_OK(tc_replay(g2, f->a, f->z, NB, replay));
        chain_reference(want, 7.0f);
        TC_BYTES_EQUAL(replay, want, NB);
        poison_all(f);
        TC_OK(tc_replay(g3, f->a, f->w, NB, replay));
        chain_reference(want, -2.0f);
        TC_BYTES_EQUAL(replay, want, NB);
    }

    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update(NULL, g2));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update(g1, NULL));
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g2));
    TC_OK(acg_graph_destroy(g3));
    if (!upd) {
        tc_skip("no graph update: checked only that refused updates change nothing");
    }
}

/* Graphs of different topology refuse to update each other, and the target keeps working. */
static void test_graph_update_topology_mismatch(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    NEED_PINNED(f);
    float replay[N], want[N];
    acg_graph *chain = capture(f, work_chain);
    f->extra_kernel = true;
    acg_graph *longer = capture(f, work_chain);
    f->extra_kernel = false;
    /* Without multi-stream capture, the fork/join graph's place is taken by another chain of
     * different topology. */
    acg_graph *fj = NULL;
    if (tc_has_multi_stream_capture(f->dev, f->a, f->b, f->e1)) {
        fj = capture(f, work_fork_join);
    } else {
        f->extra_kernel = true;
        fj = capture(f, work_copies);
        f->extra_kernel = false;
    }
    acg_graph *copies = capture(f, work_copies);

    /* Without graph update every update is refused as unsupported instead. */
    bool upd = tc_has_graph_update(chain, longer);
    acg_status want_st = upd ? ACG_ERR_TOPOLOGY_MISMATCH : ACG_ERR_UNSUPPORTED;
    tc_expect_(want_st, acg_graph_update(chain, longer), "acg_graph_update(chain, longer)",
               __FILE__, __LINE__);
    TC_LAST_ERROR_HAS("acg_graph_update");
    tc_expect_(want_st, acg_graph_update(longer, chain), "acg_graph_update(longer, chain)",
               __FILE__, __LINE__);
    tc_expect_(want_st, acg_graph_update(chain, fj), "acg_graph_update(chain, fj)", __FILE__,
               __LINE__);
    tc_expect_(want_st, acg_graph_update(chain, copies), "acg_graph_update(chain, copies)",
               __FILE__, __LINE__);
    tc_expect_(want_st, acg_graph_update(copies, chain), "acg_graph_update(copies, chain)",
               __FILE__, __LINE__);

    poison_all(f);
    TC_OK(tc_replay(chain, f->a, f->z, NB, replay));
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(chain));
    TC_OK(acg_graph_destroy(longer));
    TC_OK(acg_graph_destroy(fj));
    TC_OK(acg_graph_destroy(copies));
    if (!upd) {
        tc_skip("no graph update: every update refused as unsupported, no topology compared");
    }
}

/* ---- pools and scratch -------------------------------------------------------------------- */

typedef struct scratch_work {
    fx *f;
    float fill, add;
    acg_buffer *out;
    uint32_t n;
} scratch_work;

/* out = (scratch filled with fill) + add, through scratch from the capture's pool. */
static acg_status work_scratch(void *ctx, acg_stream *a, acg_stream *b) {
    scratch_work *sw = ctx;
    (void)b;
    acg_buffer *tmp = NULL;
    TRY(acg_stream_alloc(a, (size_t)sw->n * sizeof(float), &tmp));
    TRY(tc_fill(a, &sw->f->k, tmp, 0, sw->n, sw->fill));
    for (int i = 0; i < 4; i++) {
        TRY(tc_add(a, &sw->f->k, tmp, 0, tmp, 0, sw->n, 0.25f));
    }
    TRY(tc_add(a, &sw->f->k, sw->out, 0, tmp, 0, sw->n, sw->add));
    return ACG_OK;
}

/* Update carries scratch over: the graph updated from another keeps using its own scratch
 * (the other may die at once) and replays the other's arguments; scratch of another size is a
 * topology mismatch. */
static void test_graph_update_with_scratch(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    scratch_work w1 = {f, 1.0f, 0.5f, f->z, N}, w2 = {f, 6.0f, 2.0f, f->z, N};
    scratch_work small = {f, 1.0f, 0.5f, f->z, N / 2};
    acg_graph *g1 = NULL, *g2 = NULL, *g3 = NULL;
    TC_OK(tc_capture(work_scratch, &w1, f->a, f->b, f->pool, &g1));
    TC_OK(tc_capture(work_scratch, &w2, f->a, f->b, f->pool, &g2));
    TC_OK(tc_capture(work_scratch, &small, f->a, f->b, f->pool, &g3));
    if (!tc_has_graph_update(g1, g2)) {
        TC_OK(acg_graph_destroy(g1));
        TC_OK(acg_graph_destroy(g2));
        TC_OK(acg_graph_destroy(g3));
        tc_skip("no graph update");
    }
    TC_EXPECT(ERR_TOPOLOGY_MISMATCH, acg_graph_update(g1, g3));
    TC_LAST_ERROR_HAS("scratch");
    TC_OK(acg_graph_update(g1, g2));
    TC_OK(acg_graph_destroy(g2)); /* g1 must not depend on g2's scratch */
    float replay[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g1, f->a, f->z, NB, replay));
    tc_splat(want, N, 6.0f + 1.0f + 2.0f);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g3));
}

/* Two graphs sharing one pool's scratch, replayed in reverse order and then interleaved on two
 * streams without waits, each produce their own result: the pool orders their replays. */
static void test_two_graphs_one_pool(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    enum { M = 1 << 20 };
    acg_buffer *o1 = tc_buffer(f->dev, (size_t)M * sizeof(float));
    acg_buffer *o2 = tc_buffer(f->dev, (size_t)M * sizeof(float));
    scratch_work w1 = {f, 3.0f, 1.0f, o1, M}, w2 = {f, 5.0f, 2.0f, o2, M};
    acg_graph *g1 = NULL, *g2 = NULL;
    size_t bytes1 = 0, bytes2 = 0;
    TC_OK(tc_capture(work_scratch, &w1, f->a, f->b, f->pool, &g1));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &bytes1));
    TC_OK(tc_capture(work_scratch, &w2, f->a, f->b, f->pool, &g2));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &bytes2));
    assert_true(bytes1 >= (size_t)M * sizeof(float));
    assert_int_equal(bytes2, bytes1); /* the second graph reuses the first one's scratch */

    float *back = malloc((size_t)M * sizeof(float));
    float *want1 = malloc((size_t)M * sizeof(float));
    float *want2 = malloc((size_t)M * sizeof(float));
    tc_splat(want1, M, 3.0f + 1.0f + 1.0f);
    tc_splat(want2, M, 5.0f + 1.0f + 2.0f);

    tc_poison(f->a, o1);
    tc_poison(f->a, o2);
    TC_OK(tc_replay(g2, f->a, o2, (size_t)M * sizeof(float), back));
    TC_BYTES_EQUAL(back, want2, (size_t)M * sizeof(float));
    TC_OK(tc_replay(g1, f->a, o1, (size_t)M * sizeof(float), back));
    TC_BYTES_EQUAL(back, want1, (size_t)M * sizeof(float));

    for (int round = 0; round < 4; round++) {
        tc_poison(f->a, o1);
        tc_poison(f->a, o2);
        TC_OK(acg_graph_launch(round % 2 ? g1 : g2, f->a));
        TC_OK(acg_graph_launch(round % 2 ? g2 : g1, f->b));
        TC_OK(acg_stream_synchronize(f->a));
        TC_OK(acg_stream_synchronize(f->b));
        tc_download(f->a, back, o1, (size_t)M * sizeof(float));
        TC_BYTES_EQUAL(back, want1, (size_t)M * sizeof(float));
        tc_download(f->a, back, o2, (size_t)M * sizeof(float));
        TC_BYTES_EQUAL(back, want2, (size_t)M * sizeof(float));
    }
    free(back);
    free(want1);
    free(want2);
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g2));
    TC_OK(acg_buffer_free(o1));
    TC_OK(acg_buffer_free(o2));
}

/* A graph captured with pool NULL gets a private pool and replays correctly. */
static void test_private_pool(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    scratch_work w = {f, 1.0f, 0.5f, f->z, N};
    acg_graph *g = NULL;
    TC_OK(tc_capture(work_scratch, &w, f->a, f->b, NULL, &g));
    float replay[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g, f->a, f->z, NB, replay));
    tc_splat(want, N, 1.0f + 1.0f + 0.5f);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g));
}

/* Outside a capture acg_stream_alloc gives the stream's own memory, released in stream order
 * by acg_stream_free and by nothing else; it stays accounted until the work before the free
 * ran. */
static void test_stream_ordered_memory(void **state) {
    fx *f = *state;
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_stream_synchronize(f->a));
    TC_OK(acg_device_get_memory_stats(f->dev, &m0));
    acg_buffer *tmp = NULL;
    TC_OK(acg_stream_alloc(f->a, NB, &tmp));
    TC_OK(tc_fill(f->a, &f->k, tmp, 0, N, 4.0f));
    TC_OK(tc_add(f->a, &f->k, f->z, 0, tmp, 0, N, 1.0f));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_free(tmp));
    TC_LAST_ERROR_HAS("acg_stream_free");
    acg_buffer *view;
    TC_OK(acg_buffer_create_view(tmp, 0, 64, &view));
    TC_EXPECT(ERR_IN_USE, acg_stream_free(f->a, tmp)); /* a view still points into it */
    TC_OK(acg_buffer_free(view));
    TC_OK(acg_stream_free(f->a, tmp));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_free(f->a, tmp)); /* the handle died */
    TC_OK(acg_stream_synchronize(f->a));
    TC_OK(acg_device_get_memory_stats(f->dev, &m1));
    assert_int_equal(m1.bytes_in_use, m0.bytes_in_use);
    assert_int_equal(m1.allocations, m0.allocations + 1);
    float back[N], want[N];
    tc_download(f->a, back, f->z, NB);
    tc_splat(want, N, 5.0f);
    TC_BYTES_EQUAL(back, want, NB);
    /* Only acg_stream_alloc memory goes back through acg_stream_free. */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_free(f->a, f->z));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_free(NULL, f->z));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_alloc(f->a, 0, &tmp));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_get_capture_state(f->a, NULL));

    /* Inside a capture, freeing the stream's own memory would free outside the pool. */
    NEED_GRAPHS(f);
    TC_OK(acg_stream_alloc(f->a, NB, &tmp));
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_free(f->a, tmp));
    TC_LAST_ERROR_HAS("acg_stream_free");
    acg_graph *g = NULL;
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->a, &g));
    TC_OK(acg_stream_free(f->a, tmp));
    TC_OK(acg_stream_synchronize(f->a));
}

/* Scratch belongs to its graph: it cannot be freed by hand, and acg_stream_free of it is a
 * no-op, in the capture and after. */
static void test_scratch_rules(void **state) {
    fx *f = *state;
    acg_buffer *tmp = NULL;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_alloc(NULL, 64, &tmp));

    NEED_GRAPHS(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    tmp = NULL;
    TC_OK(acg_stream_alloc(f->a, NB, &tmp));
    assert_non_null(tmp);
    assert_int_equal(acg_buffer_get_size(tmp), NB);
    assert_ptr_equal(acg_buffer_get_device(tmp), f->dev);
    TC_OK(tc_fill(f->a, &f->k, tmp, 0, N, 4.0f));
    TC_OK(tc_copy(f->a, &f->k, f->z, 0, tmp, 0, N));
    TC_OK(acg_stream_free(f->a, tmp)); /* a no-op: the scratch stays with the graph */
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));

    TC_OK(acg_stream_free(f->a, tmp));
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(tmp));
    TC_LAST_ERROR_HAS("acg_buffer_free");
    float replay[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g, f->a, f->z, NB, replay));
    tc_splat(want, N, 4.0f);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g));
    /* Released with its graph: the handle is dead now. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_free(tmp));
}

/* Scratch is pool memory other graphs reuse and that dies with its graph: outside the capture
 * that allocated it (eagerly, or in another capture) it is refused, and the capture goes on. */
static void test_scratch_stays_in_its_capture(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_buffer *x = NULL;
    acg_graph *ga = NULL, *gb = NULL;
    TC_OK(acg_stream_begin_capture(f->a, NULL));
    TC_OK(acg_stream_alloc(f->a, NB, &x));
    TC_OK(tc_fill(f->a, &f->k, x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->a, &ga));
    TC_EXPECT(ERR_INVALID_ARGUMENT, tc_fill(f->a, &f->k, x, 0, N, 2.0f));
    TC_LAST_ERROR_HAS("scratch");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->a, x, 0, NB, 0, 4));
    float host[N];
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2h(f->a, host, x, 0, NB));
    TC_OK(acg_stream_begin_capture(f->a, NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, tc_fill(f->a, &f->k, x, 0, N, 2.0f));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2d(f->a, f->z, 0, x, 0, NB));
    acg_capture_state cs;
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    TC_OK(tc_fill(f->a, &f->k, f->z, 0, N, 3.0f));
    TC_OK(acg_stream_end_capture(f->a, &gb));
    TC_OK(acg_graph_destroy(ga));
    float replay[N], want[N];
    TC_OK(tc_replay(gb, f->a, f->z, NB, replay));
    tc_splat(want, N, 3.0f);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(gb));
}

/* A discarded graph's handle dies at once. Where the backend needs it (forced here through the
 * test hook), the graph itself stays parked in its pool, still holding what it references,
 * until the pool's next successful capture; a failed capture does not release it. */
static void test_discard(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg__device_set_retain_discarded(f->dev, false); /* first as most backends: destroyed */
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_add(f->a, &f->k, f->y, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_graph_discard(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_launch(g, f->a));
    assert_int_equal(acg__pool_parked_count(f->pool), 0);
    TC_OK(acg_graph_discard(NULL));

    acg__device_set_retain_discarded(f->dev, true);
    acg_buffer *held = tc_buffer(f->dev, NB);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_add(f->a, &f->k, held, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_graph_discard(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_destroy(g));
    assert_int_equal(acg__pool_parked_count(f->pool), 1);
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(held)); /* the parked graph still reads it */
    /* A failed capture releases nothing. */
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_synchronize(f->a));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->a, &g));
    assert_int_equal(acg__pool_parked_count(f->pool), 1);
    /* A successful one does. */
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_add(f->a, &f->k, f->y, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->a, &g));
    assert_int_equal(acg__pool_parked_count(f->pool), 0);
    TC_OK(acg_buffer_free(held));
    /* Parked graphs do not keep their pool from being destroyed. */
    held = tc_buffer(f->dev, NB);
    acg_graph_pool *pool = tc_pool(f->dev);
    acg_graph *h = NULL;
    TC_OK(acg_stream_begin_capture(f->a, pool));
    TC_OK(tc_add(f->a, &f->k, held, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->a, &h));
    TC_OK(acg_graph_discard(h));
    assert_int_equal(acg__pool_parked_count(pool), 1);
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_buffer_free(held));
    acg__device_set_retain_discarded(f->dev, false);
    TC_OK(acg_graph_destroy(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_discard((acg_graph *)f->x));
}

/* A pool refuses destroy while a graph captured into it lives or a capture into it runs. */
static void test_pool_destroy_in_use(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_graph_pool *pool = tc_pool(f->dev);
    size_t bytes = 1;
    TC_OK(acg_graph_pool_get_bytes(pool, &bytes));
    assert_int_equal(bytes, 0);

    TC_OK(acg_stream_begin_capture(f->a, pool));
    TC_EXPECT(ERR_IN_USE, acg_graph_pool_destroy(pool));
    TC_LAST_ERROR_HAS("acg_graph_pool_destroy");
    TC_OK(work_chain(f, f->a, f->b));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_EXPECT(ERR_IN_USE, acg_graph_pool_destroy(pool));
    float replay[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g, f->a, f->z, NB, replay));
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_graph_pool_destroy(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_pool_destroy(pool));
}

/* 10,000 replays hold pool memory and library allocations steady after the first ones. */
static void test_many_replays_stable(void **state) {
    (void)state;
    tc_alloc_install();
    acg_device *dev = tc_open();
    acg_stream *s = tc_stream(dev);
    if (!tc_has_graphs(dev, s)) {
        TC_OK(acg_stream_destroy(s));
        tc_close(dev);
        assert_int_equal(tc_alloc_live(), 0);
        tc_alloc_uninstall();
        tc_skip("no graphs");
    }
    acg_graph_pool *pool = tc_pool(dev);
    fx f;
    memset(&f, 0, sizeof f);
    f.dev = dev;
    tc_kernels_get(dev, &f.k);
    enum { M = 256 };
    acg_buffer *out = tc_buffer(dev, M * sizeof(float));
    scratch_work w = {&f, 2.0f, 3.0f, out, M};
    acg_graph *g = NULL;
    TC_OK(tc_capture(work_scratch, &w, s, NULL, pool, &g));
    for (int i = 0; i < 10; i++) {
        TC_OK(acg_graph_launch(g, s));
    }
    TC_OK(acg_stream_synchronize(s));
    size_t bytes0 = 0, bytes1 = 0;
    TC_OK(acg_graph_pool_get_bytes(pool, &bytes0));
    int64_t live0 = tc_alloc_live();
    for (int i = 0; i < 10000; i++) {
        TC_OK(acg_graph_launch(g, s));
        if (i % 1000 == 999) {
            TC_OK(acg_stream_synchronize(s));
            assert_int_equal(tc_alloc_live(), live0);
        }
    }
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_graph_pool_get_bytes(pool, &bytes1));
    assert_int_equal(bytes1, bytes0);
    assert_int_equal(tc_alloc_live(), live0);
    float back[M], want[M];
    tc_download(s, back, out, sizeof back);
    tc_splat(want, M, 2.0f + 1.0f + 3.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);

    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_buffer_free(out));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
}

/* ---- graph description -------------------------------------------------------------------- */

static bool has_buffer(const acg_node_info *n, const acg_buffer *b) {
    for (size_t i = 0; i < n->n_buffers; i++) {
        if (n->buffers[i] == b) {
            return true;
        }
    }
    return false;
}

static bool has_dep(const acg_node_info *n, uint32_t d) {
    for (size_t i = 0; i < n->n_deps; i++) {
        if (n->deps[i] == d) {
            return true;
        }
    }
    return false;
}

/* Nodes of a chain: kernels in order, each depending on the one before, with their buffers. */
static void test_describe_chain(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_graph *g = capture(f, work_chain);
    size_t n = 0;
    TC_OK(acg_graph_get_node_count(g, &n));
    assert_int_equal(n, 5);
    static const char *names[] = {"fill_f32", "add_scalar_f32", "axpy_f32", "copy_f32",
                                  "add_scalar_f32"};
    for (size_t i = 0; i < n; i++) {
        acg_node_info info;
        memset(&info, 0, sizeof info);
        TC_OK(acg_graph_get_node(g, i, &info));
        assert_int_equal(info.kind, ACG_NODE_KERNEL);
        assert_non_null(info.kernel);
        assert_string_equal(info.kernel, names[i]);
        assert_int_equal(info.size, 0);
        assert_null(info.host);
        if (i == 0) {
            assert_int_equal(info.n_deps, 0);
        } else {
            assert_int_equal(info.n_deps, 1);
            assert_int_equal(info.deps[0], i - 1);
        }
    }
    acg_node_info info;
    TC_OK(acg_graph_get_node(g, 0, &info));
    assert_int_equal(info.n_buffers, 1);
    assert_ptr_equal(info.buffers[0], f->x);
    TC_OK(acg_graph_get_node(g, 2, &info));
    assert_int_equal(info.n_buffers, 2);
    assert_true(has_buffer(&info, f->x) && has_buffer(&info, f->y));
    TC_OK(acg_graph_get_node(g, 3, &info));
    assert_true(has_buffer(&info, f->z) && has_buffer(&info, f->y));

    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_get_node_count(NULL, &n));
    TC_OK(acg_graph_destroy(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_get_node_count(g, &n));
    assert_null(acg_graph_get_device(g));
}

/* Nodes of a fork/join: the forked kernel and the parallel one depend on the fork point; the
 * join depends on both branches. */
static void test_describe_fork_join(void **state) {
    fx *f = *state;
    NEED_MULTI_STREAM_CAPTURE(f);
    acg_graph *g = capture(f, work_fork_join);
    size_t n = 0;
    TC_OK(acg_graph_get_node_count(g, &n));
    assert_int_equal(n, 4);
    acg_node_info info[4];
    for (size_t i = 0; i < 4; i++) {
        TC_OK(acg_graph_get_node(g, i, &info[i]));
        assert_int_equal(info[i].kind, ACG_NODE_KERNEL);
        for (size_t d = 0; d < info[i].n_deps; d++) {
            assert_true(info[i].deps[d] < i);
        }
    }
    assert_string_equal(info[0].kernel, "fill_f32");
    assert_int_equal(info[0].n_deps, 0);
    assert_string_equal(info[1].kernel, "add_scalar_f32"); /* y = x + 3 on b */
    assert_true(has_buffer(&info[1], f->y));
    assert_int_equal(info[1].n_deps, 1);
    assert_true(has_dep(&info[1], 0));
    assert_string_equal(info[2].kernel, "add_scalar_f32"); /* w = x + 1 on a */
    assert_true(has_buffer(&info[2], f->w));
    assert_int_equal(info[2].n_deps, 1);
    assert_true(has_dep(&info[2], 0));
    assert_string_equal(info[3].kernel, "axpy_f32");
    assert_int_equal(info[3].n_deps, 2);
    assert_true(has_dep(&info[3], 1) && has_dep(&info[3], 2));
    TC_OK(acg_graph_destroy(g));
}

/* Copy and fill nodes report kind, size, buffers and pinned host pointers. */
static void test_describe_copies(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    NEED_PINNED(f);
    acg_graph *g = capture(f, work_copies);
    size_t n = 0;
    TC_OK(acg_graph_get_node_count(g, &n));
    assert_int_equal(n, 5);
    acg_node_info in[5];
    for (size_t i = 0; i < 5; i++) {
        TC_OK(acg_graph_get_node(g, i, &in[i]));
    }
    assert_int_equal(in[0].kind, ACG_NODE_COPY_H2D);
    assert_int_equal(in[0].size, NB);
    assert_ptr_equal(in[0].host, f->pin_in);
    assert_null(in[0].kernel);
    assert_true(has_buffer(&in[0], f->x));
    assert_int_equal(in[1].kind, ACG_NODE_COPY_D2D);
    assert_int_equal(in[1].size, NB);
    assert_null(in[1].host);
    assert_true(has_buffer(&in[1], f->x) && has_buffer(&in[1], f->y));
    assert_int_equal(in[2].kind, ACG_NODE_FILL);
    assert_int_equal(in[2].size, NB);
    assert_true(has_buffer(&in[2], f->z));
    assert_int_equal(in[3].kind, ACG_NODE_KERNEL);
    assert_string_equal(in[3].kernel, "axpy_f32");
    assert_int_equal(in[4].kind, ACG_NODE_COPY_D2H);
    assert_int_equal(in[4].size, NB);
    assert_ptr_equal(in[4].host, f->pin_out);
    assert_true(has_buffer(&in[4], f->z));
    TC_OK(acg_graph_destroy(g));
}

/* ---- lifetimes and misuse ----------------------------------------------------------------- */

/* Buffers, views' parents and pinned memory a live graph references cannot be freed
 * (ACG_ERR_IN_USE naming the graph); after the graph is destroyed they can. */
static void test_free_referenced(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    NEED_PINNED(f);
    acg_buffer *extra = tc_buffer(f->dev, NB);
    float *pin = tc_pinned(f->dev, NB);
    acg_buffer *parent = tc_buffer(f->dev, 2 * NB);
    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(parent, NB, NB, &view));

    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(acg_copy_h2d(f->a, extra, 0, pin, NB));
    TC_OK(tc_copy(f->a, &f->k, view, 0, extra, 0, N));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));

    TC_EXPECT(ERR_IN_USE, acg_buffer_free(extra));
    TC_LAST_ERROR_HAS("graph");
    TC_EXPECT(ERR_IN_USE, acg_pinned_free(pin));
    TC_LAST_ERROR_HAS("graph");
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(view));
    TC_LAST_ERROR_HAS("graph");
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(parent));

    /* Everything is intact: a replay still works. */
    tc_fill_floats(pin, N, 5);
    TC_OK(tc_replay(g, f->a, NULL, 0, NULL));
    float back[N];
    TC_OK(acg_copy_d2h(f->a, back, parent, NB, NB));
    TC_BYTES_EQUAL(back, pin, NB);

    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(extra));
    TC_OK(acg_pinned_free(pin));
    TC_OK(acg_buffer_free(view));
    TC_OK(acg_buffer_free(parent));
}

/* Replay refuses dead graphs and streams of another device. */
static void test_launch_errors(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_graph *g = capture(f, work_chain);
    acg_device *d2 = tc_open();
    acg_stream *s2 = tc_stream(d2);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_launch(g, s2));
    TC_LAST_ERROR_HAS("acg_graph_launch");
    acg_device *cpu = tc_open_cpu(); /* a device of another backend, unless this is cpu */
    acg_stream *s3 = tc_stream(cpu);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_launch(g, s3));
    TC_OK(acg_stream_destroy(s3));
    tc_close(cpu);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_launch(NULL, f->a));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_launch(g, NULL));
    TC_OK(acg_stream_destroy(s2));
    tc_close(d2);
    TC_OK(acg_graph_destroy(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_launch(g, f->a));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_destroy(g));
}

/* Capture state transitions and their errors: end without begin, a second capture into a busy
 * pool, and the states of origin and forked streams. */
static void test_capture_state(void **state) {
    fx *f = *state;
    acg_capture_state cs = ACG_CAPTURE_INVALIDATED;
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    acg_graph *untouched = (acg_graph *)(uintptr_t)0x44, *g = untouched;
    TC_EXPECT(ERR_NOT_CAPTURING, acg_stream_end_capture(f->a, &g));
    TC_LAST_ERROR_HAS("acg_stream_end_capture");
    assert_ptr_equal(g, untouched);

    NEED_GRAPHS(f);
    acg_stream *c = tc_stream(f->dev);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    TC_EXPECT(ERR_IN_USE, acg_stream_begin_capture(c, f->pool));
    TC_LAST_ERROR_HAS("acg_stream_begin_capture");
    TC_OK(acg_stream_get_capture_state(c, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    TC_EXPECT(ERR_NOT_CAPTURING, acg_stream_end_capture(c, &g));

    /* The refused capture did not disturb the running one. */
    TC_OK(work_chain(f, f->a, f->b));
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    float replay[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g, f->a, f->z, NB, replay));
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(replay, want, NB);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_stream_destroy(c));

    /* A stream forked into a capture reports it as active. */
    NEED_MULTI_STREAM_CAPTURE(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(acg_event_record(f->e1, f->a));
    TC_OK(acg_stream_wait_event(f->b, f->e1));
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    TC_OK(tc_fill(f->b, &f->k, f->y, 0, N, 1.0f));
    TC_OK(acg_event_record(f->e2, f->b));
    TC_OK(acg_stream_wait_event(f->a, f->e2));
    g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    TC_OK(acg_graph_destroy(g));
}

/* A fork whose work never rejoins the origin ends with ACG_ERR_CAPTURE_UNJOINED; both streams
 * leave capture mode usable and the pool takes the next capture. */
static void test_unjoined_fork(void **state) {
    fx *f = *state;
    NEED_MULTI_STREAM_CAPTURE(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_fill(f->a, &f->k, f->x, 0, N, 1.0f));
    TC_OK(acg_event_record(f->e1, f->a));
    TC_OK(acg_stream_wait_event(f->b, f->e1));
    TC_OK(tc_add(f->b, &f->k, f->y, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_event_record(f->e2, f->b)); /* recorded, but a never waits on it */
    TC_OK(tc_add(f->a, &f->k, f->z, 0, f->x, 0, N, 2.0f));
    acg_graph *untouched = (acg_graph *)(uintptr_t)0x45, *g = untouched;
    TC_EXPECT(ERR_CAPTURE_UNJOINED, acg_stream_end_capture(f->a, &g));
    TC_LAST_ERROR_HAS("acg_stream_end_capture");
    assert_ptr_equal(g, untouched);

    acg_capture_state cs = ACG_CAPTURE_ACTIVE;
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    cs = ACG_CAPTURE_ACTIVE;
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);

    /* Both streams work eagerly. */
    float back[N], want[N];
    poison_all(f);
    TC_OK(tc_fill(f->a, &f->k, f->x, 0, N, 6.0f));
    TC_OK(acg_stream_synchronize(f->a));
    TC_OK(tc_add(f->b, &f->k, f->y, 0, f->x, 0, N, 0.5f));
    TC_OK(acg_stream_synchronize(f->b));
    tc_download(f->b, back, f->y, NB);
    tc_splat(want, N, 6.5f);
    TC_BYTES_EQUAL(back, want, NB);

    /* The pool accepts the next capture, which replays correctly. */
    acg_graph *ok = capture(f, work_fork_join);
    poison_all(f);
    TC_OK(tc_replay(ok, f->a, f->w, NB, back));
    tc_splat(want, N, 5.5f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(ok));
}

/* An update waits for the graph's pending replays: a replay queued before the update runs with
 * the old arguments. */
static void test_graph_update_waits_for_pending(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    enum { M = 1 << 21 };
    acg_buffer *big = tc_buffer(f->dev, (size_t)M * sizeof(float));
    acg_graph *g[2];
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_stream_begin_capture(f->a, f->pool));
        for (int r = 0; r < 6; r++) {
            TC_OK(tc_fill(f->a, &f->k, big, 0, M, 0.0f));
        }
        TC_OK(tc_fill(f->a, &f->k, f->z, 0, N, i == 0 ? 1.0f : 2.0f));
        TC_OK(acg_stream_end_capture(f->a, &g[i]));
    }
    poison_all(f);
    TC_OK(acg_graph_launch(g[0], f->a));
    bool upd = tc_has_graph_update(g[0], g[1]);
    if (upd) {
        TC_OK(acg_graph_update(g[0], g[1]));
    }
    TC_OK(acg_stream_synchronize(f->a));
    float back[N], want[N];
    tc_download(f->a, back, f->z, NB);
    tc_splat(want, N, 1.0f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(tc_replay(g[0], f->a, f->z, NB, back));
    tc_splat(want, N, upd ? 2.0f : 1.0f); /* a refused update changed nothing */
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g[0]));
    TC_OK(acg_graph_destroy(g[1]));
    TC_OK(acg_buffer_free(big));
    if (!upd) {
        tc_skip("no graph update: checked only that a refused update changes nothing");
    }
}

/* After an update the graph references the new buffers: they cannot be freed while it lives,
 * even once the graph they came from is gone. */
static void test_graph_update_moves_refs(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_buffer *fresh = tc_buffer(f->dev, NB);
    acg_graph *g1 = capture(f, work_chain);
    f->out = fresh;
    acg_graph *g2 = capture(f, work_chain);
    f->out = f->z;
    float back[N], want[N];
    chain_reference(want, f->scalar);
    if (!tc_has_graph_update(g1, g2)) {
        /* The refused update moved nothing: fresh is free once g2 is gone, g1 still writes z. */
        TC_OK(acg_graph_destroy(g2));
        TC_OK(acg_buffer_free(fresh));
        poison_all(f);
        TC_OK(tc_replay(g1, f->a, f->z, NB, back));
        TC_BYTES_EQUAL(back, want, NB);
        TC_OK(acg_graph_destroy(g1));
        tc_skip("no graph update: checked only that a refused update moves nothing");
    }
    TC_OK(acg_graph_update(g1, g2));
    TC_OK(acg_graph_destroy(g2));
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(fresh));
    TC_LAST_ERROR_HAS("graph");
    TC_OK(tc_replay(g1, f->a, fresh, NB, back));
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_buffer_free(fresh));
}

/* Destroying a graph waits for its pending replays (the replay finishes, its scratch stays
 * valid until then). */
static void test_graph_destroy_waits(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    enum { M = 1 << 21 };
    acg_buffer *out = tc_buffer(f->dev, (size_t)M * sizeof(float));
    scratch_work w = {f, 1.5f, 0.5f, out, M};
    acg_graph *g = NULL;
    TC_OK(tc_capture(work_scratch, &w, f->a, f->b, f->pool, &g));
    tc_poison(f->a, out);
    TC_OK(acg_graph_launch(g, f->a));
    TC_OK(acg_graph_destroy(g));
    float back[64], want[64];
    TC_OK(acg_copy_d2h(f->b, back, out, ((size_t)M - 64) * sizeof(float), sizeof back));
    tc_splat(want, 64, 1.5f + 1.0f + 0.5f);
    TC_BYTES_EQUAL(back, want, sizeof back);
    TC_OK(acg_buffer_free(out));
}

/* A pool's replays stay ordered after the stream of the previous replay is destroyed. */
static void test_pool_order_after_stream_destroy(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    enum { M = 1 << 20 };
    acg_buffer *o1 = tc_buffer(f->dev, (size_t)M * sizeof(float));
    acg_buffer *o2 = tc_buffer(f->dev, (size_t)M * sizeof(float));
    scratch_work w1 = {f, 3.0f, 1.0f, o1, M}, w2 = {f, 5.0f, 2.0f, o2, M};
    acg_graph *g1 = NULL, *g2 = NULL;
    TC_OK(tc_capture(work_scratch, &w1, f->a, f->b, f->pool, &g1));
    TC_OK(tc_capture(work_scratch, &w2, f->a, f->b, f->pool, &g2));
    acg_stream *tmp = tc_stream(f->dev);
    TC_OK(acg_graph_launch(g1, tmp));
    TC_OK(acg_stream_destroy(tmp));
    tmp = tc_stream(f->dev);
    TC_OK(acg_graph_launch(g2, tmp));
    TC_OK(acg_graph_launch(g1, f->b));
    TC_OK(acg_stream_synchronize(f->b));
    TC_OK(acg_stream_synchronize(tmp));
    float *back = malloc((size_t)M * sizeof(float));
    float *want = malloc((size_t)M * sizeof(float));
    tc_download(f->a, back, o1, (size_t)M * sizeof(float));
    tc_splat(want, M, 5.0f);
    TC_BYTES_EQUAL(back, want, (size_t)M * sizeof(float));
    tc_download(f->a, back, o2, (size_t)M * sizeof(float));
    tc_splat(want, M, 8.0f);
    TC_BYTES_EQUAL(back, want, (size_t)M * sizeof(float));
    free(back);
    free(want);
    TC_OK(acg_stream_destroy(tmp));
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g2));
    TC_OK(acg_buffer_free(o1));
    TC_OK(acg_buffer_free(o2));
}

/* Bad arguments inside a capture are refused with their own status and lose nothing: the
 * capture goes on and its graph replays correctly. */
static void test_bad_input_during_capture(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(work_chain(f, f->a, f->b));
    acg_buffer *untouched = (acg_buffer *)(uintptr_t)0x67, *tmp = untouched;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_alloc(f->a, 0, &tmp));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_get_capture_state(f->a, NULL));
    assert_ptr_equal(tmp, untouched);
    TC_EXPECT(ERR_OUT_OF_RANGE, tc_fill(f->a, &f->k, f->z, 4, N, 0.0f));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->a, f->z, 2, 8, 0, 4));
    acg_capture_state cs = ACG_CAPTURE_NONE;
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    float back[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(g, f->a, f->z, NB, back));
    chain_reference(want, f->scalar);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g));
}

/* A capture begun behind pending eager work replays after it, in stream order. */
static void test_capture_behind_eager_work(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    enum { M = 1 << 21 };
    acg_buffer *big = tc_buffer(f->dev, (size_t)M * sizeof(float));
    poison_all(f);
    for (int r = 0; r < 4; r++) {
        TC_OK(tc_fill(f->a, &f->k, big, 0, M, 1.0f));
    }
    TC_OK(tc_copy(f->a, &f->k, f->z, 0, big, 0, N)); /* z = 1, eagerly, still queued */
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_add(f->a, &f->k, f->z, 0, f->z, 0, N, 1.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    float back[N], want[N];
    TC_OK(tc_replay(g, f->a, f->z, NB, back));
    tc_splat(want, N, 2.0f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(big));
}

/* An event recorded in a capture that has ended no longer forks anything: waiting on it,
 * querying and synchronizing it are ordinary, successful calls. */
static void test_event_from_ended_capture(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_fill(f->a, &f->k, f->x, 0, N, 1.0f));
    TC_OK(acg_event_record(f->e1, f->a));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_stream_wait_event(f->b, f->e1));
    acg_capture_state cs = ACG_CAPTURE_ACTIVE;
    TC_OK(acg_stream_get_capture_state(f->b, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    TC_OK(acg_event_query(f->e1));
    TC_OK(acg_event_synchronize(f->e1));
    float back[N], want[N];
    TC_OK(tc_fill(f->b, &f->k, f->y, 0, N, 3.0f));
    TC_OK(acg_stream_synchronize(f->b));
    tc_download(f->b, back, f->y, NB);
    tc_splat(want, N, 3.0f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g));
}

/* Graphs, pools and streams of different devices do not mix: ACG_ERR_WRONG_DEVICE. */
static void test_cross_device_graphs(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_device *d2 = tc_open();
    acg_stream *s2 = tc_stream(d2);
    acg_graph_pool *p2 = tc_pool(d2);
    acg_buffer *b2 = tc_buffer(d2, NB);
    tc_kernels k2;
    tc_kernels_get(d2, &k2);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_begin_capture(f->a, p2));
    acg_capture_state cs = ACG_CAPTURE_ACTIVE;
    TC_OK(acg_stream_get_capture_state(f->a, &cs));
    assert_int_equal(cs, ACG_CAPTURE_NONE);
    TC_OK(acg_stream_begin_capture(s2, p2));
    TC_OK(tc_fill(s2, &k2, b2, 0, N, 1.0f));
    acg_graph *g2 = NULL;
    TC_OK(acg_stream_end_capture(s2, &g2));
    acg_graph *g1 = capture(f, work_chain);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_update(g1, g2));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_update(g2, g1));
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g2));
    TC_OK(acg_buffer_free(b2));
    TC_OK(acg_graph_pool_destroy(p2));
    TC_OK(acg_stream_destroy(s2));
    tc_close(d2);
}

/* Two captures run at once on two streams into two pools; both graphs replay correctly. */
static void test_concurrent_captures(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(acg_stream_begin_capture(f->b, NULL));
    TC_OK(tc_fill(f->a, &f->k, f->z, 0, N, 1.0f));
    TC_OK(tc_fill(f->b, &f->k, f->w, 0, N, 2.0f));
    TC_OK(tc_add(f->a, &f->k, f->z, 0, f->z, 0, N, 0.5f));
    TC_OK(tc_add(f->b, &f->k, f->w, 0, f->w, 0, N, 0.25f));
    acg_graph *ga = NULL, *gb = NULL;
    TC_OK(acg_stream_end_capture(f->b, &gb));
    TC_OK(acg_stream_end_capture(f->a, &ga));
    float back[N], want[N];
    poison_all(f);
    TC_OK(tc_replay(ga, f->a, f->z, NB, back));
    tc_splat(want, N, 1.5f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(tc_replay(gb, f->a, f->w, NB, back));
    tc_splat(want, N, 2.25f);
    TC_BYTES_EQUAL(back, want, NB);
    size_t n = 0;
    TC_OK(acg_graph_get_node_count(ga, &n));
    assert_int_equal(n, 2);
    TC_OK(acg_graph_get_node_count(gb, &n));
    assert_int_equal(n, 2);
    TC_OK(acg_graph_destroy(ga));
    TC_OK(acg_graph_destroy(gb));
}

/* acg_graph_upload: optional and harmless where nothing is uploaded; replays after it equal
 * the replays without; misuse refused. */
static void test_graph_upload(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->a, f->pool));
    TC_OK(tc_fill(f->a, &f->k, f->y, 0, N, 4.0f));
    TC_OK(acg_stream_end_capture(f->a, &g));
    TC_OK(acg_graph_upload(g, f->a));
    TC_OK(acg_graph_upload(g, f->b));
    TC_OK(acg_graph_launch(g, f->a));
    float got[N], want[N];
    tc_download(f->a, got, f->y, sizeof got);
    tc_splat(want, N, 4.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_upload(NULL, f->a));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_upload(g, NULL));
    acg_device *other = tc_open();
    acg_stream *elsewhere = tc_stream(other);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_upload(g, elsewhere));
    TC_OK(acg_stream_destroy(elsewhere));
    tc_close(other);
    acg_graph *h = NULL;
    TC_OK(acg_stream_begin_capture(f->b, NULL));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_graph_upload(g, f->b));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->b, &h));
    TC_OK(acg_graph_destroy(g));
}

int main(int argc, char **argv) {
    tc_init(argc, argv);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_replays_stable), /* first: it needs no live objects */
        T(test_replay_chain),
        T(test_capture_does_not_run),
        T(test_replay_fork_join),
        T(test_replay_copies),
        T(test_graph_update),
        T(test_graph_update_topology_mismatch),
        T(test_two_graphs_one_pool),
        T(test_private_pool),
        T(test_scratch_rules),
        T(test_discard),
        T(test_graph_update_with_scratch),
        T(test_scratch_stays_in_its_capture),
        T(test_stream_ordered_memory),
        T(test_pool_destroy_in_use),
        T(test_describe_chain),
        T(test_describe_fork_join),
        T(test_describe_copies),
        T(test_free_referenced),
        T(test_launch_errors),
        T(test_capture_state),
        T(test_unjoined_fork),
        T(test_graph_update_waits_for_pending),
        T(test_graph_update_moves_refs),
        T(test_graph_destroy_waits),
        T(test_pool_order_after_stream_destroy),
        T(test_bad_input_during_capture),
        T(test_capture_behind_eager_work),
        T(test_event_from_ended_capture),
        T(test_cross_device_graphs),
        T(test_concurrent_captures),
        T(test_graph_upload),
    };
#undef T
    return cmocka_run_group_tests_name(tc_group("test_graph"), tests, NULL, NULL);
}
