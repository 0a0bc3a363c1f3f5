/* test_dot.c — acg_graph_write_dot: a captured graph's ledger as Graphviz DOT. Every node with
 * its label, stream clusters, dependency edges (stream order solid, event waits dashed),
 * buffers with read/write edges under ACG_DOT_BUFFERS, escaping of awkward names, the same
 * bytes twice, every error path, and, when Graphviz is installed, `dot` accepting the text. */
#include "common.h"

#include "core/export/acg-layer.h" /* ACG__TRY */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

enum { N = 4096 };
#define NB ((size_t)N * sizeof(float))

/* ---- helpers ------------------------------------------------------------------------------- */

/* The DOT of graph with flags, as a NUL-terminated string the caller frees. */
static char *dot_of(const acg_graph *g, uint32_t flags) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    TC_OK(acg_graph_write_dot(g, f, flags));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(strlen(text), size);
    return text;
}

/* Asserts that text contains needle; prints both when it does not. */
#define HAS(text, needle) has_((text), (needle), true, __FILE__, __LINE__)
#define LACKS(text, needle) has_((text), (needle), false, __FILE__, __LINE__)
static void has_(const char *text, const char *needle, bool want, const char *file, int line) {
    if (tc_contains(text, needle) != want) {
        print_error("the DOT %s \"%s\":\n%s\n", want ? "lacks" : "holds", needle, text);
        _fail(file, line);
    }
}

/* The body of cluster `name` (from its opening line to its closing brace), a static copy. */
static const char *cluster(const char *text, const char *name) {
    static char body[8192];
    char open[96];
    snprintf(open, sizeof open, "  subgraph %s {\n", name);
    const char *start = strstr(text, open);
    if (start == NULL) {
        print_error("no %s in:\n%s\n", name, text);
        fail();
    }
    const char *end = strstr(start, "\n  }\n");
    assert_non_null(end);
    size_t n = (size_t)(end - start);
    assert_true(n < sizeof body);
    memcpy(body, start, n);
    body[n] = '\0';
    return body;
}

