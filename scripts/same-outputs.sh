#!/usr/bin/env bash
# Checks that two hcasim binaries produce byte-identical outputs: a refactor's proof of "no
# behaviour change" (issue 28). Runs a matrix of runs (every workload family, a switch, a lossy
# link, 2,048 QPs, --verify, --sweep, every output file) with each binary in a directory of its
# own and compares stdout, exit status, stats JSON (wall-clock fields and "run" block removed),
# timeline, verbs trace, pcap and report CSV/JSON byte for byte.
#
# Usage: scripts/same-outputs.sh BASE_BIN NEW_BIN [--keep DIR] [--only REGEX]
#   BASE_BIN: e.g. a copy of build/release/testbench/hcasim built from the base commit
#   NEW_BIN:  default build/release/testbench/hcasim
# Prints one line per run (same|DIFFERS) and exits 1 if any run differs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,11p' "$0"; exit 2; }
base="$(realpath "$1")"; shift
new="$root/build/release/testbench/hcasim"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then new="$(realpath "$1")"; shift; fi
keep="" only=""
while [ $# -gt 0 ]; do
    case "$1" in
    --keep) keep="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "same-outputs.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
for b in "$base" "$new"; do [ -x "$b" ] || { echo "same-outputs.sh: '$b' is not an executable" >&2; exit 2; }; done
work="${keep:-$(mktemp -d)}"
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT

# name | arguments (outputs are added below)
runs=(
    "demo|"
    "write_lat|-w write_lat --size 8,4096 -n 200"
    "send_lat|-w send_lat --size 64,8192 -n 200 --verify"
    "read_lat|-w read_lat --size 64,65536 -n 100 --verify"
    "atomic_lat|-w atomic_lat -n 200 --atomic cmp_swap --verify"
    "write_bw|-w write_bw --size 64,4096,1M -n 300 --verify"
    "send_bw|-w send_bw --size 2-16K -n 100 --mtu 1024 --verify"
    "read_bw|-w read_bw --size 256,64K -n 100 -q 4 --verify"
    "atomic_rate|-w atomic_rate -n 500 -q 2"
    "ud_send_lat|-w ud_send_lat --size 64,2048 -n 200 --verify"
    "ud_send_bw|-w ud_send_bw --size 512,4096 -n 300 --verify"
    "mcast_bw|-w mcast_bw --size 1024 -n 200 --set fabric.nodes=4 --verify"
    "uc_write_bw|-w uc_write_bw --size 4096 -n 300 --verify"
    "rd_send_lat|-w rd_send_lat --size 64,8192 -n 100 --verify"
    "rd_send_bw|-w rd_send_bw --size 4096 -n 200 -q 4 --set workload.eecs=2 --verify"
    "srq_bw|-w srq_bw --size 1024 -n 200 --verify"
    "ud_srq_bw|-w ud_srq_bw --size 1024 -n 200 --verify"
    "mr_scale|-w mr_scale --mrs 1,64 -n 100"
    "dma_read_bw|-w dma_read_bw --size 4096 -n 200"
    "dma_write_bw|-w dma_write_bw --size 4096 -n 200"
    "attack_suite|-w attack_suite"
    "switch|-w write_bw --size 4096 -n 300 --set fabric.topology=switch --verify"
    "switch_config|-w send_bw --size 8192 -n 200 -c $root/configs/two-nodes-switch.ini --verify"
    "loss_rc|-w write_bw --size 65536 -n 200 --set link.drop_rate=0.01 --verify"
    "loss_read|-w read_bw --size 65536 -n 100 -q 2 --set link.drop_rate=0.02 --seed 7 --verify"
    "loss_send|-w send_bw --size 4096 -n 300 --set link.drop_rate=0.01 --seed 3 --verify"
    "qps2048|-w write_bw --size 64 -n 4 -q 2048 --set hca.max_qps=4096 --verify"
    "qps2048_read|-w read_bw --size 64 -n 2 -q 2048 --set hca.max_qps=4096"
    "sweep_qps|-w write_bw --size 64 -n 100 --sweep qps=1..64"
    "preset_cx7|-w write_bw --size 64,65536 -n 200 -c $root/configs/ndr-cx7.ini --verify"
    "preset_cx3|-w read_lat --size 4096 -n 100 -c $root/configs/fdr-cx3.ini"
)
# every regression trace, replayed (its own recording, timeline and pcap compared too)
for t in "$root"/traces/regression/*.jsonl; do
    [ -e "$t" ] || continue
    runs+=("replay_$(basename "$t" .jsonl)|replay $t --record r.trace --timeline t.json --pcap pcap")
done

# Removes the fields that measure the host's wall clock (they differ between any two runs) and
# the "run" block (version, command line with the binary's path, date).
strip_wall() {
    python3 - "$1" <<'EOF'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d.pop("run", None)
def walk(o):
    if isinstance(o, dict):
        return {k: walk(v) for k, v in o.items() if "wall" not in k}
    if isinstance(o, list):
        return [walk(v) for v in o]
    return o
json.dump(walk(d), open(p, "w"), indent=1, sort_keys=True)
EOF
}

differ=0
for entry in "${runs[@]}"; do
    name="${entry%%|*}" args="${entry#*|}"
    if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then continue; fi
    for side in base new; do
        bin="$base"; [ "$side" = new ] && bin="$new"
        d="$work/$name/$side"
        rm -rf "$d"; mkdir -p "$d"
        extra=()
        case "$name" in attack_suite | replay_*) ;; *) extra+=(--stats-json s.json) ;; esac
        case "$name" in
        write_lat | send_bw | loss_rc | switch | mcast_bw) extra+=(--pcap pcap --timeline t.json --record r.trace) ;;
        write_bw) extra+=(--record r.trace) ;;
        sweep_qps) extra+=(--report report) ;;
        esac
        # shellcheck disable=SC2086 # args is a word list
        (cd "$d" && set +e; "$bin" $args "${extra[@]}" > stdout 2> stderr; echo $? > status)
        for j in "$d/s.json" "$d/report/results.json"; do [ ! -f "$j" ] || strip_wall "$j"; done
        # wall-clock lines of the human-readable output
        sed -i -E '/wall|per second|slowdown/d' "$d/stdout"
    done
    if diff -r "$work/$name/base" "$work/$name/new" > "$work/$name/diff" 2>&1; then
        echo "same     $name (exit $(cat "$work/$name/new/status"))"
    else
        echo "DIFFERS  $name: see $work/$name/diff"; differ=1
        [ -n "$keep" ] || head -20 "$work/$name/diff"
    fi
done
exit "$differ"
