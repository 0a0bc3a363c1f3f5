/* runner.c — creating and destroying capture runners: buckets and their slots, static buffers,
 * the capture budget, the graph switches, and rank agreement (serve.c serves steps).
 *
 * Creation follows a fixed order, because each step depends on the one before: check that the
 * recipe can be captured at all (before allocating anything), claim every static buffer, measure
 * each bucket's eager peak, order the buckets by it, warm every slot up, then capture largest
 * first into one pool so that smaller buckets reuse the largest one's memory, and finally agree
 * with the other ranks on what was kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acg/engine.h>

#include "runner-impl.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool acg__runner_larger(const acg_bucket_key *a, const acg_bucket_key *b) {
    return a->batch != b->batch ? a->batch > b->batch : a->tokens > b->tokens;
}

static const char *const env_names[] = {
    "ACG_REQUIRE_GRAPHS", /* 1: a bucket that cannot be captured is a start-up error */
    "ACG_DISABLE_GRAPHS", /* 1: capture nothing, serve eagerly */
    "ACG_NUM_SLOTS",      /* slots per bucket: 1 or 2 */
};

const acg__env_table acg__engine_env = {"engine", env_names,
                                        sizeof env_names / sizeof env_names[0]};

/* A min-reduction over the ranks, its failure named. The detail is copied first: formatting
 * acg_last_error() into itself would garble it. */
static acg_status agree_min(const acg_comm *comm, int32_t *values, size_t n) {
    acg_status st = comm->allreduce_min_i32(comm->user, values, n);
    if (st == ACG_OK) {
        return ACG_OK;
    }
    char detail[512];
    acg__error_copy(detail, sizeof detail);
    return acg__error(st, "acg_runner_create: the comm's allreduce_min_i32 failed (%s): %s",
                      acg_status_name(st), detail);
}

static acg_graph_mode resolve_mode(acg_graph_mode mode) {
    if (mode != ACG_GRAPHS_AUTO) {
        return mode;
    }
    if (acg__env_flag("ACG_DISABLE_GRAPHS")) {
        return ACG_GRAPHS_OFF;
    }
    return acg__env_flag("ACG_REQUIRE_GRAPHS") ? ACG_GRAPHS_REQUIRE : ACG_GRAPHS_ON;
}

/* Slots per bucket: the config's (check_config checks it), else ACG_NUM_SLOTS, else 2. */
static acg_status resolve_slots(uint32_t n, uint32_t *out) {
    uint64_t v = n;
    if (n == 0) {
        acg_status st = acg__env_u64("acg_runner_create", "ACG_NUM_SLOTS", 1, MAX_SLOTS, 2, &v);
        if (st != ACG_OK) {
            return st;
        }
    }
    *out = (uint32_t)v;
    return ACG_OK;
}

static void destroy_runner(acg_runner *r);

acg_status acg__runner_check(const acg_runner *r, const char *fn) {
    if (!acg__handle_use(r, ACG__HANDLE_RUNNER)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %p is not a live runner", fn,
                          (const void *)r);
    }
    return ACG_OK;
}

/* ---- static buffers ----------------------------------------------------------------------- */

static size_t max_bytes(const acg_runner *r, bool input, uint32_t i) {
    size_t most = 0;
    for (uint32_t b = 0; b < r->n_buckets; b++) {
        const acg_bucket_key *k = &r->buckets[b].report.key;
        size_t n = input ? r->recipe.input_bytes(r->recipe.user, i, k)
                         : r->recipe.output_bytes(r->recipe.user, i, k);
        most = n > most ? n : most;
    }
    return most;
}

/* The runner's static buffers and their views are its own: acg_buffer_free refuses them. */
static const char owner_what[] = "runner";

/* A view of buf sized for bucket k (whole buffer when the recipe says 0 or more). */
static acg_status bucket_view(const acg_runner *r, acg_buffer *buf, bool input, uint32_t i,
                              const acg_bucket_key *k, acg_buffer **out) {
    size_t n = input ? r->recipe.input_bytes(r->recipe.user, i, k)
                     : r->recipe.output_bytes(r->recipe.user, i, k);
    size_t full = acg_buffer_get_size(buf);
    return acg__buffer_view_owned(buf, 0, n == 0 || n > full ? full : n, r, owner_what, out);
}

static void release_statics(acg_runner *r);

/* Allocates the static inputs (per slot) and outputs at the largest shape, and every bucket's
 * views of them. Interned: smaller buckets never allocate, they slice. On a failure nothing
 * stays claimed, so a later call (the next lease, with graphs off) starts afresh. */
