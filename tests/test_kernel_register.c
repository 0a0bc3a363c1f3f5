/* test_kernel_register.c — kernels a user registers: launched, captured, replayed and updated like
 * the core's; refused on a backend they have no code for; and every malformed or repeated
 * registration refused with its cause, before anything is kept. Every case leaves the registry
 * as it found it, which the allocation-failure sweep at the end relies on. */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/model.h> /* acg_model_register_kernels */

#include "core/acg-impl.h" /* a loaded kernel's definition, the core's kernels */

#include "test_kernels_cl.h" /* tests/test_kernels.cl, as text */
#ifdef ACG_HAVE_CUDA_KERNELS
#include "test_kernels_cuda.h" /* tests/cuda/test_kernels.cu, compiled by the build */
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
#include "test_kernels_spv.h" /* tests/test_kernels.cl, compiled to SPIR-V by the build */
#endif

/* The lookups the cuda and level_zero backends hand their test drivers. */
static const acg_kernel_desc *find_cuda(const void *image, size_t size, const char *function) {
    return acg__kernel_desc_find("cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, image, size, function);
}
static const acg_kernel_desc *find_spirv(const char *function) {
    return acg__kernel_desc_find("level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, NULL, 0, function);
}

/* ---- the user's kernel: out (n, width) = x (n, width) * w (width) per row -------------------
 * Shaped (its windows follow from width and n), 2-D, in place on (out, x), one multiplication
 * per element: equal on every backend. */

enum { WIDTH = 24, ROWS = 10, CAP = WIDTH * ROWS };

static void rowscale_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)global;
    float *out = a[0].p;
    const float *x = a[1].p, *w = a[2].p;
    const uint32_t width = a[3].u32, n = a[4].u32;
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t c = 0; c < width; c++) {
            out[(size_t)r * width + c] = x[(size_t)r * width + c] * w[c];
        }
    }
}

/* The function's name differs from the kernel's: opencl.name says which it is. Its OpenCL C is
 * tests/test_kernels.cl, embedded by the build as text and, where it has the tools, as SPIR-V. */
static const char *const rowscale_cl = tc_test_kernels_cl;

static uint64_t mul_sat(uint64_t a, uint64_t b) {
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static const char *rowscale_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    const uint64_t width = a[3].value.u32, n = a[4].value.u32;
    extent[0] = extent[1] = mul_sat(mul_sat(4, width), n);
    extent[2] = mul_sat(4, width);
    return d->global[0] < width || d->global[1] < n ? "the grid must cover (width, n)" : NULL;
}

/* The kernel's definition, with code for every backend the build has code for (cpu, OpenCL C,
 * and CUDA where nvcc built tests/cuda/test_kernels.cu); tests change a copy. */
static acg_kernel_desc rowscale_desc(const char *name) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = name;
    d.n_args = 5;
    const acg_arg_type types[] = {ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_BUFFER, ACG_ARG_U32,
                                  ACG_ARG_U32};
    memcpy(d.types, types, sizeof types);
    d.bytes_per_item[0] = d.bytes_per_item[1] = d.bytes_per_item[2] = 4;
    d.dims = 2;
    d.shape = rowscale_shape;
    d.in_place[0] = 1; /* either order */
    d.in_place[1] = 0;
    d.exactness = ACG_KERNEL_EXACT_EVERY_BACKEND;
    d.cpu.fn = rowscale_cpu;
    d.opencl.source = rowscale_cl;
    d.opencl.name = "tk_rowscale";
#ifdef ACG_HAVE_CUDA_KERNELS
    d.cuda.fatbin = tc_test_kernels_fatbin;
    d.cuda.size = sizeof tc_test_kernels_fatbin;
    d.cuda.name = "tk_rowscale";
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
    d.spirv.module = tc_test_kernels_spv;
    d.spirv.size = tc_test_kernels_spv_size;
    d.spirv.name = "tk_rowscale";
#endif
    return d;
}

static acg_dims grid2(uint32_t x, uint32_t y) {
    acg_dims d = {{x, y, 1}, {0, 0, 0}};
    return d;
}

static acg_status rowscale(acg_stream *s, const acg_kernel *k, acg_buffer *out, size_t out_off,
                           const acg_buffer *x, size_t x_off, const acg_buffer *w, uint32_t width,
                           uint32_t n) {
    const acg_arg args[] = {acg_arg_buffer(out, out_off), acg_arg_buffer(x, x_off),
                            acg_arg_buffer(w, 0), acg_arg_u32(width), acg_arg_u32(n)};
    const acg_dims dims = grid2(width, n);
    return acg_kernel_launch(s, k, &dims, args, 5);
}

static void rowscale_ref(float *out, const float *x, const float *w, uint32_t width, uint32_t n) {
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t c = 0; c < width; c++) {
            out[r * width + c] = x[r * width + c] * w[c];
        }
    }
}

/* A body for definitions that are refused before anything runs. */
static void never_called(const acg_cpu_arg *a, const uint32_t global[3]) {
    (void)a;
    (void)global;
    fail();
}

/* ---- fixture: the kernel registered, a device, a stream, x, w and out ------------------------ */

typedef struct fx {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *k;
    acg_buffer *x, *w, *out; /* CAP, WIDTH and CAP floats */
    float hx[CAP], hw[WIDTH];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    const acg_kernel_desc d = rowscale_desc("tk_rowscale_f32");
    TC_OK(acg_kernel_register(&d));
    f->dev = tc_open();
    f->s = tc_stream(f->dev);
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_f32", &f->k));
    f->x = tc_buffer(f->dev, sizeof f->hx);
    f->w = tc_buffer(f->dev, sizeof f->hw);
    f->out = tc_buffer(f->dev, sizeof f->hx);
    tc_fill_floats(f->hx, CAP, 31);
    tc_fill_floats(f->hw, WIDTH, 32);
    tc_upload(f->s, f->x, f->hx, sizeof f->hx);
    tc_upload(f->s, f->w, f->hw, sizeof f->hw);
    tc_poison(f->s, f->out);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    TC_OK(acg_buffer_free(f->x));
    TC_OK(acg_buffer_free(f->w));
    TC_OK(acg_buffer_free(f->out));
    TC_OK(acg_stream_destroy(f->s));
    /* The device holds the kernel until it closes; only then may the definition go. */
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister("tk_rowscale_f32"));
    tc_close(f->dev);
    TC_OK(acg_kernel_unregister("tk_rowscale_f32"));
    free(f);
    return 0;
}

