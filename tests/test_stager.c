/* test_stager.c — the pinned stager: one copy per upload, ring reuse, the mirror, growth,
 * argument checks, capture refusal and sharing between threads. */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

static acg_stager *make_stager(acg_device *dev, uint32_t depth, size_t bytes, bool mirror) {
    acg_stager_config cfg = ACG_STAGER_CONFIG_INIT;
    cfg.depth = depth;
    cfg.buffer_bytes = bytes;
    cfg.mirror = mirror;
    acg_stager *sg = NULL;
    TC_OK(acg_stager_create(dev, &cfg, &sg));
    assert_non_null(sg);
    return sg;
}

/* The device under test, a stream and the built-in kernels (common.h), and what a case uploads
 * to and through, which the teardown releases (destroying the stager asserts that no capture
 * holds it). */
typedef struct fx {
    tc_fixture t;
    acg_buffer *b;  /* the destination (dest) */
    acg_stager *sg; /* the stager (stage) */
} fx;

static int setup(void **state) {
    *state = tc_fixture_new(sizeof(fx));
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_stager_destroy(f->sg));
    TC_OK(acg_buffer_free(f->b));
    return tc_fixture_teardown(state);
}

/* The case's destination: `size` bytes, poisoned. */
static void dest(fx *f, size_t size) {
    f->b = tc_buffer(f->t.dev, size);
    tc_poison(f->t.s, f->b);
}

/* The case's destination and its stager: depth ring buffers of `bytes`, with the mirror or not. */
static void stage(fx *f, size_t size, uint32_t depth, size_t bytes, bool mirror) {
    dest(f, size);
    f->sg = make_stager(f->t.dev, depth, bytes, mirror);
}

static acg_stager_stats stats_of(const acg_stager *sg) {
    acg_stager_stats st = ACG_STAGER_STATS_INIT;
    TC_OK(acg_stager_get_stats(sg, &st));
    return st;
}

/* Values and padding land in one copy of padded_n * elem_size bytes, and nowhere else. */
static void test_values_and_padding(void **state) {
    fx *f = *state;
    enum { SIZE = 1024, OFF = 64, N = 10, PADDED = 16 };
    stage(f, SIZE, 8, 4096, false);
    float values[N], pad = -1.5f;
    tc_fill_floats(values, N, 3);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, OFF, values, N, sizeof(float), &pad, PADDED));
    acg_stager_stats st = stats_of(f->sg);
    assert_int_equal(st.copies, 1);
    assert_int_equal(st.bytes, PADDED * sizeof(float));
    assert_int_equal(st.waits, 0);
    assert_int_equal(st.growths, 0);
    assert_int_equal(st.skipped, 0);

    unsigned char want[SIZE], got[SIZE];
    for (size_t i = 0; i < SIZE; i += 4) {
        uint32_t poison = 0xdeadbeefu;
        memcpy(want + i, &poison, 4);
    }
    memcpy(want + OFF, values, sizeof values);
    for (size_t i = N; i < PADDED; i++) {
        memcpy(want + OFF + i * sizeof(float), &pad, sizeof pad);
    }
    tc_download(f->t.s, got, f->b, SIZE);
    TC_BYTES_EQUAL(got, want, SIZE);

    /* Padding only (n = 0, values NULL) is one copy too. */
    uint32_t zero = 0;
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, NULL, 0, 4, &zero, SIZE / 4));
    assert_int_equal(stats_of(f->sg).copies, 2);
    tc_download(f->t.s, got, f->b, SIZE);
    memset(want, 0, SIZE);
    TC_BYTES_EQUAL(got, want, SIZE);
}

