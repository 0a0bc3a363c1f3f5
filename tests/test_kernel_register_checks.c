/* test_kernel_register_checks.c — what registration and launch refuse, and how: every malformed
 * definition of a kernel, refused with its cause before anything is kept; the windows and grid
 * a definition's shape says, as a callback or as data, and the launches they refuse; grids too
 * large; and a refused launch queues and records nothing. The kernel and the fixture are
 * kernel_register_fixture.h's. */
#include "kernel_register_fixture.h"

#include <stdio.h>
#include <string.h>

#include "core/acg-impl.h" /* acg__backend_find */

/* ---- malformed definitions ------------------------------------------------------------------ */

typedef struct malformed {
    const char *why; /* what the message must contain */
    void (*spoil)(acg_kernel_desc *d);
} malformed;

static void no_name(acg_kernel_desc *d) { d->name = NULL; }
static void empty_name(acg_kernel_desc *d) { d->name = ""; }
static void too_many_args(acg_kernel_desc *d) { d->n_args = ACG_MAX_KERNEL_ARGS + 1; }
static void type_zero(acg_kernel_desc *d) { d->types[2] = (acg_arg_type)0; }
static void type_unknown(acg_kernel_desc *d) { d->types[3] = (acg_arg_type)7; }
static void scalar_bytes(acg_kernel_desc *d) { d->bytes_per_item[3] = 4; }
static void unshaped_buffer(acg_kernel_desc *d) {
    d->shape = NULL;
    d->flags = ACG_KERNEL_ELEMENTWISE;
    d->dims = 1;
    d->bytes_per_item[2] = 0;
}
static void dims_zero(acg_kernel_desc *d) { d->dims = 0; }
static void dims_four(acg_kernel_desc *d) { d->dims = 4; }
static void unshaped_2d(acg_kernel_desc *d) {
    d->shape = NULL;
    d->flags = ACG_KERNEL_ELEMENTWISE;
}
/* How far buffers reach: said in no way, in two, or by data rules that are malformed. */
static void no_reach(acg_kernel_desc *d) { d->shape = NULL; }
static void two_ways(acg_kernel_desc *d) { d->flags = ACG_KERNEL_ELEMENTWISE; }
static void flags_unknown(acg_kernel_desc *d) { d->flags = 1u << 7; }
static void reach_and_shape(acg_kernel_desc *d) { d->reach[0].bytes = 4; }
static void reach_rules(acg_kernel_desc *d) {
    d->shape = NULL;
    d->reach[0] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    d->reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    d->reach[2] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ONE}};
}
static void reach_missing(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[1] = (acg_kernel_reach){0, {0, 0}};
}
static void reach_of_scalar(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[3].bytes = 4;
}
static void reach_past_args(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[7].bytes = 4;
}
static void reach_by_buffer(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[2].by[1] = ACG_BY_ARG(0);
}
static void reach_by_past_args(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[2].by[0] = ACG_BY_ARG(9);
}
static void reach_by_dim_past(acg_kernel_desc *d) {
    reach_rules(d);
    d->reach[2].by[0] = ACG_BY_GLOBAL(2);
}
static void covers_past_dims(acg_kernel_desc *d) {
    reach_rules(d);
    d->grid_covers[2] = ACG_BY_ARG(3);
}
static void covers_by_grid(acg_kernel_desc *d) {
    reach_rules(d);
    d->grid_covers[0] = ACG_BY_GLOBAL(1);
}
static void name_with_slash(acg_kernel_desc *d) { d->name = "engine/rowscale"; }
static void pair_same(acg_kernel_desc *d) {
    d->in_place[0] = 1;
    d->in_place[1] = 1;
}
static void pair_out_of_range(acg_kernel_desc *d) {
    d->in_place[0] = 0;
    d->in_place[1] = 5;
}
static void pair_scalar(acg_kernel_desc *d) {
    d->in_place[0] = 0;
    d->in_place[1] = 3;
}
static void exactness_unknown(acg_kernel_desc *d) { d->exactness = (acg_kernel_exactness)9; }
static void no_code(acg_kernel_desc *d) {
    d->cpu.fn = NULL;
    rowscale_drop_legacy(d);
}
static void opencl_name_only(acg_kernel_desc *d) { d->opencl.source = NULL; }
/* The binary of the cuda field, or the module of the spirv field, and its size. */
static void cuda_image(acg_kernel_desc *d, const void *fatbin, size_t size) {
    d->cuda.fatbin = fatbin;
    d->cuda.size = size;
}
static void spirv_module(acg_kernel_desc *d, const void *module, size_t size) {
    d->spirv.module = module;
    d->spirv.size = size;
}
static void fatbin_no_size(acg_kernel_desc *d) { cuda_image(d, rowscale_cl, 0); }
static void fatbin_size_only(acg_kernel_desc *d) { cuda_image(d, NULL, 16); }
static void spirv_name_only(acg_kernel_desc *d) {
    spirv_module(d, NULL, 0);
    d->spirv.name = "tk";
}
static void spirv_no_size(acg_kernel_desc *d) { spirv_module(d, rowscale_cl, 0); }
static void spirv_size_only(acg_kernel_desc *d) { spirv_module(d, NULL, 20); }
static void lanes_three(acg_kernel_desc *d) {
    cuda_image(d, rowscale_cl, 16); /* any bytes: nothing is loaded before the check */
    d->cuda_lanes = 3;
}
static void lanes_2048(acg_kernel_desc *d) {
    lanes_three(d);
    d->cuda_lanes = 2048;
}
static void lanes_without_fatbin(acg_kernel_desc *d) {
    memset(&d->cuda, 0, sizeof d->cuda);
    d->cuda_lanes = 32;
}
/* Lists of implementations whose last entry is malformed, after two good ones (one of a format
 * no backend here takes, which is kept). */
