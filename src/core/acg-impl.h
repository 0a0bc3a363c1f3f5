/*
 * acg-impl.h — the bodies of the public handles and the core's internal helpers.
 *
 * Locking: a stream's `lock` serializes calls on that stream; a device's `lock` guards its object
 * lists, live captures, graph references and pools; a pool's `replay_lock` orders its replays.
 * Order: stream lock, then device lock, then a pool's replay lock, then the global handle and
 * pinned registries. Eager submission and replay take no device lock unless the stream
 * captures. Nothing waits for the device (a host wait, an instantiation) under the device lock:
 * frees and device synchronizes wait on events recorded on the streams concerned, graph
 * destroys wait for their pool's replays first, and a capture being ended is instantiated under
 * its origin stream's lock alone (the capture is marked `ending` meanwhile, and whoever meets
 * it waits on the device's `ended` condition).
 */
#ifndef ACG_CORE_IMPL_H
#define ACG_CORE_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include <acg/acg.h>

#include "core/backend/acg-backend.h"
#include "core/export/acg-layer.h"

/* ---- pinned host memory registry --------------------------------------------------------- */

typedef struct acg__pinned {
    void *base;
    size_t size;
    acg_device *dev;
    bool pinned;         /* false: a pageable fallback */
    bool registered;     /* the caller's memory (acg_pinned_register), not acg's */
    uint32_t graph_refs; /* live graphs copying from or to it (under the registry lock) */
    uint64_t used_by;    /* use bits of the streams that copied from or to it (registry lock) */
} acg__pinned;

/* Adds an entry: ACG_ERR_INVALID_ARGUMENT when it overlaps one, ACG_ERR_OUT_OF_MEMORY. */
acg_status acg__pinned_add(const acg__pinned *entry);
/* Removes the entry at base into *out: ACG_ERR_INVALID_HANDLE when unknown, ACG_ERR_IN_USE
 * while graphs reference it. */
acg_status acg__pinned_remove(void *base, acg__pinned *out);
/* Finds the allocation containing [p, p+size); copies it into *out. */
bool acg__pinned_lookup(const void *p, size_t size, acg__pinned *out);
/* Adjusts graph_refs of the allocation at base by delta. */
void acg__pinned_ref(void *base, int delta);
/* Whether [p, p+size) lies in a pinned allocation of dev; an allocation of dev containing it
 * notes the stream use bit `bit` (so its free waits for that stream). */
bool acg__pinned_use(const acg_device *dev, const void *p, size_t size, uint64_t bit);

/* ---- objects ----------------------------------------------------------------------------- */

typedef struct acg__capture acg__capture;

typedef struct acg__ids {
    uint32_t *v;
    uint32_t n, cap;
} acg__ids;

struct acg_kernel {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    const acg__kernel_def *def;
    acg__bk_kernel *impl;
};

struct acg_device {
    acg__life life; /* calls using it (handle.c) */
    const acg_backend_i *vt;
    acg__bk_device *impl;
    int index;
    char spec[96];
    char name[120]; /* spec and which open it was: tells two handles of one device apart */
    acg_capability cap;
    uint64_t capability_queries; /* driver capability queries made for this device */
    pthread_mutex_t lock;
    uint32_t n_buffers, n_pinned, n_streams, n_events, n_graphs, n_pools, n_groups;
    acg_stream *streams; /* live streams, newest first (for device synchronize) */
    uint64_t next_stream_serial;
    acg_graph *graphs;      /* live graphs (to name one that holds a resource) */
    acg__capture *captures; /* live captures */
    uint32_t n_ending;      /* captures being instantiated outside the lock (acg__capture.ending) */
    pthread_cond_t ended;   /* signalled (with lock) when one of them is done */
    acg_kernel **kernels;   /* (n_kernels) loaded kernels, each at its first lookup */
    uint32_t n_kernels, cap_kernels;
    uint64_t next_graph_id;
    acg_memory_stats memory;        /* under lock */
    bool retain_discarded;          /* from the backend; a test hook may set it */
    bool node_update_fallback;      /* test hook: node updates through graph_update, not the slot */
    _Atomic uint64_t free_override; /* test hook: free memory to report (0: ask the driver) */
    /* The first device fault, latched (acg__device_fault): ACG__FAULT_NONE, ACG__FAULT_LATCHING
     * while lost_why is written, then ACG__FAULT_LOST, after which lost_why never changes. */
    _Atomic int fault;
    char lost_why[400];
};

