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

#include "common.h" /* tc_expect_device_works */

#include "../ze_driver/acgtest_ze.h" /* ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES */
#include "backends/level_zero/entry_points.h"
#include "backends/level_zero/ze_ext.h"

#define N 256
#define ALPHA 3.0f

/* ---- the test driver's control functions (tests/ze_driver/acgtest_ze.h) ------------------ */

static struct {
    void (*inject)(const char *name, unsigned nth, int code);
    unsigned long (*calls)(const char *name);
    long (*live)(void);
    unsigned long (*violations)(void);
    void (*set_lost)(int device, int mode);
} drv;

/* Binds the driver the loader loaded (a device must have been opened once). */
static void bind_driver(void) {
    const char *path = getenv("ZE_ENABLE_ALT_DRIVERS");
    assert_non_null(path);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    *(void **)&drv.inject = dlsym(h, "acgtest_ze_fail");
    *(void **)&drv.calls = dlsym(h, "acgtest_ze_calls");
    *(void **)&drv.live = dlsym(h, "acgtest_ze_live");
    *(void **)&drv.violations = dlsym(h, "acgtest_ze_violations");
    *(void **)&drv.set_lost = dlsym(h, "acgtest_ze_set_lost");
    assert_non_null(drv.inject);
    assert_non_null(drv.calls);
    assert_non_null(drv.live);
    assert_non_null(drv.violations);
    assert_non_null(drv.set_lost);
    dlclose(h); /* RTLD_NOLOAD took a reference */
}

#define OK(call) assert_int_equal((call), ACG_OK)

/* Warnings that the backend left objects to the driver (a release refused, or a wait that
 * failed before freeing what the device may still use). */
static int left_to_driver;

static void count_left(acg_log_level level, const char *message, void *user) {
    (void)user;
    if (level == ACG_LOG_WARN && strstr(message, "left to the driver") != NULL) {
        left_to_driver++;
    }
}

/* ---- the scenario -------------------------------------------------------------------------- */

typedef struct scene {
    acg_device *dev;
    acg_stream *s, *s2;
    acg_event *fork, *join;
    acg_buffer *x, *y, *z;
    acg_graph_pool *pool;
    acg_graph *g, *g2;
    float *host;
    acg_kernel *fill, *axpy;
} scene;

/* z = fill(2.0f), y = z; fork to s2: y += alpha * x; join; y copied to pinned host. A fill,
 * copies both ways, kernels and a fork. */
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
        st = acg_event_record(c->join, c->s2);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(c->s, c->join);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, c->host, c->y, 0, N * sizeof(float));
    }
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

/* A capture invalidated by a synchronize inside it, then ended: what was recorded is dropped (on
 * a driver that records captures, its capture is ended and destroyed) and the stream goes on
 * eagerly. ACG_OK when both calls said so; otherwise the first other status. */
