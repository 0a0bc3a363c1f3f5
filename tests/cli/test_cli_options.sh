#!/bin/sh
# test_cli_options.sh ACG SCRATCH — the numeric options of `acg run` and of every `acg bench
# <name>`: a value out of range or malformed (a sign, a blank, trailing text, nan, inf, hex, an
# overflow) must exit 2 with exactly the message that states the option's real range, then the
# usage line, and nothing on stdout. A value at the edge of the range must be accepted: it is
# given together with a bad value of another option, so the case fails on that one and nothing
# runs. Any sanitizer report on stderr fails the case.
set -u
. "$(dirname "$0")/lib.sh"
cli_setup "" "$@"

# ---- helpers ----------------------------------------------------------------------------------

# refused USAGE MESSAGE ARGS...: `acg ARGS...` exits 2, the first line of stderr is exactly
# "acg: MESSAGE", stderr holds the usage line USAGE ("usage: acg run"), stdout is empty.
refused() {
    usage=$1
    message=$2
    shift 2
    case_begin "acg $*" "acg $*"
    "$ACG" "$@" >"$OUT" 2>"$ERR"
    rc=$?
    case_ran
    expect_rc 2
    expect_err_first "acg: $message"
    expect_err "$usage"
    expect_no_out
    pass
}

# Malformed values of any numeric option, whatever its range (each a single word).
MALFORMED_INTEGERS="abc 2junk -1 +1 1.5 0x10 1e3 18446744073709551616"
MALFORMED_NUMBERS="abc 0.5junk nan NaN inf -inf infinity 0x1p-1 1,5 .  e5"

# integer_option USAGE PREFIX UNKNOWN OPTION MIN MAX ABOVE ARGS...: after `acg ARGS...`, OPTION
# refuses MIN - 1 (when MIN > 0), ABOVE (MAX + 1, written out: sh arithmetic stops at 2^63 - 1),
# malformed values, blanks around the number and an empty value, each with the message
# "PREFIX<OPTION> takes a whole number in [MIN, MAX]"; MIN and MAX are taken, and the command
# line then fails on --bad-option with the message UNKNOWN.
integer_option() {
    io_usage=$1
    io_prefix=$2
    io_unknown=$3
    io_option=$4
    io_min=$5
    io_max=$6
    io_above=$7
    shift 7
    io_msg="$io_prefix$io_option takes a whole number in [$io_min, $io_max]"
    if [ "$io_min" -gt 0 ]; then
        refused "$io_usage" "$io_msg" "$@" "$io_option" "$((io_min - 1))"
    fi
    refused "$io_usage" "$io_msg" "$@" "$io_option" "$io_above"
    refused "$io_usage" "$io_msg" "$@" "$io_option=$io_above"
    for io_bad in $MALFORMED_INTEGERS; do
        refused "$io_usage" "$io_msg" "$@" "$io_option" "$io_bad"
    done
    refused "$io_usage" "$io_msg" "$@" "$io_option" " 1"
    refused "$io_usage" "$io_msg" "$@" "$io_option" "1 "
    refused "$io_usage" "$io_msg" "$@" "$io_option" ""
    refused "$io_usage" "$io_unknown" "$@" "$io_option" "$io_min" --bad-option
    refused "$io_usage" "$io_unknown" "$@" "$io_option" "$io_max" --bad-option
}

# ---- acg run ----------------------------------------------------------------------------------

RUN_USAGE="usage: acg run"
RUN_UNKNOWN="unknown argument '--bad-option'"
integer_option "$RUN_USAGE" "" "$RUN_UNKNOWN" --steps 1 1048576 1048577 run
integer_option "$RUN_USAGE" "" "$RUN_UNKNOWN" --seed 0 18446744073709551615 \
    18446744073709551616 run
integer_option "$RUN_USAGE" "" "$RUN_UNKNOWN" --batch 1 1024 1025 run
integer_option "$RUN_USAGE" "" "$RUN_UNKNOWN" --steps-per-launch 1 1024 1025 run

# run_number OPTION RANGE BELOW ABOVE LOW HIGH: a number option whose range reads RANGE
# ("[0, 1000000]"); BELOW and ABOVE are refused, LOW and HIGH taken.
run_number() {
    rn_option=$1
    rn_msg="$1 takes a number in $2"
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option" "$3"
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option" "$4"
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option=$4"
    for rn_bad in $MALFORMED_NUMBERS; do
        refused "$RUN_USAGE" "$rn_msg" run "$rn_option" "$rn_bad"
    done
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option" " 0.5"
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option" "0.5 "
    refused "$RUN_USAGE" "$rn_msg" run "$rn_option" ""
    refused "$RUN_USAGE" "unknown argument '--bad-option'" run "$rn_option" "$5" --bad-option
    refused "$RUN_USAGE" "unknown argument '--bad-option'" run "$rn_option" "$6" --bad-option
}

run_number --temperature "[0, 1000000]" -1 1e7 0 1e6
run_number --temperature "[0, 1000000]" -0.001 1000000.5 0.0 1000000
run_number --top-p "(0, 1]" 0 1.5 1e-9 1
run_number --top-p "(0, 1]" -0.0 1.0000001 0.5 1.0

# ---- acg bench <name> -------------------------------------------------------------------------

bench_integer() {
    bi_name=$1
    shift
    integer_option "usage: acg bench $bi_name" "bench $bi_name: " \
        "bench $bi_name: unknown option '--bad-option'" "$@" bench "$bi_name"
}
bench_integer launch --kernels 1 1000000 1000001
bench_integer launch --steps 1 10000000 10000001
bench_integer launch --elements 1 16777216 16777217
bench_integer stage --plans 1 2000000 2000001
bench_integer decode --steps 1 100000 100001
bench_integer decode --tp 1 64 65
bench_integer split --launches 1 10000 10001
bench_integer split --steps 1 100000 100001

# --batch of bench decode is a comma list: each item a whole number in range, at most 16 items.
DECODE_USAGE="usage: acg bench decode"
BATCH_MSG="bench decode: --batch takes a comma list of at most 16 whole numbers in [1, 1024]"
for bad in 0 1025 1,0 1,1025 abc 1,abc 2junk -1 +1 1.5 " 1" "1, 8" "" , 1, ,1 1,,8 \
    18446744073709551617 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17; do
    refused "$DECODE_USAGE" "$BATCH_MSG" bench decode --batch "$bad"
done
refused "$DECODE_USAGE" "bench decode: unknown option '--bad-option'" \
    bench decode --batch 1,1024,1,2,3,4,5,6,7,8,9,10,11,12,13,14 --bad-option

# --steps-per-launch of bench decode: a comma list of depths in [1, 1024], at most 7 of them, and
# one rank only.
DEPTH_MSG="bench decode: --steps-per-launch takes a comma list of at most 7 whole numbers in [1, 1024]"
for bad in 0 1025 4,0 abc "" , 4, 1,2,3,4,5,6,7,8; do
    refused "$DECODE_USAGE" "$DEPTH_MSG" bench decode --steps-per-launch "$bad"
done
refused "$DECODE_USAGE" "bench decode: unknown option '--bad-option'" \
    bench decode --steps-per-launch 1,1024,2,3,4,5,6 --bad-option
refused "$DECODE_USAGE" \
    "bench decode: --steps-per-launch serves one rank: an allreduce cannot be in a loop's body" \
    bench decode --steps-per-launch 4 --tp 2

cli_finish
