/* test_tokenizer.c — llama2.c tokenizers: the generated preset vocabulary, encode/decode round
 * trips, a hand-built vocabulary whose merge order is checkable, every malformed file, and the
 * cleanup of every failure (counting allocator). */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h>

static int setup(void **state) {
    (void)state;
    if (tc_tmpdir_create("acg-tokenizer") != 0) {
        return -1;
    }
    tc_alloc_install();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return tc_tmpdir_remove();
}

/* ---- building tokenizer files ------------------------------------------------------------- */

typedef struct file_builder {
    unsigned char bytes[8192];
    size_t n;
} file_builder;

static void put(file_builder *b, const void *p, size_t n) {
    assert_true(b->n + n <= sizeof b->bytes);
    memcpy(b->bytes + b->n, p, n);
    b->n += n;
}

static void put_i32(file_builder *b, int32_t v) { put(b, &v, sizeof v); }

static void put_token(file_builder *b, float score, const char *piece) {
    put(b, &score, sizeof score);
    put_i32(b, (int32_t)strlen(piece));
    put(b, piece, strlen(piece));
}

static const char *write_builder(const char *name, const file_builder *b) {
    const char *path = tc_tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (b->n > 0) {
        assert_int_equal(fwrite(b->bytes, 1, b->n, f), b->n);
    }
    assert_int_equal(fclose(f), 0);
    return path;
}

/* A hand-built vocabulary of 12 tokens, no byte tokens (bytes fall back to <unk>). */
enum { T_SPACE = 3, T_A, T_B, T_C, T_AB, T_BC, T_SPACE_A, T_ABC, T_SPACE_ABC, HAND_VOCAB };
static void build_hand(file_builder *b) {
    b->n = 0;
    put_i32(b, 8);
    put_token(b, 0, "<unk>");
    put_token(b, 0, "<s>");
    put_token(b, 0, "</s>");
    put_token(b, -100, " ");
    put_token(b, -100, "a");
    put_token(b, -100, "b");
    put_token(b, -100, "c");
    put_token(b, 1, "ab");
    put_token(b, 5, "bc");
    put_token(b, 3, " a");
    put_token(b, 0.5f, "abc");
    put_token(b, 10, " abc");
}

/* Loading path as vocab_size tokens fails with want; the message names the file and every
 * needle; nothing leaks. */
