/* test_plan.c — attention plans: the packed layout on the device, stable addresses, zero
 * allocations while re-planning, packed prefill, exhaustion, argument checks, pre-plans,
 * invalidating and noting what the device rewrote, and allocation failures. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

/* The device under test, a stream, the built-in kernels (common.h) and a stager of the
 * defaults' to build plans through. */
typedef struct fx {
    tc_fixture t;
    acg_stager *sg;
} fx;

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    TC_OK(acg_stager_create(f->t.dev, NULL, &f->sg));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_stager_destroy(f->sg));
    return tc_fixture_teardown(state);
}

static acg_attn_plan *make_plan(acg_device *dev, uint32_t batch, uint32_t max_seq_len,
                                uint32_t page_size, uint32_t max_q) {
    acg_attn_plan_config c = ACG_ATTN_PLAN_CONFIG_INIT;
    c.batch = batch;
    c.max_seq_len = max_seq_len;
    c.page_size = page_size;
    c.max_query_tokens = max_q;
    acg_attn_plan *p = NULL;
    TC_OK(acg_attn_plan_create(dev, &c, &p));
    assert_non_null(p);
    return p;
}

static acg_attn_plan_stats plan_stats(const acg_attn_plan *p) {
    acg_attn_plan_stats st = ACG_ATTN_PLAN_STATS_INIT;
    TC_OK(acg_attn_plan_get_stats(p, &st));
    return st;
}

static uint64_t stager_copies(const acg_stager *sg) {
    acg_stager_stats st = ACG_STAGER_STATS_INIT;
    TC_OK(acg_stager_get_stats(sg, &st));
    return st.copies;
}

/* Waits for the plan's event on s, then checks the whole buffer and each view against want
 * (table, then offsets, then lengths, as the header lays them out). */
static void expect_metadata(acg_stream *s, const acg_attn_plan *p, const int32_t *want,
                            size_t n_ints) {
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v));
    assert_int_equal(acg_buffer_get_size(v.metadata), n_ints * 4);
    TC_OK(acg_stream_wait_event(s, acg_attn_plan_get_event(p)));
    int32_t *got = malloc(n_ints * 4);
    tc_download(s, got, v.metadata, n_ints * 4);
    TC_BYTES_EQUAL(got, want, n_ints * 4);
    size_t table = acg_buffer_get_size(v.block_table), offs = acg_buffer_get_size(v.query_offsets);
    size_t lens = acg_buffer_get_size(v.kv_lens);
    assert_int_equal(table + offs + lens, n_ints * 4);
    tc_download(s, got, v.block_table, table);
    TC_BYTES_EQUAL(got, want, table);
    tc_download(s, got, v.query_offsets, offs);
    TC_BYTES_EQUAL(got, want + table / 4, offs);
    tc_download(s, got, v.kv_lens, lens);
    TC_BYTES_EQUAL(got, want + (table + offs) / 4, lens);
    free(got);
}

/* A mixed decode batch, written out by hand: pages then the sink page, offsets, lengths, and
 * a padding row. */
static void test_mixed_batch_layout(void **state) {
    fx *f = *state;
    acg_attn_plan *p = make_plan(f->t.dev, 4, 64, 16, 8); /* table_width 4 */
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v));
    assert_int_equal(v.table_width, 4);
    assert_int_equal(v.max_kv_len, 64);
    const acg_attn_row rows[3] = {
        {(const uint32_t[]){5, 2}, 2, 20, 1},
        {(const uint32_t[]){7, 8, 1, 3}, 4, 64, 1},
        {(const uint32_t[]){4}, 1, 1, 1},
    };
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, rows, 3));
    const int32_t want[25] = {
        5,  2,  0, 0, 7, 8, 1, 3, 4, 0, 0, 0, 0, 0, 0, 0, /* block_table (4, 4) */
        0,  1,  2, 3, 3,                                  /* query_offsets (5) */
        20, 64, 1, 0,                                     /* kv_lens (4) */
    };
    expect_metadata(f->t.s, p, want, 25);
    acg_attn_plan_stats st = plan_stats(p);
    assert_int_equal(st.builds, 1);
    assert_int_equal(st.uploads, 1);
    assert_int_equal(st.unchanged, 0);
    assert_int_equal(stager_copies(f->sg), 1);
    TC_OK(acg_attn_plan_destroy(p));
}

