/*
 * common.h — helpers shared by the acg test executables.
 *
 * Every helper that can fail asserts through cmocka, so a test body reads as the behaviour it
 * pins down. Status checks print both statuses by name and acg_last_error() on a mismatch.
 */
#ifndef ACG_TESTS_COMMON_H
#define ACG_TESTS_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <acg/acg.h>
#include <acg/engine.h>
#include <acg/model.h>

/* ---- status assertions -------------------------------------------------------------------- */

/* Asserts that `call` returns `want`; on a mismatch prints both names and acg_last_error(). */
#define TC_EXPECT(want, call) tc_expect_(ACG_##want, (call), #call, __FILE__, __LINE__)
#define TC_OK(call) TC_EXPECT(OK, call)
void tc_expect_(acg_status want, acg_status got, const char *expr, const char *file, int line);

/* Asserts that acg_last_error() contains `needle`. */
#define TC_LAST_ERROR_HAS(needle) tc_last_error_has_((needle), __FILE__, __LINE__)
/* Both: the call returns ACG_<want> and acg_last_error() then contains needle. */
#define TC_EXPECT_HAS(want, call, needle)                                                          \
    do {                                                                                           \
        TC_EXPECT(want, call);                                                                     \
        TC_LAST_ERROR_HAS(needle);                                                                 \
    } while (0)
void tc_last_error_has_(const char *needle, const char *file, int line);
/* What a loader's error must say: acg_last_error() names the file at path (its last component)
 * and contains each string of ap, a list of const char * ended by NULL. */
void tc_last_error_names_file_(const char *path, const char *file, int line, va_list ap);

/* Asserts that stream s answers acg_stream_get_capture_state with ACG_OK and the state
 * ACG_CAPTURE_<want>: TC_EXPECT_CAPTURE_STATE(s, NONE). */
