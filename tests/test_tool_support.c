/*
 * test_tool_support.c — the tools' support library (tools/support): the JSON writer and its
 * detected misuse, the table printer, the median and the least-squares line, option and number
 * parsing, failure and usage reports, and tables of commands.
 */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool_cli.h"
#include "tool_report.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Reads what was written to f (a tmpfile) into text, NUL-terminated, and closes f. */
static void read_back(FILE *f, char *text, size_t size) {
    assert_int_equal(fflush(f), 0);
    rewind(f);
    size_t n = fread(text, 1, size - 1, f);
    text[n] = '\0';
    fclose(f);
}

/* Points stderr at a temporary file until capture_end, which reads it into text. */
typedef struct capture {
    FILE *file;
    int saved_fd;
} capture;

static void capture_begin(capture *c) {
    fflush(stderr);
    c->file = tmpfile();
    assert_non_null(c->file);
    c->saved_fd = dup(STDERR_FILENO);
    assert_true(c->saved_fd >= 0);
    assert_true(dup2(fileno(c->file), STDERR_FILENO) >= 0);
}

static void capture_end(capture *c, char *text, size_t size) {
    fflush(stderr);
    assert_true(dup2(c->saved_fd, STDERR_FILENO) >= 0);
    close(c->saved_fd);
    read_back(c->file, text, size);
}

/* What was written to f (a tmpfile, closed) is exactly want. */
static void expect_written(FILE *f, const char *want) {
    char text[1024];
    read_back(f, text, sizeof text);
    assert_string_equal(text, want);
}

/* Runs call (an int expression) with stderr captured: it must return want_rc, and what it wrote
 * to stderr must be exactly want. */
#define EXPECT_REPORT(want_rc, want, call)                                                         \
    do {                                                                                           \
        capture c_;                                                                                \
        capture_begin(&c_);                                                                        \
        int rc_ = (call);                                                                          \
        expect_report_(&c_, rc_, (want_rc), (want));                                               \
    } while (0)

static void expect_report_(capture *c, int rc, int want_rc, const char *want) {
    char err[1024];
    capture_end(c, err, sizeof err);
    assert_int_equal(rc, want_rc);
    assert_string_equal(err, want);
}

/* A writer of a fresh tmpfile, which it returns (for read_back). */
static FILE *json_on_tmpfile(tool_json *j) {
    FILE *f = tmpfile();
    assert_non_null(f);
    tool_json_begin(j, f);
    return f;
}

/* ---- JSON writer ----------------------------------------------------------------------------- */

/* Every kind of value, nested, with commas, escapes and null for what JSON cannot hold. */
static void test_json_writes_values(void **state) {
    (void)state;
    tool_json j;
    FILE *f = json_on_tmpfile(&j);
    tool_json_object_begin(&j, NULL);
    tool_json_string(&j, "s", "a\"b\\c\n\t\x01\xff");
    tool_json_string(&j, "none", NULL);
    tool_json_number(&j, "x", 1.5);
    tool_json_number(&j, "nan", NAN);
    tool_json_number(&j, "inf", INFINITY);
    tool_json_int(&j, "i", -7);
    tool_json_uint(&j, "u", UINT64_MAX);
    tool_json_bool(&j, "yes", true);
    tool_json_null(&j, "nil");
    tool_json_array_begin(&j, "list");
    tool_json_int(&j, NULL, 1);
    tool_json_object_begin(&j, NULL);
    tool_json_object_end(&j);
    tool_json_array_begin(&j, NULL);
    tool_json_array_end(&j);
    tool_json_array_end(&j);
    tool_json_object_end(&j);
    assert_int_equal(tool_json_end(&j), TOOL_EXIT_OK);
    assert_null(j.error);
    expect_written(f, "{\"s\": \"a\\\"b\\\\c\\n\\t\\u0001\\ufffd\", \"none\": null, "
                      "\"x\": 1.5, \"nan\": null, \"inf\": null, \"i\": -7, "
                      "\"u\": 18446744073709551615, \"yes\": true, \"nil\": null, "
                      "\"list\": [1, {}, []]}\n");
}

