/* loop.c — loops: a body of work run again while a condition in device memory is set.
 *
 * In a capture a loop is a node of the description (ACG_NODE_LOOP) whose body is the nodes
 * after it, and a backend that records natively opens and closes it in its recording too
 * (loop_begin, loop_end). Outside a capture the body runs as it is queued and is noted (the
 * same nodes the ledger would hold, with the call that ran each); acg_stream_loop_end then
 * reads the condition and runs the notes again while it is set. Either way the rules of a body
 * (acg__loop_gate) are the same, so code that loops eagerly also captures. */
#include <string.h>

#include "core/acg-impl.h"

typedef acg_status (*eager_fn)(acg_stream *s, const acg__node *node);

/* A stream's eager loops, from the outermost loop's begin to its end: the nodes queued since,
 * each with the call that ran it (NULL for a nested loop's node). */
struct acg__eager_loop {
    acg__node *nodes; /* (n) */
    uint32_t n, cap;
    eager_fn *run; /* (n) */
    uint32_t cap_run;
    uint32_t open[ACG_MAX_LOOP_DEPTH]; /* the open loops' nodes, outermost first */
    uint32_t depth;
};

static const char body_rule[] =
    "a loop's body holds kernels, device-to-device copies, fills and nested loops only";

acg_status acg__loop_gate(acg_stream *s, acg__capture *c, bool body_kind, const char *fn) {
    if (c == NULL) {
        if (s->eager_loop == NULL || body_kind) {
            return ACG_OK;
        }
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s inside a loop (acg_stream_loop_begin) is refused: %s", fn, body_rule);
    }
    if (c->state != ACG_CAPTURE_ACTIVE || c->loop_depth == 0) {
        return ACG_OK;
    }
    if (s != c->loop_stream) {
        return acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                       "%s on a stream of the capture other than the one with a "
                                       "loop open invalidated the capture (a loop's body is one "
                                       "stream's work)",
                                       fn);
    }
    if (!body_kind) {
        return acg__capture_invalidate(
            c, ACG_ERR_CAPTURE_INVALIDATED,
            "%s inside a loop (acg_stream_loop_begin) invalidated the capture: %s", fn, body_rule);
    }
    return ACG_OK;
}

/* Appends node to the stream's eager loop (its buffers held until the loop closes). */
static acg_status note(acg_stream *s, const acg__node *node, eager_fn run, const char *fn) {
    struct acg__eager_loop *e = s->eager_loop;
    if (e->n == UINT32_MAX - 1 ||
        !acg__grow((void **)&e->nodes, &e->cap, e->n + 1, sizeof *e->nodes) ||
        !acg__grow((void **)&e->run, &e->cap_run, e->n + 1, sizeof *e->run)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory noting the loop's body", fn);
    }
    acg__node *n = &e->nodes[e->n];
    acg__ledger_write(n, node);
    e->run[e->n++] = run;
    pthread_mutex_lock(&s->dev->lock);
    acg__node_refs(n, +1);
    pthread_mutex_unlock(&s->dev->lock);
    return ACG_OK;
}

acg_status acg__loop_record(acg_stream *s, const acg__node *node, eager_fn eager, const char *fn) {
    return s->eager_loop != NULL ? note(s, node, eager, fn) : ACG_OK;
}

void acg__loop_unrecord(acg_stream *s) {
    struct acg__eager_loop *e = s->eager_loop;
    if (e != NULL) {
        e->n--;
        pthread_mutex_lock(&s->dev->lock);
        acg__node_refs(&e->nodes[e->n], -1);
        pthread_mutex_unlock(&s->dev->lock);
    }
}

void acg__loop_eager_free(acg_stream *s) {
    struct acg__eager_loop *e = s->eager_loop;
    if (e == NULL) {
        return;
    }
    pthread_mutex_lock(&s->dev->lock);
    for (uint32_t i = 0; i < e->n; i++) {
        acg__node_refs(&e->nodes[i], -1);
    }
    pthread_mutex_unlock(&s->dev->lock);
    acg__free(e->nodes);
    acg__free(e->run);
    acg__free(e);
    s->eager_loop = NULL;
}

/* ---- running an eager loop ---------------------------------------------------------------- */

static acg_status eager_loop(acg_stream *s, const struct acg__eager_loop *e, uint32_t at,
                             uint32_t runs);

/* Runs nodes [from, to) of the notes again, a nested loop whole. */
static acg_status eager_range(acg_stream *s, const struct acg__eager_loop *e, uint32_t from,
                              uint32_t to) {
    acg_status st = ACG_OK;
    for (uint32_t i = from; i < to && st == ACG_OK; i++) {
        if (e->run[i] == NULL) {
            st = eager_loop(s, e, i, 0);
            i += e->nodes[i].loop_body;
        } else {
            st = acg__device_fault(s->dev, e->run[i](s, &e->nodes[i]));
        }
    }
    return st;
}

/* The loop of node `at` after `runs` runs of its body: reads the condition (which waits for
 * the stream) after each run, and runs the body again while it is set. */
static acg_status eager_loop(acg_stream *s, const struct acg__eager_loop *e, uint32_t at,
                             uint32_t runs) {
    const acg__node *loop = &e->nodes[at];
    acg_status st = ACG_OK;
    while (st == ACG_OK) {
        if (runs != 0) {
            uint32_t cond = 0;
            st = acg__device_fault(s->dev, s->dev->vt->copy_d2h(s->impl, &cond, loop->dst_mem,
                                                                loop->dst_off, sizeof cond, false));
            if (st != ACG_OK || cond == 0 || runs >= loop->loop_max) {
                break;
            }
        }
        st = eager_range(s, e, at + 1, at + 1 + loop->loop_body);
        runs++;
    }
    return st;
}

