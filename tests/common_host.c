/* common_host.c — the test helpers that need no device (see common.h): deterministic data, the
 * counting and failing allocator with its sweeps, log capture, temporary files and the hang
 * guard. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "common.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- deterministic data ------------------------------------------------------------------- */

void tc_fill_floats(float *dst, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        int k = (int)((x >> 16) % 2047u) - 1023;
        dst[i] = (float)k / 8.0f;
    }
}

void tc_splat(float *dst, size_t n, float v) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = v;
    }
}

/* ---- counting and failing allocator ------------------------------------------------------- */

static atomic_int_fast64_t alloc_live;
static atomic_uint_fast64_t alloc_count;
static atomic_uint_fast64_t alloc_bad;
static atomic_uint_fast64_t alloc_fail_n; /* fail when alloc_since reaches it; 0: never */
static atomic_uint_fast64_t alloc_since;
static atomic_bool alloc_hit;

void *tc_alloc_fn(void *user, void *ptr, size_t size, size_t align) {
    (void)user;
    if (ptr == NULL && size != 0) {
        atomic_fetch_add(&alloc_count, 1);
        uint64_t nth = atomic_fetch_add(&alloc_since, 1) + 1;
        uint64_t fail = atomic_load(&alloc_fail_n);
        if (fail != 0 && nth == fail) {
            atomic_store(&alloc_hit, true);
            return NULL;
        }
        if (align < sizeof(void *)) {
            align = sizeof(void *);
        }
        if ((align & (align - 1)) != 0) {
            atomic_fetch_add(&alloc_bad, 1);
            return NULL;
        }
        void *p = NULL;
        if (posix_memalign(&p, align, size) != 0) {
            return NULL;
        }
        atomic_fetch_add(&alloc_live, 1);
        return p;
    }
    if (ptr != NULL && size == 0) {
        atomic_fetch_sub(&alloc_live, 1);
        free(ptr);
        return NULL;
    }
    atomic_fetch_add(&alloc_bad, 1);
    return NULL;
}

void tc_alloc_install(void) {
    TC_OK(acg_set_allocator(tc_alloc_fn, NULL));
    atomic_store(&alloc_live, 0);
    atomic_store(&alloc_count, 0);
    atomic_store(&alloc_bad, 0);
    atomic_store(&alloc_fail_n, 0);
    atomic_store(&alloc_since, 0);
    atomic_store(&alloc_hit, false);
}

void tc_alloc_uninstall(void) { TC_OK(acg_set_allocator(NULL, NULL)); }

void tc_alloc_fail_at(uint64_t n) {
    atomic_store(&alloc_fail_n, 0);
    atomic_store(&alloc_since, 0);
    atomic_store(&alloc_hit, false);
    atomic_store(&alloc_fail_n, n);
}

bool tc_alloc_fail_hit(void) { return atomic_load(&alloc_hit); }
int64_t tc_alloc_live(void) { return (int64_t)atomic_load(&alloc_live); }
uint64_t tc_alloc_count(void) { return (uint64_t)atomic_load(&alloc_count); }
uint64_t tc_alloc_bad_calls(void) { return (uint64_t)atomic_load(&alloc_bad); }

uint64_t tc_alloc_sweep(acg_status (*run)(void *ctx), void *ctx, bool may_recover) {
    int64_t base = tc_alloc_live();
    uint64_t n;
    for (n = 1; n < 1000000; n++) {
        tc_alloc_fail_at(n);
        acg_status st = run(ctx);
        bool hit = tc_alloc_fail_hit();
        tc_alloc_fail_at(0);
        if (tc_alloc_live() != base) {
            print_error("allocation %llu failing: %lld allocations leaked (%s: %s)\n",
                        (unsigned long long)n, (long long)(tc_alloc_live() - base),
                        acg_status_name(st), acg_last_error());
            fail();
        }
        if (!hit) {
            TC_OK(st);
            break;
        }
        if (st != ACG_ERR_OUT_OF_MEMORY && !(may_recover && st == ACG_OK)) {
            print_error("allocation %llu failing: the run returned %s: %s\n", (unsigned long long)n,
                        acg_status_name(st), acg_last_error());
            fail();
        }
    }
    return n - 1;
}

