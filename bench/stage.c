/*
 * stage.c — `acg bench stage`: what planning a decode step costs the host, and what it costs
 * the device in copies, host waits and temporary allocations.
 *
 * For batch sizes 1, 8 and 64, a plan with 1,024 page columns (page size 16, max_seq_len
 * 16,384) is rebuilt step after step through one pinned stager. Every step each row gains one
 * token (pages come from a paged KV cache as needed; a row that reaches max_seq_len starts
 * over), so every plan differs from the one before and really uploads. Between plans the
 * host waits for the plan's event, as a serving loop does when it reads a step's outputs before
 * planning the next. Only acg_attn_plan_build is timed. Per plan the bench counts the stager's
 * copies and host waits and the device's allocations: 1, 0 and 0 in steady state. After the timed
 * plans the metadata is copied back and compared with a host-built expectation, so the bench
 * measures correct work.
 */
#include "bench-impl.h"

#include <stdlib.h>
#include <string.h>

#include <acg/engine.h>

const char bench_stage_usage[] = "usage: acg bench stage [--backend B] [--plans N] [--json]\n";

#define PAGE_SIZE 16u
#define MAX_SEQ_LEN 16384u
#define PAGE_COLUMNS (MAX_SEQ_LEN / PAGE_SIZE)
#define MAX_BATCH 64u
#define WARMUP_PLANS 64u
#define TARGET_NS 400000000ull /* timed plans per batch size when --plans is not given */
#define MIN_AUTO_PLANS 200u
#define MAX_AUTO_PLANS 2000000u

static const uint32_t batch_sizes[] = {1, 8, MAX_BATCH};
#define N_BATCHES (sizeof batch_sizes / sizeof batch_sizes[0])

typedef struct stage_result {
    uint32_t batch;
    size_t plan_bytes;
    uint64_t plans;
    double plans_per_s;
    double copies_per_plan;
    double waits_per_plan;
    double temp_allocs_per_plan;
} stage_result;

typedef struct stage_bench {
    bench_common common; /* --backend, --json */
    uint64_t plans;      /* 0: as many as fit in TARGET_NS */
    acg_device *dev;
    const acg_capability *cap;
    acg_stream *stream;
    acg_stager *stager;
    uint32_t depth; /* the stager's ring buffers */
    acg_kv_cache *kv;
    acg_attn_row rows[MAX_BATCH];
    int32_t *host; /* (plan ints) the metadata copied back */
    int32_t *want; /* (plan ints) what it must be */
    stage_result results[N_BATCHES];
} stage_bench;

static size_t plan_ints(uint32_t batch) {
    return (size_t)batch * PAGE_COLUMNS + 2 * (size_t)batch + 1;
}

/* ---- the rows of a step ---------------------------------------------------------------------- */

/* Gives row r kv_len tokens of KV pages and one query token. Returns an exit status. */
static int set_row(stage_bench *b, uint32_t r, uint32_t kv_len) {
    acg_status st = acg_kv_request_reserve(b->kv, r, kv_len);
    if (st != ACG_OK) {
        return tool_fail(st, "reserving KV pages");
    }
    const uint32_t *pages = NULL;
    uint32_t n = 0;
    if ((st = acg_kv_request_get_pages(b->kv, r, &pages, &n)) != ACG_OK) {
        return tool_fail(st, "reading a request's pages");
    }
    b->rows[r] = (acg_attn_row){pages, n, kv_len, 1};
    return TOOL_EXIT_OK;
}

