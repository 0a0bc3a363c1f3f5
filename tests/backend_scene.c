/* backend_scene.c — the scene, driver binding and fault sweep the tests of the backends on
 * acg's test drivers share (see backend_scene.h). */
#include "backend_scene.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* TC_OK, tc_stream */

/* ---- the scene ---------------------------------------------------------------------------- */

static void count_call(void *user) { ((bs_scene *)user)->host_calls++; }

acg_status bs_fill(acg_stream *s, acg_kernel *fill, acg_buffer *y, uint32_t n, float v) {
    const tc_kernels k = {.fill = fill};
    return tc_fill(s, &k, y, 0, n, v);
}

acg_status bs_scene_open(bs_scene *c, const char *backend, bool host_call) {
    memset(c, 0, sizeof *c);
    c->host_call = host_call;
    acg_status st = acg_device_open(backend, &c->dev);
    if (st == ACG_OK) {
        st = acg_kernel_get(c->dev, "fill_f32", &c->fill);
    }
    if (st == ACG_OK) {
        st = acg_kernel_get(c->dev, "axpy_f32", &c->axpy);
    }
    acg_buffer **buffers[] = {&c->x, &c->y, &c->z};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0] && st == ACG_OK; i++) {
        st = acg_buffer_alloc(c->dev, BS_N * sizeof(float), buffers[i]);
    }
    if (st == ACG_OK) {
        st = acg_pinned_alloc(c->dev, BS_N * sizeof(float), (void **)&c->host);
    }
    if (st == ACG_OK) {
        st = acg_stream_create(c->dev, &c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_create(c->dev, &c->s2);
    }
    if (st == ACG_OK) {
        st = acg_event_create(c->dev, &c->fork);
    }
    if (st == ACG_OK) {
        st = acg_event_create(c->dev, &c->join);
    }
    if (st == ACG_OK) {
        st = acg_graph_pool_create(c->dev, &c->pool);
    }
    if (st == ACG_OK) {
        st = bs_fill(c->s, c->fill, c->x, BS_N, 1.0f);
    }
    return st;
}

acg_status bs_capture(bs_scene *c, float alpha, acg_graph **out) {
    acg_status st = acg_stream_begin_capture(c->s, c->pool);
    if (st != ACG_OK) {
        return st;
    }
    const float two = 2.0f;
    uint32_t two_bits;
    memcpy(&two_bits, &two, sizeof two_bits);
    acg_arg axpy_args[] = {acg_arg_buffer(c->y, 0), acg_arg_buffer(c->x, 0), acg_arg_f32(alpha)};
    acg_dims dims = acg_dims_1d(BS_N);
    st = acg_fill(c->s, c->z, 0, BS_N * sizeof(float), two_bits, sizeof two_bits);
    if (st == ACG_OK) {
        st = acg_copy_d2d(c->s, c->y, 0, c->z, 0, BS_N * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_event_record(c->fork, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(c->s2, c->fork);
    }
    if (st == ACG_OK) {
        st = acg_kernel_launch(c->s2, c->axpy, &dims, axpy_args, 3);
    }
    if (st == ACG_OK && c->host_call) {
        st = acg_stream_launch_host(c->s2, count_call, c, NULL, 0);
    }
    if (st == ACG_OK) {
        st = acg_event_record(c->join, c->s2);
    }
    if (st == ACG_OK) {
        st = acg_stream_wait_event(c->s, c->join);
    }
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, c->host, c->y, 0, BS_N * sizeof(float));
    }
    /* Ends the capture whatever happened, so the streams leave capture mode. */
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(c->s, &g);
    if (st == ACG_OK && end == ACG_OK) {
        *out = g;
        return ACG_OK;
    }
    if (g != NULL) {
        acg_graph_destroy(g);
    }
    return st != ACG_OK ? st : end;
}

bool bs_host_is(const bs_scene *c, float want) {
    for (int i = 0; i < BS_N; i++) {
        if (c->host[i] != want) {
            return false;
        }
    }
    return true;
}

void bs_expect_eager(bs_scene *c, float v) {
    TC_OK(bs_fill(c->s2, c->fill, c->y, BS_N, v));
    TC_OK(acg_stream_synchronize(c->s2));
    TC_OK(acg_copy_d2h(c->s, c->host, c->y, 0, BS_N * sizeof(float)));
    TC_OK(acg_stream_synchronize(c->s));
    assert_true(bs_host_is(c, v));
}

