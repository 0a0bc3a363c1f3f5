/* device.c — opening devices by spec, the capability cache, and device-wide synchronization. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h"

acg_status acg__check_device(const acg_device *dev, const char *fn) {
    if (!acg__handle_use(dev, ACG__HANDLE_DEVICE)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: device %p is not an open device", fn,
                          (const void *)dev);
    }
    return ACG_OK;
}

/* Splits "backend[:N][?options]" into name, index and options (what follows '?', "" when
 * absent, for the backend to read); ACG_ERR_INVALID_ARGUMENT when malformed. */
static acg_status parse_spec(const char *spec, char *name, size_t name_size, int *index,
                             char *options, size_t options_size) {
    const char *query = strchr(spec, '?');
    size_t head = query ? (size_t)(query - spec) : strlen(spec);
    const char *colon = memchr(spec, ':', head);
    size_t len = colon ? (size_t)(colon - spec) : head;
    if (len == 0 || len >= name_size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "acg_device_open: spec \"%s\" is not backend, backend:N or "
                          "backend:N?options",
                          spec);
    }
    memcpy(name, spec, len);
    name[len] = '\0';
    *index = 0;
    if (colon != NULL) {
        const char *digits = colon + 1;
        size_t n_digits = head - len - 1;
        if (n_digits == 0 || n_digits > 6) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "acg_device_open: spec \"%s\" is not backend, backend:N or "
                              "backend:N?options",
                              spec);
        }
        int v = 0;
        for (size_t i = 0; i < n_digits; i++) {
            if (!isdigit((unsigned char)digits[i])) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "acg_device_open: spec \"%s\": device index \"%.*s\" is not a "
                                  "number",
                                  spec, (int)n_digits, digits);
            }
            v = v * 10 + (digits[i] - '0');
        }
        *index = v;
    }
    const char *opts = query ? query + 1 : "";
    if ((query != NULL && *opts == '\0') || strlen(opts) >= options_size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "acg_device_open: spec \"%s\": options after '?' must be key=value "
                          "(at most %zu characters)",
                          spec, options_size - 1);
    }
    snprintf(options, options_size, "%s", opts);
    return ACG_OK;
}

/* What the backend's table cannot do is not in the capability, whatever the backend said. */
static void mask_capability(const acg_backend_i *vt, acg_capability *cap) {
    cap->size = sizeof *cap;
    cap->backend = vt->name;
    bool native = ACG__SLOT(vt, capture_begin, 2) && ACG__SLOT(vt, capture_join, 2) &&
                  ACG__SLOT(vt, capture_end, 2) && ACG__SLOT(vt, capture_abort, 2) &&
                  vt->graph_launch != NULL && vt->graph_destroy != NULL;
    cap->native_capture = cap->native_capture && native;
    cap->graphs = cap->graphs && (vt->graph_instantiate != NULL || cap->native_capture);
    cap->graph_update = cap->graphs && cap->graph_update && vt->graph_update != NULL;
    /* A node update without its own slot rebuilds the graph through graph_update. */
    cap->graph_node_update = cap->graphs && cap->graph_node_update &&
                             (ACG__SLOT(vt, graph_update_node, 6) != NULL || cap->graph_update);
    cap->graph_node_update_grid = cap->graph_node_update && cap->graph_node_update_grid;
    cap->graph_pinned_replay = cap->graphs && cap->graph_pinned_replay;
    cap->graph_host_functions =
        cap->graphs && cap->graph_host_functions && ACG__SLOT(vt, host_launch, 2) != NULL;
    /* A backend that records natively opens and closes loops in its recording. */
    cap->graph_loops = cap->graphs && cap->graph_loops &&
                       (!cap->native_capture || (ACG__SLOT(vt, loop_begin, 8) != NULL &&
                                                 ACG__SLOT(vt, loop_end, 8) != NULL));
    if (vt->pinned_alloc == NULL) {
        cap->pinned_memory = false;
    }
    cap->collectives = cap->collectives && ACG__SLOT(vt, group_create, 4) != NULL &&
                       ACG__SLOT(vt, group_destroy, 4) != NULL &&
                       ACG__SLOT(vt, allreduce, 4) != NULL;
    cap->pinned_register = cap->pinned_register && ACG__SLOT(vt, pinned_register, 3) != NULL &&
                           ACG__SLOT(vt, pinned_unregister, 3) != NULL;
}

