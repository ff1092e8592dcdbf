# shellcheck shell=bash
# Shared setup for scripts/demo.sh and scripts/test.sh (sourced, not run).
#
# hcasim_setup: installs the Debian packages the build needs (only those missing, as root),
# then configures and builds the release preset. Works from any working directory; leaves
# the shell in the repository root.

HCASIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian bookworm packages: SystemC 2.3.4 (pkg-config only), Verilator 5.006, Boost
# program_options, GoogleTest, nlohmann/json, gnuplot (hcasim --report's plots), help2man (the
# man pages), tshark (the tests dissect hcasim --pcap captures with it; DEBIAN_FRONTEND=noninteractive answers
# wireshark-common's capture-permission question with its default), libibverbs with the
# programs the provider's tests run (docs/libibverbs.md: ibv_*_pingpong, perftest, the pyverbs
# tests), OpenMPI (libopenmpi-dev, openmpi-bin: sweeps spread over `mpirun` ranks; optional at
# configure time, -DHCASIM_MPI=OFF builds without), and the toolchain.
HCASIM_PACKAGES=(
    libsystemc-dev
    verilator
    libboost-program-options-dev
    libboost-dev
    libgtest-dev
    googletest
    nlohmann-json3-dev
    zlib1g-dev
    cmake
    g++
    pkg-config
    make
    time
    gnuplot-nox
    help2man
    tshark
    libibverbs-dev
    ibverbs-providers
    ibverbs-utils
    perftest
    python3-pyverbs
    libopenmpi-dev
    openmpi-bin
)

hcasim_log() { printf '[hcasim] %s\n' "$*" >&2; }

hcasim_missing_packages() {
    local p
    for p in "${HCASIM_PACKAGES[@]}"; do
        if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
            printf '%s\n' "$p"
        fi
    done
}

hcasim_install_packages() {
    if ! command -v dpkg >/dev/null 2>&1; then
        hcasim_log "dpkg not found: not a Debian system; skipping package checks (need: ${HCASIM_PACKAGES[*]})"
        return 0
    fi
    local missing
    mapfile -t missing < <(hcasim_missing_packages)
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        hcasim_log "missing packages: ${missing[*]}"
        hcasim_log "install them as root, then re-run:"
        hcasim_log "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
        return 1
    fi
    hcasim_log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
}

hcasim_build() {
    cd "$HCASIM_ROOT"
    # Configuring again is cheap and picks up new source files (CONFIGURE_DEPENDS globs).
    cmake --preset release
    cmake --build --preset release -j"$(nproc)"
}

hcasim_setup() {
    hcasim_install_packages
    hcasim_build
}
