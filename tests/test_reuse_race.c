/*
 * test_reuse_race.c — a stale handle whose address the allocator gives to a new object of the
 * same kind, used while that object is being created and destroyed, for every kind of object.
 *
 * An allocator hook hands a freed block straight back to the next allocation of its size, so
 * every round's object lands where the previous round's was and a thread that kept the first
 * round's handle reaches each new object through it. The handle then names a live object (the
 * library cannot tell it from a fresh one), so its calls may succeed; what they must never do
 * is see an object before its create finished: a crash, a sanitizer report (ASan, and TSan for
 * the fields a create writes), or a status other than the ones listed for the call. Runs under
 * both sanitizers in CI and in the release build. Nothing here depends on the machine's speed:
 * the rounds are counted, not timed, and a round that the user thread never hits is not a
 * failure (the reuse itself is asserted, as that is what the hook guarantees).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <acg/engine.h>
#include <acg/model.h>

#include "common.h"

/* ---- the allocator: freed blocks come back first (LIFO), by size and alignment ------------- */

enum { MAX_PARKED = 4096 };

typedef struct header {
    void *raw; /* what posix_memalign gave */
    size_t size, align;
} header;

static pthread_mutex_t lifo_lock = PTHREAD_MUTEX_INITIALIZER;
static void *parked[MAX_PARKED]; /* freed blocks, newest last */
static size_t n_parked;
static atomic_ulong reused; /* allocations served from a freed block */

static header *header_of(void *p) { return (header *)((char *)p - sizeof(header)); }

/* The header sits just below the block, which keeps the alignment asked for. */
static void *lifo_fresh(size_t size, size_t align) {
    size_t a = align < 16 ? 16 : align;
    size_t pad = (sizeof(header) + a - 1) / a * a;
    void *raw = NULL;
    if (posix_memalign(&raw, a, pad + size) != 0) {
        return NULL;
    }
    char *p = (char *)raw + pad;
    *header_of(p) = (header){raw, size, align};
    return p;
}

static void *lifo_alloc(void *user, void *ptr, size_t size, size_t align) {
    (void)user;
    if (size == 0) {
        if (ptr == NULL) {
            return NULL;
        }
        pthread_mutex_lock(&lifo_lock);
        if (n_parked == MAX_PARKED) {
            /* The oldest goes back to the system: only recent addresses matter. */
            free(header_of(parked[0])->raw);
            memmove(parked, parked + 1, (MAX_PARKED - 1) * sizeof *parked);
            n_parked--;
        }
        parked[n_parked++] = ptr;
        pthread_mutex_unlock(&lifo_lock);
        return NULL;
    }
    pthread_mutex_lock(&lifo_lock);
    for (size_t i = n_parked; i-- > 0;) {
        const header *h = header_of(parked[i]);
        if (h->size == size && h->align == align) {
            void *p = parked[i];
            memmove(parked + i, parked + i + 1, (n_parked - i - 1) * sizeof *parked);
            n_parked--;
            pthread_mutex_unlock(&lifo_lock);
            atomic_fetch_add(&reused, 1);
            return p;
        }
    }
    pthread_mutex_unlock(&lifo_lock);
    return lifo_fresh(size, align);
}

static void lifo_install(void) { TC_OK(acg_set_allocator(lifo_alloc, NULL)); }

static void lifo_uninstall(void) {
    TC_OK(acg_set_allocator(NULL, NULL));
    pthread_mutex_lock(&lifo_lock);
    for (size_t i = 0; i < n_parked; i++) {
        free(header_of(parked[i])->raw);
    }
    n_parked = 0;
    pthread_mutex_unlock(&lifo_lock);
}

/* ---- the race ------------------------------------------------------------------------------ */

/* What every kind shares: a device, a stream of the user thread's own, and a buffer. */
typedef struct env {
    tc_fixture t;            /* the device, the user thread's stream (t.s), the built-in kernels */
    acg_stream *make_stream; /* the creating thread's */
    acg_buffer *buf;         /* 1 KiB */
    acg_model_weights *weights;
} env;

