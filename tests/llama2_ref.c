/* llama2_ref.c — the reference of llama2_ref.h. */
#include "llama2_ref.h"

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arith.h"

void tc_ref_rmsnorm(float *o, const float *x, const float *weight, int size, float eps) {
    float ss = acg__dot(x, x, (uint32_t)size);
    ss /= size;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < size; j++) {
        o[j] = weight[j] * (ss * x[j]);
    }
}

void tc_ref_softmax(float *x, int size) {
    float max_val = x[0];
    for (int i = 1; i < size; i++) {
        if (x[i] > max_val) {
            max_val = x[i];
        }
    }
    for (int i = 0; i < size; i++) {
        x[i] = acg__expf(x[i] - max_val);
    }
    float sum = acg__sum(x, (uint32_t)size);
    for (int i = 0; i < size; i++) {
        x[i] /= sum;
    }
}

void tc_ref_matmul(float *xout, const float *x, const float *w, int n, int d) {
    for (int i = 0; i < d; i++) {
        xout[i] = acg__dot(w + (size_t)i * n, x, (uint32_t)n);
    }
}

void tc_ref_rope(float *vec, int dim, int head_size, int pos) {
    for (int i = 0; i < dim; i += 2) {
        int head_dim = i % head_size;
        float freq = 1.0f / powf(10000.0f, head_dim / (float)head_size);
        float val = pos * freq, fcr = cosf(val), fci = sinf(val);
        float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fcr - v1 * fci;
        vec[i + 1] = v0 * fci + v1 * fcr;
    }
}

void tc_ref_attention(float *xb, const float *q, const float *key_cache, const float *value_cache,
                      int pos, int n_heads, int n_kv_heads, int head_size, float *att,
                      float *column) {
    const int kv_dim = n_kv_heads * head_size, kv_mul = n_heads / n_kv_heads;
    for (int h = 0; h < n_heads; h++) {
        const float *qh = q + h * head_size;
        for (int t = 0; t <= pos; t++) {
            const float *k = key_cache + (size_t)t * kv_dim + (h / kv_mul) * head_size;
            float score = acg__dot(qh, k, (uint32_t)head_size);
            score /= sqrtf(head_size);
            att[t] = score;
        }
        tc_ref_softmax(att, pos + 1);
        float *xbh = xb + h * head_size;
        for (int i = 0; i < head_size; i++) { /* a dot product of att with V's column i */
            for (int t = 0; t <= pos; t++) {
                column[t] = value_cache[(size_t)t * kv_dim + (h / kv_mul) * head_size + i];
            }
            xbh[i] = acg__dot(att, column, (uint32_t)pos + 1);
        }
    }
}

float tc_ref_swiglu(float a, float b) {
    float val = a;
    val *= (1.0f / (1.0f + acg__expf(-val)));
    return val * b;
}

static float *ref_alloc(size_t n) {
    float *p = calloc(n, sizeof(float));
    assert_non_null(p);
    return p;
}

void tc_ref_model_init(tc_ref_model *r, const acg_model_weights *w) {
    const acg_model_config *c = acg_model_weights_get_config(w);
    const acg_model_tensors *t = acg_model_weights_get_tensors(w);
    assert_non_null(c);
    assert_non_null(t);
    memset(r, 0, sizeof *r);
    r->c = *c;
    r->w = *t;
    r->head_size = c->dim / c->n_heads;
    r->kv_dim = c->n_kv_heads * r->head_size;
    r->x = ref_alloc((size_t)c->dim);
    r->xb = ref_alloc((size_t)c->dim);
    r->xb2 = ref_alloc((size_t)c->dim);
    r->hb = ref_alloc((size_t)c->hidden_dim);
    r->hb2 = ref_alloc((size_t)c->hidden_dim);
    r->q = ref_alloc((size_t)c->dim);
    r->att = ref_alloc((size_t)c->seq_len);
    r->column = ref_alloc((size_t)c->seq_len);
    r->logits = ref_alloc((size_t)c->vocab_size);
    r->key_cache = ref_alloc((size_t)c->n_layers * c->seq_len * r->kv_dim);
    r->value_cache = ref_alloc((size_t)c->n_layers * c->seq_len * r->kv_dim);
}

void tc_ref_model_free(tc_ref_model *r) {
    free(r->x);
    free(r->xb);
    free(r->xb2);
    free(r->hb);
    free(r->hb2);
    free(r->q);
    free(r->att);
    free(r->column);
    free(r->logits);
    free(r->key_cache);
    free(r->value_cache);
}

float *tc_ref_forward(tc_ref_model *r, int token, int pos) {
    const acg_model_config *p = &r->c;
    const acg_model_tensors *w = &r->w;
    float *x = r->x;
    const int dim = p->dim, kv_dim = r->kv_dim, hidden_dim = p->hidden_dim;

    memcpy(x, w->token_embedding + (size_t)token * dim, (size_t)dim * sizeof *x);

    for (int l = 0; l < p->n_layers; l++) {
        /* attention rmsnorm */
        tc_ref_rmsnorm(r->xb, x, w->rms_att + (size_t)l * dim, dim, 1e-5f);

        /* key and value point into the cache at this position */
        size_t loff = (size_t)l * p->seq_len * kv_dim;
        float *k = r->key_cache + loff + (size_t)pos * kv_dim;
        float *v = r->value_cache + loff + (size_t)pos * kv_dim;

        /* qkv matmuls */
        tc_ref_matmul(r->q, r->xb, w->wq + (size_t)l * dim * dim, dim, dim);
        tc_ref_matmul(k, r->xb, w->wk + (size_t)l * dim * kv_dim, dim, kv_dim);
        tc_ref_matmul(v, r->xb, w->wv + (size_t)l * dim * kv_dim, dim, kv_dim);

        /* RoPE: rotate q and k by the position */
        tc_ref_rope(r->q, dim, r->head_size, pos);
        tc_ref_rope(k, kv_dim, r->head_size, pos);

        /* multihead attention over positions 0..pos */
        tc_ref_attention(r->xb, r->q, r->key_cache + loff, r->value_cache + loff, pos, p->n_heads,
                         p->n_kv_heads, r->head_size, r->att, r->column);

        /* output projection, then the residual */
        tc_ref_matmul(r->xb2, r->xb, w->wo + (size_t)l * dim * dim, dim, dim);
        for (int i = 0; i < dim; i++) {
            x[i] += r->xb2[i];
        }

        /* ffn rmsnorm */
        tc_ref_rmsnorm(r->xb, x, w->rms_ffn + (size_t)l * dim, dim, 1e-5f);

        /* w2(silu(w1(x)) * w3(x)) */
        tc_ref_matmul(r->hb, r->xb, w->w1 + (size_t)l * dim * hidden_dim, dim, hidden_dim);
        tc_ref_matmul(r->hb2, r->xb, w->w3 + (size_t)l * dim * hidden_dim, dim, hidden_dim);
        for (int i = 0; i < hidden_dim; i++) {
            r->hb[i] = tc_ref_swiglu(r->hb[i], r->hb2[i]);
        }
        tc_ref_matmul(r->xb, r->hb, w->w2 + (size_t)l * dim * hidden_dim, hidden_dim, dim);

        /* residual */
        for (int i = 0; i < dim; i++) {
            x[i] += r->xb[i];
        }
    }

    /* final rmsnorm, classifier */
    tc_ref_rmsnorm(x, x, w->rms_final, dim, 1e-5f);
    tc_ref_matmul(r->logits, x, w->classifier, dim, p->vocab_size);
    return r->logits;
}
