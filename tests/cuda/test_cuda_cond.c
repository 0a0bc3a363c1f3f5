/* test_cuda_cond.c — acg's CUDA test driver's conditional nodes (tests/cuda_driver/fake_cond.c),
 * called through its entry points as the cuda backend calls them (cuGetProcAddress), on the
 * primary context of a device acg opened:
 *   - a WHILE loop built as the backend builds one (a counter zeroed, the node added to the
 *     capturing graph, its body captured on a stream of its own, acg_loop_next last) runs its
 *     body until the counter reaches max or the condition word is 0, and at least once;
 *   - a handle's default is given again at each launch with CU_GRAPH_COND_ASSIGN_DEFAULT, its
 *     value kept from the last launch without; once per launch, so a nested loop's body runs
 *     again only when a node of the outer body (acg_loop_begin) sets its handle again;
 *   - IF (with and without an else body) and SWITCH, built with cuGraphAddNode;
 *   - CUDA's rules: what a body may hold, a graph with conditional nodes neither cloned, updated
 *     nor instantiated twice at once, a handle taken by one node of its graph (or a body in it),
 *     the body owned by its node, unused handles, and each parameter check;
 *   - cuStreamBeginCaptureToGraph and cuStreamUpdateCaptureDependencies, and a capture into a
 *     graph that is then destroyed;
 *   - the device code the driver emulates: its faults (outside a graph, a foreign handle, a word
 *     outside device memory, a loop that never ends) and its launch checks;
 *   - every new entry point's injected failure, and no driver object left after each case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <acg/acg.h>

#include "backend_scene.h"
#include "common.h"
#include "cuda_native.h"

#define N 256

/* A driver call's result, compared as numbers (cmocka prints both). */
#define CU_EXPECT(want, call) assert_int_equal((int)(call), (int)(want))
#define CU_OK(call) CU_EXPECT(CUDA_SUCCESS, call)

static bs_driver drv = CU_TEST_DRIVER;

/* ---- the driver's entry points ------------------------------------------------------------- */

static struct {
    PFN_cuCtxSetCurrent_v4000 set_current;
    PFN_cuMemAlloc_v3020 alloc;
    PFN_cuMemFree_v3020 release;
    PFN_cuMemsetD32Async_v3020 memset32;
    PFN_cuMemcpyDtoHAsync_v3020 d2h;
    PFN_cuStreamCreate_v2000 stream_create;
    PFN_cuStreamDestroy_v4000 stream_destroy;
    PFN_cuStreamSynchronize_v2000 sync;
    PFN_cuStreamBeginCapture_v10010 begin;
    PFN_cuStreamEndCapture_v10000 end;
    PFN_cuStreamIsCapturing_v10000 is_capturing;
    PFN_cuStreamGetCaptureInfo_v12030 info;
    PFN_cuLaunchKernel_v4000 launch_kernel;
    PFN_cuLaunchHostFunc_v10000 host_func;
    PFN_cuLibraryLoadData_v12000 load;
    PFN_cuLibraryGetKernel_v12000 get_kernel;
    PFN_cuLibraryUnload_v12000 unload;
    PFN_cuFuncGetParamInfo_v12040 param_info;
    PFN_cuGraphCreate_v10000 graph_create;
    PFN_cuGraphDestroy_v10000 graph_destroy;
    PFN_cuGraphClone_v10000 clone;
    PFN_cuGraphAddKernelNode_v12000 add_kernel;
    PFN_cuGraphAddMemcpyNode_v10000 add_memcpy;
    PFN_cuGraphAddHostNode_v10000 add_host;
    PFN_cuGraphInstantiateWithFlags_v11040 instantiate;
    PFN_cuGraphUpload_v11010 upload;
    PFN_cuGraphLaunch_v10000 launch;
    PFN_cuGraphExecDestroy_v10000 exec_destroy;
    PFN_cuGraphExecUpdate_v12000 exec_update;
    PFN_cuGraphExecKernelNodeSetParams_v12000 exec_set;
    PFN_cuGraphKernelNodeSetParams_v12000 node_set;
    PFN_cuGraphConditionalHandleCreate_v12030 handle_create;
    PFN_cuGraphAddNode_v12030 add_node;
    PFN_cuStreamUpdateCaptureDependencies_v12030 update_deps;
    PFN_cuStreamBeginCaptureToGraph_v12030 begin_to;
} cu;

#define BIND(field, name, version) *(void **)&cu.field = cu_entry(&drv, #name, version)

static void bind_entry_points(void) {
    BIND(set_current, cuCtxSetCurrent, 4000);
    BIND(alloc, cuMemAlloc, 3020);
    BIND(release, cuMemFree, 3020);
    BIND(memset32, cuMemsetD32Async, 3020);
    BIND(d2h, cuMemcpyDtoHAsync, 3020);
    BIND(stream_create, cuStreamCreate, 2000);
    BIND(stream_destroy, cuStreamDestroy, 4000);
    BIND(sync, cuStreamSynchronize, 2000);
    BIND(begin, cuStreamBeginCapture, 10010);
    BIND(end, cuStreamEndCapture, 10000);
    BIND(is_capturing, cuStreamIsCapturing, 10000);
    BIND(info, cuStreamGetCaptureInfo, 12030);
    BIND(launch_kernel, cuLaunchKernel, 4000);
    BIND(host_func, cuLaunchHostFunc, 10000);
    BIND(load, cuLibraryLoadData, 12000);
    BIND(get_kernel, cuLibraryGetKernel, 12000);
    BIND(unload, cuLibraryUnload, 12000);
    BIND(param_info, cuFuncGetParamInfo, 12040);
    BIND(graph_create, cuGraphCreate, 10000);
    BIND(graph_destroy, cuGraphDestroy, 10000);
    BIND(clone, cuGraphClone, 10000);
    BIND(add_kernel, cuGraphAddKernelNode, 12000);
    BIND(add_memcpy, cuGraphAddMemcpyNode, 10000);
    BIND(add_host, cuGraphAddHostNode, 10000);
    BIND(instantiate, cuGraphInstantiateWithFlags, 11040);
    BIND(upload, cuGraphUpload, 11010);
    BIND(launch, cuGraphLaunch, 10000);
    BIND(exec_destroy, cuGraphExecDestroy, 10000);
    BIND(exec_update, cuGraphExecUpdate, 12000);
    BIND(exec_set, cuGraphExecKernelNodeSetParams, 12000);
    BIND(node_set, cuGraphKernelNodeSetParams, 12000);
    BIND(handle_create, cuGraphConditionalHandleCreate, 12030);
    BIND(add_node, cuGraphAddNode, 12030);
    BIND(update_deps, cuStreamUpdateCaptureDependencies, 12030);
    BIND(begin_to, cuStreamBeginCaptureToGraph, 12030);
}

