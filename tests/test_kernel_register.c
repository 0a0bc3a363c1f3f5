/* test_kernel_register.c — kernels a user registers: launched, captured, replayed and updated like
 * the core's; refused on a backend they have no code for; a name registered once; the definition
 * copied, and sized as every acg config struct is; racing registrations; and every allocation of
 * a registered kernel's life failing in turn. Malformed definitions and launches are
 * test_kernel_register_checks.c's, lists of implementations and sets
 * test_kernel_register_impls.c's; the kernel and the fixture are kernel_register_fixture.h's. */
#include "kernel_register_fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h> /* acg_model_register_kernels */

#include "core/acg-impl.h" /* a loaded kernel's definition, the core's kernels */

/* ---- cases ----------------------------------------------------------------------------------- */

/* A registered kernel runs eagerly as its C or OpenCL code says; a capture of it replays the
 * eager bytes; and the cpu backend, the oracle, computes the same bytes (the kernel is exact on
 * every backend). */
static void test_launch_capture_replay(void **state) {
    fx *f = *state;
    assert_string_equal(acg_kernel_get_name(f->k), "tk_rowscale_f32");
    acg_kernel *again = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_f32", &again));
    assert_ptr_equal(again, f->k); /* one load per device */

    float want[CAP], eager[CAP], replay[CAP];
    rowscale_ref(want, f->hx, f->hw, WIDTH, ROWS);
    TC_OK(rowscale(f->io.s, f->k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS));
    rowscale_download(f, eager);
    TC_BYTES_EQUAL(eager, want, sizeof want);

    /* In place, on the declared pair: x *= w twice. */
    acg_buffer *y = tc_buffer(f->dev, sizeof f->hx);
    tc_upload(f->io.s, y, f->hx, sizeof f->hx);
    TC_OK(rowscale(f->io.s, f->k, y, 0, y, 0, f->io.w, WIDTH, ROWS));
    TC_OK(rowscale(f->io.s, f->k, y, 0, y, 0, f->io.w, WIDTH, ROWS));
    float twice[CAP], back[CAP];
    rowscale_ref(twice, want, f->hw, WIDTH, ROWS);
    tc_download(f->io.s, back, y, sizeof back);
    TC_BYTES_EQUAL(back, twice, sizeof back);
    TC_OK(acg_buffer_free(y));

    /* The oracle. */
    acg_device *cpu = tc_open_cpu();
    rowscale_on(cpu, "tk_rowscale_f32", f->hx, f->hw, back);
    TC_BYTES_EQUAL(back, eager, sizeof back);
    tc_close(cpu);

    if (!tc_has_graphs(f->dev, f->io.s)) {
        tc_skip("no graphs: checked the eager launch only");
    }
    tc_poison(f->io.s, f->io.out);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->io.s, NULL));
    TC_OK(rowscale(f->io.s, f->k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS));
    TC_OK(acg_stream_end_capture(f->io.s, &g));
    const acg_node_info info = tc_node(g, 0);
    assert_int_equal(info.kind, ACG_NODE_KERNEL);
    assert_string_equal(info.kernel, "tk_rowscale_f32");
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_graph_launch(g, f->io.s));
        rowscale_download(f, replay);
        TC_BYTES_EQUAL(replay, eager, sizeof replay);
    }
    /* A graph holds what it uses: neither the device nor the kernel's definition can go. */
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister("tk_rowscale_f32"));
    TC_OK(acg_graph_destroy(g));
}

/* acg_graph_update re-points a captured launch of a registered kernel (other rows, another
 * window) and the replay then equals an eager launch with the new arguments. */