/* Fixed-point numbers are exact, whatever their size or sign; more than 9 decimals is a misuse. */
static void test_json_fixed(void **state) {
    (void)state;
    tool_json j;
    FILE *f = json_on_tmpfile(&j);
    tool_json_array_begin(&j, NULL);
    tool_json_fixed(&j, NULL, 1234567, 3);
    tool_json_fixed(&j, NULL, -5, 3);
    tool_json_fixed(&j, NULL, 0, 3);
    tool_json_fixed(&j, NULL, 42, 0);
    tool_json_fixed(&j, NULL, INT64_MIN, 9);
    tool_json_fixed(&j, NULL, 123456789012345678, 9);
    tool_json_array_end(&j);
    assert_int_equal(tool_json_end(&j), TOOL_EXIT_OK);
    expect_written(f, "[1234.567, -0.005, 0.000, 42, -9223372036.854775808, "
                      "123456789.012345678]\n");

    f = json_on_tmpfile(&j);
    tool_json_array_begin(&j, NULL);
    tool_json_fixed(&j, NULL, 1, 10);
    tool_json_array_end(&j);
    EXPECT_REPORT(TOOL_EXIT_FAILURE,
                  "acg: writing the JSON report: more than 9 decimals of a fixed-point number\n",
                  tool_json_end(&j));
    expect_written(f, "[");
}

