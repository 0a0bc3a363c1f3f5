/*
 * test_opencl_backend.c — what only the opencl backend has: the choice of the
 * cl_khr_command_buffer calling convention from the version a device reports, the kernel
 * build log reaching acg_last_error() when a kernel's OpenCL C fails to build, and device
 * faults: the codes that mean one, and a real one provoked through the stream's own queue (a
 * command of the engine's waiting on a user event that fails, which PoCL passes on to the
 * commands queued behind it), reported by the stream's synchronize or by the device's poll,
 * which waits for nothing, and latched until the device is opened again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/opencl/opencl.h"
#include "common.h" /* tc_expect_device_works */

static ocl_cb_abi abi_of(const char *version) {
    unsigned major, minor, patch;
    assert_true(acg__ocl_parse_version(version, &major, &minor, &patch));
    return acg__ocl_cmdbuf_abi(major, minor, patch);
}

/* Each version the extension went through maps to the signatures it declares; a version this
 * code has never seen disables graphs instead of calling with guessed arguments. */
static void test_version_dispatch(void **state) {
    (void)state;
    assert_int_equal(abi_of("0.9.0"), OCL_CB_090); /* PoCL 3.1 */
    assert_int_equal(abi_of("0.9.4"), OCL_CB_090);
    assert_int_equal(abi_of("0.9.5"), OCL_CB_095); /* properties added to clCommand*KHR */
    assert_int_equal(abi_of("0.9.8"), OCL_CB_095);
    assert_int_equal(abi_of("1.0"), OCL_CB_095); /* final */
    assert_int_equal(abi_of("1.0.0"), OCL_CB_095);
    assert_int_equal(abi_of("0.8.2"), OCL_CB_NONE);
    assert_int_equal(abi_of("1.1.0"), OCL_CB_NONE);
    assert_int_equal(abi_of("2.0"), OCL_CB_NONE);

    unsigned a, b, c;
    assert_true(acg__ocl_parse_version("0.9.5", &a, &b, &c));
    assert_int_equal(a, 0);
    assert_int_equal(b, 9);
    assert_int_equal(c, 5);
    const char *bad[] = {"", "1", "x.y", "1.", ".1", "1.0.0.0", "1.0-rc1", "99999.0", "1..0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(acg__ocl_parse_version(bad[i], &a, &b, &c));
    }
}

/* A kernel whose OpenCL C does not compile: the lookup fails with ACG_ERR_DEVICE and the
 * compiler's own message is in acg_last_error(); the failed build is not kept, so the next
 * lookup reports it again, and a kernel of good source on the same device works. */
static void test_build_failure_reports_log(void **state) {
    (void)state;
    acg_kernel_desc bad = ACG_KERNEL_DESC_INIT;
    bad.name = "broken_f32";
    bad.n_args = 2;
    bad.types[0] = ACG_ARG_BUFFER;
    bad.types[1] = ACG_ARG_F32;
    bad.bytes_per_item[0] = 4;
    bad.opencl.source = "kernel void broken_f32(global float *y, ulong off, float v) {\n"
                        "    y[get_global_id(0)] = undeclared_identifier;\n"
                        "}\n";
    assert_int_equal(acg_kernel_register(&bad), ACG_OK);
    acg_device *dev;
    assert_int_equal(acg_device_open("opencl", &dev), ACG_OK);
    acg_kernel *k;
    for (int attempt = 0; attempt < 2; attempt++) {
        assert_int_equal(acg_kernel_get(dev, "broken_f32", &k), ACG_ERR_DEVICE);
        const char *msg = acg_last_error();
        assert_non_null(strstr(msg, "clBuildProgram"));
        assert_non_null(strstr(msg, "build log"));
        assert_non_null(strstr(msg, "broken_f32"));
        assert_non_null(strstr(msg, "undeclared_identifier"));
    }
    assert_int_equal(acg_kernel_get(dev, "fill_f32", &k), ACG_OK);
    /* Nothing of the failed kernel stayed loaded: it unregisters with the device open. */
    assert_int_equal(acg_kernel_unregister("broken_f32"), ACG_OK);
    assert_int_equal(acg_device_close(dev), ACG_OK);
}

/* PoCL offers the extension at 0.9.0 without mutable dispatch: graphs yes, update no, and the
 * capability says why in its detail. */
