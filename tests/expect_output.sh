#!/bin/sh
# expect_output.sh ERE COMMAND [ARG...] — runs COMMAND, prints what it wrote, and passes only when
# it exits 0 and its output (stdout and stderr together) has a line matching the extended regular
# expression ERE. CTest's PASS_REGULAR_EXPRESSION ignores the exit status, which would let a
# command that printed the line and then failed (a sanitizer's report at exit) pass.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 ERE COMMAND [ARG...]" >&2
    exit 2
fi
ere=$1
shift
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
    echo "expect_output: $1 exited with status $rc" >&2
    exit 1
fi
if ! grep -E -q -e "$ere" "$out"; then
    echo "expect_output: no line of the output matches: $ere" >&2
    exit 1
fi
exit 0