static void download(fx *f, float *dst) { tc_download(f->s, dst, f->out, sizeof f->hx); }

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
    TC_OK(rowscale(f->s, f->k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS));
    download(f, eager);
    TC_BYTES_EQUAL(eager, want, sizeof want);

    /* In place, on the declared pair: x *= w twice. */
    acg_buffer *y = tc_buffer(f->dev, sizeof f->hx);
    tc_upload(f->s, y, f->hx, sizeof f->hx);
    TC_OK(rowscale(f->s, f->k, y, 0, y, 0, f->w, WIDTH, ROWS));
    TC_OK(rowscale(f->s, f->k, y, 0, y, 0, f->w, WIDTH, ROWS));
    float twice[CAP], back[CAP];
    rowscale_ref(twice, want, f->hw, WIDTH, ROWS);
    tc_download(f->s, back, y, sizeof back);
    TC_BYTES_EQUAL(back, twice, sizeof back);
    TC_OK(acg_buffer_free(y));

    /* The oracle. */
    acg_device *cpu = tc_open_cpu();
    acg_stream *cs = tc_stream(cpu);
    acg_kernel *ck = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_rowscale_f32", &ck));
    acg_buffer *cx = tc_buffer(cpu, sizeof f->hx), *cw = tc_buffer(cpu, sizeof f->hw),
               *cout = tc_buffer(cpu, sizeof f->hx);
    tc_upload(cs, cx, f->hx, sizeof f->hx);
    tc_upload(cs, cw, f->hw, sizeof f->hw);
    TC_OK(rowscale(cs, ck, cout, 0, cx, 0, cw, WIDTH, ROWS));
    tc_download(cs, back, cout, sizeof back);
    TC_BYTES_EQUAL(back, eager, sizeof back);
    TC_OK(acg_buffer_free(cx));
    TC_OK(acg_buffer_free(cw));
    TC_OK(acg_buffer_free(cout));
    TC_OK(acg_stream_destroy(cs));
    tc_close(cpu);

    if (!tc_has_graphs(f->dev, f->s)) {
        tc_skip("no graphs: checked the eager launch only");
    }
    tc_poison(f->s, f->out);
    acg_graph *g = NULL;
    TC_OK(acg_stream_begin_capture(f->s, NULL));
    TC_OK(rowscale(f->s, f->k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS));
    TC_OK(acg_stream_end_capture(f->s, &g));
    acg_node_info info;
    TC_OK(acg_graph_get_node(g, 0, &info));
    assert_int_equal(info.kind, ACG_NODE_KERNEL);
    assert_string_equal(info.kernel, "tk_rowscale_f32");
    for (int i = 0; i < 3; i++) {
        TC_OK(acg_graph_launch(g, f->s));
        download(f, replay);
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
    if (!tc_has_graphs(f->dev, f->s)) {
        tc_skip("no graphs");
    }
    acg_graph *g = NULL, *from = NULL;
    TC_OK(acg_stream_begin_capture(f->s, NULL));
    TC_OK(rowscale(f->s, f->k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS));
    TC_OK(acg_stream_end_capture(f->s, &g));
    /* The same node, its rows shifted by two in both windows and four rows fewer. */
    const size_t shift = 2 * WIDTH * sizeof(float);
    TC_OK(acg_stream_begin_capture(f->s, NULL));
    TC_OK(rowscale(f->s, f->k, f->out, shift, f->x, shift, f->w, WIDTH, ROWS - 4));
    TC_OK(acg_stream_end_capture(f->s, &from));
    const bool upd = tc_has_graph_update(g, from);
    if (upd) {
        TC_OK(acg_graph_update(g, from));
        TC_OK(acg_graph_destroy(from));
        from = NULL;
        tc_poison(f->s, f->out);
        TC_OK(acg_graph_launch(g, f->s));
        float replay[CAP], eager[CAP];
        download(f, replay);
        tc_poison(f->s, f->out);
        TC_OK(rowscale(f->s, f->k, f->out, shift, f->x, shift, f->w, WIDTH, ROWS - 4));
        download(f, eager);
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
    acg_kernel_desc cpu_only = rowscale_desc("tk_cpu_only");
    cpu_only.opencl.source = NULL;
    cpu_only.opencl.name = NULL;
    cpu_only.cuda.fatbin = NULL;
    cpu_only.cuda.size = 0;
    cpu_only.cuda.name = NULL;
    cpu_only.spirv.module = NULL;
    cpu_only.spirv.size = 0;
    cpu_only.spirv.name = NULL;
    acg_kernel_desc opencl_only = rowscale_desc("tk_opencl_only");
    opencl_only.cpu.fn = NULL;
    opencl_only.cuda.fatbin = NULL;
    opencl_only.cuda.size = 0;
    opencl_only.cuda.name = NULL;
    opencl_only.spirv.module = NULL;
    opencl_only.spirv.size = 0;
    opencl_only.spirv.name = NULL;
    TC_OK(acg_kernel_register(&cpu_only));
    TC_OK(acg_kernel_register(&opencl_only));

    acg_device *devs[2] = {tc_open_cpu(), tc_open()};
    for (int i = 0; i < 2; i++) {
        const char *backend = acg_device_get_capability(devs[i])->backend;
        const bool on_cpu = strcmp(backend, "cpu") == 0;
        const bool on_opencl = strcmp(backend, "opencl") == 0;
        acg_kernel *const untouched = (acg_kernel *)(uintptr_t)0x33;
        acg_kernel *k = untouched;
        if (on_cpu) {
            TC_OK(acg_kernel_get(devs[i], "tk_cpu_only", &k));
            k = untouched;
        } else {
            TC_EXPECT(ERR_UNSUPPORTED, acg_kernel_get(devs[i], "tk_cpu_only", &k));
            TC_LAST_ERROR_HAS("tk_cpu_only");
            TC_LAST_ERROR_HAS(backend);
            assert_ptr_equal(k, untouched);
        }
        if (on_opencl) {
            TC_OK(acg_kernel_get(devs[i], "tk_opencl_only", &k));
        } else {
            TC_EXPECT(ERR_UNSUPPORTED, acg_kernel_get(devs[i], "tk_opencl_only", &k));
            TC_LAST_ERROR_HAS("tk_opencl_only");
            TC_LAST_ERROR_HAS(backend);
            assert_ptr_equal(k, untouched);
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

/* The caller's definition is copied, strings included: it may change or go at once. */
static void test_desc_copied(void **state) {
    (void)state;
    char name[32], source[sizeof tc_test_kernels_cl], fn_name[16];
    strcpy(name, "tk_copied");
    strcpy(source, rowscale_cl);
    strcpy(fn_name, "tk_rowscale");
    acg_kernel_desc *d = malloc(sizeof *d);
    *d = rowscale_desc(name);
    d->opencl.source = source;
    d->opencl.name = fn_name;
    TC_OK(acg_kernel_register(d));
    memset(d, 0x5a, sizeof *d);
    free(d);
    memset(name, 'x', sizeof name - 1);
    memset(source, ' ', sizeof source - 1);
    memset(fn_name, 'y', sizeof fn_name - 1);

    acg_device *dev = tc_open();
    acg_stream *s = tc_stream(dev);
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_copied", &k));
    assert_string_equal(acg_kernel_get_name(k), "tk_copied");
    float hx[WIDTH * 2], hw[WIDTH], want[WIDTH * 2], back[WIDTH * 2];
    tc_fill_floats(hx, WIDTH * 2, 3);
    tc_fill_floats(hw, WIDTH, 4);
    acg_buffer *x = tc_buffer(dev, sizeof hx), *w = tc_buffer(dev, sizeof hw);
    tc_upload(s, x, hx, sizeof hx);
    tc_upload(s, w, hw, sizeof hw);
    TC_OK(rowscale(s, k, x, 0, x, 0, w, WIDTH, 2));
    tc_download(s, back, x, sizeof back);
    rowscale_ref(want, hx, hw, WIDTH, 2);
    TC_BYTES_EQUAL(back, want, sizeof back);
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(w));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_copied"));
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
    d->opencl.source = NULL;
    d->opencl.name = NULL;
    d->cuda.fatbin = NULL;
    d->cuda.size = 0;
    d->cuda.name = NULL;
    d->spirv.module = NULL;
    d->spirv.size = 0;
    d->spirv.name = NULL;
}
static void opencl_name_only(acg_kernel_desc *d) { d->opencl.source = NULL; }
static void fatbin_no_size(acg_kernel_desc *d) {
    d->cuda.fatbin = rowscale_cl;
    d->cuda.size = 0;
}
static void fatbin_size_only(acg_kernel_desc *d) {
    d->cuda.fatbin = NULL;
    d->cuda.size = 16;
}
static void spirv_name_only(acg_kernel_desc *d) {
    d->spirv.module = NULL;
    d->spirv.size = 0;
    d->spirv.name = "tk";
}
static void spirv_no_size(acg_kernel_desc *d) {
    d->spirv.module = rowscale_cl;
    d->spirv.size = 0;
}
static void spirv_size_only(acg_kernel_desc *d) {
    d->spirv.module = NULL;
    d->spirv.size = 20;
}
static void lanes_three(acg_kernel_desc *d) {
    d->cuda.fatbin = rowscale_cl; /* any bytes: nothing is loaded before the check */
    d->cuda.size = 16;
    d->cuda_lanes = 3;
}
static void lanes_2048(acg_kernel_desc *d) {
    lanes_three(d);
    d->cuda_lanes = 2048;
}
static void lanes_without_fatbin(acg_kernel_desc *d) {
    d->cuda.fatbin = NULL;
    d->cuda.size = 0;
    d->cuda.name = NULL;
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
static uint32_t never_parts(const acg_cpu_arg *a, const uint32_t global[3], uint32_t max_parts) {
    (void)a;
    (void)global;
    (void)max_parts;
    fail();
    return 1;
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
        d.cpu.fn = never_called;
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

/* A shape rule that accepts nothing: a launch that reaches it passed the grid checks. */
static const char *reached_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    (void)a;
    (void)d;
    (void)extent;
    return "the shape rule was reached";
}

/* The same kernel with its shape said as data (reach, grid_covers) instead of a callback: the
 * same bytes eagerly, and the same windows checked, so the same launches refused. */
static void test_data_rules(void **state) {
    assert_int_equal(setup(state), 0);
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
    TC_OK(rowscale(f->s, f->k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS));
    download(f, by_rule);
    tc_poison(f->s, f->out);
    TC_OK(rowscale(f->s, k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS));
    download(f, by_data);
    TC_BYTES_EQUAL(by_data, by_rule, sizeof by_data);
    /* One row too many reaches past x and out; w is read once per column. */
    TC_EXPECT(ERR_OUT_OF_RANGE, rowscale(f->s, k, f->out, 0, f->x, 0, f->w, WIDTH, ROWS + 1));
    TC_LAST_ERROR_HAS("argument 0 reaches [0, +1056), past its 960-byte buffer");
    TC_EXPECT(ERR_OUT_OF_RANGE, rowscale(f->s, k, f->out, 0, f->x, 0, f->w, WIDTH + 1, 2));
    TC_LAST_ERROR_HAS("argument 2 reaches [0, +100), past its 96-byte buffer");
    /* A window that follows the grid: w reaching 4 bytes per work item along x. */
    acg_kernel_desc by_grid = d;
    by_grid.name = "tk_rowscale_grid";
    by_grid.reach[2] = (acg_kernel_reach){4, {ACG_BY_GLOBAL(0), ACG_BY_ONE}};
    TC_OK(acg_kernel_register(&by_grid));
    acg_kernel *kg = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_grid", &kg));
    const acg_arg gargs[] = {acg_arg_buffer(f->out, 0), acg_arg_buffer(f->x, 0),
                             acg_arg_buffer(f->w, 0), acg_arg_u32(WIDTH - 1), acg_arg_u32(2)};
    const acg_dims wide = grid2(WIDTH + 1, 2);
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->s, kg, &wide, gargs, 5));
    TC_LAST_ERROR_HAS("argument 2 reaches [0, +100), past its 96-byte buffer");
    /* A grid below the rows it must cover. */
    const acg_arg args[] = {acg_arg_buffer(f->out, 0), acg_arg_buffer(f->x, 0),
                            acg_arg_buffer(f->w, 0), acg_arg_u32(WIDTH), acg_arg_u32(ROWS)};
    const acg_dims short_grid = grid2(WIDTH, ROWS - 1);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, k, &short_grid, args, 5));
    TC_LAST_ERROR_HAS("the grid must cover argument 4: global[1] is 9, below 10");
    TC_OK(acg_stream_synchronize(f->s));
    /* grid_covers holds with a shape callback too, checked before the callback runs. */
    acg_kernel_desc shaped = rowscale_desc("tk_rowscale_covered");
    shaped.grid_covers[1] = ACG_BY_ARG(4);
    shaped.shape = reached_shape;
    TC_OK(acg_kernel_register(&shaped));
    acg_kernel *kc = NULL;
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_covered", &kc));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, kc, &short_grid, args, 5));
    TC_LAST_ERROR_HAS("the grid must cover argument 4: global[1] is 9, below 10");
    const acg_dims full = grid2(WIDTH, ROWS);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, kc, &full, args, 5));
    TC_LAST_ERROR_HAS("the shape rule was reached");
    teardown(state);

    /* A signed factor below zero is refused by name (never run: the window would be negative).
     * The definition's i32 matches no compiled code (the OpenCL C takes a uint, which
     * acg_kernel_get refuses), so it is the C code's alone, on the cpu backend. */
    acg_kernel_desc s32 = rowscale_desc("tk_rowscale_i32");
    s32.shape = NULL;
    s32.types[3] = ACG_ARG_I32;
    s32.reach[0] = s32.reach[1] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ARG(4)}};
    s32.reach[2] = (acg_kernel_reach){4, {ACG_BY_ARG(3), ACG_BY_ONE}};
    s32.cpu.fn = never_called;
    s32.opencl.source = s32.opencl.name = NULL;
    memset(&s32.cuda, 0, sizeof s32.cuda);
    memset(&s32.spirv, 0, sizeof s32.spirv);
    TC_OK(acg_kernel_register(&s32));
    acg_device *cpu = tc_open_cpu();
    acg_stream *s = tc_stream(cpu);
    acg_buffer *out = tc_buffer(cpu, CAP * 4), *x = tc_buffer(cpu, CAP * 4),
               *w = tc_buffer(cpu, WIDTH * 4);
    acg_kernel *k32 = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_rowscale_i32", &k32));
    const acg_arg neg[] = {acg_arg_buffer(out, 0), acg_arg_buffer(x, 0), acg_arg_buffer(w, 0),
                           acg_arg_i32(-2), acg_arg_u32(ROWS)};
    const acg_dims grid = grid2(WIDTH, ROWS);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(s, k32, &grid, neg, 5));
    TC_LAST_ERROR_HAS("argument 3 is negative (-2) and sizes a buffer's window");
    /* The product saturates (4 * 2^31 * 2^32 is past 64 bits): refused, not wrapped. */
    const acg_arg huge[] = {acg_arg_buffer(out, 0), acg_arg_buffer(x, 0), acg_arg_buffer(w, 0),
                            acg_arg_i32(INT32_MAX), acg_arg_u32(UINT32_MAX)};
    TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(s, k32, &grid, huge, 5));
    TC_LAST_ERROR_HAS("reaches [0, +18446744073709551615)");
    TC_OK(acg_buffer_free(out));
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(w));
    TC_OK(acg_stream_destroy(s));
    tc_close(cpu);
    TC_OK(acg_kernel_unregister("tk_rowscale_data"));
    TC_OK(acg_kernel_unregister("tk_rowscale_i32"));
    TC_OK(acg_kernel_unregister("tk_rowscale_grid"));
    TC_OK(acg_kernel_unregister("tk_rowscale_covered"));
}

