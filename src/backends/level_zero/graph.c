/* graph.c — the level_zero backend's graphs.
 *
 * Native capture, where the driver offers the record/replay graph extension (spec 1.17, or the
 * driver-experimental form before it: the graph_ helpers below call either) and the device
 * immutable graphs: the origin stream's immediate list records what is appended to it
 * (zeCommandListBeginGraphCaptureExt), a stream forked into the capture joins it when it waits
 * on an event recorded there (the driver's own rule), and the end instantiates what the driver
 * recorded; replays are appended to a stream's list (zeCommandListAppendGraphExt). The events a
 * capture records are regular events, signalled again by every replay: each replay ends by
 * waiting for the end of every forked branch and resetting them all, so the next one starts
 * with none signalled (a wait inside the graph would otherwise pass at once). They belong to the
 * graph until it is destroyed.
 *
 * Otherwise the captured description is recorded into one regular command list, closed once and
 * replayed many times. Where the driver offers immediate append,
 * a replay is appended to the stream's immediate list, in its order, signalling an event of its
 * own; otherwise it runs on the device's command queue after the stream drained, with a fence
 * that the stream's next command waits for on the host. A driver without immediate lists (queue
 * mode, stream.c) has neither native capture nor immediate append: its replays take that path.
 *
 * A regular command list must not be submitted again, reset or destroyed while the device may
 * still reference it (the specification's rule): a replay waits for the previous replay of the
 * same graph to end, destruction waits for the last one, and the table's
 * retain_discarded_graphs keeps discarded graphs alive until their pool's next capture.
 *
 * The description's nodes are recorded in their order with a barrier between each, so the list
 * runs them one after another: branches forked onto other streams during the capture do not
 * overlap in a replay (they are ordered as the description lists them, which respects every
 * dependency). */
#include <stdio.h>
#include <string.h>

#include "level_zero.h"

/* Appends node i of desc to the list. */
static acg_status record_node(ze_command_list_handle_t list, const acg__graph_desc *desc,
                              uint32_t i, const char *fn) {
    const acg__node *n = &desc->nodes[i];
    switch (n->kind) {
    case ACG_NODE_KERNEL: {
        ze_kernel *k = acg__ze_kernel(n->kernel);
        ze_group_count_t groups;
        pthread_mutex_lock(&k->lock); /* the arguments are the kernel's until appended */
        acg_status st = acg__ze_kernel_prepare(k, &n->dims, n->args, n->n_args, &groups, fn);
        if (st == ACG_OK) {
            st = ZE(fn, zeCommandListAppendLaunchKernel, list, k->kernel, &groups, NULL, 0, NULL);
        }
        pthread_mutex_unlock(&k->lock);
        return st;
    }
    case ACG_NODE_COPY_H2D:
        return ZE(fn, zeCommandListAppendMemoryCopy, list,
                  (char *)acg__ze_mem(n->dst_mem) + n->dst_off, n->host, n->size, NULL, 0, NULL);
    case ACG_NODE_COPY_D2H:
        return ZE(fn, zeCommandListAppendMemoryCopy, list, n->host,
                  (const char *)acg__ze_mem(n->src_mem) + n->src_off, n->size, NULL, 0, NULL);
    case ACG_NODE_COPY_D2D:
        return ZE(fn, zeCommandListAppendMemoryCopy, list,
                  (char *)acg__ze_mem(n->dst_mem) + n->dst_off,
                  (const char *)acg__ze_mem(n->src_mem) + n->src_off, n->size, NULL, 0, NULL);
    case ACG_NODE_FILL:
        return ZE(fn, zeCommandListAppendMemoryFill, list,
                  (char *)acg__ze_mem(n->dst_mem) + n->dst_off, &n->pattern, n->pattern_size,
                  n->size, NULL, 0, NULL);
    default:
        /* Host functions never reach a capture (the capability refuses them); foreign work does
         * where the driver captured it, and only the driver knows what it was. */
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: node %u (%s) is work acg did not launch and cannot record in a "
                          "Level Zero command list: capture again",
                          fn, i, n->label);
    }
}

