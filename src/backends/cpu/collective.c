/* collective.c — the cpu backend's process groups and allreduce.
 *
 * The ranks of one host share one memory segment: rank 0 creates it (shm_open), names it to the
 * others through the comm, and removes its name as soon as every rank mapped it, so nothing is
 * left in /dev/shm whatever happens to a rank afterwards. The segment holds each rank's progress
 * counters and one data block per rank. An allreduce goes in rounds of up to CHUNK floats: each
 * rank waits until every rank finished reading the previous round (its block is then free),
 * copies its floats into its block, publishes the round with the allreduce's count, waits until
 * every rank published it, checks that every rank's count is its own, and adds the blocks in
 * rank order into its own buffer, then says it finished reading. Every rank adds the same values
 * in the same order, so every rank gets the same bits, whatever the timing. It runs on the
 * stream's worker as an op, so graphs hold it like a kernel.
 *
 * Counts. The ranks agree on the round by construction, not on what it holds: a rank that
 * queued an allreduce of another count than the others (a bug of the caller's, as a missing
 * allreduce is) would otherwise add the others' stale blocks, or fall out of step with them.
 * Every rank reads every rank's count in the same round, before touching its buffer, so every
 * rank finds a mismatch, names the same two ranks, and breaks the group with its buffer as it
 * was. The first round of an allreduce is where a mismatch shows (earlier ones agreed, or the
 * group is broken), so no round of it wrote the buffer yet. acg's allreduce is one operation on
 * one type, a float sum, so the count is all there is to agree on.
 *
 * A rank waits by polling (pause, then yielding the core); now and then it checks that the
 * ranks it waits for are alive (their process ids, every 10 ms) and that ACG_COMM_TIMEOUT_MS did
 * not pass. Either failing breaks the group: this allreduce and every later one fail at once, and
 * the stream's next synchronization reports ACG_ERR_COMM with the reason.
 *
 * Ranks on several hosts (or ACG_CPU_ALLREDUCE=host) add through the comm's allreduce_sum_f32
 * instead, called by the worker. The comm's callback says nothing of counts (and MPI's collectives
 * with mismatched counts are erroneous), so the ranks first agree on the count through the comm
 * itself: an allreduce_sum_f32 of a fixed size, n_ranks rows of COUNT_DIGITS floats, each rank
 * writing its count in its own row as 16-bit digits and zeros elsewhere. Adding zeros is exact
 * in any order, so every rank reads every rank's count; a mismatch breaks the group as above,
 * before the data's allreduce_sum_f32, which is then never called.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"

#define CHUNK (64u * 1024u) /* floats per rank and round: 256 KiB */
#define MAGIC 0x61636774u   /* "acgt", the segment's layout: changed with it (was "acgs") */
#define NAME_BYTES 64
#define COUNT_DIGITS 4 /* 16-bit digits of a count (64 bits) exchanged through the comm */

/* One rank's place in the segment, on cache lines of its own. */
struct shm_rank {
    _Alignas(64) _Atomic uint64_t arrived; /* the last round whose block it filled */
    _Atomic uint64_t count; /* the floats of the allreduce that round is of: published with it */
    _Alignas(64) _Atomic uint64_t left; /* the last round it finished reading */
    int32_t pid;
};

struct shm_header {
    uint32_t magic;
    uint32_t n_ranks;
    struct shm_rank ranks[ACG__MAX_RANKS];
};

