/* common.c — helpers shared by the acg test executables (see common.h): status assertions, the
 * device under test, its objects and the fixtures most device tests start from. The host-side
 * helpers are in common_host.c, the work several suites share in common_suites.c. */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- status assertions -------------------------------------------------------------------- */

void tc_expect_(acg_status want, acg_status got, const char *expr, const char *file, int line) {
    if (want != got) {
        print_error("%s\n  returned %s (%d), expected %s (%d)\n  acg_last_error: \"%s\"\n", expr,
                    acg_status_name(got), (int)got, acg_status_name(want), (int)want,
                    acg_last_error());
        _fail(file, line);
    }
}

void tc_expect_capture_state_(acg_stream *s, acg_capture_state want, const char *file, int line) {
    acg_capture_state got = (acg_capture_state)99; /* no state: a call that wrote none fails */
    tc_expect_(ACG_OK, acg_stream_get_capture_state(s, &got), "acg_stream_get_capture_state", file,
               line);
    if (got != want) {
        print_error("the stream's capture state is %d, expected %d\n", (int)got, (int)want);
        _fail(file, line);
    }
}

bool tc_contains(const char *haystack, const char *needle) {
    return haystack != NULL && needle != NULL && strstr(haystack, needle) != NULL;
}

void tc_last_error_has_(const char *needle, const char *file, int line) {
    const char *e = acg_last_error();
    if (!tc_contains(e, needle)) {
        print_error("acg_last_error() = \"%s\" does not contain \"%s\"\n", e ? e : "(null)",
                    needle);
        _fail(file, line);
    }
}

void tc_last_error_names_file_(const char *path, const char *file, int line, va_list ap) {
    const char *base = strrchr(path, '/');
    tc_last_error_has_(base ? base + 1 : path, file, line);
    for (const char *needle = va_arg(ap, const char *); needle != NULL;
         needle = va_arg(ap, const char *)) {
        tc_last_error_has_(needle, file, line);
    }
}

void tc_bytes_equal_(const void *a, const void *b, size_t n, const char *file, int line) {
    if (memcmp(a, b, n) == 0) {
        return;
    }
    const unsigned char *pa = a, *pb = b;
    size_t i = 0;
    while (i < n && pa[i] == pb[i]) {
        i++;
    }
    size_t w = i / 4 * 4;
    uint32_t ua = 0, ub = 0;
    float fa = 0, fb = 0;
    if (w + 4 <= n) {
        memcpy(&ua, pa + w, 4);
        memcpy(&ub, pb + w, 4);
        memcpy(&fa, pa + w, 4);
        memcpy(&fb, pb + w, 4);
    }
    print_error("bytes differ at offset %zu of %zu (word %zu: %g 0x%08x vs %g 0x%08x)\n", i, n,
                w / 4, (double)fa, ua, (double)fb, ub);
    _fail(file, line);
}

/* ---- the device under test --------------------------------------------------------------- */

static const char *dut_spec = "cpu";
static char dut_backend[32] = "cpu";
static acg_capability dut_cap;
static char dut_group[160];

/* Why the backend of `spec` cannot be tested here, after acg_device_open returned st. */
static const char *skip_reason(acg_status st) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        acg_backend_info info = ACG_BACKEND_INFO_INIT;
        if (acg_backend_get_info(i, &info) == ACG_OK && strcmp(info.name, dut_backend) == 0) {
            if (!info.available) {
                return info.reason;
            }
            return acg_last_error(); /* available, but not this device index */
        }
    }
    (void)st;
    return "not compiled into this build";
}