typedef struct kind {
    const char *name;
    unsigned rounds;
    /* Creates one object (asserting success); *handle is what a stale copy is kept of. */
    void *(*create)(env *e);
    void (*destroy)(env *e, void *obj);
    /* A call through a handle that may be stale: its status, or ACG_OK for a call without one
     * that returned what the live object holds. */
    acg_status (*use)(env *e, void *stale);
    /* Statuses use may return besides ACG_OK and ACG_ERR_INVALID_HANDLE (0-terminated). */
    acg_status also[4];
} kind;

typedef struct race {
    env *e;
    const kind *k;
    void *_Atomic stale; /* the first round's handle */
    atomic_bool done;
    unsigned uses, hits; /* the user thread's calls, and those that reached a live object */
    acg_status bad;      /* a status outside the kind's list, or ACG_OK */
    char bad_why[256];
} race;

static bool allowed(const kind *k, acg_status st) {
    if (st == ACG_OK || st == ACG_ERR_INVALID_HANDLE) {
        return true;
    }
    for (int i = 0; i < 4 && k->also[i] != ACG_OK; i++) {
        if (st == k->also[i]) {
            return true;
        }
    }
    return false;
}

static void *user_thread(void *arg) {
    race *r = arg;
    while (!atomic_load(&r->done)) {
        void *p = atomic_load(&r->stale);
        if (p == NULL) {
            continue;
        }
        acg_status st = r->k->use(r->e, p);
        r->uses++;
        r->hits += st != ACG_ERR_INVALID_HANDLE;
        if (!allowed(r->k, st) && r->bad == ACG_OK) {
            r->bad = st;
            snprintf(r->bad_why, sizeof r->bad_why, "%s", acg_last_error());
        }
    }
    return NULL;
}

/* A pause of 0-80 us between a create and its destroy, so the user's calls meet the object
 * in every state: being built, live, being destroyed, freed. */
static void pause_a_little(unsigned round) {
    long ns = (long)((round * 2654435761u) % 80) * 1000;
    if (ns != 0) {
        nanosleep(&(struct timespec){.tv_nsec = ns}, NULL);
    }
}

static void run_race(env *e, const kind *k) {
    race r = {.e = e, .k = k};
    unsigned long reused_before = atomic_load(&reused);
    unsigned same = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, user_thread, &r), 0);
    for (unsigned i = 0; i < k->rounds; i++) {
        void *obj = k->create(e);
        void *first = atomic_load(&r.stale);
        if (first == NULL) {
            atomic_store(&r.stale, obj);
        } else {
            same += obj == first;
        }
        pause_a_little(i);
        k->destroy(e, obj);
    }
    atomic_store(&r.done, true);
    pthread_join(t, NULL);
    print_message("    %s: %u rounds, %u at the first round's address, %u calls through the stale "
                  "handle, %u reached a live object\n",
                  k->name, k->rounds, same, r.uses, r.hits);
    if (r.bad != ACG_OK) {
        fail_msg("%s: a call through the stale handle returned %s: %s", k->name,
                 acg_status_string(r.bad), r.bad_why);
    }
    /* The hook gave blocks back: without reuse the race would prove nothing. */
    assert_true(atomic_load(&reused) > reused_before);
    assert_true(same > 0);
}

/* ---- the kinds ----------------------------------------------------------------------------- */

/* Buffers: the probe's case, a launch on the stale buffer. */
static void *buffer_create(env *e) {
    acg_buffer *b = NULL;
    TC_OK(acg_buffer_alloc(e->t.dev, 1024, &b));
    return b;
}
static void buffer_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_buffer_free(obj));
}
static acg_status buffer_use(env *e, void *stale) {
    return tc_add(e->t.s, &e->t.k, stale, 0, stale, 0, 64, 1.0f);
}

static void *view_create(env *e) {
    acg_buffer *v = NULL;
    TC_OK(acg_buffer_create_view(e->buf, 256, 512, &v));
    return v;
}

/* Stream-ordered memory on the creating thread's stream. */
static void *stream_buffer_create(env *e) {
    acg_buffer *b = NULL;
    TC_OK(acg_stream_alloc(e->make_stream, 1024, &b));
    return b;
}
static void stream_buffer_destroy(env *e, void *obj) {
    TC_OK(acg_stream_free(e->make_stream, obj));
}

