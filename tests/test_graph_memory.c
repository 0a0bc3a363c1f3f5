/*
 * test_graph_memory.c — the memory the graphs cost: a graph pool lays every capture out over
 * the same memory; a runner captures its buckets largest first (by memory, as every rank
 * agrees) into one pool that holds about what the largest bucket needs alone, warms up without
 * stacking eager temporaries on the pool, and reports each bucket's graph memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

#include "common.h"

#define N 4096u /* floats per row of a bucket's input, output and row temporary */
#define K 4096u /* floats per token of a bucket's token temporary */
#define ROW ((uint64_t)N * sizeof(float))
#define TOKEN ((uint64_t)K * sizeof(float))

/* ---- the recipe: y = 2 (x + 1), with a temporary per row and one per token ------------------ */

typedef struct fx {
    tc_fixture t;          /* the device under test, a stream, the built-in kernels */
    uint32_t fail_warm_up; /* eager runs of slot 1 of buckets whose batch has a bit in it fail */
    acg_recipe recipe;     /* stepped with the fx as its user */
} fx;

static size_t rows_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    (void)i;
    return (size_t)b->batch * ROW;
}

static acg_status forward(void *user, acg_stream *s, const acg_step_io *io) {
    fx *f = user;
    uint32_t n = io->bucket->batch * N, t = io->bucket->tokens * K;
    acg_capture_state state = ACG_CAPTURE_NONE;
    acg_stream_get_capture_state(s, &state);
    if (state == ACG_CAPTURE_NONE && io->slot == 1 && (io->bucket->batch & f->fail_warm_up)) {
        return acg_set_last_error(ACG_ERR_DEVICE, "the test recipe fails batch %u eagerly",
                                  io->bucket->batch);
    }
    acg_buffer *tmp = NULL, *tok = NULL;
    acg_status st = acg_stream_alloc(s, (size_t)n * sizeof(float), &tmp);
    if (st == ACG_OK) {
        st = acg_stream_alloc(s, (size_t)t * sizeof(float), &tok);
    }
    if (st == ACG_OK) {
        st = tc_fill(s, &f->t.k, tok, 0, t, 0.5f); /* work of its own on the token temporary */
    }
    if (st == ACG_OK) {
        st = tc_add(s, &f->t.k, tok, 0, tok, 0, t, 1.0f);
    }
    if (st == ACG_OK) {
        st = tc_twice_x_plus_one(s, &f->t.k, io->outputs[0], io->inputs[0], tmp, n);
    }
    if (tok != NULL) {
        acg_stream_free(s, tok);
    }
    if (tmp != NULL) {
        acg_stream_free(s, tmp);
    }
    return st;
}

/* In order of shape (batch, then tokens) the first is the smallest but one in memory: a bucket
 * of fewer rows and more tokens needs more. */
static const acg_bucket_key four[] = {
    {"step", 0, 8, 1}, {"step", 0, 4, 16}, {"step", 0, 2, 64}, {"step", 0, 1, 1}};
enum { LARGEST = 2 }; /* (2, 64), by memory */

/* What one step of a bucket allocates eagerly, and what its captured graph holds (the eager
 * temporaries and the output scratch the whole runner copies out of): every size is a multiple
 * of the pool's alignment. */
static uint64_t eager_bytes(const acg_bucket_key *b) { return b->batch * ROW + b->tokens * TOKEN; }

static uint64_t graph_bytes(const acg_bucket_key *b) { return eager_bytes(b) + b->batch * ROW; }

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->recipe = tc_recipe("memory", f, rows_bytes, forward);
    *state = f;
    return 0;
}

static acg_runner_config config(fx *f, acg_graph_mode g) {
    acg_runner_config c = tc_runner_config(&f->recipe, four, 4, f->t.s, g);
    c.n_slots = 2;
    return c;
}

static acg_bucket_report report(acg_runner *r, uint32_t b) {
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    TC_OK(acg_runner_get_report(r, b, &rep));
    return rep;
}

/* One step of bucket b with inputs x = i / 4 + seed; the output lands in out. */
static void step(fx *f, acg_runner *r, uint32_t b, float seed, float *out) {
    size_t count = (size_t)four[b].batch * N;
    float *x = malloc(count * sizeof *x);
    for (size_t i = 0; i < count; i++) {
        x[i] = (float)(i % 1000) * 0.25f + seed;
    }
    acg_lease lease;
    TC_OK(acg_runner_lease(r, b, &lease));
    tc_upload(f->t.s, lease.io.inputs[0], x, count * sizeof *x);
    TC_OK(acg_runner_run(r, &lease, f->t.s));
    tc_download(f->t.s, out, lease.io.outputs[0], count * sizeof *out);
    TC_OK(acg_runner_release(r, &lease));
    free(x);
}

