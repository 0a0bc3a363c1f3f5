/* loader.c — the cuda backend's loader: libcuda opened at run time (ACG_CUDA_DRIVER or
 * libcuda.so.1), every entry point resolved with cuGetProcAddress at the ABI version its typedef
 * names, cuInit, and what the driver lacks; CUDA results mapped to statuses. Devices, memory,
 * streams and kernels are cuda.c's. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

cu_driver acg__cu;

/* ---- errors ------------------------------------------------------------------------------ */

/* The faults cuda.h says leave the context (or the process) unusable, "any further CUDA work
 * will return the same error", and the two that say the context itself is gone. */
bool acg__cu_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
        return true;
    default:
        return false;
    }
}

static acg_status status_of(CUresult r) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    if (acg__cu_sticky(r)) {
        return ACG_ERR_DEVICE_LOST;
    }
    if (r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
        return ACG_ERR_CAPTURE_INVALIDATED;
    }
    if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_NOT_FOUND) {
        return ACG_ERR_UNSUPPORTED;
    }
    return ACG_ERR_DEVICE;
}

acg_status acg__cu_check(CUresult r, const char *fn, const char *call) {
    if (r == CUDA_SUCCESS) {
        return ACG_OK;
    }
    const char *name = NULL, *text = NULL;
    if (acg__cu.cuGetErrorName == NULL || acg__cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) {
        name = "CUDA error";
    }
    if (acg__cu.cuGetErrorString == NULL || acg__cu.cuGetErrorString(r, &text) != CUDA_SUCCESS) {
        text = "no description";
    }
    return acg__error(status_of(r), "%s: %s failed with %s (%d): %s", fn, call, name, (int)r, text);
}

void acg__cu_release_check(CUresult r, const char *fn, const char *call) {
    if (r == CUDA_SUCCESS) {
        return;
    }
    const char *name = NULL;
    if (acg__cu.cuGetErrorName == NULL || acg__cu.cuGetErrorName(r, &name) != CUDA_SUCCESS) {
        name = "CUDA error";
    }
    /* After a fault the context frees what it held when the device closes: nothing is lost. */
    acg__log(acg__cu_sticky(r) ? ACG_LOG_DEBUG : ACG_LOG_WARN, "%s: %s failed with %s (%d)%s", fn,
             call, name, (int)r,
             acg__cu_sticky(r) ? " after a device fault; the context frees it at close" : "");
}

/* ---- the driver, loaded once --------------------------------------------------------------- */

static void add_missing(const char *name) {
    size_t len = strlen(acg__cu.missing);
    snprintf(acg__cu.missing + len, sizeof acg__cu.missing - len, "%s%s", len ? ", " : "", name);
}

/* Why a required entry point could not be had: cuGetProcAddress refuses a version newer than
 * the driver's (CUDA_ERROR_INVALID_VALUE), answers "not found" for one it lacks, and the
 * toolkit's stub library answers everything with CUDA_ERROR_STUB_LIBRARY. */
static void resolve_failed(const char *name, int ver, CUresult r) {
    const int major = ver / 1000, minor = ver % 1000 / 10;
    if (r == CUDA_ERROR_INVALID_VALUE) {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "the CUDA driver is older than %d.%d, which the cuda backend needs (%s)", major,
                 minor, name);
    } else if (r == CUDA_ERROR_STUB_LIBRARY) {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "the CUDA toolkit's stub library was loaded instead of a driver "
                 "(CUDA_ERROR_STUB_LIBRARY, 34); install the NVIDIA driver");
    } else if (r != CUDA_SUCCESS) {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "cuGetProcAddress(\"%s\") failed with CUDA error %d", name, (int)r);
    } else {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "the CUDA driver lacks %s (of CUDA %d.%d), which the cuda backend needs", name,
                 major, minor);
    }
}

/* What the test driver looks kernels up with: the definition whose cuda image and function
 * these are. */
