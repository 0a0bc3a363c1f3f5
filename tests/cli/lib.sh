# lib.sh — what the tool's command-line tests share (sourced by test_cli_run.sh,
# test_cli_graph.sh and test_cli_trace.sh): starting a case, failing and passing it, and the
# checks of a run's exit status ($rc) and of what it wrote ($OUT, $ERR). The sourcing script sets
# OUT and ERR, counts with `failures` and `cases`, and runs each case through its own runner,
# which calls case_begin before the tool and case_ran after it. A script may define fail_more
# to print more about a failed case (the files it left).

# case_begin NAME CMDLINE: a new case, not failed yet.
case_begin() {
    name=$1
    cmdline=$2
    cases=$((cases + 1))
    case_failed=no
}

# case_ran: the tool ran (status in $rc); a sanitizer report on stderr fails the case.
case_ran() {
    if grep -a -q -e 'Sanitizer' -e 'runtime error' "$ERR"; then
        fail "a sanitizer report on stderr"
    fi
}

fail_more() {
    :
}

# fail WHY: the case failed (counted once), with why, the status and what the tool wrote.
fail() {
    if [ "$case_failed" = no ]; then
        failures=$((failures + 1))
        echo "FAIL: $name: $cmdline"
    fi
    case_failed=yes
    echo "    $1"
    echo "    exit status $rc; stdout:"
    sed 's/^/      | /' "$OUT" | head -n 20
    echo "    stderr:"
    sed 's/^/      | /' "$ERR" | head -n 40
    fail_more
}

pass() {
    if [ "$case_failed" = no ]; then
        echo "ok: $name"
    fi
}

expect_rc() {
    if [ "$rc" -ne "$1" ]; then
        fail "expected exit status $1"
    fi
}

# expect_out TEXT / expect_err TEXT / expect_file_has FILE TEXT: holds TEXT (a fixed string).
expect_out() {
    if ! grep -a -q -F -e "$1" "$OUT"; then
        fail "expected stdout to hold '$1'"
    fi
}

expect_err() {
    if ! grep -a -q -F -e "$1" "$ERR"; then
        fail "expected stderr to hold '$1'"
    fi
}

expect_file_has() {
    if ! grep -a -q -F -e "$2" "$1"; then
        fail "expected $1 to hold '$2'"
    fi
}

# expect_out_re REGEX: a line of stdout matches the basic regular expression.
expect_out_re() {
    if ! grep -a -q -e "$1" "$OUT"; then
        fail "expected a line of stdout to match '$1'"
    fi
}
