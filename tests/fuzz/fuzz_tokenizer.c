/* fuzz_tokenizer.c — libFuzzer harness for the llama2.c tokenizer parser, encode and decode.
 *
 * Input: 2 bytes (little-endian) giving vocab_size - 3 modulo 4096, then a tokenizer.bin. When
 * the parser accepts it, fixed texts (ASCII, UTF-8, broken UTF-8, byte-token look-alikes) are
 * encoded, every id checked to be in range and decoded, and every token decoded after BOS.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const texts[] = {
    "",
    "Once upon a time, there was a little girl named Lily.",
    "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xc3 \xe6\x97 \xff\xfe\x80",
    "<0x41><unk><s></s>  \t\n aaaaaaaabbbbbbbbabababab",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) {
        return 0;
    }
    int32_t vocab = 3 + (int32_t)((data[0] | (data[1] << 8)) % 4096);
    acg_tokenizer *t = NULL;
    if (acg__tokenizer_parse(data + 2, size - 2, vocab, "fuzz_tokenizer", "input", &t) != ACG_OK) {
        return 0;
    }
    if (acg_tokenizer_get_vocab_size(t) != vocab) {
        abort();
    }
    int32_t ids[256];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t n = 0;
        acg_status st = acg_tokenizer_encode(t, texts[i], true, true, ids, 256, &n);
        if (st != ACG_OK || n > strlen(texts[i]) + 3) {
            abort();
        }
        for (size_t k = 0; k < n; k++) {
            if (ids[k] < 0 || ids[k] >= vocab) {
                abort();
            }
            const char *piece = acg_tokenizer_decode(t, k > 0 ? ids[k - 1] : 0, ids[k]);
            if (piece == NULL) {
                abort();
            }
            volatile size_t len = strlen(piece);
            (void)len;
        }
        /* A cap too small is refused, not overrun. */
        if (n > 0 &&
            acg_tokenizer_encode(t, texts[i], true, true, ids, n - 1, &n) != ACG_ERR_EXHAUSTED) {
            abort();
        }
    }
    for (int32_t id = 0; id < vocab; id++) {
        const char *piece = acg_tokenizer_decode(t, ACG_TOKEN_BOS, id);
        if (piece == NULL) {
            abort();
        }
        volatile size_t len = strlen(piece);
        (void)len;
    }
    acg_tokenizer_free(t);
    return 0;
}
