/*
 * common.c — what every benchmark shares: the common options, opening and closing the device,
 * and the device in the report.
 */
#include "bench-impl.h"

#include <stdio.h>
#include <string.h>

int bench_common_option(int argc, char **argv, int *i, bench_common *c) {
    const char *v = NULL;
    int m = 0;
    if (strcmp(argv[*i], "--json") == 0) {
        c->json = true;
        return BENCH_OPTION_TAKEN;
    }
    if (tool_is_help(argv[*i])) {
        fputs(c->usage, stdout);
        return TOOL_EXIT_OK;
    }
    if ((m = tool_option(argc, argv, i, "--backend", &v)) != 0) {
        if (m < 0 || !v[0]) {
            return tool_usage_error(c->usage, "%s: --backend needs B", c->name);
        }
        c->backend = v;
        return BENCH_OPTION_TAKEN;
    }
    return BENCH_OPTION_OTHER;
}

int bench_unknown_argument(const bench_common *c, const char *arg) {
    return tool_usage_error(c->usage, "%s: unknown %s '%s'", c->name,
                            arg[0] == '-' ? "option" : "argument", arg);
}

int bench_parse_counts(int argc, char **argv, bench_common *c, const bench_count *counts,
                       size_t n) {
    char who[64];
    snprintf(who, sizeof who, "%s: ", c->name);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m = bench_common_option(argc, argv, &i, c);
        if (m == BENCH_OPTION_TAKEN) {
            continue;
        }
        if (m != BENCH_OPTION_OTHER) {
            return m;
        }
        size_t k = 0;
        while (k < n && (m = tool_option(argc, argv, &i, counts[k].name, &v)) == 0) {
            k++;
        }
        if (k == n) {
            return bench_unknown_argument(c, argv[i]);
        }
        int rc = tool_option_u64(c->usage, who, counts[k].name, m > 0 ? v : NULL, 1, counts[k].max,
                                 counts[k].value);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    return BENCH_OPTION_TAKEN;
}

int bench_device_open(const bench_common *c, acg_device **dev, const acg_capability **cap) {
    acg_status st = acg_device_open(c->backend, dev);
    if (st != ACG_OK) {
        char what[160];
        if (c->backend) {
            snprintf(what, sizeof what, "opening device '%s'", c->backend);
        } else {
            snprintf(what, sizeof what, "opening the default device");
        }
        return tool_fail(st, what);
    }
    if (cap) {
        *cap = acg_device_get_capability(*dev);
    }
    return TOOL_EXIT_OK;
}

int bench_device_close(acg_device *dev, int rc) {
    acg_status st = acg_device_close(dev);
    if (st != ACG_OK && rc == TOOL_EXIT_OK) {
        rc = tool_fail(st, "closing the device");
    }
    return rc;
}

#define DEVICE_NAME_SIZE (sizeof((acg_capability *)0)->name + 1)

/* The device's name, which the driver need not have NUL-terminated. */
static void device_name(const acg_device *dev, char *out, size_t size) {
    const acg_capability *cap = acg_device_get_capability(dev);
    snprintf(out, size, "%.*s", cap ? (int)sizeof cap->name : 0, cap ? cap->name : "");
}

void bench_print_title(const bench_common *c, const acg_device *dev) {
    char name[DEVICE_NAME_SIZE];
    device_name(dev, name, sizeof name);
    printf("acg %s on %s (%s)\n", c->name, acg_device_get_spec(dev), name);
}

void bench_json_device(tool_json *j, const acg_device *dev) {
    const acg_capability *cap = acg_device_get_capability(dev);
    char name[DEVICE_NAME_SIZE];
    device_name(dev, name, sizeof name);
    tool_json_string(j, "backend", cap ? cap->backend : NULL);
    tool_json_string(j, "device", acg_device_get_spec(dev));
    tool_json_string(j, "device_name", name);
}
