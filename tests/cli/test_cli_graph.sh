#!/bin/sh
# test_cli_graph.sh ACG SCRATCH — tests of the `acg graph` command line: each case runs the built
# tool on the tiny preset and the cpu backend and checks its exit status, what it said and the
# files it left. DOT must name the model's kernels; SVG must be well-formed XML (python3's
# xml.etree) naming the same nodes. A bad command line exits 2, a failure while working exits 1
# with one line on stderr, and neither leaves a file (nor a temporary one) behind. Any sanitizer
# report on stderr fails the case. What is at an output's path decides how it is written
# (tools/support/tool_cli.h): a FIFO or a device in place and left as it is, a full device's
# ENOSPC reported with its path, a symbolic link left a link with the file it names replaced,
# an empty name or a directory refused; the FIFOs and device nodes are the script's own, made in
# its scratch folder (a device node needs root: without, those cases are skipped, saying so).
#
# SVG needs Graphviz's dot (scripts/install-deps.sh installs the Debian package graphviz); without
# it the rendering cases check the message saying what to install instead. Without python3 the
# SVG parse and the checkpoint cases are left out and, once every other case has passed, the
# script exits 77 (CTest's skip) saying so.
set -u
. "$(dirname "$0")/lib.sh"
cli_setup "" "$@"

# Every case writes under $W, emptied before each case and the tool's working directory, so what
# a case leaves is all there is.
W=$DIR/w
# The FIFOs, device nodes and links a case writes to, in a folder of their own (fresh_special).
S=$DIR/special
umask 022

have_dot=no
if command -v dot >/dev/null 2>&1; then
    have_dot=yes
else
    echo "note: Graphviz's dot is not installed (Debian package graphviz): the SVG cases check" \
        "the message saying so instead"
fi

# ---- helpers ----------------------------------------------------------------------------------

# run NAME ARGS...: runs `acg graph ARGS...` in a fresh $W (its working directory), stdout to
# $OUT (or to $RUN_STDOUT, when set), stderr to $ERR, status to $rc. $RUN_PATH, when set, is the
# PATH the tool sees.
RUN_PATH=
RUN_STDOUT=
run() {
    case_name=$1
    shift
    case_begin "$case_name" "acg graph $*${RUN_STDOUT:+ >$RUN_STDOUT}"
    rm -rf "$W"
    mkdir -p "$W"
    : >"$OUT"
    if [ -n "$RUN_PATH" ]; then
        (cd "$W" && PATH=$RUN_PATH exec "$ACG" graph "$@") >"${RUN_STDOUT:-$OUT}" 2>"$ERR" 3>&-
    else
        (cd "$W" && exec "$ACG" graph "$@") >"${RUN_STDOUT:-$OUT}" 2>"$ERR" 3>&-
    fi
    rc=$?
    case_ran
}

# fresh_special: an empty $S.
fresh_special() {
    rm -rf "$S"
    mkdir -p "$S"
}

# expect_special NAMES...: $S holds exactly these names (no temporary file).
expect_special() {
    want=$(printf '%s\n' "$@" | LC_ALL=C sort | tr '\n' ' ')
    got=$(ls -A "$S" | LC_ALL=C sort | tr '\n' ' ')
    if [ "$got" != "$want" ]; then
        fail "expected $S to hold '$want' and found '$got'"
    fi
}

# A failed case also lists the files it left.
fail_more() {
    echo "    files:"
    ls -A "$W" 2>/dev/null | sed 's/^/      | /'
}

# expect_files NAMES...: $W holds exactly these files (none when no name is given): nothing
# half-written, no temporary file.
expect_files() {
    want=$(printf '%s\n' "$@" | LC_ALL=C sort | sed '/^$/d' | tr '\n' ' ')
    got=$(ls -A "$W" | LC_ALL=C sort | tr '\n' ' ')
    if [ "$got" != "$want" ]; then
        fail "expected the files '$want' and found '$got'"
    fi
}

# usage_error NAME ARGS...: exit 2, "acg: <problem>" then the usage line on stderr, no stdout,
# and no file written.
usage_error() {
    run "$@"
    expect_usage_error "usage: acg graph"
    expect_files
}

# fails STATUS TEXT NAME ARGS...: exit STATUS with one line on stderr, "acg: " and holding TEXT,
# and no file written.
fails() {
    fails_status=$1
    fails_text=$2
    shift 2
    run "$@"
    one_line_error "$fails_status" "$fails_text"
    expect_files
}

