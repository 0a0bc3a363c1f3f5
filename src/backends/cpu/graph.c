/* graph.c — the cpu backend's graphs: an op array built from the description, or recorded by
 * the workers of a native capture, that a stream's worker replays as one queue entry; and
 * host functions queued in stream order. */
#include <string.h>

#include "cpu.h"

/* Ops of a graph: one per node but foreign work, which a cpu stream never runs (it has no
 * native object to issue it on), so a native recording has exactly these ops too. */
static uint32_t count_ops(const acg__graph_desc *desc) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        n += desc->nodes[i].kind != ACG_NODE_FOREIGN;
    }
    return n;
}

/* Whether a graph's ops may block its worker on something else than its own queue: a host
 * function (which may wait for another stream), an allreduce (which waits for other ranks). */
static bool calls_host(const cpu_op *ops, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (ops[i].kind == CPU_OP_HOST || ops[i].kind == CPU_OP_ALLREDUCE) {
            return true;
        }
    }
    return false;
}

/* Writes the ops of a graph from its description; nodes are already in a valid serial order,
 * and one worker runs them one after another, which honours every dependency. */
static void build_ops(cpu_op *ops, const acg__graph_desc *desc) {
    cpu_op *op = ops;
    for (uint32_t i = 0; i < desc->n_nodes; i++) {
        const acg__node *n = &desc->nodes[i];
        if (n->kind == ACG_NODE_FOREIGN) {
            continue;
        }
        memset(op, 0, sizeof *op);
        switch (n->kind) {
        case ACG_NODE_KERNEL:
            acg__cpu_op_kernel(op, ckernel(n->kernel), &n->dims, n->args, n->n_args);
            break;
        case ACG_NODE_COPY_H2D:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = ptr(n->dst_mem, n->dst_off);
            op->u.copy.src = n->host;
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_COPY_D2H:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = n->host;
            op->u.copy.src = ptr(n->src_mem, n->src_off);
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_COPY_D2D:
            op->kind = CPU_OP_COPY;
            op->u.copy.dst = ptr(n->dst_mem, n->dst_off);
            op->u.copy.src = ptr(n->src_mem, n->src_off);
            op->u.copy.size = n->size;
            break;
        case ACG_NODE_FILL:
            acg__cpu_op_fill(op, ptr(n->dst_mem, n->dst_off), n->size, n->pattern, n->pattern_size);
            break;
        case ACG_NODE_HOST:
            op->kind = CPU_OP_HOST;
            op->u.host.fn = n->host_fn;
            op->u.host.user = n->host_user;
            break;
        case ACG_NODE_COLLECTIVE:
            acg__cpu_op_allreduce(op, n->group, n->dst_mem, n->dst_off, n->size / sizeof(float));
            break;
        case ACG_NODE_LOOP:
            /* Its body's nodes are the ops after it: no foreign work is let into a body. */
            op->kind = CPU_OP_LOOP;
            op->u.loop.cond = (const uint32_t *)(void *)ptr(n->dst_mem, n->dst_off);
            op->u.loop.max = n->loop_max;
            op->u.loop.n_body = n->loop_body;
            break;
        case ACG_NODE_FOREIGN:
            break;
        }
        op++;
    }
}

acg_status acg__cpu_graph_instantiate(acg__bk_device *dev, const acg__graph_desc *desc,
                                      acg__bk_exec **exec) {
    ACG__UNUSED(dev);
    cpu_graph *g = acg__calloc(1, sizeof *g);
    if (g == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    g->n_ops = count_ops(desc);
    if (g->n_ops != 0) {
        g->ops = acg__alloc_aligned((size_t)g->n_ops * sizeof *g->ops, 64);
        if (g->ops == NULL) {
            acg__free(g);
            return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
        }
        build_ops(g->ops, desc);
    }
    g->has_host = calls_host(g->ops, g->n_ops);
    *exec = bk_exec(g);
    return ACG_OK;
}

acg_status acg__cpu_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream) {
    cpu_device *d = acg__cpu_stream_device(cs(stream));
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    /* The fault hook is decided here, on the submitting side, so the replay loop pays nothing
     * for it. */
    bool fault =
        atomic_load_explicit(&d->inject, memory_order_relaxed) && atomic_exchange(&d->inject, 0);
    op->kind = fault ? CPU_OP_FAULT : CPU_OP_GRAPH;
    op->u.graph.graph = cgraph(exec);
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

/* The same for graphs instantiated from the description and natively recorded ones: both
 * have one op per node but foreign work, in the ledger's order. */
acg_status acg__cpu_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc) {
    cpu_graph *g = cgraph(exec);
    if (count_ops(desc) != g->n_ops) {
        return acg__error(ACG_ERR_INTERNAL,
                          "acg_graph_update: the cpu graph has %u ops, the "
                          "description %u",
                          g->n_ops, count_ops(desc));
    }
    build_ops(g->ops, desc);
    return ACG_OK;
}

