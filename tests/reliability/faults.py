#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fault scenarios on real loop XFS partitions (reliability doc B10, E11, G6, R9).

  full        the partition is filled (fallocate, then small files and
              directories until ENOSPC): Create fails with an Err and leaves
              no directory, record, index entry or temp file; volumes of the
              partition stay intact; after space is freed the same Create works.
  shutdown    `xfs_io -x -c shutdown` on one partition's mount: Mount and
              Create there give an Err and leave no bind and no count; Get
              still answers; the other partition keeps working; after an
              unmount and a restart the partition works again.
  missing     the partition's mount is detached underneath a running daemon,
              then the loop device is detached and the daemon restarted: Get
              answers OK (Status shows the partition missing, never an Err),
              Mount fails with an Err; when the device returns the volume
              mounts again, found by a rescan without a restart (a restart
              needed is a failed check; --sabotage returns the device only
              after that Mount, so the check must fail).
  corrupt     a record file truncated, emptied, "null", and garbage, each
              followed by a restart: the daemon starts, other volumes work, Get
              of the bad one answers with Status "record-unreadable", Mount and
              Create refuse it; restoring the file makes it work again.

Prints "faults: checks=N failed=F ..." and one line per failed check; exits
non-zero if any check failed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import Testbed, log, run  # noqa: E402


class Checks:
    def __init__(self):
        self.n = 0
        self.failed = []
        self.notes = []
        self.scenario = "?"

    def __call__(self, cond, what, detail=""):
        self.n += 1
        if not cond:
            self.failed.append("%s: %s %s" % (self.scenario, what, detail))
            log("FAIL %s: %s %s" % (self.scenario, what, detail))
        return cond

    def note(self, msg):
        self.notes.append("%s: %s" % (self.scenario, msg))
        log("note %s: %s" % (self.scenario, msg))


def is_ok(r):
    st, j = r
    return st == 200 and isinstance(j, dict) and not j.get("Err")


def is_err(r):
    st, j = r
    return st >= 400 and isinstance(j, dict) and isinstance(j.get("Err"), str) and len(j["Err"]) > 0


def part_root(tb, label):
    """The mountpoint of the partition with this label (from blkid of our loops)."""
    i = tb.labels.index(label)
    uuid = run(["blkid", "-s", "UUID", "-o", "value", tb.loops[i]]).stdout.strip()
    return os.path.join(tb.parts, uuid), uuid


def no_trace(c, tb, name, root):
    """The volume left nothing anywhere."""
    tree = os.path.join(root, "nvmevol")
    c(not os.path.lexists(os.path.join(tree, "volumes", name)), "no directory for " + name)
    c(not os.path.lexists(os.path.join(tree, "meta", name + ".json")), "no record for " + name)
    c(not os.path.lexists(os.path.join(tb.state, "index", name + ".json")), "no index entry for " + name)
    tmps = [f for f in os.listdir(os.path.join(tree, "meta")) if ".tmp." in f]
    tmps += [f for f in os.listdir(os.path.join(tb.state, "index")) if ".tmp." in f]
    c(not tmps, "no temp files", str(tmps))
    c(not os.path.lexists(os.path.join(tb.prop, name)), "no mountpoint for " + name)
    st, j = tb.call("/VolumeDriver.List", {})
    c(name not in [v["Name"] for v in j.get("Volumes", [])], name + " not listed")


