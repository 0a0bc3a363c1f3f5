/* nccl.c — the cuda backend's process groups and allreduce, through NCCL loaded at run time.
 *
 * Loading. NCCL is dlopen'ed once per process, at the first describe or open of a cuda device
 * (thread-safe), from $ACG_NCCL_LIBRARY, else libnccl.so.2; its functions are resolved with
 * dlsym against nccl_abi.h, so the build needs no nccl.h. The capability's `collectives` says
 * whether it loaded, and its detail says the version or why not ("NCCL not found (libnccl.so.2):
 * <dlerror>", too old, a function missing): a device without NCCL refuses a group with
 * ACG_ERR_UNSUPPORTED before anything collective starts, as opencl does. Loading at describe
 * rather than at the first group is what lets the capability tell the truth; the library is
 * mapped, not initialized, until a group is made. NCCL older than 2.9 is refused: acg captures
 * allreduces like kernels, and 2.9 is the first NCCL whose collectives CUDA graphs may capture.
 *
 * acg's CUDA test driver pairs only with acg's test NCCL (tests/cuda_driver), and a real NCCL
 * only with a real driver: NCCL drives whatever libcuda its own CUDA runtime loads, never the
 * driver acg loaded from ACG_CUDA_DRIVER, so a real NCCL next to the test driver would reach
 * for a GPU that is not there. Under the test driver, then, only an ACG_NCCL_LIBRARY that is
 * acg's test NCCL gives collectives (the suites that set none see a device without them).
 *
 * A group. Rank 0 makes NCCL's unique id and broadcasts it through the comm (a zeroed id when
 * it failed); the ranks agree (min of an ok flag) before ncclCommInitRank, so none waits in
 * NCCL's bootstrap for a rank 0 that gave up, and agree again after it, so that every rank
 * fails together: a rank whose NCCL initialized while another's did not aborts its
 * communicator. NCCL uses the device of the current context, which is the device's primary
 * context (cuda.c), the one NCCL's own runtime would pick. One rank is a group too.
 *
 * The allreduce is ncclAllReduce in place, float sum, on the stream's CUstream. Inside a
 * capture CUDA records it like a kernel (relaxed mode, which NCCL accepts); every rank must
 * then capture and replay the same graphs in the same order, which acg's contract already
 * asks. NCCL calls on one communicator must not overlap, so a group's calls are serialized.
 * An update cannot rebuild the allreduce from the ledger (graph.c): capture again.
 *
 * Bits. NCCL does not add in rank order: the order is that of the algorithm and protocol NCCL
 * picks for the size, type and topology (ring, tree, NVLS, ...; NCCL_ALGO and NCCL_PROTO pin
 * them). Each of NCCL's algorithms reduces an element once and sends that result to every
 * rank, so every rank gets the same bits from one allreduce, as acg promises; but a cuda result
 * may differ from the cpu backend's (which adds in rank order) in the last bits, and a replay
 * may differ from an eager allreduce of the same data when NCCL chose another algorithm for
 * the graph (it may, e.g. with buffers registered for graphs).
 *
 * Errors. A failing NCCL call returns ACG_ERR_COMM, ACG_ERR_DEVICE for ncclUnhandledCudaError
 * (ACG_ERR_DEVICE_LOST when the device holds a fault: the CUDA call NCCL made failed for it),
 * with "<fn>: <call> failed with <result> (<code>): <ncclGetErrorString>" and NCCL's last error
 * where it has one. An allreduce first asks ncclCommGetAsyncError: a communicator that failed
 * asynchronously fails every later allreduce with ACG_ERR_COMM. A group's destroy is
 * ncclCommDestroy, which NCCL documents as a collective call among the ranks of a node: every
 * rank should destroy its group (unlike the cpu backend's, where a destroy is not collective);
 * after a device fault it is ncclCommAbort, which waits for no work the fault stopped. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "nccl_abi.h"

/* The loaded NCCL: its functions (NULL where it lacks an optional one), and what the
 * capability's detail says. Filled once, by load_nccl. */
