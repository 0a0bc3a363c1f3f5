/* plan.c — graph-stable attention plans: a step's block table, query offsets and KV lengths,
 * packed on the host and uploaded in place, as one copy, into one device buffer that is sized
 * for the bucket's worst case and never moves.
 *
 * The metadata buffer holds, all int32:
 *   block_table   (batch, table_width)  each row's pages, then the sink page
 *   query_offsets (batch + 1)           prefix sums of q_len
 *   kv_lens       (batch)
 * A plan keeps the bytes of its latest upload, so a build that packs the same bytes (a pre-plan
 * made for this very step) queues nothing, until acg_attn_plan_invalidate says the device
 * rewrote them (a loop of decode steps advances the KV lengths in place).
 */
#include <string.h>

#include "engine-impl.h"

/* A zero-filled buffer is an empty plan: every row padding, pointing at the sink page. */
_Static_assert(ACG_KV_SINK_PAGE == 0, "the empty plan is all zeros");

struct acg_attn_plan {
    acg__engine_obj obj; /* its lock: one build at a time; guards the host arrays and stats */
    acg_attn_plan_config cfg;
    uint32_t table_width;
    size_t n_ints;           /* int32 elements of the metadata buffer */
    acg_buffer *metadata;    /* (n_ints) int32 */
    acg_buffer *block_table; /* views into metadata, see above */
    acg_buffer *query_offsets;
    acg_buffer *kv_lens;
    acg_event *event; /* recorded after the latest upload */
    int32_t *packed;  /* (n_ints) the step being planned */
    int32_t *held;    /* (n_ints) what the buffer holds after the latest upload */
    bool holds;       /* held is exact */
    acg_attn_plan_stats stats;
};

static bool plan_live(const acg_attn_plan *plan) { return acg__handle_use(plan, ACG__HANDLE_PLAN); }

static acg_status check_plan(const acg_attn_plan *plan, const char *fn) {
    return acg__check_live(plan, ACG__HANDLE_PLAN, "plan", "plan", fn);
}

/* ---- create and destroy ------------------------------------------------------------------- */

static acg_status check_config(const acg_attn_plan_config *cfg, uint32_t *table_width,
                               size_t *n_ints, const char *fn) {
    if (cfg->batch == 0 || cfg->max_seq_len == 0 || cfg->page_size == 0 ||
        cfg->max_query_tokens == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: batch, max_seq_len, page_size and max_query_tokens must be "
                          "non-zero (%u, %u, %u, %u)",
                          fn, cfg->batch, cfg->max_seq_len, cfg->page_size, cfg->max_query_tokens);
    }
    uint64_t tw = ((uint64_t)cfg->max_seq_len + cfg->page_size - 1) / cfg->page_size;
    uint64_t ints = (uint64_t)cfg->batch * tw + 2 * (uint64_t)cfg->batch + 1;
    /* KV lengths and query offsets are int32 on the device. */
    if (cfg->max_seq_len > INT32_MAX || cfg->max_query_tokens > INT32_MAX ||
        ints > SIZE_MAX / sizeof(int32_t)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: batch %u x max_seq_len %u (max_query_tokens %u) overflows the "
                          "int32 metadata",
                          fn, cfg->batch, cfg->max_seq_len, cfg->max_query_tokens);
    }
    *table_width = (uint32_t)tw;
    *n_ints = (size_t)ints;
    return ACG_OK;
}

/* Makes the buffer an empty plan (all zeros) and waits for it. */
static acg_status zero_metadata(acg_attn_plan *plan, const char *fn) {
    acg_stream *s = NULL;
    acg_status st = acg_stream_create(plan->obj.dev, &s);
    if (st == ACG_OK) {
        st = acg_fill(s, plan->metadata, 0, plan->n_ints * sizeof(int32_t), 0, 4);
        acg_status sst = acg_stream_synchronize(s);
        st = st != ACG_OK ? st : sst;
        acg_stream_destroy(s);
    }
    if (st != ACG_OK) {
        return acg__rethrow(st, fn);
    }
    memset(plan->held, 0, plan->n_ints * sizeof(int32_t));
    plan->holds = true;
    return ACG_OK;
}