/* One kernel node rewritten in place: its op is the node's place among the ops, which skip
 * foreign work. */
acg_status acg__cpu_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                      uint32_t index, const acg__node *old) {
    ACG__UNUSED(old);
    cpu_graph *g = cgraph(exec);
    uint32_t at = 0;
    for (uint32_t i = 0; i < index; i++) {
        at += desc->nodes[i].kind != ACG_NODE_FOREIGN;
    }
    if (at >= g->n_ops || g->ops[at].kind != CPU_OP_KERNEL) {
        return acg__error(ACG_ERR_INTERNAL,
                          "acg_graph_update_kernel_node: node %u is no kernel op of the cpu graph",
                          index);
    }
    const acg__node *n = &desc->nodes[index];
    cpu_op *op = &g->ops[at];
    memset(op, 0, sizeof *op);
    acg__cpu_op_kernel(op, ckernel(n->kernel), &n->dims, n->args, n->n_args);
    return ACG_OK;
}

/* ---- native capture and host functions --------------------------------------------------- */

static acg_status cpu_capture_join_impl(cpu_recording *r, cpu_stream *s) {
    if (!acg__grow((void **)&r->streams, &r->cap_streams, r->n_streams + 1, sizeof *r->streams)) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "cpu: out of memory recording the capture");
    }
    r->streams[r->n_streams++] = s;
    acg__cpu_stream_record(s, r);
    return ACG_OK;
}

acg_status acg__cpu_capture_join(acg__bk_recording *rec, acg__bk_stream *stream) {
    return cpu_capture_join_impl(crec(rec), cs(stream));
}

/* Takes every stream of the recording out of recording mode and frees the recording, leaving
 * its ops to the caller. */
static cpu_op *recording_close(cpu_recording *r, uint32_t *n_ops) {
    for (uint32_t i = 0; i < r->n_streams; i++) {
        acg__cpu_stream_record(r->streams[i], NULL);
    }
    cpu_op *ops = r->ops;
    *n_ops = r->n;
    acg__free(r->streams);
    acg__free(r);
    return ops;
}

void acg__cpu_capture_abort(acg__bk_recording *rec) {
    uint32_t n = 0;
    acg__free(recording_close(crec(rec), &n));
}

acg_status acg__cpu_capture_end(acg__bk_recording *rec, acg__bk_exec **exec) {
    cpu_graph *g = acg__calloc(1, sizeof *g);
    uint32_t n = 0;
    cpu_op *ops = recording_close(crec(rec), &n);
    if (g == NULL) {
        acg__free(ops);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_end_capture: out of memory");
    }
    g->ops = ops;
    g->n_ops = n;
    g->has_host = calls_host(ops, n);
    *exec = bk_exec(g);
    return ACG_OK;
}

acg_status acg__cpu_host_launch(acg__bk_stream *stream, acg_host_fn fn, void *user) {
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    if (op == NULL) {
        return acg__cpu_recording_full();
    }
    op->kind = CPU_OP_HOST;
    op->u.host.fn = fn;
    op->u.host.user = user;
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

/* A loop in a native recording: its op now, its body's length when it closes (the core lets
 * no other stream record meanwhile, so the body is the ops in between). */
acg_status acg__cpu_loop_begin(acg__bk_stream *stream, acg__bk_mem *cond, size_t off,
                               uint32_t max) {
    cpu_recording *r = acg__cpu_stream_recording(cs(stream));
    cpu_op *op = acg__cpu_stream_reserve(cs(stream));
    if (op == NULL) {
        return acg__cpu_recording_full();
    }
    op->kind = CPU_OP_LOOP;
    op->u.loop.cond = (const uint32_t *)(void *)ptr(cond, off);
    op->u.loop.max = max;
    r->loops[r->n_loops++] = r->n;
    acg__cpu_stream_submit(cs(stream));
    return ACG_OK;
}

acg_status acg__cpu_loop_end(acg__bk_stream *stream) {
    cpu_recording *r = acg__cpu_stream_recording(cs(stream));
    uint32_t at = r->loops[--r->n_loops];
    r->ops[at].u.loop.n_body = r->n - at - 1;
    return ACG_OK;
}

acg_status acg__cpu_capture_begin(acg__bk_stream *stream, acg__bk_recording **rec) {
    cpu_recording *r = acg__calloc(1, sizeof *r);
    if (r == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "acg_stream_begin_capture: out of memory");
    }
    acg_status st = ACG_OK;
    if ((st = cpu_capture_join_impl(r, cs(stream))) != ACG_OK) {
        acg__free(r);
        return st;
    }
    *rec = bk_rec(r);
    return ACG_OK;
}

void acg__cpu_graph_destroy(acg__bk_exec *exec) {
    cpu_graph *g = cgraph(exec);
    acg__free(g->ops);
    acg__free(g);
}
