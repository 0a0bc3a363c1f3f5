/* test_ze_native.c — the level_zero backend's native handles used beside acg, under the real
 * Level Zero loader against acg's test driver (tests/ze_driver, named by ZE_ENABLE_ALT_DRIVERS):
 *   - where the driver offers the record/replay graph extension, captures are recorded by the
 *     driver (work issued on the stream's own list too) and replayed many times in a row, the
 *     driver's object behind a graph runs on the stream's list without acg, and a capture
 *     invalidated while forked leaves both streams usable;
 *   - a buffer's native memory is its USM pointer and the device's native handles are the
 *     driver's: an engine's own fill and copy on the stream's list, eager and natively
 *     captured, make what acg's make;
 *   - a graph's copies read pinned memory at each replay;
 *   - the driver's lists: asked for more than it has, it sets the count to what it has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include <acg/acg.h>

#include "backend_scene.h"
#include "common.h" /* TC_OK */
#include "ze_scene.h"

#include "backends/level_zero/ze_ext.h"

#define N BS_N

/* ---- graphs the driver captured -------------------------------------------------------------- */

/* zeCommandListAppendMemoryCopy of the loader, for work an engine issues on a stream's own
 * list. */
static ze_pfnCommandListAppendMemoryCopy_t loader_copy(void) {
    ze_pfnCommandListAppendMemoryCopy_t f;
    *(void **)&f = ze_loader_function("zeCommandListAppendMemoryCopy");
    return f;
}

/* An extension function the driver serves. */
static void *driver_function(const char *name) {
    void *f = ze_driver_function_or_null(name);
    assert_non_null(f);
    return f;
}

/* Whether the driver's graphs are those of the driver-experimental form (its "...Exp"
 * functions), as the capability's detail says; else, where there are any, of spec 1.17. */
static bool graphs_exp(const acg_capability *cap) {
    return strstr(cap->detail, "graph capture yes (Exp)") != NULL;
}

/* The driver's object behind a graph (acg_graph_get_native): the executable graph of a native
 * capture, else the closed list; run without acg on the stream's own list, it does what a
 * replay does. */
static void run_native_graph(bs_scene *c, acg_graph *g, bool native) {
    const acg_capability *cap = acg_device_get_capability(c->dev);
    acg_native_handle gh = ACG_NATIVE_HANDLE_INIT, sh = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_graph_get_native(g, &gh));
    TC_OK(acg_stream_get_native(c->s, &sh));
    if (strstr(cap->detail, "immediate lists no") != NULL) {
        /* Queue mode: acg closes and executes each of the stream's lists, so it has none to give
         * an engine. */
        assert_int_equal(sh.kind, ACG_NATIVE_NONE);
        assert_null(sh.handle);
    }
    assert_int_equal(gh.kind, native ? ACG_NATIVE_ZE_EXECUTABLE_GRAPH : ACG_NATIVE_ZE_COMMAND_LIST);
    assert_non_null(gh.handle);
    ze_command_list_handle_t list = (ze_command_list_handle_t)sh.handle;
    memset(c->host, 0, N * sizeof(float)); /* before the append: the copy may run at once */
    ze_result_t r;
    if (native && graphs_exp(cap)) {
        acg_ze_pfn_zeCommandListAppendGraphExp append;
        *(void **)&append = driver_function("zeCommandListAppendGraphExp");
        r = append(list, (acg_ze_executable_graph_handle_t)gh.handle, NULL, NULL, 0, NULL);
    } else if (native) {
        acg_ze_pfn_zeCommandListAppendGraphExt append;
        *(void **)&append = driver_function("zeCommandListAppendGraphExt");
        r = append(list, (acg_ze_executable_graph_handle_t)gh.handle, NULL, NULL, 0, NULL);
    } else if (strstr(cap->detail, "immediate append yes") != NULL) {
        acg_ze_pfn_zeCommandListImmediateAppendCommandListsExp append;
        *(void **)&append = driver_function("zeCommandListImmediateAppendCommandListsExp");
        ze_command_list_handle_t graph_list = (ze_command_list_handle_t)gh.handle;
        r = append(list, 1, &graph_list, NULL, 0, NULL);
    } else {
        return; /* the list runs on a command queue of the caller's */
    }
    assert_int_equal(r, ZE_RESULT_SUCCESS);
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ZE_ALPHA));
}

