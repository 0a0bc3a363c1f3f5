/* test_kv.c — the paged KV cache: page allocation per request, the sink page, exhaustion,
 * unknown ids, argument checks and allocation failures. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

enum { LAYERS = 2, PAGES = 9, PAGE_SIZE = 4, KV_DIM = 3 };
#define PAGE_BYTES ((size_t)PAGE_SIZE * KV_DIM * 4)
#define KV_BYTES ((size_t)LAYERS * PAGES * PAGE_BYTES)

/* The device under test, a stream, the built-in kernels (common.h) and a cache of
 * small_config's. */
typedef struct fx {
    tc_fixture t;
    acg_kv_cache *kv;
} fx;

static acg_kv_config small_config(void) {
    acg_kv_config c = ACG_KV_CONFIG_INIT;
    c.n_layers = LAYERS;
    c.n_pages = PAGES;
    c.page_size = PAGE_SIZE;
    c.kv_dim = KV_DIM;
    return c;
}

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    const acg_kv_config c = small_config();
    TC_OK(acg_kv_cache_create(f->t.dev, &c, &f->kv));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_kv_cache_destroy(f->kv));
    return tc_fixture_teardown(state);
}

static uint32_t free_pages(const acg_kv_cache *kv) {
    uint32_t n = UINT32_MAX;
    TC_OK(acg_kv_cache_get_free_pages(kv, &n));
    return n;
}

/* Asserts that request id holds exactly the pages want[0..n). */
static void expect_pages(const acg_kv_cache *kv, uint64_t id, const uint32_t *want, uint32_t n) {
    const uint32_t *pages = NULL;
    uint32_t got = 0;
    TC_OK(acg_kv_request_get_pages(kv, id, &pages, &got));
    assert_int_equal(got, n);
    TC_BYTES_EQUAL(pages, want, n * sizeof *want);
}

/* Buffers have the configured shape; a new cache has every page but the sink free. */
static void test_create(void **state) {
    fx *f = *state;
    acg_buffer *k = NULL, *v = NULL;
    TC_OK(acg_kv_cache_get_buffers(f->kv, &k, &v));
    assert_non_null(k);
    assert_non_null(v);
    assert_ptr_not_equal(k, v);
    assert_int_equal(acg_buffer_get_size(k), KV_BYTES);
    assert_int_equal(acg_buffer_get_size(v), KV_BYTES);
    assert_int_equal(free_pages(f->kv), PAGES - 1);
    acg_buffer *only = NULL;
    TC_OK(acg_kv_cache_get_buffers(f->kv, NULL, &only));
    assert_ptr_equal(only, v);
}

/* Reserve admits, extends keeping the pages, never shrinks; release returns the pages, which the
 * next request gets in the same order. */
static void test_reserve_extend_release(void **state) {
    fx *f = *state;
    TC_OK(acg_kv_request_reserve(f->kv, 7, 5)); /* 2 pages */
    expect_pages(f->kv, 7, (const uint32_t[]){1, 2}, 2);
    assert_int_equal(free_pages(f->kv), 6);

    const uint32_t *before = NULL;
    uint32_t n = 0;
    TC_OK(acg_kv_request_get_pages(f->kv, 7, &before, &n));
    TC_OK(acg_kv_request_reserve(f->kv, 7, 8)); /* still 2 pages */
    TC_OK(acg_kv_request_reserve(f->kv, 7, 3)); /* never shrinks */
    expect_pages(f->kv, 7, (const uint32_t[]){1, 2}, 2);
    assert_int_equal(free_pages(f->kv), 6);

    TC_OK(acg_kv_request_reserve(f->kv, 8, 4)); /* 1 page */
    expect_pages(f->kv, 8, (const uint32_t[]){3}, 1);
    TC_OK(acg_kv_request_reserve(f->kv, 7, 9)); /* grows to 3, keeping 1 and 2 */
    expect_pages(f->kv, 7, (const uint32_t[]){1, 2, 4}, 3);
    assert_int_equal(free_pages(f->kv), 4);

    TC_OK(acg_kv_request_release(f->kv, 7));
    assert_int_equal(free_pages(f->kv), 7);
    TC_EXPECT(ERR_NOT_FOUND, acg_kv_request_get_pages(f->kv, 7, &before, &n));
    expect_pages(f->kv, 8, (const uint32_t[]){3}, 1); /* untouched */
    TC_OK(acg_kv_request_reserve(f->kv, 9, 12));
    expect_pages(f->kv, 9, (const uint32_t[]){1, 2, 4}, 3);
    TC_OK(acg_kv_request_release(f->kv, 8));
    TC_OK(acg_kv_request_release(f->kv, 9));
    assert_int_equal(free_pages(f->kv), PAGES - 1);
    /* A large id is just an id. */
    TC_OK(acg_kv_request_reserve(f->kv, UINT64_MAX, 1));
    expect_pages(f->kv, UINT64_MAX, (const uint32_t[]){1}, 1);
    TC_OK(acg_kv_request_release(f->kv, UINT64_MAX));
}

