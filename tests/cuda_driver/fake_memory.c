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
    fake__live(1);
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

void fake__ranges_reclaim(struct CUctx_st *ctx) {
    for (size_t i = fake__g.ranges.n; i-- > 0;) {
        struct fake_range *r = fake__g.ranges.v[i];
        if (r->ctx == ctx) {
            range_free(r);
        }
    }
}

/* ---- device memory -------------------------------------------------------------------------- */

CUresult fake_cuMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    FAKE_ENTER(cuMemGetInfo);
    struct CUctx_st *ctx;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS && (free_bytes == NULL || total_bytes == NULL)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *total_bytes = fake__cfg.mem_bytes;
        *free_bytes = fake__cfg.mem_bytes - ctx->allocated;
    }
    return fake__unlock(r);
}

/* (lock held) A new allocation of `kind` and `bytes` for ctx (its address in *p), counted live:
 * OUT_OF_MEMORY when it cannot be. */
static CUresult range_new(enum fake_range_kind kind, size_t bytes, size_t alignment,
                          struct CUctx_st *ctx, void **p) {
    void *mem = memory_get(bytes, alignment);
    if (mem == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = range_add(kind, (uintptr_t)mem, bytes, ctx);
    if (r != CUDA_SUCCESS) {
        memory_put(mem, bytes);
        return r;
    }
    *p = mem;
    return CUDA_SUCCESS;
}

CUresult fake_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    FAKE_ENTER(cuMemAlloc);
    struct CUctx_st *ctx;
    void *mem;
    CUresult r;
    FAKE_CHECK(fake__lock_current(&ctx), out);
    FAKE_FAIL_IF(dptr == NULL || bytesize == 0, CUDA_ERROR_INVALID_VALUE, out);
    FAKE_FAIL_IF(bytesize > fake__cfg.mem_bytes - ctx->allocated, CUDA_ERROR_OUT_OF_MEMORY, out);
    FAKE_CHECK(range_new(FAKE_RANGE_DEVICE, bytesize, DEVICE_ALIGNMENT, ctx, &mem), out);
    ctx->allocated += bytesize;
    *dptr = (CUdeviceptr)(uintptr_t)mem;
out:
    return fake__unlock(r);
}

/* Frees the range of `kind` at `base`, after the work queued in its context finished (cudaFree
 * synchronizes; so queued work never reads freed memory). `missing` is the code for a pointer
 * that is not such a range. */
static CUresult range_release(uintptr_t base, enum fake_range_kind kind, CUresult missing) {
    struct CUctx_st *ctx;
    CUresult fault;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current_release(&ctx, &fault);
    struct fake_range *range = r == CUDA_SUCCESS ? range_at(base, kind) : NULL;
    if (range != NULL) {
        fake__ctx_synchronize(range->ctx);
        range = range_at(base, kind); /* another thread may have freed it meanwhile */
    }
    if (r == CUDA_SUCCESS && range == NULL) {
        r = missing;
    } else if (r == CUDA_SUCCESS) {
        range_free(range);
        fake__live(-1);
        r = fault;
    }
    return fake__unlock(r);
}

CUresult fake_cuMemFree(CUdeviceptr dptr) {
    FAKE_ENTER(cuMemFree);
    return range_release((uintptr_t)dptr, FAKE_RANGE_DEVICE, CUDA_ERROR_INVALID_VALUE);
}

/* ---- pinned host memory --------------------------------------------------------------------- */

CUresult fake_cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    FAKE_ENTER(cuMemHostAlloc);
    struct CUctx_st *ctx;
    const unsigned known =
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS && (pp == NULL || bytesize == 0 || (flags & ~known) != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        r = range_new(FAKE_RANGE_HOST_ALLOC, bytesize, HOST_ALIGNMENT, ctx, pp);
    }
    return fake__unlock(r);
}

CUresult fake_cuMemFreeHost(void *p) {
    FAKE_ENTER(cuMemFreeHost);
    return range_release((uintptr_t)p, FAKE_RANGE_HOST_ALLOC, CUDA_ERROR_INVALID_VALUE);
}