def write_sentinel(tb, name, text):
    d = tb.volume_dir(name)
    with open(os.path.join(d, "sentinel"), "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def read_sentinel(tb, name):
    d = tb.volume_dir(name)
    try:
        with open(os.path.join(d, "sentinel")) as f:
            return f.read()
    except (OSError, TypeError):
        return None


def status_of(tb, name):
    st, j = tb.get(name)
    if st != 200 or not isinstance(j, dict):
        return st, None
    return st, j["Volume"].get("Status", {})


def fill(root):
    """Fills the filesystem: big preallocations, then 4 KiB files, then empty files and directories."""
    d = os.path.join(root, "filler")
    os.makedirs(d, exist_ok=True)
    st = os.statvfs(root)
    free = st.f_bavail * st.f_frsize
    subprocess.run(["fallocate", "-l", str(max(free - (8 << 20), 1 << 20)), os.path.join(d, "big")], check=True)
    n = 0
    for size in (1 << 20, 64 << 10, 4096):
        while True:
            p = os.path.join(d, "f%d" % n)
            n += 1
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.posix_fallocate(fd, 0, size)
                finally:
                    os.close(fd)
            except OSError:
                break
    for kind in ("dir", "file"):
        misses = 0
        while misses < 3:
            p = os.path.join(d, "%s%d" % (kind, n))
            n += 1
            try:
                if kind == "dir":
                    os.mkdir(p)
                else:
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
            except OSError:
                misses += 1
    os.sync()
    return d


def scenario_full(c, tb):
    c.scenario = "full"
    la, lb = tb.labels
    root_a, _ = part_root(tb, la)
    c(is_ok(tb.call("/VolumeDriver.Create", {"Name": "keep1", "Opts": {"partition": la}})), "create keep1")
    write_sentinel(tb, "keep1", "keep1 data\n")
    filler = fill(root_a)
    st = os.statvfs(root_a)
    c.note("filled: %d free blocks, %d free inodes" % (st.f_bavail, st.f_favail))
    r = tb.call("/VolumeDriver.Create", {"Name": "vfull", "Opts": {"partition": la}})
    c(is_err(r), "Create on a full partition gives an Err", str(r))
    if is_err(r):
        c.note("Err: %s" % r[1]["Err"][:160])
    no_trace(c, tb, "vfull", root_a)
    c(is_ok(tb.get("keep1")), "existing volume still answers Get")
    c(read_sentinel(tb, "keep1") == "keep1 data\n", "existing volume's data intact")
    # A full volume must still mount (its container restarts so the user can clean up):
    # mount counts live in the host state directory, not on the full partition.
    r = tb.call("/VolumeDriver.Mount", {"Name": "keep1", "ID": "m1"})
    c(is_ok(r), "Mount of an existing volume on the full partition works", str(r))
    if is_ok(r):
        c(read_sentinel(tb, "keep1") == "keep1 data\n", "data readable through the mount")
        c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "keep1", "ID": "m1"})), "unmount keep1")
    c(not [m for m in tb.prop_mounts() if m["target"].endswith("/keep1")], "no bind left after the unmount")
    c(is_ok(tb.call("/VolumeDriver.Create", {"Name": "other", "Opts": {"partition": lb}})),
      "Create on the other partition works")
    subprocess.run(["rm", "-rf", filler], check=True)
    os.sync()
    r = tb.call("/VolumeDriver.Create", {"Name": "vfull", "Opts": {"partition": la}})
    c(is_ok(r), "the same Create works after space is freed", str(r))
    c(tb.volume_dir("vfull") is not None and tb.volume_dir("vfull").startswith(root_a), "vfull on partition a")
    for n in ("vfull", "keep1", "other"):
        c(is_ok(tb.call("/VolumeDriver.Remove", {"Name": n})), "remove " + n)