static void test_graph_update(void **state) {
    fx *f = *state;
    if (!tc_has_graphs(f->dev, f->io.s)) {
        tc_skip("no graphs");
    }
    acg_graph *g = NULL, *from = NULL;
    TC_OK(acg_stream_begin_capture(f->io.s, NULL));
    TC_OK(rowscale(f->io.s, f->k, f->io.out, 0, f->io.x, 0, f->io.w, WIDTH, ROWS));
    TC_OK(acg_stream_end_capture(f->io.s, &g));
    /* The same node, its rows shifted by two in both windows and four rows fewer. */
    const size_t shift = 2 * WIDTH * sizeof(float);
    TC_OK(acg_stream_begin_capture(f->io.s, NULL));
    TC_OK(rowscale(f->io.s, f->k, f->io.out, shift, f->io.x, shift, f->io.w, WIDTH, ROWS - 4));
    TC_OK(acg_stream_end_capture(f->io.s, &from));
    const bool upd = tc_has_graph_update(g, from);
    if (upd) {
        TC_OK(acg_graph_update(g, from));
        TC_OK(acg_graph_destroy(from));
        from = NULL;
        tc_poison(f->io.s, f->io.out);
        TC_OK(acg_graph_launch(g, f->io.s));
        float replay[CAP], eager[CAP];
        rowscale_download(f, replay);
        tc_poison(f->io.s, f->io.out);
        TC_OK(rowscale(f->io.s, f->k, f->io.out, shift, f->io.x, shift, f->io.w, WIDTH, ROWS - 4));
        rowscale_download(f, eager);
        TC_BYTES_EQUAL(replay, eager, sizeof replay);
        float want[CAP];
        memcpy(want, eager, sizeof want);
        rowscale_ref(want + 2 * WIDTH, f->hx + 2 * WIDTH, f->hw, WIDTH, ROWS - 4);
        TC_BYTES_EQUAL(eager, want, sizeof want);
    }
    TC_OK(acg_graph_destroy(from));
    TC_OK(acg_graph_destroy(g));
    if (!upd) {
        tc_skip("no graph update");
    }
}

/* A definition without code for the device's backend is found but refused with
 * ACG_ERR_UNSUPPORTED naming the kernel and the backend; the refusal loads nothing, so the
 * definition unregisters at once. Both directions are checked on the cpu backend's device,
 * and the device under test checks the one that applies to it. */
static void test_no_code_for_backend(void **state) {
    (void)state;
    const acg_kernel_desc cpu_only = rowscale_desc_impls("tk_cpu_only", NULL, 0);
    acg_kernel_desc opencl_only = rowscale_desc_impls("tk_opencl_only", NULL, 0);
    opencl_only.cpu.fn = NULL;
    opencl_only.opencl.source = rowscale_cl;
    opencl_only.opencl.name = "tk_rowscale";
    TC_OK(acg_kernel_register(&cpu_only));
    TC_OK(acg_kernel_register(&opencl_only));

    acg_device *devs[2] = {tc_open_cpu(), tc_open()};
    for (int i = 0; i < 2; i++) {
        const char *backend = acg_device_get_capability(devs[i])->backend;
        acg_kernel *k = NULL;
        if (strcmp(backend, "cpu") == 0) {
            TC_OK(acg_kernel_get(devs[i], "tk_cpu_only", &k));
        } else {
            expect_no_code(devs[i], "tk_cpu_only");
        }
        if (strcmp(backend, "opencl") == 0) {
            TC_OK(acg_kernel_get(devs[i], "tk_opencl_only", &k));
        } else {
            expect_no_code(devs[i], "tk_opencl_only");
        }
    }
    /* What no device could load is not held: it unregisters while the devices are open. */
    const bool dut_opencl = tc_backend_is("opencl");
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister("tk_cpu_only"));
    if (!dut_opencl) {
        TC_OK(acg_kernel_unregister("tk_opencl_only"));
    } else {
        TC_EXPECT(ERR_IN_USE, acg_kernel_unregister("tk_opencl_only"));
    }
    tc_close(devs[0]);
    tc_close(devs[1]);
    TC_OK(acg_kernel_unregister("tk_cpu_only"));
    if (dut_opencl) {
        TC_OK(acg_kernel_unregister("tk_opencl_only"));
    }
}

/* A name is registered once: a second registration, or one with a core kernel's name, is
 * refused and keeps the first; unregistering frees the name; the core's kernels stay. A
 * registered kernel holds memory from the allocator hook, so the hook cannot change under it. */
