/*
 * test_env.c — the ACG_* environment variables. ACG_LOG is read at the first log decision and
 * unknown ACG_* names are reported once, at the first device open, so this executable sets the
 * environment before it calls the library at all.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