/* Frees the views and the buffer; each is cleared once freed, so the call can be repeated
 * after a refusal (a live graph uses one). */
static acg_status free_buffers(acg_attn_plan *plan, const char *fn) {
    acg_buffer **order[] = {&plan->block_table, &plan->query_offsets, &plan->kv_lens,
                            &plan->metadata};
    /* Check everything first: a refused destroy must leave the plan whole, views included. */
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        acg_status st = *order[i] == NULL
                            ? ACG_OK
                            : acg__buffer_check_free(*order[i], i == 3 ? 3 : 0, plan, fn);
        if (st != ACG_OK) {
            return st;
        }
    }
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        acg_status st = acg__buffer_free_owned(*order[i], plan, fn);
        if (st != ACG_OK) {
            return acg__rethrow(st, fn);
        }
        *order[i] = NULL;
    }
    return ACG_OK;
}

static const acg__config_kind plan_config = ACG__CONFIG_KIND(
    acg_attn_plan_config, ACG_ATTN_PLAN_CONFIG_INIT, sizeof(acg_attn_plan_config), false);

acg_status acg_attn_plan_create(acg_device *dev, const acg_attn_plan_config *config,
                                acg_attn_plan **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_create";
    acg_attn_plan_config c; /* the caller's config, whole whatever its version */
    ACG__TRY(acg__engine_create_args(dev, out, &plan_config, config, &c, fn));
    uint32_t tw = 0;
    size_t n_ints = 0;
    ACG__TRY(check_config(&c, &tw, &n_ints, fn));
    acg_attn_plan *plan = acg__engine_obj_new(sizeof *plan, dev, fn);
    if (plan == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    plan->cfg = c;
    plan->table_width = tw;
    plan->n_ints = n_ints;
    plan->packed = acg__alloc(n_ints * sizeof(int32_t));
    plan->held = acg__alloc(n_ints * sizeof(int32_t));
    acg_status st = ACG_OK;
    if (plan->packed == NULL || plan->held == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes of metadata", fn,
                        n_ints * sizeof(int32_t));
        goto out_free_host;
    }
    if ((st = acg_event_create(dev, &plan->event)) != ACG_OK) {
        acg__rethrow(st, fn);
        goto out_free_host;
    }
    size_t bt = (size_t)c.batch * tw * sizeof(int32_t);
    size_t qo = ((size_t)c.batch + 1) * sizeof(int32_t);
    size_t kl = (size_t)c.batch * sizeof(int32_t);
    /* The plan's own buffers: acg_buffer_free refuses them. */
    static const char what[] = "attention plan";
    st = acg__buffer_alloc_owned(dev, n_ints * sizeof(int32_t), plan, what, &plan->metadata);
    if (st == ACG_OK) {
        st = acg__buffer_view_owned(plan->metadata, 0, bt, plan, what, &plan->block_table);
    }
    if (st == ACG_OK) {
        st = acg__buffer_view_owned(plan->metadata, bt, qo, plan, what, &plan->query_offsets);
    }
    if (st == ACG_OK) {
        st = acg__buffer_view_owned(plan->metadata, bt + qo, kl, plan, what, &plan->kv_lens);
    }
    if (st != ACG_OK) {
        acg__rethrow(st, fn);
        goto out_free_buffers;
    }
    if ((st = zero_metadata(plan, fn)) != ACG_OK) {
        goto out_free_buffers;
    }
    if ((st = acg__handle_publish(plan, ACG__HANDLE_PLAN, &plan->obj.life, fn)) != ACG_OK) {
        goto out_free_buffers;
    }
    *out = plan;
    return ACG_OK;

out_free_buffers:
    free_buffers(plan, fn); /* no graph can use them yet: it cannot fail */
    acg_event_destroy(plan->event);
out_free_host:
    acg__free(plan->held);
    acg__free(plan->packed);
    acg__engine_obj_free(&plan->obj);
    return st;
}