static acg_kernel_impl spoiled[3];
static void impls_ending(acg_kernel_desc *d, acg_kernel_impl last) {
    spoiled[0] = (acg_kernel_impl){"opencl", ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, NULL};
    spoiled[1] = (acg_kernel_impl){"vulkan", "vulkan-spirv", rowscale_cl, 16, NULL};
    spoiled[2] = last;
    d->impls = spoiled;
    d->n_impls = 3;
}
static void impl_format_null(acg_kernel_desc *d) {
    impls_ending(d, (acg_kernel_impl){"opencl", NULL, rowscale_cl, 0, NULL});
}
static void impl_format_empty(acg_kernel_desc *d) {
    impls_ending(d, (acg_kernel_impl){"opencl", "", rowscale_cl, 0, NULL});
}
static void impl_code_null(acg_kernel_desc *d) {
    impls_ending(d, (acg_kernel_impl){"opencl", ACG_KERNEL_FORMAT_OPENCL_C, NULL, 0, NULL});
}
static void impl_backend_empty(acg_kernel_desc *d) {
    impls_ending(d, (acg_kernel_impl){"", ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, NULL});
}
static void impls_null(acg_kernel_desc *d) {
    d->impls = NULL;
    d->n_impls = 2;
}
static void impls_too_many(acg_kernel_desc *d) {
    static acg_kernel_impl many[ACG_MAX_KERNEL_IMPLS + 1];
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++) {
        many[i] = (acg_kernel_impl){NULL, ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, NULL};
    }
    d->impls = many;
    d->n_impls = ACG_MAX_KERNEL_IMPLS + 1;
}
/* cuda_lanes with code for cuda nowhere: only OpenCL C, and a cuda image for another backend. */
static void lanes_without_cuda_image(acg_kernel_desc *d) {
    lanes_without_fatbin(d);
    impls_ending(d, (acg_kernel_impl){"hip", ACG_KERNEL_FORMAT_CUDA_IMAGE, rowscale_cl, 16, NULL});
}
static void never_part(const acg_cpu_arg *a, const uint32_t global[3], uint32_t part,
                       uint32_t n_parts) {
    (void)a;
    (void)global;
    (void)part;
    (void)n_parts;
    fail();
}
static void parts_only(acg_kernel_desc *d) { d->cpu_parts.parts = never_parts; }
static void part_fn_only(acg_kernel_desc *d) { d->cpu_parts.fn = never_part; }
static void parts_without_cpu_fn(acg_kernel_desc *d) {
    d->cpu_parts.parts = never_parts;
    d->cpu_parts.fn = never_part;
    d->cpu.fn = NULL; /* opencl code remains: the kernel has an implementation */
}

