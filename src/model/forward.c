/* forward.c — the reference model's forward pass: one engine step of a Llama-style decoder.
 *
 * Reads top to bottom like llama2.c's forward(), but for a whole step at once: T query tokens
 * of up to B requests, packed (a prefill chunk is several tokens of one row, a decode one
 * token), with every layer's keys and values written into the paged KV cache and attention
 * reading them back through the slot's attention plan. The same code runs eagerly and under
 * capture: shapes come from the bucket, the step's data from the plan and the input buffers,
 * and activations from acg_stream_alloc (graph scratch when captured).
 *
 * Split over several ranks (model.h, "Tensor parallelism"), each rank runs the same pass on its
 * own heads, feed-forward units and classifier rows, whose widths (q_dim, kv_dim, hidden,
 * vocab_n) are its own; each block ends with the allreduce of its (T, dim) output, and the
 * classifier with that of the (B, vocab) logits. Every width is the model's with one rank, and
 * no allreduce is queued, so that pass is the one-process pass launch for launch.
 */
#include <stdatomic.h>
#include <string.h>

#include "model-impl.h"

/* ---- launch helpers ------------------------------------------------------------------------ */

/* Work-group width of every shaped launch. One fixed shape per kernel, whatever the bucket:
 * OpenCL drivers such as PoCL compile a kernel once per work-group shape, so a shape chosen
 * from the grid would compile again for every bucket. */
#define GROUP 32u

/* A shaped kernel's grid: x rounded up to whole groups (its work items past the counts return at
 * once; the cpu code reads the counts from its arguments). */
static acg_dims grid(uint32_t x, uint32_t y) {
    acg_dims d = {{(x + GROUP - 1) / GROUP * GROUP, y, 1}, {GROUP, 1, 1}};
    return d;
}

/* An elementwise kernel's grid of n = rows * width items, whose grid must be exact: groups as
 * wide as the largest power of two (up to GROUP) dividing width, so the shape does not change
 * with the number of rows. */
static acg_dims elementwise(uint32_t n, uint32_t width) {
    uint32_t group = 1;
    while (group < GROUP && width % (group * 2) == 0) {
        group *= 2;
    }
    acg_dims d = {{n, 1, 1}, {group, 1, 1}};
    return d;
}

static acg_arg buf(const acg_buffer *b, size_t offset) { return acg_arg_buffer(b, offset); }

static acg_arg u32(uint32_t v) { return acg_arg_u32(v); }

