/*
 * llama2_ref.h — the plain-C reference the model's tests compare with: llama2.c's run.c (one
 * sequence, a contiguous KV cache, one token at a time), its loops as written there, with every
 * sum in the one order (acg__dot, acg__sum) and acg__expf, the arithmetic every backend's kernels
 * follow (docs/arithmetic.md). test_model.c compares whole generations with tc_ref_forward;
 * test_model_kernels.c compares each kernel with the loop it stands for.
 */
#ifndef ACG_TESTS_LLAMA2_REF_H
#define ACG_TESTS_LLAMA2_REF_H

#include <acg/model.h>

/* o = weight * x / rms(x), with eps added to the mean square. */
void tc_ref_rmsnorm(float *o, const float *x, const float *weight, int size, float eps);
/* x = softmax(x), in place. */
void tc_ref_softmax(float *x, int size);
/* W (d, n) @ x (n) -> xout (d). */
void tc_ref_matmul(float *xout, const float *x, const float *w, int n, int d);
/* Rotates the dim values of vec (pairs within heads of head_size) by position pos. */
void tc_ref_rope(float *vec, int dim, int head_size, int pos);
/* One token's attention at position pos over its sequence's contiguous caches (pos + 1 rows of
 * n_kv_heads * head_size), every head, into xb (n_heads * head_size). att and column are
 * scratch of pos + 1 floats each. */
void tc_ref_attention(float *xb, const float *q, const float *key_cache, const float *value_cache,
                      int pos, int n_heads, int n_kv_heads, int head_size, float *att,
                      float *column);
/* silu(a) * b. */
float tc_ref_swiglu(float a, float b);

/* A model's weights with run.c's state: the activations and the KV cache of one sequence. */
typedef struct tc_ref_model {
    acg_model_config c;
    acg_model_tensors w;
    int head_size, kv_dim;
    float *x;           /* (dim) the residual stream */
    float *xb;          /* (dim) */
    float *xb2;         /* (dim) */
    float *hb;          /* (hidden_dim) */
    float *hb2;         /* (hidden_dim) */
    float *q;           /* (dim) */
    float *att;         /* (seq_len) */
    float *column;      /* (seq_len) a column of the value cache */
    float *logits;      /* (vocab_size) */
    float *key_cache;   /* (n_layers, seq_len, kv_dim) */
    float *value_cache; /* (n_layers, seq_len, kv_dim) */
} tc_ref_model;

/* The reference over w's tensors (which must outlive it), its caches zeroed; fails the test
 * when out of memory. */
void tc_ref_model_init(tc_ref_model *r, const acg_model_weights *w);
void tc_ref_model_free(tc_ref_model *r);
/* run.c's forward(): token at position pos (the positions before it already run), returning the
 * logits (vocab_size, owned by r). */
float *tc_ref_forward(tc_ref_model *r, int token, int pos);

#endif /* ACG_TESTS_LLAMA2_REF_H */
