/* kernel.c — the cuda backend's kernels: a definition's cuda image loaded once per device and
 * distinct image (cuLibraryLoadData), its function's parameters checked against the definition
 * where the driver tells them, and launches shaped from the grid and the lanes. */
#include <stdio.h>
#include <string.h>

#include "cuda.h"

/* The library loaded from a fatbin (d->lock held): one per device for each distinct image, so
 * the kernels of one layer (the model's, say) share a load. */
static acg_status find_library(cu_device *d, const void *image, size_t size, CUlibrary *out) {
    static const char fn[] = "acg_kernel_get";
    for (uint32_t i = 0; i < d->n_libs; i++) {
        if (d->libs[i].size == size && memcmp(d->libs[i].image, image, size) == 0) {
            *out = d->libs[i].lib;
            return ACG_OK;
        }
    }
    /* A copy: the definition may be unregistered while the library stays until close. */
    void *copy = acg__alloc(size);
    if (copy == NULL ||
        !acg__grow((void **)&d->libs, &d->cap_libs, d->n_libs + 1, sizeof *d->libs)) {
        acg__free(copy);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    memcpy(copy, image, size);
    CUlibrary lib = NULL;
    acg_status st = CU(fn, cuLibraryLoadData, &lib, copy, NULL, NULL, 0, NULL, NULL, 0);
    if (st != ACG_OK) {
        acg__free(copy);
        return st;
    }
    d->libs[d->n_libs++] = (cu_library){copy, size, lib};
    *out = lib;
    return ACG_OK;
}

/* The bytes acg passes for an argument of type t (ACG_KERNEL_FORMAT_CUDA_IMAGE), and what it
 * is. */
static uint32_t param_bytes(acg_arg_type t) {
    return t == ACG_ARG_BUFFER                    ? (uint32_t)sizeof(CUdeviceptr)
           : t == ACG_ARG_I64 || t == ACG_ARG_U64 ? 8u
                                                  : 4u;
}

static const char *param_what(acg_arg_type t) {
    switch (t) {
    case ACG_ARG_BUFFER:
        return "a pointer";
    case ACG_ARG_I32:
        return "an i32";
    case ACG_ARG_U32:
        return "a u32";
    case ACG_ARG_I64:
        return "an i64";
    case ACG_ARG_U64:
        return "a u64";
    default:
        return "an f32";
    }
}

/* "buffer argument 0 (a pointer), argument 1 (an f32), then global[0..2] (3 unsigned int)" */
static void describe_params(const acg_kernel_desc *d, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < d->n_args && len < size; i++) {
        const char *kind = d->types[i] == ACG_ARG_BUFFER ? "buffer " : "";
        int n = snprintf(buf + len, size - len, "%sargument %u (%s), ", kind, i,
                         param_what(d->types[i]));
        len += n > 0 ? (size_t)n : 0;
    }
    if (len < size) {
        snprintf(buf + len, size - len, "then global[0..2] (3 unsigned int)");
    }
}

/* Compares the compiled function's parameters, as the driver reports them, with what a launch
 * passes under acg's convention (each argument as param_bytes says, then three unsigned ints);
 * ACG_ERR_INVALID_ARGUMENT naming the first difference. Without cuFuncGetParamInfo (CUDA 12.4)
 * nothing is checked. */
