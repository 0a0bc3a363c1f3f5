/* elementwise.c — the core's own kernels: the four of elementwise.acg.c, written once for every
 * backend (include/acg/kernel.h). acg_add_kernels builds that file into each form a backend of
 * the build takes, into definitions with their implementations (the generated
 * acg__core_kernels.h). Here they become the core's kernels: registered from the start, never
 * copied and never unregistered; every other kernel belongs to the layer that registers it. */
#include <pthread.h>

#include "acg__core_kernels.h"
#include "core/acg-impl.h"

/* Room for elementwise.acg.c's kernels (it has four; test_kernel runs each). */
#define MAX_CORE_KERNELS 8

static acg__kernel_def kernels[MAX_CORE_KERNELS];
static size_t n_kernels;
static pthread_once_t made = PTHREAD_ONCE_INIT;

static void make_kernels(void) {
    const size_t n = acg__core_kernel_count();
    n_kernels = n < MAX_CORE_KERNELS ? n : MAX_CORE_KERNELS;
    for (size_t i = 0; i < n_kernels; i++) {
        kernels[i].d = *acg__core_kernel_desc(i);
        kernels[i].name = kernels[i].d.name;
        kernels[i].core = true;
    }
}

const acg__kernel_def *acg__core_kernels(size_t *count) {
    pthread_once(&made, make_kernels);
    *count = n_kernels;
    return kernels;
}
