/* test_cuda_nccl.c — the cuda backend's collectives through NCCL (src/backends/cuda/nccl.c),
 * against acg's CUDA test driver and acg's test NCCL (tests/cuda_driver, named by
 * ACG_CUDA_DRIVER and ACG_NCCL_LIBRARY):
 *   - a group of one rank: an eager allreduce leaves the floats as they were and calls
 *     ncclAllReduce once; a captured one is a node of the graph (ACG_NODE_COLLECTIVE) that each
 *     replay runs without calling NCCL again, which holds the group, and that an update takes
 *     from the new capture's own CUDA graph (another buffer, other pinned memory: the replay
 *     matches the same work done eagerly, bit for bit), instantiating again when CUDA refuses;
 *   - two ranks: the test NCCL refuses them at initialization; acg says so with NCCL's words,
 *     makes no group and leaves nothing behind;
 *   - a device fault (CUDA's sticky error): an allreduce and a group's making say
 *     ACG_ERR_DEVICE_LOST naming it, a group's destroy aborts the communicator;
 *   - each NCCL call failing (injected), a CUDA call inside NCCL failing, an asynchronous error,
 *     the comm's callbacks failing or another rank failing before or during the
 *     initialization, every allocation of a group failing: a clean status naming what failed,
 *     no communicator or driver object left, the device usable afterwards;
 *   - the test NCCL's own out-of-place allreduce, a copy in stream order;
 *   - without a usable NCCL (--expect-no-collectives TEXT; one process per condition, since a
 *     process loads NCCL once): no collectives, the capability's detail says why, a group is
 *     refused with ACG_ERR_UNSUPPORTED;
 *   - --device-check: a group of one rank, eager and captured, through acg's public API only,
 *     for a real GPU with the real NCCL (scripts/device-check.sh); here it runs on the test
 *     libraries like the rest. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <acg/acg.h>

#include "backend_scene.h" /* bs_backend_opens */
#include "backends/cuda/nccl_abi.h"
#include "common.h"      /* TC_OK */
#include "cuda_native.h" /* CU_TEST_DRIVER, cu_entry */

#define N 256

/* ---- the test libraries' control functions ------------------------------------------------ */

static bs_driver drv = CU_TEST_DRIVER;

/* The test NCCL's controls, and the NCCL calls an engine makes itself. */
static struct {
    void *h;
    void (*inject)(const char *name, unsigned nth, int code);
    unsigned long (*calls)(const char *name);
    unsigned long (*runs)(void);
    long (*live)(void);
    void (*set_async_error)(int code);
    void (*reset)(void);
    acg_nccl_get_unique_id_fn get_id;
    acg_nccl_comm_init_rank_fn init;
    acg_nccl_all_reduce_fn all_reduce;
    acg_nccl_comm_destroy_fn destroy;
} nc;

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) {
        fail_msg("no %s in the test library", name);
    }
    return p;
}

