/*
 * commands.h — the commands of the acg tool. Each is one file tools/acg/<name>.c with one
 * entry point `int cmd_<name>(argc, argv)` (argv[0] is the command's name) and its usage
 * lines, and one row in the table of tools/acg/main.c. The benchmarks under `acg bench` are
 * the bench library's (bench/bench.h); the helpers every command uses are the tools' support
 * library's (tools/support).
 */
#ifndef ACG_TOOL_COMMANDS_H
#define ACG_TOOL_COMMANDS_H

/* tools/acg/info.c: the backends compiled in, their devices and capabilities. */
int cmd_info(int argc, char **argv);
extern const char cmd_info_usage[];

/* tools/acg/run.c: the reference model generating text with continuous batching. */
int cmd_run(int argc, char **argv);
extern const char cmd_run_usage[];

/* tools/acg/graph.c: the reference model's captured graphs as Graphviz DOT or SVG. */
int cmd_graph(int argc, char **argv);
extern const char cmd_graph_usage[];

#endif /* ACG_TOOL_COMMANDS_H */