/* One decode step: every row gains a token; a full row is released and starts over. */
static int advance(stage_bench *b, uint32_t batch) {
    for (uint32_t r = 0; r < batch; r++) {
        uint32_t len = b->rows[r].kv_len + 1;
        if (len > MAX_SEQ_LEN) {
            acg_status st = acg_kv_request_release(b->kv, r);
            if (st != ACG_OK) {
                return tool_fail(st, "releasing a request");
            }
            len = 1;
        }
        int rc = set_row(b, r, len);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    return TOOL_EXIT_OK;
}

/* The plan's metadata, packed on the host the way engine.h lays it out. */
static void expected(stage_bench *b, uint32_t batch) {
    int32_t *table = b->want, *offsets = table + (size_t)batch * PAGE_COLUMNS;
    int32_t *lens = offsets + batch + 1;
    memset(b->want, 0, plan_ints(batch) * sizeof(int32_t)); /* the sink page is 0 */
    for (uint32_t r = 0; r < batch; r++) {
        for (uint32_t j = 0; j < b->rows[r].n_pages; j++) {
            table[(size_t)r * PAGE_COLUMNS + j] = (int32_t)b->rows[r].pages[j];
        }
        lens[r] = (int32_t)b->rows[r].kv_len;
        offsets[r + 1] = offsets[r] + 1;
    }
}

/* ---- one batch size -------------------------------------------------------------------------- */

static int verify(stage_bench *b, const acg_attn_plan *plan, uint32_t batch) {
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    acg_status st = acg_attn_plan_get_views(plan, &v);
    if (st != ACG_OK) {
        return tool_fail(st, "reading the plan's views");
    }
    size_t bytes = plan_ints(batch) * sizeof(int32_t);
    if ((st = acg_copy_d2h(b->stream, b->host, v.metadata, 0, bytes)) != ACG_OK) {
        return tool_fail(st, "copying the metadata back");
    }
    expected(b, batch);
    if (memcmp(b->host, b->want, bytes) != 0) {
        size_t i = 0;
        while (b->host[i] == b->want[i]) {
            i++;
        }
        return tool_failf("bench stage: wrong metadata",
                          "batch %u: int %zu of %zu is %d on the device, expected %d", batch, i,
                          plan_ints(batch), b->host[i], b->want[i]);
    }
    return TOOL_EXIT_OK;
}

/* Builds plans for `batch` rows, warm-up first, and measures. Returns an exit status. */
static int run_batch(stage_bench *b, uint32_t batch, stage_result *res) {
    acg_attn_plan_config pc = ACG_ATTN_PLAN_CONFIG_INIT;
    pc.batch = batch;
    pc.max_seq_len = MAX_SEQ_LEN;
    pc.page_size = PAGE_SIZE;
    pc.max_query_tokens = batch;
    acg_attn_plan *plan = NULL;
    acg_status st = acg_attn_plan_create(b->dev, &pc, &plan);
    if (st != ACG_OK) {
        return tool_fail(st, "creating the plan");
    }
    int rc = TOOL_EXIT_OK;
    /* Rows start at different lengths, so they cross page boundaries at different steps. */
    for (uint32_t r = 0; r < batch && rc == TOOL_EXIT_OK; r++) {
        rc = set_row(b, r, 1 + (r * 2477u) % (MAX_SEQ_LEN / 2));
    }
    acg_stager_stats s0 = ACG_STAGER_STATS_INIT, s1 = ACG_STAGER_STATS_INIT;
    acg_memory_stats m0 = ACG_MEMORY_STATS_INIT, m1 = ACG_MEMORY_STATS_INIT;
    uint64_t plans = 0, build_ns = 0;
    for (uint32_t i = 0; i < WARMUP_PLANS && rc == TOOL_EXIT_OK; i++) {
        if ((rc = advance(b, batch)) == TOOL_EXIT_OK &&
            (st = acg_attn_plan_build(plan, b->stager, b->stream, b->rows, batch)) != ACG_OK) {
            rc = tool_fail(st, "building a plan");
        }
    }
    if (rc != TOOL_EXIT_OK) {
        goto out_release;
    }
    if ((st = acg_stager_get_stats(b->stager, &s0)) != ACG_OK ||
        (st = acg_device_get_memory_stats(b->dev, &m0)) != ACG_OK) {
        rc = tool_fail(st, "reading the counters");
        goto out_release;
    }
    uint64_t t_end = tool_now_ns() + TARGET_NS;
    while (b->plans ? plans < b->plans
                    : plans < MAX_AUTO_PLANS && (plans < MIN_AUTO_PLANS || tool_now_ns() < t_end)) {
        if ((rc = advance(b, batch)) != TOOL_EXIT_OK) {
            goto out_release;
        }
        uint64_t t0 = tool_now_ns();
        st = acg_attn_plan_build(plan, b->stager, b->stream, b->rows, batch);
        build_ns += tool_now_ns() - t0;
        /* The step that reads the plan runs before the next plan, as in a serving loop, where
         * the host reads each step's outputs before planning the next (not timed). */
        if (st == ACG_OK) {
            st = acg_event_synchronize(acg_attn_plan_get_event(plan));
        }
        if (st != ACG_OK) {
            rc = tool_fail(st, "building a plan");
            goto out_release;
        }
        plans++;
    }
    if ((st = acg_stager_get_stats(b->stager, &s1)) != ACG_OK ||
        (st = acg_device_get_memory_stats(b->dev, &m1)) != ACG_OK) {
        rc = tool_fail(st, "reading the counters");
        goto out_release;
    }
    if ((rc = verify(b, plan, batch)) != TOOL_EXIT_OK) {
        goto out_release;
    }
    res->batch = batch;
    res->plan_bytes = plan_ints(batch) * sizeof(int32_t);
    res->plans = plans;
    res->plans_per_s = (double)plans * 1e9 / (double)(build_ns ? build_ns : 1);
    res->copies_per_plan = (double)(s1.copies - s0.copies) / (double)plans;
    res->waits_per_plan = (double)(s1.waits - s0.waits) / (double)plans;
    res->temp_allocs_per_plan = (double)(m1.allocations - m0.allocations) / (double)plans;

out_release:
    for (uint32_t r = 0; r < batch; r++) {
        acg_kv_request_release(b->kv, r); /* NOT_FOUND for rows never admitted */
    }
    if ((st = acg_attn_plan_destroy(plan)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the plan");
    }
    return rc;
}

/* ---- report ---------------------------------------------------------------------------------- */

static int report_json(const stage_bench *b) {
    tool_json j;
    tool_json_begin(&j, stdout);
    tool_json_object_begin(&j, NULL);
    bench_json_device(&j, b->dev);
    tool_json_uint(&j, "page_size", PAGE_SIZE);
    tool_json_uint(&j, "max_seq_len", MAX_SEQ_LEN);
    tool_json_array_begin(&j, "results");
    for (size_t i = 0; i < N_BATCHES; i++) {
        const stage_result *r = &b->results[i];
        tool_json_object_begin(&j, NULL);
        tool_json_uint(&j, "batch", r->batch);
        tool_json_uint(&j, "page_columns", PAGE_COLUMNS);
        tool_json_uint(&j, "plan_bytes", r->plan_bytes);
        tool_json_uint(&j, "plans", r->plans);
        tool_json_number(&j, "plans_per_s", r->plans_per_s);
        tool_json_number(&j, "copies_per_plan", r->copies_per_plan);
        tool_json_number(&j, "waits_per_plan", r->waits_per_plan);
        tool_json_number(&j, "temp_allocs_per_plan", r->temp_allocs_per_plan);
        tool_json_bool(&j, "verified", true);
        tool_json_object_end(&j);
    }
    tool_json_array_end(&j);
    tool_json_object_end(&j);
    return tool_json_end(&j);
}

static void report_table(const stage_bench *b) {
    bench_print_title(&b->common, b->dev);
    printf("decode plans: page size %u, max_seq_len %u, one token more per row per plan\n\n",
           PAGE_SIZE, MAX_SEQ_LEN);
    static const char *const headers[] = {"batch",       "page cols",  "plan bytes",
                                          "plans",       "plans/s",    "us/plan",
                                          "copies/plan", "waits/plan", "temp allocs/plan"};
    static const int widths[] = {5, 9, 10, 8, 10, 8, 11, 10, 16};
    tool_table t;
    tool_table_begin(&t, stdout, 9, widths, headers);
    for (size_t i = 0; i < N_BATCHES; i++) {
        const stage_result *r = &b->results[i];
        tool_table_cell(&t, "%u", r->batch);
        tool_table_cell(&t, "%u", PAGE_COLUMNS);
        tool_table_cell(&t, "%zu", r->plan_bytes);
        tool_table_cell(&t, "%llu", (unsigned long long)r->plans);
        tool_table_cell(&t, "%.0f", r->plans_per_s);
        tool_table_cell(&t, "%.2f", 1e6 / r->plans_per_s);
        tool_table_cell(&t, "%.3f", r->copies_per_plan);
        tool_table_cell(&t, "%.3f", r->waits_per_plan);
        tool_table_cell(&t, "%.3f", r->temp_allocs_per_plan);
    }
    printf("\nonly acg_attn_plan_build is timed; goal in steady state: 1 copy, 0 waits, 0 "
           "temporary allocations per plan\n");
    printf("between plans the host waits (untimed) for the plan's copy, as a serving loop "
           "reading each step's outputs does; a wait counted above is the stager's own (ring "
           "of %u buffers)\n",
           b->depth);
    printf("checked: the metadata on the device equals the host-built layout after the last "
           "plan of each batch size\n");
}

/* ---- setup, run, teardown -------------------------------------------------------------------- */

static int run(stage_bench *b) {
    acg_status st = ACG_OK;
    int rc = bench_device_open(&b->common, &b->dev, &b->cap);
    if (rc != TOOL_EXIT_OK) {
        return rc;
    }
    rc = TOOL_EXIT_FAILURE;
    if ((st = acg_stream_create(b->dev, &b->stream)) != ACG_OK) {
        rc = tool_fail(st, "creating a stream");
        goto out_close_device;
    }
    /* Ring buffers as large as the largest plan: the stager never grows while measuring. */
    acg_stager_config sc = ACG_STAGER_CONFIG_INIT;
    sc.buffer_bytes = plan_ints(MAX_BATCH) * sizeof(int32_t);
    b->depth = sc.depth;
    if ((st = acg_stager_create(b->dev, &sc, &b->stager)) != ACG_OK) {
        rc = tool_fail(st, "creating the stager");
        goto out_destroy_stream;
    }
    acg_kv_config kc = ACG_KV_CONFIG_INIT;
    kc.n_pages = MAX_BATCH * PAGE_COLUMNS + 1; /* every row at max_seq_len, and the sink */
    kc.page_size = PAGE_SIZE;
    kc.kv_dim = 1; /* the pages are only handed out here, never read */
    if ((st = acg_kv_cache_create(b->dev, &kc, &b->kv)) != ACG_OK) {
        rc = tool_fail(st, "creating the KV cache");
        goto out_destroy_stager;
    }
    b->host = malloc(plan_ints(MAX_BATCH) * sizeof(int32_t));
    b->want = malloc(plan_ints(MAX_BATCH) * sizeof(int32_t));
    if (!b->host || !b->want) {
        rc = tool_failf("bench stage", "out of host memory");
        goto out_free_host;
    }
    rc = TOOL_EXIT_OK;
    for (size_t i = 0; i < N_BATCHES && rc == TOOL_EXIT_OK; i++) {
        rc = run_batch(b, batch_sizes[i], &b->results[i]);
    }
    if (rc == TOOL_EXIT_OK) {
        if (b->common.json) {
            rc = report_json(b);
        } else {
            report_table(b);
        }
    }

    /* Teardown failures after a good run are failures too: they are library bugs. */
out_free_host:
    free(b->host);
    free(b->want);
    if ((st = acg_kv_cache_destroy(b->kv)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the KV cache");
    }
out_destroy_stager:
    if ((st = acg_stager_destroy(b->stager)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the stager");
    }
out_destroy_stream:
    if ((st = acg_stream_destroy(b->stream)) != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "destroying the stream");
    }
out_close_device:
    return bench_device_close(b->dev, rc);
}

/* ---- command line ---------------------------------------------------------------------------- */

int bench_stage(int argc, char **argv) {
    stage_bench b;
    memset(&b, 0, sizeof b);
    b.common = (bench_common){"bench stage", bench_stage_usage, "cpu", false};
    const bench_count counts[] = {{"--plans", MAX_AUTO_PLANS, &b.plans}};
    int rc = bench_parse_counts(argc, argv, &b.common, counts, 1);
    if (rc != BENCH_OPTION_TAKEN) {
        return rc;
    }
    return run(&b);
}