/* ---- the image and its kernels ------------------------------------------------------------- */

/* Images as the test driver reads them (fake_kernel.c): the fatbin magic, then one line per
 * function with its parameters' sizes. acg_loop_next and acg_loop_begin are the driver's own
 * emulations (no definition); tk_add runs acg's definition below: y[i] += v. */
#define TEST_IMAGE(lines)                                                                          \
    "\x50\xed\x55\xba"                                                                             \
    "acgtest-cuda-image\n" lines

static const char image[] = TEST_IMAGE("acg_loop_next 8 8 8 4\n"
                                       "acg_loop_begin 8 8\n"
                                       "tk_add 8 4 4 4 4\n");
/* A function of the emulated name with other parameters is not emulated. */
static const char other_image[] = TEST_IMAGE("acg_loop_next 8 8 8\n");

static void add_cpu(const acg_cpu_arg *a, const uint32_t global[3]) {
    float *y = a[0].p;
    for (uint32_t i = 0; i < global[0]; i++) {
        y[i] += a[1].f32;
    }
}

static acg_kernel_desc add_definition(void) {
    acg_kernel_desc d = ACG_KERNEL_DESC_INIT;
    d.name = "tc_cond_add";
    d.n_args = 2;
    d.types[0] = ACG_ARG_BUFFER;
    d.types[1] = ACG_ARG_F32;
    d.bytes_per_item[0] = 4;
    d.dims = 1;
    d.flags = ACG_KERNEL_ELEMENTWISE;
    d.cpu.fn = add_cpu;
    d.cuda.fatbin = image;
    d.cuda.size = sizeof image;
    d.cuda.name = "tk_add";
    return d;
}

/* ---- the fixture --------------------------------------------------------------------------- */

typedef struct fx {
    acg_device *dev;
    CUcontext ctx;
    CUlibrary lib;
    CUkernel next, begin, add;
    CUstream s;
    CUdeviceptr acc;  /* (N) floats the bodies add to */
    CUdeviceptr cond; /* the loops' condition word */
    long live;        /* driver objects once the device was open */
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    acg_kernel_desc d = add_definition();
    TC_OK(acg_kernel_register(&d));
    TC_OK(acg_device_open("cuda", &f->dev));
    bs_driver_bind(&drv);
    bind_entry_points();
    acg_native_device nd = ACG_NATIVE_DEVICE_INIT;
    TC_OK(acg_device_get_native(f->dev, &nd));
    f->ctx = nd.context;
    CU_OK(cu.set_current(f->ctx));
    f->live = drv.live();
    CU_OK(cu.load(&f->lib, image, NULL, NULL, 0, NULL, NULL, 0));
    CU_OK(cu.get_kernel(&f->next, f->lib, "acg_loop_next"));
    CU_OK(cu.get_kernel(&f->begin, f->lib, "acg_loop_begin"));
    CU_OK(cu.get_kernel(&f->add, f->lib, "tk_add"));
    CU_OK(cu.stream_create(&f->s, CU_STREAM_NON_BLOCKING));
    CU_OK(cu.alloc(&f->acc, N * sizeof(float)));
    CU_OK(cu.alloc(&f->cond, sizeof(unsigned)));
    CU_OK(cu.memset32(f->acc, 0, N, f->s));
    CU_OK(cu.memset32(f->cond, 1, 1, f->s));
    CU_OK(cu.sync(f->s));
    *state = f;
    return 0;
}

/* Frees what the fixture made: no driver object is left; the device closes. */
static int teardown(void **state) {
    fx *f = *state;
    CU_OK(cu.release(f->cond));
    CU_OK(cu.release(f->acc));
    CU_OK(cu.stream_destroy(f->s));
    CU_OK(cu.unload(f->lib));
    assert_int_equal(drv.live(), f->live);
    TC_OK(acg_device_close(f->dev));
    TC_OK(acg_kernel_unregister("tc_cond_add"));
    free(f);
    return 0;
}

/* ---- launches and what they leave ---------------------------------------------------------- */

/* acc += v on `on`, as acg's launches are: the arguments, then the global sizes. */
static CUresult launch_add(fx *f, CUstream on, float v) {
    unsigned n = N, one = 1;
    void *params[] = {&f->acc, &v, &n, &one, &one};
    return cu.launch_kernel((CUfunction)(void *)f->add, 1, 1, 1, N, 1, 1, 0, on, params, NULL);
}

/* acg_loop_next(h, cond, counter, max) on `on`, as the backend launches it. */
static CUresult launch_next(fx *f, CUstream on, CUgraphConditionalHandle h, CUdeviceptr cond,
                            CUdeviceptr counter, unsigned max) {
    void *params[] = {&h, &cond, &counter, &max};
    return cu.launch_kernel((CUfunction)(void *)f->next, 1, 1, 1, 1, 1, 1, 0, on, params, NULL);
}

