/* common_suites.c — the work several test suites share (see common.h): eager and captured runs
 * of one sequence, node and comm helpers of the backends' own tests, the runners, captures and
 * user kernels of the engine, graph and registration suites, and the model suites' presets,
 * loaders, lost devices and ranks. */
#include "common.h"
#include "core/acg-impl.h" /* acg__device_inject_fault */

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- eager and captured runs of the same work --------------------------------------------- */

acg_status tc_run_eager(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b,
                        const acg_buffer *out, size_t size, void *bytes) {
    acg_status st = fn(ctx, a, b);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = acg_stream_synchronize(a)) != ACG_OK) {
        return st;
    }
    if (b != NULL && (st = acg_stream_synchronize(b)) != ACG_OK) {
        return st;
    }
    if (out != NULL) {
        st = acg_copy_d2h(a, bytes, out, 0, size);
    }
    return st;
}

acg_status tc_capture(tc_work_fn fn, void *ctx, acg_stream *a, acg_stream *b, acg_graph_pool *pool,
                      acg_graph **graph) {
    acg_status st = acg_stream_begin_capture(a, pool);
    if (st != ACG_OK) {
        return st;
    }
    st = fn(ctx, a, b);
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(a, &g);
    if (st != ACG_OK) {
        if (end == ACG_OK) {
            acg_graph_destroy(g);
        }
        return st;
    }
    if (end == ACG_OK) {
        *graph = g;
    }
    return end;
}

acg_status tc_replay(acg_graph *graph, acg_stream *s, const acg_buffer *out, size_t size,
                     void *bytes) {
    acg_status st = acg_graph_launch(graph, s);
    if (st != ACG_OK) {
        return st;
    }
    if ((st = acg_stream_synchronize(s)) != ACG_OK) {
        return st;
    }
    if (out != NULL) {
        st = acg_copy_d2h(s, bytes, out, 0, size);
    }
    return st;
}

/* ---- the backends' own tests (tests/cuda, tests/level_zero, tests/opencl) ------------------ */

void tc_expect_node_kinds(const acg_graph *g, const acg_node_kind *kinds, size_t n) {
    tc_expect_node_count(g, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tc_node(g, i).kind, kinds[i]);
    }
}

acg_comm tc_comm(void *user, int32_t rank, int32_t n_ranks, acg_status (*barrier)(void *user),
                 acg_status (*allreduce_min_i32)(void *user, int32_t *values, size_t n),
                 acg_status (*broadcast)(void *user, void *data, size_t bytes, int32_t root)) {
    return (acg_comm){.size = sizeof(acg_comm),
                      .user = user,
                      .barrier = barrier,
                      .allreduce_min_i32 = allreduce_min_i32,
                      .rank = rank,
                      .n_ranks = n_ranks,
                      .broadcast = broadcast};
}

/* ---- the graph suites: buffers freed ------------------------------------------------------ */

void tc_free_buffers_(acg_buffer *const *bufs, size_t n, const char *file, int line) {
    for (size_t i = 0; i < n; i++) {
        tc_expect_(ACG_OK, acg_buffer_free(bufs[i]), "acg_buffer_free", file, line);
    }
}

/* ---- runners, captures and user kernels (the engine, graph and registration suites) ------- */

acg_recipe tc_recipe(const char *name, void *user,
                     size_t (*bytes)(void *user, uint32_t i, const acg_bucket_key *bucket),
                     acg_status (*forward)(void *user, acg_stream *s, const acg_step_io *io)) {
    acg_recipe r = ACG_RECIPE_INIT;
    r.name = name;
    r.user = user;
    r.n_inputs = 1;
    r.n_outputs = 1;
    r.input_bytes = bytes;
    r.output_bytes = bytes;
    r.forward = forward;
    return r;
}

acg_runner_config tc_runner_config(const acg_recipe *recipe, const acg_bucket_key *b, uint32_t n,
                                   acg_stream *s, acg_graph_mode g) {
    acg_runner_config c = ACG_RUNNER_CONFIG_INIT;
    c.recipe = recipe;
    c.buckets = b;
    c.n_buckets = n;
    c.stream = s;
    c.graphs = g;
    return c;
}

acg_status tc_twice_x_plus_one(acg_stream *s, const tc_kernels *k, acg_buffer *y,
                               const acg_buffer *x, acg_buffer *tmp, uint32_t n) {
    acg_status st = tc_add(s, k, tmp, 0, x, 0, n, 1.0f); /* tmp = x + 1 */
    if (st == ACG_OK) {
        st = tc_copy(s, k, y, 0, tmp, 0, n); /* y = tmp */
    }
    return st == ACG_OK ? tc_axpy(s, k, y, 0, tmp, 0, n, 1.0f) : st; /* y = 2 tmp */
}

void tc_expect_node_count(const acg_graph *g, size_t n) {
    size_t nodes = 0;
    TC_OK(acg_graph_get_node_count(g, &nodes));
    assert_int_equal(nodes, n);
}

