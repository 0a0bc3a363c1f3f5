/* test_ze_backend.c — what only the level_zero backend has, run under the real Level Zero loader
 * against acg's test driver (tests/ze_driver, named by ZE_ENABLE_ALT_DRIVERS): the backend's
 * scenario (tests/level_zero/ze_scene.h) and what it relies on:
 *   - how a loader or driver that cannot serve is reported (--expect-unavailable TEXT, one
 *     process per condition, since the loader is loaded once per process), and what a driver
 *     lacking an extension function or knowing another version of one makes the backend do
 *     (--expect-detail TEXT, --expect-unknown-versions);
 *   - every driver call of a capture + replay + discard + update + teardown scenario failing in
 *     turn: a clean status each time, nothing left behind unless the backend says so, the device
 *     usable afterwards, and no misuse of the driver (a list destroyed while pending);
 *   - a discarded graph's command list outlives a pending replay (retain_discarded_graphs):
 *     the driver sees no list destroyed while the device may still reference it;
 *   - an update patches a mutable list in place, or records the list again;
 *   - free memory comes from the usable memory extension, or cannot be told without it;
 *   - a lost device (an injected ZE_RESULT_ERROR_DEVICE_LOST, or the driver's device lost for
 *     good) is reported by the wait that meets it or by acg_device_get_async_error's poll,
 *     which waits for nothing; every later call fails fast naming the first fault, destroys
 *     and the close succeed and leave nothing of the driver's behind, and the device opened
 *     again works.
 * The driver's own objects used beside acg are test_ze_native.c's; per-node updates and kernels
 * checked when loaded, test_ze_nodes.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <level_zero/ze_api.h>

#include <acg/acg.h>

#include "backend_scene.h"
#include "common.h" /* tc_expect_device_works */
#include "ze_scene.h"

#include "../ze_driver/acgtest_ze.h" /* ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES */
#include "backends/level_zero/entry_points.h"

#define N BS_N

/* ---- the scenario -------------------------------------------------------------------------- */

/* The scenario alone: the fixture's setup runs it with its checks, and its teardown checks that
 * the driver saw no misuse. */
static void test_scenario(void **state) { (void)state; }

/* Destructions of what a graph replays: a regular list, or the driver's executable graph (in
 * either form of the extension: the one not in use counts none). */
static unsigned long graph_destroys(void) {
    return ze_drv.calls("zeCommandListDestroy") + ze_drv.calls("zeExecutableGraphDestroyExt") +
           ze_drv.calls("zeExecutableGraphDestroyExp");
}

/* A graph discarded while its replay is pending keeps what it replays until the pool's next
 * successful capture: the driver counts nothing destroyed while in use, and it is gone once
 * that capture ended. */
static void test_discard_retained(void **state) {
    bs_scene *c = *state;
    unsigned long destroyed = graph_destroys();
    acg_graph *g = NULL;
    TC_OK(bs_capture(c, ZE_ALPHA, &g));
    TC_OK(acg_graph_launch(g, c->s));
    TC_OK(acg_graph_discard(g));
    assert_int_equal(graph_destroys(), destroyed); /* kept */
    acg_graph *next = NULL;
    TC_OK(bs_capture(c, ZE_ALPHA, &next));
    assert_int_equal(graph_destroys(), destroyed + 1); /* the capture let it go */
    TC_OK(acg_stream_synchronize(c->s));
    TC_OK(acg_graph_launch(next, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ZE_ALPHA));
    TC_OK(acg_graph_destroy(next));
}

/* An update that changes only kernel arguments patches the list in place where the driver has
 * mutable command lists; one that moves a copy records the list again; both replay the update.
 * Without the extension (the -spec1.4 run) every update records the list again. A graph the
 * driver captured is recorded from its description into a list at its first update (ze_scene_run
 * made that of c->g2). */
