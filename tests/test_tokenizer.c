/* test_tokenizer.c — llama2.c tokenizers: the generated preset vocabulary, encode/decode round
 * trips, a hand-built vocabulary whose merge order is checkable, encoding compared token for token
 * with a plain reference (llama2.c's quadratic loop), every malformed file, and the cleanup of
 * every failure (counting allocator). */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <acg/model.h>

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

/* acg_tokenizer_load as a tc_loader: arg points at the vocabulary's size. */
static acg_status load_tokenizer(const char *path, const void *arg, void **out) {
    acg_tokenizer *t = *out;
    acg_status st = acg_tokenizer_load(path, *(const int32_t *)arg, &t);
    *out = t;
    return st;
}

/* Loading path as vocab_size tokens fails with want; the message names the file and every
 * needle; nothing leaks. */
#define EXPECT_LOAD_FAILS(want, path, vocab, ...)                                                  \
    tc_expect_load_fails_(ACG_##want, load_tokenizer, "acg_tokenizer_load",                        \
                          &(const int32_t){(vocab)}, (path), __FILE__, __LINE__, __VA_ARGS__,      \
                          NULL)

/* A case on the preset tokenizer of 512 tokens, which the setup makes (the case's state) and the
 * teardown frees. */
static int preset_setup(void **state) {
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    *state = t;
    return 0;
}

static int preset_teardown(void **state) {
    TC_OK(acg_tokenizer_free(*state));
    return 0;
}

#define PRESET_CASE(test) cmocka_unit_test_setup_teardown(test, preset_setup, preset_teardown)

/* Encodes text (asserting success) into ids; returns the count. */
static size_t encode(const acg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *ids,
                     size_t cap) {
    size_t n = 0;
    TC_OK(acg_tokenizer_encode(t, text, bos, eos, ids, cap, &n));
    return n;
}

/* text encodes (BOS and EOS as asked) to exactly the ids that follow. */
#define EXPECT_IDS(t, text, bos, eos, ...)                                                         \
    expect_ids((t), (text), (bos), (eos), (const int32_t[]){__VA_ARGS__},                          \
               sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
static void expect_ids(const acg_tokenizer *t, const char *text, bool bos, bool eos,
                       const int32_t *want, size_t n) {
    int32_t ids[64];
    assert_int_equal(encode(t, text, bos, eos, ids, 64), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ids[i], want[i]);
    }
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
    EXPECT_IDS(t, "hi", false, false, ACG_TOKEN_BYTE0 + ' ', ACG_TOKEN_BYTE0 + 'h',
               ACG_TOKEN_BYTE0 + 'i');
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
    acg_tokenizer *t = *state;
    int32_t ids[64];
    assert_int_equal(encode(t, "", false, false, ids, 64), 0);
    EXPECT_IDS(t, "", true, true, ACG_TOKEN_BOS, ACG_TOKEN_EOS);
    /* " the" is a preset piece: prefix and word merge into it. */
    const int32_t the = acg_tokenizer_find(t, " the", 4);
    EXPECT_IDS(t, "the", true, true, ACG_TOKEN_BOS, the, ACG_TOKEN_EOS);
    assert_string_equal(acg_tokenizer_decode(t, ACG_TOKEN_BOS, the), "the");
    assert_string_equal(acg_tokenizer_decode(t, 7, the), " the");
    EXPECT_IDS(t, "the", false, false, the);
}

