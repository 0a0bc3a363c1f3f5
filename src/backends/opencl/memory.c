/* memory.c — the opencl backend's buffers, pinned host memory, copies and fills.
 *
 * Pinned memory is a CL_MEM_ALLOC_HOST_PTR buffer mapped once for its whole life. Eager copies
 * read or write its mapped pointer with non-blocking transfers; a captured copy, which a command
 * buffer can only express as a buffer-to-buffer copy, uses the buffer behind it. Implementations
 * whose mapped memory is the buffer's storage (PoCL, integrated GPUs, host-visible device memory)
 * see one coherent copy; that is what acg's pinned memory promises. A replay of a captured copy
 * reads or writes the buffer as it is then, so there the host's bytes of the moment arrive
 * (the capability's graph_pinned_replay). */
#include <stdio.h>
#include <string.h>

#include "opencl.h"

/* A buffer past the device's limit is refused before the driver sees it: drivers answer such a
 * size with different codes (or allocate on the host first), and on every backend an allocation
 * larger than the device can provide is out of memory. */
static acg_status too_large(const ocl_device *d, const char *fn, size_t size, size_t extra) {
    char plus[48] = "";
    if (extra != 0) {
        snprintf(plus, sizeof plus, " (and %zu to align them)", extra);
    }
    return acg__error(ACG_ERR_OUT_OF_MEMORY,
                      "%s: %zu bytes%s are more than one buffer of this device holds "
                      "(CL_DEVICE_MAX_MEM_ALLOC_SIZE %llu bytes)",
                      fn, size, plus, (unsigned long long)d->max_alloc);
}

acg_status acg__ocl_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **mem) {
    static const char fn[] = "acg_buffer_alloc";
    ocl_device *d = acg__ocl_dev(dev);
    cl_int err = CL_SUCCESS;
    if (size > d->max_alloc) {
        return too_large(d, fn, size, 0);
    }
    cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, size, NULL, &err);
    if (err != CL_SUCCESS) {
        char call[64];
        snprintf(call, sizeof call, "clCreateBuffer(%zu bytes)", size);
        return acg__ocl_error(err, fn, call);
    }
    *mem = acg__ocl_bk_mem(m);
    return ACG_OK;
}

void acg__ocl_buffer_free(acg__bk_device *dev, acg__bk_mem *mem) {
    ACG__UNUSED(dev);
    clReleaseMemObject(acg__ocl_mem(mem));
}

/* The allocation's own buffer: OpenCL has no pointer to a byte of a buffer, so the engine adds
 * the offset itself, as acg's kernels do. */
acg_status acg__ocl_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                      size_t size, acg_native_buffer *out) {
    ACG__UNUSED(dev);
    ACG__UNUSED(size);
    out->kind = ACG_NATIVE_OPENCL_MEM;
    out->handle = acg__ocl_mem(mem);
    out->address = 0;
    out->offset = offset;
    return ACG_OK;
}

/* ---- pinned memory: a table sorted by pointer, under the device lock ------------------- */

static uint32_t pin_upper_bound(const ocl_device *d, const void *p) {
    uint32_t lo = 0, hi = d->n_pins;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)d->pins[mid].ptr <= (uintptr_t)p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

bool acg__ocl_pinned_find(ocl_device *d, const void *p, cl_mem *mem, size_t *offset) {
    pthread_mutex_lock(&d->lock);
    uint32_t i = pin_upper_bound(d, p);
    bool found = false;
    if (i > 0) {
        const ocl_pinned *e = &d->pins[i - 1];
        if ((uintptr_t)p - (uintptr_t)e->ptr < e->size) {
            *mem = e->mem;
            *offset = (size_t)((uintptr_t)p - (uintptr_t)e->map);
            found = true;
        }
    }
    pthread_mutex_unlock(&d->lock);
    return found;
}

acg_status acg__ocl_pinned_alloc(acg__bk_device *dev, size_t size, void **out) {
    static const char fn[] = "acg_pinned_alloc";
    ocl_device *d = acg__ocl_dev(dev);
    acg_status st = ACG_OK;
    cl_int err = CL_SUCCESS;
    ocl_pinned e = {.size = size};
    /* 64 spare bytes let the caller's pointer start on a 64-byte boundary whatever the map. */
    if (d->max_alloc < 64 || size > d->max_alloc - 64) {
        return too_large(d, fn, size, 64);
    }
    e.mem =
        clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size + 64, NULL, &err);
    if (err != CL_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR, %zu bytes)", size + 64);
        return acg__ocl_error(err, fn, call);
    }
    e.map = clEnqueueMapBuffer(d->aux, e.mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size + 64, 0,
                               NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        st = acg__ocl_error(err, fn, "clEnqueueMapBuffer");
        goto out_release;
    }
    e.ptr = (void *)(((uintptr_t)e.map + 63) & ~(uintptr_t)63);
    pthread_mutex_lock(&d->lock);
    if (!acg__grow((void **)&d->pins, &d->cap_pins, d->n_pins + 1, sizeof *d->pins)) {
        pthread_mutex_unlock(&d->lock);
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_unmap;
    }
    uint32_t i = pin_upper_bound(d, e.ptr);
    memmove(&d->pins[i + 1], &d->pins[i], (d->n_pins - i) * sizeof *d->pins);
    d->pins[i] = e;
    d->n_pins++;
    pthread_mutex_unlock(&d->lock);
    *out = e.ptr;
    return ACG_OK;