acg_status bs_replay(bs_scene *c, acg_graph *g, int times, bool check, float want) {
    acg_status st = ACG_OK;
    for (int r = 0; r < times && st == ACG_OK; r++) {
        st = acg_graph_launch(g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(bs_host_is(c, want));
    }
    return st;
}

void bs_scene_close(bs_scene *c) {
    if (c->s != NULL) {
        acg_stream_synchronize(c->s);
    }
    acg_graph_destroy(c->g2);
    acg_graph_destroy(c->g);
    acg_graph_pool_destroy(c->pool);
    acg_event_destroy(c->fork);
    acg_event_destroy(c->join);
    acg_stream_destroy(c->s2);
    acg_stream_destroy(c->s);
    acg_pinned_free(c->host);
    if (c->registered) {
        acg_pinned_unregister(c->reg);
    }
    free(c->reg);
    acg_buffer_free(c->z);
    acg_buffer_free(c->y);
    acg_buffer_free(c->x);
    if (c->dev != NULL) {
        assert_int_equal(acg_device_close(c->dev), ACG_OK);
    }
}

/* ---- the test driver ---------------------------------------------------------------------- */

void *bs_driver_symbol(const bs_driver *d, const char *name) {
    void *h = dlopen(d->path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *sym = dlsym(h, name);
    dlclose(h); /* RTLD_NOLOAD took a reference; the backend holds the library */
    if (sym == NULL) {
        print_error("the test driver %s exports no %s\n", d->path, name);
        fail();
    }
    return sym;
}

void bs_driver_bind(bs_driver *d) {
    d->path = getenv(d->env);
    assert_non_null(d->path);
    void *h = dlopen(d->path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h); /* loaded: the device was opened */
    char name[128];
    snprintf(name, sizeof name, "%s_violations", d->prefix);
    *(void **)&d->violations = dlsym(h, name); /* NULL where the driver counts no misuse */
    dlclose(h);
    snprintf(name, sizeof name, "%s_fail", d->prefix);
    *(void **)&d->inject = bs_driver_symbol(d, name);
    snprintf(name, sizeof name, "%s_calls", d->prefix);
    *(void **)&d->calls = bs_driver_symbol(d, name);
    snprintf(name, sizeof name, "%s_live", d->prefix);
    *(void **)&d->live = bs_driver_symbol(d, name);
    if (d->fault_name != NULL) {
        *(void **)&d->fault = bs_driver_symbol(d, d->fault_name);
    }
}

/* ---- the fault sweep ---------------------------------------------------------------------- */

/* Warnings that the backend left objects to the driver during the current run. */
static int left_to_driver;

static void count_left(acg_log_level level, const char *message, void *user) {
    (void)user;
    if (level == ACG_LOG_WARN && strstr(message, "left to the driver") != NULL) {
        left_to_driver++;
    }
}

/* The driver's misuse count, or 0 where it keeps none. */
static unsigned long violations(const bs_driver *drv) {
    return drv->violations != NULL ? drv->violations() : 0;
}

void bs_fault_sweep(const bs_sweep *sw, bs_driver *drv) {
    bs_scene c;
    TC_OK(sw->run(&c, true));
    char backend[32];
    snprintf(backend, sizeof backend, "%s", acg_device_get_capability(c.dev)->backend);
    bs_scene_close(&c);
    bs_driver_bind(drv);
    size_t n_names = 0;
    while (sw->names[n_names] != NULL) {
        n_names++;
    }
    if (sw->may_leave_to_driver) {
        acg_set_log_callback(count_left, NULL);
        acg_set_log_level(ACG_LOG_WARN);
    }
    unsigned long *counts = calloc(n_names, sizeof *counts);
    assert_non_null(counts);
    for (size_t i = 0; i < n_names; i++) {
        counts[i] = drv->calls(sw->names[i]);
    }
    long live = drv->live();
    TC_OK(sw->run(&c, true));
    bs_scene_close(&c);
    assert_int_equal(drv->live(), live);
    for (size_t i = 0; i < n_names; i++) {
        counts[i] = drv->calls(sw->names[i]) - counts[i];
    }
    unsigned long points = 0, failed_runs = 0, left_runs = 0;
    for (size_t i = 0; i < n_names; i++) {
        const char *name = sw->names[i];
        for (unsigned long k = 1; k <= counts[i]; k++, points++) {
            left_to_driver = 0;
            drv->inject(name, (unsigned)k, drv->refusal);
            acg_status st = sw->run(&c, false);
            char why[512];
            snprintf(why, sizeof why, "%s", st != ACG_OK ? acg_last_error() : "-");
            void *reg = c.reg;
            bs_scene_close(&c);
            drv->inject(NULL, 0, 0);
            if (sw->after_close != NULL) {
                sw->after_close(drv, name, reg);
            }
            failed_runs += st != ACG_OK;
            if (st != ACG_OK && strstr(why, drv->refusal_name) == NULL) {
                print_error("failing %s call %lu: %s without the driver's error: %s\n", name, k,
                            acg_status_name(st), why);
                fail();
            }
            left_runs += left_to_driver > 0;
            if (sw->releases(name) || left_to_driver > 0) {
                /* A release refused, or (where the backend may) a wait failed before freeing
                 * what the device may still use: the driver keeps it. */
                live = drv->live();
            } else if (drv->live() != live) {
                print_error("failing %s call %lu (%s: %s) left %ld driver objects behind\n", name,
                            k, acg_status_name(st), why, drv->live() - live);
                fail();
            }
            if (violations(drv) != 0) {
                print_error("failing %s call %lu (%s: %s): the driver saw %lu misuse(s)\n", name, k,
                            acg_status_name(st), why, violations(drv));
                fail();
            }
            TC_OK(sw->run(&c, true));
            bs_scene_close(&c);
            assert_int_equal(drv->live(), live);
        }
    }
    free(counts);
    if (sw->may_leave_to_driver) {
        acg_set_log_callback(NULL, NULL);
        acg_set_log_level(ACG_LOG_ERROR);
    }
    print_message("%s fault sweep: %lu driver calls failed in turn (%lu runs failed with the "
                  "driver's error, the rest absorbed it); %lu left what the device may still use "
                  "to the driver and said so, none leaked otherwise%s\n",
                  backend, points, failed_runs, left_runs,
                  drv->violations != NULL ? "; no misuse" : "");
    assert_true(points > 50 && failed_runs > points / 2);
}

void bs_fault_sweep_case(void **state) {
    const bs_sweep *sw = *state;
    bs_fault_sweep(sw, sw->drv);
}

/* ---- cases on the scenario's scene (a cmocka fixture) ------------------------------------- */

/* The scene a case gets, and the suite that made it (for the teardown). */
typedef struct scene_case {
    bs_scene c; /* first: the case's *state is a bs_scene */
    const bs_suite *suite;
} scene_case;

int bs_scene_setup(void **state) {
    const bs_suite *suite = *state;
    scene_case *sc = calloc(1, sizeof *sc);
    assert_non_null(sc);
    sc->suite = suite;
    *state = sc;
    TC_OK(suite->run(&sc->c, true));
    bs_driver_bind(suite->drv);
    return 0;
}

int bs_scene_teardown(void **state) {
    scene_case *sc = *state;
    const bs_driver *drv = sc->suite->drv;
    bs_scene_close(&sc->c);
    free(sc);
    if (drv->violations != NULL) {
        assert_int_equal(drv->violations(), 0);
    }
    return 0;
}

/* ---- a device with work queued (device faults) ------------------------------------------- */

void bs_rig_open(bs_rig *r, const char *backend, float v) {
    memset(r, 0, sizeof *r);
    TC_OK(acg_device_open(backend, &r->dev));
    TC_OK(acg_kernel_get(r->dev, "fill_f32", &r->fill));
    TC_OK(acg_buffer_alloc(r->dev, BS_N * sizeof(float), &r->x));
    TC_OK(acg_pinned_alloc(r->dev, BS_N * sizeof(float), (void **)&r->host));
    TC_OK(acg_stream_create(r->dev, &r->s));
    TC_OK(acg_event_create(r->dev, &r->ev));
    TC_OK(acg_graph_pool_create(r->dev, &r->pool));
    TC_OK(acg_stream_begin_capture(r->s, r->pool));
    TC_OK(bs_fill(r->s, r->fill, r->x, BS_N, v));
    TC_OK(acg_copy_d2h(r->s, r->host, r->x, 0, BS_N * sizeof(float)));
    TC_OK(acg_stream_end_capture(r->s, &r->g));
}

void bs_rig_close(bs_rig *r) {
    TC_OK(acg_graph_destroy(r->g));
    TC_OK(acg_graph_pool_destroy(r->pool));
    TC_OK(acg_event_destroy(r->ev));
    TC_OK(acg_stream_destroy(r->s));
    TC_OK(acg_pinned_free(r->host));
    TC_OK(acg_buffer_free(r->x));
    TC_OK(acg_device_close(r->dev));
}

/* ---- pinned memory read at each replay ---------------------------------------------------- */

void bs_expect_pinned_replay(acg_device *dev) {
    assert_true(acg_device_get_capability(dev)->graph_pinned_replay);
    acg_stream *s = tc_stream(dev);
    acg_buffer *x = tc_buffer(dev, BS_N * sizeof(float));
    float *in = tc_pinned(dev, BS_N * sizeof(float));
    float *out = tc_pinned(dev, BS_N * sizeof(float));
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(acg_copy_h2d(s, x, 0, in, BS_N * sizeof(float)));
    TC_OK(acg_copy_d2h(s, out, x, 0, BS_N * sizeof(float)));
    TC_OK(acg_stream_end_capture(s, &g));
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < BS_N; i++) {
            in[i] = (float)(round * 1000 + i);
        }
        memset(out, 0, BS_N * sizeof(float));
        TC_OK(acg_graph_launch(g, s));
        TC_OK(acg_stream_synchronize(s));
        TC_BYTES_EQUAL(out, in, BS_N * sizeof(float));
    }
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_pinned_free(in));
    TC_OK(acg_pinned_free(out));
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_stream_destroy(s));
}

