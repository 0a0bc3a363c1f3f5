/*
 * tool_report.c — the clock, the median and the least-squares line, the table printer and the
 * JSON writer.
 */
#include "tool_report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOOL_STR_(x) #x
#define TOOL_STR(x) TOOL_STR_(x)

/* ---- clock and statistics -------------------------------------------------------------------- */

uint64_t tool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

double tool_median(double *v, size_t n) {
    if (n == 0) {
        return NAN;
    }
    qsort(v, n, sizeof v[0], compare_double);
    if (n % 2 == 1) {
        return v[n / 2];
    }
    return 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

tool_fit tool_fit_line(const double *x, const double *y, size_t n) {
    tool_fit fit = {.n = n, .slope = NAN, .intercept = NAN, .slope_stderr = NAN};
    double mean_x = 0, mean_y = 0;
    for (size_t i = 0; i < n; i++) {
        mean_x += x[i] / (double)n;
        mean_y += y[i] / (double)n;
    }
    /* Sums of deviations from the means: exact enough for the few points a bench fits. */
    double sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        sxx += (x[i] - mean_x) * (x[i] - mean_x);
        sxy += (x[i] - mean_x) * (y[i] - mean_y);
    }
    if (!(sxx > 0)) {
        return fit;
    }
    fit.slope = sxy / sxx;
    fit.intercept = mean_y - fit.slope * mean_x;
    if (n < 3) {
        return fit;
    }
    double sse = 0;
    for (size_t i = 0; i < n; i++) {
        double r = y[i] - (fit.intercept + fit.slope * x[i]);
        sse += r * r;
    }
    fit.slope_stderr = sqrt(sse / (double)(n - 2) / sxx);
    return fit;
}

bool tool_fit_slope_measured(const tool_fit *fit) {
    return isfinite(fit->slope) && isfinite(fit->slope_stderr) && fit->slope > 0 &&
           fit->slope > fit->slope_stderr;
}

/* ---- table printer --------------------------------------------------------------------------- */

static void table_put(tool_table *t, const char *text) {
    int w = t->width[t->col];
    bool last = t->col + 1 == t->n_cols;
    if (t->col > 0) {
        fputs("  ", t->out);
    }
    if (last && w < 0) {
        fputs(text, t->out); /* no trailing blanks after a left-aligned last column */
    } else {
        fprintf(t->out, "%*s", w, text);
    }
    if (last) {
        fputc('\n', t->out);
        t->col = 0;
    } else {
        t->col++;
    }
}

void tool_table_begin(tool_table *t, FILE *out, size_t n_cols, const int *widths,
                      const char *const *headers) {
    if (n_cols > TOOL_TABLE_MAX_COLS) {
        n_cols = TOOL_TABLE_MAX_COLS;
    }
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
    for (size_t i = 0; i < n_cols; i++) {
        table_put(t, headers[i]);
    }
    for (size_t i = 0; i < rule; i++) {
        fputc('-', out);
    }
    fputc('\n', out);
}

void tool_table_cell(tool_table *t, const char *fmt, ...) {
    char text[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    table_put(t, text);
}

/* ---- JSON writer ----------------------------------------------------------------------------- */

/* Bytes of the well-formed UTF-8 sequence at p (1 for ASCII), or 0 when p starts none:
 * no overlong forms, surrogates or code points past U+10FFFF. */
static size_t utf8_length(const unsigned char *p) {
    if (p[0] < 0x80) {
        return 1;
    }
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)) {
        return 0;
    }
    return n;
}

/* A JSON string: escapes what JSON requires, and writes a byte that is not part of valid UTF-8
 * (a model's byte token may be half a character) as U+FFFD, so the output always parses. */
static void json_string_literal(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_length(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        /* The bytes JSON writes as a backslash and a letter (or themselves): escaped[k] stands
         * for plain[k]. */
        static const char plain[] = "\"\\\n\r\t", escaped[] = "\"\\nrt";
        const char *e = strchr(plain, *p);
        if (e != NULL) {
            fputc('\\', out);
            fputc(escaped[e - plain], out);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(out, "\\u%04x", (unsigned)*p);
        } else {
            fputc(*p, out);
        }
        p++;
    }
    fputc('"', out);
}

/* Remembers the writer's first error; every call after it writes nothing. Returns false. */
static bool json_fail(tool_json *j, const char *why) {
    if (j->error == NULL) {
        j->error = why;
    }
    return false;
}

/* Checks that a value may come next with this key, and writes the separator and the key that
 * go before it. False, with nothing written, when the writer has failed or fails now. */
static bool json_prefix(tool_json *j, const char *key) {
    if (j->error != NULL) {
        return false;
    }
    if (j->depth == 0) {
        if (key != NULL) {
            return json_fail(j, "a key given for the outermost value");
        }
        if (j->wrote) {
            return json_fail(j, "a second value after the outermost one");
        }
        j->wrote = true;
        return true;
    }
    int d = j->depth - 1;
    if (j->object[d] && key == NULL) {
        return json_fail(j, "a value without a key inside an object");
    }
    if (!j->object[d] && key != NULL) {
        return json_fail(j, "a key given inside an array");
    }
    if (!j->empty[d]) {
        fputs(", ", j->out);
    }
    j->empty[d] = false;
    if (key != NULL) {
        json_string_literal(j->out, key);
        fputs(": ", j->out);
    }
    return true;
}

