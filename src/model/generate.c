/* generate.c — serving requests with continuous batching.
 *
 * A request waits in submission order until a batch row (a seat, which also names its sampler
 * state) and KV pages for all of its tokens are free; reserving every page at admission means a
 * running request can never run out and none can take pages another holds. Each step then
 * batches every running request: a chunk of the prompt while it is being read (packed
 * prefill), one token afterwards. The runner picks the tightest bucket, the step's plan and
 * tokens are uploaded, the step replays (or runs eagerly), and the sampled tokens come back:
 * every row's is checked before any row is applied, so a refused step changes no request.
 *
 * Split over ranks, every rank runs this same scheduling on the same requests (the caller
 * submits them on every rank), so every rank admits, batches and samples alike; each step first
 * checks that the ranks agree, since their allreduces only pair up if they do.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "model-impl.h"

struct acg__request {
    acg__request *next;
    uint64_t id;
    acg_request_state state;
    int32_t *tokens;         /* (prompt_len + max_new) the prompt, then generated tokens */
    uint32_t *draw_counters; /* (max_new) */
    float *logits;           /* (vocab) the latest token's logits, when the model keeps them */
    uint32_t prompt_len, n_tokens, max_new, n_generated;
    uint32_t kv_len; /* tokens already in the KV cache */
    int32_t seat;    /* its batch row and sampler state while running, else -1 */
    float temperature, top_p;
    uint64_t seed;
    bool stop_at_eos;
};

static acg_status check_model(const acg_model *m, const char *fn) {
    return acg__handle_use(m, ACG__HANDLE_MODEL)
               ? ACG_OK
               : acg__error(ACG_ERR_INVALID_HANDLE, "%s: not a live model", fn);
}

static acg__request *find(const acg_model *m, uint64_t id) {
    for (acg__request *r = m->requests; r != NULL; r = r->next) {
        if (r->id == id) {
            return r;
        }
    }
    return NULL;
}

static void free_request(acg__request *r) {
    acg__free(r->tokens);
    acg__free(r->draw_counters);
    acg__free(r->logits);
    acg__free(r);
}

void acg__model_free_requests(acg_model *m) {
    while (m->requests != NULL) {
        acg__request *r = m->requests;
        m->requests = r->next;
        free_request(r);
    }
}

/* ---- submission ---------------------------------------------------------------------------- */

static uint32_t pages_for(const acg_model *m, uint32_t tokens) {
    return (tokens + m->options.page_size - 1) / m->options.page_size;
}

acg_status acg_model_submit(acg_model *m, const acg_request *q, uint64_t *id) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_submit";
    ACG__TRY(check_model(m, fn));
    if (q == NULL || id == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: NULL request or id", fn);
    }
    /* From here on q is this library's whole struct, whatever the caller's version. */
    const acg_request defaults = ACG_REQUEST_INIT;
    acg_request whole;
    ACG__TRY(acg__config_read(&whole, sizeof whole, &defaults, q,
                              offsetof(acg_request, max_new_tokens), "acg_request", fn));
    q = &whole;
    ACG__TRY(acg__check_arg(q->prompt, "prompt", fn));
    if (q->prompt_len == 0 || q->max_new_tokens == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s is 0", fn,
                          q->prompt_len == 0 ? "prompt_len" : "max_new_tokens");
    }
    if (!(q->temperature >= 0.0f) || isinf(q->temperature) || !(q->top_p > 0.0f) ||
        q->top_p > 1.0f) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: temperature %g must be finite and >= 0, top_p %g in (0, 1]", fn,
                          (double)q->temperature, (double)q->top_p);
    }
    for (uint32_t i = 0; i < q->prompt_len; i++) {
        if (q->prompt[i] < 0 || q->prompt[i] >= m->config.vocab_size) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: prompt[%u] = %d is outside 0..%d", fn,
                              i, q->prompt[i], m->config.vocab_size - 1);
        }
    }
    uint64_t total = (uint64_t)q->prompt_len + q->max_new_tokens;
    if (total > (uint64_t)m->config.seq_len) {
        return acg__error(ACG_ERR_EXHAUSTED,
                          "%s: %u prompt + %u new tokens exceed the model's seq_len %d", fn,
                          q->prompt_len, q->max_new_tokens, m->config.seq_len);
    }
    if (pages_for(m, (uint32_t)total) > m->options.kv_pages - 1) {
        return acg__error(ACG_ERR_EXHAUSTED, "%s: %llu tokens need %u KV pages, the cache has %u",
                          fn, (unsigned long long)total, pages_for(m, (uint32_t)total),
                          m->options.kv_pages - 1);
    }
    acg__request *r = acg__calloc(1, sizeof *r);
    if (r != NULL) {
        r->tokens = acg__calloc((size_t)total, sizeof *r->tokens);
        r->draw_counters = acg__calloc(q->max_new_tokens, sizeof *r->draw_counters);
        if (m->options.keep_logits) {
            r->logits = acg__calloc((size_t)m->config.vocab_size, sizeof *r->logits);
        }
    }
    if (r == NULL || r->tokens == NULL || r->draw_counters == NULL ||
        (m->options.keep_logits && r->logits == NULL)) {
        if (r != NULL) {
            free_request(r);
        }
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    memcpy(r->tokens, q->prompt, (size_t)q->prompt_len * sizeof *r->tokens);
    r->id = m->next_id++;
    r->state = ACG_REQUEST_WAITING;
    r->prompt_len = r->n_tokens = q->prompt_len;
    r->max_new = q->max_new_tokens;
    r->seat = -1;
    r->temperature = q->temperature;
    r->top_p = q->top_p;
    r->seed = q->seed;
    r->stop_at_eos = q->stop_at_eos;
    acg__request **tail = &m->requests;
    while (*tail != NULL) {
        tail = &(*tail)->next;
    }
    *tail = r;
    *id = r->id;
    return ACG_OK;
}