static CUresult launch_begin(fx *f, CUstream on, CUgraphConditionalHandle h, CUdeviceptr counter) {
    void *params[] = {&h, &counter};
    return cu.launch_kernel((CUfunction)(void *)f->begin, 1, 1, 1, 1, 1, 1, 0, on, params, NULL);
}

/* Asserts that every float of acc is `want`. */
static void expect_acc(fx *f, float want) {
    float got[N];
    CU_OK(cu.d2h(got, f->acc, sizeof got, f->s));
    CU_OK(cu.sync(f->s));
    for (int i = 0; i < N; i++) {
        assert_true(got[i] == want);
    }
}

static unsigned read_word(fx *f, CUdeviceptr p) {
    unsigned v = 0;
    CU_OK(cu.d2h(&v, p, sizeof v, f->s));
    CU_OK(cu.sync(f->s));
    return v;
}

static void set_word(fx *f, CUdeviceptr p, unsigned v) {
    CU_OK(cu.memset32(p, v, 1, f->s));
    CU_OK(cu.sync(f->s));
}

/* Launches x `times` times on the fixture's stream and waits. */
static void run(fx *f, CUgraphExec x, int times) {
    for (int i = 0; i < times; i++) {
        CU_OK(cu.launch(x, f->s));
    }
    CU_OK(cu.sync(f->s));
}

/* A kernel node's parameters for acc += *v. */
static CUgraphNodeParams kernel_params(fx *f, void **params, float *v) {
    static unsigned n = N, one = 1;
    params[0] = &f->acc;
    params[1] = v;
    params[2] = &n;
    params[3] = &one;
    params[4] = &one;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = (CUfunction)(void *)f->add;
    p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = N;
    p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = params;
    return p;
}

static CUgraphNodeParams cond_params(fx *f, CUgraphConditionalHandle h,
                                     CUgraphConditionalNodeType type, unsigned size) {
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    p.conditional.ctx = f->ctx;
    return p;
}

/* ---- a loop, built as the backend builds one ----------------------------------------------- */

typedef struct loop {
    CUgraphConditionalHandle h;
    CUdeviceptr counter;
    CUgraphNode node; /* the WHILE node */
    CUgraph graph;    /* the graph holding it */
    CUgraph body;
    CUstream inner; /* capturing the body */
} loop;

/* The capture info of `on`: its graph, and its single dependency (NULL when it has none). */
static CUgraph capture_graph(CUstream on, CUgraphNode *dep, size_t *n) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    CU_OK(cu.info(on, &status, NULL, &g, &deps, &edges, n));
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    if (dep != NULL) {
        *dep = *n > 0 ? deps[0] : NULL;
    }
    return g;
}

/* On `on`, capturing: the loop's counter zeroed (a memset, or with begin acg_loop_begin, which
 * also sets the handle to 1), then the WHILE node after what `on` captured so far, which then
 * depends on it; the body's capture begins on a stream of its own. */
