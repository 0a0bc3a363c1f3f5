/* cuda.c — the cuda backend: devices on their primary contexts, streams, events and memory.
 * The driver is loaded by loader.c, kernels are kernel.c's, graphs graph.c's, collectives
 * nccl.c's. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

static acg_status cu_probe(int *n, const char **reason) {
    static bool loaded;
    static bool ok;
    if (!loaded) {
        ok = acg__cu_load_driver();
        loaded = true;
    }
    if (!ok) {
        *reason = acg__cu.reason;
        return ACG_ERR_UNAVAILABLE;
    }
    int count = 0;
    CUresult r = acg__cu.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        acg__cu_check(r, "cuda", "cuDeviceGetCount");
        snprintf(acg__cu.reason, sizeof acg__cu.reason, "%s", acg_last_error());
        *reason = acg__cu.reason;
        return ACG_ERR_UNAVAILABLE;
    }
    *n = count;
    *reason = count ? "" : "the CUDA driver reports no device";
    return ACG_OK;
}

/* ---- devices ----------------------------------------------------------------------------- */

/* A slot that releases something calls the release even when this fails: the thread may
 * have the context current already, and a release that cannot happen is the driver's to
 * refuse (a skipped one would leak for certain). */
acg_status acg__cu_enter(cu_device *d, const char *fn) { return CU(fn, cuCtxSetCurrent, d->ctx); }

void acg__cu_enter_release(cu_device *d, const char *fn) {
    CU_RELEASE(fn, cuCtxSetCurrent, d->ctx);
}

/* The context's fault, if it holds one: the probe event was never recorded, so its query
 * answers at once, CUDA_SUCCESS unless the context faulted ("this function may also return
 * error codes from previous, asynchronous launches"). No work is waited for. */
static CUresult context_fault(cu_device *d) {
    CUresult r = acg__cu.cuCtxSetCurrent(d->ctx);
    if (r == CUDA_SUCCESS) {
        r = acg__cu.cuEventQuery(d->probe);
    }
    return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}

bool acg__cu_faulted(cu_device *d) { return acg__cu_sticky(context_fault(d)); }

acg_status acg__cu_fault_or(cu_device *d, acg_status st, const char *fn) {
    if (st != ACG_ERR_DEVICE) {
        return st;
    }
    CUresult r = context_fault(d);
    if (!acg__cu_sticky(r)) {
        return st;
    }
    char why[512];
    acg__error_copy(why, sizeof why);
    acg__cu_check(r, fn, "cuEventQuery");
    char fault[256];
    acg__error_copy(fault, sizeof fault);
    return acg__error(ACG_ERR_DEVICE_LOST, "%s (the device faulted: %s)", why, fault);
}

