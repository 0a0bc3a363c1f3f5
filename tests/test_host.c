/*
 * test_host.c — work acg does not launch: host functions ordered on a stream (eager and
 * captured), the driver's object behind a stream, and foreign work declared into a capture's
 * ledger. Runs on every backend and on the cpu backend's native capture path
 * (--device "cpu:0?capture=native"), where the worker records captured work as a driver does.
 */
#include "common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 256

/* The device under test, streams s (t.s) and b, and buffers x and y (common.h). */
typedef tc_fixture2 fx;

/* The host step of the pipeline: out[i] = 3 * in[i] + calls, reading and writing pinned
 * memory that copies fill and drain around it. */
typedef struct host_step {
    const float *in;
    float *out;
    int calls;
} host_step;

static void host_scale(void *user) {
    host_step *h = user;
    for (int i = 0; i < N; i++) {
        h->out[i] = 3.0f * h->in[i] + (float)h->calls;
    }
    h->calls++;
}

/* A fixture of its own (f: a device, its buffers x and y of N floats) and pinned memory for the
 * host step: its input and its output, N floats each. */
typedef struct pipeline {
    tc_fixture2 *f;
    float *pin_in, *pin_out;
    host_step h;
} pipeline;

/* x += 1 on the device; copy x to pinned; the host scales it; copy the result into y; y += x
 * on the device. Every step depends on the one before, across the device and the host. */
static acg_status run_pipeline(pipeline *p) {
    acg_stream *s = p->f->t.s;
    acg_buffer *x = p->f->x, *y = p->f->y;
    acg_access acc[] = {{y, 0, 0, ACG_ACCESS_READ}};
    acg_status st = tc_add(s, &p->f->t.k, x, 0, x, 0, N, 1.0f);
    if (st == ACG_OK) {
        st = acg_copy_d2h(s, p->pin_in, x, 0, N * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_stream_launch_host(s, host_scale, &p->h, acc, 1);
    }
    if (st == ACG_OK) {
        st = acg_copy_h2d(s, y, 0, p->pin_out, N * sizeof(float));
    }
    if (st == ACG_OK) {
        st = tc_axpy(s, &p->f->t.k, y, 0, x, 0, N, 1.0f);
    }
    return st;
}

static void pipeline_open(pipeline *p) {
    p->f = tc_fixture2_new(sizeof *p->f, N * sizeof(float));
    p->pin_in = tc_pinned(p->f->t.dev, N * sizeof(float));
    p->pin_out = tc_pinned(p->f->t.dev, N * sizeof(float));
    p->h.in = p->pin_in;
    p->h.out = p->pin_out;
    float init[N];
    tc_fill_floats(init, N, 7);
    tc_upload(p->f->t.s, p->f->x, init, sizeof init);
    TC_OK(acg_fill(p->f->t.s, p->f->y, 0, N * sizeof(float), 0, 4));
    TC_OK(acg_stream_synchronize(p->f->t.s));
}

static void pipeline_close(pipeline *p) {
    TC_OK(acg_stream_synchronize(p->f->t.s));
    TC_OK(acg_pinned_free(p->pin_in));
    TC_OK(acg_pinned_free(p->pin_out));
    tc_fixture2_free(p->f);
}

/* The same pipeline on two devices: one runs it eagerly, the other captures it. */
typedef struct pipelines {
    pipeline eager, graph;
} pipelines;

static int pipelines_setup(void **state) {
    pipelines *p = calloc(1, sizeof *p);
    assert_non_null(p);
    pipeline_open(&p->eager);
    pipeline_open(&p->graph);
    *state = p;
    return 0;
}

static int pipelines_teardown(void **state) {
    pipelines *p = *state;
    pipeline_close(&p->graph);
    pipeline_close(&p->eager);
    free(p);
    return 0;
}

/* Host functions run in stream order, eagerly on every backend; captured where the device's
 * graphs can call them, where every replay equals a step run eagerly, bit for bit. */
static void test_host_function_order(void **state) {
    pipelines *p = *state;
    pipeline *eager = &p->eager, *graph = &p->graph;
    acg_stream *s = graph->f->t.s;
    float want[N], got[N];
    for (int step = 0; step < 3; step++) {
        TC_OK(run_pipeline(eager));
    }
    tc_download(eager->f->t.s, want, eager->f->y, sizeof want);
    assert_int_equal(eager->h.calls, 3);

    acg_graph *g = NULL;
    tc_need_graphs(graph->f->t.dev, s);
    TC_OK(acg_stream_begin_capture(s, NULL));
    acg_status st = run_pipeline(graph);
    if (!tc_cap()->graph_host_functions) {
        /* The capture cannot hold it: refused loudly, the stream usable after the end. */
        assert_int_equal(st, ACG_ERR_CAPTURE_INVALIDATED);
        TC_LAST_ERROR_HAS("cannot call host functions");
        TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(s, &g));
        assert_int_equal(graph->h.calls, 0);
        TC_OK(run_pipeline(graph)); /* eagerly it works */
        assert_int_equal(graph->h.calls, 1);
        tc_skip("no graph host functions: checked that a capture refuses them");
    }
    TC_OK(st);
    TC_OK(acg_stream_end_capture(s, &g));
    assert_int_equal(graph->h.calls, 0); /* recorded, not run */
    size_t n_nodes = 0;
    TC_OK(acg_graph_get_node_count(g, &n_nodes));
    assert_int_equal(n_nodes, 5);
    acg_node_info info = {0};
    TC_OK(acg_graph_get_node(g, 2, &info));
    assert_int_equal(info.kind, ACG_NODE_HOST);
    assert_int_equal(info.n_buffers, 1);
    assert_ptr_equal(info.buffers[0], graph->f->y);
    /* The graph holds what the host function declared. */
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(graph->f->y));
    for (int step = 0; step < 3; step++) {
        TC_OK(acg_graph_launch(g, s));
    }
    tc_download(s, got, graph->f->y, sizeof got);
    assert_int_equal(graph->h.calls, 3);
    TC_BYTES_EQUAL(want, got, sizeof got);
    TC_OK(acg_graph_destroy(g));
}

