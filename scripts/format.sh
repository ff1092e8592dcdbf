#!/usr/bin/env bash
# Formats the C++ sources with clang-format (.clang-format at the root).
# Usage: scripts/format.sh [--check] [FILE...]   (default: every tracked .h/.cpp)
#   --check: change nothing, list the files that are not formatted, exit 1 if any.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
command -v clang-format > /dev/null || { echo "format.sh: clang-format not found (apt install clang-format)" >&2; exit 2; }
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "$check" = 0 ]; then
    clang-format -i "${files[@]}"
    exit 0
fi
bad=0
for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then echo "not formatted: $f"; bad=1; fi
done
exit "$bad"