static acg_status describe_device(CUdevice dev, acg_capability *out) {
    static const char fn[] = "acg_device_describe";
    int major = 0, minor = 0, sms = 0;
    size_t mem = 0;
    acg_status st = CU(fn, cuDeviceGetName, out->name, (int)sizeof out->name, dev);
    if (st == ACG_OK) {
        st = CU(fn, cuDeviceTotalMem, &mem, dev);
    }
    if (st == ACG_OK) {
        st =
            CU(fn, cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    }
    if (st == ACG_OK) {
        st =
            CU(fn, cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    }
    if (st == ACG_OK) {
        st = CU(fn, cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    }
    if (st != ACG_OK) {
        return st;
    }
    out->available = true;
    out->pinned_memory = true;
    out->pinned_register = acg__cu.cuMemHostRegister && acg__cu.cuMemHostUnregister;
    out->graphs = acg__cu.capture;
    out->native_capture = acg__cu.capture;
    out->multi_stream_capture = acg__cu.capture;
    out->graph_host_functions = acg__cu.capture;
    out->graph_loops = acg__cu.loops;
    out->graph_update = acg__cu.update;
    /* Any grid the launch itself could have: the blocks are worked out as a launch's are. */
    out->graph_node_update = acg__cu.node_update;
    out->graph_node_update_grid = acg__cu.node_update;
    /* A captured cuMemcpyHtoDAsync is a memcpy node that reads the host memory at replay. */
    out->graph_pinned_replay = acg__cu.capture;
    /* NCCL is loaded here, at the first describe or open, so that the capability tells the
     * truth before any group is attempted (nccl.c). */
    const char *nccl_detail = NULL;
    out->collectives = acg__cu_nccl_load(&nccl_detail);
    out->memory_bytes = mem;
    int n =
        snprintf(out->detail, sizeof out->detail,
                 "CUDA driver %d.%d, compute capability %d.%d, %d SMs; graphs: %s; update: "
                 "%s%s%s%.80s",
                 acg__cu.version / 1000, acg__cu.version % 1000 / 10, major, minor, sms,
                 acg__cu.capture ? "native stream capture" : "unavailable (driver lacks capture)",
                 acg__cu.update ? "cuGraphExecUpdate (foreign work, collectives: one pool)"
                                : "unavailable (capture again)",
                 /* loops are said only when missing: the detail has room for 255 bytes */
                 acg__cu.loops                  ? ""
                 : !acg__cu_loop_kernel_built() ? "; no loops (no nvcc)"
                                                : "; no loops (driver < 12.4)",
                 acg__cu.missing[0] ? "; driver lacks " : "", acg__cu.missing);
    /* The collectives come last: a reason can be long, and what does not fit is cut. */
    size_t len = n < 0 ? 0 : (size_t)n < sizeof out->detail ? (size_t)n : sizeof out->detail - 1;
    snprintf(out->detail + len, sizeof out->detail - len, "; collectives: %s%s%s",
             out->collectives ? "" : "none (", nccl_detail, out->collectives ? "" : ")");
    return ACG_OK;
}

static acg_status cu_describe(int index, acg_capability *out) {
    CUdevice dev = 0;
    acg_status st = CU("acg_device_describe", cuDeviceGet, &dev, index);
    return st == ACG_OK ? describe_device(dev, out) : st;
}

static acg_status cu_device_open(int index, const char *options, acg__bk_device **out) {
    static const char fn[] = "acg_device_open";
    if (*options != '\0') {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the cuda backend takes no device options (\"%s\")", fn, options);
    }
    cu_device *d = acg__new(sizeof *d, fn);
    if (d == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    d->ordinal = index;
    acg_status st = CU(fn, cuDeviceGet, &d->dev, index);
    if (st == ACG_OK) {
        st = CU(fn, cuDevicePrimaryCtxRetain, &d->ctx, d->dev);
    }
    if (st != ACG_OK) {
        goto out_free;
    }
    st = acg__cu_enter(d, fn);
    if (st == ACG_OK) {
        st = CU(fn, cuEventCreate, &d->probe, CU_EVENT_DISABLE_TIMING);
    }
    if (st != ACG_OK) {
        goto out_release;
    }
    pthread_mutex_init(&d->lock, NULL);
    *out = acg__cu_bk_dev(d);
    return ACG_OK;
out_release:
    CU_RELEASE(fn, cuDevicePrimaryCtxRelease, d->dev);
out_free:
    acg__free(d);
    return st;
}

/* Also after a fault: the last release of the primary context destroys it with everything it
 * held, and the next open of the device retains a new one. */
static void cu_device_close(acg__bk_device *dev) {
    static const char fn[] = "acg_device_close";
    cu_device *d = acg__cu_dev(dev);
    acg__cu_enter_release(d, fn);
    for (uint32_t i = 0; i < d->n_libs; i++) {
        CU_RELEASE(fn, cuLibraryUnload, d->libs[i].lib);
        acg__free((void *)d->libs[i].image);
    }
    acg__free(d->libs);
    acg__cu_loop_release(d, fn);
    CU_RELEASE(fn, cuEventDestroy, d->probe);
    CU_RELEASE(fn, cuDevicePrimaryCtxRelease, d->dev);
    pthread_mutex_destroy(&d->lock);
    acg__free(d);
}

/* A poll, safe on any thread at any time: the probe event is the device's own and only read.
 * CUDA keeps the context's first fault and reports it from every call until the context is
 * destroyed, so this answers the same until the device closes; the core latches it. */
static acg_status cu_device_get_async_error(acg__bk_device *dev) {
    static const char fn[] = "acg_device_get_async_error";
    cu_device *d = acg__cu_dev(dev);
    acg_status st = acg__cu_enter(d, fn);
    if (st == ACG_OK) {
        CUresult r = acg__cu.cuEventQuery(d->probe);
        st = acg__cu_check(r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r, fn, "cuEventQuery");
    }
    return st;
}

/* The primary context, which cuBLAS and the runtime use for the device too. */
static acg_status cu_device_get_native(acg__bk_device *dev, acg_native_device *out) {
    cu_device *d = acg__cu_dev(dev);
    out->kind = ACG_NATIVE_CUDA_CONTEXT;
    out->context = d->ctx;
    out->device = NULL;
    out->platform = NULL;
    out->ordinal = (int32_t)d->dev;
    return ACG_OK;
}

static acg_status cu_query_capability(acg__bk_device *dev, acg_capability *out) {
    return describe_device(acg__cu_dev(dev)->dev, out);
}

static acg_status cu_memory_query(acg__bk_device *dev, uint64_t *free_bytes,
                                  uint64_t *total_bytes) {
    static const char fn[] = "acg_device_get_memory_info";
    size_t free_b = 0, total_b = 0;
    acg_status st = acg__cu_enter(acg__cu_dev(dev), fn);
    if (st == ACG_OK) {
        st = CU(fn, cuMemGetInfo, &free_b, &total_b);
    }
    *free_bytes = free_b;
    *total_bytes = total_b;
    return st;
}

/* ---- memory ------------------------------------------------------------------------------ */

static acg_status cu_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **mem) {
    static const char fn[] = "acg_buffer_alloc";
    CUdeviceptr p = 0;
    char call[48];
    snprintf(call, sizeof call, "cuMemAlloc of %zu bytes", size);
    acg_status st = acg__cu_enter(acg__cu_dev(dev), fn);
    if (st == ACG_OK) {
        st = acg__cu_check(acg__cu.cuMemAlloc(&p, size), fn, call);
    }
    if (st == ACG_OK) {
        *mem = acg__cu_bk_mem(p);
    }
    return st;
}

static void cu_buffer_free(acg__bk_device *dev, acg__bk_mem *mem) {
    acg__cu_enter_release(acg__cu_dev(dev), "acg_buffer_free");
    CU_RELEASE("acg_buffer_free", cuMemFree, acg__cu_mem(mem));
}

/* The allocation is the CUdeviceptr itself: the buffer's bytes start offset bytes in. */
static acg_status cu_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                       size_t size, acg_native_buffer *out) {
    ACG__UNUSED(dev);
    ACG__UNUSED(size);
    out->kind = ACG_NATIVE_CUDA_DEVICEPTR;
    out->handle = NULL;
    out->address = (uint64_t)(acg__cu_mem(mem) + offset);
    out->offset = 0;
    return ACG_OK;
}

static acg_status cu_pinned_alloc(acg__bk_device *dev, size_t size, void **ptr) {
    static const char fn[] = "acg_pinned_alloc";
    char call[48];
    snprintf(call, sizeof call, "cuMemHostAlloc of %zu bytes", size);
    acg_status st = acg__cu_enter(acg__cu_dev(dev), fn);
    if (st == ACG_OK) {
        /* Page-aligned, so the core's 64 bytes hold; portable: usable by every context. */
        st = acg__cu_check(acg__cu.cuMemHostAlloc(ptr, size, CU_MEMHOSTALLOC_PORTABLE), fn, call);
    }
    return st;
}

static void cu_pinned_free(acg__bk_device *dev, void *ptr) {
    acg__cu_enter_release(acg__cu_dev(dev), "acg_pinned_free");
    CU_RELEASE("acg_pinned_free", cuMemFreeHost, ptr);
}

static acg_status cu_pinned_register(acg__bk_device *dev, void *ptr, size_t size) {
    static const char fn[] = "acg_pinned_register";
    char call[48];
    snprintf(call, sizeof call, "cuMemHostRegister of %zu bytes", size);
    acg_status st = acg__cu_enter(acg__cu_dev(dev), fn);
    if (st == ACG_OK) {
        /* Portable, as cu_pinned_alloc's memory is. The driver locks whole pages around the
         * range; two registrations sharing a page are refused by it. */
        CUresult r = acg__cu.cuMemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE);
        st = acg__cu_check(r, fn, call);
        if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED || r == CUDA_ERROR_INVALID_VALUE) {
            char why[512]; /* the caller's range, not the device, is at fault */
            snprintf(why, sizeof why, "%s", acg_last_error());
            st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s", why);
        }
    }
    return st;
}