struct acg_buffer {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg__bk_mem *mem; /* root allocation (backend memory) */
    size_t offset;    /* of this buffer within the root */
    size_t size;
    _Atomic uint64_t used_by; /* root: use bits of the streams that queued work on its memory */
    acg_buffer *parent;       /* for views */
    uint32_t n_views;         /* live views of this buffer (under dev->lock) */
    uint32_t graph_refs;      /* live graphs referencing it (under dev->lock) */
    bool scratch;             /* graph scratch: released with its graph */
    bool stream_owned;        /* from acg_stream_alloc outside a capture: acg_stream_free */
    uint64_t owner_id;        /* graph id owning scratch */
    uint64_t capture_id;      /* the capture that carved scratch: the only place it may be used */
    const void *owner;        /* the object that allocated it for itself, or NULL (the user) */
    const char *owner_what;   /* what the owner is ("KV cache") */
};

struct acg_stream {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg__bk_stream *impl;
    uint64_t serial;     /* creation order on its device (dev->streams is sorted by it) */
    uint64_t use_bit;    /* 1 << (serial % 64): marks the memory it queues work on */
    acg__bk_event *mark; /* recorded (under lock) by frees and device synchronizes that wait
                            for the stream; re-recording only moves it later, so sharing it
                            never ends a wait early */
    pthread_mutex_t lock;
    acg__capture *_Atomic capture; /* set under this stream's and dev's lock; cleared under dev */
    acg__ids frontier;             /* capture nodes later work depends on */
    uint32_t capture_index;        /* its place in that capture (dev->lock): acg__node.stream */
    struct acg__deferred {         /* memory freed in stream order, awaiting its event */
        acg__bk_mem *mem;
        size_t size;
        acg__bk_event *event; /* backend event recorded at the free */
    } * deferred;             /* (under dev->lock) */
    uint32_t n_deferred, cap_deferred;
    struct acg__eager_loop *eager_loop; /* loops open outside a capture (loop.c; under lock) */
    acg_stream *next;                   /* in dev->streams */
};

struct acg_event {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg__bk_event *impl;
    acg__capture *capture; /* recorded in this capture (NULL: a real record or none) */
    uint64_t capture_id;
    acg__ids frontier;
};

struct acg_device_group {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg__bk_group *impl;
    acg_comm comm; /* the caller's, read at its size (the backend keeps a pointer to this) */
    int32_t rank, n_ranks;
    uint32_t graph_refs; /* live graphs whose description holds one of its allreduces (dev) */
};

struct acg_graph_pool {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    struct acg__chunk {
        acg__bk_mem *mem; /* backend memory, never moved */
        size_t size;
        size_t used;      /* bytes at its start that capture `capture` carved */
        uint64_t capture; /* the capture into the pool that last carved from it */
    } * chunks;
    uint32_t n_chunks, cap_chunks;
    size_t bytes;
    uint32_t n_graphs; /* live graphs captured into it */
    bool capturing;
    bool is_private;
    acg_graph **parked; /* discarded graphs kept until the next successful capture */
    uint32_t n_parked, cap_parked;
    pthread_mutex_t replay_lock; /* orders replays; guards last_* (after dev->lock if both) */
    acg__bk_event *last_event;   /* backend event after the pool's latest replay */
    const acg_stream *last_stream;
};

