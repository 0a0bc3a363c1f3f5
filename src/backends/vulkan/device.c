/* device.c — the vulkan backend's devices and memory, and its table of slots.
 *
 * A device is a VkDevice with one queue of the first family that computes, timeline semaphores
 * and buffer device addresses on. Device memory is a VkBuffer bound to memory of its own, of
 * the first device-local type (lavapipe's memory is all device-local and host-visible), with
 * its device address; pinned memory a VkBuffer bound to host-visible, coherent memory, mapped
 * for the caller, and kept in a list so that a copy from or to it becomes a copy of buffers. */
#include <stdio.h>
#include <string.h>

#include "vulkan.h"

/* ---- describing a device -------------------------------------------------------------------- */

static void describe_physical(const vk_physical *p, acg_capability *out) {
    snprintf(out->name, sizeof out->name, "%.127s", p->props.deviceName);
    out->available = p->usable;
    out->pinned_memory = p->usable;
    out->graphs = p->usable;
    out->graph_update = p->usable;
    out->graph_node_update = p->usable;
    out->graph_node_update_grid = p->usable;
    out->multi_stream_capture = p->usable;
    out->graph_pinned_replay = p->usable;
    out->pinned_register = p->usable && p->host_memory_import;
    out->host_cpu = p->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    VkPhysicalDeviceMemoryProperties mp;
    acg__vk.vkGetPhysicalDeviceMemoryProperties(p->pd, &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++) {
        if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0 &&
            mp.memoryHeaps[h].size > out->memory_bytes) {
            out->memory_bytes = mp.memoryHeaps[h].size;
        }
    }
    const uint32_t v = p->props.apiVersion;
    if (!p->usable) {
        snprintf(out->detail, sizeof out->detail, "Vulkan %u.%u; not usable: %s",
                 VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), p->why);
        return;
    }
    /* The detail is a summary: the driver's strings are cut short where they are long. */
    snprintf(out->detail, sizeof out->detail,
             "Vulkan %u.%u.%u, driver %.48s (%.64s); graphs: secondary command buffers, an "
             "update rewrites arguments in place",
             VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v),
             p->driver.driverName, p->driver.driverInfo);
}

static acg_status vk_describe(int index, acg_capability *out) {
    describe_physical(&acg__vk.devices[index], out);
    return ACG_OK;
}

/* ---- opening and closing --------------------------------------------------------------------- */

/* The first memory type of mp among `bits` with every flag of `want`, or UINT32_MAX. */
static uint32_t memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                            VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        if ((bits & (1u << i)) != 0 && (mp->memoryTypes[i].propertyFlags & want) == want) {
            return i;
        }
    }
    return UINT32_MAX;
}

