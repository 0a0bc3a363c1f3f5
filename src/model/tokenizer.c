/* tokenizer.c — llama2.c's tokenizer format and its byte-pair encoding, written afresh.
 *
 * A tokenizer holds every piece once, NUL-terminated, in one text arena, with its score, and
 * an index of the pieces sorted by their bytes for lookups by binary search. Encoding starts
 * from one token per UTF-8 character (byte tokens for characters the vocabulary lacks) and
 * merges the best-scoring adjacent pair until no pair joins into a piece of the vocabulary,
 * taking the pairs from a heap so that a long text costs O(n log n), not O(n^2).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

typedef struct piece_ref {
    const char *text;
    size_t length;
    int32_t id;
} piece_ref;

struct acg_tokenizer {
    acg__life life; /* calls using it (handle.c) */
    int32_t vocab_size;
    int32_t max_token_length; /* the longest piece */
    int32_t file_max_length;  /* the file's max_token_length, written back by save */
    float *scores;            /* (vocab_size) */
    size_t *offsets;          /* (vocab_size + 1) piece i is text[offsets[i] .. offsets[i+1] - 1) */
    char *text;               /* every piece followed by a NUL */
    piece_ref *sorted;        /* (vocab_size) by bytes, then by id */
    char bytes[256][2];       /* what each byte token decodes to */
};

static bool tokenizer_live(const acg_tokenizer *t) {
    return acg__handle_use(t, ACG__HANDLE_TOKENIZER);
}

