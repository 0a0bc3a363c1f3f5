/*
 * tool_trace.h — what `--trace FILE` does in acg's tools: installs the library's trace hook
 * (acg/trace.h), keeps every event it is told, and at the end writes them to FILE in the Chrome
 * trace-event JSON format, which Perfetto (ui.perfetto.dev, "Open trace file") and
 * chrome://tracing open.
 *
 * Part of the tools' support library (tools/support). The file is
 *   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
 * with one event per library event: "ph" B, E, X (a complete span, with "dur") or i (an
 * instant), "ts" and "dur" in microseconds from the first event (to the nanosecond), "pid" the
 * one the caller gives, "tid" the emitting thread's number (acg_trace_get_thread_id) — or, for a
 * stream's own timeline, a track of its own, tid TOOL_TRACE_STREAM_TID + the stream's number —
 * "name", "cat" and the event's "args"; then metadata events ("ph" M) naming the process, each
 * thread ("main" for the thread that opened the trace, "thread N" for others) and each stream
 * track ("stream N"). Events are written in the order they arrived, which on every track is
 * the order of their timestamps.
 *
 * FILE is written through a tool_output (tool_cli.h), under its rules: opened at once, so a bad
 * place fails before any work; a regular file (or a new one, or the file a symbolic link names)
 * written under a temporary name and renamed into place only once whole, nothing half-written
 * left behind on any failure; a FIFO or a device written in place.
 */
#ifndef ACG_TOOL_TRACE_H
#define ACG_TOOL_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include <acg/trace.h>

/* A stream's track in the file: tid TOOL_TRACE_STREAM_TID + its number. */
#define TOOL_TRACE_STREAM_TID 100000

typedef struct tool_trace tool_trace;

/* Told every event of observe_categories as it arrives, from the thread that emitted it (so it
 * must be thread-safe), under the library's rules for a hook: it calls no acg function. */
typedef void (*tool_trace_observer)(const acg_trace_event *event, void *user);

typedef struct tool_trace_options {
    const char *path;            /* the file (copied); NULL: record nothing, only observe */
    const char *process;         /* its name in the file ("acg run"; copied) */
    int64_t pid;                 /* its pid in the file */
    tool_trace_observer observe; /* NULL: none */
    void *user;                  /* handed to observe */
    uint32_t observe_categories; /* the ACG_TRACE_* bits observe is told */
} tool_trace_options;

/* Prepares a trace, opening its file at once (tool_output_open): an empty name, a directory or
 * a place where no file can be created fails here. Returns TOOL_EXIT_OK with *out set, or
 * TOOL_EXIT_FAILURE after one line on stderr, "acg: writing the trace: <why, naming the path>".
 * Nothing is installed yet. */
int tool_trace_open(const tool_trace_options *options, tool_trace **out);

/* Installs the hook, taking every category with a path, else observe_categories. Returns
 * TOOL_EXIT_OK, or TOOL_EXIT_FAILURE after one line on stderr. */
int tool_trace_start(tool_trace *t);

/* Removes the hook (returning once no call of it runs), then, when rc is TOOL_EXIT_OK and there
 * is a path, writes the file and commits it (tool_output_commit); otherwise, or when that fails,
 * abandons it (the temporary file removed). Frees t (NULL: nothing to do). Returns rc, or
 * TOOL_EXIT_FAILURE after one line on stderr when the trace could not be written, naming the
 * file and why (events lost for want of memory included). */
int tool_trace_finish(tool_trace *t, int rc);

#endif /* ACG_TOOL_TRACE_H */
