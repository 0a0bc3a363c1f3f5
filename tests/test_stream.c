/* test_stream.c — streams, events, and ordering across streams. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

enum { BIG = 1 << 21 }; /* floats: enough work that a missing wait would show */

typedef struct fx {
    acg_device *dev;
    tc_kernels k;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->dev = tc_open();
    tc_kernels_get(f->dev, &f->k);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    tc_close(f->dev);
    free(f);
    return 0;
}

/* An idle stream queries ACG_OK; after queued work, synchronize leaves it idle; destroy(NULL)
 * is a no-op; dead handles are ACG_ERR_INVALID_HANDLE. */
static void test_stream_lifecycle(void **state) {
    fx *f = *state;
    acg_stream *s = tc_stream(f->dev);
    TC_OK(acg_stream_query(s));
    TC_OK(acg_stream_synchronize(s));
    assert_ptr_equal(acg_stream_get_device(s), f->dev);
    assert_null(acg_stream_get_device(NULL));
    acg_buffer *b = tc_buffer(f->dev, BIG * sizeof(float));
    for (int i = 0; i < 4; i++) {
        TC_OK(tc_fill(s, &f->k, b, 0, BIG, 1.0f));
    }
    acg_status q = acg_stream_query(s);
    assert_true(q == ACG_OK || q == ACG_NOT_READY);
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_stream_query(s));
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_stream_destroy(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_destroy(s));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_synchronize(s));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_query(NULL));
    acg_stream *untouched = (acg_stream *)(uintptr_t)0x42, *t = untouched;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_create(NULL, &t));
    assert_ptr_equal(t, untouched);
}

/* Destroying a stream waits for its queued work first. */
static void test_stream_destroy_waits(void **state) {
    fx *f = *state;
    acg_stream *s = tc_stream(f->dev);
    acg_stream *r = tc_stream(f->dev);
    acg_buffer *b = tc_buffer(f->dev, BIG * sizeof(float));
    for (int i = 0; i < 6; i++) {
        TC_OK(tc_fill(s, &f->k, b, 0, BIG, (float)i));
    }
    TC_OK(acg_stream_destroy(s));
    float *back = malloc(BIG * sizeof(float));
    float *want = malloc(BIG * sizeof(float));
    tc_download(r, back, b, BIG * sizeof(float));
    tc_splat(want, BIG, 5.0f);
    TC_BYTES_EQUAL(back, want, BIG * sizeof(float));
    free(back);
    free(want);
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_stream_destroy(r));
}

/* An event never recorded is complete; a recorded one completes with its stream's work;
 * destroy(NULL) is a no-op. */
static void test_event_basics(void **state) {
    fx *f = *state;
    acg_event *e = tc_event(f->dev);
    TC_OK(acg_event_query(e));
    TC_OK(acg_event_synchronize(e));

    acg_stream *s = tc_stream(f->dev);
    acg_buffer *b = tc_buffer(f->dev, BIG * sizeof(float));
    for (int i = 0; i < 4; i++) {
        TC_OK(tc_fill(s, &f->k, b, 0, BIG, 2.0f));
    }
    TC_OK(acg_event_record(e, s));
    acg_status q = acg_event_query(e);
    assert_true(q == ACG_OK || q == ACG_NOT_READY);
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));
    /* After the event completed, the work before it is visible. */
    float back[16], want[16];
    TC_OK(acg_copy_d2h(s, back, b, 0, sizeof back));
    tc_splat(want, 16, 2.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);

    /* Re-recording replaces the earlier point. */
    TC_OK(acg_event_record(e, s));
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));

    TC_OK(acg_event_destroy(e));
    TC_OK(acg_event_destroy(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_event_destroy(e));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_event_query(e));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_event_record(NULL, s));
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_stream_destroy(s));
}

