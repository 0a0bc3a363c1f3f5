/* fake_memory.c — the Level Zero test driver's memory: device and host allocations.
 *
 * Device memory is host memory and a device pointer is its address. Every allocation is kept in
 * one table (fake__g.ranges), so each copy, fill and kernel argument is checked against live
 * allocations when it runs (fake_list.c): a backend that reaches past a buffer, or frees one
 * that queued work still uses, is caught here rather than corrupting memory.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS and MAP_NORESERVE */

#include "fake_ze_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Allocations this large come from mmap: lazily backed, so a backend sizing a pool from the
 * device's 16 GiB costs little, and so ASan does not poison gigabytes of shadow. Smaller ones
 * come from malloc, whose exact size lets ASan catch a kernel writing past its buffer. */
#define MMAP_THRESHOLD ((size_t)64 << 20)
#define PAGE ((size_t)4096)

#define DEVICE_ALIGNMENT 256 /* the least this driver gives device memory */
#define HOST_ALIGNMENT 4096  /* host memory is page-aligned */

/* A mapping's own extent, when it is one (the allocation may start past it, to align). */
struct mapping {
    void *base;
    size_t size;
};

static void *memory_get(size_t bytes, size_t alignment, struct mapping *map) {
    map->base = NULL;
    if (bytes >= MMAP_THRESHOLD) {
        size_t extra = alignment > PAGE ? alignment : 0;
        if (bytes > SIZE_MAX - extra) {
            return NULL;
        }
        void *p = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            return NULL;
        }
        map->base = p;
        map->size = bytes + extra;
        uintptr_t a = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
        return (void *)a;
    }
    void *p;
    return posix_memalign(&p, alignment, bytes) == 0 ? p : NULL;
}

struct fake_mapped_range {
    struct fake_range range;
    struct mapping map;
};

static void range_free(struct fake_range *r) {
    struct fake_mapped_range *m = (struct fake_mapped_range *)r;
    fake__vec_remove(&fake__g.ranges, r);
    if (r->dev != NULL) {
        r->dev->allocated -= r->size;
    }
    if (m->map.base != NULL) {
        munmap(m->map.base, m->map.size);
    } else {
        free((void *)r->base);
    }
    free(m);
}

/* An address inside an allocation belongs to it; only an empty window may sit at an
 * allocation's end, and only when no allocation starts there (two allocations may touch, and
 * the one that starts at the address is the one it points into). */
struct fake_range *fake__range_find(uintptr_t addr, size_t bytes) {
    struct fake_range *at_end = NULL;
    for (size_t i = 0; i < fake__g.ranges.n; i++) {
        struct fake_range *r = fake__g.ranges.v[i];
        if (addr < r->base || addr - r->base > r->size || bytes > r->size - (addr - r->base)) {
            continue;
        }
        if (addr - r->base < r->size) {
            return r;
        }
        at_end = r;
    }
    return at_end;
}

long fake__ranges_reclaim(struct fake_context *ctx) {
    long n = 0;
    for (size_t i = fake__g.ranges.n; i-- > 0;) {
        struct fake_range *r = fake__g.ranges.v[i];
        if (r->ctx == ctx) {
            if (r->busy > 0) {
                fake__fault("the context of an allocation a command is using was destroyed");
            }
            range_free(r);
            n++;
        }
    }
    return n;
}

