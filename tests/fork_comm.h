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

#include <acg/acg.h>

typedef struct fc_group fc_group;

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
