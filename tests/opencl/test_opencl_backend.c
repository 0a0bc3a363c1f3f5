/*
 * test_opencl_backend.c — what only the opencl backend has: the choice of the
 * cl_khr_command_buffer calling convention from the version a device reports, the kernel
 * build log reaching acg_last_error() when a kernel's OpenCL C fails to build, kernels whose
 * parameters break acg's calling convention refused when loaded, the driver's objects behind
 * devices, streams and buffers used for the engine's own work, no per-node update without
 * mutable dispatch, pinned memory read at each replay, and device faults: the codes that mean
 * one, and a real one provoked through the stream's own queue (a command of the engine's
 * waiting on a user event that fails, which PoCL passes on to the commands queued behind it),
 * reported by the stream's synchronize or by the device's poll, which waits for nothing, and
 * latched until the device is opened again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend_scene.h" /* BS_EXPECT_LOST */
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
    bad.flags = ACG_KERNEL_ELEMENTWISE;
    bad.opencl.source = "kernel void broken_f32(global float *y, ulong off, float v) {\n"
                        "    y[get_global_id(0)] = undeclared_identifier;\n"
                        "}\n";
    assert_int_equal(acg_kernel_register(&bad), ACG_OK);
    acg_device *dev;
    assert_int_equal(acg_device_open(tc_spec(), &dev), ACG_OK);
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

/* ---- the calling convention, checked when a kernel is loaded ----------------------------- */

/* One program, as a file of an engine's kernels would be: the good kernel and each mistake. */
static const char convention_cl[] =
    "kernel void tcl_good(global float *y, ulong y_off, float a) {\n"
    "    ((global float *)((global char *)y + y_off))[get_global_id(0)] = a;\n"
    "}\n"
    "kernel void tcl_no_offset(global float *y, float a) { y[get_global_id(0)] = a; }\n"
    "kernel void tcl_int_scalar(global float *y, ulong y_off, int a) {\n"
    "    ((global float *)((global char *)y + y_off))[get_global_id(0)] = (float)a;\n"
    "}\n"
    "kernel void tcl_extra(global float *y, ulong y_off, float a, uint n) {\n"
    "    ((global float *)((global char *)y + y_off))[get_global_id(0)] = a + (float)n;\n"
    "}\n"
    "kernel void tcl_short(global float *y, ulong y_off) { y[get_global_id(0)] = 0.0f; }\n"
    "kernel void tcl_scalar_first(float a, global float *y, ulong y_off) {\n"
    "    y[get_global_id(0)] = a;\n"
    "}\n"
    "kernel void tcl_local(local float *y, ulong y_off, float a) { y[get_global_id(0)] = a; }\n"
    "kernel void tcl_two_pointers(global float *y, global float *x, float a) {\n"
    "    y[get_global_id(0)] = x[get_global_id(0)] + a;\n"
    "}\n";

/* Each kernel of convention_cl is registered as one buffer and one float, y[i] = a; every
 * mistake is refused at the lookup with what acg_last_error() then says. */
static const struct {
    const char *name;
    const char *message;
} convention_cases[] = {
    {"tcl_no_offset",
     "acg_kernel_get(tcl_no_offset): OpenCL kernel tcl_no_offset parameter 1 (float a) is a "
     "float, where acg passes buffer argument 0's byte offset (ulong): each buffer argument is "
     "a __global pointer followed by a ulong offset"},
    {"tcl_int_scalar",
     "acg_kernel_get(tcl_int_scalar): OpenCL kernel tcl_int_scalar parameter 2 (int a) is an "
     "int, where acg passes scalar argument 1 (float): each scalar argument is one parameter of "
     "its type (int, uint, long, ulong, float)"},
    {"tcl_extra",
     "acg_kernel_get(tcl_extra): OpenCL kernel tcl_extra has 4 parameters, acg passes 3 for "
     "the definition's arguments (buffer, float): each buffer argument is a __global pointer "
     "followed by a ulong offset, each scalar argument is one parameter of its type (int, uint, "
     "long, ulong, float)"},
    {"tcl_short", "acg_kernel_get(tcl_short): OpenCL kernel tcl_short has 2 parameters, acg "
                  "passes 3 for the definition's arguments (buffer, float)"},
    {"tcl_scalar_first",
     "OpenCL kernel tcl_scalar_first parameter 0 (float a) is a float, where acg passes buffer "
     "argument 0 (a __global pointer)"},
    {"tcl_local",
     "OpenCL kernel tcl_local parameter 0 (__local float* y) is a __local pointer, where acg "
     "passes buffer argument 0 (a __global pointer)"},
    {"tcl_two_pointers",
     "OpenCL kernel tcl_two_pointers parameter 1 (__global float* x) is a __global pointer, "
     "where acg passes buffer argument 0's byte offset (ulong)"},
};

