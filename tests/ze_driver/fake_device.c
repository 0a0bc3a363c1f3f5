/* fake_device.c — the Level Zero test driver's zeInit, driver, devices and contexts.
 *
 * One driver with ACGTEST_ZE_DEVICES GPUs (default 1) that look like a discrete Intel GPU of
 * the Data Center Max kind: numbers acg reads (group sizes, memory, queue groups) are plausible,
 * the rest are placeholders. A device has two command queue groups: ordinal 0 runs everything,
 * ordinal 1 only copies and fills, so a backend that picks its ordinal by the flags is tested.
 */
#include "fake_ze_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acgtest_ze.h" /* ACGTEST_ZE_LOST_RELEASES */

/* The copy group's fill pattern limit is this driver's choice (Intel's was not verified). */
const struct fake_group fake__groups[FAKE_GROUP_COUNT] = {
    [FAKE_GROUP_COMPUTE] = {ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE |
                                ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY |
                                ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COOPERATIVE_KERNELS,
                            FAKE_MAX_PATTERN, 4},
    [FAKE_GROUP_COPY] = {ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COPY, 4, 1},
};

#define DEVICE_NAME "acg Level Zero test driver"

/* ---- initialization and the driver ---------------------------------------------------------- */

ze_result_t fake_zeInit(ze_init_flags_t flags) {
    FAKE_ENTER(zeInit);
    if (flags > (ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY)) {
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    }
    if (flags == ZE_INIT_FLAG_VPU_ONLY) {
        return ZE_RESULT_ERROR_UNINITIALIZED; /* it has GPUs only */
    }
    return (ze_result_t)fake__init((int)fake__cfg.init_fail, &fake__g.lock, &fake__g.initialized);
}

