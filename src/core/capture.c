/* capture.c — recording work submitted to streams into a graph description.
 *
 * A capture begins on one stream (the origin); other streams join it by waiting on an event
 * recorded in it (fork) and leave it when the origin waits on their work (join). Each stream of
 * a capture has a frontier: the nodes its next work depends on. Every capture state change
 * happens under the device lock. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

static _Atomic uint64_t next_capture_id = 1;

acg__capture *acg__stream_enter(acg_stream *s) {
    pthread_mutex_lock(&s->lock);
    if (atomic_load_explicit(&s->capture, memory_order_acquire) == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&s->dev->lock);
    /* A capture being ended elsewhere is neither live nor gone yet: wait for its end. */
    acg__device_await_endings(s->dev);
    acg__capture *c = atomic_load_explicit(&s->capture, memory_order_relaxed);
    if (c == NULL) {
        pthread_mutex_unlock(&s->dev->lock);
    }
    return c;
}

acg_status acg__stream_enter_eager(acg_stream *s, const char *note, const char *fn) {
    acg__capture *c = acg__stream_enter(s);
    if (c == NULL) {
        return ACG_OK;
    }
    acg_status st =
        acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                "%s on a capturing stream%s invalidated the capture", fn, note);
    acg__stream_leave(s, c);
    return st;
}

void acg__stream_leave(acg_stream *s, acg__capture *c) {
    if (c != NULL) {
        pthread_mutex_unlock(&s->dev->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

acg_status acg__check_stream(const acg_stream *s, const char *fn) {
    return acg__check_live(s, ACG__HANDLE_STREAM, "stream", "stream", fn);
}

void acg__buffers_mark_use(const acg_stream *s, const acg_buffer *const *buffers, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        acg_buffer *root = (acg_buffer *)buffers[i];
        while (root->parent != NULL) {
            root = root->parent;
        }
        /* Once per stream and buffer: later launches only read the word. */
        if ((atomic_load_explicit(&root->used_by, memory_order_relaxed) & s->use_bit) == 0) {
            atomic_fetch_or_explicit(&root->used_by, s->use_bit, memory_order_relaxed);
        }
    }
}

acg_status acg__check_scratch(const acg__capture *c, const acg__node *node, const char *fn) {
    /* Graph scratch is pool memory that other graphs of the pool reuse, and it dies with its
     * graph: only the capture that carved it may touch it. */
    for (uint32_t i = 0; i < node->n_buffers; i++) {
        const acg_buffer *b = node->buffers[i];
        if (b->scratch && (c == NULL || c->id != b->capture_id)) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: buffer %u is graph scratch, usable only inside the capture "
                              "that allocated it",
                              fn, i);
        }
    }
    return ACG_OK;
}

acg_status acg__submit(acg_stream *s, const char *fn, const acg__node *node,
                       acg_status (*eager)(acg_stream *s, const acg__node *node)) {
    ACG__TRY(acg__device_check_lost(s->dev, fn));
    acg_status st = ACG_OK;
    acg__capture *c = acg__stream_enter(s);
    if ((st = acg__check_scratch(c, node, fn)) != ACG_OK) {
        acg__stream_leave(s, c);
        return st;
    }
    bool body_kind = node->kind == ACG_NODE_KERNEL || node->kind == ACG_NODE_COPY_D2D ||
                     node->kind == ACG_NODE_FILL;
    if (c == NULL) {
        if ((st = acg__loop_gate(s, NULL, body_kind, fn)) == ACG_OK &&
            (st = acg__loop_record(s, node, eager, fn)) == ACG_OK) {
            acg__buffers_mark_use(s, node->buffers, node->n_buffers);
            st = acg__device_fault(s->dev, eager(s, node));
            if (st != ACG_OK) {
                acg__loop_unrecord(s);
            }
        }
    } else if ((st = acg__capture_check(c, fn)) != ACG_OK) {
        /* refused: the capture was invalidated earlier */
    } else if ((st = acg__loop_gate(s, c, body_kind, fn)) != ACG_OK) {
        /* refused inside a loop */
    } else if (node->host != NULL && !node->host_pinned) {
        st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                     "%s with pageable host memory during capture invalidated "
                                     "the capture (the graph would touch it at every replay; "
                                     "use acg_pinned_alloc)",
                                     fn);
    } else if (node->kind == ACG_NODE_HOST && !s->dev->cap.graph_host_functions) {
        /* Refused, not recorded: a graph that cannot call the function would skip it. */
        st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                     "%s during capture invalidated the capture: %s graphs "
                                     "cannot call host functions",
                                     fn, s->dev->spec);
    } else {
        st = acg__capture_add(s, c, node);
        if (st == ACG_OK && c->rec != NULL) {
            /* Native capture: the work goes down the normal path and the driver records it;
             * the description above is the ledger. */
            st = acg__capture_native_step(c, eager(s, node), fn);
        }
    }
    acg__stream_leave(s, c);
    return st;
}