acg_status acg__runner_claim_statics(acg_runner *r) {
    const acg_recipe *rc = &r->recipe;
    acg_status st = ACG_OK;
    for (uint32_t s = 0; s < r->n_slots && st == ACG_OK; s++) {
        for (uint32_t i = 0; i < rc->n_inputs && st == ACG_OK; i++) {
            size_t n = max_bytes(r, true, i);
            st = acg__buffer_alloc_owned(r->dev, n ? n : 1, r, owner_what,
                                         &r->inputs[s * rc->n_inputs + i]);
        }
    }
    for (uint32_t i = 0; i < rc->n_outputs && st == ACG_OK; i++) {
        size_t n = max_bytes(r, false, i);
        st = acg__buffer_alloc_owned(r->dev, n ? n : 1, r, owner_what, &r->outputs[i]);
    }
    for (uint32_t b = 0; b < r->n_buckets && st == ACG_OK; b++) {
        bucket *bk = &r->buckets[b];
        for (uint32_t s = 0; s < r->n_slots && st == ACG_OK; s++) {
            for (uint32_t i = 0; i < rc->n_inputs && st == ACG_OK; i++) {
                uint32_t at = s * rc->n_inputs + i;
                st = bucket_view(r, r->inputs[at], true, i, &bk->report.key, &bk->inputs[at]);
            }
        }
        for (uint32_t i = 0; i < rc->n_outputs && st == ACG_OK; i++) {
            st = bucket_view(r, r->outputs[i], false, i, &bk->report.key, &bk->outputs[i]);
        }
    }
    if (st != ACG_OK) {
        release_statics(r);
    }
    r->statics_ready = st == ACG_OK;
    return st;
}

/* Frees n of the runner's buffers (NULL arrays and entries are skipped), views before parents. */
static void free_all(acg_runner *r, acg_buffer **bufs, uint32_t n) {
    for (uint32_t i = 0; bufs != NULL && i < n; i++) {
        acg__buffer_free_owned(bufs[i], r, "acg_runner_destroy");
        bufs[i] = NULL;
    }
}

/* Frees the static buffers and their views, however far claim_statics got. */
static void release_statics(acg_runner *r) {
    uint32_t n_inputs = r->n_slots * r->recipe.n_inputs;
    for (uint32_t b = 0; r->buckets != NULL && b < r->n_buckets; b++) {
        free_all(r, r->buckets[b].inputs, n_inputs);
        free_all(r, r->buckets[b].outputs, r->recipe.n_outputs);
    }
    free_all(r, r->inputs, n_inputs);
    free_all(r, r->outputs, r->recipe.n_outputs);
    r->statics_ready = false;
}

/* ---- running a step ----------------------------------------------------------------------- */

acg_step_io acg__runner_step_io(const acg_runner *r, uint32_t b, uint32_t slot) {
    const bucket *bk = &r->buckets[b];
    acg_step_io io = {&bk->report.key, b, slot, &bk->inputs[slot * r->recipe.n_inputs],
                      bk->outputs};
    return io;
}

/* The recipe's callbacks. A failure names the recipe, the callback and the bucket, followed by
 * the detail the callback set (acg_set_last_error, or a failed acg call's), if it set one: a
 * detail left over from an earlier failure would mislead. */

acg_status acg__runner_call_recipe(const acg_runner *r, int cb, uint32_t part, acg_stream *s,
                                   const acg_step_io *io) {
    const acg_recipe *rc = &r->recipe;
    uint64_t serial = acg__error_serial();
    acg_status st = cb == CB_FORWARD  ? rc->forward(rc->user, s, io)
                    : cb == CB_REGION ? rc->region(rc->user, part, s, io)
                                      : rc->between(rc->user, part, s, io);
    if (st == ACG_OK) {
        return ACG_OK;
    }
    static const char *const names[] = {"forward", "region", "between"};
    char what[160];
    if (cb == CB_FORWARD) {
        snprintf(what, sizeof what, "recipe %s: forward", rc->name);
    } else {
        snprintf(what, sizeof what, "recipe %s: %s %u", rc->name, names[cb], part);
    }
    const acg_bucket_key *k = io->bucket;
    if (acg__error_serial() == serial) {
        return acg__error(st,
                          "%s for bucket (%s, %llu, batch %u, tokens %u) returned %s and set "
                          "no detail",
                          what, k->label, (unsigned long long)k->key_info, k->batch, k->tokens,
                          acg_status_name(st));
    }
    char detail[1024];
    acg__error_copy(detail, sizeof detail);
    return acg__error(st, "%s for bucket (%s, %llu, batch %u, tokens %u) failed: %s", what,
                      k->label, (unsigned long long)k->key_info, k->batch, k->tokens, detail);
}

acg_status acg__runner_run_eager(acg_runner *r, uint32_t b, uint32_t slot, acg_stream *s) {
    acg_step_io io = acg__runner_step_io(r, b, slot);
    if (!r->piecewise) {
        return acg__runner_call_recipe(r, CB_FORWARD, 0, s, &io);
    }
    acg_status st = ACG_OK;
    for (uint32_t p = 0; p < r->recipe.n_regions && st == ACG_OK; p++) {
        st = acg__runner_call_recipe(r, CB_REGION, p, s, &io);
        if (st == ACG_OK && p + 1 < r->recipe.n_regions) {
            st = acg__runner_call_recipe(r, CB_BETWEEN, p, s, &io);
        }
    }
    return st;
}

/* Captures one part (the whole forward, or one region) of a slot into the runner's pool. A
 * whole step writes its outputs into graph scratch, copied into the static outputs at the end:
 * the outputs outlive the pool memory that other buckets' graphs reuse. */
