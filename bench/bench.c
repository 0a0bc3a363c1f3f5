/*
 * bench.c — what every benchmark shares: the clock, the median, the table printer, the JSON
 * writer, the common options and opening the device.
 */
#include "bench.h"
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef ACG_HAVE_MPI
#include <acg/acg_mpi.h>
#endif

/* ---- clock and statistics -------------------------------------------------------------------- */

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof v[0], compare_double);
    if (n % 2 == 1)
        return v[n / 2];
    return 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- table printer --------------------------------------------------------------------------- */

static void table_put(bench_table *t, const char *text) {
    int w = t->width[t->col];
    bool last = t->col + 1 == t->n_cols;
    if (t->col > 0)
        fputs("  ", t->out);
    if (last && w < 0)
        fputs(text, t->out); /* no trailing blanks after a left-aligned last column */
    else
        fprintf(t->out, "%*s", w, text);
    if (last) {
        fputc('\n', t->out);
        t->col = 0;
    } else {
        t->col++;
    }
}

void bench_table_begin(bench_table *t, FILE *out, size_t n_cols, const int *widths,
                       const char *const *headers) {
    if (n_cols > BENCH_TABLE_MAX_COLS)
        n_cols = BENCH_TABLE_MAX_COLS;
    t->out = out;
    t->n_cols = n_cols;
    t->col = 0;
    size_t rule = 0;
    for (size_t i = 0; i < n_cols; i++) {
        int w = widths[i];
        size_t len = strlen(headers[i]);
        size_t abs_w = (size_t)(w < 0 ? -w : w);
        /* A header wider than its column widens the column, so the rows stay aligned. */
        if (len > abs_w) {
            abs_w = len;
            w = w < 0 ? -(int)len : (int)len;
        }
        t->width[i] = w;
        rule += abs_w + (i > 0 ? 2 : 0);
    }
    for (size_t i = 0; i < n_cols; i++)
        table_put(t, headers[i]);
    for (size_t i = 0; i < rule; i++)
        fputc('-', out);
    fputc('\n', out);
}

void bench_table_cell(bench_table *t, const char *fmt, ...) {
    char text[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    table_put(t, text);
}

/* ---- JSON writer ----------------------------------------------------------------------------- */

/* Bytes of the well-formed UTF-8 sequence at p (1 for ASCII), or 0 when p starts none:
 * no overlong forms, surrogates or code points past U+10FFFF. */
static size_t utf8_length(const unsigned char *p) {
    if (p[0] < 0x80) {
        return 1;
    }
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4                                ? 4
                                                                              : 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90)) {
        return 0;
    }
    return n;
}

/* A JSON string: escapes what JSON requires, and writes a byte that is not part of valid UTF-8
 * (a model's byte token may be half a character) as U+FFFD, so the output always parses. */
static void json_string_literal(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_length(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\u%04x", (unsigned)*p);
            else
                fputc(*p, out);
        }
        p++;
    }
    fputc('"', out);
}

/* Writes the separator and key that come before a value at the current depth. */
static void json_prefix(bench_json *j, const char *key) {
    if (j->depth > 0) {
        if (!j->first[j->depth])
            fputs(", ", j->out);
        j->first[j->depth] = false;
    }
    if (key) {
        json_string_literal(j->out, key);
        fputs(": ", j->out);
    }
}

static void json_open(bench_json *j, const char *key, char bracket) {
    json_prefix(j, key);
    fputc(bracket, j->out);
    if (j->depth + 1 < BENCH_JSON_MAX_DEPTH)
        j->depth++;
    j->first[j->depth] = true;
}

static void json_close(bench_json *j, char bracket) {
    fputc(bracket, j->out);
    if (j->depth > 0)
        j->depth--;
}

void bench_json_begin(bench_json *j, FILE *out) {
    j->out = out;
    j->depth = 0;
    j->first[0] = true;
}

void bench_json_object_begin(bench_json *j, const char *key) { json_open(j, key, '{'); }
void bench_json_object_end(bench_json *j) { json_close(j, '}'); }
void bench_json_array_begin(bench_json *j, const char *key) { json_open(j, key, '['); }
void bench_json_array_end(bench_json *j) { json_close(j, ']'); }

void bench_json_string(bench_json *j, const char *key, const char *value) {
    json_prefix(j, key);
    if (value)
        json_string_literal(j->out, value);
    else
        fputs("null", j->out);
}

void bench_json_number(bench_json *j, const char *key, double value) {
    json_prefix(j, key);
    if (isfinite(value))
        fprintf(j->out, "%.6g", value);
    else
        fputs("null", j->out);
}