/* A new plan holds an empty plan; building zero rows changes nothing and uploads nothing. */
static void test_empty_plan(void **state) {
    fx *f = *state;
    acg_attn_plan *p = make_plan(f->t.dev, 3, 40, 16, 3); /* table_width 3 */
    int32_t zeros[3 * 3 + 4 + 3] = {0};
    expect_metadata(f->t.s, p, zeros, 16);
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, NULL, 0));
    assert_int_equal(plan_stats(p).unchanged, 1);
    assert_int_equal(stager_copies(f->sg), 0);
    TC_OK(acg_attn_plan_destroy(p));
}

/* After acg_attn_plan_invalidate (the device rewrote the buffer in place) the same build
 * uploads again, and puts the planned bytes back. */
static void test_invalidate(void **state) {
    fx *f = *state;
    acg_attn_plan *p = make_plan(f->t.dev, 3, 40, 16, 3);
    int32_t zeros[3 * 3 + 4 + 3] = {0};
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v));
    TC_OK(acg_fill(f->t.s, v.kv_lens, 0, 3 * sizeof(int32_t), 7, 4)); /* as a loop would */
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, NULL, 0));
    assert_int_equal(plan_stats(p).unchanged, 1); /* it cannot know */
    TC_OK(acg_attn_plan_invalidate(p));
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, NULL, 0));
    assert_int_equal(plan_stats(p).uploads, 1);
    expect_metadata(f->t.s, p, zeros, 16);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_invalidate(NULL));
    TC_OK(acg_attn_plan_destroy(p));
}

/* acg_attn_plan_note: after the device grew a row's KV length in place (as a loop does), a
 * note of the grown rows makes their build upload nothing, and a build of other rows uploads
 * them; rows the build would refuse are refused with nothing changed. */
static void test_note(void **state) {
    fx *f = *state;
    acg_attn_plan *p = make_plan(f->t.dev, 3, 40, 16, 3); /* table_width 3 */
    uint32_t pages[2] = {4, 5};
    acg_attn_row row = {pages, 2, 17, 1};
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
    assert_int_equal(plan_stats(p).uploads, 1);
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v));
    TC_OK(acg_fill(f->t.s, v.kv_lens, 0, sizeof(int32_t), 20, 4)); /* the device grows it */
    row.kv_len = 20;
    TC_OK(acg_attn_plan_note(p, &row, 1));
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
    acg_attn_plan_stats st = plan_stats(p);
    assert_int_equal(st.uploads, 1);
    assert_int_equal(st.unchanged, 1);
    int32_t want[3 * 3 + 4 + 3] = {4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 20, 0, 0};
    expect_metadata(f->t.s, p, want, 16);
    row.kv_len = 21;
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
    assert_int_equal(plan_stats(p).uploads, 2);
    want[13] = 21;
    expect_metadata(f->t.s, p, want, 16);
    /* Refused: nothing changes, so the same build is still unchanged. */
    acg_attn_row bad = {pages, 2, 40, 1}; /* two pages of 16 do not cover 40 */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_note(p, &bad, 1));
    TC_EXPECT(ERR_EXHAUSTED, acg_attn_plan_note(p, &row, 4));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_note(p, NULL, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_note(NULL, &row, 1));
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
    assert_int_equal(plan_stats(p).uploads, 2);
    TC_OK(acg_attn_plan_destroy(p));
}

/* Packs rows the way the header describes, independently of the library (for larger cases). */
static void pack_expected(uint32_t batch, uint32_t tw, const acg_attn_row *rows, uint32_t n,
                          int32_t *out) {
    int32_t *offsets = out + (size_t)batch * tw, *lens = offsets + batch + 1;
    memset(out, 0, ((size_t)batch * tw + 2 * batch + 1) * 4);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < rows[i].n_pages; j++) {
            out[(size_t)i * tw + j] = (int32_t)rows[i].pages[j];
        }
        lens[i] = (int32_t)rows[i].kv_len;
    }
    for (uint32_t i = 0; i < batch; i++) {
        offsets[i + 1] = offsets[i] + (int32_t)(i < n ? rows[i].q_len : 0);
    }
}

