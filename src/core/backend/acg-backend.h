/*
 * acg-backend.h — the interface between the core and one backend.
 *
 * A backend is a `const struct acg_backend_i acg__backend_<name>` (external: the registry finds
 * it by name, docs/backends.md "Adding a backend") of static functions. The core validates
 * every argument, tracks captures and lifetimes, and calls the backend with resolved memory:
 * a backend never sees a handle it has to check. Slots marked (optional) may be NULL; the core
 * then supplies the default that the comment names. The table is versioned and only appended to;
 * the core reads a slot added by version N only from a table whose version is at least N
 * (ACG__SLOT), so a table written against an older version keeps working.
 *
 * Threading. The core never calls two slots on one stream at once: a stream's slots (copies,
 * fills, launches, host functions, event records and waits, graph launches, stream_get_native)
 * run under the stream's lock, and while the stream captures natively, under the device's lock
 * too. Memory, kernel loading, graph destruction and capture_begin/join/abort run under the
 * device's lock; graph_update and graph_update_from under the device's lock and the graph
 * pool's replay lock, with no replay of that pool in flight (the source graph's exec may be
 * replaying: it is only read). graph_instantiate and capture_end run under the origin
 * stream's lock only, so they may overlap memory slots, kernel loading, other streams' work,
 * replays and other instantiations. Host waits (stream_synchronize, event_query,
 * event_synchronize), stream and event creation and destruction, device_open/close,
 * query_capability, memory_query, device_get_async_error and inject_fault take no core lock
 * and may run at the same time as anything on other objects; an event's waits may also
 * overlap a new record of the same event (a waiter then waits for the old point or the new
 * one), and stream_synchronize may overlap the stream's other slots.
 * A slot never calls acg's public functions, and a backend's own threads (a cpu worker) never
 * call into the core except through the allocator and the trace entry (acg__trace_on,
 * acg__trace_emit, acg__trace_now: a backend that can time its streams emits ACG_TRACE_STREAM
 * events on a timeline from acg__trace_new_stream, see include/acg/trace.h).
 *
 * Errors. A failing slot returns a status and sets the detail with acg__error, naming the
 * vendor call and its code; the core passes both on (it adds its own detail only where the
 * slot set none). A slot that cannot fail returns void.
 *
 * Types. Each kind of backend object the core holds has its own incomplete type (acg__bk_device,
 * acg__bk_stream, ...), declared here and defined nowhere, so the compiler refuses a stream where
 * a device is expected. A backend converts at its boundary, casting between these and its own
 * structs in small helpers; the core only stores and passes them. Pinned host memory stays
 * `void *`: it is host memory the user holds.
 */
#ifndef ACG_CORE_BACKEND_ACG_BACKEND_H
#define ACG_CORE_BACKEND_ACG_BACKEND_H

#include <acg/acg.h>

#define ACG_BACKEND_VERSION 8

/* A slot that version `ver` of the table added, or NULL in a table written against an older
 * version: the version field is what tells the core which slots a table has. */
#define ACG__SLOT(vt, slot, ver) ((vt)->version >= (ver) ? (vt)->slot : NULL)

/* The backend's objects as the core sees them: one incomplete type per kind, never defined. */
typedef struct acg__bk_device acg__bk_device;       /* from device_open */
typedef struct acg__bk_mem acg__bk_mem;             /* device memory from buffer_alloc */
typedef struct acg__bk_stream acg__bk_stream;       /* from stream_create */
typedef struct acg__bk_event acg__bk_event;         /* from event_create */
typedef struct acg__bk_kernel acg__bk_kernel;       /* from kernel_load */
typedef struct acg__bk_exec acg__bk_exec;           /* from graph_instantiate or capture_end */
typedef struct acg__bk_recording acg__bk_recording; /* from capture_begin */
typedef struct acg__bk_group acg__bk_group;         /* from group_create */

