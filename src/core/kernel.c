/* kernel.c — the kernel registry (single kernels and sets) and kernels loaded on a device.
 *
 * Every kernel is a definition in one process-wide registry: the core's own kernels
 * (elementwise.c) from the start, the others as a layer or the user registers them. A definition
 * says, once for every backend, a kernel's argument types and how far each buffer argument
 * reaches, so the core checks a launch before any backend sees it (launch.c); each backend
 * builds its implementation from the definition's code for it. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

/* ---- the registry ---------------------------------------------------------------------------
 * Registered definitions live in one allocation each (the definition, then its binaries and
 * strings), until acg_kernel_unregister. A device that loaded one holds a reference, so a
 * definition outlives every kernel, launch and graph node that points at it. */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static acg__kernel_def **reg; /* (reg_n) registered definitions; freed when empty */
static uint32_t reg_n, reg_cap;

/* The definition named name (reg_lock held), or NULL; *index gets a registered one's place. */
static acg__kernel_def *find_locked(const char *name, uint32_t *index) {
    size_t n_core = 0;
    const acg__kernel_def *core = acg__core_kernels(&n_core);
    for (size_t i = 0; i < n_core; i++) {
        if (strcmp(core[i].name, name) == 0) {
            return (acg__kernel_def *)&core[i]; /* never written: refs are not kept for them */
        }
    }
    for (uint32_t i = 0; i < reg_n; i++) {
        if (strcmp(reg[i]->name, name) == 0) {
            *index = i;
            return reg[i];
        }
    }
    return NULL;
}

/* Whether the code a backend would run of def (its first entry of that format) is the function
 * named function, in the image of size bytes when image is not NULL (two images may hold a
 * function of one name). */
static bool runs_function(const acg__kernel_def *def, const char *backend, const char *format,
                          const void *image, size_t size, const char *function) {
    const acg_kernel_impl *e = acg__kernel_impl_find(def, backend, format);
    return e != NULL && strcmp(e->entry != NULL ? e->entry : def->name, function) == 0 &&
           (image == NULL ||
            (acg__kernel_impl_bytes(e) == size && memcmp(e->code, image, size) == 0));
}

const acg_kernel_desc *acg__kernel_desc_find(const char *backend, const char *format,
                                             const void *image, size_t size, const char *function) {
    size_t n_core = 0;
    const acg__kernel_def *core = acg__core_kernels(&n_core);
    for (size_t i = 0; i < n_core; i++) {
        if (runs_function(&core[i], backend, format, image, size, function)) {
            return &core[i].d;
        }
    }
    const acg_kernel_desc *found = NULL;
    pthread_mutex_lock(&reg_lock);
    for (uint32_t i = 0; i < reg_n && found == NULL; i++) {
        if (runs_function(reg[i], backend, format, image, size, function)) {
            found = &reg[i]->d;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

size_t acg__kernel_registered(void) {
    pthread_mutex_lock(&reg_lock);
    size_t n = reg_n;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

/* Drops a reference taken by a lookup for acg_kernel_get. */
static void def_release(const acg__kernel_def *def) {
    if (!def->core) {
        pthread_mutex_lock(&reg_lock);
        ((acg__kernel_def *)def)->refs--;
        pthread_mutex_unlock(&reg_lock);
    }
}

static bool in_set(const acg__kernel_def *def, const char *set, size_t len);

/* Enters n checked copies into the registry, all or none (reg_lock taken here): a name already
 * registered, or twice among them, refuses them all, and so does a set (not NULL) that has
 * kernels registered already. */
static acg_status enter_defs(acg__kernel_def **defs, uint32_t n, const char *set, const char *fn) {
    acg_status st = ACG_OK;
    uint32_t at = 0;
    pthread_mutex_lock(&reg_lock);
    for (uint32_t i = 0; set != NULL && i < reg_n && st == ACG_OK; i++) {
        if (in_set(reg[i], set, strlen(set))) {
            st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the set \"%s\" is already registered",
                            fn, set);
        }
    }
    for (uint32_t i = 0; i < n && st == ACG_OK; i++) {
        bool twice = false;
        for (uint32_t j = 0; j < i && !twice; j++) {
            twice = strcmp(defs[j]->name, defs[i]->name) == 0;
        }
        if (twice) {
            st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the name \"%s\" is in desc twice", fn,
                            defs[i]->name);
        } else if (find_locked(defs[i]->name, &at) != NULL) {
            st = acg__error(ACG_ERR_INVALID_ARGUMENT,
                            "%s: a kernel named \"%s\" is already registered", fn, defs[i]->name);
        }
    }
    if (st == ACG_OK && !acg__grow((void **)&reg, &reg_cap, reg_n + n, sizeof *reg)) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s(%s): out of memory", fn, defs[0]->name);
    }
    for (uint32_t i = 0; i < n && st == ACG_OK; i++) {
        reg[reg_n++] = defs[i];
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

acg_status acg_kernel_register(const acg_kernel_desc *desc) {
    static const char fn[] = "acg_kernel_register";
    ACG__TRY(acg__check_arg(desc, "desc", fn));
    acg_kernel_desc d;
    ACG__TRY(acg__kernel_desc_read(desc, &d, fn));
    if (strchr(d.name, '/') != NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: \"%s\": a name with '/' belongs to a kernel set "
                          "(acg_kernel_register_set)",
                          fn, d.name);
    }
    acg__kernel_def *def = acg__kernel_desc_copy(&d, d.name);
    if (def == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s(%s): out of memory", fn, d.name);
    }
    acg_status st = enter_defs(&def, 1, NULL, fn);
    if (st != ACG_OK) {
        acg__free(def);
    }
    return st;
}

/* A set's name: non-empty, without '/', short enough for messages and kernel names. */
static acg_status check_set(const char *set, const char *fn) {
    if (set == NULL || set[0] == '\0' || strchr(set, '/') != NULL || strlen(set) > 64) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the set's name %s%s%s must be 1 to 64 characters without '/'", fn,
                          set != NULL ? "\"" : "", set != NULL ? set : "NULL",
                          set != NULL ? "\"" : "");
    }
    return ACG_OK;
}