static void loop_open(fx *f, CUstream on, loop *l, unsigned flags, bool begin) {
    memset(l, 0, sizeof *l);
    CU_OK(cu.alloc(&l->counter, sizeof(unsigned)));
    if (!begin) {
        CU_OK(cu.memset32(l->counter, 0, 1, on));
    }
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CU_OK(cu.info(on, &status, NULL, &l->graph, &deps, &edges, &n));
    CU_OK(cu.handle_create(&l->h, l->graph, f->ctx, 1, flags));
    if (begin) {
        CU_OK(launch_begin(f, on, l->h, l->counter));
        CU_OK(cu.info(on, &status, NULL, &l->graph, &deps, &edges, &n));
    }
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.handle = l->h;
    p.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    p.conditional.size = 1;
    p.conditional.ctx = f->ctx;
    CU_OK(cu.add_node(&l->node, l->graph, deps, edges, n, &p));
    assert_non_null(p.conditional.phGraph_out);
    l->body = p.conditional.phGraph_out[0];
    assert_non_null(l->body);
    CU_OK(cu.update_deps(on, &l->node, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CUgraphNode dep = NULL;
    assert_ptr_equal(capture_graph(on, &dep, &n), l->graph);
    assert_int_equal(n, 1);
    assert_ptr_equal(dep, l->node);
    CU_OK(cu.stream_create(&l->inner, CU_STREAM_NON_BLOCKING));
    CU_OK(cu.begin_to(l->inner, l->body, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
}

/* The body's last node, acg_loop_next, then the end of its capture, which gives the body back
 * (no new graph: the driver's objects stay as they were). */
static void loop_close(fx *f, loop *l, unsigned max) {
    CU_OK(launch_next(f, l->inner, l->h, f->cond, l->counter, max));
    long live = drv.live();
    CUgraph out = NULL;
    CU_OK(cu.end(l->inner, &out));
    assert_ptr_equal(out, l->body);
    assert_int_equal(drv.live(), live);
    CU_OK(cu.stream_destroy(l->inner));
}

/* A graph of one loop on the fixture's stream: body acc += 1 (*body_add: that node), up to max
 * runs, then acc += 100 after it (*after: that node). */
static CUgraph one_loop(fx *f, loop *l, unsigned flags, unsigned max, CUgraphNode *body_add,
                        CUgraphNode *after) {
    CU_OK(cu.begin(f->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    loop_open(f, f->s, l, flags, false);
    CU_OK(launch_add(f, l->inner, 1.0f));
    size_t n = 0;
    CUgraphNode dep = NULL;
    assert_ptr_equal(capture_graph(l->inner, &dep, &n), l->body); /* the kernel just added */
    assert_int_equal(n, 1);
    assert_non_null(dep);
    assert_ptr_not_equal(dep, l->node);
    if (body_add != NULL) {
        *body_add = dep;
    }
    loop_close(f, l, max);
    CU_OK(launch_add(f, f->s, 100.0f));
    capture_graph(f->s, after, &n);
    assert_int_equal(n, 1);
    CUgraph g = NULL;
    CU_OK(cu.end(f->s, &g));
    assert_ptr_equal(g, l->graph);
    return g;
}

/* ---- loops ---------------------------------------------------------------------------------- */

/* The body runs max times per launch while the condition word is set, once when it is not
 * (the handle's default makes it a do-while); the counter says how many runs. A graph with a
 * conditional node is neither cloned, updated, nor instantiated again while its exec lives;
 * its body is its node's. The node after the loop takes new parameters in the exec. */
static void test_while_loop(void **state) {
    fx *f = *state;
    loop l;
    CUgraphNode body_add = NULL, after = NULL;
    CUgraph g = one_loop(f, &l, CU_GRAPH_COND_ASSIGN_DEFAULT, 5, &body_add, &after);
    CUgraphExec x = NULL;
    CU_OK(cu.instantiate(&x, g, 0));
    CU_OK(cu.upload(x, f->s));
    run(f, x, 3);
    expect_acc(f, 3 * (5 + 100));
    assert_int_equal(read_word(f, l.counter), 5);
    set_word(f, f->cond, 0);
    run(f, x, 1);
    expect_acc(f, 3 * 105 + 101);
    assert_int_equal(read_word(f, l.counter), 1);

    /* In the exec, the node after the loop adds 200 from now on. */
    float v = 200.0f;
    void *params[5];
    CUgraphNodeParams kp = kernel_params(f, params, &v);
    CU_OK(cu.exec_set(x, after, (const CUDA_KERNEL_NODE_PARAMS_v2 *)&kp.kernel));
    set_word(f, f->cond, 1);
    run(f, x, 1);
    expect_acc(f, 3 * 105 + 101 + 205);

    CUgraph copy = NULL;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cu.clone(&copy, g));
    assert_null(copy);
    CUgraphExec x2 = NULL;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.instantiate(&x2, g, 0));
    CUgraphExecUpdateResultInfo info;
    CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cu.exec_update(x, g, &info));
    assert_int_equal(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
    assert_ptr_equal(info.errorNode, l.node);
    /* The body is part of g. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.graph_destroy(l.body));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.instantiate(&x2, l.body, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.clone(&copy, l.body));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.exec_update(x, l.body, &info));
    /* A body's kernel node takes new parameters in the graph (in the exec, it is not named). */
    v = 2.0f;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cu.exec_set(x, body_add, (const CUDA_KERNEL_NODE_PARAMS_v2 *)&kp.kernel));
    CU_OK(cu.node_set(body_add, (const CUDA_KERNEL_NODE_PARAMS_v2 *)&kp.kernel));
    CU_OK(cu.exec_destroy(x));

    /* One exec at a time: once it is gone, another, with the body's new parameters. */
    CU_OK(cu.instantiate(&x2, g, 0));
    run(f, x2, 1);
    expect_acc(f, 3 * 105 + 101 + 205 + 5 * 2 + 100);
    CU_OK(cu.exec_destroy(x2));
    CU_OK(cu.graph_destroy(g));
    CU_OK(cu.release(l.counter));
}

/* With CU_GRAPH_COND_ASSIGN_DEFAULT every launch starts the loop again; without, the value the
 * last launch left (0) stays, and the body no longer runs. Each exec keeps its own values. */
static void test_assign_default(void **state) {
    fx *f = *state;
    loop la, lk;
    CUgraph ga = one_loop(f, &la, CU_GRAPH_COND_ASSIGN_DEFAULT, 3, NULL, NULL);
    CUgraph gk = one_loop(f, &lk, 0, 3, NULL, NULL);
    CUgraphExec xa = NULL, xk = NULL;
    CU_OK(cu.instantiate(&xa, ga, 0));
    CU_OK(cu.instantiate(&xk, gk, 0));
    run(f, xa, 2);
    expect_acc(f, 2 * (3 + 100));
    run(f, xk, 2);
    expect_acc(f, 2 * 103 + 103 + 100); /* the second launch skips the body */
    assert_int_equal(read_word(f, lk.counter), 0);
    run(f, xa, 1); /* the other exec's value is its own */
    expect_acc(f, 3 * 103 + 203);
    CU_OK(cu.exec_destroy(xk));
    CU_OK(cu.exec_destroy(xa));
    CU_OK(cu.graph_destroy(gk));
    CU_OK(cu.graph_destroy(ga));
    CU_OK(cu.release(lk.counter));
    CU_OK(cu.release(la.counter));
}

/* A loop inside a loop's body, built as the backend builds it (steps 1-6 with the body's stream
 * capturing): the inner handle is made in the outer body. Its default is given once per launch,
 * so after the first outer run its value is 0 and its body no longer runs: 4 additions, not
 * 3 x 4. With acg_loop_begin before the inner node (zeroing its counter and setting its handle)
 * every outer run runs it again. */
static void nested(fx *f, bool begin, float want) {
    loop outer, inner;
    CU_OK(cu.begin(f->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    loop_open(f, f->s, &outer, CU_GRAPH_COND_ASSIGN_DEFAULT, false);
    loop_open(f, outer.inner, &inner, CU_GRAPH_COND_ASSIGN_DEFAULT, begin);
    assert_ptr_equal(inner.graph, outer.body);
    CU_OK(launch_add(f, inner.inner, 1.0f));
    loop_close(f, &inner, 4);
    loop_close(f, &outer, 3);
    CUgraph g = NULL;
    CU_OK(cu.end(f->s, &g));
    CUgraphExec x = NULL;
    CU_OK(cu.instantiate(&x, g, 0));
    CU_OK(cu.memset32(f->acc, 0, N, f->s));
    run(f, x, 2);
    expect_acc(f, 2 * want);
    assert_int_equal(read_word(f, outer.counter), 3);
    assert_int_equal(read_word(f, inner.counter), begin ? 4 : 0);
    CU_OK(cu.exec_destroy(x));
    CU_OK(cu.graph_destroy(g));
    CU_OK(cu.release(inner.counter));
    CU_OK(cu.release(outer.counter));
}

static void test_nested(void **state) {
    fx *f = *state;
    nested(f, false, 4);
    nested(f, true, 12);
}

/* ---- IF and SWITCH, and cuGraphAddNode's other types ---------------------------------------- */

static int host_calls;
static void count_host(void *data) {
    (void)data;
    host_calls++;
}

/* A graph: a host function, an empty node, then a conditional node of `type` with `size`
 * bodies whose handle's default is `value`; body i adds i + 1 (a kernel node), and body 1 of an
 * IF also copies acc to itself (a memcpy node) and fills a word (a memset node). Its launch's
 * sum. */
static float conditional(fx *f, CUgraphConditionalNodeType type, unsigned size, unsigned value) {
    CUgraph g = NULL;
    CU_OK(cu.graph_create(&g, 0));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_HOST;
    p.host.fn = count_host;
    CUgraphNode host = NULL, empty = NULL, node = NULL, body_node = NULL;
    CU_OK(cu.add_node(&host, g, NULL, NULL, 0, &p));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CU_OK(cu.add_node(&empty, g, &host, NULL, 1, &p));
    CUgraphConditionalHandle h = 0;
    CU_OK(cu.handle_create(&h, g, NULL, value, CU_GRAPH_COND_ASSIGN_DEFAULT));
    p = cond_params(f, h, type, size);
    p.conditional.ctx = NULL; /* the current context */
    CU_OK(cu.add_node(&node, g, &empty, NULL, 1, &p));
    CUgraph *bodies = p.conditional.phGraph_out;
    float adds[4] = {1, 2, 3, 4};
    void *params[4][5];
    for (unsigned i = 0; i < size; i++) {
        CUgraphNodeParams k = kernel_params(f, params[i], &adds[i]);
        CU_OK(cu.add_node(&body_node, bodies[i], NULL, NULL, 0, &k));
    }
    if (type == CU_GRAPH_COND_TYPE_IF && size == 2) {
        CUgraphNodeParams c;
        memset(&c, 0, sizeof c);
        c.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        c.memcpy.copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.memcpy.copyParams.srcDevice = f->acc;
        c.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.memcpy.copyParams.dstDevice = f->acc;
        c.memcpy.copyParams.WidthInBytes = N * sizeof(float);
        c.memcpy.copyParams.Height = c.memcpy.copyParams.Depth = 1;
        CU_OK(cu.add_node(&body_node, bodies[1], &body_node, NULL, 1, &c));
        memset(&c, 0, sizeof c);
        c.type = CU_GRAPH_NODE_TYPE_MEMSET;
        c.memset.dst = f->cond;
        c.memset.value = 1;
        c.memset.elementSize = 4;
        c.memset.width = c.memset.height = 1;
        CU_OK(cu.add_node(&body_node, bodies[1], &body_node, NULL, 1, &c));
    }
    CUgraphExec x = NULL;
    CU_OK(cu.instantiate(&x, g, 0));
    float got[N];
    CU_OK(cu.memset32(f->acc, 0, N, f->s));
    int calls = host_calls;
    run(f, x, 1);
    assert_int_equal(host_calls, calls + 1);
    CU_OK(cu.d2h(got, f->acc, sizeof got, f->s));
    CU_OK(cu.sync(f->s));
    CU_OK(cu.exec_destroy(x));
    CU_OK(cu.graph_destroy(g));
    return got[0];
}

static void test_if_switch(void **state) {
    fx *f = *state;
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_IF, 1, 1) == 1);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_IF, 1, 0) == 0);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_IF, 2, 7) == 1);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_IF, 2, 0) == 2);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_SWITCH, 3, 2) == 3);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_SWITCH, 3, 0) == 1);
    assert_true(conditional(f, CU_GRAPH_COND_TYPE_SWITCH, 3, 3) == 0);
}