/* TOOL_JSON_MAX_DEPTH levels are written whole. */
static void test_json_nesting_at_limit(void **state) {
    (void)state;
    tool_json j;
    FILE *f = json_on_tmpfile(&j);
    for (int d = 0; d < TOOL_JSON_MAX_DEPTH; d++) {
        tool_json_array_begin(&j, NULL);
    }
    tool_json_int(&j, NULL, 42);
    for (int d = 0; d < TOOL_JSON_MAX_DEPTH; d++) {
        tool_json_array_end(&j);
    }
    assert_int_equal(tool_json_end(&j), TOOL_EXIT_OK);
    char want[256];
    snprintf(want, sizeof want, "%.*s42%.*s\n", TOOL_JSON_MAX_DEPTH,
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", TOOL_JSON_MAX_DEPTH,
             "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    expect_written(f, want);
}

/* One level more is an error: nothing more is written, and the end call fails with the reason
 * on stderr. */
static void test_json_nesting_past_limit(void **state) {
    (void)state;
    tool_json j;
    FILE *f = json_on_tmpfile(&j);
    for (int d = 0; d < TOOL_JSON_MAX_DEPTH; d++) {
        tool_json_object_begin(&j, d == 0 ? NULL : "k");
    }
    tool_json_object_begin(&j, "deeper");
    assert_non_null(j.error);
    /* Everything after the failure is ignored, closing calls included. */
    tool_json_number(&j, "x", 1.0);
    for (int d = 0; d <= TOOL_JSON_MAX_DEPTH; d++) {
        tool_json_object_end(&j);
    }
    EXPECT_REPORT(TOOL_EXIT_FAILURE,
                  "acg: writing the JSON report: nesting deeper than 16 levels\n",
                  tool_json_end(&j));
    char text[256];
    read_back(f, text, sizeof text);
    assert_int_equal(strncmp(text, "{\"k\": {\"k\": {", 13), 0);
    assert_null(strstr(text, "deeper"));
    assert_null(strchr(text, '}'));
    assert_null(strchr(text, '\n'));
}

/* Each misuse of the writer, and the error it is reported as. */
typedef enum misuse {
    KEY_OUTSIDE,
    NO_KEY_IN_OBJECT,
    KEY_IN_ARRAY,
    OBJECT_END_UNOPENED,
    ARRAY_END_UNOPENED,
    OBJECT_END_IN_ARRAY,
    ARRAY_END_IN_OBJECT,
    SECOND_VALUE,
    LEFT_OPEN,
    NOTHING,
    N_MISUSES
} misuse;

static const char *const misuse_errors[N_MISUSES] = {
    "a key given for the outermost value",
    "a value without a key inside an object",
    "a key given inside an array",
    "an object ended that was never begun",
    "an array ended that was never begun",
    "an object ended where an array is open",
    "an array ended where an object is open",
    "a second value after the outermost one",
    "an object or array was left open",
    "no value was written",
};

static void misuse_writer(tool_json *j, misuse m) {
    switch (m) {
    case KEY_OUTSIDE:
        tool_json_object_begin(j, "k");
        break;
    case NO_KEY_IN_OBJECT:
        tool_json_object_begin(j, NULL);
        tool_json_int(j, NULL, 1);
        break;
    case KEY_IN_ARRAY:
        tool_json_array_begin(j, NULL);
        tool_json_bool(j, "k", true);
        break;
    case OBJECT_END_UNOPENED:
        tool_json_object_end(j);
        break;
    case ARRAY_END_UNOPENED:
        tool_json_array_end(j);
        break;
    case OBJECT_END_IN_ARRAY:
        tool_json_array_begin(j, NULL);
        tool_json_object_end(j);
        break;
    case ARRAY_END_IN_OBJECT:
        tool_json_object_begin(j, NULL);
        tool_json_array_end(j);
        break;
    case SECOND_VALUE:
        tool_json_uint(j, NULL, 1);
        tool_json_string(j, NULL, "two");
        break;
    case LEFT_OPEN:
        tool_json_object_begin(j, NULL);
        tool_json_null(j, "k");
        break;
    case NOTHING:
    case N_MISUSES:
        break;
    }
}

static void test_json_misuse(void **state) {
    (void)state;
    for (int m = 0; m < N_MISUSES; m++) {
        tool_json j;
        FILE *f = json_on_tmpfile(&j);
        misuse_writer(&j, (misuse)m);
        char want[256];
        snprintf(want, sizeof want, "acg: writing the JSON report: %s\n", misuse_errors[m]);
        EXPECT_REPORT(TOOL_EXIT_FAILURE, want, tool_json_end(&j));
        char text[64];
        read_back(f, text, sizeof text);
        assert_null(strchr(text, '\n')); /* the line is never ended as if it were whole */
    }
}

/* A write the stream refuses fails the end call. */
static void test_json_write_failure(void **state) {
    (void)state;
    FILE *f = fopen("/dev/full", "w");
    if (f == NULL) {
        skip(); /* no /dev/full on this system */
    }
    tool_json j;
    tool_json_begin(&j, f);
    tool_json_object_begin(&j, NULL);
    tool_json_string(&j, "k", "v");
    tool_json_object_end(&j);
    EXPECT_REPORT(TOOL_EXIT_FAILURE,
                  "acg: writing the JSON report: the output could not be written: No space left "
                  "on device\n",
                  tool_json_end(&j));
    fclose(f);
}

/* ---- table printer --------------------------------------------------------------------------- */

/* Right- and left-aligned columns, a header that widens its column, rows that end by
 * themselves, no trailing blanks after a left-aligned last column. */
static void test_table(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    static const char *const headers[] = {"mode", "a long header", "name"};
    static const int widths[] = {-6, 4, -4};
    tool_table t;
    tool_table_begin(&t, f, 3, widths, headers);
    tool_table_cell(&t, "%s", "eager");
    tool_table_cell(&t, "%.1f", 2.5);
    tool_table_cell(&t, "%s", "x");
    tool_table_cell(&t, "%s", "graph");
    tool_table_cell(&t, "%d", 12);
    tool_table_cell(&t, "%s", "longer");
    expect_written(f, "mode    a long header  name\n"
                      "---------------------------\n"
                      "eager             2.5  x\n"
                      "graph              12  longer\n");
}

/* ---- statistics ------------------------------------------------------------------------------ */

static void test_clock_and_median(void **state) {
    (void)state;
    uint64_t t0 = tool_now_ns();
    uint64_t t1 = tool_now_ns();
    assert_true(t1 >= t0);
    double odd[] = {5, 1, 3};
    assert_true(tool_median(odd, 3) == 3.0);
    assert_true(odd[0] == 1.0 && odd[2] == 5.0); /* sorted in place */
    double even[] = {4, 1, 3, 2};
    assert_true(tool_median(even, 4) == 2.5);
    assert_true(isnan(tool_median(even, 0)));
}

/* Points on a line give it back exactly, with no uncertainty: a measured slope. */
static void test_fit_exact_line(void **state) {
    (void)state;
    const double x[] = {1, 64, 128, 192, 256};
    double y[5];
    for (int i = 0; i < 5; i++) {
        y[i] = 10.0 + 0.25 * x[i];
    }
    tool_fit fit = tool_fit_line(x, y, 5);
    assert_int_equal(fit.n, 5);
    assert_true(fabs(fit.slope - 0.25) < 1e-12);
    assert_true(fabs(fit.intercept - 10.0) < 1e-9);
    assert_true(fit.slope_stderr < 1e-9);
    assert_true(tool_fit_slope_measured(&fit));
}

/* A slope below zero, or one smaller than its uncertainty, or one no uncertainty can be had
 * for, is not a measurement. */
static void test_fit_not_measured(void **state) {
    (void)state;
    const double x[] = {1, 4, 8, 12, 16};
    const double falling[] = {14.2, 14.1, 14.0, 14.1, 13.9};
    tool_fit fit = tool_fit_line(x, falling, 5);
    assert_true(fit.slope < 0);
    assert_false(tool_fit_slope_measured(&fit));

    const double noisy[] = {14.0, 14.9, 14.1, 14.8, 14.1}; /* slope ~0.005, stderr ~0.03 */
    fit = tool_fit_line(x, noisy, 5);
    assert_true(fit.slope > 0);
    assert_true(fit.slope_stderr > fit.slope);
    assert_false(tool_fit_slope_measured(&fit));

    const double two[] = {1.0, 2.0}; /* a line through two points has no residuals to judge */
    fit = tool_fit_line(x, two, 2);
    assert_true(fabs(fit.slope - 1.0 / 3.0) < 1e-12);
    assert_true(isnan(fit.slope_stderr));
    assert_false(tool_fit_slope_measured(&fit));

    const double same_x[] = {3, 3, 3};
    fit = tool_fit_line(same_x, falling, 3);
    assert_true(isnan(fit.slope) && isnan(fit.intercept));
    assert_false(tool_fit_slope_measured(&fit));
}

/* ---- options and numbers --------------------------------------------------------------------- */

static void test_option_forms(void **state) {
    (void)state;
    char *argv[] = {"bench", "--kernels", "16", "--kernels=32", "--kernelsx", "--kernels"};
    const int argc = 6;
    const char *v = NULL;
    int i = 1;
    assert_int_equal(tool_option(argc, argv, &i, "--kernels", &v), 1);
    assert_int_equal(i, 2);
    assert_string_equal(v, "16");
    i = 3;
    assert_int_equal(tool_option(argc, argv, &i, "--kernels", &v), 1);
    assert_int_equal(i, 3);
    assert_string_equal(v, "32");
    i = 4;
    assert_int_equal(tool_option(argc, argv, &i, "--kernels", &v), 0);
    i = 5;
    assert_int_equal(tool_option(argc, argv, &i, "--kernels", &v), -1);
    assert_int_equal(tool_option(argc, argv, &i, "--steps", &v), 0);
    assert_true(tool_is_help("-h") && tool_is_help("--help"));
    assert_false(tool_is_help("--helpme"));
}

static void test_parse_numbers(void **state) {
    (void)state;
    uint64_t u = 0;
    assert_true(tool_parse_u64("18446744073709551615", 0, UINT64_MAX, &u));
    assert_true(u == UINT64_MAX);
    static const char *const bad_u64[] = {"",   "-1",   "+1",  " 1",
                                          "1 ", "0x10", "1e3", "18446744073709551616"};
    for (size_t k = 0; k < sizeof bad_u64 / sizeof bad_u64[0]; k++) {
        assert_false(tool_parse_u64(bad_u64[k], 0, UINT64_MAX, &u));
    }
    assert_false(tool_parse_u64(NULL, 0, 1, &u));
    assert_false(tool_parse_u64("5", 6, 9, &u));
    assert_false(tool_parse_u64("10", 6, 9, &u));

    double d = 0;
    assert_true(tool_parse_double("-1.5e-3", -1, 1, false, &d));
    assert_true(d == -1.5e-3);
    assert_true(tool_parse_double(".5", 0, 1, true, &d) && d == 0.5);
    assert_false(tool_parse_double("0", 0, 1, true, &d)); /* (min, max] */
    assert_true(tool_parse_double("0", 0, 1, false, &d));
    static const char *const bad_double[] = {"",       "nan", "inf", "+1", " 1", "1 ",
                                             "0x1p-1", ".",   "e5",  "1e", "1,5"};
    for (size_t k = 0; k < sizeof bad_double / sizeof bad_double[0]; k++) {
        assert_false(tool_parse_double(bad_double[k], -10, 10, false, &d));
    }
    assert_false(tool_parse_double(NULL, 0, 1, false, &d));
    assert_false(tool_parse_double("1e999", 0, INFINITY, false, &d));
}

/* A bad value is reported with the range it was checked against, then the usage. */
static void test_option_usage_errors(void **state) {
    (void)state;
    static const char usage[] = "usage: acg x [--n N]\n";
    uint64_t u = 7;
    double d = 0;
    EXPECT_REPORT(TOOL_EXIT_USAGE,
                  "acg: x: --n takes a whole number in [1, 9]\nusage: acg x [--n N]\n",
                  tool_option_u64(usage, "x: ", "--n", "0", 1, 9, &u));
    assert_true(u == 7);
    EXPECT_REPORT(TOOL_EXIT_USAGE, "acg: --p takes a number in (0, 1]\nusage: acg x [--n N]\n",
                  tool_option_double(usage, "", "--p", NULL, 0, 1, true, &d));
    assert_int_equal(tool_option_u64(usage, "", "--n", "9", 1, 9, &u), TOOL_EXIT_OK);
    assert_true(u == 9);
    assert_int_equal(tool_option_double(usage, "", "--p", "1", 0, 1, true, &d), TOOL_EXIT_OK);
    assert_true(d == 1.0);
}

/* A failed library call is reported with the library's detail; another failure with its own. */
static void test_failure_reports(void **state) {
    (void)state;
    acg_buffer *b = NULL;
    acg_status st = acg_buffer_alloc(NULL, 16, &b);
    assert_int_not_equal(st, ACG_OK);
    char want[512];
    snprintf(want, sizeof want, "acg: allocating: %s\n", acg_last_error());
    EXPECT_REPORT(TOOL_EXIT_FAILURE, want, tool_fail(st, "allocating"));
    EXPECT_REPORT(TOOL_EXIT_FAILURE, "acg: reading: 'f.bin' is 3 bytes short\n",
                  tool_failf("reading", "'%s' is %d bytes short", "f.bin", 3));
}

/* ---- tables of commands ---------------------------------------------------------------------- */

static int run_one(int argc, char **argv) {
    (void)argv;
    return argc;
}

static const tool_command sub_table[] = {
    {"a", run_one, "usage: acg group a [--x]\n", "the first", NULL},
    {"b", run_one, "usage: acg group b [--long-option VALUE]\n             [--more]\n",
     "the second", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static const tool_command top_table[] = {
    {"one", run_one, "usage: acg one\n", "a command", NULL},
    {"group", run_one, NULL, "commands of their own", sub_table},
    {NULL, NULL, NULL, NULL, NULL},
};

static void test_command_tables(void **state) {
    (void)state;
    assert_ptr_equal(tool_command_find(top_table, "group"), &top_table[1]);
    assert_ptr_equal(tool_command_find(sub_table, "b"), &sub_table[1]);
    assert_null(tool_command_find(top_table, "a")); /* a subcommand, not a command */
    assert_null(tool_command_find(top_table, "on"));

    FILE *f = tmpfile();
    assert_non_null(f);
    bool first = true;
    tool_command_usage(f, top_table, &first);
    assert_false(first);
    expect_written(f, "usage: acg one\n"
                      "       acg group a [--x]\n"
                      "       acg group b [--long-option VALUE]\n"
                      "             [--more]\n");

    EXPECT_REPORT(TOOL_EXIT_USAGE,
                  "acg: group: unknown command 'z'\n"
                  "usage: acg group a [--x]\n"
                  "       acg group b [--long-option VALUE]\n"
                  "             [--more]\n",
                  tool_command_usage_error(sub_table, "group: unknown command '%s'", "z"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_writes_values),
        cmocka_unit_test(test_json_fixed),
        cmocka_unit_test(test_json_nesting_at_limit),
        cmocka_unit_test(test_json_nesting_past_limit),
        cmocka_unit_test(test_json_misuse),
        cmocka_unit_test(test_json_write_failure),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_clock_and_median),
        cmocka_unit_test(test_fit_exact_line),
        cmocka_unit_test(test_fit_not_measured),
        cmocka_unit_test(test_option_forms),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_option_usage_errors),
        cmocka_unit_test(test_failure_reports),
        cmocka_unit_test(test_command_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
