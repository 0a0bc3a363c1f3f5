/* opencl.h — the opencl backend's internal interface.
 *
 * Streams are in-order command queues, events are markers, pinned memory is a mapped
 * CL_MEM_ALLOC_HOST_PTR buffer, kernels come from programs built per device from the OpenCL C
 * of their definitions, and graphs are cl_khr_command_buffer command buffers recorded from the
 * core's description (cmdbuf.c), whose entry points and signatures depend on the extension
 * version the device reports. */
#ifndef ACG_BACKENDS_OPENCL_H
#define ACG_BACKENDS_OPENCL_H

#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <pthread.h>
#include <string.h>

#include "acg-backend.h"
#include "acg-layer.h"

/* Runs an OpenCL call; on failure records the call and its code as this thread's error, maps
 * the code to a status in `st`, and jumps to `label`. */
#define OCL_CHECK(call, fn, label) OCL_CHECK_MAPPED(acg__ocl_error, (call), #call, fn, label)

/* As OCL_CHECK, for a call that waits for or flushes commands queued before it (clFinish,
 * clFlush, clWaitForEvents, a blocking read or write): acg__ocl_sync_error maps its code. */
#define OCL_CHECK_SYNC(call, fn, label)                                                            \
    OCL_CHECK_MAPPED(acg__ocl_sync_error, (call), #call, fn, label)

/* Both: the call's code err_, mapped by map(err_, fn, text) where it failed. */
#define OCL_CHECK_MAPPED(map, call, text, fn, label)                                               \
    do {                                                                                           \
        cl_int err_ = (call);                                                                      \
        if (err_ != CL_SUCCESS) {                                                                  \
            st = map(err_, fn, text);                                                              \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Sets "<fn>: <call> failed with <code's name> (<code>)" and returns the status the code maps
 * to: ACG_ERR_OUT_OF_MEMORY for the out-of-memory codes and CL_INVALID_BUFFER_SIZE (a buffer
 * larger than the device allocates), else ACG_ERR_DEVICE. */
acg_status acg__ocl_error(cl_int err, const char *fn, const char *call);
/* The same for a call that waits for or flushes earlier commands, where a device fault shows:
 * CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST (a command waited for ended with a negative
 * execution status) and CL_OUT_OF_RESOURCES (how drivers report a command that faulted, to
 * every later wait of the context) are ACG_ERR_DEVICE_LOST; other codes as acg__ocl_error. An
 * enqueue that does not wait keeps CL_OUT_OF_RESOURCES out of memory: there it says the command
 * needs more than the device has (registers, local memory). */
acg_status acg__ocl_sync_error(cl_int err, const char *fn, const char *call);
/* acg__ocl_sync_error for clWaitForEvents on ev (err not CL_SUCCESS): where a command it waited
 * for terminated abnormally, the detail also gives ev's execution status. */
acg_status acg__ocl_wait_error(cl_int err, cl_event ev, const char *fn, const char *call);
/* ACG_OK, ACG_NOT_READY while ev's command has not completed, or ACG_ERR_DEVICE_LOST with
 * "<fn>: <what> ended with execution status <status> (terminated abnormally): the device
 * faulted" where its execution status is negative; asks without waiting. */
acg_status acg__ocl_event_status(cl_event ev, const char *fn, const char *what);

/* ---- cl_khr_command_buffer ---------------------------------------------------------------- */

/* The two calling conventions the extension has had: before 0.9.5 the clCommand*KHR calls
 * other than clCommandNDRangeKernelKHR take no properties argument; from 0.9.5 (and in the
 * final 1.0) they all do. */
typedef enum ocl_cb_abi {
    OCL_CB_NONE = 0, /* absent, or a version this code does not know */
    OCL_CB_090,      /* 0.9.0 - 0.9.4 */
    OCL_CB_095,      /* 0.9.5 - 0.9.x, 1.0.x */
} ocl_cb_abi;

typedef cl_command_buffer_khr(CL_API_CALL *ocl_create_fn)(cl_uint, const cl_command_queue *,
                                                          const cl_command_buffer_properties_khr *,
                                                          cl_int *);
typedef cl_int(CL_API_CALL *ocl_cb_fn)(cl_command_buffer_khr);
typedef cl_int(CL_API_CALL *ocl_enqueue_fn)(cl_uint, cl_command_queue *, cl_command_buffer_khr,
                                            cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *ocl_ndrange_fn)(cl_command_buffer_khr, cl_command_queue,
                                            const cl_properties *, cl_kernel, cl_uint,
                                            const size_t *, const size_t *, const size_t *, cl_uint,
                                            const cl_sync_point_khr *, cl_sync_point_khr *,
                                            cl_mutable_command_khr *);
typedef cl_int(CL_API_CALL *ocl_copy_090_fn)(cl_command_buffer_khr, cl_command_queue, cl_mem,
                                             cl_mem, size_t, size_t, size_t, cl_uint,
                                             const cl_sync_point_khr *, cl_sync_point_khr *,
                                             cl_mutable_command_khr *);
typedef cl_int(CL_API_CALL *ocl_copy_095_fn)(cl_command_buffer_khr, cl_command_queue,
                                             const cl_properties *, cl_mem, cl_mem, size_t, size_t,
                                             size_t, cl_uint, const cl_sync_point_khr *,
                                             cl_sync_point_khr *, cl_mutable_command_khr *);
typedef cl_int(CL_API_CALL *ocl_fill_090_fn)(cl_command_buffer_khr, cl_command_queue, cl_mem,
                                             const void *, size_t, size_t, size_t, cl_uint,
                                             const cl_sync_point_khr *, cl_sync_point_khr *,
                                             cl_mutable_command_khr *);
typedef cl_int(CL_API_CALL *ocl_fill_095_fn)(cl_command_buffer_khr, cl_command_queue,
                                             const cl_properties *, cl_mem, const void *, size_t,
                                             size_t, size_t, cl_uint, const cl_sync_point_khr *,
                                             cl_sync_point_khr *, cl_mutable_command_khr *);

typedef struct ocl_cmdbuf_api {
    ocl_cb_abi abi;
    unsigned major, minor, patch; /* the version the device reports */
    bool simultaneous;            /* a command buffer may be enqueued while still pending */
    bool mutable_dispatch;        /* cl_khr_command_buffer_mutable_dispatch is offered */
    cl_command_queue_properties queue_props; /* queues that record must have these */
    char why[160];                           /* why graphs are unavailable, or what is used */
    ocl_create_fn create;
    ocl_cb_fn finalize;
    ocl_cb_fn release;
    ocl_enqueue_fn enqueue;
    ocl_ndrange_fn ndrange;
    union {
        ocl_copy_090_fn v090;
        ocl_copy_095_fn v095;
    } copy;
    union {
        ocl_fill_090_fn v090;
        ocl_fill_095_fn v095;
    } fill;
} ocl_cmdbuf_api;

/* Which calling convention a reported version uses (OCL_CB_NONE for an unknown one). */
ocl_cb_abi acg__ocl_cmdbuf_abi(unsigned major, unsigned minor, unsigned patch);
/* Parses "M.m" or "M.m.p"; false when malformed. */
bool acg__ocl_parse_version(const char *s, unsigned *major, unsigned *minor, unsigned *patch);
/* Reads the device's command-buffer extension and resolves its entry points (platform may be
 * NULL to only describe); fills out->why. ACG_ERR_OUT_OF_MEMORY is the only failure. */
acg_status acg__ocl_cmdbuf_probe(cl_platform_id platform, cl_device_id device, ocl_cmdbuf_api *out);

/* ---- objects ------------------------------------------------------------------------------ */

typedef struct ocl_pinned {
    void *ptr; /* what the caller got: 64-byte aligned */
    size_t size;
    cl_mem mem; /* CL_MEM_ALLOC_HOST_PTR buffer, mapped for the allocation's life */
    void *map;  /* the mapped pointer (ptr - map = offset of ptr in mem) */
} ocl_pinned;

typedef struct ocl_stream ocl_stream;

typedef struct ocl_device {
    int index; /* the device's index in the backend */
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue aux; /* maps pinned memory; records validation command buffers */
    cl_ulong max_alloc;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE: the most bytes of one buffer */
    ocl_cmdbuf_api cb;
    pthread_mutex_t lock; /* the programs and the pinned table */
    struct ocl_program {
        char *source; /* a copy of the OpenCL C it was built from */
        cl_program program;
    } * programs; /* (n_programs) one per distinct source of the kernels loaded */
    uint32_t n_programs, cap_programs;
    ocl_pinned *pins; /* sorted by ptr */
    uint32_t n_pins, cap_pins;
    /* The device's streams, whose latest commands acg_device_get_async_error asks about: a
     * lock of their own, so that a poll never waits behind a program's build. */
    pthread_mutex_t streams_lock;
    ocl_stream **streams; /* (n_streams) */
    uint32_t n_streams, cap_streams;
} ocl_device;

typedef struct ocl_kernel {
    cl_program program; /* the device's, for graphs that create kernel objects of their own */
    const char *name;   /* the kernel function in it */
    cl_kernel kernel;
    pthread_mutex_t lock; /* clSetKernelArg and the launch that reads the arguments */
} ocl_kernel;

struct ocl_stream {
    ocl_device *dev;
    cl_command_queue queue;
    /* The latest command queued (NULL: none yet). The core serializes the slots that queue
     * work, but a synchronize or the device's poll may read it meanwhile: under last_lock. */
    cl_event last;
    pthread_mutex_t last_lock;
    bool native_used; /* the queue was handed out: commands acg did not queue may follow last */
};

/* The core's backend types are these structs (events and graphs: opencl.c, cmdbuf.c); these
 * helpers are the only casts between them. */
static inline ocl_device *acg__ocl_dev(acg__bk_device *d) { return (ocl_device *)d; }
static inline acg__bk_device *acg__ocl_bk_dev(ocl_device *d) { return (acg__bk_device *)d; }
static inline ocl_stream *acg__ocl_stream(acg__bk_stream *s) { return (ocl_stream *)s; }
static inline acg__bk_stream *acg__ocl_bk_stream(ocl_stream *s) { return (acg__bk_stream *)s; }
static inline ocl_kernel *acg__ocl_kernel(acg__bk_kernel *k) { return (ocl_kernel *)k; }
static inline acg__bk_kernel *acg__ocl_bk_kernel(ocl_kernel *k) { return (acg__bk_kernel *)k; }
static inline cl_mem acg__ocl_mem(acg__bk_mem *m) { return (cl_mem)m; }
static inline acg__bk_mem *acg__ocl_bk_mem(cl_mem m) { return (acg__bk_mem *)m; }

/* An event kept under a lock (a stream's latest command, an acg event's mark): *held, retained
 * (NULL: none). */
static inline cl_event acg__ocl_held_get(pthread_mutex_t *lock, cl_event *held) {
    pthread_mutex_lock(lock);
    cl_event ev = *held;
    if (ev != NULL) {
        clRetainEvent(ev);
    }
    pthread_mutex_unlock(lock);
    return ev;
}

/* Makes ev (taking its reference; NULL: none) the event *held, releasing the one before. */
static inline void acg__ocl_held_set(pthread_mutex_t *lock, cl_event *held, cl_event ev) {
    pthread_mutex_lock(lock);
    cl_event old = *held;
    *held = ev;
    pthread_mutex_unlock(lock);
    if (old != NULL) {
        clReleaseEvent(old);
    }
}

/* Makes ev the stream's latest command (taking the reference). */
static inline void acg__ocl_track(ocl_stream *s, cl_event ev) {
    acg__ocl_held_set(&s->last_lock, &s->last, ev);
}

/* The stream's latest command, retained (NULL: none yet). */
static inline cl_event acg__ocl_last(ocl_stream *s) {
    return acg__ocl_held_get(&s->last_lock, &s->last);
}

/* The bytes of a 1-, 2- or 4-byte fill pattern in host order, as the cpu backend writes them. */
static inline void acg__ocl_pattern_bytes(uint32_t pattern, uint32_t size, uint8_t bytes[4]) {
    uint16_t v16 = (uint16_t)pattern;
    uint8_t v8 = (uint8_t)pattern;
    memcpy(bytes, size == 4 ? (const void *)&pattern : size == 2 ? (const void *)&v16 : &v8, size);
}

/* Creates an in-order queue on the device with the properties command buffers need. */
acg_status acg__ocl_queue_create(ocl_device *dev, cl_command_queue *out, const char *fn);
/* Kernels (kernel.c): the table's slots. */
acg_status acg__ocl_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                                acg__bk_kernel **out);
void acg__ocl_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel);
acg_status acg__ocl_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                  const acg_dims *dims, const acg__karg *args, uint32_t n_args);
/* Sets the arguments of k, OpenCL kernel `name`: each buffer becomes (cl_mem, ulong byte
 * offset). A failure names the kernel and the parameter. The caller makes sure no other thread
 * sets or launches the same kernel object meanwhile. */
