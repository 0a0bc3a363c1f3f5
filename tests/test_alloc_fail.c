/* test_alloc_fail.c — every allocation of the library can fail: the failing call returns
 * ACG_ERR_OUT_OF_MEMORY, cleanup releases everything, and nothing crashes or leaks. */
#include "common.h"
#include "core/acg-impl.h" /* acg__handle_room */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1024 };
#define NB ((size_t)N * sizeof(float))

/* ---- the scenario ------------------------------------------------------------------------- */

typedef struct scen {
    acg_device *dev;
    acg_buffer *x, *y, *z, *t; /* t: the scratch of the eager variant */
    float *pin_in, *pin_out;
    acg_stream *a, *b;
    acg_event *e1, *e2;
    acg_graph_pool *pool;
    acg_graph *g, *g_tail; /* g_tail: the tail, when the fork/join runs eagerly */
    tc_kernels k;
    bool capturing;
    const char *step; /* the call that failed */
} scen;

#define STEP(call)                                                                                 \
    do {                                                                                           \
        st = (call);                                                                               \
        if (st != ACG_OK) {                                                                        \
            sc->step = #call;                                                                      \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static void scen_cleanup(scen *sc) {
    if (sc->capturing) {
        acg_graph *g = NULL;
        if (acg_stream_end_capture(sc->a, &g) == ACG_OK) {
            TC_OK(acg_graph_destroy(g));
        }
    }
    if (sc->a != NULL) {
        acg_stream_synchronize(sc->a); /* may report the injected fault again */
    }
    TC_OK(acg_graph_destroy(sc->g));
    TC_OK(acg_graph_destroy(sc->g_tail));
    TC_OK(acg_graph_pool_destroy(sc->pool));
    TC_OK(acg_event_destroy(sc->e1));
    TC_OK(acg_event_destroy(sc->e2));
    TC_OK(acg_stream_destroy(sc->a));
    TC_OK(acg_stream_destroy(sc->b));
    TC_OK(acg_pinned_free(sc->pin_in));
    TC_OK(acg_pinned_free(sc->pin_out));
    TC_OK(acg_buffer_free(sc->x));
    TC_OK(acg_buffer_free(sc->y));
    TC_OK(acg_buffer_free(sc->z));
    TC_OK(acg_buffer_free(sc->t));
    TC_OK(acg_device_close(sc->dev));
}

/* A loop whose body runs once (it clears its condition), nested in one that runs twice (the
 * outer condition, y[0], is 1 after one run, 0 after the second), on stream a: eagerly on every
 * device, in a capture where it says graph_loops. */
static acg_status loops(scen *sc) {
    acg_status st = acg_fill(sc->a, sc->y, 0, 4, 0x40000000u, 4); /* y[0] = 2.0f */
    st = st != ACG_OK ? st : acg_stream_loop_begin(sc->a, sc->y, 0, 4);
    st = st != ACG_OK ? st : acg_stream_loop_begin(sc->a, sc->x, 0, 3);
    st = st != ACG_OK ? st : acg_fill(sc->a, sc->x, 0, NB, 0, 4);
    st = st != ACG_OK ? st : acg_stream_loop_end(sc->a);
    st = st != ACG_OK ? st : tc_add(sc->a, &sc->k, sc->y, 0, sc->y, 0, 1, -1.0f);
    return st != ACG_OK ? st : acg_stream_loop_end(sc->a);
}

/* The step in three parts: head (a loop among it) and tail on stream a, and a part that b forks off
 * a for and a joins again, with scratch from the capture's pool (or, eagerly, the ordinary buffer
 * t). */
static acg_status part_head(scen *sc) {
    acg_status st = ACG_OK;
    if (!sc->capturing || tc_cap()->graph_loops) {
        st = loops(sc);
    }
    if (st == ACG_OK) {
        st = acg_copy_h2d(sc->a, sc->x, 0, sc->pin_in, NB);
    }
    if (st == ACG_OK) {
        st = tc_add(sc->a, &sc->k, sc->y, 0, sc->x, 0, N, 1.0f); /* y = in + 1 */
    }
    return st;
}

static acg_status part_fork(scen *sc, bool capturing) {
    acg_status st = acg_event_record(sc->e1, sc->a);
    if (st == ACG_OK) {
        st = acg_stream_wait_event(sc->b, sc->e1);
    }
    acg_buffer *tmp = sc->t;
    if (st == ACG_OK && capturing) {
        st = acg_stream_alloc(sc->b, NB, &tmp);
    }
    if (st == ACG_OK) {
        st = tc_add(sc->b, &sc->k, tmp, 0, sc->y, 0, N, 2.0f); /* tmp = in + 3 */
    }
    if (st == ACG_OK) {
        st = tc_copy(sc->b, &sc->k, sc->z, 0, tmp, 0, N); /* z = in + 3 */
    }
    if (st == ACG_OK) {
        st = acg_event_record(sc->e2, sc->b);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(sc->a, sc->e2);
    }
    return st;
}

static acg_status part_tail(scen *sc) {
    /* z = 0.5 (in + 1) + in + 3 */
    acg_status st = tc_axpy(sc->a, &sc->k, sc->z, 0, sc->y, 0, N, 0.5f);
    if (st == ACG_OK) {
        st = acg_fill(sc->a, sc->x, 0, NB, 0, 4);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2d(sc->a, sc->x, 0, sc->z, 0, NB);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(sc->a, sc->pin_out, sc->x, 0, NB);
    }
    return st;
}

/* Opens a device, captures kernels, copies, a fork/join and graph scratch, replays, checks the
 * result, and destroys everything. Returns the first failing status (sc->step names the call).
 * What the device cannot capture runs eagerly instead: without graphs the whole step; without
 * multi-stream capture the fork/join part, between a graph of the head and one of the tail. */
static acg_status scenario(scen *sc) {
    acg_status st = ACG_OK;
    memset(sc, 0, sizeof *sc);
    const bool graphs = tc_cap()->graphs;
    const bool fork = graphs && tc_cap()->multi_stream_capture;
    STEP(acg_device_open(tc_spec(), &sc->dev));
    STEP(acg_buffer_alloc(sc->dev, NB, &sc->x));
    STEP(acg_buffer_alloc(sc->dev, NB, &sc->y));
    STEP(acg_buffer_alloc(sc->dev, NB, &sc->z));
    if (!fork) {
        STEP(acg_buffer_alloc(sc->dev, NB, &sc->t));
    }
    STEP(acg_pinned_alloc(sc->dev, NB, (void **)&sc->pin_in));
    STEP(acg_pinned_alloc(sc->dev, NB, (void **)&sc->pin_out));
    STEP(acg_stream_create(sc->dev, &sc->a));
    STEP(acg_stream_create(sc->dev, &sc->b));
    STEP(acg_event_create(sc->dev, &sc->e1));
    STEP(acg_event_create(sc->dev, &sc->e2));
    STEP(acg_graph_pool_create(sc->dev, &sc->pool));
    STEP(acg_kernel_get(sc->dev, "fill_f32", &sc->k.fill));
    STEP(acg_kernel_get(sc->dev, "add_scalar_f32", &sc->k.add));
    STEP(acg_kernel_get(sc->dev, "axpy_f32", &sc->k.axpy));
    STEP(acg_kernel_get(sc->dev, "copy_f32", &sc->k.copy));
    tc_fill_floats(sc->pin_in, N, 9);

    if (graphs) {
        STEP(acg_stream_begin_capture(sc->a, sc->pool));
        sc->capturing = true;
        STEP(part_head(sc));
        if (fork) {
            STEP(part_fork(sc, true));
            STEP(part_tail(sc));
        }
        sc->capturing = false;
        STEP(acg_stream_end_capture(sc->a, &sc->g));
        if (!fork) {
            STEP(acg_stream_begin_capture(sc->a, sc->pool));
            sc->capturing = true;
            STEP(part_tail(sc));
            sc->capturing = false;
            STEP(acg_stream_end_capture(sc->a, &sc->g_tail));
        }
    }

    for (int rep = 0; rep < 2; rep++) {
        memset(sc->pin_out, 0, NB);
        STEP(loops(sc)); /* eagerly, on every device */
        if (graphs) {
            STEP(acg_graph_launch(sc->g, sc->a));
        } else {
            STEP(part_head(sc));
        }
        if (!fork) {
            STEP(part_fork(sc, false));
            if (graphs) {
                STEP(acg_graph_launch(sc->g_tail, sc->a));
            } else {
                STEP(part_tail(sc));
            }
        }
        STEP(acg_stream_synchronize(sc->a));
        for (size_t i = 0; i < N; i++) {
            float in = sc->pin_in[i];
            float want = 0.5f * (in + 1.0f) + (in + 3.0f);
            if (memcmp(&sc->pin_out[i], &want, 4) != 0) {
                sc->step = "verify replay";
                st = ACG_ERR_INTERNAL;
                goto out;
            }
        }
    }
out:
    scen_cleanup(sc);
    return st;
}

/* The sweep: fail allocation 1, 2, 3, ... of the scenario until it runs through without hitting
 * the fault. Every run stops cleanly with ACG_ERR_OUT_OF_MEMORY and leaks nothing. */
static void test_alloc_fail_sweep(void **state) {
    (void)state;
    tc_alloc_install();
    scen sc;
    /* A dry run: the scenario passes with no fault armed. */
    tc_alloc_fail_at(0);
    TC_OK(scenario(&sc));
    assert_int_equal(tc_alloc_live(), 0);

    uint64_t n;
    for (n = 1; n < 100000; n++) {
        tc_alloc_fail_at(n);
        acg_status st = scenario(&sc);
        bool hit = tc_alloc_fail_hit();
        tc_alloc_fail_at(0);
        if (tc_alloc_live() != 0) {
            print_error("N=%llu: %lld allocations leaked (failed step: %s, %s)\n",
                        (unsigned long long)n, (long long)tc_alloc_live(),
                        sc.step ? sc.step : "none", acg_status_name(st));
            fail();
        }
        if (!hit) {
            if (st != ACG_OK) {
                print_error("N=%llu: no fault hit but %s returned %s: %s\n", (unsigned long long)n,
                            sc.step ? sc.step : "?", acg_status_name(st), acg_last_error());
                fail();
            }
            break;
        }
        if (st != ACG_ERR_OUT_OF_MEMORY) {
            print_error("N=%llu: fault hit, but the scenario %s (step %s): %s\n",
                        (unsigned long long)n, st == ACG_OK ? "passed" : acg_status_name(st),
                        sc.step ? sc.step : "none", acg_last_error());
            fail();
        }
    }
    print_message("allocation-failure sweep: %llu allocation points\n",
                  (unsigned long long)(n - 1));
    assert_true(n > 10);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
}

/* ---- one create at a time ------------------------------------------------------------------
 * Each kind of object a create makes, and its release, on a fixture of the device under test:
 * its stream makes stream-ordered memory and captures, its buffer x is a view's parent. */

/* The two sweeps of creates: one create at a time (test_alloc_fail_each_create), where a
 * failure must name the create and a success's release free all it allocated; and at the
 * registry's growth (test_alloc_fail_at_registry_growth, for the creates that enter a handle),
 * where a failure must leave the registry full and a success must have grown it. */
typedef enum sweep { SWEEP_EACH = 1, SWEEP_GROWTH = 2 } sweep;

typedef struct kind {
    const char *name; /* the create, as its failure must name it */
    acg_status (*create)(tc_fixture2 *f, void **out);
    acg_status (*release)(tc_fixture2 *f, void *obj); /* of an object create made on f */
    unsigned sweeps;                                  /* the sweeps that take it */
} kind;

static acg_status make_buffer(tc_fixture2 *f, void **o) {
    return acg_buffer_alloc(f->t.dev, 256, (acg_buffer **)o);
}
static acg_status make_pinned(tc_fixture2 *f, void **o) {
    return acg_pinned_alloc(f->t.dev, 256, o);
}
static acg_status make_view(tc_fixture2 *f, void **o) {
    return acg_buffer_create_view(f->x, 0, 64, (acg_buffer **)o);
}
static acg_status make_stream_buffer(tc_fixture2 *f, void **o) {
    return acg_stream_alloc(f->t.s, 256, (acg_buffer **)o);
}
static acg_status make_stream(tc_fixture2 *f, void **o) {
    return acg_stream_create(f->t.dev, (acg_stream **)o);
}
static acg_status make_event(tc_fixture2 *f, void **o) {
    return acg_event_create(f->t.dev, (acg_event **)o);
}
static acg_status make_pool(tc_fixture2 *f, void **o) {
    return acg_graph_pool_create(f->t.dev, (acg_graph_pool **)o);
}
static acg_status make_group(tc_fixture2 *f, void **o) {
    return acg_device_group_create(f->t.dev, tc_one_rank_comm(), (acg_device_group **)o);
}
static acg_status make_graph(tc_fixture2 *f, void **o) {
    acg_status st = acg_stream_begin_capture(f->t.s, NULL);
    if (st == ACG_OK) {
        st = tc_fill(f->t.s, &f->t.k, f->x, 0, 64, 1.0f);
        acg_graph *graph = NULL;
        acg_status end = acg_stream_end_capture(f->t.s, &graph); /* ends it either way */
        if (st == ACG_OK && end == ACG_OK) {
            *o = graph;
        }
        st = st != ACG_OK ? st : end;
    }
    return st;
}

/* A kind's release: the call that takes the object alone (RELEASED_BY), or the stream's free. */
#define RELEASED_BY(call)                                                                          \
    static acg_status release_by_##call(tc_fixture2 *f, void *o) {                                 \
        (void)f;                                                                                   \
        return call(o);                                                                            \
    }
