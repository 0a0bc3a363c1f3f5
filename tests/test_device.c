/* test_device.c — backends, device specs, the cached capability and device close rules. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h"

/* The build lists at least one backend; "cpu" is there, available, with exactly one device; the
 * backend under test is there and available. */
static void test_backend_listing(void **state) {
    (void)state;
    size_t n = acg_backend_count();
    assert_true(n >= 1);
    bool found_cpu = false, found_dut = false;
    for (size_t i = 0; i < n; i++) {
        acg_backend_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
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
        if (strcmp(info.name, tc_backend()) == 0) {
            found_dut = true;
            assert_true(info.available);
        }
    }
    assert_true(found_cpu);
    assert_true(found_dut);

    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    info.name = "untouched";
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_backend_get_info(n, &info));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_backend_get_info((size_t)-1, &info));
    assert_string_equal(info.name, "untouched");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_backend_get_info(0, NULL));
}

/* The number of devices of the backend under test. */
static int dut_device_count(void) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        TC_OK(acg_backend_get_info(i, &info));
        if (strcmp(info.name, tc_backend()) == 0) {
            return info.device_count;
        }
    }
    fail_msg("backend %s is not listed", tc_backend());
    return 0;
}

/* acg_device_describe reports a device without opening it, as an open device reports it; bad
 * names and indices are ACG_ERR_NOT_FOUND. */
static void test_device_describe(void **state) {
    (void)state;
    const char *be = tc_backend();
    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    cap.size = sizeof cap;
    TC_OK(acg_device_describe(be, 0, &cap));
    assert_non_null(cap.backend);
    assert_string_equal(cap.backend, be);
    assert_true(cap.available);
    if (tc_backend_is("cpu")) {
        assert_true(cap.graphs);
    }
    assert_true(!cap.graph_update || cap.graphs);
    assert_true(cap.memory_bytes > 0);
    assert_true(strlen(cap.name) > 0 && strlen(cap.name) < sizeof cap.name);

    /* The description agrees with the capability of the opened device. */
    char spec[64];
    snprintf(spec, sizeof spec, "%s:0", be);
    acg_device *dev = NULL;
    TC_OK(acg_device_open(spec, &dev));
    const acg_capability *open_cap = acg_device_get_capability(dev);
    assert_string_equal(open_cap->name, cap.name);
    assert_int_equal(open_cap->graphs, cap.graphs);
    assert_int_equal(open_cap->graph_update, cap.graph_update);
    assert_int_equal(open_cap->multi_stream_capture, cap.multi_stream_capture);
    tc_close(dev);

    int n = dut_device_count();
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe(be, n, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe(be, n + 6, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("cpu", 1, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("cpu", 7, &cap));
    TC_EXPECT(ERR_NOT_FOUND, acg_device_describe("nosuch", 0, &cap));
}

/* "<backend>" and "<backend>:0" open the backend's first device; its spec reads back as
 * "<backend>:0". */
static void test_open_by_spec(void **state) {
    (void)state;
    char spec0[64];
    snprintf(spec0, sizeof spec0, "%s:0", tc_backend());
    const char *specs[] = {tc_backend(), spec0};
    for (size_t i = 0; i < 2; i++) {
        acg_device *dev = NULL;
        TC_OK(acg_device_open(specs[i], &dev));
        assert_non_null(dev);
        assert_string_equal(acg_device_get_spec(dev), spec0);
        const acg_capability *cap = acg_device_get_capability(dev);
        assert_non_null(cap);
        assert_string_equal(cap->backend, tc_backend());
        tc_close(dev);
    }
}

/* The default device as acg.h states the rule, from the devices this process sees: the first
 * accelerator (not host_cpu) with graphs, else the first accelerator, else the cpu backend's,
 * else the first device. */
static void expected_default(char *spec, size_t size) {
    char found[4][64] = {"", "", "", ""};
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        TC_OK(acg_backend_get_info(i, &info));
        for (int d = 0; info.available && d < info.device_count; d++) {
            acg_capability cap = {.size = sizeof cap};
            if (acg_device_describe(info.name, d, &cap) != ACG_OK || !cap.available) {
                continue;
            }
            const bool fits[4] = {!cap.host_cpu && cap.graphs, !cap.host_cpu,
                                  strcmp(info.name, "cpu") == 0, true};
            for (int pass = 0; pass < 4; pass++) {
                if (fits[pass] && found[pass][0] == '\0') {
                    snprintf(found[pass], sizeof found[pass], "%s:%d", info.name, d);
                }
            }
        }
    }
    for (int pass = 0; pass < 4; pass++) {
        if (found[pass][0] != '\0') {
            snprintf(spec, size, "%s", found[pass]);
            return;
        }
    }
    fail_msg("no device is available");
}

/* NULL spec: without $ACG_DEVICE the default device opens (acg_device_get_default says which);
 * with it, that device opens, and a bad $ACG_DEVICE is reported like a bad spec. */
static void test_open_null_spec(void **state) {
    (void)state;
    const char *saved = getenv("ACG_DEVICE");
    char saved_copy[128] = "";
    if (saved != NULL) {
        snprintf(saved_copy, sizeof saved_copy, "%s", saved);
    }

    assert_int_equal(unsetenv("ACG_DEVICE"), 0);
    char want[64];
    expected_default(want, sizeof want);
    char spec[64];
    TC_OK(acg_device_get_default(spec, sizeof spec));
    assert_string_equal(spec, want);
    acg_device *dev = NULL;
    TC_OK(acg_device_open(NULL, &dev));
    assert_non_null(dev);
    assert_string_equal(acg_device_get_spec(dev), want);
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    assert_true(cap->available);
    tc_close(dev);
    /* The spec must fit, NUL included. */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_default(spec, strlen(want)));
    TC_LAST_ERROR_HAS("needs");
    TC_OK(acg_device_get_default(spec, strlen(want) + 1));
    assert_string_equal(spec, want);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_default(NULL, sizeof spec));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_default(spec, 0));

    assert_int_equal(setenv("ACG_DEVICE", "cpu", 1), 0);
    TC_OK(acg_device_get_default(spec, sizeof spec));
    assert_string_equal(spec, "cpu");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_default(spec, 3));
    TC_LAST_ERROR_HAS("ACG_DEVICE");
    dev = NULL;
    TC_OK(acg_device_open(NULL, &dev));
    assert_string_equal(acg_device_get_capability(dev)->backend, "cpu");
    assert_string_equal(acg_device_get_spec(dev), "cpu:0");
    tc_close(dev);

    assert_int_equal(setenv("ACG_DEVICE", tc_spec(), 1), 0);
    dev = NULL;
    TC_OK(acg_device_open(NULL, &dev));
    assert_string_equal(acg_device_get_capability(dev)->backend, tc_backend());
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

    /* The same for the backend under test. */
    char specs[5][64];
    const acg_status want[5] = {ACG_ERR_NOT_FOUND, ACG_ERR_NOT_FOUND, ACG_ERR_INVALID_ARGUMENT,
                                ACG_ERR_INVALID_ARGUMENT, ACG_ERR_INVALID_ARGUMENT};
    snprintf(specs[0], sizeof specs[0], "%s:%d", tc_backend(), dut_device_count());
    snprintf(specs[1], sizeof specs[1], "%s:999999", tc_backend());
    snprintf(specs[2], sizeof specs[2], "%s:", tc_backend());
    snprintf(specs[3], sizeof specs[3], "%s:x", tc_backend());
    snprintf(specs[4], sizeof specs[4], "%s:-1", tc_backend());
    for (size_t i = 0; i < 5; i++) {
        acg_device *dev = sentinel;
        acg_status st = acg_device_open(specs[i], &dev);
        if (st != want[i]) {
            print_error("spec \"%s\": ", specs[i]);
        }
        tc_expect_(want[i], st, "acg_device_open(spec)", __FILE__, __LINE__);
        assert_ptr_equal(dev, sentinel);
        TC_LAST_ERROR_HAS("acg_device_open");
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_open(tc_spec(), NULL));
}

