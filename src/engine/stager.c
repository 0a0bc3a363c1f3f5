/* stager.c — a ring of pinned host buffers that turns each upload into one asynchronous copy.
 *
 * An upload writes its values and padding into the next ring buffer and queues one copy from
 * it, followed by the buffer's event. A ring buffer is written again only once its copy has
 * run: the event is queried first, and the host waits (counted) only while the copy is still
 * in flight. Uploads are eager copies: a captured copy would read its ring buffer at every
 * replay, long after the ring moved on, so a capturing stream is refused.
 *
 * The mirror remembers, per destination (buffer handle, offset), the bytes last copied there,
 * so an identical upload queues no copy. An upload forgets every remembered range it overlaps.
 */
#include <stdio.h>
#include <string.h>

#include "engine-impl.h"

typedef struct ring_buffer {
    void *host;       /* (buffer_bytes) pinned, the source of the latest copy */
    acg_event *event; /* recorded after the latest copy from host */
    bool in_flight;   /* a copy was queued and not yet seen complete */
} ring_buffer;

typedef struct mirror_entry {
    const acg_buffer *dst; /* compared by address only: it may have been freed since */
    size_t offset;
    size_t size;
    unsigned char *bytes; /* (size) what the copy wrote */
    uint32_t ring;        /* the ring buffer whose event follows that copy */
} mirror_entry;

struct acg_stager {
    acg__engine_obj obj; /* its lock guards everything below; held across waits and copies */
    bool mirror;
    uint32_t depth;
    size_t buffer_bytes;
    ring_buffer *ring; /* (depth) */
    uint32_t next;     /* the ring buffer the next upload uses */
    mirror_entry *entries;
    uint32_t n_entries, cap_entries;
    acg_stager_stats stats;
};

static bool stager_live(const acg_stager *sg) { return acg__handle_use(sg, ACG__HANDLE_STAGER); }

static acg_status check_stager(const acg_stager *sg, const char *fn) {
    return acg__check_live(sg, ACG__HANDLE_STAGER, "stager", "stager", fn);
}

acg_device *acg__stager_device(const acg_stager *stager) {
    return stager_live(stager) ? stager->obj.dev : NULL;
}

/* ---- create and destroy ------------------------------------------------------------------- */

/* Frees what the ring holds, after its copies ran. A ring buffer whose free is refused (a
 * capture in progress on the device) is kept, so the call can be repeated. */
static acg_status ring_release(acg_stager *sg) {
    acg_status first = ACG_OK;
    for (uint32_t i = 0; i < sg->depth; i++) {
        ring_buffer *rb = &sg->ring[i];
        if (rb->event != NULL) {
            /* A device fault belongs to the stream that ran the copy (and a lost device was
             * logged when it was lost); the ring just goes. */
            acg_status wait = acg_event_synchronize(rb->event);
            if (wait != ACG_OK && wait != ACG_ERR_DEVICE_LOST) {
                acg__log(ACG_LOG_WARN, "acg_stager_destroy: %s", acg_last_error());
            }
            acg_event_destroy(rb->event);
            rb->event = NULL;
            rb->in_flight = false;
        }
        if (rb->host != NULL) {
            acg_status st = acg_pinned_free(rb->host);
            if (st == ACG_OK) {
                rb->host = NULL;
            } else if (first == ACG_OK) {
                first = st;
            }
        }
    }
    return first;
}

static void mirror_clear(acg_stager *sg) {
    for (uint32_t i = 0; i < sg->n_entries; i++) {
        acg__free(sg->entries[i].bytes);
    }
    sg->n_entries = 0;
}

static const acg__config_kind stager_config = ACG__CONFIG_KIND(
    acg_stager_config, ACG_STAGER_CONFIG_INIT, offsetof(acg_stager_config, depth), true);

acg_status acg_stager_create(acg_device *dev, const acg_stager_config *config, acg_stager **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stager_create";
    acg_stager_config c; /* the caller's config (or the defaults), whole whatever its version */
    ACG__TRY(acg__engine_create_args(dev, out, &stager_config, config, &c, fn));
    if (c.depth == 0 || c.buffer_bytes == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          c.depth == 0 ? "depth is 0" : "buffer_bytes is 0");
    }
    acg_stager *sg = acg__engine_obj_new(sizeof *sg, dev, fn);
    if (sg == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    acg_status st = ACG_OK;
    sg->ring = acg__calloc(c.depth, sizeof *sg->ring);
    if (sg->ring == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free_stager;
    }
    sg->mirror = c.mirror;
    sg->buffer_bytes = c.buffer_bytes;
    for (sg->depth = 0; sg->depth < c.depth; sg->depth++) {
        ring_buffer *rb = &sg->ring[sg->depth];
        st = acg_pinned_alloc(dev, sg->buffer_bytes, &rb->host);
        if (st == ACG_OK) {
            st = acg_event_create(dev, &rb->event);
            if (st != ACG_OK) {
                acg_pinned_free(rb->host);
                rb->host = NULL;
            }
        }
        if (st != ACG_OK) {
            acg__rethrow(st, fn);
            goto out_release_ring;
        }
    }
    if ((st = acg__handle_publish(sg, ACG__HANDLE_STAGER, &sg->obj.life, fn)) != ACG_OK) {
        goto out_release_ring;
    }
    *out = sg;
    return ACG_OK;

out_release_ring:
    ring_release(sg); /* nothing was queued: it cannot fail */
    acg__free(sg->ring);
out_free_stager:
    acg__engine_obj_free(&sg->obj);
    return st;
}

