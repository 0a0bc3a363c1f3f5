/* fake_stream.c — the CUDA test driver's streams and events.
 *
 * A stream is a worker thread draining a queue of ops in order, as a GPU stream. `submitted`
 * counts ops ever queued and `completed` those finished, so a point in a stream is a count:
 * an event's record is "stream S reached op N", and a wait on it is an op that blocks until
 * S's `completed` reaches N. Every wait sleeps on one condition variable (fake__g.progress),
 * broadcast whenever any op finishes: simple, and never a missed wake-up.
 *
 * A destroyed stream is not joined at once (cuStreamDestroy returns while its work runs on, as
 * in CUDA): its worker drains the queue and exits, and a later call joins it
 * (fake__reap_workers), at the latest the context's teardown.
 */
#include "fake_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op_kind {
    OP_WORK,   /* a kernel, copy, fill or host function */
    OP_WAIT,   /* blocks until another stream reaches a point (cuStreamWaitEvent) */
    OP_GRAPH,  /* a replay of an exec (cuGraphLaunch) */
    OP_UPLOAD, /* an exec's upload: ordered like a replay, runs nothing */
};

struct fake_op {
    struct fake_job job; /* queued on its stream's worker */
    enum op_kind kind;
    union {
        struct fake_work work;
        struct {
            struct CUstream_st *stream; /* holds a reference */
            uint64_t seq;
        } wait;
        struct {
            struct CUgraphExec_st *exec; /* holds a reference */
            struct fake_snapshot *snap;  /* holds a reference; NULL for an upload */
            uint64_t ticket;
        } graph;
    } u;
};

/* ---- running work --------------------------------------------------------------------------- */

/* What is wrong with running `w` now: NULL, or the reason it would fault on a GPU. */
static const char *work_fault(const struct fake_work *w) {
    switch (w->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        /* Kernels may also take mapped pinned memory. Only the start of a window is known here;
         * ASan sees a kernel running past its buffer. */
        for (uint32_t i = 0; i < w->u.kernel.n_args; i++) {
            if (w->u.kernel.types[i] == ACG_ARG_BUFFER &&
                fake__range_find((uintptr_t)w->u.kernel.args[i].p, 0,
                                 FAKE_DEVICE_MEMORY | FAKE_PINNED_MEMORY) == NULL) {
                return "a kernel's buffer argument is not in live device memory";
            }
        }
        return NULL;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((w->u.copy.dst_device &&
             fake__range_find(w->u.copy.dst, w->u.copy.bytes, FAKE_DEVICE_MEMORY) == NULL) ||
            (w->u.copy.src_device &&
             fake__range_find(w->u.copy.src, w->u.copy.bytes, FAKE_DEVICE_MEMORY) == NULL)) {
            return "a copy reaches outside live device memory";
        }
        return NULL;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if (fake__range_find(w->u.fill.dst, w->u.fill.count * w->u.fill.element_size,
                             FAKE_DEVICE_MEMORY) == NULL) {
            return "a fill reaches outside live device memory";
        }
        return NULL;
    default:
        return NULL;
    }
}

static void fill(const struct fake_work *w) {
    unsigned char *dst = (unsigned char *)w->u.fill.dst;
    if (w->u.fill.element_size == 1) {
        memset(dst, (int)(w->u.fill.value & 0xffu), w->u.fill.count);
    } else if (w->u.fill.element_size == 2) {
        uint16_t v = (uint16_t)w->u.fill.value;
        for (size_t i = 0; i < w->u.fill.count; i++) {
            memcpy(dst + 2 * i, &v, 2);
        }
    } else {
        uint32_t v = w->u.fill.value;
        for (size_t i = 0; i < w->u.fill.count; i++) {
            memcpy(dst + 4 * i, &v, 4);
        }
    }
}