static void cu_pinned_unregister(acg__bk_device *dev, void *ptr) {
    acg__cu_enter_release(acg__cu_dev(dev), "acg_pinned_unregister");
    CU_RELEASE("acg_pinned_unregister", cuMemHostUnregister, ptr);
}

/* ---- streams and events ------------------------------------------------------------------ */

static acg_status cu_stream_create(acg__bk_device *dev, acg__bk_stream **out) {
    static const char fn[] = "acg_stream_create";
    cu_stream *s = acg__new(sizeof *s, fn);
    if (s == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    s->dev = acg__cu_dev(dev);
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        /* Non-blocking: no implicit ordering with the legacy default stream. */
        st = CU(fn, cuStreamCreate, &s->stream, CU_STREAM_NON_BLOCKING);
    }
    if (st != ACG_OK) {
        acg__free(s);
        return st;
    }
    *out = acg__cu_bk_stream(s);
    return ACG_OK;
}

static void cu_stream_destroy(acg__bk_stream *stream) {
    cu_stream *s = acg__cu_stream(stream);
    acg__cu_enter_release(s->dev, "acg_stream_destroy");
    CU_RELEASE("acg_stream_destroy", cuStreamDestroy, s->stream);
    acg__free(s);
}

static acg_status cu_stream_synchronize(acg__bk_stream *stream) {
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, "acg_stream_synchronize");
    return st == ACG_OK ? CU("acg_stream_synchronize", cuStreamSynchronize, s->stream) : st;
}