/* ---- CUDA's rules --------------------------------------------------------------------------- */

/* A graph with a WHILE node: *body its body, *h its handle. */
static CUgraph while_graph(fx *f, CUgraph *body, CUgraphConditionalHandle *h, CUgraphNode *node) {
    CUgraph g = NULL;
    CU_OK(cu.graph_create(&g, 0));
    CU_OK(cu.handle_create(h, g, f->ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams p = cond_params(f, *h, CU_GRAPH_COND_TYPE_WHILE, 1);
    CU_OK(cu.add_node(node, g, NULL, NULL, 0, &p));
    *body = p.conditional.phGraph_out[0];
    return g;
}

/* A body holds kernels, empty nodes, memsets, copies between device (or pinned) memory and
 * conditionals: a host node is refused, added or captured (which invalidates the capture). */
static void test_body_rules(void **state) {
    fx *f = *state;
    CUgraph body = NULL;
    CUgraphConditionalHandle h = 0;
    CUgraphNode node = NULL, added = NULL;
    CUgraph g = while_graph(f, &body, &h, &node);

    CUDA_HOST_NODE_PARAMS hp = {count_host, NULL};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_host(&added, body, NULL, 0, &hp));
    CU_OK(cu.add_host(&added, g, &node, 1, &hp)); /* outside a body: fine */
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_HOST;
    p.host.fn = count_host;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, body, NULL, NULL, 0, &p));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, body, NULL, NULL, 0, &p));
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cu.add_node(&added, g, NULL, NULL, 0, &p));
    /* A copy from pageable host memory, added to the body either way. */
    float host[N];
    CUDA_MEMCPY3D copy;
    memset(&copy, 0, sizeof copy);
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = host;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = f->acc;
    copy.WidthInBytes = sizeof host;
    copy.Height = copy.Depth = 1;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_memcpy(&added, body, NULL, 0, &copy, NULL));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    p.memcpy.copyParams = copy;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, body, NULL, NULL, 0, &p));
    copy.dstMemoryType = CU_MEMORYTYPE_HOST; /* copied the other way: the source side */
    copy.dstHost = host;
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = f->acc;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_memcpy(&added, body, NULL, 0, &copy, NULL));

    /* Captured into the body: a host function invalidates the capture, which still ends. */
    CUstream s2 = NULL;
    CU_OK(cu.stream_create(&s2, CU_STREAM_NON_BLOCKING));
    CU_OK(cu.begin_to(s2, body, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(launch_add(f, s2, 1.0f));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cu.host_func(s2, count_host, NULL));
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CU_OK(cu.is_capturing(s2, &status));
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph out = NULL;
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cu.end(s2, &out));
    assert_null(out);
    CU_OK(launch_add(f, s2, 1.0f)); /* eagerly again */
    CU_OK(cu.sync(s2));
    expect_acc(f, 1);
    CU_OK(cu.stream_destroy(s2));
    CU_OK(cu.graph_destroy(g));
}

