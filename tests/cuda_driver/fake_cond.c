/* fake_cond.c — the CUDA test driver's conditional nodes: their handles, cuGraphAddNode, the
 * capture calls that build loops (cuStreamUpdateCaptureDependencies; cuStreamBeginCaptureToGraph
 * is fake_graph.c's), what an exec keeps of them, their replay, and the device code the driver
 * emulates to set them.
 *
 * A conditional handle is part of the graph it was made in (no call destroys one); one node
 * takes it (CUDA's programming guide: "associated with a single conditional node"), in its own
 * graph or in a graph that is (at any depth) a body of it, as CUDA's "this graph or one of its
 * children"; a graph holding a handle no node took is not instantiated (CUDA's
 * CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED). A graph with conditional nodes is not
 * cloned, has one exec at a time, and is not instantiated while a capture still records into
 * one of its bodies. A conditional node owns its body graphs (fake__g.bodies: found
 * by every call that adds nodes or captures into a graph, never destroyed, instantiated, cloned
 * or updated alone), which CUDA's rule restricts to kernels, empty nodes, child graphs, memsets,
 * memcopies (of device and pinned memory) and conditionals: anything else is refused where it
 * is added, and a capture into a body that records anything else is invalidated.
 *
 * An exec holds the state of every handle of its graph and its bodies (struct fake_cond_state):
 * each replay first gives the handles made with CU_GRAPH_COND_ASSIGN_DEFAULT their default, once
 * per launch as CUDA does (not each time a nested node is reached); the others keep the value
 * the last replay left (CUDA leaves it undefined; here it starts as the default). A node of an
 * exec's snapshot holds its bodies as snapshots of their own, replayed in insertion order like
 * the graph's: IF runs body 0 when the value is not 0, else body 1 if it has one; WHILE runs body
 * 0 as long as the value is not 0, reading it before each run; SWITCH runs body n for value n.
 *
 * Device code sets a value with the device runtime's cudaGraphSetConditional. The driver cannot
 * run device code, so the few functions acg compiles that call it are emulated here, by name and
 * parameter sizes (builtins[]), on the stream's worker under the driver's lock: a launch of one
 * in a replay sets the value of the handle it is given in that replay's exec.
 */
#include "fake_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A WHILE node whose body ran this many times in one evaluation is taken for a hang (a loop
 * whose value never becomes 0): the context faults, where a GPU would spin until killed. */
#define MAX_ITERATIONS (1u << 20)

/* ---- device code the driver emulates --------------------------------------------------------- */

/* A fault of emulated device code: the context's sticky error, and why (code 0: none). */
struct fake_fault {
    CUresult code;
    const char *name; /* the code's */
    const char *why;
};
#define FAULT(code, why) ((struct fake_fault){(code), #code, (why)})
#define NO_FAULT ((struct fake_fault){CUDA_SUCCESS, NULL, NULL})

#define MAX_BUILTIN_PARAMS 4

struct fake_builtin {
    const char *name;
    uint32_t n_params;
    uint32_t size[MAX_BUILTIN_PARAMS]; /* bytes: 4 (read as u32) or 8 (u64) */
    /* (lock held) One launch, with its parameters: eagerly (x NULL) or in a replay of x. */
    struct fake_fault (*run)(const acg_cpu_arg *args, struct CUgraphExec_st *x);
};

/* (lock held) The state of handle h in exec x, or NULL (none: no exec, or another graph's). */
static struct fake_cond_state *state_of(struct CUgraphExec_st *x, uint64_t h) {
    for (size_t i = 0; x != NULL && i < x->n_conds; i++) {
        if (x->conds[i].handle == h) {
            return &x->conds[i];
        }
    }
    return NULL;
}

/* (lock held) The 32-bit word at a device address (or mapped pinned memory), or NULL. */
static unsigned char *device_word(uint64_t addr) {
    uintptr_t p = (uintptr_t)addr;
    return fake__range_find(p, 4, FAKE_DEVICE_MEMORY | FAKE_PINNED_MEMORY) != NULL
               ? (unsigned char *)p
               : NULL;
}

