/* kernels.c — the reference model's kernels: their definitions (argument types, how far each
 * buffer argument reaches, which backends have code for them) and their registration. The code
 * itself is kernels_cpu.c for the cpu backend, kernels.cl for OpenCL (embedded by the build),
 * where the build has nvcc kernels.cu for CUDA (compiled into a fatbin and embedded), and where
 * it has clang and llvm-spirv kernels.cl again as SPIR-V for level_zero (compiled and
 * embedded); model.h documents each kernel. */
#include <pthread.h>
#include <stdbool.h>

#include "model-impl.h"
#include "model_kernels_cl.h"

/* The fatbin holding every kernel of kernels.cu, under the kernel's own name. */
#ifdef ACG_HAVE_CUDA_KERNELS
#include "model_kernels_cuda.h"
#define CUDA_CODE(name_)                                                                           \
    { acg__model_kernels_fatbin, sizeof acg__model_kernels_fatbin, #name_ }
/* Threads per work item on cuda (acg_kernel_desc.cuda_lanes): kernels.cu says which kernels
 * share a work item between the lanes of a warp or a block. */
#define CUDA_LANES(n_) (n_)
#else
#define CUDA_CODE(name_)                                                                           \
    { NULL, 0, NULL }
#define CUDA_LANES(n_) 0
#endif

/* The SPIR-V module compiled from kernels.cl, under the kernel's own name. */
#ifdef ACG_HAVE_SPIRV_KERNELS
#include "model_kernels_spv.h"
#define SPIRV_CODE(name_)                                                                          \
    { acg__model_kernels_spv, sizeof acg__model_kernels_spv, #name_ }
#else
#define SPIRV_CODE(name_)                                                                          \
    { NULL, 0, NULL }
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
static const char *embed_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(3), 1);
    x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(5), 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(5) ? "the grid must cover (dim, n)" : NULL;
}

/* (out, x, w; dim, n, eps), grid (n) */
static const char *rmsnorm_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(3), 1, 1);
    return d->global[0] < U(4) ? "the grid must cover n" : NULL;
}

/* (out, x, w; n_in, n_out, n), grid (n_out, n) */
static const char *matmul_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(4), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4), U(3), 1);
    return d->global[0] < U(4) || d->global[1] < U(5) ? "the grid must cover (n_out, n)" : NULL;
}

/* (x, cos, sin, query_offsets, kv_lens; width, head_size, n, batch, max_pos),
 * grid (width / 2, n) */
static const char *rope_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
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
static const char *kv_store_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
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
static const char *attention_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
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
static const char *gather_last_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(4), U(3), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4) + 1, 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(4) ? "the grid must cover (dim, batch)" : NULL;
}

/* (result, logits, probs, seats, states; vocab, batch, n_states), grid (batch) */
static const char *sample_shape(const acg_arg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(8, U(6), 1, 1);
    x[1] = x[2] = prod(4, U(6), U(5), 1);
    x[3] = prod(4, U(6), 1, 1);
    x[4] = prod(4 * ACG_SAMPLER_STATE_WORDS, U(7), 1, 1);
    return d->global[0] < U(6) ? "the grid must cover batch" : NULL;
}

#undef U

/* ---- definitions ------------------------------------------------------------------------- */

#define B ACG_ARG_BUFFER
#define F ACG_ARG_F32
#define N ACG_ARG_U32
#define LIST(...) __VA_ARGS__

/* A model kernel with its C code (acg__model_cpu_<name>), the OpenCL C of kernels.cl, the CUDA
 * C of kernels.cu and the SPIR-V of kernels.cl where the build has them, and for the kernels
 * worth splitting over the cpu backend's threads, their parts (acg__model_cpu_<name>_parts and
 * _part). Its buffers come first, 4-byte items each. Every model kernel follows the one
 * arithmetic (docs/arithmetic.md), so every backend computes it bit for bit alike. */