/* What node n records, as an update compares it. */
static ze_recorded recorded_of(const acg__node *n) {
    ze_recorded r = {.kind = n->kind, .def = n->def, .size = n->size};
    if (n->kind == ACG_NODE_COPY_H2D || n->kind == ACG_NODE_COPY_D2D || n->kind == ACG_NODE_FILL) {
        r.dst = (char *)acg__ze_mem(n->dst_mem) + n->dst_off;
    }
    if (n->kind == ACG_NODE_COPY_D2H || n->kind == ACG_NODE_COPY_D2D) {
        r.src = (const char *)acg__ze_mem(n->src_mem) + n->src_off;
    }
    if (n->kind == ACG_NODE_COPY_H2D) {
        r.src = n->host;
    } else if (n->kind == ACG_NODE_COPY_D2H) {
        r.dst = n->host;
    }
    if (n->kind == ACG_NODE_FILL) {
        r.pattern = n->pattern;
        r.pattern_size = n->pattern_size;
    }
    return r;
}

/* The description recorded into a new regular command list, closed. Where the driver has
 * mutable command lists the list is one, and *recorded (n_nodes) says what each node recorded,
 * with each kernel's command id; else *recorded is NULL. */
static acg_status record(ze_device *d, const acg__graph_desc *desc, ze_command_list_handle_t *out,
                         ze_recorded **recorded, const char *fn) {
    const bool mutable_list = d->mutable_lists;
    acg_ze_mutable_command_list_exp_desc_t mdesc = {
        .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_DESC};
    ze_command_list_desc_t ldesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC,
                                    .pNext = mutable_list ? &mdesc : NULL,
                                    .commandQueueGroupOrdinal = d->compute_ordinal};
    ze_recorded *rec = NULL;
    if (mutable_list && desc->n_nodes > 0 &&
        (rec = acg__calloc(desc->n_nodes, sizeof *rec)) == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    ze_command_list_handle_t list = NULL;
    acg_status st = ZE(fn, zeCommandListCreate, d->ctx, d->dev, &ldesc, &list);
    for (uint32_t i = 0; st == ACG_OK && i < desc->n_nodes; i++) {
        if (i > 0) {
            st = ZE(fn, zeCommandListAppendBarrier, list, NULL, 0, NULL);
        }
        if (st == ACG_OK && rec != NULL) {
            rec[i] = recorded_of(&desc->nodes[i]);
        }
        if (st == ACG_OK && rec != NULL && desc->nodes[i].kind == ACG_NODE_KERNEL) {
            acg_ze_mutable_command_id_exp_desc_t id = {
                .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_ID_EXP_DESC,
                .flags = ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS |
                         ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT |
                         ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE};
            st = acg__ze_check(d->drv->next_command_id(list, &id, &rec[i].command_id), fn,
                               "zeCommandListGetNextCommandIdExp");
        }
        if (st == ACG_OK) {
            st = record_node(list, desc, i, fn);
        }
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListClose, list);
    }
    if (st != ACG_OK && list != NULL) {
        ZE_RELEASE(d, fn, zeCommandListDestroy, list); /* never executed */
        list = NULL;
    }
    if (st != ACG_OK) {
        acg__free(rec);
        rec = NULL;
    }
    *out = list;
    *recorded = rec;
    return st;
}

/* Whether a node records what was recorded, but for a kernel's arguments and grid. */
static bool same_but_kernel_arguments(const ze_recorded *now, const ze_recorded *was) {
    if (now->kind != was->kind || now->def != was->def) {
        return false;
    }
    return now->kind == ACG_NODE_KERNEL ||
           (now->dst == was->dst && now->src == was->src && now->size == was->size &&
            now->pattern == was->pattern && now->pattern_size == was->pattern_size);
}

/* Whether desc differs from what e's list recorded only in kernel arguments and grids. */
static bool patchable(const ze_exec *e, const acg__graph_desc *desc) {
    if (e->recorded == NULL || desc->n_nodes != e->n_recorded) {
        return false;
    }
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        ze_recorded now = recorded_of(&desc->nodes[i]);
        if (!same_but_kernel_arguments(&now, &e->recorded[i])) {
            return false;
        }
    }
    return true;
}

/* Patches the kernel commands of nodes [first, end) of e's list with desc's arguments, group
 * sizes and counts in one zeCommandListUpdateMutableCommandsExp, and closes the list again. */
