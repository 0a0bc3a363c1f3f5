/* test_cuda_backend.c — what only the cuda backend has, run against acg's CUDA test driver
 * (tests/cuda_driver, named by ACG_CUDA_DRIVER):
 *   - how a driver that cannot serve is reported (--expect-unavailable TEXT, one process per
 *     driver condition, since the driver is loaded once per process) and what a driver lacking
 *     cuGraphExecUpdate and cuMemHostRegister disables (--expect-missing-optional);
 *   - every driver call of a capture + replay + update + teardown scenario failing in turn: a
 *     clean status each time, no driver object left behind, the device usable afterwards;
 *   - cuGraphExecUpdate refused: the graph is instantiated again and replays the update;
 *   - CUDA's own capture errors: the capture ends invalidated and the stream works on;
 *   - work the engine issues on the native CUstream inside a capture is in the graph;
 *   - the CUgraphExec behind a graph, launched by the driver's own cuGraphLaunch, replays it;
 *     host memory the driver refuses to register is left unregistered. */
#include <dlfcn.h>
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

#include "backends/cuda/entry_points.h"

#define N 256
#define ALPHA 3.0f
#define ALPHA2 5.0f

/* ---- the test driver's control functions (tests/cuda_driver/acgtest_cuda.h) -------------- */

static struct {
    void (*inject)(const char *name, unsigned nth, int code);
    unsigned long (*calls)(const char *name);
    long (*live)(void);
    PFN_cuGetProcAddress_v12000 get_proc;
} drv;

/* Binds the driver the backend loaded (the device must have been opened once). */
static void bind_driver(void) {
    const char *path = getenv("ACG_CUDA_DRIVER");
    assert_non_null(path);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    *(void **)&drv.inject = dlsym(h, "acgtest_cuda_fail");
    *(void **)&drv.calls = dlsym(h, "acgtest_cuda_calls");
    *(void **)&drv.live = dlsym(h, "acgtest_cuda_live");
    *(void **)&drv.get_proc = dlsym(h, "cuGetProcAddress_v2");
    assert_non_null(drv.inject);
    assert_non_null(drv.calls);
    assert_non_null(drv.live);
    assert_non_null(drv.get_proc);
    dlclose(h); /* RTLD_NOLOAD took a reference */
}

#define OK(call) assert_int_equal((call), ACG_OK)

/* ---- the scenario -------------------------------------------------------------------------- */

typedef struct scene {
    acg_device *dev;
    acg_stream *s, *s2;
    acg_event *fork, *join;
    acg_buffer *x, *y, *z;
    acg_graph_pool *pool;
    acg_graph *g, *g2;
    float *host;
    float *reg; /* (N) the test's own memory, registered with acg_pinned_register */
    bool registered;
    acg_kernel *fill, *axpy;
    int host_calls;
} scene;

static void count_call(void *user) { ((scene *)user)->host_calls++; }

/* z = memset(2.0f), y = z; fork to s2: y += alpha * x and a host call; join; y copied to
 * pinned host. A memset, copies both ways, kernels, a host function and a fork: every kind of
 * node the backend builds for an update. */
static acg_status capture(scene *c, float alpha, acg_graph **out) {
    acg_status st = acg_stream_begin_capture(c->s, c->pool);
    if (st != ACG_OK) {
        return st;
    }
    const float two = 2.0f;
    uint32_t two_bits;
    memcpy(&two_bits, &two, sizeof two_bits);
    acg_arg axpy_args[] = {acg_arg_buffer(c->y, 0), acg_arg_buffer(c->x, 0), acg_arg_f32(alpha)};
    acg_dims dims = acg_dims_1d(N);
    st = acg_fill(c->s, c->z, 0, N * sizeof(float), two_bits, sizeof two_bits);
    if (st == ACG_OK) {
        st = acg_copy_d2d(c->s, c->y, 0, c->z, 0, N * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_event_record(c->fork, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(c->s2, c->fork);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s2, c->axpy, &dims, axpy_args, 3);
    }
    if (st == ACG_OK) {
        st = acg_stream_launch_host(c->s2, count_call, c, NULL, 0);
    }
    if (st == ACG_OK) {
        st = acg_event_record(c->join, c->s2);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(c->s, c->join);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, c->host, c->y, 0, N * sizeof(float));
    }
    /* Ends the capture whatever happened, so the streams leave capture mode. */
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(c->s, &g);
    if (st == ACG_OK && end == ACG_OK) {
        *out = g;
        return ACG_OK;
    }
    if (g != NULL) {
        acg_graph_destroy(g);
    }
    return st != ACG_OK ? st : end;
}

