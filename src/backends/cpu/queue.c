/* queue.c — the cpu backend's stream: a worker thread draining a ring of ops.
 *
 * The submitting thread writes an op into the ring and publishes it by advancing `head`; the
 * worker runs ops in order and advances `done`. Both sides poll before sleeping, because a
 * mutex/condvar round trip costs ~25 µs on small machines, and waking a thread whose (virtual)
 * CPU went idle costs ~200 µs on a virtual machine, while a decode step's launches come
 * microseconds apart and its steps tens of microseconds apart. A side polls with `pause` for
 * SPIN_NS, then keeps polling but gives up its core between polls (sched_yield: any runnable
 * thread goes first, and the CPU never idles) until POLL_NS, and only then sleeps. The one
 * exception is a thread waiting for a stream of a device whose threads fill the machine's cores
 * (acg__cpu_stream_wait): it polls only while waits have been short, since polling there takes
 * a core from the kernels it waits for. Sleeping uses
 * the Dekker pattern with sequentially consistent atomics: a side publishes its progress, then
 * checks whether the other sleeps; the sleeper announces itself, then re-checks for progress under
 * the mutex the waker takes to signal. Every operation of that pattern is sequentially consistent.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

#define RING_SIZE 1024u  /* ops; a power of two */
#define SPIN_NS 2000u    /* polling with pause only */
#define POLL_NS 2000000u /* polling, yielding the core between polls, before sleeping */
/* Where the device's threads fill the cores: a wait short enough that the next one polls
 * through it (acg__cpu_stream_wait) */
#define SHORT_WAIT_NS 50000u

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A side waiting for the other. */
typedef struct poller {
    uint64_t start; /* when it began polling (0: not read yet) */
    uint32_t polls;
    bool yielding;  /* past SPIN_NS */
    uint64_t limit; /* how long it polls before it sleeps: POLL_NS, or SPIN_NS */
} poller;

/* One poll: false once the side has polled p->limit and should sleep. The clock is read every
 * 64 polls; past SPIN_NS every poll yields the core, so a side that shares its core with the
 * one it waits for never holds it for long. */
static bool keep_polling(poller *p) {
    if ((++p->polls & 63u) == 0) {
        uint64_t now = now_ns();
        if (p->start == 0) {
            p->start = now;
        }
        if (now - p->start >= p->limit) {
            return false;
        }
        p->yielding = now - p->start >= SPIN_NS;
    }
    if (p->yielding) {
        sched_yield();
    } else {
        cpu_relax();
    }
    return true;
}

/* The submitter writes `head`, the worker `done`: each on its own cache line, so polling one
 * does not steal the other's line. */
struct cpu_stream {
    _Alignas(64) _Atomic uint64_t head; /* ops submitted */
    uint64_t done_seen; /* the submitter's last look at `done`, to avoid reading it each time */
    cpu_op *ring;       /* (RING_SIZE); read-only after creation */
    cpu_recording *rec; /* native capture: ops go here instead of the ring (see cpu.h) */
    cpu_device *dev;    /* read-only after creation */
    uint32_t trace_id;  /* its timeline in traces (acg__trace_new_stream) */
    _Alignas(64) _Atomic uint64_t done; /* ops completed */
    _Atomic int fault;  /* work of this stream faulted (an acg_status); reported by the next
                           synchronize, with comm_why for ACG_ERR_COMM */
    char comm_why[256]; /* written by the worker before it stores the fault */
    _Alignas(64) _Atomic int worker_sleeping;
    _Atomic int waiters;      /* threads sleeping until `done` advances */
    _Atomic bool short_waits; /* the last wait took at most SHORT_WAIT_NS (see stream_wait) */
    _Atomic uint64_t wake_at; /* the least `done` a sleeper waits for (UINT64_MAX: none), so
                                 the worker wakes it then rather than at its batch's end; set
                                 under mu */
    _Atomic uint64_t woke_ns; /* when the worker last woke sleepers (under mu) */
    _Atomic int stop;
    _Atomic uint32_t refs;
    pthread_mutex_t mu;
    pthread_cond_t work;     /* signalled when head advances or stop is set */
    pthread_cond_t progress; /* broadcast when done advances and waiters > 0 */
    pthread_t thread;
};

