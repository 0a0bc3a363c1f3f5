/* status.c — status strings and the thread-local last-error detail. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

const char *acg_status_string(acg_status status) {
    switch (status) {
#define ACG_STATUS_STRING_(name, value, text)                                                      \
    case ACG_##name:                                                                               \
        return text;
        ACG_STATUS_MAP(ACG_STATUS_STRING_)
#undef ACG_STATUS_STRING_
    }
    return "unknown status";
}

const char *acg_status_name(acg_status status) {
    switch (status) {
#define ACG_STATUS_NAME_(name, value, text)                                                        \
    case ACG_##name:                                                                               \
        return "ACG_" #name;
        ACG_STATUS_MAP(ACG_STATUS_NAME_)
#undef ACG_STATUS_NAME_
    }
    return "ACG_UNKNOWN";
}

/* Large enough for a kernel build log's first lines. */
static _Thread_local char last_error[2048];

const char *acg_last_error(void) { return last_error; }

/* Counts the details set on this thread, so a caller can tell whether a callback set one. */
static _Thread_local uint64_t error_serial;

static acg_status set_error(acg_status status, const char *fmt, va_list ap) {
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    error_serial++;
    acg__log(ACG_LOG_DEBUG, "%s: %s", acg_status_name(status), last_error);
    return status;
}

acg_status acg__error(acg_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(status, fmt, ap);
    va_end(ap);
    return status;
}

acg_status acg_set_last_error(acg_status status, const char *fmt, ...) {
    if (fmt == NULL) {
        return acg__error(status, "(no detail)");
    }
    va_list ap;
    va_start(ap, fmt);
    set_error(status, fmt, ap);
    va_end(ap);
    return status;
}

acg_status acg__check_arg(const void *p, const char *name, const char *fn) {
    return p != NULL ? ACG_OK : acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
}

uint64_t acg__error_serial(void) { return error_serial; }

void acg__error_copy(char *buf, size_t size) {
    if (size == 0) {
        return;
    }
    snprintf(buf, size, "%s", last_error);
}
