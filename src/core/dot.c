/* dot.c — a graph's ledger as Graphviz DOT (acg_graph_write_dot).
 *
 * The text is built in memory under the device's lock, which acg_graph_update takes to swap a
 * graph's description, and written to the caller's FILE once the lock is released, so a slow
 * reader (a pipe into dot) never holds up the device. Nothing here prints an address or a time:
 * the same graph gives the same bytes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h"

#define KNOWN_FLAGS ACG_DOT_BUFFERS

/* How a node touches a buffer: bits of acg_access_mode, or USES where the ledger cannot say. */
enum { MODE_READ = ACG_ACCESS_READ, MODE_WRITE = ACG_ACCESS_WRITE, MODE_USES = 4 };

/* ---- text ----------------------------------------------------------------------------------- */

/* A growing string. After a failed allocation it stays as it was and takes nothing more. */
typedef struct text {
    char *p;
    size_t n, cap; /* n excludes the terminating NUL that p always holds once allocated */
    bool failed;
} text;

static bool text_reserve(text *t, size_t more) {
    if (t->failed) {
        return false;
    }
    if (more < t->cap - t->n) {
        return true;
    }
    size_t cap = t->cap ? t->cap : 4096;
    while (cap - t->n <= more) {
        if (cap > SIZE_MAX / 2) {
            t->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = acg__alloc(cap);
    if (p == NULL) {
        t->failed = true;
        return false;
    }
    if (t->n != 0) {
        memcpy(p, t->p, t->n);
    }
    p[t->n] = '\0';
    acg__free(t->p);
    t->p = p;
    t->cap = cap;
    return true;
}

static void text_put(text *t, const char *s, size_t len) {
    if (text_reserve(t, len)) {
        memcpy(t->p + t->n, s, len);
        t->n += len;
        t->p[t->n] = '\0';
    }
}

static void text_str(text *t, const char *s) { text_put(t, s, strlen(s)); }

static void text_printf(text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void text_printf(text *t, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (len < 0) {
        t->failed = true;
        return;
    }
    if ((size_t)len < sizeof small) {
        text_put(t, small, (size_t)len);
        return;
    }
    if (text_reserve(t, (size_t)len)) {
        va_start(ap, fmt);
        vsnprintf(t->p + t->n, (size_t)len + 1, fmt, ap);
        va_end(ap);
        t->n += (size_t)len;
    }
}

/* The length of the well-formed UTF-8 sequence at s (shortest form, no surrogates, at most
 * U+10FFFF), or 0 when s does not start one. */
static size_t utf8_length(const unsigned char *s) {
    unsigned char c = s[0];
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (c < 0xc2 || c > 0xf4) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0; /* also stops at the terminating NUL */
        }
    }
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] >= 0x90)) {
        return 0;
    }
    return n;
}

/* Appends s for the inside of a DOT quoted string: a quote and a backslash escaped (a label
 * reads "\\" as one backslash, which also keeps "\n" in a name from becoming a line break),
 * control characters and bytes that are not UTF-8 (dot refuses them) as '?'. */
static void text_escaped(text *t, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    while (*u != '\0') {
        size_t n = 1;
        if (*u == '"' || *u == '\\') {
            char e[2] = {'\\', (char)*u};
            text_put(t, e, 2);
        } else if (*u < 0x20 || *u == 0x7f) {
            text_str(t, "?");
        } else if (*u < 0x80) {
            text_put(t, (const char *)u, 1);
        } else if ((n = utf8_length(u)) != 0) {
            text_put(t, (const char *)u, n);
        } else {
            text_str(t, "?");
            n = 1;
        }
        u += n;
    }
}

/* "16384 B (16.0 KiB)": exact, with a human scale from 1 KiB. */
static void text_bytes(text *t, size_t bytes) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    text_printf(t, "%zu B", bytes);
    if (bytes < 1024) {
        return;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    text_printf(t, " (%.1f %s)", v, units[u]);
}

/* ---- the ledger ----------------------------------------------------------------------------- */

/* The buffers of a description, numbered in order of first appearance (node order, then each
 * node's buffer order), found through an open-addressed table keyed by handle. */
typedef struct buffer_map {
    const acg_buffer **keys; /* (cap) */
    uint32_t *index;         /* (cap) number of keys[i] */
    const acg_buffer **list; /* (n) in number order */
    size_t cap, n;
} buffer_map;

static size_t buffer_slot(const buffer_map *m, const acg_buffer *b) {
    uintptr_t h = (uintptr_t)b;
    h ^= h >> 17;
    h *= (uintptr_t)0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h ^ (h >> 29)) & (m->cap - 1);
    while (m->keys[i] != NULL && m->keys[i] != b) {
        i = (i + 1) & (m->cap - 1);
    }
    return i;
}

