/*
 * bench.h — helpers shared by every benchmark of the acg tool: a monotonic clock, the median,
 * a small table printer and a JSON writer, and the entry points of the benchmarks.
 *
 * A benchmark is one file bench/<name>.c with one entry point `int bench_<name>(argc, argv)`
 * (argv[0] is the benchmark's name); tools/acg/main.c lists them. Benchmarks print a table by
 * default and one JSON object with --json. None of these helpers allocates.
 */
#ifndef ACG_BENCH_H
#define ACG_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- clock and statistics -------------------------------------------------------------------- */

/* Nanoseconds of CLOCK_MONOTONIC: only differences mean anything. */
uint64_t bench_now_ns(void);

/* The median of v[0..n-1] (the mean of the middle two when n is even); sorts v in place.
 * NaN when n is 0. */
double bench_median(double *v, size_t n);

/* ---- table printer ---------------------------------------------------------------------------
 * Columns have printf widths: a positive width right-aligns (numbers), a negative one
 * left-aligns (names). Cells are given one at a time, left to right; the row ends by itself
 * after the last column. */

#define BENCH_TABLE_MAX_COLS 12

typedef struct bench_table {
    FILE *out;
    size_t n_cols;
    int width[BENCH_TABLE_MAX_COLS];
    size_t col; /* next cell of the current row */
} bench_table;

/* Prints the header row and a rule under it. n_cols is at most BENCH_TABLE_MAX_COLS. */
void bench_table_begin(bench_table *t, FILE *out, size_t n_cols, const int *widths,
                       const char *const *headers);

/* Prints the next cell of the current row, formatted like printf (truncated to 127 chars). */
void bench_table_cell(bench_table *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- JSON writer ---------------------------------------------------------------------------
 * Writes one JSON value on one line, commas and escaping handled. Inside an object every call
 * names its key; inside an array, and for the outermost value, key is NULL. Non-finite numbers
 * are written as null. */

#define BENCH_JSON_MAX_DEPTH 16

typedef struct bench_json {
    FILE *out;
    int depth;
    bool first[BENCH_JSON_MAX_DEPTH]; /* no member written yet at this depth */
} bench_json;

void bench_json_begin(bench_json *j, FILE *out);
void bench_json_object_begin(bench_json *j, const char *key);
void bench_json_object_end(bench_json *j);
void bench_json_array_begin(bench_json *j, const char *key);
void bench_json_array_end(bench_json *j);
void bench_json_string(bench_json *j, const char *key, const char *value); /* NULL: null */
void bench_json_number(bench_json *j, const char *key, double value);
void bench_json_int(bench_json *j, const char *key, int64_t value);
void bench_json_uint(bench_json *j, const char *key, uint64_t value);
void bench_json_bool(bench_json *j, const char *key, bool value);
void bench_json_null(bench_json *j, const char *key);
/* Ends the line after the outermost value. */
void bench_json_end(bench_json *j);

/* ---- benchmarks ------------------------------------------------------------------------------ */

/* bench/launch.c: eager launches against graph replay of the same launches. */
int bench_launch(int argc, char **argv);
extern const char bench_launch_usage[];

/* bench/stage.c: attention plans through the pinned stager: plans per second, and per plan the
 * copies, host waits and temporary device allocations. */
int bench_stage(int argc, char **argv);
extern const char bench_stage_usage[];

#endif /* ACG_BENCH_H */
