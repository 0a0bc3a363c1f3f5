/* kernel.c — the built-in kernel catalogue and kernel launches.
 *
 * The catalogue says, once for every backend, each kernel's name and argument types and how far
 * each buffer argument reaches, so the core can check a launch before any backend sees it.
 * Each backend implements the kernels under the same names. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

/* ---- shape rules of the model kernels ----------------------------------------------------
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
static const char *embed_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(3), 1);
    x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(5), 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(5) ? "the grid must cover (dim, n)" : NULL;
}

/* (out, x, w; dim, n, eps), grid (n) */
static const char *rmsnorm_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
    x[0] = x[1] = prod(4, U(4), U(3), 1);
    x[2] = prod(4, U(3), 1, 1);
    return d->global[0] < U(4) ? "the grid must cover n" : NULL;
}

/* (out, x, w; n_in, n_out, n), grid (n_out, n) */
static const char *matmul_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(5), U(4), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4), U(3), 1);
    return d->global[0] < U(4) || d->global[1] < U(5) ? "the grid must cover (n_out, n)" : NULL;
}

/* (x, cos, sin, query_offsets, kv_lens; width, head_size, n, batch, max_pos),
 * grid (width / 2, n) */
static const char *rope_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
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
static const char *kv_store_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
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
static const char *attention_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
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
static const char *gather_last_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(4, U(4), U(3), 1);
    x[1] = prod(4, U(5), U(3), 1);
    x[2] = prod(4, U(4) + 1, 1, 1);
    return d->global[0] < U(3) || d->global[1] < U(4) ? "the grid must cover (dim, batch)" : NULL;
}

/* (result, logits, probs, seats, states; vocab, batch, n_states), grid (batch) */
static const char *sample_shape(const acg__karg *a, const acg_dims *d, uint64_t *x) {
    x[0] = prod(8, U(6), 1, 1);
    x[1] = x[2] = prod(4, U(6), U(5), 1);
    x[3] = prod(4, U(6), 1, 1);
    x[4] = prod(4 * ACG_SAMPLER_STATE_WORDS, U(7), 1, 1);
    return d->global[0] < U(6) ? "the grid must cover batch" : NULL;
}

#undef U

#define B ACG_ARG_BUFFER
#define F ACG_ARG_F32
#define N ACG_ARG_U32

static const acg__kernel_def catalogue[] = {
    {"fill_f32", 2, {B, F}, {4, 0}, 1, NULL, {0, 0}},
    {"add_scalar_f32", 3, {B, B, F}, {4, 4, 0}, 1, NULL, {0, 0}},
    {"axpy_f32", 3, {B, B, F}, {4, 4, 0}, 1, NULL, {0, 0}},
    {"copy_f32", 2, {B, B}, {4, 4}, 1, NULL, {0, 0}},
    {"swiglu_f32", 3, {B, B, B}, {4, 4, 4}, 1, NULL, {0, 0}},
    {"embed_f32", 6, {B, B, B, N, N, N}, {4, 4, 4}, 2, embed_shape, {0, 0}},
    {"rmsnorm_f32", 6, {B, B, B, N, N, F}, {4, 4, 4}, 1, rmsnorm_shape, {0, 1}},
    {"matmul_f32", 6, {B, B, B, N, N, N}, {4, 4, 4}, 2, matmul_shape, {0, 0}},
    {"rope_f32", 10, {B, B, B, B, B, N, N, N, N, N}, {4, 4, 4, 4, 4}, 2, rope_shape, {0, 0}},
    {"kv_store_f32",
     13,
     {B, B, B, B, B, B, B, N, N, N, N, N, N},
     {4, 4, 4, 4, 4, 4, 4},
     2,
     kv_store_shape, {0, 0}},
    {"attention_f32",
     16,
     {B, B, B, B, B, B, B, B, N, N, N, N, N, N, N, N},
     {4, 4, 4, 4, 4, 4, 4, 4},
     2,
     attention_shape, {0, 0}},
    {"gather_last_f32", 6, {B, B, B, N, N, N}, {4, 4, 4}, 2, gather_last_shape, {0, 0}},
    {"sample_f32", 8, {B, B, B, B, B, N, N, N}, {4, 4, 4, 4, 4}, 1, sample_shape, {0, 0}},
};

#undef B
#undef F
#undef N

const acg__kernel_def *acg__kernel_catalogue(size_t *count) {
    *count = sizeof catalogue / sizeof catalogue[0];
    return catalogue;
}