/* Whether a registered kernel belongs to the set (its name is "<set>/..."). */
static bool in_set(const acg__kernel_def *def, const char *set, size_t len) {
    return strncmp(def->name, set, len) == 0 && def->name[len] == '/';
}

acg_status acg_kernel_register_set(const char *set, const acg_kernel_desc *desc, size_t n) {
    static const char fn[] = "acg_kernel_register_set";
    ACG__TRY(check_set(set, fn));
    if (n == 0 || desc == NULL || n > UINT32_MAX / 2) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s(%s): %s", fn, set,
                          n == 0         ? "n is 0"
                          : desc == NULL ? "desc is NULL"
                                         : "n is too large");
    }
    size_t len = strlen(set);
    acg__kernel_def **defs = acg__calloc(n, sizeof *defs);
    if (defs == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s(%s): out of memory", fn, set);
    }
    char where[128];
    uint32_t made = 0;
    acg_status st = ACG_OK;
    /* The caller's array has its sizeof as stride: desc[0].size (read_desc refuses a size no
     * struct has, before any later element is reached). */
    const size_t stride = desc[0].size;
    for (size_t i = 0; i < n && st == ACG_OK; i++) {
        snprintf(where, sizeof where, "%s(%s): desc[%zu]", fn, set, i);
        const acg_kernel_desc *at = (const acg_kernel_desc *)((const char *)desc + i * stride);
        acg_kernel_desc d;
        if (at->size != stride) {
            st = acg__error(ACG_ERR_INVALID_ARGUMENT,
                            "%s: size %zu, where desc[0] has %zu: the structs of one array share "
                            "one size",
                            where, at->size, stride);
        } else {
            st = acg__kernel_desc_read(at, &d, where);
        }
        char *full = NULL;
        if (st == ACG_OK && strchr(d.name, '/') != NULL) {
            st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the name \"%s\" has a '/'", where,
                            d.name);
        } else if (st == ACG_OK && (full = acg__alloc(len + strlen(d.name) + 2)) == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", where);
        }
        if (st == ACG_OK) {
            /* An implementation that names no function runs the one the definition's name
             * says: the kernel's own, not the set's. */
            const char *function = d.name;
            sprintf(full, "%s/%s", set, d.name);
            d.name = full;
            if ((defs[made] = acg__kernel_desc_copy(&d, function)) == NULL) {
                st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", where);
            } else {
                made++;
            }
        }
        acg__free(full);
    }
    if (st == ACG_OK) {
        st = enter_defs(defs, made, set, fn);
    }
    for (uint32_t i = 0; st != ACG_OK && i < made; i++) {
        acg__free(defs[i]);
    }
    acg__free(defs);
    return st;
}

/* Removes the registered definition at `at` (reg_lock held); the caller frees it. */
static acg__kernel_def *take_locked(uint32_t at) {
    acg__kernel_def *def = reg[at];
    memmove(&reg[at], &reg[at + 1], (size_t)(reg_n - at - 1) * sizeof *reg);
    if (--reg_n == 0) { /* an empty registry holds no memory: the allocator may change */
        acg__free(reg);
        reg = NULL;
        reg_cap = 0;
    }
    return def;
}

acg_status acg_kernel_unregister(const char *name) {
    static const char fn[] = "acg_kernel_unregister";
    if (name == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: name is NULL", fn);
    }
    acg_status st = ACG_OK;
    uint32_t at = 0;
    acg__kernel_def *def = NULL;
    pthread_mutex_lock(&reg_lock);
    acg__kernel_def *found = find_locked(name, &at);
    if (found == NULL) {
        st = acg__error(ACG_ERR_NOT_FOUND, "%s: no kernel \"%s\" is registered", fn, name);
    } else if (found->core) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s is one of the core's kernels", fn, name);
    } else if (found->refs != 0) {
        st = acg__error(ACG_ERR_IN_USE,
                        "%s: %s is loaded on %u open device(s); it is released when they close", fn,
                        name, found->refs);
    } else {
        def = take_locked(at);
    }
    pthread_mutex_unlock(&reg_lock);
    acg__free(def);
    return st;
}