static void test_capability_reports_extension(void **state) {
    (void)state;
    acg_device *dev;
    assert_int_equal(acg_device_open("opencl", &dev), ACG_OK);
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(strstr(cap->detail, "cl_khr_command_buffer"));
    if (cap->graphs) {
        assert_non_null(strstr(cap->detail, "graphs:"));
    } else {
        assert_non_null(strstr(cap->detail, "no graphs"));
    }
    if (!cap->graph_update) {
        assert_non_null(strstr(cap->detail, "capture again"));
    }
    assert_int_equal(acg_device_close(dev), ACG_OK);
}

/* ---- device faults ------------------------------------------------------------------------ */

/* Only a wait for earlier commands (or a command's own execution status) tells of a fault:
 * CL_OUT_OF_RESOURCES from an enqueue that waits for nothing says the command needs more than
 * the device has. */
static void test_error_map(void **state) {
    (void)state;
    assert_int_equal(acg__ocl_sync_error(CL_OUT_OF_RESOURCES, "f", "clFinish(q)"),
                     ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "f: clFinish(q) failed with CL_OUT_OF_RESOURCES"));
    assert_int_equal(
        acg__ocl_sync_error(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "f", "clWaitForEvents"),
        ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"));
    assert_int_equal(acg__ocl_sync_error(CL_OUT_OF_HOST_MEMORY, "f", "clFinish(q)"),
                     ACG_ERR_OUT_OF_MEMORY);
    assert_int_equal(acg__ocl_sync_error(CL_INVALID_COMMAND_QUEUE, "f", "clFinish(q)"),
                     ACG_ERR_DEVICE);
    assert_int_equal(acg__ocl_error(CL_OUT_OF_RESOURCES, "f", "clEnqueueNDRangeKernel"),
                     ACG_ERR_OUT_OF_MEMORY);
}

#define N 256

#define OK(call) assert_int_equal((call), ACG_OK)

/* A device whose stream has acg's work queued behind a command of the engine's own, which
 * waits on a user event of the engine's. */
typedef struct rig {
    acg_device *dev;
    acg_kernel *fill;
    acg_buffer *x;
    acg_stream *s;
    acg_event *ev;
    cl_command_queue queue; /* the stream's, from acg_stream_get_native */
    /* The engine's: its user event, its barrier waiting on it, and its marker behind acg's
     * work. */
    cl_event user, gate, behind;
} rig;

static acg_status launch_fill(acg_stream *s, acg_kernel *fill, acg_buffer *x, float v) {
    acg_arg args[] = {acg_arg_buffer(x, 0), acg_arg_f32(v)};
    acg_dims dims = acg_dims_1d(N);
    return acg_kernel_launch(s, fill, &dims, args, 2);
}

/* Whether a fault may be provoked here: not where the environment says why not. */
static bool faults_allowed(void) {
    const char *why = getenv("ACG_TEST_NO_OPENCL_FAULT");
    if (why != NULL && *why != '\0') {
        print_message("skipped: %s\n", why);
        return false;
    }
    return true;
}

static void rig_open(rig *r) {
    memset(r, 0, sizeof *r);
    OK(acg_device_open("opencl", &r->dev));
    OK(acg_kernel_get(r->dev, "fill_f32", &r->fill));
    OK(acg_buffer_alloc(r->dev, N * sizeof(float), &r->x));
    OK(acg_stream_create(r->dev, &r->s));
    OK(acg_event_create(r->dev, &r->ev));
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    OK(acg_stream_get_native(r->s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_OPENCL_QUEUE);
    r->queue = (cl_command_queue)h.handle;
    cl_context ctx = NULL;
    assert_int_equal(clGetCommandQueueInfo(r->queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL),
                     CL_SUCCESS);
    cl_int err = CL_SUCCESS;
    r->user = clCreateUserEvent(ctx, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clEnqueueBarrierWithWaitList(r->queue, 1, &r->user, &r->gate), CL_SUCCESS);
    OK(launch_fill(r->s, r->fill, r->x, 1.0f));
    OK(acg_event_record(r->ev, r->s));
    assert_int_equal(clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &r->behind), CL_SUCCESS);
    assert_int_equal(acg_stream_query(r->s), ACG_NOT_READY); /* held by the gate */
    OK(acg_device_get_async_error(r->dev));                  /* healthy, with work queued */
}

/* The engine's user event fails: its barrier terminates abnormally, and with it (where the
 * implementation passes that on, as PoCL does) every command queued behind it, acg's too. The
 * engine's marker behind acg's work tells which, once it ended: false where the implementation
 * ran the commands behind a failed one. */