/* Each malformed definition is refused with ACG_ERR_INVALID_ARGUMENT naming its fault, and
 * nothing of it is registered. */
static void test_malformed_refused(void **state) {
    (void)state;
    static const malformed cases[] = {
        {"no name", no_name},
        {"no name", empty_name},
        {"n_args", too_many_args},
        {"types[2]", type_zero},
        {"types[3]", type_unknown},
        {"argument 3 is a scalar", scalar_bytes},
        {"no bytes_per_item and the kernel is elementwise", unshaped_buffer},
        {"dims is 0", dims_zero},
        {"dims is 4", dims_four},
        {"an elementwise kernel is 1-D, but dims is 2", unshaped_2d},
        {"buffer argument 0: nothing says how far it reaches; set reach[0], a shape rule, or "
         "ACG_KERNEL_ELEMENTWISE",
         no_reach},
        {"in one way: ACG_KERNEL_ELEMENTWISE, a shape rule or reach[], not ACG_KERNEL_ELEMENTWISE "
         "shape",
         two_ways},
        {"flags 0x80 has unknown bits", flags_unknown},
        {"not shape reach[]", reach_and_shape},
        {"buffer argument 1 has no reach[1].bytes", reach_missing},
        {"argument 3 is a scalar, its reach must be {0}", reach_of_scalar},
        {"reach[7] is set past the 5 arguments", reach_past_args},
        {"reach[2].by[1] = 1 names no integer scalar argument", reach_by_buffer},
        {"reach[2].by[0] = 10 names no integer scalar argument", reach_by_past_args},
        {"reach[2].by[0] = 66 names a dimension past dims", reach_by_dim_past},
        {"grid_covers[2] = 4 is a dimension past dims", covers_past_dims},
        {"grid_covers[0] = 65 names the grid", covers_by_grid},
        {"a name with '/' belongs to a kernel set", name_with_slash},
        {"in_place {1, 1}", pair_same},
        {"in_place {0, 5}", pair_out_of_range},
        {"in_place {0, 3}", pair_scalar},
        {"exactness 9", exactness_unknown},
        {"no implementation", no_code},
        {"opencl.name without opencl.source", opencl_name_only},
        {"cuda.fatbin, cuda.size and cuda.name", fatbin_no_size},
        {"cuda.fatbin, cuda.size and cuda.name", fatbin_size_only},
        {"spirv.module, spirv.size and spirv.name", spirv_name_only},
        {"spirv.module, spirv.size and spirv.name", spirv_no_size},
        {"spirv.module, spirv.size and spirv.name", spirv_size_only},
        {"cpu_parts needs both", parts_only},
        {"cpu_parts needs both", part_fn_only},
        {"cpu_parts without cpu.fn", parts_without_cpu_fn},
        {"(tk_malformed): impls[2].format is NULL", impl_format_null},
        {"(tk_malformed): impls[2].format is empty", impl_format_empty},
        {"(tk_malformed): impls[2].code is NULL", impl_code_null},
        {"(tk_malformed): impls[2].backend is empty", impl_backend_empty},
        {"impls is NULL, but n_impls is 2", impls_null},
        {"n_impls is 65, at most ACG_MAX_KERNEL_IMPLS (64)", impls_too_many},
    };
    /* The cuda backend's own checks (its kernel_check slot): where the build has it. */
    static const malformed cuda_cases[] = {
        {"cuda_lanes 3 is not a power of two", lanes_three},
        {"cuda_lanes 2048 is not a power of two up to 1024", lanes_2048},
        {"cuda_lanes without a cuda-image implementation", lanes_without_fatbin},
        {"cuda_lanes without a cuda-image implementation", lanes_without_cuda_image},
    };
    const size_t n_core = sizeof cases / sizeof cases[0];
    const size_t n_cuda =
        acg__backend_find("cuda") != NULL ? sizeof cuda_cases / sizeof cuda_cases[0] : 0;
    if (n_cuda == 0) {
        printf("skipped: the cuda backend's checks (cuda_lanes); this build lacks it\n");
    }
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(NULL));
    TC_LAST_ERROR_HAS("acg_kernel_register");
    acg_device *dev = tc_open();
    for (size_t i = 0; i < n_core + n_cuda; i++) {
        const malformed *c = i < n_core ? &cases[i] : &cuda_cases[i - n_core];
        acg_kernel_desc d = rowscale_desc("tk_malformed");
        d.cpu.fn = tc_never_called;
        c->spoil(&d);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&d));
        TC_LAST_ERROR_HAS("acg_kernel_register");
        TC_LAST_ERROR_HAS(c->why);
        acg_kernel *k = NULL;
        TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "tk_malformed", &k));
    }
    tc_close(dev);
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered, nothing held */
}

