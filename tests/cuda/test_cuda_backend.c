/* test_cuda_backend.c — what only the cuda backend has, run against acg's CUDA test driver
 * (tests/cuda_driver, named by ACG_CUDA_DRIVER):
 *   - how a driver that cannot serve is reported (--expect-unavailable TEXT, one process per
 *     driver condition, since the driver is loaded once per process) and what a driver lacking
 *     cuGraphExecUpdate and cuMemHostRegister disables (--expect-missing-optional);
 *   - every driver call of a capture + replay + update + loop + teardown scenario failing in
 *     turn: a clean status each time, no driver object left behind, the device usable
 *     afterwards (the loop: a WHILE node, its handle, its body's capture, acg's loop kernels);
 *   - cuGraphExecUpdate refused: the graph is instantiated again and replays the update;
 *   - an update of a graph holding foreign work, taken from the new capture's own CUDA graph:
 *     the replay matches the same work done eagerly, bit for bit; refusals instantiate again,
 *     and a source whose scratch lies in another pool is refused with ACG_ERR_UNSUPPORTED;
 *   - a device fault (CUDA's sticky errors): synchronize and acg_device_get_async_error say
 *     ACG_ERR_DEVICE_LOST naming CUDA's error, destroys and the close still work and leave no
 *     driver object, and the device opened again runs a kernel;
 *   - CUDA's own capture errors: the capture ends invalidated and the stream works on;
 *   - work the engine issues itself on the native CUstream reaches acg's buffers through
 *     their native addresses, in the device's own context, eagerly and inside a capture (as
 *     declared foreign work, in the graph), the same bits as acg's own copy and fill;
 *   - the CUgraphExec behind a graph, launched by the driver's own cuGraphLaunch, replays it;
 *     host memory the driver refuses to register is left unregistered. */
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

#include "backend_scene.h"
#include "backends/cuda/entry_points.h"
#include "common.h" /* tc_expect_device_works */
#include "cuda_native.h"

#define N BS_N
#define ALPHA 3.0f
#define ALPHA2 5.0f

/* The test driver's control functions, bound once a device was opened. */
static bs_driver drv = CU_TEST_DRIVER;

/* ---- the scenario -------------------------------------------------------------------------- */

/* A loop of the scene, run eagerly, then captured, replayed and destroyed: y = 0, then a body run
 * while z[0] counts down from 3 (y += x, z[0] -= x[0], z[1] = z[0], the condition): y ends at 3
 * (x is 1). Stops at the first failure and returns it, the graph destroyed. */
static acg_status loop_run(bs_scene *c, bool check) {
    const acg_dims all = acg_dims_1d(N), one = acg_dims_1d(1);
    const acg_arg add[] = {acg_arg_buffer(c->y, 0), acg_arg_buffer(c->x, 0), acg_arg_f32(1.0f)};
    const acg_arg count[] = {acg_arg_buffer(c->z, 0), acg_arg_buffer(c->x, 0), acg_arg_f32(-1.0f)};
    /* The same loop eagerly first (the host reads the condition between runs). */
    acg_status st = bs_fill(c->s, c->fill, c->y, N, 0.0f);
    st = st != ACG_OK ? st : bs_fill(c->s, c->fill, c->z, 2, 3.0f);
    st = st != ACG_OK ? st : acg_stream_loop_begin(c->s, c->z, 4, 8);
    st = st != ACG_OK ? st : acg_kernel_launch(c->s, c->axpy, &all, add, 3);
    st = st != ACG_OK ? st : acg_kernel_launch(c->s, c->axpy, &one, count, 3);
    st = st != ACG_OK ? st : acg_copy_d2d(c->s, c->z, 4, c->z, 0, 4);
    st = st != ACG_OK ? st : acg_stream_loop_end(c->s);
    st = st != ACG_OK ? st : acg_copy_d2h(c->s, c->host, c->y, 0, N * sizeof(float));
    st = st != ACG_OK ? st : acg_stream_synchronize(c->s);
    if (st != ACG_OK) {
        return st;
    }
    if (check) {
        assert_true(bs_host_is(c, 3.0f));
    }
    acg_graph *g = NULL;
    st = acg_stream_begin_capture(c->s, c->pool);
    if (st != ACG_OK) {
        return st;
    }
    st = bs_fill(c->s, c->fill, c->y, N, 0.0f);
    if (st == ACG_OK) {
        st = bs_fill(c->s, c->fill, c->z, 2, 3.0f);
    }
    if (st == ACG_OK) {
        st = acg_stream_loop_begin(c->s, c->z, 4, 8);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s, c->axpy, &all, add, 3);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s, c->axpy, &one, count, 3);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2d(c->s, c->z, 4, c->z, 0, 4);
    }
    if (st == ACG_OK) {
        st = acg_stream_loop_end(c->s);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, c->host, c->y, 0, N * sizeof(float));
    }
    /* Ended whatever happened, so the stream leaves capture mode: a driver failure invalidated
     * the capture, whose end repeats why. */
    acg_status end = acg_stream_end_capture(c->s, &g);
    st = st != ACG_OK ? st : end;
    if (st == ACG_OK) {
        st = bs_replay(c, g, 2, check, 3.0f);
    }
    acg_status destroyed = acg_graph_destroy(g);
    return st != ACG_OK ? st : destroyed;
}

