/* fake_mutable.c — the Level Zero test driver's mutable command lists
 * (ZE_experimental_mutable_command_list 1.1, declared in src/backends/level_zero/ze_ext.h).
 *
 * A regular list created with an acg_ze_mutable_command_list_exp_desc_t in its descriptor's
 * pNext chain is mutable: zeCommandListGetNextCommandIdExp gives the next command appended an
 * id, and the update functions change what that command does at its next execution: a kernel's
 * arguments, group count and group size, its signal event, its wait events, or (1.1) its kernel,
 * among those named when the id was taken. The rules the specification states are enforced: ids
 * only on an open mutable list; updates only while no execution of the list is pending ("the
 * application must synchronize"), and an updated list must be closed again before it is
 * executed (an update reopens it here); a kernel switch invalidates the command's arguments,
 * which must all be set again (its execution is refused until they are). An update is all or
 * nothing: a descriptor in error leaves every command as it was.
 *
 * Simplified: global offsets and graph arguments are not supported
 * (ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, and zeDeviceGetProperties does not report them).
 */
#include "fake_ze_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KERNEL_FLAGS                                                                               \
    (ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS |                                            \
     ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT | ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE |    \
     ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION)

/* What this driver can change, at the version offered. */
static uint32_t supported_flags(void) {
    uint32_t f =
        ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS |
        ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT | ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE |
        ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_SIGNAL_EVENT | ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_WAIT_EVENTS;
    if (fake__cfg.extensions[FAKE_EXT_MUTABLE] >= ACG_ZE_MUTABLE_COMMAND_LIST_EXP_VERSION_1_1) {
        f |= ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION;
    }
    return f;
}

/* ---- creation and properties --------------------------------------------------------------- */

int fake__mutable_requested(const ze_command_list_desc_t *desc) {
    if (fake__cfg.extensions[FAKE_EXT_MUTABLE] == 0) {
        return 0; /* a driver without the extension knows no such structure, and ignores it */
    }
    for (const void *p = desc->pNext; p != NULL;) {
        ze_base_desc_t head;
        memcpy(&head, p, sizeof head);
        if (head.stype == ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_DESC) {
            return 1;
        }
        p = head.pNext;
    }
    return 0;
}

void fake__mutable_properties(ze_device_properties_t *props) {
    if (fake__cfg.extensions[FAKE_EXT_MUTABLE] == 0) {
        return;
    }
    for (void *p = props->pNext; p != NULL;) {
        ze_base_properties_t head;
        memcpy(&head, p, sizeof head);
        if (head.stype == ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_PROPERTIES) {
            acg_ze_mutable_command_list_exp_properties_t *m = p;
            m->mutableCommandListFlags = 0;
            m->mutableCommandFlags = supported_flags();
        }
        p = head.pNext;
    }
}

void fake__mutable_assign(struct fake_list *l, struct fake_cmd *cmd) {
    if (l->next_id == 0) {
        return;
    }
    cmd->id = l->next_id;
    cmd->mutable_flags = l->next_flags;
    cmd->kernels = l->next_kernels;
    cmd->n_kernels = l->n_next_kernels;
    l->next_id = 0;
    l->next_kernels = NULL;
    l->n_next_kernels = 0;
}

/* ---- ids ------------------------------------------------------------------------------------ */

/* (takes the lock, held on return whatever the result) The preamble of every function here: a
 * live mutable list. */
