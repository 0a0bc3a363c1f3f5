/* test_kernel_register_impls.c — where a registered kernel's code comes from, and under which
 * name: implementations as a list (acg_kernel_desc.impls), merged with the legacy fields,
 * copied, and found by each backend for its format; the core's kernels' lists; and kernels
 * registered as a set, under "<set>/<name>", all or nothing. The kernel and its host reference
 * are kernel_register_fixture.h's. */
#include "kernel_register_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/acg-impl.h" /* a loaded kernel's definition, the core's kernels */

/* The lookups the cuda and level_zero backends hand their test drivers. */
static const acg_kernel_desc *find_cuda(const void *image, size_t size, const char *function) {
    return acg__kernel_desc_find("cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE, image, size, function);
}
static const acg_kernel_desc *find_spirv(const char *function) {
    return acg__kernel_desc_find("level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL, NULL, 0, function);
}

/* ---- sets ----------------------------------------------------------------------------------- */

/* Kernels registered as a set: under "<set>/<name>", apart from another library's kernel of the
 * same name; all or nothing both ways. */
static void test_kernel_sets(void **state) {
    (void)state;
    acg_kernel_desc two[2] = {rowscale_desc("rowscale"), rowscale_desc("scale_rows")};
    TC_OK(acg_kernel_register_set("engine_a", two, 2));
    TC_OK(acg_kernel_register_set("engine_b", two, 1)); /* a "rowscale" of its own */
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_a", two + 1, 1));
    TC_LAST_ERROR_HAS("the set \"engine_a\" is already registered");
    acg_device *dev = tc_open();
    acg_kernel *a = NULL, *b = NULL, *k = NULL;
    TC_OK(acg_kernel_get(dev, "engine_a/rowscale", &a));
    TC_OK(acg_kernel_get(dev, "engine_b/rowscale", &b));
    assert_ptr_not_equal(a, b);
    assert_string_equal(acg_kernel_get_name(a), "engine_a/rowscale");
    TC_OK(acg_kernel_get(dev, "engine_a/scale_rows", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "rowscale", &k));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_get(dev, "engine_b/scale_rows", &k));
    /* Loaded on an open device: none of the set goes. */
    TC_EXPECT(ERR_IN_USE, acg_kernel_unregister_set("engine_a"));
    TC_LAST_ERROR_HAS("engine_a/rowscale is loaded on 1 open device(s)");
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_a"));
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_a"));
    TC_LAST_ERROR_HAS("no kernel of the set \"engine_a\"");
    TC_OK(acg_kernel_unregister("engine_b/rowscale")); /* one kernel of a set, by its name */

    /* A set's kernel whose implementations name no function runs the function of its own name
     * (tk_rowscale), not of the set's name for it: loaded and launched on the device under
     * test, the result the host's. */
    acg_kernel_desc plain = rowscale_desc("tk_rowscale");
    plain.opencl.name = NULL;
    plain.cuda.name = NULL;
    plain.spirv.name = NULL;
    TC_OK(acg_kernel_register_set("engine_e", &plain, 1));
    dev = tc_open();
    expect_rowscale_runs(dev, "engine_e/tk_rowscale");
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_e"));

    /* A refused definition keeps the whole set out, naming its index and field. */
    acg_kernel_desc bad[3] = {rowscale_desc("first"), rowscale_desc("second"),
                              rowscale_desc("third")};
    bad[1].dims = 4;
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("acg_kernel_register_set(engine_c): desc[1](second): dims is 4");
    bad[1] = rowscale_desc("first");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("the name \"engine_c/first\" is in desc twice");
    bad[1] = rowscale_desc("sub/name");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_c", bad, 3));
    TC_LAST_ERROR_HAS("desc[1]: the name \"sub/name\" has a '/'");
    TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_c"));

    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set(NULL, two, 2));
    TC_LAST_ERROR_HAS("the set's name NULL must be 1 to 64 characters without '/'");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("", two, 2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("a/b", two, 2));
    TC_LAST_ERROR_HAS("\"a/b\" must be");
    char long_name[80];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set(long_name, two, 2));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", two, 0));
    TC_LAST_ERROR_HAS("n is 0");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", NULL, 2));
    TC_LAST_ERROR_HAS("desc is NULL");
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_d", two, UINT32_MAX));
    TC_LAST_ERROR_HAS("n is too large");

    /* The array's stride is its structs' size: structs from newer headers (longer, their new
     * fields zero) are read one after another, and a size that differs is refused. */
    struct newer {
        acg_kernel_desc d;
        uint64_t fields[2];
    } longer[2];
    memset(longer, 0, sizeof longer);
    longer[0].d = rowscale_desc("rowscale");
    longer[1].d = rowscale_desc("scale_rows");
    longer[0].d.size = longer[1].d.size = sizeof longer[0];
    TC_OK(acg_kernel_register_set("engine_f", &longer[0].d, 2));
    TC_OK(acg_kernel_unregister("engine_f/scale_rows")); /* the second struct, by its name */
    TC_OK(acg_kernel_unregister_set("engine_f"));
    two[1].size = offsetof(acg_kernel_desc, cpu_parts);
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_register_set("engine_f", two, 2));
    TC_LAST_ERROR_HAS("desc[1]: size");
    TC_LAST_ERROR_HAS("the structs of one array share one size");
    two[1].size = sizeof two[1];
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister_set(NULL));
    TC_EXPECT(ERR_INVALID_ARGUMENT, acg_kernel_unregister_set("a/b"));
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered, nothing held */
}

