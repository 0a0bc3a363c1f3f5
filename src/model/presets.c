/* presets.c — built-in models that need no download: seeded random weights and a generated
 * tokenizer of the preset's vocabulary size.
 *
 * Both are produced as the bytes of a llama2.c file and then handed to the same parser a file
 * goes through, so a preset and a checkpoint are one structure and saving a preset writes a
 * file the loaders accept.
 */
#include <string.h>

#include "model-impl.h"

/* ---- presets ------------------------------------------------------------------------------ */

typedef struct preset {
    const char *name;
    acg_model_config config;
} preset;

/* tiny's hidden_dim is llama2.c's rule: 2/3 of 4 * dim, rounded up to a multiple of 4.
 * The classifiers are separate: with random weights a tied one scores the current token far
 * above every other (its logit is the embedding's own square norm), and greedy decoding would
 * repeat it forever. */
static const preset presets[] = {
    {"tiny", {sizeof(acg_model_config), 64, 172, 2, 4, 2, 512, 256, false}},
    {"small", {sizeof(acg_model_config), 288, 768, 6, 6, 6, 32000, 256, false}},
};

static const preset *find_preset(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            return &presets[i];
        }
    }
    return NULL;
}

/* The preset named name, for fn, whose out-parameter is out: ACG_ERR_INVALID_ARGUMENT for a
 * NULL name, ACG_ERR_NOT_FOUND for an unknown one, then ACG_ERR_INVALID_ARGUMENT for a NULL
 * out. */
static acg_status preset_lookup(const char *name, const void *out, const char *fn,
                                const preset **p) {
    ACG__TRY(acg__check_arg(name, "name", fn));
    *p = find_preset(name);
    if (*p == NULL) {
        return acg__error(ACG_ERR_NOT_FOUND, "%s: no preset '%s' (presets: tiny, small)", fn, name);
    }
    ACG__TRY(acg__check_arg(out, "out", fn));
    return ACG_OK;
}

acg_status acg_model_preset_get_config(const char *name, acg_model_config *out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_preset_get_config";
    const preset *p = NULL;
    ACG__TRY(preset_lookup(name, out, fn, &p));
    return acg__output_write(out, &p->config, sizeof p->config, "acg_model_config", fn);
}

/* ---- random weights ----------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-scale, scale), exactly representable: 24 random bits, then a power-of-two scale,
 * so the values are the same on every machine. */
static float *fill_uniform(float *dst, uint64_t n, float scale, uint64_t *state) {
    for (uint64_t i = 0; i < n; i++) {
        float u = (float)(splitmix64(state) >> 40) * (1.0f / 8388608.0f) - 1.0f;
        dst[i] = u * scale;
    }
    return dst + n;
}

static float *fill_value(float *dst, uint64_t n, float v) {
    for (uint64_t i = 0; i < n; i++) {
        dst[i] = v;
    }
    return dst + n;
}

/* The largest power of two not above 1/sqrt(cols): keeps a matrix's outputs near the scale of
 * its inputs without a libm call, and scaling by it is exact. */
static float matrix_scale(int64_t cols) {
    float s = 1.0f;
    while ((double)cols * (double)s * (double)s > 1.0) {
        s *= 0.5f;
    }
    return s;
}

