/* test_ze_nodes.c — the level_zero backend's per-node updates and kernels checked when loaded,
 * under the real Level Zero loader against acg's test driver (tests/ze_driver, named by
 * ZE_ENABLE_ALT_DRIVERS):
 *   - acg_graph_update_kernel_node patches a node's command in a mutable list, or records the
 *     list again, and its refusals and failures leave the graph replaying as before;
 *   - a kernel whose definition disagrees with its SPIR-V's parameters is refused when loaded;
 *   - the driver refuses a group size past the device's limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include <acg/acg.h>

#include "backend_scene.h"
#include "common.h" /* TC_OK */
#include "ze_scene.h"

#include "core/backend/acg-backend.h" /* acg__kernel_desc_find: the core's fill_f32 */

#define N BS_N

/* ---- per-node updates ----------------------------------------------------------------------- */

/* A graph of four nodes: y = fill(v) (node 0, a kernel over fill_n items), z = y (node 1, a
 * copy), z += a * x (node 2, a kernel over axpy_n items), z copied to pinned host (node 3); and
 * what its nodes are now, for the eager reference. */
typedef struct chain {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *fill, *axpy;
    acg_buffer *x, *x2, *y, *z, *small;
    float *host;
    acg_graph *g;
    float v, a;
    uint32_t fill_n, axpy_n;
    acg_buffer *xb; /* node 2's x */
} chain;

static void chain_run(chain *c, acg_stream *s) {
    acg_arg fill_args[] = {acg_arg_buffer(c->y, 0), acg_arg_f32(c->v)};
    acg_arg axpy_args[] = {acg_arg_buffer(c->z, 0), acg_arg_buffer(c->xb, 0), acg_arg_f32(c->a)};
    acg_dims fill_dims = acg_dims_1d(c->fill_n), axpy_dims = acg_dims_1d(c->axpy_n);
    TC_OK(acg_kernel_launch(s, c->fill, &fill_dims, fill_args, 2));
    TC_OK(acg_copy_d2d(s, c->z, 0, c->y, 0, N * sizeof(float)));
    TC_OK(acg_kernel_launch(s, c->axpy, &axpy_dims, axpy_args, 3));
    TC_OK(acg_copy_d2h(s, c->host, c->z, 0, N * sizeof(float)));
}

static void chain_open(chain *c) {
    memset(c, 0, sizeof *c);
    TC_OK(acg_device_open("level_zero", &c->dev));
    TC_OK(acg_stream_create(c->dev, &c->s));
    TC_OK(acg_kernel_get(c->dev, "fill_f32", &c->fill));
    TC_OK(acg_kernel_get(c->dev, "axpy_f32", &c->axpy));
    acg_buffer **bufs[] = {&c->x, &c->x2, &c->y, &c->z};
    for (int i = 0; i < 4; i++) {
        TC_OK(acg_buffer_alloc(c->dev, N * sizeof(float), bufs[i]));
    }
    TC_OK(acg_buffer_alloc(c->dev, 16, &c->small));
    TC_OK(acg_pinned_alloc(c->dev, N * sizeof(float), (void **)&c->host));
    TC_OK(bs_fill(c->s, c->fill, c->x, N, 1.0f));
    TC_OK(bs_fill(c->s, c->fill, c->x2, N, 0.25f));
    c->v = 2.0f;
    c->a = 3.0f;
    c->fill_n = c->axpy_n = N;
    c->xb = c->x;
    TC_OK(acg_stream_begin_capture(c->s, NULL));
    chain_run(c, c->s);
    TC_OK(acg_stream_end_capture(c->s, &c->g));
}

static void chain_close(chain *c) {
    TC_OK(acg_graph_destroy(c->g));
    TC_OK(acg_pinned_free(c->host));
    acg_buffer *bufs[] = {c->x, c->x2, c->y, c->z, c->small};
    for (int i = 0; i < 5; i++) {
        TC_OK(acg_buffer_free(bufs[i]));
    }
    TC_OK(acg_stream_destroy(c->s));
    TC_OK(acg_device_close(c->dev));
}

