/* handle.c — registries of live handles and of pinned host allocations.
 *
 * Every handle the library returns is entered here and removed when destroyed, so a call with a
 * destroyed, foreign or garbage pointer is rejected by a lookup instead of being followed. */
#include <string.h>

#include "core/acg-impl.h"

/* ---- live handles: open addressing with linear probing, keyed by address --------------- */

typedef struct slot {
    const void *p;
    uint32_t type;
} slot;

/* Lookups (every call of the API) share the read side; only create and destroy write. */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static slot *table;
static size_t table_cap; /* power of two, or 0 */
static size_t table_n;

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

acg_status acg__handle_add(const void *p, acg__handle_type type) {
    pthread_rwlock_wrlock(&reg_lock);
    if ((table_n + 1) * 2 > table_cap && !rehash(table_cap ? table_cap * 2 : 64)) {
        pthread_rwlock_unlock(&reg_lock);
        return ACG_ERR_OUT_OF_MEMORY;
    }
    size_t i = find_slot(table, table_cap, p);
    if (table[i].p == NULL) {
        table_n++;
    }
    table[i].p = p;
    table[i].type = type;
    pthread_rwlock_unlock(&reg_lock);
    return ACG_OK;
}

void acg__handle_remove(const void *p) {
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

bool acg__handle_valid(const void *p, acg__handle_type type) {
    if (p == NULL) {
        return false;
    }
    pthread_rwlock_rdlock(&reg_lock);
    bool ok = false;
    if (table_cap != 0) {
        size_t i = find_slot(table, table_cap, p);
        ok = table[i].p == p && table[i].type == (uint32_t)type;
    }
    pthread_rwlock_unlock(&reg_lock);
    return ok;
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

void acg__pinned_ref(void *base, int delta) {
    pthread_mutex_lock(&pin_lock);
    uint32_t i = upper_bound(base);
    if (i > 0 && pins[i - 1].base == base) {
        pins[i - 1].graph_refs = (uint32_t)((int64_t)pins[i - 1].graph_refs + delta);
    }
    pthread_mutex_unlock(&pin_lock);
}

size_t acg__live_objects(void) {
    pthread_rwlock_rdlock(&reg_lock);
    size_t n = table_n;
    pthread_rwlock_unlock(&reg_lock);
    pthread_mutex_lock(&pin_lock);
    n += pins_n;
    pthread_mutex_unlock(&pin_lock);
    return n;
}
