/*
 * model.h — the reference model: a Llama-style decoder whose weights come from a llama2.c
 * checkpoint (model.bin) or from a built-in preset with seeded random weights, and its
 * tokenizer (llama2.c's tokenizer.bin, or one generated for a preset's vocabulary).
 *
 * The first half loads: configurations, weights, presets and the tokenizer, touching no device.
 * The second half serves: a model on a device (weights uploaded, a paged KV cache, a bucketed
 * capture runner) that generates for many requests at once with continuous batching.
 *
 * Conventions are those of acg.h: statuses, acg_last_error(), free(NULL) is a no-op,
 * out-parameters last and untouched on an error. A malformed file is ACG_ERR_INVALID_ARGUMENT
 * whose message names the file, the field, the value found and the value expected.
 * The weights and tokenizer objects are checked like every acg handle: a NULL, freed or foreign
 * pointer is refused with ACG_ERR_INVALID_HANDLE. They allocate through acg_set_allocator's
 * hook, which refuses to change while they live.
 * Once created, both objects are read-only: any thread may use one concurrently. Freeing one
 * (and destroying a model) waits for other threads' calls on it to return, as in acg.h; a
 * model's device buffers belong to it (acg_buffer_free refuses them).
 */
#ifndef ACG_MODEL_H
#define ACG_MODEL_H

#include <acg/acg.h>
#include <acg/engine.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------------------------- */

/* Limits a checkpoint must respect (real models are far below them); each bounds one header
 * field, so the size arithmetic cannot overflow and a file that is not a checkpoint is caught
 * by its first field. */
#define ACG_MODEL_MAX_DIM 65536
#define ACG_MODEL_MAX_HIDDEN_DIM 1048576
#define ACG_MODEL_MAX_LAYERS 1024
#define ACG_MODEL_MAX_VOCAB 4194304
#define ACG_MODEL_MAX_SEQ_LEN 1048576
/* Most bytes a checkpoint may describe (1 TiB). */
#define ACG_MODEL_MAX_BYTES ((uint64_t)1 << 40)

/* Passed in (acg_model_weights_create_random), only shared_classifier has a default: the least
 * size is offsetof(acg_model_config, shared_classifier). Filled (acg_model_preset_get_config),
 * it is an output: set size first, as ACG_MODEL_CONFIG_INIT does. */
typedef struct acg_model_config {
    size_t size;            /* sizeof(acg_model_config) */
    int32_t dim;            /* model width; a multiple of n_heads */
    int32_t hidden_dim;     /* feed-forward width */
    int32_t n_layers;       /* decoder layers */
    int32_t n_heads;        /* query heads; dim / n_heads (head_size) is even */
    int32_t n_kv_heads;     /* key/value heads; divides n_heads */
    int32_t vocab_size;     /* tokens, at least 3 (<unk>, <s>, </s>) */
    int32_t seq_len;        /* longest sequence */
    bool shared_classifier; /* the classifier is the token embedding table */
} acg_model_config;

#define ACG_MODEL_CONFIG_INIT                                                                      \
    { sizeof(acg_model_config), 0, 0, 0, 0, 0, 0, 0, true }

/* The configuration of a built-in preset:
 *   "tiny":  dim 64, hidden 172, 2 layers, 4 heads, 2 KV heads, vocab 512, seq 256;
 *   "small": dim 288, hidden 768, 6 layers, 6 heads, 6 KV heads, vocab 32000, seq 256
 *            (llama2.c's stories15M shape).
 * Both have a separate classifier: with random weights a tied one would make greedy decoding
 * repeat the current token forever.
 * ACG_ERR_NOT_FOUND for another name (the message lists the presets); ACG_ERR_INVALID_ARGUMENT
 * for a NULL name or out, or an out->size that was not set. */
ACG_API acg_status acg_model_preset_get_config(const char *name, acg_model_config *out);

/* ---------------------------------------------------------------------------------------------
 * Weights
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_model_weights acg_model_weights;

/* Pointers to every tensor, row-major, fp32, owned by the weights object (inside the file's
 * read-only mapping for a loaded checkpoint). head_size = dim / n_heads,
 * kv_dim = n_kv_heads * head_size. A matrix (rows, cols) maps cols inputs to rows outputs. */
