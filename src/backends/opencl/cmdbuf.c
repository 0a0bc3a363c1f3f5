/* cmdbuf.c — graphs as cl_khr_command_buffer command buffers.
 *
 * The ICD loader does not export the extension's entry points, so they are resolved per
 * platform. Their signatures changed while the extension was provisional, so the version the
 * device reports (CL_DEVICE_EXTENSIONS_WITH_VERSION) picks the calling convention; a version
 * this code does not know disables graphs rather than risk a call with the wrong arguments.
 *
 * A command buffer is recorded for one queue and runs on it; a graph is recorded from the
 * core's description once per queue it replays on (usually one), and keeps its own copy of the
 * description to do so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl.h"

#define CMDBUF_EXT "cl_khr_command_buffer"
#define MUTABLE_EXT "cl_khr_command_buffer_mutable_dispatch"

ocl_cb_abi acg__ocl_cmdbuf_abi(unsigned major, unsigned minor, unsigned patch) {
    if (major == 0 && minor == 9) {
        return patch < 5 ? OCL_CB_090 : OCL_CB_095;
    }
    if (major == 1 && minor == 0) {
        return OCL_CB_095;
    }
    return OCL_CB_NONE;
}

bool acg__ocl_parse_version(const char *s, unsigned *major, unsigned *minor, unsigned *patch) {
    unsigned v[3] = {0, 0, 0};
    int parts = 0;
    const char *p = s;
    while (parts < 3) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        char *end;
        unsigned long x = strtoul(p, &end, 10);
        if (x > 1023 || end - p > 4) {
            return false;
        }
        v[parts++] = (unsigned)x;
        p = end;
        if (*p == '\0') {
            break;
        }
        if (*p != '.') {
            return false;
        }
        p++;
    }
    if (*p != '\0' || parts < 2) {
        return false;
    }
    *major = v[0];
    *minor = v[1];
    *patch = v[2];
    return true;
}

/* The version of extension `name` on the device, from CL_DEVICE_EXTENSIONS_WITH_VERSION:
 * ACG_OK with *found set, or ACG_ERR_OUT_OF_MEMORY. */
static acg_status extension_version(cl_device_id id, const char *name, bool *found,
                                    cl_version *out) {
    size_t size = 0;
    *found = false;
    if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS_WITH_VERSION, 0, NULL, &size) != CL_SUCCESS ||
        size == 0) {
        return ACG_OK;
    }
    cl_name_version *list = acg__alloc(size);
    if (list == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "opencl: out of memory reading extensions");
    }
    if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS_WITH_VERSION, size, list, NULL) == CL_SUCCESS) {
        for (size_t i = 0; i < size / sizeof *list; i++) {
            if (strcmp(list[i].name, name) == 0) {
                *out = list[i].version;
                *found = true;
                break;
            }
        }
    }
    acg__free(list);
    return ACG_OK;
}

