/* memory.c — device buffers and views, pinned host memory, copies and fills. */
#include <string.h>

#include "core/acg-impl.h"

acg_status acg__check_buffer(const acg_buffer *buf, const acg_device *dev, const char *fn,
                             const char *what) {
    if (!acg__handle_use(buf, ACG__HANDLE_BUFFER)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %s %p is not a live buffer", fn, what,
                          (const void *)buf);
    }
    if (dev != NULL && buf->dev != dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: %s belongs to %s, not %s", fn, what,
                          buf->dev->name, dev->name);
    }
    return ACG_OK;
}

acg_status acg__check_range(const acg_buffer *buf, size_t offset, size_t size, const char *fn,
                            const char *what) {
    if (offset > buf->size || size > buf->size - offset) {
        return acg__error(ACG_ERR_OUT_OF_RANGE,
                          "%s: %s range [%zu, +%zu) leaves its %zu-byte buffer", fn, what, offset,
                          size, buf->size);
    }
    return ACG_OK;
}

/* An allocation's arguments: a size, and somewhere to put what it allocates. */
static acg_status check_size_out(size_t size, const void *out, const char *fn) {
    if (size == 0 || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          size == 0 ? "size is 0" : "out is NULL");
    }
    return ACG_OK;
}

/* ---- buffers ----------------------------------------------------------------------------- */

