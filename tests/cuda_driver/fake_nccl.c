/* fake_nccl.c — acg's test NCCL: the functions of src/backends/cuda/nccl_abi.h with NCCL's ABI,
 * for one rank, on acg's CUDA test driver (see acgtest_nccl.h).
 *
 * It exists so that CI, which has no GPU and no second rank, still runs every line of the cuda
 * backend's collectives: a group's making (unique id, initialization, the agreements around
 * it), an allreduce eager and captured, and each failure NCCL can report. It links the test
 * driver and reaches its entry points through cuGetProcAddress_v2, as any other user of the
 * driver would, so its stream work is ordered, captured and replayed by the driver's own rules.
 *
 * What it simplifies:
 * - One rank: ncclCommInitRank with n_ranks above 1 is ncclInvalidUsage (a real bootstrap
 *   would wait for the others). An allreduce of one rank is a copy at most, and its reduction
 *   operator and type are checked, never applied.
 * - A unique id is this library's own (a magic, the process and a counter): an id it did not
 *   make, a zeroed one included, is ncclInvalidArgument.
 * - Results come at once: no nonblocking communicators, no ncclInProgress. The asynchronous
 *   error is whatever acgtest_nccl_set_async_error set, for every communicator.
 * - The last error (ncclGetLastError) is per thread, whatever the communicator.
 * - At most MAX_COMMS communicators at once (ncclSystemError beyond).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "acgtest_nccl.h"
#include "backends/cuda/nccl_abi.h"
#include "fake_common.h" /* tests/driver_common: the call ledger, knobs */

#define NCCL_API __attribute__((visibility("default")))
#define MAX_COMMS 64
#define ID_MAGIC "acg test NCCL id"

/* One index per function, for call counts and injection. */
enum fn_index {
#define FN_ENUM(name, type, required) FN_##name,
    ACG_NCCL_FUNCTIONS(FN_ENUM)
#undef FN_ENUM
        FN_COUNT
};

static const char *const fn_names[FN_COUNT] = {
#define FN_NAME(name, type, required) #name,
    ACG_NCCL_FUNCTIONS(FN_NAME)
#undef FN_NAME
};

struct acg_nccl_comm_st {
    int n_ranks, rank;
    CUevent ev; /* of the context current at initialization: the communicator's resources */
};

static struct {
    pthread_mutex_t lock; /* the live communicators and the ids made */
    struct acg_nccl_comm_st *comms[MAX_COMMS];
    int n_comms;
    uint32_t ids; /* unique ids made */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local char last_error[256];
static _Atomic unsigned long runs;
static _Atomic int async_error;

/* ---- the driver's entry points ------------------------------------------------------------ */

static struct {
    PFN_cuMemcpyDtoDAsync_v3020 copy;
    PFN_cuLaunchHostFunc_v10000 host;
    PFN_cuEventCreate_v2000 event_create;
    PFN_cuEventDestroy_v4000 event_destroy;
} drv;

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name, int version) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||
        q != CU_GET_PROC_ADDRESS_SUCCESS) {
        fprintf(stderr, "acg test NCCL: the test driver serves no %s\n", name);
        return NULL;
    }
    return fn;
}

static void resolve_driver(void) {
    *(void **)&drv.copy = entry("cuMemcpyDtoDAsync", 3020);
    *(void **)&drv.host = entry("cuLaunchHostFunc", 10000);
    *(void **)&drv.event_create = entry("cuEventCreate", 2000);
    *(void **)&drv.event_destroy = entry("cuEventDestroy", 4000);
}

/* ---- call counts, injected failures, the last error ---------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int version = 22809;

/* The texts that report a failure are left alone by "any function". */
static int counted(int fn) { return fn != FN_ncclGetErrorString && fn != FN_ncclGetLastError; }

static unsigned long call_counts[FN_COUNT];
static struct fake_ledger ledger =
    FAKE_LEDGER_INIT("acg test NCCL", fn_names, call_counts, counted);

static void load_config(void) {
    version = (int)fake__env_long(ledger.driver, "ACGTEST_NCCL_VERSION", version, 0, 999999);
    fake__env_fail(&ledger, "ACGTEST_NCCL_FAIL");
}

/* Counts a call of fn and returns the result an injected failure makes it return, or
 * ncclSuccess to go on. */
static int enter(enum fn_index fn) {
    pthread_once(&config_once, load_config);
    int code = fake__ledger_enter(&ledger, (int)fn);
    if (code != ACG_NCCL_SUCCESS) {
        snprintf(last_error, sizeof last_error, "%s: a failure injected by the test", fn_names[fn]);
    }
    return code;
}

#define ENTER(name) FAKE_LEDGER_ENTER(enter, FN_##name)

/* Returns r after saying why in the last error. */
static int fail(int r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return r;
}

