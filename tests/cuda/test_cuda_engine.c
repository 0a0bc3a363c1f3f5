/* test_cuda_engine.c — what an engine built on the cuda backend relies on, run against acg's
 * CUDA test driver (tests/cuda_driver, named by ACG_CUDA_DRIVER):
 *   - acg_graph_update_kernel_node on a natively captured graph that also holds the engine's
 *     own work on acg's buffers (a memset and a copy through their native addresses, declared
 *     foreign work): a scalar, a buffer and the grid changed in place (the kernel node found
 *     during capture, set with cuGraphExecKernelNodeSetParams), each replay equal to the same
 *     step run eagerly, bit for bit; refusals (a wrong type, a window out of range, a node that
 *     is not a kernel, a node past the end, a grid CUDA cannot launch, the driver refusing
 *     either of its two calls) leave the graph replaying as before;
 *   - per-node updates after whole updates: in place (the exec's node is still named by the
 *     graph it was instantiated from), after CUDA refused one (instantiated again), from a graph
 *     built from the ledger, on a kernel of a forked stream; a whole update from a graph changed
 *     node by node takes the change;
 *   - kernels checked when loaded: a definition whose types disagree with the parameters of its
 *     compiled function (which the driver reads from the image, never from the definition) is
 *     refused naming the kernel, the function and the parameter; one that agrees loads and runs;
 *   - --expect-no-param-info: a driver without cuFuncGetParamInfo and cuStreamGetCaptureInfo
 *     loads such a definition unchecked, still captures and replays kernels, and has no per-node
 *     updates (graph_node_update false, ACG_ERR_UNSUPPORTED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <acg/acg.h>
#include <acg/model.h>

#include "backend_scene.h" /* bs_driver */
#include "common.h"        /* tc_alloc_sweep */
#include "cuda_native.h"

#define N 256
#define BYTES (N * sizeof(float))

/* ---- the test driver, and the driver calls the engine makes itself ------------------------- */

static bs_driver drv = CU_TEST_DRIVER;
static cu_engine eng;

/* Binds the driver the backend loaded (a device was opened once). */
static void bind_driver(void) {
    bs_driver_bind(&drv);
    cu_engine_bind(&drv, &eng);
}

/* ---- the step ------------------------------------------------------------------------------ */

typedef struct fx {
    acg_device *dev;
    acg_stream *s, *s2;
    acg_event *fork, *join;
    acg_graph_pool *pool, *other;
    acg_kernel *fill, *add;
    acg_buffer *y, *z, *w, *v;
    float *host; /* (N) pinned */
    CUstream native;
} fx;

/* One step of the engine: y[0..fill_n) = fill (acg), z = memset (the engine's cuMemsetD32Async
 * on z's native address), w = in + add (acg), v = w (the engine's cuMemcpyDtoDAsync), v to the
 * pinned host memory. Nodes: 0 fill, 1 foreign, 2 add, 3 foreign, 4 the download. */
typedef struct step {
    float fill;
    uint32_t fill_n;
    float memset;
    acg_buffer *in;
    float add;
} step;

static acg_status run_step(fx *f, const step *p) {
    acg_arg fill_args[] = {acg_arg_buffer(f->y, 0), acg_arg_f32(p->fill)};
    acg_arg add_args[] = {acg_arg_buffer(f->w, 0), acg_arg_buffer(p->in, 0), acg_arg_f32(p->add)};
    acg_dims fill_dims = acg_dims_1d(p->fill_n), dims = acg_dims_1d(N);
    acg_access wz = {f->z, 0, 0, ACG_ACCESS_WRITE};
    acg_access wv[] = {{f->w, 0, 0, ACG_ACCESS_READ}, {f->v, 0, 0, ACG_ACCESS_WRITE}};
    acg_status st = acg_kernel_launch(f->s, f->fill, &fill_dims, fill_args, 2);
    if (st == ACG_OK) {
        assert_int_equal(eng.memset32(cu_address(f->z), cu_bits_of(p->memset), N, f->native),
                         CUDA_SUCCESS);
        st = acg_stream_declare_foreign(f->s, "engine memset", &wz, 1);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(f->s, f->add, &dims, add_args, 3);
    }
    if (st == ACG_OK) {
        assert_int_equal(eng.d2d(cu_address(f->v), cu_address(f->w), BYTES, f->native),
                         CUDA_SUCCESS);
        st = acg_stream_declare_foreign(f->s, "engine copy", wv, 2);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(f->s, f->host, f->v, 0, BYTES);
    }
    return st;
}

static acg_graph *capture_step(fx *f, acg_graph_pool *pool, const step *p) {
    TC_OK(acg_stream_begin_capture(f->s, pool));
    TC_OK(run_step(f, p));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->s, &g));
    return g;
}

/* What a run left in every buffer it touches. */
typedef struct result {
    float y[N], z[N], w[N], v[N], host[N];
} result;