/* The cached capability is complete and consistent; the cpu device's has the documented
 * values. */
static void test_capability_fields(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    assert_int_equal(cap->size, sizeof(acg_capability));
    assert_string_equal(cap->backend, tc_backend());
    assert_true(strlen(cap->name) > 0);
    assert_true(cap->available);
    assert_true(!cap->graph_update || cap->graphs);
    if (tc_backend_is("cpu")) {
        assert_true(cap->graphs);
        assert_true(cap->graph_update);
        assert_true(cap->multi_stream_capture);
        assert_true(cap->pinned_memory);
        assert_true(cap->host_cpu);
    }
    if (tc_backend_is("cuda")) {
        assert_false(cap->host_cpu); /* a GPU, even the test driver's */
    }
    assert_true(cap->memory_bytes > 0);
    /* The cached struct is the same object on every call. */
    assert_ptr_equal(acg_device_get_capability(dev), cap);
    tc_close(dev);

    assert_null(acg_device_get_capability(NULL));
    assert_null(acg_device_get_spec(NULL));
}

/* The driver's capability is queried once per device, however often it is read and whatever
 * work runs. Two opens of one spec are two devices, each with its own single query. */
static void test_capability_queried_once(void **state) {
    (void)state;
    acg_device *d1 = tc_open();
    acg_device *d2 = tc_open();
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
        if (tc_has_graphs(devs[d], s)) {
            TC_OK(acg_stream_begin_capture(s, pool));
            TC_OK(tc_fill(s, &k, b, 0, 1024, 3.0f));
            acg_graph *g = NULL;
            TC_OK(acg_stream_end_capture(s, &g));
            TC_OK(acg_graph_launch(g, s));
            TC_OK(acg_stream_synchronize(s));
            TC_OK(acg_graph_destroy(g));
        }
        TC_OK(acg_device_synchronize(devs[d]));
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
    acg_device *dev = tc_open();
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
    if (tc_has_graphs(dev, s)) {
        TC_OK(acg_stream_begin_capture(s, pool));
        TC_OK(tc_fill(s, &k, b, 0, 64, 1.0f));
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(s, &g));
        TC_OK(acg_stream_destroy(s));
        TC_EXPECT(ERR_IN_USE, acg_device_close(dev)); /* graph, pool and buffer live */
        TC_OK(acg_graph_destroy(g));
    } else {
        TC_OK(acg_stream_destroy(s));
    }
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
    acg_device *dev = tc_open();
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *s = tc_stream(dev);
    acg_buffer *b = tc_buffer(dev, 64 * sizeof(float));
    if (!tc_has_graphs(dev, s)) {
        TC_OK(acg_stream_destroy(s));
        TC_OK(acg_buffer_free(b));
        tc_close(dev);
        tc_skip("no graphs");
    }
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

