#!/usr/bin/env python3
"""check_trace.py FILE MODE — checks a trace `acg run --trace` or `acg bench decode --trace` wrote.

The file must be Chrome trace-event JSON ({"traceEvents": [...]}) that Perfetto opens:
every event with its name, phase, pid and tid (and but for metadata a category and a timestamp,
X events a duration), on every track (tid) timestamps that never go back in file order, every
B closed by an E of the same name on the same track, spans nested (a child inside its parent's
interval), every track named by a thread_name event and the process by a process_name event.

MODE says what the run did, and so which events must be there:
  graphs  acg run with graphs on: each model step with its phases in order, the runner's
          creation with every bucket measured, warmed up and captured (with its graph memory),
          replays on the host and on the stream's timeline, stager uploads, kernels by name
  eager   acg run --graphs off: the model steps, run eagerly with the reason "graphs off",
          nothing captured or replayed
  bench   acg bench decode: both: captures and replays, and eager steps of the graphs-off model

Prints "ok: N events" or the first problems found, and exits 1 when there are any.
"""
import json
import sys

PHASES = ["admit", "plan", "upload", "launch", "wait", "retire"]


class Problems(Exception):
    pass


def fail(problems, text):
    problems.append(text)
    if len(problems) >= 20:
        raise Problems()


def spans(events, problems):
    """Pairs every B with its E per track; returns spans as dicts with their children."""
    stacks = {}
    last_ts = {}
    done = []
    for i, e in enumerate(events):
        ph = e.get("ph")
        if ph == "M":
            continue
        tid = e["tid"]
        ts = e["ts"]
        if ts < last_ts.get(tid, float("-inf")):
            fail(problems, "event %d (%s %s) on tid %s goes back in time: %s after %s"
                 % (i, ph, e["name"], tid, ts, last_ts[tid]))
        last_ts[tid] = max(ts, last_ts.get(tid, float("-inf")))
        stack = stacks.setdefault(tid, [])
        if ph == "B":
            span = {"name": e["name"], "cat": e["cat"], "tid": tid, "begin": ts,
                    "args": dict(e.get("args", {})), "children": [], "index": i}
            if stack:
                stack[-1]["children"].append(span)
            stack.append(span)
        elif ph == "E":
            if not stack:
                fail(problems, "event %d: E %s on tid %s closes nothing" % (i, e["name"], tid))
                continue
            span = stack.pop()
            if span["name"] != e["name"]:
                fail(problems, "event %d: E %s on tid %s closes B %s (event %d)"
                     % (i, e["name"], tid, span["name"], span["index"]))
            span["end"] = ts
            span["args"].update(e.get("args", {}))
            for child in span["children"]:
                if not (span["begin"] <= child["begin"] and child["end"] <= ts):
                    fail(problems, "%s [%s, %s] on tid %s is not inside its parent %s [%s, %s]"
                         % (child["name"], child["begin"], child["end"], tid, span["name"],
                            span["begin"], ts))
            done.append(span)
        elif ph == "X":
            if e["dur"] < 0:
                fail(problems, "event %d: X %s has a negative duration" % (i, e["name"]))
            span = {"name": e["name"], "cat": e["cat"], "tid": tid, "begin": ts,
                    "end": ts + e["dur"], "args": e.get("args", {}), "children": [], "index": i}
            if stack:
                stack[-1]["children"].append(span)
            done.append(span)
        elif ph != "i":
            fail(problems, "event %d: unknown phase %r" % (i, ph))
    for tid, stack in stacks.items():
        for span in stack:
            fail(problems, "B %s (event %d) on tid %s is never closed"
                 % (span["name"], span["index"], tid))
    return done


def check_format(doc, problems):
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(problems, "not an object with a traceEvents array")
        raise Problems()
    events = doc["traceEvents"]
    tids, named, process = set(), set(), False
    for i, e in enumerate(events):
        for key in ("name", "ph", "pid"):
            if key not in e:
                fail(problems, "event %d lacks %r: %r" % (i, key, e))
        if e.get("ph") == "M":
            if e.get("name") == "thread_name":
                named.add(e["tid"])
            elif e.get("name") == "process_name":
                process = bool(e.get("args", {}).get("name"))
            continue
        for key in ("tid", "ts", "cat"):
            if key not in e:
                fail(problems, "event %d lacks %r: %r" % (i, key, e))
        if e.get("ph") == "X" and "dur" not in e:
            fail(problems, "event %d: X without dur" % i)
        tids.add(e.get("tid"))
    if not process:
        fail(problems, "no process_name metadata naming the process")
    for tid in sorted(tids - named):
        fail(problems, "tid %s has no thread_name" % tid)
    return [e for e in events if e.get("ph") != "M"]