void fake__run_work(struct CUctx_st *ctx, const struct fake_work *w, struct CUgraphExec_st *x) {
    if (ctx->sticky != CUDA_SUCCESS) {
        return; /* after a fault the context runs nothing more, as a GPU */
    }
    const char *fault = work_fault(w);
    if (fault != NULL) {
        ctx->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
        fprintf(stderr,
                "acg CUDA test driver: %s; device %d now reports CUDA_ERROR_ILLEGAL_ADDRESS\n",
                fault, ctx->device);
        return;
    }
    if (w->type == CU_GRAPH_NODE_TYPE_KERNEL && w->u.kernel.builtin != NULL) {
        fake__builtin_run(ctx, w, x); /* the driver's own emulation: brief, under the lock */
        return;
    }
    /* w is immutable while it runs (an op's own copy, or a snapshot no one changes). */
    pthread_mutex_unlock(&fake__g.lock);
    switch (w->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        w->u.kernel.fn(w->u.kernel.args, w->u.kernel.global);
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        memmove((void *)w->u.copy.dst, (const void *)w->u.copy.src, w->u.copy.bytes);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        fill(w);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        w->u.host.fn(w->u.host.data);
        break;
    default:
        break;
    }
    pthread_mutex_lock(&fake__g.lock);
}

/* (lock held; lets go while it waits or runs) */
static void run_op(struct CUstream_st *s, struct fake_op *op) {
    switch (op->kind) {
    case OP_WORK:
        fake__run_work(s->ctx, &op->u.work, NULL);
        break;
    case OP_WAIT:
        while (op->u.wait.stream->worker.completed < op->u.wait.seq) {
            pthread_cond_wait(&fake__g.progress, &fake__g.lock);
        }
        break;
    case OP_GRAPH:
    case OP_UPLOAD: {
        /* One replay of an exec at a time, in the order they were queued, from any stream. */
        struct CUgraphExec_st *x = op->u.graph.exec;
        while (x->running != op->u.graph.ticket) {
            pthread_cond_wait(&fake__g.progress, &fake__g.lock);
        }
        if (op->kind == OP_GRAPH) {
            fake__replay(s->ctx, x, op->u.graph.snap);
        }
        x->running++;
        break;
    }
    }
}

static void op_free(struct fake_op *op) {
    if (op->kind == OP_WAIT) {
        fake__stream_release(op->u.wait.stream);
    } else if (op->kind == OP_GRAPH || op->kind == OP_UPLOAD) {
        if (op->u.graph.snap != NULL) {
            fake__snapshot_release(op->u.graph.snap);
        }
        fake__exec_release(op->u.graph.exec);
    }
    free(op);
}

static void run_job(struct fake_worker *w, struct fake_job *job) {
    run_op(w->owner, (struct fake_op *)job);
}

static void job_done(struct fake_worker *w, struct fake_job *job) {
    (void)w;
    op_free((struct fake_op *)job);
}

static void enqueue(struct CUstream_st *s, struct fake_op *op) {
    fake__worker_push(&s->worker, &op->job);
}

