#!/usr/bin/env bash
# Instructions per simulated wire packet (issue 7, "Simulation speed"), measured with valgrind's
# callgrind (instruction counts do not depend on the machine's load, unlike wall times).
#
# Runs the workload twice under callgrind, with N and N/10 iterations, and divides the
# difference in instructions by the difference in wire packets: setup (elaboration, QP
# creation, memory registration) cancels out. Then prints the top functions of the long run by
# self instructions.
#
# Usage: scripts/profile.sh [--bin PATH] [--top K] [hcasim arguments...]
#   default arguments: --workload write_bw --size 4096 --iters 20000
#   e.g. scripts/profile.sh --workload write_bw --size 64 --iters 20000
#        scripts/profile.sh --workload alltoall --size 4K --iters 20 --set fabric.topology=fat_tree \
#            --set fabric.nodes=64 --set fabric.switch.radix=16   (any hcasim arguments pass through)
# The binary should carry symbols for readable function names: configure the build with
# -DCMAKE_CXX_FLAGS=-g (same code as without it). Needs valgrind (callgrind_annotate).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/build/release/testbench/hcasim"
top=25
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
[ ${#args[@]} -gt 0 ] || args=(--workload write_bw --size 4096 --iters 20000)
iters=1000
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in -n | --iters) iters="${args[$((i + 1))]}" ;; esac
done
short=$((iters / 10))
[ "$short" -ge 1 ] || short=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # run ITERS OUT: prints "instructions wire_packets"
    local a=("${args[@]}") i
    for ((i = 0; i < ${#a[@]}; i++)); do
        case "${a[$i]}" in -n | --iters) a[$((i + 1))]="$1" ;; esac
    done
    valgrind --tool=callgrind --callgrind-out-file="$2" "$bin" "${a[@]}" --stats-json "$tmp/s.json" \
        > /dev/null 2> "$tmp/vg.txt"
    local ir pk
    ir=$(grep -o 'refs: *[0-9,]*' "$tmp/vg.txt" | tr -d ', ' | cut -d: -f2)
    pk=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sim']['wire_packets'])" "$tmp/s.json")
    echo "$ir $pk"
}

read -r ir_long pk_long < <(run "$iters" "$tmp/long.out")
read -r ir_short pk_short < <(run "$short" "$tmp/short.out")
echo "hcasim ${args[*]}"
echo "  $iters iterations: $ir_long instructions, $pk_long wire packets"
echo "  $short iterations: $ir_short instructions, $pk_short wire packets"
python3 -c "
import sys
il, pl, is_, ps = map(int, sys.argv[1:])
if pl > ps:
    print(f'  instructions per wire packet (difference of the two runs): {(il - is_) / (pl - ps):.0f}')
print(f'  instructions per wire packet (long run, setup included): {il / max(pl, 1):.0f}')
" "$ir_long" "$pk_long" "$ir_short" "$pk_short"
echo "  top functions of the long run, self instructions:"
# (Read from a file, not a pipe into head: with pipefail, a writer cut short by head would
# make the script exit with SIGPIPE's status after printing everything.)
callgrind_annotate --auto=no --threshold=100 "$tmp/long.out" > "$tmp/annotate.txt" 2>/dev/null
awk -v top="$top" '/file:function/ {f = 1; next} f && NF && !/^-+$/ {print; if (++n >= top) exit}' "$tmp/annotate.txt" |
    sed -E 's/ \[[^]]*\]$//; s/^/    /' | cut -c1-200
