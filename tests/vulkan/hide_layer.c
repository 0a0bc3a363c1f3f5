/* hide_layer.c — a Vulkan instance layer for the tests that makes the driver below it look less
 * able than it is, so that the vulkan backend's refusals of a device can be reached on lavapipe
 * (test_vulkan_probe). TEST_VK_HIDE names what it hides (not an ACG_ name: acg warns of
 * ACG_ variables it does not know):
 *
 *   compute   the compute bit of every queue family
 *   api       Vulkan 1.2: the devices say 1.1
 *   timeline  the timelineSemaphore feature
 *   address   the bufferDeviceAddress feature
 *   int64     the shaderInt64 feature
 *
 * It intercepts only instance-level queries and passes every other call to the next layer or
 * the driver; the tests that load it open no device. The loader finds it by its manifest
 * (VK_LAYER_PATH, the build's tests/vulkan folder) and enables it by name (VK_INSTANCE_LAYERS,
 * VK_LAYER_ACG_test_hide). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>

/* One instance at a time: the tests create one. */
static PFN_vkGetInstanceProcAddr next_gipa;
static PFN_vkGetPhysicalDeviceQueueFamilyProperties next_queue_families;
static PFN_vkGetPhysicalDeviceProperties next_properties;
static PFN_vkGetPhysicalDeviceFeatures2 next_features2;

static bool hides(const char *what) {
    const char *mode = getenv("TEST_VK_HIDE");
    return mode != NULL && strcmp(mode, what) == 0;
}

static VKAPI_ATTR void VKAPI_CALL hide_queue_families(VkPhysicalDevice pd, uint32_t *n,
                                                      VkQueueFamilyProperties *props) {
    next_queue_families(pd, n, props);
    for (uint32_t i = 0; props != NULL && i < *n && hides("compute"); i++) {
        props[i].queueFlags &= ~(VkQueueFlags)VK_QUEUE_COMPUTE_BIT;
    }
}

static VKAPI_ATTR void VKAPI_CALL hide_properties(VkPhysicalDevice pd,
                                                  VkPhysicalDeviceProperties *props) {
    next_properties(pd, props);
    if (hides("api")) {
        props->apiVersion = VK_API_VERSION_1_1;
    }
}

static VKAPI_ATTR void VKAPI_CALL hide_features2(VkPhysicalDevice pd,
                                                 VkPhysicalDeviceFeatures2 *features) {
    next_features2(pd, features);
    if (hides("int64")) {
        features->features.shaderInt64 = VK_FALSE;
    }
    for (VkBaseOutStructure *s = features->pNext; s != NULL; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES) {
            VkPhysicalDeviceVulkan12Features *f12 = (VkPhysicalDeviceVulkan12Features *)s;
            if (hides("timeline")) {
                f12->timelineSemaphore = VK_FALSE;
            }
            if (hides("address")) {
                f12->bufferDeviceAddress = VK_FALSE;
            }
        }
    }
}

static VKAPI_ATTR VkResult VKAPI_CALL hide_create_instance(const VkInstanceCreateInfo *info,
                                                           const VkAllocationCallbacks *alloc,
                                                           VkInstance *instance) {
    /* The loader's link to the next layer: taken, and advanced for it. */
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link != NULL && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                             link->function == VK_LAYER_LINK_INFO)) {
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    }
    if (link == NULL) {
        return VK_ERROR_INITIALIZATION_FAILED;
    }
    next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(NULL, "vkCreateInstance");
    VkResult r = create(info, alloc, instance);
    if (r != VK_SUCCESS) {
        return r;
    }
    next_queue_families = (PFN_vkGetPhysicalDeviceQueueFamilyProperties)next_gipa(
        *instance, "vkGetPhysicalDeviceQueueFamilyProperties");
    next_properties =
        (PFN_vkGetPhysicalDeviceProperties)next_gipa(*instance, "vkGetPhysicalDeviceProperties");
    next_features2 =
        (PFN_vkGetPhysicalDeviceFeatures2)next_gipa(*instance, "vkGetPhysicalDeviceFeatures2");
    return VK_SUCCESS;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL hide_gipa(VkInstance instance, const char *name);

static const struct {
    const char *name;
    PFN_vkVoidFunction fn;
} intercepts[] = {
    {"vkGetInstanceProcAddr", (PFN_vkVoidFunction)hide_gipa},
    {"vkCreateInstance", (PFN_vkVoidFunction)hide_create_instance},
    {"vkGetPhysicalDeviceQueueFamilyProperties", (PFN_vkVoidFunction)hide_queue_families},
    {"vkGetPhysicalDeviceProperties", (PFN_vkVoidFunction)hide_properties},
    {"vkGetPhysicalDeviceFeatures2", (PFN_vkVoidFunction)hide_features2},
};

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL hide_gipa(VkInstance instance, const char *name) {
    for (size_t i = 0; i < sizeof intercepts / sizeof intercepts[0]; i++) {
        if (strcmp(name, intercepts[i].name) == 0) {
            return intercepts[i].fn;
        }
    }
    return next_gipa != NULL ? next_gipa(instance, name) : NULL;
}

VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v);
VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    if (v->loaderLayerInterfaceVersion > 2) {
        v->loaderLayerInterfaceVersion = 2;
    }
    v->pfnGetInstanceProcAddr = hide_gipa;
    v->pfnGetDeviceProcAddr = NULL; /* no device-level calls of its own */
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