acg_node_info tc_node(const acg_graph *g, size_t i) {
    acg_node_info info;
    memset(&info, 0, sizeof info);
    TC_OK(acg_graph_get_node(g, i, &info));
    return info;
}

void tc_end_capture_expect_nodes(acg_stream *s, size_t n) {
    TC_EXPECT_CAPTURE_STATE(s, ACTIVE);
    acg_graph *g = NULL;
    TC_OK(acg_stream_end_capture(s, &g));
    tc_expect_node_count(g, n);
    TC_OK(acg_graph_destroy(g));
}

uint64_t tc_mul_sat(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

acg_kernel_desc tc_rows_kernel_desc(const char *name) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = name;
    d.n_args = 5;
    const acg_arg_type types[] = {ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_U32,
                                  ACG_ARG_U32};
    memcpy(d.types, types, sizeof types);
    d.bytes_per_item[0] = d.bytes_per_item[1] = d.bytes_per_item[2] = 4;
    return d;
}

void tc_rows_io_open(tc_rows_io *io, acg_device *dev, size_t out_bytes, const void *x,
                     size_t x_bytes, const void *w, size_t w_bytes) {
    io->s = tc_stream(dev);
    io->out = tc_buffer(dev, out_bytes);
    io->x = tc_buffer(dev, x_bytes);
    io->w = tc_buffer(dev, w_bytes);
    if (x != NULL) {
        tc_upload(io->s, io->x, x, x_bytes);
    }
    if (w != NULL) {
        tc_upload(io->s, io->w, w, w_bytes);
    }
    tc_poison(io->s, io->out);
}

void tc_rows_io_close(tc_rows_io *io) {
    TC_OK(acg_buffer_free(io->out));
    TC_OK(acg_buffer_free(io->x));
    TC_OK(acg_buffer_free(io->w));
    TC_OK(acg_stream_destroy(io->s));
}

/* ---- the model's suites: presets, logits, configurations, loaders, lost devices, ranks ------- */

void tc_never_called(const acg_cpu_arg *args, const uint32_t global[3]) {
    (void)args;
    (void)global;
    fail();
}

int tc_best_two(const float *v, int n, int *second) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        best = v[i] > v[best] ? i : best;
    }
    *second = best == 0 ? 1 : 0;
    for (int i = 0; i < n; i++) {
        if (i != best && v[i] > v[*second]) {
            *second = i;
        }
    }
    return best;
}

acg_model_weights *tc_model_preset(const char *name) {
    acg_model_weights *w = NULL;
    TC_OK(acg_model_preset_load(name, 7, &w));
    return w;
}

void tc_expect_model_config(const acg_model_config *got, const acg_model_config *want) {
    assert_int_equal(got->dim, want->dim);
    assert_int_equal(got->hidden_dim, want->hidden_dim);
    assert_int_equal(got->n_layers, want->n_layers);
    assert_int_equal(got->n_heads, want->n_heads);
    assert_int_equal(got->n_kv_heads, want->n_kv_heads);
    assert_int_equal(got->vocab_size, want->vocab_size);
    assert_int_equal(got->seq_len, want->seq_len);
    assert_int_equal(got->shared_classifier, want->shared_classifier);
}

void tc_expect_load_fails_(acg_status want, tc_loader load, const char *call, const void *arg,
                           const char *path, const char *file, int line, ...) {
    void *const sentinel = (void *)(uintptr_t)0x1234;
    void *out = sentinel;
    int64_t live = tc_alloc_live();
    tc_expect_(want, load(path, arg, &out), call, file, line);
    assert_ptr_equal(out, sentinel);
    va_list ap;
    va_start(ap, line);
    tc_last_error_names_file_(path, file, line, ap);
    va_end(ap);
    assert_int_equal(tc_alloc_live(), live);
}

void tc_expect_fifo_refused(tc_loader load, const char *call, const void *arg, const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s", tc_tmp_path(name));
    assert_int_equal(mkfifo(path, 0600), 0);
    tc_hang_guard(10, "loading a FIFO");
    tc_expect_load_fails_(ACG_ERR_INVALID_ARGUMENT, load, call, arg, path, __FILE__, __LINE__,
                          "not a regular file", NULL);
    tc_hang_guard(0, NULL);
}

/* tc_inject_fault_or_skip, closing dev before the skip where the caller opened it for this. */
static void inject_fault_or_skip(acg_device *dev, bool close_on_skip) {
    if (acg__device_inject_fault(dev) == ACG_ERR_UNSUPPORTED) {
        if (close_on_skip) {
            tc_close(dev);
        }
        tc_skip("no injected faults: the backends' own tests provoke their drivers' faults");
    }
}

void tc_inject_fault_or_skip(acg_device *dev) { inject_fault_or_skip(dev, false); }

acg_device *tc_open_lost(void) {
    acg_device *dev = tc_open();
    inject_fault_or_skip(dev, true);
    return dev;
}

bool tc_shm_segment_named(int pid) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "acg-%d-", pid);
    DIR *d = opendir("/dev/shm");
    bool found = false;
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL && !found; e = readdir(d)) {
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}
