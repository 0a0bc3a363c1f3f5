/*
 * test_mpi_comm.c — libacg_mpi, the process group over MPI: every callback against what each
 * rank computes locally, the two communicators used from two threads at once, bad input, and
 * (one mode per CTest, each its own mpiexec run) the timeout that breaks a group, MPI without
 * MPI_THREAD_MULTIPLE, MPI initialized and finalized by acg_mpi_comm_default, a rank that exits
 * without MPI_Finalize, and ACG_COMM_TIMEOUT_MS well-formed and not.
 *
 * Every rank runs the same cases in the same order, as collectives need. A case that fails on
 * one rank aborts the job (MPI_Abort) rather than leave the other ranks waiting in a collective
 * it will never join.
 *
 * usage: test_mpi_comm [--timeout | --thread-level-funneled | --uninitialized | --rank-exits |
 *                      --timeout-env MS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <acg/acg_mpi.h>

#include "common.h"
#include "mpi/mpi-impl.h" /* acg_mpi__timeout_ms */

static int rank;
static int n_ranks;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
}

/* Asserts that acg_mpi_last_error() contains needle. */
static void expect_detail(const char *needle) {
    const char *e = acg_mpi_last_error();
    if (strstr(e, needle) == NULL) {
        fail_msg("acg_mpi_last_error() = \"%s\" does not contain \"%s\"", e, needle);
    }
    TC_LAST_ERROR_HAS(needle);
}

/* ---- a failure on one rank ends the job ------------------------------------------------------ */

static bool case_finished;
static bool rank_failed; /* a case failed on this rank: the others may be in its collectives */

/* Once a case failed on this rank, the rest are not run (a collective of theirs could match one
 * the other ranks are still waiting in), and main ends the job once cmocka reported. */
static int start_case(void **state) {
    (void)state;
    case_finished = false;
    return rank_failed ? -1 : 0;
}

/* Each case ends with finished(): a case that did not get there failed an assertion. */
static void finished(void) { case_finished = true; }

static int end_case(void **state) {
    (void)state;
    rank_failed = rank_failed || !case_finished;
    return 0;
}

/* Ends every rank when one failed: the others may wait in a collective it will never join.
 * MPI_Abort, since mpiexec then stops them all at once. */
static int end_job(int failed) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (failed != 0 && initialized && !finalized) {
        fprintf(stderr, "rank %d of %d: %d case(s) failed; aborting every rank\n", rank, n_ranks,
                failed);
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return failed;
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, start_case, end_case)

static acg_mpi_comm *make_group(MPI_Comm comm) {
    acg_mpi_comm *c = NULL;
    TC_OK(acg_mpi_comm_create(comm, &c));
    assert_non_null(c);
    return c;
}

/* A case on a group of every rank: *state is its table (whose user is the group). A failure to
 * make it fails the case on this rank, which ends the job. */
static int start_world_case(void **state) {
    if (start_case(state) != 0) {
        return -1;
    }
    acg_mpi_comm *c = NULL;
    acg_status st = acg_mpi_comm_create(MPI_COMM_WORLD, &c);
    rank_failed = rank_failed || st != ACG_OK;
    TC_OK(st);
    assert_non_null(c);
    *state = (void *)acg_mpi_comm_get(c);
    return 0;
}

/* The group is destroyed after a case that finished; a failed case's is left, as the job ends. */
static int end_world_case(void **state) {
    const acg_comm *t = *state;
    acg_status st = case_finished ? acg_mpi_comm_destroy(t->user) : ACG_OK;
    end_case(state);
    rank_failed = rank_failed || st != ACG_OK;
    TC_OK(st);
    return 0;
}

#define WORLD_CASE(f) cmocka_unit_test_setup_teardown(f, start_world_case, end_world_case)

/* ---- the table ------------------------------------------------------------------------------- */

