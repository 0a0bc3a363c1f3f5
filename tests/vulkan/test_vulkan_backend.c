/* test_vulkan_backend.c — what only the vulkan backend has: its drivers' host memory failing at
 * every allocation of a whole workload, on the real driver (lavapipe in CI).
 *
 * The backend hands every device's driver its own host allocator (acg__vk_host_allocator),
 * which a test hook makes fail at the n-th allocation: the driver then answers
 * VK_ERROR_OUT_OF_HOST_MEMORY from the call that needed the memory, or from vkEndCommandBuffer
 * for a command it could not record. The sweep runs one workload (open, memory, pinned memory,
 * a kernel, copies both ways through pinned and pageable memory and from the caller's memory
 * registered, a fill that is not whole words, events between streams, a graph captured,
 * replayed, and updated both in place and by recording again) with each allocation failing
 * in turn, until one run meets no failure. At each: the run either ends with the status of the
 * failed call, ACG_ERR_OUT_OF_MEMORY, its detail naming the Vulkan call, or (where the driver
 * did without the memory) succeeds with the right bytes; and once everything is released the
 * driver holds no host memory and acg no object.
 *
 * And which way a graph's update goes: a change of kernel arguments only rewrites the graph's
 * argument blocks, leaving its command buffer as it was; a new grid or a new copy or fill
 * records a new one. Replays are compared with the same work done eagerly, bit for bit.
 *
 * And a stream destroyed as soon as the stream that waited for it is synchronized, which Vulkan
 * allows and lavapipe 22.3 did not survive until the backend drained the queue first
 * (acg__vk_semaphore_destroy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The backend's hooks (src/backends/vulkan/loader.c). */
void acg__vk_fail_host_alloc(uint64_t n);
bool acg__vk_host_alloc_failed(void);
int64_t acg__vk_host_alloc_live(void);

enum { N = 1000 };

/* What a run made, released by release_all whatever it reached. */
typedef struct run {
    acg_device *dev;
    acg_stream *a, *b;
    acg_event *e;
    acg_buffer *x, *y;
    float *pin;
    acg_graph_pool *pool;
    acg_graph *g;
    float *reg; /* the caller's memory, registered where the device can */
    bool registered;
} run;

static void release_all(run *r) {
    if (r->a != NULL) {
        acg_stream_synchronize(r->a);
    }
    if (r->b != NULL) {
        acg_stream_synchronize(r->b);
    }
    if (r->registered) {
        TC_OK(acg_pinned_unregister(r->reg));
    }
    free(r->reg);
    TC_OK(acg_graph_destroy(r->g));
    TC_OK(acg_graph_pool_destroy(r->pool));
    TC_OK(acg_pinned_free(r->pin));
    TC_OK(acg_buffer_free(r->x));
    TC_OK(acg_buffer_free(r->y));
    TC_OK(acg_event_destroy(r->e));
    TC_OK(acg_stream_destroy(r->a));
    TC_OK(acg_stream_destroy(r->b));
    if (r->dev != NULL) {
        TC_OK(acg_device_close(r->dev));
    }
}

