/*
 * main.c — the acg command-line tool: the table of its commands, and dispatch through it and
 * through the bench library's registry.
 *
 * Exit status: 0 on success, 1 when something failed (one line "acg: <what failed>: <detail>"
 * on stderr) — standard output that could not be written included, which main checks once for
 * every command — 2 for a bad command line (the problem and the usage lines on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <acg/acg.h>

#include "bench.h"
#include "commands.h"
#include "tool_cli.h"

#define ACG_STR_(x) #x
#define ACG_STR(x) ACG_STR_(x)
#define ACG_VERSION_STRING                                                                         \
    ACG_STR(ACG_VERSION_MAJOR) "." ACG_STR(ACG_VERSION_MINOR) "." ACG_STR(ACG_VERSION_PATCH)

static int cmd_bench(int argc, char **argv);
static int cmd_help(int argc, char **argv);

/* The commands, in the order the help and the usage list them. A new command is one file
 * (commands.h) and one row here. */
static const tool_command commands[] = {
    {"info", cmd_info, cmd_info_usage, "backends compiled in, their devices and capabilities",
     NULL},
    {"run", cmd_run, cmd_run_usage,
     "generate text with the reference model (default: the small preset)", NULL},
    {"graph", cmd_graph, cmd_graph_usage,
     "write the graphs the reference model captured, as DOT or SVG (--list: its buckets)", NULL},
    {"bench", cmd_bench, NULL, "run a benchmark; --help after NAME for its options",
     bench_registry},
    {"help", cmd_help, "usage: acg help | --version\n", "this text (--version: the version)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- acg bench NAME -------------------------------------------------------------------------- */

static int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && tool_is_help(argv[1])) {
        bool first = true;
        tool_command_usage(stdout, bench_registry, &first);
        return TOOL_EXIT_OK;
    }
    if (argc < 2) {
        return tool_command_usage_error(bench_registry, "bench: which benchmark?");
    }
    const tool_command *bench = tool_command_find(bench_registry, argv[1]);
    if (bench == NULL) {
        return tool_command_usage_error(bench_registry, "bench: unknown benchmark '%s'", argv[1]);
    }
    return bench->run(argc - 1, argv + 1);
}

/* ---- acg help -------------------------------------------------------------------------------- */

/* One line per command of table, a command with subcommands as "name NAME". */
static void print_briefs(const tool_command *table) {
    for (const tool_command *c = table; c->name; c++) {
        char name[32];
        snprintf(name, sizeof name, "%s%s", c->name, c->sub ? " NAME" : "");
        printf("  %-12s  %s\n", name, c->brief);
    }
}

static int cmd_help(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        return tool_command_usage_error(commands, "help takes no arguments");
    }
    printf("acg %s: capture kernel launches once, replay them as one graph, on any "
           "accelerator.\n\n",
           ACG_VERSION_STRING);
    bool first = true;
    tool_command_usage(stdout, commands, &first);
    printf("\ncommands:\n");
    print_briefs(commands);
    for (const tool_command *c = commands; c->name; c++) {
        if (c->sub) {
            printf("\nacg %s NAME:\n", c->name);
            print_briefs(c->sub);
        }
    }
    printf("\nenvironment: ACG_LOG=error|warn|info|debug sets the library's log level.\n");
    return TOOL_EXIT_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        return tool_command_usage_error(commands, "which command?");
    }
    const char *name = tool_is_help(argv[1]) ? "help" : argv[1];
    if (strcmp(name, "--version") == 0) {
        if (argc > 2) {
            return tool_command_usage_error(commands, "--version takes no arguments");
        }
        printf("acg %s\n", ACG_VERSION_STRING);
        return TOOL_EXIT_OK;
    }
    const tool_command *c = tool_command_find(commands, name);
    if (c != NULL) {
        return c->run(argc - 1, argv + 1);
    }
    if (name[0] == '-') {
        return tool_command_usage_error(commands, "unknown option '%s'", name);
    }
    return tool_command_usage_error(commands, "unknown command '%s'", name);
}

/* Every command's text goes to stdout through the C library's buffer, so a failed write (a full
 * disk, a closed pipe's EPIPE) may surface only at the flush: checked here, once, for all of
 * them. A command that failed already reported its failure (a JSON report's failed write among
 * them), which is the one line said. */
int main(int argc, char **argv) {
    int rc = dispatch(argc, argv);
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) {
        return rc;
    }
    if (rc == TOOL_EXIT_OK) {
        rc = tool_failf("writing standard output", "%s", strerror(errno != 0 ? errno : EIO));
    }
    return rc;
}
