/* fake_ze_impl.h — the Level Zero test driver's objects and shared state, between its files.
 *
 * The driver stands in for a Level Zero GPU driver and runs on the host (fake_ze.c says what it
 * does and what it simplifies). One mutex, fake__g.lock, guards every table and every object
 * field below; it is never held while a kernel, a copy or a fill runs, so command lists run at
 * once. Functions named fake__* and the fake_ze* entry points are shared between the driver's
 * files and hidden from its users; "(lock held)" says a function expects the mutex taken, and
 * says so when it lets go of it for a while (a wait, a run).
 */
#ifndef ACG_TESTS_ZE_DRIVER_FAKE_ZE_IMPL_H
#define ACG_TESTS_ZE_DRIVER_FAKE_ZE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include "acg/acg.h"
#include "backends/level_zero/entry_points.h"
#include "backends/level_zero/ze_ext.h" /* what Debian's spec 1.4 headers lack */
#include "fake_common.h" /* tests/driver_common: containers, the call ledger, knobs */

/* Devices the driver can pretend to have (ACGTEST_ZE_DEVICES is clamped to it). */
#define FAKE_MAX_DEVICES 4

/* ---- entry points ------------------------------------------------------------------------- */

/* X(pfn, table, slot): every core entry point ze<pfn> this driver implements, served in the DDI
 * table ze_<table>_dditable_t at pfn<slot>; ze_pfn<pfn>_t is its type (its declaration takes it,
 * below; fake_ze.c checks the slot). It serves only those of
 * src/backends/level_zero/entry_points.h, and each of those must be here with the same pfn, or
 * fake_ze.c does not compile: a backend needing a new entry point needs it here first. */
#define FAKE_ENTRY_POINTS(X)                                                                       \
    X(Init, global, Init)                                                                          \
    X(DriverGet, driver, Get)                                                                      \
    X(DriverGetApiVersion, driver, GetApiVersion)                                                  \
    X(DriverGetProperties, driver, GetProperties)                                                  \
    X(DriverGetExtensionProperties, driver, GetExtensionProperties)                                \
    X(DriverGetExtensionFunctionAddress, driver, GetExtensionFunctionAddress)                      \
    X(DeviceGet, device, Get)                                                                      \
    X(DeviceGetProperties, device, GetProperties)                                                  \
    X(DeviceGetComputeProperties, device, GetComputeProperties)                                    \
    X(DeviceGetMemoryProperties, device, GetMemoryProperties)                                      \
    X(DeviceGetCommandQueueGroupProperties, device, GetCommandQueueGroupProperties)                \
    X(DeviceGetStatus, device, GetStatus)                                                          \
    X(ContextCreate, context, Create)                                                              \
    X(ContextDestroy, context, Destroy)                                                            \
    X(CommandQueueCreate, command_queue, Create)                                                   \
    X(CommandQueueDestroy, command_queue, Destroy)                                                 \
    X(CommandQueueExecuteCommandLists, command_queue, ExecuteCommandLists)                         \
    X(CommandQueueSynchronize, command_queue, Synchronize)                                         \
    X(CommandListCreate, command_list, Create)                                                     \
    X(CommandListCreateImmediate, command_list, CreateImmediate)                                   \
    X(CommandListDestroy, command_list, Destroy)                                                   \
    X(CommandListClose, command_list, Close)                                                       \
    X(CommandListReset, command_list, Reset)                                                       \
    X(CommandListAppendBarrier, command_list, AppendBarrier)                                       \
    X(CommandListAppendMemoryCopy, command_list, AppendMemoryCopy)                                 \
    X(CommandListAppendMemoryFill, command_list, AppendMemoryFill)                                 \
    X(CommandListAppendLaunchKernel, command_list, AppendLaunchKernel)                             \
    X(CommandListAppendSignalEvent, command_list, AppendSignalEvent)                               \
    X(CommandListAppendWaitOnEvents, command_list, AppendWaitOnEvents)                             \
    X(CommandListAppendEventReset, command_list, AppendEventReset)                                 \
    X(EventPoolCreate, event_pool, Create)                                                         \
    X(EventPoolDestroy, event_pool, Destroy)                                                       \
    X(EventCreate, event, Create)                                                                  \
    X(EventDestroy, event, Destroy)                                                                \
    X(EventHostSynchronize, event, HostSynchronize)                                                \
    X(EventQueryStatus, event, QueryStatus)                                                        \
    X(EventHostReset, event, HostReset)                                                            \
    X(FenceCreate, fence, Create)                                                                  \
    X(FenceDestroy, fence, Destroy)                                                                \
    X(FenceHostSynchronize, fence, HostSynchronize)                                                \
    X(FenceReset, fence, Reset)                                                                    \
    X(FenceQueryStatus, fence, QueryStatus)                                                        \
    X(MemAllocDevice, mem, AllocDevice)                                                            \
    X(MemAllocHost, mem, AllocHost)                                                                \
    X(MemFree, mem, Free)                                                                          \
    X(ModuleCreate, module, Create)                                                                \
    X(ModuleDestroy, module, Destroy)                                                              \
    X(ModuleBuildLogDestroy, module_build_log, Destroy)                                            \
    X(ModuleBuildLogGetString, module_build_log, GetString)                                        \
    X(KernelCreate, kernel, Create)                                                                \
    X(KernelDestroy, kernel, Destroy)                                                              \
    X(KernelSetArgumentValue, kernel, SetArgumentValue)                                            \
    X(KernelSetGroupSize, kernel, SetGroupSize)                                                    \
    X(KernelGetProperties, kernel, GetProperties)