#define TC_EXPECT_CAPTURE_STATE(s, want)                                                           \
    tc_expect_capture_state_((s), ACG_CAPTURE_##want, __FILE__, __LINE__)
void tc_expect_capture_state_(acg_stream *s, acg_capture_state want, const char *file, int line);

/* Asserts that two byte ranges are equal with memcmp; on a mismatch reports the first differing
 * 4-byte word (as float and hex). */
#define TC_BYTES_EQUAL(a, b, n) tc_bytes_equal_((a), (b), (n), __FILE__, __LINE__)
void tc_bytes_equal_(const void *a, const void *b, size_t n, const char *file, int line);

/* ---- the device under test --------------------------------------------------------------- */

/* Every device test runs on one backend, named by `--device SPEC` on its command line ("cpu"
 * when absent; "backend" or "backend:N" as acg_device_open takes it; `--filter PATTERN` runs
 * only the cases whose names match, for debugging). Call tc_init first in
 * main. When the backend is not compiled in, cannot run here, or lacks the device index, it
 * prints "skipped: <backend>: <reason>" and exits 77, which CTest reports as skipped; on bad
 * usage or another open failure it exits 1. A device test never reads an ACG_* variable to find
 * its device: the library warns about ACG_* names it does not know. */
void tc_init(int argc, char **argv);
/* The spec given (e.g. "opencl"), its backend's name ("opencl"), and whether that is `name`. */
const char *tc_spec(void);
const char *tc_backend(void);
bool tc_backend_is(const char *name);
/* The main of a device test program whose cases are the array `tests`: tc_init, then the cases
 * as the group tc_group(name). */
#define TC_MAIN(name, tests)                                                                       \
    int main(int argc, char **argv) {                                                              \
        tc_init(argc, argv);                                                                       \
        return cmocka_run_group_tests_name(tc_group(name), tests, NULL, NULL);                     \
    }
/* The capability of the device under test, as reported when tc_init opened it. */
const acg_capability *tc_cap(void);
/* A cmocka group name naming the executable's device: "test_graph --device opencl". */
const char *tc_group(const char *test);

/* Ends the case as skipped: prints "skipped: <spec>: <why>" and calls cmocka's skip(), so the
 * count of what ran on each device shows in the CTest output. skip() leaves the case at once
 * (its fixture's teardown still runs): release what the case created first, else the device's
 * close fails. */
_Noreturn void tc_skip(const char *why_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Capability branches. A case that needs a capability the device lacks checks that the
 * capability says so and that the call which needs it returns ACG_ERR_UNSUPPORTED, notes it,
 * and returns false; the case then checks what still applies, releases what it created, and
 * ends with tc_skip naming what it could not check. */
/* Graphs: acg_stream_begin_capture(s) (s a stream of dev) is refused and s stays out of capture
 * mode. */
bool tc_has_graphs(acg_device *dev, acg_stream *s);
/* A case that needs graphs: on a device without them (tc_has_graphs), ends the case there,
 * skipped ("no graphs"). Past it the case may capture. */
void tc_need_graphs(acg_device *dev, acg_stream *s);
/* Graph update: acg_graph_update(g, from) is refused (g and from are live graphs of the
 * device). */
bool tc_has_graph_update(acg_graph *g, const acg_graph *from);
/* Multi-stream capture: a capture begun on a that b tries to fork into (through e) is
 * invalidated with ACG_ERR_UNSUPPORTED, and both streams leave capture mode. With graphs
 * only: check tc_has_graphs first. */
bool tc_has_multi_stream_capture(acg_device *dev, acg_stream *a, acg_stream *b, acg_event *e);
/* Pinned memory: acg_pinned_alloc gives memory that acg_pinned_contains does not count. */
bool tc_has_pinned_memory(acg_device *dev);

/* ---- objects ------------------------------------------------------------------------------ */

/* Opens the device under test; each call opens a new device (two calls, two devices). */
acg_device *tc_open(void);
/* A process group of this process alone (rank 0 of 1), whose callbacks do nothing: what a
 * device group of one rank needs (acg_device_group_create). It has static storage. */
const acg_comm *tc_one_rank_comm(void);

/* Opens the cpu backend's device: the oracle other backends are compared with. */
acg_device *tc_open_cpu(void);
void tc_close(acg_device *dev);
acg_stream *tc_stream(acg_device *dev);
acg_event *tc_event(acg_device *dev);
acg_buffer *tc_buffer(acg_device *dev, size_t size);
void *tc_pinned(acg_device *dev, size_t size);
acg_graph_pool *tc_pool(acg_device *dev);

/* The four built-in kernels of a device. */
typedef struct tc_kernels {
    acg_kernel *fill;
    acg_kernel *add;
    acg_kernel *axpy;
    acg_kernel *copy;
} tc_kernels;
void tc_kernels_get(acg_device *dev, tc_kernels *out);

/* Launch wrappers for the built-ins (offsets in bytes, n work items). They return the status
 * so tests can use them inside captures and on error paths. */
acg_status tc_fill(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t off, uint32_t n,
                   float value);
acg_status tc_add(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t yoff,
                  const acg_buffer *x, size_t xoff, uint32_t n, float a);
acg_status tc_axpy(acg_stream *s, const tc_kernels *k, acg_buffer *y, size_t yoff,
                   const acg_buffer *x, size_t xoff, uint32_t n, float a);
acg_status tc_copy(acg_stream *s, const tc_kernels *k, acg_buffer *dst, size_t doff,
                   const acg_buffer *src, size_t soff, uint32_t n);

/* The recovery from a lost device (acg.h, "Device faults"): the device `spec` opened again has
 * no fault, before and after a kernel whose result (every float filled) is checked bit for
 * bit; everything it made is gone again when it returns. */
void tc_expect_device_works(const char *spec);

/* Pageable host transfers that wait for the stream: tc_upload synchronizes after the copy. */
void tc_upload(acg_stream *s, acg_buffer *dst, const void *src, size_t size);
void tc_download(acg_stream *s, void *dst, const acg_buffer *src, size_t size);
/* Fills the whole buffer with 0xdeadbeef and waits, so a later read proves what was written. */
void tc_poison(acg_stream *s, acg_buffer *buf);

/* ---- the fixture most device tests start from --------------------------------------------- */

/* The device under test, a stream of it and its built-in kernels. A test's fixture is either a
 * tc_fixture or a struct whose first member is one (then `t`, by convention), so that these
 * helpers serve both: a pointer to a struct converts to a pointer to its first member. */
typedef struct tc_fixture {
    acg_device *dev;
    acg_stream *s;
    tc_kernels k;
} tc_fixture;

/* Allocates a zeroed fixture of `size` bytes (at least sizeof(tc_fixture)), fills its leading
 * tc_fixture (asserting each step) and returns it, for the setup to add what else it holds. */
void *tc_fixture_new(size_t size);
/* The same on the device `spec` opens (acg_device_open) instead of the device under test. */
void *tc_fixture_new_on(size_t size, const char *spec);
/* cmocka setup of a bare tc_fixture: *state = tc_fixture_new(sizeof(tc_fixture)). */
int tc_fixture_setup(void **state);
/* Releases a fixture from tc_fixture_new: destroys the stream, closes the device (asserting
 * both, so a case that left an object of the device fails) and frees the fixture. A fixture
 * holding more releases that first, then calls this. */
void tc_fixture_free(tc_fixture *t);
/* cmocka teardown of a fixture from tc_fixture_new: tc_fixture_free(*state). Returns 0. */
int tc_fixture_teardown(void **state);
/* A table entry: the case `test` in a fresh bare tc_fixture (cmocka_unit_test_setup_teardown
 * with the two above). */
#define TC_FIXTURE_CASE(test)                                                                      \
    cmocka_unit_test_setup_teardown(test, tc_fixture_setup, tc_fixture_teardown)

/* ---- device tests: a second stream and two buffers, and a buffer's floats checked ---------- */

/* The fixture of cases that move data between buffers and order work across two streams
 * (test_concurrency, test_waits, test_host, ...): a tc_fixture, a second stream of its device
 * and two device buffers, whose size in bytes the case's table entry gives (TC_FIXTURE2_CASE),
 * since each suite sizes its own work. */
typedef struct tc_fixture2 {
    tc_fixture t;
    acg_stream *b;     /* a second stream of t.dev */
    acg_buffer *x, *y; /* of t.dev, each the size the table entry gave */
} tc_fixture2;

/* Allocates a zeroed fixture of `size` bytes (at least sizeof(tc_fixture2)), fills its leading
 * tc_fixture2 with buffers of `bytes` bytes each (asserting each step) and returns it, for the
 * setup to add what else it holds. */
void *tc_fixture2_new(size_t size, size_t bytes);
/* cmocka setup of a bare tc_fixture2: *state holds the buffers' size in bytes on entry
 * (cmocka's prestate), the fixture after. */
int tc_fixture2_setup(void **state);
/* Releases a fixture from tc_fixture2_new: frees y and x, destroys b, then as tc_fixture_free
 * (asserting each, so a case that left an object of the device fails). */
void tc_fixture2_free(tc_fixture2 *f);
/* cmocka teardown of a tc_fixture2: tc_fixture2_free(*state). Returns 0. */
int tc_fixture2_teardown(void **state);
/* A table entry: the case `test` in a fresh tc_fixture2 whose buffers hold `bytes` bytes each. */
#define TC_FIXTURE2_CASE(test, bytes)                                                              \
    cmocka_unit_test_prestate_setup_teardown(test, tc_fixture2_setup, tc_fixture2_teardown,        \
                                             (void *)(uintptr_t)(bytes))

/* Floats of a buffer large enough that work queued on it is still pending when the host's next
 * calls come, so that a missing wait would show; what a case checks holds whether or not it
 * still is. */
enum { TC_BIG = 1 << 21 };

/* Downloads the first n floats of buf through s (waiting for s) and asserts that each is v, bit
 * for bit; on a mismatch reports the first differing float. */
#define TC_EXPECT_FLOATS(s, buf, n, v) tc_expect_floats_((s), (buf), (n), (v), __FILE__, __LINE__)
void tc_expect_floats_(acg_stream *s, const acg_buffer *buf, size_t n, float v, const char *file,
                       int line);

/* Runs fn on n threads at once, thread i with the i-th of the n arguments of `size` bytes each
 * at args, and returns once every thread has returned. */
void tc_run_threads(size_t n, void *(*fn)(void *), void *args, size_t size);

/* ---- deterministic data ------------------------------------------------------------------- */

/* Fills dst with small dyadic floats (k/8, |k| < 1024) derived from seed: sums and products by
 * 0.5, 1, 1.5, 2, ... stay exact, so host references match any evaluation order bit for bit. */
void tc_fill_floats(float *dst, size_t n, uint32_t seed);
/* Fills dst with n copies of v. */
void tc_splat(float *dst, size_t n, float v);

/* ---- counting and failing allocator ------------------------------------------------------- */

/* Installs the counting allocator (asserts ACG_OK) and resets its counters and fault. */
void tc_alloc_install(void);
/* Restores the library's default allocator (asserts ACG_OK). */
void tc_alloc_uninstall(void);
/* Makes the n-th allocation from now fail (one shot); 0 disarms. Clears the "hit" flag. */
void tc_alloc_fail_at(uint64_t n);
/* Whether the armed fault was hit since the last tc_alloc_fail_at. */
bool tc_alloc_fail_hit(void);
/* Allocations currently live (allocated and not freed) through the counting allocator. */
int64_t tc_alloc_live(void);
/* Allocations made since install (successful or failed). */
uint64_t tc_alloc_count(void);
/* Calls that matched neither mode of the hook (ptr and size both set, or both NULL/0). */
uint64_t tc_alloc_bad_calls(void);

/* The allocation-failure sweep: runs `run` with allocation 1, 2, 3, ... failing until a run
 * completes without reaching the fault. A run must release whatever it created. Every faulted
 * run must return ACG_ERR_OUT_OF_MEMORY (or, with may_recover, ACG_OK where the library can do
 * without the allocation, as a stream-ordered free that falls back to waiting) and leave the
 * live allocations as they were before it; the last run must return ACG_OK. Returns the number
 * of allocation points (runs faulted). The counting allocator must be installed. */
uint64_t tc_alloc_sweep(acg_status (*run)(void *ctx), void *ctx, bool may_recover);

/* A whole allocation-failure case: installs the counting allocator, runs `run` once without a
 * fault (it must return ACG_OK and leave nothing live), then tc_alloc_sweep; prints the number
 * of allocation points as "<what> allocation-failure sweep: N allocation points", asserts that
 * there are more than `more_than` and that nothing is live and no call was bad, and uninstalls
 * the allocator. Returns the number of points. */
uint64_t tc_alloc_sweep_case(const char *what, acg_status (*run)(void *ctx), void *ctx,
                             bool may_recover, uint64_t more_than);

/* A group of host cases (no device) that write files and count allocations: cmocka's group
 * setup makes the temporary directory under prefix and installs the counting allocator (-1
 * when the directory cannot be made); the teardown asserts that no allocation is live and no
 * call was bad, uninstalls the allocator and removes the directory. */
int tc_host_files_setup(const char *prefix);
int tc_host_files_teardown(void);

/* ---- temporary files ------------------------------------------------------------------------ */

/* Creates a fresh directory under $TMPDIR (or /tmp) named after prefix; 0 on success. */
int tc_tmpdir_create(const char *prefix);
/* A path inside it (a static buffer, valid until the next call). */
const char *tc_tmp_path(const char *name);
/* The directory itself. */
const char *tc_tmpdir(void);
/* Removes it and everything in it; 0 on success. */
int tc_tmpdir_remove(void);

/* Turns a hang into a failure: unless cancelled (seconds 0) within `seconds`, prints "<what>
 * blocked for N s" and exits 1. For calls that must return at once, such as opening a FIFO. */
void tc_hang_guard(unsigned seconds, const char *what);

/* The hook itself, for tests that install it by hand. */
void *tc_alloc_fn(void *user, void *ptr, size_t size, size_t align);

/* ---- log capture -------------------------------------------------------------------------- */

/* Routes log messages to a capture buffer and sets the threshold; clears earlier messages. */
void tc_log_capture_begin(acg_log_level level);
/* Restores the default callback and the threshold before tc_log_capture_begin. */
void tc_log_capture_end(void);
/* Messages captured at exactly `level`. */
size_t tc_log_count(acg_log_level level);
/* Whether a captured message contains needle; *level_out gets its level when non-NULL. */
bool tc_log_find(const char *needle, acg_log_level *level_out);
/* Whether any captured message ends with a newline (the header says none does). */
bool tc_log_any_trailing_newline(void);

/* ---- eager and captured runs of the same work --------------------------------------------- */

/* One sequence of work on up to two streams (b may be unused). It must produce its output
 * only from data it writes itself, so eager and replayed runs are comparable. */
typedef acg_status (*tc_work_fn)(void *ctx, acg_stream *a, acg_stream *b);

/* Runs fn eagerly on a and b, waits for both, and copies out[0, size) into bytes. */
acg_status tc_run_eager(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b,
                        const acg_buffer *out, size_t size, void *bytes);
/* Captures fn on a (the origin) into pool and returns the graph. */
acg_status tc_capture(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b, acg_graph_pool *pool,
                      acg_graph **graph);
/* Replays graph on s, waits, and copies out[0, size) into bytes (out may be NULL). */
acg_status tc_replay(acg_graph *graph, acg_stream *s, const acg_buffer *out, size_t size,
                     void *bytes);

/* Returns true when haystack contains needle (NULL-safe). */
bool tc_contains(const char *haystack, const char *needle);

/* ---- the backends' own tests (tests/cuda, tests/level_zero, tests/opencl) ------------------ */

/* Asserts that graph g has n nodes, node i of kind kinds[i]. */
void tc_expect_node_kinds(const acg_graph *g, const acg_node_kind *kinds, size_t n);

/* The barrier of a comm whose ranks are all this process (tc_one_rank_comm's): returns ACG_OK
 * at once. */
acg_status tc_one_rank_barrier(void *user);

/* A comm of `rank` of `n_ranks` whose callbacks are these, each given `user`
 * (allreduce_sum_f32 unset: set it where the transport has one). */
acg_comm tc_comm(void *user, int32_t rank, int32_t n_ranks, acg_status (*barrier)(void *user),
                 acg_status (*allreduce_min_i32)(void *user, int32_t *values, size_t n),
                 acg_status (*broadcast)(void *user, void *data, size_t bytes, int32_t root));

/* ---- the graph suites: buffers freed ------------------------------------------------------ */

/* Frees each buffer given, in order (a view before its parent), asserting that each free
 * returns ACG_OK: TC_FREE_BUFFERS(x, y, z). */
#define TC_FREE_BUFFERS(...)                                                                       \
    tc_free_buffers_((acg_buffer *const[]){__VA_ARGS__},                                           \
                     sizeof((acg_buffer *const[]){__VA_ARGS__}) / sizeof(acg_buffer *), __FILE__,  \
                     __LINE__)
void tc_free_buffers_(acg_buffer *const *bufs, size_t n, const char *file, int line);

/* ---- runners, captures and user kernels (the engine, graph and registration suites) ------- */

/* A recipe `name` of one input and one output of bytes(user, i, bucket) bytes each, stepped by
 * forward with user; the caller adds what else it has (outputs, regions, can_capture). */
acg_recipe tc_recipe(const char *name, void *user,
                     size_t (*bytes)(void *user, uint32_t i, const acg_bucket_key *bucket),
                     acg_status (*forward)(void *user, acg_stream *s, const acg_step_io *io));
/* The config of a runner of recipe over the buckets b[0, n), warming up and capturing on s,
 * with graphs g; its slots, memory limit, regions and comm are the defaults. */
acg_runner_config tc_runner_config(const acg_recipe *recipe, const acg_bucket_key *b, uint32_t n,
                                   acg_stream *s, acg_graph_mode g);

/* y = 2 (x + 1) over n floats through tmp (n floats, which it leaves holding x + 1): the step
 * the runner suites' test recipes take. Returns the first failing launch's status. */
acg_status tc_twice_x_plus_one(acg_stream *s, const tc_kernels *k, acg_buffer *y,
                               const acg_buffer *x, acg_buffer *tmp, uint32_t n);

/* Expects graph g to hold n nodes. */
void tc_expect_node_count(const acg_graph *g, size_t n);
/* Node i of graph g (asserting that it has one). */
acg_node_info tc_node(const acg_graph *g, size_t i);
/* Ends the capture on s, which must still be active, expects its graph to hold n nodes, and
 * destroys the graph. */
void tc_end_capture_expect_nodes(acg_stream *s, size_t n);

/* A user kernel over rows, as test_kernel_register and test_cpu_pool register one: its
 * signature (out, x, w, width, rows), three buffers of 4-byte items and two u32 scalars. The
 * definition has the name and signature; its shape and code are the caller's. */
acg_kernel_desc tc_rows_kernel_desc(const char *name);
/* a * b, or UINT64_MAX where that overflows: the extent a shape callback reports (an extent too
 * large for any buffer is refused, never wrapped to a small one). */
uint64_t tc_mul_sat(uint64_t a, uint64_t b);
/* A stream with the buffers such a kernel runs on. */
typedef struct tc_rows_io {
    acg_stream *s;
    acg_buffer *out, *x, *w;
} tc_rows_io;
/* Creates io's stream and buffers on dev, uploads x and w (where not NULL) and poisons out. */
void tc_rows_io_open(tc_rows_io *io, acg_device *dev, size_t out_bytes, const void *x,
                     size_t x_bytes, const void *w, size_t w_bytes);
/* Frees io's buffers and destroys its stream (each may be NULL), asserting each. */
void tc_rows_io_close(tc_rows_io *io);

/* ---- the model's suites: presets, logits, configurations, loaders, lost devices, ranks ------- */

/* A cpu kernel body for definitions that are refused before anything runs: fails the case if it
 * ever runs. */
void tc_never_called(const acg_cpu_arg *args, const uint32_t global[3]);

/* The first largest of n values (n at least 2), and in *second the first largest of the others:
 * the greedy token of a row of logits and its runner-up. */
int tc_best_two(const float *v, int n, int *second);

/* The built-in preset `name` (acg_model_preset_load), of the seed the model's suites use (7). */
acg_model_weights *tc_model_preset(const char *name);

/* Asserts that got has want's every field but size. */
void tc_expect_model_config(const acg_model_config *got, const acg_model_config *want);

/* A file loader, for the checks below: loads path (arg: whatever else the loader takes) into
 * *out, which holds a sentinel on entry that a failing loader must leave as it is. */
typedef acg_status (*tc_loader)(const char *path, const void *arg, void **out);

/* Loading path with load (named call) fails with want: the out-parameter is left alone,
 * acg_last_error() names the file and each string of the list that follows line (ended by
 * NULL), and no allocation is left live (the counting allocator is installed). */
void tc_expect_load_fails_(acg_status want, tc_loader load, const char *call, const void *arg,
                           const char *path, const char *file, int line, ...);

/* A FIFO with no writer, made at name in the temporary directory, is refused by load (named
 * call) at once as not a regular file: opening it must not wait for a writer that never comes
 * (tc_hang_guard turns a wait into a failure). */
void tc_expect_fifo_refused(tc_loader load, const char *call, const void *arg, const char *name);

/* The main of a host test program whose cases `tests` write files and count allocations: the
 * cases as the group `name`, set up and torn down by tc_host_files_setup(prefix) and
 * tc_host_files_teardown. */
#define TC_HOST_FILES_MAIN(name, prefix, tests)                                                    \
    static int tc_host_files_group_setup(void **state) {                                           \
        (void)state;                                                                               \
        return tc_host_files_setup(prefix);                                                        \
    }                                                                                              \
    static int tc_host_files_group_teardown(void **state) {                                        \
        (void)state;                                                                               \
        return tc_host_files_teardown();                                                           \
    }                                                                                              \
    int main(void) {                                                                               \
        return cmocka_run_group_tests_name(name, tests, tc_host_files_group_setup,                 \
                                           tc_host_files_group_teardown);                          \
    }

/* Arms a fault for dev's next graph replay (acg__device_inject_fault): that replay faults, and
 * the stream's next synchronize finds the device lost. Where the backend has no such hook (the
 * backends' own tests provoke their drivers' faults), ends the case as skipped instead: for a
 * device of the case's fixture, which its teardown releases. */
void tc_inject_fault_or_skip(acg_device *dev);
/* Opens the device under test and arms a fault for its next graph replay, as
 * tc_inject_fault_or_skip; where the backend cannot inject one, closes the device again and
 * skips the case. */
acg_device *tc_open_lost(void);

/* Whether /dev/shm still names a memory segment of acg's made by process pid (the cpu backend's
 * collectives name theirs acg-PID-N, any N). */
bool tc_shm_segment_named(int pid);

#endif /* ACG_TESTS_COMMON_H */
