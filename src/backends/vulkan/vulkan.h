/* vulkan.h — the vulkan backend's internal interface.
 *
 * The Vulkan loader (libvulkan.so.1) is opened at run time and every entry point resolved
 * through vkGetInstanceProcAddr and vkGetDeviceProcAddr (loader.c), so one build runs where
 * no loader or no device is and `acg info` says why. A usable device offers Vulkan 1.2 with
 * timeline semaphores, buffer device addresses and 64-bit integers in shaders, and a queue family
 * with compute.
 *
 * Device memory is a device-local VkBuffer of its own VkDeviceMemory, its device address the
 * native handle; pinned memory a mapped host-visible, coherent VkBuffer (memory.c). A stream
 * records its work into a command buffer of its own, a full barrier between two pieces of
 * work, and submits it to the device's one queue when something must happen (an event, a
 * synchronization, a read into pageable memory); every submission signals the stream's
 * timeline semaphore with the next value, and an event is a (timeline, value) pair (stream.c).
 * The queue is shared by the device's streams: a submission only waits for values already
 * submitted (an event is recorded by submitting), so the barriers, which reach every earlier
 * submission of the queue, never close a cycle.
 */
#ifndef ACG_BACKENDS_VULKAN_H
#define ACG_BACKENDS_VULKAN_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <stdatomic.h>
#include <vulkan/vulkan.h>

#include "acg-backend.h"
#include "acg-layer.h"

/* ---- the loader (loader.c) ----------------------------------------------------------------- */

/* X(name) for each entry point resolved from the instance (vkGetInstanceProcAddr). */
#define ACG__VK_INSTANCE_FNS(X)                                                                    \
    X(vkDestroyInstance)                                                                           \
    X(vkEnumeratePhysicalDevices)                                                                  \
    X(vkGetPhysicalDeviceProperties)                                                               \
    X(vkGetPhysicalDeviceProperties2)                                                              \
    X(vkGetPhysicalDeviceFeatures2)                                                                \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                    \
    X(vkGetPhysicalDeviceMemoryProperties)                                                         \
    X(vkEnumerateDeviceExtensionProperties)                                                        \
    X(vkCreateDevice)                                                                              \
    X(vkGetDeviceProcAddr)

/* X(name) for each entry point resolved from a device (vkGetDeviceProcAddr). */
#define ACG__VK_DEVICE_FNS(X)                                                                      \
    X(vkDestroyDevice)                                                                             \
    X(vkGetDeviceQueue)                                                                            \
    X(vkDeviceWaitIdle)                                                                            \
    X(vkCreateBuffer)                                                                              \
    X(vkDestroyBuffer)                                                                             \
    X(vkGetBufferMemoryRequirements)                                                               \
    X(vkAllocateMemory)                                                                            \
    X(vkFreeMemory)                                                                                \
    X(vkBindBufferMemory)                                                                          \
    X(vkMapMemory)                                                                                 \
    X(vkUnmapMemory)                                                                               \
    X(vkGetBufferDeviceAddress)                                                                    \
    X(vkCreateCommandPool)                                                                         \
    X(vkDestroyCommandPool)                                                                        \
    X(vkAllocateCommandBuffers)                                                                    \
    X(vkFreeCommandBuffers)                                                                        \
    X(vkBeginCommandBuffer)                                                                        \
    X(vkEndCommandBuffer)                                                                          \
    X(vkResetCommandBuffer)                                                                        \
    X(vkCmdCopyBuffer)                                                                             \
    X(vkCmdFillBuffer)                                                                             \
    X(vkCmdPipelineBarrier)                                                                        \
    X(vkQueueSubmit)                                                                               \
    X(vkQueueWaitIdle)                                                                             \
    X(vkCreateSemaphore)                                                                           \
    X(vkDestroySemaphore)                                                                          \
    X(vkGetSemaphoreCounterValue)                                                                  \
    X(vkWaitSemaphores)                                                                            \
    X(vkCreateShaderModule)                                                                        \
    X(vkDestroyShaderModule)                                                                       \
    X(vkCreatePipelineLayout)                                                                      \
    X(vkDestroyPipelineLayout)                                                                     \
    X(vkCreateComputePipelines)                                                                    \
    X(vkDestroyPipeline)                                                                           \
    X(vkCreateDescriptorSetLayout)                                                                 \
    X(vkDestroyDescriptorSetLayout)                                                                \
    X(vkCreateDescriptorPool)                                                                      \
    X(vkDestroyDescriptorPool)                                                                     \
    X(vkAllocateDescriptorSets)                                                                    \
    X(vkUpdateDescriptorSets)                                                                      \
    X(vkCmdBindPipeline)                                                                           \
    X(vkCmdBindDescriptorSets)                                                                     \
    X(vkCmdDispatch)                                                                               \
    X(vkCmdExecuteCommands)

