/* runner_statics.c — a runner's static buffers: its inputs (per slot) and outputs at the
 * largest bucket's shape, and every bucket's views of them. Claimed at creation, or with graphs
 * off at the first lease; owned by the runner, so acg_buffer_free refuses them. */
#include <acg/engine.h>

#include "runner-impl.h"

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
        acg__runner_release_statics(r);
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

/* Frees the static buffers and their views, however far acg__runner_claim_statics got. */
void acg__runner_release_statics(acg_runner *r) {
    uint32_t n_inputs = r->n_slots * r->recipe.n_inputs;
    for (uint32_t b = 0; r->buckets != NULL && b < r->n_buckets; b++) {
        free_all(r, r->buckets[b].inputs, n_inputs);
        free_all(r, r->buckets[b].outputs, r->recipe.n_outputs);
    }
    free_all(r, r->inputs, n_inputs);
    free_all(r, r->outputs, r->recipe.n_outputs);
    r->statics_ready = false;
}
