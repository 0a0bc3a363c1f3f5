/* comm_mpi.c — acg's process group over MPI (acg_mpi.h): two duplicates of the caller's
 * communicator, one per thread role, and every collective a non-blocking one polled against a
 * deadline, so a rank that hangs or leaves costs the others ACG_COMM_TIMEOUT_MS, not for ever.
 *
 * A collective that timed out cannot be cancelled (MPI forbids cancelling or freeing the request
 * of a non-blocking collective), and its ranks no longer make the same calls: the group is then
 * broken for good. So that a late rank can never make MPI write into memory its caller freed,
 * collectives work on this library's staging buffers, which a pending collective keeps.
 *
 * MPI's collectives with counts that differ between ranks are erroneous (Open MPI truncates,
 * fails, or ends the job), so allreduce_sum_f32 first gathers every rank's count: a mismatch is
 * found by every rank alike, before any data moved. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acg/acg_mpi.h>

#include "mpi-impl.h"

#define DEFAULT_TIMEOUT_MS 60000u
/* The range the cpu backend's device groups take too (a timeout in ns fits in 64 bits). */
#define MAX_TIMEOUT_MS (UINT64_MAX / 1000000u)
/* The largest piece of a broadcast or a min-reduction: MPI counts are ints, and a bounded piece
 * bounds the staging buffer. */
#define PIECE_BYTES ((size_t)1 << 20)
/* Floats per rank in one piece of allreduce_sum_f32: the gather buffer is n_ranks times this. */
#define SUM_PIECE ((size_t)65536)

/* One duplicate of the caller's communicator, used by one thread at a time. */
typedef struct channel {
    MPI_Comm comm;
    void *staging; /* what MPI reads and writes; reserve() grows it */
    size_t staging_bytes;
    /* The collective a failure left running (MPI_REQUEST_NULL: none), and the staging it may
     * still write: destroy frees that once the collective completed. */
    MPI_Request pending;
    void *pending_buf;
} channel;

struct acg_mpi_comm {
    acg_comm table;
    channel agree;  /* barrier, allreduce_min_i32, broadcast: the engine's thread */
    channel reduce; /* allreduce_sum_f32: a stream's worker */
    int rank;
    int n_ranks;
    uint64_t timeout_ms;
    atomic_bool broken;
    pthread_mutex_t lock; /* guards why */
    char why[512];        /* the first failure, which every later call repeats */
};

/* ---- errors ---------------------------------------------------------------------------------- */

static _Thread_local char last_error[1024];

const char *acg_mpi_last_error(void) { return last_error; }

/* Records the detail for acg_mpi_last_error() and for acg_last_error(), which acg reports when a
 * callback fails. */
static acg_status fail(acg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    acg_set_last_error(st, "%s", last_error);
    return st;
}

/* "MPI_Ibarrier failed: <MPI's text>" into buf. */
static void describe_mpi(char *buf, size_t size, const char *mpi_call, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "MPI error %d", rc);
    }
    snprintf(buf, size, "%s failed: %s", mpi_call, text);
}

/* Fails a callback and breaks the group: whatever the cause, this rank did not complete the
 * collective the other ranks are in, so no later call can be matched with theirs. */
static acg_status break_group(acg_mpi_comm *c, acg_status st, const char *call, const char *fmt,
                              ...) {
    char detail[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->lock);
    if (!atomic_load(&c->broken)) {
        snprintf(c->why, sizeof c->why, "%s: %s", call, detail);
        atomic_store(&c->broken, true);
    }
    pthread_mutex_unlock(&c->lock);
    return fail(st, "acg_mpi: %s: rank %d of %d: %s", call, c->rank, c->n_ranks, detail);
}

static acg_status check_group(acg_mpi_comm *c, const char *call) {
    if (!atomic_load(&c->broken)) {
        return ACG_OK;
    }
    char why[sizeof c->why];
    pthread_mutex_lock(&c->lock);
    memcpy(why, c->why, sizeof why);
    pthread_mutex_unlock(&c->lock);
    return fail(ACG_ERR_COMM, "acg_mpi: %s: rank %d of %d: the group broke earlier (%s)", call,
                c->rank, c->n_ranks, why);
}