#define ACG__VK_FN(name) PFN_##name name;

/* A physical device that has a queue family with compute, and what was found of it. */
typedef struct vk_physical {
    VkPhysicalDevice pd;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceDriverProperties driver;
    uint32_t family;         /* the first queue family with compute */
    bool usable;             /* Vulkan 1.2, timeline semaphores, device addresses, shaderInt64 */
    char why[160];           /* why not, when not usable */
    bool host_memory_import; /* VK_EXT_external_memory_host is offered */
    uint64_t max_allocation; /* maxMemoryAllocationSize */
    uint64_t import_align;   /* minImportedHostPointerAlignment, with host_memory_import */
} vk_physical;

typedef struct vk_loader {
    void *handle; /* the loader, dlopen'ed */
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    ACG__VK_INSTANCE_FNS(ACG__VK_FN)
    VkInstance instance;
    uint32_t api_version; /* the instance's, as vkEnumerateInstanceVersion gave it */
    vk_physical *devices;
    uint32_t n_devices;
    char reason[256]; /* why the backend cannot run */
} vk_loader;

extern vk_loader acg__vk;

/* The host allocator every device hands its driver (vkCreateDevice's pAllocator, which the
 * device's objects inherit): the system's, counted, and failing on request for the tests. */
extern const VkAllocationCallbacks acg__vk_host_allocator;
/* Test hook: the n-th allocation the drivers make through acg__vk_host_allocator from now fails
 * (returns NULL, which the driver reports as VK_ERROR_OUT_OF_HOST_MEMORY); 0 disarms it. */
void acg__vk_fail_host_alloc(uint64_t n);
/* Whether the armed failure happened; and the driver's host allocations now live. */
bool acg__vk_host_alloc_failed(void);
int64_t acg__vk_host_alloc_live(void);
/* Brackets a driver call whose allocations the test hook must not fail, because the driver
 * does not survive it (on: the call begins, off: it ended; on this thread). */
void acg__vk_host_alloc_spare(bool on);

/* Loads the loader and finds the devices once (probe). */
acg_status acg__vk_probe(int *n, const char **reason);
/* "<fn>: <call> failed with <VkResult's name> (<code>)" as the error; the status it maps to:
 * ACG_ERR_OUT_OF_MEMORY for the out-of-memory results, ACG_ERR_DEVICE_LOST for a lost device,
 * else ACG_ERR_DEVICE. ACG_OK for VK_SUCCESS. */
acg_status acg__vk_check(VkResult r, const char *fn, const char *call);
const char *acg__vk_result_name(VkResult r);

/* Records a command (a vkCmd* call, which returns nothing: the driver reports what failed at
 * vkEndCommandBuffer). Mesa 22.3's lavapipe crashes when a host allocation fails while it
 * records, so the test hook spares these calls. */
#define VK_RECORD(call)                                                                            \
    do {                                                                                           \
        acg__vk_host_alloc_spare(true);                                                            \
        call;                                                                                      \
        acg__vk_host_alloc_spare(false);                                                           \
    } while (0)

