/*
 * test_env.c — the ACG_* environment variables. ACG_LOG is read at the first log decision and
 * unknown ACG_* names are reported once, at the first device open, so this executable sets the
 * environment before it calls the library at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/acg-impl.h"

/* ACG_LOG=info, set before the library first decides what to log, is the starting threshold. */
static void test_log_level_from_env(void **state) {
    (void)state;
    assert_int_equal(acg_get_log_level(), ACG_LOG_INFO);
    acg_set_log_level(ACG_LOG_DEBUG);
    assert_int_equal(acg_get_log_level(), ACG_LOG_DEBUG);
    acg_set_log_level(ACG_LOG_INFO);
}

/* A misspelt switch is never ignored silently: it is named, with the variable it resembles,
 * and a correctly spelt one is not reported. */
static void test_unknown_variable_warned_once(void **state) {
    (void)state;
    tc_log_capture_begin(ACG_LOG_WARN);
    acg_device *dev = tc_open_cpu();
    acg_log_level level;
    assert_true(tc_log_find("ACG_REQUIRE_GRAPH ", &level));
    assert_int_equal(level, ACG_LOG_WARN);
    assert_true(tc_log_find("did you mean ACG_REQUIRE_GRAPHS?", NULL));
    assert_true(tc_log_find("ACG_DISABLE_GRAPH ", NULL));
    assert_true(tc_log_find("did you mean ACG_DISABLE_GRAPHS?", NULL));
    assert_false(tc_log_find("ACG_NO_PINNED", NULL));
    size_t warnings = tc_log_count(ACG_LOG_WARN);
    assert_int_equal(warnings, 2);
    tc_close(dev);
    /* Once per process: a second open says nothing more. */
    dev = tc_open_cpu();
    assert_int_equal(tc_log_count(ACG_LOG_WARN), warnings);
    tc_close(dev);
    tc_log_capture_end();
}

/* ACG_DEVICE names the device that acg_device_open(NULL) opens. */
static void test_device_from_env(void **state) {
    (void)state;
    acg_device *dev;
    assert_int_equal(setenv("ACG_DEVICE", "cpu:0", 1), 0);
    TC_OK(acg_device_open(NULL, &dev));
    assert_string_equal(acg_device_get_spec(dev), "cpu:0");
    tc_close(dev);
    assert_int_equal(setenv("ACG_DEVICE", "nosuch:0", 1), 0);
    TC_EXPECT(ERR_NOT_FOUND, acg_device_open(NULL, &dev));
    TC_LAST_ERROR_HAS("nosuch");
    assert_int_equal(unsetenv("ACG_DEVICE"), 0);
}

/* The one decimal parser of every numeric variable and option: digits only, in range, and no
 * value that strtoul would quietly wrap, truncate or read a prefix of. */
static void test_parse_u64(void **state) {
    (void)state;
    uint64_t v = 7;
    TC_OK(acg__parse_u64("0", 0, 10, &v));
    assert_int_equal(v, 0);
    TC_OK(acg__parse_u64("10", 0, 10, &v));
    assert_int_equal(v, 10);
    TC_OK(acg__parse_u64("007", 0, 10, &v));
    assert_int_equal(v, 7);
    TC_OK(acg__parse_u64("18446744073709551615", 0, UINT64_MAX, &v));
    assert_true(v == UINT64_MAX);
    TC_OK(acg__parse_u64("4294967297", 0, UINT64_MAX, &v));
    assert_true(v == 4294967297ull);
    /* Refused with *out untouched: text that is not digits only, and numbers past 64 bits. */
    static const char *const malformed[] = {"",         "abc", "2junk", "-1",   "+1",
                                            " 1",       "1 ",  "1.0",   "0x10", "1e3",
                                            "\xd9\xa3", "\t1", "1\n",   "--1"};
    static const char *const overflowing[] = {"18446744073709551616", "99999999999999999999"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        v = 7;
        if (acg__parse_u64(malformed[i], 0, UINT64_MAX, &v) != ACG_ERR_INVALID_ARGUMENT) {
            fail_msg("\"%s\" was accepted as %llu", malformed[i], (unsigned long long)v);
        }
        assert_int_equal(v, 7);
    }
    for (size_t i = 0; i < sizeof overflowing / sizeof overflowing[0]; i++) {
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg__parse_u64(overflowing[i], 0, UINT64_MAX, &v));
        assert_int_equal(v, 7);
    }
    /* 2^32 + 1 against a 32-bit range: a cast of strtoul's result used to wrap it to 1. */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg__parse_u64("4294967297", 0, UINT32_MAX, &v));
    assert_int_equal(v, 7);
    /* Bounds are inclusive; one past either end is refused. */
    TC_OK(acg__parse_u64("1", 1, 2, &v));
    assert_int_equal(v, 1);
    TC_OK(acg__parse_u64("2", 1, 2, &v));
    assert_int_equal(v, 2);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg__parse_u64("0", 1, 2, &v));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg__parse_u64("3", 1, 2, &v));
    assert_int_equal(v, 2);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg__parse_u64(NULL, 0, 1, &v));
}

/* A numeric ACG_* variable: unset or empty gives the default; anything the parser refuses is
 * ACG_ERR_INVALID_ARGUMENT naming the call, the variable, the value and the range. */
static void test_env_u64(void **state) {
    (void)state;
    uint64_t v = 0;
    assert_int_equal(unsetenv("ACG_NUM_SLOTS"), 0);
    TC_OK(acg__env_u64("test_env_u64", "ACG_NUM_SLOTS", 1, 2, 2, &v));
    assert_int_equal(v, 2);
    assert_int_equal(setenv("ACG_NUM_SLOTS", "", 1), 0);
    TC_OK(acg__env_u64("test_env_u64", "ACG_NUM_SLOTS", 1, 2, 2, &v));
    assert_int_equal(v, 2);
    assert_int_equal(setenv("ACG_NUM_SLOTS", "1", 1), 0);
    TC_OK(acg__env_u64("test_env_u64", "ACG_NUM_SLOTS", 1, 2, 2, &v));
    assert_int_equal(v, 1);
    static const char *const bad[] = {"4294967297", "2junk", "-1", "abc", "0", "3", " 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(setenv("ACG_NUM_SLOTS", bad[i], 1), 0);
        v = 9;
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg__env_u64("test_env_u64", "ACG_NUM_SLOTS", 1, 2, 2, &v));
        assert_int_equal(v, 9);
        char want[128];
        snprintf(want, sizeof want,
                 "test_env_u64: ACG_NUM_SLOTS=%s is not a whole number in [1, 2]", bad[i]);
        assert_string_equal(acg_last_error(), want);
    }
    assert_int_equal(unsetenv("ACG_NUM_SLOTS"), 0);
}

int main(void) {
    /* Before any library call: these are read once per process. */
    setenv("ACG_LOG", "info", 1);
    setenv("ACG_REQUIRE_GRAPH", "1", 1);
    setenv("ACG_DISABLE_GRAPH", "1", 1);
    setenv("ACG_NO_PINNED", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_level_from_env),
        cmocka_unit_test(test_unknown_variable_warned_once),
        cmocka_unit_test(test_device_from_env),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_env_u64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