acg_status acg_device_describe(const char *backend, int index, acg_capability *out) {
    ACG__CALL_SCOPE;
    if (backend == NULL || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_device_describe: NULL argument");
    }
    const acg_backend_i *vt = acg__backend_find(backend);
    if (vt == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_describe: no backend \"%s\" in this build",
                          backend);
    }
    int n = 0;
    ACG__TRY(acg__backend_devices(vt, &n, "acg_device_describe"));
    if (index < 0 || index >= n) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_describe: %s has %d device(s), no %d",
                          backend, n, index);
    }
    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    ACG__TRY(vt->describe(index, &cap));
    mask_capability(vt, &cap);
    return acg__output_write(out, &cap, sizeof cap, "acg_capability", "acg_device_describe");
}

/* Whether the device suits pass `pass` of the default's choice (acg_device_get_default): 0 an
 * accelerator with graphs, 1 any accelerator, 2 a device that runs kernels on acg's own host
 * threads (host_threads) rather than a driver's CPU device, 3 any device. */
static bool default_pass(int pass, const acg_capability *cap) {
    switch (pass) {
    case 0:
        return !cap->host_cpu && cap->graphs;
    case 1:
        return !cap->host_cpu;
    case 2:
        return cap->host_threads > 0;
    default:
        return true;
    }
}

/* The first available device of the earliest pass of default_pass, as "backend:N". */
static acg_status pick_best(char *spec, size_t size, const char *fn) {
    for (int pass = 0; pass < 4; pass++) {
        for (size_t i = 0; i < acg__backend_count(); i++) {
            acg_backend_info info = ACG_BACKEND_INFO_INIT;
            if (acg_backend_get_info(i, &info) != ACG_OK || !info.available) {
                continue;
            }
            for (int d = 0; d < info.device_count; d++) {
                acg_capability cap = {.size = sizeof cap};
                if (acg_device_describe(info.name, d, &cap) == ACG_OK && cap.available &&
                    default_pass(pass, &cap)) {
                    snprintf(spec, size, "%s:%d", info.name, d);
                    return ACG_OK;
                }
            }
        }
    }
    return acg__error(ACG_ERR_UNAVAILABLE, "%s: no backend has a usable device", fn);
}

/* The spec a NULL spec means: $ACG_DEVICE, else pick_best's. */
static acg_status default_spec(char *spec, size_t size, const char *fn) {
    const char *env = acg__env_get("ACG_DEVICE");
    if (env != NULL && *env != '\0') {
        if (strlen(env) >= size) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: ACG_DEVICE=\"%.64s\" is %zu bytes, more than the %zu the "
                              "spec may hold",
                              fn, env, strlen(env), size - 1);
        }
        snprintf(spec, size, "%s", env);
        return ACG_OK;
    }
    char best[48];
    acg_status st = pick_best(best, sizeof best, fn);
    if (st == ACG_OK && strlen(best) >= size) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the default \"%s\" needs %zu bytes, not %zu",
                        fn, best, strlen(best) + 1, size);
    }
    if (st == ACG_OK) {
        snprintf(spec, size, "%s", best);
    }
    return st;
}

acg_status acg_device_get_default(char *spec, size_t size) {
    ACG__CALL_SCOPE;
    if (spec == NULL || size == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_device_get_default: %s",
                          spec == NULL ? "spec is NULL" : "size is 0");
    }
    acg__env_check_once();
    return default_spec(spec, size, "acg_device_get_default");
}

acg_status acg_device_open(const char *spec, acg_device **out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__check_arg(out, "out", "acg_device_open"));
    acg__env_check_once();
    char chosen[256];
    if (spec == NULL) {
        ACG__TRY(default_spec(chosen, sizeof chosen, "acg_device_open"));
        spec = chosen;
    }
    char name[24], options[48];
    int index = 0;
    ACG__TRY(parse_spec(spec, name, sizeof name, &index, options, sizeof options));
    const acg_backend_i *vt = acg__backend_find(name);
    if (vt == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_open: no backend \"%s\" in this build",
                          name);
    }
    if (vt->version < 1 || vt->version > ACG_BACKEND_VERSION) {
        return acg__error(ACG_ERR_INTERNAL, "acg_device_open: backend %s has table version %d",
                          name, vt->version);
    }
    int n = 0;
    ACG__TRY(acg__backend_devices(vt, &n, "acg_device_open"));
    if (index >= n) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_open: %s has %d device(s), no %d", name, n,
                          index);
    }

    acg_device *dev = acg__calloc(1, sizeof *dev);
    if (dev == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
    }
    dev->vt = vt;
    atomic_init(&dev->fault, ACG__FAULT_NONE);
    dev->index = index;
    snprintf(dev->spec, sizeof dev->spec, "%s:%d%s%s", name, index, *options ? "?" : "", options);
    static _Atomic unsigned long long opens;
    snprintf(dev->name, sizeof dev->name, "%s (open #%llu)", dev->spec,
             atomic_fetch_add(&opens, 1) + 1);
    acg_status st = vt->device_open(index, options, &dev->impl);
    if (st != ACG_OK) {
        goto out_free_dev;
    }
    st = vt->query_capability(dev->impl, &dev->cap);
    dev->capability_queries++;
    if (st != ACG_OK) {
        goto out_close;
    }
    mask_capability(vt, &dev->cap);
    dev->retain_discarded = vt->retain_discarded_graphs;
    pthread_mutex_init(&dev->lock, NULL);
    pthread_cond_init(&dev->ended, NULL);
    st = acg__handle_add(dev, ACG__HANDLE_DEVICE, &dev->life);
    if (st != ACG_OK) {
        acg__error(st, "acg_device_open: out of memory");
        goto out_mutex;
    }
    acg__log(ACG_LOG_INFO, "opened %s (%s)", dev->spec, dev->cap.name);
    *out = dev;
    return ACG_OK;

