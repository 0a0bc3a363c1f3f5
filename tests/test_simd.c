/*
 * test_simd.c — the vector tables of simd.h against the scalar table, bit for bit (memcmp):
 * every function on random data of many sizes, aligned and not; on IEEE's special values; over
 * dense ranges of exp's argument; matmuls of many shapes and output ranges; the attention
 * kernels over paged caches with sink pages. A level this CPU does not run is skipped, saying
 * so. `test_simd --choice` checks only which table acg__simd() picks under ACG_CPU_SIMD (CMake
 * runs it once per setting: the choice is made once per process).
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "model/arith.h"
#include "model/simd.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static const acg__simd_ops *const sc = &acg__simd_scalar;

/* The table a case runs (its state names it), or a skip that says why. */
static const acg__simd_ops *level(void **state) {
    const char *name = *state;
    const acg__simd_ops *t = acg__simd_level(name);
    if (t == NULL) {
        print_message("skipped: %s: this CPU does not run it (or the build has no x86 code)\n",
                      name);
        skip();
    }
    assert_string_equal(t->name, name);
    return t;
}

/* splitmix64: the same data on every run. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed) { rng_state = seed; }

static uint32_t rng_u32(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* In [0, 1). */
static float rng_unit(void) { return (float)(rng_u32() >> 8) * 0x1p-24f; }

/* Either sign, magnitudes 2^-9 .. 2^8: sums of these round differently in another order. */
static float rng_float(void) { return ldexpf(rng_unit() * 2.0f - 1.0f, (int)(rng_u32() % 17) - 8); }

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Infinities, zeros, subnormals, the extremes, exp's limits and their neighbours, values whose
 * products underflow or overflow, and NaN: x86's default NaN (the one every invalid operation
 * makes) first, then other NaNs. */
static const uint32_t special_bits[] = {
    0xffc00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u,
    0x007fffffu, 0x807fffffu, 0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu, 0x42b17218u,
    0xc2b17218u, 0x42b17217u, 0x42b17219u, 0x42ae0000u, 0xc2ae0000u, 0xc2ae0001u, 0xc2adffffu,
    0x3f800000u, 0xbf800000u, 0x3f000000u, 0x0da24260u, 0x8da24260u, 0x7149f2cau, 0xf149f2cau,
    0x42b40000u, 0xc2b40000u, 0x7fc00000u, 0x7fc12345u, 0xff812345u};
#define N_SPECIAL (sizeof special_bits / sizeof special_bits[0])
#define N_OTHER_NANS 3u

/* Special values whose only NaN is the default one, so every NaN of a computation has the same
 * bits. */
static float rng_special(void) {
    if (rng_u32() % 2 == 0) {
        return from_bits(special_bits[rng_u32() % (N_SPECIAL - N_OTHER_NANS)]);
    }
    return rng_float();
}

/* With NaNs of other signs and payloads too. */
static float rng_special_nans(void) {
    if (rng_u32() % 2 == 0) {
        return from_bits(special_bits[rng_u32() % N_SPECIAL]);
    }
    return rng_float();
}

/* n floats ending exactly at the end of their allocation (so a read past them is caught under
 * ASan), the first at a 4-byte offset from malloc's alignment when misaligned. */
typedef struct buf {
    float *base, *p;
} buf;

static buf buf_new(size_t n, int misaligned) {
    buf b;
    b.base = malloc((n + 1) * sizeof(float));
    assert_non_null(b.base);
    b.p = b.base + (misaligned ? 1 : 0);
    if (!misaligned) {
        /* Exactly n floats: realloc down keeps the data and the alignment. */
        float *q = realloc(b.base, n > 0 ? n * sizeof(float) : 1);
        assert_non_null(q);
        b.base = b.p = q;
    }
    return b;
}

static void buf_free(buf b) { free(b.base); }

static void fill(float *p, size_t n, float (*gen)(void)) {
    for (size_t i = 0; i < n; i++) {
        p[i] = gen();
    }
}

