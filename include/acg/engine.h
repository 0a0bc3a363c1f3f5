/*
 * engine.h — what makes graph replay correct inside a serving engine: a pinned stager for
 * metadata uploads, a paged KV cache, graph-stable attention plans, and bucketed capture
 * runners, which agree across ranks through a caller-supplied acg_comm. Everything here is
 * built on acg.h and names no backend.
 *
 * Conventions are those of acg.h: statuses, acg_last_error(), checked handles, destroy(NULL)
 * is a no-op, out-parameters last, structs that begin with their size grow by acg.h's rule and
 * have an _INIT macro.
 * Lifetimes too: every destroy here waits for other threads' calls on the object to return and
 * refuses later ones with ACG_ERR_INVALID_HANDLE. The buffers an object allocates for itself
 * (K and V, a plan's buffer and views, a runner's statics) belong to it: acg_buffer_free
 * refuses them with ACG_ERR_IN_USE naming the owner.
 */
#ifndef ACG_ENGINE_H
#define ACG_ENGINE_H

#include <acg/acg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Stager: a ring of pinned host buffers that turns an upload into one asynchronous copy
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_stager acg_stager;

/* Every field has a default: the least size is offsetof(acg_stager_config, depth). */
typedef struct acg_stager_config {
    size_t size;         /* sizeof(acg_stager_config) */
    uint32_t depth;      /* ring buffers (default 8) */
    size_t buffer_bytes; /* initial bytes per ring buffer (default 64 KiB) */
    bool mirror;         /* skip an upload whose destination already holds the same bytes */
} acg_stager_config;

#define ACG_STAGER_CONFIG_INIT                                                                     \
    { sizeof(acg_stager_config), 8, 64 * 1024, false }

typedef struct acg_stager_stats {
    size_t size;      /* sizeof(acg_stager_stats) (the caller sets it) */
    uint64_t copies;  /* host-to-device copies issued */
    uint64_t bytes;   /* bytes copied */
    uint64_t waits;   /* host waits for a ring buffer whose copy was still in flight */
    uint64_t growths; /* times the ring buffers grew */
    uint64_t skipped; /* uploads the mirror skipped */
} acg_stager_stats;

#define ACG_STAGER_STATS_INIT                                                                      \
    { sizeof(acg_stager_stats), 0, 0, 0, 0, 0 }

/* Creates a stager on dev with config (NULL: defaults): depth ring buffers of buffer_bytes
 * pinned host memory, each with an event. Pinned allocation invalidates a capture in progress
 * on the device, so create stagers before capturing. ACG_ERR_INVALID_HANDLE for a NULL dev;
 * ACG_ERR_INVALID_ARGUMENT for depth 0, a zero buffer size, a config size that acg.h's rule
 * for growing structs refuses, or a NULL out; ACG_ERR_OUT_OF_MEMORY. Every stager function is
 * thread-safe (one mutex per stager): a planning thread and a stepping thread may share it. */
ACG_API acg_status acg_stager_create(acg_device *dev, const acg_stager_config *config,
                                     acg_stager **out);

/* Waits for every in-flight copy, then destroys the stager and its pinned memory.
 * ACG_ERR_IN_USE, with nothing changed, while a capture is in progress on the device (freeing
 * pinned memory would invalidate it): destroy it after the capture ends. */
ACG_API acg_status acg_stager_destroy(acg_stager *stager);