/* ---- launches ----------------------------------------------------------------------------------
 */

/* The same kernel with its shape said as data (reach, grid_covers) instead of a callback: the
 * same bytes eagerly, and the same windows checked, so the same launches refused. */
static void test_data_rules(void **state) {
    assert_int_equal(rowscale_setup(state), 0);
    fx *f = *state;
    acg_kernel_desc d = rowscale_desc("tk_rowscale_data");
    d.shape = NULL;
    d.reach[0] = d.reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    d.reach[2] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ONE}};
    d.grid_covers[0] = ACG_BY_ARG(3);
    d.grid_covers[1] = ACG_BY_ARG(4);
    TC_OK(acg_kernel_register(&d));
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_data", &k));
    float by_rule[CAP], by_data[CAP];
    TC_OK(rowscale(f->io.s, f->k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS));
    rowscale_download(f, by_rule);
    tc_poison(f->io.s, f->io.out);
    TC_OK(rowscale(f->io.s, k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS));
    rowscale_download(f, by_data);
    TC_BYTES_EQUAL(by_data, by_rule, sizeof by_data);
    /* One row too many reaches past x and out; w is read once per column. */
    TC_EXPECT(ERR_OUT_OF_RANGE,
              rowscale(f->io.s, k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS + 1));
    TC_LAST_ERROR_HAS("argument 0 reaches [0, +1056), past its 960-byte buffer");
    TC_EXPECT(ERR_OUT_OF_RANGE,
              rowscale(f->io.s, k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH + 1, 2));
    TC_LAST_ERROR_HAS("argument 2 reaches [0, +100), past its 96-byte buffer");
    /* A window that follows the grid: w reaching 4 bytes per work item along x. */
    acg_kernel_desc by_grid = d;
    by_grid.name = "tk_rowscale_grid";
    by_grid.reach[2] = (acg_kernel_reach){4, {ACG_BY_GLOBAL(0), ACG_BY_ONE}};
    TC_OK(acg_kernel_register(&by_grid));
    acg_kernel *kg = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_grid", &kg));
    const acg_arg gargs[] = {acg_arg_buffer(f->io.out, 0), acg_arg_buffer(f->io.x, 0),
                             acg_arg_buffer(f->io.w, 0), acg_arg_u32(WIDTH - 1), acg_arg_u32(2)};
    const acg_dims wide = grid2(WIDTH + 1, 2);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->io.s, kg, &wide, gargs, 5));
    TC_LAST_ERROR_HAS("argument 2 reaches [0, +100), past its 96-byte buffer");
    /* A grid below the rows it must cover. */
    const acg_arg args[] = {acg_arg_buffer(f->io.out, 0), acg_arg_buffer(f->io.x, 0),
                            acg_arg_buffer(f->io.w, 0), acg_arg_u32(WIDTH), acg_arg_u32(ROWS)};
    const acg_dims short_grid = grid2(WIDTH, ROWS - 1);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, k, &short_grid, args, 5));
    TC_LAST_ERROR_HAS("the grid must cover argument 4: global[1] is 9, below 10");
    TC_OK(acg_stream_synchronize(f->io.s));
    /* grid_covers holds with a shape callback too, checked before the callback runs. */
    acg_kernel_desc shaped = rowscale_desc("tk_rowscale_covered");
    shaped.grid_covers[1] = ACG_BY_ARG(4);
    shaped.shape = reached_shape;
    TC_OK(acg_kernel_register(&shaped));
    acg_kernel *kc = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_covered", &kc));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, kc, &short_grid, args, 5));
    TC_LAST_ERROR_HAS("the grid must cover argument 4: global[1] is 9, below 10");
    const acg_dims full = grid2(WIDTH, ROWS);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, kc, &full, args, 5));
    TC_LAST_ERROR_HAS("the shape rule was reached");
    rowscale_teardown(state);

    /* A signed factor below zero is refused by name (never run: the window would be negative).
     * The definition's i32 matches no compiled code (the OpenCL C takes a uint, which
     * acg_kernel_get refuses), so it is the C code's alone, on the cpu backend. */
    acg_kernel_desc s32 = rowscale_desc("tk_rowscale_i32");
    s32.shape = NULL;
    s32.types[3] = ACG_ARG_I32;
    s32.reach[0] = s32.reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    s32.reach[2] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ONE}};
    s32.cpu.fn = tc_never_called;
    rowscale_drop_legacy(&s32);
    TC_OK(acg_kernel_register(&s32));
    acg_device *cpu = tc_open_cpu();
    tc_rows_io io;
    tc_rows_io_open(&io, cpu, CAP * 4, NULL, CAP * 4, NULL, WIDTH * 4);
    acg_kernel *k32 = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_rowscale_i32", &k32));
    const acg_arg neg[] = {acg_arg_buffer(io.out, 0), acg_arg_buffer(io.x, 0),
                           acg_arg_buffer(io.w, 0), acg_arg_i32(-2), acg_arg_u32(ROWS)};
    const acg_dims grid = grid2(WIDTH, ROWS);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(io.s, k32, &grid, neg, 5));
    TC_LAST_ERROR_HAS("argument 3 is negative (-2) and sizes a buffer's window");
    /* The product saturates (4 * 2^31 * 2^32 is past 64 bits): refused, not wrapped. */
    const acg_arg huge[] = {acg_arg_buffer(io.out, 0), acg_arg_buffer(io.x, 0),
                            acg_arg_buffer(io.w, 0), acg_arg_i32(INT32_MAX),
                            acg_arg_u32(UINT32_MAX)};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(io.s, k32, &grid, huge, 5));
    TC_LAST_ERROR_HAS("reaches [0, +18446744073709551615)");
    tc_rows_io_close(&io);
    tc_close(cpu);
    TC_OK(acg_kernel_unregister("tk_rowscale_data"));
    TC_OK(acg_kernel_unregister("tk_rowscale_i32"));
    TC_OK(acg_kernel_unregister("tk_rowscale_grid"));
    TC_OK(acg_kernel_unregister("tk_rowscale_covered"));
}

