#!/bin/sh
# check.sh CC INCLUDE_DIRS(colon-separated) SOURCE_DIR KIND — the layering the build enforces,
# for one object library's include paths:
#   KIND layer: the engine's. The public headers and the core's layer header
#     compile; the core's object bodies (acg-impl.h), a backend's header and the model's private
#     header do not.
#   KIND backend: a backend's. The backend interface (acg-backend.h) and the layer header
#     compile; the core's object bodies, another backend's header and the layers' private headers
#     do not.
# An upward or sideways include is then a compile error. With either kind, no source under src/
# may reach around its include paths with a relative "../" include.
set -u
CC=$1
DIRS=$2
SRC=$3
KIND=$4
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
checks=0
compile() { # compile FILE_CONTENT: 0 when it compiles
    printf '%s\n' "$1" >"$TMP/t.c"
    # shellcheck disable=SC2086 # one word per flag
    "$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -fsyntax-only $flags "$TMP/t.c" 2>"$TMP/err"
}
case $KIND in
layer)
    good='#include "acg-layer.h"
#include <acg/engine.h>
int main(void) { return acg__parse_u64("1", 0, 1, 0) == ACG_OK; }'
    bad="core/acg-impl.h acg-impl.h core/backend/acg-backend.h acg-backend.h backends/cpu/cpu.h
         cpu.h model-impl.h"
    ;;
backend)
    good='#include "acg-backend.h"
#include "acg-layer.h"
int main(void) { return acg__parse_u64("1", 0, 1, 0) == ACG_OK && ACG_BACKEND_VERSION > 0; }'
    bad="core/acg-impl.h acg-impl.h backends/cpu/cpu.h backends/opencl/opencl.h
         backends/cuda/cuda.h backends/level_zero/level_zero.h opencl.h level_zero.h
         engine-impl.h runner-impl.h model-impl.h"
    ;;
*)
    echo "FAIL: KIND is $KIND, not layer or backend"
    exit 1
    ;;
esac
checks=$((checks + 1))
if ! compile "$good"; then
    echo "FAIL: what a $KIND may include does not compile with these paths:"
    cat "$TMP/err"
    failures=$((failures + 1))
fi
for h in $bad; do
    checks=$((checks + 1))
    if compile "#include \"$h\""; then
        echo "FAIL: #include \"$h\" compiled with a $KIND's include paths"
        failures=$((failures + 1))
    elif ! grep -q "No such file" "$TMP/err"; then
        echo "FAIL: #include \"$h\" failed for another reason:"
        cat "$TMP/err"
        failures=$((failures + 1))
    fi
done
checks=$((checks + 1))
if grep -rn --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\.\./' \
    "$SRC/src" >"$TMP/rel"; then
    echo "FAIL: a source includes around its include paths:"
    cat "$TMP/rel"
    failures=$((failures + 1))
fi
echo "layering, $KIND ($DIRS): $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
