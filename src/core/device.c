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

/* Splits "backend[:N]" into name and index; ACG_ERR_INVALID_ARGUMENT when malformed. */
static acg_status parse_spec(const char *spec, char *name, size_t name_size, int *index) {
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= name_size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "acg_device_open: spec \"%s\" is not backend or backend:N", spec);
    }
    memcpy(name, spec, len);
    name[len] = '\0';
    *index = 0;
    if (colon != NULL) {
        const char *digits = colon + 1;
        if (*digits == '\0' || strlen(digits) > 6) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "acg_device_open: spec \"%s\" is not backend or backend:N", spec);
        }
        for (const char *d = digits; *d; d++) {
            if (!isdigit((unsigned char)*d)) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "acg_device_open: spec \"%s\": device index \"%s\" is not a "
                                  "number",
                                  spec, digits);
            }
        }
        *index = atoi(digits);
    }
    return ACG_OK;
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
    acg_status st = acg__backend_devices(vt, &n, "acg_device_describe");
    if (st != ACG_OK) {
        return st;
    }
    if (index < 0 || index >= n) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_describe: %s has %d device(s), no %d",
                          backend, n, index);
    }
    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    st = vt->describe(index, &cap);
    if (st != ACG_OK) {
        return st;
    }
    cap.size = sizeof cap;
    cap.backend = vt->name;
    cap.graphs = cap.graphs && vt->graph_instantiate != NULL;
    cap.graph_update = cap.graphs && cap.graph_update && vt->graph_update != NULL;
    *out = cap;
    return ACG_OK;
}

/* The first device of the most preferred available backend that has graphs, else any. */
static acg_status pick_best(char *spec, size_t size) {
    for (int want_graphs = 1; want_graphs >= 0; want_graphs--) {
        for (size_t i = 0; i < acg__backend_count(); i++) {
            acg_backend_info info;
            if (acg_backend_get_info(i, &info) != ACG_OK || !info.available) {
                continue;
            }
            for (int d = 0; d < info.device_count; d++) {
                acg_capability cap;
                if (acg_device_describe(info.name, d, &cap) == ACG_OK && cap.available &&
                    (cap.graphs || !want_graphs)) {
                    snprintf(spec, size, "%s:%d", info.name, d);
                    return ACG_OK;
                }
            }
        }
    }
    return acg__error(ACG_ERR_UNAVAILABLE, "acg_device_open: no backend has a usable device");
}

acg_status acg_device_open(const char *spec, acg_device **out) {
    ACG__CALL_SCOPE;
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_device_open: out is NULL");
    }
    acg__env_check_once();
    char best[48];
    if (spec == NULL) {
        spec = acg__env_get("ACG_DEVICE");
        if (spec == NULL || *spec == '\0') {
            acg_status st = pick_best(best, sizeof best);
            if (st != ACG_OK) {
                return st;
            }
            spec = best;
        }
    }
    char name[24];
    int index = 0;
    acg_status st = parse_spec(spec, name, sizeof name, &index);
    if (st != ACG_OK) {
        return st;
    }
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
    st = acg__backend_devices(vt, &n, "acg_device_open");
    if (st != ACG_OK) {
        return st;
    }
    if (index >= n) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_open: %s has %d device(s), no %d", name, n,
                          index);
    }

    size_t n_kernels = 0;
    acg__kernel_catalogue(&n_kernels);
    acg_device *dev = acg__calloc(1, sizeof *dev);
    if (dev == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
    }
    dev->kernels = acg__calloc(n_kernels, sizeof *dev->kernels);
    if (dev->kernels == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_device_open: out of memory");
        goto out_free_dev;
    }
    dev->vt = vt;
    dev->index = index;
    snprintf(dev->spec, sizeof dev->spec, "%s:%d", name, index);
    static _Atomic unsigned long long opens;
    snprintf(dev->name, sizeof dev->name, "%s (open #%llu)", dev->spec,
             atomic_fetch_add(&opens, 1) + 1);
    st = vt->device_open(index, &dev->impl);
    if (st != ACG_OK) {
        goto out_free_kernels;
    }
    st = vt->query_capability(dev->impl, &dev->cap);
    dev->capability_queries++;
    if (st != ACG_OK) {
        goto out_close;
    }
    dev->cap.size = sizeof dev->cap;
    dev->cap.backend = vt->name;
    dev->cap.graphs = dev->cap.graphs && vt->graph_instantiate != NULL;
    dev->cap.graph_update = dev->cap.graphs && dev->cap.graph_update && vt->graph_update != NULL;
    if (vt->pinned_alloc == NULL) {
        dev->cap.pinned_memory = false;
    }
    dev->retain_discarded = vt->retain_discarded_graphs;
    pthread_mutex_init(&dev->lock, NULL);
    st = acg__handle_add(dev, ACG__HANDLE_DEVICE, &dev->life);
    if (st != ACG_OK) {
        acg__error(st, "acg_device_open: out of memory");
        goto out_mutex;
    }
    acg__log(ACG_LOG_INFO, "opened %s (%s)", dev->spec, dev->cap.name);
    *out = dev;
    return ACG_OK;

