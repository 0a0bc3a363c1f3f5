/* handle.c — registries of live handles and of pinned host allocations.
 *
 * Every handle the library returns is entered here and removed when destroyed, so a call with a
 * destroyed, foreign or garbage pointer is rejected by a lookup instead of being followed. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/acg-impl.h"

/* ---- live handles: open addressing with linear probing, keyed by address --------------- */

typedef struct slot {
    const void *p;
    acg__life *life; /* the object's count of calls using it */
    uint32_t type;
    bool retired; /* a destroy owns it: no new call may use it */
} slot;

/* Lookups (every call of the API) share the read side; only create, retire and destroy write. */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static slot *table;
static size_t table_cap; /* power of two, or 0 */
static size_t table_n;

/* This thread's held handles (see "calls hold what they use" below). */
enum { MAX_HELD = 256 };

static _Thread_local struct held {
    const void *p;
    acg__life *life;
} held[MAX_HELD];
static _Thread_local uint32_t n_held;
static _Thread_local uint32_t scope_base; /* first entry of the innermost scope */
static _Thread_local uint32_t scope_depth;

static size_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static size_t find_slot(const slot *t, size_t cap, const void *p) {
    size_t i = hash_ptr(p) & (cap - 1);
    while (t[i].p != NULL && t[i].p != p) {
        i = (i + 1) & (cap - 1);
    }
    return i;
}

/* The live slot of p (reg_lock held), or NULL. */
static slot *lookup(const void *p) {
    if (table_cap == 0 || p == NULL) {
        return NULL;
    }
    slot *e = &table[find_slot(table, table_cap, p)];
    return e->p == p ? e : NULL;
}

static bool rehash(size_t cap) {
    slot *t = acg__calloc(cap, sizeof *t);
    if (t == NULL) {
        return false;
    }
    for (size_t i = 0; i < table_cap; i++) {
        if (table[i].p != NULL) {
            t[find_slot(t, cap, table[i].p)] = table[i];
        }
    }
    acg__free(table);
    table = t;
    table_cap = cap;
    return true;
}

acg_status acg__handle_add(const void *p, acg__handle_type type, acg__life *life) {
    atomic_init(&life->users, 0);
    pthread_rwlock_wrlock(&reg_lock);
    if ((table_n + 1) * 2 > table_cap && !rehash(table_cap ? table_cap * 2 : 64)) {
        pthread_rwlock_unlock(&reg_lock);
        return ACG_ERR_OUT_OF_MEMORY;
    }
    size_t i = find_slot(table, table_cap, p);
    if (table[i].p == NULL) {
        table_n++;
    }
    table[i] = (slot){.p = p, .life = life, .type = (uint32_t)type, .retired = false};
    pthread_rwlock_unlock(&reg_lock);
    return ACG_OK;
}

acg_status acg__check_live(const void *p, acg__handle_type type, const char *arg, const char *what,
                           const char *fn) {
    if (!acg__handle_use(p, type)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %s %p is not a live %s", fn, arg, p, what);
    }
    return ACG_OK;
}

acg_status acg__handle_publish(const void *p, acg__handle_type type, acg__life *life,
                               const char *fn) {
    if (acg__handle_add(p, type, life) != ACG_OK) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    return ACG_OK;
}

