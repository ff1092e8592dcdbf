#!/usr/bin/env bash
# Benchmarks (not tests): prints the model's headline figures and the simulator's speed and
# memory. Builds first like demo.sh. Takes a few minutes on 2 cores.
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
hcasim_setup
cd "$HCASIM_ROOT"
bin=build/release/testbench/hcasim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() {  # field FILE EXPR: a value from a stats JSON
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

echo "== RC WRITE bandwidth, 1 MiB, MTU 4096, EDR 4x (expected link payload rate 100 x 4096/4122 = 99.37 Gb/s)"
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" --workload write_bw --size 1M --iters 2000 \
    --stats-json "$tmp/bw.json" > /dev/null
read -r wall rss < "$tmp/time"
echo "bw_gbps            $(field "$tmp/bw.json" "d['results'][0]['bw_gbps']")"
echo "wire_packets       $(field "$tmp/bw.json" "d['sim']['wire_packets']")"
echo "packets/wall-s     $(field "$tmp/bw.json" "round(d['sim']['wire_packets_per_wall_s'])")"
echo "wall_s             $wall"
echo "max RSS            ${rss} KiB"

echo "== Simulator speed (issue 7): 4 KiB WRITE stream and 64 B message rate, 200000 WRITEs each;"
echo "   64 B over 16384 QPs (about 4 s, 3.5 GiB: QP setup dominates); 4 KiB through a 64-port switch"
echo "   (event-equivalents = this machine's raw SystemC timed-event rate / wire packets per wall second;"
echo "   each case runs 3 times, the run with the median figure is shown: wall times vary from run to run)"
speed_runs=3
speed_case() {  # speed_case LABEL ARGS...: prints the median run's --speed lines; appends "LABEL eq wall_per_packet"
    local label=$1 i eqs=() best
    shift
    for ((i = 0; i < speed_runs; i++)); do
        "$bin" "$@" --speed | grep '^ speed:' > "$tmp/speed.$i"
        eqs+=("$(grep -o '[0-9.]* event-equivalents' "$tmp/speed.$i" | cut -d' ' -f1) $i")
    done
    best=$(printf '%s\n' "${eqs[@]}" | sort -n | sed -n "$(((speed_runs + 1) / 2))p" | cut -d' ' -f2)
    sed "s/^ speed:/  $label:/" "$tmp/speed.$best"
    python3 - "$tmp/speed.$best" "$label" >> "$tmp/speed.summary" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"([0-9]+) packets per wall second", t)
e = re.search(r"([0-9.]+) event-equivalents", t)
print(sys.argv[2], e.group(1) if e else "nan", 1.0 / float(m.group(1)))
PY
}
: > "$tmp/speed.summary"
speed_case "4096 B" --workload write_bw --size 4096 --iters 200000
speed_case "64 B" --workload write_bw --size 64 --iters 200000
# --iters counts per QP: 12 x 16384 = 196,608 messages, about the other cases' 200,000.
speed_case "16K QPs" --workload write_bw --size 64 --qps 16384 --iters 12 --set hca.max_qps=32768
speed_case "64 nodes" --workload write_bw --size 4096 --iters 200000 --config configs/two-nodes-switch.ini \
    --set fabric.nodes=64
python3 - "$tmp/speed.summary" <<'PY'
import sys
rows = [l.rsplit(None, 2) for l in open(sys.argv[1]) if l.strip()]
base = next(float(w) for label, eq, w in rows if label == "4096 B")
print("   targets: 4 KiB stream at most 12 event-equivalents; 16K QPs and 64 nodes within 25% of it")
for label, eq, w in rows:
    ratio = float(w) / base
    if label == "4096 B":
        verdict = "met" if float(eq) <= 12 else "not met" if eq != "nan" else "event rate not measured"
        print(f"  {label:9} {float(eq):6.1f} event-equivalents: {verdict}")
    elif label in ("16K QPs", "64 nodes"):
        verdict = "met" if ratio <= 1.25 else "not met"
        print(f"  {label:9} {float(eq):6.1f} event-equivalents, {ratio:.2f} x the 4 KiB stream's wall time per wire packet: {verdict}")
    else:
        print(f"  {label:9} {float(eq):6.1f} event-equivalents, {ratio:.2f} x the 4 KiB stream")
PY
echo "   instructions per wire packet: scripts/profile.sh (callgrind; docs/calibration.md, Simulator speed)"

