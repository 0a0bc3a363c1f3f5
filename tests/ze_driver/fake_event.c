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

static void pool_free(void *obj) {
    struct fake_pool *pool = obj;
    fake__obj_remove(&pool->obj);
    free(pool->slot);
    free(pool);
}

ze_result_t fake_zeEventPoolCreate(ze_context_handle_t hContext, const ze_event_pool_desc_t *desc,
                                   uint32_t numDevices, ze_device_handle_t *phDevices,
                                   ze_event_pool_handle_t *phEventPool) {
    static const char fn[] = "zeEventPoolCreate";
    FAKE_ENTER(zeEventPoolCreate);
    struct fake_context *ctx;
    struct fake_pool *pool;
    ze_result_t r;
    FAKE_CHECK(fake__lock_creation(FAKE_CONTEXT, hContext, desc, ZE_STRUCTURE_TYPE_EVENT_POOL_DESC,
                                   phEventPool, fn, (void **)&ctx),
               out);
    FAKE_FAIL_IF(desc->flags > 0x7, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    FAKE_FAIL_IF(desc->count == 0 || (phDevices == NULL && numDevices > 0),
                 ZE_RESULT_ERROR_INVALID_SIZE, out);
    uint32_t devices = numDevices == 0 ? FAKE_ALL_DEVICES : 0;
    for (uint32_t i = 0; i < numDevices; i++) {
        struct fake_device *dev;
        FAKE_CHECK(fake__device(phDevices[i], &dev), out);
        devices |= fake__bit(dev);
    }
    FAKE_FAIL_IF((pool = fake__obj_new(sizeof *pool, FAKE_POOL)) == NULL,
                 ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    if ((pool->slot = calloc(desc->count, sizeof *pool->slot)) == NULL) {
        pool_free(pool);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    pool->ctx = ctx;
    pool->devices = devices;
    pool->flags = desc->flags;
    pool->count = desc->count;
    *phEventPool = (ze_event_pool_handle_t)(void *)pool;
out:
    return fake__unlock(r);
}

/* (lock held) Why a pool may not be destroyed yet (fake__destroy). */
static int pool_busy(void *obj, const char *fn) {
    const struct fake_pool *pool = obj;
    if (pool->events > 0) {
        fake__violation("%s: the pool still has %ld events", fn, pool->events);
    }
    return pool->events > 0;
}

ze_result_t fake_zeEventPoolDestroy(ze_event_pool_handle_t hEventPool) {
    FAKE_ENTER(zeEventPoolDestroy);
    return fake__destroy(FAKE_POOL, hEventPool, "zeEventPoolDestroy", pool_busy, pool_free);
}

/* ---- events --------------------------------------------------------------------------------- */

ze_result_t fake_zeEventCreate(ze_event_pool_handle_t hEventPool, const ze_event_desc_t *desc,
                               ze_event_handle_t *phEvent) {
    static const char fn[] = "zeEventCreate";
    FAKE_ENTER(zeEventCreate);
    struct fake_pool *pool;
    ze_result_t r;
    FAKE_CHECK(fake__lock_creation(FAKE_POOL, hEventPool, desc, ZE_STRUCTURE_TYPE_EVENT_DESC,
                                   phEvent, fn, (void **)&pool),
               out);
    FAKE_FAIL_IF(desc->signal > 0x7 || desc->wait > 0x7, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    /* The code for an index out of range was not verified against Intel's driver. */
    FAKE_FAIL_IF(desc->index >= pool->count, ZE_RESULT_ERROR_INVALID_ARGUMENT, out);
    if (pool->slot[desc->index] != NULL) {
        fake__violation("%s: index %u of the pool is already an event's", fn, desc->index);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    struct fake_event *e = fake__obj_new(sizeof *e, FAKE_EVENT);
    FAKE_FAIL_IF(e == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    e->pool = pool;
    e->index = desc->index;
    pool->slot[desc->index] = e;
    pool->events++;
    *phEvent = (ze_event_handle_t)(void *)e;
out:
    return fake__unlock(r);
}

static void event_free(void *obj) {
    struct fake_event *e = obj;
    e->pool->slot[e->index] = NULL;
    e->pool->events--;
    fake__obj_remove(&e->obj);
    free(e);
}

/* (lock held) Why an event may not be destroyed yet (fake__destroy). */
static int event_busy(void *obj, const char *fn) {
    const struct fake_event *e = obj;
    if (e->obj.pending == 0 && e->obj.waiters == 0) {
        return 0;
    }
    fake__violation("%s: %ld pending commands and %ld host threads still use the event", fn,
                    e->obj.pending, e->obj.waiters);
    return 1;
}

ze_result_t fake_zeEventDestroy(ze_event_handle_t hEvent) {
    FAKE_ENTER(zeEventDestroy);
    return fake__destroy(FAKE_EVENT, hEvent, "zeEventDestroy", event_busy, event_free);
}

/* (lock held; waits) Waits until the flag *signalled of obj (an event or a fence) is set or the
 * timeout passes, the host thread counted as one of obj's waiters: SUCCESS, NOT_READY, or
 * DEVICE_LOST while it is not set and a device of the mask is lost. A timeout of 0 queries. */
static ze_result_t host_wait(struct fake_obj *obj, const int *signalled, uint32_t devices,
                             uint64_t timeout) {
    struct timespec deadline;
    int forever;
    fake__deadline(timeout, &deadline, &forever);
    ze_result_t r = ZE_RESULT_SUCCESS;
    obj->waiters++;
    while (!*signalled && r == ZE_RESULT_SUCCESS) {
        if (fake__lost(devices)) {
            r = ZE_RESULT_ERROR_DEVICE_LOST;
        } else if (timeout == 0 || fake__g.unloading ||
                   (fake__wait(forever ? NULL : &deadline) && !*signalled &&
                    !fake__lost(devices))) {
            r = ZE_RESULT_NOT_READY;
        }
    }
    obj->waiters--;
    return r;
}

/* (takes the lock, held on return whatever the result) The preamble of a host operation on an
 * event: its pool must be host-visible, or the host would never see it signalled (a violation;
 * the code is the one the entry points list for an event in a bad state). */
static ze_result_t lock_host_event(ze_event_handle_t h, const char *fn, struct fake_event **out) {
    ze_result_t r = fake__lock_object(FAKE_EVENT, h, fn, (void **)out);
    if (r == ZE_RESULT_SUCCESS && !((*out)->pool->flags & ZE_EVENT_POOL_FLAG_HOST_VISIBLE)) {
        fake__violation("%s: the event's pool is not ZE_EVENT_POOL_FLAG_HOST_VISIBLE", fn);
        r = ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
    }
    return r;
}

/* Which host operation event_wait does. */
enum event_op {
    EVENT_QUERY,       /* zeEventQueryStatus: a poll */
    EVENT_SYNCHRONIZE, /* zeEventHostSynchronize: a wait */
};

/* zeEventHostSynchronize, and zeEventQueryStatus (a timeout of 0): as host_wait. An event whose
 * latest signal a capture still going on recorded gives a synchronization
 * GRAPH_CAPTURE_UNSUPPORTED, as the graph extension says: that signal comes at a replay. */
static ze_result_t event_wait(ze_event_handle_t hEvent, uint64_t timeout, enum event_op op,
                              const char *fn) {
    struct fake_event *e;
    ze_result_t r = lock_host_event(hEvent, fn, &e);
    if (r == ZE_RESULT_SUCCESS && op == EVENT_SYNCHRONIZE &&
        fake__graph_capturing(&e->capture) != NULL) {
        r = ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = host_wait(&e->obj, &e->signalled, e->pool->devices, timeout);
    }
    return fake__unlock(r);
}

ze_result_t fake_zeEventHostSynchronize(ze_event_handle_t hEvent, uint64_t timeout) {
    FAKE_ENTER(zeEventHostSynchronize);
    return event_wait(hEvent, timeout, EVENT_SYNCHRONIZE, "zeEventHostSynchronize");
}

ze_result_t fake_zeEventQueryStatus(ze_event_handle_t hEvent) {
    FAKE_ENTER(zeEventQueryStatus);
    return event_wait(hEvent, 0, EVENT_QUERY, "zeEventQueryStatus");
}

ze_result_t fake_zeEventHostReset(ze_event_handle_t hEvent) {
    FAKE_ENTER(zeEventHostReset);
    struct fake_event *e;
    ze_result_t r = lock_host_event(hEvent, "zeEventHostReset", &e);
    if (r == ZE_RESULT_SUCCESS) {
        e->signalled = 0;
    }
    return fake__unlock(r);
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
    if ((cmd->waits = calloc(n, sizeof *cmd->waits)) == NULL) {
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    cmd->n_waits = n;
    for (uint32_t i = 0; i < n; i++) {
        ze_result_t r = fake__event_ref(events[i], ctx, fn, &cmd->waits[i]);
        if (r != ZE_RESULT_SUCCESS) {
            return r; /* the list is the command's, freed with it */
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* ---- fences --------------------------------------------------------------------------------- */

ze_result_t fake_zeFenceCreate(ze_command_queue_handle_t hCommandQueue, const ze_fence_desc_t *desc,
                               ze_fence_handle_t *phFence) {
    FAKE_ENTER(zeFenceCreate);
    struct fake_queue *q;
    ze_result_t r;
    FAKE_CHECK(fake__lock_creation(FAKE_QUEUE, hCommandQueue, desc, ZE_STRUCTURE_TYPE_FENCE_DESC,
                                   phFence, "zeFenceCreate", (void **)&q),
               out);
    FAKE_FAIL_IF(desc->flags > ZE_FENCE_FLAG_SIGNALED, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    struct fake_fence *f = fake__obj_new(sizeof *f, FAKE_FENCE);
    FAKE_FAIL_IF(f == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    f->queue = q;
    f->signalled = (desc->flags & ZE_FENCE_FLAG_SIGNALED) != 0;
    q->fences++;
    *phFence = (ze_fence_handle_t)(void *)f;
out:
    return fake__unlock(r);
}

static void fence_free(void *obj) {
    struct fake_fence *f = obj;
    f->queue->fences--;
    fake__obj_remove(&f->obj);
    free(f);
}

/* (lock held) Why a fence may not be destroyed yet (fake__destroy). */
static int fence_busy(void *obj, const char *fn) {
    const struct fake_fence *f = obj;
    int busy = f->obj.pending > 0 || f->obj.waiters > 0;
    if (busy) {
        fake__violation("%s: an execution or a host thread still uses the fence", fn);
    }
    return busy;
}

ze_result_t fake_zeFenceDestroy(ze_fence_handle_t hFence) {
    FAKE_ENTER(zeFenceDestroy);
    return fake__destroy(FAKE_FENCE, hFence, "zeFenceDestroy", fence_busy, fence_free);
}

/* zeFenceHostSynchronize, and zeFenceQueryStatus (a timeout of 0): SUCCESS once signalled,
 * NOT_READY before (DEVICE_LOST once the device is lost). */
static ze_result_t fence_wait(ze_fence_handle_t hFence, uint64_t timeout, const char *fn) {
    struct fake_fence *f;
    ze_result_t r = fake__lock_object(FAKE_FENCE, hFence, fn, (void **)&f);
    if (r == ZE_RESULT_SUCCESS) {
        r = host_wait(&f->obj, &f->signalled, fake__bit(f->queue->dev), timeout);
    }
    return fake__unlock(r);
}

ze_result_t fake_zeFenceHostSynchronize(ze_fence_handle_t hFence, uint64_t timeout) {
    FAKE_ENTER(zeFenceHostSynchronize);
    return fence_wait(hFence, timeout, "zeFenceHostSynchronize");
}

ze_result_t fake_zeFenceQueryStatus(ze_fence_handle_t hFence) {
    FAKE_ENTER(zeFenceQueryStatus);
    return fence_wait(hFence, 0, "zeFenceQueryStatus");
}

/* A fence an execution will still signal is not reset: Intel's driver would then never report
 * it signalled, and a wait on it would hang (a violation; the code is this driver's choice). */
ze_result_t fake_zeFenceReset(ze_fence_handle_t hFence) {
    static const char fn[] = "zeFenceReset";
    FAKE_ENTER(zeFenceReset);
    struct fake_fence *f;
    ze_result_t r = fake__lock_object(FAKE_FENCE, hFence, fn, (void **)&f);
    if (r == ZE_RESULT_SUCCESS && f->obj.pending > 0) {
        fake__violation("%s: an execution the fence waits for is still pending", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS) {
        f->signalled = 0;
    }
    return fake__unlock(r);
}

/* ---- unload --------------------------------------------------------------------------------- */

void fake__events_unload(void) {
    fake__free_all(FAKE_EVENT, event_free);
    fake__free_all(FAKE_POOL, pool_free);
    fake__free_all(FAKE_FENCE, fence_free);
}