/* A collective's first checks: a group that did not break, and its data given (name says
 * what it is; n how many of unit it holds). */
static acg_status check_call(acg_mpi_comm *c, const void *data, size_t n, const char *name,
                             const char *unit, const char *call) {
    acg_status st = check_group(c, call);
    if (st == ACG_OK && data == NULL && n > 0) {
        st = break_group(c, ACG_ERR_INVALID_ARGUMENT, call, "%s is NULL for %zu %s", name, n, unit);
    }
    return st;
}

/* ---- the timeout ----------------------------------------------------------------------------- */

static uint64_t timeout_ms = DEFAULT_TIMEOUT_MS;
static pthread_once_t timeout_once = PTHREAD_ONCE_INIT;

/* Digits only, 1 .. MAX_TIMEOUT_MS: strtoull would take blanks, a sign and a prefix of "5s". */
static bool parse_ms(const char *text, uint64_t *out) {
    uint64_t v = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > MAX_TIMEOUT_MS) {
            return false;
        }
    }
    *out = v;
    return v > 0;
}

/* Unset or empty: the default, as acg's own variables. */
static void read_timeout(void) {
    const char *v = getenv("ACG_COMM_TIMEOUT_MS");
    if (v != NULL && v[0] != '\0' && !parse_ms(v, &timeout_ms)) {
        timeout_ms = DEFAULT_TIMEOUT_MS;
        fprintf(stderr,
                "acg_mpi: ACG_COMM_TIMEOUT_MS=%.32s is not a whole number of milliseconds in "
                "1 .. %llu; using %u\n",
                v, (unsigned long long)MAX_TIMEOUT_MS, DEFAULT_TIMEOUT_MS);
    }
}

uint64_t acg_mpi__timeout_ms(void) {
    pthread_once(&timeout_once, read_timeout);
    return timeout_ms;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Polls req until it completes, MPI_Test fails, or the timeout passes. Open MPI progresses a
 * non-blocking collective only inside MPI calls, so this keeps calling MPI_Test: back to back
 * for the first 50 us (a collective between live ranks usually completes by then), then with
 * naps that double up to 1 ms, so that a rank waiting for a slow one leaves the core to it. On
 * a failure the request stays pending with ch's staging, which it may still write. */
static acg_status wait_request(acg_mpi_comm *c, channel *ch, MPI_Request *req, const char *call,
                               const char *mpi_call) {
    double start = now_ms();
    long nap_ns = 10000;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && done) {
            return ACG_OK;
        }
        double waited = now_ms() - start;
        if (rc != MPI_SUCCESS || waited >= (double)c->timeout_ms) {
            ch->pending = *req;
            ch->pending_buf = ch->staging;
            ch->staging = NULL;
            ch->staging_bytes = 0;
            if (rc != MPI_SUCCESS) {
                char text[MPI_MAX_ERROR_STRING + 64];
                describe_mpi(text, sizeof text, mpi_call, rc);
                return break_group(c, ACG_ERR_COMM, call, "%s", text);
            }
            return break_group(c, ACG_ERR_COMM, call,
                               "no answer from every rank within %llu ms (a rank failed or left)",
                               (unsigned long long)c->timeout_ms);
        }
        if (waited >= 0.05) {
            nanosleep(&(struct timespec){.tv_nsec = nap_ns}, NULL);
            nap_ns = nap_ns < 500000 ? nap_ns * 2 : 1000000;
        }
    }
}

/* Waits for the collective just started (rc: what its MPI_I* call returned). */
static acg_status finish(acg_mpi_comm *c, channel *ch, int rc, MPI_Request *req, const char *call,
                         const char *mpi_call) {
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING + 64];
        describe_mpi(text, sizeof text, mpi_call, rc);
        return break_group(c, ACG_ERR_COMM, call, "%s", text);
    }
    return wait_request(c, ch, req, call, mpi_call);
}

/* Makes ch's staging at least bytes long (its contents are not kept). */
static acg_status reserve(acg_mpi_comm *c, channel *ch, size_t bytes, const char *call) {
    if (ch->staging_bytes >= bytes) {
        return ACG_OK;
    }
    free(ch->staging);
    ch->staging = malloc(bytes);
    ch->staging_bytes = ch->staging != NULL ? bytes : 0;
    if (ch->staging == NULL) {
        return break_group(c, ACG_ERR_OUT_OF_MEMORY, call, "no memory for %zu bytes of staging",
                           bytes);
    }
    return ACG_OK;
}