static void json_open(tool_json *j, const char *key, bool object) {
    if (j->error == NULL && j->depth == TOOL_JSON_MAX_DEPTH) {
        json_fail(j, "nesting deeper than " TOOL_STR(TOOL_JSON_MAX_DEPTH) " levels");
        return;
    }
    if (!json_prefix(j, key)) {
        return;
    }
    fputc(object ? '{' : '[', j->out);
    j->object[j->depth] = object;
    j->empty[j->depth] = true;
    j->depth++;
}

static void json_close(tool_json *j, bool object) {
    if (j->error != NULL) {
        return;
    }
    if (j->depth == 0) {
        json_fail(j, object ? "an object ended that was never begun"
                            : "an array ended that was never begun");
        return;
    }
    if (j->object[j->depth - 1] != object) {
        json_fail(j, object ? "an object ended where an array is open"
                            : "an array ended where an object is open");
        return;
    }
    fputc(object ? '}' : ']', j->out);
    j->depth--;
}

void tool_json_begin(tool_json *j, FILE *out) {
    memset(j, 0, sizeof *j);
    j->out = out;
}

void tool_json_object_begin(tool_json *j, const char *key) { json_open(j, key, true); }

void tool_json_object_end(tool_json *j) { json_close(j, true); }

void tool_json_array_begin(tool_json *j, const char *key) { json_open(j, key, false); }

void tool_json_array_end(tool_json *j) { json_close(j, false); }

void tool_json_string(tool_json *j, const char *key, const char *value) {
    if (!json_prefix(j, key)) {
        return;
    }
    if (value) {
        json_string_literal(j->out, value);
    } else {
        fputs("null", j->out);
    }
}

void tool_json_number(tool_json *j, const char *key, double value) {
    if (!json_prefix(j, key)) {
        return;
    }
    if (isfinite(value)) {
        fprintf(j->out, "%.6g", value);
    } else {
        fputs("null", j->out);
    }
}

void tool_json_int(tool_json *j, const char *key, int64_t value) {
    if (json_prefix(j, key)) {
        fprintf(j->out, "%" PRId64, value);
    }
}

void tool_json_uint(tool_json *j, const char *key, uint64_t value) {
    if (json_prefix(j, key)) {
        fprintf(j->out, "%" PRIu64, value);
    }
}

void tool_json_bool(tool_json *j, const char *key, bool value) {
    if (json_prefix(j, key)) {
        fputs(value ? "true" : "false", j->out);
    }
}

void tool_json_null(tool_json *j, const char *key) {
    if (json_prefix(j, key)) {
        fputs("null", j->out);
    }
}

void tool_json_fixed(tool_json *j, const char *key, int64_t value, unsigned decimals) {
    if (j->error == NULL && decimals > 9) {
        json_fail(j, "more than 9 decimals of a fixed-point number");
        return;
    }
    if (!json_prefix(j, key)) {
        return;
    }
    uint64_t scale = 1;
    for (unsigned i = 0; i < decimals; i++) {
        scale *= 10;
    }
    /* The magnitude as unsigned, so INT64_MIN has one too. */
    uint64_t mag = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    fprintf(j->out, "%s%" PRIu64, value < 0 ? "-" : "", mag / scale);
    if (decimals > 0) {
        fprintf(j->out, ".%0*" PRIu64, (int)decimals, mag % scale);
    }
}

/* The end calls' checks, and the line's end when they pass. */
static void json_finish(tool_json *j) {
    if (j->error == NULL && !j->wrote) {
        json_fail(j, "no value was written");
    }
    if (j->error == NULL && j->depth > 0) {
        json_fail(j, "an object or array was left open");
    }
    if (j->error == NULL) {
        fputc('\n', j->out);
    }
}

int tool_json_end_unflushed(tool_json *j) {
    json_finish(j);
    if (j->error != NULL) {
        return tool_failf("writing the JSON report", "%s", j->error);
    }
    return TOOL_EXIT_OK;
}

int tool_json_end(tool_json *j) {
    json_finish(j);
    errno = 0;
    if (j->error == NULL && fflush(j->out) != 0) {
        /* The flush's own reason (ENOSPC); a write that failed before it left only ferror. */
        int e = errno;
        return e != 0 ? tool_failf("writing the JSON report", "the output could not be written: %s",
                                   strerror(e))
                      : tool_failf("writing the JSON report", "the output could not be written");
    }
    if (ferror(j->out)) {
        json_fail(j, "the output could not be written");
    }
    if (j->error != NULL) {
        return tool_failf("writing the JSON report", "%s", j->error);
    }
    return TOOL_EXIT_OK;
}
