#!/bin/sh
# test_cli_trace.sh ACG SCRATCH — traces and the start-up report of the acg tool: `acg run
# --trace FILE` and `acg bench decode --trace FILE` write Chrome trace-event JSON that
# check_trace.py (beside this script) loads with Python's json module and checks (events, their
# categories and arguments, B/E pairs, nesting, timestamps per track); `acg run` reports every
# bucket's capture (on a terminal as it happens, then a table; --json carries the same). Bad
# --trace paths: one line on stderr, exit 1 (2 for a missing value, with the usage), nothing left
# behind. What is at the path decides how the trace is written (tools/support/tool_cli.h): a FIFO
# in place and left a FIFO, a full device's ENOSPC reported with its path and the device left,
# a symbolic link left a link with the file it names replaced (the FIFOs and device nodes are the
# script's own; a device node needs root, else that case is skipped, saying so). Successes use
# the tiny preset on the cpu backend. Any sanitizer report fails a case.
#
# The checks need python3; without it the script exits 77 (CTest's skip) saying so.
set -u
. "$(dirname "$0")/lib.sh"
cli_setup "" "$@"
CHECK="$(dirname "$0")/check_trace.py"
python_or_skip "the traces cannot be checked"

# ---- helpers ----------------------------------------------------------------------------------

# acg NAME ARGS...: runs `acg ARGS...`, stdout to $OUT, stderr to $ERR, status to $rc.
acg() {
    case_name=$1
    shift
    case_begin "$case_name" "acg $*"
    "$ACG" "$@" >"$OUT" 2>"$ERR" 3>&-
    rc=$?
    case_ran
}

# check_trace FILE MODE: the trace is whole and holds what MODE says (check_trace.py).
check_trace() {
    if [ ! -f "$1" ]; then
        fail "no trace at $1"
        return
    fi
    if ! python3 "$CHECK" "$1" "$2" >"$DIR/check" 2>&1; then
        fail "the trace does not check: $(head -n 5 "$DIR/check")"
    fi
}

# no_leftovers DIR: no temporary trace file (".NAME.XXXXXX") was left in DIR.
no_leftovers() {
    if ls -A "$1" | grep -q '^\.'; then
        fail "a temporary file was left behind: $(ls -A "$1" | grep '^\.')"
    fi
}

TINY="--backend cpu --preset tiny --steps 4"

