/*
 * test_model_sampler.c — the model's sampler kernel, sample_f32: greedy takes the first largest
 * logit; draws follow the algorithm acg.h describes (the reference here is written from that
 * description), report and advance the counter, vary from launch to launch, and a small top-p
 * keeps only the top token; bit for bit on every backend (the fixture:
 * model_kernels_fixture.h).
 */
#include "model_kernels_fixture.h"

#include "llama2_ref.h"
#include "model/arith.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The sampler as acg.h describes it, written from the description: the nucleus is the tokens at
 * or above the largest probability tau whose tokens (p >= tau) hold at least top_p of the mass;
 * every token when top_p is not in (0, 1) or no tau qualifies. */
static float ref_mass(const float *p, int n, float tau) {
    float kept[VOCAB] = {0.0f}; /* the terms below tau as +0: they leave their partial as is */
    for (int i = 0; i < n; i++) {
        kept[i] = p[i] >= tau ? p[i] : 0.0f;
    }
    return acg__sum(kept, (uint32_t)n);
}

static void ref_sample(const float *logits, int vocab, uint32_t *state, int32_t out[2]) {
    float temperature = bitsf(state[3]), top_p = bitsf(state[4]), p[VOCAB], tau = 0.0f;
    if (!(temperature > 0.0f)) {
        out[0] = 0;
        for (int i = 1; i < vocab; i++) {
            out[0] = logits[i] > logits[out[0]] ? i : out[0];
        }
        out[1] = -1;
        return;
    }
    for (int i = 0; i < vocab; i++) {
        p[i] = logits[i] / temperature;
    }
    tc_ref_softmax(p, vocab);
    for (int i = 0; top_p > 0.0f && top_p < 1.0f && i < vocab; i++) {
        tau = p[i] > tau && ref_mass(p, vocab, p[i]) >= top_p ? p[i] : tau;
    }
    uint64_t seed = (uint64_t)state[1] << 32 | state[0], counter = state[2];
    uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (1.0f / 16777216.0f), target = u * ref_mass(p, vocab, tau);
    float cdf = 0.0f;
    out[0] = -1;
    for (int i = 0; i < vocab && !(out[0] >= 0 && cdf > target); i++) {
        if (p[i] >= tau) {
            out[0] = i;
            cdf += p[i];
        }
    }
    out[1] = (int32_t)counter;
    state[2] = (uint32_t)counter + 1;
}

/* ---- sample_f32 --------------------------------------------------------------------------- */

static uint32_t *state_of(uint32_t *states, int seat) { return states + seat * SW; }

/* Temperature <= 0 takes the first largest logit, reports no counter and leaves the state; a
 * seat outside 0..n_states-1 gives {-1, -1} and touches no state; a row that draws still does. */
static void test_sample_greedy_and_seats(void **state) {
    world *w = *state;
    int32_t seats[MAXB] = {0, 1, 2, -1, 4, INT32_MIN, INT32_MAX, 3}, want[2 * MAXB];
    for (int r = 0; r < 3; r++) {
        w->logits[r * VOCAB + 3 + 7 * r] = 9.0f; /* a tie: the first one wins */
        w->logits[r * VOCAB + 40 - r] = 9.0f;
        w->states[r * SW + 3] = fbits(r == 2 ? -1.0f : 0.0f);
    }
    w->states[3 * SW + 3] = fbits(1.0f);
    launch L;
    mk_sample(&L, w->logits, MAXB, seats, w->states, 4);
    TC_OK(L_run(&L, NULL));
    for (int r = 0; r < MAXB; r++) {
        want[2 * r] = want[2 * r + 1] = -1;
        if (r < 3 || r == 7) {
            ref_sample(w->logits + r * VOCAB, VOCAB, &w->states[seats[r] * SW], &want[2 * r]);
        }
    }
    assert_int_equal(want[0], 3); /* the reference too takes the first */
    assert_memory_equal(LI(&L, 0), want, 16 * sizeof(int32_t));
    assert_int_equal(LI(&L, 0)[15], want[15]);
    TC_BYTES_EQUAL(L.a[4].host, w->states, 4 * SW * sizeof(uint32_t));
    launch one; /* the drawing row alone, from the same state */
    mk_sample(&one, w->logits + 7 * VOCAB, 1, &seats[7], w->states, 4);
    state_of((uint32_t *)(void *)one.a[4].host, 3)[2]--; /* ref_sample advanced w's */
    expect_part(&one, LF(&L, 0) + 14);
    L_free(&L);
}

/* Draws match the reference for many seeds, temperatures and top-p values on every backend,
 * report the counter and advance it by one, and leave the other words of the state alone. */
