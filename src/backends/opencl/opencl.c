/* opencl.c — the opencl backend: devices of every platform, queues as streams, markers as
 * events, the native objects behind devices, and the backend's table. Kernels are kernel.c's,
 * memory memory.c's, command buffers cmdbuf.c's. */
#include <stdio.h>
#include <string.h>

#include "opencl.h"

#define MAX_DEVICES 64

/* The codes drivers return most, named in details so a reader need not look the number up. */
#define OCL_CODES(X)                                                                               \
    X(CL_DEVICE_NOT_FOUND)                                                                         \
    X(CL_DEVICE_NOT_AVAILABLE)                                                                     \
    X(CL_COMPILER_NOT_AVAILABLE)                                                                   \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                            \
    X(CL_OUT_OF_RESOURCES)                                                                         \
    X(CL_OUT_OF_HOST_MEMORY)                                                                       \
    X(CL_BUILD_PROGRAM_FAILURE)                                                                    \
    X(CL_MAP_FAILURE)                                                                              \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                                \
    X(CL_INVALID_VALUE)                                                                            \
    X(CL_INVALID_DEVICE)                                                                           \
    X(CL_INVALID_CONTEXT)                                                                          \
    X(CL_INVALID_QUEUE_PROPERTIES)                                                                 \
    X(CL_INVALID_COMMAND_QUEUE)                                                                    \
    X(CL_INVALID_MEM_OBJECT)                                                                       \
    X(CL_INVALID_PROGRAM_EXECUTABLE)                                                               \
    X(CL_INVALID_KERNEL)                                                                           \
    X(CL_INVALID_ARG_INDEX)                                                                        \
    X(CL_INVALID_ARG_VALUE)                                                                        \
    X(CL_INVALID_ARG_SIZE)                                                                         \
    X(CL_INVALID_KERNEL_ARGS)                                                                      \
    X(CL_INVALID_WORK_GROUP_SIZE)                                                                  \
    X(CL_INVALID_WORK_ITEM_SIZE)                                                                   \
    X(CL_INVALID_EVENT_WAIT_LIST)                                                                  \
    X(CL_INVALID_EVENT)                                                                            \
    X(CL_INVALID_OPERATION)                                                                        \
    X(CL_INVALID_BUFFER_SIZE)                                                                      \
    X(CL_INVALID_GLOBAL_WORK_SIZE)

static const char *code_name(cl_int err) {
    switch (err) {
#define OCL_CODE_NAME_(code)                                                                       \
    case code:                                                                                     \
        return #code;
        OCL_CODES(OCL_CODE_NAME_)
#undef OCL_CODE_NAME_
    }
    return "OpenCL error";
}

acg_status acg__ocl_error(cl_int err, const char *fn, const char *call) {
    acg_status st = ACG_ERR_DEVICE;
    /* Only clCreateBuffer returns CL_INVALID_BUFFER_SIZE for a size the core lets through (it
     * refuses 0): one past CL_DEVICE_MAX_MEM_ALLOC_SIZE, which is out of memory on every
     * backend. */
    if (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
        err == CL_OUT_OF_RESOURCES || err == CL_INVALID_BUFFER_SIZE) {
        st = ACG_ERR_OUT_OF_MEMORY;
    }
    return acg__error(st, "%s: %s failed with %s (%d)", fn, call, code_name(err), (int)err);
}

acg_status acg__ocl_sync_error(cl_int err, const char *fn, const char *call) {
    if (err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST || err == CL_OUT_OF_RESOURCES) {
        return acg__error(ACG_ERR_DEVICE_LOST, "%s: %s failed with %s (%d): the device faulted", fn,
                          call, code_name(err), (int)err);
    }
    return acg__ocl_error(err, fn, call);
}

/* A negative execution status is the implementation's own code (PoCL: -1), not always one of
 * the API's error codes: it is given as a number. */
acg_status acg__ocl_event_status(cl_event ev, const char *fn, const char *what) {
    cl_int status = CL_COMPLETE;
    acg_status st = ACG_OK;
    OCL_CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL),
              fn, out);
    if (status < 0) {
        return acg__error(ACG_ERR_DEVICE_LOST,
                          "%s: %s ended with execution status %d (terminated abnormally): the "
                          "device faulted",
                          fn, what, (int)status);
    }
    st = status == CL_COMPLETE ? ACG_OK : ACG_NOT_READY;
out:
    return st;
}

