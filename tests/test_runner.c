/*
 * test_runner.c — capture runners: bucket selection and slots, replay equal to eager (whole and
 * piecewise), the all-or-nothing capture policy, the graph switches, the capture budget, and
 * agreement between ranks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

#include "common.h"
#include "core/acg-impl.h" /* acg__device_set_free_memory */

#define N 16384 /* floats per row */

/* ---- the recipe: y = 2 (x + 1) with a temporary the size of a bucket's rows ---------------- */

typedef struct model {
    tc_kernels k;
    uint32_t fail_mask; /* captures of buckets whose batch has a bit in it fail (0: none) */
    int fail_slot;      /* only in this slot (-1: every slot) */
    bool refuse;        /* can_capture says no */
} model;

static size_t rows_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    (void)i;
    return (size_t)b->batch * N * sizeof(float);
}

static bool can_capture(void *user, const acg_capability *cap, char *why, size_t size) {
    model *m = user;
    (void)cap;
    if (m->refuse) {
        snprintf(why, size, "the test recipe refuses");
    }
    return !m->refuse;
}

/* Makes the capture of the failing bucket do what a capture forbids: a host synchronization. */
static acg_status maybe_fail(model *m, acg_stream *s, const acg_step_io *io) {
    acg_capture_state state;
    acg_stream_get_capture_state(s, &state);
    if (state == ACG_CAPTURE_ACTIVE && (io->bucket->batch & m->fail_mask) != 0 &&
        (m->fail_slot < 0 || (uint32_t)m->fail_slot == io->slot)) {
        return acg_stream_synchronize(s);
    }
    return ACG_OK;
}

static acg_status forward(void *user, acg_stream *s, const acg_step_io *io) {
    model *m = user;
    uint32_t n = io->bucket->batch * N;
    acg_buffer *tmp = NULL;
    acg_status st = maybe_fail(m, s, io);
    if (st == ACG_OK) {
        st = acg_stream_alloc(s, (size_t)n * sizeof(float), &tmp);
    }
    if (st == ACG_OK) {
        st = tc_twice_x_plus_one(s, &m->k, io->outputs[0], io->inputs[0], tmp, n);
    }
    if (tmp != NULL) {
        acg_stream_free(s, tmp);
    }
    return st;
}

/* Piecewise: region 0 y = x + 1; eager y = y + 0.5; region 1 y = 2x + y. */
static acg_status region(void *user, uint32_t r, acg_stream *s, const acg_step_io *io) {
    model *m = user;
    uint32_t n = io->bucket->batch * N;
    acg_status st = maybe_fail(m, s, io);
    if (st != ACG_OK) {
        return st;
    }
    return r == 0 ? tc_add(s, &m->k, io->outputs[0], 0, io->inputs[0], 0, n, 1.0f)
                  : tc_axpy(s, &m->k, io->outputs[0], 0, io->inputs[0], 0, n, 2.0f);
}

static acg_status between(void *user, uint32_t after, acg_stream *s, const acg_step_io *io) {
    model *m = user;
    (void)after;
    uint32_t n = io->bucket->batch * N;
    return tc_add(s, &m->k, io->outputs[0], 0, io->outputs[0], 0, n, 0.5f);
}

static acg_recipe make_recipe(model *m) {
    acg_recipe r = tc_recipe("test", m, rows_bytes, forward);
    r.can_capture = can_capture;
    r.n_regions = 2;
    r.region = region;
    r.between = between;
    return r;
}

static const acg_bucket_key three[] = {
    {"decode", 0, 1, 1}, {"decode", 0, 8, 8}, {"decode", 0, 4, 4}};

/* Cases that need graphs check that a device without them says so, then stop, skipped. Past
 * this point the case holds nothing but the fixture's objects. */
#define NEED_GRAPHS_DEV(dev, s) tc_need_graphs((dev), (s))

typedef struct fx {
    tc_fixture t; /* the device under test, a stream, the built-in kernels */
    model m;
    acg_recipe recipe;
} fx;

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->m.k = f->t.k;
    f->m.fail_slot = -1;
    f->recipe = make_recipe(&f->m);
    *state = f;
    return 0;
}

static acg_runner_config config(fx *f, const acg_bucket_key *b, uint32_t n, acg_graph_mode g) {
    return tc_runner_config(&f->recipe, b, n, f->t.s, g);
}

/* Bucket b of r is in `state`, with a reason that contains `reason` (unless NULL); returns its
 * report for what else a case checks. */
static acg_bucket_report expect_bucket(acg_runner *r, uint32_t b, acg_bucket_state state,
                                       const char *reason) {
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    TC_OK(acg_runner_get_report(r, b, &rep));
    assert_int_equal(rep.state, state);
    if (reason != NULL) {
        assert_non_null(strstr(rep.reason, reason));
    }
    return rep;
}

/* Runs one step of bucket b with input row values x = i + seed, returns the output. */
static void step(fx *f, acg_runner *r, uint32_t b, float seed, float *out, size_t count) {
    acg_lease lease;
    TC_OK(acg_runner_lease(r, b, &lease));
    float *x = malloc(count * sizeof *x);
    for (size_t i = 0; i < count; i++) {
        x[i] = (float)(i % 1000) * 0.25f + seed;
    }
    tc_upload(f->t.s, lease.io.inputs[0], x, count * sizeof *x);
    TC_OK(acg_runner_run(r, &lease, f->t.s));
    tc_download(f->t.s, out, lease.io.outputs[0], count * sizeof *out);
    TC_OK(acg_runner_release(r, &lease));
    free(x);
}