/* Kernels registered as a set: under "<set>/<name>", apart from another library's kernel of the
 * same name; all or nothing both ways. */
static void test_kernel_sets(void **state) {
    (void)state;
    acg_kernel_desc two[2] = {rowscale_desc("rowscale"), rowscale_desc("scale_rows")};
    TC_OK(acg_kernel_register_set("engine_a", two, 2));
    TC_OK(acg_kernel_register_set("engine_b", two, 1)); /* a "rowscale" of its own */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_a", two + 1, 1));
    TC_LAST_ERROR_HAS("the set \"engine_a\" is already registered");
    acg_device *dev = tc_open();
    acg_kernel *a = NULL, *b = NULL, *k = NULL;
    TC_OK(acg_kernel_get(dev, "engine_a/rowscale", &a));
    TC_OK(acg_kernel_get(dev, "engine_b/rowscale", &b));
    assert_ptr_not_equal(a, b);
    assert_string_equal(acg_kernel_get_name(a), "engine_a/rowscale");
    TC_OK(acg_kernel_get(dev, "engine_a/scale_rows", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "rowscale", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "engine_b/scale_rows", &k));
    /* Loaded on an open device: none of the set goes. */
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister_set("engine_a"));
    TC_LAST_ERROR_HAS("engine_a/rowscale is loaded on 1 open device(s)");
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_a"));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_a"));
    TC_LAST_ERROR_HAS("no kernel of the set \"engine_a\"");
    TC_OK(acg_kernel_unregister("engine_b/rowscale")); /* one kernel of a set, by its name */

    /* A set's kernel whose implementations name no function runs the function of its own name
     * (tk_rowscale), not of the set's name for it: loaded and launched on the device under
     * test, the result the host's. */
    acg_kernel_desc plain = rowscale_desc("tk_rowscale");
    plain.opencl.name = NULL;
    plain.cuda.name = NULL;
    plain.spirv.name = NULL;
    TC_OK(acg_kernel_register_set("engine_e", &plain, 1));
    dev = tc_open();
    acg_stream *s = tc_stream(dev);
    TC_OK(acg_kernel_get(dev, "engine_e/tk_rowscale", &k));
    float hx[CAP], hw[WIDTH], want[CAP], got[CAP];
    tc_fill_floats(hx, CAP, 41);
    tc_fill_floats(hw, WIDTH, 42);
    rowscale_ref(want, hx, hw, WIDTH, ROWS);
    acg_buffer *x = tc_buffer(dev, sizeof hx), *w = tc_buffer(dev, sizeof hw),
               *out = tc_buffer(dev, sizeof hx);
    tc_upload(s, x, hx, sizeof hx);
    tc_upload(s, w, hw, sizeof hw);
    TC_OK(rowscale(s, k, out, 0, x, 0, w, WIDTH, ROWS));
    tc_download(s, got, out, sizeof got);
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(w));
    TC_OK(acg_buffer_free(out));
    TC_OK(acg_stream_destroy(s));
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_e"));

    /* A refused definition keeps the whole set out, naming its index and field. */
    acg_kernel_desc bad[3] = {rowscale_desc("first"), rowscale_desc("second"),
                              rowscale_desc("third")};
    bad[1].dims = 4;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("acg_kernel_register_set(engine_c): desc[1](second): dims is 4");
    bad[1] = rowscale_desc("first");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("the name \"engine_c/first\" is in desc twice");
    bad[1] = rowscale_desc("sub/name");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("desc[1]: the name \"sub/name\" has a '/'");
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_c"));

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set(NULL, two, 2));
    TC_LAST_ERROR_HAS("the set's name NULL must be 1 to 64 characters without '/'");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("", two, 2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("a/b", two, 2));
    TC_LAST_ERROR_HAS("\"a/b\" must be");
    char long_name[80];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set(long_name, two, 2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", two, 0));
    TC_LAST_ERROR_HAS("n is 0");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", NULL, 2));
    TC_LAST_ERROR_HAS("desc is NULL");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", two, UINT32_MAX));
    TC_LAST_ERROR_HAS("n is too large");

    /* The array's stride is its structs' size: structs from newer headers (longer, their new
     * fields zero) are read one after another, and a size that differs is refused. */
    struct newer {
        acg_kernel_desc d;
        uint64_t fields[2];
    } longer[2];
    memset(longer, 0, sizeof longer);
    longer[0].d = rowscale_desc("rowscale");
    longer[1].d = rowscale_desc("scale_rows");
    longer[0].d.size = longer[1].d.size = sizeof longer[0];
    TC_OK(acg_kernel_register_set("engine_f", &longer[0].d, 2));
    TC_OK(acg_kernel_unregister("engine_f/scale_rows")); /* the second struct, by its name */
    TC_OK(acg_kernel_unregister_set("engine_f"));
    two[1].size = offsetof(acg_kernel_desc, cpu_parts);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_f", two, 2));
    TC_LAST_ERROR_HAS("desc[1]: size");
    TC_LAST_ERROR_HAS("the structs of one array share one size");
    two[1].size = sizeof two[1];
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister_set(NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister_set("a/b"));
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered, nothing held */
}