static const acg_kernel_desc *find_cuda_kernel(const void *image, size_t size,
                                               const char *function) {
    return acg__kernel_desc_find("cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, image, size, function);
}

/* Resolves every entry point at its ABI version; false (reason set) when a required one is
 * missing. */
static bool resolve(PFN_cuGetProcAddress_v12000 get) {
#define ACG_CU_RESOLVE_(name, ver, required)                                                       \
    {                                                                                              \
        void *fn = NULL;                                                                           \
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
        CUresult r = get(#name, &fn, ver, CU_GET_PROC_ADDRESS_DEFAULT, &q);                        \
        if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS) {                               \
            fn = NULL;                                                                             \
        }                                                                                          \
        *(void **)&acg__cu.name = fn;                                                              \
        if (fn == NULL && (required)) {                                                            \
            resolve_failed(#name, ver, r);                                                         \
            return false;                                                                          \
        }                                                                                          \
        if (fn == NULL) {                                                                          \
            add_missing(#name);                                                                    \
        }                                                                                          \
    }
    ACG_CUDA_ENTRY_POINTS(ACG_CU_RESOLVE_)
#undef ACG_CU_RESOLVE_
    return true;
}

bool acg__cu_load_driver(void) {
    const char *path = NULL;
    void *h = acg__dlopen_vendor("ACG_CUDA_DRIVER", "libcuda.so.1", "no CUDA driver",
                                 "install the NVIDIA driver", &path, acg__cu.reason,
                                 sizeof acg__cu.reason);
    if (h == NULL) {
        return false;
    }
    PFN_cuGetProcAddress_v12000 get = NULL;
    *(void **)&get = dlsym(h, "cuGetProcAddress_v2");
    if (get == NULL) {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "the CUDA driver in %s is older than CUDA 12.0 (no cuGetProcAddress_v2)", path);
        dlclose(h);
        return false;
    }
    acg__cu.handle = h;
    if (!resolve(get)) {
        return false; /* the reason names the entry point; the handle stays, as a loaded driver */
    }
    CUresult r = acg__cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        acg__cu_check(r, "cuda", "cuInit");
        snprintf(acg__cu.reason, sizeof acg__cu.reason, "%s", acg_last_error());
        return false;
    }
    r = acg__cu.cuDriverGetVersion(&acg__cu.version);
    if (r != CUDA_SUCCESS || acg__cu.version < 12000) {
        snprintf(acg__cu.reason, sizeof acg__cu.reason,
                 "the CUDA driver's version %d.%d is older than 12.0, which the cuda backend needs",
                 acg__cu.version / 1000, acg__cu.version % 1000 / 10);
        return false;
    }
    acg__cu.capture = acg__cu.cuStreamBeginCapture && acg__cu.cuStreamEndCapture &&
                      acg__cu.cuStreamIsCapturing && acg__cu.cuGraphInstantiateWithFlags &&
                      acg__cu.cuGraphLaunch && acg__cu.cuGraphExecDestroy && acg__cu.cuGraphDestroy;
    acg__cu.update = acg__cu.capture && acg__cu.cuGraphClone && acg__cu.cuGraphCreate &&
                     acg__cu.cuGraphAddKernelNode && acg__cu.cuGraphAddMemcpyNode &&
                     acg__cu.cuGraphAddMemsetNode && acg__cu.cuGraphAddHostNode &&
                     acg__cu.cuGraphExecUpdate;
    acg__cu.param_check = acg__cu.cuKernelGetFunction && acg__cu.cuFuncGetParamInfo;
    acg__cu.node_update = acg__cu.capture && acg__cu.cuStreamGetCaptureInfo &&
                          acg__cu.cuGraphExecKernelNodeSetParams &&
                          acg__cu.cuGraphKernelNodeSetParams && acg__cu.cuGraphNodeFindInClone;
    /* WHILE nodes came with CUDA 12.4 (the entry points with 12.3). */
    acg__cu.loops = acg__cu.capture && acg__cu.version >= 12040 && acg__cu.cuStreamGetCaptureInfo &&
                    acg__cu.cuGraphConditionalHandleCreate && acg__cu.cuGraphAddNode &&
                    acg__cu.cuStreamUpdateCaptureDependencies &&
                    acg__cu.cuStreamBeginCaptureToGraph && acg__cu_loop_kernel_built();
    /* acg's test driver runs kernels with their cpu code: it looks definitions up by the CUDA
     * image and function they name. A real driver exports no such function, and nothing changes
     * there. */
    void (*bind)(const acg_kernel_desc *(*)(const void *, size_t, const char *)) = NULL;
    *(void **)&bind = dlsym(h, "acgtest_cuda_bind_kernels");
    acg__cu.test_driver = bind != NULL;
    if (bind != NULL) {
        bind(find_cuda_kernel);
        acg__log(ACG_LOG_INFO, "cuda: %s is acg's CUDA test driver: kernels run their cpu code",
                 path);
    }
    return true;
}