/* Every bucket's replay equals the eager runner's output bit for bit, in both slots. */
static void check_against_eager(fx *f, acg_runner *r, const acg_bucket_key *b, uint32_t n,
                                bool piecewise) {
    acg_runner_config c = config(f, b, n, ACG_GRAPHS_OFF);
    c.piecewise = piecewise;
    acg_runner *eager;
    TC_OK(acg_runner_create(f->t.dev, &c, &eager));
    for (uint32_t i = 0; i < n; i++) {
        size_t count = (size_t)b[i].batch * N;
        float *got = malloc(count * sizeof *got), *want = malloc(count * sizeof *want);
        for (int rep = 0; rep < 3; rep++) { /* slots 0, 1, 0 */
            step(f, r, i, (float)rep, got, count);
            step(f, eager, i, (float)rep, want, count);
            TC_BYTES_EQUAL(want, got, count * sizeof *got);
        }
        free(got);
        free(want);
    }
    TC_OK(acg_runner_destroy(eager));
}

/* Selection picks the tightest bucket; slots rotate; replay equals eager; graph memory stays
 * that of the largest bucket (smaller ones reuse the pool). */
static void test_whole_runner(void **state) {
    fx *f = *state;
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_ON);
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    assert_int_equal(acg_runner_get_bucket_count(r), 3);
    uint32_t b;
    TC_OK(acg_runner_select(r, "decode", 0, 3, 3, &b));
    assert_int_equal(b, 2); /* batch 4 */
    TC_OK(acg_runner_select(r, "decode", 0, 1, 1, &b));
    assert_int_equal(b, 0);
    TC_OK(acg_runner_select(r, "decode", 0, 8, 1, &b));
    assert_int_equal(b, 1);
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_select(r, "decode", 0, 9, 1, &b));
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_select(r, "prefill", 0, 1, 1, &b));
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_select(r, "decode", 7, 1, 1, &b));
    acg_lease l0, l1, l2;
    TC_OK(acg_runner_lease(r, 2, &l0));
    TC_OK(acg_runner_lease(r, 2, &l1));
    /* Both slots are held: a third lease waits for a release. */
    TC_EXPECT(ERR_IN_USE, acg_runner_lease(r, 2, &l2));
    acg_lease first = l0;
    TC_OK(acg_runner_release(r, &first));
    TC_OK(acg_runner_lease(r, 2, &l2));
    assert_int_equal(l0.slot, 0);
    assert_int_equal(l1.slot, 1);
    assert_int_equal(l2.slot, 0);
    assert_true(l0.graphed);
    assert_ptr_not_equal(l0.io.inputs[0], l1.io.inputs[0]); /* inputs per slot */
    assert_ptr_equal(l0.io.outputs[0], l1.io.outputs[0]);   /* outputs shared */
    assert_non_null(l0.slot_free);                          /* one event per slot */
    assert_ptr_not_equal(l0.slot_free, l1.slot_free);
    assert_ptr_equal(l0.slot_free, l2.slot_free);
    TC_OK(acg_runner_release(r, &l1));
    TC_OK(acg_runner_release(r, &l2));
    for (uint32_t i = 0; i < 3; i++) {
        const acg_bucket_report rep = expect_bucket(r, i, ACG_BUCKET_CAPTURED, NULL);
        assert_string_equal(rep.key.label, "decode");
        assert_true(rep.eager_peak >= (uint64_t)three[i].batch * N * sizeof(float));
    }
    size_t pool = 0;
    TC_OK(acg_runner_get_pool_bytes(r, &pool));
    size_t largest = 2 * (size_t)8 * N * sizeof(float); /* its temporary and output */
    assert_true(pool >= largest);
    assert_true(pool < largest + largest / 2); /* not the sum over buckets */
    check_against_eager(f, r, three, 3, false);
    TC_OK(acg_runner_destroy(r));
}

static void test_piecewise_runner(void **state) {
    fx *f = *state;
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_ON);
    c.piecewise = true;
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    check_against_eager(f, r, three, 3, true);
    float out[N];
    step(f, r, 0, 1.0f, out, N);
    float x = 1.0f; /* row 0: x = 0 * 0.25 + 1 */
    float want = 2.0f * x + ((x + 1.0f) + 0.5f);
    assert_memory_equal(&out[0], &want, sizeof want);
    TC_OK(acg_runner_destroy(r));
}

/* A recipe that cannot be captured is refused before anything is allocated. */
static void test_refused_before_allocating(void **state) {
    fx *f = *state;
    f->m.refuse = true;
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m0));
    uint64_t host0 = tc_alloc_count();
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_ON);
    acg_runner *r = NULL;
    TC_EXPECT(ERR_UNSUPPORTED, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("acg_runner_create");
    assert_null(r);
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m1));
    assert_int_equal(m1.allocations, m0.allocations);
    assert_int_equal(tc_alloc_count(), host0);
    c.piecewise = true;
    TC_EXPECT(ERR_UNSUPPORTED, acg_runner_create(f->t.dev, &c, &r));
    /* Graphs off: nothing to refuse. */
    c.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    TC_OK(acg_runner_destroy(r));
    /* A destroyed runner is a dead handle, not a use after free. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_destroy(r));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_select(r, "decode", 0, 1, 1, &(uint32_t){0}));
    assert_int_equal(acg_runner_get_bucket_count(r), 0);
    f->m.refuse = false;
    /* Bad configurations. */
    c = config(f, three, 0, ACG_GRAPHS_ON);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    c = config(f, three, 3, ACG_GRAPHS_ON);
    c.n_slots = 3;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, NULL, &r));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_create(NULL, &c, &r));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_select(NULL, "decode", 0, 1, 1, &(uint32_t){0}));
}

