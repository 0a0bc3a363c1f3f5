/*
 * acg-impl.h — the bodies of the public handles and the core's internal helpers.
 *
 * Locking: a stream's `lock` serializes calls on that stream; a device's `lock` guards its object
 * lists, live captures, graph references and pools; a pool's `replay_lock` orders its replays.
 * Order: stream lock, then device lock, then a pool's replay lock, then the global handle and
 * pinned registries. Eager submission and replay take no device lock unless the stream
 * captures.
 */
#ifndef ACG_CORE_IMPL_H
#define ACG_CORE_IMPL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include <acg/acg.h>

#include "core/backend.h"

#define ACG__UNUSED(x) ((void)(x))

/* ---- status, log, allocator, env --------------------------------------------------------- */

/* Sets this thread's last-error detail (printf format) and returns status. */
acg_status acg__error(acg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* How many details this thread has set so far (acg__error, acg_set_last_error). */
uint64_t acg__error_serial(void);
/* Copies status's detail into buf (for messages that must outlive later errors). */
void acg__error_copy(char *buf, size_t size);

void acg__log(acg_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Every allocation of the library. acg__alloc returns NULL on failure (it sets no error). */
void *acg__alloc(size_t size);
void *acg__alloc_aligned(size_t size, size_t align);
void *acg__calloc(size_t n, size_t size);
void acg__free(void *p);
/* Grows *array (of elem-byte items) to hold at least `need`; false on failure (unchanged). */
bool acg__grow(void **array, uint32_t *cap, uint32_t need, size_t elem);

/* Value of a known ACG_* variable (NULL when unset). Naming an unknown variable is a bug. */
const char *acg__env_get(const char *name);
bool acg__env_flag(const char *name);
/* The one parser of every numeric variable and option: a decimal whole number in [min, max],
 * digits only (no sign, blank, prefix or trailing text), overflow refused. ACG_OK with *out set,
 * or ACG_ERR_INVALID_ARGUMENT with *out untouched and no error detail set (the caller names
 * what was parsed). */
acg_status acg__parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);
/* A known numeric ACG_* variable: fallback when unset or empty, else acg__parse_u64's number.
 * ACG_ERR_INVALID_ARGUMENT for anything else, the detail naming fn, the variable, the value
 * and the range ("fn: ACG_NUM_SLOTS=2junk is not a whole number in [1, 2]"). */
acg_status acg__env_u64(const char *fn, const char *name, uint64_t min, uint64_t max,
                        uint64_t fallback, uint64_t *out);
/* Warns once per process about ACG_* variables the library does not know. */
void acg__env_check_once(void);

/* Structs that begin with `size_t size`, of any caller's version (config.c). acg__config_read
 * copies the caller's config src into dst (dst_size bytes: this library's sizeof) over a copy
 * of defaults (its _INIT macro), so fields past an older caller's size take their defaults,
 * and sets dst's size to dst_size. ACG_ERR_INVALID_ARGUMENT, naming fn, what (the struct's
 * name), the size given and sizeof, for a size below min_size (the struct up to and including
 * its last field without a default) or above 4096, and for a larger size whose extra bytes are
 * not all zero. acg__output_write writes src (src_size bytes) into the caller's output struct
 * dst, up to dst's size, which it then sets to the bytes written; ACG_ERR_INVALID_ARGUMENT,
 * with dst untouched, when dst's size does not reach past the size field (it was never set).
 * acg__output_check is that check alone, for a call that must refuse before it does its work. */
acg_status acg__config_read(void *dst, size_t dst_size, const void *defaults, const void *src,
                            size_t min_size, const char *what, const char *fn);
acg_status acg__output_check(const void *dst, size_t src_size, const char *what, const char *fn);
acg_status acg__output_write(void *dst, const void *src, size_t src_size, const char *what,
                             const char *fn);

/* ---- handles ----------------------------------------------------------------------------- */

/* The type a handle was registered with. The core's own types are listed here; each layer
 * above it defines its types in its own private header, in a range of its own from
 * ACG__HANDLE_LAYER_FIRST up (the engine 64-79, the model 80-95), so its objects are checked
 * the same way while the core names none of them. */
typedef uint32_t acg__handle_type;
enum {
    ACG__HANDLE_DEVICE = 1,
    ACG__HANDLE_BUFFER,
    ACG__HANDLE_STREAM,
    ACG__HANDLE_EVENT,
    ACG__HANDLE_KERNEL,
    ACG__HANDLE_GRAPH,
    ACG__HANDLE_POOL,
    ACG__HANDLE_LAYER_FIRST = 64,
};

/* How many calls are using an object right now (see "Lifetimes" in docs/design.md). */
typedef struct acg__life {
    _Atomic uint32_t users;
} acg__life;

/* The registry of live handles, so a destroyed or foreign pointer is rejected, not followed.
 * acg__handle_add registers p with its life (which it initializes); acg__handle_remove forgets
 * p (the object may then be freed). */
acg_status acg__handle_add(const void *p, acg__handle_type type, acg__life *life);
void acg__handle_remove(const void *p);

/* A public function's call scope: every handle validated inside it with acg__handle_use is
 * held until the function returns, so a concurrent destroy waits for the call instead of
 * freeing what it uses. Declare it first in each public function that validates handles. */
typedef struct acg__scope {
    uint32_t base, top;
} acg__scope;
acg__scope acg__scope_enter(void);
void acg__scope_exit(acg__scope *sc);
#define ACG__CALL_SCOPE                                                                            \
    acg__scope acg__call_scope __attribute__((cleanup(acg__scope_exit), unused)) =                 \
        acg__scope_enter()

/* Whether p is a live, unretired handle of this type; when it is, the current call scope holds
 * it. */
bool acg__handle_use(const void *p, acg__handle_type type);
/* The same check without holding (for test hooks that read a counter). */
bool acg__handle_valid(const void *p, acg__handle_type type);
/* A destroy's first step: makes p unusable by new calls and waits until no other thread's
 * call holds it. ACG_ERR_INVALID_HANDLE when p is not live (or another destroy has it). When
 * strict, ACG_ERR_IN_USE if a call enclosing this one on this thread holds p (a destroy from
 * inside a callback of a call using the object); not strict is for an owner freeing what it
 * owns, whose own enclosing calls hold it only to check it. Then either acg__handle_remove (and
 * free) or acg__handle_restore (the destroy was refused). */
acg_status acg__handle_retire(const void *p, acg__handle_type type, bool strict);
void acg__handle_restore(const void *p);
/* Waits again until no other thread's call holds p (retired), for holds that
 * acg__hold_device took after the retire's wait. */
void acg__handle_drain(const void *p);
/* A destroy of an object of dev holds dev until it returns, so the device cannot close while
 * the destroy still uses it after its object left the device's lists. It holds dev even while
 * an acg_device_close is retiring it: that close then finds the object still counted and is
 * refused, or (once the counts reach zero) drains this hold with acg__handle_drain. Call it
 * before the object leaves the device's counts. */
void acg__hold_device(acg_device *dev);
/* acg__handle_retire with the error set: "<fn>: <what> <p> is not a live <what>" or the
 * enclosing-call refusal. */
acg_status acg__retire(const void *p, acg__handle_type type, const char *fn, const char *what);
/* Live handles, pinned allocations of all devices and registered kernels: what holds memory
 * from the allocator hook (for acg_set_allocator). */
size_t acg__live_objects(void);

/* ---- pinned host memory registry --------------------------------------------------------- */

typedef struct acg__pinned {
    void *base;
    size_t size;
    acg_device *dev;
    bool pinned;         /* false: a pageable fallback */
    uint32_t graph_refs; /* live graphs copying from or to it (under the registry lock) */
} acg__pinned;

acg_status acg__pinned_add(const acg__pinned *entry);
/* Removes the entry at base into *out: ACG_ERR_INVALID_HANDLE when unknown, ACG_ERR_IN_USE
 * while graphs reference it. */
acg_status acg__pinned_remove(void *base, acg__pinned *out);
/* Finds the allocation containing [p, p+size); copies it into *out. */
bool acg__pinned_lookup(const void *p, size_t size, acg__pinned *out);
/* Adjusts graph_refs of the allocation at base by delta. */
void acg__pinned_ref(void *base, int delta);

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
    void *impl;
};