/* Zeroes every buffer, then replays g (or, with g NULL, runs step p eagerly), and reads back. */
static void run(fx *f, acg_graph *g, const step *p, result *out) {
    acg_buffer *bufs[] = {f->y, f->z, f->w, f->v};
    for (int i = 0; i < 4; i++) {
        TC_OK(acg_fill(f->s, bufs[i], 0, BYTES, 0, 4));
    }
    TC_OK(acg_stream_synchronize(f->s));
    memset(f->host, 0, BYTES);
    if (g != NULL) {
        TC_OK(acg_graph_launch(g, f->s));
    } else {
        TC_OK(run_step(f, p));
    }
    TC_OK(acg_stream_synchronize(f->s));
    float *outs[] = {out->y, out->z, out->w, out->v};
    for (int i = 0; i < 4; i++) {
        TC_OK(acg_copy_d2h(f->s, outs[i], bufs[i], 0, BYTES));
    }
    memcpy(out->host, f->host, BYTES);
}

/* g's replay leaves what step p leaves eagerly, bit for bit. */
static void expect_replay(fx *f, acg_graph *g, const step *p) {
    result got, want;
    run(f, g, p, &got);
    run(f, NULL, p, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    TC_OK(acg_device_open("cuda", &f->dev));
    bind_driver();
    TC_OK(acg_stream_create(f->dev, &f->s));
    TC_OK(acg_stream_create(f->dev, &f->s2));
    TC_OK(acg_event_create(f->dev, &f->fork));
    TC_OK(acg_event_create(f->dev, &f->join));
    TC_OK(acg_graph_pool_create(f->dev, &f->pool));
    TC_OK(acg_graph_pool_create(f->dev, &f->other));
    TC_OK(acg_kernel_get(f->dev, "fill_f32", &f->fill));
    TC_OK(acg_kernel_get(f->dev, "add_scalar_f32", &f->add));
    acg_buffer **bufs[] = {&f->y, &f->z, &f->w, &f->v};
    for (int i = 0; i < 4; i++) {
        TC_OK(acg_buffer_alloc(f->dev, BYTES, bufs[i]));
    }
    TC_OK(acg_pinned_alloc(f->dev, BYTES, (void **)&f->host));
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(f->s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_CUDA_STREAM);
    f->native = (CUstream)h.handle;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    drv.inject(NULL, 0, 0);
    TC_OK(acg_stream_synchronize(f->s));
    TC_OK(acg_pinned_free(f->host));
    acg_buffer *bufs[] = {f->y, f->z, f->w, f->v};
    for (int i = 0; i < 4; i++) {
        TC_OK(acg_buffer_free(bufs[i]));
    }
    TC_OK(acg_graph_pool_destroy(f->other));
    TC_OK(acg_graph_pool_destroy(f->pool));
    TC_OK(acg_event_destroy(f->join));
    TC_OK(acg_event_destroy(f->fork));
    TC_OK(acg_stream_destroy(f->s2));
    TC_OK(acg_stream_destroy(f->s));
    TC_OK(acg_device_close(f->dev));
    free(f);
    return 0;
}

/* ---- per-node updates ---------------------------------------------------------------------- */

static acg_status set_fill(acg_graph *g, fx *f, const step *p, const acg_dims *dims) {
    acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_f32(p->fill)};
    return acg_graph_update_kernel_node(g, 0, dims, args, 2);
}

static acg_status set_add(acg_graph *g, fx *f, const step *p) {
    acg_arg args[] = {acg_arg_buffer(f->w, 0), acg_arg_buffer(p->in, 0), acg_arg_f32(p->add)};
    return acg_graph_update_kernel_node(g, 2, NULL, args, 3);
}

/* A scalar, a buffer and the grid of a graph holding the engine's work, changed in place: each
 * replay is the eager step with the new arguments, the engine's work still in it. Every refusal
 * leaves the graph replaying what it did. */
