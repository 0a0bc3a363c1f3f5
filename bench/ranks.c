/*
 * ranks.c — joining the ranks of --tp under mpirun, and failures that name the rank.
 */
#include "ranks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ACG_HAVE_MPI
#include <acg/acg_mpi.h>
#endif

int bench_ranks_join(bench_ranks *r, uint64_t tp, const char *command) {
    *r = (bench_ranks){.tp = tp, .comm = NULL, .rank = 0, .mpi = NULL};
    if (tp == 1) {
        return TOOL_EXIT_OK;
    }
#ifndef ACG_HAVE_MPI
    (void)command;
    fputs("acg: --tp needs MPI: this acg was built without it (install libopenmpi-dev "
          "openmpi-bin and rebuild)\n",
          stderr);
    return TOOL_EXIT_USAGE;
#else
    acg_status s = acg_mpi_comm_default(&r->mpi);
    if (s != ACG_OK) {
        return tool_fail(s, "starting MPI for --tp");
    }
    r->comm = acg_mpi_comm_get(r->mpi);
    r->rank = r->comm->rank;
    if ((uint64_t)r->comm->n_ranks != tp) {
        /* Every rank sees it: one line is enough. */
        if (bench_ranks_prints(r)) {
            fprintf(stderr,
                    "acg: --tp %llu needs %llu ranks, and %d run: start it as mpirun -np %llu "
                    "acg %s --tp %llu ...\n",
                    (unsigned long long)tp, (unsigned long long)tp, (int)r->comm->n_ranks,
                    (unsigned long long)tp, command, (unsigned long long)tp);
        }
        return TOOL_EXIT_USAGE;
    }
    return TOOL_EXIT_OK;
#endif
}

const char *bench_ranks_device(const bench_ranks *r, const char *backend) {
    if (backend != NULL || r->tp == 1 || getenv("ACG_DEVICE") != NULL) {
        return backend;
    }
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
    if (r->mpi == NULL) {
        return;
    }
    acg_mpi_comm_destroy(r->mpi);
    r->mpi = NULL;
    r->comm = NULL;
    /* Finalizing waits for every rank, so only where every rank ends alike: a rank that failed
     * alone exits as it is, and mpirun ends the others, which may be waiting in a collective
     * for it. */
    if (rc == TOOL_EXIT_OK || rc == TOOL_EXIT_USAGE) {
        acg_mpi_finalize();
    }
#else
    (void)r;
    (void)rc;
#endif
}

bool bench_ranks_prints(const bench_ranks *r) { return r->rank == 0; }

int bench_ranks_fail(const bench_ranks *r, acg_status status, const char *what) {
    if (r->comm == NULL) {
        return tool_fail(status, what);
    }
    char ranked[160];
    snprintf(ranked, sizeof ranked, "rank %d: %s", (int)r->rank, what);
    return tool_fail(status, ranked);
}

int bench_ranks_failf(const bench_ranks *r, const char *what, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (r->comm == NULL) {
        return tool_failf(what, "%s", detail);
    }
    char ranked[160];
    snprintf(ranked, sizeof ranked, "rank %d: %s", (int)r->rank, what);
    return tool_failf(ranked, "%s", detail);
}
