/*
 * tool_cli.h — the command line of acg's tools: exit codes, how a failure or a usage error is
 * reported, option and number parsing, tables of commands, and the files a command writes.
 *
 * Part of the tools' support library (tools/support, the acg_tool_support target), which the
 * tool (tools/acg) and the benchmarks (bench/) both use; it includes neither of them.
 *
 * Every command is `int run(int argc, char **argv)` with argv[0] its own name, and returns the
 * process's exit status. Reports go to stderr and begin "acg: ". Nothing here allocates (but
 * the C library's stream of an open output file).
 */
#ifndef ACG_TOOL_CLI_H
#define ACG_TOOL_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <acg/acg.h>

#if defined(__GNUC__)
#define TOOL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TOOL_PRINTF(fmt, args)
#endif

enum {
    TOOL_EXIT_OK = 0,
    TOOL_EXIT_FAILURE = 1, /* something failed: "acg: <what failed>: <detail>" on stderr */
    TOOL_EXIT_USAGE = 2,   /* bad command line: the problem and the usage lines on stderr */
};

/* ---- reporting ------------------------------------------------------------------------------- */

/* Reports a failed library call: "acg: <what>: <acg_last_error()>" (the status's text when the
 * library left no detail). Returns TOOL_EXIT_FAILURE. */
int tool_fail(acg_status status, const char *what);

/* Reports a failure that is not a library call: "acg: <what>: <printf detail>".
 * Returns TOOL_EXIT_FAILURE. */
