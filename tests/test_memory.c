/* test_memory.c — device buffers, views, pinned memory, copies and fills. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device under test, a stream and the built-in kernels (common.h); or with a second stream
 * and buffers x and y, each the size the case's table entry gives. */
typedef tc_fixture fx;
typedef tc_fixture2 fx2;

/* Buffers report their size and device; size 0 and NULL out are refused; free of NULL is OK. */
static void test_buffer_basics(void **state) {
    fx *f = *state;
    acg_buffer *b = tc_buffer(f->dev, 1000);
    assert_int_equal(acg_buffer_get_size(b), 1000);
    assert_ptr_equal(acg_buffer_get_device(b), f->dev);

    acg_buffer *untouched = (acg_buffer *)(uintptr_t)0x77;
    acg_buffer *z = untouched;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_alloc(f->dev, 0, &z));
    assert_ptr_equal(z, untouched);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_alloc(f->dev, 16, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_alloc(NULL, 16, &z));
    assert_ptr_equal(z, untouched);

    TC_OK(acg_buffer_free(b));
    TC_OK(acg_buffer_free(NULL));
    assert_int_equal(acg_buffer_get_size(NULL), 0);
    assert_null(acg_buffer_get_device(NULL));
}

/* A freed buffer is a dead handle: a second free, getters and copies reject it safely. */
static void test_buffer_double_free(void **state) {
    fx *f = *state;
    acg_buffer *b = tc_buffer(f->dev, 64);
    TC_OK(acg_buffer_free(b));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_free(b));
    TC_LAST_ERROR_HAS("acg_buffer_free");
    assert_int_equal(acg_buffer_get_size(b), 0);
    assert_null(acg_buffer_get_device(b));
    char host[64] = {0};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_copy_h2d(f->s, b, 0, host, 64));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_copy_d2h(f->s, host, b, 0, 64));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_fill(f->s, b, 0, 64, 0, 1));
    /* A pointer that never was a buffer is rejected too. */
    acg_buffer *garbage = (acg_buffer *)(void *)host;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_free(garbage));
}

/* Views share their parent's memory; bad ranges are refused; the parent cannot be freed while a
 * view lives. */
static void test_views(void **state) {
    fx *f = *state;
    enum { N = 256 };
    acg_buffer *b = tc_buffer(f->dev, N * sizeof(float));
    float host[N], back[N];
    tc_fill_floats(host, N, 1);
    tc_upload(f->s, b, host, sizeof host);

    acg_buffer *v = NULL;
    TC_OK(acg_buffer_create_view(b, 64 * sizeof(float), 32 * sizeof(float), &v));
    assert_int_equal(acg_buffer_get_size(v), 32 * sizeof(float));
    assert_ptr_equal(acg_buffer_get_device(v), f->dev);
    tc_download(f->s, back, v, 32 * sizeof(float));
    TC_BYTES_EQUAL(back, host + 64, 32 * sizeof(float));

    /* Writing through the view lands in the parent. */
    TC_OK(tc_fill(f->s, &f->k, v, 0, 32, 7.5f));
    tc_download(f->s, back, b, sizeof back);
    tc_splat(host + 64, 32, 7.5f);
    TC_BYTES_EQUAL(back, host, sizeof back);

    /* A view of a view addresses the root correctly. */
    acg_buffer *vv = NULL;
    TC_OK(acg_buffer_create_view(v, 8 * sizeof(float), 4 * sizeof(float), &vv));
    TC_OK(tc_fill(f->s, &f->k, vv, 0, 4, -2.0f));
    tc_download(f->s, back, b, sizeof back);
    tc_splat(host + 72, 4, -2.0f);
    TC_BYTES_EQUAL(back, host, sizeof back);

    acg_buffer *untouched = (acg_buffer *)(uintptr_t)0x55, *w = untouched;
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_buffer_create_view(b, N * sizeof(float) - 8, 16, &w));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_buffer_create_view(b, N * sizeof(float), 1, &w));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_buffer_create_view(b, SIZE_MAX, 2, &w));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_buffer_create_view(b, 4, SIZE_MAX, &w));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_buffer_create_view(v, 0, 33 * sizeof(float), &w));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_buffer_create_view(b, 0, 0, &w));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_buffer_create_view(NULL, 0, 4, &w));
    assert_ptr_equal(w, untouched);

    TC_EXPECT(ERR_IN_USE, acg_buffer_free(b));
    TC_LAST_ERROR_HAS("acg_buffer_free");
    TC_EXPECT(ERR_IN_USE, acg_buffer_free(v)); /* vv still lives */
    TC_OK(acg_buffer_free(vv));
    TC_OK(acg_buffer_free(v));
    /* The parent survived the refused frees intact. */
    tc_download(f->s, back, b, sizeof back);
    TC_BYTES_EQUAL(back, host, sizeof back);
    TC_OK(acg_buffer_free(b));
}

