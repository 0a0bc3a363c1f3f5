/*
 * test_native.c — the driver's memory and device behind acg's handles (acg_buffer_get_native,
 * acg_device_get_native): what each backend hands out, views at their offsets, the output-struct
 * rules and the refusals; and, on the cpu backend, foreign work (a host function) reading and
 * writing acg buffers through their native addresses, eagerly and in a replayed graph, equal bit
 * for bit to the same work done by acg's kernels. The other backends run their foreign work
 * through their drivers in tests/cuda, tests/level_zero and tests/opencl.
 */
#include "common.h"

#include <stddef.h>
#include <string.h>

#define N 256
#define BYTES (N * sizeof(float))

/* The device under test, streams s (t.s) and b, and buffers x and y of BYTES (common.h). */
typedef tc_fixture2 fx;

/* The kind each backend's memory has. */
static acg_native_kind memory_kind(const char *backend) {
    return strcmp(backend, "cpu") == 0      ? ACG_NATIVE_HOST_MEMORY
           : strcmp(backend, "opencl") == 0 ? ACG_NATIVE_OPENCL_MEM
           : strcmp(backend, "cuda") == 0   ? ACG_NATIVE_CUDA_DEVICEPTR
           : strcmp(backend, "vulkan") == 0 ? ACG_NATIVE_VULKAN_BUFFER
                                            : ACG_NATIVE_ZE_DEVICE_MEMORY;
}

static void test_buffer_native(void **state) {
    fx *f = *state;
    acg_buffer *b = f->y, *view = NULL, *inner = NULL;
    TC_OK(acg_buffer_create_view(b, 64, 128, &view));
    TC_OK(acg_buffer_create_view(view, 16, 32, &inner));
    acg_native_buffer nb = ACG_NATIVE_BUFFER_INIT, nv = ACG_NATIVE_BUFFER_INIT,
                      ni = ACG_NATIVE_BUFFER_INIT;
    TC_OK(acg_buffer_get_native(b, &nb));
    TC_OK(acg_buffer_get_native(view, &nv));
    TC_OK(acg_buffer_get_native(inner, &ni));
    const acg_native_kind kind = memory_kind(tc_backend());
    assert_int_equal(nb.kind, kind);
    assert_int_equal(nv.kind, kind);
    assert_int_equal(nb.size, sizeof nb);
    assert_int_equal(nb.bytes, BYTES);
    assert_int_equal(nv.bytes, 128);
    assert_int_equal(ni.bytes, 32);
    if (kind == ACG_NATIVE_OPENCL_MEM) {
        /* One cl_mem; a view is an offset into it. */
        assert_non_null(nb.handle);
        assert_ptr_equal(nv.handle, nb.handle);
        assert_ptr_equal(ni.handle, nb.handle);
        assert_int_equal(nv.offset, nb.offset + 64);
        assert_int_equal(ni.offset, nb.offset + 80);
        assert_int_equal(nb.address, 0);
    } else if (kind == ACG_NATIVE_VULKAN_BUFFER) {
        /* One VkBuffer; a view is an offset into it, and its device address that far on. */
        assert_non_null(nb.handle);
        assert_ptr_equal(nv.handle, nb.handle);
        assert_ptr_equal(ni.handle, nb.handle);
        assert_int_equal(nv.offset, nb.offset + 64);
        assert_int_equal(ni.offset, nb.offset + 80);
        assert_true(nb.address != 0);
        assert_int_equal(nv.address, nb.address + 64);
        assert_int_equal(ni.address, nb.address + 80);
    } else {
        assert_true(nb.address != 0);
        assert_null(nb.handle);
        assert_int_equal(nv.address, nb.address + 64);
        assert_int_equal(ni.address, nb.address + 80);
        assert_int_equal(nb.offset, 0);
    }
    /* The same answer every time: the memory does not move while the buffer lives. */
    acg_native_buffer again = ACG_NATIVE_BUFFER_INIT;
    TC_OK(acg_buffer_get_native(b, &again));
    assert_int_equal(again.kind, nb.kind);
    assert_ptr_equal(again.handle, nb.handle);
    assert_int_equal(again.address, nb.address);
    assert_int_equal(again.offset, nb.offset);

    /* An older caller's struct is written up to its size. */
    struct {
        acg_native_buffer nb;
        uint64_t guard;
    } old;
    memset(&old, 0xab, sizeof old);
    old.nb.size = offsetof(acg_native_buffer, address);
    TC_OK(acg_buffer_get_native(b, &old.nb));
    assert_int_equal(old.nb.size, offsetof(acg_native_buffer, address));
    assert_int_equal(old.nb.kind, kind);
    const unsigned char *tail =
        (const unsigned char *)&old.nb + offsetof(acg_native_buffer, address);
    for (size_t i = 0; i < sizeof old - offsetof(acg_native_buffer, address); i++) {
        assert_int_equal(tail[i], 0xab);
    }

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_get_native(b, NULL));
    TC_LAST_ERROR_HAS("out is NULL");
    acg_native_buffer unset = {0};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_get_native(b, &unset));
    TC_LAST_ERROR_HAS("acg_native_buffer");
    TC_OK(acg_buffer_free(inner));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_get_native(inner, &nb));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_get_native(NULL, &nb));
    TC_OK(acg_buffer_free(view));
}