/* y and z set to -1.0 everywhere, so that what a narrower grid leaves shows. */
static void chain_reset(chain *c) {
    const float minus_one = -1.0f;
    uint32_t bits;
    memcpy(&bits, &minus_one, sizeof bits);
    TC_OK(acg_fill(c->s, c->y, 0, N * sizeof(float), bits, 4));
    TC_OK(acg_fill(c->s, c->z, 0, N * sizeof(float), bits, 4));
}

/* A replay equals, byte for byte, the same launches made eagerly with the nodes' arguments. */
static void expect_chain(chain *c) {
    float got[N], want[N];
    chain_reset(c);
    TC_OK(acg_graph_launch(c->g, c->s));
    TC_OK(acg_stream_synchronize(c->s));
    memcpy(got, c->host, sizeof got);
    chain_reset(c);
    chain_run(c, c->s);
    TC_OK(acg_stream_synchronize(c->s));
    memcpy(want, c->host, sizeof want);
    assert_memory_equal(got, want, sizeof got);
}

/* The backend's word that it patched one node's command (graph.c), logged at debug level. */
static unsigned long node_patches;

static void count_node_patches(acg_log_level level, const char *message, void *user) {
    (void)user;
    if (level == ACG_LOG_DEBUG && strstr(message, "level_zero: node ") != NULL &&
        strstr(message, "updated in place") != NULL) {
        node_patches++;
    }
}

/* How many lists the graph's updates recorded and patches they made, and of those, how many
 * patched a single node. */
typedef struct path_counts {
    unsigned long created, patched, node_patched;
} path_counts;

static path_counts path_now(void) {
    path_counts p = {ze_drv.calls("zeCommandListCreate"),
                     ze_drv.calls("zeCommandListUpdateMutableCommandsExp"), node_patches};
    return p;
}

/* Since `was`: one patch of the node alone and no list (patched), or one list and no patch
 * (recorded again). */
static void expect_path(path_counts was, bool patched) {
    path_counts now = path_now();
    assert_int_equal(now.patched - was.patched, patched ? 1 : 0);
    assert_int_equal(now.node_patched - was.node_patched, patched ? 1 : 0);
    assert_int_equal(now.created - was.created, patched ? 0 : 1);
}

/* acg_graph_update_kernel_node changes a scalar, a buffer and grids of a graph's kernel nodes,
 * each replay then equal to eager launches with the new arguments. Where the device has
 * mutable lists the node's command alone is patched; otherwise (the no-mutable-extension and
 * spec1.4 runs), and at the first update of a graph the driver captured, the graph's list is
 * recorded again. A patch the driver refuses is followed by a recording; a recording that fails
 * leaves the graph replaying as before, and so do the refusals of a wrong argument type, a window
 * past its buffer, a node that is no kernel and a node past the graph, which record and patch
 * nothing. */