/* A set's copies under failing allocations: each failure registers nothing. */
static acg_status register_set_once(void *ctx) {
    const acg_kernel_desc *two = ctx;
    acg_status st = acg_kernel_register_set("engine_oom", two, 2);
    if (st == ACG_OK) {
        TC_OK(acg_kernel_unregister_set("engine_oom"));
    } else {
        TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_oom"));
    }
    return st;
}

static void test_kernel_set_out_of_memory(void **state) {
    (void)state;
    acg_kernel_desc two[2] = {rowscale_desc("rowscale"), rowscale_desc("scale_rows")};
    tc_alloc_install();
    /* The array of copies, each copy and each full name, and the registry's growth. */
    assert_true(tc_alloc_sweep(register_set_once, two, false) >= 5);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
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

/* ---- implementations as a list (acg_kernel_desc.impls) ------------------------------------ */

/* The kernel's definition with no code in the legacy fields (opencl, cuda, spirv): its C
 * function and the n entries of impls only. */
static acg_kernel_desc rowscale_desc_impls(const char *name, const acg_kernel_impl *impls,
                                           uint32_t n) {
    acg_kernel_desc d = rowscale_desc(name);
    memset(&d.opencl, 0, sizeof d.opencl);
    memset(&d.cuda, 0, sizeof d.cuda);
    memset(&d.spirv, 0, sizeof d.spirv);
    d.impls = impls;
    d.n_impls = n;
    return d;
}

/* Entries for every backend the build has the test kernels' code for (OpenCL C always, CUDA and
 * SPIR-V where it compiled them), each naming the function entry (NULL: the kernel's name), and
 * their count. The OpenCL C's entry names no backend: every backend that takes the format. */
static uint32_t rowscale_impls(acg_kernel_impl *out, const char *entry) {
    uint32_t n = 0;
    out[n++] = (acg_kernel_impl){NULL, ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, entry};
#ifdef ACG_HAVE_CUDA_KERNELS
    out[n++] = (acg_kernel_impl){"cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, tc_test_kernels_fatbin,
                                 sizeof tc_test_kernels_fatbin, entry};
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
    out[n++] = (acg_kernel_impl){"level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, tc_test_kernels_spv,
                                 tc_test_kernels_spv_size, entry};
#endif
    return n;
}

/* Whether rowscale_impls gives the device under test's backend code. */
static bool dut_has_rowscale_code(void) {
    bool has = tc_backend_is("cpu") || tc_backend_is("opencl");
#ifdef ACG_HAVE_CUDA_KERNELS
    has = has || tc_backend_is("cuda");
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
    has = has || tc_backend_is("level_zero");
#endif
    return has;
}

/* Loads kernel `name` on dev, runs it over every row and checks the result is the host's, bit
 * for bit (the host's loop is the C function's). */
static void expect_rowscale_runs(acg_device *dev, const char *name) {
    float hx[CAP], hw[WIDTH], want[CAP], got[CAP];
    tc_fill_floats(hx, CAP, 51);
    tc_fill_floats(hw, WIDTH, 52);
    rowscale_ref(want, hx, hw, WIDTH, ROWS);
    acg_stream *s = tc_stream(dev);
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, name, &k));
    acg_buffer *x = tc_buffer(dev, sizeof hx), *w = tc_buffer(dev, sizeof hw),
               *out = tc_buffer(dev, sizeof hx);
    tc_upload(s, x, hx, sizeof hx);
    tc_upload(s, w, hw, sizeof hw);
    tc_poison(s, out);
    TC_OK(rowscale(s, k, out, 0, x, 0, w, WIDTH, ROWS));
    tc_download(s, got, out, sizeof got);
    TC_BYTES_EQUAL(got, want, sizeof got);
    TC_OK(acg_buffer_free(x));
    TC_OK(acg_buffer_free(w));
    TC_OK(acg_buffer_free(out));
    TC_OK(acg_stream_destroy(s));
}