static acg_status check_params(CUkernel kern, const acg__kernel_def *def, const char *name,
                               const char *fn) {
    if (!acg__cu.param_check) {
        acg__log(ACG_LOG_DEBUG,
                 "cuda: %s(%s): the driver lacks cuFuncGetParamInfo (CUDA 12.4): the parameters "
                 "of the CUDA function %s are not checked",
                 fn, def->name, name);
        return ACG_OK;
    }
    CUfunction f = NULL;
    acg_status st = CU(fn, cuKernelGetFunction, &f, kern);
    const uint32_t n = def->d.n_args + 3;
    uint32_t i = 0;
    CUresult r = CUDA_SUCCESS;
    /* Past n, only whether the function has more: counted until the driver refuses. */
    for (; st == ACG_OK; i++) {
        size_t offset = 0, bytes = 0;
        r = acg__cu.cuFuncGetParamInfo(f, i, &offset, &bytes);
        if (r != CUDA_SUCCESS) {
            break;
        }
        uint32_t want = i < def->d.n_args ? param_bytes(def->d.types[i]) : 4u;
        if (i < n && bytes != want) {
            char what[64];
            if (i < def->d.n_args) {
                snprintf(what, sizeof what, "%sargument %u, %s",
                         def->d.types[i] == ACG_ARG_BUFFER ? "buffer " : "", i,
                         param_what(def->d.types[i]));
            } else {
                snprintf(what, sizeof what, "global[%u], an unsigned int", i - def->d.n_args);
            }
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): in the CUDA function %s, parameter %u is %zu bytes, acg "
                              "passes %s (%u bytes)",
                              fn, def->name, name, i, bytes, what, want);
        }
    }
    if (st == ACG_OK && r != CUDA_ERROR_INVALID_VALUE) {
        st = acg__cu_check(r, fn, "cuFuncGetParamInfo");
    }
    if (st == ACG_OK && i != n) {
        char passed[768];
        describe_params(&def->d, passed, sizeof passed);
        st = acg__error(ACG_ERR_INVALID_ARGUMENT,
                        "%s(%s): the CUDA function %s has %u parameters; acg passes %u: %s "
                        "(cuFuncGetParamInfo refuses parameter %u with CUDA_ERROR_INVALID_VALUE)",
                        fn, def->name, name, i, n, passed, i);
    }
    return st;
}

/* A registrant's cuda_lanes: a power of two up to 1024 (0 and 1: one thread), and more than one
 * only with code for cuda to run them (the legacy cuda.fatbin, or an impls entry of its format
 * for cuda or for every backend). */
acg_status acg__cu_kernel_check(const acg_kernel_desc *d, const char *fn) {
    if (d->cuda_lanes > 1024 || (d->cuda_lanes & (d->cuda_lanes - 1)) != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): cuda_lanes %u is not a power of two up to 1024 (or 0)", fn,
                          d->name, d->cuda_lanes);
    }
    bool image = d->cuda.fatbin != NULL;
    for (uint32_t i = 0; i < d->n_impls && !image; i++) {
        const acg_kernel_impl *e = &d->impls[i];
        image = strcmp(e->format, ACG_KERNEL_FORMAT_CUDA_IMAGE) == 0 &&
                (e->backend == NULL || strcmp(e->backend, "cuda") == 0);
    }
    if (d->cuda_lanes > 1 && !image) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): cuda_lanes without a cuda-image implementation (cuda.fatbin, "
                          "or an impls entry of format \"%s\" for cuda)",
                          fn, d->name, ACG_KERNEL_FORMAT_CUDA_IMAGE);
    }
    return ACG_OK;
}

