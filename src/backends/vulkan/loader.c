/* loader.c — the vulkan backend's loader: libvulkan.so.1 opened at run time, one instance, and
 * every physical device with a compute queue, each told usable or why not; the results' names
 * and their statuses. Devices, memory and streams are device.c's and stream.c's.
 *
 * The instance asks for Vulkan 1.2 and enables VK_KHR_portability_enumeration where the loader
 * offers it (so a portability driver, MoltenVK, is listed too). A device is usable when its API
 * version is 1.2 or later and it offers timeline semaphores, buffer device addresses and 64-bit
 * integers in shaders, which streams, events, the native handles and the kernels need. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan.h"

vk_loader acg__vk;

/* ---- results ------------------------------------------------------------------------------- */

const char *acg__vk_result_name(VkResult r) {
    switch (r) {
    case VK_NOT_READY:
        return "VK_NOT_READY";
    case VK_TIMEOUT:
        return "VK_TIMEOUT";
    case VK_INCOMPLETE:
        return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
        return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
        return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
        return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL:
        return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
        return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE:
        return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    case VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS:
        return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS";
    case VK_ERROR_UNKNOWN:
        return "VK_ERROR_UNKNOWN";
    default:
        return "a Vulkan error";
    }
}

acg_status acg__vk_check(VkResult r, const char *fn, const char *call) {
    if (r == VK_SUCCESS) {
        return ACG_OK;
    }
    acg_status st = ACG_ERR_DEVICE;
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
        st = ACG_ERR_OUT_OF_MEMORY;
        break;
    case VK_ERROR_DEVICE_LOST:
        st = ACG_ERR_DEVICE_LOST;
        break;
    default:
        break;
    }
    /* "d->vkQueueSubmit(args)" and "acg__vk.vkCreateDevice(args)" are named by the function */
    const char *end = strchr(call, '(');
    if (end == NULL) {
        end = call + strlen(call);
    }
    for (const char *c = call; c < end; c++) {
        if (*c == '.' || *c == '>') {
            call = c + 1;
        }
    }
    return acg__error(st, "%s: %.*s failed with %s (%d)", fn, (int)(end - call), call,
                      acg__vk_result_name(r), (int)r);
}

/* ---- the drivers' host memory --------------------------------------------------------------- */

/* Each block starts HEADER bytes before what the driver gets, which it must be aligned to and
 * which holds the block's size and that offset. */
typedef struct host_block {
    size_t size;
    size_t offset;
} host_block;

static _Atomic uint64_t fail_countdown; /* 0: disarmed; else allocations until the failure */
static atomic_bool fail_hit;
static _Atomic int64_t host_live;

void acg__vk_fail_host_alloc(uint64_t n) {
    atomic_store(&fail_hit, false);
    atomic_store(&fail_countdown, n);
}

bool acg__vk_host_alloc_failed(void) { return atomic_load(&fail_hit); }

int64_t acg__vk_host_alloc_live(void) { return atomic_load(&host_live); }

/* Calls the failure skips on this thread (acg__vk_host_alloc_spare). */
static _Thread_local uint32_t spared;

void acg__vk_host_alloc_spare(bool on) { spared += on ? 1u : (uint32_t)-1; }

/* Whether this allocation is the one to fail; a spared call's allocations are not counted. */
static bool fail_now(void) {
    if (spared != 0) {
        return false;
    }
    uint64_t left = atomic_load(&fail_countdown);
    while (left != 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1)) {
            if (left == 1) {
                atomic_store(&fail_hit, true);
                return true;
            }
            return false;
        }
    }
    return false;
}

static void *host_alloc(void *user, size_t size, size_t align, VkSystemAllocationScope scope) {
    (void)user;
    (void)scope;
    if (fail_now()) {
        return NULL;
    }
    const size_t a = align < sizeof(host_block) ? 16 : align;
    const size_t offset = (sizeof(host_block) + a - 1) / a * a;
    void *p = NULL;
    if (size > SIZE_MAX - offset ||
        posix_memalign(&p, a < sizeof(void *) ? sizeof(void *) : a, offset + size) != 0) {
        return NULL;
    }
    unsigned char *at = (unsigned char *)p + offset;
    ((host_block *)at)[-1] = (host_block){size, offset};
    atomic_fetch_add(&host_live, 1);
    return at;
}