acg_status acg__buffer_new(acg_device *dev, size_t size, const void *owner, const char *what,
                           bool stream_owned, const char *fn, acg_buffer **out) {
    acg_buffer *b = acg__new(sizeof *b, fn);
    if (b == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    /* A backend's detail names the vendor call and its code: keep it. One that sets none (a
     * backend without a driver) gets the status's text. */
    uint64_t serial = acg__error_serial();
    acg_status st = acg__device_mem_alloc(dev, size, &b->mem);
    if (st != ACG_OK) {
        if (acg__error_serial() == serial) {
            acg__error(st, "%s: %zu bytes on %s: %s", fn, size, dev->spec, acg_status_string(st));
        }
        goto out_free;
    }
    b->dev = dev;
    b->size = size;
    b->owner = owner;
    b->owner_what = what;
    b->stream_owned = stream_owned;
    dev->n_buffers++;
    /* Last: a call holding a stale handle that this address matches must not see the buffer
     * before it is whole (the registry's lock orders these writes before any lookup). */
    if ((st = acg__handle_publish(b, ACG__HANDLE_BUFFER, &b->life, fn)) != ACG_OK) {
        goto out_free_mem;
    }
    *out = b;
    return ACG_OK;

out_free_mem:
    dev->n_buffers--;
    acg__device_mem_free(dev, b->mem, size);
out_free:
    acg__free(b);
    return st;
}

static acg_status buffer_alloc(acg_device *dev, size_t size, const void *owner, const char *what,
                               acg_buffer **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_buffer_alloc";
    ACG__TRY(acg__check_device_usable(dev, fn));
    ACG__TRY(check_size_out(size, out, fn));
    ACG__TRY(acg__device_lock_op(dev, fn));
    acg_status st = acg__buffer_new(dev, size, owner, what, false, fn, out);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg_buffer_alloc(acg_device *dev, size_t size, acg_buffer **out) {
    return buffer_alloc(dev, size, NULL, NULL, out);
}

acg_status acg__buffer_alloc_owned(acg_device *dev, size_t size, const void *owner,
                                   const char *what, acg_buffer **out) {
    return buffer_alloc(dev, size, owner, what, out);
}

static acg_status create_view(acg_buffer *buf, size_t offset, size_t size, const void *owner,
                              const char *what, acg_buffer **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_buffer_create_view";
    ACG__TRY(acg__check_buffer_usable(buf, fn));
    ACG__TRY(check_size_out(size, out, fn));
    if (buf->scratch) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: graph scratch cannot have views (it dies with its graph)", fn);
    }
    ACG__TRY(acg__check_range(buf, offset, size, fn, "view"));
    acg_device *dev = buf->dev;
    acg_buffer *v = acg__new(sizeof *v, fn);
    if (v == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    v->dev = dev;
    v->mem = buf->mem;
    v->offset = buf->offset + offset;
    v->size = size;
    v->parent = buf;
    v->owner = owner;
    v->owner_what = what;
    pthread_mutex_lock(&dev->lock);
    buf->n_views++;
    dev->n_buffers++;
    /* Last, as in acg__buffer_new. */
    if (acg__handle_add(v, ACG__HANDLE_BUFFER, &v->life) != ACG_OK) {
        buf->n_views--;
        dev->n_buffers--;
        pthread_mutex_unlock(&dev->lock);
        acg__free(v);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_unlock(&dev->lock);
    *out = v;
    return ACG_OK;
}

acg_status acg_buffer_create_view(acg_buffer *buf, size_t offset, size_t size, acg_buffer **out) {
    return create_view(buf, offset, size, NULL, NULL, out);
}

acg_status acg__buffer_view_owned(acg_buffer *buf, size_t offset, size_t size, const void *owner,
                                  const char *what, acg_buffer **out) {
    return create_view(buf, offset, size, owner, what, out);
}

/* Why buf cannot be freed on behalf of owner (dev->lock held), or ACG_OK. */
static acg_status free_refusal(acg_buffer *buf, const void *owner, const char *fn) {
    acg_device *dev = buf->dev;
    if (buf->owner != owner) {
        return acg__error(ACG_ERR_IN_USE, "%s: the buffer belongs to %s %p, which frees it", fn,
                          buf->owner_what, buf->owner);
    }
    if (buf->scratch) {
        return acg__error(ACG_ERR_IN_USE,
                          "%s: the buffer is scratch of graph %llu and is released with it", fn,
                          (unsigned long long)buf->owner_id);
    }
    if (buf->stream_owned) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the buffer came from acg_stream_alloc; release it with "
                          "acg_stream_free",
                          fn);
    }
    if (buf->n_views != 0) {
        return acg__error(ACG_ERR_IN_USE, "%s: %u view(s) of the buffer are alive", fn,
                          buf->n_views);
    }
    if (buf->graph_refs != 0) {
        uint64_t id = acg__graph_referencing(dev, buf, NULL, 0);
        return id != 0 ? acg__error(ACG_ERR_IN_USE,
                                    "%s: live graph %llu reads or writes the buffer; destroy the "
                                    "graph first",
                                    fn, (unsigned long long)id)
                       : acg__error(ACG_ERR_IN_USE,
                                    "%s: the body of a loop open on a stream uses the buffer; "
                                    "close the loop (acg_stream_loop_end) first",
                                    fn);
    }
    return ACG_OK;
}

acg_status acg__buffer_free_owned(acg_buffer *buf, const void *owner, const char *fn) {
    ACG__CALL_SCOPE;
    if (buf == NULL) {
        return ACG_OK;
    }
    /* Refuse what is plainly not free-able before retiring the handle, so that a refused free
     * does not disturb other threads' calls. */
    ACG__TRY(acg__check_buffer(buf, NULL, fn, "buffer"));
    acg_device *dev = buf->dev;
    acg__hold_device(dev);
    pthread_mutex_lock(&dev->lock);
    acg_status st = free_refusal(buf, owner, fn);
    pthread_mutex_unlock(&dev->lock);
    if (st == ACG_OK) {
        /* Waits for calls that validated the buffer (a launch racing the free) to queue their
         * work; new calls are refused from here on. */
        /* An owner's destroy checked its buffers before freeing them: not strict then. */
        st = owner != NULL ? acg__handle_retire(buf, ACG__HANDLE_BUFFER, false)
                           : acg__retire(buf, ACG__HANDLE_BUFFER, fn, "buffer");
        if (st == ACG_ERR_INVALID_HANDLE && owner != NULL) {
            acg__error(st, "%s: buffer %p is being freed by another call", fn, (void *)buf);
        }
    }
    if (st != ACG_OK) {
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    st = free_refusal(buf, owner, fn);
    if (st == ACG_OK) {
        st = acg__invalidate_device_captures(dev, fn);
    }
    if (st != ACG_OK) {
        pthread_mutex_unlock(&dev->lock);
        acg__handle_restore(buf);
        return st;
    }
    acg__handle_remove(buf);
    if (buf->parent != NULL) {
        buf->parent->n_views--;
        dev->n_buffers--;
        pthread_mutex_unlock(&dev->lock);
        acg__free(buf);
        return ACG_OK;
    }
    uint64_t users = atomic_load_explicit(&buf->used_by, memory_order_relaxed);
    pthread_mutex_unlock(&dev->lock);
    /* Work queued before the free (by any call that held the buffer, now all returned) may
     * still use the memory: wait for the streams that queued work on it, and only those. */
    acg__device_wait_streams(dev, users, fn);
    pthread_mutex_lock(&dev->lock);
    acg__device_mem_free(dev, buf->mem, buf->size);
    dev->n_buffers--;
    pthread_mutex_unlock(&dev->lock);
    acg__free(buf);
    return ACG_OK;
}

acg_status acg_buffer_free(acg_buffer *buf) {
    return acg__buffer_free_owned(buf, NULL, "acg_buffer_free");
}

static bool capturing_locked(acg_device *dev) {
    acg__device_await_endings(dev);
    for (const acg__capture *c = dev->captures; c != NULL; c = c->next) {
        if (c->state == ACG_CAPTURE_ACTIVE) {
            return true;
        }
    }
    return false;
}

acg_status acg__device_check_not_capturing(acg_device *dev, const char *fn) {
    ACG__TRY(acg__check_device(dev, fn));
    pthread_mutex_lock(&dev->lock);
    bool busy = capturing_locked(dev);
    pthread_mutex_unlock(&dev->lock);
    return busy ? acg__error(ACG_ERR_IN_USE,
                             "%s: a capture is in progress on %s; try again after it ends", fn,
                             dev->spec)
                : ACG_OK;
}

acg_status acg__buffer_check_free(const acg_buffer *buf, uint32_t views, const void *owner,
                                  const char *fn) {
    ACG__TRY(acg__check_buffer(buf, NULL, fn, "buffer"));
    acg_device *dev = buf->dev;
    acg_status st = ACG_OK;
    pthread_mutex_lock(&dev->lock);
    if (buf->owner != owner) {
        st = acg__error(ACG_ERR_IN_USE, "%s: a buffer belongs to %s %p", fn, buf->owner_what,
                        buf->owner);
    } else if (buf->graph_refs != 0) {
        uint64_t id = acg__graph_referencing(dev, buf, NULL, 0);
        st = id != 0
                 ? acg__error(ACG_ERR_IN_USE, "%s: live graph %llu reads or writes its memory", fn,
                              (unsigned long long)id)
                 : acg__error(ACG_ERR_IN_USE, "%s: the body of an open loop uses its memory", fn);
    } else if (buf->n_views > views || buf->scratch) {
        st = acg__error(ACG_ERR_IN_USE, "%s: its memory is still referenced", fn);
    } else if (capturing_locked(dev)) {
        st = acg__error(ACG_ERR_IN_USE,
                        "%s: a capture is in progress on %s; try again after it ends", fn,
                        dev->spec);
    }
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg_buffer_get_native(acg_buffer *buf, acg_native_buffer *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_buffer_get_native";
    ACG__TRY(acg__check_buffer_usable(buf, fn));
    ACG__TRY(acg__output_check(out, sizeof *out, "acg_native_buffer", fn));
    acg_native_buffer nb = ACG_NATIVE_BUFFER_INIT;
    acg_status (*get)(acg__bk_device *, acg__bk_mem *, size_t, size_t, acg_native_buffer *) =
        ACG__SLOT(buf->dev->vt, buffer_get_native, 6);
    if (get != NULL) {
        ACG__TRY(acg__device_fault(buf->dev,
                                   get(buf->dev->impl, buf->mem, buf->offset, buf->size, &nb)));
    }
    nb.size = sizeof nb;
    nb.bytes = buf->size;
    return acg__output_write(out, &nb, sizeof nb, "acg_native_buffer", fn);
}

size_t acg_buffer_get_size(const acg_buffer *buf) {
    ACG__CALL_SCOPE;
    return acg__check_buffer(buf, NULL, "acg_buffer_get_size", "buffer") == ACG_OK ? buf->size : 0;
}

acg_device *acg_buffer_get_device(const acg_buffer *buf) {
    ACG__CALL_SCOPE;
    return acg__check_buffer(buf, NULL, "acg_buffer_get_device", "buffer") == ACG_OK ? buf->dev
                                                                                     : NULL;
}

/* ---- stream-ordered memory --------------------------------------------------------------- */

void acg__stream_reclaim(acg_stream *s, bool all) {
    acg_device *dev = s->dev;
    for (uint32_t i = 0; i < s->n_deferred;) {
        struct acg__deferred *d = &s->deferred[i];
        if (all || dev->vt->event_query(d->event) == ACG_OK) {
            acg__device_mem_free(dev, d->mem, d->size);
            dev->vt->event_destroy(d->event);
            *d = s->deferred[--s->n_deferred];
        } else {
            i++;
        }
    }
}

acg_status acg_stream_alloc(acg_stream *s, size_t size, acg_buffer **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_alloc";
    ACG__TRY(acg__check_stream_usable(s, fn));
    ACG__TRY(check_size_out(size, out, fn));
    acg_device *dev = s->dev;
    acg__capture *c = acg__stream_enter(s);
    if (c != NULL) {
        acg_status st = acg__capture_check(c, fn);
        if (st == ACG_OK) {
            st = acg__pool_carve(c, size, out);
        }
        acg__stream_leave(s, c);
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    acg__stream_reclaim(s, false);
    acg_status st = acg__invalidate_device_captures(dev, fn);
    if (st == ACG_OK) {
        st = acg__buffer_new(dev, size, NULL, NULL, true, fn, out);
    }
    pthread_mutex_unlock(&dev->lock);
    acg__stream_leave(s, NULL);
    return st;
}

acg_status acg_stream_free(acg_stream *s, acg_buffer *buf) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_free";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(acg__check_buffer(buf, s->dev, fn, "buffer"));
    acg_device *dev = s->dev;
    /* A stream's own buffer dies here: wait for other threads' calls that use it (before any
     * lock, which they may be waiting for) and refuse later ones. Both flags never change. */
    bool dies = buf->stream_owned && !buf->scratch;
    if (dies) {
        ACG__TRY(acg__retire(buf, ACG__HANDLE_BUFFER, fn, "buffer"));
    }
    acg_status st = ACG_OK;
    acg__capture *c = acg__stream_enter(s);
    if (c != NULL) {
        /* Scratch stays with its graph; anything else is a free outside the pool. */
        if (!buf->scratch) {
            st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                         "%s of memory outside the capture's pool during capture "
                                         "invalidated the capture",
                                         fn);
        } else {
            st = acg__capture_check(c, fn);
        }
        acg__stream_leave(s, c);
        if (dies) {
            acg__handle_restore(buf);
        }
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    if (buf->scratch) {
        st = ACG_OK; /* released with its graph */
    } else if (!buf->stream_owned) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT,
                        "%s: the buffer did not come from acg_stream_alloc; use acg_buffer_free",
                        fn);
    } else if (buf->n_views != 0 || buf->graph_refs != 0) {
        st = acg__error(ACG_ERR_IN_USE, "%s: %s", fn,
                        buf->n_views ? "views of the buffer are alive"
                                     : "a live graph, or an open loop's body, uses the buffer");
    } else {
        /* Defer the release behind an event recorded now. Without memory for that, wait for
         * the stream instead: a free must not fail for want of memory, or callers leak. */
        acg__bk_event *event = NULL;
        bool deferred = acg__grow((void **)&s->deferred, &s->cap_deferred, s->n_deferred + 1,
                                  sizeof *s->deferred) &&
                        dev->vt->event_create(dev->impl, &event) == ACG_OK;
        if (deferred && dev->vt->event_record(event, s->impl) != ACG_OK) {
            dev->vt->event_destroy(event);
            deferred = false;
        }
        if (deferred) {
            s->deferred[s->n_deferred++] = (struct acg__deferred){buf->mem, buf->size, event};
        } else {
            dev->vt->stream_synchronize(s->impl);
            acg__device_mem_free(dev, buf->mem, buf->size);
        }
        acg__handle_remove(buf);
        dev->n_buffers--;
        acg__free(buf);
        acg__stream_reclaim(s, false);
    }
    pthread_mutex_unlock(&dev->lock);
    acg__stream_leave(s, NULL);
    if (st != ACG_OK && dies) {
        acg__handle_restore(buf);
    }
    return st;
}

/* ---- pinned host memory ------------------------------------------------------------------ */

acg_status acg_pinned_alloc(acg_device *dev, size_t size, void **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_pinned_alloc";
    ACG__TRY(acg__check_device_usable(dev, fn));
    ACG__TRY(check_size_out(size, out, fn));
    ACG__TRY(acg__device_lock_op(dev, fn));
    acg_status st = ACG_OK;
    acg__pinned e = {.size = size, .dev = dev};
    e.pinned = dev->cap.pinned_memory && !acg__env_flag("ACG_NO_PINNED");
    if (e.pinned) {
        uint64_t serial = acg__error_serial();
        st = dev->vt->pinned_alloc(dev->impl, size, &e.base);
        if (st != ACG_OK) {
            if (acg__error_serial() == serial) { /* as in acg__buffer_new */
                acg__error(st, "%s: %zu bytes on %s: %s", fn, size, dev->spec,
                           acg_status_string(st));
            }
            goto out_unlock;
        }
    } else {
        acg__log(ACG_LOG_DEBUG, "%s: %zu bytes of pageable memory (%s)", fn, size,
                 dev->cap.pinned_memory ? "ACG_NO_PINNED is set"
                                        : "the device has no pinned "
                                          "memory");
        e.base = acg__alloc_aligned(size, 64);
        if (e.base == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out_unlock;
        }
    }
    if (acg__pinned_add(&e) != ACG_OK) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free;
    }
    dev->n_pinned++;
    pthread_mutex_unlock(&dev->lock);
    *out = e.base;
    return ACG_OK;

out_free:
    if (e.pinned) {
        dev->vt->pinned_free(dev->impl, e.base);
    } else {
        acg__free(e.base);
    }
out_unlock:
    pthread_mutex_unlock(&dev->lock);
    return st;
}