/* How many times needle occurs in text. */
static size_t count(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static bool have_dot(void) { return system("command -v dot >/dev/null 2>&1") == 0; }

/* Renders text with `dot -Tsvg`, asserts that dot exits 0, and returns the SVG (caller frees),
 * or NULL, saying so, when Graphviz is not installed. */
static char *render_svg(const char *text) {
    if (!have_dot()) {
        print_message("dot (Graphviz) is not installed: the DOT is not rendered "
                      "(scripts/install-deps.sh installs it)\n");
        return NULL;
    }
    assert_int_equal(tc_tmpdir_create("acg-test-dot"), 0);
    char dot_path[512], svg_path[512], cmd[1200];
    snprintf(dot_path, sizeof dot_path, "%s", tc_tmp_path("g.dot"));
    snprintf(svg_path, sizeof svg_path, "%s", tc_tmp_path("g.svg"));
    FILE *f = fopen(dot_path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "dot -Tsvg -o '%s' '%s'", svg_path, dot_path);
    int rc = system(cmd);
    if (rc != 0) {
        print_error("`%s` returned %d for:\n%s\n", cmd, rc, text);
        fail();
    }
    f = fopen(svg_path, "r");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    char *svg = calloc(1, (size_t)size + 1);
    assert_non_null(svg);
    assert_int_equal(fread(svg, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    assert_int_equal(tc_tmpdir_remove(), 0);
    return svg;
}

/* Where Graphviz is installed, dot accepts text (render_svg) and the SVG holds each string of
 * the list that follows, which NULL ends: expect_dot_renders(text, NULL) checks only that dot
 * accepts it. */
static void expect_dot_renders(const char *text, ...) {
    char *svg = render_svg(text);
    if (svg == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, text);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *)) {
        HAS(svg, s);
    }
    va_end(ap);
    free(svg);
}

/* ---- the graph under test ------------------------------------------------------------------ */

typedef struct fx {
    tc_fixture t; /* the device under test, its stream a (t.s), the built-in kernels */
    acg_stream *b;
    acg_event *e1, *e2;
    acg_buffer *x, *y, *z, *w; /* N floats each */
    bool forked;               /* b forked into the capture (else all of it is on a) */
    bool host;                 /* the graph holds a host function */
    uint32_t axpy;             /* the last node's index */
    acg_graph *g;
} fx;

static void host_noop(void *user) { (void)user; }

/* What the graph under test captures (a tc_work_fn on f->t.s and f->b; ctx the fx). a:
 * fill_f32(x) with local 64; b (forked at e1): add_scalar_f32(y = x + 2), acg_fill(z); a: copy
 * d2d (w <- x); a joins b at e2; a: a host function reading y and writing and reading z (where
 * graphs call host functions); a: axpy_f32(w += 0.5 y). */
static acg_status work(void *ctx, acg_stream *a, acg_stream *b) {
    fx *f = ctx;
    acg_stream *side = f->forked ? b : a;
    acg_dims dims = {{N, 1, 1}, {64, 0, 0}};
    acg_arg fill_args[2] = {acg_arg_buffer(f->x, 0), acg_arg_f32(1.0f)};
    acg_access acc[3] = {{f->y, 0, 0, ACG_ACCESS_READ},
                         {f->z, 0, 0, ACG_ACCESS_WRITE},
                         {f->z, 0, 0, ACG_ACCESS_READ}};
    ACG__TRY(acg_kernel_launch(a, f->t.k.fill, &dims, fill_args, 2));
    if (f->forked) {
        ACG__TRY(acg_event_record(f->e1, a));
        ACG__TRY(acg_stream_wait_event(b, f->e1));
    }
    ACG__TRY(tc_add(side, &f->t.k, f->y, 0, f->x, 0, N, 2.0f));
    ACG__TRY(acg_fill(side, f->z, 0, NB, 0xab, 1));
    if (f->forked) {
        ACG__TRY(acg_event_record(f->e2, b));
    }
    ACG__TRY(acg_copy_d2d(a, f->w, 0, f->x, 0, NB));
    if (f->forked) {
        ACG__TRY(acg_stream_wait_event(a, f->e2));
    }
    if (f->host) {
        ACG__TRY(acg_stream_launch_host(a, host_noop, NULL, acc, 3));
    }
    return tc_axpy(a, &f->t.k, f->w, 0, f->y, 0, N, 0.5f);
}

static int setup(void **state) {
    fx *f = tc_fixture_new(sizeof *f);
    f->b = tc_stream(f->t.dev);
    f->e1 = tc_event(f->t.dev);
    f->e2 = tc_event(f->t.dev);
    f->x = tc_buffer(f->t.dev, NB);
    f->y = tc_buffer(f->t.dev, NB);
    f->z = tc_buffer(f->t.dev, NB);
    f->w = tc_buffer(f->t.dev, NB);
    f->forked = tc_cap()->multi_stream_capture;
    f->host = tc_cap()->graph_host_functions;
    f->axpy = f->host ? 5 : 4;
    if (tc_cap()->graphs) {
        TC_OK(tc_capture(work, f, f->t.s, f->b, NULL, &f->g));
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_graph_destroy(f->g));
    TC_FREE_BUFFERS(f->x, f->y, f->z, f->w);
    TC_OK(acg_event_destroy(f->e1));
    TC_OK(acg_event_destroy(f->e2));
    TC_OK(acg_stream_destroy(f->b));
    return tc_fixture_teardown(state);
}

/* A case that needs graphs checks on a device without them that it refuses them, and ends
 * there, skipped. */
#define NEED_GRAPHS(f) tc_need_graphs((f)->t.dev, (f)->t.s)

/* ---- cases ----------------------------------------------------------------------------------- */

/* Every node is there, named n<index> as acg_graph_get_node numbers them, with its kind, name,
 * grid or bytes; the title names the graph's device and counts its nodes and streams. */
static void test_nodes_and_title(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    char *text = dot_of(f->g, 0);
    size_t n_nodes = 0;
    TC_OK(acg_graph_get_node_count(f->g, &n_nodes));
    assert_int_equal(n_nodes, f->axpy + 1);
    assert_true(strncmp(text, "digraph acg_graph_", 18) == 0);
    assert_int_equal(text[strlen(text) - 2], '}');
    char title[512];
    snprintf(title, sizeof title, " on %s (%s): %zu nodes, %d stream%s\\n",
             acg_device_get_spec(f->t.dev), tc_cap()->name, n_nodes, f->forked ? 2 : 1,
             f->forked ? "s" : "");
    HAS(text, title);
    HAS(text, "label=\"#0 kernel fill_f32\\nglobal 4096, local 64\"");
    HAS(text, "label=\"#1 kernel add_scalar_f32\\nglobal 4096, local auto\"");
    HAS(text, "label=\"#2 fill\\n16384 B (16.0 KiB), pattern 0xab\"");
    HAS(text, "label=\"#3 copy d2d\\n16384 B (16.0 KiB)\"");
    if (f->host) {
        HAS(text, "label=\"#4 host function\"");
    }
    char axpy[96];
    snprintf(axpy, sizeof axpy, "label=\"#%u kernel axpy_f32\\nglobal 4096, local auto\"", f->axpy);
    HAS(text, axpy);
    /* One declaration per node, and nothing about buffers without the flag. */
    for (uint32_t i = 0; i <= f->axpy; i++) {
        char decl[32];
        snprintf(decl, sizeof decl, "    n%u [", i);
        assert_int_equal(count(text, decl), 1);
    }
    LACKS(text, "b0");
    LACKS(text, "cylinder");
    free(text);
}

/* Streams are clusters holding the nodes each recorded; a dependency within a stream is a plain
 * edge, one across streams (an event wait) a dashed one. */
static void test_streams_and_edges(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    char *text = dot_of(f->g, 0);
    const char *s0 = cluster(text, "cluster_stream_0");
    HAS(s0, "label=\"stream 0 (origin)\"");
    uint32_t on_a[] = {0, 3, 4, f->axpy};
    for (size_t i = 0; i < sizeof on_a / sizeof on_a[0]; i++) {
        char decl[32];
        snprintf(decl, sizeof decl, "    n%u [", on_a[i]);
        HAS(s0, decl);
    }
    char last[96];
    snprintf(last, sizeof last, "  n%u -> n%u;\n", f->axpy - 1, f->axpy);
    HAS(text, last);
    if (f->forked) {
        HAS(text, "  n0 -> n3;\n");
        const char *s1 = cluster(text, "cluster_stream_1");
        HAS(s1, "label=\"stream 1\"");
        HAS(s1, "    n1 [");
        HAS(s1, "    n2 [");
        LACKS(s1, "    n0 [");
        LACKS(s1, "    n3 [");
        HAS(text, "  n0 -> n1 [style=dashed, color=\"#c0392b\"];\n");
        HAS(text, "  n1 -> n2;\n");
        /* The join: a's next node waits for b's last. */
        HAS(text, "  n2 -> n4 [style=dashed, color=\"#c0392b\"];\n");
        assert_int_equal(count(text, "style=dashed, color="), 2);
        assert_int_equal(count(text, "subgraph cluster_"), 2);
    } else {
        HAS(s0, "    n1 [");
        HAS(s0, "    n2 [");
        HAS(text, "  n0 -> n1;\n");
        HAS(text, "  n2 -> n3;\n");
        LACKS(text, "style=dashed, color=");
        assert_int_equal(count(text, "subgraph cluster_"), 1);
    }
    /* Every dependency of the ledger is an edge, and no other edge between nodes exists. */
    size_t n_nodes = 0, n_deps = 0;
    TC_OK(acg_graph_get_node_count(f->g, &n_nodes));
    for (size_t i = 0; i < n_nodes; i++) {
        acg_node_info info;
        TC_OK(acg_graph_get_node(f->g, i, &info));
        for (size_t d = 0; d < info.n_deps; d++) {
            char edge[64];
            snprintf(edge, sizeof edge, "  n%u -> n%zu", info.deps[d], i);
            HAS(text, edge);
        }
        n_deps += info.n_deps;
    }
    assert_int_equal(count(text, " -> n"), n_deps);
    free(text);
}

/* ACG_DOT_BUFFERS: each buffer once, numbered in order of first use, with an edge per node that
 * touches it: a copy's and a fill's direction, a host function's declared modes (merged where
 * it declared one buffer twice), "uses" for kernels, whose definitions do not say. */
static void test_buffers(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    char *text = dot_of(f->g, ACG_DOT_BUFFERS);
    for (int i = 0; i < 4; i++) {
        char decl[96];
        snprintf(decl, sizeof decl, "  b%d [label=\"buffer %d\\n16384 B (16.0 KiB)\"];\n", i, i);
        HAS(text, decl);
    }
    LACKS(text, "  b4 [");
    HAS(text, ", 4 buffers\\n");
    /* x = b0, y = b1, z = b2, w = b3 */
    HAS(text, "  n0 -> b0 [dir=none, style=dotted, label=\"uses\"];\n");
    HAS(text, "  n1 -> b1 [dir=none, style=dotted, label=\"uses\"];\n");
    HAS(text, "  n1 -> b0 [dir=none, style=dotted, label=\"uses\"];\n");
    HAS(text, "  n2 -> b2 [label=\"write\"];\n");
    HAS(text, "  n3 -> b3 [label=\"write\"];\n");
    HAS(text, "  b0 -> n3 [label=\"read\"];\n");
    if (f->host) {
        HAS(text, "  b1 -> n4 [label=\"read\"];\n");
        HAS(text, "  n4 -> b2 [dir=both, label=\"read/write\"];\n");
    }
    char e[96];
    snprintf(e, sizeof e, "  n%u -> b3 [dir=none, style=dotted, label=\"uses\"];\n", f->axpy);
    HAS(text, e);
    snprintf(e, sizeof e, "  n%u -> b1 [dir=none, style=dotted, label=\"uses\"];\n", f->axpy);
    HAS(text, e);
    assert_int_equal(count(text, " -> b") + count(text, "  b0 -> n") + count(text, "  b1 -> n"),
                     f->host ? 10 : 8);
    /* The buffers come after the clusters, outside them. */
    LACKS(cluster(text, "cluster_stream_0"), "  b0 [");
    free(text);
}

/* The same graph gives the same bytes, with each flag setting. */
static void test_deterministic(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    for (uint32_t flags = 0; flags <= ACG_DOT_BUFFERS; flags += ACG_DOT_BUFFERS) {
        char *one = dot_of(f->g, flags);
        char *two = dot_of(f->g, flags);
        assert_string_equal(one, two);
        free(one);
        free(two);
    }
}

/* dot accepts the text and draws every node (skipped, saying so, without Graphviz). */
static void test_dot_renders(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    char *text = dot_of(f->g, ACG_DOT_BUFFERS);
    expect_dot_renders(text, "<svg", "</svg>", "kernel fill_f32", "copy d2d", "stream 0 (origin)",
                       "buffer 3", NULL);
    free(text);
}

/* Refusals: a dead or NULL graph, a NULL FILE, unknown flags; nothing is written. */
static void test_bad_arguments(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_write_dot(NULL, out, 0));
    TC_LAST_ERROR_HAS("acg_graph_write_dot");
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_write_dot((const acg_graph *)f->t.s, out, 0));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_write_dot(f->g, NULL, 0));
    TC_LAST_ERROR_HAS("out is NULL");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_write_dot(f->g, out, 2));
    TC_LAST_ERROR_HAS("unknown flags 0x2");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_graph_write_dot(f->g, out, ACG_DOT_BUFFERS | 0x80000000u));
    TC_LAST_ERROR_HAS("unknown flags 0x80000000");
    acg_graph *dead = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(tc_fill(f->t.s, &f->t.k, f->x, 0, N, 1.0f));
    TC_OK(acg_stream_end_capture(f->t.s, &dead));
    TC_OK(acg_graph_destroy(dead));
    TC_EXPECT(ERR_INVALID_HANDLE, acg_graph_write_dot(dead, out, 0));
    assert_int_equal(fflush(out), 0);
    assert_int_equal(size, 0);
    fclose(out);
    free(text);
}

