/*
 * tool_trace.c — the trace recorder behind `--trace FILE`: the hook copies each event into an
 * arena under one mutex (the library calls it from several threads), and the file is written
 * once, at the end, through the JSON writer into a tool_output (tool_cli.h), opened at the start.
 */
#include "tool_trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tool_cli.h"
#include "tool_report.h"

#define CHUNK_BYTES (256u * 1024u)

/* An event as kept: its strings (names, keys, string values) copied into the arena. */
typedef struct rec_event {
    char ph; /* 'B', 'E', 'X', 'i' */
    uint32_t tid;
    uint64_t ts, dur;
    const char *name, *cat;
    uint32_t n_args;
    acg_trace_arg args[]; /* (n_args) */
} rec_event;

typedef struct chunk {
    struct chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char bytes[];
} chunk;

struct tool_trace {
    tool_trace_options o;
    bool recording;  /* a file was asked for: every event is kept */
    tool_output out; /* the file, open from tool_trace_open to the end */
    char *process;   /* the process's name, copied */
    pthread_mutex_t lock;
    chunk *chunks;      /* the arena, newest first */
    rec_event **events; /* (n_events) in arrival order */
    size_t n_events, cap_events;
    uint64_t lost; /* events not kept for want of memory */
    uint32_t main_thread;
    bool installed;
};

/* ---- recording ------------------------------------------------------------------------------- */

/* Bytes from the arena (lock held), 16-byte aligned; NULL when out of memory. */
static void *arena_alloc(tool_trace *t, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    chunk *c = t->chunks;
    if (c == NULL || c->size - c->used < bytes) {
        size_t size = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
        c = malloc(sizeof *c + size);
        if (c == NULL) {
            return NULL;
        }
        c->next = t->chunks;
        c->used = 0;
        c->size = size;
        t->chunks = c;
    }
    void *p = c->bytes + c->used;
    c->used += bytes;
    return p;
}

static const char *arena_string(tool_trace *t, const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = arena_alloc(t, n);
    if (copy != NULL) {
        memcpy(copy, s, n);
    }
    return copy;
}

static char phase_letter(acg_trace_phase phase) {
    switch (phase) {
    case ACG_TRACE_BEGIN:
        return 'B';
    case ACG_TRACE_END:
        return 'E';
    case ACG_TRACE_COMPLETE:
        return 'X';
    default:
        return 'i';
    }
}

/* Copies ev into the arena and appends it (lock held). False when out of memory. */
static bool record(tool_trace *t, const acg_trace_event *ev) {
    if (t->n_events == t->cap_events) {
        size_t cap = t->cap_events ? 2 * t->cap_events : 4096;
        rec_event **grown = realloc(t->events, cap * sizeof *grown);
        if (grown == NULL) {
            return false;
        }
        t->events = grown;
        t->cap_events = cap;
    }
    rec_event *r = arena_alloc(t, sizeof *r + ev->n_args * sizeof r->args[0]);
    if (r == NULL) {
        return false;
    }
    r->ph = phase_letter(ev->phase);
    r->tid = ev->stream != 0 ? TOOL_TRACE_STREAM_TID + ev->stream : ev->thread;
    r->ts = ev->ts_ns;
    r->dur = ev->dur_ns;
    r->name = arena_string(t, ev->name);
    r->cat = arena_string(t, ev->category_name);
    r->n_args = ev->n_args;
    bool ok = r->name != NULL && r->cat != NULL;
    for (uint32_t i = 0; ok && i < ev->n_args; i++) {
        const acg_trace_arg *a = &ev->args[i];
        acg_trace_arg *to = &r->args[i];
        *to = *a;
        to->key = arena_string(t, a->key);
        switch (a->type) {
        case ACG_TRACE_ARG_UINT:
        case ACG_TRACE_ARG_INT:
        case ACG_TRACE_ARG_DOUBLE:
        case ACG_TRACE_ARG_BOOL:
            break; /* the value is copied */
        default:
            to->type = ACG_TRACE_ARG_STRING;
            to->value.s = arena_string(t, a->type == ACG_TRACE_ARG_STRING ? a->value.s : "?");
            ok = to->value.s != NULL;
            break;
        }
        ok = ok && to->key != NULL;
    }
    if (ok) {
        t->events[t->n_events++] = r;
    }
    return ok;
}

