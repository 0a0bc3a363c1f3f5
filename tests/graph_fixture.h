/*
 * graph_fixture.h — what the graph suites share (test_graph.c: replay, update and descriptions;
 * test_graph_pool.c: pools and scratch; test_graph_lifetime.c: lifetimes and misuse): a device
 * with two streams, a pool, four buffers, pinned memory and two events; the work sequences they
 * capture and run eagerly; the checks of what a replay wrote; and the checks that skip a case on
 * a device without what it needs.
 */
#ifndef ACG_TESTS_GRAPH_FIXTURE_H
#define ACG_TESTS_GRAPH_FIXTURE_H

#include "common.h"

enum { N = 4096 };
#define NB ((size_t)N * sizeof(float))

typedef struct fx {
    acg_device *dev;
    acg_stream *a, *b;
    acg_graph_pool *pool;
    tc_kernels k;
    acg_buffer *x, *y, *z, *w; /* N floats each */
    float *pin_in, *pin_out;   /* N floats each, pinned */
    acg_event *e1, *e2;
    /* knobs the work functions read, so two captures can differ in arguments only */
    float scalar;
    acg_buffer *out;
    bool extra_kernel;
} fx;

/* A fixture on a device of its own (the device under test opened again), and its release,
 * which asserts that each object goes. */
fx *graph_fixture_open(void);
void graph_fixture_close(fx *f);
/* cmocka's setup and teardown of the fixture (*state is the fx). */
int graph_setup(void **state);
int graph_teardown(void **state);
/* A table entry: the case `fn` in a fresh fixture. */
#define GRAPH_CASE(fn) cmocka_unit_test_setup_teardown(fn, graph_setup, graph_teardown)

/* The work sequences, as tc_work_fn (ctx the fx), and what they compute. */
/* (a) a chain of kernels on one stream; the result lands in f->out. */
acg_status work_chain(void *ctx, acg_stream *a, acg_stream *b);
void chain_reference(float *want, float scalar);
/* (b) fork/join: b forks from a at e1, works, and a joins it at e2. */
acg_status work_fork_join(void *ctx, acg_stream *a, acg_stream *b);
/* (c) copies: h2d from pinned, d2d, fill, a kernel, d2h into pinned. */
acg_status work_copies(void *ctx, acg_stream *a, acg_stream *b);
void copies_reference(const float *in, float *want);
/* A capture of fn on f's streams into f's pool; fails the test when it does not end in a graph. */
acg_graph *capture(fx *f, tc_work_fn fn);
/* Poisons every device buffer of the fixture and the pinned output. */
void poison_all(fx *f);

/* Replay equals what it must, bit for bit: each poisons the fixture (poison_all), replays g on
 * f->a (on s where given), waits, and expects the N floats of out to be want. */
void expect_replay(fx *f, acg_graph *g, acg_stream *s, const acg_buffer *out, const float *want);
/* ... to be what work_chain computes with scalar. */
void expect_chain_replay(fx *f, acg_graph *g, const acg_buffer *out, float scalar);
/* ... to be v. */
void expect_replay_floats(fx *f, acg_graph *g, const acg_buffer *out, float v);
/* Runs fn eagerly (tc_run_eager) on the poisoned fixture, expects the N floats of out to be
 * want, and leaves them in eager for the replays to equal. */
void expect_eager(fx *f, tc_work_fn fn, const acg_buffer *out, const float *want, float *eager);
/* Expects each of the N floats of buf to hold poison_all's poison still. */
void expect_poisoned(fx *f, const acg_buffer *buf);

/* Work through scratch from the capture's pool: out = (scratch filled with fill) + add. */
typedef struct scratch_work {
    fx *f;
    float fill, add;
    acg_buffer *out;
    uint32_t n;
} scratch_work;
acg_status work_scratch(void *ctx, acg_stream *a, acg_stream *b);

/* Two graphs of work_scratch captured into f's pool one after the other, on outputs of
 * SCRATCH_M floats: g1 writes o1 = 3 + 1 + 1, g2 writes o2 = 5 + 1 + 2. bytes1 and bytes2 are
 * the pool's bytes after each capture. */
enum { SCRATCH_M = 1 << 20 };
typedef struct scratch_pair {
    acg_buffer *o1, *o2;
    scratch_work w1, w2;
    acg_graph *g1, *g2;
    size_t bytes1, bytes2;
} scratch_pair;
scratch_pair scratch_pair_capture(fx *f);
/* Expects o1 and o2 to hold what g1 and g2 write (read on f->a, after what it queued). */
void scratch_pair_expect(fx *f, const scratch_pair *p);
void scratch_pair_free(scratch_pair *p);

/* A case that needs graphs, or captures over two streams, checks on a device without them that
 * it says so and refuses them, and ends there, skipped. Past this point the case holds nothing
 * but the fixture's objects. */
#define NEED_GRAPHS(f) tc_need_graphs((f)->dev, (f)->a)
#define NEED_MULTI_STREAM_CAPTURE(f)                                                               \
    do {                                                                                           \
        NEED_GRAPHS(f);                                                                            \
        if (!tc_has_multi_stream_capture((f)->dev, (f)->a, (f)->b, (f)->e1)) {                     \
            tc_skip("no multi-stream capture");                                                    \
        }                                                                                          \
    } while (0)
/* Captured copies from and to pinned memory need pinned memory (else they are pageable). */
#define NEED_PINNED(f)                                                                             \
    do {                                                                                           \
        if (!tc_has_pinned_memory((f)->dev)) {                                                     \
            tc_skip("no pinned memory");                                                           \
        }                                                                                          \
    } while (0)
/* The end of a case that, on a device without graph update (upd false), checked only what a
 * refused update leaves: skipped, saying so ("no graph update: checked only that <checked>"). */
void skip_without_update(bool upd, const char *checked);

#endif /* ACG_TESTS_GRAPH_FIXTURE_H */