acg_status acg__ocl_cmdbuf_probe(cl_platform_id platform, cl_device_id id, ocl_cmdbuf_api *out) {
    memset(out, 0, sizeof *out);
    cl_version v = 0, mv = 0;
    bool found = false;
    ACG__TRY(extension_version(id, CMDBUF_EXT, &found, &v));
    if (!found) {
        snprintf(out->why, sizeof out->why, "no graphs: the device does not offer %s", CMDBUF_EXT);
        return ACG_OK;
    }
    out->major = CL_VERSION_MAJOR(v);
    out->minor = CL_VERSION_MINOR(v);
    out->patch = CL_VERSION_PATCH(v);
    ACG__TRY(extension_version(id, MUTABLE_EXT, &out->mutable_dispatch, &mv));
    ocl_cb_abi abi = acg__ocl_cmdbuf_abi(out->major, out->minor, out->patch);
    if (abi == OCL_CB_NONE) {
        snprintf(out->why, sizeof out->why,
                 "no graphs: %s %u.%u.%u is a version this build does not know", CMDBUF_EXT,
                 out->major, out->minor, out->patch);
        acg__log(ACG_LOG_WARN, "opencl: %s", out->why);
        return ACG_OK;
    }
    cl_device_command_buffer_capabilities_khr caps = 0;
    clGetDeviceInfo(id, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps, NULL);
    clGetDeviceInfo(id, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
                    sizeof out->queue_props, &out->queue_props, NULL);
    /* Only the provisional convention has the simultaneous-use flag this code knows how to
     * ask for; elsewhere a replay waits for the previous one of the same command buffer. */
    out->simultaneous =
        abi == OCL_CB_090 && (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR);
    snprintf(out->why, sizeof out->why, "graphs: %s %u.%u.%u (%s convention)%s%s", CMDBUF_EXT,
             out->major, out->minor, out->patch, abi == OCL_CB_090 ? "0.9.0" : "0.9.5+",
             out->simultaneous ? ", simultaneous use" : "",
             out->mutable_dispatch ? ", mutable dispatch"
                                   : "; no mutable dispatch (update: "
                                     "capture again)");
    if (platform == NULL) {
        out->abi = abi;
        return ACG_OK;
    }
#define RESOLVE(field, name)                                                                       \
    *(void **)&out->field = clGetExtensionFunctionAddressForPlatform(platform, name)
    RESOLVE(create, "clCreateCommandBufferKHR");
    RESOLVE(finalize, "clFinalizeCommandBufferKHR");
    RESOLVE(release, "clReleaseCommandBufferKHR");
    RESOLVE(enqueue, "clEnqueueCommandBufferKHR");
    RESOLVE(ndrange, "clCommandNDRangeKernelKHR");
    RESOLVE(copy.v090, "clCommandCopyBufferKHR");
    RESOLVE(fill.v090, "clCommandFillBufferKHR");
#undef RESOLVE
    if (out->create == NULL || out->finalize == NULL || out->release == NULL ||
        out->enqueue == NULL || out->ndrange == NULL || out->copy.v090 == NULL ||
        out->fill.v090 == NULL) {
        snprintf(out->why, sizeof out->why,
                 "no graphs: the platform does not resolve the %s entry points", CMDBUF_EXT);
        return ACG_OK;
    }
    out->abi = abi;
    return ACG_OK;
}

/* ---- recording ---------------------------------------------------------------------------- */

/* One recording of a graph, for one queue. Each kernel node has a kernel object of its own:
 * the specification says a command copies its kernel's arguments when recorded, but PoCL 3.1
 * reads them when the command buffer runs, so nodes sharing a kernel object would all run with
 * the last node's arguments. */
typedef struct ocl_record {
    cl_command_queue queue; /* retained */
    cl_command_buffer_khr cb;
    cl_event last;      /* the latest enqueue, kept when replays must not overlap */
    cl_kernel *kernels; /* (n_nodes) per kernel node, NULL elsewhere */
    uint32_t n_kernels;
} ocl_record;

typedef struct ocl_graph {
    ocl_device *dev;
    acg__graph_desc desc; /* own copy: nodes and dependencies */
    ocl_record *recs;
    uint32_t n_recs, cap_recs;
} ocl_graph;

/* The core's exec is an ocl_graph; these are the only casts between them. */
static inline ocl_graph *ograph(acg__bk_exec *x) { return (ocl_graph *)x; }
static inline acg__bk_exec *bk_exec(ocl_graph *g) { return (acg__bk_exec *)g; }

static cl_int cmd_copy(const ocl_cmdbuf_api *a, cl_command_buffer_khr cb, cl_mem src, cl_mem dst,
                       size_t src_off, size_t dst_off, size_t size, cl_uint n_wait,
                       const cl_sync_point_khr *wait, cl_sync_point_khr *sp) {
    if (a->abi == OCL_CB_090) {
        return a->copy.v090(cb, NULL, src, dst, src_off, dst_off, size, n_wait, wait, sp, NULL);
    }
    return a->copy.v095(cb, NULL, NULL, src, dst, src_off, dst_off, size, n_wait, wait, sp, NULL);
}