/* Ends an allocation (registered false) or a registration (true) that starts at ptr: waits for
 * the streams that queued copies on it, then frees or unregisters it. */
static acg_status pinned_release(void *ptr, bool registered, const char *fn) {
    acg__pinned e = {0};
    if (!acg__pinned_lookup(ptr, 0, &e) || e.base != ptr || e.registered != registered ||
        !acg__handle_use(e.dev, ACG__HANDLE_DEVICE)) {
        bool other = e.base == ptr && e.registered != registered;
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %p was not %s%s", fn, ptr,
                          registered ? "registered by acg_pinned_register"
                                     : "returned by acg_pinned_alloc",
                          !other       ? ""
                          : registered ? " (acg_pinned_free frees what acg_pinned_alloc returned)"
                                       : " (acg_pinned_unregister ends a registration)");
    }
    acg_device *dev = e.dev;
    ACG__TRY(acg__device_lock_op(dev, fn));
    acg_status st = acg__pinned_remove(ptr, &e);
    if (st == ACG_ERR_IN_USE) {
        acg__error(st, "%s: live graph %llu copies from or to this memory; destroy it first", fn,
                   (unsigned long long)acg__graph_referencing(dev, NULL, ptr, e.size));
    } else if (st != ACG_OK) {
        acg__error(st, "%s: %p is not pinned memory of acg's", fn, ptr);
    }
    pthread_mutex_unlock(&dev->lock);
    if (st != ACG_OK) {
        return st;
    }
    /* Copies queued before the free may still read or write it: wait for the streams that
     * queued them. */
    acg__device_wait_streams(dev, e.used_by, fn);
    pthread_mutex_lock(&dev->lock);
    if (e.registered) {
        dev->vt->pinned_unregister(dev->impl, e.base);
    } else if (e.pinned) {
        dev->vt->pinned_free(dev->impl, e.base);
    } else {
        acg__free(e.base);
    }
    dev->n_pinned--;
    pthread_mutex_unlock(&dev->lock);
    return ACG_OK;
}