/* Stream B waiting on an event recorded after long work on A sees all of A's results. */
static void test_wait_event_orders_streams(void **state) {
    fx *f = *state;
    acg_stream *a = tc_stream(f->dev);
    acg_stream *b = tc_stream(f->dev);
    acg_event *e = tc_event(f->dev);
    acg_buffer *x = tc_buffer(f->dev, BIG * sizeof(float));
    acg_buffer *y = tc_buffer(f->dev, BIG * sizeof(float));
    TC_OK(tc_fill(a, &f->k, y, 0, BIG, -1.0f));
    TC_OK(acg_stream_synchronize(a));

    for (int round = 0; round < 3; round++) {
        TC_OK(tc_fill(a, &f->k, x, 0, BIG, 0.0f));
        for (int i = 0; i < 12; i++) { /* x = 12 * 0.5, slowly */
            TC_OK(tc_add(a, &f->k, x, 0, x, 0, BIG, 0.5f));
        }
        TC_OK(acg_event_record(e, a));
        TC_OK(acg_stream_wait_event(b, e));
        TC_OK(tc_add(b, &f->k, y, 0, x, 0, BIG, (float)round)); /* y = x + round */
        TC_OK(acg_stream_synchronize(b));
        float *back = malloc(BIG * sizeof(float));
        float *want = malloc(BIG * sizeof(float));
        TC_OK(acg_copy_d2h(b, back, y, 0, BIG * sizeof(float)));
        tc_splat(want, BIG, 6.0f + (float)round);
        TC_BYTES_EQUAL(back, want, BIG * sizeof(float));
        free(back);
        free(want);
    }
    /* An event destroyed after a stream waits on it does not disturb the wait. */
    acg_event *e2 = tc_event(f->dev);
    TC_OK(tc_fill(a, &f->k, x, 0, BIG, 0.0f));
    for (int i = 0; i < 8; i++) {
        TC_OK(tc_add(a, &f->k, x, 0, x, 0, BIG, 0.25f));
    }
    TC_OK(acg_event_record(e2, a));
    TC_OK(acg_stream_wait_event(b, e2));
    TC_OK(acg_event_destroy(e2));
    TC_OK(tc_copy(b, &f->k, y, 0, x, 0, BIG));
    float back[64], want[64];
    TC_OK(acg_stream_synchronize(b));
    TC_OK(acg_copy_d2h(b, back, y, (BIG - 64) * sizeof(float), sizeof back));
    tc_splat(want, 64, 2.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);

    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_stream_destroy(a));
    TC_OK(acg_stream_destroy(b));
}

/* Waiting on a never-recorded event does not block the stream. */
static void test_wait_unrecorded_event(void **state) {
    fx *f = *state;
    acg_stream *s = tc_stream(f->dev);
    acg_event *e = tc_event(f->dev);
    acg_buffer *b = tc_buffer(f->dev, 64 * sizeof(float));
    TC_OK(acg_stream_wait_event(s, e));
    TC_OK(tc_fill(s, &f->k, b, 0, 64, 4.0f));
    TC_OK(acg_stream_synchronize(s));
    float back[64], want[64];
    tc_download(s, back, b, sizeof back);
    tc_splat(want, 64, 4.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_event_destroy(e));
    TC_OK(acg_stream_destroy(s));
}

/* Many streams run independent work; acg_device_synchronize waits for all of them. */
static void test_many_streams(void **state) {
    fx *f = *state;
    enum { NS = 48, PER = 4096 };
    acg_stream *s[NS];
    acg_buffer *b = tc_buffer(f->dev, (size_t)NS * PER * sizeof(float));
    for (int i = 0; i < NS; i++) {
        s[i] = tc_stream(f->dev);
    }
    for (int i = 0; i < NS; i++) {
        size_t off = (size_t)i * PER * sizeof(float);
        TC_OK(tc_fill(s[i], &f->k, b, off, PER, (float)i));
        TC_OK(tc_add(s[i], &f->k, b, off, b, off, PER, 0.5f));
    }
    TC_OK(acg_device_synchronize(f->dev));
    float *back = malloc((size_t)NS * PER * sizeof(float));
    float *want = malloc((size_t)NS * PER * sizeof(float));
    TC_OK(acg_copy_d2h(s[0], back, b, 0, (size_t)NS * PER * sizeof(float)));
    for (int i = 0; i < NS; i++) {
        tc_splat(want + (size_t)i * PER, PER, (float)i + 0.5f);
    }
    TC_BYTES_EQUAL(back, want, (size_t)NS * PER * sizeof(float));
    free(back);
    free(want);
    for (int i = 0; i < NS; i++) {
        TC_OK(acg_stream_destroy(s[i]));
    }
    TC_OK(acg_buffer_free(b));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_synchronize(NULL));
}

/* Events and streams of different devices do not mix: ACG_ERR_WRONG_DEVICE. */
static void test_event_wrong_device(void **state) {
    fx *f = *state;
    acg_device *d2 = tc_open();
    acg_stream *s1 = tc_stream(f->dev);
    acg_event *e2 = tc_event(d2);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_event_record(e2, s1));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_wait_event(s1, e2));
    TC_OK(acg_event_destroy(e2));
    TC_OK(acg_stream_destroy(s1));
    tc_close(d2);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_stream_lifecycle),          T(test_stream_destroy_waits),  T(test_event_basics),
    T(test_wait_event_orders_streams), T(test_wait_unrecorded_event), T(test_many_streams),
    T(test_event_wrong_device),
};
#undef T
TC_MAIN("test_stream", tests)
