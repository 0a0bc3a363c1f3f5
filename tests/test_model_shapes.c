/*
 * test_model_shapes.c — the shape rules of the model's kernels: each buffer's exact reach (one
 * float short is ACG_ERR_OUT_OF_RANGE), grids that do not cover the counts, bad head counts,
 * reaches that overflow 64 bits, wrong argument counts and types, in-place pairs; and that a
 * grid rounded up gives the exact grid's result (the fixture: model_kernels_fixture.h).
 */
#include "model_kernels_fixture.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- launch shapes ------------------------------------------------------------------------ */

/* Launches L's kernel on args and dims, expecting `want` and a message that has needle. */
static void expect_refusal(const launch *L, const acg_arg *args, size_t n_args,
                           const acg_dims *dims, acg_status want, const char *needle) {
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, L->name, &k));
    acg_status got = acg_kernel_launch(stream, k, dims, args, n_args);
    if (got != want) {
        fail_msg("%s: %s, expected %s: %s", L->name, acg_status_name(got), acg_status_name(want),
                 acg_last_error());
    }
    TC_LAST_ERROR_HAS(needle);
}

/* Every model kernel: a grid rounded up past the counts (global[0] to a multiple of 64,
 * global[1] of 8, one more at least) leaves every buffer as the exact grid does; each buffer's
 * exact reach fits and one float less is ACG_ERR_OUT_OF_RANGE naming the argument; a grid one
 * short in a dimension, one argument too few, and a scalar or a buffer of the wrong type are
 * ACG_ERR_INVALID_ARGUMENT. */
static void test_launch_shapes(void **state) {
    world *w = *state;
    for (int k = 0; k < K_N; k++) {
        launch L, rounded;
        int dims_used = k == K_RMSNORM || k == K_SAMPLE ? 1 : 2;
        mk_case(&L, k, w);
        mk_case(&rounded, k, w);
        acg_dims d = L.dims;
        d.global[0] = (d.global[0] / 64 + 1) * 64;
        d.global[1] = dims_used == 2 ? (d.global[1] / 8 + 1) * 8 : 1;
        TC_OK(L_run(&L, NULL));
        TC_OK(L_run(&rounded, &d));
        for (size_t i = 0; i < L.n_args; i++) {
            assert_true(!is_buf(&L.a[i]) || !memcmp(rounded.a[i].host, L.a[i].host, L.a[i].bytes));
        }
        L_free(&rounded);

        L.bare = true;
        TC_OK(L_run(&L, NULL));
        for (size_t i = 0; i < L.n_args; i++) {
            if (is_buf(&L.a[i])) {
                char needle[48];
                snprintf(needle, sizeof needle, "argument %zu reaches", i);
                L.a[i].bytes -= 4;
                L_upload(&L);
                TC_EXPECT(ERR_OUT_OF_RANGE, L_launch(&L, NULL));
                TC_LAST_ERROR_HAS(needle);
                L_release(&L);
                L.a[i].bytes += 4;
            }
        }
        L_upload(&L);
        acg_arg args[ACG_MAX_KERNEL_ARGS];
        L_args(&L, args);
        for (int i = 0; i < dims_used; i++) {
            d = L.dims;
            d.global[i]--;
            expect_refusal(&L, args, L.n_args, &d, ACG_ERR_INVALID_ARGUMENT, "the grid must cover");
        }
        expect_refusal(&L, args, L.n_args - 1, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                       "arguments, the kernel takes");
        acg_arg last = args[L.n_args - 1];
        args[L.n_args - 1] = acg_arg_i32(1);
        expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT, "is a i32");
        args[L.n_args - 1] = last;
        args[0] = acg_arg_u32(0);
        expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                       "argument 0 is a u32");
        L_free(&L);
    }
}

/* Counts a kernel cannot take: an odd head_size or one that does not divide the width (rope),
 * n_kv_heads 0 or not dividing n_heads (attention), and counts whose reach overflows 64 bits,
 * refused as out of range rather than wrapped into a small window. */