/* 8-byte integers beyond 2^32 keep all their bytes, values and padding alike. */
static void test_u64_values(void **state) {
    fx *f = *state;
    stage(f, 8 * sizeof(uint64_t), 8, 64 * 1024, false);
    const uint64_t values[3] = {0x100000005ull, 0xffffffff00000001ull, 0x8000000000000000ull};
    const uint64_t pad = 0x1234567800000000ull;
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 8, values, 3, sizeof(uint64_t), &pad, 6));
    uint64_t got[8], want[8];
    tc_download(f->t.s, got, f->b, sizeof got);
    memset(want, 0xef, sizeof want); /* only the poison of the untouched words matters */
    memcpy(&want[0], &got[0], 8);
    memcpy(&want[7], &got[7], 8);
    want[1] = values[0];
    want[2] = values[1];
    want[3] = values[2];
    want[4] = want[5] = want[6] = pad;
    TC_BYTES_EQUAL(got, want, sizeof got);
    assert_int_equal(got[0], 0xdeadbeefdeadbeefull);
    assert_int_equal(got[7], 0xdeadbeefdeadbeefull);
}

/* Keeps the stream busy for a while: `launches` kernels over a large buffer. */
static void keep_busy(fx *f, acg_buffer *big, uint32_t n, int launches) {
    for (int i = 0; i < launches; i++) {
        TC_OK(tc_add(f->t.s, &f->t.k, big, 0, big, 0, n, 1.0f));
    }
}

/* A depth-2 ring behind slow device work: the host must wait to reuse a ring buffer, and every
 * upload still lands exactly. */
static void test_ring_behind_slow_work(void **state) {
    fx *f = *state;
    enum { UPLOADS = 48, WORDS = 16, BIG = 1 << 20 };
    acg_buffer *big = tc_buffer(f->t.dev, (size_t)BIG * sizeof(float));
    TC_OK(acg_fill(f->t.s, big, 0, (size_t)BIG * sizeof(float), 0, 4));
    stage(f, UPLOADS * WORDS * sizeof(uint32_t), 2, 4096, false);
    static uint32_t want[UPLOADS][WORDS], got[UPLOADS][WORDS];
    for (uint32_t u = 0; u < UPLOADS; u++) {
        for (uint32_t w = 0; w < WORDS; w++) {
            want[u][w] = u * 1000 + w;
        }
        keep_busy(f, big, BIG, 8);
        TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, u * sizeof want[u], want[u], WORDS,
                                sizeof(uint32_t), NULL, WORDS));
    }
    acg_stager_stats st = stats_of(f->sg);
    assert_int_equal(st.copies, UPLOADS);
    assert_true(st.waits > 0);
    assert_true(st.waits <= UPLOADS - 2);
    tc_download(f->t.s, got, f->b, sizeof got);
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_buffer_free(big));
}

/* With the stream idle and a ring as deep as the uploads, nothing waits. */
static void test_no_wait_when_idle(void **state) {
    fx *f = *state;
    enum { UPLOADS = 8 };
    stage(f, UPLOADS * 64, UPLOADS, 256, false);
    uint32_t host[UPLOADS][16], got[UPLOADS][16];
    TC_OK(acg_stream_synchronize(f->t.s));
    for (uint32_t u = 0; u < UPLOADS; u++) {
        for (uint32_t w = 0; w < 16; w++) {
            host[u][w] = 0xa0000000u + u * 16 + w;
        }
        TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, u * 64, host[u], 16, 4, NULL, 16));
    }
    assert_int_equal(stats_of(f->sg).waits, 0);
    /* Once the copies ran, reusing every ring buffer again still waits for nothing. */
    TC_OK(acg_stream_synchronize(f->t.s));
    for (uint32_t u = 0; u < UPLOADS; u++) {
        TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, u * 64, host[u], 16, 4, NULL, 16));
    }
    acg_stager_stats st = stats_of(f->sg);
    assert_int_equal(st.waits, 0);
    assert_int_equal(st.copies, 2 * UPLOADS);
    tc_download(f->t.s, got, f->b, sizeof got);
    TC_BYTES_EQUAL(got, host, sizeof got);
}

/* The mirror skips exactly the identical uploads; overlapping writes and invalidate make the
 * next upload copy again. */
