/* test_kernel.c — the built-in kernels against host references, and launch validation. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

enum { N = 1000, CAP = 1200 };

typedef struct fx {
    tc_fixture t;      /* the device under test, a stream, the built-in kernels */
    acg_buffer *x, *y; /* CAP floats each */
} fx;

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->x = tc_buffer(f->t.dev, CAP * sizeof(float));
    f->y = tc_buffer(f->t.dev, CAP * sizeof(float));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_buffer_free(f->x));
    TC_OK(acg_buffer_free(f->y));
    return tc_fixture_teardown(state);
}

/* Uploads seeded data to x and y and returns copies of it. */
static void seed(fx *f, float *hx, float *hy) {
    tc_fill_floats(hx, CAP, 11);
    tc_fill_floats(hy, CAP, 12);
    tc_upload(f->t.s, f->x, hx, CAP * sizeof(float));
    tc_upload(f->t.s, f->y, hy, CAP * sizeof(float));
}

static void expect_y(fx *f, const float *want) {
    float back[CAP];
    tc_download(f->t.s, back, f->y, sizeof back);
    TC_BYTES_EQUAL(back, want, sizeof back);
}

/* Looked-up kernels report their names; unknown names are ACG_ERR_NOT_FOUND, the model's
 * kernels included: they are not the core's (the model registers them). */
static void test_kernel_lookup(void **state) {
    fx *f = *state;
    assert_string_equal(acg_kernel_get_name(f->t.k.fill), "fill_f32");
    assert_string_equal(acg_kernel_get_name(f->t.k.add), "add_scalar_f32");
    assert_string_equal(acg_kernel_get_name(f->t.k.axpy), "axpy_f32");
    assert_string_equal(acg_kernel_get_name(f->t.k.copy), "copy_f32");
    assert_null(acg_kernel_get_name(NULL));
    acg_kernel *untouched = (acg_kernel *)(uintptr_t)0x21, *k = untouched;
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(f->t.dev, "no_such_kernel", &k));
    TC_LAST_ERROR_HAS("acg_kernel_get");
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(f->t.dev, "fill_f3", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(f->t.dev, "swiglu_f32", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(f->t.dev, "matmul_f32", &k));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kernel_get(NULL, "fill_f32", &k));
    assert_ptr_equal(k, untouched);
}

/* fill_f32 writes value to exactly its window. */
static void test_fill_f32(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_fill(f->t.s, &f->t.k, f->y, 40 * sizeof(float), N, -3.125f));
    TC_OK(acg_stream_synchronize(f->t.s));
    tc_splat(hy + 40, N, -3.125f);
    expect_y(f, hy);
}

/* add_scalar_f32: y[i] = x[i] + a over offset windows. */
static void test_add_scalar_f32(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 8 * sizeof(float), f->x, 100 * sizeof(float), N, 2.5f));
    TC_OK(acg_stream_synchronize(f->t.s));
    for (size_t i = 0; i < N; i++) {
        hy[8 + i] = hx[100 + i] + 2.5f;
    }
    expect_y(f, hy);
}

/* axpy_f32: y[i] = a * x[i] + y[i]. */
static void test_axpy_f32(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_axpy(f->t.s, &f->t.k, f->y, 0, f->x, 200 * sizeof(float), N, 1.5f));
    TC_OK(acg_stream_synchronize(f->t.s));
    for (size_t i = 0; i < N; i++) {
        hy[i] = 1.5f * hx[200 + i] + hy[i];
    }
    expect_y(f, hy);
}

/* copy_f32: dst[i] = src[i], offsets select the windows. */
static void test_copy_f32(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_copy(f->t.s, &f->t.k, f->y, 199 * sizeof(float), f->x, 1 * sizeof(float), N));
    TC_OK(acg_stream_synchronize(f->t.s));
    memcpy(hy + 199, hx + 1, N * sizeof(float));
    expect_y(f, hy);
}

/* A chain of all four kernels, queued without waits, equals the host reference. */
static void test_kernel_chain(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_fill(f->t.s, &f->t.k, f->x, 0, N, 0.75f));
    TC_OK(tc_axpy(f->t.s, &f->t.k, f->y, 0, f->x, 0, N, 2.0f));
    TC_OK(tc_add(f->t.s, &f->t.k, f->x, 0, f->y, 0, N, -1.0f));
    TC_OK(tc_copy(f->t.s, &f->t.k, f->y, 0, f->x, 0, N));
    TC_OK(acg_stream_synchronize(f->t.s));
    for (size_t i = 0; i < N; i++) {
        float xi = 0.75f;
        float yi = 2.0f * xi + hy[i];
        hy[i] = yi + -1.0f;
    }
    expect_y(f, hy);
}

