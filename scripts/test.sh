#!/usr/bin/env bash
# Installs missing packages (as root), builds the release preset and runs every test with
# ctest; then builds the ASan+UBSan preset and runs every test again under the sanitizers
# (skip that pass with HCASIM_SKIP_SANITIZERS=1). Exits non-zero if a build or any test
# fails. Extra arguments go to both ctest runs (e.g. scripts/test.sh -R WireCodec); without
# them, the perftest bandwidth pairs also run once under load (scripts/libibverbs-stress.sh).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
hcasim_setup
cd "$HCASIM_ROOT"
ctest --test-dir build/release --output-on-failure -j2 "$@"
if [ "$#" -eq 0 ]; then
    # The perftest bandwidth pairs (thousands of busy-polled completions each) once more with
    # every core kept busy. The long form, every application 20 rounds, is a benchmark
    # (scripts/bench.sh): under such load a latency pingpong takes minutes.
    hcasim_log "libibverbs applications under load: scripts/libibverbs-stress.sh (short form)"
    scripts/libibverbs-stress.sh --rounds 1 -R '^Libibverbs\.(ib_[a-z]+_bw|an_application_whose_server_dies)'
fi
if [ "${HCASIM_SKIP_SANITIZERS:-0}" != 1 ]; then
    hcasim_log "sanitizer pass: building the asan preset (AddressSanitizer + UBSan)"
    cmake --preset asan
    cmake --build --preset asan -j"$(nproc)"
    # Any memory error or undefined behaviour fails the test that triggered it. Leaks are not
    # checked: SystemC keeps its kernel objects until exit, and tests, like libibverbs
    # applications, may exit without destroying verbs objects.
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --test-dir build/asan --output-on-failure -j2 "$@"
fi
