/* stream.c — the vulkan backend's streams and events, copies and fills.
 *
 * A stream records into its open command buffer: each piece of work follows a full memory
 * barrier, so it sees everything before it in the queue's submission order, which is the
 * stream's order. The open command buffer is submitted (flush) when an event is recorded, when
 * the stream is synchronized or queried, and when a copy must land in pageable memory before
 * the call returns; each submission waits for the events the stream was told to wait for and
 * signals the stream's timeline semaphore with the next value. An event is the timeline and the
 * value of the stream's latest submission when it was recorded (0: complete). Submitted
 * command buffers are kept until their value is reached, with the staging buffers their copies
 * read or write, the argument buffers their launches read (kernel.c) and references to the
 * timelines they wait for, then reset for reuse, argument buffers included.
 *
 * Copies from and to pinned memory copy from and to its VkBuffer (device.c); other host memory
 * goes through a staging buffer of host-visible memory, written before the call returns (h2d)
 * or read after the copy ran (d2h, which waits). A fill whose range is whole words is
 * vkCmdFillBuffer; others copy the pattern from a staging buffer. */
#include <stdio.h>
#include <string.h>

#include "vulkan.h"

/* A point a submission waits for: a timeline (referenced) reaching value. */
typedef struct vk_wait {
    vk_timeline *tl;
    uint64_t value;
} vk_wait;

/* A command buffer and what it holds until it ran. */
typedef struct vk_batch {
    VkCommandBuffer cb;
    uint64_t value; /* what its submission signals on the stream's timeline */
    vk_staging *staging;
    vk_args *args;  /* the argument blocks of its launches, the one being filled first */
    vk_wait *waits; /* (n_waits) for its submission */
    uint32_t n_waits, cap_waits;
} vk_batch;

typedef struct vk_stream {
    vk_device *dev;
    pthread_mutex_t lock; /* all below: synchronize and query may overlap the slots */
    VkCommandPool pool;
    vk_timeline *tl;
    uint64_t submitted; /* the value of the latest submission; 0: none yet */
    vk_batch open;      /* recording (open.cb begun), or open.cb VK_NULL_HANDLE */
    uint32_t n_cmds;    /* pieces of work in open.cb */
    vk_batch *flight;   /* (n_flight) submitted, not yet seen complete, oldest first */
    vk_batch *spare;    /* (n_spare) reset, for the next recording (their waits arrays kept) */
    uint32_t n_flight, n_spare;
    uint32_t n_cbs;                 /* command buffers allocated */
    uint32_t cap_flight, cap_spare; /* each at least n_cbs */
    vk_args *args_spare;            /* argument buffers of batches that ran, for the next ones */
} vk_stream;

typedef struct vk_event {
    pthread_mutex_t lock; /* a record may overlap the event's waits */
    vk_timeline *tl;      /* NULL until recorded */
    uint64_t value;
} vk_event;

static inline vk_stream *vstream(acg__bk_stream *s) { return (vk_stream *)s; }
static inline vk_event *vevent(acg__bk_event *e) { return (vk_event *)e; }

/* ---- timelines ------------------------------------------------------------------------------- */

static acg_status timeline_new(vk_device *d, vk_timeline **out, const char *fn) {
    vk_timeline *t = acg__calloc(1, sizeof *t);
    if (t == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    const VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                            .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    const VkSemaphoreCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                        .pNext = &type};
    acg_status st = ACG_OK;
    VK_CHECK(d->vkCreateSemaphore(d->device, &info, NULL, &t->sem), fn, out);
    t->dev = d;
    atomic_init(&t->refs, 1);
    *out = t;
    return ACG_OK;
out:
    acg__free(t);
    return st;
}

static vk_timeline *timeline_ref(vk_timeline *t) {
    atomic_fetch_add(&t->refs, 1);
    return t;
}

void acg__vk_timeline_unref(vk_timeline *t) {
    if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1) {
        acg__vk_semaphore_destroy(t->dev, t->sem, atomic_load(&t->waited));
        acg__free(t);
    }
}

