/*
 * test_node_update.c — acg_graph_update_kernel_node: one kernel node of an instantiated graph
 * changed in place (its scalars, its buffers, its grid), the replay then equal, bit for bit, to
 * an eager launch with the new arguments; every launch rule enforced as at launch, a refused
 * update leaving the graph replaying as before; the graph's references following the node.
 * Runs on every backend and on the cpu backend's native capture path; a device without
 * graph_node_update is checked to refuse with ACG_ERR_UNSUPPORTED.
 */
#include "common.h"

#include "core/acg-impl.h" /* the node-update test hooks */

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define N 256
#define BYTES (N * sizeof(float))

typedef struct fx {
    tc_fixture t; /* the device under test, a stream, the built-in kernels */
    acg_buffer *x1, *x2, *y, *ref;
    float h1[N], h2[N];
    acg_graph *g; /* node 0: fill y with 0; node 1: y = x1 + 1 (add_scalar) */
} fx;

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->x1 = tc_buffer(f->t.dev, BYTES);
    f->x2 = tc_buffer(f->t.dev, BYTES);
    f->y = tc_buffer(f->t.dev, BYTES);
    f->ref = tc_buffer(f->t.dev, BYTES);
    tc_fill_floats(f->h1, N, 1);
    tc_fill_floats(f->h2, N, 2);
    tc_upload(f->t.s, f->x1, f->h1, BYTES);
    tc_upload(f->t.s, f->x2, f->h2, BYTES);
    if (tc_has_graphs(f->t.dev, f->t.s)) {
        TC_OK(acg_stream_begin_capture(f->t.s, NULL));
        TC_OK(acg_fill(f->t.s, f->y, 0, BYTES, 0, 4));
        TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, f->x1, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(f->t.s, &f->g));
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_graph_destroy(f->g));
    TC_FREE_BUFFERS(f->x1, f->x2, f->y, f->ref);
    return tc_fixture_teardown(state);
}

/* Skips (or, on a device without node updates, checks the refusal and skips) unless the device
 * updates nodes. */
static void need_node_update(fx *f) {
    if (f->g == NULL) {
        tc_skip("no graphs");
    }
    if (!acg_device_get_capability(f->t.dev)->graph_node_update) {
        const acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x2, 0),
                                acg_arg_f32(2.0f)};
        TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update_kernel_node(f->g, 1, NULL, args, 3));
        TC_LAST_ERROR_HAS("graph_node_update");
        tc_skip("%s has no per-node updates: checked that it refuses them", tc_spec());
    }
}

/* Replays g (which writes y) and returns y in out. */
static void replay(fx *f, acg_graph *g, float *out) {
    tc_poison(f->t.s, f->y);
    TC_OK(acg_graph_launch(g, f->t.s));
    tc_download(f->t.s, out, f->y, BYTES);
}

/* Expects a replay of f->g to equal, bit for bit, what the graph computes with node 1 as
 * add_scalar(y, x, n items, a) run eagerly (in ref), and leaves that in want. */
static void expect_as_eager(fx *f, const acg_buffer *x, uint32_t n, float a, float *want) {
    float got[N];
    replay(f, f->g, got);
    tc_poison(f->t.s, f->ref);
    TC_OK(acg_fill(f->t.s, f->ref, 0, BYTES, 0, 4));
    TC_OK(tc_add(f->t.s, &f->t.k, f->ref, 0, x, 0, n, a));
    tc_download(f->t.s, want, f->ref, BYTES);
    TC_BYTES_EQUAL(got, want, BYTES);
}

static acg_status update_add(fx *f, const acg_dims *dims, const acg_buffer *x, size_t xoff,
                             float a) {
    const acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(x, xoff), acg_arg_f32(a)};
    return acg_graph_update_kernel_node(f->g, 1, dims, args, 3);
}

