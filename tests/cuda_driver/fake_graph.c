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
 *
 * Conditional nodes, their bodies and handles, and what a replay does with them are
 * fake_cond.c's; here a body is a graph like any other, except that its node owns it.
 */
#include "fake_cuda_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- graphs --------------------------------------------------------------------------------- */

void fake__graph_free(struct CUgraph_st *g) {
    for (size_t i = 0; i < fake__g.captures.n; i++) {
        struct fake_capture *c = fake__g.captures.v[i];
        if (c->into && c->graph == g) { /* it cannot record any more */
            c->graph = NULL;
            fake__capture_invalidate(c);
        }
    }
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct CUgraphNode_st *node = g->nodes.v[i];
        fake__cond_free_bodies(&node->work);
        fake__ids_free(&node->deps);
        free(node);
    }
    for (size_t i = 0; i < g->conds.n; i++) {
        free(g->conds.v[i]);
    }
    fake__vec_free(&g->conds);
    fake__vec_free(&g->nodes);
    if (g->parent != NULL) {
        fake__vec_remove(&fake__g.bodies, g);
    }
    free(g);
}

static void graph_free(void *obj) { fake__graph_free(obj); }

struct CUgraph_st *fake__graph_new(struct CUctx_st *ctx) {
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (g != NULL) {
        g->ctx = ctx;
        g->id = ++fake__g.next_id;
    }
    return g;
}