static void test_update_node(void **state) {
    fx *f = *state;
    const acg_capability *cap = acg_device_get_capability(f->dev);
    assert_true(cap->graph_node_update);
    assert_true(cap->graph_node_update_grid);
    assert_true(cap->graph_pinned_replay);
    step p = {1.5f, N, 4.0f, f->y, 0.25f};
    acg_graph *g = capture_step(f, f->pool, &p);
    static const acg_node_kind kinds[] = {ACG_NODE_KERNEL, ACG_NODE_FOREIGN, ACG_NODE_KERNEL,
                                          ACG_NODE_FOREIGN, ACG_NODE_COPY_D2H};
    tc_expect_node_kinds(g, kinds, 5);
    expect_replay(f, g, &p);

    /* A scalar: in place, no instantiation. */
    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    unsigned long sets = drv.calls("cuGraphExecKernelNodeSetParams");
    p.fill = -3.0f;
    TC_OK(set_fill(g, f, &p, NULL));
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst);
    assert_int_equal(drv.calls("cuGraphExecKernelNodeSetParams"), sets + 1);
    expect_replay(f, g, &p);

    /* A buffer: w = z + add reads what the engine's memset wrote. */
    p.in = f->z;
    p.add = 0.5f;
    TC_OK(set_add(g, f, &p));
    expect_replay(f, g, &p);

    /* The grid: half of y filled, the rest left zero. */
    p.fill_n = N / 2;
    acg_dims half = acg_dims_1d(N / 2);
    TC_OK(set_fill(g, f, &p, &half));
    expect_replay(f, g, &p);

    /* Refused by acg, before anything changes. */
    acg_arg wrong[] = {acg_arg_buffer(f->y, 0), acg_arg_u32(3)};
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(g, 0, NULL, wrong, 2), "");
    acg_buffer *small = NULL;
    TC_OK(acg_buffer_create_view(f->z, 0, BYTES / 4, &small));
    step beyond = p;
    beyond.in = small; /* a window of N floats in a view of N / 4 */
    acg_status st = set_add(g, f, &beyond);
    assert_true(st == ACG_ERR_INVALID_ARGUMENT || st == ACG_ERR_OUT_OF_RANGE);
    acg_arg none[] = {acg_arg_buffer(f->y, 0), acg_arg_f32(1.0f)};
    TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_graph_update_kernel_node(g, 1, NULL, none, 2),
                  "foreign work, not a kernel");
    TC_EXPECT_HAS(ERR_OUT_OF_RANGE, acg_graph_update_kernel_node(g, 5, NULL, none, 2), "no node 5");
    expect_replay(f, g, &p);

    /* Refused by the driver: the exec's node, then the graph's (the exec is set back). */
    step later = p;
    later.fill = 8.0f;
    drv.inject("cuGraphExecKernelNodeSetParams", 1, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(ERR_DEVICE, set_fill(g, f, &later, NULL),
                  "cuGraphExecKernelNodeSetParams failed with CUDA_ERROR_INVALID_VALUE");
    expect_replay(f, g, &p);
    unsigned long back = drv.calls("cuGraphExecKernelNodeSetParams");
    drv.inject("cuGraphKernelNodeSetParams", 1, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(ERR_DEVICE, set_fill(g, f, &later, NULL),
                  "acg_graph_update_kernel_node: cuGraphKernelNodeSetParams failed with "
                  "CUDA_ERROR_INVALID_VALUE");
    assert_int_equal(drv.calls("cuGraphExecKernelNodeSetParams"), back + 2); /* set, set back */
    expect_replay(f, g, &p);
    /* The context made current last, after every check (the update's own call of it). */
    unsigned long entered = drv.calls("cuCtxSetCurrent");
    TC_OK(set_fill(g, f, &p, NULL));
    entered = drv.calls("cuCtxSetCurrent") - entered;
    drv.inject("cuCtxSetCurrent", (unsigned)entered, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(
        ERR_DEVICE, set_fill(g, f, &later, NULL),
        "acg_graph_update_kernel_node: cuCtxSetCurrent failed with CUDA_ERROR_INVALID_VALUE");
    expect_replay(f, g, &p);

    /* The engine's work still writes acg's buffers: they stay alive while the graph does. */
    TC_EXPECT_HAS(ERR_IN_USE, acg_buffer_free(f->v), "");
    TC_OK(acg_buffer_free(small));
    TC_OK(acg_graph_destroy(g));
}

/* A grid the launch could not have, 65,536 blocks in y, is refused with ACG_ERR_UNSUPPORTED as a
 * launch is, and the graph replays as before (the model's matmul, grid (n_out, n)). */
static void test_update_node_grid_limit(void **state) {
    fx *f = *state;
    TC_OK(acg_model_register_kernels());
    cu_tall t;
    cu_tall_open(&t, f->dev);
    float in[N];
    for (int i = 0; i < N; i++) {
        in[i] = 1.0f + (float)i;
    }
    TC_OK(acg_copy_h2d(f->s, t.x, 0, in, sizeof in));
    TC_OK(acg_fill(f->s, t.w, 0, sizeof(float), cu_bits_of(2.0f), 4));
    acg_arg args[6], tall_args[6];
    acg_dims dims, tall;
    cu_tall_rows(&t, N, args, &dims);
    cu_tall_rows(&t, CU_TALL_ROWS, tall_args, &tall);
    TC_OK(acg_stream_begin_capture(f->s, f->pool));
    TC_OK(acg_kernel_launch(f->s, t.matmul, &dims, args, 6));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->s, &g));
    TC_EXPECT_HAS(ERR_UNSUPPORTED, acg_graph_update_kernel_node(g, 0, &tall, tall_args, 6),
                  "blocks");
    /* The replay is the launch of N rows, eager. */
    float got[N + 1], want[N + 1];
    for (int r = 0; r < 2; r++) {
        TC_OK(acg_fill(f->s, t.out, 0, CU_TALL_ROWS * sizeof(float), 0, 4));
        TC_OK(r == 0 ? acg_graph_launch(g, f->s)
                     : acg_kernel_launch(f->s, t.matmul, &dims, args, 6));
        TC_OK(acg_copy_d2h(f->s, r == 0 ? got : want, t.out, 0, sizeof got));
    }
    assert_int_equal(memcmp(got, want, sizeof got), 0);
    assert_true(got[N] == 0.0f && got[N - 1] != 0.0f);
    TC_OK(acg_graph_destroy(g));
    cu_tall_close(&t);
}

/* Per-node updates after whole ones. In place from the new capture's own graph (a clone): the
 * exec's nodes are still named by the graph it was instantiated from, which the driver checks.
 * A whole update from a graph changed node by node takes the change. After CUDA refused a
 * whole update (the exec instantiated again from the clone), and from a graph built from the
 * ledger (another pool), nodes update as well. */
