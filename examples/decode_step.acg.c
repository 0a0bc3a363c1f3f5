/* decode_step.acg.c — decode_step.c's two kernels, written once (<acg/kernel.h>: docs/kernels.md).
 * acg_add_kernels(decode_step SET decode_step ...) in CMakeLists.txt builds this file for every
 * backend the installed acg has and generates decode_step_register_kernels(), which registers
 * them as "decode_step/embed_in" and "decode_step/embed_arg".
 *
 * Both compute h[i] = table[token][i] + pos, a token past the vocabulary taken as its last, one
 * work item per element of h; embed_in reads token and pos from a buffer (path A's input, which
 * a captured copy fills from pinned memory), embed_arg takes them as scalar arguments (path B's,
 * which a per-node update changes). Their rule is data: the grid covers dim, h reaches dim
 * floats, table vocab x dim, in one decode_input; acg checks every launch against it. */
#include <acg/kernel.h>

/* What embed_in reads: the token and its position, as the host writes them (two uint32_t). */
typedef struct decode_input {
    uint32_t token;
    uint32_t pos;
} decode_input;

ACG_FUNC void embed(ACG_GLOBAL float *h, ACG_GLOBAL const float *table, uint32_t token,
                    uint32_t pos, uint32_t dim, uint32_t vocab, uint32_t i) {
    if (i >= dim || vocab == 0) { /* no row to read: the table reaches no bytes */
        return;
    }
    token = token < vocab ? token : vocab - 1;
    h[i] = table[(size_t)token * dim + i] + (float)pos;
}

/* h (dim), table (vocab, dim), in (token, pos); u32 dim, vocab. */
ACG_KERNEL(embed_in, ACG_GRID(dim), ACG_BUF(float, h, dim), ACG_BUF(const float, table, dim, vocab),
           ACG_BUF(const decode_input, in), ACG_U32(dim), ACG_U32(vocab)) {
    embed(h, table, in->token, in->pos, dim, vocab, acg_id(0));
}

/* h (dim), table (vocab, dim); u32 token, pos, dim, vocab. */
ACG_KERNEL(embed_arg, ACG_GRID(dim), ACG_BUF(float, h, dim),
           ACG_BUF(const float, table, dim, vocab), ACG_U32(token), ACG_U32(pos), ACG_U32(dim),
           ACG_U32(vocab)) {
    embed(h, table, token, pos, dim, vocab, acg_id(0));
}