/* (lock held) Allocates and records; *pptr on success. */
static ze_result_t allocate(struct fake_context *ctx, struct fake_device *dev, size_t size,
                            size_t alignment, void **pptr) {
    struct fake_mapped_range *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    void *p = memory_get(size, alignment, &m->map);
    if (p == NULL) {
        free(m);
        return dev != NULL ? ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY
                           : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    m->range = (struct fake_range){.base = (uintptr_t)p, .size = size, .ctx = ctx, .dev = dev};
    if (fake__vec_push(&fake__g.ranges, &m->range) != 0) {
        if (m->map.base != NULL) {
            munmap(m->map.base, m->map.size);
        } else {
            free(p);
        }
        free(m);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (dev != NULL) {
        dev->allocated += size;
    }
    fake__live(1);
    *pptr = p;
    return ZE_RESULT_SUCCESS;
}

/* An allocation's size, up to maxMemAllocSize, and alignment, 0 or a power of two. */
static ze_result_t size_alignment(size_t size, size_t alignment) {
    if (size == 0 || size > fake__cfg.mem_bytes) {
        return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
    }
    return (alignment & (alignment - 1)) == 0 ? ZE_RESULT_SUCCESS
                                              : ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
}

ze_result_t fake_zeMemAllocDevice(ze_context_handle_t hContext,
                                  const ze_device_mem_alloc_desc_t *device_desc, size_t size,
                                  size_t alignment, ze_device_handle_t hDevice, void **pptr) {
    static const char fn[] = "zeMemAllocDevice";
    FAKE_ENTER(zeMemAllocDevice);
    struct fake_context *ctx;
    struct fake_device *dev;
    ze_result_t r;
    FAKE_CHECK(fake__lock_context_device(hContext, hDevice, fn, &ctx, &dev), out);
    FAKE_FAIL_IF(device_desc == NULL || pptr == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(device_desc, ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, fn, "device_desc"),
               out);
    FAKE_FAIL_IF(device_desc->flags > 0x7, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    /* One memory, ordinal 0. */
    FAKE_FAIL_IF(device_desc->ordinal != 0, ZE_RESULT_ERROR_INVALID_ARGUMENT, out);
    FAKE_CHECK(size_alignment(size, alignment), out);
    FAKE_FAIL_IF(size > fake__cfg.mem_bytes - dev->allocated, ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                 out);
    r = allocate(ctx, dev, size, alignment > DEVICE_ALIGNMENT ? alignment : DEVICE_ALIGNMENT, pptr);
out:
    return fake__unlock(r);
}

ze_result_t fake_zeMemAllocHost(ze_context_handle_t hContext,
                                const ze_host_mem_alloc_desc_t *host_desc, size_t size,
                                size_t alignment, void **pptr) {
    static const char fn[] = "zeMemAllocHost";
    FAKE_ENTER(zeMemAllocHost);
    struct fake_context *ctx;
    ze_result_t r;
    FAKE_CHECK(fake__lock_object(FAKE_CONTEXT, hContext, fn, (void **)&ctx), out);
    FAKE_FAIL_IF(host_desc == NULL || pptr == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(host_desc, ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, fn, "host_desc"), out);
    FAKE_FAIL_IF(host_desc->flags > 0xf, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    FAKE_CHECK(size_alignment(size, alignment), out);
    r = allocate(ctx, NULL, size, alignment > HOST_ALIGNMENT ? alignment : HOST_ALIGNMENT, pptr);
out:
    return fake__unlock(r);
}

/* A pointer that is not the start of a live allocation of the context is INVALID_ARGUMENT (as
 * Intel's driver answers, it tracks its allocations). Freeing memory a command is running on
 * aborts; memory a queued command will use is caught when that command runs. */
ze_result_t fake_zeMemFree(ze_context_handle_t hContext, void *ptr) {
    static const char fn[] = "zeMemFree";
    FAKE_ENTER(zeMemFree);
    struct fake_context *ctx;
    ze_result_t r;
    FAKE_CHECK(fake__lock_object(FAKE_CONTEXT, hContext, fn, (void **)&ctx), out);
    FAKE_FAIL_IF(ptr == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    struct fake_range *range = NULL;
    for (size_t i = 0; i < fake__g.ranges.n && range == NULL; i++) {
        struct fake_range *c = fake__g.ranges.v[i];
        range = c->base == (uintptr_t)ptr && c->ctx == ctx ? c : NULL;
    }
    FAKE_FAIL_IF(range == NULL, ZE_RESULT_ERROR_INVALID_ARGUMENT, out);
    if (range->busy > 0) {
        fake__fault("zeMemFree(%p) while a command is running on that memory", ptr);
    }
    uint32_t devices = range->dev != NULL ? fake__bit(range->dev) : FAKE_ALL_DEVICES;
    range_free(range);
    fake__live(-1);
    r = fake__released(devices);
out:
    return fake__unlock(r);
}
