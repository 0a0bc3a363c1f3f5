/*
 * kernel_register_fixture.h — what the kernel registration suites share (test_kernel_register.c:
 * a registered kernel launched, captured and replayed, its definition copied, its name's
 * lifetime; test_kernel_register_checks.c: malformed definitions and launches refused;
 * test_kernel_register_impls.c: implementations as a list, and sets): the user's kernel, its
 * host reference, and a fixture that registers it and loads it on the device under test.
 * Every case leaves the registry as it found it, and closes what it opened: each suite ends
 * with a case that installs the counting allocator (test_kernel_register.c's allocation-failure
 * sweep, the others' nothing_left_alive), which acg refuses while any kernel stays registered
 * or any device or buffer stays open.
 */
#ifndef ACG_TESTS_KERNEL_REGISTER_FIXTURE_H
#define ACG_TESTS_KERNEL_REGISTER_FIXTURE_H

#include "common.h"

/* ---- the user's kernel: out (n, width) = x (n, width) * w (width) per row -------------------
 * Shaped (its windows follow from width and n), 2-D, in place on (out, x), one multiplication
 * per element: equal on every backend. */

enum { WIDTH = 24, ROWS = 10, CAP = WIDTH * ROWS };

/* Its OpenCL C: tests/test_kernels.cl, embedded by the build as text, whose function is
 * tk_rowscale (not the kernel's name: opencl.name says which it is). */
extern const char *const rowscale_cl;

/* The kernel's definition, with code for every backend the build has code for (cpu, OpenCL C,
 * CUDA where nvcc built tests/cuda/test_kernels.cu, SPIR-V where the build compiled
 * tests/test_kernels.cl); tests change a copy. */
acg_kernel_desc rowscale_desc(const char *name);
/* Clears d's code for the backends that load code: its legacy fields (opencl, cuda, spirv) and
 * its impls (the Vulkan entry rowscale_desc adds, Vulkan having no field): what is left is its
 * C function. */
void rowscale_drop_legacy(acg_kernel_desc *d);
/* The definition with its C function and the n entries of impls as its only code. */
acg_kernel_desc rowscale_desc_impls(const char *name, const acg_kernel_impl *impls, uint32_t n);

/* Entries for every backend the build has the kernel's code for (OpenCL C always, CUDA and
 * SPIR-V for level_zero and vulkan where it compiled them), each naming the function entry
 * (NULL: the kernel's name), and their count (at most ROWSCALE_MAX_IMPLS). The OpenCL C's entry
 * names no backend: every backend that takes the format. */
uint32_t rowscale_impls(acg_kernel_impl *out, const char *entry);
/* The most entries rowscale_impls writes: OpenCL C, cuda, level_zero and vulkan. */
#define ROWSCALE_MAX_IMPLS 4
/* Whether rowscale_impls gives the device under test's backend code. */
bool dut_has_rowscale_code(void);

/* The grid {x, y, 1}, the local size the backend's. */
acg_dims grid2(uint32_t x, uint32_t y);
/* Launches k on s: out (from out_off) = x (from x_off) * w, n rows of width. */
acg_status rowscale(acg_stream *s, const acg_kernel *k, acg_buffer *out, size_t out_off,
                    const acg_buffer *x, size_t x_off, const acg_buffer *w, uint32_t width,
                    uint32_t n);
/* The host's reference, the C function's loop. */
void rowscale_ref(float *out, const float *x, const float *w, uint32_t width, uint32_t n);

/* A shape rule that accepts nothing: a launch that reaches it passed the grid checks. */
const char *reached_shape(const acg_arg *a, const acg_dims *d, uint64_t *extent);
/* A cpu_parts count for definitions refused, or whose parts are never offered: running fails
 * the case. */
uint32_t never_parts(const acg_cpu_arg *a, const uint32_t global[3], uint32_t max_parts);

/* Loads kernel `name` on dev and runs it over hx (CAP floats) and hw (WIDTH) into got (CAP), on
 * a stream and buffers of its own. */
void rowscale_on(acg_device *dev, const char *name, const float *hx, const float *hw, float *got);
/* Loads kernel `name` on dev, runs it over every row and checks that the result is the host's,
 * bit for bit. */
void expect_rowscale_runs(acg_device *dev, const char *name);
/* acg_kernel_get on dev is refused for want of code for its backend, naming kernel and backend,
 * and leaves its out-parameter alone. */
void expect_no_code(acg_device *dev, const char *name);

/* ---- fixture: the kernel registered as tk_rowscale_f32, a device, a stream, x, w and out ----- */

typedef struct fx {
    acg_device *dev;
    acg_kernel *k;            /* tk_rowscale_f32, loaded */
    tc_rows_io io;            /* x and out (CAP floats), w (WIDTH), out poisoned */
    float hx[CAP], hw[WIDTH]; /* what x and w hold */
} fx;

/* cmocka's setup and teardown of the fixture (*state is the fx). The teardown unregisters the
 * kernel once the device, which holds it until it closes, is closed. */
int rowscale_setup(void **state);
int rowscale_teardown(void **state);
/* Downloads out (CAP floats) into dst. */
void rowscale_download(fx *f, float *dst);

/* A suite's last case: installs the counting allocator and restores the default, which
 * acg_set_allocator refuses (ACG_ERR_IN_USE) while any acg object is alive, a registered kernel
 * included; so it fails when an earlier case left one behind. */
void nothing_left_alive(void **state);

#endif /* ACG_TESTS_KERNEL_REGISTER_FIXTURE_H */