CUresult fake__submit(struct CUstream_st *s, const struct fake_work *work) {
    if (s->capture != NULL) {
        return fake__capture_record(s, work);
    }
    struct fake_op *op = malloc(sizeof *op);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->kind = OP_WORK;
    op->u.work = *work;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

CUresult fake__submit_exec(struct CUstream_st *s, struct CUgraphExec_st *x, int launch) {
    struct fake_op *op = malloc(sizeof *op);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->kind = launch ? OP_GRAPH : OP_UPLOAD;
    op->u.graph.exec = x;
    x->refs++;
    op->u.graph.snap = NULL;
    if (launch) {
        op->u.graph.snap = x->snap;
        x->snap->refs++;
    }
    op->u.graph.ticket = x->next_ticket++;
    enqueue(s, op);
    return CUDA_SUCCESS;
}

/* ---- stream lifetime ------------------------------------------------------------------------ */

void fake__stream_release(struct CUstream_st *s) {
    if (--s->refs == 0) {
        pthread_cond_destroy(&s->worker.work);
        fake__ids_free(&s->frontier);
        free(s->info_deps);
        free(s->info_edges);
        free(s);
    }
}

/* (lock held; waits) Waits until s completed op `seq`, holding it so that a concurrent destroy
 * does not free it meanwhile; returns the fault its context holds then. */
static CUresult stream_wait(struct CUstream_st *s, uint64_t seq) {
    s->refs++;
    while (s->worker.completed < seq) {
        pthread_cond_wait(&fake__g.progress, &fake__g.lock);
    }
    CUresult sticky = s->ctx->sticky;
    fake__stream_release(s);
    return sticky;
}

void fake__reap_workers(void) {
    for (size_t i = fake__g.workers.n; i-- > 0;) {
        struct CUstream_st *s = fake__g.workers.v[i];
        if (s->worker.exited) {
            /* It set `exited` last, under the lock this thread holds: it needs nothing more
             * than to return, so joining here cannot deadlock. */
            pthread_join(s->worker.thread, NULL);
            fake__vec_remove(&fake__g.workers, s);
            fake__stream_release(s);
        }
    }
}

void fake__ctx_synchronize(struct CUctx_st *ctx) {
    size_t n = 0;
    for (size_t i = 0; i < fake__g.workers.n; i++) {
        struct CUstream_st *s = fake__g.workers.v[i];
        n += s->ctx == ctx && fake__worker_busy(&s->worker);
    }
    if (n == 0) {
        return;
    }
    /* Wait for what is queued now, not for what other threads queue meanwhile, or a thread
     * that keeps a stream busy would starve this one. The references keep the streams alive
     * while the lock is let go. */
    struct point {
        struct CUstream_st *s;
        uint64_t seq;
    } *points = malloc(n * sizeof *points);
    if (points == NULL) { /* cannot remember the points: wait until the streams are idle */
        for (int busy = 1; busy;) {
            busy = 0;
            for (size_t i = 0; i < fake__g.workers.n; i++) {
                struct CUstream_st *s = fake__g.workers.v[i];
                busy |= s->ctx == ctx && fake__worker_busy(&s->worker);
            }
            if (busy) {
                pthread_cond_wait(&fake__g.progress, &fake__g.lock);
            }
        }
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < fake__g.workers.n; i++) {
        struct CUstream_st *s = fake__g.workers.v[i];
        if (s->ctx == ctx && fake__worker_busy(&s->worker)) {
            points[k].s = s;
            points[k].seq = s->worker.submitted;
            s->refs++;
            k++;
        }
    }
    for (size_t i = 0; i < k; i++) {
        while (points[i].s->worker.completed < points[i].seq) {
            pthread_cond_wait(&fake__g.progress, &fake__g.lock);
        }
    }
    for (size_t i = 0; i < k; i++) {
        fake__stream_release(points[i].s);
    }
    free(points);
}

/* (lock held) Lets the worker of a stream whose handle is gone drain its queue and exit: queued
 * work still runs, as in CUDA. */
static void stream_quit(void *obj) {
    struct CUstream_st *s = obj;
    fake__worker_quit(&s->worker);
    fake__stream_release(s); /* the handle's reference; the worker keeps its own */
    fake__reap_workers();
}

/* fake__reclaim reads each stream's context as its struct's first member (asserted in
 * fake_cuda.c). */
void fake__streams_reclaim(struct CUctx_st *ctx) {
    fake__reclaim(&fake__g.streams, ctx, stream_quit);
}

/* ---- streams -------------------------------------------------------------------------------- */

CUresult fake__stream_get(CUstream h, struct CUctx_st *ctx, struct CUstream_st **out) {
    /* Simplified: no NULL, legacy or per-thread default stream (the backend never uses one):
     * those handles are no live stream. */
    CUresult r = fake__handle(&fake__g.streams, h, (void **)out);
    if (r == CUDA_SUCCESS && h->ctx != ctx) {
        r = CUDA_ERROR_INVALID_CONTEXT; /* the real driver's code here was not verified */
    }
    return r;
}

CUresult fake__lock_stream(CUstream h, struct CUctx_st **ctx, struct CUstream_st **out) {
    CUresult r = fake__lock_current(ctx);
    return r == CUDA_SUCCESS ? fake__stream_get(h, *ctx, out) : r;
}

CUresult fake__not_capturing(struct CUstream_st *s) {
    if (s->capture == NULL) {
        return CUDA_SUCCESS;
    }
    fake__capture_invalidate(s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fake__unlock_submit(CUresult r, struct CUstream_st *s, const struct fake_work *work) {
    return fake__unlock(r == CUDA_SUCCESS ? fake__submit(s, work) : r);
}

CUresult fake_cuStreamCreate(CUstream *ph, unsigned int flags) {
    FAKE_ENTER(cuStreamCreate);
    struct CUctx_st *ctx;
    struct CUstream_st *s = NULL;
    CUresult r;
    FAKE_CHECK(fake__lock_current(&ctx), out);
    /* NON_BLOCKING is taken and changes nothing: there is no legacy stream to block on. */
    FAKE_FAIL_IF(ph == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0,
                 CUDA_ERROR_INVALID_VALUE, out);
    fake__reap_workers();
    r = CUDA_ERROR_OUT_OF_MEMORY;
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        goto out;
    }
    s->ctx = ctx;
    s->flags = flags;
    s->refs = 2; /* the handle and the worker */
    s->worker = (struct fake_worker){.lock = &fake__g.lock,
                                     .progress = &fake__g.progress,
                                     .owner = s,
                                     .run = run_job,
                                     .done = job_done};
    if (fake__vec_push(&fake__g.streams, s) != 0) {
        goto out_free;
    }
    if (fake__vec_push(&fake__g.workers, s) != 0) {
        goto out_streams;
    }
    if (fake__worker_start(&s->worker) != 0) {
        goto out_workers;
    }
    fake__live(1);
    *ph = s;
    r = CUDA_SUCCESS;
    goto out;
out_workers:
    fake__vec_remove(&fake__g.workers, s);
out_streams:
    fake__vec_remove(&fake__g.streams, s);
out_free:
    free(s);
out:
    return fake__unlock(r);
}

/* A capturing stream stays, so the capture can still be ended (the real driver's behaviour here
 * was not verified). */
static CUresult stream_check(struct CUctx_st *ctx, void *obj) {
    struct CUstream_st *s = obj;
    if (s->ctx != ctx) {
        return CUDA_ERROR_INVALID_CONTEXT; /* as fake__stream_get */
    }
    return fake__not_capturing(s);
}

CUresult fake_cuStreamDestroy(CUstream h) {
    FAKE_ENTER(cuStreamDestroy);
    return fake__release(&fake__g.streams, h, stream_check, stream_quit);
}

/* (takes the lock, as fake__lock_stream) The stream of a host synchronization or query: one
 * that captures takes neither (fake__not_capturing). */
static CUresult lock_host_stream(CUstream h, struct CUstream_st **s) {
    struct CUctx_st *ctx;
    CUresult r = fake__lock_stream(h, &ctx, s);
    return r == CUDA_SUCCESS ? fake__not_capturing(*s) : r;
}

/* What was queued before the call completed; a fault of that work is reported here. */
CUresult fake_cuStreamSynchronize(CUstream h) {
    FAKE_ENTER(cuStreamSynchronize);
    struct CUstream_st *s;
    CUresult r = lock_host_stream(h, &s);
    return fake__unlock(r == CUDA_SUCCESS ? stream_wait(s, s->worker.submitted) : r);
}

CUresult fake__stream_pageable_wait(CUstream h, const void *host, size_t bytes) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && s->capture == NULL &&
        fake__range_find((uintptr_t)host, bytes, FAKE_PINNED_MEMORY) == NULL) {
        r = stream_wait(s, s->worker.submitted);
    }
    return fake__unlock(r);
}

