/* cuda.h — the cuda backend's internal interface.
 *
 * The driver is loaded at run time (dlopen of $ACG_CUDA_DRIVER, else libcuda.so.1) and every
 * entry point is resolved with cuGetProcAddress at the ABI version entry_points.h names, so one
 * build runs with or without a GPU and with older or newer drivers. Devices use their primary
 * context (the one cuBLAS and NCCL use), made current on the calling thread by every slot;
 * streams are non-blocking CUstreams, events CUevents without timing, buffers cuMemAlloc'd,
 * pinned memory cuMemHostAlloc'd. Kernels come from the fatbin of their definition, loaded once
 * per device and image with cuLibraryLoadData, their parameters checked against the definition
 * where the driver reports them (cuFuncGetParamInfo). Capture is CUDA's own stream capture
 * (graph.c): the core hands every captured piece of work to the normal slots and the driver
 * records it; each graph keeps the CUDA graph it replays, which an update from it starts from,
 * and the CUDA node of each of acg's kernel launches, which a per-node update rewrites. A device
 * fault is CUDA's sticky error, which every later call on the context returns until the
 * context goes with the device's close. Collectives are NCCL's, loaded at run time too
 * (nccl.c). */
#ifndef ACG_BACKENDS_CUDA_H
#define ACG_BACKENDS_CUDA_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>

#include "acg-backend.h"
#include "acg-layer.h"
#include "entry_points.h"

/* The loaded driver: its entry points (NULL where it lacks an optional one), what that
 * disables, and why the backend is unavailable when it is. Filled once, by the first probe. */
typedef struct cu_driver {
    void *handle;
    int version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
#define ACG_CU_FIELD_(name, ver, required) PFN_##name##_v##ver name;
    ACG_CUDA_ENTRY_POINTS(ACG_CU_FIELD_)
#undef ACG_CU_FIELD_
    bool capture;      /* stream capture, instantiation and launch */
    bool update;       /* cuGraphExecUpdate from a capture's own graph (a clone of it) or from
                          a graph built from the ledger */
    bool param_check;  /* a kernel's parameters are compared with its definition at load */
    bool node_update;  /* captured kernel nodes are found (cuStreamGetCaptureInfo) and set in
                          place (cuGraphExecKernelNodeSetParams), clones' too */
    bool loops;        /* conditional WHILE nodes (CUDA 12.4), their bodies captured
                          (cuStreamBeginCaptureToGraph), and acg's loop kernel built (loop.c) */
    bool test_driver;  /* acg's test driver (tests/cuda_driver): it pairs with acg's test NCCL */
    char missing[256]; /* the optional entry points this driver lacks */
    char reason[256];  /* why the backend cannot run, when it cannot */
} cu_driver;

extern cu_driver acg__cu;

/* Loads the driver (loader.c), resolves its entry points and initializes it, once per process
 * (cu_probe calls it once); false with acg__cu.reason set when the backend cannot run: no
 * driver, an old one, the toolkit's stub, cuInit failing. */
bool acg__cu_load_driver(void);

/* Calls entry point `name_` of the loaded driver and checks its result: ACG_OK on success,
 * else the status it maps to, with "<fn>: <name_> failed with <CUDA name> (<code>): <text>"
 * as this thread's error. */
#define CU(fn_, name_, ...) acg__cu_check(acg__cu.name_(__VA_ARGS__), fn_, #name_)

/* The status a CUDA result maps to, with the detail set (CUDA_SUCCESS: ACG_OK, nothing set).
 * Out of memory → ACG_ERR_OUT_OF_MEMORY; the sticky errors that leave the context unusable
 * (an illegal address or instruction, a launch failure or timeout, ECC, ...) →
 * ACG_ERR_DEVICE_LOST; the stream-capture errors (900-908) → ACG_ERR_CAPTURE_INVALIDATED; an
 * entry point the driver lacks → ACG_ERR_UNSUPPORTED; anything else → ACG_ERR_DEVICE. */
acg_status acg__cu_check(CUresult r, const char *fn, const char *call);

/* Whether r is one of the errors after which the context cannot be used again (CUDA calls them
 * sticky): every later call of the process on that context fails the same way. */
bool acg__cu_sticky(CUresult r);

/* Checks what a release returned (a free, a destroy, an unload), which has no caller to tell:
 * a failure is logged, never set as the thread's error, which still says why the caller's own
 * call failed. After a device fault every release reports the fault (CU_RELEASE). */
void acg__cu_release_check(CUresult r, const char *fn, const char *call);
#define CU_RELEASE(fn_, name_, ...) acg__cu_release_check(acg__cu.name_(__VA_ARGS__), fn_, #name_)

