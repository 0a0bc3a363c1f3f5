/*
 * machine.c — what the machine can do, measured in the same run as the figures read against
 * it: the host's read bandwidth and its FMA peak.
 */
#include "bench-impl.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct machine_job {
    const uint64_t *words;
    size_t n;
    unsigned passes; /* read_job: times over the words */
    uint64_t result;
    unsigned level; /* fma_job: 2 avx512, 1 avx2, 0 scalar */
    uint64_t iters;
} machine_job;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Four independent sums of 256-bit loads: the widest loads every x86-64 with AVX2 has, so the
 * loop measures the memory system, not the load port. */
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *w, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(w + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(w + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(w + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(w + i + 12)));
    }
    for (; i < n; i++) {
        a0 = _mm256_add_epi64(a0, _mm256_set1_epi64x((long long)w[i]));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)v, a0);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* The same with 512-bit loads, one a cache line. */
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t *w, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_add_epi64(a0, _mm512_loadu_si512((const void *)(w + i)));
        a1 = _mm512_add_epi64(a1, _mm512_loadu_si512((const void *)(w + i + 8)));
        a2 = _mm512_add_epi64(a2, _mm512_loadu_si512((const void *)(w + i + 16)));
        a3 = _mm512_add_epi64(a3, _mm512_loadu_si512((const void *)(w + i + 24)));
    }
    uint64_t r = 0;
    for (; i < n; i++) {
        r += w[i];
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    /* Summed as unsigned words: the header's reduction adds them as signed ones, which
     * overflows. */
    uint64_t v[8];
    _mm512_storeu_si512((void *)v, a0);
    for (int k = 0; k < 8; k++) {
        r += v[k];
    }
    return r;
}
#endif

/* Sums n words with the widest loads the CPU has: eight independent sums of 64-bit words
 * where AVX2 is missing. */
static uint64_t read_words(const uint64_t *w, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) {
        return read_avx512(w, n);
    }
    if (__builtin_cpu_supports("avx2")) {
        return read_avx2(w, n);
    }
#endif
    uint64_t a[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++) {
            a[k] += w[i + (size_t)k];
        }
    }
    for (; i < n; i++) {
        a[0] += w[i];
    }
    return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

/* A thread's share of the one-buffer read, `passes` times over. */
static void *read_job(void *p) {
    machine_job *j = p;
    uint64_t r = 0;
    for (unsigned pass = 0; pass < j->passes; pass++) {
        r += read_words(j->words, j->n);
    }
    j->result = r;
    return NULL;
}

/* Runs fn on `threads` threads over job[i] (the calling thread takes job[0]); false when a
 * thread cannot start. */
static bool run_jobs(void *(*fn)(void *), machine_job *job, unsigned threads) {
    pthread_t t[BENCH_MAX_THREADS];
    unsigned started = 0;
    for (unsigned i = 1; i < threads; i++, started++) {
        if (pthread_create(&t[i], NULL, fn, &job[i]) != 0) {
            break;
        }
    }
    fn(&job[0]);
    for (unsigned i = 1; i <= started; i++) {
        pthread_join(t[i], NULL);
    }
    return started + 1 == threads;
}

double bench_read_bandwidth(size_t bytes, unsigned threads) {
    threads = threads < 1 ? 1 : threads > BENCH_MAX_THREADS ? BENCH_MAX_THREADS : threads;
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *words = NULL;
    if (n == 0 || posix_memalign((void **)&words, 64, n * sizeof *words) != 0) {
        return NAN;
    }
    for (size_t i = 0; i < n; i++) { /* touch every page, and no two words alike */
        words[i] = i * 0x9E3779B97F4A7C15ull;
    }
    /* Enough passes over a small buffer (it then lives in a cache, as small weights do) that
     * starting the threads costs next to nothing. */
    unsigned passes = bytes >= ((size_t)64 << 20) ? 1 : (unsigned)(((size_t)64 << 20) / bytes);
    machine_job job[BENCH_MAX_THREADS];
    double best = NAN, runs[5];
    for (int r = 0; r < 5; r++) {
        for (unsigned i = 0; i < threads; i++) {
            size_t lo = n * i / threads, hi = n * (i + 1) / threads;
            job[i] = (machine_job){.words = words + lo, .n = hi - lo, .passes = passes};
        }
        uint64_t t0 = tool_now_ns();
        if (!run_jobs(read_job, job, threads)) {
            free(words);
            return NAN;
        }
        uint64_t t1 = tool_now_ns();
        /* bytes per ns = GB/s */
        runs[r] = (double)passes * (double)(n * sizeof *words) / (double)(t1 - t0);
    }
    best = tool_median(runs, 5);
    free(words);
    return best;
}