/* acg_loop_next(h, cond, counter, max), src/backends/cuda/loop.cu: the last node of a loop's
 *     unsigned c = ++*counter;
 *     cudaGraphSetConditional(h, (*(const unsigned *)cond != 0u && c < max) ? 1u : 0u); */
static struct fake_fault loop_next(const acg_cpu_arg *a, struct CUgraphExec_st *x) {
    unsigned char *cond = device_word(a[1].u64), *counter = device_word(a[2].u64);
    if (cond == NULL || counter == NULL) {
        return FAULT(CUDA_ERROR_ILLEGAL_ADDRESS, "reads outside live device memory");
    }
    unsigned c, v;
    memcpy(&c, counter, sizeof c);
    c++;
    memcpy(counter, &c, sizeof c);
    memcpy(&v, cond, sizeof v);
    struct fake_cond_state *st = state_of(x, a[0].u64);
    if (st == NULL) { /* the real device's effect was not verified */
        return FAULT(CUDA_ERROR_LAUNCH_FAILED, "sets a conditional handle of no graph it runs in");
    }
    st->value = v != 0u && c < a[3].u32 ? 1u : 0u;
    return NO_FAULT;
}

/* acg_loop_begin(h, counter) of src/backends/cuda/loop.cu: the node before every WHILE node (a
 * loop nested in another's body needs it: a handle's default is given once per launch only)
 *     *counter = 0u;
 *     cudaGraphSetConditional(h, 1u); */
static struct fake_fault loop_begin(const acg_cpu_arg *a, struct CUgraphExec_st *x) {
    unsigned char *counter = device_word(a[1].u64);
    if (counter == NULL) {
        return FAULT(CUDA_ERROR_ILLEGAL_ADDRESS, "writes outside live device memory");
    }
    memset(counter, 0, 4);
    struct fake_cond_state *st = state_of(x, a[0].u64);
    if (st == NULL) {
        return FAULT(CUDA_ERROR_LAUNCH_FAILED, "sets a conditional handle of no graph it runs in");
    }
    st->value = 1u;
    return NO_FAULT;
}

/* Keyed by name and parameter sizes: a function of that name with other parameters is not
 * emulated (it needs acg's cpu implementation, as any kernel). */
static const struct fake_builtin builtins[] = {
    {"acg_loop_next", 4, {8, 8, 8, 4}, loop_next},
    {"acg_loop_begin", 2, {8, 8}, loop_begin},
};

const struct fake_builtin *fake__builtin_find(const char *name, const struct fake_params *params) {
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        const struct fake_builtin *b = &builtins[i];
        if (strcmp(b->name, name) == 0 && params->n == b->n_params &&
            memcmp(params->size, b->size, b->n_params * sizeof b->size[0]) == 0) {
            return b;
        }
    }
    return NULL;
}

/* (lock held) ctx faults, saying why on stderr. */
static void fault(struct CUctx_st *ctx, const char *what, struct fake_fault f) {
    ctx->sticky = f.code;
    fprintf(stderr, "acg CUDA test driver: %s %s; device %d now reports %s\n", what, f.why,
            ctx->device, f.name);
}

void fake__builtin_run(struct CUctx_st *ctx, const struct fake_work *w, struct CUgraphExec_st *x) {
    const struct fake_builtin *b = w->u.kernel.builtin;
    struct fake_fault f = b->run(w->u.kernel.args, x);
    if (f.code != CUDA_SUCCESS) {
        fault(ctx, b->name, f);
    }
}

/* ---- where nodes go: any graph, a capture's and a body included ------------------------------ */

/* (lock held) fake_graph.c's too: its cuGraphAdd*Node and captures into a graph. */
CUresult fake__graph_find(CUgraph h, struct CUgraph_st **out) {
    for (size_t i = 0; h != NULL && i < fake__g.captures.n; i++) {
        if (((struct fake_capture *)fake__g.captures.v[i])->graph == h) {
            *out = h;
            return CUDA_SUCCESS;
        }
    }
    return fake__handle(fake__vec_has(&fake__g.bodies, h) ? &fake__g.bodies : &fake__g.graphs, h,
                        (void **)out);
}