static void test_duplicate_and_unregister(void **state) {
    (void)state;
    const acg_kernel_desc d = rowscale_desc("tk_dup");
    TC_OK(acg_kernel_register(&d));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&d));
    TC_LAST_ERROR_HAS("already registered");
    TC_LAST_ERROR_HAS("tk_dup");
    const acg_kernel_desc core = rowscale_desc("fill_f32");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&core));
    TC_LAST_ERROR_HAS("already registered");
    TC_EXPECT(ERR_IN_USE, acg_set_allocator(NULL, NULL));

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister("fill_f32"));
    TC_LAST_ERROR_HAS("core");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister(NULL));
    TC_OK(acg_kernel_unregister("tk_dup"));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister("tk_dup"));
    TC_LAST_ERROR_HAS("tk_dup");
    TC_OK(acg_set_allocator(NULL, NULL));

    /* The name is free again, and the first registration's kernel is not found after it. */
    acg_device *dev = tc_open();
    acg_kernel *k = NULL;
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "tk_dup", &k));
    TC_OK(acg_kernel_register(&d));
    TC_OK(acg_kernel_get(dev, "tk_dup", &k));
    TC_OK(acg_kernel_get(dev, "fill_f32", &k));
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_dup"));
}

/* The caller's definition is copied, strings included: it may change or go at once. The copy
 * runs out of place and in place (out = x). */
static void test_desc_copied(void **state) {
    (void)state;
    char name[32], fn_name[16];
    const size_t source_size = strlen(rowscale_cl) + 1;
    char *source = malloc(source_size);
    assert_non_null(source);
    strcpy(name, "tk_copied");
    memcpy(source, rowscale_cl, source_size);
    strcpy(fn_name, "tk_rowscale");
    acg_kernel_desc *d = malloc(sizeof *d);
    assert_non_null(d);
    *d = rowscale_desc(name);
    d->opencl.source = source;
    d->opencl.name = fn_name;
    TC_OK(acg_kernel_register(d));
    memset(d, 0x5a, sizeof *d);
    free(d);
    memset(name, 'x', sizeof name - 1);
    memset(source, ' ', source_size - 1);
    memset(fn_name, 'y', sizeof fn_name - 1);

    acg_device *dev = tc_open();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_copied", &k));
    assert_string_equal(acg_kernel_get_name(k), "tk_copied");
    expect_rowscale_runs(dev, "tk_copied");
    float hx[CAP], hw[WIDTH], want[CAP], back[CAP];
    tc_fill_floats(hx, CAP, 3);
    tc_fill_floats(hw, WIDTH, 4);
    rowscale_ref(want, hx, hw, WIDTH, ROWS);
    tc_rows_io io;
    tc_rows_io_open(&io, dev, sizeof back, hx, sizeof hx, hw, sizeof hw);
    TC_OK(rowscale(io.s, k, io.x, 0, io.x, 0, io.w, WIDTH, ROWS));
    tc_download(io.s, back, io.x, sizeof back);
    TC_BYTES_EQUAL(back, want, sizeof back);
    tc_rows_io_close(&io);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_copied"));
    free(source);
}

/* A SPIR-V module (the level_zero backend's code) is copied like the other binaries, into
 * storage aligned for its 32-bit words, with its function's name. The cpu device, which ignores
 * the module, loads the kernel. Where the build compiled the layers' OpenCL C to SPIR-V, the
 * core's and the model's kernels carry their layer's module under their own names. */
