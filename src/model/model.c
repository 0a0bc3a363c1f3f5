/* model.c — the reference model on a device: weights uploaded once, the RoPE tables, the
 * paged KV cache, one attention plan per slot, the sampler states, and the runner that
 * captures the step's buckets; with several ranks, this rank's shard of the weights and the
 * device group its allreduces run in. The step itself is forward.c; serving requests is
 * generate.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model-impl.h"

#define MAX_BATCH_LIMIT 1024u
/* The most decode steps one launch may run (steps_per_launch). */
#define MAX_STEPS_PER_LAUNCH 1024u
#define MAX_PAGE_SIZE 65536u

/* ---- device weights ------------------------------------------------------------------------ */

static acg_status upload(acg_model *m, const float *src, size_t floats, acg_buffer **out) {
    /* The model's own: acg_buffer_free refuses it. */
    acg_status st = acg__buffer_alloc_owned(m->dev, floats * sizeof(float), m, "model", out);
    if (st == ACG_OK) {
        st = acg_copy_h2d(m->stream, *out, 0, src, floats * sizeof(float));
    }
    return st;
}

/* Of each of `layers` matrices (rows, cols) at src, the rows [row_lo, row_lo + n_rows) and the
 * columns [col_lo, col_lo + n_cols): this rank's shard, gathered on the host into (layers,
 * n_rows, n_cols) and uploaded. A whole tensor goes up as it is, and an empty shard (a rank
 * without KV heads) not at all: *out stays NULL. */
static acg_status upload_shard(acg_model *m, const float *src, size_t layers, size_t rows,
                               size_t cols, size_t row_lo, size_t n_rows, size_t col_lo,
                               size_t n_cols, acg_buffer **out) {
    if (n_rows == 0 || n_cols == 0) {
        return ACG_OK;
    }
    if (n_cols == cols && (layers == 1 || n_rows == rows)) {
        /* whole rows of one matrix, or whole matrices: one block of src */
        return upload(m, src + row_lo * cols, layers * n_rows * cols, out);
    }
    float *shard = acg__calloc(layers * n_rows * n_cols, sizeof(float));
    if (shard == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_model_create: out of memory");
    }
    float *dst = shard;
    for (size_t l = 0; l < layers; l++) {
        for (size_t i = 0; i < n_rows; i++) {
            memcpy(dst, src + (l * rows + row_lo + i) * cols + col_lo, n_cols * sizeof(float));
            dst += n_cols;
        }
    }
    /* A pageable copy is read before it returns: the shard may go at once. */
    acg_status st = upload(m, shard, layers * n_rows * n_cols, out);
    acg__free(shard);
    return st;
}

/* The rotation tables: position p, pair f of a head turns by p / 10000^(2f / head_size), with
 * llama2.c's single-precision arithmetic, so every backend reads the same angles. */
static acg_status build_rope(acg_model *m) {
    const uint32_t half = m->head_size / 2, seq_len = (uint32_t)m->config.seq_len;
    float *cos_t = acg__calloc((size_t)seq_len * half, sizeof(float));
    float *sin_t = acg__calloc((size_t)seq_len * half, sizeof(float));
    acg_status st = ACG_OK;
    if (cos_t == NULL || sin_t == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_model_create: out of memory");
        goto out;
    }
    for (uint32_t p = 0; p < seq_len; p++) {
        for (uint32_t f = 0; f < half; f++) {
            float freq = 1.0f / powf(10000.0f, (float)(2 * f) / (float)m->head_size);
            float val = (float)p * freq;
            cos_t[(size_t)p * half + f] = cosf(val);
            sin_t[(size_t)p * half + f] = sinf(val);
        }
    }
    st = upload(m, cos_t, (size_t)seq_len * half, &m->w.rope_cos);
    if (st == ACG_OK) {
        st = upload(m, sin_t, (size_t)seq_len * half, &m->w.rope_sin);
    }
out:
    acg__free(cos_t);
    acg__free(sin_t);
    return st;
}

