/*
 * bench.h — helpers shared by every benchmark of the acg tool: a monotonic clock, the median,
 * a small table printer and a JSON writer, and the entry points of the benchmarks.
 *
 * A benchmark is one file bench/<name>.c with one entry point `int bench_<name>(argc, argv)`
 * (argv[0] is the benchmark's name); tools/acg/main.c lists them. Benchmarks print a table by
 * default and one JSON object with --json, and exit like every acg command (cli.h): 0, 1 after
 * one line "acg: <what>: <detail>", 2 after a usage error. Besides opening the device and
 * joining the ranks of --tp, none of these helpers allocates, but the measurements of the
 * machine below.
 */
#ifndef ACG_BENCH_H
#define ACG_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <acg/acg.h>

/* ---- clock and statistics -------------------------------------------------------------------- */

/* Nanoseconds of CLOCK_MONOTONIC: only differences mean anything. */
uint64_t bench_now_ns(void);

/* The median of v[0..n-1] (the mean of the middle two when n is even); sorts v in place.
 * NaN when n is 0. */
double bench_median(double *v, size_t n);

/* ---- what the machine can do -----------------------------------------------------------------
 * Measured in the same run as the figures they are read against, on `threads` host threads
 * (at most BENCH_MAX_THREADS): the median of five passes each. NaN when memory or a thread is
 * missing. These allocate (a buffer of `bytes`). */

#define BENCH_MAX_THREADS 64

/* GB/s of reading `bytes` of host memory once, each thread its contiguous share. */
double bench_read_bandwidth(size_t bytes, unsigned threads);
/* GFLOP/s of independent fused multiply-adds at the widest SIMD level the CPU has (named in
 * *level: "avx512", "avx2" or "scalar"), counting an FMA as two operations. */
double bench_fma_peak(unsigned threads, const char **level);

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

/* ---- the options and the device every benchmark shares ---------------------------------------
 * Every benchmark takes --backend B (a device spec, see acg_device_open), --json and --help
 * (or -h). Its parse loop offers each argument to bench_common_option first, parses its own
 * options, and reports anything else with bench_unknown_argument. */

typedef struct bench_common {
    const char *name;    /* "bench launch": begins the bench's usage errors and its title */
    const char *usage;   /* the bench's usage line */
    const char *backend; /* --backend: the device spec; NULL: acg_device_open's default */
    bool json;           /* --json: one JSON object instead of the table */
} bench_common;

#define BENCH_OPTION_OTHER (-1) /* argv[*i] is not a common option */
#define BENCH_OPTION_TAKEN (-2) /* argv[*i] was a common option, now in c */

/* Parses argv[*i] if it is --backend B (or --backend=B), --json, --help or -h, advancing *i
 * past a separate value. Returns BENCH_OPTION_TAKEN or BENCH_OPTION_OTHER, or else the exit
 * status the bench returns at once: CLI_EXIT_OK after --help wrote c->usage to stdout,
 * CLI_EXIT_USAGE after a usage error (--backend without a value) on stderr. */
int bench_common_option(int argc, char **argv, int *i, bench_common *c);

/* A whole-number option of a bench: `name` N, N in [1, max], into *value (left as it is when
 * the option is not given). */
typedef struct bench_count {
    const char *name; /* "--steps" */
    uint64_t max;
    uint64_t *value;
} bench_count;

/* The whole parse loop of a bench whose own options are all counts: the common options, then
 * counts[0 .. n), anything else an unknown argument. Returns BENCH_OPTION_TAKEN when every
 * argument was taken, else the exit status the bench returns at once (after --help, or a usage
 * error naming the option and its range). */
int bench_parse_counts(int argc, char **argv, bench_common *c, const bench_count *counts, size_t n);

/* Reports arg, which no option of the bench took, as a usage error ("<name>: unknown option
 * '<arg>'", or "unknown argument" when it does not begin with '-'). Returns CLI_EXIT_USAGE. */
int bench_unknown_argument(const bench_common *c, const char *arg);

/* Opens the device c->backend names; its capability goes to *cap (either may be NULL).
 * Returns CLI_EXIT_OK, or CLI_EXIT_FAILURE after "acg: opening device '<spec>': <detail>"
 * ("the default device" when c->backend is NULL). */
