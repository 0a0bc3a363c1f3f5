/* graph.c — the cuda backend's graphs: CUDA stream capture in relaxed mode (acg's ledger
 * enforces acg's rules, so CUDA's own restrictions on other threads' calls are not wanted),
 * instantiation with an upload, replay, and update from the source graph's own capture (or,
 * where its memory differs, from a graph built from the ledger).
 *
 * While a capture runs, the core hands every piece of captured work to the normal slots and
 * CUDA records it; a fork is the core's event record plus a wait on it, which is how CUDA joins
 * another stream to a capture. An abandoned or invalidated capture must still be ended on its
 * origin stream before the streams can be used again, and CUDA ends one only when every forked
 * stream was joined back: abort joins them, ends it, and drops what was recorded.
 *
 * Per-node updates need the CUDA node of each of acg's kernel launches: right after a captured
 * launch, the stream's capture dependencies are exactly the node it added
 * (cuStreamGetCaptureInfo), and the core hands launches over in its ledger's order, so the k-th
 * node recorded is the description's k-th kernel node. A graph built from the ledger knows its
 * nodes; a clone finds them with cuGraphNodeFindInClone. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* The core's recording is a cu_recording; these are the only casts between them. */
static inline cu_recording *crec(acg__bk_recording *r) { return (cu_recording *)r; }
static inline acg__bk_recording *bk_rec(cu_recording *r) { return (acg__bk_recording *)r; }

acg_status acg__cu_capture_begin(acg__bk_stream *stream, acg__bk_recording **rec) {
    static const char fn[] = "acg_stream_begin_capture";
    cu_stream *s = acg__cu_stream(stream);
    cu_recording *r = acg__new(sizeof *r, fn);
    if (r == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        st = CU(fn, cuStreamBeginCapture, s->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    }
    if (st != ACG_OK) {
        acg__free(r);
        return st;
    }
    r->origin = s;
    s->rec = r;
    *rec = bk_rec(r);
    return ACG_OK;
}

/* The stream joins in CUDA with the wait the core issues next; here it is only remembered, so
 * that abort can join it back. */
acg_status acg__cu_capture_join(acg__bk_recording *rec, acg__bk_stream *stream) {
    cu_recording *r = crec(rec);
    if (!acg__grow((void **)&r->joined, &r->cap_joined, r->n_joined + 1, sizeof *r->joined)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "cuda: out of memory recording the capture");
    }
    r->joined[r->n_joined++] = acg__cu_stream(stream);
    acg__cu_stream(stream)->rec = r;
    return ACG_OK;
}

acg_status acg__cu_capture_kernel(cu_stream *s, const char *fn) {
    cu_recording *r = s->rec;
    if (!acg__cu.node_update) {
        return ACG_OK; /* no per-node updates: nothing to learn */
    }
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    acg_status st = CU(fn, cuStreamGetCaptureInfo, s->stream, &status, NULL, NULL, &deps, NULL, &n);
    if (st == ACG_OK &&
        !acg__grow((void **)&r->nodes, &r->cap_nodes, r->n_nodes + 1, sizeof *r->nodes)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory recording the capture", fn);
    }
    if (st == ACG_OK) {
        /* A node CUDA did not name stays NULL, which the driver refuses should an update of it
         * come (an active capture always names it). One in a loop's body lies in the
         * conditional node's graph, which CUDA updates only whole: NULL too (refused). */
        r->nodes[r->n_nodes++] = n == 1 && s->n_loops == 0 ? deps[0] : NULL;
    }
    return st;
}

/* Every stream of the recording leaves it; the loops' counters it still holds are freed. */
static void free_recording(cu_recording *r) {
    static const char fn[] = "acg_stream_end_capture";
    r->origin->rec = NULL;
    for (uint32_t i = 0; i < r->n_joined; i++) {
        r->joined[i]->rec = NULL;
    }
    for (uint32_t i = 0; i < r->n_counters; i++) {
        CU_RELEASE(fn, cuMemFree, r->counters[i]);
    }
    acg__free(r->counters);
    acg__free(r->nodes);
    acg__free(r->joined);
    acg__free(r);
}