static acg_status build_weights(acg_model *m, const acg_model_tensors *t) {
    const acg_model_config *c = &m->config;
    const size_t L = (size_t)c->n_layers, dim = (size_t)c->dim, hidden = (size_t)c->hidden_dim,
                 kv_dim = (size_t)c->n_kv_heads * m->head_size, vocab = (size_t)c->vocab_size;
    /* This rank's rows of wq, wk, wv, w1 and w3 and columns of wo and w2 (all of them with one
     * rank): the query heads of its KV heads, its KV heads, its feed-forward units. */
    const size_t kv_mul = (size_t)(c->n_heads / c->n_kv_heads),
                 q_lo = (size_t)m->kv_head_lo * kv_mul * m->head_size, q_n = m->q_dim,
                 kv_lo = (size_t)m->kv_head_lo * m->head_size, kv_n = m->kv_dim,
                 h_lo = m->hidden_lo, h_n = m->hidden, v_lo = m->vocab_lo, v_n = m->vocab_n;
    acg__model_device_weights *w = &m->w;
#define WHOLE(rows, cols) rows, cols, 0, rows, 0, cols
    const struct {
        const float *src;
        size_t layers, rows, cols;             /* each layer a (rows, cols) matrix */
        size_t row_lo, n_rows, col_lo, n_cols; /* this rank's shard of it */
        acg_buffer **dst;
    } tensors[] = {
        {t->token_embedding, 1, WHOLE(vocab, dim), &w->token_embedding},
        {t->rms_att, 1, WHOLE(L, dim), &w->rms_att},
        {t->wq, L, dim, dim, q_lo, q_n, 0, dim, &w->wq},
        {t->wk, L, kv_dim, dim, kv_lo, kv_n, 0, dim, &w->wk},
        {t->wv, L, kv_dim, dim, kv_lo, kv_n, 0, dim, &w->wv},
        {t->wo, L, dim, dim, 0, dim, q_lo, q_n, &w->wo},
        {t->rms_ffn, 1, WHOLE(L, dim), &w->rms_ffn},
        {t->w1, L, hidden, dim, h_lo, h_n, 0, dim, &w->w1},
        {t->w2, L, dim, hidden, 0, dim, h_lo, h_n, &w->w2},
        {t->w3, L, hidden, dim, h_lo, h_n, 0, dim, &w->w3},
        {t->rms_final, 1, WHOLE(1, dim), &w->rms_final},
        {t->classifier, 1, vocab, dim, v_lo, v_n, 0, dim, &w->classifier}, /* last: skipped
                                                                              when shared */
    };
#undef WHOLE
    size_t n = sizeof tensors / sizeof tensors[0] - (c->shared_classifier ? 1 : 0);
    acg_status st = ACG_OK;
    for (size_t i = 0; i < n && st == ACG_OK; i++) {
        st = upload_shard(m, tensors[i].src, tensors[i].layers, tensors[i].rows, tensors[i].cols,
                          tensors[i].row_lo, tensors[i].n_rows, tensors[i].col_lo,
                          tensors[i].n_cols, tensors[i].dst);
    }
    if (st == ACG_OK && c->shared_classifier) {
        w->classifier = w->token_embedding;
    }
    if (st == ACG_OK) {
        st = build_rope(m);
    }
    return st;
}

static void free_weights(acg_model *m) {
    acg__model_device_weights *w = &m->w;
    if (w->classifier != w->token_embedding) {
        acg__buffer_free_owned(w->classifier, m, "acg_model_destroy");
    }
    acg_buffer *all[] = {w->token_embedding, w->rms_att, w->wq, w->wk, w->wv,        w->wo,
                         w->rms_ffn,         w->w1,      w->w2, w->w3, w->rms_final, w->rope_cos,
                         w->rope_sin};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        acg__buffer_free_owned(all[i], m, "acg_model_destroy");
    }
    memset(w, 0, sizeof *w);
}

static acg_status build_kernels(acg_model *m) {
    acg_status st = acg_model_register_kernels(); /* registers them on the first call only */
    if (st != ACG_OK) {
        return st;
    }
    struct {
        const char *name;
        acg_kernel **k;
    } list[] = {
        {"embed_f32", &m->k.embed},
        {"rmsnorm_f32", &m->k.rmsnorm},
        {"matmul_f32", &m->k.matmul},
        {"rope_f32", &m->k.rope},
        {"kv_store_f32", &m->k.kv_store},
        {"attention_f32", &m->k.attention},
        {"axpy_f32", &m->k.axpy},
        {"swiglu_f32", &m->k.swiglu},
        {"gather_last_f32", &m->k.gather_last},
        {"sample_f32", &m->k.sample},
        {"decode_advance_i32", &m->k.decode_advance},
    };
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        ACG__TRY(acg_kernel_get(m->dev, list[i].name, list[i].k));
    }
    return ACG_OK;
}