static acg_status patch(ze_exec *e, const acg__graph_desc *desc, uint32_t first, uint32_t end,
                        const char *fn) {
    uint32_t n_kernels = 0;
    for (uint32_t i = first; i < end; i++) {
        n_kernels += desc->nodes[i].kind == ACG_NODE_KERNEL;
    }
    struct change {
        acg_ze_mutable_kernel_argument_exp_desc_t args[ACG_ZE_MAX_PARAMS];
        ze_param params[ACG_ZE_MAX_PARAMS];
        acg_ze_mutable_group_size_exp_desc_t size;
        acg_ze_mutable_group_count_exp_desc_t count;
        ze_group_count_t groups;
    } *changes = acg__calloc(n_kernels ? n_kernels : 1, sizeof *changes);
    if (changes == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    acg_ze_mutable_commands_exp_desc_t head = {.stype =
                                                   ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMANDS_EXP_DESC};
    const void **link = &head.pNext; /* where the next descriptor hangs */
    struct change *c = changes;
    for (uint32_t i = first; i < end; i++) {
        const acg__node *n = &desc->nodes[i];
        if (n->kind != ACG_NODE_KERNEL) {
            continue;
        }
        const uint64_t id = e->recorded[i].command_id;
        uint32_t n_params = acg__ze_kernel_params(n->args, n->n_args, c->params);
        for (uint32_t p = 0; p < n_params; p++) {
            c->args[p] = (acg_ze_mutable_kernel_argument_exp_desc_t){
                .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_KERNEL_ARGUMENT_EXP_DESC,
                .commandId = id,
                .argIndex = p,
                .argSize = c->params[p].size,
                .pArgValue = c->params[p].value};
            *link = &c->args[p];
            link = &c->args[p].pNext;
        }
        uint32_t size[3];
        acg__ze_group_shape(acg__ze_kernel(n->kernel), &n->dims, size, &c->groups);
        c->size = (acg_ze_mutable_group_size_exp_desc_t){
            .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_SIZE_EXP_DESC,
            .commandId = id,
            .groupSizeX = size[0],
            .groupSizeY = size[1],
            .groupSizeZ = size[2]};
        *link = &c->size;
        link = &c->size.pNext;
        c->count = (acg_ze_mutable_group_count_exp_desc_t){
            .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_COUNT_EXP_DESC,
            .commandId = id,
            .pGroupCount = &c->groups};
        *link = &c->count;
        link = &c->count.pNext;
        c++;
    }
    acg_status st = acg__ze_check(e->dev->drv->update_commands(e->list, &head), fn,
                                  "zeCommandListUpdateMutableCommandsExp");
    acg__free(changes);
    /* A list is closed again after its updates, whatever they did, before it runs again. */
    acg_status closed = ZE(fn, zeCommandListClose, e->list);
    return st != ACG_OK ? st : closed;
}

/* The driver's graph functions are called through the helpers below, in whichever form the
 * driver offers (ze_graph_ext), and an error names that form's function: Ext names, then Exp. */
static const struct graph_names {
    const char *begin, *end, *instantiate, *append, *destroy_exec, *destroy;
} graph_names[2] = {
    {"zeCommandListBeginGraphCaptureExt", "zeCommandListEndGraphCaptureExt",
     "zeGraphInstantiateExt", "zeCommandListAppendGraphExt", "zeExecutableGraphDestroyExt",
     "zeGraphDestroyExt"},
    {"zeCommandListBeginGraphCaptureExp", "zeCommandListEndGraphCaptureExp",
     "zeCommandListInstantiateGraphExp", "zeCommandListAppendGraphExp",
     "zeExecutableGraphDestroyExp", "zeGraphDestroyExp"},
};

static const struct graph_names *names_of(const ze_device *d) {
    return &graph_names[d->drv->graph.exp ? 1 : 0];
}

/* Puts the stream's list in capture. */
static acg_status graph_begin(ze_device *d, ze_command_list_handle_t list, const char *fn) {
    const struct ze_graph_ext *g = &d->drv->graph;
    ze_result_t r = g->exp ? g->begin_exp(list, NULL) : g->begin(list, NULL);
    return acg__ze_check(r, fn, names_of(d)->begin);
}

/* Ends the capture the list began: the driver's own result, which finish() reads. */
static ze_result_t graph_end(ze_device *d, ze_command_list_handle_t list,
                             acg_ze_graph_handle_t *graph) {
    const struct ze_graph_ext *g = &d->drv->graph;
    return g->exp ? g->end_exp(list, graph, NULL) : g->end(list, NULL, graph);
}

/* Makes what replays run from what the capture recorded. */
static acg_status graph_instantiate(ze_device *d, acg_ze_graph_handle_t graph,
                                    acg_ze_executable_graph_handle_t *xgraph, const char *fn) {
    const struct ze_graph_ext *g = &d->drv->graph;
    ze_result_t r =
        g->exp ? g->instantiate_exp(graph, xgraph, NULL) : g->instantiate(graph, NULL, xgraph);
    return acg__ze_check(r, fn, names_of(d)->instantiate);
}

/* Appends a replay of the executable graph that signals `signal` once it is done. */
static acg_status graph_append(ze_device *d, ze_command_list_handle_t list,
                               acg_ze_executable_graph_handle_t xgraph, ze_event_handle_t signal,
                               const char *fn) {
    const struct ze_graph_ext *g = &d->drv->graph;
    ze_result_t r = g->exp ? g->append_exp(list, xgraph, NULL, signal, 0, NULL)
                           : g->append(list, xgraph, NULL, signal, 0, NULL);
    return acg__ze_check(r, fn, names_of(d)->append);
}

/* Destroys what the driver made of a native capture: the executable graph, then the graph. */
static void native_free(ze_device *d, acg_ze_graph_handle_t graph,
                        acg_ze_executable_graph_handle_t xgraph, const char *fn) {
    if (xgraph != NULL) {
        acg__ze_release(d, d->drv->graph.destroy_exec(xgraph), fn, names_of(d)->destroy_exec);
    }
    if (graph != NULL) {
        acg__ze_release(d, d->drv->graph.destroy(graph), fn, names_of(d)->destroy);
    }
}

static void exec_free(ze_exec *e) {
    static const char fn[] = "acg_graph_destroy";
    native_free(e->dev, e->graph, e->xgraph, fn);
    acg__ze_slots_release(e->dev, e->slots, e->n_slots);
    acg__free(e->slots);
    if (e->list != NULL) {
        ZE_RELEASE(e->dev, fn, zeCommandListDestroy, e->list);
    }
    if (e->fence != NULL) {
        ZE_RELEASE(e->dev, fn, zeFenceDestroy, e->fence);
    }
    acg__free(e->recorded);
    acg__free(e);
}

/* The fence of a list's replays on the device's queue, where the driver cannot append lists to
 * an immediate one. */
static acg_status make_fence(ze_exec *e, const char *fn) {
    if (e->fence != NULL || e->dev->drv->immediate_append != NULL) {
        return ACG_OK;
    }
    ze_fence_desc_t fdesc = {.stype = ZE_STRUCTURE_TYPE_FENCE_DESC};
    pthread_mutex_lock(&e->dev->lock); /* the queue */
    acg_status st = ZE(fn, zeFenceCreate, e->dev->queue, &fdesc, &e->fence);
    pthread_mutex_unlock(&e->dev->lock);
    return st;
}

acg_status acg__ze_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                     acg__bk_exec **out) {
    static const char fn[] = "acg_stream_end_capture";
    ze_device *d = acg__ze_dev(dev);
    ze_exec *e = acg__new(sizeof *e, fn);
    if (e == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    e->dev = d;
    acg_status st = record(d, desc, &e->list, &e->recorded, fn);
    e->n_recorded = desc->n_nodes;
    if (st == ACG_OK) {
        st = make_fence(e, fn);
    }
    if (st != ACG_OK) {
        exec_free(e);
        return st;
    }
    *out = acg__ze_bk_exec(e);
    return ACG_OK;
}

acg_status acg__ze_exec_wait_fence(ze_exec *e, const char *fn) {
    if (!atomic_load(&e->fence_pending)) {
        return ACG_OK;
    }
    acg_status st = ZE(fn, zeFenceHostSynchronize, e->fence, UINT64_MAX);
    if (st == ACG_OK) {
        atomic_store(&e->fence_pending, false);
    }
    return st;
}

/* Waits for the exec's latest replay appended to an immediate list, and lets its event go. */
static acg_status wait_done(ze_exec *e, const char *fn) {
    if (e->done == NULL) {
        return ACG_OK;
    }
    acg_status st = ZE(fn, zeEventHostSynchronize, e->done->ev, UINT64_MAX);
    if (st == ACG_OK) {
        pthread_mutex_lock(&e->dev->lock);
        acg__ze_slot_retire(e->dev, e->done);
        pthread_mutex_unlock(&e->dev->lock);
        e->done = NULL;
    }
    return st;
}

/* Appended to the stream's immediate list, after its earlier work and before its later work: the
 * driver's executable graph, or the list by immediate append. */
static acg_status launch_appended(ze_exec *e, ze_stream *s, const char *fn) {
    ze_device *d = e->dev;
    acg_status st = wait_done(e, fn);
    ze_slot *done = NULL;
    if (st == ACG_OK) {
        pthread_mutex_lock(&d->lock);
        st = acg__ze_slot_take(d, &done, fn);
        pthread_mutex_unlock(&d->lock);
    }
    if (st != ACG_OK) {
        return st;
    }
    st = acg__ze_stream_begin(s, fn);
    if (st == ACG_OK && e->xgraph != NULL) {
        st = graph_append(d, s->list, e->xgraph, done->ev, fn);
    } else if (st == ACG_OK) {
        st = acg__ze_check(d->drv->immediate_append(s->list, 1, &e->list, done->ev, 0, NULL), fn,
                           "zeCommandListImmediateAppendCommandListsExp");
    }
    st = acg__ze_stream_end(s, st);
    if (st == ACG_OK) {
        e->done = done;
    } else {
        pthread_mutex_lock(&d->lock);
        acg__ze_slot_unused(d, done); /* nothing will signal it */
        pthread_mutex_unlock(&d->lock);
    }
    return st;
}

/* On the device's queue, once the stream drained; the stream's next command waits for it. */
static acg_status launch_queued(ze_exec *e, ze_stream *s, const char *fn) {
    ze_device *d = e->dev;
    acg_status st = acg__ze_stream_drain(s, fn);
    if (st == ACG_OK) {
        st = acg__ze_exec_wait_fence(e, fn);
    }
    if (st == ACG_OK) {
        pthread_mutex_lock(&d->lock); /* the queue */
        st = ZE(fn, zeFenceReset, e->fence);
        if (st == ACG_OK) {
            st = ZE(fn, zeCommandQueueExecuteCommandLists, d->queue, 1, &e->list, e->fence);
        }
        pthread_mutex_unlock(&d->lock);
    }
    if (st == ACG_OK) {
        atomic_store(&e->fence_pending, true);
        pthread_mutex_lock(&s->lock);
        s->fence = e->fence;
        s->fence_exec = e;
        pthread_mutex_unlock(&s->lock);
    }
    return st;
}

acg_status acg__ze_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream) {
    static const char fn[] = "acg_graph_launch";
    ze_exec *e = acg__ze_exec(exec);
    ze_stream *s = acg__ze_stream(stream);
    return e->xgraph != NULL || e->dev->drv->immediate_append != NULL ? launch_appended(e, s, fn)
                                                                      : launch_queued(e, s, fn);
}

