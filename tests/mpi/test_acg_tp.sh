#!/bin/sh
# test_acg_tp.sh CASE ACG SCRATCH — the acg tool split over ranks (--tp), run by mpiexec as every
# rank: each rank runs this script, which runs the built tool ACG and checks what its rank should
# see. SCRATCH is a folder for files (each rank its own). Cases:
#
#   bench-json  `acg bench decode --tp 2 --json` on the tiny preset: rank 0 prints one JSON
#               object whose results each hold a step's allreduce cost (allreduce_step_us), and
#               the other ranks print nothing.
#   kill        `acg run --tp 2` on many prompts, one at a time; rank 1's tool is killed
#               (SIGKILL) mid-run, once rank 0's tool says the buckets are captured (the steps
#               follow; rank 0 alone prints, and its script tells rank 1 through a file of this
#               job's in SCRATCH), while its rank lives on, so that mpiexec does not end the job
#               for it: rank 0 must fail
#               by itself, with one line naming its rank and the dead peer, or a collective that
#               got no answer within ACG_COMM_TIMEOUT_MS, and leave no shared-memory segment
#               behind (/dev/shm/acg-<its pid>-*). Nothing here is timed: rank 1 waits for what
#               rank 0's tool wrote, however slow the machine.
#
# A rank that passes prints "<case>: rank R: ok". Exit status 77 (CTest's skip) when this rank
# cannot tell its rank, or without python3 for bench-json.
set -u
LC_ALL=C
export LC_ALL

if [ $# -ne 3 ]; then
    echo "usage: $0 bench-json|kill ACG_BINARY SCRATCH_DIR" >&2
    exit 2
fi
CASE=$1
ACG=$2
DIR=$3

# Open MPI, then MPICH (PMI) and PMIx launchers, name the rank in the environment.
RANK=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}
if [ -z "$RANK" ]; then
    echo "$CASE: this MPI names no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK)"
    exit 77
fi
mkdir -p "$DIR" || exit 1
OUT=$DIR/$CASE.$RANK.stdout
ERR=$DIR/$CASE.$RANK.stderr

# fail TEXT: says why this rank fails, with what the tool wrote, and exits 1.
fail() {
    echo "$CASE: rank $RANK: FAIL: $1"
    echo "    stdout:"
    sed 's/^/      | /' "$OUT" | head -n 20
    echo "    stderr:"
    sed 's/^/      | /' "$ERR" | head -n 20
    exit 1
}

case $CASE in
bench-json)
    if ! command -v python3 >/dev/null 2>&1; then
        echo "bench-json: python3 reads the JSON, and there is none: install python3"
        exit 77
    fi
    "$ACG" bench decode --tp 2 --preset tiny --batch 1 --steps 5 --json >"$OUT" 2>"$ERR"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "exit status $rc"
    fi
    if [ "$RANK" -ne 0 ]; then
        if [ -s "$OUT" ]; then
            fail "expected rank 0 alone to print"
        fi
    elif ! python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["tp"] == 2, "tp is %r" % d["tp"]
assert len(d["results"]) == 1, "%d results" % len(d["results"])
for r in d["results"]:
    a = r["allreduce_step_us"]
    assert isinstance(a, (int, float)) and math.isfinite(a) and a > 0, "allreduce_step_us %r" % a
    assert r["tokens_match"] is True
' "$OUT" 2>"$DIR/bench-json.python"; then
        fail "the JSON: $(tail -n 1 "$DIR/bench-json.python")"
    fi
    ;;
kill)
    # Enough one-at-a-time requests of up to 200 tokens to run for many seconds.
    PROMPTS=$DIR/kill.$RANK.prompts
    : >"$PROMPTS"
    i=0
    while [ $i -lt 1024 ]; do
        echo "Once upon a time $i" >>"$PROMPTS"
        i=$((i + 1))
    done
    # Rank 0 says through this file that the steps begin: named for this job (the launcher's
    # job id), so no earlier run's can be taken for it.
    JOB=${PMIX_NAMESPACE:-${OMPI_MCA_ess_base_jobid:-$PPID}}
    CAPTURED=$DIR/kill.$JOB.captured
    "$ACG" run --backend cpu --tp 2 --preset tiny --batch 1 --steps 200 --prompts "$PROMPTS" \
        >"$OUT" 2>"$ERR" &
    pid=$!
    if [ "$RANK" -ne 0 ]; then
        while [ ! -e "$CAPTURED" ]; do
            if ! kill -0 $pid 2>/dev/null; then
                fail "the run ended before rank 0 said its buckets were captured"
            fi
            sleep 0.2
        done
        if ! kill -KILL $pid 2>/dev/null; then
            fail "the run ended before it could be killed"
        fi
        wait $pid
        echo "kill: rank $RANK: ok (the tool killed mid-run)"
        # Stays alive until mpiexec ends the job, which rank 0's failure does (well inside the
        # test's timeout); the sleeps' output goes nowhere, so that one left behind keeps no pipe
        # of CTest's open.
        i=0
        while [ $i -lt 240 ]; do
            sleep 1 </dev/null >/dev/null 2>&1
            i=$((i + 1))
        done
        exit 0
    fi
    # The tool prints the graph pool's size once the buckets are captured, right before its
    # first step.
    while kill -0 $pid 2>/dev/null; do
        if grep -a -q 'acg: graph pool' "$ERR"; then
            : >"$CAPTURED"
            break
        fi
        sleep 0.2
    done
    wait $pid
    rc=$?
    rm -f "$CAPTURED"
    if [ "$rc" -ne 1 ]; then
        fail "expected exit status 1, got $rc"
    fi
    dead='rank 1 \(pid [0-9]+\) exited|no answer from every rank within'
    if ! grep -a -q -E "acg: rank 0: running a step: .*($dead)" "$ERR"; then
        fail "expected rank 0 to report the dead rank, or the unanswered collective"
    fi
    left=$(ls /dev/shm 2>/dev/null | grep "^acg-$pid-")
    if [ -n "$left" ]; then
        fail "shared memory left behind: $left"
    fi
    # Exit 1 as the tool did: mpiexec ends the job, and exits non-zero.
    echo "kill: rank 0: ok (failed by itself, nothing left in /dev/shm):"
    grep -a 'acg: rank 0: ' "$ERR" | sed 's/^/    /'
    exit 1
    ;;
*)
    echo "$0: unknown case '$CASE'" >&2
    exit 2
    ;;
esac
echo "$CASE: rank $RANK: ok"
exit 0
