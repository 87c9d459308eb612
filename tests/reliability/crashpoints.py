#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Deterministic crash points: the daemon is killed at every occurrence of every
mutating syscall of Create, Mount, Unmount and Remove, and of Create with from= (a
clone) of a volume not in use and of one in use, ioctl included there (FICLONE,
FIFREEZE, FIEMAP while frozen, FITHAW) (strace -e inject=SYSCALL:signal=KILL:when=N
on the running daemon), restarted, and checked. The daemon runs without a freeze
guardian (NVMEVOL_TEST_FREEZE_NO_GUARDIAN=1, as PID 1 of a plugin), so a kill while
frozen leaves the partition frozen and the restart must thaw it.

For each operation: count its syscalls once (strace -c), then for each syscall s
and each n <= count, bring the volume to the operation's precondition through
the API, attach strace with the injection, send the request (which gets no
answer), wait for the kill, start the daemon again and check that the volume is
either fully there or fully gone, that records, index entries and mount counts
agree with each other and with mountinfo, and that nothing is left half-done
(no temp files, no quarantined directory, no stray mount); a clone that is there holds
its source's files, link and hard link, and the source is unchanged (still mounted once
for the clone of a volume in use).

Prints "crashpoints: points=N reached=N violations=0 ..." and exits non-zero on
any violation.
"""
import argparse
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import (Testbed, Strace, VolumeView, MUTATING_SYSCALLS, log, strace_missing,  # noqa: E402
                    consistency_problems, leftovers, stray_mounts, ensure_clone_source, clone_problems,
                    CLONE_SOURCE)

SYSCALLS = [s for s in MUTATING_SYSCALLS if s != "ioctl"]
NAME = "cpvol"
MID = "cpid"
OPTS = {"uid": "7", "mode": "0750"}
OPS = {
    "create": ("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS}),
    "mount": ("/VolumeDriver.Mount", {"Name": NAME, "ID": MID}),
    "unmount": ("/VolumeDriver.Unmount", {"Name": NAME, "ID": MID}),
    "remove": ("/VolumeDriver.Remove", {"Name": NAME}),
    "clone": ("/VolumeDriver.Create", {"Name": NAME, "Opts": {"from": CLONE_SOURCE}}),
    "clonelive": ("/VolumeDriver.Create", {"Name": NAME, "Opts": {"from": CLONE_SOURCE}}),
}
CLONE_OPS = {"clone": False, "clonelive": True}   # op: the source is mounted
source_files = {}


def unmount_all(tb):
    for mid, n in VolumeView(tb, NAME).counts.items():
        for _ in range(n):
            tb.ok("/VolumeDriver.Unmount", {"Name": NAME, "ID": mid})


def exists(tb):
    st, _ = tb.call("/VolumeDriver.Get", {"Name": NAME})
    return st == 200


def precondition(tb, op):
    """The volume as the operation expects it: absent (create, clone), unmounted (mount, remove), mounted once
    (unmount); for a clone, its source with its files, mounted or not."""
    if op in CLONE_OPS:
        source_files.clear()
        source_files.update(ensure_clone_source(tb, OPTS, CLONE_OPS[op]))
    if op == "create" or op in CLONE_OPS:
        if exists(tb):
            unmount_all(tb)
            tb.ok("/VolumeDriver.Remove", {"Name": NAME})
        return
    if not exists(tb):
        tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
    unmount_all(tb)
    if op == "unmount":
        tb.ok("/VolumeDriver.Mount", {"Name": NAME, "ID": MID})


def syscalls_of(op):
    """A clone's ioctls are its FICLONE, FIFREEZE, FIEMAP and FITHAW: points too."""
    return SYSCALLS + ["ioctl"] if op in CLONE_OPS else SYSCALLS


def count_syscalls(tb, op):
    """{syscall: calls} that the daemon makes while serving @op (all threads together)."""
    st = Strace(tb.pid, ["-e", "trace=" + ",".join(syscalls_of(op))], os.path.join(tb.base, "count.trace"))
    endpoint, body = OPS[op]
    tb.ok(endpoint, body)
    time.sleep(0.2)
    st.detach()
    counts = {}
    for c in st.events():
        counts[c["name"]] = counts.get(c["name"], 0) + 1
    return counts


class Checker:
    def __init__(self, tb):
        self.tb = tb
        self.violations = []

    def bad(self, what):
        self.violations.append(what)
        log("VIOLATION " + what)

    def check(self, label, op):
        tb = self.tb
        v = VolumeView(tb, NAME)
        for p in consistency_problems(tb, v, owner=(7, 0, 0o750)):
            self.bad("%s: %s" % (label, p))
        for p in leftovers(tb):
            self.bad("%s: leftover %s" % (label, p))
        for p in stray_mounts(tb, (NAME, CLONE_SOURCE)):
            self.bad("%s: stray mount %s" % (label, p))
        if op in CLONE_OPS:
            for p in clone_problems(tb, NAME, source_files, CLONE_OPS[op]):
                self.bad("%s: %s" % (label, p))
        if not tb.canary_intact():
            self.bad("%s: canary changed" % label)
        return v.present


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary")
    ap.add_argument("--max-per-syscall", type=int, default=0, help="cap n per syscall (0 = all)")
    args = ap.parse_args()
    if strace_missing("crashpoints"):
        return 1

    tb = Testbed(nparts=1, tag="cpts", binary=args.binary,
                 env={"NVMEVOL_SELFTEST": "off", "NVMEVOL_TEST_FREEZE_NO_GUARDIAN": "1"})
    chk = Checker(tb)
    points = reached = thawed = 0
    t0 = time.time()
    try:
        tb.start()
        for op in ("create", "mount", "unmount", "remove", "clone", "clonelive"):
            precondition(tb, op)
            counts = count_syscalls(tb, op)
            log("%s: %s" % (op, counts))
            for sc, n_calls in sorted(counts.items()):
                limit = n_calls if not args.max_per_syscall else min(n_calls, args.max_per_syscall)
                for n in range(1, limit + 1):
                    label = "%s/%s#%d" % (op, sc, n)
                    precondition(tb, op)
                    p = Strace(tb.pid, ["-e", "trace=" + sc, "-e", "inject=%s:signal=KILL:when=%d" % (sc, n)],
                               os.path.join(tb.base, "point.trace"))
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
                    p.detach()
                    tb.kill()  # reaps the killed daemon, or kills one the point did not reach
                    tb.start()
                    chk.check(label, op)
    except Exception as e:  # a precondition the daemon refuses is a finding too
        chk.bad("at point %d: %s: %s" % (points, type(e).__name__, e))
    finally:
        try:
            with open(tb.logpath) as f:
                thawed = sum(1 for line in f if "was frozen" in line)
        except OSError:
            thawed = 0
        for root in tb.fs_roots():   # a failure while frozen must not leave the partition frozen to unmount
            subprocess.run(["fsfreeze", "--unfreeze", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tb.cleanup()
    print("crashpoints: points=%d reached=%d violations=%d thawed_at_start=%d seconds=%.0f" %
          (points, reached, len(chk.violations), thawed, time.time() - t0))
    for v in chk.violations[:20]:
        print("  " + v)
    print("%d passed, %d failed" % (1 if not chk.violations else 0, 1 if chk.violations else 0))
    return 1 if chk.violations else 0


if __name__ == "__main__":
    sys.exit(main())