/* ---- the callbacks --------------------------------------------------------------------------- */

static acg_status mpi_barrier(void *user) {
    acg_mpi_comm *c = user;
    acg_status st = check_group(c, "barrier");
    if (st != ACG_OK) {
        return st;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(c->agree.comm, &req);
    return finish(c, &c->agree, rc, &req, "barrier", "MPI_Ibarrier");
}

static acg_status mpi_allreduce_min_i32(void *user, int32_t *values, size_t n) {
    static const char call[] = "allreduce_min_i32";
    acg_mpi_comm *c = user;
    acg_status st = check_call(c, values, n, "values", "values", call);
    const size_t piece = PIECE_BYTES / sizeof(int32_t);
    for (size_t at = 0; at < n && st == ACG_OK; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        st = reserve(c, &c->agree, k * sizeof(int32_t), call);
        if (st == ACG_OK) {
            memcpy(c->agree.staging, values + at, k * sizeof(int32_t));
            MPI_Request req = MPI_REQUEST_NULL;
            int rc = MPI_Iallreduce(MPI_IN_PLACE, c->agree.staging, (int)k, MPI_INT32_T, MPI_MIN,
                                    c->agree.comm, &req);
            st = finish(c, &c->agree, rc, &req, call, "MPI_Iallreduce");
        }
        if (st == ACG_OK) {
            memcpy(values + at, c->agree.staging, k * sizeof(int32_t));
        }
    }
    return st;
}

static acg_status mpi_broadcast(void *user, void *data, size_t bytes, int32_t root) {
    static const char call[] = "broadcast";
    acg_mpi_comm *c = user;
    acg_status st = check_call(c, data, bytes, "data", "bytes", call);
    if (st == ACG_OK && (root < 0 || root >= c->n_ranks)) {
        st = break_group(c, ACG_ERR_INVALID_ARGUMENT, call, "root %d is not a rank (0 .. %d)",
                         (int)root, c->n_ranks - 1);
    }
    unsigned char *p = data;
    for (size_t at = 0; at < bytes && st == ACG_OK; at += PIECE_BYTES) {
        size_t k = bytes - at < PIECE_BYTES ? bytes - at : PIECE_BYTES;
        st = reserve(c, &c->agree, k, call);
        if (st == ACG_OK) {
            if (c->rank == root) {
                memcpy(c->agree.staging, p + at, k);
            }
            MPI_Request req = MPI_REQUEST_NULL;
            int rc = MPI_Ibcast(c->agree.staging, (int)k, MPI_BYTE, root, c->agree.comm, &req);
            st = finish(c, &c->agree, rc, &req, call, "MPI_Ibcast");
        }
        if (st == ACG_OK && c->rank != root) {
            memcpy(p + at, c->agree.staging, k);
        }
    }
    return st;
}

/* Gathers every rank's n into the reduce channel's staging: ACG_ERR_COMM (the group broken)
 * when a rank's differs, naming rank 0's and the first that differs, alike on every rank. */
static acg_status agree_count(acg_mpi_comm *c, size_t n, const char *call) {
    acg_status st = reserve(c, &c->reduce, (size_t)c->n_ranks * sizeof(uint64_t), call);
    if (st != ACG_OK) {
        return st;
    }
    uint64_t *counts = c->reduce.staging; /* (n_ranks) */
    counts[c->rank] = (uint64_t)n;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, counts, 1, MPI_UINT64_T,
                            c->reduce.comm, &req);
    if ((st = finish(c, &c->reduce, rc, &req, call, "MPI_Iallgather")) != ACG_OK) {
        return st;
    }
    for (int r = 1; r < c->n_ranks; r++) {
        if (counts[r] != counts[0]) {
            return break_group(c, ACG_ERR_COMM, call,
                               "rank 0 reduces %llu floats, rank %d %llu (every rank must pass "
                               "the same count; the values are unchanged)",
                               (unsigned long long)counts[0], r, (unsigned long long)counts[r]);
        }
    }
    return ACG_OK;
}

