/* simd_scalar.c — the scalar table of simd.h, written straight from arith.h: the reference the
 * vector tables match bit for bit, and the code a CPU without them runs. Also the choice of
 * table (ACG_CPU_SIMD) and the model layer's environment variables. */
#include <pthread.h>
#include <string.h>

#include "arith.h"
#include "model-impl.h"
#include "simd.h"

static const char *const env_names[] = {
    "ACG_CPU_SIMD",          /* the table: scalar|avx2|avx512; default: the best the CPU runs */
    "ACG_CPU_MATMUL_STREAM", /* the largest batch whose matmuls stream (0: none); default: the
                                table's measured cut-over */
};
const acg__env_table acg__model_env = {"model", env_names, sizeof env_names / sizeof env_names[0]};

static float sc_dot(const float *a, const float *b, uint32_t n) { return acg__dot(a, b, n); }

static float sc_sum(const float *a, uint32_t n) { return acg__sum(a, n); }

static float sc_sum_ge(const float *a, uint32_t n, float tau) {
    float s[ACG_LANES] = {0.0f};
    for (uint32_t k = 0; k < n; k++) {
        if (a[k] >= tau) {
            s[k % ACG_LANES] = s[k % ACG_LANES] + a[k];
        }
    }
    return acg__tree32(s);
}

static void sc_matmul(float *out, const float *x, const float *w, uint32_t n_in, uint32_t n_out,
                      uint32_t n, uint32_t j0, uint32_t j1) {
    for (uint32_t r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * n_in;
        for (uint32_t j = j0; j < j1; j++) {
            out[(size_t)r * n_out + j] = acg__dot(w + (size_t)j * n_in, xr, n_in);
        }
    }
}

/* One order only: each output's dot product, whatever the order of the rows. */
static void sc_matmul_order(float *out, const float *x, const float *w, uint32_t n_in,
                            uint32_t n_out, uint32_t n, uint32_t j0, uint32_t j1, int stream) {
    (void)stream;
    sc_matmul(out, x, w, n_in, n_out, n, j0, j1);
}

static void sc_exp_sub(float *y, const float *x, float sub, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        y[i] = acg__expf(x[i] - sub);
    }
}

static void sc_div(float *y, const float *x, float d, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        y[i] = x[i] / d;
    }
}

static void sc_swiglu(float *y, const float *x, const float *g, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = (v * (1.0f / (1.0f + acg__expf(-v)))) * g[i];
    }
}

static void sc_rms_apply(float *o, const float *w, const float *x, float ss, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        o[i] = w[i] * (ss * x[i]);
    }
}

/* Row p of a cache, or NULL for a position whose page id is unusable. */
static const float *kv_row(const acg__kv_rows *kv, uint32_t p) {
    int32_t page = kv->table[p / kv->page_size];
    if (page < 0 || (uint32_t)page >= kv->n_pages) {
        return NULL;
    }
    return kv->cache + ((size_t)page * kv->page_size + p % kv->page_size) * kv->kv_dim + kv->off;
}

static void sc_attn_scores(float *sc, const float *q, const acg__kv_rows *k, uint32_t hs,
                           float scale, uint32_t n_pos) {
    for (uint32_t p = 0; p < n_pos; p++) {
        const float *kp = kv_row(k, p);
        sc[p] = (kp != NULL ? acg__dot(q, kp, hs) : 0.0f) / scale;
    }
}

static void sc_attn_values(float *o, const float *prob, const acg__kv_rows *v, uint32_t hs,
                           uint32_t n_pos) {
    for (uint32_t i = 0; i < hs; i++) {
        float s[ACG_LANES] = {0.0f};
        for (uint32_t p = 0; p < n_pos; p++) {
            const float *vp = kv_row(v, p);
            /* The sink page holds zeros: its rows add prob * 0. */
            float x =
                vp != NULL ? vp[i] : v->cache[(size_t)(p % v->page_size) * v->kv_dim + v->off + i];
            s[p % ACG_LANES] = fmaf(prob[p], x, s[p % ACG_LANES]);
        }
        o[i] = acg__tree32(s);
    }
}

const acg__simd_ops acg__simd_scalar = {
    .name = "scalar",
    .dot = sc_dot,
    .sum = sc_sum,
    .sum_ge = sc_sum_ge,
    .matmul = sc_matmul,
    .matmul_order = sc_matmul_order,
    .exp_sub = sc_exp_sub,
    .div = sc_div,
    .swiglu = sc_swiglu,
    .rms_apply = sc_rms_apply,
    .attn_scores = sc_attn_scores,
    .attn_values = sc_attn_values,
};

const acg__simd_ops *acg__simd_level(const char *name) {
    const acg__simd_ops *t = NULL;
    if (strcmp(name, "scalar") == 0) {
        t = &acg__simd_scalar;
    } else if (strcmp(name, "avx2") == 0) {
        t = acg__simd_avx2();
    } else if (strcmp(name, "avx512") == 0) {
        t = acg__simd_avx512();
    }
    return t;
}

static const acg__simd_ops *chosen;

static void choose(void) {
    const acg__simd_ops *best = acg__simd_avx512();
    if (best == NULL) {
        best = acg__simd_avx2();
    }
    if (best == NULL) {
        best = &acg__simd_scalar;
    }
    const char *want = acg__env_get("ACG_CPU_SIMD");
    chosen = best;
    if (want != NULL && *want != '\0') {
        const acg__simd_ops *t = acg__simd_level(want);
        if (t != NULL) {
            chosen = t;
        } else {
            acg__log(ACG_LOG_WARN,
                     "ACG_CPU_SIMD=%s: not a level this CPU runs (scalar, avx2, avx512); using %s",
                     want, best->name);
        }
    }
    acg__log(ACG_LOG_DEBUG, "model kernels on the cpu: %s", chosen->name);
}

const acg__simd_ops *acg__simd(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose);
    return chosen;
}

#define STREAM_UNSET UINT32_MAX
static uint32_t stream_max = STREAM_UNSET;

static void read_stream_max(void) {
    const char *v = acg__env_get("ACG_CPU_MATMUL_STREAM");
    uint64_t n;
    if (v == NULL || *v == '\0') {
        return;
    }
    if (acg__parse_u64(v, 0, UINT32_MAX - 1, &n) != ACG_OK) {
        acg__log(ACG_LOG_WARN,
                 "ACG_CPU_MATMUL_STREAM=%.64s: not a whole number of rows; using the measured "
                 "cut-over",
                 v);
        return;
    }
    stream_max = (uint32_t)n;
}

uint32_t acg__matmul_stream_max(uint32_t dflt) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_stream_max);
    return stream_max != STREAM_UNSET ? stream_max : dflt;
}

const char *acg_model_cpu_simd(void) { return acg__simd()->name; }