static void test_bad_counts(void **state) {
    world *w = *state;
    launch L;
    acg_arg args[ACG_MAX_KERNEL_ARGS];
    for (int k = K_ROPE; k <= K_ATTENTION; k++) {
        mk_case(&L, k, w);
        L.bare = true;
        L_upload(&L);
        L_args(&L, args);
        if (k == K_ROPE) {
            static const unsigned bad[3][2] = {{28, 7}, {DIM, 12}, {DIM, 0}}; /* width, hs */
            for (int i = 0; i < 3; i++) {
                args[5] = acg_arg_u32(bad[i][0]);
                args[6] = acg_arg_u32(bad[i][1]);
                expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                               "head_size must be even and divide width");
            }
        } else if (k == K_KV_STORE) { /* the caches reach 4 * 2^66 bytes: 16 when wrapped */
            args[7] = args[11] = args[12] = acg_arg_u32(1u << 22);
            acg_dims dims = {{1u << 22, w->st.n, 1}, {0, 0, 0}};
            expect_refusal(&L, args, L.n_args, &dims, ACG_ERR_OUT_OF_RANGE, "argument 0 reaches");
        } else {
            for (unsigned nkv = 0; nkv <= 3; nkv += 3) {
                args[9] = acg_arg_u32(nkv);
                expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                               "n_kv_heads must divide n_heads");
            }
            /* att reaches 4 * n * n_heads * 2^31 * 2^31 bytes: 0 when wrapped */
            args[9] = acg_arg_u32(NKV);
            args[13] = args[14] = acg_arg_u32(1u << 31);
            expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_OUT_OF_RANGE, "argument 1 reaches");
            /* No pages at all: a bad page id would read a sink page that does not exist. */
            L_args(&L, args);
            args[15] = acg_arg_u32(0);
            expect_refusal(&L, args, L.n_args, &L.dims, ACG_ERR_INVALID_ARGUMENT,
                           "n_pages must be at least 1");
        }
        L_free(&L);
    }
}

/* A shaped kernel's buffers must not overlap, except the pair it declares in place: matmul's
 * out over its x is refused (a tile would overwrite inputs another still reads), rmsnorm's out
 * may be its x, and gives what a separate out gives. */
static void test_in_place(void **state) {
    (void)state;
    enum { D = 8, R = 3 };
    acg_kernel *matmul, *rmsnorm;
    TC_OK(acg_kernel_get(dev, "matmul_f32", &matmul));
    TC_OK(acg_kernel_get(dev, "rmsnorm_f32", &rmsnorm));
    float host[2 * R * D + D], weights[D * D];
    rng r = {16};
    rnd_fill(&r, host, 2 * R * D + D, -1.0f, 1.0f);
    rnd_fill(&r, weights, D * D, -1.0f, 1.0f);
    acg_buffer *b = tc_buffer(dev, sizeof host), *w = tc_buffer(dev, sizeof weights);
    TC_OK(acg_copy_h2d(stream, b, 0, host, sizeof host));
    TC_OK(acg_copy_h2d(stream, w, 0, weights, sizeof weights));
    acg_dims dm = {{D, R, 1}, {0, 0, 0}};
    const acg_arg mm[] = {acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(w, 0),
                          acg_arg_u32(D / 2),   acg_arg_u32(D),       acg_arg_u32(R)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(stream, matmul, &dm, mm, 6));
    TC_LAST_ERROR_HAS("does not work in place");
    /* rmsnorm: x is b[0 .. R*D), the norm weight b[2*R*D ..); in place, then into b[R*D ..) */
    acg_dims dn = {{R, 1, 1}, {0, 0, 0}};
    const size_t f = sizeof(float);
    const acg_arg apart[] = {acg_arg_buffer(b, R * D * f),
                             acg_arg_buffer(b, 0),
                             acg_arg_buffer(b, 2 * R * D * f),
                             acg_arg_u32(D),
                             acg_arg_u32(R),
                             acg_arg_f32(1e-5f)};
    TC_OK(acg_kernel_launch(stream, rmsnorm, &dn, apart, 6));
    const acg_arg same[] = {
        acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(b, 2 * R * D * f),
        acg_arg_u32(D),       acg_arg_u32(R),       acg_arg_f32(1e-5f)};
    TC_OK(acg_kernel_launch(stream, rmsnorm, &dn, same, 6));
    /* out over x shifted by one element overlaps without being the same window */
    const acg_arg shifted[] = {
        acg_arg_buffer(b, f), acg_arg_buffer(b, 0), acg_arg_buffer(b, 2 * R * D * f),
        acg_arg_u32(D),       acg_arg_u32(R),       acg_arg_f32(1e-5f)};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(stream, rmsnorm, &dn, shifted, 6));
    TC_LAST_ERROR_HAS("without being the same window");
    float got[2 * R * D + D];
    TC_OK(acg_copy_d2h(stream, got, b, 0, sizeof got));
    TC_OK(acg_stream_synchronize(stream));
    TC_BYTES_EQUAL(got, got + R * D, R * D * f);
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_buffer_free(w));
}

static const struct CMUnitTest tests[] = {
    WORLD_CASE(test_launch_shapes, 14),
    WORLD_CASE(test_bad_counts, 15),
    cmocka_unit_test_setup_teardown(test_in_place, kernels_setup, kernels_teardown),
};
KERNELS_MAIN("test_model_shapes", tests)
