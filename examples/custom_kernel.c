/* custom_kernel.c — a kernel of your own: register its definition (argument types, a rule for
 * how far its buffers reach, C code for the cpu backend and OpenCL C for the opencl backend),
 * then launch it eagerly, capture it into a graph, replay the graph, and check both against the
 * host. Run it as `custom_kernel [device]` ("cpu" by default, "opencl" where OpenCL runs). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <acg/acg.h>

#include "check.h"

#define WIDTH 100
#define ROWS 64

/* "row_sum_f32" (out (n), x (n, width); u32 width, n), grid (n): out[r] is the sum of row r,
 * added in index order by one work item, the same order on every backend, so every backend
 * gives the same bits. */
static void row_sum_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global; /* the counts say how much work there is; the grid may be larger */
    float *out = a[0].p;
    const float *x = a[1].p;
    const uint32_t width = a[2].u32, n = a[3].u32;
    for (uint32_t r = 0; r < n; r++) {
        float s = 0.0f;
        for (uint32_t k = 0; k < width; k++) {
            s += x[(size_t)r * width + k];
        }
        out[r] = s;
    }
}

/* OpenCL passes each buffer as a pointer and a byte offset to add to it. */
static const char row_sum_cl[] =
    "kernel void row_sum_f32(global float *out, ulong out_off, global float *x, ulong x_off,\n"
    "                        uint width, uint n) {\n"
    "    size_t r = get_global_id(0);\n"
    "    if (r >= n) {\n"
    "        return;\n"
    "    }\n"
    "    global float *row = (global float *)((global char *)x + x_off) + r * width;\n"
    "    float s = 0.0f;\n"
    "    for (uint k = 0; k < width; k++) {\n"
    "        s += row[k];\n"
    "    }\n"
    "    ((global float *)((global char *)out + out_off))[r] = s;\n"
    "}\n";

static uint64_t mul_sat(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* The shape rule: how many bytes each buffer reaches, from the scalars, so acg refuses a launch
 * that would leave its buffers before any backend runs it. Saturating: an absurd count is
 * refused, never wrapped into a small one. */
static const char *row_sum_shape(const acg_arg *args, const acg_dims *dims,
                                 uint64_t extent[ACG_MAX_KERNEL_ARGS]) {
    const uint64_t width = args[2].value.u32, n = args[3].value.u32;
    extent[0] = mul_sat(4, n);
    extent[1] = mul_sat(mul_sat(4, width), n);
    return dims->global[0] < n ? "the grid must cover n" : NULL;
}

static acg_status launch(acg_stream *s, const acg_kernel *k, acg_buffer *out, acg_buffer *x,
                         uint32_t grid) {
    const acg_arg args[] = {acg_arg_buffer(out, 0), acg_arg_buffer(x, 0), acg_arg_u32(WIDTH),
                            acg_arg_u32(ROWS)};
    const acg_dims dims = acg_dims_1d(grid);
    return acg_kernel_launch(s, k, &dims, args, 4);
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cpu";

    acg_kernel_desc desc = ACG_KERNEL_DESC_INIT;
    desc.name = "row_sum_f32";
    desc.n_args = 4;
    desc.types[0] = desc.types[1] = ACG_ARG_BUFFER;
    desc.types[2] = desc.types[3] = ACG_ARG_U32;
    desc.bytes_per_item[0] = desc.bytes_per_item[1] = sizeof(float); /* offsets' alignment */
    desc.dims = 1;
    desc.shape = row_sum_shape;
    desc.exactness = ACG_KERNEL_EXACT_EVERY_BACKEND;
    desc.cpu.fn = row_sum_cpu;
    desc.opencl.source = row_sum_cl;
    CHECK(acg_kernel_register(&desc));
    printf("registered %s: C code for cpu, OpenCL C for opencl\n", desc.name);

    acg_device *dev;
    acg_stream *s;
    acg_buffer *x, *out;
    acg_kernel *k;
    float *host, want[ROWS], eager[ROWS], replay[ROWS];
    CHECK(acg_device_open(spec, &dev));
    CHECK(acg_stream_create(dev, &s));
    CHECK(acg_buffer_alloc(dev, sizeof(float) * WIDTH * ROWS, &x));
    CHECK(acg_buffer_alloc(dev, sizeof eager, &out));
    CHECK(acg_pinned_alloc(dev, sizeof(float) * WIDTH * ROWS, (void **)&host));
    CHECK(acg_kernel_get(dev, "row_sum_f32", &k));

    /* Halves and quarters: every partial sum is exact, so the host's sum is the device's. */
    for (int r = 0; r < ROWS; r++) {
        want[r] = 0.0f;
        for (int c = 0; c < WIDTH; c++) {
            host[r * WIDTH + c] = (float)((r * 7 + c * 3) % 11) * 0.25f - 1.0f;
            want[r] += host[r * WIDTH + c];
        }
    }
    CHECK(acg_copy_h2d(s, x, 0, host, sizeof(float) * WIDTH * ROWS));

    /* Eager, on a grid rounded up to a multiple of 32: the extra work items do nothing. */
    CHECK(launch(s, k, out, x, 96));
    CHECK(acg_copy_d2h(s, eager, out, 0, sizeof eager));
    int ok = memcmp(eager, want, sizeof want) == 0;
    printf("%s: eager sums of %d rows of %d %s the host's\n", acg_device_get_spec(dev), ROWS, WIDTH,
           ok ? "equal" : "DIFFER FROM");

    /* The shape rule at work: a grid that misses rows is refused, and nothing runs. */
    acg_status refused = launch(s, k, out, x, ROWS - 1);
    printf("a grid of %d: %s (%s)\n", ROWS - 1, acg_status_name(refused), acg_last_error());
    ok = ok && refused == ACG_ERR_INVALID_ARGUMENT;

    if (acg_device_get_capability(dev)->graphs) {
        acg_graph *graph;
        CHECK(acg_stream_begin_capture(s, NULL));
        CHECK(launch(s, k, out, x, ROWS));
        CHECK(acg_stream_end_capture(s, &graph));
        CHECK(acg_fill(s, out, 0, sizeof replay, 0, 4));
        CHECK(acg_graph_launch(graph, s));
        CHECK(acg_copy_d2h(s, replay, out, 0, sizeof replay));
        int same = memcmp(replay, eager, sizeof replay) == 0;
        printf("captured one launch, replayed it: %s eager bit for bit (out[%d] = %g)\n",
               same ? "equals" : "DIFFERS FROM", ROWS - 1, (double)replay[ROWS - 1]);
        ok = ok && same;
        CHECK(acg_graph_destroy(graph));
    } else {
        printf("%s has no graphs: the kernel runs eagerly only\n", acg_device_get_spec(dev));
    }

    CHECK(acg_pinned_free(host));
    CHECK(acg_buffer_free(x));
    CHECK(acg_buffer_free(out));
    CHECK(acg_stream_destroy(s));
    CHECK(acg_device_close(dev)); /* releases the kernel it loaded */
    CHECK(acg_kernel_unregister("row_sum_f32"));
    return ok ? 0 : 1;
}
