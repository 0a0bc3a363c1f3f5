#version 460
/* scale_add.vulkan.glsl — scale_add.acg.c's kernel for the vulkan backend: GLSL cannot be
 * written as the one source is (acg/kernel.glsl says why), so it sits beside it and
 * acg_add_kernels compiles it. */
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);

#if defined(ACG_VK_scale_add)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
    float a;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    y.v[i] = acg_add(acg_mul(a, x.v[i]), y.v[i]); /* a * x[i] + y[i], never fused */
}
#else
#error "scale_add.vulkan.glsl: define ACG_VK_<kernel>"
#endif