/* Instantiates graph, which the exec keeps, and uploads it on `upload` (when not NULL), so the
 * first replay costs what the others do. */
static acg_status instantiate(cu_device *d, CUgraph graph, CUstream upload, cu_exec **out,
                              const char *fn) {
    cu_exec *e = acg__new(sizeof *e, fn);
    if (e == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    e->dev = d;
    acg_status st = CU(fn, cuGraphInstantiateWithFlags, &e->exec, graph, 0);
    if (st == ACG_OK && upload != NULL && acg__cu.cuGraphUpload != NULL) {
        st = CU(fn, cuGraphUpload, e->exec, upload);
        if (st != ACG_OK) {
            CU_RELEASE(fn, cuGraphExecDestroy, e->exec);
        }
    }
    if (st != ACG_OK) {
        acg__free(e);
        return st;
    }
    e->graph = graph;
    *out = e;
    return ACG_OK;
}

/* Ends the capture on every stream and drops what it recorded. Every forked stream is joined
 * back first, so ending on the origin ends the capture everywhere; an invalidated capture
 * refuses the joins, and CUDA then ends it whole. Failures change nothing: the streams are
 * checked afterwards, and one still capturing is logged. */
static void end_everywhere(cu_recording *r, const char *fn) {
    cu_stream *s = r->origin;
    acg__cu_enter(s->dev, fn);
    acg__cu_loops_unwind(s, fn);
    for (uint32_t i = 0; i < r->n_joined; i++) {
        acg__cu_loops_unwind(r->joined[i], fn);
    }
    CUevent ev = NULL;
    if (r->n_joined != 0 && CU(fn, cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING) == ACG_OK) {
        for (uint32_t i = 0; i < r->n_joined; i++) {
            if (CU(fn, cuEventRecord, ev, r->joined[i]->stream) == ACG_OK) {
                CU(fn, cuStreamWaitEvent, s->stream, ev, 0);
            }
        }
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CU(fn, cuStreamIsCapturing, s->stream, &status) == ACG_OK &&
        status != CU_STREAM_CAPTURE_STATUS_NONE) {
        CUgraph graph = NULL;
        CU(fn, cuStreamEndCapture, s->stream, &graph);
        if (graph != NULL) {
            CU_RELEASE(fn, cuGraphDestroy, graph);
        }
    }
    if (ev != NULL) {
        CU_RELEASE(fn, cuEventDestroy, ev);
    }
    for (uint32_t i = 0; i <= r->n_joined; i++) {
        CUstream x = i < r->n_joined ? r->joined[i]->stream : s->stream;
        if (CU(fn, cuStreamIsCapturing, x, &status) == ACG_OK &&
            status != CU_STREAM_CAPTURE_STATUS_NONE) {
            acg__log(ACG_LOG_WARN, "cuda: a stream still captures after its capture was ended; "
                                   "work queued on it will not run");
        }
    }
}

acg_status acg__cu_capture_end(acg__bk_recording *rec, acg__bk_exec **exec) {
    static const char fn[] = "acg_stream_end_capture";
    cu_recording *r = crec(rec);
    cu_stream *s = r->origin;
    CUgraph graph = NULL;
    cu_exec *e = NULL;
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        st = CU(fn, cuStreamEndCapture, s->stream, &graph);
    }
    if (st != ACG_OK) {
        /* CUDA ends a capture whose end fails (an unjoined fork, say); make sure of it, so no
         * stream is left recording. The failure's detail is what the caller sees. */
        char why[512];
        snprintf(why, sizeof why, "%s", acg_last_error());
        end_everywhere(r, fn);
        acg__error(st, "%s", why);
    }
    if (st == ACG_OK) {
        /* The exec keeps the graph (an update from this one starts there) and the nodes of
         * acg's launches in it. */
        st = instantiate(s->dev, graph, s->stream, &e, fn);
    }
    if (st == ACG_OK) {
        e->nodes = r->nodes;
        e->n_nodes = r->n_nodes;
        e->counters = r->counters;
        e->n_counters = r->n_counters;
        e->loops = r->n_counters != 0;
        r->nodes = NULL;
        r->counters = NULL;
        r->n_counters = 0;
    }
    free_recording(r);
    if (st != ACG_OK && graph != NULL) {
        CU_RELEASE(fn, cuGraphDestroy, graph);
    }
    if (st == ACG_OK) {
        *exec = acg__cu_bk_exec(e);
    }
    return st;
}