/* Uploads n elements of elem_size bytes from values, followed by (padded_n - n) copies of the
 * elem_size bytes at pad, into dst at byte offset dst_offset: the host writes them into the next
 * ring buffer and one asynchronous copy of padded_n * elem_size bytes is queued on stream,
 * followed by the ring buffer's event. values and pad are read before the call returns. The
 * call waits for the host only when the ring buffer it must reuse still has a copy in flight
 * (its event is queried first; a wait is counted in waits). A request larger than a ring buffer
 * first waits for every in-flight copy, then grows every ring buffer to max(need, 2 x current)
 * (counted in growths; like creation, it allocates pinned memory, which invalidates a capture
 * in progress on the device: size buffer_bytes for the largest upload).
 * With the mirror on, an upload whose destination (dst, dst_offset) last received exactly these
 * padded_n * elem_size bytes through this stager, and was not invalidated since, queues no copy
 * (counted in skipped): only a wait, on stream, for the earlier copy that wrote them. The mirror
 * keys on the dst handle: an upload forgets what it knew about the bytes it overwrites in that
 * handle, but writes by anything else, through a view or the parent of dst, or into a buffer
 * that was freed and whose handle address came back, need acg_stager_invalidate.
 * Uploads are eager copies, never captured: a captured copy would read the ring buffer at every
 * replay, after the ring reused it. A stream shared by threads must not begin a capture while
 * another thread uploads on it.
 * ACG_ERR_INVALID_HANDLE for a NULL or dead stager, stream or dst; ACG_ERR_INVALID_ARGUMENT
 * for elem_size 0, padded_n < n, padded_n 0, NULL values with n > 0, NULL pad with
 * padded_n > n, or a stream that is capturing (the capture is left as it was);
 * ACG_ERR_OUT_OF_RANGE when the bytes do not fit dst; ACG_ERR_WRONG_DEVICE for a stream or
 * buffer of another device; ACG_ERR_OUT_OF_MEMORY. On an error no copy is queued, except when
 * recording the event fails after the copy was queued: the call then waits for the stream. */
ACG_API acg_status acg_stager_upload(acg_stager *stager, acg_stream *stream, acg_buffer *dst,
                                     size_t dst_offset, const void *values, size_t n,
                                     size_t elem_size, const void *pad, size_t padded_n);

/* Forgets what the mirror knows about dst (all offsets), so the next upload copies: call it
 * after anything else wrote dst, and before or after freeing a buffer the stager uploaded to
 * (dst is compared by address, never followed, so it may already be freed). ACG_OK without the
 * mirror. ACG_ERR_INVALID_HANDLE for a NULL or dead stager or a NULL dst. */
ACG_API acg_status acg_stager_invalidate(acg_stager *stager, const acg_buffer *dst);

/* Counters since creation. ACG_ERR_INVALID_HANDLE, ACG_ERR_INVALID_ARGUMENT for a NULL out or
 * an out->size that was not set. */
ACG_API acg_status acg_stager_get_stats(const acg_stager *stager, acg_stager_stats *out);

/* ---------------------------------------------------------------------------------------------
 * Paged KV cache
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_kv_cache acg_kv_cache;

/* n_pages and kv_dim have no default: the least size is offsetof(acg_kv_config, elem_bytes). */
typedef struct acg_kv_config {
    size_t size;         /* sizeof(acg_kv_config) */
    uint32_t n_layers;   /* layers sharing the page table */
    uint32_t n_pages;    /* pages per layer, the sink page included */
    uint32_t page_size;  /* tokens per page (default 16) */
    uint32_t kv_dim;     /* elements per token per layer, for K and for V */
    uint32_t elem_bytes; /* bytes per element (default 4) */
} acg_kv_config;

#define ACG_KV_CONFIG_INIT                                                                         \
    { sizeof(acg_kv_config), 1, 0, 16, 0, 4 }

/* Page 0 of every layer is the sink page: never given to a request, zero-filled at creation;
 * padding rows of a plan point at it. */
#define ACG_KV_SINK_PAGE 0u

/* Creates the cache: one K and one V buffer of (n_layers, n_pages, page_size, kv_dim) elements,
 * their sink pages zeroed (synchronous: the call waits for the fill). Pages other than the sink
 * are not initialized. Every kv function is thread-safe (one mutex per cache); the page array
 * from acg_kv_request_get_pages is not guarded after the call returns.
 * ACG_ERR_INVALID_HANDLE for a NULL dev; ACG_ERR_INVALID_ARGUMENT for a NULL config or out, a
 * config size that acg.h's rule for growing structs refuses, a zero field, n_pages < 2 or
 * above 2^31 (page ids go into int32 block tables), or sizes that overflow;
 * ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_kv_cache_create(acg_device *dev, const acg_kv_config *config,
                                       acg_kv_cache **out);
/* Frees the buffers and every request. ACG_ERR_IN_USE, with nothing changed, while a live
 * graph uses K or V (naming the graph) or a capture is in progress on the device: destroy the
 * graphs or end the capture first, then call again. */
ACG_API acg_status acg_kv_cache_destroy(acg_kv_cache *kv);