CUresult fake_cuStreamQuery(CUstream h) {
    FAKE_ENTER(cuStreamQuery);
    struct CUstream_st *s;
    CUresult r = lock_host_stream(h, &s);
    return fake__unlock(r == CUDA_SUCCESS && fake__worker_busy(&s->worker) ? CUDA_ERROR_NOT_READY
                                                                           : r);
}

/* (lock held) cuStreamWaitEvent on a capturing stream s: a join of the event's point when it was
 * recorded in the same capture; an error that invalidates the capture when it was recorded in
 * another one or outside; nothing when it was never recorded. */
static CUresult captured_wait(struct CUstream_st *s, const struct CUevent_st *e) {
    struct fake_capture *c = s->capture;
    if (c->invalidated) {
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (e->capture == c) { /* later nodes depend on both frontiers */
        return fake__ids_union(&s->frontier, &e->frontier) == 0 ? CUDA_SUCCESS
                                                                : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (e->capture == NULL && e->stream == NULL) {
        return CUDA_SUCCESS;
    }
    fake__capture_invalidate(c);
    return e->capture != NULL ? CUDA_ERROR_STREAM_CAPTURE_MERGE
                              : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
}

/* (takes the lock, as fake__lock_stream) The stream h and the live event hevent of a call. */
static CUresult lock_stream_event(CUstream h, CUevent hevent, struct CUstream_st **s,
                                  struct CUevent_st **e) {
    struct CUctx_st *ctx;
    CUresult r = fake__lock_stream(h, &ctx, s);
    return r == CUDA_SUCCESS ? fake__handle(&fake__g.events, hevent, (void **)e) : r;
}

CUresult fake_cuStreamWaitEvent(CUstream h, CUevent hevent, unsigned int flags) {
    FAKE_ENTER(cuStreamWaitEvent);
    struct CUstream_st *s;
    struct CUevent_st *e;
    CUresult r;
    FAKE_CHECK(lock_stream_event(h, hevent, &s, &e), out);
    /* Simplified: no CU_EVENT_WAIT_EXTERNAL (wait nodes). */
    FAKE_FAIL_IF(flags != 0, CUDA_ERROR_INVALID_VALUE, out);
    if (s->capture != NULL) {
        r = captured_wait(s, e);
    } else if (e->capture != NULL) {
        r = fake__capture_join(s, e->capture, &e->frontier); /* a fork */
    } else if (e->stream != NULL && e->stream != s && e->stream->worker.completed < e->seq) {
        /* The point recorded now: a later re-record of the event does not move it. */
        struct fake_op *op = malloc(sizeof *op);
        FAKE_FAIL_IF(op == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
        op->kind = OP_WAIT;
        op->u.wait.stream = e->stream;
        op->u.wait.seq = e->seq;
        e->stream->refs++;
        enqueue(s, op);
    }
out:
    return fake__unlock(r);
}

CUresult fake_cuLaunchHostFunc(CUstream h, CUhostFn fn, void *data) {
    FAKE_ENTER(cuLaunchHostFunc);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_HOST, .u.host = {fn, data}};
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && fn == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    return fake__unlock_submit(r, s, &work);
}

/* ---- events --------------------------------------------------------------------------------- */

CUresult fake_cuEventCreate(CUevent *ph, unsigned int flags) {
    FAKE_ENTER(cuEventCreate);
    struct CUctx_st *ctx;
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS &&
        (ph == NULL || (flags & ~known) != 0 ||
         ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)))) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        struct CUevent_st *e = calloc(1, sizeof *e);
        if (e != NULL) {
            e->ctx = ctx;
            e->flags = flags;
        }
        r = fake__publish(&fake__g.events, e, free, (void **)ph);
    }
    return fake__unlock(r);
}