/* Binds the libraries the backend loaded (a cuda device must have been opened once). */
static void bind_libraries(void) {
    bs_driver_bind(&drv);
    nc.h = dlopen(getenv("ACG_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(nc.h);
    *(void **)&nc.inject = sym(nc.h, "acgtest_nccl_fail");
    *(void **)&nc.calls = sym(nc.h, "acgtest_nccl_calls");
    *(void **)&nc.runs = sym(nc.h, "acgtest_nccl_runs");
    *(void **)&nc.live = sym(nc.h, "acgtest_nccl_live");
    *(void **)&nc.set_async_error = sym(nc.h, "acgtest_nccl_set_async_error");
    *(void **)&nc.reset = sym(nc.h, "acgtest_nccl_reset_counts");
    *(void **)&nc.get_id = sym(nc.h, "ncclGetUniqueId");
    *(void **)&nc.init = sym(nc.h, "ncclCommInitRank");
    *(void **)&nc.all_reduce = sym(nc.h, "ncclAllReduce");
    *(void **)&nc.destroy = sym(nc.h, "ncclCommDestroy");
    dlclose(nc.h); /* the backend's reference keeps it loaded */
}

/* ---- a comm in one process ------------------------------------------------------------------ */

/* The callbacks of a comm whose other ranks, if any, are imagined: a broadcast gives a rank
 * other than the root what the last root of the process broadcast, a minimum is this rank's own
 * value, unless the test makes another rank say no (min_zero_at: that call's minimum is 0) or
 * the comm itself fail; its barrier, tc_one_rank_barrier, returns at once. */
typedef struct test_comm {
    int32_t rank;
    int min_calls;
    int min_zero_at;         /* 0: never */
    int min_fail_at;         /* 0: never; else that call returns ACG_ERR_COMM */
    acg_status broadcast_st; /* what broadcast returns */
    size_t id_bytes;         /* of the last broadcast */
} test_comm;

static unsigned char root_data[ACG_NCCL_UNIQUE_ID_BYTES]; /* what the last root broadcast */

static acg_status tc_min(void *user, int32_t *values, size_t n) {
    test_comm *t = user;
    t->min_calls++;
    if (t->min_calls == t->min_fail_at) {
        return ACG_ERR_COMM;
    }
    if (t->min_calls == t->min_zero_at) {
        for (size_t i = 0; i < n; i++) {
            values[i] = 0;
        }
    }
    return ACG_OK;
}

static acg_status tc_broadcast(void *user, void *data, size_t bytes, int32_t root) {
    test_comm *t = user;
    assert_int_equal(root, 0);
    assert_int_equal(bytes, sizeof root_data);
    t->id_bytes = bytes;
    if (t->rank == root) {
        memcpy(root_data, data, bytes);
    } else {
        memcpy(data, root_data, bytes);
    }
    return t->broadcast_st;
}

static acg_comm make_comm(test_comm *t, int32_t rank, int32_t n_ranks) {
    memset(t, 0, sizeof *t);
    t->rank = rank;
    return tc_comm(t, rank, n_ranks, tc_one_rank_barrier, tc_min, tc_broadcast);
}

/* ---- a device with a stream and a buffer ---------------------------------------------------- */

/* A buffer and its pinned memory: a capture's upload source and download destination. */
typedef struct memory {
    acg_buffer *buf; /* (N) floats */
    float *host;     /* (N) pinned: uploaded to buf */
    float *out;      /* (N) pinned: buf downloaded */
} memory;

static void memory_open(acg_device *dev, memory *m) {
    m->buf = tc_buffer(dev, N * sizeof(float));
    m->host = tc_pinned(dev, N * sizeof(float));
    m->out = tc_pinned(dev, N * sizeof(float));
}

static void memory_close(memory *m) {
    TC_OK(acg_pinned_free(m->out));
    TC_OK(acg_pinned_free(m->host));
    TC_OK(acg_buffer_free(m->buf));
}

typedef struct env {
    acg_device *dev;
    acg_stream *s;
    memory m; /* buf holds `in`, and so does host */
    float in[N];
    long drv_live, nc_live; /* at the start */
    test_comm t;            /* the comm's imagined ranks */
    acg_comm c;             /* rank 0 of 1, unless a case makes another */
    acg_device_group *g;    /* a case's group */
} env;

static void env_open(env *e) {
    memset(e, 0, sizeof *e);
    TC_OK(acg_device_open("cuda", &e->dev));
    bind_libraries();
    TC_OK(acg_stream_create(e->dev, &e->s));
    memory_open(e->dev, &e->m);
    for (int i = 0; i < N; i++) {
        e->in[i] = (float)(i % 17) * 0.37f - 3.0f + (float)i * 1e-3f;
        e->m.host[i] = e->in[i];
    }
    TC_OK(acg_copy_h2d(e->s, e->m.buf, 0, e->in, sizeof e->in));
    TC_OK(acg_stream_synchronize(e->s));
    e->drv_live = drv.live();
    e->nc_live = nc.live();
    nc.reset();
    e->c = make_comm(&e->t, 0, 1);
}

/* The buffer still holds the input, bit for bit. */
static void expect_unchanged(env *e) {
    float got[N];
    TC_OK(acg_copy_d2h(e->s, got, e->m.buf, 0, sizeof got));
    assert_memory_equal(got, e->in, sizeof got);
}

/* Nothing a group made is left (an object of the driver's or NCCL's). */
static void expect_nothing_left(const env *e) {
    assert_int_equal(nc.live(), e->nc_live);
    assert_int_equal(drv.live(), e->drv_live);
}

static void env_close(env *e) {
    memory_close(&e->m);
    TC_OK(acg_stream_destroy(e->s));
    TC_OK(acg_device_close(e->dev));
}

/* A case's fixture: an env (its comm rank 0 of 1, no group yet); after the case nothing a group
 * made is left, and the env is closed. */
static int env_setup(void **state) {
    env *e = malloc(sizeof *e);
    assert_non_null(e);
    env_open(e);
    *state = e;
    return 0;
}

static int env_teardown(void **state) {
    expect_nothing_left(*state);
    env_close(*state);
    free(*state);
    return 0;
}

/* ---- one rank ---------------------------------------------------------------------------------
 */

/* m's host uploaded to its buf, allreduce of buf, buf downloaded to its out, captured. */
static acg_graph *capture_on(env *e, acg_device_group *g, acg_graph_pool *pool, const memory *m) {
    TC_OK(acg_stream_begin_capture(e->s, pool));
    TC_OK(acg_copy_h2d(e->s, m->buf, 0, m->host, N * sizeof(float)));
    TC_OK(acg_allreduce(e->s, g, m->buf, 0, N));
    TC_OK(acg_copy_d2h(e->s, m->out, m->buf, 0, N * sizeof(float)));
    acg_graph *graph = NULL;
    TC_OK(acg_stream_end_capture(e->s, &graph));
    return graph;
}

/* The same on the env's own buffer and pinned memory. */
static acg_graph *capture(env *e, acg_device_group *g, acg_graph_pool *pool) {
    return capture_on(e, g, pool, &e->m);
}

/* What capture_on's work leaves in m's buf, done eagerly (the download to pageable memory). */
static void eager_on(env *e, acg_device_group *g, const memory *m, float *want) {
    TC_OK(acg_copy_h2d(e->s, m->buf, 0, m->host, N * sizeof(float)));
    TC_OK(acg_allreduce(e->s, g, m->buf, 0, N));
    TC_OK(acg_copy_d2h(e->s, want, m->buf, 0, N * sizeof(float)));
}

static void test_one_rank(void **state) {
    env *e = *state;
    const acg_capability *cap = acg_device_get_capability(e->dev);
    assert_true(cap->collectives);
    assert_non_null(strstr(cap->detail, "collectives: NCCL 2.28.9"));
    TC_OK(acg_device_group_create(e->dev, &e->c, &e->g));
    int32_t rank = -1, n_ranks = -1;
    TC_OK(acg_device_group_get_rank(e->g, &rank, &n_ranks));
    assert_int_equal(rank, 0);
    assert_int_equal(n_ranks, 1);
    /* The broadcast carried the test NCCL's id; two agreements, each said yes. */
    assert_true(e->t.id_bytes == ACG_NCCL_UNIQUE_ID_BYTES && root_data[0] != 0);
    assert_int_equal(e->t.min_calls, 2);
    assert_int_equal(nc.calls("ncclCommInitRank"), 1);
    assert_int_equal(nc.live(), e->nc_live + 1);

    /* Eager: one NCCL call, one run, the floats as they were; a window too. */
    TC_OK(acg_allreduce(e->s, e->g, e->m.buf, 0, N));
    TC_OK(acg_allreduce(e->s, e->g, e->m.buf, 16 * sizeof(float), 8));
    TC_OK(acg_stream_synchronize(e->s));
    assert_int_equal(nc.calls("ncclAllReduce"), 2);
    assert_int_equal(nc.runs(), 2);
    expect_unchanged(e);

    /* Captured: NCCL is called once, at capture, and runs at each replay. */
    acg_graph_pool *pool = NULL;
    TC_OK(acg_graph_pool_create(e->dev, &pool));
    acg_graph *graph = capture(e, e->g, pool);
    assert_int_equal(nc.calls("ncclAllReduce"), 3);
    assert_int_equal(nc.runs(), 2);
    size_t nodes = 0;
    TC_OK(acg_graph_get_node_count(graph, &nodes));
    assert_int_equal(nodes, 3);
    acg_node_info info;
    TC_OK(acg_graph_get_node(graph, 1, &info));
    assert_int_equal(info.kind, ACG_NODE_COLLECTIVE);
    assert_int_equal(info.size, N * sizeof(float));
    TC_EXPECT_HAS(ERR_IN_USE, acg_device_group_destroy(e->g), "allreduce");
    for (int k = 0; k < 2; k++) {
        memset(e->m.out, 0, N * sizeof(float));
        TC_OK(acg_graph_launch(graph, e->s));
        TC_OK(acg_stream_synchronize(e->s));
        assert_memory_equal(e->m.out, e->in, N * sizeof(float));
    }
    assert_int_equal(nc.calls("ncclAllReduce"), 3);
    assert_int_equal(nc.runs(), 4);

    /* An update takes NCCL's work from the new capture's own graph (the ledger cannot rebuild
     * it): the replay reads other pinned memory into another buffer and reduces that, exactly
     * what the same work does eagerly. */
    memory m2;
    memory_open(e->dev, &m2);
    for (int i = 0; i < N; i++) {
        m2.host[i] = e->in[(i * 7) % N] * -2.5f + 0.125f;
    }
    acg_graph *again = capture_on(e, e->g, pool, &m2);
    TC_OK(acg_graph_update(graph, again));
    memset(e->m.out, 0, N * sizeof(float));
    memset(m2.out, 0, N * sizeof(float));
    TC_OK(acg_graph_launch(graph, e->s));
    TC_OK(acg_stream_synchronize(e->s));
    assert_int_equal(nc.runs(), 5);
    float want[N], zero[N];
    memset(zero, 0, sizeof zero);
    eager_on(e, e->g, &m2, want);
    assert_int_equal(nc.runs(), 6);
    assert_int_equal(memcmp(m2.out, want, sizeof want), 0);
    assert_int_equal(memcmp(e->m.out, zero, sizeof zero), 0); /* the old arguments are gone */
    assert_int_equal(nc.calls("ncclAllReduce"), 5);           /* a replay calls no NCCL */

    /* CUDA refusing the update: the graph is instantiated again from the capture, and replays
     * the first arguments again. */
    acg_graph *third = capture(e, e->g, pool);
    unsigned long inst = drv.calls("cuGraphInstantiateWithFlags");
    drv.inject("cuGraphExecUpdate", 1, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    TC_OK(acg_graph_update(graph, third));
    drv.inject(NULL, 0, 0);
    assert_int_equal(drv.calls("cuGraphInstantiateWithFlags"), inst + 1);
    memset(e->m.out, 0, N * sizeof(float));
    memset(m2.out, 0, N * sizeof(float));
    TC_OK(acg_graph_launch(graph, e->s));
    TC_OK(acg_stream_synchronize(e->s));
    eager_on(e, e->g, &e->m, want);
    assert_int_equal(memcmp(e->m.out, want, sizeof want), 0);
    assert_int_equal(memcmp(m2.out, zero, sizeof zero), 0);
    assert_int_equal(nc.runs(), 8);
    TC_OK(acg_graph_destroy(third));
    TC_OK(acg_graph_destroy(again));
    TC_OK(acg_graph_destroy(graph));
    TC_OK(acg_graph_pool_destroy(pool));
    memory_close(&m2);

    TC_OK(acg_device_group_destroy(e->g));
    assert_int_equal(nc.calls("ncclCommDestroy"), 1);
    assert_int_equal(nc.calls("ncclCommAbort"), 0);
}

/* ---- refusals and failures --------------------------------------------------------------------
 */

/* Two ranks: the test NCCL refuses them; the group is not made. */
static void test_two_ranks(void **state) {
    env *e = *state;
    e->c = make_comm(&e->t, 0, 2);
    TC_EXPECT_HAS(ERR_COMM, acg_device_group_create(e->dev, &e->c, &e->g),
                  "ncclCommInitRank failed with ncclInvalidUsage (5): invalid usage");
    assert_non_null(strstr(acg_last_error(), "one rank only"));
    assert_null(e->g);
    assert_int_equal(e->t.min_calls, 2); /* the others learn it too */
    expect_nothing_left(e);
    /* Rank 1 of 2 gets rank 0's id from the broadcast and fails the same way. */
    e->c = make_comm(&e->t, 1, 2);
    TC_EXPECT_HAS(ERR_COMM, acg_device_group_create(e->dev, &e->c, &e->g), "ncclInvalidUsage");
    assert_int_equal(nc.calls("ncclGetUniqueId"), 1); /* rank 0's only */
}

/* NCCL's and CUDA's failures inside the group's making: each says what failed, and nothing is
 * left. */
static void test_create_failures(void **state) {
    env *e = *state;
    static const struct {
        const char *fn;
        int code;
        acg_status want;
        const char *text;
    } cases[] = {
        {"ncclGetUniqueId", ACG_NCCL_SYSTEM_ERROR, ACG_ERR_COMM,
         "ncclGetUniqueId failed with ncclSystemError (2): a system call failed"},
        {"ncclCommInitRank", ACG_NCCL_INTERNAL_ERROR, ACG_ERR_COMM,
         "ncclCommInitRank failed with ncclInternalError (3)"},
        {"ncclCommInitRank", ACG_NCCL_UNHANDLED_CUDA_ERROR, ACG_ERR_DEVICE,
         "ncclCommInitRank failed with ncclUnhandledCudaError (1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        e->c = make_comm(&e->t, 0, 1);
        nc.inject(cases[i].fn, 1, cases[i].code);
        tc_expect_(cases[i].want, acg_device_group_create(e->dev, &e->c, &e->g), cases[i].fn,
                   __FILE__, __LINE__);
        TC_LAST_ERROR_HAS(cases[i].text);
        assert_non_null(strstr(acg_last_error(), "a failure injected by the test"));
        assert_null(e->g);
        assert_int_equal(e->t.min_calls, i == 0 ? 1 : 2);
        expect_nothing_left(e);
    }
    /* The CUDA call the test NCCL makes at initialization fails inside it. */
    e->c = make_comm(&e->t, 0, 1);
    drv.inject("cuEventCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    TC_EXPECT_HAS(ERR_DEVICE, acg_device_group_create(e->dev, &e->c, &e->g),
                  "cuEventCreate failed");
    expect_nothing_left(e);
    /* The device still makes a group. */
    e->c = make_comm(&e->t, 0, 1);
    TC_OK(acg_device_group_create(e->dev, &e->c, &e->g));
    TC_OK(acg_device_group_destroy(e->g));
}

/* The comm fails, or another rank does, before or after NCCL's initialization: every rank
 * fails the group; a communicator made here is aborted. */
static void test_comm_failures(void **state) {
    env *e = *state;
    /* How the comm fails, what the error says, and the NCCL initializations and aborts made
     * by then (-1: not counted). */
    static const struct {
        bool broadcast_fails;
        int min_zero_at, min_fail_at;
        const char *text;
        unsigned long inits;
        long aborts;
    } cases[] = {
        {true, 0, 0, "the comm's broadcast failed", 0, -1},
        {false, 1, 0, "another rank failed before NCCL's initialization", 0, -1},
        {false, 0, 1, "the comm's allreduce_min_i32 failed", 0, -1},
        {false, 2, 0, "NCCL's initialization failed on another rank", 1, 1},
        {false, 0, 2, "the comm's allreduce_min_i32 failed", 2, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        e->c = make_comm(&e->t, 0, 1);
        e->t.broadcast_st = cases[i].broadcast_fails ? ACG_ERR_COMM : ACG_OK;
        e->t.min_zero_at = cases[i].min_zero_at;
        e->t.min_fail_at = cases[i].min_fail_at;
        TC_EXPECT_HAS(ERR_COMM, acg_device_group_create(e->dev, &e->c, &e->g), cases[i].text);
        assert_int_equal(nc.calls("ncclCommInitRank"), cases[i].inits);
        if (cases[i].aborts >= 0) {
            assert_int_equal(nc.calls("ncclCommAbort"), cases[i].aborts);
        }
    }

    /* A local failure is the one reported when the comm fails too. */
    e->c = make_comm(&e->t, 0, 1);
    e->t.broadcast_st = ACG_ERR_COMM;
    nc.inject("ncclGetUniqueId", 1, ACG_NCCL_SYSTEM_ERROR);
    TC_EXPECT_HAS(ERR_COMM, acg_device_group_create(e->dev, &e->c, &e->g),
                  "ncclGetUniqueId failed");
    assert_null(e->g);
}

/* An allreduce that NCCL refuses, or whose CUDA work the stream refuses, or of a communicator
 * that failed asynchronously: the status says which, and the group works on once it passes. */
static void test_allreduce_failures(void **state) {
    env *e = *state;
    TC_OK(acg_device_group_create(e->dev, &e->c, &e->g));

    nc.inject("ncclAllReduce", 1, ACG_NCCL_SYSTEM_ERROR);
    TC_EXPECT_HAS(ERR_COMM, acg_allreduce(e->s, e->g, e->m.buf, 0, N),
                  "acg_allreduce: ncclAllReduce failed with ncclSystemError (2)");
    nc.inject("ncclAllReduce", 1, ACG_NCCL_UNHANDLED_CUDA_ERROR);
    TC_EXPECT_HAS(ERR_DEVICE, acg_allreduce(e->s, e->g, e->m.buf, 0, N), "ncclUnhandledCudaError");
    drv.inject("cuLaunchHostFunc", 1, CUDA_ERROR_INVALID_VALUE);
    TC_EXPECT_HAS(ERR_DEVICE, acg_allreduce(e->s, e->g, e->m.buf, 0, N),
                  "the stream refused the work");
    nc.inject("ncclCommGetAsyncError", 1, ACG_NCCL_INVALID_ARGUMENT);
    TC_EXPECT_HAS(ERR_COMM, acg_allreduce(e->s, e->g, e->m.buf, 0, N),
                  "ncclCommGetAsyncError failed");
    nc.set_async_error(ACG_NCCL_REMOTE_ERROR);
    TC_EXPECT_HAS(ERR_COMM, acg_allreduce(e->s, e->g, e->m.buf, 0, N),
                  "the group failed before: NCCL reports ncclRemoteError (6)");
    nc.set_async_error(ACG_NCCL_SUCCESS);
    TC_OK(acg_stream_synchronize(e->s));
    assert_int_equal(nc.runs(), 0);

    /* Refused inside a capture: the capture ends invalidated with NCCL's words, and the stream
     * works on. */
    TC_OK(acg_stream_begin_capture(e->s, NULL));
    nc.inject("ncclAllReduce", 1, ACG_NCCL_INVALID_USAGE);
    TC_EXPECT_HAS(ERR_COMM, acg_allreduce(e->s, e->g, e->m.buf, 0, N), "ncclInvalidUsage");
    acg_graph *graph = NULL;
    TC_EXPECT_HAS(ERR_COMM, acg_stream_end_capture(e->s, &graph), "ncclAllReduce failed");
    assert_null(graph);

    TC_OK(acg_allreduce(e->s, e->g, e->m.buf, 0, N));
    TC_OK(acg_stream_synchronize(e->s));
    assert_int_equal(nc.runs(), 1);
    expect_unchanged(e);
    TC_OK(acg_device_group_destroy(e->g));
}

/* The device faults (its context holds CUDA_ERROR_ILLEGAL_ADDRESS, set in the test driver as a
 * faulting kernel would): NCCL's CUDA calls fail with it, and an allreduce or a group's making
 * says ACG_ERR_DEVICE_LOST naming it rather than NCCL's ncclUnhandledCudaError alone. The
 * group's destroy aborts the communicator (a destroy would wait for work the fault stopped),
 * and nothing of NCCL's or the driver's is left once the device closes. Each case is the first
 * call after the fault, on a device of its own: the backend's answer, not the core's latch. */
static void test_device_fault(void **state) {
    (void)state;
    acg_device *probe = NULL;
    TC_OK(acg_device_open("cuda", &probe));
    bind_libraries();
    TC_OK(acg_device_close(probe));
    long drv_live = drv.live(), nc_live = nc.live();
    env e;
    for (int round = 0; round < 3; round++) {
        env_open(&e);
        if (round != 1) {
            TC_OK(acg_device_group_create(e.dev, &e.c, &e.g));
        }
        if (round == 2) { /* the device opened again makes a group and reduces */
            TC_OK(acg_allreduce(e.s, e.g, e.m.buf, 0, N));
            TC_OK(acg_stream_synchronize(e.s));
            expect_unchanged(&e);
            TC_OK(acg_device_group_destroy(e.g));
            assert_int_equal(nc.calls("ncclCommDestroy"), 1);
            env_close(&e);
            break;
        }
        drv.fault(0, CUDA_ERROR_ILLEGAL_ADDRESS);
        if (round == 0) {
            TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_allreduce(e.s, e.g, e.m.buf, 0, N),
                          "CUDA_ERROR_ILLEGAL_ADDRESS");
            TC_LAST_ERROR_HAS("ncclAllReduce failed with ncclUnhandledCudaError");
            TC_OK(acg_device_group_destroy(e.g));
            assert_int_equal(nc.calls("ncclCommAbort"), 1);
            assert_int_equal(nc.calls("ncclCommDestroy"), 0);
        } else {
            TC_EXPECT_HAS(ERR_DEVICE_LOST, acg_device_group_create(e.dev, &e.c, &e.g),
                          "CUDA_ERROR_ILLEGAL_ADDRESS");
            TC_LAST_ERROR_HAS("ncclCommInitRank failed with ncclUnhandledCudaError");
            assert_null(e.g);
        }
        assert_int_equal(nc.live(), nc_live);
        env_close(&e); /* the context goes, and its fault with it */
        assert_int_equal(drv.live(), drv_live);
    }
    assert_int_equal(drv.live(), drv_live);
    assert_int_equal(nc.live(), nc_live);
}

/* ---- every allocation of a group failing ------------------------------------------------------
 */

/* A group made and destroyed: under an allocation failure, out of memory with no group and
 * nothing of the driver's or NCCL's left. */
static acg_status group_round_trip(void *ctx) {
    env *e = ctx;
    e->c = make_comm(&e->t, 0, 1);
    acg_status st = acg_device_group_create(e->dev, &e->c, &e->g);
    if (st != ACG_OK) {
        TC_LAST_ERROR_HAS("out of memory");
        assert_null(e->g);
        expect_nothing_left(e);
        return st;
    }
    return acg_device_group_destroy(e->g);
}

/* The nth allocation of a group's making failing, for every n until none fails (the counting
 * allocator's sweep): out of memory, nothing left behind, and the same device then makes the
 * group, which reduces. */
static void test_alloc_failures(void **state) {
    (void)state;
    tc_alloc_install();
    env e;
    env_open(&e);
    assert_true(tc_alloc_sweep(group_round_trip, &e, false) > 0);
    TC_OK(acg_device_group_create(e.dev, &e.c, &e.g));
    TC_OK(acg_allreduce(e.s, e.g, e.m.buf, 0, N));
    TC_OK(acg_device_group_destroy(e.g));
    TC_OK(acg_stream_synchronize(e.s));
    expect_nothing_left(&e);
    env_close(&e);
    tc_alloc_uninstall();
}

/* ---- the test NCCL itself -----------------------------------------------------------------------
 */

/* Out of place, the test NCCL copies in stream order; unknown types and operators are
 * refused. The engine's own NCCL calls on the stream's CUstream would look like this. */
static void test_out_of_place(void **state) {
    env *e = *state;
    cu_engine eng;
    cu_engine_bind(&drv, &eng);
    acg_native_handle native = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(e->s, &native));
    CUstream s = (CUstream)native.handle;

    acg_nccl_unique_id id;
    acg_nccl_comm comm = NULL;
    assert_int_equal(nc.get_id(&id), ACG_NCCL_SUCCESS);
    assert_int_equal(nc.init(&comm, 1, id, 0), ACG_NCCL_SUCCESS); /* acg left its context current */
    CUdeviceptr src = 0, dst = 0;
    assert_int_equal(eng.alloc(&src, sizeof e->in), CUDA_SUCCESS);
    assert_int_equal(eng.alloc(&dst, sizeof e->in), CUDA_SUCCESS);
    float got[N];
    assert_int_equal(eng.h2d(src, e->in, sizeof e->in, s), CUDA_SUCCESS);
    assert_int_equal(nc.all_reduce((void *)(uintptr_t)src, (void *)(uintptr_t)dst, N,
                                   ACG_NCCL_FLOAT32, ACG_NCCL_SUM, comm, s),
                     ACG_NCCL_SUCCESS);
    assert_int_equal(eng.d2h(got, dst, sizeof got, s), CUDA_SUCCESS);
    assert_int_equal(eng.sync(s), CUDA_SUCCESS);
    assert_memory_equal(got, e->in, sizeof got);
    assert_int_equal(nc.runs(), 1);
    assert_int_equal(
        nc.all_reduce((void *)(uintptr_t)src, (void *)(uintptr_t)dst, N, 99, ACG_NCCL_SUM, comm, s),
        ACG_NCCL_INVALID_ARGUMENT);
    assert_int_equal(nc.all_reduce((void *)(uintptr_t)src, (void *)(uintptr_t)dst, N,
                                   ACG_NCCL_FLOAT32, 99, comm, s),
                     ACG_NCCL_INVALID_ARGUMENT);
    memset(&id, 0, sizeof id);
    acg_nccl_comm other = NULL;
    assert_int_equal(nc.init(&other, 1, id, 0), ACG_NCCL_INVALID_ARGUMENT); /* not its id */
    assert_int_equal(nc.destroy(comm), ACG_NCCL_SUCCESS);
    assert_int_equal(nc.destroy(comm), ACG_NCCL_INVALID_ARGUMENT);
    assert_int_equal(eng.release(src), CUDA_SUCCESS);
    assert_int_equal(eng.release(dst), CUDA_SUCCESS);
}

/* ---- without NCCL, and on a real GPU ----------------------------------------------------------
 */

/* No collectives, the detail holding `text`, and a group refused with ACG_ERR_UNSUPPORTED. */
static int expect_no_collectives(const char *text) {
    acg_device *dev = bs_open_or_say("cuda");
    if (dev == NULL) {
        return 1;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    test_comm t;
    acg_comm c = make_comm(&t, 0, 1);
    acg_device_group *g = NULL;
    acg_status st = acg_device_group_create(dev, &c, &g);
    printf("collectives %d: %s\nacg_device_group_create: %s: %s\n", cap->collectives, cap->detail,
           acg_status_name(st), acg_last_error());
    int bad = cap->collectives || strstr(cap->detail, text) == NULL || st != ACG_ERR_UNSUPPORTED ||
              g != NULL || t.min_calls != 0;
    acg_device_group_destroy(g);
    acg_device_close(dev);
    if (bad) {
        fprintf(stderr, "expected no collectives, with \"%s\" in the detail\n", text);
    }
    return bad;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "device check failed at line %d: %s (%s)\n", __LINE__, #cond,          \
                    acg_last_error());                                                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* A group of one rank on cuda:0, through the public API alone: the eager allreduce and the
 * replays of its capture leave the floats as they were (one rank's sum), the graph holds the
 * allreduce as a collective node, and an update from a capture on other memory replays that
 * capture's work, bit for bit what it does eagerly. Exits 77 without NCCL. */
static int device_check(void) {
    acg_device *dev = NULL;
    if (acg_device_open("cuda", &dev) != ACG_OK) {
        printf("skipped: cuda: %s\n", acg_last_error());
        return 77;
    }
    const acg_capability *cap = acg_device_get_capability(dev);
    printf("%s: %s\n", cap->name, cap->detail);
    if (!cap->collectives) {
        printf("skipped: cuda has no collectives here (the detail says why)\n");
        acg_device_close(dev);
        return 77;
    }
    static float in[N], got[N], in2[N];
    for (int i = 0; i < N; i++) {
        in[i] = (float)(i % 17) * 0.37f - 3.0f + (float)i * 1e-3f;
        in2[i] = in[(i * 7) % N] * -2.5f + 0.125f;
    }
    test_comm t;
    acg_comm c = make_comm(&t, 0, 1);
    acg_device_group *g = NULL;
    acg_stream *s = NULL;
    acg_buffer *buf = NULL, *buf2 = NULL;
    float *host = NULL, *out = NULL, *host2 = NULL, *out2 = NULL;
    CHECK(acg_device_group_create(dev, &c, &g) == ACG_OK);
    CHECK(acg_stream_create(dev, &s) == ACG_OK);
    CHECK(acg_buffer_alloc(dev, sizeof in, &buf) == ACG_OK);
    CHECK(acg_buffer_alloc(dev, sizeof in, &buf2) == ACG_OK);
    CHECK(acg_pinned_alloc(dev, sizeof in, (void **)&host) == ACG_OK);
    CHECK(acg_pinned_alloc(dev, sizeof in, (void **)&out) == ACG_OK);
    CHECK(acg_pinned_alloc(dev, sizeof in, (void **)&host2) == ACG_OK);
    CHECK(acg_pinned_alloc(dev, sizeof in, (void **)&out2) == ACG_OK);
    memcpy(host, in, sizeof in);
    memcpy(host2, in2, sizeof in);
    CHECK(acg_copy_h2d(s, buf, 0, in, sizeof in) == ACG_OK);
    CHECK(acg_allreduce(s, g, buf, 0, N) == ACG_OK);
    CHECK(acg_copy_d2h(s, got, buf, 0, sizeof got) == ACG_OK);
    CHECK(memcmp(got, in, sizeof in) == 0);
    acg_graph *graphs[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        CHECK(acg_stream_begin_capture(s, NULL) == ACG_OK);
        CHECK(acg_copy_h2d(s, k ? buf2 : buf, 0, k ? host2 : host, sizeof in) == ACG_OK);
        CHECK(acg_allreduce(s, g, k ? buf2 : buf, 0, N) == ACG_OK);
        CHECK(acg_copy_d2h(s, k ? out2 : out, k ? buf2 : buf, 0, sizeof in) == ACG_OK);
        CHECK(acg_stream_end_capture(s, &graphs[k]) == ACG_OK);
    }
    acg_graph *graph = graphs[0];
    acg_node_info info;
    CHECK(acg_graph_get_node(graph, 1, &info) == ACG_OK && info.kind == ACG_NODE_COLLECTIVE);
    for (int k = 0; k < 2; k++) {
        memset(out, 0, sizeof in);
        CHECK(acg_graph_launch(graph, s) == ACG_OK);
        CHECK(acg_stream_synchronize(s) == ACG_OK);
        CHECK(memcmp(out, in, sizeof in) == 0);
    }
    /* The update: the replay reads host2 into buf2 and leaves out alone. */
    CHECK(acg_graph_update(graph, graphs[1]) == ACG_OK);
    memset(out, 0, sizeof in);
    memset(out2, 0, sizeof in);
    CHECK(acg_graph_launch(graph, s) == ACG_OK);
    CHECK(acg_stream_synchronize(s) == ACG_OK);
    static float zero[N];
    CHECK(memcmp(out, zero, sizeof in) == 0);
    CHECK(acg_copy_h2d(s, buf, 0, in2, sizeof in) == ACG_OK);
    CHECK(acg_allreduce(s, g, buf, 0, N) == ACG_OK);
    CHECK(acg_copy_d2h(s, got, buf, 0, sizeof got) == ACG_OK);
    CHECK(memcmp(out2, got, sizeof in) == 0);
    CHECK(acg_graph_destroy(graphs[1]) == ACG_OK);
    CHECK(acg_graph_destroy(graph) == ACG_OK);
    CHECK(acg_device_group_destroy(g) == ACG_OK);
    CHECK(acg_pinned_free(out2) == ACG_OK);
    CHECK(acg_pinned_free(host2) == ACG_OK);
    CHECK(acg_pinned_free(out) == ACG_OK);
    CHECK(acg_pinned_free(host) == ACG_OK);
    CHECK(acg_buffer_free(buf2) == ACG_OK);
    CHECK(acg_buffer_free(buf) == ACG_OK);
    CHECK(acg_stream_destroy(s) == ACG_OK);
    CHECK(acg_device_close(dev) == ACG_OK);
    printf("ok: one rank's allreduce, eager and captured (2 replays, then an update's), bit for "
           "bit\n");
    return 0;
}

static const bs_mode modes[] = {
    {"--expect-no-collectives", NULL, expect_no_collectives},
    {"--device-check", device_check, NULL},
    {NULL, NULL, NULL},
};

#define T(test) cmocka_unit_test_setup_teardown(test, env_setup, env_teardown)
static const struct CMUnitTest tests[] = {
    T(test_one_rank),
    T(test_two_ranks),
    T(test_create_failures),
    T(test_comm_failures),
    T(test_allreduce_failures),
    T(test_out_of_place),
    cmocka_unit_test(test_device_fault),
    cmocka_unit_test(test_alloc_failures),
};
#undef T

BS_MAIN("cuda", modes, "test_cuda_nccl", tests)