acg_status acg_attn_plan_destroy(acg_attn_plan *plan) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_destroy";
    if (plan == NULL) {
        return ACG_OK;
    }
    ACG__TRY(check_plan(plan, fn));
    /* Wait for other threads' calls on the plan to return; later ones are refused. */
    ACG__TRY(acg__retire(plan, ACG__HANDLE_PLAN, fn, "attention plan"));
    acg_status st = free_buffers(plan, fn);
    if (st != ACG_OK) {
        acg__handle_restore(plan);
        return st;
    }
    acg_event_destroy(plan->event);
    acg__free(plan->held);
    acg__free(plan->packed);
    acg__engine_obj_release(&plan->obj);
    return ACG_OK;
}

/* ---- building ----------------------------------------------------------------------------- */

/* Checks that the rows fit the plan; ACG_OK or the status the header gives. */
static acg_status check_rows(const acg_attn_plan *plan, const acg_attn_row *rows, uint32_t n_rows,
                             const char *fn) {
    const acg_attn_plan_config *c = &plan->cfg;
    if (n_rows > c->batch) {
        return acg__error(ACG_ERR_EXHAUSTED, "%s: %u rows for a plan of batch %u", fn, n_rows,
                          c->batch);
    }
    if (rows == NULL && n_rows > 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: rows is NULL", fn);
    }
    uint64_t q = 0;
    for (uint32_t i = 0; i < n_rows; i++) {
        const acg_attn_row *r = &rows[i];
        if (r->n_pages > plan->table_width || r->kv_len > c->max_seq_len) {
            return acg__error(ACG_ERR_EXHAUSTED,
                              "%s: row %u has %u pages and kv_len %u; the plan holds %u pages "
                              "(max_seq_len %u)",
                              fn, i, r->n_pages, r->kv_len, plan->table_width, c->max_seq_len);
        }
        if (r->pages == NULL && r->n_pages > 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: row %u: pages is NULL", fn, i);
        }
        if ((uint64_t)r->n_pages * c->page_size < r->kv_len || r->q_len > r->kv_len) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: row %u: %u pages of %u tokens, kv_len %u, q_len %u (the "
                              "pages must cover kv_len, and kv_len include the query)",
                              fn, i, r->n_pages, c->page_size, r->kv_len, r->q_len);
        }
        for (uint32_t p = 0; p < r->n_pages; p++) {
            if (r->pages[p] > INT32_MAX) {
                return acg__error(ACG_ERR_INVALID_ARGUMENT,
                                  "%s: row %u: page id %u does not fit the int32 block table", fn,
                                  i, r->pages[p]);
            }
        }
        q += r->q_len;
    }
    if (q > c->max_query_tokens) {
        return acg__error(ACG_ERR_EXHAUSTED, "%s: %llu query tokens; the plan holds %u", fn,
                          (unsigned long long)q, c->max_query_tokens);
    }
    return ACG_OK;
}

/* Packs the rows, padded to batch, into plan->packed. */
static void pack_rows(acg_attn_plan *plan, const acg_attn_row *rows, uint32_t n_rows) {
    const uint32_t batch = plan->cfg.batch, tw = plan->table_width;
    int32_t *table = plan->packed;
    int32_t *offsets = table + (size_t)batch * tw;
    int32_t *lens = offsets + batch + 1;
    int32_t q = 0;
    for (uint32_t i = 0; i < batch; i++) {
        int32_t *t = table + (size_t)i * tw;
        uint32_t np = 0;
        offsets[i] = q;
        lens[i] = 0;
        if (i < n_rows) {
            const acg_attn_row *r = &rows[i];
            for (np = 0; np < r->n_pages; np++) {
                t[np] = (int32_t)r->pages[np];
            }
            lens[i] = (int32_t)r->kv_len;
            q += (int32_t)r->q_len;
        }
        for (uint32_t c = np; c < tw; c++) {
            t[c] = (int32_t)ACG_KV_SINK_PAGE;
        }
    }
    offsets[batch] = q;
}

