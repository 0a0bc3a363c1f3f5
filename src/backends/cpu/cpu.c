/* cpu.c — the cpu backend: device memory is host memory, each stream is a worker thread, and a
 * graph is the captured node list that the worker replays as one queue entry (graph.c). It
 * runs everywhere, and it is the oracle the other backends are compared with. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

typedef struct cpu_event {
    pthread_mutex_t mu;
    cpu_stream *stream; /* referenced while recorded */
    uint64_t seq;
} cpu_event;

/* The core's event type is this file's struct; cpu.h has the other casts. */
static inline cpu_event *cev(acg__bk_event *e) { return (cpu_event *)e; }
static inline acg__bk_event *bk_event(cpu_event *e) { return (acg__bk_event *)e; }

/* ---- device ------------------------------------------------------------------------------ */

static acg_status cpu_probe(int *n_devices, const char **reason) {
    *n_devices = 1;
    *reason = "";
    return ACG_OK;
}

/* The thread count of a device opened without threads=: $ACG_CPU_THREADS, else one per online
 * core (at most CPU_MAX_THREADS). *bad gets the variable's value when it is not a count. */
static uint32_t default_threads(const char **bad) {
    *bad = NULL;
    const char *v = acg__env_get("ACG_CPU_THREADS");
    uint64_t n = 0;
    if (v != NULL && v[0] != '\0') {
        if (acg__parse_u64(v, 1, CPU_MAX_THREADS, &n) == ACG_OK) {
            return (uint32_t)n;
        }
        *bad = v;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores > (long)CPU_MAX_THREADS ? CPU_MAX_THREADS : (uint32_t)cores;
}

/* The capability of a device that splits kernels over `threads` threads; bad_env: a value of
 * ACG_CPU_THREADS that opening the device would refuse. */
static void describe(uint32_t threads, const char *bad_env, acg_capability *out) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (bad_env != NULL) {
        snprintf(out->name, sizeof out->name,
                 "host cpu, %ld core(s), ACG_CPU_THREADS=%.16s refused, a worker thread per "
                 "stream",
                 cores > 0 ? cores : 1, bad_env);
    } else {
        snprintf(out->name, sizeof out->name,
                 "host cpu, %ld core(s), %u thread(s) per kernel, a worker thread per stream",
                 cores > 0 ? cores : 1, threads);
    }
    out->available = true;
    out->host_threads = threads;
    out->pinned_memory = true; /* host memory needs no pinning to be read asynchronously */
    out->pinned_register = true;
    out->graphs = true;
    out->graph_update = true;
    out->graph_node_update = true;
    out->graph_node_update_grid = true;
    out->graph_pinned_replay = true; /* a copy node reads its host pointer when it runs */
    out->multi_stream_capture = true;
    out->graph_host_functions = true;
    out->graph_loops = true; /* a replay's worker runs a loop's body again itself */
    out->collectives = true; /* shared memory among the ranks of one host (collective.c) */
    out->host_cpu = true;
    out->memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    snprintf(out->detail, sizeof out->detail,
             "device memory is host memory; a graph replays as one queue entry of the stream's "
             "worker, which also runs loops; update, of a graph or a node, rewrites node "
             "arguments in place");
}

/* Device memory is host memory: a buffer's native address is its first byte. */
static acg_status cpu_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                        size_t size, acg_native_buffer *out) {
    ACG__UNUSED(dev);
    ACG__UNUSED(size);
    out->kind = ACG_NATIVE_HOST_MEMORY;
    out->address = (uint64_t)(uintptr_t)ptr(mem, offset);
    return ACG_OK;
}

static acg_status cpu_describe(int index, acg_capability *out) {
    ACG__UNUSED(index);
    const char *bad = NULL;
    uint32_t threads = default_threads(&bad);
    describe(threads, bad, out);
    return ACG_OK;
}

/* Whether item is "key=value", and then the value. */
static bool option_is(const char *item, const char *key, const char **value) {
    size_t n = strlen(key);
    *value = item + n + 1;
    return strncmp(item, key, n) == 0 && item[n] == '=';
}

/* Device options: key=value items joined by '&' (capture=native|description, threads=N),
 * each key at most once. */
