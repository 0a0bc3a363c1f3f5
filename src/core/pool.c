/* pool.c — graph pools: the device memory captures carve their graphs' scratch from, shared
 * by the graphs of one pool, and the waits that order a pool's replays. */
#include <string.h>

#include "core/acg-impl.h"

#define SCRATCH_ALIGN 256
#define MIN_CHUNK ((size_t)256 * 1024)

acg_status acg__pool_new(acg_device *dev, bool is_private, acg_graph_pool **out, const char *fn) {
    acg_graph_pool *pool = acg__new(sizeof *pool, fn);
    if (pool == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    pool->dev = dev;
    pool->is_private = is_private;
    /* The driver's own failure, and its detail, is what the caller sees. */
    acg_status st = dev->vt->event_create(dev->impl, &pool->last_event);
    if (st != ACG_OK) {
        char why[256];
        acg__error_copy(why, sizeof why);
        acg__free(pool);
        return acg__error(st, "%s: creating the pool's event: %s", fn, why);
    }
    pthread_mutex_init(&pool->replay_lock, NULL);
    *out = pool;
    return ACG_OK;
}

void acg__pool_free(acg_graph_pool *pool) {
    acg_device *dev = pool->dev;
    acg__pool_release_parked(pool);
    acg__free(pool->parked);
    for (uint32_t i = 0; i < pool->n_chunks; i++) {
        acg__device_mem_free(dev, pool->chunks[i].mem, pool->chunks[i].size);
    }
    dev->vt->event_destroy(pool->last_event);
    pthread_mutex_destroy(&pool->replay_lock);
    acg__free(pool->chunks);
    acg__free(pool);
}

acg_status acg__pool_carve(acg__capture *c, size_t size, acg_buffer **out) {
    static const char fn[] = "acg_stream_alloc";
    acg_graph_pool *pool = c->pool;
    acg_device *dev = c->dev;
    if (size > SIZE_MAX - SCRATCH_ALIGN) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: %zu bytes", fn, size);
    }
    size_t need = (size + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
    /* Graphs of one pool never replay at the same time, so each capture lays its scratch out
     * over the whole pool as if it were alone, from the first chunk with room (the tail of an
     * earlier chunk included): the pool holds what its largest graph needs, not the sum. Only
     * the capture's own pieces must not overlap; a chunk's `used` counts them, and a chunk last
     * carved by another capture starts empty. Chunks are appended, never moved. */
    uint32_t at = 0;
    for (; at < pool->n_chunks; at++) {
        struct acg__chunk *k = &pool->chunks[at];
        if (k->capture != c->id) {
            k->capture = c->id;
            k->used = 0;
        }
        if (k->size - k->used >= need) {
            break;
        }
    }
    if (at == pool->n_chunks) {
        if (!acg__grow((void **)&pool->chunks, &pool->cap_chunks, pool->n_chunks + 1,
                       sizeof *pool->chunks)) {
            return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        /* A piece of its own size, or for small pieces a chunk they can share: an eighth of
         * what the pool holds, at most MIN_CHUNK, so that a small pool does not end in a
         * mostly empty chunk. */
        size_t share = pool->bytes / 8 < MIN_CHUNK ? pool->bytes / 8 : MIN_CHUNK;
        size_t chunk_size = need > share ? need : share;
        acg__bk_mem *mem = NULL;
        acg_status st = acg__device_mem_alloc(dev, chunk_size, &mem);
        if (st != ACG_OK) {
            return acg__error(st, "%s: the graph pool could not grow by %zu bytes", fn, chunk_size);
        }
        pool->chunks[at] = (struct acg__chunk){mem, chunk_size, 0, c->id};
        pool->n_chunks++;
        pool->bytes += chunk_size;
    }
    if (!acg__grow((void **)&c->scratch, &c->cap_scratch, c->n_scratch + 1, sizeof *c->scratch)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    acg_buffer *b = acg__new(sizeof *b, fn);
    if (b == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    b->dev = dev;
    b->mem = pool->chunks[at].mem;
    b->offset = pool->chunks[at].used;
    b->size = size;
    b->scratch = true;
    b->capture_id = c->id;
    if (acg__handle_add(b, ACG__HANDLE_BUFFER, &b->life) != ACG_OK) {
        acg__free(b);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pool->chunks[at].used += need;
    c->scratch[c->n_scratch++] = b;
    *out = b;
    return ACG_OK;
}

static acg_status check_pool(const acg_graph_pool *pool, const char *fn) {
    if (!acg__handle_use(pool, ACG__HANDLE_POOL)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: invalid graph pool", fn);
    }
    return ACG_OK;
}

acg_status acg_graph_pool_create(acg_device *dev, acg_graph_pool **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_pool_create";
    ACG__TRY(acg__check_create(dev, out, fn));
    pthread_mutex_lock(&dev->lock);
    acg_graph_pool *pool = NULL;
    acg_status st = acg__pool_new(dev, false, &pool, fn);
    if (st != ACG_OK) {
        pthread_mutex_unlock(&dev->lock);
        return st;
    }
    dev->n_pools++;
    /* Last: a call holding a stale handle that this address matches must not see the pool
     * before it is whole (the registry's lock orders these writes before any lookup). */
    if (acg__handle_add(pool, ACG__HANDLE_POOL, &pool->life) != ACG_OK) {
        dev->n_pools--;
        acg__pool_free(pool);
        pthread_mutex_unlock(&dev->lock);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_unlock(&dev->lock);
    *out = pool;
    return ACG_OK;
}

acg_status acg_graph_pool_destroy(acg_graph_pool *pool) {
    ACG__DESTROY_BEGIN(pool, ACG__HANDLE_POOL, "acg_graph_pool_destroy", "graph pool");
    acg_device *dev = pool->dev;
    acg__hold_device(dev);
    /* Parked graphs may still replay: wait for that before the lock (a refused destroy has
     * waited for nothing it needed, which is harmless). */
    acg__pool_wait(pool);
    pthread_mutex_lock(&dev->lock);
    if (pool->n_graphs != pool->n_parked || pool->capturing) {
        uint32_t n = pool->n_graphs - pool->n_parked;
        bool capturing = pool->capturing;
        pthread_mutex_unlock(&dev->lock);
        acg__handle_restore(pool);
        return acg__error(ACG_ERR_IN_USE, "acg_graph_pool_destroy: the pool has %u live graph(s)%s",
                          n, capturing ? " and a capture in progress" : "");
    }
    acg__handle_remove(pool);
    dev->n_pools--;
    acg__pool_free(pool);
    pthread_mutex_unlock(&dev->lock);
    return ACG_OK;
}

acg_status acg_graph_pool_get_bytes(const acg_graph_pool *pool, size_t *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_pool_get_bytes";
    ACG__TRY(check_pool(pool, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    pthread_mutex_lock(&pool->dev->lock);
    *out = pool->bytes;
    pthread_mutex_unlock(&pool->dev->lock);
    return ACG_OK;
}

size_t acg__graph_scratch_bytes(const acg_graph *g) {
    size_t bytes = 0;
    for (uint32_t i = 0; g != NULL && i < g->n_scratch; i++) {
        bytes += (g->scratch[i]->size + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
    }
    return bytes;
}

/* Waits for the latest replay of any graph of the pool (its replay_lock held, so no replay
 * starts meanwhile). */
static acg_status wait_pool_locked(acg_graph_pool *pool) {
    return pool->last_stream == NULL ? ACG_OK : pool->dev->vt->event_synchronize(pool->last_event);
}

/* Waits for the pool's latest replay holding only its replay lock: replays of other pools and
 * the rest of the device go on. */
acg_status acg__pool_wait(acg_graph_pool *pool) {
    pthread_mutex_lock(&pool->replay_lock);
    acg_status st = wait_pool_locked(pool);
    pthread_mutex_unlock(&pool->replay_lock);
    return st;
}

/* Takes dev->lock and the pool's replay lock with no replay of the pool in flight. The wait
 * itself happens with neither held; a replay that started meanwhile sends it round again. */
acg_status acg__pool_lock_idle(acg_graph_pool *pool) {
    acg_device *dev = pool->dev;
    for (;;) {
        ACG__TRY(acg__pool_wait(pool));
        pthread_mutex_lock(&dev->lock);
        pthread_mutex_lock(&pool->replay_lock);
        acg_status st = pool->last_stream == NULL ? ACG_OK : dev->vt->event_query(pool->last_event);
        if (st != ACG_NOT_READY) {
            if (st != ACG_OK) {
                pthread_mutex_unlock(&pool->replay_lock);
                pthread_mutex_unlock(&dev->lock);
            }
            return st;
        }
        pthread_mutex_unlock(&pool->replay_lock);
        pthread_mutex_unlock(&dev->lock);
    }
}