static acg_kernel_desc convention_desc(const char *name) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = name;
    d.n_args = 2;
    d.types[0] = ACG_ARG_BUFFER;
    d.types[1] = ACG_ARG_F32;
    d.bytes_per_item[0] = 4;
    d.flags = ACG_KERNEL_ELEMENTWISE;
    d.opencl.source = convention_cl;
    return d;
}

/* A kernel whose parameters are not acg's convention is refused by acg_kernel_get, naming the
 * kernel, the parameter and what acg passes there, before anything could launch or capture it;
 * again at the next lookup, with nothing of it left loaded. A lookup inside a capture is
 * refused the same way and leaves the capture as it was. The good kernel of the same program
 * (one build with the parameter info) loads and runs. */
static void test_convention_refused_at_load(void **state) {
    (void)state;
    const size_t n_cases = sizeof convention_cases / sizeof convention_cases[0];
    acg_kernel_desc good = convention_desc("tcl_good");
    TC_OK(acg_kernel_register(&good));
    for (size_t i = 0; i < n_cases; i++) {
        acg_kernel_desc d = convention_desc(convention_cases[i].name);
        TC_OK(acg_kernel_register(&d));
    }
    acg_device *dev;
    TC_OK(acg_device_open(tc_spec(), &dev));
    acg_kernel *k = NULL;
    for (size_t i = 0; i < n_cases; i++) {
        for (int attempt = 0; attempt < 2; attempt++) {
            TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_get(dev, convention_cases[i].name, &k));
            TC_LAST_ERROR_HAS(convention_cases[i].message);
        }
    }

    acg_stream *s;
    acg_buffer *y;
    TC_OK(acg_stream_create(dev, &s));
    TC_OK(acg_buffer_alloc(dev, 64 * sizeof(float), &y));
    acg_kernel *ok;
    TC_OK(acg_kernel_get(dev, "tcl_good", &ok));
    acg_arg args[] = {acg_arg_buffer(y, 0), acg_arg_f32(3.0f)};
    acg_dims dims = acg_dims_1d(64);
    if (acg_device_get_capability(dev)->graphs) {
        acg_graph *g = NULL;
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_OK(acg_kernel_launch(s, ok, &dims, args, 2));
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_get(dev, "tcl_no_offset", &k));
        TC_LAST_ERROR_HAS(convention_cases[0].message);
        TC_OK(acg_stream_end_capture(s, &g));
        TC_OK(acg_graph_launch(g, s));
        TC_OK(acg_stream_synchronize(s));
        TC_OK(acg_graph_destroy(g));
    } else {
        TC_OK(acg_kernel_launch(s, ok, &dims, args, 2));
    }
    TC_EXPECT_FLOATS(s, y, 64, 3.0f);
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_stream_destroy(s));
    for (size_t i = 0; i < n_cases; i++) {
        TC_OK(acg_kernel_unregister(convention_cases[i].name)); /* none stayed loaded */
    }
    TC_OK(acg_device_close(dev));
    TC_OK(acg_kernel_unregister("tcl_good"));
}

/* PoCL offers the extension at 0.9.0 without mutable dispatch: graphs yes, update no, and the
 * capability says why in its detail. */
