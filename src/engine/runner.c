/* runner.c — creating and destroying capture runners: the config and its checks, the graph
 * switches (ACG_* variables), rank agreement, the runner's arrays, and looking at its graphs.
 * What creation runs lives beside it: runner_statics.c claims the static buffers,
 * runner_budget.c measures the eager peaks and says what capture may take, runner_capture.c
 * warms up and captures; serve.c serves steps.
 *
 * Creation follows a fixed order, because each step depends on the one before: check that the
 * recipe can be captured at all (before allocating anything), claim every static buffer, measure
 * each bucket's eager peak, order the buckets by it, warm every slot up, then capture largest
 * first into one pool so that smaller buckets reuse the largest one's memory, and finally agree
 * with the other ranks on what was kept. */
#include <stdio.h>
#include <string.h>

#include <acg/engine.h>

#include "runner-impl.h"

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
acg_status acg__runner_agree_min(const acg_comm *comm, int32_t *values, size_t n) {
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
        ACG__TRY(acg__env_u64("acg_runner_create", "ACG_NUM_SLOTS", 1, MAX_SLOTS, 2, &v));
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

/* ---- traces: a whole creation (include/acg/trace.h) --------------------------------------- */

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
    ACG__TRY(acg__check_stream(c->stream, fn));
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

acg_status acg_runner_create(acg_device *dev, const acg_runner_config *config, acg_runner **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_runner_create";
    ACG__TRY(acg__check_device(dev, fn));
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
    acg_status st = acg__config_read(&whole, sizeof whole, &config_defaults, config,
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
        st = acg__runner_agree_min(config->comm, m, 2);
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
            st = acg__runner_capture_all(r, config);
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
        acg__runner_drop_graphs(r, b);
    }
    acg_graph_pool_destroy(r->pool);
    acg__runner_release_statics(r);
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
    /* Waits for other threads' calls on the runner (a step) to return. */
    ACG__DESTROY_BEGIN(r, ACG__HANDLE_RUNNER, "acg_runner_destroy", "runner");
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
    ACG__TRY(acg__runner_check(r, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    ACG__TRY(check_index(fn, "bucket", b, r->n_buckets));
    ACG__TRY(check_index(fn, "slot", slot, r->n_slots));
    ACG__TRY(check_index(fn, "region", region, r->n_parts));
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