/* A failing bucket is dropped whole, logged, served eagerly, and the buckets captured after
 * it are unaffected; two failures then a success leave the stream and pool usable. */
static void test_failed_buckets_dropped(void **state) {
    fx *f = *state;
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    static const acg_bucket_key four[] = {
        {"decode", 0, 8, 8}, {"decode", 0, 4, 4}, {"decode", 0, 2, 2}, {"decode", 0, 1, 1}};
    f->m.fail_mask = 8 | 4; /* the first two capture attempts fail, then 2 and 1 succeed */
    acg_runner_config c = config(f, four, 4, ACG_GRAPHS_ON);
    tc_log_capture_begin(ACG_LOG_ERROR);
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    expect_bucket(r, 0, ACG_BUCKET_DROPPED, "acg_stream_synchronize");
    expect_bucket(r, 1, ACG_BUCKET_DROPPED, NULL);
    for (uint32_t i = 2; i < 4; i++) {
        expect_bucket(r, i, ACG_BUCKET_CAPTURED, NULL);
    }
    assert_true(tc_log_find("served eagerly", NULL));
    tc_log_capture_end();
    TC_EXPECT_CAPTURE_STATE(f->t.s, NONE);
    check_against_eager(f, r, four, 4, false);
    TC_OK(acg_runner_destroy(r));

    /* A bucket that fails in one slot only is dropped whole. */
    f->m.fail_mask = 4;
    f->m.fail_slot = 1;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    expect_bucket(r, 1, ACG_BUCKET_DROPPED, NULL);
    acg_lease l;
    TC_OK(acg_runner_lease(r, 1, &l));
    assert_false(l.graphed);
    expect_bucket(r, 0, ACG_BUCKET_CAPTURED, NULL);
    TC_OK(acg_runner_destroy(r));

    /* Required graphs: the same drop is an error naming the bucket and the reason. */
    c.graphs = ACG_GRAPHS_REQUIRE;
    r = NULL;
    acg_status st = acg_runner_create(f->t.dev, &c, &r);
    assert_true(st != ACG_OK);
    assert_null(r);
    TC_LAST_ERROR_HAS("required");
    TC_LAST_ERROR_HAS("batch 4");
    TC_LAST_ERROR_HAS("acg_stream_synchronize");
    f->m.fail_mask = 0;
    f->m.fail_slot = -1;
    TC_OK(acg_runner_create(f->t.dev, &c, &r)); /* and without failures it starts */
    TC_OK(acg_runner_destroy(r));
}

/* Graphs off (by config or ACG_DISABLE_GRAPHS): no graph, no allocation at creation. */
static void test_graphs_off(void **state) {
    fx *f = *state;
    for (int use_env = 0; use_env < 2; use_env++) {
        acg_runner_config c = config(f, three, 3, use_env ? ACG_GRAPHS_AUTO : ACG_GRAPHS_OFF);
        if (use_env) {
            setenv("ACG_DISABLE_GRAPHS", "1", 1);
        }
        acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
        TC_OK(acg_device_get_memory_stats(f->t.dev, &m0));
        acg_runner *r;
        TC_OK(acg_runner_create(f->t.dev, &c, &r));
        unsetenv("ACG_DISABLE_GRAPHS");
        TC_OK(acg_device_get_memory_stats(f->t.dev, &m1));
        assert_int_equal(m1.allocations, m0.allocations);
        size_t pool = 1;
        TC_OK(acg_runner_get_pool_bytes(r, &pool));
        assert_int_equal(pool, 0);
        expect_bucket(r, 1, ACG_BUCKET_EAGER, NULL);
        float out[N];
        step(f, r, 0, 0.0f, out, N);
        float want = 2.0f * (0.0f + 1.0f);
        assert_memory_equal(&out[0], &want, sizeof want);
        TC_OK(acg_runner_destroy(r));
    }
}

/* Buckets {32, 16, 8, 1} under a limit that leaves room for the pool of bucket 8 only: the
 * two largest are dropped for the budget, exactly the largest eager peak stays free, and a
 * second runner sees only what the first left. */
