/* fake_cuda.c — acg's CUDA test driver: its loader, knobs, control API, devices and contexts.
 *
 * CI has no GPU, so the cuda backend's tests load this library instead of libcuda.so.1
 * (ACG_CUDA_DRIVER). It serves exactly the entry points of src/backends/cuda/entry_points.h,
 * through cuGetProcAddress_v2 as the real driver does, and runs their work on the host:
 * device memory is host memory (the CUdeviceptr is the address), each stream is a worker thread
 * running its ops in order, and a kernel runs acg's own cpu implementation of the kernel of the
 * same name. It follows CUDA where acg depends on it (contexts per thread, stream order, events,
 * capture and its errors, graph replay and update, object lifetimes) and checks more than the
 * real driver (every device range against live allocations, handles by membership), so that a
 * backend bug fails here rather than on the GPU.
 *
 * The files: fake_cuda.c (this), fake_errors.c (error names and texts), fake_memory.c
 * (allocations, copies, fills), fake_stream.c (streams, workers, events), fake_kernel.c
 * (libraries, kernels, launches), fake_graph.c (capture, graphs, execs), fake_cond.c
 * (conditional nodes: handles, bodies, their replay, and the device code that sets them).
 *
 * What it simplifies, each also said where it is done:
 * - Only primary contexts (one per device); a context is what acg uses. Releasing the last
 *   retain frees everything the context holds, as CUDA does, but acgtest_cuda_live keeps
 *   counting what it had to free so that a leak still shows.
 * - No NULL, legacy or per-thread default stream: those handles give CUDA_ERROR_INVALID_HANDLE
 *   (the backend never uses them). So CU_STREAM_NON_BLOCKING changes nothing, and
 *   cuGetProcAddress's flags choose nothing (there are no _ptsz variants).
 * - Kernels: only fatbin images are accepted (the magic is checked, and only which functions
 *   the image holds and their parameters are read: fake_kernel.c); cuLaunchKernel's `extra` is
 *   refused (CUDA_ERROR_INVALID_VALUE); a kernel runs as one call of its cpu.fn, never split
 *   into its cpu_parts.
 * - Graphs replay their nodes one after another in insertion order (a valid serial order),
 *   never two branches at once. Memcpy nodes are 1-D only (height and depth 1; no arrays);
 *   memset nodes have height 1; anything else is CUDA_ERROR_NOT_SUPPORTED. A graph launch or
 *   upload into a capturing stream (a child graph in CUDA) is CUDA_ERROR_STREAM_CAPTURE_
 *   UNSUPPORTED and invalidates the capture.
 * - Capture modes are accepted and ignored: GLOBAL and THREAD_LOCAL restrict nothing (acg
 *   captures RELAXED). Argument errors during a capture do not invalidate it, and neither does
 *   CUDA_ERROR_CAPTURED_EVENT. Edges carry no data (cuStreamGetCaptureInfo's edge data is the
 *   default's).
 * - An exec's node is named by the node of the graph it was instantiated from, which must still
 *   live: cuGraphExecKernelNodeSetParams refuses any other (CUDA leaves it undefined).
 * - Zero-byte copies and fills succeed without queueing or recording anything.
 * - Host pointers are not checked, except that a capture takes only pinned ones; explicit
 *   memcpy nodes take any.
 * - cuMemFree, cuMemFreeHost and cuMemHostUnregister first wait for all work queued in the
 *   context (as cudaFree does), so queued work never reads freed memory. Work that still
 *   reaches a freed or foreign device address (a graph replayed after its buffer was freed)
 *   does not run: the context gets the sticky CUDA_ERROR_ILLEGAL_ADDRESS, as a GPU fault.
 * - Libraries are context-independent, as CUDA 12's: a context's teardown leaves them (the
 *   driver's unload frees what is left). Events keep no time (cuEventElapsedTime is not
 *   served).
 * - Where the real driver's choice of error code or effect was not verified (a stream or event
 *   of another context, destroying a capturing stream, ending a capture on a stream that is
 *   not its origin), the source says so.
 * - A host function or kernel calling the driver finds no current context (as CUDA forbids
 *   those calls).
 * - After a fault (acgtest_cuda_set_sticky, or work reaching freed memory) a release (a free,
 *   a destroy, an unregister) reports the fault as every call does, and releases all the same,
 *   where CUDA keeps the object until the context goes: acgtest_cuda_live still counts what
 *   the owner never released.
 * - Device code that sets a conditional node's value (cudaGraphSetConditional, a device-runtime
 *   builtin) cannot run here: the few such functions acg compiles are the driver's own
 *   emulation, chosen by the function's name and parameter sizes in the image (fake_cond.c's
 *   table: acg_loop_begin(handle, counter) and acg_loop_next(handle, cond, counter, max) of
 *   src/backends/cuda/loop.cu), run as one thread under the driver's lock; a
 *   launch of one with more than one thread is refused (CUDA_ERROR_INVALID_VALUE). Used outside
 *   a replay of a graph holding its handle, it faults the context (CUDA_ERROR_LAUNCH_FAILED; the
 *   real device's effect was not verified).
 * - Conditional nodes (fake_cond.c): IF, WHILE and SWITCH, whatever the driver's version; a
 *   WHILE node whose body ran 2^20 times in a row is taken for a hang and faults the context
 *   (CUDA_ERROR_LAUNCH_TIMEOUT). A handle made without CU_GRAPH_COND_ASSIGN_DEFAULT keeps the
 *   value the last launch left (CUDA: undefined). cuGraphExecUpdate refuses any exec or graph
 *   with conditional nodes (CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED), and cuGraphAddNode takes
 *   kernel, memcpy, memset, host, empty and conditional nodes only (else NOT_SUPPORTED).
 */
