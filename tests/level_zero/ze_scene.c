/* ze_scene.c — see ze_scene.h. */
#include "ze_scene.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <level_zero/ze_ddi.h>

#include "common.h" /* TC_OK */

bs_driver ze_drv = BS_DRIVER("ZE_ENABLE_ALT_DRIVERS", "acgtest_ze",
                             ZE_RESULT_ERROR_INVALID_ARGUMENT, "acgtest_ze_set_lost");

void ze_bind(void) {
    bs_driver_bind(&ze_drv);
    assert_non_null(ze_drv.violations);
}

/* ---- the scenario -------------------------------------------------------------------------- */

/* A capture invalidated by a synchronize inside it, then ended: what was recorded is dropped (on
 * a driver that records captures, its capture is ended and destroyed) and the stream goes on
 * eagerly. ACG_OK when both calls said so; otherwise the first other status. */
static acg_status invalidated_capture(bs_scene *c) {
    acg_status st = acg_stream_begin_capture(c->s, c->pool);
    if (st != ACG_OK) {
        return st;
    }
    st = bs_fill(c->s, c->fill, c->z, BS_N, 7.0f);
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s); /* refused inside a capture: it invalidates it */
        st = st == ACG_ERR_CAPTURE_INVALIDATED ? ACG_OK : st;
    }
    acg_graph *g = NULL;
    acg_status end = acg_stream_end_capture(c->s, &g);
    acg_graph_destroy(g);
    end = end == ACG_ERR_CAPTURE_INVALIDATED ? ACG_OK : end;
    return st != ACG_OK ? st : end;
}

/* The scenario (ze_scene.h): every kind of call the backend makes for a graph, teardown left
 * to bs_scene_close. */
acg_status ze_scene_run(bs_scene *c, bool check) {
    acg_status st = bs_scene_open(c, "level_zero", false);
    float pageable[BS_N];
    if (st == ACG_OK) {
        st = acg_copy_d2h(c->s, pageable, c->x, 0, sizeof pageable);
    }
    if (st == ACG_OK && check) {
        for (int i = 0; i < BS_N; i++) {
            assert_true(pageable[i] == 1.0f);
        }
    }
    if (st == ACG_OK) {
        st = bs_capture(c, ZE_ALPHA, &c->g);
    }
    for (int r = 0; r < 2 && st == ACG_OK; r++) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_stream_query(c->s);
        st = st == ACG_NOT_READY ? ACG_OK : st;
    }
    if (st == ACG_OK) {
        st = acg_stream_synchronize(c->s);
    }
    if (st == ACG_OK && check) {
        assert_true(bs_host_is(c, 2.0f + ZE_ALPHA));
    }
    /* Replayed and discarded at once: the driver may still reference its list. */
    if (st == ACG_OK) {
        st = acg_graph_launch(c->g, c->s);
    }
    if (st == ACG_OK) {
        st = acg_graph_discard(c->g);
        c->g = NULL;
    }
    if (st == ACG_OK) {
        st = bs_capture(c, 2.0f * ZE_ALPHA, &c->g2);
    }
    if (st == ACG_OK) {
        st = bs_replay(c, c->g2, 1, check, 2.0f + 2.0f * ZE_ALPHA);
    }
    if (st == ACG_OK) {
        st = invalidated_capture(c);
    }
    /* An update: the list recorded again from a capture of the same shape. */
    acg_graph *g3 = NULL;
    if (st == ACG_OK) {
        st = bs_capture(c, 3.0f * ZE_ALPHA, &g3);
    }
    if (st == ACG_OK) {
        st = acg_graph_update(c->g2, g3);
    }
    acg_graph_destroy(g3);
    if (st == ACG_OK) {
        st = bs_replay(c, c->g2, 1, check, 2.0f + 3.0f * ZE_ALPHA);
    }
    acg_native_handle native = ACG_NATIVE_HANDLE_INIT;
    if (st == ACG_OK) {
        st = acg_graph_get_native(c->g2, &native);
    }
    if (st == ACG_OK && check) {
        assert_non_null(native.handle);
    }
    uint64_t free_bytes = 0, total_bytes = 0;
    if (st == ACG_OK) {
        st = acg_device_get_memory_info(c->dev, &free_bytes, &total_bytes);
        st = st == ACG_ERR_UNSUPPORTED ? ACG_OK : st; /* a driver without the extension */
    }
    if (st == ACG_OK) {
        st = acg_device_get_async_error(c->dev); /* a healthy device's poll: no fault */
    }
    return st;
}

bs_suite ze_suite = {ze_scene_run, &ze_drv};

/* ---- the loader's and the driver's entry points --------------------------------------------- */

void *ze_loader_function(const char *name) {
    const char *path = getenv("ACG_LEVEL_ZERO_LOADER");
    void *h = dlopen(path != NULL ? path : "libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *f = dlsym(h, name);
    assert_non_null(f);
    dlclose(h); /* RTLD_NOLOAD took a reference */
    return f;
}

ze_driver_handle_t ze_first_driver(void) {
    ze_pfnDriverGet_t get;
    *(void **)&get = ze_loader_function("zeDriverGet");
    uint32_t n = 1;
    ze_driver_handle_t driver = NULL;
    assert_int_equal(get(&n, &driver), ZE_RESULT_SUCCESS);
    return driver;
}

void *ze_driver_function_or_null(const char *name) {
    ze_pfnDriverGetExtensionFunctionAddress_t lookup;
    *(void **)&lookup = ze_loader_function("zeDriverGetExtensionFunctionAddress");
    void *f = NULL;
    return lookup(ze_first_driver(), name, &f) == ZE_RESULT_SUCCESS ? f : NULL;
}