static void test_sample_reference(void **state) {
    static const float temps[3] = {0.5f, 1.0f, 1.7f}, top_ps[4] = {1.0f, 0.9f, 0.5f, 0.2f};
    world *w = *state;
    rng r = {10};
    int draws = 0, mismatches = 0;
    for (int seed = 0; seed < 200; seed++) {
        rnd_fill(&r, w->logits, 4 * VOCAB, -4.0f, 4.0f);
        for (int i = 0; i < MAXB; i++) {
            uint32_t *s = state_of(w->states, i);
            s[0] = (uint32_t)rnd64(&r);
            s[1] = (uint32_t)rnd64(&r);
            s[2] = (uint32_t)(rnd64(&r) % 1000000);
            s[3] = fbits(temps[(seed + i) % 3]);
            s[4] = fbits(top_ps[(seed / 3 + i) % 4]);
        }
        uint32_t want_states[MAXB * SW];
        memcpy(want_states, w->states, sizeof want_states);
        launch L;
        mk_sample(&L, w->logits, 4, w->seats, w->states, MAXB);
        TC_OK(L_run(&L, NULL));
        for (int row = 0; row < 4; row++) {
            int32_t want[2];
            ref_sample(w->logits + row * VOCAB, VOCAB, state_of(want_states, w->seats[row]), want);
            assert_int_equal(LI(&L, 0)[2 * row + 1], state_of(w->states, w->seats[row])[2]);
            mismatches += LI(&L, 0)[2 * row] != want[0];
            draws++;
        }
        TC_BYTES_EQUAL(L.a[4].host, want_states, sizeof want_states);
        L_free(&L);
    }
    printf("sample_f32: %d of %d draws differ from the reference\n", mismatches, draws);
    assert_int_equal(mismatches, 0);
}

/* Where logit / temperature overflows (a temperature of 1e-39, or an infinite logit), the
 * distribution is all on the largest logit: the sampler takes the first one and makes no draw
 * (counter untouched, reported -1), instead of NaN probabilities and token 0. */
static void test_sample_overflow(void **state) {
    world *w = *state;
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < VOCAB; i++) {
                w->logits[r * VOCAB + i] = (float)(i % 7);
            }
            uint32_t *s = state_of(w->states, w->seats[r]);
            s[2] = 5;
            s[3] = fbits(pass == 0 ? 1e-39f : 1.0f);
            s[4] = fbits(r == 0 ? 0.5f : 1.0f);
        }
        if (pass == 1) {
            w->logits[20] = INFINITY;
            w->logits[VOCAB + 33] = INFINITY;
        }
        launch L;
        mk_sample(&L, w->logits, 2, w->seats, w->states, MAXB);
        TC_OK(L_run(&L, NULL));
        const int32_t *res = LI(&L, 0);
        assert_int_equal(res[0], pass == 0 ? 6 : 20);
        assert_int_equal(res[2], pass == 0 ? 6 : 33);
        assert_int_equal(res[1], -1);
        assert_int_equal(res[3], -1);
        assert_int_equal(state_of(w->states, w->seats[0])[2], 5);
        assert_int_equal(state_of(w->states, w->seats[1])[2], 5);
        L_free(&L);
    }
}

/* Successive launches on one state report counters 77, 78, ... and leave it at 77 + 64; the
 * draws of a flat distribution vary, and the same state again repeats them. With top-p 0.01,
 * the largest logit is always picked. */
static void test_sample_sequence(void **state) {
    world *w = *state;
    for (int pass = 0; pass < 3; pass++) {
        uint32_t *s = state_of(w->states, w->seats[0]);
        s[2] = 77;
        s[3] = fbits(pass == 2 ? 2.0f : 1.0f);
        s[4] = fbits(pass == 2 ? 0.01f : 1.0f);
        for (int i = 0; i < VOCAB; i++) {
            w->logits[i] = pass == 2 ? (i == 17 ? 3.0f : (float)(i % 5) * 0.1f) : 0.0f;
        }
        int32_t tokens[2][64];
        for (int run = 0; run < (pass == 1 ? 2 : 1); run++) {
            launch L;
            mk_sample(&L, w->logits, 1, w->seats, w->states, MAXB);
            L_upload(&L);
            for (int i = 0; i < 64; i++) {
                TC_OK(L_launch(&L, NULL));
                L_read(&L);
                tokens[run][i] = LI(&L, 0)[0];
                assert_true(tokens[run][i] >= 0 && tokens[run][i] < VOCAB);
                assert_int_equal(LI(&L, 0)[1], 77 + i);
            }
            assert_int_equal(state_of((uint32_t *)(void *)L.a[4].host, w->seats[0])[2], 77 + 64);
            L_free(&L);
        }
        bool all_same = true;
        for (int i = 1; i < 64; i++) {
            all_same = all_same && tokens[0][i] == tokens[0][0];
        }
        assert_true(pass == 2 ? all_same && tokens[0][0] == 17 : !all_same);
        if (pass == 1) {
            assert_memory_equal(tokens[0], tokens[1], sizeof tokens[0]);
        }
    }
}

static const struct CMUnitTest tests[] = {
    WORLD_CASE(test_sample_greedy_and_seats, 9),
    WORLD_CASE(test_sample_reference, 10),
    WORLD_CASE(test_sample_overflow, 12),
    WORLD_CASE(test_sample_sequence, 11),
};
KERNELS_MAIN("test_model_sampler", tests)