/* The K and V buffers, (n_layers, n_pages, page_size, kv_dim); owned by the cache. Either out
 * may be NULL (not both: ACG_ERR_INVALID_ARGUMENT). */
ACG_API acg_status acg_kv_cache_get_buffers(const acg_kv_cache *kv, acg_buffer **k, acg_buffer **v);

/* Pages not held by any request (the sink page excluded). */
ACG_API acg_status acg_kv_cache_get_free_pages(const acg_kv_cache *kv, uint32_t *out);

/* Gives request `id` enough pages for `tokens` tokens in total, keeping the pages it has: a new
 * id is admitted, a known one grows (never shrinks). All or nothing: ACG_ERR_EXHAUSTED (and
 * nothing changes) when the free pages do not suffice; ACG_ERR_OUT_OF_MEMORY likewise.
 * ACG_ERR_INVALID_ARGUMENT for tokens 0. */
ACG_API acg_status acg_kv_request_reserve(acg_kv_cache *kv, uint64_t id, uint32_t tokens);

/* Returns the request's pages to the free list. ACG_ERR_NOT_FOUND for an unknown id. */
ACG_API acg_status acg_kv_request_release(acg_kv_cache *kv, uint64_t id);

/* The request's pages in token order; the array stays valid until the request changes.
 * ACG_ERR_NOT_FOUND for an unknown id, ACG_ERR_INVALID_ARGUMENT for a NULL out. */
ACG_API acg_status acg_kv_request_get_pages(const acg_kv_cache *kv, uint64_t id,
                                            const uint32_t **pages, uint32_t *n_pages);

/* ---------------------------------------------------------------------------------------------
 * Attention plans: graph-stable per-step metadata
 * ------------------------------------------------------------------------------------------- */

typedef struct acg_attn_plan acg_attn_plan;

/* Only page_size has a default: the least size is sizeof(acg_attn_plan_config). */
typedef struct acg_attn_plan_config {
    size_t size;               /* sizeof(acg_attn_plan_config) */
    uint32_t batch;            /* rows: the bucket's batch size */
    uint32_t max_seq_len;      /* longest KV length a row may have */
    uint32_t page_size;        /* tokens per KV page */
    uint32_t max_query_tokens; /* query tokens of all rows together (batch for decode) */
} acg_attn_plan_config;

#define ACG_ATTN_PLAN_CONFIG_INIT                                                                  \
    { sizeof(acg_attn_plan_config), 0, 0, 16, 0 }

/* One request's row of a step. */
typedef struct acg_attn_row {
    const uint32_t *pages; /* its KV pages in token order */
    uint32_t n_pages;
    uint32_t kv_len; /* KV tokens after this step */
    uint32_t q_len;  /* query tokens this step (1 for decode; more for packed prefill) */
} acg_attn_row;

/* Where a plan's arrays live: views into the plan's one device buffer, all int32:
 * block_table (batch, table_width), query_offsets (batch + 1), kv_lens (batch). */
typedef struct acg_attn_plan_views {
    size_t size;               /* sizeof(acg_attn_plan_views) (the caller sets it) */
    acg_buffer *metadata;      /* the whole buffer */
    acg_buffer *block_table;   /* (batch, table_width) page ids, padded with the sink page */
    acg_buffer *query_offsets; /* (batch + 1) [i]: q_len of rows before i; [batch]: total */
    acg_buffer *kv_lens;       /* (batch) */
    uint32_t table_width;      /* ceil(max_seq_len / page_size) */
    uint32_t max_kv_len;       /* the worst case, max_seq_len: what a captured kernel is given */
} acg_attn_plan_views;

#define ACG_ATTN_PLAN_VIEWS_INIT                                                                   \
    { sizeof(acg_attn_plan_views), NULL, NULL, NULL, NULL, 0, 0 }

typedef struct acg_attn_plan_stats {
    size_t size;        /* sizeof(acg_attn_plan_stats) (the caller sets it) */
    uint64_t builds;    /* acg_attn_plan_build calls that succeeded */
    uint64_t uploads;   /* of them, those that queued a copy */
    uint64_t unchanged; /* of them, those whose packed bytes equalled what the buffer holds
                           (a pre-plan promoted) */
} acg_attn_plan_stats;

#define ACG_ATTN_PLAN_STATS_INIT                                                                   \
    { sizeof(acg_attn_plan_stats), 0, 0, 0 }