static acg_status cu_stream_query(acg__bk_stream *stream) {
    cu_stream *s = acg__cu_stream(stream);
    ACG__TRY(acg__cu_enter(s->dev, "acg_stream_query"));
    CUresult r = acg__cu.cuStreamQuery(s->stream);
    return r == CUDA_ERROR_NOT_READY ? ACG_NOT_READY
                                     : acg__cu_check(r, "acg_stream_query", "cuStreamQuery");
}

static acg_status cu_graph_get_native(acg__bk_exec *exec, acg_native_handle *out) {
    out->kind = ACG_NATIVE_CUDA_GRAPH_EXEC;
    out->handle = acg__cu_exec(exec)->exec;
    return ACG_OK;
}

static acg_status cu_stream_get_native(acg__bk_stream *stream, acg_native_handle *out) {
    out->kind = ACG_NATIVE_CUDA_STREAM;
    out->handle = acg__cu_stream(stream)->stream;
    return ACG_OK;
}

typedef struct cu_event {
    cu_device *dev;
    CUevent ev;
} cu_event;

/* The core's event is a cu_event; these are the only casts between them. */
static inline cu_event *cevent(acg__bk_event *e) { return (cu_event *)e; }
static inline acg__bk_event *bk_event(cu_event *e) { return (acg__bk_event *)e; }

