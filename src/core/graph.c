/* graph.c — instantiated graphs, replay, update and the graph description (graph pools and
 * their scratch are pool.c's).
 *
 * A graph keeps the backend-independent description it was captured as: that is how the core
 * knows every buffer and pinned allocation a graph reads or writes (and refuses to free them
 * while it lives), how acg_graph_update checks topology, and what acg_graph_get_node reports. */
#include <string.h>

#include "core/acg-impl.h"

/* ---- descriptions ------------------------------------------------------------------------ */

/* What one node references (dev->lock held). */
void acg__node_refs(const acg__node *n, int delta) {
    for (uint32_t j = 0; j < n->n_buffers; j++) {
        acg_buffer *b = (acg_buffer *)n->buffers[j];
        b->graph_refs = (uint32_t)((int64_t)b->graph_refs + delta);
    }
    if (n->host != NULL) {
        acg__pinned p;
        if (acg__pinned_lookup(n->host, n->size, &p)) {
            acg__pinned_ref(p.base, delta);
        }
    }
    if (n->group_handle != NULL) {
        acg_device_group *g = n->group_handle;
        g->graph_refs = (uint32_t)((int64_t)g->graph_refs + delta);
    }
}

void acg__desc_refs(acg_device *dev, const acg__graph_desc *desc, int delta) {
    ACG__UNUSED(dev);
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        acg__node_refs(&desc->nodes[i], delta);
    }
}

void acg__desc_free(acg__graph_desc *desc) {
    /* An update's copy whose node array could not be allocated has a count and no nodes. */
    for (uint32_t i = 0; desc->nodes != NULL && i < desc->n_nodes; i++) {
        acg__free(desc->nodes[i].label);
    }
    acg__free(desc->nodes);
    acg__free(desc->deps);
    memset(desc, 0, sizeof *desc);
}

uint64_t acg__graph_referencing(acg_device *dev, const acg_buffer *buf, const void *host,
                                size_t host_size) {
    for (const acg_graph *g = dev->graphs; g != NULL; g = g->next) {
        for (uint32_t i = 0; i < g->desc.n_nodes; i++) {
            const acg__node *n = &g->desc.nodes[i];
            for (uint32_t j = 0; j < n->n_buffers && buf != NULL; j++) {
                if (n->buffers[j] == buf) {
                    return g->id;
                }
            }
            if (host != NULL && n->host != NULL && (uintptr_t)n->host >= (uintptr_t)host &&
                (uintptr_t)n->host < (uintptr_t)host + host_size) {
                return g->id;
            }
        }
    }
    return 0;
}

/* ---- graphs ------------------------------------------------------------------------------ */

static acg_status check_graph(const acg_graph *g, const char *fn) {
    return acg__check_live(g, ACG__HANDLE_GRAPH, "graph", "graph", fn);
}