/* X(name, extension, minor): the functions zeDriverGetExtensionFunctionAddress serves, of the
 * type acg_ze_pfn_<name> the backend declares (ze_ext.h); `extension` is the fake_ext that must
 * be offered at version 1.<minor> or later, FAKE_EXT_CORE_1_6 for a core function of spec 1.6
 * (served when the API version is at least 1.6), or FAKE_EXT_DRIVER_EXPERIMENTAL for one of
 * Intel's driver-experimental functions (zex*, served always, as Intel's driver serves them
 * without listing an extension). */
#define FAKE_EXT_FUNCTIONS(X)                                                                      \
    X(zeCommandListHostSynchronize, FAKE_EXT_CORE_1_6, 0)                                          \
    X(zeCommandListImmediateAppendCommandListsExp, FAKE_EXT_IMMEDIATE_APPEND, 0)                   \
    X(zeCommandListGetNextCommandIdExp, FAKE_EXT_MUTABLE, 0)                                       \
    X(zeCommandListUpdateMutableCommandsExp, FAKE_EXT_MUTABLE, 0)                                  \
    X(zeCommandListUpdateMutableCommandSignalEventExp, FAKE_EXT_MUTABLE, 0)                        \
    X(zeCommandListUpdateMutableCommandWaitEventsExp, FAKE_EXT_MUTABLE, 0)                         \
    X(zeCommandListGetNextCommandIdWithKernelsExp, FAKE_EXT_MUTABLE, 1)                            \
    X(zeCommandListUpdateMutableCommandKernelsExp, FAKE_EXT_MUTABLE, 1)                            \
    X(zeCommandListBeginGraphCaptureExt, FAKE_EXT_GRAPH, 0)                                        \
    X(zeCommandListEndGraphCaptureExt, FAKE_EXT_GRAPH, 0)                                          \
    X(zeCommandListIsGraphCaptureEnabledExt, FAKE_EXT_GRAPH, 0)                                    \
    X(zeGraphInstantiateExt, FAKE_EXT_GRAPH, 0)                                                    \
    X(zeCommandListAppendGraphExt, FAKE_EXT_GRAPH, 0)                                              \
    X(zeExecutableGraphDestroyExt, FAKE_EXT_GRAPH, 0)                                              \
    X(zeGraphDestroyExt, FAKE_EXT_GRAPH, 0)                                                        \
    X(zeCommandListBeginGraphCaptureExp, FAKE_EXT_GRAPH_EXP, 0)                                    \
    X(zeCommandListEndGraphCaptureExp, FAKE_EXT_GRAPH_EXP, 0)                                      \
    X(zeCommandListIsGraphCaptureEnabledExp, FAKE_EXT_GRAPH_EXP, 0)                                \
    X(zeCommandListInstantiateGraphExp, FAKE_EXT_GRAPH_EXP, 0)                                     \
    X(zeCommandListAppendGraphExp, FAKE_EXT_GRAPH_EXP, 0)                                          \
    X(zeExecutableGraphDestroyExp, FAKE_EXT_GRAPH_EXP, 0)                                          \
    X(zeGraphDestroyExp, FAKE_EXT_GRAPH_EXP, 0)                                                    \
    X(zexKernelGetArgumentSize, FAKE_EXT_DRIVER_EXPERIMENTAL, 0)

/* One index per implemented entry point, core then extension, for call counts, injection and
 * hiding. */
enum fake_ep {
#define FAKE_EP_ENUM(ep, table, slot) FAKE_EP_ze##ep,
    FAKE_ENTRY_POINTS(FAKE_EP_ENUM)
#undef FAKE_EP_ENUM
#define FAKE_EXT_ENUM(name, ext, minor) FAKE_EP_##name,
        FAKE_EXT_FUNCTIONS(FAKE_EXT_ENUM)
#undef FAKE_EXT_ENUM
            FAKE_EP_COUNT
};

