/*
 * model-impl.h — what the files of the reference model share: the loaders' parsers (weights,
 * tokenizer, presets), and the model on a device (model.c, forward.c, generate.c).
 *
 * The parsers take bytes already in memory, so the file loaders (which map the file) and the
 * fuzz harnesses (which hand them arbitrary bytes) run the same validation.
 */
#ifndef ACG_MODEL_IMPL_H
#define ACG_MODEL_IMPL_H

#include <acg/model.h>

#include <pthread.h>

#include "acg-layer.h"

/* The model's handle types in the core's registry (acg-impl.h gives each layer a range). */
enum {
    ACG__HANDLE_WEIGHTS = ACG__HANDLE_LAYER_FIRST + 16,
    ACG__HANDLE_TOKENIZER,
    ACG__HANDLE_MODEL,
};

/* Bytes of a checkpoint's header: 7 int32. */
#define ACG__CHECKPOINT_HEADER_BYTES 28

/* Validates a llama2.c checkpoint of size bytes at data and points *tensors into it; touches
 * no tensor data and allocates nothing. data must be 4-byte aligned. Errors are those of
 * acg_model_weights_load, reported as "fn: 'name': ...". */
acg_status acg__model_weights_parse(const void *data, size_t size, const char *fn, const char *name,
                                    acg_model_config *config, acg_model_tensors *tensors);

/* Wraps image (a checkpoint of size bytes from acg__alloc_aligned, already generated) in a
 * weights object that owns it. On failure the caller still owns image. */
acg_status acg__model_weights_adopt(void *image, size_t size, const char *fn, const char *name,
                                    acg_model_weights **out);

/* Validates a configuration as a checkpoint header would be validated, and gives the bytes of
 * its checkpoint. */
acg_status acg__model_config_check(const acg_model_config *config, const char *fn, const char *name,
                                   uint64_t *file_bytes);

/* Parses a llama2.c tokenizer of vocab_size entries from size bytes at data into a new
 * tokenizer. Errors are those of acg_tokenizer_load, reported as "fn: 'name': ...". */
acg_status acg__tokenizer_parse(const void *data, size_t size, int32_t vocab_size, const char *fn,
                                const char *name, acg_tokenizer **out);

/* Maps path read-only: ACG_ERR_NOT_FOUND for a missing file, ACG_ERR_INVALID_ARGUMENT for
 * one that cannot be opened or mapped or is not a regular file (a FIFO or a device is refused
 * at once: the open does not block). An empty file gives *data NULL and *size 0 (nothing to
 * unmap). Every file loader goes through it. */
acg_status acg__file_map(const char *path, const char *fn, const void **data, size_t *size);
void acg__file_unmap(const void *data, size_t size);

/* Writes size bytes at data to path, created or truncated. */
acg_status acg__file_write(const char *path, const char *fn, const void *data, size_t size);
/* The checks of every save of obj to path, before it writes anything: ACG_ERR_INVALID_HANDLE,
 * "<fn>: <obj> is not a live <what>", unless live (what: "tokenizer"); ACG_ERR_INVALID_ARGUMENT
 * when path is NULL. */
acg_status acg__save_check(bool live, const void *obj, const char *what, const char *path,
                           const char *fn);

/* ---- serving (model.c, forward.c, generate.c) ----------------------------------------------- */

/* The cpu backend's own code for the model's kernels (kernels_cpu.c); kernels.c registers it in
 * place of the one source's C (ops.acg.c). */
/* The model layer's ACG_* variables (simd_scalar.c). */
extern const acg__env_table acg__model_env;

void acg__model_cpu_swiglu_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_rmsnorm_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_matmul_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_rope_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_kv_store_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_attention_f32(const acg_cpu_arg *a, const uint32_t global[3]);
void acg__model_cpu_sample_f32(const acg_cpu_arg *a, const uint32_t global[3]);
/* The kernels split over the cpu backend's threads: how many parts a launch is worth, and one
 * part (acg_kernel_desc.cpu_parts). */
#define ACG__MODEL_SPLIT(name)                                                                     \
    uint32_t acg__model_cpu_##name##_parts(const acg_cpu_arg *a, const uint32_t global[3],         \
                                           uint32_t max_parts);                                    \
    void acg__model_cpu_##name##_part(const acg_cpu_arg *a, const uint32_t global[3],              \
                                      uint32_t part, uint32_t n_parts);