out_mutex:
    pthread_cond_destroy(&dev->ended);
    pthread_mutex_destroy(&dev->lock);
out_close:
    vt->device_close(dev->impl);
out_free_dev:
    acg__free(dev);
    return st;
}

/* ACG_ERR_IN_USE naming what still lives on the device, else ACG_OK. */
static acg_status check_empty(acg_device *dev, const char *fn) {
    pthread_mutex_lock(&dev->lock);
    acg_status st = ACG_OK;
    uint32_t live = dev->n_buffers + dev->n_pinned + dev->n_streams + dev->n_events +
                    dev->n_graphs + dev->n_pools + dev->n_groups;
    if (live != 0) {
        st = acg__error(ACG_ERR_IN_USE,
                        "%s: %s still has %u buffer(s), %u pinned allocation(s) or "
                        "registration(s), %u stream(s), %u event(s), %u graph(s), %u graph "
                        "pool(s), %u device group(s)",
                        fn, dev->spec, dev->n_buffers, dev->n_pinned, dev->n_streams, dev->n_events,
                        dev->n_graphs, dev->n_pools, dev->n_groups);
    }
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg_device_close(acg_device *dev) {
    static const char fn[] = "acg_device_close";
    ACG__CALL_SCOPE;
    if (dev == NULL) {
        return ACG_OK;
    }
    /* Refuse a device in use before retiring it, so other threads' calls are not disturbed. */
    ACG__TRY(acg__check_device(dev, fn));
    ACG__TRY(check_empty(dev, fn));
    ACG__TRY(acg__retire(dev, ACG__HANDLE_DEVICE, fn, "device"));
    /* No call can start using the device now, so nothing can be created on it behind this
     * check. */
    acg_status st = check_empty(dev, fn);
    if (st != ACG_OK) {
        acg__handle_restore(dev);
        return st;
    }
    /* A destroy of the device's last object holds the device from before its object left the
     * counts until it returns, even across the retire: with the counts at zero no such hold
     * can start any more, so wait for the ones that did. */
    acg__handle_drain(dev);
    acg__device_kernels_free(dev);
    acg__handle_remove(dev);
    dev->vt->device_close(dev->impl);
    pthread_cond_destroy(&dev->ended);
    pthread_mutex_destroy(&dev->lock);
    acg__free(dev);
    return ACG_OK;
}

acg_status acg_device_get_native(acg_device *dev, acg_native_device *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_get_native";
    ACG__TRY(acg__check_device_usable(dev, fn));
    ACG__TRY(acg__output_check(out, sizeof *out, "acg_native_device", fn));
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    nd.ordinal = dev->index;
    acg_status (*get)(acg__bk_device *, acg_native_device *) =
        ACG__SLOT(dev->vt, device_get_native, 6);
    if (get != NULL) {
        ACG__TRY(acg__device_fault(dev, get(dev->impl, &nd)));
    }
    nd.size = sizeof nd;
    return acg__output_write(out, &nd, sizeof nd, "acg_native_device", fn);
}

const acg_capability *acg_device_get_capability(const acg_device *dev) {
    ACG__CALL_SCOPE;
    if (acg__check_device(dev, "acg_device_get_capability") != ACG_OK) {
        return NULL;
    }
    return &dev->cap;
}

const char *acg_device_get_spec(const acg_device *dev) {
    ACG__CALL_SCOPE;
    if (acg__check_device(dev, "acg_device_get_spec") != ACG_OK) {
        return NULL;
    }
    return dev->spec;
}

uint64_t acg__device_capability_queries(const acg_device *dev) {
    return acg__handle_valid(dev, ACG__HANDLE_DEVICE) ? dev->capability_queries : 0;
}

static void keep_first(acg_status *result, acg_status st) {
    if (*result == ACG_OK) {
        *result = st;
    }
}

enum { WAIT_BATCH = 32 };

/* One batch of acg__device_wait_streams: up to WAIT_BATCH of the matching streams created
 * before *cursor (dev->streams runs newest first), held by this batch's own call scope. */
static acg_status wait_batch(acg_device *dev, uint64_t mask, uint64_t *cursor, const char *op,
                             bool *more) {
    ACG__CALL_SCOPE;
    struct {
        acg_stream *s;
        bool marked;
    } w[WAIT_BATCH];
    uint32_t n = 0;
    acg_status result = ACG_OK;
    *more = false;
    pthread_mutex_lock(&dev->lock);
    for (acg_stream *s = dev->streams; s != NULL; s = s->next) {
        if (s->serial >= *cursor || (s->use_bit & mask) == 0) {
            continue;
        }
        if (n == WAIT_BATCH) {
            *more = true;
            break;
        }
        *cursor = s->serial;
        if (acg__handle_use(s, ACG__HANDLE_STREAM)) {
            w[n++].s = s;
        } else {
            /* Its destroy is under way, but the stream stays linked (and alive) until that
             * destroy gets this lock: wait for it here. */
            keep_first(&result, dev->vt->stream_synchronize(s->impl));
        }
    }
    pthread_mutex_unlock(&dev->lock);
    for (uint32_t i = 0; i < n; i++) {
        acg_stream *s = w[i].s;
        /* The stream's lock orders the record with its other calls; a capture begun on it
         * since the caller checked would record the mark instead of running it. */
        acg__capture *c = acg__stream_enter(s);
        if (c != NULL && c->state == ACG_CAPTURE_ACTIVE) {
            acg__capture_invalidate(c, ACG_ERR_CAPTURE_INVALIDATED,
                                    "%s during a capture on %s invalidated the capture", op,
                                    dev->spec);
        }
        w[i].marked = dev->vt->event_record(s->mark, s->impl) == ACG_OK;
        if (!w[i].marked) {
            /* No mark to wait on: wait for the stream itself, under its lock only. */
            keep_first(&result, dev->vt->stream_synchronize(s->impl));
        }
        acg__stream_leave(s, c);
    }
    /* The streams stay held until the batch's scope ends, so their marks outlive the waits. */
    for (uint32_t i = 0; i < n; i++) {
        if (w[i].marked) {
            keep_first(&result, dev->vt->event_synchronize(w[i].s->mark));
        }
    }
    return result;
}

acg_status acg__device_wait_streams(acg_device *dev, uint64_t mask, const char *op) {
    acg_status result = ACG_OK;
    uint64_t cursor = UINT64_MAX;
    bool more = mask != 0;
    while (more) {
        keep_first(&result, wait_batch(dev, mask, &cursor, op, &more));
    }
    return acg__device_fault(dev, result);
}

void acg__device_await_endings(acg_device *dev) {
    while (dev->n_ending != 0) {
        pthread_cond_wait(&dev->ended, &dev->lock);
    }
}

acg_status acg_device_get_memory_info(acg_device *dev, uint64_t *free_bytes,
                                      uint64_t *total_bytes) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_get_memory_info";
    ACG__TRY(acg__check_device_usable(dev, fn));
    if (free_bytes == NULL || total_bytes == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: NULL output", fn);
    }
    acg_status (*query)(acg__bk_device *, uint64_t *, uint64_t *) =
        ACG__SLOT(dev->vt, memory_query, 2);
    if (query == NULL) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: %s cannot tell its free memory", fn, dev->spec);
    }
    uint64_t f = 0, t = 0;
    ACG__TRY(acg__device_fault(dev, query(dev->impl, &f, &t)));
    uint64_t override = atomic_load(&dev->free_override);
    *free_bytes = override != 0 ? override : f;
    *total_bytes = t;
    return ACG_OK;
}