/* Records desc again into a new list, which replaces e's list (or its native graph) once
 * complete; a failure leaves e as it was. Called once the device no longer holds e's list
 * (wait_idle). */
static acg_status rerecord(ze_exec *e, const acg__graph_desc *desc, const char *fn) {
    ze_command_list_handle_t list = NULL;
    ze_recorded *recorded = NULL;
    acg_status st = record(e->dev, desc, &list, &recorded, fn);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = make_fence(e, fn)) != ACG_OK) {
        ZE_RELEASE(e->dev, fn, zeCommandListDestroy, list); /* never executed */
        acg__free(recorded);
        return st;
    }
    if (e->xgraph != NULL) {
        native_free(e->dev, e->graph, e->xgraph, fn);
        acg__ze_slots_release(e->dev, e->slots, e->n_slots);
        acg__free(e->slots);
        e->graph = NULL;
        e->xgraph = NULL;
        e->slots = NULL;
        e->n_slots = 0;
        acg__log(ACG_LOG_DEBUG, "level_zero: a native graph updated: recorded from its "
                                "description into a command list");
    }
    if (e->list != NULL) {
        ZE_RELEASE(e->dev, fn, zeCommandListDestroy, e->list);
    }
    acg__free(e->recorded);
    e->list = list;
    e->recorded = recorded;
    e->n_recorded = desc->n_nodes;
    return ACG_OK;
}