static void host_free(void *user, void *mem) {
    (void)user;
    if (mem == NULL) {
        return;
    }
    const host_block b = ((host_block *)mem)[-1];
    atomic_fetch_sub(&host_live, 1);
    free((unsigned char *)mem - b.offset);
}

static void *host_realloc(void *user, void *mem, size_t size, size_t align,
                          VkSystemAllocationScope scope) {
    if (mem == NULL) {
        return host_alloc(user, size, align, scope);
    }
    if (size == 0) {
        host_free(user, mem);
        return NULL;
    }
    void *fresh = host_alloc(user, size, align, scope);
    if (fresh != NULL) {
        const size_t old = ((host_block *)mem)[-1].size;
        memcpy(fresh, mem, old < size ? old : size);
        host_free(user, mem);
    }
    return fresh;
}

const VkAllocationCallbacks acg__vk_host_allocator = {
    .pfnAllocation = host_alloc, .pfnReallocation = host_realloc, .pfnFree = host_free};

/* ---- the instance and its devices ------------------------------------------------------------ */

static bool instance_has_extension(const char *name) {
    PFN_vkEnumerateInstanceExtensionProperties enumerate =
        (PFN_vkEnumerateInstanceExtensionProperties)acg__vk.vkGetInstanceProcAddr(
            NULL, "vkEnumerateInstanceExtensionProperties");
    uint32_t n = 0;
    if (enumerate == NULL || enumerate(NULL, &n, NULL) != VK_SUCCESS || n == 0) {
        return false;
    }
    VkExtensionProperties *ext = acg__calloc(n, sizeof *ext);
    bool found = false;
    if (ext != NULL && enumerate(NULL, &n, ext) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n && !found; i++) {
            found = strcmp(ext[i].extensionName, name) == 0;
        }
    }
    acg__free(ext);
    return found;
}

static bool device_has_extension(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (acg__vk.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) {
        return false;
    }
    VkExtensionProperties *ext = acg__calloc(n, sizeof *ext);
    bool found = false;
    if (ext != NULL &&
        acg__vk.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, ext) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n && !found; i++) {
            found = strcmp(ext[i].extensionName, name) == 0;
        }
    }
    acg__free(ext);
    return found;
}

/* The first queue family with compute, or UINT32_MAX. */
static uint32_t compute_family(VkPhysicalDevice pd) {
    uint32_t n = 0;
    acg__vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = acg__calloc(n > 0 ? n : 1, sizeof *q);
    uint32_t family = UINT32_MAX;
    if (q != NULL) {
        acg__vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
        for (uint32_t i = 0; i < n && family == UINT32_MAX; i++) {
            if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0 && q[i].queueCount > 0) {
                family = i;
            }
        }
    }
    acg__free(q);
    return family;
}

/* Fills p for pd: its properties and whether the backend can use it. */
static void examine(VkPhysicalDevice pd, uint32_t family, vk_physical *p) {
    memset(p, 0, sizeof *p);
    p->pd = pd;
    p->family = family;
    acg__vk.vkGetPhysicalDeviceProperties(pd, &p->props);
    if (p->props.apiVersion < VK_API_VERSION_1_2) {
        snprintf(p->why, sizeof p->why, "it offers Vulkan %u.%u; the backend needs 1.2",
                 VK_API_VERSION_MAJOR(p->props.apiVersion),
                 VK_API_VERSION_MINOR(p->props.apiVersion));
        return;
    }
    p->host_memory_import = device_has_extension(pd, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
        .pNext = p->host_memory_import ? &host : NULL};
    p->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    p->driver.pNext = &m3;
    VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &p->driver};
    acg__vk.vkGetPhysicalDeviceProperties2(pd, &props2);
    p->driver.pNext = NULL;
    p->max_allocation = m3.maxMemoryAllocationSize;
    p->import_align = host.minImportedHostPointerAlignment;
    if (p->import_align == 0 || (p->import_align & (p->import_align - 1)) != 0) {
        p->host_memory_import = false; /* no usable alignment: no registration */
    }
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                   .pNext = &f12};
    acg__vk.vkGetPhysicalDeviceFeatures2(pd, &f);
    if (!f12.timelineSemaphore || !f12.bufferDeviceAddress || !f.features.shaderInt64) {
        snprintf(p->why, sizeof p->why, "it lacks %s",
                 !f12.timelineSemaphore     ? "timeline semaphores"
                 : !f12.bufferDeviceAddress ? "buffer device addresses"
                                            : "64-bit integers in shaders (shaderInt64)");
        return;
    }
    p->usable = true;
}