static void test_table(void **state) {
    (void)state;
    acg_mpi_comm *c = make_group(MPI_COMM_WORLD);
    const acg_comm *t = acg_mpi_comm_get(c);
    assert_non_null(t);
    assert_int_equal(t->size, sizeof(acg_comm));
    assert_ptr_equal(t->user, c);
    assert_int_equal(t->rank, rank);
    assert_int_equal(t->n_ranks, n_ranks);
    assert_non_null(t->barrier);
    assert_non_null(t->allreduce_min_i32);
    assert_non_null(t->broadcast);
    assert_non_null(t->allreduce_sum_f32);
    TC_OK(acg_mpi_comm_destroy(c));

    /* A group of some of the ranks: the even ones and the odd ones, each its own group. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    c = make_group(half);
    t = acg_mpi_comm_get(c);
    assert_int_equal(t->rank, rank / 2);
    assert_int_equal(t->n_ranks, (n_ranks - rank % 2 + 1) / 2);
    int32_t v = rank;
    TC_OK(t->allreduce_min_i32(t->user, &v, 1));
    assert_int_equal(v, rank % 2); /* the lowest rank of its half */
    TC_OK(acg_mpi_comm_destroy(c));
    MPI_Comm_free(&half);
    finished();
}

/* ---- barrier --------------------------------------------------------------------------------- */

/* Nobody leaves the barrier before the last rank entered it: rank 0 enters it 200 ms after
 * leaving a barrier of MPI_COMM_WORLD, which every other rank entered after reading its clock,
 * so each of them sees at least 200 ms pass (whatever the skew between the ranks). */
static void test_barrier(void **state) {
    const acg_comm *t = *state;
    TC_OK(t->barrier(t->user));
    double t0 = now_ms();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        sleep_ms(200);
    }
    TC_OK(t->barrier(t->user));
    if (rank != 0) {
        assert_true(now_ms() - t0 >= 199.0);
    }
    for (int i = 0; i < 20; i++) {
        TC_OK(t->barrier(t->user));
    }
    finished();
}

/* ---- allreduce_min_i32 ----------------------------------------------------------------------- */

static int32_t min_contribution(int r, size_t i) {
    if (i % 5 == 0) {
        return r == (int)(i / 5) % n_ranks ? INT32_MIN : INT32_MAX;
    }
    return (int32_t)((i * 7 + (size_t)r * 13) % 101) - 50;
}

static void check_min(const acg_comm *t, size_t n) {
    int32_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        v[i] = min_contribution(rank, i);
    }
    TC_OK(t->allreduce_min_i32(t->user, v, n));
    for (size_t i = 0; i < n; i++) {
        int32_t want = INT32_MAX;
        for (int r = 0; r < n_ranks; r++) {
            int32_t x = min_contribution(r, i);
            want = x < want ? x : want;
        }
        if (v[i] != want) {
            fail_msg("rank %d: value %zu of %zu is %d, the minimum is %d", rank, i, n, (int)v[i],
                     (int)want);
        }
    }
    free(v);
}

static void test_allreduce_min(void **state) {
    const acg_comm *t = *state;
    check_min(t, 1);
    check_min(t, 17);
    check_min(t, 300000); /* more than one 1 MiB piece */
    TC_OK(t->allreduce_min_i32(t->user, NULL, 0));
    finished();
}

/* ---- broadcast ------------------------------------------------------------------------------- */

static unsigned char pattern(int root, size_t i) {
    return (unsigned char)(i * 31 + (size_t)root * 7 + i / 4099);
}

static void check_broadcast(const acg_comm *t, size_t bytes, int32_t root) {
    unsigned char *p = malloc(bytes);
    assert_non_null(p);
    for (size_t i = 0; i < bytes; i++) {
        p[i] = rank == root ? pattern(root, i) : (unsigned char)(0xa5 ^ rank);
    }
    TC_OK(t->broadcast(t->user, p, bytes, root));
    for (size_t i = 0; i < bytes; i++) {
        if (p[i] != pattern(root, i)) {
            fail_msg("rank %d: byte %zu of %zu from root %d is 0x%02x, not 0x%02x", rank, i, bytes,
                     (int)root, p[i], pattern(root, i));
        }
    }
    free(p);
}