void acg__handle_remove(const void *p) {
    /* The object is about to be freed: this thread's holds of it must not be released into
     * freed memory when their scope ends. */
    for (uint32_t i = 0; i < n_held; i++) {
        if (held[i].p == p) {
            held[i].life = NULL;
        }
    }
    pthread_rwlock_wrlock(&reg_lock);
    if (table_cap == 0) {
        pthread_rwlock_unlock(&reg_lock);
        return;
    }
    size_t i = find_slot(table, table_cap, p);
    if (table[i].p == p) {
        /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
        table[i].p = NULL;
        table_n--;
        size_t j = i;
        for (;;) {
            j = (j + 1) & (table_cap - 1);
            if (table[j].p == NULL) {
                break;
            }
            size_t home = hash_ptr(table[j].p) & (table_cap - 1);
            bool movable = (j > i) ? (home <= i || home > j) : (home <= i && home > j);
            if (movable) {
                table[i] = table[j];
                table[j].p = NULL;
                i = j;
            }
        }
    }
    if (table_n == 0) {
        /* An empty registry owns no memory, so the allocator can be swapped. */
        acg__free(table);
        table = NULL;
        table_cap = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
}

/* ---- calls hold what they use ------------------------------------------------------------ *
 * A public function opens a call scope (ACG__CALL_SCOPE). Each handle it validates is counted
 * as used in the object's life and pushed on this thread's stack of held handles; the scope's
 * end pops and releases them. A destroy first retires the handle, so no new call can use it,
 * then waits until no other call holds it. Holding adds two atomic operations per handle to
 * the registry lookup every call already made (about 4 ns a handle; acg bench launch). */

acg__scope acg__scope_enter(void) {
    acg__scope sc = {.base = scope_base, .top = n_held};
    scope_base = n_held;
    scope_depth++;
    return sc;
}

void acg__scope_exit(acg__scope *sc) {
    while (n_held > sc->top) {
        struct held *h = &held[--n_held];
        if (h->life != NULL) {
            atomic_fetch_sub_explicit(&h->life->users, 1, memory_order_release);
        }
    }
    scope_base = sc->base;
    scope_depth--;
}

/* Holds n handles under one registry read lock (the lock's two atomic operations were most of
 * what validating a handle cost). Stops at the first that is not live, or (unless even_retired)
 * retired: false with *bad its index; the holds taken before it stay until the scope ends. */
static bool hold(const void *const *p, const acg__handle_type *types, uint32_t n, bool even_retired,
                 uint32_t *bad) {
    if (scope_depth == 0 || n_held + n > MAX_HELD) {
        /* A library bug: the hold would never be released, and a destroy would wait forever. */
        fprintf(stderr, "acg: internal error: handles used %s\n",
                scope_depth == 0 ? "outside a call scope" : "by too many nested calls");
        abort();
    }
    pthread_rwlock_rdlock(&reg_lock);
    uint32_t i = 0;
    for (; i < n; i++) {
        slot *e = p[i] != NULL ? lookup(p[i]) : NULL;
        if (e == NULL || e->type != types[i] || (e->retired && !even_retired)) {
            break;
        }
        atomic_fetch_add_explicit(&e->life->users, 1, memory_order_relaxed);
        held[n_held++] = (struct held){.p = p[i], .life = e->life};
    }
    pthread_rwlock_unlock(&reg_lock);
    *bad = i;
    return i == n;
}

bool acg__handle_use(const void *p, acg__handle_type type) {
    uint32_t bad = 0;
    return hold(&p, &type, 1, false, &bad);
}

bool acg__handle_use_many(const void *const *p, const acg__handle_type *types, uint32_t n,
                          uint32_t *bad) {
    return hold(p, types, n, false, bad);
}

void acg__hold_device(acg_device *dev) {
    const void *p = dev;
    const acg__handle_type type = ACG__HANDLE_DEVICE;
    uint32_t bad = 0;
    hold(&p, &type, 1, true, &bad);
}

bool acg__handle_valid(const void *p, acg__handle_type type) {
    pthread_rwlock_rdlock(&reg_lock);
    const slot *e = lookup(p);
    bool ok = e != NULL && e->type == (uint32_t)type && !e->retired;
    pthread_rwlock_unlock(&reg_lock);
    return ok;
}

/* This thread's holds of p (the caller holds reg_lock); *outer: one of them belongs to a call
 * enclosing the current one. */
static uint32_t own_holds(const void *p, bool *outer) {
    uint32_t mine = 0;
    *outer = false;
    for (uint32_t i = 0; i < n_held; i++) {
        if (held[i].p == p && held[i].life != NULL) {
            *outer = *outer || i < scope_base;
            mine++;
        }
    }
    return mine;
}

/* Waits until only this thread's `mine` holds remain. Most calls are short (a launch); a
 * stream synchronize waits for its work, so back off to sleeping. */
static void wait_for_others(acg__life *life, uint32_t mine) {
    for (unsigned spins = 0; atomic_load_explicit(&life->users, memory_order_acquire) != mine;
         spins++) {
        if (spins < 64) {
            sched_yield();
        } else {
            nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
        }
    }
}

acg_status acg__handle_retire(const void *p, acg__handle_type type, bool strict) {
    pthread_rwlock_wrlock(&reg_lock);
    slot *e = lookup(p);
    if (e == NULL || e->type != (uint32_t)type || e->retired) {
        pthread_rwlock_unlock(&reg_lock);
        return ACG_ERR_INVALID_HANDLE;
    }
    /* Holds of this thread's enclosing calls would be released only after the destroy: the
     * object must outlive them. The current call's own holds stay until its scope ends (or
     * acg__handle_remove drops them). */
    bool outer = false;
    uint32_t mine = own_holds(p, &outer);
    if (strict && outer) {
        pthread_rwlock_unlock(&reg_lock);
        return ACG_ERR_IN_USE;
    }
    e->retired = true;
    acg__life *life = e->life;
    pthread_rwlock_unlock(&reg_lock);
    /* Other calls finish what they validated; none can start. */
    wait_for_others(life, mine);
    return ACG_OK;
}

void acg__handle_drain(const void *p) {
    pthread_rwlock_rdlock(&reg_lock);
    slot *e = lookup(p);
    bool outer = false;
    uint32_t mine = e != NULL ? own_holds(p, &outer) : 0;
    acg__life *life = e != NULL ? e->life : NULL;
    pthread_rwlock_unlock(&reg_lock);
    if (life != NULL) {
        wait_for_others(life, mine);
    }
}

acg_status acg__retire(const void *p, acg__handle_type type, const char *fn, const char *what) {
    acg_status st = acg__handle_retire(p, type, true);
    if (st == ACG_ERR_INVALID_HANDLE) {
        return acg__error(st, "%s: %p is not a live %s", fn, p, what);
    }
    if (st == ACG_ERR_IN_USE) {
        return acg__error(st,
                          "%s: the %s is in use by the acg call this one was made from (a "
                          "callback cannot destroy what its caller uses)",
                          fn, what);
    }
    return st;
}

void acg__handle_restore(const void *p) {
    pthread_rwlock_wrlock(&reg_lock);
    slot *e = lookup(p);
    if (e != NULL) {
        e->retired = false;
    }
    pthread_rwlock_unlock(&reg_lock);
}

/* ---- pinned allocations: sorted by base address ------------------------------------------ */

static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static acg__pinned *pins;
static uint32_t pins_n, pins_cap;

/* Index of the first entry with base > p. */
static uint32_t upper_bound(const void *p) {
    uint32_t lo = 0, hi = pins_n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)pins[mid].base <= (uintptr_t)p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

acg_status acg__pinned_add(const acg__pinned *entry) {
    pthread_mutex_lock(&pin_lock);
    if (!acg__grow((void **)&pins, &pins_cap, pins_n + 1, sizeof *pins)) {
        pthread_mutex_unlock(&pin_lock);
        return ACG_ERR_OUT_OF_MEMORY;
    }
    uint32_t i = upper_bound(entry->base);
    uintptr_t base = (uintptr_t)entry->base;
    if ((i > 0 && (uintptr_t)pins[i - 1].base + pins[i - 1].size > base) ||
        (i < pins_n && (uintptr_t)pins[i].base - base < entry->size)) {
        pthread_mutex_unlock(&pin_lock);
        return ACG_ERR_INVALID_ARGUMENT;
    }
    memmove(&pins[i + 1], &pins[i], (pins_n - i) * sizeof *pins);
    pins[i] = *entry;
    pins_n++;
    pthread_mutex_unlock(&pin_lock);
    return ACG_OK;
}

acg_status acg__pinned_remove(void *base, acg__pinned *out) {
    pthread_mutex_lock(&pin_lock);
    uint32_t i = upper_bound(base);
    if (i == 0 || pins[i - 1].base != base) {
        pthread_mutex_unlock(&pin_lock);
        return ACG_ERR_INVALID_HANDLE;
    }
    i--;
    if (pins[i].graph_refs != 0) {
        pthread_mutex_unlock(&pin_lock);
        return ACG_ERR_IN_USE;
    }
    *out = pins[i];
    memmove(&pins[i], &pins[i + 1], (pins_n - i - 1) * sizeof *pins);
    pins_n--;
    if (pins_n == 0) {
        acg__free(pins);
        pins = NULL;
        pins_cap = 0;
    }
    pthread_mutex_unlock(&pin_lock);
    return ACG_OK;
}

bool acg__pinned_lookup(const void *p, size_t size, acg__pinned *out) {
    pthread_mutex_lock(&pin_lock);
    bool found = false;
    uint32_t i = upper_bound(p);
    if (i > 0) {
        const acg__pinned *e = &pins[i - 1];
        uintptr_t off = (uintptr_t)p - (uintptr_t)e->base;
        if (off <= e->size && size <= e->size - off) {
            *out = *e;
            found = true;
        }
    }
    pthread_mutex_unlock(&pin_lock);
    return found;
}

bool acg__pinned_use(const acg_device *dev, const void *p, size_t size, uint64_t bit) {
    pthread_mutex_lock(&pin_lock);
    bool pinned = false;
    uint32_t i = upper_bound(p);
    if (i > 0) {
        acg__pinned *e = &pins[i - 1];
        uintptr_t off = (uintptr_t)p - (uintptr_t)e->base;
        if (e->dev == dev && off <= e->size && size <= e->size - off) {
            e->used_by |= bit;
            pinned = e->pinned;
        }
    }
    pthread_mutex_unlock(&pin_lock);
    return pinned;
}

void acg__pinned_ref(void *base, int delta) {
    pthread_mutex_lock(&pin_lock);
    uint32_t i = upper_bound(base);
    if (i > 0 && pins[i - 1].base == base) {
        pins[i - 1].graph_refs = (uint32_t)((int64_t)pins[i - 1].graph_refs + delta);
    }
    pthread_mutex_unlock(&pin_lock);
}

size_t acg__handle_room(void) {
    pthread_rwlock_rdlock(&reg_lock);
    /* acg__handle_add grows the table when one more entry would fill more than half of it. */
    size_t room = table_cap / 2 > table_n ? table_cap / 2 - table_n : 0;
    pthread_rwlock_unlock(&reg_lock);
    return room;
}

size_t acg__live_objects(void) {
    pthread_rwlock_rdlock(&reg_lock);
    size_t n = table_n;
    pthread_rwlock_unlock(&reg_lock);
    pthread_mutex_lock(&pin_lock);
    n += pins_n;
    pthread_mutex_unlock(&pin_lock);
    return n + acg__kernel_registered();
}
