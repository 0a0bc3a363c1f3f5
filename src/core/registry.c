/* registry.c — the backends compiled into this build, in order of preference, and their probes.
 * Looking a backend up by name initializes no hardware; only acg_backend_get_info and opening a
 * device load a driver. */
#include <string.h>

#include "core/acg-impl.h"

/* The build's list (CMakeLists.txt writes it from the backends it builds, in the order of its
 * ACG_BACKEND_FOLDERS: the preference of acg_device_open(NULL)). */
#include "acg-backends.h"

#define ACG__DECLARE_BACKEND(name) extern const acg_backend_i acg__backend_##name;
ACG__BACKENDS(ACG__DECLARE_BACKEND)
#undef ACG__DECLARE_BACKEND

#define ACG__LIST_BACKEND(name) &acg__backend_##name,
static const acg_backend_i *const backends[] = {ACG__BACKENDS(ACG__LIST_BACKEND)};
#undef ACG__LIST_BACKEND

#define N_BACKENDS (sizeof backends / sizeof backends[0])

size_t acg__backend_count(void) { return N_BACKENDS; }

const acg_backend_i *acg__backend_find(const char *name) {
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(backends[i]->name, name) == 0) {
            return backends[i];
        }
    }
    return NULL;
}

acg_status acg__backends_check_kernel(const acg_kernel_desc *d, const char *fn) {
    for (size_t i = 0; i < N_BACKENDS; i++) {
        acg_status (*check)(const acg_kernel_desc *, const char *) =
            ACG__SLOT(backends[i], kernel_check, 7);
        ACG__TRY(check != NULL ? check(d, fn) : ACG_OK);
    }
    return ACG_OK;
}

/* Probe results, made once per backend. */
typedef struct probe_result {
    acg_status status;
    int n_devices;
    const char *reason;
} probe_result;

static probe_result probes[N_BACKENDS + 1];
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static bool probed[N_BACKENDS + 1];

static void probe_backend(size_t i) {
    pthread_mutex_lock(&probe_lock);
    if (!probed[i]) {
        probe_result *r = &probes[i];
        r->n_devices = 0;
        r->reason = "";
        r->status = backends[i]->probe(&r->n_devices, &r->reason);
        if (r->status == ACG_OK && r->n_devices == 0) {
            r->reason = "the driver reports no device";
        }
        if (r->reason == NULL) {
            r->reason = "";
        }
        probed[i] = true;
    }
    pthread_mutex_unlock(&probe_lock);
}

size_t acg_backend_count(void) { return N_BACKENDS; }

acg_status acg_backend_get_info(size_t index, acg_backend_info *out) {
    if (index >= N_BACKENDS) {
        return acg__error(ACG_ERR_OUT_OF_RANGE, "acg_backend_get_info: index %zu, %zu backends",
                          index, (size_t)N_BACKENDS);
    }
    if (out == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "acg_backend_get_info: out is NULL");
    }
    probe_backend(index);
    const probe_result *r = &probes[index];
    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    info.name = backends[index]->name;
    info.available = r->status == ACG_OK && r->n_devices > 0;
    info.device_count = info.available ? r->n_devices : 0;
    info.reason = info.available ? "" : r->reason;
    return acg__output_write(out, &info, sizeof info, "acg_backend_info", "acg_backend_get_info");
}

/* Devices of a backend, probing it first; ACG_ERR_UNAVAILABLE with the reason. */
acg_status acg__backend_devices(const acg_backend_i *vt, int *n, const char *fn) {
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (backends[i] == vt) {
            probe_backend(i);
            if (probes[i].status != ACG_OK || probes[i].n_devices == 0) {
                return acg__error(ACG_ERR_UNAVAILABLE, "%s: backend %s is unavailable: %s", fn,
                                  vt->name, probes[i].reason);
            }
            *n = probes[i].n_devices;
            return ACG_OK;
        }
    }
    return acg__error(ACG_ERR_NOT_FOUND, "%s: backend not compiled in", fn);
}