/* Re-planning keeps the plan, its buffer and its views (same handles, same sizes) and changes
 * the contents. */
static void test_replan_keeps_addresses(void **state) {
    fx *f = *state;
    enum { BATCH = 2, TW = 4, INTS = BATCH * TW + 2 * BATCH + 1 };
    acg_attn_plan *p = make_plan(f->t.dev, BATCH, 64, 16, 2);
    acg_attn_plan_views v1 = ACG_ATTN_PLAN_VIEWS_INIT, v2 = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v1));
    size_t sizes[4] = {acg_buffer_get_size(v1.metadata), acg_buffer_get_size(v1.block_table),
                       acg_buffer_get_size(v1.query_offsets), acg_buffer_get_size(v1.kv_lens)};
    assert_int_equal(sizes[1], BATCH * TW * 4);
    assert_int_equal(sizes[2], (BATCH + 1) * 4);
    assert_int_equal(sizes[3], BATCH * 4);
    const uint32_t pa[] = {9, 10}, pb[] = {9, 10, 11};
    acg_attn_row a[2] = {{pa, 2, 17, 1}, {pb, 3, 40, 1}};
    int32_t want[INTS];
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, a, 2));
    pack_expected(BATCH, TW, a, 2, want);
    expect_metadata(f->t.s, p, want, INTS);
    a[0].kv_len = 18;
    a[1] = (acg_attn_row){pa, 1, 3, 1};
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, a, 2));
    pack_expected(BATCH, TW, a, 2, want);
    expect_metadata(f->t.s, p, want, INTS);
    TC_OK(acg_attn_plan_get_views(p, &v2));
    assert_memory_equal(&v1, &v2, sizeof v1);
    assert_int_equal(acg_buffer_get_size(v2.metadata), sizes[0]);
    assert_int_equal(acg_buffer_get_size(v2.block_table), sizes[1]);
    assert_int_equal(acg_buffer_get_size(v2.query_offsets), sizes[2]);
    assert_int_equal(acg_buffer_get_size(v2.kv_lens), sizes[3]);
    assert_int_equal(plan_stats(p).uploads, 2);
    TC_OK(acg_attn_plan_destroy(p));
}

/* 100 re-plans allocate nothing: no device memory (the device's accounting) and, with the
 * counting allocator, no memory of the library's at all. */
static void test_replan_allocates_nothing(void **state) {
    tc_alloc_install();
    setup(state); /* the fixture, from the counting allocator */
    fx *f = *state;
    acg_device *dev = f->t.dev;
    acg_stream *s = f->t.s;
    acg_stager *sg = f->sg;
    enum { BATCH = 8, TW = 64, INTS = BATCH * TW + 2 * BATCH + 1 };
    acg_attn_plan *p = make_plan(dev, BATCH, TW * 16, 16, BATCH);
    static uint32_t pages[BATCH][TW];
    acg_attn_row rows[BATCH];
    for (uint32_t r = 0; r < BATCH; r++) {
        for (uint32_t j = 0; j < TW; j++) {
            pages[r][j] = 1 + r * TW + j;
        }
        rows[r] = (acg_attn_row){pages[r], 1, 1 + r, 1};
    }
    TC_OK(acg_attn_plan_build(p, sg, s, rows, BATCH - 1)); /* warm */
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_device_get_memory_stats(dev, &m0));
    uint64_t allocs = tc_alloc_count(), copies = stager_copies(sg);
    for (uint32_t step = 0; step < 100; step++) {
        for (uint32_t r = 0; r < BATCH - 1; r++) {
            rows[r].kv_len++;
            rows[r].n_pages = (rows[r].kv_len + 15) / 16;
        }
        TC_OK(acg_attn_plan_build(p, sg, s, rows, BATCH - 1));
    }
    TC_OK(acg_device_get_memory_stats(dev, &m1));
    assert_int_equal(m1.allocations, m0.allocations);
    assert_int_equal(m1.bytes_in_use, m0.bytes_in_use);
    assert_int_equal(tc_alloc_count(), allocs);
    assert_int_equal(stager_copies(sg), copies + 100);
    int32_t want[INTS];
    pack_expected(BATCH, TW, rows, BATCH - 1, want);
    expect_metadata(s, p, want, INTS);
    TC_OK(acg_attn_plan_destroy(p));
    teardown(state);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* Packed prefill: uneven q_len per row, zero-length queries, exact offsets. */
