/* ze_ext.h — the Level Zero declarations newer than Debian's loader headers (libze-dev 1.8.12,
 * spec 1.4) that the level_zero backend may use, written from the specification so that they
 * can be resolved at run time (zeDriverGetExtensionFunctionAddress, or a symbol lookup for the
 * core functions Intel's driver does not list there).
 *
 * Every type, constant and structure here carries acg's prefix, so a newer ze_api.h that
 * declares the same things under their Level Zero names can be included next to this file.
 * The function-pointer types (acg_ze_pfn_<Level Zero function name>) use ze_api.h's own handle
 * and result types wherever spec 1.4 already has them.
 *
 * Values were checked against these texts:
 *   [h1.17] oneapi-src/level-zero include/ze_api.h @d3b3efb (spec v1.17.24): every value and
 *           structure it names is equal (asserted at the end of this file where it is in use);
 *   [h1.13] oneapi-src/level-zero include/ze_api.h @c1872469 (v1.13-r1.13.1);
 *   [y1.17] oneapi-src/level-zero-spec scripts/core/common.yml and graph.yml @49e4765b (1.17);
 *   [cr]    intel/compute-runtime level_zero/.../zex_graph.h and its graph API sources.
 * The names spec 1.17 lacks (the experimental graph extension's) are from [cr]. */
#ifndef ACG_BACKENDS_LEVEL_ZERO_ZE_EXT_H
#define ACG_BACKENDS_LEVEL_ZERO_ZE_EXT_H

#include <stddef.h>
#include <stdint.h>

#include <level_zero/ze_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================================== */
/* Versions                                                                              */
/* ===================================================================================== */

/* Level Zero packs a version as major in the high 16 bits and minor in the low 16, for the
 * API version (zeDriverGetApiVersion) and for each extension's version
 * (ze_driver_extension_properties_t.version) alike. */
#define ACG_ZE_MAKE_VERSION(major, minor)                                                          \
    ((((uint32_t)(major)) << 16) | (((uint32_t)(minor)) & 0xffffu))
#define ACG_ZE_MAJOR_VERSION(ver) (((uint32_t)(ver)) >> 16)
#define ACG_ZE_MINOR_VERSION(ver) (((uint32_t)(ver)) & 0xffffu)

/* The API versions at which the core features below appeared. */
#define ACG_ZE_API_VERSION_1_6 ACG_ZE_MAKE_VERSION(1, 6)   /* zeCommandListHostSynchronize */
#define ACG_ZE_API_VERSION_1_7 ACG_ZE_MAKE_VERSION(1, 7)   /* the in-order flags */
#define ACG_ZE_API_VERSION_1_17 ACG_ZE_MAKE_VERSION(1, 17) /* the record-replay graph results */

/* ===================================================================================== */
/* 1. zeCommandListHostSynchronize (core since spec 1.6) [h1.13]                         */
/* ===================================================================================== */

/* Waits on the host for everything appended so far to an immediate list. timeout is in
 * nanoseconds: 0 polls, UINT64_MAX waits for ever; ZE_RESULT_NOT_READY when it runs out.
 * A regular (non-immediate) list gives ZE_RESULT_ERROR_INVALID_ARGUMENT. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListHostSynchronize)(
    ze_command_list_handle_t hCommandList, uint64_t timeout);

/* ===================================================================================== */
/* 2. In-order lists and queues (core since spec 1.7) [h1.13]                            */
/* ===================================================================================== */

/* For ze_command_list_desc_t.flags (zeCommandListCreate, regular lists): bit 3. Not to be
 * combined with ZE_COMMAND_LIST_FLAG_RELAXED_ORDERING. The replacement text matches
 * level_zero.h's, so both headers may be included. */
#define ACG_ZE_COMMAND_LIST_FLAG_IN_ORDER ((ze_command_list_flags_t)(1u << 3))

/* For ze_command_queue_desc_t.flags: bit 1. The only one of the two that applies to an
 * immediate list, whose zeCommandListCreateImmediate takes a queue descriptor. */