/* A scalar, then a buffer, changed between replays: each replay equals the eager launch. */
static void test_scalar_and_buffer(void **state) {
    fx *f = *state;
    need_node_update(f);
    float got[N], want[N];
    expect_as_eager(f, f->x1, N, 1.0f, want);
    for (int step = 0; step < 4; step++) {
        const float a = 0.5f * (float)step - 3.0f;
        TC_OK(update_add(f, NULL, f->x1, 0, a));
        expect_as_eager(f, f->x1, N, a, want);
        for (int i = 0; i < N; i++) {
            assert_true(want[i] == f->h1[i] + a);
        }
    }
    TC_OK(update_add(f, NULL, f->x2, 0, 2.0f));
    expect_as_eager(f, f->x2, N, 2.0f, want);
    /* A view's window: x2 from its 16th float, 240 items (as an offset, not a grid change). */
    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(f->x2, 16 * sizeof(float), BYTES - 16 * sizeof(float), &view));
    const acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(view, 0), acg_arg_f32(2.0f)};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_graph_update_kernel_node(f->g, 1, NULL, args, 3));
    TC_LAST_ERROR_HAS("argument 1 reaches");
    replay(f, f->g, got);
    TC_BYTES_EQUAL(got, want, BYTES);              /* the refused update changed nothing */
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(f->x2)); /* the graph uses x2 now ... */
    acg_buffer *x1 = f->x1;                        /* ... and no longer x1 */
    TC_OK(acg_buffer_free(x1));
    f->x1 = tc_buffer(f->t.dev, BYTES);
    TC_OK(acg_buffer_free(view));
}

/* The grid changes where the capability says so: half the items, the rest left as filled. */
static void test_grid(void **state) {
    fx *f = *state;
    need_node_update(f);
    const acg_dims half = acg_dims_1d(N / 2);
    if (!acg_device_get_capability(f->t.dev)->graph_node_update_grid) {
        TC_EXPECT(ERR_UNSUPPORTED, update_add(f, &half, f->x1, 0, 1.0f));
        TC_LAST_ERROR_HAS("grid");
        tc_skip("%s updates a node's arguments but not its grid", tc_spec());
    }
    float want[N];
    TC_OK(update_add(f, &half, f->x2, 0, 4.0f));
    expect_as_eager(f, f->x2, N / 2, 4.0f, want);
    assert_true(want[N / 2] == 0.0f);
    /* The same grid again (dims given equal to the node's) is no change of grid. */
    TC_OK(update_add(f, &half, f->x2, 0, 5.0f));
    /* Back to the whole grid. */
    const acg_dims whole = acg_dims_1d(N);
    TC_OK(update_add(f, &whole, f->x1, 0, 1.0f));
    expect_as_eager(f, f->x1, N, 1.0f, want);
}

/* A device that cannot change a grid (the capability, as a test hook sets it) refuses a grid
 * change and still takes the same grid given again. */
static void test_grid_denied(void **state) {
    fx *f = *state;
    need_node_update(f);
    acg__device_deny_node_update_grid(f->t.dev);
    const acg_dims half = acg_dims_1d(N / 2), same = acg_dims_1d(N);
    TC_EXPECT(ERR_UNSUPPORTED, update_add(f, &half, f->x2, 0, 1.0f));
    TC_LAST_ERROR_HAS("cannot change a kernel node's grid in a graph (node 1, add_scalar_f32)");
    TC_OK(update_add(f, &same, f->x2, 0, 1.0f));
    float want[N];
    expect_as_eager(f, f->x2, N, 1.0f, want);
}

/* The core's fallback for a backend without its own slot: the whole rewritten description
 * through graph_update (a test hook makes the core take it here). */
static void test_fallback_through_graph_update(void **state) {
    fx *f = *state;
    need_node_update(f);
    if (!acg_device_get_capability(f->t.dev)->graph_update) {
        tc_skip("no graph update to fall back on");
    }
    acg__device_set_node_update_fallback(f->t.dev, true);
    float want[N];
    for (int i = 0; i < 2; i++) {
        TC_OK(update_add(f, NULL, i ? f->x1 : f->x2, 0, 6.0f + (float)i));
        expect_as_eager(f, i ? f->x1 : f->x2, N, 6.0f + (float)i, want);
    }
    acg__device_set_node_update_fallback(f->t.dev, false);
}