static void *stream_create(env *e) { return tc_stream(e->t.dev); }
static void stream_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_stream_destroy(obj));
}
static acg_status stream_use(env *e, void *stale) {
    return tc_fill(stale, &e->t.k, e->buf, 0, 64, 2.0f);
}

static void *event_create(env *e) { return tc_event(e->t.dev); }
static void event_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_event_destroy(obj));
}
static acg_status event_use(env *e, void *stale) {
    acg_status st = acg_event_record(stale, e->t.s);
    return st != ACG_OK ? st : acg_stream_wait_event(e->t.s, stale);
}

static void *pool_create(env *e) { return tc_pool(e->t.dev); }
static void pool_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_graph_pool_destroy(obj));
}
static acg_status pool_use(env *e, void *stale) {
    (void)e;
    size_t bytes = 0;
    return acg_graph_pool_get_bytes(stale, &bytes);
}

/* A graph of two kernels and a scratch buffer, captured on the creating thread's stream. */
static void *graph_create(env *e) {
    acg_graph *g = NULL;
    acg_buffer *tmp = NULL;
    TC_OK(acg_stream_begin_capture(e->make_stream, NULL));
    TC_OK(acg_stream_alloc(e->make_stream, 256, &tmp));
    TC_OK(tc_fill(e->make_stream, &e->t.k, tmp, 0, 64, 1.0f));
    TC_OK(tc_add(e->make_stream, &e->t.k, e->buf, 0, tmp, 0, 64, 1.0f));
    TC_OK(acg_stream_free(e->make_stream, tmp));
    TC_OK(acg_stream_end_capture(e->make_stream, &g));
    return g;
}
static void graph_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_graph_destroy(obj));
}
static acg_status graph_use(env *e, void *stale) { return acg_graph_launch(stale, e->t.s); }

/* A device with a kernel loaded: the kernel is the device's, and dies with it. */
static acg_device *kernel_device; /* the creating thread's latest */
static void *device_create(env *e) {
    (void)e;
    acg_device *dev = tc_open();
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "add_scalar_f32", &k));
    kernel_device = dev;
    return dev;
}
static void device_destroy(env *e, void *obj) {
    (void)e;
    tc_close(obj);
}
static acg_status device_use(env *e, void *stale) {
    (void)e;
    acg_status st = acg_device_synchronize(stale);
    if (st == ACG_OK && acg_device_get_spec(stale) == NULL) {
        st = ACG_ERR_INVALID_HANDLE; /* destroyed in between */
    }
    return st;
}
/* The kernel kind: a launch of the stale kernel on the user's stream (another device). */
static void *kernel_create(env *e) {
    acg_device *dev = device_create(e);
    acg_kernel *k = NULL;
    TC_OK(acg_kernel_get(dev, "add_scalar_f32", &k));
    return k;
}
static void kernel_destroy(env *e, void *obj) {
    (void)e;
    (void)obj;
    tc_close(kernel_device);
}
static acg_status kernel_use(env *e, void *stale) {
    acg_arg args[3] = {acg_arg_buffer(e->buf, 0), acg_arg_buffer(e->buf, 0), acg_arg_f32(1.0f)};
    acg_dims dims = acg_dims_1d(64);
    return acg_kernel_launch(e->t.s, stale, &dims, args, 3);
}

static void *group_create(env *e) {
    acg_device_group *g = NULL;
    TC_OK(acg_device_group_create(e->t.dev, tc_one_rank_comm(), &g));
    return g;
}
static void group_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_device_group_destroy(obj));
}
static acg_status group_use(env *e, void *stale) {
    acg_status st = acg_allreduce(e->t.s, stale, e->buf, 0, 16);
    int32_t rank = 0, n = 0;
    return st != ACG_OK ? st : acg_device_group_get_rank(stale, &rank, &n);
}