/* A pattern no function writes, so an output written where it should not be is seen. */
static void poison(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        p[i] = from_bits(0x7fa5a5a5u);
    }
}

/* Whether two results are the same bits, or (nan_any) both NaN. Where two NaNs of different
 * bits meet in one operation, x86 returns the first operand's, and C compilers treat the
 * operands of +, * and an fma's product as interchangeable: which NaN comes out is then the
 * register allocator's choice, in the scalar table as in the vector ones. Results that are not
 * NaN never depend on it, and a NaN result is NaN in both. */
static int same(const float *a, const float *b, size_t n, int nan_any) {
    if (memcmp(a, b, n * sizeof(float)) == 0) {
        return 1;
    }
    if (!nan_any) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (to_bits(a[i]) != to_bits(b[i]) && !(isnan(a[i]) && isnan(b[i]))) {
            return 0;
        }
    }
    return 1;
}

#define CHECK(a, b, n, ...) check_((a), (b), (n), 0, __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_NANS(nan_any, a, b, n, ...)                                                          \
    check_((a), (b), (n), (nan_any), __FILE__, __LINE__, __VA_ARGS__)
static void check_(const float *a, const float *b, size_t n, int nan_any, const char *file,
                   int line, const char *fmt, ...) {
    if (same(a, b, n, nan_any)) {
        return;
    }
    print_error("scalar and vector differ: ");
    va_list ap;
    va_start(ap, fmt);
    vprint_error(fmt, ap);
    va_end(ap);
    print_error("\n");
    tc_bytes_equal_(a, b, n * sizeof(float), file, line);
}

static const uint32_t sizes[] = {0, 1, 7, 31, 32, 33, 48, 63, 64, 100, 288, 768, 1000, 32000};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

/* Two inputs of one size and alignment, for a family's checks: a and b hold n floats from a
 * generator whose NaNs all have the same bits unless nan_any. */
typedef struct inputs {
    const acg__simd_ops *t;
    const char *kind; /* the generator's, for messages */
    int nan_any;
    const float *a, *b;
    uint32_t n;
    int mis;
} inputs;

/* Runs check (with ctx) on two inputs of gen's floats of every size, aligned and misaligned. */
static void over_sizes(const acg__simd_ops *t, float (*gen)(void), const char *kind,
                       void (*check)(const inputs *in, const void *ctx), const void *ctx) {
    for (size_t s = 0; s < N_SIZES; s++) {
        uint32_t n = sizes[s];
        for (int mis = 0; mis < 2; mis++) {
            buf a = buf_new(n, mis), b = buf_new(n, mis);
            fill(a.p, n, gen);
            fill(b.p, n, gen);
            const inputs in = {t, kind, gen == rng_special_nans, a.p, b.p, n, mis};
            check(&in, ctx);
            buf_free(a);
            buf_free(b);
        }
    }
}

/* A family of functions: on(t, gen, kind) checks each of them with data from gen. Its random
 * case seeds random_seed and draws from random_gen; its special case, from each seed of
 * [special_from, special_to), draws special values with only the default NaN, then with any. */
typedef struct family {
    void (*on)(const acg__simd_ops *t, float (*gen)(void), const char *kind);
    float (*random_gen)(void);
    uint64_t random_seed, special_from, special_to;
} family;

static void on_random(void **state, const family *f) {
    const acg__simd_ops *t = level(state);
    rng_seed(f->random_seed);
    f->on(t, f->random_gen, "random");
}

static void on_special(void **state, const family *f) {
    const acg__simd_ops *t = level(state);
    for (uint64_t seed = f->special_from; seed < f->special_to; seed++) {
        rng_seed(seed);
        f->on(t, rng_special, "special");
        f->on(t, rng_special_nans, "special with any NaN");
    }
}

/* ---- reductions --------------------------------------------------------------------------- */