struct cpu_group {
    const acg_comm *comm;
    int32_t rank, n_ranks;
    bool host;            /* through comm->allreduce_sum_f32 */
    struct shm_header *h; /* the segment (shm) */
    size_t map_bytes;
    float *blocks;       /* n_ranks blocks of CHUNK floats after the header */
    uint64_t round;      /* rounds this rank went through (the worker's) */
    uint64_t timeout_ns; /* ACG_COMM_TIMEOUT_MS */
    pthread_mutex_t mu;  /* one allreduce at a time, whatever the stream */
    _Atomic int broken;  /* why is set: every later allreduce fails */
    char why[256];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t header_bytes(void) { return (sizeof(struct shm_header) + 63u) / 64u * 64u; }

/* ---- the group ----------------------------------------------------------------------------- */

/* A hash of the host's name, to tell whether every rank runs on this host. */
static int32_t host_hash(void) {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    uint32_t h = 2166136261u;
    for (const char *p = name; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 16777619u;
    }
    return (int32_t)(h & 0x7fffffffu);
}

/* Whether every rank says ok (a collective: every rank calls it at the same point). */
static acg_status agree(const acg_comm *comm, bool ok, bool *all, const char *fn) {
    int32_t v = ok ? 1 : 0;
    acg_status st = comm->allreduce_min_i32(comm->user, &v, 1);
    if (st != ACG_OK) {
        return acg__error(st, "%s: the comm's allreduce_min_i32 failed (%s)", fn,
                          acg_status_name(st));
    }
    *all = v == 1;
    return ACG_OK;
}

/* Maps the segment `name` (created by rank 0 with `create`), of bytes bytes. */
static acg_status map_segment(cpu_group *g, const char *name, bool create, size_t bytes,
                              const char *fn) {
    int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
    if (fd < 0) {
        return acg__error(ACG_ERR_DEVICE, "%s: shm_open(%s) failed: %s", fn, name, strerror(errno));
    }
    struct stat sb;
    acg_status st = ACG_OK;
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        st = acg__error(ACG_ERR_DEVICE, "%s: ftruncate of %s to %zu bytes failed: %s", fn, name,
                        bytes, strerror(errno));
    } else if (!create && (fstat(fd, &sb) != 0 || (size_t)sb.st_size != bytes)) {
        st = acg__error(ACG_ERR_DEVICE, "%s: %s is not the %zu-byte segment rank 0 made", fn, name,
                        bytes);
    }
    void *p = MAP_FAILED;
    if (st == ACG_OK) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            st = acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: mmap of %zu bytes of %s failed: %s", fn,
                            bytes, name, strerror(errno));
        }
    }
    close(fd);
    if (st == ACG_OK) {
        g->h = p;
        g->map_bytes = bytes;
        g->blocks = (float *)(void *)((char *)p + header_bytes());
    }
    return st;
}

/* The shared segment: made, named, mapped by every rank, then unnamed. */
static acg_status join_segment(cpu_group *g, const char *fn) {
    const acg_comm *comm = g->comm;
    const size_t bytes = header_bytes() + (size_t)g->n_ranks * CHUNK * sizeof(float);
    static _Atomic uint32_t counter;
    char name[NAME_BYTES] = {0};
    acg_status st = ACG_OK;
    if (g->rank == 0) {
        snprintf(name, sizeof name, "/acg-%ld-%u", (long)getpid(),
                 (unsigned)atomic_fetch_add(&counter, 1));
        st = map_segment(g, name, true, bytes, fn);
        if (st == ACG_OK) {
            memset(g->h, 0, header_bytes());
            g->h->magic = MAGIC;
            g->h->n_ranks = (uint32_t)g->n_ranks;
        } else {
            name[0] = '\0'; /* the others learn it failed */
        }
    }
    acg_status bs = comm->broadcast(comm->user, name, sizeof name, 0);
    if (bs != ACG_OK) {
        if (g->rank == 0 && st == ACG_OK) {
            shm_unlink(name);
        }
        return acg__error(bs, "%s: the comm's broadcast failed (%s)", fn, acg_status_name(bs));
    }
    if (g->rank != 0) {
        name[NAME_BYTES - 1] = '\0';
        st = name[0] == '\0'
                 ? acg__error(ACG_ERR_DEVICE, "%s: rank 0 could not make the shared segment", fn)
                 : map_segment(g, name, false, bytes, fn);
        if (st == ACG_OK && (g->h->magic != MAGIC || g->h->n_ranks != (uint32_t)g->n_ranks)) {
            st = acg__error(ACG_ERR_DEVICE, "%s: %s is not rank 0's segment for %ld ranks", fn,
                            name, (long)g->n_ranks);
        }
    }
    if (st == ACG_OK) {
        g->h->ranks[g->rank].pid = (int32_t)getpid();
    }
    bool all = false;
    acg_status as = agree(comm, st == ACG_OK, &all, fn);
    if (g->rank == 0 && name[0] != '\0') {
        shm_unlink(name); /* every rank mapped it, or gave up: the name goes either way */
    }
    if (as == ACG_OK && st == ACG_OK && !all) {
        as = acg__error(ACG_ERR_COMM, "%s: another rank could not join the shared segment", fn);
    }
    /* Once this returns on any rank, the name is gone. */
    acg_status bar = as == ACG_OK && st == ACG_OK ? comm->barrier(comm->user) : ACG_OK;
    if (bar != ACG_OK) {
        as = acg__error(bar, "%s: the comm's barrier failed (%s)", fn, acg_status_name(bar));
    }
    if (st != ACG_OK || as != ACG_OK) {
        if (g->h != NULL) {
            munmap(g->h, g->map_bytes);
            g->h = NULL;
        }
        return st != ACG_OK ? st : as;
    }
    return ACG_OK;
}