#define ACG_ZE_COMMAND_QUEUE_FLAG_IN_ORDER ((ze_command_queue_flags_t)(1u << 1))

/* The cloneable-list flag shares the list flag word (bit 4, spec 1.9); named here so that the
 * whole word of bits this file knows is visible in one place. */
#define ACG_ZE_COMMAND_LIST_FLAG_EXP_CLONEABLE ((ze_command_list_flags_t)(1u << 4))

/* ===================================================================================== */
/* 3. ZE_experimental_immediate_command_list_append, version 1.0 (spec 1.9) [h1.13]      */
/* ===================================================================================== */

#define ACG_ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_NAME                                              \
    "ZE_experimental_immediate_command_list_append"
#define ACG_ZE_IMMEDIATE_COMMAND_LIST_APPEND_EXP_VERSION_1_0 ACG_ZE_MAKE_VERSION(1, 0)

/* Submits closed regular lists through an immediate list, after the wait events and before
 * the signal event. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListImmediateAppendCommandListsExp)(
    ze_command_list_handle_t hCommandListImmediate, uint32_t numCommandLists,
    ze_command_list_handle_t *phCommandLists, ze_event_handle_t hSignalEvent,
    uint32_t numWaitEvents, ze_event_handle_t *phWaitEvents);

/* ===================================================================================== */
/* 4. ZE_experimental_mutable_command_list, versions 1.0 (spec 1.9) and 1.1 (spec 1.10)  */
/*    [h1.13 for every value and layout]                                                 */
/* ===================================================================================== */

/* A list becomes mutable when an acg_ze_mutable_command_list_exp_desc_t is chained into the
 * pNext of the ze_command_list_desc_t given to zeCommandListCreate; there is no list flag
 * for it. Support is reported by chaining acg_ze_mutable_command_list_exp_properties_t into
 * ze_device_properties_t for zeDeviceGetProperties.
 *
 * Version 1.1 adds ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION, the two functions
 * zeCommandListGetNextCommandIdWithKernelsExp and zeCommandListUpdateMutableCommandKernelsExp
 * (a command may switch among kernels named when its id was taken), and the graph-argument
 * flag and descriptor. */
#define ACG_ZE_MUTABLE_COMMAND_LIST_EXP_NAME "ZE_experimental_mutable_command_list"
#define ACG_ZE_MUTABLE_COMMAND_LIST_EXP_VERSION_1_0 ACG_ZE_MAKE_VERSION(1, 0)
#define ACG_ZE_MUTABLE_COMMAND_LIST_EXP_VERSION_1_1 ACG_ZE_MAKE_VERSION(1, 1)

/* stype values of the extension's structures. */
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_PROPERTIES ((ze_structure_type_t)0x00020015)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_DESC ((ze_structure_type_t)0x00020016)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_ID_EXP_DESC ((ze_structure_type_t)0x00020017)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMANDS_EXP_DESC ((ze_structure_type_t)0x00020018)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_KERNEL_ARGUMENT_EXP_DESC ((ze_structure_type_t)0x00020019)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_COUNT_EXP_DESC ((ze_structure_type_t)0x0002001A)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_SIZE_EXP_DESC ((ze_structure_type_t)0x0002001B)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_GLOBAL_OFFSET_EXP_DESC ((ze_structure_type_t)0x0002001C)
#define ACG_ZE_STRUCTURE_TYPE_MUTABLE_GRAPH_ARGUMENT_EXP_DESC ((ze_structure_type_t)0x00020020)

/* What a command id may later change. Flags 0 asked for at id time means every bit except
 * KERNEL_INSTRUCTION, which must be asked for explicitly. */