/* acg_kernel_get on dev is refused for want of code for its backend, naming kernel and backend. */
static void expect_no_code(acg_device *dev, const char *name) {
    acg_kernel *k = NULL;
    TC_EXPECT(ERR_UNSUPPORTED, acg_kernel_get(dev, name, &k));
    TC_LAST_ERROR_HAS(name);
    TC_LAST_ERROR_HAS(acg_device_get_capability(dev)->backend);
    assert_null(k);
}

/* A kernel whose only code besides its C function is an impls entry of OpenCL C for opencl:
 * the opencl backend builds and runs it, with the C function's bits; a backend that loads
 * another format finds nothing for it and refuses the kernel. The text may also be given by
 * its length, without a NUL (followed here by bytes that would not build). */
static void test_impls_opencl_entry(void **state) {
    (void)state;
    const size_t len = strlen(rowscale_cl);
    char *unended = malloc(len + 8);
    memcpy(unended, rowscale_cl, len);
    memcpy(unended + len, "#error\n", 8); /* 8 bytes, no NUL */
    const acg_kernel_impl cl[2] = {
        {"opencl", ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, "tk_rowscale"},
        {"opencl", ACG_KERNEL_FORMAT_OPENCL_C, unended, len, "tk_rowscale"},
    };
    const char *const names[2] = {"tk_impl_opencl", "tk_impl_opencl_len"};
    for (int i = 0; i < 2; i++) {
        const acg_kernel_desc d = rowscale_desc_impls(names[i], &cl[i], 1);
        TC_OK(acg_kernel_register(&d));
    }
    free(unended);
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    for (int i = 0; i < 2; i++) {
        expect_rowscale_runs(cpu, names[i]);
        if (tc_backend_is("cpu") || tc_backend_is("opencl")) {
            expect_rowscale_runs(dev, names[i]);
        } else {
            expect_no_code(dev, names[i]);
            TC_LAST_ERROR_HAS("implementation");
        }
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_opencl"));
    TC_OK(acg_kernel_unregister("tk_impl_opencl_len"));
}

/* A SPIR-V module is binary: an entry of that format given as text (size 0) registers, as the
 * format is the backend's to read, and the level_zero backend refuses it naming the size. */
static void test_impls_spirv_as_text(void **state) {
    (void)state;
    const acg_kernel_impl text = {NULL, ACG_KERNEL_FORMAT_SPIRV_OPENCL, "no module", 0, NULL};
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_spirv_text", &text, 1);
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    if (tc_backend_is("level_zero")) {
        acg_kernel *k = NULL;
        TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_kernel_get(dev, "tk_impl_spirv_text", &k),
                      "tk_impl_spirv_text: its spirv-opencl implementation has size 0");
    } else if (tc_backend_is("cpu")) {
        expect_rowscale_runs(dev, "tk_impl_spirv_text");
    } else {
        expect_no_code(dev, "tk_impl_spirv_text");
    }
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_spirv_text"));
}

