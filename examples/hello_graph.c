/* hello_graph.c — the smallest acg program: capture three kernel launches on a stream, replay
 * them as one graph, and check the replay against eager execution. */
#include <stdio.h>
#include <string.h>

#include <acg/acg.h>

#include "check.h"

#define N 1024

/* y = 2 * x + y, then y = y + 1, then x = y: three dependent launches. */
static int step(acg_stream *s, acg_kernel *const k[3], acg_buffer *x, acg_buffer *y) {
    acg_dims dims = acg_dims_1d(N);
    acg_arg axpy[] = {acg_arg_buffer(y, 0), acg_arg_buffer(x, 0), acg_arg_f32(2.0f)};
    acg_arg add[] = {acg_arg_buffer(y, 0), acg_arg_buffer(y, 0), acg_arg_f32(1.0f)};
    acg_arg copy[] = {acg_arg_buffer(x, 0), acg_arg_buffer(y, 0)};
    CHECK(acg_kernel_launch(s, k[0], &dims, axpy, 3));
    CHECK(acg_kernel_launch(s, k[1], &dims, add, 3));
    CHECK(acg_kernel_launch(s, k[2], &dims, copy, 2));
    return 0;
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cpu";
    acg_device *dev;
    acg_stream *s;
    acg_buffer *x, *y;
    acg_kernel *k[3];
    acg_graph *graph;
    float *host, eager[N], replay[N];
    CHECK(acg_device_open(spec, &dev));
    CHECK(acg_stream_create(dev, &s));
    CHECK(acg_buffer_alloc(dev, N * sizeof(float), &x));
    CHECK(acg_buffer_alloc(dev, N * sizeof(float), &y));
    CHECK(acg_pinned_alloc(dev, N * sizeof(float), (void **)&host));
    CHECK(acg_kernel_get(dev, "axpy_f32", &k[0]));
    CHECK(acg_kernel_get(dev, "add_scalar_f32", &k[1]));
    CHECK(acg_kernel_get(dev, "copy_f32", &k[2]));

    /* Eager: five steps from a known start. */
    for (int i = 0; i < N; i++) {
        host[i] = (float)i * 0.5f;
    }
    CHECK(acg_copy_h2d(s, x, 0, host, sizeof eager));
    CHECK(acg_fill(s, y, 0, sizeof eager, 0, 4));
    for (int i = 0; i < 5; i++) {
        if (step(s, k, x, y) != 0) {
            return 1;
        }
    }
    CHECK(acg_copy_d2h(s, eager, y, 0, sizeof eager));

    /* Graph: capture one step, replay it five times from the same start. */
    CHECK(acg_copy_h2d(s, x, 0, host, sizeof eager));
    CHECK(acg_fill(s, y, 0, sizeof eager, 0, 4));
    CHECK(acg_stream_begin_capture(s, NULL));
    if (step(s, k, x, y) != 0) {
        return 1;
    }
    CHECK(acg_stream_end_capture(s, &graph));
    for (int i = 0; i < 5; i++) {
        CHECK(acg_graph_launch(graph, s));
    }
    CHECK(acg_copy_d2h(s, replay, y, 0, sizeof replay));

    int same = memcmp(eager, replay, sizeof eager) == 0;
    printf("%s: 5 replays of a 3-node graph %s eager execution (y[%d] = %g)\n",
           acg_device_get_spec(dev), same ? "equal" : "DIFFER FROM", N - 1, replay[N - 1]);

    CHECK(acg_graph_destroy(graph));
    CHECK(acg_pinned_free(host));
    CHECK(acg_buffer_free(x));
    CHECK(acg_buffer_free(y));
    CHECK(acg_stream_destroy(s));
    CHECK(acg_device_close(dev));
    return same ? 0 : 1;
}