struct acg__capture {
    acg_device *dev;
    uint64_t id;
    acg__bk_recording *rec; /* the backend's native recording, until it ends or is aborted */
    acg_stream *origin;
    acg_graph_pool *pool;
    acg_capture_state state;
    bool ending; /* acg_stream_end_capture is instantiating it without dev->lock */
    acg_status why_status;
    char why[384];
    acg__graph_desc desc;
    uint32_t cap_nodes, cap_deps;
    acg_stream **streams; /* participants, origin first */
    uint32_t n_streams, cap_streams;
    uint32_t n_joined; /* streams that ever took part, the origin included: the next index */
    acg_buffer **scratch;
    uint32_t n_scratch, cap_scratch;
    uint32_t loops[ACG_MAX_LOOP_DEPTH]; /* the open loops' nodes, outermost first (loop.c) */
    uint32_t loop_depth;
    acg_stream *loop_stream; /* the stream whose loops are open */
    acg__capture *next;      /* in dev->captures */
};

struct acg_graph {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    uint64_t id;
    acg_graph_pool *pool;
    acg__bk_exec *exec;
    acg__graph_desc desc;
    acg_buffer **scratch;
    uint32_t n_scratch;
    acg_graph *next; /* in dev->graphs */
};

/* ---- shared helpers ---------------------------------------------------------------------- */

/* A new root buffer of size bytes, owned by owner (NULL: the caller) or by its stream
 * (acg_stream_alloc), whole before its handle is live (dev->lock held; no capture check). */
acg_status acg__buffer_new(acg_device *dev, size_t size, const void *owner, const char *what,
                           bool stream_owned, const char *fn, acg_buffer **out);
/* Releases the stream's deferred frees whose work completed, or all of them (dev->lock). */
void acg__stream_reclaim(acg_stream *s, bool all);

/* Device memory through the backend, accounted (dev->lock held). */
acg_status acg__device_mem_alloc(acg_device *dev, size_t size, acg__bk_mem **mem);
void acg__device_mem_free(acg_device *dev, acg__bk_mem *mem, size_t size);

/* Waits for the work queued so far on the device's streams whose use bit is in mask (~0: all),
 * without holding the device lock while it waits. Each such stream gets an event recorded under
 * its own lock; a capture found on one is invalidated first (op names the call). Called with
 * no lock held, inside a call scope; returns the first failure. */
acg_status acg__device_wait_streams(acg_device *dev, uint64_t mask, const char *op);
/* Waits until no capture of the device is being instantiated (dev->lock held; released while
 * waiting). Whoever may meet a capture, or must not run during an instantiation, calls it. */
void acg__device_await_endings(acg_device *dev);
/* Notes that stream s queues work on the buffers (their root allocations). */
void acg__buffers_mark_use(const acg_stream *s, const acg_buffer *const *buffers, uint32_t n);

/* A device-wide operation `op` is about to run (dev->lock held): when a capture on the device
 * is active it is invalidated and ACG_ERR_CAPTURE_INVALIDATED returned, else ACG_OK.
 * acg__device_lock_op takes dev->lock for op and makes that check: ACG_OK with the lock held,
 * or the refusal with it released. */
