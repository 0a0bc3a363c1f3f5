/* kernel_desc.c — kernel definitions: reading a caller's acg_kernel_desc at its size, checking
 * it as acg.h says acg_kernel_register refuses one, and copying it with everything it points to
 * into one allocation, its legacy code fields turned into entries of its implementation list;
 * and the lookup of an entry by backend and format. The registry that holds the copies is
 * kernel.c. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

/* Whether backend would run entry e, code in format. */
static bool impl_is(const acg_kernel_impl *e, const char *backend, const char *format) {
    return strcmp(e->format, format) == 0 &&
           (e->backend == NULL || strcmp(e->backend, backend) == 0);
}

/* The first entry of d's list that backend would run in format, or NULL. */
static const acg_kernel_impl *impl_in(const acg_kernel_desc *d, const char *backend,
                                      const char *format) {
    for (uint32_t i = 0; i < d->n_impls; i++) {
        if (impl_is(&d->impls[i], backend, format)) {
            return &d->impls[i];
        }
    }
    return NULL;
}

const acg_kernel_impl *acg__kernel_impl_find(const acg__kernel_def *def, const char *backend,
                                             const char *format) {
    return impl_in(&def->d, backend, format);
}

/* An entry's bytes: its size, or its text with the NUL (PTX, say). */
size_t acg__kernel_impl_bytes(const acg_kernel_impl *e) {
    return e->size != 0 ? e->size : strlen(e->code) + 1;
}

_Static_assert(ACG_MAX_KERNEL_ARGS < 0x40, "ACG_BY_ARG(j) stays below ACG_BY_GLOBAL(0)");

static bool valid_type(acg_arg_type t) { return t >= ACG_ARG_BUFFER && t <= ACG_ARG_F32; }

static bool integer_type(acg_arg_type t) {
    return t == ACG_ARG_I32 || t == ACG_ARG_U32 || t == ACG_ARG_I64 || t == ACG_ARG_U64;
}

static bool elementwise(const acg_kernel_desc *d) {
    return (d->flags & ACG_KERNEL_ELEMENTWISE) != 0;
}

static bool reach_given(const acg_kernel_reach *r) {
    return r->bytes != 0 || r->by[0] != 0 || r->by[1] != 0;
}

/* Whether a data rule's factor `by` names 1, an integer scalar argument or a grid dimension the
 * kernel indexes; *why gets what is wrong. */
static bool factor_ok(const acg_kernel_desc *d, uint8_t by, bool grid, const char **why) {
    if (by == ACG_BY_ONE) {
        return true;
    }
    if (by >= ACG_BY_GLOBAL(0) && by <= ACG_BY_GLOBAL(2)) {
        *why = grid ? "names the grid (only ACG_BY_ARG may)" : "names a dimension past dims";
        return !grid && (uint32_t)(by - ACG_BY_GLOBAL(0)) < d->dims;
    }
    uint32_t j = (uint32_t)by - 1;
    *why = "names no integer scalar argument (ACG_BY_ARG(j): j an i32, u32, i64 or u64)";
    return by < ACG_BY_GLOBAL(0) && j < d->n_args && integer_type(d->types[j]);
}

/* Checks how far the buffers reach: one of elementwise, a callback, data rules. */
static acg_status check_shape(const acg_kernel_desc *d, const char *fn) {
    const char *name = d->name, *why = "";
    if ((d->flags & ~(uint32_t)ACG_KERNEL_ELEMENTWISE) != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): flags 0x%x has unknown bits", fn, name,
                          d->flags);
    }
    bool reach = false;
    for (uint32_t i = 0; i < ACG_MAX_KERNEL_ARGS; i++) {
        reach = reach || reach_given(&d->reach[i]);
    }
    int ways = (int)elementwise(d) + (d->shape != NULL) + (int)reach;
    if (ways > 1) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): say how far buffers reach in one way: ACG_KERNEL_ELEMENTWISE, "
                          "a shape rule or reach[], not %s%s%s",
                          fn, name, elementwise(d) ? "ACG_KERNEL_ELEMENTWISE " : "",
                          d->shape != NULL ? "shape " : "", reach ? "reach[]" : "");
    }
    for (uint32_t i = 0; i < d->n_args; i++) {
        const acg_kernel_reach *r = &d->reach[i];
        if (d->types[i] != ACG_ARG_BUFFER) {
            if (reach_given(r)) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "%s(%s): argument %u is a scalar, its reach must be {0}", fn,
                                  name, i);
            }
            continue;
        }
        if (ways == 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): buffer argument %u: nothing says how far it reaches; set "
                              "reach[%u], a shape rule, or ACG_KERNEL_ELEMENTWISE in flags",
                              fn, name, i, i);
        }
        if (elementwise(d) && d->bytes_per_item[i] == 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): buffer argument %u has no bytes_per_item and the kernel "
                              "is elementwise: nothing says how far it reaches",
                              fn, name, i);
        }
        if (reach && r->bytes == 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): buffer argument %u has no reach[%u].bytes; a kernel with "
                              "data rules gives one for every buffer argument",
                              fn, name, i, i);
        }
        for (int f = 0; reach && f < 2; f++) {
            if (!factor_ok(d, r->by[f], false, &why)) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): reach[%u].by[%d] = %u %s", fn,
                                  name, i, f, r->by[f], why);
            }
        }
    }
    for (uint32_t i = d->n_args; i < ACG_MAX_KERNEL_ARGS; i++) {
        if (reach_given(&d->reach[i])) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): reach[%u] is set past the %u arguments", fn, name, i,
                              d->n_args);
        }
    }
    for (uint32_t g = 0; g < 3; g++) {
        if (d->grid_covers[g] == ACG_BY_ONE) {
            continue;
        }
        if (g >= d->dims || !factor_ok(d, d->grid_covers[g], true, &why)) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): grid_covers[%u] = %u %s", fn, name,
                              g, d->grid_covers[g],
                              g >= d->dims ? "is a dimension past dims" : why);
        }
    }
    return ACG_OK;
}