static acg_status invalidated_capture(scene *c) {
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
 * it, leaving teardown to scene_close. */
static acg_status scene_run(scene *c, bool check) {
    memset(c, 0, sizeof *c);
    acg_status st = acg_device_open("level_zero", &c->dev);
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
        st = capture(c, ALPHA, &c->g);
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
        assert_true(host_is(c, 2.0f + ALPHA));
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
        st = capture(c, 2.0f * ALPHA, &c->g2);
    }
    if (st == ACG_OK) {
        st = acg_graph_launch(c->g2, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(host_is(c, 2.0f + 2.0f * ALPHA));
    }
    if (st == ACG_OK) {
        st = invalidated_capture(c);
    }
    /* An update: the list recorded again from a capture of the same shape. */
    acg_graph *g3 = NULL;
    if (st == ACG_OK) {
        st = capture(c, 3.0f * ALPHA, &g3);
    }
    if (st == ACG_OK) {
        st = acg_graph_update(c->g2, g3);
    }
    acg_graph_destroy(g3);
    if (st == ACG_OK) {
        st = acg_graph_launch(c->g2, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(host_is(c, 2.0f + 3.0f * ALPHA));
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
    scene c;
    OK(scene_run(&c, true));
    bind_driver();
    unsigned long destroyed = graph_destroys();
    acg_graph *g = NULL;
    OK(capture(&c, ALPHA, &g));
    OK(acg_graph_launch(g, c.s));
    OK(acg_graph_discard(g));
    assert_int_equal(graph_destroys(), destroyed); /* kept */
    acg_graph *next = NULL;
    OK(capture(&c, ALPHA, &next));
    assert_int_equal(graph_destroys(), destroyed + 1); /* the capture let it go */
    OK(acg_stream_synchronize(c.s));
    OK(acg_graph_launch(next, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 2.0f + ALPHA));
    OK(acg_graph_destroy(next));
    scene_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* An update that changes only kernel arguments patches the list in place where the driver has
 * mutable command lists; one that moves a copy records the list again; both replay the update.
 * Without the extension (the -spec1.4 run) every update records the list again. A graph the
 * driver captured is recorded from its description into a list at its first update (scene_run
 * made that of c.g2). */
static void test_update_paths(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true)); /* c.g2 replays 2 + 3 * ALPHA */
    bind_driver();
    const acg_capability *cap = acg_device_get_capability(c.dev);
    const bool mutable_lists = strstr(cap->detail, "mutable lists yes") != NULL;
    unsigned long patched = drv.calls("zeCommandListUpdateMutableCommandsExp");
    acg_graph *g = NULL;
    OK(capture(&c, 4.0f * ALPHA, &g));
    unsigned long before = drv.calls("zeCommandListCreate");
    OK(acg_graph_update(c.g2, g));
    OK(acg_graph_destroy(g));
    assert_int_equal(drv.calls("zeCommandListUpdateMutableCommandsExp") - patched,
                     mutable_lists ? 1 : 0);
    assert_int_equal(drv.calls("zeCommandListCreate") - before, mutable_lists ? 0 : 1);
    OK(acg_graph_launch(c.g2, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 2.0f + 4.0f * ALPHA));
    /* The same capture with its copy going elsewhere: recorded again. */
    acg_buffer *keep = c.z;
    OK(acg_buffer_alloc(c.dev, N * sizeof(float), &c.z));
    OK(capture(&c, ALPHA, &g));
    before = drv.calls("zeCommandListCreate");
    patched = drv.calls("zeCommandListUpdateMutableCommandsExp");
    OK(acg_graph_update(c.g2, g));
    OK(acg_graph_destroy(g));
    assert_int_equal(drv.calls("zeCommandListCreate") - before, 1);
    assert_int_equal(drv.calls("zeCommandListUpdateMutableCommandsExp"), patched);
    OK(acg_graph_launch(c.g2, c.s));
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 2.0f + ALPHA));
    OK(acg_graph_destroy(c.g2)); /* it reads the new z */
    c.g2 = NULL;
    OK(acg_buffer_free(c.z));
    c.z = keep;
    scene_close(&c);
    assert_int_equal(drv.violations(), 0);
}

/* zeCommandListAppendMemoryCopy of the loader the backend loaded, for work an engine issues on
 * a stream's own list. */