/* (lock held) The preamble of a driver call: initialized, and h this driver. */
static ze_result_t driver_check(ze_driver_handle_t h) {
    ze_result_t r = fake__ready();
    if (r != ZE_RESULT_SUCCESS) {
        return r;
    }
    if (h == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    }
    if ((void *)h != (void *)&fake__g.driver) {
        fake__violation("%p is not this driver's handle", (void *)h);
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

/* Entry points that only read read-only state take the lock just for the checks. */
static ze_result_t ready(void) {
    pthread_mutex_lock(&fake__g.lock);
    return fake__unlock(fake__ready());
}

static ze_result_t driver_ready(ze_driver_handle_t h) {
    pthread_mutex_lock(&fake__g.lock);
    return fake__unlock(driver_check(h));
}

static ze_result_t device_ready(ze_device_handle_t h, struct fake_device **out) {
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready();
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__device(h, out);
    }
    return fake__unlock(r);
}

/* Level Zero's two calls for a list of n items, after the checks that gave r (returned as it
 * came unless SUCCESS): with *pCount 0 or no array, the count in *pCount and *want 0; else *want
 * items to write, min(*pCount, n), and the caller sets *pCount to it once they are written (a
 * failure writing them leaves it). With none to write *pCount becomes 0 here: the driver updates
 * the count to the number available. */
static ze_result_t list_query(ze_result_t r, uint32_t *pCount, const void *items, uint32_t n,
                              uint32_t *want) {
    *want = 0;
    if (r != ZE_RESULT_SUCCESS) {
        return r;
    }
    if (pCount == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (*pCount == 0 || items == NULL) {
        *pCount = n;
    } else {
        *want = *pCount < n ? *pCount : n;
        if (*want == 0) {
            *pCount = 0;
        }
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake_zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers) {
    FAKE_ENTER(zeDriverGet);
    uint32_t want;
    ze_result_t r = list_query(ready(), pCount, phDrivers, 1, &want);
    if (want > 0) {
        phDrivers[0] = (ze_driver_handle_t)(void *)&fake__g.driver;
        *pCount = want;
    }
    return r;
}

ze_result_t fake_zeDriverGetApiVersion(ze_driver_handle_t hDriver, ze_api_version_t *version) {
    FAKE_ENTER(zeDriverGetApiVersion);
    ze_result_t r = fake__given(driver_ready(hDriver), version);
    if (r == ZE_RESULT_SUCCESS) {
        *version = (ze_api_version_t)fake__cfg.api_version;
    }
    return r;
}

ze_result_t fake_zeDriverGetProperties(ze_driver_handle_t hDriver,
                                       ze_driver_properties_t *pDriverProperties) {
    FAKE_ENTER(zeDriverGetProperties);
    ze_result_t r = driver_ready(hDriver);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(pDriverProperties, ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES,
                        "zeDriverGetProperties", "pDriverProperties");
    }
    if (r == ZE_RESULT_SUCCESS) {
        memset(&pDriverProperties->uuid, 0, sizeof pDriverProperties->uuid);
        memcpy(pDriverProperties->uuid.id, "acg-test-ze", 11);
        pDriverProperties->driverVersion = 1;
    }
    return r;
}

/* The offered extensions, in fake_ext order. */
static uint32_t offered_extensions(ze_driver_extension_properties_t *out, uint32_t max) {
    uint32_t n = 0;
    for (int i = 0; i < FAKE_EXT_COUNT; i++) {
        if (!fake__cfg.extensions[i]) {
            continue;
        }
        if (out != NULL && n < max) {
            memset(&out[n], 0, sizeof out[n]);
            snprintf(out[n].name, sizeof out[n].name, "%s", fake__exts[i].name);
            out[n].version = fake__cfg.extensions[i];
        }
        n++;
    }
    return n;
}

ze_result_t fake_zeDriverGetExtensionProperties(ze_driver_handle_t hDriver, uint32_t *pCount,
                                                ze_driver_extension_properties_t *pProps) {
    FAKE_ENTER(zeDriverGetExtensionProperties);
    uint32_t want;
    ze_result_t r =
        list_query(driver_ready(hDriver), pCount, pProps, offered_extensions(NULL, 0), &want);
    if (want > 0) {
        offered_extensions(pProps, want);
        *pCount = want;
    }
    return r;
}

/* Names not served answer INVALID_ARGUMENT with NULL, as Intel's driver does (the 1.4
 * specification lists no code for it). */
ze_result_t fake_zeDriverGetExtensionFunctionAddress(ze_driver_handle_t hDriver, const char *name,
                                                     void **ppFunctionAddress) {
    FAKE_ENTER(zeDriverGetExtensionFunctionAddress);
    ze_result_t r = driver_ready(hDriver);
    if (r != ZE_RESULT_SUCCESS) {
        return r;
    }
    if (name == NULL || ppFunctionAddress == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    return fake__ext_function(name, ppFunctionAddress);
}

/* ---- devices -------------------------------------------------------------------------------- */

ze_result_t fake_zeDeviceGet(ze_driver_handle_t hDriver, uint32_t *pCount,
                             ze_device_handle_t *phDevices) {
    FAKE_ENTER(zeDeviceGet);
    uint32_t want;
    ze_result_t r =
        list_query(driver_ready(hDriver), pCount, phDevices, (uint32_t)fake__cfg.devices, &want);
    for (uint32_t i = 0; i < want; i++) {
        phDevices[i] = (ze_device_handle_t)(void *)&fake__g.devices[i];
    }
    if (want > 0) {
        *pCount = want;
    }
    return r;
}

/* ZE_extension_device_usablemem_size_properties: the device's memory less its live
 * allocations. */
static void usable_memory(const struct fake_device *d, ze_device_properties_t *props) {
    if (fake__cfg.extensions[FAKE_EXT_USABLE_MEM] == 0) {
        return; /* a driver without the extension knows no such structure, and ignores it */
    }
    for (void *p = props->pNext; p != NULL;) {
        ze_base_properties_t head;
        memcpy(&head, p, sizeof head);
        if (head.stype == ACG_ZE_STRUCTURE_TYPE_DEVICE_USABLEMEM_SIZE_EXT_PROPERTIES) {
            acg_ze_device_usablemem_size_ext_properties_t *u = p;
            pthread_mutex_lock(&fake__g.lock);
            u->currUsableMemSize = fake__cfg.mem_bytes - d->allocated;
            pthread_mutex_unlock(&fake__g.lock);
        }
        p = head.pNext;
    }
}

static void device_properties(const struct fake_device *d, void *props) {
    ze_device_properties_t *p = props;
    p->type = ZE_DEVICE_TYPE_GPU;
    p->vendorId = 0x8086;
    p->deviceId = 0x0bd5;
    p->flags = 0; /* discrete, no sub-devices, no ECC, not on demand paging */
    p->subdeviceId = 0;
    p->coreClockRate = 1600;
    p->maxMemAllocSize = fake__cfg.mem_bytes;
    p->maxHardwareContexts = 65536;
    p->maxCommandQueuePriority = 0;
    p->numThreadsPerEU = 8;
    p->physicalEUSimdWidth = 16;
    p->numEUsPerSubslice = 8;
    p->numSubslicesPerSlice = 64;
    p->numSlices = 1;
    p->timerResolution = 1;
    p->timestampValidBits = 64;
    p->kernelTimestampValidBits = 32;
    memset(&p->uuid, 0, sizeof p->uuid);
    memcpy(p->uuid.id, "acg-test-ze-dev", 15);
    p->uuid.id[15] = (uint8_t)d->index;
    memset(p->name, 0, sizeof p->name);
    snprintf(p->name, sizeof p->name, "%s", DEVICE_NAME);
    fake__mutable_properties(p);
    fake__graph_properties(p);
    usable_memory(d, p);
}

static void compute_properties(const struct fake_device *d, void *props) {
    (void)d;
    ze_device_compute_properties_t *p = props;
    p->maxTotalGroupSize = 1024;
    p->maxGroupSizeX = p->maxGroupSizeY = p->maxGroupSizeZ = 1024;
    p->maxGroupCountX = p->maxGroupCountY = p->maxGroupCountZ = 0xffffffffu;
    p->maxSharedLocalMemory = 131072;
    p->numSubGroupSizes = 2;
    memset(p->subGroupSizes, 0, sizeof p->subGroupSizes);
    p->subGroupSizes[0] = 16;
    p->subGroupSizes[1] = 32;
}

/* A device's property struct (`what`, of `stype`), filled by fill. */
static ze_result_t device_query(ze_device_handle_t hDevice, void *props, ze_structure_type_t stype,
                                const char *fn, const char *what,
                                void (*fill)(const struct fake_device *d, void *props)) {
    struct fake_device *d;
    ze_result_t r = device_ready(hDevice, &d);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(props, stype, fn, what);
    }
    if (r == ZE_RESULT_SUCCESS) {
        fill(d, props);
    }
    return r;
}

ze_result_t fake_zeDeviceGetProperties(ze_device_handle_t hDevice,
                                       ze_device_properties_t *pDeviceProperties) {
    FAKE_ENTER(zeDeviceGetProperties);
    return device_query(hDevice, pDeviceProperties, ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES,
                        "zeDeviceGetProperties", "pDeviceProperties", device_properties);
}

ze_result_t fake_zeDeviceGetComputeProperties(ze_device_handle_t hDevice,
                                              ze_device_compute_properties_t *pComputeProperties) {
    FAKE_ENTER(zeDeviceGetComputeProperties);
    return device_query(hDevice, pComputeProperties, ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES,
                        "zeDeviceGetComputeProperties", "pComputeProperties", compute_properties);
}

ze_result_t fake_zeDeviceGetMemoryProperties(ze_device_handle_t hDevice, uint32_t *pCount,
                                             ze_device_memory_properties_t *pMemProperties) {
    FAKE_ENTER(zeDeviceGetMemoryProperties);
    struct fake_device *d;
    uint32_t want;
    ze_result_t r = list_query(device_ready(hDevice, &d), pCount, pMemProperties, 1, &want);
    if (want == 0) {
        return r;
    }
    r = fake__stype(pMemProperties, ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES,
                    "zeDeviceGetMemoryProperties", "pMemProperties[0]");
    if (r == ZE_RESULT_SUCCESS) {
        ze_device_memory_properties_t *p = pMemProperties;
        p->flags = 0;
        p->maxClockRate = 3200;
        p->maxBusWidth = 8192;
        p->totalSize = fake__cfg.mem_bytes;
        memset(p->name, 0, sizeof p->name);
        snprintf(p->name, sizeof p->name, "HBM");
        *pCount = want;
    }
    return r;
}

ze_result_t
fake_zeDeviceGetCommandQueueGroupProperties(ze_device_handle_t hDevice, uint32_t *pCount,
                                            ze_command_queue_group_properties_t *pProps) {
    FAKE_ENTER(zeDeviceGetCommandQueueGroupProperties);
    struct fake_device *d;
    uint32_t want;
    ze_result_t r = list_query(device_ready(hDevice, &d), pCount, pProps, FAKE_GROUP_COUNT, &want);
    for (uint32_t i = 0; i < want && r == ZE_RESULT_SUCCESS; i++) {
        r = fake__stype(&pProps[i], ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES,
                        "zeDeviceGetCommandQueueGroupProperties",
                        "pCommandQueueGroupProperties[i]");
    }
    for (uint32_t i = 0; i < want && r == ZE_RESULT_SUCCESS; i++) {
        pProps[i].flags = fake__groups[i].flags;
        pProps[i].maxMemoryFillPatternSize = fake__groups[i].max_pattern;
        pProps[i].numQueues = fake__groups[i].queues;
    }
    if (want > 0 && r == ZE_RESULT_SUCCESS) {
        *pCount = want;
    }
    return r;
}

/* ---- lost devices --------------------------------------------------------------------------- */

/* Intel's driver answers from its engines' hang detection, without waiting for any work. */
ze_result_t fake_zeDeviceGetStatus(ze_device_handle_t hDevice) {
    FAKE_ENTER(zeDeviceGetStatus);
    struct fake_device *d;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready();
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__device(hDevice, &d);
    }
    if (r == ZE_RESULT_SUCCESS && d->lost) {
        r = ZE_RESULT_ERROR_DEVICE_LOST;
    }
    return fake__unlock(r);
}

int fake__lost(uint32_t devices) {
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        if ((devices & (1u << i)) && fake__g.devices[i].lost) {
            return 1;
        }
    }
    return 0;
}