void acg__device_set_free_memory(acg_device *dev, uint64_t bytes) {
    atomic_store(&dev->free_override, bytes);
}

/* ---- device faults ----------------------------------------------------------------------- */

void acg__device_latch(acg_device *dev) {
    int none = ACG__FAULT_NONE;
    if (atomic_load_explicit(&dev->fault, memory_order_relaxed) == ACG__FAULT_NONE &&
        atomic_compare_exchange_strong(&dev->fault, &none, ACG__FAULT_LATCHING)) {
        snprintf(dev->lost_why, sizeof dev->lost_why, "%s",
                 *acg_last_error() ? acg_last_error() : acg_status_string(ACG_ERR_DEVICE_LOST));
        atomic_store_explicit(&dev->fault, ACG__FAULT_LOST, memory_order_release);
        acg__log(ACG_LOG_ERROR, "%s is lost: %s", dev->name, dev->lost_why);
    }
}

acg_status acg__device_lost_error(const acg_device *dev, const char *fn) {
    return acg__error(ACG_ERR_DEVICE_LOST,
                      "%s: %s was lost to an earlier fault (%s); destroy its objects, close it "
                      "and open the device again",
                      fn, dev->name, dev->lost_why);
}

acg_status acg_device_get_async_error(acg_device *dev) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_get_async_error";
    ACG__TRY(acg__check_device_usable(dev, fn));
    acg_status (*get)(acg__bk_device *) = ACG__SLOT(dev->vt, device_get_async_error, 2);
    return get != NULL ? acg__device_fault(dev, get(dev->impl)) : ACG_OK;
}