/* ---- the same weights, read as a split matmul reads them ------------------------------------ */

#define SPLIT_WARMUP 3
#define SPLIT_PASSES 21

typedef struct split_read {
    uint64_t **bufs;
    const size_t *words; /* (n) words of each buffer */
    size_t n;
    unsigned threads;
    _Atomic unsigned arrived, gen; /* the barrier between passes */
    _Atomic int go;                /* 1: every thread started; -1: one did not, all leave */
    uint64_t sink[BENCH_MAX_THREADS];
} split_read;

typedef struct split_job {
    split_read *r;
    unsigned id;
} split_job;

static inline void relax(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_ia32_pause();
#endif
}

/* All threads meet here; a waiter polls, giving its core up now and then. */
static void split_barrier(split_read *r) {
    unsigned gen = atomic_load(&r->gen);
    if (atomic_fetch_add(&r->arrived, 1) + 1 == r->threads) {
        atomic_store(&r->arrived, 0);
        atomic_fetch_add(&r->gen, 1);
        return;
    }
    for (unsigned i = 1; atomic_load(&r->gen) == gen; i++) {
        if (i % 1024 == 0) {
            sched_yield();
        } else {
            relax();
        }
    }
}

/* Thread id's share of every buffer, one buffer after another (shares start on cache lines). */
static void split_pass(split_read *r, unsigned id) {
    uint64_t acc = 0;
    for (size_t b = 0; b < r->n; b++) {
        size_t n = r->words[b];
        size_t lo = n * id / r->threads / 8 * 8;
        size_t hi = id + 1 == r->threads ? n : n * (id + 1) / r->threads / 8 * 8;
        acc += read_words(r->bufs[b] + lo, hi - lo);
    }
    r->sink[id] += acc;
}

static void *split_thread(void *p) {
    split_job *j = p;
    int go;
    while ((go = atomic_load(&j->r->go)) == 0) { /* until every thread started, or one failed */
        relax();
    }
    for (int pass = 0; go > 0 && pass < SPLIT_WARMUP + SPLIT_PASSES; pass++) {
        split_barrier(j->r);
        split_pass(j->r, j->id);
        split_barrier(j->r);
    }
    return NULL;
}