/* The hand-built vocabulary: the best-scoring pair merges first. */
static void test_merge_order(void **state) {
    (void)state;
    file_builder b;
    build_hand(&b);
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_load(write_builder("hand.bin", &b), HAND_VOCAB, &t));
    /* [" ", a, b, c]: bc (5) beats " a" (3) and ab (1); then " a" (3) beats abc (0.5); then
     * " a" + bc join into " abc". */
    EXPECT_IDS(t, "abc", false, false, T_SPACE_ABC);
    /* [" ", a, b, a, b]: " a" first, then the remaining ab; "ba" and " ab" are no pieces. */
    EXPECT_IDS(t, "abab", false, false, T_SPACE_A, T_B, T_AB);
    /* [" ", c, a, b]: " c" is no piece, ab (1) merges; "cab" is none. */
    EXPECT_IDS(t, "cab", false, false, T_SPACE, T_C, T_AB);
    /* A byte without a token, and no byte tokens: <unk>. */
    EXPECT_IDS(t, "z", true, true, ACG_TOKEN_BOS, T_SPACE, ACG_TOKEN_UNK, ACG_TOKEN_EOS);
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
    /* [" ", x, x]: " x" and xx both score 2; the leftmost, " x", merges. */
    EXPECT_IDS(t, "xx", false, false, 6, 4);
    TC_OK(acg_tokenizer_free(t));
}

/* More ids than cap: ACG_ERR_EXHAUSTED, saying how many, n untouched. */
static void test_cap_exhausted(void **state) {
    acg_tokenizer *t = *state;
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
}

/* ---- a plain reference encoder ------------------------------------------------------------ */

/* A vocabulary read back from a tokenizer file by the test itself, so the reference shares no
 * code with the library. */
typedef struct ref_vocab {
    int32_t n;
    char **pieces;   /* (n) the raw pieces, NUL-terminated */
    size_t *lengths; /* (n) */
    float *scores;   /* (n) */
    int32_t *order;  /* (n) ids sorted by piece bytes, then by id */
} ref_vocab;

static int ref_compare_bytes(const char *a, size_t la, const char *b, size_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c != 0 ? c : (la > lb) - (la < lb);
}

static const ref_vocab *ref_sorting; /* qsort's comparator has no context argument */

static int ref_compare_ids(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    int c = ref_compare_bytes(ref_sorting->pieces[a], ref_sorting->lengths[a],
                              ref_sorting->pieces[b], ref_sorting->lengths[b]);
    return c != 0 ? c : (a > b) - (a < b);
}

/* Reads a tokenizer file of n entries. */
static void ref_load(const char *path, int32_t n, ref_vocab *v) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    unsigned char *bytes = malloc((size_t)size);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    v->n = n;
    v->pieces = calloc((size_t)n, sizeof *v->pieces);
    v->lengths = calloc((size_t)n, sizeof *v->lengths);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->order = calloc((size_t)n, sizeof *v->order);
    assert_true(v->pieces && v->lengths && v->scores && v->order);
    size_t pos = 4;
    for (int32_t i = 0; i < n; i++) {
        int32_t len;
        assert_true(pos + 8 <= (size_t)size);
        memcpy(&v->scores[i], bytes + pos, 4);
        memcpy(&len, bytes + pos + 4, 4);
        pos += 8;
        assert_true(len > 0 && pos + (size_t)len <= (size_t)size);
        v->lengths[i] = (size_t)len;
        v->pieces[i] = malloc((size_t)len + 1);
        assert_non_null(v->pieces[i]);
        memcpy(v->pieces[i], bytes + pos, (size_t)len);
        v->pieces[i][len] = '\0';
        pos += (size_t)len;
        v->order[i] = i;
    }
    assert_int_equal(pos, (size_t)size);
    free(bytes);
    ref_sorting = v;
    qsort(v->order, (size_t)n, sizeof *v->order, ref_compare_ids);
}

static void ref_free(ref_vocab *v) {
    for (int32_t i = 0; i < v->n; i++) {
        free(v->pieces[i]);
    }
    free(v->pieces);
    free(v->lengths);
    free(v->scores);
    free(v->order);
}

/* The lowest id of exactly these bytes, or -1. */
static int32_t ref_find(const ref_vocab *v, const char *s, size_t length) {
    size_t lo = 0, hi = (size_t)v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int32_t id = v->order[mid];
        if (ref_compare_bytes(v->pieces[id], v->lengths[id], s, length) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < (size_t)v->n) {
        int32_t id = v->order[lo];
        if (ref_compare_bytes(v->pieces[id], v->lengths[id], s, length) == 0) {
            return id;
        }
    }
    return -1;
}

