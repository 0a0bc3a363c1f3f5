/*
 * backend.h — the interface between the core and one backend.
 *
 * A backend is a `static const struct acg_backend_i` of static functions. The core validates
 * every argument, tracks captures and lifetimes, and calls the backend with resolved memory:
 * a backend never sees a handle it has to check. Slots marked (optional) may be NULL; the core
 * then supplies the default that the comment names. The table is versioned and only appended to.
 */
#ifndef ACG_CORE_BACKEND_H
#define ACG_CORE_BACKEND_H

#include <acg/acg.h>

#define ACG_BACKEND_VERSION 1

/* A kernel argument with its buffer resolved to backend memory. */
typedef struct acg__karg {
    acg_arg_type type;
    union {
        struct {
            void *mem;     /* root allocation from buffer_alloc */
            size_t offset; /* bytes from the root's start */
        } buf;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
    } value;
} acg__karg;

/* A kernel's shape rule: checks a launch's scalar arguments and grid, and gives the bytes
 * each buffer argument reaches from its offset in extent[i] (saturating, never wrapping).
 * Returns NULL when the launch is well formed, else a sentence saying what is wrong. */
typedef const char *(*acg__kernel_shape_fn)(const acg__karg *args, const acg_dims *dims,
                                            uint64_t extent[ACG_MAX_KERNEL_ARGS]);

/* One entry of the built-in kernel catalogue (src/core/kernel.c), the same for every backend. */
typedef struct acg__kernel_def {
    const char *name;
    uint32_t n_args;
    acg_arg_type types[ACG_MAX_KERNEL_ARGS];
    /* Bytes of one element of a buffer argument: the offset's required alignment, and (for an
     * elementwise kernel, shape NULL) the bytes each work item reaches, so the window is
     * global[0] * this. 0 for scalars. */
    uint32_t bytes_per_item[ACG_MAX_KERNEL_ARGS];
    /* Grid dimensions the kernel indexes; global and local must be 1 (local may be 0) in the
     * others, or backends would run different amounts of work. */
    uint32_t dims;
    /* (optional) The shape rule of a kernel whose windows depend on its scalar arguments;
     * NULL for an elementwise kernel. */
    acg__kernel_shape_fn shape;
    /* A shaped kernel's buffers must not overlap, but for this pair of arguments, which may be
     * the same window (in place); {0, 0}: none. Elementwise kernels allow any same-window pair. */
    uint8_t in_place[2];
} acg__kernel_def;

/* One node of a captured graph, as the core records it. Copies: h2d uses dst_* and host,
 * d2h src_* and host, d2d dst_* and src_*, fill dst_*, size and pattern. */
typedef struct acg__node {
    acg_node_kind kind;
    uint32_t deps_begin; /* index into acg__graph_desc.deps */
    uint32_t n_deps;
    /* kernels */
    const acg__kernel_def *def;
    void *kernel; /* backend kernel from kernel_load */
    acg_dims dims;
    uint32_t n_args;
    acg__karg args[ACG_MAX_KERNEL_ARGS];
    /* copies and fills */
    void *dst_mem;
    size_t dst_off;
    void *src_mem;
    size_t src_off;
    size_t size;
    void *host;
    bool host_pinned; /* host lies in a pinned allocation of the device */
    uint32_t pattern;
    uint32_t pattern_size;
    /* description: the handles behind the resolved memory */
    uint32_t n_buffers;
    const acg_buffer *buffers[ACG_MAX_KERNEL_ARGS];
} acg__node;

/* A whole graph: nodes in submission order, so every dependency precedes its node and the array
 * order is a valid serial order. */
typedef struct acg__graph_desc {
    acg__node *nodes;
    uint32_t n_nodes;
    uint32_t *deps;
    uint32_t n_deps;
} acg__graph_desc;

struct acg_backend_i {
    int version;      /* ACG_BACKEND_VERSION this table was written against */
    const char *name; /* "cpu", "opencl", "cuda", "level_zero" */

    /* Loads the driver and counts devices, opening none. *reason says why when it cannot run. */
    acg_status (*probe)(int *n_devices, const char **reason);
    /* Capability of device `index` without opening it; one driver query. */
    acg_status (*describe)(int index, acg_capability *out);
    /* Opens device `index`; *dev is the backend's device. */
    acg_status (*device_open)(int index, void **dev);
    /* Closes a device opened by device_open; every object of it is gone. */
    void (*device_close)(void *dev);
    /* Capability of an open device; the core calls it once per device and caches the result. */
    acg_status (*query_capability)(void *dev, acg_capability *out);