CUresult fake__graph_deps(const struct CUgraph_st *g, const CUgraphNode *deps,
                          const CUgraphEdgeData *edges, size_t n, struct fake_ids *out) {
    static const CUgraphEdgeData none; /* the default: no data */
    if (n > 0 && deps == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = 0;
        while (at < g->nodes.n && g->nodes.v[at] != deps[i]) {
            at++;
        }
        size_t before = out->n;
        if (at == g->nodes.n) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (fake__ids_add(out, at) != 0) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (out->n == before) {
            return CUDA_ERROR_INVALID_VALUE; /* given twice, which CUDA forbids */
        }
        /* Simplified: edges carry no data. */
        if (edges != NULL && memcmp(&edges[i], &none, sizeof none) != 0) {
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return CUDA_SUCCESS;
}

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v3) == sizeof(CUDA_KERNEL_NODE_PARAMS_v2) &&
                   offsetof(CUDA_KERNEL_NODE_PARAMS_v3, ctx) ==
                       offsetof(CUDA_KERNEL_NODE_PARAMS_v2, ctx),
               "a v3 kernel node is a v2 one");

/* (lock held) The work of a cuGraphAddNode node of a type other than CONDITIONAL (a kernel, a
 * copy, a fill, a host function, an empty node): NOT_SUPPORTED for the other types. The v2
 * memset and host parameters are the v1 ones, with a context for the memset. */
