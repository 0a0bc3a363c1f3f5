/*
 * backend_scene.h — what the tests of the backends that run against acg's test drivers share
 * (tests/cuda on tests/cuda_driver, tests/level_zero on tests/ze_driver):
 *   - the scene: a device with two streams, a fork and a join, three buffers, pinned memory and
 *     a graph pool, and the forked capture both backends replay and update; a cmocka fixture
 *     that hands a case the scene its backend's scenario made;
 *   - the test driver's control functions, bound from the library the backend loaded;
 *   - the fault sweep: every driver call of a backend's scenario failing in turn;
 *   - a device with work queued, for device faults; what a call on a lost device must say;
 *   - a graph's copies reading pinned memory at each replay;
 *   - how a backend that cannot serve is reported, and a device opened for a mode outside
 *     cmocka.
 *
 * Every helper that can fail asserts through cmocka. Compiled into each of those test
 * executables (tests/cuda/CMakeLists.txt, tests/level_zero/CMakeLists.txt), and into the opencl
 * backend's test (tests/opencl/CMakeLists.txt) for what it shares with them.
 */
#ifndef ACG_TESTS_BACKEND_SCENE_H
#define ACG_TESTS_BACKEND_SCENE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <acg/acg.h>

/* The floats in each of the scene's buffers. */
#define BS_N 256

/* ---- the scene ---------------------------------------------------------------------------- */

typedef struct bs_scene {
    acg_device *dev;
    acg_stream *s, *s2;
    acg_event *fork, *join;
    acg_buffer *x, *y, *z; /* (BS_N) floats each */
    acg_graph_pool *pool;
    acg_graph *g, *g2;
    float *host; /* (BS_N) pinned */
    float *reg;  /* (BS_N) the test's own memory, registered with acg_pinned_register, or NULL */
    bool registered;
    acg_kernel *fill, *axpy;
    bool host_call; /* whether bs_capture ends s2's branch with a host function */
    int host_calls; /* how many times that host function ran */
} bs_scene;

/* fill_f32 over y[0..n) = v on s (tc_fill given only the kernel): the launch the scene and the
 * backends' cases make most. */
acg_status bs_fill(acg_stream *s, acg_kernel *fill, acg_buffer *y, uint32_t n, float v);

/* Clears the scene, opens `backend`'s device and makes what the scene holds, then queues
 * x = fill(1.0f) on s (not waited for). Stops at the first failure and returns it, leaving
 * teardown to bs_scene_close. */
acg_status bs_scene_open(bs_scene *c, const char *backend, bool host_call);

/* Captures on s into the scene's pool: z = fill(2.0f), y = z; fork to s2: y += alpha * x (and
 * the host function, with host_call); join; y copied to c->host. A fill, copies both ways,
 * kernels, a host function and a fork: every kind of node a backend builds for an update. The
 * capture is ended whatever happened, so the streams leave capture mode; on success *out is
 * the graph, else the first failure is returned and nothing is kept. */
acg_status bs_capture(bs_scene *c, float alpha, acg_graph **out);

/* Whether every float of c->host is `want`. */
bool bs_host_is(const bs_scene *c, float want);

/* Both streams work eagerly, as after a capture that ended invalidated: y filled with v on s2,
 * then copied to c->host on s, is v everywhere. */
void bs_expect_eager(bs_scene *c, float v);

/* Launches g `times` times on s and waits for s; with check, asserts that c->host is then
 * `want` everywhere. The first failure is returned. */
acg_status bs_replay(bs_scene *c, acg_graph *g, int times, bool check, float want);

/* Frees everything the scene holds, whatever was made (it waits for s first), and asserts that
 * the device closes. */
void bs_scene_close(bs_scene *c);

/* ---- the test driver ---------------------------------------------------------------------- */

/* A test driver: where it is and what it refuses with, then the control functions every test
 * driver has, bound by bs_driver_bind: `<prefix>_fail` (arms an injected failure of the nth call
 * of an entry point; NULL disarms), `<prefix>_calls` (calls of an entry point so far),
 * `<prefix>_live` (the driver objects alive) and, where the driver counts misuse,
 * `<prefix>_violations` (else NULL); and, where the description names one, the control that
 * faults a device. */
