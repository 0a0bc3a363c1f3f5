/* decode_step.c — the shape of an engine's decode loop on acg: one step captured once and
 * replayed every step while its input (the token and its position) changes, in the two ways a
 * graph's input can change between replays, each checked against the same step run eagerly,
 * bit for bit:
 *
 *   A. the input travels through pinned memory: the step's first node is a captured copy from
 *      a pinned buffer the host rewrites before each replay, and the kernels read the input
 *      from device memory. A replay reads the pinned memory as it is then, on every device
 *      whose capability says graph_pinned_replay (discrete GPUs included).
 *   B. the input is a kernel's scalar arguments, changed in the instantiated graph before each
 *      replay with acg_graph_update_kernel_node, where the capability says graph_node_update.
 *
 * The step: h = table[token] + pos (a kernel of this program, registered as a set with its
 * shape said as data), then state += 0.5 * h (the core's axpy_f32), then state copied to
 * pinned memory for the host. Run it as `decode_step [device]` ("cpu" by default; its kernels
 * carry C and OpenCL C, so it runs on the cpu and opencl backends). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <acg/acg.h>

#define DIM 64
#define VOCAB 32
#define STEPS 8

#define CHECK(call)                                                                                \
    do {                                                                                           \
        acg_status st_ = (call);                                                                   \
        if (st_ != ACG_OK) {                                                                       \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, acg_status_name(st_),                   \
                    acg_last_error());                                                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* "embed_in" (h (dim), table (vocab, dim), in (2 x u32: token, pos); u32 dim, vocab) and
 * "embed_arg" (h, table; u32 token, pos, dim, vocab): h[i] = table[token][i] + pos, a token
 * past the vocabulary taken as its last. One work item per element of h. */
static void embed(float *h, const float *table, uint32_t token, uint32_t pos, uint32_t dim,
                  uint32_t vocab) {
    token = token < vocab ? token : vocab - 1;
    for (uint32_t i = 0; i < dim; i++) {
        h[i] = table[(size_t)token * dim + i] + (float)pos;
    }
}

static void embed_in_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    const uint32_t *in = a[2].p;
    embed(a[0].p, a[1].p, in[0], in[1], a[3].u32, a[4].u32);
}

static void embed_arg_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    embed(a[0].p, a[1].p, a[2].u32, a[3].u32, a[4].u32, a[5].u32);
}

/* OpenCL: each buffer is a global pointer and a ulong byte offset (acg_kernel_desc.opencl). */
static const char embed_cl[] =
    "#define AT(T, p, off) ((global T *)((global char *)(p) + (off)))\n"
    "static void embed(global float *h, global const float *table, uint token, uint pos,\n"
    "                  uint dim, uint vocab) {\n"
    "    size_t i = get_global_id(0);\n"
    "    token = token < vocab ? token : vocab - 1;\n"
    "    if (i < dim) {\n"
    "        h[i] = table[(size_t)token * dim + i] + (float)pos;\n"
    "    }\n"
    "}\n"
    "kernel void embed_in(global float *h, ulong h_off, global float *t, ulong t_off,\n"
    "                     global uint *in, ulong in_off, uint dim, uint vocab) {\n"
    "    global uint *v = AT(uint, in, in_off);\n"
    "    embed(AT(float, h, h_off), AT(float, t, t_off), v[0], v[1], dim, vocab);\n"
    "}\n"
    "kernel void embed_arg(global float *h, ulong h_off, global float *t, ulong t_off,\n"
    "                      uint token, uint pos, uint dim, uint vocab) {\n"
    "    embed(AT(float, h, h_off), AT(float, t, t_off), token, pos, dim, vocab);\n"
    "}\n";

/* The two definitions: their windows as data (h: 4 x dim bytes, table: 4 x vocab x dim, in: 8)
 * and a grid that must cover dim, so acg checks every launch without a callback. */
static void describe(acg_kernel_desc d[2]) {
    const acg_kernel_desc init = ACG_KERNEL_DESC_INIT;
    d[0] = d[1] = init;
    d[0].name = "embed_in";
    d[0].n_args = 5;
    d[0].types[0] = d[0].types[1] = d[0].types[2] = ACG_ARG_BUFFER;
    d[0].types[3] = d[0].types[4] = ACG_ARG_U32;
    d[0].reach[0] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ONE}};
    d[0].reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    d[0].reach[2] = (acg_kernel_reach){8, {ACG_BY_ONE, ACG_BY_ONE}};
    d[0].grid_covers[0] = ACG_BY_ARG(3);
    d[0].cpu.fn = embed_in_cpu;
    d[0].opencl.source = embed_cl;
    d[0].exactness = ACG_KERNEL_EXACT_EVERY_BACKEND;

    d[1] = d[0];
    d[1].name = "embed_arg";
    d[1].n_args = 6;
    d[1].types[2] = d[1].types[3] = d[1].types[4] = d[1].types[5] = ACG_ARG_U32;
    d[1].reach[2] = (acg_kernel_reach){0, {0, 0}};
    d[1].grid_covers[0] = ACG_BY_ARG(4);
    d[1].reach[0] = (acg_kernel_reach){4, {ACG_BY_ARG(4), ACG_BY_ONE}};
    d[1].reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(4), ACG_BY_ARG(5)}};
    d[1].cpu.fn = embed_arg_cpu;
}