/* The getter `get` of the driver's object behind obj refuses a NULL out, and an out whose size
 * was never set. */
#define EXPECT_NATIVE_REFUSALS(get, obj)                                                           \
    do {                                                                                           \
        TC_EXPECT(ERR_INVALID_ARGUMENT, get((obj), NULL));                                         \
        acg_native_handle bad = ACG_NATIVE_HANDLE_INIT;                                            \
        bad.size = 0;                                                                              \
        TC_EXPECT(ERR_INVALID_ARGUMENT, get((obj), &bad));                                         \
    } while (0)

/* The driver's object: a queue on opencl, none on cpu (said, not an error). */
static void test_native_object(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(s, &h));
    if (tc_backend_is("cpu")) {
        assert_int_equal(h.kind, ACG_NATIVE_NONE);
        assert_null(h.handle);
    } else if (tc_backend_is("opencl")) {
        assert_int_equal(h.kind, ACG_NATIVE_OPENCL_QUEUE);
        assert_non_null(h.handle);
    }
    EXPECT_NATIVE_REFUSALS(acg_stream_get_native, s);
    /* An older caller's struct that ends before `handle` gets what fits. */
    acg_native_handle old = ACG_NATIVE_HANDLE_INIT;
    old.size = offsetof(acg_native_handle, handle);
    old.handle = &old;
    TC_OK(acg_stream_get_native(s, &old));
    assert_int_equal(old.size, offsetof(acg_native_handle, handle));
    assert_ptr_equal(old.handle, &old);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_get_native(NULL, &h));
    /* Events recorded after the queue was handed out still order the stream's work. */
    acg_event *e = tc_event(f->t.dev);
    TC_OK(tc_fill(s, &f->t.k, f->y, 0, N, 2.0f));
    TC_OK(acg_event_record(e, s));
    TC_OK(acg_stream_wait_event(f->b, e));
    TC_OK(tc_add(f->b, &f->t.k, f->y, 0, f->y, 0, N, 1.0f));
    TC_EXPECT_FLOATS(f->b, f->y, N, 3.0f);
    TC_OK(acg_event_destroy(e));
}

/* The driver's object behind a graph: a CUgraphExec on cuda, the driver's executable graph or a
 * closed command list on level_zero, none on cpu and opencl (said, not an error); refused for
 * bad arguments. */