/* The extensions the driver implements (fake_ze.c has their names and versions). */
enum fake_ext {
    FAKE_EXT_IMMEDIATE_APPEND, /* ZE_experimental_immediate_command_list_append 1.0 */
    FAKE_EXT_MUTABLE,          /* ZE_experimental_mutable_command_list 1.1 */
    FAKE_EXT_GRAPH,            /* ZE_extension_record_replay_graph 1.0 */
    FAKE_EXT_GRAPH_EXP,        /* ZE_experimental_record_replay_graph 1.0 (not by default) */
    FAKE_EXT_USABLE_MEM,       /* ZE_extension_device_usablemem_size_properties 1.0 */
    FAKE_EXT_COUNT,
    FAKE_EXT_CORE_1_6 = -1,            /* not an extension: core since spec 1.6 */
    FAKE_EXT_DRIVER_EXPERIMENTAL = -3, /* not an extension: Intel's zex* functions */
};

/* The extensions' names and the versions implemented (ACGTEST_ZE_EXTENSIONS may offer less),
 * and whether one is offered without ACGTEST_ZE_EXTENSIONS. */
struct fake_ext_info {
    const char *name;
    uint32_t version;
    int by_default;
};
extern const struct fake_ext_info fake__exts[FAKE_EXT_COUNT];
/* Whether extension function `name` is served now (its extension offered, or its API version
 * reached, and it is not hidden): SUCCESS with its address in *out, else INVALID_ARGUMENT with
 * NULL, as Intel's driver answers. */
ze_result_t fake__ext_function(const char *name, void **out);

/* Counts a call of entry point `ep` and returns the code an injected failure makes it return,
 * or ZE_RESULT_SUCCESS to go on. Every entry point starts with FAKE_ENTER. */
ze_result_t fake__enter(enum fake_ep ep);
#define FAKE_ENTER(name) FAKE_LEDGER_ENTER(fake__enter, FAKE_EP_##name)

/* The environment knobs, read once (fake_ze.c); read-only afterwards. */
struct fake_config {
    int devices;                         /* ACGTEST_ZE_DEVICES */
    uint32_t api_version;                /* ACGTEST_ZE_API_VERSION, ZE_MAKE_VERSION form */
    size_t mem_bytes;                    /* ACGTEST_ZE_MEM_MB, per device */
    ze_result_t init_fail;               /* ACGTEST_ZE_INIT_FAIL */
    char hidden[FAKE_EP_COUNT];          /* ACGTEST_ZE_HIDE */
    uint32_t extensions[FAKE_EXT_COUNT]; /* ACGTEST_ZE_EXTENSIONS: the version offered, 0 none */
};
extern struct fake_config fake__cfg;

/* The small containers (struct fake_vec) are tests/driver_common's. */

/* ---- objects ------------------------------------------------------------------------------- */

/* The kinds of handle the driver hands out and keeps a live set of. */
enum fake_kind {
    FAKE_CONTEXT,
    FAKE_QUEUE,
    FAKE_LIST,
    FAKE_POOL,
    FAKE_EVENT,
    FAKE_FENCE,
    FAKE_MODULE,
    FAKE_LOG,
    FAKE_KERNEL,
    FAKE_GRAPH,      /* a recorded graph (acg_ze_graph_handle_t) */
    FAKE_EXEC_GRAPH, /* an executable graph (acg_ze_executable_graph_handle_t) */
    FAKE_KIND_COUNT,
};

/* The head of every object. A serial tells a live object from a later one at the same address
 * (a command recorded before a destroy checks it at execution). */
struct fake_obj {
    enum fake_kind kind;
    uint64_t serial;
    long pending; /* queued or running commands that use it (for a regular list: executions) */
    /* Host threads waiting on it. A wait on an immediate list's own queue counts on the list,
     * the handle (queue_wait in fake_list.c): that queue's obj is unused. */
    long waiters;
};

/* A reference a command holds to an object, checked alive by membership and serial. */
struct fake_ref {
    struct fake_obj *obj; /* NULL: none */
    enum fake_kind kind;
    uint64_t serial;
};

struct fake_driver {
    int unused;
};

struct fake_device {
    int index;
    size_t allocated; /* bytes of live device allocations */
    int lost;         /* acgtest_ze_set_lost's mode: 0 healthy */
};

/* The command queue groups of every device, in ordinal order: one that runs everything, one
 * that only copies and fills. */
enum { FAKE_GROUP_COMPUTE, FAKE_GROUP_COPY, FAKE_GROUP_COUNT };
struct fake_group {
    ze_command_queue_group_property_flags_t flags;
    size_t max_pattern; /* maxMemoryFillPatternSize */
    uint32_t queues;    /* numQueues */
};
extern const struct fake_group fake__groups[FAKE_GROUP_COUNT];

