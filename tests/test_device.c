/* test_device.c — backends, device specs, the cached capability and device close rules. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h"

/* The build lists at least one backend; "cpu" is there, available, with exactly one device. */
static void test_backend_listing(void **state) {
    (void)state;
    size_t n = acg_backend_count();
    assert_true(n >= 1);
    bool found_cpu = false;
    for (size_t i = 0; i < n; i++) {
        acg_backend_info info;
        memset(&info, 0, sizeof info);
        TC_OK(acg_backend_get_info(i, &info));
        assert_non_null(info.name);
        assert_non_null(info.reason);
        if (info.available) {
            assert_string_equal(info.reason, "");
            assert_true(info.device_count >= 1);
        } else {
            assert_int_equal(info.device_count, 0);
        }
        if (strcmp(info.name, "cpu") == 0) {
            found_cpu = true;
            assert_true(info.available);
            assert_int_equal(info.device_count, 1);
        }
    }
    assert_true(found_cpu);

    acg_backend_info info;
    info.name = "untouched";
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_backend_get_info(n, &info));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_backend_get_info((size_t)-1, &info));
    assert_string_equal(info.name, "untouched");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_backend_get_info(0, NULL));
}

/* acg_device_describe reports the cpu device without opening it; bad names and indices are
 * ACG_ERR_NOT_FOUND. */
static void test_device_describe(void **state) {
    (void)state;
    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    TC_OK(acg_device_describe("cpu", 0, &cap));
    assert_non_null(cap.backend);
    assert_string_equal(cap.backend, "cpu");
    assert_true(cap.available);
    assert_true(cap.graphs);
    assert_true(cap.memory_bytes > 0);
    assert_true(strlen(cap.name) > 0 && strlen(cap.name) < sizeof cap.name);

    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("cpu", 1, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("cpu", 7, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("nosuch", 0, &cap));
}

/* "cpu" and "cpu:0" open the cpu device; its spec reads back as "cpu:0". */
static void test_open_by_spec(void **state) {
    (void)state;
    const char *specs[] = {"cpu", "cpu:0"};
    for (size_t i = 0; i < 2; i++) {
        acg_device *dev = NULL;
        TC_OK(acg_device_open(specs[i], &dev));
        assert_non_null(dev);
        assert_string_equal(acg_device_get_spec(dev), "cpu:0");
        const acg_capability *cap = acg_device_get_capability(dev);
        assert_non_null(cap);
        assert_string_equal(cap->backend, "cpu");
        tc_close(dev);
    }
}

/* NULL spec: without $ACG_DEVICE some available device opens; with it, that device opens, and
 * a bad $ACG_DEVICE is reported like a bad spec. */
static void test_open_null_spec(void **state) {
    (void)state;
    const char *saved = getenv("ACG_DEVICE");
    char saved_copy[128] = "";
    if (saved != NULL) {
        snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    }

    assert_int_equal(unsetenv("ACG_DEVICE"), 0);
    acg_device *dev = NULL;
    TC_OK(acg_device_open(NULL, &dev));
    assert_non_null(dev);
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    assert_true(cap->available);
    tc_close(dev);

    assert_int_equal(setenv("ACG_DEVICE", "cpu", 1), 0);
    dev = NULL;
    TC_OK(acg_device_open(NULL, &dev));
    assert_string_equal(acg_device_get_capability(dev)->backend, "cpu");
    assert_string_equal(acg_device_get_spec(dev), "cpu:0");
    tc_close(dev);

    assert_int_equal(setenv("ACG_DEVICE", "nosuch", 1), 0);
    dev = NULL;
    TC_EXPECT(ERR_NOT_FOUND, acg_device_open(NULL, &dev));
    assert_null(dev);

    if (saved != NULL) {
        setenv("ACG_DEVICE", saved_copy, 1);
    } else {
        unsetenv("ACG_DEVICE");
    }
}

/* Malformed specs are ACG_ERR_INVALID_ARGUMENT, unknown backends or indices ACG_ERR_NOT_FOUND;
 * the out-parameter stays untouched. */
static void test_open_bad_specs(void **state) {
    (void)state;
    acg_device *const sentinel = (acg_device *)(uintptr_t)0x99;
    static const struct {
        const char *spec;
        acg_status want;
    } cases[] = {
        {"cpu:7", ACG_ERR_NOT_FOUND},         {"cpu:1", ACG_ERR_NOT_FOUND},
        {"nosuch", ACG_ERR_NOT_FOUND},        {"nosuch:0", ACG_ERR_NOT_FOUND},
        {"cpu:", ACG_ERR_INVALID_ARGUMENT},   {"cpu:x", ACG_ERR_INVALID_ARGUMENT},
        {"cpu:0x", ACG_ERR_INVALID_ARGUMENT}, {"", ACG_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        acg_device *dev = sentinel;
        acg_status st = acg_device_open(cases[i].spec, &dev);
        if (st != cases[i].want) {
            print_error("spec \"%s\": ", cases[i].spec);
        }
        tc_expect_(cases[i].want, st, "acg_device_open(spec)", __FILE__, __LINE__);
        assert_ptr_equal(dev, sentinel);
        TC_LAST_ERROR_HAS("acg_device_open");
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open("cpu", NULL));
}

/* The cpu device's cached capability has the documented values. */
static void test_capability_fields(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    assert_int_equal(cap->size, sizeof(acg_capability));
    assert_string_equal(cap->backend, "cpu");
    assert_true(strlen(cap->name) > 0);
    assert_true(cap->available);
    assert_true(cap->graphs);
    assert_true(cap->graph_update);
    assert_true(cap->multi_stream_capture);
    assert_true(cap->pinned_memory);
    assert_true(cap->memory_bytes > 0);
    /* The cached struct is the same object on every call. */
    assert_ptr_equal(acg_device_get_capability(dev), cap);
    tc_close(dev);

    assert_null(acg_device_get_capability(NULL));
    assert_null(acg_device_get_spec(NULL));
}

/* The driver's capability is queried once per device, however often it is read and whatever
 * work runs. Two opens of "cpu" are two devices, each with its own single query. */
static void test_capability_queried_once(void **state) {
    (void)state;
    acg_device *d1 = tc_open_cpu();
    acg_device *d2 = tc_open_cpu();
    assert_ptr_not_equal(d1, d2);
    acg_device *devs[2] = {d1, d2};
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 1000; i++) {
            assert_non_null(acg_device_get_capability(devs[d]));
        }
        tc_kernels k;
        tc_kernels_get(devs[d], &k);
        acg_stream *s = tc_stream(devs[d]);
        acg_buffer *b = tc_buffer(devs[d], 1024 * sizeof(float));
        void *pin = tc_pinned(devs[d], 1024 * sizeof(float));
        for (int i = 0; i < 10; i++) {
            TC_OK(tc_fill(s, &k, b, 0, 1024, (float)i));
            TC_OK(acg_copy_d2h(s, pin, b, 0, 1024 * sizeof(float)));
        }
        acg_graph_pool *pool = tc_pool(devs[d]);
        TC_OK(acg_stream_begin_capture(s, pool));
        TC_OK(tc_fill(s, &k, b, 0, 1024, 3.0f));
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(s, &g));
        TC_OK(acg_graph_launch(g, s));
        TC_OK(acg_stream_synchronize(s));
        TC_OK(acg_device_synchronize(devs[d]));
        TC_OK(acg_graph_destroy(g));
        TC_OK(acg_graph_pool_destroy(pool));
        TC_OK(acg_stream_destroy(s));
        TC_OK(acg_buffer_free(b));
        TC_OK(acg_pinned_free(pin));
    }
    assert_int_equal(acg__device_capability_queries(d1), 1);
    assert_int_equal(acg__device_capability_queries(d2), 1);
    tc_close(d1);
    tc_close(d2);
}