static void test_spirv_module_copied(void **state) {
    (void)state;
    /* A SPIR-V header (magic, version 1.0, generator, bound, schema): no backend here reads
     * more of a module than its pointer and size. */
    const uint32_t header[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    uint32_t words[5];
    char fn_name[16];
    memcpy(words, header, sizeof words);
    strcpy(fn_name, "tk_rowscale");
    acg_kernel_desc d = rowscale_desc("tk_spirv");
    d.spirv.module = words;
    d.spirv.size = sizeof words;
    d.spirv.name = fn_name;
    TC_OK(acg_kernel_register(&d));
    memset(words, 0, sizeof words);
    memset(fn_name, 'y', sizeof fn_name - 1);

    acg_device *dev = tc_open_cpu();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_spirv", &k));
    const acg_kernel_desc *copy = &k->def->d;
    assert_ptr_not_equal(copy->spirv.module, words);
    assert_int_equal((uintptr_t)copy->spirv.module % 4, 0);
    assert_int_equal(copy->spirv.size, sizeof header);
    assert_memory_equal(copy->spirv.module, header, sizeof header);
    assert_string_equal(copy->spirv.name, "tk_rowscale");

#ifdef ACG_HAVE_SPIRV_KERNELS
    /* The core's and the model's kernels carry SPIR-V built from their one source: a module
     * per layer, aligned, under each kernel's own name. */
    size_t n_core = 0;
    const acg__kernel_def *core = acg__core_kernels(&n_core);
    const acg__kernel_def *model[2] = {NULL, NULL};
    TC_OK(acg_model_register_kernels());
    TC_OK(acg_kernel_get(dev, "swiglu_f32", &k));
    model[0] = k->def;
    TC_OK(acg_kernel_get(dev, "sample_f32", &k));
    model[1] = k->def;
    const acg_kernel_impl *spv[16] = {NULL};
    assert_true(n_core + 2 <= 16);
    for (size_t i = 0; i < n_core + 2; i++) {
        const acg__kernel_def *c = i < n_core ? &core[i] : model[i - n_core];
        const acg_kernel_impl *m =
            acg__kernel_impl_find(c, "level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL);
        uint32_t magic = 0;
        assert_non_null(m);
        assert_int_equal((uintptr_t)m->code % 4, 0);
        assert_true(m->size > sizeof header && m->size % 4 == 0);
        memcpy(&magic, m->code, sizeof magic);
        assert_int_equal(magic, header[0]);
        assert_string_equal(m->entry, c->name);
        spv[i] = m;
    }
    /* One module per layer: the model's kernels share theirs, and it is not the core's. */
    const acg_kernel_impl *m0 = spv[n_core], *m1 = spv[n_core + 1];
    assert_int_equal(m0->size, m1->size);
    assert_memory_equal(m0->code, m1->code, m0->size);
    assert_ptr_equal(spv[0]->code, spv[n_core - 1]->code);
    assert_true(m0->size != spv[0]->size);
    tc_close(dev);
    TC_OK(acg_model_unregister_kernels());
#else
    tc_close(dev);
#endif
    TC_OK(acg_kernel_unregister("tk_spirv"));
}

/* The size rule of every acg config struct: a size from older headers takes the defaults of
 * the fields it lacks (here: no opencl or cuda code, so every backend but the cpu refuses the
 * kernel, and at the least size no code at all); a size below the required fields, or a larger
 * size whose extra bytes are not zero, is refused. */
static void test_desc_size(void **state) {
    (void)state;
    acg_kernel_desc d = rowscale_desc("tk_old_caller");
    d.size = offsetof(acg_kernel_desc, opencl); /* opencl.source is set, but past the size */
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    acg_kernel *k = NULL;
    if (tc_backend_is("cpu")) {
        TC_OK(acg_kernel_get(dev, "tk_old_caller", &k));
    } else {
        TC_EXPECT(ERR_UNSUPPORTED, acg_kernel_get(dev, "tk_old_caller", &k));
    }
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_old_caller"));

    /* Headers from before cpu_parts: what lies past the size is never read (half a cpu_parts
     * would be refused). */
    d = rowscale_desc("tk_old_caller");
    d.size = offsetof(acg_kernel_desc, cpu_parts);
    d.cpu_parts.parts = never_parts;
    TC_OK(acg_kernel_register(&d));
    TC_OK(acg_kernel_unregister("tk_old_caller"));

    /* Headers from before flags: a NULL shape meant elementwise, and is read so. Their
     * sizeof ended with cuda_lanes and the struct's tail padding, up to where reach lies now,
     * so the bytes where flags lies are padding, whatever they hold. */
    d = rowscale_desc("tk_old_caller");
    d.size = offsetof(acg_kernel_desc, reach);
    d.flags = 0x55;                 /* the old struct's padding */
    TC_OK(acg_kernel_register(&d)); /* shaped: the padding does not make it elementwise */
    TC_OK(acg_kernel_unregister("tk_old_caller"));
    d.shape = NULL;
    d.dims = 1;
    d.in_place[0] = d.in_place[1] = 0;
    TC_OK(acg_kernel_register(&d));
    dev = tc_open();
    if (tc_backend_is("cpu")) {
        TC_OK(acg_kernel_get(dev, "tk_old_caller", &k));
        acg_stream *s = tc_stream(dev);
        acg_buffer *b = tc_buffer(dev, 16);
        const acg_arg args[] = {acg_arg_buffer(b, 0), acg_arg_buffer(b, 0), acg_arg_buffer(b, 0),
                                acg_arg_u32(0), acg_arg_u32(0)};
        const acg_dims five = acg_dims_1d(5); /* 5 items of 4 bytes: past the 16 */
        TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(s, k, &five, args, 5));
        TC_LAST_ERROR_HAS("argument 0 reaches [0, +20)");
        TC_OK(acg_buffer_free(b));
        TC_OK(acg_stream_destroy(s));
    }
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_old_caller"));

    d = rowscale_desc("tk_old_caller");
    /* The least size: the signature only, so no code, and no shape rule (so 1-D). */
    d.size = offsetof(acg_kernel_desc, shape);
    d.dims = 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&d));
    TC_LAST_ERROR_HAS("no implementation");
    d.size = offsetof(acg_kernel_desc, shape) - 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&d));
    TC_LAST_ERROR_HAS("acg_kernel_desc.size");
    d.size = 0;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&d));

    struct {
        acg_kernel_desc d;
        uint64_t newer[2]; /* fields of newer headers */
    } big;
    memset(&big, 0, sizeof big);
    big.d = rowscale_desc("tk_new_caller");
    big.d.size = sizeof big;
    TC_OK(acg_kernel_register(&big.d));
    TC_OK(acg_kernel_unregister("tk_new_caller"));
    big.newer[1] = 1;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register(&big.d));
    TC_LAST_ERROR_HAS("not zero");
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered */
}