static void test_budget(void **state) {
    fx *f = *state;
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    static const acg_bucket_key four[] = {
        {"decode", 0, 32, 32}, {"decode", 0, 16, 16}, {"decode", 0, 8, 8}, {"decode", 0, 1, 1}};
    const uint64_t row = (uint64_t)N * sizeof(float);
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m0));
    uint64_t statics = 3 * 32 * row; /* two slots of inputs and one output at batch 32 */
    uint64_t reserve = 32 * row;     /* the largest eager step's temporary */
    uint64_t pool8 = 2 * 8 * row;    /* bucket 8's temporary and output scratch */
    acg_runner_config c = config(f, four, 4, ACG_GRAPHS_ON);
    c.memory_limit = m0.bytes_in_use + statics + reserve + pool8;
    acg_runner *r;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    acg_bucket_state want[] = {ACG_BUCKET_DROPPED, ACG_BUCKET_DROPPED, ACG_BUCKET_CAPTURED,
                               ACG_BUCKET_CAPTURED};
    for (uint32_t i = 0; i < 4; i++) {
        expect_bucket(r, i, want[i], want[i] == ACG_BUCKET_DROPPED ? "budget" : NULL);
    }
    TC_OK(acg_device_get_memory_stats(f->t.dev, &m1));
    assert_int_equal(m1.bytes_in_use + reserve, c.memory_limit);
    check_against_eager(f, r, four + 2, 2, false); /* buckets 8 and 1 still replay right */

    /* A second runner under the same limit: what the first took is gone. */
    static const acg_bucket_key small[] = {{"decode", 0, 8, 8}};
    acg_runner_config c2 = config(f, small, 1, ACG_GRAPHS_ON);
    c2.memory_limit = c.memory_limit;
    acg_runner *r2;
    TC_OK(acg_runner_create(f->t.dev, &c2, &r2));
    expect_bucket(r2, 0, ACG_BUCKET_DROPPED, "budget");
    TC_OK(acg_runner_destroy(r2));
    TC_OK(acg_runner_destroy(r));
}

/* A runner outside the fixture (a rank's thread, an allocation-failure run), on the device under
 * test opened afresh with a stream and the built-in kernels; the caller sets m's failures. */
typedef struct own_runner {
    acg_device *dev;
    acg_stream *s;
    model m;
    acg_recipe recipe;
    acg_runner *r;
} own_runner;

/* Which built-in kernels own_runner_open loads: the first n of add_scalar_f32, axpy_f32,
 * copy_f32 and fill_f32. An allocation-failure sweep's life loads only what its model launches,
 * so that its count of allocation points (and the threshold it checks) is the runner's. */
enum own_kernels {
    OWN_NO_KERNELS = 0,      /* a life that never runs the model */
    OWN_FORWARD_KERNELS = 3, /* what forward launches */
    OWN_ALL_KERNELS = 4,
};

/* Opens o's device and stream, loads `kernels` and creates the runner over the buckets b[0, n)
 * with graphs g, memory_limit and comm. Returns the first failure; what was made before it is
 * o's, for own_runner_close. */
static acg_status own_runner_open(own_runner *o, enum own_kernels kernels, const acg_bucket_key *b,
                                  uint32_t n, acg_graph_mode g, uint64_t memory_limit,
                                  const acg_comm *comm) {
    static const char *const names[4] = {"add_scalar_f32", "axpy_f32", "copy_f32", "fill_f32"};
    acg_kernel **const loaded[4] = {&o->m.k.add, &o->m.k.axpy, &o->m.k.copy, &o->m.k.fill};
    acg_status st = acg_device_open(tc_spec(), &o->dev);
    if (st == ACG_OK) {
        st = acg_stream_create(o->dev, &o->s);
    }
    for (int i = 0; i < (int)kernels && st == ACG_OK; i++) {
        st = acg_kernel_get(o->dev, names[i], loaded[i]);
    }
    o->recipe = make_recipe(&o->m);
    acg_runner_config c = tc_runner_config(&o->recipe, b, n, o->s, g);
    c.memory_limit = memory_limit;
    c.comm = comm;
    if (st == ACG_OK) {
        st = acg_runner_create(o->dev, &c, &o->r);
    }
    return st;
}

/* Destroys what own_runner_open made (their statuses are not what is under test) and returns
 * the device's close: what a run left behind keeps the device open. */
static acg_status own_runner_close(own_runner *o) {
    acg_runner_destroy(o->r);
    acg_stream_destroy(o->s);
    return o->dev != NULL ? acg_device_close(o->dev) : ACG_OK;
}

/* ---- two ranks in one process --------------------------------------------------------------- */

typedef struct ranks {
    pthread_barrier_t barrier;
    pthread_mutex_t lock;
    int32_t values[2][8];
    int barriers[2];
} ranks;

typedef struct rank {
    ranks *shared;
    int id;
    acg_status status;
    acg_bucket_state states[3];
    char reasons[3][256];
    acg_graph_mode mode;   /* 0: ACG_GRAPHS_ON */
    uint64_t memory_limit; /* 0: the device's */
    uint32_t fail_mask;    /* the batches whose captures fail on this rank (model.fail_mask) */
} rank;

static acg_status fake_barrier(void *user) {
    rank *me = user;
    me->shared->barriers[me->id]++;
    pthread_barrier_wait(&me->shared->barrier);
    return ACG_OK;
}

static acg_status fake_min(void *user, int32_t *v, size_t n) {
    rank *me = user;
    ranks *sh = me->shared;
    memcpy(sh->values[me->id], v, n * sizeof *v);
    pthread_barrier_wait(&sh->barrier);
    for (size_t i = 0; i < n; i++) {
        v[i] = sh->values[0][i] < sh->values[1][i] ? sh->values[0][i] : sh->values[1][i];
    }
    pthread_barrier_wait(&sh->barrier);
    return ACG_OK;
}

