#version 460
/* one_source.vulkan.glsl — the kernels of one_source.acg.c for the vulkan backend: the same work
 * item as the one source, in GLSL (acg/kernel.glsl says why it is written twice), operation for
 * operation, so that test_one_source finds the cpu backend's bits. acg_add_kernels compiles
 * each ACG_VK_<kernel> part to its own SPIR-V module. */
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);
ACG_VK_BUFFER(acg_i64, int64_t);

#if defined(ACG_VK_tc_exp)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
};
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    y.v[i] = acg_exp(x.v[i]);
}
#elif defined(ACG_VK_tc_arith)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 y;
    acg_f32 x;
    acg_f32 z;
};
/* C's left-to-right ((div + fma) - a b) + (a + b)(a - b), each operation rounded once. */
float tc_mix(float a, float b) {
    return acg_add(acg_sub(acg_add(acg_div(a, acg_sqrt(b)), acg_fma(a, b, -1.0)), acg_mul(a, b)),
                   acg_mul(acg_add(a, b), acg_sub(a, b)));
}
void main() {
    ACG_VK_ITEM();
    const uint i = acg_id(0);
    y.v[i] = tc_mix(x.v[i], z.v[i]);
}
#elif defined(ACG_VK_tc_rows)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 out_;
    acg_f32 in_;
    acg_f32 w;
    acg_f32 bias;
    float scale;
    uint cols;
    uint rows;
};
void main() {
    ACG_VK_ITEM();
    const uint c = acg_id(0), r = acg_id(1);
    if (c >= cols || r >= rows) {
        return;
    }
    const uint64_t at = uint64_t(r) * cols + c;
    ACG_VK_ADVANCE(acg_f32, out_, at, 4).v[0] =
        acg_fma(acg_mul(w.v[r], scale), ACG_VK_ADVANCE(acg_f32, in_, at, 4).v[0], bias.v[c]);
}
#elif defined(ACG_VK_tc_ids)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_i64 out_;
    uint n_yz;
    int base;
    int64_t big;
    uint64_t mask;
};
void main() {
    ACG_VK_ITEM();
    const uint x = acg_id(0), y = acg_id(1), z = acg_id(2);
    const uint64_t at = (uint64_t(z) * acg_size(1) + y) * acg_size(0) + x;
    if (at >= uint64_t(acg_size(0)) * n_yz) {
        return;
    }
    const uint64_t bits = (at * 0x9E3779B97F4A7C15ul) & mask;
    ACG_VK_ADVANCE(acg_i64, out_, at, 8).v[0] = int64_t(base) * int64_t(x + 1u) -
                                                 int64_t(y) * 1000l + big + int64_t(bits) +
                                                 int64_t(z);
}
#else
#error "one_source.vulkan.glsl: define ACG_VK_<kernel>"
#endif
