/* mpi-impl.h — what libacg_mpi shows its tests beyond acg_mpi.h. */
#ifndef ACG_MPI_IMPL_H
#define ACG_MPI_IMPL_H

#include <stdint.h>

/* The timeout every collective waits, in milliseconds: ACG_COMM_TIMEOUT_MS read on the first
 * call (a bad value reported on stderr then), else 60000. */
uint64_t acg_mpi__timeout_ms(void);

#endif /* ACG_MPI_IMPL_H */