ACG__MODEL_SPLIT(swiglu_f32)
ACG__MODEL_SPLIT(matmul_f32)
ACG__MODEL_SPLIT(attention_f32)
ACG__MODEL_SPLIT(sample_f32)
#undef ACG__MODEL_SPLIT

/* The shape rules of the model's kernels (kernels.c), which their one source names
 * (ACG_SHAPE in ops.acg.c): each buffer's reach from the scalar arguments, and whether the
 * grid covers the work. */
const char *acg__model_embed_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_rmsnorm_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_matmul_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_rope_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_kv_store_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_attention_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_gather_last_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_sample_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);
const char *acg__model_decode_advance_shape(const acg_arg *a, const acg_dims *d, uint64_t *x);

/* The kernels the forward launches. */
typedef struct acg__model_kernels {
    acg_kernel *embed, *rmsnorm, *matmul, *rope, *kv_store, *attention, *axpy, *swiglu,
        *gather_last, *sample, *decode_advance;
} acg__model_kernels;

/* The weights on the device: one buffer per tensor, every layer of it; of the split tensors
 * this rank's shard (the whole tensor with one rank; NULL for a rank without KV heads, as acg
 * refuses empty buffers). q_dim, kv_dim and hidden are the model's. */
typedef struct acg__model_device_weights {
    acg_buffer *token_embedding;     /* (vocab_size, dim) */
    acg_buffer *rms_att;             /* (n_layers, dim) */
    acg_buffer *wq, *wk, *wv;        /* (n_layers, q_dim | kv_dim, dim) rows of this rank's heads */
    acg_buffer *wo;                  /* (n_layers, dim, q_dim) the matching columns */
    acg_buffer *rms_ffn;             /* (n_layers, dim) */
    acg_buffer *w1, *w3;             /* (n_layers, hidden, dim) rows of this rank's units */
    acg_buffer *w2;                  /* (n_layers, dim, hidden) the matching columns */
    acg_buffer *rms_final;           /* (dim) */
    acg_buffer *classifier;          /* (vocab_n, dim) this rank's rows; token_embedding when
                                        shared (its rows from vocab_lo), NULL when vocab_n is 0 */
    acg_buffer *rope_cos, *rope_sin; /* (seq_len, head_size / 2) */
} acg__model_device_weights;

typedef struct acg__request acg__request;

struct acg_model {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    acg_model_config config;
    acg_model_options options; /* options.comm points at comm below, or is NULL */
    uint32_t head_size;
    /* This rank's share of the model (model.h, "Tensor parallelism"); the whole of it with one
     * rank. Heads [kv_head_lo, + n_kv_heads) of KV and their query heads, hidden units
     * [hidden_lo, + hidden). */
    uint32_t n_heads, n_kv_heads; /* query and KV heads; 0 and 0 on a rank without KV heads */
    uint32_t q_dim, kv_dim;       /* n_heads * head_size, n_kv_heads * head_size */
    uint32_t hidden;              /* feed-forward units, at least 1 */
    uint32_t kv_head_lo, hidden_lo;
    uint32_t vocab_lo, vocab_n; /* the classifier's rows this rank scores; vocab_n may be 0 */
    acg_comm comm;              /* the caller's process group, read at its size (when given) */
    acg_device_group *group; /* n_ranks > 1: every rank's device, for the allreduces; else NULL */
    acg_stream *stream;
    acg__model_kernels k;
    acg__model_device_weights w;
    acg_kv_cache *kv;
    acg_buffer *k_cache, *v_cache; /* (n_layers, kv_pages, page_size, kv_dim), the cache's */
    acg_stager *stager;
    acg_attn_plan *plans[2]; /* one per slot, sized for the largest bucket */
    acg_buffer *states;      /* (max_batch, ACG_SAMPLER_STATE_WORDS) sampler states, by seat */
    acg_runner *runner;
    int32_t *step_result; /* pinned (max_batch, 2): a step's sampled tokens */
    float *step_logits;   /* pinned (max_batch, vocab) a step's logits, with keep_logits */
    /* generation (generate.c) */
    acg__request *requests; /* every request not released, in submission order */
    acg__request **seats;   /* (max_batch) the running request of each seat, or NULL */
    /* a step's host arrays, kept between steps so a step allocates nothing */
    acg__request **step_req; /* (max_batch) the request of each row */
    acg_attn_row *step_rows; /* (max_batch) */
    int32_t *step_ids;       /* (max_step_tokens) the step's token ids */
    int32_t *step_seats;     /* (max_batch) each row's seat, -1: nothing to sample */
    /* decoding steps per launch (forward.c, generate.c): loop_steps > 1 adds a loop bucket per
     * decode bucket; steps_per_launch where the device has loops in graphs, else 1 */
    uint32_t loop_steps;
    int32_t *step_ring; /* pinned (max_batch, loop_steps, 2): a loop launch's tokens, counters */
    int32_t *step_ctl;  /* (3, max_batch) a loop's control input: seats, budgets, stops */
    /* pinned (5, max_batch): after a loop launch of bucket batch b, what it left in its inputs,
     * read back: the token ids (b), the control (3, b) and the plan's KV lengths (rows) */
    int32_t *step_state;
    const int32_t *step_left; /* into step_state: each row's budget after the latest loop */
    bool state_held;          /* step_state is what the device holds (generate.c, state_holds) */
    uint32_t state_bucket, state_slot; /* the bucket and slot whose inputs it read */
    uint64_t next_id;
    acg_model_stats stats;
};

