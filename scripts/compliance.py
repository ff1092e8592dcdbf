#!/usr/bin/env python3
"""Builds docs/compliance.md: the IBA Vol. 1 chapter 10 compliance table of hcasim.

Inputs (all in the repository):
  docs/ch10-compliance.tsv     one row per compliance statement (copy of the spec's list)
  docs/compliance-status.tsv   hand-maintained: id, status, note
                               status is one of tested | not-applicable | not-supported | planned
  testbench/tests/*.cpp        test names carrying statement IDs, e.g.
                               TEST(QpState, C10_22_post_send_in_reset_is_immediate_error) or
                               SIM_TEST(Rc, o10_2_1_1_ah_port_check); dots and dashes of an ID
                               become underscores (C10-97.2.1 -> C10_97_2_1)

Rules:
  - test names are snake_case words, after the statement IDs they assert if any
    (C10_22_post_send_in_reset_is_immediate_error); suite names are CamelCase;
  - a test naming a statement makes it at least "tested";
  - a statement marked "tested" must have at least one test naming it;
  - obsolete statements are shown as "not applicable (obsolete)".

Usage:
  scripts/compliance.py            write docs/compliance.md
  scripts/compliance.py --check    exit 1 if docs/compliance.md is stale, the status file is
                                   inconsistent with the statement list, a "tested"
                                   statement has no test, or a test is named in another style
Python 3 standard library only.
"""
import argparse
import csv
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "docs", "ch10-compliance.tsv")
STATUS = os.path.join(ROOT, "docs", "compliance-status.tsv")
OUT = os.path.join(ROOT, "docs", "compliance.md")
TEST_GLOB = os.path.join(ROOT, "testbench", "tests", "*.cpp")