/* A set's copies under failing allocations: each failure registers nothing. */
static acg_status register_set_once(void *ctx) {
    const acg_kernel_desc *two = ctx;
    acg_status st = acg_kernel_register_set("engine_oom", two, 2);
    if (st == ACG_OK) {
        TC_OK(acg_kernel_unregister_set("engine_oom"));
    } else {
        TC_EXPECT(ERR_NOT_FOUND, acg_kernel_unregister_set("engine_oom"));
    }
    return st;
}

static void test_kernel_set_out_of_memory(void **state) {
    (void)state;
    acg_kernel_desc two[2] = {rowscale_desc("rowscale"), rowscale_desc("scale_rows")};
    tc_alloc_install();
    /* The array of copies, each copy and each full name, and the registry's growth. */
    assert_true(tc_alloc_sweep(register_set_once, two, false) >= 5);
    assert_int_equal(tc_alloc_live(), 0);
    tc_alloc_uninstall();
}

/* ---- implementations as a list (acg_kernel_desc.impls) ------------------------------------ */

/* Kernel `name`, whose code is rowscale_impls', runs on dev where the build has code for its
 * backend, and is refused for want of code elsewhere. */
static void expect_runs_where_coded(acg_device *dev, const char *name) {
    if (dut_has_rowscale_code()) {
        expect_rowscale_runs(dev, name);
    } else {
        expect_no_code(dev, name);
    }
}

/* A kernel whose only code besides its C function is an impls entry of OpenCL C for opencl:
 * the opencl backend builds and runs it, with the C function's bits; a backend that loads
 * another format finds nothing for it and refuses the kernel. The text may also be given by
 * its length, without a NUL (followed here by bytes that would not build). */
static void test_impls_opencl_entry(void **state) {
    (void)state;
    const size_t len = strlen(rowscale_cl);
    char *unended = malloc(len + 8);
    memcpy(unended, rowscale_cl, len);
    memcpy(unended + len, "#error\n", 8); /* 8 bytes, no NUL */
    const acg_kernel_impl cl[2] = {
        {"opencl", ACG_KERNEL_FORMAT_OPENCL_C, rowscale_cl, 0, "tk_rowscale"},
        {"opencl", ACG_KERNEL_FORMAT_OPENCL_C, unended, len, "tk_rowscale"},
    };
    const char *const names[2] = {"tk_impl_opencl", "tk_impl_opencl_len"};
    for (int i = 0; i < 2; i++) {
        const acg_kernel_desc d = rowscale_desc_impls(names[i], &cl[i], 1);
        TC_OK(acg_kernel_register(&d));
    }
    free(unended);
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    for (int i = 0; i < 2; i++) {
        expect_rowscale_runs(cpu, names[i]);
        if (tc_backend_is("cpu") || tc_backend_is("opencl")) {
            expect_rowscale_runs(dev, names[i]);
        } else {
            expect_no_code(dev, names[i]);
            TC_LAST_ERROR_HAS("implementation");
        }
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_opencl"));
    TC_OK(acg_kernel_unregister("tk_impl_opencl_len"));
}

/* A SPIR-V module is binary: an entry of that format given as text (size 0) registers, as the
 * format is the backend's to read, and the level_zero backend refuses it naming the size. */
static void test_impls_spirv_as_text(void **state) {
    (void)state;
    const acg_kernel_impl text = {NULL, ACG_KERNEL_FORMAT_SPIRV_OPENCL, "no module", 0, NULL};
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_spirv_text", &text, 1);
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    if (tc_backend_is("level_zero")) {
        acg_kernel *k = NULL;
        TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_kernel_get(dev, "tk_impl_spirv_text", &k),
                      "tk_impl_spirv_text: its spirv-opencl implementation has size 0");
    } else if (tc_backend_is("cpu")) {
        expect_rowscale_runs(dev, "tk_impl_spirv_text");
    } else {
        expect_no_code(dev, "tk_impl_spirv_text");
    }
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_spirv_text"));
}