static bool host_is(const scene *c, float want) {
    for (int i = 0; i < N; i++) {
        if (c->host[i] != want) {
            return false;
        }
    }
    return true;
}

/* Open, eager work, a forked capture replayed twice, an update replayed; with check, the
 * results are asserted. Stops at the first failure and returns it, leaving teardown to
 * scene_close. */
static acg_status scene_run(scene *c, bool check) {
    memset(c, 0, sizeof *c);
    acg_status st = acg_device_open("cuda", &c->dev);
    if (st == ACG_OK) {
        st = acg_kernel_get(c->dev, "fill_f32", &c->fill);
    }
    if (st == ACG_OK) {
        st = acg_kernel_get(c->dev, "axpy_f32", &c->axpy);
    }
    if (st == ACG_OK) {
        st = acg_buffer_alloc(c->dev, N * sizeof(float), &c->x);
    }
    if (st == ACG_OK) {
        st = acg_buffer_alloc(c->dev, N * sizeof(float), &c->y);
    }
    if (st == ACG_OK) {
        st = acg_buffer_alloc(c->dev, N * sizeof(float), &c->z);
    }
    if (st == ACG_OK) {
        st = acg_pinned_alloc(c->dev, N * sizeof(float), (void **)&c->host);
    }
    if (st == ACG_OK) {
        st = acg_stream_create(c->dev, &c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_create(c->dev, &c->s2);
    }
    if (st == ACG_OK) {
        st = acg_event_create(c->dev, &c->fork);
    }
    if (st == ACG_OK) {
        st = acg_event_create(c->dev, &c->join);
    }
    if (st == ACG_OK) {
        st = acg_graph_pool_create(c->dev, &c->pool);
    }
    if (st == ACG_OK) {
        acg_arg args[] = {acg_arg_buffer(c->x, 0), acg_arg_f32(1.0f)};
        acg_dims dims = acg_dims_1d(N);
        st = acg_kernel_launch(c->s, c->fill, &dims, args, 2);
    }
    /* Memory the caller owns, registered: x is read back through it asynchronously. */
    c->reg = malloc(N * sizeof(float));
    assert_non_null(c->reg);
    if (st == ACG_OK && (st = acg_pinned_register(c->dev, c->reg, N * sizeof(float))) == ACG_OK) {
        c->registered = true;
        st = acg_copy_d2h(c->s, c->reg, c->x, 0, N * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(acg_pinned_contains(c->dev, c->reg, N * sizeof(float)));
        for (int i = 0; i < N; i++) {
            assert_true(c->reg[i] == 1.0f);
        }
    }
    if (st == ACG_OK) {
        st = capture(c, ALPHA, &c->g);
    }
    for (int r = 0; r < 2 && st == ACG_OK; r++) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_int_equal(c->host_calls, 2);
        assert_true(host_is(c, 2.0f + ALPHA));
    }
    if (st == ACG_OK) {
        st = capture(c, ALPHA2, &c->g2);
    }
    if (st == ACG_OK) {
        st = acg_graph_update(c->g, c->g2);
    }
    if (st == ACG_OK) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_int_equal(c->host_calls, 3);
        assert_true(host_is(c, 2.0f + ALPHA2));
    }
    return st;
}

/* Frees everything scene_run made, whatever it got to. */
static void scene_close(scene *c) {
    if (c->s != NULL) {
        acg_stream_synchronize(c->s);
    }
    acg_graph_destroy(c->g2);
    acg_graph_destroy(c->g);
    acg_graph_pool_destroy(c->pool);
    acg_event_destroy(c->fork);
    acg_event_destroy(c->join);
    acg_stream_destroy(c->s2);
    acg_stream_destroy(c->s);
    acg_pinned_free(c->host);
    if (c->registered) {
        acg_pinned_unregister(c->reg);
    }
    free(c->reg);
    acg_buffer_free(c->z);
    acg_buffer_free(c->y);
    acg_buffer_free(c->x);
    if (c->dev != NULL) {
        assert_int_equal(acg_device_close(c->dev), ACG_OK);
    }
}

static void test_scenario(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true));
    scene_close(&c);
}

