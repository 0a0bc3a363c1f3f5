#!/bin/sh
# check.sh CC INCLUDE_DIRS(colon-separated) SOURCE_DIR — the layering the build enforces: with the
# include paths the engine's and the model's objects are compiled with, their public headers and
# the core's layer header compile, and the core's object bodies (acg-impl.h) or a backend's
# header do not: an upward or sideways include is a compile error.
set -u
CC=$1
DIRS=$2
SRC=$3
TMP=${TMPDIR:-/tmp}/acg-layering.$$
mkdir -p "$TMP" || exit 1
trap 'rm -rf "$TMP"' EXIT
flags=""
old_ifs=$IFS
IFS=:
for d in $DIRS; do
    flags="$flags -I$d"
done
IFS=$old_ifs
failures=0
compile() { # compile FILE_CONTENT: 0 when it compiles
    printf '%s\n' "$1" >"$TMP/t.c"
    # shellcheck disable=SC2086 # one word per flag
    "$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only $flags "$TMP/t.c" 2>"$TMP/err"
}
if ! compile '#include "acg-layer.h"
#include <acg/engine.h>
int main(void) { return acg__parse_u64("1", 0, 1, 0) == ACG_OK; }'; then
    echo "FAIL: the layer header does not compile with these paths:"
    cat "$TMP/err"
    failures=$((failures + 1))
fi
for bad in "core/acg-impl.h" "acg-impl.h" "backends/cpu/cpu.h" "cpu.h" "model-impl.h"; do
    if compile "#include \"$bad\""; then
        echo "FAIL: #include \"$bad\" compiled from a layer above the core"
        failures=$((failures + 1))
    elif ! grep -q "No such file" "$TMP/err"; then
        echo "FAIL: #include \"$bad\" failed for another reason:"
        cat "$TMP/err"
        failures=$((failures + 1))
    fi
done
echo "layering ($DIRS): $((6 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
