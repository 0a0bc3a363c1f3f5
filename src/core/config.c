/* config.c — reading the caller's config structs and writing its output structs, whatever
 * version of the headers the caller was compiled against.
 *
 * Every such struct begins with `size_t size`, so a field appended later changes sizeof and the
 * library can tell which version it was given. A config from an older caller is shorter: the
 * fields it lacks take the defaults of the struct's _INIT macro. A config from a newer caller is
 * longer: it is accepted only when the fields this library does not know are all zero, which is
 * what their defaults must be, so a newer caller that sets none of them behaves the same here.
 * An output struct is written no further than the caller's size.
 *
 * One rule keeps this sound: a field is only ever appended, and where the old sizeof ended in
 * padding the new field starts past that padding (add an explicit reserved member first), so
 * an old caller's size never covers bytes that a newer field would give a meaning to.
 */
#include <string.h>

#include "core/acg-impl.h"

/* Larger than any config struct will ever be: a size past it was never set (stack garbage),
 * and reading that far to check for zeros could leave the caller's memory. */
#define CONFIG_SIZE_LIMIT 4096u

acg_status acg__config_read(void *dst, size_t dst_size, const void *defaults, const void *src,
                            size_t min_size, const char *what, const char *fn) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < min_size || size > CONFIG_SIZE_LIMIT) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: %s.size is %zu; it must be sizeof(%s) (%zu here), or at least "
                          "%zu (the fields that have no default) from an older caller",
                          fn, what, size, what, dst_size, min_size);
    }
    const unsigned char *bytes = src;
    for (size_t i = dst_size; i < size; i++) {
        if (bytes[i] != 0) {
            return acg__error(ACG_ERR_INVALID_ARGUMENT,
                              "%s: %s.size is %zu but sizeof(%s) is %zu in this library, and "
                              "byte %zu is not zero: a newer caller set a field this library "
                              "does not have",
                              fn, what, size, what, dst_size, i);
        }
    }
    memcpy(dst, defaults, dst_size);
    memcpy(dst, src, size < dst_size ? size : dst_size);
    /* The copy is whole now: code that keeps or forwards it sees this library's struct. */
    memcpy(dst, &dst_size, sizeof dst_size);
    return ACG_OK;
}

acg_status acg__output_check(const void *dst, size_t src_size, const char *what, const char *fn) {
    ACG__TRY(acg__check_arg(dst, "out", fn));
    size_t size;
    memcpy(&size, dst, sizeof size);
    if (size <= sizeof size) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: out->size is %zu; set it to sizeof(%s) (%zu) before the call "
                          "(the _INIT macro does)",
                          fn, size, what, src_size);
    }
    return ACG_OK;
}

acg_status acg__output_write(void *dst, const void *src, size_t src_size, const char *what,
                             const char *fn) {
    ACG__TRY(acg__output_check(dst, src_size, what, fn));
    size_t size;
    memcpy(&size, dst, sizeof size);
    size_t n = size < src_size ? size : src_size;
    memcpy((unsigned char *)dst + sizeof size, (const unsigned char *)src + sizeof size,
           n - sizeof size);
    /* A newer caller's larger struct learns where the fields this library wrote end. */
    memcpy(dst, &n, sizeof n);
    return ACG_OK;
}
