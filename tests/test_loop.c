/*
 * test_loop.c — loops (acg_stream_loop_begin/_end): a body run again while a word in device
 * memory is set. Eagerly on every backend; captured and replayed where the device says
 * graph_loops (the replay equal to the eager run bit for bit, the condition evaluated afresh at
 * every replay), refused with the reason where it does not; nesting; the body's rules, eager and
 * captured; every refusal of a bad argument; the description, the picture and an update.
 *
 * The body counts down: c (a float) loses 1, and the condition word becomes c's bits, so it
 * clears when c reaches 0; meanwhile y += x. A loop started at c = k therefore runs k times
 * (max_iterations allowing), and y ends at y0 + runs * x.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <acg/trace.h>

#define N 64
#define BYTES (N * sizeof(float))

typedef struct fx {
    tc_fixture t;
    acg_buffer *x, *y;
    acg_buffer *c; /* [0]: the outer counter, [1]: the outer condition, [2] and [3]: the inner */
    float hx[N], y0[N];
    float a; /* the body's y += a x */
} fx;

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->x = tc_buffer(f->t.dev, BYTES);
    f->y = tc_buffer(f->t.dev, BYTES);
    f->c = tc_buffer(f->t.dev, 4 * sizeof(float));
    tc_fill_floats(f->hx, N, 3);
    tc_fill_floats(f->y0, N, 4);
    tc_upload(f->t.s, f->x, f->hx, BYTES);
    f->a = 1.0f;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_FREE_BUFFERS(f->x, f->y, f->c);
    return tc_fixture_teardown(state);
}

/* y = y0, the outer counter at `outer`, the inner at `inner` (conditions set, as a body would
 * leave them). */
static void reset(fx *f, float outer, float inner) {
    float c[4] = {outer, outer, inner, inner};
    tc_upload(f->t.s, f->y, f->y0, BYTES);
    tc_upload(f->t.s, f->c, c, sizeof c);
}

/* One run of a body on counter `at` (0: outer, 2: inner): y += a x, c -= 1, cond = c. */
static acg_status body(fx *f, size_t at) {
    acg_status st = tc_axpy(f->t.s, &f->t.k, f->y, 0, f->x, 0, N, f->a);
    if (st == ACG_OK) {
        st = tc_add(f->t.s, &f->t.k, f->c, at * 4, f->c, at * 4, 1, -1.0f);
    }
    if (st == ACG_OK) {
        st = tc_copy(f->t.s, &f->t.k, f->c, (at + 1) * 4, f->c, at * 4, 1);
    }
    return st;
}

/* The loop on the outer counter, max runs at most. */
static acg_status loop(fx *f, uint32_t max) {
    acg_status st = acg_stream_loop_begin(f->t.s, f->c, 4, max);
    if (st == ACG_OK) {
        st = body(f, 0);
    }
    return st != ACG_OK ? st : acg_stream_loop_end(f->t.s);
}

/* y as `runs` runs of the body leave it, computed eagerly one launch at a time. */
static void unrolled(fx *f, int runs, float *out) {
    reset(f, 1000.0f, 0.0f);
    for (int i = 0; i < runs; i++) {
        TC_OK(body(f, 0));
    }
    tc_download(f->t.s, out, f->y, BYTES);
}

static void expect_y(fx *f, const float *want) {
    float got[N];
    tc_download(f->t.s, got, f->y, BYTES);
    TC_BYTES_EQUAL(got, want, BYTES);
}

/* Skips unless the device captures loops; where it has graphs but no loops, checks first that
 * the loop call invalidates a capture with the reason. */
static void need_graph_loops(fx *f) {
    tc_need_graphs(f->t.dev, f->t.s);
    if (acg_device_get_capability(f->t.dev)->graph_loops) {
        return;
    }
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, acg_stream_loop_begin(f->t.s, f->c, 4, 8),
                  "graph_loops is false");
    TC_LAST_ERROR_HAS("acg_stream_loop_begin");
    acg_graph *g = NULL;
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g));
    TC_LAST_ERROR_HAS("no loops");
    tc_skip("%s has no loops in graphs: checked that a capture refuses them", tc_spec());
}

/* ---- eager loops (every backend) ---------------------------------------------------------- */