static acg_status buffer_map_build(buffer_map *m, const acg__graph_desc *d, const char *fn) {
    size_t refs = 0;
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        refs += d->nodes[i].n_buffers;
    }
    m->cap = 16;
    while (m->cap < 2 * refs) {
        m->cap *= 2;
    }
    m->keys = acg__calloc(m->cap, sizeof *m->keys);
    m->index = acg__calloc(m->cap, sizeof *m->index);
    m->list = acg__calloc(refs ? refs : 1, sizeof *m->list);
    if (m->keys == NULL || m->index == NULL || m->list == NULL) {
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu buffer references", fn,
                          refs);
    }
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        const acg__node *n = &d->nodes[i];
        for (uint32_t j = 0; j < n->n_buffers; j++) {
            size_t s = buffer_slot(m, n->buffers[j]);
            if (m->keys[s] == NULL) {
                m->keys[s] = n->buffers[j];
                m->index[s] = (uint32_t)m->n;
                m->list[m->n++] = n->buffers[j];
            }
        }
    }
    return ACG_OK;
}

static void buffer_map_free(buffer_map *m) {
    acg__free(m->keys);
    acg__free(m->index);
    acg__free(m->list);
}

/* How node n touches buffers[j]: the direction of a copy follows from its kind, a host
 * function's or foreign work's from what it declared; a kernel's definition does not say. */
static unsigned buffer_mode(const acg__node *n, uint32_t j) {
    switch (n->kind) {
    case ACG_NODE_COPY_H2D:
    case ACG_NODE_FILL:
        return MODE_WRITE;
    case ACG_NODE_COPY_D2H:
        return MODE_READ;
    case ACG_NODE_COPY_D2D: /* buffers = {dst, src} */
        return j == 0 ? MODE_WRITE : MODE_READ;
    case ACG_NODE_COLLECTIVE:
        return MODE_READ | MODE_WRITE;
    case ACG_NODE_LOOP: /* its condition */
        return MODE_READ;
    case ACG_NODE_HOST:
    case ACG_NODE_FOREIGN: {
        unsigned m =
            ((n->reads >> j) & 1u ? MODE_READ : 0) | ((n->writes >> j) & 1u ? MODE_WRITE : 0);
        return m != 0 ? m : MODE_USES;
    }
    case ACG_NODE_KERNEL:
        break;
    }
    return MODE_USES;
}

/* ---- the picture ---------------------------------------------------------------------------- */

static const char *kind_fill(acg_node_kind kind) {
    switch (kind) {
    case ACG_NODE_KERNEL:
        return "#d6eaf8";
    case ACG_NODE_COPY_H2D:
    case ACG_NODE_COPY_D2H:
    case ACG_NODE_COPY_D2D:
        return "#d5f5e3";
    case ACG_NODE_FILL:
        return "#fcf3cf";
    case ACG_NODE_HOST:
        return "#fdebd0";
    case ACG_NODE_FOREIGN:
        return "#e8daef";
    case ACG_NODE_COLLECTIVE:
        return "#fadbd8";
    case ACG_NODE_LOOP:
        return "#d0ece7";
    }
    return "#ffffff";
}

/* "4096" or "64x32": the sizes of the dimensions the kernel indexes. */
static void text_sizes(text *t, const uint32_t v[3], uint32_t dims) {
    for (uint32_t d = 0; d < dims; d++) {
        text_printf(t, d == 0 ? "%u" : "x%u", v[d] != 0 ? v[d] : 1u);
    }
}

static void write_node(text *t, const acg__node *n, uint32_t index) {
    text_printf(t, "    n%u [fillcolor=\"%s\", label=\"#%u ", index, kind_fill(n->kind), index);
    switch (n->kind) {
    case ACG_NODE_KERNEL: {
        uint32_t dims = n->def->d.dims >= 1 && n->def->d.dims <= 3 ? n->def->d.dims : 3;
        text_str(t, "kernel ");
        text_escaped(t, n->def->name);
        text_str(t, "\\nglobal ");
        text_sizes(t, n->dims.global, dims);
        if (n->dims.local[0] == 0 && n->dims.local[1] == 0 && n->dims.local[2] == 0) {
            text_str(t, ", local auto");
        } else {
            text_str(t, ", local ");
            text_sizes(t, n->dims.local, dims);
        }
        break;
    }
    case ACG_NODE_COPY_H2D:
    case ACG_NODE_COPY_D2H:
    case ACG_NODE_COPY_D2D:
        text_printf(t, "copy %s\\n",
                    n->kind == ACG_NODE_COPY_H2D   ? "h2d"
                    : n->kind == ACG_NODE_COPY_D2H ? "d2h"
                                                   : "d2d");
        text_bytes(t, n->size);
        break;
    case ACG_NODE_FILL:
        text_str(t, "fill\\n");
        text_bytes(t, n->size);
        text_printf(t, ", pattern 0x%0*x", (int)(2 * n->pattern_size), (unsigned)n->pattern);
        break;
    case ACG_NODE_HOST:
        text_str(t, "host function");
        break;
    case ACG_NODE_FOREIGN:
        text_str(t, "foreign ");
        text_escaped(t, n->label);
        break;
    case ACG_NODE_COLLECTIVE:
        text_printf(t, "allreduce\\n%zu floats, ", n->size / sizeof(float));
        text_bytes(t, n->size);
        break;
    case ACG_NODE_LOOP:
        text_printf(t, "loop\\n%u node%s, at most %u run%s", n->loop_body,
                    n->loop_body == 1 ? "" : "s", n->loop_max, n->loop_max == 1 ? "" : "s");
        break;
    }
    text_str(t, "\"];\n");
}