static void test_device_native(void **state) {
    acg_device *dev = ((tc_fixture *)*state)->dev;
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(dev, &nd));
    assert_int_equal(nd.size, sizeof nd);
    if (tc_backend_is("cpu")) {
        assert_int_equal(nd.kind, ACG_NATIVE_NONE);
        assert_null(nd.context);
        assert_null(nd.device);
        assert_int_equal(nd.ordinal, 0);
    } else {
        assert_true(nd.kind == ACG_NATIVE_OPENCL_CONTEXT || nd.kind == ACG_NATIVE_CUDA_CONTEXT ||
                    nd.kind == ACG_NATIVE_ZE_CONTEXT || nd.kind == ACG_NATIVE_VULKAN_DEVICE);
        assert_non_null(nd.context);
        if (nd.kind != ACG_NATIVE_CUDA_CONTEXT) {
            assert_non_null(nd.device);
            assert_non_null(nd.platform);
        }
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_native(dev, NULL));
    acg_native_device unset = {0};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_native(dev, &unset));
    TC_LAST_ERROR_HAS("acg_native_device");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_get_native(NULL, &nd));
}

/* ---- foreign work on the cpu backend: a host function through native addresses ----------- */

typedef struct foreign {
    acg_native_buffer x, y;
    float a;
} foreign;

/* y[i] = x[i] + a, as add_scalar_f32 computes it, on memory the function reaches only
 * through the buffers' native addresses. */
static void foreign_add(void *user) {
    const foreign *f = user;
    const float *x = (const float *)(uintptr_t)f->x.address;
    float *y = (float *)(uintptr_t)f->y.address;
    for (size_t i = 0; i < f->y.bytes / sizeof(float); i++) {
        y[i] = x[i] + f->a;
    }
}

static void test_cpu_foreign_work(void **state) {
    fx *f = *state;
    if (!tc_backend_is("cpu")) {
        tc_skip("%s's foreign work runs through its driver (the backend's own suite)", tc_spec());
    }
    acg_stream *s = f->t.s;
    acg_buffer *x = f->x, *y = f->y, *ref = tc_buffer(f->t.dev, BYTES), *yv = NULL;
    float hx[N], by_acg[N], by_foreign[N];
    tc_fill_floats(hx, N, 5);
    tc_upload(s, x, hx, BYTES);
    TC_OK(acg_buffer_create_view(y, 32 * sizeof(float), BYTES - 32 * sizeof(float), &yv));
    foreign work = {ACG_NATIVE_BUFFER_INIT, ACG_NATIVE_BUFFER_INIT, 1.5f};
    TC_OK(acg_buffer_get_native(x, &work.x));
    TC_OK(acg_buffer_get_native(yv, &work.y));
    const acg_access acc[2] = {{x, 0, 0, ACG_ACCESS_READ}, {yv, 0, 0, ACG_ACCESS_WRITE}};

    /* acg's own kernel: the same window of ref. */
    TC_OK(acg_fill(s, ref, 0, BYTES, 0, 4));
    TC_OK(tc_add(s, &f->t.k, ref, 32 * sizeof(float), x, 0, N - 32, 1.5f));
    tc_download(s, by_acg, ref, BYTES);

    /* Eagerly. */
    TC_OK(acg_fill(s, y, 0, BYTES, 0, 4));
    TC_OK(acg_stream_launch_host(s, foreign_add, &work, acc, 2));
    tc_download(s, by_foreign, y, BYTES);
    TC_BYTES_EQUAL(by_foreign, by_acg, BYTES);

    /* Captured, then replayed: y is filled and written through its native address each time. */
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(acg_fill(s, y, 0, BYTES, 0, 4));
    TC_OK(acg_stream_launch_host(s, foreign_add, &work, acc, 2));
    TC_OK(acg_stream_end_capture(s, &g));
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(yv)); /* the graph holds what it declared */
    for (int i = 0; i < 3; i++) {
        tc_poison(s, y);
        TC_OK(acg_graph_launch(g, s));
        tc_download(s, by_foreign, y, BYTES);
        TC_BYTES_EQUAL(by_foreign, by_acg, BYTES);
    }
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(yv));
    TC_OK(acg_buffer_free(ref));
}

/* A lost device hands out no native objects. */
static void test_lost_device(void **state) {
    fx *f = *state;
    acg_device *dev = f->t.dev;
    acg_stream *s = f->t.s;
    acg_buffer *b = f->y;
    tc_inject_fault_or_skip(dev);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(acg_fill(s, b, 0, BYTES, 0, 4));
    TC_OK(acg_stream_end_capture(s, &g));
    TC_OK(acg_graph_launch(g, s));
    TC_EXPECT(ERR_DEVICE_LOST, acg_stream_synchronize(s));
    acg_native_buffer nb = ACG_NATIVE_BUFFER_INIT;
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_EXPECT(ERR_DEVICE_LOST, acg_buffer_get_native(b, &nb));
    TC_LAST_ERROR_HAS("acg_buffer_get_native");
    TC_EXPECT(ERR_DEVICE_LOST, acg_device_get_native(dev, &nd));
    TC_LAST_ERROR_HAS("acg_device_get_native");
    TC_OK(acg_graph_destroy(g)); /* the fixture releases the rest, and the lost device closes */
}

#define T(fn) TC_FIXTURE2_CASE(fn, BYTES)
static const struct CMUnitTest tests[] = {
    T(test_buffer_native),
    TC_FIXTURE_CASE(test_device_native),
    T(test_cpu_foreign_work),
    T(test_lost_device),
};
#undef T
TC_MAIN("test_native", tests)