/* Every bucket of r, in both slots, gives the eager runner's bytes. */
static void check_against_eager(fx *f, acg_runner *r) {
    acg_runner_config c = config(f, ACG_GRAPHS_OFF);
    acg_runner *eager;
    TC_OK(acg_runner_create(f->t.dev, &c, &eager));
    for (uint32_t b = 0; b < 4; b++) {
        size_t count = (size_t)four[b].batch * N;
        float *got = malloc(count * sizeof *got), *want = malloc(count * sizeof *want);
        for (int rep = 0; rep < 3; rep++) { /* slots 0, 1, 0 */
            step(f, r, b, (float)rep, got);
            step(f, eager, b, (float)rep, want);
            TC_BYTES_EQUAL(want, got, count * sizeof *got);
        }
        free(got);
        free(want);
    }
    TC_OK(acg_runner_destroy(eager));
}

/* ---- the pool ------------------------------------------------------------------------------- */

typedef struct pieces {
    const tc_kernels *k;
    uint32_t n[2];   /* floats of each scratch piece, allocated in this order */
    float value[2];  /* what each holds */
    acg_buffer *out; /* (2 * 256) the first 256 floats of each piece */
} pieces;

/* Expects p->out to hold the first 256 floats of each piece, read on s. */
static void expect_pieces(acg_stream *s, const pieces *p) {
    float got[512], want[512];
    tc_download(s, got, p->out, sizeof got);
    tc_splat(want, 256, p->value[0]);
    tc_splat(want + 256, 256, p->value[1]);
    TC_BYTES_EQUAL(want, got, sizeof got);
}

static acg_status work_pieces(void *ctx, acg_stream *a, acg_stream *b) {
    pieces *p = ctx;
    (void)b;
    acg_buffer *s[2] = {NULL, NULL};
    acg_status st = ACG_OK;
    for (int i = 0; i < 2 && st == ACG_OK; i++) {
        st = acg_stream_alloc(a, (size_t)p->n[i] * sizeof(float), &s[i]);
        if (st == ACG_OK) {
            st = tc_fill(a, p->k, s[i], 0, p->n[i], p->value[i]);
        }
        if (st == ACG_OK) {
            st = tc_copy(a, p->k, p->out, (size_t)i * 256 * sizeof(float), s[i], 0, 256);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (s[i] != NULL) {
            acg_stream_free(a, s[i]);
        }
    }
    return st;
}

/* A capture lays its scratch out over the whole pool, the tail of an earlier chunk included:
 * after a graph of (256 KiB, 1 MiB), one of (1 MiB, 128 KiB) takes no more memory, and both
 * replay right, in any order. */
static void test_pool_reuses_every_chunk(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    acg_graph_pool *pool = tc_pool(f->t.dev);
    acg_buffer *out_a = tc_buffer(f->t.dev, 512 * sizeof(float));
    acg_buffer *out_b = tc_buffer(f->t.dev, 512 * sizeof(float));
    pieces a = {&f->t.k, {64 * 1024, 256 * 1024}, {1.0f, 2.0f}, out_a};
    pieces b = {&f->t.k, {256 * 1024, 32 * 1024}, {3.0f, 4.0f}, out_b};
    acg_graph *ga = NULL, *gb = NULL;
    size_t bytes_a = 0, bytes_b = 0;
    TC_OK(tc_capture(work_pieces, &a, f->t.s, NULL, pool, &ga));
    TC_OK(acg_graph_pool_get_bytes(pool, &bytes_a));
    TC_OK(tc_capture(work_pieces, &b, f->t.s, NULL, pool, &gb));
    TC_OK(acg_graph_pool_get_bytes(pool, &bytes_b));
    assert_int_equal(bytes_a, (64 + 256) * 1024 * sizeof(float));
    assert_int_equal(bytes_b, bytes_a);

    for (int round = 0; round < 2; round++) {
        acg_graph *first = round == 0 ? gb : ga, *second = round == 0 ? ga : gb;
        TC_OK(acg_graph_launch(first, f->t.s));
        TC_OK(acg_graph_launch(second, f->t.s));
        expect_pieces(f->t.s, &a);
        expect_pieces(f->t.s, &b);
    }
    TC_OK(acg_graph_destroy(ga));
    TC_OK(acg_graph_destroy(gb));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_FREE_BUFFERS(out_a, out_b);
}

/* ---- a runner's buckets --------------------------------------------------------------------- */

/* Four buckets of different sizes, two slots each: every bucket reports the graph memory its
 * graphs need (the slots share it), the pool holds no more than 1.25 times the largest bucket's
 * (it grew only while the largest by memory was captured, first), creation never holds two
 * eager steps' temporaries or one beside the pool, and replay equals eager. */
static void test_pool_holds_the_largest(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_device_reset_peak_memory(f->t.dev));
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m0));
    acg_runner_config c = config(f, ACG_GRAPHS_ON);
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m1));

    uint64_t largest = 0, growth = 0;
    for (uint32_t b = 0; b < 4; b++) {
        acg_bucket_report rep = report(r, b);
        assert_int_equal(rep.state, ACG_BUCKET_CAPTURED);
        assert_int_equal(rep.eager_peak, eager_bytes(&four[b]));
        assert_int_equal(rep.graph_bytes, graph_bytes(&four[b]));
        largest = rep.graph_bytes > largest ? rep.graph_bytes : largest;
        growth += rep.pool_growth;
        if (b != LARGEST) {
            assert_int_equal(rep.pool_growth, 0); /* it fitted in what the largest left */
        }
    }
    assert_int_equal(largest, graph_bytes(&four[LARGEST]));
    size_t pool = 0;
    TC_OK(acg_runner_get_pool_bytes(r, &pool));
    assert_int_equal(growth, pool);
    assert_true(pool >= largest);
    assert_true(pool * 4 <= largest * 5);

    /* Statics (two slots of inputs and one output, at 8 rows) and the pool stay; while
     * creating, at most one eager step's temporaries came and went, never beside the pool. */
    uint64_t statics = 3 * 8 * ROW;
    uint64_t eager = eager_bytes(&four[LARGEST]);
    assert_int_equal(m1.bytes_in_use, m0.bytes_in_use + statics + pool);
    assert_true(m1.peak_bytes <= m0.bytes_in_use + statics + (pool > eager ? pool : eager));

    check_against_eager(f, r);
    TC_OK(acg_runner_destroy(r));
}

