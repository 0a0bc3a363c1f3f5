/*
 * test_collective.c — process groups and allreduce, with ranks forked from the test and joined
 * through tests/fork_comm (no MPI needed; tests/mpi runs the same calls under mpirun):
 *   - the sum equals the rank-order sum computed here, bit for bit, on every rank, in shared
 *     memory and through the comm (ACG_CPU_ALLREDUCE=host), over several rounds of the shared
 *     block; captured, every replay equals the eager result bit for bit;
 *   - a rank that exits makes the others' allreduce fail with ACG_ERR_COMM at once, and a rank
 *     that never comes makes it fail after ACG_COMM_TIMEOUT_MS; the group then refuses more;
 *   - ranks that allreduce different counts all fail with ACG_ERR_COMM naming two counts, with
 *     their buffers unchanged, eager and in a graph, in shared memory and through the comm;
 *   - the shared segment's name is gone once the group exists;
 *   - bad input, and a device without collectives (ACG_ERR_UNSUPPORTED).
 * Ranks other than 0 are child processes: they check with CHECK (no cmocka) and report through
 * their exit status, which rank 0 asserts.
 */
#include "common.h"
#include "fork_comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 100000 /* floats: more than one round of the shared block (64 Ki floats) */

/* Rank r's input: values whose sum depends on the order they are added in. */
static float input(int r, size_t i) {
    const float big[3] = {1e8f, 1.0f, -1e8f};
    return big[r % 3] + (float)((i * 7u + (size_t)r * 13u) % 101u) * 0.37f;
}

/* The sum over n_ranks of input(r, i), added in rank order. */
static float expected(int n_ranks, size_t i) {
    float v = input(0, i);
    for (int r = 1; r < n_ranks; r++) {
        v += input(r, i);
    }
    return v;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- one rank's work ----------------------------------------------------------------------- */

typedef struct rank_env {
    acg_device *dev;
    acg_stream *s;
    acg_buffer *buf;
    float *host, *out; /* pinned: a capture's upload source and download destination */
    acg_device_group *group;
} rank_env;

static int rank_open(rank_env *e, fc_group *fc) {
    memset(e, 0, sizeof *e);
    CHECK(acg_device_open(tc_spec(), &e->dev) == ACG_OK);
    CHECK(acg_stream_create(e->dev, &e->s) == ACG_OK);
    CHECK(acg_buffer_alloc(e->dev, N * sizeof(float), &e->buf) == ACG_OK);
    CHECK(acg_pinned_alloc(e->dev, N * sizeof(float), (void **)&e->host) == ACG_OK);
    CHECK(acg_pinned_alloc(e->dev, N * sizeof(float), (void **)&e->out) == ACG_OK);
    CHECK(acg_device_group_create(e->dev, fc_comm(fc), &e->group) == ACG_OK);
    return 0;
}

static void rank_close(rank_env *e) {
    acg_device_group_destroy(e->group);
    acg_pinned_free(e->out);
    acg_pinned_free(e->host);
    acg_buffer_free(e->buf);
    acg_stream_destroy(e->s);
    acg_device_close(e->dev);
}

/* Uploads this rank's input. */
static int put_input(rank_env *e, int rank) {
    for (size_t i = 0; i < N; i++) {
        e->host[i] = input(rank, i);
    }
    CHECK(acg_copy_h2d(e->s, e->buf, 0, e->host, N * sizeof(float)) == ACG_OK);
    return 0;
}

/* What one rank does, on its rank_env e, as rank `rank` of n_ranks through fc: 0 when it
 * passed, else the failed CHECK's line. */
typedef int (*rank_fn)(rank_env *e, fc_group *fc, int rank, int n_ranks);

/* Eager, then captured and replayed twice: every result is the rank-order sum. */
static int rank_sums(rank_env *e, fc_group *fc, int rank, int n_ranks) {
    int32_t r = -1, n = -1;
    CHECK(acg_device_group_get_rank(e->group, &r, &n) == ACG_OK && r == rank && n == n_ranks);
    CHECK(!tc_shm_segment_named(fc_pid(fc, 0))); /* unnamed once every rank mapped it */
    int bad = put_input(e, rank);
    if (bad != 0) {
        return bad;
    }
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, N) == ACG_OK);
    float *eager = malloc(N * sizeof *eager);
    CHECK(eager != NULL);
    CHECK(acg_copy_d2h(e->s, eager, e->buf, 0, N * sizeof(float)) == ACG_OK);
    for (size_t i = 0; i < N; i++) {
        float want = expected(n_ranks, i);
        CHECK(memcmp(&eager[i], &want, sizeof want) == 0);
    }
    /* A capture: upload, allreduce of a window, download. */
    acg_graph *g = NULL;
    CHECK(acg_stream_begin_capture(e->s, NULL) == ACG_OK);
    for (size_t i = 0; i < N; i++) {
        e->host[i] = input(rank, i);
    }
    CHECK(acg_copy_h2d(e->s, e->buf, 0, e->host, N * sizeof(float)) == ACG_OK);
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, N) == ACG_OK);
    CHECK(acg_copy_d2h(e->s, e->out, e->buf, 0, N * sizeof(float)) == ACG_OK);
    CHECK(acg_stream_end_capture(e->s, &g) == ACG_OK);
    CHECK(acg_device_group_destroy(e->group) == ACG_ERR_IN_USE); /* the graph holds it */
    for (int k = 0; k < 2; k++) {
        memset(e->out, 0, N * sizeof(float));
        CHECK(acg_graph_launch(g, e->s) == ACG_OK);
        CHECK(acg_stream_synchronize(e->s) == ACG_OK);
        CHECK(memcmp(e->out, eager, N * sizeof(float)) == 0);
    }
    CHECK(acg_graph_destroy(g) == ACG_OK);
    free(eager);
    return 0;
}