acg_status acg__ocl_wait_error(cl_int err, cl_event ev, const char *fn, const char *call) {
    cl_int status = CL_COMPLETE;
    if (err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST &&
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) ==
            CL_SUCCESS &&
        status < 0) {
        return acg__error(ACG_ERR_DEVICE_LOST,
                          "%s: %s failed with %s (%d): the command waited for ended with "
                          "execution status %d (terminated abnormally): the device faulted",
                          fn, call, code_name(err), (int)err, (int)status);
    }
    return acg__ocl_sync_error(err, fn, call);
}

/* ---- the devices of every platform, found once ------------------------------------------ */

static struct {
    cl_platform_id platform;
    cl_device_id device;
} devices[MAX_DEVICES];
static int n_devices;

static acg_status ocl_probe(int *n, const char **reason) {
    static char why[160];
    cl_platform_id platforms[16];
    cl_uint n_platforms = 0;
    cl_int err = clGetPlatformIDs(16, platforms, &n_platforms);
    if (err != CL_SUCCESS || n_platforms == 0) {
        snprintf(why, sizeof why,
                 "no OpenCL platform (clGetPlatformIDs: %d); install an ICD such as "
                 "pocl-opencl-icd",
                 (int)err);
        *reason = why;
        return ACG_ERR_UNAVAILABLE;
    }
    n_devices = 0;
    for (cl_uint p = 0; p < n_platforms && p < 16; p++) {
        cl_device_id ids[MAX_DEVICES];
        cl_uint count = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, ids, &count) !=
            CL_SUCCESS) {
            continue;
        }
        for (cl_uint d = 0; d < count && n_devices < MAX_DEVICES; d++) {
            devices[n_devices].platform = platforms[p];
            devices[n_devices].device = ids[d];
            n_devices++;
        }
    }
    *n = n_devices;
    *reason = n_devices ? "" : "OpenCL platforms report no device";
    return ACG_OK;
}

static void describe_device(cl_platform_id platform, cl_device_id id, const ocl_cmdbuf_api *cb,
                            acg_capability *out) {
    cl_bool available = CL_FALSE, unified = CL_FALSE;
    cl_ulong mem = 0;
    cl_device_type type = 0;
    char pname[96] = "", pversion[256] = "";
    clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof out->name, out->name, NULL);
    clGetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof pversion, pversion, NULL);
    /* "OpenCL 3.0 PoCL 3.1+debian  Linux, ...": what follows a double space is build detail. */
    char *cut = strstr(pversion, "  ");
    if (cut != NULL) {
        *cut = '\0';
    }
    out->available = available == CL_TRUE;
    out->pinned_memory = true;
    out->graphs = cb->abi != OCL_CB_NONE;
    /* Update needs mutable dispatch; without it the caller captures again. */
    out->graph_update = out->graphs && cb->mutable_dispatch;
    /* A node's update is graph_update's (the core's fallback re-records the whole command
     * buffer from the rewritten description), so it comes and goes with it, grid included. */
    out->graph_node_update = out->graph_update;
    out->graph_node_update_grid = out->graph_update;
    /* A captured copy from or to pinned memory is a copy from or to the CL_MEM_ALLOC_HOST_PTR
     * buffer behind it (memory.c): a replay reads or writes that buffer as it is then, and the
     * host's pointer into it is the same storage where the device shares the host's memory
     * (PoCL; integrated GPUs). */
    out->graph_pinned_replay = out->graphs && unified == CL_TRUE;
    /* Forks and joins become sync points inside one command buffer. */
    out->multi_stream_capture = out->graphs;
    out->memory_bytes = mem;
    out->host_cpu = (type & CL_DEVICE_TYPE_CPU) != 0; /* PoCL's pthread device, for one */
    if (snprintf(out->detail, sizeof out->detail, "platform %s (%s); %s", pname, pversion,
                 cb->why) >= (int)sizeof out->detail) {
        /* The detail is a summary: a cut-off platform string is acceptable. */
    }
}

static acg_status ocl_describe(int index, acg_capability *out) {
    ocl_cmdbuf_api cb;
    acg_status st = acg__ocl_cmdbuf_probe(NULL, devices[index].device, &cb);
    if (st == ACG_OK) {
        describe_device(devices[index].platform, devices[index].device, &cb, out);
    }
    return st;
}

acg_status acg__ocl_queue_create(ocl_device *d, cl_command_queue *out, const char *fn) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(d->ctx, d->id, d->cb.queue_props, &err);
    if (err != CL_SUCCESS) {
        return acg__ocl_error(err, fn, "clCreateCommandQueue");
    }
    *out = q;
    return ACG_OK;
}

