/*
 * acg/kernel.glsl — the Vulkan side of a kernel written once (acg/kernel.h): what a GLSL compute
 * shader includes to be launched by the vulkan backend (acg.h, ACG_KERNEL_FORMAT_SPIRV_VULKAN),
 * and acg's arithmetic (docs/arithmetic.md) in GLSL.
 *
 * GLSL has no pointers and no C casts, so the one source of acg/kernel.h cannot be compiled as
 * GLSL: a kernel's Vulkan code is written beside its source, `<stem>.vulkan.glsl` next to
 * `<stem>.acg.c`, every kernel of the source under `#if defined(ACG_VK_<kernel>)`, which
 * acg_add_kernels compiles once per kernel. Each declares its argument block with ACG_VK_ARGS,
 * whose first member is `uvec4 acg_grid` and whose others are the kernel's parameters in order,
 * a buffer as a buffer_reference of its item type:
 *
 *     #version 460
 *     #extension GL_GOOGLE_include_directive : require
 *     #include "acg/kernel.glsl"
 *     ACG_VK_BUFFER(acg_f32, float);
 *     #if defined(ACG_VK_axpy)
 *     ACG_VK_ARGS acg_args { uvec4 acg_grid; acg_f32 y; acg_f32 x; float a; };
 *     void main() {
 *         ACG_VK_ITEM();
 *         const uint i = acg_id(0);
 *         y.v[i] = acg_fma(a, x.v[i], y.v[i]);
 *     }
 *     #endif
 *
 * The arithmetic: Vulkan rounds +, - and * correctly but lets a compiler fuse a * b + c unless
 * the result is `precise` (NoContraction), so acg_add, acg_sub and acg_mul are precise. It
 * lets fma() round twice (its precision is "inherited from OpFMul followed by OpFAdd", and
 * Mesa's lavapipe does exactly that), allows 2.5 ulp for division and inherits sqrt from an
 * inverse square root. So acg_fma runs the driver's fma where the shader finds it rounding
 * once (ACG_VK_ITEM() asks, on a value the compiler cannot fold), and otherwise computes the
 * correctly rounded a * b + c on the significands as integers; acg_div and acg_sqrt always do
 * (one 64-bit division, an integer square root), so they need nothing of the driver's floats.
 * The integer paths produce subnormal results exactly; the driver's own +, -, * and fma may
 * flush them (Vulkan promises to keep them only with shaderDenormPreserveFloat32, which
 * lavapipe does not offer, though it keeps them): acg's kernels produce none from the data of
 * a working model. Needs shaderInt64.
 *
 * Loops: Mesa's lavapipe ends every loop of a work item, silently, once the work item has run
 * 65535 loop iterations in all (llvmpipe's guard against hangs). A kernel that walks long rows
 * takes a block of items per iteration, unrolled in order ([[unroll]],
 * GL_EXT_control_flow_attributes), as src/model/ops.vulkan.glsl does.
 */
#ifndef ACG_KERNEL_GLSL
#define ACG_KERNEL_GLSL

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

/* The group's width is the backend's choice for the device (specialization constant 0). */
layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;

/* The argument block: a storage buffer, set 0 binding 0, which the backend binds at each
 * launch's block (a graph's kernel node keeps its own, which an update rewrites in place, so
 * the arguments are read from memory rather than push constants). A block without an instance
 * name, so that the kernel reads its parameters by their names. */
#define ACG_VK_ARGS layout(set = 0, binding = 0, std430) buffer

/* A buffer of items of type T: `name x` is a window, its item i is x.v[i]. */
#define ACG_VK_BUFFER(name, T)                                                                     \
    layout(buffer_reference, std430, buffer_reference_align = 4) buffer name { T v[]; }

/* The work item's index and the launch's global size in dimension d (0..2). */
#define acg_id(d) gl_GlobalInvocationID[d]
#define acg_size(d) acg_grid[d]
/* Whether this shader's fma() rounds once, which ACG_VK_ITEM() finds out; until then acg_fma
 * takes the integer path, which is right everywhere. */
bool acg_vk_fma_fused = false;

/* Returns from a work item past the grid (whole groups are run), and probes fma():
 * c = 1 + 2^-12 (or 1 + 2^-12 + 2^-23: the fourth grid word, 0 by the calling convention,
 * keeps the compiler from folding the probe with its own, fused, arithmetic) squares to a
 * value of 25 or more bits, so c c - RN(c c) is not 0 exactly when fma rounds once. */
