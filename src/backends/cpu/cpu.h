/* cpu.h — the cpu backend's internal interface: the per-stream worker queue and its ops. */
#ifndef ACG_BACKENDS_CPU_H
#define ACG_BACKENDS_CPU_H

#include "acg-backend.h"
#include "acg-layer.h"
#include <pthread.h>

/* A kernel is the C function of its definition (acg.h: acg_kernel_cpu_fn); its arguments are
 * buffers as plain pointers and scalars by value. */
typedef acg_cpu_arg cpu_arg;
typedef acg_kernel_cpu_fn cpu_kernel_fn;

typedef struct cpu_stream cpu_stream;
typedef struct cpu_graph cpu_graph;
typedef struct cpu_pool cpu_pool;
typedef struct cpu_group cpu_group;

/* A polling loop's pause: lets the core's other hyperthread run and saves power. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#define CPU_MAX_THREADS 256u /* threads=N and ACG_CPU_THREADS: 1..256 */

/* An open cpu device: how it captures, the threads a kernel may be split over, and the faults
 * its workers report (only injected ones: host code does not fault recoverably). */
typedef struct cpu_device {
    bool native;      /* workers record captured work (capture=native) */
    uint32_t threads; /* a split kernel's threads: the stream's worker and the pool's */
    cpu_pool *pool;   /* threads - 1 threads; NULL with one thread */
    /* threads >= online cores: a thread waiting for a stream would take a core from the
     * kernels it waits for, so it sleeps almost at once instead of polling (queue.c) */
    bool fills_cores;
    _Atomic int inject;  /* test hook: the next graph replay faults */
    _Atomic int faulted; /* a fault not yet read by acg_device_get_async_error */
} cpu_device;

/* A kernel launch as an op holds it: the definition's functions and the resolved arguments. */
typedef struct cpu_kernel {
    cpu_kernel_fn fn;
    const char *name;              /* the definition's, for traces (it outlives every launch) */
    acg_kernel_cpu_parts_fn parts; /* with part_fn, or both NULL: the definition's cpu_parts */
    acg_kernel_cpu_part_fn part_fn;
    uint32_t global[3];
    cpu_arg args[ACG_MAX_KERNEL_ARGS];
} cpu_kernel;

enum cpu_op_kind {
    CPU_OP_KERNEL = 1,
    CPU_OP_COPY, /* memcpy; frees `owned` afterwards when set */
    CPU_OP_FILL,
    CPU_OP_WAIT,      /* waits until another stream's queue reached a sequence number */
    CPU_OP_GRAPH,     /* replays a graph's ops in order */
    CPU_OP_HOST,      /* calls a host function */
    CPU_OP_FAULT,     /* an injected fault where a graph replay was queued (test hook) */
    CPU_OP_ALLREDUCE, /* a sum over the ranks of a group (collective.c); may wait for them */
    CPU_OP_LOOP,      /* in a graph: the n_body ops after it, run again while *cond != 0 */
};

/* One queue entry, and one node of a cpu graph. */
typedef struct cpu_op {
    uint32_t kind;
    union {
        cpu_kernel kernel;
        struct {
            void *dst;
            const void *src;
            size_t size;
            void *owned;
        } copy;
        struct {
            void *dst;
            size_t size;
            uint32_t pattern, pattern_size;
        } fill;
        struct {
            cpu_stream *other; /* holds a reference until the op ran */
            uint64_t seq;
        } wait;
        struct {
            const cpu_graph *graph;
        } graph;
        struct {
            acg_host_fn fn;
            void *user;
        } host;
        struct {
            cpu_group *group;
            float *data;
            size_t count;
        } allreduce;
        struct {
            const uint32_t *cond;
            uint32_t max;    /* runs of the body at most */
            uint32_t n_body; /* ops of the body, nested loops' whole */
        } loop;
    } u;
} cpu_op;

struct cpu_graph {
    cpu_op *ops; /* (n_ops) in a valid serial order of the captured DAG */
    uint32_t n_ops;
    bool has_host; /* calls a host function or waits for other ranks: the worker announces
                      progress before replaying */
};

/* Process groups (collective.c). A group of the comm's ranks: shared memory among the ranks of
 * one host, else the comm's allreduce_sum_f32. A collective call on every rank. */
acg_status acg__cpu_group_create(const acg_comm *comm, cpu_group **out);
void acg__cpu_group_destroy(cpu_group *g);
/* Runs an allreduce on the calling worker: false when the group is broken (now or before). */
bool acg__cpu_allreduce_run(cpu_group *g, float *data, size_t count);
/* Why the group broke, or NULL. */
const char *acg__cpu_group_why(cpu_group *g);

/* The device's thread pool (pool.c): `threads - 1` threads that help the stream workers run
 * kernels split into parts. Created at device open (threads > 1), destroyed at close, after
 * every stream. */
acg_status acg__cpu_pool_create(uint32_t threads, cpu_pool **out);
void acg__cpu_pool_destroy(cpu_pool *p);
/* How a launch was split, for traces: the parts it ran in over the pool (1: whole, or all on
 * the submitting worker when another stream had the pool), and how long the worker waited,
 * after its own parts, for those other threads were still running (the hand-off and the
 * imbalance between parts). */
typedef struct cpu_split {
    uint32_t parts;
    uint64_t wait_ns;
} cpu_split;

/* Runs a kernel that offers parts (k->parts set) on the calling stream worker: split over the
 * pool when the launch is worth more than one part, else its whole function. Returns when
 * every part ran. Any number of workers may call it at once: one dispatch at a time has the
 * pool, another runs its parts itself, one after another. With `split` set, says how it went
 * there (reading the clock twice more). */
void acg__cpu_pool_run(cpu_pool *p, const cpu_kernel *k, cpu_split *split);