RELEASED_BY(acg_buffer_free)
RELEASED_BY(acg_pinned_free)
RELEASED_BY(acg_stream_destroy)
RELEASED_BY(acg_event_destroy)
RELEASED_BY(acg_graph_pool_destroy)
RELEASED_BY(acg_device_group_destroy)
RELEASED_BY(acg_graph_destroy)
#undef RELEASED_BY
static acg_status free_stream_buffer(tc_fixture2 *f, void *o) { return acg_stream_free(f->t.s, o); }

static const kind kinds[] = {
    {"acg_buffer_alloc", make_buffer, release_by_acg_buffer_free, SWEEP_EACH | SWEEP_GROWTH},
    {"acg_pinned_alloc", make_pinned, release_by_acg_pinned_free, SWEEP_EACH},
    {"acg_buffer_create_view", make_view, release_by_acg_buffer_free, SWEEP_GROWTH},
    {"acg_stream_alloc", make_stream_buffer, free_stream_buffer, SWEEP_GROWTH},
    {"acg_stream_create", make_stream, release_by_acg_stream_destroy, SWEEP_EACH | SWEEP_GROWTH},
    {"acg_event_create", make_event, release_by_acg_event_destroy, SWEEP_EACH | SWEEP_GROWTH},
    {"acg_graph_pool_create", make_pool, release_by_acg_graph_pool_destroy,
     SWEEP_EACH | SWEEP_GROWTH},
    {"acg_device_group_create", make_group, release_by_acg_device_group_destroy, SWEEP_GROWTH},
    {"acg_stream_end_capture", make_graph, release_by_acg_graph_destroy, SWEEP_GROWTH},
};

