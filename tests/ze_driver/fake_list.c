/* fake_list.c — the Level Zero test driver's command lists and command queues.
 *
 * An immediate list queues each command on its own worker as it is appended (fake_run.c),
 * unless it is capturing a graph, which records the command instead (fake_graph.c). A
 * regular list records commands until zeCommandListClose; zeCommandQueueExecuteCommandLists
 * runs closed lists on the queue's worker and then signals the fence, and
 * zeCommandListImmediateAppendCommandListsExp runs them in an immediate list's order after its
 * wait events, then signals its event. The rules acg depends on are enforced: only closed
 * regular lists are executed, and a list is not executed again, reset, appended to or destroyed
 * while an execution of it is pending ("the device is not currently referencing the command
 * list"); breaking one is refused, said on stderr and counted as a violation.
 */
#include "fake_ze_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- flags ----------------------------------------------------------------------------------- */

/* Spec 1.4's list flags (relaxed ordering, maximize throughput, explicit only), and in-order
 * from 1.7. */
static uint32_t list_flags_known(void) {
    uint32_t known = 0x7;
    if (fake__cfg.api_version >= ZE_MAKE_VERSION(1, 7)) {
        known |= ACG_ZE_COMMAND_LIST_FLAG_IN_ORDER;
    }
    return known;
}

/* Spec 1.4's queue flags (explicit only), and in-order from 1.7. */
static uint32_t queue_flags_known(void) {
    uint32_t known = ZE_COMMAND_QUEUE_FLAG_EXPLICIT_ONLY;
    if (fake__cfg.api_version >= ZE_MAKE_VERSION(1, 7)) {
        known |= ACG_ZE_COMMAND_QUEUE_FLAG_IN_ORDER;
    }
    return known;
}