#define MODEL_KERNEL(name_, n_args_, types_, bytes_, dims_, shape_, in_place_, split_, lanes_)     \
    {                                                                                              \
        .size = sizeof(acg_kernel_desc), .name = #name_, .n_args = n_args_, .types = {types_},     \
        .bytes_per_item = {bytes_}, .dims = dims_, shape_, .in_place = {in_place_},                \
        .exactness = ACG_KERNEL_EXACT_EVERY_BACKEND, .cpu = {acg__model_cpu_##name_},              \
        .opencl = {acg__model_kernels_cl, NULL}, .cuda = CUDA_CODE(name_),                         \
        .spirv = SPIRV_CODE(name_), .cpu_parts = split_, .cuda_lanes = CUDA_LANES(lanes_),         \
    }
#define SPLIT(name_)                                                                               \
    { acg__model_cpu_##name_##_parts, acg__model_cpu_##name_##_part }
#define WHOLE                                                                                      \
    { NULL, NULL }

/* How far the buffers reach: a shape rule, or elementwise (each buffer global[0] items). */
#define RULE(fn_) .shape = fn_
#define ELEMENTWISE .flags = ACG_KERNEL_ELEMENTWISE

#define BYTES3 LIST(4, 4, 4)
#define BYTES5 LIST(4, 4, 4, 4, 4)
#define BYTES7 LIST(4, 4, 4, 4, 4, 4, 4)
#define BYTES8 LIST(4, 4, 4, 4, 4, 4, 4, 4)

static const acg_kernel_desc kernels[] = {
    /* elementwise: two of its buffers may be one window (the forward runs it in place) */
    MODEL_KERNEL(swiglu_f32, 3, LIST(B, B, B), BYTES3, 1, ELEMENTWISE, LIST(0, 0),
                 SPLIT(swiglu_f32), 1),
    MODEL_KERNEL(embed_f32, 6, LIST(B, B, B, N, N, N), BYTES3, 2, RULE(embed_shape), LIST(0, 0),
                 WHOLE, 1),
    MODEL_KERNEL(rmsnorm_f32, 6, LIST(B, B, B, N, N, F), BYTES3, 1, RULE(rmsnorm_shape),
                 LIST(0, 1), WHOLE, 32),
    MODEL_KERNEL(matmul_f32, 6, LIST(B, B, B, N, N, N), BYTES3, 2, RULE(matmul_shape), LIST(0, 0),
                 SPLIT(matmul_f32), 32),
    MODEL_KERNEL(rope_f32, 10, LIST(B, B, B, B, B, N, N, N, N, N), BYTES5, 2, RULE(rope_shape),
                 LIST(0, 0), WHOLE, 1),
    MODEL_KERNEL(kv_store_f32, 13, LIST(B, B, B, B, B, B, B, N, N, N, N, N, N), BYTES7, 2,
                 RULE(kv_store_shape), LIST(0, 0), WHOLE, 1),
    MODEL_KERNEL(attention_f32, 16, LIST(B, B, B, B, B, B, B, B, N, N, N, N, N, N, N, N), BYTES8, 2,
                 RULE(attention_shape), LIST(0, 0), SPLIT(attention_f32), 32),
    MODEL_KERNEL(gather_last_f32, 6, LIST(B, B, B, N, N, N), BYTES3, 2, RULE(gather_last_shape),
                 LIST(0, 0), WHOLE, 1),
    MODEL_KERNEL(sample_f32, 8, LIST(B, B, B, B, B, N, N, N), BYTES5, 1, RULE(sample_shape),
                 LIST(0, 0), SPLIT(sample_f32), 1024),
};

#undef RULE
#undef ELEMENTWISE
#undef BYTES3
#undef BYTES5
#undef BYTES7
#undef BYTES8
#undef MODEL_KERNEL
#undef CUDA_CODE
#undef CUDA_LANES
#undef SPIRV_CODE
#undef SPLIT
#undef WHOLE
#undef LIST
#undef B
#undef F
#undef N

#define N_KERNELS (sizeof kernels / sizeof kernels[0])

/* ---- registration -------------------------------------------------------------------------
 * Which of the kernels this layer has registered, so a call after a failure (out of memory
 * half way) registers only what is missing, and unregistering forgets only what it registered. */

static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static bool registered[N_KERNELS];

acg_status acg_model_register_kernels(void) {
    acg_status st = ACG_OK;
    pthread_mutex_lock(&register_lock);
    for (size_t i = 0; i < N_KERNELS && st == ACG_OK; i++) {
        if (!registered[i]) {
            st = acg_kernel_register(&kernels[i]);
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
    for (size_t i = 0; i < N_KERNELS; i++) {
        if (!registered[i]) {
            continue;
        }
        acg_status st = acg_kernel_unregister(kernels[i].name);
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