/* Checks the list of implementations (d->impls): each entry names a format and holds code. An
 * entry of a format or for a backend this build does not know is kept, never chosen: a later
 * version of acg, or a backend added later, may take it. */
static acg_status check_impls(const acg_kernel_desc *d, const char *fn) {
    const char *name = d->name;
    if (d->n_impls > ACG_MAX_KERNEL_IMPLS) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): n_impls is %u, at most ACG_MAX_KERNEL_IMPLS (%d)", fn, name,
                          d->n_impls, ACG_MAX_KERNEL_IMPLS);
    }
    if (d->n_impls > 0 && d->impls == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): impls is NULL, but n_impls is %u", fn,
                          name, d->n_impls);
    }
    for (uint32_t i = 0; i < d->n_impls; i++) {
        const acg_kernel_impl *e = &d->impls[i];
        const char *why = NULL;
        if (e->format == NULL) {
            why = "format is NULL";
        } else if (e->format[0] == '\0') {
            why = "format is empty";
        } else if (e->code == NULL) {
            why = "code is NULL";
        } else if (e->backend != NULL && e->backend[0] == '\0') {
            why = "backend is empty (NULL: every backend that takes the format)";
        }
        if (why != NULL) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): impls[%u].%s", fn, name, i, why);
        }
    }
    return ACG_OK;
}

/* A binary: a pointer and a size, both or neither. */
static bool binary_ok(const void *p, size_t size, const char *name) {
    return (p == NULL) == (size == 0) && (p != NULL || name == NULL);
}

/* Checks a definition as acg.h says acg_kernel_register refuses it. */
static acg_status check_desc(const acg_kernel_desc *d, const char *fn) {
    if (d->name == NULL || d->name[0] == '\0') {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the kernel has no name", fn);
    }
    const char *name = d->name;
    if (d->n_args > ACG_MAX_KERNEL_ARGS) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): n_args is %u, at most ACG_MAX_KERNEL_ARGS (%d)", fn, name,
                          d->n_args, ACG_MAX_KERNEL_ARGS);
    }
    for (uint32_t i = 0; i < d->n_args; i++) {
        if (!valid_type(d->types[i])) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): types[%u] is %d, not an acg_arg_type", fn, name, i,
                              (int)d->types[i]);
        }
        if (d->types[i] != ACG_ARG_BUFFER && d->bytes_per_item[i] != 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s(%s): argument %u is a scalar, its bytes_per_item must be 0", fn,
                              name, i);
        }
    }
    if (d->dims < 1 || d->dims > 3) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): dims is %u, not 1, 2 or 3", fn, name,
                          d->dims);
    }
    ACG__TRY(check_shape(d, fn));
    /* An elementwise window is global[0] items: work items in other dimensions would reach past
     * what the launch checks. */
    if (elementwise(d) && d->dims != 1) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): an elementwise kernel is 1-D, but dims is %u", fn, name,
                          d->dims);
    }
    uint32_t a = d->in_place[0], b = d->in_place[1];
    if ((a != 0 || b != 0) && (a == b || a >= d->n_args || b >= d->n_args ||
                               d->types[a] != ACG_ARG_BUFFER || d->types[b] != ACG_ARG_BUFFER)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): in_place {%u, %u} must name two different buffer arguments "
                          "of the %u ({0, 0}: none)",
                          fn, name, a, b, d->n_args);
    }
    if (d->exactness != ACG_KERNEL_EXACT_SAME_BACKEND &&
        d->exactness != ACG_KERNEL_EXACT_EVERY_BACKEND) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): exactness %d is unknown", fn, name,
                          (int)d->exactness);
    }
    if (d->opencl.source == NULL && d->opencl.name != NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): opencl.name without opencl.source", fn,
                          name);
    }
    if (!binary_ok(d->cuda.fatbin, d->cuda.size, d->cuda.name)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): cuda.fatbin, cuda.size and cuda.name: a binary needs both its "
                          "pointer and its size, and a name only with them",
                          fn, name);
    }
    if (!binary_ok(d->spirv.module, d->spirv.size, d->spirv.name)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): spirv.module, spirv.size and spirv.name: a binary needs both "
                          "its pointer and its size, and a name only with them",
                          fn, name);
    }
    ACG__TRY(check_impls(d, fn));
    if ((d->cpu_parts.parts == NULL) != (d->cpu_parts.fn == NULL)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): cpu_parts needs both parts and fn, or neither", fn, name);
    }
    /* A launch not worth splitting, and every launch on one thread, runs cpu.fn. */
    if (d->cpu_parts.fn != NULL && d->cpu.fn == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): cpu_parts without cpu.fn", fn, name);
    }
    if (d->cpu.fn == NULL && d->n_impls == 0 && d->opencl.source == NULL &&
        d->cuda.fatbin == NULL && d->spirv.module == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): no implementation: set cpu.fn, impls, opencl.source, "
                          "cuda.fatbin or spirv.module",
                          fn, name);
    }
    return acg__backends_check_kernel(d, fn);
}

