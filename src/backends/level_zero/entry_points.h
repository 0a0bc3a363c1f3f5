/* entry_points.h — every Level Zero core entry point (spec 1.4, as Debian's loader headers
 * declare them) the level_zero backend calls, resolved with dlsym from the loader it opens.
 * Extension functions (newer spec, found at run time) are in ze_ext.h.
 *
 * X(name, pfn, required): ze_pfn<pfn>_t (ze_ddi.h) is its type. A required one missing makes the
 * backend unavailable with its name; an optional one disables only what needs it. The test driver
 * (tests/ze_driver) implements every one of them in the DDI table the loader routes it through. */
#ifndef ACG_BACKENDS_LEVEL_ZERO_ENTRY_POINTS_H
#define ACG_BACKENDS_LEVEL_ZERO_ENTRY_POINTS_H

#define ACG_ZE_ENTRY_POINTS(X)                                                                     \
    X(zeInit, Init, 1)                                                                             \
    X(zeDriverGet, DriverGet, 1)                                                                   \
    X(zeDriverGetApiVersion, DriverGetApiVersion, 1)                                               \
    X(zeDriverGetProperties, DriverGetProperties, 1)                                               \
    X(zeDriverGetExtensionProperties, DriverGetExtensionProperties, 1)                             \
    X(zeDriverGetExtensionFunctionAddress, DriverGetExtensionFunctionAddress, 1)                   \
    X(zeDeviceGet, DeviceGet, 1)                                                                   \
    X(zeDeviceGetProperties, DeviceGetProperties, 1)                                               \
    X(zeDeviceGetComputeProperties, DeviceGetComputeProperties, 1)                                 \
    X(zeDeviceGetMemoryProperties, DeviceGetMemoryProperties, 1)                                   \
    X(zeDeviceGetCommandQueueGroupProperties, DeviceGetCommandQueueGroupProperties, 1)             \
    X(zeDeviceGetStatus, DeviceGetStatus, 1)                                                       \
    X(zeContextCreate, ContextCreate, 1)                                                           \
    X(zeContextDestroy, ContextDestroy, 1)                                                         \
    X(zeCommandQueueCreate, CommandQueueCreate, 1)                                                 \
    X(zeCommandQueueDestroy, CommandQueueDestroy, 1)                                               \
    X(zeCommandQueueExecuteCommandLists, CommandQueueExecuteCommandLists, 1)                       \
    X(zeCommandQueueSynchronize, CommandQueueSynchronize, 1)                                       \
    X(zeCommandListCreate, CommandListCreate, 1)                                                   \
    X(zeCommandListCreateImmediate, CommandListCreateImmediate, 1)                                 \
    X(zeCommandListDestroy, CommandListDestroy, 1)                                                 \
    X(zeCommandListClose, CommandListClose, 1)                                                     \
    X(zeCommandListReset, CommandListReset, 1)                                                     \
    X(zeCommandListAppendBarrier, CommandListAppendBarrier, 1)                                     \
    X(zeCommandListAppendMemoryCopy, CommandListAppendMemoryCopy, 1)                               \
    X(zeCommandListAppendMemoryFill, CommandListAppendMemoryFill, 1)                               \
    X(zeCommandListAppendLaunchKernel, CommandListAppendLaunchKernel, 1)                           \
    X(zeCommandListAppendSignalEvent, CommandListAppendSignalEvent, 1)                             \
    X(zeCommandListAppendWaitOnEvents, CommandListAppendWaitOnEvents, 1)                           \
    X(zeCommandListAppendEventReset, CommandListAppendEventReset, 1)                               \
    X(zeEventPoolCreate, EventPoolCreate, 1)                                                       \
    X(zeEventPoolDestroy, EventPoolDestroy, 1)                                                     \
    X(zeEventCreate, EventCreate, 1)                                                               \
    X(zeEventDestroy, EventDestroy, 1)                                                             \
    X(zeEventHostSynchronize, EventHostSynchronize, 1)                                             \
    X(zeEventQueryStatus, EventQueryStatus, 1)                                                     \
    X(zeEventHostReset, EventHostReset, 1)                                                         \
    X(zeFenceCreate, FenceCreate, 1)                                                               \
    X(zeFenceDestroy, FenceDestroy, 1)                                                             \
    X(zeFenceHostSynchronize, FenceHostSynchronize, 1)                                             \
    X(zeFenceQueryStatus, FenceQueryStatus, 1)                                                     \
    X(zeFenceReset, FenceReset, 1)                                                                 \
    X(zeMemAllocDevice, MemAllocDevice, 1)                                                         \
    X(zeMemAllocHost, MemAllocHost, 1)                                                             \
    X(zeMemFree, MemFree, 1)                                                                       \
    X(zeModuleCreate, ModuleCreate, 1)                                                             \
    X(zeModuleDestroy, ModuleDestroy, 1)                                                           \
    X(zeModuleBuildLogDestroy, ModuleBuildLogDestroy, 1)                                           \
    X(zeModuleBuildLogGetString, ModuleBuildLogGetString, 1)                                       \
    X(zeKernelCreate, KernelCreate, 1)                                                             \
    X(zeKernelDestroy, KernelDestroy, 1)                                                           \
    X(zeKernelSetArgumentValue, KernelSetArgumentValue, 1)                                         \
    X(zeKernelSetGroupSize, KernelSetGroupSize, 1)                                                 \
    X(zeKernelGetProperties, KernelGetProperties, 1)

#endif /* ACG_BACKENDS_LEVEL_ZERO_ENTRY_POINTS_H */
