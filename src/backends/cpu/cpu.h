/* cpu.h — the cpu backend's internal interface: the per-stream worker queue and its ops. */
#ifndef ACG_BACKENDS_CPU_H
#define ACG_BACKENDS_CPU_H

#include "core/acg-impl.h"

/* A kernel argument as a cpu kernel reads it: buffers are plain pointers. */
typedef union cpu_arg {
    void *p;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
} cpu_arg;

typedef void (*cpu_kernel_fn)(const cpu_arg *args, const uint32_t global[3]);

/* An entry of the cpu kernel library (kernels.c). */
typedef struct cpu_kernel {
    const char *name;
    cpu_kernel_fn fn;
} cpu_kernel;

const cpu_kernel *acg__cpu_kernel_find(const char *name);

typedef struct cpu_stream cpu_stream;
typedef struct cpu_graph cpu_graph;

enum cpu_op_kind {
    CPU_OP_KERNEL = 1,
    CPU_OP_COPY, /* memcpy; frees `owned` afterwards when set */
    CPU_OP_FILL,
    CPU_OP_WAIT,  /* waits until another stream's queue reached a sequence number */
    CPU_OP_GRAPH, /* replays a graph's ops in order */
};

/* One queue entry, and one node of a cpu graph. */
typedef struct cpu_op {
    uint32_t kind;
    union {
        struct {
            cpu_kernel_fn fn;
            uint32_t global[3];
            cpu_arg args[ACG_MAX_KERNEL_ARGS];
        } kernel;
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
    } u;
} cpu_op;

struct cpu_graph {
    cpu_op *ops; /* (n_ops) in a valid serial order of the captured DAG */
    uint32_t n_ops;
};

/* Streams: a worker thread draining a ring of ops. Submission is single-producer (the core
 * serializes calls on a stream). */
acg_status acg__cpu_stream_new(cpu_stream **out);
void acg__cpu_stream_ref(cpu_stream *s);
void acg__cpu_stream_unref(cpu_stream *s);
/* Stops the worker after the queued work and drops the creator's reference. */
void acg__cpu_stream_stop(cpu_stream *s);
/* The next free queue entry (waits while the ring is full); publish it with submit. */
cpu_op *acg__cpu_stream_reserve(cpu_stream *s);
void acg__cpu_stream_submit(cpu_stream *s);
/* Sequence number after the latest submitted op; work up to it completed when done >= seq. */
uint64_t acg__cpu_stream_head(const cpu_stream *s);
bool acg__cpu_stream_reached(const cpu_stream *s, uint64_t seq);
void acg__cpu_stream_wait(cpu_stream *s, uint64_t seq);

#endif /* ACG_BACKENDS_CPU_H */