static CUresult node_params_work(const CUgraphNodeParams *p, struct fake_work *out) {
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return fake__kernel_node_work(&p->kernel, out);
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUresult r = p->memcpy.flags != 0 || p->memcpy.reserved != 0
                         ? CUDA_ERROR_INVALID_VALUE
                         : fake__ctx_argument(p->memcpy.copyCtx);
        return r == CUDA_SUCCESS ? fake__copy_node_work(&p->memcpy.copyParams, out) : r;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS v1 = {p->memset.dst,   p->memset.pitch,
                                            p->memset.value, p->memset.elementSize,
                                            p->memset.width, p->memset.height};
        CUresult r = fake__ctx_argument(p->memset.ctx);
        return r == CUDA_SUCCESS ? fake__fill_node_work(&v1, out) : r;
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        const CUDA_HOST_NODE_PARAMS v1 = {p->host.fn, p->host.userData};
        return fake__host_node_work(&v1, out);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        *out = (struct fake_work){.type = CU_GRAPH_NODE_TYPE_EMPTY};
        return CUDA_SUCCESS;
    default: /* simplified: no child graphs, events, semaphores, allocations or batches */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* ---- handles and nodes ---------------------------------------------------------------------- */

int fake__body_allows(CUgraphNodeType type) {
    return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_EMPTY ||
           type == CU_GRAPH_NODE_TYPE_GRAPH || type == CU_GRAPH_NODE_TYPE_MEMSET ||
           type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

/* A copy in a body reaches device memory and pinned (device-mapped) host memory only, as CUDA's
 * programming guide says. */
int fake__body_takes(const struct fake_work *w) {
    if (w->type != CU_GRAPH_NODE_TYPE_MEMCPY) {
        return fake__body_allows(w->type);
    }
    return (w->u.copy.dst_device ||
            fake__range_find(w->u.copy.dst, w->u.copy.bytes, FAKE_PINNED_MEMORY) != NULL) &&
           (w->u.copy.src_device ||
            fake__range_find(w->u.copy.src, w->u.copy.bytes, FAKE_PINNED_MEMORY) != NULL);
}

/* The handle defaultLaunchValue, flags: CU_GRAPH_COND_ASSIGN_DEFAULT or 0; hctx NULL is the
 * current context. */
CUresult fake_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *handle, CUgraph h,
                                             CUcontext hctx, unsigned int value,
                                             unsigned int flags) {
    FAKE_ENTER(cuGraphConditionalHandleCreate);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    struct fake_cond *c;
    CUresult r;
    FAKE_CHECK(fake__lock_current(&ctx), out);
    FAKE_CHECK(fake__graph_find(h, &g), out);
    FAKE_FAIL_IF(handle == NULL || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT) != 0,
                 CUDA_ERROR_INVALID_VALUE, out);
    FAKE_FAIL_IF(hctx != NULL && !fake__ctx_active(hctx), CUDA_ERROR_INVALID_CONTEXT, out);
    FAKE_FAIL_IF((c = calloc(1, sizeof *c)) == NULL, CUDA_ERROR_OUT_OF_MEMORY, out);
    if (fake__vec_push(&g->conds, c) != 0) {
        free(c);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    c->id = ++fake__g.next_id;
    c->ctx = hctx != NULL ? hctx : ctx;
    c->value = value;
    c->flags = flags;
    *handle = c->id;
out:
    return fake__unlock(r);
}

void fake__cond_free_bodies(struct fake_work *w) {
    if (w->type != CU_GRAPH_NODE_TYPE_CONDITIONAL || w->u.cond.bodies == NULL) {
        return;
    }
    for (unsigned i = 0; i < w->u.cond.size; i++) {
        if (w->u.cond.bodies[i] != NULL) {
            fake__graph_free(w->u.cond.bodies[i]);
        }
    }
    free(w->u.cond.bodies);
    w->u.cond.bodies = NULL;
}

/* (lock held) The handle h of g or of a graph g is a body of, or NULL. */
static struct fake_cond *handle_for(const struct CUgraph_st *g, uint64_t h) {
    for (; g != NULL; g = g->parent) {
        for (size_t i = 0; i < g->conds.n; i++) {
            struct fake_cond *c = g->conds.v[i];
            if (c->id == h) {
                return c;
            }
        }
    }
    return NULL;
}

/* (lock held) A conditional node's work for graph g, with its new, empty bodies (given to the
 * caller), and its handle in *c: INVALID_VALUE for a handle g may not take or another node took
 * (CUDA's programming guide: "associated with a single conditional node"), another context, or
 * a size its type does not take (the real driver's codes here were not verified). Simplified:
 * IF with two bodies and SWITCH (up to 4096 bodies here) are served whatever the driver's
 * version (CUDA 12.8 added them). */
static CUresult cond_work(struct CUgraph_st *g, const CUDA_CONDITIONAL_NODE_PARAMS *p,
                          struct fake_work *w, struct fake_cond **c) {
    *c = handle_for(g, p->handle);
    if (*c == NULL || (*c)->used || (p->ctx != NULL && p->ctx != (*c)->ctx)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int sized = p->type == CU_GRAPH_COND_TYPE_WHILE    ? p->size == 1
                : p->type == CU_GRAPH_COND_TYPE_IF     ? p->size == 1 || p->size == 2
                : p->type == CU_GRAPH_COND_TYPE_SWITCH ? p->size >= 1 && p->size <= 4096
                                                       : 0;
    if (!sized) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *w = (struct fake_work){.type = CU_GRAPH_NODE_TYPE_CONDITIONAL};
    w->u.cond.type = p->type;
    w->u.cond.size = p->size;
    w->u.cond.handle = p->handle;
    if ((w->u.cond.bodies = calloc(p->size, sizeof(CUgraph))) == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (unsigned i = 0; i < p->size; i++) {
        struct CUgraph_st *body = fake__graph_new(g->ctx);
        if (body == NULL || fake__vec_push(&fake__g.bodies, body) != 0) {
            free(body);
            fake__cond_free_bodies(w);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        body->parent = g;
        w->u.cond.bodies[i] = body;
    }
    return CUDA_SUCCESS;
}

/* The bytes of the union member of a node of this type, past which CUDA wants zeros. */
static size_t member_bytes(CUgraphNodeType type) {
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return sizeof(CUDA_KERNEL_NODE_PARAMS_v3);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return sizeof(CUDA_MEMCPY_NODE_PARAMS);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return sizeof(CUDA_MEMSET_NODE_PARAMS_v2);
    case CU_GRAPH_NODE_TYPE_HOST:
        return sizeof(CUDA_HOST_NODE_PARAMS_v2);
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return 0;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return sizeof(CUDA_CONDITIONAL_NODE_PARAMS);
    default: /* not served: not checked */
        return sizeof(((CUgraphNodeParams *)0)->reserved1);
    }
}

/* Whether the reserved and unused bytes of p are zero, as CUDA requires. */
static int params_clean(const CUgraphNodeParams *p) {
    const unsigned char *tail = (const unsigned char *)p->reserved1;
    int clean =
        p->reserved0[0] == 0 && p->reserved0[1] == 0 && p->reserved0[2] == 0 && p->reserved2 == 0;
    for (size_t i = member_bytes(p->type); i < sizeof p->reserved1 && clean; i++) {
        clean = tail[i] == 0;
    }
    return clean;
}

/* A node of any type the driver serves (a kernel, a copy, a fill, a host function, an empty or
 * a conditional node) after the n nodes deps of graph h (edge data: the default's only). A
 * conditional node's bodies are made empty, and p->conditional.phGraph_out then names them: an
 * array the node owns. A body refuses a type CUDA's rule does not allow (INVALID_VALUE, the real
 * driver's code here not verified); a type not served is NOT_SUPPORTED. */
CUresult fake_cuGraphAddNode(CUgraphNode *phnode, CUgraph h, const CUgraphNode *deps,
                             const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p) {
    FAKE_ENTER(cuGraphAddNode);
    struct CUctx_st *ctx;
    struct CUgraph_st *g;
    struct fake_ids ids = {0};
    struct fake_work work = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    struct fake_cond *c = NULL;
    struct CUgraphNode_st *node;
    CUresult r;
    FAKE_CHECK(fake__lock_current(&ctx), out);
    FAKE_CHECK(fake__graph_find(h, &g), out);
    FAKE_FAIL_IF(phnode == NULL || p == NULL || !params_clean(p) ||
                     (g->parent != NULL && !fake__body_allows(p->type)),
                 CUDA_ERROR_INVALID_VALUE, out);
    FAKE_CHECK(fake__graph_deps(g, deps, edges, n, &ids), out);
    FAKE_CHECK(p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL ? cond_work(g, &p->conditional, &work, &c)
                                                         : node_params_work(p, &work),
               out);
    FAKE_FAIL_IF(g->parent != NULL && !fake__body_takes(&work), CUDA_ERROR_INVALID_VALUE, out);
    FAKE_CHECK(fake__graph_add(g, &ids, &work, &node), out);
    if (c != NULL) {
        c->used = 1;
        p->conditional.phGraph_out = node->work.u.cond.bodies;
    }
    *phnode = node;
out:
    if (r != CUDA_SUCCESS) {
        fake__cond_free_bodies(&work); /* made for a node that was not added */
    }
    fake__ids_free(&ids);
    return fake__unlock(r);
}

/* The capturing stream's next node depends on the n nodes deps (of the capture's graph, edge
 * data the default's only) as well (CU_STREAM_ADD_CAPTURE_DEPENDENCIES) or instead
 * (CU_STREAM_SET_CAPTURE_DEPENDENCIES). ILLEGAL_STATE for a stream that does not capture. */
CUresult fake_cuStreamUpdateCaptureDependencies(CUstream hs, CUgraphNode *deps,
                                                const CUgraphEdgeData *edges, size_t n,
                                                unsigned int flags) {
    FAKE_ENTER(cuStreamUpdateCaptureDependencies);
    struct CUctx_st *ctx;
    struct CUstream_st *s;
    struct fake_ids ids = {0};
    CUresult r;
    FAKE_CHECK(fake__lock_stream(hs, &ctx, &s), out);
    FAKE_FAIL_IF(flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
                     flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES,
                 CUDA_ERROR_INVALID_VALUE, out);
    FAKE_FAIL_IF(s->capture == NULL, CUDA_ERROR_ILLEGAL_STATE, out);
    FAKE_FAIL_IF(s->capture->invalidated, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, out);
    FAKE_CHECK(fake__graph_deps(s->capture->graph, deps, edges, n, &ids), out);
    if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES) {
        fake__ids_free(&s->frontier);
        s->frontier = ids;
        ids = (struct fake_ids){0};
    } else {
        FAKE_FAIL_IF(fake__ids_union(&s->frontier, &ids) != 0, CUDA_ERROR_OUT_OF_MEMORY, out);
    }
out:
    fake__ids_free(&ids);
    return fake__unlock(r);
}

int fake__graph_conditional(const struct CUgraph_st *g, struct CUgraphNode_st **first) {
    int any = g->conds.n > 0;
    if (first != NULL) {
        *first = NULL;
    }
    for (size_t i = 0; i < g->nodes.n; i++) {
        struct CUgraphNode_st *node = g->nodes.v[i];
        if (node->work.type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            if (first != NULL && *first == NULL) {
                *first = node;
            }
            any = 1;
        }
    }
    return any;
}

/* ---- execs ---------------------------------------------------------------------------------- */

/* (lock held) Counts the handles of g and its bodies in *n, each stored in states (when not
 * NULL) from there: INVALID_VALUE for a handle no node took (CUDA's
 * CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED), ILLEGAL_STATE for a graph a capture still
 * records into (the real driver's codes here were not verified). */
static CUresult walk_conds(const struct CUgraph_st *g, struct fake_cond_state *states, size_t *n) {
    for (size_t i = 0; i < fake__g.captures.n; i++) {
        if (((struct fake_capture *)fake__g.captures.v[i])->graph == g) {
            return CUDA_ERROR_ILLEGAL_STATE;
        }
    }
    for (size_t i = 0; i < g->conds.n; i++) {
        const struct fake_cond *c = g->conds.v[i];
        if (!c->used) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (states != NULL) {
            states[*n] = (struct fake_cond_state){c->id, c->value, c->value, c->flags};
        }
        (*n)++;
    }
    for (size_t i = 0; i < g->nodes.n; i++) {
        const struct fake_work *w = &((const struct CUgraphNode_st *)g->nodes.v[i])->work;
        for (unsigned b = 0; w->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && b < w->u.cond.size; b++) {
            CUresult r = walk_conds(w->u.cond.bodies[b], states, n);
            if (r != CUDA_SUCCESS) {
                return r;
            }
        }
    }
    return CUDA_SUCCESS;
}

/* A graph with conditional nodes has one exec at a time, as in CUDA: a second instantiation is
 * INVALID_VALUE, cuGraphInstantiateWithFlags's only documented code (the real one was not
 * verified). */
CUresult fake__exec_conds(struct CUgraphExec_st *x, const struct CUgraph_st *g) {
    size_t n = 0;
    CUresult r = walk_conds(g, NULL, &n);
    if (r != CUDA_SUCCESS) {
        return r;
    }
    if (fake__graph_conditional(g, NULL)) {
        for (size_t i = 0; i < fake__g.execs.n; i++) {
            if (((const struct CUgraphExec_st *)fake__g.execs.v[i])->origin_id == g->id) {
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
    }
    if (n == 0) {
        return CUDA_SUCCESS;
    }
    if ((x->conds = calloc(n, sizeof *x->conds)) == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    x->n_conds = 0;
    return walk_conds(g, x->conds, &x->n_conds);
}

struct fake_snapshot *fake__snapshot_new(size_t n) {
    struct fake_snapshot *snap = calloc(1, sizeof *snap + n * sizeof(struct fake_work));
    if (snap != NULL) {
        snap->refs = 1;
        snap->n = n;
    }
    return snap;
}

void fake__snapshot_release(struct fake_snapshot *snap) {
    if (--snap->refs > 0) {
        return;
    }
    for (size_t i = 0; i < snap->n; i++) {
        struct fake_work *w = &snap->nodes[i];
        for (unsigned b = 0; w->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && w->u.cond.snaps != NULL &&
                             b < w->u.cond.size;
             b++) {
            if (w->u.cond.snaps[b] != NULL) {
                fake__snapshot_release(w->u.cond.snaps[b]);
            }
        }
        if (w->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            free(w->u.cond.snaps);
        }
    }
    free(snap);
}

struct fake_snapshot *fake__snapshot_of(const struct CUgraph_st *g,
                                        const struct CUgraphExec_st *x) {
    struct fake_snapshot *snap = fake__snapshot_new(g->nodes.n);
    for (size_t i = 0; snap != NULL && i < g->nodes.n; i++) {
        const struct fake_work *from = &((const struct CUgraphNode_st *)g->nodes.v[i])->work;
        struct fake_work *w = &snap->nodes[i];
        *w = *from;
        if (w->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            continue;
        }
        w->u.cond.bodies = NULL; /* the graph's */
        while (w->u.cond.slot < x->n_conds && x->conds[w->u.cond.slot].handle != w->u.cond.handle) {
            w->u.cond.slot++; /* found: every handle a node may take is the exec's */
        }
        w->u.cond.snaps = calloc(w->u.cond.size, sizeof *w->u.cond.snaps);
        int ok = w->u.cond.snaps != NULL;
        for (unsigned b = 0; ok && b < w->u.cond.size; b++) {
            ok = (w->u.cond.snaps[b] = fake__snapshot_of(from->u.cond.bodies[b], x)) != NULL;
        }
        if (!ok) {
            fake__snapshot_release(snap);
            snap = NULL;
        }
    }
    return snap;
}

struct fake_snapshot *fake__snapshot_copy(const struct fake_snapshot *from) {
    struct fake_snapshot *snap = fake__snapshot_new(from->n);
    if (snap == NULL) {
        return NULL;
    }
    memcpy(snap->nodes, from->nodes, from->n * sizeof(struct fake_work));
    int ok = 1;
    for (size_t i = 0; i < snap->n; i++) {
        struct fake_work *w = &snap->nodes[i];
        if (w->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            continue;
        }
        struct fake_snapshot **snaps = ok ? malloc(w->u.cond.size * sizeof *snaps) : NULL;
        ok = snaps != NULL;
        for (unsigned b = 0; ok && b < w->u.cond.size; b++) {
            snaps[b] = w->u.cond.snaps[b]; /* shared: one more reference each */
            snaps[b]->refs++;
        }
        w->u.cond.snaps = snaps; /* NULL past a failure: nothing of the original released */
    }
    if (!ok) {
        fake__snapshot_release(snap);
        return NULL;
    }
    return snap;
}

/* ---- replay --------------------------------------------------------------------------------- */

static void replay_nodes(struct CUctx_st *ctx, struct CUgraphExec_st *x,
                         const struct fake_snapshot *snap);

/* (lock held; lets go while work runs) A conditional node: which body runs, how often. The
 * state does not move (an exec's conds are fixed), and only this replay touches it. */
static void replay_cond(struct CUctx_st *ctx, struct CUgraphExec_st *x, const struct fake_work *w) {
    const struct fake_cond_state *st = &x->conds[w->u.cond.slot];
    switch (w->u.cond.type) {
    case CU_GRAPH_COND_TYPE_IF:
        if (st->value != 0 || w->u.cond.size == 2) {
            replay_nodes(ctx, x, w->u.cond.snaps[st->value != 0 ? 0 : 1]);
        }
        break;
    case CU_GRAPH_COND_TYPE_WHILE:
        for (unsigned n = 0; st->value != 0 && ctx->sticky == CUDA_SUCCESS; n++) {
            if (n == MAX_ITERATIONS) {
                fault(ctx, "a WHILE node",
                      FAULT(CUDA_ERROR_LAUNCH_TIMEOUT, "ran its body 2^20 times without its "
                                                       "handle becoming 0 (taken for a hang)"));
                break;
            }
            replay_nodes(ctx, x, w->u.cond.snaps[0]);
        }
        break;
    default: /* SWITCH */
        if (st->value < w->u.cond.size) {
            replay_nodes(ctx, x, w->u.cond.snaps[st->value]);
        }
        break;
    }
}

/* (lock held; lets go while work runs) The nodes of a snapshot in insertion order, until the
 * context faults. */
static void replay_nodes(struct CUctx_st *ctx, struct CUgraphExec_st *x,
                         const struct fake_snapshot *snap) {
    for (size_t i = 0; i < snap->n && ctx->sticky == CUDA_SUCCESS; i++) {
        if (snap->nodes[i].type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            replay_cond(ctx, x, &snap->nodes[i]);
        } else {
            fake__run_work(ctx, &snap->nodes[i], x);
        }
    }
}

void fake__replay(struct CUctx_st *ctx, struct CUgraphExec_st *x,
                  const struct fake_snapshot *snap) {
    for (size_t i = 0; i < x->n_conds; i++) {
        if (x->conds[i].flags & CU_GRAPH_COND_ASSIGN_DEFAULT) {
            x->conds[i].value = x->conds[i].default_value;
        }
    }
    replay_nodes(ctx, x, snap);
}