static void reductions_of(const inputs *in, const void *ctx) {
    (void)ctx;
    static const float taus[] = {-INFINITY, -0.5f, 0.0f, 0.25f, 3.0f, NAN, INFINITY};
    const acg__simd_ops *t = in->t;
    const float *a = in->a, *b = in->b;
    const uint32_t n = in->n;
    float want = sc->dot(a, b, n), got = t->dot(a, b, n);
    CHECK_NANS(in->nan_any, &want, &got, 1, "%s dot, %s data, n=%u, misaligned %d", t->name,
               in->kind, n, in->mis);
    want = sc->sum(a, n);
    got = t->sum(a, n);
    CHECK_NANS(in->nan_any, &want, &got, 1, "%s sum, %s data, n=%u, misaligned %d", t->name,
               in->kind, n, in->mis);
    for (size_t i = 0; i < sizeof taus / sizeof taus[0] + 1; i++) {
        float tau = i < sizeof taus / sizeof taus[0] ? taus[i] : (n > 0 ? a[n / 2] : 1);
        want = sc->sum_ge(a, n, tau);
        got = t->sum_ge(a, n, tau);
        CHECK_NANS(in->nan_any, &want, &got, 1, "%s sum_ge, %s data, n=%u, tau=%g, misaligned %d",
                   t->name, in->kind, n, (double)tau, in->mis);
    }
}

static void reductions_on(const acg__simd_ops *t, float (*gen)(void), const char *kind) {
    over_sizes(t, gen, kind, reductions_of, NULL);
}

/* Partials that are -0: every product underflows to -0 and a tail leaves the lanes without a
 * term as they were (fma(0, 0, -0) would make them +0). */
static void test_reductions_negative_zero(void **state) {
    const acg__simd_ops *t = level(state);
    static const uint32_t ns[] = {1, 17, 31, 33, 40, 63, 70, 100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        uint32_t n = ns[i];
        buf a = buf_new(n, 0), b = buf_new(n, 0);
        for (uint32_t k = 0; k < n; k++) {
            a.p[k] = 1e-30f;
            b.p[k] = k % 3 == 0 ? -1e-30f : -0.0f;
        }
        float want = sc->dot(a.p, b.p, n), got = t->dot(a.p, b.p, n);
        CHECK(&want, &got, 1, "%s dot of underflowing products, n=%u", t->name, n);
        want = sc->sum(b.p, n);
        got = t->sum(b.p, n);
        CHECK(&want, &got, 1, "%s sum of -0 and tiny terms, n=%u", t->name, n);
        want = sc->sum_ge(b.p, n, -1.0f);
        got = t->sum_ge(b.p, n, -1.0f);
        CHECK(&want, &got, 1, "%s sum_ge of -0 and tiny terms, n=%u", t->name, n);
        buf_free(a);
        buf_free(b);
    }
}

/* ---- matmul ------------------------------------------------------------------------------- */

static void matmul_case(const acg__simd_ops *t, int nan_any, const char *kind, const float *x,
                        const float *w, uint32_t n_in, uint32_t n_out, uint32_t n, uint32_t j0,
                        uint32_t j1) {
    size_t len = (size_t)n * n_out;
    float *want = malloc(len * sizeof(float) + 1), *got = malloc(len * sizeof(float) + 1);
    assert_non_null(want);
    assert_non_null(got);
    poison(want, len);
    poison(got, len);
    sc->matmul(want, x, w, n_in, n_out, n, j0, j1);
    t->matmul(got, x, w, n_in, n_out, n, j0, j1);
    CHECK_NANS(nan_any, want, got, len, "%s matmul, %s data, n_in=%u n_out=%u n=%u j=[%u, %u)",
               t->name, kind, n_in, n_out, n, j0, j1);
    /* Both orders, whatever batch the cut-over gives either. */
    for (int stream = 0; stream <= 1; stream++) {
        poison(got, len);
        t->matmul_order(got, x, w, n_in, n_out, n, j0, j1, stream);
        CHECK_NANS(nan_any, want, got, len,
                   "%s matmul (%s), %s data, n_in=%u n_out=%u n=%u j=[%u, %u)", t->name,
                   stream ? "stream" : "tiles", kind, n_in, n_out, n, j0, j1);
    }
    free(want);
    free(got);
}