acg_status acg__ocl_set_args(cl_kernel k, const char *name, const acg__karg *args, uint32_t n,
                             const char *fn);
/* The work dimension of a launch and its sizes as size_t. */
cl_uint acg__ocl_dims(const acg_dims *dims, size_t global[3], size_t local[3], bool *has_local);
/* The buffer and offset behind pinned host memory of the device. */
bool acg__ocl_pinned_find(ocl_device *dev, const void *p, cl_mem *mem, size_t *offset);

/* Graph slots (cmdbuf.c). */
acg_status acg__ocl_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                      acg__bk_exec **exec);
acg_status acg__ocl_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream);
acg_status acg__ocl_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc);
void acg__ocl_graph_destroy(acg__bk_exec *exec);

/* Memory slots (memory.c). */
acg_status acg__ocl_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **mem);
void acg__ocl_buffer_free(acg__bk_device *dev, acg__bk_mem *mem);
acg_status acg__ocl_pinned_alloc(acg__bk_device *dev, size_t size, void **ptr);
void acg__ocl_pinned_free(acg__bk_device *dev, void *ptr);
acg_status acg__ocl_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                      size_t size, acg_native_buffer *out);
acg_status acg__ocl_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                             const void *src, size_t size, bool src_pinned);
acg_status acg__ocl_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                             size_t size, bool dst_pinned);
acg_status acg__ocl_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                             acg__bk_mem *src, size_t src_off, size_t size);
acg_status acg__ocl_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                         uint32_t pattern, uint32_t pattern_size);

#endif /* ACG_BACKENDS_OPENCL_H */
