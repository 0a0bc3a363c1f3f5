/* kernel.c — the vulkan backend's kernels: a compute pipeline per kernel and device, built from
 * the definition's SPIR-V module for Vulkan (acg.h, ACG_KERNEL_FORMAT_SPIRV_VULKAN), and the
 * argument buffers their launches read.
 *
 * A kernel reads its grid and arguments from a block of memory, the storage buffer bound as
 * its descriptor set 0 (binding 0, dynamic: the block's offset is given at the bind), not from
 * push constants, so that a graph's recording reads each kernel node's arguments from memory
 * the graph owns and an update can rewrite them without recording again (graph.c). A launch
 * writes the block, binds the pipeline and the block's set and dispatches whole groups of the
 * kernel's width. */
#include <stdio.h>
#include <string.h>

#include "vulkan.h"

/* Lays the arguments of def out as the format says: a uvec4 of the grid, then each argument at
 * the next offset its size (its alignment) allows, as std430 lays out the shader's block. */
static void layout_args(const acg_kernel_desc *d, uint32_t *offset) {
    uint32_t at = 16;
    for (uint32_t i = 0; i < d->n_args; i++) {
        const uint32_t size =
            d->types[i] == ACG_ARG_BUFFER ? 8u : (uint32_t)acg__arg_scalar_bytes(d->types[i]);
        at = (at + size - 1) / size * size;
        offset[i] = at;
        at += size;
    }
}

/* ---- argument buffers -------------------------------------------------------------------- */

acg_status acg__vk_args_new(vk_device *d, uint32_t blocks, vk_args **out, const char *fn) {
    vk_args *a = acg__calloc(1, sizeof *a);
    if (a == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    a->size = (blocks > 0 ? blocks : 1) * d->args_stride;
    void *host = NULL;
    acg_status st = acg__vk_buffer_make(d, a->size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                        d->host_type, true, &a->buffer, &a->memory, &host, fn);
    if (st != ACG_OK) {
        goto out_free;
    }
    a->host = host;
    const VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC,
                                       .descriptorCount = 1};
    const VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = 1,
                                           .poolSizeCount = 1,
                                           .pPoolSizes = &size};
    VK_CHECK(d->vkCreateDescriptorPool(d->device, &pi, NULL, &a->pool), fn, out_buffer);
    const VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = a->pool,
                                            .descriptorSetCount = 1,
                                            .pSetLayouts = &d->args_layout};
    VK_CHECK(d->vkAllocateDescriptorSets(d->device, &ai, &a->set), fn, out_pool);
    /* The range is the largest block: a bind adds the block's offset to the descriptor's. */
    const VkDescriptorBufferInfo bi = {
        .buffer = a->buffer, .offset = 0, .range = ACG_VK_ARGS_BYTES};
    const VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                    .dstSet = a->set,
                                    .dstBinding = 0,
                                    .descriptorCount = 1,
                                    .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC,
                                    .pBufferInfo = &bi};
    d->vkUpdateDescriptorSets(d->device, 1, &w, 0, NULL);
    *out = a;
    return ACG_OK;
out_pool:
    d->vkDestroyDescriptorPool(d->device, a->pool, NULL);
out_buffer:
    acg__vk_buffer_unmake(d, a->buffer, a->memory);
out_free:
    acg__free(a);
    return st;
}

void acg__vk_args_free(vk_device *d, vk_args *list) {
    while (list != NULL) {
        vk_args *next = list->next;
        d->vkDestroyDescriptorPool(d->device, list->pool, NULL); /* and its set */
        acg__vk_buffer_unmake(d, list->buffer, list->memory);
        acg__free(list);
        list = next;
    }
}

/* ---- kernels ------------------------------------------------------------------------------ */

