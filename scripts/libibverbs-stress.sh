#!/usr/bin/env bash
# Runs the libibverbs applications on the simulation (the ctest tests Libibverbs.*: the
# pingpongs, the perftest pairs, the pyverbs suite, the server-death check) ROUNDS times in a row
# while busy loops at nice 0, one per core, keep every core loaded: a machine busy with other
# work, where the busy-polling applications, the provider and the simulation they wait for
# interleave in every way the scheduler allows. Stops at the first failing round and exits 1.
#
#   scripts/libibverbs-stress.sh [--rounds N] [--busy N] [--build-dir DIR] [-R REGEX]
#
#   --rounds N      rounds (default 1; scripts/test.sh runs one round of the bandwidth pairs and
#                   the server-death test; scripts/bench.sh runs HCASIM_STRESS_ROUNDS of all)
#   --busy N        busy loops (default: the number of cores)
#   --build-dir DIR where ctest finds the build (default build/release, built already)
#   -R REGEX        only these tests (default ^Libibverbs\.)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=1
busy="$(nproc)"
build="$root/build/release"
regex='^Libibverbs\.'
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --busy) busy="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    -R) regex="$2"; shift 2 ;;
    *) echo "libibverbs-stress.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
case "$rounds$busy" in *[!0-9]*|'') echo "libibverbs-stress.sh: --rounds and --busy take numbers" >&2; exit 2 ;; esac
[ -d "$build" ] || { echo "libibverbs-stress.sh: no build at $build (run scripts/test.sh or scripts/demo.sh first)" >&2; exit 2; }

loops=()
stop_loops() {
    [ "${#loops[@]}" -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop_loops EXIT
trap 'exit 130' INT TERM  # through the EXIT trap: no busy loop outlives the script
for _ in $(seq 1 "$busy"); do
    nice -n 0 bash -c 'while :; do :; done' &
    loops+=("$!")
done

started=$SECONDS
for round in $(seq 1 "$rounds"); do
    if ! ctest --test-dir "$build" -R "$regex" -j1 --output-on-failure > "${TMPDIR:-/tmp}/libibverbs-stress.$$.log" 2>&1; then
        cat "${TMPDIR:-/tmp}/libibverbs-stress.$$.log"
        rm -f "${TMPDIR:-/tmp}/libibverbs-stress.$$.log"
        echo "libibverbs-stress: round $round of $rounds failed ($busy busy loops at nice 0)" >&2
        exit 1
    fi
    summary=$(grep -E 'tests passed|tests failed' "${TMPDIR:-/tmp}/libibverbs-stress.$$.log" | tail -1)
    echo "libibverbs-stress: round $round of $rounds: $summary"
    # Each test's wall time: how much longer busy-polling applications take on a busy machine.
    grep -oE 'Libibverbs\.[A-Za-z0-9_]+ \.*[ ]+(Passed|\*\*\*Skipped|Not Run)[ ]+[0-9.]+ sec' \
        "${TMPDIR:-/tmp}/libibverbs-stress.$$.log" | sed -E 's/ \.+ +/ /; s/^/  /' || true
done
rm -f "${TMPDIR:-/tmp}/libibverbs-stress.$$.log"
echo "libibverbs-stress: $rounds of $rounds rounds passed with $busy busy loops at nice 0 in $((SECONDS - started)) s"
