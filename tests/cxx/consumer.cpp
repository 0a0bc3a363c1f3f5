// consumer.cpp — the public headers from C++: acg.h, engine.h, model.h and trace.h compile in a
// C++ translation unit without warnings, every _INIT macro initializes its struct, and the C
// library links and runs behind the extern "C" guards. Built only when a C++ compiler is found;
// CTest runs it as cxx_consumer on the cpu backend.
#include <acg/acg.h>
#include <acg/engine.h>
#include <acg/model.h>
#include <acg/trace.h>

#include <cstdio>
#include <cstring>

namespace {

int failures = 0;

void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "cxx_consumer: %s failed (%s)\n", what, acg_last_error());
        failures++;
    }
}

// Each _INIT macro must be a valid C++ initializer and give the struct its size.
void check_init_macros() {
    acg_backend_info backend_info = ACG_BACKEND_INFO_INIT;
    acg_kernel_desc kernel_desc = ACG_KERNEL_DESC_INIT;
    acg_memory_stats memory_stats = ACG_MEMORY_STATS_INIT;
    acg_stager_config stager_config = ACG_STAGER_CONFIG_INIT;
    acg_stager_stats stager_stats = ACG_STAGER_STATS_INIT;
    acg_kv_config kv_config = ACG_KV_CONFIG_INIT;
    acg_attn_plan_config plan_config = ACG_ATTN_PLAN_CONFIG_INIT;
    acg_attn_plan_views plan_views = ACG_ATTN_PLAN_VIEWS_INIT;
    acg_attn_plan_stats plan_stats = ACG_ATTN_PLAN_STATS_INIT;
    acg_comm comm = ACG_COMM_INIT;
    acg_recipe recipe = ACG_RECIPE_INIT;
    acg_runner_config runner_config = ACG_RUNNER_CONFIG_INIT;
    acg_bucket_report bucket_report = ACG_BUCKET_REPORT_INIT;
    acg_model_config model_config = ACG_MODEL_CONFIG_INIT;
    acg_model_options model_options = ACG_MODEL_OPTIONS_INIT;
    acg_request request = ACG_REQUEST_INIT;
    acg_request_status request_status = ACG_REQUEST_STATUS_INIT;
    acg_step_report step_report = ACG_STEP_REPORT_INIT;
    acg_model_stats model_stats = ACG_MODEL_STATS_INIT;
    acg_trace_config trace_config = ACG_TRACE_CONFIG_INIT;
    acg_native_handle native_handle = ACG_NATIVE_HANDLE_INIT;
    acg_native_buffer native_buffer = ACG_NATIVE_BUFFER_INIT;
    acg_native_device native_device = ACG_NATIVE_DEVICE_INIT;
    expect(native_handle.size == sizeof native_handle && native_handle.handle == NULL,
           "ACG_NATIVE_HANDLE_INIT");
    expect(native_buffer.size == sizeof native_buffer && native_buffer.address == 0,
           "ACG_NATIVE_BUFFER_INIT");
    expect(native_device.size == sizeof native_device && native_device.context == NULL,
           "ACG_NATIVE_DEVICE_INIT");
    expect(backend_info.size == sizeof backend_info, "ACG_BACKEND_INFO_INIT");
    expect(kernel_desc.size == sizeof kernel_desc && kernel_desc.dims == 1 &&
               kernel_desc.cpu_parts.parts == NULL && kernel_desc.cpu_parts.fn == NULL &&
               kernel_desc.flags == 0 && kernel_desc.reach[ACG_MAX_KERNEL_ARGS - 1].bytes == 0 &&
               kernel_desc.grid_covers[2] == ACG_BY_ONE,
           "ACG_KERNEL_DESC_INIT");
    expect(memory_stats.size == sizeof memory_stats, "ACG_MEMORY_STATS_INIT");
    expect(stager_config.size == sizeof stager_config && stager_config.depth == 8,
           "ACG_STAGER_CONFIG_INIT");
    expect(stager_stats.size == sizeof stager_stats, "ACG_STAGER_STATS_INIT");
    expect(kv_config.size == sizeof kv_config && kv_config.page_size == 16, "ACG_KV_CONFIG_INIT");
    expect(plan_config.size == sizeof plan_config, "ACG_ATTN_PLAN_CONFIG_INIT");
    expect(plan_views.size == sizeof plan_views, "ACG_ATTN_PLAN_VIEWS_INIT");
    expect(plan_stats.size == sizeof plan_stats, "ACG_ATTN_PLAN_STATS_INIT");
    expect(comm.size == sizeof comm && comm.barrier == NULL, "ACG_COMM_INIT");
    expect(recipe.size == sizeof recipe && recipe.forward == NULL, "ACG_RECIPE_INIT");
    expect(runner_config.size == sizeof runner_config && runner_config.graphs == ACG_GRAPHS_AUTO,
           "ACG_RUNNER_CONFIG_INIT");
    expect(bucket_report.size == sizeof bucket_report, "ACG_BUCKET_REPORT_INIT");
    expect(model_config.size == sizeof model_config, "ACG_MODEL_CONFIG_INIT");
    expect(model_options.size == sizeof model_options && model_options.max_batch == 32,
           "ACG_MODEL_OPTIONS_INIT");
    expect(request.size == sizeof request && request.top_p == 1.0f, "ACG_REQUEST_INIT");
    expect(request_status.size == sizeof request_status, "ACG_REQUEST_STATUS_INIT");
    expect(step_report.size == sizeof step_report, "ACG_STEP_REPORT_INIT");
    expect(model_stats.size == sizeof model_stats, "ACG_MODEL_STATS_INIT");
    expect(trace_config.size == sizeof trace_config && trace_config.fn == NULL &&
               trace_config.categories == ACG_TRACE_ALL,
           "ACG_TRACE_CONFIG_INIT");
}