static void test_mirror(void **state) {
    fx *f = *state;
    enum { SIZE = 256 };
    stage(f, SIZE, 4, 1024, true);
    unsigned char a[32], pad = 0x5a;
    for (int i = 0; i < 32; i++) {
        a[i] = (unsigned char)(i * 7 + 1);
    }
    uint64_t copies = 0, skipped = 0;
#define EXPECT_COUNTS(c, s)                                                                        \
    do {                                                                                           \
        copies += (c);                                                                             \
        skipped += (s);                                                                            \
        acg_stager_stats st_ = stats_of(f->sg);                                                    \
        assert_int_equal(st_.copies, copies);                                                      \
        assert_int_equal(st_.skipped, skipped);                                                    \
    } while (0)

    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 40));
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 40)); /* identical */
    EXPECT_COUNTS(0, 1);
    a[31] ^= 1; /* one byte differs */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 40));
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 40));
    EXPECT_COUNTS(0, 1);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 48)); /* another padded_n */
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 128, a, 32, 1, &pad, 48)); /* another offset */
    EXPECT_COUNTS(1, 0);
    unsigned char pad2 = 0x5b; /* another pad value */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 128, a, 32, 1, &pad2, 48));
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_invalidate(f->sg, f->b));
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 128, a, 32, 1, &pad2, 48)); /* forgotten */
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 128, a, 32, 1, &pad2, 48));
    EXPECT_COUNTS(0, 1);

    /* An overlapping upload at another offset changes bytes [0, 48) holds: the mirror forgets
     * it, so repeating the first upload copies again and the bytes end up right. */
    unsigned char other[16];
    memset(other, 0x11, sizeof other);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 40, other, 16, 1, NULL, 16));
    EXPECT_COUNTS(1, 0);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, a, 32, 1, &pad, 48));
    EXPECT_COUNTS(1, 0);

    unsigned char want[SIZE], got[SIZE];
    for (size_t i = 0; i < SIZE; i += 4) {
        uint32_t poison = 0xdeadbeefu;
        memcpy(want + i, &poison, 4);
    }
    memcpy(want, a, 32);
    memset(want + 32, pad, 16);
    memcpy(want + 48, other + 8, 8);
    memcpy(want + 128, a, 32);
    memset(want + 160, pad2, 16);
    tc_download(f->t.s, got, f->b, SIZE);
    TC_BYTES_EQUAL(got, want, SIZE);

    /* Without the mirror identical uploads copy every time. */
    acg_stager *plain = make_stager(f->t.dev, 4, 1024, false);
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_stager_upload(plain, f->t.s, f->b, 0, a, 32, 1, &pad, 48));
    }
    assert_int_equal(stats_of(plain).copies, 3);
    assert_int_equal(stats_of(plain).skipped, 0);
    TC_OK(acg_stager_invalidate(plain, f->b));
    TC_OK(acg_stager_destroy(plain));
#undef EXPECT_COUNTS
}

/* A request larger than the ring buffers grows them once, to max(need, 2x), and lands. */
static void test_growth(void **state) {
    fx *f = *state;
    enum { N = 1000 };
    stage(f, 64 * 1024, 3, 256, false);
    static float host[16 * 1024], got[16 * 1024];
    tc_fill_floats(host, 16 * 1024, 11);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, 8, 4, NULL, 8)); /* fits */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, N, 4, NULL, N));
    acg_stager_stats st = stats_of(f->sg);
    assert_int_equal(st.growths, 1);
    assert_int_equal(st.copies, 2);
    tc_download(f->t.s, got, f->b, N * 4);
    TC_BYTES_EQUAL(got, host, N * 4);
    /* 4000 bytes now fit every ring buffer: no second growth. */
    for (int i = 0; i < 5; i++) {
        TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 4, host + 1, N, 4, NULL, N));
    }
    assert_int_equal(stats_of(f->sg).growths, 1);
    /* 6000 bytes grow the ring to 2 x 4000, so 8000 bytes fit afterwards... */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, 1500, 4, NULL, 1500));
    assert_int_equal(stats_of(f->sg).growths, 2);
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, 2 * N, 4, NULL, 2 * N));
    assert_int_equal(stats_of(f->sg).growths, 2);
    /* ...and 64 KiB, more than twice that, grows it to exactly what is needed. */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, 16 * 1024, 4, NULL, 16 * 1024));
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, host, 16 * 1024, 4, NULL, 16 * 1024));
    assert_int_equal(stats_of(f->sg).growths, 3);
    tc_download(f->t.s, got, f->b, sizeof got);
    TC_BYTES_EQUAL(got, host, sizeof got);
}

