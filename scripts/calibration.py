#!/usr/bin/env python3
"""Regenerates (or checks) the generated tables of docs/calibration.md.

    python3 scripts/calibration.py [--hcasim PATH]            # rewrite the tables in the doc
    python3 scripts/calibration.py --check [--hcasim PATH]    # exit 1 if the doc is stale

Four blocks of docs/calibration.md sit between `<!-- BEGIN calibration.py NAME -->` and
`<!-- END calibration.py NAME -->` markers:

- `parameters`: every key each preset in configs/ sets, its value and the source written after
  it in the file (`key = value  # source`). Checked exactly.
- `points`: the model's output at each calibration point of the reference notes, its error,
  whether the point was fit (a preset parameter was set to meet it), is physics (the model
  implements the published formula) or is a prediction, and the tolerance fit and physics
  points must meet.
- `predictions`: the key outputs of every preset (latencies, bandwidths, atomic rate).
- `msgrate`: the message-rate points of issue 30 (Kalia et al., ATC 2016, Connect-IB) on
  `fdr-cib.ini`: each point's run, the model's figure, its error, and the parameter fit to it
  (fit points must meet their tolerance) or "prediction".

--check regenerates all four and fails if any number differs from the documented one by more
than --tolerance (relative, default 2%; error percentages: that many percentage points), if any
text differs, or if a fit or physics point misses its target by more than its tolerance.
Python 3 standard library only; runs the built hcasim (Release build: about 15 s on one core).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "calibration.md"
DEFAULT_HCASIM = ROOT / "build" / "release" / "testbench" / "hcasim"

# Preset files in the order the tables list them.
PRESETS = ["fdr-cx3", "fdr-cib", "edr-cx4-gen3x16", "edr-cx5", "edr-cx5-gen3x8", "hdr-cx6", "ndr-cx7", "two-nodes-switch"]

# Configurations of the predictions table: label, preset files loaded in order.
CONFIGS = [
    ("defaults (no preset)", []),
    ("`fdr-cx3.ini`", ["fdr-cx3"]),
    ("`fdr-cib.ini`", ["fdr-cib"]),
    ("`edr-cx4-gen3x16.ini`", ["edr-cx4-gen3x16"]),
    ("`edr-cx5.ini`", ["edr-cx5"]),
    ("`edr-cx5-gen3x8.ini`", ["edr-cx5-gen3x8"]),
    ("`hdr-cx6.ini`", ["hdr-cx6"]),
    ("`ndr-cx7.ini`", ["ndr-cx7"]),
    ("`edr-cx5.ini` + `two-nodes-switch.ini`", ["edr-cx5", "two-nodes-switch"]),
]

# 4x data rates after encoding, Gb/s (reference notes; model/fabric/link.cpp).
LINK_GBPS = {"sdr": 8.0, "ddr": 16.0, "qdr": 32.0, "fdr": 4 * 14.0625 * 64 / 66, "edr": 100.0, "hdr": 200.0,
             "ndr": 400.0}
MTU = 4096  # hcasim's default --mtu; the tables use it for every preset
HEADERS = 26  # LRH 8 + BTH 12 + ICRC 4 + VCRC 2 per packet
RETH = 16


def read_preset(name):
    """[(key, value, source)] of configs/NAME.ini, keys with their section prefix."""
    rows, section = [], ""
    for lineno, raw in enumerate((ROOT / "configs" / (name + ".ini")).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line[1:line.index("]")].strip()
            continue
        m = re.match(r"([^=]+?)\s*=\s*(\S+)(?:\s+[#;]\s*(.*))?$", line)
        if not m:
            raise SystemExit(f"configs/{name}.ini:{lineno}: cannot parse '{raw}'")
        key = f"{section}.{m.group(1)}" if section else m.group(1)
        if not m.group(3):
            raise SystemExit(f"configs/{name}.ini:{lineno}: '{key}' has no source comment")
        rows.append((key, m.group(2), m.group(3).strip()))
    return rows


def preset_value(files, key, default):
    value = default
    for f in files:
        for k, v, _ in read_preset(f):
            if k == key:
                value = v
    return value


class Runner:
    def __init__(self, hcasim):
        self.hcasim = str(hcasim)
        self.runs = 0

    def results(self, files, args):
        """The stats JSON's results list of one hcasim run."""
        fd, path = tempfile.mkstemp(suffix=".json", prefix="calibration_")
        os.close(fd)
        cmd = [self.hcasim]
        for f in files:
            cmd += ["--config", str(ROOT / "configs" / (f + ".ini"))]
        cmd += args + ["--stats-json", path]
        try:
            p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
            with open(path) as fh:
                self.runs += 1
                return json.load(fh)["results"]
        finally:
            os.remove(path)

    def one(self, files, args, field):
        return self.results(files, args)[0][field]

    def dma(self, files, args, field):
        """A dma_*_bw run: the PCIe link alone has no link or HCA keys, so only the presets'
        pcie.* values are passed (as --set)."""
        sets = []
        for f in files:
            for k, v, _ in read_preset(f):
                if k.startswith("pcie."):
                    sets += ["--set", f"{k}={v}"]
        return self.one([], args + sets, field)


