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

/* ---- what the stager, the KV cache and the plan share (object.c) ----------------------------
 * Each begins with an acg__engine_obj, and each create and destroy makes the same first and last
 * steps, which these helpers make. */

typedef struct acg__engine_obj {
    acg__life life; /* calls using it (handle.c) */
    acg_device *dev;
    pthread_mutex_t lock; /* what it guards is the object's to say */
} acg__engine_obj;

/* The object's lock, also from its const getters (the lock is not part of the object's value). */
static inline pthread_mutex_t *acg__engine_lock(const acg__engine_obj *obj) {
    return (pthread_mutex_t *)&obj->lock;
}

/* A config struct of the engine's API: its name, this library's sizeof, the least size an older
 * caller's may have (acg__config_read's min_size), its defaults (its _INIT), and whether a
 * create takes NULL for the defaults. */
typedef struct acg__config_kind {
    const char *name;
    size_t size, min_size;
    const void *defaults;
    bool optional;
} acg__config_kind;
#define ACG__CONFIG_KIND(type, init, min_size, optional)                                           \
    { #type, sizeof(type), (min_size), &(const type)init, (optional) }

/* A create's first checks, in this order: dev given (ACG_ERR_INVALID_HANDLE, "<fn>: dev is
 * NULL"), out given, then config, read whole into dst (kind->size bytes) at the caller's size;
 * a NULL config is refused ("<fn>: config is NULL") unless the kind is optional, when dst takes
 * the defaults. */
acg_status acg__engine_create_args(const acg_device *dev, const void *out,
                                   const acg__config_kind *kind, const void *config, void *dst,
                                   const char *fn);
/* A new object of size bytes, zeroed, that begins with an acg__engine_obj of dev whose lock is
 * made; NULL with ACG_ERR_OUT_OF_MEMORY naming fn when either fails. acg__engine_obj_free
 * undoes it; acg__engine_obj_release also takes the object out of the registry of live handles
 * (a destroy's last step). */
void *acg__engine_obj_new(size_t size, acg_device *dev, const char *fn);
void acg__engine_obj_free(acg__engine_obj *obj);
void acg__engine_obj_release(acg__engine_obj *obj);

/* The stream a call on the object queues work on: live (held until the call returns), and of
 * the object's device, else ACG_ERR_WRONG_DEVICE, "<fn>: the stream belongs to <its device>,
 * the <what> to <the object's>". */
acg_status acg__engine_check_stream(acg_stream *stream, const acg__engine_obj *obj,
                                    const char *what, const char *fn);
/* Refuses a capturing stream for work that must run now: ACG_ERR_INVALID_ARGUMENT, "<fn>: the
 * stream is capturing; <why>" (a failure to ask is re-stated under fn). */
acg_status acg__engine_refuse_capture(acg_stream *stream, const char *why, const char *fn);
/* A getter of the object's counters: the size bytes at stats, read under the object's lock,
 * written into the caller's out (acg__output_write; what names its struct). */
acg_status acg__engine_write_stats(const acg__engine_obj *obj, const void *stats, size_t size,
                                   void *out, const char *what, const char *fn);

#endif /* ACG_ENGINE_IMPL_H */
