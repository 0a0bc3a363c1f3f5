/* kv.c — the paged KV cache: one K and one V buffer of fixed pages, a page allocator, and the
 * page list of every request.
 *
 * Page 0 of every layer is the sink page: zeroed at creation and never handed out, so padding
 * rows of a plan can point at it and read zeros. The free pages are a stack whose top is handed
 * out next; a released request's pages go back so that the next request gets them in the same
 * order. A reservation takes all the pages it needs or none.
 */
#include <string.h>

#include "engine-impl.h"

typedef struct kv_request {
    uint64_t id;
    uint32_t *pages; /* (cap_pages) page ids in token order */
    uint32_t n_pages, cap_pages;
} kv_request;

struct acg_kv_cache {
    acg__engine_obj obj; /* its lock guards the free list and the requests */
    acg_kv_config cfg;
    size_t page_bytes;    /* page_size * kv_dim * elem_bytes */
    acg_buffer *k, *v;    /* (n_layers, n_pages, page_size, kv_dim) elements each */
    uint32_t *free_pages; /* (n_pages - 1) a stack: free_pages[n_free - 1] goes out next */
    uint32_t n_free;
    kv_request *requests; /* (cap_requests) */
    uint32_t n_requests, cap_requests;
};

static acg_status check_kv(const acg_kv_cache *kv, const char *fn) {
    return acg__check_live(kv, ACG__HANDLE_KV, "kv", "kv cache", fn);
}

static kv_request *find_request(const acg_kv_cache *kv, uint64_t id) {
    for (uint32_t i = 0; i < kv->n_requests; i++) {
        if (kv->requests[i].id == id) {
            return &kv->requests[i];
        }
    }
    return NULL;
}

/* ---- create and destroy ------------------------------------------------------------------- */

/* Checks config; on success *bytes is the size of the K (and of the V) buffer. */
static acg_status check_config(const acg_kv_config *cfg, size_t *page_bytes, size_t *bytes,
                               const char *fn) {
    if (cfg->n_layers == 0 || cfg->page_size == 0 || cfg->kv_dim == 0 || cfg->elem_bytes == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: n_layers, page_size, kv_dim and elem_bytes must be non-zero "
                          "(%u, %u, %u, %u)",
                          fn, cfg->n_layers, cfg->page_size, cfg->kv_dim, cfg->elem_bytes);
    }
    /* Page ids go into int32 block tables. */
    if (cfg->n_pages < 2 || cfg->n_pages > (uint32_t)INT32_MAX + 1u) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: n_pages %u must be in 2 .. 2^31 (the sink page and at least one "
                          "more; page ids fit an int32)",
                          fn, cfg->n_pages);
    }
    uint64_t pb = (uint64_t)cfg->page_size * cfg->kv_dim;
    if (pb > SIZE_MAX / cfg->elem_bytes) {
        goto out_overflow;
    }
    pb *= cfg->elem_bytes;
    size_t per_layer = (size_t)pb;
    if (per_layer > SIZE_MAX / cfg->n_pages) {
        goto out_overflow;
    }
    per_layer *= cfg->n_pages;
    if (per_layer > SIZE_MAX / cfg->n_layers) {
        goto out_overflow;
    }
    *page_bytes = (size_t)pb;
    *bytes = per_layer * cfg->n_layers;
    return ACG_OK;

out_overflow:
    return acg__error(ACG_ERR_INVALID_ARGUMENT,
                      "%s: %u layers x %u pages x %u tokens x %u x %u bytes overflow a size_t", fn,
                      cfg->n_layers, cfg->n_pages, cfg->page_size, cfg->kv_dim, cfg->elem_bytes);
}

/* Zeroes the sink page of every layer of K and V, and waits for it. */
static acg_status zero_sink_pages(acg_kv_cache *kv, const char *fn) {
    acg_stream *s = NULL;
    acg_status st = acg_stream_create(kv->obj.dev, &s);
    if (st != ACG_OK) {
        return acg__rethrow(st, fn);
    }
    size_t pattern = kv->page_bytes % 4 == 0 ? 4 : 1;
    size_t layer_bytes = kv->page_bytes * kv->cfg.n_pages;
    for (uint32_t l = 0; l < kv->cfg.n_layers && st == ACG_OK; l++) {
        size_t off = layer_bytes * l + (size_t)ACG_KV_SINK_PAGE * kv->page_bytes;
        st = acg_fill(s, kv->k, off, kv->page_bytes, 0, pattern);
        if (st == ACG_OK) {
            st = acg_fill(s, kv->v, off, kv->page_bytes, 0, pattern);
        }
    }
    acg_status sst = acg_stream_synchronize(s);
    st = st != ACG_OK ? st : sst;
    if (st != ACG_OK) {
        acg__rethrow(st, fn);
    }
    acg_stream_destroy(s);
    return st;
}

