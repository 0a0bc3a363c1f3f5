/* fake_cuda_impl.h — the CUDA test driver's objects and shared state, between its files.
 *
 * The driver is a stand-in for libcuda.so.1 that runs on the host (see fake_cuda.c for what it
 * does and what it simplifies). One mutex, fake__g.lock, guards every table and every object
 * field below; it is never held while a kernel, a copy or a host function runs, so streams
 * run at once. Functions named fake__* and the fake_cu* entry points are shared between the
 * driver's files and hidden from its users; "(lock held)" says a function expects the mutex
 * taken, and says so when it lets go of it for a while (a wait, a run).
 */
#ifndef ACG_TESTS_CUDA_DRIVER_FAKE_CUDA_IMPL_H
#define ACG_TESTS_CUDA_DRIVER_FAKE_CUDA_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "acg/acg.h"
#include "backends/cuda/entry_points.h"
#include "fake_common.h" /* tests/driver_common: containers, the call ledger, knobs */

/* Devices the driver can pretend to have (ACGTEST_CUDA_DEVICES is clamped to it). */
#define FAKE_MAX_DEVICES 8

/* Parameters a function of a loaded image may have (an image with more is refused). */
#define FAKE_MAX_PARAMS 64

/* ---- entry points ------------------------------------------------------------------------- */

/* X(name, version): every entry point this driver implements, at the ABI version of the PFN
 * typedef it matches (its declaration takes that type, below). It serves only those of
 * src/backends/cuda/entry_points.h, and each of those must be here at the same version, or
 * fake_cuda.c does not compile: a backend needing a new entry point needs it here first. Any
 * implemented here that the backend dropped from its list stay implemented and are reported as
 * not found. */
#define FAKE_ENTRY_POINTS(X)                                                                       \
    X(cuInit, 2000)                                                                                \
    X(cuDriverGetVersion, 2020)                                                                    \
    X(cuGetErrorName, 6000)                                                                        \
    X(cuGetErrorString, 6000)                                                                      \
    X(cuDeviceGetCount, 2000)                                                                      \
    X(cuDeviceGet, 2000)                                                                           \
    X(cuDeviceGetName, 2000)                                                                       \
    X(cuDeviceGetAttribute, 2000)                                                                  \
    X(cuDeviceTotalMem, 3020)                                                                      \
    X(cuDevicePrimaryCtxRetain, 7000)                                                              \
    X(cuDevicePrimaryCtxRelease, 11000)                                                            \
    X(cuCtxSetCurrent, 4000)                                                                       \
    X(cuMemGetInfo, 3020)                                                                          \
    X(cuMemAlloc, 3020)                                                                            \
    X(cuMemFree, 3020)                                                                             \
    X(cuMemHostAlloc, 2020)                                                                        \
    X(cuMemFreeHost, 2000)                                                                         \
    X(cuMemHostRegister, 6050)                                                                     \
    X(cuMemHostUnregister, 4000)                                                                   \
    X(cuMemcpyHtoDAsync, 3020)                                                                     \
    X(cuMemcpyDtoHAsync, 3020)                                                                     \
    X(cuMemcpyDtoDAsync, 3020)                                                                     \
    X(cuMemsetD8Async, 3020)                                                                       \
    X(cuMemsetD16Async, 3020)                                                                      \
    X(cuMemsetD32Async, 3020)                                                                      \
    X(cuStreamCreate, 2000)                                                                        \
    X(cuStreamDestroy, 4000)                                                                       \
    X(cuStreamSynchronize, 2000)                                                                   \
    X(cuStreamQuery, 2000)                                                                         \
    X(cuStreamWaitEvent, 3020)                                                                     \
    X(cuEventCreate, 2000)                                                                         \
    X(cuEventDestroy, 4000)                                                                        \
    X(cuEventRecord, 2000)                                                                         \
    X(cuEventQuery, 2000)                                                                          \
    X(cuEventSynchronize, 2000)                                                                    \
    X(cuLaunchHostFunc, 10000)                                                                     \
    X(cuLibraryLoadData, 12000)                                                                    \
    X(cuLibraryGetKernel, 12000)                                                                   \
    X(cuLibraryUnload, 12000)                                                                      \
    X(cuLaunchKernel, 4000)                                                                        \
    X(cuStreamBeginCapture, 10010)                                                                 \
    X(cuStreamEndCapture, 10000)                                                                   \
    X(cuStreamIsCapturing, 10000)                                                                  \
    X(cuGraphInstantiateWithFlags, 11040)                                                          \
    X(cuGraphUpload, 11010)                                                                        \
    X(cuGraphLaunch, 10000)                                                                        \
    X(cuGraphExecDestroy, 10000)                                                                   \
    X(cuGraphDestroy, 10000)                                                                       \
    X(cuGraphClone, 10000)                                                                         \
    X(cuGraphCreate, 10000)                                                                        \
    X(cuGraphAddKernelNode, 12000)                                                                 \
    X(cuGraphAddMemcpyNode, 10000)                                                                 \
    X(cuGraphAddMemsetNode, 10000)                                                                 \
    X(cuGraphAddHostNode, 10000)                                                                   \
    X(cuGraphExecUpdate, 12000)                                                                    \
    X(cuKernelGetFunction, 12000)                                                                  \
    X(cuFuncGetParamInfo, 12040)                                                                   \
    X(cuStreamGetCaptureInfo, 12030)                                                               \
    X(cuGraphExecKernelNodeSetParams, 12000)                                                       \
    X(cuGraphKernelNodeSetParams, 12000)                                                           \
    X(cuGraphNodeFindInClone, 10000)                                                               \
    X(cuGraphConditionalHandleCreate, 12030)                                                       \
    X(cuGraphAddNode, 12030)                                                                       \
    X(cuStreamUpdateCaptureDependencies, 12030)                                                    \
    X(cuStreamBeginCaptureToGraph, 12030)