double bench_read_bandwidth_split(const size_t *sizes, size_t n_regions, unsigned threads) {
    threads = threads < 1 ? 1 : threads > BENCH_MAX_THREADS ? BENCH_MAX_THREADS : threads;
    split_read r;
    memset(&r, 0, sizeof r);
    size_t *words = calloc(n_regions ? n_regions : 1, sizeof *words);
    r.bufs = calloc(n_regions ? n_regions : 1, sizeof *r.bufs);
    double result = NAN, total = 0;
    bool ok = words != NULL && r.bufs != NULL && n_regions > 0;
    for (size_t b = 0; ok && b < n_regions; b++) {
        words[b] = sizes[b] / sizeof(uint64_t);
        ok = words[b] > 0 && posix_memalign((void **)&r.bufs[b], 64, words[b] * 8) == 0;
        for (size_t i = 0; ok && i < words[b]; i++) { /* touch every page */
            r.bufs[b][i] = i * 0x9E3779B97F4A7C15ull;
        }
        total += (double)words[b] * 8;
    }
    r.words = words;
    r.n = n_regions;
    r.threads = threads;
    pthread_t t[BENCH_MAX_THREADS];
    split_job job[BENCH_MAX_THREADS];
    unsigned started = 0;
    for (unsigned i = 1; ok && i < threads; i++) {
        job[i] = (split_job){&r, i};
        ok = pthread_create(&t[i], NULL, split_thread, &job[i]) == 0;
        started += ok;
    }
    atomic_store(&r.go, ok ? 1 : -1);
    if (ok) {
        double runs[SPLIT_PASSES];
        for (int pass = 0; pass < SPLIT_WARMUP + SPLIT_PASSES; pass++) {
            split_barrier(&r);
            uint64_t t0 = tool_now_ns();
            split_pass(&r, 0);
            split_barrier(&r);
            uint64_t t1 = tool_now_ns();
            if (pass >= SPLIT_WARMUP) {
                runs[pass - SPLIT_WARMUP] = total / (double)(t1 - t0); /* bytes per ns = GB/s */
            }
        }
        result = tool_median(runs, SPLIT_PASSES);
    }
    for (unsigned i = 1; i <= started; i++) {
        pthread_join(t[i], NULL);
    }
    for (size_t b = 0; r.bufs != NULL && b < n_regions; b++) {
        free(r.bufs[b]);
    }
    free(r.bufs);
    free(words);
    return result;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Independent chains of fused multiply-adds, as many as cover the latency of two FMA units,
 * each in its own variable so that none lives in memory. Multiplying by 1 and adding a tiny
 * step keeps the values finite and the work real. */
#define FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"))) static uint64_t fma_avx512(uint64_t iters) {
    const __m512 one = _mm512_set1_ps(1.0f), step = _mm512_set1_ps(1e-7f);
#define DECL(k) __m512 a##k = _mm512_set1_ps((float)(k));
#define STEP(k) a##k = _mm512_fmadd_ps(a##k, one, step);
#define SUM(k) s = _mm512_add_ps(s, a##k);
    FMA_CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        FMA_CHAINS(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    FMA_CHAINS(SUM)
#undef DECL
#undef STEP
#undef SUM
    return (uint64_t)_mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static uint64_t fma_avx2(uint64_t iters) {
    const __m256 one = _mm256_set1_ps(1.0f), step = _mm256_set1_ps(1e-7f);
#define DECL(k) __m256 a##k = _mm256_set1_ps((float)(k));
#define STEP(k) a##k = _mm256_fmadd_ps(a##k, one, step);
#define SUM(k) s = _mm256_add_ps(s, a##k);
    FMA_CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        FMA_CHAINS(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    FMA_CHAINS(SUM)
#undef DECL
#undef STEP
#undef SUM
    float v[8];
    _mm256_storeu_ps(v, s);
    return (uint64_t)(v[0] + v[7]);
}
#endif

static void *fma_job(void *p) {
    machine_job *j = p;
#if defined(__x86_64__) && defined(__GNUC__)
    if (j->level == 2) {
        j->result = fma_avx512(j->iters);
        return NULL;
    }
    if (j->level == 1) {
        j->result = fma_avx2(j->iters);
        return NULL;
    }
#endif
    float acc[8] = {0};
    for (uint64_t i = 0; i < j->iters; i++) {
        for (int k = 0; k < 8; k++) {
            acc[k] = fmaf(acc[k], 1.0f, 1e-7f);
        }
    }
    j->result = (uint64_t)(acc[0] + acc[7]);
    return NULL;
}

double bench_fma_peak(unsigned threads, const char **level) {
    threads = threads < 1 ? 1 : threads > BENCH_MAX_THREADS ? BENCH_MAX_THREADS : threads;
    unsigned lv = 0;
    double flops_per_iter = 2.0 * 8; /* scalar: 8 chains of one lane */
    *level = "scalar";
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) {
        lv = 2;
        flops_per_iter = 2.0 * 16 * 12;
        *level = "avx512";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        lv = 1;
        flops_per_iter = 2.0 * 12 * 8;
        *level = "avx2";
    }
#endif
    const uint64_t iters = lv ? 4000000 : 400000;
    machine_job job[BENCH_MAX_THREADS];
    double runs[5];
    for (int r = 0; r < 5; r++) {
        for (unsigned i = 0; i < threads; i++) {
            job[i] = (machine_job){.level = lv, .iters = iters};
        }
        uint64_t t0 = tool_now_ns();
        if (!run_jobs(fma_job, job, threads)) {
            return NAN;
        }
        uint64_t t1 = tool_now_ns();
        runs[r] = flops_per_iter * (double)iters * threads / (double)(t1 - t0); /* GFLOP/s */
    }
    return tool_median(runs, 5);
}
