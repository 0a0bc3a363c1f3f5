/* test_status.c — status strings and names, acg_last_error, logging threshold and callback. */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every status of ACG_STATUS_MAP has its description and its symbolic name. */
static void test_status_strings_and_names(void **state) {
    (void)state;
    size_t n = 0;
#define CHECK_STATUS_(name, value, text)                                                           \
    assert_int_equal((int)ACG_##name, value);                                                      \
    assert_string_equal(acg_status_string(ACG_##name), text);                                      \
    assert_string_equal(acg_status_name(ACG_##name), "ACG_" #name);                                \
    n++;
    ACG_STATUS_MAP(CHECK_STATUS_)
#undef CHECK_STATUS_
    assert_int_equal(n, 21);
}

/* Values outside the map get the documented fallbacks, never NULL. */
static void test_status_unknown(void **state) {
    (void)state;
    const int bad[] = {2, 3, 42, -20, -100, 1000000, -2147483647};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_string_equal(acg_status_string((acg_status)bad[i]), "unknown status");
        assert_string_equal(acg_status_name((acg_status)bad[i]), "ACG_UNKNOWN");
    }
}

static void *fresh_thread_last_error(void *arg) {
    char *out = arg;
    const char *e = acg_last_error();
    snprintf(out, 256, "%s", e ? e : "(null)");
    acg_buffer *b = NULL;
    acg_status st = acg_buffer_alloc(NULL, 16, &b);
    snprintf(out + 256, 256, "%d|%s", (int)st, acg_last_error());
    return NULL;
}

/* acg_last_error is "" on a thread that never failed, and is per thread. */
static void test_last_error_thread_local(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    acg_buffer *b = (acg_buffer *)(uintptr_t)1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_alloc(dev, 0, &b));
    char mine[512];
    snprintf(mine, sizeof mine, "%s", acg_last_error());

    static char other[512];
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fresh_thread_last_error, other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(other, "");
    assert_true(tc_contains(other + 256, "acg_buffer_alloc"));
    /* The other thread's failure did not overwrite this thread's detail. */
    assert_string_equal(acg_last_error(), mine);
    tc_close(dev);
}

/* A failing call names itself in acg_last_error and leaves its out-parameter untouched. */
static void test_last_error_names_call(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    acg_buffer *sentinel = (acg_buffer *)(uintptr_t)0x1234;
    acg_buffer *b = sentinel;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_alloc(dev, 0, &b));
    assert_ptr_equal(b, sentinel);
    TC_LAST_ERROR_HAS("acg_buffer_alloc");

    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_alloc(NULL, 64, &b));
    assert_ptr_equal(b, sentinel);
    TC_LAST_ERROR_HAS("acg_buffer_alloc");

    acg_stream *s = (acg_stream *)(uintptr_t)0x5678;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_create(NULL, &s));
    assert_ptr_equal(s, (acg_stream *)(uintptr_t)0x5678);
    TC_LAST_ERROR_HAS("acg_stream_create");

    /* A successful call does not clear the detail of the last failure. */
    acg_buffer *ok = tc_buffer(dev, 64);
    TC_LAST_ERROR_HAS("acg_stream_create");
    TC_OK(acg_buffer_free(ok));
    tc_close(dev);
}

/* acg_set_log_level / acg_get_log_level round-trip every level. */
static void test_log_level_roundtrip(void **state) {
    (void)state;
    acg_log_level saved = acg_get_log_level();
    const acg_log_level levels[] = {ACG_LOG_DEBUG, ACG_LOG_ERROR, ACG_LOG_INFO, ACG_LOG_WARN};
    for (size_t i = 0; i < 4; i++) {
        acg_set_log_level(levels[i]);
        assert_int_equal(acg_get_log_level(), levels[i]);
    }
    acg_set_log_level(saved);
    assert_int_equal(acg_get_log_level(), saved);
}

/* The pageable fallback of acg_pinned_alloc is logged at debug level: delivered to the callback
 * at threshold debug, withheld at threshold warn; messages carry no trailing newline. */
static void test_log_callback_threshold(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    assert_int_equal(setenv("ACG_NO_PINNED", "1", 1), 0);

    tc_log_capture_begin(ACG_LOG_WARN);
    void *p = tc_pinned(dev, 256);
    assert_int_equal(tc_log_count(ACG_LOG_DEBUG), 0);
    assert_int_equal(tc_log_count(ACG_LOG_INFO), 0);
    TC_OK(acg_pinned_free(p));
    tc_log_capture_end();

    tc_log_capture_begin(ACG_LOG_DEBUG);
    p = tc_pinned(dev, 256);
    size_t debug_msgs = tc_log_count(ACG_LOG_DEBUG);
    assert_false(tc_log_any_trailing_newline());
    TC_OK(acg_pinned_free(p));
    tc_log_capture_end();
    assert_int_equal(unsetenv("ACG_NO_PINNED"), 0);
    assert_true(debug_msgs >= 1);
    tc_close(dev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings_and_names),
        cmocka_unit_test(test_status_unknown),
        cmocka_unit_test(test_last_error_thread_local),
        cmocka_unit_test(test_last_error_names_call),
        cmocka_unit_test(test_log_level_roundtrip),
        cmocka_unit_test(test_log_callback_threshold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