/* One merged list: the caller's entries first, an entry of a format no backend takes passed
 * over, entries without a backend serving every backend of their format, then one for each
 * legacy field, which a backend then never reaches (the legacy OpenCL C here would not build).
 * Every backend the build has code for runs the kernel with the C function's bits. */
static void test_impls_merged_list(void **state) {
    (void)state;
    const uint32_t junk[4] = {1, 2, 3, 4};
    acg_kernel_impl list[4] = {{"vulkan", "vulkan-spirv", junk, sizeof junk, "tk_rowscale"}};
    const uint32_t n = 1 + rowscale_impls(list + 1, "tk_rowscale");
    acg_kernel_desc d = rowscale_desc_impls("tk_impl_merged", list, n);
    d.opencl.source = "this is not OpenCL C";
    TC_OK(acg_kernel_register(&d));
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_impl_merged", &k));
    const acg__kernel_def *def = k->def;
    assert_int_equal(def->d.n_impls, n + 1);
    assert_string_equal(def->d.impls[0].format, "vulkan-spirv");
    const acg_kernel_impl *legacy = &def->d.impls[n];
    assert_null(legacy->backend); /* for every backend that takes the format: the core names none */
    assert_string_equal(legacy->format, ACG_KERNEL_FORMAT_OPENCL_C);
    assert_string_equal(legacy->code, "this is not OpenCL C");
    assert_int_equal(legacy->size, 0);
    assert_string_equal(legacy->entry, "tk_impl_merged"); /* the kernel's name: none given */
    const acg_kernel_impl *cl = acg__kernel_impl_find(def, "opencl", ACG_KERNEL_FORMAT_OPENCL_C);
    assert_ptr_equal(cl, &def->d.impls[1]); /* backend NULL: every backend's of the format */
    assert_ptr_equal(acg__kernel_impl_find(def, "cuda", ACG_KERNEL_FORMAT_OPENCL_C), cl);
    assert_ptr_equal(acg__kernel_impl_find(def, "vulkan", "vulkan-spirv"), &def->d.impls[0]);
    assert_null(acg__kernel_impl_find(def, "other", "vulkan-spirv"));
    expect_rowscale_runs(cpu, "tk_impl_merged");
    if (dut_has_rowscale_code()) {
        expect_rowscale_runs(dev, "tk_impl_merged");
    } else {
        expect_no_code(dev, "tk_impl_merged");
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_merged"));
}

/* A definition whose only code is of a format no backend here takes registers (a later version
 * may take it), and every backend refuses it: the cpu backend too, having no cpu.fn. Nothing
 * loaded it, so it unregisters with the devices open. */
static void test_impls_unknown_format(void **state) {
    (void)state;
    const uint32_t words[2] = {0x07230203u, 0x00010000u};
    const acg_kernel_impl vk = {"vulkan", "vulkan-spirv", words, sizeof words, NULL};
    acg_kernel_desc d = rowscale_desc_impls("tk_impl_vulkan", &vk, 1);
    d.cpu.fn = NULL;
    TC_OK(acg_kernel_register(&d));
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    expect_no_code(cpu, "tk_impl_vulkan");
    expect_no_code(dev, "tk_impl_vulkan");
    TC_OK(acg_kernel_unregister("tk_impl_vulkan"));
    tc_close(cpu);
    tc_close(dev);
}

/* cuda_lanes needs a cuda image, which an impls entry may be (for cuda, or for every backend of
 * the format); a list of ACG_MAX_KERNEL_IMPLS entries registers. Nothing is loaded: the image
 * is any bytes. */
static void test_impls_lanes_and_limit(void **state) {
    (void)state;
    const char *const backends[2] = {"cuda", NULL};
    for (int i = 0; i < 2; i++) {
        const acg_kernel_impl image = {backends[i], ACG_KERNEL_FORMAT_CUDA_IMAGE, rowscale_cl, 16,
                                       NULL};
        acg_kernel_desc d = rowscale_desc_impls("tk_impl_lanes", &image, 1);
        d.cuda_lanes = 32;
        TC_OK(acg_kernel_register(&d));
        TC_OK(acg_kernel_unregister("tk_impl_lanes"));
        d.n_impls = 0;
        if (acg__backend_find("cuda") == NULL) {
            printf("skipped: cuda_lanes without a cuda image (the cuda backend checks it; this "
                   "build lacks it)\n");
            continue;
        }
        TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_kernel_register(&d),
                      "cuda_lanes without a cuda-image implementation");
    }
    static acg_kernel_impl most[ACG_MAX_KERNEL_IMPLS];
    for (size_t i = 0; i < ACG_MAX_KERNEL_IMPLS; i++) {
        most[i] = (acg_kernel_impl){"vulkan", "vulkan-spirv", rowscale_cl, 0, NULL};
    }
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_most", most, ACG_MAX_KERNEL_IMPLS);
    TC_OK(acg_kernel_register(&d));
    TC_OK(acg_kernel_unregister("tk_impl_most"));
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered */
}

/* A caller from headers before impls: its struct ends where impls begins, and what lies past
 * it (here garbage where impls would be) is never read; its opencl.source still runs. */