acg_status acg__graph_create(acg__capture *c, acg__bk_exec *exec, acg_graph **out) {
    acg_device *dev = c->dev;
    acg_graph *g = acg__calloc(1, sizeof *g);
    if (g == NULL) {
        dev->vt->graph_destroy(exec);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    g->exec = exec;
    g->dev = dev;
    g->id = dev->next_graph_id + 1;
    g->desc = c->desc;
    g->scratch = c->scratch;
    g->n_scratch = c->n_scratch;
    g->pool = c->pool;
    /* Last: a call holding a stale handle that this address matches must not see the graph
     * before it is whole (the registry's lock orders these writes before any lookup). What
     * follows moves the capture's pieces into it and counts it, none of which can fail. */
    if (acg__handle_add(g, ACG__HANDLE_GRAPH, &g->life) != ACG_OK) {
        dev->vt->graph_destroy(exec);
        acg__free(g);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    dev->next_graph_id++;
    memset(&c->desc, 0, sizeof c->desc);
    c->cap_nodes = c->cap_deps = 0;
    c->scratch = NULL;
    c->n_scratch = c->cap_scratch = 0;
    for (uint32_t i = 0; i < g->n_scratch; i++) {
        g->scratch[i]->owner_id = g->id;
    }
    g->pool->n_graphs++;
    acg__desc_refs(dev, &g->desc, +1);
    g->next = dev->graphs;
    dev->graphs = g;
    dev->n_graphs++;
    *out = g;
    return ACG_OK;
}

acg_status acg_graph_launch(acg_graph *g, acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_launch";
    /* Both handles held under one registry lock: this is the serving loop's call. */
    const void *handles[2] = {g, s};
    static const acg__handle_type types[2] = {ACG__HANDLE_GRAPH, ACG__HANDLE_STREAM};
    uint32_t bad = 0;
    if (!acg__handle_use_many(handles, types, 2, &bad)) {
        return bad == 0 ? acg__error(ACG_ERR_INVALID_HANDLE, "%s: graph %p is not a live graph", fn,
                                     (const void *)g)
                        : acg__error(ACG_ERR_INVALID_HANDLE, "%s: stream %p is not a live stream",
                                     fn, (const void *)s);
    }
    acg_device *dev = g->dev;
    if (s->dev != dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: graph %llu belongs to %s, the stream to %s",
                          fn, (unsigned long long)g->id, dev->name, s->dev->name);
    }
    ACG__TRY(acg__device_check_lost(dev, fn));
    ACG__TRY(acg__stream_enter_eager(s, " (graphs do not nest)", fn));
    acg_status st = ACG_OK;
    if (s->eager_loop != NULL) { /* a loop's body cannot hold a replay */
        st = acg__loop_gate(s, NULL, false, fn);
        acg__stream_leave(s, NULL);
        return st;
    }
    /* Only the pool's own lock: replays of other pools and the rest of the device go on. */
    acg_graph_pool *pool = g->pool;
    pthread_mutex_lock(&pool->replay_lock);
    /* Graphs of one pool share scratch memory: a replay on another stream waits for the
     * pool's previous replay, so they never overlap. */
    if (pool->last_stream != NULL && pool->last_stream != s) {
        st = dev->vt->stream_wait_event(s->impl, pool->last_event);
    }
    if (st == ACG_OK) {
        st = dev->vt->graph_launch(g->exec, s->impl);
    }
    if (st == ACG_OK) {
        st = dev->vt->event_record(pool->last_event, s->impl);
        pool->last_stream = s;
    }
    pthread_mutex_unlock(&pool->replay_lock);
    acg__stream_leave(s, NULL);
    return acg__device_fault(dev, st);
}

acg_status acg_graph_upload(acg_graph *g, acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_upload";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(acg__check_stream(s, fn));
    if (s->dev != g->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: graph %llu belongs to %s, the stream to %s",
                          fn, (unsigned long long)g->id, g->dev->name, s->dev->name);
    }
    ACG__TRY(acg__device_check_lost(g->dev, fn));
    ACG__TRY(acg__stream_enter_eager(s, "", fn));
    acg_status (*upload)(acg__bk_exec *, acg__bk_stream *) = ACG__SLOT(g->dev->vt, graph_upload, 2);
    acg_status st = upload != NULL ? acg__device_fault(g->dev, upload(g->exec, s->impl)) : ACG_OK;
    acg__stream_leave(s, NULL);
    return st;
}