/* One index per implemented entry point, for call counts, injection and hiding. */
enum fake_ep {
#define FAKE_EP_ENUM(name, version) FAKE_EP_##name,
    FAKE_ENTRY_POINTS(FAKE_EP_ENUM)
#undef FAKE_EP_ENUM
        FAKE_EP_COUNT
};

/* Counts a call of entry point `ep` and returns the code an injected failure makes it return,
 * or CUDA_SUCCESS to go on. Every entry point starts with FAKE_ENTER. */
CUresult fake__enter(enum fake_ep ep);
#define FAKE_ENTER(name) FAKE_LEDGER_ENTER(fake__enter, FAKE_EP_##name)

/* The environment knobs, read once (fake_cuda.c); read-only afterwards. */
struct fake_config {
    int version;                /* ACGTEST_CUDA_VERSION */
    int devices;                /* ACGTEST_CUDA_DEVICES */
    size_t mem_bytes;           /* ACGTEST_CUDA_MEM_MB, per device */
    CUresult init_fail;         /* ACGTEST_CUDA_INIT_FAIL */
    char hidden[FAKE_EP_COUNT]; /* ACGTEST_CUDA_HIDE */
};
extern struct fake_config fake__cfg;

/* The small containers (struct fake_vec, struct fake_ids) are tests/driver_common's. */

/* ---- objects ------------------------------------------------------------------------------- */

/* A device's primary context: the only kind of context the driver has. */
struct CUctx_st {
    int device;
    long retains;     /* cuDevicePrimaryCtxRetain minus Release; 0: inactive */
    int tearing_down; /* the last release is freeing what the context held */
    CUresult sticky;  /* an asynchronous fault (CUDA_ERROR_ILLEGAL_ADDRESS, or what
                         acgtest_cuda_set_sticky set); 0: none. Cleared by the teardown */
    size_t allocated; /* bytes of live cuMemAlloc allocations */
};

struct fake_builtin;
struct fake_snapshot;

/* What one unit of GPU work does: a kernel, a copy, a fill, a host function, nothing (an empty
 * node) or a conditional node (fake_cond.c). The same record is a queued op, a captured node and
 * an instantiated node, but for a conditional node, whose bodies a graph's node owns as graphs
 * and a snapshot's as snapshots. */