static void test_node_update(void **state) {
    (void)state;
    chain c;
    chain_open(&c);
    ze_bind();
    acg_set_log_callback(count_node_patches, NULL);
    acg_set_log_level(ACG_LOG_DEBUG);
    const acg_capability *cap = acg_device_get_capability(c.dev);
    assert_true(cap->graph_node_update && cap->graph_node_update_grid);
    const bool mutable_lists = strstr(cap->detail, "mutable lists yes") != NULL;
    bool recorded = !cap->native_capture; /* a list of the description is the graph's */
    expect_chain(&c);

    /* Where the update records a list, a recording that fails changes nothing. */
    if (!mutable_lists || !recorded) {
        acg_arg args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(9.0f)};
        ze_drv.inject("zeCommandListCreate", 1, ZE_RESULT_ERROR_UNKNOWN);
        assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, args, 2), ACG_ERR_DEVICE);
        assert_non_null(strstr(acg_last_error(), "acg_graph_update_kernel_node: "
                                                 "zeCommandListCreate failed"));
        ze_drv.inject(NULL, 0, 0);
        expect_chain(&c);
    }

    /* A scalar. */
    path_counts was = path_now();
    c.v = 4.0f;
    acg_arg fill_args[] = {acg_arg_buffer(c.y, 0), acg_arg_f32(c.v)};
    TC_OK(acg_graph_update_kernel_node(c.g, 0, NULL, fill_args, 2));
    expect_path(was, mutable_lists && recorded);
    recorded = true;
    expect_chain(&c);

    /* A buffer. */
    was = path_now();
    c.xb = c.x2;
    acg_arg axpy_args[] = {acg_arg_buffer(c.z, 0), acg_arg_buffer(c.xb, 0), acg_arg_f32(c.a)};
    TC_OK(acg_graph_update_kernel_node(c.g, 2, NULL, axpy_args, 3));
    expect_path(was, mutable_lists);
    expect_chain(&c);

    /* Grids: node 0 over half of y (the rest keeps what was there), node 2 over a quarter. */
    was = path_now();
    c.fill_n = N / 2;
    c.v = 6.0f;
    acg_dims half = acg_dims_1d(N / 2), quarter = acg_dims_1d(N / 4);
    fill_args[1] = acg_arg_f32(c.v);
    TC_OK(acg_graph_update_kernel_node(c.g, 0, &half, fill_args, 2));
    expect_path(was, mutable_lists);
    was = path_now();
    c.axpy_n = N / 4;
    c.a = 0.5f;
    axpy_args[2] = acg_arg_f32(c.a);
    TC_OK(acg_graph_update_kernel_node(c.g, 2, &quarter, axpy_args, 3));
    expect_path(was, mutable_lists);
    expect_chain(&c);

    /* Refusals: the core's checks, before the backend records or patches anything. */
    was = path_now();
    acg_arg wrong_type[] = {acg_arg_buffer(c.y, 0), acg_arg_i32(1)};
    assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, wrong_type, 2),
                     ACG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(acg_last_error(), "argument 1 is a i32, the kernel takes a f32"));
    acg_arg too_far[] = {acg_arg_buffer(c.small, 0), acg_arg_f32(1.0f)};
    assert_int_equal(acg_graph_update_kernel_node(c.g, 0, NULL, too_far, 2), ACG_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(acg_last_error(), "past its 16-byte buffer"));
    assert_int_equal(acg_graph_update_kernel_node(c.g, 1, NULL, fill_args, 2),
                     ACG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(acg_last_error(), "is copy_d2d, not a kernel"));
    assert_int_equal(acg_graph_update_kernel_node(c.g, 4, NULL, fill_args, 2),
                     ACG_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(acg_last_error(), "has 4 nodes, there is no node 4"));
    path_counts now = path_now();
    assert_true(now.created == was.created && now.patched == was.patched);
    expect_chain(&c);

    /* A patch the driver refuses: the list is recorded again, with the update. */
    if (mutable_lists) {
        was = path_now();
        c.v = 7.0f;
        fill_args[1] = acg_arg_f32(c.v);
        ze_drv.inject("zeCommandListUpdateMutableCommandsExp", 1, ZE_RESULT_ERROR_UNKNOWN);
        TC_OK(acg_graph_update_kernel_node(c.g, 0, &half, fill_args, 2));
        ze_drv.inject(NULL, 0, 0);
        now = path_now();
        assert_int_equal(now.patched - was.patched, 1); /* refused */
        assert_int_equal(now.node_patched - was.node_patched, 0);
        assert_int_equal(now.created - was.created, 1);
        expect_chain(&c);
        was = path_now();
        c.a = 2.0f;
        axpy_args[2] = acg_arg_f32(c.a);
        TC_OK(acg_graph_update_kernel_node(c.g, 2, &quarter, axpy_args, 3));
        expect_path(was, true); /* the new list is mutable too */
        expect_chain(&c);
    }
    acg_set_log_callback(NULL, NULL);
    acg_set_log_level(ACG_LOG_ERROR);
    chain_close(&c);
    assert_int_equal(ze_drv.violations(), 0);
}

