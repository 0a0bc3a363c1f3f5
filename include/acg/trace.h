/*
 * trace.h — step traces: a hook that is told what the library does, span by span, while it does
 * it. acg.h does not include this header; include it where a hook is installed.
 *
 * What is traced, by category:
 * - ACG_TRACE_MODEL ("model"): each acg_model_step as a span "step", with one span per phase
 *   inside it, named as acg_step_report names them: "admit", "plan", "upload", "launch",
 *   "wait" (the host's wait for the sampled tokens) and "retire".
 * - ACG_TRACE_ENGINE ("engine"): a runner's creation ("runner create") with, per bucket, its
 *   measuring run ("measure", with its eager peak), its warm-ups ("warm-up") and its capture
 *   ("capture": captured or dropped and why, its graph memory, the pool's growth and total);
 *   "bucket dropped" instants with the reason; each acg_runner_run as "replay" or "eager" (with
 *   the reason the step ran eagerly: "graphs off", or "bucket dropped: <why>"); "no bucket
 *   fits" instants from acg_runner_select; and every stager upload ("stager upload": bytes,
 *   whether the mirror skipped it, whether the host waited for a ring buffer).
 * - ACG_TRACE_STREAM ("stream"): where a backend can time them, the entries a stream ran, on the
 *   stream's own timeline: a replay or one eager op (a kernel by its name, a copy, a fill, a
 *   wait for another stream, a host function, an allreduce). The cpu backend times them on its
 *   worker threads, tells each op of a replay too, inside the replay's span (so a hook that
 *   adds up a stream's spans counts a replay and its ops: tell them apart by name; and a
 *   traced replay costs a hook call per op), a loop of a replay as a "loop" span around its
 *   body's ops ("runs": how many times the body ran, "ops": the body's ops), and says of each
 *   kernel how it was split ("parts"
 *   it ran in on more than one thread, else 1; "wait_ns", the time its worker waited after its
 *   own parts for the pool's: the hand-off and the parts' imbalance); opencl, cuda and
 *   level_zero do not time streams yet.
 *
 * Off by default, and then costing nothing: each place that could emit an event reads one word
 * (a relaxed atomic load) and branches on it. With a hook installed each event is one call of
 * the hook, from the thread that did the work.
 */
#ifndef ACG_TRACE_H
#define ACG_TRACE_H

#include <acg/acg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Categories, or'ed together in acg_trace_config.categories. */
#define ACG_TRACE_MODEL (1u << 0)  /* "model": model steps and their phases */
#define ACG_TRACE_ENGINE (1u << 1) /* "engine": runner creation, replays, eager runs, uploads */
#define ACG_TRACE_STREAM                                                                           \
    (1u << 2) /* "stream": what each stream ran, where the backend times it                        \
               */
#define ACG_TRACE_ALL (ACG_TRACE_MODEL | ACG_TRACE_ENGINE | ACG_TRACE_STREAM)

typedef enum acg_trace_phase {
    ACG_TRACE_BEGIN = 1, /* a span begins on this thread at ts_ns */
    ACG_TRACE_END,       /* the innermost span this thread began ends at ts_ns (same name);
                            its arguments say how it went */
    ACG_TRACE_COMPLETE,  /* a span of dur_ns that began at ts_ns, told once it ended */
    ACG_TRACE_INSTANT,   /* a moment */
} acg_trace_phase;

typedef enum acg_trace_arg_type {
    ACG_TRACE_ARG_UINT = 1, /* value.u */
    ACG_TRACE_ARG_INT,      /* value.i */
    ACG_TRACE_ARG_DOUBLE,   /* value.d */
    ACG_TRACE_ARG_BOOL,     /* value.b */
    ACG_TRACE_ARG_STRING,   /* value.s, never NULL */
} acg_trace_arg_type;

/* One named value of an event: "bucket", "batch", "tokens", "bytes", "graphed", "reason"... */
typedef struct acg_trace_arg {
    const char *key;
    acg_trace_arg_type type;
    union {
        uint64_t u;
        int64_t i;
        double d;
        bool b;
        const char *s;
    } value;
} acg_trace_arg;