static void test_update_node_after_update(void **state) {
    fx *f = *state;
    step p = {1.0f, N, 2.0f, f->y, 1.0f};
    step q = {5.0f, N, 7.0f, f->z, -1.0f};
    acg_graph *g = capture_step(f, f->pool, &p);
    acg_graph *h = capture_step(f, f->pool, &q);
    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    TC_OK(acg_graph_update(g, h));
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst); /* in place */
    expect_replay(f, g, &q);
    q.fill = 6.5f;
    TC_OK(set_fill(g, f, &q, NULL));
    expect_replay(f, g, &q);
    q.in = f->y;
    TC_OK(set_add(g, f, &q));
    expect_replay(f, g, &q);

    /* h from g, changed node by node since its own update: h takes g's nodes as they are. */
    TC_OK(acg_graph_update(h, g));
    expect_replay(f, h, &q);
    TC_OK(set_fill(h, f, &p, NULL));
    step hp = q;
    hp.fill = p.fill;
    expect_replay(f, h, &hp);
    expect_replay(f, g, &q); /* g is its own */

    /* CUDA refuses the whole update: g is instantiated again, and its nodes update. */
    acg_graph *k = capture_step(f, f->pool, &p);
    drv.inject("cuGraphExecUpdate", 1, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    inst = drv.calls("cuGraphInstantiateWithFlags");
    TC_OK(acg_graph_update(g, k));
    drv.inject(NULL, 0, 0);
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    expect_replay(f, g, &p);
    p.fill = -0.75f;
    p.add = 3.0f;
    TC_OK(set_fill(g, f, &p, NULL));
    TC_OK(set_add(g, f, &p));
    expect_replay(f, g, &p);

    /* The nodes of a clone not found: the whole update fails, the graph is as it was. */
    drv.inject("cuGraphNodeFindInClone", 2, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(ERR_DEVICE, acg_graph_update(g, h), "cuGraphNodeFindInClone");
    expect_replay(f, g, &p);
    TC_OK(acg_graph_destroy(k));
    TC_OK(acg_graph_destroy(h));
    TC_OK(acg_graph_destroy(g));
}

/* acg's own work forked over two streams, into graph scratch *t: y = a (fill), then on the
 * forked stream t = y + b (add), t to the pinned host memory. */
static acg_graph *capture_fork(fx *f, acg_graph_pool *pool, float a, float b, acg_buffer **t) {
    acg_arg fill_args[] = {acg_arg_buffer(f->y, 0), acg_arg_f32(a)};
    acg_dims dims = acg_dims_1d(N);
    TC_OK(acg_stream_begin_capture(f->s, pool));
    TC_OK(acg_stream_alloc(f->s, BYTES, t));
    acg_arg add_args[] = {acg_arg_buffer(*t, 0), acg_arg_buffer(f->y, 0), acg_arg_f32(b)};
    TC_OK(acg_kernel_launch(f->s, f->fill, &dims, fill_args, 2));
    TC_OK(acg_event_record(f->fork, f->s));
    TC_OK(acg_stream_wait_event(f->s2, f->fork));
    TC_OK(acg_kernel_launch(f->s2, f->add, &dims, add_args, 3));
    TC_OK(acg_event_record(f->join, f->s2));
    TC_OK(acg_stream_wait_event(f->s, f->join));
    TC_OK(acg_copy_d2h(f->s, f->host, *t, 0, BYTES));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(f->s, &g));
    return g;
}

static void expect_host(fx *f, acg_graph *g, float want) {
    memset(f->host, 0, BYTES);
    TC_OK(acg_graph_launch(g, f->s));
    TC_OK(acg_stream_synchronize(f->s));
    for (int i = 0; i < N; i++) {
        assert_true(f->host[i] == want);
    }
}

/* The two graphs' scratch lies in two pools: the whole update is built from the ledger (with
 * the target's own scratch), and the forked stream's kernel updates in place before and after
 * it. */
static void test_update_node_ledger(void **state) {
    fx *f = *state;
    acg_buffer *tg = NULL, *th = NULL;
    acg_graph *g = capture_fork(f, f->pool, 1.0f, 0.5f, &tg);
    acg_graph *h = capture_fork(f, f->other, 3.0f, 0.25f, &th);
    expect_host(f, g, 1.5f);
    size_t kernel = 0;
    for (acg_node_info info = {0}; acg_graph_get_node(g, kernel, &info) == ACG_OK; kernel++) {
        if (info.kind == ACG_NODE_KERNEL && strcmp(info.kernel, "add_scalar_f32") == 0) {
            break;
        }
    }
    assert_true(kernel >= 1);
    acg_arg add_args[] = {acg_arg_buffer(tg, 0), acg_arg_buffer(f->y, 0), acg_arg_f32(2.0f)};
    TC_OK(acg_graph_update_kernel_node(g, kernel, NULL, add_args, 3));
    expect_host(f, g, 3.0f);
    unsigned long built = drv.calls("cuGraphCreate");
    TC_OK(acg_graph_update(g, h));
    assert_int_equal(drv.calls("cuGraphCreate"), built + 1);
    expect_host(f, g, 3.25f);
    TC_OK(acg_graph_update_kernel_node(g, kernel, NULL, add_args, 3));
    expect_host(f, g, 5.0f);
    expect_host(f, h, 3.25f);
    TC_OK(acg_graph_destroy(h));
    TC_OK(acg_graph_destroy(g));
}

/* ---- out of memory --------------------------------------------------------------------------- */

typedef struct sweep {
    fx *f;
    acg_graph *g, *h;
    step p, q;
} sweep;