uint64_t tc_alloc_sweep_case(const char *what, acg_status (*run)(void *ctx), void *ctx,
                             bool may_recover, uint64_t more_than) {
    tc_alloc_install();
    TC_OK(run(ctx));
    assert_int_equal(tc_alloc_live(), 0);
    uint64_t points = tc_alloc_sweep(run, ctx, may_recover);
    print_message("%s allocation-failure sweep: %llu allocation points\n", what,
                  (unsigned long long)points);
    assert_true(points > more_than);
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return points;
}

/* ---- log capture -------------------------------------------------------------------------- */

#define TC_LOG_MAX 256

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    acg_log_level level;
    char text[512];
} log_msgs[TC_LOG_MAX];
static size_t log_n;
static acg_log_level log_saved_level;

static void log_capture_fn(acg_log_level level, const char *message, void *user) {
    (void)user;
    pthread_mutex_lock(&log_lock);
    if (log_n < TC_LOG_MAX) {
        log_msgs[log_n].level = level;
        snprintf(log_msgs[log_n].text, sizeof log_msgs[log_n].text, "%s",
                 message ? message : "(null)");
        log_n++;
    }
    pthread_mutex_unlock(&log_lock);
}

void tc_log_capture_begin(acg_log_level level) {
    pthread_mutex_lock(&log_lock);
    log_n = 0;
    pthread_mutex_unlock(&log_lock);
    log_saved_level = acg_get_log_level();
    acg_set_log_callback(log_capture_fn, NULL);
    acg_set_log_level(level);
}

void tc_log_capture_end(void) {
    acg_set_log_callback(NULL, NULL);
    acg_set_log_level(log_saved_level);
}

size_t tc_log_count(acg_log_level level) {
    size_t c = 0;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n; i++) {
        c += log_msgs[i].level == level;
    }
    pthread_mutex_unlock(&log_lock);
    return c;
}

bool tc_log_find(const char *needle, acg_log_level *level_out) {
    bool found = false;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n && !found; i++) {
        if (strstr(log_msgs[i].text, needle) != NULL) {
            found = true;
            if (level_out != NULL) {
                *level_out = log_msgs[i].level;
            }
        }
    }
    pthread_mutex_unlock(&log_lock);
    return found;
}

bool tc_log_any_trailing_newline(void) {
    bool any = false;
    pthread_mutex_lock(&log_lock);
    for (size_t i = 0; i < log_n; i++) {
        size_t len = strlen(log_msgs[i].text);
        any = any || (len > 0 && log_msgs[i].text[len - 1] == '\n');
    }
    pthread_mutex_unlock(&log_lock);
    return any;
}

/* ---- temporary files and hangs ---------------------------------------------------------- */

static char tmp_dir[256];

int tc_tmpdir_create(const char *prefix) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/%s-XXXXXX", base ? base : "/tmp", prefix);
    return mkdtemp(tmp_dir) != NULL ? 0 : -1;
}

const char *tc_tmp_path(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return path;
}

const char *tc_tmpdir(void) { return tmp_dir; }

/* One entry of the tree being removed, children before their folder (FTW_DEPTH). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the folder and all it holds, following no symbolic link (FTW_PHYS): a link is removed
 * as itself. A folder that is not there is removed already. */
int tc_tmpdir_remove(void) {
    if (tmp_dir[0] == '\0') {
        return 0;
    }
    if (nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) {
        return 0;
    }
    return errno == ENOENT ? 0 : -1;
}

int tc_host_files_setup(const char *prefix) {
    if (tc_tmpdir_create(prefix) != 0) {
        return -1;
    }
    tc_alloc_install();
    return 0;
}

int tc_host_files_teardown(void) {
    assert_int_equal(tc_alloc_live(), 0);
    assert_int_equal(tc_alloc_bad_calls(), 0);
    tc_alloc_uninstall();
    return tc_tmpdir_remove();
}

static const char *hang_what;
static unsigned hang_seconds;

static void on_hang(int sig) {
    (void)sig;
    char msg[160];
    int len = snprintf(msg, sizeof msg, "%s blocked for %u s\n", hang_what, hang_seconds);
    ssize_t r = write(STDERR_FILENO, msg, len > 0 ? (size_t)len : 0);
    (void)r;
    _exit(1);
}

void tc_hang_guard(unsigned seconds, const char *what) {
    if (seconds == 0) {
        alarm(0);
        signal(SIGALRM, SIG_DFL);
        return;
    }
    hang_what = what;
    hang_seconds = seconds;
    signal(SIGALRM, on_hang);
    alarm(seconds);
}