/* Every page but the sink can be handed out, each once. */
static void test_sink_never_handed_out(void **state) {
    fx *f = *state;
    bool seen[PAGES] = {false};
    for (uint64_t id = 0; id < PAGES - 1; id++) {
        TC_OK(acg_kv_request_reserve(f->kv, id, PAGE_SIZE));
        const uint32_t *p = NULL;
        uint32_t n = 0;
        TC_OK(acg_kv_request_get_pages(f->kv, id, &p, &n));
        assert_int_equal(n, 1);
        assert_int_not_equal(p[0], ACG_KV_SINK_PAGE);
        assert_true(p[0] < PAGES);
        assert_false(seen[p[0]]);
        seen[p[0]] = true;
    }
    assert_int_equal(free_pages(f->kv), 0);
    TC_EXPECT(ERR_EXHAUSTED, acg_kv_request_reserve(f->kv, 100, 1));
    for (uint64_t id = 0; id < PAGES - 1; id++) {
        TC_OK(acg_kv_request_release(f->kv, id));
    }
    assert_int_equal(free_pages(f->kv), PAGES - 1);
}

/* An allocator that fills what it hands out with 0xab, so memory nobody wrote is recognizable
 * (on backends whose device memory comes from the hook). */
static void *poison_alloc(void *user, void *ptr, size_t size, size_t align) {
    void *p = tc_alloc_fn(user, ptr, size, align);
    if (p != NULL) {
        memset(p, 0xab, size);
    }
    return p;
}

