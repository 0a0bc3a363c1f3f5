/*
 * tool_report.h — what acg's tools measure with and report through: a monotonic clock, the
 * median and a least-squares line, a table printer and a JSON writer.
 *
 * Part of the tools' support library (tools/support, the acg_tool_support target). Commands
 * print a table by default and one JSON object with --json. Nothing here allocates; the
 * writers keep their state in the caller's struct and are not thread-safe.
 */
#ifndef ACG_TOOL_REPORT_H
#define ACG_TOOL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tool_cli.h" /* TOOL_PRINTF */

/* ---- clock and statistics -------------------------------------------------------------------- */

/* Nanoseconds of CLOCK_MONOTONIC: only differences mean anything. */
uint64_t tool_now_ns(void);

/* The median of v[0..n-1] (the mean of the middle two when n is even); sorts v in place.
 * NaN when n is 0. */
double tool_median(double *v, size_t n);

/* A least-squares line y = intercept + slope * x. */
typedef struct tool_fit {
    size_t n;            /* the points fitted */
    double slope;        /* NaN with fewer than two distinct x */
    double intercept;    /* y at x = 0; NaN with fewer than two distinct x */
    double slope_stderr; /* the slope's standard error from the residuals; NaN below 3 points */
} tool_fit;

/* Fits the line through the points (x[i], y[i]), i < n, by least squares. */
tool_fit tool_fit_line(const double *x, const double *y, size_t n);

/* Whether the fit measured a positive slope: one above zero by more than its standard error
 * (and so fitted to three points or more). A slope that is not is noise, to be reported as
 * "cannot be measured", not as a number. */
bool tool_fit_slope_measured(const tool_fit *fit);

/* ---- table printer ---------------------------------------------------------------------------
 * Columns have printf widths: a positive width right-aligns (numbers), a negative one
 * left-aligns (names). Cells are given one at a time, left to right; the row ends by itself
 * after the last column. */

#define TOOL_TABLE_MAX_COLS 12

typedef struct tool_table {
    FILE *out;
    size_t n_cols;
    int width[TOOL_TABLE_MAX_COLS];
    size_t col; /* next cell of the current row */
} tool_table;

/* Prints the header row and a rule under it. n_cols is at most TOOL_TABLE_MAX_COLS (more are
 * left out). A header wider than its column widens the column. */
void tool_table_begin(tool_table *t, FILE *out, size_t n_cols, const int *widths,
                      const char *const *headers);

/* Prints the next cell of the current row, formatted like printf (truncated to 127 bytes). */
void tool_table_cell(tool_table *t, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* ---- JSON writer -----------------------------------------------------------------------------
 * Writes one JSON value on one line, commas and escaping handled. Inside an object every call
 * names its key; inside an array, and for the outermost value, key is NULL. Strings are
 * written as valid UTF-8 (a byte that is not: U+FFFD); non-finite numbers as null.
 *
 * Misuse is detected, not written: nesting deeper than TOOL_JSON_MAX_DEPTH, a key missing in
 * an object or given outside one, an end call that does not match the open container, a
 * second outermost value. The writer then remembers the first such error, writes nothing
 * more, and tool_json_end reports it, so broken JSON never passes for a finished report. */

#define TOOL_JSON_MAX_DEPTH 16

typedef struct tool_json {
    FILE *out;
    int depth;                        /* containers open */
    bool object[TOOL_JSON_MAX_DEPTH]; /* [d]: the container at depth d + 1 is an object */
    bool empty[TOOL_JSON_MAX_DEPTH];  /* [d]: no member written into it yet */
    bool wrote;                       /* the outermost value was begun */
    const char *error;                /* the first misuse; NULL while there is none */
} tool_json;

void tool_json_begin(tool_json *j, FILE *out);
void tool_json_object_begin(tool_json *j, const char *key);
void tool_json_object_end(tool_json *j);
void tool_json_array_begin(tool_json *j, const char *key);
void tool_json_array_end(tool_json *j);
void tool_json_string(tool_json *j, const char *key, const char *value); /* NULL: null */
void tool_json_number(tool_json *j, const char *key, double value);
void tool_json_int(tool_json *j, const char *key, int64_t value);
void tool_json_uint(tool_json *j, const char *key, uint64_t value);
void tool_json_bool(tool_json *j, const char *key, bool value);
void tool_json_null(tool_json *j, const char *key);
/* value / 10^decimals written exactly, without an exponent: (1234567, 3) is 1234.567,
 * (-5, 3) is -0.005. decimals is at most 9 (more: a misuse). For figures %.6g would round, such
 * as a trace's timestamps in microseconds with their nanoseconds. */
void tool_json_fixed(tool_json *j, const char *key, int64_t value, unsigned decimals);

/* Ends the line after the outermost value and flushes. Returns TOOL_EXIT_OK; or, when the
 * writer failed (a misuse above, containers left open, no value at all, or a failed write),
 * TOOL_EXIT_FAILURE after "acg: writing the JSON report: <what went wrong>" on stderr, the
 * line left unended. */
int tool_json_end(tool_json *j);

/* tool_json_end without the flush, for a writer into an output file (tool_output), whose commit
 * checks the writes and reports a failed one naming the file and why. Returns TOOL_EXIT_OK, or
 * TOOL_EXIT_FAILURE after the report of a misuse, as tool_json_end does. */
int tool_json_end_unflushed(tool_json *j);

#endif /* ACG_TOOL_REPORT_H */