/* Every refusal: the graph then replays exactly as before. */
static void test_refusals(void **state) {
    fx *f = *state;
    need_node_update(f);
    float before[N], got[N];
    replay(f, f->g, before);
    const acg_arg good[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x2, 0), acg_arg_f32(1.0f)};

    TC_EXPECT(ERR_OUT_OF_RANGE, acg_graph_update_kernel_node(f->g, 2, NULL, good, 3));
    TC_LAST_ERROR_HAS("has 2 nodes, there is no node 2");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 0, NULL, good, 3));
    TC_LAST_ERROR_HAS("node 0 of graph");
    TC_LAST_ERROR_HAS("is fill, not a kernel");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update_kernel_node(NULL, 1, NULL, good, 3));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, NULL, 3));
    TC_LAST_ERROR_HAS("NULL dims or args");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, good, 2));
    TC_LAST_ERROR_HAS("2 arguments, the kernel takes 3");

    acg_arg wrong_type[3] = {good[0], good[1], acg_arg_i32(1)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, wrong_type, 3));
    TC_LAST_ERROR_HAS("argument 2 is a i32, the kernel takes a f32");

    acg_buffer *small = tc_buffer(f->t.dev, BYTES / 2);
    acg_arg too_far[3] = {good[0], acg_arg_buffer(small, 0), good[2]};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_graph_update_kernel_node(f->g, 1, NULL, too_far, 3));
    TC_LAST_ERROR_HAS("argument 1 reaches [0, +1024), past its 512-byte buffer");
    acg_arg misaligned[3] = {good[0], acg_arg_buffer(f->x2, 2), good[2]};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, misaligned, 3));
    TC_LAST_ERROR_HAS("offset 2 is not a multiple of 4");
    /* y against a window of itself shifted by one float: overlapping, not the same window. */
    acg_buffer *big = tc_buffer(f->t.dev, 2 * BYTES);
    acg_arg overlap[3] = {acg_arg_buffer(big, 0), acg_arg_buffer(big, 4), good[2]};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, overlap, 3));
    TC_LAST_ERROR_HAS("arguments 0 and 1 overlap");
    const acg_dims zero = {{0, 1, 1}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, &zero, good, 3));
    TC_LAST_ERROR_HAS("global[0] is 0");

    acg_buffer *dead = tc_buffer(f->t.dev, BYTES);
    TC_OK(acg_buffer_free(dead));
    acg_arg dead_arg[3] = {good[0], acg_arg_buffer(dead, 0), good[2]};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update_kernel_node(f->g, 1, NULL, dead_arg, 3));
    TC_LAST_ERROR_HAS("argument 1 is not a live buffer");

    acg_device *other = tc_open_cpu();
    acg_buffer *foreign = tc_buffer(other, BYTES);
    acg_arg other_dev[3] = {good[0], acg_arg_buffer(foreign, 0), good[2]};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_graph_update_kernel_node(f->g, 1, NULL, other_dev, 3));
    TC_LAST_ERROR_HAS("argument 1 belongs to");
    TC_OK(acg_buffer_free(foreign));
    tc_close(other);

    /* Scratch of another graph: its memory is that graph's, shared with its pool. */
    acg_graph *h = NULL;
    acg_buffer *scratch = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_alloc(f->t.s, BYTES, &scratch));
    TC_OK(tc_fill(f->t.s, &f->t.k, scratch, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->t.s, &h));
    acg_arg their_scratch[3] = {good[0], acg_arg_buffer(scratch, 0), good[2]};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(f->g, 1, NULL, their_scratch, 3));
    TC_LAST_ERROR_HAS("graph scratch of another graph");
    TC_OK(acg_graph_destroy(h));

    replay(f, f->g, got);
    TC_BYTES_EQUAL(got, before, BYTES);
    TC_FREE_BUFFERS(small, big);
}

/* A node update after a whole update (acg_graph_update from another capture of the same step)
 * changes the graph as updated: on cuda the executable's nodes are then still named by the
 * graph it was first instantiated from. */