/* One merged list: the caller's entries first, an entry of a format no backend takes passed
 * over, entries without a backend serving every backend of their format, then one for each
 * legacy field, which a backend then never reaches (the legacy OpenCL C here would not build).
 * Every backend the build has code for runs the kernel with the C function's bits. */
static void test_impls_merged_list(void **state) {
    (void)state;
    const uint32_t junk[4] = {1, 2, 3, 4};
    acg_kernel_impl list[1 + ROWSCALE_MAX_IMPLS] = {
        {"vulkan", "vulkan-spirv", junk, sizeof junk, "tk_rowscale"}};
    const uint32_t n = 1 + rowscale_impls(list + 1, "tk_rowscale");
    acg_kernel_desc d = rowscale_desc_impls("tk_impl_merged", list, n);
    d.opencl.source = "this is not OpenCL C";
    TC_OK(acg_kernel_register(&d));
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_impl_merged", &k));
    const acg__kernel_def *def = k->def;
    assert_int_equal(def->d.n_impls, n + 1);
    assert_string_equal(def->d.impls[0].format, "vulkan-spirv");
    const acg_kernel_impl *legacy = &def->d.impls[n];
    assert_null(legacy->backend); /* for every backend that takes the format: the core names none */
    assert_string_equal(legacy->format, ACG_KERNEL_FORMAT_OPENCL_C);
    assert_string_equal(legacy->code, "this is not OpenCL C");
    assert_int_equal(legacy->size, 0);
    assert_string_equal(legacy->entry, "tk_impl_merged"); /* the kernel's name: none given */
    const acg_kernel_impl *cl = acg__kernel_impl_find(def, "opencl", ACG_KERNEL_FORMAT_OPENCL_C);
    assert_ptr_equal(cl, &def->d.impls[1]); /* backend NULL: every backend's of the format */
    assert_ptr_equal(acg__kernel_impl_find(def, "cuda", ACG_KERNEL_FORMAT_OPENCL_C), cl);
    assert_ptr_equal(acg__kernel_impl_find(def, "vulkan", "vulkan-spirv"), &def->d.impls[0]);
    assert_null(acg__kernel_impl_find(def, "other", "vulkan-spirv"));
    expect_rowscale_runs(cpu, "tk_impl_merged");
    expect_runs_where_coded(dev, "tk_impl_merged");
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_merged"));
}

/* A definition whose only code is of a format no backend here takes registers (a later version
 * may take it), and every backend refuses it: the cpu backend too, having no cpu.fn. Nothing
 * loaded it, so it unregisters with the devices open. */
static void test_impls_unknown_format(void **state) {
    (void)state;
    const uint32_t words[2] = {0x07230203u, 0x00010000u};
    const acg_kernel_impl vk = {"vulkan", "vulkan-spirv", words, sizeof words, NULL};
    acg_kernel_desc d = rowscale_desc_impls("tk_impl_vulkan", &vk, 1);
    d.cpu.fn = NULL;
    TC_OK(acg_kernel_register(&d));
    acg_device *cpu = tc_open_cpu(), *dev = tc_open();
    expect_no_code(cpu, "tk_impl_vulkan");
    expect_no_code(dev, "tk_impl_vulkan");
    TC_OK(acg_kernel_unregister("tk_impl_vulkan"));
    tc_close(cpu);
    tc_close(dev);
}

/* cuda_lanes needs a cuda image, which an impls entry may be (for cuda, or for every backend of
 * the format); a list of ACG_MAX_KERNEL_IMPLS entries registers. Nothing is loaded: the image
 * is any bytes. */
