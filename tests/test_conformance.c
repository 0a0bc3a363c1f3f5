/*
 * test_conformance.c — the conformance suite: seeded random workloads run three ways and
 * compared bit for bit.
 *
 * A workload is a few hundred operations drawn from a seed: the four built-in kernels on random
 * windows, h2d copies from pinned memory, d2h copies into pinned memory, d2d copies, fills with
 * 1-, 2- and 4-byte patterns, and fork/joins across two streams. It runs (a) eagerly on the cpu
 * backend, the oracle; (b) eagerly on the device under test; (c) captured once on the device
 * under test and replayed, several times and again after the host rewrote the pinned input.
 * Every buffer's bytes and the pinned output are compared with memcmp across the three.
 *
 * The floats are arbitrary (random mantissas, not only exactly representable values): every
 * backend builds its kernels without contraction, so a*x+y rounds twice everywhere and the
 * results must agree exactly. The generator keeps values finite and normal (moderate scalars,
 * fill patterns whose bytes make normal floats, copies that move whole floats), so no backend's
 * treatment of NaN payloads or denormals is under test; the oracle checks that it did.
 *
 * Work on two streams never races: between a fork and its join, stream a touches only buffers
 * 0-2 and the first half of the pinned output, stream b only buffers 3-5 and the second half.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NBUF = 6, MAX_OPS = 512, MAX_FLOATS = 16384 };

typedef enum op_kind {
    OP_FILL_F32, /* kernels */
    OP_ADD,
    OP_AXPY,
    OP_COPY_F32,
    OP_H2D, /* pin_in -> buffer */
    OP_D2H, /* buffer -> pin_out */
    OP_D2D,
    OP_FILL, /* acg_fill with a 1-, 2- or 4-byte pattern */
    OP_FORK, /* b waits for a */
    OP_JOIN, /* a waits for b */
} op_kind;

typedef struct op {
    op_kind kind;
    int stream;        /* 0: a, 1: b */
    int dst, src;      /* buffer indices */
    size_t doff, soff; /* byte offsets (pinned offsets for h2d and d2h) */
    size_t size;       /* bytes for copies and fills */
    uint32_t n;        /* work items for kernels */
    float value;       /* kernel scalar */
    uint32_t pattern;  /* fill pattern */
    size_t pattern_size;
} op;

typedef struct workload {
    uint32_t seed;
    size_t bytes[NBUF]; /* buffer sizes, multiples of 4 */
    size_t pin_bytes;   /* pin_in holds pin_bytes, pin_out 2 * pin_bytes */
    op ops[MAX_OPS];
    size_t n_ops;
    size_t n_forks;
} workload;

/* ---- random numbers ----------------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t rnd(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* Uniform in [lo, hi]. */
static size_t rnd_range(rng *r, size_t lo, size_t hi) { return lo + rnd(r) % (hi - lo + 1); }

/* A float with a random sign (unless positive), a random 23-bit mantissa and an exponent in
 * [lo, hi]: arbitrary values, not only exactly representable ones. */