#include "fake_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acgtest_cuda.h"

struct fake_state fake__g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .progress = PTHREAD_COND_INITIALIZER,
};
struct fake_config fake__cfg;

/* The calling thread's current context (cuCtxSetCurrent). */
static _Thread_local struct CUctx_st *tls_ctx;

/* ---- the entry point table ------------------------------------------------------------------
 */

typedef void (*fake_fn)(void);

static const struct {
    int version; /* the ABI version it is served at (its cudaTypedefs.h PFN) */
    fake_fn fn;
} entry_points[FAKE_EP_COUNT] = {
#define FAKE_EP_ROW(name, version) {version, (fake_fn)fake_##name},
    FAKE_ENTRY_POINTS(FAKE_EP_ROW)
#undef FAKE_EP_ROW
};
static const char *const entry_point_names[FAKE_EP_COUNT] = {
#define FAKE_EP_NAME(name, version) #name,
    FAKE_ENTRY_POINTS(FAKE_EP_NAME)
#undef FAKE_EP_NAME
};

/* What the backend's list asks for: an entry point it lists and this driver lacks is an
 * undeclared FAKE_EP_ name, one at another version fails the assertion. */
enum {
#define FAKE_EP_ABI(name, version) FAKE_ABI_##name = version,
    FAKE_ENTRY_POINTS(FAKE_EP_ABI)
#undef FAKE_EP_ABI
};
#define FAKE_EP_SAME_ABI(name, version, required)                                                  \
    _Static_assert(FAKE_ABI_##name == version, #name " is served at another ABI version");
ACG_CUDA_ENTRY_POINTS(FAKE_EP_SAME_ABI)
#undef FAKE_EP_SAME_ABI

/* Served: listed in src/backends/cuda/entry_points.h ("exactly that list"). */
static const char served[FAKE_EP_COUNT] = {
#define FAKE_EP_SERVED(name, version, required) [FAKE_EP_##name] = 1,
    ACG_CUDA_ENTRY_POINTS(FAKE_EP_SERVED)
#undef FAKE_EP_SERVED
};

/* ---- call counts and injected failures (tests/driver_common/fake_common.h) ---------------- */

/* Error-text lookups are how a failure gets reported; "any entry point" leaves them alone. */
static int counted(int ep) {
    return ep != FAKE_EP_cuGetErrorName && ep != FAKE_EP_cuGetErrorString;
}

static unsigned long call_counts[FAKE_EP_COUNT];
static struct fake_ledger ledger =
    FAKE_LEDGER_INIT("acg CUDA test driver", entry_point_names, call_counts, counted);

void fake__live(long delta) { fake__ledger_live(&ledger, delta); }

CUresult fake__enter(enum fake_ep ep) { return (CUresult)fake__ledger_enter(&ledger, (int)ep); }

/* ---- environment --------------------------------------------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* An integer knob (fake__env_long). */
static long env_long(const char *name, long def, long lo, long hi) {
    return fake__env_long(ledger.driver, name, def, lo, hi);
}

static void load_config(void) {
    fake__cfg.version = (int)env_long("ACGTEST_CUDA_VERSION", 13000, 1000, 99999);
    fake__cfg.devices = (int)env_long("ACGTEST_CUDA_DEVICES", 1, 0, FAKE_MAX_DEVICES);
    fake__cfg.mem_bytes = (size_t)env_long("ACGTEST_CUDA_MEM_MB", 16384, 1, 1L << 24) << 20;
    fake__cfg.init_fail = (CUresult)env_long("ACGTEST_CUDA_INIT_FAIL", 0, 0, 100000);
    fake__env_hide(&ledger, "ACGTEST_CUDA_HIDE", fake__cfg.hidden);
    fake__env_fail(&ledger, "ACGTEST_CUDA_FAIL");
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        fake__g.ctx[i].device = i;
    }
}

