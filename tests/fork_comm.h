/*
 * fork_comm.h — a process group for tests without MPI: ranks are processes forked from the
 * test, and the acg_comm callbacks meet in a shared anonymous mapping made before the fork.
 * Every call is a barrier-separated exchange; a rank that does not arrive within the timeout
 * makes the others' calls fail with ACG_ERR_COMM.
 *
 *     fc_group *g = fc_create(3, 10000);     // before any device is opened
 *     int rank = fc_fork(g);                 // 0 in the parent, 1.. in the children
 *     ... acg_device_group_create(dev, fc_comm(g), &group) ...
 *     if (rank != 0) _exit(failed);          // children end with _exit
 *     int bad = fc_wait_children(g);         // the parent: children that failed or died
 *     fc_destroy(g);
 */
#ifndef ACG_TESTS_FORK_COMM_H
#define ACG_TESTS_FORK_COMM_H

#include <stdbool.h>
#include <stdio.h>

#include <acg/acg.h>

/* A rank's check, where cmocka cannot report (ranks other than 0 are children that report
 * through their exit status): on failure, says where and returns the line (nonzero). */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank check failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,    \
                    acg_last_error());                                                             \
            return __LINE__;                                                                       \
        }                                                                                          \
    } while (0)

typedef struct fc_group fc_group;

/* Whether ranks forked from this test can each open a device of the backend under test
 * (tests/common.h): the cpu backend's can. A GPU backend's cannot: its driver, started in this
 * process to read the capability, does not work in a forked child, and the ranks would share one
 * GPU, which NCCL refuses; the MPI tests (tests/mpi) run those cases with a process per GPU. When
 * not, prints why, naming what is skipped. */
bool fc_ranks_can_fork(const char *what);

/* A group of n_ranks (1..16) whose calls give up after timeout_ms; NULL when out of memory. */
fc_group *fc_create(int n_ranks, unsigned timeout_ms);
/* Forks ranks 1 .. n_ranks - 1; returns this process's rank. Call before opening devices: a
 * device's threads do not survive a fork. */
int fc_fork(fc_group *g);
/* This rank's comm (rank, n_ranks, barrier, allreduce_min_i32, broadcast, allreduce_sum_f32). */
const acg_comm *fc_comm(fc_group *g);
/* The parent: waits for every child; the number that exited with a nonzero status or a signal
 * (a child killed on purpose counts too). */
int fc_wait_children(fc_group *g);
/* The process id of rank r (the parent knows every child's). */
int fc_pid(const fc_group *g, int rank);
void fc_destroy(fc_group *g);

#endif /* ACG_TESTS_FORK_COMM_H */