static void test_broadcast(void **state) {
    const acg_comm *t = *state;
    int32_t last = n_ranks - 1;
    check_broadcast(t, 1, 0);
    check_broadcast(t, 65 * 1024 + 1, 0);
    check_broadcast(t, 65 * 1024 + 1, last);
    check_broadcast(t, 3 * 1024 * 1024 + 5, last); /* four 1 MiB pieces, the last short */
    TC_OK(t->broadcast(t->user, NULL, 0, last));
    finished();
}

/* ---- allreduce_sum_f32 ----------------------------------------------------------------------- */

/* Terms whose sum depends on the order of the additions: 1.0f - 1e8f is -1e8f, so three ranks
 * adding {1e8, -1e8, 1} in rank order get 1, and in the reverse order 0. */
static float sum_contribution(int r, size_t i) {
    static const float terms[] = {1e8f, -1e8f, 1.0f, 0.375f, -3.0e7f};
    return terms[((size_t)r + i) % 5] * (float)(1 + i % 7);
}

static float rank_order_sum(size_t i, bool reversed) {
    float v = sum_contribution(reversed ? n_ranks - 1 : 0, i);
    for (int k = 1; k < n_ranks; k++) {
        v += sum_contribution(reversed ? n_ranks - 1 - k : k, i);
    }
    return v;
}

/* The result is the rank-order sum computed here, bit for bit, and rank 0's bits (sent with MPI
 * itself, not through the group under test). */
static void check_sum(const acg_comm *t, size_t n) {
    float *v = malloc(n * sizeof *v);
    float *want = malloc(n * sizeof *want);
    float *first = malloc(n * sizeof *first);
    assert_non_null(v);
    assert_non_null(want);
    assert_non_null(first);
    size_t order_matters = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = sum_contribution(rank, i);
        want[i] = rank_order_sum(i, false);
        float other = rank_order_sum(i, true);
        order_matters += memcmp(&want[i], &other, sizeof other) != 0;
    }
    /* With two ranks a + b == b + a; from three on, the terms make the order visible. */
    if (n_ranks >= 3 && n >= 5) {
        assert_true(order_matters > 0);
    }
    TC_OK(t->allreduce_sum_f32(t->user, v, n));
    TC_BYTES_EQUAL(v, want, n * sizeof *v);
    memcpy(first, v, n * sizeof *v);
    MPI_Bcast(first, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    TC_BYTES_EQUAL(v, first, n * sizeof *v);
    free(first);
    free(want);
    free(v);
}

static void test_allreduce_sum(void **state) {
    const acg_comm *t = *state;
    check_sum(t, 1);
    check_sum(t, 1000);
    check_sum(t, 2 * 65536 + 5); /* three pieces, the last short */
    check_sum(t, 7);             /* a smaller call after the staging grew */
    TC_OK(t->allreduce_sum_f32(t->user, NULL, 0));
    finished();
}

/* ---- counts that differ between ranks -------------------------------------------------------- */

/* Rank 1 passes 32 floats, every other rank 16: every rank fails with ACG_ERR_COMM naming both
 * counts, before any data moved (the values are unchanged), and the group is broken. */
static void test_sum_mismatch(void **state) {
    const acg_comm *t = *state;
    float v[32], before[32];
    for (size_t i = 0; i < 32; i++) {
        v[i] = before[i] = sum_contribution(rank, i);
    }
    TC_EXPECT(ERR_COMM, t->allreduce_sum_f32(t->user, v, rank == 1 ? 32 : 16));
    char text[160];
    snprintf(text, sizeof text,
             "acg_mpi: allreduce_sum_f32: rank %d of %d: rank 0 reduces 16 floats, rank 1 32", rank,
             n_ranks);
    expect_detail(text);
    TC_BYTES_EQUAL(v, before, sizeof v);
    TC_EXPECT(ERR_COMM, t->barrier(t->user));
    expect_detail(
        "the group broke earlier (allreduce_sum_f32: rank 0 reduces 16 floats, rank 1 32");
    finished();
}