static acg_status resolve_device(vk_device *d, const char *fn) {
#define ACG__VK_RESOLVE(name)                                                                      \
    d->name = (PFN_##name)acg__vk.vkGetDeviceProcAddr(d->device, #name);                           \
    if (d->name == NULL) {                                                                         \
        return acg__error(ACG_ERR_UNAVAILABLE, "%s: the Vulkan device has no %s", fn, #name);      \
    }
    ACG__VK_DEVICE_FNS(ACG__VK_RESOLVE)
#undef ACG__VK_RESOLVE
    return ACG_OK;
}

static acg_status vk_device_open(int index, const char *options, acg__bk_device **out) {
    static const char fn[] = "acg_device_open";
    const vk_physical *p = &acg__vk.devices[index];
    if (options[0] != '\0') {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the vulkan backend takes no options (got \"%s\")", fn, options);
    }
    if (!p->usable) {
        return acg__error(ACG_ERR_UNAVAILABLE, "%s: vulkan:%d (%s) is not usable: %s", fn, index,
                          p->props.deviceName, p->why);
    }
    vk_device *d = acg__calloc(1, sizeof *d);
    if (d == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    d->phys = p;
    acg_status st = ACG_OK;
    const float priority = 1.0f;
    const VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           .queueFamilyIndex = p->family,
                                           .queueCount = 1,
                                           .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .timelineSemaphore = VK_TRUE,
        .bufferDeviceAddress = VK_TRUE};
    /* Registering the caller's host memory imports it, where the device can. */
    const char *host_import = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    const VkPhysicalDeviceFeatures2 features = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &f12,
        .features = {.shaderInt64 = VK_TRUE}}; /* the kernels' 64-bit sizes and products */
    const VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                     .pNext = &features,
                                     .queueCreateInfoCount = 1,
                                     .enabledExtensionCount = p->host_memory_import ? 1 : 0,
                                     .ppEnabledExtensionNames = &host_import,
                                     .pQueueCreateInfos = &queue};
    /* The device's objects allocate host memory through acg__vk_host_allocator. */
    VK_CHECK(acg__vk.vkCreateDevice(p->pd, &info, &acg__vk_host_allocator, &d->device), fn,
             out_free);
    if ((st = resolve_device(d, fn)) != ACG_OK) {
        goto out_destroy;
    }
    if (p->host_memory_import) {
        d->vkGetMemoryHostPointerPropertiesEXT =
            (PFN_vkGetMemoryHostPointerPropertiesEXT)acg__vk.vkGetDeviceProcAddr(
                d->device, "vkGetMemoryHostPointerPropertiesEXT");
    }
    d->vkGetDeviceQueue(d->device, p->family, 0, &d->queue);
    VkPhysicalDeviceMemoryProperties mp;
    acg__vk.vkGetPhysicalDeviceMemoryProperties(p->pd, &mp);
    d->device_type = memory_type(&mp, UINT32_MAX, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (d->device_type == UINT32_MAX) {
        d->device_type = 0;
    }
    d->host_type =
        memory_type(&mp, UINT32_MAX,
                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (d->host_type == UINT32_MAX) {
        st = acg__error(ACG_ERR_UNAVAILABLE, "%s: %s has no host-visible, coherent memory", fn,
                        p->props.deviceName);
        goto out_destroy;
    }
    d->heap_bytes = mp.memoryHeaps[mp.memoryTypes[d->device_type].heapIndex].size;
    /* Every kernel's set 0: one storage buffer, its argument block, at a dynamic offset. */
    const VkDescriptorSetLayoutBinding binding = {.binding = 0,
                                                  .descriptorType =
                                                      VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC,
                                                  .descriptorCount = 1,
                                                  .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    const VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = 1,
        .pBindings = &binding};
    VK_CHECK(d->vkCreateDescriptorSetLayout(d->device, &li, NULL, &d->args_layout), fn,
             out_destroy);
    const uint32_t align = (uint32_t)p->props.limits.minStorageBufferOffsetAlignment;
    d->args_stride = (ACG_VK_ARGS_BYTES + align - 1) / align * align;
    pthread_mutex_init(&d->queue_lock, NULL);
    pthread_mutex_init(&d->pinned_lock, NULL);
    *out = (acg__bk_device *)d;
    return ACG_OK;

out_destroy:
    if (d->vkDestroyDevice != NULL) {
        d->vkDestroyDevice(d->device, &acg__vk_host_allocator);
    }
out_free:
    acg__free(d);
    return st;
}

static void vk_device_close(acg__bk_device *dev) {
    vk_device *d = vdev(dev);
    d->vkDeviceWaitIdle(d->device);
    /* Pinned memory the user did not free goes with the device. */
    for (vk_pinned *p = d->pinned; p != NULL;) {
        vk_pinned *next = p->next;
        acg__vk_buffer_unmake(d, p->buffer, p->memory);
        acg__free(p);
        p = next;
    }
    d->vkDestroyDescriptorSetLayout(d->device, d->args_layout, NULL);
    d->vkDestroyDevice(d->device, &acg__vk_host_allocator);
    pthread_mutex_destroy(&d->queue_lock);
    pthread_mutex_destroy(&d->pinned_lock);
    acg__free(d);
}

/* Mesa's common runtime, which lavapipe 22.3 runs on, follows each submission on a thread of its
 * own and emulates timeline semaphores: after a submission's signal is already visible it
 * releases the points the submission waited for (vk_queue_submit_cleanup calls
 * vk_sync_timeline_point_release, which locks the waited semaphore's mutex and puts the point
 * on its free list). Vulkan lets a semaphore go once the batches that refer to it are seen
 * complete, so destroyed in between, the semaphore is used after it is freed and the point's
 * memory leaks. vkQueueWaitIdle returns only when that thread is done with every submission. */
void acg__vk_semaphore_destroy(vk_device *d, VkSemaphore sem, bool waited) {
    if (waited) {
        pthread_mutex_lock(&d->queue_lock);
        d->vkQueueWaitIdle(d->queue); /* on a lost device there is nothing to wait for */
        pthread_mutex_unlock(&d->queue_lock);
    }
    d->vkDestroySemaphore(d->device, sem, NULL);
}

static acg_status vk_query_capability(acg__bk_device *dev, acg_capability *out) {
    describe_physical(vdev(dev)->phys, out);
    return ACG_OK;
}

/* ---- memory ---------------------------------------------------------------------------------- */

acg_status acg__vk_buffer_make(vk_device *d, VkDeviceSize size, VkBufferUsageFlags usage,
                               uint32_t type, bool map, VkBuffer *buffer, VkDeviceMemory *memory,
                               void **mapped, const char *fn) {
    acg_status st = ACG_OK;
    *buffer = VK_NULL_HANDLE;
    *memory = VK_NULL_HANDLE;
    char what[96]; /* a failure names the size */
    snprintf(what, sizeof what, "%s: %llu bytes", fn, (unsigned long long)size);
    fn = what;
    const VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                     .size = size,
                                     .usage = usage,
                                     .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(d->vkCreateBuffer(d->device, &info, NULL, buffer), fn, out);
    VkMemoryRequirements req;
    d->vkGetBufferMemoryRequirements(d->device, *buffer, &req);
    if ((req.memoryTypeBits & (1u << type)) == 0) {
        st = acg__error(ACG_ERR_DEVICE, "%s: memory type %u cannot hold a buffer (types 0x%x)", fn,
                        type, req.memoryTypeBits);
        goto out_buffer;
    }
    const VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                             .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    const VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = (usage & VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT) != 0 ? &flags : NULL,
        .allocationSize = req.size,
        .memoryTypeIndex = type};
    VK_CHECK(d->vkAllocateMemory(d->device, &alloc, NULL, memory), fn, out_buffer);
    VK_CHECK(d->vkBindBufferMemory(d->device, *buffer, *memory, 0), fn, out_memory);
    if (map) {
        VK_CHECK(d->vkMapMemory(d->device, *memory, 0, VK_WHOLE_SIZE, 0, mapped), fn, out_memory);
    }
    return ACG_OK;

out_memory:
    d->vkFreeMemory(d->device, *memory, NULL);
    *memory = VK_NULL_HANDLE;
out_buffer:
    d->vkDestroyBuffer(d->device, *buffer, NULL);
    *buffer = VK_NULL_HANDLE;
out:
    return st;
}

void acg__vk_buffer_unmake(vk_device *d, VkBuffer buffer, VkDeviceMemory memory) {
    d->vkDestroyBuffer(d->device, buffer, NULL);
    d->vkFreeMemory(d->device, memory, NULL); /* unmaps it too */
}

/* What every buffer may be used for: kernels' storage through device addresses, and copies. */
#define VK_MEM_USAGE                                                                               \
    (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |                       \
     VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT)

acg_status acg__vk_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **out) {
    static const char fn[] = "acg_buffer_alloc";
    vk_device *d = vdev(dev);
    vk_mem *m = acg__calloc(1, sizeof *m);
    if (m == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    /* Whole words, so that a fill of any 4-byte-aligned range is one vkCmdFillBuffer. */
    const uint64_t most = d->phys->max_allocation;
    if ((uint64_t)size > most) {
        acg__free(m);
        return acg__error(ACG_ERR_OUT_OF_MEMORY,
                          "%s: %zu bytes: more than %s allocates at once (maxMemoryAllocationSize "
                          "%llu)",
                          fn, size, d->phys->props.deviceName, (unsigned long long)most);
    }
    m->size = ((VkDeviceSize)size + 3) & ~(VkDeviceSize)3;
    if (m->size == 0) {
        m->size = 4;
    }
    acg_status st = acg__vk_buffer_make(d, m->size, VK_MEM_USAGE, d->device_type, false, &m->buffer,
                                        &m->memory, NULL, fn);
    if (st != ACG_OK) {
        acg__free(m);
        return st;
    }
    const VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                          .buffer = m->buffer};
    m->address = d->vkGetBufferDeviceAddress(d->device, &ai);
    *out = (acg__bk_mem *)m;
    return ACG_OK;
}