static int32_t ref_byte(const ref_vocab *v, unsigned char b) {
    return ACG_TOKEN_BYTE0 + b < v->n ? ACG_TOKEN_BYTE0 + b : ACG_TOKEN_UNK;
}

/* llama2.c's encoding, as the header describes it: one token per UTF-8 character (byte tokens
 * when the vocabulary lacks it), then, over and over, a scan of every adjacent pair for the
 * best-scoring join (the first one found wins a tie) and one merge. tok holds strlen + 3. */
static size_t ref_encode(const ref_vocab *v, const char *text, bool bos, bool eos, int32_t *tok) {
    size_t len = strlen(text), n = 0;
    if (bos) {
        tok[n++] = ACG_TOKEN_BOS;
    }
    size_t first = n;
    if (len > 0) {
        int32_t space = ref_find(v, " ", 1);
        tok[n++] = space >= 0 ? space : ref_byte(v, ' ');
    }
    for (size_t i = 0; i < len;) {
        size_t start = i++;
        while (i < len && i - start < 4 && ((unsigned char)text[i] & 0xC0) == 0x80) {
            i++;
        }
        int32_t id = ref_find(v, text + start, i - start);
        if (id >= 0) {
            tok[n++] = id;
        } else {
            for (size_t k = start; k < i; k++) {
                tok[n++] = ref_byte(v, (unsigned char)text[k]);
            }
        }
    }
    static char join[2 * ACG_TOKENIZER_MAX_TOKEN_LENGTH];
    for (;;) {
        size_t best_at = 0;
        int32_t best_id = -1;
        float best_score = 0.0f;
        for (size_t i = first; i + 1 < n; i++) {
            size_t la = v->lengths[tok[i]], lb = v->lengths[tok[i + 1]];
            memcpy(join, v->pieces[tok[i]], la);
            memcpy(join + la, v->pieces[tok[i + 1]], lb);
            int32_t id = ref_find(v, join, la + lb);
            if (id >= 0 && (best_id < 0 || v->scores[id] > best_score)) {
                best_at = i;
                best_id = id;
                best_score = v->scores[id];
            }
        }
        if (best_id < 0) {
            break;
        }
        tok[best_at] = best_id;
        memmove(&tok[best_at + 1], &tok[best_at + 2], (n - best_at - 2) * sizeof *tok);
        n--;
    }
    if (eos) {
        tok[n++] = ACG_TOKEN_EOS;
    }
    return n;
}

/* The library's encoding of text equals the reference's, token for token. */
static void assert_encodes_as_reference(const acg_tokenizer *t, const ref_vocab *v,
                                        const char *text) {
    size_t len = strlen(text);
    int32_t *want = malloc((len + 3) * sizeof *want), *got = malloc((len + 3) * sizeof *got);
    assert_true(want != NULL && got != NULL);
    bool bos = len % 2 == 0, eos = len % 3 == 0;
    size_t n_want = ref_encode(v, text, bos, eos, want);
    size_t n_got = encode(t, text, bos, eos, got, len + 3);
    size_t k = 0;
    while (k < n_want && k < n_got && want[k] == got[k]) {
        k++;
    }
    if (k < n_want || k < n_got) {
        print_error("text of %zu bytes: %zu tokens, the reference %zu; token %zu is %ld, the "
                    "reference's %ld\n",
                    len, n_got, n_want, k, k < n_got ? (long)got[k] : -1L,
                    k < n_want ? (long)want[k] : -1L);
        fail();
    }
    free(want);
    free(got);
}