/* ---- admission and retirement -------------------------------------------------------------- */

static uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Seats the request and writes its sampler state: seed, a zero counter, temperature, top-p. */
static acg_status seat(acg_model *m, acg__request *r, int32_t seat_index) {
    uint32_t state[ACG_SAMPLER_STATE_WORDS] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32), 0,
                                               float_bits(r->temperature), float_bits(r->top_p)};
    acg_status st =
        acg_stager_upload(m->stager, m->stream, m->states, (size_t)seat_index * sizeof state, state,
                          1, sizeof state, NULL, 1);
    if (st != ACG_OK) {
        return st;
    }
    r->seat = seat_index;
    r->state = ACG_REQUEST_RUNNING;
    m->seats[seat_index] = r;
    return ACG_OK;
}

/* Admits waiting requests in order while a seat and pages for all their tokens are free. */
static acg_status admit(acg_model *m, uint32_t *admitted) {
    *admitted = 0;
    for (acg__request *r = m->requests; r != NULL; r = r->next) {
        if (r->state != ACG_REQUEST_WAITING) {
            continue;
        }
        int32_t free_seat = -1;
        for (uint32_t s = 0; s < m->options.max_batch && free_seat < 0; s++) {
            free_seat = m->seats[s] == NULL ? (int32_t)s : -1;
        }
        if (free_seat < 0) {
            return ACG_OK;
        }
        acg_status st = acg_kv_request_reserve(m->kv, r->id, r->prompt_len + r->max_new);
        if (st == ACG_ERR_EXHAUSTED) {
            return ACG_OK; /* first come, first served: later requests wait too */
        }
        if (st == ACG_OK) {
            st = seat(m, r, free_seat);
            if (st != ACG_OK) {
                acg_kv_request_release(m->kv, r->id);
            }
        }
        if (st != ACG_OK) {
            return st;
        }
        (*admitted)++;
    }
    return ACG_OK;
}

static void retire(acg_model *m, acg__request *r) {
    if (r->state == ACG_REQUEST_RUNNING) {
        acg_kv_request_release(m->kv, r->id);
        m->seats[r->seat] = NULL;
        r->seat = -1;
    }
    r->state = ACG_REQUEST_FINISHED;
}

/* ---- a step's rows and inputs ------------------------------------------------------------- */

/* The rows of a step, in seat order: each running request's next chunk. Decoding rows take one
 * token each first; prompts share what is left of the step's token budget. */