def scenario_shutdown(c, tb):
    c.scenario = "shutdown"
    la, lb = tb.labels
    root_a, _ = part_root(tb, la)
    for n, l in (("sa1", la), ("sa2", la), ("sb1", lb)):
        c(is_ok(tb.call("/VolumeDriver.Create", {"Name": n, "Opts": {"partition": l}})), "create " + n)
    c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": "sa2", "ID": "m1"})), "mount sa2 before the shutdown")
    write_sentinel(tb, "sb1", "sb1 data\n")
    run(["xfs_io", "-x", "-c", "shutdown", root_a])
    r = tb.call("/VolumeDriver.Mount", {"Name": "sa1", "ID": "m1"})
    c(is_err(r), "Mount on a shut-down XFS gives an Err", str(r))
    if is_err(r):
        c.note("Mount Err: %s" % r[1]["Err"][:200])
    c(not [m for m in tb.prop_mounts() if m["target"].endswith("/sa1")], "failed Mount leaves no bind")
    st, s = status_of(tb, "sa1")
    c(st == 200, "Get of a volume on a shut-down partition answers OK", str(st))
    if s is not None:
        c(s.get("mount_count") == 0, "failed Mount leaves count 0", str(s.get("mount_count")))
        c.note("Status of sa1: state=%s partition=%s" % (s.get("state"), s.get("partition", {}).get("problem")))
    r = tb.call("/VolumeDriver.Create", {"Name": "sa3", "Opts": {"partition": la}})
    c(is_err(r), "Create on a shut-down XFS gives an Err", str(r))
    if is_err(r):
        c.note("Create Err: %s" % r[1]["Err"][:200])
    st, j = tb.call("/VolumeDriver.List", {})
    c("sa3" not in [v["Name"] for v in j.get("Volumes", [])], "failed Create not listed")
    # The other partition keeps working.
    c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": "sb1", "ID": "m1"})), "mount sb1 on the healthy partition")
    c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "sb1", "ID": "m1"})), "unmount sb1")
    c(is_ok(tb.call("/VolumeDriver.Create", {"Name": "sb2", "Opts": {"partition": lb}})), "create on healthy")
    c(is_ok(tb.call("/VolumeDriver.Create", {"Name": "sb3", "Opts": {}})), "create anywhere goes to healthy")
    c(tb.volume_dir("sb3") is not None and not tb.volume_dir("sb3").startswith(root_a), "sb3 not on shut-down fs")
    c(is_ok(tb.call("/VolumeDriver.Remove", {"Name": "sb2"})), "remove on healthy")
    c(read_sentinel(tb, "sb1") == "sb1 data\n", "healthy partition's data intact")
    r = tb.call("/VolumeDriver.Unmount", {"Name": "sa2", "ID": "m1"})
    c.note("Unmount of sa2 (mounted before the shutdown): %s %s" % r)
    c(tb.alive(), "daemon alive")
    # Recovery: stop, unmount everything of partition a (log replay at the next mount), start.
    tb.stop()
    for m in sorted(tb.our_mounts(), key=lambda m: -len(m["target"])):
        if m["target"] == root_a or m["target"].startswith(tb.prop + "/sa"):
            subprocess.run(["umount", m["target"]], check=False)
    tb.start()
    r = tb.call("/VolumeDriver.Mount", {"Name": "sa1", "ID": "m2"})
    c(is_ok(r), "after unmount + restart the partition works again", str(r))
    c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "sa1", "ID": "m2"})), "unmount sa1")
    st, s = status_of(tb, "sa2")
    if s is not None and s.get("mount_count"):
        tb.call("/VolumeDriver.Unmount", {"Name": "sa2", "ID": "m1"})
    for n in ("sa1", "sa2", "sb1", "sb3"):
        c(is_ok(tb.call("/VolumeDriver.Remove", {"Name": n})), "remove " + n)