/* A cpu device group over this comm, reducing through it (ACG_CPU_ALLREDUCE=host, as ranks on
 * several hosts do): rank 1 allreduces 32 floats, the others 16. Every rank's stream reports
 * ACG_ERR_COMM naming both counts, the buffers are unchanged, the device group refuses more, and
 * the comm itself stays usable (the ranks agreed on the counts through it before any data). */
static void test_group_mismatch(void **state) {
    const acg_comm *t = *state;
    setenv("ACG_CPU_ALLREDUCE", "host", 1);
    acg_device *dev = NULL;
    TC_OK(acg_device_open("cpu:0?threads=1", &dev));
    acg_stream *s = NULL;
    TC_OK(acg_stream_create(dev, &s));
    acg_buffer *buf = NULL;
    TC_OK(acg_buffer_alloc(dev, 32 * sizeof(float), &buf));
    acg_device_group *group = NULL;
    TC_OK(acg_device_group_create(dev, t, &group));
    unsetenv("ACG_CPU_ALLREDUCE");
    float v[32], got[32];
    for (size_t i = 0; i < 32; i++) {
        v[i] = sum_contribution(rank, i);
    }
    TC_OK(acg_copy_h2d(s, buf, 0, v, sizeof v));
    TC_OK(acg_allreduce(s, group, buf, 0, rank == 1 ? 32 : 16));
    TC_EXPECT(ERR_COMM, acg_stream_synchronize(s));
    TC_LAST_ERROR_HAS("allreduce: rank 0 reduces 16 floats, rank 1 32");
    TC_OK(acg_copy_d2h(s, got, buf, 0, sizeof got));
    TC_BYTES_EQUAL(got, v, sizeof v);
    TC_EXPECT(ERR_COMM, acg_allreduce(s, group, buf, 0, 16));
    TC_LAST_ERROR_HAS("rank 0 reduces 16 floats, rank 1 32");
    TC_OK(t->barrier(t->user));
    TC_OK(acg_device_group_destroy(group));
    TC_OK(acg_buffer_free(buf));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_device_close(dev));
    finished();
}

/* ---- the two communicators at once ----------------------------------------------------------- */

typedef struct sum_loop {
    const acg_comm *t;
    int iterations;
    acg_status st;
    int wrong; /* results that differ from the rank-order sum */
} sum_loop;

/* The worker's part, as a stream's worker calls allreduce_sum_f32. */
static void *run_sums(void *arg) {
    sum_loop *s = arg;
    enum { n = 4096 };
    static float v[n];
    s->st = ACG_OK;
    for (int it = 0; it < s->iterations && s->st == ACG_OK; it++) {
        for (size_t i = 0; i < n; i++) {
            v[i] = sum_contribution(rank, i + (size_t)it);
        }
        s->st = s->t->allreduce_sum_f32(s->t->user, v, n);
        for (size_t i = 0; i < n && s->st == ACG_OK; i++) {
            float want = rank_order_sum(i + (size_t)it, false);
            s->wrong += memcmp(&v[i], &want, sizeof want) != 0;
        }
    }
    return NULL;
}

static void test_concurrent(void **state) {
    const acg_comm *t = *state;
    sum_loop s = {t, 60, ACG_OK, 0};
    pthread_t worker;
    assert_int_equal(pthread_create(&worker, NULL, run_sums, &s), 0);
    for (int it = 0; it < 60; it++) {
        TC_OK(t->barrier(t->user));
        int32_t v[3] = {rank + it, -rank, it};
        TC_OK(t->allreduce_min_i32(t->user, v, 3));
        assert_int_equal(v[0], it);
        assert_int_equal(v[1], -(n_ranks - 1));
        assert_int_equal(v[2], it);
    }
    assert_int_equal(pthread_join(worker, NULL), 0);
    TC_OK(s.st);
    assert_int_equal(s.wrong, 0);
    finished();
}

