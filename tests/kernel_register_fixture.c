/* kernel_register_fixture.c — the kernel registration suites' kernel and fixture (see
 * kernel_register_fixture.h). */
#include "kernel_register_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "test_kernels_cl.h" /* tests/test_kernels.cl, as text */
#ifdef ACG_HAVE_CUDA_KERNELS
#include "test_kernels_cuda.h" /* tests/cuda/test_kernels.cu, compiled by the build */
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
#include "test_kernels_spv.h" /* tests/test_kernels.cl, compiled to SPIR-V by the build */
#endif
#ifdef ACG_HAVE_VULKAN_KERNELS
#include "test_kernels_vk.h" /* tests/test_kernels.vulkan.glsl, SPIR-V for Vulkan */
#endif

/* ---- the user's kernel ----------------------------------------------------------------------- */

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

const char *const rowscale_cl = tc_test_kernels_cl;

static const char *rowscale_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    const uint64_t width = a[3].value.u32, n = a[4].value.u32;
    extent[0] = extent[1] = tc_mul_sat(tc_mul_sat(4, width), n);
    extent[2] = tc_mul_sat(4, width);
    return d->global[0] < width || d->global[1] < n ? "the grid must cover (width, n)" : NULL;
}

acg_kernel_desc rowscale_desc(const char *name) {
    acg_kernel_desc d = tc_rows_kernel_desc(name);
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
#ifdef ACG_HAVE_VULKAN_KERNELS
    /* Vulkan's code has no field of its own: an impls entry, beside the fields above. */
    static const acg_kernel_impl vulkan[] = {{"vulkan", ACG_KERNEL_FORMAT_SPIRV_VULKAN,
                                              tc_test_kernels_vk, sizeof tc_test_kernels_vk,
                                              "tk_rowscale"}};
    d.impls = vulkan;
    d.n_impls = 1;
#endif
    return d;
}

void rowscale_drop_legacy(acg_kernel_desc *d) {
    memset(&d->opencl, 0, sizeof d->opencl);
    memset(&d->cuda, 0, sizeof d->cuda);
    memset(&d->spirv, 0, sizeof d->spirv);
    d->impls = NULL; /* the Vulkan entry rowscale_desc adds, for want of a field */
    d->n_impls = 0;
}

acg_kernel_desc rowscale_desc_impls(const char *name, const acg_kernel_impl *impls, uint32_t n) {
    acg_kernel_desc d = rowscale_desc(name);
    rowscale_drop_legacy(&d);
    d.impls = impls;
    d.n_impls = n;
    return d;
}

uint32_t rowscale_impls(acg_kernel_impl *out, const char *entry) {
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
#ifdef ACG_HAVE_VULKAN_KERNELS
    out[n++] = (acg_kernel_impl){"vulkan", ACG_KERNEL_FORMAT_SPIRV_VULKAN, tc_test_kernels_vk,
                                 sizeof tc_test_kernels_vk, entry};
#endif
    return n;
}

bool dut_has_rowscale_code(void) {
    bool has = tc_backend_is("cpu") || tc_backend_is("opencl");
#ifdef ACG_HAVE_CUDA_KERNELS
    has = has || tc_backend_is("cuda");
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
    has = has || tc_backend_is("level_zero");
#endif
#ifdef ACG_HAVE_VULKAN_KERNELS
    has = has || tc_backend_is("vulkan");
#endif
    return has;
}

acg_dims grid2(uint32_t x, uint32_t y) {
    acg_dims d = {{x, y, 1}, {0, 0, 0}};
    return d;
}

acg_status rowscale(acg_stream *s, const acg_kernel *k, acg_buffer *out, size_t out_off,
                    const acg_buffer *x, size_t x_off, const acg_buffer *w, uint32_t width,
                    uint32_t n) {
    const acg_arg args[] = {acg_arg_buffer(out, out_off), acg_arg_buffer(x, x_off),
                            acg_arg_buffer(w, 0), acg_arg_u32(width), acg_arg_u32(n)};
    const acg_dims dims = grid2(width, n);
    return acg_kernel_launch(s, k, &dims, args, 5);
}

void rowscale_ref(float *out, const float *x, const float *w, uint32_t width, uint32_t n) {
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t c = 0; c < width; c++) {
            out[r * width + c] = x[r * width + c] * w[c];
        }
    }
}

const char *reached_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent) {
    (void)a;
    (void)d;
    (void)extent;
    return "the shape rule was reached";
}

uint32_t never_parts(const acg_cpu_arg *a, const uint32_t global[3], uint32_t max_parts) {
    (void)a;
    (void)global;
    (void)max_parts;
    fail();
    return 1;
}

void rowscale_on(acg_device *dev, const char *name, const float *hx, const float *hw, float *got) {
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, name, &k));
    tc_rows_io io;
    tc_rows_io_open(&io, dev, CAP * sizeof(float), hx, CAP * sizeof(float), hw,
                    WIDTH * sizeof(float));
    TC_OK(rowscale(io.s, k, io.out, 0, io.x, 0, io.w, WIDTH, ROWS));
    tc_download(io.s, got, io.out, CAP * sizeof(float));
    tc_rows_io_close(&io);
}

void expect_rowscale_runs(acg_device *dev, const char *name) {
    float hx[CAP], hw[WIDTH], want[CAP], got[CAP];
    tc_fill_floats(hx, CAP, 51);
    tc_fill_floats(hw, WIDTH, 52);
    rowscale_ref(want, hx, hw, WIDTH, ROWS);
    rowscale_on(dev, name, hx, hw, got);
    TC_BYTES_EQUAL(got, want, sizeof got);
}

void expect_no_code(acg_device *dev, const char *name) {
    acg_kernel *const untouched = (acg_kernel *)(uintptr_t)0x33;
    acg_kernel *k = untouched;
    TC_EXPECT(ERR_UNSUPPORTED, acg_kernel_get(dev, name, &k));
    TC_LAST_ERROR_HAS(name);
    TC_LAST_ERROR_HAS(acg_device_get_capability(dev)->backend);
    assert_ptr_equal(k, untouched);
}

/* ---- fixture ------------------------------------------------------------------------------- */

int rowscale_setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const acg_kernel_desc d = rowscale_desc("tk_rowscale_f32");
    TC_OK(acg_kernel_register(&d));
    f->dev = tc_open();
    TC_OK(acg_kernel_get(f->dev, "tk_rowscale_f32", &f->k));
    tc_fill_floats(f->hx, CAP, 31);
    tc_fill_floats(f->hw, WIDTH, 32);
    tc_rows_io_open(&f->io, f->dev, sizeof f->hx, f->hx, sizeof f->hx, f->hw, sizeof f->hw);
    *state = f;
    return 0;
}

int rowscale_teardown(void **state) {
    fx *f = *state;
    tc_rows_io_close(&f->io);
    /* The device holds the kernel until it closes; only then may the definition go. */
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister("tk_rowscale_f32"));
    tc_close(f->dev);
    TC_OK(acg_kernel_unregister("tk_rowscale_f32"));
    free(f);
    return 0;
}

void rowscale_download(fx *f, float *dst) { tc_download(f->io.s, dst, f->io.out, sizeof f->hx); }

void nothing_left_alive(void **state) {
    (void)state;
    tc_alloc_install();
    tc_alloc_uninstall();
}
