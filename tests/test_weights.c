/* test_weights.c — llama2.c checkpoints and presets: round trips, every malformed input, and
 * the cleanup of every failure (counting allocator). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <acg/model.h>

/* The checkpoint's floats after the header, computed here independently of the library. */
static uint64_t payload_floats(const int32_t h[7]) {
    uint64_t dim = (uint64_t)h[0], hidden = (uint64_t)h[1], layers = (uint64_t)h[2];
    uint64_t heads = (uint64_t)h[3], kv = (uint64_t)h[4];
    uint64_t vocab = (uint64_t)(h[5] < 0 ? -(int64_t)h[5] : h[5]), seq = (uint64_t)h[6];
    uint64_t hs = dim / heads;
    uint64_t n = vocab * dim + layers * dim * 2 + layers * dim * dim * 2 +
                 layers * dim * kv * hs * 2 + layers * dim * hidden * 3 + dim + seq * hs;
    if (h[5] < 0) {
        n += vocab * dim;
    }
    return n;
}

/* Writes a header and `bytes` bytes of payload (a counting pattern) to name; returns the path. */
static const char *write_file(const char *name, const void *header, size_t header_bytes,
                              size_t bytes) {
    const char *path = tc_tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (header_bytes > 0) {
        assert_int_equal(fwrite(header, 1, header_bytes, f), header_bytes);
    }
    for (size_t i = 0; i < bytes; i++) {
        assert_int_not_equal(fputc((int)(i & 0x7f), f), EOF);
    }
    assert_int_equal(fclose(f), 0);
    return path;
}

/* A small valid header: dim 8, hidden 16, 1 layer, 2 heads, 1 KV head, vocab 32, seq 8. */
static const int32_t small_header[7] = {8, 16, 1, 2, 1, 32, 8};

/* acg_model_weights_load as a tc_loader. */
static acg_status load_weights(const char *path, const void *arg, void **out) {
    (void)arg;
    acg_model_weights *w = *out;
    acg_status st = acg_model_weights_load(path, &w);
    *out = w;
    return st;
}

/* Loading path fails with `want`, the message names the file and every needle, and nothing
 * leaks. */
#define EXPECT_LOAD_FAILS(want, path, ...)                                                         \
    tc_expect_load_fails_(ACG_##want, load_weights, "acg_model_weights_load", NULL, (path),        \
                          __FILE__, __LINE__, __VA_ARGS__, NULL)

/* The preset of this name has the configuration want, and says its size. */
static void expect_preset_config(const char *name, acg_model_config want) {
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    TC_OK(acg_model_preset_get_config(name, &c));
    assert_int_equal(c.size, sizeof c);
    tc_expect_model_config(&c, &want);
}

/* Both presets have the configurations the issue gives. */
static void test_preset_configs(void **state) {
    (void)state;
    expect_preset_config("tiny", (acg_model_config){.size = sizeof(acg_model_config),
                                                    .dim = 64,
                                                    .hidden_dim = 172,
                                                    .n_layers = 2,
                                                    .n_heads = 4,
                                                    .n_kv_heads = 2,
                                                    .vocab_size = 512,
                                                    .seq_len = 256,
                                                    .shared_classifier = false});
    expect_preset_config("small", (acg_model_config){.size = sizeof(acg_model_config),
                                                     .dim = 288,
                                                     .hidden_dim = 768,
                                                     .n_layers = 6,
                                                     .n_heads = 6,
                                                     .n_kv_heads = 6,
                                                     .vocab_size = 32000,
                                                     .seq_len = 256,
                                                     .shared_classifier = false});

    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    TC_EXPECT(ERR_NOT_FOUND, acg_model_preset_get_config("huge", &c));
    TC_LAST_ERROR_HAS("huge");
    TC_LAST_ERROR_HAS("tiny");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_preset_get_config(NULL, &c));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_preset_get_config("tiny", NULL));
    acg_model_weights *w = NULL;
    TC_EXPECT(ERR_NOT_FOUND, acg_model_preset_load("huge", 1, &w));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_preset_load("tiny", 1, NULL));
    assert_null(w);
}

static size_t floats_of(const acg_model_config *c) {
    int32_t h[7] = {c->dim,        c->hidden_dim,
                    c->n_layers,   c->n_heads,
                    c->n_kv_heads, c->shared_classifier ? c->vocab_size : -c->vocab_size,
                    c->seq_len};
    return (size_t)payload_floats(h);
}

