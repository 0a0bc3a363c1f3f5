/* level_zero.c — the level_zero backend: devices with a context each, USM memory, SPIR-V
 * kernels (their parameters checked against the definition's when loaded), the native objects
 * behind devices and buffers, and the backend's table. The loader and what each driver offers
 * are loader.c's; streams, events and copies are stream.c's; graphs are graph.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

/* ---- devices ----------------------------------------------------------------------------- */

/* Whether the driver records captures on the device: the graph extension, and the device's
 * immutable graphs. */
static acg_status native_graphs(ze_drv *drv, ze_device_handle_t dev, bool *out, const char *fn) {
    *out = false;
    if (drv->graph.destroy == NULL) {
        return ACG_OK;
    }
    /* Both forms fill this layout; each knows it by its own stype only. */
    acg_ze_record_replay_graph_ext_properties_t graph = {
        .stype = drv->graph.exp ? ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXP_PROPERTIES
                                : ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES};
    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, .pNext = &graph};
    acg_status st = ZE(fn, zeDeviceGetProperties, dev, &props);
    *out = st == ACG_OK && (graph.graphFlags & ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_IMMUTABLE_GRAPH);
    return st;
}

/* The device's memory in total: every memory it reports (the first eight). */
static acg_status memory_total(ze_device_handle_t dev, uint64_t *total, const char *fn) {
    uint32_t n = 0;
    acg_status st = ZE(fn, zeDeviceGetMemoryProperties, dev, &n, NULL);
    ze_device_memory_properties_t mem[8];
    memset(mem, 0, sizeof mem);
    for (uint32_t i = 0; i < 8; i++) {
        mem[i].stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    }
    if (n > 8) {
        n = 8;
    }
    if (st == ACG_OK && n > 0) {
        st = ZE(fn, zeDeviceGetMemoryProperties, dev, &n, mem);
    }
    *total = 0;
    for (uint32_t i = 0; st == ACG_OK && i < n; i++) {
        *total += mem[i].totalSize;
    }
    return st;
}

static acg_status describe_device(ze_drv *drv, ze_device_handle_t dev, acg_capability *out) {
    static const char fn[] = "acg_device_describe";
    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES};
    bool native = false;
    acg_status st = native_graphs(drv, dev, &native, fn);
    if (st == ACG_OK) {
        st = ZE(fn, zeDeviceGetProperties, dev, &props);
    }
    uint64_t total = 0;
    if (st == ACG_OK) {
        st = memory_total(dev, &total, fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    snprintf(out->name, sizeof out->name, "%.127s", props.name);
    out->memory_bytes = total;
    out->available = true;
    out->pinned_memory = true;
    out->graphs = true;
    out->multi_stream_capture = true; /* forks as the driver's, or ordered by the ledger */
    out->graph_update = true;         /* by recording the description again */
    /* A kernel's command patched in a mutable list, arguments and grid alike (the device's
     * mutable lists change both, or none are used), else the list recorded again. */
    out->graph_node_update = true;
    out->graph_node_update_grid = true;
    /* A copy from (to) host memory in a regular list or a driver's graph reads (writes) that
     * memory when it runs, at every replay. */
    out->graph_pinned_replay = true;
    out->native_capture = native;
    out->graph_host_functions = false; /* a command list has no host node */
    out->pinned_register = false;
    out->host_cpu = props.type == ZE_DEVICE_TYPE_CPU;
    /* At most 85 + 170 characters: the detail's 256 hold it. */
    int written = snprintf(
        out->detail, sizeof out->detail, "Level Zero API %u.%u, driver %u; graphs %s; %.170s",
        ZE_MAJOR_VERSION(drv->api), ZE_MINOR_VERSION(drv->api), drv->version,
        native ? "captured by the driver" : "recorded from the description", drv->extensions);
    (void)written; /* whatever the driver reports, the detail is only words */
    return ACG_OK;
}

static acg_status ze_describe(int index, acg_capability *out) {
    if (index < 0 || (uint32_t)index >= acg__ze.n_devices) {
        return acg__error(ACG_ERR_NOT_FOUND, "acg_device_describe: no level_zero device %d", index);
    }
    return describe_device(acg__ze.devices[index].drv, acg__ze.devices[index].dev, out);
}

/* Whether the device's mutable commands change what a graph update changes: kernel arguments,
 * group counts and group sizes (the mutable command list extension's properties). A device
 * that changes less gets lists recorded again instead. */
static acg_status mutable_lists(ze_device *d, const char *fn) {
    const uint32_t need = ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS |
                          ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT |
                          ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE;
    d->mutable_lists = false;
    if (d->drv->update_commands == NULL) {
        return ACG_OK;
    }
    acg_ze_mutable_command_list_exp_properties_t m = {
        .stype = ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_PROPERTIES};
    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, .pNext = &m};
    acg_status st = ZE(fn, zeDeviceGetProperties, d->dev, &props);
    d->mutable_lists = st == ACG_OK && (m.mutableCommandFlags & need) == need;
    return st;
}