/* Creates a plan and its one device buffer, sized for config's worst case; the buffer and its
 * views never move or grow. The buffer starts as an empty plan (all rows padding: zeros, the
 * sink page being 0); the call waits for that fill. ACG_ERR_INVALID_HANDLE for a NULL dev;
 * ACG_ERR_INVALID_ARGUMENT for a NULL config or out, a config size that acg.h's rule for
 * growing structs refuses, zero fields, or sizes that overflow (max_seq_len and
 * max_query_tokens must fit an int32); ACG_ERR_OUT_OF_MEMORY. */
ACG_API acg_status acg_attn_plan_create(acg_device *dev, const acg_attn_plan_config *config,
                                        acg_attn_plan **out);

/* Frees the buffer, its views and the event. ACG_ERR_IN_USE, with nothing changed, while a
 * live graph uses the buffer or a view (naming the graph) or a capture is in progress on the
 * device: destroy the graphs or end the capture first, then call again. */
ACG_API acg_status acg_attn_plan_destroy(acg_attn_plan *plan);

/* Plans a step: packs the block table (each row's pages, then the sink page up to
 * table_width), the query offsets and the KV lengths of n_rows rows, padding rows n_rows ..
 * batch-1 with kv_len 0, q_len 0 and sink-page block tables, and uploads all of it through the
 * stager as ONE copy into the plan's buffer, then records the plan's event on stream. When the
 * packed bytes equal what the buffer already holds from the previous build (a pre-plan made for
 * this step), nothing is uploaded and the event stays where the earlier build recorded it.
 * Never allocates device memory, and not even host memory unless the stager must grow (size
 * its buffers for the plan). The stager's mirror is not used: the plan compares with its own
 * previous build. Builds of one plan are serialized; the views never change.
 * ACG_ERR_EXHAUSTED when the step needs more than the plan holds (n_rows > batch, a row with
 * more pages than table_width or kv_len > max_seq_len, query tokens > max_query_tokens);
 * ACG_ERR_INVALID_ARGUMENT for NULL rows with n_rows > 0, a row whose pages do not cover
 * kv_len, whose q_len exceeds kv_len, with a NULL pages array or a page id above INT32_MAX, or
 * a capturing stream (see acg_stager_upload); ACG_ERR_INVALID_HANDLE for a NULL or dead plan,
 * stager or stream; ACG_ERR_WRONG_DEVICE for a stager or stream of another device. On an error
 * nothing is uploaded, except that a failure after the copy was queued (recording the event)
 * leaves the buffer holding the new step. */
ACG_API acg_status acg_attn_plan_build(acg_attn_plan *plan, acg_stager *stager, acg_stream *stream,
                                       const acg_attn_row *rows, uint32_t n_rows);

/* Forgets the bytes of the latest build, so the next build uploads whatever it packs: call it
 * once work on the device rewrote the plan's buffer in place (a loop of decode steps advances
 * each row's KV length inside the graph: model.h, "Decoding steps per launch"), or the next
 * build of those same bytes would upload nothing. ACG_ERR_INVALID_HANDLE for a NULL or dead
 * plan. */
ACG_API acg_status acg_attn_plan_invalidate(acg_attn_plan *plan);

/* The opposite of acg_attn_plan_invalidate: tells the plan that its buffer holds the packing of
 * these rows, as acg_attn_plan_build would write it, because work on the device rewrote it in
 * place and is complete (a loop of decode steps grew each row's KV length: the caller reads the
 * lengths back), so the next build of the same rows uploads nothing. Nothing is copied; the rows
 * are checked as acg_attn_plan_build checks them, with the same statuses, and a refused call
 * leaves the plan as it was. ACG_ERR_INVALID_HANDLE for a NULL or dead plan. */
ACG_API acg_status acg_attn_plan_note(acg_attn_plan *plan, const acg_attn_row *rows,
                                      uint32_t n_rows);

/* An event recorded after the latest build's upload: the stream that replays the step waits
 * on it (owned by the plan; never recorded, hence complete, before the first upload). NULL for
 * a NULL or dead plan. */
ACG_API acg_event *acg_attn_plan_get_event(const acg_attn_plan *plan);

/* The buffer, its views and the worst-case sizes; fixed for the plan's life.
 * ACG_ERR_INVALID_HANDLE, ACG_ERR_INVALID_ARGUMENT for a NULL out or an out->size that was not
 * set. */