acg_status acg__cu_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                               acg__bk_kernel **out) {
    static const char fn[] = "acg_kernel_get";
    cu_device *d = acg__cu_dev(dev);
    const acg_kernel_impl *impl = acg__kernel_impl_find(def, "cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE);
    if (impl == NULL) {
        return acg__error_no_kernel_code(fn, def->name, "cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE,
                                         "cuda.fatbin");
    }
    ACG__TRY(acg__cu_enter(d, fn));
    /* PTX text given without its size: the image is the text with its NUL. */
    const size_t size = impl->size != 0 ? impl->size : strlen(impl->code) + 1;
    CUlibrary lib = NULL;
    pthread_mutex_lock(&d->lock);
    acg_status st = find_library(d, impl->code, size, &lib);
    pthread_mutex_unlock(&d->lock);
    if (st != ACG_OK) {
        return st;
    }
    cu_kernel *k = acg__new(sizeof *k, fn);
    if (k == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    const char *name = impl->entry != NULL ? impl->entry : def->name;
    st = CU(fn, cuLibraryGetKernel, &k->kern, lib, name);
    if (st == ACG_OK) {
        st = check_params(k->kern, def, name, fn);
    }
    if (st != ACG_OK) {
        acg__free(k);
        return st;
    }
    k->def = def;
    *out = acg__cu_bk_kernel(k);
    return ACG_OK;
}

void acg__cu_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel) {
    ACG__UNUSED(dev);
    acg__free(acg__cu_kernel(kernel)); /* a CUkernel lives as long as its library */
}

#define DEFAULT_BLOCK 256u /* threads of a block when the launch names no local size */
#define WARP 32u

acg_status acg__cu_launch_shape(const cu_kernel *kernel, const acg_dims *dims,
                                const acg__karg *args, uint32_t n_args, cu_launch *l,
                                const char *fn) {
    static const uint64_t max_grid[3] = {2147483647u, 65535u, 65535u};
    const uint32_t lanes = kernel->def->d.cuda_lanes > 1 ? kernel->def->d.cuda_lanes : 1;
    for (int d = 0; d < 3; d++) {
        uint64_t g = dims->global[d];
        uint32_t b;
        if (lanes > 1) {
            /* Each work item's lanes are an aligned group of a warp in blocks of 256, or a
             * block of its own (acg_kernel_desc.cuda_lanes); y and z have blocks of 1. */
            b = d != 0 ? 1 : lanes > WARP ? lanes : DEFAULT_BLOCK;
            g = d == 0 ? g * lanes : g;
        } else {
            b = dims->local[0] != 0 ? (dims->local[d] ? dims->local[d] : 1)
                : d == 0            ? (g < DEFAULT_BLOCK ? (uint32_t)g : DEFAULT_BLOCK)
                                    : 1;
            b = b ? b : 1;
        }
        uint64_t blocks = (g + b - 1) / b;
        if (blocks > max_grid[d]) {
            return acg__error(ACG_ERR_UNSUPPORTED,
                              "%s: %u work items in dimension %d need %llu blocks of %u, more "
                              "than CUDA launches (%llu)",
                              fn, dims->global[d], d, (unsigned long long)blocks, b,
                              (unsigned long long)max_grid[d]);
        }
        l->grid[d] = blocks ? (unsigned)blocks : 1;
        l->block[d] = b;
    }
    for (uint32_t i = 0; i < n_args; i++) {
        const acg__karg *a = &args[i];
        switch (a->type) {
        case ACG_ARG_BUFFER:
            l->values[i] = acg__cu_mem(a->value.buf.mem) + a->value.buf.offset;
            break;
        case ACG_ARG_I64:
        case ACG_ARG_U64:
            memcpy(&l->values[i], &a->value, 8);
            break;
        default:
            memcpy(&l->values[i], &a->value, 4);
            break;
        }
        l->params[i] = &l->values[i];
    }
    for (uint32_t d = 0; d < 3; d++) {
        unsigned g = dims->global[d];
        memcpy(&l->values[n_args + d], &g, sizeof g);
        l->params[n_args + d] = &l->values[n_args + d];
    }
    return ACG_OK;
}

acg_status acg__cu_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                 const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    static const char fn[] = "acg_kernel_launch";
    cu_stream *s = acg__cu_stream(stream);
    cu_launch l;
    acg_status st = acg__cu_launch_shape(acg__cu_kernel(kernel), dims, args, n_args, &l, fn);
    if (st == ACG_OK) {
        st = acg__cu_enter(s->dev, fn);
    }
    if (st == ACG_OK) {
        /* A CUkernel is launched by casting it to a CUfunction, in the current context. */
        st = CU(fn, cuLaunchKernel, (CUfunction)acg__cu_kernel(kernel)->kern, l.grid[0], l.grid[1],
                l.grid[2], l.block[0], l.block[1], l.block[2], 0, s->stream, l.params, NULL);
    }
    if (st == ACG_OK && s->rec != NULL) {
        st = acg__cu_capture_kernel(s, fn);
    }
    return st;
}