/* Nodes [from, to) of stream s; a loop's body (its stream's) as a cluster inside. */
static void write_range(text *t, const acg__graph_desc *d, uint64_t s, uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; i++) {
        const acg__node *n = &d->nodes[i];
        if (n->stream != s) {
            continue;
        }
        write_node(t, n, i);
        if (n->kind == ACG_NODE_LOOP) {
            text_printf(t, "    subgraph cluster_loop_%u {\n", i);
            text_printf(
                t, "    label=\"body of loop #%u: runs again while its condition is set\";\n", i);
            text_str(t, "    style=rounded;\n    color=\"#16a085\";\n");
            write_range(t, d, s, i + 1, i + 1 + n->loop_body);
            text_str(t, "    }\n");
            i += n->loop_body;
        }
    }
}

/* The lowest stream index that recorded a node, above `above` unless `any`; UINT64_MAX when
 * there is none. A description has few streams, so a scan per stream is cheap. */
static uint64_t next_stream(const acg__graph_desc *d, bool any, uint64_t above) {
    uint64_t next = UINT64_MAX;
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        uint64_t s = d->nodes[i].stream;
        if ((any || s > above) && s < next) {
            next = s;
        }
    }
    return next;
}

static uint32_t count_streams(const acg__graph_desc *d) {
    uint32_t n = 0;
    for (uint64_t s = next_stream(d, true, 0); s != UINT64_MAX; s = next_stream(d, false, s)) {
        n++;
    }
    return n;
}

/* Each stream that recorded nodes as a cluster, in stream order, its nodes in node order. */
static void write_streams(text *t, const acg__graph_desc *d) {
    for (uint64_t s = next_stream(d, true, 0); s != UINT64_MAX; s = next_stream(d, false, s)) {
        text_printf(t, "  subgraph cluster_stream_%llu {\n", (unsigned long long)s);
        text_printf(t, "    label=\"stream %llu%s\";\n", (unsigned long long)s,
                    s == 0 ? " (origin)" : "");
        text_str(t, "    style=\"rounded,dashed\";\n    color=\"#7f8c8d\";\n");
        write_range(t, d, s, 0, d->n_nodes);
        text_str(t, "  }\n");
    }
}

static void write_buffer(text *t, const acg_buffer *b, size_t index) {
    text_printf(t, "  b%zu [label=\"buffer %zu\\n", index, index);
    text_bytes(t, b->size);
    if (b->scratch) {
        text_str(t, "\\ngraph scratch");
    } else if (b->parent != NULL) {
        text_printf(t, "\\nview at +%zu", b->offset - b->parent->offset);
    }
    if (b->owner_what != NULL) {
        text_str(t, "\\n");
        text_escaped(t, b->owner_what);
    }
    text_str(t, "\"];\n");
}

/* Per node, one edge for each buffer it touches, its modes merged over its references. */
static void write_buffer_edges(text *t, const acg__graph_desc *d, const buffer_map *m) {
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        const acg__node *n = &d->nodes[i];
        for (uint32_t j = 0; j < n->n_buffers; j++) {
            bool seen = false;
            for (uint32_t k = 0; k < j && !seen; k++) {
                seen = n->buffers[k] == n->buffers[j];
            }
            if (seen) {
                continue;
            }
            unsigned mode = 0;
            for (uint32_t k = j; k < n->n_buffers; k++) {
                mode |= n->buffers[k] == n->buffers[j] ? buffer_mode(n, k) : 0;
            }
            uint32_t b = m->index[buffer_slot(m, n->buffers[j])];
            if (mode & MODE_USES) {
                text_printf(t, "  n%u -> b%u [dir=none, style=dotted, label=\"uses\"];\n", i, b);
            } else if (mode == (MODE_READ | MODE_WRITE)) {
                text_printf(t, "  n%u -> b%u [dir=both, label=\"read/write\"];\n", i, b);
            } else if (mode == MODE_WRITE) {
                text_printf(t, "  n%u -> b%u [label=\"write\"];\n", i, b);
            } else {
                text_printf(t, "  b%u -> n%u [label=\"read\"];\n", b, i);
            }
        }
    }
}