#define ACG_VK_ITEM()                                                                              \
    if (acg_id(0) >= acg_size(0) || acg_id(1) >= acg_size(1) || acg_id(2) >= acg_size(2)) {       \
        return;                                                                                    \
    }                                                                                              \
    acg_vk_fma_fused = acg_vk_fma_rounds_once(acg_grid.w == 0u ? 0x3f800800u : 0x3f800801u)

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
float acg_as_float(uint u) { return uintBitsToFloat(u); }
uint acg_as_uint(float f) { return floatBitsToUint(f); }
bool acg_isnan(float x) { return isnan(x); }
bool acg_isfinite(float x) { return !isnan(x) && !isinf(x); }

/* A buffer x advanced by i items of `bytes` each: the one source's pointer x + i, whose i is
 * often a size_t product. A GLSL index is 32-bit, so a 64-bit offset moves the address instead
 * (the kernels then index the window from 0 with their 32-bit loop counters, as C does). */
#define ACG_VK_ADVANCE(name, x, i, bytes) name(uint64_t(x) + uint64_t(i) * uint64_t(bytes))

/* ---- exact arithmetic on the significands ----------------------------------------------------
 * A finite float is m 2^e with m an integer of up to 24 bits; the correctly rounded result of
 * an operation is found from an integer holding more bits than the float keeps and a sticky
 * bit for the ones it dropped, then rounded once, to nearest with ties to even, by
 * acg_vk_round. Special operands give IEEE's results: a NaN operand comes back quieted (the
 * first one, as x86 returns it), an invalid operation gives x86's default NaN (0xffc00000, the
 * cpu backend's bits where acg is built). GLSL reserves names with "__": the prelude's own
 * helpers are acg_vk_. */

const uint acg_vk_sign_bit = 0x80000000u;
const uint acg_vk_default_nan = 0xffc00000u;
const uint acg_vk_inf = 0x7f800000u;

/* NaN x with its quiet bit set, as an arithmetic operation returns it. */
float acg_vk_quiet(float x) { return uintBitsToFloat(floatBitsToUint(x) | 0x00400000u); }

int acg_vk_msb64(uint64_t m) {
    const uint hi = uint(m >> 32);
    return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(m));
}

/* |x| = m 2^e with m in [2^23, 2^24), for x finite and not zero; a subnormal x normalized by
 * its bits (a driver may read a subnormal as 0). */
uint acg_vk_unpack(float x, out int e) {
    const uint b = floatBitsToUint(x) & 0x7fffffffu;
    const uint be = b >> 23;
    if (be == 0u) {
        const int up = 23 - findMSB(b);
        e = -149 - up;
        return b << uint(up);
    }
    e = int(be) - 150;
    return (b & 0x007fffffu) | 0x00800000u;
}

/* (m + t) 2^e rounded to a float with the sign bit `sign`, for m > 0 and t in [0, 1): t is 0
 * unless sticky, and sticky only where m has more than 25 bits, so that the bits below the
 * rounding place and the sticky bit decide it. The place is bit msb - 23 of m, or the
 * subnormal one (2^-149) where that is higher; a result past the largest float is inf. */
float acg_vk_round(uint64_t m, int e, bool sticky, uint sign) {
    const int msb = acg_vk_msb64(m);
    if (msb + e < -150) { /* below 2^-150, half the smallest subnormal: 0 */
        return uintBitsToFloat(sign);
    }
    const int shift = max(msb - 23, -149 - e);
    uint64_t mant = m;
    if (shift > 0) {
        mant = m >> uint(shift);
        const uint64_t rem = m & ((1ul << uint(shift)) - 1ul), mid = 1ul << uint(shift - 1);
        if (rem > mid || (rem == mid && (sticky || (mant & 1ul) != 0ul))) {
            mant += 1ul;
        }
    } else if (shift < 0) {
        mant = m << uint(-shift);
    }
    /* mant 2^(e + shift), mant < 2^24 + 1: the exponent field and the significand add up,
     * a carry of the rounding or a subnormal's reaching 2^23 moving into the exponent. */
    const int biased = e + shift + 149;
    if (biased > 254) {
        return uintBitsToFloat(acg_vk_inf | sign);
    }
    const uint bits = (uint(biased) << 23) + uint(mant);
    return uintBitsToFloat(min(bits, acg_vk_inf) | sign);
}