static ze_result_t lock_mutable_list(ze_command_list_handle_t h, const char *fn,
                                     struct fake_list **out) {
    ze_result_t r = fake__lock_object(FAKE_LIST, h, fn, (void **)out);
    if (r == ZE_RESULT_SUCCESS && !(*out)->mutable_) {
        fake__violation("%s: the list was not created mutable (%s in its descriptor's pNext)", fn,
                        "acg_ze_mutable_command_list_exp_desc_t");
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return r;
}

static ze_result_t next_id(ze_command_list_handle_t hCommandList,
                           const acg_ze_mutable_command_id_exp_desc_t *desc, uint32_t numKernels,
                           ze_kernel_handle_t *phKernels, uint64_t *pCommandId, const char *fn) {
    struct fake_list *l;
    struct fake_ref *kernels = NULL;
    ze_result_t r = lock_mutable_list(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS &&
        (desc == NULL || pCommandId == NULL || (numKernels > 0 && phKernels == NULL))) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(desc, ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_ID_EXP_DESC, fn, "desc");
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    if (l->closed) {
        fake__violation("%s: the list is closed", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    uint32_t flags = desc->flags;
    FAKE_FAIL_IF(flags > 0xff, ZE_RESULT_ERROR_INVALID_ENUMERATION, out);
    if (flags == 0) { /* everything but a kernel switch, which is asked for by name */
        flags = supported_flags() & ~(uint32_t)ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION;
    }
    if ((flags & ~supported_flags()) != 0) {
        fprintf(stderr, "acg Level Zero test driver: %s: flags 0x%x are not supported here\n", fn,
                flags & ~supported_flags());
        r = ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
        goto out;
    }
    if (numKernels > 0) {
        FAKE_FAIL_IF((kernels = calloc(numKernels, sizeof *kernels)) == NULL,
                     ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
        for (uint32_t i = 0; i < numKernels; i++) {
            struct fake_kernel *k;
            FAKE_CHECK(fake__lookup(FAKE_KERNEL, phKernels[i], fn, (void **)&k), out);
            kernels[i] = fake__ref(&k->obj);
        }
    }
    free(l->next_kernels); /* an id taken and not used is dropped */
    l->next_id = ++l->last_id;
    l->next_flags = flags;
    l->next_kernels = kernels;
    l->n_next_kernels = numKernels;
    kernels = NULL;
    *pCommandId = l->next_id;
out:
    free(kernels);
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListGetNextCommandIdExp(ze_command_list_handle_t hCommandList,
                                                  const acg_ze_mutable_command_id_exp_desc_t *desc,
                                                  uint64_t *pCommandId) {
    static const char fn[] = "zeCommandListGetNextCommandIdExp";
    FAKE_ENTER(zeCommandListGetNextCommandIdExp);
    if (desc != NULL && (desc->flags & ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION)) {
        fprintf(stderr,
                "acg Level Zero test driver: %s: a kernel switch needs the kernels named "
                "(zeCommandListGetNextCommandIdWithKernelsExp)\n",
                fn);
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return next_id(hCommandList, desc, 0, NULL, pCommandId, fn);
}

ze_result_t fake_zeCommandListGetNextCommandIdWithKernelsExp(
    ze_command_list_handle_t hCommandList, const acg_ze_mutable_command_id_exp_desc_t *desc,
    uint32_t numKernels, ze_kernel_handle_t *phKernels, uint64_t *pCommandId) {
    FAKE_ENTER(zeCommandListGetNextCommandIdWithKernelsExp);
    return next_id(hCommandList, desc, numKernels, phKernels, pCommandId,
                   "zeCommandListGetNextCommandIdWithKernelsExp");
}

/* ---- updates -------------------------------------------------------------------------------- */

/* (takes the lock, as lock_mutable_list) The preamble of an update: a mutable list no execution
 * uses. */
static ze_result_t lock_updatable(ze_command_list_handle_t h, const char *fn,
                                  struct fake_list **out) {
    ze_result_t r = lock_mutable_list(h, fn, out);
    if (r == ZE_RESULT_SUCCESS && (*out)->obj.pending > 0) {
        fake__violation("%s: an execution of the list is pending (synchronize first)", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return r;
}

static ze_result_t find_cmd(struct fake_list *l, uint64_t id, uint32_t flag, const char *fn,
                            size_t *at) {
    for (size_t i = 0; i < l->n_cmds; i++) {
        if (l->cmds[i].id == id && id != 0) {
            if ((l->cmds[i].mutable_flags & flag) == 0) {
                fake__violation("%s: command %llu was not made mutable for flag 0x%x", fn,
                                (unsigned long long)id, flag);
                return ZE_RESULT_ERROR_INVALID_ARGUMENT;
            }
            if ((flag & KERNEL_FLAGS) != 0 && l->cmds[i].kind != FAKE_CMD_KERNEL) {
                fake__violation("%s: command %llu is no kernel launch", fn, (unsigned long long)id);
                return ZE_RESULT_ERROR_INVALID_ARGUMENT;
            }
            *at = i;
            return ZE_RESULT_SUCCESS;
        }
    }
    fake__violation("%s: the list has no command %llu", fn, (unsigned long long)id);
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

/* The change descriptors: each begins with its stype, pNext and the id of the command it
 * changes. */
struct change_head {
    ze_structure_type_t stype;
    const void *pNext;
    uint64_t commandId;
};

static ze_result_t change_argument(struct fake_cmd *c, const void *d) {
    const acg_ze_mutable_kernel_argument_exp_desc_t *a = d;
    return fake__launch_param(&c->u.kernel.launch, a->argIndex, a->argSize, a->pArgValue);
}

static ze_result_t change_count(struct fake_cmd *c, const void *d) {
    const acg_ze_mutable_group_count_exp_desc_t *g = d;
    if (g->pGroupCount == NULL) {
        return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    fake__kernel_count(c, g->pGroupCount);
    return ZE_RESULT_SUCCESS;
}

/* The device's limits, as zeKernelSetGroupSize checks them. */
static ze_result_t change_size(struct fake_cmd *c, const void *d) {
    const acg_ze_mutable_group_size_exp_desc_t *g = d;
    return fake__launch_group(&c->u.kernel.launch, g->groupSizeX, g->groupSizeY, g->groupSizeZ);
}

/* What each change descriptor this driver takes changes, and the flag its command needs. */
static const struct {
    uint32_t stype;
    uint32_t flag;
    ze_result_t (*change)(struct fake_cmd *c, const void *d);
} changes[] = {
    {ACG_ZE_STRUCTURE_TYPE_MUTABLE_KERNEL_ARGUMENT_EXP_DESC,
     ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS, change_argument},
    {ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_COUNT_EXP_DESC,
     ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT, change_count},
    {ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_SIZE_EXP_DESC, ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE,
     change_size},
};

/* (lock held) Applies one change descriptor to the scratch copy of the list's commands. */
static ze_result_t apply(struct fake_list *l, struct fake_cmd *scratch, char *touched,
                         const void *d, const char *fn) {
    ze_base_desc_t base;
    memcpy(&base, d, sizeof base);
    uint32_t stype = (uint32_t)base.stype;
    size_t k = 0;
    while (k < sizeof changes / sizeof changes[0] && changes[k].stype != stype) {
        k++;
    }
    if (k == sizeof changes / sizeof changes[0]) {
        int known = stype == ACG_ZE_STRUCTURE_TYPE_MUTABLE_GLOBAL_OFFSET_EXP_DESC ||
                    stype == ACG_ZE_STRUCTURE_TYPE_MUTABLE_GRAPH_ARGUMENT_EXP_DESC;
        fprintf(stderr, "acg Level Zero test driver: %s: stype 0x%x is %s\n", fn, (unsigned)stype,
                known ? "not supported here" : "no change descriptor");
        return known ? ZE_RESULT_ERROR_UNSUPPORTED_FEATURE : ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    struct change_head head; /* one of the descriptors of `changes` */
    memcpy(&head, d, sizeof head);
    size_t at;
    ze_result_t r = find_cmd(l, head.commandId, changes[k].flag, fn, &at);
    if (r == ZE_RESULT_SUCCESS) {
        r = changes[k].change(&scratch[at], d);
    }
    if (r == ZE_RESULT_SUCCESS) {
        touched[at] = 1;
    }
    return r;
}

ze_result_t
fake_zeCommandListUpdateMutableCommandsExp(ze_command_list_handle_t hCommandList,
                                           const acg_ze_mutable_commands_exp_desc_t *desc) {
    static const char fn[] = "zeCommandListUpdateMutableCommandsExp";
    FAKE_ENTER(zeCommandListUpdateMutableCommandsExp);
    struct fake_list *l;
    struct fake_cmd *scratch = NULL;
    char *touched = NULL;
    ze_result_t r = lock_updatable(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS && desc == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__stype(desc, ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMANDS_EXP_DESC, fn, "desc");
    }
    if (r != ZE_RESULT_SUCCESS || l->n_cmds == 0) {
        goto out;
    }
    /* Changes go to a copy first (the arrays the commands own stay shared and untouched), so
     * that a descriptor in error leaves every command as it was. */
    scratch = malloc(l->n_cmds * sizeof *scratch);
    touched = calloc(l->n_cmds, 1);
    FAKE_FAIL_IF(scratch == NULL || touched == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    memcpy(scratch, l->cmds, l->n_cmds * sizeof *scratch);
    for (const void *d = desc->pNext; d != NULL && r == ZE_RESULT_SUCCESS;) {
        r = apply(l, scratch, touched, d, fn);
        ze_base_desc_t head;
        memcpy(&head, d, sizeof head);
        d = head.pNext;
    }
    for (size_t i = 0; i < l->n_cmds && r == ZE_RESULT_SUCCESS; i++) {
        if (touched[i] && fake__kernel_args_set(&scratch[i])) {
            const struct fake_kernel *k =
                (const struct fake_kernel *)scratch[i].u.kernel.kernel.obj;
            r = fake__kernel_build(&scratch[i], k->name, fn);
        }
    }
    if (r == ZE_RESULT_SUCCESS) {
        for (size_t i = 0; i < l->n_cmds; i++) {
            if (touched[i]) {
                l->cmds[i].u.kernel = scratch[i].u.kernel;
            }
        }
        l->closed = 0; /* "the application must close a mutable command list after updates" */
    }
out:
    free(scratch);
    free(touched);
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListUpdateMutableCommandSignalEventExp(
    ze_command_list_handle_t hCommandList, uint64_t commandId, ze_event_handle_t hSignalEvent) {
    static const char fn[] = "zeCommandListUpdateMutableCommandSignalEventExp";
    FAKE_ENTER(zeCommandListUpdateMutableCommandSignalEventExp);
    struct fake_list *l;
    struct fake_ref signal = {0};
    size_t at;
    ze_result_t r = lock_updatable(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = find_cmd(l, commandId, ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_SIGNAL_EVENT, fn, &at);
    }
    if (r == ZE_RESULT_SUCCESS && hSignalEvent != NULL) {
        r = fake__event_ref(hSignalEvent, l->ctx, fn, &signal);
    }
    if (r == ZE_RESULT_SUCCESS) {
        l->cmds[at].signal = signal;
        l->closed = 0;
    }
    return fake__unlock(r);
}

/* The count must be the one the command was appended with: INVALID_SIZE otherwise (not
 * verified against Intel's driver). */
ze_result_t
fake_zeCommandListUpdateMutableCommandWaitEventsExp(ze_command_list_handle_t hCommandList,
                                                    uint64_t commandId, uint32_t numWaitEvents,
                                                    ze_event_handle_t *phWaitEvents) {
    static const char fn[] = "zeCommandListUpdateMutableCommandWaitEventsExp";
    FAKE_ENTER(zeCommandListUpdateMutableCommandWaitEventsExp);
    struct fake_list *l;
    struct fake_cmd waits = {.kind = FAKE_CMD_BARRIER};
    size_t at;
    ze_result_t r = lock_updatable(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS) {
        r = find_cmd(l, commandId, ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_WAIT_EVENTS, fn, &at);
    }
    if (r == ZE_RESULT_SUCCESS && numWaitEvents != l->cmds[at].n_waits) {
        fake__violation("%s: command %llu waits on %u events, not %u", fn,
                        (unsigned long long)commandId, l->cmds[at].n_waits, numWaitEvents);
        r = ZE_RESULT_ERROR_INVALID_SIZE;
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__wait_refs(numWaitEvents, phWaitEvents, l->ctx, fn, &waits);
    }
    if (r == ZE_RESULT_SUCCESS) {
        free(l->cmds[at].waits);
        l->cmds[at].waits = waits.waits;
        waits.waits = NULL;
        l->closed = 0;
    }
    fake__cmd_free(&waits);
    return fake__unlock(r);
}

/* A command switches only to a kernel named when its id was taken, of the list's context and
 * device. Its arguments must then all be set again; its group size becomes the new kernel's. */
ze_result_t fake_zeCommandListUpdateMutableCommandKernelsExp(ze_command_list_handle_t hCommandList,
                                                             uint32_t numKernels,
                                                             uint64_t *pCommandId,
                                                             ze_kernel_handle_t *phKernels) {
    static const char fn[] = "zeCommandListUpdateMutableCommandKernelsExp";
    FAKE_ENTER(zeCommandListUpdateMutableCommandKernelsExp);
    struct fake_list *l;
    size_t *at = NULL;
    struct fake_kernel **ks = NULL;
    ze_result_t r = lock_updatable(hCommandList, fn, &l);
    if (r == ZE_RESULT_SUCCESS && numKernels > 0 && (pCommandId == NULL || phKernels == NULL)) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r != ZE_RESULT_SUCCESS || numKernels == 0) {
        goto out;
    }
    at = calloc(numKernels, sizeof *at);
    ks = calloc(numKernels, sizeof *ks);
    FAKE_FAIL_IF(at == NULL || ks == NULL, ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, out);
    for (uint32_t i = 0; i < numKernels && r == ZE_RESULT_SUCCESS; i++) {
        r = find_cmd(l, pCommandId[i], ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION, fn,
                     &at[i]);
        if (r == ZE_RESULT_SUCCESS) {
            r = fake__lookup(FAKE_KERNEL, phKernels[i], fn, (void **)&ks[i]);
        }
        if (r != ZE_RESULT_SUCCESS) {
            break;
        }
        const struct fake_cmd *c = &l->cmds[at[i]];
        int named = 0;
        for (uint32_t j = 0; j < c->n_kernels; j++) {
            named |= c->kernels[j].obj == &ks[i]->obj && fake__ref_alive(&c->kernels[j]);
        }
        if (!named || ks[i]->module->ctx != l->ctx || ks[i]->module->dev != l->dev) {
            fake__violation("%s: kernel %s was not named for command %llu (or is of another "
                            "context or device)",
                            fn, ks[i]->name, (unsigned long long)pCommandId[i]);
            r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        }
    }
    if (r == ZE_RESULT_SUCCESS) {
        for (uint32_t i = 0; i < numKernels; i++) {
            struct fake_cmd *c = &l->cmds[at[i]];
            uint32_t count[3];
            memcpy(count, c->u.kernel.count, sizeof count);
            fake__kernel_take(c, ks[i]);
            memcpy(c->u.kernel.count, count, sizeof count);
            c->u.kernel.launch.set = 0; /* the switch invalidates the arguments */
        }
        l->closed = 0;
    }
out:
    free(at);
    free(ks);
    return fake__unlock(r);
}