acg_status acg__cpu_group_create(const acg_comm *comm, cpu_group **out) {
    static const char fn[] = "acg_device_group_create";
    uint64_t timeout_ms = 0;
    acg_status st =
        acg__env_u64(fn, "ACG_COMM_TIMEOUT_MS", 1, UINT64_MAX / 1000000u, 60000, &timeout_ms);
    if (st != ACG_OK) {
        return st;
    }
    const char *mode = acg__env_get("ACG_CPU_ALLREDUCE");
    if (mode != NULL && *mode != '\0' && strcmp(mode, "shm") != 0 && strcmp(mode, "host") != 0) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "%s: ACG_CPU_ALLREDUCE=%.32s is neither shm nor host", fn, mode);
    }
    /* Whether every rank is on this host: the least and the greatest hash agree. */
    int32_t hashes[2] = {host_hash(), -host_hash()};
    if ((st = comm->allreduce_min_i32(comm->user, hashes, 2)) != ACG_OK) {
        return acg__error(st, "%s: the comm's allreduce_min_i32 failed (%s)", fn,
                          acg_status_name(st));
    }
    cpu_group *g = acg__new(sizeof *g, fn);
    if (g == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    g->comm = comm;
    g->rank = comm->rank;
    g->n_ranks = comm->n_ranks;
    g->timeout_ns = timeout_ms * 1000000u;
    g->host = hashes[0] != -hashes[1] || (mode != NULL && strcmp(mode, "host") == 0);
    pthread_mutex_init(&g->mu, NULL);
    if (g->host && comm->allreduce_sum_f32 == NULL) {
        st = acg__error(ACG_ERR_UNSUPPORTED,
                        "%s: the ranks %s, and the comm has no allreduce_sum_f32", fn,
                        hashes[0] != -hashes[1] ? "are on several hosts"
                                                : "reduce on the host (ACG_CPU_ALLREDUCE=host)");
    } else if (!g->host && g->n_ranks > 1) {
        st = join_segment(g, fn);
    }
    if (st != ACG_OK) {
        pthread_mutex_destroy(&g->mu);
        acg__free(g);
        return st;
    }
    acg__log(ACG_LOG_INFO, "cpu: rank %ld of %ld joined a device group (%s)", (long)g->rank,
             (long)g->n_ranks, g->host ? "allreduce through the comm" : "shared memory");
    *out = g;
    return ACG_OK;
}

void acg__cpu_group_destroy(cpu_group *g) {
    if (g->h != NULL) {
        munmap(g->h, g->map_bytes);
    }
    pthread_mutex_destroy(&g->mu);
    acg__free(g);
}

const char *acg__cpu_group_why(cpu_group *g) { return atomic_load(&g->broken) ? g->why : NULL; }

/* ---- the allreduce ------------------------------------------------------------------------- */

/* Breaks the group (the worker's, under g->mu). */
static void breaks(cpu_group *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void breaks(cpu_group *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why, sizeof g->why, fmt, ap);
    va_end(ap);
    atomic_store(&g->broken, 1);
    acg__log(ACG_LOG_ERROR, "cpu: %s", g->why);
}

/* Whether process pid still runs: it exists and is not a zombie (a rank forked by another
 * stays one until its parent reaps it). */
static bool alive(int32_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return false;
    }
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return true; /* no /proc: trust kill */
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')'); /* "pid (name) state ..." */
    return close_paren == NULL || close_paren[1] != ' ' || close_paren[2] != 'Z';
}

/* Waits until every rank's counter (arrived, or left) reached round; false (the group broken)
 * when a rank exited or the timeout passed. */
static bool wait_all(cpu_group *g, bool arrived, uint64_t round) {
    uint64_t start = 0, checked = 0;
    uint32_t polls = 0;
    for (int32_t r = 0; r < g->n_ranks;) {
        struct shm_rank *p = &g->h->ranks[r];
        uint64_t v = atomic_load_explicit(arrived ? &p->arrived : &p->left, memory_order_acquire);
        if (v >= round) {
            r++;
            continue;
        }
        if ((++polls & 255u) != 0) {
            polls < 4096 ? cpu_relax() : (void)sched_yield();
            continue;
        }
        uint64_t t = now_ns();
        if (start == 0) {
            start = checked = t;
        }
        if (t - checked >= 10000000u) {
            checked = t;
            if (p->pid > 0 && !alive(p->pid)) {
                breaks(g,
                       "allreduce: rank %ld (pid %ld) exited while rank %ld waited for it (round "
                       "%llu)",
                       (long)r, (long)p->pid, (long)g->rank, (unsigned long long)round);
                return false;
            }
        }
        if (t - start >= g->timeout_ns) {
            breaks(g,
                   "allreduce: rank %ld did not reach round %llu within %llu ms "
                   "(ACG_COMM_TIMEOUT_MS): a rank failed, left or queued other collectives",
                   (long)r, (unsigned long long)round,
                   (unsigned long long)(g->timeout_ns / 1000000u));
            return false;
        }
    }
    return true;
}

