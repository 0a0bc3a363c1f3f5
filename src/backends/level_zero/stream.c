/* stream.c — the level_zero backend's streams, events and copies: immediate command lists kept
 * in order (or, where the driver has none, a command queue per stream running regular lists),
 * events from host-visible pools recycled once nothing can still reference them, and pageable
 * copies staged through host memory of the driver's. */
#include <stdio.h>
#include <string.h>

#include "level_zero.h"

/* ---- event slots ------------------------------------------------------------------------- */

/* A new pool of events, all of them free. The free and retired lists can each hold every slot,
 * so moving slots between them never allocates. */
acg_status acg__ze_add_pool(ze_device *d, const char *fn) {
    if (!acg__grow((void **)&d->pools, &d->cap_pools, d->n_pools + 1, sizeof *d->pools) ||
        !acg__grow((void **)&d->all, &d->cap_all, d->n_all + ACG_ZE_EVENTS_PER_POOL,
                   sizeof *d->all) ||
        !acg__grow((void **)&d->free_slots, &d->cap_free, d->n_all + ACG_ZE_EVENTS_PER_POOL,
                   sizeof *d->free_slots) ||
        !acg__grow((void **)&d->retired, &d->cap_retired, d->n_all + ACG_ZE_EVENTS_PER_POOL,
                   sizeof *d->retired)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    ze_event_pool_desc_t pdesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                                  .flags = ZE_EVENT_POOL_FLAG_HOST_VISIBLE,
                                  .count = ACG_ZE_EVENTS_PER_POOL};
    ze_event_pool_handle_t pool = NULL;
    acg_status st = ZE(fn, zeEventPoolCreate, d->ctx, &pdesc, 1, &d->dev, &pool);
    if (st != ACG_OK) {
        return st;
    }
    d->pools[d->n_pools++] = pool;
    for (uint32_t i = 0; i < ACG_ZE_EVENTS_PER_POOL && st == ACG_OK; i++) {
        ze_event_desc_t edesc = {.stype = ZE_STRUCTURE_TYPE_EVENT_DESC,
                                 .index = i,
                                 .signal = ZE_EVENT_SCOPE_FLAG_HOST,
                                 .wait = ZE_EVENT_SCOPE_FLAG_HOST};
        ze_slot *s = acg__new(sizeof *s, fn);
        if (s == NULL) {
            st = ACG_ERR_OUT_OF_MEMORY;
            break;
        }
        st = ZE(fn, zeEventCreate, pool, &edesc, &s->ev);
        if (st != ACG_OK) {
            acg__free(s);
            break;
        }
        d->all[d->n_all++] = s; /* room grown above */
        d->free_slots[d->n_free++] = s;
    }
    return st;
}

/* Whether every stream that waited on the slot passed that wait (a stream destroyed since
 * passed it, unless its list was left to the driver: serial UINT64_MAX). */
static bool waiters_passed(ze_slot *s) {
    for (uint32_t i = 0; i < s->n_waiters; i++) {
        ze_stream *w = s->waiters[i].stream;
        if (w == NULL ? s->waiters[i].serial == UINT64_MAX : w->completed < s->waiters[i].serial) {
            return false;
        }
    }
    return true;
}

/* Moves retired slots that nothing references any more back to the free list, reset. */
static void recycle(ze_device *d) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < d->n_retired; i++) {
        ze_slot *s = d->retired[i];
        if (s->host_waits == 0 && waiters_passed(s) &&
            acg__ze.zeEventQueryStatus(s->ev) == ZE_RESULT_SUCCESS &&
            acg__ze.zeEventHostReset(s->ev) == ZE_RESULT_SUCCESS) {
            s->n_waiters = 0;
            d->free_slots[d->n_free++] = s; /* room: every slot fits in each list */
        } else {
            d->retired[kept++] = s;
        }
    }
    d->n_retired = kept;
}

acg_status acg__ze_slot_take(ze_device *d, ze_slot **out, const char *fn) {
    if (d->n_free == 0) {
        recycle(d);
    }
    acg_status st = d->n_free == 0 ? acg__ze_add_pool(d, fn) : ACG_OK;
    if (st == ACG_OK) {
        *out = d->free_slots[--d->n_free];
    }
    return st;
}