static void run_op(cpu_stream *s, const cpu_op *op);
static void run_op_traced(cpu_stream *s, const cpu_op *op);

/* A kernel whose definition offers parts goes to the device's pool, which decides whether the
 * launch is worth splitting; any other is one call. */
static inline void run_kernel(cpu_pool *pool, const cpu_kernel *k) {
    if (k->parts != NULL && pool != NULL) {
        acg__cpu_pool_run(pool, k, NULL);
    } else {
        k->fn(k->args, k->global);
    }
}

/* The same, saying how it was split (acg__cpu_pool_run), for traces. */
static void run_kernel_split(cpu_pool *pool, const cpu_kernel *k, cpu_split *split) {
    if (k->parts != NULL && pool != NULL) {
        acg__cpu_pool_run(pool, k, split);
    } else {
        *split = (cpu_split){1, 0};
        k->fn(k->args, k->global);
    }
}

static void run_ops(cpu_stream *s, const cpu_op *op, const cpu_op *end, bool traced);

/* A loop's body, run again while its condition is set after a run, max runs at most; with
 * stream tracing on, a span per loop says how many runs it made. The condition is written by
 * the body's ops on this worker (or by the pool's threads, whose parts end before
 * acg__cpu_pool_run returns). */
static void run_loop(cpu_stream *s, const cpu_op *loop, bool traced) {
    const cpu_op *body = loop + 1, *end = body + loop->u.loop.n_body;
    uint64_t t0 = traced ? acg__trace_now() : 0;
    uint32_t runs = 0;
    do {
        run_ops(s, body, end, traced);
        runs++;
    } while (runs < loop->u.loop.max && *loop->u.loop.cond != 0);
    if (traced) {
        acg_trace_arg args[2] = {(acg_trace_arg)ACG__TRACE_U("runs", runs),
                                 (acg_trace_arg)ACG__TRACE_U("ops", end - body)};
        acg__trace_emit(ACG_TRACE_STREAM, ACG_TRACE_COMPLETE, "loop", t0, acg__trace_now() - t0,
                        s->trace_id, args, 2);
    }
}

/* Ops of a graph, loops among them; traced: each told to the trace hook, inside the replay's
 * span, so a trace shows where a graph's time goes. */
static void run_ops(cpu_stream *s, const cpu_op *op, const cpu_op *end, bool traced) {
    cpu_pool *pool = s->dev->pool;
    for (; op != end; op++) {
        if (op->kind == CPU_OP_KERNEL && !traced) {
            run_kernel(pool, &op->u.kernel);
        } else if (op->kind == CPU_OP_LOOP) {
            run_loop(s, op, traced);
            op += op->u.loop.n_body;
        } else if (traced) {
            run_op_traced(s, op);
        } else {
            run_op(s, op);
        }
    }
}

/* A replay. */
static void run_graph(cpu_stream *s, const cpu_graph *g) {
    run_ops(s, g->ops, g->ops + g->n_ops, acg__trace_on(ACG_TRACE_STREAM));
}

/* An allreduce; a broken group faults the stream with the group's reason (the first fault
 * stays until a synchronize reads it). */
static void run_allreduce(cpu_stream *s, const cpu_op *op) {
    cpu_group *g = op->u.allreduce.group;
    if (!acg__cpu_allreduce_run(g, op->u.allreduce.data, op->u.allreduce.count) &&
        atomic_load(&s->fault) == 0) {
        snprintf(s->comm_why, sizeof s->comm_why, "%s", acg__cpu_group_why(g));
        atomic_store(&s->fault, ACG_ERR_COMM);
    }
}

static void fill(void *dst, size_t size, uint32_t pattern, uint32_t pattern_size) {
    if (pattern_size == 1) {
        memset(dst, (int)pattern, size);
    } else if (pattern_size == 2) {
        uint16_t v = (uint16_t)pattern, *p = dst;
        for (size_t i = 0; i < size / 2; i++) {
            p[i] = v;
        }
    } else {
        uint32_t *p = dst;
        for (size_t i = 0; i < size / 4; i++) {
            p[i] = pattern;
        }
    }
}

