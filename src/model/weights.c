/* weights.c — llama2.c checkpoints: validation, memory-mapped loading, saving.
 *
 * A checkpoint is a header of 7 int32 and then fp32 tensors in a fixed order. Everything the
 * header implies is checked before a byte of tensor data is looked at: each field against its
 * range, the divisibility rules of attention, then every tensor's size in overflow-checked
 * 64-bit arithmetic, and finally the file's size against the exact total. A weights object
 * keeps the checkpoint's bytes (its "image": the file's mapping, or memory a preset generated)
 * and points its tensors into them, so saving writes the image back unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model-impl.h"

struct acg_model_weights {
    acg__life life; /* calls using it (handle.c) */
    acg_model_config config;
    acg_model_tensors tensors;
    const void *image; /* (image_size) the checkpoint's bytes, header included */
    size_t image_size;
    bool mapped; /* image is a file mapping, else memory from the allocator */
};

/* ---- files -------------------------------------------------------------------------------- */

acg_status acg__file_map(const char *path, const char *fn, const void **data, size_t *size) {
    /* Without O_NONBLOCK, opening a FIFO waits for a writer, before the regular-file check below
     * could refuse it; the flag is cleared once the file is known to be regular. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return acg__error(e == ENOENT ? ACG_ERR_NOT_FOUND : ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': cannot open: %s", fn, path, strerror(e));
    }
    acg_status st = ACG_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: '%s': cannot stat: %s", fn, path,
                        strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: '%s': not a regular file", fn, path);
        goto out_close;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: '%s': cannot clear O_NONBLOCK: %s", fn, path,
                        strerror(errno));
        goto out_close;
    }
    if (sb.st_size == 0) {
        *data = NULL;
        *size = 0;
        goto out_close;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        st = acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: '%s': %lld bytes do not fit in memory", fn,
                        path, (long long)sb.st_size);
        goto out_close;
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        st = acg__error(e == ENOMEM ? ACG_ERR_OUT_OF_MEMORY : ACG_ERR_INVALID_ARGUMENT,
                        "%s: '%s': cannot map %lld bytes: %s", fn, path, (long long)sb.st_size,
                        strerror(e));
        goto out_close;
    }
    *data = p;
    *size = (size_t)sb.st_size;
out_close:
    close(fd);
    return st;
}

void acg__file_unmap(const void *data, size_t size) {
    if (data != NULL) {
        munmap((void *)(uintptr_t)data, size);
    }
}

acg_status acg__file_write(const char *path, const char *fn, const void *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return acg__error(e == ENOENT ? ACG_ERR_NOT_FOUND : ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': cannot create: %s", fn, path, strerror(e));
    }
    int e = 0;
    const unsigned char *p = data;
    for (size_t left = size; left > 0;) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            e = w < 0 ? errno : EIO;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (close(fd) != 0 && e == 0) {
        e = errno;
    }
    if (e != 0) {
        bool full = e == ENOSPC || e == EDQUOT || e == EFBIG;
        return acg__error(full ? ACG_ERR_EXHAUSTED : ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': cannot write: %s", fn, path, strerror(e));
    }
    return ACG_OK;
}

acg_status acg__save_check(bool live, const void *obj, const char *what, const char *path,
                           const char *fn) {
    if (!live) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: %p is not a live %s", fn, obj, what);
    }
    ACG__TRY(acg__check_arg(path, "path", fn));
    return ACG_OK;
}

/* ---- the checkpoint layout ---------------------------------------------------------------- */

/* The header's fields, in file order, with their limits. */
enum { F_DIM, F_HIDDEN, F_LAYERS, F_HEADS, F_KV_HEADS, F_VOCAB, F_SEQ, F_COUNT };
static const char *const field_names[F_COUNT] = {
    "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len",
};

/* The tensors in file order, by their llama2.c names. */
enum {
    T_EMBEDDING,
    T_RMS_ATT,
    T_WQ,
    T_WK,
    T_WV,
    T_WO,
    T_RMS_FFN,
    T_W1,
    T_W2,
    T_W3,
    T_RMS_FINAL,
    T_FREQ_REAL,
    T_FREQ_IMAG,
    T_WCLS,
    T_COUNT
};
static const char *const tensor_names[T_COUNT] = {
    "token_embedding_table",
    "rms_att_weight",
    "wq",
    "wk",
    "wv",
    "wo",
    "rms_ffn_weight",
    "w1",
    "w2",
    "w3",
    "rms_final_weight",
    "freq_cis_real",
    "freq_cis_imag",
    "wcls",
};

/* a * b * c into *r; false on uint64 overflow. */
static bool mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *r) {
    if (b != 0 && a > UINT64_MAX / b) {
        return false;
    }
    uint64_t ab = a * b;
    if (c != 0 && ab > UINT64_MAX / c) {
        return false;
    }
    *r = ab * c;
    return true;
}