/* A kernel argument with its buffer resolved to backend memory. */
typedef struct acg__karg {
    acg_arg_type type;
    union {
        struct {
            acg__bk_mem *mem; /* root allocation from buffer_alloc */
            size_t offset;    /* bytes from the root's start */
        } buf;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
    } value;
} acg__karg;

/* A kernel definition (src/core/kernel.c): the registrant's acg_kernel_desc, copied whole with
 * its strings and binaries, in_place ordered (i < j), or one of the core's static definitions.
 * It lives while a device has it loaded, so a backend may keep pointers into it until
 * kernel_unload. d.impls is one list of every implementation for a backend that loads code:
 * the registrant's entries, then those its legacy fields (opencl, cuda, spirv) say, each entry
 * naming its function (the core's definitions carry such a list too). The cpu backend runs
 * cpu.fn; any other finds its code with acg__kernel_impl_find, never in the legacy fields, and
 * refuses a definition without any with ACG_ERR_UNSUPPORTED, naming the kernel and itself. */
typedef struct acg__kernel_def {
    const char *name; /* d.name, at hand for messages and descriptions */
    acg_kernel_desc d;
    uint32_t refs; /* devices that loaded it, and lookups loading it (under the registry lock) */
    bool core;     /* one of the core's kernels: static, never unregistered */
} acg__kernel_def;

/* The first entry of def's list (d.impls) whose format is `format` and whose backend is NULL or
 * `backend`; NULL when there is none. */
const acg_kernel_impl *acg__kernel_impl_find(const acg__kernel_def *def, const char *backend,
                                             const char *format);
/* The first definition, the core's then the registered ones, whose code for `backend` in
 * `format` (acg__kernel_impl_find) is the function named `function`, in the image of size bytes
 * when image is not NULL (two images may hold a function of one name); NULL when none is. It
 * stays valid while a device has it loaded. A backend whose test driver runs a definition's cpu
 * code in a kernel's place hands its driver this lookup (the cuda and level_zero backends). */
const acg_kernel_desc *acg__kernel_desc_find(const char *backend, const char *format,
                                             const void *image, size_t size, const char *function);
/* An argument type as acg names it ("buffer", "i32", ... "f32"; "?" for another value), and
 * the OpenCL C type a scalar of it is (int, uint, long, ulong, float; "?" for a buffer), for
 * the messages of a backend's parameter checks. */
const char *acg__arg_type_name(acg_arg_type t);
const char *acg__arg_cl_type(acg_arg_type t);
/* The bytes of a scalar argument's value: its member, at the start of the argument's union (4
 * or 8); 0 for a buffer or another value. */
size_t acg__arg_scalar_bytes(acg_arg_type t);

/* One node of a captured graph, as the core records it. Copies: h2d uses dst_* and host,
 * d2h src_* and host, d2d dst_* and src_*, fill dst_*, size and pattern; a loop dst_* (its
 * condition), loop_body and loop_max. */
typedef struct acg__node {
    acg_node_kind kind;
    uint32_t deps_begin; /* index into acg__graph_desc.deps */
    uint32_t n_deps;
    /* kernels */
    const acg__kernel_def *def;
    acg__bk_kernel *kernel; /* backend kernel from kernel_load */
    acg_dims dims;
    uint32_t n_args;
    acg__karg args[ACG_MAX_KERNEL_ARGS];
    /* copies and fills */
    acg__bk_mem *dst_mem;
    size_t dst_off;
    acg__bk_mem *src_mem;
    size_t src_off;
    size_t size;
    void *host;
    bool host_pinned; /* host lies in a pinned allocation of the device */
    uint32_t pattern;
    uint32_t pattern_size;
    /* collectives: an allreduce of size / 4 floats of dst_mem at dst_off, over this group */
    acg__bk_group *group;
    struct acg_device_group *group_handle; /* the core's, for the graph's reference */
    /* host functions; foreign work's declared name, whole (NULL for other nodes): in a
     * description its own copy, freed with it (acg__desc_free) */
    acg_host_fn host_fn;
    void *host_user;
    char *label;
    /* description: the handles behind the resolved memory (kernel buffers, or the accesses a
     * host function or foreign work declared) */
    uint32_t n_buffers;
    const acg_buffer *buffers[ACG_MAX_KERNEL_ARGS];
    /* ledger (for acg_graph_write_dot): the capture's stream that recorded the node (0: the
     * origin, then in the order streams joined), and, for a host function or foreign work, bit
     * i of reads / writes set when it declared that it reads / writes buffers[i] (a kernel's
     * definition says neither; a copy's direction follows from its kind) */
    uint32_t stream;
    uint32_t reads, writes;
    /* loops: the body is the loop_body nodes after this one; it runs at most loop_max times,
     * again while the uint32_t at dst_mem + dst_off is non-zero after a run */
    uint32_t loop_body, loop_max;
} acg__node;

