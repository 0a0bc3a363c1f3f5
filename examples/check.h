/* check.h — the examples' one error check: CHECK(call) prints the failing call, its status and
 * acg_last_error()'s detail, and returns 1 from main. An engine would release what it holds
 * first; an example that holds much (decode_step.c) does so in one function. */
#ifndef ACG_EXAMPLES_CHECK_H
#define ACG_EXAMPLES_CHECK_H

#include <stdio.h>

#include <acg/acg.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        acg_status st_ = (call);                                                                   \
        if (st_ != ACG_OK) {                                                                       \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, acg_status_name(st_),                   \
                    acg_last_error());                                                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#endif
