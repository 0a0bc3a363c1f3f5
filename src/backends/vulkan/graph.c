/* graph.c — the vulkan backend's graphs: a secondary command buffer recorded once from the
 * core's description, which every replay executes inside the stream's command buffer
 * (vkCmdExecuteCommands), recorded for simultaneous use so that replays queued back to back
 * need not wait for each other.
 *
 * The nodes are recorded in the description's order, which is a valid serial order, with a
 * barrier only before a node that depends on one recorded since the previous barrier: nodes
 * between two barriers run concurrently, as the ledger's dependencies allow, and the launch's
 * own barrier (stream.c) orders the whole replay after the stream's earlier work. A copy from
 * or to pinned memory copies from or to its VkBuffer, so a replay reads or writes what the
 * memory holds then (graph_pinned_replay). An update records the new description into a new
 * command buffer, which replaces the old one only once it is complete. */
#include <string.h>

#include "vulkan.h"

typedef struct vk_exec {
    vk_device *dev;
    VkCommandPool pool;  /* the exec's own: recording never meets a stream's */
    VkCommandBuffer cb;  /* secondary */
    vk_staging *staging; /* what cb's copies read (unaligned fills' patterns) */
} vk_exec;

static inline vk_exec *vexec(acg__bk_exec *e) { return (vk_exec *)e; }

static void graph_barrier(vk_device *d, VkCommandBuffer cb) {
    const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                                .dstAccessMask =
                                    VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    VK_RECORD(d->vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                      VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0,
                                      NULL));
}

static acg_status record_node(vk_device *d, VkCommandBuffer cb, const acg__node *n,
                              vk_staging **keep, const char *fn) {
    VkBuffer pin = VK_NULL_HANDLE;
    VkDeviceSize pin_off = 0;
    if ((n->kind == ACG_NODE_COPY_H2D || n->kind == ACG_NODE_COPY_D2H) &&
        !acg__vk_pinned_find(d, n->host, n->size, &pin, &pin_off)) {
        return acg__error(ACG_ERR_INTERNAL, "%s: captured host memory %p is not pinned", fn,
                          n->host);
    }
    VkBufferCopy region = {.size = n->size};
    switch (n->kind) {
    case ACG_NODE_KERNEL:
        return acg__vk_kernel_record(d, cb, vkernel(n->kernel), &n->dims, n->args, n->n_args, fn);
    case ACG_NODE_COPY_H2D:
        region.srcOffset = pin_off;
        region.dstOffset = n->dst_off;
        VK_RECORD(d->vkCmdCopyBuffer(cb, pin, vmem(n->dst_mem)->buffer, 1, &region));
        return ACG_OK;
    case ACG_NODE_COPY_D2H:
        region.srcOffset = n->src_off;
        region.dstOffset = pin_off;
        VK_RECORD(d->vkCmdCopyBuffer(cb, vmem(n->src_mem)->buffer, pin, 1, &region));
        return ACG_OK;
    case ACG_NODE_COPY_D2D:
        region.srcOffset = n->src_off;
        region.dstOffset = n->dst_off;
        VK_RECORD(
            d->vkCmdCopyBuffer(cb, vmem(n->src_mem)->buffer, vmem(n->dst_mem)->buffer, 1, &region));
        return ACG_OK;
    case ACG_NODE_FILL:
        return acg__vk_fill_record(d, cb, vmem(n->dst_mem), n->dst_off, n->size, n->pattern,
                                   n->pattern_size, keep, fn);
    case ACG_NODE_HOST:
    case ACG_NODE_FOREIGN:
    case ACG_NODE_COLLECTIVE:
    case ACG_NODE_LOOP:
        break;
    }
    /* The core invalidates such captures here (no host nodes, no native capture, no
     * collectives, no loops); reaching this is a bug. */
    return acg__error(ACG_ERR_INTERNAL, "%s: a command buffer cannot hold node kind %d", fn,
                      (int)n->kind);
}

/* Records desc into a new secondary command buffer of e's pool, in *out, and what it reads on
 * *keep. */
static acg_status record(vk_exec *e, const acg__graph_desc *desc, VkCommandBuffer *out,
                         vk_staging **keep, const char *fn) {
    vk_device *d = e->dev;
    acg_status st = ACG_OK;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    const VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = e->pool,
                                            .level = VK_COMMAND_BUFFER_LEVEL_SECONDARY,
                                            .commandBufferCount = 1};
    VK_CHECK(d->vkAllocateCommandBuffers(d->device, &ai, &cb), fn, out);
    const VkCommandBufferInheritanceInfo inherit = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
                                         .pInheritanceInfo = &inherit};
    VK_CHECK(d->vkBeginCommandBuffer(cb, &bi), fn, out_cb);
    /* Nodes from `since` on were recorded after the latest barrier. */
    uint32_t since = 0;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        const acg__node *n = &desc->nodes[i];
        bool needs = false;
        for (uint32_t k = 0; k < n->n_deps && !needs; k++) {
            needs = desc->deps[n->deps_begin + k] >= since;
        }
        if (needs) {
            graph_barrier(d, cb);
            since = i;
        }
        if ((st = record_node(d, cb, n, keep, fn)) != ACG_OK) {
            goto out_cb;
        }
    }
    VK_CHECK(d->vkEndCommandBuffer(cb), fn, out_cb);
    *out = cb;
    return ACG_OK;
out_cb:
    d->vkFreeCommandBuffers(d->device, e->pool, 1, &cb);
    acg__vk_staging_free(d, keep);
out:
    return st;
}

acg_status acg__vk_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                     acg__bk_exec **out) {
    static const char fn[] = "acg_stream_end_capture";
    vk_device *d = vdev(dev);
    vk_exec *e = acg__calloc(1, sizeof *e);
    if (e == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    e->dev = d;
    acg_status st = ACG_OK;
    const VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                        .queueFamilyIndex = d->phys->family};
    VK_CHECK(d->vkCreateCommandPool(d->device, &pi, NULL, &e->pool), fn, out_free);
    if ((st = record(e, desc, &e->cb, &e->staging, fn)) != ACG_OK) {
        goto out_pool;
    }
    *out = (acg__bk_exec *)e;
    return ACG_OK;
out_pool:
    d->vkDestroyCommandPool(d->device, e->pool, NULL);
out_free:
    acg__free(e);
    return st;
}

acg_status acg__vk_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    vk_exec *e = vexec(exec);
    VkCommandBuffer cb = VK_NULL_HANDLE;
    vk_staging *staging = NULL;
    acg_status st = record(e, desc, &cb, &staging, "acg_graph_update");
    if (st == ACG_OK) {
        e->dev->vkFreeCommandBuffers(e->dev->device, e->pool, 1, &e->cb);
        acg__vk_staging_free(e->dev, &e->staging);
        e->cb = cb;
        e->staging = staging;
    }
    return st;
}

void acg__vk_graph_destroy(acg__bk_exec *exec) {
    vk_exec *e = vexec(exec);
    e->dev->vkDestroyCommandPool(e->dev->device, e->pool, NULL); /* and its command buffers */
    acg__vk_staging_free(e->dev, &e->staging);
    acg__free(e);
}

VkCommandBuffer acg__vk_graph_commands(acg__bk_exec *exec) { return vexec(exec)->cb; }

acg_status acg__vk_graph_get_native(acg__bk_exec *exec, acg_native_handle *out) {
    out->kind = ACG_NATIVE_VULKAN_COMMAND_BUFFER;
    out->handle = vexec(exec)->cb;
    return ACG_OK;
}