/* Everything the program holds, so one function releases it. */
typedef struct program {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *embed_in, *embed_arg, *axpy;
    acg_buffer *table, *in, *h, *state[3]; /* state of path A, path B, eager */
    uint32_t *in_pinned;                   /* token, pos: path A's input */
    float *out_pinned[3];                  /* each path's state, copied out every step */
    acg_graph *a, *b;
} program;

/* The step, eager or captured: with `from_device`, h from the input buffer (path A's graph and
 * the eager run), else from scalar arguments. */
static acg_status step(program *p, int which, bool from_device, uint32_t token, uint32_t pos) {
    const acg_dims dims = acg_dims_1d(DIM);
    acg_status st = ACG_OK;
    if (from_device) {
        st = acg_copy_h2d(p->s, p->in, 0, p->in_pinned, 2 * sizeof(uint32_t));
        const acg_arg args[] = {acg_arg_buffer(p->h, 0), acg_arg_buffer(p->table, 0),
                                acg_arg_buffer(p->in, 0), acg_arg_u32(DIM), acg_arg_u32(VOCAB)};
        st = st != ACG_OK ? st : acg_kernel_launch(p->s, p->embed_in, &dims, args, 5);
    } else {
        const acg_arg args[] = {acg_arg_buffer(p->h, 0), acg_arg_buffer(p->table, 0),
                                acg_arg_u32(token),      acg_arg_u32(pos),
                                acg_arg_u32(DIM),        acg_arg_u32(VOCAB)};
        st = acg_kernel_launch(p->s, p->embed_arg, &dims, args, 6);
    }
    const acg_arg axpy[] = {acg_arg_buffer(p->state[which], 0), acg_arg_buffer(p->h, 0),
                            acg_arg_f32(0.5f)};
    st = st != ACG_OK ? st : acg_kernel_launch(p->s, p->axpy, &dims, axpy, 3);
    return st != ACG_OK ? st
                        : acg_copy_d2h(p->s, p->out_pinned[which], p->state[which], 0,
                                       DIM * sizeof(float));
}

/* Captures one step into *g. */
static acg_status capture(program *p, int which, bool from_device, acg_graph **g) {
    acg_status st = acg_stream_begin_capture(p->s, NULL);
    if (st == ACG_OK) {
        st = step(p, which, from_device, 0, 0);
        acg_status end = acg_stream_end_capture(p->s, g); /* ends even after a refusal */
        st = st != ACG_OK ? st : end;
    }
    return st;
}

/* The index of the graph's first launch of `kernel`: the node a per-node update changes. */
static acg_status find_node(const acg_graph *g, const char *kernel, size_t *index) {
    size_t n = 0;
    acg_status st = acg_graph_get_node_count(g, &n);
    for (size_t i = 0; i < n && st == ACG_OK; i++) {
        acg_node_info info;
        st = acg_graph_get_node(g, i, &info);
        if (st == ACG_OK && info.kind == ACG_NODE_KERNEL && strcmp(info.kernel, kernel) == 0) {
            *index = i;
            return ACG_OK;
        }
    }
    return st != ACG_OK ? st : ACG_ERR_NOT_FOUND;
}

/* Releases what p holds, in the order acg requires: graphs first (they hold buffers, pinned
 * memory and kernels), then memory and the stream, then the device, then the kernel set. */