static ze_pfnCommandListAppendMemoryCopy_t loader_copy(void) {
    const char *path = getenv("ACG_LEVEL_ZERO_LOADER");
    void *h = dlopen(path != NULL ? path : "libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    ze_pfnCommandListAppendMemoryCopy_t f;
    *(void **)&f = dlsym(h, "zeCommandListAppendMemoryCopy");
    assert_non_null(f);
    dlclose(h); /* RTLD_NOLOAD took a reference */
    return f;
}

/* An extension function of the (first) driver, through the loader the backend loaded. */
static void *driver_function(const char *name) {
    const char *path = getenv("ACG_LEVEL_ZERO_LOADER");
    void *h = dlopen(path != NULL ? path : "libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    ze_pfnDriverGet_t get;
    ze_pfnDriverGetExtensionFunctionAddress_t lookup;
    *(void **)&get = dlsym(h, "zeDriverGet");
    *(void **)&lookup = dlsym(h, "zeDriverGetExtensionFunctionAddress");
    assert_non_null(get);
    assert_non_null(lookup);
    dlclose(h); /* RTLD_NOLOAD took a reference */
    uint32_t n = 1;
    ze_driver_handle_t driver = NULL;
    assert_int_equal(get(&n, &driver), ZE_RESULT_SUCCESS);
    void *f = NULL;
    assert_int_equal(lookup(driver, name, &f), ZE_RESULT_SUCCESS);
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
static void run_native_graph(scene *c, acg_graph *g, bool native) {
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
    assert_true(host_is(c, 2.0f + ALPHA));
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
    scene c;
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
    OK(capture(&c, ALPHA, &g));
    assert_int_equal(drv.calls(begin_fn) - begun, native ? 1 : 0);
    assert_int_equal(drv.calls("zeCommandListCreate") - created, native ? 0 : 1);
    memset(c.host, 0, N * sizeof(float));
    for (int r = 0; r < 3; r++) {
        OK(acg_graph_launch(g, c.s));
    }
    OK(acg_stream_synchronize(c.s));
    assert_true(host_is(&c, 2.0f + ALPHA));
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
    assert_true(host_is(&c, 5.0f));
    scene_close(&c);
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
};
#define N_ENTRIES (sizeof entry_names / sizeof entry_names[0])

/* Calls that destroy or release: a driver that fails one keeps the object, so the sweep does
 * not count objects after failing them. */
static bool releases(const char *name) {
    return strstr(name, "Destroy") != NULL || strstr(name, "Free") != NULL;
}

/* Every driver call of the scenario, teardown included, fails in turn (an invalid-argument
 * error, as a driver refusing it would): the scenario ends with a clean status naming the
 * driver's error (or absorbs it), the teardown leaves no driver object behind unless the backend
 * said it left some to the driver (a refused release, or a failed wait before freeing what the
 * device may still use), the driver saw no misuse (nothing destroyed while in use), and the
 * scenario then runs clean on a new device. */
static void test_fault_sweep(void **state) {
    (void)state;
    scene c;
    OK(scene_run(&c, true)); /* loads the driver and builds what is built once per process */
    scene_close(&c);
    bind_driver();
    acg_set_log_callback(count_left, NULL);
    acg_set_log_level(ACG_LOG_WARN);
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
    unsigned long points = 0, failed_runs = 0, left_runs = 0;
    for (size_t i = 0; i < N_ENTRIES; i++) {
        const char *name = entry_names[i];
        for (unsigned long k = 1; k <= counts[i]; k++, points++) {
            left_to_driver = 0;
            drv.inject(name, (unsigned)k, ZE_RESULT_ERROR_INVALID_ARGUMENT);
            acg_status st = scene_run(&c, false);
            char why[512];
            snprintf(why, sizeof why, "%s", st != ACG_OK ? acg_last_error() : "-");
            scene_close(&c);
            drv.inject(NULL, 0, 0);
            failed_runs += st != ACG_OK;
            if (st != ACG_OK && strstr(why, "ZE_RESULT_ERROR_INVALID_ARGUMENT") == NULL) {
                print_error("failing %s call %lu: %s without the driver's error: %s\n", name, k,
                            acg_status_name(st), why);
                fail();
            }
            left_runs += left_to_driver > 0;
            if (releases(name) || left_to_driver > 0) {
                /* A release refused, or a wait failed before freeing what the device may still
                 * use: the backend leaves it to the driver, and says so. */
                live = drv.live();
            } else if (drv.live() != live) {
                print_error("failing %s call %lu (%s: %s) left %ld driver objects behind\n", name,
                            k, acg_status_name(st), why, drv.live() - live);
                fail();
            }
            if (drv.violations() != 0) {
                print_error("failing %s call %lu (%s: %s): the driver saw %lu misuse(s)\n", name, k,
                            acg_status_name(st), why, drv.violations());
                fail();
            }
            OK(scene_run(&c, true));
            scene_close(&c);
            assert_int_equal(drv.live(), live);
        }
    }
    acg_set_log_callback(NULL, NULL);
    acg_set_log_level(ACG_LOG_ERROR);
    print_message("level_zero fault sweep: %lu driver calls failed in turn (%lu runs failed "
                  "with the driver's error, the rest absorbed it); %lu left what the device may "
                  "still use to the driver and said so, none leaked otherwise; no misuse\n",
                  points, failed_runs, left_runs);
    assert_true(points > 50 && failed_runs > points / 2);
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

/* A call on a device lost before it: ACG_ERR_DEVICE_LOST at once, naming the first fault. */
static void expect_lost(acg_status st, const char *call, const char *first) {
    const char *why = acg_last_error();
    if (st != ACG_ERR_DEVICE_LOST || strstr(why, "was lost to an earlier fault") == NULL ||
        strstr(why, first) == NULL) {
        print_error("%s: %s (%s), not ACG_ERR_DEVICE_LOST naming an earlier fault in %s\n", call,
                    acg_status_name(st), why, first);
        fail();
    }
}
#define EXPECT_LOST(call, first) expect_lost((call), #call, (first))

/* The rig's device was lost to a fault whose detail names `first`: every call that would queue
 * work, wait, allocate or create fails fast naming it (the poll too, every time); every destroy
 * succeeds, and so does the close, which leaves the driver with the `live` objects it had
 * before the rig, and no misuse. */
static void rig_lost(rig *r, const char *first, long live) {
    acg_buffer *b = NULL;
    acg_stream *s2 = NULL;
    EXPECT_LOST(launch_fill(r->s, r->fill, r->x, 5.0f), first);
    EXPECT_LOST(acg_buffer_alloc(r->dev, 64, &b), first);
    assert_null(b);
    EXPECT_LOST(acg_stream_create(r->dev, &s2), first);
    assert_null(s2);
    EXPECT_LOST(acg_graph_launch(r->g, r->s), first);
    EXPECT_LOST(acg_copy_d2h(r->s, r->host, r->x, 0, N * sizeof(float)), first);
    EXPECT_LOST(acg_stream_synchronize(r->s), first);
    EXPECT_LOST(acg_event_synchronize(r->ev), first);
    EXPECT_LOST(acg_device_synchronize(r->dev), first);
    EXPECT_LOST(acg_device_get_async_error(r->dev), first);
    EXPECT_LOST(acg_device_get_async_error(r->dev), first);
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
    drv.set_lost(0, 0); /* whatever a failed test before left */
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
        drv.set_lost(0, modes[m]);
        assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
        assert_non_null(strstr(acg_last_error(), "failed with ZE_RESULT_ERROR_DEVICE_LOST"));
        rig_lost(&r, "failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        drv.set_lost(0, 0);
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
    drv.set_lost(0, 0); /* whatever a failed test before left */
    long live = drv.live();
    const int modes[] = {ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        rig r;
        rig_open(&r);
        drv.set_lost(0, modes[m]);
        unsigned long waits = host_waits(), polls = drv.calls("zeDeviceGetStatus");
        assert_int_equal(acg_device_get_async_error(r.dev), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_device_get_async_error"));
        assert_non_null(strstr(acg_last_error(), "zeDeviceGetStatus"));
        assert_non_null(strstr(acg_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
        assert_int_equal(host_waits(), waits);
        assert_int_equal(drv.calls("zeDeviceGetStatus") - polls, 1);
        rig_lost(&r, "zeDeviceGetStatus failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        drv.set_lost(0, 0);
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

/* ---- conditions that make the backend unavailable ---------------------------------------- */

static int expect_unavailable(const char *text) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        if (acg_backend_get_info(i, &info) != ACG_OK || strcmp(info.name, "level_zero") != 0) {
            continue;
        }
        acg_device *dev = NULL;
        acg_status st = acg_device_open("level_zero", &dev);
        if (info.available || st != ACG_ERR_UNAVAILABLE || strstr(info.reason, text) == NULL ||
            strstr(acg_last_error(), text) == NULL) {
            fprintf(stderr,
                    "expected level_zero unavailable with \"%s\": available %d, open %s, reason "
                    "\"%s\", error \"%s\"\n",
                    text, info.available, acg_status_name(st), info.reason, acg_last_error());
            return 1;
        }
        printf("unavailable as expected: %s\n", info.reason);
        return 0;
    }
    fprintf(stderr, "no level_zero backend in this build\n");
    return 1;
}

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
    scene c;
    acg_device_close(dev);
    acg_set_log_level(ACG_LOG_ERROR);
    bad |= scene_run(&c, false) != ACG_OK;
    scene_close(&c);
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
    scene c;
    bad |= scene_run(&c, false) != ACG_OK;
    scene_close(&c);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--expect-unavailable") == 0) {
        return expect_unavailable(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "--expect-detail") == 0) {
        return expect_detail(argv[2]);
    }
    if (argc == 2 && strcmp(argv[1], "--expect-unknown-versions") == 0) {
        return expect_unknown_versions();
    }
    acg_device *probe = NULL;
    if (acg_device_open("level_zero", &probe) != ACG_OK) {
        printf("skipped: level_zero: %s\n", acg_last_error());
        return 77;
    }
    acg_device_close(probe);
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
    };
    return cmocka_run_group_tests_name("test_ze_backend", tests, NULL, NULL);
}
