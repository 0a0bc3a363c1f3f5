/* launch.c — kernel launches: each checked against its kernel's definition (argument types,
 * grid, how far each buffer reaches by the definition's shape, alignment, windows and overlaps)
 * before anything is queued or recorded. The same check serves acg_graph_update_kernel_node
 * (acg__kernel_prepare). */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

static const char *const type_names[] = {"?", "buffer", "i32", "u32", "i64", "u64", "f32"};

const char *acg__arg_type_name(acg_arg_type t) {
    return type_names[(unsigned)t < sizeof type_names / sizeof type_names[0] ? (unsigned)t : 0];
}

const char *acg__arg_cl_type(acg_arg_type t) {
    static const char *const cl[] = {"?", "?", "int", "uint", "long", "ulong", "float"};
    return cl[(unsigned)t < sizeof cl / sizeof cl[0] ? (unsigned)t : 0];
}

size_t acg__arg_scalar_bytes(acg_arg_type t) {
    static const unsigned char bytes[] = {[ACG_ARG_I32] = 4,
                                          [ACG_ARG_U32] = 4,
                                          [ACG_ARG_I64] = 8,
                                          [ACG_ARG_U64] = 8,
                                          [ACG_ARG_F32] = 4};
    return bytes[(unsigned)t < sizeof bytes ? (unsigned)t : 0];
}

/* The value of integer scalar argument j (types checked), into *v; false when negative. */
static bool scalar_value(const acg_arg *a, uint64_t *v) {
    switch (a->type) {
    case ACG_ARG_I32:
        *v = (uint64_t)(int64_t)a->value.i32;
        return a->value.i32 >= 0;
    case ACG_ARG_U32:
        *v = a->value.u32;
        return true;
    case ACG_ARG_I64:
        *v = (uint64_t)a->value.i64;
        return a->value.i64 >= 0;
    default:
        *v = a->value.u64;
        return true;
    }
}