/* ---- a lost device ----------------------------------------------------------------------- */

void bs_expect_lost_(acg_status st, const char *call, const char *first) {
    const char *why = acg_last_error();
    if (st != ACG_ERR_DEVICE_LOST || strstr(why, "was lost to an earlier fault") == NULL ||
        strstr(why, first) == NULL) {
        print_error("%s: %s (%s), not ACG_ERR_DEVICE_LOST naming an earlier fault in %s\n", call,
                    acg_status_name(st), why, first);
        fail();
    }
}

void bs_expect_lost_device(acg_device *dev, acg_stream *s, acg_event *ev, const char *first) {
    acg_buffer *b = NULL;
    acg_stream *s2 = NULL;
    BS_EXPECT_LOST(acg_buffer_alloc(dev, 64, &b), first);
    assert_null(b);
    BS_EXPECT_LOST(acg_stream_create(dev, &s2), first);
    assert_null(s2);
    BS_EXPECT_LOST(acg_stream_synchronize(s), first);
    BS_EXPECT_LOST(acg_event_synchronize(ev), first);
    BS_EXPECT_LOST(acg_device_synchronize(dev), first);
    BS_EXPECT_LOST(acg_device_get_async_error(dev), first);
    BS_EXPECT_LOST(acg_device_get_async_error(dev), first);
}

