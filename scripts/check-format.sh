#!/bin/sh
# Checks that every tracked C, C++ and CUDA source under src/, include/, tools/, bench/, tests/
# and examples/ is as clang-format (the repository's .clang-format) writes it. With --fix,
# rewrites the ones that are not. Exit 0 when all are; 1 after naming those that are not; 2 when
# clang-format is missing (scripts/install-deps.sh installs it).
set -eu
cd "$(dirname "$0")/.."
FORMAT=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$FORMAT" >/dev/null 2>&1; then
    echo "check-format: $FORMAT not found (sh scripts/install-deps.sh installs it)" >&2
    exit 2
fi
fix=0
if [ "${1:-}" = "--fix" ]; then
    fix=1
fi
bad=0
for f in $(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'include/*.h' 'tools/*.c' 'tools/*.h' \
    'bench/*.c' 'bench/*.h' 'tests/*.c' 'tests/*.h' 'tests/*.cu' 'tests/*.cpp' 'examples/*.c' 'examples/*.h'); do
    if ! "$FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1; then
        if [ $fix -eq 1 ]; then
            "$FORMAT" -i "$f"
            echo "check-format: reformatted $f"
        else
            echo "check-format: $f differs from .clang-format (scripts/check-format.sh --fix)"
            bad=1
        fi
    fi
done
exit $bad