acg_status acg__device_inject_fault(acg_device *dev) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__check_device(dev, "acg__device_inject_fault"));
    void (*inject)(acg__bk_device *) = ACG__SLOT(dev->vt, inject_fault, 2);
    if (inject == NULL) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s cannot inject faults", dev->spec);
    }
    inject(dev->impl);
    return ACG_OK;
}

acg_status acg_device_synchronize(acg_device *dev) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_synchronize";
    ACG__TRY(acg__check_device_usable(dev, fn));
    ACG__TRY(acg__device_lock_op(dev, fn));
    pthread_mutex_unlock(&dev->lock);
    return acg__device_wait_streams(dev, ~(uint64_t)0, fn);
}

acg_status acg__device_mem_alloc(acg_device *dev, size_t size, acg__bk_mem **mem) {
    acg_status st = acg__device_fault(dev, dev->vt->buffer_alloc(dev->impl, size, mem));
    if (st == ACG_OK) {
        acg_memory_stats *m = &dev->memory;
        m->allocations++;
        m->bytes_in_use += size;
        if (m->bytes_in_use > m->peak_bytes) {
            m->peak_bytes = m->bytes_in_use;
        }
    }
    return st;
}

void acg__device_mem_free(acg_device *dev, acg__bk_mem *mem, size_t size) {
    dev->vt->buffer_free(dev->impl, mem);
    dev->memory.bytes_in_use -= size;
}

acg_status acg_device_get_memory_stats(const acg_device *dev, acg_memory_stats *out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__check_device(dev, "acg_device_get_memory_stats"));
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_device_get_memory_stats: out is NULL");
    }
    acg_device *d = (acg_device *)dev;
    pthread_mutex_lock(&d->lock);
    acg_memory_stats m = d->memory;
    pthread_mutex_unlock(&d->lock);
    return acg__output_write(out, &m, sizeof m, "acg_memory_stats", "acg_device_get_memory_stats");
}

acg_status acg_device_reset_peak_memory(acg_device *dev) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__check_device(dev, "acg_device_reset_peak_memory"));
    pthread_mutex_lock(&dev->lock);
    dev->memory.peak_bytes = dev->memory.bytes_in_use;
    pthread_mutex_unlock(&dev->lock);
    return ACG_OK;
}

void acg__device_set_retain_discarded(acg_device *dev, bool retain) {
    pthread_mutex_lock(&dev->lock);
    dev->retain_discarded = retain;
    pthread_mutex_unlock(&dev->lock);
}

void acg__device_set_node_update_fallback(acg_device *dev, bool fallback) {
    pthread_mutex_lock(&dev->lock);
    dev->node_update_fallback = fallback;
    pthread_mutex_unlock(&dev->lock);
}

void acg__device_deny_node_update_grid(acg_device *dev) {
    pthread_mutex_lock(&dev->lock);
    dev->cap.graph_node_update_grid = false;
    pthread_mutex_unlock(&dev->lock);
}

acg_device *acg__stream_device(const acg_stream *s) { return s->dev; }

acg_device *acg__buffer_device(const acg_buffer *buf) { return buf->dev; }

const char *acg__device_name(const acg_device *dev) { return dev->name; }