static void matmul_shapes(const acg__simd_ops *t, float (*gen)(void), const char *kind) {
    int nan_any = gen == rng_special_nans;
    static const uint32_t ns[] = {1, 2, 3, 4, 5, 7, 8, 32, 33};
    static const uint32_t n_ins[] = {0, 1, 7, 31, 32, 33, 48, 100, 288, 768};
    static const uint32_t n_outs[] = {1, 5, 16, 17, 37, 100};
    for (size_t a = 0; a < sizeof n_ins / sizeof n_ins[0]; a++) {
        uint32_t n_in = n_ins[a];
        for (size_t b = 0; b < sizeof n_outs / sizeof n_outs[0]; b++) {
            uint32_t n_out = n_outs[b];
            buf w = buf_new((size_t)n_out * n_in, (int)(b % 2));
            buf x = buf_new((size_t)33 * n_in, (int)(a % 2));
            fill(w.p, (size_t)n_out * n_in, gen);
            fill(x.p, (size_t)33 * n_in, gen);
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
                uint32_t n = ns[c];
                /* x's rows end at the end of its allocation */
                const float *xe = x.p + (size_t)(33 - n) * n_in;
                matmul_case(t, nan_any, kind, xe, w.p, n_in, n_out, n, 0, n_out);
                if (n_out > 2) {
                    matmul_case(t, nan_any, kind, xe, w.p, n_in, n_out, n, 1, n_out - 1);
                }
                uint32_t j0 = n_out / 3, j1 = j0 + 17 < n_out ? j0 + 17 : n_out;
                matmul_case(t, nan_any, kind, xe, w.p, n_in, n_out, n, j0, j1);
                matmul_case(t, nan_any, kind, xe, w.p, n_in, n_out, n, n_out / 2, n_out / 2);
            }
            buf_free(w);
            buf_free(x);
        }
    }
}

/* The classifier's shape, split between two workers as the model splits it. */
static void test_matmul_classifier(void **state) {
    const acg__simd_ops *t = level(state);
    rng_seed(12);
    uint32_t n_in = 288, n_out = 32000;
    buf w = buf_new((size_t)n_out * n_in, 0), x = buf_new((size_t)5 * n_in, 0);
    fill(w.p, (size_t)n_out * n_in, rng_float);
    fill(x.p, (size_t)5 * n_in, rng_float);
    matmul_case(t, 0, "random", x.p, w.p, n_in, n_out, 1, 0, n_out);
    matmul_case(t, 0, "random", x.p, w.p, n_in, n_out, 5, 0, 16001);
    matmul_case(t, 0, "random", x.p, w.p, n_in, n_out, 5, 16001, n_out);
    buf_free(w);
    buf_free(x);
}

/* ---- elementwise -------------------------------------------------------------------------- */

static float rng_wide(void) { return rng_float() * 24.0f; }

/* The subtrahends, divisors or scales elementwise_of applies, and whether swiglu's NaNs may
 * differ in their bits. */
typedef struct elementwise_params {
    float c[12];
    int swiglu_nan_any;
} elementwise_params;

