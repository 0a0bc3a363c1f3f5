# lib.sh — what the tool's command-line tests (tests/cli/test_cli_*.sh) share: setting up the
# scratch folder, starting a case, failing and passing it, the checks of a run's exit status ($rc)
# and of what it wrote ($OUT, $ERR), the special files that outputs are tested against (a full
# device, a FIFO with its reader), the checkpoint and tokenizer files python3 writes, and the
# script's end. A script sources it, calls cli_setup with its arguments, and runs each case
# through its own runner, which calls case_begin before the tool and case_ran after it; the
# counts are `failures` and `cases`. A script may define fail_more to print more about a failed
# case (the files it left).

# cli_setup EXTRA ARGS...: reads the script's command line ARGS, `ACG_BINARY SCRATCH_DIR` and
# then one optional argument where EXTRA names it ("[CUDA_TEST_DRIVER]"; "" for none); another
# count exits 2 with the usage line. Sets ACG and DIR, both absolute (a tool may run in another
# folder), makes DIR afresh with OUT and ERR (each case's stdout and stderr) in it, zeroes the
# counts, sets have_python (yes or no), and LC_ALL=C: what the tool writes may hold any bytes,
# which grep and sed then take as they are.
cli_setup() {
    cs_extra=$1
    shift
    if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ -z "$cs_extra" ]; }; then
        echo "usage: $0 ACG_BINARY SCRATCH_DIR${cs_extra:+ $cs_extra}" >&2
        exit 2
    fi
    LC_ALL=C
    export LC_ALL
    ACG=$1
    DIR=$2
    case $ACG in /*) ;; *) ACG=$(pwd)/$ACG ;; esac
    case $DIR in /*) ;; *) DIR=$(pwd)/$DIR ;; esac
    rm -rf "$DIR"
    mkdir -p "$DIR" || exit 1
    OUT=$DIR/stdout
    ERR=$DIR/stderr
    failures=0
    cases=0
    have_python=no
    if command -v python3 >/dev/null 2>&1; then
        have_python=yes
    fi
}

# cli_finish: says how many cases passed and ends the script, 1 when any failed, else 0.
cli_finish() {
    echo "$((cases - failures)) of $cases cases passed"
    if [ "$failures" -ne 0 ]; then
        exit 1
    fi
    exit 0
}

# python_or_skip WHAT: without python3, says that WHAT (the cases that need it) is left out and
# ends the script: 1 when a case has failed already, else 77 (CTest's skip).
python_or_skip() {
    if [ "$have_python" = yes ]; then
        return 0
    fi
    echo "python3 not found: $1"
    if [ "$failures" -ne 0 ]; then
        echo "$failures of $cases cases failed"
        exit 1
    fi
    exit 77
}

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

# fail WHY: the case failed (counted once), with why, the status and what the tool wrote. The
# case is named by NAME and, where it is something else, its CMDLINE.
fail() {
    if [ "$case_failed" = no ]; then
        failures=$((failures + 1))
        if [ -z "$cmdline" ] || [ "$cmdline" = "$name" ]; then
            echo "FAIL: $name"
        else
            echo "FAIL: $name: $cmdline"
        fi
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

# expect_no_out: nothing on stdout.
expect_no_out() {
    if [ -s "$OUT" ]; then
        fail "expected nothing on stdout"
    fi
}

# expect_err_first LINE: the first line of stderr is exactly LINE.
expect_err_first() {
    if [ "$(head -n 1 "$ERR")" != "$1" ]; then
        fail "expected the first line of stderr to be '$1'"
    fi
}

# expect_usage_error USAGE: a bad command line: exit status 2, a first line of stderr that
# starts "acg: " (the problem), the usage line USAGE ("usage: acg run") and nothing on stdout.
expect_usage_error() {
    expect_rc 2
    expect_err "$1"
    if ! head -n 1 "$ERR" | grep -a -q '^acg: '; then
        fail "expected the first line of stderr to start with 'acg: '"
    fi
    expect_no_out
}

# one_line_error STATUS TEXT: a failure said in one line: exit status STATUS, exactly one line
# on stderr, "acg: ..." holding TEXT.
one_line_error() {
    expect_rc "$1"
    if [ "$(wc -l <"$ERR")" -ne 1 ]; then
        fail "expected exactly one line on stderr"
    fi
    if ! grep -a -q '^acg: ' "$ERR"; then
        fail "expected stderr to start with 'acg: '"
    fi
    expect_err "$2"
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

# ---- checkpoint files -------------------------------------------------------------------------

# model_files DIR: python3 writes DIR/m.bin, a llama2.c checkpoint (dim 8, hidden 16, 1 layer,
# 2 heads, 1 KV head, vocab 32 with a separate classifier, seq_len 16, each float a multiple of
# 1/32 in [-9/32, 9/32]), and DIR/t.bin, its 32-token tokenizer (<unk>, <s>, </s>, " ", a..z,
# "hi", " h", each scoring -(its id)); 32 < 259, so there are no byte tokens. False when
# python3 fails.
model_files() {
    python3 - "$1" <<'EOF'
import struct, sys

d = sys.argv[1]
dim, hidden, layers, heads, kv_heads, vocab, seq = 8, 16, 1, 2, 1, 32, 16
head_size = dim // heads
kv_dim = kv_heads * head_size
floats = (vocab * dim                    # token_embedding
          + layers * dim                 # rms_att
          + layers * dim * dim           # wq
          + 2 * layers * kv_dim * dim    # wk, wv
          + layers * dim * dim           # wo
          + layers * dim                 # rms_ffn
          + 3 * layers * hidden * dim    # w1, w2, w3
          + dim                          # rms_final
          + 2 * seq * (head_size // 2)   # the legacy RoPE tables
          + vocab * dim)                 # classifier
with open(d + "/m.bin", "wb") as f:
    f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, -vocab, seq))
    f.write(struct.pack("<%df" % floats, *[((i * 37) % 19 - 9) / 32.0 for i in range(floats)]))
pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b" "]
pieces += [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
pieces += [b"hi", b" h"]
assert len(pieces) == vocab
with open(d + "/t.bin", "wb") as f:
    f.write(struct.pack("<i", max(len(p) for p in pieces)))
    for i, p in enumerate(pieces):
        f.write(struct.pack("<fi", -float(i), len(p)) + p)
EOF
}