/* The engine's own copy of a into b (pinned, N floats) on the stream's list h, declared, as a
 * capture of the scene's stream. */
static acg_graph *capture_engine_copy(bs_scene *c, const acg_native_handle *h, float *b,
                                      const float *a) {
    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    assert_int_equal(
        loader_copy()((ze_command_list_handle_t)h->handle, b, a, N * sizeof(float), NULL, 0, NULL),
        ZE_RESULT_SUCCESS);
    TC_OK(acg_stream_declare_foreign(c->s, "engine copy", NULL, 0));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    return g;
}

/* Where the driver offers the graph extension, a capture is the driver's: no list is recorded
 * from the description, the graph replays three times in a row (the driver checks that each
 * replay starts with the capture's events reset), work issued on the stream's list is recorded
 * too (and an update of such a graph is refused: capture again), and a capture invalidated
 * while a stream is forked into it leaves both streams working eagerly. The driver's object
 * behind the graph runs on the stream's list without acg. Without the extension,
 * the capability says so and graphs are lists. The calls counted are those of the form of the
 * extension the detail names. */
static void test_native_capture(void **state) {
    bs_scene *c = *state;
    const acg_capability *cap = acg_device_get_capability(c->dev);
    const bool native = strstr(cap->detail, "graph capture yes") != NULL;
    assert_int_equal(cap->native_capture, native);
    const char *begin_fn =
        graphs_exp(cap) ? "zeCommandListBeginGraphCaptureExp" : "zeCommandListBeginGraphCaptureExt";
    const char *append_fn =
        graphs_exp(cap) ? "zeCommandListAppendGraphExp" : "zeCommandListAppendGraphExt";
    unsigned long begun = ze_drv.calls(begin_fn);
    unsigned long created = ze_drv.calls("zeCommandListCreate");
    unsigned long appended = ze_drv.calls(append_fn);
    acg_graph *g = NULL;
    TC_OK(bs_capture(c, ZE_ALPHA, &g));
    assert_int_equal(ze_drv.calls(begin_fn) - begun, native ? 1 : 0);
    assert_int_equal(ze_drv.calls("zeCommandListCreate") - created, native ? 0 : 1);
    memset(c->host, 0, N * sizeof(float));
    for (int r = 0; r < 3; r++) {
        TC_OK(acg_graph_launch(g, c->s));
    }
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ZE_ALPHA));
    assert_int_equal(ze_drv.calls(append_fn) - appended, native ? 3 : 0);
    run_native_graph(c, g, native);
    TC_OK(acg_graph_destroy(g));
    if (native) {
        /* An engine's own copy on the stream's list, declared: the driver records it. */
        float *a = NULL, *b = NULL;
        TC_OK(acg_pinned_alloc(c->dev, N * sizeof(float), (void **)&a));
        TC_OK(acg_pinned_alloc(c->dev, N * sizeof(float), (void **)&b));
        for (int i = 0; i < N; i++) {
            a[i] = (float)i;
            b[i] = -1.0f;
        }
        acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
        TC_OK(acg_stream_get_native(c->s, &h));
        assert_int_equal(h.kind, ACG_NATIVE_ZE_COMMAND_LIST);
        g = capture_engine_copy(c, &h, b, a);
        assert_true(b[0] == -1.0f && b[N - 1] == -1.0f); /* recorded, not run */
        TC_OK(acg_graph_launch(g, c->s));
        TC_OK(acg_stream_synchronize(c->s));
        assert_memory_equal(a, b, N * sizeof(float));
        acg_graph *again = capture_engine_copy(c, &h, b, a);
        assert_int_equal(acg_graph_update(g, again), ACG_ERR_UNSUPPORTED);
        TC_OK(acg_graph_destroy(again));
        for (int i = 0; i < N; i++) {
            b[i] = -1.0f;
        }
        TC_OK(acg_graph_launch(g, c->s)); /* still the graph it was */
        TC_OK(acg_stream_synchronize(c->s));
        assert_memory_equal(a, b, N * sizeof(float));
        TC_OK(acg_graph_destroy(g));
        TC_OK(acg_pinned_free(a));
        TC_OK(acg_pinned_free(b));
    }
    /* Invalidated while s2 is forked into the capture: the driver's capture ends on both. */
    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    TC_OK(acg_event_record(c->fork, c->s));
    TC_OK(acg_stream_wait_event(c->s2, c->fork));
    TC_OK(bs_fill(c->s2, c->fill, c->y, N, 5.0f));
    assert_int_equal(acg_stream_synchronize(c->s2), ACG_ERR_CAPTURE_INVALIDATED);
    assert_int_equal(acg_stream_end_capture(c->s, &g), ACG_ERR_CAPTURE_INVALIDATED);
    bs_expect_eager(c, 5.0f);
}

