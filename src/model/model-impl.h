/*
 * model-impl.h — what the weights, tokenizer and preset files of the reference model share.
 *
 * The parsers take bytes already in memory, so the file loaders (which map the file) and the
 * fuzz harnesses (which hand them arbitrary bytes) run the same validation.
 */
#ifndef ACG_MODEL_IMPL_H
#define ACG_MODEL_IMPL_H

#include <acg/model.h>

#include "core/acg-impl.h"

/* Bytes of a checkpoint's header: 7 int32. */
#define ACG__CHECKPOINT_HEADER_BYTES 28

/* Validates a llama2.c checkpoint of size bytes at data and points *tensors into it; touches
 * no tensor data and allocates nothing. data must be 4-byte aligned. Errors are those of
 * acg_model_weights_load, reported as "fn: 'name': ...". */
acg_status acg__model_weights_parse(const void *data, size_t size, const char *fn, const char *name,
                                    acg_model_config *config, acg_model_tensors *tensors);

/* Wraps image (a checkpoint of size bytes from acg__alloc_aligned, already generated) in a
 * weights object that owns it. On failure the caller still owns image. */
acg_status acg__model_weights_adopt(void *image, size_t size, const char *fn, const char *name,
                                    acg_model_weights **out);

/* Validates a configuration as a checkpoint header would be validated, and gives the bytes of
 * its checkpoint. */
acg_status acg__model_config_check(const acg_model_config *config, const char *fn, const char *name,
                                   uint64_t *file_bytes);

/* Parses a llama2.c tokenizer of vocab_size entries from size bytes at data into a new
 * tokenizer. Errors are those of acg_tokenizer_load, reported as "fn: 'name': ...". */
acg_status acg__tokenizer_parse(const void *data, size_t size, int32_t vocab_size, const char *fn,
                                const char *name, acg_tokenizer **out);

/* Maps path read-only: ACG_ERR_NOT_FOUND for a missing file, ACG_ERR_INVALID_ARGUMENT for
 * one that cannot be opened or mapped or is not a regular file. An empty file gives
 * *data NULL and *size 0 (nothing to unmap). */
acg_status acg__file_map(const char *path, const char *fn, const void **data, size_t *size);
void acg__file_unmap(const void *data, size_t size);

/* Writes the pieces (data[i], size[i]) to path, created or truncated. */
acg_status acg__file_write(const char *path, const char *fn, const void *const *data,
                           const size_t *size, size_t n);

#endif /* ACG_MODEL_IMPL_H */