/* Open (the capture with a host function: every kind of node the backend builds for an
 * update), eager work read back through registered memory, a forked capture replayed twice, an
 * update replayed, a loop; with check, the results are asserted. Stops at the first failure and
 * returns it, leaving teardown to bs_scene_close. */
static acg_status scene_run(bs_scene *c, bool check) {
    acg_status st = bs_scene_open(c, "cuda", true);
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
        st = bs_capture(c, ALPHA, &c->g);
    }
    if (st == ACG_OK) {
        st = bs_replay(c, c->g, 2, check, 2.0f + ALPHA);
    }
    if (st == ACG_OK && check) {
        assert_int_equal(c->host_calls, 2);
    }
    if (st == ACG_OK) {
        st = bs_capture(c, ALPHA2, &c->g2);
    }
    if (st == ACG_OK) {
        st = acg_graph_update(c->g, c->g2);
    }
    if (st == ACG_OK) {
        st = bs_replay(c, c->g, 1, check, 2.0f + ALPHA2);
    }
    if (st == ACG_OK && check) {
        assert_int_equal(c->host_calls, 3);
    }
    if (st == ACG_OK) {
        st = loop_run(c, check);
    }
    return st;
}

/* The cases below start from the scene the scenario made, checked (bs_scene_setup). */
static bs_suite suite = {scene_run, &drv};

/* The scenario alone: the fixture's setup runs it with its checks. */
static void test_scenario(void **state) { (void)state; }

/* The entry points the backend resolves: the sweep fails each call of each in turn. */
static const char *const entry_names[] = {
#define TC_CU_NAME_(name, ver, required) #name,
    ACG_CUDA_ENTRY_POINTS(TC_CU_NAME_)
#undef TC_CU_NAME_
        NULL,
};

/* Calls that destroy or release: a driver that fails one keeps the object. */
static bool releases(const char *name) {
    return strstr(name, "Destroy") != NULL || strstr(name, "Free") != NULL ||
           strstr(name, "Unload") != NULL || strstr(name, "Release") != NULL ||
           strstr(name, "Unregister") != NULL;
}

/* After cuMemHostUnregister failed, the driver still holds the range the test has freed since,
 * and would refuse malloc's next block there: it is released, as process exit would. */
static void release_registered(const bs_driver *d, const char *name, void *reg) {
    if (strcmp(name, "cuMemHostUnregister") != 0) {
        return;
    }
    PFN_cuMemHostUnregister_v4000 unregister;
    *(void **)&unregister = cu_entry(d, "cuMemHostUnregister", 4000);
    assert_int_equal(unregister(reg), CUDA_SUCCESS);
}

/* Every driver call of the scenario, teardown included, fails in turn (an invalid-value error,
 * as a driver refusing it would): the scenario ends with a clean status naming the driver's
 * error (or absorbs the failure, as a failed upload or a drop of what was recorded may), the
 * teardown leaves no driver object behind, and the same scenario then runs clean on a new
 * device (bs_fault_sweep). */
static const bs_sweep sweep = {.names = entry_names,
                               .run = scene_run,
                               .releases = releases,
                               .after_close = release_registered,
                               .drv = &drv};

/* cuGraphExecUpdate refused: the exec is instantiated again from the ledger's graph, and the
 * replay computes the update. */
static void test_update_refused(void **state) {
    bs_scene *c = *state;
    acg_graph *g3 = NULL;
    TC_OK(bs_capture(c, ALPHA, &g3));
    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    drv.inject("cuGraphExecUpdate", 1, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    TC_OK(acg_graph_update(c->g, g3));
    drv.inject(NULL, 0, 0);
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    TC_OK(acg_graph_launch(c->g, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ALPHA));
    TC_OK(acg_graph_destroy(g3));
}

/* CUDA's own capture errors end the capture invalidated; the streams then work eagerly. */
static void test_capture_errors(void **state) {
    bs_scene *c = *state;
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
        acg_status st = bs_capture(c, ALPHA, &g);
        drv.inject(NULL, 0, 0);
        assert_int_equal(st, ACG_ERR_CAPTURE_INVALIDATED);
        assert_null(g);
        TC_EXPECT_CAPTURE_STATE(c->s2, NONE);
        bs_expect_eager(c, 7.0f); /* both streams run eager work again */
    }
}

