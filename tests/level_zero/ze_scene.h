/* ze_scene.h — what the level_zero backend's tests on acg's test driver (tests/ze_driver, named
 * by ZE_ENABLE_ALT_DRIVERS under the real Level Zero loader) share: the driver's description
 * and control functions, the backend's scenario and the fixture on its scene, and the loader's
 * and driver's own entry points for work an engine issues itself (compiled into
 * test_ze_backend, test_ze_native and test_ze_nodes). */
#ifndef ACG_TESTS_ZE_SCENE_H
#define ACG_TESTS_ZE_SCENE_H

#include <stdbool.h>

#include <level_zero/ze_api.h>

#include "backend_scene.h"

/* The scene's axpy's alpha: its first capture replays y = 2 + ZE_ALPHA. */
#define ZE_ALPHA 3.0f

/* The test driver (tests/ze_driver/acgtest_ze.h): a sweep refuses calls with
 * ZE_RESULT_ERROR_INVALID_ARGUMENT, and acgtest_ze_set_lost loses a device. */
extern bs_driver ze_drv;

/* Binds the driver the loader loaded (a device must have been opened once); it counts misuse. */
void ze_bind(void);

/* The scenario: open, eager work (a pageable round trip too), a forked capture replayed twice
 * (the stream queried while a replay may be pending), a second capture discarding the first
 * while its replay may be pending, an invalidated capture, an update, the free memory and the
 * graph's driver object; with check, the results are asserted. Stops at the first failure and
 * returns it, leaving teardown to bs_scene_close. It leaves c->g2 replaying 2 + 3 ZE_ALPHA. */
acg_status ze_scene_run(bs_scene *c, bool check);

/* The scenario and its driver, for BS_SCENE_CASE: ZE_CASE(test). */
extern bs_suite ze_suite;
#define ZE_CASE(test) BS_SCENE_CASE(test, &ze_suite)

/* An entry point of the loader the backend loaded, for work an engine issues itself; asserts
 * that there is one. */
void *ze_loader_function(const char *name);
/* The (first) driver, as the loader gives it. */
ze_driver_handle_t ze_first_driver(void);
/* An extension function of the (first) driver through the loader, or NULL where the driver does
 * not serve it. */
void *ze_driver_function_or_null(const char *name);

#endif