# ------------------------------------------------------------------------------ calibration points

def points(run):
    """Rows: dict(cls, figure, target, lo, hi, unit, model, kind, tol, param)."""
    rows = []

    def add(cls, figure, target_text, lo, hi, unit, model, kind, tol, param):
        rows.append(dict(cls=cls, figure=figure, target=target_text, lo=lo, hi=hi, unit=unit, model=model,
                         kind=kind, tol=tol, param=param))

    # Host: 64 B DMA read round trip = 64 B x 8 / bandwidth with one read outstanding.
    bw = run.dma(["edr-cx5-gen3x8"], ["--workload", "dma_read_bw", "--size", "64", "--iters", "200",
                                      "--set", "workload.dma_outstanding=1"], "bw_gbps")
    add("Xeon E5 v2-v4 host, Gen3 x8 (`edr-cx5-gen3x8.ini`)", "64 B DMA read round trip, median", "547-560 ns",
        547, 560, "ns", 512 / bw, "fit", 0.0, "`pcie.read_latency_ns` = 535 (every preset)")
    # HCA points.
    lat = run.one(["edr-cx4-gen3x16"], ["--workload", "send_lat", "--size", "32", "--iters", "1000"], "lat_typical_us")
    add("EDR, ConnectX-4, back to back, Gen3 x16 (`edr-cx4-gen3x16.ini`)", "ib_send_lat RC, 32 B inline, typical",
        "0.82 us", 0.82, 0.82, "us", lat, "fit", 0.02,
        "`hca.transport_engine.tx_latency_cycles` = `rx_latency_cycles` = 86 (default 64)")
    lat = run.one(["edr-cx5-gen3x8"], ["--workload", "write_lat", "--size", "8", "--iters", "1000"], "lat_typical_us")
    add("EDR, ConnectX-5, Gen3 x8 (`edr-cx5-gen3x8.ini`; measured on RoCE 100GbE)", "ib_write_lat 8 B, typical",
        "0.99 us", 0.99, 0.99, "us", lat, "predicted", None, "none")
    rate = run.one(["fdr-cx3"], ["--workload", "atomic_rate", "--iters", "20000"], "msg_rate_mpps")
    add("FDR, ConnectX-3, Gen3 x8 (`fdr-cx3.ini`)", "FETCH_AND_ADD on one address, one QP", "2.7 Mops", 2.7, 2.7,
        "Mops", rate, "predicted", None, "none")
    # The same point's "flat in thread count": 8 QPs aimed at the one word.
    rate = run.one(["fdr-cx3"], ["--workload", "atomic_rate", "--iters", "2500", "--qps", "8",  # 20,000 in all
                                 "--set", "workload.atomic_word=shared"], "msg_rate_mpps")
    add("FDR, ConnectX-3, Gen3 x8 (`fdr-cx3.ini`)", "FETCH_AND_ADD on one address, 8 QPs (`workload.atomic_word` = shared)",
        "2.7 Mops", 2.7, 2.7, "Mops", rate, "predicted", None, "none")
    # Physics the model implements: the SIGCOMM'18 PCIe table and the link goodput.
    for preset, label, wl, target in [("edr-cx5-gen3x8", "Gen3 x8", "dma_write_bw", 52.92),
                                      ("edr-cx5-gen3x8", "Gen3 x8", "dma_read_bw", 53.69),
                                      ("hdr-cx6", "Gen4 x16", "dma_write_bw", 207.91),
                                      ("hdr-cx6", "Gen4 x16", "dma_read_bw", 210.92)]:
        bw = run.dma([preset], ["--workload", wl, "--size", "4K", "--iters", "4000"], "bw_gbps")
        what = "write" if wl == "dma_write_bw" else "read"
        add(f"PCIe {label}, MPS 256, MRRS 512 (`{preset}.ini`)", f"DMA {what} bandwidth, 4 KiB transfers",
            f"{target:.2f} Gb/s", target, target, "Gb/s", bw, "physics", 0.01, "none (SIGCOMM'18 formula)")
    bw = run.one(["edr-cx5"], ["--workload", "write_bw", "--size", "1M", "--iters", "200"], "bw_gbps")
    add("EDR 4x, MTU 4096 (`edr-cx5.ini`)", "RC goodput: write_bw 1 MiB", "99.37 Gb/s", 99.37, 99.37, "Gb/s", bw,
        "physics", 0.005, "none (link rate and headers)")
    return rows


