/*
 * main.c — the acg command-line tool: subcommand dispatch and the helpers every subcommand
 * uses to report failures and parse options.
 *
 * Exit status: 0 on success, 1 when something failed (one line "acg: <what failed>: <detail>"
 * on stderr), 2 for a bad command line (the problem and the usage line on stderr).
 */
#include "bench.h"
#include "cli.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/acg.h>

#include "core/export/acg-layer.h" /* acg__parse_u64 */

#define ACG_STR_(x) #x
#define ACG_STR(x) ACG_STR_(x)
#define ACG_VERSION_STRING                                                                         \
    ACG_STR(ACG_VERSION_MAJOR) "." ACG_STR(ACG_VERSION_MINOR) "." ACG_STR(ACG_VERSION_PATCH)

/* ---- benchmarks: one row per bench/<name>.c ------------------------------------------------- */

typedef struct bench_entry {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *brief;
} bench_entry;

static const bench_entry benches[] = {
    {"launch", bench_launch, bench_launch_usage,
     "eager kernel launches against replaying them as one graph"},
    {"stage", bench_stage, bench_stage_usage,
     "attention plans per second, and copies, host waits and allocations per plan"},
    {"decode", bench_decode, bench_decode_usage,
     "decode steps of the reference model per batch size, graphs on against graphs off"},
    {"split", bench_split, bench_split_usage,
     "a kernel split over the cpu thread pool against run whole, per amount of work"},
};

#define N_BENCHES (sizeof benches / sizeof benches[0])

static const char usage_text[] =
    "usage: acg info [--json]\n"
    "       acg run [--backend B] [--model FILE --tokenizer FILE | --preset tiny|small]\n"
    "               [--prompt TEXT] [--prompts FILE] [--steps N] [--temperature T] [--top-p P]\n"
    "               [--seed S] [--batch N] [--graphs on|off|require] [--verify] [--json]\n"
    "               [--tp N (under mpirun -np N)]\n"
    "       acg bench launch [--backend B] [--kernels N] [--steps S] [--elements E] [--json]\n"
    "       acg bench stage [--backend B] [--plans N] [--json]\n"
    "       acg bench decode [--backend B] [--tp N] [--preset P | --model F] [--batch 1,8,32]\n"
    "                        [--steps N] [--json]\n"
    "       acg bench split [--backend B] [--launches N] [--steps S] [--json]\n"
    "       acg help | --version\n";

/* ---- reporting ------------------------------------------------------------------------------- */

int cli_fail(acg_status status, const char *what) {
    const char *detail = acg_last_error();
    if (!detail || !detail[0])
        detail = acg_status_string(status);
    fprintf(stderr, "acg: %s: %s\n", what, detail);
    return CLI_EXIT_FAILURE;
}

int cli_failf(const char *what, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "acg: %s: ", what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_FAILURE;
}

int cli_usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    fputs("acg: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(usage, stderr);
    return CLI_EXIT_USAGE;
}

/* ---- option parsing -------------------------------------------------------------------------- */

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_option(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0)
        return 0;
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *i += 1;
    *value = argv[*i];
    return 1;
}

bool cli_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    return acg__parse_u64(text, min, max, out) == ACG_OK;
}

/* A decimal number as people write one: an optional '-', digits with an optional fraction, an
 * optional exponent. strtod alone would also take blanks, '+', hex, "nan" and "inf". */
static bool is_decimal(const char *p) {
    size_t digits = 0;
    if (*p == '-')
        p++;
    for (; isdigit((unsigned char)*p); p++)
        digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            digits++;
    if (digits == 0)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

bool cli_parse_double(const char *text, double min, double max, bool above_min, double *out) {
    if (!text || !is_decimal(text))
        return false;
    double v = strtod(text, NULL);
    if (!isfinite(v) || (above_min ? !(v > min) : !(v >= min)) || !(v <= max))
        return false;
    *out = v;
    return true;
}

int cli_option_u64(const char *usage, const char *who, const char *name, const char *text,
                   uint64_t min, uint64_t max, uint64_t *out) {
    if (cli_parse_u64(text, min, max, out))
        return CLI_EXIT_OK;
    return cli_usage_error(usage, "%s%s takes a whole number in [%llu, %llu]", who, name,
                           (unsigned long long)min, (unsigned long long)max);
}

int cli_option_double(const char *usage, const char *who, const char *name, const char *text,
                      double min, double max, bool above_min, double *out) {
    if (cli_parse_double(text, min, max, above_min, out))
        return CLI_EXIT_OK;
    /* %.15g writes every value a person would type back exactly, and no trailing zeros. */
    return cli_usage_error(usage, "%s%s takes a number in %c%.15g, %.15g]", who, name,
                           above_min ? '(' : '[', min, max);
}

/* ---- subcommands ----------------------------------------------------------------------------- */

static void print_help(void) {
    printf("acg %s: capture kernel launches once, replay them as one graph, on any "
           "accelerator.\n\n",
           ACG_VERSION_STRING);
    fputs(usage_text, stdout);
    printf("\ncommands:\n"
           "  info          backends compiled in, their devices and capabilities\n"
           "  run           generate text with the reference model (default: the small preset)\n"
           "  bench NAME    run a benchmark; --help after NAME for its options\n"
           "  help          this text\n"
           "  --version     the version\n"
           "\nbenchmarks:\n");
    for (size_t i = 0; i < N_BENCHES; i++)
        printf("  %-12s  %s\n", benches[i].name, benches[i].brief);
    printf("\nenvironment: ACG_LOG=error|warn|info|debug sets the library's log level.\n");
}

/* The usage lines of every benchmark. */
static void print_bench_usage(FILE *out) {
    for (size_t i = 0; i < N_BENCHES; i++)
        fputs(benches[i].usage, out);
}

static int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && cli_is_help(argv[1])) {
        print_bench_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc >= 2) {
        for (size_t i = 0; i < N_BENCHES; i++)
            if (strcmp(argv[1], benches[i].name) == 0)
                return benches[i].run(argc - 1, argv + 1);
        fprintf(stderr, "acg: bench: unknown benchmark '%s'\n", argv[1]);
    } else {
        fprintf(stderr, "acg: bench: which benchmark?\n");
    }
    print_bench_usage(stderr);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return cli_usage_error(usage_text, "which command?");
    const char *cmd = argv[1];
    if (strcmp(cmd, "info") == 0)
        return cli_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || cli_is_help(cmd)) {
        if (argc > 2)
            return cli_usage_error(usage_text, "help takes no arguments");
        print_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        if (argc > 2)
            return cli_usage_error(usage_text, "--version takes no arguments");
        printf("acg %s\n", ACG_VERSION_STRING);
        return CLI_EXIT_OK;
    }
    if (cmd[0] == '-')
        return cli_usage_error(usage_text, "unknown option '%s'", cmd);
    return cli_usage_error(usage_text, "unknown command '%s'", cmd);
}