/* Runs a Vulkan call; on failure sets st from acg__vk_check and jumps to label. */
#define VK_CHECK(call, fn, label)                                                                  \
    do {                                                                                           \
        VkResult r_ = (call);                                                                      \
        if (r_ != VK_SUCCESS) {                                                                    \
            st = acg__vk_check(r_, fn, #call);                                                     \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* ---- devices (device.c) --------------------------------------------------------------------- */

/* A pinned allocation: host-visible, coherent memory mapped at host; or a registration: the
 * caller's host memory imported (VK_EXT_external_memory_host), the whole pages around it. */
typedef struct vk_pinned {
    struct vk_pinned *next;
    void *user; /* a registration: the pointer the caller registered; else NULL */
    void *host; /* the memory's first byte (a registration's first page) */
    size_t size;
    VkBuffer buffer;
    VkDeviceMemory memory;
} vk_pinned;

typedef struct vk_device {
    const vk_physical *phys;
    VkDevice device;
    ACG__VK_DEVICE_FNS(ACG__VK_FN)
    VkQueue queue;
    pthread_mutex_t queue_lock; /* vkQueueSubmit needs the queue to itself */
    uint32_t device_type;       /* a memory type of device-local memory (or the first usable) */
    uint32_t host_type;         /* a memory type of host-visible, coherent memory */
    uint64_t heap_bytes;        /* the size of device_type's heap */
    PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT; /* or NULL */
    pthread_mutex_t pinned_lock;
    vk_pinned *pinned;                 /* a list: each allocation's node lives as long as it does */
    VkDescriptorSetLayout args_layout; /* every kernel's set 0: its argument block (kernel.c) */
    uint32_t args_stride; /* a block's room in an argument buffer: ACG_VK_ARGS_BYTES, aligned */
} vk_device;

static inline vk_device *vdev(acg__bk_device *d) { return (vk_device *)d; }

/* Device memory: a VkBuffer of its own memory, and its device address. */
typedef struct vk_mem {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    VkDeviceAddress address;
} vk_mem;

static inline vk_mem *vmem(acg__bk_mem *m) { return (vk_mem *)m; }

/* A buffer of `size` bytes with `usage`, bound to new memory of type `type` (device addresses
 * on where usage asks for them); *mapped its host mapping when map is true. */
acg_status acg__vk_buffer_make(vk_device *d, VkDeviceSize size, VkBufferUsageFlags usage,
                               uint32_t type, bool map, VkBuffer *buffer, VkDeviceMemory *memory,
                               void **mapped, const char *fn);
void acg__vk_buffer_unmake(vk_device *d, VkBuffer buffer, VkDeviceMemory memory);

/* The pinned allocation holding [host, host + size), its buffer and *offset in it; false when
 * none does. */
bool acg__vk_pinned_find(vk_device *d, const void *host, size_t size, VkBuffer *buffer,
                         VkDeviceSize *offset);
/* Destroys a timeline's semaphore; one that a submission waited on (waited) only once the
 * driver is done with every submission. */
void acg__vk_semaphore_destroy(vk_device *d, VkSemaphore sem, bool waited);

acg_status acg__vk_buffer_alloc(acg__bk_device *dev, size_t size, acg__bk_mem **out);
void acg__vk_buffer_free(acg__bk_device *dev, acg__bk_mem *mem);
acg_status acg__vk_pinned_alloc(acg__bk_device *dev, size_t size, void **ptr);
void acg__vk_pinned_free(acg__bk_device *dev, void *ptr);
acg_status acg__vk_pinned_register(acg__bk_device *dev, void *ptr, size_t size);
void acg__vk_pinned_unregister(acg__bk_device *dev, void *ptr);
acg_status acg__vk_buffer_get_native(acg__bk_device *dev, acg__bk_mem *mem, size_t offset,
                                     size_t size, acg_native_buffer *out);

/* Host-visible memory that recorded copies read or write (a pageable copy's bytes, a fill's
 * pattern), owned by what holds the recording: a stream's submission until it ran, a graph for
 * its life. */
typedef struct vk_staging {
    struct vk_staging *next;
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *host;
} vk_staging;

/* A staging buffer of size bytes, mapped, pushed on *list. */
acg_status acg__vk_staging_new(vk_device *d, size_t size, vk_staging **list, vk_staging **out,
                               const char *fn);
/* Frees every staging buffer of *list. */
void acg__vk_staging_free(vk_device *d, vk_staging **list);

/* Records a fill of [off, off + size) of m with the 1-, 2- or 4-byte pattern into cb: one
 * vkCmdFillBuffer over whole words, else a copy from staging memory holding the pattern, kept
 * on *keep. */
acg_status acg__vk_fill_record(vk_device *d, VkCommandBuffer cb, const vk_mem *m, size_t off,
                               size_t size, uint32_t pattern, uint32_t pattern_size,
                               vk_staging **keep, const char *fn);

/* ---- kernels (kernel.c) ---------------------------------------------------------------------- */

/* The most bytes a kernel's argument block takes: the grid's uvec4, then at most
 * ACG_MAX_KERNEL_ARGS arguments of at most 8 bytes, each at an offset its size divides. */
#define ACG_VK_ARGS_BYTES (16u + 8u * ACG_MAX_KERNEL_ARGS)

/* A kernel: its pipeline, and where each argument goes in its argument block. */
typedef struct vk_kernel {
    const acg__kernel_def *def;
    VkShaderModule module;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    uint32_t width;                       /* the group's width (specialization constant 0) */
    uint32_t offset[ACG_MAX_KERNEL_ARGS]; /* each argument's offset in the block */
} vk_kernel;

static inline vk_kernel *vkernel(acg__bk_kernel *k) { return (vk_kernel *)k; }

/* An argument buffer: host-visible, coherent memory mapped at host, holding the argument blocks
 * of launches, each at a multiple of the device's args_stride; its descriptor set (of its own
 * pool) binds it to a kernel's set 0 with the block's offset as the dynamic offset. A stream
 * hands out blocks from the buffers of its open command buffer (`used`), a graph holds one
 * block per kernel node, rewritten in place when only the node's arguments change. */
typedef struct vk_args {
    struct vk_args *next;
    VkBuffer buffer;
    VkDeviceMemory memory;
    unsigned char *host;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    uint32_t size; /* bytes */
    uint32_t used; /* bytes handed out, from the start */
} vk_args;

/* An argument buffer of `blocks` blocks (at least one). */
acg_status acg__vk_args_new(vk_device *d, uint32_t blocks, vk_args **out, const char *fn);
/* Frees every argument buffer of the list. */
void acg__vk_args_free(vk_device *d, vk_args *list);

acg_status acg__vk_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                               acg__bk_kernel **out);
void acg__vk_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel);
/* Writes the launch's argument block (the grid, then args) at block. */
void acg__vk_kernel_block(const vk_kernel *k, const acg_dims *dims, const acg__karg *args,
                          uint32_t n_args, unsigned char *block);
/* Records a launch into cb whose block is at `offset` of a: the pipeline, the block's set, the
 * dispatch of whole groups; refuses a grid of more groups than the device dispatches. */
acg_status acg__vk_kernel_record(vk_device *d, VkCommandBuffer cb, const vk_kernel *k,
                                 const acg_dims *dims, const vk_args *a, uint32_t offset,
                                 const char *fn);

/* ---- graphs (graph.c) ------------------------------------------------------------------------ */

acg_status acg__vk_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                     acg__bk_exec **out);
acg_status acg__vk_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc);
acg_status acg__vk_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old);
void acg__vk_graph_destroy(acg__bk_exec *exec);
acg_status acg__vk_graph_get_native(acg__bk_exec *exec, acg_native_handle *out);
/* The secondary command buffer a replay executes. */
VkCommandBuffer acg__vk_graph_commands(acg__bk_exec *exec);