struct fake_work {
    CUgraphNodeType type; /* KERNEL, MEMCPY, MEMSET, HOST, EMPTY or CONDITIONAL */
    union {
        struct {
            const void *kernel; /* the CUkernel, only compared (cuGraphExecUpdate) */
            acg_kernel_cpu_fn fn;
            /* Device code the driver emulates itself (fn NULL): its parameters are args[0 ..
             * builtin->n_params), each read as the u32 or u64 its size says. */
            const struct fake_builtin *builtin;
            uint32_t n_args;
            acg_arg_type types[ACG_MAX_KERNEL_ARGS];
            acg_cpu_arg args[ACG_MAX_KERNEL_ARGS]; /* copied at launch or record time */
            uint32_t global[3];
        } kernel;
        struct {
            uintptr_t dst, src;
            size_t bytes;
            int dst_device, src_device; /* which sides are device memory, checked at run */
        } copy;
        struct {
            uintptr_t dst;
            uint32_t value;
            unsigned element_size; /* 1, 2 or 4 bytes */
            size_t count;          /* elements */
        } fill;
        struct {
            CUhostFn fn;
            void *data;
        } host;
        struct {
            CUgraphConditionalNodeType type;
            unsigned size;   /* bodies */
            uint64_t handle; /* the CUgraphConditionalHandle whose value chooses */
            CUgraph *bodies; /* a graph's node: (size) its body graphs, which it owns; the
                                array is CUDA_CONDITIONAL_NODE_PARAMS.phGraph_out */
            size_t slot;     /* a snapshot's node: the handle's index in its exec's conds */
            struct fake_snapshot **snaps; /* a snapshot's node: (size) the bodies, each holding
                                             a reference */
        } cond;
    } u;
};

/* A live allocation: device memory (cuMemAlloc), pinned host memory (cuMemHostAlloc) or a
 * registered host range (cuMemHostRegister). */
enum fake_range_kind { FAKE_RANGE_DEVICE, FAKE_RANGE_HOST_ALLOC, FAKE_RANGE_REGISTERED };
struct fake_range {
    enum fake_range_kind kind;
    uintptr_t base;
    size_t size;
    struct CUctx_st *ctx;
};

struct fake_op;
struct fake_capture;

struct CUstream_st {
    struct CUctx_st *ctx; /* first: fake__reclaim reads it there */
    unsigned flags;
    /* The handle, the worker (until joined), each event whose last record is on this stream
     * and each queued wait on it hold one reference; the last one frees the stream. */
    long refs;
    struct fake_worker worker;    /* runs its ops; told to quit when the stream is destroyed */
    struct fake_capture *capture; /* the capture this stream records into; NULL: none */
    struct fake_ids frontier;     /* while capturing: the nodes its next node depends on */
    /* cuStreamGetCaptureInfo's answer: the frontier's nodes and their (default) edge data,
     * valid until the next call on the stream, as CUDA's */
    CUgraphNode *info_deps; /* (info_cap) */
    CUgraphEdgeData *info_edges;
    size_t info_cap;
};

struct CUevent_st {
    struct CUctx_st *ctx; /* first: fake__reclaim reads it there */
    unsigned flags;
    /* The last record outside a capture: reached once `stream` completed `seq` ops. NULL:
     * never recorded (or the record was a captured one). Holds a reference on the stream. */
    struct CUstream_st *stream;
    uint64_t seq;
    /* The last record inside a capture (the record is then only a point in the graph):
     * the capture and the frontier at that point. Cleared when the capture ends. */
    struct fake_capture *capture;
    struct fake_ids frontier;
};

/* A graph node; its handle is the CUgraphNode. */
struct CUgraphNode_st {
    size_t index;         /* in its graph's insertion order, a valid serial order */
    struct fake_ids deps; /* indices of earlier nodes */
    struct fake_work work;
};

/* A conditional handle (cuGraphConditionalHandleCreate): part of the graph it was made in. */
struct fake_cond {
    uint64_t id; /* the CUgraphConditionalHandle: unique in the process (fake__g.next_id) */
    struct CUctx_st *ctx;
    unsigned value; /* the default value */
    unsigned flags; /* 0 or CU_GRAPH_COND_ASSIGN_DEFAULT */
    int used;       /* a conditional node took it */
};

struct CUgraph_st {
    struct CUctx_st *ctx;  /* first: fake__reclaim reads it there */
    struct fake_vec nodes; /* struct CUgraphNode_st *, in insertion order */
    uint64_t id;           /* unique in the process (fake__g.next_id), never reused */
    uint64_t cloned_from;  /* the id of the graph cuGraphClone copied; 0: none */
    struct fake_vec conds; /* struct fake_cond *: the conditional handles made in it */
    /* A conditional node's body (in fake__g.bodies, not fake__g.graphs): the graph holding that
     * node, which owns it. NULL: a graph of its own. */
    struct CUgraph_st *parent;
};