/* A grid of more than UINT32_MAX work items is refused, also one whose product of three 32-bit
 * sizes wraps 64 bits to 0 ({2^31, 2^31, 4}), which a check of the whole product misses. */
static void test_grid_overflow(void **state) {
    (void)state;
    acg_kernel_desc d = rowscale_desc("tk_grid3");
    d.dims = 3;
    d.shape = reached_shape;
    d.cpu.fn = tc_never_called;
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    acg_stream *s = tc_stream(dev);
    acg_buffer *b = tc_buffer(dev, 64);
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_grid3", &k));
    const acg_arg args[] = {acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(b, 0),
                            acg_arg_u32(1), acg_arg_u32(1)};
    const acg_dims wraps = {{1u << 31, 1u << 31, 4}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(s, k, &wraps, args, 5));
    TC_LAST_ERROR_HAS("has more than 4294967295 work items");
    TC_LAST_ERROR_HAS("{2147483648, 2147483648, 4}");
    const acg_dims too_many = {{1u << 16, 1u << 16, 2}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(s, k, &too_many, args, 5));
    TC_LAST_ERROR_HAS("work items");
    /* The most there may be passes the grid checks. */
    const acg_dims most = {{65537, 65535, 1}, {0, 0, 0}};
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(s, k, &most, args, 5));
    TC_LAST_ERROR_HAS("the shape rule was reached");
    TC_OK(acg_stream_synchronize(s));
    TC_OK(acg_buffer_free(b));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_grid3"));
}