static acg_status capture_part(acg_runner *r, uint32_t b, uint32_t slot, uint32_t part,
                               acg_graph **out) {
    const acg_recipe *rc = &r->recipe;
    acg_stream *s = r->stream;
    acg_step_io io = acg__runner_step_io(r, b, slot);
    acg_buffer *scratch_out[16];
    acg_status st = acg_stream_begin_capture(s, r->pool);
    if (st != ACG_OK) {
        return st;
    }
    if (!r->piecewise) {
        if (rc->n_outputs > 16) {
            st = acg__error(ACG_ERR_UNSUPPORTED, "acg_runner_create: more than 16 outputs");
        }
        for (uint32_t i = 0; i < rc->n_outputs && st == ACG_OK; i++) {
            st = acg_stream_alloc(s, acg_buffer_get_size(io.outputs[i]), &scratch_out[i]);
        }
        acg_step_io cap = io;
        cap.outputs = scratch_out;
        if (st == ACG_OK) {
            st = acg__runner_call_recipe(r, CB_FORWARD, 0, s, &cap);
        }
        for (uint32_t i = 0; i < rc->n_outputs && st == ACG_OK; i++) {
            st = acg_copy_d2d(s, io.outputs[i], 0, scratch_out[i], 0,
                              acg_buffer_get_size(io.outputs[i]));
        }
    } else {
        st = acg__runner_call_recipe(r, CB_REGION, part, s, &io);
    }
    char why[512];
    snprintf(why, sizeof why, "%s", acg_last_error());
    acg_status end = acg_stream_end_capture(s, out);
    if (st == ACG_OK && end == ACG_OK) {
        /* The first replay's upload falls at start-up, not in the first served step. */
        end = acg_graph_upload(*out, s);
        if (end != ACG_OK) {
            acg_graph_discard(*out);
            *out = NULL;
        }
    }
    if (st != ACG_OK) {
        /* The forward's own error says more than the end of an invalidated capture. */
        if (end == ACG_OK) {
            acg_graph_discard(*out);
        }
        return acg__error(st, "%s", why);
    }
    return end;
}

/* Every part of every slot (warm_up ran them eagerly before any capture); all or nothing. The
 * bucket's graph memory is its largest graph's scratch: its slots and regions replay one at a
 * time, like every graph of the pool, and lay their scratch out over the same memory. */
static acg_status capture_bucket(acg_runner *r, uint32_t b) {
    bucket *bk = &r->buckets[b];
    acg_status st = ACG_OK;
    uint64_t most = 0;
    for (uint32_t slot = 0; slot < r->n_slots && st == ACG_OK; slot++) {
        for (uint32_t p = 0; p < r->n_parts && st == ACG_OK; p++) {
            acg_graph **g = &bk->graphs[slot * r->n_parts + p];
            st = capture_part(r, b, slot, p, g);
            uint64_t bytes = st == ACG_OK ? acg__graph_scratch_bytes(*g) : 0;
            most = bytes > most ? bytes : most;
        }
    }
    bk->report.graph_bytes = st == ACG_OK ? most : 0;
    return st;
}

static void drop_graphs(acg_runner *r, uint32_t b) {
    bucket *bk = &r->buckets[b];
    for (uint32_t i = 0; bk->graphs != NULL && i < r->n_slots * r->n_parts; i++) {
        acg_graph_discard(bk->graphs[i]);
        bk->graphs[i] = NULL;
    }
}

/* ---- traces: what creation does, bucket by bucket (include/acg/trace.h) ------------------- */

/* A bucket's span ("measure", "warm-up", "capture"), naming it as every creation event does:
 * its index in the caller's order, label and shape; `k` is its place in the largest-first
 * order, from 1 (0: not given). */
static void trace_bucket_begin(acg__trace_span *sp, const char *name, const acg_runner *r,
                               uint32_t b, uint32_t k) {
    sp->on = false;
    if (!acg__trace_on(ACG_TRACE_ENGINE)) {
        return;
    }
    const acg_bucket_key *key = &r->buckets[b].report.key;
    acg_trace_arg args[] = {ACG__TRACE_U("bucket", b),
                            ACG__TRACE_S("label", key->label),
                            ACG__TRACE_U("batch", key->batch),
                            ACG__TRACE_U("tokens", key->tokens),
                            ACG__TRACE_U("k", k),
                            ACG__TRACE_U("n", r->n_buckets)};
    acg__trace_begin(sp, ACG_TRACE_ENGINE, name, args, k > 0 ? 6 : 4);
}

/* The end of a bucket's capture span: what became of it and what its graphs cost. */
static void trace_capture_end(acg__trace_span *sp, const acg_runner *r, uint32_t b) {
    if (!sp->on) {
        return;
    }
    const acg_bucket_report *rep = &r->buckets[b].report;
    size_t pool = 0;
    if (r->pool != NULL) {
        acg_graph_pool_get_bytes(r->pool, &pool);
    }
    bool captured = rep->state == ACG_BUCKET_CAPTURED;
    acg_trace_arg args[] = {ACG__TRACE_B("captured", captured),
                            ACG__TRACE_U("graph_bytes", rep->graph_bytes),
                            ACG__TRACE_U("pool_growth", rep->pool_growth),
                            ACG__TRACE_U("pool_bytes", pool),
                            ACG__TRACE_U("eager_peak", rep->eager_peak),
                            ACG__TRACE_D("capture_ms", rep->capture_ms),
                            ACG__TRACE_S("reason", rep->reason)};
    acg__trace_end(sp, args, captured ? 6 : 7);
}