static acg_status parse_options(const char *options, bool *native, uint32_t *threads) {
    static const char fn[] = "acg_device_open";
    bool seen_capture = false, seen_threads = false;
    for (const char *p = options; *options != '\0'; p++) {
        char item[64]; /* the core keeps options shorter */
        size_t len = strcspn(p, "&");
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        const char *value = NULL;
        bool *seen = NULL;
        if (option_is(item, "capture", &value) &&
            (strcmp(value, "native") == 0 || strcmp(value, "description") == 0)) {
            *native = strcmp(value, "native") == 0;
            seen = &seen_capture;
        } else if (option_is(item, "threads", &value)) {
            uint64_t n = 0;
            if (acg__parse_u64(value, 1, CPU_MAX_THREADS, &n) != ACG_OK) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "%s: cpu option threads=%s is not a whole number in [1, %u]", fn,
                                  value, CPU_MAX_THREADS);
            }
            *threads = (uint32_t)n;
            seen = &seen_threads;
        } else {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: the cpu backend takes capture=native or capture=description "
                              "and threads=N (1..%u), joined by '&', not \"%s\" in \"%s\"",
                              fn, CPU_MAX_THREADS, item, options);
        }
        if (*seen) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: cpu option %.*s is given twice in \"%s\"", fn,
                              (int)(value - 1 - item), item, options);
        }
        *seen = true;
        p += len;
        if (*p == '\0') {
            break;
        }
    }
    return ACG_OK;
}

static acg_status cpu_device_open(int index, const char *options, acg__bk_device **out) {
    ACG__UNUSED(index);
    bool native = false;
    uint32_t threads = 0;
    ACG__TRY(parse_options(options, &native, &threads));
    if (threads == 0) {
        const char *bad = NULL;
        threads = default_threads(&bad);
        if (bad != NULL) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "acg_device_open: ACG_CPU_THREADS=%.64s is not a whole number in "
                              "[1, %u] (the cpu backend's threads per kernel)",
                              bad, CPU_MAX_THREADS);
        }
    }
    cpu_device *d = acg__calloc(1, sizeof *d);
    if (d == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
    }
    d->native = native;
    d->threads = threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d->fills_cores = (long)threads >= (cores < 1 ? 1 : cores);
    acg_status st = acg__cpu_pool_create(threads, &d->pool);
    if (st != ACG_OK) {
        acg__free(d);
        return st;
    }
    *out = bk_dev(d);
    return ACG_OK;
}

/* The core closes a device only when none of its streams is left, so no worker uses the pool. */
static void cpu_device_close(acg__bk_device *dev) {
    cpu_device *d = cdev(dev);
    acg__cpu_pool_destroy(d->pool);
    acg__free(d);
}

static acg_status cpu_device_get_async_error(acg__bk_device *dev) {
    cpu_device *d = cdev(dev);
    if (atomic_exchange(&d->faulted, 0)) {
        return acg__error(ACG_ERR_DEVICE_LOST, "cpu: a graph replay faulted (injected fault)");
    }
    return ACG_OK;
}

/* The kernel's estimate of memory available without swapping (MemAvailable counts reclaimable
 * page cache, which MemFree and _SC_AVPHYS_PAGES do not), in bytes; 0 when unknown. */
static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL) {
        return 0;
    }
    char line[128];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return (uint64_t)kib * 1024;
}

static acg_status cpu_memory_query(acg__bk_device *dev, uint64_t *free_bytes,
                                   uint64_t *total_bytes) {
    ACG__UNUSED(dev);
    long avail = sysconf(_SC_AVPHYS_PAGES), pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    if (avail <= 0 || pages <= 0 || page <= 0) {
        return acg__error(ACG_ERR_UNSUPPORTED, "acg_device_get_memory_info: sysconf cannot tell");
    }
    uint64_t available = mem_available();
    *free_bytes = available != 0 ? available : (uint64_t)avail * (uint64_t)page;
    *total_bytes = (uint64_t)pages * (uint64_t)page;
    return ACG_OK;
}

static void cpu_inject_fault(acg__bk_device *dev) { atomic_store(&cdev(dev)->inject, 1); }

static acg_status cpu_query_capability(acg__bk_device *dev, acg_capability *out) {
    describe(cdev(dev)->threads, NULL, out);
    if (cdev(dev)->native) {
        out->native_capture = true;
        snprintf(out->detail, sizeof out->detail,
                 "device memory is host memory; native capture: the stream workers record what "
                 "they are handed, a graph replays as one queue entry; update rewrites node "
                 "arguments in place");
    }
    return ACG_OK;
}

/* ---- memory ------------------------------------------------------------------------------ */

static acg_status cpu_pinned_alloc(acg__bk_device *dev, size_t size, void **p) {
    ACG__UNUSED(dev);
    *p = acg__alloc_aligned(size, 64);
    return *p != NULL ? ACG_OK : ACG_ERR_OUT_OF_MEMORY;
}