static acg_status ocl_device_open(int index, const char *options, acg__bk_device **out) {
    static const char fn[] = "acg_device_open";
    if (*options != '\0') {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the opencl backend takes no device options (\"%s\")", fn, options);
    }
    acg_status st = ACG_OK;
    cl_int err = CL_SUCCESS;
    ocl_device *d = acg__new(sizeof *d, fn);
    if (d == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    d->index = index;
    d->platform = devices[index].platform;
    d->id = devices[index].device;
    st = acg__ocl_cmdbuf_probe(d->platform, d->id, &d->cb);
    if (st != ACG_OK) {
        goto out_free;
    }
    OCL_CHECK(clGetDeviceInfo(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof d->max_alloc,
                              &d->max_alloc, NULL),
              fn, out_free);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    d->ctx = clCreateContext(props, 1, &d->id, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        st = acg__ocl_error(err, fn, "clCreateContext");
        goto out_free;
    }
    st = acg__ocl_queue_create(d, &d->aux, fn);
    if (st != ACG_OK) {
        goto out_context;
    }
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->streams_lock, NULL);
    *out = acg__ocl_bk_dev(d);
    return ACG_OK;

out_context:
    clReleaseContext(d->ctx);
out_free:
    acg__free(d);
    return st;
}

static void ocl_device_close(acg__bk_device *dev) {
    ocl_device *d = acg__ocl_dev(dev);
    for (uint32_t i = 0; i < d->n_programs; i++) {
        clReleaseProgram(d->programs[i].program);
        acg__free(d->programs[i].source);
    }
    acg__free(d->programs);
    clReleaseCommandQueue(d->aux);
    clReleaseContext(d->ctx);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->streams_lock);
    acg__free(d->pins);
    acg__free(d);
}

static acg_status ocl_query_capability(acg__bk_device *dev, acg_capability *out) {
    ocl_device *d = acg__ocl_dev(dev);
    describe_device(d->platform, d->id, &d->cb, out);
    return ACG_OK;
}

/* ---- streams and events ------------------------------------------------------------------ */

static acg_status ocl_stream_create(acg__bk_device *dev, acg__bk_stream **out) {
    ocl_stream *s = acg__calloc(1, sizeof *s);
    if (s == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_create: out of memory");
    }
    ocl_device *d = acg__ocl_dev(dev);
    s->dev = d;
    acg_status st = acg__ocl_queue_create(d, &s->queue, "acg_stream_create");
    if (st != ACG_OK) {
        acg__free(s);
        return st;
    }
    pthread_mutex_lock(&d->streams_lock);
    bool room =
        acg__grow((void **)&d->streams, &d->cap_streams, d->n_streams + 1, sizeof *d->streams);
    if (room) {
        d->streams[d->n_streams++] = s;
    }
    pthread_mutex_unlock(&d->streams_lock);
    if (!room) {
        clReleaseCommandQueue(s->queue);
        acg__free(s);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_create: out of memory");
    }
    pthread_mutex_init(&s->last_lock, NULL);
    *out = acg__ocl_bk_stream(s);
    return ACG_OK;
}

static void ocl_stream_destroy(acg__bk_stream *stream) {
    ocl_stream *s = acg__ocl_stream(stream);
    ocl_device *d = s->dev;
    pthread_mutex_lock(&d->streams_lock);
    for (uint32_t i = 0; i < d->n_streams; i++) {
        if (d->streams[i] == s) {
            d->streams[i] = d->streams[--d->n_streams];
            break;
        }
    }
    if (d->n_streams == 0) {
        /* A device without streams holds no array: a create and destroy leave memory as it was. */
        acg__free(d->streams);
        d->streams = NULL;
        d->cap_streams = 0;
    }
    pthread_mutex_unlock(&d->streams_lock);
    acg__ocl_track(s, NULL);
    clReleaseCommandQueue(s->queue);
    pthread_mutex_destroy(&s->last_lock);
    acg__free(s);
}

/* clFinish reports no command's failure (PoCL returns CL_SUCCESS behind one): the latest
 * command's execution status does. A command of an in-order queue that faults fails those
 * queued behind it, which the latest is. */
static acg_status ocl_stream_synchronize(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_synchronize";
    ocl_stream *s = acg__ocl_stream(stream);
    acg_status st = ACG_OK;
    OCL_CHECK_SYNC(clFinish(s->queue), fn, out);
    cl_event last = acg__ocl_last(s);
    if (last != NULL) {
        st = acg__ocl_event_status(last, fn, "the stream's latest command");
        clReleaseEvent(last);
    }
out:
    return st;
}