static acg_status plan_rows(acg_model *m, acg__request **req, acg_attn_row *rows, uint32_t *n_out,
                            uint32_t *tokens_out) {
    uint32_t n = 0, tokens = 0, budget = m->options.max_step_tokens;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t s = 0; s < m->options.max_batch; s++) {
            acg__request *r = m->seats[s];
            if (r == NULL || (pass == 0) != (r->kv_len >= r->prompt_len)) {
                continue;
            }
            uint32_t q_len = r->n_tokens - r->kv_len;
            if (q_len > budget - tokens) {
                q_len = budget - tokens;
            }
            if (q_len == 0) {
                continue; /* no budget left: this prompt waits for the next step */
            }
            const uint32_t *pages;
            uint32_t n_pages;
            ACG__TRY(acg_kv_request_get_pages(m->kv, r->id, &pages, &n_pages));
            req[n] = r;
            rows[n] = (acg_attn_row){pages, n_pages, r->kv_len + q_len, q_len};
            n++;
            tokens += q_len;
        }
    }
    *n_out = n;
    *tokens_out = tokens;
    return ACG_OK;
}

/* Whether the latest loop launch's read-back (step_state) is io's inputs as the device holds
 * them, and the n ints at `values` padded with `pad` to padded_n are what it holds from int
 * `at` of it, so that uploading them would change nothing. state_held says the first: the
 * latest launch was a loop of state_bucket and state_slot that was applied, and nothing wrote
 * that slot's inputs since (an upload, which may go through another bucket's views of them,
 * ends it, as does a launch). */
static bool state_holds(const acg_model *m, const acg_step_io *io, size_t at, const int32_t *values,
                        size_t n, int32_t pad, size_t padded_n) {
    if (!m->state_held || m->state_bucket != io->bucket_index || m->state_slot != io->slot ||
        memcmp(m->step_state + at, values, n * sizeof *values) != 0) {
        return false;
    }
    for (size_t i = n; i < padded_n; i++) {
        if (m->step_state[at + i] != pad) {
            return false;
        }
    }
    return true;
}

/* Uploads the step's inputs to the lease: token ids (padded with 0) and each row's seat (-1
 * for padding and for a prompt whose chunk does not end it: nothing to sample yet). */
static acg_status upload_inputs(acg_model *m, const acg_lease *lease, acg__request *const *req,
                                const acg_attn_row *rows, uint32_t n, uint32_t tokens, int32_t *ids,
                                int32_t *seats, bool loop) {
    uint32_t t = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(ids + t, req[i]->tokens + req[i]->kv_len, rows[i].q_len * sizeof *ids);
        t += rows[i].q_len;
        seats[i] = rows[i].kv_len == req[i]->n_tokens ? req[i]->seat : -1;
    }
    const int32_t zero = 0, none = -1;
    const acg_bucket_key *b = lease->io.bucket;
    acg_status st = ACG_OK;
    if (!loop || !state_holds(m, &lease->io, 0, ids, tokens, zero, b->tokens)) {
        m->state_held = false;
        st = acg_stager_upload(m->stager, m->stream, lease->io.inputs[0], 0, ids, tokens,
                               sizeof *ids, &zero, b->tokens);
    }
    if (st == ACG_OK && !loop) {
        st = acg_stager_upload(m->stager, m->stream, lease->io.inputs[1], 0, seats, n,
                               sizeof *seats, &none, b->batch);
    }
    return st;
}

/* Whether the step may run as a loop of decode steps (model.h, "Decoding steps per launch"):
 * loop buckets exist and every row reads one token and samples from it. */
static bool decodes_only(const acg_model *m, acg__request *const *req, const acg_attn_row *rows,
                         uint32_t n) {
    if (m->loop_steps <= 1 || n == 0) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i].q_len != 1 || rows[i].kv_len != req[i]->n_tokens) {
            return false;
        }
    }
    return true;
}

/* Uploads a loop of decode steps' control (acg__model_recipe): each row's seat, budget and
 * stop at </s>, rows n .. batch-1 padding (-1, 0, 0); one copy, as the seats alone would be. */
static acg_status upload_control(acg_model *m, const acg_lease *lease, const int32_t *seats,
                                 acg__request *const *req, uint32_t n) {
    const uint32_t b = lease->io.bucket->batch;
    int32_t *ctl = m->step_ctl;
    for (uint32_t i = 0; i < b; i++) {
        ctl[i] = i < n ? seats[i] : -1;
        ctl[b + i] = i < n ? (int32_t)(req[i]->max_new - req[i]->n_generated) : 0;
        ctl[2 * b + i] = i < n && req[i]->stop_at_eos;
    }
    if (state_holds(m, &lease->io, b, ctl, 3 * (size_t)b, 0, 3 * (size_t)b)) {
        return ACG_OK;
    }
    m->state_held = false;
    return acg_stager_upload(m->stager, m->stream, lease->io.inputs[2], 0, ctl, 3 * (size_t)b,
                             sizeof *ctl, NULL, 3 * (size_t)b);
}