/* Two weights objects have the same configuration and the same bytes in every tensor. */
static void assert_same_weights(const acg_model_weights *a, const acg_model_weights *b) {
    const acg_model_config *ca = acg_model_weights_get_config(a);
    const acg_model_config *cb = acg_model_weights_get_config(b);
    assert_non_null(ca);
    assert_non_null(cb);
    assert_int_equal(ca->size, cb->size);
    tc_expect_model_config(cb, ca);
    const acg_model_tensors *ta = acg_model_weights_get_tensors(a);
    const acg_model_tensors *tb = acg_model_weights_get_tensors(b);
    /* The tensors are contiguous from the embedding on: compare the whole payload. */
    TC_BYTES_EQUAL(ta->token_embedding, tb->token_embedding, floats_of(ca) * sizeof(float));
    size_t dim = (size_t)ca->dim, kv = (size_t)ca->n_kv_heads * (dim / (size_t)ca->n_heads);
    size_t L = (size_t)ca->n_layers, V = (size_t)ca->vocab_size, H = (size_t)ca->hidden_dim;
    TC_BYTES_EQUAL(ta->wk, tb->wk, L * kv * dim * sizeof(float));
    TC_BYTES_EQUAL(ta->w2, tb->w2, L * dim * H * sizeof(float));
    TC_BYTES_EQUAL(ta->rms_final, tb->rms_final, dim * sizeof(float));
    TC_BYTES_EQUAL(ta->classifier, tb->classifier, V * dim * sizeof(float));
}

/* The tensor pointers follow llama2.c's order with the sizes of the configuration. */
static void assert_layout(const acg_model_weights *w) {
    const acg_model_config *c = acg_model_weights_get_config(w);
    const acg_model_tensors *t = acg_model_weights_get_tensors(w);
    size_t dim = (size_t)c->dim, kv = (size_t)c->n_kv_heads * (dim / (size_t)c->n_heads);
    size_t L = (size_t)c->n_layers, V = (size_t)c->vocab_size, H = (size_t)c->hidden_dim;
    size_t S = (size_t)c->seq_len, hs = dim / (size_t)c->n_heads;
    assert_ptr_equal(t->rms_att, t->token_embedding + V * dim);
    assert_ptr_equal(t->wq, t->rms_att + L * dim);
    assert_ptr_equal(t->wk, t->wq + L * dim * dim);
    assert_ptr_equal(t->wv, t->wk + L * kv * dim);
    assert_ptr_equal(t->wo, t->wv + L * kv * dim);
    assert_ptr_equal(t->rms_ffn, t->wo + L * dim * dim);
    assert_ptr_equal(t->w1, t->rms_ffn + L * dim);
    assert_ptr_equal(t->w2, t->w1 + L * H * dim);
    assert_ptr_equal(t->w3, t->w2 + L * dim * H);
    assert_ptr_equal(t->rms_final, t->w3 + L * H * dim);
    if (c->shared_classifier) {
        assert_ptr_equal(t->classifier, t->token_embedding);
    } else {
        assert_ptr_equal(t->classifier, t->rms_final + dim + S * hs);
    }
    for (size_t i = 0; i < L * dim; i++) {
        assert_true(t->rms_att[i] == 1.0f && t->rms_ffn[i] == 1.0f);
    }
}

/* preset -> save -> load gives the same configuration and bytes; saving the loaded file again
 * gives the same file. */
static void round_trip(acg_model_weights *w, const char *name) {
    assert_layout(w);
    const char *path = tc_tmp_path(name);
    TC_OK(acg_model_weights_save(w, path));
    acg_model_weights *loaded = NULL;
    TC_OK(acg_model_weights_load(path, &loaded));
    assert_layout(loaded);
    assert_same_weights(w, loaded);
    char path2[600];
    snprintf(path2, sizeof path2, "%s.again", path);
    TC_OK(acg_model_weights_save(loaded, path2));
    struct stat a, b;
    assert_int_equal(stat(path, &a), 0);
    assert_int_equal(stat(path2, &b), 0);
    assert_int_equal(a.st_size, b.st_size);
    assert_int_equal((uint64_t)a.st_size, 28 + floats_of(acg_model_weights_get_config(w)) * 4);
    TC_OK(acg_model_weights_free(loaded));
}