#define LAUNCH(kernel, dims, ...)                                                                  \
    do {                                                                                           \
        const acg_arg args_[] = {__VA_ARGS__};                                                     \
        const acg_dims dims_ = (dims);                                                             \
        acg_status st_ =                                                                           \
            acg_kernel_launch(s, (kernel), &dims_, args_, sizeof args_ / sizeof args_[0]);         \
        if (st_ != ACG_OK) {                                                                       \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

/* ---- activations --------------------------------------------------------------------------- */

/* Widths are this rank's (model-impl.h): with one rank q_dim is dim and hidden hidden_dim. A
 * rank without KV heads has no q, k, v, att or xb2 (NULL). */
typedef struct activations {
    acg_buffer *x;      /* (T, dim) the residual stream */
    acg_buffer *xb;     /* (T, dim) normed input of a block, then a block's output (this
                           rank's part of it, until the allreduce) */
    acg_buffer *xb2;    /* (T, q_dim) attention output */
    acg_buffer *q;      /* (T, q_dim) */
    acg_buffer *k, *v;  /* (T, kv_dim) this step's keys and values */
    acg_buffer *att;    /* (T, n_heads, table_width * page_size) attention scores */
    acg_buffer *hb;     /* (T, hidden) */
    acg_buffer *hb2;    /* (T, hidden) */
    acg_buffer *last;   /* (B, dim) each row's last token */
    acg_buffer *logits; /* (B, vocab) scratch (only the sampler reads them), or the step's
                           logits output when the model keeps them */
    acg_buffer *scores; /* (B, vocab_n) this rank's logits, split over ranks with B > 1 */
    acg_buffer *probs;  /* (B, vocab) the sampler's probabilities */
    /* (n_owned) the fields above that hold a buffer, in the order they were allocated: what
     * free_activations frees (a partly built set, or kept logits, are not all of them). */
    acg_buffer **owned[14]; /* one per field, and a loop's step count and condition */
    uint32_t n_owned;
} activations;

/* Frees the activations that build_activations allocated, in their order. */
static void free_activations(acg_stream *s, activations *a) {
    for (uint32_t i = 0; i < a->n_owned; i++) {
        acg_stream_free(s, *a->owned[i]);
        *a->owned[i] = NULL;
    }
    a->n_owned = 0;
}

/* Allocates one activation of `bytes`, unless an earlier one failed (*st) or it is empty: the
 * attention's on a rank without KV heads, scores where unused (acg refuses empty buffers). */
static void alloc_activation(acg_stream *s, size_t bytes, acg_buffer **buf, acg_status *st,
                             activations *a) {
    if (*st == ACG_OK && bytes > 0) {
        *st = acg_stream_alloc(s, bytes, buf);
        if (*st == ACG_OK) {
            a->owned[a->n_owned++] = buf;
        }
    }
}

static acg_status build_activations(const acg_model *m, acg_stream *s, const acg_step_io *io,
                                    uint32_t span, activations *a) {
    const size_t T = io->bucket->tokens, B = io->bucket->batch;
    const size_t dim = (size_t)m->config.dim, vocab = (size_t)m->config.vocab_size;
    const size_t f = sizeof(float);
    const bool split_scores = m->group != NULL && B > 1;
    memset(a, 0, sizeof *a);
    acg_status st = ACG_OK;
    alloc_activation(s, T * dim * f, &a->x, &st, a);
    alloc_activation(s, T * dim * f, &a->xb, &st, a);
    alloc_activation(s, T * m->q_dim * f, &a->xb2, &st, a);
    alloc_activation(s, T * m->q_dim * f, &a->q, &st, a);
    alloc_activation(s, T * m->kv_dim * f, &a->k, &st, a);
    alloc_activation(s, T * m->kv_dim * f, &a->v, &st, a);
    alloc_activation(s, T * m->n_heads * span * f, &a->att, &st, a);
    alloc_activation(s, T * m->hidden * f, &a->hb, &st, a);
    alloc_activation(s, T * m->hidden * f, &a->hb2, &st, a);
    alloc_activation(s, B * dim * f, &a->last, &st, a);
    if (!m->options.keep_logits) {
        /* Kept logits are an output instead (the runner's, not the step's to free). */
        alloc_activation(s, B * vocab * f, &a->logits, &st, a);
    }
    alloc_activation(s, split_scores ? B * m->vocab_n * f : 0, &a->scores, &st, a);
    alloc_activation(s, B * vocab * f, &a->probs, &st, a);
    if (st != ACG_OK) {
        free_activations(s, a);
    }
    return st;
}

/* ---- the forward pass ---------------------------------------------------------------------- */

/* A block's output, summed over the ranks in place: every rank gets the same bits (the cpu
 * backend adds in rank order, NCCL on cuda in the order of its algorithm, the same on every
 * rank: acg_allreduce), so the residual streams stay alike. Nothing with one rank. */
static acg_status sum_over_ranks(acg_model *m, acg_stream *s, acg_buffer *xb, uint32_t T) {
    if (m->group == NULL) {
        return ACG_OK;
    }
    return acg_allreduce(s, m->group, xb, 0, (size_t)T * (size_t)m->config.dim);
}

static acg_status forward_layers(acg_model *m, acg_stream *s, const acg_attn_plan_views *plan,
                                 uint32_t T, uint32_t B, const activations *a) {
    const acg_model_config *c = &m->config;
    const acg__model_kernels *k = &m->k;
    const acg__model_device_weights *w = &m->w;
    /* This rank's widths: the model's own with one rank. */
    const uint32_t dim = (uint32_t)c->dim, q_dim = m->q_dim, hidden = m->hidden, kv_dim = m->kv_dim,
                   hs = m->head_size, n_heads = m->n_heads, n_kv_heads = m->n_kv_heads,
                   seq_len = (uint32_t)c->seq_len, page = m->options.page_size,
                   n_pages = m->options.kv_pages, width = plan->table_width;
    const size_t f = sizeof(float);
    const size_t cache_layer = (size_t)n_pages * page * kv_dim * f;

    for (uint32_t l = 0; l < (uint32_t)c->n_layers; l++) {
        /* attention rmsnorm */
        LAUNCH(k->rmsnorm, grid(T, 1), buf(a->xb, 0), buf(a->x, 0), buf(w->rms_att, l * dim * f),
               u32(dim), u32(T), acg_arg_f32(1e-5f));

        if (n_kv_heads > 0) {
            /* qkv matmuls (this rank's heads) */
            LAUNCH(k->matmul, grid(q_dim, T), buf(a->q, 0), buf(a->xb, 0),
                   buf(w->wq, (size_t)l * q_dim * dim * f), u32(dim), u32(q_dim), u32(T));
            LAUNCH(k->matmul, grid(kv_dim, T), buf(a->k, 0), buf(a->xb, 0),
                   buf(w->wk, (size_t)l * kv_dim * dim * f), u32(dim), u32(kv_dim), u32(T));
            LAUNCH(k->matmul, grid(kv_dim, T), buf(a->v, 0), buf(a->xb, 0),
                   buf(w->wv, (size_t)l * kv_dim * dim * f), u32(dim), u32(kv_dim), u32(T));

            /* RoPE: rotate q and k by each token's position (a head's pairs turn by their
             * index within the head, so a block of whole heads rotates as in the full width) */
            LAUNCH(k->rope, grid(q_dim / 2, T), buf(a->q, 0), buf(w->rope_cos, 0),
                   buf(w->rope_sin, 0), buf(plan->query_offsets, 0), buf(plan->kv_lens, 0),
                   u32(q_dim), u32(hs), u32(T), u32(B), u32(seq_len));
            LAUNCH(k->rope, grid(kv_dim / 2, T), buf(a->k, 0), buf(w->rope_cos, 0),
                   buf(w->rope_sin, 0), buf(plan->query_offsets, 0), buf(plan->kv_lens, 0),
                   u32(kv_dim), u32(hs), u32(T), u32(B), u32(seq_len));

            /* this step's keys and values into the paged cache */
            LAUNCH(k->kv_store, grid(kv_dim, T), buf(m->k_cache, l * cache_layer),
                   buf(m->v_cache, l * cache_layer), buf(a->k, 0), buf(a->v, 0),
                   buf(plan->block_table, 0), buf(plan->query_offsets, 0), buf(plan->kv_lens, 0),
                   u32(kv_dim), u32(T), u32(B), u32(width), u32(page), u32(n_pages));

            /* multihead attention over every position up to each token's own */
            LAUNCH(k->attention, grid(n_heads, T), buf(a->xb2, 0), buf(a->att, 0), buf(a->q, 0),
                   buf(m->k_cache, l * cache_layer), buf(m->v_cache, l * cache_layer),
                   buf(plan->block_table, 0), buf(plan->query_offsets, 0), buf(plan->kv_lens, 0),
                   u32(n_heads), u32(n_kv_heads), u32(hs), u32(T), u32(B), u32(width), u32(page),
                   u32(n_pages));

            /* output projection (this rank's columns of wo: its part of the sum) */
            LAUNCH(k->matmul, grid(dim, T), buf(a->xb, 0), buf(a->xb2, 0),
                   buf(w->wo, (size_t)l * dim * q_dim * f), u32(q_dim), u32(dim), u32(T));
        } else {
            /* No heads here: this rank's part of the sum is zero. */
            ACG__TRY(acg_fill(s, a->xb, 0, (size_t)T * dim * f, 0, 4));
        }
        /* then the residual, once every rank's part is in */
        ACG__TRY(sum_over_ranks(m, s, a->xb, T));
        LAUNCH(k->axpy, elementwise(T * dim, dim), buf(a->x, 0), buf(a->xb, 0), acg_arg_f32(1.0f));

        /* ffn rmsnorm */
        LAUNCH(k->rmsnorm, grid(T, 1), buf(a->xb, 0), buf(a->x, 0), buf(w->rms_ffn, l * dim * f),
               u32(dim), u32(T), acg_arg_f32(1e-5f));

        /* w2(silu(w1(x)) * w3(x)) over this rank's units, summed over the ranks, then the
         * residual */
        LAUNCH(k->matmul, grid(hidden, T), buf(a->hb, 0), buf(a->xb, 0),
               buf(w->w1, (size_t)l * hidden * dim * f), u32(dim), u32(hidden), u32(T));
        LAUNCH(k->matmul, grid(hidden, T), buf(a->hb2, 0), buf(a->xb, 0),
               buf(w->w3, (size_t)l * hidden * dim * f), u32(dim), u32(hidden), u32(T));
        LAUNCH(k->swiglu, elementwise(T * hidden, hidden), buf(a->hb, 0), buf(a->hb, 0),
               buf(a->hb2, 0));
        LAUNCH(k->matmul, grid(dim, T), buf(a->xb, 0), buf(a->hb, 0),
               buf(w->w2, (size_t)l * dim * hidden * f), u32(hidden), u32(dim), u32(T));
        ACG__TRY(sum_over_ranks(m, s, a->xb, T));
        LAUNCH(k->axpy, elementwise(T * dim, dim), buf(a->x, 0), buf(a->xb, 0), acg_arg_f32(1.0f));
    }
    return ACG_OK;
}

/* Each row's logits from its normed last token. Split over ranks, a rank scores only its
 * tokens [vocab_lo, + vocab_n) (reading that share of the classifier, the largest weight of a
 * small model), into their place in zeroed logits, and an allreduce gathers them: the other
 * ranks add zeros to each logit, which leaves it as it is, so every rank gets the same logits,
 * each one dot product computed as one rank computes it. */
static acg_status classify(acg_model *m, acg_stream *s, uint32_t B, const activations *a) {
    const acg__model_kernels *k = &m->k;
    const uint32_t dim = (uint32_t)m->config.dim, vocab = (uint32_t)m->config.vocab_size,
                   v_n = m->vocab_n;
    const size_t f = sizeof(float);
    if (m->group == NULL) {
        LAUNCH(k->matmul, grid(vocab, B), buf(a->logits, 0), buf(a->last, 0),
               buf(m->w.classifier, 0), u32(dim), u32(vocab), u32(B));
        return ACG_OK;
    }
    /* A shared classifier is the whole token embedding: this rank's rows start at vocab_lo. */
    const size_t rows = m->config.shared_classifier ? (size_t)m->vocab_lo * dim * f : 0;
    acg_status st = acg_fill(s, a->logits, 0, (size_t)B * vocab * f, 0, 4);
    if (st == ACG_OK && v_n > 0 && B == 1) {
        /* one row: straight into its place */
        LAUNCH(k->matmul, grid(v_n, 1), buf(a->logits, (size_t)m->vocab_lo * f), buf(a->last, 0),
               buf(m->w.classifier, rows), u32(dim), u32(v_n), u32(1));
    } else if (st == ACG_OK && v_n > 0) {
        LAUNCH(k->matmul, grid(v_n, B), buf(a->scores, 0), buf(a->last, 0),
               buf(m->w.classifier, rows), u32(dim), u32(v_n), u32(B));
        for (uint32_t b = 0; b < B && st == ACG_OK; b++) {
            st = acg_copy_d2d(s, a->logits, ((size_t)b * vocab + m->vocab_lo) * f, a->scores,
                              (size_t)b * v_n * f, (size_t)v_n * f);
        }
    }
    return st == ACG_OK ? acg_allreduce(s, m->group, a->logits, 0, (size_t)B * vocab) : st;
}

/* The step: token embeddings, the layers, then each row's last token through the final
 * rmsnorm, the classifier and the sampler. Split over ranks, every rank runs the embedding, the
 * norm and the sampler whole: their inputs are the same bits on every rank after the last
 * allreduce (the classifier's, see classify), so every rank samples the same tokens, and no
 * rank waits for another's. */
static acg_status forward_step(acg_model *m, acg_stream *s, const acg_step_io *io,
                               const acg_attn_plan_views *plan, const activations *a) {
    const acg_model_config *c = &m->config;
    const acg__model_kernels *k = &m->k;
    const uint32_t T = io->bucket->tokens, B = io->bucket->batch, dim = (uint32_t)c->dim,
                   vocab = (uint32_t)c->vocab_size;

    LAUNCH(k->embed, grid(dim, T), buf(a->x, 0), buf(m->w.token_embedding, 0),
           buf(io->inputs[0], 0), u32(dim), u32(vocab), u32(T));

    ACG__TRY(forward_layers(m, s, plan, T, B, a));

    LAUNCH(k->gather_last, grid(dim, B), buf(a->last, 0), buf(a->x, 0), buf(plan->query_offsets, 0),
           u32(dim), u32(B), u32(T));
    LAUNCH(k->rmsnorm, grid(B, 1), buf(a->last, 0), buf(a->last, 0), buf(m->w.rms_final, 0),
           u32(dim), u32(B), acg_arg_f32(1e-5f));
    ACG__TRY(classify(m, s, B, a));
    /* A loop's seats are the first row of its control input (acg__model_recipe). */
    const acg_buffer *seats = io->bucket->key_info > 1 ? io->inputs[2] : io->inputs[1];
    LAUNCH(k->sample, grid(B, 1), buf(io->outputs[0], 0), buf(a->logits, 0), buf(a->probs, 0),
           buf(seats, 0), buf(m->states, 0), u32(vocab), u32(B), u32(m->options.max_batch));
    return ACG_OK;
}

/* ---- test hook: a capture that fails on one rank ------------------------------------------- */

/* (batch << 32 | tokens) of the bucket whose captures fail in this process; 0: none. */
static _Atomic uint64_t fail_capture_key;

void acg__model_fail_capture(uint32_t batch, uint32_t tokens) {
    atomic_store(&fail_capture_key, batch == 0 ? 0 : (uint64_t)batch << 32 | tokens);
}

/* A host synchronization inside the capture invalidates it, as a recipe's bug would: the runner
 * then sees the core's own ACG_ERR_CAPTURE_INVALIDATED. */
static acg_status injected_capture_failure(acg_stream *s, const acg_bucket_key *b) {
    uint64_t key = atomic_load(&fail_capture_key);
    acg_capture_state state = ACG_CAPTURE_NONE;
    if (key == 0 || key != ((uint64_t)b->batch << 32 | b->tokens) ||
        acg_stream_get_capture_state(s, &state) != ACG_OK || state != ACG_CAPTURE_ACTIVE) {
        return ACG_OK;
    }
    return acg_stream_synchronize(s);
}

/* ---- the recipe ---------------------------------------------------------------------------- */

/* A launch of up to `steps` decode steps (model.h, "Decoding steps per launch"): the ring filled
 * with -1 (no token), the loop's step count and condition zeroed, then the loop, each run a step
 * and decode_advance, which ends it when no row decodes on. loop (8 bytes) is scratch of the
 * step, allocated with the activations before the loop: a body allocates nothing. */
static acg_status forward_loop(acg_model *m, acg_stream *s, const acg_step_io *io,
                               const acg_attn_plan_views *plan, const activations *a,
                               acg_buffer *loop) {
    const uint32_t B = io->bucket->batch, steps = (uint32_t)io->bucket->key_info;
    acg_buffer *ring = io->outputs[ACG__MODEL_OUT_RING(m)];
    ACG__TRY(acg_fill(s, ring, 0, (size_t)B * steps * ACG__SAMPLE_WORDS * sizeof(int32_t),
                      UINT32_MAX, 4));
    ACG__TRY(acg_fill(s, loop, 0, 8, 0, 4));
    ACG__TRY(acg_stream_loop_begin(s, loop, 4, steps));
    ACG__TRY(forward_step(m, s, io, plan, a));
    const size_t row = (size_t)B * sizeof(int32_t);
    LAUNCH(m->k.decode_advance, grid(1, 1), buf(io->outputs[0], 0), buf(io->inputs[0], 0),
           buf(io->inputs[2], 0), buf(plan->kv_lens, 0), buf(io->inputs[2], row), buf(ring, 0),
           buf(loop, 0), u32(B), u32(steps), u32((uint32_t)m->config.vocab_size),
           acg_arg_i32(ACG_TOKEN_EOS));
    return acg_stream_loop_end(s);
}

static acg_status forward(void *user, acg_stream *s, const acg_step_io *io) {
    acg_model *m = user;
    acg_attn_plan_views plan = ACG_ATTN_PLAN_VIEWS_INIT;
    acg_status st = injected_capture_failure(s, io->bucket);
    if (st == ACG_OK) {
        st = acg_attn_plan_get_views(m->plans[io->slot], &plan);
    }
    activations a;
    memset(&a, 0, sizeof a);
    if (st == ACG_OK) {
        st = build_activations(m, s, io, plan.table_width * m->options.page_size, &a);
    }
    acg_buffer *loop = NULL;
    if (st == ACG_OK && io->bucket->key_info > 1) {
        alloc_activation(s, 8, &loop, &st, &a);
    }
    if (st == ACG_OK) {
        if (m->options.keep_logits) {
            a.logits = io->outputs[1];
        }
        st = loop != NULL ? forward_loop(m, s, io, &plan, &a, loop)
                          : forward_step(m, s, io, &plan, &a);
    }
    free_activations(s, &a);
    return st;
}

static bool can_capture(void *user, const acg_capability *cap, char *why, size_t why_size) {
    (void)user;
    (void)cap;
    (void)why;
    (void)why_size;
    /* Kernels, fills and stream-ordered scratch, and split over ranks allreduces, which a
     * device with collectives captures (the model refused the split on any other): nothing a
     * graph device lacks. */
    return true;
}

/* Inputs: token ids, seats, and with loops each row's seat, budget and stop at </s>. */
static size_t input_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    return (size_t)(i == 0 ? b->tokens : i == 1 ? b->batch : 3 * b->batch) * sizeof(int32_t);
}

/* Outputs: the samples, the kept logits, and with loops the rings (a bucket of one step has a
 * ring of one, which it never writes: buffers are never empty). */
static size_t output_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    const acg_model *m = user;
    const size_t pair = ACG__SAMPLE_WORDS * sizeof(int32_t);
    if (i == 0) {
        return (size_t)b->batch * pair;
    }
    if (i == ACG__MODEL_OUT_RING(m) && m->loop_steps > 1) {
        return (size_t)b->batch * (b->key_info > 1 ? b->key_info : 1) * pair;
    }
    return (size_t)b->batch * (size_t)m->config.vocab_size * sizeof(float);
}

void acg__model_recipe(acg_model *m, acg_recipe *out) {
    const acg_recipe init = ACG_RECIPE_INIT;
    *out = init;
    out->name = "llama";
    out->user = m;
    out->n_inputs = m->loop_steps > 1 ? 3 : 2;
    out->n_outputs = (m->options.keep_logits ? 2 : 1) + (m->loop_steps > 1 ? 1 : 0);
    out->can_capture = can_capture;
    out->input_bytes = input_bytes;
    out->output_bytes = output_bytes;
    out->forward = forward;
}