/* ---- updates of foreign work ---------------------------------------------------------------- */

/* The driver calls an engine makes itself on the native CUstream. */
static cu_engine eng;

/* The stream's native CUstream, the engine's calls bound. */
static CUstream native_stream(acg_stream *s) {
    cu_engine_bind(&drv, &eng);
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_CUDA_STREAM);
    return (CUstream)h.handle;
}

/* A whole buffer's device address: its own allocation, from its start. */
static CUdeviceptr address_of(acg_buffer *b, size_t bytes) {
    acg_native_buffer nb = cu_native_buffer(b);
    assert_null(nb.handle);
    assert_int_equal(nb.offset, 0);
    assert_int_equal(nb.bytes, bytes);
    return (CUdeviceptr)nb.address;
}

/* x = 9 (the engine's cuMemsetD32Async on x's native address, or acg's fill), z[64..192) =
 * x[0..128) (the engine's cuMemcpyDtoDAsync into a view of z, or acg's copy), then acg's
 * kernels: y = 1, y += 3 x. The engine's work is declared foreign work with its accesses. */
static acg_status foreign_step(bs_scene *c, acg_buffer *view, bool engine) {
    CUstream native = native_stream(c->s);
    acg_arg fill_args[] = {acg_arg_buffer(c->y, 0), acg_arg_f32(1.0f)};
    acg_arg axpy_args[] = {acg_arg_buffer(c->y, 0), acg_arg_buffer(c->x, 0), acg_arg_f32(3.0f)};
    acg_dims dims = acg_dims_1d(N);
    acg_access wx = {c->x, 0, 0, ACG_ACCESS_WRITE};
    acg_access xv[] = {{c->x, 0, 128 * sizeof(float), ACG_ACCESS_READ},
                       {view, 0, 0, ACG_ACCESS_WRITE}};
    acg_status st;
    if (engine) {
        assert_int_equal(
            eng.memset32(address_of(c->x, N * sizeof(float)), cu_bits_of(9.0f), N, native),
            CUDA_SUCCESS);
        st = acg_stream_declare_foreign(c->s, "engine memset", &wx, 1);
    } else {
        st = acg_fill(c->s, c->x, 0, N * sizeof(float), cu_bits_of(9.0f), 4);
    }
    if (st == ACG_OK && engine) {
        assert_int_equal(eng.d2d(address_of(view, 128 * sizeof(float)),
                                 address_of(c->x, N * sizeof(float)), 128 * sizeof(float), native),
                         CUDA_SUCCESS);
        st = acg_stream_declare_foreign(c->s, "engine copy", xv, 2);
    } else if (st == ACG_OK) {
        st = acg_copy_d2d(c->s, view, 0, c->x, 0, 128 * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s, c->fill, &dims, fill_args, 2);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s, c->axpy, &dims, axpy_args, 3);
    }
    return st;
}

typedef struct foreign_result {
    float x[N], y[N], z[N];
} foreign_result;

/* Zeroes x, y and z, replays g (or, with g NULL, runs the step eagerly), and reads them back. */
static void foreign_run(bs_scene *c, acg_graph *g, acg_buffer *view, bool engine,
                        foreign_result *out) {
    acg_buffer *bufs[] = {c->x, c->y, c->z};
    float *outs[] = {out->x, out->y, out->z};
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_fill(c->s, bufs[i], 0, N * sizeof(float), 0, 4));
    }
    TC_OK(acg_stream_synchronize(c->s));
    TC_OK(g != NULL ? acg_graph_launch(g, c->s) : foreign_step(c, view, engine));
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_copy_d2h(c->s, outs[i], bufs[i], 0, N * sizeof(float)));
    }
}

/* The engine's own work reaches acg's buffers through their native addresses
 * (acg_buffer_get_native; a view's is its parent's plus its offset) on the stream's native
 * CUstream, in the device's own context (acg_device_get_native: the primary context and the
 * CUdevice the driver has). Eagerly, and captured as declared foreign work (nodes of the graph
 * that run at every replay), it leaves what acg's own fill and copy leave, bit for bit; the
 * buffer it writes stays alive while the graph does. */