/* The number of floats of every tensor (wcls 0 when shared) and the file's total bytes. */
static acg_status layout(const acg_model_config *c, const char *fn, const char *name,
                         uint64_t floats[T_COUNT], uint64_t *total) {
    uint64_t dim = (uint64_t)c->dim, hidden = (uint64_t)c->hidden_dim;
    uint64_t layers = (uint64_t)c->n_layers, vocab = (uint64_t)c->vocab_size;
    uint64_t head_size = dim / (uint64_t)c->n_heads;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * head_size;
    const uint64_t dims[T_COUNT][3] = {
        [T_EMBEDDING] = {vocab, dim, 1},
        [T_RMS_ATT] = {layers, dim, 1},
        [T_WQ] = {layers, dim, dim},
        [T_WK] = {layers, kv_dim, dim},
        [T_WV] = {layers, kv_dim, dim},
        [T_WO] = {layers, dim, dim},
        [T_RMS_FFN] = {layers, dim, 1},
        [T_W1] = {layers, hidden, dim},
        [T_W2] = {layers, dim, hidden},
        [T_W3] = {layers, hidden, dim},
        [T_RMS_FINAL] = {dim, 1, 1},
        [T_FREQ_REAL] = {(uint64_t)c->seq_len, head_size / 2, 1},
        [T_FREQ_IMAG] = {(uint64_t)c->seq_len, head_size / 2, 1},
        [T_WCLS] = {c->shared_classifier ? 0 : vocab, dim, 1},
    };
    uint64_t sum = ACG__CHECKPOINT_HEADER_BYTES;
    for (int i = 0; i < T_COUNT; i++) {
        uint64_t bytes;
        if (!mul3(dims[i][0], dims[i][1], dims[i][2], &floats[i]) ||
            !mul3(floats[i], sizeof(float), 1, &bytes) || bytes > ACG_MODEL_MAX_BYTES ||
            sum + bytes > ACG_MODEL_MAX_BYTES) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': tensor %s (%llu x %llu x %llu floats) takes the "
                              "checkpoint's size past %llu bytes, expected at most that",
                              fn, name, tensor_names[i], (unsigned long long)dims[i][0],
                              (unsigned long long)dims[i][1], (unsigned long long)dims[i][2],
                              (unsigned long long)ACG_MODEL_MAX_BYTES);
        }
        sum += bytes;
    }
    *total = sum;
    return ACG_OK;
}

