/* pool.c — the cpu device's thread pool: a kernel launch split into the parts its definition
 * offers (acg.h: cpu_parts) runs on the stream's worker and the pool's threads at once.
 *
 * The partition is the kernel's: the launch asks how many parts it is worth, at most the
 * device's thread count, and each part computes the elements it owns exactly as the whole
 * function would. Which thread runs which part varies; the parts do not, so results do not
 * depend on the thread count. The worker that runs the op is the submitter: it publishes the
 * dispatch, claims parts like every pool thread, and returns when all of them finished. One
 * dispatch has the pool at a time; a worker of another stream that finds it taken runs its
 * parts itself, one after another.
 *
 * A dispatch is one 64-bit word, (epoch << 32) | (n_parts << 16) | next part, so a thread
 * claims a part of one dispatch with one compare-and-swap and can never take a part of the
 * next one by mistake. Only after a claim does it read the dispatch's op: the dispatch cannot
 * end before the part it claimed does, so the op is still the one published.
 *
 * A decode step is some sixty kernels of 10-50 µs, so pool threads spin a little (POOL_SPIN_NS)
 * after their last part before they sleep, and a sleeping one is woken but never waited for:
 * the submitter runs every part nobody claimed. Where threads outnumber free cores, a spinning
 * pool thread can hold the core its submitter needs, and a preempted one can hold a claimed
 * part, so the spin is bounded in time, yields the core every POOL_YIELD_POLLS polls, and the
 * submitter yields while it waits. `acg bench split` measures the hand-off (about 1-2 µs on a
 * two-core machine) and where splitting starts to pay.
 *
 * Sleeping is queue.c's Dekker pattern: the publisher swaps the word in, then looks for
 * sleepers; a sleeper announces itself, then re-checks the word under the mutex the publisher
 * takes to wake it. Every operation of it is sequentially consistent, and both announcements
 * are read-modify-writes (ThreadSanitizer does not model fences). */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

#define POOL_SPIN_NS 30000ull /* a pool thread polls this long for the next dispatch */
#define POOL_YIELD_POLLS 256  /* a spinning pool thread yields the core this often */
#define POOL_WAIT_SPINS 200   /* the submitter polls for parts in flight, then yields */

struct cpu_pool {
    _Alignas(64) _Atomic uint64_t word; /* the dispatch: epoch, n_parts, next part */
    _Atomic(const cpu_kernel *) job;    /* its op; read only after a claim */
    uint32_t epoch;                     /* of the latest dispatch (under busy) */
    _Alignas(64) _Atomic uint32_t done; /* parts of the dispatch finished */
    _Alignas(64) _Atomic int sleeping;  /* pool threads asleep on `wake` */
    _Atomic int stop;
    uint32_t threads; /* with the submitting worker; read-only after creation */
    uint32_t n_started;
    pthread_t *thread;    /* (threads - 1) */
    pthread_mutex_t busy; /* held by the dispatch that has the pool */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* broadcast when a dispatch is published or stop set, sleeping > 0 */
};

static inline uint32_t word_epoch(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint32_t word_parts(uint64_t w) { return (uint32_t)(w >> 16) & 0xffffu; }
static inline uint32_t word_next(uint64_t w) { return (uint32_t)w & 0xffffu; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Claims the next part of dispatch `epoch`: true with its index and the part count, false
 * when none is left (or a later dispatch replaced it). */
static bool claim(cpu_pool *p, uint32_t epoch, uint32_t *part, uint32_t *n_parts) {
    uint64_t w = atomic_load(&p->word);
    for (;;) {
        if (word_epoch(w) != epoch || word_next(w) >= word_parts(w)) {
            return false;
        }
        if (atomic_compare_exchange_weak(&p->word, &w, w + 1)) {
            *part = word_next(w);
            *n_parts = word_parts(w);
            return true;
        }
    }
}

/* Runs parts of dispatch `epoch` until none is left to claim. */
static void run_parts(cpu_pool *p, uint32_t epoch) {
    uint32_t part, n_parts;
    while (claim(p, epoch, &part, &n_parts)) {
        const cpu_kernel *k = atomic_load_explicit(&p->job, memory_order_relaxed);
        k->part_fn(k->args, k->global, part, n_parts);
        atomic_fetch_add(&p->done, 1);
    }
}

/* Waits until the dispatch after `seen` is published or the pool stops; returns its word. */
static uint64_t await_dispatch(cpu_pool *p, uint32_t seen) {
    uint64_t w = atomic_load(&p->word);
    uint64_t start = 0;
    for (uint32_t i = 1; word_epoch(w) == seen && !atomic_load(&p->stop); i++) {
        if (i % 64 == 0) {
            uint64_t t = now_ns();
            start = start != 0 ? start : t;
            if (t - start >= POOL_SPIN_NS) {
                break;
            }
        }
        if (i % POOL_YIELD_POLLS == 0) {
            /* A worker that shares this core (more threads than free cores) runs first. */
            sched_yield();
        }
        cpu_relax();
        w = atomic_load(&p->word);
    }
    if (word_epoch(w) != seen || atomic_load(&p->stop)) {
        return w;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleeping, 1);
    while (word_epoch(w = atomic_load(&p->word)) == seen && !atomic_load(&p->stop)) {
        pthread_cond_wait(&p->wake, &p->mu);
    }
    atomic_fetch_sub(&p->sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return w;
}

static void *pool_thread(void *arg) {
    cpu_pool *p = arg;
    uint32_t seen = 0; /* the epoch before the first dispatch */
    for (;;) {
        uint64_t w = await_dispatch(p, seen);
        if (atomic_load(&p->stop)) {
            break;
        }
        seen = word_epoch(w);
        run_parts(p, seen);
    }
    return NULL;
}

static void pool_stop(cpu_pool *p) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n_started; i++) {
        pthread_join(p->thread[i], NULL);
    }
}

static void pool_free(cpu_pool *p) {
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->busy);
    acg__free(p->thread);
    acg__free(p);
}