/* Gathers every rank's piece and adds the rows in rank order, rather than MPI_Allreduce with
 * MPI_SUM: MPI's reduction order depends on its algorithm (ranks, sizes, tuning), and float
 * addition is not associative, so ranks or runs could get different bits. */
static acg_status mpi_allreduce_sum_f32(void *user, float *values, size_t n) {
    static const char call[] = "allreduce_sum_f32";
    acg_mpi_comm *c = user;
    acg_status st = check_call(c, values, n, "values", "values", call);
    if (st == ACG_OK) {
        st = agree_count(c, n, call);
    }
    size_t rows = (size_t)c->n_ranks;
    if (st == ACG_OK && n > 0) {
        st = reserve(c, &c->reduce, rows * (n < SUM_PIECE ? n : SUM_PIECE) * sizeof(float), call);
    }
    for (size_t at = 0; at < n && st == ACG_OK; at += SUM_PIECE) {
        size_t k = n - at < SUM_PIECE ? n - at : SUM_PIECE;
        float *x = c->reduce.staging; /* (n_ranks, k): row r is rank r's piece */
        memcpy(x + (size_t)c->rank * k, values + at, k * sizeof(float));
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, (int)k, MPI_FLOAT,
                                c->reduce.comm, &req);
        st = finish(c, &c->reduce, rc, &req, call, "MPI_Iallgather");
        if (st == ACG_OK) {
            float *v = values + at;
            memcpy(v, x, k * sizeof(float));
            for (size_t r = 1; r < rows; r++) {
                const float *xr = x + r * k;
                for (size_t i = 0; i < k; i++) {
                    v[i] += xr[i];
                }
            }
        }
    }
    return st;
}

/* ---- creating and destroying ----------------------------------------------------------------- */

static const char *thread_level_name(int level) {
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

/* MPI is initialized, not finalized, and runs with MPI_THREAD_MULTIPLE. */
static acg_status check_mpi(const char *fn) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return fail(ACG_ERR_INVALID_ARGUMENT,
                    "%s: MPI is %s (initialize it with MPI_Init_thread(..., "
                    "MPI_THREAD_MULTIPLE, ...) first)",
                    fn, finalized ? "finalized already" : "not initialized");
    }
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE) {
        return fail(ACG_ERR_UNSUPPORTED,
                    "%s: MPI runs with %s, and acg calls MPI from two threads at once: use "
                    "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
                    fn, thread_level_name(level));
    }
    return ACG_OK;
}

/* Duplicates parent into ch->comm within the timeout, with MPI_ERRORS_RETURN. A duplicate left
 * pending writes ch->comm when it completes, so on ACG_ERR_COMM c must stay allocated. */
static acg_status duplicate(acg_mpi_comm *c, MPI_Comm parent, channel *ch) {
    static const char call[] = "acg_mpi_comm_create";
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Comm_idup(parent, &ch->comm, &req);
    acg_status st = finish(c, ch, rc, &req, call, "MPI_Comm_idup");
    if (st == ACG_OK) {
        rc = MPI_Comm_set_errhandler(ch->comm, MPI_ERRORS_RETURN);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING + 64];
            describe_mpi(text, sizeof text, "MPI_Comm_set_errhandler", rc);
            st = break_group(c, ACG_ERR_COMM, call, "%s", text);
        }
    }
    return st;
}

