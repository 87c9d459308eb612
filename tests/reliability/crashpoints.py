#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Deterministic crash points: the daemon is killed at every occurrence of every
mutating syscall of Create, Mount, Unmount and Remove (strace -e inject=SYSCALL:
signal=KILL:when=N on the running daemon), restarted, and checked.

For each operation: count its syscalls once (strace -c), then for each syscall s
and each n <= count, bring the volume to the operation's precondition through
the API, attach strace with the injection, send the request (which gets no
answer), wait for the kill, start the daemon again and check that the volume is
either fully there or fully gone, that records, index entries and mount counts
agree with each other and with mountinfo, and that nothing is left half-done
(no temp files, no quarantined directory, no stray mount).

Prints "crashpoints: points=N reached=N violations=0 ..." and exits non-zero on
any violation.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import Testbed, log  # noqa: E402

SYSCALLS = ["openat", "write", "fsync", "fdatasync", "renameat", "renameat2", "mkdirat", "unlinkat",
            "fchown", "fchmod", "open_tree", "mount_setattr", "move_mount", "umount2", "mount"]
NAME = "cpvol"
MID = "cpid"
OPTS = {"uid": "7", "mode": "0750"}
OPS = {
    "create": ("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS}),
    "mount": ("/VolumeDriver.Mount", {"Name": NAME, "ID": MID}),
    "unmount": ("/VolumeDriver.Unmount", {"Name": NAME, "ID": MID}),
    "remove": ("/VolumeDriver.Remove", {"Name": NAME}),
}


def counts_file(tb):
    try:
        with open(os.path.join(tb.state, "mounts", NAME + ".json")) as f:
            return json.load(f).get("mounts", {}) or {}
    except FileNotFoundError:
        return {}


def unmount_all(tb):
    for mid, n in counts_file(tb).items():
        for _ in range(n):
            tb.ok("/VolumeDriver.Unmount", {"Name": NAME, "ID": mid})


def exists(tb):
    st, _ = tb.call("/VolumeDriver.Get", {"Name": NAME})
    return st == 200


def precondition(tb, op):
    """The volume as the operation expects it: absent (create), unmounted (mount, remove), mounted once (unmount)."""
    if op == "create":
        if exists(tb):
            unmount_all(tb)
            tb.ok("/VolumeDriver.Remove", {"Name": NAME})
        return
    if not exists(tb):
        tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
    unmount_all(tb)
    if op == "unmount":
        tb.ok("/VolumeDriver.Mount", {"Name": NAME, "ID": MID})


def strace(args):
    return subprocess.Popen(["strace", "-f", "-qq"] + args, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def count_syscalls(tb, op):
    """{syscall: calls} that the daemon makes while serving @op."""
    out = os.path.join(tb.base, "count.txt")
    p = strace(["-c", "-o", out, "-e", "trace=" + ",".join(SYSCALLS), "-p", str(tb.pid)])
    time.sleep(0.4)
    endpoint, body = OPS[op]
    tb.ok(endpoint, body)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=10)
    counts = {}
    with open(out) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$", line)
            if m and m.group(2) in SYSCALLS:
                counts[m.group(2)] = int(m.group(1))
    return counts


class Checker:
    def __init__(self, tb):
        self.tb = tb
        self.violations = []

    def bad(self, what):
        self.violations.append(what)
        log("VIOLATION " + what)

    def check(self, label):
        tb = self.tb
        st, j = tb.call("/VolumeDriver.Get", {"Name": NAME})
        present = st == 200
        roots = tb.fs_roots()
        recs = [os.path.join(r, "nvmevol", "meta", NAME + ".json") for r in roots]
        recs = [r for r in recs if os.path.exists(r)]
        dirs = [d for d in (os.path.join(r, "nvmevol", "volumes", NAME) for r in roots) if os.path.isdir(d)]
        index = os.path.exists(os.path.join(tb.state, "index", NAME + ".json"))
        counts = counts_file(tb)
        total = sum(counts.values())
        binds = [m for m in tb.our_mounts() if m["target"].startswith(tb.prop + "/")]
        for r in roots:
            for sub in ("meta", "quarantine"):
                for fn in os.listdir(os.path.join(r, "nvmevol", sub)):
                    if sub == "quarantine" or ".tmp." in fn:
                        self.bad("%s: leftover nvmevol/%s/%s" % (label, sub, fn))
        for d in ("index", "mounts"):
            for fn in os.listdir(os.path.join(tb.state, d)):
                if ".tmp." in fn:
                    self.bad("%s: leftover %s/%s" % (label, d, fn))
        if present:
            status = j["Volume"].get("Status", {})
            if status.get("state") not in ("ready", "mounted"):
                self.bad("%s: state %s" % (label, status.get("state")))
            if len(recs) != 1 or len(dirs) != 1 or not index:
                self.bad("%s: present but records=%d dirs=%d index=%s" % (label, len(recs), len(dirs), index))
            else:
                with open(recs[0]) as f:
                    rec = json.load(f)
                if rec.get("state") != "ready":
                    self.bad("%s: record state %s" % (label, rec.get("state")))
                s = os.stat(dirs[0])
                if (s.st_uid, s.st_mode & 0o7777) != (7, 0o750):
                    self.bad("%s: owner/mode %d %o" % (label, s.st_uid, s.st_mode & 0o7777))
            if status.get("mount_count") != total:
                self.bad("%s: Status mount_count %s, stored %d" % (label, status.get("mount_count"), total))
            if total > 0 and [b["target"] for b in binds] != [os.path.join(tb.prop, NAME)]:
                self.bad("%s: count %d but binds %s" % (label, total, [b["target"] for b in binds]))
            if total == 0 and binds:
                self.bad("%s: count 0 but binds %s" % (label, [b["target"] for b in binds]))
        else:
            if recs or dirs or index or counts or binds:
                self.bad("%s: absent but records=%d dirs=%d index=%s counts=%s binds=%d" %
                         (label, len(recs), len(dirs), index, counts, len(binds)))
        if not tb.canary_intact():
            self.bad("%s: canary changed" % label)
        return present


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary")
    ap.add_argument("--max-per-syscall", type=int, default=0, help="cap n per syscall (0 = all)")
    args = ap.parse_args()
    if subprocess.run(["which", "strace"], stdout=subprocess.DEVNULL).returncode != 0:
        print("crashpoints: strace is not installed (apt-get install strace)")
        print("0 passed, 1 failed")
        return 1

    tb = Testbed(nparts=1, tag="cpts", binary=args.binary, env={"NVMEVOL_SELFTEST": "off"})
    chk = Checker(tb)
    points = reached = 0
    t0 = time.time()
    try:
        tb.start()
        for op in ("create", "mount", "unmount", "remove"):
            precondition(tb, op)
            counts = count_syscalls(tb, op)
            log("%s: %s" % (op, counts))
            for sc, n_calls in sorted(counts.items()):
                limit = n_calls if not args.max_per_syscall else min(n_calls, args.max_per_syscall)
                for n in range(1, limit + 1):
                    label = "%s/%s#%d" % (op, sc, n)
                    precondition(tb, op)
                    p = strace(["-o", "/dev/null", "-e", "trace=" + sc,
                                "-e", "inject=%s:signal=KILL:when=%d" % (sc, n), "-p", str(tb.pid)])
                    time.sleep(0.3)
                    endpoint, body = OPS[op]
                    points += 1
                    try:
                        tb.call(endpoint, body, timeout=10)
                    except Exception:
                        pass
                    try:
                        tb.proc.wait(timeout=5)
                        reached += 1
                    except subprocess.TimeoutExpired:
                        pass  # this run made fewer calls than the count: the point was not reached
                    p.kill()
                    p.wait()
                    tb.kill()  # reaps the killed daemon, or kills one the point did not reach
                    tb.start()
                    chk.check(label)
    except Exception as e:  # a precondition the daemon refuses is a finding too
        chk.bad("at point %d: %s: %s" % (points, type(e).__name__, e))
    finally:
        tb.cleanup()
    print("crashpoints: points=%d reached=%d violations=%d seconds=%.0f" %
          (points, reached, len(chk.violations), time.time() - t0))
    for v in chk.violations[:20]:
        print("  " + v)
    print("%d passed, %d failed" % (1 if not chk.violations else 0, 1 if chk.violations else 0))
    return 1 if chk.violations else 0


if __name__ == "__main__":
    sys.exit(main())