static void *stager_create(env *e) {
    acg_stager_config c = ACG_STAGER_CONFIG_INIT;
    c.depth = 2;
    c.buffer_bytes = 256;
    acg_stager *sg = NULL;
    TC_OK(acg_stager_create(e->t.dev, &c, &sg));
    return sg;
}
static void stager_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_stager_destroy(obj));
}
static acg_status stager_use(env *e, void *stale) {
    static const int32_t data[16];
    acg_status st = acg_stager_upload(stale, e->t.s, e->buf, 0, data, 16, sizeof *data, NULL, 16);
    acg_stager_stats stats = ACG_STAGER_STATS_INIT;
    return st != ACG_OK ? st : acg_stager_get_stats(stale, &stats);
}

static void *kv_create(env *e) {
    acg_kv_config c = ACG_KV_CONFIG_INIT;
    c.n_layers = 1;
    c.n_pages = 4;
    c.page_size = 4;
    c.kv_dim = 8;
    acg_kv_cache *kv = NULL;
    TC_OK(acg_kv_cache_create(e->t.dev, &c, &kv));
    return kv;
}
static void kv_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_kv_cache_destroy(obj));
}
static acg_status kv_use(env *e, void *stale) {
    (void)e;
    acg_buffer *k = NULL, *v = NULL;
    acg_status st = acg_kv_cache_get_buffers(stale, &k, &v);
    if (st == ACG_OK && acg_buffer_get_size(k) == 0) {
        st = ACG_ERR_INVALID_HANDLE; /* the cache was destroyed in between */
    }
    return st;
}

static void *plan_create(env *e) {
    acg_attn_plan_config c = ACG_ATTN_PLAN_CONFIG_INIT;
    c.batch = 2;
    c.max_seq_len = 16;
    c.page_size = 4;
    c.max_query_tokens = 2;
    acg_attn_plan *p = NULL;
    TC_OK(acg_attn_plan_create(e->t.dev, &c, &p));
    return p;
}
static void plan_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_attn_plan_destroy(obj));
}
static acg_status plan_use(env *e, void *stale) {
    (void)e;
    acg_attn_plan_stats stats = ACG_ATTN_PLAN_STATS_INIT;
    return acg_attn_plan_get_stats(stale, &stats);
}

/* A runner of one eager bucket: y = x + 1. */
static size_t runner_bytes(void *user, uint32_t i, const acg_bucket_key *b) {
    (void)user;
    (void)i;
    return (size_t)b->batch * 64 * sizeof(float);
}
static acg_status runner_forward(void *user, acg_stream *s, const acg_step_io *io) {
    env *e = user;
    return tc_add(s, &e->t.k, io->outputs[0], 0, io->inputs[0], 0, 64, 1.0f);
}
static acg_recipe runner_recipe;
static const acg_bucket_key runner_bucket = {"decode", 0, 1, 1};
static void *runner_create(env *e) {
    acg_runner_config c =
        tc_runner_config(&runner_recipe, &runner_bucket, 1, e->make_stream, ACG_GRAPHS_ON);
    acg_runner *r = NULL;
    TC_OK(acg_runner_create(e->t.dev, &c, &r));
    return r;
}
static void runner_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_runner_destroy(obj));
}
static acg_status runner_use(env *e, void *stale) {
    (void)e;
    acg_bucket_report rep = ACG_BUCKET_REPORT_INIT;
    return acg_runner_get_report(stale, 0, &rep);
}

static void *weights_create(env *e) {
    acg_model_config c = ACG_MODEL_CONFIG_INIT;
    c.size = sizeof c;
    TC_OK(acg_model_preset_get_config("tiny", &c));
    acg_model_weights *w = NULL;
    TC_OK(acg_model_weights_create_random(&c, 1, &w));
    (void)e;
    return w;
}
static void weights_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_model_weights_free(obj));
}
static acg_status weights_use(env *e, void *stale) {
    (void)e;
    /* The config lives in the object: once the call returned, only the pointer is the
     * caller's to look at (the weights may be gone). */
    return acg_model_weights_get_config(stale) == NULL ? ACG_ERR_INVALID_HANDLE : ACG_OK;
}

static void *tokenizer_create(env *e) {
    (void)e;
    acg_tokenizer *t = NULL;
    TC_OK(acg_tokenizer_preset(512, &t));
    return t;
}
static void tokenizer_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_tokenizer_free(obj));
}
static acg_status tokenizer_use(env *e, void *stale) {
    (void)e;
    int32_t ids[64];
    size_t n = 0;
    return acg_tokenizer_encode(stale, "once upon a time", true, false, ids, 64, &n);
}