acg_status acg_pinned_free(void *ptr) {
    ACG__CALL_SCOPE;
    return ptr == NULL ? ACG_OK : pinned_release(ptr, false, "acg_pinned_free");
}

acg_status acg_pinned_register(acg_device *dev, void *ptr, size_t size) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_pinned_register";
    ACG__TRY(acg__check_device_usable(dev, fn));
    if (ptr == NULL || size == 0 || (uintptr_t)ptr + size < (uintptr_t)ptr) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          ptr == NULL ? "ptr is NULL"
                          : size == 0 ? "size is 0"
                                      : "the range wraps around the address space");
    }
    ACG__TRY(acg__device_lock_op(dev, fn));
    acg_status st = ACG_OK;
    if (!dev->cap.pinned_register || acg__env_flag("ACG_NO_PINNED")) {
        st = acg__error(ACG_ERR_UNSUPPORTED,
                        "%s: %s cannot page-lock memory it did not allocate (%s); copies treat "
                        "it as pageable memory",
                        fn, dev->spec,
                        dev->cap.pinned_register ? "ACG_NO_PINNED is set"
                                                 : "no pinned_register in its capability");
        goto out_unlock;
    }
    /* Entered first, so that an overlapping registration on another device is refused before
     * either reaches the driver; copies that race this call are the caller's race. */
    acg__pinned e = {.base = ptr, .size = size, .dev = dev, .pinned = true, .registered = true};
    if ((st = acg__pinned_add(&e)) != ACG_OK) {
        acg__error(st, "%s: %s", fn,
                   st == ACG_ERR_INVALID_ARGUMENT
                       ? "the range overlaps pinned memory or another registration"
                       : "out of memory");
        goto out_unlock;
    }
    uint64_t serial = acg__error_serial();
    if ((st = dev->vt->pinned_register(dev->impl, ptr, size)) != ACG_OK) {
        if (acg__error_serial() == serial) { /* as in acg__buffer_new */
            acg__error(st, "%s: %zu bytes at %p on %s: %s", fn, size, ptr, dev->spec,
                       acg_status_string(st));
        }
        acg__pinned_remove(ptr, &e);
        goto out_unlock;
    }
    dev->n_pinned++;