/* Runs fn on n_ranks forked ranks, each on its own rank_env, with the variable `name` set to
 * `value` (NULL: none) in each; rank 0 asserts, once the variable is gone again, that every rank
 * passed and that the shared segment has no name left. */
static void run_ranks(int n_ranks, rank_fn fn, const char *name, const char *value) {
    fc_group *fc = fc_create(n_ranks, 20000);
    assert_non_null(fc);
    if (name != NULL) {
        setenv(name, value, 1);
    }
    int rank = fc_fork(fc);
    rank_env e;
    int bad = rank_open(&e, fc);
    if (bad == 0) {
        bad = fn(&e, fc, rank, n_ranks);
    }
    rank_close(&e);
    if (rank != 0) {
        _exit(bad != 0);
    }
    int children = fc_wait_children(fc);
    bool named = tc_shm_segment_named(fc_pid(fc, 0));
    fc_destroy(fc);
    if (name != NULL) {
        unsetenv(name);
    }
    assert_int_equal(bad, 0);
    assert_int_equal(children, 0);
    assert_false(named);
}

/* A case needs collectives: a device without them refuses a group, and the case is skipped. */
static void need_collectives(void) {
    if (tc_cap()->collectives) {
        return;
    }
    fc_group *fc = fc_create(1, 1000);
    assert_non_null(fc);
    acg_device *dev = tc_open();
    acg_device_group *g = NULL;
    TC_EXPECT(ERR_UNSUPPORTED, acg_device_group_create(dev, fc_comm(fc), &g));
    tc_close(dev);
    fc_destroy(fc);
    tc_skip("no collectives: a group is refused, as the capability says");
}

/* A case needs more ranks than this process (fc_ranks_can_fork says why not): else skipped. */
static void need_forked_ranks(const char *what) {
    if (!fc_ranks_can_fork(what)) {
        tc_skip("%s: ranks cannot be forked here", what);
    }
}

/* Rank 2 leaves once the group exists; the others' allreduce fails soon, and so does the
 * next one, at once. */