static void run_op(cpu_stream *s, const cpu_op *op) {
    switch (op->kind) {
    case CPU_OP_KERNEL:
        run_kernel(s->dev->pool, &op->u.kernel);
        break;
    case CPU_OP_COPY:
        memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.size);
        acg__free(op->u.copy.owned);
        break;
    case CPU_OP_FILL:
        fill(op->u.fill.dst, op->u.fill.size, op->u.fill.pattern, op->u.fill.pattern_size);
        break;
    case CPU_OP_WAIT:
        acg__cpu_stream_wait(op->u.wait.other, op->u.wait.seq);
        acg__cpu_stream_unref(op->u.wait.other);
        break;
    case CPU_OP_GRAPH:
        run_graph(s, op->u.graph.graph);
        break;
    case CPU_OP_HOST:
        op->u.host.fn(op->u.host.user);
        break;
    case CPU_OP_ALLREDUCE:
        run_allreduce(s, op);
        break;
    default:
        break;
    }
}

/* Wakes threads sleeping until `done` advances. The sequentially consistent read-modify-write
 * orders the latest `done` before the look at `waiters`, pairing with the waiter's increment
 * and re-check (a fence would do, but ThreadSanitizer does not model fences). */
static void wake_waiters(cpu_stream *s) {
    atomic_fetch_add(&s->done, 0);
    if (atomic_load(&s->waiters) != 0) {
        pthread_mutex_lock(&s->mu);
        atomic_store_explicit(&s->woke_ns, now_ns(), memory_order_relaxed);
        atomic_store_explicit(&s->wake_at, UINT64_MAX, memory_order_relaxed);
        pthread_cond_broadcast(&s->progress);
        pthread_mutex_unlock(&s->mu);
    }
}

/* Runs op and tells the trace hook when it started and how long it ran, on the stream's
 * timeline: a replay, or one eager op by what it is. What the event says is read before the op
 * runs: a wait drops its reference to the other stream, which may free it. */
static void run_op_traced(cpu_stream *s, const cpu_op *op) {
    acg_trace_arg args[3];
    uint32_t n = 1;
    const char *name;
    switch (op->kind) {
    case CPU_OP_KERNEL: {
        /* With how it was split: "parts" it ran in, and "wait_ns" its worker waited for the
         * others' parts after its own. */
        cpu_split split;
        name = op->u.kernel.name != NULL ? op->u.kernel.name : "kernel";
        uint64_t t0 = acg__trace_now();
        run_kernel_split(s->dev->pool, &op->u.kernel, &split);
        uint64_t t1 = acg__trace_now();
        args[0] = (acg_trace_arg)ACG__TRACE_U("grid", op->u.kernel.global[0]);
        args[1] = (acg_trace_arg)ACG__TRACE_U("parts", split.parts);
        args[2] = (acg_trace_arg)ACG__TRACE_U("wait_ns", split.wait_ns);
        acg__trace_emit(ACG_TRACE_STREAM, ACG_TRACE_COMPLETE, name, t0, t1 - t0, s->trace_id, args,
                        3);
        return;
    }
    case CPU_OP_COPY:
        name = "copy";
        args[0] = (acg_trace_arg)ACG__TRACE_U("bytes", op->u.copy.size);
        break;
    case CPU_OP_FILL:
        name = "fill";
        args[0] = (acg_trace_arg)ACG__TRACE_U("bytes", op->u.fill.size);
        break;
    case CPU_OP_WAIT:
        name = "wait";
        args[0] = (acg_trace_arg)ACG__TRACE_U("for_stream", op->u.wait.other->trace_id);
        break;
    case CPU_OP_GRAPH:
        name = "replay";
        args[0] = (acg_trace_arg)ACG__TRACE_U("ops", op->u.graph.graph->n_ops);
        break;
    case CPU_OP_HOST:
        name = "host function";
        n = 0;
        break;
    case CPU_OP_ALLREDUCE:
        name = "allreduce";
        args[0] = (acg_trace_arg)ACG__TRACE_U("floats", op->u.allreduce.count);
        break;
    default:
        run_op(s, op);
        return;
    }
    uint64_t t0 = acg__trace_now();
    run_op(s, op);
    acg__trace_emit(ACG_TRACE_STREAM, ACG_TRACE_COMPLETE, name, t0, acg__trace_now() - t0,
                    s->trace_id, args, n);
}