static void test_capability_reports_extension(void **state) {
    tc_fixture *f = *state;
    const acg_capability *cap = acg_device_get_capability(f->dev);
    assert_non_null(strstr(cap->detail, "cl_khr_command_buffer"));
    if (cap->graphs) {
        assert_non_null(strstr(cap->detail, "graphs:"));
    } else {
        assert_non_null(strstr(cap->detail, "no graphs"));
    }
    if (!cap->graph_update) {
        assert_non_null(strstr(cap->detail, "capture again"));
    }
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

#define N BS_N

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

static void rig_open(rig *r) {
    memset(r, 0, sizeof *r);
    TC_OK(acg_device_open(tc_spec(), &r->dev));
    TC_OK(acg_kernel_get(r->dev, "fill_f32", &r->fill));
    TC_OK(acg_buffer_alloc(r->dev, N * sizeof(float), &r->x));
    TC_OK(acg_stream_create(r->dev, &r->s));
    TC_OK(acg_event_create(r->dev, &r->ev));
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(r->s, &h));
    assert_int_equal(h.kind, ACG_NATIVE_OPENCL_QUEUE);
    r->queue = (cl_command_queue)h.handle;
    cl_context ctx = NULL;
    assert_int_equal(clGetCommandQueueInfo(r->queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL),
                     CL_SUCCESS);
    cl_int err = CL_SUCCESS;
    r->user = clCreateUserEvent(ctx, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clEnqueueBarrierWithWaitList(r->queue, 1, &r->user, &r->gate), CL_SUCCESS);
    TC_OK(bs_fill(r->s, r->fill, r->x, N, 1.0f));
    TC_OK(acg_event_record(r->ev, r->s));
    assert_int_equal(clEnqueueMarkerWithWaitList(r->queue, 0, NULL, &r->behind), CL_SUCCESS);
    assert_int_equal(acg_stream_query(r->s), ACG_NOT_READY); /* held by the gate */
    TC_OK(acg_device_get_async_error(r->dev));               /* healthy, with work queued */
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

/* Destroys acg's objects (each must succeed, on a lost device too), closes the device and
 * releases the engine's events. */
static void rig_close(rig *r) {
    TC_OK(acg_event_destroy(r->ev));
    TC_OK(acg_stream_destroy(r->s));
    TC_OK(acg_buffer_free(r->x));
    TC_OK(acg_device_close(r->dev));
    clReleaseEvent(r->behind);
    clReleaseEvent(r->gate);
    clReleaseEvent(r->user);
}

/* The rig, its engine's user event failed. Where a fault may not be provoked here, or the
 * implementation runs what is queued behind a failed command (so nothing faults: the rig is
 * taken down whole), the case is skipped, saying why. */
static void rig_open_faulted(rig *r) {
    const char *why = getenv("ACG_TEST_NO_OPENCL_FAULT");
    if (why != NULL && *why != '\0') {
        print_message("skipped: %s\n", why);
        skip();
    }
    rig_open(r);
    if (!rig_fault(r)) {
        TC_OK(acg_stream_synchronize(r->s));
        rig_close(r);
        print_message("skipped: this OpenCL implementation runs the commands queued behind one "
                      "that terminated abnormally, so no test can make acg's commands fault\n");
        skip();
    }
}

/* The rig's device was lost to a fault whose detail names `first`: every call that would queue
 * work, wait, allocate or create fails fast naming it (the poll too, every time); every destroy
 * succeeds, and so does the close; the device opened again works. */
static void rig_lost(rig *r, const char *first) {
    float host[N];
    BS_EXPECT_LOST(bs_fill(r->s, r->fill, r->x, N, 5.0f), first);
    BS_EXPECT_LOST(acg_copy_d2h(r->s, host, r->x, 0, sizeof host), first);
    bs_expect_lost_device(r->dev, r->s, r->ev, first);
    rig_close(r);
    tc_expect_device_works(tc_spec());
}

/* The rig's fault met by the stream's synchronize (poll false) or by the device's poll: it says
 * ACG_ERR_DEVICE_LOST with `first`, and the device is latched from then on (rig_lost). */
static void expect_lost_by(bool poll, const char *first) {
    rig r;
    rig_open_faulted(&r);
    TC_EXPECT_HAS(ERR_DEVICE_LOST,
                  poll ? acg_device_get_async_error(r.dev) : acg_stream_synchronize(r.s), first);
    rig_lost(&r, first);
}

/* The stream's synchronize meets the fault (clFinish itself says nothing: its latest command's
 * execution status does) and reports it. */
static void test_device_lost_synchronize(void **state) {
    (void)state;
    expect_lost_by(
        false, "acg_stream_synchronize: the stream's latest command ended with execution status");
}

/* A fault only the poll sees: nothing waited for it yet; acg_device_get_async_error reads the
 * stream's latest command's status without waiting. */
static void test_device_lost_poll(void **state) {
    (void)state;
    expect_lost_by(true, "acg_device_get_async_error: a stream's latest command ended with "
                         "execution status");
}

/* ---- native objects ----------------------------------------------------------------------- */

/* A launch whose clSetKernelArg fails (no loaded kernel should: acg_kernel_get compared its
 * parameters) names the kernel, the parameter and what acg passed, not the call's source. */
static void test_set_args_names_parameter(void **state) {
    tc_fixture *f = *state;
    acg_buffer *y = tc_buffer(f->dev, N * sizeof(float));
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    acg_native_buffer nb = ACG_NATIVE_BUFFER_INIT;
    TC_OK(acg_device_get_native(f->dev, &nd));
    TC_OK(acg_buffer_get_native(y, &nb));
    const char *src = "kernel void tcl_raw(global float *y, float a) { y[get_global_id(0)] = a; }";
    cl_int err = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource((cl_context)nd.context, 1, &src, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_device_id id = (cl_device_id)nd.device;
    assert_int_equal(clBuildProgram(p, 1, &id, "-cl-std=CL1.2", NULL, NULL), CL_SUCCESS);
    cl_kernel k = clCreateKernel(p, "tcl_raw", &err);
    assert_int_equal(err, CL_SUCCESS);
    acg__karg args[2] = {{.type = ACG_ARG_BUFFER}, {.type = ACG_ARG_F32}};
    args[0].value.buf.mem = acg__ocl_bk_mem((cl_mem)nb.handle);
    args[1].value.f32 = 1.0f;
    TC_EXPECT(ERR_DEVICE, acg__ocl_set_args(k, "tcl_raw", args, 2, "acg_kernel_launch"));
    TC_LAST_ERROR_HAS("acg_kernel_launch: clSetKernelArg(OpenCL kernel tcl_raw parameter 1, 8 "
                      "bytes for buffer argument 0's byte offset (ulong)) failed with "
                      "CL_INVALID_ARG_SIZE (-51)");
    clReleaseKernel(k);
    clReleaseProgram(p);
    TC_OK(acg_buffer_free(y));
}

/* The foreign half of test_native_foreign_work: acg's axpy_f32, built by the engine itself. */
static const char foreign_cl[] =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "kernel void engine_axpy(global float *y, ulong y_off, global float *x, ulong x_off,\n"
    "                        float a) {\n"
    "    global float *yy = (global float *)((global char *)y + y_off);\n"
    "    global float *xx = (global float *)((global char *)x + x_off);\n"
    "    size_t i = get_global_id(0);\n"
    "    yy[i] = a * xx[i] + yy[i];\n"
    "}\n";

#define VIEW_OFF (16 * sizeof(float)) /* where the views start in their buffers */
#define WHOLE (VIEW_OFF + N * sizeof(float) + 64)

/* The engine's own work on acg's memory through the stream's queue: a fill, a write and a
 * kernel of its own program, built on acg's context, each given a view's cl_mem and byte
 * offset, and declared as foreign work. Its results are byte for byte those of acg's fill, copy
 * and axpy_f32 on views at the same places, the bytes around the views untouched alike. The
 * native device is the queue's context and device; foreign work still invalidates a capture. */
static void test_native_foreign_work(void **state) {
    tc_fixture *f = *state;
    acg_device *dev = f->dev;
    acg_stream *s = f->s;
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(dev, &nd));
    assert_int_equal(nd.kind, ACG_NATIVE_OPENCL_CONTEXT);
    const char *colon = strchr(tc_spec(), ':'); /* the device's index: "opencl" is opencl:0 */
    assert_int_equal(nd.ordinal, colon != NULL ? atoi(colon + 1) : 0);
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(s, &h));
    cl_command_queue q = (cl_command_queue)h.handle;
    cl_context ctx = NULL;
    cl_device_id id = NULL;
    cl_platform_id platform = NULL;
    assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL),
                     CL_SUCCESS);
    assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof id, &id, NULL), CL_SUCCESS);
    assert_int_equal(clGetDeviceInfo(id, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL),
                     CL_SUCCESS);
    assert_ptr_equal(nd.context, ctx);
    assert_ptr_equal(nd.device, id);
    assert_ptr_equal(nd.platform, platform);

    /* y and x of acg's work (index 0) and of the engine's (1), each a view inside a buffer. */
    acg_buffer *whole[2][2], *y[2], *x[2];
    for (int e = 0; e < 2; e++) {
        for (int b = 0; b < 2; b++) {
            TC_OK(acg_buffer_alloc(dev, WHOLE, &whole[e][b]));
            TC_OK(acg_fill(s, whole[e][b], 0, WHOLE, 0x7fc0dead, 4));
        }
        TC_OK(acg_buffer_create_view(whole[e][0], VIEW_OFF, N * sizeof(float), &y[e]));
        TC_OK(acg_buffer_create_view(whole[e][1], VIEW_OFF, N * sizeof(float), &x[e]));
    }
    acg_native_buffer ny = ACG_NATIVE_BUFFER_INIT, nx = ACG_NATIVE_BUFFER_INIT;
    acg_native_buffer nroot = ACG_NATIVE_BUFFER_INIT;
    TC_OK(acg_buffer_get_native(y[1], &ny));
    TC_OK(acg_buffer_get_native(x[1], &nx));
    TC_OK(acg_buffer_get_native(whole[1][0], &nroot));
    assert_int_equal(ny.kind, ACG_NATIVE_OPENCL_MEM);
    assert_ptr_equal(ny.handle, nroot.handle); /* a view is its allocation's cl_mem */
    assert_int_equal(ny.offset, VIEW_OFF);
    assert_int_equal(ny.address, 0);
    assert_int_equal(ny.bytes, N * sizeof(float));
    assert_int_equal(nroot.offset, 0);
    assert_int_equal(nroot.bytes, WHOLE);
    cl_context mem_ctx = NULL;
    assert_int_equal(
        clGetMemObjectInfo((cl_mem)ny.handle, CL_MEM_CONTEXT, sizeof mem_ctx, &mem_ctx, NULL),
        CL_SUCCESS);
    assert_ptr_equal(mem_ctx, ctx);

    float host[N];
    for (int i = 0; i < N; i++) {
        host[i] = (float)i * 0.37f - 11.0f;
    }
    const float two = 2.0f, a = 0.3f;
    uint32_t two_bits;
    memcpy(&two_bits, &two, sizeof two_bits);

    /* acg's way. */
    acg_kernel *axpy;
    TC_OK(acg_kernel_get(dev, "axpy_f32", &axpy));
    TC_OK(acg_fill(s, y[0], 0, N * sizeof(float), two_bits, 4));
    TC_OK(acg_copy_h2d(s, x[0], 0, host, sizeof host));
    acg_arg args[] = {acg_arg_buffer(y[0], 0), acg_arg_buffer(x[0], 0), acg_arg_f32(a)};
    acg_dims dims = acg_dims_1d(N);
    TC_OK(acg_kernel_launch(s, axpy, &dims, args, 3));

    /* The engine's way, on the same stream's queue. */
    cl_int err = CL_SUCCESS;
    const char *src = foreign_cl;
    cl_program p = clCreateProgramWithSource((cl_context)nd.context, 1, &src, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clBuildProgram(p, 1, &id, "-cl-std=CL1.2", NULL, NULL), CL_SUCCESS);
    cl_kernel k = clCreateKernel(p, "engine_axpy", &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem ym = (cl_mem)ny.handle, xm = (cl_mem)nx.handle;
    cl_ulong yo = ny.offset, xo = nx.offset;
    assert_int_equal(clEnqueueFillBuffer(q, ym, &two, sizeof two, yo, ny.bytes, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clEnqueueWriteBuffer(q, xm, CL_TRUE, xo, sizeof host, host, 0, NULL, NULL),
                     CL_SUCCESS);
    acg_access writes[] = {{y[1], 0, 0, ACG_ACCESS_WRITE}, {x[1], 0, 0, ACG_ACCESS_WRITE}};
    TC_OK(acg_stream_declare_foreign(s, "engine fill and write", writes, 2));
    assert_int_equal(clSetKernelArg(k, 0, sizeof ym, &ym), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof yo, &yo), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 2, sizeof xm, &xm), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 3, sizeof xo, &xo), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 4, sizeof a, &a), CL_SUCCESS);
    size_t global = N;
    assert_int_equal(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL),
                     CL_SUCCESS);
    acg_access axpy_acc[] = {{y[1], 0, 0, ACG_ACCESS_READ_WRITE}, {x[1], 0, 0, ACG_ACCESS_READ}};
    TC_OK(acg_stream_declare_foreign(s, "engine_axpy", axpy_acc, 2));

    /* Read after the engine's work in stream order: each whole buffer, byte for byte. */
    static uint8_t back[2][2][WHOLE];
    for (int e = 0; e < 2; e++) {
        for (int b = 0; b < 2; b++) {
            TC_OK(acg_copy_d2h(s, back[e][b], whole[e][b], 0, WHOLE));
        }
    }
    assert_memory_equal(back[0][0], back[1][0], WHOLE);
    assert_memory_equal(back[0][1], back[1][1], WHOLE);
    float y0;
    memcpy(&y0, back[1][0] + VIEW_OFF, sizeof y0);
    assert_true(y0 == a * host[0] + two); /* the work ran, where the view is */

    /* Foreign work inside a capture would run once, at capture, never at replay. */
    const acg_capability *cap = acg_device_get_capability(dev);
    if (cap->graphs && !cap->native_capture) {
        acg_graph *g = NULL;
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_EXPECT(ERR_CAPTURE_INVALIDATED,
                  acg_stream_declare_foreign(s, "engine_axpy", axpy_acc, 2));
        TC_LAST_ERROR_HAS("never at replay");
        TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(s, &g));
    }
    clReleaseKernel(k);
    clReleaseProgram(p);
    TC_OK(acg_stream_synchronize(s));
    for (int e = 0; e < 2; e++) {
        TC_OK(acg_buffer_free(y[e]));
        TC_OK(acg_buffer_free(x[e]));
        TC_OK(acg_buffer_free(whole[e][0]));
        TC_OK(acg_buffer_free(whole[e][1]));
    }
}