/* A launch with the wrong argument list, or one its shape rule or windows refuse, is refused
 * before anything is queued or recorded: the output keeps its poison, a capture stays active
 * and its graph holds only the launches that were accepted. */
static void test_bad_launch_submits_nothing(void **state) {
    fx *f = *state;
    const acg_dims d = grid2(WIDTH, ROWS), short_grid = grid2(WIDTH, ROWS - 1);
    const acg_arg good[] = {acg_arg_buffer(f->io.out, 0), acg_arg_buffer(f->io.x, 0),
                            acg_arg_buffer(f->io.w, 0), acg_arg_u32(WIDTH), acg_arg_u32(ROWS)};
    acg_arg bad[5];
    const bool graphs = tc_cap()->graphs;
    for (int capture = 0; capture <= (graphs ? 1 : 0); capture++) {
        if (capture) {
            TC_OK(acg_stream_begin_capture(f->io.s, NULL));
            TC_OK(rowscale(f->io.s, f->k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH,
                           1)); /* one good node */
        }
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, good, 4));
        TC_LAST_ERROR_HAS("5");
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, NULL, 5));
        memcpy(bad, good, sizeof bad);
        bad[3] = acg_arg_i32(WIDTH);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("argument 3 is a i32");
        memcpy(bad, good, sizeof bad);
        bad[2] = acg_arg_u32(0);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("argument 2 is a u32");
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &short_grid, good, 5));
        TC_LAST_ERROR_HAS("the grid must cover (width, n)");
        const acg_dims three = {{WIDTH, ROWS, 2}, {0, 0, 0}};
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &three, good, 5));
        memcpy(bad, good, sizeof bad);
        bad[4] = acg_arg_u32(ROWS + 1); /* a row past the buffers */
        const acg_dims more = grid2(WIDTH, ROWS + 1);
        TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->io.s, f->k, &more, bad, 5));
        memcpy(bad, good, sizeof bad);
        bad[1] = acg_arg_buffer(f->io.x, 2); /* misaligned */
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, bad, 5));
        memcpy(bad, good, sizeof bad);
        bad[2] = acg_arg_buffer(f->io.out, 0); /* w on out's window: not the in-place pair */
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("does not work in place");
        memcpy(bad, good, sizeof bad);
        bad[1] = acg_arg_buffer(f->io.out, 4 * sizeof(float)); /* the pair, but shifted */
        const acg_dims fewer = grid2(WIDTH, ROWS - 1);
        bad[4] = acg_arg_u32(ROWS - 1);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->io.s, f->k, &fewer, bad, 5));
        TC_LAST_ERROR_HAS("without being the same window");
        if (capture) {
            tc_end_capture_expect_nodes(f->io.s, 1);
        }
        float back[CAP], poison[CAP];
        rowscale_download(f, back);
        uint32_t p = 0xdeadbeefu;
        for (size_t i = 0; i < CAP; i++) {
            memcpy(&poison[i], &p, 4);
        }
        TC_BYTES_EQUAL(back, poison, sizeof back);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_malformed_refused),
    cmocka_unit_test(test_data_rules),
    cmocka_unit_test(test_grid_overflow),
    cmocka_unit_test_setup_teardown(test_bad_launch_submits_nothing, rowscale_setup,
                                    rowscale_teardown),
    cmocka_unit_test(nothing_left_alive), /* last: checks what every case before left */
};
TC_MAIN("test_kernel_register_checks", tests)
