/* serve.c — serving steps with a capture runner: choosing the tightest bucket, leasing one of
 * its slots, running the step (replayed or eager), releasing the lease, and the reports. An
 * eager run and the recipe's callbacks are also what creation's measuring, warm-ups and
 * captures run. */
#include <stdio.h>
#include <string.h>

#include <acg/engine.h>

#include "runner-impl.h"

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

/* ---- serving ------------------------------------------------------------------------------ */

acg_status acg_runner_select(const acg_runner *r, const char *label, uint64_t key_info,
                             uint32_t batch, uint32_t tokens, uint32_t *out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__runner_check(r, "acg_runner_select"));
    if (label == NULL || out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_runner_select: NULL label or out");
    }
    bool found = false;
    uint32_t best = 0;
    for (uint32_t b = 0; b < r->n_buckets; b++) {
        const acg_bucket_key *k = &r->buckets[b].report.key;
        if (strcmp(k->label, label) != 0 || k->key_info != key_info || k->batch < batch ||
            k->tokens < tokens) {
            continue;
        }
        if (!found || acg__runner_larger(&r->buckets[best].report.key, k)) {
            best = b;
            found = true;
        }
    }
    if (!found) {
        if (acg__trace_on(ACG_TRACE_ENGINE)) {
            acg_trace_arg args[] = {ACG__TRACE_S("label", label), ACG__TRACE_U("batch", batch),
                                    ACG__TRACE_U("tokens", tokens)};
            acg__trace_emit(ACG_TRACE_ENGINE, ACG_TRACE_INSTANT, "no bucket fits", acg__trace_now(),
                            0, 0, args, ACG__TRACE_N(args));
        }
        return acg__error(ACG_ERR_NOT_FOUND,
                          "acg_runner_select: no %s bucket holds batch %u, tokens %u", label, batch,
                          tokens);
    }
    *out = best;
    return ACG_OK;
}

/* Whether lease is one this runner handed out and that is still held (release: end it). */
static acg_status check_lease(acg_runner *r, const acg_lease *lease, const char *fn, bool release) {
    ACG__TRY(acg__check_arg(lease, "lease", fn));
    pthread_mutex_lock(&r->lock);
    bool held = lease->ticket != 0 && lease->bucket < r->n_buckets && lease->slot < r->n_slots &&
                r->buckets[lease->bucket].ticket[lease->slot] == lease->ticket;
    if (held && release) {
        r->buckets[lease->bucket].ticket[lease->slot] = 0;
    }
    pthread_mutex_unlock(&r->lock);
    if (!held) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the lease is not held: it was released, or another runner (or "
                          "none) handed it out",
                          fn);
    }
    return ACG_OK;
}