/* Creates an object of kind k with the n-th allocation from now failing: on a failure the
 * create returns ACG_ERR_OUT_OF_MEMORY, leaves its out-parameter untouched and frees what it
 * had allocated; without one it succeeds, and the object is released again; and what the sweep
 * `what` checks besides. Returns whether the fault was hit. */
static bool create_failing_at(const kind *k, tc_fixture2 *f, uint64_t n, sweep what) {
    int64_t base = tc_alloc_live();
    void *const sentinel = (void *)(uintptr_t)0x50;
    void *obj = sentinel;
    tc_alloc_fail_at(n);
    acg_status st = k->create(f, &obj);
    bool hit = tc_alloc_fail_hit();
    tc_alloc_fail_at(0);
    if (!hit) {
        TC_OK(st);
        assert_ptr_not_equal(obj, sentinel);
        if (what == SWEEP_GROWTH) {
            /* The create's own entry grew the table: the sweep met that allocation. */
            assert_true(acg__handle_room() > 0);
        }
        TC_OK(k->release(f, obj));
        if (what == SWEEP_EACH) {
            assert_int_equal(tc_alloc_live(), base);
        }
        return false;
    }
    if (st != ACG_ERR_OUT_OF_MEMORY) {
        print_error("%s with allocation %llu failing: ", k->name, (unsigned long long)n);
    }
    tc_expect_(ACG_ERR_OUT_OF_MEMORY, st, k->name, __FILE__, __LINE__);
    if (what == SWEEP_EACH) {
        TC_LAST_ERROR_HAS(k->name);
    }
    assert_ptr_equal(obj, sentinel);
    assert_int_equal(tc_alloc_live(), base);
    if (what == SWEEP_GROWTH) {
        assert_int_equal(acg__handle_room(), 0); /* the failed entry left no trace */
    }
    return true;
}

