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
 * memory holds then (graph_pinned_replay).
 *
 * A kernel node reads its grid and arguments from its block in the graph's argument buffer
 * (kernel.c), so the recording holds of it only the pipeline, the block's place and the number
 * of groups. An update whose nodes differ from the recorded ones only in kernel arguments
 * rewrites their blocks in place, which the core allows only while no replay of the graph's
 * pool is in flight; any other difference (a grid, a copy's range, a fill's pattern) records
 * the new description into a new command buffer, which replaces the old one only once it is
 * complete, and then rewrites the blocks. */
#include <string.h>

#include "vulkan.h"

/* What the recording holds of a node: whatever of it, changed, needs recording again. */
typedef struct vk_step {
    acg_node_kind kind;
    const vk_kernel *kernel; /* a kernel node's */
    acg_dims dims;
    uint32_t block; /* a kernel node's block's offset in the argument buffer */
    VkBuffer src, dst;
    VkDeviceSize src_off, dst_off, size;
    uint32_t pattern, pattern_size;
} vk_step;

typedef struct vk_exec {
    vk_device *dev;
    VkCommandPool pool;  /* the exec's own: recording never meets a stream's */
    VkCommandBuffer cb;  /* secondary */
    vk_staging *staging; /* what cb's copies read (unaligned fills' patterns) */
    vk_args *args;       /* the kernel nodes' blocks, one each */
    vk_step *steps;      /* (n_steps) what cb holds of each node */
    uint32_t n_steps;
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

/* What recording desc would hold, into steps (desc->n_nodes of them). */
static acg_status plan_steps(vk_device *d, const acg__graph_desc *desc, vk_step *steps,
                             const char *fn) {
    uint32_t blocks = 0;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        const acg__node *n = &desc->nodes[i];
        vk_step *t = &steps[i];
        memset(t, 0, sizeof *t);
        t->kind = n->kind;
        switch (n->kind) {
        case ACG_NODE_KERNEL:
            t->kernel = vkernel(n->kernel);
            t->dims = n->dims;
            t->block = blocks++ * d->args_stride;
            continue;
        case ACG_NODE_COPY_H2D:
            t->dst = vmem(n->dst_mem)->buffer;
            t->dst_off = n->dst_off;
            t->size = n->size;
            if (!acg__vk_pinned_find(d, n->host, n->size, &t->src, &t->src_off)) {
                break;
            }
            continue;
        case ACG_NODE_COPY_D2H:
            t->src = vmem(n->src_mem)->buffer;
            t->src_off = n->src_off;
            t->size = n->size;
            if (!acg__vk_pinned_find(d, n->host, n->size, &t->dst, &t->dst_off)) {
                break;
            }
            continue;
        case ACG_NODE_COPY_D2D:
            t->src = vmem(n->src_mem)->buffer;
            t->src_off = n->src_off;
            t->dst = vmem(n->dst_mem)->buffer;
            t->dst_off = n->dst_off;
            t->size = n->size;
            continue;
        case ACG_NODE_FILL:
            t->dst = vmem(n->dst_mem)->buffer;
            t->dst_off = n->dst_off;
            t->size = n->size;
            t->pattern = n->pattern;
            t->pattern_size = n->pattern_size;
            continue;
        case ACG_NODE_HOST:
        case ACG_NODE_FOREIGN:
        case ACG_NODE_COLLECTIVE:
        case ACG_NODE_LOOP:
            /* The core invalidates such captures here (no host nodes, no native capture, no
             * collectives, no loops); reaching this is a bug. */
            return acg__error(ACG_ERR_INTERNAL, "%s: a command buffer cannot hold node kind %d", fn,
                              (int)n->kind);
        }
        return acg__error(ACG_ERR_INTERNAL, "%s: captured host memory %p is not pinned", fn,
                          n->host);
    }
    return ACG_OK;
}

static acg_status record_step(vk_exec *e, VkCommandBuffer cb, const vk_step *t, vk_staging **keep,
                              const char *fn) {
    vk_device *d = e->dev;
    const VkBufferCopy region = {.srcOffset = t->src_off, .dstOffset = t->dst_off, .size = t->size};
    switch (t->kind) {
    case ACG_NODE_KERNEL:
        return acg__vk_kernel_record(d, cb, t->kernel, &t->dims, e->args, t->block, fn);
    case ACG_NODE_FILL: {
        const vk_mem m = {.buffer = t->dst};
        return acg__vk_fill_record(d, cb, &m, t->dst_off, t->size, t->pattern, t->pattern_size,
                                   keep, fn);
    }
    default: /* a copy: plan_steps let no other kind through */
        VK_RECORD(d->vkCmdCopyBuffer(cb, t->src, t->dst, 1, &region));
        return ACG_OK;
    }
}

/* Records steps (desc's) into a new secondary command buffer of e's pool, in *out, and what it
 * reads on *keep. */
