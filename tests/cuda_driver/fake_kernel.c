/* fake_kernel.c — the CUDA test driver's libraries, kernels and launches: the one test seam.
 *
 * The driver cannot run GPU code, so a kernel runs acg's own cpu implementation of the kernel
 * of the same name, which the backend hands over with acgtest_cuda_bind_kernels. A launch's
 * parameters follow the project's convention for its fatbins: the kernel's acg arguments in
 * order (a buffer is one CUdeviceptr, its offset already added; I32/U32/F32 4 bytes; I64/U64 8
 * bytes), then three unsigned ints, the global sizes x, y, z. They are unpacked into
 * acg_cpu_arg when the launch is queued or recorded (CUDA copies parameters then too).
 *
 * What an image holds is read from the image, never from acg's definitions: which functions
 * there are (cuLibraryGetKernel refuses a name the image lacks, as CUDA does) and each one's
 * parameters (cuFuncGetParamInfo), so a definition that disagrees with its compiled function
 * is caught here as on a GPU. Two kinds of image are taken:
 * - a fatbin nvcc made: the parameters are those of the function's EIATTR_KPARAM_INFO
 *   attributes in the .nv.info.<function> section of the fatbin's first uncompressed ELF
 *   (cubin) entry that has functions, as `cuobjdump -elf` shows them;
 * - a test's own image: the fatbin magic, then the text "acgtest-cuda-image\n" and one line
 *   per function, its name and its parameters' sizes in bytes ("my_k 8 4 4 4 4\n"), ending
 *   in NUL; each parameter lies at the next offset aligned to its size (up to 8).
 * Simplified: PTX is never read (nvcc compresses it in a fatbin), so an image whose every ELF
 * entry is compressed, or that has none, holds no function here.
 *
 * A few functions of device code the driver emulates itself, whatever image holds them
 * (fake_cond.c's table: acg's loop kernels, which call the device runtime's
 * cudaGraphSetConditional, and have no cpu implementation): a function of such a name and
 * parameters runs the emulation, without any lookup.
 */
#include "fake_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acgtest_cuda.h"
#include "fake_kernel_args.h"

/* A fatbin starts with 0xBA55ED50, little endian; an ELF with 0x7f "ELF". */
static const unsigned char fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba};
static const unsigned char elf_magic[4] = {0x7f, 'E', 'L', 'F'};

/* Dynamic shared memory a launch may ask for without cuFuncSetAttribute (48 KiB). */
#define MAX_DEFAULT_SHARED 49152u

/* ---- what an image holds -------------------------------------------------------------------- */

static const char test_image_tag[] = "acgtest-cuda-image\n";

/* The fatbin's entry kind of an ELF (cubin); EIATTR_KPARAM_INFO and its value format. */
#define FATBIN_KIND_ELF 2u
#define EIFMT_SVAL 4u
#define EIATTR_KPARAM_INFO 0x17u
/* A fatbin larger than this is taken for a corrupt header. */
#define MAX_IMAGE_BYTES (1ull << 32)

static void functions_free(struct fake_vec *functions) {
    for (size_t i = 0; i < functions->n; i++) {
        struct fake_function *f = functions->v[i];
        free(f->name);
        free(f);
    }
    fake__vec_free(functions);
}

static struct fake_function *function_in(const struct fake_vec *functions, const char *name,
                                         size_t len) {
    for (size_t i = 0; i < functions->n; i++) {
        struct fake_function *f = functions->v[i];
        if (strlen(f->name) == len && memcmp(f->name, name, len) == 0) {
            return f;
        }
    }
    return NULL;
}

/* The function `name` (len bytes, not terminated) of the list, added with no parameters when
 * it is not there yet; NULL when out of memory. */
static struct fake_function *function_add(struct fake_vec *functions, const char *name,
                                          size_t len) {
    struct fake_function *f = function_in(functions, name, len);
    if (f != NULL) {
        return f;
    }
    f = calloc(1, sizeof *f);
    if (f == NULL || (f->name = malloc(len + 1)) == NULL || fake__vec_push(functions, f) != 0) {
        if (f != NULL) {
            free(f->name);
        }
        free(f);
        return NULL;
    }
    memcpy(f->name, name, len);
    f->name[len] = '\0';
    return f;
}