static void cpu_pinned_free(acg__bk_device *dev, void *p) {
    ACG__UNUSED(dev);
    acg__free(p);
}

/* The workers read and write host memory as it is: registering it needs nothing. */
static acg_status cpu_pinned_register(acg__bk_device *dev, void *p, size_t size) {
    ACG__UNUSED(dev);
    ACG__UNUSED(p);
    ACG__UNUSED(size);
    return ACG_OK;
}

static void cpu_pinned_unregister(acg__bk_device *dev, void *p) {
    ACG__UNUSED(dev);
    ACG__UNUSED(p);
}

/* Device memory is host memory, allocated as pinned memory is. */
static acg_status cpu_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **mem) {
    void *p = NULL;
    acg_status st = cpu_pinned_alloc(dev, size, &p);
    *mem = bk_mem(p);
    return st;
}

static void cpu_buffer_free(acg__bk_device *dev, acg__bk_mem *mem) { cpu_pinned_free(dev, mem); }

/* ---- streams and events ------------------------------------------------------------------ */

static acg_status cpu_stream_create(acg__bk_device *dev, acg__bk_stream **stream) {
    cpu_stream *s = NULL;
    acg_status st = acg__cpu_stream_new(cdev(dev), &s);
    if (st == ACG_OK) {
        *stream = bk_stream(s);
    }
    return st;
}

static void cpu_stream_destroy(acg__bk_stream *stream) { acg__cpu_stream_stop(cs(stream)); }

static acg_status cpu_stream_synchronize(acg__bk_stream *stream) {
    cpu_stream *s = cs(stream);
    acg__cpu_stream_wait(s, acg__cpu_stream_head(s));
    char why[256];
    acg_status fault = acg__cpu_stream_take_fault(s, why, sizeof why);
    if (fault == ACG_ERR_COMM) {
        return acg__error(ACG_ERR_COMM, "cpu: %s", why);
    }
    if (fault != ACG_OK) {
        return acg__error(ACG_ERR_DEVICE_LOST,
                          "cpu: work queued on this stream faulted (an injected fault in a graph "
                          "replay)");
    }
    return ACG_OK;
}

static acg_status cpu_stream_query(acg__bk_stream *stream) {
    cpu_stream *s = cs(stream);
    return acg__cpu_stream_reached(s, acg__cpu_stream_head(s)) ? ACG_OK : ACG_NOT_READY;
}

static acg_status cpu_event_create(acg__bk_device *dev, acg__bk_event **event) {
    ACG__UNUSED(dev);
    cpu_event *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_event_create: out of memory");
    }
    pthread_mutex_init(&e->mu, NULL);
    *event = bk_event(e);
    return ACG_OK;
}

static void cpu_event_destroy(acg__bk_event *event) {
    cpu_event *e = cev(event);
    if (e->stream != NULL) {
        acg__cpu_stream_unref(e->stream);
    }
    pthread_mutex_destroy(&e->mu);
    acg__free(e);
}

/* An event is a position in a stream's queue: recording enqueues nothing. */
static acg_status cpu_event_record(acg__bk_event *event, acg__bk_stream *stream) {
    cpu_event *e = cev(event);
    cpu_stream *s = cs(stream);
    if (acg__cpu_stream_recording(s)) {
        return ACG_OK; /* a recording's order is its submission order: no point to mark */
    }
    acg__cpu_stream_ref(s);
    pthread_mutex_lock(&e->mu);
    cpu_stream *old = e->stream;
    e->stream = s;
    e->seq = acg__cpu_stream_head(s);
    pthread_mutex_unlock(&e->mu);
    if (old != NULL) {
        acg__cpu_stream_unref(old);
    }
    return ACG_OK;
}