void bench_json_int(bench_json *j, const char *key, int64_t value) {
    json_prefix(j, key);
    fprintf(j->out, "%" PRId64, value);
}

void bench_json_uint(bench_json *j, const char *key, uint64_t value) {
    json_prefix(j, key);
    fprintf(j->out, "%" PRIu64, value);
}

void bench_json_bool(bench_json *j, const char *key, bool value) {
    json_prefix(j, key);
    fputs(value ? "true" : "false", j->out);
}

void bench_json_null(bench_json *j, const char *key) {
    json_prefix(j, key);
    fputs("null", j->out);
}

void bench_json_end(bench_json *j) {
    fputc('\n', j->out);
    fflush(j->out);
}

/* ---- the options and the device every benchmark shares --------------------------------------- */

int bench_common_option(int argc, char **argv, int *i, bench_common *c) {
    const char *v = NULL;
    int m = 0;
    if (strcmp(argv[*i], "--json") == 0) {
        c->json = true;
        return BENCH_OPTION_TAKEN;
    }
    if (cli_is_help(argv[*i])) {
        fputs(c->usage, stdout);
        return CLI_EXIT_OK;
    }
    if ((m = cli_option(argc, argv, i, "--backend", &v)) != 0) {
        if (m < 0 || !v[0])
            return cli_usage_error(c->usage, "%s: --backend needs B", c->name);
        c->backend = v;
        return BENCH_OPTION_TAKEN;
    }
    return BENCH_OPTION_OTHER;
}

int bench_unknown_argument(const bench_common *c, const char *arg) {
    return cli_usage_error(c->usage, "%s: unknown %s '%s'", c->name,
                           arg[0] == '-' ? "option" : "argument", arg);
}

int bench_parse_counts(int argc, char **argv, bench_common *c, const bench_count *counts,
                       size_t n) {
    char who[64];
    snprintf(who, sizeof who, "%s: ", c->name);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m = bench_common_option(argc, argv, &i, c);
        if (m == BENCH_OPTION_TAKEN)
            continue;
        if (m != BENCH_OPTION_OTHER)
            return m;
        size_t k = 0;
        while (k < n && (m = cli_option(argc, argv, &i, counts[k].name, &v)) == 0)
            k++;
        if (k == n)
            return bench_unknown_argument(c, argv[i]);
        int rc = cli_option_u64(c->usage, who, counts[k].name, m > 0 ? v : NULL, 1, counts[k].max,
                                counts[k].value);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return BENCH_OPTION_TAKEN;
}

int bench_device_open(const bench_common *c, acg_device **dev, const acg_capability **cap) {
    acg_status st = acg_device_open(c->backend, dev);
    if (st != ACG_OK) {
        char what[160];
        if (c->backend)
            snprintf(what, sizeof what, "opening device '%s'", c->backend);
        else
            snprintf(what, sizeof what, "opening the default device");
        return cli_fail(st, what);
    }
    if (cap)
        *cap = acg_device_get_capability(*dev);
    return CLI_EXIT_OK;
}

int bench_device_close(acg_device *dev, int rc) {
    acg_status st = acg_device_close(dev);
    if (st != ACG_OK && rc == CLI_EXIT_OK)
        rc = cli_fail(st, "closing the device");
    return rc;
}

#define DEVICE_NAME_SIZE (sizeof((acg_capability *)0)->name + 1)

/* The device's name, which the driver need not have NUL-terminated. */
static void device_name(const acg_device *dev, char *out, size_t size) {
    const acg_capability *cap = acg_device_get_capability(dev);
    snprintf(out, size, "%.*s", cap ? (int)sizeof cap->name : 0, cap ? cap->name : "");
}

void bench_print_title(const bench_common *c, const acg_device *dev) {
    char name[DEVICE_NAME_SIZE];
    device_name(dev, name, sizeof name);
    printf("acg %s on %s (%s)\n", c->name, acg_device_get_spec(dev), name);
}

void bench_json_device(bench_json *j, const acg_device *dev) {
    const acg_capability *cap = acg_device_get_capability(dev);
    char name[DEVICE_NAME_SIZE];
    device_name(dev, name, sizeof name);
    bench_json_string(j, "backend", cap ? cap->backend : NULL);
    bench_json_string(j, "device", acg_device_get_spec(dev));
    bench_json_string(j, "device_name", name);
}

/* ---- tensor parallelism: --tp N under mpirun -np N ------------------------------------------- */