/* ---- options ------------------------------------------------------------------------------- */

static acg_status check_options(const acg_model_config *c, acg_model_options *o) {
    static const char fn[] = "acg_model_create";
    if (o->max_batch == 0 || o->max_batch > MAX_BATCH_LIMIT) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: max_batch %u is outside 1..%u", fn,
                          o->max_batch, MAX_BATCH_LIMIT);
    }
    if (o->max_step_tokens < o->max_batch || o->max_step_tokens > (uint32_t)c->seq_len * 16) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: max_step_tokens %u must lie in max_batch (%u) .. 16 * seq_len", fn,
                          o->max_step_tokens, o->max_batch);
    }
    if (o->page_size == 0 || o->page_size > MAX_PAGE_SIZE) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: page_size %u is outside 1..%u", fn,
                          o->page_size, MAX_PAGE_SIZE);
    }
    /* Every work-item count of a step must fit a launch (2^32). */
    uint64_t widest =
        (uint64_t)o->max_step_tokens * (uint64_t)(c->hidden_dim > c->dim ? c->hidden_dim : c->dim);
    if (widest > UINT32_MAX || (uint64_t)o->max_batch * (uint64_t)c->vocab_size > UINT32_MAX) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: a step of %u tokens is too large for this model", fn,
                          o->max_step_tokens);
    }
    uint32_t per_request = ((uint32_t)c->seq_len + o->page_size - 1) / o->page_size;
    if (o->kv_pages == 0) {
        o->kv_pages = o->max_batch * per_request + 1;
    }
    if (o->kv_pages < 2) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: kv_pages %u leaves no page besides the "
                          "sink page",
                          fn, o->kv_pages);
    }
    if (o->n_slots == 0) {
        o->n_slots = 1;
    }
    if (o->n_slots > 2) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: n_slots %u is not 1 or 2", fn, o->n_slots);
    }
    if (o->steps_per_launch == 0) {
        o->steps_per_launch = 1;
    }
    if (o->steps_per_launch > MAX_STEPS_PER_LAUNCH) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: steps_per_launch %u is outside 1..%u", fn,
                          o->steps_per_launch, MAX_STEPS_PER_LAUNCH);
    }
    return ACG_OK;
}

/* The decode steps a launch runs here: steps_per_launch where the device's graphs hold loops
 * and one rank serves, else 1 (model.h, "Decoding steps per launch"), saying why. */
static uint32_t loop_steps(const acg_model *m) {
    const uint32_t n = m->options.steps_per_launch;
    if (n <= 1) {
        return 1;
    }
    const char *why = m->group != NULL ? "an allreduce cannot be in a loop's body"
                      : !acg_device_get_capability(m->dev)->graph_loops
                          ? "its graphs hold no loops (graph_loops is false)"
                          : NULL;
    if (why != NULL) {
        acg__log(ACG_LOG_INFO,
                 "acg_model_create: steps_per_launch %u: %s decodes one step per launch: %s", n,
                 acg_device_get_spec(m->dev), why);
        return 1;
    }
    return n;
}

/* ---- tensor parallelism -------------------------------------------------------------------- */

/* Reads the caller's comm at its own size into *out and checks what the split needs. n_ranks 1
 * is one process: nothing is split and nothing communicated. Local checks only: a rank refused
 * here makes the others' first collective fail with ACG_ERR_COMM. */
static acg_status read_comm(acg_device *dev, const acg_model_config *c, const acg_comm *comm,
                            acg_comm *out) {
    static const char fn[] = "acg_model_create";
    const acg_comm defaults = ACG_COMM_INIT;
    ACG__TRY(acg__config_read(out, sizeof *out, &defaults, comm, offsetof(acg_comm, rank),
                              "acg_comm", fn));
    if (out->barrier == NULL || out->allreduce_min_i32 == NULL ||
        (out->n_ranks > 1 && out->broadcast == NULL)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the comm has no %s callback", fn,
                          out->barrier == NULL             ? "barrier"
                          : out->allreduce_min_i32 == NULL ? "allreduce_min_i32"
                                                           : "broadcast");
    }
    ACG__TRY(acg__comm_check_ranks(out, fn));
    /* Attention may leave a rank empty (it adds zeros); the feed-forward split may not, or the
     * rank would have no w2 columns to multiply. */
    if (out->n_ranks > c->hidden_dim) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: %ld ranks cannot split hidden_dim %d: each needs a unit", fn,
                          (long)out->n_ranks, c->hidden_dim);
    }
    if (out->n_ranks > 1 && !acg_device_get_capability(dev)->collectives) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: a model split over %ld ranks needs collectives, which %s does not "
                          "have",
                          fn, (long)out->n_ranks, acg_device_get_spec(dev));
    }
    return ACG_OK;
}