/* ---- native memory and devices -------------------------------------------------------------- */

/* The device's handles are the driver's: the driver and device zeDriverGet and zeDeviceGet give,
 * and a context they allocate device memory in. */
static void expect_native_device(acg_device *dev) {
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(dev, &nd));
    assert_int_equal(nd.kind, ACG_NATIVE_ZE_CONTEXT);
    assert_int_equal(nd.ordinal, 0);
    ze_driver_handle_t driver = ze_first_driver();
    assert_ptr_equal(nd.platform, driver);
    ze_pfnDeviceGet_t device_get;
    *(void **)&device_get = ze_loader_function("zeDeviceGet");
    uint32_t n = 1;
    ze_device_handle_t device = NULL;
    assert_int_equal(device_get(driver, &n, &device), ZE_RESULT_SUCCESS);
    assert_ptr_equal(nd.device, device);
    ze_pfnMemAllocDevice_t alloc;
    ze_pfnMemFree_t release;
    *(void **)&alloc = ze_loader_function("zeMemAllocDevice");
    *(void **)&release = ze_loader_function("zeMemFree");
    ze_device_mem_alloc_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    void *p = NULL;
    assert_int_equal(
        alloc((ze_context_handle_t)nd.context, &desc, 64, 64, (ze_device_handle_t)nd.device, &p),
        ZE_RESULT_SUCCESS);
    assert_int_equal(release((ze_context_handle_t)nd.context, p), ZE_RESULT_SUCCESS);
}

/* What the foreign work below and its reference touch: x, its view xv of bytes [OFF, OFF +
 * PART), and y; pinned copies of x and y. */
#define OFF (16 * sizeof(float))
#define PART (N * sizeof(float) - 2 * OFF)

typedef struct engine {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *fill;
    acg_buffer *x, *xv, *y;
    acg_native_buffer nx, nv, ny;
    float *hx, *hy;
} engine;

/* Opens the device and makes what the engine's work touches. */
static void engine_open(engine *e) {
    memset(e, 0, sizeof *e);
    TC_OK(acg_device_open("level_zero", &e->dev));
    TC_OK(acg_kernel_get(e->dev, "fill_f32", &e->fill));
    e->s = tc_stream(e->dev);
    e->x = tc_buffer(e->dev, N * sizeof(float));
    e->y = tc_buffer(e->dev, N * sizeof(float));
    TC_OK(acg_buffer_create_view(e->x, OFF, PART, &e->xv));
    e->hx = tc_pinned(e->dev, N * sizeof(float));
    e->hy = tc_pinned(e->dev, N * sizeof(float));
}

static void engine_close(engine *e) {
    acg_buffer *bufs[] = {e->xv, e->x, e->y}; /* the view before its buffer */
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_buffer_free(bufs[i]));
    }
    TC_OK(acg_pinned_free(e->hx));
    TC_OK(acg_pinned_free(e->hy));
    TC_OK(acg_stream_destroy(e->s));
    TC_OK(acg_device_close(e->dev));
}