acg_status acg__model_config_check(const acg_model_config *c, const char *fn, const char *name,
                                   uint64_t *file_bytes) {
    const int32_t v[F_COUNT] = {c->dim,        c->hidden_dim, c->n_layers, c->n_heads,
                                c->n_kv_heads, c->vocab_size, c->seq_len};
    const int32_t hi[F_COUNT] = {
        ACG_MODEL_MAX_DIM, ACG_MODEL_MAX_HIDDEN_DIM, ACG_MODEL_MAX_LAYERS, c->dim,
        c->n_heads,        ACG_MODEL_MAX_VOCAB,      ACG_MODEL_MAX_SEQ_LEN};
    const int32_t lo[F_COUNT] = {1, 1, 1, 1, 1, 3, 1};
    for (int i = 0; i < F_COUNT; i++) {
        if (v[i] < lo[i] || v[i] > hi[i]) {
            const char *hint = i == F_HEADS      ? " (n_heads <= dim)"
                               : i == F_KV_HEADS ? " (n_kv_heads <= n_heads)"
                                                 : "";
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': field %s is %ld, expected %ld..%ld%s", fn, name,
                              field_names[i], (long)v[i], (long)lo[i], (long)hi[i], hint);
        }
    }
    if (c->dim % c->n_heads != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': field dim is %ld, expected a multiple of n_heads (%ld)", fn,
                          name, (long)c->dim, (long)c->n_heads);
    }
    if (c->n_heads % c->n_kv_heads != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': field n_kv_heads is %ld, expected a divisor of n_heads "
                          "(%ld)",
                          fn, name, (long)c->n_kv_heads, (long)c->n_heads);
    }
    if ((c->dim / c->n_heads) % 2 != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': head_size (dim %ld / n_heads %ld) is %ld, expected an even "
                          "number (RoPE rotates pairs)",
                          fn, name, (long)c->dim, (long)c->n_heads, (long)(c->dim / c->n_heads));
    }
    uint64_t floats[T_COUNT];
    return layout(c, fn, name, floats, file_bytes);
}

acg_status acg__model_weights_parse(const void *data, size_t size, const char *fn, const char *name,
                                    acg_model_config *config, acg_model_tensors *tensors) {
    if (size < ACG__CHECKPOINT_HEADER_BYTES) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': truncated in the header: the file has %zu bytes, expected "
                          "at least %d (7 int32: dim .. seq_len)",
                          fn, name, size, ACG__CHECKPOINT_HEADER_BYTES);
    }
    if ((uintptr_t)data % sizeof(float) != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: '%s': data is not 4-byte aligned", fn,
                          name);
    }
    int32_t h[F_COUNT];
    memcpy(h, data, sizeof h);
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.dim = h[F_DIM];
    c.hidden_dim = h[F_HIDDEN];
    c.n_layers = h[F_LAYERS];
    c.n_heads = h[F_HEADS];
    c.n_kv_heads = h[F_KV_HEADS];
    /* INT32_MIN has no positive counterpart; 0 stays out of range either way. */
    c.shared_classifier = h[F_VOCAB] > 0;
    c.vocab_size = h[F_VOCAB] == INT32_MIN ? 0 : h[F_VOCAB] < 0 ? -h[F_VOCAB] : h[F_VOCAB];
    c.seq_len = h[F_SEQ];
    uint64_t total = 0;
    acg_status st = acg__model_config_check(&c, fn, name, &total);
    if (st != ACG_OK) {
        /* A text or other file fails here; say what the header was taken to be. */
        char detail[1024];
        acg__error_copy(detail, sizeof detail);
        return acg__error(st,
                          "%s (header: %ld %ld %ld %ld %ld %ld %ld; is it a llama2.c "
                          "checkpoint?)",
                          detail, (long)h[0], (long)h[1], (long)h[2], (long)h[3], (long)h[4],
                          (long)h[5], (long)h[6]);
    }
    uint64_t floats[T_COUNT];
    ACG__TRY(layout(&c, fn, name, floats, &total));
    const float *p = (const float *)((const unsigned char *)data + ACG__CHECKPOINT_HEADER_BYTES);
    const float *at[T_COUNT];
    uint64_t end = ACG__CHECKPOINT_HEADER_BYTES;
    for (int i = 0; i < T_COUNT; i++) {
        end += floats[i] * sizeof(float);
        if (end > size) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: '%s': truncated in tensor %s: the file has %zu bytes, "
                              "expected %llu for this header",
                              fn, name, tensor_names[i], size, (unsigned long long)total);
        }
        at[i] = p;
        p += floats[i];
    }
    if (size != total) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: '%s': %llu trailing bytes: the file has %zu bytes, expected %llu "
                          "for this header (%s classifier)",
                          fn, name, (unsigned long long)(size - total), size,
                          (unsigned long long)total, c.shared_classifier ? "shared" : "separate");
    }
    acg_model_tensors t = {
        .token_embedding = at[T_EMBEDDING],
        .rms_att = at[T_RMS_ATT],
        .wq = at[T_WQ],
        .wk = at[T_WK],
        .wv = at[T_WV],
        .wo = at[T_WO],
        .rms_ffn = at[T_RMS_FFN],
        .w1 = at[T_W1],
        .w2 = at[T_W2],
        .w3 = at[T_W3],
        .rms_final = at[T_RMS_FINAL],
        .classifier = c.shared_classifier ? at[T_EMBEDDING] : at[T_WCLS],
    };
    *config = c;
    *tensors = t;
    return ACG_OK;
}