def point_error(r):
    """Relative error of the model against the target (0 inside a range)."""
    if r["lo"] <= r["model"] <= r["hi"]:
        return 0.0
    ref = r["lo"] if r["model"] < r["lo"] else r["hi"]
    return (r["model"] - ref) / ref


def fmt_model(value, unit):
    if unit == "us":
        return f"{value:.3f} us"
    if unit == "ns":
        return f"{value:.1f} ns"
    if unit == "Mops":
        return f"{value:.2f} Mops"
    return f"{value:.2f} {unit}"


def points_block(rows):
    out = ["| # | class and preset | figure | target | model | error | kind | tolerance | parameter set to meet it |",
           "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        out.append(f"| {i} | {r['cls']} | {r['figure']} | {r['target']} | {fmt_model(r['model'], r['unit'])} | "
                   f"{error_text(r)} | {r['kind']} | {tolerance_text(r)} | {r['param']} |")
    return out


def error_text(r):
    err = point_error(r)
    return "in range" if r["lo"] != r["hi"] and err == 0 else f"{err * 100:+.2f}%".replace("-0.00%", "+0.00%")


def tolerance_text(r):
    if r["tol"] is None:
        return "none (prediction)"
    return "in range" if r["tol"] == 0 else f"±{r['tol'] * 100:g}%"


# ------------------------------------------------------------------------------ message rate (issue 30)

# Points 3-5 and 7 run many cores (--threads, each thread on its own core and QPs) and both
# Connect-IB ports' wire capacity as one 8x port (the model has one port per HCA; one FDR 4x
# port carries at most 72.5 M 60-byte UD SENDs/s, below points 3-5).
KALIA = "Kalia ATC 2016"
MANY = ["--threads", "16", "--set", "cpu.cores=16", "--set", "link.width=8"]
UD60 = ["--workload", "msg_rate", "--set", "workload.op=ud_send", "--size", "60", "--set", "workload.inline_bytes=60"]
READ64 = ["--workload", "msg_rate", "--set", "workload.op=read", "--size", "64"]