acg_status acg_stager_destroy(acg_stager *stager) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stager_destroy";
    if (stager == NULL) {
        return ACG_OK;
    }
    ACG__TRY(check_stager(stager, fn));
    /* Freeing pinned memory would invalidate the capture: refuse with nothing touched. */
    ACG__TRY(acg__device_check_not_capturing(stager->obj.dev, fn));
    /* Waits for other threads' calls on the stager (an upload) to return. */
    ACG__TRY(acg__retire(stager, ACG__HANDLE_STAGER, fn, "stager"));
    pthread_mutex_lock(&stager->obj.lock);
    acg_status st = ring_release(stager);
    pthread_mutex_unlock(&stager->obj.lock);
    if (st != ACG_OK) {
        acg__handle_restore(stager);
        return acg__rethrow(st, fn); /* what is left stays usable for another try */
    }
    mirror_clear(stager);
    acg__free(stager->entries);
    acg__free(stager->ring);
    acg__engine_obj_release(&stager->obj);
    return ACG_OK;
}

/* ---- the ring ----------------------------------------------------------------------------- */

/* Makes a ring buffer free to write: waits for its copy only when it is still in flight. */
static acg_status ring_settle(acg_stager *sg, ring_buffer *rb, const char *fn) {
    if (!rb->in_flight) {
        return ACG_OK;
    }
    acg_status st = acg_event_query(rb->event);
    if (st == ACG_NOT_READY) {
        sg->stats.waits++;
        st = acg_event_synchronize(rb->event);
    }
    if (st != ACG_OK) {
        return acg__rethrow(st, fn);
    }
    rb->in_flight = false;
    return ACG_OK;
}

/* Grows every ring buffer to max(need, 2 x current), after every in-flight copy ran. All or
 * nothing: on failure the ring keeps its old buffers. */