static void *run_rank(void *arg) {
    rank *me = arg;
    own_runner o = {.m = {.fail_mask = me->fail_mask, .fail_slot = -1}};
    acg_comm comm = ACG_COMM_INIT;
    comm.user = me;
    comm.barrier = fake_barrier;
    comm.allreduce_min_i32 = fake_min;
    me->status = own_runner_open(&o, OWN_ALL_KERNELS, three, 3,
                                 me->mode != 0 ? me->mode : ACG_GRAPHS_ON, me->memory_limit, &comm);
    for (uint32_t i = 0; me->status == ACG_OK && i < 3; i++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        acg_runner_get_report(o.r, i, &rep);
        me->states[i] = rep.state;
        snprintf(me->reasons[i], sizeof me->reasons[i], "%s", rep.reason);
    }
    own_runner_close(&o);
    return NULL;
}

/* Runs both ranks as configured; their statuses and reports land in r. */
static void run_two(rank r[2], ranks *sh) {
    memset(sh, 0, sizeof *sh);
    pthread_barrier_init(&sh->barrier, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        r[i].shared = sh;
        r[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, run_rank, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    pthread_barrier_destroy(&sh->barrier);
}

/* Ranks agree. A bucket dropped on one rank is dropped on both, and both pass the same
 * barriers; a bucket one rank's memory cannot hold is dropped on every rank before anyone
 * captures it (a rank that skipped it would skip the warm-ups' collectives the others run);
 * ranks whose environments resolve the graph mode differently fail the creation with
 * ACG_ERR_COMM. Rank 0 runs with the defaults, rank 1 as each row says. */
static void test_ranks_agree(void **state) {
    fx *f = *state;
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    static const struct {
        const char *what;           /* the row, printed before its checks */
        rank second;                /* rank 1's settings */
        acg_status status;          /* both ranks' creation */
        acg_bucket_state states[3]; /* both ranks' buckets (batch 1, 8 and 4), when created */
        const char *reasons[2];     /* in rank 0's and rank 1's reasons (NULL: unchecked) */
        int barriers;               /* each rank passed (0: unchecked) */
    } rows[] = {
        {"only rank 1 fails bucket 4",
         {.fail_mask = 4},
         ACG_OK,
         {ACG_BUCKET_CAPTURED, ACG_BUCKET_CAPTURED, ACG_BUCKET_DROPPED},
         {NULL, NULL},
         3},
        {"nothing fits on rank 1",
         {.memory_limit = 1},
         ACG_OK,
         {ACG_BUCKET_DROPPED, ACG_BUCKET_DROPPED, ACG_BUCKET_DROPPED},
         {"another rank", "budget"},
         0},
        {"rank 1 with graphs off", {.mode = ACG_GRAPHS_OFF}, ACG_ERR_COMM, {0}, {NULL, NULL}, 0},
    };
    for (size_t row = 0; row < sizeof rows / sizeof rows[0]; row++) {
        ranks sh;
        rank r[2] = {{0}, rows[row].second};
        print_message("ranks agree, row %zu: %s\n", row, rows[row].what);
        run_two(r, &sh);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(r[i].status, rows[row].status);
            for (int b = 0; r[i].status == ACG_OK && b < 3; b++) {
                assert_int_equal(r[i].states[b], rows[row].states[b]);
                if (rows[row].reasons[i] != NULL) {
                    assert_non_null(strstr(r[i].reasons[b], rows[row].reasons[i]));
                }
            }
            if (rows[row].barriers != 0) {
                assert_int_equal(sh.barriers[i], rows[row].barriers);
            }
        }
    }
}

/* A whole life of a runner with graphs required, so that a capture that runs out of memory
 * fails the creation instead of being served eagerly. */
static acg_status runner_life(void *ctx) {
    (void)ctx;
    static const acg_bucket_key two[] = {{"decode", 0, 2, 2}, {"decode", 0, 1, 1}};
    own_runner o = {.m = {.fail_slot = -1}};
    acg_status st = own_runner_open(&o, OWN_FORWARD_KERNELS, two, 2, ACG_GRAPHS_REQUIRE, 0, NULL);
    acg_lease lease;
    if (st == ACG_OK) {
        st = acg_runner_lease(o.r, 0, &lease);
    }
    if (st == ACG_OK) {
        st = acg_runner_run(o.r, &lease, o.s);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(o.s);
    }
    own_runner_close(&o);
    return st;
}

/* With graphs off the first lease claims the static buffers. When that runs out of memory, the
 * next lease claims them afresh: nothing of the failed claim may stay behind (leaked, or still
 * the runner's and so never freed, which keeps the device from closing). */
static acg_status lazy_claim_life(void *ctx) {
    (void)ctx;
    own_runner o = {.m = {.fail_slot = -1}};
    acg_status st = own_runner_open(&o, OWN_NO_KERNELS, three, 3, ACG_GRAPHS_OFF, 0, NULL);
    acg_lease lease;
    acg_status first = ACG_OK;
    if (st == ACG_OK) {
        first = acg_runner_lease(o.r, 1, &lease);
        /* Whatever the first lease met, the second has the memory (the fault is one shot). */
        if (first != ACG_OK) {
            st = acg_runner_lease(o.r, 1, &lease);
        }
    }
    if (st == ACG_OK) {
        st = acg_runner_release(o.r, &lease);
    }
    if (st == ACG_OK) {
        st = acg_runner_destroy(o.r);
        o.r = NULL;
    }
    acg_status closed = own_runner_close(&o);
    if (st == ACG_OK && closed != ACG_OK) {
        st = closed; /* what a failed claim left behind keeps the device open */
    }
    return st == ACG_OK ? first : st;
}

static void test_lazy_claim_retry(void **state) {
    (void)state;
    tc_alloc_sweep_case("lazy claim", lazy_claim_life, NULL, true, 10);
}

/* Every allocation of a runner's life fails in turn: a clean ACG_ERR_OUT_OF_MEMORY (or a
 * recovery: a stream-ordered free waits instead of deferring), and no leak. */
static void test_alloc_fail(void **state) {
    (void)state;
    tc_alloc_sweep_case("runner", runner_life, NULL, true, 50);
}

/* ACG_NUM_SLOTS, read when the config gives n_slots 0, is parsed strictly: a value past 32 bits,
 * trailing junk, a sign or no number at all is refused with the variable and the value named,
 * never wrapped or cut to a number of slots. */
static void test_num_slots_env(void **state) {
    fx *f = *state;
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_OFF);
    assert_int_equal(c.n_slots, 0);
    static const char *const bad[] = {"4294967297", "2junk", "-1", "abc", "0", "3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(setenv("ACG_NUM_SLOTS", bad[i], 1), 0);
        acg_runner *r = NULL;
        acg_status st = acg_runner_create(f->t.dev, &c, &r);
        unsetenv("ACG_NUM_SLOTS");
        if (st != ACG_ERR_INVALID_ARGUMENT) {
            print_error("ACG_NUM_SLOTS=%s: %s\n", bad[i], acg_status_name(st));
        }
        assert_int_equal(st, ACG_ERR_INVALID_ARGUMENT);
        assert_null(r);
        char want[64];
        snprintf(want, sizeof want, "ACG_NUM_SLOTS=%s is not", bad[i]);
        TC_LAST_ERROR_HAS(want);
        TC_LAST_ERROR_HAS("[1, 2]");
    }
    /* A valid value is taken; a config's own n_slots ignores the variable. */
    assert_int_equal(setenv("ACG_NUM_SLOTS", "1", 1), 0);
    acg_runner *r = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    acg_lease one, two;
    TC_OK(acg_runner_lease(r, 0, &one));
    TC_EXPECT(ERR_IN_USE, acg_runner_lease(r, 0, &two)); /* one slot, as the variable said */
    TC_OK(acg_runner_release(r, &one));
    TC_OK(acg_runner_destroy(r));
    assert_int_equal(setenv("ACG_NUM_SLOTS", "abc", 1), 0);
    c.n_slots = 2;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    unsetenv("ACG_NUM_SLOTS");
    TC_OK(acg_runner_destroy(r));
}