acg_status acg__capture_invalidate(acg__capture *c, acg_status status, const char *fmt, ...) {
    char msg[sizeof c->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->state == ACG_CAPTURE_ACTIVE) {
        c->state = ACG_CAPTURE_INVALIDATED;
        c->why_status = status;
        snprintf(c->why, sizeof c->why, "%s", msg);
        /* Nothing more reaches the driver: its recording can go now, which also takes every
         * stream out of recording mode before one of them may be destroyed. */
        acg__capture_abort_native(c);
        acg__log(ACG_LOG_INFO, "capture %llu on %s invalidated: %s", (unsigned long long)c->id,
                 c->dev->spec, msg);
        return acg__error(status, "%s", msg);
    }
    return acg__error(ACG_ERR_CAPTURE_INVALIDATED, "%s (the capture was already invalidated: %s)",
                      msg, c->why);
}

acg_status acg__invalidate_device_captures(acg_device *dev, const char *op) {
    acg_status st = ACG_OK;
    acg__device_await_endings(dev);
    for (acg__capture *c = dev->captures; c != NULL; c = c->next) {
        if (c->state == ACG_CAPTURE_ACTIVE) {
            st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                         "%s during a capture on %s invalidated the capture", op,
                                         dev->spec);
        }
    }
    return st;
}

acg_status acg__device_lock_op(acg_device *dev, const char *op) {
    pthread_mutex_lock(&dev->lock);
    acg_status st = acg__invalidate_device_captures(dev, op);
    if (st != ACG_OK) {
        pthread_mutex_unlock(&dev->lock);
    }
    return st;
}

static bool ids_push(acg__ids *ids, uint32_t id) {
    for (uint32_t i = 0; i < ids->n; i++) {
        if (ids->v[i] == id) {
            return true;
        }
    }
    if (!acg__grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v)) {
        return false;
    }
    ids->v[ids->n++] = id;
    return true;
}

bool acg__ids_copy(acg__ids *dst, const acg__ids *src) {
    if (!acg__grow((void **)&dst->v, &dst->cap, src->n, sizeof *dst->v)) {
        return false;
    }
    if (src->n != 0) {
        memcpy(dst->v, src->v, src->n * sizeof *dst->v);
    }
    dst->n = src->n;
    return true;
}

bool acg__ids_union(acg__ids *dst, const acg__ids *src) {
    for (uint32_t i = 0; i < src->n; i++) {
        if (!ids_push(dst, src->v[i])) {
            return false;
        }
    }
    return true;
}