/* (g.lock held) Whether c is a live communicator: checked by membership, never read first. */
static int comm_live(const struct acg_nccl_comm_st *c) {
    for (int i = 0; i < g.n_comms; i++) {
        if (g.comms[i] == c) {
            return 1;
        }
    }
    return 0;
}

/* ---- NCCL's functions --------------------------------------------------------------------- */

NCCL_API int ncclGetVersion(int *v) {
    ENTER(ncclGetVersion);
    if (v == NULL) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclGetVersion: version is NULL");
    }
    *v = version;
    return ACG_NCCL_SUCCESS;
}

NCCL_API const char *ncclGetErrorString(int r) {
    enter(FN_ncclGetErrorString);
    switch (r) {
    case ACG_NCCL_SUCCESS:
        return "no error";
    case ACG_NCCL_UNHANDLED_CUDA_ERROR:
        return "a CUDA call failed";
    case ACG_NCCL_SYSTEM_ERROR:
        return "a system call failed";
    case ACG_NCCL_INTERNAL_ERROR:
        return "internal error";
    case ACG_NCCL_INVALID_ARGUMENT:
        return "invalid argument";
    case ACG_NCCL_INVALID_USAGE:
        return "invalid usage";
    case ACG_NCCL_REMOTE_ERROR:
        return "a remote rank failed";
    case ACG_NCCL_IN_PROGRESS:
        return "in progress";
    default:
        return "unknown result";
    }
}

NCCL_API const char *ncclGetLastError(acg_nccl_comm comm) {
    (void)comm;
    enter(FN_ncclGetLastError);
    return last_error;
}

NCCL_API int ncclGetUniqueId(acg_nccl_unique_id *id) {
    ENTER(ncclGetUniqueId);
    if (id == NULL) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclGetUniqueId: id is NULL");
    }
    memset(id, 0, sizeof *id);
    pthread_mutex_lock(&g.lock);
    uint32_t n = ++g.ids;
    pthread_mutex_unlock(&g.lock);
    snprintf(id->internal, sizeof id->internal, "%s %ld %u", ID_MAGIC, (long)getpid(), n);
    return ACG_NCCL_SUCCESS;
}

NCCL_API int ncclCommInitRank(acg_nccl_comm *out, int n_ranks, acg_nccl_unique_id id, int rank) {
    ENTER(ncclCommInitRank);
    if (out == NULL) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclCommInitRank: comm is NULL");
    }
    *out = NULL;
    if (n_ranks < 1 || rank < 0 || rank >= n_ranks) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclCommInitRank: rank %d of %d ranks", rank,
                    n_ranks);
    }
    if (strncmp(id.internal, ID_MAGIC, strlen(ID_MAGIC)) != 0) {
        return fail(ACG_NCCL_INVALID_ARGUMENT,
                    "ncclCommInitRank: the unique id was not made by ncclGetUniqueId");
    }
    if (n_ranks > 1) {
        return fail(ACG_NCCL_INVALID_USAGE,
                    "ncclCommInitRank: acg's test NCCL runs one rank only, not %d", n_ranks);
    }
    pthread_once(&drv_once, resolve_driver);
    struct acg_nccl_comm_st *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fail(ACG_NCCL_SYSTEM_ERROR, "ncclCommInitRank: out of memory");
    }
    c->n_ranks = n_ranks;
    c->rank = rank;
    CUresult cr = drv.event_create != NULL ? drv.event_create(&c->ev, CU_EVENT_DISABLE_TIMING)
                                           : CUDA_ERROR_NOT_FOUND;
    if (cr != CUDA_SUCCESS) {
        free(c);
        return fail(ACG_NCCL_UNHANDLED_CUDA_ERROR,
                    "ncclCommInitRank: cuEventCreate failed with CUDA error %d", (int)cr);
    }
    pthread_mutex_lock(&g.lock);
    int full = g.n_comms == MAX_COMMS;
    if (!full) {
        g.comms[g.n_comms++] = c;
    }
    pthread_mutex_unlock(&g.lock);
    if (full) {
        drv.event_destroy(c->ev);
        free(c);
        return fail(ACG_NCCL_SYSTEM_ERROR, "ncclCommInitRank: %d communicators already live",
                    MAX_COMMS);
    }
    *out = c;
    return ACG_NCCL_SUCCESS;
}