static uint64_t read_u(const unsigned char *p, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;) { /* little endian, as fatbins and cubins are */
        v = v << 8 | p[i];
    }
    return v;
}

/* A test's image: "name size size ...\n" lines after the tag, up to the NUL. */
static CUresult read_test_image(const char *text, struct fake_vec *functions) {
    while (*text != '\0') {
        const char *end = strchr(text, '\n');
        if (end == NULL) {
            return CUDA_ERROR_INVALID_IMAGE;
        }
        size_t len = strcspn(text, " \n");
        if (len == 0 || function_in(functions, text, len) != NULL) {
            return CUDA_ERROR_INVALID_IMAGE;
        }
        struct fake_function *f = function_add(functions, text, len);
        if (f == NULL) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        uint32_t at = 0;
        for (const char *p = text + len + strspn(text + len, " "); p < end; p += strspn(p, " ")) {
            char *next = NULL;
            unsigned long size = *p >= '0' && *p <= '9' ? strtoul(p, &next, 10) : 0;
            if (size == 0 || size > 256 || f->params.n == FAKE_MAX_PARAMS) {
                return CUDA_ERROR_INVALID_IMAGE;
            }
            uint32_t align = size >= 8 ? 8 : size >= 4 ? 4 : size >= 2 ? 2 : 1;
            at = (at + align - 1) / align * align;
            f->params.size[f->params.n] = (uint32_t)size;
            f->params.offset[f->params.n] = at;
            f->params.n++;
            at += (uint32_t)size;
            p = next;
        }
        text = end + 1;
    }
    return CUDA_SUCCESS;
}

/* The functions of one cubin: each .nv.info.<function> section's parameter attributes. An ELF
 * that is malformed gives CUDA_ERROR_INVALID_IMAGE. */
static CUresult read_cubin(const unsigned char *elf, uint64_t size, struct fake_vec *functions) {
    static const char prefix[] = ".nv.info.";
    if (size < 64 || elf[4] != 2 /* ELFCLASS64 */) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    uint64_t shoff = read_u(elf + 0x28, 8);
    uint64_t shentsize = read_u(elf + 0x3a, 2), shnum = read_u(elf + 0x3c, 2);
    uint64_t shstrndx = read_u(elf + 0x3e, 2);
    if (shentsize < 64 || shstrndx >= shnum || shoff > size || shnum * shentsize > size - shoff) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    const unsigned char *strtab_sh = elf + shoff + shstrndx * shentsize;
    uint64_t strtab = read_u(strtab_sh + 24, 8), strtab_size = read_u(strtab_sh + 32, 8);
    if (strtab > size || strtab_size > size - strtab) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    for (uint64_t i = 0; i < shnum; i++) {
        const unsigned char *sh = elf + shoff + i * shentsize;
        uint64_t name = read_u(sh, 4), off = read_u(sh + 24, 8), bytes = read_u(sh + 32, 8);
        if (name >= strtab_size || off > size || bytes > size - off) {
            return CUDA_ERROR_INVALID_IMAGE;
        }
        const char *sname = (const char *)elf + strtab + name;
        size_t room = (size_t)(strtab_size - name);
        size_t len = strnlen(sname, room);
        if (len == room) {
            return CUDA_ERROR_INVALID_IMAGE; /* not terminated */
        }
        if (len <= sizeof prefix - 1 || memcmp(sname, prefix, sizeof prefix - 1) != 0) {
            continue;
        }
        struct fake_function *f =
            function_add(functions, sname + sizeof prefix - 1, len - (sizeof prefix - 1));
        if (f == NULL) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        uint32_t seen = 0;
        /* Attributes: a format byte, an attribute byte, a 16-bit value, which for EIFMT_SVAL is
         * the size of the payload that follows. */
        for (uint64_t at = 0; at + 4 <= bytes;) {
            const unsigned char *a = elf + off + at;
            uint64_t fmt = a[0], attr = a[1], value = read_u(a + 2, 2);
            at += 4;
            if (fmt != EIFMT_SVAL) {
                continue;
            }
            if (value > bytes - at) {
                return CUDA_ERROR_INVALID_IMAGE;
            }
            if (attr == EIATTR_KPARAM_INFO) {
                /* index (4 bytes), ordinal (2), offset (2), then the size in the top 14 bits */
                if (value < 12) {
                    return CUDA_ERROR_INVALID_IMAGE;
                }
                uint64_t ordinal = read_u(a + 8, 2), poff = read_u(a + 10, 2);
                uint64_t psize = read_u(a + 12, 4) >> 18;
                if (ordinal >= FAKE_MAX_PARAMS) {
                    return CUDA_ERROR_INVALID_IMAGE;
                }
                f->params.size[ordinal] = (uint32_t)psize;
                f->params.offset[ordinal] = (uint32_t)poff;
                f->params.n = f->params.n > ordinal ? f->params.n : (uint32_t)ordinal + 1;
                seen++;
            }
            at += value;
        }
        if (seen != f->params.n) { /* an ordinal given twice, or one missing */
            return CUDA_ERROR_INVALID_IMAGE;
        }
    }
    return CUDA_SUCCESS;
}

