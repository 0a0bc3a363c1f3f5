/*
 * registry.c — the benchmarks `acg bench <name>` runs: one row per bench/<name>.c.
 */
#include "bench-impl.h"

const tool_command bench_registry[] = {
    {"launch", bench_launch, bench_launch_usage,
     "eager kernel launches against replaying them as one graph", NULL},
    {"stage", bench_stage, bench_stage_usage,
     "attention plans per second, and copies, host waits and allocations per plan", NULL},
    {"decode", bench_decode, bench_decode_usage,
     "decode steps of the reference model per batch size, graphs on against graphs off", NULL},
    {"split", bench_split, bench_split_usage,
     "a kernel split over the cpu thread pool against run whole, per amount of work", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