# expect_kernels FILE: FILE names the model's kernels.
expect_kernels() {
    for k in embed_f32 rmsnorm_f32 matmul_f32 rope_f32 kv_store_f32 attention_f32 swiglu_f32 \
        gather_last_f32 sample_f32; do
        expect_file_has "$1" "kernel $k"
    done
}

# expect_svg FILE NODES: FILE is well-formed XML, an <svg> whose graph has NODES nodes (dot
# draws each as <g class="node">), their titles n0 .. n(NODES-1), and whose text names the
# model's kernels.
expect_svg() {
    if [ "$have_python" = no ]; then
        expect_file_has "$1" "<svg"
        return
    fi
    if ! python3 - "$1" "$2" <<'EOF' 2>"$DIR/svg_error"; then
import sys
import xml.etree.ElementTree as ET

path, nodes = sys.argv[1], int(sys.argv[2])
ns = {"svg": "http://www.w3.org/2000/svg"}
root = ET.parse(path).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", "root element %s" % root.tag
drawn = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"]
titles = sorted(g.find("svg:title", ns).text for g in drawn)
want = sorted("n%d" % i for i in range(nodes))
assert titles == want, "node titles %s, expected n0..n%d" % (titles, nodes - 1)
text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
for kernel in ("embed_f32", "rmsnorm_f32", "matmul_f32", "attention_f32", "sample_f32"):
    assert "kernel " + kernel in text, "no node names %s" % kernel
assert "#0 kernel embed_f32" in text, "node #0 is not the embedding"
assert "stream 0 (origin)" in text, "no stream cluster"
EOF
        fail "$1 is not the expected SVG: $(tail -n 1 "$DIR/svg_error")"
    fi
}

TINY="--backend cpu --preset tiny"