struct fake_context {
    struct fake_obj obj;
};

/* A host thread running commands in order: an immediate list's or a queue's. */
struct fake_engine {
    const char *what;              /* "immediate command list" or "command queue", for messages */
    const struct fake_device *dev; /* whose work it runs: none once the device is lost */
    struct fake_worker worker;     /* its jobs: struct fake_queued */
};

/* What one command does. */
enum fake_cmd_kind {
    FAKE_CMD_BARRIER, /* waits and signal only */
    FAKE_CMD_COPY,
    FAKE_CMD_FILL,
    FAKE_CMD_KERNEL,
    FAKE_CMD_RESET,   /* an event back to not signalled */
    FAKE_CMD_EXECUTE, /* regular lists run in order (a queue's execution, an immediate append) */
    FAKE_CMD_GRAPH, /* an executable graph's commands run in order (zeCommandListAppendGraphExt) */
};

/* Parameters of a kernel's OpenCL C signature: a buffer argument is two (a global pointer and
 * a ulong byte offset), a scalar one. */
#define FAKE_MAX_PARAMS (2 * ACG_MAX_KERNEL_ARGS)

/* The largest fill pattern (the compute group's maxMemoryFillPatternSize). */
#define FAKE_MAX_PATTERN 128

/* What a launch of a kernel runs with, as zeKernelSetArgumentValue and zeKernelSetGroupSize left
 * it: a kernel holds the one its next launch takes; a kernel command holds a copy of its own,
 * which a mutable list's update changes. */
struct fake_launch {
    acg_kernel_cpu_fn fn; /* the cpu code run in the kernel's place */
    uint32_t n_args;      /* that code's arguments, and their types */
    acg_arg_type types[ACG_MAX_KERNEL_ARGS];
    uint32_t n_params;                         /* the SPIR-V function's parameters */
    unsigned char param_size[FAKE_MAX_PARAMS]; /* and their sizes (struct fake_entry) */
    unsigned char params[FAKE_MAX_PARAMS][8];  /* values set, little end first */
    uint32_t set;      /* bit p: parameter p has a value (a kernel switch clears them) */
    uint32_t group[3]; /* the group size; 1, 1, 1 for a new kernel */
};

/* A command: appended to an immediate list (a job of its engine), recorded in a regular list,
 * or the execution of regular lists. Everything it needs is copied in when it is appended, as
 * the specification says for kernel arguments. */
struct fake_cmd {
    enum fake_cmd_kind kind;
    const char *entry; /* the entry point that appended it, for messages */
    /* A command of a mutable list taken with zeCommandListGetNextCommandIdExp: its id, what it
     * may change (acg_ze_mutable_command_exp_flags_t), and the kernels it may switch to. */
    uint64_t id; /* 0: not mutable */
    uint32_t mutable_flags;
    uint32_t n_kernels;
    struct fake_ref *kernels; /* (n_kernels) */
    struct fake_ref signal;   /* the event signalled when it completes */
    uint32_t n_waits;
    struct fake_ref *waits; /* (n_waits) events it waits for before it starts */
    union {
        struct {
            uintptr_t dst, src;
            size_t bytes;
        } copy;
        struct {
            uintptr_t dst;
            size_t bytes;
            size_t pattern_size;
            unsigned char pattern[FAKE_MAX_PATTERN];
        } fill;
        struct {
            struct fake_ref kernel, module;
            struct fake_launch launch; /* as appended (or updated) */
            uint32_t count[3];         /* the group count */
            /* What runs, made from the above by fake__kernel_build. */
            acg_cpu_arg args[ACG_MAX_KERNEL_ARGS]; /* a buffer's pointer plus its offset */
            uint32_t global[3];                    /* group count times group size */
        } kernel;
        struct {
            struct fake_ref event;
        } reset;
        struct {
            uint32_t n_lists;
            struct fake_ref *lists; /* (n_lists) regular lists, closed */
            struct fake_ref fence;  /* signalled once every list ran */
        } exec;
        struct {
            struct fake_ref exec; /* the executable graph replayed */
        } graph;
    } u;
};

/* A command queued on an engine. */
struct fake_queued {
    struct fake_job job;
    struct fake_cmd cmd;
};

