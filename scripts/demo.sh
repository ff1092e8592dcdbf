#!/usr/bin/env bash
# Installs missing packages (as root), builds the release preset and runs hcasim.
# Without arguments it runs the default demo; arguments are passed to hcasim
# (e.g. scripts/demo.sh --workload write_bw --size 1M --iters 200).
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
hcasim_setup
cd "$HCASIM_ROOT"
exec ./build/release/testbench/hcasim "$@"
