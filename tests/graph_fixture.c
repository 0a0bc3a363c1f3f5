/* graph_fixture.c — the graph suites' fixture and work sequences (graph_fixture.h). */
#include "graph_fixture.h"

#include <stdlib.h>
#include <string.h>

int graph_setup(void **state) {
    fx *f = calloc(1, sizeof *f);
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
    *state = f;
    return 0;
}

int graph_teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_event_destroy(f->e1));
    TC_OK(acg_event_destroy(f->e2));
    TC_OK(acg_pinned_free(f->pin_in));
    TC_OK(acg_pinned_free(f->pin_out));
    TC_OK(acg_buffer_free(f->x));
    TC_OK(acg_buffer_free(f->y));
    TC_OK(acg_buffer_free(f->z));
    TC_OK(acg_buffer_free(f->w));
    TC_OK(acg_graph_pool_destroy(f->pool));
    TC_OK(acg_stream_destroy(f->a));
    TC_OK(acg_stream_destroy(f->b));
    tc_close(f->dev);
    free(f);
    return 0;
}

/* (a) a chain of kernels on one stream; the result lands in f->out. */
acg_status work_chain(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    TRY(tc_fill(a, &f->k, f->x, 0, N, 1.25f));         /* x = 1.25 */
    TRY(tc_add(a, &f->k, f->y, 0, f->x, 0, N, 0.5f));  /* y = 1.75 */
    TRY(tc_axpy(a, &f->k, f->y, 0, f->x, 0, N, 1.5f)); /* y = 3.625 */
    TRY(tc_copy(a, &f->k, f->out, 0, f->y, 0, N));     /* out = 3.625 */
    TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, f->scalar));
    if (f->extra_kernel) {
        TRY(tc_add(a, &f->k, f->out, 0, f->out, 0, N, 1.0f));
    }
    return ACG_OK;
}

void chain_reference(float *want, float scalar) { tc_splat(want, N, 3.625f + scalar); }

/* (b) fork/join: b forks from a at e1, works, and a joins it at e2. */
acg_status work_fork_join(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    TRY(tc_fill(a, &f->k, f->x, 0, N, 2.0f)); /* x = 2 */
    TRY(acg_event_record(f->e1, a));
    TRY(acg_stream_wait_event(b, f->e1));
    TRY(tc_add(b, &f->k, f->y, 0, f->x, 0, N, 3.0f)); /* y = 5 (on b) */
    TRY(acg_event_record(f->e2, b));
    TRY(tc_add(a, &f->k, f->w, 0, f->x, 0, N, 1.0f)); /* w = 3 (on a, concurrently) */
    TRY(acg_stream_wait_event(a, f->e2));
    TRY(tc_axpy(a, &f->k, f->w, 0, f->y, 0, N, 0.5f)); /* w = 5.5 */
    return ACG_OK;
}

/* (c) copies: h2d from pinned, d2d, fill, a kernel, d2h into pinned. */
acg_status work_copies(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    (void)b;
    uint32_t one;
    float v = 1.0f;
    memcpy(&one, &v, 4);
    TRY(acg_copy_h2d(a, f->x, 0, f->pin_in, NB));
    TRY(acg_copy_d2d(a, f->y, 0, f->x, 0, NB));
    TRY(acg_fill(a, f->z, 0, NB, one, 4));
    TRY(tc_axpy(a, &f->k, f->z, 0, f->y, 0, N, 2.0f)); /* z = 2 * in + 1 */
    TRY(acg_copy_d2h(a, f->pin_out, f->z, 0, NB));
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
    TRY(acg_stream_alloc(a, (size_t)sw->n * sizeof(float), &tmp));
    TRY(tc_fill(a, &sw->f->k, tmp, 0, sw->n, sw->fill));
    for (int i = 0; i < 4; i++) {
        TRY(tc_add(a, &sw->f->k, tmp, 0, tmp, 0, sw->n, 0.25f));
    }
    TRY(tc_add(a, &sw->f->k, sw->out, 0, tmp, 0, sw->n, sw->add));
    return ACG_OK;
}

void scratch_pair_capture(fx *f, scratch_pair *p) {
    const size_t bytes = (size_t)SCRATCH_M * sizeof(float);
    *p = (scratch_pair){.o1 = tc_buffer(f->dev, bytes), .o2 = tc_buffer(f->dev, bytes)};
    p->w1 = (scratch_work){f, 3.0f, 1.0f, p->o1, SCRATCH_M};
    p->w2 = (scratch_work){f, 5.0f, 2.0f, p->o2, SCRATCH_M};
    TC_OK(tc_capture(work_scratch, &p->w1, f->a, f->b, f->pool, &p->g1));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &p->bytes1));
    TC_OK(tc_capture(work_scratch, &p->w2, f->a, f->b, f->pool, &p->g2));
    TC_OK(acg_graph_pool_get_bytes(f->pool, &p->bytes2));
}

void expect_floats(fx *f, acg_buffer *buf, size_t n, float v) {
    float *back = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    assert_non_null(back);
    assert_non_null(want);
    tc_download(f->a, back, buf, n * sizeof(float));
    tc_splat(want, n, v);
    TC_BYTES_EQUAL(back, want, n * sizeof(float));
    free(back);
    free(want);
}

void scratch_pair_expect(fx *f, const scratch_pair *p) {
    expect_floats(f, p->o1, SCRATCH_M, 3.0f + 1.0f + 1.0f);
    expect_floats(f, p->o2, SCRATCH_M, 5.0f + 1.0f + 2.0f);
}

void scratch_pair_free(scratch_pair *p) {
    TC_OK(acg_graph_destroy(p->g1));
    TC_OK(acg_graph_destroy(p->g2));
    TC_OK(acg_buffer_free(p->o1));
    TC_OK(acg_buffer_free(p->o2));
}
