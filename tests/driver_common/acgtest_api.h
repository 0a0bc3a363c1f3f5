/* acgtest_api.h — how the control APIs of acg's test drivers (tests/cuda_driver's acgtest_cuda.h
 * and acgtest_nccl.h, tests/ze_driver's acgtest_ze.h) declare their functions: exported from the
 * driver, each with the type of a pointer to it, <name>_fn, for the dlsym a test reaches it
 * with. */
#ifndef ACG_TESTS_ACGTEST_API_H
#define ACG_TESTS_ACGTEST_API_H

#if defined(__GNUC__) && __GNUC__ >= 4
#define ACGTEST_API __attribute__((visibility("default")))
#else
#define ACGTEST_API
#endif

/* Declares the exported function `name` of the parameters `params` (in their parentheses)
 * returning `ret`, and name##_fn, the type of a pointer to it. */
#define ACGTEST_FUNCTION(ret, name, params)                                                        \
    ACGTEST_API ret name params;                                                                   \
    typedef ret(*name##_fn) params

#endif /* ACG_TESTS_ACGTEST_API_H */