static void test_eager_runs_until_clear(void **state) {
    fx *f = *state;
    float want[N];
    unrolled(f, 5, want);
    reset(f, 5.0f, 0.0f);
    TC_OK(loop(f, 100));
    expect_y(f, want);
    /* A counter at 1 runs the body once: the first run is always made. */
    unrolled(f, 1, want);
    reset(f, 1.0f, 0.0f);
    TC_OK(loop(f, 100));
    expect_y(f, want);
}

static void test_eager_max_iterations(void **state) {
    fx *f = *state;
    float want[N];
    unrolled(f, 3, want);
    reset(f, 10.0f, 0.0f);
    TC_OK(loop(f, 3));
    expect_y(f, want);
}

/* The outer body: y += x, then an inner loop of `inner` runs (its counter set by a fill), then
 * the outer count. */
static acg_status nested(fx *f, float inner) {
    acg_status st = acg_stream_loop_begin(f->t.s, f->c, 4, 50);
    st = st != ACG_OK ? st : tc_fill(f->t.s, &f->t.k, f->c, 8, 1, inner);
    st = st != ACG_OK ? st : acg_stream_loop_begin(f->t.s, f->c, 12, 50);
    st = st != ACG_OK ? st : body(f, 2);
    st = st != ACG_OK ? st : acg_stream_loop_end(f->t.s);
    st = st != ACG_OK ? st : body(f, 0);
    return st != ACG_OK ? st : acg_stream_loop_end(f->t.s);
}

static void test_eager_nested(void **state) {
    fx *f = *state;
    float want[N];
    unrolled(f, 3 * (4 + 1), want); /* 3 outer runs, each 4 inner runs and its own */
    reset(f, 3.0f, 0.0f);
    TC_OK(nested(f, 4.0f));
    expect_y(f, want);
}

/* ---- captured loops ------------------------------------------------------------------------ */

static void test_replay_matches_eager(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    acg_graph *g = NULL;
    reset(f, 1.0f, 0.0f);
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 6));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    /* Each replay reads the condition afresh: the counter set before it decides the runs, and
     * max_iterations bounds them. */
    static const float starts[] = {4.0f, 1.0f, 6.0f, 9.0f};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        float want[N], got[N];
        reset(f, starts[i], 0.0f);
        TC_OK(loop(f, 6));
        tc_download(f->t.s, want, f->y, BYTES);
        reset(f, starts[i], 0.0f);
        TC_OK(acg_graph_launch(g, f->t.s));
        tc_download(f->t.s, got, f->y, BYTES);
        TC_BYTES_EQUAL(got, want, BYTES);
    }
    TC_OK(acg_graph_destroy(g));
}

static void test_replay_nested(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    acg_graph *g = NULL;
    reset(f, 1.0f, 0.0f);
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(nested(f, 3.0f));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    float want[N];
    unrolled(f, 2 * (3 + 1), want);
    reset(f, 2.0f, 0.0f);
    TC_OK(acg_graph_launch(g, f->t.s));
    expect_y(f, want);
    TC_OK(acg_graph_destroy(g));
}

/* The description: the loop node, its body after it, what depends on what; the picture draws
 * the body inside a cluster of its own. */
static void test_description(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_fill(f->t.s, f->y, 0, BYTES, 0, 4));
    TC_OK(nested(f, 2.0f));
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, f->y, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    static const acg_node_kind kinds[] = {
        ACG_NODE_FILL,   ACG_NODE_LOOP,   ACG_NODE_KERNEL, ACG_NODE_LOOP,
        ACG_NODE_KERNEL, ACG_NODE_KERNEL, ACG_NODE_KERNEL, ACG_NODE_KERNEL,
        ACG_NODE_KERNEL, ACG_NODE_KERNEL, ACG_NODE_KERNEL,
    };
    tc_expect_node_kinds(g, kinds, sizeof kinds / sizeof kinds[0]);
    acg_loop_info li = {.size = sizeof li};
    TC_OK(acg_graph_get_loop(g, 1, &li));
    assert_int_equal(li.n_body, 8);
    assert_int_equal(li.max_iterations, 50);
    assert_ptr_equal(li.cond, f->c);
    assert_int_equal(li.cond_offset, 4);
    TC_OK(acg_graph_get_loop(g, 3, &li));
    assert_int_equal(li.n_body, 3);
    assert_int_equal(li.cond_offset, 12);
    acg_node_info ni;
    TC_OK(acg_graph_get_node(g, 4, &ni)); /* the inner body's first node depends on its loop */
    assert_int_equal(ni.n_deps, 1);
    assert_int_equal(ni.deps[0], 3);
    TC_OK(acg_graph_get_node(g, 7, &ni)); /* after the inner loop: on the loop, not its body */
    assert_int_equal(ni.deps[0], 3);
    TC_OK(acg_graph_get_node(g, 10, &ni)); /* after the outer loop */
    assert_int_equal(ni.deps[0], 1);
    TC_OK(acg_graph_get_node(g, 1, &ni));
    assert_int_equal(ni.n_buffers, 1);
    assert_ptr_equal(ni.buffers[0], f->c);
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_graph_get_loop(g, 0, &li), "no loop");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_graph_get_loop(g, 11, &li));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_get_loop(g, 1, NULL));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    TC_OK(acg_graph_write_dot(g, mem, ACG_DOT_BUFFERS));
    fclose(mem);
    assert_true(tc_contains(text, "subgraph cluster_loop_1 {"));
    assert_true(tc_contains(text, "subgraph cluster_loop_3 {"));
    assert_true(tc_contains(text, "loop\\n8 nodes, at most 50 runs"));
    free(text);
    /* The condition's buffer is the graph's: freeing it is refused while the graph lives. */
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(f->c));
    TC_OK(acg_graph_destroy(g));
}

