/* opencl.c — the opencl backend: devices of every platform, queues as streams, markers as
 * events, and kernels built per device from the OpenCL C of their definitions. */
#include <stdio.h>
#include <string.h>

#include "backends/opencl/opencl.h"

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
    cl_bool available = CL_FALSE;
    cl_ulong mem = 0;
    cl_device_type type = 0;
    char pname[96] = "", pversion[256] = "";
    clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof out->name, out->name, NULL);
    clGetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
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
    ocl_device *d = acg__calloc(1, sizeof *d);
    if (d == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
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

/* Idle when the latest command completed (an in-order queue completes in order). */
static acg_status ocl_stream_query(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_query";
    ocl_stream *s = acg__ocl_stream(stream);
    acg_status st = ACG_OK;
    if (s->native_used) {
        /* The engine's own commands may follow acg's latest: a marker covers them too. */
        cl_event marker = NULL;
        OCL_CHECK(clEnqueueMarkerWithWaitList(s->queue, 0, NULL, &marker), fn, out);
        acg__ocl_track(s, marker);
    }
    cl_event last = acg__ocl_last(s);
    if (last == NULL) {
        return ACG_OK;
    }
    OCL_CHECK_SYNC(clFlush(s->queue), fn, out_release);
    st = acg__ocl_event_status(last, fn, "the stream's latest command");
out_release:
    clReleaseEvent(last);
out:
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
    acg_status st = ACG_OK;
    if (s->native_used) {
        /* The engine may have queued its own commands after acg's latest: a marker covers
         * everything queued so far on the in-order queue. */
        cl_event marker = NULL;
        OCL_CHECK(clEnqueueMarkerWithWaitList(s->queue, 0, NULL, &marker), fn, out_early);
        acg__ocl_track(s, marker);
    }
    cl_event ev = acg__ocl_last(s);
    if (ev != NULL) {
        /* Queries and waits from the host must see it progress without a later flush. */
        OCL_CHECK_SYNC(clFlush(s->queue), fn, out);
    }
    pthread_mutex_lock(&e->lock);
    cl_event old = e->ev;
    e->ev = ev;
    ev = old;
    pthread_mutex_unlock(&e->lock);
out:
    if (ev != NULL) {
        clReleaseEvent(ev);
    }
    return st;
out_early:
    return st;
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
static cl_event event_marker(ocl_event *e) {
    pthread_mutex_lock(&e->lock);
    cl_event ev = e->ev;
    if (ev != NULL) {
        clRetainEvent(ev);
    }
    pthread_mutex_unlock(&e->lock);
    return ev;
}

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

static acg_status ocl_event_query(acg__bk_event *event) {
    cl_event ev = event_marker(oevent(event));
    if (ev == NULL) {
        return ACG_OK;
    }
    acg_status st = acg__ocl_event_status(ev, "acg_event_query", "the command recorded");
    clReleaseEvent(ev);
    return st;
}

static acg_status ocl_event_synchronize(acg__bk_event *event) {
    cl_event ev = event_marker(oevent(event));
    if (ev == NULL) {
        return ACG_OK;
    }
    cl_int err = clWaitForEvents(1, &ev);
    acg_status st = err == CL_SUCCESS
                        ? ACG_OK
                        : acg__ocl_wait_error(err, ev, "acg_event_synchronize", "clWaitForEvents");
    clReleaseEvent(ev);
    return st;
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* The program built from src (d->lock held): one per device for each distinct source, so the
 * kernels of one file (the model's, say) share a build. A failure carries the build log and is
 * not kept, so a later lookup reports it again. */
static acg_status find_program(ocl_device *d, const char *kernel, const char *src,
                               cl_program *out) {
    static const char fn[] = "acg_kernel_get";
    for (uint32_t i = 0; i < d->n_programs; i++) {
        if (strcmp(d->programs[i].source, src) == 0) {
            *out = d->programs[i].program;
            return ACG_OK;
        }
    }
    /* The cache keeps its own copy: a definition may be unregistered when no kernel of this
     * device was loaded from it, while its program stays here until the device closes. */
    size_t len = strlen(src) + 1;
    char *copy = acg__alloc(len);
    if (copy == NULL || !acg__grow((void **)&d->programs, &d->cap_programs, d->n_programs + 1,
                                   sizeof *d->programs)) {
        acg__free(copy);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    memcpy(copy, src, len);
    cl_int err = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource(d->ctx, 1, &src, NULL, &err);
    if (err != CL_SUCCESS) {
        acg__free(copy);
        return acg__ocl_error(err, fn, "clCreateProgramWithSource");
    }
    /* Division and sqrt may otherwise be off by ulps, and results must match the cpu's bit for
     * bit; the option is only valid where the device offers it. */
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    const char *options = fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
                              ? "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"
                              : "-cl-std=CL1.2";
    if (!(fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)) {
        acg__log(ACG_LOG_INFO, "opencl: the device rounds float division and sqrt its own way: "
                               "results may differ from the cpu backend's in the last bits");
    }
    err = clBuildProgram(p, 1, &d->id, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[1536] = "";
        clGetProgramBuildInfo(p, d->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        log[sizeof log - 1] = '\0';
        clReleaseProgram(p);
        acg__free(copy);
        return acg__error(ACG_ERR_DEVICE,
                          "%s: building the OpenCL C of kernel %s failed (clBuildProgram: %d); "
                          "build log:\n%s",
                          fn, kernel, (int)err, log);
    }
    d->programs[d->n_programs++] = (struct ocl_program){copy, p};
    *out = p;
    return ACG_OK;
}

static acg_status ocl_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                                  acg__bk_kernel **out) {
    static const char fn[] = "acg_kernel_get";
    ocl_device *d = acg__ocl_dev(dev);
    if (def->d.opencl.source == NULL) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: kernel %s has no code for the opencl backend (its definition "
                          "sets no opencl.source)",
                          fn, def->name);
    }
    cl_program program = NULL;
    pthread_mutex_lock(&d->lock);
    acg_status st = find_program(d, def->name, def->d.opencl.source, &program);
    pthread_mutex_unlock(&d->lock);
    if (st != ACG_OK) {
        return st;
    }
    ocl_kernel *k = acg__calloc(1, sizeof *k);
    if (k == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    cl_int err = CL_SUCCESS;
    k->kernel = clCreateKernel(program, def->d.opencl.name, &err);
    if (err != CL_SUCCESS) {
        acg__free(k);
        return acg__ocl_error(err, fn, def->d.opencl.name);
    }
    k->program = program;
    k->name = def->d.opencl.name; /* the definition outlives the kernel */
    pthread_mutex_init(&k->lock, NULL);
    *out = acg__ocl_bk_kernel(k);
    return ACG_OK;
}

static void ocl_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel) {
    ACG__UNUSED(dev);
    ocl_kernel *k = acg__ocl_kernel(kernel);
    clReleaseKernel(k->kernel);
    pthread_mutex_destroy(&k->lock);
    acg__free(k);
}

acg_status acg__ocl_set_args(cl_kernel k, const acg__karg *args, uint32_t n, const char *fn) {
    acg_status st = ACG_OK;
    cl_uint idx = 0;
    for (uint32_t i = 0; i < n; i++) {
        const acg__karg *a = &args[i];
        if (a->type == ACG_ARG_BUFFER) {
            cl_mem mem = acg__ocl_mem(a->value.buf.mem);
            cl_ulong off = a->value.buf.offset;
            OCL_CHECK(clSetKernelArg(k, idx++, sizeof mem, &mem), fn, out);
            OCL_CHECK(clSetKernelArg(k, idx++, sizeof off, &off), fn, out);
        } else {
            size_t size = a->type == ACG_ARG_I64 || a->type == ACG_ARG_U64 ? 8 : 4;
            OCL_CHECK(clSetKernelArg(k, idx++, size, &a->value), fn, out);
        }
    }
out:
    return st;
}

cl_uint acg__ocl_dims(const acg_dims *dims, size_t global[3], size_t local[3], bool *has_local) {
    *has_local = dims->local[0] != 0;
    for (int d = 0; d < 3; d++) {
        global[d] = dims->global[d];
        local[d] = dims->local[d] ? dims->local[d] : 1; /* the core allows 0 where global is 1 */
    }
    return dims->global[2] > 1 || dims->local[2] > 1   ? 3
           : dims->global[1] > 1 || dims->local[1] > 1 ? 2
                                                       : 1;
}

static acg_status ocl_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                    const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    static const char fn[] = "acg_kernel_launch";
    ocl_stream *s = acg__ocl_stream(stream);
    ocl_kernel *k = acg__ocl_kernel(kernel);
    size_t global[3], local[3];
    bool has_local;
    cl_uint work_dim = acg__ocl_dims(dims, global, local, &has_local);
    pthread_mutex_lock(&k->lock);
    acg_status st = acg__ocl_set_args(k->kernel, args, n_args, fn);
    if (st == ACG_OK) {
        cl_event ev = NULL;
        OCL_CHECK(clEnqueueNDRangeKernel(s->queue, k->kernel, work_dim, NULL, global,
                                         has_local ? local : NULL, 0, NULL, &ev),
                  fn, out);
        acg__ocl_track(s, ev);
    }
out:
    pthread_mutex_unlock(&k->lock);
    return st;
}

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
    .kernel_load = ocl_kernel_load,
    .kernel_unload = ocl_kernel_unload,
    .kernel_launch = ocl_kernel_launch,
    .graph_instantiate = acg__ocl_graph_instantiate,
    .graph_launch = acg__ocl_graph_launch,
    .graph_update = acg__ocl_graph_update,
    .graph_destroy = acg__ocl_graph_destroy,
    /* Command buffers are built from acg's description: no native capture, and no host node
     * (cl_khr_command_buffer has none), so host functions run eagerly only. */
    .stream_get_native = ocl_stream_get_native,
    /* The execution status of each stream's latest command, asked without waiting. */
    .device_get_async_error = ocl_device_get_async_error,
};