/* Same topology: node kinds, kernels, argument count and dependencies. */
static acg_status same_topology(const acg_graph *a, const acg_graph *b) {
    if (a->desc.n_nodes != b->desc.n_nodes) {
        return acg__error(ACG_ERR_TOPOLOGY_MISMATCH,
                          "acg_graph_update: graph %llu has %u nodes, graph %llu has %u",
                          (unsigned long long)a->id, a->desc.n_nodes, (unsigned long long)b->id,
                          b->desc.n_nodes);
    }
    if (a->n_scratch != b->n_scratch) {
        return acg__error(ACG_ERR_TOPOLOGY_MISMATCH,
                          "acg_graph_update: the graphs allocate %u and %u scratch buffers",
                          a->n_scratch, b->n_scratch);
    }
    for (uint32_t i = 0; i < a->n_scratch; i++) {
        if (a->scratch[i]->size != b->scratch[i]->size) {
            return acg__error(ACG_ERR_TOPOLOGY_MISMATCH,
                              "acg_graph_update: scratch buffer %u differs in size", i);
        }
    }
    for (uint32_t i = 0; i < a->desc.n_nodes; i++) {
        const acg__node *x = &a->desc.nodes[i], *y = &b->desc.nodes[i];
        bool same = x->kind == y->kind && x->def == y->def && x->n_deps == y->n_deps &&
                    x->n_args == y->n_args &&
                    (x->kind != ACG_NODE_FOREIGN || strcmp(x->label, y->label) == 0) &&
                    x->group_handle == y->group_handle && x->loop_body == y->loop_body &&
                    x->loop_max == y->loop_max;
        for (uint32_t j = 0; same && j < x->n_deps; j++) {
            same = a->desc.deps[x->deps_begin + j] == b->desc.deps[y->deps_begin + j];
        }
        if (!same) {
            return acg__error(ACG_ERR_TOPOLOGY_MISMATCH,
                              "acg_graph_update: node %u differs in kind, kernel, group, "
                              "dependencies or loop",
                              i);
        }
    }
    return ACG_OK;
}

/* Rewrites a buffer of `from` that is from's scratch into the matching scratch of g. */
static void remap_scratch(const acg_graph *g, const acg_graph *from, const acg_buffer **buf,
                          acg__bk_mem **mem, size_t *off) {
    for (uint32_t i = 0; i < from->n_scratch; i++) {
        const acg_buffer *s = from->scratch[i];
        if (*buf == s) {
            const acg_buffer *t = g->scratch[i];
            *off = *off - s->offset + t->offset;
            *mem = t->mem;
            *buf = t;
            return;
        }
    }
}

