/* fake_containers.c — the test drivers' small containers (see fake_common.h). */
#include "fake_common.h"

#include <stdlib.h>
#include <string.h>

void *fake__grow(void *v, size_t n, size_t *cap, size_t size) {
    if (n < *cap) {
        return v;
    }
    size_t room = *cap ? *cap * 2 : 8;
    void *grown = realloc(v, room * size);
    if (grown != NULL) {
        *cap = room;
    }
    return grown;
}

int fake__vec_push(struct fake_vec *vec, void *p) {
    void **v = fake__grow(vec->v, vec->n, &vec->cap, sizeof *v);
    if (v == NULL) {
        return -1;
    }
    vec->v = v;
    vec->v[vec->n++] = p;
    return 0;
}

int fake__vec_has(const struct fake_vec *vec, const void *p) {
    for (size_t i = 0; i < vec->n; i++) {
        if (vec->v[i] == p) {
            return 1;
        }
    }
    return 0;
}

void fake__vec_remove(struct fake_vec *vec, const void *p) {
    for (size_t i = 0; i < vec->n; i++) {
        if (vec->v[i] == p) {
            memmove(&vec->v[i], &vec->v[i + 1], (vec->n - i - 1) * sizeof *vec->v);
            vec->n--;
            return;
        }
    }
}

void fake__vec_free(struct fake_vec *vec) {
    free(vec->v);
    vec->v = NULL;
    vec->n = vec->cap = 0;
}

int fake__ids_add(struct fake_ids *ids, size_t id) {
    size_t at = 0;
    while (at < ids->n && ids->v[at] < id) {
        at++;
    }
    if (at < ids->n && ids->v[at] == id) {
        return 0;
    }
    size_t *v = fake__grow(ids->v, ids->n, &ids->cap, sizeof *v);
    if (v == NULL) {
        return -1;
    }
    ids->v = v;
    memmove(&ids->v[at + 1], &ids->v[at], (ids->n - at) * sizeof *ids->v);
    ids->v[at] = id;
    ids->n++;
    return 0;
}

int fake__ids_union(struct fake_ids *dst, const struct fake_ids *src) {
    for (size_t i = 0; i < src->n; i++) {
        if (fake__ids_add(dst, src->v[i]) != 0) {
            return -1;
        }
    }
    return 0;
}

void fake__ids_free(struct fake_ids *ids) {
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}
