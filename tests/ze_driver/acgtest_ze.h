/* acgtest_ze.h — the control API of acg's Level Zero test driver (libacg_test_ze.so).
 *
 * The test driver stands in for Intel's GPU driver where no GPU is: the real Level Zero loader
 * loads it when ZE_ENABLE_ALT_DRIVERS names it (an absolute path), and routes every entry point
 * of src/backends/level_zero/entry_points.h to it through the DDI tables it exports. Device
 * memory is host memory, each immediate command list and each command queue is a host thread,
 * and a kernel runs acg's own cpu implementation of the kernel of the same name
 * (acgtest_ze_bind_kernels); its parameters are those of the function its module's SPIR-V
 * names (zeKernelGetProperties counts them; Intel's driver-experimental
 * zexKernelGetArgumentSize, which zeDriverGetExtensionFunctionAddress serves whatever
 * ACGTEST_ZE_EXTENSIONS offers, gives their sizes). fake_ze.c lists what it simplifies. It is
 * built for the tests only and never installed.
 *
 * Tests reach these functions with dlsym on the driver the loader already loaded, e.g.
 *     void *drv = dlopen(getenv("ZE_ENABLE_ALT_DRIVERS"), RTLD_NOW | RTLD_NOLOAD);
 *     acgtest_ze_live_fn live;
 *     *(void **)&live = dlsym(drv, "acgtest_ze_live");
 * Every function here is thread-safe and may be called before the driver is used.
 *
 * Environment, read once, at the driver's first use:
 *   ACGTEST_ZE_DEVICES     how many devices zeDeviceGet reports, 0 to 4; default 1.
 *   ACGTEST_ZE_API_VERSION the API version zeDriverGetApiVersion reports, "major.minor";
 *                          default "1.17". Below 1.7 the in-order flags are refused
 *                          (ZE_RESULT_ERROR_INVALID_ENUMERATION); below 1.6
 *                          zeCommandListHostSynchronize is not served.
 *   ACGTEST_ZE_EXTENSIONS  a comma-separated list of the extensions zeDriverGetExtensionProperties
 *                          offers, "none" for none; default every one the driver implements, at
 *                          the version implemented: ZE_experimental_immediate_command_list_append
 *                          1.0, ZE_experimental_mutable_command_list 1.1,
 *                          ZE_extension_record_replay_graph 1.0 (immutable graphs only) and
 *                          ZE_extension_device_usablemem_size_properties 1.0 (the device's
 *                          memory less its live allocations), but for
 *                          ZE_experimental_record_replay_graph 1.0, offered only when listed: the
 *                          same graphs through the "...Exp" functions of the form Intel's driver
 *                          offered before spec 1.17 (and its properties stype), which a client
 *                          preferring the spec's form would not use. A list
 *                          without a name leaves that extension out. "name:1.0" offers an
 *                          older version; "name:2.0", a later major version, is only reported (as
 *                          a future driver would), its functions served as implemented. The
 *                          functions of an extension (or of a version) not offered are not served
 *                          either.
 *   ACGTEST_ZE_MEM_MB      each device's memory (zeDeviceGetMemoryProperties); default 16384.
 *   ACGTEST_ZE_HIDE        a comma-separated list of entry points left out: their DDI table slot
 *                          stays NULL (loader 1.8.12 then answers their calls with
 *                          ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, its validation layer too), or
 *                          zeDriverGetExtensionFunctionAddress does not find them.
 *   ACGTEST_ZE_FAIL        "name:nth:code": as acgtest_ze_fail(name, nth, code) from the start
 *                          ("*" for any entry point; code in decimal or 0x hexadecimal).
 *   ACGTEST_ZE_INIT_FAIL   a ze_result_t zeInit returns every time (e.g. 0x78000001, what the
 *                          loader gives without a GPU); loader 1.8.12 passes it on to the
 *                          caller's zeInit.
 *
 * Misuse the driver detects (a regular command list executed, reset or destroyed while an
 * execution of it is pending, an open one executed, a destroyed handle, an object destroyed
 * while pending work uses it, a list capturing a graph destroyed or reset, a graph destroyed or
 * instantiated while it captures, an executable graph destroyed while a replay of it is pending
 * or replayed after an object it uses was destroyed...) makes the call fail, says why on stderr
 * and counts in acgtest_ze_violations. A graph replay that starts while an event it signals is
 * still signalled (a wait on it inside the graph would not wait on a GPU) counts too, and runs. A
 * command that would make a GPU fault (a copy, fill or kernel reaching memory outside every live
 * allocation) aborts the process with a message instead.
 */