#define STEP(call)                                                                                 \
    do {                                                                                           \
        acg_status st_ = (call);                                                                   \
        if (st_ != ACG_OK) {                                                                       \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

/* The workload; the first failing call's status. want gets y's expected bytes. */
static acg_status workload(run *r, float *got) {
    STEP(acg_device_open(tc_spec(), &r->dev));
    STEP(acg_stream_create(r->dev, &r->a));
    STEP(acg_stream_create(r->dev, &r->b));
    STEP(acg_event_create(r->dev, &r->e));
    STEP(acg_buffer_alloc(r->dev, N * sizeof(float), &r->x));
    STEP(acg_buffer_alloc(r->dev, N * sizeof(float), &r->y));
    STEP(acg_pinned_alloc(r->dev, N * sizeof(float), (void **)&r->pin));
    acg_kernel *axpy = NULL;
    STEP(acg_kernel_get(r->dev, "axpy_f32", &axpy));
    float host[N];
    for (uint32_t i = 0; i < N; i++) {
        host[i] = (float)i;
        r->pin[i] = 0.5f * (float)i;
    }
    STEP(acg_copy_h2d(r->a, r->x, 0, host, sizeof host)); /* pageable */
    if (acg_device_get_capability(r->dev)->pinned_register) {
        /* The caller's pages imported: x copied again from them, the same values. */
        r->reg = aligned_alloc(4096, 4096);
        assert_non_null(r->reg);
        memcpy(r->reg, host, sizeof host);
        STEP(acg_pinned_register(r->dev, r->reg, 4096));
        r->registered = true;
        STEP(acg_copy_h2d(r->a, r->x, 0, r->reg, sizeof host)); /* registered */
    }
    STEP(acg_copy_h2d(r->a, r->y, 0, r->pin, N * sizeof(float))); /* pinned */
    STEP(acg_fill(r->a, r->y, 2, 6, 0x3f80, 2));                  /* not whole words */
    STEP(acg_event_record(r->e, r->a));
    STEP(acg_stream_wait_event(r->b, r->e));
    const acg_dims dims = {{N, 1, 1}, {0, 0, 0}};
    acg_arg args[3] = {acg_arg_buffer(r->y, 0), acg_arg_buffer(r->x, 0), acg_arg_f32(2.0f)};
    STEP(acg_kernel_launch(r->b, axpy, &dims, args, 3));
    STEP(acg_graph_pool_create(r->dev, &r->pool));
    STEP(acg_stream_begin_capture(r->b, r->pool));
    STEP(acg_kernel_launch(r->b, axpy, &dims, args, 3));
    STEP(acg_fill(r->b, r->x, 0, 2, 0, 1));
    STEP(acg_stream_end_capture(r->b, &r->g));
    STEP(acg_graph_launch(r->g, r->b));
    STEP(acg_graph_launch(r->g, r->b));
    args[2] = acg_arg_f32(3.0f); /* in place */
    STEP(acg_graph_update_kernel_node(r->g, 0, NULL, args, 3));
    STEP(acg_graph_launch(r->g, r->b));
    const acg_dims half = {{N / 2, 1, 1}, {0, 0, 0}}; /* recorded again */
    STEP(acg_graph_update_kernel_node(r->g, 0, &half, args, 3));
    STEP(acg_graph_launch(r->g, r->b));
    STEP(acg_copy_d2h(r->b, r->pin, r->y, 0, N * sizeof(float))); /* pinned */
    STEP(acg_stream_synchronize(r->b));
    memcpy(got, r->pin, N * sizeof(float));
    STEP(acg_copy_d2h(r->b, host, r->x, 0, sizeof host)); /* pageable */
    memcpy(got + N, host, sizeof host);
    return ACG_OK;
}

/* What the workload leaves, computed on the host. */
static void expected(float *want) {
    float x[N], y[N];
    for (uint32_t i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 0.5f * (float)i;
    }
    const uint16_t one = 0x3f80;
    unsigned char *yb = (unsigned char *)y;
    for (uint32_t i = 2; i < 8; i += 2) {
        memcpy(yb + i, &one, 2);
    }
    for (uint32_t i = 0; i < N; i++) {
        y[i] = 2.0f * x[i] + y[i]; /* eagerly */
    }
    for (uint32_t i = 0; i < N; i++) {
        y[i] = 2.0f * x[i] + y[i]; /* the first replay; its fill zeroes x's first 2 bytes */
    }
    memset(x, 0, 2);
    for (uint32_t i = 0; i < N; i++) {
        y[i] = 2.0f * x[i] + y[i]; /* the second */
    }
    for (uint32_t i = 0; i < N; i++) {
        y[i] = 3.0f * x[i] + y[i]; /* updated in place */
    }
    for (uint32_t i = 0; i < N / 2; i++) {
        y[i] = 3.0f * x[i] + y[i]; /* on half the grid */
    }
    memcpy(want, y, sizeof y);
    memcpy(want + N, x, sizeof x);
}

static void test_host_alloc_sweep(void **state) {
    (void)state;
    static float want[2 * N], got[2 * N];
    expected(want);
    const int64_t base = acg__vk_host_alloc_live();
    uint32_t failed = 0, absorbed = 0;
    char calls[1024] = "";
    for (uint64_t n = 1;; n++) {
        run r;
        memset(&r, 0, sizeof r);
        memset(got, 0, sizeof got);
        acg__vk_fail_host_alloc(n);
        const acg_status st = workload(&r, got);
        const bool hit = acg__vk_host_alloc_failed();
        acg__vk_fail_host_alloc(0);
        char why[512];
        snprintf(why, sizeof why, "%s", acg_last_error());
        release_all(&r);
        assert_int_equal(acg__vk_host_alloc_live(), base);
        if (st == ACG_OK) {
            TC_BYTES_EQUAL(got, want, sizeof got);
            absorbed += hit;
            if (!hit) {
                print_message("host-allocation sweep: %llu allocations; %u failed the run (%s), "
                              "%u the driver did without\n",
                              (unsigned long long)n - 1, failed, calls, absorbed);
                break;
            }
            continue;
        }
        if (!hit || st != ACG_ERR_OUT_OF_MEMORY || strstr(why, ": vk") == NULL) {
            fail_msg("allocation %llu failing: %s (%s)", (unsigned long long)n,
                     acg_status_string(st), why);
        }
        failed++;
        /* Each Vulkan call that said so, once. */
        const char *call = strstr(why, ": vk") + 2;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(call, " "), call);
        if (strstr(calls, name) == NULL && strlen(calls) + strlen(name) + 2 < sizeof calls) {
            strcat(strcat(calls, calls[0] != '\0' ? " " : ""), name);
        }
    }
}

/* The graph's command buffer (acg_graph_get_native). */
static void *commands(acg_graph *g) {
    acg_native_handle h = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_graph_get_native(g, &h));
    assert_int_equal(h.kind, ACG_NATIVE_VULKAN_COMMAND_BUFFER);
    assert_non_null(h.handle);
    return h.handle;
}