static size_t piece_length(const acg_tokenizer *t, int32_t id) {
    return t->offsets[id + 1] - t->offsets[id] - 1;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static int compare_pieces(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    size_t n = x->length < y->length ? x->length : y->length;
    int c = n > 0 ? memcmp(x->text, y->text, n) : 0;
    if (c != 0) {
        return c;
    }
    if (x->length != y->length) {
        return x->length < y->length ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

static void tokenizer_destroy(acg_tokenizer *t) {
    acg__free(t->sorted);
    acg__free(t->text);
    acg__free(t->offsets);
    acg__free(t->scores);
    acg__handle_remove(t);
    acg__free(t);
}

acg_status acg__tokenizer_parse(const void *data, size_t size, int32_t vocab_size, const char *fn,
                                const char *name, acg_tokenizer **out) {
    if (vocab_size < 3 || vocab_size > ACG_MODEL_MAX_VOCAB) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: vocab_size is %ld, expected 3..%ld", fn,
                          (long)vocab_size, (long)ACG_MODEL_MAX_VOCAB);
    }
    const unsigned char *bytes = data;
    int32_t max_len;
    if (size < sizeof max_len) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': truncated in field max_token_length: the file has %zu bytes, "
                          "expected at least 4",
                          fn, name, size);
    }
    memcpy(&max_len, bytes, sizeof max_len);
    if (max_len < 1 || max_len > ACG_TOKENIZER_MAX_TOKEN_LENGTH) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': field max_token_length is %ld, expected 1..%d (is it a "
                          "llama2.c tokenizer?)",
                          fn, name, (long)max_len, ACG_TOKENIZER_MAX_TOKEN_LENGTH);
    }
    /* First pass: validate every entry and size the text arena, touching nothing else. */
    size_t pos = sizeof max_len, text_bytes = 0;
    int32_t actual_max = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        float score;
        int32_t len;
        if (size - pos < sizeof score + sizeof len) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': truncated at token %ld (fields score and length): the "
                              "file holds fewer than the model's %ld tokens",
                              fn, name, (long)i, (long)vocab_size);
        }
        memcpy(&score, bytes + pos, sizeof score);
        memcpy(&len, bytes + pos + sizeof score, sizeof len);
        pos += sizeof score + sizeof len;
        if (!isfinite(score)) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': token %ld: field score is not finite, expected a "
                              "finite float",
                              fn, name, (long)i);
        }
        if (len < 1 || len > max_len) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': token %ld: field length is %ld, expected "
                              "1..max_token_length (%ld)",
                              fn, name, (long)i, (long)len, (long)max_len);
        }
        if (size - pos < (size_t)len) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': truncated in token %ld's bytes (field length %ld): the "
                              "file has %zu bytes",
                              fn, name, (long)i, (long)len, size);
        }
        pos += (size_t)len;
        text_bytes += (size_t)len + 1;
        actual_max = len > actual_max ? len : actual_max;
    }
    if (pos != size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': vocabulary size differs from the model's (the file has more "
                          "than %ld tokens: %zu bytes after token %ld)",
                          fn, name, (long)vocab_size, size - pos, (long)(vocab_size - 1));
    }
    acg_status st = ACG_OK;
    acg_tokenizer *t = acg__new(sizeof *t, fn);
    if (t == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    t->scores = acg__calloc((size_t)vocab_size, sizeof *t->scores);
    t->offsets = acg__calloc((size_t)vocab_size + 1, sizeof *t->offsets);
    t->text = acg__alloc(text_bytes);
    t->sorted = acg__calloc((size_t)vocab_size, sizeof *t->sorted);
    if (t->scores == NULL || t->offsets == NULL || t->text == NULL || t->sorted == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %ld tokens", fn,
                        (long)vocab_size);
        goto out_destroy;
    }
    /* Second pass: copy what the first pass validated. */
    pos = sizeof max_len;
    size_t at = 0;
    for (int32_t i = 0; i < vocab_size; i++) {
        int32_t len;
        memcpy(&t->scores[i], bytes + pos, sizeof(float));
        memcpy(&len, bytes + pos + sizeof(float), sizeof len);
        pos += sizeof(float) + sizeof len;
        t->offsets[i] = at;
        memcpy(t->text + at, bytes + pos, (size_t)len);
        t->text[at + (size_t)len] = '\0';
        t->sorted[i] = (piece_ref){t->text + at, (size_t)len, i};
        pos += (size_t)len;
        at += (size_t)len + 1;
    }
    t->offsets[vocab_size] = at;
    qsort(t->sorted, (size_t)vocab_size, sizeof *t->sorted, compare_pieces);
    for (int b = 0; b < 256; b++) {
        t->bytes[b][0] = (char)b;
        t->bytes[b][1] = '\0';
    }
    /* The file's max_token_length is only an upper bound; merges need the real one. */
    t->max_token_length = actual_max;
    t->file_max_length = max_len;
    t->vocab_size = vocab_size;
    if (acg__handle_add(t, ACG__HANDLE_TOKENIZER, &t->life) != ACG_OK) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_destroy;
    }
    *out = t;
    return ACG_OK;
out_destroy:
    tokenizer_destroy(t);
    return st;
}

/* ---- load, save, free --------------------------------------------------------------------- */

acg_status acg_tokenizer_load(const char *path, int32_t vocab_size, acg_tokenizer **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_tokenizer_load";
    ACG__TRY(acg__check_arg(path, "path", fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    if (vocab_size < 3 || vocab_size > ACG_MODEL_MAX_VOCAB) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: vocab_size is %ld, expected 3..%ld", fn,
                          (long)vocab_size, (long)ACG_MODEL_MAX_VOCAB);
    }
    const void *data = NULL;
    size_t size = 0;
    ACG__TRY(acg__file_map(path, fn, &data, &size));
    acg_status st = acg__tokenizer_parse(data, size, vocab_size, fn, path, out);
    acg__file_unmap(data, size);
    return st;
}

