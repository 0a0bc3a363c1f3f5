/*
 * acg.h — the public device API of acg ("accelerator captured graphs").
 *
 * Devices, their cached capability, device buffers, pinned host memory, streams, events,
 * asynchronous copies, registered kernels, and graphs captured from streams and replayed with
 * one call. The same API serves every backend this tree has: cpu (records and replays on the
 * host), opencl (command buffers), cuda (stream capture) and level_zero (command lists and the
 * driver's graph capture); which a build holds, and which can run here, acg_backend_get_info
 * says. The driver objects behind acg's (acg_stream_get_native, acg_buffer_get_native,
 * acg_device_get_native, acg_graph_get_native) let an engine's own work join acg's.
 *
 * Conventions for every function below:
 * - Functions return an acg_status. ACG_OK is zero; every error is negative. On an error the
 *   out-parameters are left untouched and acg_last_error() holds a sentence naming the call
 *   and the cause (for a vendor failure: the vendor call and its code).
 * - Out-parameters come last. destroy/free/close of NULL is a no-op that returns ACG_OK.
 * - Structs that begin with `size_t size` can grow: fields are only ever appended. Set size to
 *   sizeof(the struct); the _INIT macros do. A struct the caller passes in (a config) may come
 *   from older headers, and be shorter: the fields past its size take the defaults of its
 *   _INIT macro. Each config says the least size it takes (through its last field that has no
 *   default); a smaller size, or one above 4096, is ACG_ERR_INVALID_ARGUMENT. It may come from
 *   newer headers, and be longer: accepted when every byte past this library's sizeof is zero
 *   (the newer fields left at their defaults), else ACG_ERR_INVALID_ARGUMENT naming the struct,
 *   the size given and sizeof. A struct the library fills (an output) is written up to its
 *   size and no further (an older caller gets the fields it knows); on return its size holds
 *   the bytes written, which is less than the caller's when the caller's headers are newer. An
 *   output whose size does not reach past the size field (0: never set) is
 *   ACG_ERR_INVALID_ARGUMENT, with nothing written. The _INIT macros are positional, so C and
 *   C++ both take them.
 * - Handles are checked: a NULL, destroyed or foreign handle gives ACG_ERR_INVALID_HANDLE,
 *   an object of another device ACG_ERR_WRONG_DEVICE; misuse never crashes.
 * - "Asynchronous" means the call returns once the work is queued on the stream; the work runs
 *   later in stream order. Host memory read by queued work must stay valid until it ran.
 * - Thread safety: every function may be called from any thread. Calls on one stream are
 *   serialized by the library; work on different streams runs concurrently.
 * - Lifetimes: a call holds every handle it was given until it returns. A destroy (close, free)
 *   racing other threads' calls on the same object first makes the handle unusable, so calls
 *   that start after it get ACG_ERR_INVALID_HANDLE, then waits for the calls already running to
 *   return, then destroys; it never frees what a running call uses. Each destroy below says
 *   what it checks before that point: a destroy refused with ACG_ERR_IN_USE leaves the object
 *   whole (a call racing such a refused destroy may, in that short window, be refused with
 *   ACG_ERR_INVALID_HANDLE). Two destroys of one object: one succeeds, the other gets
 *   ACG_ERR_INVALID_HANDLE. A destroy called from code the library calls back (a runner's
 *   recipe; a log callback calls no acg function) on an object the calling acg function uses
 *   is ACG_ERR_IN_USE: it cannot wait for its own caller.
 */
#ifndef ACG_ACG_H
#define ACG_ACG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions the shared library exports; everything else in it stays hidden. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define ACG_API __attribute__((visibility("default")))
#else
#define ACG_API
#endif

#define ACG_VERSION_MAJOR 0
#define ACG_VERSION_MINOR 1
#define ACG_VERSION_PATCH 0

/* ---------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------- */

/* X(name, value, description). One list makes the enum and the strings, so they never drift. */
#define ACG_STATUS_MAP(X)                                                                          \
    X(OK, 0, "success")                                                                            \
    X(NOT_READY, 1, "work is still pending")                                                       \
    X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                                \
    X(ERR_INVALID_HANDLE, -2, "NULL, destroyed or unknown handle")                                 \
    X(ERR_WRONG_DEVICE, -3, "object belongs to another device")                                    \
    X(ERR_OUT_OF_MEMORY, -4, "out of memory")                                                      \
    X(ERR_OUT_OF_RANGE, -5, "offset or size outside the object")                                   \
    X(ERR_NOT_FOUND, -6, "no such backend, device or kernel")                                      \
    X(ERR_UNAVAILABLE, -7, "backend or device unavailable on this machine")                        \
    X(ERR_UNSUPPORTED, -8, "not supported by this device")                                         \
    X(ERR_IN_USE, -9, "object is still referenced")                                                \
    X(ERR_CAPTURE_INVALIDATED, -10, "capture invalidated by an illegal operation")                 \
    X(ERR_CAPTURE_UNJOINED, -11, "a stream forked into the capture did not rejoin it")             \
    X(ERR_NOT_CAPTURING, -12, "stream is not capturing")                                           \
    X(ERR_TOPOLOGY_MISMATCH, -13, "graphs differ in topology")                                     \
    X(ERR_DEVICE, -14, "device or driver error")                                                   \
    X(ERR_INTERNAL, -15, "internal error")                                                         \
    X(ERR_EXHAUSTED, -16, "a fixed-capacity resource is exhausted")                                \
    X(ERR_DEVICE_LOST, -17, "the device faulted and is lost until opened again")                   \
    X(ERR_COMM, -18, "a rank of the process group failed, left or disagreed")                      \
    X(ERR_IO, -19, "reading or writing a file failed")

typedef enum acg_status {
#define ACG_STATUS_ENUM_(name, value, text) ACG_##name = value,
    ACG_STATUS_MAP(ACG_STATUS_ENUM_)
#undef ACG_STATUS_ENUM_
} acg_status;

/* The fixed description of a status ("out of memory"); "unknown status" for other values. */
ACG_API const char *acg_status_string(acg_status status);

/* The symbolic name of a status ("ACG_ERR_OUT_OF_MEMORY"); "ACG_UNKNOWN" for other values. */
ACG_API const char *acg_status_name(acg_status status);

/* Detail of the most recent failed call on this thread: which call, why, and for vendor
 * failures the vendor call and its code. "" before any failure. The string belongs to the
 * library and stays valid until the next failing call on this thread. */
ACG_API const char *acg_last_error(void);

/* Sets this thread's acg_last_error() detail (printf format) and returns status, so code that
 * the library calls back (a runner's recipe, say) can say why it failed. A caller that runs a
 * callback reports the callback's detail when it set one, and names the callback otherwise. */
