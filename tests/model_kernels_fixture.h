/*
 * model_kernels_fixture.h — what the suites of the model's kernels share (test_model_kernels.c:
 * each kernel against its llama2.c loop; test_model_sampler.c: sample_f32; test_model_shapes.c:
 * the shape rules): launches with guarded buffers, a paged step of several rows in a scattered
 * KV cache, builders of every kernel's launch, and the device and stream of every case.
 */
#ifndef ACG_TESTS_MODEL_KERNELS_FIXTURE_H
#define ACG_TESTS_MODEL_KERNELS_FIXTURE_H

#include "common.h"

#include <acg/model.h>

/* Heads (grouped-query: two per KV head), the KV cache's pages, the vocabulary, the step. */
enum { NH = 4, NKV = 2, HS = 8, DIM = NH * HS, KVD = NKV * HS };

enum { PS = 4, TW = 5, SPAN = TW * PS, NP = 24 };

enum { VOCAB = 50, N_OUT = 23, MAXB = 8, MAXN = 24, QMAX = 64, SW = ACG_SAMPLER_STATE_WORDS };

enum { GUARD = 256 };                 /* poison bytes either side of every window */
static const float POISON = -1234.5f; /* what an output holds before a launch */
static const float zeros[QMAX];

/* ---- random numbers ----------------------------------------------------------------------- */
typedef struct rng {
    uint64_t s;
} rng;

typedef union fu {
    float f;
    uint32_t u;
} fu;

static inline uint32_t fbits(float f) { return (fu){.f = f}.u; }

static inline float bitsf(uint32_t u) { return (fu){.u = u}.f; }

/* The rope tables the kernel takes, (SPAN, HS / 2), from llama2.c's formula. */
extern float cos_tab[SPAN * HS / 2], sin_tab[SPAN * HS / 2];
/* ---- launches with guarded buffers -------------------------------------------------------- */
typedef struct larg {
    acg_arg arg;         /* as launched (a buffer's points into buf once uploaded) */
    unsigned char *host; /* a buffer's initial contents, then what the launch left there */
    size_t bytes;        /* the window's size */
    acg_buffer *buf;     /* the device buffer: the window with GUARD bytes either side */
} larg;

typedef struct launch {
    const char *name;
    size_t n_args;
    larg a[ACG_MAX_KERNEL_ARGS];
    acg_dims dims; /* the exact grid */
    bool bare;     /* no guards: each window fills its buffer exactly (for the shape rules) */
} launch;

/* The device under test and a stream of it, for every case. */
extern acg_device *dev;
extern acg_stream *stream;

static inline float *LF(const launch *L, int i) { return (float *)(void *)L->a[i].host; }

static inline int32_t *LI(const launch *L, int i) { return (int32_t *)(void *)L->a[i].host; }

static inline bool is_buf(const larg *a) { return a->arg.type == ACG_ARG_BUFFER; }

/* ---- a step of the paged model ------------------------------------------------------------ */
typedef struct seq {
    int q_len, kv_len;
    int32_t pages[TW];                  /* its block-table row: its pages, then the sink page */
    float k[SPAN * KVD], v[SPAN * KVD]; /* llama2.c's caches: (position, kv_dim) */
} seq;

typedef struct step {
    uint32_t batch, n;
    int32_t table[MAXB * TW], offsets[MAXB + 1], kv_lens[MAXB];
    const seq *tok_seq[MAXN]; /* each token's sequence (NULL: padding) and position */
    int tok_pos[MAXN];
} step;

typedef struct world {
    seq s[3];
    step st; /* s[0], s[1], padding, s[2], padding; then 2 padding tokens */
    float kc[NP * PS * KVD], vc[NP * PS * KVD]; /* every sequence up to kv_len in its pages */
    float kc_old[NP * PS * KVD], vc_old[NP * PS * KVD]; /* before the step: garbage in its slots */
    float k[MAXN * KVD], v[MAXN * KVD], q[MAXN * QMAX]; /* each token's K, V and query */
    float x[MAXN * DIM], norm_w[DIM], mat_w[N_OUT * DIM], table[VOCAB * DIM];
    float logits[MAXB * VOCAB];
    int32_t tokens[MAXN], seats[MAXB];
    uint32_t states[MAXB * SW];
} world;