static const char *mode_name(acg_graph_mode mode) {
    return mode == ACG_GRAPHS_OFF ? "off" : mode == ACG_GRAPHS_REQUIRE ? "require" : "on";
}

/* The span of a whole creation, from the first allocation to the last capture. */
static void trace_create_begin(acg__trace_span *sp, const acg_runner_config *c, acg_graph_mode mode,
                               uint32_t n_slots) {
    sp->on = false;
    if (!acg__trace_on(ACG_TRACE_ENGINE)) {
        return;
    }
    acg_trace_arg args[] = {ACG__TRACE_S("recipe", c->recipe->name),
                            ACG__TRACE_U("buckets", c->n_buckets), ACG__TRACE_U("slots", n_slots),
                            ACG__TRACE_S("graphs", mode_name(mode)),
                            ACG__TRACE_B("piecewise", c->piecewise)};
    acg__trace_begin(sp, ACG_TRACE_ENGINE, "runner create", args, ACG__TRACE_N(args));
}

static void trace_create_end(acg__trace_span *sp, const acg_runner *r, acg_status st) {
    if (!sp->on) {
        return;
    }
    uint32_t captured = 0, dropped = 0;
    size_t pool = 0;
    for (uint32_t b = 0; st == ACG_OK && b < r->n_buckets; b++) {
        captured += r->buckets[b].report.state == ACG_BUCKET_CAPTURED;
        dropped += r->buckets[b].report.state == ACG_BUCKET_DROPPED;
    }
    if (st == ACG_OK && r->pool != NULL) {
        acg_graph_pool_get_bytes(r->pool, &pool);
    }
    acg_trace_arg args[] = {ACG__TRACE_B("ok", st == ACG_OK), ACG__TRACE_U("captured", captured),
                            ACG__TRACE_U("dropped", dropped), ACG__TRACE_U("pool_bytes", pool)};
    acg__trace_end(sp, args, ACG__TRACE_N(args));
}

static void drop(acg_runner *r, uint32_t b, acg_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void drop(acg_runner *r, uint32_t b, acg_status status, const char *fmt, ...) {
    bucket *bk = &r->buckets[b];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bk->report.reason, sizeof bk->report.reason, fmt, ap);
    va_end(ap);
    drop_graphs(r, b);
    bk->report.state = ACG_BUCKET_DROPPED;
    bk->report.graph_bytes = 0;
    bk->status = status;
    acg__log(ACG_LOG_ERROR, "runner %s: bucket (%s, %llu, batch %u, tokens %u) served eagerly: %s",
             r->recipe.name, bk->label, (unsigned long long)bk->report.key.key_info,
             bk->report.key.batch, bk->report.key.tokens, bk->report.reason);
    if (acg__trace_on(ACG_TRACE_ENGINE)) {
        acg_trace_arg args[] = {ACG__TRACE_U("bucket", b), ACG__TRACE_S("label", bk->label),
                                ACG__TRACE_U("batch", bk->report.key.batch),
                                ACG__TRACE_U("tokens", bk->report.key.tokens),
                                ACG__TRACE_S("reason", bk->report.reason)};
        acg__trace_emit(ACG_TRACE_ENGINE, ACG_TRACE_INSTANT, "bucket dropped", acg__trace_now(), 0,
                        0, args, ACG__TRACE_N(args));
    }
}

/* ---- the budget: eager peaks, then what capture may take ---------------------------------- */

/* Runs each bucket's step once, eagerly, in slot 0, and keeps the peak of the device's memory
 * accounting above what was in use before: the bucket's eager peak (its temporaries). Each run
 * is waited for, so its stream-ordered frees are reclaimed before the next one measures. The
 * run is also slot 0's first warm-up. */
static acg_status measure_peaks(acg_runner *r, uint64_t *largest) {
    acg_status st = ACG_OK;
    *largest = 0;
    for (uint32_t b = 0; b < r->n_buckets && st == ACG_OK; b++) {
        acg_memory_stats m = ACG_MEMORY_STATS_INIT;
        acg__trace_span span;
        trace_bucket_begin(&span, "measure", r, b, 0);
        st = acg_stream_synchronize(r->stream);
        if (st == ACG_OK) {
            st = acg_device_reset_peak_memory(r->dev);
        }
        if (st == ACG_OK) {
            st = acg_device_get_memory_stats(r->dev, &m);
        }
        uint64_t base = m.bytes_in_use;
        if (st == ACG_OK) {
            st = acg__runner_run_eager(r, b, 0, r->stream);
        }
        if (st == ACG_OK) {
            st = acg_stream_synchronize(r->stream);
        }
        if (st == ACG_OK) {
            st = acg_device_get_memory_stats(r->dev, &m);
        }
        if (st == ACG_OK) {
            uint64_t peak = m.peak_bytes - base;
            r->buckets[b].report.eager_peak = peak;
            *largest = peak > *largest ? peak : *largest;
        }
        acg_trace_arg done[] = {ACG__TRACE_B("ok", st == ACG_OK),
                                ACG__TRACE_U("eager_peak", r->buckets[b].report.eager_peak)};
        acg__trace_end(&span, done, ACG__TRACE_N(done));
    }
    return st;
}