/* What a loop of decode steps rewrote on the device: the slot's plan and the lease's inputs,
 * which the plan and the stager's mirror would otherwise take for what they last uploaded. */
static acg_status forget_loop_inputs(acg_model *m, const acg_lease *lease) {
    acg_status st = acg_attn_plan_invalidate(m->plans[lease->slot]);
    if (st == ACG_OK) {
        st = acg_stager_invalidate(m->stager, lease->io.inputs[0]);
    }
    return st == ACG_OK ? acg_stager_invalidate(m->stager, lease->io.inputs[2]) : st;
}

/* What a rank tells the others in place of its bucket when it has none to run. */
enum { BUCKET_NOTHING_TO_RUN = -1, BUCKET_STEP_FAILED = -2 };

/* Bytes kept of an error's detail while another call may overwrite it. */
#define DETAIL_BYTES 512

/* Split over ranks: every rank must run the same step, or their allreduces would pair with
 * the wrong ones (another bucket's sizes) or wait for ever. One allreduce_min_i32 gives the least
 * and the greatest bucket (or BUCKET_NOTHING_TO_RUN, BUCKET_STEP_FAILED), replay flag and row
 * count over the ranks. A rank whose step failed already (st) still takes part, so the others
 * learn of it at once rather than after ACG_COMM_TIMEOUT_MS, and its own error is the one it
 * returns. */
static acg_status agree_on_step(acg_model *m, acg_status st, const acg_step_report *rep,
                                bool graphed) {
    char why[DETAIL_BYTES] = "";
    int32_t bucket = (int32_t)rep->bucket;
    if (st != ACG_OK) {
        acg__error_copy(why, sizeof why);
        bucket = BUCKET_STEP_FAILED;
        graphed = false;
    } else if (rep->rows == 0) {
        bucket = BUCKET_NOTHING_TO_RUN;
    }
    const int32_t v[3] = {bucket, graphed, (int32_t)rep->rows};
    int32_t lo[3], hi[3];
    acg_status agreed = acg__model_min_max(&m->comm, v, 3, lo, hi);
    if (st != ACG_OK) {
        return acg__error(st, "%s", why);
    }
    if (agreed != ACG_OK) {
        acg__error_copy(why, sizeof why);
        return acg__error(agreed,
                          "acg_model_step: rank %ld: step %llu: agreeing with the other ranks: "
                          "%s",
                          (long)m->comm.rank, (unsigned long long)m->stats.steps, why);
    }
    if (lo[0] != hi[0] || lo[1] != hi[1] || lo[2] != hi[2]) {
        return acg__error(ACG_ERR_COMM,
                          "acg_model_step: rank %ld: step %llu: the ranks disagree: bucket %d .. "
                          "%d, graphed %d .. %d, rows %d .. %d over the ranks (here %d, %d, %u; "
                          "bucket -1: nothing to run, -2: the step failed on that rank); every "
                          "rank must be given the same requests",
                          (long)m->comm.rank, (unsigned long long)m->stats.steps, lo[0], hi[0],
                          lo[1], hi[1], lo[2], hi[2], bucket, graphed, rep->rows);
    }
    return ACG_OK;
}

/* Reads the step's sampled {token, counter} pairs (and logits, when the model keeps them) back,
 * waiting for the stream; after a loop of decode steps, every row's ring and what the loop left
 * in the step's inputs (step_state): the token ids, the control, whose budgets (step_left) say
 * how many tokens each row filed, and the plan's KV lengths. */