CUresult fake__graph_add(struct CUgraph_st *g, const struct fake_ids *deps,
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

/* (lock held) The live graph h of its own (not a body). A body is part of its conditional node's
 * graph: it is never destroyed, instantiated, cloned or updated alone (CUDA_ERROR_INVALID_VALUE;
 * the real driver's code here was not verified). */
static CUresult own_graph(CUgraph h, struct CUgraph_st **g) {
    CUresult r = fake__handle(&fake__g.graphs, h, (void **)g);
    return r == CUDA_ERROR_INVALID_HANDLE && fake__vec_has(&fake__g.bodies, h)
               ? CUDA_ERROR_INVALID_VALUE
               : r;
}

/* (takes the lock, held on return whatever the result) The preamble of a graph call: the
 * calling thread's context, then the live graph h of its own. */
static CUresult lock_graph(CUgraph h, struct CUctx_st **ctx, struct CUgraph_st **g) {
    CUresult r = fake__lock_current(ctx);
    return r == CUDA_SUCCESS ? own_graph(h, g) : r;
}

/* ---- capture -------------------------------------------------------------------------------- */

void fake__capture_invalidate(struct fake_capture *c) { c->invalidated = 1; }

CUresult fake__capture_record(struct CUstream_st *s, const struct fake_work *work) {
    struct fake_capture *c = s->capture;
    if (c->invalidated) {
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; /* and nothing is recorded */
    }
    if (c->graph->parent != NULL && !fake__body_takes(work)) {
        return fake__not_capturing(s); /* a host function, in a conditional node's body */
    }
    /* The new frontier first, so running out of memory leaves the graph as it was. */
    struct fake_ids frontier = {0};
    if (fake__ids_add(&frontier, c->graph->nodes.n) != 0) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct CUgraphNode_st *node;
    CUresult r = fake__graph_add(c->graph, &s->frontier, work, &node);
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
    if (c->graph != NULL && !c->into) {
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

/* (lock held) A capture of ctx starting at s into `into` (NULL: a new, empty graph), or NULL
 * when out of memory. */
static struct fake_capture *capture_new(struct CUctx_st *ctx, struct CUstream_st *s,
                                        struct CUgraph_st *into) {
    struct fake_capture *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    c->ctx = ctx;
    c->origin = s;
    c->id = ++fake__g.next_id;
    c->into = into != NULL;
    c->graph = into != NULL ? into : fake__graph_new(ctx);
    if (c->graph == NULL || fake__vec_push(&c->members, s) != 0 ||
        fake__vec_push(&fake__g.captures, c) != 0) {
        fake__vec_free(&c->members);
        if (!c->into) {
            free(c->graph);
        }
        free(c);
        return NULL;
    }
    return c;
}

/* cuStreamBeginCapture (to_graph 0: into a new graph) and cuStreamBeginCaptureToGraph (into the
 * graph h, its first node depending on the n nodes deps of it). */
static CUresult capture_begin(CUstream hs, int to_graph, CUgraph h, const CUgraphNode *deps,
                              const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct CUgraph_st *into = NULL;
    struct fake_ids frontier = {0};
    CUresult r;
    FAKE_CHECK(fake__lock_stream(hs, &ctx, &s), out);
    /* Simplified: the mode is checked and ignored; GLOBAL and THREAD_LOCAL restrict nothing
     * (acg captures RELAXED). */
    FAKE_FAIL_IF(mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                     mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                     mode != CU_STREAM_CAPTURE_MODE_RELAXED,
                 CUDA_ERROR_INVALID_VALUE, out);
    FAKE_FAIL_IF(s->capture != NULL, CUDA_ERROR_ILLEGAL_STATE, out);
    if (to_graph) {
        FAKE_CHECK(fake__graph_find(h, &into), out);
        /* One capture at a time records into a graph: a graph another capture is building or
         * recording into is refused (the real driver's code here was not verified). */
        for (size_t i = 0; i < fake__g.captures.n; i++) {
            FAKE_FAIL_IF(((struct fake_capture *)fake__g.captures.v[i])->graph == into,
                         CUDA_ERROR_ILLEGAL_STATE, out);
        }
        FAKE_CHECK(fake__graph_deps(into, deps, edges, n, &frontier), out);
    }
    FAKE_FAIL_IF((s->capture = capture_new(ctx, s, into)) == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    fake__ids_free(&s->frontier);
    s->frontier = frontier;
    frontier = (struct fake_ids){0};
out:
    fake__ids_free(&frontier);
    return fake__unlock(r);
}

CUresult fake_cuStreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
    FAKE_ENTER(cuStreamBeginCapture);
    return capture_begin(h, 0, NULL, NULL, NULL, 0, mode);
}

/* Work queued on the stream is recorded into the graph h (a conditional node's body, or any
 * other graph the caller holds) until cuStreamEndCapture, which gives h back. */
CUresult fake_cuStreamBeginCaptureToGraph(CUstream hs, CUgraph h, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n,
                                          CUstreamCaptureMode mode) {
    FAKE_ENTER(cuStreamBeginCaptureToGraph);
    return capture_begin(hs, 1, h, deps, edges, n, mode);
}

/* (lock held) The end of capture c at its origin: the graph made the caller's (*graph, which may
 * be NULL for a capture into the caller's graph) when every fork joined back; whatever the
 * outcome, every stream of the capture leaves capture mode, usable again. A capture into a
 * graph leaves it what the capture made it, nodes recorded before a failure included (CUDA's
 * effect on the graph then was not verified). */
static CUresult capture_end(struct fake_capture *c, CUgraph *graph) {
    int joined = c->invalidated ? 1 : capture_joined(c);
    CUresult r = CUDA_SUCCESS;
    if (c->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (joined < 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!joined) {
        r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    } else if (c->into) {
        if (graph != NULL) {
            *graph = c->graph; /* the caller's still, not a new graph */
        }
    } else if (fake__vec_push(&fake__g.graphs, c->graph) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake__live(1);
        *graph = c->graph;
        c->graph = NULL; /* the caller's now */
    }
    fake__capture_discard(c);
    return r;
}

CUresult fake_cuStreamEndCapture(CUstream h, CUgraph *graph) {
    FAKE_ENTER(cuStreamEndCapture);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && graph == NULL && (s->capture == NULL || !s->capture->into)) {
        r = CUDA_ERROR_INVALID_VALUE; /* only a capture into the caller's graph needs none */
    }
    if (r != CUDA_SUCCESS) {
        return fake__unlock(r);
    }
    if (graph != NULL) {
        *graph = NULL;
    }
    struct fake_capture *c = s->capture;
    if (c != NULL && c->origin == s) {
        return fake__unlock(capture_end(c, graph));
    }
    /* Not an origin: not capturing at all, or a joined stream, which cannot end the capture (the
     * origin still must; the real driver's effect on the capture was not verified: here it is
     * invalidated). */
    if (c != NULL) {
        fake__capture_invalidate(c);
    }
    return fake__unlock(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
}

/* (lock held) What cuStreamIsCapturing and cuStreamGetCaptureInfo say of s. */
static CUstreamCaptureStatus capture_status(const struct CUstream_st *s) {
    return s->capture == NULL        ? CU_STREAM_CAPTURE_STATUS_NONE
           : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                     : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

CUresult fake_cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status) {
    FAKE_ENTER(cuStreamIsCapturing);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__given(fake__lock_stream(h, &ctx, &s), status);
    if (r == CUDA_SUCCESS) {
        *status = capture_status(s);
    }
    return fake__unlock(r);
}

/* ---- building graphs ------------------------------------------------------------------------ */

CUresult fake_cuGraphCreate(CUgraph *graph, unsigned int flags) {
    FAKE_ENTER(cuGraphCreate);
    struct CUctx_st *ctx;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS && (graph == NULL || flags != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = fake__publish(&fake__g.graphs, fake__graph_new(ctx), graph_free, (void **)graph);
    }
    return fake__unlock(r);
}

/* Execs copied what they need: they outlive their graph, as in CUDA. A conditional node's body
 * goes with its node's graph, never alone (own_graph). */
CUresult fake_cuGraphDestroy(CUgraph h) {
    FAKE_ENTER(cuGraphDestroy);
    CUresult r = fake__release(&fake__g.graphs, h, NULL, graph_free);
    if (r == CUDA_ERROR_INVALID_HANDLE) {
        struct CUgraph_st *g;
        pthread_mutex_lock(&fake__g.lock);
        r = fake__unlock(own_graph(h, &g));
    }
    return r;
}

/* A copy of every node of g, with its dependencies: a captured graph's too (foreign work, a
 * collective's nodes), as CUDA copies every parameter. NULL when out of memory. */
static struct CUgraph_st *graph_clone(const struct CUgraph_st *g) {
    struct CUgraph_st *copy = fake__graph_new(g->ctx);
    for (size_t i = 0; copy != NULL && i < g->nodes.n; i++) {
        const struct CUgraphNode_st *node = g->nodes.v[i];
        struct CUgraphNode_st *added;
        if (fake__graph_add(copy, &node->deps, &node->work, &added) != CUDA_SUCCESS) {
            graph_free(copy);
            copy = NULL;
        }
    }
    if (copy != NULL) {
        copy->cloned_from = g->id;
    }
    return copy;
}

/* A graph with conditional nodes is not cloned, as in CUDA (whose code for it, NOT_SUPPORTED
 * here, was not verified: its documentation lists only INVALID_VALUE). */
CUresult fake_cuGraphClone(CUgraph *clone, CUgraph h) {
    FAKE_ENTER(cuGraphClone);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    CUresult r = fake__given(lock_graph(h, &ctx, &g), clone);
    if (r == CUDA_SUCCESS && fake__graph_conditional(g, NULL)) {
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r == CUDA_SUCCESS) {
        r = fake__publish(&fake__g.graphs, graph_clone(g), graph_free, (void **)clone);
    }
    return fake__unlock(r);
}

/* A context argument: NULL (taken as the current one, leniently) or an active primary one. */
CUresult fake__ctx_argument(CUcontext hctx) {
    return hctx == NULL || fake__ctx_active(hctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* (lock held) A kernel node's work from its CUDA_KERNEL_NODE_PARAMS_v2, checked as a launch
 * is. */
CUresult fake__kernel_node_work(const void *p, struct fake_work *out) {
    const CUDA_KERNEL_NODE_PARAMS_v2 *params = p;
    if (params == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params->func == NULL) {
        CUresult r = fake__ctx_argument(params->ctx); /* the context the kernel runs in */
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

/* (lock held) A memcpy node's work from its CUDA_MEMCPY3D: simplified, 1-D copies only. */
CUresult fake__copy_node_work(const void *p, struct fake_work *work) {
    const CUDA_MEMCPY3D *copy = p;
    if (copy == NULL || copy->WidthInBytes == 0 || copy->Height == 0 || copy->Depth == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (copy->Height != 1 || copy->Depth != 1 || copy->srcY != 0 || copy->srcZ != 0 ||
        copy->dstY != 0 || copy->dstZ != 0 || copy->srcLOD != 0 || copy->dstLOD != 0) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *work = (struct fake_work){.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    work->u.copy.bytes = copy->WidthInBytes;
    CUresult r =
        copy_side(copy->srcMemoryType, (uintptr_t)copy->srcHost, copy->srcDevice, copy->srcXInBytes,
                  copy->WidthInBytes, &work->u.copy.src, &work->u.copy.src_device);
    if (r == CUDA_SUCCESS) {
        r = copy_side(copy->dstMemoryType, (uintptr_t)copy->dstHost, copy->dstDevice,
                      copy->dstXInBytes, copy->WidthInBytes, &work->u.copy.dst,
                      &work->u.copy.dst_device);
    }
    return r;
}

/* (lock held) A memset node's work from its CUDA_MEMSET_NODE_PARAMS: simplified, one row. */
CUresult fake__fill_node_work(const void *p, struct fake_work *work) {
    const CUDA_MEMSET_NODE_PARAMS *params = p;
    unsigned es = params != NULL ? params->elementSize : 0;
    if (params == NULL || (es != 1 && es != 2 && es != 4) || params->width == 0 ||
        params->height == 0 || params->dst % es != 0 || params->width > SIZE_MAX / es) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params->height != 1) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (fake__range_find((uintptr_t)params->dst, params->width * es, FAKE_DEVICE_MEMORY) == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *work = (struct fake_work){.type = CU_GRAPH_NODE_TYPE_MEMSET};
    work->u.fill.dst = (uintptr_t)params->dst;
    work->u.fill.value = es == 4 ? params->value : params->value & ((1u << (8 * es)) - 1);
    work->u.fill.element_size = es;
    work->u.fill.count = params->width;
    return CUDA_SUCCESS;
}

/* (lock held) A host node's work from its CUDA_HOST_NODE_PARAMS. */
CUresult fake__host_node_work(const void *p, struct fake_work *work) {
    const CUDA_HOST_NODE_PARAMS *params = p;
    if (params == NULL || params->fn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *work = (struct fake_work){.type = CU_GRAPH_NODE_TYPE_HOST};
    work->u.host.fn = params->fn;
    work->u.host.data = params->userData;
    return CUDA_SUCCESS;
}

/* cuGraphAdd*Node: the graph (a graph of its own, a capture's, a body), the context argument
 * (NULL where the entry point has none), the node's work made from its parameters by `make`,
 * which a body must allow (CUDA_ERROR_INVALID_VALUE, the real driver's code here not
 * verified), then its dependencies, which must be nodes of this graph. */
static CUresult add_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t n_deps,
                         CUcontext hctx, CUresult (*make)(const void *params, struct fake_work *),
                         const void *params) {
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    struct fake_work work;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = fake__graph_find(h, &g);
    }
    if (r == CUDA_SUCCESS) {
        r = fake__ctx_argument(hctx);
    }
    if (r == CUDA_SUCCESS) {
        r = make(params, &work);
    }
    if (r == CUDA_SUCCESS && (out == NULL || (g->parent != NULL && !fake__body_takes(&work)))) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_ids ids = {0};
    if (r == CUDA_SUCCESS) {
        r = fake__graph_deps(g, deps, NULL, n_deps, &ids);
    }
    struct CUgraphNode_st *node;
    if (r == CUDA_SUCCESS) {
        r = fake__graph_add(g, &ids, &work, &node);
    }
    if (r == CUDA_SUCCESS) {
        *out = node;
    }
    fake__ids_free(&ids);
    return fake__unlock(r);
}

CUresult fake_cuGraphAddKernelNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
    FAKE_ENTER(cuGraphAddKernelNode);
    return add_node(node, h, deps, n_deps, NULL, fake__kernel_node_work, params);
}

CUresult fake_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_MEMCPY3D *copy, CUcontext hctx) {
    FAKE_ENTER(cuGraphAddMemcpyNode);
    return add_node(node, h, deps, n_deps, hctx, fake__copy_node_work, copy);
}

CUresult fake_cuGraphAddMemsetNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                   size_t n_deps, const CUDA_MEMSET_NODE_PARAMS *params,
                                   CUcontext hctx) {
    FAKE_ENTER(cuGraphAddMemsetNode);
    return add_node(node, h, deps, n_deps, hctx, fake__fill_node_work, params);
}

CUresult fake_cuGraphAddHostNode(CUgraphNode *node, CUgraph h, const CUgraphNode *deps,
                                 size_t n_deps, const CUDA_HOST_NODE_PARAMS *params) {
    FAKE_ENTER(cuGraphAddHostNode);
    return add_node(node, h, deps, n_deps, NULL, fake__host_node_work, params);
}

/* ---- executable graphs ---------------------------------------------------------------------- */

/* Snapshots, with their conditional nodes' bodies, are fake_cond.c's. */

static void exec_free(void *obj) {
    struct CUgraphExec_st *x = obj;
    if (x->deps != NULL) {
        for (size_t i = 0; i < x->n; i++) {
            fake__ids_free(&x->deps[i]);
        }
        free(x->deps);
    }
    if (x->snap != NULL) {
        fake__snapshot_release(x->snap);
    }
    free(x->conds);
    free(x);
}

void fake__exec_release(struct CUgraphExec_st *x) {
    if (--x->refs == 0) {
        exec_free(x);
    }
}

/* An exec still queued is freed when its last replay finishes, as in CUDA. */
static void exec_drop(void *obj) { fake__exec_release(obj); }

CUresult fake_cuGraphExecDestroy(CUgraphExec hx) {
    FAKE_ENTER(cuGraphExecDestroy);
    return fake__release(&fake__g.execs, hx, NULL, exec_drop);
}

/* The context's streams drained: an exec's last reference is its handle's. fake__reclaim reads
 * each graph's and exec's context as its struct's first member (asserted in fake_cuda.c). */
void fake__graphs_reclaim(struct CUctx_st *ctx) {
    fake__reclaim(&fake__g.graphs, ctx, graph_free);
    fake__reclaim(&fake__g.execs, ctx, exec_drop);
}

/* (lock held) An exec of ctx copying g's nodes, and its conditional handles
 * (fake__exec_conds, whose refusals it returns). */
static CUresult exec_new(struct CUctx_st *ctx, const struct CUgraph_st *g,
                         struct CUgraphExec_st **out) {
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (x == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    x->ctx = ctx;
    x->refs = 1;
    x->n = g->nodes.n;
    x->origin = g;
    x->origin_id = g->id;
    CUresult r = fake__exec_conds(x, g);
    if (r == CUDA_SUCCESS) {
        x->deps = calloc(x->n > 0 ? x->n : 1, sizeof *x->deps);
        x->snap = fake__snapshot_of(g, x);
        int ok = x->deps != NULL && x->snap != NULL;
        for (size_t i = 0; i < x->n && ok; i++) {
            ok = fake__ids_union(&x->deps[i], &((struct CUgraphNode_st *)g->nodes.v[i])->deps) == 0;
        }
        r = ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        exec_free(x);
        return r;
    }
    *out = x;
    return CUDA_SUCCESS;
}

CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph h, unsigned long long flags) {
    FAKE_ENTER(cuGraphInstantiateWithFlags);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    struct CUgraphExec_st *x = NULL;
    CUresult r = lock_graph(h, &ctx, &g);
    if (r == CUDA_SUCCESS &&
        (exec == NULL ||
         (flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = exec_new(ctx, g, &x);
    }
    if (r == CUDA_SUCCESS) {
        r = fake__publish(&fake__g.execs, x, exec_free, (void **)exec);
    }
    return fake__unlock(r);
}

/* (takes the lock, held on return whatever the result) The preamble of an exec call: the
 * calling thread's context, then the live exec hx. */
static CUresult lock_exec(CUgraphExec hx, struct CUctx_st **ctx, struct CUgraphExec_st **x) {
    CUresult r = fake__lock_current(ctx);
    return r == CUDA_SUCCESS ? fake__handle(&fake__g.execs, hx, (void **)x) : r;
}

/* cuGraphLaunch and cuGraphUpload: both ordered behind earlier launches of the exec. */
static CUresult exec_submit(CUgraphExec hx, CUstream h, int launch) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct CUgraphExec_st *x;
    CUresult r = lock_exec(hx, &ctx, &x);
    if (r == CUDA_SUCCESS) {
        r = fake__stream_get(h, ctx, &s);
    }
    if (r == CUDA_SUCCESS && x->ctx != ctx) {
        r = CUDA_ERROR_INVALID_CONTEXT; /* the real driver's code here was not verified */
    }
    if (r == CUDA_SUCCESS) {
        /* Simplified: CUDA records a child graph node; the backend never needs one. */
        r = fake__not_capturing(s);
    }
    if (r == CUDA_SUCCESS) {
        r = fake__submit_exec(s, x, launch);
    }
    return fake__unlock(r);
}

CUresult fake_cuGraphUpload(CUgraphExec exec, CUstream h) {
    FAKE_ENTER(cuGraphUpload);
    return exec_submit(exec, h, 0);
}

CUresult fake_cuGraphLaunch(CUgraphExec exec, CUstream h) {
    FAKE_ENTER(cuGraphLaunch);
    return exec_submit(exec, h, 1);
}

/* (lock held) What keeps g's nodes from updating x's (cuGraphExecUpdate's info: result and
 * errorNode), CU_GRAPH_EXEC_UPDATE_SUCCESS when nothing does. */
static void update_check(const struct CUgraphExec_st *x, const struct CUgraph_st *g,
                         CUgraphExecUpdateResultInfo *info) {
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
}

/* (lock held) Makes snap the parameters of x's later launches; queued ones keep the version they
 * hold. */
static void exec_snapshot(struct CUgraphExec_st *x, struct fake_snapshot *snap) {
    fake__snapshot_release(x->snap);
    x->snap = snap;
}

/* Same node count, and node by node the same dependencies, type and (for kernels) kernel: the
 * new parameters replace the old for later launches. Otherwise nothing changes and info says
 * which node differs first. Simplified: an exec or a graph with conditional nodes (or handles)
 * is never updated (CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, the graph's first conditional
 * node named), where CUDA updates the nodes of their bodies. */
CUresult fake_cuGraphExecUpdate(CUgraphExec hx, CUgraph h, CUgraphExecUpdateResultInfo *info) {
    FAKE_ENTER(cuGraphExecUpdate);
    struct CUctx_st *ctx;
    struct CUgraphExec_st *x;
    struct CUgraph_st *g;
    CUresult r;
    FAKE_CHECK(lock_exec(hx, &ctx, &x), out);
    FAKE_CHECK(own_graph(h, &g), out);
    FAKE_FAIL_IF(info == NULL, CUDA_ERROR_INVALID_VALUE, out);
    update_check(x, g, info);
    struct CUgraphNode_st *first = NULL;
    if (fake__graph_conditional(g, &first) || x->n_conds > 0) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
        info->errorNode = first;
    }
    FAKE_FAIL_IF(info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                 out);
    struct fake_snapshot *snap = fake__snapshot_of(g, x);
    if (snap == NULL) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    exec_snapshot(x, snap);
out:
    return fake__unlock(r);
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
    CUresult r;
    FAKE_CHECK(fake__lock_stream(h, &ctx, &s), out);
    FAKE_FAIL_IF(status == NULL || (edges != NULL && deps == NULL), CUDA_ERROR_INVALID_VALUE, out);
    struct fake_capture *c = s->capture;
    if ((*status = capture_status(s)) != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
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
    return fake__unlock(r);
}

/* (lock held) The node h of a live graph (a capture's, a body) and its index there, or NULL. */
static struct CUgraph_st *graph_of_node(CUgraphNode h, size_t *index) {
    const size_t n_graphs = fake__g.graphs.n, n_bodies = fake__g.bodies.n;
    for (size_t i = 0; i < n_graphs + n_bodies + fake__g.captures.n; i++) {
        struct CUgraph_st *g =
            i < n_graphs ? fake__g.graphs.v[i]
            : i < n_graphs + n_bodies
                ? fake__g.bodies.v[i - n_graphs]
                : ((struct fake_capture *)fake__g.captures.v[i - n_graphs - n_bodies])->graph;
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
    CUresult r = fake__lock_current(&ctx);
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_of_node(h, &at) : NULL;
    if (r == CUDA_SUCCESS && (g == NULL || h->work.type != CU_GRAPH_NODE_TYPE_KERNEL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = fake__kernel_node_work(params, &work);
    }
    if (r == CUDA_SUCCESS) {
        h->work = work;
    }
    return fake__unlock(r);
}

/* The node of a clone that copies `node`: the clone's node at the same place, the clone being
 * one of the node's graph (clones keep their original's order). */
CUresult fake_cuGraphNodeFindInClone(CUgraphNode *out, CUgraphNode node, CUgraph clone) {
    FAKE_ENTER(cuGraphNodeFindInClone);
    struct CUctx_st *ctx;
    struct CUgraph_st *copy;
    size_t at = 0;
    CUresult r = lock_graph(clone, &ctx, &copy);
    struct CUgraph_st *g = r == CUDA_SUCCESS ? graph_of_node(node, &at) : NULL;
    if (r == CUDA_SUCCESS &&
        (out == NULL || g == NULL || copy->cloned_from != g->id || at >= copy->nodes.n)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *out = copy->nodes.v[at];
    }
    return fake__unlock(r);
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
    CUresult r;
    FAKE_CHECK(lock_exec(hx, &ctx, &x), out);
    struct CUgraph_st *g = graph_of_node(h, &at);
    FAKE_FAIL_IF(g == NULL || g != x->origin || g->id != x->origin_id || at >= x->n ||
                     x->snap->nodes[at].type != CU_GRAPH_NODE_TYPE_KERNEL,
                 CUDA_ERROR_INVALID_VALUE, out);
    FAKE_CHECK(fake__kernel_node_work(params, &work), out);
    struct fake_snapshot *snap = fake__snapshot_copy(x->snap);
    FAKE_FAIL_IF(snap == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    snap->nodes[at] = work; /* a kernel's: nothing of the old to release */
    exec_snapshot(x, snap);
out:
    return fake__unlock(r);
}