typedef struct cu_library {
    const void *image; /* a copy of the fatbin it was loaded from */
    size_t size;
    CUlibrary lib;
} cu_library;

typedef struct cu_device {
    int ordinal;
    CUdevice dev;
    CUcontext ctx;        /* the primary context, retained while open */
    CUevent probe;        /* never recorded: its query reports only the context's fault */
    pthread_mutex_t lock; /* the libraries */
    cu_library *libs;     /* (n_libs) one per distinct fatbin of the kernels loaded */
    uint32_t n_libs, cap_libs;
    CUlibrary loop_lib; /* acg's loop kernels (loop.c), loaded at the device's first loop */
    CUkernel loop_begin, loop_next;
} cu_device;

/* A loop open on a capturing stream (loop.c): its body is captured on a stream of its own. */
typedef struct cu_loop {
    CUstream outer; /* the stream's CUstream before the loop opened */
    CUgraphConditionalHandle handle;
    CUdeviceptr cond, counter;
    uint32_t max;
} cu_loop;

typedef struct cu_stream {
    cu_device *dev;
    /* Where the stream's work goes: its own CUstream, or, while a loop is open on it, the
     * stream capturing the innermost loop's body. */
    CUstream stream;
    /* The capture the stream records into, from capture_begin or capture_join to its end or
     * abort; NULL: none. Read by its launches (the device's lock held while it captures). */
    struct cu_recording *rec;
    cu_loop loops[ACG_MAX_LOOP_DEPTH]; /* (n_loops) open, outermost first */
    uint32_t n_loops;
} cu_stream;

/* A capture being recorded (graph.c). */
typedef struct cu_recording {
    cu_stream *origin;
    cu_stream **joined; /* (n_joined) the streams forked into the capture */
    uint32_t n_joined, cap_joined;
    CUgraphNode *nodes; /* (n_nodes) the node of each of acg's launches, in order (NULL for
                           one inside a loop's body) */
    uint32_t n_nodes, cap_nodes;
    CUdeviceptr *counters; /* (n_counters) each loop's run counter, the exec's once it ends */
    uint32_t n_counters, cap_counters;
} cu_recording;

typedef struct cu_kernel {
    CUkernel kern;
    const acg__kernel_def *def; /* outlives the kernel */
} cu_kernel;

typedef struct cu_exec {
    cu_device *dev;
    CUgraphExec exec;
    /* What exec replays, as a CUDA graph: the capture's own (foreign work and NCCL's nodes
     * included), or the graph its last update gave it, with every per-node update applied. An
     * update from this exec starts from a clone of it. */
    CUgraph graph;
    /* (n_nodes) graph's node of each of acg's kernel launches, in the order of the
     * description's kernel nodes (NCCL's and foreign kernels are not among them); none without
     * acg__cu.node_update. */
    CUgraphNode *nodes;
    uint32_t n_nodes;
    /* The graph exec was instantiated from, once an update in place gave it another: CUDA
     * names exec's nodes by that graph's nodes (inst_nodes, as `nodes`), so it is kept. NULL:
     * graph is that graph. */
    CUgraph inst;
    CUgraphNode *inst_nodes;
    CUdeviceptr *counters; /* (n_counters) its loops' run counters, freed with it */
    uint32_t n_counters;
    bool loops; /* graph holds conditional nodes: CUDA neither clones nor re-instantiates it */
} cu_exec;

/* The core's backend types are these structs (device memory is the CUdeviceptr itself); these
 * helpers are the only casts between them. */
static inline cu_device *acg__cu_dev(acg__bk_device *d) { return (cu_device *)d; }
static inline acg__bk_device *acg__cu_bk_dev(cu_device *d) { return (acg__bk_device *)d; }
static inline cu_stream *acg__cu_stream(acg__bk_stream *s) { return (cu_stream *)s; }
static inline acg__bk_stream *acg__cu_bk_stream(cu_stream *s) { return (acg__bk_stream *)s; }
static inline cu_kernel *acg__cu_kernel(acg__bk_kernel *k) { return (cu_kernel *)k; }
static inline acg__bk_kernel *acg__cu_bk_kernel(cu_kernel *k) { return (acg__bk_kernel *)k; }
static inline cu_exec *acg__cu_exec(acg__bk_exec *e) { return (cu_exec *)e; }
static inline acg__bk_exec *acg__cu_bk_exec(cu_exec *e) { return (acg__bk_exec *)e; }
static inline CUdeviceptr acg__cu_mem(const acg__bk_mem *m) { return (CUdeviceptr)(uintptr_t)m; }
static inline acg__bk_mem *acg__cu_bk_mem(CUdeviceptr p) { return (acg__bk_mem *)(uintptr_t)p; }