_Static_assert(ACG_MAX_ACCESSES <= ACG_MAX_KERNEL_ARGS,
               "a node's buffer list holds a host function's or foreign work's accesses");
_Static_assert(ACG_MAX_KERNEL_ARGS <= 32, "a node's reads and writes are 32-bit masks");

/* A whole graph: nodes in submission order, so every dependency precedes its node and the array
 * order is a valid serial order. */
typedef struct acg__graph_desc {
    acg__node *nodes;
    uint32_t n_nodes;
    uint32_t *deps;
    uint32_t n_deps;
} acg__graph_desc;

/* Releases what a description owns (its nodes' labels, its arrays); for a backend that keeps a
 * description of its own (a copy it re-records from). */
void acg__desc_free(acg__graph_desc *desc);

struct acg_backend_i {
    int version;      /* ACG_BACKEND_VERSION this table was written against */
    const char *name; /* "cpu", "opencl", "cuda", "level_zero" */

    /* Loads the driver and counts devices, opening none. *reason says why when it cannot run. */
    acg_status (*probe)(int *n_devices, const char **reason);
    /* Capability of device `index` without opening it; one driver query. */
    acg_status (*describe)(int index, acg_capability *out);
    /* Opens device `index`; *dev is the backend's device. `options` is what followed '?' in
     * the device spec ("" when nothing did), as "key=value"; the backend refuses what it does
     * not know (ACG_ERR_INVALID_ARGUMENT, naming the option). */
    acg_status (*device_open)(int index, const char *options, acg__bk_device **dev);
    /* Closes a device opened by device_open; every object of it is gone. */
    void (*device_close)(acg__bk_device *dev);
    /* Capability of an open device; the core calls it once per device and caches the result. */
    acg_status (*query_capability)(acg__bk_device *dev, acg_capability *out);

    /* Allocates device memory; *mem is opaque to the core. */
    acg_status (*buffer_alloc)(acg__bk_device *dev, size_t size, acg__bk_mem **mem);
    /* Frees memory from buffer_alloc; the core synchronized the device before. */
    void (*buffer_free)(acg__bk_device *dev, acg__bk_mem *mem);
    /* (optional) Page-locked host memory, 64-byte aligned. NULL: pageable memory is used. */
    acg_status (*pinned_alloc)(acg__bk_device *dev, size_t size, void **ptr);
    /* (optional, with pinned_alloc) Frees memory from pinned_alloc. */
    void (*pinned_free)(acg__bk_device *dev, void *ptr);

    /* Creates an in-order stream. */
    acg_status (*stream_create)(acg__bk_device *dev, acg__bk_stream **stream);
    /* Destroys a stream after the core synchronized it. */
    void (*stream_destroy)(acg__bk_stream *stream);
    /* Blocks until the stream's queued work ran; returns a fault reported for it. */
    acg_status (*stream_synchronize)(acg__bk_stream *stream);
    /* ACG_OK when idle, ACG_NOT_READY when work is pending. */
    acg_status (*stream_query)(acg__bk_stream *stream);