void acg__vk_buffer_free(acg__bk_device *dev, acg__bk_mem *mem) {
    vk_mem *m = vmem(mem);
    acg__vk_buffer_unmake(vdev(dev), m->buffer, m->memory);
    acg__free(m);
}

acg_status acg__vk_pinned_alloc(acg__bk_device *dev, size_t size, void **ptr) {
    static const char fn[] = "acg_pinned_alloc";
    vk_device *d = vdev(dev);
    if ((uint64_t)size > d->phys->max_allocation) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY,
                          "%s: %zu bytes: more than %s allocates at once (maxMemoryAllocationSize "
                          "%llu)",
                          fn, size, d->phys->props.deviceName,
                          (unsigned long long)d->phys->max_allocation);
    }
    vk_pinned *p = acg__calloc(1, sizeof *p);
    if (p == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    p->size = size;
    acg_status st = acg__vk_buffer_make(
        d, size > 0 ? size : 1, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        d->host_type, true, &p->buffer, &p->memory, &p->host, fn);
    if (st == ACG_OK && ((uintptr_t)p->host & 63) != 0) {
        acg__vk_buffer_unmake(d, p->buffer, p->memory);
        st = acg__error(ACG_ERR_DEVICE, "%s: vkMapMemory mapped %p, not 64-byte aligned", fn,
                        p->host);
    }
    if (st != ACG_OK) {
        acg__free(p);
        return st;
    }
    pthread_mutex_lock(&d->pinned_lock);
    p->next = d->pinned;
    d->pinned = p;
    pthread_mutex_unlock(&d->pinned_lock);
    *ptr = p->host;
    return ACG_OK;
}