/* x and y zero, then by acg: 5.0 into xv (the fill kernel), xv copied to the start of y. */
static void engine_reference(engine *e, float *want_x, float *want_y) {
    TC_OK(acg_fill(e->s, e->x, 0, N * sizeof(float), 0, 4));
    TC_OK(acg_fill(e->s, e->y, 0, N * sizeof(float), 0, 4));
    TC_OK(bs_fill(e->s, e->fill, e->xv, (uint32_t)(PART / sizeof(float)), 5.0f));
    TC_OK(acg_copy_d2d(e->s, e->y, 0, e->xv, 0, PART));
    TC_OK(acg_copy_d2h(e->s, want_x, e->x, 0, N * sizeof(float)));
    TC_OK(acg_copy_d2h(e->s, want_y, e->y, 0, N * sizeof(float)));
    TC_OK(acg_stream_synchronize(e->s));
}

/* The same fill and copy as the engine's own work on the stream's list, at the buffers' native
 * addresses, each after a barrier (the list may not run in order), declared. */
static void engine_work(engine *e) {
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(e->s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_ZE_COMMAND_LIST);
    ze_command_list_handle_t list = (ze_command_list_handle_t)h.handle;
    ze_pfnCommandListAppendBarrier_t barrier;
    ze_pfnCommandListAppendMemoryFill_t fill;
    *(void **)&barrier = ze_loader_function("zeCommandListAppendBarrier");
    *(void **)&fill = ze_loader_function("zeCommandListAppendMemoryFill");
    const float five = 5.0f;
    void *xv = (void *)(uintptr_t)e->nv.address, *y = (void *)(uintptr_t)e->ny.address;
    assert_int_equal(barrier(list, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(fill(list, xv, &five, sizeof five, PART, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(barrier(list, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(loader_copy()(list, y, xv, PART, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    const acg_access accesses[] = {{e->xv, 0, 0, ACG_ACCESS_READ_WRITE},
                                   {e->y, 0, PART, ACG_ACCESS_WRITE}};
    TC_OK(acg_stream_declare_foreign(e->s, "engine fill and copy", accesses, 2));
}

/* A buffer's native memory is its USM pointer, a view's offset applied, and the device's
 * handles are the driver's. Work issued through the loader on the stream's own list at those
 * addresses (a fill, then a copy) makes what acg's fill kernel and copy make, byte for byte:
 * eagerly, and where the driver captures, inside a native capture, replayed twice. A node update
 * of that graph is refused (the driver's graph cannot be recorded again from the description,
 * which lacks the engine's work), and the graph replays as before. In queue mode the stream has
 * no list to give, and only the addresses are checked. */
static void test_native_memory(void **state) {
    (void)state;
    engine e;
    engine_open(&e);
    ze_bind();
    const acg_capability *cap = acg_device_get_capability(e.dev);
    expect_native_device(e.dev);
    acg_native_buffer *nb[] = {&e.nx, &e.nv, &e.ny};
    acg_buffer *bufs[] = {e.x, e.xv, e.y};
    for (int i = 0; i < 3; i++) {
        *nb[i] = (acg_native_buffer)ACG_NATIVE_BUFFER_INIT;
        TC_OK(acg_buffer_get_native(bufs[i], nb[i]));
        assert_int_equal(nb[i]->kind, ACG_NATIVE_ZE_DEVICE_MEMORY);
        assert_null(nb[i]->handle);
        assert_int_equal(nb[i]->offset, 0);
        assert_int_equal(nb[i]->bytes, acg_buffer_get_size(bufs[i]));
    }
    assert_true(e.nx.address != 0 && e.nv.address == e.nx.address + OFF);
    float want_x[N], want_y[N], got_x[N], got_y[N];
    engine_reference(&e, want_x, want_y);
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(e.s, &h));
    if (h.kind == ACG_NATIVE_NONE) {
        assert_non_null(strstr(cap->detail, "immediate lists no")); /* queue mode */
    } else {
        TC_OK(acg_fill(e.s, e.x, 0, N * sizeof(float), 0, 4));
        TC_OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0, 4));
        engine_work(&e);
        TC_OK(acg_copy_d2h(e.s, got_x, e.x, 0, sizeof got_x));
        TC_OK(acg_copy_d2h(e.s, got_y, e.y, 0, sizeof got_y));
        TC_OK(acg_stream_synchronize(e.s));
        assert_memory_equal(got_x, want_x, sizeof got_x);
        assert_memory_equal(got_y, want_y, sizeof got_y);
    }
    if (cap->native_capture) {
        acg_graph *g = NULL;
        TC_OK(acg_stream_begin_capture(e.s, NULL));
        TC_OK(bs_fill(e.s, e.fill, e.x, N, 0.0f));
        TC_OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0, 4));
        engine_work(&e);
        TC_OK(acg_copy_d2h(e.s, e.hx, e.x, 0, N * sizeof(float)));
        TC_OK(acg_copy_d2h(e.s, e.hy, e.y, 0, N * sizeof(float)));
        TC_OK(acg_stream_end_capture(e.s, &g));
        acg_node_info info;
        TC_OK(acg_graph_get_node(g, 2, &info));
        assert_int_equal(info.kind, ACG_NODE_FOREIGN);
        assert_string_equal(info.kernel, "engine fill and copy");
        for (int r = 0; r < 3; r++) {
            memset(e.hx, 0xff, N * sizeof(float));
            memset(e.hy, 0xff, N * sizeof(float));
            TC_OK(acg_fill(e.s, e.x, 0, N * sizeof(float), 0xffffffffu, 4));
            TC_OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0xffffffffu, 4));
            TC_OK(acg_graph_launch(g, e.s));
            if (r < 2) {
                TC_OK(acg_graph_launch(g, e.s));
            }
            TC_OK(acg_stream_synchronize(e.s));
            assert_memory_equal(e.hx, want_x, N * sizeof(float));
            assert_memory_equal(e.hy, want_y, N * sizeof(float));
            if (r == 1) {
                /* Node 0 fills x with 1.0 instead: refused, nothing changes. */
                acg_arg args[] = {acg_arg_buffer(e.x, 0), acg_arg_f32(1.0f)};
                assert_int_equal(acg_graph_update_kernel_node(g, 0, NULL, args, 2),
                                 ACG_ERR_UNSUPPORTED);
                assert_non_null(strstr(acg_last_error(), "acg_graph_update_kernel_node: node 2 "
                                                         "(engine fill and copy) is work acg did "
                                                         "not launch"));
            }
        }
        TC_OK(acg_graph_destroy(g));
    }
    engine_close(&e);
    assert_int_equal(ze_drv.violations(), 0);
}

/* A graph's copy from pinned memory reads it at every replay (graph_pinned_replay): what is
 * written there between replays is what the next replay copies. */
static void test_pinned_replay(void **state) {
    (void)state;
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev));
    bs_expect_pinned_replay(dev);
    TC_OK(acg_device_close(dev));
}