int bench_device_open(const bench_common *c, acg_device **dev, const acg_capability **cap);

/* Closes dev (NULL: nothing). Returns rc, unless rc is CLI_EXIT_OK and closing fails: then
 * CLI_EXIT_FAILURE after the error line, since a teardown failure after a good run is a bug. */
int bench_device_close(acg_device *dev, int rc);

/* Prints the first line of a table report: "acg <name> on <spec> (<device name>)". */
void bench_print_title(const bench_common *c, const acg_device *dev);

/* Writes the device's members into the current JSON object: "backend", "device" (the spec)
 * and "device_name". */
void bench_json_device(bench_json *j, const acg_device *dev);

/* ---- tensor parallelism: --tp N under mpirun -np N -------------------------------------------
 * `acg run --tp N` and the benches that take --tp run as every rank of `mpirun -np N`, each on
 * its own device, joined through libacg_mpi where the tool was built with it (ACG_HAVE_MPI).
 * Every rank makes the same calls (the collectives pair up); rank 0 alone prints its report,
 * and each rank reports its own failures, naming itself. */

struct acg_mpi_comm;

typedef struct bench_ranks {
    uint64_t tp;              /* --tp: the ranks asked for; 1: one process, no MPI */
    const acg_comm *comm;     /* the ranks' process group; NULL with one rank */
    int32_t rank;             /* this process's rank; 0 with one */
    struct acg_mpi_comm *mpi; /* what comm belongs to; NULL with one rank */
} bench_ranks;

/* Joins the tp ranks that mpirun started (initializing MPI unless it is already); with tp 1
 * sets r up for one process and does nothing else. `command` ("run", "bench decode") names the
 * command in the hint of a rank count mismatch. Returns CLI_EXIT_OK; CLI_EXIT_USAGE after one
 * line on stderr when the tool was built without MPI, or (from rank 0) when mpirun started
 * another number of ranks; CLI_EXIT_FAILURE after "acg: starting MPI for --tp: <detail>".
 * Whatever it returns, bench_ranks_leave undoes it. */
int bench_ranks_join(bench_ranks *r, uint64_t tp, const char *command);

/* The device spec to open: `backend` (--backend) when given, with one rank, or with
 * $ACG_DEVICE set (NULL then means acg_device_open's default); else, since a model split over
 * ranks needs collectives, the first backend whose device 0 has them, an accelerator before
 * the cpu backend. */
const char *bench_ranks_device(const bench_ranks *r, const char *backend);

/* Leaves the ranks' group (after every user of r->comm is gone); rc is the command's exit
 * status so far. MPI is finalized only where every rank ends alike (CLI_EXIT_OK, or the
 * CLI_EXIT_USAGE every rank got), since finalizing waits for every rank: a rank that failed
 * alone exits as it is, and mpirun ends the others. */
void bench_ranks_leave(bench_ranks *r, int rc);

/* Whether this process prints its report: rank 0 (the only one without --tp). */
bool bench_ranks_prints(const bench_ranks *r);

/* cli_fail and cli_failf, naming the rank ("acg: rank R: <what>: ...") when there are several:
 * each rank reports its own failures. Return CLI_EXIT_FAILURE. */
int bench_ranks_fail(const bench_ranks *r, acg_status status, const char *what);
int bench_ranks_failf(const bench_ranks *r, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- benchmarks ------------------------------------------------------------------------------ */

/* bench/launch.c: eager launches against graph replay of the same launches. */
int bench_launch(int argc, char **argv);
extern const char bench_launch_usage[];

/* bench/stage.c: attention plans through the pinned stager: plans per second, and per plan the
 * copies, host waits and temporary device allocations. */
int bench_stage(int argc, char **argv);
extern const char bench_stage_usage[];

/* bench/decode.c: decode steps of the reference model, graphs on against graphs off, per batch
 * size: step time and tokens per second; with --tp N split over ranks, and what a step's
 * allreduces cost. */
int bench_decode(int argc, char **argv);
extern const char bench_decode_usage[];

/* bench/split.c: a kernel split over the cpu backend's thread pool against run whole, per
 * amount of work: the pool's dispatch cost and where splitting starts to pay. */
int bench_split(int argc, char **argv);
extern const char bench_split_usage[];

#endif /* ACG_BENCH_H */
