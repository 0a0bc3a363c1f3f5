/* queue.c — the level_zero backend's streams on a driver without immediate command lists
 * (queue mode): a command queue per stream, running a regular list per command. stream.c calls
 * these between acg__ze_stream_begin and acg__ze_stream_end, and at a stream's end. */
#include <string.h>

#include "level_zero.h"

/* Where the driver has no immediate lists, each command of a stream is appended to a regular
 * list of the stream's, closed and executed on the stream's own queue with a fence at its end.
 * acg does not count on a queue to start a list after the previous one completed (the in-order
 * queue flag is spec 1.7, and a driver without immediate lists may well be older): each list
 * ends with a barrier that signals a fresh event, the stream's tail, and the next list starts
 * with a wait on it. Only that next list references the tail: it is retired when that list's
 * fence is seen signalled (the wait passed), and recycles at once. A list is reset for another
 * command only once its fence signalled; since each list waits for the one before, the fences
 * signal in order and the oldest is the one to ask. */

/* Releases a list of the stream and its fence; nothing may reference them. A fence the driver
 * keeps keeps the queue too (not a lost device's: acg__ze_release). */
static void batch_free(ze_stream *s, const ze_batch *b, const char *fn) {
    ZE_RELEASE(s->dev, fn, zeCommandListDestroy, b->list);
    ze_result_t r = acg__ze.zeFenceDestroy(b->fence);
    acg__ze_release(s->dev, r, fn, "zeFenceDestroy");
    s->fence_kept = s->fence_kept || (r != ZE_RESULT_SUCCESS && r != ZE_RESULT_ERROR_DEVICE_LOST);
    s->n_batches--;
}

/* A new list with a fence on the stream's queue; room for it in both arrays first, so that
 * moving it between them never allocates. */
static acg_status batch_new(ze_stream *s, ze_batch *b, const char *fn) {
    ze_device *d = s->dev;
    if (!acg__grow((void **)&s->pending, &s->cap_pending, s->n_batches + 1, sizeof *s->pending) ||
        !acg__grow((void **)&s->idle, &s->cap_idle, s->n_batches + 1, sizeof *s->idle)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    ze_command_list_desc_t ldesc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC,
                                    .commandQueueGroupOrdinal = d->compute_ordinal};
    ze_fence_desc_t fdesc = {.stype = ZE_STRUCTURE_TYPE_FENCE_DESC};
    acg_status st = ZE(fn, zeCommandListCreate, d->ctx, d->dev, &ldesc, &b->list);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = ZE(fn, zeFenceCreate, s->queue, &fdesc, &b->fence)) != ACG_OK) {
        ZE_RELEASE(d, fn, zeCommandListDestroy, b->list); /* never executed */
        return st;
    }
    s->n_batches++;
    return ACG_OK;
}

/* Resets the lists whose execution completed (their fence signalled), for the next commands;
 * the commands they ran completed. A list the driver does not reset is destroyed. */
static acg_status queue_reclaim(ze_stream *s, const char *fn) {
    acg_status st = ACG_OK;
    uint32_t done = 0;
    while (done < s->n_pending) {
        ze_result_t r = acg__ze.zeFenceQueryStatus(s->pending[done].fence);
        if (r == ZE_RESULT_NOT_READY ||
            (st = acg__ze_check(r, fn, "zeFenceQueryStatus")) != ACG_OK) {
            break;
        }
        done++;
    }
    pthread_mutex_lock(&s->dev->lock);
    for (uint32_t i = 0; i < done; i++) {
        acg__ze_slot_retire(s->dev, s->pending[i].waited); /* its list passed the wait */
        s->pending[i].waited = NULL;
    }
    pthread_mutex_unlock(&s->dev->lock);
    for (uint32_t i = 0; i < done; i++) {
        const ze_batch *b = &s->pending[i];
        if (s->completed < b->serial) {
            s->completed = b->serial;
        }
        acg_status reset = ZE(fn, zeCommandListReset, b->list);
        if (reset == ACG_OK) {
            reset = ZE(fn, zeFenceReset, b->fence);
        }
        if (reset == ACG_OK) {
            s->idle[s->n_idle++] = *b; /* room: every list fits in each array */
        } else {
            batch_free(s, b, fn); /* its execution completed: nothing references it */
            st = st != ACG_OK ? st : reset;
        }
    }
    if (done > 0) { /* pending is NULL until the stream's first list */
        memmove(s->pending, s->pending + done, (s->n_pending - done) * sizeof *s->pending);
        s->n_pending -= done;
    }
    return st;
}