void acg__cu_capture_abort(acg__bk_recording *rec) {
    cu_recording *r = crec(rec);
    end_everywhere(r, "acg_stream_end_capture");
    free_recording(r);
}

acg_status acg__cu_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream) {
    static const char fn[] = "acg_graph_launch";
    cu_stream *s = acg__cu_stream(stream);
    acg_status st = acg__cu_enter(s->dev, fn);
    return st == ACG_OK ? CU(fn, cuGraphLaunch, acg__cu_exec(exec)->exec, s->stream) : st;
}

acg_status acg__cu_graph_upload(acg__bk_exec *exec, acg__bk_stream *stream) {
    static const char fn[] = "acg_graph_upload";
    cu_stream *s = acg__cu_stream(stream);
    if (acg__cu.cuGraphUpload == NULL) {
        return ACG_OK; /* an optimization the driver lacks */
    }
    acg_status st = acg__cu_enter(s->dev, fn);
    return st == ACG_OK ? CU(fn, cuGraphUpload, acg__cu_exec(exec)->exec, s->stream) : st;
}

void acg__cu_graph_destroy(acg__bk_exec *exec) {
    static const char fn[] = "acg_graph_destroy";
    cu_exec *e = acg__cu_exec(exec);
    acg__cu_enter_release(e->dev, fn);
    CU_RELEASE(fn, cuGraphExecDestroy, e->exec);
    CU_RELEASE(fn, cuGraphDestroy, e->graph);
    if (e->inst != NULL) {
        CU_RELEASE(fn, cuGraphDestroy, e->inst);
    }
    acg__free(e->inst_nodes);
    acg__free(e->nodes);
    for (uint32_t i = 0; i < e->n_counters; i++) {
        CU_RELEASE(fn, cuMemFree, e->counters[i]);
    }
    acg__free(e->counters);
    acg__free(e);
}

/* ---- update ------------------------------------------------------------------------------ *
 * The source graph's own capture is what CUDA's pattern updates from (capture again, then
 * cuGraphExecUpdate): it has every node the driver recorded, the engine's foreign work and
 * NCCL's kernels included, in the shape the target's capture had. It serves whenever the
 * source's memory is the target's (the core says so: both graphs' scratch lies in one place,
 * as in one pool). Otherwise the graph is built node by node from the ledger, which holds the
 * target's scratch; only acg's own work can be built so. */

/* A kernel node's parameters for launch l of kernel k on device d; they point into l. */
static void kernel_params(cu_device *d, const cu_kernel *k, cu_launch *l,
                          CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    memset(p, 0, sizeof *p);
    p->kern = k->kern; /* func NULL: the CUkernel, in ctx */
    p->ctx = d->ctx;
    p->gridDimX = l->grid[0];
    p->gridDimY = l->grid[1];
    p->gridDimZ = l->grid[2];
    p->blockDimX = l->block[0];
    p->blockDimY = l->block[1];
    p->blockDimZ = l->block[2];
    p->kernelParams = l->params; /* copied by the driver */
}

