#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Power loss: every write the daemons' requests made, replayed up to each flush, and checked.

Runs inside the qemu guest of tests/qemu/run-powerloss-tests.sh (Debian's kernel: dm-log-writes,
dm-snapshot, XFS project quota). One data disk holds the pool partitions and the state directory,
and those of a second daemon that stands for the other node of send/receive and move
(device-mapper linear slices over one dm-log-writes target), so one log orders every write and
flush of both nodes. Phases:

1. record: the real daemons on the slices, driven over their plugin and admin sockets and the
   command, through Create (with and without owner, mode and limits, pinned and placed), Mount,
   Unmount, Remove, clones of a volume in use and not, resize, set, a kill -9 inside a request
   and the start-up recovery after it, a graceful restart, snapshot (of a volume in use and
   not), a Remove refused for its snapshots, rollback, snapshot-rm, import of a pax archive,
   release, fence, a Mount refused while fenced, unfence, send into receive on the other node
   (a full stream, then an incremental one), volume move to the other node (idle; and live: a
   pass while mounted, the unmount, the fence, the final pass), a Mount there, a restart with
   one pool disk gone, forget of its volumes, the disk coming back (served read-only) and adopt,
   a Create on it, evacuate of that partition to the other one, uncordon, cordon and a Create
   placed around it; a mark in the log before each request ("B<k>") and after its answer ("A<k>");
2. replay (logwrites.py): the disk rebuilt at cut points, onto a copy of the disk as it was
   when logging began, under a dm-snapshot: every answer (what was acknowledged), every
   flush/FUA point (or a seeded sample: --mark-sample, --flush-sample, and --focus: every answer
   of some kinds and a flush point inside each; --reorders-in: the reordered and torn cuts only
   inside requests of some kinds), --reorders points inside a flush epoch where a
   random subset of the epoch's writes, in random order, reached the disk, and --torn ones where,
   besides, one write of several 4 KiB blocks reached it only in part (a prefix of its blocks);
3. at each cut (both nodes lose power at once): the XFS mounts (a disk that was away at the cut
   is left away), both daemons start on them, every volume acknowledged before the cut is there
   as it was acknowledged (partition, owner, mode, options, limits as the kernel enforces them,
   its files, its fence; a clone complete and independent of its source; its snapshots committed
   with the tree of their instant and their IDs, each removed one gone; after a rollback, an
   import or a receive exactly the snapshot's, the archive's or the sent snapshot's tree, a
   received snapshot with the sender's ID), a volume acknowledged fenced refuses a Mount, a
   forgotten volume unlisted and without index entry while its disk is away (its record and files
   still on that disk), every acknowledged Remove stays gone, each volume whole on exactly one
   partition, the cordons as acknowledged, the one request in flight either done or not (never
   half): for a receive or a move, one of the states its steps pass through in their order, for
   all its volumes at once (so never the other node's copy with the final pass while the source
   is not fenced); no temp file, no quarantine, no stray index entry, records and index pass their
   CRC, mount counts agree with the binds; then `xfs_repair -n` is clean on every filesystem.

It prints one line of figures and "N passed, N failed" (one test per cut point, plus the
recording). --sabotage records the daemons with NVMEVOL_TEST_SKIP_FSYNC=file (a test build: the
atomic write of state files skips the fsync of the file before its rename), =snapshot (only for
the snapshot records) or =fence (only for a record that holds a fence), and is one test that
passes only if a cut reports a violation.
"""

import argparse
import copy
import faulthandler
import io
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logwrites  # noqa: E402
import nvtlib  # noqa: E402

MiB = 1 << 20
SLICE = 320 * MiB          # one XFS each (mkfs.xfs wants at least 300 MB)
TORN_UNIT = 4096           # a torn write persists a prefix of its 4 KiB blocks (see cut_plan)
SLICE_OFF = MiB            # the disk's first MiB holds nothing, so no superblock is found on the disk itself
PREFIX = "pwl-"
STATE_LABEL = "pwlstate"   # not under PREFIX: the daemon must not take it
# The other node of send/receive and move: a second daemon with its own state directory and pool
# partition (its own label prefix), on slices of the same data disk, so one log orders both nodes'
# writes. Its volumes are "n2:NAME" in the workload's model.
NODE2 = "n2:"
PREFIX2 = "pwn-"
STATE2_LABEL = "pwnstate"
OTHER_NODE = "pwl-node2"   # the host name a move fences its source with


def log(*a):
    print(*a, file=sys.stderr, flush=True)


SH_TIMEOUT = 180  # seconds: a tool that hangs (mount, xfs_repair, dmsetup) fails the run with where, not the guest's timeout


def blocked_tasks():
    """The tasks in D state with their kernel stacks: what a hung tool waits on."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
            if st.rsplit(")", 1)[1].split()[0] != "D":
                continue
            with open("/proc/%s/stack" % pid) as f:
                out.append("%s %s\n%s" % (pid, st.split("(", 1)[1].rsplit(")", 1)[0], f.read().strip()))
        except (OSError, IndexError):
            continue
    return "\n".join(out) or "(none)"


def sh(*cmd, check=True):
    # Not subprocess.run(timeout=): after its timeout it kills the child and then waits for it without
    # a bound, forever when the child sleeps uninterruptibly (D state) in the kernel; here the run fails
    # naming the tool whether or not the kill takes.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, DM_DISABLE_UDEV="1"))
    try:
        out, _ = p.communicate(timeout=SH_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        try:
            p.wait(timeout=5)
            how = "killed"
        except subprocess.TimeoutExpired:
            how = "still there after SIGKILL (uninterruptible)"
        log("%s did not end in %d s (%s); tasks in D state:\n%s\ndmesg:\n%s" % (
            " ".join(cmd), SH_TIMEOUT, how, blocked_tasks(), dmesg_tail()))
        raise RuntimeError("%s did not end in %d s (stacks and dmesg in the log above)" % (" ".join(cmd), SH_TIMEOUT))
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, out.strip()))
    return subprocess.CompletedProcess(cmd, p.returncode, out)


def dmesg_tail(n=3000):
    try:
        return subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=30).stdout[-n:]
    except (OSError, subprocess.TimeoutExpired) as e:
        return "(dmesg: %r)" % e


def sectors(dev):
    return int(sh("blockdev", "--getsz", dev).stdout.strip())


def slices(nparts):
    """(dm name, label, offset in bytes) of each filesystem on the data disk: this node's state
    directory and @nparts pool partitions, then the other node's state directory and partition
    (the labels and offsets tests/qemu/run-powerloss-tests.sh gives them)."""
    out = [("pwl-st", STATE_LABEL, SLICE_OFF)]
    for i in range(nparts):
        out.append(("pwl-p%d" % i, PREFIX + chr(ord("a") + i), SLICE_OFF + (i + 1) * SLICE))
    out.append(("pwl-n2st", STATE2_LABEL, SLICE_OFF + (nparts + 1) * SLICE))
    out.append(("pwl-n2p0", PREFIX2 + "a", SLICE_OFF + (nparts + 2) * SLICE))
    return out


def dm_create(name, table):
    sh("dmsetup", "create", name, "--table", table)
    sh("dmsetup", "mknodes", name, check=False)
    return "/dev/mapper/" + name