/* Largest first, by memory: the buckets in decreasing eager peak, every rank's largest (KiB,
 * agreed with a min-reduction of their negatives) so that every rank captures in the same
 * order; ties keep the order by shape (batch, then tokens). The first capture sizes the pool
 * and the smaller ones lay their scratch out in it; in order of shape alone, a bucket of fewer
 * rows but more tokens could come later, need more, and grow the pool past what any one bucket
 * needs. */
static acg_status order_by_peak(acg_runner *r, const acg_comm *comm) {
    int32_t *kib = acg__calloc(r->n_buckets, sizeof *kib);
    if (kib == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_runner_create: out of memory");
    }
    for (uint32_t b = 0; b < r->n_buckets; b++) {
        uint64_t k = (r->buckets[b].report.eager_peak + 1023) / 1024;
        kib[b] = -(int32_t)(k < INT32_MAX ? k : INT32_MAX);
    }
    acg_status st = comm != NULL ? agree_min(comm, kib, r->n_buckets) : ACG_OK;
    /* Insertion sort, stable: r->order is by shape already. */
    for (uint32_t i = 1; st == ACG_OK && i < r->n_buckets; i++) {
        uint32_t b = r->order[i], at = i;
        while (at > 0 && kib[b] < kib[r->order[at - 1]]) {
            r->order[at] = r->order[at - 1];
            at--;
        }
        r->order[at] = b;
    }
    acg__free(kib);
    return st;
}

/* Every slot of every bucket runs eagerly twice before anything is captured (slot 0's first
 * run was measure_peaks'), to pay what a first run costs (loading, compiling, a library's
 * workspace) outside the capture. Each run is waited for, so its temporaries are reclaimed
 * before the next run allocates its own, and no warm-up runs beside the pool: creation holds
 * at most the statics, the pool and one eager step's temporaries, never two. Every rank runs
 * the same warm-ups in the same order, so their collectives pair. A bucket whose warm-up fails
 * is dropped. */
static void warm_up(acg_runner *r) {
    for (uint32_t i = 0; i < r->n_buckets; i++) {
        uint32_t b = r->order[i];
        double t0 = now_ms();
        acg_status st = ACG_OK;
        acg__trace_span span;
        trace_bucket_begin(&span, "warm-up", r, b, i + 1);
        for (uint32_t slot = 0; slot < r->n_slots && st == ACG_OK; slot++) {
            for (int w = slot == 0 ? 1 : 0; w < 2 && st == ACG_OK; w++) {
                st = acg__runner_run_eager(r, b, slot, r->stream);
                if (st == ACG_OK) {
                    st = acg_stream_synchronize(r->stream);
                }
            }
        }
        r->buckets[b].report.capture_ms += now_ms() - t0;
        if (st != ACG_OK) {
            drop(r, b, st, "warm-up failed: %s: %s", acg_status_name(st), acg_last_error());
        }
        acg_trace_arg done[] = {ACG__TRACE_B("ok", st == ACG_OK)};
        acg__trace_end(&span, done, ACG__TRACE_N(done));
    }
}

/* Whether capturing bucket b keeps `reserve` bytes free under limit; the pool grows by at most
 * what the bucket's eager step allocated, less what the pool already holds. */
static bool fits(acg_runner *r, uint32_t b, uint64_t limit, uint64_t reserve, char *why,
                 size_t why_size) {
    acg_memory_stats m = ACG_MEMORY_STATS_INIT;
    size_t pool = 0;
    acg_device_get_memory_stats(r->dev, &m);
    acg_graph_pool_get_bytes(r->pool, &pool);
    uint64_t need = r->buckets[b].report.eager_peak;
    if (!r->piecewise) {
        for (uint32_t i = 0; i < r->recipe.n_outputs; i++) {
            need += acg_buffer_get_size(r->buckets[b].outputs[i]);
        }
    }
    uint64_t growth = need > pool ? need - pool : 0;
    /* Where the driver can tell, what it has free now bounds the capture too: other processes
     * (and other engines in this one) share the device. */
    uint64_t free_now = 0, total = 0;
    if (acg_device_get_memory_info(r->dev, &free_now, &total) == ACG_OK &&
        growth + reserve > free_now) {
        snprintf(why, why_size,
                 "budget: capture needs ~%llu more bytes and %llu kept free for the largest "
                 "eager step, but the driver has %llu bytes free",
                 (unsigned long long)growth, (unsigned long long)reserve,
                 (unsigned long long)free_now);
        return false;
    }
    if (m.bytes_in_use + growth + reserve <= limit) {
        return true;
    }
    snprintf(why, why_size,
             "budget: capture needs ~%llu more bytes; %llu in use and %llu kept free for the "
             "largest eager step exceed the limit of %llu",
             (unsigned long long)growth, (unsigned long long)m.bytes_in_use,
             (unsigned long long)reserve, (unsigned long long)limit);
    return false;
}

/* ---- creation ----------------------------------------------------------------------------- */