/* Where the copies go in a definition's allocation. */
typedef struct layout {
    size_t at, total;
} layout;

static size_t place(layout *l, size_t bytes, size_t align) {
    l->at = (l->total + align - 1) / align * align;
    l->total = l->at + bytes;
    return l->at;
}

static size_t str_bytes(const char *s) { return s != NULL ? strlen(s) + 1 : 0; }

/* Copies bytes to base + place(l, ...) and returns the copy (NULL for NULL src). */
static const void *put(char *base, layout *l, const void *src, size_t bytes, size_t align) {
    char *dst = base + place(l, bytes, align);
    if (src == NULL) {
        return NULL;
    }
    memcpy(dst, src, bytes);
    return dst;
}

/* The alignment of an entry's code: a binary's 16, a text's 1. */
static size_t code_align(const acg_kernel_impl *e) { return e->size != 0 ? 16 : 1; }

/* A registered copy of d (already checked): the definition and everything it points to in one
 * allocation. Its list (d.impls) holds d's entries, then one for each legacy field with code,
 * so that backends read the list only; an implementation that names no function runs
 * `function` (the kernel's name, or in a set the name without the set's). */
acg__kernel_def *acg__kernel_desc_copy(const acg_kernel_desc *d, const char *function) {
    const uint32_t n = d->n_impls + (uint32_t)(d->opencl.source != NULL) +
                       (uint32_t)(d->cuda.fatbin != NULL) + (uint32_t)(d->spirv.module != NULL);
    layout l = {0, sizeof(acg__kernel_def)};
    place(&l, (size_t)n * sizeof(acg_kernel_impl), _Alignof(acg_kernel_impl));
    place(&l, d->cuda.size, 16);
    place(&l, d->spirv.size, 16);
    place(&l, str_bytes(d->name), 1);
    place(&l, str_bytes(function), 1);
    place(&l, str_bytes(d->opencl.source), 1);
    place(&l, str_bytes(d->opencl.name), 1);
    place(&l, str_bytes(d->cuda.name), 1);
    place(&l, str_bytes(d->spirv.name), 1);
    for (uint32_t i = 0; i < d->n_impls; i++) {
        const acg_kernel_impl *e = &d->impls[i];
        place(&l, acg__kernel_impl_bytes(e), code_align(e));
        place(&l, str_bytes(e->backend), 1);
        place(&l, str_bytes(e->format), 1);
        place(&l, str_bytes(e->entry), 1);
    }
    char *base = acg__alloc_aligned(l.total, 16);
    if (base == NULL) {
        return NULL;
    }
    acg__kernel_def *def = (acg__kernel_def *)base;
    memset(def, 0, sizeof *def);
    def->d = *d;
    l = (layout){0, sizeof(acg__kernel_def)};
    acg_kernel_impl *list =
        (acg_kernel_impl *)(base + place(&l, (size_t)n * sizeof *list, _Alignof(acg_kernel_impl)));
    def->d.cuda.fatbin = put(base, &l, d->cuda.fatbin, d->cuda.size, 16);
    def->d.spirv.module = put(base, &l, d->spirv.module, d->spirv.size, 16);
    def->d.name = put(base, &l, d->name, str_bytes(d->name), 1);
    const char *fn_name = put(base, &l, function, str_bytes(function), 1);
    def->d.opencl.source = put(base, &l, d->opencl.source, str_bytes(d->opencl.source), 1);
    def->d.opencl.name = put(base, &l, d->opencl.name, str_bytes(d->opencl.name), 1);
    def->d.cuda.name = put(base, &l, d->cuda.name, str_bytes(d->cuda.name), 1);
    def->d.spirv.name = put(base, &l, d->spirv.name, str_bytes(d->spirv.name), 1);
    for (uint32_t i = 0; i < d->n_impls; i++) {
        const acg_kernel_impl *e = &d->impls[i];
        acg_kernel_impl *c = &list[i];
        c->code = put(base, &l, e->code, acg__kernel_impl_bytes(e), code_align(e));
        c->size = e->size;
        c->backend = put(base, &l, e->backend, str_bytes(e->backend), 1);
        c->format = put(base, &l, e->format, str_bytes(e->format), 1);
        c->entry = put(base, &l, e->entry, str_bytes(e->entry), 1);
        c->entry = c->entry != NULL ? c->entry : fn_name;
    }
    def->name = def->d.name;
    if (def->d.opencl.source != NULL && def->d.opencl.name == NULL) {
        def->d.opencl.name = fn_name;
    }
    if (def->d.cuda.fatbin != NULL && def->d.cuda.name == NULL) {
        def->d.cuda.name = fn_name;
    }
    if (def->d.spirv.module != NULL && def->d.spirv.name == NULL) {
        def->d.spirv.name = fn_name;
    }
    /* The legacy fields, as the entries they stand for, after the caller's: one list. */
    uint32_t at = d->n_impls;
    if (def->d.opencl.source != NULL) {
        list[at++] = (acg_kernel_impl){NULL, ACG_KERNEL_FORMAT_OPENCL_C, def->d.opencl.source, 0,
                                       def->d.opencl.name};
    }
    if (def->d.cuda.fatbin != NULL) {
        list[at++] = (acg_kernel_impl){NULL, ACG_KERNEL_FORMAT_CUDA_IMAGE, def->d.cuda.fatbin,
                                       def->d.cuda.size, def->d.cuda.name};
    }
    if (def->d.spirv.module != NULL) {
        list[at++] = (acg_kernel_impl){NULL, ACG_KERNEL_FORMAT_SPIRV_OPENCL, def->d.spirv.module,
                                       def->d.spirv.size, def->d.spirv.name};
    }
    def->d.impls = n != 0 ? list : NULL;
    def->d.n_impls = n;
    /* Arguments past n_args are never read; the launch checks rely on in_place's order. */
    for (uint32_t i = d->n_args; i < ACG_MAX_KERNEL_ARGS; i++) {
        def->d.types[i] = (acg_arg_type)0;
        def->d.bytes_per_item[i] = 0;
    }
    if (d->in_place[0] > d->in_place[1]) {
        def->d.in_place[0] = d->in_place[1];
        def->d.in_place[1] = d->in_place[0];
    }
    return def;
}