int bench_ranks_join(bench_ranks *r, uint64_t tp, const char *command) {
    *r = (bench_ranks){.tp = tp, .comm = NULL, .rank = 0, .mpi = NULL};
    if (tp == 1)
        return CLI_EXIT_OK;
#ifndef ACG_HAVE_MPI
    (void)command;
    fputs("acg: --tp needs MPI: this acg was built without it (install libopenmpi-dev "
          "openmpi-bin and rebuild)\n",
          stderr);
    return CLI_EXIT_USAGE;
#else
    acg_status s = acg_mpi_comm_default(&r->mpi);
    if (s != ACG_OK)
        return cli_fail(s, "starting MPI for --tp");
    r->comm = acg_mpi_comm_get(r->mpi);
    r->rank = r->comm->rank;
    if ((uint64_t)r->comm->n_ranks != tp) {
        /* Every rank sees it: one line is enough. */
        if (bench_ranks_prints(r))
            fprintf(stderr,
                    "acg: --tp %llu needs %llu ranks, and %d run: start it as mpirun -np %llu "
                    "acg %s --tp %llu ...\n",
                    (unsigned long long)tp, (unsigned long long)tp, (int)r->comm->n_ranks,
                    (unsigned long long)tp, command, (unsigned long long)tp);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
#endif
}

const char *bench_ranks_device(const bench_ranks *r, const char *backend) {
    if (backend != NULL || r->tp == 1 || getenv("ACG_DEVICE") != NULL)
        return backend;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t b = 0; b < acg_backend_count(); b++) {
            acg_backend_info info = ACG_BACKEND_INFO_INIT;
            acg_capability cap;
            cap.size = sizeof cap;
            if (acg_backend_get_info(b, &info) != ACG_OK || !info.available ||
                (strcmp(info.name, "cpu") == 0) != (pass == 1) ||
                acg_device_describe(info.name, 0, &cap) != ACG_OK || !cap.collectives) {
                continue;
            }
            return info.name;
        }
    }
    return backend;
}

void bench_ranks_leave(bench_ranks *r, int rc) {
#ifdef ACG_HAVE_MPI
    if (r->mpi == NULL)
        return;
    acg_mpi_comm_destroy(r->mpi);
    r->mpi = NULL;
    r->comm = NULL;
    /* Finalizing waits for every rank, so only where every rank ends alike: a rank that failed
     * alone exits as it is, and mpirun ends the others, which may be waiting in a collective
     * for it. */
    if (rc == CLI_EXIT_OK || rc == CLI_EXIT_USAGE)
        acg_mpi_finalize();
#else
    (void)r;
    (void)rc;
#endif
}

bool bench_ranks_prints(const bench_ranks *r) { return r->rank == 0; }

int bench_ranks_fail(const bench_ranks *r, acg_status status, const char *what) {
    if (r->comm == NULL)
        return cli_fail(status, what);
    char ranked[160];
    snprintf(ranked, sizeof ranked, "rank %d: %s", (int)r->rank, what);
    return cli_fail(status, ranked);
}

int bench_ranks_failf(const bench_ranks *r, const char *what, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (r->comm == NULL)
        return cli_failf(what, "%s", detail);
    char ranked[160];
    snprintf(ranked, sizeof ranked, "rank %d: %s", (int)r->rank, what);
    return cli_failf(ranked, "%s", detail);
}

/* ---- what the machine can do ------------------------------------------------------------------
 */

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
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *w, size_t n,
                                                          unsigned passes) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (unsigned pass = 0; pass < passes; pass++) {
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
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)v, a0);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}
#endif

/* Eight independent sums of 64-bit words where AVX2 is missing. */
static void *read_job(void *p) {
    machine_job *j = p;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        j->result = read_avx2(j->words, j->n, j->passes);
        return NULL;
    }
#endif
    uint64_t a[8] = {0};
    for (unsigned pass = 0; pass < j->passes; pass++) {
        size_t i = 0;
        for (; i + 8 <= j->n; i += 8) {
            for (int k = 0; k < 8; k++) {
                a[k] += j->words[i + (size_t)k];
            }
        }
        for (; i < j->n; i++) {
            a[0] += j->words[i];
        }
    }
    j->result = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
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
        uint64_t t0 = bench_now_ns();
        if (!run_jobs(read_job, job, threads)) {
            free(words);
            return NAN;
        }
        uint64_t t1 = bench_now_ns();
        /* bytes per ns = GB/s */
        runs[r] = (double)passes * (double)(n * sizeof *words) / (double)(t1 - t0);
    }
    best = bench_median(runs, 5);
    free(words);
    return best;
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
        uint64_t t0 = bench_now_ns();
        if (!run_jobs(fma_job, job, threads)) {
            return NAN;
        }
        uint64_t t1 = bench_now_ns();
        runs[r] = flops_per_iter * (double)iters * threads / (double)(t1 - t0); /* GFLOP/s */
    }
    return bench_median(runs, 5);
}