static void free_channel(channel *ch, bool mpi_alive) {
    if (ch->pending != MPI_REQUEST_NULL && mpi_alive) {
        /* A late rank may have completed it by now; otherwise MPI may still write pending_buf,
         * which then stays allocated. */
        int done = 0;
        if (MPI_Test(&ch->pending, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
            free(ch->pending_buf);
        }
    } else {
        free(ch->pending_buf); /* none, or MPI is finalized and writes nothing any more */
    }
    free(ch->staging);
}

acg_status acg_mpi_comm_create(MPI_Comm comm, acg_mpi_comm **out) {
    static const char fn[] = "acg_mpi_comm_create";
    if (out == NULL) {
        return fail(ACG_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    }
    acg_status st = check_mpi(fn);
    if (st != ACG_OK) {
        return st;
    }
    if (comm == MPI_COMM_NULL) {
        return fail(ACG_ERR_INVALID_ARGUMENT, "%s: comm is MPI_COMM_NULL", fn);
    }
    int inter = 0;
    MPI_Comm_test_inter(comm, &inter);
    if (inter) {
        return fail(ACG_ERR_INVALID_ARGUMENT,
                    "%s: comm is an intercommunicator; acg needs one group of ranks", fn);
    }
    acg_mpi_comm *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fail(ACG_ERR_OUT_OF_MEMORY, "%s: no memory for the group", fn);
    }
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->n_ranks);
    c->timeout_ms = acg_mpi__timeout_ms();
    c->agree = (channel){MPI_COMM_NULL, NULL, 0, MPI_REQUEST_NULL, NULL};
    c->reduce = c->agree;
    atomic_init(&c->broken, false);
    pthread_mutex_init(&c->lock, NULL);

    st = duplicate(c, comm, &c->agree);
    if (st != ACG_OK) {
        goto out_free_group;
    }
    st = duplicate(c, comm, &c->reduce);
    if (st != ACG_OK) {
        goto out_free_agree;
    }
    c->table = (acg_comm)ACG_COMM_INIT;
    c->table.user = c;
    c->table.barrier = mpi_barrier;
    c->table.allreduce_min_i32 = mpi_allreduce_min_i32;
    c->table.rank = c->rank;
    c->table.n_ranks = c->n_ranks;
    c->table.broadcast = mpi_broadcast;
    c->table.allreduce_sum_f32 = mpi_allreduce_sum_f32;
    *out = c;
    return ACG_OK;

out_free_agree:
    MPI_Comm_free(&c->agree.comm);
out_free_group:
    /* A duplicate that timed out writes into c when it completes: c then stays allocated. */
    if (c->agree.pending == MPI_REQUEST_NULL && c->reduce.pending == MPI_REQUEST_NULL) {
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
    return st;
}

const acg_comm *acg_mpi_comm_get(const acg_mpi_comm *c) { return c != NULL ? &c->table : NULL; }

acg_status acg_mpi_comm_destroy(acg_mpi_comm *c) {
    if (c == NULL) {
        return ACG_OK;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    acg_status st = ACG_OK;
    channel *channels[] = {&c->agree, &c->reduce};
    for (size_t i = 0; i < 2; i++) {
        channel *ch = channels[i];
        free_channel(ch, !finalized);
        int rc = finalized ? MPI_SUCCESS : MPI_Comm_free(&ch->comm);
        if (rc != MPI_SUCCESS && st == ACG_OK) {
            char text[MPI_MAX_ERROR_STRING + 64];
            describe_mpi(text, sizeof text, "MPI_Comm_free", rc);
            st = fail(ACG_ERR_COMM, "acg_mpi_comm_destroy: rank %d of %d: %s", c->rank, c->n_ranks,
                      text);
        }
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
    return st;
}

/* ---- MPI_COMM_WORLD, initialized on demand --------------------------------------------------- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized_mpi; /* acg_mpi_comm_default called MPI_Init_thread */

acg_status acg_mpi_comm_default(acg_mpi_comm **out) {
    static const char fn[] = "acg_mpi_comm_default";
    if (out == NULL) {
        return fail(ACG_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    }
    acg_status st = ACG_OK;
    pthread_mutex_lock(&init_lock);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized && !finalized) {
        int provided = MPI_THREAD_SINGLE;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING + 64];
            describe_mpi(text, sizeof text, "MPI_Init_thread", rc);
            st = fail(ACG_ERR_COMM, "%s: %s", fn, text);
        }
        initialized_mpi = rc == MPI_SUCCESS;
    }
    pthread_mutex_unlock(&init_lock);
    return st == ACG_OK ? acg_mpi_comm_create(MPI_COMM_WORLD, out) : st;
}

acg_status acg_mpi_finalize(void) {
    acg_status st = ACG_OK;
    pthread_mutex_lock(&init_lock);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (initialized_mpi && !finalized) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING + 64];
            describe_mpi(text, sizeof text, "MPI_Finalize", rc);
            st = fail(ACG_ERR_COMM, "acg_mpi_finalize: %s", text);
        }
    }
    initialized_mpi = false;
    pthread_mutex_unlock(&init_lock);
    return st;
}