static acg_status check_config(acg_device *dev, const acg_runner_config *c, acg_graph_mode mode,
                               uint32_t n_slots) {
    static const char fn[] = "acg_runner_create";
    const acg_recipe *rc = c->recipe;
    if (rc == NULL || c->buckets == NULL || c->n_buckets == 0 || c->stream == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: config needs a recipe, buckets and a stream", fn);
    }
    if (rc->name == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the recipe has no name", fn);
    }
    /* A rank without a barrier or a reduction would crash at the first bucket, or hang the
     * other ranks: refuse before anything is captured. */
    if (c->comm != NULL && (c->comm->barrier == NULL || c->comm->allreduce_min_i32 == NULL)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the comm has no %s callback", fn,
                          c->comm->barrier == NULL ? "barrier" : "allreduce_min_i32");
    }
    if (n_slots < 1 || n_slots > MAX_SLOTS) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %u slots; 1 or 2", fn, n_slots);
    }
    if (rc->input_bytes == NULL && rc->n_inputs) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: recipe %s has no input_bytes", fn,
                          rc->name);
    }
    if ((rc->output_bytes == NULL && rc->n_outputs) || rc->n_outputs > 16) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: recipe %s: outputs (at most 16)", fn,
                          rc->name);
    }
    bool piecewise_ok =
        rc->n_regions > 0 && rc->region != NULL && (rc->n_regions == 1 || rc->between != NULL);
    if (c->piecewise ? !piecewise_ok : rc->forward == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: recipe %s has no %s", fn, rc->name,
                          c->piecewise ? "regions" : "forward");
    }
    for (uint32_t b = 0; b < c->n_buckets; b++) {
        const acg_bucket_key *k = &c->buckets[b];
        if (k->label == NULL || strlen(k->label) >= 64 || k->batch == 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: bucket %u needs a label (< 64 chars) and a batch", fn, b);
        }
    }
    acg_status st = acg__check_stream(c->stream, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (acg__stream_device(c->stream) != dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the stream belongs to %s, not %s", fn,
                          acg__device_name(acg__stream_device(c->stream)), acg__device_name(dev));
    }
    if (mode == ACG_GRAPHS_OFF) {
        return ACG_OK;
    }
    /* Refuse what cannot be captured before anything is allocated. */
    const acg_capability *cap = acg_device_get_capability(dev);
    if (!cap->graphs) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: %s has no graphs (%s)", fn,
                          acg_device_get_spec(dev), cap->detail);
    }
    char why[256] = "";
    if (rc->can_capture != NULL && !rc->can_capture(rc->user, cap, why, sizeof why)) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: recipe %s cannot be captured on %s: %s", fn,
                          rc->name, acg_device_get_spec(dev), why);
    }
    return ACG_OK;
}

static acg_status alloc_runner(acg_device *dev, const acg_runner_config *c, acg_graph_mode mode,
                               uint32_t n_slots, acg_runner **out) {
    acg_runner *r = acg__calloc(1, sizeof *r);
    if (r == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_runner_create: out of memory");
    }
    r->dev = dev;
    r->recipe = *c->recipe;
    r->stream = c->stream;
    r->mode = mode;
    r->piecewise = c->piecewise;
    r->n_buckets = c->n_buckets;
    r->n_slots = n_slots;
    r->n_parts = c->piecewise ? c->recipe->n_regions : 1;
    pthread_mutex_init(&r->lock, NULL);
    r->buckets = acg__calloc(r->n_buckets, sizeof *r->buckets);
    r->order = acg__calloc(r->n_buckets, sizeof *r->order);
    r->inputs = acg__calloc(n_slots * r->recipe.n_inputs + 1, sizeof *r->inputs);
    r->outputs = acg__calloc(r->recipe.n_outputs + 1, sizeof *r->outputs);
    bool ok = r->buckets && r->order && r->inputs && r->outputs;
    for (uint32_t b = 0; ok && b < r->n_buckets; b++) {
        bucket *bk = &r->buckets[b];
        bk->report.key = c->buckets[b];
        snprintf(bk->label, sizeof bk->label, "%s", c->buckets[b].label);
        bk->report.key.label = bk->label;
        bk->report.state = mode == ACG_GRAPHS_OFF ? ACG_BUCKET_EAGER : ACG_BUCKET_CAPTURED;
        bk->graphs = acg__calloc(n_slots * r->n_parts, sizeof *bk->graphs);
        bk->inputs = acg__calloc(n_slots * r->recipe.n_inputs + 1, sizeof *bk->inputs);
        bk->outputs = acg__calloc(r->recipe.n_outputs + 1, sizeof *bk->outputs);
        ok = bk->graphs && bk->inputs && bk->outputs;
        /* Insertion sort, largest first: bucket lists are short. */
        uint32_t at = b;
        while (at > 0 && acg__runner_larger(&c->buckets[b], &c->buckets[r->order[at - 1]])) {
            r->order[at] = r->order[at - 1];
            at--;
        }
        r->order[at] = b;
    }
    *out = r;
    return ok ? ACG_OK : acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_runner_create: out of memory");
}

/* Measures, orders and warms up every bucket, then captures every bucket that fits, largest
 * first, and keeps only what every rank kept. */