static struct {
    bool ok;
#define ACG_NCCL_FIELD_(name, type, required) type name;
    ACG_NCCL_FUNCTIONS(ACG_NCCL_FIELD_)
#undef ACG_NCCL_FIELD_
    char detail[256]; /* "NCCL 2.28.9", or why there are no collectives */
} nccl;

static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

typedef struct cu_group {
    cu_device *dev;
    acg_nccl_comm nc;
    pthread_mutex_t lock; /* NCCL's calls on one communicator must not overlap */
} cu_group;

/* The core's group is a cu_group; these are the only casts between them. */
static inline cu_group *cgroup(acg__bk_group *g) { return (cu_group *)g; }
static inline acg__bk_group *bk_group(cu_group *g) { return (acg__bk_group *)g; }

/* ---- errors ------------------------------------------------------------------------------ */

static const char *result_name(int r) {
    static const char *const names[] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress",
    };
    return r >= 0 && r < ACG_NCCL_NUM_RESULTS ? names[r] : "an unknown NCCL result";
}

/* The status an NCCL result maps to, with the detail set (ncclSuccess: ACG_OK, nothing set).
 * NCCL's last error is the specific reason where its generic string is not, though it may be
 * an earlier failure's: it is labelled so. */
static acg_status nccl_check(int r, const char *fn, const char *call, acg_nccl_comm comm) {
    if (r == ACG_NCCL_SUCCESS) {
        return ACG_OK;
    }
    const char *text = nccl.ncclGetErrorString(r);
    const char *last = nccl.ncclGetLastError != NULL ? nccl.ncclGetLastError(comm) : NULL;
    bool has_last = last != NULL && last[0] != '\0';
    return acg__error(r == ACG_NCCL_UNHANDLED_CUDA_ERROR ? ACG_ERR_DEVICE : ACG_ERR_COMM,
                      "%s: %s failed with %s (%d): %s%s%.200s", fn, call, result_name(r), r,
                      text != NULL ? text : "no description",
                      has_last ? "; NCCL's last error: " : "", has_last ? last : "");
}

/* Calls NCCL function `name_` and checks its result (comm_: the communicator whose last error
 * may tell more, or NULL). */
#define NC(fn_, comm_, name_, ...) nccl_check(nccl.name_(__VA_ARGS__), fn_, #name_, comm_)

/* ---- the library, loaded once ------------------------------------------------------------ */

