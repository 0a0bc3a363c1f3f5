/* fake_graph.c — the Level Zero test driver's record-replay graphs
 * (ZE_extension_record_replay_graph 1.0, spec 1.17, declared in src/backends/level_zero/ze_ext.h;
 * and the same graphs through the "...Exp" functions of ZE_experimental_record_replay_graph 1.0,
 * the form Intel's driver offered before, whose pNext must be NULL too).
 *
 * zeCommandListBeginGraphCaptureExt makes a graph and puts an asynchronous immediate list, its
 * primary list, in capture: every command appended to it from then on is recorded into the
 * graph, with the values it was appended with, instead of being queued. A list that is not
 * capturing forks into a capture when it appends a command waiting on an event whose latest
 * signal that capture recorded: it captures too from then on (a fork), and the command is
 * recorded. The commands of every list of a capture are recorded in one order, the order of the
 * appends. zeCommandListEndGraphCaptureExt on the primary list ends the capture of every list of
 * it once each fork that recorded work joined back (after its last copy, fill or kernel it
 * signalled an event a later command of another list of the capture waits on); otherwise it
 * fails with GRAPH_UNJOINED_FORKS and leaves the capture as it was, so that the caller can join
 * and end again. zeGraphInstantiateExt copies a graph's commands into an executable graph,
 * which zeCommandListAppendGraphExt replays on an immediate list: one command that runs the
 * recorded ones (fake_run.c).
 *
 * The rules the specification states are enforced, with the codes it gives: a capturing list is
 * not synchronized (GRAPH_CAPTURE_UNSUPPORTED, as an event whose latest signal a capture going on
 * recorded), a capture does not wait on another capture's event (GRAPH_CAPTURE_MERGE_ATTEMPT),
 * only the primary list ends a capture. Misuse it leaves undefined is refused, said on stderr
 * and counted as a violation: a capture begun on a list capturing already, on a synchronous or
 * a regular list; a capturing list destroyed or reset (fake_list.c); a graph destroyed or
 * instantiated while it captures; an executable graph destroyed while a replay of it is
 * pending; a graph instantiated or replayed once an object its commands use was destroyed. A
 * replay that starts with an event its commands signal already signalled is reported (a wait on
 * it inside the graph would not wait on a GPU: a regular event left signalled by the previous
 * replay), and runs.
 *
 * Simplified: the device reports immutable graphs only; a graph appended to a capturing list (a
 * subgraph) or regular lists appended to one are not recorded (GRAPH_CAPTURE_UNSUPPORTED, the
 * device reports neither), and a graph is appended to an immediate list only. A replay runs the
 * recorded commands of every list of the capture one after another, in their recorded order, on
 * the replaying list's worker.
 */
#include "fake_ze_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- properties ----------------------------------------------------------------------------- */

/* A driver without a form of the extension knows no structure of that form, and ignores it. The
 * two forms' structures have one layout. */
void fake__graph_properties(ze_device_properties_t *props) {
    const int ext = fake__cfg.extensions[FAKE_EXT_GRAPH] != 0;
    const int exp = fake__cfg.extensions[FAKE_EXT_GRAPH_EXP] != 0;
    for (void *p = props->pNext; p != NULL;) {
        ze_base_properties_t head;
        memcpy(&head, p, sizeof head);
        if ((ext && head.stype == ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES) ||
            (exp && head.stype == ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXP_PROPERTIES)) {
            acg_ze_record_replay_graph_ext_properties_t *g = p;
            g->graphFlags = ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_IMMUTABLE_GRAPH;
        }
        p = head.pNext;
    }
}

/* ---- helpers -------------------------------------------------------------------------------- */

static int same_ref(const struct fake_ref *a, const struct fake_ref *b) {
    return a->obj == b->obj && a->serial == b->serial;
}