/* Output structs from older headers get the fields they have and nothing more; one whose size
 * was never set is refused with nothing written. */
static void test_output_struct_sizes(void **state) {
    (void)state;
    acg_backend_info info;
    memset(&info, 0, sizeof info);
    info.size = offsetof(acg_backend_info, device_count);
    info.device_count = -5;
    TC_OK(acg_backend_get_info(0, &info));
    assert_int_equal(info.size, offsetof(acg_backend_info, device_count));
    assert_non_null(info.name);
    assert_int_equal(info.device_count, -5); /* past the caller's size: untouched */
    assert_null(info.reason);
    info.size = 0;
    info.name = "untouched";
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_backend_get_info(0, &info));
    TC_LAST_ERROR_HAS("acg_backend_get_info: out->size is 0");
    assert_string_equal(info.name, "untouched");

    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    cap.size = offsetof(acg_capability, available);
    TC_OK(acg_device_describe(tc_backend(), 0, &cap));
    assert_string_equal(cap.backend, tc_backend());
    assert_true(strlen(cap.name) > 0);
    assert_false(cap.available); /* past the caller's size */
    cap.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_describe(tc_backend(), 0, &cap));
    TC_LAST_ERROR_HAS("acg_device_describe: out->size is 0");

    acg_device *dev = tc_open();
    acg_buffer *b = tc_buffer(dev, 256);
    acg_memory_stats m;
    memset(&m, 0, sizeof m);
    m.size = offsetof(acg_memory_stats, peak_bytes);
    TC_OK(acg_device_get_memory_stats(dev, &m));
    assert_true(m.allocations >= 1);
    assert_true(m.bytes_in_use >= 256);
    assert_int_equal(m.peak_bytes, 0);
    m.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_memory_stats(dev, &m));
    TC_LAST_ERROR_HAS("acg_device_get_memory_stats: out->size is 0");
    TC_OK(acg_buffer_free(b));
    tc_close(dev);
}

/* Free and total memory as the driver sees it, where the backend can tell. */
static void test_memory_info(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    uint64_t free_bytes = 0, total = 0;
    acg_status st = acg_device_get_memory_info(dev, &free_bytes, &total);
    if (tc_backend_is("cpu")) {
        TC_OK(st);
        assert_true(free_bytes > 0 && free_bytes <= total);
        assert_true(total == acg_device_get_capability(dev)->memory_bytes);
    } else if (st != ACG_OK) {
        assert_int_equal(st, ACG_ERR_UNSUPPORTED);
        TC_LAST_ERROR_HAS("cannot tell");
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_memory_info(dev, NULL, &total));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_memory_info(dev, &free_bytes, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_get_memory_info(NULL, &free_bytes, &total));
    tc_close(dev);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_backend_listing),
    cmocka_unit_test(test_device_describe),
    cmocka_unit_test(test_open_by_spec),
    cmocka_unit_test(test_open_null_spec),
    cmocka_unit_test(test_open_bad_specs),
    cmocka_unit_test(test_capability_fields),
    cmocka_unit_test(test_capability_queried_once),
    cmocka_unit_test(test_close_in_use),
    cmocka_unit_test(test_close_with_graph),
    cmocka_unit_test(test_output_struct_sizes),
    cmocka_unit_test(test_memory_info),
};
TC_MAIN("test_device", tests)
