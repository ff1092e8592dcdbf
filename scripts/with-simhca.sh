#!/usr/bin/env bash
# Runs an unmodified libibverbs application on simulated HCAs (docs/libibverbs.md).
#
#   scripts/with-simhca.sh [options] [--] CMD [ARGS...]
#
# Starts `hcasim serve` (N HCAs hcasim0..hcasimN-1 on one fabric), points libibverbs at them
# (a sysfs tree in a temporary directory, SYSFS_PATH, RDMAV_DRIVERS, the provider preloaded for
# its completion channels, HCASIM_SOCKET), runs CMD (and, with --peer, a second command at the
# same time, e.g. the server side of a pingpong), then stops the server, which prints the
# simulated-time statistics. Exits with CMD's status (or the peer's, if CMD succeeded and the
# peer failed); 124 when --timeout expires; 77 when /dev/infiniband is missing and cannot be made
# (not root); 2 for other setup errors. CMD finds the server's process ID in HCASIM_SERVER_PID.
#
# Options:
#   --peer 'CMD ARGS'   run this command line too (started first, in the background)
#   --peer-delay S      seconds between starting the peer and CMD (default 0.5)
#   --nodes N           HCAs on the fabric (default: the configuration's fabric.nodes, 2)
#   --set key=value     hcasim parameter (repeatable), --config FILE (repeatable)
#   --timeout S         give up after S seconds (default 300)
#   --nice N            the applications' nice value (default 10): programs that busy-poll (the
#                       pingpongs, perftest) would otherwise take the CPU from the simulation
#                       they are waiting for when there are fewer cores than processes
#   --build-dir DIR     where hcasim and the provider were built (default build/release; installed
#                       by cmake --install as PREFIX/bin/hcasim-with-simhca: PREFIX's bin/hcasim and
#                       lib/hcasim/libhcasim-rdmav34.so)
#   --verbose           the server logs every client's requests and events
#
# Example (the server peer on hcasim0, the client on hcasim1):
#   scripts/with-simhca.sh --peer 'ibv_rc_pingpong -d hcasim0' ibv_rc_pingpong -d hcasim1 localhost
#
# Needs root once, to create /dev/infiniband/uverbsN (links to /dev/null: libibverbs insists on
# a character device; nothing is ever read from or written to it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/release"
build_given=""
peer=""
peer_delay=0.5
timeout_s=300
nice_n=10
serve_args=()
nodes=""
while [ $# -gt 0 ]; do
    case "$1" in
    --peer) peer="$2"; shift 2 ;;
    --peer-delay) peer_delay="$2"; shift 2 ;;
    --nodes) nodes="$2"; serve_args+=(--set "fabric.nodes=$2"); shift 2 ;;
    --set | --config) serve_args+=("$1" "$2"); shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --nice) nice_n="$2"; shift 2 ;;
    --build-dir) build="$(cd "$2" && pwd)"; build_given=1; shift 2 ;;
    --verbose) serve_args+=(--verbose); shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "with-simhca.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "with-simhca.sh: no command given (see --help)" >&2; exit 2; }
hcasim="$build/testbench/hcasim"
provider="$build/provider/libhcasim-rdmav34.so"
here="$(dirname "${BASH_SOURCE[0]}")"
if [ -z "$build_given" ] && [ -x "$here/hcasim" ]; then  # installed beside the program
    hcasim="$(cd "$here" && pwd)/hcasim"
    provider="$(cd "$here/.." && pwd)/lib/hcasim/libhcasim-rdmav34.so"
fi
for f in "$hcasim" "$provider"; do
    [ -e "$f" ] || { echo "with-simhca.sh: $f is missing: build first (scripts/demo.sh), with libibverbs-dev installed" >&2; exit 2; }
done

# libibverbs opens /dev/infiniband/uverbsN and insists on a character device.
want=${nodes:-8}
if [ ! -e /dev/infiniband/uverbs$((want - 1)) ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "with-simhca.sh: /dev/infiniband/uverbs0..$((want - 1)) are missing; create them once as root:" >&2
        echo "  sudo mkdir -p /dev/infiniband && for i in \$(seq 0 $((want - 1))); do sudo ln -sf /dev/null /dev/infiniband/uverbs\$i; done" >&2
        exit 77  # ctest counts this as skipped
    fi
    mkdir -p /dev/infiniband
    for ((i = 0; i < want; i++)); do [ -e "/dev/infiniband/uverbs$i" ] || ln -sf /dev/null "/dev/infiniband/uverbs$i"; done
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/simhca.XXXXXX")"
server_pid=""
peer_pid=""
cleanup() {
    [ -n "$peer_pid" ] && kill "$peer_pid" 2>/dev/null || true
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

sock="$tmp/hcasim.sock"
"$hcasim" serve --socket "$sock" --sysfs "$tmp/sysfs" "${serve_args[@]}" > "$tmp/serve.log" 2>&1 &
server_pid=$!
for ((i = 0; i < 300; i++)); do
    [ -S "$sock" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
        cat "$tmp/serve.log" >&2
        echo "with-simhca.sh: hcasim serve did not start" >&2
        exit 2
    fi
    sleep 0.1
done
[ -S "$sock" ] || { cat "$tmp/serve.log" >&2; echo "with-simhca.sh: hcasim serve did not come up in 30 s" >&2; exit 2; }
head -1 "$tmp/serve.log" >&2

export SYSFS_PATH="$tmp/sysfs"
export RDMAV_DRIVERS="${provider%-rdmav34.so}"
export HCASIM_SOCKET="$sock"
export HCASIM_SERVER_PID="$server_pid"  # for tests of what applications see when the server dies
preload="$provider${LD_PRELOAD:+ $LD_PRELOAD}"

if [ -n "$peer" ]; then
    LD_PRELOAD="$preload" timeout "$timeout_s" nice -n "$nice_n" sh -c "$peer" &
    peer_pid=$!
    sleep "$peer_delay"
fi
status=0
LD_PRELOAD="$preload" timeout "$timeout_s" nice -n "$nice_n" "$@" || status=$?
if [ -n "$peer_pid" ]; then
    peer_status=0
    wait "$peer_pid" || peer_status=$?
    peer_pid=""
    [ "$status" -ne 0 ] || status=$peer_status
    [ "$peer_status" -eq 0 ] || echo "with-simhca.sh: the peer ($peer) exited with $peer_status" >&2
fi
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=""
tail -n +2 "$tmp/serve.log" >&2
exit "$status"