acg_status acg_graph_update(acg_graph *g, const acg_graph *from) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_update";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(check_graph(from, fn));
    acg_device *dev = g->dev;
    if (from->dev != dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the graphs belong to %s and %s", fn, dev->name,
                          from->dev->name);
    }
    if (!dev->cap.graph_update) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: %s cannot update graphs; capture again", fn,
                          dev->spec);
    }
    ACG__TRY(acg__device_check_lost(dev, fn));
    /* A host function's pointers cannot be re-pointed at g's scratch: refuse graphs whose
     * host functions declare scratch, rather than let them touch `from`'s memory. */
    for (uint32_t i = 0; i < from->desc.n_nodes; i++) {
        const acg__node *n = &from->desc.nodes[i];
        for (uint32_t j = 0; n->kind == ACG_NODE_HOST && j < n->n_buffers; j++) {
            if (n->buffers[j]->scratch) {
                return acg__error(ACG_ERR_UNSUPPORTED,
                                  "%s: host function node %u of the source graph uses its graph "
                                  "scratch, which cannot be re-pointed; capture again",
                                  fn, i);
            }
        }
    }
    if (g == from) {
        return ACG_OK;
    }
    /* The backend rewrites exec while no replay of the pool runs or starts. */
    ACG__TRY(acg__device_fault(dev, acg__pool_lock_idle(g->pool)));
    acg_status st = same_topology(g, from);
    acg__graph_desc nd = {0};
    if (st != ACG_OK) {
        goto out_unlock;
    }
    nd.n_nodes = from->desc.n_nodes;
    nd.n_deps = from->desc.n_deps;
    nd.nodes = acg__calloc(nd.n_nodes ? nd.n_nodes : 1, sizeof *nd.nodes);
    nd.deps = acg__calloc(nd.n_deps ? nd.n_deps : 1, sizeof *nd.deps);
    if (nd.nodes == NULL || nd.deps == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free;
    }
    /* A graph without dependencies (one node) has no deps array: memcpy needs a pointer. */
    if (nd.n_nodes != 0) {
        memcpy(nd.nodes, from->desc.nodes, nd.n_nodes * sizeof *nd.nodes);
    }
    if (nd.n_deps != 0) {
        memcpy(nd.deps, from->desc.deps, nd.n_deps * sizeof *nd.deps);
    }
    /* The copy's declared names are its own; until each is copied it names none. */
    for (uint32_t i = 0; i < nd.n_nodes; i++) {
        nd.nodes[i].label = NULL;
    }
    for (uint32_t i = 0; i < nd.n_nodes; i++) {
        const char *label = from->desc.nodes[i].label;
        if (label != NULL && (nd.nodes[i].label = acg__strdup(label)) == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out_free;
        }
    }
    /* `from`'s scratch dies with `from`: point the copied nodes at g's own scratch. */
    for (uint32_t i = 0; i < nd.n_nodes; i++) {
        acg__node *n = &nd.nodes[i];
        uint32_t b = 0;
        for (uint32_t j = 0; j < n->n_args; j++) {
            if (n->args[j].type == ACG_ARG_BUFFER) {
                remap_scratch(g, from, &n->buffers[b], &n->args[j].value.buf.mem,
                              &n->args[j].value.buf.offset);
                b++;
            }
        }
        /* Copies keep their destination (or, for d2h, source) buffer first, d2d's source
         * second. */
        if (n->kind == ACG_NODE_COPY_D2H) {
            remap_scratch(g, from, &n->buffers[0], &n->src_mem, &n->src_off);
        } else if (n->kind == ACG_NODE_COPY_H2D || n->kind == ACG_NODE_COPY_D2D ||
                   n->kind == ACG_NODE_FILL || n->kind == ACG_NODE_COLLECTIVE ||
                   n->kind == ACG_NODE_LOOP) {
            remap_scratch(g, from, &n->buffers[0], &n->dst_mem, &n->dst_off);
            if (n->kind == ACG_NODE_COPY_D2D) {
                remap_scratch(g, from, &n->buffers[1], &n->src_mem, &n->src_off);
            }
        }
    }
    /* A backend that recorded `from` natively may update from that recording, which holds what
     * the description cannot rebuild (foreign work, collectives), when its addresses are g's:
     * the two graphs' scratch coincides (as it does for captures of one pool). */
    bool same_memory = true;
    for (uint32_t i = 0; i < g->n_scratch; i++) {
        same_memory = same_memory && g->scratch[i]->mem == from->scratch[i]->mem &&
                      g->scratch[i]->offset == from->scratch[i]->offset;
    }
    acg_status (*update_from)(acg__bk_exec *, const acg__graph_desc *, acg__bk_exec *, bool) =
        ACG__SLOT(dev->vt, graph_update_from, 5);
    st = acg__device_fault(dev, update_from != NULL
                                    ? update_from(g->exec, &nd, from->exec, same_memory)
                                    : dev->vt->graph_update(g->exec, &nd));
    if (st != ACG_OK) {
        goto out_free;
    }
    acg__desc_refs(dev, &g->desc, -1);
    acg__desc_free(&g->desc);
    g->desc = nd;
    acg__desc_refs(dev, &g->desc, +1);
    pthread_mutex_unlock(&g->pool->replay_lock);
    pthread_mutex_unlock(&dev->lock);
    return ACG_OK;

out_free:
    acg__desc_free(&nd);
out_unlock:
    pthread_mutex_unlock(&g->pool->replay_lock);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

static const char *const node_kind_names[] = {
    "?",    "kernel",        "copy_h2d",     "copy_d2h",   "copy_d2d",
    "fill", "host function", "foreign work", "collective", "loop",
};

/* Checks the new launch of kernel node `index` of g into *nn (dev->lock held, no replay of the
 * pool in flight). */