acg_status acg__invalidate_device_captures(acg_device *dev, const char *op);
acg_status acg__device_lock_op(acg_device *dev, const char *op);
/* Invalidates one capture (dev->lock held) with `status`, recording op as the reason. */
acg_status acg__capture_invalidate(acg__capture *c, acg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Appends a node to the capture the stream is in (dev->lock held). The node's deps come from
 * the stream's frontier, which then becomes the node. On failure the capture is invalidated. */
acg_status acg__capture_add(acg_stream *s, acg__capture *c, const acg__node *node);

/* Submits one piece of work: records node into the stream's capture, or runs it with
 * eager(s, node) when the stream is not capturing. A node touching pageable host memory
 * (node->host set, host_pinned false) invalidates a capture instead. */
acg_status acg__submit(acg_stream *s, const char *fn, const acg__node *node,
                       acg_status (*eager)(acg_stream *s, const acg__node *node));

/* ACG_OK unless one of node's buffers is graph scratch that capture c (NULL: none) did not
 * carve: that is ACG_ERR_INVALID_ARGUMENT, naming the buffer. */
acg_status acg__check_scratch(const acg__capture *c, const acg__node *node, const char *fn);

/* Locks stream; returns its live capture with dev->lock held too, or NULL (only the stream
 * lock held). */
acg__capture *acg__stream_enter(acg_stream *s);
void acg__stream_leave(acg_stream *s, acg__capture *c);
/* acg__stream_enter for a call that never joins a capture (a wait, a replay): ACG_OK with the
 * stream lock held, or, when s captures, its capture invalidated ("<fn> on a capturing
 * stream<note> invalidated the capture"), the stream left, and that status. */
acg_status acg__stream_enter_eager(acg_stream *s, const char *note, const char *fn);

/* Loops (loop.c). acg__loop_gate: whether work on s (in capture c, or NULL) may go on while a
 * loop is open; body_kind says it is work a loop body holds (kernels, device copies, fills).
 * ACG_OK, or the refusal: c invalidated, or ACG_ERR_INVALID_ARGUMENT eagerly (stream lock, and
 * dev->lock with c). acg__loop_record notes eager work of an open loop before it runs, to run it
 * again (ACG_ERR_OUT_OF_MEMORY: nothing noted), acg__loop_unrecord drops the note of work that
 * failed; acg__loop_eager_free drops a stream's open eager loops (its destroy). */
acg_status acg__loop_gate(acg_stream *s, acg__capture *c, bool body_kind, const char *fn);
acg_status acg__loop_record(acg_stream *s, const acg__node *node,
                            acg_status (*eager)(acg_stream *s, const acg__node *node),
                            const char *fn);
void acg__loop_unrecord(acg_stream *s);
void acg__loop_eager_free(acg_stream *s);
/* Writes node into a zeroed slot, the fields of its kind only (capture.c). */
void acg__ledger_write(acg__node *slot, const acg__node *node);
/* Adds delta to what one node references (graph.c; dev->lock held). */
void acg__node_refs(const acg__node *n, int delta);

/* Frontier sets. */
bool acg__ids_copy(acg__ids *dst, const acg__ids *src);
bool acg__ids_union(acg__ids *dst, const acg__ids *src);
void acg__ids_free(acg__ids *ids);

/* ACG_OK for an active capture; the refusal (ACG_ERR_CAPTURE_INVALIDATED) for op otherwise. */
acg_status acg__capture_check(const acg__capture *c, const char *op);
/* Whether c (with this id) is still a live capture of dev (dev->lock held). */
bool acg__capture_live(const acg_device *dev, const acg__capture *c, uint64_t id);
/* Adds s to the capture as a forked stream / removes it (dev->lock held). */
acg_status acg__capture_join(acg__capture *c, acg_stream *s);
void acg__capture_leave(acg__capture *c, acg_stream *s);

/* Graph pools (dev->lock held): a new pool, freeing one, and carving scratch for a capture. */
acg_status acg__pool_new(acg_device *dev, bool is_private, acg_graph_pool **out, const char *fn);
void acg__pool_free(acg_graph_pool *pool);
acg_status acg__pool_carve(acg__capture *c, size_t size, acg_buffer **out);
/* The pool's replays (pool.c): acg__pool_wait waits for the latest replay of any graph of the
 * pool under its replay lock alone; acg__pool_lock_idle returns with dev->lock and the replay
 * lock held and no replay of the pool in flight (on failure with neither held). */
acg_status acg__pool_wait(acg_graph_pool *pool);
acg_status acg__pool_lock_idle(acg_graph_pool *pool);

/* Makes the graph of a capture whose backend executable is exec, taking the capture's
 * description and scratch (dev->lock held). On failure exec is destroyed. */
acg_status acg__graph_create(acg__capture *c, acg__bk_exec *exec, acg_graph **out);
/* Destroys graphs detached from pool: waits for the pool's replays with no lock held, then
 * releases them under dev->lock, and frees the array. */
void acg__pool_destroy_graphs(acg_graph_pool *pool, acg_graph **graphs, uint32_t n);

/* The status of a backend call made for a native capture: a failure invalidates the capture,
 * naming fn and the driver's detail (dev->lock held). */
acg_status acg__capture_native_step(acg__capture *c, acg_status st, const char *fn);
/* Drops the backend's native recording of the capture, if any (dev->lock held). */
void acg__capture_abort_native(acg__capture *c);
/* Frees a capture and detaches its streams (dev->lock held). */
void acg__capture_free(acg__capture *c);

/* Name of the live graph that references buffer or pinned memory (dev->lock held). */
uint64_t acg__graph_referencing(acg_device *dev, const acg_buffer *buf, const void *host,
                                size_t host_size);

/* Takes (delta 1) or releases (-1) what a graph description references; acg__desc_free
 * (acg-backend.h) frees its memory. */
void acg__desc_refs(acg_device *dev, const acg__graph_desc *desc, int delta);

/* Destroys the pool's parked graphs (dev->lock held; their replays already waited for). */
void acg__pool_release_parked(acg_graph_pool *pool);
/* Test hooks: keep discarded graphs as a backend that needs it would; graphs parked in a pool. */
void acg__device_set_retain_discarded(acg_device *dev, bool retain);
uint32_t acg__pool_parked_count(const acg_graph_pool *pool);

/* Test hooks of per-node updates: the core's fallback (graph_update of the rewritten
 * description) instead of the backend's slot; a device that says it cannot change a grid. */
void acg__device_set_node_update_fallback(acg_device *dev, bool fallback);
void acg__device_deny_node_update_grid(acg_device *dev);

/* Test hook: acg_device_get_memory_info reports `bytes` free (0: what the driver says). */
void acg__device_set_free_memory(acg_device *dev, uint64_t bytes);

/* Device faults (see "Device faults" in acg.h). acg__device_fault latches st on dev when it is
 * ACG_ERR_DEVICE_LOST and no fault was latched yet, keeping acg_last_error() as the first
 * fault's detail, and returns st: the core passes every slot status that may carry a fault
 * through it. acg__device_check_lost is ACG_OK on a device without a latched fault, else
 * ACG_ERR_DEVICE_LOST, "<fn>: <device> was lost to an earlier fault (<detail>); ...": the first
 * check of every call that would queue work, wait, allocate, create or capture on dev.
 * acg__device_is_lost is that test alone (a destroy that finds its waits failing because the
 * device is lost still releases everything and succeeds). Each is a compare or one load on
 * the launch path, inline; device.c has the slow paths (acg__device_latch writes the detail,
 * acg__device_lost_error sets the error). */
enum { ACG__FAULT_NONE, ACG__FAULT_LATCHING, ACG__FAULT_LOST }; /* acg_device.fault */
void acg__device_latch(acg_device *dev);
acg_status acg__device_lost_error(const acg_device *dev, const char *fn);

static inline acg_status acg__device_fault(acg_device *dev, acg_status st) {
    if (st == ACG_ERR_DEVICE_LOST) {
        acg__device_latch(dev);
    }
    return st;
}

static inline bool acg__device_is_lost(const acg_device *dev) {
    return atomic_load_explicit(&((acg_device *)dev)->fault, memory_order_acquire) ==
           ACG__FAULT_LOST;
}

static inline acg_status acg__device_check_lost(const acg_device *dev, const char *fn) {
    return acg__device_is_lost(dev) ? acg__device_lost_error(dev, fn) : ACG_OK;
}

/* What a destroy that released its object returns for the status of its waits: ACG_OK on a
 * lost device (a fault the waits met is latched here; it is the device's to report), else that
 * status. */
static inline acg_status acg__device_released(acg_device *dev, acg_status waited) {
    acg__device_fault(dev, waited);
    return acg__device_is_lost(dev) ? ACG_OK : waited;
}

/* The checks of a call that would reach the driver: a live handle (acg__check_device,
 * acg__check_stream, acg__check_buffer) on a device without a latched fault. A create's
 * (acg__check_create) are the device's, then out given. */
static inline acg_status acg__check_device_usable(const acg_device *dev, const char *fn) {
    acg_status st = acg__check_device(dev, fn);
    return st != ACG_OK ? st : acg__device_check_lost(dev, fn);
}

static inline acg_status acg__check_stream_usable(const acg_stream *s, const char *fn) {
    acg_status st = acg__check_stream(s, fn);
    return st != ACG_OK ? st : acg__device_check_lost(s->dev, fn);
}

static inline acg_status acg__check_buffer_usable(const acg_buffer *buf, const char *fn) {
    acg_status st = acg__check_buffer(buf, NULL, fn, "buffer");
    return st != ACG_OK ? st : acg__device_check_lost(buf->dev, fn);
}

static inline acg_status acg__check_create(const acg_device *dev, const void *out, const char *fn) {
    ACG__TRY(acg__check_device_usable(dev, fn));
    return acg__check_arg(out, "out", fn);
}

/* Test hook: the device's next graph replay faults (ACG_ERR_UNSUPPORTED where the backend has
 * no such hook). */
acg_status acg__device_inject_fault(acg_device *dev);

/* Test hook: driver capability queries made for an open device. */
uint64_t acg__device_capability_queries(const acg_device *dev);

/* Kernels (kernel.c, elementwise.c): the core's own definitions, the number of registered
 * ones (live objects for acg_set_allocator), and releasing a device's loaded kernels at close
 * (dev->lock not needed: nothing else uses the device). */
const acg__kernel_def *acg__core_kernels(size_t *count);
size_t acg__kernel_registered(void);
/* Kernel definitions (kernel_desc.c). A caller's desc read at its size into d and checked, as
 * acg_kernel_register refuses one (fn names the call); a checked d copied with everything it
 * points to into one allocation (acg__free), its legacy fields turned into entries of its list,
 * an entry naming no function running `function`; NULL when out of memory. An entry's bytes:
 * its size, or its text with the NUL. */
acg_status acg__kernel_desc_read(const acg_kernel_desc *desc, acg_kernel_desc *d, const char *fn);
acg__kernel_def *acg__kernel_desc_copy(const acg_kernel_desc *d, const char *function);
size_t acg__kernel_impl_bytes(const acg_kernel_impl *e);
void acg__device_kernels_free(acg_device *dev);
/* Checks a launch of kernel kdef (impl: its backend kernel on dev) against the definition, as
 * acg_kernel_launch documents, and resolves its buffers into node (a kernel node, its buffer
 * list held until the caller returns); fn names the call in messages. */
acg_status acg__kernel_prepare(const acg_device *dev, const acg__kernel_def *kdef,
                               acg__bk_kernel *impl, const acg_dims *dims, const acg_arg *args,
                               size_t n_args, acg__node *node, const char *fn);

/* The backends compiled in (registry.c). */
size_t acg__backend_count(void);
const acg_backend_i *acg__backend_find(const char *name);
/* Every backend's own checks of a definition (its kernel_check slot), as acg_kernel_register
 * refuses one; ACG_OK when each passes or has none. */
acg_status acg__backends_check_kernel(const acg_kernel_desc *d, const char *fn);
/* Probes vt once and gives its device count; ACG_ERR_UNAVAILABLE with the reason. */
acg_status acg__backend_devices(const acg_backend_i *vt, int *n, const char *fn);

#endif /* ACG_CORE_IMPL_H */
