#version 460
/* elementwise.vulkan.glsl — the core's four kernels (elementwise.acg.c) for the vulkan backend:
 * the same work item as the one source, in GLSL (acg/kernel.glsl says why it is written twice);
 * acg_add_kernels compiles each ACG_VK_<kernel> part to its own SPIR-V module. */
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);

#if defined(ACG_VK_fill_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    float value;
};
void main() {
    ACG_VK_ITEM();
    y.v[acg_id(0)] = value;
}
#elif defined(ACG_VK_add_scalar_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
    float a;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    y.v[i] = acg_add(x.v[i], a);
}
#elif defined(ACG_VK_axpy_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
    float a;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    y.v[i] = acg_add(acg_mul(a, x.v[i]), y.v[i]);
}
#elif defined(ACG_VK_copy_f32)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 dst;
    acg_f32 src;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    dst.v[i] = src.v[i];
}
#else
#error "elementwise.vulkan.glsl: define ACG_VK_<kernel>"
#endif