/* a b + c rounded once, from the significands: the product P (48 bits) and c's significand
 * placed with their top bit at bit 61, the smaller shifted right to the larger's exponent
 * keeping a sticky bit, then added or subtracted. Where bits fall off, the two differ in
 * exponent by more than 14, so the result keeps at least 60 bits: the sticky bit is enough. */
float acg_vk_fma_exact(float a, float b, float c) {
    const uint ab = floatBitsToUint(a), bb = floatBitsToUint(b), cb = floatBitsToUint(c);
    const bool finite_ab = (ab & acg_vk_inf) != acg_vk_inf && (bb & acg_vk_inf) != acg_vk_inf;
    if (!finite_ab || (cb & acg_vk_inf) == acg_vk_inf || (ab & 0x7fffffffu) == 0u ||
        (bb & 0x7fffffffu) == 0u) {
        /* Inf, NaN or a zero product: a b is exact or not finite, so rounding twice is once;
         * but a finite a b (which may overflow alone) plus an infinite c is c. */
        if (finite_ab && (cb & 0x7fffffffu) == acg_vk_inf) {
            return c;
        }
        return acg_add(acg_mul(a, b), c);
    }
    int ea, eb, ec;
    const uint64_t p = uint64_t(acg_vk_unpack(a, ea)) * acg_vk_unpack(b, eb);
    const uint sp = (ab ^ bb) & acg_vk_sign_bit, sc = cb & acg_vk_sign_bit;
    uint64_t x = p << 14; /* p has 47 or 48 bits: its top bit at 61 or 60 */
    int ex = ea + eb - 14;
    if (acg_vk_msb64(x) == 60) {
        x <<= 1;
        ex -= 1;
    }
    if ((cb & 0x7fffffffu) == 0u) {
        return acg_vk_round(x, ex, false, sp); /* a b + 0, whatever the zero's sign */
    }
    uint64_t y = uint64_t(acg_vk_unpack(c, ec)) << 38;
    int ey = ec - 38;
    uint sx = sp, sy = sc;
    if (ey > ex || (ey == ex && y > x)) { /* x the larger in magnitude */
        const uint64_t t = x;
        x = y;
        y = t;
        const int te = ex;
        ex = ey;
        ey = te;
        sx = sc;
        sy = sp;
    }
    const int d = ex - ey;
    bool sticky = false;
    if (d >= 63) {
        sticky = true;
        y = 0ul;
    } else if (d > 0) {
        sticky = (y & ((1ul << uint(d)) - 1ul)) != 0ul;
        y >>= uint(d);
    }
    uint64_t r;
    if (sx == sy) {
        r = x + y; /* below 2^63; the dropped bits lie above r */
    } else {
        r = x - y; /* the dropped bits lie below r: one less, and the rest above that */
        if (sticky) {
            r -= 1ul;
        }
    }
    if (r == 0ul) {
        return 0.0; /* an exact cancellation is +0 when rounding to nearest */
    }
    return acg_vk_round(r, ex, sticky, sx);
}

/* Whether fma() rounds once here: c c - RN(c c) for c with bits cbits (ACG_VK_ITEM()). */
bool acg_vk_fma_rounds_once(uint cbits) {
    const float c = uintBitsToFloat(cbits);
    precise float r = fma(c, c, -acg_mul(c, c));
    return r != 0.0;
}

float acg_fma(float a, float b, float c) {
    if (acg_vk_fma_fused) {
        precise float r = fma(a, b, c);
        return r;
    }
    return acg_vk_fma_exact(a, b, c);
}

/* a / b correctly rounded: the significands' quotient A 2^40 / B, from 2^39 to 2^41, and
 * whether it has a remainder. */