/* The stream's latest command, retained (NULL: none yet) and flushed: queries and waits from
 * the host must see it progress without a later flush. Once the engine has the queue
 * (native_used) its own commands may follow acg's latest: a marker queued first covers them
 * too. */
static acg_status latest_command(ocl_stream *s, const char *fn, cl_event *out) {
    acg_status st = ACG_OK;
    if (s->native_used) {
        cl_event marker = NULL;
        OCL_CHECK(clEnqueueMarkerWithWaitList(s->queue, 0, NULL, &marker), fn, out);
        acg__ocl_track(s, marker);
    }
    cl_event ev = acg__ocl_last(s);
    if (ev != NULL) {
        OCL_CHECK_SYNC(clFlush(s->queue), fn, out_release);
    }
    *out = ev;
    return ACG_OK;
out_release:
    clReleaseEvent(ev);
out:
    return st;
}

/* Idle when the latest command completed (an in-order queue completes in order). */
static acg_status ocl_stream_query(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_query";
    ocl_stream *s = acg__ocl_stream(stream);
    cl_event last = NULL;
    acg_status st = latest_command(s, fn, &last);
    if (st != ACG_OK || last == NULL) {
        return st;
    }
    st = acg__ocl_event_status(last, fn, "the stream's latest command");
    clReleaseEvent(last);
    return st;
}

/* Asks, without waiting, for the execution status of each stream's latest command: one that
 * terminated abnormally is a device fault (a command faulting fails those queued behind it on
 * its in-order queue, which the latest is; a fault followed by commands queued after it ended
 * is reported by the waits that meet it instead). */
static acg_status ocl_device_get_async_error(acg__bk_device *dev) {
    static const char fn[] = "acg_device_get_async_error";
    ocl_device *d = acg__ocl_dev(dev);
    acg_status st = ACG_OK;
    pthread_mutex_lock(&d->streams_lock);
    for (uint32_t i = 0; i < d->n_streams && (st == ACG_OK || st == ACG_NOT_READY); i++) {
        cl_event last = acg__ocl_last(d->streams[i]);
        if (last != NULL) {
            st = acg__ocl_event_status(last, fn, "a stream's latest command");
            clReleaseEvent(last);
        }
    }
    pthread_mutex_unlock(&d->streams_lock);
    return st == ACG_NOT_READY ? ACG_OK : st;
}

typedef struct ocl_event {
    pthread_mutex_t lock;
    cl_event ev; /* the latest command when recorded; NULL when never recorded */
} ocl_event;

/* The core's event is an ocl_event; these are the only casts between them. */
static inline ocl_event *oevent(acg__bk_event *e) { return (ocl_event *)e; }
static inline acg__bk_event *bk_event(ocl_event *e) { return (acg__bk_event *)e; }

static acg_status ocl_event_create(acg__bk_device *dev, acg__bk_event **out) {
    ACG__UNUSED(dev);
    ocl_event *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_event_create: out of memory");
    }
    pthread_mutex_init(&e->lock, NULL);
    *out = bk_event(e);
    return ACG_OK;
}

static void ocl_event_destroy(acg__bk_event *event) {
    ocl_event *e = oevent(event);
    if (e->ev != NULL) {
        clReleaseEvent(e->ev);
    }
    pthread_mutex_destroy(&e->lock);
    acg__free(e);
}

/* An event stands for the stream's latest command: recording enqueues nothing. */
static acg_status ocl_event_record(acg__bk_event *event, acg__bk_stream *stream) {
    static const char fn[] = "acg_event_record";
    ocl_event *e = oevent(event);
    ocl_stream *s = acg__ocl_stream(stream);
    cl_event ev = NULL;
    ACG__TRY(latest_command(s, fn, &ev));
    acg__ocl_held_set(&e->lock, &e->ev, ev);
    return ACG_OK;
}

/* The context acg created for the device, with its device and platform. */
static acg_status ocl_device_get_native(acg__bk_device *dev, acg_native_device *out) {
    ocl_device *d = acg__ocl_dev(dev);
    out->kind = ACG_NATIVE_OPENCL_CONTEXT;
    out->context = d->ctx;
    out->device = d->id;
    out->platform = d->platform;
    out->ordinal = d->index;
    return ACG_OK;
}

/* The driver's in-order queue. From now on an event record marks the queue's end rather than
 * acg's latest command, so work the engine queues itself is ordered too. */