/* Pinned memory is 64-byte aligned, known to acg_pinned_contains for its own device only, and
 * acg_pinned_free rejects pointers it did not return. */
static void test_pinned(void **state) {
    fx *f = *state;
    unsigned char *p = tc_pinned(f->dev, 4096);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 0xab, 4096);
    /* Without pinned memory acg_pinned_alloc gives pageable memory, which is not "contained". */
    const bool pinned = tc_has_pinned_memory(f->dev);
    assert_int_equal(acg_pinned_contains(f->dev, p, 4096), pinned);
    assert_int_equal(acg_pinned_contains(f->dev, p + 100, 200), pinned);
    assert_false(acg_pinned_contains(f->dev, p + 4000, 200));
    assert_false(acg_pinned_contains(f->dev, p - 1, 2));

    acg_device *other = tc_open();
    assert_false(acg_pinned_contains(other, p, 16));
    tc_close(other);

    char *heap = malloc(256);
    assert_false(acg_pinned_contains(f->dev, heap, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_free(heap));
    TC_LAST_ERROR_HAS("acg_pinned_free");
    free(heap);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_free(p + 64)); /* interior pointer */
    TC_OK(acg_pinned_free(NULL));

    void *untouched = (void *)(uintptr_t)0x33, *q = untouched;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_alloc(f->dev, 0, &q));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_alloc(NULL, 64, &q));
    assert_ptr_equal(q, untouched);

    TC_OK(acg_pinned_free(p));
    assert_false(acg_pinned_contains(f->dev, p, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_free(p));
}

/* ACG_NO_PINNED=1 makes acg_pinned_alloc return pageable memory that acg_pinned_contains
 * does not count as pinned, but that acg_pinned_free still frees. */
static void test_no_pinned_env(void **state) {
    fx *f = *state;
    assert_int_equal(setenv("ACG_NO_PINNED", "1", 1), 0);
    unsigned char *p = tc_pinned(f->dev, 1024);
    assert_int_equal(unsetenv("ACG_NO_PINNED"), 0);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 1, 1024);
    assert_false(acg_pinned_contains(f->dev, p, 1024));
    assert_false(acg_pinned_contains(f->dev, p, 1));
    /* It still works as a copy source and destination (eagerly). */
    acg_buffer *b = tc_buffer(f->dev, 1024);
    TC_OK(acg_copy_h2d(f->s, b, 0, p, 1024));
    memset(p, 0, 1024);
    TC_OK(acg_copy_d2h(f->s, p, b, 0, 1024));
    TC_OK(acg_stream_synchronize(f->s));
    for (int i = 0; i < 1024; i++) {
        assert_int_equal(p[i], 1);
    }
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_pinned_free(p));

    unsigned char *q = tc_pinned(f->dev, 1024);
    assert_int_equal(acg_pinned_contains(f->dev, q, 1024), tc_cap()->pinned_memory);
    TC_OK(acg_pinned_free(q));
}

