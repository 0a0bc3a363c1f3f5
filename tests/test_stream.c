/* test_stream.c — streams, events, and ordering across streams. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* The device under test, streams s (t.s) and b, and buffers x and y of the size each case's
 * table entry gives (common.h). */
typedef tc_fixture2 fx;

/* How a handle's life ends, for streams and events alike: destroy(obj) succeeds and
 * destroy(NULL) is a no-op; then obj is a dead handle to destroy and to `use`. */
#define EXPECT_DESTROYED(destroy, obj, use)                                                        \
    do {                                                                                           \
        TC_OK(destroy(obj));                                                                       \
        TC_OK(destroy(NULL));                                                                      \
        TC_EXPECT(ERR_INVALID_HANDLE, destroy(obj));                                               \
        TC_EXPECT(ERR_INVALID_HANDLE, use(obj));                                                   \
    } while (0)

/* An idle stream queries ACG_OK; after queued work, synchronize leaves it idle; destroy(NULL)
 * is a no-op; dead handles are ACG_ERR_INVALID_HANDLE (y: TC_BIG floats). */
static void test_stream_lifecycle(void **state) {
    fx *f = *state;
    acg_stream *s = tc_stream(f->t.dev);
    TC_OK(acg_stream_query(s));
    TC_OK(acg_stream_synchronize(s));
    assert_ptr_equal(acg_stream_get_device(s), f->t.dev);
    assert_null(acg_stream_get_device(NULL));
    for (int i = 0; i < 4; i++) {
        TC_OK(tc_fill(s, &f->t.k, f->y, 0, TC_BIG, 1.0f));
    }
    acg_status q = acg_stream_query(s);
    assert_true(q == ACG_OK || q == ACG_NOT_READY);
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_stream_query(s));
    EXPECT_DESTROYED(acg_stream_destroy, s, acg_stream_synchronize);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_query(NULL));
    acg_stream *untouched = (acg_stream *)(uintptr_t)0x42, *t = untouched;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_create(NULL, &t));
    assert_ptr_equal(t, untouched);
}

/* Destroying a stream waits for its queued work first (y: TC_BIG floats, read back on t.s). */
static void test_stream_destroy_waits(void **state) {
    fx *f = *state;
    acg_stream *s = tc_stream(f->t.dev);
    for (int i = 0; i < 6; i++) {
        TC_OK(tc_fill(s, &f->t.k, f->y, 0, TC_BIG, (float)i));
    }
    TC_OK(acg_stream_destroy(s));
    TC_EXPECT_FLOATS(f->t.s, f->y, TC_BIG, 5.0f);
}

/* An event never recorded is complete; a recorded one completes with its stream's work;
 * destroy(NULL) is a no-op (y: TC_BIG floats). */
static void test_event_basics(void **state) {
    fx *f = *state;
    acg_stream *s = f->t.s;
    acg_event *e = tc_event(f->t.dev);
    TC_OK(acg_event_query(e));
    TC_OK(acg_event_synchronize(e));

    for (int i = 0; i < 4; i++) {
        TC_OK(tc_fill(s, &f->t.k, f->y, 0, TC_BIG, 2.0f));
    }
    TC_OK(acg_event_record(e, s));
    acg_status q = acg_event_query(e);
    assert_true(q == ACG_OK || q == ACG_NOT_READY);
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));
    /* After the event completed, the work before it is visible. */
    float back[16], want[16];
    TC_OK(acg_copy_d2h(s, back, f->y, 0, sizeof back));
    tc_splat(want, 16, 2.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);

    /* Re-recording replaces the earlier point. */
    TC_OK(acg_event_record(e, s));
    TC_OK(acg_event_synchronize(e));
    TC_OK(acg_event_query(e));

    EXPECT_DESTROYED(acg_event_destroy, e, acg_event_query);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_event_record(NULL, s));
}

/* Stream b waiting on an event recorded after long work on a (t.s) sees all of a's results
 * (x, y: TC_BIG floats). */
