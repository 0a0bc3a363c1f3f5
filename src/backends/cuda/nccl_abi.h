/* nccl_abi.h — the part of NCCL's C ABI the cuda backend calls, declared here rather than taken
 * from nccl.h.
 *
 * NCCL is loaded at run time (nccl.c), like the driver, so the build needs none of it; a build
 * machine with the CUDA toolkit often lacks nccl.h, and a header found on one machine would say
 * nothing about the library loaded on another. What is used has not changed since NCCL 2.0: the
 * 128-byte unique id, the result codes, ncclFloat and ncclSum, and the prototypes below. The
 * enums are passed as int, which is how the C ABIs acg runs on pass an enum whose values fit one
 * (NCCL keeps ncclRedOp_t within int for that reason). tests/cuda_driver/nccl_abi_check.c
 * compares every value and size here with nccl.h where the build finds one, and acg's test NCCL
 * (tests/cuda_driver/fake_nccl.c) implements these same prototypes.
 *
 * X(name, type of its pointer, required): every function nccl.c resolves with dlsym. */
#ifndef ACG_BACKENDS_CUDA_NCCL_ABI_H
#define ACG_BACKENDS_CUDA_NCCL_ABI_H

#include <stddef.h>

struct CUstream_st; /* a CUstream is what NCCL's cudaStream_t is */

/* ncclUniqueId: rank 0 makes it, every rank passes it to ncclCommInitRank. */
#define ACG_NCCL_UNIQUE_ID_BYTES 128
typedef struct acg_nccl_unique_id {
    char internal[ACG_NCCL_UNIQUE_ID_BYTES];
} acg_nccl_unique_id;

/* ncclComm_t: a pointer to NCCL's communicator, never looked into. */
typedef struct acg_nccl_comm_st *acg_nccl_comm;

/* ncclResult_t's values. */
enum {
    ACG_NCCL_SUCCESS = 0,
    ACG_NCCL_UNHANDLED_CUDA_ERROR = 1,
    ACG_NCCL_SYSTEM_ERROR = 2,
    ACG_NCCL_INTERNAL_ERROR = 3,
    ACG_NCCL_INVALID_ARGUMENT = 4,
    ACG_NCCL_INVALID_USAGE = 5,
    ACG_NCCL_REMOTE_ERROR = 6,
    ACG_NCCL_IN_PROGRESS = 7,
    ACG_NCCL_NUM_RESULTS = 8,
};

/* The ncclDataType_t and ncclRedOp_t values acg uses. */
enum { ACG_NCCL_FLOAT32 = 7 };
enum { ACG_NCCL_SUM = 0 };

/* ncclGetVersion's code: 10000 * major + 100 * minor + patch since NCCL 2.9 (1000 * major + 100 *
 * minor + patch before, always below this). 2.9 is the first to capture collectives in CUDA
 * graphs. */
#define ACG_NCCL_MIN_VERSION 20900

typedef int (*acg_nccl_get_version_fn)(int *version);
typedef int (*acg_nccl_get_unique_id_fn)(acg_nccl_unique_id *id);
typedef int (*acg_nccl_comm_init_rank_fn)(acg_nccl_comm *comm, int n_ranks, acg_nccl_unique_id id,
                                          int rank);
typedef int (*acg_nccl_all_reduce_fn)(const void *send, void *recv, size_t count, int type, int op,
                                      acg_nccl_comm comm, struct CUstream_st *stream);
typedef int (*acg_nccl_comm_destroy_fn)(acg_nccl_comm comm);
typedef int (*acg_nccl_comm_abort_fn)(acg_nccl_comm comm);
typedef int (*acg_nccl_comm_get_async_error_fn)(acg_nccl_comm comm, int *async_error);
typedef const char *(*acg_nccl_get_error_string_fn)(int result);
typedef const char *(*acg_nccl_get_last_error_fn)(acg_nccl_comm comm);

/* ncclGetLastError (2.13) only adds detail to a failure's message: optional. */
#define ACG_NCCL_FUNCTIONS(X)                                                                      \
    X(ncclGetVersion, acg_nccl_get_version_fn, 1)                                                  \
    X(ncclGetErrorString, acg_nccl_get_error_string_fn, 1)                                         \
    X(ncclGetUniqueId, acg_nccl_get_unique_id_fn, 1)                                               \
    X(ncclCommInitRank, acg_nccl_comm_init_rank_fn, 1)                                             \
    X(ncclAllReduce, acg_nccl_all_reduce_fn, 1)                                                    \
    X(ncclCommGetAsyncError, acg_nccl_comm_get_async_error_fn, 1)                                  \
    X(ncclCommDestroy, acg_nccl_comm_destroy_fn, 1)                                                \
    X(ncclCommAbort, acg_nccl_comm_abort_fn, 1)                                                    \
    X(ncclGetLastError, acg_nccl_get_last_error_fn, 0)

#endif /* ACG_BACKENDS_CUDA_NCCL_ABI_H */