def msg_points(run):
    """Rows as points() plus run (the command line's arguments after --config configs/fdr-cib.ini)
    and src. --iters counts per QP: 20,000 messages in all at 1, 4 and 8 QPs, 64,000 at 16 and 64 QPs."""
    rows = []

    def add(figure, src, target, args, kind, tol, param, unit="Mops"):
        model = run.one(["fdr-cib"], args, "msg_rate_mpps")
        rows.append(dict(cls="", figure=figure, src=src, target=f"{target} {unit}", lo=target, hi=target, unit=unit,
                         model=model, kind=kind, tol=tol, param=param, run=" ".join(args)))

    add("60 B UD SEND, one core, 1 QP", KALIA, 10.0, UD60 + ["--qps", "1", "--iters", "20000"], "fit", 0.02,
        "`hca.transport_engine.wqe_cycles` = 80")
    add("the same, 4 QPs", KALIA, 32.2, UD60 + ["--qps", "4", "--iters", "5000"], "fit", 0.02,
        "`cpu.build_wqe_ns` = 9")
    add("UD SEND, many cores, WQE by MMIO", KALIA, 80.0, UD60 + ["--qps", "16", "--iters", "4000"] + MANY,
        "predicted", None, "none")
    add("the same with the hardware's 128 B WQE (44 B inline)", KALIA, 80.0,
        UD60[:4] + ["--size", "44", "--set", "workload.inline_bytes=44", "--qps", "16", "--iters", "4000"] + MANY,
        "predicted", None, "none")
    add("UD SEND, many cores, doorbell batching of 16", KALIA, 101.6,
        UD60 + ["--qps", "16", "--iters", "4000", "--set", "workload.post_list=16"] + MANY, "predicted", None, "none")
    add("inbound RDMA READ, 64 B, many clients (one client node, 16 threads)", KALIA, 121.6,
        READ64 + ["--qps", "16", "--iters", "4000"] + MANY, "predicted", None, "none")
    add("atomics on one 8 B address", KALIA, 2.24,
        ["--workload", "atomic_rate", "--qps", "8", "--iters", "2500", "--set", "workload.atomic_word=shared"],
        "predicted", None, "none")
    add("atomics spread over >= 4096 addresses (64 here: one per QP)", KALIA, 52.0,
        ["--workload", "atomic_rate", "--qps", "64", "--iters", "1000"] + MANY, "predicted", None, "none")
    add("one thread, outbound 64 B RC READs, 1 QP", "efficient/fasst dct-bench README", 10.7,
        READ64 + ["--qps", "1", "--iters", "20000"], "predicted", None, "none")
    return rows


def msgrate_block(rows):
    out = ["| # | point (Connect-IB, Gen3 x16) | source | target | `hcasim --config configs/fdr-cib.ini` ... | model "
           "| error | kind | tolerance | parameter fit |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        out.append(f"| {i} | {r['figure']} | {r['src']} | {r['target']} | `{r['run']}` | {fmt_model(r['model'], r['unit'])}"
                   f" | {error_text(r)} | {r['kind']} | {tolerance_text(r)} | {r['param']} |")
    return out


# ----------------------------------------------------------------------------------- predictions

def bounds(run, files):
    """(link goodput, PCIe DMA write at 4 KiB) in Gb/s for 1 MiB RC WRITEs at MTU 4096."""
    speed = preset_value(files, "link.speed", "edr")
    width = int(preset_value(files, "link.width", "4"))
    size, packets = 1 << 20, (1 << 20) // MTU
    link = LINK_GBPS[speed] * width / 4 * size / (size + packets * HEADERS + RETH)
    pcie = run.dma(files, ["--workload", "dma_write_bw", "--size", "4K", "--iters", "20000"], "bw_gbps")
    return link, pcie


def predictions(run):
    rows = []
    for label, files in CONFIGS:
        r = {"label": label}
        for wl, size, key in [("write_lat", "2", "write_lat"), ("send_lat", "2", "send_lat"),
                              ("read_lat", "2", "read_lat"), ("atomic_lat", "8", "atomic_lat")]:
            r[key] = run.one(files, ["--workload", wl, "--size", size, "--iters", "1000"], "lat_typical_us")
        r["write_bw_4k"] = run.one(files, ["--workload", "write_bw", "--size", "4K", "--iters", "1000"], "bw_gbps")
        r["write_bw_1m"] = run.one(files, ["--workload", "write_bw", "--size", "1M", "--iters", "200"], "bw_gbps")
        r["link"], r["pcie"] = bounds(run, files)
        r["read_bw_1m"] = run.one(files, ["--workload", "read_bw", "--size", "1M", "--iters", "200"], "bw_gbps")
        r["atomic_rate"] = run.one(files, ["--workload", "atomic_rate", "--iters", "20000"], "msg_rate_mpps")
        rows.append(r)
    return rows


