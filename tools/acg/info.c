/*
 * info.c — `acg info [--json]`: every backend compiled in, whether it can run here (and why
 * not), and each device with every capability field.
 *
 * Nothing is opened: backends are asked for their info and devices are described, so the
 * command works on a machine where a backend's driver is missing.
 */
#include "commands.h"
#include "tool_cli.h"
#include "tool_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acg/acg.h>
#include <acg/model.h>

const char cmd_info_usage[] = "usage: acg info [--json]\n";

#define MAX_BACKENDS 16
#define MAX_DEVICES 16 /* per backend; more are counted but not listed */

/* One backend with what acg_backend_get_info said about it and its devices' capabilities,
 * all gathered before anything is printed so a failure never leaves half a table or half a
 * JSON object on stdout. */
typedef struct backend_row {
    acg_backend_info info;
    int n_devices; /* devices described: device_count, at most MAX_DEVICES */
    acg_capability caps[MAX_DEVICES];
} backend_row;

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

/* Memory size for people: "15.5 GiB"; "-" when the driver reported none. */
static void format_bytes(uint64_t bytes, char *text, size_t size) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    if (bytes == 0) {
        snprintf(text, size, "-");
        return;
    }
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(text, size, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

/* Reads a backend's info and describes each of its devices, with the capability struct sized
 * as the header asks. */
static int gather(size_t index, backend_row *row) {
    char what[96];
    row->info.size = sizeof row->info;
    acg_status st = acg_backend_get_info(index, &row->info);
    if (st != ACG_OK) {
        snprintf(what, sizeof what, "reading backend %zu", index);
        return tool_fail(st, what);
    }
    row->n_devices = 0;
    if (!row->info.available) {
        return TOOL_EXIT_OK;
    }
    int n = row->info.device_count < MAX_DEVICES ? row->info.device_count : MAX_DEVICES;
    for (int d = 0; d < n; d++) {
        acg_capability *cap = &row->caps[d];
        memset(cap, 0, sizeof *cap);
        cap->size = sizeof *cap;
        st = acg_device_describe(row->info.name, d, cap);
        if (st != ACG_OK) {
            snprintf(what, sizeof what, "describing device %s:%d", row->info.name, d);
            return tool_fail(st, what);
        }
        row->n_devices++;
    }
    return TOOL_EXIT_OK;
}

/* Whether device d of backend is the default device def ("backend:N", or an ACG_DEVICE spec
 * such as "cpu" or "cpu:0?threads=2", which names device 0 when it gives no index). */
static bool is_default(const char *def, const char *backend, int d) {
    size_t n = strlen(backend);
    if (strncmp(def, backend, n) != 0) {
        return false;
    }
    const char *rest = def + n;
    if (*rest == '\0' || *rest == '?') {
        return d == 0;
    }
    if (*rest != ':') {
        return false;
    }
    char *end = NULL;
    long index = strtol(rest + 1, &end, 10);
    return end != rest + 1 && (*end == '\0' || *end == '?') && index == d;
}

/* ---- human table ----------------------------------------------------------------------------- */

static void print_table(const backend_row *rows, size_t n, const char *def) {
    static const char *const backend_headers[] = {"backend", "available", "devices", "reason"};
    static const int backend_widths[] = {-10, -9, 7, -6};
    tool_table t;
    tool_table_begin(&t, stdout, 4, backend_widths, backend_headers);
    int n_devices = 0;
    for (size_t b = 0; b < n; b++) {
        const acg_backend_info *bi = &rows[b].info;
        tool_table_cell(&t, "%s", bi->name);
        tool_table_cell(&t, "%s", yes_no(bi->available));
        tool_table_cell(&t, "%d", bi->device_count);
        tool_table_cell(&t, "%s", bi->reason && bi->reason[0] ? bi->reason : "-");
        n_devices += rows[b].n_devices;
    }
    if (n_devices == 0) {
        printf("\nno device available\n");
        return;
    }

    /* The name comes last: it is the one long column. */
    static const char *const dev_headers[] = {"device",       "default", "available",
                                              "pinned",       "graphs",  "update",
                                              "multi-stream", "memory",  "name"};
    static const int dev_widths[] = {-12, -7, -9, -6, -6, -6, -12, 10, -4};
    printf("\n");
    tool_table_begin(&t, stdout, 9, dev_widths, dev_headers);
    for (size_t b = 0; b < n; b++) {
        for (int d = 0; d < rows[b].n_devices; d++) {
            const acg_capability *cap = &rows[b].caps[d];
            char mem[32];
            format_bytes(cap->memory_bytes, mem, sizeof mem);
            tool_table_cell(&t, "%s:%d", rows[b].info.name, d);
            tool_table_cell(&t, "%s", is_default(def, rows[b].info.name, d) ? "*" : "");
            tool_table_cell(&t, "%s", yes_no(cap->available));
            tool_table_cell(&t, "%s", yes_no(cap->pinned_memory));
            tool_table_cell(&t, "%s", yes_no(cap->graphs));
            tool_table_cell(&t, "%s", yes_no(cap->graph_update));
            tool_table_cell(&t, "%s", yes_no(cap->multi_stream_capture));
            tool_table_cell(&t, "%s", mem);
            tool_table_cell(&t, "%.*s", (int)sizeof cap->name, cap->name);
        }
    }
    /* What each backend says of itself: versions, and why graphs are or are not there. */
    printf("\n");
    for (size_t b = 0; b < n; b++) {
        for (int d = 0; d < rows[b].n_devices; d++) {
            const acg_capability *cap = &rows[b].caps[d];
            printf("%s:%d: %.*s\n", rows[b].info.name, d, (int)sizeof cap->detail, cap->detail);
        }
    }
    printf("the reference model's cpu kernels: %s (ACG_CPU_SIMD chooses)\n", acg_model_cpu_simd());
    printf("default device (*): %s, which acg run and the benches open without --backend: %s\n",
           def[0] ? def : "none",
           getenv("ACG_DEVICE") && *getenv("ACG_DEVICE")
               ? "ACG_DEVICE names it"
               : "an accelerator with graphs first, else the cpu backend");
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static int print_json(const backend_row *rows, size_t n, const char *def) {
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", ACG_VERSION_MAJOR, ACG_VERSION_MINOR,
             ACG_VERSION_PATCH);
    tool_json j;
    tool_json_begin(&j, stdout);
    tool_json_object_begin(&j, NULL);
    tool_json_string(&j, "version", version);
    tool_json_array_begin(&j, "backends");
    for (size_t b = 0; b < n; b++) {
        const acg_backend_info *bi = &rows[b].info;
        tool_json_object_begin(&j, NULL);
        tool_json_string(&j, "name", bi->name);
        tool_json_bool(&j, "available", bi->available);
        tool_json_string(&j, "reason", bi->reason ? bi->reason : "");
        tool_json_int(&j, "device_count", bi->device_count);
        tool_json_array_begin(&j, "devices");
        for (int d = 0; d < rows[b].n_devices; d++) {
            const acg_capability *cap = &rows[b].caps[d];
            char spec[64];
            char name[sizeof cap->name + 1];
            snprintf(spec, sizeof spec, "%s:%d", bi->name, d);
            snprintf(name, sizeof name, "%.*s", (int)sizeof cap->name, cap->name);
            tool_json_object_begin(&j, NULL);
            tool_json_int(&j, "index", d);
            tool_json_string(&j, "spec", spec);
            tool_json_string(&j, "name", name);
            tool_json_bool(&j, "default", is_default(def, bi->name, d));
            tool_json_bool(&j, "available", cap->available);
            tool_json_bool(&j, "host_cpu", cap->host_cpu);
            tool_json_uint(&j, "host_threads", cap->host_threads);
            tool_json_bool(&j, "pinned_memory", cap->pinned_memory);
            tool_json_bool(&j, "graphs", cap->graphs);
            tool_json_bool(&j, "graph_update", cap->graph_update);
            tool_json_bool(&j, "graph_node_update", cap->graph_node_update);
            tool_json_bool(&j, "graph_node_update_grid", cap->graph_node_update_grid);
            tool_json_bool(&j, "graph_pinned_replay", cap->graph_pinned_replay);
            tool_json_bool(&j, "multi_stream_capture", cap->multi_stream_capture);
            tool_json_bool(&j, "native_capture", cap->native_capture);
            tool_json_bool(&j, "collectives", cap->collectives);
            tool_json_uint(&j, "memory_bytes", cap->memory_bytes);
            char detail[sizeof cap->detail + 1];
            snprintf(detail, sizeof detail, "%.*s", (int)sizeof cap->detail, cap->detail);
            tool_json_string(&j, "detail", detail);
            tool_json_object_end(&j);
        }
        tool_json_array_end(&j);
        tool_json_object_end(&j);
    }
    tool_json_array_end(&j);
    tool_json_string(&j, "default_device", def[0] ? def : NULL);
    tool_json_string(&j, "model_cpu_simd", acg_model_cpu_simd());
    tool_json_object_end(&j);
    return tool_json_end(&j);
}

/* ---- entry ----------------------------------------------------------------------------------- */

int cmd_info(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (tool_is_help(argv[i])) {
            fputs(cmd_info_usage, stdout);
            return TOOL_EXIT_OK;
        } else {
            return tool_usage_error(cmd_info_usage, "info: unknown %s '%s'",
                                    argv[i][0] == '-' ? "option" : "argument", argv[i]);
        }
    }

    static backend_row rows[MAX_BACKENDS]; /* ~45 KiB: kept off the stack */
    size_t n = acg_backend_count();
    if (n > MAX_BACKENDS) {
        n = MAX_BACKENDS;
    }
    for (size_t b = 0; b < n; b++) {
        int rc = gather(b, &rows[b]);
        if (rc != TOOL_EXIT_OK) {
            return rc;
        }
    }
    /* The device acg_device_open(NULL) opens; none when nothing is available. */
    char def[256] = "";
    if (acg_device_get_default(def, sizeof def) != ACG_OK) {
        def[0] = '\0';
    }
    if (json) {
        return print_json(rows, n, def);
    }
    print_table(rows, n, def);
    return TOOL_EXIT_OK;
}