/* The entry points the backend resolves: the sweep fails each call of each in turn. */
static const char *const entry_names[] = {
#define TC_CU_NAME_(name, ver, required) #name,
    ACG_CUDA_ENTRY_POINTS(TC_CU_NAME_)
#undef TC_CU_NAME_
};
#define N_ENTRIES (sizeof entry_names / sizeof entry_names[0])

/* Calls that destroy or release: a driver that fails one keeps the object, so the sweep does
 * not count objects after failing them. */
static bool releases(const char *name) {
    return strstr(name, "Destroy") != NULL || strstr(name, "Free") != NULL ||
           strstr(name, "Unload") != NULL || strstr(name, "Release") != NULL ||
           strstr(name, "Unregister") != NULL;
}

/* Every driver call of the scenario, teardown included, fails in turn (an invalid-value error,
 * as a driver refusing it would): the scenario ends with a clean status naming the driver's
 * error (or absorbs the failure, as a failed upload or a drop of what was recorded may), the
 * teardown leaves no driver object behind, and the same scenario then runs clean on a new
 * device. */
static void test_fault_sweep(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true)); /* loads the driver and builds what is built once per process */
    scene_close(&c);
    bind_driver();
    unsigned long counts[N_ENTRIES];
    for (size_t i = 0; i < N_ENTRIES; i++) {
        counts[i] = drv.calls(entry_names[i]);
    }
    long live = drv.live();
    OK(scene_run(&c, true));
    scene_close(&c);
    assert_int_equal(drv.live(), live);
    for (size_t i = 0; i < N_ENTRIES; i++) {
        counts[i] = drv.calls(entry_names[i]) - counts[i];
    }
    unsigned long points = 0, failed_runs = 0;
    for (size_t i = 0; i < N_ENTRIES; i++) {
        const char *name = entry_names[i];
        for (unsigned long k = 1; k <= counts[i]; k++, points++) {
            drv.inject(name, (unsigned)k, CUDA_ERROR_INVALID_VALUE);
            acg_status st = scene_run(&c, false);
            char why[512];
            snprintf(why, sizeof why, "%s", st != ACG_OK ? acg_last_error() : "-");
            uintptr_t reg = (uintptr_t)c.reg;
            scene_close(&c);
            drv.inject(NULL, 0, 0);
            if (strcmp(name, "cuMemHostUnregister") == 0) {
                /* The driver still holds the range the test has freed since, and would refuse
                 * malloc's next block there: it is released, as process exit would. */
                PFN_cuMemHostUnregister_v4000 unregister = NULL;
                CUdriverProcAddressQueryResult q;
                assert_int_equal(drv.get_proc("cuMemHostUnregister", (void **)&unregister, 4000,
                                              CU_GET_PROC_ADDRESS_DEFAULT, &q),
                                 CUDA_SUCCESS);
                assert_int_equal(unregister((void *)reg), CUDA_SUCCESS);
            }
            failed_runs += st != ACG_OK;
            if (st != ACG_OK && strstr(why, "CUDA_ERROR_INVALID_VALUE") == NULL) {
                print_error("failing %s call %lu: %s without the driver's error: %s\n", name, k,
                            acg_status_name(st), why);
                fail();
            }
            if (releases(name)) {
                live = drv.live();
            } else if (drv.live() != live) {
                print_error("failing %s call %lu (%s: %s) left %ld driver objects behind\n", name,
                            k, acg_status_name(st), why, drv.live() - live);
                fail();
            }
            OK(scene_run(&c, true));
            scene_close(&c);
            assert_int_equal(drv.live(), live);
        }
    }
    print_message("cuda fault sweep: %lu driver calls failed in turn (%lu runs failed with the "
                  "driver's error, the rest absorbed it); no objects leaked\n",
                  points, failed_runs);
    assert_true(points > 50 && failed_runs > points / 2);
}

/* cuGraphExecUpdate refused: the exec is instantiated again from the ledger's graph, and the
 * replay computes the update. */
static void test_update_refused(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true));
    bind_driver();
    acg_graph *g3 = NULL;
    OK(capture(&c, ALPHA, &g3));
    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    drv.inject("cuGraphExecUpdate", 1, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    OK(acg_graph_update(c.g, g3));
    drv.inject(NULL, 0, 0);
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    OK(acg_graph_launch(c.g, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 2.0f + ALPHA));
    OK(acg_graph_destroy(g3));
    scene_close(&c);
}