/* ACG_OK when t reached value, ACG_NOT_READY when not; with wait, blocks until it does. */
static acg_status timeline_reached(vk_timeline *t, uint64_t value, bool wait, const char *fn) {
    vk_device *d = t->dev;
    acg_status st = ACG_OK;
    if (!wait) {
        uint64_t now = 0;
        VK_CHECK(d->vkGetSemaphoreCounterValue(d->device, t->sem, &now), fn, out);
        return now >= value ? ACG_OK : ACG_NOT_READY;
    }
    const VkSemaphoreWaitInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                      .semaphoreCount = 1,
                                      .pSemaphores = &t->sem,
                                      .pValues = &value};
    VK_CHECK(d->vkWaitSemaphores(d->device, &info, UINT64_MAX), fn, out);
out:
    return st;
}

/* ---- recording and submitting ---------------------------------------------------------------- */

acg_status acg__vk_staging_new(vk_device *d, size_t size, vk_staging **list, vk_staging **out,
                               const char *fn) {
    vk_staging *g = acg__calloc(1, sizeof *g);
    if (g == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    acg_status st = acg__vk_buffer_make(
        d, size > 0 ? size : 1, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        d->host_type, true, &g->buffer, &g->memory, &g->host, fn);
    if (st != ACG_OK) {
        acg__free(g);
        return st;
    }
    g->next = *list;
    *list = g;
    *out = g;
    return ACG_OK;
}

void acg__vk_staging_free(vk_device *d, vk_staging **list) {
    for (vk_staging *g = *list; g != NULL;) {
        vk_staging *next = g->next;
        acg__vk_buffer_unmake(d, g->buffer, g->memory);
        acg__free(g);
        g = next;
    }
    *list = NULL;
}

static void batch_release(vk_stream *s, vk_batch *b) {
    acg__vk_staging_free(s->dev, &b->staging);
    while (b->args != NULL) { /* kept for the next recordings: no allocation in steady state */
        vk_args *a = b->args;
        b->args = a->next;
        a->used = 0;
        a->next = s->args_spare;
        s->args_spare = a;
    }
    for (uint32_t i = 0; i < b->n_waits; i++) {
        acg__vk_timeline_unref(b->waits[i].tl);
    }
    b->n_waits = 0;
}

/* Frees a command buffer and its waits array, for good. */
static void batch_drop(vk_stream *s, vk_batch *b) {
    s->dev->vkFreeCommandBuffers(s->dev->device, s->pool, 1, &b->cb);
    acg__free(b->waits);
    memset(b, 0, sizeof *b);
    s->n_cbs--;
}

/* Reuses the command buffers of submissions the timeline passed (under s->lock); flight and
 * spare hold every command buffer, so this allocates nothing. */
static void retire(vk_stream *s) {
    uint64_t done = 0;
    if (s->n_flight == 0 ||
        s->dev->vkGetSemaphoreCounterValue(s->dev->device, s->tl->sem, &done) != VK_SUCCESS) {
        return;
    }
    uint32_t k = 0;
    while (k < s->n_flight && s->flight[k].value <= done) {
        vk_batch *b = &s->flight[k];
        batch_release(s, b);
        if (s->dev->vkResetCommandBuffer(b->cb, 0) == VK_SUCCESS) {
            b->value = 0;
            s->spare[s->n_spare++] = *b;
        } else {
            batch_drop(s, b);
        }
        k++;
    }
    memmove(s->flight, s->flight + k, (s->n_flight - k) * sizeof *s->flight);
    s->n_flight -= k;
}

/* Begins the open command buffer if none is (under s->lock). */
static acg_status begin(vk_stream *s, const char *fn) {
    if (s->open.cb != VK_NULL_HANDLE) {
        return ACG_OK;
    }
    vk_device *d = s->dev;
    acg_status st = ACG_OK;
    retire(s);
    if (s->n_spare > 0) {
        s->open = s->spare[--s->n_spare];
    } else {
        /* Room for one more command buffer in flight and in spare first, so that neither a
         * submission nor a retirement needs memory. */
        if (!acg__grow((void **)&s->flight, &s->cap_flight, s->n_cbs + 1, sizeof *s->flight) ||
            !acg__grow((void **)&s->spare, &s->cap_spare, s->n_cbs + 1, sizeof *s->spare)) {
            return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        const VkCommandBufferAllocateInfo info = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            .commandPool = s->pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            .commandBufferCount = 1};
        VK_CHECK(d->vkAllocateCommandBuffers(d->device, &info, &s->open.cb), fn, out);
        s->n_cbs++;
    }
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(d->vkBeginCommandBuffer(s->open.cb, &bi), fn, out_cb);
    s->n_cmds = 0;
    return ACG_OK;
out_cb:
    batch_drop(s, &s->open);
    return st;
out:
    s->open.cb = VK_NULL_HANDLE;
    return st;
}

/* A barrier from every earlier access of any kind to every later one (dst_stage, dst_access). */
static void barrier(vk_stream *s, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
    const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                                .dstAccessMask = dst_access};
    VK_RECORD(s->dev->vkCmdPipelineBarrier(s->open.cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                           dst_stage, 0, 1, &mb, 0, NULL, 0, NULL));
}

