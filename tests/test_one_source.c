/* test_one_source.c — kernels written once (include/acg/kernel.h, built by acg_add_kernels from
 * one_source.acg.c) give the same bits on the device under test as on the cpu backend and as
 * the same code called on the host; their generated definitions say what the source says, and
 * the launch checks their data rules. */
#include "common.h"

#include <acg/kernel.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tc_one_kernels.h"

static acg_device *dev, *cpu;
static acg_stream *stream, *cpu_stream;

static int setup(void **state) {
    (void)state;
    TC_OK(tc_one_register_kernels());
    dev = tc_open();
    stream = tc_stream(dev);
    cpu = tc_open_cpu();
    cpu_stream = tc_stream(cpu);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    TC_OK(acg_stream_destroy(stream));
    TC_OK(acg_stream_destroy(cpu_stream));
    tc_close(dev);
    tc_close(cpu);
    TC_OK(tc_one_unregister_kernels());
    return 0;
}

/* Runs kernel name on d (stream s) with the host arrays in[i] (bytes[i] each; the first is the
 * output, uploaded too) and scalars after them, and downloads the output into out. */
static acg_status run(acg_device *d, acg_stream *s, const char *name, const acg_dims *dims,
                      void *out, const void *const *in, const size_t *bytes, size_t n_bufs,
                      const acg_arg *scalars, size_t n_scalars) {
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(d, name, &k));
    acg_buffer *b[8] = {NULL};
    acg_arg args[16];
    for (size_t i = 0; i < n_bufs; i++) {
        b[i] = tc_buffer(d, bytes[i]);
        tc_upload(s, b[i], in[i], bytes[i]);
        args[i] = acg_arg_buffer(b[i], 0);
    }
    for (size_t i = 0; i < n_scalars; i++) {
        args[n_bufs + i] = scalars[i];
    }
    acg_status st = acg_kernel_launch(s, k, dims, args, n_bufs + n_scalars);
    if (st == ACG_OK) {
        TC_OK(acg_stream_synchronize(s));
        tc_download(s, out, b[0], bytes[0]);
    }
    for (size_t i = 0; i < n_bufs; i++) {
        TC_OK(acg_buffer_free(b[i]));
    }
    return st;
}

/* acg_exp over a sweep of [-100, 100], its limits and the special values: the device's bits,
 * the cpu backend's and the host's are one. */
static void test_exp(void **state) {
    (void)state;
    enum { N = 1 << 18 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *want = malloc(N * sizeof *y);
    assert_true(x != NULL && y != NULL && want != NULL);
    static const float special[] = {
        0.0f,   -0.0f,   88.72283935546875f, 88.7228f,  89.0f, -87.0f, -87.00001f, -86.99999f,
        1e-30f, -1e-30f, INFINITY,           -INFINITY, NAN};
    const size_t n_special = sizeof special / sizeof special[0];
    for (size_t i = 0; i < N; i++) {
        x[i] = i < n_special ? special[i] : -100.0f + 200.0f * (float)i / (float)N;
        want[i] = acg_exp(x[i]);
        y[i] = -1.0f;
    }
    const acg_dims dims = {{N, 1, 1}, {0, 0, 0}};
    const void *in[2] = {y, x};
    const size_t bytes[2] = {N * sizeof(float), N * sizeof(float)};
    TC_OK(run(dev, stream, "tc_one/tc_exp", &dims, y, in, bytes, 2, NULL, 0));
    TC_BYTES_EQUAL(y, want, N * sizeof(float));
    TC_OK(run(cpu, cpu_stream, "tc_one/tc_exp", &dims, y, in, bytes, 2, NULL, 0));
    TC_BYTES_EQUAL(y, want, N * sizeof(float));
    assert_true(want[4] == INFINITY && want[6] == 0.0f && want[5] > 0.0f);
    assert_true(want[10] == INFINITY && want[11] == 0.0f && isnan(want[12]));
    free(x);
    free(y);
    free(want);
}

/* Division, square root, fma and a subtracted product: a backend that contracted a * b into the
 * subtraction, or rounded the division otherwise, differs here. */
static void test_arith(void **state) {
    (void)state;
    enum { N = 4096 };
    static float x[N], z[N], y[N], want[N];
    tc_fill_floats(x, N, 7);
    tc_fill_floats(z, N, 8);
    for (size_t i = 0; i < N; i++) {
        x[i] = 1000.0f * x[i] + 0.1f;
        z[i] = fabsf(z[i]) * 77.0f + 1e-3f;
        want[i] = acg_div(x[i], acg_sqrt(z[i])) + acg_fma(x[i], z[i], -1.0f) - x[i] * z[i] +
                  acg_mul(acg_add(x[i], z[i]), acg_sub(x[i], z[i]));
    }
    const acg_dims dims = {{N, 1, 1}, {0, 0, 0}};
    const void *in[3] = {y, x, z};
    const size_t bytes[3] = {sizeof y, sizeof x, sizeof z};
    TC_OK(run(dev, stream, "tc_one/tc_arith", &dims, y, in, bytes, 3, NULL, 0));
    TC_BYTES_EQUAL(y, want, sizeof want);
}

/* A 2-D kernel whose rule is data: exact and rounded-up grids give the same bytes; a grid short
 * of the counts and a buffer short of its reach are refused before anything runs. */
static void test_rows(void **state) {
    (void)state;
    enum { R = 37, C = 53 };
    static float out[R * C], in[R * C], w[R], bias[C], want[R * C];
    tc_fill_floats(in, R * C, 1);
    tc_fill_floats(w, R, 2);
    tc_fill_floats(bias, C, 3);
    const float scale = 1.25f;
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++) {
            want[r * C + c] = acg_fma(w[r] * scale, in[r * C + c], bias[c]);
        }
    }
    const acg_arg scalars[3] = {acg_arg_f32(scale), acg_arg_u32(C), acg_arg_u32(R)};
    const void *in4[4] = {out, in, w, bias};
    size_t bytes[4] = {sizeof out, sizeof in, sizeof w, sizeof bias};
    const acg_dims exact = {{C, R, 1}, {0, 0, 0}}, rounded = {{C + 11, R + 3, 1}, {0, 0, 0}};
    memset(out, 0, sizeof out);
    TC_OK(run(dev, stream, "tc_one/tc_rows", &exact, out, in4, bytes, 4, scalars, 3));
    TC_BYTES_EQUAL(out, want, sizeof want);
    memset(out, 0, sizeof out);
    TC_OK(run(dev, stream, "tc_one/tc_rows", &rounded, out, in4, bytes, 4, scalars, 3));
    TC_BYTES_EQUAL(out, want, sizeof want);
    const acg_dims short_grid = {{C - 1, R, 1}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT,
              run(dev, stream, "tc_one/tc_rows", &short_grid, out, in4, bytes, 4, scalars, 3));
    bytes[1] -= sizeof(float); /* in: one item short of rows * cols */
    TC_EXPECT(ERR_OUT_OF_RANGE,
              run(dev, stream, "tc_one/tc_rows", &exact, out, in4, bytes, 4, scalars, 3));
}

