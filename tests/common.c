/* common.c — helpers shared by the acg test executables (see common.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "common.h"
#include "core/acg-impl.h" /* acg__device_inject_fault */

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- status assertions -------------------------------------------------------------------- */

void tc_expect_(acg_status want, acg_status got, const char *expr, const char *file, int line) {
    if (want != got) {
        print_error("%s\n  returned %s (%d), expected %s (%d)\n  acg_last_error: \"%s\"\n", expr,
                    acg_status_name(got), (int)got, acg_status_name(want), (int)want,
                    acg_last_error());
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

static void expect_capture_state(acg_stream *s, acg_capture_state want) {
    acg_capture_state cs = (acg_capture_state)99;
    TC_OK(acg_stream_get_capture_state(s, &cs));
    assert_int_equal(cs, want);
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
    expect_capture_state(s, ACG_CAPTURE_NONE);
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
    expect_capture_state(a, ACG_CAPTURE_INVALIDATED);
    acg_graph *const sentinel = (acg_graph *)(uintptr_t)0x70;
    acg_graph *g = sentinel;
    TC_EXPECT(ERR_UNSUPPORTED, acg_stream_end_capture(a, &g));
    assert_ptr_equal(g, sentinel);
    expect_capture_state(a, ACG_CAPTURE_NONE);
    expect_capture_state(b, ACG_CAPTURE_NONE);
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

/* ---- deterministic data ------------------------------------------------------------------- */

void tc_fill_floats(float *dst, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        int k = (int)((x >> 16) % 2047u) - 1023;
        dst[i] = (float)k / 8.0f;
    }
}

void tc_splat(float *dst, size_t n, float v) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = v;
    }
}

/* ---- counting and failing allocator ------------------------------------------------------- */

static atomic_int_fast64_t alloc_live;
static atomic_uint_fast64_t alloc_count;
static atomic_uint_fast64_t alloc_bad;
static atomic_uint_fast64_t alloc_fail_n; /* fail when alloc_since reaches it; 0: never */
static atomic_uint_fast64_t alloc_since;
static atomic_bool alloc_hit;

void *tc_alloc_fn(void *user, void *ptr, size_t size, size_t align) {
    (void)user;
    if (ptr == NULL && size != 0) {
        atomic_fetch_add(&alloc_count, 1);
        uint64_t nth = atomic_fetch_add(&alloc_since, 1) + 1;
        uint64_t fail = atomic_load(&alloc_fail_n);
        if (fail != 0 && nth == fail) {
            atomic_store(&alloc_hit, true);
            return NULL;
        }
        if (align < sizeof(void *)) {
            align = sizeof(void *);
        }
        if ((align & (align - 1)) != 0) {
            atomic_fetch_add(&alloc_bad, 1);
            return NULL;
        }
        void *p = NULL;
        if (posix_memalign(&p, align, size) != 0) {
            return NULL;
        }
        atomic_fetch_add(&alloc_live, 1);
        return p;
    }
    if (ptr != NULL && size == 0) {
        atomic_fetch_sub(&alloc_live, 1);
        free(ptr);
        return NULL;
    }
    atomic_fetch_add(&alloc_bad, 1);
    return NULL;
}

void tc_alloc_install(void) {
    TC_OK(acg_set_allocator(tc_alloc_fn, NULL));
    atomic_store(&alloc_live, 0);
    atomic_store(&alloc_count, 0);
    atomic_store(&alloc_bad, 0);
    atomic_store(&alloc_fail_n, 0);
    atomic_store(&alloc_since, 0);
    atomic_store(&alloc_hit, false);
}

void tc_alloc_uninstall(void) { TC_OK(acg_set_allocator(NULL, NULL)); }

void tc_alloc_fail_at(uint64_t n) {
    atomic_store(&alloc_fail_n, 0);
    atomic_store(&alloc_since, 0);
    atomic_store(&alloc_hit, false);
    atomic_store(&alloc_fail_n, n);
}

bool tc_alloc_fail_hit(void) { return atomic_load(&alloc_hit); }
int64_t tc_alloc_live(void) { return (int64_t)atomic_load(&alloc_live); }
uint64_t tc_alloc_count(void) { return (uint64_t)atomic_load(&alloc_count); }
uint64_t tc_alloc_bad_calls(void) { return (uint64_t)atomic_load(&alloc_bad); }

/* ---- log capture -------------------------------------------------------------------------- */

#define TC_LOG_MAX 256

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    acg_log_level level;
    char text[512];
} log_msgs[TC_LOG_MAX];
static size_t log_n;
static acg_log_level log_saved_level;