void tc_init(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            dut_spec = argv[++i];
        } else if (strncmp(argv[i], "--device=", 9) == 0) {
            dut_spec = argv[i] + 9;
        } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
            cmocka_set_test_filter(argv[++i]);
        } else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc) {
            cmocka_set_skip_filter(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: %s [--device SPEC] [--filter PATTERN] [--skip PATTERN]\n"
                    "  SPEC: backend or backend:N (default cpu); PATTERN: test names, * and ?\n",
                    argv[0]);
            exit(1);
        }
    }
    size_t len = strcspn(dut_spec, ":");
    if (len == 0 || len >= sizeof dut_backend) {
        fprintf(stderr, "%s: bad device spec \"%s\"\n", argv[0], dut_spec);
        exit(1);
    }
    memcpy(dut_backend, dut_spec, len);
    dut_backend[len] = '\0';

    acg_device *dev = NULL;
    acg_status st = acg_device_open(dut_spec, &dev);
    if (st == ACG_ERR_NOT_FOUND || st == ACG_ERR_UNAVAILABLE) {
        printf("skipped: %s: %s\n", dut_backend, skip_reason(st));
        fflush(stdout);
        exit(77);
    }
    if (st != ACG_OK) {
        fprintf(stderr, "%s: acg_device_open(\"%s\") returned %s: %s\n", argv[0], dut_spec,
                acg_status_name(st), acg_last_error());
        exit(1);
    }
    dut_cap = *acg_device_get_capability(dev);
    printf("device under test: %s (%s): graphs %d, graph_update %d, multi_stream_capture %d, "
           "pinned_memory %d\n",
           acg_device_get_spec(dev), dut_cap.name, dut_cap.graphs, dut_cap.graph_update,
           dut_cap.multi_stream_capture, dut_cap.pinned_memory);
    fflush(stdout);
    if (acg_device_close(dev) != ACG_OK) {
        fprintf(stderr, "%s: acg_device_close: %s\n", argv[0], acg_last_error());
        exit(1);
    }
}

const char *tc_spec(void) { return dut_spec; }
const char *tc_backend(void) { return dut_backend; }
bool tc_backend_is(const char *name) { return strcmp(dut_backend, name) == 0; }
const acg_capability *tc_cap(void) { return &dut_cap; }

const char *tc_group(const char *test) {
    snprintf(dut_group, sizeof dut_group, "%s --device %s", test, dut_spec);
    return dut_group;
}

void tc_skip(const char *why_fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, why_fmt);
    vsnprintf(why, sizeof why, why_fmt, ap);
    va_end(ap);
    print_message("skipped: %s: %s\n", dut_spec, why);
    skip();
    abort(); /* skip() leaves the case; it does not return */
}

static void note_missing(const char *what) {
    print_message("note: %s (%s) has no %s: checked that it says so and refuses it with "
                  "ACG_ERR_UNSUPPORTED\n",
                  dut_spec, dut_cap.name, what);
}

bool tc_has_graphs(acg_device *dev, acg_stream *s) {
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    if (cap->graphs) {
        return true;
    }
    assert_false(cap->graph_update);
    TC_EXPECT(ERR_UNSUPPORTED, acg_stream_begin_capture(s, NULL));
    TC_LAST_ERROR_HAS("acg_stream_begin_capture");
    TC_EXPECT_CAPTURE_STATE(s, NONE);
    note_missing("graphs");
    return false;
}

void tc_need_graphs(acg_device *dev, acg_stream *s) {
    if (!tc_has_graphs(dev, s)) {
        tc_skip("no graphs");
    }
}

bool tc_has_graph_update(acg_graph *g, const acg_graph *from) {
    const acg_capability *cap = acg_device_get_capability(acg_graph_get_device(g));
    assert_non_null(cap);
    if (cap->graph_update) {
        return true;
    }
    TC_EXPECT(ERR_UNSUPPORTED, acg_graph_update(g, from));
    TC_LAST_ERROR_HAS("acg_graph_update");
    note_missing("graph update");
    return false;
}

bool tc_has_multi_stream_capture(acg_device *dev, acg_stream *a, acg_stream *b, acg_event *e) {
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    if (cap->multi_stream_capture) {
        return true;
    }
    TC_OK(acg_stream_begin_capture(a, NULL));
    TC_OK(acg_event_record(e, a));
    TC_EXPECT(ERR_UNSUPPORTED, acg_stream_wait_event(b, e));
    TC_LAST_ERROR_HAS("acg_stream_wait_event");
    TC_EXPECT_CAPTURE_STATE(a, INVALIDATED);
    acg_graph *const sentinel = (acg_graph *)(uintptr_t)0x70;
    acg_graph *g = sentinel;
    TC_EXPECT(ERR_UNSUPPORTED, acg_stream_end_capture(a, &g));
    assert_ptr_equal(g, sentinel);
    TC_EXPECT_CAPTURE_STATE(a, NONE);
    TC_EXPECT_CAPTURE_STATE(b, NONE);
    note_missing("multi-stream capture");
    return false;
}