/* (lock held) Frees an event whose handle is gone: the stream point it holds, its frontier.
 * Queued waits hold the stream point, not the event: destroying an event they wait on is fine,
 * as in CUDA. */
static void event_free(void *obj) {
    struct CUevent_st *e = obj;
    if (e->stream != NULL) {
        fake__stream_release(e->stream);
    }
    fake__ids_free(&e->frontier);
    free(e);
}

CUresult fake_cuEventDestroy(CUevent h) {
    FAKE_ENTER(cuEventDestroy);
    return fake__release(&fake__g.events, h, NULL, event_free);
}

/* fake__reclaim reads each event's context as its struct's first member (asserted in
 * fake_cuda.c). */
void fake__events_reclaim(struct CUctx_st *ctx) { fake__reclaim(&fake__g.events, ctx, event_free); }

/* (lock held) Makes e's last record the current end of s. */
static void record_point(struct CUevent_st *e, struct CUstream_st *s) {
    s->refs++;
    if (e->stream != NULL) {
        fake__stream_release(e->stream);
    }
    e->stream = s;
    e->seq = s->worker.submitted;
    e->capture = NULL;
    fake__ids_free(&e->frontier);
}

/* (lock held) Makes e's last record a point in the graph s's capture is building: the frontier a
 * waiter will depend on. */
