/* one_source.acg.c — kernels written once (include/acg/kernel.h) that test_one_source runs on
 * every backend against the cpu backend and a host loop: acg's exp over a sweep, the rest of its
 * arithmetic (contraction must stay off), shape rules as data over two dimensions, and three
 * dimensions with every scalar type. Built by acg_add_kernels as the set "tc_one". */
#include <acg/kernel.h>

/* y[i] = e^x[i] */
ACG_KERNEL(tc_exp, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x)) {
    const uint32_t i = acg_id(0);
    y[i] = acg_exp(x[i]);
}

/* Every operation of the one arithmetic in one expression: a fused multiply-add, correctly
 * rounded division and square root, and a product subtracted that a contraction would fuse. */
ACG_FUNC float tc_mix(float a, float b) {
    return acg_div(a, acg_sqrt(b)) + acg_fma(a, b, -1.0f) - a * b +
           acg_mul(acg_add(a, b), acg_sub(a, b));
}

ACG_KERNEL(tc_arith, ACG_ELEMENTWISE, ACG_BUF(float, y), ACG_BUF(const float, x),
           ACG_BUF(const float, z)) {
    const uint32_t i = acg_id(0);
    y[i] = tc_mix(x[i], z[i]);
}

/* out (rows, cols) = (w[r] * scale) * in (rows, cols) + bias[c], fused. */
ACG_KERNEL(tc_rows, ACG_GRID(cols, rows), ACG_BUF(float, out, rows, cols),
           ACG_BUF(const float, in, rows, cols), ACG_BUF(const float, w, rows),
           ACG_BUF(const float, bias, cols), ACG_F32(scale), ACG_U32(cols), ACG_U32(rows)) {
    const uint32_t c = acg_id(0), r = acg_id(1);
    if (c >= cols || r >= rows) {
        return;
    }
    const size_t at = (size_t)r * cols + c;
    out[at] = acg_fma(w[r] * scale, in[at], bias[c]);
}

/* A 3-D grid, each work item its own element of out (x fastest), from its ids and every
 * scalar type; out reaches global x times n_yz (global y * global z) items. */
ACG_KERNEL(tc_ids, ACG_GRID(ACG_ONE, ACG_ONE, ACG_ONE), ACG_BUF(int64_t, out, ACG_GRID_X, n_yz),
           ACG_U32(n_yz), ACG_I32(base), ACG_I64(big), ACG_U64(mask)) {
    const uint32_t x = acg_id(0), y = acg_id(1), z = acg_id(2);
    const size_t at = ((size_t)z * acg_size(1) + y) * acg_size(0) + x;
    if (at >= (size_t)acg_size(0) * n_yz) {
        return;
    }
    const uint64_t bits = ((uint64_t)at * ACG_U64_C(0x9E3779B97F4A7C15)) & mask;
    out[at] =
        (int64_t)base * (int64_t)(x + 1) - (int64_t)y * 1000 + big + (int64_t)bits + (int64_t)z;
}