static void test_graph_native_object(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_get_native(NULL, &h));
    tc_need_graphs(f->t.dev, s);
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(tc_fill(s, &f->t.k, f->y, 0, N, 2.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    h.handle = &h;
    TC_OK(acg_graph_get_native(g, &h));
    if (tc_backend_is("cuda")) {
        assert_int_equal(h.kind, ACG_NATIVE_CUDA_GRAPH_EXEC);
        assert_non_null(h.handle);
    } else if (tc_backend_is("level_zero")) {
        assert_int_equal(h.kind, acg_device_get_capability(f->t.dev)->native_capture
                                     ? ACG_NATIVE_ZE_EXECUTABLE_GRAPH
                                     : ACG_NATIVE_ZE_COMMAND_LIST);
        assert_non_null(h.handle);
    } else if (tc_backend_is("vulkan")) {
        assert_int_equal(h.kind, ACG_NATIVE_VULKAN_COMMAND_BUFFER);
        assert_non_null(h.handle);
    } else {
        assert_int_equal(h.kind, ACG_NATIVE_NONE);
        assert_null(h.handle);
    }
    EXPECT_NATIVE_REFUSALS(acg_graph_get_native, g);
    TC_OK(acg_graph_destroy(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_get_native(g, &h));
}

/* Foreign work: a declaration eagerly; a ledger node under native capture; an invalidated
 * capture where graphs are built from acg's description. */
static void test_foreign_work(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    acg_buffer *y = f->y;
    acg_access acc[] = {{y, 0, 64, ACG_ACCESS_WRITE}};
    TC_OK(acg_stream_declare_foreign(s, "gemm", acc, 1));
    if (!tc_has_graphs(f->t.dev, s)) {
        tc_skip("no graphs: checked only the eager declaration");
    }
    acg_graph *g[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_OK(tc_fill(s, &f->t.k, y, 0, N, (float)i));
        acg_status st = acg_stream_declare_foreign(s, "gemm", acc, 1);
        if (!tc_cap()->native_capture) {
            assert_int_equal(st, ACG_ERR_CAPTURE_INVALIDATED);
            TC_LAST_ERROR_HAS("never at replay");
            TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(s, &g[i]));
            TC_OK(tc_fill(s, &f->t.k, y, 0, N, 1.0f)); /* the stream works after the end */
            TC_OK(acg_stream_synchronize(s));
            tc_skip("no native capture: checked that foreign work invalidates a capture, no "
                    "ledger node");
        }
        TC_OK(st);
        TC_OK(tc_add(s, &f->t.k, y, 0, y, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(s, &g[i]));
    }
    acg_node_info info = {0};
    TC_OK(acg_graph_get_node(g[0], 1, &info));
    assert_int_equal(info.kind, ACG_NODE_FOREIGN);
    assert_string_equal(info.kernel, "gemm");
    assert_int_equal(info.n_buffers, 1);
    assert_int_equal(info.n_deps, 1);
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(y)); /* the ledger holds what it touches */
    bool updated = false;
    if (tc_cap()->graph_update) {
        /* Same topology, foreign node included. The cuda and level_zero backends update from
         * what they build from the ledger, and cannot rebuild work they did not launch: they
         * refuse, and the graph stays as it was. */
        acg_status st = acg_graph_update(g[0], g[1]);
        updated = st == ACG_OK;
        if (!updated && (tc_backend_is("cuda") || tc_backend_is("level_zero"))) {
            assert_int_equal(st, ACG_ERR_UNSUPPORTED);
            TC_LAST_ERROR_HAS("capture again");
        } else {
            TC_OK(st);
        }
    }
    TC_OK(acg_graph_launch(g[0], s));
    TC_EXPECT_FLOATS(s, y, N, updated ? 2.0f : 1.0f);
    TC_OK(acg_graph_destroy(g[1]));
    TC_OK(acg_graph_destroy(g[0]));
}

/* A foreign-work name of any length is kept whole, in the ledger (acg_graph_get_node, the
 * topology an update compares) and in the message of a capture it invalidates; two names that
 * differ only past their 31st byte are two names. */
static void test_foreign_long_name(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    char name[2][301];
    for (int i = 0; i < 2; i++) {
        for (int c = 0; c < 300; c++) {
            name[i][c] = (char)('a' + c % 26);
        }
        name[i][299] = i == 0 ? 'X' : 'Y';
        name[i][300] = '\0';
    }
    acg_access acc[] = {{f->y, 0, 64, ACG_ACCESS_WRITE}};
    if (!tc_has_graphs(f->t.dev, s)) {
        tc_skip("no graphs: no ledger to keep a name in");
    }
    acg_graph *g[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_OK(tc_fill(s, &f->t.k, f->y, 0, N, 1.0f));
        acg_status st = acg_stream_declare_foreign(s, name[i], acc, 1);
        if (!tc_cap()->native_capture) {
            assert_int_equal(st, ACG_ERR_CAPTURE_INVALIDATED);
            TC_LAST_ERROR_HAS(name[i]);
            TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(s, &g[i]));
            tc_skip("no native capture: checked the whole name in the invalidation's message");
        }
        TC_OK(st);
        TC_OK(acg_stream_end_capture(s, &g[i]));
    }
    for (int i = 0; i < 2; i++) {
        acg_node_info info = {0};
        TC_OK(acg_graph_get_node(g[i], 1, &info));
        assert_int_equal(info.kind, ACG_NODE_FOREIGN);
        assert_string_equal(info.kernel, name[i]);
    }
    if (tc_cap()->graph_update) {
        TC_EXPECT(ERR_TOPOLOGY_MISMATCH, acg_graph_update(g[0], g[1]));
        TC_LAST_ERROR_HAS("node 1");
    }
    TC_OK(acg_graph_destroy(g[1]));
    TC_OK(acg_graph_destroy(g[0]));
}

