#!/usr/bin/env bash
# Port fuzzer (docs/fuzzing.md): configures and builds the clang + libFuzzer build in BUILD
# (-DHCASIM_FUZZ=ON: every library with ASan, UBSan and coverage), then runs port_fuzz for N
# seconds (default 600) on a fresh copy of testbench/fuzz/corpus. The run's corpus, log and any
# crash/timeout/leak artifact go to BUILD/findings/ (with counters.txt: the model's counters
# summed over the run, to see which paths the packets reached). Prints the executions, speed, coverage
# and the result; exits 0 if the run found nothing, 1 if it found something, 2 on a setup error.
# BUILD: --build-dir DIR (first argument), else $HCASIM_FUZZ_BUILD_DIR, else build/fuzz in the
# source tree; the source tree is only read, so a read-only checkout fuzzes with a BUILD elsewhere.
# Extra arguments go to libFuzzer (scripts/fuzz.sh 60 -use_value_profile=1).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

usage="usage: scripts/fuzz.sh [--build-dir DIR] [seconds] [libFuzzer flags...]   (seconds: a positive integer, default 600)"
build="${HCASIM_FUZZ_BUILD_DIR:-$HCASIM_ROOT/build/fuzz}"
if [ "${1:-}" = "--build-dir" ]; then
    if [ -z "${2:-}" ]; then
        echo "$usage" >&2
        exit 2
    fi
    build="$2"
    shift 2
fi
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac  # the script changes directory below
seconds="${1:-600}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    echo "$usage" >&2
    exit 2
fi
if ! mkdir -p "$build" 2>/dev/null || [ ! -w "$build" ]; then
    echo "scripts/fuzz.sh: cannot write the build directory '$build' (give another: --build-dir DIR or HCASIM_FUZZ_BUILD_DIR)" >&2
    exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))

hcasim_install_packages || exit 2
cd "$HCASIM_ROOT"
if ! command -v clang++ >/dev/null 2>&1; then
    hcasim_log "clang++ not found; install it (as root): apt-get install -y clang libclang-rt-dev"
    exit 2
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
    hcasim_log "clang++ cannot link -fsanitize=fuzzer (libclang_rt.fuzzer missing?):"
    sed 's/^/    /' "$probe/err" >&2
    hcasim_log "install it (as root): apt-get install -y libclang-rt-dev"
    exit 2
fi

if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang' "$build/CMakeCache.txt"; then
    hcasim_log "$build was configured with another compiler than clang++; remove it and run again"
    exit 2
fi
hcasim_log "configuring and building $build (clang, HCASIM_FUZZ=ON)"
CC=clang CXX=clang++ cmake -S "$HCASIM_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHCASIM_FUZZ=ON >/dev/null
cmake --build "$build" -j2 --target port_fuzz

out="$build/findings"
rm -rf "$out"
mkdir -p "$out/corpus" "$out/artifacts"
cp "$HCASIM_ROOT"/testbench/fuzz/corpus/* "$out/corpus/"
seeds=$(find "$out/corpus" -type f | wc -l)
hcasim_log "fuzzing for ${seconds} s from ${seeds} seeds; log: $out/fuzz.log"

set +e
( cd "$out" && HCASIM_FUZZ_COUNTERS="$out/counters.txt" UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/testbench/fuzz/port_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/" "$@" "$out/corpus" ) >"$out/fuzz.log" 2>&1
rc=$?
set -e

stat() { sed -n "s/^stat::$1: *//p" "$out/fuzz.log" | tail -1; }
last_cov=$(grep -E '^#[0-9]+' "$out/fuzz.log" | grep -o 'cov: [0-9]* ft: [0-9]*' | tail -1 || true)
units=$(find "$out/corpus" -type f | wc -l)
artifacts=$(find "$out/artifacts" -type f | sort)
echo "port_fuzz: ${seconds} s, executions $(stat number_of_executed_units), exec/s $(stat average_exec_per_sec)," \
     "${last_cov:-cov: ?}, corpus ${seeds} -> ${units} inputs, peak RSS $(stat peak_rss_mb) MB"
if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
    echo "port_fuzz: PASS: no crash, hang, leak or sanitizer report"
    exit 0
fi
echo "port_fuzz: FAIL (libFuzzer exit $rc); the report (last lines of $out/fuzz.log):"
grep -E 'ERROR|FAILURE|SUMMARY|Test unit written|deadly signal|timeout' "$out/fuzz.log" | head -20 | sed 's/^/    /'
for a in $artifacts; do echo "    artifact: $a"; done
echo "port_fuzz: replay one with: $build/testbench/fuzz/port_fuzz <artifact>   (docs/fuzzing.md)"
exit 1