struct acg_device {
    acg__life life; /* calls using it (handle.c) */
    const acg_backend_i *vt;
    void *impl;
    int index;
    char spec[64];
    char name[88]; /* spec and which open it was: tells two handles of one device apart */
    acg_capability cap;
    uint64_t capability_queries; /* driver capability queries made for this device */
    pthread_mutex_t lock;
    uint32_t n_buffers, n_pinned, n_streams, n_events, n_graphs, n_pools;
    acg_stream *streams;    /* live streams (for device synchronize) */
    acg_graph *graphs;      /* live graphs (to name one that holds a resource) */
    acg__capture *captures; /* live captures */
    acg_kernel **kernels;   /* (n_kernels) loaded kernels, each at its first lookup */
    uint32_t n_kernels, cap_kernels;
    uint64_t next_graph_id;
    acg_memory_stats memory; /* under lock */
    bool retain_discarded;   /* from the backend; a test hook may set it */
    _Atomic uint64_t free_override; /* test hook: free memory to report (0: ask the driver) */
};

struct acg_buffer {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    void *mem;     /* root allocation (backend memory) */
    size_t offset; /* of this buffer within the root */
    size_t size;
    acg_buffer *parent;  /* for views */
    uint32_t n_views;    /* live views of this buffer (under dev->lock) */
    uint32_t graph_refs; /* live graphs referencing it (under dev->lock) */
    bool scratch;        /* graph scratch: released with its graph */
    bool stream_owned;   /* from acg_stream_alloc outside a capture: acg_stream_free */
    uint64_t owner_id;   /* graph id owning scratch */
    uint64_t capture_id; /* the capture that carved scratch: the only place it may be used */
    const void *owner;   /* the object that allocated it for itself, or NULL (the user) */
    const char *owner_what; /* what the owner is ("KV cache") */
};

