/* fake_common.h — what acg's test drivers share (tests/cuda_driver's CUDA driver and NCCL,
 * tests/ze_driver's Level Zero driver): the small containers their object sets and graphs are
 * made of, the workers that run their streams and engines, the start of an entry point and its
 * checks, the ledger that counts each entry point's calls and the live objects and fails the
 * call a test arms, the end of an init, and the parsing of their environment knobs. Built as a
 * static library each driver links (tests/driver_common/CMakeLists.txt); nothing here is exported
 * from a driver. */
#ifndef ACG_TESTS_FAKE_COMMON_H
#define ACG_TESTS_FAKE_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- small containers --------------------------------------------------------------------- */

/* Room for one more element in the array v of n elements of `size` bytes with room for *cap:
 * v, or v reallocated to twice the room (8 at first) when it is full, with *cap updated; NULL
 * when out of memory, v left as it was. */
void *fake__grow(void *v, size_t n, size_t *cap, size_t size);

/* A set of objects, searched by address: handles are checked by membership, never by reading
 * through a pointer that may already be freed. */
struct fake_vec {
    void **v;
    size_t n, cap;
};
int fake__vec_push(struct fake_vec *vec, void *p); /* 0, or -1 when out of memory */
int fake__vec_has(const struct fake_vec *vec, const void *p);
void fake__vec_remove(struct fake_vec *vec, const void *p); /* keeps the others' order */
void fake__vec_free(struct fake_vec *vec);

/* A sorted set of indices (a capture's frontier, a graph node's dependencies). */
struct fake_ids {
    size_t *v;
    size_t n, cap;
};
int fake__ids_add(struct fake_ids *ids, size_t id); /* 0, or -1 when out of memory */
int fake__ids_union(struct fake_ids *dst, const struct fake_ids *src);
void fake__ids_free(struct fake_ids *ids);

/* ---- workers ------------------------------------------------------------------------------ */

/* A queued job: the head of each driver's own (a stream's op, an engine's command). */
struct fake_job {
    struct fake_job *next;
};

/* A host thread running jobs in order under its driver's lock, as a GPU stream or engine does:
 * `submitted` counts jobs ever queued and `completed` those finished, in order, so a point in its
 * work is a count. A job stays queued while it runs, so a synchronization sees it pending. */
struct fake_worker {
    /* Set by its owner before fake__worker_start; the rest starts zeroed. */
    pthread_mutex_t *lock;    /* the driver's */
    pthread_cond_t *progress; /* the driver's: broadcast when a job completes, and at exit */
    void *owner;              /* the stream or engine it runs the work of */
    /* (lock held; may let go of it while the work runs) Runs a job. */
    void (*run)(struct fake_worker *w, struct fake_job *job);
    /* (lock held) Frees a job that ran. */
    void (*done)(struct fake_worker *w, struct fake_job *job);
    pthread_t thread;
    pthread_cond_t work;          /* signalled when a job is queued or quit is set */
    struct fake_job *head, *tail; /* queued jobs, head running or next */
    uint64_t submitted;           /* jobs ever queued */
    uint64_t completed;           /* jobs finished; completed <= submitted */
    int quit;                     /* set: the thread returns once the queue is empty */
    int exited;                   /* the thread returned (it can be joined) */
};
/* (lock held) Starts the worker's thread: 0, or -1 when it cannot (nothing left). */
int fake__worker_start(struct fake_worker *w);
/* (lock held) Queues a job; returns its number, what `completed` reaches once it ran. */
uint64_t fake__worker_push(struct fake_worker *w, struct fake_job *job);
/* (lock held) Makes the thread return once the queue is empty (its owner joins it). */
void fake__worker_quit(struct fake_worker *w);
/* Whether jobs are queued or running. */
static inline int fake__worker_busy(const struct fake_worker *w) {
    return w->completed < w->submitted;
}

/* ---- an entry point's checks -------------------------------------------------------------- */

/* The start of every entry point: counts its call `ep` with the driver's `enter` (which returns
 * fake__ledger_enter's code: the one an injected failure makes the call return, 0 to go on) and
 * returns that code at once when there is one. */
#define FAKE_LEDGER_ENTER(enter, ep)                                                               \
    do {                                                                                           \
        int fake_injected_ = (int)enter(ep);                                                       \
        if (fake_injected_ != 0) {                                                                 \
            return fake_injected_;                                                                 \
        }                                                                                          \
    } while (0)

/* For an entry point whose result is the variable `r` and whose cleanup chain starts at the
 * label given (both drivers' APIs spell success 0): FAKE_FAIL_IF sets r to result and jumps
 * when cond holds; FAKE_CHECK sets r to expr's result and jumps when that is not success. */
