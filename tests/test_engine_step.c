/*
 * test_engine_step.c — the engine's parts together, as a serving loop uses them: 20 steps on
 * alternating slots, each planned on a dedicated planning stream through a small stager ring
 * while earlier steps still replay. Every replayed step's metadata must have the expected
 * layout (sink-page padding, exact offsets and lengths), and every output must equal the same
 * step run eagerly, bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

#include "common.h"

#define STEPS 20
#define PAGE 16
#define MAX_SEQ 256
#define WIDTH (MAX_SEQ / PAGE)
#define MAX_BATCH 4
#define ROW 64 /* floats per row of the step's data input */

static const acg_bucket_key buckets[] = {{"decode", 0, 2, 2}, {"decode", 0, 4, 4}};

typedef struct world {
    tc_kernels k;
    acg_attn_plan *plans[2][2]; /* [bucket][slot] */
} world;

static size_t meta_bytes(uint32_t batch) {
    return ((size_t)batch * WIDTH + (batch + 1) + batch) * sizeof(int32_t);
}

static size_t input_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    (void)i;
    return (size_t)b->batch * ROW * sizeof(float);
}

static size_t output_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    return i == 0 ? meta_bytes(b->batch) : (size_t)b->batch * ROW * sizeof(float);
}

/* The step: copy the slot's plan metadata out (what a kernel would read) and compute from the
 * input, y = 0.5 x + (x + 3), through a temporary. */
static acg_status forward(void *user, acg_stream *s, const acg_step_io *io) {
    world *w = user;
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    acg_status st = acg_attn_plan_get_views(w->plans[io->bucket_index][io->slot], &v);
    uint32_t n = io->bucket->batch * ROW;
    acg_buffer *tmp = NULL;
    if (st == ACG_OK) {
        st = acg_copy_d2d(s, io->outputs[0], 0, v.metadata, 0, meta_bytes(io->bucket->batch));
    }
    if (st == ACG_OK) {
        st = acg_stream_alloc(s, (size_t)n * sizeof(float), &tmp);
    }
    if (st == ACG_OK) {
        st = tc_add(s, &w->k, tmp, 0, io->inputs[0], 0, n, 3.0f);
    }
    if (st == ACG_OK) {
        st = tc_copy(s, &w->k, io->outputs[1], 0, tmp, 0, n);
    }
    if (st == ACG_OK) {
        st = tc_axpy(s, &w->k, io->outputs[1], 0, io->inputs[0], 0, n, 0.5f);
    }
    acg_stream_free(s, tmp);
    return st;
}

/* The metadata a step with these rows must produce in a plan of `batch` rows. */
static void expected_meta(const acg_attn_row *rows, uint32_t n, uint32_t batch, int32_t *out) {
    int32_t *table = out, *offsets = out + batch * WIDTH, *lens = offsets + batch + 1;
    int32_t q = 0;
    for (uint32_t r = 0; r < batch; r++) {
        for (uint32_t c = 0; c < WIDTH; c++) {
            table[r * WIDTH + c] = r < n && c < rows[r].n_pages ? (int32_t)rows[r].pages[c]
                                                                : (int32_t)ACG_KV_SINK_PAGE;
        }
        offsets[r] = q;
        q += r < n ? (int32_t)rows[r].q_len : 0;
        lens[r] = r < n ? (int32_t)rows[r].kv_len : 0;
    }
    offsets[batch] = q;
}

typedef struct result {
    uint32_t bucket, rows;
    int32_t meta[MAX_BATCH * WIDTH + 2 * MAX_BATCH + 1];
    float out[MAX_BATCH * ROW];
} result;