def scenario_missing(c, tb):
    c.scenario = "missing"
    la, lb = tb.labels
    root_a, uuid_a = part_root(tb, la)
    for n, l in (("da1", la), ("db1", lb)):
        c(is_ok(tb.call("/VolumeDriver.Create", {"Name": n, "Opts": {"partition": l}})), "create " + n)
    write_sentinel(tb, "da1", "da1 data\n")
    # 1. The mount vanishes under the running daemon.
    run(["umount", "-l", root_a])
    st, s = status_of(tb, "da1")
    c(st == 200, "Get answers OK right after the partition vanished", str(st))
    c(s is not None and s.get("state") == "partition-missing",
      "Status shows the partition missing right after it vanished (Get before Mount, as dockerd does)",
      str(s and s.get("state")))
    r = tb.call("/VolumeDriver.Mount", {"Name": "da1", "ID": "m1"})
    if is_ok(r):
        c.note("Mount after the partition was detached succeeded (remounted by a rescan): %s" % (r,))
        mounted = [m for m in tb.prop_mounts() if m["target"].endswith("/da1")]
        c(len(mounted) == 1 and mounted[0]["root"] == "/nvmevol/volumes/da1", "remounted bind correct")
        c(read_sentinel(tb, "da1") == "da1 data\n", "data visible after remount")
        c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "da1", "ID": "m1"})), "unmount da1")
    else:
        c(is_err(r), "Mount on a vanished partition gives an Err", str(r))
        c.note("Mount Err: %s" % r[1].get("Err", "")[:200])
        st, s = status_of(tb, "da1")
        c(st == 200 and s is not None and s.get("state") == "partition-missing",
          "Status shows the partition missing after the failed Mount", str(s and s.get("state")))
    c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": "db1", "ID": "m1"})), "other partition mounts")
    c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "db1", "ID": "m1"})), "other partition unmounts")
    # 2. The device goes away entirely; the daemon restarts without it.
    tb.stop()
    for m in sorted(tb.our_mounts(), key=lambda m: -len(m["target"])):
        if m["source"] == tb.loops[0] or m["target"] == root_a:
            subprocess.run(["umount", "-l", m["target"]], check=False)
    img = os.path.join(tb.base, "img0")
    run(["losetup", "-d", tb.loops[0]])
    time.sleep(0.2)
    tb.start()
    st, s = status_of(tb, "da1")
    c(st == 200, "Get of a volume on a missing partition answers OK (never Err)", str(st))
    c(s is not None and s.get("state") == "partition-missing", "Status shows the partition missing",
      str(s and s.get("state")))
    st, j = tb.call("/VolumeDriver.List", {})
    c("da1" in [v["Name"] for v in j.get("Volumes", [])], "List still has the volume")
    r = tb.call("/VolumeDriver.Mount", {"Name": "da1", "ID": "m1"})
    c(is_err(r), "Mount on a missing partition gives an Err", str(r))
    if is_err(r):
        c.note("Mount Err: %s" % r[1]["Err"][:200])
    c(not [m for m in tb.prop_mounts() if m["target"].endswith("/da1")], "no bind for da1")
    r = tb.call("/VolumeDriver.Remove", {"Name": "da1"})
    c(is_err(r), "Remove on a missing partition is refused (data not forgotten)", str(r))
    c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": "db1", "ID": "m2"})), "other partition still mounts")
    c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "db1", "ID": "m2"})), "other partition still unmounts")
    # 3. The device returns: it must be found by a rescan, without a restart (the README's promise).
    # (--sabotage: it returns only after the first Mount, which then cannot find it: the check must fail.)
    def attach():
        tb.loops[0] = run(["losetup", "--find", "--show", "--direct-io=on", img]).stdout.strip()
        if shutil.which("udevadm"):
            subprocess.run(["udevadm", "settle"], check=False, stderr=subprocess.DEVNULL)
        time.sleep(1.2)   # past the daemon's rescan interval
    if not SABOTAGE:
        attach()
    r = tb.call("/VolumeDriver.Mount", {"Name": "da1", "ID": "m3"})
    c(is_ok(r), "the volume mounts again once its partition is back, found by a rescan (no restart)", str(r))
    if not is_ok(r):
        # The rest of the scenario still runs, after a restart.
        if SABOTAGE:
            attach()
        tb.stop()
        tb.start()
        r = tb.call("/VolumeDriver.Mount", {"Name": "da1", "ID": "m3"})
        c(is_ok(r), "the volume mounts after a restart once its partition is back", str(r))
    if is_ok(r):
        c(read_sentinel(tb, "da1") == "da1 data\n", "data intact after the partition came back")
        c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "da1", "ID": "m3"})), "unmount da1")
    st, s = status_of(tb, "da1")
    c(s is not None and s.get("state") == "ready", "Status ready again", str(s and s.get("state")))
    for n in ("da1", "db1"):
        c(is_ok(tb.call("/VolumeDriver.Remove", {"Name": n})), "remove " + n)