/* A stream capture in progress. */
struct fake_capture {
    struct CUctx_st *ctx;
    /* What the capture built so far; the user's at the end. NULL once a capture into a graph
     * that was then freed (into) was invalidated by that. */
    struct CUgraph_st *graph;
    int into; /* cuStreamBeginCaptureToGraph: the graph was the caller's, and stays theirs */
    struct CUstream_st *origin;
    uint64_t id; /* unique in the process, as cuStreamGetCaptureInfo's id_out */
    int invalidated;
    struct fake_vec members; /* streams capturing into it, the origin included */
};

/* A conditional handle's state in an exec: its value, which each replay starts from the default
 * when the handle says so, and which conditional nodes read and emulated device code sets. */
struct fake_cond_state {
    uint64_t handle;
    unsigned value, default_value, flags;
};

/* The parameters of an instantiated graph, one version: a launch holds the version current
 * when it was queued, so cuGraphExecUpdate changes only later launches. */
struct fake_snapshot {
    long refs;
    size_t n;
    struct fake_work nodes[]; /* (n) in insertion order */
};

struct CUgraphExec_st {
    struct CUctx_st *ctx;       /* first: fake__reclaim reads it there */
    long refs;                  /* the handle and each queued launch or upload */
    size_t n;                   /* nodes */
    struct fake_ids *deps;      /* (n) each node's dependencies, fixed at instantiation */
    struct fake_snapshot *snap; /* the parameters future launches use */
    /* The graph it was instantiated from, whose nodes name its nodes (cuGraphExec*SetParams,
     * in insertion order, as the snapshot's): the pointer is only compared while a graph of
     * that id lives (it may have been destroyed since). */
    const struct CUgraph_st *origin;
    uint64_t origin_id;
    /* Launches and uploads run one at a time in the order they were queued, from any stream:
     * each takes a ticket and runs when `running` reaches it. */
    uint64_t next_ticket, running;
    /* The conditional handles of its graph and of every body in it, in a replay's state: only
     * replays touch the values, one at a time. */
    size_t n_conds;
    struct fake_cond_state *conds; /* (n_conds) */
};

/* A function's parameters as its image describes them (fake_kernel.c reads them from the
 * image itself, never from acg's definition): what cuFuncGetParamInfo answers. */
struct fake_params {
    uint32_t n;
    uint32_t size[FAKE_MAX_PARAMS];   /* bytes */
    uint32_t offset[FAKE_MAX_PARAMS]; /* bytes into the parameter buffer */
};

/* A function an image holds. */
struct fake_function {
    char *name;
    struct fake_params params;
};

struct CUkern_st {
    struct CUlib_st *lib;
    char *name;
    const struct fake_builtin *builtin; /* device code the driver emulates (fn NULL), or NULL */
    acg_kernel_cpu_fn fn;
    uint32_t n_args;
    acg_arg_type types[ACG_MAX_KERNEL_ARGS];
    uint32_t lanes; /* threads per work item along x (acg_kernel_desc.cuda_lanes), at least 1 */
    struct fake_params params; /* the compiled function's, from the image */
};

struct CUlib_st {
    const void *image; /* as loaded (the caller keeps it until the unload), and its bytes */
    size_t size;
    struct fake_vec kernels;   /* struct CUkern_st * */
    struct fake_vec functions; /* struct fake_function *: what the image holds */
};

/* ---- shared state -------------------------------------------------------------------------- */

struct fake_state {
    pthread_mutex_t lock;
    pthread_cond_t progress; /* broadcast whenever an op finishes or a worker exits */
    int initialized;         /* cuInit succeeded */
    struct CUctx_st ctx[FAKE_MAX_DEVICES];
    struct fake_vec ranges;    /* struct fake_range *: device, pinned and registered */
    struct fake_vec streams;   /* live stream handles */
    struct fake_vec workers;   /* every stream whose worker is not joined yet */
    struct fake_vec events;    /* live event handles */
    struct fake_vec graphs;    /* live graph handles (not those a capture is building) */
    struct fake_vec bodies;    /* conditional nodes' body graphs, parts of their graphs */
    struct fake_vec execs;     /* live exec handles */
    struct fake_vec libraries; /* loaded libraries */
    struct fake_vec kernels;   /* kernels of loaded libraries */
    struct fake_vec captures;  /* captures in progress */
    const acg_kernel_desc *(*lookup)(const void *image, size_t size,
                                     const char *name); /* acgtest_cuda_bind_kernels */
    uint64_t next_id; /* the last id given to a graph or a capture */
};
extern struct fake_state fake__g;