static void test_round_trip_tiny(void **state) {
    (void)state;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load("tiny", 7, &w));
    round_trip(w, "tiny.bin");
    TC_OK(acg_model_weights_free(w));
    /* Freed weights are a dead handle, refused rather than read. */
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_weights_free(w));
    assert_null(acg_model_weights_get_config(w));
}

static void test_round_trip_small(void **state) {
    (void)state;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load("small", 1, &w));
    assert_int_equal(acg_model_weights_get_config(w)->vocab_size, 32000);
    round_trip(w, "small.bin");
    TC_OK(acg_model_weights_free(w));
}

/* A separate classifier is a negative vocab_size in the header and its own tensor. */
static void test_round_trip_separate_classifier(void **state) {
    (void)state;
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1;
    c.vocab_size = 32, c.seq_len = 8, c.shared_classifier = false;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_create_random(&c, 3, &w));
    const acg_model_tensors *t = acg_model_weights_get_tensors(w);
    assert_ptr_not_equal(t->classifier, t->token_embedding);
    round_trip(w, "separate.bin");
    FILE *f = fopen(tc_tmp_path("separate.bin"), "rb");
    int32_t h[7];
    assert_int_equal(fread(h, sizeof h, 1, f), 1);
    fclose(f);
    assert_int_equal(h[5], -32);
    TC_OK(acg_model_weights_free(w));
}

/* The same seed gives the same bytes; another seed other bytes; values stay in range. */
static void test_seeded_weights(void **state) {
    (void)state;
    acg_model_weights *a = NULL, *b = NULL, *c = NULL;
    TC_OK(acg_model_preset_load("tiny", 42, &a));
    TC_OK(acg_model_preset_load("tiny", 42, &b));
    TC_OK(acg_model_preset_load("tiny", 43, &c));
    assert_same_weights(a, b);
    const acg_model_tensors *ta = acg_model_weights_get_tensors(a);
    const acg_model_tensors *tc = acg_model_weights_get_tensors(c);
    assert_memory_not_equal(ta->wq, tc->wq, 64 * 64 * sizeof(float));
    for (size_t i = 0; i < 2 * 64 * 64; i++) {
        assert_true(ta->wq[i] >= -0.125f && ta->wq[i] < 0.125f); /* 1/sqrt(64) */
    }
    for (size_t i = 0; i < 512 * 64; i++) {
        assert_true(ta->token_embedding[i] >= -1.0f && ta->token_embedding[i] < 1.0f);
    }
    TC_OK(acg_model_weights_free(a));
    TC_OK(acg_model_weights_free(b));
    TC_OK(acg_model_weights_free(c));
}

/* ---- the presets' golden bytes --------------------------------------------------------------
 * model.h promises that a preset's configuration and seed give the same bytes on every machine.
 * These are those bytes' count and FNV-1a 64 checksum, over every byte of the file the library
 * saves (header, tensors, the zero RoPE tables). Computed once, on 2026-12-02 at commit d4716c0
 * (x86-64 Linux), by this test and checked against Python's reading of the same files: a change
 * to any constant is a change of the presets' promise, and every checkpoint and output made
 * from a preset before it would no longer be reproduced. */

/* FNV-1a 64 of the whole file at path; *bytes gets its length. */
static uint64_t fnv1a_file(const char *path, uint64_t *bytes) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint64_t h = 0xcbf29ce484222325u, n = 0;
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++) {
            h = (h ^ buf[i]) * 0x100000001b3u;
        }
        n += got;
    }
    assert_int_equal(ferror(f), 0);
    assert_int_equal(fclose(f), 0);
    *bytes = n;
    return h;
}

/* Whether a saved file has the golden count and checksum; on a mismatch prints what it found
 * (the values to write in, once the change of promise is meant). */
static bool golden_matches(const char *what, const char *path, uint64_t want_bytes,
                           uint64_t want_fnv) {
    uint64_t bytes = 0;
    uint64_t fnv = fnv1a_file(path, &bytes);
    if (bytes != want_bytes || fnv != want_fnv) {
        print_error("%s: %llu bytes, FNV-1a 64 0x%016llx; expected %llu bytes, 0x%016llx\n", what,
                    (unsigned long long)bytes, (unsigned long long)fnv,
                    (unsigned long long)want_bytes, (unsigned long long)want_fnv);
        return false;
    }
    return true;
}

