/* fake_errors.c — the CUDA test driver's cuGetErrorName and cuGetErrorString.
 *
 * They answer for every CUresult of cuda.h 13.0, not only those the driver returns itself: a
 * test may inject any code (acgtest_cuda_fail), and the backend's message names it.
 */
#include "fake_cuda_impl.h"

#include <stddef.h>

/* X(code, text): every CUresult of cuda.h 13.0, so an injected code has a name too. The texts
 * are this driver's own short wording. */
#define FAKE_ERRORS(X)                                                                             \
    X(CUDA_SUCCESS, "no error")                                                                    \
    X(CUDA_ERROR_INVALID_VALUE, "an argument is out of range")                                     \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of device memory")                                            \
    X(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not been called (or failed)")                        \
    X(CUDA_ERROR_DEINITIALIZED, "the driver is shutting down")                                     \
    X(CUDA_ERROR_PROFILER_DISABLED, "the profiler is disabled")                                    \
    X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "the profiler is not initialized")                      \
    X(CUDA_ERROR_PROFILER_ALREADY_STARTED, "the profiler is already started")                      \
    X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "the profiler is already stopped")                      \
    X(CUDA_ERROR_STUB_LIBRARY, "the toolkit's stub library was loaded, not a driver")              \
    X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "the call needs a newer driver")                      \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, "the device is unavailable")                                  \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA device")                                                      \
    X(CUDA_ERROR_INVALID_DEVICE, "no such device")                                                 \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, "the device is not licensed")                                \
    X(CUDA_ERROR_INVALID_IMAGE, "the image is not a kernel image the driver takes")                \
    X(CUDA_ERROR_INVALID_CONTEXT, "no valid current context on this thread")                       \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "the context is already current")                        \
    X(CUDA_ERROR_MAP_FAILED, "mapping failed")                                                     \
    X(CUDA_ERROR_UNMAP_FAILED, "unmapping failed")                                                 \
    X(CUDA_ERROR_ARRAY_IS_MAPPED, "the array is mapped")                                           \
    X(CUDA_ERROR_ALREADY_MAPPED, "already mapped")                                                 \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "the image has no code for this device")                       \
    X(CUDA_ERROR_ALREADY_ACQUIRED, "already acquired")                                             \
    X(CUDA_ERROR_NOT_MAPPED, "not mapped")                                                         \
    X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "not mapped as an array")                                    \
    X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "not mapped as a pointer")                                 \
    X(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error")                                     \
    X(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit not supported")                                         \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "the context is in use by another thread")                \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access unsupported")                               \
    X(CUDA_ERROR_INVALID_PTX, "PTX compilation failed")                                            \
    X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid graphics context")                             \
    X(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error")                               \
    X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "no JIT compiler")                                        \
    X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "unsupported PTX version")                               \
    X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "JIT compilation disabled")                             \
    X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "unsupported execution affinity")                      \
    X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "unsupported device-side synchronization")              \
    X(CUDA_ERROR_CONTAINED, "a contained device error")                                            \
    X(CUDA_ERROR_INVALID_SOURCE, "invalid kernel source")                                          \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                                 \
    X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found")                 \
    X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed")                 \
    X(CUDA_ERROR_OPERATING_SYSTEM, "an operating system call failed")                              \
    X(CUDA_ERROR_INVALID_HANDLE, "not a live handle of that kind")                                 \
    X(CUDA_ERROR_ILLEGAL_STATE, "the object is in the wrong state for the call")                   \
    X(CUDA_ERROR_LOSSY_QUERY, "the query would lose information")                                  \
    X(CUDA_ERROR_NOT_FOUND, "no such symbol or kernel")                                            \
    X(CUDA_ERROR_NOT_READY, "work is still pending")                                               \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "work touched an address outside live device memory")            \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for the launch")           \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out")                                           \
    X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "incompatible texturing")                          \
    X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access already enabled")                       \
    X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access not enabled")                               \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "the primary context is already active")                  \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "the context was destroyed")                                \
    X(CUDA_ERROR_ASSERT, "a device assertion failed")                                              \
    X(CUDA_ERROR_TOO_MANY_PEERS, "too many peers")                                                 \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "the host range overlaps a registered one")       \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "the host pointer is not a registered range")         \
    X(CUDA_ERROR_HARDWARE_STACK_ERROR, "device stack error")                                       \
    X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "illegal instruction")                                       \
    X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                                         \
    X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "invalid address space")                                   \
    X(CUDA_ERROR_INVALID_PC, "invalid program counter")                                            \
    X(CUDA_ERROR_LAUNCH_FAILED, "the launch failed")                                               \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "cooperative launch too large")                     \
    X(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory leaked")                                       \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                         \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported (by this test driver at least)")          \
    X(CUDA_ERROR_SYSTEM_NOT_READY, "the system is not ready")                                      \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "driver and kernel module versions differ")               \
    X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility not supported")            \
    X(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS connection failed")                                   \
    X(CUDA_ERROR_MPS_RPC_FAILURE, "MPS RPC failed")                                                \
    X(CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server not ready")                                     \
    X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "MPS client limit reached")                              \
    X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "MPS connection limit reached")                      \
    X(CUDA_ERROR_MPS_CLIENT_TERMINATED, "MPS client terminated")                                   \
    X(CUDA_ERROR_CDP_NOT_SUPPORTED, "dynamic parallelism not supported")                           \
    X(CUDA_ERROR_CDP_VERSION_MISMATCH, "dynamic parallelism version mismatch")                     \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "not allowed while the stream captures")              \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated by an earlier error")    \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "the wait would merge two captures")                        \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "the capture did not begin on this stream")             \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "a forked stream was not joined back to the origin")     \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "the wait crosses the capture's boundary")              \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "implicit dependency on the legacy stream")              \
    X(CUDA_ERROR_CAPTURED_EVENT, "the event was last recorded in an active capture")               \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "the capture must end on the thread that began it")  \
    X(CUDA_ERROR_TIMEOUT, "timed out")                                                             \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph cannot update this exec")                   \
    X(CUDA_ERROR_EXTERNAL_DEVICE, "an external device failed")                                     \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size")                                     \
    X(CUDA_ERROR_FUNCTION_NOT_LOADED, "the function is not loaded")                                \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type")                                   \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration")                 \
    X(CUDA_ERROR_KEY_ROTATION, "key rotation failed")                                              \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
#define FAKE_ERROR_ROW(code, text) {code, #code, text},
    FAKE_ERRORS(FAKE_ERROR_ROW)
#undef FAKE_ERROR_ROW
};

/* An unknown code gives CUDA_ERROR_INVALID_VALUE and NULL, as the real driver. */
static CUresult error_lookup(CUresult error, const char **str, int name) {
    if (str == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == error) {
            *str = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuGetErrorName(CUresult error, const char **str) {
    FAKE_ENTER(cuGetErrorName);
    return error_lookup(error, str, 1);
}

CUresult fake_cuGetErrorString(CUresult error, const char **str) {
    FAKE_ENTER(cuGetErrorString);
    return error_lookup(error, str, 0);
}
