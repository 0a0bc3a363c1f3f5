/* fake_module.c — the Level Zero test driver's modules, build logs and kernels: the one test seam.
 *
 * The driver cannot run GPU code, so a kernel runs acg's own cpu implementation of the kernel
 * of the same name, which the backend hands over with acgtest_ze_bind_kernels. A module must be
 * well-formed SPIR-V: the magic and the instruction stream are checked, the OpEntryPoint names
 * kept with the parameters of the OpFunction each names (every entry point must name one), and
 * a kernel can only be created under one of those names; nothing is compiled (simplified:
 * specialization constants and build flags are ignored). A kernel's parameters are its SPIR-V
 * function's, whatever acg's definition says: zeKernelGetProperties counts them and
 * zexKernelGetArgumentSize gives their sizes, so a definition that disagrees with its module
 * shows. The cpu code run in the kernel's place takes them in acg's OpenCL C convention
 * (acg_kernel_desc.opencl): a buffer argument is a global pointer and a ulong byte offset, a
 * scalar one parameter of its type. Their values are copied into a launch when it is appended,
 * as the specification says.
 */
#include "fake_ze_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_kernel_args.h"

#define SPIRV_MAGIC 0x07230203u
#define SPIRV_HEADER_WORDS 5u
#define SPIRV_OP_MEMORY_MODEL 14u
#define SPIRV_OP_ENTRY_POINT 15u
#define SPIRV_OP_TYPE_INT 21u
#define SPIRV_OP_TYPE_FLOAT 22u
#define SPIRV_OP_TYPE_POINTER 32u
#define SPIRV_OP_FUNCTION 54u
#define SPIRV_OP_FUNCTION_PARAMETER 55u
#define SPIRV_OP_FUNCTION_END 56u
#define SPIRV_EXECUTION_MODEL_KERNEL 6u
#define SPIRV_ADDRESSING_PHYSICAL32 1u
#define SPIRV_ADDRESSING_PHYSICAL64 2u
/* The largest id bound (header word 3) taken: the parser keeps a byte per id. */
#define SPIRV_MAX_BOUND (1u << 22)

/* ---- SPIR-V --------------------------------------------------------------------------------- */

static uint32_t word_at(const uint8_t *bytes, size_t i, int swapped) {
    uint32_t w;
    memcpy(&w, bytes + 4 * i, 4);
    if (swapped) {
        w = (w >> 24) | ((w >> 8) & 0xff00u) | ((w << 8) & 0xff0000u) | (w << 24);
    }
    return w;
}

static int add_entry(struct fake_module *m, const char *name, size_t len, uint32_t function) {
    struct fake_entry *v = realloc(m->entries, (m->n_entries + 1) * sizeof *v);
    if (v == NULL) {
        return -1;
    }
    m->entries = v;
    struct fake_entry *e = &v[m->n_entries];
    memset(e, 0, sizeof *e);
    if ((e->name = malloc(len + 1)) == NULL) {
        return -1;
    }
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->function = function;
    m->n_entries++;
    return 0;
}

/* What the walk over a module's instructions keeps: the size of each type id a parameter may
 * have, the pointer size, and the function whose parameters come next (0: none). */
struct spirv_walk {
    unsigned char *size_of; /* (bound) */
    uint32_t bound;
    uint32_t pointer;
    uint32_t function;
};

/* An id operand: 1 with the reason written to why when it is not below the module's bound. */
static int id_ok(const struct spirv_walk *w, uint32_t id, size_t at, char *why, size_t why_size) {
    if (id != 0 && id < w->bound) {
        return 0;
    }
    snprintf(why, why_size, "the instruction at word %zu names id %u, outside the bound %u", at, id,
             w->bound);
    return 1;
}

/* One instruction of a type or a function: the sizes of the types a parameter may have, and
 * the parameters of the functions the entry points name. 0, or 1 with the reason. */