#define EXPECT_LOAD_FAILS(want, path, vocab, ...)                                                  \
    expect_load_fails_(ACG_##want, (path), (vocab), __FILE__, __LINE__, __VA_ARGS__, NULL)
static void expect_load_fails_(acg_status want, const char *path, int32_t vocab, const char *file,
                               int line, ...) {
    acg_tokenizer *sentinel = (acg_tokenizer *)(uintptr_t)0x1234;
    acg_tokenizer *t = sentinel;
    int64_t live = tc_alloc_live();
    tc_expect_(want, acg_tokenizer_load(path, vocab, &t), "acg_tokenizer_load", file, line);
    assert_ptr_equal(t, sentinel);
    const char *base = strrchr(path, '/');
    tc_last_error_has_(base ? base + 1 : path, file, line);
    va_list ap;
    va_start(ap, line);
    for (const char *needle = va_arg(ap, const char *); needle != NULL;
         needle = va_arg(ap, const char *)) {
        tc_last_error_has_(needle, file, line);
    }
    va_end(ap);
    assert_int_equal(tc_alloc_live(), live);
}

/* Encodes text (asserting success) into ids; returns the count. */
static size_t encode(const acg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *ids,
                     size_t cap) {
    size_t n = 0;
    TC_OK(acg_tokenizer_encode(t, text, bos, eos, ids, cap, &n));
    return n;
}

/* Decoding ids (after BOS) gives text back. */
static void assert_round_trip(const acg_tokenizer *t, const char *text) {
    int32_t ids[512];
    size_t n = encode(t, text, true, false, ids, 512);
    assert_true(n >= 1);
    assert_int_equal(ids[0], ACG_TOKEN_BOS);
    char out[1024] = "";
    size_t len = 0;
    for (size_t i = 1; i < n; i++) {
        assert_true(ids[i] >= 0 && ids[i] < acg_tokenizer_get_vocab_size(t));
        const char *piece = acg_tokenizer_decode(t, ids[i - 1], ids[i]);
        assert_non_null(piece);
        size_t k = strlen(piece);
        assert_true(len + k < sizeof out);
        memcpy(out + len, piece, k + 1);
        len += k;
    }
    assert_string_equal(out, text);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* The preset vocabulary: fixed ids, unique pieces, scores below the pieces they join. */
static void check_preset(int32_t vocab) {
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(vocab, &t));
    assert_int_equal(acg_tokenizer_get_vocab_size(t), vocab);
    assert_string_equal(acg_tokenizer_decode(t, 0, 0), "<unk>");
    assert_string_equal(acg_tokenizer_decode(t, 0, 1), "\n<s>\n");
    assert_string_equal(acg_tokenizer_decode(t, 0, 2), "\n</s>\n");
    assert_int_equal(acg_tokenizer_find(t, "<0x41>", 6), ACG_TOKEN_BYTE0 + 0x41);
    assert_int_equal(acg_tokenizer_find(t, "<0xFF>", 6), ACG_TOKEN_BYTE0 + 0xff);
    assert_string_equal(acg_tokenizer_decode(t, 0, ACG_TOKEN_BYTE0 + 'A'), "A");
    assert_int_equal(acg_tokenizer_find(t, "e", 1) >= 259, true);
    assert_int_equal(acg_tokenizer_find(t, " t", 2) >= 259, true);
    assert_int_equal(acg_tokenizer_find(t, "<", 1), -1);
    /* Every piece is unique: finding it gives its own id. */
    for (int32_t id = 0; id < vocab; id++) {
        const char *piece = acg_tokenizer_decode(t, 0, id);
        if (id >= ACG_TOKEN_BYTE0 && id < 259) {
            continue; /* decodes to its byte, not its piece */
        }
        assert_int_equal(acg_tokenizer_find(t, piece, strlen(piece)), id);
    }
    TC_OK(acg_tokenizer_free(t));
}

static void test_preset_tiny(void **state) {
    (void)state;
    check_preset(512);
}

static void test_preset_small(void **state) {
    (void)state;
    check_preset(32000);
}

static void test_preset_bad_size(void **state) {
    (void)state;
    acg_tokenizer *t = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_preset(258, &t));
    TC_LAST_ERROR_HAS("vocab_size");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_preset(ACG_MODEL_MAX_VOCAB + 1, &t));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_preset(512, NULL));
    assert_null(t);
    TC_OK(acg_tokenizer_preset(259, &t)); /* no generated pieces at all */
    int32_t ids[8];
    size_t n = encode(t, "hi", false, false, ids, 8);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], ACG_TOKEN_BYTE0 + ' ');
    assert_int_equal(ids[1], ACG_TOKEN_BYTE0 + 'h');
    TC_OK(acg_tokenizer_free(t));
}

/* Text decodes back to itself: ASCII, UTF-8, and bytes that need byte tokens. */
static void test_round_trips(void **state) {
    (void)state;
    static const char *const texts[] = {
        "Once upon a time, there was a little girl named Lily.",
        "the the the thethe  double  spaces\tand\ttabs\nand lines\n",
        "h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80!",
        "\x01\x02\x7f raw \xff\xfe bytes \xc3 broken \xe6\x97 utf8 <0x41> <unk>",
        "a",
        " ",
        "<",
    };
    for (int p = 0; p < 2; p++) {
        acg_tokenizer *t = NULL;
        TC_OK(acg_tokenizer_preset(p == 0 ? 512 : 32000, &t));
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            assert_round_trip(t, texts[i]);
        }
        TC_OK(acg_tokenizer_free(t));
    }
}