/* A refused launch returns its specific status and writes nothing. */
static void test_launch_errors(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    acg_dims d = acg_dims_1d(N);
    acg_arg good[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 0), acg_arg_f32(1.0f)};

    /* argument count */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d, good, 2));
    TC_LAST_ERROR_HAS("acg_kernel_launch");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, good, 3));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, good, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, NULL, 2));
    acg_arg many[ACG_MAX_KERNEL_ARGS + 1];
    for (size_t i = 0; i < ACG_MAX_KERNEL_ARGS + 1; i++) {
        many[i] = acg_arg_f32(0.0f);
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT,
              acg_kernel_launch(f->t.s, f->t.k.fill, &d, many, ACG_MAX_KERNEL_ARGS + 1));
    /* argument types */
    acg_arg bad_scalar[2] = {acg_arg_buffer(f->y, 0), acg_arg_i32(1)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, bad_scalar, 2));
    acg_arg scalar_for_buf[2] = {acg_arg_f32(1.0f), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, scalar_for_buf, 2));
    acg_arg buf_for_scalar[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 0),
                                 acg_arg_buffer(f->x, 0)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.add, &d, buf_for_scalar, 3));
    acg_arg bogus_type[2] = {acg_arg_buffer(f->y, 0), acg_arg_f32(1.0f)};
    bogus_type[1].type = (acg_arg_type)99;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, bogus_type, 2));

    /* windows out of range: too many items, or an offset pushing the window out */
    acg_dims too_many = acg_dims_1d(CAP + 1);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->t.s, f->t.k.axpy, &too_many, good, 3));
    acg_arg shifted[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 201 * sizeof(float)),
                          acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->t.s, f->t.k.axpy, &d, shifted, 3));
    acg_arg far[2] = {acg_arg_buffer(f->y, SIZE_MAX - 3), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->t.s, f->t.k.fill, &d, far, 2));

    /* zero grid */
    acg_dims zero = acg_dims_1d(0);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &zero, good, 3));
    acg_dims zero_y = acg_dims_1d(N);
    zero_y.global[1] = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &zero_y, good, 3));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, NULL, good, 3));

    /* misaligned offsets for f32 */
    acg_arg mis_y[3] = {acg_arg_buffer(f->y, 2), acg_arg_buffer(f->x, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d, mis_y, 3));
    acg_arg mis_x[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 6), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d, mis_x, 3));

    /* windows of one buffer that partially overlap (the same window, in place, is fine), also
     * through a view */
    acg_arg overlap[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->y, 4 * sizeof(float)),
                          acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d, overlap, 3));
    TC_LAST_ERROR_HAS("overlap");
    acg_arg overlap_copy[2] = {acg_arg_buffer(f->x, 4), acg_arg_buffer(f->x, 0)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.copy, &d, overlap_copy, 2));
    acg_buffer *view = NULL;
    TC_OK(acg_buffer_create_view(f->y, 8 * sizeof(float), N * sizeof(float), &view));
    acg_arg overlap_view[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(view, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.add, &d, overlap_view, 3));

    /* handles */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kernel_launch(NULL, f->t.k.axpy, &d, good, 3));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kernel_launch(f->t.s, NULL, &d, good, 3));
    acg_arg null_buf[2] = {acg_arg_buffer(NULL, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kernel_launch(f->t.s, f->t.k.fill, &d, null_buf, 2));

    TC_OK(acg_stream_synchronize(f->t.s));
    expect_y(f, hy);
    float back[CAP];
    tc_download(f->t.s, back, f->x, sizeof back);
    TC_BYTES_EQUAL(back, hx, sizeof back);
    TC_OK(acg_buffer_free(view));
}

/* Two buffer arguments that are the same window work in place; disjoint windows of one buffer
 * work as two buffers would. */
static void test_in_place_and_disjoint(void **state) {
    fx *f = *state;
    float hx[CAP], hy[CAP];
    seed(f, hx, hy);
    TC_OK(tc_axpy(f->t.s, &f->t.k, f->y, 16 * sizeof(float), f->y, 16 * sizeof(float), 100, 0.75f));
    TC_OK(tc_add(f->t.s, &f->t.k, f->y, 600 * sizeof(float), f->y, 0, 500, -1.5f));
    TC_OK(tc_copy(f->t.s, &f->t.k, f->y, 0, f->y, 1100 * sizeof(float), 100));
    TC_OK(acg_stream_synchronize(f->t.s));
    for (size_t i = 16; i < 116; i++) {
        hy[i] = 0.75f * hy[i] + hy[i];
    }
    for (size_t i = 0; i < 500; i++) {
        hy[600 + i] = hy[i] + -1.5f;
    }
    memcpy(hy, hy + 1100, 100 * sizeof(float));
    expect_y(f, hy);
}