int tool_failf(const char *what, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* Reports a usage error: "acg: <printf problem>", then usage on stderr.
 * Returns TOOL_EXIT_USAGE. */
int tool_usage_error(const char *usage, const char *fmt, ...) TOOL_PRINTF(2, 3);

struct tool_command;

/* tool_usage_error with the usage lines of a table of commands (tool_command_usage). */
int tool_command_usage_error(const struct tool_command *table, const char *fmt, ...)
    TOOL_PRINTF(2, 3);

/* ---- options --------------------------------------------------------------------------------- */

/* True when arg is "-h" or "--help". */
bool tool_is_help(const char *arg);

/* Matches option `name` ("--kernels") at argv[*i], written "--kernels N" or "--kernels=N".
 * Returns 0 when argv[*i] is another option, 1 when it matched (*value set, *i advanced past a
 * separate value), -1 when the value is missing. */
int tool_option(int argc, char **argv, int *i, const char *name, const char **value);

/* Parses a decimal whole number in [min, max] with the library's one parser (digits only: no
 * sign, blank or trailing text; overflow refused). False for anything else, NULL included. */
bool tool_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a finite decimal number in [min, max], or (min, max] when above_min: an optional '-',
 * digits, an optional fraction and exponent; no blank, '+', trailing text, hex, nan or inf.
 * False for anything else, NULL included. */
bool tool_parse_double(const char *text, double min, double max, bool above_min, double *out);

/* Parses the value text (NULL when missing) of the numeric option `name`. When it is malformed
 * or out of range, reports the range it was checked against as a usage error, "<who><name>
 * takes a whole number in [min, max]" (tool_option_double: "a number in [min, max]", or "(min,
 * max]"), who beginning the message ("bench launch: " or ""), so the message and the check
 * never disagree. Returns TOOL_EXIT_OK with *out set, or TOOL_EXIT_USAGE. */
int tool_option_u64(const char *usage, const char *who, const char *name, const char *text,
                    uint64_t min, uint64_t max, uint64_t *out);
int tool_option_double(const char *usage, const char *who, const char *name, const char *text,
                       double min, double max, bool above_min, double *out);

/* The options that name the reference model of a command (acg run, acg graph): --model FILE
 * with --tokenizer FILE, or --preset NAME, never both; neither means the "small" preset.
 * Returns TOOL_EXIT_OK with *preset set to "small" when neither was given, or TOOL_EXIT_USAGE
 * after "--model and --tokenizer go together" or "--preset and --model exclude each other". */
int tool_model_options(const char *usage, const char *model, const char *tokenizer,
                       const char **preset);

/* ---- tables of commands -----------------------------------------------------------------------
 * A table is an array of tool_command ended by an entry whose name is NULL. A command with
 * `sub` set runs one of the commands of that table, named by its first argument ("acg bench
 * launch"). */

typedef struct tool_command {
    const char *name;                  /* the word that runs it: "info", "launch" */
    int (*run)(int argc, char **argv); /* argv[0] is name; returns the exit status */
    const char *usage;                 /* "usage: acg info [--json]\n"; NULL with sub */
    const char *brief;                 /* one line for the help */
    const struct tool_command *sub;    /* its commands, or NULL */
} tool_command;

/* The command of table named name; NULL when there is none. */
const tool_command *tool_command_find(const tool_command *table, const char *name);

/* Writes the usage lines of every command of table (a command with sub: those of sub's) to
 * out, one block under the other: the first line as it is ("usage: acg ..."), every later
 * "usage: " as blanks of its width, so the blocks line up. *first says whether nothing was
 * written yet, and becomes false once something is. */
void tool_command_usage(FILE *out, const tool_command *table, bool *first);

/* ---- output files -----------------------------------------------------------------------------
 * Every file a command writes (a graph's DOT or SVG, a trace) goes through tool_output, so the
 * same rules hold for all of them. What is at the path decides how it is written:
 *   - nothing, or a regular file: the bytes go to a temporary file in the same directory
 *     (".<name>.XXXXXX", created with the permissions a new file gets under the umask), which
 *     is synced to the disk and renamed over the name once whole: the file is written whole or
 *     not at all, and a failure removes the temporary file;
 *   - a symbolic link: the link stays; the file it names (through every link of a chain, as
 *     opening it would) is the one written by the rule above, so a link whose file does not
 *     exist yet gets that file created, as a shell's `>` would;
 *   - any other existing file (a FIFO, a character device, /dev/stdout): opened and written in
 *     place, with no temporary file and no rename; a write that fails there (ENOSPC on a full
 *     device, EPIPE) is reported like any other.
 * An empty name, a directory, and a name ending in '/' are refused. Every failure is one line on
 * stderr, "acg: <what>: '<path>': <reason>" (the path as given, the reason strerror's), and
 * TOOL_EXIT_FAILURE. */

#define TOOL_OUTPUT_PATH_MAX 4096 /* the longest name handled, its terminating NUL included */

typedef struct tool_output {
    FILE *f;          /* written to between open and commit; NULL when nothing is open */
    const char *what; /* the reports' "<what>" ("writing a graph"); a string that outlives o */
    char path[TOOL_OUTPUT_PATH_MAX];   /* the name given: what reports name */
    char target[TOOL_OUTPUT_PATH_MAX]; /* the name written: path, or where its links lead */
    char tmp[TOOL_OUTPUT_PATH_MAX];    /* the temporary file while it exists, else "" */
} tool_output;

/* Opens path for writing under the rules above: the temporary file is created now (or the FIFO
 * or device opened, which for a FIFO waits for its reader), so a bad place fails before any
 * work. Returns TOOL_EXIT_OK with o->f set, or TOOL_EXIT_FAILURE after the report, with nothing
 * open and nothing created. */
int tool_output_open(tool_output *o, const char *what, const char *path);

/* Finishes o: flushes and checks every write, then closes, and for a temporary file syncs it
 * and renames it over o->target. Returns TOOL_EXIT_OK; or TOOL_EXIT_FAILURE after the report,
 * the temporary file removed. Either way nothing is left open; o->path stays readable. */
int tool_output_commit(tool_output *o);

/* Closes o and removes its temporary file, if any, writing nothing into place: what a failed
 * command does with its outputs. A zeroed, committed or abandoned o: nothing to do. */
void tool_output_abandon(tool_output *o);

#endif /* ACG_TOOL_CLI_H */