static acg_status capture_all(acg_runner *r, const acg_runner_config *c) {
    const acg_comm *comm = c->comm;
    uint64_t limit =
        c->memory_limit ? c->memory_limit : acg_device_get_capability(r->dev)->memory_bytes;
    uint64_t reserve = 0;
    acg_status st = measure_peaks(r, &reserve);
    if (st == ACG_OK) {
        st = order_by_peak(r, comm);
    }
    if (st != ACG_OK) {
        return st;
    }
    warm_up(r);
    st = acg_graph_pool_create(r->dev, &r->pool);
    if (st != ACG_OK) {
        return st;
    }
    int32_t *kept = acg__calloc(r->n_buckets, sizeof *kept);
    if (kept == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_runner_create: out of memory");
    }
    for (uint32_t i = 0; i < r->n_buckets && st == ACG_OK; i++) {
        uint32_t b = r->order[i];
        bucket *bk = &r->buckets[b];
        char why[256];
        double t0 = now_ms();
        acg__trace_span span;
        trace_bucket_begin(&span, "capture", r, b, i + 1);
        bool warm = bk->report.state != ACG_BUCKET_DROPPED;
        bool fit = warm && fits(r, b, limit, reserve, why, sizeof why);
        /* Every rank captures the bucket or none does: the ranks keep the same buckets, so
         * each step's replays, and the collectives in them, pair. */
        int32_t all[2] = {warm, fit};
        if (comm != NULL && (st = agree_min(comm, all, 2)) != ACG_OK) {
            trace_capture_end(&span, r, b);
            break;
        }
        if (!warm) {
            /* dropped by warm_up, with its reason */
        } else if (!fit) {
            drop(r, b, ACG_ERR_OUT_OF_MEMORY, "%s", why);
        } else if (!all[0]) {
            drop(r, b, ACG_ERR_CAPTURE_INVALIDATED,
                 "dropped on another rank, whose warm-up failed");
        } else if (!all[1]) {
            drop(r, b, ACG_ERR_OUT_OF_MEMORY,
                 "budget: dropped on another rank, whose memory "
                 "cannot hold its capture");
        } else {
            size_t before = 0, after = 0;
            acg_graph_pool_get_bytes(r->pool, &before);
            acg_status cs = capture_bucket(r, b);
            acg_graph_pool_get_bytes(r->pool, &after);
            bk->report.pool_growth = after - before;
            if (cs != ACG_OK) {
                drop(r, b, cs, "capture failed: %s: %s", acg_status_name(cs), acg_last_error());
            }
        }
        bk->report.capture_ms += now_ms() - t0;
        trace_capture_end(&span, r, b);
        kept[i] = bk->report.state == ACG_BUCKET_CAPTURED;
        /* Once per capture attempt, pass or fail, so every rank passes the same barriers. */
        if (comm != NULL) {
            st = comm->barrier(comm->user);
        }
    }
    if (st == ACG_OK && comm != NULL) {
        st = comm->allreduce_min_i32(comm->user, kept, r->n_buckets);
        for (uint32_t i = 0; i < r->n_buckets && st == ACG_OK; i++) {
            uint32_t b = r->order[i];
            if (!kept[i] && r->buckets[b].report.state == ACG_BUCKET_CAPTURED) {
                drop(r, b, ACG_ERR_CAPTURE_INVALIDATED, "dropped on another rank");
            }
        }
    }
    acg__free(kept);
    return st;
}

