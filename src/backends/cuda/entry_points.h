/* entry_points.h — every CUDA driver entry point the cuda backend uses, with the ABI version it
 * is requested at through cuGetProcAddress (the version its cudaTypedefs.h typedef names, never
 * CUDA_VERSION: an entry point asked for at a newer version than the driver's is refused, and
 * some changed their arguments between versions). Needed entry points are required to open any
 * device; an optional one missing disables only what needs it (capture, update, upload,
 * registration, the check of a kernel's parameters, per-node updates, loops), and `acg info` says
 * which.
 *
 * X(name, version, required). The test driver (tests/cuda_driver) serves this same list. */
#ifndef ACG_BACKENDS_CUDA_ENTRY_POINTS_H
#define ACG_BACKENDS_CUDA_ENTRY_POINTS_H

#define ACG_CUDA_ENTRY_POINTS(X)                                                                   \
    X(cuInit, 2000, 1)                                                                             \
    X(cuDriverGetVersion, 2020, 1)                                                                 \
    X(cuGetErrorName, 6000, 1)                                                                     \
    X(cuGetErrorString, 6000, 1)                                                                   \
    X(cuDeviceGetCount, 2000, 1)                                                                   \
    X(cuDeviceGet, 2000, 1)                                                                        \
    X(cuDeviceGetName, 2000, 1)                                                                    \
    X(cuDeviceGetAttribute, 2000, 1)                                                               \
    X(cuDeviceTotalMem, 3020, 1)                                                                   \
    X(cuDevicePrimaryCtxRetain, 7000, 1)                                                           \
    X(cuDevicePrimaryCtxRelease, 11000, 1)                                                         \
    X(cuCtxSetCurrent, 4000, 1)                                                                    \
    X(cuMemGetInfo, 3020, 1)                                                                       \
    X(cuMemAlloc, 3020, 1)                                                                         \
    X(cuMemFree, 3020, 1)                                                                          \
    X(cuMemHostAlloc, 2020, 1)                                                                     \
    X(cuMemFreeHost, 2000, 1)                                                                      \
    X(cuMemHostRegister, 6050, 0)                                                                  \
    X(cuMemHostUnregister, 4000, 0)                                                                \
    X(cuMemcpyHtoDAsync, 3020, 1)                                                                  \
    X(cuMemcpyDtoHAsync, 3020, 1)                                                                  \
    X(cuMemcpyDtoDAsync, 3020, 1)                                                                  \
    X(cuMemsetD8Async, 3020, 1)                                                                    \
    X(cuMemsetD16Async, 3020, 1)                                                                   \
    X(cuMemsetD32Async, 3020, 1)                                                                   \
    X(cuStreamCreate, 2000, 1)                                                                     \
    X(cuStreamDestroy, 4000, 1)                                                                    \
    X(cuStreamSynchronize, 2000, 1)                                                                \
    X(cuStreamQuery, 2000, 1)                                                                      \
    X(cuStreamWaitEvent, 3020, 1)                                                                  \
    X(cuEventCreate, 2000, 1)                                                                      \
    X(cuEventDestroy, 4000, 1)                                                                     \
    X(cuEventRecord, 2000, 1)                                                                      \
    X(cuEventQuery, 2000, 1)                                                                       \
    X(cuEventSynchronize, 2000, 1)                                                                 \
    X(cuLaunchHostFunc, 10000, 1)                                                                  \
    X(cuLibraryLoadData, 12000, 1)                                                                 \
    X(cuLibraryGetKernel, 12000, 1)                                                                \
    X(cuLibraryUnload, 12000, 1)                                                                   \
    X(cuLaunchKernel, 4000, 1)                                                                     \
    X(cuStreamBeginCapture, 10010, 0)                                                              \
    X(cuStreamEndCapture, 10000, 0)                                                                \
    X(cuStreamIsCapturing, 10000, 0)                                                               \
    X(cuGraphInstantiateWithFlags, 11040, 0)                                                       \
    X(cuGraphUpload, 11010, 0)                                                                     \
    X(cuGraphLaunch, 10000, 0)                                                                     \
    X(cuGraphExecDestroy, 10000, 0)                                                                \
    X(cuGraphDestroy, 10000, 0)                                                                    \
    X(cuGraphClone, 10000, 0)                                                                      \
    X(cuGraphCreate, 10000, 0)                                                                     \
    X(cuGraphAddKernelNode, 12000, 0)                                                              \
    X(cuGraphAddMemcpyNode, 10000, 0)                                                              \
    X(cuGraphAddMemsetNode, 10000, 0)                                                              \
    X(cuGraphAddHostNode, 10000, 0)                                                                \
    X(cuGraphExecUpdate, 12000, 0)                                                                 \
    X(cuKernelGetFunction, 12000, 0)                                                               \
    X(cuFuncGetParamInfo, 12040, 0)                                                                \
    X(cuStreamGetCaptureInfo, 12030, 0)                                                            \
    X(cuGraphExecKernelNodeSetParams, 12000, 0)                                                    \
    X(cuGraphKernelNodeSetParams, 12000, 0)                                                        \
    X(cuGraphNodeFindInClone, 10000, 0)                                                            \
    X(cuGraphConditionalHandleCreate, 12030, 0)                                                    \
    X(cuGraphAddNode, 12030, 0)                                                                    \
    X(cuStreamUpdateCaptureDependencies, 12030, 0)                                                 \
    X(cuStreamBeginCaptureToGraph, 12030, 0)

#endif /* ACG_BACKENDS_CUDA_ENTRY_POINTS_H */
