/*
 * bench.h — the benchmarks of the acg tool, as a library (the acg_bench target): one registry
 * that `acg bench <name>`, `acg bench --help` and `acg --help` walk.
 *
 * A benchmark is one file bench/<name>.c with one entry point `int bench_<name>(argc, argv)`
 * (argv[0] is the benchmark's name) and one row in the registry (bench/registry.c). Benchmarks
 * print a table by default and one JSON object with --json, and exit like every acg command
 * (tools/support/tool_cli.h): 0, 1 after one line "acg: <what>: <detail>", 2 after a usage
 * error. They use the tools' support library and nothing of tools/acg.
 */
#ifndef ACG_BENCH_H
#define ACG_BENCH_H

#include "tool_cli.h"

/* The benchmarks, in the order the help lists them, ended by an entry whose name is NULL. */
extern const tool_command bench_registry[];

#endif /* ACG_BENCH_H */