static void elementwise_of(const inputs *in, const void *ctx) {
    const elementwise_params *p = ctx;
    const acg__simd_ops *t = in->t;
    const float *x = in->a, *g = in->b;
    const uint32_t n = in->n;
    float *want = malloc(n * sizeof(float) + 1), *got = malloc(n * sizeof(float) + 1);
    assert_non_null(want);
    assert_non_null(got);
    for (size_t i = 0; i < sizeof p->c / sizeof p->c[0]; i++) {
        float c = p->c[i];
        poison(want, n);
        poison(got, n);
        sc->exp_sub(want, x, c, n);
        t->exp_sub(got, x, c, n);
        CHECK_NANS(in->nan_any, want, got, n, "%s exp_sub, %s data, n=%u, sub=%g, misaligned %d",
                   t->name, in->kind, n, (double)c, in->mis);
        sc->div(want, x, c, n);
        t->div(got, x, c, n);
        CHECK_NANS(in->nan_any, want, got, n, "%s div, %s data, n=%u, d=%g, misaligned %d", t->name,
                   in->kind, n, (double)c, in->mis);
        sc->rms_apply(want, g, x, c, n);
        t->rms_apply(got, g, x, c, n);
        CHECK_NANS(in->nan_any, want, got, n, "%s rms_apply, %s data, n=%u, ss=%g, misaligned %d",
                   t->name, in->kind, n, (double)c, in->mis);
    }
    poison(want, n);
    poison(got, n);
    sc->swiglu(want, x, g, n);
    t->swiglu(got, x, g, n);
    CHECK_NANS(p->swiglu_nan_any, want, got, n, "%s swiglu, %s data, n=%u, misaligned %d", t->name,
               in->kind, n, in->mis);
    free(want);
    free(got);
}

static void elementwise_on(const acg__simd_ops *t, float (*gen)(void), const char *kind) {
    /* the subtrahend, divisor or scale: zeros, a subnormal, NaN, infinities, the largest; swiglu
     * negates x: a NaN meets its own negation in (x * ...) */
    elementwise_params p = {{0.0f, -0.0f, 1.0f, -7.5f, 3.0f, 1e-40f, 0.0f, INFINITY, -INFINITY,
                             FLT_MAX, 88.0f, rng_float()},
                            gen != rng_wide};
    p.c[6] = gen == rng_special_nans ? NAN : from_bits(0xffc00000u);
    over_sizes(t, gen, kind, elementwise_of, &p);
}

/* exp_sub (and swiglu, which takes exp of -x) over floats in order of their bits: [lo, hi]
 * with a stride, the same for their negatives. */
static void exp_range(const acg__simd_ops *t, uint32_t lo, uint32_t hi, uint32_t stride,
                      int with_swiglu) {
    enum { CHUNK = 1 << 16 };
    float *rows = malloc(4 * CHUNK * sizeof(float)); /* x, g, want and got, CHUNK floats each */
    assert_non_null(rows);
    float *x = rows, *g = rows + CHUNK, *want = rows + 2 * CHUNK, *got = rows + 3 * CHUNK;
    for (uint32_t sign = 0; sign < 2; sign++) {
        uint64_t b = lo;
        while (b <= hi) {
            uint32_t n = 0;
            for (; n < CHUNK && b <= hi; n++, b += stride) {
                x[n] = from_bits((uint32_t)b | sign << 31);
                g[n] = n % 2 == 0 ? 1.0f : -1.5f;
            }
            sc->exp_sub(want, x, 0.0f, n);
            t->exp_sub(got, x, 0.0f, n);
            CHECK(want, got, n, "%s exp_sub over [%#x, %#x] step %u, sign %u, near %g", t->name, lo,
                  hi, stride, sign, (double)x[0]);
            if (with_swiglu) {
                sc->swiglu(want, x, g, n);
                t->swiglu(got, x, g, n);
                CHECK_NANS(1, want, got, n, "%s swiglu over [%#x, %#x] step %u, sign %u, near %g",
                           t->name, lo, hi, stride, sign, (double)x[0]);
            }
        }
    }
    free(rows);
}