void acg__ze_slot_unused(ze_device *d, ze_slot *s) {
    d->free_slots[d->n_free++] = s; /* room: every slot fits in each list */
}

void acg__ze_slot_retire(ze_device *d, ze_slot *s) {
    if (s != NULL) {
        d->retired[d->n_retired++] = s; /* room: every slot fits in each list */
    }
}

/* A stream that waits on the slot, up to its command `serial`. */
static bool slot_waited(ze_slot *s, ze_stream *stream, uint64_t serial) {
    for (uint32_t i = 0; i < s->n_waiters; i++) {
        if (s->waiters[i].stream == stream) {
            s->waiters[i].serial = serial;
            return true;
        }
    }
    if (!acg__grow((void **)&s->waiters, &s->cap_waiters, s->n_waiters + 1, sizeof *s->waiters)) {
        return false;
    }
    s->waiters[s->n_waiters].stream = stream;
    s->waiters[s->n_waiters].serial = serial;
    s->n_waiters++;
    return true;
}

/* A stream goes away: with drained, its waits passed; else its list, left to the driver, may
 * still wait, and the slots it waits on are never recycled. */
static void forget_stream(ze_device *d, ze_stream *stream, bool drained) {
    for (uint32_t i = 0; i < d->n_all; i++) {
        ze_slot *s = d->all[i];
        for (uint32_t j = 0; j < s->n_waiters; j++) {
            if (s->waiters[j].stream == stream) {
                s->waiters[j].stream = NULL;
                s->waiters[j].serial = drained ? 0 : UINT64_MAX;
            }
        }
    }
}

/* ---- streams ----------------------------------------------------------------------------- */

acg_status acg__ze_stream_begin(ze_stream *s, const char *fn) {
    pthread_mutex_lock(&s->lock);
    acg_status st = ACG_OK;
    s->fn = fn;
    if (s->stuck != ZE_RESULT_SUCCESS) {
        return acg__error(ACG_ERR_DEVICE,
                          "%s: the driver did not end a graph capture on the stream's command "
                          "list (zeCommandListEndGraphCaptureExt failed with %s (0x%08x)), so "
                          "what is appended to it would be recorded, not run; destroy the stream",
                          fn, acg__ze_result_name(s->stuck), (unsigned)s->stuck);
    }
    if (s->fence != NULL) {
        /* A replay on the device's queue: later work on the stream runs after it. The stream
         * forgets the fence whatever the wait says: on a lost device the replay never ends,
         * and a wait that failed otherwise is reported now, once; either way the graph may be
         * destroyed next, and the stream must not point at it then. */
        st = acg__ze_exec_wait_fence(s->fence_exec, fn);
        s->fence = NULL;
        s->fence_exec = NULL;
    }
    if (st == ACG_OK && s->queue != NULL) {
        st = acg__ze_queue_open(s, fn);
    } else if (st == ACG_OK && s->barrier) {
        st = ZE(fn, zeCommandListAppendBarrier, s->list, NULL, 0, NULL);
    }
    return st;
}