/* A FILE that cannot take the text: ACG_ERR_IO with the system's reason, whether the write
 * fails (a small buffer onto /dev/full, a read-only stream) or only the flush (a buffer that
 * holds the whole text). */
static void test_write_errors(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    FILE *full = fopen("/dev/full", "w");
    assert_non_null(full);
    static char small[16]; /* glibc ignores the size without a buffer of the caller's */
    assert_int_equal(setvbuf(full, small, _IOFBF, sizeof small), 0);
    TC_EXPECT(ERR_IO, acg_graph_write_dot(f->g, full, ACG_DOT_BUFFERS));
    TC_LAST_ERROR_HAS("acg_graph_write_dot: writing the DOT text");
    TC_LAST_ERROR_HAS(strerror(ENOSPC));
    fclose(full);

    static char big[1 << 20];
    full = fopen("/dev/full", "w");
    assert_non_null(full);
    assert_int_equal(setvbuf(full, big, _IOFBF, sizeof big), 0);
    TC_EXPECT(ERR_IO, acg_graph_write_dot(f->g, full, 0));
    TC_LAST_ERROR_HAS("acg_graph_write_dot: flushing the DOT text");
    TC_LAST_ERROR_HAS(strerror(ENOSPC));
    fclose(full);

    FILE *ro = fopen("/dev/null", "r");
    assert_non_null(ro);
    TC_EXPECT(ERR_IO, acg_graph_write_dot(f->g, ro, 0));
    TC_LAST_ERROR_HAS(strerror(EBADF));
    fclose(ro);
    assert_string_equal(acg_status_name(ACG_ERR_IO), "ACG_ERR_IO");
}