static acg_status cu_event_create(acg__bk_device *dev, acg__bk_event **out) {
    static const char fn[] = "acg_event_create";
    cu_event *e = acg__new(sizeof *e, fn);
    if (e == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    e->dev = acg__cu_dev(dev);
    acg_status st = acg__cu_enter(e->dev, fn);
    if (st == ACG_OK) {
        /* Timing makes recording and waiting dearer, and acg never reads it. */
        st = CU(fn, cuEventCreate, &e->ev, CU_EVENT_DISABLE_TIMING);
    }
    if (st != ACG_OK) {
        acg__free(e);
        return st;
    }
    *out = bk_event(e);
    return ACG_OK;
}

static void cu_event_destroy(acg__bk_event *event) {
    cu_event *e = cevent(event);
    acg__cu_enter_release(e->dev, "acg_event_destroy");
    CU_RELEASE("acg_event_destroy", cuEventDestroy, e->ev);
    acg__free(e);
}

static acg_status cu_event_record(acg__bk_event *event, acg__bk_stream *stream) {
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, "acg_event_record");
    return st == ACG_OK ? CU("acg_event_record", cuEventRecord, cevent(event)->ev, s->stream) : st;
}

/* During a capture a wait on an event recorded in it is how CUDA forks and joins streams. */
static acg_status cu_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event) {
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, "acg_stream_wait_event");
    return st == ACG_OK
               ? CU("acg_stream_wait_event", cuStreamWaitEvent, s->stream, cevent(event)->ev, 0)
               : st;
}

static acg_status cu_event_query(acg__bk_event *event) {
    cu_event *e = cevent(event);
    ACG__TRY(acg__cu_enter(e->dev, "acg_event_query"));
    CUresult r = acg__cu.cuEventQuery(e->ev);
    return r == CUDA_ERROR_NOT_READY ? ACG_NOT_READY
                                     : acg__cu_check(r, "acg_event_query", "cuEventQuery");
}

static acg_status cu_event_synchronize(acg__bk_event *event) {
    cu_event *e = cevent(event);
    acg_status st = acg__cu_enter(e->dev, "acg_event_synchronize");
    return st == ACG_OK ? CU("acg_event_synchronize", cuEventSynchronize, e->ev) : st;
}

static acg_status cu_host_launch(acg__bk_stream *stream, acg_host_fn fn, void *user) {
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, "acg_stream_launch_host");
    return st == ACG_OK ? CU("acg_stream_launch_host", cuLaunchHostFunc, s->stream, fn, user) : st;
}

/* ---- copies and fills -------------------------------------------------------------------- */

/* Pageable host memory: the copy must have happened when the slot returns (acg-backend.h). */
static acg_status finish_pageable(cu_stream *s, bool pinned, acg_status st, const char *fn) {
    return st == ACG_OK && !pinned ? CU(fn, cuStreamSynchronize, s->stream) : st;
}

static acg_status cu_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                              const void *src, size_t size, bool src_pinned) {
    static const char fn[] = "acg_copy_h2d";
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        st = CU(fn, cuMemcpyHtoDAsync, acg__cu_mem(dst) + dst_off, src, size, s->stream);
    }
    return finish_pageable(s, src_pinned, st, fn);
}

static acg_status cu_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                              size_t size, bool dst_pinned) {
    static const char fn[] = "acg_copy_d2h";
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        st = CU(fn, cuMemcpyDtoHAsync, dst, acg__cu_mem(src) + src_off, size, s->stream);
    }
    return finish_pageable(s, dst_pinned, st, fn);
}

static acg_status cu_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                              acg__bk_mem *src, size_t src_off, size_t size) {
    static const char fn[] = "acg_copy_d2d";
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, fn);
    return st == ACG_OK ? CU(fn, cuMemcpyDtoDAsync, acg__cu_mem(dst) + dst_off,
                             acg__cu_mem(src) + src_off, size, s->stream)
                        : st;
}