/* Memory the caller owns, registered: pinned while registered (copies from and to it are
 * asynchronous and captured, as with acg_pinned_alloc's memory), refused where it overlaps,
 * ended only by the matching call, and held by a graph that copies through it. A device
 * without registration (or ACG_NO_PINNED=1) refuses with ACG_ERR_UNSUPPORTED. */
static void test_pinned_register(void **state) {
    fx *f = *state;
    enum { N = 1024 };
    const size_t bytes = N * sizeof(float);
    float *mem = aligned_alloc(4096, 2 * bytes); /* whole pages: a driver locks pages */
    assert_non_null(mem);
    float *in = mem, *out = mem + N;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_unregister(mem));
    if (!tc_cap()->pinned_register) {
        TC_EXPECT(ERR_UNSUPPORTED, acg_pinned_register(f->dev, mem, 2 * bytes));
        TC_LAST_ERROR_HAS("pinned_register");
        assert_false(acg_pinned_contains(f->dev, mem, 16));
        free(mem);
        tc_skip("cannot register host memory: checked that it refuses");
    }
    assert_int_equal(setenv("ACG_NO_PINNED", "1", 1), 0);
    TC_EXPECT(ERR_UNSUPPORTED, acg_pinned_register(f->dev, mem, 2 * bytes));
    TC_LAST_ERROR_HAS("ACG_NO_PINNED");
    assert_int_equal(unsetenv("ACG_NO_PINNED"), 0);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(f->dev, NULL, bytes));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(f->dev, mem, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(f->dev, (void *)(UINTPTR_MAX - 15), 64));
    TC_LAST_ERROR_HAS("wraps");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_register(NULL, mem, bytes));

    TC_OK(acg_pinned_register(f->dev, mem, 2 * bytes));
    assert_true(acg_pinned_contains(f->dev, mem, 2 * bytes));
    assert_true(acg_pinned_contains(f->dev, out + 3, 16));
    assert_false(acg_pinned_contains(f->dev, mem, 2 * bytes + 1));
    acg_device *other = tc_open();
    assert_false(acg_pinned_contains(other, mem, 16));
    /* Registered once, for one device. */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(other, mem, 2 * bytes));
    TC_LAST_ERROR_HAS("overlaps");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(f->dev, out, 4));
    tc_close(other);
    void *p = tc_pinned(f->dev, 256);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_pinned_register(f->dev, p, 256));
    /* Each ends with its own call. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_free(mem));
    TC_LAST_ERROR_HAS("acg_pinned_unregister");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_unregister(p));
    TC_LAST_ERROR_HAS("acg_pinned_free");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_unregister(out));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_unregister(NULL));
    TC_OK(acg_pinned_free(p));

    /* Copies through it: eagerly, then captured and replayed with new contents. */
    acg_buffer *a = tc_buffer(f->dev, bytes);
    tc_fill_floats(in, N, 5);
    memset(out, 0, bytes);
    TC_OK(acg_copy_h2d(f->s, a, 0, in, bytes));
    TC_OK(acg_copy_d2h(f->s, out, a, 0, bytes));
    TC_OK(acg_stream_synchronize(f->s));
    TC_BYTES_EQUAL(out, in, bytes);
    if (tc_has_graphs(f->dev, f->s)) {
        acg_graph_pool *pool = tc_pool(f->dev);
        TC_OK(acg_stream_begin_capture(f->s, pool));
        TC_OK(acg_copy_h2d(f->s, a, 0, in, bytes));
        TC_OK(tc_add(f->s, &f->k, a, 0, a, 0, N, 1.0f));
        TC_OK(acg_copy_d2h(f->s, out, a, 0, bytes));
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(f->s, &g));
        tc_fill_floats(in, N, 6);
        TC_OK(acg_graph_launch(g, f->s));
        TC_OK(acg_stream_synchronize(f->s));
        for (int i = 0; i < N; i++) {
            assert_true(out[i] == in[i] + 1.0f);
        }
        /* The graph holds the registration. */
        TC_EXPECT(ERR_IN_USE, acg_pinned_unregister(mem));
        TC_LAST_ERROR_HAS("graph");
        assert_true(acg_pinned_contains(f->dev, mem, 2 * bytes));
        TC_OK(acg_graph_destroy(g));
        TC_OK(acg_graph_pool_destroy(pool));
    }
    TC_OK(acg_buffer_free(a));
    TC_OK(acg_pinned_unregister(mem));
    assert_false(acg_pinned_contains(f->dev, mem, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_pinned_unregister(mem));
    /* The memory stays the caller's, with what the copies wrote. */
    assert_true(out[0] == in[0] + 1.0f || !tc_cap()->graphs);
    free(mem);
    if (!tc_cap()->graphs) {
        tc_skip("no graphs: no graph copied through the registered memory");
    }
}