/* A capture that recorded nothing gives a graph of no nodes: still a valid, titled digraph. */
static void test_empty_graph(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    char *text = dot_of(g, ACG_DOT_BUFFERS);
    HAS(text, ": 0 nodes, 0 streams, 0 buffers\\n");
    LACKS(text, "subgraph");
    LACKS(text, "->");
    expect_dot_renders(text, NULL);
    free(text);
    TC_OK(acg_graph_destroy(g));
}

/* ---- foreign work: awkward names ----------------------------------------------------------- */

/* cmocka setup of a tc_fixture on a device with native capture, where foreign work can be
 * declared: the device under test when it captures natively, else the cpu backend's native
 * mode. */
static int native_setup(void **state) {
    const char *spec = tc_cap()->native_capture ? tc_spec() : "cpu:0?capture=native";
    *state = tc_fixture_new_on(sizeof(tc_fixture), spec);
    return 0;
}

/* Declared names reach the DOT escaped: a quote and a backslash escaped, a control character
 * and bytes that are not UTF-8 (a name cut inside a character) as '?', UTF-8 kept; dot accepts
 * the text and shows the names as given. */
static void test_foreign_names(void **state) {
    tc_fixture *t = *state;
    acg_stream *s = t->s;
    acg_buffer *q = tc_buffer(t->dev, NB);
    acg_access acc = {q, 0, 0, ACG_ACCESS_READ_WRITE};
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    TC_OK(acg_stream_declare_foreign(s, "we\"ird\\name", &acc, 1));
    TC_OK(acg_stream_declare_foreign(s, "tab\there\xff \xc2\xb5s", &acc, 1));
    /* 30 bytes, then a two-byte character: the ledger keeps the whole name. */
    TC_OK(acg_stream_declare_foreign(s, "abcdefghijklmnopqrstuvwxyz0123\xc2\xb5", &acc, 1));
    TC_OK(acg_stream_declare_foreign(s, "\\n\\", NULL, 0));
    TC_OK(acg_stream_end_capture(s, &g));
    char *text = dot_of(g, ACG_DOT_BUFFERS);
    HAS(text, "label=\"#0 foreign we\\\"ird\\\\name\"];\n");
    HAS(text, "label=\"#1 foreign tab?here? \xc2\xb5s\"];\n");
    HAS(text, "label=\"#2 foreign abcdefghijklmnopqrstuvwxyz0123\xc2\xb5\"];\n");
    HAS(text, "label=\"#3 foreign \\\\n\\\\\"];\n");
    HAS(text, "  n0 -> b0 [dir=both, label=\"read/write\"];\n");
    HAS(text, "  n1 -> n2;\n");
    HAS(text, "(origin)");
    expect_dot_renders(text, "foreign we&quot;ird\\name", "foreign \\n\\<", NULL);
    free(text);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(q));
}