static acg_status try_capture(fx *f, const step *p, acg_graph **out) {
    acg_status st = acg_stream_begin_capture(f->s, f->pool);
    if (st != ACG_OK) {
        return st;
    }
    st = run_step(f, p);
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(f->s, &g);
    if (st == ACG_OK && end == ACG_OK) {
        *out = g;
        return ACG_OK;
    }
    acg_graph_destroy(g);
    return st != ACG_OK ? st : end;
}

static acg_status sweep_capture(void *ctx) {
    sweep *w = ctx;
    acg_graph *g = NULL;
    acg_status st = try_capture(w->f, &w->p, &g);
    return st == ACG_OK ? acg_graph_destroy(g) : st;
}

static acg_status sweep_update(void *ctx) {
    sweep *w = ctx;
    return acg_graph_update(w->g, w->h);
}

static acg_status sweep_node(void *ctx) {
    sweep *w = ctx;
    return set_fill(w->g, w->f, &w->q, NULL);
}

/* Every allocation of a capture (the nodes of acg's launches recorded as they come), of a whole
 * update from the source's clone (its nodes found in it) and of a node update (if it makes any)
 * failing in turn: ACG_ERR_OUT_OF_MEMORY, nothing leaked, and the graph then replays the update
 * that passed. */
static void test_out_of_memory(void **state) {
    (void)state;
    tc_alloc_install();
    void *fixture = NULL;
    setup(&fixture);
    sweep w = {fixture, NULL, NULL, {1.0f, N, 2.0f, NULL, 0.5f}, {-2.0f, N, 3.0f, NULL, 4.0f}};
    w.p.in = w.q.in = w.f->y;
    assert_true(tc_alloc_sweep(sweep_capture, &w, false) > 0);
    TC_OK(try_capture(w.f, &w.p, &w.g));
    TC_OK(try_capture(w.f, &w.q, &w.h));
    TC_OK(acg_graph_update(w.g, w.h)); /* the first keeps the graph g was instantiated from */
    assert_true(tc_alloc_sweep(sweep_update, &w, false) > 0);
    expect_replay(w.f, w.g, &w.q);
    w.q.fill = 9.5f;
    tc_alloc_sweep(sweep_node, &w, false); /* today it allocates nothing */
    expect_replay(w.f, w.g, &w.q);
    TC_OK(acg_graph_destroy(w.h));
    TC_OK(acg_graph_destroy(w.g));
    teardown(&fixture);
    tc_alloc_uninstall();
}

/* ---- kernels checked against their compiled functions -------------------------------------- */

/* An image as the test driver reads it: the fatbin magic, then one line per function with its
 * parameters' sizes, as a compiler would have laid them out. Each takes a float pointer and a
 * float (as fill_f32), then the three global sizes. */
#define TEST_IMAGE(lines)                                                                          \
    "\x50\xed\x55\xba"                                                                             \
    "acgtest-cuda-image\n" lines

static const char image[] = TEST_IMAGE("tk_fill_count 8 4 4 4 4\n"
                                       "tk_fill_size 8 4 4 4 4\n"
                                       "tk_fill_more 8 4 4 4 4\n"
                                       "tk_fill_pointer 8 4 4 4 4\n"
                                       "tk_fill_global 8 4 4 8 4\n"
                                       "tk_fill 8 4 4 4 4\n");

static void fill_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] = a[1].f32;
    }
}

/* A one-buffer elementwise definition of `name`, with the given types after the buffer, for
 * the function `function` of the image. */
static acg_kernel_desc definition(const char *name, const char *function, uint32_t n_args,
                                  const acg_arg_type *types) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = name;
    d.n_args = n_args;
    memcpy(d.types, types, n_args * sizeof *types);
    for (uint32_t i = 0; i < n_args; i++) {
        d.bytes_per_item[i] = types[i] == ACG_ARG_BUFFER ? 4 : 0;
    }
    d.dims = 1;
    d.flags = ACG_KERNEL_ELEMENTWISE;
    d.cpu.fn = fill_cpu;
    d.cuda.fatbin = image;
    d.cuda.size = sizeof image;
    d.cuda.name = function;
    return d;
}

/* Registers the definition, gets it on the device and unregisters it: the status of the get. */
static acg_status try_kernel(fx *f, const acg_kernel_desc *d, acg_kernel **out) {
    TC_OK(acg_kernel_register(d));
    acg_status st = acg_kernel_get(f->dev, d->name, out);
    if (st != ACG_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", acg_last_error());
        TC_OK(acg_kernel_unregister(d->name));
        acg_set_last_error(st, "%s", why);
    }
    return st;
}

/* Definitions the image's functions refuse: each is refused when loaded, naming the kernel,
 * the function and what differs (a mismatch after querying the function's parameters). */