static void test_foreign_work(void **state) {
    bs_scene *c = *state;
    native_stream(c->s);
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(c->dev, &nd));
    assert_int_equal(nd.kind, ACG_NATIVE_CUDA_CONTEXT);
    assert_null(nd.device);
    assert_null(nd.platform);
    PFN_cuDeviceGet_v2000 get_device;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain;
    PFN_cuDevicePrimaryCtxRelease_v11000 release;
    *(void **)&get_device = cu_entry(&drv, "cuDeviceGet", 2000);
    *(void **)&retain = cu_entry(&drv, "cuDevicePrimaryCtxRetain", 7000);
    *(void **)&release = cu_entry(&drv, "cuDevicePrimaryCtxRelease", 11000);
    CUdevice cu_dev = -1;
    CUcontext primary = NULL;
    assert_int_equal(get_device(&cu_dev, 0), CUDA_SUCCESS);
    assert_int_equal(nd.ordinal, cu_dev);
    assert_int_equal(retain(&primary, cu_dev), CUDA_SUCCESS);
    assert_ptr_equal(nd.context, primary);
    assert_int_equal(release(cu_dev), CUDA_SUCCESS);

    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(c->z, 64 * sizeof(float), 128 * sizeof(float), &view));
    assert_int_equal(address_of(view, 128 * sizeof(float)),
                     address_of(c->z, N * sizeof(float)) + 64 * sizeof(float));

    foreign_result want, got;
    foreign_run(c, NULL, view, false, &want);
    assert_true(want.y[0] == 28.0f && want.z[64] == 9.0f && want.z[63] == 0.0f);
    foreign_run(c, NULL, view, true, &got);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    TC_OK(foreign_step(c, view, true));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    static const acg_node_kind kinds[] = {ACG_NODE_FOREIGN, ACG_NODE_FOREIGN, ACG_NODE_KERNEL,
                                          ACG_NODE_KERNEL};
    tc_expect_node_kinds(g, kinds, 4);
    /* Nothing ran at capture, and each replay does it all again. */
    for (int r = 0; r < 2; r++) {
        memset(&got, 0, sizeof got);
        foreign_run(c, g, view, true, &got);
        assert_int_equal(memcmp(&got, &want, sizeof got), 0);
    }
    TC_EXPECT_HAS(ERR_IN_USE, acg_buffer_free(view), "");
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(view));
}

/* One step's work on the scene's stream: y (or `scratch`, when not NULL, then copied to y) = k
 * by acg's kernel; unless own is 0, the engine's own work on `own`, declared as foreign work
 * "engine work": a memset to m, or with src a copy of src; y downloaded to the scene's pinned
 * host memory. The same calls eagerly or in a capture. */
static acg_status step(bs_scene *c, acg_buffer *scratch, float k, CUdeviceptr own, float m,
                       CUdeviceptr src) {
    CUstream native = native_stream(c->s);
    acg_buffer *dst = scratch != NULL ? scratch : c->y;
    acg_arg args[] = {acg_arg_buffer(dst, 0), acg_arg_f32(k)};
    acg_dims dims = acg_dims_1d(N);
    acg_status st = acg_kernel_launch(c->s, c->fill, &dims, args, 2);
    if (st == ACG_OK && scratch != NULL) {
        st = acg_copy_d2d(c->s, c->y, 0, scratch, 0, N * sizeof(float));
    }
    if (own != 0) {
        CUresult r = src != 0 ? eng.d2d(own, src, N * sizeof(float), native)
                              : eng.memset32(own, cu_bits_of(m), N, native);
        assert_int_equal(r, CUDA_SUCCESS);
        if (st == ACG_OK) {
            st = acg_stream_declare_foreign(c->s, "engine work", NULL, 0);
        }
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, c->host, c->y, 0, N * sizeof(float));
    }
    return st;
}

/* step, captured into pool (with a scratch buffer of it when `with_scratch`). */
static acg_graph *capture_step(bs_scene *c, acg_graph_pool *pool, bool with_scratch, float k,
                               CUdeviceptr own, float m, CUdeviceptr src) {
    TC_OK(acg_stream_begin_capture(c->s, pool));
    acg_buffer *scratch = NULL;
    if (with_scratch) {
        TC_OK(acg_stream_alloc(c->s, N * sizeof(float), &scratch));
    }
    TC_OK(step(c, scratch, k, own, m, src));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    return g;
}

/* What a replay left: y (through the scene's pinned memory) and the engine's memory `own`. */
typedef struct result {
    float y[N];
    float own[N];
} result;

/* Zeroes y, the host copy and every piece of the engine's memory, runs `g` (or, with g NULL,
 * the step eagerly), and reads the result back. */
static void run(bs_scene *c, acg_graph *g, CUdeviceptr *own, int n_own, float k, int at, float m,
                CUdeviceptr src, result *out) {
    CUstream native = native_stream(c->s);
    for (int i = 0; i < n_own; i++) {
        assert_int_equal(eng.memset32(own[i], 0, N, native), CUDA_SUCCESS);
    }
    TC_OK(acg_fill(c->s, c->y, 0, N * sizeof(float), 0, 4));
    TC_OK(acg_stream_synchronize(c->s));
    memset(c->host, 0, N * sizeof(float));
    if (g != NULL) {
        TC_OK(acg_graph_launch(g, c->s));
    } else {
        TC_OK(step(c, NULL, k, own[at], m, src));
    }
    TC_OK(acg_stream_synchronize(c->s));
    memcpy(out->y, c->host, sizeof out->y);
    assert_int_equal(eng.d2h(out->own, own[at], sizeof out->own, native), CUDA_SUCCESS);
    TC_OK(acg_stream_synchronize(c->s));
}

