/* graph_fixture.c — the graph suites' fixture and work sequences (graph_fixture.h). */
#include "graph_fixture.h"

#include "core/export/acg-layer.h" /* ACG__TRY */

#include <stdlib.h>
#include <string.h>

fx *graph_fixture_open(void) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dev = tc_open();
    f->a = tc_stream(f->dev);
    f->b = tc_stream(f->dev);
    f->pool = tc_pool(f->dev);
    tc_kernels_get(f->dev, &f->k);
    f->x = tc_buffer(f->dev, NB);
    f->y = tc_buffer(f->dev, NB);
    f->z = tc_buffer(f->dev, NB);
    f->w = tc_buffer(f->dev, NB);
    f->pin_in = tc_pinned(f->dev, NB);
    f->pin_out = tc_pinned(f->dev, NB);
    f->e1 = tc_event(f->dev);
    f->e2 = tc_event(f->dev);
    f->scalar = 1.0f;
    f->out = f->z;
    return f;
}

void graph_fixture_close(fx *f) {
    TC_OK(acg_event_destroy(f->e1));
    TC_OK(acg_event_destroy(f->e2));
    TC_OK(acg_pinned_free(f->pin_in));
    TC_OK(acg_pinned_free(f->pin_out));
    TC_FREE_BUFFERS(f->x, f->y, f->z, f->w);
    TC_OK(acg_graph_pool_destroy(f->pool));
    TC_OK(acg_stream_destroy(f->a));
    TC_OK(acg_stream_destroy(f->b));
    tc_close(f->dev);
    free(f);
}

int graph_setup(void **state) {
    *state = graph_fixture_open();
    return 0;
}

int graph_teardown(void **state) {
    graph_fixture_close(*state);
    return 0;
}

void skip_without_update(bool upd, const char *checked) {
    if (!upd) {
        tc_skip("no graph update: checked only that %s", checked);
    }
}

/* (a) a chain of kernels on one stream; the result lands in f->out. */
acg_status work_chain(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    ACG__TRY(tc_fill(a, &f->k, f->x, 0, N, 1.25f));         /* x = 1.25 */
    ACG__TRY(tc_add(a, &f->k, f->y, 0, f->x, 0, N, 0.5f));  /* y = 1.75 */
    ACG__TRY(tc_axpy(a, &f->k, f->y, 0, f->x, 0, N, 1.5f)); /* y = 3.625 */
    ACG__TRY(tc_copy(a, &f->k, f->out, 0, f->y, 0, N));     /* out = 3.625 */
    ACG__TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, f->scalar));
    if (f->extra_kernel) {
        ACG__TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, 1.0f));
    }
    return ACG_OK;
}

void chain_reference(float *want, float scalar) { tc_splat(want, N, 3.625f + scalar); }

/* (b) fork/join: b forks from a at e1, works, and a joins it at e2. */
acg_status work_fork_join(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    ACG__TRY(tc_fill(a, &f->k, f->x, 0, N, 2.0f)); /* x = 2 */
    ACG__TRY(acg_event_record(f->e1, a));
    ACG__TRY(acg_stream_wait_event(b, f->e1));
    ACG__TRY(tc_add(b, &f->k, f->y, 0, f->x, 0, N, 3.0f)); /* y = 5 (on b) */
    ACG__TRY(acg_event_record(f->e2, b));
    ACG__TRY(tc_add(a, &f->k, f->w, 0, f->x, 0, N, 1.0f)); /* w = 3 (on a, concurrently) */
    ACG__TRY(acg_stream_wait_event(a, f->e2));
    ACG__TRY(tc_axpy(a, &f->k, f->w, 0, f->y, 0, N, 0.5f)); /* w = 5.5 */
    return ACG_OK;
}

/* (c) copies: h2d from pinned, d2d, fill, a kernel, d2h into pinned. */
acg_status work_copies(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    uint32_t one;
    float v = 1.0f;
    memcpy(&one, &v, 4);
    ACG__TRY(acg_copy_h2d(a, f->x, 0, f->pin_in, NB));
    ACG__TRY(acg_copy_d2d(a, f->y, 0, f->x, 0, NB));
    ACG__TRY(acg_fill(a, f->z, 0, NB, one, 4));
    ACG__TRY(tc_axpy(a, &f->k, f->z, 0, f->y, 0, N, 2.0f)); /* z = 2 * in + 1 */
    ACG__TRY(acg_copy_d2h(a, f->pin_out, f->z, 0, NB));
    return ACG_OK;
}

