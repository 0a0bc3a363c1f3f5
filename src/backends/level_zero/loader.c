/* loader.c — the level_zero backend's loader: libze_loader opened at run time and its entry
 * points resolved, zeInit, every driver's devices, and what each driver offers beyond spec 1.4
 * (its extensions, found at run time, and whether its immediate lists exist and take the
 * in-order flag); the result codes' names and their statuses. The devices, memory and kernels
 * are level_zero.c's.
 *
 * Nothing is called after a failed zeInit: with Intel's driver installed and no GPU, later calls
 * crash (../shared/PLATFORM.md). Features newer than Debian's spec 1.4 headers are found at run
 * time: the in-order flag from the driver's API version, immediate append from its extension
 * list; each missing one only changes how the backend does the same thing, and so do missing
 * immediate lists (a command queue per stream). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

ze_loader acg__ze;

/* ---- errors ------------------------------------------------------------------------------ */

const char *acg__ze_result_name(ze_result_t r) {
    switch (r) {
    case ZE_RESULT_NOT_READY:
        return "ZE_RESULT_NOT_READY";
    case ZE_RESULT_ERROR_DEVICE_LOST:
        return "ZE_RESULT_ERROR_DEVICE_LOST";
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
        return "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY:
        return "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY";
    case ZE_RESULT_ERROR_MODULE_BUILD_FAILURE:
        return "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE";
    case ZE_RESULT_ERROR_UNINITIALIZED:
        return "ZE_RESULT_ERROR_UNINITIALIZED";
    case ZE_RESULT_ERROR_UNSUPPORTED_VERSION:
        return "ZE_RESULT_ERROR_UNSUPPORTED_VERSION";
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
        return "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE";
    case ZE_RESULT_ERROR_UNSUPPORTED_SIZE:
        return "ZE_RESULT_ERROR_UNSUPPORTED_SIZE";
    case ZE_RESULT_ERROR_INVALID_ARGUMENT:
        return "ZE_RESULT_ERROR_INVALID_ARGUMENT";
    case ZE_RESULT_ERROR_INVALID_NULL_HANDLE:
        return "ZE_RESULT_ERROR_INVALID_NULL_HANDLE";
    case ZE_RESULT_ERROR_INVALID_NULL_POINTER:
        return "ZE_RESULT_ERROR_INVALID_NULL_POINTER";
    case ZE_RESULT_ERROR_INVALID_SIZE:
        return "ZE_RESULT_ERROR_INVALID_SIZE";
    case ZE_RESULT_ERROR_INVALID_ENUMERATION:
        return "ZE_RESULT_ERROR_INVALID_ENUMERATION";
    case ZE_RESULT_ERROR_INVALID_KERNEL_NAME:
        return "ZE_RESULT_ERROR_INVALID_KERNEL_NAME";
    case ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION:
        return "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION";
    case ZE_RESULT_ERROR_UNKNOWN:
        return "ZE_RESULT_ERROR_UNKNOWN";
    default:
        return "a Level Zero error";
    }
}

acg_status acg__ze_check(ze_result_t r, const char *fn, const char *call) {
    if (r == ZE_RESULT_SUCCESS) {
        return ACG_OK;
    }
    acg_status st = ACG_ERR_DEVICE;
    switch (r) {
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY:
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY:
    case ZE_RESULT_ERROR_UNSUPPORTED_SIZE: /* larger than the device allocates at once */
        st = ACG_ERR_OUT_OF_MEMORY;
        break;
    case ZE_RESULT_ERROR_DEVICE_LOST:
        st = ACG_ERR_DEVICE_LOST;
        break;
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE:
    case ZE_RESULT_ERROR_UNSUPPORTED_VERSION:
        st = ACG_ERR_UNSUPPORTED;
        break;
    default:
        break;
    }
    return acg__error(st, "%s: %s failed with %s (0x%08x)", fn, call, acg__ze_result_name(r),
                      (unsigned)r);
}

