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

typedef struct rule rule;

/* What every case starts from: the fixture (the device; s, its stream t.s, is the origin of the
 * capture; b is forked into the capture when the rule asks for it; x and y hold NB bytes each)
 * and the objects the rules use. */
typedef struct rctx {
    tc_fixture2 f;
    const rule *r; /* run_rule's rule; NULL in the other cases */
    acg_graph_pool *pool;
    acg_buffer *victim;
    acg_event *e_in;  /* recorded inside the capture */
    acg_event *e_out; /* recorded outside the capture, before it */
    acg_event *e_join;
    acg_graph *pre;   /* a finished graph (private pool) */
    acg_graph *graph; /* the case's own graph while it lives, for the teardown after a failure */
    void *heap;       /* pageable host memory, NB bytes */
    acg_device *dev2; /* a second device */
    void *pin2;       /* pinned memory of dev2, NB bytes */
    void *nopin;      /* acg_pinned_alloc under ACG_NO_PINNED=1, NB bytes */
} rctx;

typedef acg_status (*rule_fn)(rctx *c);

struct rule {
    const char *op; /* what acg_last_error() must name */
    rule_fn fn;
    acg_status want;
    bool fork; /* fork stream b into the capture before the illegal call */
};

/* ---- the illegal operations --------------------------------------------------------------- */

static acg_status op_stream_synchronize(rctx *c) { return acg_stream_synchronize(c->f.t.s); }
static acg_status op_stream_query(rctx *c) { return acg_stream_query(c->f.t.s); }
static acg_status op_forked_synchronize(rctx *c) { return acg_stream_synchronize(c->f.b); }
static acg_status op_event_synchronize(rctx *c) { return acg_event_synchronize(c->e_in); }
static acg_status op_event_query(rctx *c) { return acg_event_query(c->e_in); }
static acg_status op_d2h_pageable(rctx *c) {
    return acg_copy_d2h(c->f.t.s, c->heap, c->f.x, 0, NB);
}
static acg_status op_h2d_pageable(rctx *c) {
    return acg_copy_h2d(c->f.t.s, c->f.x, 0, c->heap, NB);
}
static acg_status op_device_synchronize(rctx *c) { return acg_device_synchronize(c->f.t.dev); }
static acg_status op_begin_again(rctx *c) { return acg_stream_begin_capture(c->f.t.s, c->pool); }
static acg_status op_wait_outside(rctx *c) { return acg_stream_wait_event(c->f.t.s, c->e_out); }
static acg_status op_graph_launch(rctx *c) { return acg_graph_launch(c->pre, c->f.t.s); }
static acg_status op_h2d_other_pinned(rctx *c) {
    return acg_copy_h2d(c->f.t.s, c->f.x, 0, c->pin2, NB);
}
/* s waits on an event recorded inside another, concurrent capture (on b, private pool). */
static acg_status op_wait_other_capture(rctx *c) {
    TC_OK(acg_stream_begin_capture(c->f.b, NULL));
    TC_OK(tc_fill(c->f.b, &c->f.t.k, c->f.y, 0, N, 1.0f));
    TC_OK(acg_event_record(c->e_join, c->f.b));
    acg_status st = acg_stream_wait_event(c->f.t.s, c->e_join);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(c->f.b, &g));
    TC_OK(acg_graph_destroy(g));
    return st;
}
static acg_status op_d2h_no_pinned(rctx *c) {
    return acg_copy_d2h(c->f.t.s, c->nopin, c->f.x, 0, NB);
}

/* An allocation refused during the capture leaves its out-parameter as it was. */
static acg_status refused_alloc(rctx *c, acg_status (*alloc)(rctx *c, void **out)) {
    void *const sentinel = (void *)(uintptr_t)0x10;
    void *p = sentinel;
    acg_status st = alloc(c, &p);
    assert_ptr_equal(p, sentinel);
    return st;
}
static acg_status alloc_buffer(rctx *c, void **out) {
    return acg_buffer_alloc(c->f.t.dev, 64, (acg_buffer **)out);
}
static acg_status alloc_pinned(rctx *c, void **out) {
    return acg_pinned_alloc(c->f.t.dev, 64, out);
}
/* The stream's own memory, allocated on a stream outside the capture: an allocation outside the
 * pool while the device captures. */
