/* fake_ze.c — acg's Level Zero test driver: its DDI tables, knobs, control API and shared helpers.
 *
 * CI has no Intel GPU, so the level_zero backend's tests run the real Level Zero loader with
 * ZE_ENABLE_ALT_DRIVERS naming this library. It exports the 46 DDI table getters loader 1.8.12
 * requires (17 ze, 12 zet, 17 zes) and serves exactly the entry points of
 * src/backends/level_zero/entry_points.h in them, every other slot NULL; newer functions come
 * through zeDriverGetExtensionFunctionAddress, as from a real driver. It runs their work on the
 * host: device memory is host memory (a pointer is its address), each immediate command list and
 * each command queue is a worker thread running its commands in order, and a kernel runs acg's
 * own cpu implementation of the kernel of the same name. It follows the specification where acg
 * depends on it (regular lists recorded then executed, the rules on executing, resetting and
 * destroying them, events and fences, kernel arguments taken at append) and checks more than a
 * real driver (handles by membership, every device address against live allocations, objects
 * destroyed under pending work), so that a backend bug fails here rather than on a GPU.
 *
 * The files: fake_ze.c (this), fake_device.c (zeInit, driver, devices, contexts), fake_memory.c
 * (allocations), fake_list.c (command lists, queues, appends, executions), fake_run.c (workers:
 * how commands run), fake_event.c (event pools, events, fences), fake_module.c (modules, SPIR-V,
 * build logs, kernels), fake_mutable.c (mutable command lists), fake_graph.c (record-replay
 * graphs: captures, executable graphs, replays).
 *
 * Beyond spec 1.4 it serves zeCommandListHostSynchronize (core 1.6), in-order lists (1.7),
 * ZE_experimental_immediate_command_list_append 1.0, ZE_experimental_mutable_command_list 1.1,
 * ZE_extension_record_replay_graph 1.0 (spec 1.17: capture on immediate lists, forks and
 * joins through events, instantiation, append of an executable graph), the same graphs as
 * ZE_experimental_record_replay_graph 1.0 (the form Intel's driver offered before spec 1.17;
 * not offered by default) and
 * ZE_extension_device_usablemem_size_properties 1.0 (spec 1.15), and Intel's driver-experimental
 * zexKernelGetArgumentSize (listed under no extension), with the declarations of
 * src/backends/level_zero/ze_ext.h.
 *
 * What it simplifies, each also said where it is done:
 * - Every list runs its commands in append order, one at a time, with or without the in-order
 *   flag: a missing barrier or event never shows here. Barriers order nothing more.
 * - A copy or fill must stay inside live allocations of the driver (zeMemAllocDevice,
 *   zeMemAllocHost) on both sides, which is stricter than Intel's driver (it also copies from
 *   pageable host memory); a kernel's buffer argument must start inside one. Anything else
 *   aborts when the command runs, as a GPU would fault there.
 * - Modules are SPIR-V only: the magic and the instruction stream are checked, and the
 *   OpEntryPoint names kept with the parameters of the functions they name; nothing is compiled.
 *   Specialization constants and build flags are ignored. A kernel runs as one call of its
 *   cpu.fn over the whole grid (group count times group size), never in groups, and only where
 *   that code's arguments lay out as the SPIR-V function's parameters.
 * - A graph's replay runs the recorded commands of every list of its capture one after another,
 *   in the order they were recorded, on the replaying list's worker. Graphs are immutable:
 *   mutable graphs, subgraphs (a graph appended while capturing), regular lists appended while
 *   capturing, dumps and the graph functions beyond the seven acg needs (in either form) are
 *   not implemented.
 * - Descriptors and property structs must carry their stype (Intel's driver does not check).
 *   pNext chains are ignored but for the mutable command list and graph extensions' structures
 *   (the graph functions' own pNext must be NULL). Events keep no timestamps. One driver; no
 * sub-devices.
 * - Misuse the specification leaves undefined is refused with the code its entry point lists
 *   (HANDLE_OBJECT_IN_USE for a destroy, INVALID_ARGUMENT otherwise), said on stderr and counted
 *   in acgtest_ze_violations, where a GPU might corrupt memory or hang.
 * - Where the real driver's choice of error code was not verified, the source says so.
 * - A lost device (acgtest_ze_set_lost) fails submissions, waits and queries of its work, not
 *   every call as a real one might, and drops its queued work at once; made healthy again, it
 *   goes on with the objects it had, which a reset GPU would not.
 */