/* Each preset's checkpoint at seed 1 (the seed `acg run --preset` uses) and the tokenizer of
 * each preset's vocabulary are the bytes they were when the constants were written. */
static void test_preset_golden_bytes(void **state) {
    (void)state;
    static const struct {
        const char *preset;
        uint64_t weights_bytes, weights_fnv;
        uint64_t tokenizer_bytes, tokenizer_fnv;
    } golden[] = {
        {"tiny", 642332, 0x3439e3f0a6214e04u, 6287, 0x05053a4732a3ef73u},
        {"small", 97680028, 0x1d58f4bf8022af25u, 670346, 0x50f59f2dda797c2au},
    };
    bool all_match = true; /* every mismatch is printed before the case fails */
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        char what[64];
        acg_model_weights *w = NULL;
        TC_OK(acg_model_preset_load(golden[i].preset, 1, &w));
        const char *path = tc_tmp_path("golden.bin");
        TC_OK(acg_model_weights_save(w, path));
        snprintf(what, sizeof what, "the %s preset's checkpoint", golden[i].preset);
        all_match &= golden_matches(what, path, golden[i].weights_bytes, golden[i].weights_fnv);
        acg_tokenizer *t = NULL;
        TC_OK(acg_tokenizer_preset(acg_model_weights_get_config(w)->vocab_size, &t));
        path = tc_tmp_path("golden.tok");
        TC_OK(acg_tokenizer_save(t, path));
        snprintf(what, sizeof what, "the %s preset's tokenizer", golden[i].preset);
        all_match &= golden_matches(what, path, golden[i].tokenizer_bytes, golden[i].tokenizer_fnv);
        TC_OK(acg_tokenizer_free(t));
        TC_OK(acg_model_weights_free(w));
        assert_int_equal(remove(tc_tmp_path("golden.bin")), 0);
        assert_int_equal(remove(tc_tmp_path("golden.tok")), 0);
    }
    assert_true(all_match);
}

/* A file shorter than the header, or ending inside any tensor, is "truncated" naming the
 * tensor and the size expected. */
static void test_truncated(void **state) {
    (void)state;
    uint64_t total = 28 + payload_floats(small_header) * 4;
    char expected[32];
    snprintf(expected, sizeof expected, "%llu", (unsigned long long)total);
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_file("empty.bin", NULL, 0, 0), "truncated",
                      "header");
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_file("short.bin", small_header, 10, 0),
                      "truncated", "header", "28");
    /* Offsets (in floats after the header) that end inside each tensor of small_header. */
    static const struct {
        size_t floats;
        const char *tensor;
    } cuts[] = {
        {0, "token_embedding_table"},
        {255, "token_embedding_table"},
        {256, "rms_att_weight"},
        {270, "wq"},
        {330, "wk"},
        {360, "wv"},
        {400, "wo"},
        {460, "rms_ffn_weight"},
        {470, "w1"},
        {600, "w2"},
        {730, "w3"},
        {850, "rms_final_weight"},
        {860, "freq_cis_real"},
        {880, "freq_cis_imag"},
    };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        const char *path = write_file("cut.bin", small_header, 28, cuts[i].floats * 4 + 2);
        EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, path, "truncated", cuts[i].tensor, expected);
    }
    /* The separate classifier is the last tensor. */
    int32_t h[7];
    memcpy(h, small_header, sizeof h);
    h[5] = -32;
    uint64_t separate = payload_floats(h) * 4;
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_file("cut.bin", h, 28, separate - 4), "truncated",
                      "wcls");
    assert_int_equal(separate, payload_floats(small_header) * 4 + 32 * 8 * 4);
}

/* Bytes after the last tensor are refused, naming the size expected. */
static void test_trailing_bytes(void **state) {
    (void)state;
    uint64_t payload = payload_floats(small_header) * 4;
    char expected[32];
    snprintf(expected, sizeof expected, "%llu", (unsigned long long)(28 + payload));
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_file("trail.bin", small_header, 28, payload + 1),
                      "trailing", expected);
    /* A separate classifier behind a positive vocab_size: trailing bytes, "shared". */
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT,
                      write_file("trail.bin", small_header, 28, payload + 32 * 8 * 4), "trailing",
                      "shared");
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_load(write_file("ok.bin", small_header, 28, payload), &w));
    TC_OK(acg_model_weights_free(w));
}

