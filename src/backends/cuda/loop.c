/* loop.c — loops in the cuda backend's captures: a CUDA conditional WHILE node per loop.
 *
 * At acg_stream_loop_begin the stream is capturing into some graph (the capture's, or an outer
 * loop's body). The loop adds there acg's kernel acg_loop_begin, which zeroes a run counter of
 * the loop's own and sets the loop's handle to 1, so the body runs once at least, then the WHILE
 * node. A handle's default value (CU_GRAPH_COND_ASSIGN_DEFAULT) is applied once per launch of
 * the graph, not each time a nested WHILE node is reached: the kernel sets it again before every
 * run of a nested loop. The body graph is then captured on a stream of its own
 * (cuStreamBeginCaptureToGraph), which becomes where the acg stream's work goes. At
 * acg_stream_loop_end acg's loop kernel is appended to the body: it counts the run and sets the
 * handle to whether the condition word is non-zero and fewer than max runs were made. The body's
 * capture ends, and the acg stream's work goes to the stream it went to before, after the WHILE
 * node.
 *
 * The counter is device memory of the recording, then of the graph's exec, freed with it; the
 * kernels come from loop.cu, a fatbin nvcc builds into the library, loaded once per device. */
#include <string.h>

#include "cuda.h"

#ifdef ACG_HAVE_CUDA_LOOP
#include "cuda_loop_kernel.h" /* acg__cu_loop_fatbin, generated from loop.cu */
#endif

bool acg__cu_loop_kernel_built(void) {
#ifdef ACG_HAVE_CUDA_LOOP
    return true;
#else
    return false;
#endif
}

/* The loop kernels of the device, loaded at its first loop (the core holds the device's lock). */
static acg_status loop_kernels(cu_device *d, const char *fn) {
    if (d->loop_next != NULL) {
        return ACG_OK;
    }
#ifdef ACG_HAVE_CUDA_LOOP
    acg_status st =
        CU(fn, cuLibraryLoadData, &d->loop_lib, acg__cu_loop_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    if (st == ACG_OK) {
        st = CU(fn, cuLibraryGetKernel, &d->loop_begin, d->loop_lib, "acg_loop_begin");
    }
    if (st == ACG_OK) {
        st = CU(fn, cuLibraryGetKernel, &d->loop_next, d->loop_lib, "acg_loop_next");
    }
    if (st != ACG_OK && d->loop_lib != NULL) {
        CU_RELEASE(fn, cuLibraryUnload, d->loop_lib);
        d->loop_lib = NULL;
        d->loop_begin = NULL;
    }
    return st;
#else
    return acg__error(ACG_ERR_UNSUPPORTED, "%s: this build has no loop kernels (no nvcc)", fn);
#endif
}

void acg__cu_loop_release(cu_device *d, const char *fn) {
    if (d->loop_lib != NULL) {
        CU_RELEASE(fn, cuLibraryUnload, d->loop_lib);
    }
}

/* A run counter of the recording's, for the loop being opened. */
static acg_status new_counter(cu_stream *s, CUdeviceptr *out, const char *fn) {
    cu_recording *r = s->rec;
    if (!acg__grow((void **)&r->counters, &r->cap_counters, r->n_counters + 1,
                   sizeof *r->counters)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory recording the capture", fn);
    }
    ACG__TRY(CU(fn, cuMemAlloc, out, sizeof(uint32_t)));
    r->counters[r->n_counters++] = *out;
    return ACG_OK;
}

/* The graph `on` captures into, and the nodes its next work depends on. */
static acg_status capture_point(CUstream on, CUgraph *graph, const CUgraphNode **deps,
                                const CUgraphEdgeData **edges, size_t *n, const char *fn) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CU(fn, cuStreamGetCaptureInfo, on, &status, NULL, graph, deps, edges, n);
}

/* After what `on` captured so far: acg_loop_begin, then the WHILE node, which later work on `on`
 * depends on; *body is its body graph (CUDA's: it lives as long as the node). */