typedef struct bs_driver {
    const char *env;          /* the environment variable naming the library */
    const char *prefix;       /* of its control functions: "acgtest_cuda" */
    int refusal;              /* the error a fault sweep injects: one refusing the call */
    const char *refusal_name; /* its name, which acg_last_error() must hold when a run fails */
    const char *fault_name;   /* (optional) its control that faults device `device` */
    const char *path;         /* bound: the library */
    void (*inject)(const char *name, unsigned nth, int code);
    unsigned long (*calls)(const char *name);
    long (*live)(void);
    unsigned long (*violations)(void);
    void (*fault)(int device, int how); /* bound from fault_name, else NULL */
} bs_driver;

/* A driver's description: where the library is named, its control functions' prefix, the error
 * a sweep injects (its name spelled as the code is) and the control that faults a device
 * (NULL: none). */
#define BS_DRIVER(env_, prefix_, refusal_, fault_name_)                                            \
    {                                                                                              \
        .env = (env_), .prefix = (prefix_), .refusal = (refusal_), .refusal_name = #refusal_,      \
        .fault_name = (fault_name_)                                                                \
    }

/* Binds the control functions of the driver the backend loaded (the device must have been
 * opened once, so the library is loaded). */
void bs_driver_bind(bs_driver *d);

/* Another exported symbol of the bound driver; asserts that it exists. */
void *bs_driver_symbol(const bs_driver *d, const char *name);

/* ---- the fault sweep ---------------------------------------------------------------------- */

/* A backend's sweep: each call of each entry point its scenario makes, teardown included, fails
 * in turn with the driver's refusal. */
typedef struct bs_sweep {
    const char *const *names; /* the entry points the backend resolves, up to a NULL */
    /* The scenario: with check its results are asserted; stops at the first failure and
     * returns it, leaving teardown to bs_scene_close. */
    acg_status (*run)(bs_scene *c, bool check);
    /* Whether the entry point destroys or releases: a driver that fails one keeps the object,
     * so objects are not counted after failing it. */
    bool (*releases)(const char *name);
    /* Whether the backend may leave objects to the driver where it says so (a warning "left to
     * the driver": a refused release, or a failed wait before freeing what the device may still
     * use); without, every failed run must leave the driver's objects as they were. */
    bool may_leave_to_driver;
    /* (optional) Called after a failed run's teardown with the entry point failed and the
     * scene's c->reg as it was, to undo what the driver kept of memory freed since. */
    void (*after_close)(const bs_driver *drv, const char *name, void *reg);
    bs_driver *drv; /* the driver the scenario loads */
} bs_sweep;

/* Runs the scenario once (which loads the driver and builds what is built once per process),
 * binds *drv, counts the calls of a clean run, then fails each in turn: a failed run ends with
 * a clean status naming the refusal (or absorbs the failure), its teardown leaves no driver
 * object behind (but as said above), the driver saw no misuse (where it counts misuse), and the
 * scenario then runs clean on a new device. Prints a summary, and asserts that more than 50
 * calls were failed and more than half of the runs failed with the driver's error. */
void bs_fault_sweep(const bs_sweep *sw, bs_driver *drv);

/* cmocka case: bs_fault_sweep of the bs_sweep that is its initial state, with its driver. */
void bs_fault_sweep_case(void **state);
/* A table entry: the sweep `sweep` (a const bs_sweep *) as the case test_fault_sweep. */
#define BS_SWEEP_CASE(sweep)                                                                       \
    { "test_fault_sweep", bs_fault_sweep_case, NULL, NULL, (void *)(sweep) }

/* ---- cases on the scenario's scene (a cmocka fixture) ------------------------------------- */

/* What a backend's cases start from: its scenario (as bs_sweep's run) and its driver. */
typedef struct bs_suite {
    acg_status (*run)(bs_scene *c, bool check);
    bs_driver *drv;
} bs_suite;

/* cmocka setup: *state, the case's bs_suite (its initial state), becomes a bs_scene on which the
 * suite's scenario ran with its checks (asserting ACG_OK), the driver bound. */