/* A fatbin: its entries after the header; the first ELF entry with functions is read. */
static CUresult read_fatbin(const unsigned char *image, struct fake_vec *functions) {
    uint64_t header = read_u(image + 6, 2), fat = read_u(image + 8, 8);
    if (header < 16 || fat > MAX_IMAGE_BYTES) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    for (uint64_t at = header; at < header + fat;) {
        const unsigned char *e = image + at;
        uint64_t kind = read_u(e, 2), ehead = read_u(e + 4, 4), payload = read_u(e + 8, 8);
        if (ehead < 16 || ehead + payload > header + fat - at) {
            return CUDA_ERROR_INVALID_IMAGE;
        }
        const unsigned char *p = e + ehead;
        if (kind == FATBIN_KIND_ELF && payload >= 4 && memcmp(p, elf_magic, 4) == 0) {
            CUresult r = read_cubin(p, payload, functions);
            if (r != CUDA_SUCCESS || functions->n > 0) {
                return r;
            }
        }
        at += ehead + payload;
    }
    return CUDA_SUCCESS;
}

/* The functions an image holds, and its size: a fatbin's header says it, a test image is text
 * ending in NUL. */
static CUresult read_image(const void *code, struct fake_vec *functions, size_t *size) {
    const unsigned char *image = code;
    const char *text = (const char *)image + sizeof fatbin_magic;
    const bool test = strncmp(text, test_image_tag, sizeof test_image_tag - 1) == 0;
    *size = test ? sizeof fatbin_magic + strlen(text) + 1
                 : (size_t)(read_u(image + 6, 2) + read_u(image + 8, 8));
    CUresult r = test ? read_test_image(text + sizeof test_image_tag - 1, functions)
                      : read_fatbin(image, functions);
    if (r != CUDA_SUCCESS) {
        functions_free(functions);
    }
    return r;
}

static void library_free(void *obj) {
    struct CUlib_st *lib = obj;
    for (size_t i = 0; i < lib->kernels.n; i++) {
        struct CUkern_st *k = lib->kernels.v[i];
        fake__vec_remove(&fake__g.kernels, k);
        free(k->name);
        free(k);
    }
    fake__vec_free(&lib->kernels);
    functions_free(&lib->functions);
    fake__vec_remove(&fake__g.libraries, lib);
    free(lib);
}