acg_status acg__vk_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                               acg__bk_kernel **out) {
    static const char fn[] = "acg_kernel_get";
    vk_device *d = vdev(dev);
    const acg_kernel_impl *impl =
        acg__kernel_impl_find(def, "vulkan", ACG_KERNEL_FORMAT_SPIRV_VULKAN);
    if (impl == NULL) {
        return acg__error_no_kernel_code(fn, def->name, "vulkan", ACG_KERNEL_FORMAT_SPIRV_VULKAN,
                                         NULL);
    }
    if (impl->size == 0 || impl->size % 4 != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: kernel %s: its SPIR-V for vulkan is %zu bytes, not a whole number "
                          "of 4-byte words",
                          fn, def->name, impl->size);
    }
    vk_kernel *k = acg__calloc(1, sizeof *k);
    if (k == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    k->def = def;
    layout_args(&def->d, k->offset);
    acg_status st = ACG_OK;
    const VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                         .codeSize = impl->size,
                                         .pCode = impl->code};
    VK_CHECK(d->vkCreateShaderModule(d->device, &mi, NULL, &k->module), fn, out_free);
    const VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                           .setLayoutCount = 1,
                                           .pSetLayouts = &d->args_layout};
    /* Mesa 22.3's lavapipe crashes when an allocation of vkCreatePipelineLayout fails: the
     * test hook spares it (tests/vulkan/test_vulkan_backend.c). */
    acg__vk_host_alloc_spare(true);
    VkResult r = d->vkCreatePipelineLayout(d->device, &li, NULL, &k->layout);
    acg__vk_host_alloc_spare(false);
    if (r != VK_SUCCESS) {
        st = acg__vk_check(r, fn, "vkCreatePipelineLayout");
        goto out_module;
    }
    /* Groups of 256 work items where the device takes them: a CPU driver runs a group as one
     * job, which wider groups make fewer. */
    const VkPhysicalDeviceLimits *lim = &d->phys->props.limits;
    k->width = 256;
    if (k->width > lim->maxComputeWorkGroupSize[0]) {
        k->width = lim->maxComputeWorkGroupSize[0];
    }
    if (k->width > lim->maxComputeWorkGroupInvocations) {
        k->width = lim->maxComputeWorkGroupInvocations;
    }
    const VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
    const VkSpecializationInfo spec = {
        .mapEntryCount = 1, .pMapEntries = &entry, .dataSize = 4, .pData = &k->width};
    const VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = k->module,
                  .pName = impl->entry != NULL ? impl->entry : def->name,
                  .pSpecializationInfo = &spec},
        .layout = k->layout};
    VK_CHECK(d->vkCreateComputePipelines(d->device, VK_NULL_HANDLE, 1, &pi, NULL, &k->pipeline), fn,
             out_layout);
    *out = (acg__bk_kernel *)k;
    return ACG_OK;

out_layout:
    d->vkDestroyPipelineLayout(d->device, k->layout, NULL);
out_module:
    d->vkDestroyShaderModule(d->device, k->module, NULL);
out_free:
    acg__free(k);
    return st;
}

void acg__vk_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel) {
    vk_device *d = vdev(dev);
    vk_kernel *k = vkernel(kernel);
    d->vkDestroyPipeline(d->device, k->pipeline, NULL);
    d->vkDestroyPipelineLayout(d->device, k->layout, NULL);
    d->vkDestroyShaderModule(d->device, k->module, NULL);
    acg__free(k);
}

void acg__vk_kernel_block(const vk_kernel *k, const acg_dims *dims, const acg__karg *args,
                          uint32_t n_args, unsigned char *block) {
    memset(block, 0, ACG_VK_ARGS_BYTES);
    const uint32_t grid[4] = {dims->global[0], dims->global[1], dims->global[2], 0};
    memcpy(block, grid, sizeof grid);
    for (uint32_t i = 0; i < n_args; i++) {
        const acg__karg *a = &args[i];
        if (a->type == ACG_ARG_BUFFER) {
            const uint64_t address = vmem(a->value.buf.mem)->address + a->value.buf.offset;
            memcpy(block + k->offset[i], &address, sizeof address);
        } else {
            memcpy(block + k->offset[i], &a->value, acg__arg_scalar_bytes(a->type));
        }
    }
}

acg_status acg__vk_kernel_record(vk_device *d, VkCommandBuffer cb, const vk_kernel *k,
                                 const acg_dims *dims, const vk_args *a, uint32_t offset,
                                 const char *fn) {
    const uint32_t groups[3] = {(uint32_t)(((uint64_t)dims->global[0] + k->width - 1) / k->width),
                                dims->global[1], dims->global[2]};
    const uint32_t *most = d->phys->props.limits.maxComputeWorkGroupCount;
    for (int i = 0; i < 3; i++) {
        if (groups[i] > most[i]) {
            return acg__error(ACG_ERR_UNSUPPORTED,
                              "%s: kernel %s: a grid of %u x %u x %u needs %u groups in dimension "
                              "%d; %s dispatches %u (maxComputeWorkGroupCount)",
                              fn, k->def->name, dims->global[0], dims->global[1], dims->global[2],
                              groups[i], i, d->phys->props.deviceName, most[i]);
        }
    }
    VK_RECORD(d->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline));
    VK_RECORD(d->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1,
                                         &a->set, 1, &offset));
    VK_RECORD(d->vkCmdDispatch(cb, groups[0], groups[1], groups[2]));
    return ACG_OK;
}
