#version 460
/* test_kernels.vulkan.glsl: the kernel tests register (test_kernel_register.c) for the vulkan
 * backend, as tests/test_kernels.cl is for opencl and level_zero; the build compiles it with the
 * entry point tk_rowscale (cmake/vulkan_kernels.cmake). */
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);

/* out (n, width) = x (n, width) * w (width) per row. */
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 x;
    acg_f32 w;
    uint width;
    uint n;
};
void main() {
    const uint c = acg_id(0), r = acg_id(1);
    if (c >= width || r >= n) {
        return;
    }
    out_.v[r * width + c] = acg_mul(x.v[r * width + c], w.v[c]);
}