/* h2d, d2d and d2h (pageable and pinned) move exactly the bytes asked for, at the offsets
 * asked for (a and b: the fixture's x and y, COPIES_N floats each). */
enum { COPIES_N = 1024 };
static void test_copies(void **state) {
    fx2 *f = *state;
    enum { N = COPIES_N };
    const size_t bytes = N * sizeof(float);
    acg_buffer *a = f->x, *b = f->y;
    tc_poison(f->t.s, a);
    tc_poison(f->t.s, b);
    float src[N], back[N], want[N];
    tc_fill_floats(src, N, 2);

    /* pageable h2d of the middle half, d2d of a quarter to b's start, pageable d2h */
    TC_OK(acg_copy_h2d(f->t.s, a, bytes / 4, src, bytes / 2));
    TC_OK(acg_copy_d2d(f->t.s, b, 0, a, bytes / 4, bytes / 4));
    TC_OK(acg_copy_d2h(f->t.s, back, a, 0, bytes));
    uint32_t poison = 0xdeadbeefu;
    for (size_t i = 0; i < N; i++) {
        memcpy(&want[i], &poison, 4);
    }
    memcpy(want + N / 4, src, bytes / 2);
    TC_BYTES_EQUAL(back, want, bytes);
    TC_OK(acg_copy_d2h(f->t.s, back, b, 0, bytes));
    for (size_t i = 0; i < N; i++) {
        memcpy(&want[i], &poison, 4);
    }
    memcpy(want, src, bytes / 4);
    TC_BYTES_EQUAL(back, want, bytes);

    /* pinned h2d and d2h, with a source offset on the way out */
    float *pin_in = tc_pinned(f->t.dev, bytes);
    float *pin_out = tc_pinned(f->t.dev, bytes);
    tc_fill_floats(pin_in, N, 3);
    memset(pin_out, 0, bytes);
    TC_OK(acg_copy_h2d(f->t.s, a, 0, pin_in, bytes));
    TC_OK(acg_copy_d2h(f->t.s, pin_out, a, 8, bytes - 8));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_BYTES_EQUAL(pin_out, pin_in + 2, bytes - 8);

    /* non-overlapping d2d within one buffer */
    TC_OK(acg_copy_d2d(f->t.s, a, bytes / 2, a, 0, bytes / 2));
    TC_OK(acg_copy_d2h(f->t.s, back, a, 0, bytes));
    TC_BYTES_EQUAL(back, pin_in, bytes / 2);
    TC_BYTES_EQUAL(back + N / 2, pin_in, bytes / 2);

    TC_OK(acg_pinned_free(pin_in));
    TC_OK(acg_pinned_free(pin_out));
}

/* A pageable h2d source is read before the call returns; a pageable d2h has completed when it
 * returns, even behind queued work. */