typedef uint32_t acg_ze_mutable_command_exp_flags_t;
typedef enum acg_ze_mutable_command_exp_flag {
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS = 1 << 0,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT = 1 << 1,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE = 1 << 2,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GLOBAL_OFFSET = 1 << 3,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_SIGNAL_EVENT = 1 << 4,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_WAIT_EVENTS = 1 << 5,
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION = 1 << 6, /* version 1.1 */
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_GRAPH_ARGUMENTS = 1 << 7,    /* version 1.1 */
    ACG_ZE_MUTABLE_COMMAND_EXP_FLAG_FORCE_UINT32 = 0x7fffffff
} acg_ze_mutable_command_exp_flag;

/* List-level flags; only a reserved bit is defined. */
typedef uint32_t acg_ze_mutable_command_list_exp_flags_t;
typedef enum acg_ze_mutable_command_list_exp_flag {
    ACG_ZE_MUTABLE_COMMAND_LIST_EXP_FLAG_RESERVED = 1 << 0,
    ACG_ZE_MUTABLE_COMMAND_LIST_EXP_FLAG_FORCE_UINT32 = 0x7fffffff
} acg_ze_mutable_command_list_exp_flag;

/* Spec 1.9: passed to zeCommandListGetNextCommandIdExp. */
typedef struct acg_ze_mutable_command_id_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_ID_EXP_DESC */
    const void *pNext;
    acg_ze_mutable_command_exp_flags_t flags; /* what the command may later change */
} acg_ze_mutable_command_id_exp_desc_t;

/* Spec 1.9: chained into ze_device_properties_t.pNext; filled in by the driver. */
typedef struct acg_ze_mutable_command_list_exp_properties {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_PROPERTIES */
    void *pNext;
    acg_ze_mutable_command_list_exp_flags_t mutableCommandListFlags;
    acg_ze_mutable_command_exp_flags_t mutableCommandFlags; /* what this device can change */
} acg_ze_mutable_command_list_exp_properties_t;

/* Spec 1.9: chained into ze_command_list_desc_t.pNext to make the list mutable. */
typedef struct acg_ze_mutable_command_list_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_DESC */
    const void *pNext;
    acg_ze_mutable_command_list_exp_flags_t flags; /* 0 */
} acg_ze_mutable_command_list_exp_desc_t;

/* Spec 1.9: the head of an update; the change descriptors below hang off its pNext. */
typedef struct acg_ze_mutable_commands_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_COMMANDS_EXP_DESC */
    const void *pNext;
    uint32_t flags; /* reserved, 0 */
} acg_ze_mutable_commands_exp_desc_t;

/* Spec 1.9: one new kernel argument value for a command. */
typedef struct acg_ze_mutable_kernel_argument_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_KERNEL_ARGUMENT_EXP_DESC */
    const void *pNext;
    uint64_t commandId;
    uint32_t argIndex;
    size_t argSize;
    const void *pArgValue; /* argSize bytes, copied at the update call */
} acg_ze_mutable_kernel_argument_exp_desc_t;

/* Spec 1.9: a new group count for a command. */
typedef struct acg_ze_mutable_group_count_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_COUNT_EXP_DESC */
    const void *pNext;
    uint64_t commandId;
    const ze_group_count_t *pGroupCount;
} acg_ze_mutable_group_count_exp_desc_t;

/* Spec 1.9: a new group size for a command. */
typedef struct acg_ze_mutable_group_size_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_GROUP_SIZE_EXP_DESC */
    const void *pNext;
    uint64_t commandId;
    uint32_t groupSizeX;
    uint32_t groupSizeY;
    uint32_t groupSizeZ;
} acg_ze_mutable_group_size_exp_desc_t;

/* Spec 1.9: a new global offset for a command. */
typedef struct acg_ze_mutable_global_offset_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_GLOBAL_OFFSET_EXP_DESC */
    const void *pNext;
    uint64_t commandId;
    uint32_t offsetX;
    uint32_t offsetY;
    uint32_t offsetZ;
} acg_ze_mutable_global_offset_exp_desc_t;

