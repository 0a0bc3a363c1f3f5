/*
 * tool_cli.c — reporting failures and usage errors, option and number parsing, tables of
 * commands.
 */
#include "tool_cli.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "acg-layer.h" /* acg__parse_u64 */

/* ---- reporting ------------------------------------------------------------------------------- */

int tool_fail(acg_status status, const char *what) {
    const char *detail = acg_last_error();
    if (!detail || !detail[0]) {
        detail = acg_status_string(status);
    }
    fprintf(stderr, "acg: %s: %s\n", what, detail);
    return TOOL_EXIT_FAILURE;
}

int tool_failf(const char *what, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "acg: %s: ", what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return TOOL_EXIT_FAILURE;
}

/* "acg: <problem>", then the usage: the text usage, or else the usage lines of table. */
static int usage_error(const char *usage, const tool_command *table, const char *fmt, va_list ap) {
    fputs("acg: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (usage) {
        fputs(usage, stderr);
    } else {
        bool first = true;
        tool_command_usage(stderr, table, &first);
    }
    return TOOL_EXIT_USAGE;
}

int tool_usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_error(usage, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int tool_command_usage_error(const tool_command *table, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_error(NULL, table, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- options --------------------------------------------------------------------------------- */

bool tool_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int tool_option(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0) {
        return 0;
    }
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *i += 1;
    *value = argv[*i];
    return 1;
}

bool tool_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    return acg__parse_u64(text, min, max, out) == ACG_OK;
}

/* A decimal number as people write one: an optional '-', digits with an optional fraction, an
 * optional exponent. strtod alone would also take blanks, '+', hex, "nan" and "inf". */
static bool is_decimal(const char *p) {
    size_t digits = 0;
    if (*p == '-') {
        p++;
    }
    for (; isdigit((unsigned char)*p); p++) {
        digits++;
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++) {
            digits++;
        }
    }
    if (digits == 0) {
        return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') {
            p++;
        }
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        while (isdigit((unsigned char)*p)) {
            p++;
        }
    }
    return *p == '\0';
}

bool tool_parse_double(const char *text, double min, double max, bool above_min, double *out) {
    if (!text || !is_decimal(text)) {
        return false;
    }
    double v = strtod(text, NULL);
    if (!isfinite(v) || (above_min ? !(v > min) : !(v >= min)) || !(v <= max)) {
        return false;
    }
    *out = v;
    return true;
}

int tool_option_u64(const char *usage, const char *who, const char *name, const char *text,
                    uint64_t min, uint64_t max, uint64_t *out) {
    if (tool_parse_u64(text, min, max, out)) {
        return TOOL_EXIT_OK;
    }
    return tool_usage_error(usage, "%s%s takes a whole number in [%llu, %llu]", who, name,
                            (unsigned long long)min, (unsigned long long)max);
}

int tool_option_double(const char *usage, const char *who, const char *name, const char *text,
                       double min, double max, bool above_min, double *out) {
    if (tool_parse_double(text, min, max, above_min, out)) {
        return TOOL_EXIT_OK;
    }
    /* %.15g writes every value a person would type back exactly, and no trailing zeros. */
    return tool_usage_error(usage, "%s%s takes a number in %c%.15g, %.15g]", who, name,
                            above_min ? '(' : '[', min, max);
}

/* ---- tables of commands ---------------------------------------------------------------------- */

const tool_command *tool_command_find(const tool_command *table, const char *name) {
    for (const tool_command *c = table; c->name; c++) {
        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

/* Writes one command's usage lines, its "usage: " as blanks unless *first. */
static void put_usage(FILE *out, const char *usage, bool *first) {
    static const char lead[] = "usage: ";
    const size_t len = sizeof lead - 1;
    if (!*first && strncmp(usage, lead, len) == 0) {
        fprintf(out, "%*s", (int)len, "");
        usage += len;
    }
    fputs(usage, out);
    *first = false;
}

void tool_command_usage(FILE *out, const tool_command *table, bool *first) {
    for (const tool_command *c = table; c->name; c++) {
        if (c->sub) {
            tool_command_usage(out, c->sub, first);
        } else if (c->usage) {
            put_usage(out, c->usage, first);
        }
    }
}