/* Waits until the device no longer holds e's list or graph: no replay is pending (acg-backend.h),
 * but the last one's end may not have been seen yet. */
static acg_status wait_idle(ze_exec *e, const char *fn) {
    acg_status st = wait_done(e, fn);
    return st == ACG_OK ? acg__ze_exec_wait_fence(e, fn) : st;
}

/* Where the list is mutable and only kernel arguments and grids change, the kernel commands are
 * patched in place (the mutable command list extension). Otherwise, or when the driver refuses
 * the patch, the description is recorded again into a new list, which replaces the old one once
 * complete: that works with every driver, and copies and fills change too. A graph from a
 * native capture is replaced so too (the driver's graphs are immutable); its description holds
 * work the driver recorded without acg (acg_stream_declare_foreign) only where the capture did,
 * and then the update is refused: capture again. A failure leaves the graph as it was, or (a
 * patch half applied) recorded again. */
acg_status acg__ze_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    static const char fn[] = "acg_graph_update";
    ze_exec *e = acg__ze_exec(exec);
    acg_status st = wait_idle(e, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (e->xgraph == NULL && patchable(e, desc)) {
        if ((st = patch(e, desc, 0, desc->n_nodes, fn)) == ACG_OK) {
            acg__log(ACG_LOG_DEBUG, "level_zero: graph updated in place (mutable command list)");
            return ACG_OK;
        }
        acg__log(ACG_LOG_INFO,
                 "level_zero: the driver refused to patch the list (%s); it is "
                 "recorded again",
                 acg_last_error());
    }
    return rerecord(e, desc, fn);
}

