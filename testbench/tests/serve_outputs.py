#!/usr/bin/env python3
"""`hcasim serve --stats-json --pcap --timeline --record` under ibv_rc_pingpong (docs/libibverbs.md).

Starts the server with the outputs, runs an ibv_rc_pingpong pair of ITERS iterations through the
provider, stops the server with SIGTERM and checks what it wrote: the stats JSON's "run" block,
counters and config, an ops entry per QP and opcode (SEND and RECV on both nodes, ITERS each,
with simulated latencies), the wire capture's packets, the timeline's JSON, the closing
summary, and that `hcasim replay` replays the recorded trace with the same outcome. With "xrc"
it runs ibv_xsrq_pingpong instead and checks the recorded trace's XRC (a domain, an XRC SRQ, a
target and an initiator QP on each node, every post naming the peer's SRQ) and that it replays
equal. Usage: serve_outputs.py HCASIM PROVIDER_SO PORT [xrc]. Exit 0: passed, 1: failed, 77: no
/dev/infiniband nodes (skipped).
"""
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

ITERS = 20


def fail(why, *logs):
    print("FAILED:", why)
    for log in logs:
        print(log)
    sys.exit(1)


def pcap_records(path):
    """Packets in a classic pcap file (nanosecond variant), counted by walking its records."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24 or struct.unpack_from("<I", data, 0)[0] != 0xA1B23C4D:
        fail(path + ": not a nanosecond pcap file")
    n, at = 0, 24
    while at + 16 <= len(data):
        incl = struct.unpack_from("<I", data, at + 8)[0]
        at += 16 + incl
        n += 1
    if at != len(data):
        fail(path + ": a record runs past the end of the file")
    return n


def check_xrc_record(rec):
    """Each node: a domain, an XRC SRQ in it, a target and an initiator; each post names the SRQ
    of the other node; the SRQs' receive completions are polled on their CQs."""
    records = [json.loads(line) for line in open(rec) if line.startswith("{")]
    for node in (0, 1):
        mine = [r for r in records if r.get("node") == node and "call" in r]
        kinds = [(r["call"], r.get("type")) for r in mine]
        for want in (("open_xrcd", None), ("create_srq", "XRC"), ("create_qp", "XRC_RECV"),
                     ("create_qp", "XRC_SEND"), ("close_xrcd", None)):
            if want not in kinds:
                fail("node%d: no %s %s in the record" % ((node,) + want))
        srqs = [r["ret"] for r in mine if r["call"] == "create_srq"]
        for r in mine:
            if r["call"] == "post_send" and [w.get("remote_srq") for w in r["wr"]] != ["%d/%s" % (1 - node, srqs[0])]:
                fail("node%d: a post that does not name the other node's SRQ" % node, json.dumps(r))
        if not any(r["call"] == "poll_cq" and r["wc"][0]["opcode"] == "RECV" for r in mine):
            fail("node%d: no receive completion in the record" % node)