/* At most this many lists of a stream are in flight: a command beyond waits on the host for the
 * oldest. Each holds an event until it ended, so the stream's lists and the device's events stay
 * bounded however far the host runs ahead (a device's first pool of 64 events then serves a few
 * streams); a few commands queued are enough to hide the latency of submitting the next. */
#define ACG_ZE_QUEUE_DEPTH 8

/* Opens a list for a command in s->list: a reset one, else a new one. It waits first for the
 * end of the list executed before it. */
acg_status acg__ze_queue_open(ze_stream *s, const char *fn) {
    acg_status st = ACG_OK;
    if (s->n_pending >= ACG_ZE_QUEUE_DEPTH) {
        st = ZE(fn, zeFenceHostSynchronize, s->pending[0].fence, UINT64_MAX);
    }
    if (st == ACG_OK && (s->n_idle == 0 || s->n_pending >= ACG_ZE_QUEUE_DEPTH)) {
        st = queue_reclaim(s, fn);
    }
    ze_batch b = {0};
    if (st == ACG_OK && s->n_idle > 0) {
        b = s->idle[--s->n_idle];
    } else if (st == ACG_OK) {
        st = batch_new(s, &b, fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    s->list = b.list;
    s->list_fence = b.fence;
    if (s->tail != NULL) {
        st = ZE(fn, zeCommandListAppendWaitOnEvents, s->list, 1, &s->tail->ev);
    }
    return st;
}

/* Ends the open list: with st ACG_OK it signals a fresh tail at its end, is closed and runs on
 * the stream's queue; otherwise, or when one of those fails, it never ran and is reset for the
 * next command (destroyed if the driver does not reset it). */
acg_status acg__ze_queue_submit(ze_stream *s, acg_status st) {
    const char *fn = s->fn;
    ze_device *d = s->dev;
    if (s->list == NULL) {
        return st; /* begin failed before opening one */
    }
    ze_batch b = {.list = s->list, .fence = s->list_fence, .serial = s->submitted + 1};
    s->list = NULL;
    s->list_fence = NULL;
    ze_slot *end = NULL;
    if (st == ACG_OK) {
        pthread_mutex_lock(&d->lock);
        st = acg__ze_slot_take(d, &end, fn);
        pthread_mutex_unlock(&d->lock);
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListAppendBarrier, b.list, end->ev, 0, NULL);
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListClose, b.list);
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandQueueExecuteCommandLists, s->queue, 1, &b.list, b.fence);
    }
    if (st == ACG_OK) {
        b.waited = s->tail;
        s->pending[s->n_pending++] = b; /* room: every list fits in each array */
        s->tail = end;
        return ACG_OK;
    }
    if (end != NULL) {
        pthread_mutex_lock(&d->lock);
        acg__ze_slot_unused(d, end); /* nothing will signal it */
        pthread_mutex_unlock(&d->lock);
    }
    if (acg__ze.zeCommandListReset(b.list) == ZE_RESULT_SUCCESS) {
        s->idle[s->n_idle++] = b;
    } else {
        batch_free(s, &b, fn); /* never executed */
    }
    return st;
}

/* Waits on the host for every list executed (destroy, after a drain). */
acg_status acg__ze_queue_wait_all(ze_stream *s, const char *fn) {
    acg_status st = ACG_OK;
    for (uint32_t i = 0; i < s->n_pending && st == ACG_OK; i++) {
        st = ZE(fn, zeFenceHostSynchronize, s->pending[i].fence, UINT64_MAX);
    }
    return st;
}

/* Releases the stream's lists, fences and queue; none is pending. */
void acg__ze_queue_free(ze_stream *s, const char *fn) {
    for (uint32_t i = 0; i < s->n_pending; i++) {
        batch_free(s, &s->pending[i], fn);
    }
    for (uint32_t i = 0; i < s->n_idle; i++) {
        batch_free(s, &s->idle[i], fn);
    }
    s->n_pending = s->n_idle = 0;
    if (!s->fence_kept) {
        ZE_RELEASE(s->dev, fn, zeCommandQueueDestroy, s->queue);
    }
}
