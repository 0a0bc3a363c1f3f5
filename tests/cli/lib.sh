# lib.sh — what the tool's command-line tests share (sourced by test_cli_run.sh,
# test_cli_graph.sh and test_cli_trace.sh): starting a case, failing and passing it, the checks
# of a run's exit status ($rc) and of what it wrote ($OUT, $ERR), and the special files that
# outputs are tested against (a full device, a FIFO with its reader). The sourcing script sets
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

# ---- special files ----------------------------------------------------------------------------
# Made in the case's own scratch folder, never under /dev.

# full_device DIR: makes DIR/full, a character device with /dev/full's numbers (1, 7), which
# takes no byte: every write fails with ENOSPC. False, saying nothing, where mknod is not
# permitted (not root); the caller then says the case is skipped.
full_device() {
    rm -f "$1/full"
    mknod "$1/full" c 1 7 2>/dev/null
}

# skipped WHY: a case left out, said so (not a silent pass).
skipped() {
    echo "skipped: $1"
}

# fifo_begin FIFO: makes the FIFO and starts a reader ($fifo_reader) copying what comes through
# it into FIFO.got. The shell holds the FIFO open for writing (descriptor 3) and hands the reader
# a read end opened here, so no open waits and the reader ends whatever the tool did with the
# FIFO, replaced it even: fifo_end closes the shell's end and waits for the reader. The tool
# runs with 3>&- so that it holds no end of its own but the one it opens.
fifo_begin() {
    rm -f "$1" "$1.got"
    mkfifo "$1" || return 1
    exec 3<>"$1"
    exec 4<"$1"
    cat <&4 >"$1.got" 3>&- 4<&- &
    fifo_reader=$!
    exec 4<&-
}

fifo_end() {
    exec 3>&-
    wait "$fifo_reader"
}