/* The first command queue group that runs kernels. */
static acg_status compute_ordinal(ze_device *d, const char *fn) {
    uint32_t n = 0;
    acg_status st = ZE(fn, zeDeviceGetCommandQueueGroupProperties, d->dev, &n, NULL);
    ze_command_queue_group_properties_t *groups = NULL;
    if (st == ACG_OK && n > 0) {
        groups = acg__calloc(n, sizeof *groups);
        if (groups == NULL) {
            return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        for (uint32_t i = 0; i < n; i++) {
            groups[i].stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
        }
        st = ZE(fn, zeDeviceGetCommandQueueGroupProperties, d->dev, &n, groups);
    }
    bool found = false;
    for (uint32_t i = 0; st == ACG_OK && i < n && !found; i++) {
        if (groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) {
            d->compute_ordinal = i;
            found = true;
        }
    }
    acg__free(groups);
    if (st == ACG_OK && !found) {
        st = acg__error(ACG_ERR_UNSUPPORTED,
                        "%s: the device has no command queue group that "
                        "runs kernels",
                        fn);
    }
    return st;
}

/* A release the driver refused: the object stays, and so must what it belongs to. A lost
 * device's release is no refusal: the device runs nothing more, the driver lets go of what it
 * can, and keeping the object would keep the context and everything else with it. */
void acg__ze_release(ze_device *d, ze_result_t r, const char *fn, const char *call) {
    if (r == ZE_RESULT_ERROR_DEVICE_LOST) {
        acg__log(ACG_LOG_DEBUG, "level_zero: %s: %s on a lost device: %s", fn, call,
                 acg__ze_result_name(r));
    } else if (r != ZE_RESULT_SUCCESS) {
        acg__ze_check(r, fn, call);
        atomic_fetch_add(&d->leaked, 1);
    }
}

static void device_free(ze_device *d) {
    static const char fn[] = "acg_device_close";
    /* Once something was left to the driver (a release refused, a list that may still run),
     * everything it may use stays too: modules, events, pools, the queue and the context. */
    bool keep = atomic_load(&d->leaked) != 0;
    for (uint32_t i = 0; i < d->n_modules && !keep; i++) {
        ZE_RELEASE(d, fn, zeModuleDestroy, d->modules[i].module);
    }
    acg__free(d->modules);
    keep = keep || atomic_load(&d->leaked) != 0;
    for (uint32_t i = 0; i < d->n_all; i++) {
        if (!keep) {
            ZE_RELEASE(d, fn, zeEventDestroy, d->all[i]->ev);
        }
        acg__free(d->all[i]->waiters);
        acg__free(d->all[i]);
    }
    acg__free(d->all);
    acg__free(d->free_slots);
    acg__free(d->retired);
    keep = keep || atomic_load(&d->leaked) != 0;
    for (uint32_t i = 0; i < d->n_pools && !keep; i++) {
        ZE_RELEASE(d, fn, zeEventPoolDestroy, d->pools[i]);
    }
    acg__free(d->pools);
    keep = keep || atomic_load(&d->leaked) != 0;
    if (d->queue != NULL && !keep) {
        ZE_RELEASE(d, fn, zeCommandQueueDestroy, d->queue);
    }
    keep = keep || atomic_load(&d->leaked) != 0;
    if (d->ctx != NULL && !keep) {
        ZE_RELEASE(d, fn, zeContextDestroy, d->ctx);
    } else if (d->ctx != NULL) {
        acg__log(ACG_LOG_WARN,
                 "level_zero: %u object(s) the driver refused to release or the device may still "
                 "use were left to the driver, and their context with them",
                 (unsigned)atomic_load(&d->leaked));
    }
    pthread_mutex_destroy(&d->lock);
    acg__free(d);
}

static acg_status ze_device_open(int index, const char *options, acg__bk_device **out) {
    static const char fn[] = "acg_device_open";
    if (*options != '\0') {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the level_zero backend takes no device options (\"%s\")", fn,
                          options);
    }
    ze_device *d = acg__new(sizeof *d, fn);
    if (d == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&d->lock, NULL);
    d->drv = acg__ze.devices[index].drv;
    d->dev = acg__ze.devices[index].dev;
    d->index = index;
    ze_device_compute_properties_t compute = {.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES};
    ze_context_desc_t cdesc = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    acg_status st = ZE(fn, zeDeviceGetComputeProperties, d->dev, &compute);
    if (st == ACG_OK) {
        d->max_group_size = compute.maxTotalGroupSize ? compute.maxTotalGroupSize : 1;
        st = compute_ordinal(d, fn);
    }
    if (st == ACG_OK) {
        st = native_graphs(d->drv, d->dev, &d->native, fn);
    }
    if (st == ACG_OK) {
        st = mutable_lists(d, fn);
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeContextCreate, d->drv->handle, &cdesc, &d->ctx);
    }
    if (st == ACG_OK) {
        /* The first pool now, so that streams and events come and go without allocating. */
        st = acg__ze_add_pool(d, fn);
    }
    if (st == ACG_OK && d->drv->immediate_append == NULL) {
        ze_command_queue_desc_t q = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC,
                                     .ordinal = d->compute_ordinal,
                                     .mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS,
                                     .priority = ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
        st = ZE(fn, zeCommandQueueCreate, d->ctx, d->dev, &q, &d->queue);
    }
    if (st != ACG_OK) {
        device_free(d);
        return st;
    }
    *out = acg__ze_bk_dev(d);
    return ACG_OK;
}