static void test_after_graph_update(void **state) {
    fx *f = *state;
    need_node_update(f);
    acg_graph *from = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_fill(f->t.s, f->y, 0, BYTES, 0, 4));
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, f->x2, 0, N, 3.0f));
    TC_OK(acg_stream_end_capture(f->t.s, &from));
    if (!tc_has_graph_update(f->g, from)) {
        TC_OK(acg_graph_destroy(from));
        tc_skip("no graph update");
    }
    TC_OK(acg_graph_update(f->g, from));
    TC_OK(acg_graph_destroy(from));
    float want[N];
    expect_as_eager(f, f->x2, N, 3.0f, want);
    for (int i = 0; i < 2; i++) {
        TC_OK(update_add(f, NULL, i ? f->x2 : f->x1, 0, -2.5f * (float)(i + 1)));
        expect_as_eager(f, i ? f->x2 : f->x1, N, -2.5f * (float)(i + 1), want);
    }
}

/* A graph's own scratch may be re-pointed within it: the node reads the scratch the graph
 * writes first. */
static void test_own_scratch(void **state) {
    fx *f = *state;
    need_node_update(f);
    acg_graph *g = NULL;
    acg_buffer *a = NULL, *b = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_alloc(f->t.s, BYTES, &a));
    TC_OK(acg_stream_alloc(f->t.s, BYTES, &b));
    TC_OK(tc_fill(f->t.s, &f->t.k, a, 0, N, 3.0f));
    TC_OK(tc_fill(f->t.s, &f->t.k, b, 0, N, 7.0f));
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, a, 0, N, 0.5f));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    float got[N], want[N];
    replay(f, g, got);
    tc_splat(want, N, 3.5f);
    TC_BYTES_EQUAL(got, want, BYTES);
    const acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(b, 0), acg_arg_f32(0.5f)};
    TC_OK(acg_graph_update_kernel_node(g, 2, NULL, args, 3));
    replay(f, g, got);
    tc_splat(want, N, 7.5f);
    TC_BYTES_EQUAL(got, want, BYTES);
    TC_OK(acg_graph_destroy(g));
}

/* Updates racing replays of the graph on another thread: each update is whole before or after
 * a replay (under ThreadSanitizer, no race), and the last replay equals the last update. */
typedef struct racer {
    fx *f;
    acg_stream *s;
    int rounds;
} racer;

static void *replay_loop(void *arg) {
    racer *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        TC_OK(acg_graph_launch(r->f->g, r->s));
        TC_OK(acg_stream_synchronize(r->s));
    }
    return NULL;
}

static void test_update_racing_replays(void **state) {
    fx *f = *state;
    need_node_update(f);
    racer r = {f, tc_stream(f->t.dev), 200};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, replay_loop, &r), 0);
    for (int i = 0; i < 200; i++) {
        TC_OK(update_add(f, NULL, (i & 1) ? f->x2 : f->x1, 0, (float)i));
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    float want[N];
    expect_as_eager(f, f->x2, N, 199.0f, want);
    TC_OK(acg_stream_destroy(r.s));
}

/* On a lost device an update is refused with the first fault. */
static void test_device_lost(void **state) {
    fx *f = *state;
    need_node_update(f);
    tc_inject_fault_or_skip(f->t.dev);
    TC_OK(acg_graph_launch(f->g, f->t.s)); /* the injected fault takes this replay */
    TC_EXPECT(ERR_DEVICE_LOST, acg_stream_synchronize(f->t.s));
    TC_EXPECT(ERR_DEVICE_LOST, update_add(f, NULL, f->x2, 0, 1.0f));
    TC_LAST_ERROR_HAS("acg_graph_update_kernel_node");
    TC_LAST_ERROR_HAS("was lost to an earlier fault");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_scalar_and_buffer), T(test_grid),
    T(test_grid_denied),       T(test_fallback_through_graph_update),
    T(test_refusals),          T(test_after_graph_update),
    T(test_own_scratch),       T(test_update_racing_replays),
    T(test_device_lost),
};
#undef T
TC_MAIN("test_node_update", tests)