static acg_status prepare_node(const acg_graph *g, size_t index, const acg_dims *dims,
                               const acg_arg *args, size_t n_args, acg__node *nn, const char *fn) {
    acg_device *dev = g->dev;
    if (index >= g->desc.n_nodes) {
        return acg__error(ACG_ERR_OUT_OF_RANGE, "%s: graph %llu has %u nodes, there is no node %zu",
                          fn, (unsigned long long)g->id, g->desc.n_nodes, index);
    }
    const acg__node *old = &g->desc.nodes[index];
    if (old->kind != ACG_NODE_KERNEL) {
        unsigned k = (unsigned)old->kind <= ACG_NODE_LOOP ? (unsigned)old->kind : 0;
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: node %zu of graph %llu is %s, not a kernel", fn, index,
                          (unsigned long long)g->id, node_kind_names[k]);
    }
    const acg_dims *grid = dims != NULL ? dims : &old->dims;
    if (dims != NULL && memcmp(dims, &old->dims, sizeof *dims) != 0 &&
        !dev->cap.graph_node_update_grid) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: %s cannot change a kernel node's grid in a graph (node %zu, %s); "
                          "capture again",
                          fn, dev->spec, index, old->def->name);
    }
    /* The node keeps its place: dependencies and stream; the launch's fields are rewritten. */
    *nn = *old;
    nn->label = NULL;
    ACG__TRY(acg__kernel_prepare(dev, old->def, old->kernel, grid, args, n_args, nn, fn));
    for (size_t j = 0; j < n_args; j++) {
        if (args[j].type != ACG_ARG_BUFFER) {
            continue;
        }
        const acg_buffer *buf = args[j].value.buf.buffer; /* live: prepare checked them */
        if (buf->scratch && buf->owner_id != g->id) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %zu is graph scratch of another graph; a node "
                              "may use only its own graph's scratch",
                              fn, old->def->name, j);
        }
    }
    return ACG_OK;
}

acg_status acg_graph_update_kernel_node(acg_graph *g, size_t index, const acg_dims *dims,
                                        const acg_arg *args, size_t n_args) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_update_kernel_node";
    ACG__TRY(check_graph(g, fn));
    acg_device *dev = g->dev;
    if (!dev->cap.graph_node_update) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: %s cannot update a graph's nodes (capability graph_node_update); "
                          "capture again",
                          fn, dev->spec);
    }
    ACG__TRY(acg__device_check_lost(dev, fn));
    /* The executable is rewritten while no replay of the pool runs or starts. */
    ACG__TRY(acg__device_fault(dev, acg__pool_lock_idle(g->pool)));
    acg__node nn;
    acg_status st = prepare_node(g, index, dims, args, n_args, &nn, fn);
    if (st == ACG_OK) {
        acg__node *slot = &g->desc.nodes[index];
        acg__node old = *slot;
        *slot = nn;
        acg_status (*update_node)(acg__bk_exec *, const acg__graph_desc *, uint32_t,
                                  const acg__node *) =
            dev->node_update_fallback ? NULL : ACG__SLOT(dev->vt, graph_update_node, 6);
        st = acg__device_fault(dev, update_node != NULL
                                        ? update_node(g->exec, &g->desc, (uint32_t)index, &old)
                                        : dev->vt->graph_update(g->exec, &g->desc));
        if (st == ACG_OK) {
            acg__node_refs(&old, -1);
            acg__node_refs(slot, +1);
        } else {
            *slot = old;
        }
    }
    pthread_mutex_unlock(&g->pool->replay_lock);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

/* Releases a graph whose replays are complete (dev->lock held). The pool goes with its last
 * graph when it is private. */
static void destroy_locked(acg_graph *g) {
    acg_device *dev = g->dev;
    acg_graph_pool *pool = g->pool;
    acg__desc_refs(dev, &g->desc, -1);
    for (acg_graph **p = &dev->graphs; *p != NULL; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            break;
        }
    }
    dev->n_graphs--;
    dev->vt->graph_destroy(g->exec);
    for (uint32_t i = 0; i < g->n_scratch; i++) {
        acg__free(g->scratch[i]); /* its handle went with the graph's (retire_graph) */
    }
    acg__free(g->scratch);
    acg__desc_free(&g->desc);
    pool->n_graphs--;
    if (pool->is_private && pool->n_graphs == 0 && !pool->capturing) {
        acg__pool_free(pool);
    }
    acg__free(g);
}