/* BOS and EOS only when asked; the dummy prefix only for non-empty text; merges happen. */
static void test_bos_eos(void **state) {
    (void)state;
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    int32_t ids[64];
    assert_int_equal(encode(t, "", false, false, ids, 64), 0);
    assert_int_equal(encode(t, "", true, true, ids, 64), 2);
    assert_int_equal(ids[0], ACG_TOKEN_BOS);
    assert_int_equal(ids[1], ACG_TOKEN_EOS);
    size_t n = encode(t, "the", true, true, ids, 64);
    assert_int_equal(ids[0], ACG_TOKEN_BOS);
    assert_int_equal(ids[n - 1], ACG_TOKEN_EOS);
    /* " the" is a preset piece: prefix and word merge into it. */
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], acg_tokenizer_find(t, " the", 4));
    assert_string_equal(acg_tokenizer_decode(t, ACG_TOKEN_BOS, ids[1]), "the");
    assert_string_equal(acg_tokenizer_decode(t, 7, ids[1]), " the");
    n = encode(t, "the", false, false, ids, 64);
    assert_int_equal(n, 1);
    TC_OK(acg_tokenizer_free(t));
}

/* The hand-built vocabulary: the best-scoring pair merges first. */
static void test_merge_order(void **state) {
    (void)state;
    file_builder b;
    build_hand(&b);
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_load(write_builder("hand.bin", &b), HAND_VOCAB, &t));
    int32_t ids[16];
    /* [" ", a, b, c]: bc (5) beats " a" (3) and ab (1); then " a" (3) beats abc (0.5); then
     * " a" + bc join into " abc". */
    size_t n = encode(t, "abc", false, false, ids, 16);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], T_SPACE_ABC);
    /* [" ", a, b, a, b]: " a" first, then the remaining ab; "ba" and " ab" are no pieces. */
    n = encode(t, "abab", false, false, ids, 16);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], T_SPACE_A);
    assert_int_equal(ids[1], T_B);
    assert_int_equal(ids[2], T_AB);
    /* [" ", c, a, b]: " c" is no piece, ab (1) merges; "cab" is none. */
    n = encode(t, "cab", false, false, ids, 16);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], T_SPACE);
    assert_int_equal(ids[1], T_C);
    assert_int_equal(ids[2], T_AB);
    /* A byte without a token, and no byte tokens: <unk>. */
    n = encode(t, "z", true, true, ids, 16);
    assert_int_equal(n, 4);
    assert_int_equal(ids[1], T_SPACE);
    assert_int_equal(ids[2], ACG_TOKEN_UNK);
    TC_OK(acg_tokenizer_free(t));
}

/* Leftmost wins on a tie, with two pairs of the same piece's score. */
static void test_merge_tie(void **state) {
    (void)state;
    file_builder b = {.n = 0};
    put_i32(&b, 5);
    put_token(&b, 0, "<unk>");
    put_token(&b, 0, "<s>");
    put_token(&b, 0, "</s>");
    put_token(&b, 0, " ");
    put_token(&b, 0, "x");
    put_token(&b, 2, "xx");
    put_token(&b, 2, " x");
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_load(write_builder("tie.bin", &b), 7, &t));
    int32_t ids[8];
    /* [" ", x, x]: " x" and xx both score 2; the leftmost, " x", merges. */
    size_t n = encode(t, "xx", false, false, ids, 8);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 4);
    TC_OK(acg_tokenizer_free(t));
}

/* More ids than cap: ACG_ERR_EXHAUSTED, saying how many, n untouched. */
static void test_cap_exhausted(void **state) {
    (void)state;
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    int32_t ids[64];
    size_t need = encode(t, "zq#zq#", true, true, ids, 64);
    size_t n = 12345;
    TC_EXPECT(ERR_EXHAUSTED, acg_tokenizer_encode(t, "zq#zq#", true, true, ids, need - 1, &n));
    char count[16];
    snprintf(count, sizeof count, "%zu", need);
    TC_LAST_ERROR_HAS(count);
    assert_int_equal(n, 12345);
    TC_EXPECT(ERR_EXHAUSTED, acg_tokenizer_encode(t, "a", false, false, NULL, 0, &n));
    TC_OK(acg_tokenizer_encode(t, "", false, false, NULL, 0, &n));
    assert_int_equal(n, 0);
    assert_int_equal(encode(t, "zq#zq#", true, true, ids, need), need);
    /* strlen + 3 always suffices, even for bytes that all fall back. */
    static const char worst[] = "\x01\x02\x03\x04\x05";
    assert_true(encode(t, worst, true, true, ids, sizeof worst - 1 + 3) <= sizeof worst + 2);
    TC_OK(acg_tokenizer_free(t));
}