/* Three dimensions and every scalar type: each work item writes its own element. */
static void test_ids(void **state) {
    (void)state;
    enum { X = 7, Y = 5, Z = 3 };
    static int64_t out[X * Y * Z], want[X * Y * Z];
    const int32_t base = -123456;
    const int64_t big = INT64_C(1) << 40;
    const uint64_t mask = UINT64_C(0xffff0000ffff);
    for (uint64_t z = 0; z < Z; z++) {
        for (uint64_t y = 0; y < Y; y++) {
            for (uint64_t x = 0; x < X; x++) {
                const uint64_t at = (z * Y + y) * X + x;
                const uint64_t bits = (at * UINT64_C(0x9E3779B97F4A7C15)) & mask;
                want[at] = (int64_t)base * (int64_t)(x + 1) - (int64_t)y * 1000 + big +
                           (int64_t)bits + (int64_t)z;
            }
        }
    }
    const acg_arg scalars[4] = {acg_arg_u32(Y * Z), acg_arg_i32(base), acg_arg_i64(big),
                                acg_arg_u64(mask)};
    const void *in[1] = {out};
    const size_t bytes[1] = {sizeof out};
    const acg_dims dims = {{X, Y, Z}, {0, 0, 0}};
    memset(out, 0, sizeof out);
    TC_OK(run(dev, stream, "tc_one/tc_ids", &dims, out, in, bytes, 1, scalars, 4));
    TC_BYTES_EQUAL(out, want, sizeof want);
}

/* The generated definitions: the source's kernels in order, with what the source says of each,
 * and code for each backend the build has. */
static void test_definitions(void **state) {
    (void)state;
    assert_int_equal(tc_one_kernel_count(), 4);
    assert_null(tc_one_kernel_desc(4));
    static const char *const names[4] = {"tc_exp", "tc_arith", "tc_rows", "tc_ids"};
    for (size_t i = 0; i < 4; i++) {
        const acg_kernel_desc *d = tc_one_kernel_desc(i);
        assert_string_equal(d->name, names[i]);
        assert_int_equal(d->exactness, ACG_KERNEL_EXACT_EVERY_BACKEND);
        assert_non_null(d->cpu.fn);
        assert_true(d->n_impls >= 1);
        assert_string_equal(d->impls[0].format, ACG_KERNEL_FORMAT_OPENCL_C);
        assert_string_equal(d->impls[0].entry, names[i]);
    }
    const acg_kernel_desc *e = tc_one_kernel_desc(0), *r = tc_one_kernel_desc(2),
                          *ids = tc_one_kernel_desc(3);
    assert_int_equal(e->flags, ACG_KERNEL_ELEMENTWISE);
    assert_int_equal(e->bytes_per_item[0], 4);
    assert_int_equal(r->dims, 2);
    assert_int_equal(r->n_args, 7);
    assert_int_equal(r->types[4], ACG_ARG_F32);
    assert_int_equal(r->grid_covers[0], ACG_BY_ARG(5));
    assert_int_equal(r->grid_covers[1], ACG_BY_ARG(6));
    assert_int_equal(r->reach[0].bytes, 4);
    assert_int_equal(r->reach[0].by[0], ACG_BY_ARG(6));
    assert_int_equal(r->reach[0].by[1], ACG_BY_ARG(5));
    assert_int_equal(r->reach[2].by[1], ACG_BY_ONE);
    assert_int_equal(ids->dims, 3);
    assert_int_equal(ids->reach[0].bytes, 8);
    assert_int_equal(ids->reach[0].by[0], ACG_BY_GLOBAL(0));
    assert_int_equal(ids->types[2], ACG_ARG_I32);
    assert_int_equal(ids->types[3], ACG_ARG_I64);
    assert_int_equal(ids->types[4], ACG_ARG_U64);
    /* Registered once: the set is refused a second time, whole. */
    TC_EXPECT(ERR_INVALID_ARGUMENT, tc_one_register_kernels());
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_exp), T(test_arith), T(test_rows), T(test_ids), T(test_definitions),
};
#undef T
TC_MAIN("test_one_source", tests)