    /* Allocates device memory; *mem is opaque to the core. */
    acg_status (*buffer_alloc)(void *dev, size_t size, void **mem);
    /* Frees memory from buffer_alloc; the core synchronized the device before. */
    void (*buffer_free)(void *dev, void *mem);
    /* (optional) Page-locked host memory, 64-byte aligned. NULL: pageable memory is used. */
    acg_status (*pinned_alloc)(void *dev, size_t size, void **ptr);
    /* (optional, with pinned_alloc) Frees memory from pinned_alloc. */
    void (*pinned_free)(void *dev, void *ptr);

    /* Creates an in-order stream. */
    acg_status (*stream_create)(void *dev, void **stream);
    /* Destroys a stream after the core synchronized it. */
    void (*stream_destroy)(void *stream);
    /* Blocks until the stream's queued work ran; returns a fault reported for it. */
    acg_status (*stream_synchronize)(void *stream);
    /* ACG_OK when idle, ACG_NOT_READY when work is pending. */
    acg_status (*stream_query)(void *stream);

    /* Creates an event that counts as complete until recorded. */
    acg_status (*event_create)(void *dev, void **event);
    /* Destroys an event; queued waits on it are unaffected. */
    void (*event_destroy)(void *event);
    /* Marks the stream's current end of queue. */
    acg_status (*event_record)(void *event, void *stream);
    /* Makes later work on stream wait for the event's point. */
    acg_status (*stream_wait_event)(void *stream, void *event);
    /* ACG_OK when the event's point completed, ACG_NOT_READY otherwise. */
    acg_status (*event_query)(void *event);
    /* Blocks until the event's point completed. */
    acg_status (*event_synchronize)(void *event);

    /* Host to device. With src_pinned false the backend must have read src before returning. */
    acg_status (*copy_h2d)(void *stream, void *dst, size_t dst_off, const void *src, size_t size,
                           bool src_pinned);
    /* Device to host, asynchronous; the core waits afterwards when dst is pageable. */
    acg_status (*copy_d2h)(void *stream, void *dst, void *src, size_t src_off, size_t size);
    /* Device to device, non-overlapping. */
    acg_status (*copy_d2d)(void *stream, void *dst, size_t dst_off, void *src, size_t src_off,
                           size_t size);
    /* Fills size bytes with a 1-, 2- or 4-byte pattern; offset and size are multiples of it. */
    acg_status (*fill)(void *stream, void *dst, size_t off, size_t size, uint32_t pattern,
                       uint32_t pattern_size);

    /* Builds or finds the backend's implementation of a catalogue kernel. */
    acg_status (*kernel_load)(void *dev, const acg__kernel_def *def, void **kernel);
    /* (optional) Releases a kernel from kernel_load at device close. NULL: nothing to release. */
    void (*kernel_unload)(void *dev, void *kernel);
    /* Queues a launch; arguments match def's types, checked by the core. */
    acg_status (*kernel_launch)(void *stream, void *kernel, const acg_dims *dims,
                                const acg__karg *args, uint32_t n_args);

    /* (optional) Builds an executable graph from a captured description. NULL: no graphs. */
    acg_status (*graph_instantiate)(void *dev, const acg__graph_desc *desc, void **exec);
    /* (optional, with graph_instantiate) Queues one replay of exec on stream. */
    acg_status (*graph_launch)(void *exec, void *stream);
    /* (optional) Rewrites exec's arguments from desc (same topology, checked by the core; no
     * replay pending). NULL: graph update unsupported. */
    acg_status (*graph_update)(void *exec, const acg__graph_desc *desc);
    /* (optional, with graph_instantiate) Destroys exec; no replay of it is pending. */
    void (*graph_destroy)(void *exec);

    /* Version 1 ends here; later fields are appended below. */

    /* Whether a discarded graph (acg_graph_discard) must outlive its discard until its pool's
     * next successful capture, because the driver may still reference what it recorded (as
     * Level Zero command lists can). false: discarded graphs are destroyed at once. */
    bool retain_discarded_graphs;
};

typedef struct acg_backend_i acg_backend_i;

#endif /* ACG_CORE_BACKEND_H */