static void test_pageable_copy_semantics(void **state) {
    fx *f = *state;
    enum { BIG = 1 << 20, N = 256 };
    acg_buffer *big = tc_buffer(f->dev, BIG * sizeof(float));
    acg_buffer *b = tc_buffer(f->dev, N * sizeof(float));
    float *src = malloc(N * sizeof(float));
    float want[N], back[N];
    tc_fill_floats(src, N, 4);
    memcpy(want, src, sizeof want);
    for (int i = 0; i < 8; i++) { /* keep the stream busy so the copy really queues */
        TC_OK(tc_fill(f->s, &f->k, big, 0, BIG, (float)i));
    }
    TC_OK(acg_copy_h2d(f->s, b, 0, src, N * sizeof(float)));
    memset(src, 0xff, N * sizeof(float));
    free(src);
    for (int i = 0; i < 8; i++) {
        TC_OK(tc_fill(f->s, &f->k, big, 0, BIG, (float)i));
    }
    memset(back, 0, sizeof back);
    TC_OK(acg_copy_d2h(f->s, back, b, 0, sizeof back)); /* no synchronize */
    TC_BYTES_EQUAL(back, want, sizeof back);
    TC_OK(acg_buffer_free(big));
    TC_OK(acg_buffer_free(b));
}

/* acg_fill writes 1-, 2- and 4-byte patterns (low bytes, host order) over exactly its range. */
static void test_fill_patterns(void **state) {
    fx *f = *state;
    enum { SZ = 512 };
    acg_buffer *b = tc_buffer(f->dev, SZ);
    unsigned char back[SZ], want[SZ];
    static const size_t psizes[] = {1, 2, 4};
    const uint32_t pattern = 0x11223344u;
    for (size_t t = 0; t < 3; t++) {
        size_t ps = psizes[t];
        TC_OK(acg_fill(f->s, b, 0, SZ, 0, 1));
        TC_OK(acg_fill(f->s, b, 8, SZ - 16, pattern, ps));
        TC_OK(acg_copy_d2h(f->s, back, b, 0, SZ));
        memset(want, 0, SZ);
        const uint8_t p8 = (uint8_t)pattern;
        const uint16_t p16 = (uint16_t)pattern;
        const uint32_t p32 = pattern;
        const void *low = ps == 1   ? (const void *)&p8
                          : ps == 2 ? (const void *)&p16
                                    : (const void *)&p32;
        for (size_t off = 8; off < SZ - 8; off += ps) {
            memcpy(want + off, low, ps);
        }
        TC_BYTES_EQUAL(back, want, SZ);
    }
    TC_OK(acg_buffer_free(b));
}

/* Offsets and sizes that leave a buffer are ACG_ERR_OUT_OF_RANGE; bad sizes, NULL pointers,
 * misaligned fills and overlapping d2d are ACG_ERR_INVALID_ARGUMENT; nothing is written (a and
 * b: the fixture's x and y, ERRORS_SZ bytes each). */
