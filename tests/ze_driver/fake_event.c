/* fake_event.c — the Level Zero test driver's event pools, events and fences.
 *
 * An event is a flag: commands signal it when they complete and reset it when they run an
 * AppendEventReset; a command waiting on it blocks its list's worker until it is set. A fence
 * is a flag a queue's execution sets once its lists ran. Every wait sleeps on one condition
 * variable (fake__g.progress), broadcast whenever anything is signalled: simple, and never a
 * missed wake-up. Pending commands hold their events and fences (fake_obj.pending), so an
 * object is never freed under them: destroying it then is refused.
 */
#include "fake_ze_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- pools ---------------------------------------------------------------------------------- */

ze_result_t fake_zeEventPoolCreate(ze_context_handle_t hContext, const ze_event_pool_desc_t *desc,
                                   uint32_t numDevices, ze_device_handle_t *phDevices,
                                   ze_event_pool_handle_t *phEventPool) {
    static const char fn[] = "zeEventPoolCreate";
    FAKE_ENTER(zeEventPoolCreate);
    struct fake_context *ctx;
    struct fake_pool *pool = NULL;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_CONTEXT, hContext, fn, (void **)&ctx), out);
    FAKE_FAIL_IF(desc == NULL || phEventPool == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, fn, "desc"), out);
    FAKE_FAIL_IF(desc->flags > 0x7, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    FAKE_FAIL_IF(desc->count == 0 || (phDevices == NULL && numDevices > 0),
                 ZE_RESULT_ERROR_INVALID_SIZE, out);
    uint32_t devices = numDevices == 0 ? FAKE_ALL_DEVICES : 0;
    for (uint32_t i = 0; i < numDevices; i++) {
        struct fake_device *dev;
        FAKE_CHECK(fake__device(phDevices[i], &dev), out);
        devices |= fake__bit(dev);
    }
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    pool = calloc(1, sizeof *pool);
    if (pool == NULL || (pool->slot = calloc(desc->count, sizeof *pool->slot)) == NULL) {
        goto out_free;
    }
    pool->ctx = ctx;
    pool->devices = devices;
    pool->flags = desc->flags;
    pool->count = desc->count;
    if (fake__obj_add(&pool->obj, FAKE_POOL) != 0) {
        goto out_free;
    }
    *phEventPool = (ze_event_pool_handle_t)(void *)pool;
    r = ZE_RESULT_SUCCESS;
    goto out;
out_free:
    if (pool != NULL) {
        free(pool->slot);
    }
    free(pool);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

static void pool_free(struct fake_pool *pool) {
    fake__obj_remove(&pool->obj);
    free(pool->slot);
    free(pool);
}

ze_result_t fake_zeEventPoolDestroy(ze_event_pool_handle_t hEventPool) {
    static const char fn[] = "zeEventPoolDestroy";
    FAKE_ENTER(zeEventPoolDestroy);
    struct fake_pool *pool;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_POOL, hEventPool, fn, (void **)&pool);
    if (r == ZE_RESULT_SUCCESS && pool->events > 0) {
        fake__violation("%s: the pool still has %ld events", fn, pool->events);
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        uint32_t devices = pool->devices;
        pool_free(pool);
        r = fake__released(devices);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- events --------------------------------------------------------------------------------- */

ze_result_t fake_zeEventCreate(ze_event_pool_handle_t hEventPool, const ze_event_desc_t *desc,
                               ze_event_handle_t *phEvent) {
    static const char fn[] = "zeEventCreate";
    FAKE_ENTER(zeEventCreate);
    struct fake_pool *pool;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_POOL, hEventPool, fn, (void **)&pool), out);
    FAKE_FAIL_IF(desc == NULL || phEvent == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_EVENT_DESC, fn, "desc"), out);
    FAKE_FAIL_IF(desc->signal > 0x7 || desc->wait > 0x7, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    /* The code for an index out of range was not verified against Intel's driver. */
    FAKE_FAIL_IF(desc->index >= pool->count, ZE_RESULT_ERROR_INVALID_ARGUMENT, out);
    if (pool->slot[desc->index] != NULL) {
        fake__violation("%s: index %u of the pool is already an event's", fn, desc->index);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    struct fake_event *e = calloc(1, sizeof *e);
    if (e == NULL || fake__obj_add(&e->obj, FAKE_EVENT) != 0) {
        free(e);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    e->pool = pool;
    e->index = desc->index;
    pool->slot[desc->index] = e;
    pool->events++;
    *phEvent = (ze_event_handle_t)(void *)e;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

static void event_free(struct fake_event *e) {
    e->pool->slot[e->index] = NULL;
    e->pool->events--;
    fake__obj_remove(&e->obj);
    free(e);
}

ze_result_t fake_zeEventDestroy(ze_event_handle_t hEvent) {
    static const char fn[] = "zeEventDestroy";
    FAKE_ENTER(zeEventDestroy);
    struct fake_event *e;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_EVENT, hEvent, fn, (void **)&e);
    if (r == ZE_RESULT_SUCCESS && (e->obj.pending > 0 || e->obj.waiters > 0)) {
        fake__violation("%s: %ld pending commands and %ld host threads still use the event", fn,
                        e->obj.pending, e->obj.waiters);
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        uint32_t devices = e->pool->devices;
        event_free(e);
        r = fake__released(devices);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* (lock held) The preamble of a host operation on an event: its pool must be host-visible, or
 * the host would never see it signalled (a violation; the code is the one the entry points
 * list for an event in a bad state). */
static ze_result_t host_event(ze_event_handle_t h, const char *fn, struct fake_event **out) {
    ze_result_t r = fake__ready_lookup(FAKE_EVENT, h, fn, (void **)out);
    if (r == ZE_RESULT_SUCCESS && !((*out)->pool->flags & ZE_EVENT_POOL_FLAG_HOST_VISIBLE)) {
        fake__violation("%s: the event's pool is not ZE_EVENT_POOL_FLAG_HOST_VISIBLE", fn);
        r = ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
    }
    return r;
}

/* An event whose latest signal a capture still going on recorded gives
 * GRAPH_CAPTURE_UNSUPPORTED, as the graph extension says: that signal comes at a replay. */
ze_result_t fake_zeEventHostSynchronize(ze_event_handle_t hEvent, uint64_t timeout) {
    FAKE_ENTER(zeEventHostSynchronize);
    struct fake_event *e;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = host_event(hEvent, "zeEventHostSynchronize", &e);
    if (r == ZE_RESULT_SUCCESS && fake__graph_capturing(&e->capture) != NULL) {
        r = ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    if (r == ZE_RESULT_SUCCESS) {
        struct timespec deadline;
        int forever;
        fake__deadline(timeout, &deadline, &forever);
        e->obj.waiters++;
        while (!e->signalled && r == ZE_RESULT_SUCCESS) {
            if (fake__lost(e->pool->devices)) {
                r = ZE_RESULT_ERROR_DEVICE_LOST;
            } else if (timeout == 0 || fake__g.unloading ||
                       (fake__wait(forever ? NULL : &deadline) && !e->signalled &&
                        !fake__lost(e->pool->devices))) {
                r = ZE_RESULT_NOT_READY;
            }
        }
        e->obj.waiters--;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeEventQueryStatus(ze_event_handle_t hEvent) {
    FAKE_ENTER(zeEventQueryStatus);
    struct fake_event *e;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = host_event(hEvent, "zeEventQueryStatus", &e);
    if (r == ZE_RESULT_SUCCESS && !e->signalled) {
        r = fake__lost(e->pool->devices) ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_NOT_READY;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeEventHostReset(ze_event_handle_t hEvent) {
    FAKE_ENTER(zeEventHostReset);
    struct fake_event *e;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = host_event(hEvent, "zeEventHostReset", &e);
    if (r == ZE_RESULT_SUCCESS) {
        e->signalled = 0;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake__event_ref(ze_event_handle_t h, struct fake_context *ctx, const char *fn,
                            struct fake_ref *out) {
    struct fake_event *e;
    ze_result_t r = fake__lookup(FAKE_EVENT, h, fn, (void **)&e);
    if (r != ZE_RESULT_SUCCESS) {
        return r;
    }
    if (e->pool->ctx != ctx) {
        fake__violation("%s: an event of another context than the command list's", fn);
        return ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
    }
    *out = fake__ref(&e->obj);
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake__wait_refs(uint32_t n, ze_event_handle_t *events, struct fake_context *ctx,
                            const char *fn, struct fake_cmd *cmd) {
    if (n == 0) {
        return ZE_RESULT_SUCCESS;
    }
    if (events == NULL) {
        return ZE_RESULT_ERROR_INVALID_SIZE;
    }
    struct fake_ref *refs = calloc(n, sizeof *refs);
    if (refs == NULL) {
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++) {
        ze_result_t r = fake__event_ref(events[i], ctx, fn, &refs[i]);
        if (r != ZE_RESULT_SUCCESS) {
            free(refs);
            return r;
        }
    }
    cmd->waits = refs;
    cmd->n_waits = n;
    return ZE_RESULT_SUCCESS;
}

/* ---- fences --------------------------------------------------------------------------------- */

ze_result_t fake_zeFenceCreate(ze_command_queue_handle_t hCommandQueue, const ze_fence_desc_t *desc,
                               ze_fence_handle_t *phFence) {
    static const char fn[] = "zeFenceCreate";
    FAKE_ENTER(zeFenceCreate);
    struct fake_queue *q;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_QUEUE, hCommandQueue, fn, (void **)&q), out);
    FAKE_FAIL_IF(desc == NULL || phFence == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_FENCE_DESC, fn, "desc"), out);
    FAKE_FAIL_IF(desc->flags > ZE_FENCE_FLAG_SIGNALED, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    struct fake_fence *f = calloc(1, sizeof *f);
    if (f == NULL || fake__obj_add(&f->obj, FAKE_FENCE) != 0) {
        free(f);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    f->queue = q;
    f->signalled = (desc->flags & ZE_FENCE_FLAG_SIGNALED) != 0;
    q->fences++;
    *phFence = (ze_fence_handle_t)(void *)f;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

static void fence_free(struct fake_fence *f) {
    f->queue->fences--;
    fake__obj_remove(&f->obj);
    free(f);
}

ze_result_t fake_zeFenceDestroy(ze_fence_handle_t hFence) {
    static const char fn[] = "zeFenceDestroy";
    FAKE_ENTER(zeFenceDestroy);
    struct fake_fence *f;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_FENCE, hFence, fn, (void **)&f);
    if (r == ZE_RESULT_SUCCESS && (f->obj.pending > 0 || f->obj.waiters > 0)) {
        fake__violation("%s: an execution or a host thread still uses the fence", fn);
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        uint32_t devices = fake__bit(f->queue->dev);
        fence_free(f);
        r = fake__released(devices);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeFenceHostSynchronize(ze_fence_handle_t hFence, uint64_t timeout) {
    FAKE_ENTER(zeFenceHostSynchronize);
    struct fake_fence *f;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_FENCE, hFence, "zeFenceHostSynchronize", (void **)&f);
    if (r == ZE_RESULT_SUCCESS) {
        struct timespec deadline;
        int forever;
        fake__deadline(timeout, &deadline, &forever);
        f->obj.waiters++;
        while (!f->signalled && r == ZE_RESULT_SUCCESS) {
            if (f->queue->dev->lost) {
                r = ZE_RESULT_ERROR_DEVICE_LOST;
            } else if (timeout == 0 || fake__g.unloading ||
                       (fake__wait(forever ? NULL : &deadline) && !f->signalled &&
                        !f->queue->dev->lost)) {
                r = ZE_RESULT_NOT_READY;
            }
        }
        f->obj.waiters--;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ZE_RESULT_SUCCESS once signalled, ZE_RESULT_NOT_READY before (DEVICE_LOST once the device is
 * lost). */
ze_result_t fake_zeFenceQueryStatus(ze_fence_handle_t hFence) {
    FAKE_ENTER(zeFenceQueryStatus);
    struct fake_fence *f;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_FENCE, hFence, "zeFenceQueryStatus", (void **)&f);
    if (r == ZE_RESULT_SUCCESS && !f->signalled) {
        r = f->queue->dev->lost ? ZE_RESULT_ERROR_DEVICE_LOST : ZE_RESULT_NOT_READY;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* A fence an execution will still signal is not reset: Intel's driver would then never report
 * it signalled, and a wait on it would hang (a violation; the code is this driver's choice). */
ze_result_t fake_zeFenceReset(ze_fence_handle_t hFence) {
    static const char fn[] = "zeFenceReset";
    FAKE_ENTER(zeFenceReset);
    struct fake_fence *f;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_FENCE, hFence, fn, (void **)&f);
    if (r == ZE_RESULT_SUCCESS && f->obj.pending > 0) {
        fake__violation("%s: an execution the fence waits for is still pending", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS) {
        f->signalled = 0;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- unload --------------------------------------------------------------------------------- */

void fake__events_unload(void) {
    while (fake__g.objs[FAKE_EVENT].n > 0) {
        event_free(fake__g.objs[FAKE_EVENT].v[fake__g.objs[FAKE_EVENT].n - 1]);
    }
    while (fake__g.objs[FAKE_POOL].n > 0) {
        pool_free(fake__g.objs[FAKE_POOL].v[fake__g.objs[FAKE_POOL].n - 1]);
    }
    while (fake__g.objs[FAKE_FENCE].n > 0) {
        fence_free(fake__g.objs[FAKE_FENCE].v[fake__g.objs[FAKE_FENCE].n - 1]);
    }
}
