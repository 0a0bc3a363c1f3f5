/*
 * acg-layer.h — what the layers above the core (the engine, the model) may use of it: the
 * status, log, allocator and environment helpers, structs that grow, the handle registry with
 * its lifetimes, the checks that hold a core handle, and buffer ownership. The core's object
 * bodies stay in acg-impl.h, which only the core and its backends include; the build gives
 * the engine and the model this folder alone of the core's, so an include of the core's
 * internals from above is a compile error.
 */
#ifndef ACG_CORE_LAYER_H
#define ACG_CORE_LAYER_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <acg/acg.h>
#include <acg/trace.h>

#define ACG__UNUSED(x) ((void)(x))

/* Evaluates expr (an acg_status) once and returns it from the enclosing function when it is not
 * ACG_OK, leaving the detail the failing call set. For calls with nothing to undo on failure;
 * a function with a cleanup chain tests the status and jumps to its label instead. (NCCL's
 * NCCLCHECK) */
#define ACG__TRY(expr)                                                                             \
    do {                                                                                           \
        acg_status acg__try_status = (expr);                                                       \
        if (acg__try_status != ACG_OK) {                                                           \
            return acg__try_status;                                                                \
        }                                                                                          \
    } while (0)

/* ---- status, log, allocator, env --------------------------------------------------------- */