static int walk_one(struct fake_module *m, struct spirv_walk *w, const uint8_t *bytes, size_t i,
                    uint32_t op, uint32_t count, char *why, size_t why_size) {
    uint32_t a = count > 1 ? word_at(bytes, i + 1, 0) : 0;
    uint32_t b = count > 2 ? word_at(bytes, i + 2, 0) : 0;
    switch (op) {
    case SPIRV_OP_MEMORY_MODEL:
        w->pointer = a == SPIRV_ADDRESSING_PHYSICAL64   ? 8
                     : a == SPIRV_ADDRESSING_PHYSICAL32 ? 4
                                                        : 0; /* Logical: no pointers */
        return 0;
    case SPIRV_OP_TYPE_INT:
    case SPIRV_OP_TYPE_FLOAT:
        if (id_ok(w, a, i, why, why_size)) {
            return 1;
        }
        w->size_of[a] = (unsigned char)(b / 8 <= 8 ? b / 8 : 0);
        return 0;
    case SPIRV_OP_TYPE_POINTER:
        if (id_ok(w, a, i, why, why_size)) {
            return 1;
        }
        w->size_of[a] = (unsigned char)w->pointer;
        return 0;
    case SPIRV_OP_FUNCTION: /* result type, result id */
        if (id_ok(w, b, i, why, why_size)) {
            return 1;
        }
        w->function = b;
        for (size_t e = 0; e < m->n_entries; e++) {
            m->entries[e].defined |= m->entries[e].function == b;
        }
        return 0;
    case SPIRV_OP_FUNCTION_PARAMETER: /* result type, result id */
        if (id_ok(w, a, i, why, why_size)) {
            return 1;
        }
        for (size_t e = 0; e < m->n_entries; e++) {
            struct fake_entry *k = &m->entries[e];
            if (k->function != w->function || w->function == 0) {
                continue;
            }
            if (k->n_params == FAKE_MAX_PARAMS) {
                snprintf(why, why_size,
                         "kernel %s has more than %d parameters, which this driver does not take",
                         k->name, FAKE_MAX_PARAMS);
                return 1;
            }
            k->param_size[k->n_params++] = w->size_of[a];
        }
        return 0;
    case SPIRV_OP_FUNCTION_END:
        w->function = 0;
        return 0;
    default:
        return 0;
    }
}

/* Walks the module's instructions and keeps its kernels: their names, and the parameters of
 * the functions they name. Returns 0, -1 when out of memory, or 1 with the reason it is no
 * SPIR-V this driver takes written to why. */
static int parse_spirv(const uint8_t *bytes, size_t size, struct fake_module *m, char *why,
                       size_t why_size) {
    size_t n = size / 4;
    if (size % 4 != 0 || n < SPIRV_HEADER_WORDS) {
        snprintf(why, why_size,
                 "%zu bytes are not a SPIR-V module (a header of 5 words, then "
                 "whole words)",
                 size);
        return 1;
    }
    int swapped = word_at(bytes, 0, 0) != SPIRV_MAGIC;
    if (swapped && word_at(bytes, 0, 1) != SPIRV_MAGIC) {
        snprintf(why, why_size, "the magic number is 0x%08x, not SPIR-V's 0x%08x",
                 word_at(bytes, 0, 0), SPIRV_MAGIC);
        return 1;
    }
    uint32_t version = word_at(bytes, 1, swapped);
    if ((version >> 16) != 1) {
        snprintf(why, why_size, "SPIR-V version 0x%08x is not 1.x", version);
        return 1;
    }
    struct spirv_walk w = {.bound = word_at(bytes, 3, swapped), .pointer = 8};
    if (w.bound > SPIRV_MAX_BOUND) {
        snprintf(why, why_size, "the id bound %u is more than this driver takes (%u)", w.bound,
                 SPIRV_MAX_BOUND);
        return 1;
    }
    if (w.bound > 0 && (w.size_of = calloc(w.bound, 1)) == NULL) {
        return -1;
    }
    int r = 0;
    for (size_t i = SPIRV_HEADER_WORDS; i < n && r == 0;) {
        uint32_t first = word_at(bytes, i, swapped);
        uint32_t count = first >> 16, op = first & 0xffffu;
        if (count == 0 || count > n - i) {
            snprintf(why, why_size, "the instruction at word %zu (opcode %u) has %u words, %s", i,
                     op, count, count == 0 ? "none" : "past the end of the module");
            r = 1;
            break;
        }
        if (swapped && op == SPIRV_OP_ENTRY_POINT) {
            snprintf(why, why_size,
                     "a byte-swapped module's entry point names are not read "
                     "by this driver");
            r = 1;
        } else if (op == SPIRV_OP_ENTRY_POINT) {
            /* OpEntryPoint: execution model, function id, then the name, a nul-terminated
             * string packed into words, then the interface ids. */
            const char *name = (const char *)(bytes + 4 * (i + 3));
            size_t room = count > 3 ? 4 * (size_t)(count - 3) : 0;
            const char *nul = room > 0 ? memchr(name, '\0', room) : NULL;
            uint32_t model = word_at(bytes, i + 1, swapped);
            if (nul == NULL) {
                snprintf(why, why_size, "the OpEntryPoint at word %zu has no nul-terminated name",
                         i);
                r = 1;
            } else if (model != SPIRV_EXECUTION_MODEL_KERNEL) {
                snprintf(why, why_size, "entry point %s has execution model %u, not Kernel (6)",
                         name, model);
                r = 1;
            } else if ((r = id_ok(&w, word_at(bytes, i + 2, 0), i, why, why_size)) == 0) {
                r = add_entry(m, name, (size_t)(nul - name), word_at(bytes, i + 2, 0));
            }
        } else if (!swapped) {
            r = walk_one(m, &w, bytes, i, op, count, why, why_size);
        }
        i += count;
    }
    for (size_t e = 0; e < m->n_entries && r == 0; e++) {
        if (!m->entries[e].defined) {
            snprintf(why, why_size, "entry point %s names %%%u, which is no function of the module",
                     m->entries[e].name, m->entries[e].function);
            r = 1;
        }
    }
    free(w.size_of);
    return r;
}