/* y = a x + y over `n` items, then x's bytes [0, fill) zeroed, captured on s into *g. */
static void capture(acg_stream *s, acg_graph_pool *pool, acg_kernel *axpy, acg_buffer *y,
                    acg_buffer *x, float a, uint32_t n, size_t fill, acg_graph **g) {
    const acg_dims dims = {{n, 1, 1}, {0, 0, 0}};
    const acg_arg args[3] = {acg_arg_buffer(y, 0), acg_arg_buffer(x, 0), acg_arg_f32(a)};
    TC_OK(acg_stream_begin_capture(s, pool));
    TC_OK(acg_kernel_launch(s, axpy, &dims, args, 3));
    TC_OK(acg_fill(s, x, 0, fill, 0, 1));
    TC_OK(acg_stream_end_capture(s, g));
}

/* Runs g (or, with g NULL, the same work eagerly) on y = x = 0, 1, 2, ... into out. */
static void run_from_start(acg_stream *s, acg_graph *g, acg_kernel *axpy, acg_buffer *y,
                           acg_buffer *x, float a, uint32_t n, size_t fill, float *out) {
    float host[N];
    for (uint32_t i = 0; i < N; i++) {
        host[i] = (float)i;
    }
    TC_OK(acg_copy_h2d(s, x, 0, host, sizeof host));
    TC_OK(acg_copy_h2d(s, y, 0, host, sizeof host));
    if (g != NULL) {
        TC_OK(acg_graph_launch(g, s));
    } else {
        const acg_dims dims = {{n, 1, 1}, {0, 0, 0}};
        const acg_arg args[3] = {acg_arg_buffer(y, 0), acg_arg_buffer(x, 0), acg_arg_f32(a)};
        TC_OK(acg_kernel_launch(s, axpy, &dims, args, 3));
        TC_OK(acg_fill(s, x, 0, fill, 0, 1));
    }
    TC_OK(acg_copy_d2h(s, out, y, 0, N * sizeof(float)));
    TC_OK(acg_copy_d2h(s, out + N, x, 0, N * sizeof(float)));
}

