/*
 * cli.h — what the files of the acg command-line tool share: the exit codes, the way a failure
 * or a usage error is reported, option parsing, and the subcommands' entry points.
 *
 * Every subcommand is `int cmd(int argc, char **argv)` with argv[0] its own name, and returns
 * the process's exit status.
 */
#ifndef ACG_CLI_H
#define ACG_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <acg/acg.h>

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILURE = 1, /* a call failed: "acg: <what failed>: <detail>" on stderr */
    CLI_EXIT_USAGE = 2,   /* bad command line: the problem and the usage line on stderr */
};

/* Reports a failed library call: "acg: <what>: <acg_last_error()>" (the status's text when the
 * library left no detail). Returns CLI_EXIT_FAILURE. */
int cli_fail(acg_status status, const char *what);

/* Reports a failure that is not a library call: "acg: <what>: <printf detail>".
 * Returns CLI_EXIT_FAILURE. */
int cli_failf(const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Reports a usage error: "acg: <printf problem>", then usage on stderr.
 * Returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *usage, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* True when argv[*i] is "-h" or "--help". */
bool cli_is_help(const char *arg);

/* Matches option `name` ("--kernels") at argv[*i], written "--kernels N" or "--kernels=N".
 * Returns 0 when argv[*i] is another option, 1 when it matched (*value set, *i advanced past a
 * separate value), -1 when the value is missing. */
int cli_option(int argc, char **argv, int *i, const char *name, const char **value);

/* Parses a decimal whole number in [min, max] with the library's one parser (digits only: no
 * sign, blank or trailing text; overflow refused). False for anything else. */
bool cli_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a finite decimal number in [min, max], or (min, max] when above_min: an optional '-',
 * digits, an optional fraction and exponent; no blank, '+', trailing text, hex, nan or inf.
 * False for anything else. */
bool cli_parse_double(const char *text, double min, double max, bool above_min, double *out);

/* Parses the value text (NULL when missing) of the numeric option `name`. When it is malformed
 * or out of range, reports the range it was checked against as a usage error, "<who><name>
 * takes a whole number in [min, max]" (cli_option_double: "a number in [min, max]", or "(min,
 * max]"), who beginning the message ("bench launch: " or ""), so the message and the check
 * never disagree. Returns CLI_EXIT_OK with *out set, or CLI_EXIT_USAGE. */
int cli_option_u64(const char *usage, const char *who, const char *name, const char *text,
                   uint64_t min, uint64_t max, uint64_t *out);
int cli_option_double(const char *usage, const char *who, const char *name, const char *text,
                      double min, double max, bool above_min, double *out);

/* tools/acg/info.c: the backends compiled in, their devices and capabilities. */
int cli_info(int argc, char **argv);
extern const char cli_info_usage[];

/* tools/acg/run.c: the reference model generating text with continuous batching. */
int cli_run(int argc, char **argv);
extern const char cli_run_usage[];

#endif /* ACG_CLI_H */