static void version_text(int v, char *out, size_t size) {
    if (v >= 10000) {
        snprintf(out, size, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    } else {
        snprintf(out, size, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
    }
}

/* Resolves every function; false (detail set) when a required one is missing. */
static bool resolve(void *h, const char *path) {
#define ACG_NCCL_RESOLVE_(name, type, required)                                                    \
    *(void **)&nccl.name = dlsym(h, #name);                                                        \
    if (nccl.name == NULL && (required)) {                                                         \
        snprintf(nccl.detail, sizeof nccl.detail, "NCCL lacks %s, which acg needs (%.120s)",       \
                 #name, path);                                                                     \
        return false;                                                                              \
    }
    ACG_NCCL_FUNCTIONS(ACG_NCCL_RESOLVE_)
#undef ACG_NCCL_RESOLVE_
    return true;
}

static bool open_nccl(void) {
    const char *path = acg__env_get("ACG_NCCL_LIBRARY");
    const bool named = path != NULL && path[0] != '\0';
    if (!named && acg__cu.test_driver) {
        snprintf(nccl.detail, sizeof nccl.detail,
                 "acg's CUDA test driver takes only acg's test NCCL, and ACG_NCCL_LIBRARY names "
                 "none");
        return false;
    }
    path = named ? path : "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        snprintf(nccl.detail, sizeof nccl.detail, "NCCL not found (%.120s): %s", path,
                 why != NULL ? why : "unknown error");
        return false;
    }
    if (!resolve(h, path)) {
        goto out_close;
    }
    const bool test_nccl = dlsym(h, "acgtest_nccl_calls") != NULL;
    if (test_nccl != acg__cu.test_driver) {
        snprintf(nccl.detail, sizeof nccl.detail,
                 test_nccl ? "acg's test NCCL runs only on acg's CUDA test driver (%.120s)"
                           : "not acg's test NCCL, so it would drive the system's CUDA driver, "
                             "not acg's test driver (%.120s)",
                 path);
        goto out_close;
    }
    int v = 0;
    int r = nccl.ncclGetVersion(&v);
    char text[32];
    version_text(v, text, sizeof text);
    if (r != ACG_NCCL_SUCCESS) {
        snprintf(nccl.detail, sizeof nccl.detail, "ncclGetVersion failed with %s (%d) (%.120s)",
                 result_name(r), r, path);
        goto out_close;
    }
    if (v < ACG_NCCL_MIN_VERSION) {
        snprintf(nccl.detail, sizeof nccl.detail,
                 "NCCL %s is older than 2.9, the first to capture collectives (%.120s)", text,
                 path);
        goto out_close;
    }
    snprintf(nccl.detail, sizeof nccl.detail, "NCCL %s", text);
    acg__log(ACG_LOG_INFO, "cuda: collectives through NCCL %s (%s)", text, path);
    return true;
out_close:
    dlclose(h);
    /* Its functions went with it. */
#define ACG_NCCL_FORGET_(name, type, required) nccl.name = NULL;
    ACG_NCCL_FUNCTIONS(ACG_NCCL_FORGET_)
#undef ACG_NCCL_FORGET_
    return false;
}

static void load_nccl(void) {
    nccl.ok = open_nccl();
    if (!nccl.ok) {
        acg__log(ACG_LOG_INFO, "cuda: no collectives: %s", nccl.detail);
    }
}

bool acg__cu_nccl_load(const char **detail) {
    pthread_once(&nccl_once, load_nccl);
    *detail = nccl.detail;
    return nccl.ok;
}

/* ---- groups ------------------------------------------------------------------------------ */

/* Whether every rank says ok: a collective, called at the same point on every rank. A failing
 * comm sets no detail here: a caller that failed first keeps its own. */
static acg_status agree(const acg_comm *comm, bool ok, bool *all) {
    int32_t v = ok ? 1 : 0;
    acg_status st = comm->allreduce_min_i32(comm->user, &v, 1);
    *all = st == ACG_OK && v == 1;
    return st;
}

/* The status of a comm callback `what` that returned cs: this rank's own earlier failure when
 * it had one (its detail is the one that says why), else the comm's. */
static acg_status comm_failure(acg_status local, acg_status cs, const char *what, const char *fn) {
    return local != ACG_OK
               ? local
               : acg__error(cs, "%s: the comm's %s failed (%s)", fn, what, acg_status_name(cs));
}

acg_status acg__cu_group_create(acg__bk_device *dev, const acg_comm *comm, acg__bk_group **out) {
    static const char fn[] = "acg_device_group_create";
    const char *why = NULL;
    if (!acg__cu_nccl_load(&why)) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: cuda: %s", fn, why);
    }
    cu_device *d = acg__cu_dev(dev);
    /* A failure here still takes part in the broadcast and the agreements below: the other
     * ranks learn of it there instead of waiting for ever. */
    cu_group *g = acg__calloc(1, sizeof *g);
    acg_status st = g != NULL ? acg__cu_enter(d, fn)
                              : acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    acg_nccl_unique_id id;
    memset(&id, 0, sizeof id);
    if (st == ACG_OK && comm->rank == 0) {
        st = NC(fn, NULL, ncclGetUniqueId, &id);
    }
    if (st != ACG_OK) {
        memset(&id, 0, sizeof id);
    }
    st = acg__cu_fault_or(d, st, fn);
    acg_status cs = comm->broadcast(comm->user, &id, sizeof id, 0);
    if (cs != ACG_OK) {
        st = comm_failure(st, cs, "broadcast", fn);
        goto out_free;
    }
    bool all = false;
    if ((cs = agree(comm, st == ACG_OK, &all)) != ACG_OK) {
        st = comm_failure(st, cs, "allreduce_min_i32", fn);
        goto out_free;
    }
    if (st == ACG_OK && !all) {
        st = acg__error(ACG_ERR_COMM,
                        "%s: another rank failed before NCCL's initialization (its own error "
                        "says why)",
                        fn);
    }
    if (st != ACG_OK) {
        goto out_free;
    }
    /* Returns once every rank called it. A failed initialization leaves no communicator:
     * NCCL frees what it made. */
    st = NC(fn, NULL, ncclCommInitRank, &g->nc, comm->n_ranks, id, comm->rank);
    if (st != ACG_OK) {
        g->nc = NULL;
        st = acg__cu_fault_or(d, st, fn);
    }
    cs = agree(comm, st == ACG_OK, &all);
    if (st == ACG_OK && (cs != ACG_OK || !all)) {
        st = cs != ACG_OK ? comm_failure(st, cs, "allreduce_min_i32", fn)
                          : acg__error(ACG_ERR_COMM,
                                       "%s: NCCL's initialization failed on another rank (its "
                                       "own error says why)",
                                       fn);
        /* The others gave up: abort waits for none of their work, as a destroy would. Its own
         * failure would say less than the one being returned. */
        nccl.ncclCommAbort(g->nc);
        g->nc = NULL;
    }
    if (st != ACG_OK) {
        goto out_free;
    }
    g->dev = d;
    pthread_mutex_init(&g->lock, NULL);
    acg__log(ACG_LOG_INFO, "cuda: rank %ld of %ld joined a device group (%s)", (long)comm->rank,
             (long)comm->n_ranks, nccl.detail);
    *out = bk_group(g);
    return ACG_OK;
out_free:
    acg__free(g);
    return st;
}

void acg__cu_group_destroy(acg__bk_group *group) {
    static const char fn[] = "acg_device_group_destroy";
    cu_group *g = cgroup(group);
    acg__cu_enter_release(g->dev, fn); /* the destroy tries even so */
    /* A destroy waits for the communicator's work, which a device fault stopped for good. A
     * failure is logged: the thread's error keeps what the caller's own last call said. */
    bool faulted = acg__cu_faulted(g->dev);
    int r = faulted ? nccl.ncclCommAbort(g->nc) : nccl.ncclCommDestroy(g->nc);
    if (r != ACG_NCCL_SUCCESS) {
        acg__log(faulted ? ACG_LOG_DEBUG : ACG_LOG_WARN, "%s: %s failed with %s (%d)", fn,
                 faulted ? "ncclCommAbort" : "ncclCommDestroy", result_name(r), r);
    }
    pthread_mutex_destroy(&g->lock);
    acg__free(g);
}

acg_status acg__cu_allreduce(acg__bk_stream *stream, acg__bk_group *group, acg__bk_mem *mem,
                             size_t off, size_t count) {
    static const char fn[] = "acg_allreduce";
    cu_stream *s = acg__cu_stream(stream);
    cu_group *g = cgroup(group);
    void *p = (void *)(uintptr_t)(acg__cu_mem(mem) + off);
    int async = ACG_NCCL_SUCCESS;
    ACG__TRY(acg__cu_enter(s->dev, fn));
    pthread_mutex_lock(&g->lock);
    acg_status st = NC(fn, g->nc, ncclCommGetAsyncError, g->nc, &async);
    if (st == ACG_OK && async != ACG_NCCL_SUCCESS) {
        const char *text = nccl.ncclGetErrorString(async);
        st = acg__error(ACG_ERR_COMM, "%s: the group failed before: NCCL reports %s (%d): %s", fn,
                        result_name(async), async, text != NULL ? text : "no description");
    }
    if (st == ACG_OK) {
        st = NC(fn, g->nc, ncclAllReduce, p, p, count, ACG_NCCL_FLOAT32, ACG_NCCL_SUM, g->nc,
                s->stream);
    }
    pthread_mutex_unlock(&g->lock);
    return acg__cu_fault_or(s->dev, st, fn);
}