struct fake_list {
    struct fake_obj obj; /* pending: executions of this regular list in flight */
    struct fake_context *ctx;
    struct fake_device *dev;
    uint32_t ordinal; /* its command queue group */
    int immediate;
    uint32_t flags; /* ze_command_list_flags_t, or an immediate list's ze_command_queue_flags_t */
    /* A regular list: its commands, and whether it is closed. */
    int closed;
    struct fake_cmd *cmds; /* (n_cmds) */
    size_t n_cmds, cap_cmds;
    /* A mutable regular list (ZE_experimental_mutable_command_list): the id the next command
     * appended takes (0: none asked for), with its flags and kernels, and the last id given. */
    int mutable_;
    uint64_t next_id, last_id;
    uint32_t next_flags;
    uint32_t n_next_kernels;
    struct fake_ref *next_kernels; /* (n_next_kernels) */
    /* An immediate list: the command queue of its own that runs its commands (never a handle:
     * not live, not in fake__g.objs). */
    struct fake_queue *queue;
    /* An immediate list capturing (ZE_extension_record_replay_graph): the graph its appends are
     * recorded into instead of run, or NULL. A capturing list and its graph are never
     * destroyed, so the pointer stays good until the capture ends and clears it. */
    struct fake_graph *capture;
};

/* A command queue: a handle (zeCommandQueueCreate), or an immediate list's own. */
struct fake_queue {
    struct fake_obj obj; /* an immediate list's: unused, the list is the handle */
    struct fake_context *ctx;
    struct fake_device *dev;
    ze_command_queue_desc_t desc; /* as it was created (its pNext not kept) */
    long fences;                  /* live fences created from it */
    struct fake_engine engine;
};

struct fake_pool {
    struct fake_obj obj;
    struct fake_context *ctx;
    ze_event_pool_flags_t flags;
    uint32_t devices; /* bit i: device i may use its events (every device when none was named) */
    uint32_t count;
    long events;              /* live events created from it */
    struct fake_event **slot; /* (count) the live event at each index, or NULL */
};

struct fake_event {
    struct fake_obj obj;
    struct fake_pool *pool;
    uint32_t index;
    int signalled;
    /* The graph whose capture recorded the latest command appended to signal it, or none: an
     * eager signal appended since clears it. It matters only while that graph still captures
     * (a wait on the event forks into that capture), so it is a reference, checked alive. */
    struct fake_ref capture;
};

struct fake_fence {
    struct fake_obj obj;
    struct fake_queue *queue;
    int signalled;
};

/* A kernel of a module: an OpEntryPoint of its SPIR-V, with the parameters of the OpFunction it
 * names (OpFunctionParameter), each one's size from its type: a pointer 8 bytes in a Physical64
 * module (4 in Physical32), an OpTypeInt or OpTypeFloat its width, anything else 0. */
struct fake_entry {
    char *name;
    uint32_t function; /* the OpFunction's id */
    int defined;       /* that OpFunction was found */
    uint32_t n_params;
    unsigned char param_size[FAKE_MAX_PARAMS];
};

struct fake_module {
    struct fake_obj obj;
    struct fake_context *ctx;
    struct fake_device *dev;
    long kernels;               /* live kernels created from it */
    struct fake_entry *entries; /* (n_entries) its SPIR-V's kernels */
    size_t n_entries;
};

struct fake_log {
    struct fake_obj obj;
    char *text;
};

struct fake_kernel {
    struct fake_obj obj;
    struct fake_module *module;
    char *name;
    struct fake_launch launch; /* what its next launch takes */
};

/* A command recorded by a capture, with the list it was appended to: an index into its
 * graph's `lists`, the primary list 0. */
struct fake_rec {
    struct fake_cmd cmd;
    uint32_t list;
};

/* A graph (ZE_extension_record_replay_graph): made by zeCommandListBeginGraphCaptureExt, it
 * records every command appended to the lists capturing into it, in one order across them,
 * until zeCommandListEndGraphCaptureExt on its primary list. */
struct fake_graph {
    struct fake_obj obj;
    struct fake_context *ctx; /* its primary list's */
    int capturing;
    struct fake_vec lists; /* while capturing: struct fake_list *, the primary first, then forks */
    struct fake_rec *recs; /* (n_recs) in append order */
    size_t n_recs, cap_recs;
};

/* An executable graph (zeGraphInstantiateExt): a copy of its graph's commands of its own, so
 * that it outlives the graph. */
struct fake_exec_graph {
    struct fake_obj obj; /* pending: replays of it queued or running */
    struct fake_context *ctx;
    struct fake_cmd *cmds; /* (n_cmds) in recorded order */
    size_t n_cmds;
};

/* A live allocation (zeMemAllocDevice, zeMemAllocHost). */
struct fake_range {
    uintptr_t base;
    size_t size;
    struct fake_context *ctx;
    struct fake_device *dev; /* NULL: host memory */
    long busy;               /* commands running on it right now */
};

/* ---- shared state -------------------------------------------------------------------------- */