/* Each header field out of its range, or breaking a rule of attention, names itself. */
static void test_bad_fields(void **state) {
    (void)state;
    static const char *const names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                         "n_kv_heads", "vocab_size", "seq_len"};
    const int32_t bad[] = {0, -1, INT32_MIN};
    for (int f = 0; f < 7; f++) {
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            int32_t h[7];
            memcpy(h, small_header, sizeof h);
            h[f] = bad[k];
            if (f == 5 && bad[k] == -1) {
                h[f] = -2; /* -1 is a separate classifier of 1 token: also too few */
            }
            const char *path = write_file("field.bin", h, 28, 4096);
            EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, path, names[f]);
        }
    }
    static const struct {
        int32_t h[7];
        const char *needles[3];
    } cases[] = {
        {{1 << 30, 16, 1, 2, 1, 32, 8}, {"dim", "1073741824", "65536"}},
        {{8, INT32_MAX, 1, 2, 1, 32, 8}, {"hidden_dim", "2147483647", NULL}},
        {{8, 16, 1 << 20, 2, 1, 32, 8}, {"n_layers", NULL, NULL}},
        {{8, 16, 1, 16, 1, 32, 8}, {"n_heads", "n_heads <= dim", NULL}},
        {{8, 16, 1, 2, 4, 32, 8}, {"n_kv_heads", "n_kv_heads <= n_heads", NULL}},
        {{8, 16, 1, 2, 1, 1 << 30, 8}, {"vocab_size", NULL, NULL}},
        {{8, 16, 1, 2, 1, 32, 1 << 30}, {"seq_len", NULL, NULL}},
        {{100, 16, 1, 3, 1, 32, 8}, {"dim", "multiple of n_heads", NULL}},
        {{24, 16, 1, 4, 3, 32, 8}, {"n_kv_heads", "divisor of n_heads", NULL}},
        {{6, 16, 1, 2, 1, 32, 8}, {"head_size", "even", NULL}},
        /* Every field in range, but the sizes multiply past 2^40 bytes. */
        {{65536, 16, 1, 2, 1, 4194304, 8}, {"token_embedding_table", "1099511627776", NULL}},
        {{65536, 1048576, 1024, 2, 1, 32, 8}, {"wq", "1099511627776", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_file("field.bin", cases[i].h, 28, 4096);
        EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, path,
                          cases[i].needles[0] ? cases[i].needles[0] : "",
                          cases[i].needles[1] ? cases[i].needles[1] : "",
                          cases[i].needles[2] ? cases[i].needles[2] : "");
    }
}

/* Files that are no checkpoint at all: text, a directory, a missing file. */
static void test_not_a_checkpoint(void **state) {
    (void)state;
    static const char text[] = "This is a text file, not a llama2.c checkpoint. It goes on a "
                               "little longer than a header.\n";
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_file("notes.txt", text, sizeof text - 1, 0),
                      "dim", "checkpoint");
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, tc_tmpdir(), "regular file");
    EXPECT_LOAD_FAILS(ERR_NOT_FOUND, tc_tmp_path("missing.bin"), "missing.bin");
    acg_model_weights *w = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_load(NULL, &w));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_load(tc_tmp_path("x"), NULL));
    assert_null(w);
}

/* A FIFO with no writer is refused at once as not a regular file: opening it must not wait for
 * a writer that never comes. */
static void test_fifo(void **state) {
    (void)state;
    tc_expect_fifo_refused(load_weights, "acg_model_weights_load", NULL, "model.fifo");
}