static int rank_exits(rank_env *e, fc_group *fc, int rank, int n_ranks) {
    (void)fc, (void)n_ranks;
    if (rank == 2) {
        _exit(0); /* no goodbye: as a crash would */
    }
    int bad = put_input(e, rank);
    if (bad != 0) {
        return bad;
    }
    double t0 = now_s();
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, N) == ACG_OK);
    CHECK(acg_stream_synchronize(e->s) == ACG_ERR_COMM);
    CHECK(strstr(acg_last_error(), "exited") != NULL || strstr(acg_last_error(), "rank") != NULL);
    CHECK(now_s() - t0 < 10.0);
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, N) == ACG_ERR_COMM);
    return 0;
}

/* Rank 1 is alive but never queues the allreduce: rank 0 gives up after the timeout. */
static int rank_stalls(rank_env *e, fc_group *fc, int rank, int n_ranks) {
    (void)fc, (void)n_ranks;
    if (rank == 1) {
        nanosleep(&(struct timespec){1, 500000000}, NULL);
        return 0;
    }
    double t0 = now_s();
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, 16) == ACG_OK);
    CHECK(acg_stream_synchronize(e->s) == ACG_ERR_COMM);
    CHECK(strstr(acg_last_error(), "ACG_COMM_TIMEOUT_MS") != NULL);
    double took = now_s() - t0;
    CHECK(took >= 0.25 && took < 5.0);
    return 0;
}

/* The mismatch's count on this rank: rank 1 reduces `other` floats, every other rank 16. */
static size_t mismatch_count(int rank, size_t other) { return rank == 1 ? other : 16; }

/* Whether got (buf downloaded) is this rank's input, every float of it: a failed allreduce
 * changes nothing. */
static int input_untouched(int rank, const float *got) {
    for (size_t i = 0; i < N; i++) {
        float want = input(rank, i);
        CHECK(memcmp(&got[i], &want, sizeof want) == 0);
    }
    return 0;
}

/* Whether st is ACG_ERR_COMM with needle in acg_last_error(); else says what came instead. */
static int comm_failed(int rank, acg_status st, const char *needle) {
    if (st != ACG_ERR_COMM || strstr(acg_last_error(), needle) == NULL) {
        fprintf(stderr, "rank %d: %s (\"%s\"), not ACG_ERR_COMM naming \"%s\"\n", rank,
                acg_status_name(st), st != ACG_OK ? acg_last_error() : "", needle);
        return 1;
    }
    return 0;
}

/* Rank 1 reduces more floats than the others: every rank's allreduce fails with ACG_ERR_COMM
 * naming both counts, no rank's buffer changes, and the group refuses more. Captured, the same
 * (there rank 1's count also takes more rounds of the shared block than the others'). */