static const char *const type_names[] = {"?", "buffer", "i32", "u32", "i64", "u64", "f32"};

acg_status acg_kernel_get(acg_device *dev, const char *name, acg_kernel **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kernel_get";
    acg_status st = acg__check_device(dev, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (name == NULL || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    }
    size_t n = sizeof catalogue / sizeof catalogue[0], i = 0;
    while (i < n && strcmp(catalogue[i].name, name) != 0) {
        i++;
    }
    if (i == n) {
        return acg__error(ACG_ERR_NOT_FOUND, "%s: no built-in kernel \"%s\"", fn, name);
    }
    pthread_mutex_lock(&dev->lock);
    if (dev->kernels[i] == NULL) {
        acg_kernel *k = acg__calloc(1, sizeof *k);
        if (k == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out_unlock;
        }
        k->dev = dev;
        k->def = &catalogue[i];
        st = dev->vt->kernel_load(dev->impl, k->def, &k->impl);
        if (st != ACG_OK) {
            acg__free(k);
            goto out_unlock;
        }
        if (acg__handle_add(k, ACG__HANDLE_KERNEL, &k->life) != ACG_OK) {
            if (dev->vt->kernel_unload != NULL) {
                dev->vt->kernel_unload(dev->impl, k->impl);
            }
            acg__free(k);
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out_unlock;
        }
        dev->kernels[i] = k;
    }
    *out = dev->kernels[i];
out_unlock:
    pthread_mutex_unlock(&dev->lock);
    return st;
}

const char *acg_kernel_get_name(const acg_kernel *k) {
    ACG__CALL_SCOPE;
    if (!acg__handle_use(k, ACG__HANDLE_KERNEL)) {
        acg__error(ACG_ERR_INVALID_HANDLE, "acg_kernel_get_name: invalid kernel");
        return NULL;
    }
    return k->def->name;
}

/* Checks the launch against the catalogue and resolves buffers into node. */
static acg_status prepare(const acg_stream *s, const acg_kernel *k, const acg_dims *dims,
                          const acg_arg *args, size_t n_args, acg__node *node) {
    static const char fn[] = "acg_kernel_launch";
    const acg__kernel_def *def = k->def;
    if (dims == NULL || (n_args != 0 && args == NULL)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): NULL dims or args", fn, def->name);
    }
    if (n_args != def->n_args) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): %zu arguments, the kernel takes %u",
                          fn, def->name, n_args, def->n_args);
    }
    uint64_t items = 1;
    for (int d = 0; d < 3; d++) {
        if (dims->global[d] == 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): global[%d] is 0", fn, def->name,
                              d);
        }
        items *= dims->global[d];
    }
    if (items > UINT32_MAX) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): %llu work items is too many", fn,
                          def->name, (unsigned long long)items);
    }
    for (uint32_t d = def->dims; d < 3; d++) {
        if (dims->global[d] != 1 || dims->local[d] > 1) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): the kernel is %u-dimensional; global[%u]=%u and "
                              "local[%u]=%u must be 1",
                              fn, def->name, def->dims, d, dims->global[d], d, dims->local[d]);
        }
    }
    bool local_set = dims->local[0] || dims->local[1] || dims->local[2];
    for (uint32_t d = 0; local_set && d < 3; d++) {
        /* A dimension the kernel does not index may leave its local size at 0 (meaning 1). */
        uint32_t local = dims->local[d] == 0 && d >= def->dims ? 1 : dims->local[d];
        if (local == 0 || dims->global[d] % local != 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): local[%d]=%u does not divide global[%d]=%u", fn, def->name,
                              d, dims->local[d], d, dims->global[d]);
        }
    }
    /* Only the fields a kernel node uses are written; the rest stays unread. */
    node->kind = ACG_NODE_KERNEL;
    node->n_buffers = 0;
    node->host = NULL;
    node->size = 0;
    node->def = def;
    node->kernel = k->impl;
    node->dims = *dims;
    node->n_args = def->n_args;
    /* Types first, and scalars into the node, so the shape rule can read them. */
    for (uint32_t i = 0; i < def->n_args; i++) {
        const acg_arg *a = &args[i];
        if (a->type != def->types[i]) {
            unsigned t = (unsigned)a->type < 7 ? (unsigned)a->type : 0;
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %u is a %s, the kernel takes a %s", fn, def->name,
                              i, type_names[t], type_names[def->types[i]]);
        }
        acg__karg *r = &node->args[i];
        r->type = a->type;
        r->value.u64 = 0;
        if (a->type != ACG_ARG_BUFFER) {
            memcpy(&r->value, &a->value, sizeof a->value.u64);
        }
    }
    uint64_t extent[ACG_MAX_KERNEL_ARGS] = {0};
    if (def->shape != NULL) {
        const char *why = def->shape(node->args, dims, extent);
        if (why != NULL) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): %s", fn, def->name, why);
        }
    } else {
        for (uint32_t i = 0; i < def->n_args; i++) {
            extent[i] = (uint64_t)def->bytes_per_item[i] * dims->global[0];
        }
    }
    for (uint32_t i = 0; i < def->n_args; i++) {
        const acg_arg *a = &args[i];
        acg__karg *r = &node->args[i];
        if (a->type != ACG_ARG_BUFFER) {
            continue;
        }
        const acg_buffer *b = a->value.buf.buffer;
        if (!acg__handle_use(b, ACG__HANDLE_BUFFER)) {
            return acg__error(ACG_ERR_INVALID_HANDLE, "%s(%s): argument %u is not a live buffer",
                              fn, def->name, i);
        }
        if (b->dev != s->dev) {
            return acg__error(ACG_ERR_WRONG_DEVICE,
                              "%s(%s): argument %u belongs to %s, the stream to %s", fn, def->name,
                              i, b->dev->name, s->dev->name);
        }
        size_t off = a->value.buf.offset, per = def->bytes_per_item[i];
        /* The device sees the view's offset plus the argument's: align the sum. */
        if (per != 0 && (b->offset + off) % per != 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %u offset %zu is not a multiple of %zu", fn,
                              def->name, i, off, per);
        }
        uint64_t window = extent[i];
        if (off > b->size || window > b->size - off) {
            return acg__error(ACG_ERR_OUT_OF_RANGE,
                              "%s(%s): argument %u reaches [%zu, +%llu), past its %zu-byte buffer",
                              fn, def->name, i, off, (unsigned long long)window, b->size);
        }
        r->value.buf.mem = b->mem;
        r->value.buf.offset = b->offset + off;
        node->buffers[node->n_buffers++] = b;
    }
    /* Work items run in any order on a device: two windows of one allocation must be disjoint,
     * or the same window where the kernel works in place (any pair of an elementwise kernel,
     * the declared pair of a shaped one), or the result would depend on the backend. */
    for (uint32_t i = 0; i < def->n_args; i++) {
        for (uint32_t j = i + 1; j < def->n_args; j++) {
            const acg__karg *x = &node->args[i], *y = &node->args[j];
            if (x->type != ACG_ARG_BUFFER || y->type != ACG_ARG_BUFFER ||
                x->value.buf.mem != y->value.buf.mem) {
                continue;
            }
            /* Windows were checked to lie inside their buffers: the ends cannot wrap. */
            uint64_t xs = x->value.buf.offset, ys = y->value.buf.offset;
            uint64_t xe = xs + extent[i], ye = ys + extent[j];
            bool same = xs == ys && xe == ye;
            bool may_share = def->shape == NULL ||
                             (def->in_place[0] == i && def->in_place[1] == j && i != j);
            if (same && may_share) {
                continue;
            }
            if (xs < ye && ys < xe) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "%s(%s): arguments %u and %u overlap%s", fn, def->name, i, j,
                                  may_share ? " without being the same window"
                                            : " (this kernel does not work in place)");
            }
        }
    }
    return ACG_OK;
}

static acg_status launch_eager(acg_stream *s, const acg__node *n) {
    return s->dev->vt->kernel_launch(s->impl, n->kernel, &n->dims, n->args, n->n_args);
}

acg_status acg_kernel_launch(acg_stream *s, const acg_kernel *k, const acg_dims *dims,
                             const acg_arg *args, size_t n_args) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kernel_launch";
    acg_status st = acg__check_stream(s, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (!acg__handle_use(k, ACG__HANDLE_KERNEL)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: invalid kernel", fn);
    }
    if (k->dev != s->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: kernel %s belongs to %s, the stream to %s", fn,
                          k->def->name, k->dev->name, s->dev->name);
    }
    acg__node node;
    st = prepare(s, k, dims, args, n_args, &node);
    if (st != ACG_OK) {
        return st;
    }
    return acg__submit(s, fn, &node, launch_eager);
}