static void log_capture_fn(acg_log_level level, const char *message, void *user) {
    (void)user;
    pthread_mutex_lock(&log_lock);
    if (log_n < TC_LOG_MAX) {
        log_msgs[log_n].level = level;
        snprintf(log_msgs[log_n].text, sizeof log_msgs[log_n].text, "%s",
                 message ? message : "(null)");
        log_n++;
    }
    pthread_mutex_unlock(&log_lock);
}

void tc_log_capture_begin(acg_log_level level) {
    pthread_mutex_lock(&log_lock);
    log_n = 0;
    pthread_mutex_unlock(&log_lock);
    log_saved_level = acg_get_log_level();
    acg_set_log_callback(log_capture_fn, NULL);
    acg_set_log_level(level);
}

void tc_log_capture_end(void) {
    acg_set_log_callback(NULL, NULL);
    acg_set_log_level(log_saved_level);
}

size_t tc_log_count(acg_log_level level) {
    size_t c = 0;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n; i++) {
        c += log_msgs[i].level == level;
    }
    pthread_mutex_unlock(&log_lock);
    return c;
}

bool tc_log_find(const char *needle, acg_log_level *level_out) {
    bool found = false;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n && !found; i++) {
        if (strstr(log_msgs[i].text, needle) != NULL) {
            found = true;
            if (level_out != NULL) {
                *level_out = log_msgs[i].level;
            }
        }
    }
    pthread_mutex_unlock(&log_lock);
    return found;
}

bool tc_log_any_trailing_newline(void) {
    bool any = false;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n; i++) {
        size_t len = strlen(log_msgs[i].text);
        any = any || (len > 0 && log_msgs[i].text[len - 1] == '\n');
    }
    pthread_mutex_unlock(&log_lock);
    return any;
}

/* ---- eager and captured runs of the same work --------------------------------------------- */

acg_status tc_run_eager(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b,
                        const acg_buffer *out, size_t size, void *bytes) {
    acg_status st = fn(ctx, a, b);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = acg_stream_synchronize(a)) != ACG_OK) {
        return st;
    }
    if (b != NULL && (st = acg_stream_synchronize(b)) != ACG_OK) {
        return st;
    }
    if (out != NULL) {
        st = acg_copy_d2h(a, bytes, out, 0, size);
    }
    return st;
}

acg_status tc_capture(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b, acg_graph_pool *pool,
                      acg_graph **graph) {
    acg_status st = acg_stream_begin_capture(a, pool);
    if (st != ACG_OK) {
        return st;
    }
    st = fn(ctx, a, b);
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(a, &g);
    if (st != ACG_OK) {
        if (end == ACG_OK) {
            acg_graph_destroy(g);
        }
        return st;
    }
    if (end == ACG_OK) {
        *graph = g;
    }
    return end;
}

acg_status tc_replay(acg_graph *graph, acg_stream *s, const acg_buffer *out, size_t size,
                     void *bytes) {
    acg_status st = acg_graph_launch(graph, s);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = acg_stream_synchronize(s)) != ACG_OK) {
        return st;
    }
    if (out != NULL) {
        st = acg_copy_d2h(s, bytes, out, 0, size);
    }
    return st;
}

uint64_t tc_alloc_sweep(acg_status (*run)(void *ctx), void *ctx, bool may_recover) {
    int64_t base = tc_alloc_live();
    uint64_t n;
    for (n = 1; n < 1000000; n++) {
        tc_alloc_fail_at(n);
        acg_status st = run(ctx);
        bool hit = tc_alloc_fail_hit();
        tc_alloc_fail_at(0);
        if (tc_alloc_live() != base) {
            print_error("allocation %llu failing: %lld allocations leaked (%s: %s)\n",
                        (unsigned long long)n, (long long)(tc_alloc_live() - base),
                        acg_status_name(st), acg_last_error());
            fail();
        }
        if (!hit) {
            TC_OK(st);
            break;
        }
        if (st != ACG_ERR_OUT_OF_MEMORY && !(may_recover && st == ACG_OK)) {
            print_error("allocation %llu failing: the run returned %s: %s\n", (unsigned long long)n,
                        acg_status_name(st), acg_last_error());
            fail();
        }
    }
    return n - 1;
}

uint64_t tc_alloc_sweep_case(const char *what, acg_status (*run)(void *ctx), void *ctx,
                             bool may_recover, uint64_t more_than) {
    tc_alloc_install();
    TC_OK(run(ctx));
    assert_int_equal(tc_alloc_live(), 0);
    uint64_t points = tc_alloc_sweep(run, ctx, may_recover);
    print_message("%s allocation-failure sweep: %llu allocation points\n", what,
                  (unsigned long long)points);
    assert_true(points > more_than);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return points;
}

static char tmp_dir[256];

int tc_tmpdir_create(const char *prefix) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/%s-XXXXXX", base ? base : "/tmp", prefix);
    return mkdtemp(tmp_dir) != NULL ? 0 : -1;
}

