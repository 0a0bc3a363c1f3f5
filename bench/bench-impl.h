/*
 * bench-impl.h — what the benchmarks share among themselves: the options and the device every
 * bench takes, what the machine can do, and the entry points the registry lists. The tool
 * includes bench.h (and ranks.h), never this.
 *
 * Besides opening the device, none of these helpers allocates, but the measurements of the
 * machine below.
 */
#ifndef ACG_BENCH_IMPL_H
#define ACG_BENCH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <acg/acg.h>

#include "bench.h"
#include "tool_cli.h"
#include "tool_report.h"

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
 * status the bench returns at once: TOOL_EXIT_OK after --help wrote c->usage to stdout,
 * TOOL_EXIT_USAGE after a usage error (--backend without a value) on stderr. */
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
 * '<arg>'", or "unknown argument" when it does not begin with '-'). Returns TOOL_EXIT_USAGE. */
int bench_unknown_argument(const bench_common *c, const char *arg);

/* Opens the device c->backend names; its capability goes to *cap (either may be NULL).
 * Returns TOOL_EXIT_OK, or TOOL_EXIT_FAILURE after "acg: opening device '<spec>': <detail>"
 * ("the default device" when c->backend is NULL). */
int bench_device_open(const bench_common *c, acg_device **dev, const acg_capability **cap);

/* Closes dev (NULL: nothing). Returns rc, unless rc is TOOL_EXIT_OK and closing fails: then
 * TOOL_EXIT_FAILURE after the error line, since a teardown failure after a good run is a bug. */
int bench_device_close(acg_device *dev, int rc);

/* Prints the first line of a table report: "acg <name> on <spec> (<device name>)". */
void bench_print_title(const bench_common *c, const acg_device *dev);

/* Writes the device's members into the current JSON object: "backend", "device" (the spec)
 * and "device_name". */
void bench_json_device(tool_json *j, const acg_device *dev);

/* ---- what the machine can do (bench/machine.c) -----------------------------------------------
 * Measured in the same run as the figures they are read against, on `threads` host threads
 * (at most BENCH_MAX_THREADS): the median of five passes each. NaN when memory or a thread is
 * missing. These allocate (a buffer of `bytes`). */

#define BENCH_MAX_THREADS 64

/* GB/s of reading `bytes` of host memory once, each thread its contiguous share. */
double bench_read_bandwidth(size_t bytes, unsigned threads);
/* GB/s of reading n_regions buffers of sizes[i] bytes (each allocated on its own, as a device
 * buffer is) the way a decode step's matmuls read their weights at small batches: each thread
 * streams its share of each buffer in turn, every thread on its own from buffer to buffer, the
 * threads started once; the median of passes run back to back, as steps follow one another. */
double bench_read_bandwidth_split(const size_t *sizes, size_t n_regions, unsigned threads);
/* GFLOP/s of independent fused multiply-adds at the widest SIMD level the CPU has (named in
 * *level: "avx512", "avx2" or "scalar"), counting an FMA as two operations. */
double bench_fma_peak(unsigned threads, const char **level);

/* ---- the benchmarks: each one file, one row of the registry (bench/registry.c) -------------- */

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

#endif /* ACG_BENCH_IMPL_H */
