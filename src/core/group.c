/* group.c — process groups on devices and their collectives: one device per rank, joined through
 * the engine's comm, and allreduces that are work on a stream like any other (captured, replayed
 * and ordered by events), so a graph may hold them. */
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

static acg_status check_group(const acg_device_group *g, const char *fn) {
    return acg__check_live(g, ACG__HANDLE_GROUP, "group", "device group", fn);
}

/* The comm a group needs, read at the caller's size: rank, n_ranks and broadcast too. */
static acg_status read_comm(const acg_comm *comm, acg_comm *out, const char *fn) {
    const acg_comm defaults = ACG_COMM_INIT;
    ACG__TRY(acg__config_read(out, sizeof *out, &defaults, comm, offsetof(acg_comm, rank),
                              "acg_comm", fn));
    if (out->barrier == NULL || out->allreduce_min_i32 == NULL || out->broadcast == NULL) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: the comm has no %s", fn,
                          out->barrier == NULL             ? "barrier"
                          : out->allreduce_min_i32 == NULL ? "allreduce_min_i32"
                                                           : "broadcast (a device group needs it)");
    }
    return acg__comm_check_ranks(out, fn);
}

acg_status acg__comm_check_ranks(const acg_comm *comm, const char *fn) {
    if (comm->n_ranks < 1 || comm->n_ranks > ACG__MAX_RANKS || comm->rank < 0 ||
        comm->rank >= comm->n_ranks) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: the comm says rank %ld of %ld ranks (1 to %d ranks, rank below "
                          "their number)",
                          fn, (long)comm->rank, (long)comm->n_ranks, ACG__MAX_RANKS);
    }
    return ACG_OK;
}

acg_status acg_device_group_create(acg_device *dev, const acg_comm *comm, acg_device_group **out) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_group_create";
    ACG__TRY(acg__check_device_usable(dev, fn));
    ACG__TRY(acg__check_arg(comm, "comm", fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    acg_comm c;
    ACG__TRY(read_comm(comm, &c, fn));
    if (!dev->cap.collectives) {
        return acg__error(ACG_ERR_UNSUPPORTED, "%s: %s has no collectives", fn, dev->spec);
    }
    ACG__TRY(acg__device_lock_op(dev, fn));
    pthread_mutex_unlock(&dev->lock);
    acg_device_group *g = acg__new(sizeof *g, fn);
    if (g == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    g->dev = dev;
    g->rank = c.rank;
    g->n_ranks = c.n_ranks;
    g->comm = c; /* whole, whatever the caller's size; its callbacks and user outlive the group */
    acg_status st = dev->vt->group_create(dev->impl, &g->comm, &g->impl);
    if (st != ACG_OK) {
        acg__free(g);
        return st;
    }
    pthread_mutex_lock(&dev->lock);
    dev->n_groups++;
    /* Last: a call holding a stale handle that this address matches must not see the group
     * before it is whole (the registry's lock orders these writes before any lookup). */
    st = acg__handle_add(g, ACG__HANDLE_GROUP, &g->life);
    if (st != ACG_OK) {
        dev->n_groups--;
    }
    pthread_mutex_unlock(&dev->lock);
    if (st != ACG_OK) {
        dev->vt->group_destroy(g->impl);
        acg__free(g);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    *out = g;
    return ACG_OK;
}

acg_status acg_device_group_destroy(acg_device_group *g) {
    static const char fn[] = "acg_device_group_destroy";
    ACG__DESTROY_BEGIN(g, ACG__HANDLE_GROUP, fn, "device group");
    acg_device *dev = g->dev;
    pthread_mutex_lock(&dev->lock);
    if (g->graph_refs != 0) {
        uint64_t id = 0;
        for (const acg_graph *gr = dev->graphs; gr != NULL && id == 0; gr = gr->next) {
            for (uint32_t i = 0; i < gr->desc.n_nodes && id == 0; i++) {
                id = gr->desc.nodes[i].group_handle == g ? gr->id : 0;
            }
        }
        pthread_mutex_unlock(&dev->lock);
        acg__handle_restore(g);
        return acg__error(ACG_ERR_IN_USE, "%s: graph %llu holds an allreduce of the group", fn,
                          (unsigned long long)id);
    }
    pthread_mutex_unlock(&dev->lock);
    acg__hold_device(dev);
    /* Queued allreduces of the group may be on any stream of the device. */
    acg_status st = acg__device_wait_streams(dev, ~(uint64_t)0, fn);
    acg__handle_remove(g);
    pthread_mutex_lock(&dev->lock);
    dev->n_groups--;
    pthread_mutex_unlock(&dev->lock);
    dev->vt->group_destroy(g->impl);
    acg__free(g);
    return acg__device_released(dev, st);
}

acg_status acg_device_group_get_rank(const acg_device_group *g, int32_t *rank, int32_t *n_ranks) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_device_group_get_rank";
    ACG__TRY(check_group(g, fn));
    ACG__TRY(acg__check_arg(rank, "rank", fn));
    ACG__TRY(acg__check_arg(n_ranks, "n_ranks", fn));
    *rank = g->rank;
    *n_ranks = g->n_ranks;
    return ACG_OK;
}

static acg_status allreduce_eager(acg_stream *s, const acg__node *n) {
    return s->dev->vt->allreduce(s->impl, n->group, n->dst_mem, n->dst_off,
                                 n->size / sizeof(float));
}

acg_status acg_allreduce(acg_stream *s, acg_device_group *g, acg_buffer *buf, size_t offset,
                         size_t count) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_allreduce";
    ACG__TRY(acg__check_stream(s, fn));
    ACG__TRY(check_group(g, fn));
    ACG__TRY(acg__check_buffer(buf, s->dev, fn, "buffer"));
    if (g->dev != s->dev) {
        return acg__error(ACG_ERR_WRONG_DEVICE, "%s: the group is of %s, the stream of %s", fn,
                          g->dev->spec, s->dev->spec);
    }
    if (count == 0 || offset % sizeof(float) != 0 || count > SIZE_MAX / sizeof(float)) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: %s", fn,
                          count == 0 ? "count is 0"
                          : offset % sizeof(float) != 0
                              ? "offset is not a multiple of 4 (the floats' alignment)"
                              : "count is too large");
    }
    ACG__TRY(acg__check_range(buf, offset, count * sizeof(float), fn, "buffer"));
    acg__node n = {.kind = ACG_NODE_COLLECTIVE,
                   .dst_mem = buf->mem,
                   .dst_off = buf->offset + offset,
                   .size = count * sizeof(float),
                   .group = g->impl,
                   .group_handle = g,
                   .n_buffers = 1,
                   .buffers = {buf}};
    return acg__submit(s, fn, &n, allreduce_eager);
}