/* Spec 1.10 (extension version 1.1): a new argument of an appended graph. */
typedef struct acg_ze_mutable_graph_argument_exp_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_MUTABLE_GRAPH_ARGUMENT_EXP_DESC */
    const void *pNext;
    uint64_t commandId;
    uint32_t argIndex;
    const void *pArgValue;
} acg_ze_mutable_graph_argument_exp_desc_t;

/* Version 1.0. Takes the id of the next command appended; only on an open mutable list. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListGetNextCommandIdExp)(
    ze_command_list_handle_t hCommandList, const acg_ze_mutable_command_id_exp_desc_t *desc,
    uint64_t *pCommandId);

/* Version 1.0. Applies a pNext chain of change descriptors; the list must be idle, and is
 * closed again afterwards. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListUpdateMutableCommandsExp)(
    ze_command_list_handle_t hCommandList, const acg_ze_mutable_commands_exp_desc_t *desc);

/* Version 1.0. Replaces a command's signal event (same kind of event as before). */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListUpdateMutableCommandSignalEventExp)(
    ze_command_list_handle_t hCommandList, uint64_t commandId, ze_event_handle_t hSignalEvent);

/* Version 1.0. Replaces a command's wait events; the count must equal the original one. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListUpdateMutableCommandWaitEventsExp)(
    ze_command_list_handle_t hCommandList, uint64_t commandId, uint32_t numWaitEvents,
    ze_event_handle_t *phWaitEvents);

/* Version 1.1. As GetNextCommandIdExp, also naming the kernels the command may switch to. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListGetNextCommandIdWithKernelsExp)(
    ze_command_list_handle_t hCommandList, const acg_ze_mutable_command_id_exp_desc_t *desc,
    uint32_t numKernels, ze_kernel_handle_t *phKernels, uint64_t *pCommandId);

/* Version 1.1. Switches commands to other kernels; call before updating their arguments,
 * which the switch invalidates. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListUpdateMutableCommandKernelsExp)(
    ze_command_list_handle_t hCommandList, uint32_t numKernels, uint64_t *pCommandId,
    ze_kernel_handle_t *phKernels);

/* ===================================================================================== */
/* 5. ZE_extension_record_replay_graph, version 1.0 (spec 1.17, loader v1.32.0) [y1.17]  */
/* ===================================================================================== */

#define ACG_ZE_RECORD_REPLAY_GRAPH_EXT_NAME "ZE_extension_record_replay_graph"
#define ACG_ZE_RECORD_REPLAY_GRAPH_EXT_VERSION_1_0 ACG_ZE_MAKE_VERSION(1, 0)

/* A recorded graph (ze_graph_handle_t) and an instance made from it for launching
 * (ze_executable_graph_handle_t). Own names: Intel's NPU headers use ze_graph_handle_t for an
 * unrelated object. */
typedef struct acg_ze_graph_s *acg_ze_graph_handle_t;
typedef struct acg_ze_executable_graph_s *acg_ze_executable_graph_handle_t;

/* stype values [y1.17, written out there]. */
#define ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES ((ze_structure_type_t)0x00020047)
#define ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_DUMP_DESC ((ze_structure_type_t)0x00020048)

/* New results: the values of [h1.17] (the spec source gives them none written out; they follow
 * ZE_RESULT_ERROR_ADDRESS_NOT_FOUND, 0x78000021, in the order [y1.17] lists them). */
#define ACG_ZE_RESULT_QUERY_TRUE ((ze_result_t)0x78000022)
#define ACG_ZE_RESULT_QUERY_FALSE ((ze_result_t)0x78000023)
#define ACG_ZE_RESULT_ERROR_INVALID_GRAPH ((ze_result_t)0x78000024)
#define ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED ((ze_result_t)0x78000025)
#define ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_INVALIDATED ((ze_result_t)0x78000026)
#define ACG_ZE_RESULT_ERROR_GRAPH_CAPTURE_MERGE_ATTEMPT ((ze_result_t)0x78000027)
#define ACG_ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING ((ze_result_t)0x78000028)
#define ACG_ZE_RESULT_ERROR_GRAPH_UNJOINED_FORKS ((ze_result_t)0x78000029)
#define ACG_ZE_RESULT_ERROR_GRAPH_INTERNAL_EVENT ((ze_result_t)0x7800002a)