/* An update from a capture of the same shape on other buffers: the replay then loops on
 * those. */
static void test_update(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    acg_graph *g = NULL, *h = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 8));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    if (!tc_has_graph_update(g, NULL)) {
        TC_OK(acg_graph_destroy(g));
        return;
    }
    acg_buffer *x2 = tc_buffer(f->t.dev, BYTES);
    float hx2[N];
    tc_fill_floats(hx2, N, 9);
    tc_upload(f->t.s, x2, hx2, BYTES);
    acg_buffer *x1 = f->x;
    f->x = x2;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 8));
    TC_OK(acg_stream_end_capture(f->t.s, &h));
    if (tc_backend_is("cuda")) {
        /* CUDA neither clones nor instantiates twice a graph with conditional nodes. */
        TC_EXPECT_HAS(ERR_UNSUPPORTED, acg_graph_update(g, h), "conditional");
        TC_OK(acg_graph_destroy(h));
        TC_OK(acg_graph_destroy(g));
        f->x = x1;
        TC_FREE_BUFFERS(x2);
        return;
    }
    TC_OK(acg_graph_update(g, h));
    float want[N];
    reset(f, 3.0f, 0.0f);
    TC_OK(loop(f, 8));
    tc_download(f->t.s, want, f->y, BYTES);
    reset(f, 3.0f, 0.0f);
    TC_OK(acg_graph_launch(g, f->t.s));
    expect_y(f, want);
    /* Another max is another topology. */
    acg_graph *k = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 9));
    TC_OK(acg_stream_end_capture(f->t.s, &k));
    TC_EXPECT_HAS(ERR_TOPOLOGY_MISMATCH, acg_graph_update(g, k), "loop");
    TC_OK(acg_graph_destroy(k));
    TC_OK(acg_graph_destroy(h));
    TC_OK(acg_graph_destroy(g));
    f->x = x1;
    TC_FREE_BUFFERS(x2);
}

/* A kernel node updated in place: in the body (its a), and after the loop. */
static void test_update_node(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    if (!acg_device_get_capability(f->t.dev)->graph_node_update) {
        tc_skip("%s has no per-node updates", tc_spec());
    }
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 8));                                         /* nodes 0 (the loop) to 3 */
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, f->y, 0, N, 0.5f)); /* node 4 */
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    const acg_arg after[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->y, 0), acg_arg_f32(0.25f)};
    TC_OK(acg_graph_update_kernel_node(g, 4, NULL, after, 3));
    const acg_arg in_body[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 0), acg_arg_f32(3.0f)};
    acg_status st = acg_graph_update_kernel_node(g, 1, NULL, in_body, 3);
    if (tc_backend_is("cuda")) {
        TC_EXPECT(ERR_UNSUPPORTED, st);
        TC_LAST_ERROR_HAS("loop's body");
    } else {
        TC_OK(st);
        f->a = 3.0f;
    }
    float want[N];
    reset(f, 4.0f, 0.0f);
    TC_OK(loop(f, 8));
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 0, f->y, 0, N, 0.25f));
    tc_download(f->t.s, want, f->y, BYTES);
    reset(f, 4.0f, 0.0f);
    TC_OK(acg_graph_launch(g, f->t.s));
    expect_y(f, want);
    TC_OK(acg_graph_destroy(g));
}