static void *worker(void *arg) {
    cpu_stream *s = arg;
    uint64_t t = atomic_load_explicit(&s->done, memory_order_relaxed);
    for (;;) {
        uint64_t h = atomic_load_explicit(&s->head, memory_order_acquire);
        if (t < h) {
            /* Run what is queued, announcing progress once per batch — and before any op
             * that may block, or a stream waiting for what already ran here could wait on
             * this one forever. */
            for (; t < h; t++) {
                const cpu_op *op = &s->ring[t & (RING_SIZE - 1)];
                /* A host function may wait for another stream, which may wait for us; an
                 * allreduce waits for other ranks. */
                if (op->kind == CPU_OP_WAIT || op->kind == CPU_OP_HOST ||
                    op->kind == CPU_OP_ALLREDUCE ||
                    (op->kind == CPU_OP_GRAPH && op->u.graph.graph->has_host)) {
                    wake_waiters(s);
                }
                if (op->kind == CPU_OP_FAULT) {
                    /* An injected fault in place of a replay: the stream and the device report
                     * it. */
                    atomic_store(&s->fault, ACG_ERR_DEVICE_LOST);
                    atomic_store(&s->dev->faulted, 1);
                } else if (acg__trace_on(ACG_TRACE_STREAM)) {
                    run_op_traced(s, op);
                } else {
                    run_op(s, op);
                }
                atomic_store_explicit(&s->done, t + 1, memory_order_release);
                /* A sleeper waiting for this op need not wait for the rest of the batch. A
                 * hint only: the wake after the batch is the one that cannot be missed. */
                if (t + 1 >= atomic_load_explicit(&s->wake_at, memory_order_relaxed)) {
                    wake_waiters(s);
                }
            }
            wake_waiters(s);
            continue;
        }
        if (atomic_load(&s->stop)) {
            break;
        }
        poller pl = {0, 0, false, POLL_NS};
        bool polling = true;
        while (t == atomic_load_explicit(&s->head, memory_order_acquire) &&
               !atomic_load_explicit(&s->stop, memory_order_relaxed) &&
               (polling = keep_polling(&pl))) {
        }
        if (polling) {
            continue;
        }
        pthread_mutex_lock(&s->mu);
        atomic_store(&s->worker_sleeping, 1);
        while (t == atomic_load(&s->head) && !atomic_load(&s->stop)) {
            pthread_cond_wait(&s->work, &s->mu);
        }
        atomic_store(&s->worker_sleeping, 0);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

acg_status acg__cpu_stream_new(cpu_device *dev, cpu_stream **out) {
    cpu_stream *s = acg__alloc_aligned(sizeof *s, _Alignof(cpu_stream));
    if (s == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_create: out of memory");
    }
    memset(s, 0, sizeof *s);
    s->ring = acg__alloc_aligned(RING_SIZE * sizeof *s->ring, 64);
    if (s->ring == NULL) {
        acg__free(s);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_create: out of memory");
    }
    atomic_init(&s->refs, 1);
    atomic_init(&s->wake_at, UINT64_MAX);
    atomic_init(&s->short_waits, true); /* until a wait says otherwise */
    s->dev = dev;
    s->trace_id = acg__trace_new_stream();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->progress, NULL);
    int rc = pthread_create(&s->thread, NULL, worker, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->progress);
        pthread_cond_destroy(&s->work);
        pthread_mutex_destroy(&s->mu);
        acg__free(s->ring);
        acg__free(s);
        return acg__error(ACG_ERR_DEVICE, "acg_stream_create: pthread_create failed (%d)", rc);
    }
    *out = s;
    return ACG_OK;
}

void acg__cpu_stream_ref(cpu_stream *s) { atomic_fetch_add(&s->refs, 1); }

void acg__cpu_stream_unref(cpu_stream *s) {
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        pthread_cond_destroy(&s->progress);
        pthread_cond_destroy(&s->work);
        pthread_mutex_destroy(&s->mu);
        acg__free(s->ring);
        acg__free(s);
    }
}

void acg__cpu_stream_stop(cpu_stream *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, 1);
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    acg__cpu_stream_unref(s);
}

