#!/usr/bin/env python3
"""Reads a CQ writer stimulus dump (`hcasim --dump-stimulus hca.cq_writer=FILE`, format
`hcasim-stimulus cq_writer 1`, docs/cosim.md "Stimulus dumps") for a Python testbench such as
cocotb's: each record becomes a dict of ints (the pins' values) and, for CQEs and writes, the
bytes in memory order.

    from cq_stimulus import read
    for r in read("cq.node0.stim"):
        if r["kind"] == "C":
            dut.cmp_cqn.value = r["cqn"]
            dut.cmp_cqe.value = r["cqe"]          # the 512-bit pin value
            # r["cqe_bytes"]: the 64 bytes, byte 0 first

Run as a script, `cq_stimulus.py --canonical FILE` prints the records written back in the
format's own layout (what hcasim writes), which the tests compare with the file.
"""
import sys

MAGIC = "# hcasim-stimulus cq_writer 1"

# Per keyword: (field name, hex digits as written) after the time; "data" fields are the
# pins' values of 2 x len digits (CQE: 128).
FIELDS = {
    "C": [("tag", 2), ("cqn", 6), ("solicited", 1), ("cqe", 128)],
    "E": [("tag", 2), ("type", 2), ("subtype", 2), ("resource", 8)],
    "Q": [("op", 1), ("cqn", 6), ("base", 16), ("log_size", 2), ("eqn", 4), ("consumer", 6)],
    "V": [("eqn", 4), ("base", 16), ("log_size", 2)],
    "D": [("cqn", 6), ("consumer", 6), ("arm", 1)],
    "M": [("addr", 16), ("data", 8)],
    "W": [("addr", 16), ("len", 2), ("err", 1), ("data", None)],
    "A": [("tag", 2), ("written", 1), ("reason", 1), ("eqe", 1), ("msi", 1), ("disarmed", 1)],
}


class StimulusError(Exception):
    """A malformed dump: the message starts with FILE:LINE."""


def read(path):
    """The records of the dump at `path`, in file order, each a dict with "kind", "line", "time"
    (ps) and its fields as ints; C records also have "cqe_bytes", W records "data_bytes"."""
    records = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if n == 1:
                if line.rstrip() != MAGIC:
                    raise StimulusError(f"{path}:1: not a CQ writer stimulus dump of format 1")
                continue
            if line.startswith("#") or not line.strip():
                continue
            kw, *rest = line.split()
            if kw not in FIELDS or len(rest) != len(FIELDS[kw]) + 1:
                raise StimulusError(f"{path}:{n}: malformed record: {line.rstrip()}")
            try:
                r = {"kind": kw, "line": n, "time": int(rest[0], 10)}
                for (name, digits), text in zip(FIELDS[kw], rest[1:]):
                    r[name] = int(text, 16)
                    if digits is None:  # a write's data: exactly 2 x len digits
                        digits = 2 * r["len"]
                        if len(text) != digits:
                            raise ValueError(f"{name}: expected {digits} hex digits, got {len(text)}")
                    elif name == "cqe" and len(text) != digits:
                        raise ValueError(f"cqe: expected {digits} hex digits, got {len(text)}")
                    if r[name] >> (4 * digits):
                        raise ValueError(f"{name} {text} does not fit its pins")
            except ValueError as e:
                raise StimulusError(f"{path}:{n}: {e}") from None
            if kw == "C":
                r["cqe_bytes"] = r["cqe"].to_bytes(64, "little")
            if kw == "W":
                r["data_bytes"] = r["data"].to_bytes(r["len"], "little")
            records.append(r)
    return records


def canonical(r):
    """The record as hcasim writes it."""
    out = [r["kind"], str(r["time"])]
    for name, digits in FIELDS[r["kind"]]:
        if digits is None:  # a write's data: 2 x len digits
            digits = 2 * r["len"]
        out.append(format(r[name], f"0{digits}x"))
    return " ".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--canonical":
        sys.exit("usage: cq_stimulus.py --canonical FILE")
    try:
        for rec in read(sys.argv[2]):
            print(canonical(rec))
    except StimulusError as e:
        sys.exit(f"cq_stimulus.py: {e}")