def scenario_corrupt(c, tb):
    c.scenario = "corrupt"
    la, lb = tb.labels
    for n, l in (("ra1", la), ("ra2", la), ("rb1", lb)):
        c(is_ok(tb.call("/VolumeDriver.Create", {"Name": n, "Opts": {"partition": l, "uid": "999"}})),
          "create " + n)
    write_sentinel(tb, "ra1", "ra1 data\n")
    path, rec, original = tb.record("ra1")
    variants = {"truncated": original[:len(original) // 2], "empty": b"", "null": b"null",
                "garbage": os.urandom(200), "wrong-crc": original.replace(b'"uid":"999"', b'"uid":"998"'),
                "nul-bytes": b"\0" * 64}
    for kind, data in variants.items():
        c.scenario = "corrupt/" + kind
        tb.stop()
        with open(path, "wb") as f:
            f.write(data)
        try:
            tb.start()
        except RuntimeError as e:
            c(False, "daemon starts with a corrupt record", str(e)[:300])
            return
        st, s = status_of(tb, "ra1")
        c(st == 200, "Get of the corrupt volume answers OK", str(st))
        c(s is not None and s.get("state") == "record-unreadable", "Status reports the bad record",
          str(s and s.get("state")))
        r = tb.call("/VolumeDriver.Mount", {"Name": "ra1", "ID": "m1"})
        c(is_err(r), "Mount refuses the corrupt volume", str(r))
        c(not [m for m in tb.prop_mounts() if m["target"].endswith("/ra1")], "no bind for the corrupt volume")
        c(is_err(tb.call("/VolumeDriver.Create", {"Name": "ra1", "Opts": {"partition": la, "uid": "999"}})),
          "Create over the corrupt volume refused")
        for n in ("ra2", "rb1"):
            c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": n, "ID": "m1"})), "mount " + n)
            c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": n, "ID": "m1"})), "unmount " + n)
        c(read_sentinel(tb, "ra1") == "ra1 data\n", "the corrupt volume's data is untouched")
        st, j = tb.call("/VolumeDriver.List", {})
        c("ra1" in [v["Name"] for v in j.get("Volumes", [])], "the corrupt volume is still listed")
    c.scenario = "corrupt/restored"
    tb.stop()
    with open(path, "wb") as f:
        f.write(original)
    tb.start()
    c(is_ok(tb.call("/VolumeDriver.Mount", {"Name": "ra1", "ID": "m1"})), "restored record mounts again")
    c(is_ok(tb.call("/VolumeDriver.Unmount", {"Name": "ra1", "ID": "m1"})), "unmount ra1")
    for n in ("ra1", "ra2", "rb1"):
        c(is_ok(tb.call("/VolumeDriver.Remove", {"Name": n})), "remove " + n)


SABOTAGE = False
SCENARIOS = {"full": scenario_full, "shutdown": scenario_shutdown, "corrupt": scenario_corrupt,
             "missing": scenario_missing}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--binary", default=None)
    ap.add_argument("--sabotage", action="store_true",
                    help="missing: the partition returns only after the Mount that should find it (must fail)")
    args = ap.parse_args()
    global SABOTAGE
    SABOTAGE = args.sabotage
    c = Checks()
    results = {}
    for name in args.scenarios:
        before = len(c.failed)
        tb = Testbed(nparts=2, tag="flt" + name[0], binary=args.binary)
        try:
            tb.start()
            SCENARIOS[name](c, tb)
            c.scenario = name
            c(tb.alive(), "daemon alive at the end")
            c(tb.canary_intact(), "CANARY unchanged")
            tb.stop()
            for rep in tb.sanitizer_reports():
                c(False, "sanitizer report", rep[:1500])
        except Exception as e:   # a harness error is a failed check, never a silent pass
            c(False, "scenario raised", repr(e))
            log(tb.log_tail())
        finally:
            tb.cleanup()
        results[name] = "ok" if len(c.failed) == before else "FAIL(%d)" % (len(c.failed) - before)
    print("faults: checks=%d failed=%d %s" % (c.n, len(c.failed), " ".join("%s=%s" % kv for kv in results.items())))
    for n in c.notes:
        print("  note " + n)
    for f in c.failed:
        print("  FAILED " + f)
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