/* Threads racing to register one name: exactly one wins. Threads registering their own names
 * and loading them on one device meanwhile all succeed. */
enum { RACERS = 4 };

typedef struct racer {
    acg_device *dev;
    int index;
    acg_status shared, own, get;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    const acg_kernel_desc shared = rowscale_desc("tk_race");
    r->shared = acg_kernel_register(&shared);
    char name[32];
    snprintf(name, sizeof name, "tk_race_%d", r->index);
    const acg_kernel_desc own = rowscale_desc(name);
    r->own = acg_kernel_register(&own);
    acg_kernel *k = NULL;
    r->get = acg_kernel_get(r->dev, name, &k);
    return NULL;
}

static void test_concurrent_registration(void **state) {
    (void)state;
    acg_device *dev = tc_open();
    pthread_t threads[RACERS];
    racer racers[RACERS];
    for (int i = 0; i < RACERS; i++) {
        racers[i] = (racer){dev, i, ACG_OK, ACG_OK, ACG_OK};
        assert_int_equal(pthread_create(&threads[i], NULL, race, &racers[i]), 0);
    }
    int won = 0;
    for (int i = 0; i < RACERS; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        won += racers[i].shared == ACG_OK;
        if (racers[i].shared != ACG_OK) {
            TC_EXPECT(ERR_INVALID_ARGUMENT, racers[i].shared);
        }
        TC_OK(racers[i].own);
        TC_OK(racers[i].get);
    }
    assert_int_equal(won, 1);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_race"));
    for (int i = 0; i < RACERS; i++) {
        char name[32];
        snprintf(name, sizeof name, "tk_race_%d", i);
        TC_OK(acg_kernel_unregister(name));
    }
}

/* ---- the allocation-failure sweep --------------------------------------------------------- */

typedef struct scen {
    acg_device *dev;
    tc_rows_io io; /* x, w and out */
    acg_graph *g;
    bool registered, capturing;
} scen;