static void nothing(void *user) { (void)user; }

/* Bad input is refused before anything is queued (y: 64 bytes). */
static void test_bad_input(void **state) {
    fx *f = *state;
    acg_device *other = tc_open();
    acg_stream *s = f->t.s;
    acg_buffer *y = f->y;
    acg_buffer *elsewhere = tc_buffer(other, 64);
    acg_buffer *dead = tc_buffer(f->t.dev, 64);
    TC_OK(acg_buffer_free(dead));
    acg_access ok[] = {{y, 0, 0, ACG_ACCESS_READ_WRITE}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_launch_host(s, NULL, NULL, NULL, 0));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_launch_host(NULL, nothing, NULL, NULL, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_launch_host(s, nothing, NULL, NULL, 1));
    TC_EXPECT(ERR_INVALID_ARGUMENT,
              acg_stream_launch_host(s, nothing, NULL, ok, ACG_MAX_ACCESSES + 1));
    acg_access a_dead[] = {{dead, 0, 0, ACG_ACCESS_READ}};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_launch_host(s, nothing, NULL, a_dead, 1));
    acg_access a_other[] = {{elsewhere, 0, 0, ACG_ACCESS_READ}};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_launch_host(s, nothing, NULL, a_other, 1));
    acg_access a_range[] = {{y, 32, 64, ACG_ACCESS_READ}};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_stream_launch_host(s, nothing, NULL, a_range, 1));
    acg_access a_past[] = {{y, 65, 0, ACG_ACCESS_READ}};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_stream_launch_host(s, nothing, NULL, a_past, 1));
    acg_access a_mode[] = {{y, 0, 0, (acg_access_mode)0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_launch_host(s, nothing, NULL, a_mode, 1));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stream_declare_foreign(s, NULL, ok, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_declare_foreign(s, "x", a_dead, 1));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_declare_foreign(s, "x", a_other, 1));
    TC_OK(acg_stream_launch_host(s, nothing, NULL, ok, 1));
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_buffer_free(elsewhere));
    tc_close(other);
}

/* Device options: the cpu backend takes capture=native|description, the others none. */
static void test_device_options(void **state) {
    (void)state;
    acg_device *dev = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu:0?capture=sideways", &dev));
    TC_LAST_ERROR_HAS("capture=native");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu:0?", &dev));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu:?capture=native", &dev));
    TC_OK(acg_device_open("cpu:0?capture=native", &dev));
    assert_true(acg_device_get_capability(dev)->native_capture);
    assert_string_equal(acg_device_get_spec(dev), "cpu:0?capture=native");
    TC_OK(acg_device_close(dev));
    TC_OK(acg_device_open("cpu?capture=description", &dev));
    assert_false(acg_device_get_capability(dev)->native_capture);
    TC_OK(acg_device_close(dev));
    if (tc_backend_is("opencl")) {
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("opencl:0?capture=native", &dev));
        TC_LAST_ERROR_HAS("no device options");
    }
}

/* The scenario's capture: y to pinned memory, a host function scaling it (and, where the
 * driver records the work, foreign work declared beside it), back to y. */