// A few calls of each layer, through the C library.
void check_calls() {
    expect(std::strcmp(acg_status_name(ACG_ERR_OUT_OF_MEMORY), "ACG_ERR_OUT_OF_MEMORY") == 0,
           "acg_status_name");
    acg_backend_info info = ACG_BACKEND_INFO_INIT;
    expect(acg_backend_get_info(0, &info) == ACG_OK && info.name != NULL, "acg_backend_get_info");

    acg_device *dev = NULL;
    if (acg_device_open("cpu", &dev) != ACG_OK) {
        expect(false, "acg_device_open(\"cpu\")");
        return;
    }
    acg_stream *stream = NULL;
    expect(acg_stream_create(dev, &stream) == ACG_OK, "acg_stream_create");
    acg_buffer *buf = NULL;
    expect(acg_buffer_alloc(dev, 64 * sizeof(float), &buf) == ACG_OK, "acg_buffer_alloc");
    acg_kernel *fill = NULL;
    expect(acg_kernel_get(dev, "fill_f32", &fill) == ACG_OK, "acg_kernel_get");
    if (stream != NULL && buf != NULL && fill != NULL) {
        acg_dims dims = acg_dims_1d(64);
        acg_arg args[] = {acg_arg_buffer(buf, 0), acg_arg_f32(2.5f)};
        float host[64] = {0};
        expect(acg_kernel_launch(stream, fill, &dims, args, 2) == ACG_OK, "acg_kernel_launch");
        expect(acg_copy_d2h(stream, host, buf, 0, sizeof host) == ACG_OK, "acg_copy_d2h");
        expect(host[0] == 2.5f && host[63] == 2.5f, "the filled buffer");
    }

    acg_stager_config stager_config = ACG_STAGER_CONFIG_INIT;
    stager_config.depth = 2;
    acg_stager *stager = NULL;
    expect(acg_stager_create(dev, &stager_config, &stager) == ACG_OK, "acg_stager_create");
    acg_stager_stats stats = ACG_STAGER_STATS_INIT;
    expect(acg_stager_get_stats(stager, &stats) == ACG_OK && stats.copies == 0,
           "acg_stager_get_stats");

    acg_model_config tiny = ACG_MODEL_CONFIG_INIT;
    expect(acg_model_preset_get_config("tiny", &tiny) == ACG_OK && tiny.dim == 64,
           "acg_model_preset_get_config");

    acg_memory_stats memory = ACG_MEMORY_STATS_INIT;
    expect(acg_device_get_memory_stats(dev, &memory) == ACG_OK && memory.bytes_in_use > 0,
           "acg_device_get_memory_stats");

    expect(acg_stager_destroy(stager) == ACG_OK, "acg_stager_destroy");
    expect(acg_buffer_free(buf) == ACG_OK, "acg_buffer_free");
    expect(acg_stream_destroy(stream) == ACG_OK, "acg_stream_destroy");
    expect(acg_device_close(dev) == ACG_OK, "acg_device_close");
}

} // namespace

int main() {
    check_init_macros();
    check_calls();
    if (failures == 0) {
        std::printf("cxx_consumer: the public headers work from C++\n");
    }
    return failures == 0 ? 0 : 1;
}
