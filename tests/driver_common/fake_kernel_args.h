/* fake_kernel_args.h — what acg's test drivers share about the arguments of the cpu code they run
 * in a kernel's place (tests/cuda_driver's and tests/ze_driver's kernels run acg's cpu
 * implementation of the kernel of the same name): a scalar argument's size, and its value read
 * from the bytes a launch gave. Part of the static library fake_common.h describes. */
#ifndef ACG_TESTS_FAKE_KERNEL_ARGS_H
#define ACG_TESTS_FAKE_KERNEL_ARGS_H

#include <stddef.h>

#include "acg/acg.h"

/* The bytes of a scalar argument of `type` (I32, U32 and F32 4; I64 and U64 8), 0 for a buffer
 * (each driver passes its address its own way) or a type the drivers do not know. */
size_t fake__scalar_bytes(acg_arg_type type);

/* The value of a scalar argument of `type` from its bytes, into *out: 0, or -1 for a buffer or
 * an unknown type. */
int fake__scalar_arg(acg_arg_type type, const void *bytes, acg_cpu_arg *out);

#endif
