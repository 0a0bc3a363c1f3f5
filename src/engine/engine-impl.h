/*
 * engine-impl.h — what the stager, kv cache and plan files of the engine share.
 *
 * The engine is built on the public device API (acg.h) and the core's status, log and allocator
 * helpers only. Its objects are entered in the core's registry of live handles like the core's
 * own, so a NULL, destroyed or foreign pointer is refused with ACG_ERR_INVALID_HANDLE.
 */
#ifndef ACG_ENGINE_IMPL_H
#define ACG_ENGINE_IMPL_H

#include <acg/engine.h>

#include <pthread.h>

#include "acg-layer.h"

/* The engine's handle types in the core's registry (acg-impl.h gives each layer a range). */
enum {
    ACG__HANDLE_STAGER = ACG__HANDLE_LAYER_FIRST,
    ACG__HANDLE_KV,
    ACG__HANDLE_PLAN,
    ACG__HANDLE_RUNNER,
};

/* The engine's ACG_* variables (runner.c), listed for the core by src/library.c. */
extern const acg__env_table acg__engine_env;

/* Re-states the failure of a call the engine made (acg_last_error()) under fn's name. */
acg_status acg__rethrow(acg_status st, const char *fn);

/* acg_stager_upload with the mirror's skip under the caller's control: with use_mirror false
 * the upload always copies (it still forgets what the mirror knew about the bytes it
 * overwrites, and records nothing). Plans use it: they compare with their own previous build,
 * and a mirror keyed by a buffer pointer could match a freed buffer's successor. */
acg_status acg__stager_upload(acg_stager *stager, acg_stream *stream, acg_buffer *dst,
                              size_t dst_offset, const void *values, size_t n, size_t elem_size,
                              const void *pad, size_t padded_n, bool use_mirror);

/* The device of a live stager, else NULL. */
acg_device *acg__stager_device(const acg_stager *stager);

#endif /* ACG_ENGINE_IMPL_H */