static void test_exp_dense(void **state) {
    const acg__simd_ops *t = level(state);
    uint32_t hi = to_bits(ACG_EXP_HI), lo = to_bits(-ACG_EXP_LO);
    /* Every float of |x| <= 90 at a stride, then every float around the limits and zero. */
    exp_range(t, 0, to_bits(90.0f), 101, 0);
    exp_range(t, 0, to_bits(90.0f), 1013, 1);
    exp_range(t, hi - 40000, hi + 4000, 1, 1);
    exp_range(t, lo - 40000, lo + 40000, 1, 1);
    exp_range(t, 0, 40000, 1, 1);
    exp_range(t, to_bits(0.25f), to_bits(0.25f) + 300000, 1, 1);
    exp_range(t, to_bits(1.0f) - 100000, to_bits(1.0f) + 100000, 1, 1);
    exp_range(t, 0x7f7f0000u, 0x7fffffffu, 97, 1); /* huge, inf and NaNs */
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct layout {
    uint32_t page_size, n_kv_heads;
} layout;

static void attention_on(const acg__simd_ops *t, float (*gen)(void), const char *kind) {
    int nan_any = gen == rng_special_nans;
    static const uint32_t hss[] = {1, 8, 16, 17, 32, 33, 48, 64, 100, 256, 300};
    static const uint32_t n_poss[] = {0, 1, 5, 31, 32, 33, 100, 256, 257, 600};
    static const layout layouts[] = {{1, 1}, {4, 2}, {16, 1}, {7, 2}};
    const uint32_t max_pos = 600;
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        layout L = layouts[li];
        uint32_t n_table = (max_pos + L.page_size - 1) / L.page_size;
        uint32_t n_pages = n_table + 1;
        int32_t *table = malloc(n_table * sizeof(int32_t));
        assert_non_null(table);
        /* Valid ids in a shuffled order, with unusable ones (the sink page) among them. */
        for (uint32_t i = 0; i < n_table; i++) {
            table[i] = (int32_t)(i + 1);
        }
        for (uint32_t i = n_table; i > 1; i--) {
            uint32_t j = rng_u32() % i;
            int32_t tmp = table[i - 1];
            table[i - 1] = table[j];
            table[j] = tmp;
        }
        static const int32_t invalid[] = {-1, INT32_MIN, INT32_MAX};
        for (uint32_t i = 0; i < n_table; i++) {
            uint32_t r = rng_u32() % 8;
            if (r < 3) {
                table[i] = invalid[r];
            } else if (r == 3) {
                table[i] = (int32_t)n_pages;
            } else if (r == 4) {
                table[i] = 0;
            }
        }
        for (size_t hi = 0; hi < sizeof hss / sizeof hss[0]; hi++) {
            uint32_t hs = hss[hi], kv_dim = hs * L.n_kv_heads;
            size_t cache_len = (size_t)n_pages * L.page_size * kv_dim;
            buf cache = buf_new(cache_len, (int)(hi % 2)), q = buf_new(hs, 0);
            buf prob = buf_new(max_pos, 1);
            fill(cache.p, cache_len, gen);
            fill(q.p, hs, gen);
            fill(prob.p, max_pos, gen == rng_float ? rng_unit : gen);
            float *want = malloc(max_pos * sizeof(float)), *got = malloc(max_pos * sizeof(float));
            assert_true(want != NULL && got != NULL);
            for (uint32_t head = 0; head < L.n_kv_heads; head++) {
                acg__kv_rows kv = {cache.p, table, L.page_size, n_pages, kv_dim, head * hs};
                for (size_t pi = 0; pi < sizeof n_poss / sizeof n_poss[0]; pi++) {
                    uint32_t n_pos = n_poss[pi];
                    float scale = sqrtf((float)hs);
                    poison(want, max_pos);
                    poison(got, max_pos);
                    sc->attn_scores(want, q.p, &kv, hs, scale, n_pos);
                    t->attn_scores(got, q.p, &kv, hs, scale, n_pos);
                    CHECK_NANS(nan_any, want, got, max_pos,
                               "%s attn_scores, %s data, hs=%u n_pos=%u page_size=%u head %u of %u",
                               t->name, kind, hs, n_pos, L.page_size, head, L.n_kv_heads);
                    poison(want, max_pos);
                    poison(got, max_pos);
                    sc->attn_values(want, prob.p, &kv, hs, n_pos);
                    t->attn_values(got, prob.p, &kv, hs, n_pos);
                    CHECK_NANS(nan_any, want, got, max_pos,
                               "%s attn_values, %s data, hs=%u n_pos=%u page_size=%u head %u of %u",
                               t->name, kind, hs, n_pos, L.page_size, head, L.n_kv_heads);
                }
            }
            free(want);
            free(got);
            buf_free(cache);
            buf_free(q);
            buf_free(prob);
        }
        free(table);
    }
}