/* CUDA's own capture errors end the capture invalidated; the streams then work eagerly. */
static void test_capture_errors(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true));
    bind_driver();
    static const struct {
        const char *call;
        int code;
    } cases[] = {
        {"cuLaunchKernel", CUDA_ERROR_STREAM_CAPTURE_INVALIDATED},
        {"cuStreamWaitEvent", CUDA_ERROR_STREAM_CAPTURE_ISOLATION},
        {"cuStreamEndCapture", CUDA_ERROR_STREAM_CAPTURE_UNJOINED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        acg_graph *g = NULL;
        drv.inject(cases[i].call, 1, cases[i].code);
        acg_status st = capture(&c, ALPHA, &g);
        drv.inject(NULL, 0, 0);
        assert_int_equal(st, ACG_ERR_CAPTURE_INVALIDATED);
        assert_null(g);
        acg_capture_state state2 = ACG_CAPTURE_NONE;
        OK(acg_stream_get_capture_state(c.s2, &state2));
        assert_int_equal(state2, ACG_CAPTURE_NONE);
        /* Both streams run eager work again. */
        acg_arg args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(7.0f)};
        acg_dims dims = acg_dims_1d(N);
        OK(acg_kernel_launch(c.s2, c.fill, &dims, args, 2));
        OK(acg_stream_synchronize(c.s2));
        OK(acg_copy_d2h(c.s, c.host, c.y, 0, N * sizeof(float)));
        OK(acg_stream_synchronize(c.s));
        assert_true(host_is(&c, 7.0f));
    }
    scene_close(&c);
}

/* The driver entry point `name` at `version`, as an engine calling CUDA itself resolves it. */
static void *entry(const char *name, int version) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_int_equal(drv.get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q),
                     CUDA_SUCCESS);
    assert_non_null(fn);
    return fn;
}

/* A memset the engine issues itself on the native CUstream inside a capture, declared as
 * foreign work, is a node of the graph and runs at every replay. acg hands out no device
 * addresses, so the engine's memset targets memory it allocated from the driver itself. */
static void test_foreign_work(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true));
    bind_driver();
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 release;
    PFN_cuMemsetD32Async_v3020 memset32;
    PFN_cuMemcpyDtoHAsync_v3020 d2h;
    *(void **)&alloc = entry("cuMemAlloc", 3020);
    *(void **)&release = entry("cuMemFree", 3020);
    *(void **)&memset32 = entry("cuMemsetD32Async", 3020);
    *(void **)&d2h = entry("cuMemcpyDtoHAsync", 3020);
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    OK(acg_stream_get_native(c.s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_CUDA_STREAM);
    CUstream native = (CUstream)h.handle;
    CUdeviceptr own = 0;
    assert_int_equal(alloc(&own, N * sizeof(float)), CUDA_SUCCESS);
    const float nine = 9.0f;
    unsigned bits;
    memcpy(&bits, &nine, sizeof bits);

    OK(acg_stream_begin_capture(c.s, c.pool));
    assert_int_equal(memset32(own, bits, N, native), CUDA_SUCCESS);
    OK(acg_stream_declare_foreign(c.s, "engine memset", NULL, 0));
    acg_graph *g = NULL;
    OK(acg_stream_end_capture(c.s, &g));
    size_t nodes = 0;
    OK(acg_graph_get_node_count(g, &nodes));
    assert_int_equal(nodes, 1);

    /* Nothing ran at capture: zero the memory, replay, and read it back on the stream. */
    assert_int_equal(memset32(own, 0, N, native), CUDA_SUCCESS);
    OK(acg_graph_launch(g, c.s));
    assert_int_equal(d2h(c.host, own, N * sizeof(float), native), CUDA_SUCCESS);
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 9.0f));
    OK(acg_graph_destroy(g));
    assert_int_equal(release(own), CUDA_SUCCESS);
    scene_close(&c);
}

/* A grid CUDA cannot launch (65,536 blocks in y, one more than the limit) is refused with
 * ACG_ERR_UNSUPPORTED before the driver sees it; a grid one row smaller runs. The model's
 * matmul (grid (n_out, n)) with one column and one input gives a tall grid on small buffers. */