/* Streams: a worker thread draining a ring of ops. Submission is single-producer (the core
 * serializes calls on a stream). */
acg_status acg__cpu_stream_new(cpu_device *dev, cpu_stream **out);
/* What faulted in the stream's work since the last call (cleared): ACG_OK for nothing,
 * ACG_ERR_DEVICE_LOST for an injected fault, ACG_ERR_COMM for an allreduce whose group broke,
 * with why (why_size bytes) saying so. */
acg_status acg__cpu_stream_take_fault(cpu_stream *s, char *why, size_t why_size);
cpu_device *acg__cpu_stream_device(const cpu_stream *s);
void acg__cpu_stream_ref(cpu_stream *s);
void acg__cpu_stream_unref(cpu_stream *s);
/* Stops the worker after the queued work and drops the creator's reference. */
void acg__cpu_stream_stop(cpu_stream *s);
/* Native capture: while a stream records into a recording, the ops it is handed are appended
 * to the recording instead of run; ops of every stream of one capture go to one recording in
 * submission order, which is a valid serial order of the captured DAG (a stream can only wait
 * for what was submitted before), so the graph is the recording's op list. Event records and
 * waits between recording streams need no op. Set and cleared under the core's device lock. */
typedef struct cpu_recording {
    cpu_op *ops; /* (n) */
    uint32_t n, cap;
    cpu_stream **streams; /* (n_streams) in recording mode */
    uint32_t n_streams, cap_streams;
    uint32_t loops[ACG_MAX_LOOP_DEPTH]; /* the open loops' ops, outermost first */
    uint32_t n_loops;
} cpu_recording;

void acg__cpu_stream_record(cpu_stream *s, cpu_recording *r);
/* The recording the stream records into, or NULL. */
cpu_recording *acg__cpu_stream_recording(const cpu_stream *s);

/* The next free queue entry (waits while the ring is full), or of the recording (NULL when it
 * cannot grow); publish it with submit. */
cpu_op *acg__cpu_stream_reserve(cpu_stream *s);
void acg__cpu_stream_submit(cpu_stream *s);
/* Sequence number after the latest submitted op; work up to it completed when done >= seq. */
uint64_t acg__cpu_stream_head(const cpu_stream *s);
bool acg__cpu_stream_reached(const cpu_stream *s, uint64_t seq);
void acg__cpu_stream_wait(cpu_stream *s, uint64_t seq);

/* ---- the backend's slots across its files --------------------------------------------------- */

/* The core's backend types are this backend's structs; these are the only casts between them. */
static inline cpu_device *cdev(acg__bk_device *d) { return (cpu_device *)d; }
static inline acg__bk_device *bk_dev(cpu_device *d) { return (acg__bk_device *)d; }
static inline cpu_stream *cs(acg__bk_stream *s) { return (cpu_stream *)s; }
static inline acg__bk_stream *bk_stream(cpu_stream *s) { return (acg__bk_stream *)s; }
static inline acg__bk_mem *bk_mem(void *p) { return (acg__bk_mem *)p; }
static inline const acg__kernel_def *ckernel(acg__bk_kernel *k) {
    return (const acg__kernel_def *)k;
}
static inline acg__bk_kernel *bk_kernel(const acg__kernel_def *def) {
    return (acg__bk_kernel *)(void *)def;
}
static inline cpu_graph *cgraph(acg__bk_exec *x) { return (cpu_graph *)x; }
static inline acg__bk_exec *bk_exec(cpu_graph *g) { return (acg__bk_exec *)g; }
static inline cpu_recording *crec(acg__bk_recording *r) { return (cpu_recording *)r; }
static inline acg__bk_recording *bk_rec(cpu_recording *r) { return (acg__bk_recording *)r; }

/* Device memory is host memory: the byte `off` into an allocation from buffer_alloc. */
static inline char *ptr(acg__bk_mem *mem, size_t off) { return (char *)mem + off; }

/* Ops as the slots queue or record them (cpu.c): a fill, a kernel launch (its buffers
 * resolved to pointers), an allreduce; and the failure of a recording that cannot grow (the
 * ring itself never fails). */
void acg__cpu_op_fill(cpu_op *op, void *dst, size_t size, uint32_t pattern, uint32_t psize);
void acg__cpu_op_kernel(cpu_op *op, const acg__kernel_def *def, const acg_dims *dims,
                        const acg__karg *args, uint32_t n_args);
void acg__cpu_op_allreduce(cpu_op *op, acg__bk_group *group, acg__bk_mem *mem, size_t off,
                           size_t count);
acg_status acg__cpu_recording_full(void);

/* Graphs, native capture and host functions (graph.c): the slots of acg-backend.h's names. */
acg_status acg__cpu_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                      acg__bk_exec **exec);
acg_status acg__cpu_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream);
acg_status acg__cpu_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc);
acg_status acg__cpu_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                      uint32_t index, const acg__node *old);
void acg__cpu_graph_destroy(acg__bk_exec *exec);
acg_status acg__cpu_capture_begin(acg__bk_stream *stream, acg__bk_recording **rec);
acg_status acg__cpu_loop_begin(acg__bk_stream *stream, acg__bk_mem *cond, size_t off, uint32_t max);
acg_status acg__cpu_loop_end(acg__bk_stream *stream);
acg_status acg__cpu_capture_join(acg__bk_recording *rec, acg__bk_stream *stream);
acg_status acg__cpu_capture_end(acg__bk_recording *rec, acg__bk_exec **exec);
void acg__cpu_capture_abort(acg__bk_recording *rec);
acg_status acg__cpu_host_launch(acg__bk_stream *stream, acg_host_fn fn, void *user);

#endif /* ACG_BACKENDS_CPU_H */