def predictions_block(rows):
    out = ["| configuration | write_lat 2 B | send_lat 2 B | read_lat 2 B | atomic_lat 8 B | write_bw 4 KiB | "
           "write_bw 1 MiB | bound: link / PCIe write | read_bw 1 MiB | atomic_rate, one word |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bound = min(r["link"], r["pcie"])
        which = "link" if r["link"] <= r["pcie"] else "PCIe"
        out.append(f"| {r['label']} | {r['write_lat']:.3f} | {r['send_lat']:.3f} | {r['read_lat']:.3f} | "
                   f"{r['atomic_lat']:.3f} | {r['write_bw_4k']:.2f} | {r['write_bw_1m']:.2f} | "
                   f"{r['link']:.2f} / {r['pcie']:.2f} ({which}; model {r['write_bw_1m'] / bound * 100:.1f}%) | "
                   f"{r['read_bw_1m']:.2f} | {r['atomic_rate']:.2f} |")
    return out


# ------------------------------------------------------------------------------------ parameters

def parameters_block():
    out = ["| preset | key | value | source |", "|---|---|---|---|"]
    for p in PRESETS:
        for key, value, source in read_preset(p):
            out.append(f"| `{p}.ini` | `{key}` | {value} | {source} |")
    return out


# ------------------------------------------------------------------------------------ doc blocks

def marker(name, end=False):
    return f"<!-- {'END' if end else 'BEGIN'} calibration.py {name} -->"


def split_doc(text, name):
    b, e = marker(name), marker(name, True)
    if text.count(b) != 1 or text.count(e) != 1 or text.index(b) > text.index(e):
        raise SystemExit(f"{DOC}: expected one '{b}' ... '{e}' block")
    head, rest = text.split(b + "\n", 1)
    body, tail = rest.split(e, 1)
    return head, body.splitlines(), tail


NUM = re.compile(r"([+-]?\d+(?:\.\d+)?)(%?)")


def compare_lines(name, doc, new, tol):
    """Differences between the documented and the regenerated lines of one block."""
    problems = []
    if len(doc) != len(new):
        return [f"{name}: {len(doc)} documented lines, {len(new)} regenerated"]
    for d, n in zip(doc, new):
        if tol is None:
            if d != n:
                problems.append(f"{name}: documented\n    {d}\n  regenerated\n    {n}")
            continue
        dt, nt = NUM.split(d), NUM.split(n)
        if len(dt) != len(nt) or dt[0::3] != nt[0::3] or dt[2::3] != nt[2::3]:
            problems.append(f"{name}: text differs\n    {d}\n    {n}")
            continue
        for dv, nv, pct in zip(dt[1::3], nt[1::3], dt[2::3]):
            a, b = float(dv), float(nv)
            bad = abs(a - b) > tol * 100 if pct else abs(a - b) > tol * max(abs(a), abs(b)) + 1e-12
            if bad:
                problems.append(f"{name}: {dv} documented, {nv} regenerated (tolerance "
                                f"{'%g percentage points' % (tol * 100) if pct else '%g%%' % (tol * 100)})\n"
                                f"    {d}\n    {n}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hcasim", default=str(DEFAULT_HCASIM), help="the hcasim binary (default: the release build)")
    ap.add_argument("--check", action="store_true", help="compare with docs/calibration.md instead of writing it")
    ap.add_argument("--tolerance", type=float, default=0.02, help="relative tolerance of --check (default 0.02)")
    args = ap.parse_args()
    if not Path(args.hcasim).is_file():
        raise SystemExit(f"hcasim not found at {args.hcasim}: build it (cmake --build --preset release) or pass --hcasim")

    run = Runner(args.hcasim)
    point_rows = points(run)
    msg_rows = msg_points(run)
    blocks = [("parameters", parameters_block(), None),
              ("points", points_block(point_rows), args.tolerance),
              ("predictions", predictions_block(predictions(run)), args.tolerance),
              ("msgrate", msgrate_block(msg_rows), args.tolerance)]

    problems = []
    for r in point_rows + msg_rows:
        if r["tol"] is not None and abs(point_error(r)) > r["tol"]:
            problems.append(f"calibration point '{r['figure']}' ({r['cls']}): model {fmt_model(r['model'], r['unit'])}"
                            f" against {r['target']}, error {point_error(r) * 100:+.2f}% beyond its tolerance")
    text = DOC.read_text()
    for name, lines, tol in blocks:
        head, doc_lines, tail = split_doc(text, name)
        if args.check:
            problems += compare_lines(name, doc_lines, lines, tol)
        else:
            text = head + marker(name) + "\n" + "\n".join(lines) + "\n" + marker(name, True) + tail
    if not args.check:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)} ({run.runs} hcasim runs)")
    for p in problems:
        print("calibration.py: " + p, file=sys.stderr)
    if problems and args.check:
        print("calibration.py: docs/calibration.md is stale or a calibration point is out of tolerance; run "
              "`python3 scripts/calibration.py` to regenerate the tables (and say why the numbers moved)",
              file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