typedef struct acg_model_tensors {
    const float *token_embedding; /* (vocab_size, dim) */
    const float *rms_att;         /* (n_layers, dim) */
    const float *wq;              /* (n_layers, dim, dim) */
    const float *wk;              /* (n_layers, kv_dim, dim) */
    const float *wv;              /* (n_layers, kv_dim, dim) */
    const float *wo;              /* (n_layers, dim, dim) */
    const float *rms_ffn;         /* (n_layers, dim) */
    const float *w1;              /* (n_layers, hidden_dim, dim) */
    const float *w2;              /* (n_layers, dim, hidden_dim) */
    const float *w3;              /* (n_layers, hidden_dim, dim) */
    const float *rms_final;       /* (dim) */
    const float *classifier;      /* (vocab_size, dim); token_embedding when shared */
} acg_model_tensors;

/* Loads a llama2.c checkpoint: a header of 7 int32 (dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size (negative when a separate classifier follows) and seq_len), then
 * every tensor of acg_model_tensors in that order, with two legacy RoPE tables of
 * seq_len * head_size / 2 floats each (skipped) before the classifier. The file is mapped
 * read-only and the tensors point into the mapping (so the file must not be truncated while the
 * weights live); its size must be exactly what the header describes. Every field is checked against
 * its limit before any size is computed, and every size with overflow-checked 64-bit arithmetic,
 * before a tensor is touched. ACG_ERR_INVALID_ARGUMENT for a NULL path or out, a file that is not a
 * regular file (a FIFO or a device is refused at once, without waiting for a writer) or cannot be
 * read, and a malformed checkpoint: a field out of range (dim,
 * hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len up to the ACG_MODEL_MAX_* limits),
 * dim not a multiple of n_heads, n_kv_heads not dividing n_heads, an odd head_size, a total above
 * ACG_MODEL_MAX_BYTES, a truncated file (naming the tensor it ends in and the size expected) or
 * trailing bytes (naming the size expected); the message names the file and the field.
 * ACG_ERR_NOT_FOUND when the file does not exist; ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_model_weights_load(const char *path, acg_model_weights **out);

/* Builds a preset ("tiny" or "small", see acg_model_preset_get_config) in memory, with
 * deterministic weights drawn from seed: acg_model_weights_create_random with its
 * configuration. ACG_ERR_NOT_FOUND for an unknown name; ACG_ERR_INVALID_ARGUMENT for a NULL
 * name or out; ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_model_preset_load(const char *name, uint64_t seed, acg_model_weights **out);

/* Builds weights of any valid configuration in memory, drawn from seed (splitmix64): the token
 * embedding and classifier uniform in [-1, 1), every other matrix (rows, cols) uniform in
 * [-s, s) with s the largest power of two not above 1/sqrt(cols), RMS norm weights 1.0, the
 * legacy RoPE tables zero. The same configuration and seed give the same bytes on every
 * machine.
 * ACG_ERR_INVALID_ARGUMENT for a NULL config or out, a config size that acg.h's rule for
 * growing structs refuses, or a configuration a checkpoint could not hold (the checks of
 * acg_model_weights_load); ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_model_weights_create_random(const acg_model_config *config, uint64_t seed,
                                                   acg_model_weights **out);

/* Writes the weights to path as a llama2.c checkpoint (created or truncated): loading it gives
 * the same configuration and the same bytes. Synchronous. ACG_ERR_INVALID_HANDLE for a NULL or
 * foreign w; ACG_ERR_INVALID_ARGUMENT for a NULL path or a file that cannot be created or
 * written (the message gives the system's reason); ACG_ERR_NOT_FOUND when the directory does
 * not exist; ACG_ERR_EXHAUSTED when the disk or quota is full. A failed write may leave a
 * partial file. */
ACG_API acg_status acg_model_weights_save(const acg_model_weights *w, const char *path);

/* Unmaps or frees the weights; the tensor pointers die with them. NULL is a no-op (ACG_OK);
 * ACG_ERR_INVALID_HANDLE for a foreign pointer. */
ACG_API acg_status acg_model_weights_free(acg_model_weights *w);

/* The configuration and the tensors, owned by w; NULL for a NULL or foreign w. */
ACG_API const acg_model_config *acg_model_weights_get_config(const acg_model_weights *w);
ACG_API const acg_model_tensors *acg_model_weights_get_tensors(const acg_model_weights *w);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_tokenizer acg_tokenizer;

/* Token ids every vocabulary shares; bytes without a token of their own become the byte token
 * ACG_TOKEN_BYTE0 + byte ("<0x00>".."<0xFF>"), or <unk> in a vocabulary too small for them. */