bool tc_has_pinned_memory(acg_device *dev) {
    const acg_capability *cap = acg_device_get_capability(dev);
    assert_non_null(cap);
    if (cap->pinned_memory) {
        return true;
    }
    void *p = tc_pinned(dev, 64);
    assert_false(acg_pinned_contains(dev, p, 64));
    TC_OK(acg_pinned_free(p));
    print_message("note: %s has no pinned memory: acg_pinned_alloc gives pageable memory\n",
                  acg_device_get_spec(dev));
    return false;
}

/* ---- objects ------------------------------------------------------------------------------ */

acg_status tc_one_rank_barrier(void *user) {
    (void)user;
    return ACG_OK;
}

static acg_status one_rank_min(void *user, int32_t *values, size_t n) {
    (void)user;
    (void)values;
    (void)n;
    return ACG_OK;
}

static acg_status one_rank_broadcast(void *user, void *data, size_t bytes, int32_t root) {
    (void)user;
    (void)data;
    (void)bytes;
    (void)root;
    return ACG_OK;
}

const acg_comm *tc_one_rank_comm(void) {
    static const acg_comm comm = {.size = sizeof(acg_comm),
                                  .barrier = tc_one_rank_barrier,
                                  .allreduce_min_i32 = one_rank_min,
                                  .rank = 0,
                                  .n_ranks = 1,
                                  .broadcast = one_rank_broadcast};
    return &comm;
}

acg_device *tc_open(void) {
    acg_device *dev = NULL;
    TC_OK(acg_device_open(dut_spec, &dev));
    assert_non_null(dev);
    return dev;
}

acg_device *tc_open_cpu(void) {
    acg_device *dev = NULL;
    TC_OK(acg_device_open("cpu", &dev));
    assert_non_null(dev);
    return dev;
}

void tc_close(acg_device *dev) { TC_OK(acg_device_close(dev)); }

acg_stream *tc_stream(acg_device *dev) {
    acg_stream *s = NULL;
    TC_OK(acg_stream_create(dev, &s));
    assert_non_null(s);
    return s;
}

acg_event *tc_event(acg_device *dev) {
    acg_event *e = NULL;
    TC_OK(acg_event_create(dev, &e));
    assert_non_null(e);
    return e;
}

acg_buffer *tc_buffer(acg_device *dev, size_t size) {
    acg_buffer *b = NULL;
    TC_OK(acg_buffer_alloc(dev, size, &b));
    assert_non_null(b);
    return b;
}

void *tc_pinned(acg_device *dev, size_t size) {
    void *p = NULL;
    TC_OK(acg_pinned_alloc(dev, size, &p));
    assert_non_null(p);
    return p;
}

acg_graph_pool *tc_pool(acg_device *dev) {
    acg_graph_pool *p = NULL;
    TC_OK(acg_graph_pool_create(dev, &p));
    assert_non_null(p);
    return p;
}

void tc_kernels_get(acg_device *dev, tc_kernels *out) {
    TC_OK(acg_kernel_get(dev, "fill_f32", &out->fill));
    TC_OK(acg_kernel_get(dev, "add_scalar_f32", &out->add));
    TC_OK(acg_kernel_get(dev, "axpy_f32", &out->axpy));
    TC_OK(acg_kernel_get(dev, "copy_f32", &out->copy));
}

acg_status tc_fill(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t off, uint32_t n,
                   float value) {
    acg_dims d = acg_dims_1d(n);
    acg_arg a[2] = {acg_arg_buffer(y, off), acg_arg_f32(value)};
    return acg_kernel_launch(s, k->fill, &d, a, 2);
}

acg_status tc_add(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t yoff,
                  const acg_buffer *x, size_t xoff, uint32_t n, float a) {
    acg_dims d = acg_dims_1d(n);
    acg_arg args[3] = {acg_arg_buffer(y, yoff), acg_arg_buffer(x, xoff), acg_arg_f32(a)};
    return acg_kernel_launch(s, k->add, &d, args, 3);
}

acg_status tc_axpy(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t yoff,
                   const acg_buffer *x, size_t xoff, uint32_t n, float a) {
    acg_dims d = acg_dims_1d(n);
    acg_arg args[3] = {acg_arg_buffer(y, yoff), acg_arg_buffer(x, xoff), acg_arg_f32(a)};
    return acg_kernel_launch(s, k->axpy, &d, args, 3);
}