static float rnd_float(rng *r, int lo, int hi, bool positive) {
    uint32_t sign = positive ? 0 : rnd(r) & 1u;
    uint32_t e = (uint32_t)(127 + lo + (int)rnd_range(r, 0, (size_t)(hi - lo)));
    uint32_t bits = sign << 31 | e << 23 | (rnd(r) & 0x7fffffu);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Host data for buffers and pinned input. */
static void rnd_floats(float *dst, size_t n, uint32_t seed) {
    rng r = {seed * 0x2545f4914f6cdd1dull + 7};
    for (size_t i = 0; i < n; i++) {
        dst[i] = rnd_float(&r, -4, 4, false);
    }
}

/* ---- the generator ------------------------------------------------------------------------ */

/* A window of n floats in buffer bytes; returns its byte offset. */
static size_t rnd_window(rng *r, size_t bytes, uint32_t n) {
    return 4 * rnd_range(r, 0, bytes / 4 - n);
}

/* A number of work items, at most max_n (which is at least 64). The counts come from a short
 * list, odd and prime ones among them, because some OpenCL implementations (PoCL) compile a
 * kernel anew for every work-group size they pick, and they pick it from the count: arbitrary
 * counts would make a cold kernel cache compile hundreds of variants (half a minute). Offsets
 * stay arbitrary. */
static uint32_t gen_items(rng *r, size_t max_n) {
    static const uint32_t counts[] = {1,   2,    3,    17,   64,   100,   255,  256,
                                      257, 1000, 1024, 4093, 4096, 10007, 16384};
    size_t fit = 0;
    while (fit < sizeof counts / sizeof counts[0] && counts[fit] <= max_n) {
        fit++;
    }
    return counts[rnd_range(r, 0, fit - 1)];
}

/* A kernel operation on buffers of [first, first + count). */
static void gen_kernel(rng *r, const workload *w, op *o, int first, int count) {
    o->kind = (op_kind)(OP_FILL_F32 + rnd_range(r, 0, 3));
    o->dst = first + (int)rnd_range(r, 0, (size_t)count - 1);
    o->src = first + (int)rnd_range(r, 0, (size_t)count - 1);
    bool in_place = o->src == o->dst;
    if (in_place && o->kind == OP_COPY_F32) {
        o->src = first + (o->dst - first + 1) % count;
        in_place = false;
    }
    if (in_place && o->kind == OP_AXPY && rnd(r) % 4 != 0) {
        /* y = a*y + y shrinks y by up to 2^24 when a is near -1: keep it rare. */
        o->src = first + (o->dst - first + 1) % count;
        in_place = false;
    }
    size_t max_n = w->bytes[o->dst] / 4;
    if (o->kind != OP_FILL_F32 && w->bytes[o->src] / 4 < max_n) {
        max_n = w->bytes[o->src] / 4;
    }
    o->n = gen_items(r, max_n);
    o->doff = rnd_window(r, w->bytes[o->dst], o->n);
    o->soff = in_place ? o->doff : rnd_window(r, w->bytes[o->src], o->n);
    switch (o->kind) {
    case OP_FILL_F32:
        o->value = rnd_float(r, -4, 4, false);
        break;
    case OP_ADD:
        o->value = rnd_float(r, -4, 4, false);
        break;
    case OP_AXPY:
        o->value = rnd_float(r, -1, -1, false); /* |a| in [0.5, 1): y grows at most additively */
        break;
    default:
        break;
    }
}

/* A fill pattern of psize bytes whose bytes, wherever they land in a float, keep it finite and
 * normal: the byte or half-word that holds the exponent gets one of moderate size. */
static uint32_t gen_pattern(rng *r, size_t psize) {
    if (psize == 1) { /* 0bS.. with exponent (b & 0x7f) << 1 | b >> 7 in [100, 151] */
        return (uint32_t)(rnd_range(r, 50, 75) | (rnd(r) & 1u) << 7);
    }
    if (psize == 2) { /* the high half of a float: sign, exponent, 7 mantissa bits */
        uint32_t e = (uint32_t)rnd_range(r, 110, 140);
        return (rnd(r) & 1u) << 15 | e << 7 | (rnd(r) & 0x7fu);
    }
    float f = rnd_float(r, -4, 4, false);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

/* A copy or fill operation on buffers of [first, first + count); pinned output half `half`. */
static void gen_transfer(rng *r, const workload *w, op *o, int first, int count, int half) {
    o->kind = (op_kind)(OP_H2D + rnd_range(r, 0, 3));
    o->dst = first + (int)rnd_range(r, 0, (size_t)count - 1);
    o->src = first + (int)rnd_range(r, 0, (size_t)count - 1);
    switch (o->kind) {
    case OP_H2D: /* whole floats from pin_in */
        o->size = 4 * rnd_range(r, 1, w->bytes[o->dst] / 4);
        o->doff = 4 * rnd_range(r, 0, (w->bytes[o->dst] - o->size) / 4);
        o->soff = 4 * rnd_range(r, 0, (w->pin_bytes - o->size) / 4);
        break;
    case OP_D2H: /* whole floats into this stream's half of pin_out */
        o->size = 4 * rnd_range(r, 1, w->bytes[o->src] / 4);
        o->soff = 4 * rnd_range(r, 0, (w->bytes[o->src] - o->size) / 4);
        o->doff = (size_t)half * w->pin_bytes + 4 * rnd_range(r, 0, (w->pin_bytes - o->size) / 4);
        break;
    case OP_D2D:
        if (o->src == o->dst) { /* two disjoint halves of one buffer */
            size_t half_floats = w->bytes[o->dst] / 8;
            o->size = 4 * rnd_range(r, 1, half_floats);
            size_t lo = 4 * rnd_range(r, 0, half_floats - o->size / 4);
            size_t hi = 4 * (half_floats + rnd_range(r, 0, half_floats - o->size / 4));
            bool up = rnd(r) & 1u;
            o->soff = up ? lo : hi;
            o->doff = up ? hi : lo;
        } else {
            size_t max = w->bytes[o->dst] < w->bytes[o->src] ? w->bytes[o->dst] : w->bytes[o->src];
            o->size = 4 * rnd_range(r, 1, max / 4);
            o->doff = 4 * rnd_range(r, 0, (w->bytes[o->dst] - o->size) / 4);
            o->soff = 4 * rnd_range(r, 0, (w->bytes[o->src] - o->size) / 4);
        }
        break;
    default: { /* OP_FILL, at any multiple of the pattern size */
        static const size_t psizes[3] = {1, 2, 4};
        o->pattern_size = psizes[rnd_range(r, 0, 2)];
        size_t units = w->bytes[o->dst] / o->pattern_size;
        size_t n = rnd_range(r, 1, units);
        o->size = n * o->pattern_size;
        o->doff = o->pattern_size * rnd_range(r, 0, units - n);
        o->pattern = gen_pattern(r, o->pattern_size);
        break;
    }
    }
}

/* Draws the workload of `seed`: n_ops operations in segments, every other one between a fork
 * and a join. */
static void gen_workload(workload *w, uint32_t seed, size_t n_ops) {
    memset(w, 0, sizeof *w);
    rng r = {seed};
    w->seed = seed;
    for (int i = 0; i < NBUF; i++) {
        w->bytes[i] = 4 * rnd_range(&r, 64, MAX_FLOATS);
        if (w->bytes[i] > w->pin_bytes) {
            w->pin_bytes = w->bytes[i];
        }
    }
    bool forked = false;
    while (w->n_ops < n_ops) {
        op *o = &w->ops[w->n_ops];
        /* A fork at random (at the latest a third of the way, so every workload has one) with
         * room for work before its join, and a join at random, at the latest as the last
         * operation. */
        bool fork = !forked && w->n_ops > 0 && w->n_ops + 2 < n_ops &&
                    (rnd(&r) % 24 == 0 || (w->n_forks == 0 && w->n_ops >= n_ops / 3));
        bool join = forked && (rnd(&r) % 24 == 0 || w->n_ops + 1 == n_ops);
        if (fork || join) {
            o->kind = fork ? OP_FORK : OP_JOIN;
            w->n_forks += fork;
            forked = fork;
            w->n_ops++;
            continue;
        }
        /* Outside a fork everything runs on a and may touch anything. */
        o->stream = forked ? (int)(rnd(&r) & 1u) : 0;
        int first = forked && o->stream == 1 ? NBUF / 2 : 0;
        int count = forked ? NBUF / 2 : NBUF;
        int half = forked ? o->stream : (int)(rnd(&r) & 1u);
        if (rnd(&r) % 2 == 0) {
            gen_kernel(&r, w, o, first, count);
        } else {
            gen_transfer(&r, w, o, first, count, half);
        }
        w->n_ops++;
    }
}

/* ---- running a workload ------------------------------------------------------------------- */

/* What a workload runs on: one device's objects. */
typedef struct rig {
    tc_fixture t; /* the device, stream a and the built-in kernels */
    acg_stream *b;
    acg_event *fork, *join;
    acg_graph_pool *pool;
    acg_buffer *buf[NBUF];
    unsigned char *pin_in, *pin_out;
} rig;

/* The observable state after a run: every buffer and the pinned output. */
typedef struct snapshot {
    unsigned char *buf[NBUF];
    unsigned char *pin_out;
} snapshot;

/* The rig of workload w on the device `spec` opens. */
static rig *rig_open(const char *spec, const workload *w) {
    rig *g = tc_fixture_new_on(sizeof *g, spec);
    acg_device *dev = g->t.dev;
    g->b = tc_stream(dev);
    g->fork = tc_event(dev);
    g->join = tc_event(dev);
    g->pool = tc_pool(dev);
    for (int i = 0; i < NBUF; i++) {
        g->buf[i] = tc_buffer(dev, w->bytes[i]);
    }
    g->pin_in = tc_pinned(dev, w->pin_bytes);
    g->pin_out = tc_pinned(dev, 2 * w->pin_bytes);
    return g;
}

static void rig_close(rig *g) {
    for (int i = 0; i < NBUF; i++) {
        TC_OK(acg_buffer_free(g->buf[i]));
    }
    TC_OK(acg_pinned_free(g->pin_in));
    TC_OK(acg_pinned_free(g->pin_out));
    TC_OK(acg_graph_pool_destroy(g->pool));
    TC_OK(acg_event_destroy(g->fork));
    TC_OK(acg_event_destroy(g->join));
    TC_OK(acg_stream_destroy(g->b));
    tc_fixture_free(&g->t);
}

/* Makes `to` wait for what `from` queued so far, through e. */
static acg_status hand_over(acg_event *e, acg_stream *from, acg_stream *to) {
    acg_status st = acg_event_record(e, from);
    return st == ACG_OK ? acg_stream_wait_event(to, e) : st;
}

/* The state every run starts from: seeded buffers, pinned input from input_seed, a zeroed
 * pinned output. Waits until it is in place. */
static void rig_reset(rig *g, const workload *w, uint32_t input_seed) {
    static float host[MAX_FLOATS];
    for (int i = 0; i < NBUF; i++) {
        rnd_floats(host, w->bytes[i] / 4, w->seed * 31u + (uint32_t)i);
        TC_OK(acg_copy_h2d(g->t.s, g->buf[i], 0, host, w->bytes[i]));
    }
    TC_OK(acg_stream_synchronize(g->t.s));
    rnd_floats((float *)(void *)g->pin_in, w->pin_bytes / 4, input_seed);
    memset(g->pin_out, 0, 2 * w->pin_bytes);
}

/* Submits the workload to the rig's streams (captured when a captures). With `single`, every
 * operation goes to stream a and forks and joins are left out: the same result, serialized. */
static acg_status rig_submit(rig *g, const workload *w, bool single) {
    for (size_t i = 0; i < w->n_ops; i++) {
        const op *o = &w->ops[i];
        acg_stream *s = o->stream && !single ? g->b : g->t.s;
        acg_status st = ACG_OK;
        switch (o->kind) {
        case OP_FILL_F32:
            st = tc_fill(s, &g->t.k, g->buf[o->dst], o->doff, o->n, o->value);
            break;
        case OP_ADD:
            st = tc_add(s, &g->t.k, g->buf[o->dst], o->doff, g->buf[o->src], o->soff, o->n,
                        o->value);
            break;
        case OP_AXPY:
            st = tc_axpy(s, &g->t.k, g->buf[o->dst], o->doff, g->buf[o->src], o->soff, o->n,
                         o->value);
            break;
        case OP_COPY_F32:
            st = tc_copy(s, &g->t.k, g->buf[o->dst], o->doff, g->buf[o->src], o->soff, o->n);
            break;
        case OP_H2D:
            st = acg_copy_h2d(s, g->buf[o->dst], o->doff, g->pin_in + o->soff, o->size);
            break;
        case OP_D2H:
            st = acg_copy_d2h(s, g->pin_out + o->doff, g->buf[o->src], o->soff, o->size);
            break;
        case OP_D2D:
            st = acg_copy_d2d(s, g->buf[o->dst], o->doff, g->buf[o->src], o->soff, o->size);
            break;
        case OP_FILL:
            st = acg_fill(s, g->buf[o->dst], o->doff, o->size, o->pattern, o->pattern_size);
            break;
        case OP_FORK:
            st = single ? ACG_OK : hand_over(g->fork, g->t.s, g->b);
            break;
        case OP_JOIN:
            st = single ? ACG_OK : hand_over(g->join, g->b, g->t.s);
            break;
        }
        if (st != ACG_OK) {
            print_error("seed %u, operation %zu (kind %d): %s: %s\n", w->seed, i, (int)o->kind,
                        acg_status_name(st), acg_last_error());
            return st;
        }
    }
    return ACG_OK;
}

/* Waits for both streams and copies the observable state out. */
static void rig_snapshot(rig *g, const workload *w, snapshot *out) {
    TC_OK(acg_stream_synchronize(g->t.s));
    TC_OK(acg_stream_synchronize(g->b));
    for (int i = 0; i < NBUF; i++) {
        TC_OK(acg_copy_d2h(g->t.s, out->buf[i], g->buf[i], 0, w->bytes[i]));
    }
    memcpy(out->pin_out, g->pin_out, 2 * w->pin_bytes);
}

static void snapshot_alloc(snapshot *s, const workload *w) {
    for (int i = 0; i < NBUF; i++) {
        s->buf[i] = malloc(w->bytes[i]);
        assert_non_null(s->buf[i]);
    }
    s->pin_out = malloc(2 * w->pin_bytes);
    assert_non_null(s->pin_out);
}

static void snapshot_free(snapshot *s) {
    for (int i = 0; i < NBUF; i++) {
        free(s->buf[i]);
    }
    free(s->pin_out);
}

/* Every byte of got equals want; the message names the run, the buffer and the first
 * difference. */
static void snapshot_equal(const snapshot *want, const snapshot *got, const workload *w,
                           const char *run) {
    for (int i = 0; i < NBUF; i++) {
        if (memcmp(want->buf[i], got->buf[i], w->bytes[i]) != 0) {
            print_error("seed %u, %s: buffer %d differs from the cpu oracle\n", w->seed, run, i);
        }
        TC_BYTES_EQUAL(got->buf[i], want->buf[i], w->bytes[i]);
    }
    if (memcmp(want->pin_out, got->pin_out, 2 * w->pin_bytes) != 0) {
        print_error("seed %u, %s: the pinned output differs from the cpu oracle\n", w->seed, run);
    }
    TC_BYTES_EQUAL(got->pin_out, want->pin_out, 2 * w->pin_bytes);
}

/* The oracle's results are finite, normal or zero floats of moderate size, so the comparison
 * does not depend on how a backend treats NaN payloads, infinities or denormals. */
static void check_moderate(const snapshot *s, const workload *w) {
    for (int i = 0; i <= NBUF; i++) {
        const unsigned char *p = i < NBUF ? s->buf[i] : s->pin_out;
        size_t n = (i < NBUF ? w->bytes[i] : 2 * w->pin_bytes) / 4;
        for (size_t j = 0; j < n; j++) {
            uint32_t bits;
            memcpy(&bits, p + 4 * j, 4);
            uint32_t e = bits >> 23 & 0xffu;
            if ((bits & 0x7fffffffu) != 0 && (e < 127 - 60 || e > 127 + 60)) {
                fail_msg("seed %u: the workload made an extreme value 0x%08x (%s %d, float %zu); "
                         "the generator must keep values moderate",
                         w->seed, bits, i < NBUF ? "buffer" : "pinned output", i, j);
            }
        }
    }
}

/* ---- the cases ---------------------------------------------------------------------------- */

/* One workload three ways: (a) eager on the cpu oracle, (b) eager on the device under test,
 * (c) captured once on the device under test and replayed; then the pinned input is rewritten
 * in place and (a) and (c) are compared again, with (b) for good measure. Returns whether (c)
 * ran: not without graphs, nor without pinned memory to capture the copies from. */
static bool run_conformance(uint32_t seed, size_t n_ops) {
    static workload w;
    gen_workload(&w, seed, n_ops);
    assert_true(w.n_forks >= 1);

    snapshot oracle, got;
    snapshot_alloc(&oracle, &w);
    snapshot_alloc(&got, &w);
    rig *cpu = rig_open("cpu", &w), *dut = rig_open(tc_spec(), &w);
    const uint32_t inputs[2] = {seed + 1000u, seed + 2000u};

    /* (c) capture first, from the reset state, so the replays below follow eager runs. */
    acg_graph *graph = NULL;
    bool single = false;
    if (tc_has_graphs(dut->t.dev, dut->t.s)) {
        single = !tc_has_multi_stream_capture(dut->t.dev, dut->t.s, dut->b, dut->fork);
        if (!tc_has_pinned_memory(dut->t.dev)) {
            /* A captured copy from pageable memory invalidates the capture. */
            TC_OK(acg_stream_begin_capture(dut->t.s, dut->pool));
            TC_EXPECT(ERR_CAPTURE_INVALIDATED,
                      acg_copy_h2d(dut->t.s, dut->buf[0], 0, dut->pin_in, 4));
            TC_EXPECT(ERR_CAPTURE_INVALIDATED, acg_stream_end_capture(dut->t.s, &graph));
        } else {
            rig_reset(dut, &w, inputs[0]);
            TC_OK(acg_stream_begin_capture(dut->t.s, dut->pool));
            acg_status st = rig_submit(dut, &w, single);
            acg_status end = acg_stream_end_capture(dut->t.s, &graph);
            TC_OK(st);
            TC_OK(end);
            tc_expect_node_count(graph, w.n_ops - 2 * w.n_forks); /* events make no nodes */
        }
    }

    for (int in = 0; in < 2; in++) {
        /* (a) the oracle */
        rig_reset(cpu, &w, inputs[in]);
        TC_OK(rig_submit(cpu, &w, false));
        rig_snapshot(cpu, &w, &oracle);
        check_moderate(&oracle, &w);

        /* (b) eager on the device under test, over two streams */
        rig_reset(dut, &w, inputs[in]);
        TC_OK(rig_submit(dut, &w, false));
        rig_snapshot(dut, &w, &got);
        snapshot_equal(&oracle, &got, &w, in == 0 ? "eager" : "eager, second input");

        /* (c) replays of the one capture; with the second input the host rewrote pin_in in
         * place, and the replays read it as it is now. */
        for (int rep = 0; graph != NULL && rep < 3; rep++) {
            rig_reset(dut, &w, inputs[in]);
            TC_OK(acg_graph_launch(graph, rep == 1 ? dut->b : dut->t.s));
            rig_snapshot(dut, &w, &got);
            snapshot_equal(&oracle, &got, &w, in == 0 ? "replay" : "replay after input rewrite");
        }
    }

    const bool replayed = graph != NULL;
    TC_OK(acg_graph_destroy(graph));
    rig_close(dut);
    rig_close(cpu);
    snapshot_free(&oracle);
    snapshot_free(&got);
    print_message("seed %u: %zu operations, %zu fork/joins: eager%s equal%s the cpu oracle\n", seed,
                  w.n_ops, w.n_forks, replayed ? " and replay" : "", replayed ? "" : "s");
    return replayed;
}

/* A case whose replays could not run ends skipped: only its eager runs met the oracle. */
static void skip_unless_replayed(bool replayed) {
    if (!replayed) {
        tc_skip("no %s: eager runs compared with the cpu oracle, no replay",
                tc_cap()->graphs ? "pinned memory" : "graphs");
    }
}

static void test_workload_seed_1(void **state) {
    (void)state;
    skip_unless_replayed(run_conformance(1, 300));
}

static void test_workload_seed_2(void **state) {
    (void)state;
    skip_unless_replayed(run_conformance(2, 300));
}

static void test_workload_seed_3(void **state) {
    (void)state;
    skip_unless_replayed(run_conformance(3, 400));
}

static void test_workload_seed_4(void **state) {
    (void)state;
    skip_unless_replayed(run_conformance(4, MAX_OPS));
}

/* Short workloads, many of them: small graphs with few nodes are their own corner cases. */
static void test_workload_short(void **state) {
    (void)state;
    bool replayed = true;
    for (uint32_t seed = 100; seed < 108; seed++) {
        replayed = run_conformance(seed, 8 + seed % 8) && replayed;
    }
    skip_unless_replayed(replayed);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_workload_seed_1), cmocka_unit_test(test_workload_seed_2),
    cmocka_unit_test(test_workload_seed_3), cmocka_unit_test(test_workload_seed_4),
    cmocka_unit_test(test_workload_short),
};
TC_MAIN("test_conformance", tests)