    /* Creates an event that counts as complete until recorded. */
    acg_status (*event_create)(acg__bk_device *dev, acg__bk_event **event);
    /* Destroys an event; queued waits on it are unaffected. */
    void (*event_destroy)(acg__bk_event *event);
    /* Marks the stream's current end of queue. */
    acg_status (*event_record)(acg__bk_event *event, acg__bk_stream *stream);
    /* Makes later work on stream wait for the event's point. */
    acg_status (*stream_wait_event)(acg__bk_stream *stream, acg__bk_event *event);
    /* ACG_OK when the event's point completed, ACG_NOT_READY otherwise. */
    acg_status (*event_query)(acg__bk_event *event);
    /* Blocks until the event's point completed. */
    acg_status (*event_synchronize)(acg__bk_event *event);

    /* Host to device. With src_pinned false the backend must have read src before returning. */
    acg_status (*copy_h2d)(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                           const void *src, size_t size, bool src_pinned);
    /* Device to host. With dst_pinned false the backend must have written dst before
     * returning (the caller may read pageable memory at once); pinned: asynchronous. */
    acg_status (*copy_d2h)(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                           size_t size, bool dst_pinned);
    /* Device to device, non-overlapping. */
    acg_status (*copy_d2d)(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                           acg__bk_mem *src, size_t src_off, size_t size);
    /* Fills size bytes with a 1-, 2- or 4-byte pattern; offset and size are multiples of it. */
    acg_status (*fill)(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                       uint32_t pattern, uint32_t pattern_size);

    /* Builds the backend's implementation of a kernel definition, once per device and kernel;
     * ACG_ERR_UNSUPPORTED when def holds no code for this backend. */
    acg_status (*kernel_load)(acg__bk_device *dev, const acg__kernel_def *def,
                              acg__bk_kernel **kernel);
    /* (optional) Releases a kernel from kernel_load at device close. NULL: nothing to release. */
    void (*kernel_unload)(acg__bk_device *dev, acg__bk_kernel *kernel);
    /* Queues a launch; arguments match the definition's types and windows, checked by the
     * core. */
    acg_status (*kernel_launch)(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                const acg_dims *dims, const acg__karg *args, uint32_t n_args);

    /* (optional) Builds an executable graph from a captured description. NULL: no graphs. */
    acg_status (*graph_instantiate)(acg__bk_device *dev, const acg__graph_desc *desc,
                                    acg__bk_exec **exec);
    /* (optional, with graph_instantiate) Queues one replay of exec on stream. */
    acg_status (*graph_launch)(acg__bk_exec *exec, acg__bk_stream *stream);
    /* (optional) Rewrites exec's arguments from desc (same topology, checked by the core; no
     * replay pending). NULL: graph update unsupported. */
    acg_status (*graph_update)(acg__bk_exec *exec, const acg__graph_desc *desc);
    /* (optional, with graph_instantiate) Destroys exec; no replay of it is pending. */
    void (*graph_destroy)(acg__bk_exec *exec);

    /* Version 1 ends here; later fields are appended below. */

    /* Whether a discarded graph (acg_graph_discard) must outlive its discard until its pool's
     * next successful capture, because the driver may still reference what it recorded (as
     * Level Zero command lists can). false: discarded graphs are destroyed at once. */
    bool retain_discarded_graphs;

    /* Version 2: native capture, host functions, native objects. */

    /* (optional) Native capture, for drivers that record what is submitted to a capturing
     * stream (CUDA stream capture, Level Zero graph capture, the cpu backend's native mode).
     * When capture_begin is set, the core hands every piece of captured work (kernels, copies,
     * fills, host functions, event records and waits) to the normal slots as if eager, and the
     * backend records it instead of running it; the core keeps its description only as the
     * ledger that enforces the rules. NULL: the core's description is instantiated with
     * graph_instantiate. capture_begin puts `stream` in recording mode for a new recording
     * *rec; capture_join adds another stream of the device to it (a fork, before that stream's
     * first captured work); capture_end leaves recording mode on every stream of the
     * recording and instantiates what it recorded into an exec for graph_launch, graph_update
     * (from the ledger's description) or graph_update_from, and graph_destroy; capture_abort
     * leaves recording mode and drops what was recorded (an invalidated or abandoned
     * capture). */
    acg_status (*capture_begin)(acg__bk_stream *stream, acg__bk_recording **rec);
    acg_status (*capture_join)(acg__bk_recording *rec, acg__bk_stream *stream);
    acg_status (*capture_end)(acg__bk_recording *rec, acg__bk_exec **exec);
    void (*capture_abort)(acg__bk_recording *rec);