#define ACG_TOKEN_UNK 0
#define ACG_TOKEN_BOS 1
#define ACG_TOKEN_EOS 2
#define ACG_TOKEN_BYTE0 3
/* Longest piece a tokenizer file may declare. */
#define ACG_TOKENIZER_MAX_TOKEN_LENGTH 4096

/* Loads a llama2.c tokenizer: an int32 max_token_length, then vocab_size entries of a float32
 * score, an int32 length and that many bytes. The file does not record vocab_size: it is the
 * model's, and the file must hold exactly that many entries. The file is mapped read-only while
 * it is read; the tokenizer keeps its own copy. ACG_ERR_INVALID_ARGUMENT for a NULL path or
 * out, vocab_size outside 3..ACG_MODEL_MAX_VOCAB, a file that is not a regular file (a FIFO or
 * a device is refused at once, without waiting for a writer) or cannot be read, and a malformed
 * file: max_token_length outside 1..ACG_TOKENIZER_MAX_TOKEN_LENGTH, a
 * length that is negative or above max_token_length, a non-finite score, a file that ends
 * inside an entry or holds fewer entries than vocab_size (truncated), or more ("vocabulary
 * size differs from the model's"); the message names the file, the token and the field.
 * ACG_ERR_NOT_FOUND when the file does not exist; ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_tokenizer_load(const char *path, int32_t vocab_size, acg_tokenizer **out);

/* Generates the tokenizer of a preset's vocabulary, a function of vocab_size alone: ids 0..2
 * are <unk>, "\n<s>\n", "\n</s>\n"; 3..258 the byte tokens; then the printable ASCII
 * characters but '<', prefixes of common English words (with and without a leading space), and
 * pieces made by joining two earlier pieces, deterministically, up to 16 bytes, every piece unique.
 * Each piece after the bytes scores -(its rank), so a piece always scores below the pieces it
 * is made of and encoding merges like BPE. ACG_ERR_INVALID_ARGUMENT for a NULL out or
 * vocab_size outside 259..ACG_MODEL_MAX_VOCAB; ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_tokenizer_preset(int32_t vocab_size, acg_tokenizer **out);

/* Writes the tokenizer to path in llama2.c's format. Synchronous. Statuses as
 * acg_model_weights_save (ACG_ERR_INVALID_HANDLE for a NULL or foreign t). */
ACG_API acg_status acg_tokenizer_save(const acg_tokenizer *t, const char *path);

/* Frees the tokenizer; the strings acg_tokenizer_decode returned die with it. NULL is a no-op
 * (ACG_OK); ACG_ERR_INVALID_HANDLE for a foreign pointer. */
ACG_API acg_status acg_tokenizer_free(acg_tokenizer *t);

/* The number of tokens; 0 for a NULL or foreign t. */
ACG_API int32_t acg_tokenizer_get_vocab_size(const acg_tokenizer *t);

/* Encodes the NUL-terminated text (any bytes) into ids[0..*n): ACG_TOKEN_BOS first when bos,
 * then, for non-empty text, the token of " " (llama2.c's dummy prefix), then one token per
 * UTF-8 character (or one byte token per byte of a character the vocabulary lacks); then,
 * while two adjacent tokens join into a token of the vocabulary, the pair whose join scores
 * highest (the leftmost on a tie) is merged; ACG_TOKEN_EOS last when eos. strlen(text) + 3
 * ids always suffice. Time O(n log n) in the text's length; thread-safe; allocates work arrays
 * per call.
 * ACG_ERR_INVALID_HANDLE for a NULL or foreign t; ACG_ERR_INVALID_ARGUMENT for a NULL text or
 * n, or a NULL ids with cap > 0; ACG_ERR_EXHAUSTED when more than cap ids result (the message
 * says how many), refused before any work when even a lower bound exceeds cap (no piece is
 * longer than the longest of the vocabulary: the message says "at least" how many);
 * ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_tokenizer_encode(const acg_tokenizer *t, const char *text, bool bos,
                                        bool eos, int32_t *ids, size_t cap, size_t *n);

/* The text of token after prev_token: the piece, with a byte token ("<0x41>") turned into its
 * byte, and the leading space removed right after ACG_TOKEN_BOS. The string belongs to t and
 * lives as long as it; a piece holding a NUL byte reads as shorter. Thread-safe. NULL, with
 * acg_last_error() set, for a NULL or foreign t (ACG_ERR_INVALID_HANDLE) or a token outside
 * 0..vocab_size-1 (ACG_ERR_OUT_OF_RANGE). */
