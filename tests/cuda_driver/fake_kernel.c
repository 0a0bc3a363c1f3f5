/* fake_kernel.c — the CUDA test driver's libraries, kernels and launches: the one test seam.
 *
 * The driver cannot run GPU code, so a kernel runs acg's own cpu implementation of the kernel
 * of the same name, which the backend hands over with acgtest_cuda_bind_kernels. A launch's
 * parameters follow the project's convention for its fatbins: the kernel's acg arguments in
 * order (a buffer is one CUdeviceptr, its offset already added; I32/U32/F32 4 bytes; I64/U64 8
 * bytes), then three unsigned ints, the global sizes x, y, z. They are unpacked into
 * acg_cpu_arg when the launch is queued or recorded (CUDA copies parameters then too).
 */
#include "fake_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acgtest_cuda.h"

/* A fatbin starts with 0xBA55ED50, little endian. */
static const unsigned char fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba};

/* Dynamic shared memory a launch may ask for without cuFuncSetAttribute (48 KiB). */
#define MAX_DEFAULT_SHARED 49152u

CUresult fake_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_options,
                                void **jit_values, unsigned int n_jit, CUlibraryOption *options,
                                void **values, unsigned int n_options) {
    FAKE_ENTER(cuLibraryLoadData);
    struct CUctx_st *ctx;
    pthread_mutex_lock(&fake__g.lock);
    CUresult r = fake__current(&ctx);
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    if (library == NULL || code == NULL ||
        (n_jit > 0 && (jit_options == NULL || jit_values == NULL)) ||
        (n_options > 0 && (options == NULL || values == NULL))) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* Simplified: only fatbins (the real driver also takes cubins and PTX); the code itself is
     * never read past its magic. */
    if (memcmp(code, fatbin_magic, sizeof fatbin_magic) != 0) {
        r = CUDA_ERROR_INVALID_IMAGE;
        goto out;
    }
    struct CUlib_st *lib = calloc(1, sizeof *lib);
    if (lib == NULL || fake__vec_push(&fake__g.libraries, lib) != 0) {
        free(lib);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    fake__g.live++;
    *library = lib;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

static void library_free(struct CUlib_st *lib) {
    for (size_t i = 0; i < lib->kernels.n; i++) {
        struct CUkern_st *k = lib->kernels.v[i];
        fake__vec_remove(&fake__g.kernels, k);
        free(k->name);
        free(k);
    }
    fake__vec_free(&lib->kernels);
    fake__vec_remove(&fake__g.libraries, lib);
    free(lib);
}

long fake__libraries_reclaim(void) {
    long n = 0;
    while (fake__g.libraries.n > 0) {
        library_free(fake__g.libraries.v[fake__g.libraries.n - 1]);
        n++;
    }
    return n;
}

/* Libraries are context-independent (as CUDA 12's): no context needed to unload one, and a
 * context's teardown leaves them. */
CUresult fake_cuLibraryUnload(CUlibrary library) {
    FAKE_ENTER(cuLibraryUnload);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake__g.lock);
    if (!fake__g.initialized) {
        r = CUDA_ERROR_NOT_INITIALIZED;
    } else if (library == NULL || !fake__vec_has(&fake__g.libraries, library)) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        /* Queued launches and graphs copied what they run: unloading cannot break them. */
        library_free(library);
        fake__g.live--;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

static struct CUkern_st *kernel_in(struct CUlib_st *lib, const char *name) {
    for (size_t i = 0; i < lib->kernels.n; i++) {
        struct CUkern_st *k = lib->kernels.v[i];
        if (strcmp(k->name, name) == 0) {
            return k;
        }
    }
    return NULL;
}

CUresult fake_cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name) {
    FAKE_ENTER(cuLibraryGetKernel);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake__g.lock);
    if (!fake__g.initialized) {
        r = CUDA_ERROR_NOT_INITIALIZED;
    } else if (kernel == NULL || name == NULL) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (library == NULL || !fake__vec_has(&fake__g.libraries, library)) {
        r = CUDA_ERROR_INVALID_HANDLE;
    }
    if (r != CUDA_SUCCESS) {
        goto out;
    }
    struct CUkern_st *k = kernel_in(library, name);
    if (k != NULL) { /* the same name gives the same handle */
        *kernel = k;
        goto out;
    }
    /* The lookup enters acg's registry, which may hold its own lock: call it without ours. */
    const acg_kernel_desc *(*lookup)(const char *) = fake__g.lookup;
    pthread_mutex_unlock(&fake__g.lock);
    const acg_kernel_desc *desc = lookup != NULL ? lookup(name) : NULL;
    pthread_mutex_lock(&fake__g.lock);
    if (desc == NULL || desc->cpu.fn == NULL || desc->n_args > ACG_MAX_KERNEL_ARGS) {
        r = CUDA_ERROR_NOT_FOUND;
        goto out;
    }
    if (!fake__vec_has(&fake__g.libraries, library)) { /* unloaded meanwhile */
        r = CUDA_ERROR_INVALID_HANDLE;
        goto out;
    }
    if ((k = kernel_in(library, name)) != NULL) { /* another thread got it meanwhile */
        *kernel = k;
        goto out;
    }
    r = CUDA_ERROR_OUT_OF_MEMORY;
    k = calloc(1, sizeof *k);
    if (k == NULL || (k->name = strdup(name)) == NULL) {
        goto out_free;
    }
    k->lib = library;
    k->fn = desc->cpu.fn;
    k->n_args = desc->n_args;
    memcpy(k->types, desc->types, sizeof k->types);
    k->lanes = desc->cuda_lanes > 1 ? desc->cuda_lanes : 1;
    if (fake__vec_push(&library->kernels, k) != 0) {
        goto out_free;
    }
    if (fake__vec_push(&fake__g.kernels, k) != 0) {
        fake__vec_remove(&library->kernels, k);
        goto out_free;
    }
    *kernel = k;
    r = CUDA_SUCCESS;
    goto out;
out_free:
    if (k != NULL) {
        free(k->name);
    }
    free(k);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- launches ------------------------------------------------------------------------------- */

CUresult fake__kernel_work(CUkernel hk, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shared, void **params, void **extra,
                           struct fake_work *out) {
    if (hk == NULL || !fake__vec_has(&fake__g.kernels, hk)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    const struct CUkern_st *k = hk;
    /* Simplified: parameters come through kernelParams only. */
    if (extra != NULL || params == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* sm_90's limits, so a launch refused by a GPU is refused here. */
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gx > 2147483647u ||
        gy > 65535u || gz > 65535u || bx > 1024u || by > 1024u || bz > 64u ||
        (uint64_t)bx * by * bz > 1024u || shared > MAX_DEFAULT_SHARED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fake_work w = {.type = CU_GRAPH_NODE_TYPE_KERNEL};
    w.u.kernel.kernel = k;
    w.u.kernel.fn = k->fn;
    w.u.kernel.n_args = k->n_args;
    memcpy(w.u.kernel.types, k->types, sizeof w.u.kernel.types);
    for (uint32_t i = 0; i < k->n_args + 3; i++) {
        if (params[i] == NULL) {
            return CUDA_ERROR_INVALID_VALUE; /* a GPU would read through it and fault */
        }
    }
    for (uint32_t i = 0; i < k->n_args; i++) {
        acg_cpu_arg *a = &w.u.kernel.args[i];
        switch (k->types[i]) {
        case ACG_ARG_BUFFER: {
            CUdeviceptr p;
            memcpy(&p, params[i], sizeof p);
            a->p = (void *)(uintptr_t)p;
            break;
        }
        case ACG_ARG_I32:
            memcpy(&a->i32, params[i], 4);
            break;
        case ACG_ARG_U32:
            memcpy(&a->u32, params[i], 4);
            break;
        case ACG_ARG_F32:
            memcpy(&a->f32, params[i], 4);
            break;
        case ACG_ARG_I64:
            memcpy(&a->i64, params[i], 8);
            break;
        case ACG_ARG_U64:
            memcpy(&a->u64, params[i], 8);
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    /* A kernel of several lanes per work item (acg_kernel_desc.cuda_lanes) relies on each work
     * item's lanes being an aligned group of one warp, or a block of their own: a launch that
     * breaks that would compute garbage on a GPU, so it is refused here. */
    if (k->lanes > 1 && (k->lanes <= 32 ? bx % k->lanes != 0 : bx != k->lanes)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (int d = 0; d < 3; d++) {
        unsigned global;
        memcpy(&global, params[k->n_args + (uint32_t)d], sizeof global);
        /* The kernel returns early past the global size, so the grid must only cover it (times
         * the lanes along x). */
        if ((uint64_t)grid[d] * block[d] < (uint64_t)global * (d == 0 ? k->lanes : 1)) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        w.u.kernel.global[d] = global;
    }
    *out = w;
    return CUDA_SUCCESS;
}

/* A CUkernel cast to CUfunction, as the backend does (CUDA allows it for library kernels). */
CUresult fake_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                             CUstream h, void **params, void **extra) {
    FAKE_ENTER(cuLaunchKernel);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct fake_work work;
    CUresult r = fake__lock_stream(h, &ctx, &s);
    if (r == CUDA_SUCCESS) {
        r = fake__kernel_work((CUkernel)(void *)f, gx, gy, gz, bx, by, bz, shared, params, extra,
                              &work);
    }
    if (r == CUDA_SUCCESS) {
        r = fake__submit(s, &work);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}