/* ---- collectives ------------------------------------------------------------------------------
 */

/* An allreduce (a group of one rank) shows its float count and bytes. */
static void test_allreduce(void **state) {
    fx *f = *state;
    NEED_GRAPHS(f);
    if (!tc_cap()->collectives) {
        tc_skip("no collectives: no allreduce node");
    }
    acg_device_group *group = NULL;
    TC_OK(acg_device_group_create(f->t.dev, tc_one_rank_comm(), &group));
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->t.s, NULL));
    TC_OK(acg_allreduce(f->t.s, group, f->x, 0, 256));
    TC_OK(acg_stream_end_capture(f->t.s, &g));
    char *text = dot_of(g, ACG_DOT_BUFFERS);
    HAS(text, "label=\"#0 allreduce\\n256 floats, 1024 B (1.0 KiB)\"");
    HAS(text, "  n0 -> b0 [dir=both, label=\"read/write\"];\n");
    expect_dot_renders(text, NULL);
    free(text);
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_device_group_destroy(group));
}

/* ---- allocation failures --------------------------------------------------------------------- */

typedef struct oom_ctx {
    const acg_graph *g;
    size_t want; /* the text's length when it succeeds */
} oom_ctx;

/* One write: on a failure nothing reached the FILE. */
static acg_status oom_run(void *p) {
    oom_ctx *c = p;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    acg_status st = acg_graph_write_dot(c->g, out, ACG_DOT_BUFFERS);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(size, st == ACG_OK ? c->want : 0);
    if (st == ACG_ERR_OUT_OF_MEMORY) {
        TC_LAST_ERROR_HAS("acg_graph_write_dot: out of memory");
    }
    free(text);
    return st;
}