/* What a device's graphs can do, read from the properties structure below. */
typedef uint32_t acg_ze_record_replay_graph_ext_flags_t;
typedef enum acg_ze_record_replay_graph_ext_flag {
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_IMMUTABLE_GRAPH = 1 << 0,
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_MUTABLE_GRAPH = 1 << 1,
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_SUBGRAPHS = 1 << 2,          /* AppendGraph in capture */
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_APPEND_COMMANDLIST = 1 << 3, /* immediate append too */
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_CB_EXTERNAL_IPC = 1 << 4,
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_FORCE_UINT32 = 0x7fffffff
} acg_ze_record_replay_graph_ext_flag;

/* How much zeGraphDumpContentsExt writes. */
typedef enum acg_ze_record_replay_graph_ext_dump_mode {
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_DETAILED = 0,
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_SIMPLE = 1,
    ACG_ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_FORCE_UINT32 = 0x7fffffff
} acg_ze_record_replay_graph_ext_dump_mode;

/* Spec 1.17: chained into ze_device_properties_t.pNext; filled in by the driver. */
typedef struct acg_ze_record_replay_graph_ext_properties {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES */
    void *pNext;
    acg_ze_record_replay_graph_ext_flags_t graphFlags;
} acg_ze_record_replay_graph_ext_properties_t;

/* Spec 1.17: the optional pNext of zeGraphDumpContentsExt. */
typedef struct acg_ze_record_replay_graph_ext_dump_desc {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_DUMP_DESC */
    const void *pNext;
    acg_ze_record_replay_graph_ext_dump_mode mode;
} acg_ze_record_replay_graph_ext_dump_desc_t;

/* Spec 1.17 (zex_mem_graph_free_callback_fn_t): run when a graph is destroyed. */
typedef void (*acg_ze_graph_destruction_callback_fn)(void *pUserData);

/* Every pNext below must be NULL in version 1.0 (the driver rejects anything else with
 * ZE_RESULT_ERROR_INVALID_ARGUMENT [cr]). The [out] handle is the last parameter. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphCreateExt)(ze_context_handle_t hContext,
                                                             const void *pNext,
                                                             acg_ze_graph_handle_t *phGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListBeginGraphCaptureExt)(
    ze_command_list_handle_t hCommandList, const void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListBeginCaptureIntoGraphExt)(
    ze_command_list_handle_t hCommandList, acg_ze_graph_handle_t hGraph, const void *pNext);
/* Returns ACG_ZE_RESULT_QUERY_TRUE or ACG_ZE_RESULT_QUERY_FALSE on success. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListIsGraphCaptureEnabledExt)(
    ze_command_list_handle_t hCommandList);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListEndGraphCaptureExt)(
    ze_command_list_handle_t hCommandList, const void *pNext, acg_ze_graph_handle_t *phGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListGetGraphExt)(
    ze_command_list_handle_t hCommandList, acg_ze_graph_handle_t *phGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphGetPrimaryCommandListExt)(
    acg_ze_graph_handle_t hGraph, ze_command_list_handle_t *phCommandList);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphSetDestructionCallbackExt)(
    acg_ze_graph_handle_t hGraph, acg_ze_graph_destruction_callback_fn pfnCallback, void *pUserData,
    const void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphInstantiateExt)(
    acg_ze_graph_handle_t hGraph, const void *pNext,
    acg_ze_executable_graph_handle_t *phExecutableGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListAppendGraphExt)(
    ze_command_list_handle_t hCommandList, acg_ze_executable_graph_handle_t hGraph,
    const void *pNext, ze_event_handle_t hSignalEvent, uint32_t numWaitEvents,
    ze_event_handle_t *phWaitEvents);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeExecutableGraphGetSourceGraphExt)(
    acg_ze_executable_graph_handle_t hGraph, acg_ze_graph_handle_t *phSourceGraph);
/* Returns ACG_ZE_RESULT_QUERY_TRUE (empty), _QUERY_FALSE, or _ERROR_INVALID_GRAPH. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphIsEmptyExt)(acg_ze_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphDumpContentsExt)(acg_ze_graph_handle_t hGraph,
                                                                   const char *filePath,
                                                                   const void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeExecutableGraphDestroyExt)(
    acg_ze_executable_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphDestroyExt)(acg_ze_graph_handle_t hGraph);

/* Spec 1.18 adds these to the same extension without a new extension version (graph.yml
 * @0fa32776): pause and resume a capture, and a process-unique graph id. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphPauseCaptureExt)(acg_ze_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphResumeCaptureExt)(acg_ze_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphGetIdExt)(acg_ze_graph_handle_t hGraph,
                                                            uint64_t *pGraphId);

/* ===================================================================================== */
/* 5b. ZE_experimental_record_replay_graph: the driver-only predecessor [cr]             */
/* ===================================================================================== */