static void ze_device_close(acg__bk_device *dev) { device_free(acg__ze_dev(dev)); }

static acg_status ze_query_capability(acg__bk_device *dev, acg_capability *out) {
    ze_device *d = acg__ze_dev(dev);
    return describe_device(d->drv, d->dev, out);
}

/* The context acg created for the device, the device and its driver. */
static acg_status ze_device_get_native(acg__bk_device *dev, acg_native_device *out) {
    ze_device *d = acg__ze_dev(dev);
    out->kind = ACG_NATIVE_ZE_CONTEXT;
    out->context = d->ctx;
    out->device = d->dev;
    out->platform = d->drv->handle;
    out->ordinal = d->index;
    return ACG_OK;
}

/* zeDeviceGetStatus answers from the driver's own fault detection (Intel's: every engine's hang
 * check) without waiting for any work, from any thread. A driver that does not serve it (the
 * loader answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) cannot tell: no fault; its waits still
 * report one. */
static acg_status ze_device_get_async_error(acg__bk_device *dev) {
    ze_result_t r = acg__ze.zeDeviceGetStatus(acg__ze_dev(dev)->dev);
    return r == ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
               ? ACG_OK
               : acg__ze_check(r, "acg_device_get_async_error", "zeDeviceGetStatus");
}

/* ---- memory ------------------------------------------------------------------------------ */

/* Free memory is what the driver says a new allocation could use now (the usable memory
 * extension); a driver without it cannot tell. */
static acg_status ze_memory_query(acg__bk_device *dev, uint64_t *free_bytes,
                                  uint64_t *total_bytes) {
    static const char fn[] = "acg_device_get_memory_info";
    ze_device *d = acg__ze_dev(dev);
    if (!d->drv->usable_mem) {
        return acg__error(ACG_ERR_UNSUPPORTED,
                          "%s: level_zero cannot tell its free memory: the driver does not offer "
                          "%s",
                          fn, ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_NAME);
    }
    acg_ze_device_usablemem_size_ext_properties_t usable = {
        .stype = ACG_ZE_STRUCTURE_TYPE_DEVICE_USABLEMEM_SIZE_EXT_PROPERTIES};
    ze_device_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES, .pNext = &usable};
    uint64_t total = 0;
    acg_status st = ZE(fn, zeDeviceGetProperties, d->dev, &props);
    if (st == ACG_OK) {
        st = memory_total(d->dev, &total, fn);
    }
    if (st != ACG_OK) {
        return st;
    }
    *total_bytes = total;
    *free_bytes = usable.currUsableMemSize < total ? usable.currUsableMemSize : total;
    return ACG_OK;
}

