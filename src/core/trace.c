/* trace.c — the process's one trace hook (include/acg/trace.h), and how events reach it.
 *
 * Off, tracing is one word: acg__trace_mask, the categories the installed hook takes, 0 without
 * one; every place that may emit reads it relaxed and branches (acg__trace_on). On, an event
 * goes to the hook through a record {fn, user, categories} that acg_trace_set_hook fills and
 * publishes. A record counts the calls using it: an emitter loads the published record, counts
 * itself in, and calls only if the record is still the published one (otherwise it counts
 * itself out again: the hook was replaced meanwhile). The setter publishes the new record, then
 * waits until the old one counts no calls. A caller that counted itself in after that wait sees
 * another record published and never reads the old one's fields, so when the setter returns no
 * call of the old hook is running or will start, and its user context may be freed. New calls
 * go to the new record, so the wait ends however busy the other threads are.
 *
 * Two static records take turns: the one not published is free to be rewritten, because the
 * setter that retired it waited for its calls. Setters are serialized by a mutex.
 */
#include <sched.h>
#include <time.h>

#include "core/acg-impl.h"

_Atomic uint32_t acg__trace_mask;

typedef struct hook_record {
    acg_trace_fn fn;
    void *user;
    uint32_t categories;
    _Atomic uint32_t calls; /* calls of fn running, or about to check the record */
} hook_record;

static hook_record records[2];
static hook_record *_Atomic published;
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t next_thread, next_stream;
static _Thread_local uint32_t thread_id;
static _Thread_local bool in_hook; /* this thread is inside a call of the hook */

static const char *category_name(uint32_t category) {
    switch (category) {
    case ACG_TRACE_MODEL:
        return "model";
    case ACG_TRACE_ENGINE:
        return "engine";
    case ACG_TRACE_STREAM:
        return "stream";
    default:
        return "other";
    }
}

uint64_t acg__trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t acg_trace_now_ns(void) { return acg__trace_now(); }

uint32_t acg_trace_get_thread_id(void) {
    if (thread_id == 0) {
        thread_id = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed) + 1;
    }
    return thread_id;
}

uint32_t acg__trace_new_stream(void) {
    return atomic_fetch_add_explicit(&next_stream, 1, memory_order_relaxed) + 1;
}

void acg__trace_emit(uint32_t category, acg_trace_phase phase, const char *name, uint64_t ts,
                     uint64_t dur, uint32_t stream, const acg_trace_arg *args, uint32_t n_args) {
    if (in_hook) {
        return;
    }
    hook_record *h = atomic_load(&published);
    if (h == NULL) {
        return;
    }
    atomic_fetch_add(&h->calls, 1);
    /* Still published after counting in: the setter that replaces it will wait for this call.
     * Otherwise the fields may be rewritten already: not a word of them is read. */
    if (atomic_load(&published) == h && (h->categories & category) != 0) {
        acg_trace_event ev = {
            .size = sizeof ev,
            .phase = phase,
            .category = category,
            .category_name = category_name(category),
            .name = name,
            .ts_ns = ts,
            .dur_ns = phase == ACG_TRACE_COMPLETE ? dur : 0,
            .thread = acg_trace_get_thread_id(),
            .stream = stream,
            .n_args = n_args,
            .args = n_args > 0 ? args : NULL,
        };
        in_hook = true;
        h->fn(&ev, h->user);
        in_hook = false;
    }
    atomic_fetch_sub(&h->calls, 1);
}

/* Waits until no call uses record h: yielding first, then sleeping 50 µs at a time. */
static void drain(hook_record *h) {
    for (uint32_t spins = 0; atomic_load(&h->calls) != 0; spins++) {
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec nap = {0, 50000};
            nanosleep(&nap, NULL);
        }
    }
}

acg_status acg_trace_set_hook(const acg_trace_config *config) {
    static const char fn[] = "acg_trace_set_hook";
    if (in_hook) {
        return acg__error(ACG_ERR_IN_USE,
                          "%s: called from inside the trace hook, which it would wait for", fn);
    }
    const acg_trace_config defaults = ACG_TRACE_CONFIG_INIT;
    acg_trace_config whole = defaults;
    whole.fn = NULL;
    if (config != NULL) {
        ACG__TRY(acg__config_read(&whole, sizeof whole, &defaults, config,
                                  offsetof(acg_trace_config, user), "acg_trace_config", fn));
    }
    if (whole.fn != NULL && (whole.categories == 0 || (whole.categories & ~ACG_TRACE_ALL) != 0)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: categories 0x%x: a hook takes at least one of ACG_TRACE_MODEL, "
                          "ACG_TRACE_ENGINE and ACG_TRACE_STREAM (0x%x), and nothing else",
                          fn, whole.categories, ACG_TRACE_ALL);
    }
    pthread_mutex_lock(&set_lock);
    hook_record *old = atomic_load(&published);
    hook_record *next = NULL;
    if (whole.fn != NULL) {
        /* The record not published: its last setter waited for its calls. */
        next = old == &records[0] ? &records[1] : &records[0];
        next->fn = whole.fn;
        next->user = whole.user;
        next->categories = whole.categories;
    }
    atomic_store(&published, next);
    atomic_store(&acg__trace_mask, next != NULL ? next->categories : 0u);
    if (old != NULL) {
        drain(old);
    }
    pthread_mutex_unlock(&set_lock);
    return ACG_OK;
}