enum { K_EMBED, K_RMSNORM, K_MATMUL, K_ROPE, K_KV_STORE, K_ATTENTION, K_GATHER, K_SAMPLE, K_N };

uint64_t rnd64(rng *r);
void rnd_fill(rng *r, float *dst, size_t n, float lo, float hi);
void make_tables(void);
/* Starts a launch of kernel name on grid (g0, g1) with arguments as spec says, one letter each:
 * 'b' a buffer (const void *data or NULL for POISON floats, unsigned bytes), 'u' an unsigned
 * u32, 'f' a double passed as f32. */
void L_make(launch *L, const char *name, uint32_t g0, uint32_t g1, const char *spec, ...);
/* Frees L: the device buffers it still holds (L_release), then its host copies. */
void L_free(launch *L);
void L_upload(launch *L);
void L_args(const launch *L, acg_arg *args);
/* Launches the uploaded L on dims (its exact grid when NULL) and waits when it was queued. */
acg_status L_launch(const launch *L, const acg_dims *dims);
/* Reads every buffer back into its host copy after checking that both guards hold poison. */
void L_read(launch *L);
void L_release(launch *L);
/* Uploads, launches on dims (the exact grid when NULL), reads back and frees the device side. */
acg_status L_run(launch *L, const acg_dims *dims);
/* got against want bit for bit, naming the first element that differs. */
void expect_equal(const float *got, const float *want, size_t n, const char *what);
/* Runs `part` (a launch of some rows alone) and expects its output (argument 0) to be the bytes
 * `whole` (those rows' output inside a larger launch) holds; frees part. */
void expect_part(launch *part, const float *whole);
/* A step of rows (NULL: a padding row, q_len 0, kv_len 0, sink pages), then pad tokens. */
void make_step(step *st, const seq *const *rows, uint32_t n_rows, uint32_t pad);
/* Where position pos of sequence q lies in a (NP, PS, KVD) cache. */
size_t slot(const seq *q, int pos);
world *make_world(uint32_t seed);
/* The step of sequence i alone (batch 1, no padding), and its first token in the world's. */
int alone(step *one, const world *w, int i);
/* ---- launch builders: every buffer exactly as large as the kernel's reach ---------------- */
void mk_embed(launch *L, const float *table, const int32_t *tokens, unsigned n);
void mk_rmsnorm(launch *L, const float *x, const float *w, unsigned n);
void mk_matmul(launch *L, const float *x, const float *w, unsigned n);
void mk_rope(launch *L, const float *x, unsigned width, const step *st, unsigned max_pos);
void mk_kv_store(launch *L, const float *kc, const float *vc, const float *k, const float *v,
                 const step *st);
/* Heads (nh, nkv) of size hs over the world's cache: nkv * hs must be KVD. att is scratch. */
void mk_attention(launch *L, const float *q, const float *kc, const float *vc, const step *st,
                  unsigned nh, unsigned nkv, unsigned hs);
void mk_gather(launch *L, const float *x, const step *st);
/* probs is scratch. */
void mk_sample(launch *L, const float *logits, unsigned batch, const int32_t *seats,
               const uint32_t *states, unsigned n_states);
/* A valid launch of model kernel `which` on the world's step. */
void mk_case(launch *L, int which, const world *w);
int kernels_setup(void **state);
int kernels_teardown(void **state);
/* A case on a world: kernels_setup, then the world of the seed the case's initial state holds,
 * which becomes its state; the teardown frees it, then kernels_teardown. */
int world_setup(void **state);
int world_teardown(void **state);
/* The table entry of such a case: test runs with the world of `seed` (a uint32_t) as its state,
 * on the device under test. */
#define WORLD_CASE(test, seed)                                                                     \
    cmocka_unit_test_prestate_setup_teardown(test, world_setup, world_teardown,                    \
                                             (void *)(uintptr_t)(seed))
/* The main of a kernels suite whose cases are the array `tests`: tc_init, the rope tables, then
 * the cases as the group tc_group(name). */
#define KERNELS_MAIN(name, tests)                                                                  \
    int main(int argc, char **argv) {                                                              \
        tc_init(argc, argv);                                                                       \
        make_tables();                                                                             \
        return cmocka_run_group_tests_name(tc_group(name), tests, NULL, NULL);                     \
    }

#endif /* ACG_TESTS_MODEL_KERNELS_FIXTURE_H */