/* ---- bad input ------------------------------------------------------------------------------- */

static void test_bad_input(void **state) {
    (void)state;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_create(MPI_COMM_WORLD, NULL));
    expect_detail("acg_mpi_comm_create: out is NULL");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_default(NULL));
    expect_detail("acg_mpi_comm_default: out is NULL");
    acg_mpi_comm *c = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_create(MPI_COMM_NULL, &c));
    expect_detail("comm is MPI_COMM_NULL");
    assert_null(c);
    TC_OK(acg_mpi_comm_destroy(NULL));
    assert_null(acg_mpi_comm_get(NULL));

    /* An intercommunicator between the even and the odd ranks. */
    if (n_ranks >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_create(inter, &c));
        expect_detail("comm is an intercommunicator");
        assert_null(c);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    /* A callback refused for bad input breaks its group: the call after it fails at once. */
    c = make_group(MPI_COMM_WORLD);
    const acg_comm *t = acg_mpi_comm_get(c);
    TC_EXPECT(ERR_INVALID_ARGUMENT, t->allreduce_min_i32(t->user, NULL, 2));
    expect_detail("allreduce_min_i32: rank");
    expect_detail("values is NULL for 2 values");
    TC_EXPECT(ERR_COMM, t->barrier(t->user));
    expect_detail("barrier: rank");
    expect_detail("the group broke earlier (allreduce_min_i32: values is NULL for 2 values)");
    TC_OK(acg_mpi_comm_destroy(c));

    c = make_group(MPI_COMM_WORLD);
    t = acg_mpi_comm_get(c);
    unsigned char byte = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, t->broadcast(t->user, &byte, 1, n_ranks));
    char text[64];
    snprintf(text, sizeof text, "root %d is not a rank (0 .. %d)", n_ranks, n_ranks - 1);
    expect_detail(text);
    TC_EXPECT(ERR_COMM, t->allreduce_sum_f32(t->user, (float[]){1}, 1));
    expect_detail("the group broke earlier (broadcast: root");
    TC_OK(acg_mpi_comm_destroy(c));

    c = make_group(MPI_COMM_WORLD);
    t = acg_mpi_comm_get(c);
    TC_EXPECT(ERR_INVALID_ARGUMENT, t->broadcast(t->user, &byte, 1, -1));
    expect_detail("root -1 is not a rank");
    TC_OK(acg_mpi_comm_destroy(c));

    c = make_group(MPI_COMM_WORLD);
    t = acg_mpi_comm_get(c);
    TC_EXPECT(ERR_INVALID_ARGUMENT, t->broadcast(t->user, NULL, 3, 0));
    expect_detail("data is NULL for 3 bytes");
    TC_EXPECT(ERR_COMM, t->broadcast(t->user, &byte, 1, 0));
    TC_OK(acg_mpi_comm_destroy(c));

    c = make_group(MPI_COMM_WORLD);
    t = acg_mpi_comm_get(c);
    TC_EXPECT(ERR_INVALID_ARGUMENT, t->allreduce_sum_f32(t->user, NULL, 5));
    expect_detail("allreduce_sum_f32: rank");
    expect_detail("values is NULL for 5 values");
    TC_EXPECT(ERR_COMM, t->allreduce_min_i32(t->user, (int32_t[]){1}, 1));
    TC_OK(acg_mpi_comm_destroy(c));
    finished();
}

/* ---- --timeout: a rank that skips a call ----------------------------------------------------- */