/* Drivers released before spec 1.17 offer the same graphs under this name with "...Exp"
 * functions whose pNext comes last, and name the instantiate call
 * zeCommandListInstantiateGraphExp. Newer drivers keep these as aliases. Same handles and
 * flag bits (IMMUTABLE_GRAPH, MUTABLE_GRAPH only) as the Ext form. */
#define ACG_ZE_RECORD_REPLAY_GRAPH_EXP_NAME "ZE_experimental_record_replay_graph"
#define ACG_ZE_RECORD_REPLAY_GRAPH_EXP_VERSION_1_0 ACG_ZE_MAKE_VERSION(1, 0)
/* The properties stype the Exp form expects; layout as the Ext properties structure
 * (stated in intel/llvm unified-runtime level_zero v2 device.cpp). */
#define ACG_ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXP_PROPERTIES ((ze_structure_type_t)0x00030029)
/* The Exp form's query results, outside the spec's numbering. */
#define ACG_ZE_RESULT_EXP_QUERY_TRUE ((ze_result_t)0x7fff0000)
#define ACG_ZE_RESULT_EXP_QUERY_FALSE ((ze_result_t)0x7fff0001)
#define ACG_ZE_RESULT_EXP_ERROR_INVALID_GRAPH ((ze_result_t)0x7fff0002)

typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphCreateExp)(ze_context_handle_t hContext,
                                                             acg_ze_graph_handle_t *phGraph,
                                                             void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListBeginGraphCaptureExp)(
    ze_command_list_handle_t hCommandList, void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListBeginCaptureIntoGraphExp)(
    ze_command_list_handle_t hCommandList, acg_ze_graph_handle_t hGraph, void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListEndGraphCaptureExp)(
    ze_command_list_handle_t hCommandList, acg_ze_graph_handle_t *phGraph, void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListInstantiateGraphExp)(
    acg_ze_graph_handle_t hGraph, acg_ze_executable_graph_handle_t *phExecutableGraph, void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListAppendGraphExp)(
    ze_command_list_handle_t hCommandList, acg_ze_executable_graph_handle_t hGraph, void *pNext,
    ze_event_handle_t hSignalEvent, uint32_t numWaitEvents, ze_event_handle_t *phWaitEvents);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeCommandListIsGraphCaptureEnabledExp)(
    ze_command_list_handle_t hCommandList);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphIsEmptyExp)(acg_ze_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphDumpContentsExp)(acg_ze_graph_handle_t hGraph,
                                                                   const char *filePath,
                                                                   void *pNext);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeExecutableGraphDestroyExp)(
    acg_ze_executable_graph_handle_t hGraph);
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zeGraphDestroyExp)(acg_ze_graph_handle_t hGraph);

/* ===================================================================================== */
/* 6. ZE_extension_device_usablemem_size_properties, version 1.0 (spec 1.15)             */
/* ===================================================================================== */