static acg_status ring_grow(acg_stager *sg, size_t need, const char *fn) {
    size_t bytes = sg->buffer_bytes > SIZE_MAX / 2 ? SIZE_MAX : 2 * sg->buffer_bytes;
    if (bytes < need) {
        bytes = need;
    }
    acg_status st = ACG_OK;
    for (uint32_t i = 0; i < sg->depth && st == ACG_OK; i++) {
        st = ring_settle(sg, &sg->ring[i], fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    void **fresh = acg__calloc(sg->depth, sizeof *fresh);
    if (fresh == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    uint32_t made = 0;
    for (; made < sg->depth; made++) {
        st = acg_pinned_alloc(sg->obj.dev, bytes, &fresh[made]);
        if (st != ACG_OK) {
            acg__rethrow(st, fn);
            goto out_free_fresh;
        }
    }
    for (uint32_t i = 0; i < sg->depth; i++) {
        acg_status fst = acg_pinned_free(sg->ring[i].host);
        if (fst != ACG_OK) {
            /* Only a capture begun meanwhile on the device refuses it; the memory stays
             * registered, so closing the device will say so. */
            acg__log(ACG_LOG_ERROR, "%s: could not free an outgrown ring buffer: %s", fn,
                     acg_last_error());
        }
        sg->ring[i].host = fresh[i];
    }
    acg__free(fresh);
    sg->buffer_bytes = bytes;
    sg->stats.growths++;
    return ACG_OK;

out_free_fresh:
    while (made > 0) {
        acg_pinned_free(fresh[--made]);
    }
    acg__free(fresh);
    return st;
}

/* Writes n values then (padded_n - n) copies of pad, elem bytes each, into p. */
static void pack(unsigned char *p, const void *values, size_t n, size_t elem, const void *pad,
                 size_t padded_n) {
    if (n > 0) {
        memcpy(p, values, n * elem);
    }
    size_t pad_bytes = (padded_n - n) * elem;
    if (pad_bytes == 0) {
        return;
    }
    unsigned char *q = p + n * elem;
    memcpy(q, pad, elem);
    /* Doubling copies of what is already written: log2(pad_bytes) memcpy calls. */
    for (size_t done = elem; done < pad_bytes;) {
        size_t c = done < pad_bytes - done ? done : pad_bytes - done;
        memcpy(q + done, q, c);
        done += c;
    }
}

/* ---- the mirror --------------------------------------------------------------------------- */

static bool mirror_matches(const mirror_entry *e, const void *values, size_t n, size_t elem,
                           const void *pad, size_t padded_n) {
    if (n > 0 && memcmp(e->bytes, values, n * elem) != 0) {
        return false;
    }
    for (size_t i = n; i < padded_n; i++) {
        if (memcmp(e->bytes + i * elem, pad, elem) != 0) {
            return false;
        }
    }
    return true;
}

static mirror_entry *mirror_find(acg_stager *sg, const acg_buffer *dst, size_t offset,
                                 size_t size) {
    for (uint32_t i = 0; i < sg->n_entries; i++) {
        mirror_entry *e = &sg->entries[i];
        if (e->dst == dst && e->offset == offset && e->size == size) {
            return e;
        }
    }
    return NULL;
}

/* Forgets what the mirror knew about dst's bytes [offset, offset+size) (size SIZE_MAX: all). */
static void mirror_forget(acg_stager *sg, const acg_buffer *dst, size_t offset, size_t size) {
    for (uint32_t i = 0; i < sg->n_entries;) {
        mirror_entry *e = &sg->entries[i];
        bool overlap =
            e->dst == dst &&
            (size == SIZE_MAX || (e->offset < offset + size && offset < e->offset + e->size));
        if (!overlap) {
            i++;
            continue;
        }
        acg__free(e->bytes);
        *e = sg->entries[--sg->n_entries];
    }
}

/* ---- uploads ------------------------------------------------------------------------------ */

static acg_status check_upload(const acg_stager *sg, acg_stream *stream, const acg_buffer *dst,
                               size_t dst_offset, const void *values, size_t n, size_t elem_size,
                               const void *pad, size_t padded_n, size_t *bytes, const char *fn) {
    ACG__TRY(check_stager(sg, fn));
    if (stream == NULL || dst == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %s is NULL", fn,
                          stream == NULL ? "stream" : "dst");
    }
    if (elem_size == 0 || padded_n == 0 || padded_n < n || (values == NULL && n > 0) ||
        (pad == NULL && padded_n > n)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          elem_size == 0        ? "elem_size is 0"
                          : padded_n == 0       ? "padded_n is 0"
                          : padded_n < n        ? "padded_n is less than n"
                          : values == NULL && n ? "values is NULL"
                                                : "pad is NULL with padded_n > n");
    }
    /* The checks hold dst and the stream until the calling function returns. */
    ACG__TRY(acg__check_buffer(dst, NULL, fn, "dst"));
    if (acg__buffer_device(dst) != sg->obj.dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: dst belongs to %s, the stager to %s", fn,
                          acg__device_name(acg__buffer_device(dst)), acg__device_name(sg->obj.dev));
    }
    ACG__TRY(acg__engine_check_stream(stream, &sg->obj, "stager", fn));
    size_t size = acg_buffer_get_size(dst);
    if (padded_n > SIZE_MAX / elem_size || dst_offset > size ||
        padded_n * elem_size > size - dst_offset) {
        return acg__error(ACG_ERR_OUT_OF_RANGE,
                          "%s: %zu elements of %zu bytes at offset %zu leave the %zu-byte dst", fn,
                          padded_n, elem_size, dst_offset, size);
    }
    ACG__TRY(acg__engine_refuse_capture(stream,
                                        "a captured copy would read the ring buffer at every "
                                        "replay, after the ring reused it (upload before the "
                                        "capture, or into a static buffer the graph reads)",
                                        fn));
    *bytes = padded_n * elem_size;
    return ACG_OK;
}

/* What an upload did, for its trace event. */
typedef struct upload_outcome {
    size_t bytes;
    bool skipped; /* the mirror had the bytes: no copy */
    bool waited;  /* the host waited for a ring buffer's copy */
} upload_outcome;