static void test_update_paths(void **state) {
    bs_scene *c = *state; /* c->g2 replays 2 + 3 * ZE_ALPHA */
    const acg_capability *cap = acg_device_get_capability(c->dev);
    const bool mutable_lists = strstr(cap->detail, "mutable lists yes") != NULL;
    unsigned long patched = ze_drv.calls("zeCommandListUpdateMutableCommandsExp");
    acg_graph *g = NULL;
    TC_OK(bs_capture(c, 4.0f * ZE_ALPHA, &g));
    unsigned long before = ze_drv.calls("zeCommandListCreate");
    TC_OK(acg_graph_update(c->g2, g));
    TC_OK(acg_graph_destroy(g));
    assert_int_equal(ze_drv.calls("zeCommandListUpdateMutableCommandsExp") - patched,
                     mutable_lists ? 1 : 0);
    assert_int_equal(ze_drv.calls("zeCommandListCreate") - before, mutable_lists ? 0 : 1);
    TC_OK(acg_graph_launch(c->g2, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + 4.0f * ZE_ALPHA));
    /* The same capture with its copy going elsewhere: recorded again. */
    acg_buffer *keep = c->z;
    TC_OK(acg_buffer_alloc(c->dev, N * sizeof(float), &c->z));
    TC_OK(bs_capture(c, ZE_ALPHA, &g));
    before = ze_drv.calls("zeCommandListCreate");
    patched = ze_drv.calls("zeCommandListUpdateMutableCommandsExp");
    TC_OK(acg_graph_update(c->g2, g));
    TC_OK(acg_graph_destroy(g));
    assert_int_equal(ze_drv.calls("zeCommandListCreate") - before, 1);
    assert_int_equal(ze_drv.calls("zeCommandListUpdateMutableCommandsExp"), patched);
    TC_OK(acg_graph_launch(c->g2, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, 2.0f + ZE_ALPHA));
    TC_OK(acg_graph_destroy(c->g2)); /* it reads the new z */
    c->g2 = NULL;
    TC_OK(acg_buffer_free(c->z));
    c->z = keep;
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
static const bs_sweep sweep = {.names = entry_names,
                               .run = ze_scene_run,
                               .releases = releases,
                               .may_leave_to_driver = true,
                               .drv = &ze_drv};

/* ---- device faults ------------------------------------------------------------------------ */

/* backend_scene's rig (its graph fills 4) with work queued and never waited for: a kernel, two
 * replays, an event's record. */
static void rig_open(bs_rig *r) {
    bs_rig_open(r, "level_zero", 4.0f);
    TC_OK(bs_fill(r->s, r->fill, r->x, N, 1.0f));
    TC_OK(acg_graph_launch(r->g, r->s));
    TC_OK(acg_graph_launch(r->g, r->s));
    TC_OK(acg_event_record(r->ev, r->s));
    TC_OK(acg_device_get_async_error(r->dev)); /* healthy, with work queued */
}

/* The rig's device was lost to a fault whose detail names `first`: every call that would queue
 * work, wait, allocate or create fails fast naming it (the poll too, every time); every destroy
 * succeeds, and so does the close, which leaves the driver with the `live` objects it had
 * before the rig, and no misuse. */
static void rig_lost(bs_rig *r, const char *first, long live) {
    BS_EXPECT_LOST(bs_fill(r->s, r->fill, r->x, N, 5.0f), first);
    BS_EXPECT_LOST(acg_graph_launch(r->g, r->s), first);
    BS_EXPECT_LOST(acg_copy_d2h(r->s, r->host, r->x, 0, N * sizeof(float)), first);
    bs_expect_lost_device(r->dev, r->s, r->ev, first);
    bs_rig_close(r);
    assert_int_equal(ze_drv.live(), live);
    assert_int_equal(ze_drv.violations(), 0);
}

/* Where the driver cannot append a list to an immediate list, a replay runs on the device's
 * queue with a fence, which the stream's next command waits for. A wait that fails (not a lost
 * device) is reported once, and the stream forgets the fence, so the graph can be destroyed and
 * the stream used after it without touching the destroyed graph (ASan's build would report the
 * use after free). */
static void test_replay_fence_failure(void **state) {
    (void)state;
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev));
    ze_bind();
    if (strstr(acg_device_get_capability(dev)->detail, "immediate append no") == NULL) {
        TC_OK(acg_device_close(dev));
        skip(); /* replays append to the stream's own list: no fence to wait for */
    }
    acg_kernel *fill = NULL;
    acg_buffer *x = NULL;
    acg_stream *s = NULL;
    acg_graph *g = NULL;
    TC_OK(acg_kernel_get(dev, "fill_f32", &fill));
    TC_OK(acg_buffer_alloc(dev, N * sizeof(float), &x));
    TC_OK(acg_stream_create(dev, &s));
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(bs_fill(s, fill, x, N, 2.0f));
    TC_OK(acg_stream_end_capture(s, &g));
    /* The replay's own record of the pool's event is the stream's next command. */
    ze_drv.inject("zeFenceHostSynchronize", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_graph_launch(g, s), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeFenceHostSynchronize"));
    ze_drv.inject(NULL, 0, 0);
    TC_OK(acg_graph_destroy(g));
    float got[N], want[N];
    for (int i = 0; i < N; i++) {
        want[i] = 3.0f;
    }
    TC_OK(bs_fill(s, fill, x, N, 3.0f));
    TC_OK(acg_copy_d2h(s, got, x, 0, sizeof got));
    TC_OK(acg_stream_synchronize(s));
    assert_memory_equal(got, want, sizeof got);
    TC_OK(acg_device_get_async_error(dev)); /* not a lost device */
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_device_close(dev));
}