/* Misuse of the objects: NULL and foreign pointers, bad configs, unwritable paths. */
static void test_misuse(void **state) {
    (void)state;
    uint32_t junk[64] = {0};
    acg_model_weights *foreign = (acg_model_weights *)junk;
    TC_OK(acg_model_weights_free(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_weights_free(foreign));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_weights_save(foreign, tc_tmp_path("x")));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_model_weights_save(NULL, tc_tmp_path("x")));
    assert_null(acg_model_weights_get_config(NULL));
    assert_null(acg_model_weights_get_tensors(foreign));

    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    acg_model_weights *w = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_create_random(&c, 1, &w));
    TC_LAST_ERROR_HAS("dim");
    TC_OK(acg_model_preset_get_config("tiny", &c));
    c.size = 4;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_create_random(&c, 1, &w));
    TC_LAST_ERROR_HAS("size");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_create_random(NULL, 1, &w));
    assert_null(w);

    TC_OK(acg_model_preset_load("tiny", 1, &w));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_save(w, NULL));
    TC_EXPECT(ERR_NOT_FOUND, acg_model_weights_save(w, tc_tmp_path("no/such/dir.bin")));
    TC_LAST_ERROR_HAS("dir.bin");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_save(w, tc_tmpdir()));
    TC_OK(acg_model_weights_free(w));
}

static acg_status load_and_free(void *path) {
    acg_model_weights *w = NULL;
    acg_status st = path ? acg_model_weights_load(path, &w) : acg_model_preset_load("tiny", 5, &w);
    assert_true(st == ACG_OK || w == NULL); /* out-parameters untouched on an error */
    acg_model_weights_free(w);
    return st;
}

/* Every allocation of a load and of a preset fails in turn: the right status, nothing leaks. */
static void test_alloc_failures(void **state) {
    (void)state;
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load("tiny", 5, &w));
    char path[600];
    snprintf(path, sizeof path, "%s", tc_tmp_path("alloc.bin"));
    TC_OK(acg_model_weights_save(w, path));
    TC_OK(acg_model_weights_free(w));
    assert_true(tc_alloc_sweep(load_and_free, path, false) > 0);
    assert_true(tc_alloc_sweep(load_and_free, NULL, false) > 0);
}

/* A configuration from older headers stops before shared_classifier, which takes its default
 * (tied) whatever the caller's memory holds; one that stops before seq_len is refused. The
 * preset's configuration is an output: written up to an older caller's size, and refused with
 * nothing written when its size was never set. */
static void test_config_versions(void **state) {
    (void)state;
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1;
    c.vocab_size = 32, c.seq_len = 8;
    c.size = offsetof(acg_model_config, shared_classifier);
    c.shared_classifier = false; /* past the caller's size: never read */
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_create_random(&c, 3, &w));
    assert_true(acg_model_weights_get_config(w)->shared_classifier);
    const acg_model_tensors *t = acg_model_weights_get_tensors(w);
    assert_ptr_equal(t->classifier, t->token_embedding);
    TC_OK(acg_model_weights_free(w));
    w = NULL;
    c.size = offsetof(acg_model_config, seq_len);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_weights_create_random(&c, 3, &w));
    TC_LAST_ERROR_HAS("acg_model_config.size is 32");
    assert_null(w);

    acg_model_config out;
    memset(&out, 0, sizeof out);
    out.size = offsetof(acg_model_config, n_layers);
    out.n_layers = -1;
    TC_OK(acg_model_preset_get_config("tiny", &out));
    assert_int_equal(out.size, offsetof(acg_model_config, n_layers));
    assert_int_equal(out.dim, 64);
    assert_int_equal(out.hidden_dim, 172);
    assert_int_equal(out.n_layers, -1); /* past the caller's size: untouched */
    out.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_model_preset_get_config("tiny", &out));
    TC_LAST_ERROR_HAS("acg_model_preset_get_config: out->size is 0");
    assert_int_equal(out.dim, 64);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_preset_configs),
    cmocka_unit_test(test_round_trip_tiny),
    cmocka_unit_test(test_round_trip_small),
    cmocka_unit_test(test_round_trip_separate_classifier),
    cmocka_unit_test(test_seeded_weights),
    cmocka_unit_test(test_preset_golden_bytes),
    cmocka_unit_test(test_truncated),
    cmocka_unit_test(test_trailing_bytes),
    cmocka_unit_test(test_bad_fields),
    cmocka_unit_test(test_not_a_checkpoint),
    cmocka_unit_test(test_fifo),
    cmocka_unit_test(test_misuse),
    cmocka_unit_test(test_alloc_failures),
    cmocka_unit_test(test_config_versions),
};
TC_HOST_FILES_MAIN("test_weights", "acg-weights", tests)