/* The two new report fields are written only where the caller's size covers them; with graphs
 * off they are zero, and so is the pool. */
static void test_report_sizes(void **state) {
    fx *f = *state;
    acg_runner_config c = config(f, tc_cap()->graphs ? ACG_GRAPHS_ON : ACG_GRAPHS_OFF);
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    const uint64_t mark = 0x5a5a5a5a5a5a5a5aull;
    struct {
        acg_bucket_report rep;
        uint64_t after; /* a newer caller's field */
    } out;
    const size_t sizes[] = {offsetof(acg_bucket_report, graph_bytes),
                            offsetof(acg_bucket_report, pool_growth), sizeof(acg_bucket_report),
                            sizeof out};
    for (int i = 0; i < 4; i++) {
        memset(&out, 0x5a, sizeof out);
        out.rep.size = sizes[i];
        TC_OK(acg_runner_get_report(r, LARGEST, &out.rep));
        size_t written = sizes[i] < sizeof out.rep ? sizes[i] : sizeof out.rep;
        assert_int_equal(out.rep.size, written);
        assert_int_equal(out.rep.key.batch, 2);
        bool graphs = tc_cap()->graphs;
        uint64_t want_graph = graphs ? graph_bytes(&four[LARGEST]) : 0;
        assert_int_equal(out.rep.graph_bytes, i >= 1 ? want_graph : mark);
        if (i >= 2) {
            assert_true(graphs ? out.rep.pool_growth >= want_graph : out.rep.pool_growth == 0);
        } else {
            assert_int_equal(out.rep.pool_growth, mark);
        }
        assert_int_equal(out.after, mark); /* past this library's struct: untouched */
    }
    TC_OK(acg_runner_destroy(r));

    c.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    acg_bucket_report rep = report(r, LARGEST);
    assert_int_equal(rep.state, ACG_BUCKET_EAGER);
    assert_int_equal(rep.graph_bytes, 0);
    assert_int_equal(rep.pool_growth, 0);
    size_t pool = 1;
    TC_OK(acg_runner_get_pool_bytes(r, &pool));
    assert_int_equal(pool, 0);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_get_pool_bytes(r, NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_get_pool_bytes(NULL, &pool));
    TC_OK(acg_runner_destroy(r));
}

/* A bucket whose warm-up fails is dropped with the reason, holds no graph memory and runs
 * eagerly; the others are captured. With graphs required, creation fails naming it. */
static void test_warm_up_failure(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    f->fail_warm_up = 4;
    acg_runner_config c = config(f, ACG_GRAPHS_ON);
    acg_runner *r;
    tc_log_capture_begin(ACG_LOG_ERROR);
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    tc_log_capture_end();
    for (uint32_t b = 0; b < 4; b++) {
        acg_bucket_report rep = report(r, b);
        if (four[b].batch == 4) {
            assert_int_equal(rep.state, ACG_BUCKET_DROPPED);
            assert_non_null(strstr(rep.reason, "warm-up failed"));
            assert_non_null(strstr(rep.reason, "fails batch 4 eagerly"));
            assert_int_equal(rep.graph_bytes, 0);
            assert_int_equal(rep.pool_growth, 0);
        } else {
            assert_int_equal(rep.state, ACG_BUCKET_CAPTURED);
        }
    }
    acg_lease lease;
    TC_OK(acg_runner_lease(r, 1, &lease));
    assert_false(lease.graphed);
    TC_OK(acg_runner_release(r, &lease));
    TC_OK(acg_runner_destroy(r));

    c.graphs = ACG_GRAPHS_REQUIRE;
    r = NULL;
    TC_EXPECT(ERR_DEVICE, acg_runner_create(f->t.dev, &c, &r));
    assert_null(r);
    TC_LAST_ERROR_HAS("batch 4");
    TC_LAST_ERROR_HAS("warm-up failed");
    f->fail_warm_up = 0;
}