ACG_API const char *acg_tokenizer_decode(const acg_tokenizer *t, int32_t prev_token, int32_t token);

/* Token id of exactly this piece (length bytes at piece), or -1 when the vocabulary lacks it
 * or t is NULL or foreign. Thread-safe. */
ACG_API int32_t acg_tokenizer_find(const acg_tokenizer *t, const char *piece, size_t length);

/* ---------------------------------------------------------------------------------------------
 * Kernels: the model's own, registered with acg_kernel_register (acg.h)
 *
 * Buffers are row-major f32 unless marked i32 or u32; their reach follows from the u32
 * arguments; no two may overlap, except rmsnorm's out and x, which may be the same window, and
 * any two of swiglu's (elementwise: it works in place); and the grid must cover the counts given
 * (work items past them do nothing, so a grid may be rounded up to a work-group multiple). Every
 * output element is computed by one work item in a fixed order that depends only on its own
 * row: a row's result is the same bit for bit whatever the batch around it. Paged kernels read
 * the step from an attention plan (block_table, query_offsets, kv_lens, see engine.h): token t
 * of the step belongs to the row r with query_offsets[r] <= t < query_offsets[r+1] and sits at
 * position kv_lens[r] - q_len[r] + (t - query_offsets[r]); a token of no row is padding. Data
 * read from buffers (token ids, page ids, offsets, seats) is never trusted: an id out of range
 * reads as zeros or skips the work, so no launch reaches past its windows. All ten are
 * ACG_KERNEL_EXACT_EVERY_BACKEND: they follow one arithmetic (docs/arithmetic.md), acg's exp and
 * correctly rounded division and sqrt included. src/model/ops.acg.c, written once for every
 * backend, is their readable definition (docs/model.md explains them):
 *   "swiglu_f32"      (y, a, b), grid (n): y[i] = (a[i] * (1 / (1 + exp(-a[i])))) * b[i]
 *   "embed_f32"       (out (n, dim), table (vocab, dim), tokens i32 (n); u32 dim, vocab, n),
 *                     grid (dim, n): row of each token; zeros for an id outside the table
 *   "rmsnorm_f32"     (out (n, dim), x (n, dim), w (dim); u32 dim, n; f32 eps), grid (n)
 *   "matmul_f32"      (out (n, n_out), x (n, n_in), w (n_out, n_in); u32 n_in, n_out, n),
 *                     grid (n_out, n): out = x w^T
 *   "rope_f32"        (x (n, width), cos, sin (max_pos, head_size / 2), query_offsets i32
 *                     (batch + 1), kv_lens i32 (batch); u32 width, head_size, n, batch,
 *                     max_pos), grid (width / 2, n): rotates each pair of each head in place
 *                     by its token's position (padding and positions >= max_pos untouched)
 *   "kv_store_f32"    (k_cache, v_cache (n_pages, page_size, kv_dim), k, v (n, kv_dim),
 *                     block_table i32 (batch, table_width), query_offsets, kv_lens; u32 kv_dim,
 *                     n, batch, table_width, page_size, n_pages), grid (kv_dim, n): writes
 *                     each token's K and V at its position's page; never the sink page 0
 *   "attention_f32"   (out (n, n_heads * head_size), att (n, n_heads, table_width *
 *                     page_size) scratch, q (n, n_heads * head_size), k_cache, v_cache
 *                     (n_pages, page_size, n_kv_heads * head_size), block_table,
 *                     query_offsets, kv_lens; u32 n_heads, n_kv_heads, head_size, n, batch,
 *                     table_width, page_size, n_pages), grid (n_heads, n): causal softmax
 *                     attention of each token over positions 0..its own (grouped-query: head
 *                     h reads KV head h / (n_heads / n_kv_heads)); zeros for padding;
 *                     n_pages must be at least 1 (a bad page id reads the sink page 0)
 *   "gather_last_f32" (out (batch, dim), x (n, dim), query_offsets; u32 dim, batch, n),
 *                     grid (dim, batch): each row's last token; zeros for an empty row
 *   "sample_f32"      (result i32 (batch, 2), logits, probs (batch, vocab) scratch, seats i32
 *                     (batch), states u32 (n_states, ACG_SAMPLER_STATE_WORDS); u32 vocab,
 *                     batch, n_states), grid (batch): picks row r's token with the sampler
 *                     state seats[r]: the first largest logit at temperature <= 0 or where
 *                     logit / temperature overflows (no draw is made), else a
 *                     draw from the temperature softmax (within the top-p nucleus), its random
 *                     number a function of (seed, counter) and the counter then incremented in
 *                     the state, so replays never repeat a draw. result[r] = {token, counter
 *                     used or -1}; {-1, -1} for a seat outside 0..n_states-1, untouched state.
 *                     Rows of one launch must name different seats (rows sharing a seat race).
 *   "decode_advance_i32" (result i32 (batch, 2), tokens, seats, kv_lens i32 (batch), ctl i32
 *                     (2, batch), ring i32 (batch, steps, 2), loop u32 (2); u32 batch, steps,
 *                     vocab; i32 eos), grid (1): between the steps of a loop of decode steps
 *                     (see "Decoding steps per launch"), work item 0 over the rows in order:
 *                     a row with seats[r] >= 0 files result[r] at ring[r][loop[0]] (when
 *                     loop[0] < steps), decrements ctl[0][r] (its budget), and stops (seats[r]
 *                     = -1) when the budget is spent, the token is outside 0..vocab-1, or it is
 *                     eos and ctl[1][r] != 0; else tokens[r] = the token, kv_lens[r] += 1.
 *                     Then loop[0] += 1 and loop[1] = whether any row decodes on.
 * ------------------------------------------------------------------------------------------- */