/* ---- the driver's lists ---------------------------------------------------------------------- */

/* Asked for more items than it has, the driver writes what it has and sets the count to that
 * number, none too (as Level Zero says; the backend always asks for the count first): the
 * extensions it offers (none in the .no-extensions run) and its devices. */
static void test_driver_lists(void **state) {
    (void)state;
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev)); /* the loader loaded, the driver initialized */
    ze_driver_handle_t driver = ze_first_driver();
    ze_pfnDriverGetExtensionProperties_t extensions;
    *(void **)&extensions = ze_loader_function("zeDriverGetExtensionProperties");
    uint32_t offered = 0;
    assert_int_equal(extensions(driver, &offered, NULL), ZE_RESULT_SUCCESS);
    ze_driver_extension_properties_t ext[16];
    assert_in_range(offered, 0, 15);
    uint32_t n = 16;
    assert_int_equal(extensions(driver, &n, ext), ZE_RESULT_SUCCESS);
    assert_int_equal(n, offered);
    ze_pfnDeviceGet_t devices;
    *(void **)&devices = ze_loader_function("zeDeviceGet");
    ze_device_handle_t devs[8];
    n = 8;
    assert_int_equal(devices(driver, &n, devs), ZE_RESULT_SUCCESS);
    assert_int_equal(n, 1); /* ACGTEST_ZE_DEVICES' default */
    TC_OK(acg_device_close(dev));
}

static const struct CMUnitTest tests[] = {
    ZE_CASE(test_native_capture),
    cmocka_unit_test(test_native_memory),
    cmocka_unit_test(test_pinned_replay),
    cmocka_unit_test(test_driver_lists),
};

BS_MAIN("level_zero", NULL, "test_ze_native", tests)
