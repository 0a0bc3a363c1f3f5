/* kernel.c — the opencl backend's kernels: programs built once per device for each distinct
 * OpenCL C source (with argument info), each kernel's parameters checked against its
 * definition's calling convention when loaded, and launches. */
#include <stdio.h>
#include <string.h>

#include "opencl.h"

/* ---- kernels ----------------------------------------------------------------------------- */

/* The program built from the len bytes of OpenCL C at src (d->lock held): one per device for
 * each distinct text, so the kernels of one file (the model's, say) share a build. A failure
 * carries the build log and is not kept, so a later lookup reports it again. */
static acg_status find_program(ocl_device *d, const char *kernel, const char *src, size_t len,
                               cl_program *out) {
    static const char fn[] = "acg_kernel_get";
    for (uint32_t i = 0; i < d->n_programs; i++) {
        const char *text = d->programs[i].source;
        if (strlen(text) == len && memcmp(text, src, len) == 0) {
            *out = d->programs[i].program;
            return ACG_OK;
        }
    }
    /* The cache keeps its own copy, ending in NUL: a definition may be unregistered when no
     * kernel of this device was loaded from it, while its program stays here until the device
     * closes. */
    char *copy = acg__alloc(len + 1);
    if (copy == NULL || !acg__grow((void **)&d->programs, &d->cap_programs, d->n_programs + 1,
                                   sizeof *d->programs)) {
        acg__free(copy);
        return acg__error(ACG_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    memcpy(copy, src, len);
    copy[len] = '\0';
    cl_int err = CL_SUCCESS;
    cl_program p = clCreateProgramWithSource(d->ctx, 1, &src, &len, &err);
    if (err != CL_SUCCESS) {
        acg__free(copy);
        return acg__ocl_error(err, fn, "clCreateProgramWithSource");
    }
    /* Division and sqrt may otherwise be off by ulps, and results must match the cpu's bit for
     * bit; the option is only valid where the device offers it. The parameters' types and names
     * are kept for the check of every kernel loaded from this one build (check_params). */
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    const char *options =
        fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
            ? "-cl-std=CL1.2 -cl-kernel-arg-info -cl-fp32-correctly-rounded-divide-sqrt"
            : "-cl-std=CL1.2 -cl-kernel-arg-info";
    if (!(fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)) {
        acg__log(ACG_LOG_INFO, "opencl: the device rounds float division and sqrt its own way: "
                               "results may differ from the cpu backend's in the last bits");
    }
    err = clBuildProgram(p, 1, &d->id, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[1536] = "";
        clGetProgramBuildInfo(p, d->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        log[sizeof log - 1] = '\0';
        clReleaseProgram(p);
        acg__free(copy);
        return acg__error(ACG_ERR_DEVICE,
                          "%s: building the OpenCL C of kernel %s failed (clBuildProgram: %d); "
                          "build log:\n%s",
                          fn, kernel, (int)err, log);
    }
    d->programs[d->n_programs++] = (struct ocl_program){copy, p};
    *out = p;
    return ACG_OK;
}

/* ---- the calling convention, checked when a kernel is loaded ------------------------------ */

static const char buffer_rule[] =
    "each buffer argument is a __global pointer followed by a ulong offset";
static const char scalar_rule[] =
    "each scalar argument is one parameter of its type (int, uint, long, ulong, float)";

/* What acg passes at one parameter of argument `arg`: "buffer argument 0 (a __global pointer)",
 * "buffer argument 0's byte offset (ulong)" (offset) or "scalar argument 1 (float)". */
static void describe_passed(char *buf, size_t cap, uint32_t arg, acg_arg_type type, bool offset) {
    if (type != ACG_ARG_BUFFER) {
        snprintf(buf, cap, "scalar argument %u (%s)", (unsigned)arg, acg__arg_cl_type(type));
    } else if (offset) {
        snprintf(buf, cap, "buffer argument %u's byte offset (ulong)", (unsigned)arg);
    } else {
        snprintf(buf, cap, "buffer argument %u (a __global pointer)", (unsigned)arg);
    }
}

/* Whether a type name the driver reports is one of OpenCL C's scalar or vector types, which a
 * parameter is declared with directly; any other name (a typedef) may stand for the right type. */
static bool builtin_type(const char *name) {
    static const char *const scalars[] = {"bool", "char", "uchar", "short", "ushort", "int",
                                          "uint", "long", "ulong", "float", "double", "half"};
    size_t len = strlen(name);
    while (len > 0 && name[len - 1] >= '0' && name[len - 1] <= '9') {
        len--; /* float4, uint16 */
    }
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        if (strlen(scalars[i]) == len && strncmp(name, scalars[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* One string of a parameter's info; "" when the driver's answer would not fit. */
static cl_int arg_string(cl_kernel k, cl_uint p, cl_kernel_arg_info what, char *buf, size_t cap) {
    size_t size = 0;
    cl_int err = clGetKernelArgInfo(k, p, what, 0, NULL, &size);
    buf[0] = '\0';
    if (err == CL_SUCCESS && size <= cap) {
        err = clGetKernelArgInfo(k, p, what, cap, buf, NULL);
    }
    return err;
}

/* Compares parameter p of kernel k with what acg passes there (argument `arg`, its pointer or
 * its byte offset when a buffer). Where the driver tells nothing of the parameter
 * (CL_KERNEL_ARG_INFO_NOT_AVAILABLE: it need keep the info only for programs built with
 * -cl-kernel-arg-info, as find_program's are), *no_info is set and nothing is compared. */
static acg_status check_param(const acg__kernel_def *def, cl_kernel k, const char *entry, cl_uint p,
                              uint32_t arg, bool offset, bool *no_info) {
    acg_arg_type type = def->d.types[arg];
    cl_kernel_arg_address_qualifier space = 0;
    char tname[128], pname[128];
    cl_int err =
        clGetKernelArgInfo(k, p, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof space, &space, NULL);
    if (err == CL_SUCCESS) {
        err = arg_string(k, p, CL_KERNEL_ARG_TYPE_NAME, tname, sizeof tname);
    }
    if (err == CL_SUCCESS) {
        err = arg_string(k, p, CL_KERNEL_ARG_NAME, pname, sizeof pname);
    }
    if (err != CL_SUCCESS) {
        /* CL_KERNEL_ARG_INFO_NOT_AVAILABLE; a driver that answers otherwise is read the same. */
        *no_info = true;
        return ACG_OK;
    }
    const char *where = space == CL_KERNEL_ARG_ADDRESS_GLOBAL     ? "__global "
                        : space == CL_KERNEL_ARG_ADDRESS_LOCAL    ? "__local "
                        : space == CL_KERNEL_ARG_ADDRESS_CONSTANT ? "__constant "
                                                                  : "";
    /* A pointer's type name ends in '*'; an image is global memory without one. */
    bool pointer = space != CL_KERNEL_ARG_ADDRESS_PRIVATE && strchr(tname, '*') != NULL;
    bool image = strncmp(tname, "image", 5) == 0;
    bool aggregate = strncmp(tname, "struct ", 7) == 0 || strncmp(tname, "union ", 6) == 0 ||
                     strncmp(tname, "enum ", 5) == 0;
    bool fits;
    if (type == ACG_ARG_BUFFER && !offset) {
        fits = space == CL_KERNEL_ARG_ADDRESS_GLOBAL && !image;
    } else {
        const char *want = offset ? "ulong" : acg__arg_cl_type(type);
        fits = space == CL_KERNEL_ARG_ADDRESS_PRIVATE && !aggregate &&
               (!builtin_type(tname) || strcmp(tname, want) == 0);
    }
    if (fits) {
        return ACG_OK;
    }
    char is[160], passed[64];
    if (pointer) {
        snprintf(is, sizeof is, "a %spointer", where);
    } else if (tname[0] == '\0') {
        snprintf(is, sizeof is, "of another type");
    } else {
        bool an = strchr("aeio", tname[0]) != NULL; /* an int, an image2d_t; a uint */
        snprintf(is, sizeof is, "%s %s", an ? "an" : "a", tname);
    }
    describe_passed(passed, sizeof passed, arg, type, offset);
    return acg__error(ACG_ERR_INVALID_ARGUMENT,
                      "acg_kernel_get(%s): OpenCL kernel %s parameter %u (%s%s%s%s) is %s, where "
                      "acg passes %s: %s",
                      def->name, entry, (unsigned)p, where, tname, pname[0] != '\0' ? " " : "",
                      pname, is, passed, type == ACG_ARG_BUFFER ? buffer_rule : scalar_rule);
}

/* Compares the compiled kernel's parameters with the definition's arguments, each buffer two
 * parameters (a __global pointer, a ulong byte offset) and each scalar one of its type: their
 * number always, and each one's kind and type where the driver tells them. A mismatch would
 * otherwise surface at the first launch, or inside a capture only at its end, as a
 * clSetKernelArg code naming neither the kernel nor the parameter. */
static acg_status check_params(const acg__kernel_def *def, cl_kernel k, const char *entry) {
    cl_uint n_params = 0;
    if (clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof n_params, &n_params, NULL) != CL_SUCCESS) {
        return ACG_OK; /* nothing to compare with: a launch's clSetKernelArg names what fails */
    }
    uint32_t want = 0;
    char types[ACG_MAX_KERNEL_ARGS * 8] = ""; /* "buffer, float": the definition's arguments */
    size_t len = 0;
    for (uint32_t i = 0; i < def->d.n_args; i++) {
        bool buffer = def->d.types[i] == ACG_ARG_BUFFER;
        want += buffer ? 2 : 1;
        len += (size_t)snprintf(types + len, sizeof types - len, "%s%s", i ? ", " : "",
                                buffer ? "buffer" : acg__arg_cl_type(def->d.types[i]));
    }
    /* Parameter by parameter first: a kernel missing an offset is named where it goes wrong. */
    bool no_info = false;
    cl_uint p = 0;
    for (uint32_t i = 0; i < def->d.n_args && p < n_params && !no_info; i++) {
        bool buffer = def->d.types[i] == ACG_ARG_BUFFER;
        for (int part = 0; part < (buffer ? 2 : 1) && p < n_params && !no_info; part++, p++) {
            ACG__TRY(check_param(def, k, entry, p, i, part == 1, &no_info));
        }
    }
    if (n_params != want) {
        return acg__error(ACG_ERR_INVALID_ARGUMENT,
                          "acg_kernel_get(%s): OpenCL kernel %s has %u parameter%s, acg passes "
                          "%u for the definition's arguments (%s): %s, %s",
                          def->name, entry, (unsigned)n_params, n_params == 1 ? "" : "s",
                          (unsigned)want, types, buffer_rule, scalar_rule);
    }
    return ACG_OK;
}

acg_status acg__ocl_kernel_load(acg__bk_device *dev, const acg__kernel_def *def,
                                acg__bk_kernel **out) {
    static const char fn[] = "acg_kernel_get";
    ocl_device *d = acg__ocl_dev(dev);
    const acg_kernel_impl *impl = acg__kernel_impl_find(def, "opencl", ACG_KERNEL_FORMAT_OPENCL_C);
    if (impl == NULL) {
        return acg__error_no_kernel_code(fn, def->name, "opencl", ACG_KERNEL_FORMAT_OPENCL_C,
                                         "opencl.source");
    }
    const char *src = impl->code;
    const size_t len = impl->size != 0 ? impl->size : strlen(src);
    const char *entry = impl->entry != NULL ? impl->entry : def->name;
    cl_program program = NULL;
    pthread_mutex_lock(&d->lock);
    acg_status st = find_program(d, def->name, src, len, &program);
    pthread_mutex_unlock(&d->lock);
    if (st != ACG_OK) {
        return st;
    }
    ocl_kernel *k = acg__new(sizeof *k, fn);
    if (k == NULL) {
        return ACG_ERR_OUT_OF_MEMORY;
    }
    cl_int err = CL_SUCCESS;
    k->kernel = clCreateKernel(program, entry, &err);
    if (err != CL_SUCCESS) {
        acg__free(k);
        return acg__ocl_error(err, fn, entry);
    }
    if ((st = check_params(def, k->kernel, entry)) != ACG_OK) {
        clReleaseKernel(k->kernel);
        acg__free(k);
        return st;
    }
    k->program = program;
    k->name = entry; /* the definition outlives the kernel */
    pthread_mutex_init(&k->lock, NULL);
    *out = acg__ocl_bk_kernel(k);
    return ACG_OK;
}

void acg__ocl_kernel_unload(acg__bk_device *dev, acg__bk_kernel *kernel) {
    ACG__UNUSED(dev);
    ocl_kernel *k = acg__ocl_kernel(kernel);
    clReleaseKernel(k->kernel);
    pthread_mutex_destroy(&k->lock);
    acg__free(k);
}

acg_status acg__ocl_set_args(cl_kernel k, const char *name, const acg__karg *args, uint32_t n,
                             const char *fn) {
    cl_uint idx = 0;
    for (uint32_t i = 0; i < n; i++) {
        const acg__karg *a = &args[i];
        cl_int err = CL_SUCCESS;
        bool offset = false;
        size_t size;
        if (a->type == ACG_ARG_BUFFER) {
            cl_mem mem = acg__ocl_mem(a->value.buf.mem);
            cl_ulong off = a->value.buf.offset;
            size = sizeof mem;
            err = clSetKernelArg(k, idx, size, &mem);
            if (err == CL_SUCCESS) {
                idx++;
                offset = true;
                size = sizeof off;
                err = clSetKernelArg(k, idx, size, &off);
            }
        } else {
            size = a->type == ACG_ARG_I64 || a->type == ACG_ARG_U64 ? 8 : 4;
            err = clSetKernelArg(k, idx, size, &a->value);
        }
        if (err != CL_SUCCESS) {
            char passed[64], call[192];
            describe_passed(passed, sizeof passed, i, a->type, offset);
            snprintf(call, sizeof call,
                     "clSetKernelArg(OpenCL kernel %s parameter %u, %zu bytes for %s)", name,
                     (unsigned)idx, size, passed);
            return acg__ocl_error(err, fn, call);
        }
        idx++;
    }
    return ACG_OK;
}

cl_uint acg__ocl_dims(const acg_dims *dims, size_t global[3], size_t local[3], bool *has_local) {
    *has_local = dims->local[0] != 0;
    for (int d = 0; d < 3; d++) {
        global[d] = dims->global[d];
        local[d] = dims->local[d] ? dims->local[d] : 1; /* the core allows 0 where global is 1 */
    }
    return dims->global[2] > 1 || dims->local[2] > 1   ? 3
           : dims->global[1] > 1 || dims->local[1] > 1 ? 2
                                                       : 1;
}

acg_status acg__ocl_kernel_launch(acg__bk_stream *stream, acg__bk_kernel *kernel,
                                  const acg_dims *dims, const acg__karg *args, uint32_t n_args) {
    static const char fn[] = "acg_kernel_launch";
    ocl_stream *s = acg__ocl_stream(stream);
    ocl_kernel *k = acg__ocl_kernel(kernel);
    size_t global[3], local[3];
    bool has_local;
    cl_uint work_dim = acg__ocl_dims(dims, global, local, &has_local);
    pthread_mutex_lock(&k->lock);
    acg_status st = acg__ocl_set_args(k->kernel, k->name, args, n_args, fn);
    if (st == ACG_OK) {
        cl_event ev = NULL;
        OCL_CHECK(clEnqueueNDRangeKernel(s->queue, k->kernel, work_dim, NULL, global,
                                         has_local ? local : NULL, 0, NULL, &ev),
                  fn, out);
        acg__ocl_track(s, ev);
    }
out:
    pthread_mutex_unlock(&k->lock);
    return st;
}