acg_status acg_model_weights_create_random(const acg_model_config *config, uint64_t seed,
                                           acg_model_weights **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_weights_create_random";
    ACG__TRY(acg__check_arg(config, "config", fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    const acg_model_config defaults = ACG_MODEL_CONFIG_INIT;
    acg_model_config c;
    acg_status st =
        acg__config_read(&c, sizeof c, &defaults, config,
                         offsetof(acg_model_config, shared_classifier), "acg_model_config", fn);
    if (st != ACG_OK) {
        return st;
    }
    uint64_t total = 0;
    ACG__TRY(acg__model_config_check(&c, fn, "config", &total));
    if (total > SIZE_MAX) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: %llu bytes do not fit in memory", fn,
                          (unsigned long long)total);
    }
    unsigned char *image = acg__alloc_aligned((size_t)total, 64);
    if (image == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu bytes", fn,
                          (unsigned long long)total);
    }
    const int32_t header[7] = {
        c.dim,     c.hidden_dim, c.n_layers,
        c.n_heads, c.n_kv_heads, c.shared_classifier ? c.vocab_size : -c.vocab_size,
        c.seq_len,
    };
    memcpy(image, header, sizeof header);
    const uint64_t dim = (uint64_t)c.dim, hidden = (uint64_t)c.hidden_dim;
    const uint64_t layers = (uint64_t)c.n_layers, vocab = (uint64_t)c.vocab_size;
    const uint64_t head_size = dim / (uint64_t)c.n_heads;
    const uint64_t kv_dim = (uint64_t)c.n_kv_heads * head_size;
    const float s_dim = matrix_scale(c.dim), s_hidden = matrix_scale(c.hidden_dim);
    uint64_t state = seed;
    float *p = (float *)(image + ACG__CHECKPOINT_HEADER_BYTES);
    /* In file order; the sizes were checked by acg__model_config_check. */
    p = fill_uniform(p, vocab * dim, 1.0f, &state);
    p = fill_value(p, layers * dim, 1.0f);
    p = fill_uniform(p, layers * dim * dim, s_dim, &state);
    p = fill_uniform(p, layers * kv_dim * dim, s_dim, &state);
    p = fill_uniform(p, layers * kv_dim * dim, s_dim, &state);
    p = fill_uniform(p, layers * dim * dim, s_dim, &state);
    p = fill_value(p, layers * dim, 1.0f);
    p = fill_uniform(p, layers * hidden * dim, s_dim, &state);
    p = fill_uniform(p, layers * dim * hidden, s_hidden, &state);
    p = fill_uniform(p, layers * hidden * dim, s_dim, &state);
    p = fill_value(p, dim, 1.0f);
    /* The legacy RoPE tables: nothing reads them. */
    p = fill_value(p, (uint64_t)c.seq_len * head_size, 0.0f);
    if (!c.shared_classifier) {
        p = fill_uniform(p, vocab * dim, 1.0f, &state);
    }
    (void)p;
    st = acg__model_weights_adopt(image, (size_t)total, fn, "config", out);
    if (st != ACG_OK) {
        goto out_free_image;
    }
    return ACG_OK;
out_free_image:
    acg__free(image);
    return st;
}

acg_status acg_model_preset_load(const char *name, uint64_t seed, acg_model_weights **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_preset_load";
    const preset *p = NULL;
    ACG__TRY(preset_lookup(name, out, fn, &p));
    return acg_model_weights_create_random(&p->config, seed, out);
}

/* ---- the generated tokenizer -------------------------------------------------------------- */

/* Longest generated piece. */
#define PIECE_MAX 16
/* Ids 0..2 and the 256 byte tokens. */
#define FIXED_PIECES 259

/* Frequent English words: their prefixes are the first pieces after the characters. */
static const char *const words[] = {
    "the",    "and",   "was",   "to",    "he",    "she",   "they",  "said",   "it",   "of",
    "in",     "you",   "that",  "with",  "his",   "her",   "for",   "on",     "is",   "had",
    "one",    "day",   "there", "were",  "what",  "when",  "big",   "little", "play", "happy",
    "friend", "saw",   "time",  "very",  "went",  "not",   "but",   "wanted", "mom",  "tree",
    "once",   "upon",  "named", "loved", "could", "would", "all",   "so",     "be",   "are",
    "have",   "from",  "this",  "at",    "we",    "can",   "see",   "like",   "good", "girl",
    "boy",    "dog",   "cat",   "sun",   "park",  "home",  "toy",   "ball",   "help", "look",
    "made",   "came",  "back",  "out",   "up",    "down",  "about", "into",   "your", "my",
    "an",     "as",    "by",    "do",    "if",    "me",    "no",    "or",     "our",  "them",
    "then",   "these", "some",  "other", "more",  "new",   "just",  "know",   "take", "people",
    "year",   "way",   "think", "also",  "after", "first", "well",  "even",   "want", "because",
    "any",    "give",  "most",  "us",    "ing",   "ed",    "er",    "ly",     "tion", "ment",
};

typedef struct piece_set {
    char (*text)[PIECE_MAX]; /* (cap) */
    uint8_t *length;         /* (cap) */
    uint32_t count, cap;
    uint32_t *slots; /* (n_slots) open addressing: piece index + 1, 0 when empty */
    uint32_t n_slots;
} piece_set;

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    }
    return h;
}

/* Adds the piece unless present or full; true when added. The fixed pieces are not in the set:
 * every one of them holds '<' or '\n', which no generated piece does. */
static bool set_add(piece_set *ps, const char *s, size_t n) {
    if (n == 0 || n > PIECE_MAX || ps->count == ps->cap) {
        return false;
    }
    uint32_t mask = ps->n_slots - 1;
    for (uint32_t h = hash_bytes(s, n) & mask;; h = (h + 1) & mask) {
        uint32_t slot = ps->slots[h];
        if (slot == 0) {
            memcpy(ps->text[ps->count], s, n);
            ps->length[ps->count] = (uint8_t)n;
            ps->slots[h] = ++ps->count;
            return true;
        }
        if (ps->length[slot - 1] == n && memcmp(ps->text[slot - 1], s, n) == 0) {
            return false;
        }
    }
}

/* Fills ps with cap generated pieces: characters, word prefixes, then joins of two earlier
 * pieces chosen by a fixed PRNG. */