/* ---- shared helpers ------------------------------------------------------------------------ */

/* Counts user-visible objects made (delta 1) or released (-1), for acgtest_cuda_live; what a
 * context's teardown or the unload frees for an owner that leaked it is not released. */
void fake__live(long delta);
/* (lock held) The calling thread's current context: NOT_INITIALIZED before cuInit,
 * INVALID_CONTEXT when the thread has none (or it was released), or its sticky fault. */
CUresult fake__current(struct CUctx_st **out);
/* (lock held) The same for a release (a free, a destroy, an unregister): a context holding a
 * fault is given too, with *fault set to the fault (else CUDA_SUCCESS), which the release
 * returns once it released (see fake_cuda.c). */
CUresult fake__current_release(struct CUctx_st **out, CUresult *fault);
/* The start of an entry point that needs no context, after FAKE_ENTER: takes fake__g.lock (held
 * on return, whatever the result); NOT_INITIALIZED before cuInit. */
CUresult fake__lock_initialized(void);
/* (lock held) Whether h is an active primary context: compared, never read, until found. */
int fake__ctx_active(CUcontext h);
/* The start of most entry points, after FAKE_ENTER: takes fake__g.lock (held on return,
 * whatever the result), then fake__current. */
CUresult fake__lock_current(struct CUctx_st **out);
/* The end of an entry point that took fake__g.lock: lets go of it and returns r. */
CUresult fake__unlock(CUresult r);
/* r, the checks so far, or INVALID_VALUE when they passed and there is no `out` to answer in. */
static inline CUresult fake__given(CUresult r, const void *out) {
    return r == CUDA_SUCCESS && out == NULL ? CUDA_ERROR_INVALID_VALUE : r;
}
/* (lock held) h as a live handle of `set` (the handle is the object) in *out:
 * CUDA_ERROR_INVALID_HANDLE for NULL or one that is not live. */
CUresult fake__handle(const struct fake_vec *set, const void *h, void **out);
/* (lock held) The end of a creation: obj, just made (NULL: out of memory), becomes a live handle
 * of `set` in *out, or is freed with free_fn when the set has no room (OUT_OF_MEMORY). */
CUresult fake__publish(struct fake_vec *set, void *obj, void (*free_fn)(void *obj), void **out);
/* A release entry point (cuStreamDestroy, cuEventDestroy, ...), after FAKE_ENTER: takes the
 * lock, the calling thread's context (fake__current_release) and the live handle h of `set`;
 * `check` (optional) may refuse the release with its result, the handle staying; else the
 * handle is forgotten and free_fn frees what it holds. The result is then the fault the context
 * holds (CUDA_SUCCESS: none). */
CUresult fake__release(struct fake_vec *set, void *h,
                       CUresult (*check)(struct CUctx_st *ctx, void *obj),
                       void (*free_fn)(void *obj));
/* (lock held) At ctx's teardown: forgets every live handle of `set` that belongs to ctx and
 * frees it with free_fn. Every handle's struct begins with its context. */
void fake__reclaim(struct fake_vec *set, struct CUctx_st *ctx, void (*free_fn)(void *obj));
/* (lock held) A stream handle of `ctx` usable for work. */
CUresult fake__stream_get(CUstream h, struct CUctx_st *ctx, struct CUstream_st **out);
/* The preamble of a stream call: takes fake__g.lock (held on return, whatever the result), then
 * the calling thread's context and the stream h of it. */
CUresult fake__lock_stream(CUstream h, struct CUctx_st **ctx, struct CUstream_st **out);
/* A copy between the device and pageable host memory (not pinned, not registered) returns once
 * it is done, as CUDA's does: waits for the stream's work so far (not a capturing stream's). */
CUresult fake__stream_pageable_wait(CUstream h, const void *host, size_t bytes);
/* (lock held) Runs `work` in `s`'s order: records a node when s captures, else queues it. */
CUresult fake__submit(struct CUstream_st *s, const struct fake_work *work);
/* (lock held; lets go of it) The end of a stream call whose checks gave r: fake__submit when
 * they passed; the result. */