static void on_event(const acg_trace_event *ev, void *user) {
    tool_trace *t = user;
    if (t->o.observe != NULL && (ev->category & t->o.observe_categories) != 0) {
        t->o.observe(ev, t->o.user);
    }
    if (t->recording) {
        pthread_mutex_lock(&t->lock);
        if (!record(t, ev)) {
            t->lost++;
        }
        pthread_mutex_unlock(&t->lock);
    }
}

/* ---- opening and finishing ------------------------------------------------------------------- */

static void free_trace(tool_trace *t) {
    while (t->chunks != NULL) {
        chunk *c = t->chunks;
        t->chunks = c->next;
        free(c);
    }
    tool_output_abandon(&t->out);
    pthread_mutex_destroy(&t->lock);
    free(t->events);
    free(t->process);
    free(t);
}

int tool_trace_open(const tool_trace_options *options, tool_trace **out) {
    tool_trace *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return tool_failf("writing the trace", "out of memory");
    }
    pthread_mutex_init(&t->lock, NULL);
    t->o = *options;
    t->o.path = NULL; /* not kept: out holds the name */
    t->recording = options->path != NULL;
    t->process = strdup(options->process != NULL ? options->process : "acg");
    int rc = t->process != NULL ? TOOL_EXIT_OK : tool_failf("writing the trace", "out of memory");
    if (rc == TOOL_EXIT_OK && t->recording) {
        rc = tool_output_open(&t->out, "writing the trace", options->path);
    }
    if (rc != TOOL_EXIT_OK) {
        free_trace(t);
        return rc;
    }
    *out = t;
    return TOOL_EXIT_OK;
}

int tool_trace_start(tool_trace *t) {
    acg_trace_config c = ACG_TRACE_CONFIG_INIT;
    c.fn = on_event;
    c.user = t;
    c.categories = t->recording ? ACG_TRACE_ALL : t->o.observe_categories;
    t->main_thread = acg_trace_get_thread_id();
    acg_status st = acg_trace_set_hook(&c);
    if (st != ACG_OK) {
        return tool_fail(st, "installing the trace hook");
    }
    t->installed = true;
    return TOOL_EXIT_OK;
}

static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* An event and where it arrived, for writing in the order of time. */
typedef struct ordered_event {
    const rec_event *e;
    size_t arrival;
} ordered_event;

/* By start; at one start a longer span first (a replay before the first op inside it, which
 * the library tells before the replay, once the op ended); else in arrival order. */
static int compare_events(const void *a, const void *b) {
    const ordered_event *x = a, *y = b;
    if (x->e->ts != y->e->ts) {
        return x->e->ts < y->e->ts ? -1 : 1;
    }
    if (x->e->dur != y->e->dur) {
        return x->e->dur > y->e->dur ? -1 : 1;
    }
    return (x->arrival > y->arrival) - (x->arrival < y->arrival);
}

/* A metadata event naming a process or a track. */
static void write_name(tool_json *j, const char *what, int64_t pid, const uint32_t *tid,
                       const char *name) {
    tool_json_object_begin(j, NULL);
    tool_json_string(j, "name", what);
    tool_json_string(j, "ph", "M");
    tool_json_int(j, "pid", pid);
    if (tid != NULL) {
        tool_json_uint(j, "tid", *tid);
    }
    tool_json_object_begin(j, "args");
    tool_json_string(j, "name", name);
    tool_json_object_end(j);
    tool_json_object_end(j);
}

