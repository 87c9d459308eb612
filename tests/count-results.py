#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Counts a `meson test` run for tests/run-all.sh: passed, failed, skipped.

usage: count-results.py TESTLOG.JSON [--allow FILE] [--ids FILE] [--skips FILE]

One entry of meson's testlog.json is one test program. A Criterion program
also writes its own report (--json=FILE in its command, tests/meson.build):
each of its tests counts, skipped ones included (Criterion's synthesis line
leaves skips out). Without a report, the synthesis line, else the program.

A skip is neither a pass nor a failure; with --allow (CI), a skip fails
unless an entry of the allow-list (tests/allowed-skips.txt) names the test
and the reason it gave. A program that ran no test at all fails.

Prints "P F S" (passed, failed, skipped); --ids writes one line per test
that ran (meson-test::suite::test), --skips one line per skip: whether it
was allowed, the test, its reason.
"""
import fnmatch
import json
import os
import re
import sys

SYNTHESIS = re.compile(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)")


def load_allow(path):
    """Entries "TEST-GLOB | SKIP MESSAGE SUBSTRING | WHY"; a malformed line is an error."""
    entries = []
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not all(parts):
            sys.exit("%s:%d: expected 'TEST-GLOB | SKIP MESSAGE | WHY IT CANNOT RUN ON THE CI HOST'" % (path, n))
        entries.append(parts)
    return entries


def allowed(entries, test, reason):
    return any(fnmatch.fnmatchcase(test, g) and msg in reason for g, msg, _ in entries)


def criterion_report(t):
    """The Criterion report this run wrote, or None (no --json=, not written, or older than the run)."""
    for a in t.get("command") or []:
        if a.startswith("--json="):
            path = a[len("--json="):]
            try:
                if os.stat(path).st_mtime + 1 >= t.get("starttime", 0):
                    return json.load(open(path))
            except (OSError, ValueError):
                return None
    return None


def main():
    args = sys.argv[1:]
    opts = {}
    while len(args) > 1 and args[-2] in ("--allow", "--ids", "--skips"):
        opts[args[-2]] = args[-1]
        args = args[:-2]
    if len(args) != 1:
        sys.exit(__doc__)
    allow = load_allow(opts["--allow"]) if "--allow" in opts else None
    p = f = s = 0
    ids, skips = [], []

    def skip(test, reason):
        nonlocal f, s
        ok = allow is None or allowed(allow, test, reason)
        verdict = "skipped" if allow is None else "allowed" if ok else "NOT ALLOWED"
        skips.append("%s\t%s\t%s" % (verdict, test, reason))
        if ok:
            s += 1
        else:
            f += 1

    for line in open(args[0]):
        t = json.loads(line)
        name = t["name"].split(" / ")[-1]
        ok = t["result"] in ("OK", "EXPECTEDFAIL")
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        rep = criterion_report(t)
        if t["result"] == "SKIP":
            # exit 77: the program's last line says why.
            lines = [l for l in out.strip().splitlines() if l.strip()]
            skip(name, lines[-1] if lines else "(no reason given)")
            continue
        if rep is not None:
            ran = 0
            for suite in rep.get("test_suites", []):
                for test in suite.get("tests", []):
                    tid = "%s::%s::%s" % (name, suite["name"], test["name"])
                    st = test.get("status")
                    if st == "SKIPPED":
                        msgs = test.get("messages") or []
                        if msgs == ["Test is disabled"]:
                            continue  # left out by --filter
                        skip(tid, " ".join(msgs) or "(no reason given)")
                        continue
                    if st == "PASSED":
                        p += 1
                    else:
                        f += 1
                    ran += 1
                    ids.append(tid)
            # A crash in a teardown, or a failure Criterion did not attribute to a test.
            if not ok and t["returncode"] != 0 and rep.get("failed", 0) + rep.get("errored", 0) == 0:
                f += 1
            if ran == 0 and not any(x.split("\t")[1].startswith(name + "::") for x in skips):
                f += 1  # a program that ran nothing and said nothing
            continue
        m = SYNTHESIS.findall(out)
        if m:
            tested, passing, failing, crashing = map(int, m[-1])
            p += passing
            f += failing + crashing + (0 if ok or failing + crashing else 1)
            if tested == 0:
                f += 1
        elif ok:
            p += 1
        else:
            f += 1
        ids.append(name)
    if "--ids" in opts:
        with open(opts["--ids"], "w") as o:
            o.writelines(i + "\n" for i in ids)
    if "--skips" in opts:
        with open(opts["--skips"], "w") as o:
            o.writelines(x + "\n" for x in skips)
    print(p, f, s)


main()