static acg_status ze_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **mem) {
    static const char fn[] = "acg_buffer_alloc";
    ze_device *d = acg__ze_dev(dev);
    ze_device_mem_alloc_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
    void *p = NULL;
    char call[48];
    snprintf(call, sizeof call, "zeMemAllocDevice of %zu bytes", size);
    acg_status st =
        acg__ze_check(acg__ze.zeMemAllocDevice(d->ctx, &desc, size, 64, d->dev, &p), fn, call);
    if (st == ACG_OK) {
        *mem = (acg__bk_mem *)p;
    }
    return st;
}

/* Device memory is the USM pointer itself: the bytes at offset are that pointer plus it. */
static acg_status ze_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                       size_t size, acg_native_buffer *out) {
    ACG__UNUSED(dev);
    ACG__UNUSED(size);
    out->kind = ACG_NATIVE_ZE_DEVICE_MEMORY;
    out->handle = NULL;
    out->address = (uint64_t)(uintptr_t)((char *)acg__ze_mem(mem) + offset);
    out->offset = 0;
    return ACG_OK;
}

static void ze_buffer_free(acg__bk_device *dev, acg__bk_mem *mem) {
    ze_device *d = acg__ze_dev(dev);
    ZE_RELEASE(d, "acg_buffer_free", zeMemFree, d->ctx, acg__ze_mem(mem));
}

static acg_status ze_pinned_alloc(acg__bk_device *dev, size_t size, void **ptr) {
    static const char fn[] = "acg_pinned_alloc";
    ze_host_mem_alloc_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};
    char call[48];
    snprintf(call, sizeof call, "zeMemAllocHost of %zu bytes", size);
    return acg__ze_check(acg__ze.zeMemAllocHost(acg__ze_dev(dev)->ctx, &desc, size, 64, ptr), fn,
                         call);
}