/* One kernel node: its command alone is patched where the list is mutable (the core checked
 * that the kernel is the same, so only arguments and the grid differ); otherwise, for a graph
 * the driver captured, or when the driver refuses the patch, the whole description is recorded
 * again, as acg_graph_update does (and refused so where the driver captured foreign work). A
 * failure leaves the graph as it was, but where a driver half applied the patch it refused and
 * the recording then failed too. */
acg_status acg__ze_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old) {
    static const char fn[] = "acg_graph_update_kernel_node";
    ACG__UNUSED(old);
    ze_exec *e = acg__ze_exec(exec);
    acg_status st = wait_idle(e, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (e->xgraph == NULL && e->recorded != NULL && index < e->n_recorded &&
        e->recorded[index].kind == ACG_NODE_KERNEL &&
        e->recorded[index].def == desc->nodes[index].def) {
        if ((st = patch(e, desc, index, index + 1, fn)) == ACG_OK) {
            acg__log(ACG_LOG_DEBUG, "level_zero: node %u updated in place (mutable command list)",
                     index);
            return ACG_OK;
        }
        acg__log(ACG_LOG_INFO,
                 "level_zero: the driver refused to patch node %u (%s); the list is recorded "
                 "again",
                 index, acg_last_error());
    }
    return rerecord(e, desc, fn);
}

/* The driver's executable graph of a native capture, else the regular list recorded from the
 * description (or, for a native graph updated, from its new description). */
acg_status acg__ze_graph_get_native(acg__bk_exec *exec, acg_native_handle *out) {
    ze_exec *e = acg__ze_exec(exec);
    if (e->xgraph != NULL) {
        out->kind = ACG_NATIVE_ZE_EXECUTABLE_GRAPH;
        out->handle = e->xgraph;
    } else {
        out->kind = ACG_NATIVE_ZE_COMMAND_LIST;
        out->handle = e->list;
    }
    return ACG_OK;
}

void acg__ze_graph_destroy(acg__bk_exec *exec) {
    static const char fn[] = "acg_graph_destroy";
    ze_exec *e = acg__ze_exec(exec);
    /* No replay is pending (acg-backend.h), but the device may not have let go of the list: wait
     * for the last one's end before destroying it. */
    acg_status st = wait_done(e, fn);
    if (st == ACG_OK) {
        st = acg__ze_exec_wait_fence(e, fn);
    }
    if (st == ACG_ERR_DEVICE_LOST) {
        /* A lost device runs nothing more: the last replay never ends, and uses nothing. */
        pthread_mutex_lock(&e->dev->lock);
        acg__ze_slot_retire(e->dev, e->done);
        pthread_mutex_unlock(&e->dev->lock);
        e->done = NULL;
    } else if (st != ACG_OK) {
        /* The list or graph may still be in use: it is left to the driver, with its events. */
        atomic_fetch_add(&e->dev->leaked, 1);
        e->list = NULL;
        e->graph = NULL;
        e->xgraph = NULL;
        e->n_slots = 0;
    }
    exec_free(e);
}

/* ---- native capture ---------------------------------------------------------------------- */

static _Atomic uint64_t next_recording_id = 1;

static inline ze_recording *zrec(acg__bk_recording *r) { return (ze_recording *)r; }

acg_status acg__ze_recording_slot(ze_recording *r, ze_slot **out, const char *fn) {
    if (!acg__grow((void **)&r->slots, &r->cap_slots, r->n_slots + 1, sizeof *r->slots)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_lock(&r->dev->lock);
    acg_status st = acg__ze_slot_take(r->dev, out, fn);
    pthread_mutex_unlock(&r->dev->lock);
    if (st == ACG_OK) {
        (*out)->graph = true;
        r->slots[r->n_slots++] = *out;
    }
    return st;
}

void acg__ze_slots_release(ze_device *d, ze_slot **slots, uint32_t n) {
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < n; i++) {
        slots[i]->graph = false;
        if (acg__ze.zeEventHostReset(slots[i]->ev) == ZE_RESULT_SUCCESS) {
            acg__ze_slot_unused(d, slots[i]);
        } else {
            acg__ze_slot_retire(d, slots[i]); /* reset again once it is seen signalled */
        }
    }
    pthread_mutex_unlock(&d->lock);
}

acg_status acg__ze_capture_begin(acg__bk_stream *stream, acg__bk_recording **out) {
    static const char fn[] = "acg_stream_begin_capture";
    ze_stream *s = acg__ze_stream(stream);
    ze_recording *r = acg__calloc(1, sizeof *r);
    if (r == NULL || !acg__grow((void **)&r->streams, &r->cap_streams, 1, sizeof *r->streams)) {
        acg__free(r);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    r->dev = s->dev;
    r->id = atomic_fetch_add(&next_recording_id, 1);
    acg_status st = acg__ze_stream_begin(s, fn);
    if (st == ACG_OK) {
        st = graph_begin(s->dev, s->list, fn);
    }
    st = acg__ze_stream_end(s, st);
    if (st != ACG_OK) {
        acg__free(r->streams);
        acg__free(r);
        return st;
    }
    r->streams[r->n_streams++] = s;
    s->rec = r;
    *out = (acg__bk_recording *)r;
    return ACG_OK;
}

acg_status acg__ze_capture_join(acg__bk_recording *rec, acg__bk_stream *stream) {
    ze_recording *r = zrec(rec);
    ze_stream *s = acg__ze_stream(stream);
    if (!acg__grow((void **)&r->streams, &r->cap_streams, r->n_streams + 1, sizeof *r->streams)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_wait_event: out of memory");
    }
    r->streams[r->n_streams++] = s;
    s->rec = r; /* the driver forks the list at its wait on the capture's event */
    s->forked = false;
    return ACG_OK;
}

/* Ends every replay the same way: each forked stream signals an event once its work is done,
 * and the origin waits for them all, then resets every event of the recording. */
static acg_status join_and_reset(ze_recording *r, const char *fn) {
    ze_slot **tails = acg__calloc(r->n_streams, sizeof *tails);
    if (tails == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    uint32_t n_tails = 0;
    acg_status st = ACG_OK;
    for (uint32_t i = 1; i < r->n_streams && st == ACG_OK; i++) {
        ze_stream *s = r->streams[i];
        if (!s->forked) {
            continue; /* the driver never recorded on its list */
        }
        ze_slot *tail = NULL;
        if ((st = acg__ze_recording_slot(r, &tail, fn)) != ACG_OK) {
            break;
        }
        st = acg__ze_stream_begin(s, fn);
        if (st == ACG_OK) {
            st = ZE(fn, zeCommandListAppendBarrier, s->list, tail->ev, 0, NULL);
        }
        st = acg__ze_stream_end(s, st);
        tails[n_tails++] = tail;
    }
    ze_stream *o = r->streams[0];
    if (st == ACG_OK && r->n_slots > 0) {
        st = acg__ze_stream_begin(o, fn);
        if (st == ACG_OK) {
            ze_event_handle_t evs[ACG_ZE_EVENTS_PER_POOL];
            /* A barrier on every tail (in batches that fit evs): what follows runs after it. */
            for (uint32_t i = 0; i < n_tails && st == ACG_OK; i += ACG_ZE_EVENTS_PER_POOL) {
                uint32_t n =
                    n_tails - i < ACG_ZE_EVENTS_PER_POOL ? n_tails - i : ACG_ZE_EVENTS_PER_POOL;
                for (uint32_t j = 0; j < n; j++) {
                    evs[j] = tails[i + j]->ev;
                }
                st = ZE(fn, zeCommandListAppendBarrier, o->list, NULL, n, evs);
            }
            if (st == ACG_OK && n_tails == 0 && !o->in_order) {
                st = ZE(fn, zeCommandListAppendBarrier, o->list, NULL, 0, NULL);
            }
        }
        for (uint32_t i = 0; i < r->n_slots && st == ACG_OK; i++) {
            st = ZE(fn, zeCommandListAppendEventReset, o->list, r->slots[i]->ev);
        }
        st = acg__ze_stream_end(o, st);
    }
    acg__free(tails);
    return st;
}

/* Ends the driver's capture on every stream of the recording: *graph is what it recorded, or
 * NULL when joining failed or the driver refused to end (its lists then stay recording, and
 * their streams are stuck). */
static acg_status finish(ze_recording *r, acg_ze_graph_handle_t *graph, const char *fn) {
    ze_device *d = r->dev;
    ze_stream *o = r->streams[0];
    acg_status st = join_and_reset(r, fn);
    acg_ze_graph_handle_t g = NULL;
    pthread_mutex_lock(&o->lock);
    ze_result_t ended = graph_end(d, o->list, &g);
    pthread_mutex_unlock(&o->lock);
    if (ended != ZE_RESULT_SUCCESS) {
        g = NULL;
        if (st == ACG_OK) {
            st = acg__ze_check(ended, fn, names_of(d)->end);
        } else {
            acg__log(ACG_LOG_WARN, "level_zero: %s failed (0x%x)", names_of(d)->end,
                     (unsigned)ended);
        }
        acg__log(ACG_LOG_WARN,
                 "level_zero: the driver did not end a graph capture: its %u stream(s) cannot "
                 "run work any more, and the capture's events are left to the driver",
                 (unsigned)r->n_streams);
        atomic_fetch_add(&d->leaked, 1); /* the driver's capture keeps its events */
    }
    for (uint32_t i = 0; i < r->n_streams; i++) {
        r->streams[i]->rec = NULL;
        r->streams[i]->forked = false;
        if (r->streams[i]->stuck == ZE_RESULT_SUCCESS) {
            r->streams[i]->stuck = ended;
        }
    }
    if (st != ACG_OK && g != NULL) {
        native_free(d, g, NULL, fn);
        g = NULL;
    }
    if (ended == ZE_RESULT_SUCCESS && g == NULL) {
        acg__ze_slots_release(d, r->slots, r->n_slots); /* nothing ran them */
        r->n_slots = 0;
    }
    *graph = g;
    return st;
}

static void recording_free(ze_recording *r) {
    acg__free(r->slots);
    acg__free(r->streams);
    acg__free(r);
}

acg_status acg__ze_capture_end(acg__bk_recording *rec, acg__bk_exec **out) {
    static const char fn[] = "acg_stream_end_capture";
    ze_recording *r = zrec(rec);
    ze_device *d = r->dev;
    ze_exec *e = acg__calloc(1, sizeof *e);
    acg_ze_graph_handle_t graph = NULL;
    acg_status st = finish(r, &graph, fn);
    if (st == ACG_OK && e == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    acg_ze_executable_graph_handle_t xgraph = NULL;
    if (st == ACG_OK) {
        st = graph_instantiate(d, graph, &xgraph, fn);
    }
    if (st != ACG_OK) {
        if (graph != NULL) {
            native_free(d, graph, NULL, fn);
            acg__ze_slots_release(d, r->slots, r->n_slots); /* nothing ran them */
        }
        acg__free(e);
        recording_free(r);
        return st;
    }
    e->dev = d;
    e->graph = graph;
    e->xgraph = xgraph;
    e->slots = r->slots;
    e->n_slots = r->n_slots;
    r->slots = NULL;
    recording_free(r);
    *out = acg__ze_bk_exec(e);
    return ACG_OK;
}

void acg__ze_capture_abort(acg__bk_recording *rec) {
    static const char fn[] = "acg_stream_end_capture";
    ze_recording *r = zrec(rec);
    acg_ze_graph_handle_t graph = NULL;
    /* The core sets its own error after this (the reason the capture ends). */
    if (finish(r, &graph, fn) == ACG_OK) {
        native_free(r->dev, graph, NULL, fn);
        acg__ze_slots_release(r->dev, r->slots, r->n_slots);
    }
    recording_free(r);
}