static acg_status alloc_elsewhere(rctx *c, void **out) {
    return acg_stream_alloc(c->f.b, 64, (acg_buffer **)out);
}
static acg_status op_buffer_alloc(rctx *c) { return refused_alloc(c, alloc_buffer); }
static acg_status op_pinned_alloc(rctx *c) { return refused_alloc(c, alloc_pinned); }
static acg_status op_stream_alloc_elsewhere(rctx *c) { return refused_alloc(c, alloc_elsewhere); }

/* Pinned memory of the device: freeing it synchronizes, so the capture ends; nothing is freed
 * (teardown frees it). */
static acg_status op_pinned_free(rctx *c) { return acg_pinned_free(c->nopin); }

/* Registering host memory page-locks it, which synchronizes: nothing is registered. */
static acg_status op_pinned_register(rctx *c) {
    acg_status st = acg_pinned_register(c->f.t.dev, c->heap, NB);
    assert_false(acg_pinned_contains(c->f.t.dev, c->heap, NB));
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

/* The setup of every case: the counting allocator, then the context. *state holds the case's
 * rule on entry (cmocka's prestate; NULL but for run_rule), the context after. */
static int ctx_setup(void **state) {
    const rule *r = *state;
    tc_alloc_install();
    rctx *c = tc_fixture2_new(sizeof *c, NB);
    acg_device *dev = c->f.t.dev;
    c->r = r;
    c->pool = tc_pool(dev);
    c->victim = tc_buffer(dev, 64);
    c->e_in = tc_event(dev);
    c->e_out = tc_event(dev);
    c->e_join = tc_event(dev);
    c->heap = calloc(1, NB);
    assert_non_null(c->heap);
    c->dev2 = tc_open();
    c->pin2 = tc_pinned(c->dev2, NB);
    assert_int_equal(setenv("ACG_NO_PINNED", "1", 1), 0);
    c->nopin = tc_pinned(dev, NB);
    assert_int_equal(unsetenv("ACG_NO_PINNED"), 0);
    if (tc_cap()->graphs) {
        TC_OK(acg_stream_begin_capture(c->f.t.s, NULL));
        TC_OK(tc_fill(c->f.t.s, &c->f.t.k, c->f.y, 0, N, 1.0f));
        TC_OK(acg_stream_end_capture(c->f.t.s, &c->pre));
    }
    TC_OK(tc_fill(c->f.b, &c->f.t.k, c->f.y, 0, N, 0.0f));
    TC_OK(acg_event_record(c->e_out, c->f.b));
    TC_OK(acg_stream_synchronize(c->f.b));
    *state = c;
    return 0;
}

/* Ends a capture a failed assertion left under way and destroys the case's graph (each where
 * there is one), then releases the context, asserting each release (a case that left an object
 * of the device fails), checks that no allocation of the library is live and uninstalls the
 * counting allocator. A release that fails stops the teardown there: what is left stays, and
 * so does the allocator (acg_set_allocator is refused while an object lives). */
static int ctx_teardown(void **state) {
    rctx *c = *state;
    acg_graph *g = NULL;
    if (acg_stream_end_capture(c->f.t.s, &g) == ACG_OK) {
        acg_graph_destroy(g);
    }
    acg_graph_destroy(c->graph);
    TC_OK(acg_graph_destroy(c->pre));
    TC_OK(acg_event_destroy(c->e_in));
    TC_OK(acg_event_destroy(c->e_out));
    TC_OK(acg_event_destroy(c->e_join));
    TC_OK(acg_buffer_free(c->victim));
    TC_OK(acg_graph_pool_destroy(c->pool));
    TC_OK(acg_pinned_free(c->nopin));
    TC_OK(acg_pinned_free(c->pin2));
    tc_close(c->dev2);
    free(c->heap);
    tc_fixture2_teardown(state);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return 0;
}

/* Runs `value` on stream s eagerly into buf and checks the data. */
static void eager_check(rctx *c, acg_stream *s, acg_buffer *buf, float value) {
    TC_OK(tc_fill(s, &c->f.t.k, buf, 0, N, value));
    TC_OK(acg_stream_synchronize(s));
    TC_EXPECT_FLOATS(s, buf, N, value);
}

/* The illegal call inside a capture: it fails naming itself, the capture refuses further work,
 * and end_capture reports it. */
static void check_illegal(rctx *c, const rule *r) {
    acg_stream *s = c->f.t.s, *b = c->f.b;
    const tc_kernels *k = &c->f.t.k;
    TC_OK(acg_stream_begin_capture(s, c->pool));
    TC_OK(tc_fill(s, k, c->f.x, 0, N, 1.0f));
    TC_OK(acg_event_record(c->e_in, s));
    if (r->fork) {
        TC_OK(acg_stream_wait_event(b, c->e_in));
        TC_OK(tc_add(b, k, c->f.y, 0, c->f.x, 0, N, 1.0f));
        TC_OK(acg_event_record(c->e_join, b));
        TC_OK(acg_stream_wait_event(s, c->e_join));
        TC_EXPECT_CAPTURE_STATE(b, ACTIVE);
    }
    TC_EXPECT_CAPTURE_STATE(s, ACTIVE);

    /* The illegal call fails and names itself. */
    tc_expect_(r->want, r->fn(c), r->op, __FILE__, __LINE__);
    TC_LAST_ERROR_HAS(r->op);
    TC_EXPECT_CAPTURE_STATE(s, INVALIDATED);
    if (r->fork) {
        TC_EXPECT_CAPTURE_STATE(b, INVALIDATED);
    }

    /* Further work on the capture's streams is refused. */
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, tc_fill(s, k, c->f.x, 0, N, 2.0f));
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_fill(s, c->f.x, 0, NB, 0, 4));
    if (r->fork) {
        TC_EXPECT(ERR_CAPTURE_INVALIDATED, tc_fill(b, k, c->f.y, 0, N, 2.0f));
    }

    /* end_capture reports the invalidation, repeats why, and returns no graph. */
    acg_graph *const sentinel = (acg_graph *)(uintptr_t)0x30;
    acg_graph *g = sentinel;
    TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(s, &g));
    assert_ptr_equal(g, sentinel);
    TC_LAST_ERROR_HAS(r->op);
    TC_EXPECT_CAPTURE_STATE(s, NONE);
    TC_EXPECT_CAPTURE_STATE(b, NONE);
    TC_EXPECT(ERR_NOT_CAPTURING, acg_stream_end_capture(s, &g));
}