static void test_impls_legacy_size(void **state) {
    (void)state;
    acg_kernel_desc d = rowscale_desc("tk_before_impls");
    d.size = offsetof(acg_kernel_desc, impls);
    d.impls = (const acg_kernel_impl *)(uintptr_t)0x10;
    d.n_impls = 3;
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    expect_rowscale_runs(dev, "tk_before_impls");
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_before_impls", &k));
    /* The legacy fields are the list: each as its entry, in their order. */
    const acg_kernel_desc *copy = &k->def->d;
    assert_true(copy->n_impls >= 1 && copy->n_impls <= 3);
    assert_string_equal(copy->impls[0].format, ACG_KERNEL_FORMAT_OPENCL_C);
    assert_ptr_equal(copy->impls[0].code, copy->opencl.source);
    assert_string_equal(copy->impls[0].entry, "tk_rowscale");
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_before_impls"));
}

/* The list is copied, its strings and code included: the caller may free them at once. Binary
 * code lands 16-aligned, text keeps its NUL. */
static void test_impls_copied(void **state) {
    (void)state;
    acg_kernel_impl from[3];
    const uint32_t n = rowscale_impls(from, "tk_rowscale");
    acg_kernel_impl *heap = malloc(n * sizeof *heap);
    for (uint32_t i = 0; i < n; i++) {
        const acg_kernel_impl *e = &from[i];
        size_t bytes = e->size != 0 ? e->size : strlen(e->code) + 1;
        void *code = malloc(bytes);
        memcpy(code, e->code, bytes);
        heap[i] = (acg_kernel_impl){e->backend != NULL ? strdup(e->backend) : NULL,
                                    strdup(e->format), code, e->size, strdup(e->entry)};
    }
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_copied", heap, n);
    TC_OK(acg_kernel_register(&d));
    for (uint32_t i = 0; i < n; i++) {
        size_t bytes = heap[i].size != 0 ? heap[i].size : strlen(heap[i].code) + 1;
        memset((void *)heap[i].code, 0x5a, bytes);
        free((void *)heap[i].code);
        free((void *)heap[i].backend);
        free((void *)heap[i].format);
        free((void *)heap[i].entry);
    }
    memset(heap, 0x5a, n * sizeof *heap);
    free(heap);

    acg_device *dev = tc_open();
    if (dut_has_rowscale_code()) {
        expect_rowscale_runs(dev, "tk_impl_copied");
    } else {
        expect_no_code(dev, "tk_impl_copied");
    }
    acg_device *cpu = tc_open_cpu();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_impl_copied", &k));
    const acg_kernel_desc *copy = &k->def->d;
    assert_int_equal(copy->n_impls, n);
    for (uint32_t i = 0; i < n; i++) {
        const acg_kernel_impl *c = &copy->impls[i];
        assert_string_equal(c->format, from[i].format);
        assert_string_equal(c->entry, "tk_rowscale");
        assert_int_equal(c->size, from[i].size);
        if (from[i].backend == NULL) {
            assert_null(c->backend);
        } else {
            assert_string_equal(c->backend, from[i].backend);
        }
        if (c->size != 0) {
            assert_int_equal((uintptr_t)c->code % 16, 0);
            assert_memory_equal(c->code, from[i].code, c->size);
        } else {
            assert_string_equal(c->code, from[i].code);
        }
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_copied"));
}

/* In a set, an entry that names no function runs the one of the definition's own name
 * (tk_rowscale), not of the set's name for it. */
static void test_impls_in_set(void **state) {
    (void)state;
    acg_kernel_impl list[3];
    const uint32_t n = rowscale_impls(list, NULL);
    const acg_kernel_desc d = rowscale_desc_impls("tk_rowscale", list, n);
    TC_OK(acg_kernel_register_set("engine_i", &d, 1));
    acg_device *dev = tc_open();
    if (dut_has_rowscale_code()) {
        expect_rowscale_runs(dev, "engine_i/tk_rowscale");
    } else {
        expect_no_code(dev, "engine_i/tk_rowscale");
    }
    acg_device *cpu = tc_open_cpu();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "engine_i/tk_rowscale", &k));
    for (uint32_t i = 0; i < k->def->d.n_impls; i++) {
        assert_string_equal(k->def->d.impls[i].entry, "tk_rowscale");
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_i"));
}

/* The core's kernels are not copied at registration: their definitions carry the list their one
 * source built (OpenCL C always, a fatbin and SPIR-V where the build has the tools) and no
 * legacy fields, and the test drivers' lookups find them by function. */