/* Run with two ranks and ACG_COMM_TIMEOUT_MS=500. Rank 1 skips a barrier of group a and an
 * allreduce_sum_f32 of group b; rank 0 gets ACG_ERR_COMM from each after the timeout, and then
 * at once from every call. Rank 1 makes the skipped calls afterwards, which lets the
 * collectives rank 0 left pending complete: the barrier, and the gather of the counts that
 * allreduce_sum_f32 starts with. Rank 1's allreduce_sum_f32 then waits alone for the data and
 * fails after its own timeout, with its values unchanged: a late rank never gets a sum that the
 * others gave up on. */
static void test_timeout(void **state) {
    (void)state;
    assert_int_equal(n_ranks, 2);
    assert_int_equal(acg_mpi__timeout_ms(), 500);
    acg_mpi_comm *a = make_group(MPI_COMM_WORLD);
    acg_mpi_comm *b = make_group(MPI_COMM_WORLD);
    const acg_comm *ta = acg_mpi_comm_get(a);
    const acg_comm *tb = acg_mpi_comm_get(b);
    enum { n = 1000 };
    if (rank == 0) {
        double t0 = now_ms();
        TC_EXPECT(ERR_COMM, ta->barrier(ta->user));
        double waited = now_ms() - t0;
        assert_true(waited >= 500.0 && waited < 20000.0);
        expect_detail("acg_mpi: barrier: rank 0 of 2: no answer from every rank within 500 ms "
                      "(a rank failed or left)");

        /* Broken: every callback fails at once, without waiting for the timeout again. */
        t0 = now_ms();
        TC_EXPECT(ERR_COMM, ta->barrier(ta->user));
        expect_detail("acg_mpi: barrier: rank 0 of 2: the group broke earlier (barrier: no "
                      "answer from every rank within 500 ms (a rank failed or left))");
        int32_t m = 1;
        TC_EXPECT(ERR_COMM, ta->allreduce_min_i32(ta->user, &m, 1));
        TC_EXPECT(ERR_COMM, ta->broadcast(ta->user, &m, sizeof m, 0));
        TC_EXPECT(ERR_COMM, ta->allreduce_sum_f32(ta->user, (float[]){1}, 1));
        expect_detail("allreduce_sum_f32: rank 0 of 2: the group broke earlier (barrier:");
        assert_int_equal(m, 1);
        assert_true(now_ms() - t0 < 450.0);

        /* The worker's communicator times out the same way. The values are freed at once: the
         * collective left pending works on the library's staging, never on them. */
        float *v = malloc(n * sizeof *v);
        assert_non_null(v);
        for (size_t i = 0; i < n; i++) {
            v[i] = 1.0f;
        }
        TC_EXPECT(ERR_COMM, tb->allreduce_sum_f32(tb->user, v, n));
        expect_detail("acg_mpi: allreduce_sum_f32: rank 0 of 2: no answer from every rank "
                      "within 500 ms (a rank failed or left)");
        free(v);
        TC_EXPECT(ERR_COMM, tb->barrier(tb->user));
        expect_detail("the group broke earlier (allreduce_sum_f32: no answer");
        MPI_Send(&m, 1, MPI_INT32_T, 1, 0, MPI_COMM_WORLD);
    } else {
        /* Late: only once rank 0 saw both timeouts. */
        int32_t go = 0;
        MPI_Recv(&go, 1, MPI_INT32_T, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        TC_OK(ta->barrier(ta->user));
        float v[n];
        for (size_t i = 0; i < n; i++) {
            v[i] = 2.0f;
        }
        TC_EXPECT(ERR_COMM, tb->allreduce_sum_f32(tb->user, v, n));
        expect_detail("acg_mpi: allreduce_sum_f32: rank 1 of 2: no answer from every rank "
                      "within 500 ms (a rank failed or left)");
        for (size_t i = 0; i < n; i++) {
            assert_true(v[i] == 2.0f);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    TC_OK(acg_mpi_comm_destroy(a));
    TC_OK(acg_mpi_comm_destroy(b));
    finished();
}

/* ---- --thread-level-funneled ----------------------------------------------------------------- */

/* MPI initialized with MPI_THREAD_FUNNELED (by main): refused, saying what to use. */
static void test_thread_level(void **state) {
    (void)state;
    acg_mpi_comm *c = NULL;
    TC_EXPECT(ERR_UNSUPPORTED, acg_mpi_comm_create(MPI_COMM_WORLD, &c));
    expect_detail("acg_mpi_comm_create: MPI runs with MPI_THREAD_FUNNELED");
    expect_detail("use MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
    /* MPI is the application's: acg_mpi_comm_default uses it as it is, and finalizes nothing. */
    TC_EXPECT(ERR_UNSUPPORTED, acg_mpi_comm_default(&c));
    assert_null(c);
    TC_OK(acg_mpi_finalize());
    int finalized = 1;
    MPI_Finalized(&finalized);
    assert_false(finalized);
    finished();
}

/* ---- --uninitialized: MPI initialized and finalized through acg ------------------------------ */

static void test_uninitialized(void **state) {
    (void)state;
    acg_mpi_comm *c = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_create(MPI_COMM_WORLD, &c));
    expect_detail("acg_mpi_comm_create: MPI is not initialized (initialize it with "
                  "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) first)");
    TC_OK(acg_mpi_finalize()); /* acg initialized nothing yet */

    TC_OK(acg_mpi_comm_default(&c));
    int level = 0;
    MPI_Query_thread(&level);
    assert_int_equal(level, MPI_THREAD_MULTIPLE);
    const acg_comm *t = acg_mpi_comm_get(c);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    assert_int_equal(t->rank, rank);
    assert_int_equal(t->n_ranks, n_ranks);
    check_sum(t, 100);
    TC_OK(acg_mpi_comm_destroy(c));

    /* A second default group uses the MPI the first initialized. */
    TC_OK(acg_mpi_comm_default(&c));
    t = acg_mpi_comm_get(c);
    TC_OK(t->barrier(t->user));
    TC_OK(acg_mpi_comm_destroy(c));

    TC_OK(acg_mpi_finalize());
    int finalized = 0;
    MPI_Finalized(&finalized);
    assert_true(finalized);
    c = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_create(MPI_COMM_WORLD, &c));
    expect_detail("MPI is finalized already");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_mpi_comm_default(&c));
    expect_detail("MPI is finalized already");
    assert_null(c);
    TC_OK(acg_mpi_finalize());
    finished();
}

/* ---- --timeout-env MS: ACG_COMM_TIMEOUT_MS read ---------------------------------------------- */

/* The timeout read from ACG_COMM_TIMEOUT_MS is MS (argv), and stderr says once, however often
 * it is read, when the value was not a number of milliseconds and the default is used. */
static void test_timeout_env(void **state) {
    uint64_t want = strtoull(*state, NULL, 10);
    const char *value = getenv("ACG_COMM_TIMEOUT_MS");
    bool refused = value != NULL && value[0] != '\0' && strcmp(value, *state) != 0;
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(log), STDERR_FILENO) >= 0);
    uint64_t first = acg_mpi__timeout_ms();
    uint64_t second = acg_mpi__timeout_ms();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    assert_int_equal(first, want);
    assert_int_equal(second, want);

    char text[1024] = "";
    rewind(log);
    size_t got = fread(text, 1, sizeof text - 1, log);
    text[got] = '\0';
    fclose(log);
    char message[160] = "";
    if (refused) {
        snprintf(message, sizeof message,
                 "acg_mpi: ACG_COMM_TIMEOUT_MS=%s is not a whole number of milliseconds in "
                 "1 .. 18446744073709; using 60000\n",
                 value);
    }
    assert_string_equal(text, message);
    finished();
}

