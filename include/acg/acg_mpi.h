/*
 * acg_mpi.h — an acg process group (acg_comm) over an MPI communicator: libacg_mpi.
 *
 * acg takes a process group as callbacks (acg.h, "Process groups and collectives"); this
 * library fills them with MPI, so a runner's ranks agree on what they captured and a device
 * group's ranks reduce through the host. It is built when CMake finds MPI (Debian:
 * libopenmpi-dev openmpi-bin) and linked as acg::acg_mpi (or acg::acg_mpi_static), next to acg.
 *
 *     MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
 *     acg_mpi_comm *mc;
 *     acg_mpi_comm_create(MPI_COMM_WORLD, &mc);      // collective: every rank calls it
 *     config.comm = acg_mpi_comm_get(mc);            // e.g. an acg_runner_config
 *     ...
 *     acg_mpi_comm_destroy(mc);                      // after every user of the comm is gone
 *     MPI_Finalize();
 *
 * and run with `mpirun -np 2 ./prog` (as root add --allow-run-as-root; more ranks than cores
 * need --oversubscribe).
 *
 * Communicators. create duplicates the communicator twice: the agreement callbacks (barrier,
 * allreduce_min_i32, broadcast) run on one, which the engine calls from the thread that made the
 * runner or group; allreduce_sum_f32 runs on the other, because acg calls it from a stream's
 * worker thread while an agreement may be running, and MPI forbids two collectives at once on
 * one communicator. Hence MPI must run with MPI_THREAD_MULTIPLE. The caller's communicator is
 * never used for traffic, so the application's own MPI calls cannot be confused with acg's.
 *
 * Bounded time. Every collective is MPI's non-blocking form, polled until it completes or
 * ACG_COMM_TIMEOUT_MS passes (milliseconds, as for the cpu backend's device groups; read once
 * per process; unset or empty: 60000; a value that is not a whole number in
 * 1 .. 18446744073709 is reported once on stderr and 60000 used).
 * A rank that hangs, or skips a call the others make, then costs the others that long, not
 * for ever (Open MPI's mpirun also ends the job when a rank exits without MPI_Finalize). The call
 * returns ACG_ERR_COMM, and the group is broken: a collective left pending cannot be cancelled, so
 * every later callback of this acg_mpi_comm fails at once with ACG_ERR_COMM, naming the first
 * failure. A pending collective works on buffers of this library, never on the caller's, so the
 * caller may free its memory after a failure; what MPI may still write is freed by destroy once
 * the collective completed, else left allocated.
 *
 * Errors. Functions return an acg_status. On a failure acg_mpi_last_error() (and
 * acg_last_error(), which acg reports when a callback failed) hold a sentence naming the
 * callback, the rank, and for an MPI failure the MPI call and MPI_Error_string's text.
 * Any failure of a callback breaks the group as a timeout does: this rank did not complete the
 * collective the others are in, so none of its later calls could be matched with theirs.
 *
 * Ordering. The callbacks are collectives: every rank makes the same calls, with the same sizes
 * and the same root, in the same order. allreduce_sum_f32 checks that the ranks' n agree
 * (below); the agreement callbacks check no sizes, and a mismatch there is MPI's undefined
 * behaviour. The agreement callbacks must not be called from two threads at once, nor
 * allreduce_sum_f32 from two threads at once (acg does neither); one agreement and one
 * allreduce_sum_f32 may run at the same time. A call refused for bad input communicates
 * nothing, so the other ranks' matching call times out.
 */
#ifndef ACG_ACG_MPI_H
#define ACG_ACG_MPI_H

#include <mpi.h>

#include <acg/acg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A process group over an MPI communicator (opaque). */
typedef struct acg_mpi_comm acg_mpi_comm;

/* Makes a process group of the ranks of comm: a collective over comm, every rank calling it.
 * Duplicates comm twice (MPI_Comm_idup, within ACG_COMM_TIMEOUT_MS) and sets MPI_ERRORS_RETURN
 * on the duplicates; comm itself stays the caller's and may be freed afterwards. Thread-safe.
 * ACG_ERR_INVALID_ARGUMENT for a NULL out, MPI not initialized (or already finalized),
 * MPI_COMM_NULL or an intercommunicator; ACG_ERR_UNSUPPORTED when MPI runs with less than
 * MPI_THREAD_MULTIPLE; ACG_ERR_OUT_OF_MEMORY; ACG_ERR_COMM when a duplicate fails or a rank
 * does not join within the timeout. */