/* One failing call at a time: each returns ACG_ERR_OUT_OF_MEMORY naming itself, leaves its
 * out-parameter untouched, and frees what it had allocated. */
static void test_alloc_fail_each_create(void **state) {
    (void)state;
    tc_alloc_install();
    tc_fixture2 *f = tc_fixture2_new(sizeof *f, 256);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (!(kinds[i].sweeps & SWEEP_EACH)) {
            continue;
        }
        for (uint64_t n = 1; create_failing_at(&kinds[i], f, n, SWEEP_EACH); n++) {
            assert_true(n < 1000);
        }
    }
    tc_fixture2_free(f);
    assert_int_equal(tc_alloc_live(), 0);

    /* Opening a device fails cleanly at each of its allocations too. */
    for (uint64_t n = 1;; n++) {
        assert_true(n < 1000);
        acg_device *const sentinel = (acg_device *)(uintptr_t)0x60;
        acg_device *d = sentinel;
        tc_alloc_fail_at(n);
        acg_status st = acg_device_open(tc_spec(), &d);
        bool hit = tc_alloc_fail_hit();
        tc_alloc_fail_at(0);
        if (!hit) {
            TC_OK(st);
            tc_close(d);
            break;
        }
        TC_EXPECT(ERR_OUT_OF_MEMORY, st);
        assert_ptr_equal(d, sentinel);
        assert_int_equal(tc_alloc_live(), 0);
    }
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* ---- the registry's growth ------------------------------------------------------------------
 * A create enters its handle last; when that entry must grow the registry's table and the
 * allocation fails, the create undoes everything it did before (the object's place in its
 * device's lists and counts included). Each kind is swept from a registry just full enough
 * that its own entry grows the table, on a device opened for each run, so every run starts from
 * the same registry. */

/* A fixture, and events that fill the registry. */
typedef struct growth {
    tc_fixture2 f;
    acg_event *fill[256];
    uint32_t n_fill;
} growth;

static growth *growth_open(void) {
    growth *g = tc_fixture2_new(sizeof *g, 256);
    while (acg__handle_room() != 0) {
        assert_true(g->n_fill < 256);
        g->fill[g->n_fill++] = tc_event(g->f.t.dev);
    }
    return g;
}

/* Releases g; the device's close counts what is left on it. */
static void growth_close(growth *g) {
    for (uint32_t i = 0; i < g->n_fill; i++) {
        TC_OK(acg_event_destroy(g->fill[i]));
    }
    tc_fixture2_free(&g->f);
}

static void test_alloc_fail_at_registry_growth(void **state) {
    (void)state;
    tc_alloc_install();
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const kind *k = &kinds[i];
        if (!(k->sweeps & SWEEP_GROWTH) || (k->create == make_group && !tc_cap()->collectives)) {
            continue; /* a group is refused before it allocates: nothing to sweep */
        }
        if (k->create == make_graph && !tc_cap()->graphs) {
            continue;
        }
        for (uint64_t n = 1;; n++) {
            assert_true(n < 1000);
            growth *g = growth_open();
            bool hit = create_failing_at(k, &g->f, n, SWEEP_GROWTH);
            growth_close(g);
            assert_int_equal(tc_alloc_live(), 0);
            if (!hit) {
                print_message("%s: %llu allocation points, the registry's growth among them\n",
                              k->name, (unsigned long long)(n - 1));
                break;
            }
        }
    }
    tc_alloc_uninstall();
}