/* ---- rank agreement, with a comm that plays the other ranks ---------------------------------- */

typedef struct others {
    int calls;    /* allreduce_min_i32 calls so far */
    int fail_at;  /* this call fails (0: none) */
    int lower_at; /* on this call, the other ranks lower values[lower_index] ... */
    size_t lower_index;
    int32_t lower_to; /* ... to this */
} others;

static acg_status others_min(void *user, int32_t *v, size_t n) {
    others *o = user;
    o->calls++;
    if (o->calls == o->fail_at) {
        return acg_set_last_error(ACG_ERR_COMM, "the other ranks left at call %d", o->calls);
    }
    if (o->calls == o->lower_at && o->lower_index < n && o->lower_to < v[o->lower_index]) {
        v[o->lower_index] = o->lower_to;
    }
    return ACG_OK;
}

static acg_status create_with(fx *f, others *o, acg_runner **r) {
    acg_comm comm = ACG_COMM_INIT;
    comm.user = o;
    comm.barrier = tc_one_rank_barrier; /* the others never keep this rank waiting */
    comm.allreduce_min_i32 = others_min;
    acg_runner_config c = config(f, ACG_GRAPHS_ON);
    c.comm = &comm;
    return acg_runner_create(f->t.dev, &c, r);
}

/* Calls of a creation of four buckets: the graph mode, the eager peaks, each bucket's capture
 * (in order of memory), the buckets kept. */
enum { CALL_PEAKS = 2, CALL_FIRST_BUCKET = 3, CALLS = 7 };

/* The order is every rank's: another rank whose step of (1, 1) needs the most memory makes it
 * the first captured. Another rank whose warm-up failed, or whose memory cannot hold a capture,
 * drops the bucket here too, saying why. A comm that fails at any call fails the creation. */
static void test_ranks_agree_on_memory(void **state) {
    fx *f = *state;
    tc_need_graphs(f->t.dev, f->t.s);
    acg_runner *r = NULL;
    tc_log_capture_begin(ACG_LOG_ERROR); /* the dropped buckets are logged */
    others o = {.lower_at = CALL_PEAKS, .lower_index = 3, .lower_to = -(1 << 20)}; /* 1 GiB */
    TC_OK(create_with(f, &o, &r));
    assert_int_equal(o.calls, CALLS);
    assert_true(report(r, 3).pool_growth > 0); /* captured first */
    TC_OK(acg_runner_destroy(r));

    /* The first bucket by memory, (2, 64): another rank's warm-up failed. */
    o = (others){.lower_at = CALL_FIRST_BUCKET, .lower_index = 0, .lower_to = 0};
    TC_OK(create_with(f, &o, &r));
    acg_bucket_report rep = report(r, LARGEST);
    assert_int_equal(rep.state, ACG_BUCKET_DROPPED);
    assert_non_null(strstr(rep.reason, "another rank, whose warm-up failed"));
    TC_OK(acg_runner_destroy(r));

    /* The second, (4, 16): another rank's memory cannot hold it. */
    o = (others){.lower_at = CALL_FIRST_BUCKET + 1, .lower_index = 1, .lower_to = 0};
    TC_OK(create_with(f, &o, &r));
    rep = report(r, 1);
    assert_int_equal(rep.state, ACG_BUCKET_DROPPED);
    assert_non_null(strstr(rep.reason, "budget: dropped on another rank"));
    assert_int_equal(report(r, LARGEST).state, ACG_BUCKET_CAPTURED);
    TC_OK(acg_runner_destroy(r));

    for (int at = 1; at <= CALLS; at++) {
        o = (others){.fail_at = at};
        r = NULL;
        TC_EXPECT(ERR_COMM, create_with(f, &o, &r));
        assert_null(r);
        TC_LAST_ERROR_HAS("the other ranks left");
    }
    tc_log_capture_end();
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, tc_fixture_teardown)
static const struct CMUnitTest tests[] = {
    T(test_pool_reuses_every_chunk), T(test_pool_holds_the_largest), T(test_report_sizes),
    T(test_warm_up_failure),         T(test_ranks_agree_on_memory),
};
#undef T
TC_MAIN("test_graph_memory", tests)
