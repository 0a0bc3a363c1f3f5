/* test_capture_rules.c — every operation that is illegal during a capture invalidates it
 * loudly and cleanly: the call fails naming the operation, the capture's streams refuse further
 * work, end_capture reports it, the streams come back usable, the pool takes the next capture,
 * and nothing leaks. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 2048 };
#define NB ((size_t)N * sizeof(float))

typedef struct rctx {
    acg_device *dev;
    acg_stream *s; /* origin of the capture */
    acg_stream *b; /* forked into the capture when the rule asks for it */
    acg_graph_pool *pool;
    tc_kernels k;
    acg_buffer *x, *y, *victim;
    acg_event *e_in;  /* recorded inside the capture */
    acg_event *e_out; /* recorded outside the capture, before it */
    acg_event *e_join;
    acg_graph *pre;   /* a finished graph (private pool) */
    void *heap;       /* pageable host memory, NB bytes */
    acg_device *dev2; /* a second device */
    void *pin2;       /* pinned memory of dev2, NB bytes */
    void *nopin;      /* acg_pinned_alloc under ACG_NO_PINNED=1, NB bytes */
} rctx;

typedef acg_status (*rule_fn)(rctx *c);

typedef struct rule {
    const char *op; /* what acg_last_error() must name */
    rule_fn fn;
    acg_status want;
    bool fork; /* fork stream b into the capture before the illegal call */
} rule;

/* ---- the illegal operations --------------------------------------------------------------- */

static acg_status op_stream_synchronize(rctx *c) { return acg_stream_synchronize(c->s); }
static acg_status op_stream_query(rctx *c) { return acg_stream_query(c->s); }
static acg_status op_forked_synchronize(rctx *c) { return acg_stream_synchronize(c->b); }
static acg_status op_event_synchronize(rctx *c) { return acg_event_synchronize(c->e_in); }
static acg_status op_event_query(rctx *c) { return acg_event_query(c->e_in); }
static acg_status op_d2h_pageable(rctx *c) { return acg_copy_d2h(c->s, c->heap, c->x, 0, NB); }
static acg_status op_h2d_pageable(rctx *c) { return acg_copy_h2d(c->s, c->x, 0, c->heap, NB); }
static acg_status op_device_synchronize(rctx *c) { return acg_device_synchronize(c->dev); }
static acg_status op_begin_again(rctx *c) { return acg_stream_begin_capture(c->s, c->pool); }
static acg_status op_wait_outside(rctx *c) { return acg_stream_wait_event(c->s, c->e_out); }
static acg_status op_graph_launch(rctx *c) { return acg_graph_launch(c->pre, c->s); }
static acg_status op_h2d_other_pinned(rctx *c) { return acg_copy_h2d(c->s, c->x, 0, c->pin2, NB); }
/* s waits on an event recorded inside another, concurrent capture (on b, private pool). */
static acg_status op_wait_other_capture(rctx *c) {
    TC_OK(acg_stream_begin_capture(c->b, NULL));
    TC_OK(tc_fill(c->b, &c->k, c->y, 0, N, 1.0f));
    TC_OK(acg_event_record(c->e_join, c->b));
    acg_status st = acg_stream_wait_event(c->s, c->e_join);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->b, &g));
    TC_OK(acg_graph_destroy(g));
    return st;
}
static acg_status op_d2h_no_pinned(rctx *c) { return acg_copy_d2h(c->s, c->nopin, c->x, 0, NB); }

static acg_status op_buffer_alloc(rctx *c) {
    acg_buffer *const sentinel = (acg_buffer *)(uintptr_t)0x10, *b = sentinel;
    acg_status st = acg_buffer_alloc(c->dev, 64, &b);
    assert_ptr_equal(b, sentinel);
    return st;
}

static acg_status op_pinned_alloc(rctx *c) {
    void *const sentinel = (void *)(uintptr_t)0x20;
    void *p = sentinel;
    acg_status st = acg_pinned_alloc(c->dev, 64, &p);
    assert_ptr_equal(p, sentinel);
    return st;
}

/* Pinned memory of the device: freeing it synchronizes, so the capture ends; nothing is freed
 * (teardown frees it). */
static acg_status op_pinned_free(rctx *c) { return acg_pinned_free(c->nopin); }

/* Registering host memory page-locks it, which synchronizes: nothing is registered. */
static acg_status op_pinned_register(rctx *c) {
    acg_status st = acg_pinned_register(c->dev, c->heap, NB);
    assert_false(acg_pinned_contains(c->dev, c->heap, NB));
    return st;
}

/* The stream's own memory, allocated on a stream outside the capture: an allocation outside the
 * pool while the device captures. */