/* ---- the modes ------------------------------------------------------------------------------- */

static int init_mpi(int argc, char **argv, int level) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    return provided;
}

/* ---- --rank-exits: a rank that leaves -------------------------------------------------------- */

/* Rank 1 exits without MPI_Finalize while the others wait in a barrier for it. They must not
 * wait for ever: mpiexec (Open MPI's) ends the job as soon as a rank exits so, and failing that
 * the barrier returns ACG_ERR_COMM after the timeout. CTest judges the output: either says so. */
static int rank_exits(int argc, char **argv) {
    init_mpi(argc, argv, MPI_THREAD_MULTIPLE);
    acg_mpi_comm *c = NULL;
    acg_status st = acg_mpi_comm_create(MPI_COMM_WORLD, &c);
    const acg_comm *t = acg_mpi_comm_get(c);
    if (st == ACG_OK) {
        st = t->barrier(t->user);
    }
    if (st == ACG_OK && rank == 1) {
        fflush(stdout);
        _exit(0);
    }
    if (st == ACG_OK) {
        st = t->barrier(t->user);
        printf("rank %d: the barrier returned %s: %s\n", rank, acg_status_name(st),
               acg_mpi_last_error());
    } else {
        printf("rank %d: setting up failed: %s: %s\n", rank, acg_status_name(st),
               acg_mpi_last_error());
    }
    fflush(stdout);
    acg_mpi_comm_destroy(c);
    MPI_Finalize();
    return st == ACG_ERR_COMM ? 0 : 1;
}