out_unlock:
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg_pinned_unregister(void *ptr) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_pinned_unregister";
    if (ptr == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: ptr is NULL", fn);
    }
    return pinned_release(ptr, true, fn);
}

bool acg_pinned_contains(const acg_device *dev, const void *ptr, size_t size) {
    ACG__CALL_SCOPE;
    acg__pinned e;
    return ptr != NULL && acg__pinned_lookup(ptr, size, &e) && e.pinned && e.dev == dev;
}

/* ---- copies and fills -------------------------------------------------------------------- */

/* Checks a host transfer: stream, buffer of its device, host pointer, size, range. */
static acg_status check_transfer(const acg_stream *s, const acg_buffer *buf, size_t offset,
                                 const void *host, size_t size, const char *fn) {
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(acg__check_buffer(buf, s->dev, fn, "buffer"));
    if (host == NULL || size == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          host == NULL ? "host pointer is NULL" : "size is 0");
    }
    return acg__check_range(buf, offset, size, fn, "buffer");
}

static acg_status h2d_eager(acg_stream *s, const acg__node *n) {
    return s->dev->vt->copy_h2d(s->impl, n->dst_mem, n->dst_off, n->host, n->size, n->host_pinned);
}

static acg_status d2h_eager(acg_stream *s, const acg__node *n) {
    /* Pageable memory is not safe to write behind the caller's back: the backend finishes
     * this copy before returning (a blocking read where the driver has one). */
    return s->dev->vt->copy_d2h(s->impl, n->host, n->src_mem, n->src_off, n->size, n->host_pinned);
}