acg_status acg_runner_create(acg_device *dev, const acg_runner_config *config, acg_runner **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_create";
    acg_status st = acg__check_device(dev, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (config == NULL || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: NULL config or out", fn);
    }
    /* The config, its recipe and its comm are each read at the caller's size for it; from here
     * on config points at this library's whole structs. */
    const acg_runner_config config_defaults = ACG_RUNNER_CONFIG_INIT;
    const acg_recipe recipe_defaults = ACG_RECIPE_INIT;
    const acg_comm comm_defaults = ACG_COMM_INIT;
    acg_runner_config whole;
    acg_recipe recipe;
    acg_comm comm;
    st = acg__config_read(&whole, sizeof whole, &config_defaults, config,
                          offsetof(acg_runner_config, n_slots), "acg_runner_config", fn);
    if (st == ACG_OK && whole.recipe != NULL) {
        st = acg__config_read(&recipe, sizeof recipe, &recipe_defaults, whole.recipe,
                              offsetof(acg_recipe, n_regions), "acg_recipe", fn);
        whole.recipe = &recipe;
    }
    if (st == ACG_OK && whole.comm != NULL) {
        st = acg__config_read(&comm, sizeof comm, &comm_defaults, whole.comm,
                              offsetof(acg_comm, rank), "acg_comm", fn);
        whole.comm = &comm;
    }
    if (st != ACG_OK) {
        return st;
    }
    config = &whole;
    acg_graph_mode mode = resolve_mode(config->graphs);
    uint32_t n_slots = 0;
    st = resolve_slots(config->n_slots, &n_slots);
    if (st == ACG_OK) {
        st = check_config(dev, config, mode, n_slots);
    }
    if (st == ACG_OK && config->comm != NULL) {
        /* Each rank resolved the mode from its own environment: they must agree, or one rank
         * would replay what another runs eagerly. */
        int32_t m[2] = {(int32_t)mode, ~(int32_t)mode};
        st = agree_min(config->comm, m, 2);
        if (st == ACG_OK && m[0] != ~m[1]) {
            st = acg__error(ACG_ERR_COMM,
                            "%s: the ranks' graph modes differ (%d .. %d; ACG_DISABLE_GRAPHS or "
                            "ACG_REQUIRE_GRAPHS set on some ranks only?)",
                            fn, (int)m[0], (int)~m[1]);
        }
    }
    if (st != ACG_OK) {
        return st;
    }
    acg__trace_span span;
    trace_create_begin(&span, config, mode, n_slots);
    acg_runner *r = NULL;
    st = alloc_runner(dev, config, mode, n_slots, &r);
    if (st == ACG_OK && mode != ACG_GRAPHS_OFF) {
        st = acg__runner_claim_statics(r);
        if (st == ACG_OK) {
            st = capture_all(r, config);
        }
    }
    if (st == ACG_OK && mode == ACG_GRAPHS_REQUIRE) {
        for (uint32_t i = 0; i < r->n_buckets; i++) {
            const bucket *bk = &r->buckets[r->order[i]];
            if (bk->report.state == ACG_BUCKET_DROPPED) {
                st = acg__error(bk->status,
                                "%s: graphs are required, and bucket (%s, %llu, batch %u, tokens "
                                "%u) of recipe %s was dropped: %s",
                                fn, bk->label, (unsigned long long)bk->report.key.key_info,
                                bk->report.key.batch, bk->report.key.tokens, r->recipe.name,
                                bk->report.reason);
                break;
            }
        }
    }
    trace_create_end(&span, r, st);
    if (st != ACG_OK) {
        char why[sizeof((acg_bucket_report *)0)->reason * 2];
        snprintf(why, sizeof why, "%s", acg_last_error());
        destroy_runner(r);
        return acg__error(st, "%s", why);
    }
    if (acg__handle_add(r, ACG__HANDLE_RUNNER, &r->life) != ACG_OK) {
        destroy_runner(r);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = r;
    return ACG_OK;
}

/* Releases everything a runner holds, whatever stage its creation reached. */
static void destroy_runner(acg_runner *r) {
    if (r == NULL) {
        return;
    }
    /* Graph destroys wait for their replays and buffer frees for queued work. */
    for (uint32_t b = 0; r->buckets != NULL && b < r->n_buckets; b++) {
        drop_graphs(r, b);
    }
    acg_graph_pool_destroy(r->pool);
    release_statics(r);
    for (uint32_t b = 0; r->buckets != NULL && b < r->n_buckets; b++) {
        for (uint32_t s = 0; s < MAX_SLOTS; s++) {
            acg_event_destroy(r->buckets[b].slot_free[s]);
        }
        acg__free(r->buckets[b].graphs);
        acg__free(r->buckets[b].inputs);
        acg__free(r->buckets[b].outputs);
    }
    pthread_mutex_destroy(&r->lock);
    acg__free(r->buckets);
    acg__free(r->order);
    acg__free(r->inputs);
    acg__free(r->outputs);
    acg__free(r);
}

acg_status acg_runner_destroy(acg_runner *r) {
    ACG__CALL_SCOPE;
    if (r == NULL) {
        return ACG_OK;
    }
    /* Waits for other threads' calls on the runner (a step) to return. */
    acg_status st = acg__retire(r, ACG__HANDLE_RUNNER, "acg_runner_destroy", "runner");
    if (st != ACG_OK) {
        return st;
    }
    acg__handle_remove(r);
    destroy_runner(r);
    return ACG_OK;
}

/* ---- looking at the graphs ---------------------------------------------------------------- */

/* ACG_ERR_OUT_OF_RANGE naming the index and its range, unless v < n. */
static acg_status check_index(const char *fn, const char *what, uint32_t v, uint32_t n) {
    if (v < n) {
        return ACG_OK;
    }
    return acg__error(ACG_ERR_OUT_OF_RANGE, "%s: %s %u is out of range (the runner's: 0..%u)", fn,
                      what, v, n - 1);
}

acg_status acg_runner_get_graph(const acg_runner *r, uint32_t b, uint32_t slot, uint32_t region,
                                const acg_graph **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_get_graph";
    acg_status st = acg__runner_check(r, fn);
    if (st != ACG_OK) {
        return st;
    }
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    }
    if ((st = check_index(fn, "bucket", b, r->n_buckets)) != ACG_OK ||
        (st = check_index(fn, "slot", slot, r->n_slots)) != ACG_OK ||
        (st = check_index(fn, "region", region, r->n_parts)) != ACG_OK) {
        return st;
    }
    /* Graphs are made and dropped only while the runner is created: no lock is needed. */
    const bucket *bk = &r->buckets[b];
    const acg_bucket_key *k = &bk->report.key;
    if (bk->report.state == ACG_BUCKET_EAGER) {
        return acg__error(ACG_ERR_NOT_FOUND,
                          "%s: bucket %u (%s, batch %u, tokens %u) has no graph: graphs are off, "
                          "so it is served eagerly",
                          fn, b, k->label, k->batch, k->tokens);
    }
    if (bk->report.state == ACG_BUCKET_DROPPED) {
        return acg__error(ACG_ERR_NOT_FOUND,
                          "%s: bucket %u (%s, batch %u, tokens %u) has no graph: it was dropped "
                          "at creation (%s)",
                          fn, b, k->label, k->batch, k->tokens, bk->report.reason);
    }
    *out = bk->graphs[slot * r->n_parts + region];
    return ACG_OK;
}
