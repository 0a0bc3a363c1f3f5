/* fake_memory.c — the CUDA test driver's memory: device allocations, pinned host memory, host
 * registrations, and the asynchronous copies and fills between them.
 *
 * Device memory is host memory and a CUdeviceptr is its address. Every range is kept in one
 * table (fake__g.ranges), so each copy or fill is checked against live allocations when it is
 * queued and again when it runs: a backend that reaches past a buffer, or frees one that queued
 * work still uses, is caught here rather than corrupting memory.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS and MAP_NORESERVE */

#include "fake_cuda_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations this large come from mmap: lazily backed, so a backend sizing a pool from the
 * device's 16 GiB costs little, and so ASan does not poison gigabytes of shadow. Smaller ones
 * come from malloc, whose exact size lets ASan catch a kernel writing past its buffer. */
#define MMAP_THRESHOLD ((size_t)64 << 20)

#define DEVICE_ALIGNMENT 256 /* cuMemAlloc's guarantee */
#define HOST_ALIGNMENT 4096  /* pinned memory is page-aligned */

static void *memory_get(size_t bytes, size_t alignment) {
    if (bytes >= MMAP_THRESHOLD) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    void *p;
    return posix_memalign(&p, alignment, bytes) == 0 ? p : NULL;
}

static void memory_put(void *p, size_t bytes) {
    if (bytes >= MMAP_THRESHOLD) {
        munmap(p, bytes);
    } else {
        free(p);
    }
}

struct fake_range *fake__range_find(uintptr_t addr, size_t bytes, unsigned kinds) {
    for (size_t i = 0; i < fake__g.ranges.n; i++) {
        struct fake_range *r = fake__g.ranges.v[i];
        if ((kinds & (1u << r->kind)) != 0 && addr >= r->base && addr - r->base <= r->size &&
            bytes <= r->size - (addr - r->base)) {
            return r;
        }
    }
    return NULL;
}

/* The range of that kind that starts at `base` (what a free must be given), or NULL. */
static struct fake_range *range_at(uintptr_t base, enum fake_range_kind kind) {
    for (size_t i = 0; i < fake__g.ranges.n; i++) {
        struct fake_range *r = fake__g.ranges.v[i];
        if (r->kind == kind && r->base == base) {
            return r;
        }
    }
    return NULL;
}