static CUresult record_captured(struct CUevent_st *e, struct CUstream_st *s) {
    if (s->capture->invalidated) {
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct fake_ids frontier = {0};
    if (fake__ids_union(&frontier, &s->frontier) != 0) {
        fake__ids_free(&frontier);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake__ids_free(&e->frontier);
    e->frontier = frontier;
    e->capture = s->capture;
    if (e->stream != NULL) {
        fake__stream_release(e->stream);
        e->stream = NULL;
    }
    return CUDA_SUCCESS;
}

CUresult fake_cuEventRecord(CUevent hevent, CUstream h) {
    FAKE_ENTER(cuEventRecord);
    struct CUstream_st *s;
    struct CUevent_st *e;
    CUresult r = lock_stream_event(h, hevent, &s, &e);
    if (r == CUDA_SUCCESS && e->ctx != s->ctx) {
        r = CUDA_ERROR_INVALID_HANDLE; /* the real driver's code here was not verified */
    }
    if (r == CUDA_SUCCESS && s->capture != NULL) {
        r = record_captured(e, s);
    } else if (r == CUDA_SUCCESS) {
        record_point(e, s);
    }
    return fake__unlock(r);
}

/* (takes the lock, held on return whatever the result) The event of a host synchronization or
 * query: CAPTURED_EVENT for a record in a capture still in progress (a capture clears its events
 * when it ends). An event never recorded is reached. */
static CUresult lock_host_event(CUevent h, struct CUevent_st **e) {
    struct CUctx_st *ctx;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = fake__handle(&fake__g.events, h, (void **)e);
    }
    if (r == CUDA_SUCCESS && (*e)->capture != NULL) {
        r = CUDA_ERROR_CAPTURED_EVENT;
    }
    return r;
}

CUresult fake_cuEventQuery(CUevent h) {
    FAKE_ENTER(cuEventQuery);
    struct CUevent_st *e;
    CUresult r = lock_host_event(h, &e);
    if (r == CUDA_SUCCESS && e->stream != NULL && e->stream->worker.completed < e->seq) {
        r = CUDA_ERROR_NOT_READY;
    }
    return fake__unlock(r);
}

/* The stream point of the event's last record; a fault of the context of that stream is
 * reported here. The wait holds the stream, not the event: another thread may destroy the
 * event meanwhile. */
CUresult fake_cuEventSynchronize(CUevent h) {
    FAKE_ENTER(cuEventSynchronize);
    struct CUevent_st *e;
    CUresult r = lock_host_event(h, &e);
    if (r == CUDA_SUCCESS && e->stream != NULL) {
        r = stream_wait(e->stream, e->seq);
    }
    return fake__unlock(r);
}
