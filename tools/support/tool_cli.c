/*
 * tool_cli.c — reporting failures and usage errors, option and number parsing, tables of
 * commands, output files.
 */
#include "tool_cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acg-layer.h" /* acg__parse_u64 */

/* ---- reporting ------------------------------------------------------------------------------- */

int tool_fail(acg_status status, const char *what) {
    const char *detail = acg_last_error();
    if (!detail || !detail[0]) {
        detail = acg_status_string(status);
    }
    fprintf(stderr, "acg: %s: %s\n", what, detail);
    return TOOL_EXIT_FAILURE;
}

int tool_failf(const char *what, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "acg: %s: ", what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return TOOL_EXIT_FAILURE;
}

/* "acg: <problem>", then the usage: the text usage, or else the usage lines of table. */
static int usage_error(const char *usage, const tool_command *table, const char *fmt, va_list ap) {
    fputs("acg: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (usage) {
        fputs(usage, stderr);
    } else {
        bool first = true;
        tool_command_usage(stderr, table, &first);
    }
    return TOOL_EXIT_USAGE;
}

int tool_usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_error(usage, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int tool_command_usage_error(const tool_command *table, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_error(NULL, table, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- options --------------------------------------------------------------------------------- */

bool tool_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int tool_option(int argc, char **argv, int *i, const char *name, const char **value) {
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0) {
        return 0;
    }
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0') {
        return 0;
    }
    if (*i + 1 >= argc) {
        return -1;
    }
    *i += 1;
    *value = argv[*i];
    return 1;
}

bool tool_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    return acg__parse_u64(text, min, max, out) == ACG_OK;
}

/* A decimal number as people write one: an optional '-', digits with an optional fraction, an
 * optional exponent. strtod alone would also take blanks, '+', hex, "nan" and "inf". */
static bool is_decimal(const char *p) {
    size_t digits = 0;
    if (*p == '-') {
        p++;
    }
    for (; isdigit((unsigned char)*p); p++) {
        digits++;
    }
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++) {
            digits++;
        }
    }
    if (digits == 0) {
        return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') {
            p++;
        }
        if (!isdigit((unsigned char)*p)) {
            return false;
        }
        while (isdigit((unsigned char)*p)) {
            p++;
        }
    }
    return *p == '\0';
}

bool tool_parse_double(const char *text, double min, double max, bool above_min, double *out) {
    if (!text || !is_decimal(text)) {
        return false;
    }
    double v = strtod(text, NULL);
    if (!isfinite(v) || (above_min ? !(v > min) : !(v >= min)) || !(v <= max)) {
        return false;
    }
    *out = v;
    return true;
}

int tool_option_u64(const char *usage, const char *who, const char *name, const char *text,
                    uint64_t min, uint64_t max, uint64_t *out) {
    if (tool_parse_u64(text, min, max, out)) {
        return TOOL_EXIT_OK;
    }
    return tool_usage_error(usage, "%s%s takes a whole number in [%llu, %llu]", who, name,
                            (unsigned long long)min, (unsigned long long)max);
}

int tool_option_double(const char *usage, const char *who, const char *name, const char *text,
                       double min, double max, bool above_min, double *out) {
    if (tool_parse_double(text, min, max, above_min, out)) {
        return TOOL_EXIT_OK;
    }
    /* %.15g writes every value a person would type back exactly, and no trailing zeros. */
    return tool_usage_error(usage, "%s%s takes a number in %c%.15g, %.15g]", who, name,
                            above_min ? '(' : '[', min, max);
}

int tool_model_options(const char *usage, const char *model, const char *tokenizer,
                       const char **preset) {
    if ((model == NULL) != (tokenizer == NULL)) {
        return tool_usage_error(usage, "--model and --tokenizer go together");
    }
    if (model != NULL && *preset != NULL) {
        return tool_usage_error(usage, "--preset and --model exclude each other");
    }
    if (model == NULL && *preset == NULL) {
        *preset = "small";
    }
    return TOOL_EXIT_OK;
}

/* ---- tables of commands ---------------------------------------------------------------------- */

