/* runner_capture.c — what creation runs once the statics are claimed: measure, order and warm
 * up every bucket, then capture every bucket that fits, largest first, into one pool; a bucket
 * whose warm-up or capture fails, or that does not fit, is dropped and served eagerly, and only
 * what every rank kept stays. With the creation's traces of each bucket. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include <acg/engine.h>

#include "runner-impl.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- capturing a bucket ------------------------------------------------------------------- */

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

void acg__runner_drop_graphs(acg_runner *r, uint32_t b) {
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
void acg__runner_trace_bucket_begin(acg__trace_span *sp, const char *name, const acg_runner *r,
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

/* ---- dropping a bucket: served eagerly ---------------------------------------------------- */

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
    acg__runner_drop_graphs(r, b);
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

/* ---- creation: warm-ups, then captures, largest first ------------------------------------- */

/* Every slot of every bucket runs eagerly twice before anything is captured (slot 0's first
 * run was the measuring one), to pay what a first run costs (loading, compiling, a
 * library's workspace) outside the capture. Each run is waited for, so its temporaries are
 * reclaimed before the next run allocates its own, and no warm-up runs beside the pool: creation
 * holds at most the statics, the pool and one eager step's temporaries, never two. Every rank runs
 * the same warm-ups in the same order, so their collectives pair. A bucket whose warm-up fails
 * is dropped. */
static void warm_up(acg_runner *r) {
    for (uint32_t i = 0; i < r->n_buckets; i++) {
        uint32_t b = r->order[i];
        double t0 = now_ms();
        acg_status st = ACG_OK;
        acg__trace_span span;
        acg__runner_trace_bucket_begin(&span, "warm-up", r, b, i + 1);
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

/* Measures, orders and warms up every bucket, then captures every bucket that fits, largest
 * first, and keeps only what every rank kept. */
acg_status acg__runner_capture_all(acg_runner *r, const acg_runner_config *c) {
    const acg_comm *comm = c->comm;
    uint64_t limit =
        c->memory_limit ? c->memory_limit : acg_device_get_capability(r->dev)->memory_bytes;
    uint64_t reserve = 0;
    acg_status st = acg__runner_measure_peaks(r, &reserve);
    if (st == ACG_OK) {
        st = acg__runner_order_by_peak(r, comm);
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
        acg__runner_trace_bucket_begin(&span, "capture", r, b, i + 1);
        bool warm = bk->report.state != ACG_BUCKET_DROPPED;
        bool fit = warm && acg__runner_fits(r, b, limit, reserve, why, sizeof why);
        /* Every rank captures the bucket or none does: the ranks keep the same buckets, so
         * each step's replays, and the collectives in them, pair. */
        int32_t all[2] = {warm, fit};
        if (comm != NULL && (st = acg__runner_agree_min(comm, all, 2)) != ACG_OK) {
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