/* After a failed capture the streams work eagerly, and the pool takes the next capture. */
static void check_recovered(rctx *c) {
    acg_stream *s = c->f.t.s;
    /* The streams work eagerly again. */
    eager_check(c, s, c->f.x, 3.0f);
    eager_check(c, c->f.b, c->f.y, 4.0f);

    /* The pool takes the next capture, which replays correctly. */
    TC_OK(acg_stream_begin_capture(s, c->pool));
    acg_buffer *tmp = NULL;
    TC_OK(acg_stream_alloc(s, NB, &tmp));
    TC_OK(tc_fill(s, &c->f.t.k, tmp, 0, N, 5.0f));
    TC_OK(tc_add(s, &c->f.t.k, c->f.x, 0, tmp, 0, N, 0.5f));
    TC_OK(acg_stream_end_capture(s, &c->graph));
    tc_poison(s, c->f.x);
    TC_OK(tc_replay(c->graph, s, NULL, 0, NULL));
    TC_EXPECT_FLOATS(s, c->f.x, N, 5.5f);
    TC_OK(acg_graph_destroy(c->graph));
    c->graph = NULL;
}

/* The whole contract for one illegal operation. Without graphs there is no capture to break;
 * without multi-stream capture the fork itself is the refused operation. */
static void run_rule(void **state) {
    rctx *c = *state;
    const rule *r = c->r;
    acg_device *dev = c->f.t.dev;
    const bool graphs = tc_has_graphs(dev, c->f.t.s);
    const bool checked =
        graphs && (!r->fork || tc_has_multi_stream_capture(dev, c->f.t.s, c->f.b, c->e_in));
    if (checked) {
        check_illegal(c, r);
    }
    if (graphs) {
        check_recovered(c);
    }
    if (!checked) {
        tc_skip(graphs ? "no multi-stream capture: the fork itself was refused" : "no graphs");
    }
}

