/* fake_ledger.c — the test drivers' call counts, injected failures, misuse and live counts, their
 * init and environment knobs (see fake_common.h). */
#include "fake_common.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INJECT_ANY (-1)

/* Whether "any entry point" and the total take `ep`. */
static int counted(const struct fake_ledger *l, int ep) {
    return l->counted == NULL || l->counted(ep);
}

int fake__ledger_index(const struct fake_ledger *l, const char *name) {
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

int fake__ledger_enter(struct fake_ledger *l, int ep) {
    int code = 0;
    pthread_mutex_lock(&l->lock);
    l->counts[ep]++;
    if (l->injection.armed &&
        (l->injection.ep == ep || (l->injection.ep == INJECT_ANY && counted(l, ep)))) {
        if (--l->injection.left == 0) {
            l->injection.armed = 0;
            code = l->injection.code;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return code;
}

void fake__ledger_arm(struct fake_ledger *l, const char *name, unsigned nth, int code) {
    int ep = INJECT_ANY;
    bool known = true;
    if (name != NULL && strcmp(name, "*") != 0) {
        ep = fake__ledger_index(l, name);
        known = ep >= 0;
        if (!known) {
            fprintf(stderr, "%s: no entry point %s to fail\n", l->driver, name);
        }
    }
    pthread_mutex_lock(&l->lock);
    /* A name the driver does not have disarms: it must never fail some other call. */
    l->injection.armed = nth > 0 && known;
    l->injection.ep = ep;
    l->injection.left = nth;
    l->injection.code = code;
    pthread_mutex_unlock(&l->lock);
}

unsigned long fake__ledger_calls(struct fake_ledger *l, const char *name) {
    int ep = name != NULL ? fake__ledger_index(l, name) : INJECT_ANY;
    unsigned long n = 0;
    pthread_mutex_lock(&l->lock);
    if (ep >= 0) {
        n = l->counts[ep];
    } else if (name == NULL) {
        for (int i = 0; i < l->n; i++) {
            n += counted(l, i) ? l->counts[i] : 0;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return n;
}

void fake__ledger_reset(struct fake_ledger *l) {
    pthread_mutex_lock(&l->lock);
    memset(l->counts, 0, (size_t)l->n * sizeof *l->counts);
    l->violations = 0;
    pthread_mutex_unlock(&l->lock);
}

void fake__ledger_live(struct fake_ledger *l, long delta) {
    pthread_mutex_lock(&l->lock);
    l->live += delta;
    pthread_mutex_unlock(&l->lock);
}

long fake__ledger_live_count(struct fake_ledger *l) {
    pthread_mutex_lock(&l->lock);
    long n = l->live;
    pthread_mutex_unlock(&l->lock);
    return n;
}

void fake__ledger_violation(struct fake_ledger *l, const char *fmt, va_list ap) {
    char text[512];
    vsnprintf(text, sizeof text, fmt, ap);
    fprintf(stderr, "%s: misuse: %s\n", l->driver, text);
    pthread_mutex_lock(&l->lock);
    l->violations++;
    pthread_mutex_unlock(&l->lock);
}

unsigned long fake__ledger_violations(struct fake_ledger *l) {
    pthread_mutex_lock(&l->lock);
    unsigned long n = l->violations;
    pthread_mutex_unlock(&l->lock);
    return n;
}

/* ---- initialization ----------------------------------------------------------------------- */

int fake__init(int init_fail, pthread_mutex_t *lock, int *initialized) {
    if (init_fail != 0) {
        return init_fail;
    }
    pthread_mutex_lock(lock);
    *initialized = 1;
    pthread_mutex_unlock(lock);
    return 0;
}

/* ---- environment knobs -------------------------------------------------------------------- */

long fake__env_long(const char *driver, const char *name, long def, long lo, long hi) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') {
        return def;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (*end != '\0' || errno != 0 || v < lo || v > hi) {
        fprintf(stderr, "%s: %s=%s is not in [%ld, %ld]; using %ld\n", driver, name, s, lo, hi,
                def);
        return def;
    }
    return v;
}

void fake__env_tokens(const char *list, void (*fn)(const char *token, void *ctx), void *ctx) {
    char *copy = strdup(list);
    if (copy == NULL) {
        return;
    }
    char *save = NULL;
    for (char *tok = strtok_r(copy, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save)) {
        fn(tok, ctx);
    }
    free(copy);
}

struct hide_ctx {
    struct fake_ledger *l;
    const char *var;
    char *hidden;
};

static void hide_one(const char *name, void *ctx) {
    struct hide_ctx *h = ctx;
    int ep = fake__ledger_index(h->l, name);
    if (ep < 0) {
        fprintf(stderr, "%s: %s: no entry point %s\n", h->l->driver, h->var, name);
    } else {
        h->hidden[ep] = 1;
    }
}

void fake__env_hide(struct fake_ledger *l, const char *var, char *hidden) {
    const char *list = getenv(var);
    struct hide_ctx h = {l, var, hidden};
    if (list != NULL) {
        fake__env_tokens(list, hide_one, &h);
    }
}

void fake__env_fail(struct fake_ledger *l, const char *var) {
    const char *spec = getenv(var);
    if (spec == NULL || *spec == '\0') {
        return;
    }
    char name[96];
    const char *c2 = strrchr(spec, ':');
    const char *c1 = c2 != NULL ? memchr(spec, ':', (size_t)(c2 - spec)) : NULL;
    char *end1 = NULL, *end2 = NULL;
    unsigned long nth = c1 != NULL ? strtoul(c1 + 1, &end1, 10) : 0;
    unsigned long code = c2 != NULL ? strtoul(c2 + 1, &end2, 0) : 0;
    if (c1 == NULL || (size_t)(c1 - spec) >= sizeof name || end1 != c2 || *end2 != '\0' ||
        c2[1] == '\0' || code > 0x7fffffffUL) {
        fprintf(stderr, "%s: %s=%s is not name:nth:code\n", l->driver, var, spec);
        return;
    }
    memcpy(name, spec, (size_t)(c1 - spec));
    name[c1 - spec] = '\0';
    fake__ledger_arm(l, name, (unsigned)nth, (int)code);
}