/* The allocator can only be swapped while no acg object lives; a refused swap keeps the
 * installed allocator in use. */
static void test_set_allocator_in_use(void **state) {
    (void)state;
    tc_alloc_install();
    acg_device *dev = tc_open();
    TC_EXPECT(ERR_IN_USE, acg_set_allocator(NULL, NULL));
    TC_LAST_ERROR_HAS("acg_set_allocator");
    uint64_t before = tc_alloc_count();
    acg_buffer *b = tc_buffer(dev, 128);
    assert_true(tc_alloc_count() > before);
    void *p = tc_pinned(dev, 128);
    TC_EXPECT(ERR_IN_USE, acg_set_allocator(tc_alloc_fn, NULL));
    TC_OK(acg_buffer_free(b));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev));
    TC_OK(acg_pinned_free(p));
    tc_close(dev);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
    /* With the default allocator back, the counter sees nothing. */
    before = tc_alloc_count();
    dev = tc_open();
    assert_int_equal(tc_alloc_count(), before);
    tc_close(dev);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_set_allocator_in_use),
    cmocka_unit_test(test_alloc_fail_each_create),
    cmocka_unit_test(test_alloc_fail_at_registry_growth),
    cmocka_unit_test(test_alloc_fail_sweep),
};
TC_MAIN("test_alloc_fail", tests)