/* ---- build logs ----------------------------------------------------------------------------- */

static void log_free(void *obj) {
    struct fake_log *log = obj;
    fake__obj_remove(&log->obj);
    free(log->text);
    free(log);
}

/* (lock held) A build log holding `text`, or NULL when out of memory. */
static struct fake_log *log_create(const char *text) {
    struct fake_log *log = fake__obj_new(sizeof *log, FAKE_LOG);
    if (log != NULL && (log->text = strdup(text)) == NULL) {
        log_free(log);
        return NULL;
    }
    return log;
}

ze_result_t fake_zeModuleBuildLogDestroy(ze_module_build_log_handle_t hModuleBuildLog) {
    FAKE_ENTER(zeModuleBuildLogDestroy);
    return fake__destroy(FAKE_LOG, hModuleBuildLog, "zeModuleBuildLogDestroy", NULL, log_free);
}

/* pBuildLog NULL: *pSize is the log's size, its nul included. Else up to *pSize bytes of it are
 * written, always nul-terminated. */
ze_result_t fake_zeModuleBuildLogGetString(ze_module_build_log_handle_t hModuleBuildLog,
                                           size_t *pSize, char *pBuildLog) {
    FAKE_ENTER(zeModuleBuildLogGetString);
    struct fake_log *log;
    ze_result_t r = fake__given(
        fake__lock_object(FAKE_LOG, hModuleBuildLog, "zeModuleBuildLogGetString", (void **)&log),
        pSize);
    if (r == ZE_RESULT_SUCCESS) {
        size_t need = strlen(log->text) + 1;
        if (pBuildLog == NULL) {
            *pSize = need;
        } else if (*pSize > 0) {
            size_t n = *pSize < need ? *pSize : need;
            memcpy(pBuildLog, log->text, n - 1);
            pBuildLog[n - 1] = '\0';
        }
    }
    return fake__unlock(r);
}

/* ---- modules -------------------------------------------------------------------------------- */

static void module_free(struct fake_module *m) {
    for (size_t i = 0; i < m->n_entries; i++) {
        free(m->entries[i].name);
    }
    free(m->entries);
    free(m);
}

/* (lock held) The module's build: a log of its failure (or an empty one) when asked for, in
 * *log. */