static acg_status d2d_eager(acg_stream *s, const acg__node *n) {
    return s->dev->vt->copy_d2d(s->impl, n->dst_mem, n->dst_off, n->src_mem, n->src_off, n->size);
}

static acg_status fill_eager(acg_stream *s, const acg__node *n) {
    return s->dev->vt->fill(s->impl, n->dst_mem, n->dst_off, n->size, n->pattern, n->pattern_size);
}

/* A copy between buffer memory and host memory: into buf (h2d) or out of it (d2h). */
static acg_status copy_host(acg_stream *s, acg_node_kind kind, const acg_buffer *buf, size_t offset,
                            const void *host, size_t size, const char *fn) {
    ACG__TRY(check_transfer(s, buf, offset, host, size, fn));
    acg__node n = {.kind = kind,
                   .host = (void *)host,
                   .host_pinned = acg__pinned_use(s->dev, host, size, s->use_bit),
                   .size = size,
                   .n_buffers = 1,
                   .buffers = {buf}};
    if (kind == ACG_NODE_COPY_H2D) {
        n.dst_mem = buf->mem;
        n.dst_off = buf->offset + offset;
        return acg__submit(s, fn, &n, h2d_eager);
    }
    n.src_mem = buf->mem;
    n.src_off = buf->offset + offset;
    return acg__submit(s, fn, &n, d2h_eager);
}