/* Every documented misuse gets its status and queues nothing. */
static void test_bad_arguments(void **state) {
    fx *f = *state;
    stage(f, 256, 2, 256, true);
    uint32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pad = 0;

    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_upload(NULL, f->t.s, f->b, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_upload(f->sg, NULL, f->b, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_upload(f->sg, f->t.s, NULL, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 8, 0, NULL, 8));
    TC_LAST_ERROR_HAS("elem_size");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 0, 4, &pad, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 8, 4, &pad, 7));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_upload(f->sg, f->t.s, f->b, 0, NULL, 8, 4, &pad, 8));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 8, 4, NULL, 9));
    TC_LAST_ERROR_HAS("pad");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_stager_upload(f->sg, f->t.s, f->b, 228, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_stager_upload(f->sg, f->t.s, f->b, 257, v, 0, 4, &pad, 1));
    TC_EXPECT(ERR_OUT_OF_RANGE,
              acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 8, 4, &pad, SIZE_MAX / 2));
    TC_LAST_ERROR_HAS("acg_stager_upload");

    /* Objects of another device. */
    acg_device *other = tc_open();
    acg_buffer *ob = tc_buffer(other, 256);
    acg_stream *os = tc_stream(other);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stager_upload(f->sg, f->t.s, ob, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stager_upload(f->sg, os, f->b, 0, v, 8, 4, NULL, 8));
    TC_LAST_ERROR_HAS("acg_stager_upload");
    /* Even when the mirror would skip the copy. */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stager_upload(f->sg, os, f->b, 0, v, 8, 4, NULL, 8));
    assert_int_equal(stats_of(f->sg).copies, 1);
    assert_int_equal(stats_of(f->sg).skipped, 0);
    TC_OK(acg_stream_destroy(os));
    TC_OK(acg_buffer_free(ob));
    tc_close(other);

    /* Dead handles. */
    acg_buffer *dead = tc_buffer(f->t.dev, 64);
    TC_OK(acg_buffer_free(dead));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_upload(f->sg, f->t.s, dead, 0, v, 8, 4, NULL, 8));
    uint64_t fake[16] = {0};
    acg_stager *bogus = (acg_stager *)(void *)fake;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_upload(bogus, f->t.s, f->b, 0, v, 8, 4, NULL, 8));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_destroy(bogus));
    TC_EXPECT(ERR_INVALID_HANDLE,
              acg_stager_upload(f->sg, (acg_stream *)(void *)fake, f->b, 0, v, 8, 4, NULL, 8));
    assert_int_equal(stats_of(f->sg).copies, 1);

    /* invalidate and stats. A freed buffer may be invalidated: it is only an address. */
    TC_OK(acg_stager_invalidate(f->sg, dead));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_invalidate(f->sg, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_invalidate(NULL, f->b));
    acg_stager_stats st = ACG_STAGER_STATS_INIT;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_get_stats(f->sg, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_get_stats(NULL, &st));

    /* create. */
    acg_stager *const untouched = (acg_stager *)(uintptr_t)0x99;
    acg_stager *out = untouched;
    acg_stager_config cfg = ACG_STAGER_CONFIG_INIT;
    cfg.depth = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, &cfg, &out));
    TC_LAST_ERROR_HAS("depth");
    cfg = (acg_stager_config)ACG_STAGER_CONFIG_INIT;
    cfg.buffer_bytes = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, &cfg, &out));
    cfg = (acg_stager_config)ACG_STAGER_CONFIG_INIT;
    cfg.size = sizeof cfg.size - 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, &cfg, &out));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, NULL, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stager_create(NULL, NULL, &out));
    assert_ptr_equal(out, untouched);
    TC_OK(acg_stager_create(f->t.dev, NULL, &out)); /* defaults */
    TC_OK(acg_stager_destroy(out));
    TC_OK(acg_stager_destroy(NULL));
}