static cl_int cmd_fill(const ocl_cmdbuf_api *a, cl_command_buffer_khr cb, cl_mem dst,
                       const void *pattern, size_t psize, size_t off, size_t size, cl_uint n_wait,
                       const cl_sync_point_khr *wait, cl_sync_point_khr *sp) {
    if (a->abi == OCL_CB_090) {
        return a->fill.v090(cb, NULL, dst, pattern, psize, off, size, n_wait, wait, sp, NULL);
    }
    return a->fill.v095(cb, NULL, NULL, dst, pattern, psize, off, size, n_wait, wait, sp, NULL);
}

/* Records one node; its dependencies are the sync points in wait. A kernel node gets a new
 * kernel object in *kernel, which the recording keeps. */
static acg_status record_node(ocl_device *d, cl_command_buffer_khr cb, const acg__node *n,
                              cl_uint n_wait, const cl_sync_point_khr *wait, cl_sync_point_khr *sp,
                              cl_kernel *kernel) {
    static const char fn[] = "acg_stream_end_capture";
    const ocl_cmdbuf_api *a = &d->cb;
    acg_status st = ACG_OK;
    cl_mem pin = NULL;
    size_t pin_off = 0;
    if ((n->kind == ACG_NODE_COPY_H2D || n->kind == ACG_NODE_COPY_D2H) &&
        !acg__ocl_pinned_find(d, n->host, &pin, &pin_off)) {
        return acg__error(ACG_ERR_INTERNAL, "%s: captured host memory %p is not pinned", fn,
                          n->host);
    }
    switch (n->kind) {
    case ACG_NODE_KERNEL: {
        size_t global[3], local[3];
        bool has_local;
        cl_uint work_dim = acg__ocl_dims(&n->dims, global, local, &has_local);
        cl_int err = CL_SUCCESS;
        const ocl_kernel *k = acg__ocl_kernel(n->kernel);
        *kernel = clCreateKernel(k->program, k->name, &err);
        if (err != CL_SUCCESS) {
            *kernel = NULL;
            return acg__ocl_error(err, fn, "clCreateKernel");
        }
        st = acg__ocl_set_args(*kernel, k->name, n->args, n->n_args, fn);
        if (st == ACG_OK) {
            OCL_CHECK(a->ndrange(cb, NULL, NULL, *kernel, work_dim, NULL, global,
                                 has_local ? local : NULL, n_wait, wait, sp, NULL),
                      fn, out);
        }
        break;
    }
    case ACG_NODE_COPY_H2D:
        OCL_CHECK(cmd_copy(a, cb, pin, acg__ocl_mem(n->dst_mem), pin_off, n->dst_off, n->size,
                           n_wait, wait, sp),
                  fn, out);
        break;
    case ACG_NODE_COPY_D2H:
        OCL_CHECK(cmd_copy(a, cb, acg__ocl_mem(n->src_mem), pin, n->src_off, pin_off, n->size,
                           n_wait, wait, sp),
                  fn, out);
        break;
    case ACG_NODE_COPY_D2D:
        OCL_CHECK(cmd_copy(a, cb, acg__ocl_mem(n->src_mem), acg__ocl_mem(n->dst_mem), n->src_off,
                           n->dst_off, n->size, n_wait, wait, sp),
                  fn, out);
        break;
    case ACG_NODE_FILL: {
        uint8_t bytes[4];
        acg__ocl_pattern_bytes(n->pattern, n->pattern_size, bytes);
        OCL_CHECK(cmd_fill(a, cb, acg__ocl_mem(n->dst_mem), bytes, n->pattern_size, n->dst_off,
                           n->size, n_wait, wait, sp),
                  fn, out);
        break;
    }
    case ACG_NODE_HOST:
    case ACG_NODE_FOREIGN:
    case ACG_NODE_COLLECTIVE:
    case ACG_NODE_LOOP:
        /* The core invalidates such captures on this backend (no host node, no native
         * capture, no collectives, no loops); reaching here is a bug. */
        return acg__error(ACG_ERR_INTERNAL, "%s: a command buffer cannot hold node kind %d", fn,
                          (int)n->kind);
    }
out:
    return st;
}

