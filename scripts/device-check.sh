#!/usr/bin/env bash
# device-check.sh — the prepared check of the cuda backend on a lent GPU machine (one H200,
# CUDA 13, PyTorch; nothing can be installed there), in under 8 minutes.
#
#   scripts/device-check.sh [--dry-run] [--plain] [--budget S] [--jobs N] OUTDIR
#   scripts/device-check.sh --bundle-deps
#
# It takes stock of the tools (cmake, ninja, cmocka, nvcc, python3 + torch, nvidia-smi), builds
# the library, the acg tool and, with cmocka, the tests in Release with CUDA on (CMake when
# present, else scripts/device-build.sh with the plain compiler), then runs, each under its own
# timeout and all within the budget: the device tests on the real driver (ctest -L cuda; the
# one-source row says what test_conformance and test_model_kernels among them proved: the kernels
# written once, the core's and the model's, give the cpu backend's bits on the GPU), acg
# info, the allreduce through the real NCCL (one rank), cuBLAS writing acg's buffers inside an
# acg graph, acg bench launch and decode, decoding N steps per launch (loops: bench decode
# --steps-per-launch 4,16 against one step, and acg run --steps-per-launch 16's tokens against
# the cpu backend's), acg run --verify, the tokens and the logits against the cpu backend, and
# the PyTorch peer (bench/peer/torch_peer.py). Each step writes
# OUTDIR/<step>.json (status pass, fail or skip, its key figure, seconds, and the tool's own
# JSON), its log OUTDIR/<step>.log, and OUTDIR/summary.json gathers them; one table on stdout
# ends it.
#
#   --dry-run  on a machine without a GPU: every CPU-side step for real (the inventory, the
#              CMake build and the plain build into build-device-plain, the acg steps and the
#              device tests on the cpu backend, the peer on the CPU when torch is installed);
#              what needs the GPU is reported as skipped (no GPU)
#   --plain    build with scripts/device-build.sh even where CMake is present
#   --budget S seconds for the whole check (default 450; 1800 with --dry-run): a step gets at
#              most what is left, and a step with nothing left is skipped
#   --jobs N   build jobs (default: the number of cores)
#   --bundle-deps  copies this machine's cmocka (header and library) into
#              build-device-deps/cmocka, and exits: the GPU machine may have no cmocka, and
#              without it no test is built there. Carry build-device-deps with the tree (an
#              ignored folder); the check uses it where the system has no cmocka, or where
#              CMOCKA_DIR names a folder of that shape (include/cmocka.h, lib/libcmocka.so).
#
# On the GPU machine, from the repository root, with build-device-deps carried (at most 8 files
# come back from $OUT, so the step files travel as one archive):
#   bash scripts/device-check.sh /tmp/dc; rc=$?; tar czf "$OUT/device-check.tgz" -C /tmp dc;
#   cp /tmp/dc/summary.json "$OUT/"; exit $rc
# Here: make device-check-dry (scripts/device-check.sh --dry-run build-device-check).
# Exit status: 0 when no step failed (skips allowed), 1 when one did, 2 for bad arguments.
set -euo pipefail

usage() {
    sed -n '5,6p' "$0" | sed 's/^#   /usage: /' >&2
    exit 2
}

dry=0
plain=0
bundle=0
budget=
jobs=$(nproc 2>/dev/null || echo 2)
out=
while (($#)); do
    case $1 in
    --dry-run) dry=1; shift ;;
    --plain) plain=1; shift ;;
    --bundle-deps) bundle=1; shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs N}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "device-check: unknown option $1" >&2; usage ;;
    *) [[ -z $out ]] || usage; out=$1; shift ;;
    esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps_cmocka=$root/build-device-deps/cmocka

if ((bundle)); then
    [[ -f /usr/include/cmocka.h ]] || { echo "device-check: no /usr/include/cmocka.h" >&2; exit 1; }
    lib=
    for f in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib; do
        [[ -f $f/libcmocka.so.0 ]] && { lib=$f/libcmocka.so.0; break; }
    done
    [[ -n $lib ]] || { echo "device-check: no libcmocka.so.0" >&2; exit 1; }
    rm -rf "$deps_cmocka"
    mkdir -p "$deps_cmocka/include" "$deps_cmocka/lib"
    cp /usr/include/cmocka*.h "$deps_cmocka/include/"
    # Plain files, no links: a link would travel as a link.
    cp -L "$lib" "$deps_cmocka/lib/libcmocka.so.0"
    cp -L "$lib" "$deps_cmocka/lib/libcmocka.so"
    echo "device-check: cmocka copied into ${deps_cmocka#"$root"/}" \
        "($(du -sh "$deps_cmocka" | cut -f1)): carry build-device-deps"
    exit 0
fi
[[ -n $out ]] || usage
[[ $budget =~ ^[0-9]+$ || -z $budget ]] || usage
[[ $jobs =~ ^[0-9]+$ ]] || usage
budget=${budget:-$((dry ? 1800 : 450))}

