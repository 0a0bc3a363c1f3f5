/*
 * test_opencl_backend.c — what only the opencl backend has: the choice of the
 * cl_khr_command_buffer calling convention from the version a device reports, and the kernel
 * build log reaching acg_last_error() when a kernel's OpenCL C fails to build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backends/opencl/opencl.h"

static ocl_cb_abi abi_of(const char *version) {
    unsigned major, minor, patch;
    assert_true(acg__ocl_parse_version(version, &major, &minor, &patch));
    return acg__ocl_cmdbuf_abi(major, minor, patch);
}

/* Each version the extension went through maps to the signatures it declares; a version this
 * code has never seen disables graphs instead of calling with guessed arguments. */
static void test_version_dispatch(void **state) {
    (void)state;
    assert_int_equal(abi_of("0.9.0"), OCL_CB_090); /* PoCL 3.1 */
    assert_int_equal(abi_of("0.9.4"), OCL_CB_090);
    assert_int_equal(abi_of("0.9.5"), OCL_CB_095); /* properties added to clCommand*KHR */
    assert_int_equal(abi_of("0.9.8"), OCL_CB_095);
    assert_int_equal(abi_of("1.0"), OCL_CB_095); /* final */
    assert_int_equal(abi_of("1.0.0"), OCL_CB_095);
    assert_int_equal(abi_of("0.8.2"), OCL_CB_NONE);
    assert_int_equal(abi_of("1.1.0"), OCL_CB_NONE);
    assert_int_equal(abi_of("2.0"), OCL_CB_NONE);

    unsigned a, b, c;
    assert_true(acg__ocl_parse_version("0.9.5", &a, &b, &c));
    assert_int_equal(a, 0);
    assert_int_equal(b, 9);
    assert_int_equal(c, 5);
    const char *bad[] = {"", "1", "x.y", "1.", ".1", "1.0.0.0", "1.0-rc1", "99999.0", "1..0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(acg__ocl_parse_version(bad[i], &a, &b, &c));
    }
}

/* A kernel whose OpenCL C does not compile: the lookup fails with ACG_ERR_DEVICE and the
 * compiler's own message is in acg_last_error(); the failed build is not kept, so the next
 * lookup reports it again, and a kernel of good source on the same device works. */
static void test_build_failure_reports_log(void **state) {
    (void)state;
    acg_kernel_desc bad = ACG_KERNEL_DESC_INIT;
    bad.name = "broken_f32";
    bad.n_args = 2;
    bad.types[0] = ACG_ARG_BUFFER;
    bad.types[1] = ACG_ARG_F32;
    bad.bytes_per_item[0] = 4;
    bad.opencl.source = "kernel void broken_f32(global float *y, ulong off, float v) {\n"
                        "    y[get_global_id(0)] = undeclared_identifier;\n"
                        "}\n";
    assert_int_equal(acg_kernel_register(&bad), ACG_OK);
    acg_device *dev;
    assert_int_equal(acg_device_open("opencl", &dev), ACG_OK);
    acg_kernel *k;
    for (int attempt = 0; attempt < 2; attempt++) {
        assert_int_equal(acg_kernel_get(dev, "broken_f32", &k), ACG_ERR_DEVICE);
        const char *msg = acg_last_error();
        assert_non_null(strstr(msg, "clBuildProgram"));
        assert_non_null(strstr(msg, "build log"));
        assert_non_null(strstr(msg, "broken_f32"));
        assert_non_null(strstr(msg, "undeclared_identifier"));
    }
    assert_int_equal(acg_kernel_get(dev, "fill_f32", &k), ACG_OK);
    /* Nothing of the failed kernel stayed loaded: it unregisters with the device open. */
    assert_int_equal(acg_kernel_unregister("broken_f32"), ACG_OK);
    assert_int_equal(acg_device_close(dev), ACG_OK);
}

/* PoCL offers the extension at 0.9.0 without mutable dispatch: graphs yes, update no, and the
 * capability says why in its detail. */
static void test_capability_reports_extension(void **state) {
    (void)state;
    acg_device *dev;
    assert_int_equal(acg_device_open("opencl", &dev), ACG_OK);
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(strstr(cap->detail, "cl_khr_command_buffer"));
    if (cap->graphs) {
        assert_non_null(strstr(cap->detail, "graphs:"));
    } else {
        assert_non_null(strstr(cap->detail, "no graphs"));
    }
    if (!cap->graph_update) {
        assert_non_null(strstr(cap->detail, "capture again"));
    }
    assert_int_equal(acg_device_close(dev), ACG_OK);
}

int main(void) {
    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    for (size_t i = 0; i < acg_backend_count(); i++) {
        if (acg_backend_get_info(i, &info) == ACG_OK && strcmp(info.name, "opencl") == 0 &&
            !info.available) {
            printf("skipped: opencl: %s\n", info.reason);
            return 77;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_dispatch),
        cmocka_unit_test(test_build_failure_reports_log),
        cmocka_unit_test(test_capability_reports_extension),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