static const struct {
    const char *name, *function;
    uint32_t n_args;
    acg_arg_type types[3];
    acg_status want;
    const char *message;
} refused[] = {
    /* One argument too many. */
    {"tc_count",
     "tk_fill_count",
     3,
     {ACG_ARG_BUFFER, ACG_ARG_F32, ACG_ARG_I32},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_count): the CUDA function tk_fill_count has 5 parameters; acg passes 6: "
     "buffer argument 0 (a pointer), argument 1 (an f32), argument 2 (an i32), then "
     "global[0..2] (3 unsigned int) (cuFuncGetParamInfo refuses parameter 5 with "
     "CUDA_ERROR_INVALID_VALUE)"},
    /* One too few: the function has more than acg passes. */
    {"tc_more",
     "tk_fill_more",
     1,
     {ACG_ARG_BUFFER},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_more): the CUDA function tk_fill_more has 5 parameters; acg passes 4: "
     "buffer argument 0 (a pointer), then global[0..2] (3 unsigned int)"},
    /* A scalar of another size. */
    {"tc_size",
     "tk_fill_size",
     2,
     {ACG_ARG_BUFFER, ACG_ARG_U64},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_size): in the CUDA function tk_fill_size, parameter 1 is 4 bytes, acg "
     "passes argument 1, a u64 (8 bytes)"},
    /* A buffer where the function takes 4 bytes. */
    {"tc_buffer",
     "tk_fill_size",
     2,
     {ACG_ARG_BUFFER, ACG_ARG_BUFFER},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_buffer): in the CUDA function tk_fill_size, parameter 1 is 4 bytes, acg "
     "passes buffer argument 1, a pointer (8 bytes)"},
    /* A float where the function takes a pointer. */
    {"tc_pointer",
     "tk_fill_pointer",
     2,
     {ACG_ARG_F32, ACG_ARG_BUFFER},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_pointer): in the CUDA function tk_fill_pointer, parameter 0 is 8 bytes, "
     "acg passes argument 0, an f32 (4 bytes)"},
    /* A global size the function takes as 8 bytes. */
    {"tc_global",
     "tk_fill_global",
     2,
     {ACG_ARG_BUFFER, ACG_ARG_F32},
     ACG_ERR_INVALID_ARGUMENT,
     "acg_kernel_get(tc_global): in the CUDA function tk_fill_global, parameter 3 is 8 bytes, "
     "acg passes global[1], an unsigned int (4 bytes)"},
    /* A function the image lacks: the driver's own refusal. */
    {"tc_absent",
     "tk_absent",
     2,
     {ACG_ARG_BUFFER, ACG_ARG_F32},
     ACG_ERR_UNSUPPORTED,
     "cuLibraryGetKernel failed with CUDA_ERROR_NOT_FOUND"},
};

static void test_kernel_params(void **state) {
    fx *f = *state;
    acg_kernel *k = NULL;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        unsigned long queried = drv.calls("cuFuncGetParamInfo");
        acg_kernel_desc d =
            definition(refused[i].name, refused[i].function, refused[i].n_args, refused[i].types);
        char call[96]; /* the call, and the row */
        snprintf(call, sizeof call, "try_kernel(f, &d, &k) for %s", refused[i].name);
        tc_expect_(refused[i].want, try_kernel(f, &d, &k), call, __FILE__, __LINE__);
        TC_LAST_ERROR_HAS(refused[i].message);
        if (refused[i].want == ACG_ERR_INVALID_ARGUMENT) {
            assert_true(drv.calls("cuFuncGetParamInfo") > queried);
        }
    }
    const acg_arg_type B = ACG_ARG_BUFFER, F = ACG_ARG_F32;
    acg_kernel_desc d;

    /* The driver failing a query: its error, not a mismatch. */
    d = definition("tc_fill", "tk_fill", 2, (const acg_arg_type[]){B, F});
    drv.inject("cuFuncGetParamInfo", 2, CUDA_ERROR_OUT_OF_MEMORY);
    TC_EXPECT_HAS(ERR_OUT_OF_MEMORY, try_kernel(f, &d, &k),
                  "cuFuncGetParamInfo failed with CUDA_ERROR_OUT_OF_MEMORY");
    drv.inject("cuKernelGetFunction", 1, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(ERR_DEVICE, try_kernel(f, &d, &k), "cuKernelGetFunction failed");

    /* Agreeing: loads and runs. */
    TC_OK(try_kernel(f, &d, &k));
    acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_f32(6.25f)};
    acg_dims dims = acg_dims_1d(N);
    TC_OK(acg_kernel_launch(f->s, k, &dims, args, 2));
    TC_OK(acg_copy_d2h(f->s, f->host, f->y, 0, BYTES));
    TC_OK(acg_stream_synchronize(f->s));
    for (int i = 0; i < N; i++) {
        assert_true(f->host[i] == 6.25f);
    }
}

/* ---- the test driver's own refusals -------------------------------------------------------- */

/* A fatbin of one ELF entry of `elf_bytes` bytes that claims `claimed` bytes of payload. */
static void bad_fatbin(unsigned char *img, size_t elf_bytes, uint64_t claimed) {
    const uint64_t fat = 16 + elf_bytes;
    memset(img, 0, 32 + elf_bytes);
    memcpy(img, "\x50\xed\x55\xba\x01\x00\x10\x00", 8); /* magic, version 1, header 16 */
    memcpy(img + 8, &fat, 8);
    const uint16_t kind = 2;   /* an ELF */
    const uint32_t ehead = 16; /* the entry's header */
    static const unsigned char elf64[5] = {0x7f, 'E', 'L', 'F', 2};
    memcpy(img + 16, &kind, 2);
    memcpy(img + 20, &ehead, 4);
    memcpy(img + 24, &claimed, 8);
    memcpy(img + 32, elf64, sizeof elf64);
}