static acg_status add_while(cu_device *d, CUstream on, cu_loop *l, CUgraph *body, const char *fn) {
    CUgraph graph = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    ACG__TRY(capture_point(on, &graph, &deps, &edges, &n, fn));
    ACG__TRY(CU(fn, cuGraphConditionalHandleCreate, &l->handle, graph, d->ctx, 1,
                CU_GRAPH_COND_ASSIGN_DEFAULT));
    void *params[] = {&l->handle, &l->counter};
    ACG__TRY(
        CU(fn, cuLaunchKernel, (CUfunction)d->loop_begin, 1, 1, 1, 1, 1, 1, 0, on, params, NULL));
    ACG__TRY(capture_point(on, &graph, &deps, &edges, &n, fn));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = l->handle;
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 1;
    p.conditional.ctx = d->ctx;
    CUgraphNode node = NULL;
    ACG__TRY(CU(fn, cuGraphAddNode, &node, graph, deps, edges, n, &p));
    *body = p.conditional.phGraph_out[0];
    return CU(fn, cuStreamUpdateCaptureDependencies, on, &node, NULL, 1,
              CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

acg_status acg__cu_loop_begin(acg__bk_stream *stream, acg__bk_mem *cond, size_t off, uint32_t max) {
    static const char fn[] = "acg_stream_loop_begin";
    cu_stream *s = acg__cu_stream(stream);
    cu_device *d = s->dev;
    cu_loop *l = &s->loops[s->n_loops];
    memset(l, 0, sizeof *l);
    l->outer = s->stream;
    l->cond = acg__cu_mem(cond) + off;
    l->max = max;
    CUgraph body = NULL;
    CUstream inner = NULL;
    ACG__TRY(acg__cu_enter(d, fn));
    ACG__TRY(loop_kernels(d, fn));
    ACG__TRY(new_counter(s, &l->counter, fn));
    ACG__TRY(add_while(d, l->outer, l, &body, fn));
    ACG__TRY(CU(fn, cuStreamCreate, &inner, CU_STREAM_NON_BLOCKING));
    acg_status st = CU(fn, cuStreamBeginCaptureToGraph, inner, body, NULL, NULL, 0,
                       CU_STREAM_CAPTURE_MODE_RELAXED);
    if (st != ACG_OK) {
        CU_RELEASE(fn, cuStreamDestroy, inner);
        return st;
    }
    s->stream = inner;
    s->n_loops++;
    return ACG_OK;
}

/* Ends the innermost loop's body capture: the stream's work goes where it went before. */
static acg_status close_body(cu_stream *s, const char *fn) {
    cu_loop *l = &s->loops[--s->n_loops];
    CUstream inner = s->stream;
    s->stream = l->outer;
    CUgraph body = NULL; /* the node's own graph: not ours to destroy */
    acg_status st = CU(fn, cuStreamEndCapture, inner, &body);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (st != ACG_OK && acg__cu.cuStreamIsCapturing(inner, &status) == CUDA_SUCCESS &&
        status != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* CUDA ends a capture whose end fails; make sure of it before the stream goes (the
         * first failure is what the caller hears of). */
        acg__cu.cuStreamEndCapture(inner, &body);
    }
    CU_RELEASE(fn, cuStreamDestroy, inner);
    return st;
}

acg_status acg__cu_loop_end(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_loop_end";
    cu_stream *s = acg__cu_stream(stream);
    cu_loop *l = &s->loops[s->n_loops - 1];
    acg_status st = acg__cu_enter(s->dev, fn);
    if (st == ACG_OK) {
        /* The run's end: the kernel counts it and says whether another follows. */
        void *params[] = {&l->handle, &l->cond, &l->counter, &l->max};
        st = CU(fn, cuLaunchKernel, (CUfunction)s->dev->loop_next, 1, 1, 1, 1, 1, 1, 0, s->stream,
                params, NULL);
    }
    acg_status closed = close_body(s, fn);
    return st != ACG_OK ? st : closed;
}

void acg__cu_loops_unwind(cu_stream *s, const char *fn) {
    while (s->n_loops != 0) {
        close_body(s, fn);
    }
}
