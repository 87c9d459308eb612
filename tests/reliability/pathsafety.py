#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Symlink-swap attacker against Create, Mount, Unmount and Remove (reliability doc D7, D8, E13, E14, R10).

While a client runs Create (random uid/gid/mode), Mount, Unmount and Remove
in a loop, attacker threads keep swapping, in a tight loop:
  - directories inside volumes (x/ <-> x -> CANARY), plus planted links
    l1 -> /, l2 -> CANARY, l3 -> ../../.., FIFOs and mode-0000 directories,
  - the volume directories themselves in <fs>/nvmevol/volumes/ for symlinks
    to CANARY (a host-side attacker: stronger than any container),
  - <prop>/<name> for symlinks to CANARY (runc CVE-2021-30465 class).
A monitor samples mountinfo every few milliseconds. An escape is: the CANARY
tree (contents, modes, owners, mtimes) changed, a mount whose target is
outside prop/ (other than the daemon's partition mounts), or a mount under
prop/ whose root is not /nvmevol/volumes/<name> of one of our partitions.
Errors from the daemon are expected (the attacker breaks things), but each of
Create, Mount, Unmount and Remove must succeed at least --min-ok times per 30 s
(an attack on requests that all fail tests nothing), and a request that times
out or loses its connection fails the run, as do escapes, a dead daemon and
sanitizer reports. --sabotage sends names the daemon must refuse: the run must
fail on the minimum.
"""

import argparse
import http.client
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import Testbed, Counter, mountinfo, log  # noqa: E402

NAMES = ["ps%d" % i for i in range(6)]
# Successes each operation must reach per 30 s: an attacker that breaks every request proves nothing.
# A 30 s run on 2 shared cores had 75 Creates, 1,652 Mounts, 2,039 Unmounts and 88 Removes succeed.
MIN_OK = 20
OPS = ("Create", "Mount", "Unmount", "Remove")


def exists_at(dfd, name):
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seconds", nargs="?", type=float, default=30)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--min-ok", type=int, default=MIN_OK,
                    help="successes each of Create, Mount, Unmount and Remove must reach (per 30 s)")
    ap.add_argument("--sabotage", action="store_true",
                    help="send names the daemon must refuse: nothing succeeds, the run must fail on the minimum")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    log("pathsafety: seed %d" % seed)
    tb = Testbed(nparts=1, tag="path", binary=args.binary)
    stop = threading.Event()
    escapes = []
    failures = []
    ops = Counter()
    swaps = Counter()
    rc = 1
    try:
        tb.start()
        root = tb.fs_roots()[0]
        vols = os.path.join(root, "nvmevol", "volumes")
        part_dev = [m["dev"] for m in mountinfo() if m["target"] == root][0]
        allowed_targets = set(tb.partition_mounts().values())

        def attacker_inside(rng):
            # Works through an O_NOFOLLOW fd of the volume directory: the other attacker swaps
            # that directory for a link to CANARY, and the attacker itself must never write there.
            while not stop.is_set():
                name = rng.choice(NAMES)
                try:
                    dfd = os.open(os.path.join(vols, name), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                except OSError:
                    time.sleep(0.001)
                    continue
                try:
                    if not exists_at(dfd, "x"):
                        os.mkdir("x", dir_fd=dfd)
                    os.rename("x", "x.real", src_dir_fd=dfd, dst_dir_fd=dfd)
                    os.symlink(tb.canary, "x", dir_fd=dfd)
                    for ln, tgt in (("l1", "/"), ("l2", tb.canary), ("l3", "../../..")):
                        if not exists_at(dfd, ln):
                            os.symlink(tgt, ln, dir_fd=dfd)
                    if not exists_at(dfd, "fifo"):
                        os.mkfifo("fifo", dir_fd=dfd)
                    if not exists_at(dfd, "locked"):
                        os.mkdir("locked", 0, dir_fd=dfd)
                    time.sleep(rng.uniform(0, 0.002))
                    os.unlink("x", dir_fd=dfd)
                    os.rename("x.real", "x", src_dir_fd=dfd, dst_dir_fd=dfd)
                    swaps.add("inside")
                except OSError:
                    pass
                finally:
                    os.close(dfd)

        def attacker_volumes_dir(rng):
            while not stop.is_set():
                name = rng.choice(NAMES)
                d = os.path.join(vols, name)
                hold = os.path.join(vols, ".hold-" + name)
                try:
                    os.rename(d, hold)
                except OSError:
                    time.sleep(0.001)
                    continue
                try:
                    os.symlink(tb.canary, d)
                    time.sleep(rng.uniform(0, 0.003))
                    if os.path.islink(d):
                        os.unlink(d)
                    swaps.add("volume_dir")
                except OSError:
                    pass
                try:
                    os.rename(hold, d)
                except OSError:
                    # The daemon made a new directory meanwhile: keep ours aside, never lose it silently.
                    pass

        def attacker_prop(rng):
            while not stop.is_set():
                name = rng.choice(NAMES)
                p = os.path.join(tb.prop, name)
                try:
                    if os.path.isdir(p) and not os.path.islink(p) and not os.path.ismount(p):
                        os.rmdir(p)
                    if not os.path.lexists(p):
                        os.symlink(tb.canary, p)
                        swaps.add("prop")
                        time.sleep(rng.uniform(0, 0.003))
                        if os.path.islink(p):
                            os.unlink(p)
                except OSError:
                    pass

        def monitor():
            while not stop.is_set():
                for m in mountinfo():
                    t = m["target"]
                    # (mountinfo shows a bind's root at the directory's current path: a volume
                    # directory renamed by the attacker is still the volume, and still fine.)
                    if t.startswith(tb.canary) or (m["dev"] == part_dev and not t.startswith(tb.base + "/")):
                        escapes.append("mount at %s (root %s)" % (t, m["root"]))
                    elif t.startswith(tb.base + "/") and t not in allowed_targets:
                        if not t.startswith(tb.prop + "/"):
                            escapes.append("mount outside prop: %s" % t)
                        elif (m["dev"] != part_dev or not m["root"].startswith("/nvmevol/volumes/")
                              or m["root"].count("/") != 3 or os.path.dirname(t) != tb.prop):
                            escapes.append("wrong mount under prop: %s root %s dev %s" % (t, m["root"], m["dev"]))
                time.sleep(0.002)

        threads = [threading.Thread(target=f, args=(random.Random(seed + i),))
                   for i, f in enumerate((attacker_inside, attacker_volumes_dir, attacker_prop))]
        threads.append(threading.Thread(target=monitor))
        for t in threads:
            t.start()
        rng = random.Random(seed)
        t_end = time.monotonic() + args.seconds
        canary_checks = 0
        canary_bad = False
        while time.monotonic() < t_end and tb.alive():
            name = rng.choice(NAMES) if not args.sabotage else "../" + rng.choice(NAMES)
            r = rng.random()
            if r < 0.3:
                opts = {"uid": str(rng.choice([0, 1, 999])), "gid": str(rng.choice([0, 5, 999])),
                        "mode": rng.choice(["0777", "0700", "4755", "0000", "2775"])}
                op, body = "Create", {"Name": name, "Opts": opts}
            elif r < 0.55:
                op, body = "Mount", {"Name": name, "ID": "id%d" % rng.randrange(3)}
            elif r < 0.8:
                op, body = "Unmount", {"Name": name, "ID": "id%d" % rng.randrange(3)}
            else:
                op, body = "Remove", {"Name": name}
            try:
                st, j = tb.call("/VolumeDriver." + op, body, timeout=30)
                ops.add(op + ("_ok" if st == 200 else "_err"))
            except (OSError, http.client.HTTPException) as e:
                # A timeout or a dropped connection is a failure too: a hang is not an attacker's win to excuse.
                ops.add(op + "_transport_error")
                failures.append("transport error on %s %s: %r" % (op, body["Name"], e))
            if sum(ops.values()) % 25 == 0:
                canary_checks += 1
                if not canary_bad and not tb.canary_intact():
                    escapes.append("CANARY changed after %d operations" % sum(ops.values()))
                    canary_bad = True
        stop.set()
        for t in threads:
            t.join()
        alive = tb.alive()
        # Put back what the attacker held aside so cleanup sees a normal tree.
        for fn in os.listdir(vols):
            if fn.startswith(".hold-"):
                dst = os.path.join(vols, fn[6:])
                if os.path.islink(dst):
                    os.unlink(dst)
        if not tb.canary_intact():
            escapes.append("CANARY changed (final check)")
        for m in tb.prop_mounts():
            if m["dev"] != part_dev or not m["root"].startswith("/nvmevol/volumes/") or m["root"].count("/") != 3:
                escapes.append("wrong mount at the end: %s" % m)
        attempts = sum(ops.values())
        if alive:
            tb.stop()
        for rep in tb.sanitizer_reports():
            escapes.append("sanitizer: " + rep[:1500])
        need = max(1, int(args.min_ok * args.seconds / 30))
        for op in OPS:
            if ops.get(op + "_ok", 0) < need:
                failures.append("%s succeeded %d times, fewer than the minimum %d: the attack was not tested" %
                                (op, ops.get(op + "_ok", 0), need))
        transport = sum(n for k, n in ops.items() if k.endswith("_transport_error"))
        print("pathsafety: attempts=%d ok=%d swaps=%d escapes=%d transport_errors=%d min_ok_per_op=%d "
              "daemon_alive=%s seconds=%.0f" %
              (attempts, sum(n for k, n in ops.items() if k.endswith("_ok")), sum(swaps.values()), len(escapes),
               transport, need, "yes" if alive else "NO", args.seconds))
        print("  operations: " + " ".join("%s=%d" % kv for kv in sorted(ops.items())))
        print("  swaps: " + " ".join("%s=%d" % kv for kv in sorted(swaps.items())))
        for e in sorted(set(escapes))[:30]:
            print("  ESCAPE " + e)
        for f in failures[:20]:
            print("  FAILED " + f)
        rc = 0 if alive and not escapes and not failures else 1
    finally:
        stop.set()
        tb.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