struct fake_graph *fake__graph_capturing(const struct fake_ref *ref) {
    if (ref->obj == NULL || !fake__ref_alive(ref)) {
        return NULL;
    }
    struct fake_graph *g = (struct fake_graph *)ref->obj;
    return g->capturing ? g : NULL;
}

/* Version 1.0 defines no structure for the graph functions' pNext: it must be NULL (Intel's
 * driver refuses anything else with INVALID_ARGUMENT, ze_ext.h says). */
static ze_result_t no_pnext(const void *pNext, const char *fn) {
    if (pNext != NULL) {
        fprintf(stderr, "acg Level Zero test driver: %s: pNext must be NULL\n", fn);
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

/* (lock held) The event a command signals, or NULL. */
static struct fake_event *signalled_event(const struct fake_cmd *c) {
    if (c->signal.obj == NULL || !fake__ref_alive(&c->signal)) {
        return NULL;
    }
    return (struct fake_event *)c->signal.obj;
}

/* A copy of a recorded command owning copies of what the original owns; -1 when out of memory
 * (dst then owns nothing). */
static int cmd_copy(struct fake_cmd *dst, const struct fake_cmd *src) {
    *dst = *src;
    dst->waits = NULL;
    dst->n_waits = 0;
    dst->kernels = NULL;
    dst->n_kernels = 0;
    if (src->n_waits > 0) {
        if ((dst->waits = malloc(src->n_waits * sizeof *dst->waits)) == NULL) {
            return -1;
        }
        memcpy(dst->waits, src->waits, src->n_waits * sizeof *dst->waits);
        dst->n_waits = src->n_waits;
    }
    if (src->n_kernels > 0) {
        if ((dst->kernels = malloc(src->n_kernels * sizeof *dst->kernels)) == NULL) {
            fake__cmd_free(dst);
            return -1;
        }
        memcpy(dst->kernels, src->kernels, src->n_kernels * sizeof *dst->kernels);
        dst->n_kernels = src->n_kernels;
    }
    return 0;
}

/* ---- recording ------------------------------------------------------------------------------ */

/* A capture records single commands: not a graph's replay (the device does not report
 * ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_SUBGRAPHS) nor regular lists run (nor
 * ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_APPEND_COMMANDLIST). */
static int recordable(const struct fake_cmd *cmd) {
    return cmd->kind != FAKE_CMD_EXECUTE && cmd->kind != FAKE_CMD_GRAPH;
}

/* (lock held) The index of l in g->lists; l is there. */
static uint32_t list_index(const struct fake_graph *g, const struct fake_list *l) {
    uint32_t i = 0;
    while (g->lists.v[i] != l) {
        i++;
    }
    return i;
}

ze_result_t fake__graph_record(struct fake_list *l, struct fake_cmd *cmd, int *recorded) {
    *recorded = 0;
    struct fake_graph *g = l->capture;
    /* A wait on an event whose latest signal a capture recorded ties the command to that
     * capture: the list's own, a fork into it, or a merge of two, which is refused. */
    for (uint32_t i = 0; i < cmd->n_waits; i++) {
        const struct fake_event *e = (const struct fake_event *)cmd->waits[i].obj;
        struct fake_graph *w = fake__graph_capturing(&e->capture);
        if (w == NULL || w == g) {
            continue;
        }
        if (g != NULL) {
            fprintf(stderr,
                    "acg Level Zero test driver: %s: wait event %u was signalled by another "
                    "capture than the %s (that would merge two captures)\n",
                    cmd->entry, i, l->capture != NULL ? "list's" : "other wait events'");
            fake__cmd_free(cmd);
            return ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_MERGE_ATTEMPT;
        }
        g = w;
    }
    if (g == NULL) {
        fake__graph_eager(cmd);
        return ZE_RESULT_SUCCESS;
    }
    if (!recordable(cmd)) {
        fprintf(stderr,
                "acg Level Zero test driver: %s: a capture does not record %s here (the device "
                "reports neither subgraphs nor appended command lists)\n",
                cmd->entry, cmd->kind == FAKE_CMD_GRAPH ? "a graph" : "command lists");
        fake__cmd_free(cmd);
        return ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    struct fake_rec *recs = fake__grow(g->recs, g->n_recs, &g->cap_recs, sizeof *recs);
    if (recs == NULL) {
        fake__cmd_free(cmd);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    g->recs = recs;
    if (l->capture == NULL) {
        if (fake__vec_push(&g->lists, l) != 0) {
            fake__cmd_free(cmd);
            return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        }
        l->capture = g; /* a fork: the list captures into g from now on */
    }
    struct fake_rec *rec = &g->recs[g->n_recs++];
    rec->cmd = *cmd;
    rec->list = list_index(g, l);
    struct fake_event *e = signalled_event(cmd);
    if (e != NULL) {
        e->capture = fake__ref(&g->obj);
    }
    *recorded = 1;
    return ZE_RESULT_SUCCESS;
}

void fake__graph_eager(const struct fake_cmd *cmd) {
    struct fake_event *e = signalled_event(cmd);
    if (e != NULL) {
        e->capture = (struct fake_ref){0};
    }
    /* What it runs was checked alive when it was appended or executed. */
    if (cmd->kind == FAKE_CMD_EXECUTE) {
        for (uint32_t i = 0; i < cmd->u.exec.n_lists; i++) {
            const struct fake_list *l = (const struct fake_list *)cmd->u.exec.lists[i].obj;
            for (size_t j = 0; j < l->n_cmds; j++) {
                fake__graph_eager(&l->cmds[j]);
            }
        }
    } else if (cmd->kind == FAKE_CMD_GRAPH) {
        const struct fake_exec_graph *x = (const struct fake_exec_graph *)cmd->u.graph.exec.obj;
        for (size_t j = 0; j < x->n_cmds; j++) {
            fake__graph_eager(&x->cmds[j]);
        }
    }
}

/* The graph functions are served in both forms of the extension: each entry point below counts
 * its call under its own name, then runs the one implementation, which names it (fn) in what it
 * says. */

static ze_result_t begin_capture(ze_command_list_handle_t hCommandList, const void *pNext,
                                 const char *fn) {
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS) {
        r = no_pnext(pNext, fn);
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    /* The codes for these were not verified against Intel's driver. */
    const char *wrong = NULL;
    if (!l->immediate) {
        wrong = "is a regular list (only an immediate list captures)";
    } else if (l->queue->desc.mode == ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS) {
        wrong = "is synchronous (only an asynchronous list captures)";
    } else if (l->capture != NULL) {
        wrong = l->capture->lists.v[0] == l ? "is capturing already"
                                            : "is capturing already, forked into another capture";
    }
    if (wrong != NULL) {
        fake__violation("%s: the command list %s", fn, wrong);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    struct fake_graph *g = calloc(1, sizeof *g);
    if (g == NULL || fake__vec_push(&g->lists, l) != 0 || fake__obj_add(&g->obj, FAKE_GRAPH) != 0) {
        if (g != NULL) {
            fake__vec_free(&g->lists);
        }
        free(g);
        r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
        goto out;
    }
    g->ctx = l->ctx;
    g->capturing = 1;
    l->capture = g;
out:
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListBeginGraphCaptureExt(ze_command_list_handle_t hCommandList,
                                                   const void *pNext) {
    FAKE_ENTER(zeCommandListBeginGraphCaptureExt);
    return begin_capture(hCommandList, pNext, "zeCommandListBeginGraphCaptureExt");
}

ze_result_t fake_zeCommandListBeginGraphCaptureExp(ze_command_list_handle_t hCommandList,
                                                   void *pNext) {
    FAKE_ENTER(zeCommandListBeginGraphCaptureExp);
    return begin_capture(hCommandList, pNext, "zeCommandListBeginGraphCaptureExp");
}

/* The query's answers: each form has its own codes. */
static ze_result_t capture_enabled(ze_command_list_handle_t hCommandList, ze_result_t yes,
                                   ze_result_t no, const char *fn) {
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS) {
        r = l->capture != NULL ? yes : no;
    }
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListIsGraphCaptureEnabledExt(ze_command_list_handle_t hCommandList) {
    FAKE_ENTER(zeCommandListIsGraphCaptureEnabledExt);
    return capture_enabled(hCommandList, ACG_ZE_RESULT_QUERY_TRUE, ACG_ZE_RESULT_QUERY_FALSE,
                           "zeCommandListIsGraphCaptureEnabledExt");
}

ze_result_t fake_zeCommandListIsGraphCaptureEnabledExp(ze_command_list_handle_t hCommandList) {
    FAKE_ENTER(zeCommandListIsGraphCaptureEnabledExp);
    return capture_enabled(hCommandList, ACG_ZE_RESULT_EXP_QUERY_TRUE,
                           ACG_ZE_RESULT_EXP_QUERY_FALSE, "zeCommandListIsGraphCaptureEnabledExp");
}

/* (lock held) Whether fork k of g joined: after its last copy, fill or kernel it recorded a
 * command (that one included) signalling an event a command recorded later on another list of
 * the capture waits on. A fork that recorded no work needs no join. *last: the index of that
 * last work in g->recs. */
static int joined(const struct fake_graph *g, uint32_t k, size_t *last) {
    size_t n = g->n_recs, w = n;
    for (size_t i = 0; i < n; i++) {
        enum fake_cmd_kind kind = g->recs[i].cmd.kind;
        if (g->recs[i].list == k &&
            (kind == FAKE_CMD_COPY || kind == FAKE_CMD_FILL || kind == FAKE_CMD_KERNEL)) {
            w = i;
        }
    }
    *last = w;
    if (w == n) {
        return 1;
    }
    for (size_t i = w; i < n; i++) {
        const struct fake_cmd *s = &g->recs[i].cmd;
        if (g->recs[i].list != k || s->signal.obj == NULL) {
            continue;
        }
        for (size_t j = i + 1; j < n; j++) {
            const struct fake_cmd *t = &g->recs[j].cmd;
            for (uint32_t q = 0; q < t->n_waits && g->recs[j].list != k; q++) {
                if (same_ref(&t->waits[q], &s->signal)) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

static ze_result_t end_capture(ze_command_list_handle_t hCommandList, const void *pNext,
                               acg_ze_graph_handle_t *phGraph, const char *fn) {
    struct fake_list *l;
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS) {
        r = no_pnext(pNext, fn);
    }
    if (r == ZE_RESULT_SUCCESS && phGraph == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r == ZE_RESULT_SUCCESS && l->capture == NULL) {
        r = ACG_ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING;
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    struct fake_graph *g = l->capture;
    if (g->lists.v[0] != l) {
        /* The code was not verified against Intel's driver. */
        fake__violation("%s: the list is a fork of a capture; its primary list ends it", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    for (uint32_t k = 1; k < g->lists.n; k++) {
        size_t last;
        if (!joined(g, k, &last)) {
            fprintf(stderr,
                    "acg Level Zero test driver: %s: forked list %p did not join: after its "
                    "last work (command %zu of the capture, %s) it signals no event that a later "
                    "command of another list of the capture waits on\n",
                    fn, g->lists.v[k], last, g->recs[last].cmd.entry);
            r = ACG_ZE_RESULT_ERROR_GRAPH_UNJOINED_FORKS;
            goto out;
        }
    }
    for (size_t k = 0; k < g->lists.n; k++) {
        ((struct fake_list *)g->lists.v[k])->capture = NULL;
    }
    fake__vec_free(&g->lists);
    g->capturing = 0;
    *phGraph = (acg_ze_graph_handle_t)(void *)g;
out:
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListEndGraphCaptureExt(ze_command_list_handle_t hCommandList,
                                                 const void *pNext,
                                                 acg_ze_graph_handle_t *phGraph) {
    FAKE_ENTER(zeCommandListEndGraphCaptureExt);
    return end_capture(hCommandList, pNext, phGraph, "zeCommandListEndGraphCaptureExt");
}

ze_result_t fake_zeCommandListEndGraphCaptureExp(ze_command_list_handle_t hCommandList,
                                                 acg_ze_graph_handle_t *phGraph, void *pNext) {
    FAKE_ENTER(zeCommandListEndGraphCaptureExp);
    return end_capture(hCommandList, pNext, phGraph, "zeCommandListEndGraphCaptureExp");
}

/* ---- executable graphs ---------------------------------------------------------------------- */

/* (lock held) Command i of a graph or executable graph (`what`), for `fn`: INVALID_ARGUMENT
 * and a violation when it uses an object destroyed since it was recorded, else SUCCESS. */
static ze_result_t check_alive(const struct fake_cmd *c, size_t i, const char *fn,
                               const char *what) {
    const struct fake_ref *dead = fake__cmd_dead_ref(c);
    if (dead != NULL) {
        fake__violation("%s: command %zu of the %s (%s) uses a %s destroyed since", fn, i, what,
                        c->entry, fake__kind_name(dead->kind));
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    return ZE_RESULT_SUCCESS;
}

static ze_result_t instantiate(acg_ze_graph_handle_t hGraph, const void *pNext,
                               acg_ze_executable_graph_handle_t *phExecutableGraph,
                               const char *fn) {
    struct fake_graph *g;
    struct fake_exec_graph *x = NULL;
    ze_result_t r = fake__lock_object(FAKE_GRAPH, hGraph, fn, (void **)&g);
    if (r == ZE_RESULT_SUCCESS) {
        r = no_pnext(pNext, fn);
    }
    if (r == ZE_RESULT_SUCCESS && phExecutableGraph == NULL) {
        r = ZE_RESULT_ERROR_INVALID_NULL_POINTER;
    }
    if (r != ZE_RESULT_SUCCESS) {
        goto out;
    }
    if (g->capturing) {
        /* Out of reach of the seven functions served (a capture's graph is known once it ended),
         * kept for zeCommandListGetGraphExt. The code was not verified against Intel's driver. */
        fake__violation("%s: the graph is still capturing (%s ends it)", fn,
                        "zeCommandListEndGraphCaptureExt");
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    for (size_t i = 0; i < g->n_recs; i++) {
        FAKE_CHECK(check_alive(&g->recs[i].cmd, i, fn, "graph"), out);
    }
    r = ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    if ((x = calloc(1, sizeof *x)) == NULL ||
        (x->cmds = calloc(g->n_recs > 0 ? g->n_recs : 1, sizeof *x->cmds)) == NULL) {
        goto out_free;
    }
    for (; x->n_cmds < g->n_recs; x->n_cmds++) {
        if (cmd_copy(&x->cmds[x->n_cmds], &g->recs[x->n_cmds].cmd) != 0) {
            goto out_free;
        }
    }
    if (fake__obj_add(&x->obj, FAKE_EXEC_GRAPH) != 0) {
        goto out_free;
    }
    x->ctx = g->ctx;
    *phExecutableGraph = (acg_ze_executable_graph_handle_t)(void *)x;
    r = ZE_RESULT_SUCCESS;
    goto out;
out_free:
    if (x != NULL) {
        for (size_t i = 0; i < x->n_cmds; i++) {
            fake__cmd_free(&x->cmds[i]);
        }
        free(x->cmds);
    }
    free(x);
out:
    return fake__unlock(r);
}

ze_result_t fake_zeGraphInstantiateExt(acg_ze_graph_handle_t hGraph, const void *pNext,
                                       acg_ze_executable_graph_handle_t *phExecutableGraph) {
    FAKE_ENTER(zeGraphInstantiateExt);
    return instantiate(hGraph, pNext, phExecutableGraph, "zeGraphInstantiateExt");
}

ze_result_t
fake_zeCommandListInstantiateGraphExp(acg_ze_graph_handle_t hGraph,
                                      acg_ze_executable_graph_handle_t *phExecutableGraph,
                                      void *pNext) {
    FAKE_ENTER(zeCommandListInstantiateGraphExp);
    return instantiate(hGraph, pNext, phExecutableGraph, "zeCommandListInstantiateGraphExp");
}

void fake__graph_replay_check(const struct fake_cmd *cmd) {
    const struct fake_exec_graph *x = (const struct fake_exec_graph *)cmd->u.graph.exec.obj;
    for (size_t i = 0; i < x->n_cmds; i++) {
        const struct fake_ref *s = &x->cmds[i].signal;
        if (s->obj == NULL || !((const struct fake_event *)s->obj)->signalled) {
            continue;
        }
        /* Only the event's first signal or reset in the graph tells: one reset first is fine. */
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            const struct fake_cmd *c = &x->cmds[j];
            seen = same_ref(&c->signal, s) ||
                   (c->kind == FAKE_CMD_RESET && same_ref(&c->u.reset.event, s));
        }
        if (!seen) {
            fake__violation("%s: event %p, which command %zu of the executable graph %p (%s) "
                            "signals, is already signalled when the replay starts: a wait on it "
                            "in the graph would not wait on a GPU (reset it before the replay)",
                            cmd->entry, (void *)s->obj, i, (void *)x, x->cmds[i].entry);
        }
    }
}

/* A graph is appended to an immediate list only (a regular list: INVALID_ARGUMENT, not verified
 * against Intel's driver); to a capturing one it is a subgraph, which the device does not report
 * (GRAPH_CAPTURE_UNSUPPORTED). */
static ze_result_t append_graph(ze_command_list_handle_t hCommandList,
                                acg_ze_executable_graph_handle_t hGraph, const void *pNext,
                                ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                ze_event_handle_t *phWaitEvents, const char *fn) {
    struct fake_list *l;
    struct fake_exec_graph *x;
    struct fake_cmd cmd = {.kind = FAKE_CMD_GRAPH, .entry = fn};
    ze_result_t r = fake__lock_object(FAKE_LIST, hCommandList, fn, (void **)&l);
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__lookup(FAKE_EXEC_GRAPH, hGraph, fn, (void **)&x);
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = no_pnext(pNext, fn);
    }
    if (r == ZE_RESULT_SUCCESS && !l->immediate) {
        fake__violation("%s: the list is a regular list (graphs are appended to immediate lists)",
                        fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    if (r == ZE_RESULT_SUCCESS && l->capture != NULL) {
        r = ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED;
    }
    if (r == ZE_RESULT_SUCCESS && x->ctx != l->ctx) {
        fake__violation("%s: the executable graph is of another context than the list", fn);
        r = ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; r == ZE_RESULT_SUCCESS && i < x->n_cmds; i++) {
        r = check_alive(&x->cmds[i], i, fn, "executable graph");
    }
    if (r == ZE_RESULT_SUCCESS) {
        r = fake__sync_args(l, hSignalEvent, numWaitEvents, phWaitEvents, &cmd);
    }
    if (r == ZE_RESULT_SUCCESS) {
        cmd.u.graph.exec = fake__ref(&x->obj);
        r = fake__append(l, &cmd);
    } else {
        fake__cmd_free(&cmd);
    }
    return fake__unlock(r);
}

ze_result_t fake_zeCommandListAppendGraphExt(ze_command_list_handle_t hCommandList,
                                             acg_ze_executable_graph_handle_t hGraph,
                                             const void *pNext, ze_event_handle_t hSignalEvent,
                                             uint32_t numWaitEvents,
                                             ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendGraphExt);
    return append_graph(hCommandList, hGraph, pNext, hSignalEvent, numWaitEvents, phWaitEvents,
                        "zeCommandListAppendGraphExt");
}

ze_result_t fake_zeCommandListAppendGraphExp(ze_command_list_handle_t hCommandList,
                                             acg_ze_executable_graph_handle_t hGraph, void *pNext,
                                             ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
                                             ze_event_handle_t *phWaitEvents) {
    FAKE_ENTER(zeCommandListAppendGraphExp);
    return append_graph(hCommandList, hGraph, pNext, hSignalEvent, numWaitEvents, phWaitEvents,
                        "zeCommandListAppendGraphExp");
}

/* ---- destruction ---------------------------------------------------------------------------- */

static void exec_free(void *obj) {
    struct fake_exec_graph *x = obj;
    for (size_t i = 0; i < x->n_cmds; i++) {
        fake__cmd_free(&x->cmds[i]);
    }
    free(x->cmds);
    fake__obj_remove(&x->obj);
    free(x);
}

static void graph_free(void *obj) {
    struct fake_graph *g = obj;
    for (size_t i = 0; i < g->n_recs; i++) {
        fake__cmd_free(&g->recs[i].cmd);
    }
    free(g->recs);
    fake__vec_free(&g->lists);
    fake__obj_remove(&g->obj);
    free(g);
}

/* (lock held) Why an executable graph may not be destroyed yet (fake__destroy). The events and
 * kernels its commands use may be destroyed first: it is then refused where it would be
 * replayed. */
static int exec_busy(void *obj, const char *fn) {
    const struct fake_exec_graph *x = obj;
    if (x->obj.pending > 0) {
        fake__violation("%s: %ld replays of the executable graph are still pending", fn,
                        x->obj.pending);
    }
    return x->obj.pending > 0;
}

ze_result_t fake_zeExecutableGraphDestroyExt(acg_ze_executable_graph_handle_t hGraph) {
    FAKE_ENTER(zeExecutableGraphDestroyExt);
    return fake__destroy(FAKE_EXEC_GRAPH, hGraph, "zeExecutableGraphDestroyExt", exec_busy,
                         exec_free);
}

ze_result_t fake_zeExecutableGraphDestroyExp(acg_ze_executable_graph_handle_t hGraph) {
    FAKE_ENTER(zeExecutableGraphDestroyExp);
    return fake__destroy(FAKE_EXEC_GRAPH, hGraph, "zeExecutableGraphDestroyExp", exec_busy,
                         exec_free);
}

/* (lock held) Why a graph may not be destroyed yet (fake__destroy), as in instantiate(). The
 * executable graphs made from it stay: they own copies of its commands. */
static int graph_busy(void *obj, const char *fn) {
    const struct fake_graph *g = obj;
    if (g->capturing) {
        fake__violation("%s: the graph is still capturing (%s ends it)", fn,
                        "zeCommandListEndGraphCaptureExt");
    }
    return g->capturing;
}

ze_result_t fake_zeGraphDestroyExt(acg_ze_graph_handle_t hGraph) {
    FAKE_ENTER(zeGraphDestroyExt);
    return fake__destroy(FAKE_GRAPH, hGraph, "zeGraphDestroyExt", graph_busy, graph_free);
}

ze_result_t fake_zeGraphDestroyExp(acg_ze_graph_handle_t hGraph) {
    FAKE_ENTER(zeGraphDestroyExp);
    return fake__destroy(FAKE_GRAPH, hGraph, "zeGraphDestroyExp", graph_busy, graph_free);
}

/* ---- unload --------------------------------------------------------------------------------- */

void fake__graphs_unload(void) {
    fake__free_all(FAKE_EXEC_GRAPH, exec_free);
    fake__free_all(FAKE_GRAPH, graph_free);
}