/* A deterministic stream of numbers (splitmix64). */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The units random pieces and texts are made of: ASCII, whole UTF-8 characters of 2, 3 and 4
 * bytes, a lone lead byte, a stray continuation byte, '<' (byte tokens' pieces start with it). */
static const char *const units[] = {
    "a", "b", " ", "x", "<", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xc3", "\x80",
};
#define N_UNITS (sizeof units / sizeof units[0])

/* Appends k random units (of the first n_units) to buf (holding at least cap bytes). */
static void append_units(char *buf, size_t cap, uint64_t *rng, size_t n_units, size_t k) {
    size_t len = strlen(buf);
    for (size_t i = 0; i < k; i++) {
        const char *u = units[next_random(rng) % n_units];
        size_t lu = strlen(u);
        if (len + lu + 1 > cap) {
            break;
        }
        memcpy(buf + len, u, lu + 1);
        len += lu;
    }
}

/* Writes a random vocabulary of n tokens to name: <unk>, <s>, </s>, the byte tokens when
 * with_bytes, every unit, then joins of 2..6 units (repeats included, so some pieces are
 * duplicates). Scores come from n_scores values, so ties are everywhere when it is small. */
static const char *write_random_vocab(const char *name, int32_t n, bool with_bytes,
                                      uint32_t n_scores, uint64_t seed) {
    const char *path = tc_tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    int32_t max_len = 32;
    assert_int_equal(fwrite(&max_len, 4, 1, f), 1);
    uint64_t rng = seed;
    for (int32_t i = 0; i < n; i++) {
        char piece[64] = "";
        int32_t unit = i - 3 - (with_bytes ? 256 : 0);
        if (i == 0) {
            strcpy(piece, "<unk>");
        } else if (i < 3) {
            strcpy(piece, i == 1 ? "\n<s>\n" : "\n</s>\n");
        } else if (with_bytes && i < 259) {
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        } else if (unit < (int32_t)N_UNITS) {
            strcpy(piece, units[unit]);
        } else {
            append_units(piece, (size_t)max_len + 1, &rng, N_UNITS, 2 + next_random(&rng) % 5);
        }
        float score = (float)(next_random(&rng) % n_scores) - (float)(n_scores / 2);
        int32_t len = (int32_t)strlen(piece);
        assert_int_equal(fwrite(&score, 4, 1, f), 1);
        assert_int_equal(fwrite(&len, 4, 1, f), 1);
        assert_int_equal(fwrite(piece, 1, (size_t)len, f), (size_t)len);
    }
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Compares the library with the reference on t's vocabulary (saved to a file and read back by
 * ref_load): random texts of every unit and of a few units (so the vocabulary's pieces match
 * often), and adversarial ones: long runs of one unit, alternations, bytes without tokens. */
static void compare_with_reference(const acg_tokenizer *t, uint64_t seed) {
    char path[600];
    snprintf(path, sizeof path, "%s", tc_tmp_path("reference.bin"));
    TC_OK(acg_tokenizer_save(t, path));
    ref_vocab v;
    ref_load(path, acg_tokenizer_get_vocab_size(t), &v);
    uint64_t rng = seed;
    static char text[4096];
    for (int i = 0; i < 300; i++) {
        text[0] = '\0';
        size_t n_units = i % 3 == 0 ? N_UNITS : 2 + next_random(&rng) % 3;
        append_units(text, 600, &rng, n_units, next_random(&rng) % 200);
        assert_encodes_as_reference(t, &v, text);
    }
    static const char *const runs[] = {
        "a",    "ab",   " ",      "  a",  "\xc3\xa9", "\xe6\x97\xa5",         "\xf0\x9f\x98\x80",
        "\xff", "\x01", "<0x41>", "the ", "\xc3",     "\x80\x80\x80\x80\x80",
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        size_t lr = strlen(runs[r]), len = 0;
        while (len + lr < 1200) {
            memcpy(text + len, runs[r], lr);
            len += lr;
        }
        text[len] = '\0';
        assert_encodes_as_reference(t, &v, text);
    }
    ref_free(&v);
}

/* Encoding equals the plain reference on the presets, on random vocabularies with and without
 * byte tokens, and on one whose scores all tie (the leftmost pair must win every time). */
static void test_reference_presets(void **state) {
    (void)state;
    for (int p = 0; p < 2; p++) {
        acg_tokenizer *t = NULL;
        TC_OK(acg_tokenizer_preset(p == 0 ? 512 : 32000, &t));
        compare_with_reference(t, 11 + (uint64_t)p);
        TC_OK(acg_tokenizer_free(t));
    }
}

static void test_reference_random(void **state) {
    (void)state;
    static const struct {
        int32_t n;
        bool with_bytes;
        uint32_t n_scores;
    } vocabs[] = {{600, true, 7}, {60, false, 5}, {400, true, 1}, {30, false, 1}, {2000, true, 50}};
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        const char *path = write_random_vocab("random.bin", vocabs[i].n, vocabs[i].with_bytes,
                                              vocabs[i].n_scores, 100 + i);
        acg_tokenizer *t = NULL;
        TC_OK(acg_tokenizer_load(path, vocabs[i].n, &t));
        compare_with_reference(t, 200 + i);
        TC_OK(acg_tokenizer_free(t));
    }
}