static void ensure_config(void) { pthread_once(&config_once, load_config); }

/* ---- the loader ----------------------------------------------------------------------------- */

/* The one symbol the backend takes with dlsym. As the real driver: a cudaVersion above the
 * driver's is refused; an unknown symbol, and one the driver's version does not have yet, is
 * CUDA_SUCCESS with NULL and SYMBOL_NOT_FOUND; a known one asked at a version older than its
 * ABI (which would be another argument list) is NULL and VERSION_NOT_SUFFICIENT. */
__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *symbolStatus) {
    ensure_config();
    if (symbol == NULL || pfn == NULL || cudaVersion > fake__cfg.version ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    *pfn = NULL;
    int ep = fake__ledger_index(&ledger, symbol);
    if (ep < 0 || !served[ep] || fake__cfg.hidden[ep] ||
        entry_points[ep].version > fake__cfg.version) {
        status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    } else if (cudaVersion < entry_points[ep].version) {
        status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    } else {
        /* A function pointer goes out through void *, as the real driver's does; copying the
         * bytes keeps it within ISO C. */
        _Static_assert(sizeof(fake_fn) == sizeof(void *), "function pointers fit in void *");
        memcpy(pfn, &entry_points[ep].fn, sizeof(void *));
    }
    if (symbolStatus != NULL) {
        *symbolStatus = status;
    }
    return CUDA_SUCCESS;
}

/* ---- control API ---------------------------------------------------------------------------- */

ACGTEST_CUDA_API void acgtest_cuda_fail(const char *name, unsigned nth, int code) {
    ensure_config();
    fake__ledger_arm(&ledger, name, nth, code);
}

ACGTEST_CUDA_API unsigned long acgtest_cuda_calls(const char *name) {
    ensure_config();
    return fake__ledger_calls(&ledger, name);
}

ACGTEST_CUDA_API void acgtest_cuda_reset_counts(void) {
    ensure_config();
    fake__ledger_reset(&ledger);
}

ACGTEST_CUDA_API void acgtest_cuda_set_sticky(int device, int code) {
    ensure_config();
    if (device < 0 || device >= fake__cfg.devices) {
        fprintf(stderr, "acg CUDA test driver: no device %d to fault\n", device);
        return;
    }
    pthread_mutex_lock(&fake__g.lock);
    fake__g.ctx[device].sticky = (CUresult)code;
    pthread_cond_broadcast(&fake__g.progress);
    pthread_mutex_unlock(&fake__g.lock);
}

ACGTEST_CUDA_API long acgtest_cuda_live(void) {
    ensure_config();
    return fake__ledger_live_count(&ledger);
}

ACGTEST_CUDA_API void acgtest_cuda_bind_kernels(acgtest_cuda_lookup_fn lookup) {
    ensure_config();
    pthread_mutex_lock(&fake__g.lock);
    fake__g.lookup = lookup;
    pthread_mutex_unlock(&fake__g.lock);
}

/* ---- initialization and devices ------------------------------------------------------------- */

CUresult fake_cuInit(unsigned int flags) {
    FAKE_ENTER(cuInit);
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return (CUresult)fake__init((int)fake__cfg.init_fail, &fake__g.lock, &fake__g.initialized);
}

/* Works before cuInit, as the real one. */
CUresult fake_cuDriverGetVersion(int *version) {
    FAKE_ENTER(cuDriverGetVersion);
    if (version == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *version = fake__cfg.version;
    return CUDA_SUCCESS;
}

/* NOT_INITIALIZED before cuInit, INVALID_DEVICE for an ordinal out of range, else SUCCESS. */
static CUresult device_check(CUdevice dev) {
    pthread_mutex_lock(&fake__g.lock);
    int initialized = fake__g.initialized;
    pthread_mutex_unlock(&fake__g.lock);
    if (!initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return dev >= 0 && dev < fake__cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult fake_cuDeviceGetCount(int *count) {
    FAKE_ENTER(cuDeviceGetCount);
    CUresult r = device_check(0);
    if (r == CUDA_ERROR_NOT_INITIALIZED) {
        return r;
    }
    if (count == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *count = fake__cfg.devices;
    return CUDA_SUCCESS;
}

/* A device query answered with an int: device_check, then the answer in *out. */
static CUresult device_answer(CUdevice dev, int *out, int value) {
    CUresult r = fake__given(device_check(dev), out);
    if (r == CUDA_SUCCESS) {
        *out = value;
    }
    return r;
}

CUresult fake_cuDeviceGet(CUdevice *device, int ordinal) {
    FAKE_ENTER(cuDeviceGet);
    return device_answer(ordinal, device, ordinal);
}

CUresult fake_cuDeviceGetName(char *name, int len, CUdevice dev) {
    FAKE_ENTER(cuDeviceGetName);
    CUresult r = fake__given(device_check(dev), len > 0 ? name : NULL);
    if (r == CUDA_SUCCESS) {
        snprintf(name, (size_t)len, "%s", "acg CUDA test driver");
    }
    return r;
}

/* An H100/H200-like sm_90 device; attributes acg never reads get plausible values. */
static int attribute_value(CUdevice_attribute a) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        return 233472;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return 1980000; /* kHz */
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return 2619000; /* kHz */
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return 50331648;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        return 32;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        return 2;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
        return 32;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: /* DEFAULT */
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
        return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return 0x18;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
        return 0;
    default:
        /* Every other attribute is a capability flag or a limit: say yes (1). */
        return 1;
    }
}

CUresult fake_cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    FAKE_ENTER(cuDeviceGetAttribute);
    int known = (int)attrib >= 1 && attrib < CU_DEVICE_ATTRIBUTE_MAX;
    return device_answer(dev, known ? pi : NULL, known ? attribute_value(attrib) : 0);
}

CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
    FAKE_ENTER(cuDeviceTotalMem);
    CUresult r = fake__given(device_check(dev), bytes);
    if (r == CUDA_SUCCESS) {
        *bytes = fake__cfg.mem_bytes;
    }
    return r;
}

/* ---- contexts ------------------------------------------------------------------------------- */

CUresult fake__current(struct CUctx_st **out) {
    if (!fake__g.initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    struct CUctx_st *ctx = tls_ctx;
    /* A thread whose context was released keeps the handle current, and gets nothing done:
     * the backend must retain before use, and set it on every thread it calls from. */
    if (ctx == NULL || ctx->retains == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (ctx->sticky != CUDA_SUCCESS) {
        return ctx->sticky;
    }
    *out = ctx;
    return CUDA_SUCCESS;
}

CUresult fake__current_release(struct CUctx_st **out, CUresult *fault) {
    *fault = CUDA_SUCCESS;
    if (!fake__g.initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    struct CUctx_st *ctx = tls_ctx;
    if (ctx == NULL || ctx->retains == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *fault = ctx->sticky;
    *out = ctx;
    return CUDA_SUCCESS;
}

CUresult fake__lock_initialized(void) {
    pthread_mutex_lock(&fake__g.lock);
    return fake__g.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fake__lock_current(struct CUctx_st **out) {
    pthread_mutex_lock(&fake__g.lock);
    return fake__current(out);
}

CUresult fake__unlock(CUresult r) {
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake__handle(const struct fake_vec *set, const void *h, void **out) {
    if (h == NULL || !fake__vec_has(set, h)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *out = (void *)h;
    return CUDA_SUCCESS;
}

CUresult fake__publish(struct fake_vec *set, void *obj, void (*free_fn)(void *obj), void **out) {
    if (obj == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (fake__vec_push(set, obj) != 0) {
        free_fn(obj);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake__live(1);
    *out = obj;
    return CUDA_SUCCESS;
}

CUresult fake__release(struct fake_vec *set, void *h,
                       CUresult (*check)(struct CUctx_st *ctx, void *obj),
                       void (*free_fn)(void *obj)) {
    struct CUctx_st *ctx;
    void *obj;
    CUresult fault;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current_release(&ctx, &fault);
    if (r == CUDA_SUCCESS) {
        r = fake__handle(set, h, &obj);
    }
    if (r == CUDA_SUCCESS && check != NULL) {
        r = check(ctx, obj);
    }
    if (r == CUDA_SUCCESS) {
        fake__vec_remove(set, obj);
        fake__live(-1);
        free_fn(obj);
        r = fault;
    }
    return fake__unlock(r);
}

/* fake__reclaim walks a set of any of these kinds of handle, reading each one's context through
 * a pointer to its first member. */
_Static_assert(offsetof(struct CUstream_st, ctx) == 0, "a stream begins with its context");
_Static_assert(offsetof(struct CUevent_st, ctx) == 0, "an event begins with its context");
_Static_assert(offsetof(struct CUgraph_st, ctx) == 0, "a graph begins with its context");
_Static_assert(offsetof(struct CUgraphExec_st, ctx) == 0, "an exec begins with its context");

void fake__reclaim(struct fake_vec *set, struct CUctx_st *ctx, void (*free_fn)(void *obj)) {
    for (size_t i = set->n; i-- > 0;) {
        void *obj = set->v[i];
        if (*(struct CUctx_st **)obj == ctx) { /* its first member, as asserted above */
            fake__vec_remove(set, obj);
            free_fn(obj);
        }
    }
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    FAKE_ENTER(cuDevicePrimaryCtxRetain);
    CUresult r = fake__given(device_check(dev), pctx);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    pthread_mutex_lock(&fake__g.lock);
    struct CUctx_st *ctx = &fake__g.ctx[dev];
    while (ctx->tearing_down) { /* the last release is still freeing the old one */
        pthread_cond_wait(&fake__g.progress, &fake__g.lock);
    }
    ctx->retains++;
    fake__live(1);
    pthread_mutex_unlock(&fake__g.lock);
    *pctx = ctx;
    return CUDA_SUCCESS;
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev) {
    FAKE_ENTER(cuDevicePrimaryCtxRelease);
    CUresult r = device_check(dev);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    pthread_mutex_lock(&fake__g.lock);
    struct CUctx_st *ctx = &fake__g.ctx[dev];
    if (ctx->retains == 0 || ctx->tearing_down) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        ctx->retains--;
        fake__live(-1);
        if (ctx->retains == 0) {
            fake__ctx_teardown(ctx);
        }
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

int fake__ctx_active(CUcontext h) {
    for (int i = 0; i < fake__cfg.devices; i++) {
        if (h == &fake__g.ctx[i]) {
            return h->retains > 0;
        }
    }
    return 0;
}

CUresult fake_cuCtxSetCurrent(CUcontext ctx) {
    FAKE_ENTER(cuCtxSetCurrent);
    CUresult r = fake__lock_initialized();
    if (r == CUDA_SUCCESS && ctx != NULL && !fake__ctx_active(ctx)) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    }
    if (r == CUDA_SUCCESS) {
        tls_ctx = ctx;
    }
    return fake__unlock(r);
}

void fake__ctx_teardown(struct CUctx_st *ctx) {
    ctx->tearing_down = 1;
    /* Queued work finishes first, as in CUDA; with no retains left nothing new can be queued
     * on the context's streams. */
    fake__ctx_synchronize(ctx);
    for (size_t i = fake__g.captures.n; i-- > 0;) {
        struct fake_capture *c = fake__g.captures.v[i];
        if (c->ctx == ctx) {
            fake__capture_discard(c);
        }
    }
    fake__streams_reclaim(ctx);
    for (;;) {
        int running = 0;
        for (size_t i = 0; i < fake__g.workers.n; i++) {
            struct CUstream_st *s = fake__g.workers.v[i];
            running |= s->ctx == ctx && !s->worker.exited;
        }
        if (!running) {
            break;
        }
        pthread_cond_wait(&fake__g.progress, &fake__g.lock);
    }
    fake__reap_workers();
    fake__events_reclaim(ctx);
    fake__graphs_reclaim(ctx);
    fake__ranges_reclaim(ctx);
    ctx->allocated = 0;
    ctx->sticky = CUDA_SUCCESS;
    ctx->tearing_down = 0;
    pthread_cond_broadcast(&fake__g.progress);
}

/* At unload (dlclose or exit), whatever is still held is freed and its workers joined, so a
 * test that leaked objects still ends clean under the sanitizers (and acgtest_cuda_live has
 * already told it). A destructor is the one place the driver learns it is going away. */
__attribute__((destructor)) static void fake_unload(void) {
    pthread_mutex_lock(&fake__g.lock);
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        struct CUctx_st *ctx = &fake__g.ctx[i];
        if (ctx->retains > 0) {
            ctx->retains = 0;
            fake__ctx_teardown(ctx);
        }
    }
    fake__libraries_reclaim();
    fake__vec_free(&fake__g.ranges);
    fake__vec_free(&fake__g.streams);
    fake__vec_free(&fake__g.workers);
    fake__vec_free(&fake__g.events);
    fake__vec_free(&fake__g.graphs);
    fake__vec_free(&fake__g.bodies); /* emptied with their graphs */
    fake__vec_free(&fake__g.execs);
    fake__vec_free(&fake__g.libraries);
    fake__vec_free(&fake__g.kernels);
    fake__vec_free(&fake__g.captures);
    pthread_mutex_unlock(&fake__g.lock);
}