static void release_record(ocl_device *d, ocl_record *r) {
    for (uint32_t i = 0; i < r->n_kernels; i++) {
        if (r->kernels[i] != NULL) {
            clReleaseKernel(r->kernels[i]);
        }
    }
    acg__free(r->kernels);
    if (r->last != NULL) {
        clReleaseEvent(r->last);
    }
    if (r->cb != NULL) {
        d->cb.release(r->cb);
    }
    if (r->queue != NULL) {
        clReleaseCommandQueue(r->queue);
    }
    memset(r, 0, sizeof *r);
}

/* Records the whole description into a new command buffer for queue, in *r. */
static acg_status record(ocl_graph *g, cl_command_queue queue, ocl_record *r) {
    static const char fn[] = "acg_stream_end_capture";
    ocl_device *d = g->dev;
    const acg__graph_desc *desc = &g->desc;
    acg_status st = ACG_OK;
    cl_int err = CL_SUCCESS;
    cl_command_buffer_properties_khr simultaneous[] = {CL_COMMAND_BUFFER_FLAGS_KHR,
                                                       CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
    memset(r, 0, sizeof *r);
    r->cb = d->cb.create(1, &queue, d->cb.simultaneous ? simultaneous : NULL, &err);
    if (err != CL_SUCCESS) {
        r->cb = NULL;
        return acg__ocl_error(err, fn, "clCreateCommandBufferKHR");
    }
    clRetainCommandQueue(queue);
    r->queue = queue;
    cl_sync_point_khr *sp = acg__calloc(desc->n_nodes + 1, sizeof *sp);
    cl_sync_point_khr *wait = acg__calloc(desc->n_deps + 1, sizeof *wait);
    r->kernels = acg__calloc(desc->n_nodes + 1, sizeof *r->kernels);
    if (sp == NULL || wait == NULL || r->kernels == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_release;
    }
    r->n_kernels = desc->n_nodes;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        const acg__node *n = &desc->nodes[i];
        for (uint32_t j = 0; j < n->n_deps; j++) {
            wait[j] = sp[desc->deps[n->deps_begin + j]];
        }
        st = record_node(d, r->cb, n, n->n_deps, n->n_deps ? wait : NULL, &sp[i], &r->kernels[i]);
        if (st != ACG_OK) {
            goto out_release;
        }
    }
    OCL_CHECK(d->cb.finalize(r->cb), fn, out_release);
    acg__free(wait);
    acg__free(sp);
    return ACG_OK;

out_release:
    acg__free(wait);
    acg__free(sp);
    release_record(d, r);
    return st;
}

static bool copy_desc(acg__graph_desc *dst, const acg__graph_desc *src) {
    acg__graph_desc c = {0};
    c.n_nodes = src->n_nodes;
    c.n_deps = src->n_deps;
    c.nodes = acg__alloc((size_t)(c.n_nodes + 1) * sizeof *c.nodes);
    c.deps = acg__alloc((size_t)(c.n_deps + 1) * sizeof *c.deps);
    if (c.nodes == NULL || c.deps == NULL) {
        acg__free(c.nodes);
        acg__free(c.deps);
        return false;
    }
    if (c.n_nodes != 0) {
        memcpy(c.nodes, src->nodes, c.n_nodes * sizeof *c.nodes);
    }
    if (c.n_deps != 0) {
        memcpy(c.deps, src->deps, c.n_deps * sizeof *c.deps);
    }
    *dst = c;
    return true;
}