/* The host waits the driver may block in; a poll calls none. */
static unsigned long host_waits(void) {
    return ze_drv.calls("zeEventHostSynchronize") + ze_drv.calls("zeFenceHostSynchronize") +
           ze_drv.calls("zeCommandListHostSynchronize") + ze_drv.calls("zeCommandQueueSynchronize");
}

/* A wait that meets the fault reports it: the stream's synchronize returns ACG_ERR_DEVICE_LOST
 * naming the Level Zero call and its code. First an injected ZE_RESULT_ERROR_DEVICE_LOST from
 * the host synchronization (the driver itself goes on), then a device the driver lost for good,
 * whose waits, submissions and (in the second mode) releases all say so: either way the device
 * is latched, its objects go without leaving the driver anything, and it opens again. */
static void test_device_lost_synchronize(void **state) {
    (void)state;
    ze_bind();
    ze_drv.fault(0, 0); /* whatever a failed test before left */
    long live = ze_drv.live();
    bs_rig r;
    rig_open(&r);
    ze_drv.inject("zeEventHostSynchronize", 1, ZE_RESULT_ERROR_DEVICE_LOST);
    assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
    assert_non_null(strstr(acg_last_error(), "zeEventHostSynchronize"));
    assert_non_null(strstr(acg_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
    rig_lost(&r, "zeEventHostSynchronize failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
    tc_expect_device_works("level_zero");
    const int modes[] = {ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        rig_open(&r);
        ze_drv.fault(0, modes[m]);
        assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
        assert_non_null(strstr(acg_last_error(), "failed with ZE_RESULT_ERROR_DEVICE_LOST"));
        rig_lost(&r, "failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        ze_drv.fault(0, 0);
        tc_expect_device_works("level_zero");
        assert_int_equal(ze_drv.live(), live);
    }
}

/* A fault only the poll sees: work queued, the driver's device lost, nothing waited for yet.
 * acg_device_get_async_error finds it (zeDeviceGetStatus) without waiting for any work, and
 * the device is latched from then on, in both modes of the driver's loss. */
static void test_device_lost_poll(void **state) {
    (void)state;
    ze_bind();
    ze_drv.fault(0, 0); /* whatever a failed test before left */
    long live = ze_drv.live();
    const int modes[] = {ACGTEST_ZE_LOST, ACGTEST_ZE_LOST_RELEASES};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        bs_rig r;
        rig_open(&r);
        ze_drv.fault(0, modes[m]);
        unsigned long waits = host_waits(), polls = ze_drv.calls("zeDeviceGetStatus");
        assert_int_equal(acg_device_get_async_error(r.dev), ACG_ERR_DEVICE_LOST);
        assert_non_null(strstr(acg_last_error(), "acg_device_get_async_error"));
        assert_non_null(strstr(acg_last_error(), "zeDeviceGetStatus"));
        assert_non_null(strstr(acg_last_error(), "ZE_RESULT_ERROR_DEVICE_LOST"));
        assert_int_equal(host_waits(), waits);
        assert_int_equal(ze_drv.calls("zeDeviceGetStatus") - polls, 1);
        rig_lost(&r, "zeDeviceGetStatus failed with ZE_RESULT_ERROR_DEVICE_LOST", live);
        ze_drv.fault(0, 0);
        tc_expect_device_works("level_zero");
        assert_int_equal(ze_drv.live(), live);
    }
    /* The poll failing for another reason is the driver's error, and latches nothing. */
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev));
    ze_drv.inject("zeDeviceGetStatus", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_device_get_async_error(dev), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetStatus"));
    TC_OK(acg_device_get_async_error(dev));
    TC_OK(acg_device_close(dev));
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
    TC_OK(acg_device_open("level_zero", &dev));
    ze_bind();
    const acg_capability *cap = acg_device_get_capability(dev);
    uint64_t free0 = 0, total = 0;
    acg_status st = acg_device_get_memory_info(dev, &free0, &total);
    if (strstr(cap->detail, "free memory yes") == NULL) {
        assert_non_null(strstr(cap->detail, "free memory no"));
        assert_int_equal(st, ACG_ERR_UNSUPPORTED);
        assert_non_null(strstr(acg_last_error(), "cannot tell"));
        assert_non_null(strstr(acg_last_error(), "ZE_extension_device_usablemem_size_properties"));
        TC_OK(acg_device_close(dev));
        return;
    }
    TC_OK(st);
    assert_true(total == cap->memory_bytes);
    assert_true(free0 > 0 && free0 <= total);
    const uint64_t size = 64u << 20;
    acg_buffer *b = NULL;
    TC_OK(acg_buffer_alloc(dev, size, &b));
    uint64_t free1 = 0;
    TC_OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free0 - free1 >= size && free0 - free1 <= size + (1u << 20));
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free1 == free0);
    ze_drv.inject("zeDeviceGetMemoryProperties", 1, ZE_RESULT_ERROR_UNKNOWN);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetMemoryProperties"));
    TC_OK(acg_device_get_memory_info(dev, &free1, &total));
    assert_true(free1 == free0);
    /* A lost device is latched: the query fails now and from then on, naming the first fault. */
    ze_drv.inject("zeDeviceGetProperties", 1, ZE_RESULT_ERROR_DEVICE_LOST);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetProperties"));
    ze_drv.inject(NULL, 0, 0);
    assert_int_equal(acg_device_get_memory_info(dev, &free1, &total), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "zeDeviceGetProperties"));
    assert_non_null(strstr(acg_last_error(), "was lost to an earlier fault"));
    TC_OK(acg_device_close(dev));
}