struct acg_stream {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    void *impl;
    pthread_mutex_t lock;
    acg__capture *_Atomic capture; /* set under this stream's and dev's lock; cleared under dev */
    acg__ids frontier;             /* capture nodes later work depends on */
    struct acg__deferred {         /* memory freed in stream order, awaiting its event */
        void *mem;
        size_t size;
        void *event; /* backend event recorded at the free */
    } * deferred;    /* (under dev->lock) */
    uint32_t n_deferred, cap_deferred;
    acg_stream *next; /* in dev->streams */
};

struct acg_event {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    void *impl;
    acg__capture *capture; /* recorded in this capture (NULL: a real record or none) */
    uint64_t capture_id;
    acg__ids frontier;
};

struct acg_graph_pool {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    struct acg__chunk {
        void *mem; /* backend memory, never moved */
        size_t size;
    } * chunks;
    uint32_t n_chunks, cap_chunks;
    size_t bytes;
    uint32_t n_graphs; /* live graphs captured into it */
    bool capturing;
    bool is_private;
    acg_graph **parked; /* discarded graphs kept until the next successful capture */
    uint32_t n_parked, cap_parked;
    pthread_mutex_t replay_lock; /* orders replays; guards last_* (after dev->lock if both) */
    void *last_event;            /* backend event after the pool's latest replay */
    const acg_stream *last_stream;
};

struct acg__capture {
    acg_device *dev;
    uint64_t id;
    void *rec; /* the backend's recording (native capture), until it ends or is aborted */
    acg_stream *origin;
    acg_graph_pool *pool;
    acg_capture_state state;
    acg_status why_status;
    char why[384];
    acg__graph_desc desc;
    uint32_t cap_nodes, cap_deps;
    acg_stream **streams; /* participants, origin first */
    uint32_t n_streams, cap_streams;
    acg_buffer **scratch;
    uint32_t n_scratch, cap_scratch;
    uint32_t chunk, chunk_off; /* pool cursor */
    acg__capture *next;        /* in dev->captures */
};

struct acg_graph {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    uint64_t id;
    acg_graph_pool *pool;
    void *exec;
    acg__graph_desc desc;
    acg_buffer **scratch;
    uint32_t n_scratch;
    acg_graph *next; /* in dev->graphs */
};

/* ---- shared helpers ---------------------------------------------------------------------- */

/* Handle checks: ACG_ERR_INVALID_HANDLE (with the error set) unless p is live. */
acg_status acg__check_device(const acg_device *dev, const char *fn);
acg_status acg__check_stream(const acg_stream *s, const char *fn);
acg_status acg__check_buffer(const acg_buffer *buf, const acg_device *dev, const char *fn,
                             const char *what);