static acg_status read_results(acg_model *m, const acg_lease *lease, uint32_t n) {
    const size_t vocab = (size_t)m->config.vocab_size;
    const size_t steps = lease->io.bucket->key_info;
    const size_t b = lease->io.bucket->batch;
    acg_status st =
        steps > 1 ? acg_copy_d2h(m->stream, m->step_ring, lease->io.outputs[ACG__MODEL_OUT_RING(m)],
                                 0, (size_t)n * steps * ACG__SAMPLE_WORDS * sizeof(int32_t))
                  : acg_copy_d2h(m->stream, m->step_result, lease->io.outputs[0], 0,
                                 (size_t)n * ACG__SAMPLE_WORDS * sizeof(int32_t));
    if (st == ACG_OK && steps > 1) {
        acg_attn_plan_views v = ACG_ATTN_PLAN_VIEWS_INIT;
        st = acg_copy_d2h(m->stream, m->step_state, lease->io.inputs[0], 0, b * sizeof(int32_t));
        if (st == ACG_OK) {
            st = acg_copy_d2h(m->stream, m->step_state + b, lease->io.inputs[2], 0,
                              3 * b * sizeof(int32_t));
        }
        if (st == ACG_OK) {
            st = acg_attn_plan_get_views(m->plans[lease->slot], &v);
        }
        if (st == ACG_OK) {
            st = acg_copy_d2h(m->stream, m->step_state + 4 * b, v.kv_lens, 0, n * sizeof(int32_t));
        }
        m->step_left = m->step_state + 2 * b;
    }
    if (st == ACG_OK && m->options.keep_logits) {
        st = acg_copy_d2h(m->stream, m->step_logits, lease->io.outputs[1], 0,
                          (size_t)n * vocab * sizeof(float));
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(m->stream);
    }
    return st;
}

/* After a loop of decode steps was applied: what the loop left in the plan and the inputs (read
 * back into step_state) is what the next launch of the same rows and bucket finds there, so it
 * uploads only what differs (state_holds; the plan, told of its rows: rows' KV lengths become
 * the plan's). A plan that refuses the note keeps what it knew: nothing (forget_loop_inputs).
 * When a row finished, its pages went back to the cache (rows[i].pages with them) and the next
 * launch has other rows: the plan is left to upload them. */
static void note_loop_state(acg_model *m, const acg_step_io *io, acg_attn_row *rows, uint32_t n,
                            uint32_t finished) {
    const size_t b = io->bucket->batch;
    if (finished == 0) {
        for (uint32_t i = 0; i < n; i++) {
            rows[i].kv_len = (uint32_t)m->step_state[4 * b + i];
        }
        (void)acg_attn_plan_note(m->plans[io->slot], rows, n); /* refused: it knows nothing */
    }
    m->state_held = true;
    m->state_bucket = io->bucket_index;
    m->state_slot = io->slot;
}

/* ---- test hook: a sampler that returns a token outside the vocabulary --------------------- */

/* The row (plus one) whose next sampled token reads as vocab_size; 0: none. */
static _Atomic uint32_t fail_sample_row;

void acg__model_fail_sample(uint32_t row) {
    atomic_store(&fail_sample_row, row == UINT32_MAX ? 0 : row + 1);
}

/* ---- retirement: validate every row, then apply them all ----------------------------------- */

/* The {token, counter} pairs row i (request r, seat) filed in a step of `steps` decode steps
 * (1: one step): *count of them at the pointer returned. One step files a pair for a sampling
 * row; a loop as many as the row's budget went down by (read back into step_left), at most
 * steps. Read before the row is applied. */
static int32_t *row_samples(const acg_model *m, const acg__request *r, uint32_t i, int32_t seat,
                            size_t steps, uint32_t *count) {
    if (steps <= 1) {
        *count = seat >= 0;
        return m->step_result + ACG__SAMPLE_WORDS * i;
    }
    int64_t filed = (int64_t)(r->max_new - r->n_generated) - m->step_left[i];
    *count = filed < 0 ? 0 : filed > (int64_t)steps ? (uint32_t)steps : (uint32_t)filed;
    return m->step_ring + ACG__SAMPLE_WORDS * i * steps;
}

/* Once armed, the first step that samples at the row reads its (first) token as vocab_size. */
static void injected_sample_failure(acg_model *m, acg__request *const *req, uint32_t n,
                                    const int32_t *seats, size_t steps) {
    uint32_t armed = atomic_load(&fail_sample_row), count = 0;
    if (armed == 0 || armed > n) {
        return;
    }
    int32_t *pairs = row_samples(m, req[armed - 1], armed - 1, seats[armed - 1], steps, &count);
    if (count != 0) {
        atomic_store(&fail_sample_row, 0);
        pairs[0] = m->config.vocab_size;
    }
}

/* Whether each token every row filed lies in the vocabulary. Checked for every row before any
 * row is applied, so a refused step leaves every request as it was. */