static void test_packed_queries(void **state) {
    fx *f = *state;
    enum { BATCH = 6, TW = 2, INTS = BATCH * TW + 2 * BATCH + 1 };
    acg_attn_plan *p = make_plan(f->t.dev, BATCH, 32, 16, 12);
    const uint32_t p0[] = {3}, p1[] = {4, 6}, p2[] = {5}, p3[] = {8};
    const acg_attn_row rows[4] = {{p0, 1, 5, 5}, {p1, 2, 20, 0}, {p2, 1, 9, 3}, {p3, 1, 2, 2}};
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, rows, 4));
    int32_t want[INTS];
    pack_expected(BATCH, TW, rows, 4, want);
    const int32_t offsets[BATCH + 1] = {0, 5, 5, 8, 10, 10, 10};
    TC_BYTES_EQUAL(want + BATCH * TW, offsets, sizeof offsets); /* the reference agrees */
    expect_metadata(f->t.s, p, want, INTS);
    TC_OK(acg_attn_plan_destroy(p));
}

/* A step the plan cannot hold is ACG_ERR_EXHAUSTED, bad rows ACG_ERR_INVALID_ARGUMENT; neither
 * uploads nor changes the buffer or the counters. */
static void test_exhausted_and_bad_rows(void **state) {
    fx *f = *state;
    enum { BATCH = 2, TW = 2, INTS = BATCH * TW + 2 * BATCH + 1 };
    acg_attn_plan *p = make_plan(f->t.dev, BATCH, 32, 16, 4);
    const uint32_t pg[] = {1, 2, 3}, big[] = {0x80000000u};
    const acg_attn_row good[2] = {{pg, 2, 30, 2}, {pg + 2, 1, 3, 1}};
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, good, 2));
    int32_t want[INTS];
    pack_expected(BATCH, TW, good, 2, want);
    uint64_t copies = stager_copies(f->sg);

    const acg_attn_row three[3] = {good[0], good[1], good[1]};
    TC_EXPECT(ERR_EXHAUSTED, acg_attn_plan_build(p, f->sg, f->t.s, three, 3));
    TC_LAST_ERROR_HAS("acg_attn_plan_build");
    const acg_attn_row exhausted[][1] = {
        {{pg, 3, 32, 1}}, /* more pages than table_width */
        {{pg, 2, 33, 1}}, /* kv_len > max_seq_len */
        {{pg, 2, 32, 5}}, /* query tokens > max_query_tokens */
    };
    for (size_t i = 0; i < sizeof exhausted / sizeof exhausted[0]; i++) {
        TC_EXPECT(ERR_EXHAUSTED, acg_attn_plan_build(p, f->sg, f->t.s, exhausted[i], 1));
    }
    const acg_attn_row q_over[2] = {{pg, 2, 32, 3}, {pg, 2, 32, 2}}; /* 5 together */
    TC_EXPECT(ERR_EXHAUSTED, acg_attn_plan_build(p, f->sg, f->t.s, q_over, 2));

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_build(p, f->sg, f->t.s, NULL, 1));
    const acg_attn_row invalid[][1] = {
        {{NULL, 1, 3, 1}}, /* NULL pages */
        {{pg, 1, 17, 1}},  /* pages do not cover kv_len */
        {{pg, 1, 2, 3}},   /* q_len > kv_len */
        {{big, 1, 2, 1}},  /* page id beyond int32 */
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_build(p, f->sg, f->t.s, invalid[i], 1));
    }
    acg_attn_plan_stats st = plan_stats(p);
    assert_int_equal(st.builds, 1);
    assert_int_equal(st.uploads, 1);
    assert_int_equal(stager_copies(f->sg), copies);
    expect_metadata(f->t.s, p, want, INTS);
    /* Still usable, and a row may point at the last page of a full table. */
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, good, 1));
    TC_OK(acg_attn_plan_destroy(p));
}