static acg_status host_capture(acg_stream *s, acg_buffer *y, float *pin, host_step *h,
                               acg_graph **g) {
    acg_status st = acg_stream_begin_capture(s, NULL);
    if (st != ACG_OK) {
        return st;
    }
    acg_access acc[] = {{y, 0, 0, ACG_ACCESS_READ}};
    acg_status cst = acg_copy_d2h(s, pin, y, 0, N * sizeof(float));
    if (cst == ACG_OK) {
        cst = acg_stream_launch_host(s, host_scale, h, acc, 1);
    }
    if (cst == ACG_OK && tc_cap()->native_capture) {
        cst = acg_stream_declare_foreign(s, "a vendor library's kernel", acc, 1);
    }
    if (cst == ACG_OK) {
        cst = acg_copy_h2d(s, y, 0, pin + N, N * sizeof(float));
    }
    st = acg_stream_end_capture(s, g);
    return st == ACG_OK ? cst : st;
}

/* Every allocation of a scenario that captures host functions (and foreign work), updates one
 * graph from another, and replays it can fail cleanly. */
static acg_status host_scenario(void *ctx) {
    (void)ctx;
    acg_device *dev = NULL;
    acg_stream *s = NULL;
    acg_buffer *y = NULL;
    float *pin = NULL;
    acg_graph *g = NULL, *g2 = NULL;
    host_step h = {0};
    acg_status st = acg_device_open(tc_spec(), &dev);
    if (st == ACG_OK) {
        st = acg_stream_create(dev, &s);
    }
    if (st == ACG_OK) {
        st = acg_buffer_alloc(dev, N * sizeof(float), &y);
    }
    if (st == ACG_OK) {
        st = acg_pinned_alloc(dev, 2 * N * sizeof(float), (void **)&pin);
    }
    if (st == ACG_OK) {
        h.in = pin;
        h.out = pin + N;
        st = host_capture(s, y, pin, &h, &g);
    }
    if (st == ACG_OK && tc_cap()->graph_update) {
        st = host_capture(s, y, pin, &h, &g2);
        if (st == ACG_OK) {
            st = acg_graph_update(g, g2);
        }
    }
    if (st == ACG_OK) {
        st = acg_graph_launch(g, s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(s);
    }
    acg_graph_destroy(g2);
    acg_graph_destroy(g);
    acg_pinned_free(pin);
    acg_buffer_free(y);
    acg_stream_destroy(s);
    acg_device_close(dev);
    return st;
}

static void test_alloc_fail(void **state) {
    (void)state;
    if (!tc_cap()->graph_host_functions) {
        /* the scenario's capture is refused before it allocates much */
        tc_skip("no graph host functions");
    }
    tc_alloc_install();
    uint64_t points = tc_alloc_sweep(host_scenario, NULL, true);
    tc_alloc_uninstall();
    print_message("%llu allocation points\n", (unsigned long long)points);
    assert_true(points > 5);
}

/* A fault in a replay, after its launch returned, is found by the stream's next synchronize
 * and latched by the device: from then on every call that would reach the driver fails fast
 * naming that first fault (acg_device_get_async_error too, and it is never cleared), while
 * getters, destroys and the close still work; a device opened again works. */
static void test_device_lost(void **state) {
    (void)state;
    acg_device *dev = tc_open_lost();
    TC_OK(acg_device_get_async_error(dev)); /* the fault is armed, not met */
    acg_stream *s = tc_stream(dev);
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_buffer *y = tc_buffer(dev, N * sizeof(float));
    acg_stream *s2 = tc_stream(dev);
    acg_event *e = tc_event(dev);
    TC_OK(tc_fill(s, &k, y, 0, N, 0.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(tc_add(s, &k, y, 0, y, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(s, &g));
    TC_OK(acg_stream_begin_capture(s2, NULL)); /* a capture the fault overtakes */
    TC_OK(acg_graph_launch(g, s));             /* the injected fault takes this replay */
    TC_EXPECT(ERR_DEVICE_LOST, acg_stream_synchronize(s));
    TC_LAST_ERROR_HAS("faulted");

    /* Every call that would reach the driver fails fast, naming the first fault. */
    const char *first = "work queued on this stream faulted";
    float host[N];
    acg_buffer *b = NULL;
    acg_stream *s3 = NULL;
    acg_event *e2 = NULL;
    acg_graph_pool *pool = NULL;
    acg_kernel *kernel = NULL;
    void *pinned = NULL;
    acg_graph *g2 = NULL;
    uint64_t free_bytes = 0, total_bytes = 0;
    acg_native_handle native = ACG_NATIVE_HANDLE_INIT;
    struct {
        const char *call;
        acg_status st;
    } lost[] = {
        {"acg_device_get_async_error", acg_device_get_async_error(dev)},
        {"acg_device_get_async_error again", acg_device_get_async_error(dev)},
        {"acg_stream_synchronize", acg_stream_synchronize(s)},
        {"acg_stream_query", acg_stream_query(s)},
        {"acg_kernel_launch", tc_fill(s, &k, y, 0, N, 2.0f)},
        {"acg_graph_launch", acg_graph_launch(g, s)},
        {"acg_graph_upload", acg_graph_upload(g, s)},
        {"acg_copy_h2d", acg_copy_h2d(s, y, 0, host, sizeof host)},
        {"acg_copy_d2h", acg_copy_d2h(s, host, y, 0, sizeof host)},
        {"acg_fill", acg_fill(s, y, 0, sizeof host, 0, 4)},
        {"acg_event_record", acg_event_record(e, s)},
        {"acg_stream_wait_event", acg_stream_wait_event(s, e)},
        {"acg_event_query", acg_event_query(e)},
        {"acg_event_synchronize", acg_event_synchronize(e)},
        {"acg_buffer_alloc", acg_buffer_alloc(dev, 64, &b)},
        {"acg_buffer_create_view", acg_buffer_create_view(y, 0, 64, &b)},
        {"acg_stream_alloc", acg_stream_alloc(s, 64, &b)},
        {"acg_stream_create", acg_stream_create(dev, &s3)},
        {"acg_event_create", acg_event_create(dev, &e2)},
        {"acg_graph_pool_create", acg_graph_pool_create(dev, &pool)},
        {"acg_kernel_get", acg_kernel_get(dev, "copy_f32", &kernel)},
        {"acg_pinned_alloc", acg_pinned_alloc(dev, 64, &pinned)},
        {"acg_stream_begin_capture", acg_stream_begin_capture(s, NULL)},
        {"acg_stream_end_capture", acg_stream_end_capture(s2, &g2)},
        {"acg_stream_get_native", acg_stream_get_native(s, &native)},
        {"acg_device_synchronize", acg_device_synchronize(dev)},
        {"acg_device_get_memory_info", acg_device_get_memory_info(dev, &free_bytes, &total_bytes)},
    };
    for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++) {
        if (lost[i].st != ACG_ERR_DEVICE_LOST) {
            fail_msg("%s on the lost device returned %s, not ACG_ERR_DEVICE_LOST", lost[i].call,
                     acg_status_name(lost[i].st));
        }
    }
    TC_EXPECT(ERR_DEVICE_LOST, tc_add(s, &k, y, 0, y, 0, N, 1.0f));
    TC_LAST_ERROR_HAS(first);
    TC_LAST_ERROR_HAS("close it and open the device again");
    assert_null(b);
    assert_null(s3);
    assert_null(e2);
    assert_null(pool);
    assert_null(kernel);
    assert_null(pinned);
    assert_null(g2);
    /* The capture the fault overtook ended with no graph: its stream left capture mode. */
    TC_EXPECT_CAPTURE_STATE(s2, NONE);

    /* What the library itself keeps still answers. */
    assert_int_equal(acg_buffer_get_size(y), N * sizeof(float));
    assert_non_null(acg_device_get_spec(dev));
    assert_non_null(acg_device_get_capability(dev));
    size_t nodes = 0;
    TC_OK(acg_graph_get_node_count(g, &nodes));
    assert_int_equal(nodes, 1);

    /* Destroys release what they hold and succeed; then the device closes. */
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_stream_destroy(s2));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_device_close(dev));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_get_async_error(NULL));

    /* The recovery: the device opened again is a new device, without the fault. */
    tc_expect_device_works(tc_spec());
}

#define T(fn) TC_FIXTURE2_CASE(fn, N * sizeof(float))
static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_host_function_order, pipelines_setup, pipelines_teardown),
    T(test_native_object),
    T(test_graph_native_object),
    T(test_foreign_work),
    T(test_foreign_long_name),
    TC_FIXTURE2_CASE(test_bad_input, 64),
    cmocka_unit_test(test_device_options),
    cmocka_unit_test(test_alloc_fail),
    cmocka_unit_test(test_device_lost),
};
#undef T
TC_MAIN("test_host", tests)