/* Words (uint32) of one sampler state in the "sample_f32" kernel's state table:
 * [0] seed low, [1] seed high, [2] draws made (the counter of the next draw), [3] temperature
 * (float bits), [4] top-p (float bits), [5..7] zero. */
#define ACG_SAMPLER_STATE_WORDS 8

/* Registers the kernels above for every device, with code for the cpu and opencl backends.
 * acg_model_create calls it; call it to launch the kernels without a model. Synchronous and
 * thread-safe; a later call registers only what an earlier one left out (after running out of
 * memory) and otherwise does nothing. While they are registered acg_set_allocator is refused.
 * ACG_ERR_INVALID_ARGUMENT when a kernel of one of these names was registered by someone else;
 * ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_model_register_kernels(void);

/* The SIMD level of the model kernels' C code on the cpu backend: "avx512", "avx2" or
 * "scalar". The best this CPU runs, unless ACG_CPU_SIMD names another it runs; every level
 * computes the same bits (docs/arithmetic.md). Decided at the first call or launch. */
ACG_API const char *acg_model_cpu_simd(void);

/* Unregisters what acg_model_register_kernels registered (acg_kernel_unregister each), so the
 * allocator may change again. Thread-safe. ACG_ERR_IN_USE while a device that loaded one of
 * them (acg_model_create, acg_kernel_get) is open: those stay registered, the others are
 * unregistered all the same, and a later acg_model_register_kernels registers them again. */
ACG_API acg_status acg_model_unregister_kernels(void);

/* ---------------------------------------------------------------------------------------------
 * Serving: a model on a device, and generation with continuous batching
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_model acg_model;

/* Every field has a default: the least size is offsetof(acg_model_options, max_batch). */
typedef struct acg_model_options {
    size_t size;              /* sizeof(acg_model_options) */
    uint32_t max_batch;       /* requests per step (default 32, at most 1024) */
    uint32_t max_step_tokens; /* query tokens per step, prefill chunks included (default 64;
                                 at least max_batch) */
    uint32_t page_size;       /* tokens per KV page (default 16) */
    uint32_t kv_pages;        /* KV pages per layer, the sink page included (0: enough for
                                 max_batch requests of seq_len tokens) */
    acg_graph_mode graphs;    /* ACG_GRAPHS_AUTO: from the environment, else on */
    uint32_t n_slots;         /* the runner's slots (0: 1, the host waits for every step) */
    bool keep_logits;         /* each step also reads its rows' logits back to the host, and a
                                 request's status shows those its latest token was sampled
                                 from (off: the logits never leave the device) */
    /* Added with tensor parallelism. */
    const acg_comm *comm; /* NULL: one process. A process group (rank, n_ranks and broadcast
                             given): with n_ranks > 1 the model is split across the ranks
                             (see "Tensor parallelism" below); read at its own size and
                             copied, its user must outlive the model */
    /* Added with loops inside graphs. */
    uint32_t steps_per_launch; /* decode steps one launch may run (0 or 1: one; at most 1024):
                                  see "Decoding steps per launch" below */
} acg_model_options;