static bool resolve_instance(void) {
#define ACG__VK_RESOLVE(name)                                                                      \
    acg__vk.name = (PFN_##name)acg__vk.vkGetInstanceProcAddr(acg__vk.instance, #name);             \
    if (acg__vk.name == NULL) {                                                                    \
        snprintf(acg__vk.reason, sizeof acg__vk.reason,                                            \
                 "the Vulkan loader has no %s: a loader older than Vulkan 1.1", #name);            \
        return false;                                                                              \
    }
    ACG__VK_INSTANCE_FNS(ACG__VK_RESOLVE)
#undef ACG__VK_RESOLVE
    return true;
}

/* ACG_VULKAN_VALIDATION=1: the Khronos validation layer checks every call, and an error it
 * reports ends the process (abort, the message on stderr), so a suite run under it fails on the
 * first misuse; warnings go to the log, and so do errors that follow a host allocation the test
 * hook failed (the loader and the layer report those failures themselves). */
static VKAPI_ATTR VkBool32 VKAPI_CALL validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    (void)user;
    if ((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0 &&
        !acg__vk_host_alloc_failed()) {
        fprintf(stderr, "acg: vulkan: the validation layer reports an error: %s\n", data->pMessage);
        abort();
    }
    acg__log(ACG_LOG_WARN, "vulkan: the validation layer warns: %s", data->pMessage);
    return VK_FALSE;
}

static bool instance_has_layer(const char *name) {
    PFN_vkEnumerateInstanceLayerProperties enumerate =
        (PFN_vkEnumerateInstanceLayerProperties)acg__vk.vkGetInstanceProcAddr(
            NULL, "vkEnumerateInstanceLayerProperties");
    uint32_t n = 0;
    if (enumerate == NULL || enumerate(&n, NULL) != VK_SUCCESS || n == 0) {
        return false;
    }
    VkLayerProperties *layers = acg__calloc(n, sizeof *layers);
    bool found = false;
    if (layers != NULL && enumerate(&n, layers) == VK_SUCCESS) {
        for (uint32_t i = 0; i < n && !found; i++) {
            found = strcmp(layers[i].layerName, name) == 0;
        }
    }
    acg__free(layers);
    return found;
}

static bool create_instance(void) {
    PFN_vkEnumerateInstanceVersion version =
        (PFN_vkEnumerateInstanceVersion)acg__vk.vkGetInstanceProcAddr(NULL,
                                                                      "vkEnumerateInstanceVersion");
    acg__vk.api_version = VK_API_VERSION_1_0;
    if (version != NULL && version(&acg__vk.api_version) != VK_SUCCESS) {
        acg__vk.api_version = VK_API_VERSION_1_0;
    }
    if (acg__vk.api_version < VK_API_VERSION_1_2) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason,
                 "the Vulkan loader offers Vulkan %u.%u; the backend needs 1.2",
                 VK_API_VERSION_MAJOR(acg__vk.api_version),
                 VK_API_VERSION_MINOR(acg__vk.api_version));
        return false;
    }
    const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                   .pApplicationName = "acg",
                                   .pEngineName = "acg",
                                   .apiVersion = VK_API_VERSION_1_2};
    const char *ext[2], *layer[1];
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pApplicationInfo = &app,
                                 .ppEnabledExtensionNames = ext,
                                 .ppEnabledLayerNames = layer};
    if (instance_has_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        ext[info.enabledExtensionCount++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        info.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    const char *validate = acg__env_get("ACG_VULKAN_VALIDATION");
    const bool validation = validate != NULL && strcmp(validate, "1") == 0;
    const VkDebugUtilsMessengerCreateInfoEXT messenger = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
        .pfnUserCallback = validation_message};
    if (validation) {
        if (!instance_has_layer("VK_LAYER_KHRONOS_validation") ||
            !instance_has_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
            snprintf(acg__vk.reason, sizeof acg__vk.reason,
                     "ACG_VULKAN_VALIDATION=1, but the Khronos validation layer or "
                     "VK_EXT_debug_utils is missing (install vulkan-validationlayers)");
            return false;
        }
        layer[info.enabledLayerCount++] = "VK_LAYER_KHRONOS_validation";
        ext[info.enabledExtensionCount++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        info.pNext = &messenger; /* instance creation and destruction are checked too */
    }
    VkResult r = acg__vk.vkCreateInstance(&info, NULL, &acg__vk.instance);
    if (r != VK_SUCCESS) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason,
                 "vkCreateInstance failed with %s (%d): no Vulkan driver (install "
                 "mesa-vulkan-drivers for lavapipe, or a GPU's driver)",
                 acg__vk_result_name(r), (int)r);
        return false;
    }
    if (!resolve_instance()) {
        return false;
    }
    if (validation) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)acg__vk.vkGetInstanceProcAddr(
                acg__vk.instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerEXT m = VK_NULL_HANDLE;
        if (create == NULL || (r = create(acg__vk.instance, &messenger, NULL, &m)) != VK_SUCCESS) {
            snprintf(acg__vk.reason, sizeof acg__vk.reason,
                     "ACG_VULKAN_VALIDATION=1: vkCreateDebugUtilsMessengerEXT failed");
            return false;
        }
        acg__log(ACG_LOG_INFO, "vulkan: the Khronos validation layer checks every call");
    }
    return true;
}