/* Any overlap with a pinned range, allocated or registered, is refused. */
CUresult fake_cuMemHostRegister(void *p, size_t bytesize, unsigned int flags) {
    FAKE_ENTER(cuMemHostRegister);
    struct CUctx_st *ctx;
    uintptr_t base = (uintptr_t)p;
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS &&
        (p == NULL || bytesize == 0 || bytesize > UINTPTR_MAX - base || (flags & ~known) != 0)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < fake__g.ranges.n && r == CUDA_SUCCESS; i++) {
        const struct fake_range *o = fake__g.ranges.v[i];
        if (o->kind != FAKE_RANGE_DEVICE && base < o->base + o->size && o->base < base + bytesize) {
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (r == CUDA_SUCCESS) {
        r = range_add(FAKE_RANGE_REGISTERED, base, bytesize, ctx);
    }
    return fake__unlock(r);
}

CUresult fake_cuMemHostUnregister(void *p) {
    FAKE_ENTER(cuMemHostUnregister);
    return range_release((uintptr_t)p, FAKE_RANGE_REGISTERED,
                         CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* ---- copies and fills ----------------------------------------------------------------------- */

/* (lock held) Whether a copy may be queued or recorded on s: its device sides inside one live
 * allocation each, and a captured one taking pinned host memory only (it re-reads host memory
 * at every replay: CUDA takes only pinned memory, whose address stays valid, and refuses
 * pageable memory by invalidating the capture). */
static CUresult copy_check(const struct fake_work *w, struct CUstream_st *s) {
    uintptr_t dst = w->u.copy.dst, src = w->u.copy.src;
    size_t bytes = w->u.copy.bytes;
    if (dst == 0 || src == 0 || bytes > UINTPTR_MAX - dst || bytes > UINTPTR_MAX - src ||
        (w->u.copy.dst_device && fake__range_find(dst, bytes, FAKE_DEVICE_MEMORY) == NULL) ||
        (w->u.copy.src_device && fake__range_find(src, bytes, FAKE_DEVICE_MEMORY) == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (s->capture != NULL && !s->capture->invalidated &&
        ((!w->u.copy.dst_device && fake__range_find(dst, bytes, FAKE_PINNED_MEMORY) == NULL) ||
         (!w->u.copy.src_device && fake__range_find(src, bytes, FAKE_PINNED_MEMORY) == NULL))) {
        return fake__not_capturing(s);
    }
    return CUDA_SUCCESS;
}

/* (lock held) Whether a fill may be queued or recorded: its destination aligned to its
 * elements and inside one live device allocation. */
static CUresult fill_check(const struct fake_work *w, struct CUstream_st *s) {
    (void)s;
    size_t es = w->u.fill.element_size;
    if (w->u.fill.dst % es != 0 || w->u.fill.count > SIZE_MAX / es ||
        fake__range_find(w->u.fill.dst, w->u.fill.count * es, FAKE_DEVICE_MEMORY) == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* The asynchronous copies and fills: `work` of n elements queued (or recorded) on stream h once
 * `check` passed it. Simplified: with none, nothing is queued or recorded. */
static CUresult async_work(CUstream h, size_t n, const struct fake_work *work,
                           CUresult (*check)(const struct fake_work *w, struct CUstream_st *s)) {
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS && n == 0) {
        return fake__unlock(s->capture != NULL && s->capture->invalidated
                                ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                : CUDA_SUCCESS);
    }
    if (r == CUDA_SUCCESS) {
        r = check(work, s);
    }
    return fake__unlock_submit(r, s, work);
}

/* A copy of `bytes` from src to dst; *_device says which sides are device memory. */
static CUresult copy_async(uintptr_t dst, int dst_device, uintptr_t src, int src_device,
                           size_t bytes, CUstream h) {
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    work.u.copy.dst = dst;
    work.u.copy.src = src;
    work.u.copy.bytes = bytes;
    work.u.copy.dst_device = dst_device;
    work.u.copy.src_device = src_device;
    return async_work(h, bytes, &work, copy_check);
}

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyHtoDAsync);
    CUresult r = copy_async((uintptr_t)dst, 1, (uintptr_t)src, 0, bytes, h);
    /* From pageable memory CUDA has read the source when it returns. */
    return r == CUDA_SUCCESS && bytes != 0 ? fake__stream_pageable_wait(h, src, bytes) : r;
}

CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyDtoHAsync);
    CUresult r = copy_async((uintptr_t)dst, 0, (uintptr_t)src, 1, bytes, h);
    /* Into pageable memory CUDA returns once the copy is done: a failure after the call cannot
     * leave a write into memory its caller freed. */
    return r == CUDA_SUCCESS && bytes != 0 ? fake__stream_pageable_wait(h, dst, bytes) : r;
}

CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream h) {
    FAKE_ENTER(cuMemcpyDtoDAsync);
    return copy_async((uintptr_t)dst, 1, (uintptr_t)src, 1, bytes, h);
}

/* A fill of n elements of element_size bytes, dst aligned to it. */
static CUresult fill_async(CUdeviceptr dst, uint32_t value, unsigned element_size, size_t n,
                           CUstream h) {
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    work.u.fill.dst = (uintptr_t)dst;
    work.u.fill.value = value;
    work.u.fill.element_size = element_size;
    work.u.fill.count = n;
    return async_work(h, n, &work, fill_check);
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