/* A prompt of 100 KB encodes (too long for the quadratic reference: checked instead by what
 * any correct result satisfies): its tokens decode back to the text, and no two adjacent ones
 * join into a piece of the vocabulary, since encoding only stops when none do. */
static void test_long_prompt(void **state) {
    (void)state;
    static const char sentence[] = "Once upon a time, a little girl named \xc3\x89lise saw "
                                   "\xe6\x97\xa5 and \xff\x01 in the park.  ";
    size_t len = 100 * 1024;
    char *text = malloc(len + 1);
    char *back = malloc(len + 1);
    int32_t *ids = malloc((len + 3) * sizeof *ids);
    assert_true(text != NULL && back != NULL && ids != NULL);
    for (size_t i = 0; i < len; i++) {
        text[i] = sentence[i % (sizeof sentence - 1)];
    }
    text[len] = '\0';
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(32000, &t));
    char path[600];
    snprintf(path, sizeof path, "%s", tc_tmp_path("long.bin"));
    TC_OK(acg_tokenizer_save(t, path));
    ref_vocab v;
    ref_load(path, 32000, &v);
    size_t n = encode(t, text, true, false, ids, len + 3);
    assert_true(n > 1 && n < len / 2);
    size_t at = 0;
    for (size_t i = 1; i < n; i++) {
        const char *piece = acg_tokenizer_decode(t, ids[i - 1], ids[i]);
        assert_non_null(piece);
        size_t k = strlen(piece);
        assert_true(at + k <= len);
        memcpy(back + at, piece, k);
        at += k;
        if (i + 1 < n) {
            char join[2 * ACG_TOKENIZER_MAX_TOKEN_LENGTH];
            size_t la = v.lengths[ids[i]], lb = v.lengths[ids[i + 1]];
            memcpy(join, v.pieces[ids[i]], la);
            memcpy(join + la, v.pieces[ids[i + 1]], lb);
            assert_int_equal(ref_find(&v, join, la + lb), -1);
        }
    }
    assert_int_equal(at, len);
    assert_memory_equal(back, text, len);
    ref_free(&v);
    TC_OK(acg_tokenizer_free(t));
    free(ids);
    free(back);
    free(text);
}

/* Every piece is at most max_token_length bytes, so a text of len bytes needs at least
 * (len + 1) / max_token_length tokens (rounded up; + 1 for the dummy prefix): when even that many
 * exceed cap, encoding is refused before it allocates anything. The bound is exact for a text
 * that merges into pieces of the longest length, which must still fit. */