/* Issue 9, defect 9: a released, copied-after-release, forged or foreign lease is refused
 * before anything runs, and a slot is never leased twice. */
static void test_lease_tracking(void **state) {
    fx *f = *state;
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_OFF);
    c.n_slots = 1;
    acg_runner *r = NULL, *other = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    TC_OK(acg_runner_create(f->t.dev, &c, &other));
    acg_lease lease, copy, again;
    TC_OK(acg_runner_lease(r, 0, &lease));
    copy = lease;
    TC_EXPECT(ERR_IN_USE, acg_runner_lease(r, 0, &again)); /* its only slot is held */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_run(other, &lease, f->t.s)); /* foreign */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_release(other, &lease));
    TC_OK(acg_runner_release(r, &lease));
    assert_int_equal(lease.ticket, 0);
    /* The copy still names the released lease: nothing may run, nothing may be queued. */
    float marker = 42.0f, out = 0.0f;
    TC_OK(acg_copy_h2d(f->t.s, copy.io.outputs[0], 0, &marker, sizeof marker));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_run(r, &copy, f->t.s));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_release(r, &copy));
    TC_LAST_ERROR_HAS("not held");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_run(r, &lease, f->t.s)); /* zeroed */
    acg_lease forged = copy;
    forged.ticket = copy.ticket + 1000;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_run(r, &forged, f->t.s));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_copy_d2h(f->t.s, &out, copy.io.outputs[0], 0, sizeof out));
    assert_true(out == marker);
    /* The slot is free again, and a new lease runs. */
    TC_OK(acg_runner_lease(r, 0, &again));
    TC_OK(acg_runner_run(r, &again, f->t.s));
    TC_OK(acg_runner_release(r, &again));
    TC_OK(acg_stream_synchronize(f->t.s));
    TC_OK(acg_runner_destroy(other));
    TC_OK(acg_runner_destroy(r));
}

/* Issue 9, defect 10: a failing recipe callback is reported with the recipe, the callback and
 * the bucket, and with the detail it set, never with an earlier, unrelated error. */
static int silent_calls;
static acg_status silent_forward(void *user, acg_stream *s, const acg_step_io *io) {
    (void)user, (void)s, (void)io;
    silent_calls++;
    return ACG_ERR_UNSUPPORTED; /* sets no detail */
}

static acg_status talking_forward(void *user, acg_stream *s, const acg_step_io *io) {
    (void)user, (void)s;
    return acg_set_last_error(ACG_ERR_UNSUPPORTED, "the test recipe cannot do batch %u",
                              io->bucket->batch);
}

