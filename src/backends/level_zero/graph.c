/* graph.c — the level_zero backend's graphs: the captured description recorded into one regular
 * command list, closed once and replayed many times. Where the driver offers immediate append,
 * a replay is appended to the stream's immediate list, in its order, signalling an event of its
 * own; otherwise it runs on the device's command queue after the stream drained, with a fence
 * that the stream's next command waits for on the host.
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

#include "backends/level_zero/level_zero.h"

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
        /* The capability refuses host functions and foreign work in a capture before this. */
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: node %u (%s) cannot be recorded in a Level Zero command list", fn, i,
                          n->label);
    }
}

/* The description recorded into a new regular command list, closed. */
static acg_status record(ze_device *d, const acg__graph_desc *desc, ze_command_list_handle_t *out,
                         const char *fn) {
    ze_command_list_desc_t ldesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC,
                                    .commandQueueGroupOrdinal = d->compute_ordinal};
    ze_command_list_handle_t list = NULL;
    acg_status st = ZE(fn, zeCommandListCreate, d->ctx, d->dev, &ldesc, &list);
    for (uint32_t i = 0; st == ACG_OK && i < desc->n_nodes; i++) {
        if (i > 0) {
            st = ZE(fn, zeCommandListAppendBarrier, list, NULL, 0, NULL);
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
    *out = list;
    return st;
}

static void exec_free(ze_exec *e) {
    static const char fn[] = "acg_graph_destroy";
    if (e->list != NULL) {
        ZE_RELEASE(e->dev, fn, zeCommandListDestroy, e->list);
    }
    if (e->fence != NULL) {
        ZE_RELEASE(e->dev, fn, zeFenceDestroy, e->fence);
    }
    acg__free(e);
}

acg_status acg__ze_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                     acg__bk_exec **out) {
    static const char fn[] = "acg_stream_end_capture";
    ze_device *d = acg__ze_dev(dev);
    ze_exec *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    e->dev = d;
    acg_status st = record(d, desc, &e->list, fn);
    if (st == ACG_OK && d->drv->immediate_append == NULL) {
        ze_fence_desc_t fdesc = {.stype = ZE_STRUCTURE_TYPE_FENCE_DESC};
        pthread_mutex_lock(&d->lock); /* the queue */
        st = ZE(fn, zeFenceCreate, d->queue, &fdesc, &e->fence);
        pthread_mutex_unlock(&d->lock);
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

/* Appended to the stream's immediate list, after its earlier work and before its later work. */
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
    if (st == ACG_OK) {
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
    return e->dev->drv->immediate_append != NULL ? launch_appended(e, s, fn)
                                                 : launch_queued(e, s, fn);
}

/* The description recorded again into a new list, which replaces the old one once complete
 * (a failure leaves the graph as it was). Simpler than patching commands through the mutable
 * command list extension, and it works with every driver: copies and fills change too. */
acg_status acg__ze_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    static const char fn[] = "acg_graph_update";
    ze_exec *e = acg__ze_exec(exec);
    /* No replay is pending (backend.h); the device may hold the old list until the last
     * replay's end was seen. */
    acg_status st = wait_done(e, fn);
    if (st == ACG_OK) {
        st = acg__ze_exec_wait_fence(e, fn);
    }
    ze_command_list_handle_t list = NULL;
    if (st == ACG_OK) {
        st = record(e->dev, desc, &list, fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    ZE_RELEASE(e->dev, fn, zeCommandListDestroy, e->list);
    e->list = list;
    return ACG_OK;
}

void acg__ze_graph_destroy(acg__bk_exec *exec) {
    static const char fn[] = "acg_graph_destroy";
    ze_exec *e = acg__ze_exec(exec);
    /* No replay is pending (backend.h), but the device may not have let go of the list: wait
     * for the last one's end before destroying it. */
    if (wait_done(e, fn) != ACG_OK || acg__ze_exec_wait_fence(e, fn) != ACG_OK) {
        /* The list may still be in use: it is left to the driver. */
        atomic_fetch_add(&e->dev->leaked, 1);
        e->list = NULL;
    }
    exec_free(e);
}
