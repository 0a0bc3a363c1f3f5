#!/bin/sh
# Line and branch coverage of the default suite, per folder, with a floor for each (issue 28).
#   scripts/coverage.sh [BUILD_DIR]                     configure, build, run ctest, report
#   scripts/coverage.sh --report [BUILD_DIR]            report on the .gcda files already there
#   scripts/coverage.sh --uncovered FOLDER [BUILD_DIR]  the uncovered lines of FOLDER, as ranges
# BUILD_DIR defaults to build-coverage. The build is the default one (every backend CMake finds,
# the same tests as `make test`) at -O0 with gcc's --coverage, warnings as errors; the suite runs
# as many tests at a time as the machine has cores. Counters are updated atomically
# (-fprofile-update=atomic): the cpu backend and the tests run kernels on several threads, and
# plain counters then lose increments, which gcov reports as negative branch counts that gcovr
# cannot parse.
# Only src/, tools/ and bench/ are counted: not tests/, nor the kernels' C that acg_add_kernels
# generates in the build folder (it includes the *.acg.c sources, which are counted). The report
# is gcovr's (Debian's gcovr 5.2, which scripts/install-deps.sh installs): BUILD_DIR/coverage.json
# (every line), BUILD_DIR/coverage-summary.json (per file) and BUILD_DIR/coverage.txt.
# Exit 0 when every folder reaches its floor; 1 when one does not (or a test fails); 2 when gcovr
# or python3 is missing.
set -eu
cd "$(dirname "$0")/.."

# The floors, in per cent of lines, one folder a row; a file counts in the longest folder that
# holds it, and a file in none fails the check (give its folder a row). The issue fixes
# core and engine at 90 and model and backends/cpu at 85. The others are one point under what
# they reached at 475f3fc on 2026-12-02 (2-core AMD EPYC VM, Debian 12, every backend on its
# test driver or PoCL), rounded down: a few lines of each depend on timing (a busy pool, a
# replay still in flight) and differ from run to run. Raise them as tests are added, never
# lower them to pass. src/backends/vulkan's is one point under what it reached at d0ccfd2 on
# 2026-12-06 (89.0%, lavapipe), rounded down.
FLOORS='
src/core                90
src/engine              90
src/model               85
src/backends/cpu        85
src/backends/opencl     89
src/backends/cuda       94
src/backends/level_zero 95
src/backends/vulkan     88
src/mpi                 87
tools                   90
bench                   61
'

JOBS=$(nproc 2>/dev/null || echo 2)
suite_failed=0
mode=run
folder=
case "${1:-}" in
--report)
    mode=report
    shift
    ;;
--uncovered)
    mode=uncovered
    folder=${2:?"coverage: --uncovered needs a folder, e.g. src/core"}
    shift 2
    ;;
-*)
    echo "coverage: unknown option $1" >&2
    exit 2
    ;;
esac
build=${1:-build-coverage}

for tool in gcovr python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "coverage: $tool not found (sh scripts/install-deps.sh installs it)" >&2
        exit 2
    fi
done

if [ "$mode" = uncovered ]; then
    if [ ! -f "$build/coverage.json" ]; then
        echo "coverage: no $build/coverage.json; run scripts/coverage.sh $build first" >&2
        exit 2
    fi
    # Runs of uncovered lines, joined across lines that are not code, with the function each
    # begins in, the longest first.
    python3 - "$build/coverage.json" "$folder" <<'EOF'
import json, sys

data = json.load(open(sys.argv[1]))
folder = sys.argv[2].rstrip("/") + "/"
runs = []
for f in data["files"]:
    name = f["file"]
    if not name.startswith(folder):
        continue
    funcs = sorted((fn["lineno"], fn["name"]) for fn in f.get("functions", []))

    def close(a, b, k):
        where = [fn for lineno, fn in funcs if lineno <= a]
        runs.append((name, a, b, k, where[-1] if where else "?"))

    start = None
    for line in sorted(f["lines"], key=lambda l: l["line_number"]):
        if line.get("gcovr/noncode"):
            continue
        if line["count"] == 0:
            if start is None:
                start, n = line["line_number"], 0
            end = line["line_number"]
            n += 1
        elif start is not None:
            close(start, end, n)
            start = None
    if start is not None:
        close(start, end, n)