static char group[64];

static const char *group_name(const char *mode) {
    snprintf(group, sizeof group, "test_mpi_comm%s rank %d", mode, rank);
    return group;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int failed = 0;
    if (strcmp(mode, "--uninitialized") == 0) {
        const struct CMUnitTest tests[] = {CASE(test_uninitialized)};
        return end_job(
            cmocka_run_group_tests_name("test_mpi_comm --uninitialized", tests, NULL, NULL));
    }
    if (strcmp(mode, "--rank-exits") == 0) {
        return rank_exits(argc, argv);
    }
    if (strcmp(mode, "--timeout-env") == 0 && argc == 3) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_prestate(test_timeout_env, argv[2]),
        };
        return cmocka_run_group_tests_name("test_mpi_comm --timeout-env", tests, NULL, NULL);
    }
    if (strcmp(mode, "--thread-level-funneled") == 0) {
        if (init_mpi(argc, argv, MPI_THREAD_FUNNELED) >= MPI_THREAD_MULTIPLE) {
            printf("skipped: this MPI grants MPI_THREAD_MULTIPLE when asked for less\n");
            MPI_Finalize();
            return 77;
        }
        const struct CMUnitTest tests[] = {CASE(test_thread_level)};
        failed =
            cmocka_run_group_tests_name(group_name(" --thread-level-funneled"), tests, NULL, NULL);
    } else if (strcmp(mode, "--timeout") == 0) {
        init_mpi(argc, argv, MPI_THREAD_MULTIPLE);
        const struct CMUnitTest tests[] = {CASE(test_timeout)};
        failed = cmocka_run_group_tests_name(group_name(" --timeout"), tests, NULL, NULL);
    } else if (mode[0] == '\0') {
        if (init_mpi(argc, argv, MPI_THREAD_MULTIPLE) < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "MPI_Init_thread did not grant MPI_THREAD_MULTIPLE\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        const struct CMUnitTest tests[] = {
            CASE(test_table),
            WORLD_CASE(test_barrier),
            WORLD_CASE(test_allreduce_min),
            WORLD_CASE(test_broadcast),
            WORLD_CASE(test_allreduce_sum),
            WORLD_CASE(test_sum_mismatch),
            WORLD_CASE(test_group_mismatch),
            WORLD_CASE(test_concurrent),
            CASE(test_bad_input),
        };
        failed = cmocka_run_group_tests_name(group_name(""), tests, NULL, NULL);
    } else {
        fprintf(stderr,
                "usage: test_mpi_comm [--timeout | --thread-level-funneled | --uninitialized | "
                "--rank-exits | --timeout-env MS]\n");
        return 2;
    }
    end_job(failed);
    MPI_Finalize();
    return failed;
}