static acg_status check_samples(const acg_model *m, acg__request *const *req, uint32_t n,
                                const int32_t *seats, size_t steps) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t count = 0;
        const int32_t *pairs = row_samples(m, req[i], i, seats[i], steps, &count);
        for (uint32_t j = 0; j < count; j++) {
            int32_t token = pairs[ACG__SAMPLE_WORDS * j];
            if (token < 0 || token >= m->config.vocab_size) {
                char at[48] = "";
                if (steps > 1) {
                    snprintf(at, sizeof at, " at step %u of the launch", j);
                }
                return acg__error(ACG_ERR_INTERNAL,
                                  "acg_model_step: row %u sampled token %d%s, outside 0..%d", i,
                                  token, at, m->config.vocab_size - 1);
            }
        }
    }
    return ACG_OK;
}

/* Applies a step that ran: each row's chunk is in the KV cache now (and in a loop, the inputs
 * of its later steps), each token a row filed joins its request (with its draw counter; the
 * logits, those of its latest), and finished requests retire. */
static void retire_rows(acg_model *m, acg__request *const *req, const acg_attn_row *rows,
                        const int32_t *seats, uint32_t n, size_t steps, acg_step_report *rep) {
    const size_t vocab = (size_t)m->config.vocab_size;
    rep->steps = steps > 1 ? 0 : 1;
    for (uint32_t i = 0; i < n; i++) {
        acg__request *r = req[i];
        uint32_t count = 0;
        const int32_t *pairs = row_samples(m, r, i, seats[i], steps, &count);
        if (r->kv_len < r->prompt_len) {
            m->stats.prompt_tokens += rows[i].q_len;
        }
        r->kv_len = rows[i].kv_len + (count > 1 ? count - 1 : 0);
        if (count > rep->steps) {
            rep->steps = count;
        }
        for (uint32_t j = 0; j < count; j++) {
            int32_t token = pairs[ACG__SAMPLE_WORDS * j];
            int32_t counter = pairs[ACG__SAMPLE_WORDS * j + 1];
            r->tokens[r->n_tokens++] = token;
            r->draw_counters[r->n_generated++] = counter < 0 ? UINT32_MAX : (uint32_t)counter;
            rep->generated++;
        }
        if (count != 0 && r->logits != NULL) {
            memcpy(r->logits, m->step_logits + i * vocab, vocab * sizeof *r->logits);
        }
        const int32_t last = count != 0 ? pairs[ACG__SAMPLE_WORDS * (count - 1)] : -1;
        if (count != 0 &&
            (r->n_generated == r->max_new || (r->stop_at_eos && last == ACG_TOKEN_EOS))) {
            retire(m, r);
            rep->finished++;
        }
    }
}

/* ---- one step ------------------------------------------------------------------------------ */