/* The sink page of every layer, K and V, is zero after creation. */
static void test_sink_zeroed(void **state) {
    tc_alloc_install();
    TC_OK(acg_set_allocator(poison_alloc, NULL));
    setup(state); /* the fixture, from the poisoning allocator */
    fx *f = *state;
    acg_buffer *bufs[2];
    TC_OK(acg_kv_cache_get_buffers(f->kv, &bufs[0], &bufs[1]));
    unsigned char *host = malloc(KV_BYTES), zeros[PAGE_BYTES];
    memset(zeros, 0, sizeof zeros);
    for (int b = 0; b < 2; b++) {
        tc_download(f->t.s, host, bufs[b], KV_BYTES);
        for (size_t l = 0; l < LAYERS; l++) {
            const unsigned char *layer = host + l * PAGES * PAGE_BYTES;
            TC_BYTES_EQUAL(layer + ACG_KV_SINK_PAGE * PAGE_BYTES, zeros, PAGE_BYTES);
            /* On the cpu backend the other pages show the allocator's poison: the zeros above
             * were written by the cache, not found. */
            if (tc_backend_is("cpu")) {
                assert_int_equal(layer[PAGE_BYTES], 0xab);
            }
        }
    }
    free(host);
    teardown(state);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* Running out of pages is ACG_ERR_EXHAUSTED and changes nothing, for new and known ids. */
static void test_exhaustion_changes_nothing(void **state) {
    fx *f = *state;
    TC_OK(acg_kv_request_reserve(f->kv, 1, 3 * PAGE_SIZE));
    TC_OK(acg_kv_request_reserve(f->kv, 2, 3 * PAGE_SIZE));
    assert_int_equal(free_pages(f->kv), 2);
    const uint32_t *p1 = NULL;
    uint32_t n1 = 0;
    TC_OK(acg_kv_request_get_pages(f->kv, 1, &p1, &n1));

    TC_EXPECT(ERR_EXHAUSTED, acg_kv_request_reserve(f->kv, 3, 3 * PAGE_SIZE)); /* new id */
    TC_LAST_ERROR_HAS("acg_kv_request_reserve");
    const uint32_t *p = NULL;
    uint32_t n = 0;
    TC_EXPECT(ERR_NOT_FOUND, acg_kv_request_get_pages(f->kv, 3, &p, &n));
    TC_EXPECT(ERR_EXHAUSTED, acg_kv_request_reserve(f->kv, 1, 6 * PAGE_SIZE)); /* grow by 3 */
    TC_EXPECT(ERR_EXHAUSTED, acg_kv_request_reserve(f->kv, 1, UINT32_MAX));
    assert_int_equal(free_pages(f->kv), 2);
    TC_OK(acg_kv_request_get_pages(f->kv, 1, &p, &n));
    assert_ptr_equal(p, p1);
    assert_int_equal(n, 3);
    expect_pages(f->kv, 1, (const uint32_t[]){1, 2, 3}, 3);
    expect_pages(f->kv, 2, (const uint32_t[]){4, 5, 6}, 3);

    /* What fits still goes in. */
    TC_OK(acg_kv_request_reserve(f->kv, 3, 2 * PAGE_SIZE));
    assert_int_equal(free_pages(f->kv), 0);
    expect_pages(f->kv, 3, (const uint32_t[]){7, 8}, 2);
}

/* Unknown ids and bad arguments get their statuses. */
static void test_bad_arguments(void **state) {
    fx *f = *state;
    const uint32_t *p = NULL;
    uint32_t n = 0;
    TC_EXPECT(ERR_NOT_FOUND, acg_kv_request_release(f->kv, 42));
    TC_LAST_ERROR_HAS("42");
    TC_EXPECT(ERR_NOT_FOUND, acg_kv_request_get_pages(f->kv, 42, &p, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_request_reserve(f->kv, 1, 0));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_request_reserve(NULL, 1, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_request_release(NULL, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_request_get_pages(NULL, 1, &p, &n));
    TC_OK(acg_kv_request_reserve(f->kv, 1, 1));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_request_get_pages(f->kv, 1, NULL, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_request_get_pages(f->kv, 1, &p, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_cache_get_free_pages(NULL, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_get_free_pages(f->kv, NULL));
    acg_buffer *k = NULL;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_cache_get_buffers(NULL, &k, &k));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_get_buffers(f->kv, NULL, NULL));
    uint64_t fake[32] = {0};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_cache_destroy((acg_kv_cache *)(void *)fake));
    TC_OK(acg_kv_cache_destroy(NULL));

    acg_kv_cache *const untouched = (acg_kv_cache *)(uintptr_t)0x42;
    acg_kv_cache *kv = untouched;
    acg_kv_config c = small_config();
    TC_EXPECT(ERR_INVALID_HANDLE, acg_kv_cache_create(NULL, &c, &kv));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_create(f->t.dev, NULL, &kv));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_create(f->t.dev, &c, NULL));
    const struct {
        uint32_t *field;
        uint32_t value;
    } bad[] = {{&c.n_layers, 0},        {&c.n_pages, 0},          {&c.n_pages, 1},
               {&c.page_size, 0},       {&c.kv_dim, 0},           {&c.elem_bytes, 0},
               {&c.kv_dim, UINT32_MAX}, {&c.n_pages, 0x80000001u}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = small_config();
        *bad[i].field = bad[i].value;
        if (bad[i].value == UINT32_MAX) {
            c.page_size = UINT32_MAX;
            c.elem_bytes = UINT32_MAX;
        }
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_create(f->t.dev, &c, &kv));
        TC_LAST_ERROR_HAS("acg_kv_cache_create");
    }
    /* A newer caller's config that sets a field this library does not have. */
    struct {
        acg_kv_config c;
        uint64_t newer;
    } longer = {small_config(), 1};
    longer.c.size = sizeof longer;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_create(f->t.dev, &longer.c, &kv));
    assert_ptr_equal(kv, untouched);
}