ACG_API acg_status acg_attn_plan_get_views(const acg_attn_plan *plan, acg_attn_plan_views *out);

/* Counters since creation. ACG_ERR_INVALID_HANDLE, ACG_ERR_INVALID_ARGUMENT for a NULL out or
 * an out->size that was not set. */
ACG_API acg_status acg_attn_plan_get_stats(const acg_attn_plan *plan, acg_attn_plan_stats *out);

/* ---------------------------------------------------------------------------------------------
 * Buckets, recipes and capture runners
 * ------------------------------------------------------------------------------------------- */

/* A captured shape. A batch is served by the tightest bucket with batch >= its rows and
 * tokens >= its query tokens (and the same label and key_info), padded up to it. */
typedef struct acg_bucket_key {
    const char *label; /* e.g. "decode"; the runner keeps its own copy */
    uint64_t key_info; /* anything else that changes the captured work */
    uint32_t batch;
    uint32_t tokens;
} acg_bucket_key;

/* What a step sees: the bucket, the slot, and its static buffers at the bucket's shape
 * (views of buffers sized for the largest bucket). */
typedef struct acg_step_io {
    const acg_bucket_key *bucket;
    uint32_t bucket_index;
    uint32_t slot;
    acg_buffer *const *inputs;  /* (n_inputs) per slot: the host fills them before the step */
    acg_buffer *const *outputs; /* (n_outputs) shared: the step leaves its results here */
} acg_step_io;

/* What a model hands a runner. The callbacks must launch the same work eagerly and under
 * capture; graph scratch (acg_stream_alloc) does not survive between steps or regions.
 * A whole-step recipe ends at forward: the least size is offsetof(acg_recipe, n_regions), and
 * the piecewise fields default to none. can_capture is optional (NULL: always capturable). */
typedef struct acg_recipe {
    size_t size; /* sizeof(acg_recipe) */
    const char *name;
    void *user;
    uint32_t n_inputs, n_outputs;
    /* Whether the work can be captured on a device with this capability; *why when not. */
    bool (*can_capture)(void *user, const acg_capability *cap, char *why, size_t why_size);
    /* Bytes of static input / output i for a bucket (asked for the largest bucket). */
    size_t (*input_bytes)(void *user, uint32_t i, const acg_bucket_key *bucket);
    size_t (*output_bytes)(void *user, uint32_t i, const acg_bucket_key *bucket);
    /* The whole step (whole runner). */
    acg_status (*forward)(void *user, acg_stream *stream, const acg_step_io *io);
    /* Piecewise runner: n_regions capturable regions, and eager code after each region but
     * the last. */
    uint32_t n_regions;
    acg_status (*region)(void *user, uint32_t region, acg_stream *stream, const acg_step_io *io);
    acg_status (*between)(void *user, uint32_t after_region, acg_stream *stream,
                          const acg_step_io *io);
} acg_recipe;

#define ACG_RECIPE_INIT                                                                            \
    { sizeof(acg_recipe), NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, NULL, NULL }

typedef enum acg_graph_mode {
    ACG_GRAPHS_AUTO = 0, /* from the environment: ACG_DISABLE_GRAPHS, ACG_REQUIRE_GRAPHS */
    ACG_GRAPHS_ON,       /* capture; a bucket that fails is dropped and served eagerly */
    ACG_GRAPHS_OFF,      /* capture nothing, allocate nothing for graphs, serve eagerly */
    ACG_GRAPHS_REQUIRE,  /* capture; a dropped bucket is an error at creation */
} acg_graph_mode;

/* recipe, buckets, n_buckets and stream have no default: the least size is
 * offsetof(acg_runner_config, n_slots). */
typedef struct acg_runner_config {
    size_t size;                   /* sizeof(acg_runner_config) */
    const acg_recipe *recipe;      /* copied; its user pointer must outlive the runner */
    const acg_bucket_key *buckets; /* copied */
    uint32_t n_buckets;
    acg_stream *stream;    /* warm-up and capture stream */
    uint32_t n_slots;      /* 1 or 2; 0: ACG_NUM_SLOTS (digits only, 1 or 2), else 2 */
    bool piecewise;        /* capture the recipe's regions instead of its whole forward */
    acg_graph_mode graphs; /* default ACG_GRAPHS_AUTO */
    uint64_t memory_limit; /* device bytes all users may hold; 0: the device's memory */
    const acg_comm *comm;  /* NULL: a single process */
} acg_runner_config;

