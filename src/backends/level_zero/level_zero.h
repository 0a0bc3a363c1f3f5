/* level_zero.h — the level_zero backend's shared declarations: the loader and its entry points,
 * the backend's objects, and the checking macro. loader.c has the loader and what each driver
 * offers; level_zero.c devices, memory and kernels; stream.c streams, events and copies (queue.c
 * the streams of a driver without immediate lists); graph.c graphs. */
#ifndef ACG_BACKENDS_LEVEL_ZERO_LEVEL_ZERO_H
#define ACG_BACKENDS_LEVEL_ZERO_LEVEL_ZERO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include "acg-backend.h"
#include "acg-layer.h"
#include "entry_points.h"
#include "ze_ext.h"

/* One driver the loader reported, with what it offers beyond spec 1.4. */
typedef struct ze_drv {
    ze_driver_handle_t handle;
    ze_api_version_t api; /* zeDriverGetApiVersion */
    uint32_t version;     /* zeDriverGetProperties' driverVersion */
    bool in_order;        /* in-order command lists (api >= 1.7) */
    /* zeCommandListCreateImmediate unsupported: each stream is a command queue running regular
     * lists (queue mode), and what needs immediate lists (immediate append, host synchronize,
     * graph capture) is turned off */
    bool no_immediate;
    acg_ze_pfn_zeCommandListImmediateAppendCommandListsExp immediate_append; /* NULL: queue */
    acg_ze_pfn_zeCommandListHostSynchronize host_sync; /* spec 1.6; NULL: events only */
    /* the mutable command list extension; NULL: an update records the list again */
    acg_ze_pfn_zeCommandListGetNextCommandIdExp next_command_id;
    acg_ze_pfn_zeCommandListUpdateMutableCommandsExp update_commands;
    /* the record/replay graph extension: its spec 1.17 form, or (exp) the driver-experimental
     * form Intel's driver offered before, whose begin, end, instantiate and append take their
     * pNext elsewhere or as another type, so each form's are kept in their own type; graph.c
     * calls whichever is set. destroy NULL: no graphs of the driver's, they come from the
     * description (each device also needs the driver's immutable graphs, ze_device.native) */
    struct ze_graph_ext {
        bool exp;
        acg_ze_pfn_zeCommandListBeginGraphCaptureExt begin; /* the Ext form; NULL for exp */
        acg_ze_pfn_zeCommandListEndGraphCaptureExt end;
        acg_ze_pfn_zeGraphInstantiateExt instantiate;
        acg_ze_pfn_zeCommandListAppendGraphExt append;
        acg_ze_pfn_zeCommandListBeginGraphCaptureExp begin_exp; /* the Exp form; NULL for Ext */
        acg_ze_pfn_zeCommandListEndGraphCaptureExp end_exp;
        acg_ze_pfn_zeCommandListInstantiateGraphExp instantiate_exp;
        acg_ze_pfn_zeCommandListAppendGraphExp append_exp;
        /* both forms: the Exp functions have these very types (level_zero.c checks) */
        acg_ze_pfn_zeExecutableGraphDestroyExt destroy_exec;
        acg_ze_pfn_zeGraphDestroyExt destroy;
    } graph;
    /* Intel's driver-experimental query of a kernel parameter's size; NULL: only the count of
     * a kernel's parameters is checked when it is loaded */
    acg_ze_pfn_zexKernelGetArgumentSize arg_size;
    bool usable_mem;      /* ZE_extension_device_usablemem_size_properties: free memory is known */
    char extensions[200]; /* what acg uses that the driver offers, for the capability */
} ze_drv;

/* The loader: its entry points and the devices of every driver, in driver order. */
typedef struct ze_loader {
    void *handle;
#define ACG_ZE_FIELD_(name, pfn, required) ze_pfn##pfn##_t name;
    ACG_ZE_ENTRY_POINTS(ACG_ZE_FIELD_)
#undef ACG_ZE_FIELD_
    ze_drv *drivers; /* (n_drivers) */
    uint32_t n_drivers;
    struct {
        ze_drv *drv;
        ze_device_handle_t dev;
    } * devices; /* (n_devices) */
    uint32_t n_devices;
    char reason[256]; /* why the backend cannot run, when it cannot */
} ze_loader;