const char *tc_tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return path;
}

const char *tc_tmpdir(void) { return tmp_dir; }

/* One entry of the tree being removed, children before their folder (FTW_DEPTH). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the folder and all it holds, following no symbolic link (FTW_PHYS): a link is removed
 * as itself. A folder that is not there is removed already. */
int tc_tmpdir_remove(void) {
    if (tmp_dir[0] == '\0') {
        return 0;
    }
    if (nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) {
        return 0;
    }
    return errno == ENOENT ? 0 : -1;
}

int tc_host_files_setup(const char *prefix) {
    if (tc_tmpdir_create(prefix) != 0) {
        return -1;
    }
    tc_alloc_install();
    return 0;
}

int tc_host_files_teardown(void) {
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return tc_tmpdir_remove();
}

static const char *hang_what;
static unsigned hang_seconds;

static void on_hang(int sig) {
    (void)sig;
    char msg[160];
    int len = snprintf(msg, sizeof msg, "%s blocked for %u s\n", hang_what, hang_seconds);
    ssize_t r = write(STDERR_FILENO, msg, len > 0 ? (size_t)len : 0);
    (void)r;
    _exit(1);
}

void tc_hang_guard(unsigned seconds, const char *what) {
    if (seconds == 0) {
        alarm(0);
        signal(SIGALRM, SIG_DFL);
        return;
    }
    hang_what = what;
    hang_seconds = seconds;
    signal(SIGALRM, on_hang);
    alarm(seconds);
}

/* ---- the backends' own tests (tests/cuda, tests/level_zero, tests/opencl) ------------------ */

void tc_expect_node_kinds(const acg_graph *g, const acg_node_kind *kinds, size_t n) {
    tc_expect_node_count(g, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tc_node(g, i).kind, kinds[i]);
    }
}

acg_comm tc_comm(void *user, int32_t rank, int32_t n_ranks, acg_status (*barrier)(void *user),
                 acg_status (*allreduce_min_i32)(void *user, int32_t *values, size_t n),
                 acg_status (*broadcast)(void *user, void *data, size_t bytes, int32_t root)) {
    return (acg_comm){.size = sizeof(acg_comm),
                      .user = user,
                      .barrier = barrier,
                      .allreduce_min_i32 = allreduce_min_i32,
                      .rank = rank,
                      .n_ranks = n_ranks,
                      .broadcast = broadcast};
}

/* ---- the graph suites: buffers freed ------------------------------------------------------ */

void tc_free_buffers_(acg_buffer *const *bufs, size_t n, const char *file, int line) {
    for (size_t i = 0; i < n; i++) {
        tc_expect_(ACG_OK, acg_buffer_free(bufs[i]), "acg_buffer_free", file, line);
    }
}

/* ---- runners, captures and user kernels (the engine, graph and registration suites) ------- */

acg_recipe tc_recipe(const char *name, void *user,
                     size_t (*bytes)(void *user, uint32_t i, const acg_bucket_key *bucket),
                     acg_status (*forward)(void *user, acg_stream *s, const acg_step_io *io)) {
    acg_recipe r = ACG_RECIPE_INIT;
    r.name = name;
    r.user = user;
    r.n_inputs = 1;
    r.n_outputs = 1;
    r.input_bytes = bytes;
    r.output_bytes = bytes;
    r.forward = forward;
    return r;
}

acg_runner_config tc_runner_config(const acg_recipe *recipe, const acg_bucket_key *b, uint32_t n,
                                   acg_stream *s, acg_graph_mode g) {
    acg_runner_config c = ACG_RUNNER_CONFIG_INIT;
    c.recipe = recipe;
    c.buckets = b;
    c.n_buckets = n;
    c.stream = s;
    c.graphs = g;
    return c;
}

acg_status tc_twice_x_plus_one(acg_stream *s, const tc_kernels *k, acg_buffer *y,
                               const acg_buffer *x, acg_buffer *tmp, uint32_t n) {
    acg_status st = tc_add(s, k, tmp, 0, x, 0, n, 1.0f); /* tmp = x + 1 */
    if (st == ACG_OK) {
        st = tc_copy(s, k, y, 0, tmp, 0, n); /* y = tmp */
    }
    return st == ACG_OK ? tc_axpy(s, k, y, 0, tmp, 0, n, 1.0f) : st; /* y = 2 tmp */
}

void tc_expect_node_count(const acg_graph *g, size_t n) {
    size_t nodes = 0;
    TC_OK(acg_graph_get_node_count(g, &nodes));
    assert_int_equal(nodes, n);
}

acg_node_info tc_node(const acg_graph *g, size_t i) {
    acg_node_info info;
    memset(&info, 0, sizeof info);
    TC_OK(acg_graph_get_node(g, i, &info));
    return info;
}