/* Adds node i of desc to graph, after its dependencies. */
static acg_status add_node(cu_device *d, CUgraph graph, const acg__graph_desc *desc, uint32_t i,
                           CUgraphNode *nodes, CUgraphNode *deps, const char *fn) {
    const acg__node *n = &desc->nodes[i];
    for (uint32_t j = 0; j < n->n_deps; j++) {
        deps[j] = nodes[desc->deps[n->deps_begin + j]];
    }
    CUgraphNode *out = &nodes[i];
    switch (n->kind) {
    case ACG_NODE_KERNEL: {
        cu_launch l;
        acg_status st =
            acg__cu_launch_shape(acg__cu_kernel(n->kernel), &n->dims, n->args, n->n_args, &l, fn);
        if (st != ACG_OK) {
            return st;
        }
        CUDA_KERNEL_NODE_PARAMS_v2 p;
        kernel_params(d, acg__cu_kernel(n->kernel), &l, &p);
        return CU(fn, cuGraphAddKernelNode, out, graph, deps, n->n_deps, &p);
    }
    case ACG_NODE_COPY_H2D:
    case ACG_NODE_COPY_D2H:
    case ACG_NODE_COPY_D2D: {
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof p);
        if (n->kind == ACG_NODE_COPY_H2D) {
            p.srcMemoryType = CU_MEMORYTYPE_HOST;
            p.srcHost = n->host;
        } else {
            p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            p.srcDevice = acg__cu_mem(n->src_mem) + n->src_off;
        }
        if (n->kind == ACG_NODE_COPY_D2H) {
            p.dstMemoryType = CU_MEMORYTYPE_HOST;
            p.dstHost = n->host;
        } else {
            p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            p.dstDevice = acg__cu_mem(n->dst_mem) + n->dst_off;
        }
        p.WidthInBytes = n->size;
        p.Height = 1;
        p.Depth = 1;
        return CU(fn, cuGraphAddMemcpyNode, out, graph, deps, n->n_deps, &p, d->ctx);
    }
    case ACG_NODE_FILL: {
        CUDA_MEMSET_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.dst = acg__cu_mem(n->dst_mem) + n->dst_off;
        p.value = n->pattern;
        p.elementSize = n->pattern_size;
        p.width = n->size / n->pattern_size;
        p.height = 1;
        return CU(fn, cuGraphAddMemsetNode, out, graph, deps, n->n_deps, &p, d->ctx);
    }
    case ACG_NODE_HOST: {
        CUDA_HOST_NODE_PARAMS p = {n->host_fn, n->host_user};
        return CU(fn, cuGraphAddHostNode, out, graph, deps, n->n_deps, &p);
    }
    case ACG_NODE_COLLECTIVE:
        /* NCCL's kernels and their arguments are NCCL's own, recorded only by capture. */
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: node %u is an allreduce, which NCCL puts in a graph only by "
                          "capture, and the source graph's capture cannot serve: its scratch "
                          "lies elsewhere (capture both graphs into one pool, or capture again)",
                          fn, i);
    default:
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: node %u is work acg did not launch (%s), which only the source "
                          "graph's capture holds, and that cannot serve: its scratch lies "
                          "elsewhere (capture both graphs into one pool, or capture again)",
                          fn, i, n->label);
    }
}

/* The description as a CUDA graph, node for node; *kernels (*n_kernels) its kernel nodes in
 * order. */
static acg_status build_graph(cu_device *d, const acg__graph_desc *desc, CUgraph *out,
                              CUgraphNode **kernels, uint32_t *n_kernels, const char *fn) {
    CUgraphNode *nodes = acg__calloc(desc->n_nodes ? desc->n_nodes : 1, sizeof *nodes);
    CUgraphNode *deps = acg__calloc(desc->n_nodes ? desc->n_nodes : 1, sizeof *deps);
    CUgraph graph = NULL;
    acg_status st = nodes != NULL && deps != NULL
                        ? ACG_OK
                        : acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    if (st == ACG_OK) {
        st = CU(fn, cuGraphCreate, &graph, 0);
    }
    for (uint32_t i = 0; st == ACG_OK && i < desc->n_nodes; i++) {
        st = add_node(d, graph, desc, i, nodes, deps, fn);
    }
    /* The kernel nodes moved to the front of nodes, in order. */
    uint32_t k = 0;
    for (uint32_t i = 0; st == ACG_OK && i < desc->n_nodes; i++) {
        if (desc->nodes[i].kind == ACG_NODE_KERNEL) {
            nodes[k++] = nodes[i];
        }
    }
    acg__free(deps);
    if (st != ACG_OK) {
        acg__free(nodes);
        if (graph != NULL) {
            CU_RELEASE(fn, cuGraphDestroy, graph);
        }
        return st;
    }
    *out = graph;
    *kernels = nodes;
    *n_kernels = k;
    return ACG_OK;
}

