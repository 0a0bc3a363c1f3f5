/* test_graph_pool.c — graph pools and their scratch: graphs sharing a pool, private pools,
 * stream-ordered memory, the rules of scratch, discarded graphs, and many replays (the fixture:
 * graph_fixture.h). */
#include "core/acg-impl.h"
#include "graph_fixture.h"

#include <stdlib.h>
#include <string.h>

/* ---- pools and scratch -------------------------------------------------------------------- */

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
    expect_replay_floats(f, g1, f->z, 6.0f + 1.0f + 2.0f);
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g3));
}

/* Two graphs sharing one pool's scratch, replayed in reverse order and then interleaved on two
 * streams without waits, each produce their own result: the pool orders their replays. */
static void test_two_graphs_one_pool(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    scratch_pair p = scratch_pair_capture(f);
    assert_true(p.bytes1 >= (size_t)SCRATCH_M * sizeof(float));
    assert_int_equal(p.bytes2, p.bytes1); /* the second graph reuses the first one's scratch */

    tc_poison(f->a, p.o1);
    tc_poison(f->a, p.o2);
    TC_OK(tc_replay(p.g2, f->a, NULL, 0, NULL));
    TC_EXPECT_FLOATS(f->a, p.o2, SCRATCH_M, 5.0f + 1.0f + 2.0f);
    TC_OK(tc_replay(p.g1, f->a, NULL, 0, NULL));
    TC_EXPECT_FLOATS(f->a, p.o1, SCRATCH_M, 3.0f + 1.0f + 1.0f);

    for (int round = 0; round < 4; round++) {
        tc_poison(f->a, p.o1);
        tc_poison(f->a, p.o2);
        TC_OK(acg_graph_launch(round % 2 ? p.g1 : p.g2, f->a));
        TC_OK(acg_graph_launch(round % 2 ? p.g2 : p.g1, f->b));
        TC_OK(acg_stream_synchronize(f->a));
        TC_OK(acg_stream_synchronize(f->b));
        scratch_pair_expect(f, &p);
    }
    scratch_pair_free(&p);
}

/* A graph captured with pool NULL gets a private pool and replays correctly. */
static void test_private_pool(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    scratch_work w = {f, 1.0f, 0.5f, f->z, N};
    acg_graph *g = NULL;
    TC_OK(tc_capture(work_scratch, &w, f->a, f->b, NULL, &g));
    expect_replay_floats(f, g, f->z, 1.0f + 1.0f + 0.5f);
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
    TC_EXPECT_FLOATS(f->a, f->z, N, 5.0f);
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
    expect_replay_floats(f, g, f->z, 4.0f);
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
    TC_EXPECT_CAPTURE_STATE(f->a, ACTIVE);
    TC_OK(tc_fill(f->a, &f->k, f->z, 0, N, 3.0f));
    TC_OK(acg_stream_end_capture(f->a, &gb));
    TC_OK(acg_graph_destroy(ga));
    expect_replay_floats(f, gb, f->z, 3.0f);
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
    expect_chain_replay(f, g, f->z, f->scalar);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_graph_pool_destroy(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_pool_destroy(pool));
}

/* Destroys s, closes dev and expects the counting allocator to hold nothing live, then
 * uninstalls it. */
static void close_counted(acg_device *dev, acg_stream *s) {
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
}

/* 10,000 replays hold pool memory and library allocations steady after the first ones. */
static void test_many_replays_stable(void **state) {
    (void)state;
    tc_alloc_install();
    acg_device *dev = tc_open();
    acg_stream *s = tc_stream(dev);
    if (!tc_has_graphs(dev, s)) {
        close_counted(dev, s);
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
    TC_EXPECT_FLOATS(s, out, M, 2.0f + 1.0f + 3.0f);

    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_buffer_free(out));
    close_counted(dev, s);
}

#define T(fn) GRAPH_CASE(fn)
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_many_replays_stable), /* first: it needs no live objects */
    T(test_two_graphs_one_pool),
    T(test_private_pool),
    T(test_scratch_rules),
    T(test_discard),
    T(test_graph_update_with_scratch),
    T(test_scratch_stays_in_its_capture),
    T(test_stream_ordered_memory),
    T(test_pool_destroy_in_use),
};
#undef T
TC_MAIN("test_graph_pool", tests)
