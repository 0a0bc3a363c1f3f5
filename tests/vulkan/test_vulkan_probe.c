/* test_vulkan_probe.c — how the vulkan backend says it cannot run, each case a run of its own
 * (a backend is probed once per process): test_vulkan_probe LEVEL TEXT, under an environment
 * that takes something away (tests/vulkan/CMakeLists.txt):
 *
 *   backend TEXT  the backend is unavailable and says TEXT (no loader, no driver, no device
 *                 with a compute queue); opening vulkan:0 fails with ACG_ERR_UNAVAILABLE and
 *                 the same words
 *   device TEXT   the backend lists device 0 as unavailable, its detail saying TEXT (a device
 *                 below Vulkan 1.2, or without a feature the backend needs); opening it fails
 *                 with ACG_ERR_UNAVAILABLE naming why
 *
 * The device cases run on lavapipe through hide_layer.c, a test layer that hides what the case
 * names. */
#include <stdio.h>
#include <string.h>

#include "acg/acg.h"

static int fail(const char *what, const char *got) {
    fprintf(stderr, "test_vulkan_probe: %s (got: %s)\n", what, got);
    return 1;
}

static int vulkan_backend(acg_backend_info *out) {
    for (size_t i = 0; i < acg_backend_count(); i++) {
        if (acg_backend_get_info(i, out) != ACG_OK) {
            return -1;
        }
        if (strcmp(out->name, "vulkan") == 0) {
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "backend") != 0 && strcmp(argv[1], "device") != 0)) {
        fprintf(stderr, "usage: test_vulkan_probe backend|device TEXT\n");
        return 2;
    }
    const char *text = argv[2];
    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    if (vulkan_backend(&info) != 0) {
        return fail("no vulkan backend in this build", "");
    }
    acg_device *dev = NULL;
    const acg_status st = acg_device_open("vulkan:0", &dev);
    if (st != ACG_ERR_UNAVAILABLE) {
        if (dev != NULL) {
            acg_device_close(dev);
        }
        return fail("expected opening vulkan:0 to fail with ACG_ERR_UNAVAILABLE",
                    acg_status_string(st));
    }
    if (strstr(acg_last_error(), text) == NULL) {
        return fail("expected the open's error to say why", acg_last_error());
    }
    if (strcmp(argv[1], "backend") == 0) {
        if (info.available || info.device_count != 0) {
            return fail("expected the backend unavailable", "available");
        }
        if (strstr(info.reason, text) == NULL) {
            return fail("expected the backend's reason to say why", info.reason);
        }
        printf("vulkan unavailable: %s\n", info.reason);
        return 0;
    }
    if (!info.available || info.device_count < 1) {
        return fail("expected the backend available with its devices listed", info.reason);
    }
    acg_capability cap;
    memset(&cap, 0, sizeof cap);
    cap.size = sizeof cap;
    if (acg_device_describe("vulkan", 0, &cap) != ACG_OK) {
        return fail("acg_device_describe(vulkan, 0) failed", acg_last_error());
    }
    if (cap.available || cap.graphs || cap.pinned_memory) {
        return fail("expected device 0 unavailable, and nothing offered", cap.detail);
    }
    if (strstr(cap.detail, text) == NULL) {
        return fail("expected device 0's detail to say why", cap.detail);
    }
    printf("vulkan:0 unavailable: %s\n", cap.detail);
    return 0;
}
