/* fake_run.c — the Level Zero test driver's workers: how commands run.
 *
 * An engine (an immediate list's, a queue's) is a worker thread draining a queue of jobs in
 * order, as a GPU engine. `submitted` counts jobs ever queued and `completed` those finished, so
 * a host synchronization is "completed reaches the count at the call". Simplified: commands run
 * one at a time in append order whatever the list's flags, so a barrier orders nothing more,
 * and a missing one never shows.
 *
 * A command first waits for its wait events, then does its work with the lock let go, then
 * signals its event (and an execution its fence). Every address it touches is checked against
 * the live allocations as it runs: one outside them aborts (fake__fault), as a GPU would fault,
 * and the allocations it runs on are marked busy so that freeing one under it aborts too. While
 * a command is queued it holds the objects it uses (fake_obj.pending), so destroying them is
 * refused until it completed. A graph's replay holds its executable graph and everything the
 * recorded commands use, and runs them on the replaying list's worker. The workers of a lost
 * device (acgtest_ze_set_lost) drop their jobs: a waiting command stops waiting, nothing more
 * runs or is signalled, and the jobs complete as far as what they hold goes.
 */
#include "fake_ze_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- references ----------------------------------------------------------------------------- */

/* Calls fn on every reference of the command, and of the commands of the lists it executes or
 * of the executable graph it replays (once fn passed the list or graph itself); stops at the
 * first nonzero result and returns it. */
static int for_refs(const struct fake_cmd *c, int (*fn)(const struct fake_ref *, void *),
                    void *arg) {
    int stop;
    if (c->signal.obj != NULL && (stop = fn(&c->signal, arg)) != 0) {
        return stop;
    }
    for (uint32_t i = 0; i < c->n_waits; i++) {
        if ((stop = fn(&c->waits[i], arg)) != 0) {
            return stop;
        }
    }
    switch (c->kind) {
    case FAKE_CMD_KERNEL:
        if ((stop = fn(&c->u.kernel.kernel, arg)) != 0) {
            return stop;
        }
        return fn(&c->u.kernel.module, arg);
    case FAKE_CMD_RESET:
        return fn(&c->u.reset.event, arg);
    case FAKE_CMD_EXECUTE:
        if (c->u.exec.fence.obj != NULL && (stop = fn(&c->u.exec.fence, arg)) != 0) {
            return stop;
        }
        for (uint32_t i = 0; i < c->u.exec.n_lists; i++) {
            if ((stop = fn(&c->u.exec.lists[i], arg)) != 0) {
                return stop;
            }
            const struct fake_list *l = (const struct fake_list *)c->u.exec.lists[i].obj;
            for (size_t j = 0; j < l->n_cmds; j++) {
                if ((stop = for_refs(&l->cmds[j], fn, arg)) != 0) {
                    return stop;
                }
            }
        }
        return 0;
    case FAKE_CMD_GRAPH: {
        if ((stop = fn(&c->u.graph.exec, arg)) != 0) {
            return stop;
        }
        const struct fake_exec_graph *x = (const struct fake_exec_graph *)c->u.graph.exec.obj;
        for (size_t j = 0; j < x->n_cmds; j++) {
            if ((stop = for_refs(&x->cmds[j], fn, arg)) != 0) {
                return stop;
            }
        }
        return 0;
    }
    default:
        return 0;
    }
}

static int find_dead(const struct fake_ref *r, void *arg) {
    if (!fake__ref_alive(r)) {
        *(const struct fake_ref **)arg = r;
        return 1;
    }
    return 0;
}

const struct fake_ref *fake__cmd_dead_ref(const struct fake_cmd *cmd) {
    const struct fake_ref *dead = NULL;
    for_refs(cmd, find_dead, &dead);
    return dead;
}

static int hold(const struct fake_ref *r, void *arg) {
    r->obj->pending += *(const long *)arg;
    return 0;
}

static void cmd_hold(const struct fake_cmd *cmd, long delta) { for_refs(cmd, hold, &delta); }