ze_result_t fake__released(uint32_t devices) {
    for (int i = 0; i < FAKE_MAX_DEVICES; i++) {
        if ((devices & (1u << i)) && fake__g.devices[i].lost == ACGTEST_ZE_LOST_RELEASES) {
            return ZE_RESULT_ERROR_DEVICE_LOST;
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------------------- */

ze_result_t fake_zeContextCreate(ze_driver_handle_t hDriver, const ze_context_desc_t *desc,
                                 ze_context_handle_t *phContext) {
    static const char fn[] = "zeContextCreate";
    FAKE_ENTER(zeContextCreate);
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(driver_check(hDriver), out);
    FAKE_FAIL_IF(desc == NULL || phContext == NULL, ZE_RESULT_ERROR_INVALID_NULL_POINTER, out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_CONTEXT_DESC, fn, "desc"), out);
    FAKE_FAIL_IF(desc->flags > ZE_CONTEXT_FLAG_TBD, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    struct fake_context *ctx = fake__obj_new(sizeof *ctx, FAKE_CONTEXT);
    FAKE_FAIL_IF(ctx == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    *phContext = (ze_context_handle_t)(void *)ctx;
out:
    return fake__unlock(r);
}

/* (lock held) The context an object was created on. */
static struct fake_context *context_of(const struct fake_obj *o) {
    switch (o->kind) {
    case FAKE_QUEUE:
        return ((const struct fake_queue *)o)->ctx;
    case FAKE_LIST:
        return ((const struct fake_list *)o)->ctx;
    case FAKE_POOL:
        return ((const struct fake_pool *)o)->ctx;
    case FAKE_EVENT:
        return ((const struct fake_event *)o)->pool->ctx;
    case FAKE_FENCE:
        return ((const struct fake_fence *)o)->queue->ctx;
    case FAKE_MODULE:
        return ((const struct fake_module *)o)->ctx;
    case FAKE_KERNEL:
        return ((const struct fake_kernel *)o)->module->ctx;
    default:
        return NULL; /* contexts, and build logs, which outlive their module */
    }
}

/* (lock held) Why a context may not be destroyed yet (fake__destroy): objects made on it must go
 * first (HANDLE_OBJECT_IN_USE otherwise, a violation: a real driver would leave them dangling). */
static int context_busy(void *obj, const char *fn) {
    long children = 0;
    enum fake_kind first = FAKE_CONTEXT;
    for (int k = 0; k < FAKE_KIND_COUNT; k++) {
        for (size_t i = 0; i < fake__g.objs[k].n; i++) {
            if (context_of(fake__g.objs[k].v[i]) == obj && children++ == 0) {
                first = (enum fake_kind)k;
            }
        }
    }
    if (children > 0) {
        fake__violation("%s: the context still has %ld objects (a %s first)", fn, children,
                        fake__kind_name(first));
    }
    return children > 0;
}

/* Allocations may be freed with the context, as the specification allows, but acgtest_ze_live
 * keeps counting them (they are not released): acg frees its own. */
static void context_free(void *obj) {
    struct fake_context *ctx = obj;
    long freed = fake__ranges_reclaim(ctx);
    if (freed > 0) {
        fprintf(stderr,
                "acg Level Zero test driver: zeContextDestroy freed %ld allocations still live\n",
                freed);
    }
    fake__obj_remove(&ctx->obj);
    free(ctx);
}

ze_result_t fake_zeContextDestroy(ze_context_handle_t hContext) {
    FAKE_ENTER(zeContextDestroy);
    return fake__destroy(FAKE_CONTEXT, hContext, "zeContextDestroy", context_busy, context_free);
}