static void test_impls_lanes_and_limit(void **state) {
    (void)state;
    const char *const backends[2] = {"cuda", NULL};
    for (int i = 0; i < 2; i++) {
        const acg_kernel_impl image = {backends[i], ACG_KERNEL_FORMAT_CUDA_IMAGE, rowscale_cl, 16,
                                       NULL};
        acg_kernel_desc d = rowscale_desc_impls("tk_impl_lanes", &image, 1);
        d.cuda_lanes = 32;
        TC_OK(acg_kernel_register(&d));
        TC_OK(acg_kernel_unregister("tk_impl_lanes"));
        d.n_impls = 0;
        if (acg__backend_find("cuda") == NULL) {
            printf("skipped: cuda_lanes without a cuda image (the cuda backend checks it; this "
                   "build lacks it)\n");
            continue;
        }
        TC_EXPECT_HAS(ERR_INVALID_ARGUMENT, acg_kernel_register(&d),
                      "cuda_lanes without a cuda-image implementation");
    }
    static acg_kernel_impl most[ACG_MAX_KERNEL_IMPLS];
    for (size_t i = 0; i < ACG_MAX_KERNEL_IMPLS; i++) {
        most[i] = (acg_kernel_impl){"vulkan", "vulkan-spirv", rowscale_cl, 0, NULL};
    }
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_most", most, ACG_MAX_KERNEL_IMPLS);
    TC_OK(acg_kernel_register(&d));
    TC_OK(acg_kernel_unregister("tk_impl_most"));
    TC_OK(acg_set_allocator(NULL, NULL)); /* nothing registered */
}

/* A caller from headers before impls: its struct ends where impls begins, and what lies past
 * it (here garbage where impls would be) is never read; its opencl.source still runs. */
static void test_impls_legacy_size(void **state) {
    (void)state;
    acg_kernel_desc d = rowscale_desc("tk_before_impls");
    d.size = offsetof(acg_kernel_desc, impls);
    d.impls = (const acg_kernel_impl *)(uintptr_t)0x10;
    d.n_impls = 3;
    TC_OK(acg_kernel_register(&d));
    acg_device *dev = tc_open();
    if (tc_backend_is("vulkan")) {
        /* Vulkan's code has no legacy field: such a definition has none for it. */
        expect_no_code(dev, "tk_before_impls");
        tc_close(dev);
        dev = tc_open_cpu();
    } else {
        expect_rowscale_runs(dev, "tk_before_impls");
    }
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "tk_before_impls", &k));
    /* The legacy fields are the list: each as its entry, in their order. */
    const acg_kernel_desc *copy = &k->def->d;
    assert_true(copy->n_impls >= 1 && copy->n_impls <= 3);
    assert_string_equal(copy->impls[0].format, ACG_KERNEL_FORMAT_OPENCL_C);
    assert_ptr_equal(copy->impls[0].code, copy->opencl.source);
    assert_string_equal(copy->impls[0].entry, "tk_rowscale");
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_before_impls"));
}

/* The list is copied, its strings and code included: the caller may free them at once. Binary
 * code lands 16-aligned, text keeps its NUL. */
static void test_impls_copied(void **state) {
    (void)state;
    acg_kernel_impl from[ROWSCALE_MAX_IMPLS];
    const uint32_t n = rowscale_impls(from, "tk_rowscale");
    acg_kernel_impl *heap = malloc(n * sizeof *heap);
    for (uint32_t i = 0; i < n; i++) {
        const acg_kernel_impl *e = &from[i];
        size_t bytes = e->size != 0 ? e->size : strlen(e->code) + 1;
        void *code = malloc(bytes);
        memcpy(code, e->code, bytes);
        heap[i] = (acg_kernel_impl){e->backend != NULL ? strdup(e->backend) : NULL,
                                    strdup(e->format), code, e->size, strdup(e->entry)};
    }
    const acg_kernel_desc d = rowscale_desc_impls("tk_impl_copied", heap, n);
    TC_OK(acg_kernel_register(&d));
    for (uint32_t i = 0; i < n; i++) {
        size_t bytes = heap[i].size != 0 ? heap[i].size : strlen(heap[i].code) + 1;
        memset((void *)heap[i].code, 0x5a, bytes);
        free((void *)heap[i].code);
        free((void *)heap[i].backend);
        free((void *)heap[i].format);
        free((void *)heap[i].entry);
    }
    memset(heap, 0x5a, n * sizeof *heap);
    free(heap);

    acg_device *dev = tc_open();
    expect_runs_where_coded(dev, "tk_impl_copied");
    acg_device *cpu = tc_open_cpu();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "tk_impl_copied", &k));
    const acg_kernel_desc *copy = &k->def->d;
    assert_int_equal(copy->n_impls, n);
    for (uint32_t i = 0; i < n; i++) {
        const acg_kernel_impl *c = &copy->impls[i];
        assert_string_equal(c->format, from[i].format);
        assert_string_equal(c->entry, "tk_rowscale");
        assert_int_equal(c->size, from[i].size);
        if (from[i].backend == NULL) {
            assert_null(c->backend);
        } else {
            assert_string_equal(c->backend, from[i].backend);
        }
        if (c->size != 0) {
            assert_int_equal((uintptr_t)c->code % 16, 0);
            assert_memory_equal(c->code, from[i].code, c->size);
        } else {
            assert_string_equal(c->code, from[i].code);
        }
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister("tk_impl_copied"));
}