/* The engine's memory other than own[at] is still zero. */
static void expect_others_zero(bs_scene *c, CUdeviceptr *own, int n_own, int at) {
    CUstream native = native_stream(c->s);
    float back[N], zero[N];
    memset(zero, 0, sizeof zero);
    for (int i = 0; i < n_own; i++) {
        if (i != at) {
            assert_int_equal(eng.d2h(back, own[i], sizeof back, native), CUDA_SUCCESS);
            TC_OK(acg_stream_synchronize(c->s));
            assert_int_equal(memcmp(back, zero, sizeof back), 0);
        }
    }
}

/* A graph holding foreign work, updated from a new capture of the same step with other
 * arguments (another value for acg's kernel, another piece of the engine's memory and value):
 * the update takes the new capture's own CUDA graph, which holds the engine's work the ledger
 * cannot rebuild, and the replay then leaves what the step does eagerly, bit for bit; the
 * source graph still replays its own. CUDA refusing (injected, or the engine's work now a copy,
 * another kind of node) instantiates the graph again from the new capture, and the replay is
 * right again. */
static void test_update_foreign(void **state) {
    bs_scene *c = *state;
    native_stream(c->s);
    CUdeviceptr own[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eng.alloc(&own[i], N * sizeof(float)), CUDA_SUCCESS);
    }
    result got, want;
    acg_graph *g = capture_step(c, c->pool, false, 1.5f, own[0], 9.0f, 0);
    acg_graph *from = capture_step(c, c->pool, false, 2.5f, own[1], 7.0f, 0);
    run(c, g, own, 3, 0, 0, 0, 0, &got);
    run(c, NULL, own, 3, 1.5f, 0, 9.0f, 0, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    unsigned long clones = drv.calls("cuGraphClone");
    TC_OK(acg_graph_update(g, from));
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst); /* in place */
    assert_int_equal(drv.calls("cuGraphClone"), clones + 1);
    run(c, g, own, 3, 0, 1, 0, 0, &got);
    expect_others_zero(c, own, 3, 1);
    run(c, NULL, own, 3, 2.5f, 1, 7.0f, 0, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);
    run(c, from, own, 3, 0, 1, 0, 0, &got); /* from is unchanged */
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    /* Refused by CUDA (injected): instantiated again from the new capture. */
    acg_graph *again = capture_step(c, c->pool, false, -4.25f, own[2], 0.5f, 0);
    inst = drv.calls("cuGraphInstantiateWithFlags");
    drv.inject("cuGraphExecUpdate", 1, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    TC_OK(acg_graph_update(g, again));
    drv.inject(NULL, 0, 0);
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    run(c, g, own, 3, 0, 2, 0, 0, &got);
    expect_others_zero(c, own, 3, 2);
    run(c, NULL, own, 3, -4.25f, 2, 0.5f, 0, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    /* Refused by CUDA's own rules: the engine's work is now a copy (of own[1], set to 3) where
     * the memset was. acg sees the same topology (foreign work of the same name). */
    acg_graph *copying = capture_step(c, c->pool, false, 6.0f, own[0], 0, own[1]);
    inst = drv.calls("cuGraphInstantiateWithFlags");
    TC_OK(acg_graph_update(g, copying));
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    CUstream native = native_stream(c->s);
    float three[N];
    for (int i = 0; i < N; i++) {
        three[i] = 3.0f;
    }
    assert_int_equal(eng.memset32(own[1], cu_bits_of(3.0f), N, native), CUDA_SUCCESS);
    TC_OK(acg_graph_launch(g, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    assert_int_equal(eng.d2h(got.own, own[0], sizeof got.own, native), CUDA_SUCCESS);
    TC_OK(acg_stream_synchronize(c->s));
    assert_int_equal(memcmp(got.own, three, sizeof three), 0);
    for (int i = 0; i < N; i++) {
        assert_true(c->host[i] == 6.0f);
    }

    TC_OK(acg_graph_destroy(copying));
    TC_OK(acg_graph_destroy(again));
    TC_OK(acg_graph_destroy(from));
    TC_OK(acg_graph_destroy(g));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(eng.release(own[i]), CUDA_SUCCESS);
    }
}

/* Graphs with scratch and foreign work: from one pool their scratch coincides, and the update
 * takes the new capture's own graph; from another pool the capture's addresses are that pool's
 * scratch, the ledger cannot rebuild the foreign work, and the update is refused with
 * ACG_ERR_UNSUPPORTED saying so, the graph replaying what it did. Without foreign work the
 * ledger serves across pools: the update is built from it, with the graph's own scratch. */
static void test_update_foreign_pools(void **state) {
    bs_scene *c = *state;
    native_stream(c->s);
    CUdeviceptr own[1];
    assert_int_equal(eng.alloc(&own[0], N * sizeof(float)), CUDA_SUCCESS);
    acg_graph_pool *other = NULL;
    TC_OK(acg_graph_pool_create(c->dev, &other));
    acg_graph *g = capture_step(c, c->pool, true, 1.0f, own[0], 9.0f, 0);
    acg_graph *same = capture_step(c, c->pool, true, 2.0f, own[0], 8.0f, 0);
    acg_graph *elsewhere = capture_step(c, other, true, 3.0f, own[0], 6.0f, 0);
    result got, want;

    TC_EXPECT_HAS(ERR_UNSUPPORTED, acg_graph_update(g, elsewhere), "one pool");
    assert_non_null(strstr(acg_last_error(), "engine work"));
    run(c, g, own, 1, 0, 0, 0, 0, &got);
    run(c, NULL, own, 1, 1.0f, 0, 9.0f, 0, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    TC_OK(acg_graph_update(g, same));
    run(c, g, own, 1, 0, 0, 0, 0, &got);
    run(c, NULL, own, 1, 2.0f, 0, 8.0f, 0, &want);
    assert_int_equal(memcmp(&got, &want, sizeof got), 0);

    acg_graph *h = capture_step(c, c->pool, true, 5.0f, 0, 0, 0);
    acg_graph *h2 = capture_step(c, other, true, -1.0f, 0, 0, 0);
    unsigned long clones = drv.calls("cuGraphClone"), built = drv.calls("cuGraphCreate");
    TC_OK(acg_graph_update(h, h2));
    assert_int_equal(drv.calls("cuGraphClone"), clones);
    assert_int_equal(drv.calls("cuGraphCreate"), built + 1);
    run(c, h, own, 1, 0, 0, 0, 0, &got);
    run(c, NULL, own, 1, -1.0f, 0, 0, 0, &want);
    assert_int_equal(memcmp(got.y, want.y, sizeof got.y), 0);
    TC_OK(acg_graph_destroy(h2));
    TC_OK(acg_graph_destroy(h));

    /* The capability's detail says where foreign work updates. */
    const acg_capability *cap = acg_device_get_capability(c->dev);
    assert_true(cap->graph_update);
    assert_non_null(strstr(cap->detail, "foreign work, collectives: one pool"));

    TC_OK(acg_graph_destroy(elsewhere));
    TC_OK(acg_graph_destroy(same));
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(other));
    assert_int_equal(eng.release(own[0]), CUDA_SUCCESS);
}

/* ---- device faults ------------------------------------------------------------------------ */

/* A device fault, as CUDA reports one: the context holds CUDA_ERROR_LAUNCH_FAILED (set in the
 * test driver as a faulting kernel would), and every call on it fails with it. The device's
 * poll (the first call after the fault, so the backend's own answer) says ACG_ERR_DEVICE_LOST
 * naming CUDA's error, and so do the stream's synchronize, a launch and an allocation after it;
 * every destroy and the device's close still work and leave no driver object behind, and the
 * device opened again (a new primary context) runs a kernel. Each error cuda.h says leaves the
 * context unusable is then the first fault of a device of its own, and maps the same way. */
static void test_device_fault(void **state) {
    (void)state;
    bs_driver_bind(&drv);
    long live = drv.live();
    bs_rig r;
    bs_rig_open(&r, "cuda", 2.0f);
    TC_OK(acg_graph_launch(r.g, r.s));
    TC_OK(acg_event_record(r.ev, r.s));
    TC_OK(acg_stream_synchronize(r.s));
    TC_OK(acg_device_get_async_error(r.dev)); /* no fault yet */

    drv.fault(0, CUDA_ERROR_LAUNCH_FAILED);
    TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_device_get_async_error(r.dev),
                  "acg_device_get_async_error: cuEventQuery failed with CUDA_ERROR_LAUNCH_FAILED");
    TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_device_get_async_error(r.dev), "CUDA_ERROR_LAUNCH_FAILED");
    TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_stream_synchronize(r.s), "CUDA_ERROR_LAUNCH_FAILED");
    TC_EXPECT_HAS(ERR_DEVICE_LOST, bs_fill(r.s, r.fill, r.x, N, 2.0f), "CUDA_ERROR_LAUNCH_FAILED");
    TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_event_query(r.ev), "CUDA_ERROR_LAUNCH_FAILED");
    acg_buffer *more = NULL;
    TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_buffer_alloc(r.dev, 64, &more), "CUDA_ERROR_LAUNCH_FAILED");
    assert_null(more);

    /* Destroys work, and the close frees the rest with the context. */
    bs_rig_close(&r);
    assert_int_equal(drv.live(), live);

    /* Opened again: a new context, no fault, and a kernel runs. */
    tc_expect_device_works("cuda");
    assert_int_equal(drv.live(), live);

    /* Every error cuda.h says leaves the context unusable is a lost device. */
    static const struct {
        int code;
        const char *name;
    } faults[] = {
        {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT"},
        {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR"},
        {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
        {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS"},
        {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE"},
        {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC"},
        {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT"},
        {CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK"},
        {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE"},
        {CUDA_ERROR_NVLINK_UNCORRECTABLE, "CUDA_ERROR_NVLINK_UNCORRECTABLE"},
        {CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED"},
        {CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE"},
        {CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED"},
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        acg_device *dev = NULL;
        acg_stream *s = NULL;
        TC_OK(acg_device_open("cuda", &dev));
        TC_OK(acg_stream_create(dev, &s));
        drv.fault(0, faults[i].code);
        TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_device_get_async_error(dev), faults[i].name);
        assert_non_null(strstr(acg_last_error(), "cuEventQuery"));
        TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_stream_query(s), faults[i].name);
        TC_OK(acg_stream_destroy(s));
        TC_OK(acg_device_close(dev));
        assert_int_equal(drv.live(), live);
    }
}

/* A grid CUDA cannot launch (65,536 blocks in y, one more than the limit) is refused with
 * ACG_ERR_UNSUPPORTED before the driver sees it; a grid one row smaller runs. The model's
 * matmul (grid (n_out, n)) with one column and one input gives a tall grid on small buffers. */
static void test_grid_limit(void **state) {
    (void)state;
    TC_OK(acg_model_register_kernels());
    acg_device *dev = NULL;
    TC_OK(acg_device_open("cuda", &dev));
    cu_tall t;
    cu_tall_open(&t, dev);
    acg_stream *s = tc_stream(dev);
    for (uint32_t n = CU_TALL_ROWS; n >= CU_TALL_ROWS - 1; n--) {
        acg_arg args[6];
        acg_dims dims;
        cu_tall_rows(&t, n, args, &dims);
        acg_status st = acg_kernel_launch(s, t.matmul, &dims, args, 6);
        if (n == CU_TALL_ROWS) {
            assert_int_equal(st, ACG_ERR_UNSUPPORTED);
            assert_non_null(strstr(acg_last_error(), "blocks"));
        } else {
            TC_OK(st);
        }
    }
    /* The sampler has a block of 1024 threads per row (cuda_lanes): 2^31 rows would be 2^31
     * blocks, one more than CUDA launches in x, however few rows the buffers hold; one row's
     * grid runs (the test driver refuses a grid that does not give each row its block). */
    acg_kernel *sample = NULL;
    TC_OK(acg_kernel_get(dev, "sample_f32", &sample));
    acg_buffer *seats = NULL, *states = NULL;
    TC_OK(acg_buffer_alloc(dev, sizeof(int32_t), &seats));
    TC_OK(acg_buffer_alloc(dev, ACG_SAMPLER_STATE_WORDS * sizeof(uint32_t), &states));
    TC_OK(acg_fill(s, seats, 0, sizeof(int32_t), 0, 4));
    TC_OK(acg_fill(s, states, 0, ACG_SAMPLER_STATE_WORDS * sizeof(uint32_t), 0, 4));
    for (int i = 0; i < 2; i++) {
        acg_arg args[] = {acg_arg_buffer(t.out, 0),
                          acg_arg_buffer(t.x, 0),
                          acg_arg_buffer(t.x, 4 * 2),
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
            TC_OK(st);
        }
    }
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_buffer_free(states));
    TC_OK(acg_buffer_free(seats));
    cu_tall_close(&t);
    TC_OK(acg_device_close(dev));
    TC_OK(acg_model_unregister_kernels());
}

/* ---- drivers that cannot serve ----------------------------------------------------------- */

/* The CUgraphExec behind a graph, launched with the driver's own cuGraphLaunch on the stream's
 * CUstream, computes what acg's replay computes (the bench's raw row does this); host memory
 * the driver refuses to register is left unregistered, and a later registration works. */
static void test_native_graph(void **state) {
    bs_scene *c = *state; /* c->g replays the update: y = 2 + ALPHA2 */
    acg_native_handle exec = ACG_NATIVE_HANDLE_INIT, stream = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_graph_get_native(c->g, &exec));
    TC_OK(acg_stream_get_native(c->s, &stream));
    assert_int_equal(exec.kind, ACG_NATIVE_CUDA_GRAPH_EXEC);
    assert_int_equal(stream.kind, ACG_NATIVE_CUDA_STREAM);
    PFN_cuGraphLaunch_v10000 launch;
    PFN_cuStreamSynchronize_v2000 sync;
    *(void **)&launch = cu_entry(&drv, "cuGraphLaunch", 10000);
    *(void **)&sync = cu_entry(&drv, "cuStreamSynchronize", 2000);
    memset(c->host, 0, N * sizeof(float));
    int calls = c->host_calls;
    assert_int_equal(launch((CUgraphExec)exec.handle, (CUstream)stream.handle), CUDA_SUCCESS);
    assert_int_equal(sync((CUstream)stream.handle), CUDA_SUCCESS);
    assert_int_equal(c->host_calls, calls + 1);
    assert_true(bs_host_is(c, 2.0f + ALPHA2));

    float *mem = aligned_alloc(4096, 4096);
    assert_non_null(mem);
    drv.inject("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(acg_pinned_register(c->dev, mem, 4096), ACG_ERR_OUT_OF_MEMORY);
    assert_non_null(strstr(acg_last_error(), "cuMemHostRegister"));
    drv.inject(NULL, 0, 0);
    assert_false(acg_pinned_contains(c->dev, mem, 4));
    assert_int_equal(acg_pinned_unregister(mem), ACG_ERR_INVALID_HANDLE);
    unsigned long registered = drv.calls("cuMemHostRegister");
    TC_OK(acg_pinned_register(c->dev, mem, 4096));
    assert_int_equal(drv.calls("cuMemHostRegister"), registered + 1);
    TC_OK(acg_pinned_unregister(mem));
    free(mem);
}

/* A driver without cuGraphExecUpdate and cuMemHostRegister (ACGTEST_CUDA_HIDE): graphs still
 * work, update and registration are off, the capability's detail names what is missing, and
 * acg_pinned_register says ACG_ERR_UNSUPPORTED. */
/* A 12.3 driver has the conditional entry points but not WHILE nodes (12.4): no loops in
 * graphs, the detail says why, a loop in a capture invalidates it, and an eager loop runs. */
static int expect_no_loops(void) {
    acg_device *dev = bs_open_or_say("cuda");
    if (dev == NULL) {
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    int bad = cap == NULL || !cap->graphs || cap->graph_loops ||
              strstr(cap->detail, "no loops (driver < 12.4)") == NULL;
    if (cap != NULL) {
        printf("graphs %d, loops %d: %s\n", cap->graphs, cap->graph_loops, cap->detail);
    }
    acg_stream *s = NULL;
    acg_buffer *b = NULL;
    acg_graph *g = NULL;
    bad |= acg_stream_create(dev, &s) != ACG_OK || acg_buffer_alloc(dev, 16, &b) != ACG_OK;
    bad |= acg_fill(s, b, 0, 16, 0, 4) != ACG_OK;
    bad |= acg_stream_loop_begin(s, b, 0, 4) != ACG_OK || acg_stream_loop_end(s) != ACG_OK;
    bad |= acg_stream_begin_capture(s, NULL) != ACG_OK;
    acg_status st = acg_stream_loop_begin(s, b, 0, 4);
    printf("acg_stream_loop_begin in a capture: %s: %s\n", acg_status_name(st), acg_last_error());
    bad |= st != ACG_ERR_CAPTURE_INVALIDATED || strstr(acg_last_error(), "graph_loops") == NULL;
    bad |= acg_stream_end_capture(s, &g) != ACG_ERR_CAPTURE_INVALIDATED;
    bad |= acg_buffer_free(b) != ACG_OK || acg_stream_destroy(s) != ACG_OK;
    bad |= acg_device_close(dev) != ACG_OK;
    return bad;
}

static int expect_missing_optional(void) {
    acg_device *dev = bs_open_or_say("cuda");
    if (dev == NULL) {
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

static const bs_mode modes[] = {
    {"--expect-missing-optional", expect_missing_optional, NULL},
    {"--expect-no-loops", expect_no_loops, NULL},
    {NULL, NULL, NULL},
};

#define CASE(test) BS_SCENE_CASE(test, &suite)
static const struct CMUnitTest tests[] = {
    CASE(test_scenario),
    CASE(test_update_refused),
    CASE(test_capture_errors),
    CASE(test_foreign_work),
    cmocka_unit_test(test_grid_limit),
    CASE(test_native_graph),
    CASE(test_update_foreign),
    CASE(test_update_foreign_pools),
    cmocka_unit_test(test_device_fault),
    BS_SWEEP_CASE(&sweep),
};
#undef CASE

BS_MAIN("cuda", modes, "test_cuda_backend", tests)
