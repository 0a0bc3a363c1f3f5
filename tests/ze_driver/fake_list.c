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

/* ---- engines -------------------------------------------------------------------------------- */

/* (lock held) Starts the worker of a new immediate list or queue and makes it live as `kind`;
 * on failure nothing is left running. */
static ze_result_t engine_object_start(struct fake_obj *obj, struct fake_engine *engine,
                                       enum fake_kind kind, const char *what,
                                       struct fake_device *dev) {
    ze_result_t r = fake__engine_start(engine, what, dev);
    if (r == ZE_RESULT_SUCCESS && fake__obj_add(obj, kind) != 0) {
        fake__engine_stop(engine);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    return r;
}

/* (lock held) Waits until the engine of a list or queue (obj) completed job `seq`, the host
 * thread counted as one of obj's waiters so that nothing destroys it meanwhile. */
static ze_result_t engine_wait(struct fake_obj *obj, struct fake_engine *engine, uint64_t seq,
                               uint64_t timeout, const struct fake_device *dev) {
    obj->waiters++;
    ze_result_t r = fake__wait_counter(&engine->completed, seq, timeout, dev);
    obj->waiters--;
    return r;
}

/* (lock held) Queues cmd on the engine, and in synchronous mode waits for it. */
static ze_result_t engine_run(struct fake_obj *obj, struct fake_engine *engine,
                              ze_command_queue_mode_t mode, const struct fake_device *dev,
                              struct fake_cmd *cmd) {
    uint64_t seq;
    ze_result_t r = fake__engine_submit(engine, cmd, &seq);
    if (r == ZE_RESULT_SUCCESS && mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS) {
        r = engine_wait(obj, engine, seq, UINT64_MAX, dev);
    }
    return r;
}

/* ---- command lists -------------------------------------------------------------------------- */

/* (lock held) The preamble of a list's creation. */
static ze_result_t creation(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                            const void *desc, void *out, const char *fn, struct fake_context **ctx,
                            struct fake_device **dev) {
    ze_result_t r = fake__ready_lookup(FAKE_CONTEXT, hContext, fn, (void **)ctx);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__device(hDevice, dev);
    }
    if (r == ZE_RESULT_SUCCESS && (desc == NULL || out == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    return r;
}

ze_result_t fake_zeCommandListCreate(ze_context_handle_t hContext, ze_device_handle_t hDevice,
                                     const ze_command_list_desc_t *desc,
                                     ze_command_list_handle_t *phCommandList) {
    static const char fn[] = "zeCommandListCreate";
    FAKE_ENTER(zeCommandListCreate);
    struct fake_context *ctx;
    struct fake_device *dev;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = creation(hContext, hDevice, desc, phCommandList, fn, &ctx, &dev);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(desc, ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC, fn, "desc");
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    FAKE_FAIL_IF((desc->flags & ~list_flags_known()) != 0, ZE_RESULT_ERROR_INVALID_ENUMERATION,
                 out);
    if (desc->commandQueueGroupOrdinal >= FAKE_GROUP_COUNT) {
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT; /* not verified against Intel's driver */
        goto out;
    }
    struct fake_list *l = calloc(1, sizeof *l);
    if (l == NULL || fake__obj_add(&l->obj, FAKE_LIST) != 0) {
        free(l);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    l->ctx = ctx;
    l->dev = dev;
    l->ordinal = desc->commandQueueGroupOrdinal;
    l->flags = desc->flags;
    l->mutable_ = fake__mutable_requested(desc);
    *phCommandList = (ze_command_list_handle_t)(void *)l;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListCreateImmediate(ze_context_handle_t hContext,
                                              ze_device_handle_t hDevice,
                                              const ze_command_queue_desc_t *altdesc,
                                              ze_command_list_handle_t *phCommandList) {
    static const char fn[] = "zeCommandListCreateImmediate";
    FAKE_ENTER(zeCommandListCreateImmediate);
    struct fake_context *ctx;
    struct fake_device *dev;
    struct fake_list *l = NULL;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = creation(hContext, hDevice, altdesc, phCommandList, fn, &ctx, &dev);
    if (r == ZE_RESULT_SUCCESS) {
        r = check_queue_desc(altdesc, fn, "altdesc");
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    if ((l = calloc(1, sizeof *l)) == NULL) {
        goto out;
    }
    FAKE_CHECK(engine_object_start(&l->obj, &l->engine, FAKE_LIST, "immediate command list", dev),
               out_free);
    l->ctx = ctx;
    l->dev = dev;
    l->ordinal = altdesc->ordinal;
    l->flags = altdesc->flags;
    l->immediate = 1;
    l->mode = altdesc->mode;
    *phCommandList = (ze_command_list_handle_t)(void *)l;
    goto out;
out_free:
    free(l);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* (lock held) Whether an immediate list has commands queued or running. */
static int immediate_busy(const struct fake_list *l) {
    return l->engine.completed < l->engine.submitted;
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

ze_result_t fake_zeCommandListDestroy(ze_command_list_handle_t hCommandList) {
    static const char fn[] = "zeCommandListDestroy";
    FAKE_ENTER(zeCommandListDestroy);
    struct fake_list *l;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_LIST, hCommandList, fn, (void **)&l), out);
    if (l->capture != NULL) {
        fake__violation("%s: the list is capturing a graph (%s ends it)", fn,
                        "zeCommandListEndGraphCaptureExt on the capture's primary list");
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
        goto out;
    }
    if (l->obj.pending > 0 || l->obj.waiters > 0 || (l->immediate && immediate_busy(l))) {
        fake__violation("%s: the %s list is still in use (%s)", fn,
                        l->immediate ? "immediate" : "regular",
                        l->immediate ? "commands pending, or a host thread synchronizing"
                                     : "an execution of it is pending");
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
        goto out;
    }
    fake__obj_remove(&l->obj);
    if (l->immediate) {
        fake__engine_stop(&l->engine); /* idle: it returns at once */
    }
    r = fake__released(fake__bit(l->dev));
    clear_cmds(l);
    free(l);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* Closing a closed list, or an immediate one (which never needs it), changes nothing. */
ze_result_t fake_zeCommandListClose(ze_command_list_handle_t hCommandList) {
    FAKE_ENTER(zeCommandListClose);
    struct fake_list *l;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_LIST, hCommandList, "zeCommandListClose", (void **)&l);
    if (r == ZE_RESULT_SUCCESS && !l->immediate) {
        l->closed = 1;
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListReset(ze_command_list_handle_t hCommandList) {
    static const char fn[] = "zeCommandListReset";
    FAKE_ENTER(zeCommandListReset);
    struct fake_list *l;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_LIST, hCommandList, fn, (void **)&l), out);
    if (l->capture != NULL) {
        fake__violation("%s: the list is capturing a graph (%s ends it)", fn,
                        "zeCommandListEndGraphCaptureExt on the capture's primary list");
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    if (l->obj.pending > 0 || (l->immediate && immediate_busy(l))) {
        fake__violation("%s: the list is still referenced by the device (%s)", fn,
                        l->immediate ? "commands pending" : "an execution of it is pending");
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    clear_cmds(l);
    l->closed = 0;
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- appending ------------------------------------------------------------------------------ */

/* (lock held) The preamble of an append: the list, open if it is a regular one. */
static ze_result_t list_for_append(ze_command_list_handle_t h, const char *fn,
                                   struct fake_list **out) {
    ze_result_t r = fake__ready_lookup(FAKE_LIST, h, fn, (void **)out);
    if (r == ZE_RESULT_SUCCESS && !(*out)->immediate && (*out)->closed) {
        fake__violation("%s: the command list is closed (zeCommandListReset reopens it)", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return r;
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
        return engine_run(&l->obj, &l->engine, l->mode, l->dev, cmd);
    }
    if (l->n_cmds == l->cap_cmds) {
        size_t cap = l->cap_cmds ? 2 * l->cap_cmds : 16;
        struct fake_cmd *v = realloc(l->cmds, cap * sizeof *v);
        if (v == NULL) {
            fake__cmd_free(cmd);
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
        l->cmds = v;
        l->cap_cmds = cap;
    }
    fake__mutable_assign(l, cmd);
    l->cmds[l->n_cmds++] = *cmd;
    return ZE_RESULT_SUCCESS;
}

ze_result_t fake__sync_args(struct fake_list *l, ze_event_handle_t signal, uint32_t n_waits,
                            ze_event_handle_t *waits, const char *fn, struct fake_cmd *cmd) {
    if (signal != NULL) {
        ze_result_t r = fake__event_ref(signal, l->ctx, fn, &cmd->signal);
        if (r != ZE_RESULT_SUCCESS) {
            return r;
        }
    }
    return fake__wait_refs(n_waits, waits, l->ctx, fn, cmd);
}

ze_result_t fake_zeCommandListAppendBarrier(ze_command_list_handle_t hCommandList,
                                            ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                            ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListAppendBarrier";
    FAKE_ENTER(zeCommandListAppendBarrier);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListAppendMemoryCopy(ze_command_list_handle_t hCommandList, void *dstptr,
                                               const void *srcptr, size_t size,
                                               ze_event_handle_t hSignalEvent,
                                               uint32_t numWaitEvents,
                                               ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListAppendMemoryCopy";
    FAKE_ENTER(zeCommandListAppendMemoryCopy);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_COPY, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS && (dstptr == NULL || srcptr == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    uintptr_t dst = (uintptr_t)dstptr, src = (uintptr_t)srcptr;
    /* Overlapping regions would make the result depend on the copy's order (memcpy's rule). */
    if (r == ZE_RESULT_SUCCESS && size > 0 && dst < src + size && src < dst + size) {
        fprintf(stderr, "acg Level Zero test driver: %s: [%p, +%zu) and [%p, +%zu) overlap\n", fn,
                dstptr, size, srcptr, size);
        r = ZE_RESULT_ERROR_OVERLAPPING_REGIONS;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        cmd.u.copy.dst = dst;
        cmd.u.copy.src = src;
        cmd.u.copy.bytes = size;
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* The pattern size must be a power of two up to the group's maxMemoryFillPatternSize and divide
 * the size: INVALID_SIZE otherwise (not verified against Intel's driver). */
ze_result_t fake_zeCommandListAppendMemoryFill(ze_command_list_handle_t hCommandList, void *ptr,
                                               const void *pattern, size_t pattern_size,
                                               size_t size, ze_event_handle_t hSignalEvent,
                                               uint32_t numWaitEvents,
                                               ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListAppendMemoryFill";
    FAKE_ENTER(zeCommandListAppendMemoryFill);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_FILL, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS && (ptr == NULL || pattern == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS &&
        (pattern_size == 0 || (pattern_size & (pattern_size - 1)) != 0 ||
         pattern_size > fake__groups[l->ordinal].max_pattern || size % pattern_size != 0)) {
        r = ZE_RESULT_ERROR_INVALID_SIZE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        cmd.u.fill.dst = (uintptr_t)ptr;
        cmd.u.fill.bytes = size;
        cmd.u.fill.pattern_size = pattern_size;
        memcpy(cmd.u.fill.pattern, pattern, pattern_size);
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListAppendLaunchKernel(ze_command_list_handle_t hCommandList,
                                                 ze_kernel_handle_t hKernel,
                                                 const ze_group_count_t *pLaunchFuncArgs,
                                                 ze_event_handle_t hSignalEvent,
                                                 uint32_t numWaitEvents,
                                                 ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListAppendLaunchKernel";
    FAKE_ENTER(zeCommandListAppendLaunchKernel);
    struct fake_list *l;
    struct fake_kernel *k;
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__lookup(FAKE_KERNEL, hKernel, fn, (void **)&k);
    }
    if (r == ZE_RESULT_SUCCESS && pLaunchFuncArgs == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    if (!(fake__groups[l->ordinal].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE)) {
        fake__violation("%s: the list's command queue group (ordinal %u) does not compute", fn,
                        l->ordinal);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    if (k->module->ctx != l->ctx || k->module->dev != l->dev) {
        fake__violation("%s: kernel %s is of another context or device than the list", fn, k->name);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    if ((r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, fn, &cmd)) == 0 &&
        (r = fake__kernel_cmd(k, pLaunchFuncArgs, fn, &cmd)) == 0) {
        r = fake__append(l, &cmd);
        goto out;
    }
    fake__cmd_free(&cmd);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListAppendSignalEvent(ze_command_list_handle_t hCommandList,
                                                ze_event_handle_t hEvent) {
    static const char fn[] = "zeCommandListAppendSignalEvent";
    FAKE_ENTER(zeCommandListAppendSignalEvent);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__event_ref(hEvent, l->ctx, fn, &cmd.signal);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListAppendWaitOnEvents(ze_command_list_handle_t hCommandList,
                                                 uint32_t numEvents, ze_event_handle_t *phEvents) {
    static const char fn[] = "zeCommandListAppendWaitOnEvents";
    FAKE_ENTER(zeCommandListAppendWaitOnEvents);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_BARRIER, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS && phEvents == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__wait_refs(numEvents, phEvents, l->ctx, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListAppendEventReset(ze_command_list_handle_t hCommandList,
                                               ze_event_handle_t hEvent) {
    static const char fn[] = "zeCommandListAppendEventReset";
    FAKE_ENTER(zeCommandListAppendEventReset);
    struct fake_list *l;
    struct fake_cmd cmd = {.kind = FAKE_CMD_RESET, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = list_for_append(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__event_ref(hEvent, l->ctx, fn, &cmd.u.reset.event);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- executing regular lists ---------------------------------------------------------------- */

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
    static const char fn[] = "zeCommandQueueCreate";
    FAKE_ENTER(zeCommandQueueCreate);
    struct fake_context *ctx;
    struct fake_device *dev;
    struct fake_queue *q = NULL;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = creation(hContext, hDevice, desc, phCommandQueue, fn, &ctx, &dev);
    if (r == ZE_RESULT_SUCCESS) {
        r = check_queue_desc(desc, fn, "desc");
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    if ((q = calloc(1, sizeof *q)) == NULL) {
        goto out;
    }
    FAKE_CHECK(engine_object_start(&q->obj, &q->engine, FAKE_QUEUE, "command queue", dev),
               out_free);
    q->ctx = ctx;
    q->dev = dev;
    q->ordinal = desc->ordinal;
    q->index = desc->index;
    q->flags = desc->flags;
    q->mode = desc->mode;
    *phCommandQueue = (ze_command_queue_handle_t)(void *)q;
    goto out;
out_free:
    free(q);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandQueueDestroy(ze_command_queue_handle_t hCommandQueue) {
    static const char fn[] = "zeCommandQueueDestroy";
    FAKE_ENTER(zeCommandQueueDestroy);
    struct fake_queue *q;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r;
    FAKE_CHECK(fake__ready_lookup(FAKE_QUEUE, hCommandQueue, fn, (void **)&q), out);
    if (q->fences > 0 || q->obj.waiters > 0 || q->engine.completed < q->engine.submitted) {
        fake__violation("%s: the queue still has %ld fences, %s", fn, q->fences,
                        q->engine.completed < q->engine.submitted ? "executions pending"
                                                                  : "no execution pending");
        r = ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE;
        goto out;
    }
    fake__obj_remove(&q->obj);
    fake__engine_stop(&q->engine);
    r = fake__released(fake__bit(q->dev));
    free(q);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* A fence must be the queue's, and neither signalled nor awaited by an execution already: it
 * is refused then (a violation), where Intel's driver would quietly re-arm it. */
ze_result_t fake_zeCommandQueueExecuteCommandLists(ze_command_queue_handle_t hCommandQueue,
                                                   uint32_t numCommandLists,
                                                   ze_command_list_handle_t *phCommandLists,
                                                   ze_fence_handle_t hFence) {
    static const char fn[] = "zeCommandQueueExecuteCommandLists";
    FAKE_ENTER(zeCommandQueueExecuteCommandLists);
    struct fake_queue *q;
    struct fake_fence *f = NULL;
    struct fake_cmd cmd = {.kind = FAKE_CMD_EXECUTE, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_QUEUE, hCommandQueue, fn, (void **)&q);
    if (r == ZE_RESULT_SUCCESS && phCommandLists == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS && numCommandLists == 0) {
        r = ZE_RESULT_ERROR_INVALID_SIZE;
    }
    if (r == ZE_RESULT_SUCCESS && hFence != NULL) {
        r = fake__lookup(FAKE_FENCE, hFence, fn, (void **)&f);
        if (r == ZE_RESULT_SUCCESS && (f->queue != q || f->signalled || f->obj.pending > 0)) {
            fake__violation("%s: the fence %s", fn,
                            f->queue != q  ? "is another queue's"
                            : f->signalled ? "is signalled (zeFenceReset it first)"
                                           : "is still awaited by an earlier execution");
            r = ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT;
        }
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = exec_cmd(numCommandLists, phCommandLists, q->ctx, q->ordinal, fn, &cmd);
    }
    if (r != ZE_RESULT_SUCCESS) {
        fake__cmd_free(&cmd);
        goto out;
    }
    if (q->dev->lost) {
        fake__cmd_free(&cmd);
        r = ZE_RESULT_ERROR_DEVICE_LOST;
        goto out;
    }
    cmd.u.exec.fence = fake__ref(f != NULL ? &f->obj : NULL);
    fake__graph_eager(&cmd);
    r = engine_run(&q->obj, &q->engine, q->mode, q->dev, &cmd);
out:
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandQueueSynchronize(ze_command_queue_handle_t hCommandQueue,
                                           uint64_t timeout) {
    FAKE_ENTER(zeCommandQueueSynchronize);
    struct fake_queue *q;
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r =
        fake__ready_lookup(FAKE_QUEUE, hCommandQueue, "zeCommandQueueSynchronize", (void **)&q);
    if (r == ZE_RESULT_SUCCESS) {
        r = engine_wait(&q->obj, &q->engine, q->engine.submitted, timeout, q->dev);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
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
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS && !l->immediate) {
        fake__violation("%s: the list is not an immediate list", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS && l->capture != NULL) {
        r = ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = engine_wait(&l->obj, &l->engine, l->engine.submitted, timeout, l->dev);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

ze_result_t fake_zeCommandListImmediateAppendCommandListsExp(
    ze_command_list_handle_t hCommandListImmediate, uint32_t numCommandLists,
    ze_command_list_handle_t *phCommandLists, ze_event_handle_t hSignalEvent,
    uint32_t numWaitEvents, ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListImmediateAppendCommandListsExp";
    FAKE_ENTER(zeCommandListImmediateAppendCommandListsExp);
    struct fake_list *imm;
    struct fake_cmd cmd = {.kind = FAKE_CMD_EXECUTE, .entry = fn};
    pthread_mutex_lock(&fake__g.lock);
    ze_result_t r = fake__ready_lookup(FAKE_LIST, hCommandListImmediate, fn, (void **)&imm);
    if (r == ZE_RESULT_SUCCESS && !imm->immediate) {
        fake__violation("%s: hCommandListImmediate is a regular list", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS && phCommandLists == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS && numCommandLists == 0) {
        r = ZE_RESULT_ERROR_INVALID_SIZE; /* not verified against Intel's driver */
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(imm, hSignalEvent, numWaitEvents, phWaitEvents, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = exec_cmd(numCommandLists, phCommandLists, imm->ctx, imm->ordinal, fn, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__append(imm, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    pthread_mutex_unlock(&fake__g.lock);
    return r;
}

/* ---- unload --------------------------------------------------------------------------------- */

void fake__lists_unload(void) {
    while (fake__g.objs[FAKE_LIST].n > 0) {
        struct fake_list *l = fake__g.objs[FAKE_LIST].v[fake__g.objs[FAKE_LIST].n - 1];
        fake__obj_remove(&l->obj);
        clear_cmds(l);
        free(l);
    }
    while (fake__g.objs[FAKE_QUEUE].n > 0) {
        struct fake_queue *q = fake__g.objs[FAKE_QUEUE].v[fake__g.objs[FAKE_QUEUE].n - 1];
        fake__obj_remove(&q->obj);
        free(q);
    }
}