/* Adds a command buffer recorded for queue (kept until the graph dies). */
static acg_status add_record(ocl_graph *g, cl_command_queue queue, ocl_record **out) {
    if (!acg__grow((void **)&g->recs, &g->cap_recs, g->n_recs + 1, sizeof *g->recs)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_graph_launch: out of memory");
    }
    ocl_record *r = &g->recs[g->n_recs];
    ACG__TRY(record(g, queue, r));
    g->n_recs++;
    *out = r;
    return ACG_OK;
}

static void release_records(ocl_graph *g) {
    for (uint32_t i = 0; i < g->n_recs; i++) {
        release_record(g->dev, &g->recs[i]);
    }
    g->n_recs = 0;
}

acg_status acg__ocl_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                      acg__bk_exec **exec) {
    ocl_device *d = acg__ocl_dev(dev);
    if (d->cb.abi == OCL_CB_NONE) {
        return acg__error(ACG_ERR_UNSUPPORTED, "acg_stream_end_capture: %s", d->cb.why);
    }
    ocl_graph *g = acg__calloc(1, sizeof *g);
    if (g == NULL || !copy_desc(&g->desc, desc)) {
        acg__free(g);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    g->dev = d;
    /* Record once now, on the device's own queue, so a graph the driver rejects fails at the
     * end of capture, not at its first replay. */
    ocl_record *r;
    acg_status st = add_record(g, d->aux, &r);
    if (st != ACG_OK) {
        acg__desc_free(&g->desc);
        acg__free(g->recs);
        acg__free(g);
        return st;
    }
    *exec = bk_exec(g);
    return ACG_OK;
}

acg_status acg__ocl_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream) {
    static const char fn[] = "acg_graph_launch";
    ocl_graph *g = ograph(exec);
    ocl_stream *s = acg__ocl_stream(stream);
    const ocl_cmdbuf_api *a = &g->dev->cb;
    acg_status st = ACG_OK;
    ocl_record *r = NULL;
    for (uint32_t i = 0; i < g->n_recs && r == NULL; i++) {
        if (g->recs[i].queue == s->queue) {
            r = &g->recs[i];
        }
    }
    if (r == NULL && (st = add_record(g, s->queue, &r)) != ACG_OK) {
        return st;
    }
    if (r->last != NULL) {
        /* Without simultaneous use a pending command buffer cannot be enqueued again: wait
         * for the previous replay. */
        cl_int err = clWaitForEvents(1, &r->last);
        if (err != CL_SUCCESS) {
            return acg__ocl_wait_error(err, r->last, fn, "clWaitForEvents");
        }
        clReleaseEvent(r->last);
        r->last = NULL;
    }
    cl_event ev = NULL;
    OCL_CHECK(a->enqueue(0, NULL, r->cb, 0, NULL, &ev), fn, out);
    acg__ocl_track(s, ev);
    if (!a->simultaneous) {
        clRetainEvent(ev);
        r->last = ev;
    }
out:
    return st;
}

acg_status acg__ocl_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    ocl_graph *g = ograph(exec);
    acg__graph_desc old = g->desc;
    if (!copy_desc(&g->desc, desc)) {
        g->desc = old;
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_graph_update: out of memory");
    }
    /* No replay is pending: drop every recording; the device's own is made again now, the
     * streams' ones at their next replay. */
    release_records(g);
    ocl_record *r;
    acg_status st = add_record(g, g->dev->aux, &r);
    if (st != ACG_OK) {
        acg__desc_free(&g->desc);
        g->desc = old;
        return st;
    }
    acg__desc_free(&old);
    return ACG_OK;
}

void acg__ocl_graph_destroy(acg__bk_exec *exec) {
    ocl_graph *g = ograph(exec);
    release_records(g);
    acg__free(g->recs);
    acg__desc_free(&g->desc);
    acg__free(g);
}