/* Partials that are -0 (products that underflow) through matmul's and attention's tails. */
static void test_underflow_tails(void **state) {
    const acg__simd_ops *t = level(state);
    static const uint32_t ns[] = {1, 17, 31, 33, 40, 48, 63, 70, 100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        uint32_t n_in = ns[i], n_out = 21, n = 5;
        buf x = buf_new((size_t)n * n_in, 0), w = buf_new((size_t)n_out * n_in, 0);
        for (size_t k = 0; k < (size_t)n * n_in; k++) {
            x.p[k] = 1e-30f;
        }
        for (size_t k = 0; k < (size_t)n_out * n_in; k++) {
            w.p[k] = -1e-30f;
        }
        for (uint32_t r = 1; r <= n; r++) {
            matmul_case(t, 0, "underflowing", x.p, w.p, n_in, n_out, r, 0, n_out);
        }
        /* One page of 40 rows of -1e-30: every partial with a term is -0. */
        uint32_t n_pos = 40, hv = n_in < 64 ? n_in : 64;
        buf cache = buf_new((size_t)n_pos * n_in, 0);
        for (size_t k = 0; k < (size_t)n_pos * n_in; k++) {
            cache.p[k] = -1e-30f;
        }
        int32_t table[1] = {0};
        acg__kv_rows kv = {cache.p, table, n_pos, 1, n_in, 0};
        float want[64], got[64], prob[64];
        for (uint32_t p = 0; p < n_pos; p++) {
            prob[p] = 1e-30f;
        }
        sc->attn_scores(want, x.p, &kv, n_in, 1.0f, n_pos);
        t->attn_scores(got, x.p, &kv, n_in, 1.0f, n_pos);
        CHECK(want, got, n_pos, "%s attn_scores of underflowing products, hs=%u", t->name, n_in);
        sc->attn_values(want, prob, &kv, hv, n_pos);
        t->attn_values(got, prob, &kv, hv, n_pos);
        CHECK(want, got, hv, "%s attn_values of underflowing products, hs=%u", t->name, hv);
        buf_free(cache);
        buf_free(x);
        buf_free(w);
    }
}

/* ---- each family on random data and on special values ----------------------------------- */

static const family reductions = {.on = reductions_on,
                                  .random_gen = rng_float,
                                  .random_seed = 1,
                                  .special_from = 2,
                                  .special_to = 6};
static const family matmuls = {.on = matmul_shapes,
                               .random_gen = rng_float,
                               .random_seed = 10,
                               .special_from = 11,
                               .special_to = 12};
static const family elementwise = {.on = elementwise_on,
                                   .random_gen = rng_wide,
                                   .random_seed = 20,
                                   .special_from = 21,
                                   .special_to = 24};
static const family attention = {.on = attention_on,
                                 .random_gen = rng_float,
                                 .random_seed = 30,
                                 .special_from = 31,
                                 .special_to = 32};

static void test_reductions_random(void **state) { on_random(state, &reductions); }

static void test_reductions_special(void **state) { on_special(state, &reductions); }

static void test_matmul_random(void **state) { on_random(state, &matmuls); }

static void test_matmul_special(void **state) { on_special(state, &matmuls); }

static void test_elementwise_random(void **state) { on_random(state, &elementwise); }