static void test_grid_limit(void **state) {
    (void)state;
    OK(acg_model_register_kernels());
    acg_device *dev = NULL;
    OK(acg_device_open("cuda", &dev));
    acg_kernel *matmul = NULL;
    OK(acg_kernel_get(dev, "matmul_f32", &matmul));
    const uint32_t rows = 65536;
    acg_buffer *out = NULL, *x = NULL, *w = NULL;
    acg_stream *s = NULL;
    OK(acg_buffer_alloc(dev, rows * sizeof(float), &out));
    OK(acg_buffer_alloc(dev, rows * sizeof(float), &x));
    OK(acg_buffer_alloc(dev, sizeof(float), &w));
    OK(acg_stream_create(dev, &s));
    for (uint32_t n = rows; n >= rows - 1; n--) {
        acg_arg args[] = {acg_arg_buffer(out, 0), acg_arg_buffer(x, 0), acg_arg_buffer(w, 0),
                          acg_arg_u32(1),         acg_arg_u32(1),       acg_arg_u32(n)};
        acg_dims dims = {{1, n, 1}, {0, 0, 0}};
        acg_status st = acg_kernel_launch(s, matmul, &dims, args, 6);
        if (n == rows) {
            assert_int_equal(st, ACG_ERR_UNSUPPORTED);
            assert_non_null(strstr(acg_last_error(), "blocks"));
        } else {
            OK(st);
        }
    }
    /* The sampler has a block of 1024 threads per row (cuda_lanes): 2^31 rows would be 2^31
     * blocks, one more than CUDA launches in x, however few rows the buffers hold; one row's
     * grid runs (the test driver refuses a grid that does not give each row its block). */
    acg_kernel *sample = NULL;
    OK(acg_kernel_get(dev, "sample_f32", &sample));
    acg_buffer *seats = NULL, *states = NULL;
    OK(acg_buffer_alloc(dev, sizeof(int32_t), &seats));
    OK(acg_buffer_alloc(dev, ACG_SAMPLER_STATE_WORDS * sizeof(uint32_t), &states));
    OK(acg_fill(s, seats, 0, sizeof(int32_t), 0, 4));
    OK(acg_fill(s, states, 0, ACG_SAMPLER_STATE_WORDS * sizeof(uint32_t), 0, 4));
    for (int i = 0; i < 2; i++) {
        acg_arg args[] = {acg_arg_buffer(out, 0),
                          acg_arg_buffer(x, 0),
                          acg_arg_buffer(x, 4 * 2),
                          acg_arg_buffer(seats, 0),
                          acg_arg_buffer(states, 0),
                          acg_arg_u32(2),
                          acg_arg_u32(1),
                          acg_arg_u32(1)};
        acg_dims dims = {{i == 0 ? 2147483648u : 1u, 1, 1}, {0, 0, 0}};
        acg_status st = acg_kernel_launch(s, sample, &dims, args, 8);
        if (i == 0) {
            assert_int_equal(st, ACG_ERR_UNSUPPORTED);
            assert_non_null(strstr(acg_last_error(), "blocks of 1024"));
        } else {
            OK(st);
        }
    }
    OK(acg_stream_synchronize(s));
    OK(acg_stream_destroy(s));
    OK(acg_buffer_free(states));
    OK(acg_buffer_free(seats));
    OK(acg_buffer_free(w));
    OK(acg_buffer_free(x));
    OK(acg_buffer_free(out));
    OK(acg_device_close(dev));
    OK(acg_model_unregister_kernels());
}

/* ---- drivers that cannot serve ----------------------------------------------------------- */

/* The backend is unavailable, with a reason holding `text`, and opening it says so. */
static int expect_unavailable(const char *text) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        if (acg_backend_get_info(i, &info) != ACG_OK || strcmp(info.name, "cuda") != 0) {
            continue;
        }
        acg_device *dev = NULL;
        acg_status st = acg_device_open("cuda", &dev);
        if (info.available || st != ACG_ERR_UNAVAILABLE || strstr(info.reason, text) == NULL ||
            strstr(acg_last_error(), text) == NULL) {
            fprintf(stderr,
                    "expected cuda unavailable with \"%s\": available %d, open %s, reason "
                    "\"%s\", error \"%s\"\n",
                    text, info.available, acg_status_name(st), info.reason, acg_last_error());
            return 1;
        }
        printf("unavailable as expected: %s\n", info.reason);
        return 0;
    }
    fprintf(stderr, "no cuda backend in this build\n");
    return 1;
}