/* In a set, an entry that names no function runs the one of the definition's own name
 * (tk_rowscale), not of the set's name for it. */
static void test_impls_in_set(void **state) {
    (void)state;
    acg_kernel_impl list[ROWSCALE_MAX_IMPLS];
    const uint32_t n = rowscale_impls(list, NULL);
    const acg_kernel_desc d = rowscale_desc_impls("tk_rowscale", list, n);
    TC_OK(acg_kernel_register_set("engine_i", &d, 1));
    acg_device *dev = tc_open();
    expect_runs_where_coded(dev, "engine_i/tk_rowscale");
    acg_device *cpu = tc_open_cpu();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(cpu, "engine_i/tk_rowscale", &k));
    for (uint32_t i = 0; i < k->def->d.n_impls; i++) {
        assert_string_equal(k->def->d.impls[i].entry, "tk_rowscale");
    }
    tc_close(cpu);
    tc_close(dev);
    TC_OK(acg_kernel_unregister_set("engine_i"));
}

/* The core's kernels are not copied at registration: their definitions carry the list their one
 * source built (OpenCL C always, a fatbin and SPIR-V where the build has the tools) and no
 * legacy fields, and the test drivers' lookups find them by function. */
static void test_impls_core(void **state) {
    (void)state;
    size_t n_core = 0;
    const acg__kernel_def *core = acg__core_kernels(&n_core);
    for (size_t i = 0; i < n_core; i++) {
        const acg__kernel_def *c = &core[i];
        const acg_kernel_impl *cl = acg__kernel_impl_find(c, "opencl", ACG_KERNEL_FORMAT_OPENCL_C);
        assert_non_null(cl);
        assert_int_equal(cl->size, 0); /* text */
        assert_non_null(strstr(cl->code, c->name));
        assert_string_equal(cl->entry, c->name);
        assert_null(c->d.opencl.source);
        const acg_kernel_impl *cu = acg__kernel_impl_find(c, "cuda", ACG_KERNEL_FORMAT_CUDA_IMAGE);
        const acg_kernel_impl *spv =
            acg__kernel_impl_find(c, "level_zero", ACG_KERNEL_FORMAT_SPIRV_OPENCL);
#ifdef ACG_HAVE_CUDA_KERNELS
        assert_non_null(cu);
        assert_true(cu->size > 0);
        assert_null(c->d.cuda.fatbin);
        assert_ptr_equal(find_cuda(cu->code, cu->size, c->name), &c->d);
        assert_ptr_equal(find_cuda(NULL, 0, c->name), &c->d);
#else
        assert_null(cu);
        assert_null(find_cuda(NULL, 0, c->name));
#endif
#ifdef ACG_HAVE_SPIRV_KERNELS
        assert_non_null(spv);
        assert_true(spv->size > 0 && spv->size % 4 == 0);
        assert_null(c->d.spirv.module);
        assert_ptr_equal(find_spirv(c->name), &c->d);
#else
        assert_null(spv);
        assert_null(find_spirv(c->name));
#endif
    }
    assert_null(find_cuda(NULL, 0, "no_such_function"));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_kernel_sets),
    cmocka_unit_test(test_kernel_set_out_of_memory),
    cmocka_unit_test(test_impls_opencl_entry),
    cmocka_unit_test(test_impls_spirv_as_text),
    cmocka_unit_test(test_impls_merged_list),
    cmocka_unit_test(test_impls_unknown_format),
    cmocka_unit_test(test_impls_lanes_and_limit),
    cmocka_unit_test(test_impls_legacy_size),
    cmocka_unit_test(test_impls_copied),
    cmocka_unit_test(test_impls_in_set),
    cmocka_unit_test(test_impls_core),
    cmocka_unit_test(nothing_left_alive), /* last: checks what every case before left */
};
TC_MAIN("test_kernel_register_impls", tests)