/* The device memory a new allocation could use now, over every process's use: chained into
 * ze_device_properties_t.pNext (zeDeviceGetProperties), filled in by a driver offering the
 * extension and left untouched by one that does not. What acg_device_get_memory_info reports
 * as free. */
#define ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_NAME                                           \
    "ZE_extension_device_usablemem_size_properties"
#define ACG_ZE_DEVICE_USABLEMEM_SIZE_PROPERTIES_EXT_VERSION_1_0 ACG_ZE_MAKE_VERSION(1, 0)
/* The value of [h1.17] (spec 1.15 added it). */
#define ACG_ZE_STRUCTURE_TYPE_DEVICE_USABLEMEM_SIZE_EXT_PROPERTIES ((ze_structure_type_t)0x00020041)

typedef struct acg_ze_device_usablemem_size_ext_properties {
    ze_structure_type_t stype; /* ACG_ZE_STRUCTURE_TYPE_DEVICE_USABLEMEM_SIZE_EXT_PROPERTIES */
    void *pNext;
    uint64_t currUsableMemSize; /* [out] bytes */
} acg_ze_device_usablemem_size_ext_properties_t;

/* ===================================================================================== */
/* 7. zexKernelGetArgumentSize, a driver-experimental function of Intel's driver [cr]    */
/* ===================================================================================== */

/* The size in bytes of parameter argIndex of a kernel, as its module declares it (8 for a
 * pointer of a 64-bit module). Intel's driver hands it out through
 * zeDriverGetExtensionFunctionAddress without listing an extension for it
 * (compute-runtime level_zero/driver_experimental/zex_module.h); another driver may not.
 * ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX past the kernel's parameters. */
typedef ze_result_t(ZE_APICALL *acg_ze_pfn_zexKernelGetArgumentSize)(ze_kernel_handle_t hKernel,
                                                                     uint32_t argIndex,
                                                                     uint32_t *pArgSize);

/* ===================================================================================== */
/* Layout checks                                                                         */
/* ===================================================================================== */

/* Offsets the LP64 ABI gives the spec's structures; a mistake in a field list fails here. */
#if UINTPTR_MAX == UINT64_MAX && !defined(__cplusplus)
_Static_assert(sizeof(acg_ze_mutable_command_id_exp_desc_t) == 24, "mutable id desc");
_Static_assert(sizeof(acg_ze_mutable_command_list_exp_properties_t) == 24, "mutable props");
_Static_assert(offsetof(acg_ze_mutable_kernel_argument_exp_desc_t, commandId) == 16, "arg id");
_Static_assert(offsetof(acg_ze_mutable_kernel_argument_exp_desc_t, argSize) == 32, "arg size");
_Static_assert(sizeof(acg_ze_mutable_kernel_argument_exp_desc_t) == 48, "kernel arg desc");
_Static_assert(sizeof(acg_ze_mutable_group_count_exp_desc_t) == 32, "group count desc");
_Static_assert(sizeof(acg_ze_mutable_group_size_exp_desc_t) == 40, "group size desc");
_Static_assert(sizeof(acg_ze_mutable_global_offset_exp_desc_t) == 40, "global offset desc");
_Static_assert(sizeof(acg_ze_mutable_graph_argument_exp_desc_t) == 40, "graph arg desc");
_Static_assert(sizeof(acg_ze_record_replay_graph_ext_properties_t) == 24, "graph props");
_Static_assert(sizeof(acg_ze_record_replay_graph_ext_dump_desc_t) == 24, "graph dump desc");
_Static_assert(sizeof(acg_ze_device_usablemem_size_ext_properties_t) == 24, "usable memory");
#endif

/* ---- kept equal to the spec's header ----------------------------------------------------------
 * Every value and structure above that spec 1.17 names was compared with oneapi-src/level-zero's
 * include/ze_api.h at d3b3efb (spec v1.17.24): all equal, the values once marked as inferred
 * included. Where the headers in use are that new or newer (they define
 * ZE_RECORD_REPLAY_GRAPH_EXT_NAME), each is asserted equal to the header's, so a change in the
 * spec fails the build here instead of a call at run time. Debian 12's headers (spec 1.4) are
 * older, so there the asserts are not compiled. */
