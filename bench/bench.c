/*
 * bench.c — the clock, median, table printer and JSON writer that every benchmark shares.
 */
#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- clock and statistics -------------------------------------------------------------------- */

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof v[0], compare_double);
    if (n % 2 == 1)
        return v[n / 2];
    return 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- table printer --------------------------------------------------------------------------- */

static void table_put(bench_table *t, const char *text) {
    int w = t->width[t->col];
    bool last = t->col + 1 == t->n_cols;
    if (t->col > 0)
        fputs("  ", t->out);
    if (last && w < 0)
        fputs(text, t->out); /* no trailing blanks after a left-aligned last column */
    else
        fprintf(t->out, "%*s", w, text);
    if (last) {
        fputc('\n', t->out);
        t->col = 0;
    } else {
        t->col++;
    }
}

void bench_table_begin(bench_table *t, FILE *out, size_t n_cols, const int *widths,
                       const char *const *headers) {
    if (n_cols > BENCH_TABLE_MAX_COLS)
        n_cols = BENCH_TABLE_MAX_COLS;
    t->out = out;
    t->n_cols = n_cols;
    t->col = 0;
    size_t rule = 0;
    for (size_t i = 0; i < n_cols; i++) {
        int w = widths[i];
        size_t len = strlen(headers[i]);
        size_t abs_w = (size_t)(w < 0 ? -w : w);
        /* A header wider than its column widens the column, so the rows stay aligned. */
        if (len > abs_w) {
            abs_w = len;
            w = w < 0 ? -(int)len : (int)len;
        }
        t->width[i] = w;
        rule += abs_w + (i > 0 ? 2 : 0);
    }
    for (size_t i = 0; i < n_cols; i++)
        table_put(t, headers[i]);
    for (size_t i = 0; i < rule; i++)
        fputc('-', out);
    fputc('\n', out);
}

void bench_table_cell(bench_table *t, const char *fmt, ...) {
    char text[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    table_put(t, text);
}

/* ---- JSON writer ----------------------------------------------------------------------------- */

static void json_string_literal(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", (unsigned)*p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* Writes the separator and key that come before a value at the current depth. */
static void json_prefix(bench_json *j, const char *key) {
    if (j->depth > 0) {
        if (!j->first[j->depth])
            fputs(", ", j->out);
        j->first[j->depth] = false;
    }
    if (key) {
        json_string_literal(j->out, key);
        fputs(": ", j->out);
    }
}

static void json_open(bench_json *j, const char *key, char bracket) {
    json_prefix(j, key);
    fputc(bracket, j->out);
    if (j->depth + 1 < BENCH_JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void json_close(bench_json *j, char bracket) {
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

void bench_json_begin(bench_json *j, FILE *out) {
    j->out = out;
    j->depth = 0;
    j->first[0] = true;
}

void bench_json_object_begin(bench_json *j, const char *key) { json_open(j, key, '{'); }
void bench_json_object_end(bench_json *j) { json_close(j, '}'); }
void bench_json_array_begin(bench_json *j, const char *key) { json_open(j, key, '['); }
void bench_json_array_end(bench_json *j) { json_close(j, ']'); }

void bench_json_string(bench_json *j, const char *key, const char *value) {
    json_prefix(j, key);
    if (value)
        json_string_literal(j->out, value);
    else
        fputs("null", j->out);
}

void bench_json_number(bench_json *j, const char *key, double value) {
    json_prefix(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.6g", value);
    else
        fputs("null", j->out);
}

void bench_json_int(bench_json *j, const char *key, int64_t value) {
    json_prefix(j, key);
    fprintf(j->out, "%" PRId64, value);
}

void bench_json_uint(bench_json *j, const char *key, uint64_t value) {
    json_prefix(j, key);
    fprintf(j->out, "%" PRIu64, value);
}

void bench_json_bool(bench_json *j, const char *key, bool value) {
    json_prefix(j, key);
    fputs(value ? "true" : "false", j->out);
}

void bench_json_null(bench_json *j, const char *key) {
    json_prefix(j, key);
    fputs("null", j->out);
}

void bench_json_end(bench_json *j) {
    fputc('\n', j->out);
    fflush(j->out);
}