/* Handles, devices, capture and config are checked. */
static void test_bad_arguments(void **state) {
    fx *f = *state;
    acg_attn_plan *p = make_plan(f->t.dev, 2, 32, 16, 2);
    const uint32_t pg[] = {1};
    const acg_attn_row row = {pg, 1, 4, 1};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_build(NULL, f->sg, f->t.s, &row, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_build(p, NULL, f->t.s, &row, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_build(p, f->sg, NULL, &row, 1));
    uint64_t fake[64] = {0};
    TC_EXPECT(ERR_INVALID_HANDLE,
              acg_attn_plan_build((acg_attn_plan *)(void *)fake, f->sg, f->t.s, &row, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_destroy((acg_attn_plan *)(void *)fake));
    assert_null(acg_attn_plan_get_event(NULL));
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    acg_attn_plan_stats st = ACG_ATTN_PLAN_STATS_INIT;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_get_views(NULL, &v));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_get_views(p, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_get_stats(NULL, &st));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_get_stats(p, NULL));

    acg_device *other = tc_open();
    acg_stager *osg = NULL;
    TC_OK(acg_stager_create(other, NULL, &osg));
    acg_stream *os = tc_stream(other);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_attn_plan_build(p, osg, f->t.s, &row, 1));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_attn_plan_build(p, f->sg, os, &row, 1));
    TC_OK(acg_stream_destroy(os));
    TC_OK(acg_stager_destroy(osg));
    tc_close(other);

    if (tc_has_graphs(f->t.dev, f->t.s)) {
        TC_OK(acg_stream_begin_capture(f->t.s, NULL));
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
        TC_LAST_ERROR_HAS("capturing");
        acg_graph *g = NULL;
        TC_OK(acg_stream_end_capture(f->t.s, &g));
        TC_OK(acg_graph_destroy(g));
    }
    assert_int_equal(plan_stats(p).builds, 0);
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1)); /* a refused build loses nothing */

    acg_attn_plan *const untouched = (acg_attn_plan *)(uintptr_t)0x24;
    acg_attn_plan *q = untouched;
    acg_attn_plan_config c = ACG_ATTN_PLAN_CONFIG_INIT;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, &q)); /* zero fields */
    c = (acg_attn_plan_config){
        .size = sizeof c, .batch = 2, .max_seq_len = 32, .page_size = 16, .max_query_tokens = 2};
    TC_EXPECT(ERR_INVALID_HANDLE, acg_attn_plan_create(NULL, &c, &q));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, NULL, &q));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, NULL));
    c.size = 4;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, &q));
    c = (acg_attn_plan_config){.size = sizeof c,
                               .batch = 2,
                               .max_seq_len = 0x80000000u,
                               .page_size = 16,
                               .max_query_tokens = 2};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, &q));
    c = (acg_attn_plan_config){.size = sizeof c,
                               .batch = UINT32_MAX,
                               .max_seq_len = 0x7fffffff,
                               .page_size = 1,
                               .max_query_tokens = 2};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, &q)); /* too large */
    assert_ptr_equal(q, untouched);
    TC_OK(acg_attn_plan_destroy(NULL));
    TC_OK(acg_attn_plan_destroy(p));
}

/* A pre-plan built on a side stream is promoted when the next build packs the same rows (no
 * copy, the event kept), and uploaded again when the rows changed. */