/* A caller's struct from headers before impls ends with grid_covers and the struct's tail
 * padding, exactly where impls begins: its size covers neither impls nor n_impls, which take
 * their defaults (NULL, 0), so it registers as it did. */
enum {
    DESC_ALIGN = _Alignof(acg_kernel_desc),
    GRID_COVERS_END = offsetof(acg_kernel_desc, grid_covers) + 3 /* its uint8_t[3] */
};
_Static_assert(offsetof(acg_kernel_desc, impls) ==
                   (GRID_COVERS_END + DESC_ALIGN - 1) / DESC_ALIGN * DESC_ALIGN,
               "impls begins where the struct before it ended");

/* Reads a caller's definition at its size and checks it. A struct that ends before reach comes
 * from headers without flags, which took a NULL shape for elementwise, and is read so: its
 * sizeof (cuda_lanes, then the struct's tail padding) may cover where flags lies now, so what
 * it holds there is padding, never read. */
acg_status acg__kernel_desc_read(const acg_kernel_desc *desc, acg_kernel_desc *d, const char *fn) {
    static const acg_kernel_desc defaults = ACG_KERNEL_DESC_INIT;
    ACG__TRY(acg__config_read(d, sizeof *d, &defaults, desc, offsetof(acg_kernel_desc, shape),
                              "acg_kernel_desc", fn));
    if (desc->size <= offsetof(acg_kernel_desc, reach)) {
        d->flags = d->shape == NULL ? ACG_KERNEL_ELEMENTWISE : 0;
    }
    return check_desc(d, fn);
}