void acg__ids_free(acg__ids *ids) {
    acg__free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

/* The refusal for work on a stream whose capture was invalidated. */
static acg_status refused(const acg__capture *c, const char *op) {
    return acg__error(ACG_ERR_CAPTURE_INVALIDATED,
                      "%s: the stream's capture was invalidated (%s); end it with "
                      "acg_stream_end_capture",
                      op, c->why);
}

acg_status acg__capture_check(const acg__capture *c, const char *op) {
    return c->state == ACG_CAPTURE_ACTIVE ? ACG_OK : refused(c, op);
}

/* Writes node into its ledger slot with every byte defined: the slot is zeroed (padding, the
 * arrays past their counts and the fields its kind does not use), then given what its kind uses
 * (acg-backend.h), field by field; a scalar argument by its type's member. A builder may leave the
 * other fields unset (a kernel launch writes only its own), and what it left never reaches the
 * description. */
void acg__ledger_write(acg__node *slot, const acg__node *node) {
    memset(slot, 0, sizeof *slot);
    slot->kind = node->kind;
    switch (node->kind) {
    case ACG_NODE_KERNEL:
        slot->def = node->def;
        slot->kernel = node->kernel;
        slot->dims = node->dims;
        slot->n_args = node->n_args;
        for (uint32_t i = 0; i < node->n_args; i++) {
            const acg__karg *a = &node->args[i];
            slot->args[i].type = a->type;
            if (a->type == ACG_ARG_BUFFER) {
                slot->args[i].value.buf = a->value.buf;
            } else {
                /* Its member only: the caller's acg_arg may leave the rest of the word unset. */
                memcpy(&slot->args[i].value, &a->value, acg__arg_scalar_bytes(a->type));
            }
        }
        break;
    case ACG_NODE_COPY_H2D:
    case ACG_NODE_COPY_D2H:
    case ACG_NODE_COPY_D2D:
    case ACG_NODE_FILL:
    case ACG_NODE_COLLECTIVE:
        /* Built whole (designated initializers): each field is the kind's or zero. */
        slot->dst_mem = node->dst_mem;
        slot->dst_off = node->dst_off;
        slot->src_mem = node->src_mem;
        slot->src_off = node->src_off;
        slot->size = node->size;
        slot->host = node->host;
        slot->host_pinned = node->host_pinned;
        slot->pattern = node->pattern;
        slot->pattern_size = node->pattern_size;
        slot->group = node->group;
        slot->group_handle = node->group_handle;
        break;
    case ACG_NODE_HOST:
        slot->host_fn = node->host_fn;
        slot->host_user = node->host_user;
        break;
    case ACG_NODE_FOREIGN:
        break; /* its name is the description's own copy, set by the caller */
    case ACG_NODE_LOOP:
        slot->dst_mem = node->dst_mem;
        slot->dst_off = node->dst_off;
        slot->loop_body = node->loop_body;
        slot->loop_max = node->loop_max;
        break;
    }
    slot->n_buffers = node->n_buffers;
    for (uint32_t i = 0; i < node->n_buffers; i++) {
        slot->buffers[i] = node->buffers[i];
    }
    slot->reads = node->reads;
    slot->writes = node->writes;
}

acg_status acg__capture_add(acg_stream *s, acg__capture *c, const acg__node *node) {
    if (c->state != ACG_CAPTURE_ACTIVE) {
        return refused(c, "capture");
    }
    acg__graph_desc *d = &c->desc;
    if (d->n_nodes == UINT32_MAX - 1 ||
        !acg__grow((void **)&d->nodes, &c->cap_nodes, d->n_nodes + 1, sizeof *d->nodes) ||
        !acg__grow((void **)&d->deps, &c->cap_deps, d->n_deps + s->frontier.n, sizeof *d->deps) ||
        !acg__grow((void **)&s->frontier.v, &s->frontier.cap, 1, sizeof *s->frontier.v)) {
        return acg__capture_invalidate(c, ACG_ERR_OUT_OF_MEMORY,
                                       "out of memory while recording node %u of the capture",
                                       d->n_nodes);
    }
    /* The description keeps its own copy of a declared name, whole. */
    char *label = node->label != NULL ? acg__strdup(node->label) : NULL;
    if (node->label != NULL && label == NULL) {
        return acg__capture_invalidate(c, ACG_ERR_OUT_OF_MEMORY,
                                       "out of memory while recording node %u of the capture",
                                       d->n_nodes);
    }
    uint32_t id = d->n_nodes++;
    acg__node *n = &d->nodes[id];
    acg__ledger_write(n, node);
    n->label = label;
    n->deps_begin = d->n_deps;
    n->n_deps = s->frontier.n;
    if (s->frontier.n != 0) {
        memcpy(&d->deps[d->n_deps], s->frontier.v, s->frontier.n * sizeof *d->deps);
    }
    d->n_deps += s->frontier.n;
    n->stream = s->capture_index;
    s->frontier.v[0] = id;
    s->frontier.n = 1;
    return ACG_OK;
}

bool acg__capture_live(const acg_device *dev, const acg__capture *c, uint64_t id) {
    for (const acg__capture *x = dev->captures; x != NULL; x = x->next) {
        if (x == c && x->id == id) {
            return true;
        }
    }
    return false;
}

acg_status acg__capture_join(acg__capture *c, acg_stream *s) {
    if (!acg__grow((void **)&c->streams, &c->cap_streams, c->n_streams + 1, sizeof *c->streams)) {
        return acg__capture_invalidate(c, ACG_ERR_OUT_OF_MEMORY,
                                       "out of memory while a stream joined the capture");
    }
    c->streams[c->n_streams++] = s;
    s->capture_index = c->n_joined++;
    atomic_store_explicit(&s->capture, c, memory_order_release);
    return ACG_OK;
}

void acg__capture_leave(acg__capture *c, acg_stream *s) {
    for (uint32_t i = 0; i < c->n_streams; i++) {
        if (c->streams[i] == s) {
            c->streams[i] = c->streams[--c->n_streams];
            break;
        }
    }
    atomic_store_explicit(&s->capture, NULL, memory_order_release);
    s->frontier.n = 0;
}

acg_status acg__capture_native_step(acg__capture *c, acg_status st, const char *fn) {
    if (st == ACG_OK) {
        return ACG_OK;
    }
    acg__device_fault(c->dev, st);
    char why[256];
    acg__error_copy(why, sizeof why);
    return acg__capture_invalidate(c, st, "%s: the driver could not record it: %s", fn, why);
}

void acg__capture_abort_native(acg__capture *c) {
    if (c->rec != NULL) {
        c->dev->vt->capture_abort(c->rec);
        c->rec = NULL;
    }
}

void acg__capture_free(acg__capture *c) {
    acg_device *dev = c->dev;
    acg__capture_abort_native(c);
    for (uint32_t i = 0; i < c->n_streams; i++) {
        atomic_store_explicit(&c->streams[i]->capture, NULL, memory_order_release);
        acg__ids_free(&c->streams[i]->frontier);
    }
    for (uint32_t i = 0; i < c->n_scratch; i++) {
        acg__handle_remove(c->scratch[i]);
        acg__free(c->scratch[i]);
    }
    if (c->pool != NULL) {
        c->pool->capturing = false;
        if (c->pool->is_private && c->pool->n_graphs == 0) {
            acg__pool_free(c->pool);
        }
    }
    for (acg__capture **p = &dev->captures; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    acg__desc_free(&c->desc);
    acg__free(c->scratch);
    acg__free(c->streams);
    acg__free(c);
}

/* ---- public capture calls ---------------------------------------------------------------- */

acg_status acg_stream_begin_capture(acg_stream *s, acg_graph_pool *pool) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_begin_capture";
    ACG__TRY(acg__check_stream(s, fn));
    acg_device *dev = s->dev;
    if (pool != NULL) {
        if (!acg__handle_use(pool, ACG__HANDLE_POOL)) {
            return acg__error(ACG_ERR_INVALID_HANDLE, "%s: invalid graph pool", fn);
        }
        if (pool->dev != dev) {
            return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the pool belongs to %s, the stream to %s",
                              fn, pool->dev->name, dev->name);
        }
    }
    if (!dev->cap.graphs) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: %s (%s) has no graphs", fn, dev->spec,
                          dev->cap.name);
    }
    ACG__TRY(acg__device_check_lost(dev, fn));
    acg__capture *cur = acg__stream_enter(s);
    if (cur != NULL) {
        acg_status st = acg__capture_invalidate(
            cur, ACG_ERR_CAPTURE_INVALIDATED,
            "%s on a stream that is already capturing invalidated the capture", fn);
        acg__stream_leave(s, cur);
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    acg__device_await_endings(dev); /* one into the same pool ends before this one begins */
    acg_status st = ACG_OK;
    if (s->eager_loop != NULL) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT,
                        "%s: a loop is open on the stream (acg_stream_loop_begin outside a "
                        "capture); close it with acg_stream_loop_end first",
                        fn);
        goto out_unlock;
    }
    if (pool != NULL && pool->capturing) {
        st = acg__error(ACG_ERR_IN_USE, "%s: another capture into this graph pool is in progress",
                        fn);
        goto out_unlock;
    }
    acg__capture *c = acg__new(sizeof *c, fn);
    if (c == NULL) {
        st = ACG_ERR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    c->dev = dev;
    c->origin = s;
    c->state = ACG_CAPTURE_ACTIVE;
    c->id = atomic_fetch_add(&next_capture_id, 1);
    if (pool == NULL && (st = acg__pool_new(dev, true, &pool, fn)) != ACG_OK) {
        goto out_free_capture;
    }
    c->pool = pool;
    if (!acg__grow((void **)&c->streams, &c->cap_streams, 1, sizeof *c->streams)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free_pool;
    }
    if (dev->cap.native_capture) {
        st = acg__device_fault(dev, dev->vt->capture_begin(s->impl, &c->rec));
        if (st != ACG_OK) {
            goto out_free_streams;
        }
    }
    pool->capturing = true;
    c->streams[c->n_streams++] = s;
    s->capture_index = 0;
    c->n_joined = 1;
    s->frontier.n = 0;
    c->next = dev->captures;
    dev->captures = c;
    atomic_store_explicit(&s->capture, c, memory_order_release);
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_unlock(&s->lock);
    return ACG_OK;

out_free_streams:
    acg__free(c->streams);
out_free_pool:
    if (pool->is_private) {
        acg__pool_free(pool);
    }
out_free_capture:
    acg__free(c);
out_unlock:
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Every node a forked stream ends on must be an ancestor of the origin's frontier. */
static acg_status check_joined(acg__capture *c) {
    const acg__graph_desc *d = &c->desc;
    if (c->n_streams <= 1 || d->n_nodes == 0) {
        return ACG_OK;
    }
    uint8_t *seen = acg__calloc(d->n_nodes, 1);
    uint32_t *stack = acg__alloc((size_t)d->n_nodes * sizeof *stack);
    acg_status st = ACG_OK;
    if (seen == NULL || stack == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
        goto out_free;
    }
    uint32_t top = 0;
    const acg__ids *f = &c->origin->frontier;
    for (uint32_t i = 0; i < f->n; i++) {
        if (!seen[f->v[i]]) {
            seen[f->v[i]] = 1;
            stack[top++] = f->v[i];
        }
    }
    while (top != 0) {
        const acg__node *n = &d->nodes[stack[--top]];
        for (uint32_t i = 0; i < n->n_deps; i++) {
            uint32_t dep = d->deps[n->deps_begin + i];
            if (!seen[dep]) {
                seen[dep] = 1;
                stack[top++] = dep;
            }
        }
    }
    for (uint32_t i = 0; i < c->n_streams && st == ACG_OK; i++) {
        const acg__ids *sf = &c->streams[i]->frontier;
        for (uint32_t j = 0; j < sf->n; j++) {
            if (!seen[sf->v[j]]) {
                st = acg__error(ACG_ERR_CAPTURE_UNJOINED,
                                "acg_stream_end_capture: node %u (%s) of a stream forked into the "
                                "capture is not joined back into the origin stream; record an "
                                "event after it and make the origin stream wait on it",
                                sf->v[j],
                                d->nodes[sf->v[j]].def ? d->nodes[sf->v[j]].def->name : "copy");
                break;
            }
        }
    }
out_free:
    acg__free(stack);
    acg__free(seen);
    return st;
}

acg_status acg_stream_end_capture(acg_stream *s, acg_graph **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_end_capture";
    ACG__TRY(acg__check_stream(s, fn));
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    }
    acg__capture *c = acg__stream_enter(s);
    if (c == NULL) {
        acg__stream_leave(s, c);
        return acg__error(ACG_ERR_NOT_CAPTURING, "%s: the stream is not capturing", fn);
    }
    if (c->origin != s) {
        acg__stream_leave(s, c);
        return acg__error(ACG_ERR_NOT_CAPTURING,
                          "%s: the stream joined a capture begun on another stream; end it on "
                          "that stream",
                          fn);
    }
    acg_device *dev = s->dev;
    acg_graph_pool *pool = c->pool;
    acg_graph **parked = NULL;
    uint32_t n_parked = 0;
    acg_status st;
    if (c->state == ACG_CAPTURE_ACTIVE && c->loop_depth != 0) {
        acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                "%s with %u loop(s) open (acg_stream_loop_begin without "
                                "acg_stream_loop_end) invalidated the capture",
                                fn, c->loop_depth);
    }
    if (c->state != ACG_CAPTURE_ACTIVE) {
        st = acg__error(c->why_status, "%s: the capture was invalidated: %s", fn, c->why);
    } else if ((st = acg__device_check_lost(dev, fn)) != ACG_OK) {
        /* Ended all the same (the streams leave capture mode), with no graph. */
    } else if ((st = check_joined(c)) == ACG_OK) {
        /* Instantiating can take long: do it under the origin stream's lock alone. Whoever
         * meets the capture meanwhile waits for its end (acg__device_await_endings), so its
         * description, streams and recording stay as they are. */
        acg__bk_recording *rec = c->rec;
        acg__bk_exec *exec = NULL;
        c->rec = NULL; /* the driver's recording ends here either way */
        c->ending = true;
        dev->n_ending++;
        pthread_mutex_unlock(&dev->lock);
        st = rec != NULL ? dev->vt->capture_end(rec, &exec)
                         : dev->vt->graph_instantiate(dev->impl, &c->desc, &exec);
        acg__device_fault(dev, st);
        pthread_mutex_lock(&dev->lock);
        c->ending = false;
        dev->n_ending--;
        pthread_cond_broadcast(&dev->ended);
        if (st == ACG_OK) {
            st = acg__graph_create(c, exec, out);
        }
        if (st == ACG_OK && pool->n_parked != 0) {
            /* A capture succeeded: what failed before it in this pool can go now. The new
             * graph, held by this call, keeps the pool alive until they are gone. */
            acg__handle_use(*out, ACG__HANDLE_GRAPH);
            parked = pool->parked;
            n_parked = pool->n_parked;
            pool->parked = NULL;
            pool->n_parked = pool->cap_parked = 0;
        }
    }
    acg__capture_free(c);
    acg__stream_leave(s, c);
    if (parked != NULL) {
        acg__pool_destroy_graphs(pool, parked, n_parked);
    }
    return st;
}

acg_status acg_stream_get_capture_state(acg_stream *s, acg_capture_state *out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__check_stream(s, "acg_stream_get_capture_state"));
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_stream_get_capture_state: out is NULL");
    }
    acg__capture *c = acg__stream_enter(s);
    *out = c == NULL ? ACG_CAPTURE_NONE : c->state;
    acg__stream_leave(s, c);
    return ACG_OK;
}