float acg_div(float a, float b) {
    const uint ab = floatBitsToUint(a), bb = floatBitsToUint(b);
    const uint sign = (ab ^ bb) & acg_vk_sign_bit;
    if (isnan(a) || isnan(b)) {
        return acg_vk_quiet(isnan(a) ? a : b);
    }
    const bool inf_a = isinf(a), inf_b = isinf(b);
    const bool zero_a = (ab & 0x7fffffffu) == 0u, zero_b = (bb & 0x7fffffffu) == 0u;
    if ((inf_a && inf_b) || (zero_a && zero_b)) {
        return uintBitsToFloat(acg_vk_default_nan);
    }
    if (inf_a || zero_b) {
        return uintBitsToFloat(acg_vk_inf | sign);
    }
    if (zero_a || inf_b) {
        return uintBitsToFloat(sign);
    }
    int ea, eb;
    const uint64_t n = uint64_t(acg_vk_unpack(a, ea)) << 40;
    const uint64_t d = uint64_t(acg_vk_unpack(b, eb));
    const uint64_t q = n / d;
    return acg_vk_round(q, ea - eb - 40, q * d != n, sign);
}

/* sqrt(x) correctly rounded: x = m 2^e with e even, and the integer square root s of
 * m 2^30 (27 or 28 bits, from 2^53 to 2^55 under the root), whether s s falls short of it
 * the sticky bit. The driver's sqrt only seeds it: one Newton step, then unit steps. */
float acg_sqrt(float x) {
    const uint xb = floatBitsToUint(x);
    if (isnan(x)) {
        return acg_vk_quiet(x);
    }
    if ((xb & 0x7fffffffu) == 0u) {
        return x; /* sqrt(-0) is -0 */
    }
    if ((xb & acg_vk_sign_bit) != 0u) {
        return uintBitsToFloat(acg_vk_default_nan);
    }
    if (isinf(x)) {
        return x;
    }
    int e;
    uint64_t m = uint64_t(acg_vk_unpack(x, e));
    if ((e & 1) != 0) {
        m <<= 1;
        e -= 1;
    }
    const uint64_t n = m << 30;
    uint64_t s = uint64_t(sqrt(float(n)));
    s = clamp(s, 1ul << 26, 1ul << 28);
    s = (s + n / s) >> 1;
    for (int i = 0; i < 64 && s * s > n; i++) {
        s -= 1ul;
    }
    for (int i = 0; i < 64 && (s + 1ul) * (s + 1ul) <= n; i++) {
        s += 1ul;
    }
    return acg_vk_round(s, (e - 30) / 2, s * s != n, 0u);
}

/* ---- e^x -----------------------------------------------------------------------------------
 * acg's own (acg/kernel.h, docs/arithmetic.md), operation for operation. NaN is tested first
 * and by name: `!(x <= c)` would be the C's test, but a compiler that assumes no NaN may turn
 * it into x > c. The low part of ln 2 is given by its bits: a decimal literal is read through
 * double by some compilers, which could round it twice. nh = ni / 2 truncates toward zero as
 * C does, written out because GLSL leaves a negative integer quotient to the implementation. */
float acg_exp(float x) {
    if (isnan(x)) {
        return x;
    }
    if (x > 88.72283935546875) {
        return uintBitsToFloat(0x7f800000u);
    }
    if (x < -87.0) {
        return 0.0;
    }
    const float t = acg_mul(x, 1.44269502162933349609375);        /* log2 e */
    const float n = acg_sub(acg_add(t, 12582912.0), 12582912.0);  /* rounds t */
    float r = acg_fma(n, -0.693145751953125, x);                  /* ln 2, high part */
    r = acg_fma(n, uintBitsToFloat(0xb5bfbe8eu), r);              /* -1.428606765330187045e-06 */
    float p = 1.98412701138295233249664306640625e-4;              /* 1/7! */
    p = acg_fma(p, r, 1.38888892251998186111450195312500e-3);     /* 1/6! */
    p = acg_fma(p, r, 8.33333376795053482055664062500000e-3);     /* 1/5! */
    p = acg_fma(p, r, 4.16666679084300994873046875000000e-2);     /* 1/4! */
    p = acg_fma(p, r, 1.66666671633720397949218750000000e-1);     /* 1/3! */
    p = acg_fma(p, r, 0.5);
    p = acg_fma(p, r, 1.0);
    p = acg_fma(p, r, 1.0);
    const int ni = int(n);
    const int nh = ni >= 0 ? ni >> 1 : -((-ni) >> 1);
    const float s1 = uintBitsToFloat(uint(ni - nh + 127) << 23);
    const float s2 = uintBitsToFloat(uint(nh + 127) << 23);
    return acg_mul(acg_mul(p, s1), s2);
}

#endif /* ACG_KERNEL_GLSL */