/* ---- kernels checked when loaded ------------------------------------------------------------ */

static void cpu_nothing(const acg_cpu_arg *args, const uint32_t global[3]) {
    (void)args;
    (void)global;
}

/* The core's fill_f32 module, built from its one source: a pointer, a ulong byte offset, a
 * float. */
static const acg_kernel_impl *fill_spirv(void) {
    const acg_kernel_desc *fill =
        acg__kernel_desc_find("level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, NULL, 0, "fill_f32");
    assert_non_null(fill);
    for (uint32_t i = 0; i < fill->n_impls; i++) {
        if (strcmp(fill->impls[i].format, ACG_KERNEL_FORMAT_SPIRV_OPENCL) == 0) {
            return &fill->impls[i];
        }
    }
    fail_msg("fill_f32 has no SPIR-V");
    return NULL;
}

/* A definition whose parameters are not those of its SPIR-V function (here the core's fill_f32:
 * a pointer, a ulong byte offset, a float) is refused by acg_kernel_get, naming the kernel, its
 * entry point and what acg passes: another count (zeKernelGetProperties), or, where the driver
 * tells sizes (zexKernelGetArgumentSize), a parameter of another size; the driver is left with
 * no kernel of it. Without the sizes only the count is checked. */
static void test_kernel_params_checked(void **state) {
    (void)state;
    static const struct {
        const char *name;
        uint32_t n_args;
        acg_arg_type types[3];
        bool size_only; /* the count agrees: only the sizes tell */
        const char *message;
    } cases[] = {
        {"ze_params_count",
         3,
         {ACG_ARG_BUFFER, ACG_ARG_F32, ACG_ARG_F32},
         false,
         "acg_kernel_get(ze_params_count): the SPIR-V kernel fill_f32 takes 3 parameters; acg "
         "passes 4: buffer argument 0 (a pointer and its ulong byte offset), f32 argument 1 "
         "(float), f32 argument 2 (float)"},
        {"ze_params_none",
         0,
         {ACG_ARG_F32},
         false,
         "acg_kernel_get(ze_params_none): the SPIR-V kernel fill_f32 takes 3 parameters; acg "
         "passes 0: nothing"},
        {"ze_params_size",
         2,
         {ACG_ARG_BUFFER, ACG_ARG_U64},
         true,
         "acg_kernel_get(ze_params_size): parameter 2 of the SPIR-V kernel fill_f32 is 4 bytes; "
         "acg passes 8 there: u64 argument 1 (ulong)"},
        {"ze_params_offset",
         2,
         {ACG_ARG_I64, ACG_ARG_BUFFER},
         true,
         "acg_kernel_get(ze_params_offset): parameter 2 of the SPIR-V kernel fill_f32 is 4 "
         "bytes; acg passes 8 there: the ulong byte offset of buffer argument 1"},
    };
    const size_t n_cases = sizeof cases / sizeof cases[0];
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev));
    ze_bind();
    const bool sizes = ze_driver_function_or_null("zexKernelGetArgumentSize") != NULL;
    const acg_kernel_impl *fill_spv = fill_spirv();
    for (size_t i = 0; i < n_cases; i++) {
        acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
        d.name = cases[i].name;
        d.n_args = cases[i].n_args;
        for (uint32_t a = 0; a < d.n_args; a++) {
            d.types[a] = cases[i].types[a];
            d.bytes_per_item[a] = d.types[a] == ACG_ARG_BUFFER ? 4 : 0;
        }
        d.flags = ACG_KERNEL_ELEMENTWISE;
        d.cpu.fn = cpu_nothing;
        d.spirv.module = fill_spv->code;
        d.spirv.size = fill_spv->size;
        d.spirv.name = "fill_f32";
        TC_OK(acg_kernel_register(&d));
        long live = ze_drv.live();
        acg_kernel *k = NULL;
        acg_status st = acg_kernel_get(dev, cases[i].name, &k);
        if (cases[i].size_only && !sizes) {
            TC_OK(st);
            continue;
        }
        assert_int_equal(st, ACG_ERR_INVALID_ARGUMENT);
        assert_string_equal(acg_last_error(), cases[i].message);
        assert_null(k);
        assert_int_equal(ze_drv.live(),
                         live + 1); /* the module stays, as the device's; no kernel */
    }
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "fill_f32", &k)); /* the definition that matches its module */
    TC_OK(acg_device_close(dev));
    for (size_t i = 0; i < n_cases; i++) {
        TC_OK(acg_kernel_unregister(cases[i].name));
    }
    assert_int_equal(ze_drv.violations(), 0);
}

