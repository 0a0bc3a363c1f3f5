#version 460
/* decode_step.vulkan.glsl — decode_step.acg.c's kernels for the vulkan backend (GLSL beside the
 * one source: acg/kernel.glsl says why). */
#extension GL_GOOGLE_include_directive : require
#include "acg/kernel.glsl"

ACG_VK_BUFFER(acg_f32, float);
struct decode_input {
    uint token;
    uint pos;
};
ACG_VK_BUFFER(acg_input, decode_input);

/* h[i] = table[token][i] + pos, the token clamped to the vocabulary. */
void embed(acg_f32 h, acg_f32 table, uint token, uint pos, uint dim, uint vocab, uint i) {
    if (i >= dim || vocab == 0) { /* no row to read: the table reaches no bytes */
        return;
    }
    token = token < vocab ? token : vocab - 1;
    h.v[i] = acg_add(table.v[token * dim + i], float(pos)); /* GLSL indexes with 32 bits */
}

#if defined(ACG_VK_embed_in)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 h;
    acg_f32 table;
    acg_input in_;
    uint dim;
    uint vocab;
};
void main() {
    ACG_VK_ITEM();
    embed(h, table, in_.v[0].token, in_.v[0].pos, dim, vocab, acg_id(0));
}
#elif defined(ACG_VK_embed_arg)
ACG_VK_ARGS acg_args {
    uvec4 acg_grid;
    acg_f32 h;
    acg_f32 table;
    uint token;
    uint pos;
    uint dim;
    uint vocab;
};
void main() {
    ACG_VK_ITEM();
    embed(h, table, token, pos, dim, vocab, acg_id(0));
}
#else
#error "decode_step.vulkan.glsl: define ACG_VK_<kernel>"
#endif