static void test_cap_bound(void **state) {
    acg_tokenizer *t = *state;
    size_t len = 100 * 1024;
    char *text = malloc(len + 1);
    assert_non_null(text);
    memset(text, 'e', len);
    text[len] = '\0';
    int32_t ids[256];
    size_t n = 12345;
    uint64_t allocations = tc_alloc_count();
    TC_EXPECT(ERR_EXHAUSTED, acg_tokenizer_encode(t, text, true, false, ids, 256, &n));
    assert_int_equal(tc_alloc_count(), allocations);
    TC_LAST_ERROR_HAS("at least");
    TC_LAST_ERROR_HAS("cap is 256");
    assert_int_equal(n, 12345);
    free(text);

    /* The hand-built vocabulary's longest piece is " abc" (4 bytes): "abc" is 1 token. */
    file_builder b;
    build_hand(&b);
    acg_tokenizer *hand = NULL;
    TC_OK(acg_tokenizer_load(write_builder("hand.bin", &b), HAND_VOCAB, &hand));
    assert_int_equal(encode(hand, "abc", true, true, ids, 3), 3);
    TC_EXPECT(ERR_EXHAUSTED, acg_tokenizer_encode(hand, "abc", true, true, ids, 2, &n));
    /* [" ", a, b, c, a, b, c] merges into [" abc", "abc"]: 7 bytes in 2 pieces of at most 4. */
    assert_int_equal(encode(hand, "abcabc", false, false, ids, 2), 2);
    TC_EXPECT(ERR_EXHAUSTED, acg_tokenizer_encode(hand, "abcabc", false, false, ids, 1, &n));
    TC_OK(acg_tokenizer_free(hand));
}

/* A FIFO with no writer is refused at once as not a regular file: opening it must not wait for
 * a writer that never comes. */
static void test_fifo(void **state) {
    (void)state;
    tc_expect_fifo_refused(load_tokenizer, "acg_tokenizer_load", &(const int32_t){HAND_VOCAB},
                           "tokenizer.fifo");
}

/* Misuse: NULL and foreign tokenizers, bad tokens, NULL arguments. */
static void test_misuse(void **state) {
    acg_tokenizer *t = *state;
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

    assert_null(acg_tokenizer_decode(t, 0, 512));
    TC_LAST_ERROR_HAS("512");
    assert_null(acg_tokenizer_decode(t, 0, -1));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, NULL, false, false, ids, 4, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, "a", false, false, ids, 4, NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_encode(t, "a", false, false, NULL, 4, &n));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_save(t, NULL));
    TC_EXPECT(ERR_NOT_FOUND, acg_tokenizer_save(t, tc_tmp_path("no/such/tok.bin")));
    acg_tokenizer *loaded = NULL;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(NULL, 512, &loaded));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(tc_tmp_path("x"), 512, NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_tokenizer_load(tc_tmp_path("x"), 2, &loaded));
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
    acg_tokenizer *t = *state;
    const char *path = tc_tmp_path("alloc.bin");
    TC_OK(acg_tokenizer_save(t, path));
    char saved[600];
    snprintf(saved, sizeof saved, "%s", path);
    sweep_job jobs[] = {{0, NULL, saved}, {1, NULL, saved}, {2, t, saved}};
    for (int which = 0; which < 3; which++) {
        assert_true(tc_alloc_sweep(tokenizer_job, &jobs[which], false) > 0);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_preset_tiny),
    cmocka_unit_test(test_preset_small),
    cmocka_unit_test(test_preset_bad_size),
    cmocka_unit_test(test_round_trips),
    PRESET_CASE(test_bos_eos),
    cmocka_unit_test(test_merge_order),
    cmocka_unit_test(test_merge_tie),
    PRESET_CASE(test_cap_exhausted),
    PRESET_CASE(test_misuse),
    cmocka_unit_test(test_save_load),
    cmocka_unit_test(test_malformed),
    PRESET_CASE(test_alloc_failures),
    cmocka_unit_test(test_reference_presets),
    cmocka_unit_test(test_reference_random),
    cmocka_unit_test(test_long_prompt),
    PRESET_CASE(test_cap_bound),
    cmocka_unit_test(test_fifo),
};
TC_HOST_FILES_MAIN("test_tokenizer", "acg-tokenizer", tests)