runs.sort(key=lambda r: (-r[3], r[0], r[1]))
for name, a, b, k, fn in runs:
    span = f"{a}" if a == b else f"{a}-{b}"
    print(f"{name}:{span}\t{k} lines\t{fn}")
print(f"{sum(r[3] for r in runs)} uncovered lines in {len(runs)} runs under {folder}")
EOF
    exit 0
fi

if [ "$mode" = run ]; then
    flags="--coverage -fprofile-update=atomic"
    # Timeouts doubled (ACG_TEST_TIMEOUT_SCALE): -O0 with atomic counters is many times slower.
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DACG_WERROR=ON -DACG_TEST_TIMEOUT_SCALE=2 \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
        -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage \
        -DCMAKE_MODULE_LINKER_FLAGS=--coverage
    cmake --build "$build" -j "$JOBS"
    # Counts from an earlier run would add to this one's.
    find "$build" -name '*.gcda' -exec rm -f {} +
    # A failing suite still gets its report (what it reached), then fails the run.
    ctest --test-dir "$build" --output-on-failure -j "$JOBS" || suite_failed=1
fi

# The filters are paths relative to this folder; CMake's compiler checks left coverage notes of
# their own in CMakeFiles/<version>, which are not acg's.
gcovr --root . --object-directory "$build" --filter 'src/' --filter 'tools/' --filter 'bench/' \
    --exclude-directories '.*/CMakeFiles/[0-9][^/]*/' \
    --exclude-unreachable-branches --json "$build/coverage.json" \
    --json-summary-pretty --json-summary "$build/coverage-summary.json" --txt "$build/coverage.txt"

python3 - "$build/coverage-summary.json" "$FLOORS" <<'EOF'
import json, sys

files = json.load(open(sys.argv[1]))["files"]
floors = [(row.split()[0], float(row.split()[1])) for row in sys.argv[2].split("\n") if row.strip()]
totals = {name: [0, 0, 0, 0] for name, _ in floors}
unplaced = []
for f in files:
    homes = [name for name, _ in floors if f["filename"].startswith(name + "/")]
    if not homes:
        unplaced.append(f["filename"])
        continue
    t = totals[max(homes, key=len)]
    t[0] += f["line_covered"]
    t[1] += f["line_total"]
    t[2] += f["branch_covered"]
    t[3] += f["branch_total"]

def pct(covered, total):
    return 100.0 * covered / total if total else 100.0

below = []
print(f"{'folder':<24} {'lines':>17} {'%':>6} {'branches':>17} {'%':>6} {'floor':>6}")
for name, floor in floors:
    lc, lt, bc, bt = totals[name]
    if lt == 0:
        print(f"{name:<24} {'(not built)':>17}")
        continue
    mark = ""
    if pct(lc, lt) < floor:
        below.append(name)
        mark = "  BELOW"
    print(f"{name:<24} {lc:>8}/{lt:<8} {pct(lc, lt):>6.1f} {bc:>8}/{bt:<8} {pct(bc, bt):>6.1f} "
          f"{floor:>6.0f}{mark}")
for name in unplaced:
    print(f"coverage: {name} is in no folder of the table (scripts/coverage.sh's FLOORS)",
          file=sys.stderr)
if below:
    print(f"coverage: below the floor: {' '.join(below)} "
          f"(scripts/coverage.sh --uncovered FOLDER lists what no test reaches)", file=sys.stderr)
if below or unplaced:
    sys.exit(1)
EOF
if [ "$suite_failed" != 0 ]; then
    echo "coverage: the suite failed (above); the figures are of what it reached" >&2
    exit 1
fi
