#!/usr/bin/env bash
# Runs rdma-core's pyverbs test suite (Debian python3-pyverbs, /usr/share/doc/rdma-core/tests)
# against the simulated HCA hcasim0 through scripts/with-simhca.sh, and prints the tally:
# passed, failed, skipped, and each skip reason with its count (docs/libibverbs.md lists what
# they mean for the model). Exits with the suite's status (0: no failures or errors).
#
#   scripts/pyverbs-suite.sh [--build-dir DIR] [run_tests.py arguments, e.g. tests.test_qp -v]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
simhca=("$root/scripts/with-simhca.sh" --timeout 900)
if [ "${1:-}" = "--build-dir" ]; then
    simhca+=(--build-dir "$2")
    shift 2
fi
src=/usr/share/doc/rdma-core/tests
[ -e "$src/run_tests.py" ] || { echo "pyverbs-suite.sh: $src is missing: install python3-pyverbs" >&2; exit 2; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/pyverbs.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/tests"
find "$tmp/tests" -name '*.gz' -exec gunzip -f {} +
status=0
"${simhca[@]}" bash -c "cd '$tmp/tests' && /usr/bin/python3 run_tests.py --dev hcasim0 -v $*" > "$tmp/log" 2>&1 || status=$?
grep -E '\.\.\. (ERROR|FAIL)$' "$tmp/log" || true
grep -E '^(ERROR|FAIL):' -A30 "$tmp/log" | grep -vE '^  File ' || true
passed=$(grep -cE '\.\.\. ok$' "$tmp/log" || true)
skipped=$(grep -cE '\.\.\. skipped' "$tmp/log" || true)
failed=$(grep -cE '\.\.\. (ERROR|FAIL)$' "$tmp/log" || true)
echo "pyverbs: $passed passed, $failed failed, $skipped skipped; skip reasons:"
sed -n "s/.*\.\.\. skipped '\(.*\)'$/\1/p" "$tmp/log" | sort | uniq -c | sort -rn
grep -E '^Ran [0-9]+ tests|^(OK|FAILED)' "$tmp/log" || true
grep -E '^hcasim serve: stopped' "$tmp/log" || true
exit "$status"
