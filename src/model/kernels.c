/* kernels.c — the reference model's kernels: their shape rules, what this layer adds to their
 * one source (ops.acg.c, built for every backend by acg_add_kernels) and their registration.
 * The one source gives each kernel its OpenCL C, its SPIR-V for level_zero, its cuda code and a
 * portable C version; where the cpu backend has faster code of its own (kernels_cpu.c), or cuda
 * a kernel that shares a work item between lanes (kernels.cu, compiled into a fatbin and
 * embedded where the build has nvcc), that code is registered in its place. model.h documents
 * each kernel. */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "acg__model_kernels.h" /* generated: the one source's definitions */
#include "model-impl.h"

/* The fatbin holding the kernels of kernels.cu, under the kernel's own name. */
#ifdef ACG_HAVE_CUDA_KERNELS
#include "model_kernels_cuda.h"
#endif

/* ---- shape rules ----------------------------------------------------------------------------
 * Each gives every buffer argument's reach in bytes from its scalar arguments, and checks that
 * the grid covers the work (a kernel skips work items past its counts, so a grid may be rounded
 * up to a work-group multiple). */

/* a * b * c * d, saturating at UINT64_MAX so that an absurd launch is refused, never wrapped. */
static uint64_t prod(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    uint64_t r = a;
    if (__builtin_mul_overflow(r, b, &r) || __builtin_mul_overflow(r, c, &r) ||
        __builtin_mul_overflow(r, d, &r)) {
        return UINT64_MAX;
    }
    return r;
}

#define U(i) ((uint64_t)a[i].value.u32)

/* (out, table, tokens; dim, vocab, n), grid (dim, n) */
const char *acg__model_embed_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(3), 1);
    x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(5), 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(5) ? "the grid must cover (dim, n)" : NULL;
}

/* (out, x, w; dim, n, eps), grid (n) */
const char *acg__model_rmsnorm_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(3), 1, 1);
    return d->global[0] < U(4) ? "the grid must cover n" : NULL;
}

/* (out, x, w; n_in, n_out, n), grid (n_out, n) */
const char *acg__model_matmul_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(4), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4), U(3), 1);
    return d->global[0] < U(4) || d->global[1] < U(5) ? "the grid must cover (n_out, n)" : NULL;
}

/* (x, cos, sin, query_offsets, kv_lens; width, head_size, n, batch, max_pos),
 * grid (width / 2, n) */
const char *acg__model_rope_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(7), U(5), 1);
    x[1] = x[2] = prod(2, U(9), U(6), 1);
    x[3] = prod(4, U(8) + 1, 1, 1);
    x[4] = prod(4, U(8), 1, 1);
    if (U(6) == 0 || U(6) % 2 != 0 || U(5) % U(6) != 0) {
        return "head_size must be even and divide width";
    }
    return d->global[0] < U(5) / 2 || d->global[1] < U(7) ? "the grid must cover (width / 2, n)"
                                                          : NULL;
}

/* (k_cache, v_cache, k, v, block_table, query_offsets, kv_lens;
 *  kv_dim, n, batch, table_width, page_size, n_pages), grid (kv_dim, n) */
const char *acg__model_kv_store_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[1] = prod(4, U(12), U(11), U(7));
    x[2] = x[3] = prod(4, U(8), U(7), 1);
    x[4] = prod(4, U(9), U(10), 1);
    x[5] = prod(4, U(9) + 1, 1, 1);
    x[6] = prod(4, U(9), 1, 1);
    return d->global[0] < U(7) || d->global[1] < U(8) ? "the grid must cover (kv_dim, n)" : NULL;
}

/* (out, att, q, k_cache, v_cache, block_table, query_offsets, kv_lens;
 *  n_heads, n_kv_heads, head_size, n, batch, table_width, page_size, n_pages),
 * grid (n_heads, n) */
const char *acg__model_attention_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[2] = prod(4, U(11), U(8), U(10));
    x[1] = prod(prod(4, U(11), U(8), 1), U(13), U(14), 1);
    x[3] = x[4] = prod(prod(4, U(15), U(14), 1), U(9), U(10), 1);
    x[5] = prod(4, U(12), U(13), 1);
    x[6] = prod(4, U(12) + 1, 1, 1);
    x[7] = prod(4, U(12), 1, 1);
    if (U(9) == 0 || U(8) % U(9) != 0) {
        return "n_kv_heads must divide n_heads";
    }
    if (U(15) == 0) {
        return "n_pages must be at least 1: a bad page id reads the sink page 0";
    }
    return d->global[0] < U(8) || d->global[1] < U(11) ? "the grid must cover (n_heads, n)" : NULL;
}

/* (out, x, query_offsets; dim, batch, n), grid (dim, batch) */
const char *acg__model_gather_last_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(4), U(3), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4) + 1, 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(4) ? "the grid must cover (dim, batch)" : NULL;
}

/* (result, logits, probs, seats, states; vocab, batch, n_states), grid (batch) */
const char *acg__model_sample_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(8, U(6), 1, 1);
    x[1] = x[2] = prod(4, U(6), U(5), 1);
    x[3] = prod(4, U(6), 1, 1);
    x[4] = prod(4 * ACG_SAMPLER_STATE_WORDS, U(7), 1, 1);
    return d->global[0] < U(6) ? "the grid must cover batch" : NULL;
}