static acg_status record(vk_exec *e, const acg__graph_desc *desc, const vk_step *steps,
                         VkCommandBuffer *out, vk_staging **keep, const char *fn) {
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
        if ((st = record_step(e, cb, &steps[i], keep, fn)) != ACG_OK) {
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

/* Writes the block of kernel node i of desc. */
static void write_block(vk_exec *e, const acg__graph_desc *desc, uint32_t i) {
    const acg__node *n = &desc->nodes[i];
    acg__vk_kernel_block(e->steps[i].kernel, &n->dims, n->args, n->n_args,
                         e->args->host + e->steps[i].block);
}

static void write_blocks(vk_exec *e, const acg__graph_desc *desc) {
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        if (desc->nodes[i].kind == ACG_NODE_KERNEL) {
            write_block(e, desc, i);
        }
    }
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
    e->n_steps = desc->n_nodes;
    e->steps = acg__calloc(desc->n_nodes > 0 ? desc->n_nodes : 1, sizeof *e->steps);
    if (e->steps == NULL) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out_free;
    }
    if ((st = plan_steps(d, desc, e->steps, fn)) != ACG_OK) {
        goto out_free;
    }
    uint32_t kernels = 0;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        kernels += desc->nodes[i].kind == ACG_NODE_KERNEL;
    }
    if ((st = acg__vk_args_new(d, kernels, &e->args, fn)) != ACG_OK) {
        goto out_free;
    }
    const VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                        .queueFamilyIndex = d->phys->family};
    VK_CHECK(d->vkCreateCommandPool(d->device, &pi, NULL, &e->pool), fn, out_args);
    if ((st = record(e, desc, e->steps, &e->cb, &e->staging, fn)) != ACG_OK) {
        goto out_pool;
    }
    write_blocks(e, desc);
    *out = (acg__bk_exec *)e;
    return ACG_OK;
out_pool:
    d->vkDestroyCommandPool(d->device, e->pool, NULL);
out_args:
    acg__vk_args_free(d, e->args);
out_free:
    acg__free(e->steps);
    acg__free(e);
    return st;
}

/* Whether two grids dispatch alike: the group's width is the kernel's, whatever dims.local. */
static bool same_dims(const acg_dims *a, const acg_dims *b) {
    for (int i = 0; i < 3; i++) {
        if (a->global[i] != b->global[i]) {
            return false;
        }
    }
    return true;
}

/* Whether a recording of b would hold what one of a holds (kernel blocks aside). */
static bool same_steps(const vk_step *a, const vk_step *b, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        const vk_step *x = &a[i], *y = &b[i];
        if (x->kind != y->kind || x->kernel != y->kernel || !same_dims(&x->dims, &y->dims) ||
            x->block != y->block || x->src != y->src || x->dst != y->dst ||
            x->src_off != y->src_off || x->dst_off != y->dst_off || x->size != y->size ||
            x->pattern != y->pattern || x->pattern_size != y->pattern_size) {
            return false;
        }
    }
    return true;
}

acg_status acg__vk_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    static const char fn[] = "acg_graph_update";
    vk_exec *e = vexec(exec);
    vk_device *d = e->dev;
    if (desc->n_nodes != e->n_steps) { /* the core compared the topologies */
        return acg__error(ACG_ERR_INTERNAL, "%s: %u nodes where %u were recorded", fn,
                          desc->n_nodes, e->n_steps);
    }
    vk_step *steps = acg__calloc(desc->n_nodes > 0 ? desc->n_nodes : 1, sizeof *steps);
    if (steps == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    acg_status st = plan_steps(d, desc, steps, fn);
    if (st == ACG_OK && !same_steps(e->steps, steps, desc->n_nodes)) {
        VkCommandBuffer cb = VK_NULL_HANDLE;
        vk_staging *staging = NULL;
        if ((st = record(e, desc, steps, &cb, &staging, fn)) == ACG_OK) {
            d->vkFreeCommandBuffers(d->device, e->pool, 1, &e->cb);
            acg__vk_staging_free(d, &e->staging);
            e->cb = cb;
            e->staging = staging;
            memcpy(e->steps, steps, desc->n_nodes * sizeof *steps);
        }
    }
    if (st == ACG_OK) {
        write_blocks(e, desc);
    }
    acg__free(steps);
    return st;
}

acg_status acg__vk_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old) {
    (void)old;
    vk_exec *e = vexec(exec);
    if (!same_dims(&desc->nodes[index].dims, &e->steps[index].dims)) {
        return acg__vk_graph_update(exec, desc); /* a new grid: new dispatch sizes */
    }
    write_block(e, desc, index);
    return ACG_OK;
}

void acg__vk_graph_destroy(acg__bk_exec *exec) {
    vk_exec *e = vexec(exec);
    e->dev->vkDestroyCommandPool(e->dev->device, e->pool, NULL); /* and its command buffers */
    acg__vk_staging_free(e->dev, &e->staging);
    acg__vk_args_free(e->dev, e->args);
    acg__free(e->steps);
    acg__free(e);
}

VkCommandBuffer acg__vk_graph_commands(acg__bk_exec *exec) { return vexec(exec)->cb; }

acg_status acg__vk_graph_get_native(acg__bk_exec *exec, acg_native_handle *out) {
    out->kind = ACG_NATIVE_VULKAN_COMMAND_BUFFER;
    out->handle = vexec(exec)->cb;
    return ACG_OK;
}
