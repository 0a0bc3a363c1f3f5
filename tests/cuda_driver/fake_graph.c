/* fake_graph.c — the CUDA test driver's stream capture, graphs and executable graphs.
 *
 * A graph is its nodes in insertion order, each with the indices of the earlier nodes it
 * depends on: insertion order is a valid serial order, and a replay runs the nodes in it, one
 * after another (simplified: CUDA may run independent branches at once).
 *
 * A capture has an origin stream and the streams that joined it by waiting on an event
 * recorded in it (forks). Each capturing stream has a frontier, the nodes its next node
 * depends on; recording a node makes the node the stream's whole frontier, and a wait on an
 * event recorded in the same capture adds the event's frontier (a join). At the end, every
 * joined stream's frontier must be reached from the origin's, or the fork was never joined.
 *
 * An exec copies its graph's nodes. Its parameters are a snapshot that each launch holds, so an
 * update (which makes a new snapshot) changes only launches queued after it, as in CUDA. Its
 * nodes are named by the nodes of the graph it was instantiated from (cuGraphExec*SetParams),
 * which must still live, and after a cuGraphExecUpdate too.
 */
#include "fake_cuda_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- graphs --------------------------------------------------------------------------------- */

static void graph_free(struct CUgraph_st *g) {
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct CUgraphNode_st *node = g->nodes.v[i];
        fake__ids_free(&node->deps);
        free(node);
    }
    fake__vec_free(&g->nodes);
    free(g);
}