echo "== Fabric (issue 29): credit-based links on every cable (the default). Instructions per wire packet"
echo "   (scripts/profile.sh, callgrind; deterministic) of the 2-node 4 KiB stream and of alltoall 4 KiB on a"
echo "   64-node 2-level fat tree (radix 16: 9 leaves, 8 spines); then a 1,024-node 3-level fat tree"
echo "   (radix 32: 65 leaves, 80 spines, 256 cores) running permutation for about 1 ms of simulated time and"
echo "   alltoall with 2 messages per flow (1,023 RC QPs out and in per node; 6 to 17 minutes)"
ft64=(--workload alltoall --size 4K --iters 20 --set fabric.topology=fat_tree --set fabric.nodes=64
      --set fabric.switch.radix=16)
if command -v valgrind > /dev/null; then
    ipp() {  # ipp ARGS...: instructions per wire packet (difference of the two runs)
        scripts/profile.sh --bin "$bin" --top 1 "$@" | grep -o 'difference of the two runs): [0-9]*' | grep -o '[0-9]*$'
    }
    s2=$(ipp --workload write_bw --size 4096 --iters 20000)
    s64=$(ipp "${ft64[@]}")
    python3 - "$s2" "$s64" <<'PY'
import sys
s2, s64 = map(int, sys.argv[1:])
base = 6632  # the 4 KiB stream before credits (docs/calibration.md, commit bda62ac)
print(f"  2-node 4 KiB stream   {s2} instructions per wire packet, {s2 / base:.3f} x before credits "
      f"({base}): target at most 1.10: {'met' if s2 <= 1.10 * base else 'not met'}")
print(f"  64-node fat tree      {s64} instructions per wire packet, {s64 / s2:.2f} x the 2-node stream: "
      f"target at most 1.5: {'met' if s64 <= 1.5 * s2 else 'not met'}")
PY
else
    echo "  instructions per wire packet: valgrind is not installed (scripts/profile.sh needs it)"
fi
# No --stats-json: writing the fabric's million counters takes longer than the run.
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" --workload permutation --size 4K --iters 114 \
    --set fabric.topology=fat_tree --set fabric.fat_tree.levels=3 --set fabric.nodes=1024 --set fabric.switch.radix=32 \
    --speed > "$tmp/ft.txt"
read -r wall rss < "$tmp/time"
echo "  1,024 nodes: permutation 4 KiB, --iters 114 (1,024 flows; about 1 ms: the slowest flows share links)"
grep -E '^ simulated time|^ permutation:|^ speed: ([0-9]|max RSS)' "$tmp/ft.txt" | sed 's/^ /  /'
echo "  wall_s             $wall (build, setup, traffic and exit: the exit alone takes minutes, docs/calibration.md)"
echo "  max RSS            ${rss} KiB, $((rss / 1024)) KiB per node"
# alltoall: 2,095,104 QPs (hca.max_qps 4096 per node), 2 WRs per send queue (its ring 128 bytes).
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" --workload alltoall --size 4K --iters 2 --set workload.tx_depth=2 \
    --set hca.max_qps=4096 --set fabric.topology=fat_tree --set fabric.fat_tree.levels=3 --set fabric.nodes=1024 \
    --set fabric.switch.radix=32 --speed > "$tmp/a2a.txt"
read -r wall rss < "$tmp/time"
echo "  1,024 nodes: alltoall 4 KiB, --iters 2 (1,047,552 flows)"
grep -E '^ simulated time|^ alltoall:|^ speed: ([0-9]|max RSS)' "$tmp/a2a.txt" | sed 's/^ /  /'
echo "  wall_s             $wall (build, QP setup, traffic and exit)"
echo "  max RSS            ${rss} KiB, $((rss / 1024)) KiB per node"

echo "== Partitioned fabric (issue 32): a 256-node fat tree (radix 36: 15 leaves, 18 spines) alltoall 4 KiB,"
echo "   --iters 4, in one process and under mpirun -np 2 (outputs identical; wall time and parallel efficiency)"
if command -v mpirun > /dev/null; then
    p256=(--workload alltoall --size 4K --iters 4 --set fabric.topology=fat_tree --set fabric.nodes=256)
    /usr/bin/time -f "%e" -o "$tmp/t1" "$bin" "${p256[@]}" > "$tmp/p1.txt"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /usr/bin/time -f "%e" -o "$tmp/t2" \
        mpirun --oversubscribe -np 2 "$bin" "${p256[@]}" > "$tmp/p2.txt" 2> "$tmp/p2.err"
    cmp -s "$tmp/p1.txt" "$tmp/p2.txt" && same="identical" || same="DIFFERENT"
    grep -E '^ simulated time' "$tmp/p1.txt" | sed 's/^ /  /'
    grep -o 'partitioned over.*' "$tmp/p2.err" | sed 's/^/  /'
    python3 - "$(cat "$tmp/t1")" "$(cat "$tmp/t2")" "$same" <<'PY'