/* What the hook is told. Every pointer in it (names, keys, string values, args) belongs to the
 * library and is valid only during the call: copy what you keep. */
typedef struct acg_trace_event {
    size_t size; /* sizeof(acg_trace_event) as this library has it: fields are only appended,
                    and a field lies past size in an older library (read it only when
                    offsetof(acg_trace_event, field) < size) */
    acg_trace_phase phase;
    uint32_t category;         /* one ACG_TRACE_* bit */
    const char *category_name; /* "model", "engine", "stream" */
    const char *name;          /* "step", "capture", "replay", a kernel's name... */
    uint64_t ts_ns;            /* when, on acg_trace_now_ns()'s clock */
    uint64_t dur_ns;           /* ACG_TRACE_COMPLETE: how long; otherwise 0 */
    uint32_t thread;           /* the thread that emitted it (acg_trace_get_thread_id) */
    uint32_t stream;           /* 0: the emitting thread's own timeline. Otherwise the timeline of
                                  a stream, numbered from 1 in the order the backends that time
                                  streams created them in this process; one stream's events come
                                  in the order they end (ts_ns + dur_ns), and never overlap but
                                  that a replay's span holds the spans of the ops it ran, where
                                  the backend tells them (cpu) */
    uint32_t n_args;
    const acg_trace_arg *args; /* (n_args) */
} acg_trace_event;

/* Receives each event. Called from the threads that do the work — the caller's thread for
 * model, runner and stager events, a cpu stream's worker thread for its stream events —
 * possibly from several threads at once: a hook must be thread-safe. It may be called while the
 * library holds locks (a stager's, a runner's), so it must not call acg functions other than
 * acg_trace_now_ns and acg_trace_get_thread_id: events the library would emit from inside the
 * hook are dropped, and acg_trace_set_hook from inside it is refused. On each thread, BEGIN
 * and END events nest (an END closes the innermost span that thread began), and an END is only
 * emitted after its BEGIN; a hook installed or removed in the middle of a span may see only
 * one of the two. */
typedef void (*acg_trace_fn)(const acg_trace_event *event, void *user);

/* fn has no default: the least size is offsetof(acg_trace_config, user). */
typedef struct acg_trace_config {
    size_t size;         /* sizeof(acg_trace_config) */
    acg_trace_fn fn;     /* the hook; NULL removes the hook, as a NULL config does */
    void *user;          /* handed to every call of fn */
    uint32_t categories; /* what fn receives (default ACG_TRACE_ALL) */
} acg_trace_config;

#define ACG_TRACE_CONFIG_INIT                                                                      \
    { sizeof(acg_trace_config), NULL, NULL, ACG_TRACE_ALL }

/* Installs the process's one trace hook, replacing the previous one (config NULL, or a NULL
 * fn: removes it, and tracing is off again). Thread-safe. Returns only once every call of the
 * previous hook has returned, so its user context may be freed at once; events that began
 * before the call may still reach the new hook. ACG_ERR_INVALID_ARGUMENT for a config size that
 * acg.h's rule for growing structs refuses, or, with fn set, categories of 0 or with bits
 * this header does not define (nothing changes); ACG_ERR_IN_USE when called from inside a
 * hook (it would wait for its own call). */
ACG_API acg_status acg_trace_set_hook(const acg_trace_config *config);

/* The clock of ts_ns: nanoseconds of CLOCK_MONOTONIC (only differences mean anything), so a
 * program can put its own events on the same timeline. */
ACG_API uint64_t acg_trace_now_ns(void);

/* The number events name the calling thread by (acg_trace_event.thread): threads are numbered
 * from 1 in the order they first emitted an event or asked; it never changes for a thread. */
ACG_API uint32_t acg_trace_get_thread_id(void);

#ifdef __cplusplus
}
#endif

#endif /* ACG_TRACE_H */