/* Destroy and abort: nothing of one rank is in flight that either would wait for. */
static int comm_free(acg_nccl_comm c, const char *fn) {
    pthread_mutex_lock(&g.lock);
    int i = 0;
    while (i < g.n_comms && g.comms[i] != c) {
        i++;
    }
    if (i == g.n_comms) {
        pthread_mutex_unlock(&g.lock);
        return fail(ACG_NCCL_INVALID_ARGUMENT, "%s: %p is not a live communicator", fn, (void *)c);
    }
    g.comms[i] = g.comms[--g.n_comms];
    pthread_mutex_unlock(&g.lock);
    CUresult cr = drv.event_destroy(c->ev);
    free(c);
    return cr == CUDA_SUCCESS ? ACG_NCCL_SUCCESS
                              : fail(ACG_NCCL_UNHANDLED_CUDA_ERROR,
                                     "%s: cuEventDestroy failed with CUDA error %d", fn, (int)cr);
}

NCCL_API int ncclCommDestroy(acg_nccl_comm comm) {
    ENTER(ncclCommDestroy);
    return comm_free(comm, "ncclCommDestroy");
}

NCCL_API int ncclCommAbort(acg_nccl_comm comm) {
    ENTER(ncclCommAbort);
    return comm_free(comm, "ncclCommAbort");
}

NCCL_API int ncclCommGetAsyncError(acg_nccl_comm comm, int *err) {
    ENTER(ncclCommGetAsyncError);
    pthread_mutex_lock(&g.lock);
    int live = comm_live(comm);
    pthread_mutex_unlock(&g.lock);
    if (!live || err == NULL) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclCommGetAsyncError: %s",
                    live ? "asyncError is NULL" : "not a live communicator");
    }
    *err = atomic_load(&async_error);
    return ACG_NCCL_SUCCESS;
}

static void count_run(void *unused) {
    (void)unused;
    atomic_fetch_add(&runs, 1);
}

static size_t type_size(int type) {
    static const unsigned char sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return type >= 0 && type < (int)sizeof sizes ? sizes[type] : 0;
}

NCCL_API int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                           acg_nccl_comm comm, struct CUstream_st *stream) {
    ENTER(ncclAllReduce);
    pthread_mutex_lock(&g.lock);
    int live = comm_live(comm);
    pthread_mutex_unlock(&g.lock);
    size_t size = type_size(type);
    const char *bad = !live                                         ? "not a live communicator"
                      : size == 0                                   ? "an unknown data type"
                      : op < 0 || op > 4                            ? "an unknown reduction"
                      : count > SIZE_MAX / size                     ? "too many elements"
                      : count > 0 && (send == NULL || recv == NULL) ? "a NULL buffer"
                                                                    : NULL;
    if (bad != NULL) {
        return fail(ACG_NCCL_INVALID_ARGUMENT, "ncclAllReduce: %s", bad);
    }
    if (count == 0) {
        return ACG_NCCL_SUCCESS;
    }
    /* One rank's sum is its own values: in place, nothing to do; else a copy, in stream order. */
    CUresult cr = drv.copy != NULL && drv.host != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    if (cr == CUDA_SUCCESS && send != recv) {
        cr = drv.copy((CUdeviceptr)(uintptr_t)recv, (CUdeviceptr)(uintptr_t)send, count * size,
                      stream);
    }
    if (cr == CUDA_SUCCESS) {
        cr = drv.host(stream, count_run, NULL);
    }
    return cr == CUDA_SUCCESS
               ? ACG_NCCL_SUCCESS
               : fail(ACG_NCCL_UNHANDLED_CUDA_ERROR,
                      "ncclAllReduce: the stream refused the work (CUDA error %d)", (int)cr);
}

/* Each function has the pointer type nccl_abi.h gives it, the type the backend calls it
 * through, or this does not compile. */
#define FN_CHECK(name, type, required)                                                             \
    _Static_assert(_Generic(&name, type : 1, default : 0), #name " differs from nccl_abi.h");
ACG_NCCL_FUNCTIONS(FN_CHECK)
#undef FN_CHECK

/* ---- control API ---------------------------------------------------------------------------- */

ACGTEST_NCCL_API void acgtest_nccl_fail(const char *name, unsigned nth, int code) {
    pthread_once(&config_once, load_config);
    fake__ledger_arm(&ledger, name, nth, code);
}

ACGTEST_NCCL_API unsigned long acgtest_nccl_calls(const char *name) {
    pthread_once(&config_once, load_config);
    return fake__ledger_calls(&ledger, name);
}

ACGTEST_NCCL_API unsigned long acgtest_nccl_runs(void) { return atomic_load(&runs); }

ACGTEST_NCCL_API long acgtest_nccl_live(void) {
    pthread_mutex_lock(&g.lock);
    long n = g.n_comms;
    pthread_mutex_unlock(&g.lock);
    return n;
}

ACGTEST_NCCL_API void acgtest_nccl_set_async_error(int code) { atomic_store(&async_error, code); }

ACGTEST_NCCL_API void acgtest_nccl_reset_counts(void) {
    fake__ledger_reset(&ledger);
    atomic_store(&runs, 0);
}