/* Opens the command buffer for one more piece of work, after a barrier (under s->lock). */
static acg_status work(vk_stream *s, const char *fn) {
    acg_status st = begin(s, fn);
    if (st == ACG_OK) {
        barrier(s, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
        s->n_cmds++;
    }
    return st;
}

/* Submits the open command buffer when it holds work or waits (under s->lock). */
static acg_status flush(vk_stream *s, const char *fn) {
    if (s->open.cb == VK_NULL_HANDLE || (s->n_cmds == 0 && s->open.n_waits == 0)) {
        return ACG_OK;
    }
    vk_device *d = s->dev;
    acg_status st = ACG_OK;
    /* What the work wrote is the host's to read once the timeline says it ran. */
    barrier(s, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT);
    VK_CHECK(d->vkEndCommandBuffer(s->open.cb), fn, out);
    enum { MAX_WAITS_ON_STACK = 16 };
    VkSemaphore wait_sems[MAX_WAITS_ON_STACK];
    uint64_t wait_values[MAX_WAITS_ON_STACK];
    VkPipelineStageFlags stages[MAX_WAITS_ON_STACK];
    VkSemaphore *ws = wait_sems;
    uint64_t *wv = wait_values;
    VkPipelineStageFlags *wst = stages;
    const uint32_t n = s->open.n_waits;
    if (n > MAX_WAITS_ON_STACK) {
        ws = acg__calloc(n, sizeof *ws);
        wv = acg__calloc(n, sizeof *wv);
        wst = acg__calloc(n, sizeof *wst);
        if (ws == NULL || wv == NULL || wst == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out_free;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        ws[i] = s->open.waits[i].tl->sem;
        wv[i] = s->open.waits[i].value;
        wst[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    }
    const uint64_t value = s->submitted + 1;
    const VkTimelineSemaphoreSubmitInfo ti = {.sType =
                                                  VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                              .waitSemaphoreValueCount = n,
                                              .pWaitSemaphoreValues = wv,
                                              .signalSemaphoreValueCount = 1,
                                              .pSignalSemaphoreValues = &value};
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                             .pNext = &ti,
                             .waitSemaphoreCount = n,
                             .pWaitSemaphores = ws,
                             .pWaitDstStageMask = wst,
                             .commandBufferCount = 1,
                             .pCommandBuffers = &s->open.cb,
                             .signalSemaphoreCount = 1,
                             .pSignalSemaphores = &s->tl->sem};
    pthread_mutex_lock(&d->queue_lock);
    VkResult r = d->vkQueueSubmit(d->queue, 1, &si, VK_NULL_HANDLE);
    if (r != VK_SUCCESS) {
        /* Nothing of a failed submission runs, as Vulkan says; waiting for the queue makes sure
         * of it (and tells the validation layer, which otherwise takes its semaphores and
         * command buffer for in use) before the recording is dropped. */
        d->vkQueueWaitIdle(d->queue);
    }
    pthread_mutex_unlock(&d->queue_lock);
    if (r != VK_SUCCESS) {
        st = acg__vk_check(r, fn, "vkQueueSubmit");
        goto out_free;
    }
    s->submitted = value;
    s->open.value = value;
    s->flight[s->n_flight++] = s->open; /* room was made when it was allocated */
    memset(&s->open, 0, sizeof s->open);
    s->n_cmds = 0;
out_free:
    if (ws != wait_sems) {
        acg__free(ws);
        acg__free(wv);
        acg__free(wst);
    }
    if (st == ACG_OK) {
        return ACG_OK;
    }
out:
    /* The recording is lost: its work never runs. */
    batch_release(s, &s->open);
    batch_drop(s, &s->open);
    s->n_cmds = 0;
    return st;
}

/* A staging buffer of size bytes for the open command buffer's copies (under s->lock). */
static acg_status staging(vk_stream *s, size_t size, vk_staging **out, const char *fn) {
    return acg__vk_staging_new(s->dev, size, &s->open.staging, out, fn);
}

/* ---- streams --------------------------------------------------------------------------------- */

acg_status acg__vk_stream_create(acg__bk_device *dev, acg__bk_stream **out) {
    static const char fn[] = "acg_stream_create";
    vk_device *d = vdev(dev);
    vk_stream *s = acg__calloc(1, sizeof *s);
    if (s == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    s->dev = d;
    acg_status st = ACG_OK;
    const VkCommandPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                          .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                          .queueFamilyIndex = d->phys->family};
    VK_CHECK(d->vkCreateCommandPool(d->device, &info, NULL, &s->pool), fn, out_free);
    if ((st = timeline_new(d, &s->tl, fn)) != ACG_OK) {
        goto out_pool;
    }
    pthread_mutex_init(&s->lock, NULL);
    *out = (acg__bk_stream *)s;
    return ACG_OK;
out_pool:
    d->vkDestroyCommandPool(d->device, s->pool, NULL);
out_free:
    acg__free(s);
    return st;
}

void acg__vk_stream_destroy(acg__bk_stream *stream) {
    vk_stream *s = vstream(stream);
    vk_device *d = s->dev;
    /* The core synchronized the stream: what is left in flight ran. */
    if (s->n_flight > 0) {
        timeline_reached(s->tl, s->submitted, true, "acg_stream_destroy");
    }
    for (uint32_t i = 0; i < s->n_flight; i++) {
        batch_release(s, &s->flight[i]);
        acg__free(s->flight[i].waits);
    }
    for (uint32_t i = 0; i < s->n_spare; i++) {
        acg__free(s->spare[i].waits);
    }
    batch_release(s, &s->open);
    acg__free(s->open.waits);
    acg__vk_args_free(d, s->args_spare);
    d->vkDestroyCommandPool(d->device, s->pool, NULL); /* its command buffers too */
    acg__vk_timeline_unref(s->tl);
    acg__free(s->flight);
    acg__free(s->spare);
    pthread_mutex_destroy(&s->lock);
    acg__free(s);
}

acg_status acg__vk_stream_synchronize(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_synchronize";
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = flush(s, fn);
    const uint64_t target = s->submitted;
    pthread_mutex_unlock(&s->lock);
    if (st == ACG_OK && target > 0) {
        st = timeline_reached(s->tl, target, true, fn);
    }
    pthread_mutex_lock(&s->lock);
    retire(s);
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg__vk_stream_query(acg__bk_stream *stream) {
    static const char fn[] = "acg_stream_query";
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = flush(s, fn);
    const uint64_t target = s->submitted;
    if (st == ACG_OK && target > 0) {
        st = timeline_reached(s->tl, target, false, fn);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ---- events ---------------------------------------------------------------------------------- */

acg_status acg__vk_event_create(acg__bk_device *dev, acg__bk_event **out) {
    (void)dev;
    vk_event *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_event_create: out of memory");
    }
    pthread_mutex_init(&e->lock, NULL);
    *out = (acg__bk_event *)e;
    return ACG_OK;
}

void acg__vk_event_destroy(acg__bk_event *event) {
    vk_event *e = vevent(event);
    acg__vk_timeline_unref(e->tl);
    pthread_mutex_destroy(&e->lock);
    acg__free(e);
}

acg_status acg__vk_event_record(acg__bk_event *event, acg__bk_stream *stream) {
    vk_event *e = vevent(event);
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = flush(s, "acg_event_record");
    vk_timeline *tl = st == ACG_OK ? timeline_ref(s->tl) : NULL;
    const uint64_t value = s->submitted;
    pthread_mutex_unlock(&s->lock);
    if (st != ACG_OK) {
        return st;
    }
    pthread_mutex_lock(&e->lock);
    vk_timeline *old = e->tl;
    e->tl = tl;
    e->value = value;
    pthread_mutex_unlock(&e->lock);
    acg__vk_timeline_unref(old);
    return ACG_OK;
}

/* The event's point, its timeline referenced (NULL: complete). */
static vk_timeline *event_point(vk_event *e, uint64_t *value) {
    pthread_mutex_lock(&e->lock);
    vk_timeline *tl = e->tl != NULL && e->value > 0 ? timeline_ref(e->tl) : NULL;
    *value = e->value;
    pthread_mutex_unlock(&e->lock);
    return tl;
}

acg_status acg__vk_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event) {
    static const char fn[] = "acg_stream_wait_event";
    vk_stream *s = vstream(stream);
    uint64_t value = 0;
    vk_timeline *tl = event_point(vevent(event), &value);
    if (tl == NULL) {
        return ACG_OK;
    }
    if (tl == s->tl || timeline_reached(tl, value, false, fn) == ACG_OK) {
        /* The stream's own point, or one already reached: nothing to wait for. */
        acg__vk_timeline_unref(tl);
        return ACG_OK;
    }
    pthread_mutex_lock(&s->lock);
    acg_status st = begin(s, fn);
    if (st == ACG_OK && !acg__grow((void **)&s->open.waits, &s->open.cap_waits, s->open.n_waits + 1,
                                   sizeof *s->open.waits)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (st == ACG_OK) {
        s->open.waits[s->open.n_waits++] = (vk_wait){tl, value};
        atomic_store(&tl->waited, true);
    } else {
        acg__vk_timeline_unref(tl);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

static acg_status event_check(acg__bk_event *event, bool wait, const char *fn) {
    uint64_t value = 0;
    vk_timeline *tl = event_point(vevent(event), &value);
    if (tl == NULL) {
        return ACG_OK;
    }
    acg_status st = timeline_reached(tl, value, wait, fn);
    acg__vk_timeline_unref(tl);
    return st;
}

acg_status acg__vk_event_query(acg__bk_event *event) {
    return event_check(event, false, "acg_event_query");
}

acg_status acg__vk_event_synchronize(acg__bk_event *event) {
    return event_check(event, true, "acg_event_synchronize");
}

/* ---- copies and fills ------------------------------------------------------------------------ */

static void copy_cmd(vk_stream *s, VkBuffer src, VkDeviceSize src_off, VkBuffer dst,
                     VkDeviceSize dst_off, VkDeviceSize size) {
    const VkBufferCopy region = {.srcOffset = src_off, .dstOffset = dst_off, .size = size};
    VK_RECORD(s->dev->vkCmdCopyBuffer(s->open.cb, src, dst, 1, &region));
}

acg_status acg__vk_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            const void *src, size_t size, bool src_pinned) {
    static const char fn[] = "acg_copy_h2d";
    vk_stream *s = vstream(stream);
    VkBuffer from = VK_NULL_HANDLE;
    VkDeviceSize from_off = 0;
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, fn);
    if (st == ACG_OK && !(src_pinned && acg__vk_pinned_find(s->dev, src, size, &from, &from_off))) {
        vk_staging *g = NULL;
        if ((st = staging(s, size, &g, fn)) == ACG_OK) {
            memcpy(g->host, src, size);
            from = g->buffer;
            from_off = 0;
        }
    }
    if (st == ACG_OK) {
        copy_cmd(s, from, from_off, vmem(dst)->buffer, dst_off, size);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg__vk_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                            size_t size, bool dst_pinned) {
    static const char fn[] = "acg_copy_d2h";
    vk_stream *s = vstream(stream);
    VkBuffer to = VK_NULL_HANDLE;
    VkDeviceSize to_off = 0;
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, fn);
    if (st == ACG_OK && dst_pinned && acg__vk_pinned_find(s->dev, dst, size, &to, &to_off)) {
        copy_cmd(s, vmem(src)->buffer, src_off, to, to_off, size);
        pthread_mutex_unlock(&s->lock);
        return ACG_OK;
    }
    vk_staging *g = NULL;
    if (st == ACG_OK) {
        st = staging(s, size, &g, fn);
    }
    if (st == ACG_OK) {
        copy_cmd(s, vmem(src)->buffer, src_off, g->buffer, 0, size);
        st = flush(s, fn);
    }
    /* Pageable memory is written before the call returns. */
    if (st == ACG_OK) {
        st = timeline_reached(s->tl, s->submitted, true, fn);
    }
    if (st == ACG_OK) {
        memcpy(dst, g->host, size);
    }
    retire(s);
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg__vk_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            acg__bk_mem *src, size_t src_off, size_t size) {
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, "acg_copy_d2d");
    if (st == ACG_OK) {
        copy_cmd(s, vmem(src)->buffer, src_off, vmem(dst)->buffer, dst_off, size);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg__vk_fill_record(vk_device *d, VkCommandBuffer cb, const vk_mem *m, size_t off,
                               size_t size, uint32_t pattern, uint32_t pattern_size,
                               vk_staging **keep, const char *fn) {
    uint32_t word = pattern;
    if (pattern_size == 1) {
        word = (pattern & 0xffu) * 0x01010101u;
    } else if (pattern_size == 2) {
        word = (pattern & 0xffffu) * 0x00010001u;
    }
    if (off % 4 == 0 && size % 4 == 0) {
        VK_RECORD(d->vkCmdFillBuffer(cb, m->buffer, off, size, word));
        return ACG_OK;
    }
    /* A 1- or 2-byte pattern over a range that is not whole words, from staging memory whose
     * bytes repeat the pattern from its start, as the range's do (off is a multiple of the
     * pattern's size). */
    vk_staging *g = NULL;
    acg_status st = acg__vk_staging_new(d, size, keep, &g, fn);
    if (st == ACG_OK) {
        unsigned char *p = g->host;
        for (size_t i = 0; i < size; i++) {
            p[i] = (unsigned char)(word >> (8 * (i % 4)));
        }
        const VkBufferCopy region = {.srcOffset = 0, .dstOffset = off, .size = size};
        VK_RECORD(d->vkCmdCopyBuffer(cb, g->buffer, m->buffer, 1, &region));
    }
    return st;
}

acg_status acg__vk_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                        uint32_t pattern, uint32_t pattern_size) {
    static const char fn[] = "acg_fill";
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, fn);
    if (st == ACG_OK) {
        st = acg__vk_fill_record(s->dev, s->open.cb, vmem(dst), off, size, pattern, pattern_size,
                                 &s->open.staging, fn);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ---- kernels --------------------------------------------------------------------------------- */

/* Argument blocks per buffer a stream takes: a buffer of them serves a few decode steps. */
enum { STREAM_ARGS_BLOCKS = 256 };

/* The next argument block of the open command buffer: *a and the block's *offset in it (under
 * s->lock). */
static acg_status args_block(vk_stream *s, vk_args **a, uint32_t *offset, const char *fn) {
    const uint32_t stride = s->dev->args_stride;
    vk_args *head = s->open.args;
    if (head == NULL || head->size - head->used < stride) {
        if (s->args_spare != NULL) {
            head = s->args_spare;
            s->args_spare = head->next;
        } else {
            ACG__TRY(acg__vk_args_new(s->dev, STREAM_ARGS_BLOCKS, &head, fn));
        }
        head->next = s->open.args;
        s->open.args = head;
    }
    *a = head;
    *offset = head->used;
    head->used += stride;
    return ACG_OK;
}

acg_status acg__vk_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                 const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    static const char fn[] = "acg_kernel_launch";
    vk_stream *s = vstream(stream);
    const vk_kernel *k = vkernel(kernel);
    vk_args *a = NULL;
    uint32_t offset = 0;
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, fn);
    if (st == ACG_OK) {
        st = args_block(s, &a, &offset, fn);
    }
    if (st == ACG_OK) {
        /* Written before the submission, which makes the host's writes visible to it. */
        acg__vk_kernel_block(k, dims, args, n_args, a->host + offset);
        st = acg__vk_kernel_record(s->dev, s->open.cb, k, dims, a, offset, fn);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ---- graphs ---------------------------------------------------------------------------------- */

acg_status acg__vk_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream) {
    vk_stream *s = vstream(stream);
    pthread_mutex_lock(&s->lock);
    acg_status st = work(s, "acg_graph_launch");
    if (st == ACG_OK) {
        const VkCommandBuffer cb = acg__vk_graph_commands(exec);
        VK_RECORD(s->dev->vkCmdExecuteCommands(s->open.cb, 1, &cb));
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}