/* ---- public calls -------------------------------------------------------------------------- */

/* Opens an eager loop on s (stream lock held). */
static acg_status eager_begin(acg_stream *s, const acg__node *node, const char *fn) {
    if (s->eager_loop == NULL) {
        s->eager_loop = acg__new(sizeof *s->eager_loop, fn);
        if (s->eager_loop == NULL) {
            return ACG_ERR_OUT_OF_MEMORY;
        }
    }
    struct acg__eager_loop *e = s->eager_loop;
    acg_status st = note(s, node, NULL, fn);
    if (st == ACG_OK) {
        e->open[e->depth++] = e->n - 1;
    } else if (e->depth == 0) {
        acg__loop_eager_free(s);
    }
    return st;
}

/* Opens a loop in the capture s is in (stream and device locks held). */
static acg_status capture_begin(acg_stream *s, acg__capture *c, const acg__node *node,
                                const char *fn) {
    ACG__TRY(acg__capture_check(c, fn));
    ACG__TRY(acg__loop_gate(s, c, true, fn));
    acg_device *dev = s->dev;
    if (!dev->cap.graph_loops) {
        return acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                       "%s during capture invalidated the capture: %s graphs have "
                                       "no loops (graph_loops is false: %s); replay one step per "
                                       "launch instead",
                                       fn, dev->spec, dev->cap.detail);
    }
    ACG__TRY(acg__capture_add(s, c, node));
    if (c->rec != NULL) {
        /* graph_loops with native capture says the slots are there (mask_capability). */
        ACG__TRY(acg__capture_native_step(
            c, dev->vt->loop_begin(s->impl, node->dst_mem, node->dst_off, node->loop_max), fn));
    }
    c->loops[c->loop_depth++] = c->desc.n_nodes - 1;
    c->loop_stream = s;
    return ACG_OK;
}

acg_status acg_stream_loop_begin(acg_stream *s, acg_buffer *cond, size_t offset,
                                 uint32_t max_iterations) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_loop_begin";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(acg__check_buffer(cond, s->dev, fn, "cond"));
    if (max_iterations == 0 || offset % 4 != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          max_iterations == 0 ? "max_iterations is 0"
                                              : "offset is not a multiple of 4");
    }
    ACG__TRY(acg__check_range(cond, offset, sizeof(uint32_t), fn, "cond"));
    ACG__TRY(acg__device_check_lost(s->dev, fn));
    acg__node node = {.kind = ACG_NODE_LOOP,
                      .dst_mem = cond->mem,
                      .dst_off = cond->offset + offset,
                      .loop_max = max_iterations,
                      .n_buffers = 1,
                      .buffers = {cond}};
    acg__capture *c = acg__stream_enter(s);
    acg_status st = acg__check_scratch(c, &node, fn);
    uint32_t depth = c != NULL ? c->loop_depth : s->eager_loop != NULL ? s->eager_loop->depth : 0;
    if (st == ACG_OK && depth == ACG_MAX_LOOP_DEPTH &&
        (c == NULL || c->state == ACG_CAPTURE_ACTIVE)) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %d loops are open on the stream already", fn,
                        ACG_MAX_LOOP_DEPTH);
    }
    if (st == ACG_OK) {
        st = c == NULL ? eager_begin(s, &node, fn) : capture_begin(s, c, &node, fn);
    }
    acg__stream_leave(s, c);
    return st;
}

/* Closes the stream's innermost eager loop and runs the rest of it (stream lock held). */
static acg_status eager_end(acg_stream *s, const char *fn) {
    struct acg__eager_loop *e = s->eager_loop;
    uint32_t at = e->open[--e->depth];
    e->nodes[at].loop_body = e->n - at - 1;
    acg_status st = acg__device_check_lost(s->dev, fn);
    if (st == ACG_OK) {
        st = eager_loop(s, e, at, 1);
    }
    if (e->depth == 0) {
        acg__loop_eager_free(s);
    }
    return st;
}

/* Closes the innermost loop of the capture (stream and device locks held): later work on the
 * stream depends on the loop's node. */
static acg_status capture_end(acg_stream *s, acg__capture *c, const char *fn) {
    uint32_t at = c->loops[--c->loop_depth];
    c->desc.nodes[at].loop_body = c->desc.n_nodes - at - 1;
    s->frontier.v[0] = at;
    s->frontier.n = 1;
    if (c->rec != NULL) {
        return acg__capture_native_step(c, s->dev->vt->loop_end(s->impl), fn);
    }
    return ACG_OK;
}

acg_status acg_stream_loop_end(acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_loop_end";
    ACG__TRY(acg__check_stream(s, fn));
    acg__capture *c = acg__stream_enter(s);
    const bool open = c != NULL ? c->loop_depth != 0 && c->loop_stream == s : s->eager_loop != NULL;
    acg_status st;
    if (c != NULL && c->state != ACG_CAPTURE_ACTIVE) {
        /* Refused as all work is, closing the loop if one was open. */
        c->loop_depth -= open;
        st = acg__capture_check(c, fn);
    } else if (!open) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: no loop is open on the stream", fn);
    } else {
        st = c != NULL ? capture_end(s, c, fn) : eager_end(s, fn);
    }
    acg__stream_leave(s, c);
    return st;
}