/* Every allocation of the writer can fail: ACG_ERR_OUT_OF_MEMORY, nothing written, nothing
 * leaked. A graph large enough that its text outgrows the first block shows the growth too. */
static void test_alloc_fail(void **state) {
    (void)state;
    if (!tc_cap()->graphs) {
        tc_skip("no graphs: no graph to write"); /* the other cases check the refusal */
    }
    tc_alloc_install();
    acg_device *dev = tc_open();
    acg_stream *s = tc_stream(dev);
    tc_kernels k;
    tc_kernels_get(dev, &k);
    acg_buffer *x = tc_buffer(dev, NB);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(s, NULL));
    for (int i = 0; i < 64; i++) {
        TC_OK(tc_add(s, &k, x, 0, x, 0, N, 1.0f));
    }
    TC_OK(acg_stream_end_capture(s, &g));
    char *text = dot_of(g, ACG_DOT_BUFFERS);
    oom_ctx c = {g, strlen(text)};
    assert_true(c.want > 8192); /* the text grows twice from its first 4 KiB */
    free(text);
    uint64_t points = tc_alloc_sweep(oom_run, &c, false);
    print_message("%llu allocation points\n", (unsigned long long)points);
    assert_true(points >= 5); /* the buffer table (3) and the text (3 blocks) */
    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    tc_alloc_uninstall();
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_alloc_fail), /* first: it installs the allocator */
    T(test_nodes_and_title),
    T(test_streams_and_edges),
    T(test_buffers),
    T(test_deterministic),
    T(test_dot_renders),
    T(test_bad_arguments),
    T(test_write_errors),
    T(test_empty_graph),
    cmocka_unit_test_setup_teardown(test_foreign_names, native_setup, tc_fixture_teardown),
    T(test_allreduce),
};
#undef T
TC_MAIN("test_dot", tests)