/* Appends a node running `work` after the nodes `deps`. */
static CUresult graph_add(struct CUgraph_st *g, const struct fake_ids *deps,
                          const struct fake_work *work, struct CUgraphNode_st **out) {
    struct CUgraphNode_st *node = calloc(1, sizeof *node);
    if (node == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    node->index = g->nodes.n;
    node->work = *work;
    if (fake__ids_union(&node->deps, deps) != 0 || fake__vec_push(&g->nodes, node) != 0) {
        fake__ids_free(&node->deps);
        free(node);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = node;
    return CUDA_SUCCESS;
}

static CUresult graph_get(CUgraph h, struct CUgraph_st **out) {
    if (h == NULL || !fake__vec_has(&fake__g.graphs, h)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *out = h;
    return CUDA_SUCCESS;
}

/* ---- capture -------------------------------------------------------------------------------- */

void fake__capture_invalidate(struct fake_capture *c) { c->invalidated = 1; }

CUresult fake__capture_record(struct CUstream_st *s, const struct fake_work *work) {
    struct fake_capture *c = s->capture;
    if (c->invalidated) {
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* and nothing is recorded */
    }
    /* The new frontier first, so running out of memory leaves the graph as it was. */
    struct fake_ids frontier = {0};
    if (fake__ids_add(&frontier, c->graph->nodes.n) != 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUgraphNode_st *node;
    CUresult r = graph_add(c->graph, &s->frontier, work, &node);
    if (r != CUDA_SUCCESS) {
        fake__ids_free(&frontier);
        return r;
    }
    fake__ids_free(&s->frontier);
    s->frontier = frontier;
    return CUDA_SUCCESS;
}

CUresult fake__capture_join(struct CUstream_st *s, struct fake_capture *c,
                            const struct fake_ids *frontier) {
    struct fake_ids copy = {0};
    if (fake__ids_union(&copy, frontier) != 0 || fake__vec_push(&c->members, s) != 0) {
        fake__ids_free(&copy);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake__ids_free(&s->frontier);
    s->frontier = copy;
    s->capture = c;
    /* It joins even an invalidated capture, so its later work is refused like the rest. */
    return c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

void fake__capture_discard(struct fake_capture *c) {
    for (size_t i = 0; i < c->members.n; i++) {
        struct CUstream_st *s = c->members.v[i];
        s->capture = NULL;
        fake__ids_free(&s->frontier);
    }
    /* Its events were points in it only: they read as never recorded from now on. */
    for (size_t i = 0; i < fake__g.events.n; i++) {
        struct CUevent_st *e = fake__g.events.v[i];
        if (e->capture == c) {
            e->capture = NULL;
            fake__ids_free(&e->frontier);
        }
    }
    fake__vec_free(&c->members);
    fake__vec_remove(&fake__g.captures, c);
    if (c->graph != NULL) {
        graph_free(c->graph);
    }
    free(c);
}

/* 1 when every joined stream's frontier is reached from the origin's, 0 when one is not (a
 * fork never joined back), -1 when out of memory. */
static int capture_joined(const struct fake_capture *c) {
    size_t n = c->graph->nodes.n;
    char *reached = calloc(n > 0 ? n : 1, 1);
    if (reached == NULL) {
        return -1;
    }
    for (size_t i = 0; i < c->origin->frontier.n; i++) {
        reached[c->origin->frontier.v[i]] = 1;
    }
    /* Dependencies point to earlier nodes, so one pass from the last node back suffices. */
    for (size_t i = n; i-- > 0;) {
        if (reached[i]) {
            const struct CUgraphNode_st *node = c->graph->nodes.v[i];
            for (size_t j = 0; j < node->deps.n; j++) {
                reached[node->deps.v[j]] = 1;
            }
        }
    }
    int joined = 1;
    for (size_t i = 0; i < c->members.n && joined; i++) {
        const struct CUstream_st *s = c->members.v[i];
        for (size_t j = 0; j < s->frontier.n && joined; j++) {
            joined = reached[s->frontier.v[j]];
        }
    }
    free(reached);
    return joined;
}

CUresult fake_cuStreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
    FAKE_ENTER(cuStreamBeginCapture);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r;
    FAKE_CHECK(fake__lock_stream(h, &ctx, &s), out);
    /* Simplified: the mode is checked and ignored; GLOBAL and THREAD_LOCAL restrict nothing
     * (acg captures RELAXED). */
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    FAKE_FAIL_IF(s->capture != NULL, CUDA_ERROR_ILLEGAL_STATE, out);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    struct fake_capture *c = calloc(1, sizeof *c);
    if (c == NULL) {
        goto out;
    }
    c->ctx = ctx;
    c->origin = s;
    c->id = ++fake__g.next_id;
    c->graph = calloc(1, sizeof *c->graph);
    if (c->graph == NULL || fake__vec_push(&c->members, s) != 0 ||
        fake__vec_push(&fake__g.captures, c) != 0) {
        fake__vec_free(&c->members);
        free(c->graph);
        free(c);
        goto out;
    }
    c->graph->ctx = ctx;
    c->graph->id = ++fake__g.next_id;
    s->capture = c;
    fake__ids_free(&s->frontier);
    r = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuStreamEndCapture(CUstream h, CUgraph *graph) {
    FAKE_ENTER(cuStreamEndCapture);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && graph == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    *graph = NULL;
    struct fake_capture *c = s->capture;
    if (c == NULL || c->origin != s) {
        /* Not an origin: not capturing at all, or a joined stream, which cannot end the
         * capture (the origin still must; the real driver's effect on the capture was not
         * verified: here it is invalidated). */
        if (c != NULL) {
            fake__capture_invalidate(c);
        }
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
        goto out;
    }
    int joined = c->invalidated ? 1 : capture_joined(c);
    if (c->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (joined < 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!joined) {
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    } else if (fake__vec_push(&fake__g.graphs, c->graph) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake__g.live++;
        *graph = c->graph;
        c->graph = NULL; /* the caller's now */
    }
    /* Whatever the outcome, every stream of the capture leaves capture mode, usable again. */
    fake__capture_discard(c);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status) {
    FAKE_ENTER(cuStreamIsCapturing);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && status == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *status = s->capture == NULL        ? CU_STREAM_CAPTURE_STATUS_NONE
                  : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                            : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- building graphs ------------------------------------------------------------------------ */

CUresult fake_cuGraphCreate(CUgraph *graph, unsigned int flags) {
    FAKE_ENTER(cuGraphCreate);
    struct CUctx_st *ctx;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS && (graph == NULL || flags != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        struct CUgraph_st *g = calloc(1, sizeof *g);
        if (g == NULL || fake__vec_push(&fake__g.graphs, g) != 0) {
            free(g);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            g->ctx = ctx;
            g->id = ++fake__g.next_id;
            fake__g.live++;
            *graph = g;
        }
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuGraphDestroy(CUgraph h) {
    FAKE_ENTER(cuGraphDestroy);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    CUresult fault;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current_release(&ctx, &fault);
    if (r == CUDA_SUCCESS) {
        r = graph_get(h, &g);
    }
    if (r == CUDA_SUCCESS) {
        /* Execs copied what they need: they outlive their graph, as in CUDA. */
        fake__vec_remove(&fake__g.graphs, g);
        graph_free(g);
        fake__g.live--;
        r = fault;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* A copy of every node, with its dependencies: a captured graph's too (foreign work, a
 * collective's nodes), as CUDA copies every parameter. */
CUresult fake_cuGraphClone(CUgraph *clone, CUgraph h) {
    FAKE_ENTER(cuGraphClone);
    struct CUctx_st *ctx;
    struct CUgraph_st *g, *copy = NULL;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = graph_get(h, &g);
    }
    if (r == CUDA_SUCCESS && clone == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    r = CUDA_ERROR_OUT_OF_MEMORY;
    copy = calloc(1, sizeof *copy);
    if (copy == NULL) {
        goto out;
    }
    copy->ctx = g->ctx;
    copy->id = ++fake__g.next_id;
    copy->cloned_from = g->id;
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct CUgraphNode_st *node = g->nodes.v[i];
        struct CUgraphNode_st *added;
        if (graph_add(copy, &node->deps, &node->work, &added) != CUDA_SUCCESS) {
            goto out_free;
        }
    }
    if (fake__vec_push(&fake__g.graphs, copy) != 0) {
        goto out_free;
    }
    fake__g.live++;
    *clone = copy;
    r = CUDA_SUCCESS;
    goto out;
out_free:
    graph_free(copy);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* (lock held) The common part of cuGraphAdd*Node, once the graph is checked and the node's
 * work made: the dependencies must be nodes of this graph. */
static CUresult add_node(CUgraphNode *out, struct CUgraph_st *g, const CUgraphNode *deps,
                         size_t n_deps, const struct fake_work *work) {
    if (out == NULL || (n_deps > 0 && deps == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_ids ids = {0};
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < n_deps && r == CUDA_SUCCESS; i++) {
        size_t at = 0;
        while (at < g->nodes.n && g->nodes.v[at] != deps[i]) {
            at++;
        }
        if (at == g->nodes.n) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else if (fake__ids_add(&ids, at) != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    struct CUgraphNode_st *node;
    if (r == CUDA_SUCCESS) {
        r = graph_add(g, &ids, work, &node);
    }
    if (r == CUDA_SUCCESS) {
        *out = node;
    }
    fake__ids_free(&ids);
    return r;
}

/* (lock held) The current context and the graph, for cuGraphAdd*Node. */
static CUresult add_begin(CUgraph h, struct CUgraph_st **g) {
    struct CUctx_st *ctx;
    CUresult r = fake__current(&ctx);
    return r == CUDA_SUCCESS ? graph_get(h, g) : r;
}

/* A context argument: NULL (taken as the current one, leniently) or an active primary one. */
static CUresult ctx_argument(CUcontext hctx) {
    if (hctx == NULL) {
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < fake__cfg.devices; i++) {
        if (hctx == &fake__g.ctx[i] && hctx->retains > 0) {
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_CONTEXT;
}

/* (lock held) A kernel node's work from its parameters, checked as a launch is. */
static CUresult kernel_node_work(const CUDA_KERNEL_NODE_PARAMS_v2 *params, struct fake_work *out) {
    if (params == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params->func == NULL) {
        CUresult r = ctx_argument(params->ctx); /* the context the kernel runs in */
        if (r != CUDA_SUCCESS) {
            return r;
        }
    }
    /* `kern` is used when `func` is NULL; a func is a kernel cast, as the backend does. */
    CUkernel k = params->func != NULL ? (CUkernel)(void *)params->func : params->kern;
    return fake__kernel_work(k, params->gridDimX, params->gridDimY, params->gridDimZ,
                             params->blockDimX, params->blockDimY, params->blockDimZ,
                             params->sharedMemBytes, params->kernelParams, params->extra, out);
}

CUresult fake_cuGraphAddKernelNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    FAKE_ENTER(cuGraphAddKernelNode);
    struct CUgraph_st *g;
    struct fake_work work;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = add_begin(h, &g);
    if (r == CUDA_SUCCESS) {
        r = kernel_node_work(params, &work);
    }
    if (r == CUDA_SUCCESS) {
        r = add_node(node, g, deps, n_deps, &work);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* One side of a CUDA_MEMCPY3D: its address and whether it is device memory. Simplified:
 * host, device and unified memory only (no arrays). */
static CUresult copy_side(CUmemorytype type, uintptr_t host, CUdeviceptr device, size_t x,
                          size_t bytes, uintptr_t *addr, int *is_device) {
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *addr = host + x;
        *is_device = 0;
        break;
    case CU_MEMORYTYPE_DEVICE:
        *addr = (uintptr_t)device + x;
        *is_device = 1;
        break;
    case CU_MEMORYTYPE_UNIFIED: /* a unified address: device memory if it lies in some */
        *addr = (uintptr_t)device + x;
        *is_device = fake__range_find(*addr, bytes, FAKE_DEVICE_MEMORY) != NULL;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (*addr == 0 || bytes > UINTPTR_MAX - *addr ||
        (*is_device && fake__range_find(*addr, bytes, FAKE_DEVICE_MEMORY) == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_MEMCPY3D *copy, CUcontext hctx) {
    FAKE_ENTER(cuGraphAddMemcpyNode);
    struct CUgraph_st *g;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = add_begin(h, &g);
    if (r == CUDA_SUCCESS) {
        r = ctx_argument(hctx);
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    FAKE_FAIL_IF(copy == NULL || copy->WidthInBytes == 0 || copy->Height == 0 || copy->Depth == 0,
                 CUDA_ERROR_INVALID_VALUE, out);
    /* Simplified: 1-D copies only. */
    if (copy->Height != 1 || copy->Depth != 1 || copy->srcY != 0 || copy->srcZ != 0 ||
        copy->dstY != 0 || copy->dstZ != 0 || copy->srcLOD != 0 || copy->dstLOD != 0) {
        r = CUDA_ERROR_NOT_SUPPORTED;
        goto out;
    }
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    work.u.copy.bytes = copy->WidthInBytes;
    r = copy_side(copy->srcMemoryType, (uintptr_t)copy->srcHost, copy->srcDevice, copy->srcXInBytes,
                  copy->WidthInBytes, &work.u.copy.src, &work.u.copy.src_device);
    if (r == CUDA_SUCCESS) {
        r = copy_side(copy->dstMemoryType, (uintptr_t)copy->dstHost, copy->dstDevice,
                      copy->dstXInBytes, copy->WidthInBytes, &work.u.copy.dst,
                      &work.u.copy.dst_device);
    }
    if (r == CUDA_SUCCESS) {
        r = add_node(node, g, deps, n_deps, &work);
    }
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuGraphAddMemsetNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_MEMSET_NODE_PARAMS *params,
                                   CUcontext hctx) {
    FAKE_ENTER(cuGraphAddMemsetNode);
    struct CUgraph_st *g;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = add_begin(h, &g);
    if (r == CUDA_SUCCESS) {
        r = ctx_argument(hctx);
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    unsigned es = params != NULL ? params->elementSize : 0;
    if (params == NULL || (es != 1 && es != 2 && es != 4) || params->width == 0 ||
        params->height == 0 || params->dst % es != 0 || params->width > SIZE_MAX / es) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (params->height != 1) { /* simplified: one row */
        r = CUDA_ERROR_NOT_SUPPORTED;
        goto out;
    }
    FAKE_FAIL_IF(fake__range_find((uintptr_t)params->dst, params->width * es, FAKE_DEVICE_MEMORY) ==
                     NULL,
                 CUDA_ERROR_INVALID_VALUE, out);
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    work.u.fill.dst = (uintptr_t)params->dst;
    work.u.fill.value = es == 4 ? params->value : params->value & ((1u << (8 * es)) - 1);
    work.u.fill.element_size = es;
    work.u.fill.count = params->width;
    r = add_node(node, g, deps, n_deps, &work);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuGraphAddHostNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                 size_t n_deps, const CUDA_HOST_NODE_PARAMS *params) {
    FAKE_ENTER(cuGraphAddHostNode);
    struct CUgraph_st *g;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = add_begin(h, &g);
    if (r == CUDA_SUCCESS && (params == NULL || params->fn == NULL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_HOST};
        work.u.host.fn = params->fn;
        work.u.host.data = params->userData;
        r = add_node(node, g, deps, n_deps, &work);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- executable graphs ---------------------------------------------------------------------- */

static struct fake_snapshot *snapshot_of(const struct CUgraph_st *g) {
    struct fake_snapshot *snap = malloc(sizeof *snap + g->nodes.n * sizeof(struct fake_work));
    if (snap != NULL) {
        snap->refs = 1;
        snap->n = g->nodes.n;
        for (size_t i = 0; i < g->nodes.n; i++) {
            snap->nodes[i] = ((const struct CUgraphNode_st *)g->nodes.v[i])->work;
        }
    }
    return snap;
}

void fake__snapshot_release(struct fake_snapshot *snap) {
    if (--snap->refs == 0) {
        free(snap);
    }
}

static void exec_free(struct CUgraphExec_st *x) {
    if (x->deps != NULL) {
        for (size_t i = 0; i < x->n; i++) {
            fake__ids_free(&x->deps[i]);
        }
        free(x->deps);
    }
    if (x->snap != NULL) {
        fake__snapshot_release(x->snap);
    }
    free(x);
}

void fake__exec_release(struct CUgraphExec_st *x) {
    if (--x->refs == 0) {
        exec_free(x);
    }
}

static CUresult exec_get(CUgraphExec h, struct CUgraphExec_st **out) {
    if (h == NULL || !fake__vec_has(&fake__g.execs, h)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *out = h;
    return CUDA_SUCCESS;
}

long fake__graphs_reclaim(struct CUctx_st *ctx) {
    long n = 0;
    for (size_t i = fake__g.graphs.n; i-- > 0;) {
        struct CUgraph_st *g = fake__g.graphs.v[i];
        if (g->ctx == ctx) {
            fake__vec_remove(&fake__g.graphs, g);
            graph_free(g);
            n++;
        }
    }
    for (size_t i = fake__g.execs.n; i-- > 0;) {
        struct CUgraphExec_st *x = fake__g.execs.v[i];
        if (x->ctx == ctx) {
            fake__vec_remove(&fake__g.execs, x);
            fake__exec_release(x); /* the context's streams drained: the last reference */
            n++;
        }
    }
    return n;
}

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph h, unsigned long long flags) {
    FAKE_ENTER(cuGraphInstantiateWithFlags);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    struct CUgraphExec_st *x = NULL;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = graph_get(h, &g);
    }
    if (r == CUDA_SUCCESS &&
        (exec == NULL ||
         (flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    r = CUDA_ERROR_OUT_OF_MEMORY;
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        goto out;
    }
    x->ctx = ctx;
    x->refs = 1;
    x->n = g->nodes.n;
    x->deps = calloc(x->n > 0 ? x->n : 1, sizeof *x->deps);
    x->snap = snapshot_of(g);
    x->origin = g;
    x->origin_id = g->id;
    if (x->deps == NULL || x->snap == NULL) {
        goto out_free;
    }
    for (size_t i = 0; i < x->n; i++) {
        if (fake__ids_union(&x->deps[i], &((struct CUgraphNode_st *)g->nodes.v[i])->deps) != 0) {
            goto out_free;
        }
    }
    if (fake__vec_push(&fake__g.execs, x) != 0) {
        goto out_free;
    }
    fake__g.live++;
    *exec = x;
    r = CUDA_SUCCESS;
    goto out;
out_free:
    exec_free(x);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* cuGraphLaunch and cuGraphUpload: both ordered behind earlier launches of the exec. */
static CUresult exec_submit(CUgraphExec hx, CUstream h, int launch) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct CUgraphExec_st *x;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = exec_get(hx, &x);
    }
    if (r == CUDA_SUCCESS) {
        r = fake__stream_get(h, ctx, &s);
    }
    if (r == CUDA_SUCCESS && x->ctx != ctx) {
        r = CUDA_ERROR_INVALID_CONTEXT; /* the real driver's code here was not verified */
    }
    if (r == CUDA_SUCCESS && s->capture != NULL) {
        /* Simplified: CUDA records a child graph node; the backend never needs one. */
        fake__capture_invalidate(s->capture);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (r == CUDA_SUCCESS) {
        r = fake__submit_exec(s, x, launch);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream h) {
    FAKE_ENTER(cuGraphUpload);
    return exec_submit(exec, h, 0);
}

CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream h) {
    FAKE_ENTER(cuGraphLaunch);
    return exec_submit(exec, h, 1);
}

/* An exec still queued is freed when its last replay finishes, as in CUDA. */
CUresult fake_cuGraphExecDestroy(CUgraphExec hx) {
    FAKE_ENTER(cuGraphExecDestroy);
    struct CUctx_st *ctx;
    struct CUgraphExec_st *x;
    CUresult fault;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current_release(&ctx, &fault);
    if (r == CUDA_SUCCESS) {
        r = exec_get(hx, &x);
    }
    if (r == CUDA_SUCCESS) {
        fake__vec_remove(&fake__g.execs, x);
        fake__g.live--;
        fake__exec_release(x);
        r = fault;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* Same node count, and node by node the same dependencies, type and (for kernels) kernel: the
 * new parameters replace the old for later launches. Otherwise nothing changes and info says
 * which node differs first. */
CUresult fake_cuGraphExecUpdate(CUgraphExec hx, CUgraph h, CUgraphExecUpdateResultInfo *info) {
    FAKE_ENTER(cuGraphExecUpdate);
    struct CUctx_st *ctx;
    struct CUgraphExec_st *x;
    struct CUgraph_st *g;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = exec_get(hx, &x);
    }
    if (r == CUDA_SUCCESS) {
        r = graph_get(h, &g);
    }
    if (r == CUDA_SUCCESS && info == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    info->errorNode = NULL;
    info->errorFromNode = NULL;
    if (g->nodes.n != x->n) { /* the first node the exec lacks, if the graph has more */
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        info->errorNode = g->nodes.n > x->n ? g->nodes.v[x->n] : NULL;
    }
    for (size_t i = 0; i < g->nodes.n && info->result == CU_GRAPH_EXEC_UPDATE_SUCCESS; i++) {
        struct CUgraphNode_st *node = g->nodes.v[i];
        const struct fake_work *old = &x->snap->nodes[i];
        if (node->deps.n != x->deps[i].n ||
            (node->deps.n > 0 &&
             memcmp(node->deps.v, x->deps[i].v, node->deps.n * sizeof *node->deps.v) != 0)) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        } else if (node->work.type != old->type) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        } else if (node->work.type == CU_GRAPH_NODE_TYPE_KERNEL &&
                   node->work.u.kernel.kernel != old->u.kernel.kernel) {
            info->result = CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED;
        }
        if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            info->errorNode = node;
        }
    }
    FAKE_FAIL_IF(info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                 out);
    struct fake_snapshot *snap = snapshot_of(g);
    if (snap == NULL) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    fake__snapshot_release(x->snap); /* queued launches keep the version they hold */
    x->snap = snap;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- capture info and per-node updates ------------------------------------------------------ */

/* What a capturing stream's next node will depend on: the frontier's nodes, with default edge
 * data (the driver has no other kind). The arrays are the stream's, valid until its next call
 * of this, as CUDA's are until the next call on the stream. Outside an active capture only the
 * status is written. */
CUresult fake_cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                                     CUgraph *graph, const CUgraphNode **deps,
                                     const CUgraphEdgeData **edges, size_t *n_deps) {
    FAKE_ENTER(cuStreamGetCaptureInfo);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && (status == NULL || (edges != NULL && deps == NULL))) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    struct fake_capture *c = s->capture;
    *status = c == NULL        ? CU_STREAM_CAPTURE_STATUS_NONE
              : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        goto out;
    }
    size_t n = s->frontier.n;
    if (deps != NULL && n > s->info_cap) {
        CUgraphNode *d = realloc(s->info_deps, n * sizeof *d);
        if (d != NULL) {
            s->info_deps = d;
        }
        CUgraphEdgeData *e = realloc(s->info_edges, n * sizeof *e);
        if (e != NULL) {
            s->info_edges = e;
        }
        FAKE_FAIL_IF(d == NULL || e == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
        s->info_cap = n;
    }
    if (id != NULL) {
        *id = c->id;
    }
    if (graph != NULL) {
        *graph = c->graph;
    }
    if (deps != NULL) {
        for (size_t i = 0; i < n; i++) {
            s->info_deps[i] = c->graph->nodes.v[s->frontier.v[i]];
            memset(&s->info_edges[i], 0, sizeof s->info_edges[i]);
        }
        *deps = s->info_deps;
        if (edges != NULL) {
            *edges = s->info_edges;
        }
    }
    if (n_deps != NULL) {
        *n_deps = n;
    }
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* (lock held) The node h of a live graph (a capture's too) and its index there, or NULL. */
static struct CUgraph_st *graph_of_node(CUgraphNode h, size_t *index) {
    for (size_t i = 0; i < fake__g.graphs.n + fake__g.captures.n; i++) {
        struct CUgraph_st *g =
            i < fake__g.graphs.n
                ? fake__g.graphs.v[i]
                : ((struct fake_capture *)fake__g.captures.v[i - fake__g.graphs.n])->graph;
        for (size_t j = 0; g != NULL && j < g->nodes.n; j++) {
            if (g->nodes.v[j] == h) {
                *index = j;
                return g;
            }
        }
    }
    return NULL;
}

/* A kernel node of a graph (not an exec) takes new parameters, checked as a launch is. */
CUresult fake_cuGraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    FAKE_ENTER(cuGraphKernelNodeSetParams);
    struct CUctx_st *ctx;
    struct fake_work work;
    size_t at = 0;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_of_node(h, &at) : NULL;
    if (r == CUDA_SUCCESS && (g == NULL || h->work.type != CU_GRAPH_NODE_TYPE_KERNEL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = kernel_node_work(params, &work);
    }
    if (r == CUDA_SUCCESS) {
        h->work = work;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* The node of a clone that copies `node`: the clone's node at the same place, the clone being
 * one of the node's graph (clones keep their original's order). */
CUresult fake_cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode node, CUgraph clone) {
    FAKE_ENTER(cuGraphNodeFindInClone);
    struct CUctx_st *ctx;
    struct CUgraph_st *copy;
    size_t at = 0;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = graph_get(clone, &copy);
    }
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_of_node(node, &at) : NULL;
    if (r == CUDA_SUCCESS &&
        (out == NULL || g == NULL || copy->cloned_from != g->id || at >= copy->nodes.n)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *out = copy->nodes.v[at];
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* A kernel node of an exec, named by its node in the graph the exec was instantiated from,
 * takes new parameters (another grid, other arguments, even another kernel) for the launches
 * queued after this; those queued before keep the snapshot they hold. The graph must still
 * live (CUDA leaves the call undefined otherwise; refused here). */
CUresult fake_cuGraphExecKernelNodeSetParams(CUgraphExec hx, CUgraphNode h,
                                             const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    FAKE_ENTER(cuGraphExecKernelNodeSetParams);
    struct CUctx_st *ctx;
    struct CUgraphExec_st *x;
    struct fake_work work;
    size_t at = 0;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = exec_get(hx, &x);
    }
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_of_node(h, &at) : NULL;
    if (r == CUDA_SUCCESS && (g == NULL || g != x->origin || g->id != x->origin_id || at >= x->n ||
                              x->snap->nodes[at].type != CU_GRAPH_NODE_TYPE_KERNEL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = kernel_node_work(params, &work);
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    struct fake_snapshot *snap = malloc(sizeof *snap + x->n * sizeof(struct fake_work));
    FAKE_FAIL_IF(snap == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    snap->refs = 1;
    snap->n = x->n;
    memcpy(snap->nodes, x->snap->nodes, x->n * sizeof(struct fake_work));
    snap->nodes[at] = work;
    fake__snapshot_release(x->snap); /* queued launches keep the version they hold */
    x->snap = snap;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}