static void generate_pieces(piece_set *ps) {
    for (int c = 0x20; c < 0x7f; c++) {
        if (c == '<') {
            continue; /* keeps "<unk>" and "<0xXX>" out of reach: '<' stays a byte token */
        }
        char ch = (char)c;
        set_add(ps, &ch, 1);
    }
    char buf[PIECE_MAX + 1];
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t n = strlen(words[w]);
        buf[0] = ' ';
        memcpy(buf + 1, words[w], n);
        for (size_t k = 2; k <= n + 1; k++) {
            set_add(ps, buf, k);
        }
        for (size_t k = 2; k <= n; k++) {
            set_add(ps, buf + 1, k);
        }
    }
    uint64_t state = 0x61636720746f6b73ull; /* fixed: the tokenizer depends on vocab_size only */
    while (ps->count < ps->cap) {
        uint32_t a = (uint32_t)(splitmix64(&state) % ps->count);
        uint32_t b = (uint32_t)(splitmix64(&state) % ps->count);
        size_t la = ps->length[a], lb = ps->length[b];
        if (la + lb > PIECE_MAX) {
            continue;
        }
        memcpy(buf, ps->text[a], la);
        memcpy(buf + la, ps->text[b], lb);
        set_add(ps, buf, la + lb);
    }
}

acg_status acg_tokenizer_preset(int32_t vocab_size, acg_tokenizer **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_tokenizer_preset";
    ACG__TRY(acg__check_arg(out, "out", fn));
    if (vocab_size < FIXED_PIECES || vocab_size > ACG_MODEL_MAX_VOCAB) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: vocab_size is %ld, expected %d..%d", fn,
                          (long)vocab_size, FIXED_PIECES, ACG_MODEL_MAX_VOCAB);
    }
    acg_status st = ACG_OK;
    piece_set ps = {0};
    ps.cap = (uint32_t)vocab_size - FIXED_PIECES;
    ps.n_slots = 64;
    while (ps.n_slots < 2 * ps.cap) {
        ps.n_slots *= 2;
    }
    ps.text = acg__calloc(ps.cap > 0 ? ps.cap : 1, sizeof *ps.text);
    ps.length = acg__calloc(ps.cap > 0 ? ps.cap : 1, sizeof *ps.length);
    ps.slots = acg__calloc(ps.n_slots, sizeof *ps.slots);
    unsigned char *image = NULL;
    if (ps.text == NULL || ps.length == NULL || ps.slots == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free_set;
    }
    generate_pieces(&ps);

    /* The image of a tokenizer.bin: the fixed pieces, then the generated ones by rank. */
    size_t size = sizeof(int32_t) + (size_t)vocab_size * (sizeof(float) + sizeof(int32_t));
    size += 5 + 5 + 6 + 256 * 6; /* "<unk>", "\n<s>\n", "\n</s>\n", "<0xXX>" */
    for (uint32_t i = 0; i < ps.count; i++) {
        size += ps.length[i];
    }
    image = acg__alloc(size);
    if (image == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", fn, size);
        goto out_free_set;
    }
    unsigned char *p = image;
    int32_t max_len = 6;
    for (uint32_t i = 0; i < ps.count; i++) {
        max_len = ps.length[i] > max_len ? ps.length[i] : max_len;
    }
    memcpy(p, &max_len, sizeof max_len);
    p += sizeof max_len;
    for (int32_t id = 0; id < vocab_size; id++) {
        char byte_piece[8];
        const char *s;
        int32_t len;
        float score = 0.0f;
        if (id < ACG_TOKEN_BYTE0) {
            static const char *const special[3] = {"<unk>", "\n<s>\n", "\n</s>\n"};
            s = special[id];
            len = (int32_t)strlen(s);
        } else if (id < FIXED_PIECES) {
            static const char hex[] = "0123456789ABCDEF";
            int b = id - ACG_TOKEN_BYTE0;
            memcpy(byte_piece, "<0x", 3);
            byte_piece[3] = hex[b >> 4];
            byte_piece[4] = hex[b & 15];
            byte_piece[5] = '>';
            s = byte_piece;
            len = 6;
        } else {
            uint32_t rank = (uint32_t)(id - FIXED_PIECES);
            s = ps.text[rank];
            len = ps.length[rank];
            score = -(float)rank;
        }
        memcpy(p, &score, sizeof score);
        memcpy(p + sizeof score, &len, sizeof len);
        memcpy(p + sizeof score + sizeof len, s, (size_t)len);
        p += sizeof score + sizeof len + (size_t)len;
    }
    st = acg__tokenizer_parse(image, size, vocab_size, fn, "preset", out);
    acg__free(image);
out_free_set:
    acg__free(ps.slots);
    acg__free(ps.length);
    acg__free(ps.text);
    return st;
}
