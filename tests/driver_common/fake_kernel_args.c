/* fake_kernel_args.c — the arguments of the cpu code the test drivers run (see
 * fake_kernel_args.h). */
#include "fake_kernel_args.h"

#include <string.h>

size_t fake__scalar_bytes(acg_arg_type type) {
    switch (type) {
    case ACG_ARG_I32:
    case ACG_ARG_U32:
    case ACG_ARG_F32:
        return 4;
    case ACG_ARG_I64:
    case ACG_ARG_U64:
        return 8;
    default:
        return 0;
    }
}

/* Every member of acg_cpu_arg starts at its first byte: the bytes are the value. */
int fake__scalar_arg(acg_arg_type type, const void *bytes, acg_cpu_arg *out) {
    size_t n = fake__scalar_bytes(type);
    if (n == 0) {
        return -1;
    }
    memcpy(out, bytes, n);
    return 0;
}