void acg__vk_pinned_free(acg__bk_device *dev, void *ptr) {
    vk_device *d = vdev(dev);
    pthread_mutex_lock(&d->pinned_lock);
    for (vk_pinned **at = &d->pinned; *at != NULL; at = &(*at)->next) {
        vk_pinned *p = *at;
        if (p->user == NULL && p->host == ptr) {
            *at = p->next;
            acg__vk_buffer_unmake(d, p->buffer, p->memory);
            acg__free(p);
            break;
        }
    }
    pthread_mutex_unlock(&d->pinned_lock);
}

acg_status acg__vk_pinned_register(acg__bk_device *dev, void *ptr, size_t size) {
    static const char fn[] = "acg_pinned_register";
    vk_device *d = vdev(dev);
    /* The whole pages (of the driver's import alignment) around the caller's bytes. */
    const uintptr_t align = (uintptr_t)d->phys->import_align;
    const uintptr_t lo = (uintptr_t)ptr / align * align;
    const uintptr_t hi = ((uintptr_t)ptr + size - 1) / align * align + align;
    acg_status st = ACG_OK;
    vk_pinned *p = acg__calloc(1, sizeof *p);
    if (p == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    p->user = ptr;
    p->host = (void *)lo;
    p->size = hi - lo;
    VkMemoryHostPointerPropertiesEXT hp = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    VK_CHECK(d->vkGetMemoryHostPointerPropertiesEXT(
                 d->device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, p->host, &hp),
             fn, out_free);
    const VkExternalMemoryBufferCreateInfo external = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
    const VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                   .pNext = &external,
                                   .size = p->size,
                                   .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                            VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                   .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(d->vkCreateBuffer(d->device, &bi, NULL, &p->buffer), fn, out_free);
    VkMemoryRequirements req;
    d->vkGetBufferMemoryRequirements(d->device, p->buffer, &req);
    const uint32_t types = req.memoryTypeBits & hp.memoryTypeBits;
    if (types == 0) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY,
                        "%s: %zu bytes at %p: no memory type of %s holds both a buffer (0x%x) "
                        "and imported host memory (0x%x)",
                        fn, size, ptr, d->phys->props.deviceName, req.memoryTypeBits,
                        hp.memoryTypeBits);
        goto out_buffer;
    }
    uint32_t type = 0;
    while ((types & (1u << type)) == 0) {
        type++;
    }
    const VkImportMemoryHostPointerInfoEXT import = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
        .pHostPointer = p->host};
    const VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .pNext = &import,
                                     .allocationSize = p->size,
                                     .memoryTypeIndex = type};
    VK_CHECK(d->vkAllocateMemory(d->device, &ai, NULL, &p->memory), fn, out_buffer);
    VK_CHECK(d->vkBindBufferMemory(d->device, p->buffer, p->memory, 0), fn, out_memory);
    pthread_mutex_lock(&d->pinned_lock);
    p->next = d->pinned;
    d->pinned = p;
    pthread_mutex_unlock(&d->pinned_lock);
    return ACG_OK;

out_memory:
    d->vkFreeMemory(d->device, p->memory, NULL);
out_buffer:
    d->vkDestroyBuffer(d->device, p->buffer, NULL);
out_free:
    acg__free(p);
    return st;
}

void acg__vk_pinned_unregister(acg__bk_device *dev, void *ptr) {
    vk_device *d = vdev(dev);
    pthread_mutex_lock(&d->pinned_lock);
    for (vk_pinned **at = &d->pinned; *at != NULL; at = &(*at)->next) {
        vk_pinned *p = *at;
        if (p->user == ptr) {
            *at = p->next;
            acg__vk_buffer_unmake(d, p->buffer, p->memory); /* the memory stays the caller's */
            acg__free(p);
            break;
        }
    }
    pthread_mutex_unlock(&d->pinned_lock);
}