/* Misuse: NULL and foreign tokenizers, bad tokens, NULL arguments. */
static void test_misuse(void **state) {
    (void)state;
    uint32_t junk[64] = {0};
    acg_tokenizer *foreign = (acg_tokenizer *)junk;
    int32_t ids[4];
    size_t n;
    TC_OK(acg_tokenizer_free(NULL));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_tokenizer_free(foreign));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_tokenizer_encode(foreign, "a", false, false, ids, 4, &n));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_tokenizer_save(NULL, tc_tmp_path("x")));
    assert_null(acg_tokenizer_decode(NULL, 0, 0));
    TC_LAST_ERROR_HAS("acg_tokenizer_decode");
    assert_int_equal(acg_tokenizer_get_vocab_size(foreign), 0);
    assert_int_equal(acg_tokenizer_find(NULL, "a", 1), -1);

    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    assert_null(acg_tokenizer_decode(t, 0, 512));
    TC_LAST_ERROR_HAS("512");
    assert_null(acg_tokenizer_decode(t, 0, -1));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, NULL, false, false, ids, 4, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, "a", false, false, ids, 4, NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, "a", false, false, NULL, 4, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_save(t, NULL));
    TC_EXPECT(ERR_NOT_FOUND, acg_tokenizer_save(t, tc_tmp_path("no/such/tok.bin")));
    TC_OK(acg_tokenizer_free(t));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(NULL, 512, &t));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(tc_tmp_path("x"), 512, NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(tc_tmp_path("x"), 2, &t));
    TC_LAST_ERROR_HAS("vocab_size");
}

/* preset -> save -> load: the same pieces and scores; saving again gives the same file. */
static void test_save_load(void **state) {
    (void)state;
    acg_tokenizer *t = NULL, *u = NULL;
    TC_OK(acg_tokenizer_preset(32000, &t));
    const char *path = tc_tmp_path("tok.bin");
    TC_OK(acg_tokenizer_save(t, path));
    char again[600];
    snprintf(again, sizeof again, "%s", path);
    TC_OK(acg_tokenizer_load(again, 32000, &u));
    for (int32_t id = 0; id < 32000; id++) {
        assert_string_equal(acg_tokenizer_decode(t, 0, id), acg_tokenizer_decode(u, 0, id));
    }
    int32_t a[256], b[256];
    const char *text = "Once upon a time, a happy dog saw the big tree in the park.";
    size_t na = encode(t, text, true, true, a, 256), nb = encode(u, text, true, true, b, 256);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof a[0]);
    TC_OK(acg_tokenizer_save(u, tc_tmp_path("tok2.bin")));
    FILE *f1 = fopen(again, "rb"), *f2 = fopen(tc_tmp_path("tok2.bin"), "rb");
    assert_non_null(f1);
    assert_non_null(f2);
    int c1, c2;
    do {
        c1 = fgetc(f1);
        c2 = fgetc(f2);
        assert_int_equal(c1, c2);
    } while (c1 != EOF);
    fclose(f1);
    fclose(f2);
    /* The model's vocabulary differs from the file's: fewer or more entries. */
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, again, 32001, "truncated", "32000", "fewer");
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, again, 512, "vocabulary size differs", "more than 512");
    TC_OK(acg_tokenizer_free(t));
    TC_OK(acg_tokenizer_free(u));
}