/* Every rank must build the same model: a rank with another configuration or other options
 * would queue other collectives (other buckets, other sizes), which nothing could match. */
static acg_status agree_on_model(const acg_comm *comm, const acg_model_config *c,
                                 const acg_model_options *o) {
    static const char *const names[] = {
        "n_ranks",           "dim",        "hidden_dim",      "n_layers",
        "n_heads",           "n_kv_heads", "vocab_size",      "seq_len",
        "shared_classifier", "max_batch",  "max_step_tokens", "page_size",
        "kv_pages",          "graphs",     "n_slots",         "keep_logits",
        "steps_per_launch",
    };
    const int32_t v[] = {
        comm->n_ranks,
        c->dim,
        c->hidden_dim,
        c->n_layers,
        c->n_heads,
        c->n_kv_heads,
        c->vocab_size,
        c->seq_len,
        c->shared_classifier,
        (int32_t)o->max_batch,
        (int32_t)o->max_step_tokens,
        (int32_t)o->page_size,
        (int32_t)o->kv_pages,
        (int32_t)o->graphs,
        (int32_t)o->n_slots,
        o->keep_logits,
        (int32_t)o->steps_per_launch,
    };
    enum { N = sizeof v / sizeof v[0] };
    _Static_assert(sizeof names / sizeof names[0] == N, "a name per value");
    int32_t lo[N], hi[N];
    acg_status st = acg__model_min_max(comm, v, N, lo, hi);
    if (st != ACG_OK) {
        char why[512];
        acg__error_copy(why, sizeof why);
        return acg__error(st,
                          "acg_model_create: rank %ld: agreeing on the model with the other "
                          "ranks: %s",
                          (long)comm->rank, why);
    }
    for (size_t i = 0; i < N; i++) {
        if (lo[i] != hi[i]) {
            return acg__error(ACG_ERR_COMM,
                              "acg_model_create: rank %ld: the ranks disagree on %s (%ld here, "
                              "%ld .. %ld over the ranks): every rank must pass the same weights "
                              "and options",
                              (long)comm->rank, names[i], (long)v[i], (long)lo[i], (long)hi[i]);
        }
    }
    return ACG_OK;
}

acg_status acg__model_min_max(const acg_comm *comm, const int32_t *values, size_t n, int32_t *lo,
                              int32_t *hi) {
    int32_t both[64];
    if (n > 32) {
        return acg__error(ACG_ERR_INTERNAL, "acg__model_min_max: %zu values", n);
    }
    /* The least of ~v is ~(the greatest of v), and ~ cannot overflow as a negation can. */
    for (size_t i = 0; i < n; i++) {
        both[i] = values[i];
        both[n + i] = ~values[i];
    }
    uint64_t serial = acg__error_serial();
    acg_status st = comm->allreduce_min_i32(comm->user, both, 2 * n);
    if (st != ACG_OK) {
        /* A detail left over from an earlier failure would mislead. */
        return acg__error_serial() != serial
                   ? st
                   : acg__error(st, "the comm's allreduce_min_i32 returned %s and set no detail",
                                acg_status_name(st));
    }
    for (size_t i = 0; i < n; i++) {
        lo[i] = both[i];
        hi[i] = ~both[n + i];
    }
    return ACG_OK;
}

/* This rank's heads, feed-forward units and classifier rows: rank r of n gets the KV heads
 * [r * n_kv_heads / n, (r + 1) * n_kv_heads / n) with the query heads that read them, the units
 * [r * hidden_dim / n, (r + 1) * hidden_dim / n) and the tokens
 * [r * vocab_size / n, (r + 1) * vocab_size / n) to score. Contiguous, so each shard is a block
 * of rows or of columns; uneven where n does not divide them. One rank gets everything. */