static acg_status ocl_stream_get_native(acg__bk_stream *stream, acg_native_handle *out) {
    ocl_stream *s = acg__ocl_stream(stream);
    s->native_used = true;
    out->kind = ACG_NATIVE_OPENCL_QUEUE;
    out->handle = s->queue;
    return ACG_OK;
}

/* The event's current command, retained; NULL when never recorded or recorded on an idle
 * stream. */
static cl_event event_marker(ocl_event *e) { return acg__ocl_held_get(&e->lock, &e->ev); }

static acg_status ocl_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event) {
    ocl_stream *s = acg__ocl_stream(stream);
    acg_status st = ACG_OK;
    cl_event ev = event_marker(oevent(event)), barrier = NULL;
    if (ev == NULL) {
        return ACG_OK;
    }
    OCL_CHECK(clEnqueueBarrierWithWaitList(s->queue, 1, &ev, &barrier), "acg_stream_wait_event",
              out);
    acg__ocl_track(s, barrier);
out:
    clReleaseEvent(ev);
    return st;
}

/* The event's command, waited for first with wait: ACG_OK, ACG_NOT_READY (a query of one still
 * running) or the fault it ended with. Never recorded, or recorded on an idle stream: ACG_OK. */
static acg_status event_check(acg__bk_event *event, bool wait) {
    cl_event ev = event_marker(oevent(event));
    if (ev == NULL) {
        return ACG_OK;
    }
    acg_status st;
    if (wait) {
        cl_int err = clWaitForEvents(1, &ev);
        st = err == CL_SUCCESS
                 ? ACG_OK
                 : acg__ocl_wait_error(err, ev, "acg_event_synchronize", "clWaitForEvents");
    } else {
        st = acg__ocl_event_status(ev, "acg_event_query", "the command recorded");
    }
    clReleaseEvent(ev);
    return st;
}

static acg_status ocl_event_query(acg__bk_event *event) { return event_check(event, false); }

static acg_status ocl_event_synchronize(acg__bk_event *event) { return event_check(event, true); }

/* The opencl backend reads no variable of its own (src/library.c lists every backend's table
 * with the layers'). */
const acg__env_table acg__opencl_env = {"opencl", NULL, 0};

const acg_backend_i acg__backend_opencl = {
    .version = ACG_BACKEND_VERSION,
    .name = "opencl",
    .probe = ocl_probe,
    .describe = ocl_describe,
    .device_open = ocl_device_open,
    .device_close = ocl_device_close,
    .query_capability = ocl_query_capability,
    .buffer_alloc = acg__ocl_buffer_alloc,
    .buffer_free = acg__ocl_buffer_free,
    .pinned_alloc = acg__ocl_pinned_alloc,
    .pinned_free = acg__ocl_pinned_free,
    .stream_create = ocl_stream_create,
    .stream_destroy = ocl_stream_destroy,
    .stream_synchronize = ocl_stream_synchronize,
    .stream_query = ocl_stream_query,
    .event_create = ocl_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = ocl_event_record,
    .stream_wait_event = ocl_stream_wait_event,
    .event_query = ocl_event_query,
    .event_synchronize = ocl_event_synchronize,
    .copy_h2d = acg__ocl_copy_h2d,
    .copy_d2h = acg__ocl_copy_d2h,
    .copy_d2d = acg__ocl_copy_d2d,
    .fill = acg__ocl_fill,
    .kernel_load = acg__ocl_kernel_load,
    .kernel_unload = acg__ocl_kernel_unload,
    .kernel_launch = acg__ocl_kernel_launch,
    .graph_instantiate = acg__ocl_graph_instantiate,
    .graph_launch = acg__ocl_graph_launch,
    .graph_update = acg__ocl_graph_update,
    .graph_destroy = acg__ocl_graph_destroy,
    /* Command buffers are built from acg's description: no native capture, and no host node
     * (cl_khr_command_buffer has none), so host functions run eagerly only. */
    .stream_get_native = ocl_stream_get_native,
    /* The execution status of each stream's latest command, asked without waiting. */
    .device_get_async_error = ocl_device_get_async_error,
    /* A buffer is its allocation's cl_mem and a byte offset; the device its context. */
    .buffer_get_native = acg__ocl_buffer_get_native,
    .device_get_native = ocl_device_get_native,
    /* No graph_update_node: without mutable dispatch a recorded command cannot change, and
     * re-recording the whole command buffer is the core's fallback through graph_update. */
};