/* Every malformed file: the status, the file, the token and the field in the message. */
static void test_malformed(void **state) {
    (void)state;
    file_builder b = {.n = 0};
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("empty.bin", &b), HAND_VOCAB, "truncated",
                      "max_token_length");
    const int32_t bad_max[] = {0, -1, ACG_TOKENIZER_MAX_TOKEN_LENGTH + 1, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_max / sizeof bad_max[0]; i++) {
        build_hand(&b);
        memcpy(b.bytes, &bad_max[i], 4);
        EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("max.bin", &b), HAND_VOCAB,
                          "max_token_length");
    }
    /* Lengths: negative, zero, above max_token_length, huge. Token 4 ("a") starts at byte
     * 4 + (4+4+5) + (4+4+3) + (4+4+4) + (4+4+1) = 49: its score, then its length at 53. */
    const int32_t bad_len[] = {-1, 0, 9, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
        build_hand(&b);
        int32_t one;
        memcpy(&one, b.bytes + 53, 4);
        assert_int_equal(one, 1);
        memcpy(b.bytes + 53, &bad_len[i], 4);
        EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("len.bin", &b), HAND_VOCAB, "token 4",
                          "length");
    }
    /* A non-finite score. */
    build_hand(&b);
    float nan_score = NAN;
    memcpy(b.bytes + 49, &nan_score, 4);
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("nan.bin", &b), HAND_VOCAB, "token 4",
                      "score");
    /* Truncated at every byte: inside max_token_length, an entry's header, or its bytes. */
    build_hand(&b);
    size_t full = b.n;
    for (size_t cut = 0; cut < full; cut++) {
        b.n = cut;
        EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("cut.bin", &b), HAND_VOCAB,
                          "truncated");
    }
    b.n = full;
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_load(write_builder("full.bin", &b), HAND_VOCAB, &t));
    TC_OK(acg_tokenizer_free(t));
    /* One byte too many. */
    put(&b, "x", 1);
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("extra.bin", &b), HAND_VOCAB,
                      "vocabulary size differs", "1 bytes");
    /* Not a tokenizer: text, a directory, a missing file. */
    b.n = 0;
    put(&b, "This is just some text.\n", 24);
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, write_builder("notes.txt", &b), HAND_VOCAB,
                      "max_token_length", "tokenizer");
    EXPECT_LOAD_FAILS(ERR_INVALID_ARGUMENT, tc_tmpdir(), HAND_VOCAB, "regular file");
    EXPECT_LOAD_FAILS(ERR_NOT_FOUND, tc_tmp_path("missing.bin"), HAND_VOCAB, "missing.bin");
}

/* One allocating tokenizer call for the sweep: a preset, a load, or an encode with t. */
typedef struct sweep_job {
    int which;
    const acg_tokenizer *t;
    const char *path;
} sweep_job;

static acg_status tokenizer_job(void *ctx) {
    const sweep_job *job = ctx;
    acg_tokenizer *u = NULL;
    int32_t ids[64];
    size_t n = 0;
    acg_status st = job->which == 0 ? acg_tokenizer_preset(512, &u)
                    : job->which == 1
                        ? acg_tokenizer_load(job->path, 512, &u)
                        : acg_tokenizer_encode(job->t, "hello", true, false, ids, 64, &n);
    assert_true(st == ACG_OK || u == NULL);
    acg_tokenizer_free(u);
    return st;
}

/* Every allocation of a preset, a load and an encode fails in turn: nothing leaks. */
static void test_alloc_failures(void **state) {
    (void)state;
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    const char *path = tc_tmp_path("alloc.bin");
    TC_OK(acg_tokenizer_save(t, path));
    char saved[600];
    snprintf(saved, sizeof saved, "%s", path);
    sweep_job jobs[] = {{0, NULL, saved}, {1, NULL, saved}, {2, t, saved}};
    for (int which = 0; which < 3; which++) {
        assert_true(tc_alloc_sweep(tokenizer_job, &jobs[which], false) > 0);
    }
    TC_OK(acg_tokenizer_free(t));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preset_tiny),     cmocka_unit_test(test_preset_small),
        cmocka_unit_test(test_preset_bad_size), cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_bos_eos),         cmocka_unit_test(test_merge_order),
        cmocka_unit_test(test_merge_tie),       cmocka_unit_test(test_cap_exhausted),
        cmocka_unit_test(test_misuse),          cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_malformed),       cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests_name("test_tokenizer", tests, setup, teardown);
}