/* (result, tokens, seats, kv_lens, ctl, ring, loop; batch, steps, vocab, eos), grid (1) */
const char *acg__model_decode_advance_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[4] = prod(8, U(7), 1, 1);
    x[1] = x[2] = x[3] = prod(4, U(7), 1, 1);
    x[5] = prod(8, U(7), U(8), 1);
    x[6] = 8;
    (void)d; /* work item 0 does it all; the core refuses an empty grid */
    return NULL;
}

#undef U

/* ---- what runs in place of the one source --------------------------------------------------
 * The cpu backend's own function (with its split over the pool's threads where it has one),
 * and for a kernel with lanes (cuda_lanes) its kernel of kernels.cu, which the cuda backend
 * takes before the one source's. in_place is the definition's pair (acg_kernel_desc). */

typedef struct own_code {
    const char *name;
    acg_kernel_cpu_fn cpu;
    acg_kernel_cpu_parts_fn parts;
    acg_kernel_cpu_part_fn part;
    uint32_t lanes;
    uint32_t in_place[2];
} own_code;

#define SPLIT(name_) acg__model_cpu_##name_##_parts, acg__model_cpu_##name_##_part
#define WHOLE NULL, NULL

static const own_code own[] = {
    {"swiglu_f32", acg__model_cpu_swiglu_f32, SPLIT(swiglu_f32), 0, {0, 0}},
    {"rmsnorm_f32", acg__model_cpu_rmsnorm_f32, WHOLE, 32, {0, 1}},
    {"matmul_f32", acg__model_cpu_matmul_f32, SPLIT(matmul_f32), 32, {0, 0}},
    {"rope_f32", acg__model_cpu_rope_f32, WHOLE, 0, {0, 0}},
    {"kv_store_f32", acg__model_cpu_kv_store_f32, WHOLE, 0, {0, 0}},
    {"attention_f32", acg__model_cpu_attention_f32, SPLIT(attention_f32), 32, {0, 0}},
    {"sample_f32", acg__model_cpu_sample_f32, SPLIT(sample_f32), 1024, {0, 0}},
};

#undef SPLIT
#undef WHOLE

/* At most the one source's implementations and the lanes kernel. */
#define MAX_IMPLS 8

/* Definition i: the one source's, with this layer's own code in place (impls: room for the
 * list it points to). */
static acg_kernel_desc definition(size_t i, acg_kernel_impl impls[MAX_IMPLS]) {
    acg_kernel_desc d = *acg__model_kernel_desc(i);
    const own_code *o = NULL;
    for (size_t j = 0; j < sizeof own / sizeof own[0] && o == NULL; j++) {
        o = strcmp(own[j].name, d.name) == 0 ? &own[j] : NULL;
    }
    if (o == NULL) {
        return d; /* the one source's C runs on the cpu backend */
    }
    d.cpu.fn = o->cpu;
    d.cpu_parts.parts = o->parts;
    d.cpu_parts.fn = o->part;
    d.in_place[0] = o->in_place[0];
    d.in_place[1] = o->in_place[1];
    uint32_t n = 0;
#ifdef ACG_HAVE_CUDA_KERNELS
    if (o->lanes > 1) {
        impls[n++] =
            (acg_kernel_impl){"cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, acg__model_kernels_fatbin,
                              acg__model_kernels_fatbin_size, d.name};
        d.cuda_lanes = o->lanes;
    }
#endif
    for (uint32_t k = 0; k < d.n_impls && n < MAX_IMPLS; k++) {
        impls[n++] = d.impls[k];
    }
    d.impls = impls;
    d.n_impls = n;
    return d;
}

/* Room for ops.acg.c's kernels (it has 10; test_model_kernels registers and runs each). */
#define MAX_KERNELS 16

static size_t n_kernels(void) {
    const size_t n = acg__model_kernel_count();
    return n < MAX_KERNELS ? n : MAX_KERNELS;
}

/* ---- registration -------------------------------------------------------------------------
 * Which of the kernels this layer has registered, so a call after a failure (out of memory
 * half way) registers only what is missing, and unregistering forgets only what it registered. */

static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static bool registered[MAX_KERNELS];

acg_status acg_model_register_kernels(void) {
    acg_status st = ACG_OK;
    pthread_mutex_lock(&register_lock);
    for (size_t i = 0; i < n_kernels() && st == ACG_OK; i++) {
        if (!registered[i]) {
            acg_kernel_impl impls[MAX_IMPLS];
            const acg_kernel_desc d = definition(i, impls);
            st = acg_kernel_register(&d);
            registered[i] = st == ACG_OK;
        }
    }
    pthread_mutex_unlock(&register_lock);
    return st;
}

acg_status acg_model_unregister_kernels(void) {
    acg_status first = ACG_OK;
    char why[256] = "";
    pthread_mutex_lock(&register_lock);
    for (size_t i = 0; i < n_kernels(); i++) {
        if (!registered[i]) {
            continue;
        }
        acg_status st = acg_kernel_unregister(acg__model_kernel_desc(i)->name);
        /* NOT_FOUND: someone else unregistered it; either way it is not ours any more. */
        registered[i] = st != ACG_OK && st != ACG_ERR_NOT_FOUND;
        if (registered[i] && first == ACG_OK) {
            first = st;
            acg__error_copy(why, sizeof why);
        }
    }
    pthread_mutex_unlock(&register_lock);
    return first == ACG_OK ? ACG_OK : acg__error(first, "acg_model_unregister_kernels: %s", why);
}