#include "fake_ze_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include "acgtest_ze.h"

struct fake_state fake__g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .next_serial = 1,
};
struct fake_config fake__cfg;

/* The graphs' driver-experimental form is not offered by default, so that the default driver
 * is one of spec 1.17; the tests of that form ask for it. */
const struct fake_ext_info fake__exts[FAKE_EXT_COUNT] = {
    [FAKE_EXT_IMMEDIATE_APPEND] = {ACG_ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME,
                                   ACG_ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_VERSION_1_0, 1},
    [FAKE_EXT_MUTABLE] = {ACG_ZE_MUTABLE_COMMAND_LIST_EXP_NAME,
                          ACG_ZE_MUTABLE_COMMAND_LIST_EXP_VERSION_1_1, 1},
    [FAKE_EXT_GRAPH] = {ACG_ZE_RECORD_REPLAY_GRAPH_EXT_NAME,
                        ACG_ZE_RECORD_REPLAY_GRAPH_EXT_VERSION_1_0, 1},
    [FAKE_EXT_GRAPH_EXP] = {ACG_ZE_RECORD_REPLAY_GRAPH_EXP_NAME,
                            ACG_ZE_RECORD_REPLAY_GRAPH_EXP_VERSION_1_0, 0},
    [FAKE_EXT_USABLE_MEM] = {ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_NAME,
                             ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_VERSION_1_0, 1},
};

/* ---- the entry point tables ----------------------------------------------------------------
 */

typedef void (*fake_fn)(void);

static const struct {
    fake_fn fn;
    int ext; /* a fake_ext, FAKE_EXT_CORE_1_6, FAKE_EXT_DRIVER_EXPERIMENTAL, or -2 for a core
                entry point of the DDI tables */
    uint32_t version; /* of the extension that brought it */
} entry_points[FAKE_EP_COUNT] = {
#define FAKE_EP_ROW(ep, table, slot) {(fake_fn)fake_ze##ep, -2, 0},
    FAKE_ENTRY_POINTS(FAKE_EP_ROW)
#undef FAKE_EP_ROW
#define FAKE_EXT_ROW(name, ext, minor) {(fake_fn)fake_##name, ext, ZE_MAKE_VERSION(1, minor)},
        FAKE_EXT_FUNCTIONS(FAKE_EXT_ROW)
#undef FAKE_EXT_ROW
};
static const char *const entry_point_names[FAKE_EP_COUNT] = {
#define FAKE_EP_NAME(ep, table, slot) "ze" #ep,
    FAKE_ENTRY_POINTS(FAKE_EP_NAME)
#undef FAKE_EP_NAME
#define FAKE_EXT_NAME(name, ext, minor) #name,
        FAKE_EXT_FUNCTIONS(FAKE_EXT_NAME)
#undef FAKE_EXT_NAME
};