static void test_twenty_steps(void **state) {
    tc_fixture *t = *state;
    acg_device *dev = t->dev;
    acg_stream *step = t->s;
    tc_need_graphs(dev, step);
    acg_stream *planning = tc_stream(dev);
    world w;
    memset(&w, 0, sizeof w);
    w.k = t->k;
    for (int b = 0; b < 2; b++) {
        for (int s = 0; s < 2; s++) {
            acg_attn_plan_config pc = ACG_ATTN_PLAN_CONFIG_INIT;
            pc.batch = buckets[b].batch;
            pc.max_seq_len = MAX_SEQ;
            pc.page_size = PAGE;
            pc.max_query_tokens = buckets[b].batch;
            TC_OK(acg_attn_plan_create(dev, &pc, &w.plans[b][s]));
        }
    }
    acg_stager_config sc = ACG_STAGER_CONFIG_INIT;
    sc.depth = 2; /* the ring is reused every other plan */
    acg_stager *stager;
    TC_OK(acg_stager_create(dev, &sc, &stager));
    acg_kv_config kc = ACG_KV_CONFIG_INIT;
    kc.n_pages = 128;
    kc.page_size = PAGE;
    kc.kv_dim = 4;
    acg_kv_cache *kv;
    TC_OK(acg_kv_cache_create(dev, &kc, &kv));

    acg_recipe recipe = tc_recipe("step", &w, input_bytes, forward);
    recipe.n_outputs = 2; /* the plan's metadata and y */
    recipe.output_bytes = output_bytes;
    acg_runner_config c = tc_runner_config(&recipe, buckets, 2, step, ACG_GRAPHS_ON);
    c.n_slots = 2;
    acg_runner *graphs, *eager;
    TC_OK(acg_runner_create(dev, &c, &graphs));
    c.graphs = ACG_GRAPHS_OFF;
    TC_OK(acg_runner_create(dev, &c, &eager));
    for (uint32_t b = 0; b < 2; b++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        TC_OK(acg_runner_get_report(graphs, b, &rep));
        assert_int_equal(rep.state, ACG_BUCKET_CAPTURED);
    }

    result *res = tc_pinned(dev, STEPS * sizeof *res);
    float x[MAX_BATCH * ROW];
    acg_attn_row rows[STEPS][MAX_BATCH];
    static uint32_t pages_at[STEPS][MAX_BATCH][WIDTH]; /* each step's page lists, kept */
    uint32_t n_rows[STEPS];
    uint32_t last_slot[2] = {1, 1};
    for (uint32_t i = 0; i < STEPS; i++) {
        /* Requests come and go: 1 to 4 rows, their KV lengths growing step by step. */
        uint32_t n = 1 + (i * 7) % 4;
        n_rows[i] = n;
        for (uint32_t r = 0; r < n; r++) {
            uint32_t len = 3 + i * 5 + r * 11;
            const uint32_t *pages;
            uint32_t n_pages;
            TC_OK(acg_kv_request_reserve(kv, r, len));
            TC_OK(acg_kv_request_get_pages(kv, r, &pages, &n_pages));
            assert_true(n_pages <= WIDTH);
            memcpy(pages_at[i][r], pages, n_pages * sizeof *pages);
            rows[i][r] = (acg_attn_row){pages_at[i][r], n_pages, len, 1};
        }
        uint32_t b;
        TC_OK(acg_runner_select(graphs, "decode", 0, n, n, &b));
        acg_lease lease;
        TC_OK(acg_runner_lease(graphs, b, &lease));
        assert_int_equal(lease.slot, 1 - last_slot[b]); /* slots alternate per bucket */
        last_slot[b] = lease.slot;
        assert_true(lease.graphed);
        /* Plan on the planning stream once the slot's previous step is done with its plan;
         * the step stream waits for the plan. */
        acg_attn_plan *plan = w.plans[b][lease.slot];
        assert_non_null(lease.slot_free);
        TC_OK(acg_stream_wait_event(planning, lease.slot_free));
        TC_OK(acg_attn_plan_build(plan, stager, planning, rows[i], n));
        TC_OK(acg_stream_wait_event(step, acg_attn_plan_get_event(plan)));
        for (uint32_t k = 0; k < buckets[b].batch * ROW; k++) {
            x[k] = (float)((k * 13 + i * 7) % 97) * 0.125f - 3.0f;
        }
        tc_upload(step, lease.io.inputs[0], x, input_bytes(NULL, 0, &buckets[b]));
        TC_OK(acg_runner_run(graphs, &lease, step));
        res[i].bucket = b;
        res[i].rows = n;
        TC_OK(
            acg_copy_d2h(step, res[i].meta, lease.io.outputs[0], 0, meta_bytes(buckets[b].batch)));
        TC_OK(acg_copy_d2h(step, res[i].out, lease.io.outputs[1], 0,
                           output_bytes(NULL, 1, &buckets[b])));
        TC_OK(acg_runner_release(graphs, &lease));
    }
    TC_OK(acg_stream_synchronize(step));
    TC_OK(acg_stream_synchronize(planning));

    for (uint32_t i = 0; i < STEPS; i++) {
        uint32_t b = res[i].bucket, batch = buckets[b].batch;
        int32_t want[MAX_BATCH * WIDTH + 2 * MAX_BATCH + 1];
        expected_meta(rows[i], n_rows[i], batch, want);
        TC_BYTES_EQUAL(want, res[i].meta, meta_bytes(batch));
        /* The same step eagerly, from the same plan (rebuilt: later steps reused the slot). */
        acg_lease lease;
        TC_OK(acg_runner_lease(eager, b, &lease));
        TC_OK(acg_attn_plan_build(w.plans[b][lease.slot], stager, step, rows[i], n_rows[i]));
        for (uint32_t k = 0; k < batch * ROW; k++) {
            x[k] = (float)((k * 13 + i * 7) % 97) * 0.125f - 3.0f;
        }
        tc_upload(step, lease.io.inputs[0], x, input_bytes(NULL, 0, &buckets[b]));
        TC_OK(acg_runner_run(eager, &lease, step));
        int32_t meta[MAX_BATCH * WIDTH + 2 * MAX_BATCH + 1];
        float out[MAX_BATCH * ROW];
        tc_download(step, meta, lease.io.outputs[0], meta_bytes(batch));
        tc_download(step, out, lease.io.outputs[1], output_bytes(NULL, 1, &buckets[b]));
        TC_BYTES_EQUAL(meta, res[i].meta, meta_bytes(batch));
        TC_BYTES_EQUAL(out, res[i].out, output_bytes(NULL, 1, &buckets[b]));
        TC_OK(acg_runner_release(eager, &lease));
    }
    acg_stager_stats ss = ACG_STAGER_STATS_INIT;
    TC_OK(acg_stager_get_stats(stager, &ss));
    assert_true(ss.copies >= STEPS); /* one copy per plan */

    TC_OK(acg_runner_destroy(graphs));
    TC_OK(acg_runner_destroy(eager));
    TC_OK(acg_pinned_free(res));
    TC_OK(acg_stager_destroy(stager));
    TC_OK(acg_kv_cache_destroy(kv));
    for (int b = 0; b < 2; b++) {
        for (int s = 0; s < 2; s++) {
            TC_OK(acg_attn_plan_destroy(w.plans[b][s]));
        }
    }
    TC_OK(acg_stream_destroy(planning));
}

static const struct CMUnitTest tests[] = {
    TC_FIXTURE_CASE(test_twenty_steps),
};
TC_MAIN("test_engine_step", tests)