static acg_status op_stream_alloc_elsewhere(rctx *c) {
    acg_buffer *const sentinel = (acg_buffer *)(uintptr_t)0x30;
    acg_buffer *b = sentinel;
    acg_status st = acg_stream_alloc(c->b, 64, &b);
    assert_ptr_equal(b, sentinel);
    return st;
}

static acg_status op_buffer_free(rctx *c) {
    acg_status st = acg_buffer_free(c->victim);
    assert_int_equal(acg_buffer_get_size(c->victim), 64); /* nothing was freed */
    return st;
}

static const rule rules[] = {
    {"acg_stream_synchronize", op_stream_synchronize, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_stream_query", op_stream_query, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_event_synchronize", op_event_synchronize, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_event_query", op_event_query, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_copy_d2h", op_d2h_pageable, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_copy_h2d", op_h2d_pageable, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_buffer_alloc", op_buffer_alloc, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_pinned_alloc", op_pinned_alloc, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_pinned_free", op_pinned_free, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_pinned_register", op_pinned_register, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_stream_alloc", op_stream_alloc_elsewhere, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_device_synchronize", op_device_synchronize, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_buffer_free", op_buffer_free, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_stream_begin_capture", op_begin_again, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_stream_wait_event", op_wait_outside, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_graph_launch", op_graph_launch, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_copy_h2d", op_h2d_other_pinned, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_copy_d2h", op_d2h_no_pinned, ACG_ERR_CAPTURE_INVALIDATED, false},
    {"acg_stream_wait_event", op_wait_other_capture, ACG_ERR_CAPTURE_INVALIDATED, false},
    /* the same rules with a second stream forked into the capture */
    {"acg_stream_synchronize", op_forked_synchronize, ACG_ERR_CAPTURE_INVALIDATED, true},
    {"acg_stream_synchronize", op_stream_synchronize, ACG_ERR_CAPTURE_INVALIDATED, true},
    {"acg_buffer_alloc", op_buffer_alloc, ACG_ERR_CAPTURE_INVALIDATED, true},
    {"acg_copy_h2d", op_h2d_pageable, ACG_ERR_CAPTURE_INVALIDATED, true},
    {"acg_device_synchronize", op_device_synchronize, ACG_ERR_CAPTURE_INVALIDATED, true},
};

/* ---- the harness -------------------------------------------------------------------------- */

static void ctx_create(rctx *c) {
    memset(c, 0, sizeof *c);
    c->dev = tc_open();
    c->s = tc_stream(c->dev);
    c->b = tc_stream(c->dev);
    c->pool = tc_pool(c->dev);
    tc_kernels_get(c->dev, &c->k);
    c->x = tc_buffer(c->dev, NB);
    c->y = tc_buffer(c->dev, NB);
    c->victim = tc_buffer(c->dev, 64);
    c->e_in = tc_event(c->dev);
    c->e_out = tc_event(c->dev);
    c->e_join = tc_event(c->dev);
    c->heap = malloc(NB);
    memset(c->heap, 0, NB);
    c->dev2 = tc_open();
    c->pin2 = tc_pinned(c->dev2, NB);
    assert_int_equal(setenv("ACG_NO_PINNED", "1", 1), 0);
    c->nopin = tc_pinned(c->dev, NB);
    assert_int_equal(unsetenv("ACG_NO_PINNED"), 0);
    if (tc_cap()->graphs) {
        TC_OK(acg_stream_begin_capture(c->s, NULL));
        TC_OK(tc_fill(c->s, &c->k, c->y, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(c->s, &c->pre));
    }
    TC_OK(tc_fill(c->b, &c->k, c->y, 0, N, 0.0f));
    TC_OK(acg_event_record(c->e_out, c->b));
    TC_OK(acg_stream_synchronize(c->b));
}

static void ctx_destroy(rctx *c) {
    TC_OK(acg_graph_destroy(c->pre));
    TC_OK(acg_event_destroy(c->e_in));
    TC_OK(acg_event_destroy(c->e_out));
    TC_OK(acg_event_destroy(c->e_join));
    TC_OK(acg_buffer_free(c->x));
    TC_OK(acg_buffer_free(c->y));
    TC_OK(acg_buffer_free(c->victim));
    TC_OK(acg_graph_pool_destroy(c->pool));
    TC_OK(acg_stream_destroy(c->s));
    TC_OK(acg_stream_destroy(c->b));
    TC_OK(acg_pinned_free(c->nopin));
    tc_close(c->dev);
    TC_OK(acg_pinned_free(c->pin2));
    tc_close(c->dev2);
    free(c->heap);
    memset(c, 0, sizeof *c);
}

/* The test's context, so the teardown can release what a failed assertion left behind. */
static rctx ctx;
static acg_graph *ctx_graph;

/* Best-effort release after a failed test (statuses ignored), so later tests start clean. */
static int release_teardown(void **state) {
    (void)state;
    rctx *c = &ctx;
    acg_graph *g = NULL;
    if (c->s != NULL && acg_stream_end_capture(c->s, &g) == ACG_OK) {
        acg_graph_destroy(g);
    }
    acg_graph_destroy(ctx_graph);
    acg_graph_destroy(c->pre);
    acg_event_destroy(c->e_in);
    acg_event_destroy(c->e_out);
    acg_event_destroy(c->e_join);
    acg_buffer_free(c->x);
    acg_buffer_free(c->y);
    acg_buffer_free(c->victim);
    acg_graph_pool_destroy(c->pool);
    acg_stream_destroy(c->s);
    acg_stream_destroy(c->b);
    acg_pinned_free(c->nopin);
    acg_device_close(c->dev);
    acg_pinned_free(c->pin2);
    acg_device_close(c->dev2);
    free(c->heap);
    memset(c, 0, sizeof *c);
    ctx_graph = NULL;
    acg_set_allocator(NULL, NULL);
    return 0;
}

static void expect_state(acg_stream *s, acg_capture_state want) {
    acg_capture_state cs = (acg_capture_state)99;
    TC_OK(acg_stream_get_capture_state(s, &cs));
    assert_int_equal(cs, want);
}

/* Runs `value` on stream s eagerly into buf and checks the data. */
static void eager_check(rctx *c, acg_stream *s, acg_buffer *buf, float value) {
    float back[N], want[N];
    TC_OK(tc_fill(s, &c->k, buf, 0, N, value));
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_copy_d2h(s, back, buf, 0, NB));
    tc_splat(want, N, value);
    TC_BYTES_EQUAL(back, want, NB);
}

/* The illegal call inside a capture: it fails naming itself, the capture refuses further work,
 * and end_capture reports it. */
static void check_illegal(rctx *c, const rule *r) {
    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    TC_OK(tc_fill(c->s, &c->k, c->x, 0, N, 1.0f));
    TC_OK(acg_event_record(c->e_in, c->s));
    if (r->fork) {
        TC_OK(acg_stream_wait_event(c->b, c->e_in));
        TC_OK(tc_add(c->b, &c->k, c->y, 0, c->x, 0, N, 1.0f));
        TC_OK(acg_event_record(c->e_join, c->b));
        TC_OK(acg_stream_wait_event(c->s, c->e_join));
        expect_state(c->b, ACG_CAPTURE_ACTIVE);
    }
    expect_state(c->s, ACG_CAPTURE_ACTIVE);

    /* The illegal call fails and names itself. */
    tc_expect_(r->want, r->fn(c), r->op, __FILE__, __LINE__);
    TC_LAST_ERROR_HAS(r->op);
    expect_state(c->s, ACG_CAPTURE_INVALIDATED);
    if (r->fork) {
        expect_state(c->b, ACG_CAPTURE_INVALIDATED);
    }

    /* Further work on the capture's streams is refused. */
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, tc_fill(c->s, &c->k, c->x, 0, N, 2.0f));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_fill(c->s, c->x, 0, NB, 0, 4));
    if (r->fork) {
        TC_EXPECT(ERR_CAPTURE_INVALIDATED, tc_fill(c->b, &c->k, c->y, 0, N, 2.0f));
    }

    /* end_capture reports the invalidation, repeats why, and returns no graph. */
    acg_graph *const sentinel = (acg_graph *)(uintptr_t)0x30;
    acg_graph *g = sentinel;
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(c->s, &g));
    assert_ptr_equal(g, sentinel);
    TC_LAST_ERROR_HAS(r->op);
    expect_state(c->s, ACG_CAPTURE_NONE);
    expect_state(c->b, ACG_CAPTURE_NONE);
    TC_EXPECT(ERR_NOT_CAPTURING, acg_stream_end_capture(c->s, &g));
}