static void test_update_in_place(void **state) {
    (void)state;
    acg_device *dev = NULL;
    acg_stream *s = NULL;
    acg_buffer *x = NULL, *y = NULL, *z = NULL;
    acg_graph_pool *pool = NULL;
    acg_graph *g = NULL, *from = NULL;
    acg_kernel *axpy = NULL;
    TC_OK(acg_device_open(tc_spec(), &dev));
    TC_OK(acg_stream_create(dev, &s));
    TC_OK(acg_buffer_alloc(dev, N * sizeof(float), &x));
    TC_OK(acg_buffer_alloc(dev, N * sizeof(float), &y));
    TC_OK(acg_buffer_alloc(dev, N * sizeof(float), &z));
    TC_OK(acg_kernel_get(dev, "axpy_f32", &axpy));
    TC_OK(acg_graph_pool_create(dev, &pool));
    static float got[2 * N], want[2 * N];
    capture(s, pool, axpy, y, x, 2.0f, N, 4, &g);
    void *const recorded = commands(g);

    /* A new scalar and a new buffer: the blocks change, the recording does not. */
    const acg_dims dims = {{N, 1, 1}, {0, 0, 0}};
    acg_arg args[3] = {acg_arg_buffer(z, 0), acg_arg_buffer(x, 0), acg_arg_f32(-1.5f)};
    TC_OK(acg_graph_update_kernel_node(g, 0, &dims, args, 3));
    assert_ptr_equal(commands(g), recorded);
    run_from_start(s, g, axpy, z, x, -1.5f, N, 4, got);
    run_from_start(s, NULL, axpy, z, x, -1.5f, N, 4, want);
    TC_OK(acg_stream_synchronize(s));
    TC_BYTES_EQUAL(got, want, sizeof got);

    /* A graph of the same topology whose kernel differs only in arguments: in place too. */
    capture(s, pool, axpy, y, x, 0.25f, N, 4, &from);
    TC_OK(acg_graph_update(g, from));
    assert_ptr_equal(commands(g), recorded);
    run_from_start(s, g, axpy, y, x, 0.25f, N, 4, got);
    run_from_start(s, NULL, axpy, y, x, 0.25f, N, 4, want);
    TC_OK(acg_stream_synchronize(s));
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_graph_destroy(from));

    /* A fill of another range: recorded again. */
    capture(s, pool, axpy, y, x, 0.25f, N, 6, &from);
    TC_OK(acg_graph_update(g, from));
    void *const again = commands(g);
    assert_ptr_not_equal(again, recorded);
    run_from_start(s, g, axpy, y, x, 0.25f, N, 6, got);
    run_from_start(s, NULL, axpy, y, x, 0.25f, N, 6, want);
    TC_OK(acg_stream_synchronize(s));
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_graph_destroy(from));

    /* A new grid: new dispatch sizes, recorded again. */
    const acg_dims third = {{N / 3, 1, 1}, {0, 0, 0}};
    args[0] = acg_arg_buffer(y, 0);
    args[2] = acg_arg_f32(4.0f);
    TC_OK(acg_graph_update_kernel_node(g, 0, &third, args, 3));
    assert_ptr_not_equal(commands(g), again);
    run_from_start(s, g, axpy, y, x, 4.0f, N / 3, 6, got);
    run_from_start(s, NULL, axpy, y, x, 4.0f, N / 3, 6, want);
    TC_OK(acg_stream_synchronize(s));
    TC_BYTES_EQUAL(got, want, sizeof got);

    TC_OK(acg_graph_destroy(g));
    TC_OK(acg_graph_pool_destroy(pool));
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_buffer_free(z));
    TC_OK(acg_stream_destroy(s));
    TC_OK(acg_device_close(dev));
}

/* Stream b waits for a's event while a still fills a large buffer, b is synchronized, and a and
 * the event are destroyed at once, many times over: the driver must be done with b's submission
 * by then. Lavapipe 22.3 locked a's destroyed semaphore afterwards (ThreadSanitizer reports it)
 * and leaked the host memory of the point b waited for, which the count here sees. */
static void test_destroy_after_wait(void **state) {
    (void)state;
    enum { BYTES = 16 << 20, ROUNDS = 100 };
    const int64_t base = acg__vk_host_alloc_live();
    acg_device *dev = NULL;
    TC_OK(acg_device_open(tc_spec(), &dev));
    acg_buffer *x = NULL, *y = NULL;
    TC_OK(acg_buffer_alloc(dev, BYTES, &x));
    TC_OK(acg_buffer_alloc(dev, 4096, &y));
    for (int i = 0; i < ROUNDS; i++) {
        acg_stream *a = NULL, *b = NULL;
        acg_event *e = NULL;
        TC_OK(acg_stream_create(dev, &a));
        TC_OK(acg_stream_create(dev, &b));
        TC_OK(acg_event_create(dev, &e));
        TC_OK(acg_fill(a, x, 0, BYTES, (uint32_t)i, 4));
        TC_OK(acg_event_record(e, a));
        TC_OK(acg_stream_wait_event(b, e));
        TC_OK(acg_fill(b, y, 0, 4096, (uint32_t)i, 4));
        TC_OK(acg_stream_synchronize(b)); /* b's wait submitted while a may still run */
        TC_OK(acg_stream_synchronize(a));
        TC_OK(acg_event_destroy(e));
        TC_OK(acg_stream_destroy(a));
        TC_OK(acg_stream_destroy(b));
    }
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(y));
    TC_OK(acg_device_close(dev));
    assert_int_equal(acg__vk_host_alloc_live(), base);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_host_alloc_sweep),
    cmocka_unit_test(test_update_in_place),
    cmocka_unit_test(test_destroy_after_wait),
};

TC_MAIN("test_vulkan_backend", tests)