void fake__cmd_free(struct fake_cmd *cmd) {
    free(cmd->waits);
    cmd->waits = NULL;
    cmd->n_waits = 0;
    free(cmd->kernels);
    cmd->kernels = NULL;
    cmd->n_kernels = 0;
    if (cmd->kind == FAKE_CMD_EXECUTE) {
        free(cmd->u.exec.lists);
        cmd->u.exec.lists = NULL;
        cmd->u.exec.n_lists = 0;
    }
}

/* ---- running a command ---------------------------------------------------------------------- */

/* The allocation holding [addr, addr + bytes), marked busy; aborts when there is none. */
static struct fake_range *touch(const struct fake_cmd *c, uintptr_t addr, size_t bytes,
                                const char *what) {
    struct fake_range *r = fake__range_find(addr, bytes);
    if (r == NULL) {
        fake__fault("%s: %s [%p, +%zu) is not inside a live allocation", c->entry, what,
                    (void *)addr, bytes);
    }
    r->busy++;
    return r;
}

static void fill(uintptr_t dst, size_t bytes, const unsigned char *pattern, size_t size) {
    unsigned char *p = (unsigned char *)dst;
    if (size == 1) {
        memset(p, pattern[0], bytes);
        return;
    }
    for (size_t at = 0; at < bytes; at += size) {
        memcpy(p + at, pattern, size);
    }
}

/* (lock held; lets go while the work runs) The command's work: a copy, fill or kernel. */
static void run_work(const struct fake_cmd *c) {
    struct fake_range *ranges[ACG_MAX_KERNEL_ARGS];
    size_t n = 0;
    switch (c->kind) {
    case FAKE_CMD_COPY:
        if (c->u.copy.bytes == 0) {
            return;
        }
        ranges[n++] = touch(c, c->u.copy.dst, c->u.copy.bytes, "the destination");
        ranges[n++] = touch(c, c->u.copy.src, c->u.copy.bytes, "the source");
        break;
    case FAKE_CMD_FILL:
        if (c->u.fill.bytes == 0) {
            return;
        }
        ranges[n++] = touch(c, c->u.fill.dst, c->u.fill.bytes, "the memory filled");
        break;
    case FAKE_CMD_KERNEL:
        if ((uint64_t)c->u.kernel.global[0] * c->u.kernel.global[1] * c->u.kernel.global[2] == 0) {
            return; /* an empty grid runs nothing */
        }
        /* Only the start of a buffer's window is known here; ASan sees a kernel running past
         * its allocation. */
        for (uint32_t i = 0; i < c->u.kernel.launch.n_args; i++) {
            if (c->u.kernel.launch.types[i] == ACG_ARG_BUFFER) {
                ranges[n++] = touch(c, (uintptr_t)c->u.kernel.args[i].p, 0,
                                    "a kernel's buffer argument (pointer plus offset)");
            }
        }
        break;
    default:
        return;
    }
    /* The command is immutable while it runs: an immediate list's job, or a command of a list
     * that cannot be reset, appended to or destroyed while it executes. */
    pthread_mutex_unlock(&fake__g.lock);
    switch (c->kind) {
    case FAKE_CMD_COPY:
        memmove((void *)c->u.copy.dst, (const void *)c->u.copy.src, c->u.copy.bytes);
        break;
    case FAKE_CMD_FILL:
        fill(c->u.fill.dst, c->u.fill.bytes, c->u.fill.pattern, c->u.fill.pattern_size);
        break;
    default:
        c->u.kernel.launch.fn(c->u.kernel.args, c->u.kernel.global);
        break;
    }
    pthread_mutex_lock(&fake__g.lock);
    for (size_t i = 0; i < n; i++) {
        ranges[i]->busy--;
    }
}

/* (lock held) Whether the engine's work is to be dropped: the library is going, or the device
 * it runs on was lost. */
static int dropping(const struct fake_engine *e) { return fake__g.unloading || e->dev->lost; }

/* (lock held; lets go while it waits or works) Runs one command of engine `en` where it stands
 * in its list; the rest of it is dropped once the engine drops its work. */