/* The stream and position the event stands for, referenced; NULL when never recorded. */
static cpu_stream *event_point(cpu_event *e, uint64_t *seq) {
    pthread_mutex_lock(&e->mu);
    cpu_stream *s = e->stream;
    *seq = e->seq;
    if (s != NULL) {
        acg__cpu_stream_ref(s);
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

static acg_status cpu_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event) {
    cpu_stream *s = cs(stream);
    if (acg__cpu_stream_recording(s)) {
        return ACG_OK; /* what it waits for was recorded earlier, so it replays earlier */
    }
    uint64_t seq;
    cpu_stream *other = event_point(cev(event), &seq);
    if (other == NULL) {
        return ACG_OK;
    }
    if (other == s || acg__cpu_stream_reached(other, seq)) {
        acg__cpu_stream_unref(other);
        return ACG_OK; /* in-order already, or complete */
    }
    cpu_op *op = acg__cpu_stream_reserve(s);
    op->kind = CPU_OP_WAIT;
    op->u.wait.other = other; /* the op owns the reference */
    op->u.wait.seq = seq;
    acg__cpu_stream_submit(s);
    return ACG_OK;
}

static acg_status cpu_event_query(acg__bk_event *event) {
    uint64_t seq;
    cpu_stream *s = event_point(cev(event), &seq);
    if (s == NULL) {
        return ACG_OK;
    }
    bool done = acg__cpu_stream_reached(s, seq);
    acg__cpu_stream_unref(s);
    return done ? ACG_OK : ACG_NOT_READY;
}

static acg_status cpu_event_synchronize(acg__bk_event *event) {
    uint64_t seq;
    cpu_stream *s = event_point(cev(event), &seq);
    if (s != NULL) {
        acg__cpu_stream_wait(s, seq);
        acg__cpu_stream_unref(s);
    }
    return ACG_OK;
}

/* ---- copies, fills, kernels -------------------------------------------------------------- */

acg_status acg__cpu_recording_full(void) {
    return acg__error(ACG_ERR_OUT_OF_MEMORY, "cpu: out of memory recording the capture");
}

static acg_status push_copy(cpu_stream *s, void *dst, const void *src, size_t size, void *owned) {
    cpu_op *op = acg__cpu_stream_reserve(s);
    if (op == NULL) {
        acg__free(owned);
        return acg__cpu_recording_full();
    }
    op->kind = CPU_OP_COPY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.size = size;
    op->u.copy.owned = owned;
    acg__cpu_stream_submit(s);
    return ACG_OK;
}

static acg_status cpu_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                               const void *src, size_t size, bool src_pinned) {
    void *owned = NULL;
    if (!src_pinned) {
        /* The caller may reuse pageable memory at once: copy it aside now. */
        owned = acg__alloc(size);
        if (owned == NULL) {
            return acg__error(ACG_ERR_OUT_OF_MEMORY,
                              "acg_copy_h2d: out of memory staging %zu "
                              "bytes of pageable memory",
                              size);
        }
        memcpy(owned, src, size);
        src = owned;
    }
    return push_copy(cs(stream), ptr(dst, dst_off), src, size, owned);
}

static acg_status cpu_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                               size_t size, bool dst_pinned) {
    cpu_stream *s = cs(stream);
    acg_status st = push_copy(s, dst, ptr(src, src_off), size, NULL);
    if (st == ACG_OK && !dst_pinned) {
        acg__cpu_stream_wait(s, acg__cpu_stream_head(s));
    }
    return st;
}

static acg_status cpu_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                               acg__bk_mem *src, size_t src_off, size_t size) {
    return push_copy(cs(stream), ptr(dst, dst_off), ptr(src, src_off), size, NULL);
}

void acg__cpu_op_fill(cpu_op *op, void *dst, size_t size, uint32_t pattern, uint32_t psize) {
    op->kind = CPU_OP_FILL;
    op->u.fill.dst = dst;
    op->u.fill.size = size;
    op->u.fill.pattern = pattern;
    op->u.fill.pattern_size = psize;
}

static acg_status cpu_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                           uint32_t pattern, uint32_t pattern_size) {
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    if (op == NULL) {
        return acg__cpu_recording_full();
    }
    acg__cpu_op_fill(op, ptr(dst, off), size, pattern, pattern_size);
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

/* A kernel is its definition, which outlives it: launches read the C function from there. */
static acg_status cpu_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                                  acg__bk_kernel **kernel) {
    ACG__UNUSED(dev);
    if (def->d.cpu.fn == NULL) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "acg_kernel_get: kernel %s has no code for the cpu backend (its "
                          "definition sets no cpu.fn)",
                          def->name);
    }
    *kernel = bk_kernel(def);
    return ACG_OK;
}

void acg__cpu_op_kernel(cpu_op *op, const acg__kernel_def *def, const acg_dims *dims,
                        const acg__karg *args, uint32_t n_args) {
    op->kind = CPU_OP_KERNEL;
    op->u.kernel.fn = def->d.cpu.fn;
    op->u.kernel.name = def->name;
    op->u.kernel.parts = def->d.cpu_parts.parts;
    op->u.kernel.part_fn = def->d.cpu_parts.fn;
    memcpy(op->u.kernel.global, dims->global, sizeof op->u.kernel.global);
    for (uint32_t i = 0; i < n_args; i++) {
        if (args[i].type == ACG_ARG_BUFFER) {
            op->u.kernel.args[i].p = ptr(args[i].value.buf.mem, args[i].value.buf.offset);
        } else {
            op->u.kernel.args[i].u64 = args[i].value.u64;
        }
    }
}