#define ACG_RUNNER_CONFIG_INIT                                                                     \
    { sizeof(acg_runner_config), NULL, NULL, 0, NULL, 0, false, ACG_GRAPHS_AUTO, 0, NULL }

typedef enum acg_bucket_state {
    ACG_BUCKET_EAGER = 0, /* graphs off: served eagerly by choice */
    ACG_BUCKET_CAPTURED,  /* every slot captured on every rank */
    ACG_BUCKET_DROPPED,   /* served eagerly: see reason */
} acg_bucket_state;

typedef struct acg_bucket_report {
    size_t size; /* sizeof(acg_bucket_report) (the caller sets it) */
    acg_bucket_key key;
    acg_bucket_state state;
    char reason[256];    /* why dropped ("budget: ...", the capture's error, "another rank") */
    double capture_ms;   /* time spent capturing its slots (warm-ups included) */
    uint64_t eager_peak; /* device bytes one eager step allocated at its peak */
    /* Added with the graph memory figures. Graphs of one pool never replay at the same time,
     * so every graph lays its scratch out over the same pool memory: a bucket's graph_bytes
     * are what it would need of a pool of its own, and the pool holds about the largest
     * bucket's, not the sum (acg_runner_get_pool_bytes). */
    uint64_t graph_bytes; /* pool bytes its captured graphs need: the largest of its slots' (and
                             regions') graphs, whose scratch shares the same memory; 0 unless
                             captured */
    uint64_t pool_growth; /* bytes the pool grew by while capturing it: 0 when its graphs fit in
                             what the pool already held (a failed capture may have grown it too) */
} acg_bucket_report;

#define ACG_BUCKET_REPORT_INIT                                                                     \
    { sizeof(acg_bucket_report), {NULL, 0, 0, 0}, ACG_BUCKET_EAGER, {0}, 0.0, 0, 0, 0 }

typedef struct acg_runner acg_runner;

/* Creates a runner and captures its buckets. Before allocating anything it checks the recipe
 * (can_capture) and the device capability: an unsupported recipe is ACG_ERR_UNSUPPORTED (with
 * graphs off nothing is checked or allocated). Then it allocates every bucket's static buffers
 * (inputs per slot and outputs, at the largest bucket's shape), runs each bucket's step eagerly
 * once to measure its peak device memory, orders the buckets largest first by that peak
 * (every rank's largest, with a comm; ties by shape), runs every slot of every bucket eagerly
 * twice (the measuring run is slot 0's first; each run is waited for, so creation holds at most
 * one eager step's temporaries, and none beside the pool), and captures in that order into one
 * graph pool, which then holds about the largest bucket's graph memory, not the sum (see
 * acg_bucket_report). A bucket whose warm-up fails is dropped (reason "warm-up failed"); one
 * whose capture would leave less than the largest eager peak free under memory_limit is
 * dropped (reason "budget"), largest first. A bucket counts only if all its slots captured on
 * every rank (comm); a dropped bucket is logged at error level and served eagerly. With graphs
 * required, a dropped bucket fails the creation, naming the bucket and its reason.
 * ACG_ERR_INVALID_ARGUMENT for a NULL config or out; a config, recipe or comm size that acg.h's
 * rule for growing structs refuses (each is read at its own size); no recipe, buckets or
 * stream; a recipe without a name, without input_bytes or output_bytes for its inputs and
 * outputs, with more than 16 outputs, or without forward (piecewise: regions, and between for
 * more than one); a bucket without a label (of fewer than 64 characters) or a batch; a comm
 * without barrier or allreduce_min_i32; n_slots above 2, or 0 with ACG_NUM_SLOTS set to
 * anything but 1 or 2 (the detail names the variable and the value). ACG_ERR_WRONG_DEVICE for a
 * stream of another device. A comm callback's failure is returned as it is, and the runner is not
 * created. Synchronous. */
ACG_API acg_status acg_runner_create(acg_device *dev, const acg_runner_config *config,
                                     acg_runner **out);
ACG_API acg_status acg_runner_destroy(acg_runner *runner);