/* Words of a row's sample: its {token, draw counter} (the counter -1 where no draw was made). */
#define ACG__SAMPLE_WORDS 2

/* The whole-step recipe the runner captures (forward.c): inputs are the step's token ids
 * (bucket tokens) and each row's sampler seat (bucket batch, -1: no sample); output 0 is the
 * sampled {token, counter} pairs (bucket batch, 2). The logits stay in graph scratch unless the
 * model keeps them: then they are output 1 (bucket batch, vocab), which the sampler reads.
 * With loop_steps > 1, input 2 is a loop's control (3, bucket batch): each row's seat (which a
 * loop bucket samples with in place of input 1), token budget and whether </s> stops it; and
 * the last output (ACG__MODEL_OUT_RING) each row's ring of {token, counter} pairs (bucket
 * batch, key_info, 2: key_info is the bucket's steps per launch, 0 for one step). */
void acg__model_recipe(acg_model *m, acg_recipe *out);
#define ACG__MODEL_OUT_RING(m) ((m)->options.keep_logits ? 2u : 1u)

/* ---- a step's clock and trace (step_clock.c) ------------------------------------------------ */

/* A step's phases in order, as acg_step_report and the trace name them, between its start and
 * its end. */
typedef enum acg__step_phase {
    STEP_START,
    PHASE_ADMIT,
    PHASE_PLAN,
    PHASE_UPLOAD,
    PHASE_LAUNCH,
    PHASE_WAIT,
    PHASE_RETIRE,
    STEP_END,
} acg__step_phase;

/* When each phase began (at[STEP_END]: when the step ended) and which one is open; whether the
 * step is traced is decided once, at its start, so its spans pair up. */
typedef struct acg__step_clock {
    bool traced;
    uint64_t step;                /* its number: the model's count of steps before it */
    const acg_bucket_key *bucket; /* the leased bucket's key (the runner's), else NULL */
    acg__step_phase open;
    uint64_t at[STEP_END + 1];
} acg__step_clock;

/* Moves the step into `next` now, and is all of its trace (generate.c calls it at each phase). */
void acg__model_step_enter(acg__step_clock *c, acg__step_phase next, const acg_step_report *rep,
                           acg_status st);
/* Counts a step that ran into the model's stats, with its phases' times into its report. */
void acg__model_count_step(acg_model *m, acg_step_report *rep, const uint64_t *at);

/* Frees every request (generate.c). */
void acg__model_free_requests(acg_model *m);

/* The least and the greatest of each of the n values (at most 32) over the ranks of comm, with
 * one allreduce_min_i32 (model.c). */
acg_status acg__model_min_max(const acg_comm *comm, const int32_t *values, size_t n, int32_t *lo,
                              int32_t *hi);

/* Test hook (tests/test_model_tp.c): while armed, the forward of a bucket of this batch and
 * tokens invalidates its own capture (a host synchronization inside it, as a recipe's bug
 * would), in this process only, so one rank fails to capture a bucket the others capture.
 * batch 0 disarms it. Eager runs are unaffected. */
void acg__model_fail_capture(uint32_t batch, uint32_t tokens);

/* Test hook (tests/test_model.c): the first step after the call that samples at batch row `row`
 * reads that row's token as vocab_size, outside the vocabulary, as a broken sampler would give
 * it, in this process only; UINT32_MAX disarms it. */
void acg__model_fail_sample(uint32_t row);

#endif /* ACG_MODEL_IMPL_H */