acg_status acg_model_step(acg_model *m, acg_step_report *report) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_step";
    ACG__TRY(check_model(m, fn));
    /* A report that cannot be written is refused before the step changes anything. */
    if (report != NULL) {
        ACG__TRY(acg__output_check(report, sizeof *report, "acg_step_report", fn));
    }
    acg_status st = ACG_OK;
    acg_step_report rep = ACG_STEP_REPORT_INIT;
    acg__step_clock clock = {.traced = acg__trace_on(ACG_TRACE_MODEL), .step = m->stats.steps};
    acg__request **req = m->step_req;
    acg_attn_row *rows = m->step_rows;
    int32_t *seats = m->step_seats;
    acg_lease lease;
    memset(&lease, 0, sizeof lease);

    /* Admit what fits, batch every running request, lease a slot of the tightest bucket. */
    acg__model_step_enter(&clock, PHASE_ADMIT, &rep, st);
    st = admit(m, &rep.admitted);
    if (st == ACG_OK) {
        st = plan_rows(m, req, rows, &rep.rows, &rep.tokens);
    }
    /* A step whose rows all decode may run many decode steps in one launch. */
    const uint64_t loop = decodes_only(m, req, rows, rep.rows) ? m->loop_steps : 0;
    if (st == ACG_OK && rep.rows > 0) {
        st = acg_runner_select(m->runner, "step", loop, rep.rows, rep.tokens, &rep.bucket);
    }
    if (st == ACG_OK && rep.rows > 0) {
        st = acg_runner_lease(m->runner, rep.bucket, &lease);
    }
    if (m->group != NULL) {
        st = agree_on_step(m, st, &rep, lease.graphed);
    }
    if (st != ACG_OK || rep.rows == 0) {
        if (lease.ticket != 0) {
            acg_runner_release(m->runner, &lease);
        }
        goto out;
    }
    rep.graphed = lease.graphed;
    clock.bucket = lease.io.bucket;
    if (lease.io.bucket_index != m->state_bucket || lease.slot != m->state_slot) {
        m->state_held = false; /* this step writes the slot's inputs through other views */
    }

    /* Plan, upload and launch. One stream runs everything, so the slot's previous step is
     * ordered before this one. */
    acg__model_step_enter(&clock, PHASE_PLAN, &rep, st);
    st = acg_attn_plan_build(m->plans[lease.slot], m->stager, m->stream, rows, rep.rows);
    acg__model_step_enter(&clock, PHASE_UPLOAD, &rep, st);
    if (st == ACG_OK) {
        st = upload_inputs(m, &lease, req, rows, rep.rows, rep.tokens, m->step_ids, seats,
                           loop != 0);
    }
    if (st == ACG_OK && loop != 0) {
        st = upload_control(m, &lease, seats, req, rep.rows);
    }
    acg__model_step_enter(&clock, PHASE_LAUNCH, &rep, st);
    m->state_held = false; /* whatever runs now writes the slot's inputs */
    if (st == ACG_OK) {
        st = acg_runner_run(m->runner, &lease, m->stream);
    }
    if (st == ACG_OK && loop != 0) {
        /* The loop advances the plan's KV lengths, the tokens, seats and budgets in place: the
         * next uploads of them must copy, whatever they held before. */
        st = forget_loop_inputs(m, &lease);
    }

    /* Wait for the sampled tokens. */
    acg__model_step_enter(&clock, PHASE_WAIT, &rep, st);
    if (st == ACG_OK) {
        st = read_results(m, &lease, rep.rows);
    }
    if (st == ACG_OK) {
        injected_sample_failure(m, req, rep.rows, seats, loop);
    }
    const acg_step_io io = lease.io; /* the runner's: it outlives the lease */
    acg_runner_release(m->runner, &lease);
    if (st != ACG_OK) {
        goto out;
    }

    /* Retire: every row is checked before any is applied. */
    acg__model_step_enter(&clock, PHASE_RETIRE, &rep, st);
    st = check_samples(m, req, rep.rows, seats, loop);
    if (st == ACG_OK) {
        retire_rows(m, req, rows, seats, rep.rows, loop, &rep);
    }
    if (st == ACG_OK && loop != 0) {
        note_loop_state(m, &io, rows, rep.rows, rep.finished);
    }
out:
    acg__model_step_enter(&clock, STEP_END, &rep, st);
    if (st == ACG_OK && rep.rows > 0) {
        acg__model_count_step(m, &rep, clock.at);
    }
    if (st == ACG_OK && report != NULL) {
        st = acg__output_write(report, &rep, sizeof rep, "acg_step_report", fn);
    }
    return st;
}

acg_status acg_model_run_all(acg_model *m) {
    ACG__CALL_SCOPE;
    acg_status st = check_model(m, "acg_model_run_all");
    while (st == ACG_OK) {
        acg_step_report rep = ACG_STEP_REPORT_INIT;
        st = acg_model_step(m, &rep);
        if (st == ACG_OK && rep.rows == 0) {
            break;
        }
    }
    return st;
}

/* ---- requests ------------------------------------------------------------------------------ */

acg_status acg_model_get_request(const acg_model *m, uint64_t id, acg_request_status *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_get_request";
    ACG__TRY(check_model(m, fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    const acg__request *r = find(m, id);
    if (r == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "%s: no request %llu", fn, (unsigned long long)id);
    }
    acg_request_status status = ACG_REQUEST_STATUS_INIT;
    status.state = r->state;
    status.tokens = r->tokens;
    status.n_tokens = r->n_tokens;
    status.n_generated = r->n_generated;
    status.draw_counters = r->draw_counters;
    status.logits = r->n_generated > 0 ? r->logits : NULL;
    return acg__output_write(out, &status, sizeof status, "acg_request_status", fn);
}

acg_status acg_model_release_request(acg_model *m, uint64_t id) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_release_request";
    ACG__TRY(check_model(m, fn));
    for (acg__request **p = &m->requests; *p != NULL; p = &(*p)->next) {
        if ((*p)->id == id) {
            acg__request *r = *p;
            retire(m, r);
            *p = r->next;
            free_request(r);
            return ACG_OK;
        }
    }
    return acg__error(ACG_ERR_NOT_FOUND, "%s: no request %llu", fn, (unsigned long long)id);
}