acg_status acg__check_range(const acg_buffer *buf, size_t offset, size_t size, const char *fn,
                            const char *what);

/* What acg_buffer_free(buf) would refuse, without doing anything (for objects that free
 * several buffers and must not stop half way): ACG_OK when it would succeed, counting `views`
 * of buf as freed first; ACG_ERR_IN_USE also while a capture is active on the device, which the
 * free would invalidate. */
acg_status acg__buffer_check_free(const acg_buffer *buf, uint32_t views, const void *owner,
                                  const char *fn);
/* Buffers that an object (a KV cache, a plan, a runner, a model) allocated for itself: the
 * owner marks them, acg_buffer_free refuses them (ACG_ERR_IN_USE naming the owner), and the
 * owner frees them with acg__buffer_free_owned. */
void acg__buffer_set_owner(acg_buffer *buf, const void *owner, const char *what);
acg_status acg__buffer_free_owned(acg_buffer *buf, const void *owner, const char *fn);
/* Whether a capture is active on the device (ACG_ERR_IN_USE with the error set, else OK). */
acg_status acg__device_check_not_capturing(acg_device *dev, const char *fn);

/* A new root buffer of size bytes (dev->lock held; no capture check). */
acg_status acg__buffer_new(acg_device *dev, size_t size, const char *fn, acg_buffer **out);
/* Releases the stream's deferred frees whose work completed, or all of them (dev->lock). */
void acg__stream_reclaim(acg_stream *s, bool all);

/* Device memory through the backend, accounted (dev->lock held). */
acg_status acg__device_mem_alloc(acg_device *dev, size_t size, void **mem);
void acg__device_mem_free(acg_device *dev, void *mem, size_t size);

/* Synchronizes every stream of the device (dev->lock held). */
acg_status acg__device_sync_locked(acg_device *dev);

/* A device-wide operation `op` is about to run (dev->lock held): when a capture on the device
 * is active it is invalidated and ACG_ERR_CAPTURE_INVALIDATED returned, else ACG_OK. */
acg_status acg__invalidate_device_captures(acg_device *dev, const char *op);
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

/* Locks stream; returns its live capture with dev->lock held too, or NULL (only the stream
 * lock held). */
acg__capture *acg__stream_enter(acg_stream *s);
void acg__stream_leave(acg_stream *s, acg__capture *c);

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
acg_graph_pool *acg__pool_new(acg_device *dev, bool is_private);
void acg__pool_free(acg_graph_pool *pool);
acg_status acg__pool_carve(acg__capture *c, size_t size, acg_buffer **out);

/* Instantiates the capture's graph, taking its description and scratch (dev->lock held). */
acg_status acg__graph_create(acg__capture *c, acg_graph **out);

/* Drops the backend's native recording of the capture, if any (dev->lock held). */
void acg__capture_abort_native(acg__capture *c);
/* Frees a capture and detaches its streams (dev->lock held). */
void acg__capture_free(acg__capture *c);

/* Name of the live graph that references buffer or pinned memory (dev->lock held). */
uint64_t acg__graph_referencing(acg_device *dev, const acg_buffer *buf, const void *host,
                                size_t host_size);

/* Releases what a graph description references (refs) and its memory. */
void acg__desc_refs(acg_device *dev, const acg__graph_desc *desc, int delta);
void acg__desc_free(acg__graph_desc *desc);

/* Destroys the pool's parked graphs (dev->lock held). */
void acg__pool_release_parked(acg_graph_pool *pool);
/* Test hooks: keep discarded graphs as a backend that needs it would; graphs parked in a pool. */
void acg__device_set_retain_discarded(acg_device *dev, bool retain);
uint32_t acg__pool_parked_count(const acg_graph_pool *pool);

/* Test hook: acg_device_get_memory_info reports `bytes` free (0: what the driver says). */
void acg__device_set_free_memory(acg_device *dev, uint64_t bytes);

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
void acg__device_kernels_free(acg_device *dev);

/* The backends compiled in (registry.c). */
size_t acg__backend_count(void);
const acg_backend_i *acg__backend_find(const char *name);
/* Probes vt once and gives its device count; ACG_ERR_UNAVAILABLE with the reason. */
acg_status acg__backend_devices(const acg_backend_i *vt, int *n, const char *fn);

#endif /* ACG_CORE_IMPL_H */