static void test_impls_core(void **state) {
    (void)state;
    size_t n_core = 0;
    const acg__kernel_def *core = acg__core_kernels(&n_core);
    for (size_t i = 0; i < n_core; i++) {
        const acg__kernel_def *c = &core[i];
        const acg_kernel_impl *cl = acg__kernel_impl_find(c, "opencl", ACG_KERNEL_FORMAT_OPENCL_C);
        assert_non_null(cl);
        assert_int_equal(cl->size, 0); /* text */
        assert_non_null(strstr(cl->code, c->name));
        assert_string_equal(cl->entry, c->name);
        assert_null(c->d.opencl.source);
        const acg_kernel_impl *cu = acg__kernel_impl_find(c, "cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE);
        const acg_kernel_impl *spv =
            acg__kernel_impl_find(c, "level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL);
#ifdef ACG_HAVE_CUDA_KERNELS
        assert_non_null(cu);
        assert_true(cu->size > 0);
        assert_null(c->d.cuda.fatbin);
        assert_ptr_equal(find_cuda(cu->code, cu->size, c->name), &c->d);
        assert_ptr_equal(find_cuda(NULL, 0, c->name), &c->d);
#else
        assert_null(cu);
        assert_null(find_cuda(NULL, 0, c->name));
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
        assert_non_null(spv);
        assert_true(spv->size > 0 && spv->size % 4 == 0);
        assert_null(c->d.spirv.module);
        assert_ptr_equal(find_spirv(c->name), &c->d);
#else
        assert_null(spv);
        assert_null(find_spirv(c->name));
#endif
    }
    assert_null(find_cuda(NULL, 0, "no_such_function"));
}

/* A grid of more than UINT32_MAX work items is refused, also one whose product of three 32-bit
 * sizes wraps 64 bits to 0 ({2^31, 2^31, 4}), which a check of the whole product misses. */
static void test_grid_overflow(void **state) {
    (void)state;
    acg_kernel_desc d = rowscale_desc("tk_grid3");
    d.dims = 3;
    d.shape = reached_shape;
    d.cpu.fn = never_called;
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
    const acg_arg good[] = {acg_arg_buffer(f->out, 0), acg_arg_buffer(f->x, 0),
                            acg_arg_buffer(f->w, 0), acg_arg_u32(WIDTH), acg_arg_u32(ROWS)};
    acg_arg bad[5];
    const bool graphs = tc_cap()->graphs;
    for (int capture = 0; capture <= (graphs ? 1 : 0); capture++) {
        if (capture) {
            TC_OK(acg_stream_begin_capture(f->s, NULL));
            TC_OK(rowscale(f->s, f->k, f->out, 0, f->x, 0, f->w, WIDTH, 1)); /* one good node */
        }
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, good, 4));
        TC_LAST_ERROR_HAS("5");
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, NULL, 5));
        memcpy(bad, good, sizeof bad);
        bad[3] = acg_arg_i32(WIDTH);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("argument 3 is a i32");
        memcpy(bad, good, sizeof bad);
        bad[2] = acg_arg_u32(0);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("argument 2 is a u32");
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &short_grid, good, 5));
        TC_LAST_ERROR_HAS("the grid must cover (width, n)");
        const acg_dims three = {{WIDTH, ROWS, 2}, {0, 0, 0}};
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &three, good, 5));
        memcpy(bad, good, sizeof bad);
        bad[4] = acg_arg_u32(ROWS + 1); /* a row past the buffers */
        const acg_dims more = grid2(WIDTH, ROWS + 1);
        TC_EXPECT(ERR_OUT_OF_RANGE, acg_kernel_launch(f->s, f->k, &more, bad, 5));
        memcpy(bad, good, sizeof bad);
        bad[1] = acg_arg_buffer(f->x, 2); /* misaligned */
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, bad, 5));
        memcpy(bad, good, sizeof bad);
        bad[2] = acg_arg_buffer(f->out, 0); /* w on out's window: not the in-place pair */
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &d, bad, 5));
        TC_LAST_ERROR_HAS("does not work in place");
        memcpy(bad, good, sizeof bad);
        bad[1] = acg_arg_buffer(f->out, 4 * sizeof(float)); /* the pair, but shifted */
        const acg_dims fewer = grid2(WIDTH, ROWS - 1);
        bad[4] = acg_arg_u32(ROWS - 1);
        TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_launch(f->s, f->k, &fewer, bad, 5));
        TC_LAST_ERROR_HAS("without being the same window");
        if (capture) {
            acg_capture_state cs;
            TC_OK(acg_stream_get_capture_state(f->s, &cs));
            assert_int_equal(cs, ACG_CAPTURE_ACTIVE);
            acg_graph *g = NULL;
            TC_OK(acg_stream_end_capture(f->s, &g));
            size_t n = 0;
            TC_OK(acg_graph_get_node_count(g, &n));
            assert_int_equal(n, 1);
            TC_OK(acg_graph_destroy(g));
        }
        float back[CAP], poison[CAP];
        download(f, back);
        uint32_t p = 0xdeadbeefu;
        for (size_t i = 0; i < CAP; i++) {
            memcpy(&poison[i], &p, 4);
        }
        TC_BYTES_EQUAL(back, poison, sizeof back);
    }
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
    acg_stream *s;
    acg_buffer *x, *w, *out;
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
    STEP(acg_stream_create(sc.dev, &sc.s));
    STEP(acg_buffer_alloc(sc.dev, sizeof hx, &sc.x));
    STEP(acg_buffer_alloc(sc.dev, sizeof hw, &sc.w));
    STEP(acg_buffer_alloc(sc.dev, sizeof hx, &sc.out));
    acg_kernel *k = NULL;
    STEP(acg_kernel_get(sc.dev, "tk_sweep", &k));
    STEP(acg_copy_h2d(sc.s, sc.x, 0, hx, sizeof hx));
    STEP(acg_copy_h2d(sc.s, sc.w, 0, hw, sizeof hw));
    if (tc_cap()->graphs) {
        STEP(acg_stream_begin_capture(sc.s, NULL));
        sc.capturing = true;
        STEP(rowscale(sc.s, k, sc.out, 0, sc.x, 0, sc.w, WIDTH, ROWS));
        sc.capturing = false;
        STEP(acg_stream_end_capture(sc.s, &sc.g));
        STEP(acg_graph_launch(sc.g, sc.s));
    } else {
        STEP(rowscale(sc.s, k, sc.out, 0, sc.x, 0, sc.w, WIDTH, ROWS));
    }
    STEP(acg_copy_d2h(sc.s, back, sc.out, 0, sizeof back));
    if (memcmp(back, want, sizeof back) != 0) {
        st = ACG_ERR_INTERNAL;
    }
out:
    if (sc.capturing) {
        acg_graph *g = NULL;
        if (acg_stream_end_capture(sc.s, &g) == ACG_OK) {
            TC_OK(acg_graph_destroy(g));
        }
    }
    if (sc.s != NULL) {
        acg_stream_synchronize(sc.s);
    }
    TC_OK(acg_graph_destroy(sc.g));
    TC_OK(acg_buffer_free(sc.x));
    TC_OK(acg_buffer_free(sc.w));
    TC_OK(acg_buffer_free(sc.out));
    TC_OK(acg_stream_destroy(sc.s));
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
    cmocka_unit_test_setup_teardown(test_launch_capture_replay, setup, teardown),
    cmocka_unit_test_setup_teardown(test_graph_update, setup, teardown),
    cmocka_unit_test(test_no_code_for_backend),
    cmocka_unit_test(test_duplicate_and_unregister),
    cmocka_unit_test(test_desc_copied),
    cmocka_unit_test(test_spirv_module_copied),
    cmocka_unit_test(test_malformed_refused),
    cmocka_unit_test(test_desc_size),
    cmocka_unit_test(test_data_rules),
    cmocka_unit_test(test_kernel_sets),
    cmocka_unit_test(test_kernel_set_out_of_memory),
    cmocka_unit_test(test_impls_opencl_entry),
    cmocka_unit_test(test_impls_spirv_as_text),
    cmocka_unit_test(test_impls_merged_list),
    cmocka_unit_test(test_impls_unknown_format),
    cmocka_unit_test(test_impls_lanes_and_limit),
    cmocka_unit_test(test_impls_legacy_size),
    cmocka_unit_test(test_impls_copied),
    cmocka_unit_test(test_impls_in_set),
    cmocka_unit_test(test_impls_core),
    cmocka_unit_test_setup_teardown(test_bad_launch_submits_nothing, setup, teardown),
    cmocka_unit_test(test_grid_overflow),
    cmocka_unit_test(test_concurrent_registration),
    cmocka_unit_test(test_alloc_sweep),
};
TC_MAIN("test_kernel_register", tests)
