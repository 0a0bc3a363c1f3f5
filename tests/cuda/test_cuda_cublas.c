/* test_cuda_cublas.c — a vendor library writing acg's memory inside an acg graph, on a real GPU
 * (scripts/device-check.sh runs it; built where the toolkit has cuBLAS): cublasSgemm, on the
 * acg stream's native CUstream, in the device's own context (acg_device_get_native), with its
 * matrices and its workspace in acg buffers (acg_buffer_get_native), between acg's own work and
 * declared as foreign work. Captured natively, the graph's replay equals the same step run
 * eagerly bit for bit, and so does a replay after the input changed in place; both equal the
 * exact product (small integers, which every summation order adds exactly).
 *
 * It needs the real driver, which cuBLAS itself calls: acg's CUDA test driver (ACG_CUDA_DRIVER)
 * is no GPU, and there the case says why it skips (tc_skip); without any CUDA driver the
 * device does not open and the executable skips as every device test does (tc_init). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include "common.h"
#include "cuda_native.h" /* cu_address */

#define M 96                  /* rows of A and C */
#define K 64                  /* columns of A, rows of B */
#define NC 80                 /* columns of B and C */
#define WORKSPACE (32u << 20) /* cuBLAS's recommended workspace on Hopper */

typedef struct gemm {
    acg_device *dev;
    acg_stream *s;
    acg_kernel *fill, *add;
    acg_buffer *a, *b, *c, *d, *ws;
    CUstream native;
    cublasHandle_t blas;
} gemm;

/* c = -1 (acg), c = a b (cuBLAS, column-major), d = c + 0.5 (acg). */
static void step(gemm *g) {
    const acg_dims dims = acg_dims_1d(M * NC);
    const acg_arg fill_args[] = {acg_arg_buffer(g->c, 0), acg_arg_f32(-1.0f)};
    const acg_arg add_args[] = {acg_arg_buffer(g->d, 0), acg_arg_buffer(g->c, 0),
                                acg_arg_f32(0.5f)};
    const acg_access uses[] = {{g->a, 0, 0, ACG_ACCESS_READ},
                               {g->b, 0, 0, ACG_ACCESS_READ},
                               {g->c, 0, 0, ACG_ACCESS_WRITE},
                               {g->ws, 0, 0, ACG_ACCESS_READ_WRITE}};
    const float one = 1.0f, zero = 0.0f;
    TC_OK(acg_kernel_launch(g->s, g->fill, &dims, fill_args, 2));
    cublasStatus_t bs = cublasSgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, M, NC, K, &one,
                                    (const float *)(uintptr_t)cu_address(g->a), M,
                                    (const float *)(uintptr_t)cu_address(g->b), K, &zero,
                                    (float *)(uintptr_t)cu_address(g->c), M);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        fail_msg("cublasSgemm: %s", cublasGetStatusString(bs));
    }
    TC_OK(acg_stream_declare_foreign(g->s, "cublasSgemm", uses, 4));
    TC_OK(acg_kernel_launch(g->s, g->add, &dims, add_args, 3));
}

/* d after a replay of graph (or, with graph NULL, the step run eagerly), c and d zeroed first. */
static void run(gemm *g, acg_graph *graph, float *out) {
    TC_OK(acg_fill(g->s, g->c, 0, M * NC * sizeof(float), 0, 4));
    TC_OK(acg_fill(g->s, g->d, 0, M * NC * sizeof(float), 0, 4));
    if (graph != NULL) {
        TC_OK(acg_graph_launch(graph, g->s));
    } else {
        step(g);
    }
    TC_OK(acg_copy_d2h(g->s, out, g->d, 0, M * NC * sizeof(float)));
    TC_OK(acg_stream_synchronize(g->s));
}

/* Small integers in [-3, 3], seeded differently per matrix and input. */
static void integers(float *v, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        v[i] = (float)((int)((i * 5 + i / 7 + seed * 3) % 7) - 3);
    }
}

static void expect_product(const float *a, const float *b, const float *d) {
    for (int col = 0; col < NC; col++) {
        for (int row = 0; row < M; row++) {
            float sum = 0.0f;
            for (int k = 0; k < K; k++) {
                sum += a[k * M + row] * b[col * K + k];
            }
            if (d[col * M + row] != sum + 0.5f) {
                fail_msg("d[%d, %d] = %g, the product is %g", row, col, (double)d[col * M + row],
                         (double)(sum + 0.5f));
            }
        }
    }
}