def dm_remove(*names):
    """Removes the device-mapper devices @names (one dmsetup for all: each run costs a second under TCG
    on a loaded host), retrying while one is still busy."""
    left = list(names)
    for _ in range(50):
        left = [n for n in left if os.path.exists("/dev/mapper/" + n)]
        if not left or sh("dmsetup", "remove", *left, check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("dmsetup remove %s failed: %s" % (" ".join(left), sh("dmsetup", "info", *left,
                                                                             check=False).stdout))


def make_slices(under, nparts, only=None):
    """The slices of @nparts partitions (and the state's) over @under; @only: just these labels (one
    dmsetup for all of them)."""
    spec = ";".join("%s,,,rw,0 %d linear %s %d" % (name, SLICE // 512, under, off // 512)
                    for name, label, off in slices(nparts) if only is None or label in only)
    if spec:
        sh("dmsetup", "create", "--concise", spec)
        sh("dmsetup", "mknodes", check=False)


def remove_slices(nparts):
    dm_remove(*[name for name, _, _ in slices(nparts)])


def slice_of(label, nparts):
    return next(name for name, lb, _ in slices(nparts) if lb == label)


class Bed(nvtlib.Testbed):
    """The daemon on the data disk's slices: nvtlib's Testbed without its loop devices."""

    def __init__(self, base, binary, env, prefix=PREFIX):
        self.binary = binary
        self.base = base
        self.prefix = prefix
        self.sock = os.path.join(base, "s.sock")
        self.admin_sock = os.path.join(base, "nvmevol-admin.sock")
        self.state = os.path.join(base, "state")
        self.prop = os.path.join(base, "prop")
        self.parts = os.path.join(base, "parts")
        self.loops, self.labels = [], []
        self.proc = self.logf = None
        self.logpath = os.path.join(base, "daemon.log")
        self.starts = 0
        self.extra_env = dict(env)
        self._cleaned = True   # nothing of nvtlib's cleanup: the suite unmounts what it mounted
        os.makedirs(self.state, exist_ok=True)

    def admin(self, *args):
        """`nvmevol ARGS --socket ADMIN --json`: (exit status, parsed output or the text)."""
        r = subprocess.run([self.binary, *args, "--socket", self.admin_sock, "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=self.env(), timeout=120)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            out = (r.stdout + r.stderr).strip()
        return r.returncode, out

    def unmount_all(self, keep_state=False):
        for m in sorted(self.our_mounts(), key=lambda m: -len(m["target"])):
            if keep_state and m["target"] == self.state:
                continue
            if sh("umount", m["target"], check=False).returncode:
                sh("umount", "-l", m["target"], check=False)


# ---- the workload ----

def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fence_host(status):
    """The host a volume's Status says it was moved to (fenced), or None."""
    return (status.get("moved_to") or {}).get("host") if status.get("fenced") else None


class EnoughOps(Exception):
    pass


def move_steps(key, dst, before, src_after, dst_after, passes, tree):
    """The states a move of @key (spec @before) to @dst passes through, in order, as [{key: spec, dst:
    spec}], ending as the daemons showed them after it (@src_after, @dst_after); @passes: its
    snapshots, the last one the final pass's; @tree: the volume's files (nothing writes it meanwhile).
    The steps (cmd-move.c): per pass, the snapshot here, the receive there (its state and its snapshot
    at once, a full one's too: src/README.md, "Send and receive"), the previous pass's snapshot removed
    here, then there; before
    the final pass, the fence. With live passes the copy there is fenced toward this node after the
    first one, and unfenced after the final pass (before the snapshots are dropped)."""
    here = os.uname().nodename   # what the plugin names this node (nodepin.c)
    seq = [{key: before, dst: None}]

    def step(k, change):
        st = copy.deepcopy(seq[-1])
        st[k] = change(st[k])
        seq.append(st)

    def with_snap(sp, sn, add):
        sp = copy.deepcopy(sp)
        if add:
            sp["snaps"][sn] = tree
            sp["snap_ids"][sn] = src_after["snap_ids"].get(sn)   # None (not checked) for a removed one
        else:
            sp["snaps"].pop(sn, None)
            sp["snap_ids"].pop(sn, None)
        return sp
    for i, sn in enumerate(passes):
        last = i == len(passes) - 1
        if last:
            step(key, lambda sp: dict(copy.deepcopy(sp), fenced=src_after["fenced"]))
        step(key, lambda sp: with_snap(sp, sn, True))
        if i == 0:
            step(dst, lambda sp: with_snap(dict(copy.deepcopy(dst_after), snaps={}, snap_ids={}), sn, True))
        else:
            step(dst, lambda sp: with_snap(sp, sn, True))
        if i == 0 and not last:
            step(dst, lambda sp: dict(copy.deepcopy(sp), fenced=here))
        if last and i > 0:
            step(dst, lambda sp: dict(copy.deepcopy(sp), fenced=dst_after["fenced"]))
        if i > 0:
            step(key, lambda sp: with_snap(sp, passes[i - 1], False))
            step(dst, lambda sp: with_snap(sp, passes[i - 1], False))
    return seq


class Workload:
    """Drives the daemons and keeps, after each request, what it acknowledged (self.after[k])."""

    def __init__(self, bed, bed2, mark, nparts, rnd, max_ops=None, sections=None):
        self.bed, self.bed2, self.mark, self.nparts, self.rnd, self.max_ops = bed, bed2, mark, nparts, rnd, max_ops
        self.sections = sections
        self.model = {}          # name -> what Get showed right after the last acknowledged change
        self.ops = []            # (kind, touched names, ok, what)
        self.after = []          # self.after[k]: the model after op k
        self.missing = set()     # labels of the pool partitions detached just now
        self.missing_after = []  # self.missing after op k: the disks a cut there starts the daemon with
        self.cordons = set()     # labels of this node's cordoned partitions
        self.cordons_after = []  # self.cordons after op k
        self.timelines = {}      # k -> [{name: spec}]: the states op k passes through, for all its names at once
        self.unexpected = []

    def node(self, key):
        """(testbed, volume name) of a name of the model: "n2:NAME" is volume NAME of the other node."""
        return (self.bed2, key[len(NODE2):]) if key.startswith(NODE2) else (self.bed, key)

    def snapshot(self, key):
        """The volume as the daemon shows it right after an answer: what must survive."""
        bed, name = self.node(key)
        st, j = bed.get(name)
        if st != 200:
            return None
        s = j["Volume"]["Status"]
        q = s.get("quota") or {}
        spec = dict(part=s["partition"]["label"], owner=s.get("owner"), mode=s.get("mode"),
                    options=s.get("options"), quota={k: q.get(k) for k in ("project_id", "limit_bytes", "limit_inodes",
                                                                            "enforced_limit_bytes",
                                                                            "enforced_limit_inodes")},
                    files={}, clone_of=None, exact=False, snaps={}, forgotten=False, fenced=fence_host(s),
                    snap_ids={x["name"]: x.get("id") for x in s.get("snapshots") or []})
        old = self.model.get(key)
        if old:
            spec["files"], spec["clone_of"], spec["exact"] = old["files"], old["clone_of"], old["exact"]
            spec["snaps"] = {n: f for n, f in old["snaps"].items()}
        listed = {x["name"] for x in s.get("snapshots") or []}
        spec["snaps"] = {n: f for n, f in spec["snaps"].items() if n in listed}
        for n in listed - set(spec["snaps"]):
            spec["snaps"][n] = None   # set by the snapshot op that took it
        return spec

    def refresh(self, names=None):
        """After a restart or a partition coming back: what Get shows of every volume on a present disk."""
        for n in sorted(self.model if names is None else names):
            old = self.model.get(n)
            if old and old["part"] in self.missing:
                continue   # Get shows a volume on a missing disk without its details: keep them
            spec = self.snapshot(n)
            if spec is None and old and old["forgotten"]:
                continue
            self.model[n] = spec

    def read_cordons(self):
        """The labels of this node's partitions that Status shows cordoned."""
        st, j = self.bed.admin_call("/Admin.Status", {}, timeout=60)
        return {p.get("label") for p in (j or {}).get("partitions") or [] if p.get("cordoned")}

    def op(self, kind, names, fn, expect_ok=True, refresh_all=False):
        k = len(self.ops)
        if self.max_ops is not None and k >= self.max_ops:
            raise EnoughOps()
        self.mark("B%d" % k)
        ok, what = fn()
        self.mark("A%d" % k)
        if ok != expect_ok:
            self.unexpected.append("%s %s: %s" % (kind, names, what))
        self.refresh(None if refresh_all else names)
        if kind in ("cordon", "uncordon", "evacuate"):
            self.cordons = self.read_cordons()
        self.ops.append((kind, tuple(names), ok, str(what)[:200]))
        self.after.append(copy.deepcopy(self.model))
        self.missing_after.append(set(self.missing))
        self.cordons_after.append(set(self.cordons))
        return ok

    def amend(self, name, **kw):
        """Adds to the acknowledged state of @name what Get does not show (files, snapshots' trees)."""
        if self.model.get(name):
            self.model[name].update(kw)
            self.after[-1] = copy.deepcopy(self.model)

    def api(self, endpoint, body, key=""):
        bed = self.node(key)[0]

        def fn():
            try:
                st, j = bed.call(endpoint, body, timeout=120)
            except OSError as e:
                return False, e
            return st == 200 and not (j or {}).get("Err"), j
        return fn

    def create(self, name, expect_ok=True, **opts):
        return self.op("create", [name], self.api("/VolumeDriver.Create",
                                                  {"Name": name, "Opts": {k: str(v) for k, v in opts.items()}}),
                       expect_ok)

    def clone(self, name, source):
        ok = self.op("clone", [name], self.api("/VolumeDriver.Create", {"Name": name, "Opts": {"from": source}}))
        if ok:
            self.amend(name, files=dict(self.model[source]["files"]), clone_of=source)
        return ok

    def mount(self, key, mid, expect_ok=True):
        return self.op("mount", [key], self.api("/VolumeDriver.Mount", {"Name": self.node(key)[1], "ID": mid}, key),
                       expect_ok)

    def unmount(self, key, mid):
        return self.op("unmount", [key], self.api("/VolumeDriver.Unmount", {"Name": self.node(key)[1], "ID": mid},
                                                  key))

    def remove(self, name, expect_ok=True):
        return self.op("remove", [name], self.api("/VolumeDriver.Remove", {"Name": name}), expect_ok)

    def admin(self, kind, key, *args, expect_ok=True):
        return self.op(kind, [key], self.admin_fn(kind, key, *args), expect_ok)

    def write_files(self, name, files, remove=()):
        """Files a user writes into the volume (and @remove: deletes), made durable (file and directory
        fsync'd): an op of its own, since a later clone or snapshot must hold them."""
        def fn():
            d = self.bed.volume_dir(name)
            for rel, content in files.items():
                p = os.path.join(d, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())
                for dd in (os.path.dirname(p), d):
                    fsync_dir(dd)
            for rel in remove:
                os.unlink(os.path.join(d, rel))
                fsync_dir(os.path.dirname(os.path.join(d, rel)))
                self.model[name]["files"].pop(rel, None)
            self.model[name]["files"].update(files)
            return True, ""
        return self.op("write", [name], fn)

    def restart(self, how, detach=None):
        """Stops the daemon (SIGTERM, or SIGKILL inside a Create) and starts it: start-up recovery is
        recorded too. @detach: the pool partition (label) whose disk goes away while it is stopped.
        The op is acknowledged by the restart, whatever the interrupted request did."""
        k = len(self.ops)
        if self.max_ops is not None and k >= self.max_ops:
            raise EnoughOps()
        name = "killed%d" % k
        self.mark("B%d" % k)
        if how == "kill":
            # A Create with a limit and a clone: many calls to be inside of.
            t = self.rnd.choice([0.0, 0.01, 0.03, 0.08])
            p = subprocess.Popen([sys.executable, "-c", CALL_SNIPPET, self.bed.sock, name, PREFIX + "a"])
            time.sleep(t)
            self.bed.kill(signal.SIGKILL)
            p.wait()
        else:
            self.bed.stop()
        if detach:
            self.bed.unmount_all(keep_state=True)   # the partitions and binds the daemon left mounted
            dm_remove(slice_of(detach, self.nparts))
            self.missing.add(detach)
        self.bed.start(timeout=120)
        self.mark("A%d" % k)
        names = [name] if how == "kill" else []
        self.refresh(names)
        self.refresh()
        self.ops.append(("restart-" + how + ("-without-" + detach if detach else ""), tuple(names), True, ""))
        self.after.append(copy.deepcopy(self.model))
        self.missing_after.append(set(self.missing))
        self.cordons_after.append(set(self.cordons))

    def attach(self, label, under):
        """The detached disk comes back while the daemon runs: it serves it read-only (not adopted)."""
        def fn():
            self.missing.discard(label)
            name = slice_of(label, self.nparts)
            off = next(o for n, _, o in slices(self.nparts) if n == name)
            dm_create(name, "0 %d linear %s %d" % (SLICE // 512, under, off // 512))
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                self.bed.get("no-such-volume")   # a Get of an unknown name asks for a rescan
                if len(self.bed.partition_mounts()) == self.nparts:
                    return True, ""
                time.sleep(0.5)
            return False, "the daemon did not mount the disk that came back"
        return self.op("attach", [], fn, refresh_all=True)

    def adopt(self, label):
        def fn():
            rc, out = self.bed.admin("partition", "adopt", label)
            return rc == 0, out
        return self.op("adopt", [], fn, refresh_all=True)

    def snap(self, name, snap):
        """`volume snapshot`: answered, it is committed with the volume's tree of that instant."""
        tree = nvtlib.files_below(self.bed.volume_dir(name))
        ok = self.op("snapshot", [name], self.admin_fn("snapshot", name, snap))
        if ok and self.model.get(name) and snap in self.model[name]["snaps"]:
            self.model[name]["snaps"][snap] = tree
            self.after[-1] = copy.deepcopy(self.model)
        return ok

    def rollback(self, name, snap):
        """`volume rollback`: answered, the volume holds the snapshot's tree and nothing else."""
        tree = self.model[name]["snaps"][snap]
        ok = self.op("rollback", [name], self.admin_fn("rollback", name, snap))
        if ok:
            self.amend(name, files=dict(tree), exact=True)
        return ok

    def import_tar(self, name, tree, *opts):
        """`volume import NAME < TAR` of a pax archive made here: answered, the volume exists with
        the archive's tree, and nothing of it is visible before."""
        path = os.path.join(self.bed.base, "import.tar")
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
            dirs = sorted({os.path.dirname(r)[:i] for r in tree for i in range(len(r)) if r[i:i + 1] == "/"})
            for d in dirs:
                ti = tarfile.TarInfo(d)
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            for rel, content in sorted(tree.items()):
                ti = tarfile.TarInfo(rel)
                ti.size, ti.mode, ti.uid, ti.gid, ti.mtime = len(content), 0o644, 1000, 1000, 1700000000
                t.addfile(ti, io.BytesIO(content))

        def fn():
            with open(path, "rb") as f:
                r = subprocess.run([self.bed.binary, "volume", "import", name, *opts, "--socket", self.bed.admin_sock],
                                   stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=self.bed.env(), timeout=300)
            return r.returncode == 0, r.stdout
        ok = self.op("import", [name], fn)
        if ok:
            self.amend(name, files=dict(tree), exact=True)
        return ok

    def release(self, name):
        """`volume release` (the admin request: Docker's answer is the command's part): answered, the
        counts are cleared and stay cleared."""
        def fn():
            rc, out = self.bed.admin("volume", "show", name)
            ids = (out.get("Admin") or {}).get("mount_ids") if isinstance(out, dict) else None
            st, j = self.bed.admin_call("/Admin.VolumeRelease", {"Name": name, "Expect": ids or {}}, timeout=120)
            return st == 200 and not (j or {}).get("Err"), j
        return self.op("release", [name], fn)

    def forget(self, name):
        """`volume forget` of a volume whose disk is gone: answered, its index entry is gone (so it is
        not listed while the disk is away) and its record and data stay on the disk."""
        ok = self.op("forget", [name], self.admin_fn("forget", name))
        if ok and self.after[-2].get(name):
            self.model[name] = dict(copy.deepcopy(self.after[-2][name]), forgotten=True)
            self.after[-1] = copy.deepcopy(self.model)
        return ok

    def admin_fn(self, kind, key, *args):
        bed, name = self.node(key)

        def fn():
            rc, out = bed.admin("volume", kind, name, *args)
            return rc == 0, out
        return fn

    def fence(self, key, host):
        """`volume fence`: answered, the record says moved to @host, and no Mount is served."""
        return self.admin("fence", key, host)

    def unfence(self, key):
        return self.admin("unfence", key)

    def receive(self, src, snap, dst, base=None):
        """`volume send SRC --snapshot SNAP [--from BASE] | volume receive` into @dst (a name of either
        node): answered, @dst holds exactly SNAP's tree and has SNAP with the sender's ID; in flight,
        either its previous state or that one: the snapshot is taken before the commit and settled
        with it, so no cut leaves the new tree without SNAP (src/README.md, "Send and receive")."""
        sbed, sname = self.node(src)
        dbed, dname = self.node(dst)
        tree = self.model[src]["snaps"][snap]
        before = copy.deepcopy(self.model.get(dst))

        def fn():
            cmd = [sbed.binary, "volume", "send", sname, "--snapshot", snap] + (["--from", base] if base else [])
            snd = subprocess.Popen(cmd + ["--socket", sbed.admin_sock], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=sbed.env())
            r = subprocess.run([dbed.binary, "volume", "receive", dname, "--json", "--socket", dbed.admin_sock],
                               stdin=snd.stdout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dbed.env(), timeout=300)
            snd.stdout.close()
            err = snd.stderr.read().decode(errors="replace")
            snd.wait(timeout=60)
            return snd.returncode == 0 and r.returncode == 0, r.stdout + err
        ok = self.op("receive", [dst], fn)
        if not ok or not self.model.get(dst):
            return ok
        after = self.model[dst]
        after["files"], after["exact"] = dict(tree), True
        after["snaps"][snap] = tree
        if after["snap_ids"].get(snap) != self.model[src]["snap_ids"].get(snap):
            self.unexpected.append("receive %s: snapshot %s has ID %s, the sender's is %s" % (
                dst, snap, after["snap_ids"].get(snap), self.model[src]["snap_ids"].get(snap)))
        self.after[-1] = copy.deepcopy(self.model)
        self.timelines[len(self.ops) - 1] = [{dst: before}, {dst: copy.deepcopy(after)}]
        return ok

    def via_script(self):
        """The --via of a move: `ssh node2` stood for by a script that runs the command against the other
        daemon (called as `SCRIPT nvmevol ARGS...`)."""
        b = self.bed2
        path = os.path.join(self.bed.base, "node2")
        env = " ".join("%s='%s'" % (k, v) for k, v in sorted(b.env().items()) if k.startswith("NVMEVOL_"))
        with open(path, "w") as f:
            f.write("#!/bin/sh\nshift\nexec env %s '%s' \"$@\" --socket '%s'\n" % (env, b.binary, b.admin_sock))
        os.chmod(path, 0o755)
        return path

    def move(self, key, unmount=None):
        """`volume move NAME --via SCRIPT` to the other node. @unmount: the volume is mounted with this ID;
        the move makes a live pass, waits for the unmount (done here once it says it waits), fences,
        then the final pass. Answered: the source fenced with the last snapshot, the other node's copy
        with the source's tree and that snapshot (same ID). In flight: one of the states the move's
        steps pass through, in their order (src/README.md, "Move"); never the other node's copy
        with the final pass while the source is not fenced."""
        bed, name = self.node(key)
        dst = NODE2 + name
        tree = nvtlib.files_below(bed.volume_dir(name))
        before = copy.deepcopy(self.model[key])
        out = {}

        def fn():
            p = subprocess.Popen([bed.binary, "volume", "move", name, "--via", self.via_script(), "--node", OTHER_NODE,
                                  "--json", "--socket", bed.admin_sock], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=bed.env())
            err = ""
            if unmount:
                for line in p.stderr:
                    err += line
                    if "is in use" in line:
                        st, j = bed.call("/VolumeDriver.Unmount", {"Name": name, "ID": unmount}, timeout=120)
                        err += "unmount: %s %s\n" % (st, j)
                        break
            o, e = p.communicate(timeout=600)
            try:
                out.update(json.loads(o))
            except ValueError:
                pass
            return p.returncode == 0, (o + err + e)[-400:]
        ok = self.op("move", [key, dst], fn)
        passes = [x["snapshot"] for x in out.get("passes") or []]
        if not ok or not passes or not self.model.get(key) or not self.model.get(dst):
            if ok:
                self.unexpected.append("move %s: no passes in its answer, or a side missing: %s" % (name, out))
            return ok
        src_after, dst_after = self.model[key], self.model[dst]
        for sp in (src_after, dst_after):
            sp["snaps"] = {n: tree for n in sp["snaps"]}
        dst_after["files"], dst_after["exact"] = dict(tree), True
        if src_after["snap_ids"] != dst_after["snap_ids"]:
            self.unexpected.append("move %s: snapshot IDs %s here, %s there" % (name, src_after["snap_ids"],
                                                                              dst_after["snap_ids"]))
        self.after[-1] = copy.deepcopy(self.model)
        seq = move_steps(key, dst, before, src_after, dst_after, passes, tree)
        if seq[-1] != {key: src_after, dst: dst_after}:
            self.unexpected.append("move %s: its steps end in %s, the daemons show %s" % (
                name, seq[-1], {key: src_after, dst: dst_after}))
        self.timelines[len(self.ops) - 1] = seq
        return ok

    def partition(self, verb, label, *args, touched=()):
        """`partition cordon|uncordon|evacuate LABEL`: answered, the cordon as Status shows it survives;
        an evacuated volume is whole on the partition Get named after the answer (in flight, each one
        on its old partition or its new one)."""
        def fn():
            rc, out = self.bed.admin("partition", verb, label, *args)
            return rc == 0, out
        return self.op(verb, list(touched), fn, refresh_all=True)

    def run(self):
        for sec in ("base", "snapshots", "release", "fence", "send", "move", "detach", "evacuate"):
            if self.sections is None or sec in self.sections:
                getattr(self, "run_" + sec)()

    def run_base(self):
        a, b = PREFIX + "a", PREFIX + ("b" if self.nparts > 1 else "a")
        self.create("own", uid=1000, gid=1001, mode="0750", partition=a)
        self.create("lim", size="64M", inodes=2000, partition=b)
        self.create("plain")
        self.create("both", size="32M", uid=7, gid=7, mode="0700")
        self.mount("own", "m1")
        self.write_files("own", {"data.bin": b"own data\n" * 300, "sub/x": b"x"})
        self.mount("own", "m2")
        self.unmount("own", "m1")
        self.create("src", partition=a)
        self.write_files("src", {"data.bin": b"source data\n" * 500, "sub/a": b"a", "big": os.urandom(300000)})
        self.clone("cl-idle", "src")
        self.mount("src", "s1")
        self.clone("cl-busy", "src")
        self.unmount("src", "s1")
        self.admin("resize", "lim", "128M", "--inodes", "4000")
        self.admin("resize", "plain", "16M")
        self.admin("set", "own", "selftest=warn", "min_write_mbps=1")
        self.admin("set", "lim", "suid=true")
        self.remove("plain")
        self.remove("cl-idle")
        self.unmount("own", "m2")
        self.remove("own")
        self.restart("kill")
        self.create("own", uid=2000, gid=2000, mode="0755", size="8M")
        self.clone("cl-2", "cl-busy")
        self.write_files("cl-2", {"after-clone": b"only in the clone"})
        self.restart("term")
        self.remove("both")
        self.admin("resize", "lim", "none", "--inodes", "none")
        self.create("late", partition=b, size="4M")
        self.remove("src")

    def run_snapshots(self):
        a, b = PREFIX + "a", PREFIX + ("b" if self.nparts > 1 else "a")
        self.create("sv", partition=a, size="64M")
        self.write_files("sv", {"data.bin": b"first state\n" * 400, "sub/keep": b"k", "big": os.urandom(200000)})
        self.snap("sv", "s1")
        self.mount("sv", "k1")
        self.write_files("sv", {"data.bin": b"second state\n" * 300, "later": b"after s1"})
        self.snap("sv", "s2")                    # of a volume in use
        self.unmount("sv", "k1")
        self.remove("sv", expect_ok=False)       # refused: it has snapshots; nothing changes
        self.rollback("sv", "s1")
        self.op("snapshot-rm", ["sv"], self.admin_fn("snapshot-rm", "sv", "s2"))
        self.import_tar("imp", {"top": b"imported\n" * 200, "d/e/f": b"deep", "zeros": bytes(12288) + b"end"},
                        "-o", "partition=" + b, "-o", "size=32M", "-o", "uid=1000", "-o", "gid=1000")

    def run_release(self):
        self.create("rel", partition=PREFIX + "a")
        self.mount("rel", "r1")
        self.mount("rel", "r1")
        self.mount("rel", "r2")
        self.release("rel")

    def run_detach(self):
        # The disk of the last partition goes (with the daemon stopped), its volumes are forgotten,
        # it comes back while the daemon runs (read-only) and is adopted; a Create lands on it.
        b = PREFIX + ("b" if self.nparts > 1 else "a")
        self.restart("term", detach=b)
        for n in ("lim", "imp"):
            if self.model.get(n) and self.model[n]["part"] == b:
                self.forget(n)
        self.attach(b, "/dev/mapper/pwl-lw")
        self.adopt(b)
        self.create("adopted", partition=b, size="8M")


    def run_fence(self):
        a = PREFIX + "a"
        self.create("fx", partition=a, size="16M")
        self.write_files("fx", {"data.bin": b"fenced data\n" * 200})
        self.fence("fx", OTHER_NODE)
        self.mount("fx", "f1", expect_ok=False)   # refused: fenced
        self.unfence("fx")
        self.mount("fx", "f2")
        self.unmount("fx", "f2")

    def run_send(self):
        # A full stream, then an incremental one (a file changed, one added, one deleted), into the other node.
        a = PREFIX + "a"
        self.create("tx", partition=a, size="64M", uid=1000, gid=1000, mode="0750")
        self.write_files("tx", {"data.bin": b"sent first\n" * 500, "sub/keep": b"k", "sub/gone": b"g",
                                "big": os.urandom(200000)})
        self.snap("tx", "t1")
        self.receive("tx", "t1", NODE2 + "tx")
        self.write_files("tx", {"data.bin": b"sent second\n" * 300, "new": b"n"}, remove=["sub/gone"])
        self.snap("tx", "t2")
        self.receive("tx", "t2", NODE2 + "tx", base="t1")

    def run_move(self):
        # An idle move (fence, then its one pass) and a live one (a pass while mounted, the unmount,
        # the fence, the final pass); each source refuses a Mount after it, the other node serves it.
        a = PREFIX + "a"
        self.create("mv", partition=a, size="32M")
        self.write_files("mv", {"data.bin": b"moved idle\n" * 400, "d/x": b"x"})
        self.move("mv")
        self.mount("mv", "x1", expect_ok=False)
        self.create("mvl", partition=a)
        self.write_files("mvl", {"data.bin": b"moved live\n" * 400, "big": os.urandom(100000)})
        self.mount("mvl", "l1")
        self.move("mvl", unmount="l1")
        self.mount(NODE2 + "mvl", "there")

    def run_evacuate(self):
        # Two volumes more on the last partition (files, limits), then all its volumes to the first,
        # its cordon lifted; then the first cordoned: an
        # unpinned Create goes elsewhere (with one partition it is refused), and the cordon is lifted.
        a, b = PREFIX + "a", PREFIX + "b"
        if self.nparts > 1:
            self.create("ev1", partition=b, size="16M", uid=1000, gid=1000, mode="0750")
            self.write_files("ev1", {"data.bin": b"evacuated\n" * 500, "d/e": b"e", "big": os.urandom(150000)})
            self.create("ev2", partition=b, inodes=500)
            self.write_files("ev2", {"x": b"x" * 5000})
            on_b = [n for n, sp in sorted(self.model.items()) if sp and sp["part"] == b and not n.startswith(NODE2)]
            self.partition("evacuate", b, "--to", a, touched=on_b)
            left = [n for n in on_b if self.model.get(n) and self.model[n]["part"] != a]
            if left:
                self.unexpected.append("evacuate %s: still on it after the answer: %s" % (b, left))
            self.partition("uncordon", b)
        self.partition("cordon", a)
        if self.nparts > 1:
            self.create("placed")
            if self.model.get("placed") and self.model["placed"]["part"] == a:
                self.unexpected.append("create placed: placed on the cordoned partition %s" % a)
        else:
            self.create("placed", expect_ok=False)   # the only partition is cordoned
        self.partition("uncordon", a)


# A Create that the kill interrupts (a child, so the parent's kill does not wait on its answer).
CALL_SNIPPET = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30)
try:
    s.connect(sys.argv[1])
    b = json.dumps({"Name": sys.argv[2], "Opts": {"size": "16M", "partition": sys.argv[3]}}).encode()
    s.sendall(b"POST /VolumeDriver.Create HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
    s.recv(4096)
except OSError:
    pass
"""


# ---- the checks at a cut ----

class Expected:
    """What a cut after the marks @marks_before (names, in log order) must find.

    model: the acknowledged volumes; either: {name: (spec before, spec after)} of the request in
    flight, each name independently one or the other; timeline: [{name: spec}], the states the
    request in flight passes through (a receive, a move), one of which must hold for all its names
    at once; inflight: its index or None; missing: labels of the disks away (in flight, as after the
    op: a detach or an attach is not a write); cordons: the acceptable sets of cordoned labels."""

    def __init__(self, wl, marks_before):
        self.model, self.either, self.timeline, self.inflight = {}, {}, [], None
        self.missing, self.cordons = set(), [set()]
        if not marks_before:
            return
        last = marks_before[-1]
        k = int(last[1:])
        self.missing = wl.missing_after[k]
        if last[0] == "A":
            self.model, self.cordons = wl.after[k], [wl.cordons_after[k]]
            return
        self.inflight = k
        self.model = wl.after[k - 1] if k > 0 else {}
        self.cordons = [wl.cordons_after[k - 1] if k > 0 else set(), wl.cordons_after[k]]
        if wl.ops[k][0] == "write":
            # A user's overwrite is not atomic: at a cut inside it, the files it rewrites or deletes may
            # hold the old content, the new, or a part of either; the rest of the volume is as before.
            self.model = copy.deepcopy(self.model)
            for n in wl.ops[k][1]:
                before, after = self.model.get(n), wl.after[k].get(n)
                if not before or not after:
                    continue
                touched = {r for r in set(before["files"]) | set(after["files"])
                           if before["files"].get(r) != after["files"].get(r)}
                before["files"] = {r: c for r, c in before["files"].items() if r not in touched}
                before["exact"] = before["exact"] and not touched
            return
        if k in wl.timelines:
            self.timeline = wl.timelines[k]
        else:
            self.either = {n: (self.model.get(n), wl.after[k].get(n)) for n in wl.ops[k][1]}

    def names(self):
        return set(self.model) | set(self.either) | {n for st in self.timeline for n in st}


def first_limit_step(wl, k, before_after):
    """The state between the two commits of a first limit's resize (nvmevol(8): "a volume created
    without limits is first given its own project ID"): the volume as before, with its own
    project ID and no limit. Found by kill -9 as well; counted, not a violation."""
    before, after = before_after
    if wl.ops[k][0] != "resize" or not before or not after or before["quota"].get("project_id") is not None:
        return []
    mid = copy.deepcopy(before)
    mid["quota"] = {key: 0 for key in before["quota"]}
    mid["quota"]["project_id"] = after["quota"]["project_id"]
    return [mid]


def evacuate_step(wl, k, before_after):
    """An evacuation interrupted before its commit: the volume as before, on its old partition, with
    the snapshot evacuate-N of its pass, marked "evacuation" (nvmevol-plugin(7), SNAPSHOTS: kept as
    the next run's base, listed, removable). Found by kill -9 as well (crashpoints-evacuate)."""
    before, _ = before_after
    if wl.ops[k][0] != "evacuate" or not before:
        return []
    mid = copy.deepcopy(before)
    mid["evacuating"] = True
    return [mid]


def snapshot_problems(root, name, spec, status):
    """Why the snapshots of @name (Get's Status.snapshots, and their trees under @root) are not the
    acknowledged ones: each answered snapshot listed and committed with its tree, each answered
    snapshot-rm gone, nothing pending, no record or data without the other, no rollback leftover."""
    bad = []
    listed = sorted(x["name"] for x in status.get("snapshots") or [])
    # evacuate_step(): an evacuation's own snapshot (marked "evacuation") may be there besides.
    acked = sorted(x["name"] for x in status.get("snapshots") or []
                   if not (spec.get("evacuating") and x.get("evacuation")))
    if acked != sorted(spec["snaps"]):
        bad.append("snapshots %s, acknowledged %s" % (listed, sorted(spec["snaps"])))
    store = os.path.join(root, "nvmevol", "snapshots", name)
    for snap, tree in spec["snaps"].items():
        if tree is None or snap not in listed:
            continue
        got = nvtlib.files_below(os.path.join(store, "data", snap))
        if got != tree:
            bad.append("snapshot %s holds %s, taken with %s" % (snap, sorted(got), sorted(tree)))
    meta = sorted(os.listdir(os.path.join(store, "meta"))) if os.path.isdir(os.path.join(store, "meta")) else []
    if meta != sorted(n + ".json" for n in listed):
        bad.append("snapshot records %s, listed %s" % (meta, listed))
    data = sorted(os.listdir(os.path.join(store, "data"))) if os.path.isdir(os.path.join(store, "data")) else []
    if data != listed:
        bad.append("snapshot data directories %s, listed %s" % (data, listed))
    if os.path.lexists(os.path.join(store, "rollback")):
        bad.append("a rollback's leftover %s/rollback after the start" % store)
    return bad


def volume_problems(bed, name, spec, view, missing=()):
    """Why the volume as found (@view) is not @spec (None: must be absent); @missing: labels of
    partitions whose disk is away at this cut."""
    if spec is None:
        return ["present, but it was never acknowledged or its Remove was"] if view.present else []
    if spec["part"] in missing:
        # Its disk is away: listed (from the index) unless forgotten; its data are checked on the disk.
        if spec["forgotten"]:
            bad = ["forgotten, but listed while its disk is away"] if view.present else []
            return bad + (["forgotten, but its index entry is back"] if view.index is not None else [])
        if not view.present:
            return ["on a disk that is away, acknowledged, but not listed (Get: %s %s)" %
                    (view.get_status, str(view.get)[:200])]
        return []
    if not view.present:
        return ["acknowledged but gone (Get: %s %s)" % (view.get_status, str(view.get)[:200])]
    bad = []
    s = view.status
    if s.get("partition", {}).get("label") != spec["part"]:
        bad.append("on %s, acknowledged on %s" % (s.get("partition", {}).get("label"), spec["part"]))
    for key in ("owner", "mode", "options"):
        if s.get(key) != spec[key]:
            bad.append("%s %s, acknowledged %s" % (key, s.get(key), spec[key]))
    if fence_host(s) != spec.get("fenced"):
        bad.append("fenced to %s, acknowledged %s" % (fence_host(s), spec.get("fenced")))
    ids = {x["name"]: x.get("id") for x in s.get("snapshots") or []}
    for snap, want in (spec.get("snap_ids") or {}).items():
        if want and snap in ids and ids[snap] != want:
            bad.append("snapshot %s has ID %s, acknowledged %s" % (snap, ids[snap], want))
    q = s.get("quota") or {}
    for key, want in spec["quota"].items():
        if q.get(key) != want:
            bad.append("quota %s %s, acknowledged %s" % (key, q.get(key), want))
    d = bed.volume_dir(name)
    if d is None:
        return bad + ["no directory on any partition"]
    if spec["exact"]:
        got = nvtlib.files_below(d)
        if sorted(got) != sorted(spec["files"]):
            bad.append("holds %s, acknowledged %s" % (sorted(got), sorted(spec["files"])))
    for rel, content in spec["files"].items():
        try:
            with open(os.path.join(d, rel), "rb") as f:
                got = f.read()
        except OSError as e:
            bad.append("file %s: %s" % (rel, e.strerror))
            continue
        if got != content:
            bad.append("file %s holds %d bytes, not the %d written" % (rel, len(got), len(content)))
    return bad + snapshot_problems(os.path.dirname(os.path.dirname(os.path.dirname(d))), name, spec, s)


def on_disk_problems(root, name, spec):
    """A volume on a disk that was away at the cut (forgotten or not): its record and tree stay."""
    bad = []
    if not os.path.isfile(os.path.join(root, "nvmevol", "meta", name + ".json")):
        bad.append("its record is gone from its disk")
    d = os.path.join(root, "nvmevol", "volumes", name)
    got = nvtlib.files_below(d) if os.path.isdir(d) else None
    if got is None:
        return bad + ["its directory is gone from its disk"]
    for rel, content in spec["files"].items():
        if got.get(rel) != content:
            bad.append("file %s not as written" % rel)
    return bad


def clone_independent(bed, name, spec):
    """Writes into the clone and rewrites a shared file; the source must not change."""
    src = spec["clone_of"]
    sd, cd = bed.volume_dir(src), bed.volume_dir(name)
    if not sd or not cd:
        return []
    before = nvtlib.files_below(sd)
    try:
        with open(os.path.join(cd, "data.bin"), "r+b") as f:
            f.write(b"CLONE")
        with open(os.path.join(cd, "new-in-clone"), "wb") as f:
            f.write(b"n")
    except OSError as e:
        return ["clone %s cannot be written: %s" % (name, e)]
    return [] if nvtlib.files_below(sd) == before else ["writing clone %s changed its source %s" % (name, src)]


def node_problems(bed, names, label):
    """What the daemon of @bed left that no volume accounts for (@names: its volumes, acknowledged or
    in flight): temp files, quarantine, imports, stray index entries."""
    bad = ["%sleft behind: %s" % (label, x) for x in nvtlib.leftovers(bed)]
    for r in bed.fs_roots():
        d = os.path.join(r, "nvmevol", "imports")
        for x in os.listdir(d) if os.path.isdir(d) else []:
            bad.append("%sleft behind: an import's directory nvmevol/imports/%s after the start" % (label, x))
    idx = os.path.join(bed.state, "index")
    for x in os.listdir(idx) if os.path.isdir(idx) else []:
        nm = x[:-5] if x.endswith(".json") else x
        if nm not in names:
            bad.append("%sstray index entry %s" % (label, x))
    return bad


def fence_serves(bed, name, spec):
    """A Mount of a volume acknowledged fenced must be refused: a served one is stale data on two nodes."""
    st, j = bed.call("/VolumeDriver.Mount", {"Name": name, "ID": "pwl-check-fence"}, timeout=60)
    if st == 200 and not (j or {}).get("Err"):
        bed.call("/VolumeDriver.Unmount", {"Name": name, "ID": "pwl-check-fence"}, timeout=60)
        return ["fenced (moved to %s) but a Mount was served: %s" % (spec["fenced"], j)]
    return []


def cordon_problems(bed, exp):
    """The cordons this node's Status shows against the acknowledged ones (a disk away is not judged)."""
    st, j = bed.admin_call("/Admin.Status", {}, timeout=60)
    if st != 200 or not isinstance(j, dict):
        return ["Status answered %s %s" % (st, j)]
    shown = {p.get("label"): bool(p.get("cordoned")) for p in j.get("partitions") or []}
    got = {lb for lb, on in shown.items() if on and lb not in exp.missing}
    wants = [c - exp.missing for c in exp.cordons]
    if got in wants:
        return []
    return ["cordoned partitions %s, acknowledged %s" % (sorted(got), " or ".join(str(sorted(w)) for w in wants))]


def check_cut(bed, bed2, wl, nparts, marks_before, counts, under):
    """Starts both daemons on the rebuilt slices (the disks away at the cut left out) and returns the
    violations found."""
    bad = []
    exp = Expected(wl, marks_before)
    model, either, inflight, missing = exp.model, exp.either, exp.inflight, exp.missing
    make_slices(under, nparts, only={lb for _, lb, _ in slices(nparts)} - set(missing))
    for dev, b in (("/dev/mapper/pwl-st", bed), ("/dev/mapper/pwl-n2st", bed2)):
        if sh("mount", "-t", "xfs", dev, b.state, check=False).returncode:
            sh("umount", bed.state, check=False)
            return ["the state filesystem %s does not mount: %s" % (dev, sh("dmesg", check=False).stdout[-400:])]
    away = []   # (name, spec) of volumes on a disk away at the cut: checked on the disk afterwards
    fenced = []  # (bed, volume name, spec) of the volumes the cut must find fenced
    try:
        t = time.monotonic()
        for b, label, want in ((bed, "", nparts - len(missing)), (bed2, "the other node: ", 1)):
            try:
                b.start(timeout=120)
            except RuntimeError as e:
                return ["%sthe daemon does not start: %s" % (label, str(e)[-600:])]
            mounted = b.partition_mounts()
            t1 = time.monotonic()
            while len(mounted) < want and time.monotonic() - t1 < 90:
                # A device whose superblock is not read within the daemon's probe deadline (2 s; TCG on a
                # loaded host) is skipped until it answers: a Get of an unknown name asks for the rescan.
                b.get("pwl-no-such-volume")
                time.sleep(0.5)
                mounted = b.partition_mounts()
            if time.monotonic() - t1 > 1:
                counts["slow_probe"] = counts.get("slow_probe", 0) + 1
            if len(mounted) != want:
                bad.append("%sthe daemon mounted %d of %d partitions: %s" % (label, len(mounted), want, b.log_tail(8)))
        counts["start_s"] = counts.get("start_s", 0) + time.monotonic() - t
        t = time.monotonic()
        names = exp.names()
        for b, pre in ((bed, ""), (bed2, NODE2)):
            st, j = b.call("/VolumeDriver.List", {})
            listed = {pre + v["Name"] for v in (j or {}).get("Volumes") or []}
            for n in sorted(listed - names):
                bad.append("List has %s, never acknowledged nor in flight" % n)
        views = {}
        for n in sorted(names):
            b, vn = wl.node(n)
            v = views[n] = nvtlib.VolumeView(b, vn)
            spec = model.get(n)
            if spec and spec["part"] in missing:
                probs = ["%s: %s" % (n, p) for p in volume_problems(b, vn, spec, v, missing)]
                if v.index is not None and not nvtlib.crc_trailer_ok(v.index):
                    probs.append("%s: index entry fails its CRC" % n)
                away.append((n, spec))
                bad += probs
                continue
            probs = ["%s: %s" % (n, p) for p in nvtlib.consistency_problems(b, v)]
            if any(n in st for st in exp.timeline):
                bad += probs   # its specs are judged below, with the other names of the timeline
                continue
            if n in either:
                specs = list(either[n]) + first_limit_step(wl, inflight, either[n]) + \
                    evacuate_step(wl, inflight, either[n])
                alts = [volume_problems(b, vn, sp, v, missing) for sp in specs]
                if wl.ops[inflight][0] == "resize" and len(alts) > 2 and alts[0] and alts[1] and not alts[2]:
                    counts["first_limit_id_only"] = counts.get("first_limit_id_only", 0) + 1
                if all(alts):
                    probs += ["%s (op %d %s in flight): neither before nor after it: %s" %
                              (n, inflight, wl.ops[inflight][0], "; ".join(alts[0] + ["|"] + alts[1]))]
                spec = next((sp for sp, a in zip(specs, alts) if not a), specs[0])
            else:
                probs += ["%s: %s" % (n, p) for p in volume_problems(b, vn, spec, v, missing)]
            if spec and spec["clone_of"] and v.present and not probs:
                probs += clone_independent(b, vn, spec)
            if spec and spec.get("fenced") and v.present:
                fenced.append((b, vn, spec))
            bad += probs
        if exp.timeline:
            # One of the request's states, for all its names at once (a move's copy there with the final
            # pass and its source not fenced matches none).
            tried = []
            for i, st in enumerate(exp.timeline):
                probs = []
                for n in sorted(st):
                    b, vn = wl.node(n)
                    probs += ["%s: %s" % (n, p) for p in volume_problems(b, vn, st[n], views[n], missing)]
                if not probs:
                    fenced += [(wl.node(n)[0], wl.node(n)[1], sp) for n, sp in st.items()
                               if sp and sp.get("fenced") and views[n].present]
                    counts["timeline_state_%d" % i] = counts.get("timeline_state_%d" % i, 0) + 1
                    break
                tried.append((len(probs), i, probs))
            else:
                _, i, probs = min(tried)
                bad.append("op %d %s in flight: none of its %d states holds; the closest (state %d): %s" % (
                    inflight, wl.ops[inflight][0], len(exp.timeline), i, "; ".join(probs[:6])))
        for b, vn, spec in fenced:
            bad += ["%s%s: %s" % (NODE2 if b is bed2 else "", vn, p) for p in fence_serves(b, vn, spec)]
        bad += cordon_problems(bed, exp)
        bad += node_problems(bed, {n for n in names if not n.startswith(NODE2)}, "")
        bad += node_problems(bed2, {n[len(NODE2):] for n in names if n.startswith(NODE2)}, "the other node: ")
        counts["volumes_s"] = counts.get("volumes_s", 0) + time.monotonic() - t
    finally:
        for b in (bed, bed2):
            b.stop() if b.alive() else None
            b.unmount_all()
            sh("umount", b.state, check=False)
    if missing:
        # The disks that were away: attached now, each volume acknowledged on one still there.
        make_slices(under, nparts, only=set(missing))
        chk = os.path.join(bed.base, "away")
        os.makedirs(chk, exist_ok=True)
        for label in sorted(missing):
            dev = "/dev/mapper/" + slice_of(label, nparts)
            # With prjquota, as the daemon mounts it: a mount without quota skips the dquot items of log
            # recovery, so a dquot block the log alone held is left as it was on disk (xfs_repair -n:
            # "bad CRC for id N") where the daemon's own mount would have recovered it.
            if sh("mount", "-t", "xfs", "-o", "prjquota", dev, chk, check=False).returncode:
                bad.append("the disk %s that was away does not mount" % label)
                continue
            try:
                for n, spec in away:
                    if spec["part"] == label:
                        bad += ["%s (disk away): %s" % (n, p) for p in on_disk_problems(chk, n, spec)]
            finally:
                sh("umount", chk, check=False)
    t = time.monotonic()
    for name, label, _ in slices(nparts):
        r = sh("xfs_repair", "-n", "/dev/mapper/" + name, check=False)
        if r.returncode != 0:
            # What it found, without its progress lines.
            found = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith(("Phase ", "        - "))
                     and "No modify flag" not in ln]
            bad.append("xfs_repair -n %s (%s): exit %d: %s" % (label, name, r.returncode, " / ".join(found[:8])[:600]))
    counts["repair_s"] = counts.get("repair_s", 0) + time.monotonic() - t
    return bad


# ---- record, then replay ----

def record(args, bed, bed2, rnd):
    size = sectors(args.data)
    lw = dm_create("pwl-lw", "0 %d log-writes %s %s" % (size, args.data, args.log))
    make_slices(lw, args.parts)

    def mark(name):
        sh("dmsetup", "message", "pwl-lw", "0", "mark", name)

    sh("mount", "-t", "xfs", "/dev/mapper/pwl-st", bed.state)
    sh("mount", "-t", "xfs", "/dev/mapper/pwl-n2st", bed2.state)
    t0 = time.monotonic()
    bed.start(timeout=120)
    bed2.start(timeout=120)
    wl = Workload(bed, bed2, mark, args.parts, rnd, args.ops, args.sections.split(",") if args.sections else None)
    try:
        wl.run()
    except EnoughOps:
        pass
    finally:
        for b in (bed, bed2):
            b.stop() if b.alive() else None
            b.unmount_all()
            sh("umount", b.state, check=False)
        remove_slices(args.parts)
        dm_remove("pwl-lw")   # logs the remaining writes and writes the super block's final count
    return wl, time.monotonic() - t0


def cut_plan(lg, args, rnd, wl):
    """[(position, kind, reorder)]: position = entries applied; reorder = (start, writes) or None."""
    # A cut at each answer ("A<k>"): a "B<k>" mark has the state of the answer before it, plus
    # the user's own fsync'd files at most.
    marks = [i for i, m in lg.marks() if m.startswith("A")]
    if args.sabotage and args.mark_sample is not None:
        marks = marks[:args.mark_sample]   # the first answers: a missing flush shows from the first Create on
    elif args.mark_sample is not None and args.mark_sample < len(marks):
        marks = sorted(rnd.sample(marks, args.mark_sample))
    flushes = lg.flush_points()
    plan = {(i + 1, "mark", None) for i in marks}
    if args.flush_sample is None:
        chosen = flushes
    else:
        chosen = rnd.sample(flushes, min(args.flush_sample, len(flushes)))
    plan |= {(f + 1, "flush", None) for f in chosen}
    # --focus: every answer of these kinds, and one flush/FUA point while each was in flight.
    focus = set(filter(None, args.focus.split(",")))
    at = {m: i for i, m in lg.marks()}
    for k, (kind, _, _, _) in enumerate(wl.ops):
        if kind in focus and "A%d" % k in at:
            plan.add((at["A%d" % k] + 1, "mark", None))
            inside = [f for f in flushes if at.get("B%d" % k, len(lg.entries)) < f < at["A%d" % k]]
            if inside:
                plan.add((rnd.choice(inside) + 1, "flush", None))
    # Epochs: the writes logged between two FLUSH entries, with no mark among them (else the
    # requests in flight are not one). Before the flush that ends one completed, a disk with a
    # volatile cache may have persisted any subset of its plain writes, in any order; its FUA
    # writes were durable once complete (they are logged as they complete, so all of them had
    # by the flush), and the flush's own data lands after all of them (PREFLUSH): never in.
    epochs = []
    prev = 0
    for e in lg.entries:
        if e.flags & logwrites.FLUSH:
            span = lg.entries[prev:e.index]
            ws = [x.index for x in span if x.is_write() and not x.flags & logwrites.FUA]
            fua = [x.index for x in span if x.is_write() and x.flags & logwrites.FUA]
            if ws and not any(x.mark is not None for x in span):
                epochs.append((prev, ws, fua))
            prev = e.index + 1
    if args.reorders_in:
        # Only the epochs inside a request of these kinds (the last mark before the epoch is its "B").
        kinds = tuple(filter(None, args.reorders_in.split(",")))
        marks_at = sorted(lg.marks())

        def inside(start):
            last = [m for i, m in marks_at if i < start]
            return bool(last) and last[-1].startswith("B") and int(last[-1][1:]) < len(wl.ops) \
                and wl.ops[int(last[-1][1:])][0].startswith(kinds)
        epochs = [ep for ep in epochs if inside(ep[0])]
    out = sorted(plan)
    # The larger epochs first (most hold one plain write: the data a log force then commits).
    big = [ep for ep in epochs if len(ep[1]) >= 2]
    pool = big if len(big) >= args.reorders else epochs
    for start, ws, fua in rnd.sample(pool, min(args.reorders, len(pool))):
        # The plain writes first: one to a sector a FUA write also wrote never covers the durable one.
        sub = rnd.sample(ws, rnd.randint(1, len(ws)))   # all of them: the flush's own data alone missing
        out.append((start, "reorder", tuple(sub + fua)))
    # Torn writes: as a reordering, and the last plain write applied is one of several 4 KiB blocks
    # of which only the first ones persisted (a prefix; each 4 KiB block is atomic). Only data
    # writes tear: XFS's own metadata buffers (REQ_META, logged as METADATA) are not modelled torn,
    # since its log recovery takes an inode buffer's LSN from its first inode and skips the buffer
    # when that one is current, so a 16 KiB inode cluster torn after its first 4 KiB is an XFS
    # corruption (xfs_repair -n failed on one at a CI cut) that no order of nvmevol's writes can
    # prevent; a torn log write XFS finds by its CRC.
    blk = max(1, TORN_UNIT // lg.sectorsize)

    def tears(i):
        return lg.entries[i].nr_sectors >= 2 * blk and not lg.entries[i].flags & logwrites.METADATA
    tearable = [(start, ws, fua) for start, ws, fua in epochs if any(tears(i) for i in ws)]
    for start, ws, fua in rnd.sample(tearable, min(args.torn, len(tearable))):
        big = [i for i in ws if tears(i)]
        t = rnd.choice(big)
        rest = [i for i in ws if i != t]
        sub = rnd.sample(rest, rnd.randint(0, len(rest)))
        n = lg.entries[t].nr_sectors
        keep = blk * rnd.randint(1, (n - 1) // blk)
        out.append((start, "torn", tuple(sub + [(t, keep)] + fua)))
    out.sort(key=lambda c: (c[0], c[1] not in ("reorder", "torn")))
    return out


def op_named(wl, mark):
    """ ": <kind> <names>" of the request a mark ("B<k>"/"A<k>") brackets, for a cut's line."""
    k = int(mark[1:])
    return (": %s %s" % (wl.ops[k][0], " ".join(wl.ops[k][1]))).rstrip() if k < len(wl.ops) else ""


def replay(args, bed, bed2, wl, lg, rnd, counts):
    rp = logwrites.Replayer(lg, args.replay)
    cow_size = sectors(args.replay)
    names = {i: m for i, m in lg.marks()}
    plan = cut_plan(lg, args, rnd, wl)
    log("powerloss: %d cut points to replay (%d entries, %d flush/FUA points, %d marks)" %
        (len(plan), len(lg.entries), len(lg.flush_points()), len(names)))
    failed = 0
    for n, (pos, kind, sub) in enumerate(plan):
        rp.advance(pos)
        # A persistent store keeps its header in the scratch disk's first chunk: no copy of an XFS
        # superblock ever lands at its offset 0, where the daemon's libblkid scan would find it.
        # Zeroed, the header makes a new, empty store.
        fd = os.open(args.cow, os.O_WRONLY)
        os.pwrite(fd, bytes(4096), 0)
        os.fsync(fd)
        os.close(fd)
        snap = dm_create("pwl-snap", "0 %d snapshot %s %s P 8" % (cow_size, args.replay, args.cow))
        if sub:
            fd = os.open(snap, os.O_RDWR)
            for i in sub:
                # (index, sectors): a torn write, only its first sectors persisted
                i, nsec = i if isinstance(i, tuple) else (i, None)
                rp.apply(lg.entries[i], fd, nsec)
            os.fsync(fd)
            os.close(fd)
        before = [m for i, m in sorted(names.items()) if i < pos and m.startswith(("A", "B"))]
        t = time.monotonic()
        try:
            bad = check_cut(bed, bed2, wl, args.parts, before, counts, snap)
        except Exception as e:   # noqa: BLE001 - a check that cannot finish is a failed cut, not a stop
            tb = traceback.extract_tb(e.__traceback__)[-1]
            xfs = [ln for ln in sh("dmesg", check=False).stdout.splitlines() if "XFS" in ln][-4:]
            bad = ["the check failed: %r at %s:%d (%s); kernel: %s" % (e, tb.filename, tb.lineno, tb.line,
                                                                         " / ".join(xfs))]
        finally:
            dm_remove(*[name for name, _, _ in slices(args.parts)], "pwl-snap")   # the slices over it first
        counts[kind] = counts.get(kind, 0) + 1
        counts["check_s"] = counts.get("check_s", 0) + time.monotonic() - t
        torn = [x for x in sub or () if isinstance(x, tuple)]
        what = "%s at entry %d (after mark %s%s)%s%s" % (
            kind, pos, before[-1] if before else "-", op_named(wl, before[-1]) if before else "",
            " with %d writes of its epoch" % len(sub) if sub else "",
            ", entry %d torn after %d of its %d sectors" % (torn[0][0], torn[0][1], lg.entries[torn[0][0]].nr_sectors)
            if torn else "")
        # Under --sabotage a violation is what is looked for: its lines are not test results.
        tag = ("REPORTED" if bad else "MISSED") if args.sabotage else ("FAIL" if bad else "PASS")
        if bad:
            failed += 1
            counts["violations"] = counts.get("violations", 0) + len(bad)
        print("[%s] powerloss: %s" % (tag, what), flush=True)
        for b in bad[:12]:
            print("    %s" % b, flush=True)
    rp.close()
    return len(plan), failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--replay", required=True, help="holds the data disk as it was before recording")
    ap.add_argument("--cow", required=True, help="scratch disk for the snapshots")
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--mark-sample", type=int, default=None, help="replay this many answers (default all)")
    ap.add_argument("--flush-sample", type=int, default=None, help="replay this many flush points (default all)")
    ap.add_argument("--reorders", type=int, default=20)
    ap.add_argument("--torn", type=int, default=10, help="replay this many epochs with one write torn")
    ap.add_argument("--sections", default=None,
                    help="the parts of the workload, comma separated: base,snapshots,release,fence,send,move,"
                         "detach,evacuate (default all)")
    ap.add_argument("--focus", default="",
                    help="op kinds (comma separated) whose every answer is replayed, and one flush/FUA point "
                         "while each is in flight, besides the samples")
    ap.add_argument("--reorders-in", default="",
                    help="op kinds (comma separated, a prefix each: restart matches restart-term-without-pwl-b) "
                         "whose flush epochs alone the reordered and torn cuts are taken from")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--sabotage", nargs="?", const="file", choices=("file", "snapshot", "fence"), default=None,
                    help="NVMEVOL_TEST_SKIP_FSYNC=file (every state file), =snapshot (snapshot records only) or "
                         "=fence (the record of a fence only)")
    ap.add_argument("--ops", type=int, default=None, help="stop the workload after this many requests")
    ap.add_argument("--binary", default=nvtlib.default_binary())
    args = ap.parse_args()
    # The guest's watchdog (run-powerloss-tests.sh) sends SIGUSR1 to a recording that runs past its
    # budget: where each thread of this script is, written to a file the watchdog prints and sums up
    # in one line (CI shows only the end of a run), before it kills the recording.
    faulthandler.register(signal.SIGUSR1, file=open("/tmp/powerloss-threads.txt", "w"), all_threads=True)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print("powerloss: seed %d (--seed %d replays it), %d partition(s)%s" %
          (seed, seed, args.parts, ", SABOTAGE" if args.sabotage else ""), flush=True)
    rnd = random.Random(seed)
    # Nothing reaches the disk but what someone flushes: no periodic write-back, no XFS log worker.
    for k, v in (("vm/dirty_writeback_centisecs", "0"), ("vm/dirty_expire_centisecs", "360000"),
                 ("vm/dirty_background_ratio", "90"), ("vm/dirty_ratio", "90"),
                 ("fs/xfs/xfssyncd_centisecs", "720000")):
        with open("/proc/sys/" + k, "w") as f:
            f.write(v)
    # A snapshot's freeze (snapshot, receive, move) takes seconds under TCG on a loaded host: the
    # default budget of 1 s failed a receive's snapshot at a load of 20 (what test-daemon-move sets).
    env = {"NVMEVOL_SELFTEST": "off", "NVMEVOL_CLONE_FREEZE_BUDGET_MS": "20000"}
    if args.sabotage:
        env["NVMEVOL_TEST_SKIP_FSYNC"] = args.sabotage
    base = "/tmp/pwl%d" % args.parts
    os.makedirs(base, exist_ok=True)
    bed = Bed(base, args.binary, env)
    bed2 = Bed(base + "n2", args.binary, env, prefix=PREFIX2)
    t0 = time.monotonic()
    wl, rec_s = record(args, bed, bed2, rnd)
    for u in wl.unexpected:
        log("powerloss: unexpected answer: %s" % u)
    print("[%s] powerloss: recording on %d partition(s) (%d requests, %d unexpected answers)" %
          ("FAIL" if wl.unexpected else "PASS", args.parts, len(wl.ops), len(wl.unexpected)), flush=True)
    lg = logwrites.Log(args.log)
    counts = {}
    for b in (bed, bed2):
        b.extra_env.pop("NVMEVOL_TEST_SKIP_FSYNC", None)   # the daemon at each cut is the real one
    cuts, failed = replay(args, bed, bed2, wl, lg, rnd, counts)
    fl = lg.flush_points()
    print("powerloss figures: parts=%d ops=%d entries=%d writes=%d flush_points=%d marks=%d cuts=%d "
          "mark_cuts=%d flush_cuts=%d reorder_cuts=%d torn_cuts=%d violations=%d failed_cuts=%d record_s=%.0f "
          "first_limit_id_only=%d slow_probe=%d check_s_per_cut=%.1f start_s_per_cut=%.1f volumes_s_per_cut=%.1f repair_s_per_cut=%.1f "
          "seconds=%.0f seed=%d"
          % (args.parts, len(wl.ops), len(lg.entries), sum(e.is_write() for e in lg.entries), len(fl),
             len(lg.marks()), cuts, counts.get("mark", 0), counts.get("flush", 0), counts.get("reorder", 0), counts.get("torn", 0),
             counts.get("violations", 0), failed, rec_s, counts.get("first_limit_id_only", 0), counts.get("slow_probe", 0),
             counts.get("check_s", 0) / max(cuts, 1), counts.get("start_s", 0) / max(cuts, 1),
             counts.get("volumes_s", 0) / max(cuts, 1), counts.get("repair_s", 0) / max(cuts, 1),
             time.monotonic() - t0, seed), flush=True)
    lg.close()
    if args.sabotage:
        # One test: passes when the missing flush was reported at a cut.
        print("[%s] powerloss-sabotage-%s: the skipped fsync was reported at %d of %d cuts (%d violations)" %
              ("PASS" if failed else "FAIL", args.sabotage, failed, cuts, counts.get("violations", 0)), flush=True)
        print("%d passed, %d failed" % (1 if failed else 0, 0 if failed else 1), flush=True)
        return 0 if failed else 1
    ok = cuts - failed + (0 if wl.unexpected else 1)
    print("%d passed, %d failed" % (ok, failed + (1 if wl.unexpected else 0)), flush=True)
    return 0 if failed == 0 and not wl.unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