void tc_end_capture_expect_nodes(acg_stream *s, size_t n) {
    acg_capture_state cs = ACG_CAPTURE_NONE;
    TC_OK(acg_stream_get_capture_state(s, &cs));
    assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    tc_expect_node_count(g, n);
    TC_OK(acg_graph_destroy(g));
}

uint64_t tc_mul_sat(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

acg_kernel_desc tc_rows_kernel_desc(const char *name) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = name;
    d.n_args = 5;
    const acg_arg_type types[] = {ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_U32,
                                  ACG_ARG_U32};
    memcpy(d.types, types, sizeof types);
    d.bytes_per_item[0] = d.bytes_per_item[1] = d.bytes_per_item[2] = 4;
    return d;
}

void tc_rows_io_open(tc_rows_io *io, acg_device *dev, size_t out_bytes, const void *x,
                     size_t x_bytes, const void *w, size_t w_bytes) {
    io->s = tc_stream(dev);
    io->out = tc_buffer(dev, out_bytes);
    io->x = tc_buffer(dev, x_bytes);
    io->w = tc_buffer(dev, w_bytes);
    if (x != NULL) {
        tc_upload(io->s, io->x, x, x_bytes);
    }
    if (w != NULL) {
        tc_upload(io->s, io->w, w, w_bytes);
    }
    tc_poison(io->s, io->out);
}

void tc_rows_io_close(tc_rows_io *io) {
    TC_OK(acg_buffer_free(io->out));
    TC_OK(acg_buffer_free(io->x));
    TC_OK(acg_buffer_free(io->w));
    TC_OK(acg_stream_destroy(io->s));
}

/* ---- the model's suites: presets, logits, configurations, loaders, lost devices, ranks ------- */

void tc_never_called(const acg_cpu_arg *args, const uint32_t global[3]) {
    (void)args;
    (void)global;
    fail();
}

int tc_best_two(const float *v, int n, int *second) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        best = v[i] > v[best] ? i : best;
    }
    *second = best == 0 ? 1 : 0;
    for (int i = 0; i < n; i++) {
        if (i != best && v[i] > v[*second]) {
            *second = i;
        }
    }
    return best;
}

acg_model_weights *tc_model_preset(const char *name) {
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load(name, 7, &w));
    return w;
}

void tc_expect_model_config(const acg_model_config *got, const acg_model_config *want) {
    assert_int_equal(got->dim, want->dim);
    assert_int_equal(got->hidden_dim, want->hidden_dim);
    assert_int_equal(got->n_layers, want->n_layers);
    assert_int_equal(got->n_heads, want->n_heads);
    assert_int_equal(got->n_kv_heads, want->n_kv_heads);
    assert_int_equal(got->vocab_size, want->vocab_size);
    assert_int_equal(got->seq_len, want->seq_len);
    assert_int_equal(got->shared_classifier, want->shared_classifier);
}

void tc_expect_load_fails_(acg_status want, tc_loader load, const char *call, const void *arg,
                           const char *path, const char *file, int line, ...) {
    void *const sentinel = (void *)(uintptr_t)0x1234;
    void *out = sentinel;
    int64_t live = tc_alloc_live();
    tc_expect_(want, load(path, arg, &out), call, file, line);
    assert_ptr_equal(out, sentinel);
    va_list ap;
    va_start(ap, line);
    tc_last_error_names_file_(path, file, line, ap);
    va_end(ap);
    assert_int_equal(tc_alloc_live(), live);
}

void tc_expect_fifo_refused(tc_loader load, const char *call, const void *arg, const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s", tc_tmp_path(name));
    assert_int_equal(mkfifo(path, 0600), 0);
    tc_hang_guard(10, "loading a FIFO");
    tc_expect_load_fails_(ACG_ERR_INVALID_ARGUMENT, load, call, arg, path, __FILE__, __LINE__,
                          "not a regular file", NULL);
    tc_hang_guard(0, NULL);
}

/* tc_inject_fault_or_skip, closing dev before the skip where the caller opened it for this. */
static void inject_fault_or_skip(acg_device *dev, bool close_on_skip) {
    if (acg__device_inject_fault(dev) == ACG_ERR_UNSUPPORTED) {
        if (close_on_skip) {
            tc_close(dev);
        }
        tc_skip("no injected faults: the backends' own tests provoke their drivers' faults");
    }
}

void tc_inject_fault_or_skip(acg_device *dev) { inject_fault_or_skip(dev, false); }

acg_device *tc_open_lost(void) {
    acg_device *dev = tc_open();
    inject_fault_or_skip(dev, true);
    return dev;
}

bool tc_shm_segment_named(int pid) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "acg-%d-", pid);
    DIR *d = opendir("/dev/shm");
    bool found = false;
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL && !found; e = readdir(d)) {
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}
