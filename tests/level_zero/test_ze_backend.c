/* test_ze_backend.c — what only the level_zero backend has, run under the real Level Zero loader
 * against acg's test driver (tests/ze_driver, named by ZE_ENABLE_ALT_DRIVERS):
 *   - how a loader or driver that cannot serve is reported (--expect-unavailable TEXT, one
 *     process per condition, since the loader is loaded once per process);
 *   - every driver call of a capture + replay + discard + update + teardown scenario failing in
 *     turn: a clean status each time, nothing left behind unless the backend says so, the device
 *     usable afterwards, and no misuse of the driver (a list destroyed while pending);
 *   - a discarded graph's command list outlives a pending replay (retain_discarded_graphs):
 *     the driver sees no list destroyed while the device may still reference it;
 *   - an update patches a mutable list in place, or records the list again;
 *   - where the driver offers the record/replay graph extension, captures are recorded by the
 *     driver (work issued on the stream's own list too) and replayed many times in a row, and
 *     a capture invalidated while forked leaves both streams usable;
 *   - free memory comes from the usable memory extension, or cannot be told without it;
 *   - a buffer's native memory is its USM pointer and the device's native handles are the
 *     driver's: an engine's own fill and copy on the stream's list, eager and natively
 *     captured, make what acg's make; a graph's copies read pinned memory at each replay;
 *   - acg_graph_update_kernel_node patches a node's command in a mutable list, or records the
 *     list again, and its refusals and failures leave the graph replaying as before;
 *   - a kernel whose definition disagrees with its SPIR-V's parameters is refused when loaded;
 *   - a lost device (an injected ZE_RESULT_ERROR_DEVICE_LOST, or the driver's device lost for
 *     good) is reported by the wait that meets it or by acg_device_get_async_error's poll,
 *     which waits for nothing; every later call fails fast naming the first fault, destroys
 *     and the close succeed and leave nothing of the driver's behind, and the device opened
 *     again works. */
#include <dlfcn.h>
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
#include "common.h" /* tc_expect_device_works */

#include "../ze_driver/acgtest_ze.h" /* ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES */
#include "backends/level_zero/entry_points.h"
#include "backends/level_zero/ze_ext.h"
#include "core/backend/acg-backend.h" /* acg__kernel_desc_find: the core's fill_f32 */

#define N BS_N
#define ALPHA 3.0f

/* ---- the test driver's control functions (tests/ze_driver/acgtest_ze.h) ------------------ */

static bs_driver drv = {.env = "ZE_ENABLE_ALT_DRIVERS",
                        .prefix = "acgtest_ze",
                        .refusal = ZE_RESULT_ERROR_INVALID_ARGUMENT,
                        .refusal_name = "ZE_RESULT_ERROR_INVALID_ARGUMENT"};
static void (*set_lost)(int device, int mode);

/* Binds the driver the loader loaded (a device must have been opened once). */
static void bind_driver(void) {
    bs_driver_bind(&drv);
    assert_non_null(drv.violations);
    *(void **)&set_lost = bs_driver_symbol(&drv, "acgtest_ze_set_lost");
}

#define OK(call) assert_int_equal((call), ACG_OK)

/* ---- the scenario -------------------------------------------------------------------------- */

/* A capture invalidated by a synchronize inside it, then ended: what was recorded is dropped (on
 * a driver that records captures, its capture is ended and destroyed) and the stream goes on
 * eagerly. ACG_OK when both calls said so; otherwise the first other status. */
static acg_status invalidated_capture(bs_scene *c) {
    acg_status st = acg_stream_begin_capture(c->s, c->pool);
    if (st != ACG_OK) {
        return st;
    }
    acg_arg args[] = {acg_arg_buffer(c->z, 0), acg_arg_f32(7.0f)};
    acg_dims dims = acg_dims_1d(N);
    st = acg_kernel_launch(c->s, c->fill, &dims, args, 2);
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s); /* refused inside a capture: it invalidates it */
        st = st == ACG_ERR_CAPTURE_INVALIDATED ? ACG_OK : st;
    }
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(c->s, &g);
    acg_graph_destroy(g);
    end = end == ACG_ERR_CAPTURE_INVALIDATED ? ACG_OK : end;
    return st != ACG_OK ? st : end;
}

/* Open, eager work (a pageable round trip too), a forked capture replayed twice (the stream
 * queried while a replay may be pending), a second capture discarding the first while its
 * replay may be pending, an invalidated capture, an update, the free memory and the graph's
 * driver object; with check, the results are asserted. Stops at the first failure and returns
 * it, leaving teardown to bs_scene_close. */
static acg_status scene_run(bs_scene *c, bool check) {
    acg_status st = bs_scene_open(c, "level_zero", false);
    float pageable[N];
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, pageable, c->x, 0, sizeof pageable);
    }
    if (st == ACG_OK && check) {
        for (int i = 0; i < N; i++) {
            assert_true(pageable[i] == 1.0f);
        }
    }
    if (st == ACG_OK) {
        st = bs_capture(c, ALPHA, &c->g);
    }
    for (int r = 0; r < 2 && st == ACG_OK; r++) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_query(c->s);
        st = st == ACG_NOT_READY ? ACG_OK : st;
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(bs_host_is(c, 2.0f + ALPHA));
    }
    /* Replayed and discarded at once: the driver may still reference its list. */
    if (st == ACG_OK) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_graph_discard(c->g);
        c->g = NULL;
    }
    if (st == ACG_OK) {
        st = bs_capture(c, 2.0f * ALPHA, &c->g2);
    }
    if (st == ACG_OK) {
        st = bs_replay(c, c->g2, 1, check, 2.0f + 2.0f * ALPHA);
    }
    if (st == ACG_OK) {
        st = invalidated_capture(c);
    }
    /* An update: the list recorded again from a capture of the same shape. */
    acg_graph *g3 = NULL;
    if (st == ACG_OK) {
        st = bs_capture(c, 3.0f * ALPHA, &g3);
    }
    if (st == ACG_OK) {
        st = acg_graph_update(c->g2, g3);
    }
    acg_graph_destroy(g3);
    if (st == ACG_OK) {
        st = bs_replay(c, c->g2, 1, check, 2.0f + 3.0f * ALPHA);
    }
    acg_native_handle native = ACG_NATIVE_HANDLE_INIT;
    if (st == ACG_OK) {
        st = acg_graph_get_native(c->g2, &native);
    }
    if (st == ACG_OK && check) {
        assert_non_null(native.handle);
    }
    uint64_t free_bytes = 0, total_bytes = 0;
    if (st == ACG_OK) {
        st = acg_device_get_memory_info(c->dev, &free_bytes, &total_bytes);
        st = st == ACG_ERR_UNSUPPORTED ? ACG_OK : st; /* a driver without the extension */
    }
    if (st == ACG_OK) {
        st = acg_device_get_async_error(c->dev); /* a healthy device's poll: no fault */
    }
    return st;
}

static void test_scenario(void **state) {
    (void)state;
    bs_scene c;
    OK(scene_run(&c, true));
    bs_scene_close(&c);
    bind_driver();
    assert_int_equal(drv.violations(), 0);
}