static void ze_pinned_free(acg__bk_device *dev, void *ptr) {
    ze_device *d = acg__ze_dev(dev);
    ZE_RELEASE(d, "acg_pinned_free", zeMemFree, d->ctx, ptr);
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* The module built from def's SPIR-V image (impl), once per device and image. Under the
 * device's lock. */
static acg_status module_for(ze_device *d, const acg__kernel_def *def, const acg_kernel_impl *impl,
                             ze_module_handle_t *out, const char *fn) {
    for (uint32_t i = 0; i < d->n_modules; i++) {
        if (d->modules[i].image == impl->code && d->modules[i].size == impl->size) {
            *out = d->modules[i].module;
            return ACG_OK;
        }
    }
    if (!acg__grow((void **)&d->modules, &d->cap_modules, d->n_modules + 1, sizeof *d->modules)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    /* Division and square root correctly rounded, nothing contracted (the one arithmetic):
     * the module was built so, and the driver is asked not to change it. */
    ze_module_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC,
                             .format = ZE_MODULE_FORMAT_IL_SPIRV,
                             .inputSize = impl->size,
                             .pInputModule = impl->code,
                             .pBuildFlags = "-cl-fp32-correctly-rounded-divide-sqrt"};
    ze_module_handle_t module = NULL;
    ze_module_build_log_handle_t log = NULL;
    ze_result_t r = acg__ze.zeModuleCreate(d->ctx, d->dev, &desc, &module, &log);
    acg_status st = acg__ze_check(r, fn, "zeModuleCreate");
    if (st != ACG_OK && log != NULL) {
        char text[512] = "";
        size_t size = sizeof text;
        if (acg__ze.zeModuleBuildLogGetString(log, &size, text) == ZE_RESULT_SUCCESS) {
            text[sizeof text - 1] = '\0';
            st = acg__error(st,
                            "%s: building the SPIR-V of kernel %s failed (zeModuleCreate: "
                            "%s): %s",
                            fn, def->name, acg__ze_result_name(r), text);
        }
    }
    if (log != NULL) {
        acg__ze.zeModuleBuildLogDestroy(log);
    }
    if (st != ACG_OK) {
        return st;
    }
    d->modules[d->n_modules].image = impl->code;
    d->modules[d->n_modules].size = impl->size;
    d->modules[d->n_modules].module = module;
    d->n_modules++;
    *out = module;
    return ACG_OK;
}

/* The OpenCL C parameter acg passes for an argument of type t (ACG_KERNEL_FORMAT_SPIRV_OPENCL's
 * convention). */
static const char *param_of(acg_arg_type t) {
    return t == ACG_ARG_BUFFER ? "a pointer and its ulong byte offset" : acg__arg_cl_type(t);
}

/* Refuses a kernel whose parameters are not those acg passes (ACG_KERNEL_FORMAT_SPIRV_OPENCL):
 * their number (zeKernelGetProperties), and each one's size where the driver tells it
 * (zexKernelGetArgumentSize). A launch of such a kernel would set the wrong parameters, or be
 * refused by the driver only when it is appended. */
static acg_status check_params(const ze_kernel *k, const char *entry, const char *fn) {
    const acg_kernel_desc *d = &k->def->d;
    uint32_t n = 0, size[ACG_ZE_MAX_PARAMS], arg[ACG_ZE_MAX_PARAMS];
    for (uint32_t i = 0; i < d->n_args; i++) {
        bool buffer = d->types[i] == ACG_ARG_BUFFER;
        bool wide = d->types[i] == ACG_ARG_I64 || d->types[i] == ACG_ARG_U64;
        size[n] = buffer ? (uint32_t)sizeof(void *) : wide ? 8 : 4;
        arg[n++] = i;
        if (buffer) {
            size[n] = (uint32_t)sizeof(uint64_t);
            arg[n++] = i;
        }
    }
    ze_kernel_properties_t props = {.stype = ZE_STRUCTURE_TYPE_KERNEL_PROPERTIES};
    ACG__TRY(ZE(fn, zeKernelGetProperties, k->kernel, &props));
    if (props.numKernelArgs != n) {
        char passes[1024] = "nothing";
        size_t used = 0;
        for (uint32_t i = 0; i < d->n_args && used < sizeof passes; i++) {
            used += (size_t)snprintf(passes + used, sizeof passes - used, "%s%s argument %u (%s)",
                                     i > 0 ? ", " : "", acg__arg_type_name(d->types[i]), i,
                                     param_of(d->types[i]));
        }
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): the SPIR-V kernel %s takes %u parameter%s; acg passes %u: %s",
                          fn, k->def->name, entry, props.numKernelArgs,
                          props.numKernelArgs == 1 ? "" : "s", n, passes);
    }
    for (uint32_t p = 0; p < n && k->dev->drv->arg_size != NULL; p++) {
        uint32_t have = 0;
        ACG__TRY(acg__ze_check(k->dev->drv->arg_size(k->kernel, p, &have), fn,
                               "zexKernelGetArgumentSize"));
        if (have == size[p]) {
            continue;
        }
        acg_arg_type t = d->types[arg[p]];
        char what[96];
        if (t == ACG_ARG_BUFFER) {
            bool pointer = p == 0 || arg[p - 1] != arg[p];
            snprintf(what, sizeof what, "the %s of buffer argument %u",
                     pointer ? "pointer" : "ulong byte offset", arg[p]);
        } else {
            snprintf(what, sizeof what, "%s argument %u (%s)", acg__arg_type_name(t), arg[p],
                     param_of(t));
        }
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s(%s): parameter %u of the SPIR-V kernel %s is %u bytes; acg passes %u "
                          "there: %s",
                          fn, k->def->name, p, entry, have, size[p], what);
    }
    return ACG_OK;
}