acg_status acg__ze_stream_end(ze_stream *s, acg_status st) {
    if (s->queue != NULL) {
        st = acg__ze_queue_submit(s, st);
    }
    if (st == ACG_OK) {
        s->submitted++;
        /* In queue mode each command has a list of its own, which waits for the one before. */
        s->barrier = !s->in_order && s->queue == NULL;
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg__ze_stream_create(acg__bk_device *dev, acg__bk_stream **out) {
    static const char fn[] = "acg_stream_create";
    ze_device *d = acg__ze_dev(dev);
    ze_stream *s = acg__new(sizeof *s, fn);
    if (s == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    s->dev = d;
    pthread_mutex_lock(&d->lock);
    acg_status st = acg__ze_slot_take(d, &s->sync, fn);
    pthread_mutex_unlock(&d->lock);
    if (st != ACG_OK) {
        acg__free(s);
        return st;
    }
    ze_command_queue_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                    .ordinal = d->compute_ordinal,
                                    .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                    .priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_result_t r = ZE_RESULT_ERROR_INVALID_ENUMERATION;
    if (d->drv->no_immediate) {
        /* Queue mode: the stream's lists run on a queue of its own (see above). */
        st = ZE(fn, zeCommandQueueCreate, d->ctx, d->dev, &desc, &s->queue);
        r = ZE_RESULT_SUCCESS;
    } else if (d->drv->in_order) {
        desc.flags = ACG_ZE_COMMAND_QUEUE_FLAG_IN_ORDER; /* an immediate list's desc is a queue's */
        r = acg__ze.zeCommandListCreateImmediate(d->ctx, d->dev, &desc, &s->list);
        s->in_order = r == ZE_RESULT_SUCCESS;
    }
    if (r == ZE_RESULT_ERROR_INVALID_ENUMERATION) {
        /* A layer older than the driver (the loader's validation layer of spec 1.4) refuses the
         * flag: barriers keep the list in order instead. */
        desc.flags = 0;
        r = acg__ze.zeCommandListCreateImmediate(d->ctx, d->dev, &desc, &s->list);
    }
    if (st == ACG_OK) {
        st = acg__ze_check(r, fn, "zeCommandListCreateImmediate");
    }
    if (st != ACG_OK) {
        pthread_mutex_lock(&d->lock);
        acg__ze_slot_unused(d, s->sync);
        pthread_mutex_unlock(&d->lock);
        acg__free(s);
        return st;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->sync_lock, NULL);
    *out = acg__ze_bk_stream(s);
    return ACG_OK;
}

void acg__ze_stream_destroy(acg__bk_stream *stream) {
    ze_stream *s = acg__ze_stream(stream);
    /* The core synchronized the stream; when that failed the list may still be in use, and
     * is left to the driver rather than destroyed under the device. */
    acg_status st = acg__ze_stream_drain(s, "acg_stream_destroy");
    if (st == ACG_OK && s->queue != NULL) {
        /* Every list executed ended (the drain saw the last one's commands complete, not yet its
         * fence): none may be destroyed before. */
        st = acg__ze_queue_wait_all(s, "acg_stream_destroy");
    }
    /* A lost device runs nothing more: what the stream queued will never use its lists, which
     * go as a drained stream's do. */
    bool drained = st == ACG_OK || st == ACG_ERR_DEVICE_LOST;
    pthread_mutex_lock(&s->dev->lock);
    forget_stream(s->dev, s, drained);
    if (drained) {
        acg__ze_slot_retire(s->dev, s->sync); /* else the list may still signal it */
        acg__ze_slot_retire(s->dev, s->tail);
        for (uint32_t i = 0; i < s->n_pending; i++) {
            acg__ze_slot_retire(s->dev, s->pending[i].waited);
        }
    }
    pthread_mutex_unlock(&s->dev->lock);
    if (drained && s->queue != NULL) {
        acg__ze_queue_free(s, "acg_stream_destroy");
    } else if (drained) {
        ZE_RELEASE(s->dev, "acg_stream_destroy", zeCommandListDestroy, s->list);
    } else {
        /* The list, or the queue and its lists, stay with what they may use. */
        atomic_fetch_add(&s->dev->leaked, 1);
        s->n_aside = 0; /* what the list may use stays too */
        if (s->staging != NULL) {
            atomic_fetch_add(&s->dev->leaked, 1);
            s->staging = NULL;
        }
    }
    if (s->staging != NULL) {
        ZE_RELEASE(s->dev, "acg_stream_destroy", zeMemFree, s->dev->ctx, s->staging);
    }
    for (uint32_t i = 0; i < s->n_aside; i++) {
        ZE_RELEASE(s->dev, "acg_stream_destroy", zeMemFree, s->dev->ctx, s->aside[i]);
    }
    acg__free(s->aside);
    acg__free(s->pending);
    acg__free(s->idle);
    pthread_mutex_destroy(&s->sync_lock);
    pthread_mutex_destroy(&s->lock);
    acg__free(s);
}

/* Appends to the stream a barrier that signals the slot's event once everything before it
 * has run; *serial, unless serial is NULL, the number of that submission (s->submitted counts
 * them under the stream's lock). */
static acg_status append_signal(ze_stream *s, ze_slot *slot, uint64_t *serial, const char *fn) {
    acg_status st = acg__ze_stream_begin(s, fn);
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListAppendBarrier, s->list, slot->ev, 0, NULL);
    }
    if (serial != NULL) {
        *serial = s->submitted + 1;
    }
    return acg__ze_stream_end(s, st);
}

/* Appends a barrier that signals a fresh slot once the stream's work so far completed; *serial
 * is the work it covers. The slot is held for the caller's host wait, ended by unmark. */
static acg_status mark(ze_stream *s, ze_slot **out, uint64_t *serial, const char *fn) {
    ze_slot *slot = NULL;
    pthread_mutex_lock(&s->dev->lock);
    acg_status st = acg__ze_slot_take(s->dev, &slot, fn);
    if (st == ACG_OK) {
        slot->host_waits++;
    }
    pthread_mutex_unlock(&s->dev->lock);
    if (st != ACG_OK) {
        return st;
    }
    st = append_signal(s, slot, serial, fn);
    if (st != ACG_OK) {
        pthread_mutex_lock(&s->dev->lock);
        slot->host_waits--;
        acg__ze_slot_unused(s->dev, slot); /* nothing will signal it */
        pthread_mutex_unlock(&s->dev->lock);
        return st;
    }
    *out = slot;
    return ACG_OK;
}

/* Ends a host wait on a slot from mark: with completed, the stream ran up to `serial`. */
static void unmark(ze_stream *s, ze_slot *slot, uint64_t serial, bool completed) {
    pthread_mutex_lock(&s->dev->lock);
    slot->host_waits--;
    acg__ze_slot_retire(s->dev, slot);
    pthread_mutex_unlock(&s->dev->lock);
    if (completed) {
        pthread_mutex_lock(&s->lock);
        if (s->completed < serial) {
            s->completed = serial;
        }
        pthread_mutex_unlock(&s->lock);
    }
}

/* With the stream's own event, so that waiting never allocates: a free that waits for the
 * stream must not fail for want of memory and free what the device still uses. */
acg_status acg__ze_stream_drain(ze_stream *s, const char *fn) {
    pthread_mutex_lock(&s->sync_lock);
    acg_status st = ACG_OK;
    if (s->sync_armed) {
        /* An earlier wait failed with its barrier still queued: the event may not be reset
         * before that barrier signalled it, or the next wait would end at the old point. */
        st = ZE(fn, zeEventHostSynchronize, s->sync->ev, UINT64_MAX);
    }
    if (st == ACG_OK) {
        s->sync_armed = false;
        st = ZE(fn, zeEventHostReset, s->sync->ev);
    }
    uint64_t serial = 0;
    if (st == ACG_OK) {
        st = acg__ze_stream_begin(s, fn);
        if (st == ACG_OK) {
            st = ZE(fn, zeCommandListAppendBarrier, s->list, s->sync->ev, 0, NULL);
        }
        serial = s->submitted + 1;
        /* Armed once the barrier is in the stream's work: in queue mode only once its list
         * executed (a list that failed to is reset, its barrier gone). */
        st = acg__ze_stream_end(s, st);
        s->sync_armed = st == ACG_OK;
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeEventHostSynchronize, s->sync->ev, UINT64_MAX);
        s->sync_armed = st != ACG_OK;
    }
    pthread_mutex_unlock(&s->sync_lock);
    if (st == ACG_OK) {
        pthread_mutex_lock(&s->lock);
        if (s->completed < serial) {
            s->completed = serial;
        }
        pthread_mutex_unlock(&s->lock);
    }
    return st;
}