struct fake_state {
    pthread_mutex_t lock;
    pthread_cond_t progress; /* broadcast when a job finishes, an event or fence is signalled */
    int initialized;         /* zeInit succeeded */
    int unloading;           /* the library is going: workers skip what is left */
    uint64_t next_serial;
    struct fake_driver driver;
    struct fake_device devices[FAKE_MAX_DEVICES];
    struct fake_vec objs[FAKE_KIND_COUNT];              /* live handles of each kind */
    struct fake_vec ranges;                             /* struct fake_range *, live allocations */
    const acg_kernel_desc *(*lookup)(const char *name); /* acgtest_ze_bind_kernels */
};
extern struct fake_state fake__g;

/* ---- shared helpers ------------------------------------------------------------------------ */

/* Says on stderr that the caller misused the API ("fn: ..."), counts it in
 * acgtest_ze_violations. */
void fake__violation(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Says what a GPU would fault on, and aborts: the test cannot go on meaningfully. */
_Noreturn void fake__fault(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* r, the checks so far, or INVALID_NULL_POINTER when they passed and there is no `out` to answer
 * in. */
static inline ze_result_t fake__given(ze_result_t r, const void *out) {
    return r == ZE_RESULT_SUCCESS && out == NULL ? ZE_RESULT_ERROR_INVALID_NULL_POINTER : r;
}
/* (lock held) UNINITIALIZED before zeInit, else SUCCESS. */
ze_result_t fake__ready(void);
/* The start of most entry points, after FAKE_ENTER: takes fake__g.lock (held on return, whatever
 * the result), then fake__ready and fake__lookup. */
ze_result_t fake__lock_object(enum fake_kind kind, const void *h, const char *fn, void **out);
/* The start of a creation on a device, after FAKE_ENTER: fake__lock_object for the context, then
 * the device (fake__device). */
ze_result_t fake__lock_context_device(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                      const char *fn, struct fake_context **ctx,
                                      struct fake_device **dev);
/* The start of a creation from a descriptor, after FAKE_ENTER: fake__lock_object for the parent
 * object h of `kind` (*parent), then INVALID_NULL_POINTER without the descriptor or the
 * out-pointer, then the descriptor's stype (fake__stype, naming it "desc"). */
ze_result_t fake__lock_creation(enum fake_kind kind, const void *h, const void *desc,
                                ze_structure_type_t stype, const void *out, const char *fn,
                                void **parent);
/* The end of an entry point that took fake__g.lock: lets go of it and returns r. */
ze_result_t fake__unlock(ze_result_t r);
/* A destroy, after FAKE_ENTER: the live object of `kind` that h is (fake__lock_object), refused
 * while `busy` (optional) says it is in use (busy reports the violation, for fn; the result is
 * HANDLE_OBJECT_IN_USE), else freed by free_fn; the result reports the lost state of the devices it
 * belongs to (fake__released: a context's, a graph's and an executable graph's are any device's,
 * a build log's none). */
ze_result_t fake__destroy(enum fake_kind kind, const void *h, const char *fn,
                          int (*busy)(void *obj, const char *fn), void (*free_fn)(void *obj));
/* (lock held) The live object of `kind` that handle h is: INVALID_NULL_HANDLE for NULL; a
 * handle that is not live (destroyed, never created, or of another kind) is a violation
 * reported for `fn`, and INVALID_ARGUMENT. */
ze_result_t fake__lookup(enum fake_kind kind, const void *h, const char *fn, void **out);
/* (lock held) The device of handle h, or INVALID_NULL_HANDLE / INVALID_ARGUMENT. */
ze_result_t fake__device(ze_device_handle_t h, struct fake_device **out);
/* Counts user-visible objects made (delta 1) or released (-1), for acgtest_ze_live. */
void fake__live(long delta);
/* (lock held) Makes obj live: a serial, its set, the live count. -1 when out of memory. */
int fake__obj_add(struct fake_obj *obj, enum fake_kind kind);
/* (lock held) A zeroed object of `size` bytes, which begin with its struct fake_obj, made live as
 * `kind`: NULL when out of memory. */
void *fake__obj_new(size_t size, enum fake_kind kind);
/* (lock held) Forgets a live object (the caller frees it). */
void fake__obj_remove(struct fake_obj *obj);
/* (lock held) Frees every live object of `kind` with free_fn, the newest first (at unload). */
void fake__free_all(enum fake_kind kind, void (*free_fn)(void *obj));
/* A reference to obj (NULL: none). */
struct fake_ref fake__ref(struct fake_obj *obj);
/* (lock held) Whether the object a reference names is still the one it named. */
int fake__ref_alive(const struct fake_ref *ref);
/* The name of a kind, for messages ("event"). */
const char *fake__kind_name(enum fake_kind kind);
/* Checks a descriptor's or a property struct's stype: INVALID_NULL_POINTER when there is no
 * struct, INVALID_ARGUMENT with a message when its stype is not `want`. */
ze_result_t fake__stype(const void *s, ze_structure_type_t want, const char *fn, const char *what);

/* (lock held; waits) Waits on fake__g.progress until `deadline` (from fake__deadline); returns
 * nonzero once it has passed. */
int fake__wait(const struct timespec *deadline);
/* The deadline `timeout_ns` from now: UINT64_MAX is never (NULL deadline, returned through
 * *forever), 0 is now. */
void fake__deadline(uint64_t timeout_ns, struct timespec *deadline, int *forever);
/* (lock held; waits) Waits until *counter reaches target or the timeout passes: SUCCESS or
 * NOT_READY; DEVICE_LOST once dev (the engine's device) is lost, reached or not. */
ze_result_t fake__wait_counter(const uint64_t *counter, uint64_t target, uint64_t timeout_ns,
                               const struct fake_device *dev);

/* Lost devices (acgtest_ze_set_lost). (lock held) Whether a device of the bit mask (bit i:
 * device i) is lost. */
int fake__lost(uint32_t devices);
/* The bit of dev in such a mask. */
static inline uint32_t fake__bit(const struct fake_device *dev) { return 1u << dev->index; }
/* (lock held) What a release of an object of the masked devices returns once it released it:
 * DEVICE_LOST where one of them is lost in the mode whose releases report it, else SUCCESS. */
ze_result_t fake__released(uint32_t devices);
/* Every device's bit. */
#define FAKE_ALL_DEVICES ((1u << FAKE_MAX_DEVICES) - 1)

/* Memory (fake_memory.c). (lock held) The live allocation holding [addr, addr + bytes), or
 * NULL; bytes 0 asks for addr inside or at the end of one. */
struct fake_range *fake__range_find(uintptr_t addr, size_t bytes);
/* (lock held) Frees every allocation of `ctx` (its destroy); returns how many. */
long fake__ranges_reclaim(struct fake_context *ctx);

/* Events (fake_event.c). (lock held) The live event handle h as a command's signal (optional)
 * or wait: INVALID_NULL_HANDLE, INVALID_ARGUMENT, or INVALID_SYNCHRONIZATION_OBJECT for an event
 * of another context than the list's. */
ze_result_t fake__event_ref(ze_event_handle_t h, struct fake_context *ctx, const char *fn,
                            struct fake_ref *out);
/* (lock held) A command's wait list: phWaitEvents checked as above, copied into cmd, which owns
 * the copy from the start (fake__cmd_free frees it, after a failure too). */
ze_result_t fake__wait_refs(uint32_t n, ze_event_handle_t *events, struct fake_context *ctx,
                            const char *fn, struct fake_cmd *cmd);
/* (lock held) Frees every pool, event and fence at unload. */
void fake__events_unload(void);

/* Workers (fake_run.c). (lock held) Starts an engine's worker for device dev's work:
 * OUT_OF_HOST_MEMORY when it cannot. `what` names the engine's owner in messages. */
ze_result_t fake__engine_start(struct fake_engine *e, const char *what,
                               const struct fake_device *dev);
/* (lock held; lets go while it joins) Stops an idle engine's worker and joins it. */
void fake__engine_stop(struct fake_engine *e);
/* (lock held) Queues cmd, taking what it owns whatever happens, and holds the objects it uses
 * until it completes; *seq is the engine's `completed` count once it has. */
ze_result_t fake__engine_submit(struct fake_engine *e, struct fake_cmd *cmd, uint64_t *seq);
/* (lock held) The first reference of cmd (the commands of the lists it executes included) to an
 * object destroyed since it was appended, or NULL. */
const struct fake_ref *fake__cmd_dead_ref(const struct fake_cmd *cmd);
/* (lock held) Frees what a command owns. */
void fake__cmd_free(struct fake_cmd *cmd);
/* (lock held; lets go while it joins) At unload: stops every worker (they skip what is left)
 * and joins it. */
void fake__workers_stop(void);
/* Mutable lists (fake_mutable.c). Whether a list descriptor's pNext chain asks for a mutable
 * list (and the extension is offered). */
int fake__mutable_requested(const ze_command_list_desc_t *desc);
/* (lock held) Gives the command about to be appended to l the id taken for it, if any. */
void fake__mutable_assign(struct fake_list *l, struct fake_cmd *cmd);
/* Fills the extension's properties where a ze_device_properties_t's pNext chain has them (when
 * it is offered). */
void fake__mutable_properties(ze_device_properties_t *props);
/* Command lists and queues (fake_list.c). (lock held; may wait) Appends a filled command to a
 * live list, open if regular: an immediate list queues it (and waits for it in synchronous
 * mode) unless a capture records it, a regular one records it. Takes what the command owns,
 * whatever happens. */
ze_result_t fake__append(struct fake_list *l, struct fake_cmd *cmd);
/* (lock held) The signal event (optional) and wait list most appends take, into cmd (for its
 * entry point's messages). */
ze_result_t fake__sync_args(struct fake_list *l, ze_event_handle_t signal, uint32_t n_waits,
                            ze_event_handle_t *waits, struct fake_cmd *cmd);
/* (lock held) Frees every list and queue at unload, after fake__workers_stop and once no fence
 * is left. */
void fake__lists_unload(void);

/* Graphs (fake_graph.c). (lock held) What becomes of a command appended to immediate list l:
 * recorded into the capture l is in, or forks into (a wait on an event a capture signals),
 * *recorded 1 and the command taken; or to be queued, *recorded 0, the events it signals no
 * longer a capture's. An error (a merge of captures, a command a capture cannot record) frees
 * the command. */
ze_result_t fake__graph_record(struct fake_list *l, struct fake_cmd *cmd, int *recorded);
/* (lock held) A command about to run eagerly: the events it signals (those of the lists it
 * executes, of the graph it replays, included) are no longer signalled by a capture. */
void fake__graph_eager(const struct fake_cmd *cmd);
/* (lock held) The graph a reference names if it is alive and still capturing, else NULL. */
struct fake_graph *fake__graph_capturing(const struct fake_ref *ref);
/* (lock held) At the start of a replay (a FAKE_CMD_GRAPH about to run its commands): reports
 * each event a recorded command signals that is signalled already. */
void fake__graph_replay_check(const struct fake_cmd *cmd);
/* Fills the extension's properties where a ze_device_properties_t's pNext chain has them, under
 * the stype of each form of it offered. */
void fake__graph_properties(ze_device_properties_t *props);
/* (lock held) Frees every graph and executable graph at unload, after fake__workers_stop. */
void fake__graphs_unload(void);

/* Modules and kernels (fake_module.c). (lock held) Fills a kernel command from a kernel's
 * current launch and a group count. */
ze_result_t fake__kernel_cmd(struct fake_kernel *k, const ze_group_count_t *groups, const char *fn,
                             struct fake_cmd *cmd);
/* Sets a kernel command's group count. */
void fake__kernel_count(struct fake_cmd *cmd, const ze_group_count_t *groups);
/* (lock held) Makes cmd launch kernel k as it is set now (the group count is left as it is): a
 * launch's start, and a mutable command's kernel switch. */
void fake__kernel_take(struct fake_cmd *cmd, const struct fake_kernel *k);
/* Sets parameter `index` of a launch to `size` bytes of value (NULL: a null pointer, for a
 * pointer parameter only), with zeKernelSetArgumentValue's codes: INVALID_KERNEL_ARGUMENT_INDEX,
 * INVALID_KERNEL_ARGUMENT_SIZE, INVALID_ARGUMENT. */
ze_result_t fake__launch_param(struct fake_launch *a, uint32_t index, size_t size,
                               const void *value);
/* Sets a launch's group size, within the device's limits (zeDeviceGetComputeProperties: 1024
 * along each dimension and in all): INVALID_GROUP_SIZE_DIMENSION otherwise. */
ze_result_t fake__launch_group(struct fake_launch *a, uint32_t x, uint32_t y, uint32_t z);
/* Whether every parameter of a kernel command has a value. */
int fake__kernel_args_set(const struct fake_cmd *cmd);
/* (lock held) Makes a kernel command's args and global sizes from its parameters, group size
 * and count: INVALID_ARGUMENT with a message when one is unset or the grid too large. */
ze_result_t fake__kernel_build(struct fake_cmd *cmd, const char *name, const char *fn);
/* (lock held) Frees every module, build log and kernel at unload. */
void fake__modules_unload(void);

/* ---- entry points ------------------------------------------------------------------------ */

/* One per line of FAKE_ENTRY_POINTS and FAKE_EXT_FUNCTIONS, declared with the type of its
 * ze_pfn<pfn>_t (the loader's) or acg_ze_pfn_<name> (ze_ext.h's): a definition whose parameters
 * drifted from the ABI does not compile. */
#define FAKE_EP_DECLARE(ep, table, slot) __typeof__(*(ze_pfn##ep##_t)0) fake_ze##ep;
FAKE_ENTRY_POINTS(FAKE_EP_DECLARE)
#undef FAKE_EP_DECLARE
#define FAKE_EXT_DECLARE(name, ext, minor) __typeof__(*(acg_ze_pfn_##name)0) fake_##name;
FAKE_EXT_FUNCTIONS(FAKE_EXT_DECLARE)
#undef FAKE_EXT_DECLARE

#endif /* ACG_TESTS_ZE_DRIVER_FAKE_ZE_IMPL_H */
