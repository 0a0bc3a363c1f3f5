/* cpu.c — the cpu backend: device memory is host memory, each stream is a worker thread, and a
 * graph is the captured node list that the worker replays as one queue entry. It runs
 * everywhere, and it is the oracle the other backends are compared with. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

typedef struct cpu_event {
    pthread_mutex_t mu;
    cpu_stream *stream; /* referenced while recorded */
    uint64_t seq;
} cpu_event;

static char *ptr(void *mem, size_t off) { return (char *)mem + off; }

/* ---- device ------------------------------------------------------------------------------ */

static acg_status cpu_probe(int *n_devices, const char **reason) {
    *n_devices = 1;
    *reason = "";
    return ACG_OK;
}

static acg_status cpu_describe(int index, acg_capability *out) {
    ACG__UNUSED(index);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    snprintf(out->name, sizeof out->name, "host cpu, %ld core(s), a worker thread per stream",
             cores > 0 ? cores : 1);
    out->available = true;
    out->pinned_memory = true; /* host memory needs no pinning to be read asynchronously */
    out->graphs = true;
    out->graph_update = true;
    out->multi_stream_capture = true;
    out->memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    snprintf(out->detail, sizeof out->detail,
             "device memory is host memory; a graph replays as one queue entry of the stream's "
             "worker; update rewrites node arguments in place");
    return ACG_OK;
}

static acg_status cpu_device_open(int index, void **dev) {
    ACG__UNUSED(index);
    static int device_tag; /* the cpu device keeps no state */
    *dev = &device_tag;
    return ACG_OK;
}

static void cpu_device_close(void *dev) { ACG__UNUSED(dev); }

static acg_status cpu_query_capability(void *dev, acg_capability *out) {
    ACG__UNUSED(dev);
    return cpu_describe(0, out);
}

/* ---- memory ------------------------------------------------------------------------------ */

static acg_status cpu_buffer_alloc(void *dev, size_t size, void **mem) {
    ACG__UNUSED(dev);
    *mem = acg__alloc_aligned(size, 64);
    return *mem != NULL ? ACG_OK : ACG_ERR_OUT_OF_MEMORY;
}

static void cpu_buffer_free(void *dev, void *mem) {
    ACG__UNUSED(dev);
    acg__free(mem);
}

static acg_status cpu_pinned_alloc(void *dev, size_t size, void **p) {
    return cpu_buffer_alloc(dev, size, p);
}

static void cpu_pinned_free(void *dev, void *p) { cpu_buffer_free(dev, p); }

/* ---- streams and events ------------------------------------------------------------------ */

static acg_status cpu_stream_create(void *dev, void **stream) {
    ACG__UNUSED(dev);
    return acg__cpu_stream_new((cpu_stream **)stream);
}

static void cpu_stream_destroy(void *stream) { acg__cpu_stream_stop(stream); }

static acg_status cpu_stream_synchronize(void *stream) {
    cpu_stream *s = stream;
    acg__cpu_stream_wait(s, acg__cpu_stream_head(s));
    return ACG_OK;
}

static acg_status cpu_stream_query(void *stream) {
    cpu_stream *s = stream;
    return acg__cpu_stream_reached(s, acg__cpu_stream_head(s)) ? ACG_OK : ACG_NOT_READY;
}

static acg_status cpu_event_create(void *dev, void **event) {
    ACG__UNUSED(dev);
    cpu_event *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_event_create: out of memory");
    }
    pthread_mutex_init(&e->mu, NULL);
    *event = e;
    return ACG_OK;
}

static void cpu_event_destroy(void *event) {
    cpu_event *e = event;
    if (e->stream != NULL) {
        acg__cpu_stream_unref(e->stream);
    }
    pthread_mutex_destroy(&e->mu);
    acg__free(e);
}