static void test_preplan_promoted(void **state) {
    fx *f = *state;
    enum { BATCH = 4, TW = 2, INTS = BATCH * TW + 2 * BATCH + 1 };
    acg_stream *side = tc_stream(f->t.dev);
    acg_attn_plan *p = make_plan(f->t.dev, BATCH, 32, 16, BATCH);
    acg_event *ev = acg_attn_plan_get_event(p);
    assert_non_null(ev);
    const uint32_t pg[] = {2, 3, 4, 5};
    acg_attn_row rows[3] = {{pg, 1, 7, 1}, {pg + 1, 2, 20, 1}, {pg + 3, 1, 1, 1}};
    int32_t want[INTS];

    TC_OK(acg_attn_plan_build(p, f->sg, side, rows, 3)); /* the pre-plan */
    uint64_t copies = stager_copies(f->sg);
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, rows, 3)); /* the step: the same batch */
    acg_attn_plan_stats st = plan_stats(p);
    assert_int_equal(st.builds, 2);
    assert_int_equal(st.uploads, 1);
    assert_int_equal(st.unchanged, 1);
    assert_int_equal(stager_copies(f->sg), copies);
    assert_ptr_equal(acg_attn_plan_get_event(p), ev);
    pack_expected(BATCH, TW, rows, 3, want);
    expect_metadata(f->t.s, p, want, INTS);

    /* The batch changed after the pre-plan: a request finished. */
    TC_OK(acg_attn_plan_build(p, f->sg, side, rows, 3));
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, rows, 2));
    st = plan_stats(p);
    assert_int_equal(st.uploads, 2);
    assert_int_equal(st.unchanged, 2);
    assert_int_equal(stager_copies(f->sg), copies + 1);
    pack_expected(BATCH, TW, rows, 2, want);
    expect_metadata(f->t.s, p, want, INTS);
    /* One token more for one row is a change too. */
    rows[0].kv_len++;
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, rows, 2));
    assert_int_equal(plan_stats(p).uploads, 3);
    pack_expected(BATCH, TW, rows, 2, want);
    expect_metadata(f->t.s, p, want, INTS);
    TC_OK(acg_attn_plan_destroy(p));
    TC_OK(acg_stream_destroy(side));
}

/* ---- allocation failures ------------------------------------------------------------------- */

static acg_status scenario(void *ctx) {
    (void)ctx;
    acg_device *dev = NULL;
    acg_stream *s = NULL;
    acg_stager *sg = NULL;
    acg_attn_plan *p = NULL;
    acg_status st = acg_device_open(tc_spec(), &dev);
    if (st != ACG_OK) {
        return st;
    }
    acg_stager_config sc = ACG_STAGER_CONFIG_INIT;
    sc.depth = 2;
    sc.buffer_bytes = 16; /* the first build grows the ring */
    sc.mirror = true;
    acg_attn_plan_config pc = {
        .size = sizeof pc, .batch = 2, .max_seq_len = 64, .page_size = 16, .max_query_tokens = 2};
    const uint32_t pg[] = {1, 2};
    acg_attn_row rows[2] = {{pg, 2, 20, 1}, {pg, 1, 3, 1}};
    uint32_t v[4] = {1, 2, 3, 4};
    if ((st = acg_stream_create(dev, &s)) != ACG_OK ||
        (st = acg_stager_create(dev, &sc, &sg)) != ACG_OK ||
        (st = acg_attn_plan_create(dev, &pc, &p)) != ACG_OK ||
        (st = acg_attn_plan_build(p, sg, s, rows, 2)) != ACG_OK ||
        (st = acg_attn_plan_build(p, sg, s, rows, 1)) != ACG_OK) {
        goto out;
    }
    acg_attn_plan_views views = ACG_ATTN_PLAN_VIEWS_INIT;
    if ((st = acg_attn_plan_get_views(p, &views)) != ACG_OK ||
        (st = acg_stager_upload(sg, s, views.kv_lens, 0, v, 2, 4, NULL, 2)) != ACG_OK ||
        (st = acg_stager_upload(sg, s, views.kv_lens, 0, v, 2, 4, NULL, 2)) != ACG_OK) {
        goto out;
    }
    st = acg_stream_synchronize(s);
out:;
    acg_status d1 = acg_attn_plan_destroy(p), d2 = acg_stager_destroy(sg);
    acg_status d3 = acg_stream_destroy(s), d4 = acg_device_close(dev);
    st = st != ACG_OK ? st : d1 != ACG_OK ? d1 : d2 != ACG_OK ? d2 : d3 != ACG_OK ? d3 : d4;
    return st;
}

static void test_alloc_fail(void **state) {
    (void)state;
    tc_alloc_sweep_case("stager and plan", scenario, NULL, false, 10);
}

/* A refused destroy leaves the plan whole: while a graph reads the plan's metadata, or while a
 * capture runs on the device, destroy is ACG_ERR_IN_USE and the views and builds still work. */