static void split(acg_model *m, int32_t rank, int32_t n_ranks) {
    const acg_model_config *c = &m->config;
    const uint32_t r = (uint32_t)rank, n = (uint32_t)n_ranks, n_kv = (uint32_t)c->n_kv_heads,
                   hidden = (uint32_t)c->hidden_dim, vocab = (uint32_t)c->vocab_size,
                   kv_mul = (uint32_t)(c->n_heads / c->n_kv_heads);
    m->head_size = (uint32_t)(c->dim / c->n_heads);
    m->kv_head_lo = r * n_kv / n;
    m->n_kv_heads = (r + 1) * n_kv / n - m->kv_head_lo;
    m->n_heads = m->n_kv_heads * kv_mul;
    m->q_dim = m->n_heads * m->head_size;
    m->kv_dim = m->n_kv_heads * m->head_size;
    m->hidden_lo = r * hidden / n;
    m->hidden = (r + 1) * hidden / n - m->hidden_lo;
    m->vocab_lo = r * vocab / n;
    m->vocab_n = (r + 1) * vocab / n - m->vocab_lo;
}

/* Decode buckets (b rows of one token), each also as a loop of loop_steps (key_info) when that
 * is more than one, and mixed buckets (max_batch rows, more tokens). */
static uint32_t bucket_list(const acg_model_options *o, uint32_t loop_steps, acg_bucket_key *keys,
                            uint32_t cap) {
    uint32_t n = 0;
    for (uint32_t b = 1; n + 1 < cap; b *= 2) {
        uint32_t rows = b < o->max_batch ? b : o->max_batch;
        keys[n++] = (acg_bucket_key){"step", 0, rows, rows};
        if (loop_steps > 1) {
            keys[n++] = (acg_bucket_key){"step", loop_steps, rows, rows};
        }
        if (rows == o->max_batch) {
            break;
        }
    }
    for (uint32_t t = 64; n < cap; t *= 2) {
        uint32_t tokens = t < o->max_step_tokens ? t : o->max_step_tokens;
        if (tokens > o->max_batch) {
            keys[n++] = (acg_bucket_key){"step", 0, o->max_batch, tokens};
        }
        if (tokens == o->max_step_tokens) {
            break;
        }
    }
    return n;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static acg_status build_engine(acg_model *m) {
    const acg_model_config *c = &m->config;
    const acg_model_options *o = &m->options;
    acg_kv_config kc = ACG_KV_CONFIG_INIT;
    kc.n_layers = (uint32_t)c->n_layers;
    kc.n_pages = o->kv_pages;
    kc.page_size = o->page_size;
    /* A rank without KV heads still keeps the page table, which admission runs on and which
     * must be every rank's alike; its cache is one float wide (acg refuses empty buffers) and
     * nothing reads or writes it. */
    kc.kv_dim = m->kv_dim > 0 ? m->kv_dim : 1;
    acg_status st = acg_kv_cache_create(m->dev, &kc, &m->kv);
    if (st == ACG_OK) {
        st = acg_kv_cache_get_buffers(m->kv, &m->k_cache, &m->v_cache);
    }
    acg_attn_plan_config pc = ACG_ATTN_PLAN_CONFIG_INIT;
    pc.batch = o->max_batch;
    pc.max_seq_len = (uint32_t)c->seq_len;
    pc.page_size = o->page_size;
    pc.max_query_tokens = o->max_step_tokens;
    for (uint32_t s = 0; s < o->n_slots && st == ACG_OK; s++) {
        st = acg_attn_plan_create(m->dev, &pc, &m->plans[s]);
    }
    if (st == ACG_OK) {
        acg_stager_config sc = ACG_STAGER_CONFIG_INIT;
        /* The largest upload is a plan: block table, query offsets and KV lengths. */
        size_t width = ((size_t)c->seq_len + o->page_size - 1) / o->page_size;
        size_t table = ((size_t)o->max_batch * (width + 2) + 1) * sizeof(int32_t);
        size_t tokens = (size_t)o->max_step_tokens * sizeof(int32_t);
        sc.buffer_bytes = table > tokens ? table : tokens;
        st = acg_stager_create(m->dev, &sc, &m->stager);
    }
    size_t state_bytes = (size_t)o->max_batch * ACG_SAMPLER_STATE_WORDS * sizeof(uint32_t);
    if (st == ACG_OK) {
        st = acg__buffer_alloc_owned(m->dev, state_bytes, m, "model", &m->states);
    }
    if (st == ACG_OK) {
        st = acg_fill(m->stream, m->states, 0, state_bytes, 0, 4);
    }
    if (st == ACG_OK) {
        st = acg_pinned_alloc(m->dev, (size_t)o->max_batch * ACG__SAMPLE_WORDS * sizeof(int32_t),
                              (void **)&m->step_result);
    }
    if (st == ACG_OK && o->keep_logits) {
        st = acg_pinned_alloc(m->dev, (size_t)o->max_batch * c->vocab_size * sizeof(float),
                              (void **)&m->step_logits);
    }
    if (st == ACG_OK && m->loop_steps > 1) {
        st = acg_pinned_alloc(
            m->dev, (size_t)o->max_batch * m->loop_steps * ACG__SAMPLE_WORDS * sizeof(int32_t),
            (void **)&m->step_ring);
    }
    if (st == ACG_OK && m->loop_steps > 1) {
        st = acg_pinned_alloc(m->dev, 5 * (size_t)o->max_batch * sizeof(int32_t),
                              (void **)&m->step_state);
    }
    if (st == ACG_OK) {
        m->seats = acg__calloc(o->max_batch, sizeof *m->seats);
        m->step_req = acg__calloc(o->max_batch, sizeof *m->step_req);
        m->step_rows = acg__calloc(o->max_batch, sizeof *m->step_rows);
        m->step_ids = acg__calloc(o->max_step_tokens, sizeof *m->step_ids);
        m->step_seats = acg__calloc(o->max_batch, sizeof *m->step_seats);
        m->step_ctl = acg__calloc(3 * (size_t)o->max_batch, sizeof *m->step_ctl);
        if (m->seats == NULL || m->step_req == NULL || m->step_rows == NULL ||
            m->step_ids == NULL || m->step_seats == NULL || m->step_ctl == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_model_create: out of memory");
        }
    }
    return st;
}

static acg_status build_runner(acg_model *m) {
    acg_bucket_key keys[48];
    uint32_t n = bucket_list(&m->options, m->loop_steps, keys, 48);
    acg_recipe recipe;
    acg__model_recipe(m, &recipe);
    acg_runner_config rc = ACG_RUNNER_CONFIG_INIT;
    rc.recipe = &recipe;
    rc.buckets = keys;
    rc.n_buckets = n;
    rc.stream = m->stream;
    rc.n_slots = m->options.n_slots;
    rc.graphs = m->options.graphs;
    /* With several ranks a bucket is kept only where every rank captured it: a rank replaying
     * while another runs eagerly is fine, but their allreduces must pair up step by step. */
    rc.comm = m->options.comm;
    acg_status st = acg_runner_create(m->dev, &rc, &m->runner);
    for (uint32_t b = 0; st == ACG_OK && b < n; b++) {
        acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
        st = acg_runner_get_report(m->runner, b, &rep);
        m->stats.capture_ms += rep.capture_ms;
        m->stats.buckets_captured += rep.state == ACG_BUCKET_CAPTURED;
        m->stats.buckets_dropped += rep.state == ACG_BUCKET_DROPPED;
    }
    return st;
}

static void free_model(acg_model *m) {
    if (m->stream != NULL) {
        acg_stream_synchronize(m->stream);
    }
    acg__model_free_requests(m);
    acg_runner_destroy(m->runner);
    acg_device_group_destroy(m->group); /* after the runner: its graphs hold the group */
    for (int s = 0; s < 2; s++) {
        acg_attn_plan_destroy(m->plans[s]);
    }
    acg_stager_destroy(m->stager);
    acg_kv_cache_destroy(m->kv);
    acg__buffer_free_owned(m->states, m, "acg_model_destroy");
    acg_pinned_free(m->step_result);
    acg_pinned_free(m->step_logits);
    acg_pinned_free(m->step_ring);
    acg__free(m->step_ctl);
    acg_pinned_free(m->step_state);
    acg__free(m->seats);
    acg__free(m->step_req);
    acg__free(m->step_rows);
    acg__free(m->step_ids);
    acg__free(m->step_seats);
    free_weights(m);
    acg_stream_destroy(m->stream);
    acg__handle_remove(m);
    acg__free(m);
}

acg_status acg_model_create(acg_device *dev, const acg_model_weights *weights,
                            const acg_model_options *options, acg_model **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_create";
    const acg_model_config *c = acg_model_weights_get_config(weights);
    if (dev == NULL || c == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %s", fn,
                          dev == NULL ? "dev is NULL" : "weights is not a live weights object");
    }
    ACG__TRY(acg__check_arg(out, "out", fn));
    const acg_model_options defaults = ACG_MODEL_OPTIONS_INIT;
    acg_model_options o = defaults;
    acg_status st = ACG_OK;
    if (options != NULL) {
        st = acg__config_read(&o, sizeof o, &defaults, options,
                              offsetof(acg_model_options, max_batch), "acg_model_options", fn);
    }
    if (st == ACG_OK) {
        st = check_options(c, &o);
    }
    acg_comm comm = ACG_COMM_INIT;
    if (st == ACG_OK && o.comm != NULL) {
        st = read_comm(dev, c, o.comm, &comm);
    }
    /* One rank is the one-process model: no group, no agreement, nothing else. */
    const bool split_model = o.comm != NULL && comm.n_ranks > 1;
    if (st == ACG_OK && split_model) {
        st = agree_on_model(&comm, c, &o);
    }
    if (st != ACG_OK) {
        return st;
    }
    acg_model *m = acg__new(sizeof *m, fn);
    if (m == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    m->dev = dev;
    m->config = *c;
    m->options = o;
    m->comm = comm;
    m->options.comm = split_model ? &m->comm : NULL;
    split(m, split_model ? comm.rank : 0, split_model ? comm.n_ranks : 1);
    m->next_id = 1;
    st = acg_stream_create(dev, &m->stream);
    if (st == ACG_OK && split_model) {
        acg__log(ACG_LOG_INFO,
                 "%s: rank %ld of %ld: KV heads [%u, %u), %u query heads, feed-forward units "
                 "[%u, %u), tokens [%u, %u)",
                 fn, (long)comm.rank, (long)comm.n_ranks, m->kv_head_lo,
                 m->kv_head_lo + m->n_kv_heads, m->n_heads, m->hidden_lo, m->hidden_lo + m->hidden,
                 m->vocab_lo, m->vocab_lo + m->vocab_n);
        /* Before the weights: a rank that cannot join fails before anyone uploads. */
        st = acg_device_group_create(dev, &m->comm, &m->group);
    }
    if (st == ACG_OK) {
        st = build_kernels(m);
    }
    m->loop_steps = loop_steps(m);
    if (st == ACG_OK) {
        st = build_weights(m, acg_model_weights_get_tensors(weights));
    }
    if (st == ACG_OK) {
        st = build_engine(m);
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(m->stream); /* the weights are read: the caller may free them */
    }
    if (st == ACG_OK) {
        acg__log(ACG_LOG_INFO, "acg_model_create: capturing the step's buckets");
        st = build_runner(m);
    }
    /* Last: a call holding a stale handle that this address matches must not see the model
     * before it is whole (the registry's lock orders its fields before any lookup). */
    if (st == ACG_OK && acg__handle_add(m, ACG__HANDLE_MODEL, &m->life) != ACG_OK) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (st != ACG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", acg_last_error());
        free_model(m);
        return acg__error(st, "%s", why);
    }
    *out = m;
    return ACG_OK;
}

acg_status acg_model_destroy(acg_model *m) {
    /* Waits for other threads' calls on the model (a step) to return. */
    ACG__DESTROY_BEGIN(m, ACG__HANDLE_MODEL, "acg_model_destroy", "model");
    free_model(m);
    return ACG_OK;
}

acg_status acg_model_get_stats(const acg_model *m, acg_model_stats *out) {
    ACG__CALL_SCOPE;
    if (!acg__handle_use(m, ACG__HANDLE_MODEL)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "acg_model_get_stats: not a live model");
    }
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_model_get_stats: out is NULL");
    }
    acg_model_stats stats = m->stats;
    acg_stager_stats sg = ACG_STAGER_STATS_INIT;
    ACG__TRY(acg_stager_get_stats(m->stager, &sg));
    stats.uploads = sg.copies;
    return acg__output_write(out, &stats, sizeof stats, "acg_model_stats", "acg_model_get_stats");
}

acg_runner *acg_model_get_runner(const acg_model *m) {
    ACG__CALL_SCOPE;
    return acg__handle_use(m, ACG__HANDLE_MODEL) ? m->runner : NULL;
}

acg_stream *acg_model_get_stream(const acg_model *m) {
    ACG__CALL_SCOPE;
    return acg__handle_use(m, ACG__HANDLE_MODEL) ? m->stream : NULL;
}