static acg_status cu_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                          uint32_t pattern, uint32_t pattern_size) {
    static const char fn[] = "acg_fill";
    cu_stream *s = acg__cu_stream(stream);
    CUdeviceptr p = acg__cu_mem(dst) + off;
    ACG__TRY(acg__cu_enter(s->dev, fn));
    switch (pattern_size) {
    case 1:
        return CU(fn, cuMemsetD8Async, p, (unsigned char)pattern, size, s->stream);
    case 2:
        return CU(fn, cuMemsetD16Async, p, (unsigned short)pattern, size / 2, s->stream);
    default:
        return CU(fn, cuMemsetD32Async, p, pattern, size / 4, s->stream);
    }
}

/* The cuda backend's variables (src/library.c lists this table with the layers'). */
static const char *const env_names[] = {
    /* the CUDA driver to load (default libcuda.so.1): the tests' test driver */
    "ACG_CUDA_DRIVER",
    /* the NCCL the collectives load (default libnccl.so.2): the tests' test NCCL */
    "ACG_NCCL_LIBRARY",
};
const acg__env_table acg__cuda_env = {"cuda", env_names, sizeof env_names / sizeof env_names[0]};

const acg_backend_i acg__backend_cuda = {
    .version = ACG_BACKEND_VERSION,
    .name = "cuda",
    .probe = cu_probe,
    .describe = cu_describe,
    .device_open = cu_device_open,
    .device_close = cu_device_close,
    .query_capability = cu_query_capability,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_free = cu_buffer_free,
    .pinned_alloc = cu_pinned_alloc,
    .pinned_free = cu_pinned_free,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_synchronize = cu_stream_synchronize,
    .stream_query = cu_stream_query,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait_event = cu_stream_wait_event,
    .event_query = cu_event_query,
    .event_synchronize = cu_event_synchronize,
    .copy_h2d = cu_copy_h2d,
    .copy_d2h = cu_copy_d2h,
    .copy_d2d = cu_copy_d2d,
    .fill = cu_fill,
    .kernel_load = acg__cu_kernel_load,
    .kernel_unload = acg__cu_kernel_unload,
    .kernel_launch = acg__cu_kernel_launch,
    /* Graphs are CUDA's own stream capture: no instantiation from the ledger, which serves only
     * an update that cannot start from the source's capture (graph.c). */
    .graph_launch = acg__cu_graph_launch,
    .graph_update = acg__cu_graph_update,
    .graph_destroy = acg__cu_graph_destroy,
    /* cuGraphExecDestroy of a graph still running frees it when it finishes. */
    .retain_discarded_graphs = false,
    .capture_begin = acg__cu_capture_begin,
    .capture_join = acg__cu_capture_join,
    .capture_end = acg__cu_capture_end,
    .capture_abort = acg__cu_capture_abort,
    .host_launch = cu_host_launch,
    .stream_get_native = cu_stream_get_native,
    .device_get_async_error = cu_device_get_async_error,
    .memory_query = cu_memory_query,
    .graph_upload = acg__cu_graph_upload,
    .graph_get_native = cu_graph_get_native,
    .pinned_register = cu_pinned_register,
    .pinned_unregister = cu_pinned_unregister,
    /* NCCL, where it loads; the capability says collectives (nccl.c). */
    .group_create = acg__cu_group_create,
    .group_destroy = acg__cu_group_destroy,
    .allreduce = acg__cu_allreduce,
    /* An update takes the source graph's own capture where it can (graph.c). */
    .graph_update_from = acg__cu_graph_update_from,
    .buffer_get_native = cu_buffer_get_native,
    .device_get_native = cu_device_get_native,
    /* The kernel node found during capture, set in the exec (graph.c). */
    .graph_update_node = acg__cu_graph_update_node,
    .kernel_check = acg__cu_kernel_check,
    .loop_begin = acg__cu_loop_begin,
    .loop_end = acg__cu_loop_end,
};