extern ze_loader acg__ze;

/* loader.c: the backend table's probe. Loads the loader and finds the devices once per process;
 * ACG_ERR_UNAVAILABLE with the reason where it cannot. */
acg_status acg__ze_probe(int *n, const char **reason);

/* The status a ze_result_t maps to, with the detail "<fn>: <call> failed with <name> (0x<code>)"
 * set (ZE_RESULT_SUCCESS: ACG_OK, nothing set). Out of memory → ACG_ERR_OUT_OF_MEMORY; a lost
 * device → ACG_ERR_DEVICE_LOST; an unsupported feature → ACG_ERR_UNSUPPORTED; anything else →
 * ACG_ERR_DEVICE. */
acg_status acg__ze_check(ze_result_t r, const char *fn, const char *call);
/* The name of a result code ("ZE_RESULT_ERROR_DEVICE_LOST"), or "a Level Zero error". */
const char *acg__ze_result_name(ze_result_t r);

/* Calls entry point `name_` of the loader and checks its result. */
#define ZE(fn_, name_, ...) acg__ze_check(acg__ze.name_(__VA_ARGS__), fn_, #name_)
/* Calls a release (destroy, free) of device dev_'s objects: one the driver refuses is counted,
 * and the context it belongs to is then left alone at device_close (destroying it would
 * destroy a context that is not empty). */