static acg_status upload(acg_stager *sg, acg_stream *stream, acg_buffer *dst, size_t dst_offset,
                         const void *values, size_t n, size_t elem_size, const void *pad,
                         size_t padded_n, bool use_mirror, upload_outcome *done) {
    static const char fn[] = "acg_stager_upload";
    size_t bytes = 0;
    acg_status st =
        check_upload(sg, stream, dst, dst_offset, values, n, elem_size, pad, padded_n, &bytes, fn);
    if (st != ACG_OK) {
        return st;
    }
    done->bytes = bytes;
    pthread_mutex_lock(&sg->obj.lock);
    uint64_t waits = sg->stats.waits;
    mirror_entry *hit = NULL;
    if (sg->mirror && use_mirror) {
        hit = mirror_find(sg, dst, dst_offset, bytes);
    }
    if (hit != NULL && mirror_matches(hit, values, n, elem_size, pad, padded_n)) {
        /* The bytes are there once the copy that wrote them ran: order stream after it. */
        st = acg_stream_wait_event(stream, sg->ring[hit->ring].event);
        if (st == ACG_OK) {
            sg->stats.skipped++;
            done->skipped = true;
        } else {
            acg__rethrow(st, fn);
        }
        goto out_unlock;
    }
    if (bytes > sg->buffer_bytes && (st = ring_grow(sg, bytes, fn)) != ACG_OK) {
        goto out_unlock;
    }
    mirror_forget(sg, dst, dst_offset, bytes);
    unsigned char *remember = NULL;
    if (sg->mirror && use_mirror) {
        if (!acg__grow((void **)&sg->entries, &sg->cap_entries, sg->n_entries + 1,
                       sizeof *sg->entries) ||
            (remember = acg__alloc(bytes)) == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for the mirror", fn);
            goto out_unlock;
        }
    }
    uint32_t slot = sg->next;
    ring_buffer *rb = &sg->ring[slot];
    if ((st = ring_settle(sg, rb, fn)) != ACG_OK) {
        goto out_free_remember;
    }
    pack(rb->host, values, n, elem_size, pad, padded_n);
    st = acg_copy_h2d(stream, dst, dst_offset, rb->host, bytes);
    if (st != ACG_OK) {
        acg__rethrow(st, fn);
        goto out_free_remember;
    }
    sg->next = (slot + 1) % sg->depth;
    sg->stats.copies++;
    sg->stats.bytes += bytes;
    st = acg_event_record(rb->event, stream);
    if (st != ACG_OK) {
        /* The copy is queued but nothing marks its end: wait for it here instead. */
        acg__rethrow(st, fn);
        acg_stream_synchronize(stream);
        goto out_free_remember;
    }
    rb->in_flight = true;
    if (remember != NULL) {
        memcpy(remember, rb->host, bytes);
        sg->entries[sg->n_entries++] = (mirror_entry){
            .dst = dst, .offset = dst_offset, .size = bytes, .bytes = remember, .ring = slot};
    }
    done->waited = sg->stats.waits != waits;
    pthread_mutex_unlock(&sg->obj.lock);
    return ACG_OK;

out_free_remember:
    acg__free(remember);
out_unlock:
    done->waited = sg->stats.waits != waits;
    pthread_mutex_unlock(&sg->obj.lock);
    return st;
}

acg_status acg__stager_upload(acg_stager *sg, acg_stream *stream, acg_buffer *dst,
                              size_t dst_offset, const void *values, size_t n, size_t elem_size,
                              const void *pad, size_t padded_n, bool use_mirror) {
    upload_outcome done = {0, false, false};
    if (!acg__trace_on(ACG_TRACE_ENGINE)) {
        return upload(sg, stream, dst, dst_offset, values, n, elem_size, pad, padded_n, use_mirror,
                      &done);
    }
    acg__trace_span span;
    acg__trace_begin(&span, ACG_TRACE_ENGINE, "stager upload", NULL, 0);
    acg_status st =
        upload(sg, stream, dst, dst_offset, values, n, elem_size, pad, padded_n, use_mirror, &done);
    acg_trace_arg args[] = {ACG__TRACE_B("ok", st == ACG_OK), ACG__TRACE_U("bytes", done.bytes),
                            ACG__TRACE_B("skipped", done.skipped),
                            ACG__TRACE_B("waited", done.waited)};
    acg__trace_end(&span, args, ACG__TRACE_N(args));
    return st;
}

acg_status acg_stager_upload(acg_stager *stager, acg_stream *stream, acg_buffer *dst,
                             size_t dst_offset, const void *values, size_t n, size_t elem_size,
                             const void *pad, size_t padded_n) {
    ACG__CALL_SCOPE;
    return acg__stager_upload(stager, stream, dst, dst_offset, values, n, elem_size, pad, padded_n,
                              true);
}

acg_status acg_stager_invalidate(acg_stager *stager, const acg_buffer *dst) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stager_invalidate";
    ACG__TRY(check_stager(stager, fn));
    if (dst == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: dst is NULL", fn);
    }
    pthread_mutex_lock(&stager->obj.lock);
    mirror_forget(stager, dst, 0, SIZE_MAX);
    pthread_mutex_unlock(&stager->obj.lock);
    return ACG_OK;
}

acg_status acg_stager_get_stats(const acg_stager *stager, acg_stager_stats *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_stager_get_stats";
    ACG__TRY(check_stager(stager, fn));
    return acg__engine_write_stats(&stager->obj, &stager->stats, sizeof stager->stats, out,
                                   "acg_stager_stats", fn);
}