/* The CUgraphExec behind a graph, launched with the driver's own cuGraphLaunch on the stream's
 * CUstream, computes what acg's replay computes (the bench's raw row does this); host memory
 * the driver refuses to register is left unregistered, and a later registration works. */
static void test_native_graph(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true)); /* c.g replays the update: y = 2 + ALPHA2 */
    bind_driver();
    acg_native_handle exec = ACG_NATIVE_HANDLE_INIT, stream = ACG_NATIVE_HANDLE_INIT;
    OK(acg_graph_get_native(c.g, &exec));
    OK(acg_stream_get_native(c.s, &stream));
    assert_int_equal(exec.kind, ACG_NATIVE_CUDA_GRAPH_EXEC);
    assert_int_equal(stream.kind, ACG_NATIVE_CUDA_STREAM);
    PFN_cuGraphLaunch_v10000 launch = NULL;
    PFN_cuStreamSynchronize_v2000 sync = NULL;
    CUdriverProcAddressQueryResult q;
    assert_int_equal(
        drv.get_proc("cuGraphLaunch", (void **)&launch, 10000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
        CUDA_SUCCESS);
    assert_int_equal(
        drv.get_proc("cuStreamSynchronize", (void **)&sync, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
        CUDA_SUCCESS);
    memset(c.host, 0, N * sizeof(float));
    int calls = c.host_calls;
    assert_int_equal(launch((CUgraphExec)exec.handle, (CUstream)stream.handle), CUDA_SUCCESS);
    assert_int_equal(sync((CUstream)stream.handle), CUDA_SUCCESS);
    assert_int_equal(c.host_calls, calls + 1);
    assert_true(host_is(&c, 2.0f + ALPHA2));

    float *mem = aligned_alloc(4096, 4096);
    assert_non_null(mem);
    drv.inject("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(acg_pinned_register(c.dev, mem, 4096), ACG_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(acg_last_error(), "cuMemHostRegister"));
    drv.inject(NULL, 0, 0);
    assert_false(acg_pinned_contains(c.dev, mem, 4));
    assert_int_equal(acg_pinned_unregister(mem), ACG_ERR_INVALID_HANDLE);
    unsigned long registered = drv.calls("cuMemHostRegister");
    OK(acg_pinned_register(c.dev, mem, 4096));
    assert_int_equal(drv.calls("cuMemHostRegister"), registered + 1);
    OK(acg_pinned_unregister(mem));
    free(mem);
    scene_close(&c);
}

/* A driver without cuGraphExecUpdate and cuMemHostRegister (ACGTEST_CUDA_HIDE): graphs still
 * work, update and registration are off, the capability's detail names what is missing, and
 * acg_pinned_register says ACG_ERR_UNSUPPORTED. */
static int expect_missing_optional(void) {
    acg_device *dev = NULL;
    if (acg_device_open("cuda", &dev) != ACG_OK) {
        fprintf(stderr, "open failed: %s\n", acg_last_error());
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    int bad = cap == NULL || !cap->graphs || cap->graph_update || cap->pinned_register ||
              strstr(cap->detail, "cuGraphExecUpdate") == NULL ||
              strstr(cap->detail, "cuMemHostRegister") == NULL;
    if (cap != NULL) {
        printf("graphs %d, update %d, registration %d: %s\n", cap->graphs, cap->graph_update,
               cap->pinned_register, cap->detail);
    }
    char mem[64];
    acg_status st = acg_pinned_register(dev, mem, sizeof mem);
    printf("acg_pinned_register: %s: %s\n", acg_status_name(st), acg_last_error());
    bad |= st != ACG_ERR_UNSUPPORTED;
    acg_device_close(dev);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--expect-unavailable") == 0) {
        return expect_unavailable(argv[2]);
    }
    if (argc == 2 && strcmp(argv[1], "--expect-missing-optional") == 0) {
        return expect_missing_optional();
    }
    acg_device *probe = NULL;
    if (acg_device_open("cuda", &probe) != ACG_OK) {
        printf("skipped: cuda: %s\n", acg_last_error());
        return 77;
    }
    acg_device_close(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenario),       cmocka_unit_test(test_update_refused),
        cmocka_unit_test(test_capture_errors), cmocka_unit_test(test_foreign_work),
        cmocka_unit_test(test_grid_limit),     cmocka_unit_test(test_native_graph),
        cmocka_unit_test(test_fault_sweep),
    };
    return cmocka_run_group_tests_name("test_cuda_backend", tests, NULL, NULL);
}