static void test_destroy_refused_keeps_plan(void **state) {
    fx *f = *state;
    acg_attn_plan_config pc = ACG_ATTN_PLAN_CONFIG_INIT;
    pc.batch = 2;
    pc.max_seq_len = 64;
    pc.max_query_tokens = 2;
    acg_attn_plan *p;
    TC_OK(acg_attn_plan_create(f->t.dev, &pc, &p));
    if (!tc_has_graphs(f->t.dev, f->t.s)) {
        TC_OK(acg_attn_plan_destroy(p));
        tc_skip("no graphs");
    }
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &v));
    acg_buffer *out = tc_buffer(f->t.dev, 64);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_EXPECT(ERR_IN_USE, acg_attn_plan_destroy(p)); /* a capture is in progress */
    TC_OK(acg_copy_d2d(f->t.s, out, 0, v.kv_lens, 0, acg_buffer_get_size(v.kv_lens)));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    TC_EXPECT(ERR_IN_USE, acg_attn_plan_destroy(p)); /* the graph reads kv_lens */
    TC_LAST_ERROR_HAS("graph");
    acg_attn_plan_views again = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &again));
    assert_ptr_equal(again.kv_lens, v.kv_lens);
    assert_int_equal(acg_buffer_get_size(v.block_table), 2 * 4 * sizeof(int32_t));
    uint32_t pages[] = {5};
    acg_attn_row row = {pages, 1, 3, 1};
    TC_OK(acg_attn_plan_build(p, f->sg, f->t.s, &row, 1));
    TC_OK(acg_graph_launch(g, f->t.s));
    int32_t lens[2];
    TC_OK(acg_stream_synchronize(f->t.s));
    tc_download(f->t.s, lens, out, sizeof lens);
    assert_int_equal(lens[0], 3);
    assert_int_equal(lens[1], 0);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_attn_plan_destroy(p));
    TC_OK(acg_buffer_free(out));
}

/* Every field of a plan config but page_size is required, so a config shorter than the struct
 * is refused, naming it. The views and the stats are written only up to an older caller's size,
 * and not at all when the size was never set. */
static void test_struct_versions(void **state) {
    fx *f = *state;
    acg_attn_plan_config c = {.size = offsetof(acg_attn_plan_config, max_query_tokens),
                              .batch = 2,
                              .max_seq_len = 32,
                              .page_size = 16,
                              .max_query_tokens = 2};
    acg_attn_plan *p = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_create(f->t.dev, &c, &p));
    TC_LAST_ERROR_HAS("acg_attn_plan_config.size is 20");
    assert_null(p);

    p = make_plan(f->t.dev, 2, 32, 16, 2);
    acg_attn_plan_views full = ACG_ATTN_PLAN_VIEWS_INIT;
    TC_OK(acg_attn_plan_get_views(p, &full));
    acg_attn_plan_views v;
    memset(&v, 0, sizeof v);
    v.size = offsetof(acg_attn_plan_views, kv_lens);
    TC_OK(acg_attn_plan_get_views(p, &v));
    assert_int_equal(v.size, offsetof(acg_attn_plan_views, kv_lens));
    assert_ptr_equal(v.metadata, full.metadata);
    assert_ptr_equal(v.query_offsets, full.query_offsets);
    assert_null(v.kv_lens); /* past the caller's size */
    assert_int_equal(v.table_width, 0);
    v.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_get_views(p, &v));
    TC_LAST_ERROR_HAS("acg_attn_plan_get_views: out->size is 0");

    acg_attn_plan_stats st;
    memset(&st, 0xcd, sizeof st);
    st.size = offsetof(acg_attn_plan_stats, uploads);
    TC_OK(acg_attn_plan_get_stats(p, &st));
    assert_int_equal(st.builds, 0);
    assert_int_equal(st.uploads, 0xcdcdcdcdcdcdcdcdull);
    st.size = sizeof st.size;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_attn_plan_get_stats(p, &st));
    TC_LAST_ERROR_HAS("acg_attn_plan_get_stats: out->size is 8");
    TC_OK(acg_attn_plan_destroy(p));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_mixed_batch_layout),
    T(test_empty_plan),
    T(test_invalidate),
    T(test_note),
    T(test_replan_keeps_addresses),
    cmocka_unit_test(test_replan_allocates_nothing),
    T(test_packed_queries),
    T(test_exhausted_and_bad_rows),
    T(test_bad_arguments),
    T(test_preplan_promoted),
    cmocka_unit_test(test_alloc_fail),
    T(test_destroy_refused_keeps_plan),
    T(test_struct_versions),
};
#undef T
TC_MAIN("test_plan", tests)