/* (lock held) A queue descriptor, of a queue or an immediate list. */
static ze_result_t check_queue_desc(const ze_command_queue_desc_t *desc, const char *fn,
                                    const char *what) {
    ze_result_t r = fake__stype(desc, ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, fn, what);
    if (r != ZE_RESULT_SUCCESS) {
        return r;
    }
    if ((desc->flags & ~queue_flags_known()) != 0 ||
        desc->mode > ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS ||
        desc->priority > ZE_COMMAND_QUEUE_PRIORITY_PRIORITY_HIGH) {
        return ZE_RESULT_ERROR_INVALID_ENUMERATION;
    }
    /* The codes for a group or queue out of range were not verified against Intel's driver. */
    if (desc->ordinal >= FAKE_GROUP_COUNT || desc->index >= fake__groups[desc->ordinal].queues) {
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

/* ---- command queues ------------------------------------------------------------------------- */

/* (lock held) A command queue of ctx and dev from a checked queue descriptor, its worker started
 * (`what` names its owner in messages): NULL when out of memory. zeCommandQueueCreate makes it a
 * handle; an immediate list keeps it as its own. */
static struct fake_queue *queue_new(struct fake_context *ctx, struct fake_device *dev,
                                    const ze_command_queue_desc_t *desc, const char *what) {
    struct fake_queue *q = calloc(1, sizeof *q);
    if (q == NULL || fake__engine_start(&q->engine, what, dev) != ZE_RESULT_SUCCESS) {
        free(q);
        return NULL;
    }
    q->ctx = ctx;
    q->dev = dev;
    q->desc = *desc;
    q->desc.pNext = NULL; /* the caller's chain is not kept */
    return q;
}

/* (lock held; lets go while it joins) Stops an idle queue's worker and frees it. */
static void queue_free(struct fake_queue *q) {
    fake__engine_stop(&q->engine);
    free(q);
}

/* (lock held) Whether a queue has commands queued or running. */
static int queue_busy(const struct fake_queue *q) { return fake__worker_busy(&q->engine.worker); }

/* (lock held) Waits until queue q completed job `seq`, the host thread counted as one of the
 * waiters of obj (the queue's handle, or the immediate list it runs) so that nothing destroys it
 * meanwhile. */
static ze_result_t queue_wait(struct fake_obj *obj, struct fake_queue *q, uint64_t seq,
                              uint64_t timeout) {
    obj->waiters++;
    ze_result_t r = fake__wait_counter(&q->engine.worker.completed, seq, timeout, q->dev);
    obj->waiters--;
    return r;
}

/* (lock held) Queues cmd on q (obj: as for queue_wait), and in synchronous mode waits for it. */
static ze_result_t queue_run(struct fake_obj *obj, struct fake_queue *q, struct fake_cmd *cmd) {
    uint64_t seq;
    ze_result_t r = fake__engine_submit(&q->engine, cmd, &seq);
    if (r == ZE_RESULT_SUCCESS && q->desc.mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS) {
        r = queue_wait(obj, q, seq, UINT64_MAX);
    }
    return r;
}

/* (takes the lock, held on return whatever the result) The preamble of a list's or queue's
 * creation: the context, the device, the descriptor and the out-pointer given. */
static ze_result_t lock_creation(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                 const void *desc, void *out, const char *fn,
                                 struct fake_context **ctx, struct fake_device **dev) {
    ze_result_t r = fake__lock_context_device(hContext, hDevice, fn, ctx, dev);
    if (r == ZE_RESULT_SUCCESS && (desc == NULL || out == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    return r;
}

/* (takes the lock, as lock_creation) The preamble of zeCommandQueueCreate and
 * zeCommandListCreateImmediate: lock_creation, then the queue descriptor (`what`). */
static ze_result_t lock_queue_creation(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                       const ze_command_queue_desc_t *desc, void *out,
                                       const char *fn, const char *what, struct fake_context **ctx,
                                       struct fake_device **dev) {
    ze_result_t r = lock_creation(hContext, hDevice, desc, out, fn, ctx, dev);
    if (r == ZE_RESULT_SUCCESS) {
        r = check_queue_desc(desc, fn, what);
    }
    return r;
}

/* ---- command lists -------------------------------------------------------------------------- */

ze_result_t fake_zeCommandListCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                     const ze_command_list_desc_t *desc,
                                     ze_command_list_handle_t *phCommandList) {
    static const char fn[] = "zeCommandListCreate";
    FAKE_ENTER(zeCommandListCreate);
    struct fake_context *ctx;
    struct fake_device *dev;
    ze_result_t r;
    FAKE_CHECK(lock_creation(hContext, hDevice, desc, phCommandList, fn, &ctx, &dev), out);
    FAKE_CHECK(fake__stype(desc, ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, fn, "desc"), out);
    FAKE_FAIL_IF((desc->flags & ~list_flags_known()) != 0, ZE_RESULT_ERROR_INVALID_ENUMERATION,
                 out);
    /* The code for a group out of range was not verified against Intel's driver. */
    FAKE_FAIL_IF(desc->commandQueueGroupOrdinal >= FAKE_GROUP_COUNT,
                 ZE_RESULT_ERROR_INVALID_ARGUMENT, out);
    struct fake_list *l = fake__obj_new(sizeof *l, FAKE_LIST);
    FAKE_FAIL_IF(l == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    l->ctx = ctx;
    l->dev = dev;
    l->ordinal = desc->commandQueueGroupOrdinal;
    l->flags = desc->flags;
    l->mutable_ = fake__mutable_requested(desc);
    *phCommandList = (ze_command_list_handle_t)(void *)l;
out:
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListCreateImmediate(ze_context_handle_t hContext,
                                              ze_device_handle_t hDevice,
                                              const ze_command_queue_desc_t *altdesc,
                                              ze_command_list_handle_t *phCommandList) {
    FAKE_ENTER(zeCommandListCreateImmediate);
    struct fake_context *ctx;
    struct fake_device *dev;
    struct fake_list *l = NULL;
    ze_result_t r;
    FAKE_CHECK(lock_queue_creation(hContext, hDevice, altdesc, phCommandList,
                                   "zeCommandListCreateImmediate", "altdesc", &ctx, &dev),
               out);
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    if ((l = calloc(1, sizeof *l)) == NULL ||
        (l->queue = queue_new(ctx, dev, altdesc, "immediate command list")) == NULL) {
        goto out_free;
    }
    if (fake__obj_add(&l->obj, FAKE_LIST) != 0) {
        goto out_queue;
    }
    l->ctx = ctx;
    l->dev = dev;
    l->ordinal = altdesc->ordinal;
    l->flags = altdesc->flags;
    l->immediate = 1;
    *phCommandList = (ze_command_list_handle_t)(void *)l;
    r = ZE_RESULT_SUCCESS;
    goto out;
out_queue:
    queue_free(l->queue);
out_free:
    free(l);
out:
    return fake__unlock(r);
}

/* (lock held) Forgets a regular list's commands. */
static void clear_cmds(struct fake_list *l) {
    for (size_t i = 0; i < l->n_cmds; i++) {
        fake__cmd_free(&l->cmds[i]);
    }
    free(l->cmds);
    l->cmds = NULL;
    l->n_cmds = l->cap_cmds = 0;
    free(l->next_kernels); /* an id taken for a command never appended */
    l->next_kernels = NULL;
    l->n_next_kernels = 0;
    l->next_id = 0;
}

/* (lock held) Whether a list is capturing a graph: then a violation, for fn. */
static int capturing(const struct fake_list *l, const char *fn) {
    if (l->capture != NULL) {
        fake__violation("%s: the list is capturing a graph (%s ends it)", fn,
                        "zeCommandListEndGraphCaptureExt on the capture's primary list");
    }
    return l->capture != NULL;
}

/* (lock held) Why a list may not be destroyed yet (fake__destroy). */
static int list_busy(void *obj, const char *fn) {
    const struct fake_list *l = obj;
    if (capturing(l, fn)) {
        return 1;
    }
    if (l->obj.pending > 0 || l->obj.waiters > 0 || (l->immediate && queue_busy(l->queue))) {
        fake__violation("%s: the %s list is still in use (%s)", fn,
                        l->immediate ? "immediate" : "regular",
                        l->immediate ? "commands pending, or a host thread synchronizing"
                                     : "an execution of it is pending");
        return 1;
    }
    return 0;
}

/* (lock held; lets go while an immediate list's worker is joined) Frees a list that may go. */
static void list_free(void *obj) {
    struct fake_list *l = obj;
    fake__obj_remove(&l->obj);
    if (l->immediate) {
        queue_free(l->queue); /* idle: its worker returns at once */
    }
    clear_cmds(l);
    free(l);
}

ze_result_t fake_zeCommandListDestroy(ze_command_list_handle_t hCommandList) {
    FAKE_ENTER(zeCommandListDestroy);
    return fake__destroy(FAKE_LIST, hCommandList, "zeCommandListDestroy", list_busy, list_free);
}

/* Closing a closed list, or an immediate one (which never needs it), changes nothing. */
ze_result_t fake_zeCommandListClose(ze_command_list_handle_t hCommandList) {
    FAKE_ENTER(zeCommandListClose);
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, "zeCommandListClose", (void **)&l);
    if (r == ZE_RESULT_SUCCESS && !l->immediate) {
        l->closed = 1;
    }
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListReset(ze_command_list_handle_t hCommandList) {
    static const char fn[] = "zeCommandListReset";
    FAKE_ENTER(zeCommandListReset);
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS && capturing(l, fn)) {
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS && (l->obj.pending > 0 || (l->immediate && queue_busy(l->queue)))) {
        fake__violation("%s: the list is still referenced by the device (%s)", fn,
                        l->immediate ? "commands pending" : "an execution of it is pending");
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS) {
        clear_cmds(l);
        l->closed = 0;
    }
    return fake__unlock(r);
}

/* ---- appending ------------------------------------------------------------------------------ */

/* (takes the lock, held on return whatever the result) The start of an append of cmd (its entry
 * point named): the list, open if it is a regular one. */
static ze_result_t lock_append(ze_command_list_handle_t h, const struct fake_cmd *cmd,
                               struct fake_list **out) {
    ze_result_t r = fake__lock_object(FAKE_LIST, h, cmd->entry, (void **)out);
    if (r == ZE_RESULT_SUCCESS && !(*out)->immediate && (*out)->closed) {
        fake__violation("%s: the command list is closed (zeCommandListReset reopens it)",
                        cmd->entry);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return r;
}

/* (lock held; lets go of it) The end of an append whose checks gave r: cmd appended to l when
 * they passed, else what it owns freed; the result. */
static ze_result_t unlock_append(ze_result_t r, struct fake_list *l, struct fake_cmd *cmd) {
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(l, cmd);
    } else {
        fake__cmd_free(cmd);
    }
    return fake__unlock(r);
}

ze_result_t fake__append(struct fake_list *l, struct fake_cmd *cmd) {
    if (l->immediate) {
        /* A command a capture records runs at a replay: nothing waits for it now. */
        int recorded;
        ze_result_t r = fake__graph_record(l, cmd, &recorded);
        if (r != ZE_RESULT_SUCCESS || recorded) {
            return r;
        }
        if (l->dev->lost) {
            fake__cmd_free(cmd);
            return ZE_RESULT_ERROR_DEVICE_LOST;
        }
        return queue_run(&l->obj, l->queue, cmd);
    }
    struct fake_cmd *cmds = fake__grow(l->cmds, l->n_cmds, &l->cap_cmds, sizeof *cmds);
    if (cmds == NULL) {
        fake__cmd_free(cmd);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    l->cmds = cmds;
    fake__mutable_assign(l, cmd);
    l->cmds[l->n_cmds++] = *cmd;
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake__sync_args(struct fake_list *l, ze_event_handle_t signal, uint32_t n_waits,
                            ze_event_handle_t *waits, struct fake_cmd *cmd) {
    if (signal != NULL) {
        ze_result_t r = fake__event_ref(signal, l->ctx, cmd->entry, &cmd->signal);
        if (r != ZE_RESULT_SUCCESS) {
            return r;
        }
    }
    return fake__wait_refs(n_waits, waits, l->ctx, cmd->entry, cmd);
}

ze_result_t fake_zeCommandListAppendBarrier(ze_command_list_handle_t hCommandList,
                                            ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                            ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendBarrier);
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = "zeCommandListAppendBarrier"};
    struct fake_list *l = NULL;
    ze_result_t r = lock_append(hCommandList, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    return unlock_append(r, l, &cmd);
}

/* A copy's regions: not NULL, and not overlapping, which would make the result depend on the
 * copy's order (memcpy's rule). */
static ze_result_t check_copy(const struct fake_cmd *c) {
    uintptr_t dst = c->u.copy.dst, src = c->u.copy.src;
    size_t size = c->u.copy.bytes;
    if (dst == 0 || src == 0) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (size > 0 && dst < src + size && src < dst + size) {
        fprintf(stderr, "acg Level Zero test driver: %s: [%p, +%zu) and [%p, +%zu) overlap\n",
                c->entry, (void *)dst, size, (void *)src, size);
        return ZE_RESULT_ERROR_OVERLAPPING_REGIONS;
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake_zeCommandListAppendMemoryCopy(ze_command_list_handle_t hCommandList, void *dstptr,
                                               const void *srcptr, size_t size,
                                               ze_event_handle_t hSignalEvent,
                                               uint32_t numWaitEvents,
                                               ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendMemoryCopy);
    struct fake_cmd cmd = {.kind = FAKE_CMD_COPY, .entry = "zeCommandListAppendMemoryCopy"};
    cmd.u.copy.dst = (uintptr_t)dstptr;
    cmd.u.copy.src = (uintptr_t)srcptr;
    cmd.u.copy.bytes = size;
    struct fake_list *l = NULL;
    ze_result_t r = lock_append(hCommandList, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = check_copy(&cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    return unlock_append(r, l, &cmd);
}

/* The pattern size must be a power of two up to the group's maxMemoryFillPatternSize and divide
 * the size: INVALID_SIZE otherwise (not verified against Intel's driver). */
ze_result_t fake_zeCommandListAppendMemoryFill(ze_command_list_handle_t hCommandList, void *ptr,
                                               const void *pattern, size_t pattern_size,
                                               size_t size, ze_event_handle_t hSignalEvent,
                                               uint32_t numWaitEvents,
                                               ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendMemoryFill);
    struct fake_cmd cmd = {.kind = FAKE_CMD_FILL, .entry = "zeCommandListAppendMemoryFill"};
    struct fake_list *l = NULL;
    ze_result_t r = lock_append(hCommandList, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS && (ptr == NULL || pattern == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS &&
        (pattern_size == 0 || (pattern_size & (pattern_size - 1)) != 0 ||
         pattern_size > fake__groups[l->ordinal].max_pattern || size % pattern_size != 0)) {
        r = ZE_RESULT_ERROR_INVALID_SIZE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        cmd.u.fill.dst = (uintptr_t)ptr;
        cmd.u.fill.bytes = size;
        cmd.u.fill.pattern_size = pattern_size;
        memcpy(cmd.u.fill.pattern, pattern, pattern_size);
    }
    return unlock_append(r, l, &cmd);
}

/* (lock held) Whether kernel k launches on list l: a violation, for fn, when not. */
static int launches_on(const struct fake_kernel *k, const struct fake_list *l, const char *fn) {
    if (!(fake__groups[l->ordinal].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)) {
        fake__violation("%s: the list's command queue group (ordinal %u) does not compute", fn,
                        l->ordinal);
        return 0;
    }
    if (k->module->ctx != l->ctx || k->module->dev != l->dev) {
        fake__violation("%s: kernel %s is of another context or device than the list", fn, k->name);
        return 0;
    }
    return 1;
}

ze_result_t fake_zeCommandListAppendLaunchKernel(ze_command_list_handle_t hCommandList,
                                                 ze_kernel_handle_t hKernel,
                                                 const ze_group_count_t *pLaunchFuncArgs,
                                                 ze_event_handle_t hSignalEvent,
                                                 uint32_t numWaitEvents,
                                                 ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendLaunchKernel);
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = "zeCommandListAppendLaunchKernel"};
    struct fake_list *l = NULL;
    struct fake_kernel *k;
    ze_result_t r = lock_append(hCommandList, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__lookup(FAKE_KERNEL, hKernel, cmd.entry, (void **)&k);
    }
    if (r == ZE_RESULT_SUCCESS && pLaunchFuncArgs == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS && !launches_on(k, l, cmd.entry)) {
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__kernel_cmd(k, pLaunchFuncArgs, cmd.entry, &cmd);
    }
    return unlock_append(r, l, &cmd);
}

/* zeCommandListAppendSignalEvent and zeCommandListAppendEventReset: a command of one event, a
 * barrier signalling it or a reset of it. */
static ze_result_t append_event(ze_command_list_handle_t h, ze_event_handle_t hEvent,
                                enum fake_cmd_kind kind, const char *fn) {
    struct fake_cmd cmd = {.kind = kind, .entry = fn};
    struct fake_list *l = NULL;
    ze_result_t r = lock_append(h, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__event_ref(hEvent, l->ctx, fn,
                            kind == FAKE_CMD_RESET ? &cmd.u.reset.event : &cmd.signal);
    }
    return unlock_append(r, l, &cmd);
}

ze_result_t fake_zeCommandListAppendSignalEvent(ze_command_list_handle_t hCommandList,
                                                ze_event_handle_t hEvent) {
    FAKE_ENTER(zeCommandListAppendSignalEvent);
    return append_event(hCommandList, hEvent, FAKE_CMD_BARRIER, "zeCommandListAppendSignalEvent");
}

ze_result_t fake_zeCommandListAppendEventReset(ze_command_list_handle_t hCommandList,
                                               ze_event_handle_t hEvent) {
    FAKE_ENTER(zeCommandListAppendEventReset);
    return append_event(hCommandList, hEvent, FAKE_CMD_RESET, "zeCommandListAppendEventReset");
}

ze_result_t fake_zeCommandListAppendWaitOnEvents(ze_command_list_handle_t hCommandList,
                                                 uint32_t numEvents, ze_event_handle_t *phEvents) {
    FAKE_ENTER(zeCommandListAppendWaitOnEvents);
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = "zeCommandListAppendWaitOnEvents"};
    struct fake_list *l = NULL;
    ze_result_t r = lock_append(hCommandList, &cmd, &l);
    if (r == ZE_RESULT_SUCCESS && phEvents == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__wait_refs(numEvents, phEvents, l->ctx, cmd.entry, &cmd);
    }
    return unlock_append(r, l, &cmd);
}

/* ---- executing regular lists ---------------------------------------------------------------- */

/* The lists an execution is given: INVALID_NULL_POINTER for none, INVALID_SIZE for 0 (not
 * verified against Intel's driver for an immediate append). */
static ze_result_t list_array(uint32_t n, ze_command_list_handle_t *handles) {
    if (handles == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    return n == 0 ? ZE_RESULT_ERROR_INVALID_SIZE : ZE_RESULT_SUCCESS;
}

/* (lock held) An execution of n regular lists by an engine of context ctx and group `ordinal`:
 * every list live, regular, closed, of that context and group, not pending, not twice, and
 * every object its commands use still alive. */
static ze_result_t exec_cmd(uint32_t n, ze_command_list_handle_t *handles, struct fake_context *ctx,
                            uint32_t ordinal, const char *fn, struct fake_cmd *cmd) {
    struct fake_ref *refs = calloc(n, sizeof *refs);
    if (refs == NULL) {
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    cmd->kind = FAKE_CMD_EXECUTE;
    cmd->u.exec.lists = refs;
    cmd->u.exec.n_lists = n;
    for (uint32_t i = 0; i < n; i++) {
        struct fake_list *l;
        ze_result_t r = fake__lookup(FAKE_LIST, handles[i], fn, (void **)&l);
        if (r != ZE_RESULT_SUCCESS) {
            return r;
        }
        const char *wrong = NULL;
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        if (l->immediate) {
            wrong = "is an immediate list";
        } else if (!l->closed) {
            wrong = "is not closed";
        } else if (l->obj.pending > 0) {
            wrong = "is still executing (an earlier execution is pending)";
        } else if (l->ctx != ctx) {
            wrong = "is of another context";
        } else if (l->ordinal != ordinal) {
            wrong = "is of another command queue group";
            r = ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE;
        }
        for (uint32_t j = 0; j < i && wrong == NULL; j++) {
            wrong = refs[j].obj == &l->obj ? "is given twice" : NULL;
        }
        if (wrong != NULL) {
            fake__violation("%s: command list %u %s", fn, i, wrong);
            return r;
        }
        refs[i] = fake__ref(&l->obj);
        for (size_t j = 0; j < l->n_cmds; j++) {
            const struct fake_cmd *c = &l->cmds[j];
            const struct fake_ref *dead = fake__cmd_dead_ref(c);
            if (dead != NULL) {
                fake__violation("%s: command %zu of list %u (%s) uses a %s destroyed since", fn, j,
                                i, c->entry, fake__kind_name(dead->kind));
                return ZE_RESULT_ERROR_INVALID_ARGUMENT;
            }
            if (c->kind == FAKE_CMD_KERNEL && !fake__kernel_args_set(c)) {
                fake__violation("%s: command %llu of list %u switched kernels and not every "
                                "argument was set again",
                                fn, (unsigned long long)c->id, i);
                return ZE_RESULT_ERROR_INVALID_ARGUMENT;
            }
        }
    }
    return ZE_RESULT_SUCCESS;
}

/* ---- command queues ------------------------------------------------------------------------- */

ze_result_t fake_zeCommandQueueCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                      const ze_command_queue_desc_t *desc,
                                      ze_command_queue_handle_t *phCommandQueue) {
    FAKE_ENTER(zeCommandQueueCreate);
    struct fake_context *ctx;
    struct fake_device *dev;
    ze_result_t r = lock_queue_creation(hContext, hDevice, desc, phCommandQueue,
                                        "zeCommandQueueCreate", "desc", &ctx, &dev);
    struct fake_queue *q =
        r == ZE_RESULT_SUCCESS ? queue_new(ctx, dev, desc, "command queue") : NULL;
    if (r == ZE_RESULT_SUCCESS && (q == NULL || fake__obj_add(&q->obj, FAKE_QUEUE) != 0)) {
        if (q != NULL) {
            queue_free(q);
        }
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (r == ZE_RESULT_SUCCESS) {
        *phCommandQueue = (ze_command_queue_handle_t)(void *)q;
    }
    return fake__unlock(r);
}

/* (lock held) Why a queue may not be destroyed yet (fake__destroy). */
static int queue_in_use(void *obj, const char *fn) {
    const struct fake_queue *q = obj;
    if (q->fences == 0 && q->obj.waiters == 0 && !queue_busy(q)) {
        return 0;
    }
    fake__violation("%s: the queue still has %ld fences, %s", fn, q->fences,
                    queue_busy(q) ? "executions pending" : "no execution pending");
    return 1;
}

/* (lock held; lets go while its worker is joined) Frees a queue handle that may go. */
static void queue_destroy(void *obj) {
    struct fake_queue *q = obj;
    fake__obj_remove(&q->obj);
    queue_free(q);
}

ze_result_t fake_zeCommandQueueDestroy(ze_command_queue_handle_t hCommandQueue) {
    FAKE_ENTER(zeCommandQueueDestroy);
    return fake__destroy(FAKE_QUEUE, hCommandQueue, "zeCommandQueueDestroy", queue_in_use,
                         queue_destroy);
}

/* (lock held) The fence of an execution on q: the queue's, and neither signalled nor awaited by
 * an execution already (a violation, for fn, where Intel's driver would quietly re-arm it). */
static ze_result_t execution_fence(ze_fence_handle_t h, const struct fake_queue *q, const char *fn,
                                   struct fake_fence **out) {
    ze_result_t r = fake__lookup(FAKE_FENCE, h, fn, (void **)out);
    const struct fake_fence *f = *out;
    if (r == ZE_RESULT_SUCCESS && (f->queue != q || f->signalled || f->obj.pending > 0)) {
        fake__violation("%s: the fence %s", fn,
                        f->queue != q  ? "is another queue's"
                        : f->signalled ? "is signalled (zeFenceReset it first)"
                                       : "is still awaited by an earlier execution");
        r = ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
    }
    return r;
}

ze_result_t fake_zeCommandQueueExecuteCommandLists(ze_command_queue_handle_t hCommandQueue,
                                                   uint32_t numCommandLists,
                                                   ze_command_list_handle_t *phCommandLists,
                                                   ze_fence_handle_t hFence) {
    static const char fn[] = "zeCommandQueueExecuteCommandLists";
    FAKE_ENTER(zeCommandQueueExecuteCommandLists);
    struct fake_queue *q;
    struct fake_fence *f = NULL;
    struct fake_cmd cmd = {.kind = FAKE_CMD_EXECUTE, .entry = fn};
    ze_result_t r = fake__lock_object(FAKE_QUEUE, hCommandQueue, fn, (void **)&q);
    if (r == ZE_RESULT_SUCCESS) {
        r = list_array(numCommandLists, phCommandLists);
    }
    if (r == ZE_RESULT_SUCCESS && hFence != NULL) {
        r = execution_fence(hFence, q, fn, &f);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = exec_cmd(numCommandLists, phCommandLists, q->ctx, q->desc.ordinal, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS && q->dev->lost) {
        r = ZE_RESULT_ERROR_DEVICE_LOST;
    }
    if (r != ZE_RESULT_SUCCESS) {
        fake__cmd_free(&cmd);
        return fake__unlock(r);
    }
    cmd.u.exec.fence = fake__ref(f != NULL ? &f->obj : NULL);
    fake__graph_eager(&cmd);
    return fake__unlock(queue_run(&q->obj, q, &cmd));
}

ze_result_t fake_zeCommandQueueSynchronize(ze_command_queue_handle_t hCommandQueue,
                                           uint64_t timeout) {
    FAKE_ENTER(zeCommandQueueSynchronize);
    struct fake_queue *q;
    ze_result_t r =
        fake__lock_object(FAKE_QUEUE, hCommandQueue, "zeCommandQueueSynchronize", (void **)&q);
    if (r == ZE_RESULT_SUCCESS) {
        r = queue_wait(&q->obj, q, q->engine.worker.submitted, timeout);
    }
    return fake__unlock(r);
}

/* ---- extension functions -------------------------------------------------------------------- */

/* For a regular list: INVALID_ARGUMENT (the code was not verified against Intel's driver). For
 * a list capturing a graph: GRAPH_CAPTURE_UNSUPPORTED, as the graph extension says (its
 * commands run at a replay, never before). */
ze_result_t fake_zeCommandListHostSynchronize(ze_command_list_handle_t hCommandList,
                                              uint64_t timeout) {
    static const char fn[] = "zeCommandListHostSynchronize";
    FAKE_ENTER(zeCommandListHostSynchronize);
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS && !l->immediate) {
        fake__violation("%s: the list is not an immediate list", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS && l->capture != NULL) {
        r = ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = queue_wait(&l->obj, l->queue, l->queue->engine.worker.submitted, timeout);
    }
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListImmediateAppendCommandListsExp(
    ze_command_list_handle_t hCommandListImmediate, uint32_t numCommandLists,
    ze_command_list_handle_t *phCommandLists, ze_event_handle_t hSignalEvent,
    uint32_t numWaitEvents, ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListImmediateAppendCommandListsExp";
    FAKE_ENTER(zeCommandListImmediateAppendCommandListsExp);
    struct fake_list *imm;
    struct fake_cmd cmd = {.kind = FAKE_CMD_EXECUTE, .entry = fn};
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandListImmediate, fn, (void **)&imm);
    if (r == ZE_RESULT_SUCCESS && !imm->immediate) {
        fake__violation("%s: hCommandListImmediate is a regular list", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = list_array(numCommandLists, phCommandLists);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(imm, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = exec_cmd(numCommandLists, phCommandLists, imm->ctx, imm->ordinal, fn, &cmd);
    }
    return unlock_append(r, imm, &cmd);
}

/* ---- unload --------------------------------------------------------------------------------- */

/* (lock held) Frees a list at unload, its queue's worker stopped already (fake__workers_stop). */
static void list_unload(void *obj) {
    struct fake_list *l = obj;
    fake__obj_remove(&l->obj);
    clear_cmds(l);
    free(l->queue);
    free(l);
}

/* (lock held) Frees a queue at unload, its worker stopped already. */
static void queue_unload(void *obj) {
    struct fake_queue *q = obj;
    fake__obj_remove(&q->obj);
    free(q);
}

void fake__lists_unload(void) {
    fake__free_all(FAKE_LIST, list_unload);
    fake__free_all(FAKE_QUEUE, queue_unload);
}