/* ---- graphs: per-node update, pinned memory at replay ------------------------------------ */

/* Without mutable dispatch (PoCL) a recorded command cannot change: the capability says no
 * per-node update, acg_graph_update_kernel_node refuses, and the graph replays as captured. */
static void test_node_update_unsupported(void **state) {
    tc_fixture *f = *state;
    const acg_capability *cap = acg_device_get_capability(f->dev);
    assert_int_equal(cap->graph_node_update, cap->graph_update);
    assert_int_equal(cap->graph_node_update_grid, cap->graph_update);
    if (!cap->graphs || cap->graph_update) {
        tc_skip("%s", cap->graphs ? "the device has mutable dispatch" : "the device has no graphs");
    }
    assert_false(cap->graph_node_update);
    assert_false(cap->graph_node_update_grid);
    acg_buffer *y = tc_buffer(f->dev, N * sizeof(float));
    acg_buffer *z = tc_buffer(f->dev, N * sizeof(float));
    acg_graph *g;
    TC_OK(acg_stream_begin_capture(f->s, NULL));
    TC_OK(tc_fill(f->s, &f->k, y, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->s, &g));
    acg_arg args[] = {acg_arg_buffer(z, 0), acg_arg_f32(2.0f)};
    TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update_kernel_node(g, 0, NULL, args, 2));
    TC_LAST_ERROR_HAS("cannot update a graph's nodes (capability graph_node_update)");
    acg_dims dims = acg_dims_1d(N / 2);
    TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update_kernel_node(g, 0, &dims, args, 2));
    TC_OK(acg_fill(f->s, z, 0, N * sizeof(float), 0, 4));
    TC_OK(acg_graph_launch(g, f->s));
    TC_EXPECT_FLOATS(f->s, y, N, 1.0f);
    TC_EXPECT_FLOATS(f->s, z, N, 0.0f);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_buffer_free(z));
}