/* Sets this thread's last-error detail (printf format) and returns status. */
acg_status acg__error(acg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* How many details this thread has set so far (acg__error, acg_set_last_error). */
uint64_t acg__error_serial(void);
/* Copies status's detail into buf (for messages that must outlive later errors). */
void acg__error_copy(char *buf, size_t size);

void acg__log(acg_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Every allocation of the library. acg__alloc returns NULL on failure (it sets no error). */
void *acg__alloc(size_t size);
void *acg__alloc_aligned(size_t size, size_t align);
void *acg__calloc(size_t n, size_t size);
void acg__free(void *p);
/* A copy of the string s, or NULL when out of memory. */
char *acg__strdup(const char *s);
/* Grows *array (of elem-byte items) to hold at least `need`; false on failure (unchanged). */
bool acg__grow(void **array, uint32_t *cap, uint32_t need, size_t elem);

/* The ACG_* variables one layer knows. Each layer defines its table; src/library.c lists the
 * tables of every layer built into the library, in acg__env_tables, which is how the core learns
 * the names without naming a layer above it. */
typedef struct acg__env_table {
    const char *layer;
    const char *const *names;
    size_t n;
} acg__env_table;
extern const acg__env_table acg__core_env;
extern const acg__env_table *const acg__env_tables[];
extern const size_t acg__n_env_tables;

/* Value of a known ACG_* variable (NULL when unset). Naming an unknown variable is a bug. */
const char *acg__env_get(const char *name);
bool acg__env_flag(const char *name);
/* The one parser of every numeric variable and option: a decimal whole number in [min, max],
 * digits only (no sign, blank, prefix or trailing text), overflow refused. ACG_OK with *out set,
 * or ACG_ERR_INVALID_ARGUMENT with *out untouched and no error detail set (the caller names
 * what was parsed). */
acg_status acg__parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);
/* A known numeric ACG_* variable: fallback when unset or empty, else acg__parse_u64's number.
 * ACG_ERR_INVALID_ARGUMENT for anything else, the detail naming fn, the variable, the value
 * and the range ("fn: ACG_NUM_SLOTS=2junk is not a whole number in [1, 2]"). */
acg_status acg__env_u64(const char *fn, const char *name, uint64_t min, uint64_t max,
                        uint64_t fallback, uint64_t *out);
/* Warns once per process about ACG_* variables the library does not know. */
void acg__env_check_once(void);

/* Structs that begin with `size_t size`, of any caller's version (config.c). acg__config_read
 * copies the caller's config src into dst (dst_size bytes: this library's sizeof) over a copy
 * of defaults (its _INIT macro), so fields past an older caller's size take their defaults,
 * and sets dst's size to dst_size. ACG_ERR_INVALID_ARGUMENT, naming fn, what (the struct's
 * name), the size given and sizeof, for a size below min_size (the struct up to and including
 * its last field without a default) or above 4096, and for a larger size whose extra bytes are
 * not all zero. acg__output_write writes src (src_size bytes) into the caller's output struct
 * dst, up to dst's size, which it then sets to the bytes written; ACG_ERR_INVALID_ARGUMENT,
 * with dst untouched, when dst is NULL ("<fn>: out is NULL") or its size does not reach past the
 * size field (it was never set). acg__output_check is those checks alone, for a call that must
 * refuse before it does its work. */
acg_status acg__config_read(void *dst, size_t dst_size, const void *defaults, const void *src,
                            size_t min_size, const char *what, const char *fn);
acg_status acg__output_check(const void *dst, size_t src_size, const char *what, const char *fn);
acg_status acg__output_write(void *dst, const void *src, size_t src_size, const char *what,
                             const char *fn);

/* ---- handles ----------------------------------------------------------------------------- */

/* The type a handle was registered with. The core's own types are listed here; each layer
 * above it defines its types in its own private header, in a range of its own from
 * ACG__HANDLE_LAYER_FIRST up (the engine 64-79, the model 80-95), so its objects are checked
 * the same way while the core names none of them. */
typedef uint32_t acg__handle_type;
enum {
    ACG__HANDLE_DEVICE = 1,
    ACG__HANDLE_BUFFER,
    ACG__HANDLE_STREAM,
    ACG__HANDLE_EVENT,
    ACG__HANDLE_KERNEL,
    ACG__HANDLE_GRAPH,
    ACG__HANDLE_POOL,
    ACG__HANDLE_GROUP,
    ACG__HANDLE_LAYER_FIRST = 64,
};

/* How many calls are using an object right now (see "Lifetimes" in docs/design.md). */
typedef struct acg__life {
    _Atomic uint32_t users;
} acg__life;

/* The registry of live handles, so a destroyed or foreign pointer is rejected, not followed.
 * acg__handle_add registers p with its life (which it initializes); acg__handle_remove forgets
 * p (the object may then be freed). */
acg_status acg__handle_add(const void *p, acg__handle_type type, acg__life *life);
void acg__handle_remove(const void *p);

/* A public function's call scope: every handle validated inside it with acg__handle_use is
 * held until the function returns, so a concurrent destroy waits for the call instead of
 * freeing what it uses. Declare it first in each public function that validates handles. */
typedef struct acg__scope {
    uint32_t base, top;
} acg__scope;
acg__scope acg__scope_enter(void);
void acg__scope_exit(acg__scope *sc);
#define ACG__CALL_SCOPE                                                                            \
    acg__scope acg__call_scope __attribute__((cleanup(acg__scope_exit), unused)) =                 \
        acg__scope_enter()

/* Whether p is a live, unretired handle of this type; when it is, the current call scope holds
 * it. */
bool acg__handle_use(const void *p, acg__handle_type type);
/* acg__handle_use of n handles under one registry lock; false with *bad the first that is not
 * live (the ones before it stay held until the scope ends). */
bool acg__handle_use_many(const void *const *p, const acg__handle_type *types, uint32_t n,
                          uint32_t *bad);
/* The same check without holding (for test hooks that read a counter). */
bool acg__handle_valid(const void *p, acg__handle_type type);
/* A destroy's first step: makes p unusable by new calls and waits until no other thread's
 * call holds it. ACG_ERR_INVALID_HANDLE when p is not live (or another destroy has it). When
 * strict, ACG_ERR_IN_USE if a call enclosing this one on this thread holds p (a destroy from
 * inside a callback of a call using the object); not strict is for an owner freeing what it
 * owns, whose own enclosing calls hold it only to check it. Then either acg__handle_remove (and
 * free) or acg__handle_restore (the destroy was refused). */
acg_status acg__handle_retire(const void *p, acg__handle_type type, bool strict);
void acg__handle_restore(const void *p);
/* Waits again until no other thread's call holds p (retired), for holds that
 * acg__hold_device took after the retire's wait. */
void acg__handle_drain(const void *p);
/* A destroy of an object of dev holds dev until it returns, so the device cannot close while
 * the destroy still uses it after its object left the device's lists. It holds dev even while
 * an acg_device_close is retiring it: that close then finds the object still counted and is
 * refused, or (once the counts reach zero) drains this hold with acg__handle_drain. Call it
 * before the object leaves the device's counts. */
void acg__hold_device(acg_device *dev);
/* acg__handle_retire with the error set: "<fn>: <what> <p> is not a live <what>" or the
 * enclosing-call refusal. */
acg_status acg__retire(const void *p, acg__handle_type type, const char *fn, const char *what);
/* ACG__DESTROY_BEGIN(p, type, fn, what), the first statement of a public destroy (or free) of p:
 * the call scope (ACG__CALL_SCOPE); destroy(NULL) a no-op that returns ACG_OK; then
 * acg__retire(p, type, fn, what), which waits for other threads' calls on p to return, and
 * whose failure it returns. After it p is the caller's alone to free. */
#define ACG__DESTROY_BEGIN(p, type, fn, what)                                                      \
    ACG__CALL_SCOPE;                                                                               \
    if ((p) == NULL) {                                                                             \
        return ACG_OK;                                                                             \
    }                                                                                              \
    ACG__TRY(acg__retire((p), (type), (fn), (what)))
/* Live handles, pinned allocations of all devices and registered kernels: what holds memory
 * from the allocator hook (for acg_set_allocator). */
size_t acg__live_objects(void);
/* Test hook: handles that can be entered before the registry's table must grow (an entry then
 * allocates a larger table, which may fail); 0 with no table yet. */
size_t acg__handle_room(void);

/* Handle checks: ACG_ERR_INVALID_HANDLE (with the error set) unless p is live. */
acg_status acg__check_device(const acg_device *dev, const char *fn);
acg_status acg__check_stream(const acg_stream *s, const char *fn);
acg_status acg__check_buffer(const acg_buffer *buf, const acg_device *dev, const char *fn,
                             const char *what);
acg_status acg__check_range(const acg_buffer *buf, size_t offset, size_t size, const char *fn,
                            const char *what);

/* What acg_buffer_free(buf) would refuse, without doing anything (for objects that free
 * several buffers and must not stop half way): ACG_OK when it would succeed, counting `views`
 * of buf as freed first; ACG_ERR_IN_USE also while a capture is active on the device, which the
 * free would invalidate. */
acg_status acg__buffer_check_free(const acg_buffer *buf, uint32_t views, const void *owner,
                                  const char *fn);
/* Buffers that an object (a KV cache, a plan, a runner, a model) allocates for itself:
 * acg_buffer_alloc and acg_buffer_create_view with the owner marked from birth (before the
 * handle is live, so no other call ever sees the buffer unowned), which acg_buffer_free refuses
 * (ACG_ERR_IN_USE naming the owner) and the owner frees with acg__buffer_free_owned. `what`
 * names the owner's kind in messages and must outlive the buffer. */
acg_status acg__buffer_alloc_owned(acg_device *dev, size_t size, const void *owner,
                                   const char *what, acg_buffer **out);
acg_status acg__buffer_view_owned(acg_buffer *buf, size_t offset, size_t size, const void *owner,
                                  const char *what, acg_buffer **out);
acg_status acg__buffer_free_owned(acg_buffer *buf, const void *owner, const char *fn);
/* Whether a capture is active on the device (ACG_ERR_IN_USE with the error set, else OK). */
acg_status acg__device_check_not_capturing(acg_device *dev, const char *fn);

/* Accessors for the layers above, which do not see the objects' bodies. The object must be
 * held by the calling function (checked with acg__check_stream / acg__check_buffer). */
acg_device *acg__stream_device(const acg_stream *s);
acg_device *acg__buffer_device(const acg_buffer *buf);
/* The device's name for messages: its spec and which open it was ("cpu:0 (open #2)"). */
const char *acg__device_name(const acg_device *dev);
/* Bytes of its pool that the graph's scratch (acg_stream_alloc in its capture) occupies, each
 * piece rounded up to the pool's alignment: what the graph would need of a pool of its own.
 * 0 for NULL. The graph must not be destroyed meanwhile (its scratch never changes). */
size_t acg__graph_scratch_bytes(const acg_graph *g);

/* ---- core: the checks and steps that calls of every layer share ---------------------------- */

/* A call's check of a handle it was given: ACG_ERR_INVALID_HANDLE, "<fn>: <arg> <p> is not a
 * live <what>", unless p is a live handle of type (then held until the call returns). */
acg_status acg__check_live(const void *p, acg__handle_type type, const char *arg, const char *what,
                           const char *fn);
/* The check of a pointer argument that must be given: ACG_ERR_INVALID_ARGUMENT, "<fn>: <name>
 * is NULL", when p is NULL, else ACG_OK. */
acg_status acg__check_arg(const void *p, const char *name, const char *fn);
/* An object's memory: size zeroed bytes in one allocation, or NULL with ACG_ERR_OUT_OF_MEMORY
 * set as "<fn>: out of memory". */
void *acg__new(size_t size, const char *fn);
/* The most ranks a device group takes, and the check of the ranks a comm names:
 * ACG_ERR_INVALID_ARGUMENT, "<fn>: the comm says rank <rank> of <n_ranks> ranks (1 to 64
 * ranks, rank below their number)", unless 1 <= n_ranks <= ACG__MAX_RANKS and rank < n_ranks. */
#define ACG__MAX_RANKS 64
acg_status acg__comm_check_ranks(const acg_comm *comm, const char *fn);
/* A create's last step, acg__handle_add with its failure named: ACG_ERR_OUT_OF_MEMORY with
 * "<fn>: out of memory" set. */
acg_status acg__handle_publish(const void *p, acg__handle_type type, acg__life *life,
                               const char *fn);

/* ---- words every backend's slots share ----------------------------------------------------- */

/* A kernel whose definition has no code for this backend: ACG_ERR_UNSUPPORTED, "<fn>: kernel
 * <kernel> has no code for the <backend> backend (its definition has no <format> implementation
 * for <backend>: <member> or an impls entry)", member naming the definition's own field of that
 * code ("cuda.fatbin"), or NULL for a format that only an impls entry holds (then "...: an impls
 * entry)"). */
acg_status acg__error_no_kernel_code(const char *fn, const char *kernel, const char *backend,
                                     const char *format, const char *member);
/* Opens a backend's vendor library (RTLD_NOW | RTLD_LOCAL): the file the ACG_* variable names,
 * or fallback where it is unset or empty; *path the name opened. NULL when it cannot be opened,
 * with why (why_size bytes) set to "<missing>: dlopen("<path>") failed (<dlerror>); <fix>". */
void *acg__dlopen_vendor(const char *variable, const char *fallback, const char *missing,
                         const char *fix, const char **path, char *why, size_t why_size);

/* ---- traces (trace.c; the public side is include/acg/trace.h) ------------------------------
 * A place that may emit an event first asks acg__trace_on(category): one relaxed load of the
 * categories the installed hook takes (0 without a hook) and a branch, which is all tracing
 * costs while it is off. Only then does it read the clock and build the event's arguments. */

extern _Atomic uint32_t acg__trace_mask;

static inline bool acg__trace_on(uint32_t category) {
    return (atomic_load_explicit(&acg__trace_mask, memory_order_relaxed) & category) != 0;
}

/* acg_trace_now_ns: the clock of every event. */
uint64_t acg__trace_now(void);
/* Hands one event to the hook (if one takes category now; from inside a hook: dropped). ts is
 * acg__trace_now()'s; dur only for ACG_TRACE_COMPLETE; stream 0 but for a stream's timeline. */
void acg__trace_emit(uint32_t category, acg_trace_phase phase, const char *name, uint64_t ts,
                     uint64_t dur, uint32_t stream, const acg_trace_arg *args, uint32_t n_args);
/* A new stream timeline's number (acg_trace_event.stream), for a backend that times streams. */
uint32_t acg__trace_new_stream(void);

/* A span on the calling thread: acg__trace_begin emits BEGIN when the category is traced and
 * remembers it, so the matching acg__trace_end emits END exactly when BEGIN went out. */
typedef struct acg__trace_span {
    const char *name;
    uint32_t category;
    bool on;
} acg__trace_span;

static inline void acg__trace_begin(acg__trace_span *sp, uint32_t category, const char *name,
                                    const acg_trace_arg *args, uint32_t n_args) {
    sp->name = name;
    sp->category = category;
    sp->on = acg__trace_on(category);
    if (sp->on) {
        acg__trace_emit(category, ACG_TRACE_BEGIN, name, acg__trace_now(), 0, 0, args, n_args);
    }
}

static inline void acg__trace_end(acg__trace_span *sp, const acg_trace_arg *args, uint32_t n_args) {
    if (sp->on) {
        acg__trace_emit(sp->category, ACG_TRACE_END, sp->name, acg__trace_now(), 0, 0, args,
                        n_args);
        sp->on = false;
    }
}

/* Arguments, for arrays of acg_trace_arg: ACG__TRACE_U("batch", b), ... */
#define ACG__TRACE_U(k, v)                                                                         \
    { .key = (k), .type = ACG_TRACE_ARG_UINT, .value.u = (uint64_t)(v) }
#define ACG__TRACE_I(k, v)                                                                         \
    { .key = (k), .type = ACG_TRACE_ARG_INT, .value.i = (int64_t)(v) }
#define ACG__TRACE_D(k, v)                                                                         \
    { .key = (k), .type = ACG_TRACE_ARG_DOUBLE, .value.d = (double)(v) }
#define ACG__TRACE_B(k, v)                                                                         \
    { .key = (k), .type = ACG_TRACE_ARG_BOOL, .value.b = (v) }
#define ACG__TRACE_S(k, v)                                                                         \
    { .key = (k), .type = ACG_TRACE_ARG_STRING, .value.s = (v) }
#define ACG__TRACE_N(args) ((uint32_t)(sizeof(args) / sizeof((args)[0])))

#endif /* ACG_CORE_LAYER_H */