    /* (optional) Queues fn(user) in stream order: it runs after the work queued before it and
     * before the work queued after it. NULL: the core synchronizes the stream and calls fn
     * on the calling thread. A backend whose graphs run host functions says so with the
     * capability's graph_host_functions. */
    acg_status (*host_launch)(acg__bk_stream *stream, acg_host_fn fn, void *user);

    /* (optional) The driver's object behind a stream (a cl_command_queue, a CUstream), for work
     * the engine issues itself. NULL: the backend has none (kind ACG_NATIVE_NONE). */
    acg_status (*stream_get_native)(acg__bk_stream *stream, acg_native_handle *out);

    /* (optional) Polls, without waiting for any work, for a fault the driver has reported on the
     * device (work that faulted after its launch returned): ACG_OK when there is none, else
     * ACG_ERR_DEVICE_LOST with the error set, naming the driver's call and code (a backend may
     * keep answering so, as CUDA's sticky errors do, or answer once); another status when the
     * poll itself fails. The core latches the first fault it learns of, from this slot or from
     * any slot that returns ACG_ERR_DEVICE_LOST (stream_synchronize reports a fault of its
     * stream's work so), and fails the device's later calls with it. NULL: the backend learns
     * of no faults after launch. */
    acg_status (*device_get_async_error)(acg__bk_device *dev);
    /* (optional) Test hook: the device's next graph replay faults instead of running. */
    void (*inject_fault)(acg__bk_device *dev);

    /* (optional) Device memory free and in total as the driver sees it now (other processes'
     * use included). NULL: unknown; acg_device_get_memory_info says ACG_ERR_UNSUPPORTED. */
    acg_status (*memory_query)(acg__bk_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);
    /* (optional) Makes exec resident for stream ahead of its first replay, so the first
     * replay costs what the others do. NULL: nothing to do. */
    acg_status (*graph_upload)(acg__bk_exec *exec, acg__bk_stream *stream);

    /* Version 3: graphs' native objects, host memory registration. */

    /* (optional) The driver's executable graph behind exec (a CUgraphExec). NULL: none (kind
     * ACG_NATIVE_NONE). Called with no update of exec running. */
    acg_status (*graph_get_native)(acg__bk_exec *exec, acg_native_handle *out);
    /* (optional) Page-locks host memory the caller owns for the device, so copies treat it as
     * pinned memory; the capability says pinned_register. NULL: unsupported. */
    acg_status (*pinned_register)(acg__bk_device *dev, void *ptr, size_t size);
    /* (with pinned_register) Ends a registration; no queued copy uses the memory. */
    void (*pinned_unregister)(acg__bk_device *dev, void *ptr);

    /* Version 4: collectives. */

    /* (optional) Joins the device to a process group: a collective call on every rank, with
     * comm checked by the core (rank, n_ranks, broadcast set) and outliving the group. The
     * capability says collectives. NULL: unsupported. */
    acg_status (*group_create)(acg__bk_device *dev, const acg_comm *comm, acg__bk_group **out);
    /* (with group_create) Leaves the group; no queued work or live graph uses it. */
    void (*group_destroy)(acg__bk_group *group);
    /* (with group_create) Queues an in-place sum over every rank of count floats at mem + off,
     * added in rank order where the backend can (NCCL picks its own order, the same on every
     * rank). A failure found when it runs (a rank gone) is reported by the
     * stream's synchronization as ACG_ERR_COMM. A graph built from a description holds such a
     * node (ACG_NODE_COLLECTIVE) too. */
    acg_status (*allreduce)(acg__bk_stream *stream, acg__bk_group *group, acg__bk_mem *mem,
                            size_t off, size_t count);