static void write_event(tool_json *j, const rec_event *r, uint64_t t0, int64_t pid) {
    char ph[2] = {r->ph, '\0'};
    tool_json_object_begin(j, NULL);
    tool_json_string(j, "name", r->name);
    tool_json_string(j, "cat", r->cat);
    tool_json_string(j, "ph", ph);
    tool_json_fixed(j, "ts", (int64_t)(r->ts - t0), 3);
    if (r->ph == 'X') {
        tool_json_fixed(j, "dur", (int64_t)r->dur, 3);
    }
    if (r->ph == 'i') {
        tool_json_string(j, "s", "t"); /* an instant of its thread */
    }
    tool_json_int(j, "pid", pid);
    tool_json_uint(j, "tid", r->tid);
    tool_json_object_begin(j, "args");
    for (uint32_t i = 0; i < r->n_args; i++) {
        const acg_trace_arg *a = &r->args[i];
        switch (a->type) {
        case ACG_TRACE_ARG_UINT:
            tool_json_uint(j, a->key, a->value.u);
            break;
        case ACG_TRACE_ARG_INT:
            tool_json_int(j, a->key, a->value.i);
            break;
        case ACG_TRACE_ARG_DOUBLE:
            tool_json_number(j, a->key, a->value.d);
            break;
        case ACG_TRACE_ARG_BOOL:
            tool_json_bool(j, a->key, a->value.b);
            break;
        default:
            tool_json_string(j, a->key, a->value.s);
            break;
        }
    }
    tool_json_object_end(j);
    tool_json_object_end(j);
}

/* Writes every event in the order of time (a span the library tells once it ended, such as a
 * replay holding the ops it ran, arrives after what began inside it), then the names of the
 * process and of every track it saw. */
static int write_trace(tool_trace *t) {
    uint64_t t0 = UINT64_MAX;
    uint32_t *tids = malloc((t->n_events + 1) * sizeof *tids);
    ordered_event *order = malloc((t->n_events + 1) * sizeof *order);
    if (tids == NULL || order == NULL) {
        free(tids);
        free(order);
        return tool_failf("writing the trace", "out of memory");
    }
    for (size_t i = 0; i < t->n_events; i++) {
        order[i] = (ordered_event){t->events[i], i};
    }
    qsort(order, t->n_events, sizeof *order, compare_events);
    for (size_t i = 0; i < t->n_events; i++) {
        t0 = t->events[i]->ts < t0 ? t->events[i]->ts : t0;
        tids[i] = t->events[i]->tid;
    }
    qsort(tids, t->n_events, sizeof *tids, compare_u32);
    int64_t pid = t->o.pid;
    tool_json j;
    tool_json_begin(&j, t->out.f);
    tool_json_object_begin(&j, NULL);
    tool_json_array_begin(&j, "traceEvents");
    for (size_t i = 0; i < t->n_events; i++) {
        write_event(&j, order[i].e, t0, pid);
    }
    free(order);
    write_name(&j, "process_name", pid, NULL, t->process);
    for (size_t i = 0; i < t->n_events; i++) {
        if (i > 0 && tids[i] == tids[i - 1]) {
            continue;
        }
        char name[48];
        if (tids[i] > TOOL_TRACE_STREAM_TID) {
            snprintf(name, sizeof name, "stream %u", tids[i] - TOOL_TRACE_STREAM_TID);
        } else if (tids[i] == t->main_thread) {
            snprintf(name, sizeof name, "main");
        } else {
            snprintf(name, sizeof name, "thread %u", tids[i]);
        }
        write_name(&j, "thread_name", pid, &tids[i], name);
    }
    tool_json_array_end(&j);
    tool_json_string(&j, "displayTimeUnit", "ms");
    tool_json_object_begin(&j, "otherData");
    tool_json_string(&j, "tool", t->process);
    tool_json_uint(&j, "events", t->n_events);
    tool_json_object_end(&j);
    tool_json_object_end(&j);
    free(tids);
    int rc = tool_json_end_unflushed(&j);
    return rc == TOOL_EXIT_OK ? tool_output_commit(&t->out) : rc;
}

int tool_trace_finish(tool_trace *t, int rc) {
    if (t == NULL) {
        return rc;
    }
    if (t->installed) {
        acg_status st = acg_trace_set_hook(NULL);
        if (st != ACG_OK && rc == TOOL_EXIT_OK) {
            rc = tool_fail(st, "removing the trace hook");
        }
    }
    if (rc == TOOL_EXIT_OK && t->recording && t->lost > 0) {
        rc = tool_failf("writing the trace", "out of memory: %llu events were not kept",
                        (unsigned long long)t->lost);
    }
    if (rc == TOOL_EXIT_OK && t->recording) {
        rc = write_trace(t);
    }
    free_trace(t);
    return rc;
}