/* After a failed capture the streams work eagerly, and the pool takes the next capture. */
static void check_recovered(rctx *c) {
    /* The streams work eagerly again. */
    eager_check(c, c->s, c->x, 3.0f);
    eager_check(c, c->b, c->y, 4.0f);

    /* The pool takes the next capture, which replays correctly. */
    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    acg_buffer *tmp = NULL;
    TC_OK(acg_stream_alloc(c->s, NB, &tmp));
    TC_OK(tc_fill(c->s, &c->k, tmp, 0, N, 5.0f));
    TC_OK(tc_add(c->s, &c->k, c->x, 0, tmp, 0, N, 0.5f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    ctx_graph = g;
    tc_poison(c->s, c->x);
    float back[N], want[N];
    TC_OK(tc_replay(g, c->s, c->x, NB, back));
    tc_splat(want, N, 5.5f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g));
    ctx_graph = NULL;
}

/* The whole contract for one illegal operation. Without graphs there is no capture to break;
 * without multi-stream capture the fork itself is the refused operation. */
static void run_rule(void **state) {
    const rule *r = *state;
    tc_alloc_install();
    rctx *c = &ctx;
    ctx_create(c);
    const bool graphs = tc_has_graphs(c->dev, c->s);
    const bool checked =
        graphs && (!r->fork || tc_has_multi_stream_capture(c->dev, c->s, c->b, c->e_in));
    if (checked) {
        check_illegal(c, r);
    }
    if (graphs) {
        check_recovered(c);
    }
    ctx_destroy(c);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    if (!checked) {
        tc_skip(graphs ? "no multi-stream capture: the fork itself was refused" : "no graphs");
    }
}

/* Work that is legal during a capture leaves it active: synchronizing and running eager work
 * on a stream outside the capture, pinned copies, and allocations on another device. */
static void test_legal_during_capture(void **state) {
    (void)state;
    tc_alloc_install();
    rctx *c = &ctx;
    ctx_create(c);
    if (!tc_has_graphs(c->dev, c->s) || !tc_has_pinned_memory(c->dev)) {
        ctx_destroy(c);
        assert_int_equal(tc_alloc_live(), 0);
        tc_alloc_uninstall();
        tc_skip(tc_cap()->graphs ? "no pinned memory" : "no graphs");
    }
    acg_device *d2 = tc_open();
    float *pin_in = tc_pinned(c->dev, NB);
    float *pin_out = tc_pinned(c->dev, NB);

    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    TC_OK(acg_copy_h2d(c->s, c->x, 0, pin_in, NB));
    eager_check(c, c->b, c->y, 8.0f); /* b is not part of the capture */
    TC_OK(acg_stream_query(c->b));
    acg_buffer *other = tc_buffer(d2, 64);
    void *other_pin = tc_pinned(d2, 64);
    TC_OK(acg_device_synchronize(d2));
    TC_OK(acg_copy_d2h(c->s, pin_out, c->x, 0, NB)); /* pinned destination: recorded */
    expect_state(c->s, ACG_CAPTURE_ACTIVE);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    ctx_graph = g;

    tc_fill_floats(pin_in, N, 3);
    memset(pin_out, 0, NB);
    TC_OK(tc_replay(g, c->s, NULL, 0, NULL));
    TC_BYTES_EQUAL(pin_out, pin_in, NB);

    TC_OK(acg_graph_destroy(g));
    ctx_graph = NULL;
    TC_OK(acg_buffer_free(other));
    TC_OK(acg_pinned_free(other_pin));
    TC_OK(acg_pinned_free(pin_in));
    TC_OK(acg_pinned_free(pin_out));
    tc_close(d2);
    ctx_destroy(c);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* Destroying the origin stream of a capture abandons the capture; the pool is free again. */
static void test_destroy_capturing_stream(void **state) {
    (void)state;
    tc_alloc_install();
    rctx *c = &ctx;
    ctx_create(c);
    if (!tc_has_graphs(c->dev, c->s)) {
        ctx_destroy(c);
        assert_int_equal(tc_alloc_live(), 0);
        tc_alloc_uninstall();
        tc_skip("no graphs");
    }
    acg_stream *s = tc_stream(c->dev);
    TC_OK(acg_stream_begin_capture(s, c->pool));
    TC_OK(tc_fill(s, &c->k, c->x, 0, N, 1.0f));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_stream_begin_capture(c->s, c->pool));
    TC_OK(tc_fill(c->s, &c->k, c->x, 0, N, 2.0f));
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->s, &g));
    ctx_graph = g;
    float back[N], want[N];
    tc_poison(c->s, c->x);
    TC_OK(tc_replay(g, c->s, c->x, NB, back));
    tc_splat(want, N, 2.0f);
    TC_BYTES_EQUAL(back, want, NB);
    TC_OK(acg_graph_destroy(g));
    ctx_graph = NULL;
    ctx_destroy(c);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

int main(int argc, char **argv) {
    tc_init(argc, argv);
    enum { NR = sizeof rules / sizeof rules[0] };
    static char names[NR][96];
    struct CMUnitTest tests[NR + 2];
    for (size_t i = 0; i < NR; i++) {
        snprintf(names[i], sizeof names[i], "%s%s", rules[i].op, rules[i].fork ? " (forked)" : "");
        tests[i].name = names[i];
        tests[i].test_func = run_rule;
        tests[i].setup_func = NULL;
        tests[i].teardown_func = release_teardown;
        tests[i].initial_state = (void *)&rules[i];
    }
    const struct CMUnitTest extra[2] = {
        cmocka_unit_test_teardown(test_legal_during_capture, release_teardown),
        cmocka_unit_test_teardown(test_destroy_capturing_stream, release_teardown),
    };
    tests[NR] = extra[0];
    tests[NR + 1] = extra[1];
    return cmocka_run_group_tests_name(tc_group("test_capture_rules"), tests, NULL, NULL);
}