#define ZE_RELEASE(dev_, fn_, name_, ...)                                                          \
    acg__ze_release((dev_), acg__ze.name_(__VA_ARGS__), fn_, #name_)

/* A device's events come from pools of this many, host-visible, recycled through a free list. */
#define ACG_ZE_EVENTS_PER_POOL 64

/* An event of a pool, with what may still reference it once it is retired (an acg event
 * recorded again, a stream's synchronization): the streams that queued waits on it, up to the
 * serial of their work that did, and host threads waiting on it. */
typedef struct ze_slot {
    ze_event_handle_t ev;
    struct ze_waiter {
        struct ze_stream *stream;
        uint64_t serial;
    } * waiters; /* (n_waiters) */
    uint32_t n_waiters, cap_waiters;
    uint32_t host_waits;
    bool graph; /* a native graph's: signalled and reset by its replays, released with it */
} ze_slot;

typedef struct ze_device {
    ze_drv *drv;
    ze_device_handle_t dev;
    int index; /* in acg__ze.devices: the backend's device index */
    ze_context_handle_t ctx;
    uint32_t compute_ordinal; /* the command queue group that runs kernels */
    uint32_t max_group_size;
    /* graphs from the description are mutable lists: the driver has the extension, and the
     * device's mutable commands change kernel arguments, group counts and group sizes */
    bool mutable_lists;
    bool native;                     /* captures are recorded by the driver (the graph extension) */
    ze_command_queue_handle_t queue; /* replays where the driver cannot append lists */
    pthread_mutex_t lock;            /* modules, event pools, slots, queue */
    _Atomic uint32_t leaked;         /* releases the driver refused */
    struct ze_module {
        const void *image; /* the kernel definition's SPIR-V (the registry's copy) */
        size_t size;
        ze_module_handle_t module;
    } * modules; /* (n_modules) */
    uint32_t n_modules, cap_modules;
    ze_event_pool_handle_t *pools; /* (n_pools) */
    uint32_t n_pools, cap_pools;
    ze_slot **free_slots; /* (n_free) reset, ready for a new signal */
    uint32_t n_free, cap_free;
    ze_slot **retired; /* (n_retired) signalled or pending, maybe still referenced */
    uint32_t n_retired, cap_retired;
    ze_slot **all; /* (n_all) every slot, for device_close */
    uint32_t n_all, cap_all;
} ze_device;

/* A regular list of a stream in queue mode, with the fence of its executions on the stream's
 * queue. */
typedef struct ze_batch {
    ze_command_list_handle_t list;
    ze_fence_handle_t fence;
    uint64_t serial; /* the command it runs (the stream's serial), while pending */
    ze_slot *waited; /* the tail it waits on, while pending: retired once the list ended */
} ze_batch;

typedef struct ze_stream {
    ze_device *dev;
    /* immediate; in queue mode the open regular list between acg__ze_stream_begin and
     * acg__ze_stream_end, NULL otherwise */
    ze_command_list_handle_t list;
    pthread_mutex_t lock;      /* the list: appends and the serials */
    ze_slot *sync;             /* the stream's own event, for waits on the host */
    pthread_mutex_t sync_lock; /* sync, sync_armed */
    bool sync_armed;           /* a barrier that signals sync is queued, its end not seen */
    bool in_order;             /* the list runs its commands in order (else barriers do) */
    bool barrier;              /* the next command must wait for the previous ones (not in order) */
    uint64_t submitted;        /* serial of the latest command appended */
    uint64_t completed;        /* serial known to have completed */
    void *staging;             /* (staging_size) host memory of the driver's for pageable copies */
    size_t staging_size;
    void **aside; /* (n_aside) staging a copy may still use after a failed wait */
    uint32_t n_aside, cap_aside;
    ze_fence_handle_t fence; /* a replay on the device's queue that later work waits for */
    struct ze_exec *fence_exec;
    /* Queue mode (ze_drv.no_immediate): the stream's own queue runs one regular list per
     * command; each list starts with a wait on the event the one before signals at its end
     * (tail), so the order never rests on the queue. Under the stream's lock. */
    ze_command_queue_handle_t queue;
    ze_fence_handle_t list_fence; /* the open list's */
    ze_batch *pending;            /* (n_pending) executed, oldest first, their end not seen */
    ze_batch *idle;               /* (n_idle) reset, for the next commands */
    uint32_t n_pending, cap_pending, n_idle, cap_idle;
    uint32_t n_batches; /* every list the stream owns: each array has room for them all */
    ze_slot *tail;      /* the end of the latest list executed */
    bool fence_kept;    /* a fence the driver did not destroy: the queue stays too */
    const char *fn;     /* the command between begin and end, for the errors of end */
    /* A native capture (under the device's lock): the recording the list records into, whether
     * the driver forked the list into it (a wait on an event it recorded), and whether a failed
     * end left the driver recording what is appended (nothing can run on the list then). */
    struct ze_recording *rec;
    bool forked;
    ze_result_t stuck; /* what the failed end returned; ZE_RESULT_SUCCESS: not stuck */
} ze_stream;

/* A native capture: the streams recording into it (the origin first) and the events it took,
 * which the graph made from it keeps: its replays signal them and reset them at their end. */
typedef struct ze_recording {
    ze_device *dev;
    uint64_t id;         /* tells an event recorded in this capture from one of an earlier one */
    ze_stream **streams; /* (n_streams) */
    uint32_t n_streams, cap_streams;
    ze_slot **slots; /* (n_slots) */
    uint32_t n_slots, cap_slots;
} ze_recording;

typedef struct ze_kernel {
    ze_device *dev;
    const acg__kernel_def *def;
    ze_kernel_handle_t kernel;
    pthread_mutex_t lock; /* arguments are the kernel's state until the append takes them */
} ze_kernel;

/* One kernel parameter's value as zeKernelSetArgumentValue takes it (a buffer argument is
 * two: its allocation and a byte offset). */
#define ACG_ZE_MAX_PARAMS (2 * ACG_MAX_KERNEL_ARGS)
typedef struct ze_param {
    size_t size;
    unsigned char value[8];
} ze_param;

/* What a graph's list recorded for one node, to tell whether an update only changes what the
 * mutable command list extension can patch (kernel arguments and grids). */
typedef struct ze_recorded {
    acg_node_kind kind;
    uint64_t command_id; /* a kernel's, on a mutable list */
    const acg__kernel_def *def;
    void *dst;
    const void *src;
    size_t size;
    uint32_t pattern, pattern_size;
} ze_recorded;

/* A graph: the driver's executable graph from a native capture, with the events its replays
 * use; or the description recorded into one regular command list, closed once. */
typedef struct ze_exec {
    ze_device *dev;
    acg_ze_graph_handle_t graph;             /* native: what the capture recorded */
    acg_ze_executable_graph_handle_t xgraph; /* native: what replays run */
    ze_slot **slots;                         /* (n_slots) native: the recording's events */
    uint32_t n_slots;
    ze_command_list_handle_t list; /* from the description (native: NULL until an update) */
    ze_recorded *recorded;         /* (n_recorded) on a mutable list; NULL otherwise */
    uint32_t n_recorded;
    ze_slot *done;           /* the latest replay's end, appended to an immediate list */
    ze_fence_handle_t fence; /* the latest replay's end, executed on the device's queue */
    _Atomic bool fence_pending;
} ze_exec;

/* The core's backend types are these structs (device memory is the USM pointer itself); these
 * helpers are the only casts between them. */
static inline ze_device *acg__ze_dev(acg__bk_device *d) { return (ze_device *)d; }
static inline acg__bk_device *acg__ze_bk_dev(ze_device *d) { return (acg__bk_device *)d; }
static inline ze_stream *acg__ze_stream(acg__bk_stream *s) { return (ze_stream *)s; }
static inline acg__bk_stream *acg__ze_bk_stream(ze_stream *s) { return (acg__bk_stream *)s; }
static inline ze_kernel *acg__ze_kernel(acg__bk_kernel *k) { return (ze_kernel *)k; }
static inline ze_exec *acg__ze_exec(acg__bk_exec *e) { return (ze_exec *)e; }
static inline acg__bk_exec *acg__ze_bk_exec(ze_exec *e) { return (acg__bk_exec *)e; }
static inline void *acg__ze_mem(const acg__bk_mem *m) { return (void *)m; }

/* ZE_RELEASE's work: a refused release is counted in d->leaked, with the error set. */
void acg__ze_release(ze_device *d, ze_result_t r, const char *fn, const char *call);

/* Takes a reset event of the device (creating a pool when none is free). Under the device's
 * lock. */
acg_status acg__ze_slot_take(ze_device *d, ze_slot **out, const char *fn);
/* Gives back a slot taken but never appended (unsignalled, referenced by nothing). Under the
 * device's lock. */
void acg__ze_slot_unused(ze_device *d, ze_slot *s);
/* Retires a slot nothing new will signal: it returns to the free list once it is signalled and
 * every stream that waited on it passed that point. Under the device's lock. */
void acg__ze_slot_retire(ze_device *d, ze_slot *s);

/* Takes an event for a native capture's graph: the recording keeps it, and the graph made
 * from it after that. Takes the device's lock. */
acg_status acg__ze_recording_slot(ze_recording *r, ze_slot **out, const char *fn);
/* Gives a graph's events back to the device, reset (its last replay ended, or it never ran).
 * Takes the device's lock. */
void acg__ze_slots_release(ze_device *d, ze_slot **slots, uint32_t n);

/* Starts a command on the stream: takes its lock, waits for a replay the device's queue runs
 * for it, and appends the barrier that keeps a list without in-order execution in order (queue
 * mode: opens a list in s->list, which waits for the previous one first). acg__ze_stream_end
 * follows, whatever it returns. */
acg_status acg__ze_stream_begin(ze_stream *s, const char *fn);
/* Ends a command appended with status st: counts it, makes the next one wait for it, and
 * releases the stream's lock. In queue mode it executes the list (st ACG_OK) or resets it, and
 * fails when executing does. */
acg_status acg__ze_stream_end(ze_stream *s, acg_status st);

/* queue.c: queue mode (ze_drv.no_immediate), under the stream's lock. Opens a list for a command
 * in s->list, which first waits for the end of the list executed before it. */
acg_status acg__ze_queue_open(ze_stream *s, const char *fn);
/* Ends the open list: with st ACG_OK it is closed and executed on the stream's queue (failing
 * when that fails); otherwise it never ran and is kept for the next command. */
acg_status acg__ze_queue_submit(ze_stream *s, acg_status st);
/* Waits on the host for every list of the stream executed. */
acg_status acg__ze_queue_wait_all(ze_stream *s, const char *fn);
/* Releases the stream's lists, fences and queue; none is pending. */
void acg__ze_queue_free(ze_stream *s, const char *fn);

/* Waits on the host for the stream's work so far (and a replay queued for it). */
acg_status acg__ze_stream_drain(ze_stream *s, const char *fn);

/* The kernel parameters of a launch's arguments into out (ACG_ZE_MAX_PARAMS room); their count. */
uint32_t acg__ze_kernel_params(const acg__karg *args, uint32_t n_args, ze_param *out);
/* The group size along each dimension (dividing the grid) and the group count of a launch. */
void acg__ze_group_shape(const ze_kernel *k, const acg_dims *dims, uint32_t size[3],
                         ze_group_count_t *groups);
/* Sets the kernel's arguments and group size for a launch of dims (the kernel's lock held) and
 * gives the group count. */
acg_status acg__ze_kernel_prepare(ze_kernel *k, const acg_dims *dims, const acg__karg *args,
                                  uint32_t n_args, ze_group_count_t *groups, const char *fn);

/* stream.c: the slots of the backend table for streams, events, copies and fills. */
acg_status acg__ze_stream_create(acg__bk_device *dev, acg__bk_stream **out);
void acg__ze_stream_destroy(acg__bk_stream *stream);
acg_status acg__ze_stream_synchronize(acg__bk_stream *stream);
acg_status acg__ze_stream_query(acg__bk_stream *stream);
acg_status acg__ze_event_create(acg__bk_device *dev, acg__bk_event **out);
void acg__ze_event_destroy(acg__bk_event *event);
acg_status acg__ze_event_record(acg__bk_event *event, acg__bk_stream *stream);
acg_status acg__ze_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event);
acg_status acg__ze_event_query(acg__bk_event *event);
acg_status acg__ze_event_synchronize(acg__bk_event *event);
acg_status acg__ze_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            const void *src, size_t size, bool src_pinned);
acg_status acg__ze_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                            size_t size, bool dst_pinned);
acg_status acg__ze_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            acg__bk_mem *src, size_t src_off, size_t size);
acg_status acg__ze_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                        uint32_t pattern, uint32_t pattern_size);
acg_status acg__ze_stream_get_native(acg__bk_stream *stream, acg_native_handle *out);
/* Adds a pool of ACG_ZE_EVENTS_PER_POOL free events to the device. Under the device's lock. */
acg_status acg__ze_add_pool(ze_device *d, const char *fn);

/* graph.c */
acg_status acg__ze_capture_begin(acg__bk_stream *stream, acg__bk_recording **rec);
acg_status acg__ze_capture_join(acg__bk_recording *rec, acg__bk_stream *stream);
acg_status acg__ze_capture_end(acg__bk_recording *rec, acg__bk_exec **exec);
void acg__ze_capture_abort(acg__bk_recording *rec);
acg_status acg__ze_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                     acg__bk_exec **exec);
acg_status acg__ze_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream);
acg_status acg__ze_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc);
acg_status acg__ze_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old);
void acg__ze_graph_destroy(acg__bk_exec *exec);
acg_status acg__ze_graph_get_native(acg__bk_exec *exec, acg_native_handle *out);
/* Waits for the exec's latest replay on the device's queue (fence path), if one is pending. */
acg_status acg__ze_exec_wait_fence(ze_exec *e, const char *fn);

#endif /* ACG_BACKENDS_LEVEL_ZERO_LEVEL_ZERO_H */