/* Work that is legal during a capture leaves it active: synchronizing and running eager work
 * on a stream outside the capture, pinned copies, and allocations on another device. */
static void test_legal_during_capture(void **state) {
    rctx *c = *state;
    acg_stream *s = c->f.t.s;
    tc_need_graphs(c->f.t.dev, s);
    if (!tc_has_pinned_memory(c->f.t.dev)) {
        tc_skip("no pinned memory");
    }
    acg_device *d2 = tc_open();
    float *pin_in = tc_pinned(c->f.t.dev, NB);
    float *pin_out = tc_pinned(c->f.t.dev, NB);

    TC_OK(acg_stream_begin_capture(s, c->pool));
    TC_OK(acg_copy_h2d(s, c->f.x, 0, pin_in, NB));
    eager_check(c, c->f.b, c->f.y, 8.0f); /* b is not part of the capture */
    TC_OK(acg_stream_query(c->f.b));
    acg_buffer *other = tc_buffer(d2, 64);
    void *other_pin = tc_pinned(d2, 64);
    TC_OK(acg_device_synchronize(d2));
    TC_OK(acg_copy_d2h(s, pin_out, c->f.x, 0, NB)); /* pinned destination: recorded */
    TC_EXPECT_CAPTURE_STATE(s, ACTIVE);
    TC_OK(acg_stream_end_capture(s, &c->graph));

    tc_fill_floats(pin_in, N, 3);
    memset(pin_out, 0, NB);
    TC_OK(tc_replay(c->graph, s, NULL, 0, NULL));
    TC_BYTES_EQUAL(pin_out, pin_in, NB);

    TC_OK(acg_graph_destroy(c->graph));
    c->graph = NULL;
    TC_OK(acg_buffer_free(other));
    TC_OK(acg_pinned_free(other_pin));
    TC_OK(acg_pinned_free(pin_in));
    TC_OK(acg_pinned_free(pin_out));
    tc_close(d2);
}

/* Destroying the origin stream of a capture abandons the capture; the pool is free again. */
static void test_destroy_capturing_stream(void **state) {
    rctx *c = *state;
    tc_need_graphs(c->f.t.dev, c->f.t.s);
    acg_stream *s = tc_stream(c->f.t.dev);
    TC_OK(acg_stream_begin_capture(s, c->pool));
    TC_OK(tc_fill(s, &c->f.t.k, c->f.x, 0, N, 1.0f));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_stream_begin_capture(c->f.t.s, c->pool));
    TC_OK(tc_fill(c->f.t.s, &c->f.t.k, c->f.x, 0, N, 2.0f));
    TC_OK(acg_stream_end_capture(c->f.t.s, &c->graph));
    tc_poison(c->f.t.s, c->f.x);
    TC_OK(tc_replay(c->graph, c->f.t.s, NULL, 0, NULL));
    TC_EXPECT_FLOATS(c->f.t.s, c->f.x, N, 2.0f);
    TC_OK(acg_graph_destroy(c->graph));
    c->graph = NULL;
}

int main(int argc, char **argv) {
    tc_init(argc, argv);
    enum { NR = sizeof rules / sizeof rules[0] };
    static char names[NR][96];
    struct CMUnitTest tests[NR + 2];
    for (size_t i = 0; i < NR; i++) {
        snprintf(names[i], sizeof names[i], "%s%s", rules[i].op, rules[i].fork ? " (forked)" : "");
        tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
            run_rule, ctx_setup, ctx_teardown, (void *)&rules[i]);
        tests[i].name = names[i];
    }
    const struct CMUnitTest extra[2] = {
        cmocka_unit_test_setup_teardown(test_legal_during_capture, ctx_setup, ctx_teardown),
        cmocka_unit_test_setup_teardown(test_destroy_capturing_stream, ctx_setup, ctx_teardown),
    };
    tests[NR] = extra[0];
    tests[NR + 1] = extra[1];
    return cmocka_run_group_tests_name(tc_group("test_capture_rules"), tests, NULL, NULL);
}