/* An upload on a capturing stream is refused and leaves the capture alone. */
static void test_capture_refused(void **state) {
    fx *f = *state;
    stage(f, 256, 2, 256, false);
    uint32_t v[4] = {1, 2, 3, 4};
    const bool graphs = tc_has_graphs(f->t.dev, f->t.s);
    if (graphs) {
        TC_OK(acg_stream_begin_capture(f->t.s, NULL));
        TC_EXPECT(ERR_INVALID_ARGUMENT,
                  acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 4, 4, NULL, 4));
        TC_LAST_ERROR_HAS("capturing");
        TC_EXPECT_CAPTURE_STATE(f->t.s, ACTIVE);
        TC_OK(tc_fill(f->t.s, &f->t.k, f->b, 0, 4, 2.0f));
        /* Destroying the stager now would free pinned memory mid-capture: refused, nothing
         * touched, the capture goes on, and the stager stays usable. */
        TC_EXPECT(ERR_IN_USE, acg_stager_destroy(f->sg));
        TC_LAST_ERROR_HAS("capture");
        tc_end_capture_expect_nodes(f->t.s, 1);
    }
    assert_int_equal(stats_of(f->sg).copies, 0);
    /* The stream uploads normally once the capture is over. */
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, v, 4, 4, NULL, 4));
    uint32_t got[4];
    tc_download(f->t.s, got, f->b, sizeof got);
    TC_BYTES_EQUAL(got, v, sizeof v);
    if (!graphs) {
        tc_skip("no graphs: no capture to refuse the upload in");
    }
}

/* ---- two threads share one stager ---------------------------------------------------------- */

enum { T_UPLOADS = 300, T_WORDS = 16 };

typedef struct worker {
    acg_stager *sg;
    acg_stream *s;
    acg_buffer *dst;
    uint32_t id;
    acg_status st;
} worker;

static uint32_t word_of(uint32_t id, uint32_t u, uint32_t w) { return (id << 28) | (u << 8) | w; }

static void *worker_main(void *arg) {
    worker *w = arg;
    uint32_t host[T_WORDS];
    for (uint32_t u = 0; u < T_UPLOADS && w->st == ACG_OK; u++) {
        for (uint32_t i = 0; i < T_WORDS; i++) {
            host[i] = word_of(w->id, u, i);
        }
        size_t off = ((size_t)w->id * T_UPLOADS + u) * sizeof host;
        w->st = acg_stager_upload(w->sg, w->s, w->dst, off, host, T_WORDS, 4, NULL, T_WORDS);
    }
    if (w->st == ACG_OK) {
        w->st = acg_stream_synchronize(w->s);
    }
    return NULL;
}

static void test_two_threads(void **state) {
    fx *f = *state;
    size_t bytes = 2 * T_UPLOADS * T_WORDS * sizeof(uint32_t);
    stage(f, bytes, 3, 64, false);
    worker w[2];
    pthread_t t[2];
    for (uint32_t i = 0; i < 2; i++) {
        w[i] = (worker){.sg = f->sg, .s = tc_stream(f->t.dev), .dst = f->b, .id = i, .st = ACG_OK};
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        TC_OK(w[i].st);
        TC_OK(acg_stream_destroy(w[i].s));
    }
    uint32_t *want = malloc(bytes), *got = malloc(bytes);
    for (uint32_t id = 0; id < 2; id++) {
        for (uint32_t u = 0; u < T_UPLOADS; u++) {
            for (uint32_t i = 0; i < T_WORDS; i++) {
                want[((size_t)id * T_UPLOADS + u) * T_WORDS + i] = word_of(id, u, i);
            }
        }
    }
    tc_download(f->t.s, got, f->b, bytes);
    TC_BYTES_EQUAL(got, want, bytes);
    assert_int_equal(stats_of(f->sg).copies, 2 * T_UPLOADS);
    free(want);
    free(got);
}

/* An older caller's config stops before mirror: the mirror takes its default (off) even though
 * the caller's memory past its size says otherwise; a config of only its size is all defaults.
 * A newer caller's longer config is taken when its extra bytes are zero and refused, naming the
 * struct and both sizes, when one is set; a size below the size field or past 4096 is refused. */