uint64_t acg__cpu_stream_head(const cpu_stream *s) {
    return atomic_load_explicit(&s->head, memory_order_relaxed);
}

bool acg__cpu_stream_reached(const cpu_stream *s, uint64_t seq) {
    return atomic_load_explicit(&s->done, memory_order_acquire) >= seq;
}

void acg__cpu_stream_wait(cpu_stream *s, uint64_t seq) {
    /* Where the device's threads fill the machine's cores, a waiter that polls takes the core
     * of one of them (yielding does not give it back for long), so it polls only as long as
     * waits on this stream have lately been short (a few kernels), and past that sleeps until
     * the worker wakes it: a decode step's wait costs no core, a small graph's no wake-up. A
     * wait that ends while polling was short; one that slept is as long as until the worker
     * woke it (which it does once it gets there), not until the waiter ran again. */
    bool fills = s->dev->fills_cores;
    uint64_t limit = POLL_NS;
    if (fills) {
        limit =
            atomic_load_explicit(&s->short_waits, memory_order_relaxed) ? SHORT_WAIT_NS : SPIN_NS;
    }
    poller pl = {0, 0, false, limit};
    while (atomic_load_explicit(&s->done, memory_order_acquire) < seq) {
        if (!keep_polling(&pl)) {
            break;
        }
    }
    bool short_wait = true;
    if (atomic_load_explicit(&s->done, memory_order_acquire) < seq) {
        uint64_t start = pl.start != 0 ? pl.start : now_ns();
        pthread_mutex_lock(&s->mu);
        atomic_fetch_add(&s->waiters, 1);
        while (atomic_load(&s->done) < seq) {
            if (seq < atomic_load_explicit(&s->wake_at, memory_order_relaxed)) {
                atomic_store_explicit(&s->wake_at, seq, memory_order_relaxed);
            }
            pthread_cond_wait(&s->progress, &s->mu);
        }
        atomic_fetch_sub(&s->waiters, 1);
        uint64_t woke = atomic_load_explicit(&s->woke_ns, memory_order_relaxed);
        pthread_mutex_unlock(&s->mu);
        short_wait = woke >= start && woke - start <= SHORT_WAIT_NS;
    }
    if (fills && atomic_load_explicit(&s->short_waits, memory_order_relaxed) != short_wait) {
        atomic_store_explicit(&s->short_waits, short_wait, memory_order_relaxed);
    }
}

cpu_op *acg__cpu_stream_reserve(cpu_stream *s) {
    cpu_recording *r = s->rec;
    if (r != NULL) {
        if (!acg__grow((void **)&r->ops, &r->cap, r->n + 1, sizeof *r->ops)) {
            return NULL;
        }
        memset(&r->ops[r->n], 0, sizeof *r->ops);
        return &r->ops[r->n];
    }
    uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
    if (h - s->done_seen >= RING_SIZE) {
        s->done_seen = atomic_load_explicit(&s->done, memory_order_acquire);
        if (h - s->done_seen >= RING_SIZE) {
            acg__cpu_stream_wait(s, h - RING_SIZE + 1);
            s->done_seen = h - RING_SIZE + 1;
        }
    }
    return &s->ring[h & (RING_SIZE - 1)];
}

void acg__cpu_stream_submit(cpu_stream *s) {
    if (s->rec != NULL) {
        s->rec->n++;
        return;
    }
    /* Publish `head` before looking for a sleeping worker (pairs with its announcement). */
    atomic_fetch_add(&s->head, 1);
    if (atomic_load(&s->worker_sleeping)) {
        pthread_mutex_lock(&s->mu);
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
    }
}

void acg__cpu_stream_record(cpu_stream *s, cpu_recording *r) { s->rec = r; }

cpu_device *acg__cpu_stream_device(const cpu_stream *s) { return s->dev; }

acg_status acg__cpu_stream_take_fault(cpu_stream *s, char *why, size_t why_size) {
    acg_status st = (acg_status)atomic_exchange(&s->fault, 0);
    if (st == ACG_ERR_COMM) {
        snprintf(why, why_size, "%s", s->comm_why);
    }
    return st;
}

cpu_recording *acg__cpu_stream_recording(const cpu_stream *s) { return s->rec; }
