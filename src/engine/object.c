/* object.c — what the engine's objects (the stager, the KV cache, the attention plan) share:
 * the first checks of a create, the object's header (handle life, device, lock) made and
 * released, the stream a call queues work on, the refusal of a capturing stream, the stats
 * getter, and an error passed up under the caller's name. */
#include <stdio.h>
#include <string.h>

#include "engine-impl.h"

acg_status acg__rethrow(acg_status st, const char *fn) {
    char detail[384];
    snprintf(detail, sizeof detail, "%s", acg_last_error());
    return acg__error(st, "%s: %s", fn, detail);
}

acg_status acg__engine_create_args(const acg_device *dev, const void *out,
                                   const acg__config_kind *kind, const void *config, void *dst,
                                   const char *fn) {
    if (dev == NULL) {
        return acg__error(ACG_ERR_INVALID_HANDLE, "%s: dev is NULL", fn);
    }
    ACG__TRY(acg__check_arg(out, "out", fn));
    if (config == NULL && kind->optional) {
        memcpy(dst, kind->defaults, kind->size);
        return ACG_OK;
    }
    ACG__TRY(acg__check_arg(config, "config", fn));
    return acg__config_read(dst, kind->size, kind->defaults, config, kind->min_size, kind->name,
                            fn);
}

void *acg__engine_obj_new(size_t size, acg_device *dev, const char *fn) {
    acg__engine_obj *obj = acg__new(size, fn);
    if (obj == NULL) {
        return NULL;
    }
    obj->dev = dev;
    if (pthread_mutex_init(&obj->lock, NULL) != 0) {
        acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: pthread_mutex_init failed", fn);
        acg__free(obj);
        return NULL;
    }
    return obj;
}

void acg__engine_obj_free(acg__engine_obj *obj) {
    pthread_mutex_destroy(&obj->lock);
    acg__free(obj);
}

void acg__engine_obj_release(acg__engine_obj *obj) {
    acg__handle_remove(obj);
    acg__engine_obj_free(obj);
}

acg_status acg__engine_check_stream(acg_stream *stream, const acg__engine_obj *obj,
                                    const char *what, const char *fn) {
    ACG__TRY(acg__check_stream(stream, fn));
    if (acg__stream_device(stream) != obj->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the stream belongs to %s, the %s to %s", fn,
                          acg__device_name(acg__stream_device(stream)), what,
                          acg__device_name(obj->dev));
    }
    return ACG_OK;
}

acg_status acg__engine_refuse_capture(acg_stream *stream, const char *why, const char *fn) {
    acg_capture_state cs = ACG_CAPTURE_NONE;
    acg_status st = acg_stream_get_capture_state(stream, &cs);
    if (st != ACG_OK) {
        return acg__rethrow(st, fn);
    }
    if (cs != ACG_CAPTURE_NONE) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the stream is capturing; %s", fn, why);
    }
    return ACG_OK;
}

acg_status acg__engine_write_stats(const acg__engine_obj *obj, const void *stats, size_t size,
                                   void *out, const char *what, const char *fn) {
    /* Checked first, so that no error is set (and logged) under the lock. */
    ACG__TRY(acg__output_check(out, size, what, fn));
    pthread_mutex_lock(acg__engine_lock(obj));
    acg_status st = acg__output_write(out, stats, size, what, fn);
    pthread_mutex_unlock(acg__engine_lock(obj));
    return st;
}