/* The tightest bucket for a batch: ACG_ERR_NOT_FOUND when none is large enough. */
ACG_API acg_status acg_runner_select(const acg_runner *runner, const char *label, uint64_t key_info,
                                     uint32_t batch, uint32_t tokens, uint32_t *bucket);

/* A lease: the right to run one step of a bucket in its next free slot (the slots rotate). A
 * slot is held by one lease at a time, until acg_runner_release. The slot's previous step may
 * still be queued: a stream that rewrites the slot's inputs or re-plans its metadata must
 * first wait on slot_free (acg_stream_wait_event). */
typedef struct acg_lease {
    uint64_t ticket; /* names the lease to its runner; 0 once released */
    uint32_t bucket;
    uint32_t slot;
    bool graphed;         /* the step replays a graph */
    acg_step_io io;       /* the slot's inputs to fill and the outputs to read */
    acg_event *slot_free; /* complete once the slot's previous step ran (owned by the runner) */
} acg_lease;

/* Leases the bucket's next slot that no lease holds. ACG_ERR_IN_USE when every slot of the
 * bucket is leased; ACG_ERR_INVALID_ARGUMENT for a bucket out of range or a NULL out. */
ACG_API acg_status acg_runner_lease(acg_runner *runner, uint32_t bucket, acg_lease *out);

/* Runs the leased step on stream: replays the slot's graph(s) or runs the recipe eagerly
 * (piecewise: regions replayed, the code between them eager), then records the slot's
 * slot_free event after it. Asynchronous. A lease that this runner did not hand out, or that
 * was released, is ACG_ERR_INVALID_ARGUMENT before anything runs. A recipe callback's failure
 * is returned with a detail naming the recipe, the callback and the bucket. */
ACG_API acg_status acg_runner_run(acg_runner *runner, const acg_lease *lease, acg_stream *stream);

/* Ends a lease and zeroes it; the slot can be leased again. ACG_ERR_INVALID_ARGUMENT for a
 * lease that is not held (released already, or another runner's). */
ACG_API acg_status acg_runner_release(acg_runner *runner, acg_lease *lease);

/* What became of a bucket at creation. ACG_ERR_INVALID_HANDLE; ACG_ERR_INVALID_ARGUMENT for a
 * bucket out of range, a NULL out or an out->size that was not set. */
ACG_API acg_status acg_runner_get_report(const acg_runner *runner, uint32_t bucket,
                                         acg_bucket_report *out);
ACG_API uint32_t acg_runner_get_bucket_count(const acg_runner *runner);
/* Device bytes the runner's graph pool holds: all the graph memory of its buckets together,
 * held until the runner is destroyed (0 with graphs off). Every bucket's graphs lay their scratch
 * out over this same memory, so it is about the largest of the buckets' graph_bytes, not their
 * sum; the buckets' pool_growth add up to it. ACG_ERR_INVALID_HANDLE; ACG_ERR_INVALID_ARGUMENT
 * for a NULL out. */
ACG_API acg_status acg_runner_get_pool_bytes(const acg_runner *runner, size_t *out);

/* The graph that slot `slot` of bucket `bucket` replays for region `region` (a whole-step
 * runner has one region, 0; a piecewise one has its recipe's n_regions), to look at it
 * (acg_graph_get_node, acg_graph_write_dot). The graph belongs to the runner and lives until
 * the runner is destroyed: do not destroy, discard or update it, and replay it only through
 * acg_runner_run, which keeps the slot's inputs and the pool's other graphs in order.
 * Synchronous and thread-safe: a runner's graphs do not change after creation. *out is left
 * untouched on an error. ACG_ERR_INVALID_HANDLE for a NULL or destroyed runner;
 * ACG_ERR_INVALID_ARGUMENT for a NULL out; ACG_ERR_OUT_OF_RANGE for a bucket, slot or region
 * out of range (the detail gives the range); ACG_ERR_NOT_FOUND for a bucket that has no graphs:
 * one served eagerly because graphs are off, or one dropped at creation (the detail says which,
 * with the report's reason). */
ACG_API acg_status acg_runner_get_graph(const acg_runner *runner, uint32_t bucket, uint32_t slot,
                                        uint32_t region, const acg_graph **out);

#ifdef __cplusplus
}
#endif

#endif /* ACG_ENGINE_H */