#define ACG_MODEL_OPTIONS_INIT                                                                     \
    { sizeof(acg_model_options), 32, 64, 16, 0, ACG_GRAPHS_AUTO, 0, false, NULL, 1 }

/* Decoding steps per launch. With steps_per_launch N > 1, on a device whose graphs hold loops
 * (acg_capability.graph_loops) and with one rank, every decode bucket is also captured as a
 * loop of up to N steps (acg_stream_loop_begin): a step whose rows all decode (no prompt chunk
 * to read) runs up to N decode steps in one launch. Inside the loop each step samples, files
 * each row's token and draw counter in the row's device ring, and advances the row on the
 * device: its token becomes its next input and its KV length in the attention plan grows by
 * one, in place. A row stops at its max_new_tokens, at </s> when it asked to, or at a token
 * outside the vocabulary; the loop ends when every row stopped or after N steps. The host then
 * reads every row's tokens at once, checks them all, and retires them: tokens, draw counters
 * and the kept logits are the bits N single steps give. A stopped row keeps its place in the
 * batch until the launch ends (it recomputes its last step, writing what it wrote before), and
 * requests wait for admission until then. Eagerly (graphs off, a dropped bucket) the loop runs
 * on the host. Elsewhere (no graph_loops, several ranks: an allreduce cannot be in a loop's
 * body) the model decodes one step per launch and logs why. */

/* Tensor parallelism. With options.comm of n_ranks > 1 (acg.h, "Process groups and
 * collectives") the model is split across the ranks, one device each, Megatron-style: rank r of
 * n holds the KV heads [r * n_kv_heads / n, (r + 1) * n_kv_heads / n) with their query heads
 * (those rows of wq, wk and wv, the matching columns of wo) and the feed-forward units
 * [r * hidden_dim / n, (r + 1) * hidden_dim / n) (those rows of w1 and w3, columns of w2), and
 * each block's partial output is summed over the ranks (acg_allreduce) before the residual add.
 * A rank may hold no KV head (more ranks than KV heads): it adds zeros to the attention sum.
 * Rank r also holds the classifier's rows [r * vocab_size / n, (r + 1) * vocab_size / n) and
 * computes those logits; an allreduce in which the other ranks add zeros gathers them, so every
 * rank has the same logits bit for bit and samples the same tokens. The token embedding and the
 * norms are on every rank. Each rank uploads only its shard,
 * and its KV cache holds its own heads. The partial sums are added in another order than one
 * rank adds them, so the logits differ from a one-rank model's in their last bits, and a greedy
 * token may differ where two logits (nearly) tie; with no comm, or n_ranks 1, the model is the
 * one-process model, bit for bit.
 *
 * acg_model_create is then a collective: every rank calls it with its own device, the same
 * weights and the same options (checked: ACG_ERR_COMM otherwise); it makes a device group from
 * the comm (destroyed with the model) and hands the comm to its runner, so a bucket is replayed
 * only where every rank captured it. Every rank must then submit the same requests in the same
 * order, release the same ones, and step together: each acg_model_step checks that every rank
 * runs the same bucket, replayed or eager alike, for the same rows (ACG_ERR_COMM otherwise). A
 * rank that fails or stops calling makes the others fail with ACG_ERR_COMM (within
 * ACG_COMM_TIMEOUT_MS); the model should then be destroyed on every rank. */

/* Puts the weights on dev and prepares serving: uploads every tensor, builds the RoPE tables,
 * creates the KV cache, one attention plan per slot, the sampler states and a whole-step
 * runner whose buckets are the decode shapes (b rows of one token, b = 1, 2, 4 .. max_batch)
 * and the mixed shapes (max_batch rows, 64 .. max_step_tokens tokens), captured at creation
 * unless graphs are off (ACG_GRAPHS_REQUIRE: a bucket that fails to capture fails the call).
 * With a comm of n_ranks > 1, this rank's shard of it (see "Tensor parallelism" above).
 * The weights may be freed afterwards. Synchronous; progress is logged at info level.
 * ACG_ERR_INVALID_HANDLE for a NULL dev or weights; ACG_ERR_INVALID_ARGUMENT for a NULL out,
 * an options size that acg.h's rule for growing structs refuses, max_batch outside 1..1024,
 * max_step_tokens below max_batch or above 16 * seq_len, a page size outside 1..65536, kv_pages
 * of 1, n_slots above 2, or a step too large to launch, and a comm whose size that rule
 * refuses, without barrier, allreduce_min_i32 or broadcast, whose rank is not one of
 * 0 .. n_ranks - 1 with n_ranks in 1..64, or whose n_ranks exceeds hidden_dim;
 * ACG_ERR_UNSUPPORTED for n_ranks > 1 on a device without collectives (before anything is
 * allocated or communicated); ACG_ERR_COMM when the ranks disagree on the weights'
 * configuration or the options, or a rank fails or leaves (the comm's and
 * acg_device_group_create's statuses); ACG_ERR_OUT_OF_MEMORY; the runner's statuses (see
 * acg_runner_create). */
