/* stream.c — streams and events, and how they fork into and join a capture. */
#include <string.h>

#include "core/acg-impl.h"

static acg_status check_event(const acg_event *e, const char *fn) {
    return acg__check_live(e, ACG__HANDLE_EVENT, "event", "event", fn);
}

/* ---- streams ----------------------------------------------------------------------------- */

acg_status acg_stream_create(acg_device *dev, acg_stream **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_create";
    ACG__TRY(acg__check_create(dev, out, fn));
    acg_stream *s = acg__new(sizeof *s, fn);
    if (s == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    s->dev = dev;
    acg_status st = acg__device_fault(dev, dev->vt->stream_create(dev->impl, &s->impl));
    if (st != ACG_OK) {
        acg__free(s);
        return st;
    }
    if ((st = acg__device_fault(dev, dev->vt->event_create(dev->impl, &s->mark))) != ACG_OK) {
        char why[256];
        acg__error_copy(why, sizeof why);
        dev->vt->stream_destroy(s->impl);
        acg__free(s);
        return acg__error(st, "%s: the stream's wait mark: %s", fn, why);
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_lock(&dev->lock);
    s->serial = ++dev->next_stream_serial;
    s->use_bit = (uint64_t)1 << (s->serial % 64);
    s->next = dev->streams;
    dev->streams = s;
    dev->n_streams++;
    /* Last: a call holding a stale handle that this address matches must not see the stream
     * before it is whole (the registry's lock orders these writes before any lookup). */
    if (acg__handle_add(s, ACG__HANDLE_STREAM, &s->life) != ACG_OK) {
        dev->streams = s->next;
        dev->n_streams--;
        pthread_mutex_unlock(&dev->lock);
        pthread_mutex_destroy(&s->lock);
        dev->vt->event_destroy(s->mark);
        dev->vt->stream_destroy(s->impl);
        acg__free(s);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_unlock(&dev->lock);
    *out = s;
    return ACG_OK;
}

acg_status acg_stream_destroy(acg_stream *s) {
    static const char fn[] = "acg_stream_destroy";
    /* Waits for calls using the stream (a synchronize, a launch) to return. */
    ACG__DESTROY_BEGIN(s, ACG__HANDLE_STREAM, fn, "stream");
    acg_device *dev = s->dev;
    acg__hold_device(dev);
    acg__handle_remove(s);
    pthread_mutex_lock(&s->lock);
    pthread_mutex_lock(&dev->lock);
    acg__device_await_endings(dev);
    acg__capture *c = s->capture;
    if (c != NULL) {
        if (c->origin == s) {
            acg__log(ACG_LOG_WARN, "%s: abandoning the capture begun on the stream", fn);
            acg__capture_free(c);
        } else {
            acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                    "%s of a stream forked into the capture invalidated it", fn);
            acg__capture_leave(c, s);
        }
    }
    acg__ids_free(&s->frontier);
    for (acg_stream **p = &dev->streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    dev->n_streams--;
    pthread_mutex_unlock(&dev->lock);
    acg_status st = dev->vt->stream_synchronize(s->impl);
    pthread_mutex_lock(&dev->lock);
    acg__stream_reclaim(s, true);
    pthread_mutex_unlock(&dev->lock);
    acg__loop_eager_free(s); /* a loop left open: its body is not run again */
    acg__free(s->deferred);
    dev->vt->event_destroy(s->mark);
    dev->vt->stream_destroy(s->impl);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_destroy(&s->lock);
    acg__free(s);
    return acg__device_released(dev, st);
}

acg_device *acg_stream_get_device(const acg_stream *s) {
    ACG__CALL_SCOPE;
    return acg__check_stream(s, "acg_stream_get_device") == ACG_OK ? s->dev : NULL;
}

acg_status acg_stream_synchronize(acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_synchronize";
    ACG__TRY(acg__check_stream_usable(s, fn));
    ACG__TRY(acg__stream_enter_eager(s, "", fn));
    /* Waiting needs no stream lock; other threads keep submitting meanwhile. */
    acg__stream_leave(s, NULL);
    acg_status st = acg__device_fault(s->dev, s->dev->vt->stream_synchronize(s->impl));
    pthread_mutex_lock(&s->lock);
    pthread_mutex_lock(&s->dev->lock);
    acg__stream_reclaim(s, false);
    pthread_mutex_unlock(&s->dev->lock);
    pthread_mutex_unlock(&s->lock);
    return st;
}

acg_status acg_stream_query(acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_query";
    ACG__TRY(acg__check_stream_usable(s, fn));
    ACG__TRY(acg__stream_enter_eager(s, "", fn));
    acg_status st = acg__device_fault(s->dev, s->dev->vt->stream_query(s->impl));
    acg__stream_leave(s, NULL);
    return st;
}

/* ---- events ------------------------------------------------------------------------------ */

acg_status acg_event_create(acg_device *dev, acg_event **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_event_create";
    ACG__TRY(acg__check_create(dev, out, fn));
    acg_event *e = acg__new(sizeof *e, fn);
    if (e == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    e->dev = dev;
    acg_status st = acg__device_fault(dev, dev->vt->event_create(dev->impl, &e->impl));
    if (st != ACG_OK) {
        acg__free(e);
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    dev->n_events++;
    /* Last, as in acg_stream_create. */
    st = acg__handle_add(e, ACG__HANDLE_EVENT, &e->life);
    if (st != ACG_OK) {
        dev->n_events--;
    }
    pthread_mutex_unlock(&dev->lock);
    if (st != ACG_OK) {
        dev->vt->event_destroy(e->impl);
        acg__free(e);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = e;
    return ACG_OK;
}

acg_status acg_event_destroy(acg_event *e) {
    ACG__DESTROY_BEGIN(e, ACG__HANDLE_EVENT, "acg_event_destroy", "event");
    acg_device *dev = e->dev;
    acg__hold_device(dev);
    acg__handle_remove(e);
    pthread_mutex_lock(&dev->lock);
    dev->n_events--;
    acg__ids_free(&e->frontier);
    pthread_mutex_unlock(&dev->lock);
    dev->vt->event_destroy(e->impl);
    acg__free(e);
    return ACG_OK;
}

/* The last check of a call that orders the event with the stream: both of one device, which
 * has no latched fault. */
static acg_status check_event_stream(const acg_event *e, const acg_stream *s, const char *fn) {
    ACG__TRY(acg__device_check_lost(s->dev, fn));
    if (e->dev != s->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the event belongs to %s, the stream to %s", fn,
                          e->dev->name, s->dev->name);
    }
    return ACG_OK;
}

/* The live capture the event was recorded in, or NULL (dev->lock held). */
static acg__capture *event_capture(const acg_event *e) {
    if (e->capture != NULL) {
        acg__device_await_endings(e->dev);
    }
    if (e->capture != NULL && acg__capture_live(e->dev, e->capture, e->capture_id)) {
        return e->capture;
    }
    return NULL;
}

acg_status acg_event_record(acg_event *e, acg_stream *s) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_event_record";
    ACG__TRY(check_event(e, fn));
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(check_event_stream(e, s, fn));
    acg_status st = ACG_OK;
    acg__capture *c = acg__stream_enter(s);
    if ((st = acg__loop_gate(s, c, false, fn)) != ACG_OK) {
        /* no event in a loop's body */
    } else if (c != NULL) {
        /* Inside a capture the event stands for the stream's current frontier. */
        st = acg__capture_check(c, fn);
        if (st == ACG_OK && !acg__ids_copy(&e->frontier, &s->frontier)) {
            st = acg__capture_invalidate(c, ACG_ERR_OUT_OF_MEMORY,
                                         "%s: out of memory during capture", fn);
        }
        if (st == ACG_OK) {
            e->capture = c;
            e->capture_id = c->id;
        }
        if (st == ACG_OK && c->rec != NULL) {
            st = acg__capture_native_step(c, s->dev->vt->event_record(e->impl, s->impl), fn);
        }
    } else {
        pthread_mutex_lock(&s->dev->lock);
        e->capture = NULL;
        pthread_mutex_unlock(&s->dev->lock);
        st = acg__device_fault(s->dev, s->dev->vt->event_record(e->impl, s->impl));
    }
    acg__stream_leave(s, c);
    return st;
}

acg_status acg_stream_wait_event(acg_stream *s, acg_event *e) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stream_wait_event";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(check_event(e, fn));
    ACG__TRY(check_event_stream(e, s, fn));
    acg_status st = ACG_OK;
    acg_device *dev = s->dev;
    acg__capture *c = acg__stream_enter(s);
    if ((st = acg__loop_gate(s, c, false, fn)) != ACG_OK) {
        acg__stream_leave(s, c);
        return st;
    }
    if (c == NULL) {
        pthread_mutex_lock(&dev->lock);
    }
    acg__capture *ec = event_capture(e);
    /* Recorded in a capture that has ended: that point never runs, so it is complete. */
    bool ended = ec == NULL && e->capture != NULL;
    if (ec == NULL && (c == NULL || ended)) {
        if (c == NULL) {
            pthread_mutex_unlock(&dev->lock);
        }
        st = c == NULL && !ended
                 ? acg__device_fault(dev, dev->vt->stream_wait_event(s->impl, e->impl))
                 : ACG_OK;
        acg__stream_leave(s, c);
        return st;
    }
    if (c == NULL) {
        /* Fork: the stream joins the capture the event was recorded in. */
        st = acg__capture_check(ec, fn);
        if (st == ACG_OK && ec->loop_depth != 0) {
            st = acg__loop_gate(s, ec, false, fn);
        }
        if (st == ACG_OK && !dev->cap.multi_stream_capture) {
            st = acg__capture_invalidate(ec, ACG_ERR_UNSUPPORTED,
                                         "%s: %s cannot fork a capture into another stream", fn,
                                         dev->spec);
        }
        if (st == ACG_OK && !acg__ids_copy(&s->frontier, &e->frontier)) {
            st = acg__capture_invalidate(ec, ACG_ERR_OUT_OF_MEMORY,
                                         "%s: out of memory during capture", fn);
        }
        if (st == ACG_OK) {
            st = acg__capture_join(ec, s);
        }
        if (st == ACG_OK && ec->rec != NULL) {
            st = acg__capture_native_step(ec, dev->vt->capture_join(ec->rec, s->impl), fn);
        }
        if (st == ACG_OK && ec->rec != NULL) {
            st = acg__capture_native_step(ec, dev->vt->stream_wait_event(s->impl, e->impl), fn);
        }
        pthread_mutex_unlock(&dev->lock);
        acg__stream_leave(s, NULL);
        return st;
    }
    st = acg__capture_check(c, fn);
    if (st == ACG_OK && ec == NULL) {
        st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                     "%s on an event recorded outside the capture invalidated "
                                     "the capture (a graph cannot wait for work outside it)",
                                     fn);
    } else if (st == ACG_OK && ec != c) {
        st = acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                     "%s on an event of another capture invalidated the capture",
                                     fn);
    } else if (st == ACG_OK && !acg__ids_union(&s->frontier, &e->frontier)) {
        st = acg__capture_invalidate(c, ACG_ERR_OUT_OF_MEMORY, "%s: out of memory during capture",
                                     fn);
    } else if (st == ACG_OK && c->rec != NULL) {
        st = acg__capture_native_step(c, dev->vt->stream_wait_event(s->impl, e->impl), fn);
    }
    acg__stream_leave(s, c);
    return st;
}

/* Querying or waiting for an event of a live capture would wait for work that never runs. */
static acg_status event_host_wait(acg_event *e, const char *fn, bool block) {
    ACG__TRY(check_event(e, fn));
    ACG__TRY(acg__device_check_lost(e->dev, fn));
    acg_device *dev = e->dev;
    pthread_mutex_lock(&dev->lock);
    acg__capture *c = event_capture(e);
    if (c != NULL) {
        acg_status st =
            acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                    "%s on an event recorded in a capture invalidated the "
                                    "capture",
                                    fn);
        pthread_mutex_unlock(&dev->lock);
        return st;
    }
    bool in_ended_capture = e->capture != NULL;
    pthread_mutex_unlock(&dev->lock);
    if (in_ended_capture) {
        return ACG_OK; /* the capture is over; its point never ran and never will */
    }
    return acg__device_fault(dev, block ? dev->vt->event_synchronize(e->impl)
                                        : dev->vt->event_query(e->impl));
}

acg_status acg_event_query(acg_event *e) {
    ACG__CALL_SCOPE;
    return event_host_wait(e, "acg_event_query", false);
}

acg_status acg_event_synchronize(acg_event *e) {
    ACG__CALL_SCOPE;
    return event_host_wait(e, "acg_event_synchronize", true);
}