/* Kernels and buffers of another device are ACG_ERR_WRONG_DEVICE. */
static void test_launch_wrong_device(void **state) {
    fx *f = *state;
    acg_device *d2 = tc_open();
    tc_kernels k2;
    tc_kernels_get(d2, &k2);
    acg_buffer *b2 = tc_buffer(d2, CAP * sizeof(float));
    acg_dims d = acg_dims_1d(N);
    acg_arg mine[2] = {acg_arg_buffer(f->y, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_kernel_launch(f->t.s, k2.fill, &d, mine, 2));
    TC_LAST_ERROR_HAS("acg_kernel_launch");
    acg_arg theirs[2] = {acg_arg_buffer(b2, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_kernel_launch(f->t.s, f->t.k.fill, &d, theirs, 2));
    acg_arg mixed[3] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(b2, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_kernel_launch(f->t.s, f->t.k.add, &d, mixed, 3));
    TC_OK(acg_buffer_free(b2));
    tc_close(d2);
    /* The same for a device of another backend (unless this is the cpu backend). */
    acg_device *cpu = tc_open_cpu();
    tc_kernels kc;
    tc_kernels_get(cpu, &kc);
    acg_buffer *bc = tc_buffer(cpu, CAP * sizeof(float));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_kernel_launch(f->t.s, kc.fill, &d, mine, 2));
    acg_arg cpus[2] = {acg_arg_buffer(bc, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_kernel_launch(f->t.s, f->t.k.fill, &d, cpus, 2));
    TC_OK(acg_buffer_free(bc));
    tc_close(cpu);
}

/* The argument array is copied at launch: reusing it at once does not change queued work. */
static void test_args_copied(void **state) {
    fx *f = *state;
    enum { BIG = 1 << 20 };
    acg_buffer *big = tc_buffer(f->t.dev, BIG * sizeof(float));
    for (int i = 0; i < 4; i++) { /* keep the stream busy */
        TC_OK(tc_fill(f->t.s, &f->t.k, big, 0, BIG, 0.0f));
    }
    acg_dims d = acg_dims_1d(N);
    acg_arg args[2] = {acg_arg_buffer(f->y, 0), acg_arg_f32(9.0f)};
    TC_OK(acg_kernel_launch(f->t.s, f->t.k.fill, &d, args, 2));
    args[0] = acg_arg_buffer(f->x, 0);
    args[1] = acg_arg_f32(-9.0f);
    d.global[0] = 1;
    TC_OK(acg_stream_synchronize(f->t.s));
    float back[N], want[N];
    TC_OK(acg_copy_d2h(f->t.s, back, f->y, 0, sizeof back));
    tc_splat(want, N, 9.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);
    TC_OK(acg_buffer_free(big));
}

/* The built-ins are 1-D: a grid or work group in another dimension would run a different
 * amount of work on each backend, so it is refused; a view's own offset counts for alignment. */
static void test_dims_and_view_alignment(void **state) {
    fx *f = *state;
    acg_dims d2 = {{64, 8, 1}, {0, 0, 0}};
    acg_arg args[] = {acg_arg_buffer(f->y, 0), acg_arg_buffer(f->x, 0), acg_arg_f32(1.0f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d2, args, 3));
    TC_LAST_ERROR_HAS("global[1]");
    acg_dims d3 = {{64, 1, 2}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &d3, args, 3));
    acg_dims l2 = {{64, 1, 1}, {0, 2, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.axpy, &l2, args, 3));
    /* A work-group size in dimension 0 alone is fine: the others default to 1. */
    acg_dims l1 = {{64, 1, 1}, {16, 0, 0}};
    TC_OK(tc_fill(f->t.s, &f->t.k, f->y, 0, 64, 1.0f));
    TC_OK(tc_fill(f->t.s, &f->t.k, f->x, 0, 64, 2.0f));
    TC_OK(acg_kernel_launch(f->t.s, f->t.k.axpy, &l1, args, 3));
    float back[64], want[64];
    tc_download(f->t.s, back, f->y, sizeof back);
    tc_splat(want, 64, 3.0f);
    TC_BYTES_EQUAL(want, back, sizeof back);

    acg_buffer *v;
    TC_OK(acg_buffer_create_view(f->y, 2, 32, &v));
    acg_arg fill[] = {acg_arg_buffer(v, 0), acg_arg_f32(0.0f)};
    acg_dims d = acg_dims_1d(4);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->t.s, f->t.k.fill, &d, fill, 2));
    TC_LAST_ERROR_HAS("multiple of");
    fill[0] = acg_arg_buffer(v, 2); /* 2 + 2 = 4: aligned */
    TC_OK(acg_kernel_launch(f->t.s, f->t.k.fill, &d, fill, 2));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_buffer_free(v));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_kernel_lookup),
    T(test_fill_f32),
    T(test_add_scalar_f32),
    T(test_axpy_f32),
    T(test_copy_f32),
    T(test_kernel_chain),
    T(test_launch_errors),
    T(test_in_place_and_disjoint),
    T(test_launch_wrong_device),
    T(test_args_copied),
    T(test_dims_and_view_alignment),
};
#undef T
TC_MAIN("test_kernel", tests)