bool acg__vk_pinned_find(vk_device *d, const void *host, size_t size, VkBuffer *buffer,
                         VkDeviceSize *offset) {
    const uintptr_t at = (uintptr_t)host;
    bool found = false;
    pthread_mutex_lock(&d->pinned_lock);
    for (const vk_pinned *p = d->pinned; p != NULL && !found; p = p->next) {
        const uintptr_t lo = (uintptr_t)p->host;
        if (at >= lo && size <= p->size && at - lo <= p->size - size) {
            *buffer = p->buffer;
            *offset = at - lo;
            found = true;
        }
    }
    pthread_mutex_unlock(&d->pinned_lock);
    return found;
}

/* ---- native objects -------------------------------------------------------------------------- */

acg_status acg__vk_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                     size_t size, acg_native_buffer *out) {
    (void)dev;
    (void)size;
    const vk_mem *m = vmem(mem);
    out->kind = ACG_NATIVE_VULKAN_BUFFER;
    out->handle = (void *)m->buffer;
    out->address = m->address + offset;
    out->offset = offset;
    return ACG_OK;
}

static acg_status vk_device_get_native(acg__bk_device *dev, acg_native_device *out) {
    vk_device *d = vdev(dev);
    out->kind = ACG_NATIVE_VULKAN_DEVICE;
    out->context = (void *)d->device;
    out->device = (void *)d->phys->pd;
    out->platform = (void *)acg__vk.instance;
    out->ordinal = (int32_t)(d->phys - acg__vk.devices);
    return ACG_OK;
}

/* ---- the table ------------------------------------------------------------------------------- */

static const char *const env_names[] = {
    /* the Vulkan loader to open (default libvulkan.so.1) */
    "ACG_VULKAN_LOADER",
    /* 1: the Khronos validation layer checks every call; an error it reports aborts */
    "ACG_VULKAN_VALIDATION",
};
const acg__env_table acg__vulkan_env = {"vulkan", env_names,
                                        sizeof env_names / sizeof env_names[0]};

const acg_backend_i acg__backend_vulkan = {
    .version = ACG_BACKEND_VERSION,
    .name = "vulkan",
    .probe = acg__vk_probe,
    .describe = vk_describe,
    .device_open = vk_device_open,
    .device_close = vk_device_close,
    .query_capability = vk_query_capability,
    .buffer_alloc = acg__vk_buffer_alloc,
    .buffer_free = acg__vk_buffer_free,
    .pinned_alloc = acg__vk_pinned_alloc,
    .pinned_free = acg__vk_pinned_free,
    /* The caller's memory imported (VK_EXT_external_memory_host), where the device offers it. */
    .pinned_register = acg__vk_pinned_register,
    .pinned_unregister = acg__vk_pinned_unregister,
    .stream_create = acg__vk_stream_create,
    .stream_destroy = acg__vk_stream_destroy,
    .stream_synchronize = acg__vk_stream_synchronize,
    .stream_query = acg__vk_stream_query,
    .event_create = acg__vk_event_create,
    .event_destroy = acg__vk_event_destroy,
    .event_record = acg__vk_event_record,
    .stream_wait_event = acg__vk_stream_wait_event,
    .event_query = acg__vk_event_query,
    .event_synchronize = acg__vk_event_synchronize,
    .copy_h2d = acg__vk_copy_h2d,
    .copy_d2h = acg__vk_copy_d2h,
    .copy_d2d = acg__vk_copy_d2d,
    .fill = acg__vk_fill,
    .kernel_load = acg__vk_kernel_load,
    .kernel_unload = acg__vk_kernel_unload,
    .kernel_launch = acg__vk_kernel_launch,
    .graph_instantiate = acg__vk_graph_instantiate,
    .graph_launch = acg__vk_graph_launch,
    /* An update rewrites the kernel nodes' argument blocks where only arguments changed, and
     * records the description again otherwise (graph.c). */
    .graph_update = acg__vk_graph_update,
    .graph_destroy = acg__vk_graph_destroy,
    /* Built from acg's description: no native capture, no host nodes, no loops. */
    .graph_get_native = acg__vk_graph_get_native,
    .buffer_get_native = acg__vk_buffer_get_native,
    .device_get_native = vk_device_get_native,
    .graph_update_node = acg__vk_graph_update_node,
};
