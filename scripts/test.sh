#!/usr/bin/env bash
# Installs missing packages (as root), builds the release preset and runs every test with
# ctest. Exits non-zero if the build or any test fails. Extra arguments go to ctest
# (e.g. scripts/test.sh -R wire_).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
hcasim_setup
cd "$HCASIM_ROOT"
ctest --test-dir build/release --output-on-failure -j2 "$@"