acg_status acg_runner_lease(acg_runner *r, uint32_t b, acg_lease *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_lease";
    ACG__TRY(acg__runner_check(r, fn));
    if (out == NULL || b >= r->n_buckets) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          out == NULL ? "out is NULL" : "no such bucket");
    }
    pthread_mutex_lock(&r->lock);
    /* With graphs off nothing was allocated at creation; the first step claims the buffers. */
    acg_status st = r->statics_ready ? ACG_OK : acg__runner_claim_statics(r);
    bucket *bk = &r->buckets[b];
    for (uint32_t s = 0; s < r->n_slots && st == ACG_OK; s++) {
        if (bk->slot_free[s] == NULL) {
            st = acg_event_create(r->dev, &bk->slot_free[s]);
        }
    }
    /* The next slot in rotation that no lease holds. */
    uint32_t slot = bk->next_slot;
    for (uint32_t tries = 0; st == ACG_OK && bk->ticket[slot] != 0; tries++) {
        if (tries + 1 == r->n_slots) {
            st = acg__error(ACG_ERR_IN_USE,
                            "%s: every slot (%u) of bucket %u (%s) is leased; release a lease "
                            "first",
                            fn, r->n_slots, b, bk->label);
        }
        slot = (slot + 1) % r->n_slots;
    }
    if (st == ACG_OK) {
        /* Process-wide tickets, so a lease of another runner never matches. */
        static _Atomic uint64_t tickets;
        bk->ticket[slot] = atomic_fetch_add(&tickets, 1) + 1;
        out->ticket = bk->ticket[slot];
        out->slot_free = bk->slot_free[slot];
        out->bucket = b;
        out->slot = slot;
        out->graphed = bk->report.state == ACG_BUCKET_CAPTURED;
        out->io = acg__runner_step_io(r, b, slot);
        bk->next_slot = (slot + 1) % r->n_slots;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

/* The span of one acg_runner_run: "replay", or "eager" with the reason the bucket has no
 * graph. */
static void trace_run_begin(acg__trace_span *sp, const acg_runner *r, const acg_lease *lease) {
    const bucket *bk = &r->buckets[lease->bucket];
    char reason[sizeof bk->report.reason + 32];
    if (bk->report.state == ACG_BUCKET_DROPPED) {
        snprintf(reason, sizeof reason, "bucket dropped: %s", bk->report.reason);
    } else {
        snprintf(reason, sizeof reason, "graphs off");
    }
    acg_trace_arg args[] = {ACG__TRACE_U("bucket", lease->bucket),
                            ACG__TRACE_S("label", bk->label),
                            ACG__TRACE_U("batch", bk->report.key.batch),
                            ACG__TRACE_U("tokens", bk->report.key.tokens),
                            ACG__TRACE_U("slot", lease->slot),
                            ACG__TRACE_B("graphed", lease->graphed),
                            ACG__TRACE_S("reason", reason)};
    acg__trace_begin(sp, ACG_TRACE_ENGINE, lease->graphed ? "replay" : "eager", args,
                     lease->graphed ? 6 : 7);
}

acg_status acg_runner_run(acg_runner *r, const acg_lease *lease, acg_stream *stream) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_run";
    ACG__TRY(acg__runner_check(r, fn));
    ACG__TRY(check_lease(r, lease, fn, false));
    acg_status st = ACG_OK;
    acg__trace_span span = {NULL, 0, false};
    if (acg__trace_on(ACG_TRACE_ENGINE)) {
        trace_run_begin(&span, r, lease);
    }
    if (!lease->graphed) {
        st = acg__runner_run_eager(r, lease->bucket, lease->slot, stream);
    } else {
        acg_graph **graphs = &r->buckets[lease->bucket].graphs[lease->slot * r->n_parts];
        for (uint32_t p = 0; p < r->n_parts && st == ACG_OK; p++) {
            st = acg_graph_launch(graphs[p], stream);
            if (st == ACG_OK && r->piecewise && p + 1 < r->n_parts) {
                st = acg__runner_call_recipe(r, CB_BETWEEN, p, stream, &lease->io);
            }
        }
    }
    if (st == ACG_OK) {
        st = acg_event_record(r->buckets[lease->bucket].slot_free[lease->slot], stream);
    }
    acg_trace_arg done[] = {ACG__TRACE_B("ok", st == ACG_OK)};
    acg__trace_end(&span, done, ACG__TRACE_N(done));
    return st;
}

acg_status acg_runner_release(acg_runner *r, acg_lease *lease) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_release";
    ACG__TRY(acg__runner_check(r, fn));
    ACG__TRY(check_lease(r, lease, fn, true));
    memset(lease, 0, sizeof *lease);
    return ACG_OK;
}

acg_status acg_runner_get_report(const acg_runner *r, uint32_t b, acg_bucket_report *out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__runner_check(r, "acg_runner_get_report"));
    if (out == NULL || b >= r->n_buckets) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_runner_get_report: bad bucket or out");
    }
    acg_bucket_report rep = r->buckets[b].report;
    return acg__output_write(out, &rep, sizeof rep, "acg_bucket_report", "acg_runner_get_report");
}

uint32_t acg_runner_get_bucket_count(const acg_runner *r) {
    ACG__CALL_SCOPE;
    return acg__runner_check(r, "acg_runner_get_bucket_count") == ACG_OK ? r->n_buckets : 0;
}

acg_status acg_runner_get_pool_bytes(const acg_runner *r, size_t *out) {
    ACG__CALL_SCOPE;
    ACG__TRY(acg__runner_check(r, "acg_runner_get_pool_bytes"));
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_runner_get_pool_bytes: out is NULL");
    }
    *out = 0;
    return r->pool != NULL ? acg_graph_pool_get_bytes(r->pool, out) : ACG_OK;
}