acg_status acg_tokenizer_save(const acg_tokenizer *t, const char *path) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_tokenizer_save";
    ACG__TRY(acg__save_check(tokenizer_live(t), t, "tokenizer", path, fn));
    size_t n = (size_t)t->vocab_size;
    size_t size = sizeof(int32_t) + n * (sizeof(float) + sizeof(int32_t)) + t->offsets[n] - n;
    unsigned char *image = acg__alloc(size);
    if (image == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", fn, size);
    }
    unsigned char *p = image;
    memcpy(p, &t->file_max_length, sizeof(int32_t));
    p += sizeof(int32_t);
    for (int32_t i = 0; i < t->vocab_size; i++) {
        int32_t len = (int32_t)piece_length(t, i);
        memcpy(p, &t->scores[i], sizeof(float));
        memcpy(p + sizeof(float), &len, sizeof len);
        memcpy(p + sizeof(float) + sizeof len, t->text + t->offsets[i], (size_t)len);
        p += sizeof(float) + sizeof len + (size_t)len;
    }
    acg_status st = acg__file_write(path, fn, image, size);
    acg__free(image);
    return st;
}

acg_status acg_tokenizer_free(acg_tokenizer *t) {
    /* Waits for other threads' calls on the tokenizer (an encode) to return. */
    ACG__DESTROY_BEGIN(t, ACG__HANDLE_TOKENIZER, "acg_tokenizer_free", "tokenizer");
    tokenizer_destroy(t);
    return ACG_OK;
}

int32_t acg_tokenizer_get_vocab_size(const acg_tokenizer *t) {
    ACG__CALL_SCOPE;
    return tokenizer_live(t) ? t->vocab_size : 0;
}

/* ---- lookup, encode, decode --------------------------------------------------------------- */

