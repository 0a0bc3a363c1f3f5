/* log.c — leveled logging to a callback; the threshold starts from ACG_LOG. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/acg-impl.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static acg_log_fn log_fn;
static void *log_user;
static _Atomic int log_level = -1; /* -1: not read from ACG_LOG yet */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static int level_from_env(void) {
    const char *v = acg__env_get("ACG_LOG");
    if (v == NULL || *v == '\0') {
        return ACG_LOG_WARN;
    }
    for (int i = 0; i <= ACG_LOG_DEBUG; i++) {
        if (strcasecmp(v, level_names[i]) == 0) {
            return i;
        }
    }
    fprintf(stderr, "acg warn: ACG_LOG=%s is not one of error, warn, info, debug; using warn\n", v);
    return ACG_LOG_WARN;
}

acg_log_level acg_get_log_level(void) {
    int level = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (level < 0) {
        int expected = -1;
        level = level_from_env();
        if (!atomic_compare_exchange_strong(&log_level, &expected, level)) {
            level = expected;
        }
    }
    return (acg_log_level)level;
}

void acg_set_log_level(acg_log_level level) {
    if ((int)level < ACG_LOG_ERROR) {
        level = ACG_LOG_ERROR;
    }
    if (level > ACG_LOG_DEBUG) {
        level = ACG_LOG_DEBUG;
    }
    atomic_store(&log_level, (int)level);
}

/* The callback runs with log_lock held, so a reset (which takes the lock) returns only after
 * every call of the old callback has returned, and its context can be freed at once. Messages
 * logged while the callback runs on this thread are dropped, not recursed into. */
static _Thread_local bool in_callback;

void acg_set_log_callback(acg_log_fn fn, void *user) {
    /* From inside the callback this thread already holds the lock. */
    bool locked = !in_callback;
    if (locked) {
        pthread_mutex_lock(&log_lock);
    }
    log_fn = fn;
    log_user = user;
    if (locked) {
        pthread_mutex_unlock(&log_lock);
    }
}

void acg__log(acg_log_level level, const char *fmt, ...) {
    if ((int)level > (int)acg_get_log_level() || in_callback) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    if (log_fn != NULL) {
        in_callback = true;
        log_fn(level, msg, log_user);
        in_callback = false;
    } else {
        fprintf(stderr, "acg %s: %s\n", level_names[level], msg);
    }
    pthread_mutex_unlock(&log_lock);
}