import sys
t1, t2, same = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(f"  1 rank {t1:.1f} s, 2 ranks {t2:.1f} s: speed-up {t1 / t2:.2f}, parallel efficiency {t1 / (2 * t2):.0%}; stdout {same}")
PY
else
    echo "  mpirun is not installed (openmpi-bin)"
fi

echo "== RTL co-simulation (issues 8, 34): 64 B SENDs on 2 QPs, 100000 each; one unit at a time as RTL"
echo "   (every node's; the P_Key checker checks each received packet, the CQ writer writes each CQE;"
echo "   CPU seconds, user + system, so a loaded machine does not skew the ratios)"
cosim_base=""
for unit_impl in all:tlm pkey_checker:rtl pkey_checker:both cq_writer:rtl cq_writer:both; do
    unit=${unit_impl%%:*} impl=${unit_impl##*:}
    set_args=()
    [[ $unit != all ]] && set_args=(--set "hca.$unit.impl=$impl")
    /usr/bin/time -f "%U %S" -o "$tmp/cosim.time" "$bin" --workload send_bw --size 64 --qps 2 --iters 100000 \
        "${set_args[@]}" --stats-json "$tmp/cosim.json" > /dev/null
    line=$(python3 - "$tmp/cosim.json" "$tmp/cosim.time" "$unit" "$impl" "$cosim_base" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["counters"]
user, sys_ = map(float, open(sys.argv[2]).read().split()[-2:])
cpu = user + sys_
unit, impl, base = sys.argv[3], sys.argv[4], sys.argv[5]
n = lambda key: sum(v for k, v in j.items() if k.endswith(key))
packets = n(".link.packets")
txn = {"pkey_checker": n(".hca.pkey_checker.checked"), "cq_writer": n(".hca.cq_writer.cqes")}.get(unit, 0)
cycles = n(f".hca.{unit}.rtl_cycles") if unit != "all" else 0
label = "every unit TLM" if unit == "all" else f"{unit} {impl}"
extra = f" ({float(base) and cpu / float(base):.1f} x); {txn} transactions, {cycles / txn:.1f} RTL cycles each" if txn else ""
print(f"{cpu}|  {label:18} {cpu:6.2f} CPU s, {packets / cpu:>9.0f} wire packets per CPU second{extra}")
PY
)
    [[ -z $cosim_base ]] && cosim_base=${line%%|*}
    echo "${line#*|}"
done

echo "== Latency breakdown (issue 7): where write_lat 2 B goes, one way, us"
"$bin" --workload write_lat --size 2 --iters 1000 | grep '^ breakdown' | tr ';' '\n' | sed 's/^ */  /'

echo "== qp_scale (issue 7): 64 B WRITE and READ message rate vs QPs (one process per point; about 30 s)"
"$bin" --workload qp_scale | sed -n '/qp_scale: message rate/,$p'

echo "== RC READ bandwidth, 1 MiB, and atomic message rate (FETCH_AND_ADD, 8 B, one QP and four)"
"$bin" --workload read_bw --size 1M --iters 2000 --stats-json "$tmp/rbw.json" > /dev/null
printf '%-19s%s\n' "read_bw_gbps" "$(field "$tmp/rbw.json" "d['results'][0]['bw_gbps']")"
for q in 1 4; do
    "$bin" --workload atomic_rate --qps "$q" --iters $((20000 / q)) --stats-json "$tmp/ar.json" > /dev/null
    printf '%-19s%s\n' "atomic_mpps q$q" "$(field "$tmp/ar.json" "d['results'][0]['msg_rate_mpps']")"
done

echo "== Latency, typical, us (write/send: half the round trip, read/atomic: the whole round trip)"
for w in write_lat send_lat read_lat; do
    "$bin" --workload "$w" --size 2 --iters 1000 --stats-json "$tmp/lat.json" > /dev/null
    printf '%-19s%s\n' "$w 2 B" "$(field "$tmp/lat.json" "d['results'][0]['lat_typical_us']")"
done
"$bin" --workload atomic_lat --iters 1000 --stats-json "$tmp/lat.json" > /dev/null
printf '%-19s%s\n' "atomic_lat 8 B" "$(field "$tmp/lat.json" "d['results'][0]['lat_typical_us']")"

echo "== UD and UC (issue 5): UD SEND latency 2 B, UD SEND and UC WRITE bandwidth, multicast to 15 receivers"
"$bin" --workload ud_send_lat --size 2 --iters 1000 --stats-json "$tmp/ud.json" > /dev/null
printf '%-19s%s\n' "ud_send_lat 2 B" "$(field "$tmp/ud.json" "d['results'][0]['lat_typical_us']")"
"$bin" --workload ud_send_bw --size 4K --iters 2000 --stats-json "$tmp/ud.json" > /dev/null
printf '%-19s%s\n' "ud_send_bw 4K" "$(field "$tmp/ud.json" "d['results'][0]['bw_gbps']")"
"$bin" --workload uc_write_bw --size 1M --iters 200 --stats-json "$tmp/uc.json" > /dev/null
printf '%-19s%s\n' "uc_write_bw 1M" "$(field "$tmp/uc.json" "d['results'][0]['bw_gbps']")"
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" --workload mcast_bw --size 4K --iters 1000 --set fabric.nodes=16 \
    --stats-json "$tmp/mc.json" > /dev/null
read -r wall rss < "$tmp/time"
printf '%-19s%s\n' "mcast_bw 4K x15" "$(field "$tmp/mc.json" "d['results'][0]['bw_gbps']")"
printf '%-19s%s\n' "  delivered" "$(field "$tmp/mc.json" "d['results'][0].get('datagrams_delivered')")"
echo "  wall_s           $wall (16 nodes)"

echo "== Shared receive queue (issue 6): SEND into one SRQ shared by 16 QPs, RC (srq_bw) and UD (ud_srq_bw)"
for sz in 64 4K 64K; do
    "$bin" --workload srq_bw --size "$sz" --iters 2000 --stats-json "$tmp/srq.json" > /dev/null
    printf '%-19s%s Gb/s, %s Mpps, %s RNR NAKs\n' "srq_bw $sz" "$(field "$tmp/srq.json" "round(d['results'][0]['bw_gbps'], 2)")" \
        "$(field "$tmp/srq.json" "round(d['results'][0]['msg_rate_mpps'], 3)")" \
        "$(field "$tmp/srq.json" "d['results'][0]['srq']['rnr_naks_sent']")"
done
"$bin" --workload ud_srq_bw --size 4K --iters 2000 --stats-json "$tmp/srq.json" > /dev/null
printf '%-19s%s\n' "ud_srq_bw 4K" "$(field "$tmp/srq.json" "d['results'][0]['bw_gbps']")"

echo "== Reliable datagram (issue 33): RD SEND latency 2 B against RC's; rd_send_bw 4 QPs through 1 and 4 EE contexts"
"$bin" --workload rd_send_lat --size 2 --iters 1000 --stats-json "$tmp/rd.json" > /dev/null
printf '%-19s%s\n' "rd_send_lat 2 B" "$(field "$tmp/rd.json" "d['results'][0]['lat_typical_us']")"
for e in 1 4; do
    "$bin" --workload rd_send_bw --size 4K --qps 4 --iters 500 --set workload.eecs="$e" --stats-json "$tmp/rd.json" > /dev/null
    printf '%-19s%s Gb/s, %s Mpps\n' "rd_send_bw 4K e$e" "$(field "$tmp/rd.json" "round(d['results'][0]['bw_gbps'], 2)")" \
        "$(field "$tmp/rd.json" "round(d['results'][0]['msg_rate_mpps'], 3)")"
done

echo "== PCIe DMA alone, Gen3 x8, MPS 256, MRRS 512 (calibration.md: write 52.92, read 53.69 Gb/s at >= 256 B)"
for w in dma_write_bw dma_read_bw; do
    "$bin" --workload "$w" --size 4K --iters 5000 --set pcie.lanes=8 --stats-json "$tmp/dma.json" > /dev/null
    echo "$w       $(field "$tmp/dma.json" "d['results'][0]['bw_gbps']")"
done

echo "== CQ moderation: 64 B message rate (Mpps) vs workload.cq_mod (one signaled WR in N; tx_depth 128)"
printf '%-8s%-12s%s\n' "cq_mod" "send_bw" "write_bw"
for n in 1 2 4 8 16 32 64 128; do
    for w in send_bw write_bw; do
        "$bin" --workload "$w" --size 64 --iters 20000 --set workload.cq_mod="$n" --stats-json "$tmp/$w.json" > /dev/null
    done
    printf '%-8s%-12s%s\n' "$n" "$(field "$tmp/send_bw.json" "round(d['results'][0]['msg_rate_mpps'], 3)")" \
        "$(field "$tmp/write_bw.json" "round(d['results'][0]['msg_rate_mpps'], 3)")"
done

echo "== Demo (no arguments)"
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" > /dev/null
read -r wall rss < "$tmp/time"
echo "wall_s             $wall"
echo "max RSS            ${rss} KiB"

echo "== Translation caches: mr_scale, WRITEs over N memory regions per node (both keys rotate)"
echo "   MPT cache 1024 entries, MTT cache 4096 lines of 8 entries, 4 ways, LRU (docs/calibration.md)"
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" --workload mr_scale \
    --mrs 1,256,1K,1088,1280,2K,4K,16K,32K,40K,64K --size 64,4K > "$tmp/mrs.txt"
sed -n '/^ #mrs /,/^---/p' "$tmp/mrs.txt" | sed '$d'
read -r wall rss < "$tmp/time"
echo "wall_s             $wall (about half of it allocates and registers the 2 x 64K regions)"

echo "== Message rate (issue 30): Connect-IB (configs/fdr-cib.ini), 60 B inline UD SEND, one QP per"
echo "   application thread, each on its own core (--sweep threads; link.width=8 stands in for its two ports)"
cib=(--config configs/fdr-cib.ini --workload msg_rate --set workload.op=ud_send --size 60
     --set workload.inline_bytes=60 --set cpu.cores=16 --set link.width=8)
"$bin" "${cib[@]}" --sweep threads=1,2,4,8,16 | sed -n '/^ #threads /,/^---/p' | sed '$d'
echo "  16 threads, doorbell batching of 16 (one MMIO per list, the HCA fetches the WQEs):"
"$bin" "${cib[@]}" --threads 16 --qps 16 --iters 4000 --set workload.post_list=16 --stats-json "$tmp/mr.json" > /dev/null
echo "  msg_rate_mpps      $(field "$tmp/mr.json" "round(d['results'][0]['msg_rate_mpps'], 2)")"
echo "  (points, fits and errors: python3 scripts/calibration.py, docs/calibration.md 'Message rate (issue 30)')"
if command -v valgrind > /dev/null; then
    t1=$(ipp --workload write_bw --size 64 --iters 20000)
    t16=$(ipp --workload write_bw --size 64 --qps 16 --threads 16 --set cpu.cores=16 --iters 1250)
    python3 - "$t1" "$t16" <<'PY'
import sys
t1, t16 = map(int, sys.argv[1:])
print(f"  64 B write_bw, 1 thread   {t1} instructions per wire packet")
print(f"  64 B write_bw, 16 threads {t16} instructions per wire packet, {t16 / t1:.3f} x one thread: "
      f"target at most 1.25: {'met' if t16 <= 1.25 * t1 else 'not met'}")
PY
fi

echo "== libibverbs applications on hcasim serve (issue 10; docs/libibverbs.md): wall time is the"
echo "   application's own figure, simulated time and packets the server's closing line"
if [ -x build/release/provider/libhcasim-rdmav34.so ] || [ -e build/release/provider/libhcasim-rdmav34.so ]; then
    for app in "ibv_rc_pingpong -s 4096 -n 1000|ibv_rc_pingpong" "ib_write_bw -s 65536 -n 5000|ib_write_bw" \
               "ib_send_lat -s 8 -n 1000|ib_send_lat"; do
        cmd="${app%%|*}"
        name="${app##*|}"
        command -v "$name" > /dev/null || { echo "  $name: not installed"; continue; }
        start=$(date +%s.%N)
        scripts/with-simhca.sh --peer "$cmd -d hcasim0 -p 19511" $cmd -d hcasim1 -p 19511 localhost > "$tmp/app.txt" 2>&1 || true
        end=$(date +%s.%N)
        echo "  $cmd: whole run $(python3 -c "print(round($end - $start, 2))") s wall"
        grep -E 'usec/iter|^ [0-9]+ +[0-9]+ ' "$tmp/app.txt" | head -2 | sed 's/^/    /'
        grep -E '^hcasim serve: stopped' "$tmp/app.txt" | sed 's/^/    /'
    done
else
    echo "  the provider was not built (libibverbs-dev missing)"
fi

echo "== libibverbs applications under load (issue 27): every Libibverbs.* test N rounds in a row, one"
echo "   busy loop per core at nice 0 (scripts/libibverbs-stress.sh). Each round takes about 5 minutes on"
echo "   2 cores (a latency pingpong at nice 10 next to the loops takes 1-2 minutes), so it runs only with"
echo "   HCASIM_STRESS_ROUNDS=N (the acceptance run of issue 27 is 20)"
if [ "${HCASIM_STRESS_ROUNDS:-0}" -gt 0 ] && [ -e build/release/provider/libhcasim-rdmav34.so ]; then
    scripts/libibverbs-stress.sh --rounds "$HCASIM_STRESS_ROUNDS" | sed 's/^/  /' || echo "  FAILED (see above)"
fi