static int rank_mismatch(rank_env *e, fc_group *fc, int rank, int n_ranks) {
    (void)n_ranks;
    int bad = put_input(e, rank);
    if (bad != 0) {
        return bad;
    }
    static const char named[] = "allreduce: rank 0 reduces 16 floats, rank 1 32";
    CHECK(acg_allreduce(e->s, e->group, e->buf, 0, mismatch_count(rank, 32)) == ACG_OK);
    CHECK(comm_failed(rank, acg_stream_synchronize(e->s), named) == 0);
    CHECK(acg_copy_d2h(e->s, e->out, e->buf, 0, N * sizeof(float)) == ACG_OK);
    CHECK(acg_stream_synchronize(e->s) == ACG_OK);
    if ((bad = input_untouched(rank, e->out)) != 0) {
        return bad;
    }
    /* Broken: refused at once. */
    CHECK(comm_failed(rank, acg_allreduce(e->s, e->group, e->buf, 0, 16), named) == 0);

    /* A second group, in a graph: upload, allreduce, download. */
    acg_device_group *group = NULL;
    CHECK(acg_device_group_create(e->dev, fc_comm(fc), &group) == ACG_OK);
    acg_graph *g = NULL;
    CHECK(acg_stream_begin_capture(e->s, NULL) == ACG_OK);
    CHECK(acg_copy_h2d(e->s, e->buf, 0, e->host, N * sizeof(float)) == ACG_OK);
    CHECK(acg_allreduce(e->s, group, e->buf, 0, mismatch_count(rank, N)) == ACG_OK);
    CHECK(acg_copy_d2h(e->s, e->out, e->buf, 0, N * sizeof(float)) == ACG_OK);
    CHECK(acg_stream_end_capture(e->s, &g) == ACG_OK);
    for (int k = 0; k < 2; k++) { /* the second replay finds the group broken */
        memset(e->out, 0, N * sizeof(float));
        CHECK(acg_graph_launch(g, e->s) == ACG_OK);
        CHECK(comm_failed(rank, acg_stream_synchronize(e->s),
                          "allreduce: rank 0 reduces 16 floats, rank 1 100000") == 0);
        if ((bad = input_untouched(rank, e->out)) != 0) {
            return bad;
        }
    }
    CHECK(acg_graph_destroy(g) == ACG_OK);
    CHECK(acg_device_group_destroy(group) == ACG_OK);
    return 0;
}

/* A case needs the backend under test to check the ranks' counts: the cpu backend does; NCCL
 * does not (acg.h, acg_allreduce), so on cuda such ranks may hang or get wrong sums. */
static void need_count_checks(void) {
    if (!tc_backend_is("cpu")) {
        tc_skip("allreduces of different counts: only the cpu backend finds them (NCCL checks "
                "no counts)");
    }
}

/* ---- the cases of forked ranks ------------------------------------------------------------ */

/* A case of forked ranks: fn on each count of ranks in `ranks` (ended by 0), with the variable
 * `env` set to `value` (NULL: none). It needs collectives, forked ranks for a count over one
 * (`what` says for what), and with count_checks a backend that checks the ranks' counts. */
typedef struct ranks_case {
    rank_fn fn;
    int ranks[4];
    const char *what;
    const char *env, *value;
    bool count_checks;
} ranks_case;

static void run_ranks_case(const ranks_case *c) {
    need_collectives();
    if (c->count_checks) {
        need_count_checks();
    }
    for (const int *n = c->ranks; *n != 0; n++) {
        if (*n > 1) {
            need_forked_ranks(c->what);
        }
        run_ranks(*n, c->fn, c->env, c->value);
    }
}

/* The sums, in shared memory: one rank, then forked ones. */
static void test_sums(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_sums, .ranks = {1, 2, 3}, .what = "sums over 2 and 3 ranks"};
    run_ranks_case(&c);
}

/* The same through the comm (what ranks on several hosts use): the same bits. */
static void test_sums_host(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_sums,
                          .ranks = {3},
                          .what = "sums through the comm over 3 ranks",
                          .env = "ACG_CPU_ALLREDUCE",
                          .value = "host"};
    run_ranks_case(&c);
}

/* A rank that exits: rank 1 passes, rank 2 exits with 0. */
static void test_rank_exits(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_exits, .ranks = {3}, .what = "a rank that exits"};
    run_ranks_case(&c);
}

/* A rank that stalls, against a timeout of 300 ms. */
static void test_timeout(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_stalls,
                          .ranks = {2},
                          .what = "a rank that stalls",
                          .env = "ACG_COMM_TIMEOUT_MS",
                          .value = "300"};
    run_ranks_case(&c);
}

/* Ranks that allreduce different counts. */
static void test_mismatch(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_mismatch,
                          .ranks = {2, 3},
                          .what = "allreduces of different counts",
                          .count_checks = true};
    run_ranks_case(&c);
}

/* The same through the comm: the ranks agree on the count before the data. */
static void test_mismatch_host(void **state) {
    (void)state;
    const ranks_case c = {.fn = rank_mismatch,
                          .ranks = {2, 3},
                          .what = "allreduces of different counts through the comm",
                          .env = "ACG_CPU_ALLREDUCE",
                          .value = "host",
                          .count_checks = true};
    run_ranks_case(&c);
}