/* ---- weights objects ---------------------------------------------------------------------- */

static bool weights_live(const acg_model_weights *w) {
    return acg__handle_use(w, ACG__HANDLE_WEIGHTS);
}

/* A weights object around image; on failure nothing is taken. */
static acg_status weights_wrap(const void *image, size_t size, bool mapped, const char *fn,
                               const char *name, acg_model_weights **out) {
    acg_model_config c;
    acg_model_tensors t;
    ACG__TRY(acg__model_weights_parse(image, size, fn, name, &c, &t));
    acg_model_weights *w = acg__new(sizeof *w, fn);
    if (w == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    w->config = c;
    w->tensors = t;
    w->image = image;
    w->image_size = size;
    w->mapped = mapped;
    /* Last: a call holding a stale handle that this address matches must not see the weights
     * before they are whole (the registry's lock orders these writes before any lookup). */
    if (acg__handle_add(w, ACG__HANDLE_WEIGHTS, &w->life) != ACG_OK) {
        acg__free(w);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = w;
    return ACG_OK;
}

acg_status acg__model_weights_adopt(void *image, size_t size, const char *fn, const char *name,
                                    acg_model_weights **out) {
    return weights_wrap(image, size, false, fn, name, out);
}

acg_status acg_model_weights_load(const char *path, acg_model_weights **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_weights_load";
    ACG__TRY(acg__check_arg(path, "path", fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    const void *data = NULL;
    size_t size = 0;
    ACG__TRY(acg__file_map(path, fn, &data, &size));
    acg_status st = weights_wrap(data, size, true, fn, path, out);
    if (st != ACG_OK) {
        goto out_unmap;
    }
    return ACG_OK;
out_unmap:
    acg__file_unmap(data, size);
    return st;
}

acg_status acg_model_weights_save(const acg_model_weights *w, const char *path) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_model_weights_save";
    ACG__TRY(acg__save_check(weights_live(w), w, "weights object", path, fn));
    return acg__file_write(path, fn, w->image, w->image_size);
}

acg_status acg_model_weights_free(acg_model_weights *w) {
    /* Waits for other threads' calls on the weights (a model creation) to return. */
    ACG__DESTROY_BEGIN(w, ACG__HANDLE_WEIGHTS, "acg_model_weights_free", "weights object");
    if (w->mapped) {
        acg__file_unmap(w->image, w->image_size);
    } else {
        acg__free((void *)(uintptr_t)w->image);
    }
    acg__handle_remove(w);
    acg__free(w);
    return ACG_OK;
}

const acg_model_config *acg_model_weights_get_config(const acg_model_weights *w) {
    ACG__CALL_SCOPE;
    return weights_live(w) ? &w->config : NULL;
}

const acg_model_tensors *acg_model_weights_get_tensors(const acg_model_weights *w) {
    ACG__CALL_SCOPE;
    return weights_live(w) ? &w->tensors : NULL;
}