#ifndef ACG_TESTS_ZE_DRIVER_ACGTEST_ZE_H
#define ACG_TESTS_ZE_DRIVER_ACGTEST_ZE_H

#include "../driver_common/acgtest_api.h"
#include "acg/acg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACGTEST_ZE_API ACGTEST_API

/* Gives the driver the kernels it runs: zeKernelCreate(module, {name}) looks the kernel function
 * `name` up with `lookup` (it must also be an entry point of the module's SPIR-V), and launches
 * of the kernel call the desc's cpu.fn (the cpu backend's implementation) on the list's worker
 * thread. The level_zero backend calls it right after zeInit when the driver exports it; a real
 * driver does not. The desc must stay valid until zeKernelCreate returns; what launches need is
 * copied. NULL unbinds. Without a lookup, or when it finds nothing with a cpu.fn,
 * zeKernelCreate gives ZE_RESULT_ERROR_INVALID_KERNEL_NAME. lookup is called without the
 * driver's lock held. */
ACGTEST_FUNCTION(void, acgtest_ze_bind_kernels,
                 (const acg_kernel_desc *(*lookup)(const char *name)));

/* Makes the nth (1-based) call from now of entry point `name` return `code` (a ze_result_t)
 * without doing anything else. name NULL or "*": the nth call of any entry point. nth 0 clears
 * the pending injection. One injection is pending at a time: a new one replaces it; it fires
 * once. An unknown name is reported on stderr and never fires. The call still counts in
 * acgtest_ze_calls. Extension functions (zeCommandListHostSynchronize...) count as entry points.
 */
ACGTEST_FUNCTION(void, acgtest_ze_fail, (const char *name, unsigned nth, int code));

/* Makes device `device` (0-based) lost, as a GPU hang or reset would, or healthy again (mode
 * 0). While it is lost, zeDeviceGetStatus returns ZE_RESULT_ERROR_DEVICE_LOST, and so does every
 * call that would submit work to it or wait for work of it: appends to its immediate lists
 * (a capturing list still records), executions on its queues, host synchronizations of its
 * lists and queues, and host synchronizations and queries of its events (those of pools made
 * for it) and fences that are not signalled; work queued on it is dropped, never run, its
 * events and fences never signalled, and this call returns once its workers dropped theirs, so
 * nothing is pending. Releases still release: with ACGTEST_ZE_LOST they succeed, as Intel's
 * driver's do; with ACGTEST_ZE_LOST_RELEASES they report ZE_RESULT_ERROR_DEVICE_LOST too (a
 * context's destroy, and a graph's, when any device is). Property queries, allocations and
 * creations go on as before. Unlike a real device, made healthy again its objects work again.
 * A device or mode out of range is reported on stderr. */
enum { ACGTEST_ZE_LOST = 1, ACGTEST_ZE_LOST_RELEASES = 2 };
ACGTEST_FUNCTION(void, acgtest_ze_set_lost, (int device, int mode));

/* How many times entry point `name` was called since the start or the last
 * acgtest_ze_reset_counts, failed and injected calls included; the loader's own calls (zeInit
 * while it loads drivers) count too. NULL: the sum over every entry point. 0 for an unknown
 * name. */
ACGTEST_FUNCTION(unsigned long, acgtest_ze_calls, (const char *name));

/* How many driver objects are alive: contexts, command queues, command lists, event pools,
 * events, fences, allocations, modules, module build logs, kernels, graphs and executable
 * graphs, plus the allocations a
 * zeContextDestroy had to free for an owner that leaked them: a leak hidden by a teardown
 * still shows. A test checks that it comes back to its value at the start. */
ACGTEST_FUNCTION(long, acgtest_ze_live, (void));

/* How many misuses the driver detected and refused since the start or the last
 * acgtest_ze_reset_counts (each also said on stderr): a test checks it stays 0. */
ACGTEST_FUNCTION(unsigned long, acgtest_ze_violations, (void));

/* Sets every call count and the violation count to zero (the live count is not a count of
 * calls, and stays). */
ACGTEST_FUNCTION(void, acgtest_ze_reset_counts, (void));

#ifdef __cplusplus
}
#endif

#endif /* ACG_TESTS_ZE_DRIVER_ACGTEST_ZE_H */