/* Destroy is refused while a live graph uses K, and works once the graph is gone. */
static void test_destroy_in_use(void **state) {
    fx *f = *state;
    if (!tc_has_graphs(f->t.dev, f->t.s)) {
        tc_skip("no graphs");
    }
    acg_kv_cache *kv = NULL;
    acg_kv_config c = small_config();
    TC_OK(acg_kv_cache_create(f->t.dev, &c, &kv));
    acg_buffer *k = NULL;
    TC_OK(acg_kv_cache_get_buffers(kv, &k, NULL));
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_fill(f->t.s, k, PAGE_BYTES, PAGE_BYTES, 0, 4));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    TC_EXPECT(ERR_IN_USE, acg_kv_cache_destroy(kv));
    TC_LAST_ERROR_HAS("acg_kv_cache_destroy");
    TC_OK(acg_kv_request_reserve(kv, 1, 1)); /* still usable */
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_kv_cache_destroy(kv));
}

/* ---- allocation failures ------------------------------------------------------------------- */

/* Opens a device, creates a cache, admits, grows and releases requests, destroys it all.
 * Returns the first failing status. */
static acg_status scenario(void *ctx) {
    (void)ctx;
    acg_device *dev = NULL;
    acg_kv_cache *kv = NULL;
    acg_status st = acg_device_open(tc_spec(), &dev);
    if (st != ACG_OK) {
        return st;
    }
    acg_kv_config c = small_config();
    if ((st = acg_kv_cache_create(dev, &c, &kv)) != ACG_OK) {
        goto out_close;
    }
    for (uint64_t id = 0; id < 12 && st == ACG_OK; id++) {
        st = acg_kv_request_reserve(kv, id, 1);
    }
    /* 8 pages for 12 ids: the 9th is refused without harm. */
    if (st != ACG_ERR_EXHAUSTED) {
        st = st == ACG_OK ? ACG_ERR_INTERNAL : st;
        goto out_destroy;
    }
    st = ACG_OK;
    uint32_t n_free = 1;
    if ((st = acg_kv_request_release(kv, 3)) != ACG_OK ||
        (st = acg_kv_request_release(kv, 5)) != ACG_OK ||
        (st = acg_kv_request_reserve(kv, 0, 3 * PAGE_SIZE)) != ACG_OK ||
        (st = acg_kv_cache_get_free_pages(kv, &n_free)) != ACG_OK) {
        goto out_destroy;
    }
    if (n_free != 0) {
        st = ACG_ERR_INTERNAL;
    }
out_destroy:;
    acg_status dst = acg_kv_cache_destroy(kv);
    st = st != ACG_OK ? st : dst;
out_close:;
    acg_status cst = acg_device_close(dev);
    return st != ACG_OK ? st : cst;
}

/* Fails allocation 1, 2, 3, ... of the scenario: every run ends in ACG_ERR_OUT_OF_MEMORY (or
 * passes when the fault is past its last allocation) and leaks nothing. */
static void test_alloc_fail(void **state) {
    (void)state;
    tc_alloc_sweep_case("kv", scenario, NULL, false, 5);
}

/* An older caller's config stops before elem_bytes, which takes its default (4 bytes) whatever
 * the caller's memory holds past its size. One that stops before kv_dim, which has no default,
 * is refused, naming the struct and the sizes. */
static void test_config_versions(void **state) {
    fx *f = *state;
    acg_kv_config old = small_config();
    old.size = offsetof(acg_kv_config, elem_bytes);
    old.elem_bytes = 8; /* past the caller's size: never read */
    acg_kv_cache *kv = NULL;
    TC_OK(acg_kv_cache_create(f->t.dev, &old, &kv));
    acg_buffer *k = NULL;
    TC_OK(acg_kv_cache_get_buffers(kv, &k, NULL));
    assert_int_equal(acg_buffer_get_size(k), KV_BYTES);
    TC_OK(acg_kv_cache_destroy(kv));

    acg_kv_cache *const untouched = (acg_kv_cache *)(uintptr_t)0x31;
    kv = untouched;
    old.size = offsetof(acg_kv_config, kv_dim);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kv_cache_create(f->t.dev, &old, &kv));
    TC_LAST_ERROR_HAS("acg_kv_cache_create: acg_kv_config.size is 20");
    TC_LAST_ERROR_HAS("at least 24");
    assert_ptr_equal(kv, untouched);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_create),
    T(test_reserve_extend_release),
    T(test_sink_never_handed_out),
    cmocka_unit_test(test_sink_zeroed),
    T(test_exhaustion_changes_nothing),
    T(test_bad_arguments),
    T(test_destroy_in_use),
    cmocka_unit_test(test_alloc_fail),
    T(test_config_versions),
};
#undef T
TC_MAIN("test_kv", tests)