/* ---- group sizes the driver refuses --------------------------------------------------------- */

/* zeKernelSetGroupSize refuses a size past the device's limits (zeDeviceGetComputeProperties:
 * 1024 along each dimension and in all) or of 0, as a GPU driver does, the product of three
 * 32-bit sizes wrapping past 64 bits too. The backend sizes groups from those limits, so a
 * kernel of the test's own, on the device's context, reaches the check. */
static void test_group_size_refused(void **state) {
    (void)state;
    acg_device *dev = NULL;
    TC_OK(acg_device_open("level_zero", &dev));
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(dev, &nd));
    long live = ze_drv.live();
    const acg_kernel_impl *spv = fill_spirv();
    ze_pfnModuleCreate_t module_create;
    ze_pfnModuleDestroy_t module_destroy;
    ze_pfnKernelCreate_t kernel_create;
    ze_pfnKernelDestroy_t kernel_destroy;
    ze_pfnKernelSetGroupSize_t set_size;
    *(void **)&module_create = ze_loader_function("zeModuleCreate");
    *(void **)&module_destroy = ze_loader_function("zeModuleDestroy");
    *(void **)&kernel_create = ze_loader_function("zeKernelCreate");
    *(void **)&kernel_destroy = ze_loader_function("zeKernelDestroy");
    *(void **)&set_size = ze_loader_function("zeKernelSetGroupSize");
    ze_module_desc_t md = {.stype = ZE_STRUCTURE_TYPE_MODULE_DESC,
                           .format = ZE_MODULE_FORMAT_IL_SPIRV,
                           .inputSize = spv->size,
                           .pInputModule = spv->code};
    ze_module_handle_t module = NULL;
    assert_int_equal(module_create((ze_context_handle_t)nd.context, (ze_device_handle_t)nd.device,
                                   &md, &module, NULL),
                     ZE_RESULT_SUCCESS);
    ze_kernel_desc_t kd = {.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC, .pKernelName = "fill_f32"};
    ze_kernel_handle_t kernel = NULL;
    assert_int_equal(kernel_create(module, &kd, &kernel), ZE_RESULT_SUCCESS);
    static const uint32_t refused[][3] = {
        {1u << 22, 1u << 21, 1u << 21}, /* the product wraps to 0 */
        {2048, 1, 1},                   /* past 1024 along x */
        {1, 1, 1025},                   /* along z */
        {64, 32, 1},                    /* 2048 in all */
        {0, 1, 1},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        print_message("refused group size %u x %u x %u\n", refused[i][0], refused[i][1],
                      refused[i][2]);
        assert_int_equal(set_size(kernel, refused[i][0], refused[i][1], refused[i][2]),
                         ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION);
    }
    assert_int_equal(set_size(kernel, 1024, 1, 1), ZE_RESULT_SUCCESS);
    assert_int_equal(set_size(kernel, 32, 16, 2), ZE_RESULT_SUCCESS);
    assert_int_equal(kernel_destroy(kernel), ZE_RESULT_SUCCESS);
    assert_int_equal(module_destroy(module), ZE_RESULT_SUCCESS);
    assert_int_equal(ze_drv.live(), live);
    TC_OK(acg_device_close(dev));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_node_update),
    cmocka_unit_test(test_kernel_params_checked),
    cmocka_unit_test(test_group_size_refused),
};

BS_MAIN("level_zero", NULL, "test_ze_nodes", tests)
