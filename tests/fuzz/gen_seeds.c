/* gen_seeds.c — writes the seed corpora of the fuzz harnesses (generated, not committed).
 *
 * usage: gen_seeds WEIGHTS_DIR TOKENIZER_DIR (both must exist)
 * Weights: a small valid checkpoint (dim 8, hidden 16, 1 layer, 2 heads, 1 KV head, vocab 32,
 * seq 8) with a shared and with a separate classifier, plus truncated and over-long variants.
 * Tokenizer: the 2-byte vocab prefix fuzz_tokenizer reads, then a hand-made 32-token and a
 * generated 300-token vocabulary, plus truncated variants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h>

static void die(const char *what) {
    fprintf(stderr, "gen_seeds: %s: %s\n", what, acg_last_error());
    exit(1);
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        die(path);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    if (p == NULL || fread(p, 1, (size_t)n, f) != (size_t)n) {
        die(path);
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

static void write_seed(const char *dir, const char *name, const void *prefix, size_t prefix_n,
                       const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(prefix, 1, prefix_n, f) != prefix_n ||
        (n > 0 && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        die(path);
    }
}

/* Writes a checkpoint of config to dir: whole, cut at several points, with a byte too many. */
static void weights_seeds(const char *dir, const char *tag, const acg_model_config *c) {
    acg_model_weights *w = NULL;
    if (acg_model_weights_create_random(c, 1, &w) != ACG_OK) {
        die("acg_model_weights_create_random");
    }
    char tmp[1024], name[128];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, tag);
    if (acg_model_weights_save(w, tmp) != ACG_OK) {
        die("acg_model_weights_save");
    }
    acg_model_weights_free(w);
    size_t n;
    unsigned char *bytes = read_all(tmp, &n);
    remove(tmp);
    snprintf(name, sizeof name, "%s-valid.bin", tag);
    write_seed(dir, name, "", 0, bytes, n);
    const size_t cuts[] = {0, 12, 28, 100, n / 2, n - 4};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(name, sizeof name, "%s-cut-%zu.bin", tag, cuts[i]);
        write_seed(dir, name, "", 0, bytes, cuts[i]);
    }
    bytes[n] = 0;
    snprintf(name, sizeof name, "%s-trailing.bin", tag);
    write_seed(dir, name, "", 0, bytes, n + 1);
    free(bytes);
}

static void tokenizer_seeds(const char *dir, const char *tag, const unsigned char *bytes, size_t n,
                            int32_t vocab) {
    unsigned char prefix[2] = {(unsigned char)((vocab - 3) & 0xff),
                               (unsigned char)(((vocab - 3) >> 8) & 0xff)};
    char name[128];
    snprintf(name, sizeof name, "%s-valid.bin", tag);
    write_seed(dir, name, prefix, 2, bytes, n);
    const size_t cuts[] = {0, 3, 4, 10, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        snprintf(name, sizeof name, "%s-cut-%zu.bin", tag, cuts[i]);
        write_seed(dir, name, prefix, 2, bytes, cuts[i]);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gen_seeds WEIGHTS_DIR TOKENIZER_DIR\n");
        return 2;
    }
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1;
    c.vocab_size = 32, c.seq_len = 8, c.shared_classifier = true;
    weights_seeds(argv[1], "shared", &c);
    c.shared_classifier = false;
    weights_seeds(argv[1], "separate", &c);

    /* A hand-made vocabulary: the specials, then printable characters and a few joins. */
    unsigned char hand[1024];
    size_t n = 0;
    int32_t max_len = 8;
    memcpy(hand, &max_len, 4), n += 4;
    static const char *const pieces[32] = {
        "<unk>", "<s>", "</s>", " ",  "a",  "b",  "c",  "d",  "e",      "t",       "h",
        "o",     "n",   "s",    "i",  "r",  "th", "he", " t", " th",    " the",    "an",
        " a",    "and", " and", "in", "er", "on", "es", "st", "<0x41>", "\xc3\xa9"};
    for (int i = 0; i < 32; i++) {
        float score = (float)-i;
        int32_t len = (int32_t)strlen(pieces[i]);
        memcpy(hand + n, &score, 4), n += 4;
        memcpy(hand + n, &len, 4), n += 4;
        memcpy(hand + n, pieces[i], (size_t)len), n += (size_t)len;
    }
    tokenizer_seeds(argv[2], "hand", hand, n, 32);

    acg_tokenizer *t = NULL;
    if (acg_tokenizer_preset(300, &t) != ACG_OK) {
        die("acg_tokenizer_preset");
    }
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/.preset.tmp", argv[2]);
    if (acg_tokenizer_save(t, tmp) != ACG_OK) {
        die("acg_tokenizer_save");
    }
    acg_tokenizer_free(t);
    unsigned char *bytes = read_all(tmp, &n);
    remove(tmp);
    tokenizer_seeds(argv[2], "preset", bytes, n, 300);
    free(bytes);
    return 0;
}