cd "$root"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.json "$out"/*.log "$out"/*.out "$out"/*.xml

# The acg steps' backend, what their tokens and logits are compared with, and the label and
# name of the device tests (<test>.<backend>) that the conformance step runs.
if ((dry)); then
    mode="dry-run"
    backend=cpu
    reference="cpu:0?capture=native"
    test_label='^cpu$'
    test_regex='\.cpu$'
else
    mode=device
    backend=cuda
    reference=cpu
    test_label='^cuda$'
    test_regex='\.cuda$'
fi
cmake_dir=$root/build-device
plain_dir=$root/build-device-plain
# The cuda device tests run on acg's CUDA test driver unless told otherwise (tests/CMakeLists.txt):
# here they must run on the GPU's, and a dry run configures the same (they skip: no driver).
# The test driver's own suite (tests/cuda) is `make test`'s business, not this check's.
cmake_mode_flags=(-DACG_CUDA_TEST_DRIVER=OFF)
# A driver named in the environment would stand in for the real one.
unset ACG_CUDA_DRIVER
while IFS= read -r v; do unset "$v"; done < <(compgen -e | grep '^ACGTEST_' || true)
t_start=$EPOCHREALTIME
reserve=15 # seconds kept for the summary

say() { printf 'device-check: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

# ---- time --------------------------------------------------------------------------------------

# Seconds since $1 (an EPOCHREALTIME), with one decimal.
since() {
    awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# The timeout for a step that wants $1 seconds: what the budget has left, at most $1; fails when
# less than 5 seconds are left.
step_limit() {
    local used left
    used=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }')
    left=$((budget - reserve - used))
    ((left >= 5)) || return 1
    echo $((left < $1 ? left : $1))
}

# ---- JSON --------------------------------------------------------------------------------------

json_str() {
    local s
    s=$(printf '%s' "$1" | tr -d '\000-\010\013\014\016-\037')
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

# Prints file $1 when it holds one JSON value, else null.
json_file() {
    local check='import json, sys; json.load(open(sys.argv[1]))'
    if [[ -s $1 ]] && { ! have python3 || python3 -c "$check" "$1" 2>/dev/null; }; then
        cat "$1"
    else
        printf 'null'
    fi
}

# ---- steps -------------------------------------------------------------------------------------

steps=()
declare -A st_status st_figure st_seconds

# record NAME STATUS FIGURE SECONDS REASON COMMAND [RESULT]: OUTDIR/NAME.json and the table row.
record() {
    local name=$1 status=$2 figure=$3 seconds=$4 reason=$5 command=$6 result=${7:-}
    steps+=("$name")
    st_status[$name]=$status
    st_figure[$name]=$figure
    st_seconds[$name]=$seconds
    {
        printf '{"step": %s, "status": %s, "figure": %s, "seconds": %s, "reason": %s,\n' \
            "$(json_str "$name")" "$(json_str "$status")" "$(json_str "$figure")" "$seconds" \
            "$(json_str "$reason")"
        printf ' "command": %s, "log": %s,\n "result": ' "$(json_str "$command")" \
            "$([[ -f $out/$name.log ]] && json_str "$name.log" || printf null)"
        if [[ -n $result ]]; then json_file "$result"; else printf 'null'; fi
        printf '}\n'
    } >"$out/$name.json"
    printf 'device-check: %-16s %-7s %s\n' "$name" "$status" "${figure:-$reason}"
}

skip_step() { record "$1" skip "$2" 0 "$2" "${3:-}"; }

# The last line of a log that says something, for a failed step's figure.
last_words() {
    [[ -f $1 ]] || return 0
    grep -v '^[[:space:]]*$' "$1" | tail -n 1 | cut -c1-160 || true
}

# run NAME WANT_SECONDS STDOUT_FILE command...: runs it under its timeout, stderr (and stdout
# unless STDOUT_FILE names a file) into OUTDIR/NAME.log. Sets rc, secs and limit; rc 124 is a
# timeout, 125 no time left in the budget.
run() {
    local name=$1 want=$2 stdout=$3 t0
    shift 3
    if ! limit=$(step_limit "$want"); then
        rc=125
        secs=0
        return 0
    fi
    printf '$ %s\n' "$*" >"$out/$name.log"
    t0=$EPOCHREALTIME
    rc=0
    if [[ -n $stdout ]]; then
        timeout -k 10 "$limit" "$@" >"$stdout" 2>>"$out/$name.log" </dev/null || rc=$?
    else
        timeout -k 10 "$limit" "$@" >>"$out/$name.log" 2>&1 </dev/null || rc=$?
    fi
    ((rc != 137)) || rc=124
    secs=$(since "$t0")
}

# Why a run failed, for its record: the first error a build printed, else the last line.
why_failed() {
    local first=
    case $rc in
    124) echo "timed out after $limit s" ;;
    125) echo "no time left in the budget" ;;
    *)
        [[ $1 == build* ]] && first=$(grep -m1 -E 'CMake Error|error:|Error [0-9]+|device-build: ' \
            "$out/$1.log" | grep -v 'device-build: \(embedded\|built\|libacg\|acg:\|tests:\)' |
            cut -c1-160 || true)
        echo "exit $rc: ${first:-$(last_words "$out/$1.log")}"
        ;;
    esac
}

# assess KIND FILE...: "STATUS<TAB>FIGURE" read from a tool's JSON (python3), for a run that
# exited 0. Without python3 the exit status alone decides.
assess() {
    if ! have python3; then
        printf 'pass\t-\n'
        return 0
    fi
    python3 - "$@" <<'PY' || printf 'fail\tcould not read %s\n' "$2"
import json, sys

kind, files = sys.argv[1], sys.argv[2:]


def load(i):
    with open(files[i]) as f:
        return json.load(f)


def out(ok, figure):
    print("%s\t%s" % ("pass" if ok else "fail", figure))


def yn(v):
    return "yes" if v else "no"


def triple(xs, f):
    return "|".join(f % x if x is not None else "-" for x in xs)


if kind == "info":
    want, info = files[1], load(0)
    names = [b["name"] for b in info.get("backends", [])]
    b = next((b for b in info.get("backends", []) if b["name"] == want.split(":")[0]), None)
    if b is None:
        out(False, "no %s backend in this build (backends: %s)" % (want, ", ".join(names)))
    elif not b.get("available") or not b.get("devices"):
        out(False, "%s unavailable: %s" % (want, b.get("reason", "")))
    else:
        d = b["devices"][0]
        out(True, "%s %s; graphs %s, update %s, %.0f GiB" % (
            d["spec"], d["name"][:40], yn(d.get("graphs")), yn(d.get("graph_update")),
            d.get("memory_bytes", 0) / 2**30))
elif kind == "launch":
    r = load(0)
    raw = r.get("raw_step_us")
    upd, rec = r.get("node_update_step_us"), r.get("recapture_step_us")
    out(r.get("verified", False),
        "eager/graph %.1fx: %.2f -> %.2f us a step of %d kernels; %s; %s%s" % (
            r["step_ratio"], r["eager_step_us"], r["graph_step_us"], r["kernels"],
            "raw cuGraphLaunch %.2f us, acg/raw %.3fx" % (raw, r["acg_over_raw_step"])
            if raw is not None else "no raw row",
            "node update %.2f us, recapture %s" % (
                upd, "%.2f us" % rec if rec is not None else "-")
            if upd is not None else "no node update",
            "" if r.get("verified") else ", NOT verified"))
elif kind == "decode":
    r = load(0)
    res = r["results"]
    same = all(x.get("tokens_match") for x in res)
    out(same, "b%s: graph tok/s %s, eager/graph %s%s" % (
        triple([x["batch"] for x in res], "%d"), triple([x["tokens_per_s_graph"] for x in res],
        "%.0f"), triple([x["step_ratio"] for x in res], "%.2f"),
        "" if same else ", tokens DIFFER"))
elif kind == "loops":  # step_us: a decode step, a token of every row
    r = load(0)
    res = r["steps_per_launch"]
    same = all(x.get("tokens_match") for x in res)
    looped = all(x["longest_launch_steps"] == x["steps_per_launch"] for x in res)
    deep = max(x["steps_per_launch"] for x in res)
    top = [x for x in res if x["steps_per_launch"] == deep]
    out(same and looped, "N=%d vs 1: b%s: %s x faster, host %s x%s%s" % (
        deep, triple([x["batch"] for x in top], "%d"),
        triple([x["speedup_vs_1"] for x in top], "%.2f"),
        triple([x["host_ratio_vs_1"] for x in top], "%.3f"),
        "" if same else ", tokens DIFFER", "" if looped else ", NO loops ran"))
elif kind == "run":
    r = load(0)
    out(r.get("verified", False), "%.0f tok/s, %d/%d steps replayed, %d buckets, verified %s" % (
        r["tokens_per_s"], r["graphed_steps"], r["steps"], r["buckets_captured"],
        yn(r.get("verified"))))
elif kind == "tokens":
    b, a = load(0), load(1)  # the reference's run, then the run step's
    ra, rb = a["requests"], b["requests"]
    n = sum(len(x["tokens"]) for x in ra)
    same = sum(1 for x, y in zip(ra, rb) for s, t in zip(x["tokens"], y["tokens"]) if s == t)
    ok = len(ra) == len(rb) and all(x["tokens"] == y["tokens"] for x, y in zip(ra, rb))
    out(ok, "%d/%d tokens equal to %s's (%d requests)" % (same, n, files[2], len(ra)))
elif kind == "peer":
    r = load(0)
    res = r["results"]
    errors = [x for x in res if "error" in x]
    if r.get("graphs"):
        ok = not errors and all(x.get("tokens_match") for x in res)
        out(ok, "b%s: replay us %s, eager/graph %s%s" % (
            triple([x["batch"] for x in res], "%d"), triple([x.get("graph_us") for x in res],
            "%.0f"), triple([x.get("ratio") for x in res], "%.2f"),
            ", %d batch(es) failed" % len(errors) if errors else ""))
    else:
        out(not errors, "%s eager only: b%s: sync us %s" % (
            r["device"], triple([x["batch"] for x in res], "%d"),
            triple([x.get("eager_sync_us") for x in res], "%.0f")))
else:
    out(False, "unknown kind " + kind)
PY
}

# Records a step that ran a tool with JSON output: its exit status, then what assess says.
record_tool() {
    local name=$1 kind=$2 command=$3 result=$4
    shift 4
    local status figure reason=
    if ((rc == 125)); then
        skip_step "$name" "no time left in the budget" "$command"
        return 0
    fi
    if ((rc == 0)); then
        status=fail
        figure="could not assess $result"
        IFS=$'\t' read -r status figure < <(assess "$kind" "$result" "$@") || true
        [[ $status == pass ]] || reason=$figure
    else
        status=fail
        reason=$(why_failed "$name")
        figure=$reason
    fi
    record "$name" "$status" "$figure" "$secs" "$reason" "$command" "$result"
}

# ---- inventory ---------------------------------------------------------------------------------

# cmocka: CMOCKA_DIR's when set, else the system's, else the bundled one (--bundle-deps).
# cmocka_own is 1 when it is not the system's: the builds are then told where it is.
cmocka_inc=
cmocka_lib=
cmocka_own=0
cmocka_in() {
    [[ -f $1/include/cmocka.h && -f $1/lib/libcmocka.so ]] || return 1
    cmocka_inc=$1/include
    cmocka_lib=$1/lib/libcmocka.so
    cmocka_own=1
}
find_cmocka() {
    local d f
    if [[ -n ${CMOCKA_DIR:-} ]]; then
        cmocka_in "$(cd "$CMOCKA_DIR" && pwd)"
        return
    fi
    for d in /usr/include /usr/local/include; do
        [[ -f $d/cmocka.h ]] && { cmocka_inc=$d; break; }
    done
    for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib /usr/local/lib; do
        for f in "$d/libcmocka.so" "$d/libcmocka.a"; do
            [[ -f $f ]] && { cmocka_lib=$f; break 2; }
        done
    done
    [[ -n $cmocka_inc && -n $cmocka_lib ]] || cmocka_in "$deps_cmocka"
}

inventory() {
    local t0=$EPOCHREALTIME v_cmake=no v_ninja=no v_cmocka=no v_nvcc=no v_cc=no v_py=no
    local v_torch=no v_gpu=no nvcc_path
    have cmake && v_cmake=$(cmake --version | head -n 1 | awk '{ print $3 }')
    have ninja && v_ninja=$(ninja --version)
    find_cmocka && v_cmocka=$cmocka_lib
    nvcc_path=$(command -v nvcc || true)
    [[ -n $nvcc_path || ! -x /usr/local/cuda/bin/nvcc ]] || nvcc_path=/usr/local/cuda/bin/nvcc
    [[ -z $nvcc_path ]] ||
        v_nvcc=$("$nvcc_path" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -n 1)
    have "${CC:-cc}" && v_cc=$("${CC:-cc}" -dumpfullversion -dumpversion 2>/dev/null | head -n 1)
    if have python3; then
        v_py=$(python3 -c 'import platform; print(platform.python_version())')
        v_torch=$(timeout 90 python3 -c 'import torch
print(torch.__version__, "cuda" if torch.cuda.is_available() else "no-cuda")' 2>/dev/null ||
            echo no)
    fi
    if have nvidia-smi; then
        v_gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
            --format=csv,noheader 2>/dev/null | head -n 1 || true)
        v_gpu=${v_gpu:-none}
    fi
    export NVCC=${nvcc_path:-}
    inv_line="cmake $v_cmake | ninja $v_ninja | cmocka $v_cmocka | nvcc $v_nvcc | cc $v_cc"
    inv_line+=" | python3 $v_py | torch $v_torch | gpu $v_gpu | $(nproc) cores"
    {
        printf '{"mode": %s, "cmake": %s, "ninja": %s, "cmocka": %s, "nvcc": %s, "cc": %s,\n' \
            "$(json_str "$mode")" "$(json_str "$v_cmake")" "$(json_str "$v_ninja")" \
            "$(json_str "$v_cmocka")" "$(json_str "$v_nvcc")" "$(json_str "$v_cc")"
        printf ' "python3": %s, "torch": %s, "gpu": %s, "cores": %d, "commit": %s}\n' \
            "$(json_str "$v_py")" "$(json_str "$v_torch")" "$(json_str "$v_gpu")" "$(nproc)" \
            "$(json_str "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")"
    } >"$out/inventory.out"
    echo "inventory: $inv_line"
    record inventory pass "$inv_line" "$(since "$t0")" "" "" "$out/inventory.out"
    have_cmake=$([[ $v_cmake != no ]] && echo 1 || echo 0)
    have_ninja=$([[ $v_ninja != no ]] && echo 1 || echo 0)
    have_cmocka=$([[ $v_cmocka != no ]] && echo 1 || echo 0)
    if ((have_cmocka && cmocka_own)); then
        # Both builds and every test run find it there.
        export CMOCKA_INCLUDE_DIR=$cmocka_inc CMOCKA_LIBRARY=$cmocka_lib
        export LD_LIBRARY_PATH=${cmocka_lib%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
}

# ---- builds ------------------------------------------------------------------------------------

acg=
tests_dir=
built_with=
cmake_built=0

build_cmake() {
    local gen=() tests_flag=ON cache=$cmake_dir/CMakeCache.txt extra=()
    ((have_ninja)) && gen=(-G Ninja)
    ((have_cmocka)) || tests_flag=OFF
    # A folder configured with another generator cannot be configured again.
    if [[ -f $cache ]]; then
        local was want='Unix Makefiles'
        was=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
        ((have_ninja)) && want=Ninja
        [[ $was == "$want" ]] || rm -rf "$cmake_dir"
    fi
    read -r -a extra <<<"${DEVICE_CHECK_CMAKE_FLAGS:-}"
    ((cmocka_own)) &&
        extra+=("-DCMOCKA_INCLUDE_DIR=$cmocka_inc" "-DCMOCKA_LIBRARIES=$cmocka_lib")
    local cmd="cmake -S . -B build-device ${gen[*]} -DCMAKE_BUILD_TYPE=Release -DACG_WITH_CUDA=ON"
    cmd+=" -DACG_BUILD_TESTS=$tests_flag ${cmake_mode_flags[*]} ${extra[*]}"
    cmd+=" && cmake --build build-device -j $jobs"
    run build 300 "" bash -c "$cmd"
    if ((rc == 125)); then
        skip_step build "no time left in the budget" "$cmd"
        return 1
    fi
    if ((rc != 0)); then
        record build fail "$(why_failed build)" "$secs" "$(why_failed build)" "$cmd"
        return 1
    fi
    cmake_built=1
    local backends fatbins
    backends=$(sed -n 's/^-- acg: backends: //p' "$out/build.log" | tail -n 1 | tr ';' ',')
    fatbins=$(find "$cmake_dir" -name '*.fatbin' 2>/dev/null | wc -l)
    local tool=make tests_built="not built (no cmocka)" figure
    ((have_ninja)) && tool=ninja
    [[ $tests_flag == ON ]] && tests_built=built
    figure="cmake ($tool): backends ${backends:-?}, $fatbins fatbin(s), tests $tests_built"
    local status=pass reason=
    if ((!dry)) && [[ ,$backends, != *,cuda,* ]]; then
        reason="the cuda backend was not built"
    elif [[ ,$backends, == *,cuda,* ]] && ((fatbins == 0)); then
        reason="the cuda backend has no kernels (no fatbin)"
    fi
    if [[ -n $reason ]]; then
        figure="$figure; $reason"
        # On the GPU machine the plain build, which has them, stands in (a dry run builds it
        # anyway); the acg steps run from it.
        ((dry)) || status=fail
    fi
    record build "$status" "$figure" "$secs" "$reason" "$cmd"
    [[ $status == pass ]] || return 1
    use_cmake_build
}

use_cmake_build() {
    acg=$cmake_dir/acg
    [[ -x $cmake_dir/tests/test_model ]] && tests_dir=$cmake_dir/tests
    built_with=cmake
}

build_plain() {
    local cmd="scripts/device-build.sh --cuda on --tests auto --jobs $jobs build-device-plain"
    run build-plain 300 "" scripts/device-build.sh --cuda on --tests auto --jobs "$jobs" \
        "$plain_dir"
    if ((rc == 125)); then
        skip_step build-plain "no time left in the budget" "$cmd"
        return 1
    fi
    if ((rc != 0)); then
        local why
        why=$(why_failed build-plain)
        record build-plain fail "$why" "$secs" "$why" "$cmd"
        return 1
    fi
    local info cuda kernels fatbins notes objects ntests
    info=$plain_dir/build-info.txt
    cuda=$(sed -n 's/^cuda=//p' "$info")
    kernels=$(sed -n 's/^cuda_kernels=//p' "$info")
    fatbins=$(sed -n 's/^fatbins=//p' "$info")
    notes=$(sed -n 's/^fatbin_notes=//p' "$info")
    objects=$(sed -n 's/^objects=//p' "$info")
    ntests=$(sed -n 's/^tests=//p' "$info")
    local has_cuda=no figure
    ((cuda)) && has_cuda=yes
    figure="plain cc: $objects objects, cuda backend $has_cuda"
    figure+=", fatbins $fatbins${notes:+ ($notes)}, $ntests tests"
    local status=pass reason=
    if ((!dry)) && ((!cuda || !kernels)); then
        status=fail
        reason="no cuda backend or no CUDA kernels"
    fi
    record build-plain "$status" "$figure" "$secs" "$reason" "$cmd"
    if [[ -z $acg ]]; then
        acg=$plain_dir/acg
        ((ntests > 0)) && tests_dir=$plain_dir/tests
        built_with=plain
    fi
    return 0
}

# ---- the checks --------------------------------------------------------------------------------

step_gpu() {
    if ((dry)); then
        skip_step gpu "skipped (no GPU)" "nvidia-smi"
        return 0
    fi
    if ! have nvidia-smi; then
        record gpu fail "nvidia-smi not found" 0 "nvidia-smi not found" "nvidia-smi"
        return 0
    fi
    run gpu 30 "$out/gpu.out" nvidia-smi --format=csv,noheader \
        --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu
    if ((rc == 0)); then
        record gpu pass "$(head -n 1 "$out/gpu.out")" "$secs" "" "nvidia-smi --query-gpu=..."
    else
        record gpu fail "$(why_failed gpu)" "$secs" "$(why_failed gpu)" "nvidia-smi --query-gpu=..."
    fi
}

step_info() {
    run info 30 "$out/info.out" "$acg" info --json
    record_tool info info "acg info --json" "$out/info.out" "$backend"
}

# ctest over the device tests of the CMake build (label $test_label), or the test binaries of
# the plain build one by one. $1: the step's name; $2: the label; $3: a name regex or "".
step_conformance_ctest() {
    local name=$1 label=$2 regex=$3 n
    local args=(--test-dir "$cmake_dir" -L "$label")
    [[ -n $regex ]] && args+=(-R "$regex")
    n=$(ctest "${args[@]}" -N 2>/dev/null | sed -n 's/^Total Tests: //p')
    if [[ ${n:-0} == 0 ]]; then
        skip_step "$name" "skipped (no tests labelled $label in this build)" "ctest ${args[*]}"
        return 0
    fi
    local cmd="ctest ${args[*]} -j 8 --timeout 120 --output-on-failure"
    run "$name" 240 "" ctest "${args[@]}" -j 8 --timeout 120 --output-on-failure \
        --output-junit "$out/$name.xml"
    if ((rc == 125)); then
        skip_step "$name" "no time left in the budget" "$cmd"
        return 0
    fi
    local passed failed skipped total
    total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$out/$name.log" || true)
    passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.* Passed ' "$out/$name.log" || true)
    skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*(\*\*\*Skipped|Not Run)' "$out/$name.log" || true)
    failed=$((total - passed - skipped))
    conformance_record "$name" "$cmd" "$passed" "$failed" "$skipped" "$total" \
        "$(cuda_tests_driver "${args[@]}")"
}

# Which driver the <test>.cuda device tests get from CTest: "test" when their environment
# names one (ACG_CUDA_DRIVER, acg's test driver), "real" when none does, "" without python3.
cuda_tests_driver() {
    have python3 || return 0
    ctest "$@" --show-only=json-v1 2>/dev/null | python3 -c '
import json, sys
tests = json.load(sys.stdin).get("tests", [])
env = [p.get("value", []) for t in tests if t["name"].endswith(".cuda")
       for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"]
print("" if not any(t["name"].endswith(".cuda") for t in tests) else
      "test" if any(v.startswith("ACG_CUDA_DRIVER=") for e in env for v in e) else "real")
' 2>/dev/null || true
}

step_conformance_plain() {
    local name=$1 spec=$2 host_tests t bin trc passed=0 failed=0 skipped=0 total=0 t0
    host_tests=" $(sed -n 's/^set(ACG_HOST_TESTS \(.*\))$/\1/p' tests/CMakeLists.txt) "
    local cmd="$tests_dir/test_* --device $spec (each device test)"
    printf '$ %s\n' "$cmd" >"$out/$name.log"
    t0=$EPOCHREALTIME
    for bin in "$tests_dir"/test_*; do
        t=$(basename "$bin")
        [[ $host_tests == *" $t "* ]] && continue
        if ! limit=$(step_limit 120); then
            echo "$t: no time left in the budget" >>"$out/$name.log"
            failed=$((failed + 1))
            total=$((total + 1))
            break
        fi
        trc=0
        ACG_LOG=error timeout -k 10 "$limit" "$bin" --device "$spec" >>"$out/$name.log" 2>&1 \
            </dev/null || trc=$?
        total=$((total + 1))
        case $trc in
        0) passed=$((passed + 1)); echo "$t: passed" >>"$out/$name.log" ;;
        77) skipped=$((skipped + 1)); echo "$t: skipped" >>"$out/$name.log" ;;
        *) failed=$((failed + 1)); echo "$t: FAILED (exit $trc)" >>"$out/$name.log" ;;
        esac
    done
    secs=$(since "$t0")
    conformance_record "$name" "$cmd" "$passed" "$failed" "$skipped" "$total"
}

conformance_record() {
    local name=$1 cmd=$2 passed=$3 failed=$4 skipped=$5 total=$6 driver=${7:-} status=pass reason=
    local figure="$passed passed, $failed failed, $skipped skipped of $total"
    case $driver in
    test) figure="$figure; .cuda tests on acg's CUDA test driver" ;;
    real) figure="$figure; .cuda tests on the real driver" ;;
    esac
    {
        printf '{"passed": %d, "failed": %d, "skipped": %d, "total": %d,' \
            "$passed" "$failed" "$skipped" "$total"
        printf ' "cuda_driver": %s, "junit": %s}\n' "$(json_str "$driver")" \
            "$([[ -f $out/$name.xml ]] && json_str "$name.xml" || printf null)"
    } >"$out/$name.out"
    if ((rc == 124)); then
        status=fail
        reason="timed out after $limit s"
        figure="$figure; $reason"
    elif ((!dry)) && [[ $driver == test ]]; then
        status=fail
        reason="the .cuda tests ran on acg's CUDA test driver (ACG_CUDA_TEST_DRIVER), not the GPU"
    elif ((failed > 0 || total == 0)); then
        status=fail
        reason=$figure
    elif ((passed == 0)); then
        # Every test skipped: the device is not there. On the GPU machine that is a failure.
        if ((dry)) || [[ $name == conformance-cuda ]]; then
            status=skip
            reason="skipped (no GPU): all $skipped skipped"
            figure=$reason
        else
            status=fail
            reason="every test skipped: the device is unavailable"
            figure="$figure; $reason"
        fi
    fi
    record "$name" "$status" "$figure" "$secs" "$reason" "$cmd" "$out/$name.out"
}

step_conformance() {
    if [[ -z $tests_dir ]]; then
        skip_step conformance "skipped (tests not built: no cmocka)" "ctest -L $test_label"
        ((dry)) && skip_step conformance-cuda "skipped (tests not built: no cmocka)"
        return 0
    fi
    if [[ $built_with == cmake ]]; then
        step_conformance_ctest conformance "$test_label" "$test_regex"
        # The cuda device tests run too: each says why it skips, which proves the wiring.
        ((dry)) && step_conformance_ctest conformance-cuda '^cuda$' '\.cuda$'
    else
        step_conformance_plain conformance "$backend"
        ((dry)) && skip_step conformance-cuda "skipped (no GPU)"
    fi
    return 0
}

# The kernels written once (include/acg/kernel.h): the core's four (src/core/elementwise.acg.c)
# have no cuda code but their one source's, and the model's nine (src/model/ops.acg.c) have it
# beside kernels.cu's lanes kernels. The conformance step's test_conformance,
# test_model_kernels (its "one source" case compares the lanes kernels with the one source) and
# test_one_source (acg_exp over a sweep, the rest of the arithmetic, data rules) run that code on
# the GPU and compare it with the cpu oracle by memcmp. Nothing runs again: this row reads the
# three tests' results from that step's log (a dry run's from conformance-cuda, where
# they skip without a GPU), so that the table says what they proved.
step_one_source() {
    local from=conformance t line failing=() skipping=() absent=() status figure reason
    local claim="one-source kernels (core, model, test_one_source) on the GPU vs cpu"
    ((dry)) && from=conformance-cuda
    local cmd="test_conformance, test_model_kernels, test_one_source --device cuda ($from step)"
    local plain_line="(passed|skipped|FAILED \\(exit [0-9]+\\))$"
    if [[ -z ${st_status[$from]:-} || ! -f $out/$from.log ]]; then
        skip_step one-source "skipped (the $from step ran no tests)" "$cmd"
        return 0
    fi
    for t in test_conformance test_model_kernels test_one_source; do
        # A ctest line (" 3/40 Test  #23: test_conformance.cuda ....   Passed") or the plain
        # build's ("test_conformance: passed").
        if line=$(grep -m1 -E "Test +#[0-9]+: $t\.cuda |^$t: $plain_line" "$out/$from.log"); then
            case $line in
            *" Passed "* | *": passed") ;;
            *Skipped* | *"Not Run"* | *": skipped") skipping+=("$t") ;;
            *) failing+=("$t") ;;
            esac
        else
            absent+=("$t")
        fi
    done
    status=pass
    figure="$claim: bit-equal"
    reason=
    if ((${#failing[@]})); then
        reason="${failing[*]} failed on cuda (see $from.log)"
    elif ((!dry)) && grep -q '"cuda_driver": "test"' "$out/$from.out" 2>/dev/null; then
        reason="the .cuda tests ran on acg's CUDA test driver, not the GPU"
    elif ((${#absent[@]})); then
        reason="${absent[*]} not run by the $from step"
    elif ((${#skipping[@]})); then
        reason="${skipping[*]} skipped on cuda"
    fi
    if [[ -n $reason ]]; then
        # Without a GPU the comparison cannot be made: a dry run reports it skipped.
        if ((dry)) && ((!${#failing[@]})); then
            status=skip
            figure="skipped (no GPU): $reason"
        else
            status=fail
            figure="one-source kernels on the GPU NOT shown equal to cpu: $reason"
        fi
    fi
    record one-source "$status" "$figure" 0 "$reason" "$cmd"
}

# test_model's cross-backend logits test (test_logits_across_backends_small): every token's
# logits equal the cpu oracle's bytes.
step_logits() {
    local spec=$backend
    ((dry)) && spec=$reference
    local cmd="test_model --device $spec --filter 'test_logits_across_backends*'"
    if [[ -z $tests_dir ]]; then
        skip_step logits "skipped (tests not built: no cmocka)" "$cmd"
        return 0
    fi
    run logits 120 "" env ACG_LOG=error "$tests_dir/test_model" --device "$spec" \
        --filter 'test_logits_across_backends*'
    case $rc in
    125) skip_step logits "no time left in the budget" "$cmd" ;;
    77)
        # The test says why it skips; on the GPU machine a skip means the device is missing.
        local why
        why=$(grep -m1 '^skipped: ' "$out/logits.log" | cut -c10- || true)
        if ((dry)); then
            record logits skip "skipped (${why:-exit 77})" "$secs" "${why:-exit 77}" "$cmd"
        else
            record logits fail "skipped: ${why:-exit 77}" "$secs" "${why:-exit 77}" "$cmd"
        fi
        ;;
    0)
        if grep -q 'PASSED.*1 test' "$out/logits.log"; then
            record logits pass \
                "$spec: every token's logits equal the cpu oracle's, replayed and eager" \
                "$secs" "" "$cmd"
        else
            record logits fail "the filter ran no test" "$secs" "the filter ran no test" "$cmd"
        fi
        ;;
    *)
        local first
        first=$(grep -m1 'differ first' "$out/logits.log" || why_failed logits)
        record logits fail "$first" "$secs" "$first" "$cmd"
        ;;
    esac
}

# The NCCL a real run would load: $ACG_NCCL_LIBRARY, else the dynamic linker's libnccl.so.2,
# else PyTorch's (the nvidia-nccl wheel), else the toolkit's. Prints the path, or nothing.
find_nccl() {
    local lib=${ACG_NCCL_LIBRARY:-}
    [[ -n $lib ]] || lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }')
    if [[ -z $lib ]] && have python3; then
        lib=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
        [[ -f $lib ]] || lib=
    fi
    [[ -n $lib || ! -f /usr/local/cuda/lib64/libnccl.so.2 ]] || lib=/usr/local/cuda/lib64/libnccl.so.2
    printf '%s' "$lib"
}

# The collectives through the real NCCL (tests/cuda/test_cuda_nccl.c --device-check): a group
# of one rank on cuda:0, the allreduce eager and captured, through acg's public API.
step_nccl() {
    local bin= lib cmd
    for bin in "$tests_dir/cuda/test_cuda_nccl" "$tests_dir/test_cuda_nccl" ""; do
        [[ -z $bin || -x $bin ]] && break
    done
    cmd="test_cuda_nccl --device-check"
    if [[ -z $tests_dir || -z $bin ]]; then
        skip_step nccl "skipped (test_cuda_nccl not built)" "$cmd"
        return 0
    fi
    lib=$(find_nccl)
    if [[ -z $lib ]]; then
        skip_step nccl "skipped (no NCCL on this machine: ldconfig, torch and the toolkit have none)" \
            "$cmd"
        return 0
    fi
    cmd="ACG_NCCL_LIBRARY=$lib $cmd"
    run nccl 60 "" env ACG_LOG=error ACG_NCCL_LIBRARY="$lib" "$bin" --device-check
    local why
    why=$(grep -m1 '^skipped: ' "$out/nccl.log" | cut -c10- || true)
    case $rc in
    125) skip_step nccl "no time left in the budget" "$cmd" ;;
    0) record nccl pass "$(grep -m1 -v '^\$' "$out/nccl.log" | cut -c1-120)" "$secs" "" "$cmd" ;;
    77)
        # No GPU is a skip on a dry run; on the GPU machine NCCL was there and should have loaded.
        if ((dry)); then
            record nccl skip "skipped (${why:-exit 77})" "$secs" "${why:-exit 77}" "$cmd"
        else
            record nccl fail "skipped: ${why:-exit 77}" "$secs" "${why:-exit 77}" "$cmd"
        fi
        ;;
    *) record nccl fail "$(why_failed nccl)" "$secs" "$(why_failed nccl)" "$cmd" ;;
    esac
}

# cuBLAS writing acg's buffers inside a captured acg graph (tests/cuda/test_cuda_cublas.c):
# cublasSgemm on the stream's native CUstream and the buffers' native addresses, declared as
# foreign work; the replay equal to the eager step bit for bit. Built where the toolkit has
# cuBLAS; without a GPU it skips (and on the GPU machine a skip is a failure).
step_cublas() {
    local bin= cmd="test_cuda_cublas --device cuda" why
    for bin in "$tests_dir/cuda/test_cuda_cublas" "$tests_dir/test_cuda_cublas" ""; do
        [[ -z $bin || -x $bin ]] && break
    done
    if [[ -z $tests_dir || -z $bin ]]; then
        skip_step cublas "skipped (test_cuda_cublas not built: no cuBLAS in the toolkit)" "$cmd"
        return 0
    fi
    run cublas 90 "" env ACG_LOG=error "$bin" --device cuda
    why=$(grep -m1 'skipped: ' "$out/cublas.log" | sed 's/.*skipped: //' | cut -c1-150 || true)
    if ((rc == 125)); then
        skip_step cublas "no time left in the budget" "$cmd"
    elif ((rc == 0 || rc == 77)) && [[ -n $why ]]; then
        if ((dry)); then
            record cublas skip "skipped ($why)" "$secs" "$why" "$cmd"
        else
            record cublas fail "skipped: $why" "$secs" "$why" "$cmd"
        fi
    elif ((rc == 0)) && grep -q 'PASSED.*1 test' "$out/cublas.log"; then
        record cublas pass "$(grep -m1 '^cublas: ' "$out/cublas.log" | cut -c9-160)" "$secs" "" \
            "$cmd"
    else
        record cublas fail "$(why_failed cublas)" "$secs" "$(why_failed cublas)" "$cmd"
    fi
}

step_launch() {
    run launch 60 "$out/launch.out" "$acg" bench launch --backend "$backend" --json
    record_tool launch launch "acg bench launch --backend $backend --json" "$out/launch.out"
}

step_decode() {
    run decode 120 "$out/decode.out" "$acg" bench decode --backend "$backend" --preset small \
        --batch 1,8,32 --json
    record_tool decode decode \
        "acg bench decode --backend $backend --preset small --batch 1,8,32 --json" "$out/decode.out"
}

# Decoding N steps per launch (conditional WHILE nodes) against one step per launch.
step_loops() {
    local args=(--backend "$backend" --preset small --batch 1,8,32 --steps 64
        --steps-per-launch 4,16 --json)
    run loops 150 "$out/loops.out" "$acg" bench decode "${args[@]}"
    record_tool loops loops "acg bench decode ${args[*]}" "$out/loops.out"
}

# acg run at 16 steps per launch: every token the cpu backend's (the tokens step's reference).
step_loop_tokens() {
    local cmd="acg run --backend $backend --steps-per-launch 16 --json, against $reference's"
    if [[ ${st_status[tokens]:-} != pass ]]; then
        skip_step loop-tokens "skipped (the tokens step did not pass)" "$cmd"
        return 0
    fi
    run loop-tokens 90 "$out/loop-tokens.out" "$acg" run --backend "$backend" \
        --steps-per-launch 16 --json
    record_tool loop-tokens tokens "$cmd" "$out/tokens.ref.out" "$out/loop-tokens.out" \
        "$reference"
}

step_run() {
    run run 90 "$out/run.out" "$acg" run --backend "$backend" --verify --json
    record_tool run run "acg run --backend $backend --verify --json" "$out/run.out"
}

# The same requests on the reference backend: every generated token must be the same.
step_tokens() {
    local cmd="acg run --backend $reference --json, against the run step's tokens"
    if [[ ${st_status[run]:-} != pass ]]; then
        skip_step tokens "skipped (the run step did not pass)" "$cmd"
        return 0
    fi
    run tokens 90 "$out/tokens.ref.out" "$acg" run --backend "$reference" --json
    record_tool tokens tokens "$cmd" "$out/tokens.ref.out" "$out/run.out" "$reference"
}

step_peer() {
    local dev=cuda args=()
    ((dry)) && { dev=cpu; args=(--steps 8 --repeats 1); }
    local cmd="python3 bench/peer/torch_peer.py --device $dev ${args[*]} --json peer.out"
    if ! have python3; then
        skip_step peer "skipped (no python3)" "$cmd"
        return 0
    fi
    run peer 150 "" env PYTHONUNBUFFERED=1 python3 bench/peer/torch_peer.py --device "$dev" \
        "${args[@]}" --json "$out/peer.out"
    if ((rc == 77)); then
        local why
        why=$(sed -n 's/^torch_peer: skipped: //p' "$out/peer.log" | head -n 1)
        ((dry)) && [[ $dev == cpu ]] && why="$why; on the GPU: --device cuda (no GPU here)"
        record peer skip "skipped (${why:-exit 77})" "$secs" "${why:-exit 77}" "$cmd"
        return 0
    fi
    if ((rc == 1)) && [[ -s $out/peer.out ]]; then
        rc=0 # the JSON says what failed
    fi
    record_tool peer peer "$cmd" "$out/peer.out"
}

# The plain build's own tool and one test, so that the fallback is known to work here.
step_plain_smoke() {
    local cmd="build-device-plain/acg run --backend cpu --preset tiny --steps 8 --verify --json"
    local t0=$EPOCHREALTIME
    run plain-smoke 60 "$out/plain-smoke.out" "$plain_dir/acg" run --backend cpu --preset tiny \
        --steps 8 --verify --json
    if ((rc == 0)) && [[ -x $plain_dir/tests/test_conformance ]]; then
        cmd="$cmd; build-device-plain/tests/test_conformance --device cpu"
        ACG_LOG=error timeout -k 10 120 "$plain_dir/tests/test_conformance" --device cpu \
            >>"$out/plain-smoke.log" 2>&1 </dev/null || rc=$?
    fi
    secs=$(since "$t0")
    record_tool plain-smoke run "$cmd" "$out/plain-smoke.out"
}

# ---- summary -----------------------------------------------------------------------------------

summary() {
    local failed=0 name first=1 total
    for name in "${steps[@]}"; do
        [[ ${st_status[$name]} == fail ]] && failed=$((failed + 1))
    done
    total=$(since "$t_start")
    {
        printf '{"mode": %s, "backend": %s, "result": %s, "failed_steps": %d,' \
            "$(json_str "$mode")" "$(json_str "$backend")" \
            "$(json_str "$( ((failed)) && echo fail || echo pass)")" "$failed"
        printf ' "seconds": %s, "budget_s": %d,\n' "$total" "$budget"
        printf ' "built_with": %s, "steps": [\n' "$(json_str "${built_with:-none}")"
        for name in "${steps[@]}"; do
            ((first)) || printf ',\n'
            first=0
            cat "$out/$name.json"
        done
        printf ']}\n'
    } >"$out/summary.json"

    echo
    echo "device-check ($mode, backend $backend): $total s of a $budget s budget; files in $out"
    printf '%-16s %-8s %-82s %8s\n' step status "key figure" seconds
    printf '%s\n' "$(printf '%*s' 117 '' | tr ' ' -)"
    for name in "${steps[@]}"; do
        local fig=${st_figure[$name]}
        ((${#fig} <= 82)) || fig="${fig:0:79}..."
        printf '%-16s %-8s %-82s %8s\n' "$name" "${st_status[$name]}" "$fig" "${st_seconds[$name]}"
    done
    echo
    if ((failed)); then
        echo "device-check: $failed step(s) failed"
        return 1
    fi
    echo "device-check: no step failed"
}

# ---- main --------------------------------------------------------------------------------------

say "$mode check of backend $backend into $out (budget $budget s)"
inventory
step_gpu

if ((plain)) || ((!have_cmake)); then
    ((have_cmake)) || say "no cmake: building with scripts/device-build.sh"
    build_plain || true
else
    # On the GPU machine the plain build stands in when the CMake one fails; a dry run builds
    # both, so the fallback is proven before a machine is lent.
    if ! build_cmake || ((dry)); then
        build_plain || true
    fi
    # A CMake build that lacks only what the check wants (cuda, kernels) is better than none.
    [[ -n $acg ]] || ((!cmake_built)) || use_cmake_build
fi

if [[ -z $acg || ! -x $acg ]]; then
    for s in info conformance one-source logits nccl cublas launch decode loops run tokens \
        loop-tokens; do
        skip_step "$s" "skipped (nothing was built)"
    done
else
    ((dry)) && [[ ${st_status[build-plain]:-} == pass ]] && step_plain_smoke
    step_info
    step_conformance
    step_one_source
    step_logits
    step_nccl
    step_cublas
    step_launch
    step_decode
    step_loops
    step_run
    step_tokens
    step_loop_tokens
fi
step_peer
summary