/* The lowest id whose piece is exactly these bytes, or -1. */
static int32_t lookup(const acg_tokenizer *t, const char *s, size_t length) {
    piece_ref key = {s, length, -1};
    size_t lo = 0, hi = (size_t)t->vocab_size;
    /* Lower bound: id -1 sorts before every equal piece, so lo lands on the first of them. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_pieces(&t->sorted[mid], &key) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < (size_t)t->vocab_size && t->sorted[lo].length == length &&
        (length == 0 || memcmp(t->sorted[lo].text, s, length) == 0)) {
        return t->sorted[lo].id;
    }
    return -1;
}

int32_t acg_tokenizer_find(const acg_tokenizer *t, const char *piece, size_t length) {
    ACG__CALL_SCOPE;
    if (!tokenizer_live(t) || (piece == NULL && length > 0)) {
        return -1;
    }
    return lookup(t, piece, length);
}

/* The token standing for a byte no piece covers. */
static int32_t byte_token(const acg_tokenizer *t, unsigned char b) {
    int32_t id = ACG_TOKEN_BYTE0 + b;
    return id < t->vocab_size ? id : ACG_TOKEN_UNK;
}

/* ---- merging ------------------------------------------------------------------------------ */

/* Merging is llama2.c's: while any adjacent pair joins into a piece, merge the pair whose piece
 * scores highest, the leftmost on a tie. Rescanning every pair after each merge is quadratic in
 * the text, so the symbols form a linked list and the pairs that join wait in a binary heap
 * ordered as that scan chooses; a merge queues only the two pairs it creates. A queued pair goes
 * stale once either symbol merges elsewhere: it keeps the tokens both had, and is skipped when
 * they no longer match. */

#define NO_SYMBOL SIZE_MAX

/* Two adjacent symbols whose pieces join into piece id. */
typedef struct merge_pair {
    float score; /* id's */
    int32_t id;
    int32_t left_id, right_id; /* the symbols' tokens when the pair was queued */
    size_t left, right;        /* the symbols */
} merge_pair;

/* A symbol keeps the index of its first character while it grows, so index order is text
 * order. tok[i] is -1 once symbol i has merged into its left neighbour. */
typedef struct merge_state {
    const acg_tokenizer *t;
    int32_t *tok;     /* (count) each symbol's token */
    size_t *next;     /* (count) the next live symbol, or NO_SYMBOL */
    size_t *prev;     /* (count) the previous live symbol, or NO_SYMBOL */
    merge_pair *heap; /* (2 * count) a binary heap: count - 1 pairs at first, and a merge pops
                         one and queues at most two, so it never holds 2 * count */
    size_t heap_n;
    char *join; /* (2 * max_token_length) */
} merge_state;

/* Bytes of work memory per symbol. */
#define MERGE_BYTES_PER_SYMBOL (sizeof(int32_t) + 2 * sizeof(size_t) + 2 * sizeof(merge_pair))

/* Whether a merges before b: the higher score, then the leftmost (the scan keeps the first of
 * equal scores). */
static bool pair_before(const merge_pair *a, const merge_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(merge_state *m, merge_pair p) {
    size_t i = m->heap_n++;
    while (i > 0 && pair_before(&p, &m->heap[(i - 1) / 2])) {
        m->heap[i] = m->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->heap[i] = p;
}

static merge_pair heap_pop(merge_state *m) {
    merge_pair top = m->heap[0], last = m->heap[--m->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= m->heap_n) {
            break;
        }
        if (child + 1 < m->heap_n && pair_before(&m->heap[child + 1], &m->heap[child])) {
            child++;
        }
        if (!pair_before(&m->heap[child], &last)) {
            break;
        }
        m->heap[i] = m->heap[child];
        i = child;
    }
    m->heap[i] = last;
    return top;
}

/* Queues the adjacent symbols left and right when their pieces join into a piece. */
static void queue_pair(merge_state *m, size_t left, size_t right) {
    const acg_tokenizer *t = m->t;
    int32_t a = m->tok[left], b = m->tok[right];
    size_t la = piece_length(t, a), lb = piece_length(t, b);
    if (la + lb > (size_t)t->max_token_length) {
        return;
    }
    memcpy(m->join, t->text + t->offsets[a], la);
    memcpy(m->join + la, t->text + t->offsets[b], lb);
    int32_t id = lookup(t, m->join, la + lb);
    if (id >= 0) {
        heap_push(m, (merge_pair){t->scores[id], id, a, b, left, right});
    }
}

/* Merges the count symbols of m->tok and leaves the result at its start; gives its length. */
static size_t merge_pairs(merge_state *m, size_t count) {
    for (size_t i = 0; i < count; i++) {
        m->prev[i] = i > 0 ? i - 1 : NO_SYMBOL;
        m->next[i] = i + 1 < count ? i + 1 : NO_SYMBOL;
    }
    for (size_t i = 0; i + 1 < count; i++) {
        queue_pair(m, i, i + 1);
    }
    while (m->heap_n > 0) {
        merge_pair p = heap_pop(m);
        /* A merge makes a symbol's piece longer, so its token never comes back: equal tokens
         * mean neither symbol has merged since the pair was queued. */
        if (m->tok[p.left] != p.left_id || m->next[p.left] != p.right ||
            m->tok[p.right] != p.right_id) {
            continue;
        }
        size_t after = m->next[p.right];
        m->tok[p.left] = p.id;
        m->tok[p.right] = -1;
        m->next[p.left] = after;
        if (after != NO_SYMBOL) {
            m->prev[after] = p.left;
            queue_pair(m, p.left, after);
        }
        if (m->prev[p.left] != NO_SYMBOL) {
            queue_pair(m, m->prev[p.left], p.left);
        }
    }
    /* Symbol 0 never merges into a left neighbour: the list starts there. */
    size_t n = 0;
    for (size_t i = 0; count > 0 && i != NO_SYMBOL; i = m->next[i]) {
        m->tok[n++] = m->tok[i];
    }
    return n;
}

/* ---- encode ------------------------------------------------------------------------------- */

acg_status acg_tokenizer_encode(const acg_tokenizer *t, const char *text, bool bos, bool eos,
                                int32_t *ids, size_t cap, size_t *n) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_tokenizer_encode";
    if (!tokenizer_live(t)) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %p is not a live tokenizer", fn,
                          (const void *)t);
    }
    if (text == NULL || n == NULL || (ids == NULL && cap > 0)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                          text == NULL ? "text"
                          : n == NULL  ? "n"
                                       : "ids (with cap > 0)");
    }
    size_t len = strlen(text);
    if (len > SIZE_MAX / MERGE_BYTES_PER_SYMBOL - 3) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: text of %zu bytes is too long", fn, len);
    }
    /* A lower bound on the tokens: the pieces spell at least the dummy prefix and the text (a
     * byte token's piece, "<0x41>", is longer than its byte) and none is longer than
     * max_token_length. When even that many exceed cap, the work, which grows with the text, is
     * skipped. */
    size_t max_length = (size_t)t->max_token_length;
    size_t least =
        (bos ? 1u : 0u) + (eos ? 1u : 0u) + (len > 0 ? (len + max_length) / max_length : 0);
    if (least > cap) {
        return acg__error(ACG_ERR_EXHAUSTED,
                          "%s: the text encodes to at least %zu tokens (%zu bytes, pieces of at "
                          "most %zu), cap is %zu",
                          fn, least, len, max_length, cap);
    }
    acg_status st = ACG_OK;
    merge_state m = {.t = t};
    int32_t *tok = acg__alloc((len + 3) * sizeof *tok);
    if (tok == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tokens", fn, len + 3);
    }
    size_t count = 0;
    if (bos) {
        tok[count++] = ACG_TOKEN_BOS;
    }
    size_t first = count; /* BOS never merges */
    if (len > 0) {
        int32_t space = lookup(t, " ", 1);
        tok[count++] = space >= 0 ? space : byte_token(t, ' ');
    }
    /* One token per UTF-8 character: a lead byte and at most three continuation bytes. */
    for (size_t i = 0; i < len;) {
        size_t start = i++;
        while (i < len && i - start < 4 && ((unsigned char)text[i] & 0xC0) == 0x80) {
            i++;
        }
        int32_t id = lookup(t, text + start, i - start);
        if (id >= 0) {
            tok[count++] = id;
        } else {
            for (size_t k = start; k < i; k++) {
                tok[count++] = byte_token(t, (unsigned char)text[k]);
            }
        }
    }
    size_t symbols = count - first;
    if (symbols > 1) {
        m.join = acg__alloc(2 * max_length);
        m.heap = acg__calloc(2 * symbols, sizeof *m.heap);
        m.next = acg__calloc(symbols, sizeof *m.next);
        m.prev = acg__calloc(symbols, sizeof *m.prev);
        if (m.join == NULL || m.heap == NULL || m.next == NULL || m.prev == NULL) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tokens", fn, symbols);
            goto out_free;
        }
        m.tok = tok + first;
        count = first + merge_pairs(&m, symbols);
    }
    if (eos) {
        tok[count++] = ACG_TOKEN_EOS;
    }
    if (count > cap) {
        st = acg__error(ACG_ERR_EXHAUSTED, "%s: the text encodes to %zu tokens, cap is %zu", fn,
                        count, cap);
        goto out_free;
    }
    if (count > 0) {
        memcpy(ids, tok, count * sizeof *tok);
    }
    *n = count;
out_free:
    acg__free(m.prev);
    acg__free(m.next);
    acg__free(m.heap);
    acg__free(m.join);
    acg__free(tok);
    return st;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

const char *acg_tokenizer_decode(const acg_tokenizer *t, int32_t prev_token, int32_t token) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_tokenizer_decode";
    if (!tokenizer_live(t)) {
        acg__error(ACG_ERR_INVALID_HANDLE, "%s: %p is not a live tokenizer", fn, (const void *)t);
        return NULL;
    }
    if (token < 0 || token >= t->vocab_size) {
        acg__error(ACG_ERR_OUT_OF_RANGE, "%s: token %ld, expected 0..%ld", fn, (long)token,
                   (long)(t->vocab_size - 1));
        return NULL;
    }
    const char *piece = t->text + t->offsets[token];
    if (piece_length(t, token) == 6 && memcmp(piece, "<0x", 3) == 0 && piece[5] == '>') {
        int hi = hex_value(piece[3]), lo = hex_value(piece[4]);
        if (hi >= 0 && lo >= 0) {
            piece = t->bytes[hi * 16 + lo];
        }
    }
    if (prev_token == ACG_TOKEN_BOS && piece[0] == ' ') {
        piece++;
    }
    return piece;
}
