/* alloc.c — the one allocator every library allocation goes through. */
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h"

static void *default_alloc(void *user, void *ptr, size_t size, size_t align) {
    ACG__UNUSED(user);
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    if (align < sizeof(void *)) {
        align = sizeof(void *);
    }
    void *p = NULL;
    return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static acg_alloc_fn alloc_fn = default_alloc;
static void *alloc_user;

acg_status acg_set_allocator(acg_alloc_fn fn, void *user) {
    pthread_mutex_lock(&alloc_lock);
    size_t live = acg__live_objects();
    if (live != 0) {
        pthread_mutex_unlock(&alloc_lock);
        return acg__error(ACG_ERR_IN_USE,
                          "acg_set_allocator: %zu acg objects are alive; destroy them first", live);
    }
    alloc_fn = fn != NULL ? fn : default_alloc;
    alloc_user = fn != NULL ? user : NULL;
    pthread_mutex_unlock(&alloc_lock);
    return ACG_OK;
}

void *acg__alloc_aligned(size_t size, size_t align) {
    if (size == 0) {
        return NULL;
    }
    return alloc_fn(alloc_user, NULL, size, align);
}

void *acg__alloc(size_t size) { return acg__alloc_aligned(size, 16); }

void *acg__calloc(size_t n, size_t size) {
    if (n != 0 && size > SIZE_MAX / n) {
        return NULL;
    }
    void *p = acg__alloc(n * size);
    if (p != NULL) {
        memset(p, 0, n * size);
    }
    return p;
}

void *acg__new(size_t size, const char *fn) {
    void *p = acg__calloc(1, size);
    if (p == NULL) {
        acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    return p;
}

void acg__free(void *p) {
    if (p != NULL) {
        alloc_fn(alloc_user, p, 0, 0);
    }
}

char *acg__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = acg__alloc(n);
    if (p != NULL) {
        memcpy(p, s, n);
    }
    return p;
}

bool acg__grow(void **array, uint32_t *cap, uint32_t need, size_t elem) {
    if (need <= *cap) {
        return true;
    }
    uint64_t n = *cap ? (uint64_t)*cap * 2 : 8;
    while (n < need) {
        n *= 2;
    }
    if (n > UINT32_MAX || n > SIZE_MAX / elem) {
        return false;
    }
    void *p = acg__alloc((size_t)n * elem);
    if (p == NULL) {
        return false;
    }
    if (*cap != 0) {
        memcpy(p, *array, (size_t)*cap * elem);
    }
    acg__free(*array);
    *array = p;
    *cap = (uint32_t)n;
    return true;
}