void copies_reference(const float *in, float *want) {
    for (size_t i = 0; i < N; i++) {
        want[i] = 2.0f * in[i] + 1.0f;
    }
}

/* Poisons every device buffer of the fixture and the pinned output. */
void poison_all(fx *f) {
    tc_poison(f->a, f->x);
    tc_poison(f->a, f->y);
    tc_poison(f->a, f->z);
    tc_poison(f->a, f->w);
    memset(f->pin_out, 0xee, NB);
}

void expect_replay(fx *f, acg_graph *g, acg_stream *s, const acg_buffer *out, const float *want) {
    float replay[N];
    poison_all(f);
    TC_OK(tc_replay(g, s != NULL ? s : f->a, out, NB, replay));
    TC_BYTES_EQUAL(replay, want, NB);
}

void expect_chain_replay(fx *f, acg_graph *g, const acg_buffer *out, float scalar) {
    float want[N];
    chain_reference(want, scalar);
    expect_replay(f, g, NULL, out, want);
}

void expect_replay_floats(fx *f, acg_graph *g, const acg_buffer *out, float v) {
    float want[N];
    tc_splat(want, N, v);
    expect_replay(f, g, NULL, out, want);
}

void expect_eager(fx *f, tc_work_fn fn, const acg_buffer *out, const float *want, float *eager) {
    poison_all(f);
    TC_OK(tc_run_eager(fn, f, f->a, f->b, out, NB, eager));
    TC_BYTES_EQUAL(eager, want, NB);
}

void expect_poisoned(fx *f, const acg_buffer *buf) {
    float back[N];
    const uint32_t poison = 0xdeadbeefu;
    tc_download(f->a, back, buf, NB);
    for (size_t i = 0; i < N; i++) {
        assert_memory_equal(&back[i], &poison, 4);
    }
}

acg_graph *capture(fx *f, tc_work_fn fn) {
    acg_graph *g = NULL;
    TC_OK(tc_capture(fn, f, f->a, f->b, f->pool, &g));
    assert_non_null(g);
    return g;
}

/* out = (scratch filled with fill) + add, through scratch from the capture's pool. */
acg_status work_scratch(void *ctx, acg_stream *a, acg_stream *b) {
    scratch_work *sw = ctx;
    (void)b;
    acg_buffer *tmp = NULL;
    ACG__TRY(acg_stream_alloc(a, (size_t)sw->n * sizeof(float), &tmp));
    ACG__TRY(tc_fill(a, &sw->f->k, tmp, 0, sw->n, sw->fill));
    for (int i = 0; i < 4; i++) {
        ACG__TRY(tc_add(a, &sw->f->k, tmp, 0, tmp, 0, sw->n, 0.25f));
    }
    ACG__TRY(tc_add(a, &sw->f->k, sw->out, 0, tmp, 0, sw->n, sw->add));
    return ACG_OK;
}

scratch_pair scratch_pair_capture(fx *f) {
    const size_t bytes = (size_t)SCRATCH_M * sizeof(float);
    scratch_pair p = {.o1 = tc_buffer(f->dev, bytes), .o2 = tc_buffer(f->dev, bytes)};
    p.w1 = (scratch_work){f, 3.0f, 1.0f, p.o1, SCRATCH_M};
    p.w2 = (scratch_work){f, 5.0f, 2.0f, p.o2, SCRATCH_M};
    TC_OK(tc_capture(work_scratch, &p.w1, f->a, f->b, f->pool, &p.g1));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &p.bytes1));
    TC_OK(tc_capture(work_scratch, &p.w2, f->a, f->b, f->pool, &p.g2));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &p.bytes2));
    return p;
}

void scratch_pair_expect(fx *f, const scratch_pair *p) {
    TC_EXPECT_FLOATS(f->a, p->o1, SCRATCH_M, 3.0f + 1.0f + 1.0f);
    TC_EXPECT_FLOATS(f->a, p->o2, SCRATCH_M, 5.0f + 1.0f + 2.0f);
}

void scratch_pair_free(scratch_pair *p) {
    TC_OK(acg_graph_destroy(p->g1));
    TC_OK(acg_graph_destroy(p->g2));
    TC_FREE_BUFFERS(p->o1, p->o2);
}