/* Every physical device with a compute queue. */
static bool enumerate(void) {
    uint32_t n = 0;
    VkResult r = acg__vk.vkEnumeratePhysicalDevices(acg__vk.instance, &n, NULL);
    VkPhysicalDevice *pds = NULL;
    if (r == VK_SUCCESS && n > 0) {
        pds = acg__calloc(n, sizeof *pds);
        acg__vk.devices = acg__calloc(n, sizeof *acg__vk.devices);
        if (pds == NULL || acg__vk.devices == NULL) {
            snprintf(acg__vk.reason, sizeof acg__vk.reason, "out of host memory");
            acg__free(pds);
            return false;
        }
        r = acg__vk.vkEnumeratePhysicalDevices(acg__vk.instance, &n, pds);
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason,
                 "vkEnumeratePhysicalDevices failed with %s (%d)", acg__vk_result_name(r), (int)r);
        acg__free(pds);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t family = compute_family(pds[i]);
        if (family != UINT32_MAX) {
            examine(pds[i], family, &acg__vk.devices[acg__vk.n_devices++]);
        }
    }
    acg__free(pds);
    if (n > 0 && acg__vk.n_devices == 0) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason,
                 "the driver reports %u Vulkan device%s, none with a queue family that computes", n,
                 n == 1 ? "" : "s");
        return false;
    }
    return true;
}

static bool load(void) {
    const char *path = NULL;
    void *h = acg__dlopen_vendor("ACG_VULKAN_LOADER", "libvulkan.so.1", "no Vulkan loader",
                                 "install libvulkan1 and a driver (mesa-vulkan-drivers)", &path,
                                 acg__vk.reason, sizeof acg__vk.reason);
    if (h == NULL) {
        return false;
    }
    acg__vk.handle = h;
    *(void **)&acg__vk.vkGetInstanceProcAddr = dlsym(h, "vkGetInstanceProcAddr");
    if (acg__vk.vkGetInstanceProcAddr == NULL) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason, "%s has no vkGetInstanceProcAddr", path);
        return false;
    }
    acg__vk.vkCreateInstance =
        (PFN_vkCreateInstance)acg__vk.vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    if (acg__vk.vkCreateInstance == NULL) {
        snprintf(acg__vk.reason, sizeof acg__vk.reason, "%s has no vkCreateInstance", path);
        return false;
    }
    return create_instance() && enumerate();
}

acg_status acg__vk_probe(int *n, const char **reason) {
    static bool loaded, ok; /* the registry probes once, under its lock */
    if (!loaded) {
        ok = load();
        loaded = true;
    }
    if (!ok) {
        *reason = acg__vk.reason;
        return ACG_ERR_UNAVAILABLE;
    }
    *n = (int)acg__vk.n_devices;
    *reason = "";
    return ACG_OK;
}