# shellcheck disable=SC2086 # TINY is a list of words
{
# ---- the buckets ------------------------------------------------------------------------------

run "--list" $TINY --list
expect_rc 0
expect_out "bucket  label"
expect_out "nodes"
n_buckets=$(grep -a -c ' captured ' "$OUT")
if [ "$n_buckets" -lt 2 ]; then
    fail "expected several captured buckets"
fi
# Bucket 0 is the smallest decode step: one row of one token.
if ! grep -a -q -E '^ +0 +step +1 +1 +captured +[0-9]+ ' "$OUT"; then
    fail "expected bucket 0 to be (step, batch 1, tokens 1), captured"
fi
nodes=$(grep -a -E '^ +0 ' "$OUT" | awk '{print $6}')
last=$((n_buckets - 1))
expect_files
pass

run "--list --bucket 1" $TINY --list --bucket 1
expect_rc 0
if [ "$(grep -a -c ' captured ' "$OUT")" -ne 1 ] || ! grep -a -q -E '^ +1 +step +2 +2 ' "$OUT"; then
    fail "expected bucket 1 alone"
fi
pass

run "--help" --help
expect_rc 0
expect_out "usage: acg graph"
expect_out "--svg FILE"
pass

# ---- DOT --------------------------------------------------------------------------------------

run "--bucket 0 --dot" $TINY --bucket 0 --dot "$W/g.dot"
expect_rc 0
expect_files g.dot
expect_kernels "$W/g.dot"
expect_file_has "$W/g.dot" "/* acg graph: bucket 0 (step, batch 1, tokens 1), slot 0 */"
expect_file_has "$W/g.dot" "digraph acg_graph_"
expect_out "wrote $W/g.dot: bucket 0 (step, batch 1, tokens 1), slot 0, $nodes nodes"
if [ "$(grep -a -c 'digraph' "$W/g.dot")" -ne 1 ]; then
    fail "expected one digraph"
fi
if [ "$(stat -c %a "$W/g.dot")" != 644 ]; then
    fail "expected the permissions of a new file under umask 022 (644)"
fi
if [ "$have_dot" = yes ] && ! dot -Tsvg "$W/g.dot" >/dev/null 2>"$DIR/dot_error"; then
    fail "dot refuses the DOT: $(head -n 1 "$DIR/dot_error")"
fi
cp "$W/g.dot" "$DIR/bucket0.dot"
pass

# The same graph gives the same bytes; an existing file is replaced whole.
rm -rf "$W"
mkdir -p "$W"
echo "old text" >"$W/g.dot"
cases=$((cases + 1))
name="--dot over an existing file"
case_failed=no
cmdline="acg graph $TINY --bucket 0 --dot $W/g.dot"
"$ACG" graph $TINY --bucket 0 --dot "$W/g.dot" >"$OUT" 2>"$ERR"
rc=$?
expect_rc 0
expect_files g.dot
if ! cmp -s "$W/g.dot" "$DIR/bucket0.dot"; then
    fail "expected the same bytes as the first run"
fi
pass

run "--dot - writes to stdout" $TINY --bucket 0 --dot -
expect_rc 0
expect_kernels "$OUT"
if ! head -n 1 "$OUT" | grep -a -q '^/\* acg graph: bucket 0 '; then
    fail "expected stdout to start with the bucket's comment"
fi
if grep -a -q '^wrote ' "$OUT"; then
    fail "expected nothing but the DOT on stdout"
fi
expect_files
pass

# A write that fails is a failure, not a truncated graph passed off as whole.
fresh_special
if full_device "$S"; then
    RUN_STDOUT=$S/full
    run "--dot - to a full device" $TINY --bucket 0 --dot -
    RUN_STDOUT=
    one_line_error 1 "writing a graph: standard output: "
    expect_err "No space left on device"
    pass
else
    skipped "--dot - to a full device: mknod is not permitted here (not root)"
fi

run "--buffers" $TINY --bucket 0 --buffers --dot "$W/g.dot"
expect_rc 0
expect_files g.dot
expect_file_has "$W/g.dot" "shape=cylinder"
expect_file_has "$W/g.dot" "b0 [label=\"buffer 0"
expect_file_has "$W/g.dot" "label=\"uses\""
pass

run "--slot 1" $TINY --bucket 0 --slot 1 --dot "$W/g.dot"
expect_rc 0
expect_files g.dot
expect_file_has "$W/g.dot" "bucket 0 (step, batch 1, tokens 1), slot 1 */"
expect_out ", slot 1, $nodes nodes"
pass

run "every bucket into one DOT file" $TINY --dot "$W/all.dot"
expect_rc 0
expect_files all.dot
if [ "$(grep -a -c '^digraph ' "$W/all.dot")" -ne "$n_buckets" ]; then
    fail "expected one digraph per bucket ($n_buckets)"
fi
expect_file_has "$W/all.dot" "/* acg graph: bucket $last "
expect_out "wrote $W/all.dot: buckets 0..$last, slot 0, one digraph each"
pass

# ---- SVG --------------------------------------------------------------------------------------

if [ "$have_dot" = yes ]; then
    run "--bucket 0 --svg" $TINY --bucket 0 --svg "$W/g.svg"
    expect_rc 0
    expect_files g.svg
    expect_svg "$W/g.svg" "$nodes"
    expect_out "wrote $W/g.svg: bucket 0 (step, batch 1, tokens 1), slot 0, $nodes nodes"
    pass

    run "--svg of every bucket: one file each" $TINY --svg "$W/all.svg"
    expect_rc 0
    named=0
    for f in "$W"/all-[0-9]*-step-[0-9]*x[0-9]*.svg; do
        [ -f "$f" ] && named=$((named + 1))
    done
    if [ "$named" -ne "$n_buckets" ] || [ "$(ls -A "$W" | wc -l)" -ne "$n_buckets" ]; then
        fail "expected one SVG per bucket ($n_buckets) and nothing else"
    fi
    for f in "$W"/all-*.svg; do
        expect_svg "$f" "$nodes"
    done
    expect_out "wrote $W/all-0-step-1x1.svg: bucket 0 (step, batch 1, tokens 1)"
    pass

    # A name without .svg gets the bucket's suffix appended.
    run "--svg of every bucket, FILE without .svg" $TINY --svg "$W/pic"
    expect_rc 0
    if [ ! -f "$W/pic-0-step-1x1.svg" ]; then
        fail "expected $W/pic-0-step-1x1.svg"
    fi
    pass
else
    run "--svg without dot" $TINY --bucket 0 --svg "$W/g.svg"
    one_line_error 1 "install the Debian package graphviz"
    expect_files g.dot
    pass
fi

# Without dot on PATH: one line saying what to install, and the DOT beside the SVG's name.
mkdir -p "$DIR/no-dot-bin"
RUN_PATH=$DIR/no-dot-bin
run "--svg, dot missing" $TINY --bucket 0 --svg "$W/g.svg"
one_line_error 1 "Graphviz's dot is not installed (not found on PATH): install the Debian package"
expect_err "install the Debian package graphviz (apt-get install graphviz)"
expect_err "the DOT text was written to '$W/g.dot'"
expect_files g.dot
if ! cmp -s "$W/g.dot" "$DIR/bucket0.dot"; then
    fail "expected the DOT that --dot writes"
fi
pass

run "--svg of every bucket, dot missing" $TINY --svg "$W/all.svg"
one_line_error 1 "install the Debian package graphviz"
expect_files all.dot
if [ "$(grep -a -c '^digraph ' "$W/all.dot")" -ne "$n_buckets" ]; then
    fail "expected one digraph per bucket ($n_buckets)"
fi
pass

# A dot that fails, or dies, leaves nothing behind: no SVG, no DOT, no temporary file.
mkdir -p "$DIR/bad-dot-bin"
printf '#!/bin/sh\necho "Error: <stdin>: syntax error in line 1" >&2\nexit 3\n' \
    >"$DIR/bad-dot-bin/dot"
chmod +x "$DIR/bad-dot-bin/dot"
RUN_PATH=$DIR/bad-dot-bin
fails 1 "dot -Tsvg failed with exit status 3: Error: <stdin>: syntax error in line 1" \
    "--svg, dot fails" $TINY --bucket 0 --svg "$W/g.svg"
pass

mkdir -p "$DIR/dying-dot-bin"
printf '#!/bin/sh\necho "<svg" \nkill -9 $$\n' >"$DIR/dying-dot-bin/dot"
chmod +x "$DIR/dying-dot-bin/dot"
RUN_PATH=$DIR/dying-dot-bin
fails 1 "dot -Tsvg was killed by signal 9" "--svg, dot killed" $TINY --svg "$W/all.svg"
pass
RUN_PATH=

# ---- bad output paths: exit 1, checked before the model is built ------------------------------

fails 1 "'$W/no-such-dir/g.dot': No such file or directory" \
    "--dot into a missing directory" $TINY --bucket 0 --dot "$W/no-such-dir/g.dot"
pass

fails 1 "'$W': Is a directory" "--dot to a directory" $TINY --bucket 0 --dot "$W"
pass

fails 1 "Is a directory" "--dot to a directory, trailing slash" $TINY --bucket 0 --dot "$W/"
pass

fails 1 "'$W': Is a directory" "--svg to a directory" $TINY --bucket 0 --svg "$W"
pass

: >"$DIR/file"
run "--dot under a regular file" $TINY --bucket 0 --dot "$DIR/file/g.dot"
one_line_error 1 "'$DIR/file/g.dot': Not a directory"
pass

if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$DIR/locked"
    chmod 555 "$DIR/locked"
    run "--dot into an unwritable directory" $TINY --bucket 0 --dot "$DIR/locked/g.dot"
    one_line_error 1 "'$DIR/locked/g.dot': Permission denied"
    if [ -n "$(ls -A "$DIR/locked")" ]; then
        fail "expected nothing written into $DIR/locked"
    fi
    chmod 755 "$DIR/locked"
    pass
else
    echo "note: running as root, who may write anywhere: the unwritable-directory case is left out"
fi

# ---- what is at the path: FIFOs, devices, links, empty names ----------------------------------

# A FIFO is written in place and stays a FIFO; its reader gets the graph.
fresh_special
fifo_begin "$S/g.fifo"
run "--dot to a FIFO" $TINY --bucket 0 --dot "$S/g.fifo"
fifo_end
expect_rc 0
expect_files
if [ ! -p "$S/g.fifo" ]; then
    fail "$S/g.fifo is no longer a FIFO"
fi
if ! cmp -s "$S/g.fifo.got" "$DIR/bucket0.dot"; then
    fail "the FIFO's reader did not get the DOT that --dot writes"
fi
expect_special g.fifo g.fifo.got
pass

if [ "$have_dot" = yes ]; then
    fresh_special
    fifo_begin "$S/g.svg"
    run "--svg to a FIFO" $TINY --bucket 0 --svg "$S/g.svg"
    fifo_end
    expect_rc 0
    if [ ! -p "$S/g.svg" ]; then
        fail "$S/g.svg is no longer a FIFO"
    fi
    expect_svg "$S/g.svg.got" "$nodes"
    expect_special g.svg g.svg.got
    pass
fi

# Without dot, the DOT is kept beside the FIFO's name, made only then; the FIFO stays one.
fresh_special
mkdir -p "$DIR/no-dot-bin"
fifo_begin "$S/g.svg"
RUN_PATH=$DIR/no-dot-bin
run "--svg to a FIFO, dot missing" $TINY --bucket 0 --svg "$S/g.svg"
RUN_PATH=
fifo_end
one_line_error 1 "the DOT text was written to '$S/g.dot'"
if [ ! -p "$S/g.svg" ]; then
    fail "$S/g.svg is no longer a FIFO"
fi
if ! cmp -s "$S/g.dot" "$DIR/bucket0.dot"; then
    fail "expected the DOT that --dot writes in $S/g.dot"
fi
expect_special g.dot g.svg g.svg.got
pass

# A full device stays a device, and its ENOSPC is reported with its path: exit 1.
fresh_special
if full_device "$S"; then
    run "--dot to a full device" $TINY --bucket 0 --dot "$S/full"
    one_line_error 1 "writing a graph: '$S/full': "
    expect_err "No space left on device"
    if [ ! -c "$S/full" ]; then
        fail "$S/full is no longer a character device"
    fi
    expect_special full
    expect_files
    pass

    if [ "$have_dot" = yes ]; then
        run "--svg to a full device" $TINY --bucket 0 --svg "$S/full"
        one_line_error 1 "writing a graph: '$S/full': No space left on device"
        if [ ! -c "$S/full" ]; then
            fail "$S/full is no longer a character device"
        fi
        expect_special full
        pass
    fi

    RUN_STDOUT=$S/full
    run "--list to a full stdout" $TINY --list
    RUN_STDOUT=
    one_line_error 1 "acg: writing standard output: No space left on device"
    pass
else
    skipped "--dot, --svg and --list to a full device: mknod is not permitted here (not root)"
fi

# A symbolic link stays one; the file it names is replaced whole.
fresh_special
echo "old text" >"$S/real.dot"
ln -s real.dot "$S/link.dot"
run "--dot through a symbolic link" $TINY --bucket 0 --dot "$S/link.dot"
expect_rc 0
if [ ! -L "$S/link.dot" ] || [ "$(readlink "$S/link.dot")" != real.dot ]; then
    fail "$S/link.dot is no longer the link to real.dot"
fi
if ! cmp -s "$S/real.dot" "$DIR/bucket0.dot"; then
    fail "the file the link names does not hold the DOT"
fi
expect_special link.dot real.dot
pass

# Through a chain of relative links into another folder: the file at the end is replaced, its
# temporary file made (and gone) beside it.
fresh_special
mkdir -p "$S/sub"
echo "old text" >"$S/sub/real.dot"
ln -s sub/step.dot "$S/first.dot"
ln -s real.dot "$S/sub/step.dot"
run "--dot through a chain of links" $TINY --bucket 0 --dot "$S/first.dot"
expect_rc 0
if [ ! -L "$S/first.dot" ] || [ ! -L "$S/sub/step.dot" ]; then
    fail "a link of the chain is no longer a link"
fi
if ! cmp -s "$S/sub/real.dot" "$DIR/bucket0.dot"; then
    fail "the file at the chain's end does not hold the DOT"
fi
expect_special first.dot sub
if [ "$(ls -A "$S/sub" | LC_ALL=C sort | tr '\n' ' ')" != "real.dot step.dot " ]; then
    fail "expected $S/sub to hold real.dot and step.dot alone: $(ls -A "$S/sub" | tr '\n' ' ')"
fi
pass

# A link to nothing yet: the file it names is created, as a shell's > would.
fresh_special
ln -s new.dot "$S/link.dot"
run "--dot through a dangling link" $TINY --bucket 0 --dot "$S/link.dot"
expect_rc 0
if [ ! -L "$S/link.dot" ]; then
    fail "$S/link.dot is no longer a link"
fi
if ! cmp -s "$S/new.dot" "$DIR/bucket0.dot"; then
    fail "the file the link names was not created with the DOT"
fi
expect_special link.dot new.dot
pass

if [ "$have_dot" = yes ]; then
    fresh_special
    echo "old text" >"$S/real.svg"
    ln -s real.svg "$S/link.svg"
    run "--svg through a symbolic link" $TINY --bucket 0 --svg "$S/link.svg"
    expect_rc 0
    if [ ! -L "$S/link.svg" ]; then
        fail "$S/link.svg is no longer a link"
    fi
    expect_svg "$S/real.svg" "$nodes"
    expect_special link.svg real.svg
    pass
fi

fresh_special
mkdir -p "$S/dir"
ln -s dir "$S/link"
run "--dot to a link to a directory" $TINY --bucket 0 --dot "$S/link"
one_line_error 1 "'$S/link': Is a directory"
expect_special dir link
if [ -n "$(ls -A "$S/dir")" ]; then
    fail "something was written into $S/dir"
fi
pass

# A link that leads back to itself is refused, as opening it would be, and stays as it was.
fresh_special
ln -s loop.dot "$S/loop.dot"
run "--dot to a link loop" $TINY --bucket 0 --dot "$S/loop.dot"
one_line_error 1 "'$S/loop.dot': Too many levels of symbolic links"
expect_special loop.dot
if [ ! -L "$S/loop.dot" ]; then
    fail "$S/loop.dot is no longer a link"
fi
pass

# An empty name is a bad command line: nothing is written, in the working directory either.
usage_error "--dot ''" $TINY --bucket 0 --dot ""
expect_err "--dot needs a file name"
pass
usage_error "--svg ''" $TINY --svg ""
expect_err "--svg needs a file name"
pass

# ---- failures while working: exit 1, nothing left behind -------------------------------------

fails 1 "no-such-backend" \
    "unknown backend" --backend no-such-backend --preset tiny --bucket 0 --dot "$W/g.dot"
expect_err "opening the device"
pass

fails 1 "loading the model" \
    "missing model" --backend cpu --model "$W/m.bin" --tokenizer "$W/t.bin" --dot "$W/g.dot"
pass

# ---- bad command lines: exit 2, nothing written -----------------------------------------------

# The bucket's range is the model's: found once it is built, one line naming the range.
fails 2 "--bucket $n_buckets: the model has buckets 0..$last (--list shows them)" \
    "--bucket out of range" $TINY --bucket "$n_buckets" --dot "$W/g.dot"
expect_no_out
pass

fails 2 "the model has buckets 0..$last" \
    "--bucket out of range, --svg" $TINY --bucket 4294967295 --svg "$W/g.svg"
pass

for bad in abc -1 1.5 " 1" "" 4294967296; do
    usage_error "--bucket '$bad'" $TINY --bucket "$bad" --dot "$W/g.dot"
    expect_err "--bucket takes a bucket's index, a whole number"
    pass
done
usage_error "--bucket without a value" $TINY --dot "$W/g.dot" --bucket
expect_err "--bucket needs a value"
pass
usage_error "--dot and --svg" $TINY --dot "$W/g.dot" --svg "$W/g.svg"
expect_err "--dot and --svg exclude each other"
pass
usage_error "neither --dot nor --svg" $TINY --bucket 0
expect_err "--dot FILE or --svg FILE"
pass
usage_error "--list with --svg" $TINY --list --svg "$W/g.svg"
expect_err "--list writes no graph"
pass
usage_error "--svg to stdout" $TINY --svg -
expect_err "--svg needs a file"
pass
usage_error "--dot without a value" $TINY --dot
expect_err "--dot needs a value"
pass
usage_error "unknown option" $TINY --dot "$W/g.dot" --frobnicate
expect_err "unknown argument '--frobnicate'"
pass
for bad in 2 -1 abc ""; do
    usage_error "--slot '$bad'" $TINY --slot "$bad" --dot "$W/g.dot"
    expect_err "--slot takes a whole number in [0, 1]"
    pass
done
for bad in 0 1025 abc; do
    usage_error "--batch '$bad'" $TINY --batch "$bad" --dot "$W/g.dot"
    expect_err "--batch takes a whole number in [1, 1024]"
    pass
done
usage_error "--model without --tokenizer" --backend cpu --model "$W/m.bin" --dot "$W/g.dot"
expect_err "--model and --tokenizer go together"
pass
usage_error "--preset with --model" $TINY --model "$W/m.bin" --tokenizer "$W/t.bin" \
    --dot "$W/g.dot"
expect_err "--preset and --model exclude each other"
pass
usage_error "--preset huge" --backend cpu --preset huge --dot "$W/g.dot"
expect_err "huge"
pass
}

# ---- a checkpoint file ------------------------------------------------------------------------

python_or_skip "the SVG parse and the checkpoint case are skipped"

# lib.sh's checkpoint and tokenizer, m.bin and t.bin.
if ! model_files "$DIR"; then
    echo "FAIL: python3 could not write the checkpoint and tokenizer files"
    exit 1
fi

run "--model and --tokenizer" --backend cpu --model "$DIR/m.bin" --tokenizer "$DIR/t.bin" \
    --batch 2 --bucket 0 --dot "$W/g.dot"
expect_rc 0
expect_files g.dot
expect_kernels "$W/g.dot"
pass

cli_finish