/* The cpu backend times its streams: a replay's trace holds a "loop" span per loop, saying
 * how many runs it made, with the body's ops inside it. */
typedef struct loop_spans {
    _Atomic uint32_t loops, runs, kernels_inside;
    _Atomic uint64_t loop_start, loop_end;
} loop_spans;

static void trace_loops(const acg_trace_event *e, void *user) {
    loop_spans *l = user;
    if (e->category != ACG_TRACE_STREAM || e->phase != ACG_TRACE_COMPLETE) {
        return;
    }
    if (strcmp(e->name, "loop") == 0) {
        for (uint32_t i = 0; i < e->n_args; i++) {
            if (strcmp(e->args[i].key, "runs") == 0) {
                atomic_store(&l->runs, (uint32_t)e->args[i].value.u);
            }
        }
        atomic_store(&l->loop_start, e->ts_ns);
        atomic_store(&l->loop_end, e->ts_ns + e->dur_ns);
        atomic_fetch_add(&l->loops, 1);
    } else if (strcmp(e->name, "axpy_f32") == 0 && atomic_load(&l->loops) == 0) {
        atomic_fetch_add(&l->kernels_inside, 1); /* the body's, told before the loop ends */
    }
}

static void test_trace(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    if (!tc_backend_is("cpu")) {
        tc_skip("%s does not time its streams", tc_spec());
    }
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(loop(f, 8));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    reset(f, 3.0f, 0.0f);
    loop_spans spans = {0};
    acg_trace_config c = ACG_TRACE_CONFIG_INIT;
    c.fn = trace_loops;
    c.user = &spans;
    c.categories = ACG_TRACE_STREAM;
    TC_OK(acg_trace_set_hook(&c));
    TC_OK(acg_graph_launch(g, f->t.s));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_trace_set_hook(NULL));
    assert_int_equal(atomic_load(&spans.loops), 1);
    assert_int_equal(atomic_load(&spans.runs), 3);
    assert_int_equal(atomic_load(&spans.kernels_inside), 3);
    TC_OK(acg_graph_destroy(g));
}

/* ---- the body's rules ---------------------------------------------------------------------- */

static void nothing(void *user) { (void)user; }

static void test_eager_body_rules(void **state) {
    fx *f = *state;
    reset(f, 2.0f, 0.0f);
    acg_event *e = tc_event(f->t.dev);
    float h[N];
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_copy_h2d(f->t.s, f->y, 0, h, BYTES),
                  "acg_copy_h2d inside a loop");
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_copy_d2h(f->t.s, h, f->y, 0, BYTES), "loop's body");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_event_record(e, f->t.s));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_wait_event(f->t.s, e));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_declare_foreign(f->t.s, "x", NULL, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_launch_host(f->t.s, nothing, NULL, NULL, 0));
    /* The body's buffers are held until the loop closes. */
    TC_OK(body(f, 0));
    TC_EXPECT_HAS(ERR_IN_USE, acg_buffer_free(f->y), "loop");
    /* No capture begins on a stream with an eager loop open. */
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_begin_capture(f->t.s, NULL), "a loop is open");
    TC_OK(acg_stream_loop_end(f->t.s));
    float want[N];
    unrolled(f, 2, want);
    reset(f, 2.0f, 0.0f);
    TC_OK(loop(f, 10));
    expect_y(f, want);
    TC_OK(acg_event_destroy(e));
}