static acg_status ze_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                                 acg__bk_kernel **out) {
    static const char fn[] = "acg_kernel_get";
    ze_device *d = acg__ze_dev(dev);
    const acg_kernel_impl *impl =
        acg__kernel_impl_find(def, "level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL);
    if (impl == NULL) {
        return acg__error_no_kernel_code(fn, def->name, "level_zero",
                                         ACG_KERNEL_FORMAT_SPIRV_OPENCL, "spirv.module");
    }
    /* A module is binary: a size of 0 (text ending in NUL) is no SPIR-V. */
    if (impl->size == 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: kernel %s: its %s implementation has size 0, but a SPIR-V module "
                          "is binary: give its size in bytes",
                          fn, def->name, ACG_KERNEL_FORMAT_SPIRV_OPENCL);
    }
    ze_kernel *k = acg__new(sizeof *k, fn);
    if (k == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    k->dev = d;
    k->def = def;
    const char *entry = impl->entry != NULL ? impl->entry : def->name;
    ze_module_handle_t module = NULL;
    acg_status st = module_for(d, def, impl, &module, fn);
    if (st == ACG_OK) {
        ze_kernel_desc_t desc = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = entry};
        st = ZE(fn, zeKernelCreate, module, &desc, &k->kernel);
    }
    if (st == ACG_OK && (st = check_params(k, entry, fn)) != ACG_OK) {
        ZE_RELEASE(d, fn, zeKernelDestroy, k->kernel);
    }
    if (st != ACG_OK) {
        acg__free(k);
        return st;
    }
    pthread_mutex_init(&k->lock, NULL);
    *out = (acg__bk_kernel *)k;
    return ACG_OK;
}

static void ze_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel) {
    ACG__UNUSED(dev);
    ze_kernel *k = acg__ze_kernel(kernel);
    ZE_RELEASE(k->dev, "acg_device_close", zeKernelDestroy, k->kernel);
    pthread_mutex_destroy(&k->lock);
    acg__free(k);
}

/* The largest group size along one dimension that divides global (Level Zero has no partial
 * groups, and acg's kernels do not check their bounds), at most limit. */
static uint32_t group_along(uint32_t global, uint32_t local, uint32_t limit) {
    if (local > 0 && local <= limit && global % local == 0) {
        return local;
    }
    for (uint32_t g = limit < 256 ? limit : 256; g > 1; g--) {
        if (global % g == 0) {
            return g;
        }
    }
    return 1;
}

uint32_t acg__ze_kernel_params(const acg__karg *args, uint32_t n_args, ze_param *out) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_args; i++) {
        const acg__karg *a = &args[i];
        switch (a->type) {
        case ACG_ARG_BUFFER: {
            /* A buffer is two parameters: its allocation and a byte offset into it. */
            void *p = acg__ze_mem(a->value.buf.mem);
            uint64_t off = a->value.buf.offset;
            out[n].size = sizeof p;
            memcpy(out[n++].value, &p, sizeof p);
            out[n].size = sizeof off;
            memcpy(out[n++].value, &off, sizeof off);
            break;
        }
        case ACG_ARG_I32:
        case ACG_ARG_U32:
        case ACG_ARG_F32:
            out[n].size = 4;
            memcpy(out[n++].value, &a->value, 4);
            break;
        default:
            out[n].size = 8;
            memcpy(out[n++].value, &a->value, 8);
            break;
        }
    }
    return n;
}

void acg__ze_group_shape(const ze_kernel *k, const acg_dims *dims, uint32_t size[3],
                         ze_group_count_t *groups) {
    uint32_t limit = k->dev->max_group_size;
    size[0] = group_along(dims->global[0], dims->local[0], limit);
    size[1] = group_along(dims->global[1], dims->local[1], limit / size[0]);
    size[2] = group_along(dims->global[2], dims->local[2], limit / size[0] / size[1]);
    groups->groupCountX = dims->global[0] / size[0];
    groups->groupCountY = dims->global[1] / size[1];
    groups->groupCountZ = dims->global[2] / size[2];
}

acg_status acg__ze_kernel_prepare(ze_kernel *k, const acg_dims *dims, const acg__karg *args,
                                  uint32_t n_args, ze_group_count_t *groups, const char *fn) {
    ze_param params[ACG_ZE_MAX_PARAMS];
    uint32_t n = acg__ze_kernel_params(args, n_args, params);
    acg_status st = ACG_OK;
    for (uint32_t i = 0; i < n && st == ACG_OK; i++) {
        st = ZE(fn, zeKernelSetArgumentValue, k->kernel, i, params[i].size, params[i].value);
    }
    uint32_t size[3];
    acg__ze_group_shape(k, dims, size, groups);
    if (st == ACG_OK) {
        st = ZE(fn, zeKernelSetGroupSize, k->kernel, size[0], size[1], size[2]);
    }
    return st;
}