/* The driver's own cuCtxSetCurrent, from the libcuda the backend loaded. */
static PFN_cuCtxSetCurrent_v4000 ctx_set_current(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    PFN_cuGetProcAddress_v12000 get = NULL;
    *(void **)&get = dlsym(h, "cuGetProcAddress_v2");
    assert_non_null(get);
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_int_equal(get("cuCtxSetCurrent", &fn, 4000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
                     CUDA_SUCCESS);
    assert_non_null(fn);
    dlclose(h); /* RTLD_NOLOAD took a reference */
    PFN_cuCtxSetCurrent_v4000 set = NULL;
    *(void **)&set = fn;
    return set;
}

static void test_cublas_in_graph(void **state) {
    (void)state;
    const char *test_driver = getenv("ACG_CUDA_DRIVER");
    if (test_driver != NULL && test_driver[0] != '\0') {
        tc_skip("cuBLAS needs a GPU and the real CUDA driver; ACG_CUDA_DRIVER names another "
                "(%s)",
                test_driver);
    }
    gemm g = {0};
    TC_OK(acg_device_open(tc_spec(), &g.dev));
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(g.dev, &nd));
    assert_int_equal(nd.kind, ACG_NATIVE_CUDA_CONTEXT);
    /* cuBLAS (through the runtime) takes the context current on the calling thread. */
    assert_int_equal(ctx_set_current()((CUcontext)nd.context), CUDA_SUCCESS);
    TC_OK(acg_stream_create(g.dev, &g.s));
    acg_native_handle ns = ACG_NATIVE_HANDLE_INIT;
    TC_OK(acg_stream_get_native(g.s, &ns));
    g.native = (CUstream)ns.handle;
    TC_OK(acg_kernel_get(g.dev, "fill_f32", &g.fill));
    TC_OK(acg_kernel_get(g.dev, "add_scalar_f32", &g.add));
    TC_OK(acg_buffer_alloc(g.dev, M * K * sizeof(float), &g.a));
    TC_OK(acg_buffer_alloc(g.dev, K * NC * sizeof(float), &g.b));
    TC_OK(acg_buffer_alloc(g.dev, M * NC * sizeof(float), &g.c));
    TC_OK(acg_buffer_alloc(g.dev, M * NC * sizeof(float), &g.d));
    TC_OK(acg_buffer_alloc(g.dev, WORKSPACE, &g.ws));
    cublasStatus_t bs = cublasCreate(&g.blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        fail_msg("cublasCreate: %s", cublasGetStatusString(bs));
    }
    /* The stream first: setting it resets the workspace to cuBLAS's own pool. A workspace of
     * acg's keeps the capture free of allocations. */
    assert_int_equal(cublasSetStream(g.blas, (cudaStream_t)g.native), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetWorkspace(g.blas, (void *)(uintptr_t)cu_address(g.ws), WORKSPACE),
                     CUBLAS_STATUS_SUCCESS);

    static float a[M * K], b[K * NC], eager[M * NC], replay[M * NC];
    integers(a, M * K, 1);
    integers(b, K * NC, 2);
    TC_OK(acg_copy_h2d(g.s, g.a, 0, a, sizeof a));
    TC_OK(acg_copy_h2d(g.s, g.b, 0, b, sizeof b));
    run(&g, NULL, eager);
    expect_product(a, b, eager);

    TC_OK(acg_stream_begin_capture(g.s, NULL));
    step(&g);
    acg_graph *graph = NULL;
    TC_OK(acg_stream_end_capture(g.s, &graph));
    run(&g, graph, replay);
    TC_BYTES_EQUAL(replay, eager, sizeof eager);

    /* Another input, written in place: the replay reads it. */
    integers(a, M * K, 3);
    TC_OK(acg_copy_h2d(g.s, g.a, 0, a, sizeof a));
    run(&g, graph, replay);
    run(&g, NULL, eager);
    TC_BYTES_EQUAL(replay, eager, sizeof eager);
    expect_product(a, b, replay);
    print_message("cublas: a %dx%dx%d cublasSgemm on acg buffers in an acg graph: each replay "
                  "equals the eager step bit for bit, and the exact product\n",
                  M, NC, K);

    TC_OK(acg_graph_destroy(graph));
    assert_int_equal(cublasDestroy(g.blas), CUBLAS_STATUS_SUCCESS);
    acg_buffer *bufs[] = {g.a, g.b, g.c, g.d, g.ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        TC_OK(acg_buffer_free(bufs[i]));
    }
    TC_OK(acg_stream_destroy(g.s));
    TC_OK(acg_device_close(g.dev));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cublas_in_graph),
};
TC_MAIN("test_cuda_cublas", tests)