/* May overlap the stream's other slots (acg-backend.h): the list is touched under its lock only,
 * and the wait is on an event of its own. */
acg_status acg__ze_stream_synchronize(acg__bk_stream *stream) {
    return acg__ze_stream_drain(acg__ze_stream(stream), "acg_stream_synchronize");
}

/* Idle when everything appended completed. Where the driver has zeCommandListHostSynchronize
 * (spec 1.6) that is asked with a timeout of 0; in queue mode the fence of the latest list
 * executed is (the lists end in their order); otherwise a barrier is appended and given a
 * millisecond to pass, which an idle device takes. */
acg_status acg__ze_stream_query(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_query";
    ze_stream *s = acg__ze_stream(stream);
    pthread_mutex_lock(&s->lock);
    bool idle = s->completed == s->submitted && s->fence == NULL;
    acg_status st = ACG_OK;
    if (!idle && s->fence != NULL) {
        ze_result_t r = acg__ze.zeFenceQueryStatus(s->fence);
        st = r == ZE_RESULT_NOT_READY ? ACG_NOT_READY : acg__ze_check(r, fn, "zeFenceQueryStatus");
    }
    const bool asked = s->queue != NULL || s->dev->drv->host_sync != NULL;
    if (!idle && st == ACG_OK && s->queue != NULL && s->n_pending > 0) {
        const ze_batch *last = &s->pending[s->n_pending - 1];
        ze_result_t r = acg__ze.zeFenceQueryStatus(last->fence);
        st = r == ZE_RESULT_NOT_READY ? ACG_NOT_READY : acg__ze_check(r, fn, "zeFenceQueryStatus");
        if (st == ACG_OK) {
            s->completed = last->serial;
        }
    }
    if (!idle && st == ACG_OK && s->queue != NULL) {
        idle = s->fence == NULL || acg__ze_exec_wait_fence(s->fence_exec, fn) == ACG_OK;
    } else if (!idle && st == ACG_OK && s->dev->drv->host_sync != NULL) {
        uint64_t serial = s->submitted;
        ze_result_t r = s->dev->drv->host_sync(s->list, 0);
        st = r == ZE_RESULT_NOT_READY ? ACG_NOT_READY
                                      : acg__ze_check(r, fn, "zeCommandListHostSynchronize");
        if (st == ACG_OK) {
            s->completed = serial;
            idle = s->fence == NULL || acg__ze_exec_wait_fence(s->fence_exec, fn) == ACG_OK;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (idle || st != ACG_OK || asked) {
        return st;
    }
    ze_slot *slot = NULL;
    uint64_t serial = 0;
    ACG__TRY(mark(s, &slot, &serial, fn));
    ze_result_t r = acg__ze.zeEventHostSynchronize(slot->ev, 1000000);
    st = r == ZE_RESULT_NOT_READY ? ACG_NOT_READY : acg__ze_check(r, fn, "zeEventHostSynchronize");
    unmark(s, slot, serial, st == ACG_OK);
    return st;
}

/* ---- events ------------------------------------------------------------------------------ */

/* An acg event: the slot of its latest record (NULL: never recorded, complete). A new record
 * takes a new slot and retires the old one, which streams or host threads may still wait on.
 * A record in a native capture takes a slot of the recording instead, for the waits of that
 * capture only: the core answers for the event once the capture is over (its point never
 * runs), so the slot of the latest record outside a capture stays as it was. */
typedef struct ze_ev {
    ze_device *dev;
    ze_slot *slot;        /* under the device's lock */
    ze_slot *captured;    /* the latest record in a native capture, */
    uint64_t captured_id; /* ... the one of ze_recording.id */
} ze_ev;

static inline ze_ev *zevent(acg__bk_event *e) { return (ze_ev *)e; }

acg_status acg__ze_event_create(acg__bk_device *dev, acg__bk_event **out) {
    ze_ev *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_event_create: out of memory");
    }
    e->dev = acg__ze_dev(dev);
    *out = (acg__bk_event *)e;
    return ACG_OK;
}

void acg__ze_event_destroy(acg__bk_event *event) {
    ze_ev *e = zevent(event);
    pthread_mutex_lock(&e->dev->lock);
    acg__ze_slot_retire(e->dev, e->slot);
    pthread_mutex_unlock(&e->dev->lock);
    acg__free(e);
}

acg_status acg__ze_event_record(acg__bk_event *event, acg__bk_stream *stream) {
    static const char fn[] = "acg_event_record";
    ze_ev *e = zevent(event);
    ze_stream *s = acg__ze_stream(stream);
    ze_slot *slot = NULL;
    if (s->rec != NULL) {
        /* Recorded into the graph: its replays signal the recording's slot. */
        acg_status st = acg__ze_recording_slot(s->rec, &slot, fn);
        if (st == ACG_OK) {
            st = acg__ze_stream_begin(s, fn);
            if (st == ACG_OK) {
                st = ZE(fn, zeCommandListAppendBarrier, s->list, slot->ev, 0, NULL);
            }
            st = acg__ze_stream_end(s, st);
        }
        if (st == ACG_OK) {
            e->captured = slot;
            e->captured_id = s->rec->id;
        }
        return st;
    }
    pthread_mutex_lock(&e->dev->lock);
    acg_status st = acg__ze_slot_take(e->dev, &slot, fn);
    pthread_mutex_unlock(&e->dev->lock);
    if (st != ACG_OK) {
        return st;
    }
    st = append_signal(s, slot, NULL, fn);
    pthread_mutex_lock(&e->dev->lock);
    if (st == ACG_OK) {
        acg__ze_slot_retire(e->dev, e->slot);
        e->slot = slot;
    } else {
        acg__ze_slot_unused(e->dev, slot); /* nothing will signal it */
    }
    pthread_mutex_unlock(&e->dev->lock);
    return st;
}

acg_status acg__ze_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event) {
    static const char fn[] = "acg_stream_wait_event";
    ze_ev *e = zevent(event);
    ze_stream *s = acg__ze_stream(stream);
    acg_status st = acg__ze_stream_begin(s, fn);
    pthread_mutex_lock(&e->dev->lock);
    ze_slot *slot = e->slot; /* NULL: never recorded, complete */
    if (s->rec != NULL && e->captured_id == s->rec->id) {
        /* In a native capture, on an event recorded in it: a dependency inside the graph. A
         * stream that was not recording yet is forked into the capture by the driver here. */
        slot = e->captured;
    } else if (st == ACG_OK && slot != NULL && !slot_waited(slot, s, s->submitted + 1)) {
        /* The wait is the stream's next command: the slot stays referenced until it passed. */
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_unlock(&e->dev->lock);
    if (st == ACG_OK && slot != NULL) {
        st = ZE(fn, zeCommandListAppendWaitOnEvents, s->list, 1, &slot->ev);
    }
    if (st == ACG_OK && s->rec != NULL && slot != NULL && slot->graph) {
        s->forked = true;
    }
    return acg__ze_stream_end(s, st);
}

/* The event's slot, held against recycling while the caller waits on it; NULL: complete. */
static ze_slot *hold(ze_ev *e) {
    pthread_mutex_lock(&e->dev->lock);
    ze_slot *slot = e->slot;
    if (slot != NULL) {
        slot->host_waits++;
    }
    pthread_mutex_unlock(&e->dev->lock);
    return slot;
}

static void release(ze_ev *e, ze_slot *slot) {
    pthread_mutex_lock(&e->dev->lock);
    slot->host_waits--;
    pthread_mutex_unlock(&e->dev->lock);
}

acg_status acg__ze_event_query(acg__bk_event *event) {
    ze_ev *e = zevent(event);
    ze_slot *slot = hold(e);
    if (slot == NULL) {
        return ACG_OK;
    }
    ze_result_t r = acg__ze.zeEventQueryStatus(slot->ev);
    release(e, slot);
    return r == ZE_RESULT_NOT_READY ? ACG_NOT_READY
                                    : acg__ze_check(r, "acg_event_query", "zeEventQueryStatus");
}

acg_status acg__ze_event_synchronize(acg__bk_event *event) {
    ze_ev *e = zevent(event);
    ze_slot *slot = hold(e);
    if (slot == NULL) {
        return ACG_OK;
    }
    acg_status st = ZE("acg_event_synchronize", zeEventHostSynchronize, slot->ev, UINT64_MAX);
    release(e, slot);
    return st;
}

/* ---- copies and fills -------------------------------------------------------------------- */

/* The stream's staging memory for pageable copies, at least size bytes. The previous block is
 * free to go: the copy that used it was waited for, or it was set aside. */
static acg_status staging_get(ze_stream *s, size_t size, const char *fn) {
    if (s->staging != NULL && s->staging_size >= size) {
        return ACG_OK;
    }
    if (s->staging != NULL) {
        ZE_RELEASE(s->dev, fn, zeMemFree, s->dev->ctx, s->staging);
        s->staging = NULL;
    }
    size_t want = size < 65536 ? 65536 : size;
    ze_host_mem_alloc_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    acg_status st = ZE(fn, zeMemAllocHost, s->dev->ctx, &desc, want, 64, &s->staging);
    s->staging_size = st == ACG_OK ? want : 0;
    return st;
}

/* Sets the staging memory aside when a copy that uses it may still be queued: it is released
 * with the stream. */
static void staging_set_aside(ze_stream *s, const char *fn) {
    if (acg__grow((void **)&s->aside, &s->cap_aside, s->n_aside + 1, sizeof *s->aside)) {
        s->aside[s->n_aside++] = s->staging;
    } else {
        atomic_fetch_add(&s->dev->leaked, 1); /* left to the driver */
        acg__log(ACG_LOG_WARN, "%s: out of memory: a staging block is left to the driver", fn);
    }
    s->staging = NULL;
    s->staging_size = 0;
}

/* Appends a copy and, for pageable host memory, stages it through host memory of the driver's
 * (a device need not read or write memory the driver did not allocate) and waits for it. The
 * core calls one stream's copy slots one at a time, so the staging memory is the stream's. */
static acg_status copy(ze_stream *s, void *dst, const void *src, size_t size, void *pageable_dst,
                       const void *pageable_src, const char *fn) {
    bool staged = pageable_dst != NULL || pageable_src != NULL;
    if (staged) {
        acg_status st = staging_get(s, size, fn);
        if (st != ACG_OK) {
            return st;
        }
        if (pageable_src != NULL) {
            memcpy(s->staging, pageable_src, size);
            src = s->staging;
        } else {
            dst = s->staging;
        }
    }
    acg_status st = acg__ze_stream_begin(s, fn);
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListAppendMemoryCopy, s->list, dst, src, size, NULL, 0, NULL);
    }
    st = acg__ze_stream_end(s, st);
    if (staged && st == ACG_OK) {
        if ((st = acg__ze_stream_drain(s, fn)) != ACG_OK) {
            staging_set_aside(s, fn); /* the copy may still be queued */
        } else if (pageable_dst != NULL) {
            memcpy(pageable_dst, s->staging, size);
        }
    }
    return st;
}

