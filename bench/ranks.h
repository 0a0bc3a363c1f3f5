/*
 * ranks.h — tensor parallelism for the tool's commands: --tp N under mpirun -np N.
 *
 * `acg run --tp N` and the benches that take --tp run as every rank of `mpirun -np N`, each on
 * its own device, joined through libacg_mpi where the tool was built with it (ACG_HAVE_MPI).
 * Every rank makes the same calls (the collectives pair up); rank 0 alone prints its report,
 * and each rank reports its own failures, naming itself. Part of the bench library (acg_bench),
 * which the tool links.
 */
#ifndef ACG_BENCH_RANKS_H
#define ACG_BENCH_RANKS_H

#include <stdbool.h>
#include <stdint.h>

#include <acg/acg.h>

#include "tool_cli.h"

struct acg_mpi_comm;

typedef struct bench_ranks {
    uint64_t tp;              /* --tp: the ranks asked for; 1: one process, no MPI */
    const acg_comm *comm;     /* the ranks' process group; NULL with one rank */
    int32_t rank;             /* this process's rank; 0 with one */
    struct acg_mpi_comm *mpi; /* what comm belongs to; NULL with one rank */
} bench_ranks;

/* Joins the tp ranks that mpirun started (initializing MPI unless it is already); with tp 1
 * sets r up for one process and does nothing else. `command` ("run", "bench decode") names the
 * command in the hint of a rank count mismatch. Returns TOOL_EXIT_OK; TOOL_EXIT_USAGE after
 * one line on stderr when the tool was built without MPI, or (from rank 0) when mpirun started
 * another number of ranks; TOOL_EXIT_FAILURE after "acg: starting MPI for --tp: <detail>".
 * Whatever it returns, bench_ranks_leave undoes it. */
int bench_ranks_join(bench_ranks *r, uint64_t tp, const char *command);

/* The device spec to open: `backend` (--backend) when given, with one rank, or with
 * $ACG_DEVICE set (NULL then means acg_device_open's default); else, since a model split over
 * ranks needs collectives, the first backend whose device 0 has them, an accelerator before
 * the cpu backend. */
const char *bench_ranks_device(const bench_ranks *r, const char *backend);

/* Leaves the ranks' group (after every user of r->comm is gone); rc is the command's exit
 * status so far. MPI is finalized only where every rank ends alike (TOOL_EXIT_OK, or the
 * TOOL_EXIT_USAGE every rank got), since finalizing waits for every rank: a rank that failed
 * alone exits as it is, and mpirun ends the others. */
void bench_ranks_leave(bench_ranks *r, int rc);

/* Whether this process prints its report: rank 0 (the only one without --tp). */
bool bench_ranks_prints(const bench_ranks *r);

/* tool_fail and tool_failf, naming the rank ("acg: rank R: <what>: ...") when there are
 * several: each rank reports its own failures. Return TOOL_EXIT_FAILURE. */
int bench_ranks_fail(const bench_ranks *r, acg_status status, const char *what);
int bench_ranks_failf(const bench_ranks *r, const char *what, const char *fmt, ...)
    TOOL_PRINTF(3, 4);

#endif /* ACG_BENCH_RANKS_H */