/* ---- streams and events (stream.c) ---------------------------------------------------------- */

/* A timeline semaphore, shared by its stream and the events recorded on it (which may outlive
 * the stream); destroyed with its last reference. */
typedef struct vk_timeline {
    vk_device *dev;
    VkSemaphore sem;
    atomic_uint refs;
    atomic_bool waited; /* another stream's submission waited on it (acg__vk_semaphore_destroy) */
} vk_timeline;

void acg__vk_timeline_unref(vk_timeline *t);

acg_status acg__vk_stream_create(acg__bk_device *dev, acg__bk_stream **out);
void acg__vk_stream_destroy(acg__bk_stream *stream);
acg_status acg__vk_stream_synchronize(acg__bk_stream *stream);
acg_status acg__vk_stream_query(acg__bk_stream *stream);
acg_status acg__vk_event_create(acg__bk_device *dev, acg__bk_event **out);
void acg__vk_event_destroy(acg__bk_event *event);
acg_status acg__vk_event_record(acg__bk_event *event, acg__bk_stream *stream);
acg_status acg__vk_stream_wait_event(acg__bk_stream *stream, acg__bk_event *event);
acg_status acg__vk_event_query(acg__bk_event *event);
acg_status acg__vk_event_synchronize(acg__bk_event *event);
acg_status acg__vk_copy_h2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            const void *src, size_t size, bool src_pinned);
acg_status acg__vk_copy_d2h(acg__bk_stream *stream, void *dst, acg__bk_mem *src, size_t src_off,
                            size_t size, bool dst_pinned);
acg_status acg__vk_copy_d2d(acg__bk_stream *stream, acg__bk_mem *dst, size_t dst_off,
                            acg__bk_mem *src, size_t src_off, size_t size);
acg_status acg__vk_fill(acg__bk_stream *stream, acg__bk_mem *dst, size_t off, size_t size,
                        uint32_t pattern, uint32_t pattern_size);
acg_status acg__vk_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                 const acg_dims *dims, const acg__karg *args, uint32_t n_args);
acg_status acg__vk_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream);

#endif /* ACG_BACKENDS_VULKAN_H */