/* A mode of a driver short of what the backend looks for: opens the device and prints its
 * capability's detail, which `wrong` judges (text: what it must say); then the scenario runs on
 * a new device, unchecked, and must succeed. 0 when both went well. */
static int detail_then_scenario(bool (*wrong)(const acg_capability *cap, const char *text),
                                const char *text) {
    acg_device *dev = bs_open_or_say("level_zero");
    if (dev == NULL) {
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    printf("%s\n", cap->detail);
    int bad = wrong(cap, text);
    acg_device_close(dev);
    acg_set_log_level(ACG_LOG_ERROR);
    bs_scene c;
    bad |= ze_scene_run(&c, false) != ACG_OK;
    bs_scene_close(&c);
    return bad;
}

/* Every extension left unused, each with its log line. */
static bool unknown_wrong(const acg_capability *cap, const char *text) {
    (void)text;
    return unknown_versions != 5 || strstr(cap->detail, "immediate append no") == NULL ||
           strstr(cap->detail, "mutable lists no") == NULL ||
           strstr(cap->detail, "graph capture no") == NULL ||
           strstr(cap->detail, "free memory no") == NULL || cap->native_capture;
}

/* A driver that reports its extensions at a major version acg does not know: each is left
 * unused, with a log line naming it, and the device works without them. */
static int expect_unknown_versions(void) {
    acg_set_log_callback(count_unknown, NULL);
    acg_set_log_level(ACG_LOG_WARN);
    int bad = detail_then_scenario(unknown_wrong, NULL);
    acg_set_log_callback(NULL, NULL);
    return bad;
}

static bool detail_lacks(const acg_capability *cap, const char *text) {
    return strstr(cap->detail, text) == NULL;
}

/* A driver lacking something the backend looks for: the capability's detail says what the
 * backend does instead (TEXT), and the scenario runs. */
static int expect_detail(const char *text) { return detail_then_scenario(detail_lacks, text); }

static const bs_mode modes[] = {
    {"--expect-detail", NULL, expect_detail},
    {"--expect-unknown-versions", expect_unknown_versions, NULL},
    {NULL, NULL, NULL},
};

static const struct CMUnitTest tests[] = {
    ZE_CASE(test_scenario),
    ZE_CASE(test_discard_retained),
    ZE_CASE(test_update_paths),
    BS_SWEEP_CASE(&sweep),
    cmocka_unit_test(test_memory_info),
    cmocka_unit_test(test_replay_fence_failure),
    cmocka_unit_test(test_device_lost_synchronize),
    cmocka_unit_test(test_device_lost_poll),
};

BS_MAIN("level_zero", modes, "test_ze_backend", tests)