static acg_status ze_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                   const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    static const char fn[] = "acg_kernel_launch";
    ze_stream *s = acg__ze_stream(stream);
    ze_kernel *k = acg__ze_kernel(kernel);
    acg_status st = acg__ze_stream_begin(s, fn);
    ze_group_count_t groups;
    pthread_mutex_lock(&k->lock); /* the arguments are the kernel's until appended */
    if (st == ACG_OK) {
        st = acg__ze_kernel_prepare(k, dims, args, n_args, &groups, fn);
    }
    if (st == ACG_OK) {
        st = ZE(fn, zeCommandListAppendLaunchKernel, s->list, k->kernel, &groups, NULL, 0, NULL);
    }
    pthread_mutex_unlock(&k->lock);
    return acg__ze_stream_end(s, st);
}

/* The level_zero backend's variables (src/library.c lists this table with the layers'). */
static const char *const env_names[] = {
    /* the Level Zero loader to open (default libze_loader.so.1) */
    "ACG_LEVEL_ZERO_LOADER",
};
const acg__env_table acg__level_zero_env = {"level_zero", env_names,
                                            sizeof env_names / sizeof env_names[0]};

const acg_backend_i acg__backend_level_zero = {
    .version = ACG_BACKEND_VERSION,
    .name = "level_zero",
    .probe = acg__ze_probe,
    .describe = ze_describe,
    .device_open = ze_device_open,
    .device_close = ze_device_close,
    .query_capability = ze_query_capability,
    .buffer_alloc = ze_buffer_alloc,
    .buffer_free = ze_buffer_free,
    .pinned_alloc = ze_pinned_alloc,
    .pinned_free = ze_pinned_free,
    .stream_create = acg__ze_stream_create,
    .stream_destroy = acg__ze_stream_destroy,
    .stream_synchronize = acg__ze_stream_synchronize,
    .stream_query = acg__ze_stream_query,
    .event_create = acg__ze_event_create,
    .event_destroy = acg__ze_event_destroy,
    .event_record = acg__ze_event_record,
    .stream_wait_event = acg__ze_stream_wait_event,
    .event_query = acg__ze_event_query,
    .event_synchronize = acg__ze_event_synchronize,
    .copy_h2d = acg__ze_copy_h2d,
    .copy_d2h = acg__ze_copy_d2h,
    .copy_d2d = acg__ze_copy_d2d,
    .fill = acg__ze_fill,
    .kernel_load = ze_kernel_load,
    .kernel_unload = ze_kernel_unload,
    .kernel_launch = ze_kernel_launch,
    /* Graphs are the driver's own where it records captures (the capability's native_capture),
     * else regular command lists recorded from the description (graph.c). */
    .capture_begin = acg__ze_capture_begin,
    .capture_join = acg__ze_capture_join,
    .capture_end = acg__ze_capture_end,
    .capture_abort = acg__ze_capture_abort,
    .graph_instantiate = acg__ze_graph_instantiate,
    .graph_launch = acg__ze_graph_launch,
    .graph_update = acg__ze_graph_update,
    .graph_destroy = acg__ze_graph_destroy,
    /* A regular command list must not be reset or destroyed while the device may still
     * reference it: discarded graphs live until the pool's next successful capture. */
    .retain_discarded_graphs = true,
    .stream_get_native = acg__ze_stream_get_native,
    /* The driver's own word on the device (zeDeviceGetStatus); waits report a loss too. */
    .device_get_async_error = ze_device_get_async_error,
    .memory_query = ze_memory_query,
    .graph_get_native = acg__ze_graph_get_native,
    .buffer_get_native = ze_buffer_get_native,
    .device_get_native = ze_device_get_native,
    /* A mutable list's command patched alone, else the graph's list recorded again (graph.c). */
    .graph_update_node = acg__ze_graph_update_node,
};