CUresult fake__unlock_submit(CUresult r, struct CUstream_st *s, const struct fake_work *work);
/* (lock held) SUCCESS for a stream that does not capture; for one that does, a call a capture
 * cannot take: the capture is invalidated, and the result STREAM_CAPTURE_UNSUPPORTED. */
CUresult fake__not_capturing(struct CUstream_st *s);
/* (lock held) Queues a replay of `x` (launch) or its upload (!launch) on `s`, which does not
 * capture. */
CUresult fake__submit_exec(struct CUstream_st *s, struct CUgraphExec_st *x, int launch);
/* (lock held; waits) Waits until every stream of `ctx` finished what was queued before. */
void fake__ctx_synchronize(struct CUctx_st *ctx);
/* (lock held; lets go while it runs) Runs one unit of work on a stream's worker: eagerly (x
 * NULL) or as a node of a replay of exec x. */
void fake__run_work(struct CUctx_st *ctx, const struct fake_work *work, struct CUgraphExec_st *x);
/* (lock held) Joins the workers of destroyed streams that have drained. */
void fake__reap_workers(void);
/* (lock held) Drops a reference on a stream; the last frees it. */
void fake__stream_release(struct CUstream_st *s);
/* (lock held) At ctx's teardown (fake__reclaim): lets the workers of its streams drain and exit,
 * and frees its events. */
void fake__streams_reclaim(struct CUctx_st *ctx);
void fake__events_reclaim(struct CUctx_st *ctx);
/* (lock held; waits) Frees everything `ctx` holds, when its last retain is released. */
void fake__ctx_teardown(struct CUctx_st *ctx);

/* (lock held) The live range holding [addr, addr + bytes) of one of the `kinds` (a bit mask of
 * 1 << fake_range_kind), or NULL. bytes 0 asks for addr inside or at the end of a range. */
struct fake_range *fake__range_find(uintptr_t addr, size_t bytes, unsigned kinds);
#define FAKE_DEVICE_MEMORY (1u << FAKE_RANGE_DEVICE)
#define FAKE_PINNED_MEMORY ((1u << FAKE_RANGE_HOST_ALLOC) | (1u << FAKE_RANGE_REGISTERED))
/* (lock held) Frees every allocation and registration of `ctx` (its teardown). */
void fake__ranges_reclaim(struct CUctx_st *ctx);

/* (lock held) A kernel launch's work record: checks the launch as cuLaunchKernel does. */
CUresult fake__kernel_work(CUkernel k, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shared, void **params, void **extra,
                           struct fake_work *out);
/* (lock held) Frees every library (at unload of the driver). */
void fake__libraries_reclaim(void);

/* (lock held) Capture plumbing (fake_graph.c). */
CUresult fake__capture_record(struct CUstream_st *s, const struct fake_work *work);
/* s, not capturing, joins `c` at `frontier` (a wait on an event recorded in c). */
CUresult fake__capture_join(struct CUstream_st *s, struct fake_capture *c,
                            const struct fake_ids *frontier);
void fake__capture_invalidate(struct fake_capture *c);
void fake__capture_discard(struct fake_capture *c); /* every member leaves capture mode */
/* (lock held) Frees the graphs and execs of `ctx` (its streams drained). */
void fake__graphs_reclaim(struct CUctx_st *ctx);
/* (lock held) Drops a reference on an exec or a snapshot; the last frees it. */
void fake__exec_release(struct CUgraphExec_st *x);
void fake__snapshot_release(struct fake_snapshot *snap);

/* (lock held) Graphs (fake_graph.c; fake__graph_find and fake__graph_deps are fake_cond.c's).
 * An empty graph of ctx with an id of its own, or NULL when
 * out of memory. */
struct CUgraph_st *fake__graph_new(struct CUctx_st *ctx);
/* Frees a graph with its nodes, its handles and its nodes' bodies; a capture still recording
 * into one of them (cuStreamBeginCaptureToGraph) is invalidated. */
void fake__graph_free(struct CUgraph_st *g);
/* Appends a node running `work` after the nodes `deps` (a conditional node's bodies become the
 * node's). */
CUresult fake__graph_add(struct CUgraph_st *g, const struct fake_ids *deps,
                         const struct fake_work *work, struct CUgraphNode_st **out);