/* Every refusal of cuGraphConditionalHandleCreate and cuGraphAddNode. */
static void test_node_refusals(void **state) {
    fx *f = *state;
    CUgraph body = NULL, other_body = NULL;
    CUgraphConditionalHandle h = 0, h2 = 0, other = 0, in_body = 0;
    CUgraphNode node = NULL, other_node = NULL, added = NULL;
    CUgraph g = while_graph(f, &body, &h, &node);
    CUgraph g2 = while_graph(f, &other_body, &other, &other_node);
    int bogus = 0;

    /* Handles. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.handle_create(NULL, g, f->ctx, 1, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.handle_create(&h2, g, f->ctx, 1, 2));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT,
              cu.handle_create(&h2, g, (CUcontext)(void *)&bogus, 1, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE,
              cu.handle_create(&h2, (CUgraph)(void *)&bogus, f->ctx, 1, 0));
    CU_OK(cu.handle_create(&h2, g, f->ctx, 0, 0));
    CU_OK(cu.handle_create(&in_body, body, f->ctx, 0, 0));

    /* Conditional nodes. */
    CUgraphNodeParams p = cond_params(f, 0x5eed, CU_GRAPH_COND_TYPE_WHILE, 1);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p)); /* no handle */
    p.conditional.handle = h; /* taken by node already */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.conditional.handle = other; /* another graph's */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.conditional.handle = in_body; /* a body's, in the graph holding it */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.conditional.handle = h2;
    p.conditional.ctx = (CUcontext)(void *)&bogus;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    static const struct {
        CUgraphConditionalNodeType type;
        unsigned size;
    } sizes[] = {{CU_GRAPH_COND_TYPE_WHILE, 2},     {CU_GRAPH_COND_TYPE_WHILE, 0},
                 {CU_GRAPH_COND_TYPE_IF, 3},        {CU_GRAPH_COND_TYPE_IF, 0},
                 {CU_GRAPH_COND_TYPE_SWITCH, 0},    {CU_GRAPH_COND_TYPE_SWITCH, 4097},
                 {(CUgraphConditionalNodeType)7, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        p = cond_params(f, h2, sizes[i].type, sizes[i].size);
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    }
    /* The graph's handle in its body, nested: fine; the body's own handle there too. */
    p = cond_params(f, h2, CU_GRAPH_COND_TYPE_IF, 1);
    CU_OK(cu.add_node(&added, body, NULL, NULL, 0, &p));
    p = cond_params(f, in_body, CU_GRAPH_COND_TYPE_IF, 1);
    CU_OK(cu.add_node(&added, body, NULL, NULL, 0, &p));

    /* Parameters' reserved and unused bytes. */
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EMPTY;
    p.reserved0[1] = 1;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.reserved0[1] = 0;
    p.reserved2 = 1;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.reserved2 = 0;
    p.reserved1[3] = 1;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.reserved1[3] = 0;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(NULL, g, NULL, NULL, 0, &p));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE,
              cu.add_node(&added, (CUgraph)(void *)&bogus, NULL, NULL, 0, &p));

    /* Dependencies: of the graph, each once, edges without data. */
    CUgraphNode twice[2] = {node, node};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, twice, NULL, 2, &p));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, &other_node, NULL, 1, &p));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 1, &p));
    CUgraphEdgeData edge;
    memset(&edge, 0, sizeof edge);
    edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cu.add_node(&added, g, &node, &edge, 1, &p));
    memset(&edge, 0, sizeof edge);
    CU_OK(cu.add_node(&added, g, &node, &edge, 1, &p));

    /* The other types' parameters. */
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    p.memcpy.flags = 1;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.add_node(&added, g, NULL, NULL, 0, &p));
    p.memcpy.flags = 0;
    p.memcpy.copyCtx = (CUcontext)(void *)&bogus;
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cu.add_node(&added, g, NULL, NULL, 0, &p));
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEMSET;
    p.memset.ctx = (CUcontext)(void *)&bogus;
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cu.add_node(&added, g, NULL, NULL, 0, &p));

    /* A handle no node took: the graph is not instantiated. h2 and in_body were taken. */
    CUgraphExec x = NULL;
    CUgraphConditionalHandle unused = 0;
    CU_OK(cu.instantiate(&x, g, 0));
    CU_OK(cu.exec_destroy(x));
    CU_OK(cu.handle_create(&unused, other_body, f->ctx, 0, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.instantiate(&x, g2, 0));
    CU_OK(cu.graph_destroy(g2));
    CU_OK(cu.graph_destroy(g));
}