static CUresult range_add(enum fake_range_kind kind, uintptr_t base, size_t size,
                          struct CUctx_st *ctx) {
    struct fake_range *r = malloc(sizeof *r);
    if (r == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *r = (struct fake_range){.kind = kind, .base = base, .size = size, .ctx = ctx};
    if (fake__vec_push(&fake__g.ranges, r) != 0) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    fake__g.live++;
    return CUDA_SUCCESS;
}

/* Forgets a range and frees what the driver allocated for it. */
static void range_free(struct fake_range *r) {
    fake__vec_remove(&fake__g.ranges, r);
    if (r->kind == FAKE_RANGE_DEVICE) {
        r->ctx->allocated -= r->size;
    }
    if (r->kind != FAKE_RANGE_REGISTERED) {
        memory_put((void *)r->base, r->size);
    }
    free(r);
}

long fake__ranges_reclaim(struct CUctx_st *ctx) {
    long n = 0;
    for (size_t i = fake__g.ranges.n; i-- > 0;) {
        struct fake_range *r = fake__g.ranges.v[i];
        if (r->ctx == ctx) {
            range_free(r);
            n++;
        }
    }
    return n;
}

/* ---- device memory -------------------------------------------------------------------------- */

CUresult fake_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    FAKE_ENTER(cuMemGetInfo);
    struct CUctx_st *ctx;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r == CUDA_SUCCESS && (free_bytes == NULL || total_bytes == NULL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *total_bytes = fake__cfg.mem_bytes;
        *free_bytes = fake__cfg.mem_bytes - ctx->allocated;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    FAKE_ENTER(cuMemAlloc);
    struct CUctx_st *ctx;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r;
    FAKE_CHECK(fake__current(&ctx), out);
    FAKE_FAIL_IF(dptr == NULL || bytesize == 0, CUDA_ERROR_INVALID_VALUE, out);
    void *mem;
    if (bytesize > fake__cfg.mem_bytes - ctx->allocated ||
        (mem = memory_get(bytesize, DEVICE_ALIGNMENT)) == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    r = range_add(FAKE_RANGE_DEVICE, (uintptr_t)mem, bytesize, ctx);
    if (r != CUDA_SUCCESS) {
        memory_put(mem, bytesize);
        goto out;
    }
    ctx->allocated += bytesize;
    *dptr = (CUdeviceptr)(uintptr_t)mem;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* Frees the range of `kind` at `base`, after the work queued in its context finished (cudaFree
 * synchronizes; so queued work never reads freed memory). `missing` is the code for a pointer
 * that is not such a range. */
static CUresult range_release(uintptr_t base, enum fake_range_kind kind, CUresult missing) {
    struct CUctx_st *ctx;
    CUresult fault;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current_release(&ctx, &fault);
    if (r == CUDA_SUCCESS) {
        struct fake_range *range = range_at(base, kind);
        if (range == NULL) {
            r = missing;
        } else {
            fake__ctx_synchronize(range->ctx);
            /* Another thread may have freed it while this one waited. */
            range = range_at(base, kind);
            if (range == NULL) {
                r = missing;
            } else {
                range_free(range);
                fake__g.live--;
                r = fault;
            }
        }
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemFree(CUdeviceptr dptr) {
    FAKE_ENTER(cuMemFree);
    return range_release((uintptr_t)dptr, FAKE_RANGE_DEVICE, CUDA_ERROR_INVALID_VALUE);
}

/* ---- pinned host memory --------------------------------------------------------------------- */

CUresult fake_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    FAKE_ENTER(cuMemHostAlloc);
    struct CUctx_st *ctx;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r;
    FAKE_CHECK(fake__current(&ctx), out);
    if (pp == NULL || bytesize == 0 ||
        (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    void *mem = memory_get(bytesize, HOST_ALIGNMENT);
    FAKE_FAIL_IF(mem == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    r = range_add(FAKE_RANGE_HOST_ALLOC, (uintptr_t)mem, bytesize, ctx);
    if (r != CUDA_SUCCESS) {
        memory_put(mem, bytesize);
        goto out;
    }
    *pp = mem;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemFreeHost(void *p) {
    FAKE_ENTER(cuMemFreeHost);
    return range_release((uintptr_t)p, FAKE_RANGE_HOST_ALLOC, CUDA_ERROR_INVALID_VALUE);
}

CUresult fake_cuMemHostRegister(void *p, size_t bytesize, unsigned int flags) {
    FAKE_ENTER(cuMemHostRegister);
    struct CUctx_st *ctx;
    uintptr_t base = (uintptr_t)p;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r;
    FAKE_CHECK(fake__current(&ctx), out);
    if (p == NULL || bytesize == 0 || bytesize > UINTPTR_MAX - base ||
        (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)) != 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* Any overlap with a pinned range, allocated or registered, is refused. */
    for (size_t i = 0; i < fake__g.ranges.n; i++) {
        struct fake_range *o = fake__g.ranges.v[i];
        FAKE_FAIL_IF(o->kind != FAKE_RANGE_DEVICE && base < o->base + o->size &&
                         o->base < base + bytesize,
                     CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, out);
    }
    r = range_add(FAKE_RANGE_REGISTERED, base, bytesize, ctx);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemHostUnregister(void *p) {
    FAKE_ENTER(cuMemHostUnregister);
    return range_release((uintptr_t)p, FAKE_RANGE_REGISTERED,
                         CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* ---- copies and fills ----------------------------------------------------------------------- */

/* Queues (or records) a copy of `bytes` from src to dst; *_device says which sides are device
 * memory, which must lie inside one live allocation each. */
static CUresult copy_async(uintptr_t dst, int dst_device, uintptr_t src, int src_device,
                           size_t bytes, CUstream h) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r;
    FAKE_CHECK(fake__lock_stream(h, &ctx, &s), out);
    if (bytes == 0) { /* simplified: nothing is queued or recorded */
        r = s->capture != NULL && s->capture->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                          : CUDA_SUCCESS;
        goto out;
    }
    if (dst == 0 || src == 0 || bytes > UINTPTR_MAX - dst || bytes > UINTPTR_MAX - src ||
        (dst_device && fake__range_find(dst, bytes, FAKE_DEVICE_MEMORY) == NULL) ||
        (src_device && fake__range_find(src, bytes, FAKE_DEVICE_MEMORY) == NULL)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* A captured copy re-reads host memory at every replay: CUDA takes only pinned memory,
     * whose address stays valid, and refuses pageable memory by invalidating the capture. */
    if (s->capture != NULL && !s->capture->invalidated &&
        ((!dst_device && fake__range_find(dst, bytes, FAKE_PINNED_MEMORY) == NULL) ||
         (!src_device && fake__range_find(src, bytes, FAKE_PINNED_MEMORY) == NULL))) {
        fake__capture_invalidate(s->capture);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        goto out;
    }
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    work.u.copy.dst = dst;
    work.u.copy.src = src;
    work.u.copy.bytes = bytes;
    work.u.copy.dst_device = dst_device;
    work.u.copy.src_device = src_device;
    r = fake__submit(s, &work);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyHtoDAsync);
    return copy_async((uintptr_t)dst, 1, (uintptr_t)src, 0, bytes, h);
}

CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyDtoHAsync);
    return copy_async((uintptr_t)dst, 0, (uintptr_t)src, 1, bytes, h);
}

CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyDtoDAsync);
    return copy_async((uintptr_t)dst, 1, (uintptr_t)src, 1, bytes, h);
}

/* Queues (or records) a fill of n elements of element_size bytes, dst aligned to it. */
static CUresult fill_async(CUdeviceptr dst, uint32_t value, unsigned element_size, size_t n,
                           CUstream h) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r;
    FAKE_CHECK(fake__lock_stream(h, &ctx, &s), out);
    if (n == 0) { /* simplified: nothing is queued or recorded */
        r = s->capture != NULL && s->capture->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                                          : CUDA_SUCCESS;
        goto out;
    }
    if (dst % element_size != 0 || n > SIZE_MAX / element_size ||
        fake__range_find((uintptr_t)dst, n * element_size, FAKE_DEVICE_MEMORY) == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    work.u.fill.dst = (uintptr_t)dst;
    work.u.fill.value = value;
    work.u.fill.element_size = element_size;
    work.u.fill.count = n;
    r = fake__submit(s, &work);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream h) {
    FAKE_ENTER(cuMemsetD8Async);
    return fill_async(dst, value, 1, n, h);
}

CUresult fake_cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n, CUstream h) {
    FAKE_ENTER(cuMemsetD16Async);
    return fill_async(dst, value, 2, n, h);
}

CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream h) {
    FAKE_ENTER(cuMemsetD32Async);
    return fill_async(dst, value, 4, n, h);
}