/* ---- loading ----------------------------------------------------------------------------- */

/* Resolves every entry point from the loader; false (reason set) when one is missing. */
static bool resolve(void *h) {
#define ACG_ZE_RESOLVE_(name, pfn, required)                                                       \
    *(void **)&acg__ze.name = dlsym(h, #name);                                                     \
    if (acg__ze.name == NULL && (required)) {                                                      \
        snprintf(acg__ze.reason, sizeof acg__ze.reason,                                            \
                 "the Level Zero loader lacks %s, which the level_zero backend needs", #name);     \
        return false;                                                                              \
    }
    ACG_ZE_ENTRY_POINTS(ACG_ZE_RESOLVE_)
#undef ACG_ZE_RESOLVE_
    return true;
}

/* What the test driver looks kernels up with: the definition whose SPIR-V entry point, in any
 * module, this is. */
static const acg_kernel_desc *find_spirv_kernel(const char *function) {
    return acg__kernel_desc_find("level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, NULL, 0, function);
}

/* acg's test driver runs kernels with their cpu code: it looks definitions up by the OpenCL C
 * function they name. The loader loaded it from ZE_ENABLE_ALT_DRIVERS; a real driver exports no
 * such function, and nothing changes there. */
static void bind_test_driver(void) {
    const char *alt = getenv("ZE_ENABLE_ALT_DRIVERS");
    if (alt == NULL || *alt == '\0') {
        return;
    }
    char paths[1024];
    snprintf(paths, sizeof paths, "%s", alt);
    char *save = NULL;
    for (char *p = strtok_r(paths, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
        void *h = dlopen(p, RTLD_NOW | RTLD_NOLOAD);
        if (h == NULL) {
            continue;
        }
        void (*bind)(const acg_kernel_desc *(*)(const char *)) = NULL;
        *(void **)&bind = dlsym(h, "acgtest_ze_bind_kernels");
        if (bind != NULL) {
            bind(find_spirv_kernel);
            acg__log(ACG_LOG_INFO,
                     "level_zero: %s is acg's test driver: kernels run their cpu code", p);
        }
        dlclose(h); /* RTLD_NOLOAD took a reference; the loader holds its own */
    }
}

/* A function newer than the loader's headers: from the loader itself where it is newer and
 * exports it (how Intel's runtime finds some of them), else from the driver. NULL: absent. */
static void *extension_function(ze_drv *drv, const char *name) {
    void *f = dlsym(acg__ze.handle, name);
    if (f == NULL &&
        (acg__ze.zeDriverGetExtensionFunctionAddress(drv->handle, name, &f) != ZE_RESULT_SUCCESS)) {
        f = NULL;
    }
    return f;
}

/* Whether the driver lists extension `name` at a major version acg knows (1); another is logged
 * and not used. */
static bool offered(const ze_driver_extension_properties_t *ext, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(ext[i].name, name) != 0) {
            continue;
        }
        if (ACG_ZE_MAJOR_VERSION(ext[i].version) == 1) {
            return true;
        }
        acg__log(ACG_LOG_WARN, "level_zero: %s version %u.%u is not one acg knows; not used",
                 ext[i].name, ACG_ZE_MAJOR_VERSION(ext[i].version),
                 ACG_ZE_MINOR_VERSION(ext[i].version));
    }
    return false;
}

/* The Exp form's destroy functions are kept in the Ext form's fields: the same types. */
_Static_assert(_Generic((acg_ze_pfn_zeExecutableGraphDestroyExp)0,
                        acg_ze_pfn_zeExecutableGraphDestroyExt : 1, default : 0),
               "zeExecutableGraphDestroyExp and zeExecutableGraphDestroyExt differ in type");
_Static_assert(_Generic((acg_ze_pfn_zeGraphDestroyExp)0, acg_ze_pfn_zeGraphDestroyExt : 1,
                        default : 0),
               "zeGraphDestroyExp and zeGraphDestroyExt differ in type");

/* The record/replay graph functions of one form (exp: the driver-experimental one). One that
 * does not resolve makes the form absent: none is kept. */
static void resolve_graphs(ze_drv *drv, bool exp) {
    struct ze_graph_ext *g = &drv->graph;
    memset(g, 0, sizeof *g);
    bool all;
    if (exp) {
        *(void **)&g->begin_exp = extension_function(drv, "zeCommandListBeginGraphCaptureExp");
        *(void **)&g->end_exp = extension_function(drv, "zeCommandListEndGraphCaptureExp");
        *(void **)&g->instantiate_exp = extension_function(drv, "zeCommandListInstantiateGraphExp");
        *(void **)&g->append_exp = extension_function(drv, "zeCommandListAppendGraphExp");
        *(void **)&g->destroy_exec = extension_function(drv, "zeExecutableGraphDestroyExp");
        *(void **)&g->destroy = extension_function(drv, "zeGraphDestroyExp");
        all = g->begin_exp != NULL && g->end_exp != NULL && g->instantiate_exp != NULL &&
              g->append_exp != NULL;
    } else {
        *(void **)&g->begin = extension_function(drv, "zeCommandListBeginGraphCaptureExt");
        *(void **)&g->end = extension_function(drv, "zeCommandListEndGraphCaptureExt");
        *(void **)&g->instantiate = extension_function(drv, "zeGraphInstantiateExt");
        *(void **)&g->append = extension_function(drv, "zeCommandListAppendGraphExt");
        *(void **)&g->destroy_exec = extension_function(drv, "zeExecutableGraphDestroyExt");
        *(void **)&g->destroy = extension_function(drv, "zeGraphDestroyExt");
        all = g->begin != NULL && g->end != NULL && g->instantiate != NULL && g->append != NULL;
    }
    if (all && g->destroy_exec != NULL && g->destroy != NULL) {
        g->exp = exp;
    } else {
        memset(g, 0, sizeof *g);
    }
}

/* What one driver offers beyond spec 1.4. */
static acg_status query_driver(ze_drv *drv) {
    static const char fn[] = "level_zero";
    acg_status st = ZE(fn, zeDriverGetApiVersion, drv->handle, &drv->api);
    ze_driver_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES};
    if (st == ACG_OK) {
        st = ZE(fn, zeDriverGetProperties, drv->handle, &props);
    }
    uint32_t n = 0;
    if (st == ACG_OK) {
        st = ZE(fn, zeDriverGetExtensionProperties, drv->handle, &n, NULL);
    }
    ze_driver_extension_properties_t *ext = NULL;
    if (st == ACG_OK && n > 0) {
        ext = acg__calloc(n, sizeof *ext);
        st = ext != NULL ? ZE(fn, zeDriverGetExtensionProperties, drv->handle, &n, ext)
                         : acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (st != ACG_OK) {
        acg__free(ext);
        return st;
    }
    drv->version = props.driverVersion;
    drv->in_order = drv->api >= ACG_ZE_API_VERSION_1_7;
    if (offered(ext, n, ACG_ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME)) {
        *(void **)&drv->immediate_append =
            extension_function(drv, "zeCommandListImmediateAppendCommandListsExp");
    }
    if (offered(ext, n, ACG_ZE_MUTABLE_COMMAND_LIST_EXP_NAME)) {
        *(void **)&drv->next_command_id =
            extension_function(drv, "zeCommandListGetNextCommandIdExp");
        *(void **)&drv->update_commands =
            extension_function(drv, "zeCommandListUpdateMutableCommandsExp");
        if (drv->next_command_id == NULL || drv->update_commands == NULL) {
            drv->next_command_id = NULL;
            drv->update_commands = NULL;
        }
    }
    /* The spec's form where the driver has it; else the one Intel's driver shipped first. */
    if (offered(ext, n, ACG_ZE_RECORD_REPLAY_GRAPH_EXT_NAME)) {
        resolve_graphs(drv, false);
    }
    if (drv->graph.destroy == NULL && offered(ext, n, ACG_ZE_RECORD_REPLAY_GRAPH_EXP_NAME)) {
        resolve_graphs(drv, true);
    }
    drv->usable_mem = offered(ext, n, ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_NAME);
    /* Listed under no extension: Intel's driver serves it to whoever asks. */
    *(void **)&drv->arg_size = extension_function(drv, "zexKernelGetArgumentSize");
    if (drv->api >= ACG_ZE_API_VERSION_1_6) {
        *(void **)&drv->host_sync = extension_function(drv, "zeCommandListHostSynchronize");
    }
    acg__free(ext);
    return ACG_OK;
}

/* Whether the driver has immediate lists, and whether they take the in-order flag its API
 * version promises: a layer older than the driver (the 1.8.12 loader's validation layer) refuses
 * the flag, and streams then keep their lists in order with barriers. A driver without immediate
 * lists (the loader answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE where the driver leaves the entry
 * point out) gets queue mode: a command queue per stream, running regular lists; immediate
 * append, zeCommandListHostSynchronize and graph capture work on immediate lists only, and are
 * turned off. Asked once, on the driver's first device, with a list made and destroyed; a
 * failure to ask leaves each stream to find out about the flag (and, without immediate lists,
 * makes streams fail). */
static void probe_immediate(ze_drv *drv, ze_device_handle_t dev) {
    ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    ze_context_handle_t ctx = NULL;
    if (acg__ze.zeContextCreate(drv->handle, &cdesc, &ctx) != ZE_RESULT_SUCCESS) {
        return;
    }
    ze_command_queue_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                    .flags = drv->in_order ? ACG_ZE_COMMAND_QUEUE_FLAG_IN_ORDER : 0,
                                    .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                    .priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
    ze_command_list_handle_t list = NULL;
    ze_result_t r = acg__ze.zeCommandListCreateImmediate(ctx, dev, &desc, &list);
    if (r == ZE_RESULT_ERROR_INVALID_ENUMERATION && drv->in_order) {
        drv->in_order = false;
        acg__log(ACG_LOG_INFO, "level_zero: immediate lists refuse the in-order flag (a layer "
                               "older than the driver): streams are ordered with barriers");
        desc.flags = 0;
        r = acg__ze.zeCommandListCreateImmediate(ctx, dev, &desc, &list);
    }
    if (r == ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) {
        drv->no_immediate = true;
        drv->in_order = false;
        drv->immediate_append = NULL;
        drv->host_sync = NULL;
        memset(&drv->graph, 0, sizeof drv->graph);
        acg__log(ACG_LOG_INFO, "level_zero: the driver has no immediate command lists: each "
                               "stream is a command queue running regular lists");
    } else if (r == ZE_RESULT_SUCCESS) {
        acg__ze.zeCommandListDestroy(list);
    }
    acg__ze.zeContextDestroy(ctx);
}

/* What the driver offers that acg uses, for the capability's detail. */
static void describe_extensions(ze_drv *drv) {
    if (drv->no_immediate) {
        /* At most 167 characters (see below): the entries that need immediate lists say only
         * "no", and the last one says why. */
        snprintf(drv->extensions, sizeof drv->extensions,
                 "in-order lists no (barriers); immediate append no; host synchronize no; "
                 "mutable lists %s; graph capture no; free memory %s; immediate lists no (queues)",
                 drv->update_commands != NULL ? "yes" : "no (record again)",
                 drv->usable_mem ? "yes" : "no");
        return;
    }
    /* At most 170 characters (every "no (...)", and "yes (Exp)"): the capability's detail has
     * room for exactly 170 after its start, which is why the graph form is named by its
     * suffix. */
    const char *graphs = drv->graph.destroy == NULL ? "no" : drv->graph.exp ? "yes (Exp)" : "yes";
    snprintf(drv->extensions, sizeof drv->extensions,
             "in-order lists %s; immediate append %s; host synchronize %s; mutable lists %s; "
             "graph capture %s; free memory %s",
             drv->in_order ? "yes" : "no (barriers)",
             drv->immediate_append != NULL ? "yes" : "no (queue replays)",
             drv->host_sync != NULL ? "yes" : "no (events)",
             drv->update_commands != NULL ? "yes" : "no (record again)", graphs,
             drv->usable_mem ? "yes" : "no");
}

/* Every device of every driver. */
static acg_status enumerate(void) {
    static const char fn[] = "level_zero";
    uint32_t n = 0, cap_devices = 0;
    acg_status st = ZE(fn, zeDriverGet, &n, NULL);
    ze_driver_handle_t *handles = NULL;
    if (st == ACG_OK && n > 0) {
        handles = acg__calloc(n, sizeof *handles);
        acg__ze.drivers = acg__calloc(n, sizeof *acg__ze.drivers);
        st = handles != NULL && acg__ze.drivers != NULL
                 ? ZE(fn, zeDriverGet, &n, handles)
                 : acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    for (uint32_t i = 0; st == ACG_OK && i < n; i++) {
        ze_drv *drv = &acg__ze.drivers[acg__ze.n_drivers++];
        drv->handle = handles[i];
        st = query_driver(drv);
        uint32_t nd = 0;
        if (st == ACG_OK) {
            st = ZE(fn, zeDeviceGet, drv->handle, &nd, NULL);
        }
        ze_device_handle_t *devs = nd > 0 ? acg__calloc(nd, sizeof *devs) : NULL;
        if (st == ACG_OK && nd > 0 &&
            (devs == NULL || !acg__grow((void **)&acg__ze.devices, &cap_devices,
                                        acg__ze.n_devices + nd, sizeof *acg__ze.devices))) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        if (st == ACG_OK && nd > 0) {
            st = ZE(fn, zeDeviceGet, drv->handle, &nd, devs);
        }
        if (st == ACG_OK && nd > 0) {
            probe_immediate(drv, devs[0]);
        }
        describe_extensions(drv);
        for (uint32_t j = 0; st == ACG_OK && j < nd; j++) {
            acg__ze.devices[acg__ze.n_devices].drv = drv;
            acg__ze.devices[acg__ze.n_devices].dev = devs[j];
            acg__ze.n_devices++;
        }
        acg__free(devs);
    }
    acg__free(handles);
    return st;
}

/* Opens the loader, initializes it and finds the devices; false with reason set when the
 * backend cannot run. */
static bool load(void) {
    const char *path = NULL;
    void *h =
        acg__dlopen_vendor("ACG_LEVEL_ZERO_LOADER", "libze_loader.so.1", "no Level Zero loader",
                           "install libze1", &path, acg__ze.reason, sizeof acg__ze.reason);
    if (h == NULL) {
        return false;
    }
    acg__ze.handle = h;
    if (!resolve(h)) {
        return false;
    }
    ze_result_t r = acg__ze.zeInit(ZE_INIT_FLAG_GPU_ONLY);
    if (r != ZE_RESULT_SUCCESS) {
        /* Nothing else is called: some drivers crash after a failed zeInit. */
        snprintf(acg__ze.reason, sizeof acg__ze.reason,
                 "zeInit failed with %s (0x%08x): no Level Zero driver or no GPU it drives",
                 acg__ze_result_name(r), (unsigned)r);
        return false;
    }
    bind_test_driver();
    if (enumerate() != ACG_OK) {
        snprintf(acg__ze.reason, sizeof acg__ze.reason, "%s", acg_last_error());
        return false;
    }
    return true;
}

acg_status acg__ze_probe(int *n, const char **reason) {
    static bool loaded, ok;
    if (!loaded) {
        ok = load();
        loaded = true;
    }
    if (!ok) {
        *reason = acg__ze.reason;
        return ACG_ERR_UNAVAILABLE;
    }
    *n = (int)acg__ze.n_devices;
    *reason = ""; /* no device: the core says so */
    return ACG_OK;
}
