/*
 * acg/kernel.glsl — the Vulkan side of a kernel written once (acg/kernel.h): what a GLSL compute
 * shader includes to be launched by the vulkan backend (acg.h, ACG_KERNEL_FORMAT_SPIRV_VULKAN),
 * and acg's arithmetic (docs/arithmetic.md) in GLSL.
 *
 * GLSL has no pointers and no C casts, so the one source of acg/kernel.h cannot be compiled as
 * GLSL: a kernel's Vulkan code is written beside its source, `<stem>.vulkan.glsl` next to
 * `<stem>.acg.c`, every kernel of the source under `#if defined(ACG_VK_<kernel>)`, which
 * acg_add_kernels compiles once per kernel. Each declares its push-constant block, whose first
 * member is `uvec4 acg_grid` and whose others are the kernel's parameters in order, a buffer as
 * a buffer_reference of its item type:
 *
 *     #version 460
 *     #extension GL_GOOGLE_include_directive : require
 *     #include "acg/kernel.glsl"
 *     ACG_VK_BUFFER(acg_f32, float);
 *     #if defined(ACG_VK_axpy)
 *     layout(push_constant, std430) uniform acg_args { uvec4 acg_grid; acg_f32 y; acg_f32 x; float a; };
 *     void main() {
 *         ACG_VK_ITEM();
 *         const uint i = acg_id(0);
 *         y.v[i] = acg_fma(a, x.v[i], y.v[i]);
 *     }
 *     #endif
 *
 * The arithmetic: Vulkan rounds +, - and * correctly but lets a compiler fuse a * b + c unless
 * the result is `precise` (NoContraction), allows 2.5 ulp for division and inherits sqrt from
 * an inverse square root; so acg_add, acg_sub and acg_mul are precise, acg_fma is fma, and
 * acg_div and acg_sqrt compute the correctly rounded result from an estimate and one exact
 * residual (fma). A driver must run fma as one rounding (Vulkan does not promise it; Mesa's
 * lavapipe does) and keep subnormals out of the picture: acg's kernels produce none.
 */
#ifndef ACG_KERNEL_GLSL
#define ACG_KERNEL_GLSL

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

/* The group's width is the backend's choice for the device (specialization constant 0). */
layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

/* A buffer of items of type T: `name x` is a window, its item i is x.v[i]. */
#define ACG_VK_BUFFER(name, T)                                                                     \
    layout(buffer_reference, std430, buffer_reference_align = 4) buffer name { T v[]; }

/* The work item's index and the launch's global size in dimension d (0..2). */
#define acg_id(d) gl_GlobalInvocationID[d]
#define acg_size(d) acg_grid[d]
/* Returns from a work item past the grid (whole groups are run). */
#define ACG_VK_ITEM()                                                                              \
    if (acg_id(0) >= acg_size(0) || acg_id(1) >= acg_size(1) || acg_id(2) >= acg_size(2)) {       \
        return;                                                                                    \
    }

float acg_add(float a, float b) {
    precise float r = a + b;
    return r;
}
float acg_sub(float a, float b) {
    precise float r = a - b;
    return r;
}
float acg_mul(float a, float b) {
    precise float r = a * b;
    return r;
}
float acg_fma(float a, float b, float c) {
    precise float r = fma(a, b, c);
    return r;
}
float acg_as_float(uint u) { return uintBitsToFloat(u); }
uint acg_as_uint(float f) { return floatBitsToUint(f); }
bool acg_isnan(float x) { return isnan(x); }
bool acg_isfinite(float x) { return !isnan(x) && !isinf(x); }

#endif /* ACG_KERNEL_GLSL */