acg_status acg_copy_h2d(acg_stream *s, acg_buffer *dst, size_t dst_offset, const void *src,
                        size_t size) {
    ACG__CALL_SCOPE;
    return copy_host(s, ACG_NODE_COPY_H2D, dst, dst_offset, src, size, "acg_copy_h2d");
}

acg_status acg_copy_d2h(acg_stream *s, void *dst, const acg_buffer *src, size_t src_offset,
                        size_t size) {
    ACG__CALL_SCOPE;
    return copy_host(s, ACG_NODE_COPY_D2H, src, src_offset, dst, size, "acg_copy_d2h");
}

acg_status acg_copy_d2d(acg_stream *s, acg_buffer *dst, size_t dst_offset, const acg_buffer *src,
                        size_t src_offset, size_t size) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_copy_d2d";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(acg__check_buffer(dst, s->dev, fn, "dst"));
    ACG__TRY(acg__check_buffer(src, s->dev, fn, "src"));
    if (size == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
    }
    ACG__TRY(acg__check_range(dst, dst_offset, size, fn, "dst"));
    ACG__TRY(acg__check_range(src, src_offset, size, fn, "src"));
    size_t d = dst->offset + dst_offset, o = src->offset + src_offset;
    if (dst->mem == src->mem && d < o + size && o < d + size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: source and destination overlap", fn);
    }
    acg__node n = {.kind = ACG_NODE_COPY_D2D,
                   .dst_mem = dst->mem,
                   .dst_off = d,
                   .src_mem = src->mem,
                   .src_off = o,
                   .size = size,
                   .n_buffers = 2,
                   .buffers = {dst, src}};
    return acg__submit(s, fn, &n, d2d_eager);
}

acg_status acg_fill(acg_stream *s, acg_buffer *dst, size_t offset, size_t size, uint32_t pattern,
                    size_t pattern_size) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_fill";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(acg__check_buffer(dst, s->dev, fn, "dst"));
    if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: pattern_size %zu is not 1, 2 or 4", fn,
                          pattern_size);
    }
    if (size == 0 || offset % pattern_size || size % pattern_size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: offset %zu and size %zu must be non-zero multiples of %zu", fn,
                          offset, size, pattern_size);
    }
    ACG__TRY(acg__check_range(dst, offset, size, fn, "dst"));
    if (pattern_size < 4) {
        pattern &= (1u << (8 * pattern_size)) - 1;
    }
    acg__node n = {.kind = ACG_NODE_FILL,
                   .dst_mem = dst->mem,
                   .dst_off = dst->offset + offset,
                   .size = size,
                   .pattern = pattern,
                   .pattern_size = (uint32_t)pattern_size,
                   .n_buffers = 1,
                   .buffers = {dst}};
    return acg__submit(s, fn, &n, fill_eager);
}
