/* nccl_abi_check.c — src/backends/cuda/nccl_abi.h against the nccl.h this build found: every
 * value and size the backend relies on, so a difference fails the build rather than a GPU run.
 * Built into the test NCCL only where CMake finds nccl.h; nothing else needs it. */
#include <nccl.h>

#include "backends/cuda/nccl_abi.h"

/* Two enums' values, compared as the ints they travel as. */
#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #theirs "'s value")

_Static_assert(ACG_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "the unique id's size");
_Static_assert(sizeof(acg_nccl_unique_id) == sizeof(ncclUniqueId), "the unique id's size");
_Static_assert(sizeof(acg_nccl_comm) == sizeof(ncclComm_t), "a communicator is a pointer");
/* The enums go through the ABI as int (nccl_abi.h). */
_Static_assert(sizeof(ncclResult_t) == sizeof(int), "ncclResult_t is int-sized");
_Static_assert(sizeof(ncclDataType_t) == sizeof(int), "ncclDataType_t is int-sized");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(int), "ncclRedOp_t is int-sized");
SAME(ACG_NCCL_SUCCESS, ncclSuccess);
SAME(ACG_NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError);
SAME(ACG_NCCL_SYSTEM_ERROR, ncclSystemError);
SAME(ACG_NCCL_INTERNAL_ERROR, ncclInternalError);
SAME(ACG_NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
SAME(ACG_NCCL_INVALID_USAGE, ncclInvalidUsage);
SAME(ACG_NCCL_REMOTE_ERROR, ncclRemoteError);
SAME(ACG_NCCL_IN_PROGRESS, ncclInProgress);
SAME(ACG_NCCL_NUM_RESULTS, ncclNumResults);
SAME(ACG_NCCL_FLOAT32, ncclFloat32);
SAME(ACG_NCCL_SUM, ncclSum);
_Static_assert(ACG_NCCL_MIN_VERSION == NCCL_VERSION(2, 9, 0), "NCCL 2.9's version code");

/* ISO C wants a translation unit to declare something. */
typedef int acgtest_nccl_abi_checked;