/* The entry points this change serves refuse what CUDA refuses: a capture query without its
 * status, edge data without dependencies; a node update of a node that is not a kernel, or not
 * of the exec's graph; a clone's node looked up in a graph that is no clone; a parameter past
 * the last; a function the image lacks; malformed images. */
static void test_driver_refusals(void **state) {
    fx *f = *state;
    PFN_cuStreamBeginCapture_v10010 begin;
    PFN_cuStreamEndCapture_v10000 end;
    PFN_cuStreamGetCaptureInfo_v12030 info;
    PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
    PFN_cuGraphExecDestroy_v10000 exec_destroy;
    PFN_cuGraphDestroy_v10000 graph_destroy;
    PFN_cuGraphClone_v10000 clone;
    PFN_cuGraphNodeFindInClone_v10000 find;
    PFN_cuGraphExecKernelNodeSetParams_v12000 exec_set;
    PFN_cuGraphKernelNodeSetParams_v12000 graph_set;
    PFN_cuLibraryLoadData_v12000 load;
    PFN_cuLibraryGetKernel_v12000 get_kernel;
    PFN_cuLibraryUnload_v12000 unload;
    PFN_cuKernelGetFunction_v12000 get_function;
    PFN_cuFuncGetParamInfo_v12040 param_info;
    *(void **)&begin = cu_entry(&drv, "cuStreamBeginCapture", 10010);
    *(void **)&end = cu_entry(&drv, "cuStreamEndCapture", 10000);
    *(void **)&info = cu_entry(&drv, "cuStreamGetCaptureInfo", 12030);
    *(void **)&instantiate = cu_entry(&drv, "cuGraphInstantiateWithFlags", 11040);
    *(void **)&exec_destroy = cu_entry(&drv, "cuGraphExecDestroy", 10000);
    *(void **)&graph_destroy = cu_entry(&drv, "cuGraphDestroy", 10000);
    *(void **)&clone = cu_entry(&drv, "cuGraphClone", 10000);
    *(void **)&find = cu_entry(&drv, "cuGraphNodeFindInClone", 10000);
    *(void **)&exec_set = cu_entry(&drv, "cuGraphExecKernelNodeSetParams", 12000);
    *(void **)&graph_set = cu_entry(&drv, "cuGraphKernelNodeSetParams", 12000);
    *(void **)&load = cu_entry(&drv, "cuLibraryLoadData", 12000);
    *(void **)&get_kernel = cu_entry(&drv, "cuLibraryGetKernel", 12000);
    *(void **)&unload = cu_entry(&drv, "cuLibraryUnload", 12000);
    *(void **)&get_function = cu_entry(&drv, "cuKernelGetFunction", 12000);
    *(void **)&param_info = cu_entry(&drv, "cuFuncGetParamInfo", 12040);

    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    const CUgraphEdgeData *edges = NULL;
    const CUgraphNode *deps = NULL;
    size_t n_deps = 0;
    assert_int_equal(info(f->native, NULL, NULL, NULL, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(info(f->native, &status, NULL, NULL, NULL, &edges, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(info(f->native, &status, NULL, NULL, &deps, NULL, &n_deps), CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_NONE);

    /* The engine's own capture: one memset node. */
    TC_OK(acg_stream_synchronize(f->s));
    assert_int_equal(begin(f->native, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    assert_int_equal(eng.memset32(cu_address(f->z), 0, N, f->native), CUDA_SUCCESS);
    cuuint64_t id = 0;
    CUgraph building = NULL;
    assert_int_equal(info(f->native, &status, &id, &building, &deps, &edges, &n_deps),
                     CUDA_SUCCESS);
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(n_deps, 1);
    assert_true(id != 0 && building != NULL && edges != NULL);
    CUgraphNode memset_node = deps[0];
    CUgraph graph = NULL, copy = NULL;
    CUgraphExec exec = NULL;
    assert_int_equal(end(f->native, &graph), CUDA_SUCCESS);
    assert_ptr_equal(graph, building);
    assert_int_equal(instantiate(&exec, graph, 0), CUDA_SUCCESS);
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    memset(&p, 0, sizeof p);
    assert_int_equal(exec_set(exec, memset_node, &p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(exec_set(exec, memset_node, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(graph_set(memset_node, &p), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(clone(&copy, graph), CUDA_SUCCESS);
    CUgraphNode found = NULL;
    assert_int_equal(find(&found, memset_node, graph), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(find(&found, memset_node, copy), CUDA_SUCCESS);
    assert_non_null(found);
    assert_true(found != memset_node);
    assert_int_equal(exec_set(exec, found, &p), CUDA_ERROR_INVALID_VALUE); /* not exec's graph */
    assert_int_equal(exec_destroy(exec), CUDA_SUCCESS);
    assert_int_equal(graph_destroy(copy), CUDA_SUCCESS);
    assert_int_equal(graph_destroy(graph), CUDA_SUCCESS);

    /* Parameters as the image says, and nothing past them. */
    const acg_arg_type types[] = {ACG_ARG_BUFFER, ACG_ARG_F32};
    acg_kernel_desc d = definition("tc_driver", "tk_fill_size", 2, types);
    TC_OK(acg_kernel_register(&d));
    CUlibrary lib = NULL;
    CUkernel kern = NULL;
    CUfunction fn = NULL;
    size_t offset = 0, size = 0;
    assert_int_equal(load(&lib, image, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    assert_int_equal(get_kernel(&kern, lib, "tk_absent"), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(get_kernel(&kern, lib, "tk_fill_size"), CUDA_SUCCESS);
    assert_int_equal(get_function(NULL, kern), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(get_function(&fn, NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(get_function(&fn, kern), CUDA_SUCCESS);
    assert_int_equal(param_info(fn, 1, &offset, &size), CUDA_SUCCESS);
    assert_true(offset == 8 && size == 4);
    assert_int_equal(param_info(fn, 4, &offset, NULL), CUDA_SUCCESS);
    assert_int_equal(offset, 20);
    assert_int_equal(param_info(fn, 5, &offset, &size), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(param_info(fn, 0, NULL, &size), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(param_info(NULL, 0, &offset, &size), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(unload(lib), CUDA_SUCCESS);
    TC_OK(acg_kernel_unregister("tc_driver"));

    /* Malformed images. */
    static const char *const texts[] = {
        TEST_IMAGE("tk 8 x\n"),     /* not a size */
        TEST_IMAGE("tk 8 4"),       /* no line end */
        TEST_IMAGE("tk 8\ntk 4\n"), /* a function twice */
        TEST_IMAGE(" 8\n"),         /* no name */
        TEST_IMAGE("tk 0\n"),       /* no bytes */
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        assert_int_equal(load(&lib, texts[i], NULL, NULL, 0, NULL, NULL, 0),
                         CUDA_ERROR_INVALID_IMAGE);
    }
    unsigned char fatbin[64];
    bad_fatbin(fatbin, 8, 8); /* an ELF too short for its header */
    assert_int_equal(load(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_IMAGE);
    bad_fatbin(fatbin, 8, 4096); /* an entry past the fatbin's end */
    assert_int_equal(load(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_IMAGE);
}

/* ---- a driver without the entry points ----------------------------------------------------- */

/* ACGTEST_CUDA_HIDE=cuFuncGetParamInfo,cuStreamGetCaptureInfo: the mismatched definition loads
 * unchecked, a kernel still captures and replays, and no node updates. */
static int expect_no_param_info(void) {
    acg_device *dev = bs_open_or_say("cuda");
    if (dev == NULL) {
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    int bad = !cap->graphs || cap->graph_node_update || cap->graph_node_update_grid ||
              strstr(cap->detail, "cuFuncGetParamInfo") == NULL;
    printf("graphs %d, node update %d: %s\n", cap->graphs, cap->graph_node_update, cap->detail);
    const acg_arg_type types[] = {ACG_ARG_BUFFER, ACG_ARG_F32, ACG_ARG_I32};
    acg_kernel_desc d = definition("tc_unchecked", "tk_fill_count", 3, types);
    acg_kernel *k = NULL;
    acg_stream *s = NULL;
    acg_buffer *y = NULL;
    acg_graph *g = NULL;
    acg_status st = acg_kernel_register(&d);
    if (st == ACG_OK) {
        st = acg_kernel_get(dev, "tc_unchecked", &k);
        printf("acg_kernel_get of a mismatched definition: %s\n", acg_status_name(st));
    }
    acg_kernel *fill = NULL;
    if (st == ACG_OK) {
        st = acg_kernel_get(dev, "fill_f32", &fill);
    }
    if (st == ACG_OK) {
        st = acg_stream_create(dev, &s);
    }
    if (st == ACG_OK) {
        st = acg_buffer_alloc(dev, BYTES, &y);
    }
    acg_arg args[] = {acg_arg_buffer(y, 0), acg_arg_f32(2.5f)};
    acg_dims dims = acg_dims_1d(N);
    if (st == ACG_OK) {
        st = acg_stream_begin_capture(s, NULL);
    }
    if (st == ACG_OK) {
        acg_status launch = acg_kernel_launch(s, fill, &dims, args, 2);
        st = acg_stream_end_capture(s, &g);
        st = launch != ACG_OK ? launch : st;
    }
    if (st == ACG_OK) {
        st = acg_graph_launch(g, s);
    }
    float back[N] = {0};
    if (st == ACG_OK) {
        st = acg_copy_d2h(s, back, y, 0, BYTES);
    }
    if (st == ACG_OK) {
        bad |= back[0] != 2.5f || back[N - 1] != 2.5f;
        st = acg_graph_update_kernel_node(g, 0, NULL, args, 2);
        printf("acg_graph_update_kernel_node: %s: %s\n", acg_status_name(st), acg_last_error());
        bad |= st != ACG_ERR_UNSUPPORTED;
        st = ACG_OK;
    } else {
        fprintf(stderr, "failed: %s: %s\n", acg_status_name(st), acg_last_error());
        bad = 1;
    }
    acg_graph_destroy(g);
    acg_buffer_free(y);
    acg_stream_destroy(s);
    acg_device_close(dev);
    acg_kernel_unregister("tc_unchecked");
    return bad;
}

static const bs_mode modes[] = {
    {"--expect-no-param-info", expect_no_param_info, NULL},
    {NULL, NULL, NULL},
};

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_out_of_memory), /* first: no acg object may live around it */
    T(test_update_node),
    T(test_update_node_grid_limit),
    T(test_update_node_after_update),
    T(test_update_node_ledger),
    T(test_kernel_params),
    T(test_driver_refusals),
};
#undef T

BS_MAIN("cuda", modes, "test_cuda_engine", tests)