/* An event is a position in a stream's queue: recording enqueues nothing. */
static acg_status cpu_event_record(void *event, void *stream) {
    cpu_event *e = event;
    cpu_stream *s = stream;
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

static acg_status cpu_stream_wait_event(void *stream, void *event) {
    uint64_t seq;
    cpu_stream *other = event_point(event, &seq);
    if (other == NULL) {
        return ACG_OK;
    }
    if (other == stream || acg__cpu_stream_reached(other, seq)) {
        acg__cpu_stream_unref(other);
        return ACG_OK; /* in-order already, or complete */
    }
    cpu_op *op = acg__cpu_stream_reserve(stream);
    op->kind = CPU_OP_WAIT;
    op->u.wait.other = other; /* the op owns the reference */
    op->u.wait.seq = seq;
    acg__cpu_stream_submit(stream);
    return ACG_OK;
}

static acg_status cpu_event_query(void *event) {
    uint64_t seq;
    cpu_stream *s = event_point(event, &seq);
    if (s == NULL) {
        return ACG_OK;
    }
    bool done = acg__cpu_stream_reached(s, seq);
    acg__cpu_stream_unref(s);
    return done ? ACG_OK : ACG_NOT_READY;
}

static acg_status cpu_event_synchronize(void *event) {
    uint64_t seq;
    cpu_stream *s = event_point(event, &seq);
    if (s != NULL) {
        acg__cpu_stream_wait(s, seq);
        acg__cpu_stream_unref(s);
    }
    return ACG_OK;
}

/* ---- copies, fills, kernels -------------------------------------------------------------- */

static void push_copy(cpu_stream *s, void *dst, const void *src, size_t size, void *owned) {
    cpu_op *op = acg__cpu_stream_reserve(s);
    op->kind = CPU_OP_COPY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.size = size;
    op->u.copy.owned = owned;
    acg__cpu_stream_submit(s);
}

static acg_status cpu_copy_h2d(void *stream, void *dst, size_t dst_off, const void *src,
                               size_t size, bool src_pinned) {
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
    push_copy(stream, ptr(dst, dst_off), src, size, owned);
    return ACG_OK;
}

static acg_status cpu_copy_d2h(void *stream, void *dst, void *src, size_t src_off, size_t size) {
    push_copy(stream, dst, ptr(src, src_off), size, NULL);
    return ACG_OK;
}

static acg_status cpu_copy_d2d(void *stream, void *dst, size_t dst_off, void *src, size_t src_off,
                               size_t size) {
    push_copy(stream, ptr(dst, dst_off), ptr(src, src_off), size, NULL);
    return ACG_OK;
}

static void set_fill(cpu_op *op, void *dst, size_t size, uint32_t pattern, uint32_t psize) {
    op->kind = CPU_OP_FILL;
    op->u.fill.dst = dst;
    op->u.fill.size = size;
    op->u.fill.pattern = pattern;
    op->u.fill.pattern_size = psize;
}

static acg_status cpu_fill(void *stream, void *dst, size_t off, size_t size, uint32_t pattern,
                           uint32_t pattern_size) {
    cpu_op *op = acg__cpu_stream_reserve(stream);
    set_fill(op, ptr(dst, off), size, pattern, pattern_size);
    acg__cpu_stream_submit(stream);
    return ACG_OK;
}

static acg_status cpu_kernel_load(void *dev, const acg__kernel_def *def, void **kernel) {
    ACG__UNUSED(dev);
    const cpu_kernel *k = acg__cpu_kernel_find(def->name);
    if (k == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_kernel_get: the cpu backend has no kernel %s",
                          def->name);
    }
    *kernel = (void *)k;
    return ACG_OK;
}

static void set_kernel(cpu_op *op, const cpu_kernel *k, const acg_dims *dims, const acg__karg *args,
                       uint32_t n_args) {
    op->kind = CPU_OP_KERNEL;
    op->u.kernel.fn = k->fn;
    memcpy(op->u.kernel.global, dims->global, sizeof op->u.kernel.global);
    for (uint32_t i = 0; i < n_args; i++) {
        if (args[i].type == ACG_ARG_BUFFER) {
            op->u.kernel.args[i].p = ptr(args[i].value.buf.mem, args[i].value.buf.offset);
        } else {
            op->u.kernel.args[i].u64 = args[i].value.u64;
        }
    }
}

static acg_status cpu_kernel_launch(void *stream, void *kernel, const acg_dims *dims,
                                    const acg__karg *args, uint32_t n_args) {
    cpu_op *op = acg__cpu_stream_reserve(stream);
    set_kernel(op, kernel, dims, args, n_args);
    acg__cpu_stream_submit(stream);
    return ACG_OK;
}

/* ---- graphs ------------------------------------------------------------------------------ */

/* Writes the ops of a graph from its description; nodes are already in a valid serial order,
 * and one worker runs them one after another, which honours every dependency. */
static void build_ops(cpu_op *ops, const acg__graph_desc *desc) {
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        const acg__node *n = &desc->nodes[i];
        cpu_op *op = &ops[i];
        memset(op, 0, sizeof *op);
        switch (n->kind) {
        case ACG_NODE_KERNEL:
            set_kernel(op, n->kernel, &n->dims, n->args, n->n_args);
            break;
        case ACG_NODE_COPY_H2D:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = ptr(n->dst_mem, n->dst_off);
            op->u.copy.src = n->host;
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_COPY_D2H:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = n->host;
            op->u.copy.src = ptr(n->src_mem, n->src_off);
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_COPY_D2D:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = ptr(n->dst_mem, n->dst_off);
            op->u.copy.src = ptr(n->src_mem, n->src_off);
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_FILL:
            set_fill(op, ptr(n->dst_mem, n->dst_off), n->size, n->pattern, n->pattern_size);
            break;
        }
    }
}

static acg_status cpu_graph_instantiate(void *dev, const acg__graph_desc *desc, void **exec) {
    ACG__UNUSED(dev);
    cpu_graph *g = acg__calloc(1, sizeof *g);
    if (g == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    if (desc->n_nodes != 0) {
        g->ops = acg__alloc_aligned((size_t)desc->n_nodes * sizeof *g->ops, 64);
        if (g->ops == NULL) {
            acg__free(g);
            return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
        }
        build_ops(g->ops, desc);
    }
    g->n_ops = desc->n_nodes;
    *exec = g;
    return ACG_OK;
}

static acg_status cpu_graph_launch(void *exec, void *stream) {
    cpu_op *op = acg__cpu_stream_reserve(stream);
    op->kind = CPU_OP_GRAPH;
    op->u.graph.graph = exec;
    acg__cpu_stream_submit(stream);
    return ACG_OK;
}

static acg_status cpu_graph_update(void *exec, const acg__graph_desc *desc) {
    build_ops(((cpu_graph *)exec)->ops, desc);
    return ACG_OK;
}

static void cpu_graph_destroy(void *exec) {
    cpu_graph *g = exec;
    acg__free(g->ops);
    acg__free(g);
}

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
    .graph_instantiate = cpu_graph_instantiate,
    .graph_launch = cpu_graph_launch,
    .graph_update = cpu_graph_update,
    .graph_destroy = cpu_graph_destroy,
};