int bs_scene_setup(void **state);
/* cmocka teardown: closes the scene (bs_scene_close) and, where the driver counts misuse,
 * asserts that it saw none. Returns 0. */
int bs_scene_teardown(void **state);
/* A table entry: the case `test` on a scene of `suite` (a bs_suite *). */
#define BS_SCENE_CASE(test, suite)                                                                 \
    cmocka_unit_test_prestate_setup_teardown(test, bs_scene_setup, bs_scene_teardown,              \
                                             (void *)(suite))

/* ---- a device with work queued (device faults) ------------------------------------------- */

/* A device, a stream, an event, a graph pool and a graph of it: fill(v) of x, then x copied to
 * the pinned host memory. */
typedef struct bs_rig {
    acg_device *dev;
    acg_kernel *fill;
    acg_buffer *x; /* (BS_N) floats */
    float *host;   /* (BS_N) pinned */
    acg_stream *s;
    acg_event *ev;
    acg_graph_pool *pool;
    acg_graph *g;
} bs_rig;

/* Opens `backend`'s device and makes the rig, its graph filling v; nothing is queued. */
void bs_rig_open(bs_rig *r, const char *backend, float v);
/* Destroys what the rig holds and closes the device, asserting that each succeeds (as they must
 * on a lost device too). */
void bs_rig_close(bs_rig *r);

/* ---- pinned memory read at each replay ---------------------------------------------------- */

/* On dev (whose capability says graph_pinned_replay): a graph copies pinned memory in to a
 * buffer and back out to pinned memory; what is written into `in` between replays is what each
 * replay brings out, bit for bit. Releases what it made. */
void bs_expect_pinned_replay(acg_device *dev);

/* ---- a lost device ----------------------------------------------------------------------- */

/* A call on a device lost before it returns ACG_ERR_DEVICE_LOST at once, its error naming the
 * first fault (`first`) as an earlier one; else the test fails, saying which call. */
#define BS_EXPECT_LOST(call, first) bs_expect_lost_((call), #call, (first))
void bs_expect_lost_(acg_status st, const char *call, const char *first);

/* On a device lost to a fault whose detail names `first`: allocating, creating a stream,
 * waiting for s, for ev and for the device, and the poll (twice) all fail fast naming it, and
 * what would have been made is not. */
void bs_expect_lost_device(acg_device *dev, acg_stream *s, acg_event *ev, const char *first);

/* ---- a backend that cannot serve, and modes outside cmocka -------------------------------- */

/* Opens `backend`'s device for a mode that reports through its exit status (--expect-...):
 * NULL, having said "open failed: <why>" on stderr, when it does not open. */
acg_device *bs_open_or_say(const char *backend);

/* The backend is unavailable, with a reason holding `text`, and opening it says so: 0, printing
 * the reason; else 1, saying what it found on stderr. */
int bs_expect_unavailable(const char *backend, const char *text);

/* Whether `backend` opens here; if not, prints "skipped: <backend>: <why>" (a main then returns
 * CTest's skip code, 77). */
bool bs_backend_opens(const char *backend);

/* A mode of a backend's test executable, run instead of its cases: `flag` alone (run) or with
 * one argument (run_with; the other NULL), which returns the exit status. */
typedef struct bs_mode {
    const char *flag;
    int (*run)(void);
    int (*run_with)(const char *arg);
} bs_mode;

/* The main of a backend's test: `--expect-unavailable TEXT` (bs_expect_unavailable), or the
 * mode of `modes` (up to an entry whose flag is NULL; modes may be NULL) that argv names; else,
 * where the backend opens, its n cases `tests` as the cmocka group `name`, and 77 (skipped)
 * where it does not. */
int bs_main(int argc, char **argv, const char *backend, const bs_mode *modes, const char *name,
            const struct CMUnitTest *tests, size_t n);
#define BS_MAIN(backend, modes, name, tests)                                                       \
    int main(int argc, char **argv) {                                                              \
        return bs_main(argc, argv, backend, modes, name, tests, sizeof tests / sizeof tests[0]);   \
    }

#endif