ACG_API acg_status acg_set_last_error(acg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------------------------------------
 * Logging and the allocator hook
 * ------------------------------------------------------------------------------------------- */

typedef enum acg_log_level {
    ACG_LOG_ERROR = 0,
    ACG_LOG_WARN = 1,
    ACG_LOG_INFO = 2,
    ACG_LOG_DEBUG = 3,
} acg_log_level;

/* Receives every message at or below the threshold; message has no trailing newline. */
typedef void (*acg_log_fn)(acg_log_level level, const char *message, void *user);

/* Routes log messages to fn (NULL restores the default: stderr). Thread-safe. Calls of the
 * callback are serialized, and this function returns only after every call of the previous
 * callback has returned, so its `user` context may be freed right after a reset. Called from
 * inside the callback it does not wait (that call is this thread's own). The callback may run
 * while the library holds a device's lock: it must not call acg functions other than this one
 * (messages the library would log from inside the callback are dropped). */
ACG_API void acg_set_log_callback(acg_log_fn fn, void *user);

/* Sets the threshold. The default comes from ACG_LOG=error|warn|info|debug, else warn. */
ACG_API void acg_set_log_level(acg_log_level level);
ACG_API acg_log_level acg_get_log_level(void);

/* One allocator for every byte the library allocates, host structures and the cpu backend's
 * device memory alike. With ptr == NULL: return size bytes aligned to align (a power of two),
 * or NULL on failure. With size == 0: free ptr. The library calls it from its own threads too
 * (a cpu stream's worker frees staging memory), so it must be thread-safe. */
typedef void *(*acg_alloc_fn)(void *user, void *ptr, size_t size, size_t align);

/* Installs fn (NULL restores the default). Call only while no acg object exists:
 * ACG_ERR_IN_USE otherwise. */
ACG_API acg_status acg_set_allocator(acg_alloc_fn fn, void *user);

/* ---------------------------------------------------------------------------------------------
 * Backends and devices
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_device acg_device;
typedef struct acg_buffer acg_buffer;
typedef struct acg_stream acg_stream;
typedef struct acg_event acg_event;
typedef struct acg_kernel acg_kernel;
typedef struct acg_graph acg_graph;
typedef struct acg_graph_pool acg_graph_pool;

/* What this build contains, and whether it can run here. */
typedef struct acg_backend_info {
    size_t size;        /* sizeof(acg_backend_info) (the caller sets it) */
    const char *name;   /* "cpu", "opencl", "cuda", "level_zero" */
    bool available;     /* its driver loaded and it has at least one device */
    int device_count;   /* 0 when unavailable */
    const char *reason; /* why unavailable ("" when available); owned by the library */
} acg_backend_info;

#define ACG_BACKEND_INFO_INIT                                                                      \
    { sizeof(acg_backend_info), NULL, false, 0, NULL }

/* Number of backends compiled into this build. Initializes nothing. */
ACG_API size_t acg_backend_count(void);

/* Describes backend `index` (0 .. acg_backend_count()-1). The first call per backend loads its
 * driver to count devices (no device is opened, no context created); later calls read the
 * result. ACG_ERR_OUT_OF_RANGE for a bad index, ACG_ERR_INVALID_ARGUMENT for a NULL out or an
 * out->size that was not set. */
ACG_API acg_status acg_backend_get_info(size_t index, acg_backend_info *out);

/* What a device can do, queried from the driver once when the device opens. */
typedef struct acg_capability {
    size_t size;               /* sizeof(acg_capability); acg_device_describe's caller sets it */
    const char *backend;       /* backend name */
    char name[128];            /* device name from the driver */
    bool available;            /* usable for work */
    bool pinned_memory;        /* acg_pinned_alloc gives page-locked memory */
    bool graphs;               /* capture and replay are supported */
    bool graph_update;         /* acg_graph_update is supported */
    bool multi_stream_capture; /* streams may fork into and join a capture */
    uint64_t memory_bytes;     /* device memory size */
    char detail[256];          /* the backend's own words: platform, versions, and why graphs
                                  and update are or are not available */
    /* Added with native capture (fields are appended; zero means what it meant before). */
    bool native_capture;       /* the driver records captured work itself (it can then also
                                  capture work acg did not launch, see acg_stream_get_native);
                                  else graphs are built from acg's description of the capture */
    bool graph_host_functions; /* acg_stream_launch_host can be captured */
    /* Added with host memory registration. */
    bool pinned_register; /* acg_pinned_register can page-lock host memory the caller owns */
    /* Added with process groups. */
    bool collectives; /* acg_device_group_create and acg_allreduce work (and are captured) */
    /* Added with the choice of the default device. */
    bool host_cpu; /* the device is the host's own CPU: the cpu backend, or an OpenCL or Level
                      Zero driver's CPU device (PoCL); acg_device_open(NULL) passes over it for
                      an accelerator */
    /* Added with per-node updates and native memory. */
    bool graph_node_update;      /* acg_graph_update_kernel_node changes a kernel node's arguments
                                    in an instantiated graph (see it for what each backend uses) */
    bool graph_node_update_grid; /* ... and its grid too */
    bool graph_pinned_replay;    /* a captured copy from (to) pinned memory reads (writes) that
                                    memory at every replay, so a graph's input may be rewritten
                                    in pinned memory between replays (acg_copy_h2d); false: the
                                    graph copies what the memory held at capture */
    /* Added with the cpu backend's batch-1 speed. */
    uint32_t host_threads; /* the host threads a kernel split into parts runs on: the cpu
                              backend's threads=N (its stream worker and N - 1 pool threads);
                              0 for a device that does not run kernels on host threads */
    /* Added with loops inside graphs. */
    bool graph_loops; /* a capture may hold loops (acg_stream_loop_begin): a body replayed while
                         a device-side condition says so, with no host round trip; false: a
                         loop call in a capture invalidates it (eager loops work everywhere) */
} acg_capability;

/* Describes device `index` of backend `backend` without opening it (name and capability as the
 * driver reports them). out is an output struct: set out->size to sizeof(acg_capability) first
 * (there is no _INIT macro: the struct holds arrays). ACG_ERR_NOT_FOUND for an unknown backend
 * or index, ACG_ERR_UNAVAILABLE when the backend cannot run here, ACG_ERR_INVALID_ARGUMENT for
 * a NULL argument or an out->size that was not set. */
ACG_API acg_status acg_device_describe(const char *backend, int index, acg_capability *out);

/* The spec acg_device_open(NULL) opens, into spec (at most size bytes with the NUL): $ACG_DEVICE
 * when it is set, else the first device, in the build's order of backends, that is an
 * accelerator (not host_cpu) with graphs, else an accelerator without, else the cpu backend's
 * (the oracle, and faster on the host than a driver's CPU device), else any device of the
 * host's CPU. Describes the backends (loads their drivers) but opens nothing.
 * ACG_ERR_INVALID_ARGUMENT for a NULL spec, or a size the spec does not fit (the message gives
 * its length); ACG_ERR_UNAVAILABLE when no backend has a usable device. */
ACG_API acg_status acg_device_get_default(char *spec, size_t size);

/* Opens a device. spec is "backend", "backend:N" or "backend:N?key=value[&key=value...]"
 * ("cpu", "opencl:0", "cuda:0", "level_zero:0", "cpu:0?capture=native&threads=4"); NULL means
 * the default device (acg_device_get_default: $ACG_DEVICE, else an accelerator with graphs
 * first, the cpu backend when there is none). Options are the backend's: the cpu backend takes
 * capture=native (its workers record captured work as a driver does, native_capture in the
 * capability) or capture=description (the default), and threads=N, the threads a kernel that can be
 * split runs on (acg_kernel_desc's cpu_parts), 1..256: the stream's worker and N - 1 threads of the
 * device's pool, started here (default $ACG_CPU_THREADS, else one per online core; the
 * capability's name says how many); a backend refuses an option it does not know. Queries the
 * capability once and caches it. ACG_ERR_INVALID_ARGUMENT for a malformed spec, an option the
 * backend refuses, or a thread count (option or variable) that is not a whole number in
 * 1..256, the message naming it and its value; ACG_ERR_NOT_FOUND for an unknown backend or
 * device index, ACG_ERR_UNAVAILABLE when the backend cannot run here, ACG_ERR_OUT_OF_MEMORY,
 * ACG_ERR_DEVICE for a driver failure (the cpu backend: a thread it could not start). */
ACG_API acg_status acg_device_open(const char *spec, acg_device **out);

/* Device faults. A device that faults (a kernel or replay that failed after its launch
 * returned, or a driver that reports the device lost: CUDA's sticky context errors such as
 * CUDA_ERROR_LAUNCH_FAILED or CUDA_ERROR_ILLEGAL_ADDRESS, Level Zero's
 * ZE_RESULT_ERROR_DEVICE_LOST, an OpenCL command's negative execution status or
 * CL_OUT_OF_RESOURCES from its queue, the cpu backend's injected test fault) is lost for good:
 * the first call that learns of it returns ACG_ERR_DEVICE_LOST, and the device latches that
 * first fault. From then on every call on the device that would queue work, wait for it,
 * allocate, create an object, capture, launch or update a graph, or hand out a native object
 * fails fast with ACG_ERR_DEVICE_LOST, its detail naming the first fault. What still works:
 * destroys and frees of the device's objects (they release what they hold and return ACG_OK,
 * whatever their waits find), acg_device_close, and getters of what the library itself keeps
 * (capabilities, sizes, statistics, capture states, graph nodes). The recovery is to destroy
 * every object of the device, close it, and open the device again: the new handle starts
 * without the fault (the driver may refuse to open it while the hardware is still lost). Other
 * devices are not affected.
 *
 * The latched fault: ACG_OK while the device has none (asking the driver, without waiting for
 * any work, whether it reported one since), else ACG_ERR_DEVICE_LOST naming it, every time. */
ACG_API acg_status acg_device_get_async_error(acg_device *dev);

/* Device memory free and in total as the driver sees it now, including other processes' use
 * (acg_device_get_memory_stats counts only acg's own allocations). ACG_ERR_UNSUPPORTED when the
 * backend cannot tell; ACG_ERR_INVALID_ARGUMENT for NULL outputs. */
ACG_API acg_status acg_device_get_memory_info(acg_device *dev, uint64_t *free_bytes,
                                              uint64_t *total_bytes);

/* Closes a device. ACG_ERR_IN_USE while any buffer, pinned allocation, stream, event, graph or
 * graph pool of it lives (the message counts them). Waits for other threads' calls that hold
 * the device (a stream or buffer being created, a destroy of one of its objects) to return;
 * a creation racing the close either finishes first (and the close is refused) or is refused
 * with ACG_ERR_INVALID_HANDLE. */
ACG_API acg_status acg_device_close(acg_device *dev);

/* The capability cached at open; NULL for an invalid handle. Never queries the driver. The
 * struct belongs to the device, so it is always this library's whole struct: a caller whose
 * headers are newer reads only up to its size field. */
ACG_API const acg_capability *acg_device_get_capability(const acg_device *dev);

/* "backend:N" of the device; NULL for an invalid handle. */
ACG_API const char *acg_device_get_spec(const acg_device *dev);

/* Device memory as the library accounts it: buffers and graph pool chunks. */
typedef struct acg_memory_stats {
    size_t size;           /* sizeof(acg_memory_stats) (the caller sets it) */
    uint64_t allocations;  /* device allocations made since the device opened */
    uint64_t bytes_in_use; /* bytes allocated now */
    uint64_t peak_bytes;   /* most bytes_in_use since open or the last reset */
} acg_memory_stats;

#define ACG_MEMORY_STATS_INIT                                                                      \
    { sizeof(acg_memory_stats), 0, 0, 0 }

/* Reads the device's memory accounting. Thread-safe. ACG_ERR_INVALID_HANDLE;
 * ACG_ERR_INVALID_ARGUMENT for a NULL out or an out->size that was not set. */
ACG_API acg_status acg_device_get_memory_stats(const acg_device *dev, acg_memory_stats *out);

/* Restarts peak_bytes from the bytes in use now (to measure one step's peak). */
ACG_API acg_status acg_device_reset_peak_memory(acg_device *dev);

/* Waits for all work queued on every stream of the device before the call. It waits without
 * blocking the device's other users: other threads keep allocating, submitting and replaying
 * meanwhile. During a capture on the device this invalidates the capture
 * (ACG_ERR_CAPTURE_INVALIDATED). */
ACG_API acg_status acg_device_synchronize(acg_device *dev);

/* ---------------------------------------------------------------------------------------------
 * Device buffers and pinned host memory
 * ------------------------------------------------------------------------------------------- */

/* Allocates size bytes of device memory (contents undefined). Synchronous.
 * ACG_ERR_INVALID_ARGUMENT for size 0; ACG_ERR_OUT_OF_MEMORY on every backend when the memory is
 * not there, including a size larger than the device can provide at once (the detail names the
 * size, and the vendor's limit or call and code). While a stream of the device is capturing,
 * this is an allocation outside the graph pool: the capture is invalidated and
 * ACG_ERR_CAPTURE_INVALIDATED returned (use acg_stream_alloc inside a capture). */
ACG_API acg_status acg_buffer_alloc(acg_device *dev, size_t size, acg_buffer **out);

/* A view of bytes [offset, offset+size) of buf; it shares buf's memory and address.
 * The parent cannot be freed while views live (ACG_ERR_IN_USE). ACG_ERR_OUT_OF_RANGE when the
 * range leaves buf, ACG_ERR_INVALID_ARGUMENT for size 0. */
ACG_API acg_status acg_buffer_create_view(acg_buffer *buf, size_t offset, size_t size,
                                          acg_buffer **out);

/* Frees a buffer or view. Waits for other threads' calls that use it (a launch, a copy) to
 * queue their work, refuses later ones (ACG_ERR_INVALID_HANDLE), then, before the memory goes,
 * waits for the streams that queued work on it (launches, copies, fills, host functions and
 * foreign work declaring it, on the buffer or any view of it), so queued work never touches
 * freed memory. Other streams' work is not waited for, and the device stays usable by other
 * threads during the wait.
 * ACG_ERR_IN_USE (naming the graph) while a live graph references it, or while views of it
 * live, for scratch memory that belongs to a graph, and for a buffer that another object
 * allocated for itself (a KV cache's K and V, an attention plan's buffer and views, a runner's
 * static inputs and outputs, a model's weights: the message names the owner, whose destroy
 * frees it); ACG_ERR_INVALID_ARGUMENT for memory from acg_stream_alloc (acg_stream_free
 * releases it). During a capture on the device: ACG_ERR_CAPTURE_INVALIDATED (freeing
 * synchronizes), and nothing is freed. */
ACG_API acg_status acg_buffer_free(acg_buffer *buf);

/* Size in bytes; 0 for an invalid handle. */
ACG_API size_t acg_buffer_get_size(const acg_buffer *buf);

/* The device the buffer lives on; NULL for an invalid handle. */
ACG_API acg_device *acg_buffer_get_device(const acg_buffer *buf);

/* Allocates size bytes of host memory that copies can read and write asynchronously
 * (page-locked where the backend has it). When the device has no pinned memory, or with
 * ACG_NO_PINNED=1, the memory is ordinary pageable memory (logged at debug level): then
 * copies from or to it count as pageable, which a capture refuses. Aligned to 64 bytes.
 * ACG_ERR_INVALID_ARGUMENT for size 0; ACG_ERR_OUT_OF_MEMORY as for acg_buffer_alloc; during a
 * capture on the device ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_pinned_alloc(acg_device *dev, size_t size, void **out);

/* Frees memory from acg_pinned_alloc, after the copies queued on it ran (it waits for the
 * streams that queued copies from or to it, as acg_buffer_free does).
 * ACG_ERR_INVALID_HANDLE for a pointer that acg_pinned_alloc did not return,
 * ACG_ERR_IN_USE (naming the graph) while a live graph copies from or to it. During a capture
 * on the device: ACG_ERR_CAPTURE_INVALIDATED (freeing synchronizes), and nothing is freed. */
ACG_API acg_status acg_pinned_free(void *ptr);

/* True when [ptr, ptr+size) lies inside one page-locked allocation or registration of dev. */
ACG_API bool acg_pinned_contains(const acg_device *dev, const void *ptr, size_t size);

/* Page-locks size bytes of host memory the caller owns (weights it mapped from a file, say) for
 * dev: copies from or to it then run asynchronously and can be captured, as with memory from
 * acg_pinned_alloc, and acg_pinned_contains says true for it. The memory stays the caller's and
 * must stay mapped until acg_pinned_unregister. A range is registered once, for one device, and
 * must not overlap memory from acg_pinned_alloc or another registration.
 * ACG_ERR_INVALID_ARGUMENT for a NULL ptr, size 0 or an overlap; ACG_ERR_UNSUPPORTED when the
 * device cannot (capability pinned_register false, or ACG_NO_PINNED=1): the memory can still be
 * copied as pageable memory; ACG_ERR_OUT_OF_MEMORY when the driver refuses to lock it; during a
 * capture on the device ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_pinned_register(acg_device *dev, void *ptr, size_t size);

/* Ends the registration that starts at ptr, after the copies queued on the memory ran (as
 * acg_pinned_free waits); the memory itself is untouched. ACG_ERR_INVALID_HANDLE for a pointer
 * acg_pinned_register did not register (memory from acg_pinned_alloc is freed with
 * acg_pinned_free, and the reverse); ACG_ERR_IN_USE (naming the graph) while a live graph copies
 * from or to it. During a capture on the device: ACG_ERR_CAPTURE_INVALIDATED, and nothing
 * changes. */
ACG_API acg_status acg_pinned_unregister(void *ptr);

/* ---------------------------------------------------------------------------------------------
 * Streams and events
 * ------------------------------------------------------------------------------------------- */

/* Creates an in-order stream. ACG_ERR_OUT_OF_MEMORY, ACG_ERR_DEVICE. */
ACG_API acg_status acg_stream_create(acg_device *dev, acg_stream **out);

/* Waits for other threads' calls on the stream (a synchronize, a launch) to return, refusing
 * later ones (ACG_ERR_INVALID_HANDLE), then for the stream's queued work, then destroys it. A
 * capture the stream takes part in is abandoned first (its graph discarded). */
ACG_API acg_status acg_stream_destroy(acg_stream *stream);

/* Blocks until all work queued on the stream ran; returns a fault the device reported for it.
 * On a capturing stream: invalidates the capture, ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_stream_synchronize(acg_stream *stream);

/* ACG_OK when the stream is idle, ACG_NOT_READY when work is pending. Never blocks.
 * On a capturing stream: invalidates the capture, ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_stream_query(acg_stream *stream);

/* The device the stream belongs to; NULL for an invalid handle. */
ACG_API acg_device *acg_stream_get_device(const acg_stream *stream);

/* What kind of driver object acg_stream_get_native or acg_graph_get_native returns. */
typedef enum acg_native_kind {
    ACG_NATIVE_NONE = 0,         /* the backend has no driver object (cpu) */
    ACG_NATIVE_OPENCL_QUEUE = 1, /* a cl_command_queue, in order */
    ACG_NATIVE_CUDA_STREAM = 2,  /* a CUstream */
    /* a ze_command_list_handle_t: a stream's immediate list (none where the driver has no
     * immediate lists); a graph's regular list, closed */
    ACG_NATIVE_ZE_COMMAND_LIST = 3,
    ACG_NATIVE_CUDA_GRAPH_EXEC = 4, /* a CUgraphExec (acg_graph_get_native) */
    /* the executable graph of Level Zero's record/replay graph extension (a
     * ze_executable_graph_handle_t, appended with zeCommandListAppendGraphExt) */
    ACG_NATIVE_ZE_EXECUTABLE_GRAPH = 5,
    /* Memory and devices (acg_buffer_get_native, acg_device_get_native). */
    ACG_NATIVE_CUDA_DEVICEPTR = 6,   /* a CUdeviceptr, in acg_native_buffer.address */
    ACG_NATIVE_ZE_DEVICE_MEMORY = 7, /* a Level Zero USM device pointer, in .address */
    ACG_NATIVE_OPENCL_MEM = 8,       /* a cl_mem in .handle, the buffer at .offset bytes in it */
    ACG_NATIVE_HOST_MEMORY = 9,      /* host memory (the cpu backend), in .address */
    ACG_NATIVE_CUDA_CONTEXT = 10,    /* a CUcontext, with the CUdevice in .ordinal */
    ACG_NATIVE_ZE_CONTEXT = 11,      /* a ze_context_handle_t, ze_device_handle_t and driver */
    ACG_NATIVE_OPENCL_CONTEXT = 12,  /* a cl_context, cl_device_id and cl_platform_id */
    /* Vulkan: a VkBuffer in .handle, the buffer's first byte at .offset bytes in it and its
     * device address (bufferDeviceAddress, the offset applied) in .address */
    ACG_NATIVE_VULKAN_BUFFER = 13,
    ACG_NATIVE_VULKAN_DEVICE = 14, /* a VkDevice, VkPhysicalDevice and VkInstance */
    /* a graph's secondary VkCommandBuffer (vkCmdExecuteCommands), recorded for simultaneous
     * use */
    ACG_NATIVE_VULKAN_COMMAND_BUFFER = 15,
} acg_native_kind;

typedef struct acg_native_handle {
    size_t size; /* sizeof(acg_native_handle), set by the caller */
    acg_native_kind kind;
    void *handle; /* the object (a cl_command_queue, a CUstream); NULL with ACG_NATIVE_NONE */
} acg_native_handle;

#define ACG_NATIVE_HANDLE_INIT                                                                     \
    { sizeof(acg_native_handle), ACG_NATIVE_NONE, NULL }

/* The driver's object behind a stream, for work an engine issues itself (a vendor library, its
 * own kernels): work issued on it is ordered with the stream's. The object belongs to the
 * stream; do not release it. A backend without one (cpu) says ACG_NATIVE_NONE, with ACG_OK; so
 * does level_zero on a driver without immediate command lists, where a stream is a command queue
 * running regular lists that acg closes and executes itself, which nothing else can append to.
 * Work issued on it during a capture must be declared with acg_stream_declare_foreign.
 * out is an output struct as the conventions above describe (its size set by the caller).
 * ACG_ERR_INVALID_ARGUMENT for a NULL out or an unset out->size. */
ACG_API acg_status acg_stream_get_native(acg_stream *stream, acg_native_handle *out);

/* A device buffer as its driver knows it, for work an engine issues itself on the stream's
 * native object (a vendor library such as cuBLAS, the engine's own kernels, NCCL). */
typedef struct acg_native_buffer {
    size_t size; /* sizeof(acg_native_buffer), set by the caller */
    acg_native_kind kind;
    void *handle;     /* ACG_NATIVE_OPENCL_MEM: the cl_mem of the buffer's allocation; else NULL */
    uint64_t address; /* the buffer's first byte (a view's offset applied): a CUdeviceptr, a
                         USM pointer or a host pointer; 0 with ACG_NATIVE_OPENCL_MEM */
    uint64_t offset;  /* ACG_NATIVE_OPENCL_MEM: the buffer's first byte in handle (a view's
                         offset); else 0 (address has it applied) */
    uint64_t bytes;   /* the buffer's size (acg_buffer_get_size) */
} acg_native_buffer;

#define ACG_NATIVE_BUFFER_INIT                                                                     \
    { sizeof(acg_native_buffer), ACG_NATIVE_NONE, NULL, 0, 0, 0 }

/* The driver's memory behind a buffer or view: cuda a CUdeviceptr, level_zero a USM device
 * pointer, opencl the allocation's cl_mem and the view's byte offset in it, cpu the host pointer
 * (device memory is host memory there). What the engine may do with it: read and write the
 * buffer's bytes [0, bytes) from work it issues on a stream of the same device through that
 * stream's native object (acg_stream_get_native), eagerly or inside a native capture; never
 * free, resize, retain or release it. It stays valid while the buffer lives (until
 * acg_buffer_free) and names the same memory for all that time. Graph scratch is shared with
 * the other graphs of its pool: use its native memory only in work recorded in the capture
 * that allocated it. acg knows of such work only through acg_stream_declare_foreign: declare
 * each one's accesses, and the buffer's free then waits for that stream's work, and a graph
 * that holds the work keeps the buffer alive (ACG_ERR_IN_USE) as it does for its own nodes;
 * undeclared work is the engine's to order and keep alive. out is an output struct (its size
 * set by the caller). ACG_ERR_INVALID_HANDLE; ACG_ERR_INVALID_ARGUMENT for a NULL out or an
 * unset out->size; ACG_ERR_DEVICE_LOST on a lost device. */
ACG_API acg_status acg_buffer_get_native(acg_buffer *buf, acg_native_buffer *out);

/* A device as its driver knows it: the context acg created or retained for it, and the device
 * and driver handles, so an engine's vendor library can be created on the same context. */
typedef struct acg_native_device {
    size_t size;          /* sizeof(acg_native_device), set by the caller */
    acg_native_kind kind; /* ACG_NATIVE_CUDA_CONTEXT, _ZE_CONTEXT, _OPENCL_CONTEXT; NONE (cpu) */
    void *context;        /* CUcontext, ze_context_handle_t, cl_context; NULL on cpu */
    void *device;         /* ze_device_handle_t, cl_device_id; NULL on cuda (see ordinal) and cpu */
    void *platform;       /* ze_driver_handle_t, cl_platform_id; NULL on cuda and cpu */
    int32_t ordinal;      /* cuda: the CUdevice; elsewhere the device's index in its backend */
} acg_native_device;

#define ACG_NATIVE_DEVICE_INIT                                                                     \
    { sizeof(acg_native_device), ACG_NATIVE_NONE, NULL, NULL, NULL, 0 }

/* The driver's objects behind a device. They belong to acg and live until acg_device_close: do
 * not destroy or release them (retaining one the API lets you retain, a cl_context, is yours to
 * release). The cuda context is the device's primary context, current on every thread acg
 * calls the driver from; make it current (cuCtxSetCurrent) before calling the driver yourself.
 * out is an output struct. ACG_ERR_INVALID_HANDLE; ACG_ERR_INVALID_ARGUMENT for a NULL out or
 * an unset out->size; ACG_ERR_DEVICE_LOST on a lost device. */
ACG_API acg_status acg_device_get_native(acg_device *dev, acg_native_device *out);

/* How a host function or foreign work touches a buffer. */
typedef enum acg_access_mode {
    ACG_ACCESS_READ = 1,
    ACG_ACCESS_WRITE = 2,
    ACG_ACCESS_READ_WRITE = 3,
} acg_access_mode;

/* One buffer range that work acg does not launch reads or writes. */
typedef struct acg_access {
    const acg_buffer *buffer;
    size_t offset, size; /* bytes; size 0 means to the end of the buffer */
    acg_access_mode mode;
} acg_access;

/* Maximum accesses one host function or foreign work may declare. */
#define ACG_MAX_ACCESSES 16

typedef void (*acg_host_fn)(void *user);

/* Queues fn(user) on the stream: it runs after the work queued before it and before the work
 * queued after it, on a thread of the library's choosing (or, on a backend that cannot queue
 * host work, on the calling thread after the stream drained). accesses declare the buffers fn
 * reads or writes through pointers it holds (on the cpu backend device memory is host memory),
 * so a buffer a captured host function uses cannot be freed while the graph lives. During a
 * capture the call is recorded: every replay calls fn(user) again in order. A device whose
 * graphs cannot call host functions (graph_host_functions false; OpenCL command buffers have
 * no host node) invalidates the capture (ACG_ERR_CAPTURE_INVALIDATED, naming the reason).
 * fn must not call acg functions on the stream it runs on. ACG_ERR_INVALID_ARGUMENT for a NULL
 * fn, n_accesses > ACG_MAX_ACCESSES or a NULL accesses with n_accesses > 0;
 * ACG_ERR_INVALID_HANDLE for a dead buffer; ACG_ERR_WRONG_DEVICE; ACG_ERR_OUT_OF_RANGE for a
 * range that leaves its buffer. */
ACG_API acg_status acg_stream_launch_host(acg_stream *stream, acg_host_fn fn, void *user,
                                          const acg_access *accesses, size_t n_accesses);

/* Declares work the engine issued (or is about to issue) on the stream's native object
 * (acg_stream_get_native): a vendor library's kernels, a collective. Outside a capture it
 * checks the accesses and notes that the stream's queued work uses those buffers, so freeing
 * one waits for the stream (acg_buffer_free). During a capture on a device with native capture, the
 * driver recorded the work itself and acg adds a node `name` to the graph's ledger with these
 * accesses, so lifetimes and ACG_ERR_IN_USE cover the buffers it touches. The ledger keeps its
 * own copy of the whole name (acg_graph_get_node, acg_graph_write_dot, and the topology that
 * acg_graph_update compares), so the caller's string may go once the call returns. On a device
 * whose graphs are built from acg's description (native_capture false), work issued on the native
 * object would run once at capture time and never at replay: the capture is invalidated
 * (ACG_ERR_CAPTURE_INVALIDATED, naming the reason). Errors as acg_stream_launch_host, and
 * ACG_ERR_INVALID_ARGUMENT for a NULL name. */
ACG_API acg_status acg_stream_declare_foreign(acg_stream *stream, const char *name,
                                              const acg_access *accesses, size_t n_accesses);

/* Creates an event. An event never recorded counts as complete. */
ACG_API acg_status acg_event_create(acg_device *dev, acg_event **out);

/* Destroys an event, after other threads' calls that use it returned; work that already waits
 * on it is not affected. */
ACG_API acg_status acg_event_destroy(acg_event *event);

/* Marks the point in the stream's queue that the event stands for, replacing an earlier record.
 * Asynchronous. On a capturing stream it marks the point in the capture instead, for other
 * streams to fork from or join with acg_stream_wait_event. */
ACG_API acg_status acg_event_record(acg_event *event, acg_stream *stream);

/* Makes later work on stream wait until the event's point completed. Asynchronous.
 * With an event recorded in a capture: a stream that is not capturing joins that capture
 * (fork), a stream of the same capture gains the dependency (join). A capturing stream that
 * waits on an event from outside its capture invalidates the capture. A fork on a device
 * without multi-stream capture invalidates the capture and returns ACG_ERR_UNSUPPORTED. */
ACG_API acg_status acg_stream_wait_event(acg_stream *stream, acg_event *event);

/* ACG_OK when the event's point completed, ACG_NOT_READY otherwise. Never blocks.
 * For an event recorded in a live capture: invalidates it, ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_event_query(acg_event *event);

/* Blocks until the event's point completed. For an event recorded in a live capture:
 * invalidates it, ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_event_synchronize(acg_event *event);

/* ---------------------------------------------------------------------------------------------
 * Copies and fills (all asynchronous, all recorded when the stream captures)
 * ------------------------------------------------------------------------------------------- */

/* Copies size bytes from host memory src to dst at dst_offset.
 * From pinned memory the copy reads src when it runs (keep src unchanged until then, and for a
 * captured copy at every replay). From pageable memory src is read before the call returns.
 * During capture a copy from pageable memory invalidates the capture (the graph would read it at
 * replay). ACG_ERR_OUT_OF_RANGE, ACG_ERR_INVALID_ARGUMENT for NULL src or size 0. */
ACG_API acg_status acg_copy_h2d(acg_stream *stream, acg_buffer *dst, size_t dst_offset,
                                const void *src, size_t size);

/* Copies size bytes from src at src_offset to host memory dst. Into pinned memory the call is
 * asynchronous; into pageable memory it returns after the copy completed. During capture a
 * copy into pageable memory invalidates the capture. */
ACG_API acg_status acg_copy_d2h(acg_stream *stream, void *dst, const acg_buffer *src,
                                size_t src_offset, size_t size);

/* Copies size bytes between device buffers of one device. Overlapping ranges are
 * ACG_ERR_INVALID_ARGUMENT. */
ACG_API acg_status acg_copy_d2d(acg_stream *stream, acg_buffer *dst, size_t dst_offset,
                                const acg_buffer *src, size_t src_offset, size_t size);

/* Fills size bytes of dst from offset with a pattern of pattern_size bytes (1, 2 or 4; the low
 * bytes of pattern in host byte order). offset and size must be multiples of pattern_size. */
ACG_API acg_status acg_fill(acg_stream *stream, acg_buffer *dst, size_t offset, size_t size,
                            uint32_t pattern, size_t pattern_size);

/* ---------------------------------------------------------------------------------------------
 * Kernels
 * ------------------------------------------------------------------------------------------- */

#define ACG_MAX_KERNEL_ARGS 16

typedef enum acg_arg_type {
    ACG_ARG_BUFFER = 1, /* a device buffer at a byte offset */
    ACG_ARG_I32,
    ACG_ARG_U32,
    ACG_ARG_I64,
    ACG_ARG_U64,
    ACG_ARG_F32,
} acg_arg_type;

typedef struct acg_arg {
    acg_arg_type type;
    union {
        struct {
            const acg_buffer *buffer;
            size_t offset;
        } buf;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
    } value;
} acg_arg;

/* Launch shape: global[d] work items in dimension d (unused dimensions 1); local[d] the
 * work-group size, or all zero to let the backend choose. */
typedef struct acg_dims {
    uint32_t global[3];
    uint32_t local[3];
} acg_dims;

static inline acg_arg acg_arg_buffer(const acg_buffer *buffer, size_t offset) {
    acg_arg a;
    a.type = ACG_ARG_BUFFER;
    a.value.buf.buffer = buffer;
    a.value.buf.offset = offset;
    return a;
}
static inline acg_arg acg_arg_i32(int32_t v) {
    acg_arg a;
    a.type = ACG_ARG_I32;
    a.value.i32 = v;
    return a;
}
static inline acg_arg acg_arg_u32(uint32_t v) {
    acg_arg a;
    a.type = ACG_ARG_U32;
    a.value.u32 = v;
    return a;
}
static inline acg_arg acg_arg_i64(int64_t v) {
    acg_arg a;
    a.type = ACG_ARG_I64;
    a.value.i64 = v;
    return a;
}
static inline acg_arg acg_arg_u64(uint64_t v) {
    acg_arg a;
    a.type = ACG_ARG_U64;
    a.value.u64 = v;
    return a;
}
static inline acg_arg acg_arg_f32(float v) {
    acg_arg a;
    a.type = ACG_ARG_F32;
    a.value.f32 = v;
    return a;
}
static inline acg_dims acg_dims_1d(uint32_t n) {
    acg_dims d = {{n, 1, 1}, {0, 0, 0}};
    return d;
}

/* ---- registering kernels ---------------------------------------------------------------------
 *
 * Every kernel is a registered definition: a name, its argument types, how far each buffer
 * argument reaches, and one implementation per backend. The core's own elementwise kernels are
 * registered from the start (acg_kernel_get below lists them); a layer above (the reference
 * model, see model.h) or the user registers the rest with acg_kernel_register. A device runs a
 * kernel whose definition holds code for the device's backend. acg/kernel.h writes a kernel once
 * for every backend, and the CMake function acg_add_kernels builds it and generates its
 * definitions (docs/kernels.md). */

/* What a kernel's registrant promises about its results. Replay always equals eager on one
 * backend, whatever the class; the class says how a backend compares with another. */
typedef enum acg_kernel_exactness {
    ACG_KERNEL_EXACT_SAME_BACKEND = 0, /* equal to eager on the same backend; backends may
                                          differ (a vendor's exp, its division) */
    ACG_KERNEL_EXACT_EVERY_BACKEND,    /* equal on every backend, bit for bit: each
                                          implementation does the same operations in the same
                                          order, with nothing contracted or reassociated */
} acg_kernel_exactness;

/* A kernel's shape rule: from a launch's arguments (types already checked: read the scalars'
 * values; buffers are the caller's handles) and grid, writes in extent[i] how many bytes buffer
 * argument i reaches from its offset (extent arrives zeroed; entries of scalars are ignored).
 * Arithmetic must saturate at UINT64_MAX rather than wrap, so an absurd launch is refused, not
 * let through. Returns NULL when the launch is well formed, else a sentence saying what is
 * wrong ("the grid must cover (dim, n)"), which the launch's error message quotes. Called on
 * the launching thread at every launch, before anything is queued; it must not call acg. */
typedef const char *(*acg_kernel_shape_fn)(const acg_arg *args, const acg_dims *dims,
                                           uint64_t extent[ACG_MAX_KERNEL_ARGS]);

/* A kernel argument as the cpu backend hands it to a kernel's C function: a buffer argument is
 * the host pointer to its window (the buffer's memory plus the offsets), a scalar its value. */
typedef union acg_cpu_arg {
    void *p;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
} acg_cpu_arg;

/* A kernel's C implementation for the cpu backend: one call computes every work item of the
 * grid global[0] x global[1] x global[2] (args has one entry per argument, in order). It runs
 * on the worker thread of the launching stream, at its place in stream order, eagerly and at
 * every replay; it must not call acg. Build it with -ffp-contract=off where the kernel is
 * ACG_KERNEL_EXACT_EVERY_BACKEND, so a*b+c rounds twice as OpenCL C does here. */
typedef void (*acg_kernel_cpu_fn)(const acg_cpu_arg *args, const uint32_t global[3]);

/* The same C code split into parts, which the cpu backend's thread pool runs at once (a device
 * runs a kernel on up to `threads` threads: acg_device_open). How many parts a launch is worth:
 * from 1 (0 and 1 run acg_kernel_cpu_fn whole) to max_parts (the device's thread count, 2 or
 * more; a larger result counts as max_parts), decided from the sizes in args so that a launch
 * too small to repay the pool's hand-off stays on one thread (`acg bench split` measures where
 * splitting pays: about 3 µs of single-thread work per launch on a two-core machine). Called on
 * the stream's worker before each run of the launch, eagerly and at every replay; it must not
 * call acg. */
typedef uint32_t (*acg_kernel_cpu_parts_fn)(const acg_cpu_arg *args, const uint32_t global[3],
                                            uint32_t max_parts);

/* Computes part `part` (0 .. n_parts - 1) of a launch split into n_parts. The parts of one
 * launch run at once on different threads, or one after another on one thread, in any order:
 * a part writes only the output elements it owns. Every output element belongs to exactly one
 * part, for any n_parts, and is computed with the same operations in the same order as
 * acg_kernel_cpu_fn computes it, so the results do not depend on n_parts or on the device's
 * thread count, bit for bit. Like acg_kernel_cpu_fn, it must not call acg. */
typedef void (*acg_kernel_cpu_part_fn)(const acg_cpu_arg *args, const uint32_t global[3],
                                       uint32_t part, uint32_t n_parts);

/* A factor of a data shape rule (acg_kernel_desc.reach, grid_covers): 1, the value of integer
 * scalar argument j (i32, u32, i64 or u64), or the launch's global[d]. */
#define ACG_BY_ONE 0u
#define ACG_BY_ARG(j) ((uint8_t)(1u + (j)))
#define ACG_BY_GLOBAL(d) ((uint8_t)(0x40u + (d)))

/* How far a buffer argument reaches: bytes * f(by[0]) * f(by[1]) (acg_kernel_desc.reach). */
typedef struct acg_kernel_reach {
    uint64_t bytes;
    uint8_t by[2];
} acg_kernel_reach;

/* acg_kernel_desc.flags: every buffer argument reaches global[0] * bytes_per_item bytes (the
 * kernel is 1-D, work item i touching item i of each buffer). */
#define ACG_KERNEL_ELEMENTWISE (1u << 0)

/* Formats of kernel code (acg_kernel_impl.format) that the backends of this version take, each
 * with the calling convention acg launches it under; a backend added later names its own.
 * acg_kernel_get compares the compiled function's parameters with the convention where the
 * driver tells them, and refuses a mismatch (ACG_ERR_INVALID_ARGUMENT) naming the parameter. */

/* For the opencl backend: OpenCL C 1.2 source text (size 0 when it ends in NUL, else its length
 * in bytes) holding the kernel function, built for each device at the first acg_kernel_get (one
 * program per device for each distinct text, shared by every kernel registered with the same
 * text), with FP_CONTRACT off and division and sqrt correctly rounded where the device offers
 * it. Each buffer argument is two parameters, a global pointer and a ulong byte offset to add to
 * it; each scalar is one parameter of the matching type (int, uint, long, ulong, float). The
 * check compares the parameters' number, and their types where the driver reports them. */
#define ACG_KERNEL_FORMAT_OPENCL_C "opencl-c"
/* For the level_zero backend: a SPIR-V module in the OpenCL environment (OpenCL C compiled to
 * SPIR-V, say), binary: size is its bytes (acg_kernel_get refuses an entry of size 0 with
 * ACG_ERR_INVALID_ARGUMENT). It holds the kernel, with the parameters of
 * ACG_KERNEL_FORMAT_OPENCL_C: each buffer argument a global pointer to its allocation and a
 * ulong byte offset to add, each scalar one parameter. The check compares the parameter count
 * (zeKernelGetProperties) and, where the driver tells them (zexKernelGetArgumentSize), the
 * sizes. */
#define ACG_KERNEL_FORMAT_SPIRV_OPENCL "spirv-opencl"
/* For the cuda backend: an image cuLibraryLoadData takes (a fatbin or a cubin, size its bytes;
 * or PTX text, size 0 when it ends in NUL) holding the extern "C" __global__ function. Its
 * parameters: each buffer argument one pointer to its window (the offset applied, `float *`
 * say), each scalar one parameter of the matching type (int32_t, uint32_t, int64_t, uint64_t,
 * float), then three `unsigned int`: global[0], global[1], global[2]. The grid is run in whole
 * blocks, so a work item checks itself against them and returns past them. Where the driver
 * tells parameter sizes (cuFuncGetParamInfo), acg_kernel_get compares them. */
#define ACG_KERNEL_FORMAT_CUDA_IMAGE "cuda-image"
/* For the vulkan backend: a SPIR-V module for Vulkan 1.2 (GLSL compiled by glslangValidator,
 * say), binary: size is its bytes, a multiple of 4. It holds one compute entry point, the
 * entry's name, whose local size is (w, 1, 1), w its specialization constant 0, which the
 * backend sets for the device (256 where the device allows it). Every argument is in its
 * argument block, a storage buffer at descriptor set 0, binding 0 (bound as a dynamic storage
 * buffer at each launch's block, so that a graph's update can rewrite a node's arguments
 * without recording again), laid out as std430 does: a uvec4 first, global[0], global[1],
 * global[2] and 0, then each argument in order at the next offset its alignment allows, a
 * buffer as the uint64 device address of its window (the offset applied: a buffer_reference),
 * i32, u32 and f32 as 4 bytes, i64 and u64 as 8. The grid is run in whole groups, so a work
 * item checks itself against global and returns past it. include/acg/kernel.glsl declares this
 * for GLSL (ACG_VK_ARGS). */
#define ACG_KERNEL_FORMAT_SPIRV_VULKAN "spirv-vulkan"

/* The most entries a definition's impls may have. */
#define ACG_MAX_KERNEL_IMPLS 64

/* One implementation of a kernel for a backend that loads code (acg_kernel_desc.impls). The
 * cpu backend runs a function of the process instead, which cpu.fn and cpu_parts hold. */
typedef struct acg_kernel_impl {
    const char *backend; /* the backend it is for ("opencl", "cuda", "level_zero", ...);
                            NULL: every backend that takes the format */
    const char *format;  /* what code holds, as the backends name it (above) */
    const void *code;    /* the bytes, or the text */
    size_t size;         /* bytes of code; 0: code is text ending in NUL */
    const char *entry;   /* the function in code; NULL: the kernel's name (in a set, the name
                            without the set's) */
} acg_kernel_impl;

/* A kernel definition for acg_kernel_register. Only size, name, n_args, types, bytes_per_item
 * and dims are required (an older caller's struct must reach past dims); every later field
 * defaults as ACG_KERNEL_DESC_INIT sets it. */
typedef struct acg_kernel_desc {
    size_t size;      /* sizeof(acg_kernel_desc) */
    const char *name; /* unique in the process (the core's kernels included); copied */
    uint32_t n_args;  /* 0 .. ACG_MAX_KERNEL_ARGS */
    acg_arg_type types[ACG_MAX_KERNEL_ARGS]; /* of each argument; a launch must match them */
    /* For a buffer argument: the bytes of one item, which its offset (a view's own offset
     * included) must be a multiple of, and which each work item reaches in an elementwise
     * kernel (the window is then global[0] * bytes_per_item). 0 for scalars; 0 for a buffer of
     * a shaped kernel (shape or reach) means no alignment. */
    uint32_t bytes_per_item[ACG_MAX_KERNEL_ARGS];
    /* Grid dimensions the kernel indexes, 1..3; a launch must leave global and local of the
     * others at 1 (local may be 0), or backends would run different amounts of work. */
    uint32_t dims;
    /* (optional) The shape rule of a kernel whose windows follow from its scalar arguments, as
     * a callback; reach and grid_covers below say the common cases as data. NULL: none. */
    acg_kernel_shape_fn shape;
    /* Overlap: work items run in any order, so the windows of two buffer arguments on one
     * allocation must be disjoint, or the launch is refused. An elementwise kernel
     * (ACG_KERNEL_ELEMENTWISE) may also be given the same window twice (work in place); a
     * shaped kernel only for this pair of buffer arguments {i, j}. {0, 0}: no pair. */
    uint32_t in_place[2];
    acg_kernel_exactness exactness; /* default ACG_KERNEL_EXACT_SAME_BACKEND */
    /* Implementations: at least one must be given, here or in impls (last). The registry
     * copies each string and binary. */
    struct {
        acg_kernel_cpu_fn fn; /* the C function; NULL: none (see also cpu_parts, last) */
    } cpu;
    /* The same as an impls entry of format ACG_KERNEL_FORMAT_OPENCL_C for every backend that
     * takes it (the opencl backend; its text ending in NUL); kept for definitions written before
     * impls. NULL: none. */
    struct {
        const char *source;
        const char *name; /* the kernel function in source; NULL: the kernel's name */
    } opencl;
    /* The same as an impls entry of format ACG_KERNEL_FORMAT_CUDA_IMAGE for every backend that
     * takes it (the cuda backend; a binary: size its bytes); kept for definitions written before
     * impls. NULL: none. */
    struct {
        const void *fatbin;
        size_t size;
        const char *name; /* the function; NULL: the kernel's name */
    } cuda;
    /* The same as an impls entry of format ACG_KERNEL_FORMAT_SPIRV_OPENCL for every backend that
     * takes it (the level_zero backend); kept for definitions written before impls. NULL:
     * none. */
    struct {
        const void *module;
        size_t size;
        const char *name; /* the entry point; NULL: the kernel's name */
    } spirv;
    /* (optional) The cpu code split into parts, for the cpu backend's thread pool: both
     * functions or neither, and only with cpu.fn, which still runs launches not worth
     * splitting (and every launch on a device of one thread). NULL, NULL: cpu.fn always. */
    struct {
        acg_kernel_cpu_parts_fn parts; /* how many parts a launch is worth */
        acg_kernel_cpu_part_fn fn;     /* computes one of them */
    } cpu_parts;
    /* (optional) Threads the cuda backend runs for each work item along x, so that a work item
     * too large for one thread (a dot product, a reduction over a row) is computed by a warp or
     * a block together: a power of two up to 1024; 0 and 1 mean one thread. The kernel's work
     * item x is then its thread index along x divided by cuda_lanes, and its lane the
     * remainder; y and z are as without lanes. Up to 32 lanes are an aligned group of one warp
     * in blocks of 256 threads (the lanes of a work item may exchange values with warp
     * shuffles over their group, and leave together); more lanes are one block per work item
     * (the block may synchronise). The launch's local size is then not used on cuda. Needs a
     * cuda-image implementation (cuda.fatbin, or an impls entry of that format for cuda). Other
     * backends ignore it: a work item is still one call of the same code, and the results must
     * not depend on the lanes (ACG_KERNEL_EXACT_EVERY_BACKEND). */
    uint32_t cuda_lanes;
    /* Added with shape rules as data. How far each buffer argument reaches is said in exactly
     * one way: ACG_KERNEL_ELEMENTWISE in flags (global[0] * bytes_per_item), a shape callback
     * (shape), or reach[] for every buffer argument. A definition with a buffer argument that
     * says none of them is refused. (A caller whose struct ends before reach, from headers
     * older than this rule, meant elementwise by leaving shape NULL, and is read so; what its
     * struct holds where flags lies now is its tail padding, never read.) */
    uint32_t flags; /* ACG_KERNEL_ELEMENTWISE (above), or 0 */
    /* (optional) Buffer argument i reaches reach[i].bytes * f(by[0]) * f(by[1]) bytes from its
     * offset, where f(ACG_BY_ONE) is 1, f(ACG_BY_ARG(j)) the value of integer scalar argument j
     * (a negative value refuses the launch) and f(ACG_BY_GLOBAL(d)) the grid's global[d]; the
     * product saturates. {0}: not given. Entries of scalars must stay {0}. */
    acg_kernel_reach reach[ACG_MAX_KERNEL_ARGS];
    /* (optional) grid_covers[d] = ACG_BY_ARG(j): a launch's global[d] must be at least the
     * value of integer scalar argument j (the kernel skips the work items past it), else the
     * launch is refused naming both. ACG_BY_ONE (0): no rule. With reach, a kernel such as a
     * row-wise matmul is checked without a callback. */
    uint8_t grid_covers[3];
    /* Added with implementations as a list. (optional) n_impls implementations for the
     * backends that load code (acg_kernel_impl), up to ACG_MAX_KERNEL_IMPLS. A backend runs
     * the first entry whose format it takes and whose backend is NULL or its own, else the
     * legacy field of its format above (opencl, cuda, spirv), and refuses the kernel
     * (ACG_ERR_UNSUPPORTED at acg_kernel_get) when there is none. An entry of a format no
     * backend here takes, or for a backend this build lacks, is accepted and kept (a later
     * version may take it), and never chosen. The array, every string and the code are copied.
     * NULL, 0: none. */
    const acg_kernel_impl *impls;
    uint32_t n_impls;
} acg_kernel_desc;

#define ACG_KERNEL_DESC_INIT                                                                       \
    {                                                                                              \
        sizeof(acg_kernel_desc), NULL, 0, {(acg_arg_type)0}, {0}, 1, NULL, {0, 0},                 \
            ACG_KERNEL_EXACT_SAME_BACKEND, {NULL}, {NULL, NULL}, {NULL, 0, NULL}, {NULL, 0, NULL}, \
            {NULL, NULL}, 0, 0, {{0, {0, 0}}}, {0, 0, 0}, NULL, 0,                                 \
    }

/* Registers a kernel for every device of the process, open or opened later. Synchronous. The
 * definition is copied, strings and binaries included: desc may be freed on return. Thread-safe;
 * register before the first acg_kernel_get of the name. A registered kernel holds host memory
 * through the allocator hook, so acg_set_allocator is refused until it is unregistered.
 * ACG_ERR_INVALID_ARGUMENT, the message naming the field, for: a NULL desc; a size as the
 * conventions above refuse it (the least is offsetof(acg_kernel_desc, shape)); a NULL or empty
 * name, one with '/' (a set's: acg_kernel_register_set), or one already registered (the core's
 * kernels included); n_args above ACG_MAX_KERNEL_ARGS; a type that is not an acg_arg_type;
 * bytes_per_item set for a scalar; flags with bits this header does not define; buffers whose
 * reach is said in no way, or in more than one (ACG_KERNEL_ELEMENTWISE, shape, reach[]); an
 * elementwise buffer without bytes_per_item, or an elementwise kernel whose dims is not 1;
 * data rules with a buffer lacking reach[i].bytes, a reach set for a scalar or past n_args, a
 * factor naming no integer scalar argument or a dimension past dims, or a grid_covers entry
 * for a dimension past dims or naming the grid; dims not 1..3; an in_place pair that is not
 * two different buffer arguments below n_args; an unknown
 * exactness; no implementation at all (cpu.fn, impls and the legacy fields count), opencl.name
 * without opencl.source, or a binary whose pointer and size disagree; n_impls above
 * ACG_MAX_KERNEL_IMPLS, or not 0 with a NULL impls; an impls entry whose format is NULL or
 * empty, whose code is NULL, or whose backend is empty (the message names its index);
 * cpu_parts with one of its functions only, or without cpu.fn; and where the build has the
 * cuda backend (which checks it), cuda_lanes not a power of two up to 1024, or set without a
 * cuda-image implementation.
 * ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_kernel_register(const acg_kernel_desc *desc);

/* Forgets a registered kernel and frees its copy; its name may be registered again.
 * Thread-safe. ACG_ERR_INVALID_ARGUMENT for a NULL name or one of the core's kernels;
 * ACG_ERR_NOT_FOUND when no kernel of that name is registered; ACG_ERR_IN_USE while a device
 * that loaded it (acg_kernel_get) is open: a loaded kernel belongs to its device until
 * acg_device_close (the message counts the devices). */
ACG_API acg_status acg_kernel_unregister(const char *name);

/* Registers an engine's kernels as one set: each desc[i] under the name "<set>/<desc[i].name>",
 * so that two libraries in one process may both have a "matmul" (acg_kernel_get takes the whole
 * name). All or nothing: when one definition is refused (the message names its index and the
 * field, as acg_kernel_register would), none stays registered. set is a non-empty name without
 * '/'; a name with '/' belongs to a set and acg_kernel_register refuses it. An implementation
 * that names no function (an impls entry's entry, opencl.name, cuda.name, spirv.name) runs the
 * one of desc[i].name, the name without the set's. desc is an array of n structs of
 * desc[0].size bytes each (the caller's sizeof), every one with that size. Thread-safe.
 * ACG_ERR_INVALID_ARGUMENT for a NULL or malformed set, NULL desc, n 0 or above UINT32_MAX / 2,
 * a struct whose size is not desc[0]'s, a name twice in desc, a set already registered, and
 * what acg_kernel_register refuses (the message names the index); ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_kernel_register_set(const char *set, const acg_kernel_desc *desc, size_t n);

/* Unregisters every kernel of the set, all or nothing. Thread-safe. ACG_ERR_IN_USE while a
 * device that loaded one of them is open (the message names the kernel), and then none is
 * unregistered; ACG_ERR_NOT_FOUND when no kernel of the set is registered;
 * ACG_ERR_INVALID_ARGUMENT for a NULL or malformed set. */
ACG_API acg_status acg_kernel_unregister_set(const char *set);

/* ---- using kernels ------------------------------------------------------------------------ */

/* Looks up a registered kernel by name and loads it on the device: the first lookup per device
 * builds the backend's implementation (OpenCL: compiles its source), later lookups return the
 * same handle. The kernel belongs to the device (no destroy; it is released at
 * acg_device_close). Thread-safe. ACG_ERR_NOT_FOUND for a name that is not registered;
 * ACG_ERR_UNSUPPORTED when the definition holds no code for the device's backend (the message
 * names the kernel and the backend); ACG_ERR_INVALID_ARGUMENT when the compiled code's
 * parameters break its format's calling convention (ACG_KERNEL_FORMAT_OPENCL_C, ...: the
 * message names the parameter); ACG_ERR_DEVICE when the backend fails to build it (the OpenCL
 * build log is in acg_last_error()); ACG_ERR_OUT_OF_MEMORY.
 *
 * The core's kernels (f32 buffers indexed by the 1-D work item i < global[0]; each buffer
 * argument reaches global[0] elements from its offset, which is checked at launch; two buffer
 * arguments must be the same window, for work in place, or not overlap; each is
 * ACG_KERNEL_EXACT_EVERY_BACKEND, and a backend is complete when it runs them):
 *   "fill_f32"       (y, f32 value)      y[i] = value
 *   "add_scalar_f32" (y, x, f32 a)       y[i] = x[i] + a
 *   "axpy_f32"       (y, x, f32 a)       y[i] = a * x[i] + y[i]
 *   "copy_f32"       (dst, src)          dst[i] = src[i]   (offsets select the windows)
 * The reference model's kernels are registered by acg_model_register_kernels (model.h). */
ACG_API acg_status acg_kernel_get(acg_device *dev, const char *name, acg_kernel **out);

/* The kernel's name; NULL for an invalid handle. */
ACG_API const char *acg_kernel_get_name(const acg_kernel *kernel);

/* Queues a kernel launch. Asynchronous; recorded when the stream captures. Arguments are copied
 * (the array may be reused at once). Every check below runs before anything is queued or
 * recorded: a refused launch leaves the stream, and a capture, as they were.
 * ACG_ERR_INVALID_ARGUMENT for a wrong argument count or type (the message names the
 * argument), a zero or oversized grid, a grid with more dimensions than the kernel, a launch
 * its shape rule refuses (the message quotes the rule's sentence), a grid below what
 * grid_covers requires, a negative scalar that a data rule multiplies, a misaligned offset (a
 * view's own offset included), buffer windows that overlap other than as the kernel allows,
 * or graph scratch used outside the capture that allocated it (copies and fills refuse it too);
 * ACG_ERR_OUT_OF_RANGE when a buffer argument's window leaves the buffer;
 * ACG_ERR_WRONG_DEVICE for a buffer or kernel of another device. */
ACG_API acg_status acg_kernel_launch(acg_stream *stream, const acg_kernel *kernel,
                                     const acg_dims *dims, const acg_arg *args, size_t n_args);

/* ---------------------------------------------------------------------------------------------
 * Graphs and graph pools
 *
 * A capture records what is submitted to a stream, instead of running it, until the capture
 * ends; the result is a graph that replays the recorded work with one call. Inside a capture,
 * anything that would wait for the host, read or write pageable host memory, or allocate
 * outside the capture's graph pool invalidates the capture: the offending call returns
 * ACG_ERR_CAPTURE_INVALIDATED (its message names the operation), work submitted afterwards
 * to the capture's streams is refused with the same status, and acg_stream_end_capture returns
 * it, frees what the capture held and leaves every stream of the capture usable. The pool
 * accepts the next capture.
 *
 * A graph remembers every buffer and pinned allocation it reads or writes; they cannot be
 * freed while it lives (ACG_ERR_IN_USE names the graph).
 * ------------------------------------------------------------------------------------------- */

typedef enum acg_capture_state {
    ACG_CAPTURE_NONE = 0,    /* not capturing */
    ACG_CAPTURE_ACTIVE,      /* recording */
    ACG_CAPTURE_INVALIDATED, /* an illegal operation ended the recording; call end_capture */
} acg_capture_state;

/* Creates a graph pool: device memory that graphs captured into it share for their scratch
 * (acg_stream_alloc). Graphs of one pool must never run at the same time; the library orders
 * their replays so they cannot. */
ACG_API acg_status acg_graph_pool_create(acg_device *dev, acg_graph_pool **out);

/* Destroys a pool, after other threads' calls that use it returned. ACG_ERR_IN_USE while a
 * graph captured into it lives or a capture into it is in progress. */
ACG_API acg_status acg_graph_pool_destroy(acg_graph_pool *pool);

/* Device bytes the pool holds (its high-water mark over all its graphs). */
ACG_API acg_status acg_graph_pool_get_bytes(const acg_graph_pool *pool, size_t *out);

/* Starts capturing the stream. Graph scratch comes from pool, or from a private pool owned by
 * the graph when pool is NULL. ACG_ERR_UNSUPPORTED when the device has no graphs;
 * ACG_ERR_IN_USE when another capture into the pool is in progress; on a stream already
 * capturing: that capture is invalidated and ACG_ERR_CAPTURE_INVALIDATED returned. */
ACG_API acg_status acg_stream_begin_capture(acg_stream *stream, acg_graph_pool *pool);

/* Ends the capture begun on this stream (the origin) and instantiates its graph.
 * ACG_ERR_NOT_CAPTURING when the stream is not the origin of a capture;
 * ACG_ERR_CAPTURE_INVALIDATED when the capture was invalidated (acg_last_error() repeats why);
 * ACG_ERR_CAPTURE_UNJOINED when a forked stream's work was not joined back into the origin
 * stream. An invalidated capture returns the status that invalidated it: usually
 * ACG_ERR_CAPTURE_INVALIDATED, ACG_ERR_OUT_OF_MEMORY when recording ran out of memory,
 * ACG_ERR_UNSUPPORTED when a stream forked into it on a device without multi-stream capture.
 * On every outcome all streams of the capture leave capture mode. */
ACG_API acg_status acg_stream_end_capture(acg_stream *stream, acg_graph **out);

/* Whether the stream takes part in a capture, and in which state. */
ACG_API acg_status acg_stream_get_capture_state(acg_stream *stream, acg_capture_state *out);

/* Allocates size bytes for work on the stream, the same call eagerly and under capture:
 * - in a capture: graph scratch from the capture's pool. It belongs to the graph and is
 *   released with it; it is shared with the pool's other graphs, so its contents do not
 *   survive between replays. acg_stream_free of it does nothing.
 * - otherwise: device memory of the stream's own, released in stream order by
 *   acg_stream_free (after the work queued before the free ran). Like acg_buffer_alloc, this
 *   invalidates a capture in progress on another stream of the device.
 * ACG_ERR_INVALID_ARGUMENT for size 0, ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_stream_alloc(acg_stream *stream, size_t size, acg_buffer **out);

/* Releases memory from acg_stream_alloc in stream order: the handle dies now, the memory once
 * the work queued on the stream so far completed (when there is no memory to defer that, the
 * call waits for the stream and frees at once: it never fails for want of memory). Graph scratch:
 * nothing happens (its graph releases it). ACG_ERR_INVALID_ARGUMENT for a buffer that
 * acg_stream_alloc did not return (use acg_buffer_free); ACG_ERR_IN_USE while a live graph or a
 * view references it; in a capture, freeing memory from outside the capture invalidates it. */
ACG_API acg_status acg_stream_free(acg_stream *stream, acg_buffer *buf);

/* Replays the graph on the stream: one queue entry, asynchronous. After an earlier replay of a
 * graph of the same pool on another stream, the stream first waits for it. Graphs do not nest:
 * on a capturing stream the capture is invalidated (ACG_ERR_CAPTURE_INVALIDATED). */
ACG_API acg_status acg_graph_launch(acg_graph *graph, acg_stream *stream);

/* Makes graph replay what `from` replays: same topology (node kinds, kernels, dependencies),
 * new arguments (buffers, offsets, scalars, sizes). Waits for pending replays of graph first.
 * `from` is unchanged and stays valid. Foreign work and collectives are taken from what the
 * driver recorded for `from` where the backend can (cuda), which needs the two graphs' scratch
 * to coincide: capture both into one pool. ACG_ERR_UNSUPPORTED when the capability lacks
 * graph_update (recapture instead), or, naming the node, for foreign work or a collective the
 * backend cannot take so (on cuda, graphs whose scratch lies in two pools; docs/backends.md
 * says which backends) and for a host function of `from` that uses its scratch;
 * ACG_ERR_TOPOLOGY_MISMATCH naming the first differing node. */
ACG_API acg_status acg_graph_update(acg_graph *graph, const acg_graph *from);

/* Changes kernel node `node` (acg_graph_get_node's numbering) of an instantiated graph in place,
 * without a capture: its arguments become args (n_args of them, all of the kernel's, scalars and
 * buffers alike) and, when dims is not NULL, its grid becomes *dims. The next replay runs the
 * new launch; nothing else of the graph changes. Every rule of acg_kernel_launch holds as at
 * launch, checked before anything changes (a refused update leaves the graph as it was): the
 * types, the grid, the shape rule, alignment, windows and overlaps, the device of each buffer;
 * a buffer that is graph scratch must be this graph's own. The graph then references the new
 * buffers (they cannot be freed while it lives, ACG_ERR_IN_USE) and no longer the old ones it
 * stopped using. Waits for pending replays of the graph's pool first, as acg_graph_update does
 * (the driver's executable is rewritten while nothing runs it); a concurrent acg_graph_launch
 * of the graph is ordered before or after it, whole. How each backend does it: cpu rewrites
 * the node's arguments in place; cuda sets the kernel node's parameters in the executable
 * (cuGraphExecKernelNodeSetParams, the node found during capture), so graphs holding foreign
 * work and collectives can be updated so; level_zero mutates the command of a mutable command
 * list, or records its list again from the description where the driver has none; opencl
 * needs mutable dispatch (cl_khr_command_buffer_mutable_dispatch). The capability says
 * graph_node_update, and graph_node_update_grid when the grid may change.
 * ACG_ERR_UNSUPPORTED when it is false (capture again), or for a grid change without
 * graph_node_update_grid; ACG_ERR_OUT_OF_RANGE for a node past the graph;
 * ACG_ERR_INVALID_ARGUMENT for a node that is not a kernel (naming its kind), NULL args with
 * n_args > 0, and every launch error above; ACG_ERR_INVALID_HANDLE, ACG_ERR_WRONG_DEVICE,
 * ACG_ERR_DEVICE_LOST; ACG_ERR_DEVICE or ACG_ERR_OUT_OF_MEMORY when the driver fails the
 * change (the graph then replays as before). */
ACG_API acg_status acg_graph_update_kernel_node(acg_graph *graph, size_t node, const acg_dims *dims,
                                                const acg_arg *args, size_t n_args);

/* Prepares the graph for replays on stream ahead of the first one (on drivers where the first
 * replay uploads the graph, CUDA's cuGraphUpload), so that cost falls at start-up, not while
 * serving. Asynchronous; optional: replays work without it, and where a backend needs nothing
 * it does nothing. A capturing stream is refused like a replay into it (the capture is
 * invalidated). ACG_ERR_WRONG_DEVICE for a stream of another device. */
ACG_API acg_status acg_graph_upload(acg_graph *graph, acg_stream *stream);

/* Waits for other threads' calls on the graph (a launch, an update) to return and for pending
 * replays of the graph, then destroys it and releases its scratch. The wait for replays blocks
 * no other user of the device. */
ACG_API acg_status acg_graph_destroy(acg_graph *graph);

/* Gives up a graph that will never replay (say, one slot of a bucket dropped whole). The handle
 * is dead on return. Most backends destroy it at once; a backend whose driver may still
 * reference what the graph recorded keeps it in its pool until the pool's next successful
 * capture or the pool's destruction, which is the only way such memory is safely reused. It
 * never fails for want of memory: without room to keep the graph, it is destroyed once its
 * pool's replays ended. ACG_ERR_INVALID_HANDLE for a dead graph; NULL does nothing. */
ACG_API acg_status acg_graph_discard(acg_graph *graph);

/* ---------------------------------------------------------------------------------------------
 * Process groups and collectives
 * ------------------------------------------------------------------------------------------- */

/* A process group, as the engine has one: every rank passes the same calls in the same order.
 * acg takes it as callbacks so that it works with any transport; acg_mpi.h makes one from an
 * MPI communicator. NULL where a call takes one means a single process.
 *
 * barrier and allreduce_min_i32 are required: the least size is offsetof(acg_comm, rank), and
 * the runners use those two alone. Device groups (acg_device_group_create) also need rank,
 * n_ranks and broadcast. A callback returns ACG_OK, or ACG_ERR_COMM when a rank failed or left
 * (within a bounded time, not waiting for ever); acg passes that status on, naming the call. */
typedef struct acg_comm {
    size_t size; /* sizeof(acg_comm) */
    void *user;
    /* Returns once every rank called it. */
    acg_status (*barrier)(void *user);
    /* Replaces values[i] by the minimum of values[i] over all ranks. */
    acg_status (*allreduce_min_i32)(void *user, int32_t *values, size_t n);
    /* Added with device groups. */
    int32_t rank;    /* this process's rank, 0 .. n_ranks - 1 */
    int32_t n_ranks; /* 0: not given (then no device group can be made) */
    /* Copies bytes at data on rank root to data on every other rank. */
    acg_status (*broadcast)(void *user, void *data, size_t bytes, int32_t root);
    /* (optional) Replaces values[i] by the sum over all ranks, added in rank order. Used by
     * device groups whose ranks do not share a host; NULL: such a group is unsupported. Called
     * from a thread of acg's (a stream's worker) while other callbacks may run on the thread
     * that made the group: an MPI transport gives it a communicator of its own. acg passes the
     * same n on every rank: before each allreduce's data it makes a call of n_ranks * 4 values
     * through which the ranks agree on the count (acg_allreduce), so the transport need not
     * check n (acg_mpi.h's does anyway). */
    acg_status (*allreduce_sum_f32)(void *user, float *values, size_t n);
} acg_comm;

#define ACG_COMM_INIT                                                                              \
    { sizeof(acg_comm), NULL, NULL, NULL, 0, 0, NULL, NULL }

/* The devices of a process group, one per rank, for collectives on streams. */
typedef struct acg_device_group acg_device_group;

/* Makes the group of every rank's device: a collective call, each rank passing its own device
 * and the same comm (kept by reference: it must outlive the group). The cpu backend joins the
 * ranks of one host through a shared-memory segment that rank 0 creates and removes as soon as
 * every rank mapped it (nothing is left behind, whatever happens to a rank afterwards); ranks on
 * several hosts, or ACG_CPU_ALLREDUCE=host, reduce through comm->allreduce_sum_f32 instead.
 * ACG_ERR_UNSUPPORTED when the capability says no collectives (opencl, level_zero) or the ranks
 * need allreduce_sum_f32 and the comm has none; ACG_ERR_INVALID_ARGUMENT for a NULL argument, a
 * comm without rank, n_ranks (1 .. 64) or broadcast, or a size that acg's rule for growing
 * structs refuses; a comm callback's failure is returned as it is (usually ACG_ERR_COMM).
 * During a capture on the device: ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_device_group_create(acg_device *dev, const acg_comm *comm,
                                           acg_device_group **out);
/* Destroys a group once no queued work and no live graph uses it (ACG_ERR_IN_USE naming the
 * graph). Not collective. */
ACG_API acg_status acg_device_group_destroy(acg_device_group *group);
/* This rank and the number of ranks. */
ACG_API acg_status acg_device_group_get_rank(const acg_device_group *group, int32_t *rank,
                                             int32_t *n_ranks);

/* Queues, in stream order, the sum over every rank of `count` floats at `offset` bytes into
 * buf, written back in place on every rank. Every rank's result has the same bits, whatever
 * the timing: the cpu backend adds in rank order; cuda leaves the order to the algorithm NCCL
 * picks (the same on every rank, not rank order, so its bits may differ from the cpu's).
 * A collective: every rank queues the same allreduces, of the same count, in the same order
 * (and, captured, replays the same graphs). A rank that does not makes the others wait until
 * they detect it (a peer that exited, or ACG_COMM_TIMEOUT_MS, default 60000) and fail with
 * ACG_ERR_COMM, reported by the stream's next synchronization. There is one operation on one
 * type, a float sum, so the count is all the ranks must agree on: on the cpu backend each rank
 * publishes its count with the allreduce (in shared memory, or through the comm before the
 * data), and when they differ every rank fails with ACG_ERR_COMM, reported the same way and
 * naming two ranks' counts ("allreduce: rank 0 reduces 16 floats, rank 1 32: ..."), before
 * any rank wrote its buffer: every buffer keeps its values. Either way the group is then
 * broken: every later allreduce of it fails at once, the call itself with ACG_ERR_COMM naming
 * the first failure, an allreduce already queued or in a graph through the stream's next
 * synchronization (a replay's other work still runs); destroy it and make a new one. NCCL
 * (cuda) compares no counts, and acg does not either there: ranks whose counts differ may hang
 * in the allreduce, and the stream's synchronization with it, or get wrong sums with no error.
 * During a capture the call is recorded like a kernel (captured natively where the backend
 * captures natively). ACG_ERR_INVALID_HANDLE, ACG_ERR_WRONG_DEVICE for a buffer or group of
 * another device, ACG_ERR_INVALID_ARGUMENT for count 0 or an offset not a multiple of 4,
 * ACG_ERR_OUT_OF_RANGE for a range that leaves buf, ACG_ERR_COMM once the group failed. */
ACG_API acg_status acg_allreduce(acg_stream *stream, acg_device_group *group, acg_buffer *buf,
                                 size_t offset, size_t count);

/* ---------------------------------------------------------------------------------------------
 * Loops: a body of work run again while a condition in device memory says so
 *
 * acg_stream_loop_begin opens a loop on a stream, acg_stream_loop_end closes it; the body is
 * the work queued on the stream between the two. After each run of the body the 32-bit word at
 * cond + offset is read: non-zero runs the body again, zero (or the max_iterations-th run)
 * ends the loop. The body runs at least once, and something in it (a kernel, a copy, a fill)
 * writes the word; nothing else may.
 *
 * In a capture the loop is part of the graph and the device evaluates the condition at every
 * replay, with no host round trip (a CUDA conditional WHILE node; the cpu backend's replay
 * loops on its worker): the capability says graph_loops. On a device without it, the loop
 * call invalidates the capture with the reason (a caller then replays one step per launch).
 * Outside a capture the same calls loop on the host: the body runs as it is queued, and
 * acg_stream_loop_end waits for the stream, reads the word and queues the body again while it
 * is set, so eager results can be compared with replay's bit for bit. Eagerly every buffer the
 * body uses is held until the loop closes: freeing it is refused (ACG_ERR_IN_USE).
 *
 * A body holds kernels, device-to-device copies, fills and nested loops (at most
 * ACG_MAX_LOOP_DEPTH open at once), what every backend's conditional graphs run. Copies to or
 * from host memory, host functions, foreign work, allreduces, event records and waits, and
 * graph launches on the stream are refused while its loop is open: in a capture they invalidate
 * it (ACG_ERR_CAPTURE_INVALIDATED naming the call), eagerly they return
 * ACG_ERR_INVALID_ARGUMENT and queue nothing. A loop's body is one stream's: in a capture, work
 * on the capture's other streams while the loop is open invalidates the capture. A capture
 * that ends with a loop open is invalidated; acg_stream_begin_capture on a stream with an eager
 * loop open is refused (ACG_ERR_INVALID_ARGUMENT).
 * ------------------------------------------------------------------------------------------- */

#define ACG_MAX_LOOP_DEPTH 4

/* Opens a loop on the stream whose condition is the uint32_t at cond + offset (offset a
 * multiple of 4) and which runs its body at most max_iterations times (>= 1). Checks run first
 * and a refusal leaves the stream and its capture as they were: ACG_ERR_INVALID_HANDLE,
 * ACG_ERR_WRONG_DEVICE for a buffer of another device, ACG_ERR_INVALID_ARGUMENT for
 * max_iterations 0, a misaligned offset, ACG_MAX_LOOP_DEPTH loops already open, or graph
 * scratch outside the capture that allocated it, ACG_ERR_OUT_OF_RANGE for a word past the
 * buffer's end. In a capture on a device without graph_loops, or while another stream of the
 * capture has a loop open: ACG_ERR_CAPTURE_INVALIDATED. */
ACG_API acg_status acg_stream_loop_begin(acg_stream *stream, acg_buffer *cond, size_t offset,
                                         uint32_t max_iterations);

/* Closes the innermost loop open on the stream. In a capture the loop becomes one node whose
 * body is the nodes queued since acg_stream_loop_begin; work queued afterwards depends on the
 * whole loop. Eagerly, runs the rest of the loop (see above) and returns when the condition is
 * clear or max_iterations runs are done; a failure of the body's work ends the loop with that
 * status. ACG_ERR_INVALID_ARGUMENT when no loop is open on the stream; in an invalidated
 * capture, ACG_ERR_CAPTURE_INVALIDATED (the loop closes all the same). */
ACG_API acg_status acg_stream_loop_end(acg_stream *stream);

/* ---------------------------------------------------------------------------------------------
 * Graph description: what a graph does, independent of the backend
 * ------------------------------------------------------------------------------------------- */

typedef enum acg_node_kind {
    ACG_NODE_KERNEL = 1,
    ACG_NODE_COPY_H2D,
    ACG_NODE_COPY_D2H,
    ACG_NODE_COPY_D2D,
    ACG_NODE_FILL,
    ACG_NODE_HOST,       /* a host function (acg_stream_launch_host) */
    ACG_NODE_FOREIGN,    /* work acg did not launch (acg_stream_declare_foreign) */
    ACG_NODE_COLLECTIVE, /* an allreduce (acg_allreduce) */
    ACG_NODE_LOOP,       /* a loop (acg_stream_loop_begin): its body is the acg_graph_get_loop
                            nodes after it; buffers holds its condition's buffer */
} acg_node_kind;

typedef struct acg_node_info {
    acg_node_kind kind;
    const char *kernel;   /* kernel name for ACG_NODE_KERNEL, the declared name for
                             ACG_NODE_FOREIGN, else NULL */
    size_t size;          /* bytes copied or filled; 0 for kernels */
    size_t n_deps;        /* nodes this one waits for */
    const uint32_t *deps; /* their indices (each < this node's index) */
    size_t n_buffers;     /* buffers the node reads or writes */
    const acg_buffer *const *buffers;
    const void *host; /* pinned host memory of a copy, else NULL */
} acg_node_info;

/* Number of nodes of the graph. */
ACG_API acg_status acg_graph_get_node_count(const acg_graph *graph, size_t *out);

/* Describes node `index`; the pointers inside stay valid while the graph lives unchanged. */
ACG_API acg_status acg_graph_get_node(const acg_graph *graph, size_t index, acg_node_info *out);

/* A loop node: its body is nodes index + 1 .. index + n_body (nested loops and their bodies
 * among them); the first depends on the loop node, and a node after the body that follows the
 * loop depends on the loop node, never on its body. */
typedef struct acg_loop_info {
    size_t size;             /* sizeof(acg_loop_info); the caller sets it */
    size_t n_body;           /* nodes of the body */
    uint32_t max_iterations; /* runs of the body at most */
    const acg_buffer *cond;  /* the condition's buffer ... */
    size_t cond_offset;      /* ... and its offset there */
} acg_loop_info;

/* Describes loop node `index` (acg_graph_get_node says ACG_NODE_LOOP). ACG_ERR_OUT_OF_RANGE
 * for an index past the last node, ACG_ERR_INVALID_ARGUMENT for a node that is no loop, a NULL
 * out or an unset out->size. */
ACG_API acg_status acg_graph_get_loop(const acg_graph *graph, size_t index, acg_loop_info *out);

/* The device the graph belongs to; NULL for an invalid handle. */
ACG_API acg_device *acg_graph_get_device(const acg_graph *graph);

/* Flags of acg_graph_write_dot, or'ed together. ACG_DOT_BUFFERS: the buffers as nodes of their
 * own, with an edge per node that touches one: "read" (buffer to node), "write" (node to
 * buffer), "read/write", or "uses" where the ledger does not know (a kernel's definition does
 * not say which of its buffers it reads or writes). */
#define ACG_DOT_BUFFERS (1u << 0)

/* Writes the graph's description (its ledger) to out as a Graphviz DOT digraph, for `dot -Tsvg`.
 * One box per node, named n<index> as acg_graph_get_node numbers them and labelled with its kind
 * and name (a kernel's, foreign work's declared name), a kernel's grid (global and local sizes
 * over the dimensions it indexes; "local auto" when the launch left it to the backend) and the
 * bytes of a copy, fill or allreduce. Each stream of the capture is a cluster ("stream 0" is
 * the origin, then the streams in the order they joined); an edge per dependency, solid within
 * a stream, dashed and colored across streams (an event wait). The graph's label names the
 * graph, its device (spec and name) and its node count. Names are quoted and escaped, so any
 * name gives valid DOT; the same graph always gives the same bytes. Synchronous: the text is
 * built in memory under the device's lock (a concurrent acg_graph_update is seen whole, before
 * or after), then written to out with the lock released, and out is flushed; out stays open
 * and is the caller's. Thread-safe. ACG_ERR_INVALID_HANDLE for a dead graph;
 * ACG_ERR_INVALID_ARGUMENT for a NULL out or a flag bit this header does not define;
 * ACG_ERR_OUT_OF_MEMORY (nothing written); ACG_ERR_IO when writing or flushing out fails
 * (acg_last_error() gives the system's reason; part of the text may have been written). */
ACG_API acg_status acg_graph_write_dot(const acg_graph *graph, FILE *out, uint32_t flags);

/* The driver's executable graph behind a graph, to drive or measure it without acg: a CUgraphExec
 * on cuda; on level_zero the driver's executable graph where it captured the graph
 * (ACG_NATIVE_ZE_EXECUTABLE_GRAPH), else the regular command list acg recorded, closed
 * (ACG_NATIVE_ZE_COMMAND_LIST: zeCommandListImmediateAppendCommandListsExp or
 * zeCommandQueueExecuteCommandLists runs it). It belongs to the graph: do not destroy, reset or
 * close it. It stays valid until the graph is updated (an update may instantiate or record it
 * again, and may change its kind) or destroyed. A launch of it bypasses acg: it is
 * not ordered after the pool's other replays, and acg does not know it is pending, so nothing
 * waits for it before an update, a destroy or a free of what it uses; the caller makes sure it
 * completed first. A backend whose graph is not one driver object (cpu; opencl, which records a
 * command buffer per queue) says ACG_NATIVE_NONE, with ACG_OK. out is an output struct (its size
 * set by the caller). ACG_ERR_INVALID_HANDLE for a dead graph, ACG_ERR_INVALID_ARGUMENT for a
 * NULL out or an unset out->size. */
ACG_API acg_status acg_graph_get_native(acg_graph *graph, acg_native_handle *out);

#ifdef __cplusplus
}
#endif

#endif /* ACG_ACG_H */
