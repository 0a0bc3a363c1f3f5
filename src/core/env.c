/* env.c — the ACG_* environment variables: one list of known names, a warning for the rest, and
 * the one strict parser of every numeric variable and command-line option. A renamed switch must
 * never be ignored silently, and a mistyped number never read as another one. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h"

extern char **environ;

/* The core's own variables. Each backend and each layer above lists its own the same way, and
 * the library's explicit list of layers and backends (src/library.c) hands them all to the core
 * as acg__env_tables. */
static const char *const core_names[] = {
    "ACG_LOG",       /* log threshold: error|warn|info|debug */
    "ACG_DEVICE",    /* device spec used when acg_device_open gets NULL */
    "ACG_NO_PINNED", /* 1: acg_pinned_alloc returns pageable memory */
    /* how long a collective waits for the other ranks before it fails with ACG_ERR_COMM, in
     * milliseconds (default 60000); acg_mpi reads it too */
    "ACG_COMM_TIMEOUT_MS",
};

const acg__env_table acg__core_env = {"core", core_names, sizeof core_names / sizeof core_names[0]};

/* Calls f on every known name, layer by layer, until it returns true. */
static const char *find_known(bool (*f)(const char *known, void *ctx), void *ctx) {
    for (size_t t = 0; t < acg__n_env_tables; t++) {
        const acg__env_table *tab = acg__env_tables[t];
        for (size_t i = 0; i < tab->n; i++) {
            if (f(tab->names[i], ctx)) {
                return tab->names[i];
            }
        }
    }
    return NULL;
}

static bool same_name(const char *known, void *ctx) { return strcmp(known, ctx) == 0; }

const char *acg__env_get(const char *name) {
    if (find_known(same_name, (void *)name) != NULL) {
        return getenv(name);
    }
    acg__log(ACG_LOG_ERROR, "internal: unknown environment variable %s looked up", name);
    return NULL;
}

bool acg__env_flag(const char *name) {
    const char *v = acg__env_get(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Digits only: strtoull would also take blanks, a sign (wrapping "-1" to UINT64_MAX) and a
 * prefix of "2junk", and the callers' casts to narrower types wrapped what it returned. */
acg_status acg__parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    if (text == NULL || text[0] == '\0') {
        return ACG_ERR_INVALID_ARGUMENT;
    }
    uint64_t v = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return ACG_ERR_INVALID_ARGUMENT;
        }
        uint64_t digit = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - digit) / 10) {
            return ACG_ERR_INVALID_ARGUMENT;
        }
        v = v * 10 + digit;
    }
    if (v < min || v > max) {
        return ACG_ERR_INVALID_ARGUMENT;
    }
    *out = v;
    return ACG_OK;
}

acg_status acg__env_u64(const char *fn, const char *name, uint64_t min, uint64_t max,
                        uint64_t fallback, uint64_t *out) {
    const char *v = acg__env_get(name);
    if (v == NULL || v[0] == '\0') {
        *out = fallback;
        return ACG_OK;
    }
    if (acg__parse_u64(v, min, max, out) != ACG_OK) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: %s=%.64s is not a whole number in [%llu, %llu]", fn, name, v,
                          (unsigned long long)min, (unsigned long long)max);
    }
    return ACG_OK;
}

/* Edit distance, to name the known variable an unknown one was probably meant to be. */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) {
        return (size_t)-1;
    }
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[lb];
}

/* The known name nearest to `name` (stops at an exact match). */
struct nearest {
    const char *name;
    const char *best;
    size_t best_d;
};

static bool closer(const char *known, void *ctx) {
    struct nearest *n = ctx;
    size_t d = distance(n->name, known);
    if (d < n->best_d) {
        n->best_d = d;
        n->best = known;
    }
    return d == 0;
}

static void check_env(void) {
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, "ACG_", 4) != 0) {
            continue;
        }
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[64];
        if (len >= sizeof name) {
            len = sizeof name - 1;
        }
        memcpy(name, *e, len);
        name[len] = '\0';
        struct nearest near = {name, NULL, (size_t)-1};
        find_known(closer, &near);
        const char *best = near.best;
        size_t best_d = near.best_d;
        if (best_d != 0) {
            acg__log(ACG_LOG_WARN, "unknown environment variable %s is ignored (did you mean %s?)",
                     name, best);
        }
    }
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

void acg__env_check_once(void) { pthread_once(&env_once, check_env); }

void *acg__dlopen_vendor(const char *variable, const char *fallback, const char *missing,
                         const char *fix, const char **path, char *why, size_t why_size) {
    *path = acg__env_get(variable);
    if (*path == NULL || (*path)[0] == '\0') {
        *path = fallback;
    }
    void *h = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *err = dlerror();
        snprintf(why, why_size, "%s: dlopen(\"%s\") failed (%s); %s", missing, *path,
                 err != NULL ? err : "unknown error", fix);
    }
    return h;
}