enum { ERRORS_SZ = 256 };
static void test_copy_errors(void **state) {
    fx2 *f = *state;
    enum { SZ = ERRORS_SZ };
    acg_buffer *a = f->x, *b = f->y;
    TC_OK(acg_fill(f->t.s, a, 0, SZ, 0x5a, 1));
    TC_OK(acg_fill(f->t.s, b, 0, SZ, 0x5a, 1));
    unsigned char host[2 * SZ];
    memset(host, 1, sizeof host);

    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_h2d(f->t.s, a, 1, host, SZ));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_h2d(f->t.s, a, SZ, host, 1));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_h2d(f->t.s, a, SIZE_MAX, host, 2));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_h2d(f->t.s, a, 0, host, SZ + 1));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_d2h(f->t.s, host, a, SZ - 4, 8));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_d2h(f->t.s, host, a, 8, SIZE_MAX - 4));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_d2d(f->t.s, b, 0, a, 1, SZ));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_copy_d2d(f->t.s, b, 1, a, 0, SZ));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_fill(f->t.s, a, 4, SZ, 0, 4));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_fill(f->t.s, a, SIZE_MAX - 3, 4, 0, 4));

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_h2d(f->t.s, a, 0, NULL, 16));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_h2d(f->t.s, a, 0, host, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2h(f->t.s, NULL, a, 0, 16));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2h(f->t.s, host, a, 0, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2d(f->t.s, b, 0, a, 0, 0));
    /* overlapping ranges of one buffer, and of two views of one buffer */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2d(f->t.s, a, 16, a, 0, 32));
    TC_LAST_ERROR_HAS("acg_copy_d2d");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2d(f->t.s, a, 0, a, 0, 32));
    acg_buffer *v1 = NULL, *v2 = NULL;
    TC_OK(acg_buffer_create_view(a, 0, 64, &v1));
    TC_OK(acg_buffer_create_view(a, 32, 64, &v2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_copy_d2d(f->t.s, v2, 0, v1, 0, 64));
    TC_OK(acg_copy_d2d(f->t.s, v2, 32, v1, 0, 32)); /* a[64,96) <- a[0,32): disjoint */
    /* fills: misaligned offset or size, bad pattern size */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 2, 16, 0, 4));
    TC_LAST_ERROR_HAS("acg_fill");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 0, 18, 0, 4));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 1, 16, 0, 2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 0, 12, 0, 3));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 0, 16, 0, 8));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 0, 16, 0, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_fill(f->t.s, a, 0, 0, 0, 1));
    /* NULL handles */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_copy_h2d(NULL, a, 0, host, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_copy_h2d(f->t.s, NULL, 0, host, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_copy_d2d(f->t.s, a, 0, NULL, 0, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_fill(NULL, a, 0, 16, 0, 1));

    /* Nothing of the refused calls was written. */
    TC_OK(acg_stream_synchronize(f->t.s));
    unsigned char back[SZ], want[SZ];
    memset(want, 0x5a, SZ);
    tc_download(f->t.s, back, b, SZ);
    TC_BYTES_EQUAL(back, want, SZ);
    tc_download(f->t.s, back, a, SZ);
    TC_BYTES_EQUAL(back, want, SZ);
    TC_OK(acg_buffer_free(v1));
    TC_OK(acg_buffer_free(v2));
}

/* Buffers of one device used on a stream of another are ACG_ERR_WRONG_DEVICE. */
static void test_wrong_device(void **state) {
    fx *f = *state;
    acg_device *d2 = tc_open();
    assert_ptr_not_equal(d2, f->dev);
    acg_buffer *mine = tc_buffer(f->dev, 64);
    acg_buffer *theirs = tc_buffer(d2, 64);
    unsigned char host[64] = {0};
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_h2d(f->s, theirs, 0, host, 64));
    TC_LAST_ERROR_HAS("acg_copy_h2d");
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_d2h(f->s, host, theirs, 0, 64));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_d2d(f->s, mine, 0, theirs, 0, 64));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_d2d(f->s, theirs, 0, mine, 0, 64));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_fill(f->s, theirs, 0, 64, 0, 1));
    TC_OK(acg_buffer_free(theirs));
    /* The same for a device of another backend (unless this is the cpu backend). */
    acg_device *cpu = tc_open_cpu();
    acg_buffer *cpus = tc_buffer(cpu, 64);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_d2d(f->s, mine, 0, cpus, 0, 64));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_copy_h2d(f->s, cpus, 0, host, 64));
    TC_OK(acg_buffer_free(cpus));
    tc_close(cpu);
    TC_OK(acg_buffer_free(mine));
    tc_close(d2);
}

/* Freeing a buffer or pinned memory waits for queued work that uses it (checked for real under
 * AddressSanitizer: the queued work would touch freed memory). */