acg_status acg__ze_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            const void *src, size_t size, bool src_pinned) {
    char *d = (char *)acg__ze_mem(dst) + dst_off;
    return copy(acg__ze_stream(stream), d, src, size, NULL, src_pinned ? NULL : src,
                "acg_copy_h2d");
}

acg_status acg__ze_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                            size_t size, bool dst_pinned) {
    const char *s = (const char *)acg__ze_mem(src) + src_off;
    return copy(acg__ze_stream(stream), dst, s, size, dst_pinned ? NULL : dst, NULL,
                "acg_copy_d2h");
}

acg_status acg__ze_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            acg__bk_mem *src, size_t src_off, size_t size) {
    return copy(acg__ze_stream(stream), (char *)acg__ze_mem(dst) + dst_off,
                (const char *)acg__ze_mem(src) + src_off, size, NULL, NULL, "acg_copy_d2d");
}

acg_status acg__ze_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                        uint32_t pattern, uint32_t pattern_size) {
    static const char fn[] = "acg_fill";
    ze_stream *s = acg__ze_stream(stream);
    acg_status st = acg__ze_stream_begin(s, fn);
    if (st == ACG_OK) {
        /* The pattern's bytes as they lie in memory: the low pattern_size bytes of a
         * little-endian word. */
        st = ZE(fn, zeCommandListAppendMemoryFill, s->list, (char *)acg__ze_mem(dst) + off,
                &pattern, pattern_size, size, NULL, 0, NULL);
    }
    return acg__ze_stream_end(s, st);
}

/* In queue mode the stream has no list an engine could append to (acg closes and executes
 * each one), so none is given. */
acg_status acg__ze_stream_get_native(acg__bk_stream *stream, acg_native_handle *out) {
    ze_stream *s = acg__ze_stream(stream);
    out->kind = s->queue != NULL ? ACG_NATIVE_NONE : ACG_NATIVE_ZE_COMMAND_LIST;
    out->handle = s->queue != NULL ? NULL : s->list;
    return ACG_OK;
}