static void test_wait_event_orders_streams(void **state) {
    fx *f = *state;
    acg_stream *a = f->t.s, *b = f->b;
    const tc_kernels *k = &f->t.k;
    acg_event *e = tc_event(f->t.dev);
    acg_buffer *x = f->x, *y = f->y;
    TC_OK(tc_fill(a, k, y, 0, TC_BIG, -1.0f));
    TC_OK(acg_stream_synchronize(a));

    for (int round = 0; round < 3; round++) {
        TC_OK(tc_fill(a, k, x, 0, TC_BIG, 0.0f));
        for (int i = 0; i < 12; i++) { /* x = 12 * 0.5, slowly */
            TC_OK(tc_add(a, k, x, 0, x, 0, TC_BIG, 0.5f));
        }
        TC_OK(acg_event_record(e, a));
        TC_OK(acg_stream_wait_event(b, e));
        TC_OK(tc_add(b, k, y, 0, x, 0, TC_BIG, (float)round)); /* y = x + round */
        TC_OK(acg_stream_synchronize(b));
        TC_EXPECT_FLOATS(b, y, TC_BIG, 6.0f + (float)round);
    }
    /* An event destroyed after a stream waits on it does not disturb the wait. */
    acg_event *e2 = tc_event(f->t.dev);
    TC_OK(tc_fill(a, k, x, 0, TC_BIG, 0.0f));
    for (int i = 0; i < 8; i++) {
        TC_OK(tc_add(a, k, x, 0, x, 0, TC_BIG, 0.25f));
    }
    TC_OK(acg_event_record(e2, a));
    TC_OK(acg_stream_wait_event(b, e2));
    TC_OK(acg_event_destroy(e2));
    TC_OK(tc_copy(b, k, y, 0, x, 0, TC_BIG));
    float back[64], want[64];
    TC_OK(acg_stream_synchronize(b));
    TC_OK(acg_copy_d2h(b, back, y, (TC_BIG - 64) * sizeof(float), sizeof back));
    tc_splat(want, 64, 2.0f);
    TC_BYTES_EQUAL(back, want, sizeof back);

    TC_OK(acg_event_destroy(e));
}

/* Waiting on a never-recorded event does not block the stream (y: 64 floats). */
static void test_wait_unrecorded_event(void **state) {
    fx *f = *state;
    acg_event *e = tc_event(f->t.dev);
    TC_OK(acg_stream_wait_event(f->t.s, e));
    TC_OK(tc_fill(f->t.s, &f->t.k, f->y, 0, 64, 4.0f));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_EXPECT_FLOATS(f->t.s, f->y, 64, 4.0f);
    TC_OK(acg_event_destroy(e));
}

/* Many streams run independent work; acg_device_synchronize waits for all of them (y: NS
 * windows of PER floats). */
enum { NS = 48, PER = 4096 };
static void test_many_streams(void **state) {
    fx *f = *state;
    acg_stream *s[NS];
    for (int i = 0; i < NS; i++) {
        s[i] = tc_stream(f->t.dev);
    }
    for (int i = 0; i < NS; i++) {
        size_t off = (size_t)i * PER * sizeof(float);
        TC_OK(tc_fill(s[i], &f->t.k, f->y, off, PER, (float)i));
        TC_OK(tc_add(s[i], &f->t.k, f->y, off, f->y, off, PER, 0.5f));
    }
    TC_OK(acg_device_synchronize(f->t.dev));
    float *back = malloc((size_t)NS * PER * sizeof(float));
    float *want = malloc((size_t)NS * PER * sizeof(float));
    TC_OK(acg_copy_d2h(s[0], back, f->y, 0, (size_t)NS * PER * sizeof(float)));
    for (int i = 0; i < NS; i++) {
        tc_splat(want + (size_t)i * PER, PER, (float)i + 0.5f);
    }
    TC_BYTES_EQUAL(back, want, (size_t)NS * PER * sizeof(float));
    free(back);
    free(want);
    for (int i = 0; i < NS; i++) {
        TC_OK(acg_stream_destroy(s[i]));
    }
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_synchronize(NULL));
}

/* Events and streams of different devices do not mix: ACG_ERR_WRONG_DEVICE. */
static void test_event_wrong_device(void **state) {
    fx *f = *state;
    acg_device *d2 = tc_open();
    acg_event *e2 = tc_event(d2);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_event_record(e2, f->t.s));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_stream_wait_event(f->t.s, e2));
    TC_OK(acg_event_destroy(e2));
    tc_close(d2);
}

#define T(fn) TC_FIXTURE2_CASE(fn, TC_BIG * sizeof(float))
static const struct CMUnitTest tests[] = {
    T(test_stream_lifecycle),
    T(test_stream_destroy_waits),
    T(test_event_basics),
    T(test_wait_event_orders_streams),
    TC_FIXTURE2_CASE(test_wait_unrecorded_event, 64 * sizeof(float)),
    TC_FIXTURE2_CASE(test_many_streams, (size_t)NS *PER * sizeof(float)),
    T(test_event_wrong_device),
};
#undef T
TC_MAIN("test_stream", tests)