static int release(program *p, int rc) {
    acg_status st = acg_graph_destroy(p->a);
    st = st != ACG_OK ? st : acg_graph_destroy(p->b);
    acg_buffer *bufs[] = {p->table, p->in, p->h, p->state[0], p->state[1], p->state[2]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        acg_status f = acg_buffer_free(bufs[i]);
        st = st != ACG_OK ? st : f;
    }
    acg_status f = acg_pinned_free(p->in_pinned);
    st = st != ACG_OK ? st : f;
    for (int i = 0; i < 3; i++) {
        f = acg_pinned_free(p->out_pinned[i]);
        st = st != ACG_OK ? st : f;
    }
    f = acg_stream_destroy(p->s);
    st = st != ACG_OK ? st : f;
    f = acg_device_close(p->dev);
    st = st != ACG_OK ? st : f;
    f = acg_kernel_unregister_set("decode_step");
    st = st != ACG_OK ? st : f;
    if (st != ACG_OK) {
        fprintf(stderr, "releasing: %s (%s)\n", acg_status_name(st), acg_last_error());
        return 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cpu";
    acg_kernel_desc defs[2];
    describe(defs);
    CHECK(acg_kernel_register_set("decode_step", defs, 2));
    program p;
    memset(&p, 0, sizeof p);
    acg_status opened = acg_device_open(spec, &p.dev);
    if (opened != ACG_OK) {
        fprintf(stderr, "opening %s: %s (%s)\n", spec, acg_status_name(opened), acg_last_error());
        return release(&p, 1);
    }
    const acg_capability *cap = acg_device_get_capability(p.dev);
    printf("device %s (%s)\n", acg_device_get_spec(p.dev), cap->name);
    int rc = 1;
    acg_status st = acg_stream_create(p.dev, &p.s);
    st = st != ACG_OK ? st : acg_kernel_get(p.dev, "decode_step/embed_in", &p.embed_in);
    st = st != ACG_OK ? st : acg_kernel_get(p.dev, "decode_step/embed_arg", &p.embed_arg);
    st = st != ACG_OK ? st : acg_kernel_get(p.dev, "axpy_f32", &p.axpy);
    st = st != ACG_OK ? st : acg_buffer_alloc(p.dev, VOCAB * DIM * sizeof(float), &p.table);
    st = st != ACG_OK ? st : acg_buffer_alloc(p.dev, 2 * sizeof(uint32_t), &p.in);
    st = st != ACG_OK ? st : acg_buffer_alloc(p.dev, DIM * sizeof(float), &p.h);
    st = st != ACG_OK ? st : acg_pinned_alloc(p.dev, 2 * sizeof(uint32_t), (void **)&p.in_pinned);
    for (int i = 0; i < 3 && st == ACG_OK; i++) {
        st = acg_buffer_alloc(p.dev, DIM * sizeof(float), &p.state[i]);
        st = st != ACG_OK ? st : acg_fill(p.s, p.state[i], 0, DIM * sizeof(float), 0, 4);
        st = st != ACG_OK ? st
                          : acg_pinned_alloc(p.dev, DIM * sizeof(float), (void **)&p.out_pinned[i]);
    }
    float table[VOCAB * DIM];
    for (int i = 0; i < VOCAB * DIM; i++) {
        table[i] = (float)(i % 97) / 8.0f; /* small dyadic values: every sum is exact */
    }
    st = st != ACG_OK ? st : acg_copy_h2d(p.s, p.table, 0, table, sizeof table);
    if (st != ACG_OK) {
        fprintf(stderr, "setting up: %s (%s)\n", acg_status_name(st), acg_last_error());
        return release(&p, 1);
    }
    const bool path_a = cap->graphs && cap->graph_pinned_replay;
    const bool path_b = cap->graphs && cap->graph_node_update;
    printf("A (pinned input, captured copy): %s\n",
           path_a ? "yes" : "no: the device's graphs do not read pinned memory at replay");
    printf("B (per-node update): %s\n",
           path_b ? "yes" : "no: the device cannot update a graph's nodes (capture again)");
    size_t node = 0;
    st = path_a ? capture(&p, 0, true, &p.a) : ACG_OK;
    st = st != ACG_OK || !path_b ? st : capture(&p, 1, false, &p.b);
    st = st != ACG_OK || !path_b ? st : find_node(p.b, "decode_step/embed_arg", &node);
    if (st != ACG_OK) {
        fprintf(stderr, "capturing: %s (%s)\n", acg_status_name(st), acg_last_error());
        return release(&p, 1);
    }
    static const uint32_t tokens[STEPS] = {3, 17, 17, 40, 0, 31, 5, 9}; /* 40: past VOCAB */
    for (uint32_t t = 0; t < STEPS; t++) {
        /* The eager step: the reference (the host waits for it: the input is rewritten next). */
        p.in_pinned[0] = tokens[t];
        p.in_pinned[1] = t;
        st = step(&p, 2, true, 0, 0);
        st = st != ACG_OK ? st : acg_stream_synchronize(p.s);
        if (path_a && st == ACG_OK) {
            st = acg_graph_launch(p.a, p.s); /* reads in_pinned as the host just wrote it */
            st = st != ACG_OK ? st : acg_stream_synchronize(p.s);
        }
        if (path_b && st == ACG_OK) {
            const acg_arg args[] = {acg_arg_buffer(p.h, 0), acg_arg_buffer(p.table, 0),
                                    acg_arg_u32(tokens[t]), acg_arg_u32(t),
                                    acg_arg_u32(DIM),       acg_arg_u32(VOCAB)};
            st = acg_graph_update_kernel_node(p.b, node, NULL, args, 6);
            st = st != ACG_OK ? st : acg_graph_launch(p.b, p.s);
            st = st != ACG_OK ? st : acg_stream_synchronize(p.s);
        }
        if (st != ACG_OK) {
            fprintf(stderr, "step %u: %s (%s)\n", t, acg_status_name(st), acg_last_error());
            return release(&p, 1);
        }
        for (int which = 0; which < 2; which++) {
            if ((which == 0 ? path_a : path_b) &&
                memcmp(p.out_pinned[which], p.out_pinned[2], DIM * sizeof(float)) != 0) {
                fprintf(stderr, "step %u: path %c differs from the eager step\n", t, 'A' + which);
                return release(&p, 1);
            }
        }
        printf("step %u: token %2u, state[0] = %8.4f, state[%d] = %8.4f\n", t, tokens[t],
               (double)p.out_pinned[2][0], DIM - 1, (double)p.out_pinned[2][DIM - 1]);
    }
    printf("%d steps: every replay equal to the eager step, bit for bit\n", STEPS);
    rc = 0;
    return release(&p, rc);
}