static void test_free_waits_for_queued_work(void **state) {
    fx *f = *state;
    acg_buffer *src = tc_buffer(f->dev, TC_BIG * sizeof(float));
    acg_buffer *dst = tc_buffer(f->dev, TC_BIG * sizeof(float));
    float *pin = tc_pinned(f->dev, TC_BIG * sizeof(float));
    TC_OK(tc_fill(f->s, &f->k, src, 0, TC_BIG, 1.5f));
    for (int i = 0; i < 4; i++) {
        TC_OK(tc_copy(f->s, &f->k, dst, 0, src, 0, TC_BIG));
    }
    TC_OK(acg_copy_d2h(f->s, pin, dst, 0, TC_BIG * sizeof(float)));
    TC_OK(acg_buffer_free(src));
    TC_OK(acg_stream_query(f->s)); /* the free waited for the device */
    for (size_t i = 0; i < TC_BIG; i += 4099) {
        assert_true(pin[i] == 1.5f);
    }
    TC_OK(tc_fill(f->s, &f->k, dst, 0, TC_BIG, 2.5f));
    TC_OK(acg_copy_d2h(f->s, pin, dst, 0, TC_BIG * sizeof(float)));
    TC_OK(acg_pinned_free(pin));
    TC_OK(acg_stream_query(f->s));
    TC_OK(acg_buffer_free(dst));
}

/* Device memory is accounted: buffers and graph pool chunks count as allocations and bytes in
 * use while they live, the peak remembers the most, and a reset restarts it from now. */
static void test_memory_stats(void **state) {
    fx *f = *state;
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT,
                     m2 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_device_get_memory_stats(f->dev, &m0));
    acg_buffer *a = tc_buffer(f->dev, 4096);
    acg_buffer *b = tc_buffer(f->dev, 1000);
    TC_OK(acg_device_get_memory_stats(f->dev, &m1));
    assert_int_equal(m1.allocations, m0.allocations + 2);
    assert_int_equal(m1.bytes_in_use, m0.bytes_in_use + 5096);
    assert_true(m1.peak_bytes >= m1.bytes_in_use);
    acg_buffer *view;
    TC_OK(acg_buffer_create_view(a, 0, 64, &view)); /* a view allocates nothing */
    TC_OK(acg_buffer_free(view));
    TC_OK(acg_buffer_free(a));
    TC_OK(acg_device_get_memory_stats(f->dev, &m2));
    assert_int_equal(m2.allocations, m1.allocations);
    assert_int_equal(m2.bytes_in_use, m0.bytes_in_use + 1000);
    assert_int_equal(m2.peak_bytes, m1.peak_bytes);
    TC_OK(acg_device_reset_peak_memory(f->dev));
    TC_OK(acg_device_get_memory_stats(f->dev, &m2));
    assert_int_equal(m2.peak_bytes, m2.bytes_in_use);
    TC_OK(acg_buffer_free(b));

    if (acg_device_get_capability(f->dev)->graphs) {
        acg_stream *s = tc_stream(f->dev);
        acg_buffer *scratch;
        acg_graph *g;
        TC_OK(acg_device_get_memory_stats(f->dev, &m1));
        TC_OK(acg_stream_begin_capture(s, NULL));
        TC_OK(acg_stream_alloc(s, 100, &scratch));
        TC_OK(acg_stream_end_capture(s, &g));
        TC_OK(acg_device_get_memory_stats(f->dev, &m2));
        assert_int_equal(m2.allocations, m1.allocations + 1); /* the private pool's chunk */
        assert_true(m2.bytes_in_use >= m1.bytes_in_use + 100);
        TC_OK(acg_graph_destroy(g));
        TC_OK(acg_device_get_memory_stats(f->dev, &m2));
        assert_int_equal(m2.bytes_in_use, m1.bytes_in_use);
        TC_OK(acg_stream_destroy(s));
    }
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_get_memory_stats(NULL, &m0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_get_memory_stats(f->dev, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_reset_peak_memory(NULL));
}