acg_status acg_kernel_unregister_set(const char *set) {
    static const char fn[] = "acg_kernel_unregister_set";
    ACG__TRY(check_set(set, fn));
    acg_status st = ACG_OK;
    size_t len = strlen(set);
    uint32_t found = 0;
    pthread_mutex_lock(&reg_lock);
    for (uint32_t i = 0; i < reg_n && st == ACG_OK; i++) {
        if (!in_set(reg[i], set, len)) {
            continue;
        }
        found++;
        if (reg[i]->refs != 0) {
            st = acg__error(ACG_ERR_IN_USE,
                            "%s: %s is loaded on %u open device(s); it is released when they "
                            "close, and until then no kernel of the set is unregistered",
                            fn, reg[i]->name, reg[i]->refs);
        }
    }
    if (st == ACG_OK && found == 0) {
        st =
            acg__error(ACG_ERR_NOT_FOUND, "%s: no kernel of the set \"%s\" is registered", fn, set);
    }
    for (uint32_t i = reg_n; st == ACG_OK && i-- > 0;) {
        if (in_set(reg[i], set, len)) {
            acg__free(take_locked(i)); /* under the lock, as registration grows the table */
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

/* ---- kernels on a device ------------------------------------------------------------------ */

acg_status acg_kernel_get(acg_device *dev, const char *name, acg_kernel **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_kernel_get";
    ACG__TRY(acg__check_device_usable(dev, fn));
    if (name == NULL || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    }
    /* The lookup's reference keeps the definition while it loads; a device that loaded it keeps
     * the reference until it closes. */
    uint32_t at = 0;
    pthread_mutex_lock(&reg_lock);
    acg__kernel_def *def = find_locked(name, &at);
    if (def != NULL && !def->core) {
        def->refs++;
    }
    pthread_mutex_unlock(&reg_lock);
    if (def == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "%s: no kernel \"%s\" is registered", fn, name);
    }
    pthread_mutex_lock(&dev->lock);
    acg_kernel *k = NULL;
    for (uint32_t i = 0; i < dev->n_kernels && k == NULL; i++) {
        k = dev->kernels[i]->def == def ? dev->kernels[i] : NULL;
    }
    acg_status st = ACG_OK;
    if (k != NULL) {
        def_release(def); /* the device holds one already */
        goto out_found;
    }
    if (!acg__grow((void **)&dev->kernels, &dev->cap_kernels, dev->n_kernels + 1,
                   sizeof *dev->kernels) ||
        (k = acg__calloc(1, sizeof *k)) == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_release;
    }
    k->dev = dev;
    k->def = def;
    st = acg__device_fault(dev, dev->vt->kernel_load(dev->impl, k->def, &k->impl));
    if (st != ACG_OK) {
        goto out_free;
    }
    if (acg__handle_add(k, ACG__HANDLE_KERNEL, &k->life) != ACG_OK) {
        if (dev->vt->kernel_unload != NULL) {
            dev->vt->kernel_unload(dev->impl, k->impl);
        }
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free;
    }
    dev->kernels[dev->n_kernels++] = k;
out_found:
    *out = k;
    pthread_mutex_unlock(&dev->lock);
    return ACG_OK;

out_free:
    acg__free(k);
out_release:
    def_release(def);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

void acg__device_kernels_free(acg_device *dev) {
    for (uint32_t i = 0; i < dev->n_kernels; i++) {
        acg_kernel *k = dev->kernels[i];
        /* A launch on another device's stream may still hold the kernel (and be refused). */
        acg__handle_retire(k, ACG__HANDLE_KERNEL, false);
        acg__handle_remove(k);
        if (dev->vt->kernel_unload != NULL) {
            dev->vt->kernel_unload(dev->impl, k->impl);
        }
        def_release(k->def);
        acg__free(k);
    }
    acg__free(dev->kernels);
    dev->kernels = NULL;
    dev->n_kernels = dev->cap_kernels = 0;
}

const char *acg_kernel_get_name(const acg_kernel *k) {
    ACG__CALL_SCOPE;
    if (!acg__handle_use(k, ACG__HANDLE_KERNEL)) {
        acg__error(ACG_ERR_INVALID_HANDLE, "acg_kernel_get_name: invalid kernel");
        return NULL;
    }
    return k->def->name;
}

acg_status acg__error_no_kernel_code(const char *fn, const char *kernel, const char *backend,
                                     const char *format, const char *member) {
    return acg__error(ACG_ERR_UNSUPPORTED,
                      "%s: kernel %s has no code for the %s backend (its definition has no %s "
                      "implementation for %s: %s%san impls entry)",
                      fn, kernel, backend, format, backend, member != NULL ? member : "",
                      member != NULL ? " or " : "");
}