def main():
    hcasim, provider, port = sys.argv[1], sys.argv[2], sys.argv[3]
    xrc = sys.argv[4:] == ["xrc"]
    if not os.path.exists("/dev/infiniband/uverbs1"):
        print("no /dev/infiniband/uverbs0..1 (scripts/with-simhca.sh says how to make them): skipped")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="serve_outputs.")
    sock, stats, caps, tl, rec = (os.path.join(tmp, f)
                                  for f in ("hcasim.sock", "stats.json", "caps", "tl.json", "rec.jsonl"))
    out = open(os.path.join(tmp, "serve.out"), "w+")
    server = subprocess.Popen([hcasim, "serve", "--socket", sock, "--sysfs", os.path.join(tmp, "sysfs"),
                               "--stats-json", stats, "--pcap", caps, "--timeline", tl, "--record", rec],
                              stdout=out, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if os.path.exists(sock) or server.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(sock):
            out.seek(0)
            fail("the server did not come up", out.read())
        env = dict(os.environ, SYSFS_PATH=os.path.join(tmp, "sysfs"), HCASIM_SOCKET=sock,
                   RDMAV_DRIVERS=provider[:-len("-rdmav34.so")], LD_PRELOAD=provider)
        cmd = ["nice", "-n", "10", "ibv_xsrq_pingpong" if xrc else "ibv_rc_pingpong", "-p", port, "-n",
               str(ITERS)] + ([] if xrc else ["-c"])
        peer = subprocess.Popen(cmd + ["-d", "hcasim0"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        client = subprocess.run(cmd + ["-d", "hcasim1", "localhost"], env=env, capture_output=True, text=True,
                                timeout=120)
        peer_out = peer.communicate(timeout=120)[0]
        if client.returncode or peer.returncode:
            fail(cmd[3] + " failed", client.stdout, client.stderr, peer_out)
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=60)
        out.seek(0)
        log = out.read()
        if status != 0:
            fail("the server exited with %d" % status, log)

        j = json.load(open(stats))
        for k in ("run", "workload", "sim", "counters", "config", "serve", "clients"):
            if k not in j:
                fail("stats JSON without '%s'" % k, list(j))
        if j["workload"] != "serve" or j["run"]["command_line"][:2] != [hcasim, "serve"]:
            fail("the run block or workload", json.dumps(j["run"]), j["workload"])
        packets = sum(v for k, v in j["counters"].items() if k.endswith("hca.port.tx_packets"))
        if packets == 0 or j["sim"]["wire_packets"] != packets:
            fail("wire packets %d, counters say %d" % (j["sim"]["wire_packets"], packets))
        if j["config"].get("fabric.nodes") != "2":
            fail("config: fabric.nodes is %r" % j["config"].get("fabric.nodes"))
        ops = j["clients"]["ops"]
        for node in (0, 1) if not xrc else ():
            for opcode in ("SEND", "RECV"):
                e = [o for o in ops if o["node"] == node and o["opcode"] == opcode]
                if len(e) != 1 or e[0]["count"] != ITERS:
                    fail("node%d %s: expected one QP with %d operations" % (node, opcode, ITERS), json.dumps(ops))
                o = e[0]
                if not 0 < o["lat_min_us"] <= o["lat_median_us"] <= o["lat_p99_us"] <= o["lat_max_us"]:
                    fail("node%d %s: min <= median <= p99 <= max > 0" % (node, opcode), json.dumps(o))
                if not o["lat_min_us"] <= o["lat_avg_us"] <= o["lat_max_us"] or not o["exact"]:
                    fail("node%d %s: the mean between min and max, exact quantiles" % (node, opcode), json.dumps(o))
                # A SEND completes when its ACK is back: a round trip of the model, about 2 us
                # (not the thousands of us of wall time the pingpong prints).
                if opcode == "SEND" and not (0.5 < o["lat_median_us"] and o["lat_max_us"] < 100):
                    fail("node%d SEND: not a simulated round trip" % node, json.dumps(o))
                line = " node%d QP 0x%06x (pid %d): %-18s %8d ops, median %.3f us" % (
                    node, o["qp_num"], o["pid"], opcode, ITERS, o["lat_median_us"])
                if line not in log:
                    fail("the summary lacks: " + line, log)
        if j["clients"]["unmatched"] != 0 or j["clients"]["error_completions"] != 0:
            fail("unmatched or failed completions", json.dumps(j["clients"]))

        n = pcap_records(os.path.join(caps, "link0.pcap"))
        if n != packets or (" pcap: %s/link0.pcap (%d packets)" % (caps, n)) not in log:
            fail("link0.pcap holds %d packets, the counters %d" % (n, packets), log)
        events = json.load(open(tl))
        names = {e.get("name") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
        for name in ("doorbell", "completion"):
            if name not in names:
                fail("the timeline has no '%s' event" % name)
        # XRC: each side moves its target QP to RTS while the other may already be sending, so
        # whether the first message finds it in RTR (a COMM_EST event) depends on the recorded
        # times: the replay keeps them (asap replays could order that race the other way).
        timing = ["--timing", "recorded"] if xrc else []
        replay = subprocess.run([hcasim, "replay", rec] + timing, capture_output=True, text=True, timeout=300)
        calls = sum(1 for line in open(rec) if '"call":"post_send"' in line)
        if replay.returncode != 0 or "equal to the recording" not in replay.stdout or calls != 2 * ITERS:
            fail("the record (%d post_send calls) does not replay equal" % calls, replay.stdout, replay.stderr)
        if xrc:
            check_xrc_record(rec)
        print(log)
        print(replay.stdout)
        print("passed")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