ACG_API acg_status acg_model_create(acg_device *dev, const acg_model_weights *weights,
                                    const acg_model_options *options, acg_model **out);

/* Waits for the model's stream, then frees everything, requests included. NULL is a no-op;
 * ACG_ERR_INVALID_HANDLE for a destroyed or foreign pointer. */
ACG_API acg_status acg_model_destroy(acg_model *model);

/* One request: a prompt of token ids (the caller's tokenizer made them; the array is copied)
 * and how to continue it. prompt and prompt_len have no default: the least size is
 * offsetof(acg_request, max_new_tokens). */
typedef struct acg_request {
    size_t size;             /* sizeof(acg_request) */
    const int32_t *prompt;   /* (prompt_len) ids in 0..vocab_size-1 */
    uint32_t prompt_len;     /* at least 1 */
    uint32_t max_new_tokens; /* tokens to generate (at least 1) */
    float temperature;       /* 0: greedy; > 0: sampled at this temperature */
    float top_p;             /* nucleus mass in (0, 1]; 1: the whole distribution */
    uint64_t seed;           /* the request's random stream */
    bool stop_at_eos;        /* finish early on ACG_TOKEN_EOS */
} acg_request;

#define ACG_REQUEST_INIT                                                                           \
    { sizeof(acg_request), NULL, 0, 16, 0.0f, 1.0f, 0, false }

typedef enum acg_request_state {
    ACG_REQUEST_WAITING = 0, /* queued until KV pages and a batch row are free */
    ACG_REQUEST_RUNNING,     /* in the batch */
    ACG_REQUEST_FINISHED,    /* all its tokens generated; its pages are free again */
} acg_request_state;

typedef struct acg_request_status {
    size_t size; /* sizeof(acg_request_status) (the caller sets it) */
    acg_request_state state;
    const int32_t *tokens; /* (n_tokens) the prompt, then the generated tokens */
    uint32_t n_tokens;
    uint32_t n_generated;          /* tokens generated so far */
    const uint32_t *draw_counters; /* (n_generated) the sampler counter each generated token
                                      used, UINT32_MAX for a greedy token */
    const float *logits;           /* (vocab_size) the logits the latest generated token was
                                      sampled from; NULL unless the model keeps logits and the
                                      request has generated a token */
} acg_request_status;

#define ACG_REQUEST_STATUS_INIT                                                                    \
    { sizeof(acg_request_status), ACG_REQUEST_WAITING, NULL, 0, 0, NULL, NULL }

/* Queues a request (not thread-safe: one thread drives a model) and gives its id. It is
 * admitted by a later acg_model_step once a batch row and KV pages for all its tokens
 * (prompt_len + max_new_tokens) are free, in submission order; it never waits for pages it
 * could never have. ACG_ERR_INVALID_ARGUMENT for a NULL request, prompt or id, a size that
 * acg.h's rule for growing structs refuses, prompt_len 0, max_new_tokens 0, a token id out of
 * range, a temperature that is negative or not finite, or top_p outside (0, 1];
 * ACG_ERR_EXHAUSTED when prompt_len + max_new_tokens exceeds seq_len or needs more KV pages
 * than the cache has (the message says how many); ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_model_submit(acg_model *model, const acg_request *request, uint64_t *id);

/* What one step did. */
typedef struct acg_step_report {
    size_t size;        /* sizeof(acg_step_report) (the caller sets it) */
    uint32_t rows;      /* requests in the step */
    uint32_t tokens;    /* query tokens (prefill and decode) */
    uint32_t generated; /* tokens sampled */
    uint32_t admitted;  /* requests admitted before it */
    uint32_t finished;  /* requests that finished in it */
    uint32_t bucket;    /* the runner's bucket */
    bool graphed;       /* replayed from a graph */
    double submit_ms;   /* host time to admit, plan, upload and queue the step */
    double ms;          /* wall time of the step, host waits included */
    /* Where ms went, phase by phase (they add up to ms): admitting and batching requests and
     * leasing the bucket's slot; building the attention plan; uploading the step's tokens and
     * seats; queuing the forward (a replay, or every launch eagerly); waiting for the sampled
     * tokens (the device's time, seen from the host); and retiring them into the requests. */
    double admit_ms, plan_ms, upload_ms, launch_ms, wait_ms, retire_ms;
    /* Added with decoding steps per launch. */
    uint32_t steps; /* decode steps the launch ran: 1, or with steps_per_launch up to it */
} acg_step_report;

