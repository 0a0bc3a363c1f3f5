#!/bin/sh
# test_cli_info.sh ACG SCRATCH [CUDA_TEST_DRIVER] — `acg info` and its default device: the table
# marks exactly one device with '*' and names it on its last line, --json says the same
# (default_device, and "default" on that device alone), and the choice follows acg.h's rule:
# without an accelerator the cpu backend, never a driver's CPU device such as PoCL's; with one
# (acg's CUDA test driver, when given) the accelerator; ACG_DEVICE overrides both. Bad input:
# an unknown option exits 2; a report that cannot be written (stdout a full device: the
# script's own node with /dev/full's numbers, which needs root, else those cases are skipped,
# saying so) exits 1 saying why, the table and `acg --version` as the JSON.
set -u
. "$(dirname "$0")/lib.sh"
cli_setup "[CUDA_TEST_DRIVER]" "$@"
CUDA_DRIVER=${3-}
unset ACG_DEVICE ACG_CUDA_DRIVER

# begin NAME: a case that runs `acg` as often as it needs.
begin() {
    case_begin "$1" ""
}

# default_is SPEC DEVICE [ENV...]: `acg info` and `acg info --json` under the environment ENV
# agree that SPEC is the default, and mark DEVICE ("backend:N", the device SPEC opens) alone.
default_is() {
    want=$1
    device=$2
    shift 2
    env "$@" "$ACG" info >"$OUT" 2>"$ERR"
    rc=$?
    [ "$rc" -eq 0 ] || fail "acg info: expected exit status 0"
    marked=$(awk '/^device +default/ { t = 1; next } t && /^$/ { exit }
                  t && $2 == "*" { print $1 }' "$OUT")
    [ "$marked" = "$device" ] || fail "expected the table to mark $device alone, it marks '$marked'"
    grep -q "^default device (\*): $want, " "$OUT" ||
        fail "expected the line 'default device (*): $want, ...'"
    env "$@" "$ACG" info --json >"$OUT" 2>"$ERR"
    rc=$?
    [ "$rc" -eq 0 ] || fail "acg info --json: expected exit status 0"
    python3 - "$want" "$device" "$OUT" <<'EOF' >"$DIR/json-check" 2>&1 ||
import json, sys
want, device, path = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(path))
assert d["default_device"] == want, f"default_device is {d['default_device']!r}, not {want!r}"
marked = [x["spec"] for b in d["backends"] for x in b["devices"] if x["default"]]
assert marked == [device], f"devices marked default: {marked}"
EOF
        fail "$(cat "$DIR/json-check")"
}

available() {
    "$ACG" info --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(' '.join(x['spec'] for b in d['backends'] for x in b['devices'] if x['available']))"
}

# ---- the choice -------------------------------------------------------------------------------

begin "no accelerator: the cpu backend"
devices=$(available)
default_is cpu:0 cpu:0
case " $devices " in
*" opencl:0 "*)
    # PoCL's device is the host's CPU: present, and passed over for the cpu backend.
    "$ACG" info --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
cpu = [x['host_cpu'] for b in d['backends'] if b['name'] == 'opencl' for x in b['devices']]
assert cpu and all(cpu), cpu" || fail "expected opencl's devices here to be the host's CPU"
    ;;
esac
pass

begin "the capability's per-node update and pinned-replay bits"
# The cpu backend updates a node's arguments and grid in place, and its copy nodes read their
# host memory when they run; PoCL (opencl) has no mutable dispatch, so no node updates there.
"$ACG" info --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
for b in d['backends']:
    for x in b['devices']:
        if b['name'] == 'cpu':
            assert x['graph_node_update'] and x['graph_node_update_grid'], x
            assert x['graph_pinned_replay'], x
        if not x['graph_node_update']:
            assert not x['graph_node_update_grid'], x" || fail "unexpected node-update bits"
pass

begin "ACG_DEVICE names the default"
default_is cpu cpu:0 ACG_DEVICE=cpu
default_is "cpu:0?threads=1" cpu:0 ACG_DEVICE="cpu:0?threads=1"
case " $devices " in
*" opencl:0 "*) default_is opencl:0 opencl:0 ACG_DEVICE=opencl:0 ;;
esac
pass

if [ -n "$CUDA_DRIVER" ]; then
    begin "an accelerator comes first (acg's CUDA test driver)"
    default_is cuda:0 cuda:0 ACG_CUDA_DRIVER="$CUDA_DRIVER"
    pass
fi

# ---- bad input --------------------------------------------------------------------------------

begin "unknown option"
"$ACG" info --nosuch >"$OUT" 2>"$ERR"
rc=$?
[ "$rc" -eq 2 ] || fail "expected exit status 2"
grep -q "^acg: info: unknown option '--nosuch'" "$ERR" || fail "expected the unknown option named"
grep -q "^usage: acg info" "$ERR" || fail "expected the usage line"
expect_no_out
pass

# unwritable WHAT ARGS...: `acg ARGS...` with stdout a full device exits 1, one line on stderr
# that says WHAT ("acg: WHAT...").
unwritable() {
    uw_what=$1
    shift
    begin "stdout full: acg $*"
    "$ACG" "$@" >"$DIR/full" 2>"$ERR"
    rc=$?
    : >"$OUT"
    [ "$rc" -eq 1 ] || fail "expected exit status 1"
    [ "$(wc -l <"$ERR")" -eq 1 ] || fail "expected exactly one line on stderr"
    grep -q "^acg: $uw_what" "$ERR" || fail "expected 'acg: $uw_what' on stderr"
    [ -c "$DIR/full" ] || fail "$DIR/full is no longer a character device"
    pass
}

if full_device "$DIR"; then
    unwritable "writing the JSON report: " info --json
    unwritable "writing standard output: No space left on device" info
    unwritable "writing standard output: No space left on device" --version
    unwritable "writing standard output: No space left on device" help
else
    skipped "stdout full: mknod is not permitted here (not root)"
fi

cli_finish