out_unmap:
    clEnqueueUnmapMemObject(d->aux, e.mem, e.map, 0, NULL, NULL);
    clFinish(d->aux);
out_release:
    clReleaseMemObject(e.mem);
    return st;
}

void acg__ocl_pinned_free(acg__bk_device *dev, void *ptr) {
    ocl_device *d = acg__ocl_dev(dev);
    pthread_mutex_lock(&d->lock);
    uint32_t i = pin_upper_bound(d, ptr);
    if (i == 0 || d->pins[i - 1].ptr != ptr) {
        pthread_mutex_unlock(&d->lock);
        return; /* the core frees only what pinned_alloc returned */
    }
    ocl_pinned e = d->pins[i - 1];
    memmove(&d->pins[i - 1], &d->pins[i], (d->n_pins - i) * sizeof *d->pins);
    d->n_pins--;
    if (d->n_pins == 0) {
        acg__free(d->pins);
        d->pins = NULL;
        d->cap_pins = 0;
    }
    pthread_mutex_unlock(&d->lock);
    clEnqueueUnmapMemObject(d->aux, e.mem, e.map, 0, NULL, NULL);
    clFinish(d->aux);
    clReleaseMemObject(e.mem);
}

/* ---- copies and fills --------------------------------------------------------------------- */

/* Ends a host copy queued with err and event ev. A blocking one waited for the commands before
 * it: a fault of theirs shows in its code, or in its own execution status (an implementation
 * may return CL_SUCCESS from a blocking call whose command terminated abnormally, and the host
 * memory then holds nothing it should). */
static acg_status copied(ocl_stream *s, cl_int err, cl_event ev, bool blocking, const char *fn,
                         const char *call) {
    if (err != CL_SUCCESS) {
        return blocking ? acg__ocl_sync_error(err, fn, call) : acg__ocl_error(err, fn, call);
    }
    acg__ocl_track(s, ev);
    acg_status st = blocking ? acg__ocl_event_status(ev, fn, call) : ACG_OK;
    return st == ACG_NOT_READY ? ACG_OK : st;
}

acg_status acg__ocl_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                             const void *src, size_t size, bool src_pinned) {
    ocl_stream *s = acg__ocl_stream(stream);
    /* Pageable memory must be read before the call returns: a blocking write. */
    cl_event ev = NULL;
    cl_int err = clEnqueueWriteBuffer(s->queue, acg__ocl_mem(dst), src_pinned ? CL_FALSE : CL_TRUE,
                                      dst_off, size, src, 0, NULL, &ev);
    return copied(s, err, ev, !src_pinned, "acg_copy_h2d", "clEnqueueWriteBuffer");
}

acg_status acg__ocl_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                             size_t size, bool dst_pinned) {
    ocl_stream *s = acg__ocl_stream(stream);
    cl_event ev = NULL;
    /* Pageable memory must be written before the call returns: a blocking read. */
    cl_int err = clEnqueueReadBuffer(s->queue, acg__ocl_mem(src), dst_pinned ? CL_FALSE : CL_TRUE,
                                     src_off, size, dst, 0, NULL, &ev);
    return copied(s, err, ev, !dst_pinned, "acg_copy_d2h", "clEnqueueReadBuffer");
}

acg_status acg__ocl_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                             acg__bk_mem *src, size_t src_off, size_t size) {
    ocl_stream *s = acg__ocl_stream(stream);
    acg_status st = ACG_OK;
    cl_event ev = NULL;
    OCL_CHECK(clEnqueueCopyBuffer(s->queue, acg__ocl_mem(src), acg__ocl_mem(dst), src_off, dst_off,
                                  size, 0, NULL, &ev),
              "acg_copy_d2d", out);
    acg__ocl_track(s, ev);
out:
    return st;
}

acg_status acg__ocl_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                         uint32_t pattern, uint32_t pattern_size) {
    ocl_stream *s = acg__ocl_stream(stream);
    acg_status st = ACG_OK;
    uint8_t bytes[4];
    acg__ocl_pattern_bytes(pattern, pattern_size, bytes);
    cl_event ev = NULL;
    OCL_CHECK(clEnqueueFillBuffer(s->queue, acg__ocl_mem(dst), bytes, pattern_size, off, size, 0,
                                  NULL, &ev),
              "acg_fill", out);
    acg__ocl_track(s, ev);
out:
    return st;
}