#define FAKE_FAIL_IF(cond, result, label)                                                          \
    do {                                                                                           \
        if (cond) {                                                                                \
            r = (result);                                                                          \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)
#define FAKE_CHECK(expr, label)                                                                    \
    do {                                                                                           \
        if ((r = (expr)) != 0) {                                                                   \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* ---- the ledger of calls ------------------------------------------------------------------ */

/* A driver's call counts, its one armed failure, its misuse count and its count of live objects,
 * under a lock of their own: counting must not wait behind a call that holds the driver's lock.
 * Entry points are indices 0 .. n - 1; a failure armed for "any entry point" (the name NULL or "*")
 * fires on the nth call of any that `counted` takes (all, when it is NULL). */
struct fake_ledger {
    const char *driver;       /* prefixes what it says on stderr */
    int n;                    /* entry points */
    const char *const *names; /* (n) their names */
    unsigned long *counts;    /* (n) calls of each */
    int (*counted)(int ep);   /* (optional) whether "any" and the total take it */
    pthread_mutex_t lock;
    unsigned long violations;
    long live; /* objects made less those released (fake__ledger_live) */
    struct {
        int armed;
        int ep;        /* an entry point, or -1 for any */
        unsigned left; /* calls until it fires, this one included */
        int code;
    } injection;
};
/* A ledger of the entry points named in the array `names`, counting into the array `counts`
 * (both of one slot per entry point). */
#define FAKE_LEDGER_INIT(driver_, names_, counts_, counted_)                                       \
    {                                                                                              \
        .driver = (driver_), .n = (int)(sizeof(counts_) / sizeof((counts_)[0])),                   \
        .names = (names_), .counts = (counts_), .counted = (counted_),                             \
        .lock = PTHREAD_MUTEX_INITIALIZER                                                          \
    }

/* The index of the entry point `name`, or -1. */
int fake__ledger_index(const struct fake_ledger *l, const char *name);
/* Counts a call of `ep`; the code an armed failure makes it return, or 0 to go on. */
int fake__ledger_enter(struct fake_ledger *l, int ep);
/* Arms a failure of the nth call of `name` (NULL or "*": any) with `code`; nth 0, or a name
 * the driver does not have (said on stderr), disarms. */
void fake__ledger_arm(struct fake_ledger *l, const char *name, unsigned nth, int code);
/* Calls of `name` so far; with NULL, of all that `counted` takes; 0 for an unknown name. */
unsigned long fake__ledger_calls(struct fake_ledger *l, const char *name);
/* Zeroes the call counts and the misuse count (the live count is no count of calls, and stays). */
void fake__ledger_reset(struct fake_ledger *l);
/* Counts objects made (delta 1) or released (-1). What a teardown or an unload frees for an owner
 * that leaked it is not released: it still counts, so a leak hidden by a teardown still shows. */
void fake__ledger_live(struct fake_ledger *l, long delta);
long fake__ledger_live_count(struct fake_ledger *l);
/* Says a misuse on stderr and counts it. */
void fake__ledger_violation(struct fake_ledger *l, const char *fmt, va_list ap);
unsigned long fake__ledger_violations(struct fake_ledger *l);

/* ---- initialization ----------------------------------------------------------------------- */

/* The end of a driver's init (zeInit, cuInit) once its flags were checked: the failure its
 * *_INIT_FAIL knob asks for, returned every time, else 0 once *initialized is set under `lock`,
 * the driver's. */
int fake__init(int init_fail, pthread_mutex_t *lock, int *initialized);

/* ---- environment knobs -------------------------------------------------------------------- */

/* An integer knob in [lo, hi] (decimal, or hexadecimal after 0x), or `def` when unset; a bad
 * value is said on stderr (after `driver`) and ignored, so a typo does not silently test
 * something else. */
long fake__env_long(const char *driver, const char *name, long def, long lo, long hi);
/* Calls fn(token, ctx) for each token of a list separated by commas or spaces. */
void fake__env_tokens(const char *list, void (*fn)(const char *token, void *ctx), void *ctx);
/* The entry points the variable `var` lists, marked in hidden[] (one per entry point); an
 * unknown name is said on stderr. */
void fake__env_hide(struct fake_ledger *l, const char *var, char *hidden);
/* The failure the variable `var` arms: "name:nth:code" (the name may be "*", the code decimal
 * or 0x hexadecimal); anything else is said on stderr and ignored. */
void fake__env_fail(struct fake_ledger *l, const char *var);

#endif