static ze_result_t module_build(struct fake_module *m, const ze_module_desc_t *desc,
                                struct fake_log **log) {
    char why[256] = "";
    ze_result_t r;
    if (desc->format == ZE_MODULE_FORMAT_NATIVE) {
        snprintf(why, sizeof why, "this driver takes SPIR-V only, no native binaries");
        r = ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    } else {
        int parsed = parse_spirv(desc->pInputModule, desc->inputSize, m, why, sizeof why);
        if (parsed < 0) {
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
        r = parsed == 0 ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
    }
    if (log != NULL) {
        char text[320] = "";
        if (r != ZE_RESULT_SUCCESS) {
            snprintf(text, sizeof text, "acg Level Zero test driver: %s", why);
        }
        if ((*log = log_create(text)) == NULL) {
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
    }
    return r;
}

ze_result_t fake_zeModuleCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                const ze_module_desc_t *desc, ze_module_handle_t *phModule,
                                ze_module_build_log_handle_t *phBuildLog) {
    static const char fn[] = "zeModuleCreate";
    FAKE_ENTER(zeModuleCreate);
    struct fake_context *ctx;
    struct fake_device *dev;
    struct fake_module *m = NULL;
    struct fake_log *log = NULL;
    ze_result_t r;
    FAKE_CHECK(fake__lock_context_device(hContext, hDevice, fn, &ctx, &dev), out);
    FAKE_FAIL_IF(desc == NULL || phModule == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_MODULE_DESC, fn, "desc"), out);
    FAKE_FAIL_IF(desc->format > ZE_MODULE_FORMAT_NATIVE, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    FAKE_FAIL_IF(desc->pInputModule == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_FAIL_IF(desc->inputSize == 0, ZE_RESULT_ERROR_INVALID_SIZE, out);
    FAKE_FAIL_IF((m = calloc(1, sizeof *m)) == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    r = module_build(m, desc, phBuildLog != NULL ? &log : NULL);
    if (log != NULL) {
        *phBuildLog = (ze_module_build_log_handle_t)(void *)log;
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out_free;
    }
    m->ctx = ctx;
    m->dev = dev;
    if (fake__obj_add(&m->obj, FAKE_MODULE) != 0) {
        if (log != NULL) {
            log_free(log);
        }
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out_free;
    }
    *phModule = (ze_module_handle_t)(void *)m;
    goto out;
out_free:
    module_free(m);
out:
    return fake__unlock(r);
}

static void module_destroy(void *obj) {
    struct fake_module *m = obj;
    fake__obj_remove(&m->obj);
    module_free(m);
}

/* (lock held) Why a module may not be destroyed yet (fake__destroy). */
static int module_busy(void *obj, const char *fn) {
    const struct fake_module *m = obj;
    if (m->kernels > 0 || m->obj.pending > 0) {
        fake__violation("%s: the module still has %ld kernels and %ld pending launches", fn,
                        m->kernels, m->obj.pending);
        return 1;
    }
    return 0;
}

ze_result_t fake_zeModuleDestroy(ze_module_handle_t hModule) {
    FAKE_ENTER(zeModuleDestroy);
    return fake__destroy(FAKE_MODULE, hModule, "zeModuleDestroy", module_busy, module_destroy);
}

/* ---- kernels -------------------------------------------------------------------------------- */

static const struct fake_entry *module_entry(const struct fake_module *m, const char *name) {
    for (size_t i = 0; i < m->n_entries; i++) {
        if (strcmp(m->entries[i].name, name) == 0) {
            return &m->entries[i];
        }
    }
    return NULL;
}

/* The parameters acg's OpenCL C convention gives cpu code of these argument types, into size
 * (FAKE_MAX_PARAMS room): their count, or -1 for an unknown type. */
static int cpu_params(const acg_arg_type *types, uint32_t n_args, unsigned char *size) {
    int p = 0;
    for (uint32_t i = 0; i < n_args; i++) {
        if (types[i] == ACG_ARG_BUFFER) {
            size[p++] = 8; /* global pointer */
            size[p++] = 8; /* ulong byte offset */
        } else if ((size[p++] = (unsigned char)fake__scalar_bytes(types[i])) == 0) {
            return -1;
        }
    }
    return p;
}

static void kernel_free(void *obj) {
    struct fake_kernel *k = obj;
    k->module->kernels--;
    fake__obj_remove(&k->obj);
    free(k->name);
    free(k);
}

/* (lock held) A live kernel `name` of module m running the cpu code kd gives, with the
 * parameters of its SPIR-V entry point: NULL when out of memory. */
static struct fake_kernel *kernel_new(struct fake_module *m, const char *name,
                                      const acg_kernel_desc *kd, const struct fake_entry *entry) {
    struct fake_kernel *k = fake__obj_new(sizeof *k, FAKE_KERNEL);
    if (k == NULL) {
        return NULL;
    }
    k->module = m;
    m->kernels++;
    if ((k->name = strdup(name)) == NULL) {
        kernel_free(k);
        return NULL;
    }
    struct fake_launch *a = &k->launch;
    a->fn = kd->cpu.fn;
    a->n_args = kd->n_args;
    memcpy(a->types, kd->types, sizeof a->types);
    a->n_params = entry->n_params;
    memcpy(a->param_size, entry->param_size, sizeof a->param_size);
    a->group[0] = a->group[1] = a->group[2] = 1;
    return k;
}

ze_result_t fake_zeKernelCreate(ze_module_handle_t hModule, const ze_kernel_desc_t *desc,
                                ze_kernel_handle_t *phKernel) {
    static const char fn[] = "zeKernelCreate";
    FAKE_ENTER(zeKernelCreate);
    struct fake_module *m;
    ze_result_t r;
    FAKE_CHECK(fake__lock_creation(FAKE_MODULE, hModule, desc, ZE_STRUCTURE_TYPE_KERNEL_DESC,
                                   phKernel, fn, (void **)&m),
               out);
    FAKE_FAIL_IF(desc->pKernelName == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_FAIL_IF(desc->flags > 0x3, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    FAKE_FAIL_IF(module_entry(m, desc->pKernelName) == NULL, ZE_RESULT_ERROR_INVALID_KERNEL_NAME,
                 out);
    /* The lookup enters acg's registry, which has its own lock: call it without ours. */
    const acg_kernel_desc *(*lookup)(const char *) = fake__g.lookup;
    pthread_mutex_unlock(&fake__g.lock);
    const acg_kernel_desc *kd = lookup != NULL ? lookup(desc->pKernelName) : NULL;
    pthread_mutex_lock(&fake__g.lock);
    if (kd == NULL || kd->cpu.fn == NULL || kd->n_args > ACG_MAX_KERNEL_ARGS) {
        fprintf(stderr,
                "acg Level Zero test driver: %s: no cpu implementation of kernel %s is bound "
                "(acgtest_ze_bind_kernels)\n",
                fn, desc->pKernelName);
        r = ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
        goto out;
    }
    /* Destroyed meanwhile? The kernel's parameters are its SPIR-V's, looked up again: another
     * module may have been made at the address meanwhile. */
    FAKE_CHECK(fake__lookup(FAKE_MODULE, hModule, fn, (void **)&m), out);
    const struct fake_entry *entry = module_entry(m, desc->pKernelName);
    unsigned char cpu_size[FAKE_MAX_PARAMS];
    int n_cpu = cpu_params(kd->types, kd->n_args, cpu_size);
    /* Gone meanwhile, or a desc acg refuses. */
    FAKE_FAIL_IF(entry == NULL || n_cpu < 0, ZE_RESULT_ERROR_INVALID_KERNEL_NAME, out);
    if ((uint32_t)n_cpu != entry->n_params ||
        memcmp(cpu_size, entry->param_size, entry->n_params) != 0) {
        /* Not a failure: a driver knows nothing of acg's definitions. */
        fprintf(stderr,
                "acg Level Zero test driver: %s: the SPIR-V of kernel %s takes %u parameters and "
                "the cpu code run in its place %d (or of other sizes): a launch would pass that "
                "code the wrong arguments\n",
                fn, desc->pKernelName, entry->n_params, n_cpu);
    }
    struct fake_kernel *k = kernel_new(m, desc->pKernelName, kd, entry);
    FAKE_FAIL_IF(k == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    *phKernel = (ze_kernel_handle_t)(void *)k;
out:
    return fake__unlock(r);
}

/* (lock held) Why a kernel may not be destroyed yet (fake__destroy). */
static int kernel_busy(void *obj, const char *fn) {
    const struct fake_kernel *k = obj;
    if (k->obj.pending > 0) {
        fake__violation("%s: %ld pending launches still use kernel %s", fn, k->obj.pending,
                        k->name);
    }
    return k->obj.pending > 0;
}

ze_result_t fake_zeKernelDestroy(ze_kernel_handle_t hKernel) {
    FAKE_ENTER(zeKernelDestroy);
    return fake__destroy(FAKE_KERNEL, hKernel, "zeKernelDestroy", kernel_busy, kernel_free);
}

/* Parameter `index` is a pointer when it is the first of a buffer argument's pair. */
static int param_is_pointer(const struct fake_launch *a, uint32_t index) {
    uint32_t p = 0;
    for (uint32_t i = 0; i < a->n_args && p <= index; i++) {
        if (p == index) {
            return a->types[i] == ACG_ARG_BUFFER;
        }
        p += a->types[i] == ACG_ARG_BUFFER ? 2 : 1;
    }
    return 0;
}

/* A NULL value sets a pointer parameter to the null pointer (what the specification means by
 * "considered null"); for a scalar it is INVALID_ARGUMENT (not verified against Intel's). */
ze_result_t fake__launch_param(struct fake_launch *a, uint32_t index, size_t size,
                               const void *value) {
    if (index >= a->n_params) {
        return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    }
    if (size != a->param_size[index]) {
        return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
    }
    if (value == NULL && !param_is_pointer(a, index)) {
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    memset(a->params[index], 0, sizeof a->params[index]);
    if (value != NULL) {
        memcpy(a->params[index], value, size);
    }
    a->set |= 1u << index;
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake_zeKernelSetArgumentValue(ze_kernel_handle_t hKernel, uint32_t argIndex,
                                          size_t argSize, const void *pArgValue) {
    FAKE_ENTER(zeKernelSetArgumentValue);
    struct fake_kernel *k;
    ze_result_t r =
        fake__lock_object(FAKE_KERNEL, hKernel, "zeKernelSetArgumentValue", (void **)&k);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__launch_param(&k->launch, argIndex, argSize, pArgValue);
    }
    return fake__unlock(r);
}

/* Within 1024 along each dimension, the product within 1024 too. Each dimension is checked
 * first: the product of three 32-bit sizes can pass 64 bits (2^22 * 2^21 * 2^21 wraps to 0). */
ze_result_t fake__launch_group(struct fake_launch *a, uint32_t x, uint32_t y, uint32_t z) {
    if (x == 0 || y == 0 || z == 0 || x > 1024 || y > 1024 || z > 1024 ||
        (uint64_t)x * y * z > 1024) {
        return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
    }
    a->group[0] = x;
    a->group[1] = y;
    a->group[2] = z;
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake_zeKernelSetGroupSize(ze_kernel_handle_t hKernel, uint32_t groupSizeX,
                                      uint32_t groupSizeY, uint32_t groupSizeZ) {
    FAKE_ENTER(zeKernelSetGroupSize);
    struct fake_kernel *k;
    ze_result_t r = fake__lock_object(FAKE_KERNEL, hKernel, "zeKernelSetGroupSize", (void **)&k);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__launch_group(&k->launch, groupSizeX, groupSizeY, groupSizeZ);
    }
    return fake__unlock(r);
}

/* What the module says of the kernel: its parameter count, from its SPIR-V function. The
 * rest is a host's: no required group size or subgroups, no local, private or spill memory;
 * the pNext chain is ignored. */
ze_result_t fake_zeKernelGetProperties(ze_kernel_handle_t hKernel,
                                       ze_kernel_properties_t *pKernelProperties) {
    static const char fn[] = "zeKernelGetProperties";
    FAKE_ENTER(zeKernelGetProperties);
    struct fake_kernel *k;
    ze_result_t r = fake__lock_object(FAKE_KERNEL, hKernel, fn, (void **)&k);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(pKernelProperties, ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES, fn,
                        "pKernelProperties");
    }
    if (r == ZE_RESULT_SUCCESS) {
        ze_kernel_properties_t props = {.stype = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES,
                                        .pNext = pKernelProperties->pNext,
                                        .numKernelArgs = k->launch.n_params,
                                        .maxSubgroupSize = 1,
                                        .maxNumSubgroups = 1024};
        memcpy(props.uuid.kid, &k->obj.serial, sizeof k->obj.serial);
        *pKernelProperties = props;
    }
    return fake__unlock(r);
}

/* The size of parameter argIndex as its SPIR-V type gives it (struct fake_entry). */
ze_result_t fake_zexKernelGetArgumentSize(ze_kernel_handle_t hKernel, uint32_t argIndex,
                                          uint32_t *pArgSize) {
    FAKE_ENTER(zexKernelGetArgumentSize);
    struct fake_kernel *k;
    ze_result_t r = fake__given(
        fake__lock_object(FAKE_KERNEL, hKernel, "zexKernelGetArgumentSize", (void **)&k), pArgSize);
    if (r == ZE_RESULT_SUCCESS && argIndex >= k->launch.n_params) {
        r = ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    }
    if (r == ZE_RESULT_SUCCESS) {
        *pArgSize = k->launch.param_size[argIndex];
    }
    return fake__unlock(r);
}

/* ---- launches ------------------------------------------------------------------------------- */

static uint64_t param_u64(const struct fake_launch *a, uint32_t p) {
    uint64_t v;
    memcpy(&v, a->params[p], sizeof v);
    return v;
}

int fake__kernel_args_set(const struct fake_cmd *cmd) {
    uint32_t n = cmd->u.kernel.launch.n_params;
    uint32_t all = n == 32 ? 0xffffffffu : (1u << n) - 1;
    return (cmd->u.kernel.launch.set & all) == all;
}

ze_result_t fake__kernel_build(struct fake_cmd *cmd, const char *name, const char *fn) {
    const struct fake_launch *a = &cmd->u.kernel.launch;
    if (!fake__kernel_args_set(cmd)) {
        uint32_t p = 0;
        while (a->set & (1u << p)) {
            p++;
        }
        fprintf(stderr, "acg Level Zero test driver: %s: parameter %u of kernel %s is not set\n",
                fn, p, name);
        return ZE_RESULT_ERROR_INVALID_ARGUMENT; /* Intel's code here was not verified */
    }
    for (int d = 0; d < 3; d++) {
        uint64_t global = (uint64_t)cmd->u.kernel.count[d] * a->group[d];
        if (global > UINT32_MAX) {
            /* Simplified: acg's cpu code takes 32-bit global sizes. */
            fprintf(stderr,
                    "acg Level Zero test driver: %s: kernel %s: a grid of %llu along dimension "
                    "%d is more than this driver runs\n",
                    fn, name, (unsigned long long)global, d);
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        }
        cmd->u.kernel.global[d] = (uint32_t)global;
    }
    uint32_t p = 0;
    for (uint32_t i = 0; i < a->n_args; i++) {
        acg_cpu_arg *arg = &cmd->u.kernel.args[i];
        if (a->types[i] == ACG_ARG_BUFFER) {
            arg->p = (void *)(uintptr_t)(param_u64(a, p) + param_u64(a, p + 1));
            p += 2;
        } else if (fake__scalar_arg(a->types[i], a->params[p++], arg) != 0) {
            return ZE_RESULT_ERROR_INVALID_ARGUMENT;
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* (lock held) Makes cmd launch kernel k as it is set now, or switches its kernel (the group
 * count stays; the parameters are k's current ones, which a switch asks to set again). */
void fake__kernel_take(struct fake_cmd *cmd, const struct fake_kernel *k) {
    cmd->kind = FAKE_CMD_KERNEL;
    cmd->u.kernel.kernel = fake__ref((struct fake_obj *)&k->obj);
    cmd->u.kernel.module = fake__ref((struct fake_obj *)&k->module->obj);
    cmd->u.kernel.launch = k->launch;
}

void fake__kernel_count(struct fake_cmd *cmd, const ze_group_count_t *groups) {
    cmd->u.kernel.count[0] = groups->groupCountX;
    cmd->u.kernel.count[1] = groups->groupCountY;
    cmd->u.kernel.count[2] = groups->groupCountZ;
}

ze_result_t fake__kernel_cmd(struct fake_kernel *k, const ze_group_count_t *groups, const char *fn,
                             struct fake_cmd *cmd) {
    fake__kernel_take(cmd, k);
    fake__kernel_count(cmd, groups);
    return fake__kernel_build(cmd, k->name, fn);
}

/* ---- unload --------------------------------------------------------------------------------- */

void fake__modules_unload(void) {
    fake__free_all(FAKE_KERNEL, kernel_free);
    fake__free_all(FAKE_MODULE, module_destroy);
    fake__free_all(FAKE_LOG, log_free);
}