static void test_recipe_errors(void **state) {
    fx *f = *state;
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_REQUIRE);
    acg_runner *r = NULL;
    f->recipe.forward = silent_forward;
    /* A stale detail from an unrelated failure. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_stream_synchronize(NULL));
    TC_EXPECT(ERR_UNSUPPORTED, acg_runner_create(f->t.dev, &c, &r));
    assert_true(silent_calls > 0);
    TC_LAST_ERROR_HAS("recipe test: forward");
    TC_LAST_ERROR_HAS("set no detail");
    assert_null(strstr(acg_last_error(), "acg_stream_synchronize"));
    f->recipe.forward = talking_forward;
    TC_EXPECT(ERR_UNSUPPORTED, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("the test recipe cannot do batch");
    TC_LAST_ERROR_HAS("recipe test: forward");
    /* Eagerly, at run time, the same. */
    c.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    acg_lease lease;
    TC_OK(acg_runner_lease(r, 0, &lease));
    TC_EXPECT(ERR_UNSUPPORTED, acg_runner_run(r, &lease, f->t.s));
    TC_LAST_ERROR_HAS("the test recipe cannot do batch 1");
    TC_OK(acg_runner_release(r, &lease));
    TC_OK(acg_runner_destroy(r));
    assert_int_equal(acg_set_last_error(ACG_ERR_INTERNAL, NULL), ACG_ERR_INTERNAL);
}

/* An older caller's recipe ends at forward and its runner config at stream: the fields past
 * their sizes take their defaults, whatever the caller's memory holds there. Too short a recipe
 * or comm, a recipe without a name and a comm without either callback are refused before
 * anything runs, and a bucket report is written only up to an older caller's size. */
static void test_struct_versions(void **state) {
    fx *f = *state;
    acg_runner *r = NULL;
    acg_recipe old_recipe = f->recipe;
    old_recipe.size = offsetof(acg_recipe, n_regions); /* its regions are past its size */
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_OFF);
    c.recipe = &old_recipe;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    TC_OK(acg_runner_destroy(r));
    c.piecewise = true; /* the regions the old recipe cannot have */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("recipe test has no regions");

    acg_runner_config old_config = config(f, three, 3, ACG_GRAPHS_OFF);
    old_config.size = offsetof(acg_runner_config, n_slots);
    old_config.n_slots = 7; /* past its size: the default (0) is used */
    acg_status want = tc_cap()->graphs ? ACG_OK : ACG_ERR_UNSUPPORTED; /* graphs: the default */
    acg_status got = acg_runner_create(f->t.dev, &old_config, &r);
    assert_int_equal(got, want);
    if (got == ACG_OK) {
        TC_OK(acg_runner_destroy(r));
    }

    acg_runner *const untouched = (acg_runner *)(uintptr_t)0x51;
    r = untouched;
    c = config(f, three, 3, ACG_GRAPHS_OFF);
    old_recipe.size = offsetof(acg_recipe, forward);
    c.recipe = &old_recipe;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("acg_recipe.size is");
    old_recipe = f->recipe;
    old_recipe.name = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("the recipe has no name");
    c.recipe = &f->recipe;

    acg_comm comm = ACG_COMM_INIT;
    comm.allreduce_min_i32 = fake_min;
    c.comm = &comm;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("the comm has no barrier callback");
    comm.barrier = fake_barrier;
    comm.allreduce_min_i32 = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("the comm has no allreduce_min_i32 callback");
    comm.allreduce_min_i32 = fake_min;
    comm.size = offsetof(acg_comm, allreduce_min_i32); /* both callbacks are required */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("acg_comm.size is");
    comm.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_create(f->t.dev, &c, &r));
    TC_LAST_ERROR_HAS("acg_comm.size is 0");
    assert_ptr_equal(r, untouched);

    c.comm = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    acg_bucket_report rep;
    memset(&rep, 0, sizeof rep);
    rep.reason[0] = 'x';
    rep.size = offsetof(acg_bucket_report, reason);
    TC_OK(acg_runner_get_report(r, 1, &rep));
    assert_int_equal(rep.size, offsetof(acg_bucket_report, reason));
    assert_string_equal(rep.key.label, "decode");
    assert_int_equal(rep.key.batch, 8);
    assert_int_equal(rep.state, ACG_BUCKET_EAGER);
    assert_int_equal(rep.reason[0], 'x'); /* past the caller's size: untouched */
    rep.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_get_report(r, 1, &rep));
    TC_LAST_ERROR_HAS("acg_runner_get_report: out->size is 0");
    TC_OK(acg_runner_destroy(r));
}

/* Where the driver tells its free memory, a capture that would not fit in it is dropped, even
 * under a generous limit. */
static void test_budget_driver_free(void **state) {
    fx *f = *state;
    uint64_t free_bytes = 0, total = 0;
    if (acg_device_get_memory_info(f->t.dev, &free_bytes, &total) != ACG_OK) {
        /* only the limit applies (test_budget) */
        tc_skip("the driver does not tell its free memory");
    }
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);
    acg__device_set_free_memory(f->t.dev, 1024); /* far less than any bucket needs */
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_ON);
    acg_runner *r = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    for (uint32_t b = 0; b < 3; b++) {
        expect_bucket(r, b, ACG_BUCKET_DROPPED, "the driver has 1024 bytes free");
    }
    TC_OK(acg_runner_destroy(r));
    acg__device_set_free_memory(f->t.dev, 0);
}

/* Whether graph g's DOT text holds needle. */
static bool dot_has(const acg_graph *g, const char *needle) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    TC_OK(acg_graph_write_dot(g, f, 0));
    fclose(f);
    bool found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

/* A bucket's captured graph, one per slot (and region), owned by the runner; every refusal with
 * its status and detail, and the out-parameter untouched by each. */