/* The graph h that nodes may be added to: a live graph, a capture's graph, or a body. */
CUresult fake__graph_find(CUgraph h, struct CUgraph_st **out);
/* The indices in g of the n nodes deps (NULL when n is 0), with their edge data (NULL: the
 * default): INVALID_VALUE for a node not of g or given twice, NOT_SUPPORTED for edge data that
 * is not the default's (edges carry none here). */
CUresult fake__graph_deps(const struct CUgraph_st *g, const CUgraphNode *deps,
                          const CUgraphEdgeData *edges, size_t n, struct fake_ids *out);
/* (lock held) A node's work from the parameters of cuGraphAdd*Node (fake_graph.c): a kernel's
 * (CUDA_KERNEL_NODE_PARAMS_v2, checked as a launch is), a 1-D copy's (CUDA_MEMCPY3D), a one-row
 * fill's (CUDA_MEMSET_NODE_PARAMS), a host function's (CUDA_HOST_NODE_PARAMS). */
CUresult fake__kernel_node_work(const void *params, struct fake_work *out);
CUresult fake__copy_node_work(const void *params, struct fake_work *out);
CUresult fake__fill_node_work(const void *params, struct fake_work *out);
CUresult fake__host_node_work(const void *params, struct fake_work *out);
/* A context argument: NULL (taken as the current one, leniently) or an active primary one
 * (else INVALID_CONTEXT). */
CUresult fake__ctx_argument(CUcontext hctx);

/* ---- conditional nodes (fake_cond.c) ------------------------------------------------------ */

/* Whether a node of this type may be in a conditional node's body (CUDA's rule: kernels, empty
 * nodes, child graphs, memsets, memcopies and conditionals). */
int fake__body_allows(CUgraphNodeType type);
/* Whether a body may hold this work: its type, and a copy's host sides pinned. */
int fake__body_takes(const struct fake_work *w);
/* (lock held) Frees a graph node's bodies (fake__graph_free of each). */
void fake__cond_free_bodies(struct fake_work *w);
/* (lock held) Whether g or a graph in it (a body, at any depth) has a conditional node or a
 * handle; *first, when not NULL, gets g's first conditional node (NULL: none). */
int fake__graph_conditional(const struct CUgraph_st *g, struct CUgraphNode_st **first);
/* (lock held) Gives x the conditional handles of g and of every body in it: INVALID_VALUE for a
 * handle no conditional node took, or a graph with conditional nodes of which an exec lives
 * (CUDA allows one at a time); ILLEGAL_STATE while a capture still records into a body. */
CUresult fake__exec_conds(struct CUgraphExec_st *x, const struct CUgraph_st *g);
/* (lock held) The parameters of g's nodes for exec x (whose conds are set), bodies included;
 * NULL when out of memory. */
struct fake_snapshot *fake__snapshot_of(const struct CUgraph_st *g, const struct CUgraphExec_st *x);
/* (lock held) A copy of snap that another version may change a node of; NULL when out of
 * memory. */
struct fake_snapshot *fake__snapshot_copy(const struct fake_snapshot *snap);
/* A snapshot of n nodes, zeroed (empty kernel nodes), their work left to the caller; NULL when
 * out of memory. */
struct fake_snapshot *fake__snapshot_new(size_t n);
/* (lock held; lets go while work runs) One replay of snapshot `snap` of exec x. */
void fake__replay(struct CUctx_st *ctx, struct CUgraphExec_st *x, const struct fake_snapshot *snap);
/* The device code of `name` with these parameters that the driver emulates, or NULL. */
const struct fake_builtin *fake__builtin_find(const char *name, const struct fake_params *params);
/* (lock held) Runs a launch of emulated device code, eagerly (x NULL) or in a replay of x: a
 * fault sets ctx's sticky error. */
void fake__builtin_run(struct CUctx_st *ctx, const struct fake_work *w, struct CUgraphExec_st *x);

/* ---- entry points ------------------------------------------------------------------------ */

/* One per line of FAKE_ENTRY_POINTS, declared with the type of the PFN typedef of the version it
 * is served at (cudaTypedefs.h): a definition whose parameters drifted from the ABI does not
 * compile. */
#define FAKE_EP_DECLARE(name, version) __typeof__(*(PFN_##name##_v##version)0) fake_##name;
FAKE_ENTRY_POINTS(FAKE_EP_DECLARE)
#undef FAKE_EP_DECLARE

#endif /* ACG_TESTS_CUDA_DRIVER_FAKE_CUDA_IMPL_H */