static void test_capture_body_rules(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    void *pinned = tc_pinned(f->t.dev, BYTES);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, acg_copy_h2d(f->t.s, f->y, 0, pinned, BYTES),
                  "acg_copy_h2d inside a loop");
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_loop_end(f->t.s));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_loop_end(f->t.s)); /* none open: refused too */
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g));
    /* An event recorded in a body invalidates the capture too. */
    acg_event *e = tc_event(f->t.dev);
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, acg_event_record(e, f->t.s), "acg_event_record");
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g));
    /* A capture ended with a loop open is invalidated, naming the loop. */
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_OK(body(f, 0));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g), "loop(s) open");
    TC_EXPECT_CAPTURE_STATE(f->t.s, NONE);
    /* Scratch of the capture may hold the condition. */
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    acg_buffer *sc = NULL;
    TC_OK(acg_stream_alloc(f->t.s, 16, &sc));
    TC_OK(acg_fill(f->t.s, sc, 0, 16, 0, 4));
    TC_OK(acg_stream_loop_begin(f->t.s, sc, 0, 3));
    TC_OK(tc_axpy(f->t.s, &f->t.k, f->y, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_loop_end(f->t.s));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    /* ... but no other capture's, nor no capture's. */
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_begin(f->t.s, sc, 0, 3), "graph scratch");
    acg_graph *h = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_begin(f->t.s, sc, 0, 3), "graph scratch");
    TC_OK(acg_stream_end_capture(f->t.s, &h));
    TC_OK(acg_graph_destroy(h));
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_pinned_free(pinned));
}

/* A loop's body is one stream's: work on another stream of the capture while it is open, or a
 * fork into it, invalidates the capture. */
static void test_capture_other_stream(void **state) {
    fx *f = *state;
    need_graph_loops(f);
    acg_stream *b = tc_stream(f->t.dev);
    acg_event *e = tc_event(f->t.dev);
    acg_graph *g = NULL;
    if (!tc_has_multi_stream_capture(f->t.dev, f->t.s, b, e)) {
        TC_OK(acg_event_destroy(e));
        TC_OK(acg_stream_destroy(b));
        return;
    }
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_event_record(e, f->t.s));
    TC_OK(acg_stream_wait_event(b, e)); /* b joins before the loop */
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, tc_fill(b, &f->t.k, f->y, 0, N, 1.0f),
                  "one stream's work");
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g));
    acg_stream *c = tc_stream(f->t.dev);
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_event_record(e, f->t.s));
    TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 10));
    TC_EXPECT_HAS(ERR_CAPTURE_INVALIDATED, acg_stream_wait_event(c, e), "one stream's work");
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(f->t.s, &g));
    TC_OK(acg_stream_destroy(c));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_stream_destroy(b));
}

/* ---- refusals of bad arguments --------------------------------------------------------------- */

static void test_refusals(void **state) {
    fx *f = *state;
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_begin(f->t.s, f->c, 4, 0),
                  "max_iterations is 0");
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_begin(f->t.s, f->c, 2, 4), "multiple of 4");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_stream_loop_begin(f->t.s, f->c, 16, 4));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_loop_begin(f->t.s, NULL, 0, 4));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_loop_begin(NULL, f->c, 0, 4));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_loop_end(NULL));
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_end(f->t.s), "no loop is open");
    acg_device *other = tc_open_cpu();
    acg_buffer *ob = tc_buffer(other, 16);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_loop_begin(f->t.s, ob, 0, 4));
    TC_FREE_BUFFERS(ob);
    tc_close(other);
    /* ACG_MAX_LOOP_DEPTH open at once, then no more; closing them all runs nothing amiss. */
    reset(f, 0.0f, 0.0f); /* every condition clear: each loop runs its (empty) body once */
    for (int i = 0; i < ACG_MAX_LOOP_DEPTH; i++) {
        TC_OK(acg_stream_loop_begin(f->t.s, f->c, 4, 4));
    }
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_stream_loop_begin(f->t.s, f->c, 4, 4),
                  "loops are open");
    for (int i = 0; i < ACG_MAX_LOOP_DEPTH; i++) {
        TC_OK(acg_stream_loop_end(f->t.s));
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_loop_end(f->t.s));
    /* A stream destroyed with a loop open: the loop goes with it, its buffers free again. */
    acg_stream *s = tc_stream(f->t.dev);
    TC_OK(acg_stream_loop_begin(s, f->c, 4, 4));
    TC_OK(tc_axpy(s, &f->t.k, f->y, 0, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_destroy(s));
    acg_buffer *y = f->y;
    TC_OK(acg_buffer_free(y));
    f->y = tc_buffer(f->t.dev, BYTES);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_eager_runs_until_clear),
    T(test_eager_max_iterations),
    T(test_eager_nested),
    T(test_replay_matches_eager),
    T(test_replay_nested),
    T(test_description),
    T(test_update),
    T(test_update_node),
    T(test_eager_body_rules),
    T(test_trace),
    T(test_capture_body_rules),
    T(test_capture_other_stream),
    T(test_refusals),
};
#undef T
TC_MAIN("test_loop", tests)