#define ACG_STEP_REPORT_INIT                                                                       \
    { sizeof(acg_step_report), 0, 0, 0, 0, 0, 0, false, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0 }

/* Runs one engine step: admits waiting requests, batches the running ones (one token for each
 * decoding request, then prompt chunks sharing what is left of max_step_tokens: a prompt may
 * wait a step when the budget is spent), selects the tightest bucket, leases a
 * slot, plans, uploads the step's tokens, replays or runs eagerly, reads the sampled tokens
 * back (waiting for the stream) and retires finished requests. *report (may be NULL) says what
 * it did: rows 0 means there was nothing to run. A report whose size was not set is
 * ACG_ERR_INVALID_ARGUMENT before anything runs. A sampled token outside the vocabulary (a
 * broken sampler) is ACG_ERR_INTERNAL; every row is checked before any is applied, so no
 * request advances and the step is not counted. Statuses of the engine and the device; after
 * an error the model should be destroyed. With a comm of n_ranks > 1, a collective: before
 * anything is queued, one allreduce_min_i32 checks that every rank chose the same bucket,
 * replay or eager alike, for the same rows (a step with nothing to run included);
 * ACG_ERR_COMM when they disagree (the message names the step and the least and greatest value
 * of each over the ranks: the ranks were not given the same requests) or a rank failed. */
ACG_API acg_status acg_model_step(acg_model *model, acg_step_report *report);

/* Steps until no request is waiting or running. */
ACG_API acg_status acg_model_run_all(acg_model *model);

/* A request's state and tokens; the arrays stay valid until the next step or release.
 * ACG_ERR_NOT_FOUND for an unknown id; ACG_ERR_INVALID_ARGUMENT for a NULL out or an out->size
 * that was not set. */
ACG_API acg_status acg_model_get_request(const acg_model *model, uint64_t id,
                                         acg_request_status *out);

/* Forgets a request, ending it first if it is waiting or running (its pages are freed).
 * ACG_ERR_NOT_FOUND for an unknown id. */
ACG_API acg_status acg_model_release_request(acg_model *model, uint64_t id);

typedef struct acg_model_stats {
    size_t size; /* sizeof(acg_model_stats) (the caller sets it) */
    uint64_t steps, graphed_steps;
    uint64_t prompt_tokens;    /* prompt tokens read */
    uint64_t generated_tokens; /* tokens sampled */
    double step_ms;            /* wall time of all steps */
    uint32_t buckets_captured, buckets_dropped;
    double capture_ms; /* time spent capturing at creation */
    uint64_t uploads;  /* host-to-device copies of plans and step inputs queued (a loop's next
                          launch of the same rows queues none: "Decoding steps per launch") */
} acg_model_stats;

#define ACG_MODEL_STATS_INIT                                                                       \
    { sizeof(acg_model_stats), 0, 0, 0, 0, 0.0, 0, 0, 0.0, 0 }

/* Counters since creation. ACG_ERR_INVALID_HANDLE, ACG_ERR_INVALID_ARGUMENT for a NULL out or an
 * out->size that was not set. */
ACG_API acg_status acg_model_get_stats(const acg_model *model, acg_model_stats *out);

/* The runner that serves the steps (owned by the model), for its bucket reports. */
ACG_API acg_runner *acg_model_get_runner(const acg_model *model);

/* The model's stream: every step runs on it. */
ACG_API acg_stream *acg_model_get_stream(const acg_model *model);

#ifdef __cplusplus
}
#endif

#endif /* ACG_MODEL_H */