static bool rig_fault(rig *r) {
    assert_int_equal(clSetUserEventStatus(r->user, -1), CL_SUCCESS);
    clWaitForEvents(1, &r->behind); /* CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, or not */
    cl_int status = CL_COMPLETE;
    assert_int_equal(
        clGetEventInfo(r->behind, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL),
        CL_SUCCESS);
    return status < 0;
}

static void rig_release_engine(rig *r) {
    clReleaseEvent(r->behind);
    clReleaseEvent(r->gate);
    clReleaseEvent(r->user);
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
 * succeeds, and so does the close. */
static void rig_lost(rig *r, const char *first) {
    acg_buffer *b = NULL;
    acg_stream *s2 = NULL;
    float host[N];
    EXPECT_LOST(launch_fill(r->s, r->fill, r->x, 5.0f), first);
    EXPECT_LOST(acg_buffer_alloc(r->dev, 64, &b), first);
    assert_null(b);
    EXPECT_LOST(acg_stream_create(r->dev, &s2), first);
    assert_null(s2);
    EXPECT_LOST(acg_copy_d2h(r->s, host, r->x, 0, sizeof host), first);
    EXPECT_LOST(acg_stream_synchronize(r->s), first);
    EXPECT_LOST(acg_event_synchronize(r->ev), first);
    EXPECT_LOST(acg_device_synchronize(r->dev), first);
    EXPECT_LOST(acg_device_get_async_error(r->dev), first);
    EXPECT_LOST(acg_device_get_async_error(r->dev), first);
    OK(acg_event_destroy(r->ev));
    OK(acg_stream_destroy(r->s));
    OK(acg_buffer_free(r->x));
    OK(acg_device_close(r->dev));
    rig_release_engine(r);
}

/* Where the implementation runs what is queued behind a failed command, nothing faults: the
 * rig is taken down whole, and the case is skipped, saying why. */
static void rig_skip(rig *r) {
    OK(acg_stream_synchronize(r->s));
    OK(acg_event_destroy(r->ev));
    OK(acg_stream_destroy(r->s));
    OK(acg_buffer_free(r->x));
    OK(acg_device_close(r->dev));
    rig_release_engine(r);
    print_message("skipped: this OpenCL implementation runs the commands queued behind one that "
                  "terminated abnormally, so no test can make acg's commands fault\n");
    skip();
}

/* The stream's synchronize meets the fault (clFinish itself says nothing: its latest command's
 * execution status does) and reports it; the device is latched from then on. */
static void test_device_lost_synchronize(void **state) {
    (void)state;
    if (!faults_allowed()) {
        skip();
    }
    rig r;
    rig_open(&r);
    if (!rig_fault(&r)) {
        rig_skip(&r);
        return;
    }
    assert_int_equal(acg_stream_synchronize(r.s), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "acg_stream_synchronize"));
    assert_non_null(strstr(acg_last_error(), "ended with execution status"));
    rig_lost(&r, "acg_stream_synchronize: the stream's latest command ended with execution "
                 "status");
    tc_expect_device_works("opencl");
}

/* A fault only the poll sees: nothing waited for it yet; acg_device_get_async_error reads the
 * stream's latest command's status without waiting, and the device is latched from then on. */
static void test_device_lost_poll(void **state) {
    (void)state;
    if (!faults_allowed()) {
        skip();
    }
    rig r;
    rig_open(&r);
    if (!rig_fault(&r)) {
        rig_skip(&r);
        return;
    }
    assert_int_equal(acg_device_get_async_error(r.dev), ACG_ERR_DEVICE_LOST);
    assert_non_null(strstr(acg_last_error(), "acg_device_get_async_error"));
    assert_non_null(strstr(acg_last_error(), "ended with execution status"));
    rig_lost(&r, "acg_device_get_async_error: a stream's latest command ended with execution "
                 "status");
    tc_expect_device_works("opencl");
}

int main(void) {
    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    for (size_t i = 0; i < acg_backend_count(); i++) {
        if (acg_backend_get_info(i, &info) == ACG_OK && strcmp(info.name, "opencl") == 0 &&
            !info.available) {
            printf("skipped: opencl: %s\n", info.reason);
            return 77;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_dispatch),
        cmocka_unit_test(test_build_failure_reports_log),
        cmocka_unit_test(test_capability_reports_extension),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_device_lost_synchronize),
        cmocka_unit_test(test_device_lost_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