static const acg__config_kind kv_config =
    ACG__CONFIG_KIND(acg_kv_config, ACG_KV_CONFIG_INIT, offsetof(acg_kv_config, elem_bytes), false);

acg_status acg_kv_cache_create(acg_device *dev, const acg_kv_config *config, acg_kv_cache **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_cache_create";
    acg_kv_config c; /* the caller's config, whole whatever its version */
    ACG__TRY(acg__engine_create_args(dev, out, &kv_config, config, &c, fn));
    size_t page_bytes = 0, bytes = 0;
    ACG__TRY(check_config(&c, &page_bytes, &bytes, fn));
    acg_kv_cache *kv = acg__engine_obj_new(sizeof *kv, dev, fn);
    if (kv == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    kv->cfg = c;
    kv->page_bytes = page_bytes;
    kv->n_free = c.n_pages - 1;
    kv->free_pages = acg__calloc(kv->n_free, sizeof *kv->free_pages);
    acg_status st = ACG_OK;
    if (kv->free_pages == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %u page ids", fn, kv->n_free);
        goto out_free_kv;
    }
    for (uint32_t i = 0; i < kv->n_free; i++) {
        kv->free_pages[i] = kv->n_free - i; /* page 1 on top */
    }
    /* The cache's own buffers: acg_buffer_free refuses them. */
    if ((st = acg__buffer_alloc_owned(dev, bytes, kv, "KV cache", &kv->k)) != ACG_OK) {
        acg__rethrow(st, fn);
        goto out_free_list;
    }
    if ((st = acg__buffer_alloc_owned(dev, bytes, kv, "KV cache", &kv->v)) != ACG_OK) {
        acg__rethrow(st, fn);
        goto out_free_k;
    }
    if ((st = zero_sink_pages(kv, fn)) != ACG_OK) {
        goto out_free_v;
    }
    if ((st = acg__handle_publish(kv, ACG__HANDLE_KV, &kv->obj.life, fn)) != ACG_OK) {
        goto out_free_v;
    }
    *out = kv;
    return ACG_OK;

out_free_v:
    acg__buffer_free_owned(kv->v, kv, fn);
out_free_k:
    acg__buffer_free_owned(kv->k, kv, fn);
out_free_list:
    acg__free(kv->free_pages);
out_free_kv:
    acg__engine_obj_free(&kv->obj);
    return st;
}

acg_status acg_kv_cache_destroy(acg_kv_cache *kv) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_cache_destroy";
    if (kv == NULL) {
        return ACG_OK;
    }
    ACG__TRY(check_kv(kv, fn));
    /* Check both first, so that a refused destroy leaves the cache whole. */
    acg_status st = ACG_OK;
    if ((kv->k != NULL && (st = acg__buffer_check_free(kv->k, 0, kv, fn)) != ACG_OK) ||
        (kv->v != NULL && (st = acg__buffer_check_free(kv->v, 0, kv, fn)) != ACG_OK)) {
        return st;
    }
    /* Wait for other threads' calls on the cache to return; later ones are refused. */
    if ((st = acg__retire(kv, ACG__HANDLE_KV, fn, "KV cache")) != ACG_OK) {
        return st;
    }
    /* A graph captured since the check may use a buffer: then the destroy is refused; what
     * was freed stays freed, so the call can be repeated once the graphs are gone. */
    if (kv->k != NULL && (st = acg__buffer_free_owned(kv->k, kv, fn)) != ACG_OK) {
        acg__handle_restore(kv);
        return acg__rethrow(st, fn);
    }
    kv->k = NULL;
    if (kv->v != NULL && (st = acg__buffer_free_owned(kv->v, kv, fn)) != ACG_OK) {
        acg__handle_restore(kv);
        return acg__rethrow(st, fn);
    }
    kv->v = NULL;
    for (uint32_t i = 0; i < kv->n_requests; i++) {
        acg__free(kv->requests[i].pages);
    }
    acg__free(kv->requests);
    acg__free(kv->free_pages);
    acg__engine_obj_release(&kv->obj);
    return ACG_OK;
}

/* ---- getters ------------------------------------------------------------------------------ */