def check_steps(all_spans, problems, eager):
    steps = [s for s in all_spans if s["cat"] == "model" and s["name"] == "step"]
    ran = [s for s in steps if s["args"].get("rows", 0) > 0]
    if not ran:
        fail(problems, "no model step that ran rows")
    for s in ran:
        names = [c["name"] for c in s["children"] if c["cat"] == "model"]
        if names != PHASES:
            fail(problems, "step at %s: phases %s, expected %s" % (s["begin"], names, PHASES))
        if s["args"].get("graphed") == eager:
            fail(problems, "step at %s: graphed %s" % (s["begin"], s["args"].get("graphed")))
        launch = [c for c in s["children"] if c["name"] == "launch"]
        runs = [g for c in launch for g in c["children"] if g["cat"] == "engine"
                and g["name"] in ("replay", "eager")]
        if len(runs) != 1:
            fail(problems, "step at %s: its launch holds %d replay/eager spans, not 1"
                 % (s["begin"], len(runs)))
            continue
        run = runs[0]
        if eager:
            if run["name"] != "eager" or run["args"].get("reason") != "graphs off":
                fail(problems, "step at %s: %s with reason %r, expected eager with 'graphs off'"
                     % (s["begin"], run["name"], run["args"].get("reason")))
        elif run["name"] != "replay":
            fail(problems, "step at %s ran %s (%r)" % (s["begin"], run["name"],
                                                       run["args"].get("reason")))
    return ran


def check_captures(all_spans, problems):
    creates = [s for s in all_spans if s["cat"] == "engine" and s["name"] == "runner create"]
    graphed = [c for c in creates if c["args"].get("graphs") != "off"]
    if not graphed:
        fail(problems, "no runner created with graphs on")
    for c in graphed:
        kinds = {}
        for child in c["children"]:
            kinds.setdefault(child["name"], []).append(child)
        n = c["args"].get("buckets", 0)
        for name in ("measure", "warm-up", "capture"):
            if len(kinds.get(name, [])) != n:
                fail(problems, "runner create at %s: %d %s spans for %d buckets"
                     % (c["begin"], len(kinds.get(name, [])), name, n))
        for cap in kinds.get("capture", []):
            a = cap["args"]
            if not a.get("captured") or a.get("graph_bytes", 0) <= 0 or a.get("pool_bytes", 0) <= 0:
                fail(problems, "capture of bucket %s: captured %s, graph_bytes %s, pool_bytes %s"
                     % (a.get("bucket"), a.get("captured"), a.get("graph_bytes"),
                        a.get("pool_bytes")))
            if not 1 <= a.get("k", 0) <= a.get("n", 0) == n:
                fail(problems, "capture of bucket %s: k %s of n %s" % (a.get("bucket"),
                                                                       a.get("k"), a.get("n")))
        if c["args"].get("captured") != n or c["args"].get("pool_bytes", 0) <= 0:
            fail(problems, "runner create: captured %s of %d, pool_bytes %s"
                 % (c["args"].get("captured"), n, c["args"].get("pool_bytes")))


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("graphs", "eager", "bench"):
        sys.exit("usage: check_trace.py FILE graphs|eager|bench")
    path, mode = sys.argv[1], sys.argv[2]
    problems = []
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        events = check_format(doc, problems)
        all_spans = spans(events, problems)
        names = {(e["cat"], e["name"]) for e in events}
        need = {("model", "step"), ("engine", "stager upload")}
        if mode in ("graphs", "bench"):
            need |= {("engine", "runner create"), ("engine", "capture"), ("engine", "replay"),
                     ("stream", "replay"), ("stream", "matmul_f32")}
        if mode in ("eager", "bench"):
            need |= {("engine", "eager"), ("stream", "matmul_f32")}
        for cat, name in sorted(need - names):
            fail(problems, "no %s event %r" % (cat, name))
        if mode == "eager" and ("engine", "replay") in names:
            fail(problems, "a replay with graphs off")
        if mode == "eager" and ("engine", "capture") in names:
            fail(problems, "a capture with graphs off")
        if mode == "graphs":
            check_steps(all_spans, problems, eager=False)
            check_captures(all_spans, problems)
        elif mode == "eager":
            check_steps(all_spans, problems, eager=True)
        else:
            check_captures(all_spans, problems)
            ran = [s for s in all_spans if s["name"] == "step" and s["args"].get("rows", 0) > 0]
            if not any(s["args"].get("graphed") for s in ran):
                fail(problems, "no replayed step")
            eager = [s for s in all_spans if s["cat"] == "engine" and s["name"] == "eager"]
            if not any(s["args"].get("reason") == "graphs off" for s in eager):
                fail(problems, "no eager run with reason 'graphs off'")
    except Problems:
        pass
    except (OSError, ValueError) as e:
        problems.append("cannot read %s as JSON: %s" % (path, e))
    if problems:
        for p in problems:
            print("trace: " + p)
        sys.exit(1)
    print("ok: %d events" % len(doc["traceEvents"]))


if __name__ == "__main__":
    main()