STATUSES = ("tested", "not-applicable", "not-supported", "planned")
# TEST(Suite, Name), TEST_F, TEST_P, SIM_TEST and any other *TEST* macro with (suite, name).
TEST_RE = re.compile(r"\b([A-Z_]*TEST[A-Z_]*)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
ID_RE = re.compile(r"(?<![A-Za-z0-9])([CcOo]10(?:_\d+)+)")
# The one style of test names: statement IDs first if any, then snake_case words.
NAME_RE = re.compile(r"(?:[CcOo]10(?:_\d+)+_)*[a-z0-9]+(?:_[a-z0-9]+)*")
SUITE_RE = re.compile(r"[A-Z][A-Za-z0-9]*")


def norm(statement_id):
    """C10-97.2.1 -> c10_97_2_1 (the form IDs take in test names, lower case)."""
    return re.sub(r"[-.]", "_", statement_id).lower()


def read_tsv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, body = rows[0], [r for r in rows[1:] if r and any(c.strip() for c in r)]
    return header, body


def load_statements():
    header, body = read_tsv(SPEC)
    want = ["id", "section", "kind", "feature", "obsolete", "seed_line", "summary"]
    if header != want:
        raise SystemExit(f"{SPEC}: unexpected header {header}, expected {want}")
    return [dict(zip(want, r)) for r in body]


def load_status(errors):
    header, body = read_tsv(STATUS)
    if header[:3] != ["id", "status", "note"]:
        errors.append(f"{STATUS}: header must be id, status, note")
    status = {}
    for n, r in enumerate(body, start=2):
        if len(r) < 2:
            errors.append(f"{STATUS}:{n}: expected id<TAB>status<TAB>note")
            continue
        sid, st, note = r[0].strip(), r[1].strip(), (r[2].strip() if len(r) > 2 else "")
        if st not in STATUSES:
            errors.append(f"{STATUS}:{n}: {sid}: unknown status '{st}' (expected {'|'.join(STATUSES)})")
        if sid in status:
            errors.append(f"{STATUS}:{n}: {sid} listed twice")
        status[sid] = (st, note)
    return status


def find_tests(by_norm, errors, warnings):
    """Maps statement id -> sorted list of 'Suite.Name' tests naming it; a name in another style
    than NAME_RE / SUITE_RE is an error."""
    tests = {}
    for path in sorted(glob.glob(TEST_GLOB)):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in TEST_RE.finditer(text):
            macro, suite, name = m.groups()
            if macro.startswith("#") or suite == "suite" or name.startswith("DISABLED_"):
                continue  # a disabled test asserts nothing
            if not NAME_RE.fullmatch(name) or not SUITE_RE.fullmatch(suite):
                errors.append(f"{os.path.relpath(path, ROOT)}: {suite}.{name}: not in the style of test names, Suite.snake_case_words "
                              "(statement IDs first, as in E2eRc.C10_22_...)")
            for token in ID_RE.findall(suite + " " + name):
                parts = token.lower().split("_")
                sid = None
                # Longest prefix that is a statement: C10_22_2nodes -> C10-22.
                for k in range(len(parts), 1, -1):
                    sid = by_norm.get("_".join(parts[:k]))
                    if sid:
                        break
                rel = os.path.relpath(path, ROOT)
                if not sid:
                    warnings.append(f"{rel}: {suite}.{name}: '{token}' names no statement")
                    continue
                tests.setdefault(sid, [])
                label = f"{suite}.{name}"
                if label not in tests[sid]:
                    tests[sid].append(label)
    for v in tests.values():
        v.sort()
    return tests


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ").strip()


def build(errors, warnings):
    statements = load_statements()
    by_norm = {norm(s["id"]): s["id"] for s in statements}
    status = load_status(errors)
    tests = find_tests(by_norm, errors, warnings)
    ids = [s["id"] for s in statements]
    for sid in ids:
        if sid not in status:
            errors.append(f"{STATUS}: no status for {sid}")
    for sid in status:
        if sid not in by_norm.values():
            errors.append(f"{STATUS}: {sid} is not a statement of docs/ch10-compliance.tsv")

    rows, counts = [], {}
    for s in statements:
        sid = s["id"]
        st, note = status.get(sid, ("planned", ""))
        named = tests.get(sid, [])
        obsolete = s["obsolete"] == "yes"
        if st == "tested" and not named:
            errors.append(f"{sid}: status 'tested' but no test in testbench/tests names {norm(sid)}")
        if obsolete:
            shown = "not applicable (obsolete)"
        elif named:
            shown = "tested"  # a test naming the statement makes it at least tested
        else:
            shown = st.replace("-", " ")
        counts[shown] = counts.get(shown, 0) + 1
        rows.append((s, shown, named, note))

    kinds = {}
    for s in statements:
        kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
    out = []
    out.append("# IBA Vol. 1 chapter 10 compliance\n")
    out.append("Generated by `scripts/compliance.py` from `docs/ch10-compliance.tsv` (the statement list),")
    out.append("`docs/compliance-status.tsv` (hand-maintained status and notes) and the test names in")
    out.append("`testbench/tests/*.cpp`. Do not edit by hand: change the status file or the tests and run")
    out.append("`python3 scripts/compliance.py`; `--check` (run by ctest as `DocsCompliance.*`) fails when")
    out.append("this file is stale or a statement marked tested has no test.\n")
    out.append("Status: **tested** — at least one test carries the ID in its name (`C10-97.2.1` ->")
    out.append("`C10_97_2_1_...`); **planned** — not implemented or not yet tested, the note names the issue;")
    out.append("**not supported** — an optional feature hcasim does not implement, reported as absent by")
    out.append("Query HCA; **not applicable** — the statement concerns another kind of device, or is obsolete.\n")
    out.append(f"{len(statements)} statements: " +
               ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ".\n")
    out.append("| status | statements |")
    out.append("|---|---|")
    order = ["tested", "planned", "not supported", "not applicable", "not applicable (obsolete)"]
    for k in order + sorted(set(counts) - set(order)):
        if k in counts:
            out.append(f"| {k} | {counts[k]} |")
    out.append("")
    out.append("| id | section | kind | feature | obsolete | paraphrase | status | tests | note |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for s, shown, named, note in rows:
        t = "<br>".join(f"`{n}`" for n in named)
        out.append(f"| {s['id']} | {s['section']} | {s['kind']} | {s['feature']} | {s['obsolete']} | "
                   f"{cell(s['summary'])} | {shown} | {t} | {cell(note)} |")
    out.append("")
    return "\n".join(out), counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="verify instead of writing")
    args = ap.parse_args()
    errors, warnings = [], []
    text, counts = build(errors, warnings)
    for w in warnings:
        print(f"compliance: warning: {w}", file=sys.stderr)
    if args.check:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            errors.append(f"{os.path.relpath(OUT, ROOT)} is stale: run python3 scripts/compliance.py")
        for e in errors:
            print(f"compliance: error: {e}", file=sys.stderr)
        if errors:
            return 1
        print("compliance: ok (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")")
        return 0
    for e in errors:
        print(f"compliance: error: {e}", file=sys.stderr)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT, ROOT)} (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