acg_status acg__cpu_pool_create(uint32_t threads, cpu_pool **out) {
    *out = NULL;
    if (threads <= 1) {
        return ACG_OK; /* the worker alone: no pool */
    }
    cpu_pool *p = acg__alloc_aligned(sizeof *p, _Alignof(cpu_pool));
    if (p == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
    }
    memset(p, 0, sizeof *p);
    p->thread = acg__calloc(threads - 1, sizeof *p->thread);
    if (p->thread == NULL) {
        acg__free(p);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
    }
    p->threads = threads;
    pthread_mutex_init(&p->busy, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    for (; p->n_started < threads - 1; p->n_started++) {
        int rc = pthread_create(&p->thread[p->n_started], NULL, pool_thread, p);
        if (rc != 0) {
            uint32_t started = p->n_started;
            pool_stop(p);
            pool_free(p);
            return acg__error(ACG_ERR_DEVICE,
                              "acg_device_open: pthread_create failed (%d) starting cpu pool "
                              "thread %u of %u",
                              rc, started + 1, threads - 1);
        }
    }
    *out = p;
    return ACG_OK;
}

void acg__cpu_pool_destroy(cpu_pool *p) {
    if (p != NULL) {
        pool_stop(p);
        pool_free(p);
    }
}

void acg__cpu_pool_run(cpu_pool *p, const cpu_kernel *k, cpu_split *split) {
    uint32_t n = p != NULL ? k->parts(k->args, k->global, p->threads) : 1;
    if (split != NULL) {
        *split = (cpu_split){1, 0};
    }
    if (n <= 1) {
        k->fn(k->args, k->global);
        return;
    }
    n = n < p->threads ? n : p->threads;
    if (split != NULL) {
        split->parts = n;
    }
    if (pthread_mutex_trylock(&p->busy) != 0) {
        /* Another stream's kernel has the pool: the same parts, on this worker alone (which a
         * trace tells as one part: one thread ran it). */
        if (split != NULL) {
            split->parts = 1;
        }
        for (uint32_t part = 0; part < n; part++) {
            k->part_fn(k->args, k->global, part, n);
        }
        return;
    }
    uint32_t epoch = ++p->epoch;
    if (epoch == 0) {
        epoch = ++p->epoch; /* 0 is the epoch pool threads start from */
    }
    atomic_store_explicit(&p->job, k, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    /* Publish (releasing job and done), then look for sleepers: pairs with their
     * announcement in await_dispatch. */
    atomic_exchange(&p->word, (uint64_t)epoch << 32 | (uint64_t)n << 16);
    if (atomic_load(&p->sleeping) != 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_parts(p, epoch);
    /* Parts claimed by pool threads are running: they end without waiting for anything. */
    uint64_t t0 = split != NULL ? now_ns() : 0;
    for (uint32_t i = 0; atomic_load(&p->done) < n; i++) {
        if (i < POOL_WAIT_SPINS) {
            cpu_relax();
        } else {
            sched_yield();
        }
    }
    if (split != NULL) {
        split->wait_ns = now_ns() - t0;
    }
    pthread_mutex_unlock(&p->busy);
}