/* The whole text (dev->lock held: the description is not swapped meanwhile). */
static acg_status build(const acg_graph *g, uint32_t flags, text *t, const char *fn) {
    const acg__graph_desc *d = &g->desc;
    const acg_device *dev = g->dev;
    buffer_map m = {0};
    acg_status st = ACG_OK;
    if ((flags & ACG_DOT_BUFFERS) && (st = buffer_map_build(&m, d, fn)) != ACG_OK) {
        goto out_free_map;
    }
    uint32_t n_streams = count_streams(d);
    text_printf(t, "digraph acg_graph_%llu {\n", (unsigned long long)g->id);
    text_printf(t,
                "  graph [labelloc=t, fontname=\"Helvetica\", fontsize=12, label=\"acg graph %llu "
                "on ",
                (unsigned long long)g->id);
    text_escaped(t, dev->spec);
    text_str(t, " (");
    text_escaped(t, dev->cap.name);
    text_printf(t, "): %u node%s, %u stream%s", d->n_nodes, d->n_nodes == 1 ? "" : "s", n_streams,
                n_streams == 1 ? "" : "s");
    if (flags & ACG_DOT_BUFFERS) {
        text_printf(t, ", %zu buffer%s", m.n, m.n == 1 ? "" : "s");
    }
    text_str(t, "\\nsolid edges: stream order; dashed: event waits across streams\"];\n");
    text_str(t,
             "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
             "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    write_streams(t, d);
    if (flags & ACG_DOT_BUFFERS) {
        text_str(t, "  node [shape=cylinder, style=filled, fillcolor=\"#eaeded\"];\n"
                    "  edge [color=\"#7f8c8d\", fontcolor=\"#7f8c8d\"];\n");
        for (size_t i = 0; i < m.n; i++) {
            write_buffer(t, m.list[i], i);
        }
        write_buffer_edges(t, d, &m);
        text_str(t, "  edge [color=black, fontcolor=black];\n");
    }
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        const acg__node *n = &d->nodes[i];
        for (uint32_t k = 0; k < n->n_deps; k++) {
            uint32_t dep = d->deps[n->deps_begin + k];
            if (d->nodes[dep].stream == n->stream) {
                text_printf(t, "  n%u -> n%u;\n", dep, i);
            } else {
                text_printf(t, "  n%u -> n%u [style=dashed, color=\"#c0392b\"];\n", dep, i);
            }
        }
    }
    text_str(t, "}\n");
    if (t->failed) {
        st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory for the text of graph %llu", fn,
                        (unsigned long long)g->id);
    }
out_free_map:
    buffer_map_free(&m);
    return st;
}

acg_status acg_graph_write_dot(const acg_graph *graph, FILE *out, uint32_t flags) {
    ACG__CALL_SCOPE;
    static const char fn[] = "acg_graph_write_dot";
    ACG__TRY(acg__check_live(graph, ACG__HANDLE_GRAPH, "graph", "graph", fn));
    ACG__TRY(acg__check_arg(out, "out", fn));
    if ((flags & ~(uint32_t)KNOWN_FLAGS) != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x (known: 0x%x)", fn,
                          flags & ~(uint32_t)KNOWN_FLAGS, (unsigned)KNOWN_FLAGS);
    }
    text t = {0};
    pthread_mutex_lock(&graph->dev->lock);
    acg_status st = build(graph, flags, &t, fn);
    pthread_mutex_unlock(&graph->dev->lock);
    if (st != ACG_OK) {
        goto out_free_text;
    }
    /* A short count is not the only sign: a buffered stream may take the text and fail to
     * pass part of it on, which only its error indicator tells (when it was clear before). */
    bool had_error = ferror(out) != 0;
    errno = 0;
    size_t written = fwrite(t.p, 1, t.n, out);
    if (written != t.n || (!had_error && ferror(out))) {
        int e = errno;
        st = acg__error(ACG_ERR_IO, "%s: writing the DOT text (%zu bytes) failed: %s", fn, t.n,
                        e != 0 ? strerror(e) : "the stream reports an error");
        goto out_free_text;
    }
    errno = 0;
    if (fflush(out) != 0) {
        int e = errno;
        st = acg__error(ACG_ERR_IO, "%s: flushing the DOT text (%zu bytes) failed: %s", fn, t.n,
                        e != 0 ? strerror(e) : "the stream reports an error");
    }
out_free_text:
    acg__free(t.p);
    return st;
}