void acg__cpu_op_allreduce(cpu_op *op, acg__bk_group *group, acg__bk_mem *mem, size_t off,
                           size_t count) {
    op->kind = CPU_OP_ALLREDUCE;
    op->u.allreduce.group = (cpu_group *)group;
    op->u.allreduce.data = (float *)ptr(mem, off);
    op->u.allreduce.count = count;
}

/* ---- process groups ---------------------------------------------------------------------- */

static acg_status cpu_group_create(acg__bk_device *dev, const acg_comm *comm, acg__bk_group **out) {
    ACG__UNUSED(dev);
    cpu_group *g = NULL;
    acg_status st = acg__cpu_group_create(comm, &g);
    *out = (acg__bk_group *)g;
    return st;
}

static void cpu_group_destroy(acg__bk_group *group) { acg__cpu_group_destroy((cpu_group *)group); }

static acg_status cpu_allreduce(acg__bk_stream *stream, acg__bk_group *group, acg__bk_mem *mem,
                                size_t off, size_t count) {
    const char *why = acg__cpu_group_why((cpu_group *)group);
    if (why != NULL) {
        return acg__error(ACG_ERR_COMM, "acg_allreduce: the group failed before: %s", why);
    }
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    if (op == NULL) {
        return acg__cpu_recording_full();
    }
    acg__cpu_op_allreduce(op, group, mem, off, count);
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

static acg_status cpu_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                    const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    if (op == NULL) {
        return acg__cpu_recording_full();
    }
    acg__cpu_op_kernel(op, ckernel(kernel), dims, args, n_args);
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

/* The cpu backend's variables (src/library.c lists this table with the layers'). */
static const char *const env_names[] = {
    /* threads per kernel (1..256) where the spec gives no threads=N; default: one per online
     * core */
    "ACG_CPU_THREADS",
    /* the allreduce: shm (shared memory among the ranks of one host, the default where they
     * share one) or host (the comm's allreduce_sum_f32) */
    "ACG_CPU_ALLREDUCE",
};
const acg__env_table acg__cpu_env = {"cpu", env_names, sizeof env_names / sizeof env_names[0]};

const acg_backend_i acg__backend_cpu = {
    .version = ACG_BACKEND_VERSION,
    .name = "cpu",
    .probe = cpu_probe,
    .describe = cpu_describe,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .query_capability = cpu_query_capability,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .pinned_alloc = cpu_pinned_alloc,
    .pinned_free = cpu_pinned_free,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_query = cpu_stream_query,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_synchronize,
    .copy_h2d = cpu_copy_h2d,
    .copy_d2h = cpu_copy_d2h,
    .copy_d2d = cpu_copy_d2d,
    .fill = cpu_fill,
    .kernel_load = cpu_kernel_load,
    .kernel_unload = NULL,
    .kernel_launch = cpu_kernel_launch,
    .graph_instantiate = acg__cpu_graph_instantiate,
    .graph_launch = acg__cpu_graph_launch,
    .graph_update = acg__cpu_graph_update,
    .graph_destroy = acg__cpu_graph_destroy,
    .retain_discarded_graphs = false,
    .capture_begin = acg__cpu_capture_begin,
    .capture_join = acg__cpu_capture_join,
    .capture_end = acg__cpu_capture_end,
    .capture_abort = acg__cpu_capture_abort,
    .host_launch = acg__cpu_host_launch,
    .stream_get_native = NULL, /* a worker thread has no driver object */
    .device_get_async_error = cpu_device_get_async_error,
    .inject_fault = cpu_inject_fault,
    .memory_query = cpu_memory_query,
    .graph_upload = NULL,     /* a graph is an op array in host memory: nothing to upload */
    .graph_get_native = NULL, /* an op array of acg's own, no driver object */
    .pinned_register = cpu_pinned_register,
    .pinned_unregister = cpu_pinned_unregister,
    .group_create = cpu_group_create,
    .group_destroy = cpu_group_destroy,
    .allreduce = cpu_allreduce,
    .graph_update_from = NULL, /* the description rebuilds every op */
    .buffer_get_native = cpu_buffer_get_native,
    .device_get_native = NULL, /* no driver: ACG_NATIVE_NONE */
    .graph_update_node = acg__cpu_graph_update_node,
    .loop_begin = acg__cpu_loop_begin,
    .loop_end = acg__cpu_loop_end,
};