static void test_get_graph(void **state) {
    fx *f = *state;
    const acg_graph *g = NULL, *sentinel = (const acg_graph *)&g;
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_get_graph(NULL, 0, 0, 0, &g));
    TC_LAST_ERROR_HAS("acg_runner_get_graph");

    /* Graphs off: every bucket is served eagerly and has no graph. */
    acg_runner_config c = config(f, three, 3, ACG_GRAPHS_OFF);
    c.n_slots = 2;
    acg_runner *r = NULL;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    g = sentinel;
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_get_graph(r, 1, 0, 0, &g));
    TC_LAST_ERROR_HAS("bucket 1 (decode, batch 8, tokens 8) has no graph: graphs are off");
    assert_ptr_equal(g, sentinel);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, 3, 0, 0, &g));
    TC_LAST_ERROR_HAS("bucket 3 is out of range (the runner's: 0..2)");
    TC_OK(acg_runner_destroy(r));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_runner_get_graph(r, 0, 0, 0, &g));
    assert_ptr_equal(g, sentinel);
    NEED_GRAPHS_DEV(f->t.dev, f->t.s);

    /* Whole steps, bucket batch 4 dropped: one graph per slot of each captured bucket. */
    f->m.fail_mask = 4;
    c.graphs = ACG_GRAPHS_ON;
    tc_log_capture_begin(ACG_LOG_ERROR); /* the drop is logged; keep it off the output */
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    tc_log_capture_end();
    f->m.fail_mask = 0;
    const acg_graph *g0 = NULL, *g1 = NULL, *again = NULL;
    TC_OK(acg_runner_get_graph(r, 0, 0, 0, &g0));
    TC_OK(acg_runner_get_graph(r, 0, 1, 0, &g1));
    TC_OK(acg_runner_get_graph(r, 0, 0, 0, &again));
    assert_non_null(g0);
    assert_non_null(g1);
    assert_ptr_not_equal(g0, g1);
    assert_ptr_equal(g0, again);
    assert_ptr_equal(acg_graph_get_device(g0), f->t.dev);
    /* The forward's add, copy and axpy, then the copy of the output out of graph scratch. */
    tc_expect_node_count(g0, 4);
    assert_int_equal(tc_node(g0, 3).kind, ACG_NODE_COPY_D2D);
    assert_true(dot_has(g0, "copy d2d"));
    TC_OK(acg_runner_get_graph(r, 1, 1, 0, &g));
    assert_ptr_not_equal(g, g0);
    g = sentinel;
    TC_EXPECT(ERR_NOT_FOUND, acg_runner_get_graph(r, 2, 0, 0, &g));
    TC_LAST_ERROR_HAS("bucket 2 (decode, batch 4, tokens 4) has no graph: it was dropped");
    TC_LAST_ERROR_HAS("acg_stream_synchronize"); /* the report's reason */
    assert_ptr_equal(g, sentinel);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, UINT32_MAX, 0, 0, &g));
    TC_LAST_ERROR_HAS("bucket 4294967295 is out of range (the runner's: 0..2)");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, 0, 2, 0, &g));
    TC_LAST_ERROR_HAS("slot 2 is out of range (the runner's: 0..1)");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, 0, 0, 1, &g));
    TC_LAST_ERROR_HAS("region 1 is out of range (the runner's: 0..0)");
    assert_ptr_equal(g, sentinel);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_runner_get_graph(r, 0, 0, 0, NULL));
    TC_LAST_ERROR_HAS("out is NULL");
    /* The runner owns its graphs: they still serve steps after being looked at. */
    check_against_eager(f, r, three, 2, false);
    TC_OK(acg_runner_destroy(r));

    /* Piecewise: one graph per region, region 0 adding, region 1 an axpy. */
    c.piecewise = true;
    c.n_slots = 1;
    TC_OK(acg_runner_create(f->t.dev, &c, &r));
    const acg_graph *p0 = NULL, *p1 = NULL;
    TC_OK(acg_runner_get_graph(r, 2, 0, 0, &p0));
    TC_OK(acg_runner_get_graph(r, 2, 0, 1, &p1));
    assert_ptr_not_equal(p0, p1);
    const acg_node_info n0 = tc_node(p0, 0), n1 = tc_node(p1, 0);
    assert_int_equal(n0.kind, ACG_NODE_KERNEL);
    assert_int_equal(n1.kind, ACG_NODE_KERNEL);
    assert_string_not_equal(n0.kernel, n1.kernel);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, 2, 0, 2, &g));
    TC_LAST_ERROR_HAS("region 2 is out of range (the runner's: 0..1)");
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_runner_get_graph(r, 2, 1, 0, &g));
    TC_LAST_ERROR_HAS("slot 1 is out of range (the runner's: 0..0)");
    TC_OK(acg_runner_destroy(r));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, tc_fixture_teardown)
static const struct CMUnitTest tests[] = {
    T(test_whole_runner),
    T(test_piecewise_runner),
    T(test_refused_before_allocating),
    T(test_failed_buckets_dropped),
    T(test_graphs_off),
    T(test_budget),
    T(test_ranks_agree),
    cmocka_unit_test(test_alloc_fail),
    cmocka_unit_test(test_lazy_claim_retry),
    T(test_lease_tracking),
    T(test_recipe_errors),
    T(test_budget_driver_free),
    T(test_num_slots_env),
    T(test_struct_versions),
    T(test_get_graph),
};
#undef T
TC_MAIN("test_runner", tests)