/* Each entry point's slot has the type its declaration took (fake_ze_impl.h). */
#define FAKE_EP_CHECK(ep, table, slot)                                                             \
    _Static_assert(                                                                                \
        _Generic(((ze_##table##_dditable_t *)0)->pfn##slot, ze_pfn##ep##_t : 1, default : 0),      \
        "ze_" #table "_dditable_t.pfn" #slot " is not where ze" #ep " goes");
FAKE_ENTRY_POINTS(FAKE_EP_CHECK)
#undef FAKE_EP_CHECK

/* What the backend's list asks for: an entry point it lists and this driver lacks is an
 * undeclared fake_ name, one of another type fails the assertion. */
#define FAKE_EP_SAME_TYPE(name, ty, required)                                                      \
    _Static_assert(_Generic(&fake_##name, ze_pfn##ty##_t : 1, default : 0),                        \
                   #name " is served with another type than the backend's ze_pfn" #ty "_t");
ACG_ZE_ENTRY_POINTS(FAKE_EP_SAME_TYPE)
#undef FAKE_EP_SAME_TYPE

/* Served in the tables: listed in src/backends/level_zero/entry_points.h ("exactly that
 * list"). */
static const char served[FAKE_EP_COUNT] = {
#define FAKE_EP_SERVED(name, ty, required) [FAKE_EP_##name] = 1,
    ACG_ZE_ENTRY_POINTS(FAKE_EP_SERVED)
#undef FAKE_EP_SERVED
};

/* The call counts, injected failures and violations (tests/driver_common/fake_common.h). */
static unsigned long call_counts[FAKE_EP_COUNT];
static struct fake_ledger ledger =
    FAKE_LEDGER_INIT("acg Level Zero test driver", entry_point_names, call_counts, NULL);

/* A function pointer goes out through void *, as drivers' do; copying the bytes keeps it
 * within ISO C. */
_Static_assert(sizeof(fake_fn) == sizeof(void *), "function pointers fit in void *");

ze_result_t fake__ext_function(const char *name, void **out) {
    *out = NULL;
    int ep = fake__ledger_index(&ledger, name);
    if (ep < 0 || entry_points[ep].ext == -2 || fake__cfg.hidden[ep]) {
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    int ext = entry_points[ep].ext;
    int ok = 1; /* FAKE_EXT_DRIVER_EXPERIMENTAL */
    if (ext == FAKE_EXT_CORE_1_6) {
        ok = fake__cfg.api_version >= ZE_MAKE_VERSION(1, 6);
    } else if (ext >= 0) {
        uint32_t offered = fake__cfg.extensions[ext];
        ok = offered != 0 && offered >= entry_points[ep].version;
    }
    if (!ok) {
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    memcpy(out, &entry_points[ep].fn, sizeof *out);
    return ZE_RESULT_SUCCESS;
}

/* ---- call counts, injected failures, violations (tests/driver_common/fake_common.h) ------- */

static void ensure_config(void);

ze_result_t fake__enter(enum fake_ep ep) {
    ensure_config();
    return (ze_result_t)fake__ledger_enter(&ledger, (int)ep);
}

void fake__live(long delta) { fake__ledger_live(&ledger, delta); }

void fake__violation(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fake__ledger_violation(&ledger, fmt, ap);
    va_end(ap);
}

_Noreturn void fake__fault(const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "acg Level Zero test driver: %s; a GPU would fault here: aborting\n", text);
    abort();
}

/* ---- environment --------------------------------------------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int config_loaded;

/* An integer knob (fake__env_long). */
static long env_long(const char *name, long def, long lo, long hi) {
    return fake__env_long(ledger.driver, name, def, lo, hi);
}

static uint32_t env_version(const char *name, uint32_t def) {
    const char *s = getenv(name);
    unsigned major, minor;
    char extra;
    if (s == NULL || *s == '\0') {
        return def;
    }
    if (sscanf(s, "%u.%u%c", &major, &minor, &extra) != 2 || major != 1 || minor > 0xffff) {
        fprintf(stderr, "acg Level Zero test driver: %s=%s is not 1.<minor>; using %u.%u\n", name,
                s, ZE_MAJOR_VERSION(def), ZE_MINOR_VERSION(def));
        return def;
    }
    return ZE_MAKE_VERSION(major, minor);
}

/* "name", or "name:major.minor" to offer an older version than the one implemented. */
static void offer_one(const char *token, void *ctx) {
    (void)ctx;
    if (strcmp(token, "none") == 0) {
        return;
    }
    char name[128];
    unsigned major = 0, minor = 0;
    const char *colon = strchr(token, ':');
    size_t len = colon != NULL ? (size_t)(colon - token) : strlen(token);
    char extra;
    if (len >= sizeof name ||
        (colon != NULL && sscanf(colon + 1, "%u.%u%c", &major, &minor, &extra) != 2)) {
        fprintf(stderr,
                "acg Level Zero test driver: ACGTEST_ZE_EXTENSIONS: %s is not name or "
                "name:major.minor\n",
                token);
        return;
    }
    memcpy(name, token, len);
    name[len] = '\0';
    for (int i = 0; i < FAKE_EXT_COUNT; i++) {
        if (strcmp(fake__exts[i].name, name) != 0) {
            continue;
        }
        uint32_t v = colon != NULL ? ZE_MAKE_VERSION(major, minor) : fake__exts[i].version;
        /* A later major version is only reported, as a future driver would: a client must not
         * use an extension at a major version it does not know (its functions are still served
         * at the version implemented, so a client that does use them goes on working). */
        bool future = ZE_MAJOR_VERSION(v) > ZE_MAJOR_VERSION(fake__exts[i].version);
        if (v == 0 || (v > fake__exts[i].version && !future)) {
            fprintf(stderr,
                    "acg Level Zero test driver: ACGTEST_ZE_EXTENSIONS: %s is implemented "
                    "at version %u.%u at most\n",
                    name, ZE_MAJOR_VERSION(fake__exts[i].version),
                    ZE_MINOR_VERSION(fake__exts[i].version));
            return;
        }
        fake__cfg.extensions[i] = v;
        return;
    }
    fprintf(stderr, "acg Level Zero test driver: ACGTEST_ZE_EXTENSIONS: no extension %s\n", name);
}

static void load_config(void) {
    /* Waits have deadlines on the monotonic clock, which a condition variable takes only from
     * its attributes. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&fake__g.progress, &attr);
    pthread_condattr_destroy(&attr);
    fake__cfg.devices = (int)env_long("ACGTEST_ZE_DEVICES", 1, 0, FAKE_MAX_DEVICES);
    fake__cfg.api_version = env_version("ACGTEST_ZE_API_VERSION", ZE_MAKE_VERSION(1, 17));
    fake__cfg.mem_bytes = (size_t)env_long("ACGTEST_ZE_MEM_MB", 16384, 1, 1L << 24) << 20;
    fake__cfg.init_fail = (ze_result_t)env_long("ACGTEST_ZE_INIT_FAIL", 0, 0, 0x7fffffff);
    fake__env_hide(&ledger, "ACGTEST_ZE_HIDE", fake__cfg.hidden);
    const char *exts = getenv("ACGTEST_ZE_EXTENSIONS");
    if (exts != NULL) {
        fake__env_tokens(exts, offer_one, NULL);
    } else {
        for (int i = 0; i < FAKE_EXT_COUNT; i++) {
            fake__cfg.extensions[i] = fake__exts[i].by_default ? fake__exts[i].version : 0;
        }
    }
    fake__env_fail(&ledger, "ACGTEST_ZE_FAIL");
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        fake__g.devices[i].index = i;
    }
    config_loaded = 1;
}

static void ensure_config(void) { pthread_once(&config_once, load_config); }

/* ---- the DDI tables ------------------------------------------------------------------------- */

/* The ze tables entry points are served in. */
enum fake_table {
    FAKE_TABLE_global,
    FAKE_TABLE_driver,
    FAKE_TABLE_device,
    FAKE_TABLE_context,
    FAKE_TABLE_command_queue,
    FAKE_TABLE_command_list,
    FAKE_TABLE_fence,
    FAKE_TABLE_event_pool,
    FAKE_TABLE_event,
    FAKE_TABLE_mem,
    FAKE_TABLE_module,
    FAKE_TABLE_module_build_log,
    FAKE_TABLE_kernel,
    FAKE_TABLE_NONE, /* every slot NULL */
};

static void fill_table(enum fake_table which, void *table) {
#define FAKE_SLOT(ep, type, slot)                                                                  \
    if (which == FAKE_TABLE_##type && served[FAKE_EP_ze##ep] && !fake__cfg.hidden[FAKE_EP_ze##ep]) \
        ((ze_##type##_dditable_t *)table)->pfn##slot = fake_ze##ep;
    FAKE_ENTRY_POINTS(FAKE_SLOT)
#undef FAKE_SLOT
}

/* A getter fills the table of the version the loader asks for: the layout of a newer minor
 * version begins with this one's (slots are only appended), so the known slots are filled and
 * the caller's zeroes stand for the rest; an older one would be smaller than what is written. */
static ze_result_t table_check(ze_api_version_t version, const void *table) {
    ensure_config();
    if (table == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (ZE_MAJOR_VERSION(version) != ZE_MAJOR_VERSION(ZE_API_VERSION_CURRENT) ||
        ZE_MINOR_VERSION(version) < ZE_MINOR_VERSION(ZE_API_VERSION_CURRENT)) {
        return ZE_RESULT_ERROR_UNSUPPORTED_VERSION;
    }
    return ZE_RESULT_SUCCESS;
}

#define FAKE_TABLE_GETTER(getter, type, which)                                                     \
    ze_result_t ZE_APICALL getter(ze_api_version_t version, type *table) {                         \
        ze_result_t r = table_check(version, table);                                               \
        if (r == ZE_RESULT_SUCCESS) {                                                              \
            memset(table, 0, sizeof *table);                                                       \
            fill_table(which, table);                                                              \
        }                                                                                          \
        return r;                                                                                  \
    }
/* The getter of a table entry points are served in, and of one served empty. */
#define FAKE_GETTER(getter, table)                                                                 \
    FAKE_TABLE_GETTER(getter, ze_##table##_dditable_t, FAKE_TABLE_##table)
#define FAKE_EMPTY_GETTER(getter, type) FAKE_TABLE_GETTER(getter, type, FAKE_TABLE_NONE)

FAKE_GETTER(zeGetGlobalProcAddrTable, global)
FAKE_GETTER(zeGetDriverProcAddrTable, driver)
FAKE_GETTER(zeGetDeviceProcAddrTable, device)
FAKE_GETTER(zeGetContextProcAddrTable, context)
FAKE_GETTER(zeGetCommandQueueProcAddrTable, command_queue)
FAKE_GETTER(zeGetCommandListProcAddrTable, command_list)
FAKE_GETTER(zeGetFenceProcAddrTable, fence)
FAKE_GETTER(zeGetEventPoolProcAddrTable, event_pool)
FAKE_GETTER(zeGetEventProcAddrTable, event)
FAKE_GETTER(zeGetMemProcAddrTable, mem)
FAKE_GETTER(zeGetModuleProcAddrTable, module)
FAKE_GETTER(zeGetModuleBuildLogProcAddrTable, module_build_log)
FAKE_GETTER(zeGetKernelProcAddrTable, kernel)
FAKE_EMPTY_GETTER(zeGetImageProcAddrTable, ze_image_dditable_t)
FAKE_EMPTY_GETTER(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
FAKE_EMPTY_GETTER(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
FAKE_EMPTY_GETTER(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)

/* Tools (zet) and sysman (zes): loader 1.8.12 refuses a driver without these getters, so they
 * hand out empty tables. */
FAKE_EMPTY_GETTER(zetGetDeviceProcAddrTable, zet_device_dditable_t)
FAKE_EMPTY_GETTER(zetGetContextProcAddrTable, zet_context_dditable_t)
FAKE_EMPTY_GETTER(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
FAKE_EMPTY_GETTER(zetGetModuleProcAddrTable, zet_module_dditable_t)
FAKE_EMPTY_GETTER(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
FAKE_EMPTY_GETTER(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
FAKE_EMPTY_GETTER(zetGetMetricProcAddrTable, zet_metric_dditable_t)
FAKE_EMPTY_GETTER(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
FAKE_EMPTY_GETTER(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
FAKE_EMPTY_GETTER(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
FAKE_EMPTY_GETTER(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
FAKE_EMPTY_GETTER(zetGetDebugProcAddrTable, zet_debug_dditable_t)
FAKE_EMPTY_GETTER(zesGetDriverProcAddrTable, zes_driver_dditable_t)
FAKE_EMPTY_GETTER(zesGetDeviceProcAddrTable, zes_device_dditable_t)
FAKE_EMPTY_GETTER(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
FAKE_EMPTY_GETTER(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
FAKE_EMPTY_GETTER(zesGetPowerProcAddrTable, zes_power_dditable_t)
FAKE_EMPTY_GETTER(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
FAKE_EMPTY_GETTER(zesGetEngineProcAddrTable, zes_engine_dditable_t)
FAKE_EMPTY_GETTER(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
FAKE_EMPTY_GETTER(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
FAKE_EMPTY_GETTER(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
FAKE_EMPTY_GETTER(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
FAKE_EMPTY_GETTER(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
FAKE_EMPTY_GETTER(zesGetPsuProcAddrTable, zes_psu_dditable_t)
FAKE_EMPTY_GETTER(zesGetFanProcAddrTable, zes_fan_dditable_t)
FAKE_EMPTY_GETTER(zesGetLedProcAddrTable, zes_led_dditable_t)
FAKE_EMPTY_GETTER(zesGetRasProcAddrTable, zes_ras_dditable_t)
FAKE_EMPTY_GETTER(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)

/* ---- control API ---------------------------------------------------------------------------- */

ACGTEST_ZE_API void acgtest_ze_fail(const char *name, unsigned nth, int code) {
    ensure_config();
    fake__ledger_arm(&ledger, name, nth, code);
}

/* (lock held) Whether q, a queue of dev, still has work that was queued. */
static int queue_busy(const struct fake_queue *q, const struct fake_device *dev) {
    return q->dev == dev && fake__worker_busy(&q->engine.worker);
}

/* (lock held) Whether a queue of dev (an immediate list's own, or a handle) still has work that
 * was queued. */
static int engines_busy(const struct fake_device *dev) {
    const struct fake_vec *lists = &fake__g.objs[FAKE_LIST], *queues = &fake__g.objs[FAKE_QUEUE];
    for (size_t i = 0; i < lists->n; i++) {
        const struct fake_list *l = lists->v[i];
        if (l->queue != NULL && queue_busy(l->queue, dev)) { /* a regular list has none */
            return 1;
        }
    }
    for (size_t i = 0; i < queues->n; i++) {
        if (queue_busy(queues->v[i], dev)) {
            return 1;
        }
    }
    return 0;
}

/* The device's workers drop what is queued (fake_run.c) once they see it lost; waiting here
 * until they did makes every object free to destroy when this returns, as after a reset. */
ACGTEST_ZE_API void acgtest_ze_set_lost(int device, int mode) {
    ensure_config();
    pthread_mutex_lock(&fake__g.lock);
    if (device < 0 || device >= FAKE_MAX_DEVICES || mode < 0 || mode > ACGTEST_ZE_LOST_RELEASES) {
        fprintf(stderr, "acg Level Zero test driver: acgtest_ze_set_lost(%d, %d): no such %s\n",
                device, mode, mode < 0 || mode > ACGTEST_ZE_LOST_RELEASES ? "mode" : "device");
        pthread_mutex_unlock(&fake__g.lock);
        return;
    }
    struct fake_device *d = &fake__g.devices[device];
    d->lost = mode;
    pthread_cond_broadcast(&fake__g.progress);
    while (mode != 0 && engines_busy(d)) {
        pthread_cond_wait(&fake__g.progress, &fake__g.lock);
    }
    pthread_mutex_unlock(&fake__g.lock);
}

ACGTEST_ZE_API unsigned long acgtest_ze_calls(const char *name) {
    ensure_config();
    return fake__ledger_calls(&ledger, name);
}

ACGTEST_ZE_API unsigned long acgtest_ze_violations(void) {
    ensure_config();
    return fake__ledger_violations(&ledger);
}

ACGTEST_ZE_API void acgtest_ze_reset_counts(void) {
    ensure_config();
    fake__ledger_reset(&ledger);
}

ACGTEST_ZE_API long acgtest_ze_live(void) {
    ensure_config();
    return fake__ledger_live_count(&ledger);
}

ACGTEST_ZE_API void acgtest_ze_bind_kernels(const acg_kernel_desc *(*lookup)(const char *name)) {
    ensure_config();
    pthread_mutex_lock(&fake__g.lock);
    fake__g.lookup = lookup;
    pthread_mutex_unlock(&fake__g.lock);
}

/* ---- objects -------------------------------------------------------------------------------- */

const char *fake__kind_name(enum fake_kind kind) {
    static const char *const names[FAKE_KIND_COUNT] = {
        [FAKE_CONTEXT] = "context",
        [FAKE_QUEUE] = "command queue",
        [FAKE_LIST] = "command list",
        [FAKE_POOL] = "event pool",
        [FAKE_EVENT] = "event",
        [FAKE_FENCE] = "fence",
        [FAKE_MODULE] = "module",
        [FAKE_LOG] = "module build log",
        [FAKE_KERNEL] = "kernel",
        [FAKE_GRAPH] = "graph",
        [FAKE_EXEC_GRAPH] = "executable graph",
    };
    return names[kind];
}

ze_result_t fake__ready(void) {
    return fake__g.initialized ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNINITIALIZED;
}

ze_result_t fake__lookup(enum fake_kind kind, const void *h, const char *fn, void **out) {
    if (h == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    }
    if (!fake__vec_has(&fake__g.objs[kind], h)) {
        /* A real driver would read through it (the specification lists no code for this). */
        fake__violation("%s: %p is not a live %s (destroyed, never created, or another kind)", fn,
                        h, fake__kind_name(kind));
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    *out = (void *)h;
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake__lock_object(enum fake_kind kind, const void *h, const char *fn, void **out) {
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready();
    return r == ZE_RESULT_SUCCESS ? fake__lookup(kind, h, fn, out) : r;
}

ze_result_t fake__lock_context_device(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                      const char *fn, struct fake_context **ctx,
                                      struct fake_device **dev) {
    ze_result_t r = fake__lock_object(FAKE_CONTEXT, hContext, fn, (void **)ctx);
    return r == ZE_RESULT_SUCCESS ? fake__device(hDevice, dev) : r;
}

ze_result_t fake__lock_creation(enum fake_kind kind, const void *h, const void *desc,
                                ze_structure_type_t stype, const void *out, const char *fn,
                                void **parent) {
    ze_result_t r = fake__lock_object(kind, h, fn, parent);
    if (r == ZE_RESULT_SUCCESS && (desc == NULL || out == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    return r == ZE_RESULT_SUCCESS ? fake__stype(desc, stype, fn, "desc") : r;
}

ze_result_t fake__unlock(ze_result_t r) {
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* (lock held) The devices whose lost state a release of the object reports (fake__released). */
static uint32_t devices_of(const struct fake_obj *o) {
    switch (o->kind) {
    case FAKE_QUEUE:
        return fake__bit(((const struct fake_queue *)o)->dev);
    case FAKE_LIST:
        return fake__bit(((const struct fake_list *)o)->dev);
    case FAKE_POOL:
        return ((const struct fake_pool *)o)->devices;
    case FAKE_EVENT:
        return ((const struct fake_event *)o)->pool->devices;
    case FAKE_FENCE:
        return fake__bit(((const struct fake_fence *)o)->queue->dev);
    case FAKE_MODULE:
        return fake__bit(((const struct fake_module *)o)->dev);
    case FAKE_KERNEL:
        return fake__bit(((const struct fake_kernel *)o)->module->dev);
    case FAKE_LOG:
        return 0;
    default:
        return FAKE_ALL_DEVICES; /* a context, and its graphs, may span devices */
    }
}

ze_result_t fake__destroy(enum fake_kind kind, const void *h, const char *fn,
                          int (*busy)(void *obj, const char *fn), void (*free_fn)(void *obj)) {
    void *obj;
    ze_result_t r = fake__lock_object(kind, h, fn, &obj);
    if (r == ZE_RESULT_SUCCESS && busy != NULL && busy(obj, fn)) {
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        uint32_t devices = devices_of(obj);
        free_fn(obj);
        r = fake__released(devices);
    }
    return fake__unlock(r);
}

ze_result_t fake__device(ze_device_handle_t h, struct fake_device **out) {
    if (h == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    }
    for (int i = 0; i < fake__cfg.devices; i++) {
        if ((void *)h == (void *)&fake__g.devices[i]) {
            *out = &fake__g.devices[i];
            return ZE_RESULT_SUCCESS;
        }
    }
    fake__violation("%p is not a device of this driver", (void *)h);
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

int fake__obj_add(struct fake_obj *obj, enum fake_kind kind) {
    if (fake__vec_push(&fake__g.objs[kind], obj) != 0) {
        return -1;
    }
    obj->kind = kind;
    obj->serial = fake__g.next_serial++;
    obj->pending = obj->waiters = 0;
    fake__live(1);
    return 0;
}

void *fake__obj_new(size_t size, enum fake_kind kind) {
    struct fake_obj *obj = calloc(1, size);
    if (obj == NULL || fake__obj_add(obj, kind) != 0) {
        free(obj);
        return NULL;
    }
    return obj;
}

void fake__obj_remove(struct fake_obj *obj) {
    fake__vec_remove(&fake__g.objs[obj->kind], obj);
    obj->serial = 0;
    fake__live(-1);
}

void fake__free_all(enum fake_kind kind, void (*free_fn)(void *obj)) {
    while (fake__g.objs[kind].n > 0) {
        free_fn(fake__g.objs[kind].v[fake__g.objs[kind].n - 1]);
    }
}

struct fake_ref fake__ref(struct fake_obj *obj) {
    struct fake_ref r = {0};
    if (obj != NULL) {
        r.obj = obj;
        r.kind = obj->kind;
        r.serial = obj->serial;
    }
    return r;
}

int fake__ref_alive(const struct fake_ref *ref) {
    return ref->obj == NULL ||
           (fake__vec_has(&fake__g.objs[ref->kind], ref->obj) && ref->obj->serial == ref->serial);
}

ze_result_t fake__stype(const void *s, ze_structure_type_t want, const char *fn, const char *what) {
    if (s == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    ze_structure_type_t have;
    memcpy(&have, s, sizeof have); /* every descriptor and property struct begins with it */
    if (have != want) {
        fprintf(stderr, "acg Level Zero test driver: %s: %s has stype 0x%x, not 0x%x\n", fn, what,
                (unsigned)have, (unsigned)want);
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

/* ---- waits ---------------------------------------------------------------------------------- */

void fake__deadline(uint64_t timeout_ns, struct timespec *deadline, int *forever) {
    *forever = timeout_ns == UINT64_MAX;
    clock_gettime(CLOCK_MONOTONIC, deadline);
    if (*forever) {
        return;
    }
    uint64_t s = timeout_ns / 1000000000u, ns = timeout_ns % 1000000000u;
    deadline->tv_sec += (time_t)s;
    deadline->tv_nsec += (long)ns;
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
}

int fake__wait(const struct timespec *deadline) {
    if (deadline == NULL) {
        pthread_cond_wait(&fake__g.progress, &fake__g.lock);
        return 0;
    }
    return pthread_cond_timedwait(&fake__g.progress, &fake__g.lock, deadline) == ETIMEDOUT;
}

ze_result_t fake__wait_counter(const uint64_t *counter, uint64_t target, uint64_t timeout_ns,
                               const struct fake_device *dev) {
    struct timespec deadline;
    int forever;
    fake__deadline(timeout_ns, &deadline, &forever);
    for (;;) {
        if (dev->lost) {
            return ZE_RESULT_ERROR_DEVICE_LOST;
        }
        if (*counter >= target) {
            return ZE_RESULT_SUCCESS;
        }
        if (timeout_ns == 0 || fake__g.unloading) {
            return ZE_RESULT_NOT_READY;
        }
        if (fake__wait(forever ? NULL : &deadline) && *counter < target && !dev->lost) {
            return ZE_RESULT_NOT_READY;
        }
    }
}

/* ---- unload --------------------------------------------------------------------------------- */

/* At unload (the loader's dlclose, or exit), whatever is still held is freed and its workers
 * joined, so a test that leaked objects still ends clean under the sanitizers (and
 * acgtest_ze_live has already told it). Workers skip the commands left, even those waiting on
 * events nothing will signal. A destructor is the one place the driver learns it is going. */
__attribute__((destructor)) static void fake_unload(void) {
    if (!config_loaded) {
        return;
    }
    pthread_mutex_lock(&fake__g.lock);
    fake__g.unloading = 1;
    pthread_cond_broadcast(&fake__g.progress);
    fake__workers_stop();
    fake__graphs_unload();
    fake__events_unload();
    fake__lists_unload();
    fake__modules_unload();
    for (size_t i = fake__g.objs[FAKE_CONTEXT].n; i-- > 0;) {
        struct fake_context *ctx = fake__g.objs[FAKE_CONTEXT].v[i];
        fake__ranges_reclaim(ctx);
        fake__obj_remove(&ctx->obj);
        free(ctx);
    }
    for (int k = 0; k < FAKE_KIND_COUNT; k++) {
        fake__vec_free(&fake__g.objs[k]);
    }
    fake__vec_free(&fake__g.ranges);
    pthread_mutex_unlock(&fake__g.lock);
}