static void run_cmd(const struct fake_engine *en, const struct fake_cmd *c) {
    for (uint32_t i = 0; i < c->n_waits; i++) {
        const struct fake_event *e = (const struct fake_event *)c->waits[i].obj;
        while (!e->signalled && !dropping(en)) {
            pthread_cond_wait(&fake__g.progress, &fake__g.lock);
        }
    }
    if (dropping(en)) {
        return;
    }
    switch (c->kind) {
    case FAKE_CMD_RESET:
        ((struct fake_event *)c->u.reset.event.obj)->signalled = 0;
        break;
    case FAKE_CMD_EXECUTE:
        for (uint32_t i = 0; i < c->u.exec.n_lists; i++) {
            const struct fake_list *l = (const struct fake_list *)c->u.exec.lists[i].obj;
            for (size_t j = 0; j < l->n_cmds; j++) {
                run_cmd(en, &l->cmds[j]);
            }
        }
        if (c->u.exec.fence.obj != NULL && !dropping(en)) {
            ((struct fake_fence *)c->u.exec.fence.obj)->signalled = 1;
        }
        break;
    case FAKE_CMD_GRAPH: {
        /* Simplified: the commands of every list of the capture run here, one after another in
         * the order they were recorded; each waits for its wait events, which an earlier one
         * signalled. The executable graph is held, so its commands do not change meanwhile. */
        const struct fake_exec_graph *x = (const struct fake_exec_graph *)c->u.graph.exec.obj;
        fake__graph_replay_check(c);
        for (size_t j = 0; j < x->n_cmds; j++) {
            run_cmd(en, &x->cmds[j]);
        }
        break;
    }
    default:
        run_work(c);
        break;
    }
    if (dropping(en)) {
        return; /* lost while it ran: what it signals is never signalled */
    }
    if (c->signal.obj != NULL) {
        ((struct fake_event *)c->signal.obj)->signalled = 1;
    }
    pthread_cond_broadcast(&fake__g.progress);
}

/* ---- engines -------------------------------------------------------------------------------- */

/* The job stays queued while it runs, so a synchronization sees it pending. A lost device's jobs
 * are dropped (run_cmd returns at once). */
static void run_job(struct fake_worker *w, struct fake_job *job) {
    run_cmd(w->owner, &((struct fake_queued *)job)->cmd);
}

static void job_done(struct fake_worker *w, struct fake_job *job) {
    (void)w;
    struct fake_queued *q = (struct fake_queued *)job;
    cmd_hold(&q->cmd, -1);
    fake__cmd_free(&q->cmd);
    free(q);
}

ze_result_t fake__engine_start(struct fake_engine *e, const char *what,
                               const struct fake_device *dev) {
    *e = (struct fake_engine){.what = what, .dev = dev};
    e->worker = (struct fake_worker){.lock = &fake__g.lock,
                                     .progress = &fake__g.progress,
                                     .owner = e,
                                     .run = run_job,
                                     .done = job_done};
    return fake__worker_start(&e->worker) == 0 ? ZE_RESULT_SUCCESS
                                               : ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
}

void fake__engine_stop(struct fake_engine *e) {
    fake__worker_quit(&e->worker);
    /* The worker needs the lock to return. */
    pthread_mutex_unlock(&fake__g.lock);
    pthread_join(e->worker.thread, NULL);
    pthread_mutex_lock(&fake__g.lock);
    pthread_cond_destroy(&e->worker.work);
}

ze_result_t fake__engine_submit(struct fake_engine *e, struct fake_cmd *cmd, uint64_t *seq) {
    struct fake_queued *q = malloc(sizeof *q);
    if (q == NULL) {
        fake__cmd_free(cmd);
        return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
    }
    q->cmd = *cmd;
    cmd_hold(&q->cmd, 1);
    *seq = fake__worker_push(&e->worker, &q->job);
    return ZE_RESULT_SUCCESS;
}

void fake__workers_stop(void) {
    struct fake_vec *lists = &fake__g.objs[FAKE_LIST], *queues = &fake__g.objs[FAKE_QUEUE];
    for (size_t i = 0; i < lists->n; i++) {
        struct fake_list *l = lists->v[i];
        if (l->queue != NULL) { /* a regular list has none */
            fake__engine_stop(&l->queue->engine);
        }
    }
    for (size_t i = 0; i < queues->n; i++) {
        struct fake_queue *q = queues->v[i];
        fake__engine_stop(&q->engine);
    }
}
