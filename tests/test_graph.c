/* test_graph.c — capture and replay: replay equals eager bit for bit, graph update, the
 * descriptions of captured graphs, and acg_graph_upload (the fixture and the work sequences:
 * graph_fixture.h; pools and scratch: test_graph_pool.c; lifetimes and misuse:
 * test_graph_lifetime.c). */
#include "graph_fixture.h"

#include <string.h>

/* ---- replay equals eager ------------------------------------------------------------------ */

/* (a) A captured kernel chain replays to the eager result, bit for bit, replay after replay. */
static void test_replay_chain(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    float eager[N], want[N];
    chain_reference(want, f->scalar);
    expect_eager(f, work_chain, f->z, want, eager);

    acg_graph *g = capture(f, work_chain);
    assert_ptr_equal(acg_graph_get_device(g), f->dev);
    for (int i = 0; i < 3; i++) {
        expect_replay(f, g, NULL, f->z, eager);
    }
    /* Replay on another stream of the device works the same. */
    expect_replay(f, g, f->b, f->z, eager);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_destroy(NULL));
}

/* Capture records work instead of running it: nothing is written until the graph replays. */
static void test_capture_does_not_run(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    poison_all(f);
    acg_graph *g = capture(f, work_chain);
    expect_poisoned(f, f->z);
    expect_chain_replay(f, g, f->z, f->scalar);
    TC_OK(acg_graph_destroy(g));
}

/* (b) A fork/join capture over two streams replays to the eager result. */
static void test_replay_fork_join(void **state) {
    fx *f = *state;
    NEED_MULTI_STREAM_CAPTURE(f);
    float eager[N], want[N];
    tc_splat(want, N, 5.5f);
    expect_eager(f, work_fork_join, f->w, want, eager);

    acg_graph *g = capture(f, work_fork_join);
    TC_EXPECT_CAPTURE_STATE(f->b, NONE);
    for (int i = 0; i < 3; i++) {
        expect_replay(f, g, NULL, f->w, eager);
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
    f->scalar = 1.0f;
    acg_graph *g1 = capture(f, work_chain);
    f->scalar = 7.0f;
    acg_graph *g2 = capture(f, work_chain);
    f->scalar = -2.0f;
    f->out = f->w;
    acg_graph *g3 = capture(f, work_chain);
    f->out = f->z;

    expect_chain_replay(f, g1, f->z, 1.0f);
    const bool upd = tc_has_graph_update(g1, g2);
    if (upd) {
        TC_OK(acg_graph_update(g1, g2));
        expect_chain_replay(f, g1, f->z, 7.0f);
        expect_chain_replay(f, g2, f->z, 7.0f); /* from is unchanged */

        /* A new output buffer: g1 now writes w, and leaves z alone. */
        TC_OK(acg_graph_update(g1, g3));
        expect_chain_replay(f, g1, f->w, -2.0f);
        expect_poisoned(f, f->z);
    } else {
        /* Refused updates change nothing: each graph replays what it captured. */
        TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update(g1, g3));
        expect_chain_replay(f, g1, f->z, 1.0f);
        expect_chain_replay(f, g2, f->z, 7.0f);
        expect_chain_replay(f, g3, f->w, -2.0f);
    }

    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update(NULL, g2));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_update(g1, NULL));
    TC_OK(acg_graph_destroy(g1));
    TC_OK(acg_graph_destroy(g2));
    TC_OK(acg_graph_destroy(g3));
    skip_without_update(upd, "refused updates change nothing");
}

/* Graphs of different topology refuse to update each other, and the target keeps working. */
static void test_graph_update_topology_mismatch(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    NEED_PINNED(f);
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
    const struct {
        acg_graph *g, *from;
        const char *call;
    } refused[] = {
        {chain, longer, "acg_graph_update(chain, longer)"},
        {longer, chain, "acg_graph_update(longer, chain)"},
        {chain, fj, "acg_graph_update(chain, fj)"},
        {chain, copies, "acg_graph_update(chain, copies)"},
        {copies, chain, "acg_graph_update(copies, chain)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        tc_expect_(want_st, acg_graph_update(refused[i].g, refused[i].from), refused[i].call,
                   __FILE__, __LINE__);
        TC_LAST_ERROR_HAS("acg_graph_update");
    }

    expect_chain_replay(f, chain, f->z, f->scalar);
    TC_OK(acg_graph_destroy(chain));
    TC_OK(acg_graph_destroy(longer));
    TC_OK(acg_graph_destroy(fj));
    TC_OK(acg_graph_destroy(copies));
    skip_without_update(upd, "every update is refused as unsupported (no topology compared)");
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

/* Captures fn, expects its graph to hold n nodes and returns their descriptions in info. */
static acg_graph *capture_nodes(fx *f, tc_work_fn fn, acg_node_info *info, size_t n) {
    acg_graph *g = capture(f, fn);
    tc_expect_node_count(g, n);
    for (size_t i = 0; i < n; i++) {
        info[i] = tc_node(g, i);
    }
    return g;
}

/* Nodes of a chain: kernels in order, each depending on the one before, with their buffers. */
static void test_describe_chain(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_node_info info[5];
    acg_graph *g = capture_nodes(f, work_chain, info, 5);
    static const char *names[] = {"fill_f32", "add_scalar_f32", "axpy_f32", "copy_f32",
                                  "add_scalar_f32"};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(info[i].kind, ACG_NODE_KERNEL);
        assert_non_null(info[i].kernel);
        assert_string_equal(info[i].kernel, names[i]);
        assert_int_equal(info[i].size, 0);
        assert_null(info[i].host);
        if (i == 0) {
            assert_int_equal(info[i].n_deps, 0);
        } else {
            assert_int_equal(info[i].n_deps, 1);
            assert_int_equal(info[i].deps[0], i - 1);
        }
    }
    assert_int_equal(info[0].n_buffers, 1);
    assert_ptr_equal(info[0].buffers[0], f->x);
    assert_int_equal(info[2].n_buffers, 2);
    assert_true(has_buffer(&info[2], f->x) && has_buffer(&info[2], f->y));
    assert_true(has_buffer(&info[3], f->z) && has_buffer(&info[3], f->y));

    size_t n = 0;
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
    acg_node_info info[4];
    acg_graph *g = capture_nodes(f, work_fork_join, info, 4);
    for (size_t i = 0; i < 4; i++) {
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
    acg_node_info in[5];
    acg_graph *g = capture_nodes(f, work_copies, in, 5);
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
    TC_EXPECT_FLOATS(f->a, f->y, N, 4.0f);
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

#define T(fn) GRAPH_CASE(fn)
static const struct CMUnitTest tests[] = {
    T(test_replay_chain),   T(test_capture_does_not_run), T(test_replay_fork_join),
    T(test_replay_copies),  T(test_graph_update),         T(test_graph_update_topology_mismatch),
    T(test_describe_chain), T(test_describe_fork_join),   T(test_describe_copies),
    T(test_graph_upload),
};
#undef T
TC_MAIN("test_graph", tests)