static void test_elementwise_special(void **state) { on_special(state, &elementwise); }

static void test_attention_random(void **state) { on_random(state, &attention); }

static void test_attention_special(void **state) { on_special(state, &attention); }

/* ---- the choice of table ------------------------------------------------------------------ */

/* acg__simd() is the table ACG_CPU_SIMD names when this CPU runs it, else the best one, and a
 * name it cannot use is logged. */
static void test_choice(void **state) {
    (void)state;
    const acg__simd_ops *best = acg__simd_level("avx512");
    if (best == NULL) {
        best = acg__simd_level("avx2");
    }
    if (best == NULL) {
        best = &acg__simd_scalar;
    }
    const char *want = getenv("ACG_CPU_SIMD");
    const acg__simd_ops *expect = best;
    int refused = 0;
    if (want != NULL && *want != '\0') {
        const acg__simd_ops *named = acg__simd_level(want);
        if (named != NULL) {
            expect = named;
        } else {
            refused = 1;
        }
    }
    tc_log_capture_begin(ACG_LOG_WARN);
    const acg__simd_ops *got = acg__simd();
    assert_true(acg__simd() == got); /* decided once */
    int warned = tc_log_find("ACG_CPU_SIMD=", NULL);
    tc_log_capture_end();
    print_message("ACG_CPU_SIMD=%s: %s (best here: %s)\n", want != NULL ? want : "(unset)",
                  got->name, best->name);
    assert_string_equal(got->name, expect->name);
    assert_true(got == expect);
    assert_int_equal(warned, refused);
}

/* acg__matmul_stream_max is ACG_CPU_MATMUL_STREAM's count where it holds one (0 included),
 * else the table's default; anything else is logged and the default kept. Read once, so only
 * `--choice` runs this, before any matmul has read it. */
static void test_stream_choice(void **state) {
    (void)state;
    const char *v = getenv("ACG_CPU_MATMUL_STREAM");
    uint32_t expect = 7;
    int refused = 0;
    if (v != NULL && *v != '\0') {
        char *end = NULL;
        unsigned long n = strtoul(v, &end, 10);
        if (*end == '\0' && v[0] >= '0' && v[0] <= '9' && n < UINT32_MAX) {
            expect = (uint32_t)n;
        } else {
            refused = 1;
        }
    }
    tc_log_capture_begin(ACG_LOG_WARN);
    uint32_t got = acg__matmul_stream_max(7);
    int warned = tc_log_find("ACG_CPU_MATMUL_STREAM=", NULL);
    tc_log_capture_end();
    print_message("ACG_CPU_MATMUL_STREAM=%s: %u\n", v != NULL ? v : "(unset)", got);
    assert_int_equal(got, expect);
    assert_int_equal(acg__matmul_stream_max(3), refused || v == NULL || *v == '\0' ? 3 : expect);
    assert_int_equal(warned, refused);
}

#define PER_LEVEL(fn)                                                                              \
    cmocka_unit_test_prestate(fn, (void *)"avx2"), cmocka_unit_test_prestate(fn, (void *)"avx512")

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--choice") == 0) {
        const struct CMUnitTest choice[] = {cmocka_unit_test(test_choice),
                                            cmocka_unit_test(test_stream_choice)};
        return cmocka_run_group_tests_name("test_simd --choice", choice, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        PER_LEVEL(test_reductions_random),
        PER_LEVEL(test_reductions_special),
        PER_LEVEL(test_reductions_negative_zero),
        PER_LEVEL(test_matmul_random),
        PER_LEVEL(test_matmul_special),
        PER_LEVEL(test_matmul_classifier),
        PER_LEVEL(test_elementwise_random),
        PER_LEVEL(test_elementwise_special),
        PER_LEVEL(test_exp_dense),
        PER_LEVEL(test_attention_random),
        PER_LEVEL(test_attention_special),
        PER_LEVEL(test_underflow_tails),
        cmocka_unit_test(test_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