/* Destructions of what a graph replays: a regular list, or the driver's executable graph (in
 * either form of the extension: the one not in use counts none). */
static unsigned long graph_destroys(void) {
    return drv.calls("zeCommandListDestroy") + drv.calls("zeExecutableGraphDestroyExt") +
           drv.calls("zeExecutableGraphDestroyExp");
}

/* A graph discarded while its replay is pending keeps what it replays until the pool's next
 * successful capture: the driver counts nothing destroyed while in use, and it is gone once
 * that capture ended. */
static void test_discard_retained(void **state) {
    (void)state;
    bs_scene c;
    OK(scene_run(&c, true));
    bind_driver();
    unsigned long destroyed = graph_destroys();
    acg_graph *g = NULL;
    OK(bs_capture(&c, ALPHA, &g));
    OK(acg_graph_launch(g, c.s));
    OK(acg_graph_discard(g));
    assert_int_equal(graph_destroys(), destroyed); /* kept */
    acg_graph *next = NULL;
    OK(bs_capture(&c, ALPHA, &next));
    assert_int_equal(graph_destroys(), destroyed + 1); /* the capture let it go */
    OK(acg_stream_synchronize(c.s));
    OK(acg_graph_launch(next, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(bs_host_is(&c, 2.0f + ALPHA));
    OK(acg_graph_destroy(next));
    bs_scene_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* An update that changes only kernel arguments patches the list in place where the driver has
 * mutable command lists; one that moves a copy records the list again; both replay the update.
 * Without the extension (the -spec1.4 run) every update records the list again. A graph the
 * driver captured is recorded from its description into a list at its first update (scene_run
 * made that of c.g2). */
static void test_update_paths(void **state) {
    (void)state;
    bs_scene c;
    OK(scene_run(&c, true)); /* c.g2 replays 2 + 3 * ALPHA */
    bind_driver();
    const acg_capability *cap = acg_device_get_capability(c.dev);
    const bool mutable_lists = strstr(cap->detail, "mutable lists yes") != NULL;
    unsigned long patched = drv.calls("zeCommandListUpdateMutableCommandsExp");
    acg_graph *g = NULL;
    OK(bs_capture(&c, 4.0f * ALPHA, &g));
    unsigned long before = drv.calls("zeCommandListCreate");
    OK(acg_graph_update(c.g2, g));
    OK(acg_graph_destroy(g));
    assert_int_equal(drv.calls("zeCommandListUpdateMutableCommandsExp") - patched,
                     mutable_lists ? 1 : 0);
    assert_int_equal(drv.calls("zeCommandListCreate") - before, mutable_lists ? 0 : 1);
    OK(acg_graph_launch(c.g2, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(bs_host_is(&c, 2.0f + 4.0f * ALPHA));
    /* The same capture with its copy going elsewhere: recorded again. */
    acg_buffer *keep = c.z;
    OK(acg_buffer_alloc(c.dev, N * sizeof(float), &c.z));
    OK(bs_capture(&c, ALPHA, &g));
    before = drv.calls("zeCommandListCreate");
    patched = drv.calls("zeCommandListUpdateMutableCommandsExp");
    OK(acg_graph_update(c.g2, g));
    OK(acg_graph_destroy(g));
    assert_int_equal(drv.calls("zeCommandListCreate") - before, 1);
    assert_int_equal(drv.calls("zeCommandListUpdateMutableCommandsExp"), patched);
    OK(acg_graph_launch(c.g2, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(bs_host_is(&c, 2.0f + ALPHA));
    OK(acg_graph_destroy(c.g2)); /* it reads the new z */
    c.g2 = NULL;
    OK(acg_buffer_free(c.z));
    c.z = keep;
    bs_scene_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* An entry point of the loader the backend loaded, for work an engine issues itself. */
static void *loader_function(const char *name) {
    const char *path = getenv("ACG_LEVEL_ZERO_LOADER");
    void *h = dlopen(path != NULL ? path : "libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *f = dlsym(h, name);
    assert_non_null(f);
    dlclose(h); /* RTLD_NOLOAD took a reference */
    return f;
}

/* zeCommandListAppendMemoryCopy of the loader, for work an engine issues on a stream's own
 * list. */
static ze_pfnCommandListAppendMemoryCopy_t loader_copy(void) {
    ze_pfnCommandListAppendMemoryCopy_t f;
    *(void **)&f = loader_function("zeCommandListAppendMemoryCopy");
    return f;
}

/* The (first) driver, as the loader gives it. */
static ze_driver_handle_t first_driver(void) {
    ze_pfnDriverGet_t get;
    *(void **)&get = loader_function("zeDriverGet");
    uint32_t n = 1;
    ze_driver_handle_t driver = NULL;
    assert_int_equal(get(&n, &driver), ZE_RESULT_SUCCESS);
    return driver;
}

/* An extension function of the (first) driver through the loader, or NULL where the driver
 * does not serve it. */
static void *driver_function_or_null(const char *name) {
    ze_pfnDriverGetExtensionFunctionAddress_t lookup;
    *(void **)&lookup = loader_function("zeDriverGetExtensionFunctionAddress");
    void *f = NULL;
    return lookup(first_driver(), name, &f) == ZE_RESULT_SUCCESS ? f : NULL;
}

/* An extension function the driver serves. */
static void *driver_function(const char *name) {
    void *f = driver_function_or_null(name);
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
    OK(acg_graph_get_native(g, &gh));
    OK(acg_stream_get_native(c->s, &sh));
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
    OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ALPHA));
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
    (void)state;
    bs_scene c;
    OK(scene_run(&c, true));
    bind_driver();
    const acg_capability *cap = acg_device_get_capability(c.dev);
    const bool native = strstr(cap->detail, "graph capture yes") != NULL;
    assert_int_equal(cap->native_capture, native);
    const char *begin_fn =
        graphs_exp(cap) ? "zeCommandListBeginGraphCaptureExp" : "zeCommandListBeginGraphCaptureExt";
    const char *append_fn =
        graphs_exp(cap) ? "zeCommandListAppendGraphExp" : "zeCommandListAppendGraphExt";
    unsigned long begun = drv.calls(begin_fn);
    unsigned long created = drv.calls("zeCommandListCreate");
    unsigned long appended = drv.calls(append_fn);
    acg_graph *g = NULL;
    OK(bs_capture(&c, ALPHA, &g));
    assert_int_equal(drv.calls(begin_fn) - begun, native ? 1 : 0);
    assert_int_equal(drv.calls("zeCommandListCreate") - created, native ? 0 : 1);
    memset(c.host, 0, N * sizeof(float));
    for (int r = 0; r < 3; r++) {
        OK(acg_graph_launch(g, c.s));
    }
    OK(acg_stream_synchronize(c.s));
    assert_true(bs_host_is(&c, 2.0f + ALPHA));
    assert_int_equal(drv.calls(append_fn) - appended, native ? 3 : 0);
    run_native_graph(&c, g, native);
    OK(acg_graph_destroy(g));
    if (native) {
        /* An engine's own copy on the stream's list, declared: the driver records it. */
        float *a = NULL, *b = NULL;
        OK(acg_pinned_alloc(c.dev, N * sizeof(float), (void **)&a));
        OK(acg_pinned_alloc(c.dev, N * sizeof(float), (void **)&b));
        for (int i = 0; i < N; i++) {
            a[i] = (float)i;
            b[i] = -1.0f;
        }
        acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
        OK(acg_stream_get_native(c.s, &h));
        assert_int_equal(h.kind, ACG_NATIVE_ZE_COMMAND_LIST);
        OK(acg_stream_begin_capture(c.s, c.pool));
        assert_int_equal(loader_copy()((ze_command_list_handle_t)h.handle, b, a, N * sizeof(float),
                                       NULL, 0, NULL),
                         ZE_RESULT_SUCCESS);
        OK(acg_stream_declare_foreign(c.s, "engine copy", NULL, 0));
        OK(acg_stream_end_capture(c.s, &g));
        assert_true(b[0] == -1.0f && b[N - 1] == -1.0f); /* recorded, not run */
        OK(acg_graph_launch(g, c.s));
        OK(acg_stream_synchronize(c.s));
        assert_memory_equal(a, b, N * sizeof(float));
        acg_graph *again = NULL;
        OK(acg_stream_begin_capture(c.s, c.pool));
        assert_int_equal(loader_copy()((ze_command_list_handle_t)h.handle, b, a, N * sizeof(float),
                                       NULL, 0, NULL),
                         ZE_RESULT_SUCCESS);
        OK(acg_stream_declare_foreign(c.s, "engine copy", NULL, 0));
        OK(acg_stream_end_capture(c.s, &again));
        assert_int_equal(acg_graph_update(g, again), ACG_ERR_UNSUPPORTED);
        OK(acg_graph_destroy(again));
        for (int i = 0; i < N; i++) {
            b[i] = -1.0f;
        }
        OK(acg_graph_launch(g, c.s)); /* still the graph it was */
        OK(acg_stream_synchronize(c.s));
        assert_memory_equal(a, b, N * sizeof(float));
        OK(acg_graph_destroy(g));
        OK(acg_pinned_free(a));
        OK(acg_pinned_free(b));
    }
    /* Invalidated while s2 is forked into the capture: the driver's capture ends on both. */
    OK(acg_stream_begin_capture(c.s, c.pool));
    OK(acg_event_record(c.fork, c.s));
    OK(acg_stream_wait_event(c.s2, c.fork));
    acg_dims dims = acg_dims_1d(N);
    acg_arg args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(5.0f)};
    OK(acg_kernel_launch(c.s2, c.fill, &dims, args, 2));
    assert_int_equal(acg_stream_synchronize(c.s2), ACG_ERR_CAPTURE_INVALIDATED);
    assert_int_equal(acg_stream_end_capture(c.s, &g), ACG_ERR_CAPTURE_INVALIDATED);
    OK(acg_kernel_launch(c.s2, c.fill, &dims, args, 2));
    OK(acg_stream_synchronize(c.s2));
    OK(acg_copy_d2h(c.s, c.host, c.y, 0, N * sizeof(float)));
    OK(acg_stream_synchronize(c.s));
    assert_true(bs_host_is(&c, 5.0f));
    bs_scene_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* The entry points the backend resolves: the sweep fails each call of each in turn. */
static const char *const entry_names[] = {
#define TC_ZE_NAME_(name, pfn, required) #name,
    ACG_ZE_ENTRY_POINTS(TC_ZE_NAME_)
#undef TC_ZE_NAME_
        "zeCommandListImmediateAppendCommandListsExp",
    "zeCommandListHostSynchronize",
    "zeCommandListGetNextCommandIdExp",
    "zeCommandListUpdateMutableCommandsExp",
    "zeCommandListBeginGraphCaptureExt",
    "zeCommandListEndGraphCaptureExt",
    "zeGraphInstantiateExt",
    "zeCommandListAppendGraphExt",
    "zeExecutableGraphDestroyExt",
    "zeGraphDestroyExt",
    "zeCommandListBeginGraphCaptureExp",
    "zeCommandListEndGraphCaptureExp",
    "zeCommandListInstantiateGraphExp",
    "zeCommandListAppendGraphExp",
    "zeExecutableGraphDestroyExp",
    "zeGraphDestroyExp",
    "zexKernelGetArgumentSize",
    NULL,
};

/* Calls that destroy or release: a driver that fails one keeps the object. */
static bool releases(const char *name) {
    return strstr(name, "Destroy") != NULL || strstr(name, "Free") != NULL;
}

/* Every driver call of the scenario, teardown included, fails in turn (an invalid-argument
 * error, as a driver refusing it would): the scenario ends with a clean status naming the
 * driver's error (or absorbs it), the teardown leaves no driver object behind unless the backend
 * said it left some to the driver (a refused release, or a failed wait before freeing what the
 * device may still use), the driver saw no misuse (nothing destroyed while in use), and the
 * scenario then runs clean on a new device (bs_fault_sweep). */
static void test_fault_sweep(void **state) {
    (void)state;
    const bs_sweep sweep = {
        .names = entry_names, .run = scene_run, .releases = releases, .may_leave_to_driver = true};
    bs_fault_sweep(&sweep, &drv);
}

/* ---- device faults ------------------------------------------------------------------------ */

/* A device with work queued on it: a graph (a fill of x, then x copied to pinned host memory)
 * and what it is made of. */
typedef struct rig {
    acg_device *dev;
    acg_kernel *fill;
    acg_buffer *x;
    float *host;
    acg_stream *s;
    acg_event *ev;
    acg_graph_pool *pool;
    acg_graph *g;
} rig;

static acg_status launch_fill(acg_stream *s, acg_kernel *fill, acg_buffer *x, float v) {
    acg_arg args[] = {acg_arg_buffer(x, 0), acg_arg_f32(v)};
    acg_dims dims = acg_dims_1d(N);
    return acg_kernel_launch(s, fill, &dims, args, 2);
}

static void rig_open(rig *r) {
    memset(r, 0, sizeof *r);
    OK(acg_device_open("level_zero", &r->dev));
    OK(acg_kernel_get(r->dev, "fill_f32", &r->fill));
    OK(acg_buffer_alloc(r->dev, N * sizeof(float), &r->x));
    OK(acg_pinned_alloc(r->dev, N * sizeof(float), (void **)&r->host));
    OK(acg_stream_create(r->dev, &r->s));
    OK(acg_event_create(r->dev, &r->ev));
    OK(acg_graph_pool_create(r->dev, &r->pool));
    OK(acg_stream_begin_capture(r->s, r->pool));
    OK(launch_fill(r->s, r->fill, r->x, 4.0f));
    OK(acg_copy_d2h(r->s, r->host, r->x, 0, N * sizeof(float)));
    OK(acg_stream_end_capture(r->s, &r->g));
    /* Queued, never waited for: a kernel, two replays, an event's record. */
    OK(launch_fill(r->s, r->fill, r->x, 1.0f));
    OK(acg_graph_launch(r->g, r->s));
    OK(acg_graph_launch(r->g, r->s));
    OK(acg_event_record(r->ev, r->s));
    OK(acg_device_get_async_error(r->dev)); /* healthy, with work queued */
}

/* The rig's device was lost to a fault whose detail names `first`: every call that would queue
 * work, wait, allocate or create fails fast naming it (the poll too, every time); every destroy
 * succeeds, and so does the close, which leaves the driver with the `live` objects it had
 * before the rig, and no misuse. */
static void rig_lost(rig *r, const char *first, long live) {
    BS_EXPECT_LOST(launch_fill(r->s, r->fill, r->x, 5.0f), first);
    BS_EXPECT_LOST(acg_graph_launch(r->g, r->s), first);
    BS_EXPECT_LOST(acg_copy_d2h(r->s, r->host, r->x, 0, N * sizeof(float)), first);
    bs_expect_lost_device(r->dev, r->s, r->ev, first);
    OK(acg_graph_destroy(r->g));
    OK(acg_graph_pool_destroy(r->pool));
    OK(acg_event_destroy(r->ev));
    OK(acg_stream_destroy(r->s));
    OK(acg_pinned_free(r->host));
    OK(acg_buffer_free(r->x));
    OK(acg_device_close(r->dev));
    assert_int_equal(drv.live(), live);
    assert_int_equal(drv.violations(), 0);
}

/* Where the driver cannot append a list to an immediate list, a replay runs on the device's
 * queue with a fence, which the stream's next command waits for. A wait that fails (not a lost
 * device) is reported once, and the stream forgets the fence, so the graph can be destroyed and
 * the stream used after it without touching the destroyed graph (ASan's build would report the
 * use after free). */
static void test_replay_fence_failure(void **state) {
    (void)state;
    acg_device *dev = NULL;
    OK(acg_device_open("level_zero", &dev));
    bind_driver();
    if (strstr(acg_device_get_capability(dev)->detail, "immediate append no") == NULL) {
        OK(acg_device_close(dev));
        skip(); /* replays append to the stream's own list: no fence to wait for */
    }
    acg_kernel *fill = NULL;
    acg_buffer *x = NULL;
    acg_stream *s = NULL;
    acg_graph *g = NULL;
    OK(acg_kernel_get(dev, "fill_f32", &fill));
    OK(acg_buffer_alloc(dev, N * sizeof(float), &x));
    OK(acg_stream_create(dev, &s));
    OK(acg_stream_begin_capture(s, NULL));
    OK(launch_fill(s, fill, x, 2.0f));
    OK(acg_stream_end_capture(s, &g));
    /* The replay's own record of the pool's event is the stream's next command. */
    drv.inject("zeFenceHostSynchronize", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_graph_launch(g, s), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeFenceHostSynchronize"));
    drv.inject(NULL, 0, 0);
    OK(acg_graph_destroy(g));
    float got[N], want[N];
    for (int i = 0; i < N; i++) {
        want[i] = 3.0f;
    }
    OK(launch_fill(s, fill, x, 3.0f));
    OK(acg_copy_d2h(s, got, x, 0, sizeof got));
    OK(acg_stream_synchronize(s));
    assert_memory_equal(got, want, sizeof got);
    OK(acg_device_get_async_error(dev)); /* not a lost device */
    OK(acg_stream_destroy(s));
    OK(acg_buffer_free(x));
    OK(acg_device_close(dev));
}

/* The host waits the driver may block in; a poll calls none. */
static unsigned long host_waits(void) {
    return drv.calls("zeEventHostSynchronize") + drv.calls("zeFenceHostSynchronize") +
           drv.calls("zeCommandListHostSynchronize") + drv.calls("zeCommandQueueSynchronize");
}

/* A wait that meets the fault reports it: the stream's synchronize returns ACG_ERR_DEVICE_LOST
 * naming the Level Zero call and its code. First an injected ZE_RESULT_ERROR_DEVICE_LOST from
 * the host synchronization (the driver itself goes on), then a device the driver lost for good,
 * whose waits, submissions and (in the second mode) releases all say so: either way the device
 * is latched, its objects go without leaving the driver anything, and it opens again. */
static void test_device_lost_synchronize(void **state) {
    (void)state;
    bind_driver();
    set_lost(0, 0); /* whatever a failed test before left */
    long live = drv.live();
    rig r;
    rig_open(&r);
    drv.inject("zeEventHostSynchronize", 1, ZE_RESULT_ERROR_DEVICE_LOST);
    assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
    assert_non_null(strstr(acg_last_error(), "zeEventHostSynchronize"));
    assert_non_null(strstr(acg_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
    rig_lost(&r, "zeEventHostSynchronize failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
    tc_expect_device_works("level_zero");
    const int modes[] = {ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        rig_open(&r);
        set_lost(0, modes[m]);
        assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
        assert_non_null(strstr(acg_last_error(), "failed with ZE_RESULT_ERROR_DEVICE_LOST"));
        rig_lost(&r, "failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        set_lost(0, 0);
        tc_expect_device_works("level_zero");
        assert_int_equal(drv.live(), live);
    }
}

/* A fault only the poll sees: work queued, the driver's device lost, nothing waited for yet.
 * acg_device_get_async_error finds it (zeDeviceGetStatus) without waiting for any work, and
 * the device is latched from then on, in both modes of the driver's loss. */
static void test_device_lost_poll(void **state) {
    (void)state;
    bind_driver();
    set_lost(0, 0); /* whatever a failed test before left */
    long live = drv.live();
    const int modes[] = {ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        rig r;
        rig_open(&r);
        set_lost(0, modes[m]);
        unsigned long waits = host_waits(), polls = drv.calls("zeDeviceGetStatus");
        assert_int_equal(acg_device_get_async_error(r.dev), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_device_get_async_error"));
        assert_non_null(strstr(acg_last_error(), "zeDeviceGetStatus"));
        assert_non_null(strstr(acg_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
        assert_int_equal(host_waits(), waits);
        assert_int_equal(drv.calls("zeDeviceGetStatus") - polls, 1);
        rig_lost(&r, "zeDeviceGetStatus failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        set_lost(0, 0);
        tc_expect_device_works("level_zero");
        assert_int_equal(drv.live(), live);
    }
    /* The poll failing for another reason is the driver's error, and latches nothing. */
    acg_device *dev = NULL;
    OK(acg_device_open("level_zero", &dev));
    drv.inject("zeDeviceGetStatus", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_device_get_async_error(dev), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetStatus"));
    OK(acg_device_get_async_error(dev));
    OK(acg_device_close(dev));
}

/* ---- native memory and devices -------------------------------------------------------------- */

/* The device's handles are the driver's: the driver and device zeDriverGet and zeDeviceGet give,
 * and a context they allocate device memory in. */
static void expect_native_device(acg_device *dev) {
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    OK(acg_device_get_native(dev, &nd));
    assert_int_equal(nd.kind, ACG_NATIVE_ZE_CONTEXT);
    assert_int_equal(nd.ordinal, 0);
    ze_driver_handle_t driver = first_driver();
    assert_ptr_equal(nd.platform, driver);
    ze_pfnDeviceGet_t device_get;
    *(void **)&device_get = loader_function("zeDeviceGet");
    uint32_t n = 1;
    ze_device_handle_t device = NULL;
    assert_int_equal(device_get(driver, &n, &device), ZE_RESULT_SUCCESS);
    assert_ptr_equal(nd.device, device);
    ze_pfnMemAllocDevice_t alloc;
    ze_pfnMemFree_t release;
    *(void **)&alloc = loader_function("zeMemAllocDevice");
    *(void **)&release = loader_function("zeMemFree");
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

static acg_status launch_fill_n(acg_stream *s, acg_kernel *fill, acg_buffer *b, uint32_t n,
                                float v) {
    acg_arg args[] = {acg_arg_buffer(b, 0), acg_arg_f32(v)};
    acg_dims dims = acg_dims_1d(n);
    return acg_kernel_launch(s, fill, &dims, args, 2);
}

/* x and y zero, then by acg: 5.0 into xv (the fill kernel), xv copied to the start of y. */
static void engine_reference(engine *e, float *want_x, float *want_y) {
    OK(acg_fill(e->s, e->x, 0, N * sizeof(float), 0, 4));
    OK(acg_fill(e->s, e->y, 0, N * sizeof(float), 0, 4));
    OK(launch_fill_n(e->s, e->fill, e->xv, (uint32_t)(PART / sizeof(float)), 5.0f));
    OK(acg_copy_d2d(e->s, e->y, 0, e->xv, 0, PART));
    OK(acg_copy_d2h(e->s, want_x, e->x, 0, N * sizeof(float)));
    OK(acg_copy_d2h(e->s, want_y, e->y, 0, N * sizeof(float)));
    OK(acg_stream_synchronize(e->s));
}

/* The same fill and copy as the engine's own work on the stream's list, at the buffers' native
 * addresses, each after a barrier (the list may not run in order), declared. */
static void engine_work(engine *e) {
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    OK(acg_stream_get_native(e->s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_ZE_COMMAND_LIST);
    ze_command_list_handle_t list = (ze_command_list_handle_t)h.handle;
    ze_pfnCommandListAppendBarrier_t barrier;
    ze_pfnCommandListAppendMemoryFill_t fill;
    *(void **)&barrier = loader_function("zeCommandListAppendBarrier");
    *(void **)&fill = loader_function("zeCommandListAppendMemoryFill");
    const float five = 5.0f;
    void *xv = (void *)(uintptr_t)e->nv.address, *y = (void *)(uintptr_t)e->ny.address;
    assert_int_equal(barrier(list, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(fill(list, xv, &five, sizeof five, PART, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(barrier(list, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(loader_copy()(list, y, xv, PART, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    const acg_access accesses[] = {{e->xv, 0, 0, ACG_ACCESS_READ_WRITE},
                                   {e->y, 0, PART, ACG_ACCESS_WRITE}};
    OK(acg_stream_declare_foreign(e->s, "engine fill and copy", accesses, 2));
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
    memset(&e, 0, sizeof e);
    OK(acg_device_open("level_zero", &e.dev));
    bind_driver();
    const acg_capability *cap = acg_device_get_capability(e.dev);
    expect_native_device(e.dev);
    OK(acg_kernel_get(e.dev, "fill_f32", &e.fill));
    OK(acg_stream_create(e.dev, &e.s));
    OK(acg_buffer_alloc(e.dev, N * sizeof(float), &e.x));
    OK(acg_buffer_alloc(e.dev, N * sizeof(float), &e.y));
    OK(acg_buffer_create_view(e.x, OFF, PART, &e.xv));
    OK(acg_pinned_alloc(e.dev, N * sizeof(float), (void **)&e.hx));
    OK(acg_pinned_alloc(e.dev, N * sizeof(float), (void **)&e.hy));
    acg_native_buffer *nb[] = {&e.nx, &e.nv, &e.ny};
    acg_buffer *bufs[] = {e.x, e.xv, e.y};
    for (int i = 0; i < 3; i++) {
        *nb[i] = (acg_native_buffer)ACG_NATIVE_BUFFER_INIT;
        OK(acg_buffer_get_native(bufs[i], nb[i]));
        assert_int_equal(nb[i]->kind, ACG_NATIVE_ZE_DEVICE_MEMORY);
        assert_null(nb[i]->handle);
        assert_int_equal(nb[i]->offset, 0);
        assert_int_equal(nb[i]->bytes, acg_buffer_get_size(bufs[i]));
    }
    assert_true(e.nx.address != 0 && e.nv.address == e.nx.address + OFF);
    float want_x[N], want_y[N], got_x[N], got_y[N];
    engine_reference(&e, want_x, want_y);
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    OK(acg_stream_get_native(e.s, &h));
    if (h.kind == ACG_NATIVE_NONE) {
        assert_non_null(strstr(cap->detail, "immediate lists no")); /* queue mode */
    } else {
        OK(acg_fill(e.s, e.x, 0, N * sizeof(float), 0, 4));
        OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0, 4));
        engine_work(&e);
        OK(acg_copy_d2h(e.s, got_x, e.x, 0, sizeof got_x));
        OK(acg_copy_d2h(e.s, got_y, e.y, 0, sizeof got_y));
        OK(acg_stream_synchronize(e.s));
        assert_memory_equal(got_x, want_x, sizeof got_x);
        assert_memory_equal(got_y, want_y, sizeof got_y);
    }
    if (cap->native_capture) {
        acg_graph *g = NULL;
        OK(acg_stream_begin_capture(e.s, NULL));
        OK(launch_fill_n(e.s, e.fill, e.x, N, 0.0f));
        OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0, 4));
        engine_work(&e);
        OK(acg_copy_d2h(e.s, e.hx, e.x, 0, N * sizeof(float)));
        OK(acg_copy_d2h(e.s, e.hy, e.y, 0, N * sizeof(float)));
        OK(acg_stream_end_capture(e.s, &g));
        acg_node_info info;
        OK(acg_graph_get_node(g, 2, &info));
        assert_int_equal(info.kind, ACG_NODE_FOREIGN);
        assert_string_equal(info.kernel, "engine fill and copy");
        for (int r = 0; r < 3; r++) {
            memset(e.hx, 0xff, N * sizeof(float));
            memset(e.hy, 0xff, N * sizeof(float));
            OK(acg_fill(e.s, e.x, 0, N * sizeof(float), 0xffffffffu, 4));
            OK(acg_fill(e.s, e.y, 0, N * sizeof(float), 0xffffffffu, 4));
            OK(acg_graph_launch(g, e.s));
            if (r < 2) {
                OK(acg_graph_launch(g, e.s));
            }
            OK(acg_stream_synchronize(e.s));
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
        OK(acg_graph_destroy(g));
    }
    OK(acg_pinned_free(e.hx));
    OK(acg_pinned_free(e.hy));
    OK(acg_buffer_free(e.xv));
    OK(acg_buffer_free(e.x));
    OK(acg_buffer_free(e.y));
    OK(acg_stream_destroy(e.s));
    OK(acg_device_close(e.dev));
    assert_int_equal(drv.violations(), 0);
}

/* A graph's copy from pinned memory reads it at every replay (graph_pinned_replay): what is
 * written there between replays is what the next replay copies. */
static void test_pinned_replay(void **state) {
    (void)state;
    acg_device *dev = NULL;
    acg_stream *s = NULL;
    acg_buffer *x = NULL;
    float *in = NULL, *out = NULL;
    OK(acg_device_open("level_zero", &dev));
    assert_true(acg_device_get_capability(dev)->graph_pinned_replay);
    OK(acg_stream_create(dev, &s));
    OK(acg_buffer_alloc(dev, N * sizeof(float), &x));
    OK(acg_pinned_alloc(dev, N * sizeof(float), (void **)&in));
    OK(acg_pinned_alloc(dev, N * sizeof(float), (void **)&out));
    acg_graph *g = NULL;
    OK(acg_stream_begin_capture(s, NULL));
    OK(acg_copy_h2d(s, x, 0, in, N * sizeof(float)));
    OK(acg_copy_d2h(s, out, x, 0, N * sizeof(float)));
    OK(acg_stream_end_capture(s, &g));
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < N; i++) {
            in[i] = (float)(r * N + i);
        }
        OK(acg_graph_launch(g, s));
        OK(acg_stream_synchronize(s));
        assert_memory_equal(out, in, N * sizeof(float));
    }
    OK(acg_graph_destroy(g));
    OK(acg_pinned_free(in));
    OK(acg_pinned_free(out));
    OK(acg_buffer_free(x));
    OK(acg_stream_destroy(s));
    OK(acg_device_close(dev));
}

/* ---- per-node updates ----------------------------------------------------------------------- */

/* A graph of four nodes: y = fill(v) (node 0, a kernel over fill_n items), z = y (node 1, a
 * copy), z += a * x (node 2, a kernel over axpy_n items), z copied to pinned host (node 3); and
 * what its nodes are now, for the eager reference. */
typedef struct chain {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *fill, *axpy;
    acg_buffer *x, *x2, *y, *z, *small;
    float *host;
    acg_graph *g;
    float v, a;
    uint32_t fill_n, axpy_n;
    acg_buffer *xb; /* node 2's x */
} chain;

static void chain_run(chain *c, acg_stream *s) {
    acg_arg fill_args[] = {acg_arg_buffer(c->y, 0), acg_arg_f32(c->v)};
    acg_arg axpy_args[] = {acg_arg_buffer(c->z, 0), acg_arg_buffer(c->xb, 0), acg_arg_f32(c->a)};
    acg_dims fill_dims = acg_dims_1d(c->fill_n), axpy_dims = acg_dims_1d(c->axpy_n);
    OK(acg_kernel_launch(s, c->fill, &fill_dims, fill_args, 2));
    OK(acg_copy_d2d(s, c->z, 0, c->y, 0, N * sizeof(float)));
    OK(acg_kernel_launch(s, c->axpy, &axpy_dims, axpy_args, 3));
    OK(acg_copy_d2h(s, c->host, c->z, 0, N * sizeof(float)));
}

static void chain_open(chain *c) {
    memset(c, 0, sizeof *c);
    OK(acg_device_open("level_zero", &c->dev));
    OK(acg_stream_create(c->dev, &c->s));
    OK(acg_kernel_get(c->dev, "fill_f32", &c->fill));
    OK(acg_kernel_get(c->dev, "axpy_f32", &c->axpy));
    acg_buffer **bufs[] = {&c->x, &c->x2, &c->y, &c->z};
    for (int i = 0; i < 4; i++) {
        OK(acg_buffer_alloc(c->dev, N * sizeof(float), bufs[i]));
    }
    OK(acg_buffer_alloc(c->dev, 16, &c->small));
    OK(acg_pinned_alloc(c->dev, N * sizeof(float), (void **)&c->host));
    OK(launch_fill_n(c->s, c->fill, c->x, N, 1.0f));
    OK(launch_fill_n(c->s, c->fill, c->x2, N, 0.25f));
    c->v = 2.0f;
    c->a = 3.0f;
    c->fill_n = c->axpy_n = N;
    c->xb = c->x;
    OK(acg_stream_begin_capture(c->s, NULL));
    chain_run(c, c->s);
    OK(acg_stream_end_capture(c->s, &c->g));
}

static void chain_close(chain *c) {
    OK(acg_graph_destroy(c->g));
    OK(acg_pinned_free(c->host));
    acg_buffer *bufs[] = {c->x, c->x2, c->y, c->z, c->small};
    for (int i = 0; i < 5; i++) {
        OK(acg_buffer_free(bufs[i]));
    }
    OK(acg_stream_destroy(c->s));
    OK(acg_device_close(c->dev));
}

/* y and z set to -1.0 everywhere, so that what a narrower grid leaves shows. */
static void chain_reset(chain *c) {
    const float minus_one = -1.0f;
    uint32_t bits;
    memcpy(&bits, &minus_one, sizeof bits);
    OK(acg_fill(c->s, c->y, 0, N * sizeof(float), bits, 4));
    OK(acg_fill(c->s, c->z, 0, N * sizeof(float), bits, 4));
}

/* A replay equals, byte for byte, the same launches made eagerly with the nodes' arguments. */
static void expect_chain(chain *c) {
    float got[N], want[N];
    chain_reset(c);
    OK(acg_graph_launch(c->g, c->s));
    OK(acg_stream_synchronize(c->s));
    memcpy(got, c->host, sizeof got);
    chain_reset(c);
    chain_run(c, c->s);
    OK(acg_stream_synchronize(c->s));
    memcpy(want, c->host, sizeof want);
    assert_memory_equal(got, want, sizeof got);
}

/* The backend's word that it patched one node's command (graph.c), logged at debug level. */
static unsigned long node_patches;

static void count_node_patches(acg_log_level level, const char *message, void *user) {
    (void)user;
    if (level == ACG_LOG_DEBUG && strstr(message, "level_zero: node ") != NULL &&
        strstr(message, "updated in place") != NULL) {
        node_patches++;
    }
}

/* How many lists the graph's updates recorded and patches they made, and of those, how many
 * patched a single node. */
typedef struct path_counts {
    unsigned long created, patched, node_patched;
} path_counts;

static path_counts path_now(void) {
    path_counts p = {drv.calls("zeCommandListCreate"),
                     drv.calls("zeCommandListUpdateMutableCommandsExp"), node_patches};
    return p;
}

/* Since `was`: one patch of the node alone and no list (patched), or one list and no patch
 * (recorded again). */
static void expect_path(path_counts was, bool patched) {
    path_counts now = path_now();
    assert_int_equal(now.patched - was.patched, patched ? 1 : 0);
    assert_int_equal(now.node_patched - was.node_patched, patched ? 1 : 0);
    assert_int_equal(now.created - was.created, patched ? 0 : 1);
}

/* acg_graph_update_kernel_node changes a scalar, a buffer and grids of a graph's kernel nodes,
 * each replay then equal to eager launches with the new arguments. Where the device has
 * mutable lists the node's command alone is patched; otherwise (the no-mutable-extension and
 * spec1.4 runs), and at the first update of a graph the driver captured, the graph's list is
 * recorded again. A patch the driver refuses is followed by a recording; a recording that fails
 * leaves the graph replaying as before, and so do the refusals of a wrong argument type, a window
 * past its buffer, a node that is no kernel and a node past the graph, which record and patch
 * nothing. */
static void test_node_update(void **state) {
    (void)state;
    chain c;
    chain_open(&c);
    bind_driver();
    acg_set_log_callback(count_node_patches, NULL);
    acg_set_log_level(ACG_LOG_DEBUG);
    const acg_capability *cap = acg_device_get_capability(c.dev);
    assert_true(cap->graph_node_update && cap->graph_node_update_grid);
    const bool mutable_lists = strstr(cap->detail, "mutable lists yes") != NULL;
    bool recorded = !cap->native_capture; /* a list of the description is the graph's */
    expect_chain(&c);

    /* Where the update records a list, a recording that fails changes nothing. */
    if (!mutable_lists || !recorded) {
        acg_arg args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(9.0f)};
        drv.inject("zeCommandListCreate", 1, ZE_RESULT_ERROR_UNKNOWN);
        assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, args, 2), ACG_ERR_DEVICE);
        assert_non_null(strstr(acg_last_error(), "acg_graph_update_kernel_node: "
                                                 "zeCommandListCreate failed"));
        drv.inject(NULL, 0, 0);
        expect_chain(&c);
    }

    /* A scalar. */
    path_counts was = path_now();
    c.v = 4.0f;
    acg_arg fill_args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(c.v)};
    OK(acg_graph_update_kernel_node(c.g, 0, NULL, fill_args, 2));
    expect_path(was, mutable_lists && recorded);
    recorded = true;
    expect_chain(&c);

    /* A buffer. */
    was = path_now();
    c.xb = c.x2;
    acg_arg axpy_args[] = {acg_arg_buffer(c.z, 0), acg_arg_buffer(c.xb, 0), acg_arg_f32(c.a)};
    OK(acg_graph_update_kernel_node(c.g, 2, NULL, axpy_args, 3));
    expect_path(was, mutable_lists);
    expect_chain(&c);

    /* Grids: node 0 over half of y (the rest keeps what was there), node 2 over a quarter. */
    was = path_now();
    c.fill_n = N / 2;
    c.v = 6.0f;
    acg_dims half = acg_dims_1d(N / 2), quarter = acg_dims_1d(N / 4);
    fill_args[1] = acg_arg_f32(c.v);
    OK(acg_graph_update_kernel_node(c.g, 0, &half, fill_args, 2));
    expect_path(was, mutable_lists);
    was = path_now();
    c.axpy_n = N / 4;
    c.a = 0.5f;
    axpy_args[2] = acg_arg_f32(c.a);
    OK(acg_graph_update_kernel_node(c.g, 2, &quarter, axpy_args, 3));
    expect_path(was, mutable_lists);
    expect_chain(&c);

    /* Refusals: the core's checks, before the backend records or patches anything. */
    was = path_now();
    acg_arg wrong_type[] = {acg_arg_buffer(c.y, 0), acg_arg_i32(1)};
    assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, wrong_type, 2),
                     ACG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(acg_last_error(), "argument 1 is a i32, the kernel takes a f32"));
    acg_arg too_far[] = {acg_arg_buffer(c.small, 0), acg_arg_f32(1.0f)};
    assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, too_far, 2), ACG_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(acg_last_error(), "past its 16-byte buffer"));
    assert_int_equal(acg_graph_update_kernel_node(c.g, 1, NULL, fill_args, 2),
                     ACG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(acg_last_error(), "is copy_d2d, not a kernel"));
    assert_int_equal(acg_graph_update_kernel_node(c.g, 4, NULL, fill_args, 2),
                     ACG_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(acg_last_error(), "has 4 nodes, there is no node 4"));
    path_counts now = path_now();
    assert_true(now.created == was.created && now.patched == was.patched);
    expect_chain(&c);

    /* A patch the driver refuses: the list is recorded again, with the update. */
    if (mutable_lists) {
        was = path_now();
        c.v = 7.0f;
        fill_args[1] = acg_arg_f32(c.v);
        drv.inject("zeCommandListUpdateMutableCommandsExp", 1, ZE_RESULT_ERROR_UNKNOWN);
        OK(acg_graph_update_kernel_node(c.g, 0, &half, fill_args, 2));
        drv.inject(NULL, 0, 0);
        now = path_now();
        assert_int_equal(now.patched - was.patched, 1); /* refused */
        assert_int_equal(now.node_patched - was.node_patched, 0);
        assert_int_equal(now.created - was.created, 1);
        expect_chain(&c);
        was = path_now();
        c.a = 2.0f;
        axpy_args[2] = acg_arg_f32(c.a);
        OK(acg_graph_update_kernel_node(c.g, 2, &quarter, axpy_args, 3));
        expect_path(was, true); /* the new list is mutable too */
        expect_chain(&c);
    }
    acg_set_log_callback(NULL, NULL);
    acg_set_log_level(ACG_LOG_ERROR);
    chain_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* ---- kernels checked when loaded ------------------------------------------------------------ */

static void cpu_nothing(const acg_cpu_arg *args, const uint32_t global[3]) {
    (void)args;
    (void)global;
}

/* A definition whose parameters are not those of its SPIR-V function (here the core's fill_f32:
 * a pointer, a ulong byte offset, a float) is refused by acg_kernel_get, naming the kernel, its
 * entry point and what acg passes: another count (zeKernelGetProperties), or, where the driver
 * tells sizes (zexKernelGetArgumentSize), a parameter of another size; the driver is left with
 * no kernel of it. Without the sizes only the count is checked. */
static void test_kernel_params_checked(void **state) {
    (void)state;
    static const struct {
        const char *name;
        uint32_t n_args;
        acg_arg_type types[3];
        bool size_only; /* the count agrees: only the sizes tell */
        const char *message;
    } cases[] = {
        {"ze_params_count",
         3,
         {ACG_ARG_BUFFER, ACG_ARG_F32, ACG_ARG_F32},
         false,
         "acg_kernel_get(ze_params_count): the SPIR-V kernel fill_f32 takes 3 parameters; acg "
         "passes 4: buffer argument 0 (a pointer and its ulong byte offset), f32 argument 1 "
         "(float), f32 argument 2 (float)"},
        {"ze_params_none",
         0,
         {ACG_ARG_F32},
         false,
         "acg_kernel_get(ze_params_none): the SPIR-V kernel fill_f32 takes 3 parameters; acg "
         "passes 0: nothing"},
        {"ze_params_size",
         2,
         {ACG_ARG_BUFFER, ACG_ARG_U64},
         true,
         "acg_kernel_get(ze_params_size): parameter 2 of the SPIR-V kernel fill_f32 is 4 bytes; "
         "acg passes 8 there: u64 argument 1 (ulong)"},
        {"ze_params_offset",
         2,
         {ACG_ARG_I64, ACG_ARG_BUFFER},
         true,
         "acg_kernel_get(ze_params_offset): parameter 2 of the SPIR-V kernel fill_f32 is 4 "
         "bytes; acg passes 8 there: the ulong byte offset of buffer argument 1"},
    };
    const size_t n_cases = sizeof cases / sizeof cases[0];
    acg_device *dev = NULL;
    OK(acg_device_open("level_zero", &dev));
    bind_driver();
    const bool sizes = driver_function_or_null("zexKernelGetArgumentSize") != NULL;
    const acg_kernel_desc *fill =
        acg__kernel_desc_find("level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, NULL, 0, "fill_f32");
    assert_non_null(fill);
    const acg_kernel_impl *fill_spv = NULL; /* the core's module, built from its one source */
    for (uint32_t i = 0; i < fill->n_impls && fill_spv == NULL; i++) {
        if (strcmp(fill->impls[i].format, ACG_KERNEL_FORMAT_SPIRV_OPENCL) == 0) {
            fill_spv = &fill->impls[i];
        }
    }
    assert_non_null(fill_spv);
    for (size_t i = 0; i < n_cases; i++) {
        acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
        d.name = cases[i].name;
        d.n_args = cases[i].n_args;
        for (uint32_t a = 0; a < d.n_args; a++) {
            d.types[a] = cases[i].types[a];
            d.bytes_per_item[a] = d.types[a] == ACG_ARG_BUFFER ? 4 : 0;
        }
        d.flags = ACG_KERNEL_ELEMENTWISE;
        d.cpu.fn = cpu_nothing;
        d.spirv.module = fill_spv->code;
        d.spirv.size = fill_spv->size;
        d.spirv.name = "fill_f32";
        OK(acg_kernel_register(&d));
        long live = drv.live();
        acg_kernel *k = NULL;
        acg_status st = acg_kernel_get(dev, cases[i].name, &k);
        if (cases[i].size_only && !sizes) {
            OK(st);
            continue;
        }
        assert_int_equal(st, ACG_ERR_INVALID_ARGUMENT);
        assert_string_equal(acg_last_error(), cases[i].message);
        assert_null(k);
        assert_int_equal(drv.live(), live + 1); /* the module stays, as the device's; no kernel */
    }
    acg_kernel *k = NULL;
    OK(acg_kernel_get(dev, "fill_f32", &k)); /* the definition that matches its module */
    OK(acg_device_close(dev));
    for (size_t i = 0; i < n_cases; i++) {
        OK(acg_kernel_unregister(cases[i].name));
    }
    assert_int_equal(drv.violations(), 0);
}

/* ---- conditions that make the backend unavailable ---------------------------------------- */

/* Warnings that name an extension version acg does not know. */
static int unknown_versions;

static void count_unknown(acg_log_level level, const char *message, void *user) {
    (void)user;
    if (level == ACG_LOG_WARN && strstr(message, "is not one acg knows") != NULL) {
        printf("logged: %s\n", message);
        unknown_versions++;
    }
}

/* Free memory is what the driver says a new allocation could use (the usable memory extension):
 * it falls by what acg allocates and comes back when freed, and a failing query gives the
 * driver's error. A driver without the extension cannot tell: ACG_ERR_UNSUPPORTED, naming it. */
static void test_memory_info(void **state) {
    (void)state;
    acg_device *dev = NULL;
    OK(acg_device_open("level_zero", &dev));
    bind_driver();
    const acg_capability *cap = acg_device_get_capability(dev);
    uint64_t free0 = 0, total = 0;
    acg_status st = acg_device_get_memory_info(dev, &free0, &total);
    if (strstr(cap->detail, "free memory yes") == NULL) {
        assert_non_null(strstr(cap->detail, "free memory no"));
        assert_int_equal(st, ACG_ERR_UNSUPPORTED);
        assert_non_null(strstr(acg_last_error(), "cannot tell"));
        assert_non_null(strstr(acg_last_error(), "ZE_extension_device_usablemem_size_properties"));
        OK(acg_device_close(dev));
        return;
    }
    OK(st);
    assert_true(total == cap->memory_bytes);
    assert_true(free0 > 0 && free0 <= total);
    const uint64_t size = 64u << 20;
    acg_buffer *b = NULL;
    OK(acg_buffer_alloc(dev, size, &b));
    uint64_t free1 = 0;
    OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free0 - free1 >= size && free0 - free1 <= size + (1u << 20));
    OK(acg_buffer_free(b));
    OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free1 == free0);
    drv.inject("zeDeviceGetMemoryProperties", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetMemoryProperties"));
    OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free1 == free0);
    /* A lost device is latched: the query fails now and from then on, naming the first fault. */
    drv.inject("zeDeviceGetProperties", 1, ZE_RESULT_ERROR_DEVICE_LOST);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetProperties"));
    drv.inject(NULL, 0, 0);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetProperties"));
    assert_non_null(strstr(acg_last_error(), "was lost to an earlier fault"));
    OK(acg_device_close(dev));
}

/* A driver that reports its extensions at a major version acg does not know: each is left
 * unused, with a log line naming it, and the device works without them. */
static int expect_unknown_versions(void) {
    acg_set_log_callback(count_unknown, NULL);
    acg_set_log_level(ACG_LOG_WARN);
    acg_device *dev = NULL;
    if (acg_device_open("level_zero", &dev) != ACG_OK) {
        fprintf(stderr, "open failed: %s\n", acg_last_error());
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    printf("%s\n", cap->detail);
    int bad = unknown_versions != 5 || strstr(cap->detail, "immediate append no") == NULL ||
              strstr(cap->detail, "mutable lists no") == NULL ||
              strstr(cap->detail, "graph capture no") == NULL ||
              strstr(cap->detail, "free memory no") == NULL || cap->native_capture;
    bs_scene c;
    acg_device_close(dev);
    acg_set_log_level(ACG_LOG_ERROR);
    bad |= scene_run(&c, false) != ACG_OK;
    bs_scene_close(&c);
    acg_set_log_callback(NULL, NULL);
    return bad;
}

/* A driver lacking something the backend looks for: the capability's detail says what the
 * backend does instead (TEXT), and the scenario runs. */
static int expect_detail(const char *text) {
    acg_device *dev = NULL;
    if (acg_device_open("level_zero", &dev) != ACG_OK) {
        fprintf(stderr, "open failed: %s\n", acg_last_error());
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    printf("%s\n", cap->detail);
    int bad = strstr(cap->detail, text) == NULL;
    acg_device_close(dev);
    bs_scene c;
    bad |= scene_run(&c, false) != ACG_OK;
    bs_scene_close(&c);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--expect-unavailable") == 0) {
        return bs_expect_unavailable("level_zero", argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "--expect-detail") == 0) {
        return expect_detail(argv[2]);
    }
    if (argc == 2 && strcmp(argv[1], "--expect-unknown-versions") == 0) {
        return expect_unknown_versions();
    }
    if (!bs_backend_opens("level_zero")) {
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenario),
        cmocka_unit_test(test_discard_retained),
        cmocka_unit_test(test_update_paths),
        cmocka_unit_test(test_native_capture),
        cmocka_unit_test(test_fault_sweep),
        cmocka_unit_test(test_memory_info),
        cmocka_unit_test(test_replay_fence_failure),
        cmocka_unit_test(test_device_lost_synchronize),
        cmocka_unit_test(test_device_lost_poll),
        cmocka_unit_test(test_native_memory),
        cmocka_unit_test(test_pinned_replay),
        cmocka_unit_test(test_node_update),
        cmocka_unit_test(test_kernel_params_checked),
    };
    return cmocka_run_group_tests_name("test_ze_backend", tests, NULL, NULL);
}