#ifdef ZE_RECORD_REPLAY_GRAPH_EXT_NAME
#define ACG_ZE_SAME_VALUE(name)                                                                    \
    _Static_assert((long long)ACG_##name == (long long)name, #name " differs from ze_api.h")
#define ACG_ZE_SAME_LAYOUT(type)                                                                   \
    _Static_assert(sizeof(acg_##type) == sizeof(type), #type " differs from ze_api.h")
ACG_ZE_SAME_VALUE(ZE_COMMAND_LIST_FLAG_IN_ORDER);
ACG_ZE_SAME_VALUE(ZE_COMMAND_QUEUE_FLAG_IN_ORDER);
ACG_ZE_SAME_VALUE(ZE_COMMAND_LIST_FLAG_EXP_CLONEABLE);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_PROPERTIES);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_LIST_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_COMMAND_ID_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_COMMANDS_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_KERNEL_ARGUMENT_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_GROUP_COUNT_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_GROUP_SIZE_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_GLOBAL_OFFSET_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_MUTABLE_GRAPH_ARGUMENT_EXP_DESC);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_PROPERTIES);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_RECORD_REPLAY_GRAPH_EXT_DUMP_DESC);
ACG_ZE_SAME_VALUE(ZE_RESULT_QUERY_TRUE);
ACG_ZE_SAME_VALUE(ZE_RESULT_QUERY_FALSE);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_INVALID_GRAPH);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_GRAPH_CAPTURE_UNSUPPORTED);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_GRAPH_CAPTURE_INVALIDATED);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_GRAPH_CAPTURE_MERGE_ATTEMPT);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_COMMAND_LIST_NOT_CAPTURING);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_GRAPH_UNJOINED_FORKS);
ACG_ZE_SAME_VALUE(ZE_RESULT_ERROR_GRAPH_INTERNAL_EVENT);
ACG_ZE_SAME_VALUE(ZE_STRUCTURE_TYPE_DEVICE_USABLEMEM_SIZE_EXT_PROPERTIES);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_ARGUMENTS);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_COUNT);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_GROUP_SIZE);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_GLOBAL_OFFSET);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_SIGNAL_EVENT);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_WAIT_EVENTS);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_KERNEL_INSTRUCTION);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_GRAPH_ARGUMENTS);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_EXP_FLAG_FORCE_UINT32);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_LIST_EXP_FLAG_RESERVED);
ACG_ZE_SAME_VALUE(ZE_MUTABLE_COMMAND_LIST_EXP_FLAG_FORCE_UINT32);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_IMMUTABLE_GRAPH);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_MUTABLE_GRAPH);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_SUBGRAPHS);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_APPEND_COMMANDLIST);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_CB_EXTERNAL_IPC);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_FLAG_FORCE_UINT32);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_DETAILED);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_SIMPLE);
ACG_ZE_SAME_VALUE(ZE_RECORD_REPLAY_GRAPH_EXT_DUMP_MODE_FORCE_UINT32);
ACG_ZE_SAME_LAYOUT(ze_mutable_command_id_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_command_list_exp_properties_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_command_list_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_commands_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_kernel_argument_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_group_count_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_group_size_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_global_offset_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_mutable_graph_argument_exp_desc_t);
ACG_ZE_SAME_LAYOUT(ze_record_replay_graph_ext_properties_t);
ACG_ZE_SAME_LAYOUT(ze_record_replay_graph_ext_dump_desc_t);
ACG_ZE_SAME_LAYOUT(ze_device_usablemem_size_ext_properties_t);
#undef ACG_ZE_SAME_VALUE
#undef ACG_ZE_SAME_LAYOUT
#endif

#ifdef __cplusplus
}
#endif

#endif /* ACG_BACKENDS_LEVEL_ZERO_ZE_EXT_H */