static const char *update_result(CUgraphExecUpdateResult r) {
    switch (r) {
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
        return "the topology changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
        return "a node's type changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
        return "a kernel changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
        return "parameters changed in a way CUDA cannot update";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
        return "a node cannot be updated";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
        return "an unsupported kernel change";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
        return "node attributes changed";
    default:
        return "refused";
    }
}

/* cuGraphExecUpdate of e from graph, which e keeps from then on with its kernel nodes `nodes`
 * (n_nodes); when CUDA refuses it (the target was itself built from the ledger, say, or
 * foreign work changed its kind of node), e is instantiated again from graph instead. The log
 * says which. On failure e is unchanged, graph destroyed and nodes freed. */
static acg_status update_exec(cu_exec *e, CUgraph graph, CUgraphNode *nodes, uint32_t n_nodes,
                              const char *source, const char *fn) {
    bool in_place = false;
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    acg_status st = ACG_OK;
    CUresult r = acg__cu.cuGraphExecUpdate(e->exec, graph, &info);
    if (r == CUDA_SUCCESS) {
        in_place = true;
        acg__log(ACG_LOG_DEBUG, "cuda: graph updated in place from %s (cuGraphExecUpdate)", source);
    } else if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        cu_exec *fresh = NULL;
        st = instantiate(e->dev, graph, NULL, &fresh, fn);
        if (st == ACG_OK) {
            CU_RELEASE(fn, cuGraphExecDestroy, e->exec);
            e->exec = fresh->exec;
            acg__free(fresh);
            acg__log(ACG_LOG_INFO,
                     "cuda: cuGraphExecUpdate refused the update from %s (%s); the graph was "
                     "instantiated again",
                     source, update_result(info.result));
        }
    } else {
        st = acg__cu_check(r, fn, "cuGraphExecUpdate");
    }
    if (st != ACG_OK) {
        CU_RELEASE(fn, cuGraphDestroy, graph);
        acg__free(nodes);
        return st;
    }
    if (in_place && e->inst == NULL) {
        /* exec's nodes are still named by the graph it was instantiated from. */
        e->inst = e->graph;
        e->inst_nodes = e->nodes;
    } else {
        CU_RELEASE(fn, cuGraphDestroy, e->graph);
        acg__free(e->nodes);
    }
    if (!in_place && e->inst != NULL) {
        CU_RELEASE(fn, cuGraphDestroy, e->inst);
        acg__free(e->inst_nodes);
        e->inst = NULL;
        e->inst_nodes = NULL;
    }
    e->graph = graph;
    e->nodes = nodes;
    e->n_nodes = n_nodes;
    return ACG_OK;
}

/* No replay of exec is pending; from (when not NULL) may be replaying, and only its graph is
 * read: nothing changes that graph while the device's lock is held (acg-backend.h). */