const tool_command *tool_command_find(const tool_command *table, const char *name) {
    for (const tool_command *c = table; c->name; c++) {
        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

/* Writes one command's usage lines, its "usage: " as blanks unless *first. */
static void put_usage(FILE *out, const char *usage, bool *first) {
    static const char lead[] = "usage: ";
    const size_t len = sizeof lead - 1;
    if (!*first && strncmp(usage, lead, len) == 0) {
        fprintf(out, "%*s", (int)len, "");
        usage += len;
    }
    fputs(usage, out);
    *first = false;
}

void tool_command_usage(FILE *out, const tool_command *table, bool *first) {
    for (const tool_command *c = table; c->name; c++) {
        if (c->sub) {
            tool_command_usage(out, c->sub, first);
        } else if (c->usage) {
            put_usage(out, c->usage, first);
        }
    }
}

/* ---- output files ---------------------------------------------------------------------------- */

#define OUTPUT_MAX_LINKS 40 /* links followed before ELOOP, as Linux does */

/* Reports errno e about the path given. Returns TOOL_EXIT_FAILURE. */
static int output_failed(const tool_output *o, int e) {
    return tool_failf(o->what, "'%s': %s", o->path, strerror(e));
}

/* Follows the symbolic links from o->path as opening it would, by their text, leaving in
 * o->target the first name that is not a link: *exists says whether anything is there, *st
 * (then) its lstat. Returns 0 or an errno. */
static int output_resolve(tool_output *o, struct stat *st, bool *exists) {
    char link[TOOL_OUTPUT_PATH_MAX];
    memcpy(o->target, o->path, strlen(o->path) + 1);
    for (int hops = 0;; hops++) {
        if (lstat(o->target, st) != 0) {
            *exists = false;
            return errno == ENOENT ? 0 : errno;
        }
        *exists = true;
        if (!S_ISLNK(st->st_mode)) {
            return 0;
        }
        if (hops == OUTPUT_MAX_LINKS) {
            return ELOOP;
        }
        ssize_t n = readlink(o->target, link, sizeof link);
        if (n < 0) {
            return errno;
        }
        if ((size_t)n >= sizeof link) {
            return ENAMETOOLONG;
        }
        link[n] = '\0';
        /* A relative link is read from the directory that holds it. */
        const char *slash = strrchr(o->target, '/');
        size_t dir_len = link[0] != '/' && slash != NULL ? (size_t)(slash - o->target) + 1 : 0;
        if (dir_len + (size_t)n >= sizeof o->target) {
            return ENAMETOOLONG;
        }
        memcpy(o->target + dir_len, link, (size_t)n + 1);
    }
}

/* Creates o->tmp, ".<name>.XXXXXX" beside o->target, exclusively and with mode 0666, which the
 * system reduces by the umask as for any new file (mkstemp's 0600 would have to be widened by a
 * umask that only umask(2) reads, racing other threads' files). Returns the descriptor, or -1
 * with errno set and o->tmp empty. */
static int output_create_temporary(tool_output *o) {
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const char *slash = strrchr(o->target, '/');
    size_t dir_len = slash != NULL ? (size_t)(slash - o->target) + 1 : 0;
    const char *name = o->target + dir_len;
    if (strlen(o->target) + sizeof "..XXXXXX" > sizeof o->tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)ts.tv_nsec << 16) ^
                 (uint64_t)(uintptr_t)o;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suffix[7];
        for (size_t i = 0; i < 6; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            suffix[i] = letters[(x >> 33) % (sizeof letters - 1)];
        }
        suffix[6] = '\0';
        snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.%s", (int)dir_len, o->target, name, suffix);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            return fd;
        }
        if (errno != EEXIST) {
            break;
        }
    }
    o->tmp[0] = '\0';
    return -1;
}

/* The stream of fd, which is closed (and the temporary file removed) when there is none. */
static int output_stream(tool_output *o, int fd) {
    o->f = fdopen(fd, "w");
    if (o->f != NULL) {
        return TOOL_EXIT_OK;
    }
    int e = errno;
    close(fd);
    if (o->tmp[0] != '\0') {
        unlink(o->tmp);
        o->tmp[0] = '\0';
    }
    return output_failed(o, e);
}

/* Opens o->path itself for writing: a FIFO or a device, written in place. */
static int output_open_in_place(tool_output *o, int flags) {
    memcpy(o->target, o->path, strlen(o->path) + 1);
    int fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | flags);
    return fd >= 0 ? output_stream(o, fd) : output_failed(o, errno);
}

int tool_output_open(tool_output *o, const char *what, const char *path) {
    o->f = NULL;
    o->what = what;
    o->path[0] = o->target[0] = o->tmp[0] = '\0';
    if (path == NULL || path[0] == '\0') {
        return tool_failf(what, "an empty file name");
    }
    size_t len = strlen(path);
    if (len >= sizeof o->path) {
        return tool_failf(what, "'%s': %s", path, strerror(ENAMETOOLONG));
    }
    memcpy(o->path, path, len + 1);
    struct stat st;
    bool found = stat(path, &st) == 0;
    if (!found && errno != ENOENT) {
        return output_failed(o, errno);
    }
    if (path[len - 1] == '/') {
        return output_failed(o, !found ? ENOENT : S_ISDIR(st.st_mode) ? EISDIR : ENOTDIR);
    }
    if (found && S_ISDIR(st.st_mode)) {
        return output_failed(o, EISDIR);
    }
    if (found && !S_ISREG(st.st_mode)) {
        return output_open_in_place(o, 0);
    }
    /* A regular file, or nothing yet: replaced (or created) through a temporary file beside the
     * name that path's links lead to. */
    struct stat lst;
    bool exists;
    int e = output_resolve(o, &lst, &exists);
    if (e != 0) {
        return output_failed(o, e);
    }
    if (found && (!exists || lst.st_dev != st.st_dev || lst.st_ino != st.st_ino)) {
        /* A link whose text does not name its file (one of /proc's to a deleted file): the
         * file can only be written where it is. */
        return output_open_in_place(o, O_TRUNC);
    }
    int fd = output_create_temporary(o);
    if (fd < 0) {
        return output_failed(o, errno);
    }
    return output_stream(o, fd);
}

int tool_output_commit(tool_output *o) {
    if (o->f == NULL) {
        return output_failed(o, EBADF);
    }
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) {
        e = errno != 0 ? errno : EIO;
    } else if (o->tmp[0] != '\0' && fsync(fileno(o->f)) != 0 && errno != EINVAL) {
        e = errno; /* EINVAL: a file system that cannot sync, not a failed write */
    }
    errno = 0;
    if (fclose(o->f) != 0 && e == 0) {
        e = errno != 0 ? errno : EIO;
    }
    o->f = NULL;
    if (e == 0 && o->tmp[0] != '\0' && rename(o->tmp, o->target) != 0) {
        e = errno;
    }
    if (e != 0) {
        tool_output_abandon(o);
        return output_failed(o, e);
    }
    o->tmp[0] = '\0'; /* renamed: nothing left to remove */
    return TOOL_EXIT_OK;
}

void tool_output_abandon(tool_output *o) {
    if (o->f != NULL) {
        fclose(o->f);
        o->f = NULL;
    }
    if (o->tmp[0] != '\0') {
        unlink(o->tmp);
        o->tmp[0] = '\0';
    }
}