void acg__pool_release_parked(acg_graph_pool *pool) {
    for (uint32_t i = 0; i < pool->n_parked; i++) {
        destroy_locked(pool->parked[i]);
    }
    pool->n_parked = 0;
}

void acg__pool_destroy_graphs(acg_graph_pool *pool, acg_graph **graphs, uint32_t n) {
    acg_device *dev = pool->dev;
    acg__pool_wait(pool); /* their handles are gone: no replay of them starts after this */
    pthread_mutex_lock(&dev->lock);
    for (uint32_t i = 0; i < n; i++) {
        destroy_locked(graphs[i]);
    }
    pthread_mutex_unlock(&dev->lock);
    acg__free(graphs);
}

uint32_t acg__pool_parked_count(const acg_graph_pool *pool) { return pool->n_parked; }

/* Retires the graph's handle and its scratch buffers' (waiting for calls that use them) and
 * removes them, before any lock is taken: a call holding one may be waiting for a lock. */
static acg_status retire_graph(acg_graph *g, const char *fn) {
    ACG__TRY(acg__retire(g, ACG__HANDLE_GRAPH, fn, "graph"));
    acg__hold_device(g->dev);
    for (uint32_t i = 0; i < g->n_scratch; i++) {
        acg__handle_retire(g->scratch[i], ACG__HANDLE_BUFFER, false);
        acg__handle_remove(g->scratch[i]);
    }
    acg__handle_remove(g);
    return ACG_OK;
}

/* Releases a retired graph: it starts no more replays, so wait for those in flight, holding no
 * lock, then release it. The status of that wait. */
