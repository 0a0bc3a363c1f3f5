/* simd_x86.c — the AVX2 and AVX-512 tables of simd.h (to be written; until then the CPU's
 * best level is the scalar table). */
#include <stddef.h>

#include "simd.h"

const acg__simd_ops *acg__simd_avx2(void) { return NULL; }

const acg__simd_ops *acg__simd_avx512(void) { return NULL; }