# shellcheck disable=SC2086 # TINY is a list of words
{
# ---- traces -----------------------------------------------------------------------------------

mkdir -p "$DIR/out"
acg "run --trace" run $TINY --prompt "Once upon a time" --trace "$DIR/out/run.json"
expect_rc 0
check_trace "$DIR/out/run.json" graphs
no_leftovers "$DIR/out"
pass

acg "run --graphs off --trace: eager, with the reason" run $TINY --prompt "Once upon a time" \
    --graphs off --trace "$DIR/out/eager.json"
expect_rc 0
check_trace "$DIR/out/eager.json" eager
pass

# An existing file is replaced whole.
echo "not a trace" >"$DIR/out/old.json"
acg "run --trace over an existing file" run $TINY --prompt "Once" --trace "$DIR/out/old.json"
expect_rc 0
check_trace "$DIR/out/old.json" graphs
no_leftovers "$DIR/out"
pass

acg "bench decode --trace" bench decode --backend cpu --preset tiny --batch 1,2 --steps 2 \
    --trace "$DIR/out/bench.json"
expect_rc 0
check_trace "$DIR/out/bench.json" bench
no_leftovers "$DIR/out"
pass

# ---- what is at the path: a FIFO, a device, a link ---------------------------------------------

# A FIFO is written in place and stays a FIFO; its reader gets the whole trace.
rm -rf "$DIR/special"
mkdir -p "$DIR/special"
fifo_begin "$DIR/special/t.fifo"
acg "run --trace to a FIFO" run $TINY --prompt "Once upon a time" --trace "$DIR/special/t.fifo"
fifo_end
expect_rc 0
if [ ! -p "$DIR/special/t.fifo" ]; then
    fail "$DIR/special/t.fifo is no longer a FIFO"
fi
check_trace "$DIR/special/t.fifo.got" graphs
no_leftovers "$DIR/special"
pass

# A full device stays one, and the trace that cannot be written says which file and why.
if full_device "$DIR/special"; then
    acg "run --trace to a full device" run $TINY --prompt "Once" --json \
        --trace "$DIR/special/full"
    one_line_error 1 "acg: writing the trace: '$DIR/special/full': No space left on device"
    if [ ! -c "$DIR/special/full" ]; then
        fail "$DIR/special/full is no longer a character device"
    fi
    no_leftovers "$DIR/special"
    pass
else
    skipped "run --trace to a full device: mknod is not permitted here (not root)"
fi

# A symbolic link stays one; the file it names gets the trace.
echo "not a trace" >"$DIR/special/real.json"
ln -s real.json "$DIR/special/link.json"
acg "run --trace through a symbolic link" run $TINY --prompt "Once" \
    --trace "$DIR/special/link.json"
expect_rc 0
if [ ! -L "$DIR/special/link.json" ]; then
    fail "$DIR/special/link.json is no longer a link"
fi
check_trace "$DIR/special/real.json" graphs
no_leftovers "$DIR/special"
pass

# ---- the start-up report ----------------------------------------------------------------------

acg "run: the buckets' table" run $TINY --prompt "Once upon a time"
expect_rc 0
expect_err "acg: buckets (memory in MiB):"
expect_err "captured"
expect_err "x the largest bucket's own"
pass

acg "run --json: the buckets" run $TINY --prompt "Once upon a time" --json
expect_rc 0
if ! python3 -c '
import json, sys
d = json.load(sys.stdin)
b = d["buckets"]
assert len(b) == d["buckets_captured"] + d["buckets_dropped"] == 7, "%d buckets" % len(b)
for r in b:
    for k in ("bucket", "label", "batch", "tokens", "state", "captured", "reason", "graph_bytes",
              "pool_growth", "eager_peak", "capture_ms"):
        assert k in r, "bucket %r lacks %s" % (r, k)
    assert r["state"] == "captured" and r["captured"] and r["reason"] is None, r
    assert r["graph_bytes"] > 0 and r["eager_peak"] > 0 and r["capture_ms"] >= 0, r
assert d["pool_bytes"] > 0 and sum(r["pool_growth"] for r in b) == d["pool_bytes"], d
largest = max(r["graph_bytes"] for r in b)
assert abs(d["pool_ratio"] - d["pool_bytes"] / largest) < 1e-3, d["pool_ratio"]
' <"$OUT" 2>"$DIR/json_error"; then
    fail "stdout is not the expected JSON: $(tail -n 1 "$DIR/json_error")"
fi
pass

acg "run --graphs off --json: every bucket eager" run $TINY --prompt "Once" --graphs off --json
expect_rc 0
if ! python3 -c '
import json, sys
d = json.load(sys.stdin)
assert all(r["state"] == "eager" and not r["captured"] for r in d["buckets"]), d["buckets"]
assert d["pool_bytes"] == 0 and d["pool_ratio"] is None, d
' <"$OUT" 2>"$DIR/json_error"; then
    fail "stdout is not the expected JSON: $(tail -n 1 "$DIR/json_error")"
fi
pass

# On a terminal the captures are reported as they happen (script(1) gives stderr a terminal).
if command -v script >/dev/null 2>&1 && script -q -e -c true /dev/null >/dev/null 2>&1; then
    name="run on a terminal: capture progress"
    cases=$((cases + 1))
    case_failed=no
    cmdline="script -c 'acg run $TINY --prompt Once'"
    script -q -e -c "\"$ACG\" run $TINY --prompt Once" /dev/null >"$ERR" 2>&1 </dev/null
    rc=$?
    : >"$OUT"
    expect_rc 0
    expect_err "capturing bucket 1 of 7 (step, batch 32, tokens 64): graph memory"
    expect_err "capturing bucket 7 of 7 (step, batch 1, tokens 1): graph memory"
    pass
else
    echo "skip: run on a terminal: script(1) cannot give the run a terminal here"
fi

# ---- bad --trace ------------------------------------------------------------------------------

mkdir -p "$DIR/empty"
acg "run --trace to a directory" run $TINY --prompt "Once" --trace "$DIR/empty"
one_line_error 1 "'$DIR/empty': Is a directory"
if [ -n "$(ls -A "$DIR/empty")" ]; then
    fail "something was left behind"
fi
no_leftovers "$DIR"
expect_no_out
pass

acg "run --trace in a missing directory" run $TINY --prompt "Once" \
    --trace "$DIR/no-such-dir/t.json"
one_line_error 1 "$DIR/no-such-dir/t.json"
expect_err "No such file or directory"
if [ -e "$DIR/no-such-dir" ]; then
    fail "the missing directory was created"
fi
pass

acg "run --trace without a value" run $TINY --prompt "Once" --trace
expect_rc 2
expect_err_first "acg: --trace needs a value"
expect_err "usage: acg run"
pass

acg "run --trace ''" run $TINY --prompt "Once" --trace ""
expect_rc 2
expect_err_first "acg: --trace needs a file name"
pass

# A run that fails after the trace began leaves neither the trace nor its temporary file.
mkdir -p "$DIR/failed"
acg "run that fails, with --trace" run --backend cpu --preset tiny --steps 1000 --prompt "Once" \
    --json --trace "$DIR/failed/t.json"
expect_rc 1
expect_err "seq_len"
if [ -n "$(ls "$DIR/failed")" ]; then
    fail "something was left behind: $(ls "$DIR/failed")"
fi
pass

acg "bench decode --trace to a directory" bench decode --backend cpu --preset tiny --steps 2 \
    --batch 1 --trace "$DIR/empty"
one_line_error 1 "'$DIR/empty': Is a directory"
if [ -n "$(ls -A "$DIR/empty")" ]; then
    fail "something was left behind"
fi
pass

acg "bench decode --trace without a value" bench decode --backend cpu --preset tiny --trace
expect_rc 2
expect_err "--trace needs FILE"
expect_err "usage: acg bench decode"
pass

# ---- several ranks ----------------------------------------------------------------------------

# Under mpirun, where this acg has MPI, every rank writes FILE.rank<r>.
# ACG_TEST_NO_MPIRUN (set by tests/CMakeLists.txt under TSan) leaves it out, saying why.
saved_asan=${ASAN_OPTIONS-}
export ASAN_OPTIONS="${saved_asan:+$saved_asan:}detect_leaks=0"
"$ACG" run $TINY --prompt "Once" --tp 2 >"$OUT" 2>"$ERR"
if [ -n "${ACG_TEST_NO_MPIRUN-}" ]; then
    echo "skip: --trace under mpirun: $ACG_TEST_NO_MPIRUN"
elif grep -a -q "needs 2 ranks" "$ERR" && command -v mpirun >/dev/null 2>&1; then
    mpi_flags=
    if mpirun --version 2>&1 | grep -q "Open MPI"; then
        mpi_flags="--allow-run-as-root --oversubscribe"
    fi
    name="--tp 2 --trace under mpirun"
    cases=$((cases + 1))
    case_failed=no
    cmdline="mpirun -np 2 acg run $TINY --prompt Once --tp 2 --trace $DIR/out/tp.json"
    timeout 120 mpirun $mpi_flags -np 2 "$ACG" run $TINY --prompt "Once" --tp 2 \
        --trace "$DIR/out/tp.json" >"$OUT" 2>"$ERR"
    rc=$?
    expect_rc 0
    check_trace "$DIR/out/tp.json.rank0" graphs
    check_trace "$DIR/out/tp.json.rank1" graphs
    if [ -e "$DIR/out/tp.json" ]; then
        fail "FILE itself was written besides FILE.rank<r>"
    fi
    no_leftovers "$DIR/out"
    pass
else
    echo "skip: --trace under mpirun: this acg has no MPI, or mpirun is missing"
fi
export ASAN_OPTIONS="$saved_asan"
}

cli_finish
