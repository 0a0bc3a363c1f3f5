/*
 * fork_comm.c — fork_comm.h's process group: a generation barrier and exchange areas in a
 * MAP_SHARED anonymous mapping that every forked rank inherits.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "fork_comm.h"
#include "common.h" /* tc_comm, tc_backend_is */

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FC_MAX_RANKS 16
#define FC_INTS 1024          /* per rank and exchange */
#define FC_FLOATS (16 * 1024) /* per rank and exchange */
#define FC_BYTES (64 * 1024)  /* a broadcast's chunk */

typedef struct fc_shared {
    _Atomic uint32_t arrived;
    _Atomic uint32_t generation;
    int32_t ints[FC_MAX_RANKS][FC_INTS];
    float floats[FC_MAX_RANKS][FC_FLOATS];
    unsigned char bytes[FC_BYTES];
} fc_shared;

struct fc_group {
    fc_shared *sh;
    int n, rank;
    unsigned timeout_ms;
    int pids[FC_MAX_RANKS];
    acg_comm comm;
};

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static acg_status barrier(void *user) {
    fc_group *g = user;
    uint32_t gen = atomic_load(&g->sh->generation);
    if (atomic_fetch_add(&g->sh->arrived, 1) + 1 == (uint32_t)g->n) {
        atomic_store(&g->sh->arrived, 0);
        atomic_fetch_add(&g->sh->generation, 1);
        return ACG_OK;
    }
    uint64_t start = now_ms();
    while (atomic_load(&g->sh->generation) == gen) {
        if (now_ms() - start > g->timeout_ms) {
            return ACG_ERR_COMM;
        }
        sched_yield();
    }
    return ACG_OK;
}

/* What a rank takes of a chunk of k items, from item `at` of its array v, once every rank put
 * its part (`root`: a broadcast's). */
typedef void (*fc_take)(fc_group *g, int32_t root, void *v, size_t at, size_t k);

/* An exchange of n items of `size` bytes, `per` at most at a time: for each chunk, this rank's
 * part copied to `mine` (where not NULL), a barrier, take (only when every rank arrived) and a
 * barrier again, so that no rank puts the next chunk while another still takes. The first
 * failed barrier is returned. */
static acg_status exchange(fc_group *g, int32_t root, void *v, size_t n, size_t size, size_t per,
                           void *mine, fc_take take) {
    for (size_t at = 0; at < n; at += per) {
        size_t k = n - at < per ? n - at : per;
        if (mine != NULL) {
            memcpy(mine, (char *)v + at * size, k * size);
        }
        acg_status st = barrier(g);
        if (st == ACG_OK) {
            take(g, root, v, at, k);
        }
        if (st != ACG_OK || (st = barrier(g)) != ACG_OK) {
            return st;
        }
    }
    return ACG_OK;
}

static void take_min(fc_group *g, int32_t root, void *v, size_t at, size_t k) {
    (void)root;
    int32_t *out = (int32_t *)v + at;
    for (size_t i = 0; i < k; i++) {
        for (int r = 0; r < g->n; r++) {
            out[i] = g->sh->ints[r][i] < out[i] ? g->sh->ints[r][i] : out[i];
        }
    }
}

static acg_status min_i32(void *user, int32_t *v, size_t n) {
    fc_group *g = user;
    return exchange(g, 0, v, n, sizeof *v, FC_INTS, g->sh->ints[g->rank], take_min);
}

static void take_bytes(fc_group *g, int32_t root, void *v, size_t at, size_t k) {
    if (g->rank != root) {
        memcpy((char *)v + at, g->sh->bytes, k);
    }
}

/* The root alone puts its bytes. */
static acg_status broadcast(void *user, void *data, size_t bytes, int32_t root) {
    fc_group *g = user;
    return exchange(g, root, data, bytes, 1, FC_BYTES, g->rank == root ? g->sh->bytes : NULL,
                    take_bytes);
}

/* The sum in rank order, as acg's transports add. */
static void take_sum(fc_group *g, int32_t root, void *v, size_t at, size_t k) {
    (void)root;
    float *out = (float *)v + at;
    for (size_t i = 0; i < k; i++) {
        float sum = g->sh->floats[0][i];
        for (int r = 1; r < g->n; r++) {
            sum += g->sh->floats[r][i];
        }
        out[i] = sum;
    }
}

static acg_status sum_f32(void *user, float *v, size_t n) {
    fc_group *g = user;
    return exchange(g, 0, v, n, sizeof *v, FC_FLOATS, g->sh->floats[g->rank], take_sum);
}

fc_group *fc_create(int n_ranks, unsigned timeout_ms) {
    if (n_ranks < 1 || n_ranks > FC_MAX_RANKS) {
        return NULL;
    }
    fc_group *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return NULL;
    }
    g->sh = mmap(NULL, sizeof *g->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g->sh == MAP_FAILED) {
        free(g);
        return NULL;
    }
    g->n = n_ranks;
    g->timeout_ms = timeout_ms;
    g->pids[0] = (int)getpid();
    g->comm = tc_comm(g, 0, n_ranks, barrier, min_i32, broadcast); /* fc_fork sets the rank */
    g->comm.allreduce_sum_f32 = sum_f32;
    return g;
}

int fc_fork(fc_group *g) {
    for (int r = 1; r < g->n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            g->rank = r;
            g->comm.rank = r;
            return r;
        }
        g->pids[r] = (int)pid;
    }
    return 0;
}

const acg_comm *fc_comm(fc_group *g) { return &g->comm; }

int fc_pid(const fc_group *g, int rank) { return g->pids[rank]; }

int fc_wait_children(fc_group *g) {
    int bad = 0;
    for (int r = 1; r < g->n; r++) {
        int status = 0;
        if (g->pids[r] > 0 && waitpid(g->pids[r], &status, 0) == g->pids[r]) {
            bad += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    return bad;
}

void fc_destroy(fc_group *g) {
    if (g != NULL) {
        munmap(g->sh, sizeof *g->sh);
        free(g);
    }
}

bool fc_ranks_can_fork(const char *what) {
    if (tc_backend_is("cpu")) {
        return true;
    }
    print_message("%s: %s skipped: forked ranks cannot each open a %s device (its driver does not "
                  "survive a fork, and NCCL wants a GPU per rank); tests/mpi runs them a process "
                  "per device\n",
                  tc_spec(), what, tc_backend());
    return false;
}