CUresult fake_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_options,
                                void **jit_values, unsigned int n_jit, CUlibraryOption *options,
                                void **values, unsigned int n_options) {
    FAKE_ENTER(cuLibraryLoadData);
    struct CUctx_st *ctx;
    CUresult r;
    FAKE_CHECK(fake__lock_current(&ctx), out);
    if (library == NULL || code == NULL ||
        (n_jit > 0 && (jit_options == NULL || jit_values == NULL)) ||
        (n_options > 0 && (options == NULL || values == NULL))) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* Simplified: only fatbins (the real driver also takes cubins and PTX); what the code
     * does is never read, only which functions it holds and their parameters. */
    FAKE_FAIL_IF(memcmp(code, fatbin_magic, sizeof fatbin_magic) != 0, CUDA_ERROR_INVALID_IMAGE,
                 out);
    struct CUlib_st *lib = calloc(1, sizeof *lib);
    FAKE_FAIL_IF(lib == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    if ((r = read_image(code, &lib->functions, &lib->size)) != CUDA_SUCCESS) {
        free(lib);
        goto out;
    }
    lib->image = code;
    r = fake__publish(&fake__g.libraries, lib, library_free, (void **)library);
out:
    return fake__unlock(r);
}

void fake__libraries_reclaim(void) {
    while (fake__g.libraries.n > 0) {
        library_free(fake__g.libraries.v[fake__g.libraries.n - 1]);
    }
}

/* Libraries are context-independent (as CUDA 12's): no context needed to unload one, and a
 * context's teardown leaves them. Queued launches and graphs copied what they run: unloading
 * cannot break them. */
CUresult fake_cuLibraryUnload(CUlibrary library) {
    FAKE_ENTER(cuLibraryUnload);
    struct CUlib_st *lib;
    CUresult r = fake__lock_initialized();
    if (r == CUDA_SUCCESS) {
        r = fake__handle(&fake__g.libraries, library, (void **)&lib);
    }
    if (r == CUDA_SUCCESS) {
        library_free(lib);
        fake__live(-1);
    }
    return fake__unlock(r);
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

/* (lock held) A new kernel `name` of lib, whose image has that function, running the cpu code
 * desc gives, or (desc NULL) the driver's emulation `builtin`: NULL when out of memory. */
static struct CUkern_st *kernel_new(struct CUlib_st *lib, const char *name,
                                    const acg_kernel_desc *desc,
                                    const struct fake_builtin *builtin) {
    struct CUkern_st *k = calloc(1, sizeof *k);
    if (k == NULL || (k->name = strdup(name)) == NULL) {
        free(k);
        return NULL;
    }
    k->lib = lib;
    k->builtin = builtin;
    k->lanes = 1;
    if (desc != NULL) {
        k->fn = desc->cpu.fn;
        k->n_args = desc->n_args;
        memcpy(k->types, desc->types, sizeof k->types);
        k->lanes = desc->cuda_lanes > 1 ? desc->cuda_lanes : 1;
    }
    k->params = function_in(&lib->functions, name, strlen(name))->params;
    if (fake__vec_push(&lib->kernels, k) == 0) {
        if (fake__vec_push(&fake__g.kernels, k) == 0) {
            return k;
        }
        fake__vec_remove(&lib->kernels, k);
    }
    free(k->name);
    free(k);
    return NULL;
}

CUresult fake_cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name) {
    FAKE_ENTER(cuLibraryGetKernel);
    struct CUlib_st *lib;
    CUresult r;
    FAKE_CHECK(fake__lock_initialized(), out);
    FAKE_FAIL_IF(kernel == NULL || name == NULL, CUDA_ERROR_INVALID_VALUE, out);
    FAKE_CHECK(fake__handle(&fake__g.libraries, library, (void **)&lib), out);
    struct CUkern_st *k = kernel_in(lib, name); /* the same name gives the same handle */
    const acg_kernel_desc *desc = NULL;
    const struct fake_function *f = function_in(&lib->functions, name, strlen(name));
    const struct fake_builtin *builtin = f != NULL ? fake__builtin_find(name, &f->params) : NULL;
    if (k == NULL && builtin == NULL) {
        /* The image has no such function. */
        FAKE_FAIL_IF(f == NULL, CUDA_ERROR_NOT_FOUND, out);
        /* The lookup enters acg's registry, which may hold its own lock: call it without
         * ours. */
        const acg_kernel_desc *(*lookup)(const void *, size_t, const char *) = fake__g.lookup;
        const void *image = lib->image;
        const size_t size = lib->size;
        pthread_mutex_unlock(&fake__g.lock);
        desc = lookup != NULL ? lookup(image, size, name) : NULL;
        pthread_mutex_lock(&fake__g.lock);
        FAKE_FAIL_IF(desc == NULL || desc->cpu.fn == NULL || desc->n_args > ACG_MAX_KERNEL_ARGS,
                     CUDA_ERROR_NOT_FOUND, out);
        /* Unloaded meanwhile, or the kernel got by another thread meanwhile? */
        FAKE_CHECK(fake__handle(&fake__g.libraries, library, (void **)&lib), out);
        k = kernel_in(lib, name);
    }
    if (k == NULL) {
        k = kernel_new(lib, name, desc, builtin);
        FAKE_FAIL_IF(k == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    }
    *kernel = k;
out:
    return fake__unlock(r);
}

/* ---- launches ------------------------------------------------------------------------------- */

CUresult fake__kernel_work(CUkernel hk, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned shared, void **params, void **extra,
                           struct fake_work *out) {
    const struct CUkern_st *k;
    CUresult r = fake__handle(&fake__g.kernels, hk, (void **)&k);
    if (r != CUDA_SUCCESS) {
        return r;
    }
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
    if (k->builtin != NULL) {
        /* Emulated device code is one thread's (stricter than CUDA, where more threads would
         * race), and takes its parameters as the image lays them out, no global sizes. */
        if ((uint64_t)gx * gy * gz * bx * by * bz != 1) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        w.u.kernel.builtin = k->builtin;
        for (uint32_t i = 0; i < k->params.n; i++) {
            if (params[i] == NULL) {
                return CUDA_ERROR_INVALID_VALUE;
            }
            if (k->params.size[i] == 8) {
                memcpy(&w.u.kernel.args[i].u64, params[i], 8);
            } else {
                memcpy(&w.u.kernel.args[i].u32, params[i], 4);
            }
        }
        *out = w;
        return CUDA_SUCCESS;
    }
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
        if (k->types[i] == ACG_ARG_BUFFER) {
            CUdeviceptr p;
            memcpy(&p, params[i], sizeof p);
            a->p = (void *)(uintptr_t)p;
        } else if (fake__scalar_arg(k->types[i], params[i], a) != 0) {
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
    return fake__unlock_submit(r, s, &work);
}

/* A function handle for the current context: here the kernel itself (the backend also casts
 * one to launch it, which CUDA allows for library kernels). */
CUresult fake_cuKernelGetFunction(CUfunction *func, CUkernel kernel) {
    FAKE_ENTER(cuKernelGetFunction);
    struct CUctx_st *ctx;
    struct CUkern_st *k;
    CUresult r = fake__given(fake__lock_current(&ctx), func);
    if (r == CUDA_SUCCESS) {
        r = fake__handle(&fake__g.kernels, kernel, (void **)&k);
    }
    if (r == CUDA_SUCCESS) {
        *func = (CUfunction)(void *)k;
    }
    return fake__unlock(r);
}

/* The parameter's place as the image describes the compiled function; an index past its last
 * parameter is CUDA_ERROR_INVALID_VALUE, as in CUDA. size may be NULL. */
CUresult fake_cuFuncGetParamInfo(CUfunction func, size_t index, size_t *offset, size_t *size) {
    FAKE_ENTER(cuFuncGetParamInfo);
    struct CUctx_st *ctx;
    const struct CUkern_st *k;
    CUresult r = fake__lock_current(&ctx);
    if (r == CUDA_SUCCESS) {
        r = fake__handle(&fake__g.kernels, (const void *)func, (void **)&k);
    }
    if (r == CUDA_SUCCESS && (offset == NULL || index >= k->params.n)) {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        *offset = k->params.offset[index];
        if (size != NULL) {
            *size = k->params.size[index];
        }
    }
    return fake__unlock(r);
}