static acg_status destroy_retired(acg_graph *g) {
    acg_device *dev = g->dev;
    acg_status st = acg__pool_wait(g->pool);
    pthread_mutex_lock(&dev->lock);
    destroy_locked(g);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg_graph_destroy(acg_graph *g) {
    ACG__CALL_SCOPE;
    if (g == NULL) {
        return ACG_OK;
    }
    ACG__TRY(retire_graph(g, "acg_graph_destroy"));
    acg_device *dev = g->dev;
    acg_status st = destroy_retired(g);
    return acg__device_released(dev, st);
}

acg_status acg_graph_discard(acg_graph *g) {
    ACG__CALL_SCOPE;
    if (g == NULL) {
        return ACG_OK;
    }
    ACG__TRY(check_graph(g, "acg_graph_discard"));
    acg_device *dev = g->dev;
    acg_graph_pool *pool = g->pool;
    ACG__TRY(retire_graph(g, "acg_graph_discard"));
    pthread_mutex_lock(&dev->lock);
    /* A private pool takes no later capture, so parking there would only delay the end. */
    bool park = dev->retain_discarded && !pool->is_private;
    if (park && !acg__grow((void **)&pool->parked, &pool->cap_parked, pool->n_parked + 1,
                           sizeof *pool->parked)) {
        /* Without memory to park it, the graph goes as acg_graph_destroy would take it: after
         * the pool's replays ended, when the driver no longer uses what it recorded. A discard
         * never fails for want of memory: its callers drop the handle whatever it returns. */
        acg__log(ACG_LOG_WARN,
                 "acg_graph_discard: out of memory to park graph %llu; destroyed "
                 "once its pool's replays ended",
                 (unsigned long long)g->id);
        park = false;
    }
    if (park) {
        /* The handle died; the graph lives on, parked, until its pool's next successful
         * capture (or the pool's end). */
        pool->parked[pool->n_parked++] = g;
        pthread_mutex_unlock(&dev->lock);
        return ACG_OK;
    }
    pthread_mutex_unlock(&dev->lock);
    return destroy_retired(g);
}

acg_status acg_graph_get_node_count(const acg_graph *g, size_t *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_get_node_count";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    pthread_mutex_lock(&g->dev->lock); /* acg_graph_update swaps the description */
    *out = g->desc.n_nodes;
    pthread_mutex_unlock(&g->dev->lock);
    return ACG_OK;
}

acg_status acg_graph_get_node(const acg_graph *g, size_t index, acg_node_info *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_get_node";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    pthread_mutex_lock(&g->dev->lock); /* acg_graph_update swaps the description */
    if (index >= g->desc.n_nodes) {
        uint32_t n_nodes = g->desc.n_nodes;
        pthread_mutex_unlock(&g->dev->lock);
        return acg__error(ACG_ERR_OUT_OF_RANGE, "%s: node %zu of %u", fn, index, n_nodes);
    }
    const acg__node *n = &g->desc.nodes[index];
    out->kind = n->kind;
    out->kernel = n->kind == ACG_NODE_KERNEL    ? n->def->name
                  : n->kind == ACG_NODE_FOREIGN ? n->label
                                                : NULL;
    out->size = n->size; /* 0 for kernels, host functions and foreign work */
    out->n_deps = n->n_deps;
    out->deps = n->n_deps ? &g->desc.deps[n->deps_begin] : NULL;
    out->n_buffers = n->n_buffers;
    out->buffers = n->buffers;
    out->host = n->host;
    pthread_mutex_unlock(&g->dev->lock);
    return ACG_OK;
}

acg_device *acg_graph_get_device(const acg_graph *g) {
    ACG__CALL_SCOPE;
    return check_graph(g, "acg_graph_get_device") == ACG_OK ? g->dev : NULL;
}

acg_status acg_graph_get_native(acg_graph *g, acg_native_handle *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_get_native";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(acg__device_check_lost(g->dev, fn));
    ACG__TRY(acg__output_check(out, sizeof *out, "acg_native_handle", fn));
    acg_status (*get)(acg__bk_exec *, acg_native_handle *) =
        ACG__SLOT(g->dev->vt, graph_get_native, 3);
    acg_native_handle h = {sizeof h, ACG_NATIVE_NONE, NULL};
    if (get != NULL) {
        /* Under the pool's replay lock, which an update holds while it rewrites the exec. */
        pthread_mutex_lock(&g->pool->replay_lock);
        acg_status st = get(g->exec, &h);
        pthread_mutex_unlock(&g->pool->replay_lock);
        ACG__TRY(st);
    }
    return acg__output_write(out, &h, sizeof h, "acg_native_handle", fn);
}

acg_status acg_graph_get_loop(const acg_graph *g, size_t index, acg_loop_info *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_get_loop";
    ACG__TRY(check_graph(g, fn));
    ACG__TRY(acg__output_check(out, sizeof *out, "acg_loop_info", fn));
    pthread_mutex_lock(&g->dev->lock); /* acg_graph_update swaps the description */
    acg_status st = ACG_OK;
    acg_loop_info info = {.size = sizeof info};
    if (index >= g->desc.n_nodes) {
        st = acg__error(ACG_ERR_OUT_OF_RANGE, "%s: node %zu of %u", fn, index, g->desc.n_nodes);
    } else if (g->desc.nodes[index].kind != ACG_NODE_LOOP) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: node %zu of graph %llu is no loop", fn,
                        index, (unsigned long long)g->id);
    } else {
        const acg__node *n = &g->desc.nodes[index];
        info.n_body = n->loop_body;
        info.max_iterations = n->loop_max;
        info.cond = n->buffers[0];
        info.cond_offset = n->dst_off - n->buffers[0]->offset;
    }
    pthread_mutex_unlock(&g->dev->lock);
    return st == ACG_OK ? acg__output_write(out, &info, sizeof info, "acg_loop_info", fn) : st;
}