acg_status tc_copy(acg_stream *s, const tc_kernels *k, acg_buffer *dst, size_t doff,
                   const acg_buffer *src, size_t soff, uint32_t n) {
    acg_dims d = acg_dims_1d(n);
    acg_arg args[2] = {acg_arg_buffer(dst, doff), acg_arg_buffer(src, soff)};
    return acg_kernel_launch(s, k->copy, &d, args, 2);
}

void tc_upload(acg_stream *s, acg_buffer *dst, const void *src, size_t size) {
    TC_OK(acg_copy_h2d(s, dst, 0, src, size));
    TC_OK(acg_stream_synchronize(s));
}

void tc_download(acg_stream *s, void *dst, const acg_buffer *src, size_t size) {
    TC_OK(acg_copy_d2h(s, dst, src, 0, size));
    TC_OK(acg_stream_synchronize(s));
}

void tc_expect_device_works(const char *spec) {
    enum { FLOATS = 1024 };
    acg_device *dev = NULL;
    TC_OK(acg_device_open(spec, &dev));
    TC_OK(acg_device_get_async_error(dev));
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_stream *s = tc_stream(dev);
    acg_buffer *y = tc_buffer(dev, FLOATS * sizeof(float));
    TC_OK(tc_fill(s, &k, y, 0, FLOATS, 6.0f));
    float got[FLOATS], want[FLOATS];
    tc_download(s, got, y, sizeof got);
    tc_splat(want, FLOATS, 6.0f);
    TC_BYTES_EQUAL(want, got, sizeof got);
    TC_OK(acg_device_get_async_error(dev));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_device_close(dev));
}

void tc_poison(acg_stream *s, acg_buffer *buf) {
    size_t size = acg_buffer_get_size(buf) / 4 * 4;
    assert_true(size > 0);
    TC_OK(acg_fill(s, buf, 0, size, 0xdeadbeefu, 4));
    TC_OK(acg_stream_synchronize(s));
}

/* ---- the fixture most device tests start from --------------------------------------------- */

void *tc_fixture_new(size_t size) { return tc_fixture_new_on(size, dut_spec); }

void *tc_fixture_new_on(size_t size, const char *spec) {
    assert_true(size >= sizeof(tc_fixture));
    tc_fixture *t = calloc(1, size);
    assert_non_null(t);
    TC_OK(acg_device_open(spec, &t->dev));
    assert_non_null(t->dev);
    t->s = tc_stream(t->dev);
    tc_kernels_get(t->dev, &t->k);
    return t;
}

int tc_fixture_setup(void **state) {
    *state = tc_fixture_new(sizeof(tc_fixture));
    return 0;
}

void tc_fixture_free(tc_fixture *t) {
    TC_OK(acg_stream_destroy(t->s));
    tc_close(t->dev);
    free(t);
}

int tc_fixture_teardown(void **state) {
    tc_fixture_free(*state);
    return 0;
}

/* ---- device tests: a second stream and two buffers, and a buffer's floats checked ---------- */

void *tc_fixture2_new(size_t size, size_t bytes) {
    assert_true(size >= sizeof(tc_fixture2));
    tc_fixture2 *f = tc_fixture_new(size);
    f->b = tc_stream(f->t.dev);
    f->x = tc_buffer(f->t.dev, bytes);
    f->y = tc_buffer(f->t.dev, bytes);
    return f;
}

int tc_fixture2_setup(void **state) {
    *state = tc_fixture2_new(sizeof(tc_fixture2), (size_t)(uintptr_t)*state);
    return 0;
}

void tc_fixture2_free(tc_fixture2 *f) {
    TC_OK(acg_buffer_free(f->y));
    TC_OK(acg_buffer_free(f->x));
    TC_OK(acg_stream_destroy(f->b));
    tc_fixture_free(&f->t);
}

int tc_fixture2_teardown(void **state) {
    tc_fixture2_free(*state);
    return 0;
}

void tc_expect_floats_(acg_stream *s, const acg_buffer *buf, size_t n, float v, const char *file,
                       int line) {
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    assert_non_null(got);
    assert_non_null(want);
    tc_download(s, got, buf, n * sizeof *got);
    tc_splat(want, n, v);
    tc_bytes_equal_(want, got, n * sizeof *got, file, line);
    free(got);
    free(want);
}

void tc_run_threads(size_t n, void *(*fn)(void *), void *args, size_t size) {
    pthread_t *t = malloc(n * sizeof *t);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, fn, (char *)args + i * size), 0);
    }
    for (size_t i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
    }
    free(t);
}