/* A captured copy from pinned memory is a copy from the buffer behind it, which a replay reads
 * as it is then: bytes written into the pinned memory between replays arrive, and the captured
 * copy back to pinned memory brings them out. PoCL's memory is the host's, so it says so. */
static void test_pinned_read_at_replay(void **state) {
    tc_fixture *f = *state;
    const acg_capability *cap = acg_device_get_capability(f->dev);
    if (cap->graphs && cap->host_cpu) {
        assert_true(cap->graph_pinned_replay);
    }
    if (!cap->graph_pinned_replay) {
        tc_skip("the device's captured copies read pinned memory as captured");
    }
    bs_expect_pinned_replay(f->dev);
}

#define T(test) TC_FIXTURE_CASE(test)
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_version_dispatch), cmocka_unit_test(test_build_failure_reports_log),
    T(test_capability_reports_extension),    cmocka_unit_test(test_convention_refused_at_load),
    T(test_set_args_names_parameter),        T(test_native_foreign_work),
    T(test_node_update_unsupported),         T(test_pinned_read_at_replay),
    cmocka_unit_test(test_error_map),        cmocka_unit_test(test_device_lost_synchronize),
    cmocka_unit_test(test_device_lost_poll),
};
#undef T

TC_MAIN("test_opencl_backend", tests)