/* ---- capture into a graph ------------------------------------------------------------------- */

/* Work captured into a graph the caller holds, after the node given; the capture ends giving
 * it back (the out argument may be NULL). Its refusals, and cuStreamUpdateCaptureDependencies'. */
static void test_capture_to_graph(void **state) {
    fx *f = *state;
    CUgraph g = NULL, g2 = NULL, out = NULL;
    CU_OK(cu.graph_create(&g, 0));
    float one_f = 1.0f;
    void *params[5];
    CUgraphNodeParams kp = kernel_params(f, params, &one_f);
    CUgraphNode k = NULL;
    CU_OK(cu.add_kernel(&k, g, NULL, 0, (const CUDA_KERNEL_NODE_PARAMS_v2 *)&kp.kernel));
    CUstream s2 = NULL, s3 = NULL;
    CU_OK(cu.stream_create(&s2, CU_STREAM_NON_BLOCKING));
    CU_OK(cu.stream_create(&s3, CU_STREAM_NON_BLOCKING));

    CU_OK(cu.begin(f->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE,
              cu.begin_to(f->s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUgraph building = capture_graph(f->s, NULL, &(size_t){0});
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, /* a capture's graph */
              cu.begin_to(s2, building, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(launch_add(f, f->s, 1.0f));
    CU_OK(cu.end(f->s, &g2));
    CU_OK(cu.graph_destroy(g2));

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.begin_to(s2, g, &k, NULL, 1, (CUstreamCaptureMode)9));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cu.begin_to(s2, (CUgraph)(void *)&one_f, NULL, NULL, 0,
                                                     CU_STREAM_CAPTURE_MODE_RELAXED));
    CUgraphNode twice[2] = {k, k};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cu.begin_to(s2, g, twice, NULL, 2, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cu.begin_to(s2, g, &k, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUgraphNode dep = NULL;
    size_t n = 0;
    assert_ptr_equal(capture_graph(s2, &dep, &n), g);
    assert_int_equal(n, 1);
    assert_ptr_equal(dep, k);
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, /* another capture records into it */
              cu.begin_to(s3, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUgraphExec x = NULL;
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cu.instantiate(&x, g, 0));

    /* The stream's dependencies, set and added. */
    CU_OK(cu.update_deps(s2, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    capture_graph(s2, &dep, &n);
    assert_int_equal(n, 0);
    CU_OK(cu.update_deps(s2, &k, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    CU_OK(cu.update_deps(s2, &k, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    capture_graph(s2, &dep, &n);
    assert_int_equal(n, 1);
    assert_ptr_equal(dep, k);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.update_deps(s2, &k, NULL, 1, 7));
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE,
              cu.update_deps(s3, &k, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    CUgraph g3 = NULL;
    CUgraphNode foreign = NULL;
    CUgraphNodeParams ep;
    memset(&ep, 0, sizeof ep);
    ep.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CU_OK(cu.graph_create(&g3, 0));
    CU_OK(cu.add_node(&foreign, g3, NULL, NULL, 0, &ep));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, /* a node of another graph */
              cu.update_deps(s2, &foreign, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    CU_OK(cu.graph_destroy(g3));
    CU_OK(launch_add(f, s2, 2.0f));
    CU_OK(cu.end(s2, NULL));                               /* the caller has the graph */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.end(s2, NULL)); /* not capturing */

    CU_OK(cu.instantiate(&x, g, 0));
    run(f, x, 2);
    expect_acc(f, 2 * 3);
    CU_OK(cu.exec_destroy(x));

    /* A graph destroyed while a capture records into it: the capture is invalidated. */
    CU_OK(cu.graph_create(&g2, 0));
    CU_OK(cu.begin_to(s3, g2, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cu.graph_destroy(g2));
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CU_OK(cu.is_capturing(s3, &status));
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, launch_add(f, s3, 1.0f));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              cu.update_deps(s3, NULL, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cu.end(s3, &out));
    assert_null(out);

    /* The outer capture ended with a body's capture open: not instantiable until it ends; its
     * graph destroyed, the body's capture is invalidated. */
    loop l;
    CU_OK(cu.begin(f->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    loop_open(f, f->s, &l, CU_GRAPH_COND_ASSIGN_DEFAULT, false);
    CU_OK(cu.end(f->s, &g2));
    CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cu.instantiate(&x, g2, 0));
    CU_OK(launch_add(f, l.inner, 1.0f));
    CU_OK(cu.graph_destroy(g2));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
              launch_next(f, l.inner, l.h, f->cond, l.counter, 2));
    CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cu.end(l.inner, &out));
    CU_OK(cu.stream_destroy(l.inner));
    CU_OK(cu.release(l.counter));

    CU_OK(cu.stream_destroy(s3));
    CU_OK(cu.stream_destroy(s2));
    CU_OK(cu.graph_destroy(g));
}

/* ---- the emulated device code --------------------------------------------------------------- */

/* The stream's next synchronization reports `code`, a fault of the context; then cleared (as
 * acgtest_cuda_set_sticky allows) so the case goes on. */
static void expect_fault(fx *f, CUresult code) {
    CU_EXPECT(code, cu.sync(f->s));
    drv.fault(0, 0);
}

/* Faults of acg_loop_next and acg_loop_begin, as a GPU's would be: outside a graph, with a
 * handle of no graph it runs in, with a word outside device memory; a WHILE node whose value
 * never becomes 0. Their launches are one thread's; a function of their name with other
 * parameters is not emulated. */
static void test_device_code(void **state) {
    fx *f = *state;
    CUdeviceptr counter = 0;
    CU_OK(cu.alloc(&counter, sizeof(unsigned)));
    CU_OK(launch_next(f, f->s, 1, f->cond, counter, 5));
    expect_fault(f, CUDA_ERROR_LAUNCH_FAILED);
    CU_OK(launch_begin(f, f->s, 1, counter));
    expect_fault(f, CUDA_ERROR_LAUNCH_FAILED);
    CU_OK(launch_next(f, f->s, 1, 8, counter, 5));
    expect_fault(f, CUDA_ERROR_ILLEGAL_ADDRESS);
    CU_OK(launch_begin(f, f->s, 1, 8));
    expect_fault(f, CUDA_ERROR_ILLEGAL_ADDRESS);

    /* In a graph, a handle of another graph. */
    loop l;
    CU_OK(cu.begin(f->s, CU_STREAM_CAPTURE_MODE_RELAXED));
    loop_open(f, f->s, &l, CU_GRAPH_COND_ASSIGN_DEFAULT, false);
    CU_OK(launch_add(f, l.inner, 1.0f));
    CU_OK(launch_next(f, l.inner, l.h + 1000, f->cond, l.counter, 3));
    CUgraph out = NULL;
    CU_OK(cu.end(l.inner, &out));
    CU_OK(cu.stream_destroy(l.inner));
    CUgraph g = NULL;
    CU_OK(cu.end(f->s, &g));
    CUgraphExec x = NULL;
    CU_OK(cu.instantiate(&x, g, 0));
    CU_OK(cu.launch(x, f->s));
    expect_fault(f, CUDA_ERROR_LAUNCH_FAILED);
    expect_acc(f, 1); /* the body ran once, then the fault stopped the replay */
    CU_OK(cu.exec_destroy(x));
    CU_OK(cu.graph_destroy(g));
    CU_OK(cu.release(l.counter));

    /* A WHILE node whose body never sets its handle. */
    CUgraph body = NULL;
    CUgraphConditionalHandle h = 0;
    CUgraphNode node = NULL;
    g = while_graph(f, &body, &h, &node);
    CU_OK(cu.instantiate(&x, g, 0));
    CU_OK(cu.launch(x, f->s));
    expect_fault(f, CUDA_ERROR_LAUNCH_TIMEOUT);
    CU_OK(cu.exec_destroy(x));
    CU_OK(cu.graph_destroy(g));

    /* Launches: one thread, every parameter given. */
    CUdeviceptr cond = f->cond;
    unsigned max = 3;
    CUgraphConditionalHandle none = 1;
    void *params[] = {&none, &cond, &counter, &max};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.launch_kernel((CUfunction)(void *)f->next, 2, 1, 1, 1, 1,
                                                         1, 0, f->s, params, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.launch_kernel((CUfunction)(void *)f->next, 1, 1, 1, 1, 1,
                                                         32, 0, f->s, params, NULL));
    params[2] = NULL;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cu.launch_kernel((CUfunction)(void *)f->next, 1, 1, 1, 1, 1,
                                                         1, 0, f->s, params, NULL));
    size_t offset = 0, size = 0;
    CU_OK(cu.param_info((CUfunction)(void *)f->next, 3, &offset, &size));
    assert_int_equal(offset, 24);
    assert_int_equal(size, 4);
    CUlibrary lib = NULL;
    CUkernel k = NULL;
    CU_OK(cu.load(&lib, other_image, NULL, NULL, 0, NULL, NULL, 0));
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cu.get_kernel(&k, lib, "acg_loop_next"));
    CU_OK(cu.unload(lib));
    CU_OK(cu.release(counter));
}

/* ---- the entry points ----------------------------------------------------------------------- */

/* Each new entry point counts its calls and fails as armed, doing nothing else. */
static void test_injected(void **state) {
    fx *f = *state;
    static const char *const names[] = {"cuGraphConditionalHandleCreate", "cuGraphAddNode",
                                        "cuStreamUpdateCaptureDependencies",
                                        "cuStreamBeginCaptureToGraph"};
    CUgraph g = NULL;
    CU_OK(cu.graph_create(&g, 0));
    CUgraphConditionalHandle h = 0;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CUgraphNode node = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        unsigned long calls = drv.calls(names[i]);
        drv.inject(names[i], 1, CUDA_ERROR_NOT_PERMITTED);
        CUresult r = i == 0   ? cu.handle_create(&h, g, f->ctx, 1, 0)
                     : i == 1 ? cu.add_node(&node, g, NULL, NULL, 0, &p)
                     : i == 2 ? cu.update_deps(f->s, NULL, NULL, 0, 0)
                              : cu.begin_to(f->s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED);
        CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, r);
        assert_int_equal(drv.calls(names[i]), calls + 1);
    }
    assert_int_equal(h, 0);
    assert_null(node);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CU_OK(cu.is_capturing(f->s, &status));
    assert_int_equal(status, CU_STREAM_CAPTURE_STATUS_NONE);
    /* A graph whose bodies and handles are parts of it counts once. */
    long live = drv.live();
    CU_OK(cu.handle_create(&h, g, f->ctx, 1, 0));
    CUgraphNodeParams c = cond_params(f, h, CU_GRAPH_COND_TYPE_SWITCH, 3);
    CU_OK(cu.add_node(&node, g, NULL, NULL, 0, &c));
    assert_int_equal(drv.live(), live);
    CU_OK(cu.graph_destroy(g));
    assert_int_equal(drv.live(), live - 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
static const struct CMUnitTest tests[] = {
    T(test_while_loop),       T(test_assign_default), T(test_nested),
    T(test_if_switch),        T(test_body_rules),     T(test_node_refusals),
    T(test_capture_to_graph), T(test_device_code),    T(test_injected),
};
#undef T

BS_MAIN("cuda", NULL, "test_cuda_cond", tests)