static void *model_create(env *e) {
    acg_model_options o = ACG_MODEL_OPTIONS_INIT;
    o.max_batch = 1;
    o.max_step_tokens = 4;
    o.kv_pages = 8;
    o.page_size = 16;
    o.n_slots = 1;
    acg_model *m = NULL;
    TC_OK(acg_model_create(e->t.dev, e->weights, &o, &m));
    return m;
}
static void model_destroy(env *e, void *obj) {
    (void)e;
    TC_OK(acg_model_destroy(obj));
}
static acg_status model_use(env *e, void *stale) {
    (void)e;
    acg_model_stats stats = ACG_MODEL_STATS_INIT;
    acg_status st = acg_model_get_stats(stale, &stats);
    return st != ACG_OK ? st : (acg_model_get_stream(stale) == NULL ? ACG_ERR_INVALID_HANDLE : st);
}

/* Rounds: enough for every state of the object to meet the user's calls many times, few
 * enough for the sanitized builds (the model captures its buckets in every create). */
static const kind kinds[] = {
    {"buffer", 2000, buffer_create, buffer_destroy, buffer_use, {0}},
    {"view", 2000, view_create, buffer_destroy, buffer_use, {0}},
    {"stream-ordered buffer", 2000, stream_buffer_create, stream_buffer_destroy, buffer_use, {0}},
    {"stream", 500, stream_create, stream_destroy, stream_use, {0}},
    {"event", 2000, event_create, event_destroy, event_use, {0}},
    {"graph pool", 2000, pool_create, pool_destroy, pool_use, {0}},
    /* A replay of a graph holding another pool's scratch is refused while that pool's graph
     * is the one the stale handle names; its buffer lives on the creating thread's device. */
    {"graph", 500, graph_create, graph_destroy, graph_use, {0}},
    {"device", 100, device_create, device_destroy, device_use, {0}},
    {"kernel", 100, kernel_create, kernel_destroy, kernel_use, {ACG_ERR_WRONG_DEVICE}},
    {"device group", 500, group_create, group_destroy, group_use, {0}},
    {"stager", 500, stager_create, stager_destroy, stager_use, {0}},
    {"KV cache", 500, kv_create, kv_destroy, kv_use, {0}},
    {"attention plan", 300, plan_create, plan_destroy, plan_use, {0}},
    {"runner", 200, runner_create, runner_destroy, runner_use, {0}},
    {"weights", 200, weights_create, weights_destroy, weights_use, {0}},
    {"tokenizer", 200, tokenizer_create, tokenizer_destroy, tokenizer_use, {0}},
    {"model", 8, model_create, model_destroy, model_use, {0}},
};

/* ---- the cases ----------------------------------------------------------------------------- */

static int setup(void **state) {
    lifo_install();
    TC_OK(acg_model_register_kernels());
    env *e = tc_fixture_new(sizeof *e);
    e->make_stream = tc_stream(e->t.dev);
    e->buf = tc_buffer(e->t.dev, 1024);
    TC_OK(acg_model_preset_load("tiny", 7, &e->weights));
    runner_recipe = tc_recipe("reuse", e, runner_bytes, runner_forward);
    *state = e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    TC_OK(acg_stream_synchronize(e->t.s));
    TC_OK(acg_model_weights_free(e->weights));
    TC_OK(acg_buffer_free(e->buf));
    TC_OK(acg_stream_destroy(e->make_stream));
    tc_fixture_teardown(state);
    TC_OK(acg_model_unregister_kernels());
    lifo_uninstall();
    return 0;
}

static void test_every_kind(void **state) {
    env *e = *state;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(kinds[i].name, "device group") == 0 && !tc_cap()->collectives) {
            print_message("    device group: skipped, %s has no collectives\n", tc_spec());
            continue;
        }
        run_race(e, &kinds[i]);
        /* The user's work on stale objects is done before the next kind. */
        acg_status st = acg_stream_synchronize(e->t.s);
        assert_true(st == ACG_OK);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_every_kind, setup, teardown),
};
TC_MAIN("test_reuse_race", tests)