/* ---- a backend that cannot serve, and modes outside cmocka -------------------------------- */

acg_device *bs_open_or_say(const char *backend) {
    acg_device *dev = NULL;
    if (acg_device_open(backend, &dev) != ACG_OK) {
        fprintf(stderr, "open failed: %s\n", acg_last_error());
        return NULL;
    }
    return dev;
}

int bs_expect_unavailable(const char *backend, const char *text) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        if (acg_backend_get_info(i, &info) != ACG_OK || strcmp(info.name, backend) != 0) {
            continue;
        }
        acg_device *dev = NULL;
        acg_status st = acg_device_open(backend, &dev);
        if (info.available || st != ACG_ERR_UNAVAILABLE || strstr(info.reason, text) == NULL ||
            strstr(acg_last_error(), text) == NULL) {
            fprintf(stderr,
                    "expected %s unavailable with \"%s\": available %d, open %s, reason "
                    "\"%s\", error \"%s\"\n",
                    backend, text, info.available, acg_status_name(st), info.reason,
                    acg_last_error());
            return 1;
        }
        printf("unavailable as expected: %s\n", info.reason);
        return 0;
    }
    fprintf(stderr, "no %s backend in this build\n", backend);
    return 1;
}

bool bs_backend_opens(const char *backend) {
    acg_device *probe = NULL;
    if (acg_device_open(backend, &probe) != ACG_OK) {
        printf("skipped: %s: %s\n", backend, acg_last_error());
        return false;
    }
    acg_device_close(probe);
    return true;
}

int bs_main(int argc, char **argv, const char *backend, const bs_mode *modes, const char *name,
            const struct CMUnitTest *tests, size_t n) {
    if (argc == 3 && strcmp(argv[1], "--expect-unavailable") == 0) {
        return bs_expect_unavailable(backend, argv[2]);
    }
    for (const bs_mode *m = modes; m != NULL && m->flag != NULL; m++) {
        if (argc == (m->run_with != NULL ? 3 : 2) && strcmp(argv[1], m->flag) == 0) {
            return m->run_with != NULL ? m->run_with(argv[2]) : m->run();
        }
    }
    if (!bs_backend_opens(backend)) {
        return 77;
    }
    return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}