#define STEP(call)                                                                                 \
    do {                                                                                           \
        if ((st = (call)) != ACG_OK) {                                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Registers the kernel, opens a device, captures a launch of it (or, without graphs, runs it
 * eagerly), replays it, checks the result against the host, and undoes everything. */
static acg_status scenario(void *ctx) {
    (void)ctx;
    scen sc;
    memset(&sc, 0, sizeof sc);
    acg_status st = ACG_OK;
    float hx[CAP], hw[WIDTH], want[CAP], back[CAP];
    tc_fill_floats(hx, CAP, 41);
    tc_fill_floats(hw, WIDTH, 42);
    rowscale_ref(want, hx, hw, WIDTH, ROWS);
    const acg_kernel_desc d = rowscale_desc("tk_sweep");
    STEP(acg_kernel_register(&d));
    sc.registered = true;
    STEP(acg_device_open(tc_spec(), &sc.dev));
    STEP(acg_stream_create(sc.dev, &sc.io.s));
    STEP(acg_buffer_alloc(sc.dev, sizeof hx, &sc.io.x));
    STEP(acg_buffer_alloc(sc.dev, sizeof hw, &sc.io.w));
    STEP(acg_buffer_alloc(sc.dev, sizeof hx, &sc.io.out));
    acg_kernel *k = NULL;
    STEP(acg_kernel_get(sc.dev, "tk_sweep", &k));
    STEP(acg_copy_h2d(sc.io.s, sc.io.x, 0, hx, sizeof hx));
    STEP(acg_copy_h2d(sc.io.s, sc.io.w, 0, hw, sizeof hw));
    if (tc_cap()->graphs) {
        STEP(acg_stream_begin_capture(sc.io.s, NULL));
        sc.capturing = true;
        STEP(rowscale(sc.io.s, k, sc.io.out, 0, sc.io.x, 0, sc.io.w, WIDTH, ROWS));
        sc.capturing = false;
        STEP(acg_stream_end_capture(sc.io.s, &sc.g));
        STEP(acg_graph_launch(sc.g, sc.io.s));
    } else {
        STEP(rowscale(sc.io.s, k, sc.io.out, 0, sc.io.x, 0, sc.io.w, WIDTH, ROWS));
    }
    STEP(acg_copy_d2h(sc.io.s, back, sc.io.out, 0, sizeof back));
    if (memcmp(back, want, sizeof back) != 0) {
        st = ACG_ERR_INTERNAL;
    }
out:
    if (sc.capturing) {
        acg_graph *g = NULL;
        if (acg_stream_end_capture(sc.io.s, &g) == ACG_OK) {
            TC_OK(acg_graph_destroy(g));
        }
    }
    if (sc.io.s != NULL) {
        acg_stream_synchronize(sc.io.s);
    }
    TC_OK(acg_graph_destroy(sc.g));
    tc_rows_io_close(&sc.io);
    TC_OK(acg_device_close(sc.dev));
    if (sc.registered) {
        TC_OK(acg_kernel_unregister("tk_sweep"));
    }
    return st;
}

/* Every allocation of the scenario, registration included, fails in turn: each run returns
 * ACG_ERR_OUT_OF_MEMORY and leaves nothing behind, the registry included. Installing the
 * allocator is refused if an earlier case left a kernel registered. */
static void test_alloc_sweep(void **state) {
    (void)state;
    tc_alloc_sweep_case("kernel registration", scenario, NULL, false, 5);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_launch_capture_replay, rowscale_setup, rowscale_teardown),
    cmocka_unit_test_setup_teardown(test_graph_update, rowscale_setup, rowscale_teardown),
    cmocka_unit_test(test_no_code_for_backend),
    cmocka_unit_test(test_duplicate_and_unregister),
    cmocka_unit_test(test_desc_copied),
    cmocka_unit_test(test_spirv_module_copied),
    cmocka_unit_test(test_desc_size),
    cmocka_unit_test(test_concurrent_registration),
    /* Last: it installs the allocator, refused if any earlier case left an object alive. */
    cmocka_unit_test(test_alloc_sweep),
};
TC_MAIN("test_kernel_register", tests)