ACG_API acg_status acg_mpi_comm_create(MPI_Comm comm, acg_mpi_comm **out);

/* The group's callbacks, to hand to acg (acg_runner_config.comm, acg_device_group_create):
 * size = sizeof(acg_comm), user = c, rank and n_ranks from MPI_Comm_rank and MPI_Comm_size of
 * comm, and every callback, allreduce_sum_f32 included. It belongs to c and lives as long as c.
 * NULL for a NULL c. Every callback returns ACG_OK; ACG_ERR_COMM when a rank does not join
 * within ACG_COMM_TIMEOUT_MS (each piece below waits that long at most), an MPI call fails, or
 * the group broke earlier; ACG_ERR_INVALID_ARGUMENT for NULL data with a non-zero size, or a
 * root outside 0 .. n_ranks-1; ACG_ERR_OUT_OF_MEMORY when the staging cannot grow. Each of
 * these failures breaks the group.
 * - barrier: MPI_Ibarrier.
 * - allreduce_min_i32: MPI_Iallreduce of MPI_INT32_T with MPI_MIN.
 * - broadcast: MPI_Ibcast of MPI_BYTE, in pieces of at most 1 MiB (any size_t).
 * - allreduce_sum_f32: every rank gets the same bits, added in rank order
 *   (v = x[0]; v += x[1]; ... v += x[n_ranks-1], in float), whatever MPI's reduction algorithm
 *   would do: each piece of at most 65536 floats is gathered from every rank (MPI_Iallgather)
 *   and summed locally. First every rank's n is gathered (one MPI_Iallgather of a uint64_t,
 *   n 0 included): when they differ, every rank fails with ACG_ERR_COMM before any data moved
 *   (values unchanged), naming rank 0's n and the first that differs ("allreduce_sum_f32: rank
 *   1 of 2: rank 0 reduces 16 floats, rank 1 32 ..."), and the group is broken. A rank that
 *   comes after the others timed out completes their gather of n, then fails after its own
 *   timeout waiting for their data: it never gets a sum the others gave up on. */
ACG_API const acg_comm *acg_mpi_comm_get(const acg_mpi_comm *c);

/* Frees the group's duplicates (MPI_Comm_free) and its memory. Call it on every rank, once no
 * one uses the callbacks; it does not wait for the other ranks. NULL is a no-op. After
 * MPI_Finalize it frees the memory alone. ACG_OK; ACG_ERR_COMM when MPI_Comm_free failed (the
 * memory is freed all the same). */
ACG_API acg_status acg_mpi_comm_destroy(acg_mpi_comm *c);

/* acg_mpi_comm_create over MPI_COMM_WORLD, for programs that use MPI only through acg: when MPI
 * is not initialized yet, initializes it first with MPI_Init_thread(NULL, NULL,
 * MPI_THREAD_MULTIPLE), and acg_mpi_finalize then finalizes it. When MPI is initialized already
 * (by the application), it is used as it is and stays the application's to finalize. Returns as
 * acg_mpi_comm_create; also ACG_ERR_INVALID_ARGUMENT once MPI was finalized, and
 * ACG_ERR_UNSUPPORTED when MPI_Init_thread grants less than MPI_THREAD_MULTIPLE. */
ACG_API acg_status acg_mpi_comm_default(acg_mpi_comm **out);

/* Finalizes MPI if acg_mpi_comm_default initialized it (destroy every acg_mpi_comm first), and
 * does nothing otherwise. Collective over MPI_COMM_WORLD, as MPI_Finalize is. ACG_OK;
 * ACG_ERR_COMM when MPI_Finalize failed. */
ACG_API acg_status acg_mpi_finalize(void);

/* Detail of the most recent failure of an acg_mpi function on this thread, callbacks included:
 * "acg_mpi: barrier: rank 1 of 3: no answer from every rank within 60000 ms (a rank failed or
 * left)". "" before any failure. The string belongs to the library and stays valid until the
 * next failure on this thread. */
ACG_API const char *acg_mpi_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ACG_ACG_MPI_H */