acg_status acg_attn_plan_build(acg_attn_plan *plan, acg_stager *stager, acg_stream *stream,
                               const acg_attn_row *rows, uint32_t n_rows) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_build";
    ACG__TRY(check_plan(plan, fn));
    acg_device *sdev = acg__stager_device(stager);
    if (sdev == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: the stager is not live", fn);
    }
    if (sdev != plan->obj.dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the stager belongs to %s, the plan to %s", fn,
                          acg__device_name(sdev), acg__device_name(plan->obj.dev));
    }
    /* The stream is checked here, not only by the upload: an unchanged build uploads nothing
     * but must refuse the same streams. The check holds it until this call returns. */
    ACG__TRY(acg__engine_check_stream(stream, &plan->obj, "plan", fn));
    ACG__TRY(acg__engine_refuse_capture(
        stream, "plans are built before a capture, into the buffers the graph reads", fn));
    if (plan->block_table == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: the plan is being destroyed", fn);
    }
    ACG__TRY(check_rows(plan, rows, n_rows, fn));
    acg_status st = ACG_OK;
    pthread_mutex_lock(&plan->obj.lock);
    pack_rows(plan, rows, n_rows);
    const size_t bytes = plan->n_ints * sizeof(int32_t);
    /* The lengths and offsets at the end change most often: compare them first. */
    const size_t table_ints = (size_t)plan->cfg.batch * plan->table_width;
    if (plan->holds &&
        memcmp(plan->packed + table_ints, plan->held + table_ints,
               bytes - table_ints * sizeof(int32_t)) == 0 &&
        memcmp(plan->packed, plan->held, table_ints * sizeof(int32_t)) == 0) {
        plan->stats.builds++;
        plan->stats.unchanged++;
        goto out_unlock;
    }
    /* Whatever fails below, the buffer may no longer hold `held`. */
    plan->holds = false;
    st = acg__stager_upload(stager, stream, plan->metadata, 0, plan->packed, bytes, 1, NULL, bytes,
                            false);
    if (st != ACG_OK) {
        st = acg__rethrow(st, fn);
        goto out_unlock;
    }
    if ((st = acg_event_record(plan->event, stream)) != ACG_OK) {
        st = acg__rethrow(st, fn);
        goto out_unlock;
    }
    int32_t *t = plan->held;
    plan->held = plan->packed;
    plan->packed = t;
    plan->holds = true;
    plan->stats.builds++;
    plan->stats.uploads++;
out_unlock:
    pthread_mutex_unlock(&plan->obj.lock);
    return st;
}

/* ---- getters ------------------------------------------------------------------------------ */

acg_status acg_attn_plan_invalidate(acg_attn_plan *plan) {
    ACG__CALL_SCOPE;
    ACG__TRY(check_plan(plan, "acg_attn_plan_invalidate"));
    pthread_mutex_lock(&plan->obj.lock);
    plan->holds = false;
    pthread_mutex_unlock(&plan->obj.lock);
    return ACG_OK;
}

acg_status acg_attn_plan_note(acg_attn_plan *plan, const acg_attn_row *rows, uint32_t n_rows) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_note";
    ACG__TRY(check_plan(plan, fn));
    ACG__TRY(check_rows(plan, rows, n_rows, fn));
    pthread_mutex_lock(&plan->obj.lock);
    pack_rows(plan, rows, n_rows);
    int32_t *t = plan->held;
    plan->held = plan->packed;
    plan->packed = t;
    plan->holds = true;
    pthread_mutex_unlock(&plan->obj.lock);
    return ACG_OK;
}

acg_event *acg_attn_plan_get_event(const acg_attn_plan *plan) {
    ACG__CALL_SCOPE;
    return plan_live(plan) ? plan->event : NULL;
}

acg_status acg_attn_plan_get_views(const acg_attn_plan *plan, acg_attn_plan_views *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_get_views";
    ACG__TRY(check_plan(plan, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    if (plan->block_table == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: the plan is being destroyed", fn);
    }
    acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
    v.metadata = plan->metadata;
    v.block_table = plan->block_table;
    v.query_offsets = plan->query_offsets;
    v.kv_lens = plan->kv_lens;
    v.table_width = plan->table_width;
    v.max_kv_len = plan->cfg.max_seq_len;
    return acg__output_write(out, &v, sizeof v, "acg_attn_plan_views", fn);
}

acg_status acg_attn_plan_get_stats(const acg_attn_plan *plan, acg_attn_plan_stats *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_attn_plan_get_stats";
    ACG__TRY(check_plan(plan, fn));
    return acg__engine_write_stats(&plan->obj, &plan->stats, sizeof plan->stats, out,
                                   "acg_attn_plan_stats", fn);
}
