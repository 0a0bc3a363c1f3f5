/* fuzz_weights.c — libFuzzer harness for the llama2.c checkpoint parser.
 *
 * The input is a whole model.bin. When the parser accepts it, the last float of every tensor is
 * read, at the size the configuration implies (computed here, independently), so a tensor
 * pointer that strays past the input is an ASan report, not a silent pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model-impl.h"

static float last(const float *p, uint64_t n) { return n > 0 ? p[n - 1] : 0.0f; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The parser wants 4-byte aligned data, as a mapping gives it. */
    void *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL) {
        return 0;
    }
    if (size > 0) {
        memcpy(copy, data, size);
    }
    acg_model_config c;
    acg_model_tensors t;
    if (acg__model_weights_parse(copy, size, "fuzz_weights", "input", &c, &t) == ACG_OK) {
        uint64_t dim = (uint64_t)c.dim, hidden = (uint64_t)c.hidden_dim;
        uint64_t layers = (uint64_t)c.n_layers, vocab = (uint64_t)c.vocab_size;
        uint64_t kv = (uint64_t)c.n_kv_heads * (dim / (uint64_t)c.n_heads);
        volatile float sum = 0.0f;
        sum += last(t.token_embedding, vocab * dim) + last(t.rms_att, layers * dim);
        sum += last(t.wq, layers * dim * dim) + last(t.wk, layers * kv * dim);
        sum += last(t.wv, layers * kv * dim) + last(t.wo, layers * dim * dim);
        sum += last(t.rms_ffn, layers * dim) + last(t.w1, layers * hidden * dim);
        sum += last(t.w2, layers * dim * hidden) + last(t.w3, layers * hidden * dim);
        sum += last(t.rms_final, dim) + last(t.classifier, vocab * dim);
        (void)sum;
        /* Whatever parses must describe exactly the input's size. */
        uint64_t bytes = 0;
        if (acg__model_config_check(&c, "fuzz_weights", "input", &bytes) != ACG_OK ||
            bytes != size) {
            abort();
        }
    }
    free(copy);
    return 0;
}