    /* Version 5: update from the source graph's own recording. */

    /* (optional, with graph_update) As graph_update, with the source graph's exec `from` at
     * hand (this backend's, of the same device), so that a backend whose driver recorded the
     * capture (capture_begin) can update exec from what it recorded for `from`, foreign work
     * and collectives included, where desc cannot be rebuilt. same_memory: desc is from's
     * description as captured (from's graph scratch lies where exec's does), so every address
     * the driver recorded for `from` is right for exec; false: only desc has exec's scratch.
     * NULL: graph_update. */
    acg_status (*graph_update_from)(acg__bk_exec *exec, const acg__graph_desc *desc,
                                    acg__bk_exec *from, bool same_memory);

    /* Version 6: native memory and devices, per-node updates. */

    /* (optional) The driver's memory behind bytes [offset, offset + size) of mem: kind,
     * handle, address and offset of out as acg_buffer_get_native says (the core sets size and
     * bytes). NULL: the backend has none to give (ACG_NATIVE_NONE). */
    acg_status (*buffer_get_native)(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                    size_t size, acg_native_buffer *out);
    /* (optional) The driver's context, device and driver or platform (acg_device_get_native;
     * the core sets size). NULL: none (ACG_NATIVE_NONE). */
    acg_status (*device_get_native)(acg__bk_device *dev, acg_native_device *out);
    /* (optional) Rewrites kernel node `index` of exec to desc->nodes[index] (same kernel; its
     * arguments and grid checked by the core; desc is exec's whole description with that node
     * already rewritten; no replay of exec's pool in flight; under the device's lock and the
     * pool's replay lock). `old` is the node as it was. ACG_ERR_UNSUPPORTED, naming what, when
     * the backend cannot change what differs (the grid, say); on any failure exec is as it was.
     * The capability says graph_node_update (and graph_node_update_grid). NULL: the core calls
     * graph_update with desc, which rebuilds the whole graph. */
    acg_status (*graph_update_node)(acg__bk_exec *exec, const acg__graph_desc *desc, uint32_t index,
                                    const acg__node *old);

    /* Version 7: the backend's own checks of a kernel definition. */

    /* (optional) Checks what of a definition is this backend's alone (fields and entries in its
     * formats) as acg_kernel_register documents its refusals: ACG_ERR_INVALID_ARGUMENT with the
     * detail, fn naming the call. Called at registration for every backend of the build, before
     * any device exists, after the core's own checks; d is read at its full size (its impls
     * checked). NULL: nothing to check. */
    acg_status (*kernel_check)(const acg_kernel_desc *d, const char *fn);

    /* Version 8: loops inside graphs. */

    /* (optional, with capture_begin) Opens a loop on a stream in recording mode: what is
     * recorded on it until loop_end is the body, which a replay runs, then runs again while the
     * uint32_t at cond + off is non-zero after a run, max runs at most; loops nest up to
     * ACG_MAX_LOOP_DEPTH. The core lets only kernels, device copies, fills and nested loops
     * into a body, and no other stream of the recording records while a loop is open.
     * loop_end closes the stream's innermost loop. A backend that says graph_loops and builds
     * graphs from the description instead finds ACG_NODE_LOOP nodes in graph_instantiate's
     * description (acg__node: the body is the loop_body nodes after the loop's). */
    acg_status (*loop_begin)(acg__bk_stream *stream, acg__bk_mem *cond, size_t off, uint32_t max);
    acg_status (*loop_end)(acg__bk_stream *stream);
};

typedef struct acg_backend_i acg_backend_i;

#endif /* ACG_CORE_BACKEND_ACG_BACKEND_H */