/* The counting allocator, except that it refuses what no machine has, as posix_memalign does:
 * under a sanitizer the system allocator aborts on such a request instead of returning NULL. */
#define HUGE_BYTES ((size_t)1 << 62)
static void *no_huge_alloc(void *user, void *ptr, size_t size, size_t align) {
    if (ptr == NULL && size >= HUGE_BYTES / 2) {
        return NULL;
    }
    return tc_alloc_fn(user, ptr, size, align);
}

/* What a refused huge allocation's detail says: the call and the size (on opencl the vendor's
 * limit or call too), not just the status's text. */
static void expect_huge_detail(const char *call, const char *size_text) {
    print_message("%s(%s): %s\n", call, size_text, acg_last_error());
    assert_string_not_equal(acg_last_error(), acg_status_string(ACG_ERR_OUT_OF_MEMORY));
    TC_LAST_ERROR_HAS(call);
    TC_LAST_ERROR_HAS(size_text);
    if (tc_backend_is("opencl")) {
        TC_LAST_ERROR_HAS("CL_");
    }
}

/* An allocation larger than the device can provide is ACG_ERR_OUT_OF_MEMORY on every backend,
 * never a bad argument, and its detail says why (expect_huge_detail). Nothing is allocated or
 * accounted. */
static void test_huge_alloc(void **state) {
    (void)state;
    TC_OK(acg_set_allocator(no_huge_alloc, NULL));
    acg_device *dev = tc_open();
    static const size_t sizes[] = {HUGE_BYTES, SIZE_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char size_text[32];
        snprintf(size_text, sizeof size_text, "%zu", sizes[i]);
        acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
        TC_OK(acg_device_get_memory_stats(dev, &m0));
        acg_buffer *const untouched = (acg_buffer *)(uintptr_t)0x77;
        acg_buffer *b = untouched;
        TC_EXPECT(ERR_OUT_OF_MEMORY, acg_buffer_alloc(dev, sizes[i], &b));
        expect_huge_detail("acg_buffer_alloc", size_text);
        assert_ptr_equal(b, untouched);
        TC_OK(acg_device_get_memory_stats(dev, &m1));
        assert_int_equal(m1.allocations, m0.allocations);
        assert_int_equal(m1.bytes_in_use, m0.bytes_in_use);

        void *const untouched_host = (void *)(uintptr_t)0x33;
        void *p = untouched_host;
        TC_EXPECT(ERR_OUT_OF_MEMORY, acg_pinned_alloc(dev, sizes[i], &p));
        expect_huge_detail("acg_pinned_alloc", size_text);
        assert_ptr_equal(p, untouched_host);
    }
    /* The device still works after the refusals. */
    acg_buffer *b = tc_buffer(dev, 64);
    TC_OK(acg_buffer_free(b));
    tc_close(dev);
    TC_OK(acg_set_allocator(NULL, NULL));
}

static const struct CMUnitTest tests[] = {
    TC_FIXTURE_CASE(test_buffer_basics),
    TC_FIXTURE_CASE(test_buffer_double_free),
    TC_FIXTURE_CASE(test_views),
    TC_FIXTURE_CASE(test_pinned),
    TC_FIXTURE_CASE(test_no_pinned_env),
    TC_FIXTURE_CASE(test_pinned_register),
    TC_FIXTURE2_CASE(test_copies, COPIES_N * sizeof(float)),
    TC_FIXTURE_CASE(test_pageable_copy_semantics),
    TC_FIXTURE_CASE(test_fill_patterns),
    TC_FIXTURE2_CASE(test_copy_errors, ERRORS_SZ),
    TC_FIXTURE_CASE(test_wrong_device),
    TC_FIXTURE_CASE(test_free_waits_for_queued_work),
    TC_FIXTURE_CASE(test_memory_stats),
    cmocka_unit_test(test_huge_alloc),
};
TC_MAIN("test_memory", tests)