/* Whether every rank's count (counts[r]) is rank 0's; else breaks the group naming rank 0's and
 * the first that differs, which every rank, reading the same counts, names alike. */
static bool same_counts(cpu_group *g, const uint64_t *counts) {
    for (int32_t r = 1; r < g->n_ranks; r++) {
        if (counts[r] != counts[0]) {
            breaks(g,
                   "allreduce: rank 0 reduces %llu floats, rank %ld %llu: every rank must queue "
                   "the same allreduces, of the same counts, in the same order (found by rank "
                   "%ld; its buffer is unchanged)",
                   (unsigned long long)counts[0], (long)r, (unsigned long long)counts[r],
                   (long)g->rank);
            return false;
        }
    }
    return true;
}

/* The sum of every rank's `n` floats at data, in place (through the segment). */
static bool reduce_shm(cpu_group *g, float *data, size_t count) {
    const int32_t me = g->rank, n_ranks = g->n_ranks;
    for (size_t at = 0; at < count; at += CHUNK) {
        const size_t n = count - at < CHUNK ? count - at : CHUNK;
        const uint64_t round = ++g->round;
        /* Our block is free once every rank finished reading the previous round. */
        if (!wait_all(g, false, round - 1)) {
            return false;
        }
        memcpy(g->blocks + (size_t)me * CHUNK, data + at, n * sizeof(float));
        atomic_store_explicit(&g->h->ranks[me].count, count, memory_order_relaxed);
        atomic_store_explicit(&g->h->ranks[me].arrived, round, memory_order_release);
        if (!wait_all(g, true, round)) {
            return false;
        }
        /* Every rank's count of this round stays until every rank left it, so all read the
         * same ones. */
        uint64_t counts[ACG__MAX_RANKS];
        for (int32_t r = 0; r < n_ranks; r++) {
            counts[r] = atomic_load_explicit(&g->h->ranks[r].count, memory_order_relaxed);
        }
        if (!same_counts(g, counts)) {
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            float v = g->blocks[i];
            for (int32_t r = 1; r < n_ranks; r++) {
                v += g->blocks[(size_t)r * CHUNK + i];
            }
            data[at + i] = v;
        }
        atomic_store_explicit(&g->h->ranks[me].left, round, memory_order_release);
    }
    return true;
}

/* Every rank's count, through the comm (the file's comment says how); false: the group broke. */
static bool agree_count_host(cpu_group *g, size_t count) {
    float digits[ACG__MAX_RANKS * COUNT_DIGITS] = {
        0}; /* (n_ranks, COUNT_DIGITS), low digit first */
    for (uint32_t d = 0; d < COUNT_DIGITS; d++) {
        digits[(size_t)g->rank * COUNT_DIGITS + d] =
            (float)(((uint64_t)count >> (16u * d)) & 0xffffu);
    }
    acg_status st =
        g->comm->allreduce_sum_f32(g->comm->user, digits, (size_t)g->n_ranks * COUNT_DIGITS);
    if (st != ACG_OK) {
        breaks(g,
               "allreduce: the comm's allreduce_sum_f32 failed on rank %ld (%s) while the ranks "
               "agreed on the count",
               (long)g->rank, acg_status_name(st));
        return false;
    }
    uint64_t counts[ACG__MAX_RANKS];
    for (int32_t r = 0; r < g->n_ranks; r++) {
        counts[r] = 0;
        for (uint32_t d = 0; d < COUNT_DIGITS; d++) {
            counts[r] |= (uint64_t)digits[(size_t)r * COUNT_DIGITS + d] << (16u * d);
        }
    }
    return same_counts(g, counts);
}

bool acg__cpu_allreduce_run(cpu_group *g, float *data, size_t count) {
    if (atomic_load(&g->broken)) {
        return false;
    }
    if (g->n_ranks == 1) {
        return true; /* the sum of one */
    }
    pthread_mutex_lock(&g->mu);
    bool ok = true;
    if (g->host) {
        ok = agree_count_host(g, count);
        acg_status st = ok ? g->comm->allreduce_sum_f32(g->comm->user, data, count) : ACG_OK;
        if (st != ACG_OK) {
            breaks(g, "allreduce: the comm's allreduce_sum_f32 failed on rank %ld (%s)",
                   (long)g->rank, acg_status_name(st));
            ok = false;
        }
    } else {
        ok = reduce_shm(g, data, count);
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}