acg_status acg__cu_graph_update_from(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     acg__bk_exec *from, bool same_memory) {
    static const char fn[] = "acg_graph_update";
    cu_exec *e = acg__cu_exec(exec);
    cu_exec *src = from != NULL ? acg__cu_exec(from) : NULL;
    CUgraph graph = NULL;
    acg_status st = acg__cu_enter(e->dev, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (e->loops || (src != NULL && src->loops)) {
        /* CUDA neither clones a graph with conditional nodes nor instantiates one twice. */
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: the graph holds loops, CUDA conditional nodes, whose graphs CUDA "
                          "neither clones nor instantiates twice; capture it again instead",
                          fn);
    }
    CUgraphNode *nodes = NULL;
    uint32_t n_nodes = 0;
    if (src != NULL && same_memory && src->graph != NULL) {
        /* A clone: the source keeps its own graph, for its replays' sake and later updates. */
        if ((st = CU(fn, cuGraphClone, &graph, src->graph)) != ACG_OK) {
            return st;
        }
        if (acg__cu.node_update) {
            n_nodes = src->n_nodes;
            nodes = acg__calloc(n_nodes ? n_nodes : 1, sizeof *nodes);
            st =
                nodes != NULL ? ACG_OK : acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        for (uint32_t k = 0; nodes != NULL && st == ACG_OK && k < n_nodes; k++) {
            st = CU(fn, cuGraphNodeFindInClone, &nodes[k], src->nodes[k], graph);
        }
        if (st != ACG_OK) {
            acg__free(nodes);
            CU_RELEASE(fn, cuGraphDestroy, graph);
            return st;
        }
        return update_exec(e, graph, nodes, n_nodes, "the source's capture", fn);
    }
    ACG__TRY(build_graph(e->dev, desc, &graph, &nodes, &n_nodes, fn));
    return update_exec(e, graph, nodes, n_nodes, "the ledger", fn);
}

acg_status acg__cu_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    return acg__cu_graph_update_from(exec, desc, NULL, false);
}

/* ---- per-node update ---------------------------------------------------------------------- *
 * The exec's node is set in place (cuGraphExecKernelNodeSetParams, by the node of the graph it
 * was instantiated from), and so is the graph it replays, which an update from this graph
 * clones: both hold the new launch, or, on failure, both the old one. */

acg_status acg__cu_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old) {
    static const char fn[] = "acg_graph_update_kernel_node";
    cu_exec *e = acg__cu_exec(exec);
    const acg__node *n = &desc->nodes[index];
    uint32_t k = 0;
    for (uint32_t i = 0; i < index; i++) {
        k += desc->nodes[i].kind == ACG_NODE_KERNEL;
    }
    cu_launch l, lo;
    acg_status st =
        acg__cu_launch_shape(acg__cu_kernel(n->kernel), &n->dims, n->args, n->n_args, &l, fn);
    if (st == ACG_OK) { /* the launch as it was, to set back */
        st = acg__cu_launch_shape(acg__cu_kernel(old->kernel), &old->dims, old->args, old->n_args,
                                  &lo, fn);
    }
    if (st == ACG_OK) {
        st = acg__cu_enter(e->dev, fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    CUDA_KERNEL_NODE_PARAMS_v2 p, po;
    kernel_params(e->dev, acg__cu_kernel(n->kernel), &l, &p);
    kernel_params(e->dev, acg__cu_kernel(old->kernel), &lo, &po);
    /* Every launch of the capture was recorded, so k < n_nodes; were it not, the driver would
     * refuse the NULL node. */
    CUgraphNode mine = k < e->n_nodes ? e->nodes[k] : NULL;
    CUgraphNode named = e->inst == NULL ? mine : k < e->n_nodes ? e->inst_nodes[k] : NULL;
    if (mine == NULL && e->loops) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: node %u lies in a loop's body, a CUDA conditional node's graph, "
                          "which CUDA does not update node by node; capture again",
                          fn, index);
    }
    st = CU(fn, cuGraphExecKernelNodeSetParams, e->exec, named, &p);
    if (st == ACG_OK) {
        st = CU(fn, cuGraphKernelNodeSetParams, mine, &p);
        if (st != ACG_OK) {
            /* Logged, never set: the caller learns why the update failed. */
            acg__cu_release_check(acg__cu.cuGraphExecKernelNodeSetParams(e->exec, named, &po), fn,
                                  "cuGraphExecKernelNodeSetParams setting the node back");
        }
    }
    return st;
}