/* Refused arguments, one rank (the fixture's buffer y holds 64 bytes). */
static void test_bad_input(void **state) {
    tc_fixture2 *f = *state;
    acg_device *dev = f->t.dev;
    acg_stream *s = f->t.s;
    acg_buffer *buf = f->y;
    need_collectives();
    fc_group *fc = fc_create(1, 1000);
    assert_non_null(fc);
    acg_device_group *g = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, NULL, &g));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, fc_comm(fc), NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_group_create(NULL, fc_comm(fc), &g));
    acg_comm c = *fc_comm(fc);
    c.broadcast = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, &c, &g));
    TC_LAST_ERROR_HAS("broadcast");
    c = *fc_comm(fc);
    c.n_ranks = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, &c, &g));
    c = *fc_comm(fc);
    c.rank = 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, &c, &g));
    c = *fc_comm(fc);
    c.size = offsetof(acg_comm, rank); /* an older caller's comm: no rank, no broadcast */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, &c, &g));
    if (tc_backend_is("cpu")) { /* the cpu backend's choice of transport; cuda's is NCCL */
        setenv("ACG_CPU_ALLREDUCE", "bogus", 1);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_create(dev, fc_comm(fc), &g));
        TC_LAST_ERROR_HAS("ACG_CPU_ALLREDUCE");
        unsetenv("ACG_CPU_ALLREDUCE");
        c = *fc_comm(fc);
        c.allreduce_sum_f32 = NULL;
        setenv("ACG_CPU_ALLREDUCE", "host", 1);
        TC_EXPECT(ERR_UNSUPPORTED, acg_device_group_create(dev, &c, &g));
        unsetenv("ACG_CPU_ALLREDUCE");
    }
    TC_OK(acg_device_group_create(dev, fc_comm(fc), &g));
    int32_t r, n;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_device_group_get_rank(g, NULL, &n));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_group_get_rank(NULL, &r, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_allreduce(s, g, buf, 0, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_allreduce(s, g, buf, 2, 1));
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_allreduce(s, g, buf, 4, 16));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_allreduce(s, NULL, buf, 0, 1));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_allreduce(s, g, NULL, 0, 1));
    /* Another device's buffer and stream. */
    acg_device *other = tc_open();
    acg_stream *s2 = tc_stream(other);
    acg_buffer *b2 = tc_buffer(other, 64);
    TC_EXPECT(ERR_WRONG_DEVICE, acg_allreduce(s, g, b2, 0, 1));
    TC_EXPECT(ERR_WRONG_DEVICE, acg_allreduce(s2, g, b2, 0, 1));
    TC_EXPECT(ERR_IN_USE, acg_device_close(dev)); /* the group lives */
    TC_LAST_ERROR_HAS("device group");
    /* One rank's sum is its own values. */
    float v[16], got[16];
    tc_fill_floats(v, 16, 7);
    tc_upload(s, buf, v, sizeof v);
    TC_OK(acg_allreduce(s, g, buf, 0, 16));
    tc_download(s, got, buf, sizeof got);
    TC_BYTES_EQUAL(v, got, sizeof v);
    TC_OK(acg_device_group_destroy(g));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_device_group_destroy(g));
    TC_OK(acg_device_group_destroy(NULL));
    TC_OK(acg_buffer_free(b2));
    TC_OK(acg_stream_destroy(s2));
    tc_close(other);
    fc_destroy(fc);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sums),          cmocka_unit_test(test_sums_host),
    cmocka_unit_test(test_rank_exits),    cmocka_unit_test(test_timeout),
    cmocka_unit_test(test_mismatch),      cmocka_unit_test(test_mismatch_host),
    TC_FIXTURE2_CASE(test_bad_input, 64),
};
TC_MAIN("test_collective", tests)