/* Closing a device refuses while any kind of object of it lives, then succeeds. */
static void test_close_in_use(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    tc_kernels k;
    tc_kernels_get(dev, &k); /* kernels belong to the device: they never block close */

    acg_buffer *b = tc_buffer(dev, 64);
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_LAST_ERROR_HAS("acg_device_close");
    TC_OK(acg_buffer_free(b));

    void *p = tc_pinned(dev, 64);
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_pinned_free(p));

    acg_stream *s = tc_stream(dev);
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_stream_destroy(s));

    acg_event *e = tc_event(dev);
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_event_destroy(e));

    acg_graph_pool *pool = tc_pool(dev);
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));

    s = tc_stream(dev);
    b = tc_buffer(dev, 64 * sizeof(float));
    TC_OK(acg_stream_begin_capture(s, pool));
    TC_OK(tc_fill(s, &k, b, 0, 64, 1.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    TC_OK(acg_stream_destroy(s));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev)); /* graph, pool and buffer live */
    TC_OK(acg_graph_destroy(g));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev)); /* pool and buffer live */
    TC_OK(acg_buffer_free(b));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_graph_pool_destroy(pool));

    TC_OK(acg_device_close(dev));
    /* A closed device is a destroyed handle. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_close(dev));
    TC_OK(acg_device_close(NULL));
}

/* A device with a live graph (and nothing else of it but the graph's pool) refuses close. */
static void test_close_with_graph(void **state) {
    (void)state;
    acg_device *dev = tc_open_cpu();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *s = tc_stream(dev);
    acg_buffer *b = tc_buffer(dev, 64 * sizeof(float));
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(tc_fill(s, &k, b, 0, 64, 1.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    TC_OK(acg_stream_destroy(s));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_device_close(dev));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_listing),
        cmocka_unit_test(test_device_describe),
        cmocka_unit_test(test_open_by_spec),
        cmocka_unit_test(test_open_null_spec),
        cmocka_unit_test(test_open_bad_specs),
        cmocka_unit_test(test_capability_fields),
        cmocka_unit_test(test_capability_queried_once),
        cmocka_unit_test(test_close_in_use),
        cmocka_unit_test(test_close_with_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