static void test_config_versions(void **state) {
    fx *f = *state;
    dest(f, 64);
    unsigned char bytes[16] = {1, 2, 3}, pad = 0;
    acg_stager_config old = ACG_STAGER_CONFIG_INIT;
    old.size = offsetof(acg_stager_config, mirror);
    old.depth = 2;
    old.mirror = true; /* past the caller's size: never read */
    acg_stager *sg = NULL;
    TC_OK(acg_stager_create(f->t.dev, &old, &sg));
    TC_OK(acg_stager_upload(sg, f->t.s, f->b, 0, bytes, 16, 1, &pad, 16));
    TC_OK(acg_stager_upload(sg, f->t.s, f->b, 0, bytes, 16, 1, &pad, 16));
    acg_stager_stats st = stats_of(sg);
    assert_int_equal(st.copies, 2); /* the mirror is off: nothing skipped */
    assert_int_equal(st.skipped, 0);
    TC_OK(acg_stager_destroy(sg));

    acg_stager_config only_size = {offsetof(acg_stager_config, depth), 0, 0, true};
    TC_OK(acg_stager_create(f->t.dev, &only_size, &sg));
    TC_OK(acg_stager_destroy(sg));

    struct {
        acg_stager_config c;
        uint64_t newer[2];
    } longer = {ACG_STAGER_CONFIG_INIT, {0, 0}};
    longer.c.size = sizeof longer;
    TC_OK(acg_stager_create(f->t.dev, &longer.c, &sg)); /* zeros: the newer fields' defaults */
    TC_OK(acg_stager_destroy(sg));

    acg_stager *const untouched = (acg_stager *)(uintptr_t)0x77;
    sg = untouched;
    longer.newer[1] = 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, &longer.c, &sg));
    char want[128];
    snprintf(want, sizeof want,
             "acg_stager_config.size is %zu but sizeof(acg_stager_config) is %zu", sizeof longer,
             sizeof(acg_stager_config));
    TC_LAST_ERROR_HAS(want);
    static const size_t bad_sizes[] = {0, 4097};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        old.size = bad_sizes[i];
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_create(f->t.dev, &old, &sg));
        snprintf(want, sizeof want, "acg_stager_config.size is %zu", bad_sizes[i]);
        TC_LAST_ERROR_HAS(want);
    }
    assert_ptr_equal(sg, untouched);
}

/* An older caller's stats struct gets the fields it has and nothing past them; its size says
 * how far the library wrote. A size that was never set is refused with nothing written. */
static void test_stats_versions(void **state) {
    fx *f = *state;
    stage(f, 64, 2, 1024, false);
    unsigned char bytes[16] = {0}, pad = 0;
    TC_OK(acg_stager_upload(f->sg, f->t.s, f->b, 0, bytes, 16, 1, &pad, 16));
    acg_stager_stats st;
    memset(&st, 0xab, sizeof st);
    st.size = offsetof(acg_stager_stats, waits);
    TC_OK(acg_stager_get_stats(f->sg, &st));
    assert_int_equal(st.size, offsetof(acg_stager_stats, waits));
    assert_int_equal(st.copies, 1);
    assert_int_equal(st.bytes, 16);
    assert_int_equal(st.waits, 0xababababababababull); /* past the caller's size: untouched */
    assert_int_equal(st.skipped, 0xababababababababull);

    st.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_stager_get_stats(f->sg, &st));
    TC_LAST_ERROR_HAS("acg_stager_get_stats: out->size is 0");
    assert_int_equal(st.copies, 1);

    struct {
        acg_stager_stats s;
        uint64_t newer;
    } longer = {ACG_STAGER_STATS_INIT, 0x1234};
    longer.s.size = sizeof longer;
    TC_OK(acg_stager_get_stats(f->sg, &longer.s));
    assert_int_equal(longer.s.size, sizeof(acg_stager_stats)); /* where this library stopped */
    assert_int_equal(longer.newer, 0x1234);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_values_and_padding), T(test_u64_values),      T(test_ring_behind_slow_work),
    T(test_no_wait_when_idle),  T(test_mirror),          T(test_growth),
    T(test_bad_arguments),      T(test_capture_refused), T(test_two_threads),
    T(test_config_versions),    T(test_stats_versions),
};
#undef T
TC_MAIN("test_stager", tests)