acg_status acg_kv_cache_get_buffers(const acg_kv_cache *kv, acg_buffer **k, acg_buffer **v) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_cache_get_buffers";
    ACG__TRY(check_kv(kv, fn));
    if (k == NULL && v == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: k and v are both NULL", fn);
    }
    if (kv->k == NULL || kv->v == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: the cache is being destroyed", fn);
    }
    if (k != NULL) {
        *k = kv->k;
    }
    if (v != NULL) {
        *v = kv->v;
    }
    return ACG_OK;
}

acg_status acg_kv_cache_get_free_pages(const acg_kv_cache *kv, uint32_t *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_cache_get_free_pages";
    ACG__TRY(check_kv(kv, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    pthread_mutex_lock(acg__engine_lock(&kv->obj));
    *out = kv->n_free;
    pthread_mutex_unlock(acg__engine_lock(&kv->obj));
    return ACG_OK;
}

acg_status acg_kv_request_get_pages(const acg_kv_cache *kv, uint64_t id, const uint32_t **pages,
                                    uint32_t *n_pages) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_request_get_pages";
    ACG__TRY(check_kv(kv, fn));
    ACG__TRY(acg__check_arg(pages, "pages", fn));
    ACG__TRY(acg__check_arg(n_pages, "n_pages", fn));
    acg_status st = ACG_OK;
    pthread_mutex_lock(acg__engine_lock(&kv->obj));
    const kv_request *r = find_request(kv, id);
    if (r == NULL) {
        st = acg__error(ACG_ERR_NOT_FOUND, "%s: no request %llu", fn, (unsigned long long)id);
    } else {
        *pages = r->pages;
        *n_pages = r->n_pages;
    }
    pthread_mutex_unlock(acg__engine_lock(&kv->obj));
    return st;
}

/* ---- requests ----------------------------------------------------------------------------- */

acg_status acg_kv_request_reserve(acg_kv_cache *kv, uint64_t id, uint32_t tokens) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_request_reserve";
    ACG__TRY(check_kv(kv, fn));
    if (tokens == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: tokens is 0", fn);
    }
    acg_status st = ACG_OK;
    uint32_t need = (uint32_t)(((uint64_t)tokens + kv->cfg.page_size - 1) / kv->cfg.page_size);
    pthread_mutex_lock(&kv->obj.lock);
    kv_request *r = find_request(kv, id);
    kv_request fresh = {.id = id};
    kv_request *dst = r != NULL ? r : &fresh;
    if (need <= dst->n_pages) {
        goto out_unlock; /* never shrinks */
    }
    uint32_t extra = need - dst->n_pages;
    if (extra > kv->n_free) {
        st = acg__error(ACG_ERR_EXHAUSTED,
                        "%s: request %llu needs %u more page(s) for %u tokens; %u of %u are free",
                        fn, (unsigned long long)id, extra, tokens, kv->n_free, kv->cfg.n_pages - 1);
        goto out_unlock;
    }
    /* Everything that can fail comes before the first page leaves the free list. */
    if (r == NULL && !acg__grow((void **)&kv->requests, &kv->cap_requests, kv->n_requests + 1,
                                sizeof *kv->requests)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_unlock;
    }
    if (!acg__grow((void **)&dst->pages, &dst->cap_pages, need, sizeof *dst->pages)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %u page ids", fn, need);
        goto out_unlock;
    }
    while (dst->n_pages < need) {
        dst->pages[dst->n_pages++] = kv->free_pages[--kv->n_free];
    }
    if (r == NULL) {
        kv->requests[kv->n_requests++] = fresh;
    }
out_unlock:
    pthread_mutex_unlock(&kv->obj.lock);
    return st;
}

acg_status acg_kv_request_release(acg_kv_cache *kv, uint64_t id) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kv_request_release";
    ACG__TRY(check_kv(kv, fn));
    acg_status st = ACG_OK;
    pthread_mutex_lock(&kv->obj.lock);
    kv_request *r = find_request(kv, id);
    if (r == NULL) {
        st = acg__error(ACG_ERR_NOT_FOUND, "%s: no request %llu", fn, (unsigned long long)id);
        goto out_unlock;
    }
    /* Last page first, so the stack hands them out again in token order. */
    for (uint32_t i = r->n_pages; i > 0; i--) {
        kv->free_pages[kv->n_free++] = r->pages[i - 1];
    }
    acg__free(r->pages);
    *r = kv->requests[--kv->n_requests];
out_unlock:
    pthread_mutex_unlock(&kv->obj.lock);
    return st;
}