/* Makes the device's primary context current on this thread (every slot does, first). */
acg_status acg__cu_enter(cu_device *d, const char *fn);
/* The same for a release, which tries its call even when this fails (CU_RELEASE). */
void acg__cu_enter_release(cu_device *d, const char *fn);

/* Whether the device's context holds a fault (a sticky error), asked without waiting for any
 * work and without setting the thread's error. */
bool acg__cu_faulted(cu_device *d);
/* st, or ACG_ERR_DEVICE_LOST naming the context's fault when st is ACG_ERR_DEVICE and the
 * device holds one: for failures another library (NCCL) reports in its own terms. */
acg_status acg__cu_fault_or(cu_device *d, acg_status st, const char *fn);

/* A launch's CUDA shape and parameters: the acg arguments (a buffer as one CUdeviceptr with its
 * offset added), then the global sizes x, y, z as three unsigned ints, the convention of every
 * acg CUDA kernel. values holds the storage params points into. */
typedef struct cu_launch {
    unsigned grid[3], block[3];
    uint64_t values[ACG_MAX_KERNEL_ARGS + 3];
    void *params[ACG_MAX_KERNEL_ARGS + 3];
} cu_launch;

/* Kernels (kernel.c): the backend table's kernel_load, kernel_unload and kernel_launch. */
/* A registrant's definition checked for what is cuda's: cuda_lanes (the kernel_check slot). */
acg_status acg__cu_kernel_check(const acg_kernel_desc *d, const char *fn);
acg_status acg__cu_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                               acg__bk_kernel **out);
void acg__cu_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel);
acg_status acg__cu_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                 const acg_dims *dims, const acg__karg *args, uint32_t n_args);
/* Fills l for a launch of kernel over dims with args (the kernel's cuda_lanes decide the
 * blocks); ACG_ERR_UNSUPPORTED for a grid CUDA cannot launch. */
acg_status acg__cu_launch_shape(const cu_kernel *kernel, const acg_dims *dims,
                                const acg__karg *args, uint32_t n_args, cu_launch *l,
                                const char *fn);

/* Loads NCCL once per process, thread-safe (nccl.c): true when collectives can run; *detail
 * says NCCL's version, or why there are none. */
bool acg__cu_nccl_load(const char **detail);

/* Collective slots (nccl.c). */
acg_status acg__cu_group_create(acg__bk_device *dev, const acg_comm *comm, acg__bk_group **out);
void acg__cu_group_destroy(acg__bk_group *group);
acg_status acg__cu_allreduce(acg__bk_stream *stream, acg__bk_group *group, acg__bk_mem *mem,
                             size_t off, size_t count);

/* Records the CUDA node that the launch just queued on s (capturing into s->rec) added, for
 * per-node updates (graph.c); a failure fails the launch, which invalidates the capture. */
acg_status acg__cu_capture_kernel(cu_stream *s, const char *fn);

/* Graph slots (graph.c). */
acg_status acg__cu_capture_begin(acg__bk_stream *stream, acg__bk_recording **rec);
acg_status acg__cu_capture_join(acg__bk_recording *rec, acg__bk_stream *stream);
acg_status acg__cu_capture_end(acg__bk_recording *rec, acg__bk_exec **exec);
void acg__cu_capture_abort(acg__bk_recording *rec);
acg_status acg__cu_graph_launch(acg__bk_exec *exec, acg__bk_stream *stream);
acg_status acg__cu_graph_upload(acg__bk_exec *exec, acg__bk_stream *stream);
acg_status acg__cu_graph_update(acg__bk_exec *exec, const acg__graph_desc *desc);
acg_status acg__cu_graph_update_from(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     acg__bk_exec *from, bool same_memory);
acg_status acg__cu_graph_update_node(acg__bk_exec *exec, const acg__graph_desc *desc,
                                     uint32_t index, const acg__node *old);
void acg__cu_graph_destroy(acg__bk_exec *exec);

/* Loops (loop.c): the backend table's loop_begin and loop_end; acg__cu_loops_unwind closes
 * every loop still open on s (its body's capture ended, s->stream its own again), for an abort;
 * acg__cu_loop_release unloads the loop kernel at the device's close. */
acg_status acg__cu_loop_begin(acg__bk_stream *stream, acg__bk_mem *cond, size_t off, uint32_t max);
acg_status acg__cu_loop_end(acg__bk_stream *stream);
void acg__cu_loops_unwind(cu_stream *s, const char *fn);
void acg__cu_loop_release(cu_device *d, const char *fn);
/* Whether this build carries the loop kernel (nvcc built src/backends/cuda/loop.cu). */
bool acg__cu_loop_kernel_built(void);

#endif /* ACG_BACKENDS_CUDA_H */