static uint64_t mul_sat(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* A data rule's factor for this launch; NULL, or why the launch is refused. */
static const char *factor_value(uint8_t by, const acg_arg *args, const acg_dims *dims, uint64_t *v,
                                char *why, size_t why_size) {
    if (by == ACG_BY_ONE) {
        *v = 1;
    } else if (by >= ACG_BY_GLOBAL(0)) {
        *v = dims->global[by - ACG_BY_GLOBAL(0)];
    } else if (!scalar_value(&args[by - 1], v)) {
        snprintf(why, why_size, "argument %u is negative (%lld) and sizes a buffer's window",
                 (unsigned)by - 1,
                 (long long)(args[by - 1].type == ACG_ARG_I32 ? args[by - 1].value.i32
                                                              : args[by - 1].value.i64));
        return why;
    }
    return NULL;
}

/* The grid rules (grid_covers) of any kernel; NULL, or why the launch is refused. */
static const char *grid_rules(const acg_kernel_desc *def, const acg_arg *args, const acg_dims *dims,
                              char *why, size_t why_size) {
    for (uint32_t g = 0; g < 3; g++) {
        uint8_t by = def->grid_covers[g];
        uint64_t need = 0;
        if (by == ACG_BY_ONE) {
            continue;
        }
        if (factor_value(by, args, dims, &need, why, why_size) != NULL) {
            return why;
        }
        if (dims->global[g] < need) {
            snprintf(why, why_size, "the grid must cover argument %u: global[%u] is %u, below %llu",
                     (unsigned)by - 1, g, dims->global[g], (unsigned long long)need);
            return why;
        }
    }
    return NULL;
}

/* The windows of a kernel with data rules (reach), into extent; NULL, or why the launch is
 * refused (written into why). */
static const char *reach_rules(const acg_kernel_desc *def, const acg_arg *args,
                               const acg_dims *dims, uint64_t extent[ACG_MAX_KERNEL_ARGS],
                               char *why, size_t why_size) {
    for (uint32_t i = 0; i < def->n_args; i++) {
        const acg_kernel_reach *r = &def->reach[i];
        if (def->types[i] != ACG_ARG_BUFFER || r->bytes == 0) {
            continue;
        }
        uint64_t x = 0, y = 0;
        if (factor_value(r->by[0], args, dims, &x, why, why_size) != NULL ||
            factor_value(r->by[1], args, dims, &y, why, why_size) != NULL) {
            return why;
        }
        extent[i] = mul_sat(mul_sat(r->bytes, x), y);
    }
    return NULL;
}

acg_status acg__kernel_prepare(const acg_device *dev, const acg__kernel_def *kdef,
                               acg__bk_kernel *impl, const acg_dims *dims, const acg_arg *args,
                               size_t n_args, acg__node *node, const char *fn) {
    const acg_kernel_desc *def = &kdef->d;
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
        /* Checked at each step: a product of three 32-bit sizes can wrap 64 bits (to 0), while
         * two cannot. */
        items *= dims->global[d];
        if (items > UINT32_MAX) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): the grid {%u, %u, %u} has more than %u work items", fn,
                              def->name, dims->global[0], dims->global[1], dims->global[2],
                              UINT32_MAX);
        }
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
    node->reads = node->writes = 0; /* a definition says neither (acg_graph_write_dot: "uses") */
    node->host = NULL;
    node->size = 0;
    node->group_handle = NULL; /* the fields a description's reader looks at, set one by one */
    node->label = NULL;        /* and the one it frees */
    node->def = kdef;
    node->kernel = impl;
    node->dims = *dims;
    node->n_args = def->n_args;
    /* Types first, so the shape rule reads well-typed scalars; scalars go into the node. */
    for (uint32_t i = 0; i < def->n_args; i++) {
        const acg_arg *a = &args[i];
        if (a->type != def->types[i]) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %u is a %s, the kernel takes a %s", fn, def->name,
                              i, acg__arg_type_name(a->type), acg__arg_type_name(def->types[i]));
        }
        acg__karg *r = &node->args[i];
        r->type = a->type;
        r->value.u64 = 0;
        if (a->type != ACG_ARG_BUFFER) {
            memcpy(&r->value, &a->value, sizeof a->value.u64);
        }
    }
    uint64_t extent[ACG_MAX_KERNEL_ARGS] = {0};
    char why_buf[160];
    const char *why = grid_rules(def, args, dims, why_buf, sizeof why_buf);
    if (why != NULL) {
        /* refused by the grid rules */
    } else if (def->shape != NULL) {
        why = def->shape(args, dims, extent); /* types checked above */
    } else if (def->flags & ACG_KERNEL_ELEMENTWISE) {
        for (uint32_t i = 0; i < def->n_args; i++) {
            extent[i] = (uint64_t)def->bytes_per_item[i] * dims->global[0];
        }
    } else {
        why = reach_rules(def, args, dims, extent, why_buf, sizeof why_buf);
    }
    if (why != NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): %s", fn, def->name, why);
    }
    /* Every buffer argument held under one registry lock. */
    const void *bufs[ACG_MAX_KERNEL_ARGS];
    acg__handle_type buf_types[ACG_MAX_KERNEL_ARGS];
    uint32_t buf_arg[ACG_MAX_KERNEL_ARGS], n_bufs = 0, bad = 0;
    for (uint32_t i = 0; i < def->n_args; i++) {
        if (args[i].type == ACG_ARG_BUFFER) {
            bufs[n_bufs] = args[i].value.buf.buffer;
            buf_types[n_bufs] = ACG__HANDLE_BUFFER;
            buf_arg[n_bufs++] = i;
        }
    }
    if (!acg__handle_use_many(bufs, buf_types, n_bufs, &bad)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s(%s): argument %u is not a live buffer", fn,
                          def->name, buf_arg[bad]);
    }
    for (uint32_t i = 0; i < def->n_args; i++) {
        const acg_arg *a = &args[i];
        acg__karg *r = &node->args[i];
        if (a->type != ACG_ARG_BUFFER) {
            continue;
        }
        const acg_buffer *b = a->value.buf.buffer;
        if (b->dev != dev) {
            return acg__error(ACG_ERR_WRONG_DEVICE, "%s(%s): argument %u belongs to %s, not %s", fn,
                              def->name, i, b->dev->name, dev->name);
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
            bool may_share = (def->flags & ACG_KERNEL_ELEMENTWISE) ||
                             (def->in_place[0] == i && def->in_place[1] == j && i != j);
            if (same && may_share) {
                continue;
            }
            if (xs < ye && ys < xe) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): arguments %u and %u overlap%s",
                                  fn, def->name, i, j,
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
    const void *handles[2] = {s, k};
    static const acg__handle_type types[2] = {ACG__HANDLE_STREAM, ACG__HANDLE_KERNEL};
    uint32_t bad = 0;
    if (!acg__handle_use_many(handles, types, 2, &bad)) {
        return bad == 0 ? acg__error(ACG_ERR_INVALID_HANDLE, "%s: stream %p is not a live stream",
                                     fn, (const void *)s)
                        : acg__error(ACG_ERR_INVALID_HANDLE, "%s: invalid kernel", fn);
    }
    if (k->dev != s->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: kernel %s belongs to %s, the stream to %s", fn,
                          k->def->name, k->dev->name, s->dev->name);
    }
    acg__node node;
    ACG__TRY(acg__kernel_prepare(s->dev, k->def, k->impl, dims, args, n_args, &node, fn));
    return acg__submit(s, fn, &node, launch_eager);
}