out_mutex:
    pthread_mutex_destroy(&dev->lock);
out_close:
    vt->device_close(dev->impl);
out_free_kernels:
    acg__free(dev->kernels);
out_free_dev:
    acg__free(dev);
    return st;
}

/* ACG_ERR_IN_USE naming what still lives on the device, else ACG_OK. */
static acg_status check_empty(acg_device *dev, const char *fn) {
    pthread_mutex_lock(&dev->lock);
    acg_status st = ACG_OK;
    uint32_t live = dev->n_buffers + dev->n_pinned + dev->n_streams + dev->n_events +
                    dev->n_graphs + dev->n_pools;
    if (live != 0) {
        st = acg__error(ACG_ERR_IN_USE,
                        "%s: %s still has %u buffer(s), %u pinned allocation(s), %u stream(s), "
                        "%u event(s), %u graph(s), %u graph pool(s)",
                        fn, dev->spec, dev->n_buffers, dev->n_pinned, dev->n_streams, dev->n_events,
                        dev->n_graphs, dev->n_pools);
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
    acg_status st = acg__check_device(dev, fn);
    if (st == ACG_OK) {
        st = check_empty(dev, fn);
    }
    if (st == ACG_OK) {
        st = acg__retire(dev, ACG__HANDLE_DEVICE, fn, "device");
    }
    if (st != ACG_OK) {
        return st;
    }
    /* No other call uses the device now, so nothing can be created on it behind this check. */
    st = check_empty(dev, fn);
    if (st != ACG_OK) {
        acg__handle_restore(dev);
        return st;
    }
    size_t n_kernels = 0;
    acg__kernel_catalogue(&n_kernels);
    for (size_t i = 0; i < n_kernels; i++) {
        acg_kernel *k = dev->kernels[i];
        if (k != NULL) {
            /* A launch on another device's stream may still hold the kernel (and be refused). */
            acg__handle_retire(k, ACG__HANDLE_KERNEL, false);
            acg__handle_remove(k);
            if (dev->vt->kernel_unload != NULL) {
                dev->vt->kernel_unload(dev->impl, k->impl);
            }
            acg__free(k);
        }
    }
    acg__handle_remove(dev);
    dev->vt->device_close(dev->impl);
    pthread_mutex_destroy(&dev->lock);
    acg__free(dev->kernels);
    acg__free(dev);
    return ACG_OK;
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

acg_status acg__device_sync_locked(acg_device *dev) {
    acg_status result = ACG_OK;
    for (acg_stream *s = dev->streams; s != NULL; s = s->next) {
        acg_status st = dev->vt->stream_synchronize(s->impl);
        if (st != ACG_OK && result == ACG_OK) {
            result = st;
        }
    }
    return result;
}

acg_status acg_device_synchronize(acg_device *dev) {
    ACG__CALL_SCOPE;
    acg_status st = acg__check_device(dev, "acg_device_synchronize");
    if (st != ACG_OK) {
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    st = acg__invalidate_device_captures(dev, "acg_device_synchronize");
    if (st == ACG_OK) {
        st = acg__device_sync_locked(dev);
    }
    pthread_mutex_unlock(&dev->lock);
    return st;
}

acg_status acg__device_mem_alloc(acg_device *dev, size_t size, void **mem) {
    acg_status st = dev->vt->buffer_alloc(dev->impl, size, mem);
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

void acg__device_mem_free(acg_device *dev, void *mem, size_t size) {
    dev->vt->buffer_free(dev->impl, mem);
    dev->memory.bytes_in_use -= size;
}

acg_status acg_device_get_memory_stats(const acg_device *dev, acg_memory_stats *out) {
    ACG__CALL_SCOPE;
    acg_status st = acg__check_device(dev, "acg_device_get_memory_stats");
    if (st != ACG_OK) {
        return st;
    }
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_device_get_memory_stats: out is NULL");
    }
    acg_device *d = (acg_device *)dev;
    pthread_mutex_lock(&d->lock);
    *out = d->memory;
    pthread_mutex_unlock(&d->lock);
    return ACG_OK;
}

acg_status acg_device_reset_peak_memory(acg_device *dev) {
    ACG__CALL_SCOPE;
    acg_status st = acg__check_device(dev, "acg_device_reset_peak_memory");
    if (st != ACG_OK) {
        return st;
    }
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
