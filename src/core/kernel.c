/* kernel.c — the built-in kernel catalogue and kernel launches.
 *
 * The catalogue says, once for every backend, each kernel's name and argument types and how far
 * each buffer argument reaches, so the core can check a launch before any backend sees it.
 * Each backend implements the kernels under the same names. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

#define B ACG_ARG_BUFFER
#define F ACG_ARG_F32

static const acg__kernel_def catalogue[] = {
    {"fill_f32", 2, {B, F}, {4, 0}, 1},
    {"add_scalar_f32", 3, {B, B, F}, {4, 4, 0}, 1},
    {"axpy_f32", 3, {B, B, F}, {4, 4, 0}, 1},
    {"copy_f32", 2, {B, B}, {4, 4}, 1},
};

#undef B
#undef F

const acg__kernel_def *acg__kernel_catalogue(size_t *count) {
    *count = sizeof catalogue / sizeof catalogue[0];
    return catalogue;
}

static const char *const type_names[] = {"?", "buffer", "i32", "u32", "i64", "u64", "f32"};

acg_status acg_kernel_get(acg_device *dev, const char *name, acg_kernel **out) {
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
        if (acg__handle_add(k, ACG__HANDLE_KERNEL) != ACG_OK) {
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
    if (!acg__handle_valid(k, ACG__HANDLE_KERNEL)) {
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
        if (a->type != ACG_ARG_BUFFER) {
            r->value.u64 = 0;
            memcpy(&r->value, &a->value, sizeof a->value.u64);
            continue;
        }
        const acg_buffer *b = a->value.buf.buffer;
        if (!acg__handle_valid(b, ACG__HANDLE_BUFFER)) {
            return acg__error(ACG_ERR_INVALID_HANDLE, "%s(%s): argument %u is not a live buffer",
                              fn, def->name, i);
        }
        if (b->dev != s->dev) {
            return acg__error(ACG_ERR_WRONG_DEVICE,
                              "%s(%s): argument %u belongs to %s, the stream to %s", fn, def->name,
                              i, b->dev->spec, s->dev->spec);
        }
        size_t off = a->value.buf.offset, per = def->bytes_per_item[i];
        /* The device sees the view's offset plus the argument's: align the sum. */
        if (per != 0 && (b->offset + off) % per != 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %u offset %zu is not a multiple of %zu", fn,
                              def->name, i, off, per);
        }
        size_t window = per * dims->global[0];
        if (off > b->size || window > b->size - off) {
            return acg__error(ACG_ERR_OUT_OF_RANGE,
                              "%s(%s): argument %u reaches [%zu, +%zu), past its %zu-byte buffer",
                              fn, def->name, i, off, window, b->size);
        }
        r->value.buf.mem = b->mem;
        r->value.buf.offset = b->offset + off;
        node->buffers[node->n_buffers++] = b;
    }
    /* Work items run in any order on a device: two windows of one allocation must be the same
     * window (in place) or disjoint, or the result would depend on the backend. */
    for (uint32_t i = 0; i < def->n_args; i++) {
        for (uint32_t j = i + 1; j < def->n_args; j++) {
            const acg__karg *x = &node->args[i], *y = &node->args[j];
            if (x->type != ACG_ARG_BUFFER || y->type != ACG_ARG_BUFFER ||
                x->value.buf.mem != y->value.buf.mem ||
                x->value.buf.offset == y->value.buf.offset) {
                continue;
            }
            size_t xs = x->value.buf.offset, ys = y->value.buf.offset;
            size_t xe = xs + (size_t)def->bytes_per_item[i] * dims->global[0];
            size_t ye = ys + (size_t)def->bytes_per_item[j] * dims->global[0];
            if (xs < ye && ys < xe) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "%s(%s): arguments %u and %u overlap without being the same "
                                  "window",
                                  fn, def->name, i, j);
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
    static const char fn[] = "acg_kernel_launch";
    acg_status st = acg__check_stream(s, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (!acg__handle_valid(k, ACG__HANDLE_KERNEL)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: invalid kernel", fn);
    }
    if (k->dev != s->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: kernel %s belongs to %s, the stream to %s", fn,
                          k->def->name, k->dev->spec, s->dev->spec);
    }
    acg__node node;
    st = prepare(s, k, dims, args, n_args, &node);
    if (st != ACG_OK) {
        return st;
    }
    return acg__submit(s, fn, &node, launch_eager);
}
