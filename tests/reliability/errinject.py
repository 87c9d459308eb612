#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Error injection at every step: each mutating syscall of Create, Mount, Unmount and
Remove, of Create with from= (a clone of a volume not in use, and of one in use), and of
start-up recovery, is made to FAIL in turn; the request (or the start) goes on, and the
result is checked right away and again after a restart.

Operations. For each operation the daemon's calls are traced once (strace -f) and every
call that changes state is a point: openat for writing or creating, write to such a file,
fsync, fdatasync, renameat(2), mkdirat, unlinkat, fchown, fchmod, open_tree,
mount_setattr, move_mount, umount2, mount, and ioctl that sets file attributes (only with
size=/inodes=, which this host's kernel cannot do) or clones (FICLONE, FIFREEZE, FITHAW);
a clone's symlinkat, linkat, mknodat, utimensat, fsetxattr, fchownat, fchmodat,
ftruncate, pwrite64, fallocate and syncfs too (a clone must also hold its source's files,
link and hard link, and leave the source as it was). For
each point and each errno of the matrix below, the volume is brought to the operation's
precondition through the API with a data file written into it, strace attaches with
`-e inject=SYSCALL:error=ERRNO:when=N` (strace counts N per thread: the request's thread,
and also a thread it starts such as the trash worker), the request runs to its answer, and:
  - an Err must mean nothing changed: the same record bytes (state included), index entry,
    directory (owner, mode, data file content), mount counts and binds in mountinfo;
  - a success must mean the operation took effect (created with owner and mode; mounted,
    counted, data readable through the bind; unmounted; removed with nothing left);
  - the volume is fully there or fully gone; records, index, counts, Status and mountinfo
    agree; every state file passes its CRC; a bind is the volume's directory from its
    partition's device (maj:min in mountinfo) with noatime,nodiratime,nosuid,nodev (ro
    when the partition is); the partition mount is the whole XFS of its device with
    noatime,nodiratime,nosuid,nodev and private; no temp file, no quarantined directory,
    no stray mount;
and the same again after a restart of the daemon (SIGTERM, start), plus an empty trash.

Errnos: EIO for every call (what a failing disk gives), ENOSPC where space is allocated
(openat with O_CREAT, write, fsync/fdatasync, mkdirat), EROFS where a read-only remount
(XFS after an error) refuses changes (openat for writing, mkdirat, renameat, unlinkat),
EPERM for ownership and mount calls (fchown, fchmod, open_tree, mount_setattr, move_mount,
mount, umount2, ioctl: a missing capability, an LSM), EBUSY for umount2 (a mount in use).

Admin operations (the admin socket and the `nvmevol` command, which is not traced: only the
daemon's calls fail): a snapshot taken of an idle volume, its removal, a rollback to it after
the data changed, `volume export` (its temporary snapshot, the bind, the close), `volume
import` of an archive into a new volume, `volume receive` of a full stream and of an
incremental one (streams and archive made once, before the points), move's fence
(/Admin.VolumeFence) and the evacuation of an idle volume's partition (on a testbed of two
partitions of its own). Each point is checked right away and after a restart:
  - a failure (an Err, or the command's exit status 1 or 2 with a message) changed nothing:
    the same volume (record bytes, index, counts, binds, owner, files), the same snapshots
    listed and on disk with the same files, the same fence, the same partition; so a failed
    import or full receive leaves no volume, a failed incremental receive or rollback the
    previous state, a failed export no snapshot (and never a cut archive with status 0);
  - a success took effect: the snapshot listed with the volume's files, or gone; the
    volume rolled back to the snapshot's files; the archive is the volume's files; the
    import's and receive's volume holds the archive's or stream's files with the stream's
    snapshots; the record names the fence's host; the evacuated volume is on the other
    partition with its data;
  - a fenced volume refuses a Mount naming the host it went to; one not fenced is served;
  - the snapshots listed and those on disk agree; after the restart nothing is left in
    nvmevol/imports/ or beside the volume's snapshots (a rollback's or receive's work
    directory), and the common checks above hold.
Past a commit point the daemon may leave the rest to the next start, and says so: a snapshot
removal's Err ("finished at the next start"), an evacuation's clean-up of the old copy (logged
"start-up does"); such points are counted and checked after the restart only, which must find
the operation finished. --match REGEX runs only the points whose label matches.
--sabotage plays its broken daemon for the Docker API's operations only (its default --ops).

Start-up recovery. A world that start-up must repair is prepared once and restored before
each point: a ready volume, one still mounted (its bind kept), one with a stale mount count
(bind gone), one whose bind has no count, one whose index entry is missing, an interrupted
create and an interrupted remove (made by kill -9 at the record commit and at the move to
the trash, as in crashpoints.py; whatever the record then says, "removing" or nothing), an entry in the trash, and a stray bind under prop/. The
daemon is started with strace attached from its first instruction and one mutating
start-up call failed; it must either refuse to start (a non-zero exit, no crash) or start
with the invariants intact (the volumes that must survive present with their data, the
others fully there or fully gone, no stray mount), and a following clean start must reach
the repaired world.

Start-up runs in two variants: "start" (the partition still mounted, as after a daemon
restart in the same mount namespace) and "startns" (not mounted, as in the new mount
namespace of a restarted plugin: the partition mount(2) is then a point too). Start-up
points also fail, with EIO, the opening of each state file it reads (a record, an index
entry, a mount count). A partition that cannot be attached (its volumes listed as
partition-missing) and a record that cannot be read (record-unreadable) are the documented
degraded modes: accepted right away, counted and printed, but not after the clean start.

A point is a call, not a number: the same call can get another number in the next run (a
cache that expired adds a read of mountinfo), so a run that failed another call is checked
too and the point is run again with the call's number in that run. A call of the trash
worker whose number the request's own thread also reaches cannot be failed alone (strace
counts per thread, and the request fails first): such points count, but not as reached.

The full run (no option; the soak) fails every point of every operation and of both
start-up variants with every errno of the matrix. --sample N runs N points per operation
and per start-up variant, drawn at random one syscall after the other (--seed, printed:
the same seed draws the same points), for a run of bounded time. CI runs --ci --sample
(the operations with the whole matrix, start-up with EIO only, a sample of each; the
figures are in RESULTS.md) and a short --sabotage run. --sabotage checks that the
checker can fail: before each check it plays a broken daemon by breaking one invariant, in turn
the one planted least often that applies there (a byte of the record, the index entry, the
mount count, the bind remounted without nosuid, the bind replaced by one of the same path on
another filesystem, a stray mount, the owner, a file of a clone, a trash entry, the partition
mount without nosuid or made shared, the data file, a temp file), and the check must report it
(a violation that names it). The run fails if a break goes unreported, a kind is never planted,
a point has no violation, or the harness fails. The soak also runs the full matrix
against the ASan+UBSan build (--binary; a sanitizer report on an error path is a
violation; LeakSanitizer is off while strace is attached, as it cannot run under ptrace).
--quick (EIO only everywhere) and --max-points are for development.

Prints "errinject: points=N reached=N violations=N seconds=N", the violations grouped by
what was wrong, and "N passed, N failed" (points without / with a violation).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import (Testbed, Strace, VolumeView, ApiError, MUTATING_SYSCALLS, log, strace_missing,  # noqa: E402
                    annotate_calls, mark_mutating, short_call, leftovers, trash_entries, consistency_problems,
                    stray_mounts, run, ensure_clone_source, clone_problems, CLONE_SOURCE,
                    partition_mount_problems, Streams, Archive, make_streams, make_archive, archive_files,
                    receive, command, remove_fully, snapshot_names, snapshot_dirs, snapshot_files,
                    import_leftovers, partition_of, sample_points)

NAME = "eivol"
MID, MID2 = "eid-1", "eid-2"
OPTS = {"uid": "7", "gid": "8", "mode": "0750"}
OWNER = (7, 8, 0o750)
DATA = "data.bin"

OPS = {
    # name: (precondition: mounted IDs, or None for "absent"), endpoint, body
    "create": (None, "/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS}),
    "mount": ([], "/VolumeDriver.Mount", {"Name": NAME, "ID": MID}),
    "mount2": ([MID], "/VolumeDriver.Mount", {"Name": NAME, "ID": MID2}),
    "unmount": ([MID], "/VolumeDriver.Unmount", {"Name": NAME, "ID": MID}),
    "unmount2": ([MID, MID2], "/VolumeDriver.Unmount", {"Name": NAME, "ID": MID2}),
    "remove": ([], "/VolumeDriver.Remove", {"Name": NAME}),
    "clone": (None, "/VolumeDriver.Create", {"Name": NAME, "Opts": {"from": CLONE_SOURCE}}),
    "clonelive": (None, "/VolumeDriver.Create", {"Name": NAME, "Opts": {"from": CLONE_SOURCE}}),
}
CLONE_OPS = {"clone": False, "clonelive": True}   # op: its source is mounted
source_files = {}


def errnos_for(c, full=True):
    """The errno matrix (see the docstring): EIO always, others where the kernel really returns them."""
    name, args = c["name"], c["args"]
    out = ["EIO"]
    if not full:
        return out
    if name == "openat":
        if "O_CREAT" in args:
            out += ["ENOSPC"]
        out += ["EROFS"]
    elif name in ("write", "fsync", "fdatasync"):
        out += ["ENOSPC"]
    elif name == "mkdirat":
        out += ["ENOSPC", "EROFS"]
    elif name in ("renameat", "renameat2", "unlinkat"):
        out += ["EROFS"]
    elif name == "ioctl" and "FICLONE" in args:
        out += ["ENOSPC", "EOPNOTSUPP"]   # a full partition; one that cannot share blocks
    elif name in ("fchown", "fchmod", "open_tree", "mount_setattr", "move_mount", "mount", "ioctl", "fchownat",
                  "fchmodat"):
        out += ["EPERM"]
    elif name in ("symlinkat", "linkat", "mknodat", "ftruncate", "pwrite64", "fallocate", "fsetxattr", "setxattr"):
        out += ["ENOSPC"]
    elif name == "umount2":
        out += ["EPERM", "EBUSY"]
    return out


def points_of(calls, full=True, reads=False):
    """[(errno, call)] for every mutating call of a traced run (the same call in two threads once);
    @reads: also EIO for opening a state file (a record, an index entry, a mount count) to read it."""
    seen, out = set(), []
    for c in mark_mutating(annotate_calls(calls)):
        state_read = reads and c["name"] == "openat" and re.match(r'\s*\d+, "[^"/]+\.json", O_RDONLY', c["args"])
        if not (c["mutating"] or state_read) or (c["sig"], c["k"]) in seen:
            continue
        seen.add((c["sig"], c["k"]))
        out += [(e, c) for e in (errnos_for(c, full) if c["mutating"] else ["EIO"])]
    return out


def injected_where(calls, target):
    """(the target call was failed, its number in this run if it was not, text of what was failed)."""
    annotate_calls(calls)
    inj = [c for c in calls if c["injected"]]
    text = "; ".join(short_call(c, 70) for c in inj) or "nothing failed"
    if any((c["sig"], c["k"]) == (target["sig"], target["k"]) for c in inj):
        return True, None, text
    same = [c for c in calls if (c["sig"], c["k"]) == (target["sig"], target["k"])]
    return False, (same[0]["seq"] if same else None), text


def each_point(rep, label, target, attempt):
    """Runs attempt(N) for a point; when a call that comes and goes (a cache, a retry) shifted the
    numbers, again with the target's number in that run. Each run is checked in full."""
    rep.points += 1
    rep.point_labels.add(label)
    n = target["seq"]
    for _ in range(4):
        hit, n, text = attempt(n)
        if hit:
            rep.reached += 1
            return
        if n is None:
            log("%s: target %s not reached (failed: %s)" % (label, short_call(target, 70), text))
            return
        log("%s: numbers shifted, again with when=%d" % (label, n))


class Report:
    def __init__(self):
        self.violations = []      # (point label, problem)
        self.points = self.reached = 0
        self.point_labels = set()
        self.bad_points = set()
        self.failed_now = "(before the injection)"   # the call(s) failed in the run being checked
        self.sanitizer_seen = 0
        self.degraded = 0         # admin points right after which a rescan listed the partition as missing
        self.rolled_forward = 0   # admin points whose Err said the next start finishes the operation

    def bad(self, label, problem, kind=None):
        self.violations.append((label, problem, kind, self.failed_now))
        self.bad_points.add(label)
        log("VIOLATION %s: %s" % (label, problem))

    def groups(self):
        """{kind of violation: (an example, [point labels])}, biggest first; a kind is the
        operation and the problem with numbers and quoted text folded."""
        g = {}
        for label, problem, kind, failed in self.violations:
            key = "%s | %s" % (label.split("/")[0], kind or fold(problem))
            g.setdefault(key, (problem, set()))[1].add((label, failed))
        return sorted(g.items(), key=lambda kv: (-len(kv[1][1]), kv[0]))


def fold(text):
    text = re.sub(r"b?'[^']*'|\"[^\"]*\"", "'...'", text)
    return re.sub(r"\b\d+\b", "N", text)[:160]


# ---- the world: get to a precondition, reset ----

def write_data(tb, name):
    """Files in the volume (a few, in a subdirectory too, so that the trash worker makes more calls
    than the request that starts it); returns what files_below() will read."""
    d = tb.volume_dir(name)
    tag = "%s %016x\n" % (name, random.getrandbits(64))
    files = {DATA: tag.encode() * 512, "sub/a": b"a" + tag.encode(), "sub/b": b"b", "sub/c": b""}
    os.mkdir(os.path.join(d, "sub"))
    for rel, content in files.items():
        with open(os.path.join(d, rel), "wb") as f:
            f.write(content)
            os.fsync(f.fileno())
    return files


def hard_reset(tb):
    """Back to an empty pool whatever the daemon left: stop it, unmount, wipe, start."""
    tb.stop() if tb.alive() else tb.kill()
    for m in sorted((m for m in tb.our_mounts() if m["target"].startswith(tb.prop + "/")),
                    key=lambda m: -len(m["target"])):
        subprocess.run(["umount", "-l", m["target"]], stderr=subprocess.DEVNULL)
    for root in tb.fs_roots():
        for sub in ("volumes", "meta", "trash", "quarantine", "snapshots", "imports"):
            wipe_children(os.path.join(root, "nvmevol", sub))
    for sub in ("index", "mounts"):
        wipe_children(os.path.join(tb.state, sub))
    wipe_children(tb.prop)
    tb.start()


def wipe_children(d):
    if not os.path.isdir(d):
        return
    for fn in os.listdir(d):
        p = os.path.join(d, fn)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def reset_clean(tb, name=NAME):
    """No volume @name, nothing left anywhere; through the API when it works, else hard_reset."""
    try:
        v = VolumeView(tb, name)
        if v.present:
            for mid, n in v.counts.items():
                for _ in range(n):
                    tb.ok("/VolumeDriver.Unmount", {"Name": name, "ID": mid})
            tb.ok("/VolumeDriver.Remove", {"Name": name})
        wait_trash_empty(tb, 2)
        v = VolumeView(tb, name)
        listed = [x["Name"] for x in tb.ok("/VolumeDriver.List", {}).get("Volumes") or []]
        if not consistency_problems(tb, v) and not v.present and not leftovers(tb) and \
                not trash_entries(tb) and not stray_mounts(tb, listed):
            return
    except (ApiError, OSError) as e:
        log("reset through the API failed (%s); hard reset" % e)
    hard_reset(tb)


def wait_trash_empty(tb, seconds):
    t0 = time.monotonic()
    while trash_entries(tb) and time.monotonic() - t0 < seconds:
        time.sleep(0.02)
    return trash_entries(tb)


def precondition(tb, op):
    """From an empty pool to what @op expects: nothing, or the volume with data, mounted for some IDs."""
    mounted = OPS[op][0]
    if op in CLONE_OPS:
        source_files.clear()
        source_files.update(ensure_clone_source(tb, OPTS, CLONE_OPS[op]))
    if mounted is None:
        return
    tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
    write_data(tb, NAME)
    for mid in mounted:
        tb.ok("/VolumeDriver.Mount", {"Name": NAME, "ID": mid})


# ---- checks ----

def same_as_before(before, v):
    """[(what, how)] that differs from @before."""
    b, a = before.essence(), v.essence()
    return [(k, "%s -> %s" % (short(b[k]), short(a[k]))) for k in b if b[k] != a[k]]


def short(x):
    s = repr(x)
    return s if len(s) < 160 else s[:157] + "..."


def took_effect(tb, op, before, v, answer):
    """Why the operation that answered success did not take effect (empty: it did)."""
    bad = []
    if op == "create" or op in CLONE_OPS:
        if not v.present or v.owner != OWNER:
            bad.append("Create answered success but present=%s owner=%s" % (v.present, v.owner))
        elif op == "create" and os.listdir(v.dirs[0]):
            bad.append("new volume is not empty: %s" % os.listdir(v.dirs[0]))
        return bad
    if op == "remove":
        if v.present or v.dirs or v.records or v.index is not None:
            bad.append("Remove answered success but the volume is still there (present=%s dirs=%d records=%d)" %
                       (v.present, len(v.dirs), len(v.records)))
        return bad
    if not v.present:
        return ["%s answered success but the volume is gone" % op]
    mid = OPS[op][2]["ID"]
    want = dict(before.counts)
    if op.startswith("mount"):
        want[mid] = want.get(mid, 0) + 1
    else:
        want[mid] = want.get(mid, 0) - 1
        if want[mid] <= 0:
            del want[mid]
    if v.counts != want:
        bad.append("%s answered success but counts are %s, expected %s" % (op, v.counts, want))
    if op.startswith("mount"):
        mp = (answer or {}).get("Mountpoint")
        if mp != os.path.join(tb.prop, NAME):
            bad.append("Mount answered Mountpoint %r" % mp)
        elif not v.binds:
            bad.append("Mount answered success but nothing is mounted")
        else:
            try:
                with open(os.path.join(mp, DATA), "rb") as f:
                    if f.read() != before.data[DATA]:
                        bad.append("data read through the bind differs")
            except OSError as e:
                bad.append("data not readable through the bind: %s" % e)
    if v.data != before.data:
        bad.append("data file changed")
    return bad


def check_world(tb, rep, label, op, ok, before, answer, when):
    v = VolumeView(tb, NAME, True)
    for p in consistency_problems(tb, v, OWNER):
        rep.bad(label, "%s: %s" % (when, p))
    if ok:
        for p in took_effect(tb, op, before, v, answer):
            rep.bad(label, "%s: %s" % (when, p))
    else:
        for what, how in same_as_before(before, v):
            rep.bad(label, "%s: answered Err (%s) but %s changed: %s" % (when, short((answer or {}).get("Err")), what,
                                                                         how),
                    kind="%s: answered Err but %s changed" % (when, what))
    for p in leftovers(tb):
        rep.bad(label, "%s: leftover %s" % (when, p))
    for p in stray_mounts(tb, (NAME, CLONE_SOURCE)):
        rep.bad(label, "%s: stray mount %s" % (when, p))
    for p in partition_mount_problems(tb):
        rep.bad(label, "%s: %s" % (when, p))
    if op in CLONE_OPS:
        for p in clone_problems(tb, NAME, source_files, CLONE_OPS[op]):
            rep.bad(label, "%s: %s" % (when, p))
    return v


def check_sanitizers(tb, rep, label):
    """A sanitizer report (an ASan build on an error path) since the last check is a violation."""
    reports = tb.sanitizer_reports()
    for r in reports[rep.sanitizer_seen:]:
        rep.bad(label, "sanitizer report: %s" % " ".join(r.split("\n")[:3])[:300], kind="sanitizer report")
    rep.sanitizer_seen = len(reports)


class Saboteur:
    """--sabotage: plays a broken daemon, one invariant at a time, to show that the checker reports
    each break. Before a check, plant() breaks the least-planted kind that applies to the world as
    it is; judge() after the check requires a violation since then that names what was broken
    (the problem text matches the kind's pattern). A kind never planted, or a plant not reported,
    fails the run."""

    # kind: the pattern its report must match; planted before the right-away check, but those in LATE
    # before the trash check (a restart would empty the trash)
    KINDS = {
        "record-byte": r"record",
        "index-entry": r"index",
        "mount-count": r"count",
        "bind-nosuid": r"lacks nosuid|binds changed",
        "bind-wrong-partition": r"from device|binds changed",
        "stray-mount": r"stray mount",
        "owner": r"owner",
        "clone-file": r"clone",
        "trash-entry": r"trash not emptied",
        "partition-suid": r"partition mount .* lacks .*nosuid",
        "partition-shared": r"partition mount .* not private",
        "data-file": r"data",
        "temp-file": r"leftover",
    }

    LATE = ("trash-entry",)

    def __init__(self, tb):
        self.tb = tb
        self.planted = {k: 0 for k in self.KINDS}
        self.reported = {k: 0 for k in self.KINDS}
        self.missed = []        # (point label, kind)
        self.pending = None     # (kind, label, violations before the plant)
        self.late = None        # a kind chosen at "now" to plant at "late"
        self.undo = []
        self.fake = None

    def _root(self):
        return self.tb.fs_roots()[0]

    def _applies(self, kind, name, clone):
        tb = self.tb
        v = VolumeView(tb, name)
        bound = bool(v.bind_entries)
        return {"record-byte": len(v.records) == 1, "bind-nosuid": bound, "bind-wrong-partition": bound,
                "owner": len(v.dirs) == 1, "clone-file": clone and len(v.dirs) == 1 and v.present,
                "data-file": len(v.dirs) == 1 and os.path.exists(os.path.join(v.dirs[0], DATA))}.get(kind, True)

    def plant(self, rep, label, name, when, clone=False, bound_name=None):
        """Breaks one invariant of volume @name (or of the pool) for the check that follows: at "now" the
        least-planted kind that applies is chosen (planted then, or kept for "late" if it is a late one)."""
        bound_name = bound_name or name
        if when == "now":
            kinds = [k for k in self.KINDS
                     if self._applies(k, bound_name if k.startswith("bind-") else name, clone)]
            self.late = None
            kind = min(kinds, key=lambda k: self.planted[k])
            if kind in self.LATE:
                self.late = kind
                return
        elif self.late is None:
            return
        else:
            kind, self.late = self.late, None
        if kind.startswith("bind-"):
            name = bound_name
        getattr(self, "_" + kind.replace("-", "_"))(name)
        self.planted[kind] += 1
        self.pending = (kind, label, len(rep.violations))
        log("sabotage %s: %s on %s" % (label, kind, name))

    def judge(self, rep):
        if self.pending is None:
            return
        kind, label, mark = self.pending
        self.pending = None
        pattern = self.KINDS[kind]
        if any(re.search(pattern, problem) for _, problem, _, _ in rep.violations[mark:]):
            self.reported[kind] += 1
        else:
            self.missed.append((label, kind))
            log("sabotage %s: %s NOT REPORTED" % (label, kind))
        for f in reversed(self.undo):
            f()
        self.undo = []

    def figures(self):
        never = [k for k in self.KINDS if not self.planted[k]]
        return never, "sabotage: kinds=%d planted=%d reported=%d missed=%d never_planted=%d" % (
            len(self.KINDS), sum(self.planted.values()), sum(self.reported.values()), len(self.missed), len(never))

    # ---- the breaks ----

    def _record_byte(self, name):
        path = self.tb.record(name)[0]
        with open(path, "r+b") as f:
            raw = f.read()
            i = raw.index(b'"name":"') + len(b'"name":"')   # a byte inside a value: still JSON, wrong CRC
            f.seek(i)
            f.write(bytes([raw[i] ^ 0x01]))

    def _index_entry(self, name):
        p = os.path.join(self.tb.state, "index", name + ".json")
        if os.path.exists(p):
            os.unlink(p)
        else:
            with open(p, "wb") as f:
                f.write(b"{}")

    def _mount_count(self, name):
        p = os.path.join(self.tb.state, "mounts", name + ".json")
        v = VolumeView(self.tb, name)
        counts = dict(v.counts)
        counts["sabotage"] = counts.get("sabotage", 0) + 1
        with open(p, "w") as f:
            json.dump({"mounts": counts}, f)

    def _bind_nosuid(self, name):
        run(["mount", "-o", "remount,bind,suid,nodev,noatime,nodiratime", os.path.join(self.tb.prop, name)])

    def _bind_wrong_partition(self, name):
        """The bind replaced by one of the same path on another filesystem (root /nvmevol/volumes/NAME)."""
        tb = self.tb
        if self.fake is None:
            self.fake = os.path.join(tb.base, "sabotage-fs")
            os.makedirs(self.fake)
            run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev,noatime,nodiratime", "sabotage", self.fake])
        src = os.path.join(self.fake, "nvmevol", "volumes", name)
        os.makedirs(src, exist_ok=True)
        target = os.path.join(tb.prop, name)
        run(["umount", target])
        run(["mount", "--bind", src, target])
        run(["mount", "-o", "remount,bind,nosuid,nodev,noatime,nodiratime", target])

    def _stray_mount(self, name):
        target = os.path.join(self.tb.prop, "sabotage-stray")
        os.makedirs(target, exist_ok=True)
        run(["mount", "--bind", self.tb.canary, target])
        self.undo.append(lambda: (run(["umount", target], check=False), os.rmdir(target)))

    def _owner(self, name):
        d = VolumeView(self.tb, name).dirs[0]
        st = os.stat(d)
        os.chown(d, st.st_uid + 1, st.st_gid)

    def _clone_file(self, name):
        with open(os.path.join(VolumeView(self.tb, name).dirs[0], "sub", "a"), "ab") as f:
            f.write(b"changed")

    def _trash_entry(self, name):
        os.makedirs(os.path.join(self._root(), "nvmevol", "trash", "sabotage.1", "d"))

    def _partition_suid(self, name):
        root = self._root()
        run(["mount", "-o", "remount,bind,suid,nodev,noatime,nodiratime", root])
        self.undo.append(lambda: run(["mount", "-o", "remount,bind,nosuid,nodev,noatime,nodiratime", root]))

    def _partition_shared(self, name):
        root = self._root()
        run(["mount", "--make-shared", root])
        self.undo.append(lambda: run(["mount", "--make-private", root]))

    def _data_file(self, name):
        os.unlink(os.path.join(VolumeView(self.tb, name).dirs[0], DATA))

    def _temp_file(self, name):
        open(os.path.join(self._root(), "nvmevol", "meta", ".sabotage.json.tmp.1"), "w").close()


# ---- operations ----

def trace_op(tb, op):
    reset_clean(tb)
    precondition(tb, op)
    out = os.path.join(tb.base, "count-%s.trace" % op)
    st = Strace(tb.pid, ["-e", "trace=" + ",".join(MUTATING_SYSCALLS)], out)
    tb.ok(OPS[op][1], OPS[op][2])
    time.sleep(0.2)   # the trash worker
    st.detach()
    return st.events()


def injected(tb, rep, label, target, err, n, request):
    """request() run with the @n-th call of @target's syscall failed with @err: (what it returned, None if it
    raised; injected_where() of the run). rep.failed_now says what was failed."""
    sc = target["name"]
    st = Strace(tb.pid, ["-e", "trace=" + sc, "-e", "inject=%s:error=%s:when=%d" % (sc, err, n)],
                os.path.join(tb.base, "point.trace"))
    ran = None
    try:
        ran = request()
    except Exception as e:
        rep.bad(label, "no answer: %s" % e)
    time.sleep(0.1)   # work the request left to another thread runs under the same injection
    st.detach()
    result = injected_where(st.events(), target)
    rep.failed_now = result[2]
    return ran, result


def run_op_point(tb, rep, op, target, err, args, sab):
    sc = target["name"]
    label = "%s/%s#%d/%s" % (op, sc, target["seq"], err)

    def attempt(n):
        mark = len(rep.violations)
        rep.failed_now = "(before the injection)"
        reset_clean(tb)
        precondition(tb, op)
        before = VolumeView(tb, NAME, True)
        for p in consistency_problems(tb, before, OWNER if OPS[op][0] is not None else None):
            rep.bad(label, "precondition: %s" % p)
        ran, result = injected(tb, rep, label, target, err, n, lambda: tb.call(OPS[op][1], OPS[op][2], timeout=60))
        status, answer = ran or (None, None)
        ok = status == 200 and isinstance(answer, dict) and not answer.get("Err")
        log("%s (when=%d): failed %s -> %s %s" % (label, n, result[2], status, short(answer)))
        if sab:
            sab.plant(rep, label, NAME, "now", clone=op in CLONE_OPS)
        if not tb.alive():
            rep.bad(label, "the daemon died (exit %s)" % tb.proc.returncode)
            tb.kill()
            tb.start()
        else:
            check_world(tb, rep, label, op, ok, before, answer, "right away")
            if sab:
                sab.judge(rep)
            tb.stop()
            tb.start()
        if sab:
            sab.plant(rep, label, NAME, "late")
        if trash_entries(tb) and wait_trash_empty(tb, 3):
            rep.bad(label, "after restart: trash not emptied: %s" % trash_entries(tb))
        if sab:
            sab.judge(rep)
        check_world(tb, rep, label, op, ok, before, answer, "after restart")
        check_sanitizers(tb, rep, label)
        if len(rep.violations) > mark:
            log("  at %s: failed %s" % (label, result[2]))
            hard_reset(tb)
        return result

    each_point(rep, label, target, attempt)


# ---- admin operations (the admin socket and the command) ----

RECV = "eirecv"        # the volume a receive makes or updates
STREAM_SRC = "eisend"  # the volume the streams and the archive are made from
SNAP = "es"
NODE2 = "einode2"      # the host a fence names
ADMIN_OPS = {
    # name: the volume it acts on, what it is
    "snapshot": (NAME, "/Admin.VolumeSnapshot of an idle volume"),
    "snapremove": (NAME, "/Admin.VolumeSnapshotRemove of its one snapshot"),
    "rollback": (NAME, "/Admin.VolumeRollback to a snapshot, data changed since"),
    "export": (NAME, "`nvmevol volume export` of an idle volume (its temporary snapshot)"),
    "import": (NAME, "`nvmevol volume import` of an archive into a new volume"),
    "recvfull": (RECV, "`nvmevol volume receive` of a full stream"),
    "recvincr": (RECV, "`nvmevol volume receive` of an incremental stream"),
    "fence": (NAME, "/Admin.VolumeFence (move's fence)"),
    "evacuate": (NAME, "/Admin.PartitionEvacuate of an idle volume's partition (two partitions)"),
}
TWO_PARTITION_OPS = {"evacuate"}
ADMIN_OWNER_OPTS = ["-o", "uid=7", "-o", "gid=8", "-o", "mode=0750"]


class AdminState:
    """What an admin operation may change, read without its help: the volume (with its files), its
    snapshots (listed, on disk, the files of each), its fence, its partition."""

    def __init__(self, tb, name):
        self.view = VolumeView(tb, name, True)
        self.snapshots = snapshot_names(tb, name)
        st, j = tb.admin_call("/Admin.VolumeSnapshots", {"Name": name})
        self.evacuation = sorted(x["name"] for x in (j or {}).get("snapshots", []) if x.get("evacuation")) \
            if st == 200 else []
        self.snapshot_dirs = snapshot_dirs(tb, name)
        self.snapshot_data = {s: snapshot_files(tb, name, s) for s in self.snapshots}
        rec = tb.record(name)[1] or {}
        self.fenced_to = (rec.get("moved_to") or {}).get("host") if isinstance(rec.get("moved_to"), dict) else \
            rec.get("moved_to")
        self.partition = partition_of(tb, name)

    def essence(self):
        e = self.view.essence()
        e.update(snapshots=self.snapshots, snapshot_dirs=self.snapshot_dirs, snapshot_data=self.snapshot_data,
                 fenced_to=self.fenced_to, partition=self.partition)
        return e


def admin_precondition(tb, op):
    """From a pool without the op's volume to what @op expects; returns what a success must give (the
    expected data, snapshots...)."""
    name = ADMIN_OPS[op][0]
    want = {}
    if op in ("recvfull", "recvincr"):
        if op == "recvincr":
            rc, _, err = receive(tb, RECV, Streams.full)
            if rc != 0:
                raise ApiError("the full stream's receive -> %d %s" % (rc, err.strip()[-300:]))
        return {"data": Streams.r1 if op == "recvfull" else Streams.r2,
                "snapshots": ["r1"] if op == "recvfull" else ["r1", "r2"]}
    if op == "import":
        return {"data": Archive.files}
    tb.ok("/VolumeDriver.Create", {"Name": name, "Opts": OPTS})
    data = write_data(tb, name)
    want["data"] = data
    if op in ("snapremove", "rollback"):
        tb.admin_ok("/Admin.VolumeSnapshot", {"Name": name, "Snapshot": SNAP})
        want["snapshot_data"] = snapshot_files(tb, name, SNAP)
    if op == "rollback":
        with open(os.path.join(tb.volume_dir(name), DATA), "wb") as f:   # changed since the snapshot
            f.write(b"after the snapshot\n")
        os.unlink(os.path.join(tb.volume_dir(name), "sub", "a"))
    if op == "evacuate":
        for p in tb.admin_ok("/Admin.Status", {}).get("partitions", []):
            tb.admin_ok("/Admin.PartitionUncordon", {"Partition": p["uuid"]})
    return want


def admin_run(tb, op):
    """Runs @op once: (succeeded, the Err or the command's status and message)."""
    name = ADMIN_OPS[op][0]
    if op in ("export", "import", "recvfull", "recvincr"):
        if op == "export":
            with open(os.path.join(tb.base, "export.tar"), "wb") as f:
                rc, _, err = command(tb, ["volume", "export", name], stdout=f)
        elif op == "import":
            with open(Archive.path, "rb") as f:
                rc, _, err = command(tb, ["volume", "import", name] + ADMIN_OWNER_OPTS, stdin=f)
        else:
            rc, _, err = receive(tb, RECV, Streams.full if op == "recvfull" else Streams.incr)
        return rc == 0, "exit %d: %s" % (rc, err.strip()[-300:])
    if op == "snapshot":
        st, j = tb.admin_call("/Admin.VolumeSnapshot", {"Name": name, "Snapshot": SNAP}, timeout=60)
    elif op == "snapremove":
        st, j = tb.admin_call("/Admin.VolumeSnapshotRemove", {"Name": name, "Snapshot": SNAP}, timeout=60)
    elif op == "rollback":
        st, j = tb.admin_call("/Admin.VolumeRollback", {"Name": name, "Snapshot": SNAP}, timeout=60)
    elif op == "fence":
        st, j = tb.admin_call("/Admin.VolumeFence", {"Name": name, "Host": NODE2}, timeout=60)
    else:
        st, j = tb.admin_call("/Admin.PartitionEvacuate", {"Partition": partition_of(tb, name)}, timeout=60)
    ok = st == 200 and isinstance(j, dict) and not j.get("Err")
    if op == "evacuate":   # answered 200 either way: the volume is listed as moved, or refused with why
        ok = ok and name in [x.get("name") if isinstance(x, dict) else x for x in j.get("moved", [])]
    return ok, "%s %s" % (st, short(j))


def mount_served(tb, name, mid="eicheck"):
    """(a Mount of @name was served, its answer); a served one is unmounted again."""
    st, j = tb.call("/VolumeDriver.Mount", {"Name": name, "ID": mid})
    if st == 200 and isinstance(j, dict) and not j.get("Err"):
        tb.ok("/VolumeDriver.Unmount", {"Name": name, "ID": mid})
        return True, j
    return False, j


def admin_took_effect(tb, op, before, now, want, answer):
    """Why @op, which answered success (or exited 0), did not take effect (empty: it did)."""
    name = ADMIN_OPS[op][0]
    v = now.view
    bad = []
    if not v.present:
        return ["%s succeeded but volume %s is gone" % (op, name)]
    if op in ("import", "recvfull", "recvincr", "rollback"):
        expect = want["data"] if op != "rollback" else want["snapshot_data"]
        if v.data != expect:
            bad.append("%s succeeded but the volume's files are %s, expected %s" % (op, sorted(v.data or {}),
                                                                                   sorted(expect)))
    elif v.data != before.view.data:
        bad.append("%s succeeded but the volume's data changed" % op)
    snaps = {"snapshot": [SNAP], "snapremove": [], "rollback": [SNAP], "export": [], "import": [],
             "fence": [], "evacuate": []}.get(op, want.get("snapshots"))
    if now.snapshots != snaps:
        bad.append("%s succeeded but the snapshots listed are %s, expected %s" % (op, now.snapshots, snaps))
    if op == "snapshot" and now.snapshot_data.get(SNAP) != before.view.data:
        bad.append("the new snapshot does not hold the volume's files")
    if op == "fence" and now.fenced_to != NODE2:
        bad.append("fence succeeded but the record's moved_to is %r" % now.fenced_to)
    if op == "evacuate" and now.partition == before.partition:
        bad.append("evacuate succeeded but the volume is still on partition %s (answer %s)" % (now.partition, answer))
    if op == "export":
        got = archive_files(os.path.join(tb.base, "export.tar"))
        if got != before.view.data:
            bad.append("export exited 0 but its archive is %s" % ("cut or unreadable" if got is None else
                                                                  "not the volume: %s" % sorted(got)))
    return bad


def admin_changed_nothing(before, now):
    """Why @op, which failed, changed something (empty: it did not). A failed rollback or receive
    leaves the previous state; a failed import or full receive leaves no volume. A failed evacuation
    may keep its own snapshot (evacuate-N, marked evacuation), the documented base of its next pass."""
    b, a = before.essence(), now.essence()
    keep = [n for n in now.evacuation if n not in before.snapshots]
    if keep:
        a["snapshots"] = [n for n in a["snapshots"] if n not in keep]
        a["snapshot_dirs"] = tuple([f for f in part if f not in keep and f[:-5] not in keep]
                                   for part in a["snapshot_dirs"])
        a["snapshot_data"] = {k: v for k, v in a["snapshot_data"].items() if k not in keep}
    return [(k, "%s -> %s" % (short(b[k]), short(a[k]))) for k in b if b[k] != a[k]]


def check_admin_world(tb, rep, label, op, ok, before, want, answer, when):
    name = ADMIN_OPS[op][0]
    now = AdminState(tb, name)
    # The same call failed in a rescan's probe of the devices too (when=N counts per thread): the
    # partition is listed as missing, and its volumes' Mounts refused, until it is seen again, the
    # documented degraded mode.
    probe_failed = when == "right away" and "/dev/" in rep.failed_now
    for p in consistency_problems(tb, now.view, OWNER):
        if probe_failed and p == "Status state partition-missing":
            rep.degraded += 1
            continue
        rep.bad(label, "%s: %s" % (when, p))
    # Nothing of the volume's on a partition it is not on (a refused evacuation's stage, its snapshots).
    for r in tb.fs_roots():
        if now.view.present and partition_of(tb, name) != os.path.basename(r) and \
                os.path.lexists(os.path.join(r, "nvmevol", "snapshots", name)):
            rep.bad(label, "%s: nvmevol/snapshots/%s left on partition %s, which does not hold the volume" %
                    (when, name, os.path.basename(r)))
    if ok:
        for p in admin_took_effect(tb, op, before, now, want, answer):
            rep.bad(label, "%s: %s" % (when, p))
    else:
        for what, how in admin_changed_nothing(before, now):
            rep.bad(label, "%s: failed (%s) but %s changed: %s" % (when, answer[:200], what, how),
                    kind="%s: failed but %s changed" % (when, what))
        if op in ("export", "import", "recvfull", "recvincr") and not re.search(r"exit [12]: \S", answer):
            rep.bad(label, "%s: the command failed without exit status 1 or 2 and a message: %s" % (when, answer))
    # Listed and on disk agree: each snapshot listed has its record and data, nothing else is there (the
    # temporary snapshot of an export included); a rollback's or receive's work directory is gone.
    recs, dirs = now.snapshot_dirs
    if recs != sorted(s + ".json" for s in now.snapshots) or dirs != now.snapshots:
        rep.bad(label, "%s: snapshots listed %s, on disk records %s data %s" % (when, now.snapshots, recs, dirs),
                kind="%s: snapshots listed and on disk differ" % when)
    for s in now.snapshots:
        if before.snapshot_data.get(s) is not None and now.snapshot_data.get(s) != before.snapshot_data[s]:
            rep.bad(label, "%s: snapshot %s changed its files" % (when, s))
    if when == "after restart":
        for r in tb.fs_roots():
            base = os.path.join(r, "nvmevol", "snapshots", name)
            extra = sorted(set(os.listdir(base)) - {"meta", "data"}) if os.path.isdir(base) else []
            if extra:
                rep.bad(label, "%s: left in snapshots/%s/: %s" % (when, name, extra))
        for p in import_leftovers(tb):
            rep.bad(label, "%s: leftover %s" % (when, p))
    # Move's fence: a fenced volume is never served; one that is not is served.
    served, j = mount_served(tb, name) if now.view.present else (False, None)
    if now.view.present and now.fenced_to and served:
        rep.bad(label, "%s: fenced to %s but a Mount was served" % (when, now.fenced_to))
    elif now.view.present and now.fenced_to and NODE2 not in (j or {}).get("Err", ""):
        rep.bad(label, "%s: a fenced volume's Mount Err does not name %s: %s" % (when, NODE2, short(j)))
    elif now.view.present and not now.fenced_to and not served and not (
            probe_failed and "is not available" in (j or {}).get("Err", "")):
        rep.bad(label, "%s: a volume not fenced refused a Mount: %s" % (when, short(j)))
    for p in leftovers(tb):
        rep.bad(label, "%s: leftover %s" % (when, p))
    for p in stray_mounts(tb, (NAME, CLONE_SOURCE, RECV)):
        rep.bad(label, "%s: stray mount %s" % (when, p))
    for p in partition_mount_problems(tb):
        rep.bad(label, "%s: %s" % (when, p))


def reset_admin(tb, op):
    """No volume of the op's, no snapshot, no fence, both partitions taking volumes."""
    try:
        remove_fully(tb, ADMIN_OPS[op][0])
        if op in TWO_PARTITION_OPS:
            for p in tb.admin_ok("/Admin.Status", {}).get("partitions", []):
                tb.admin_ok("/Admin.PartitionUncordon", {"Partition": p["uuid"]})
        wait_trash_empty(tb, 2)
        if not leftovers(tb) and not import_leftovers(tb) and not trash_entries(tb) and \
                not stray_mounts(tb, (NAME, CLONE_SOURCE, RECV)) and not any(snapshot_dirs(tb, ADMIN_OPS[op][0])):
            return
    except (ApiError, OSError) as e:
        log("reset through the API failed (%s); hard reset" % e)
    hard_reset(tb)
    prepare_admin(tb, [op])


def prepare_admin(tb, ops):
    """What the admin ops read and never change, made once: the streams and the archive (files under the
    testbed's base: a hard reset leaves them)."""
    if {"recvfull", "recvincr"} & set(ops) and Streams.full is None:
        make_streams(tb, STREAM_SRC, OPTS)
        remove_fully(tb, STREAM_SRC)
    if "import" in ops and Archive.path is None:
        make_archive(tb, STREAM_SRC, OPTS)


def trace_admin_op(tb, op):
    reset_admin(tb, op)
    admin_precondition(tb, op)
    st = Strace(tb.pid, ["-e", "trace=" + ",".join(MUTATING_SYSCALLS)], os.path.join(tb.base, "count-%s.trace" % op))
    ok, answer = admin_run(tb, op)
    time.sleep(0.2)   # the trash worker
    st.detach()
    if not ok:
        raise ApiError("%s without an injection failed: %s" % (op, answer))
    return st.events()


def run_admin_point(tb, rep, op, target, err):
    sc = target["name"]
    label = "%s/%s#%d/%s" % (op, sc, target["seq"], err)
    name = ADMIN_OPS[op][0]

    def attempt(n):
        mark = len(rep.violations)
        rep.failed_now = "(before the injection)"
        reset_admin(tb, op)
        want = admin_precondition(tb, op)
        before = AdminState(tb, name)
        for p in consistency_problems(tb, before.view, OWNER):
            rep.bad(label, "precondition: %s" % p)
        ran, result = injected(tb, rep, label, target, err, n, lambda: admin_run(tb, op))
        ok, answer = ran or (False, "no answer")
        log("%s (when=%d): failed %s -> %s %s" % (label, n, result[2], "ok" if ok else "failed", answer[:200]))
        if not tb.alive():
            rep.bad(label, "the daemon died (exit %s)" % tb.proc.returncode)
            tb.kill()
            tb.start()
        else:
            # An evacuation committed (answered success) whose clean-up of the old copy failed logs that start-up
            # finishes it (documented): the old copy is a shadow until then; the restart below must finish it.
            if op == "evacuate" and ok and "start-up does" in tb.log_tail(20):
                rep.rolled_forward += 1
            else:
                check_admin_world(tb, rep, label, op, ok, before, want, answer, "right away")
            tb.stop()
            tb.start()
        if trash_entries(tb) and wait_trash_empty(tb, 3):
            rep.bad(label, "after restart: trash not emptied: %s" % trash_entries(tb))
        # Past a snapshot removal's commit point (its record says "removing") an Err says that the removal is
        # finished at the next start (documented): then the restart must have finished it.
        rolled_forward = not ok and op == "snapremove" and "finished at the next start" in answer
        rep.rolled_forward += rolled_forward
        check_admin_world(tb, rep, label, op, ok or rolled_forward, before, want, answer, "after restart")
        check_sanitizers(tb, rep, label)
        if len(rep.violations) > mark:
            log("  at %s: failed %s" % (label, result[2]))
            hard_reset(tb)
            prepare_admin(tb, [op])
        return result

    each_point(rep, label, target, attempt)


# ---- start-up recovery ----

SURVIVORS = ["sok", "smnt", "sstale", "snocnt", "snoidx"]
EPHEMERAL = ["sic", "sir"]
SMID = "sm-1"


class StartWorld:
    """The prepared world that start-up must repair, saved once and restored before each point."""

    def __init__(self, tb):
        self.tb = tb
        self.snap = os.path.join(tb.base, "snap")
        self.stray_src = os.path.join(tb.base, "straysrc")
        self.data = {}
        self.degraded = 0   # starts that served with the partition not attached or a record unreadable

    def kill_point(self, op, pick, which=-1):
        """N of the call that pick() chooses (the @which-th of those) in a traced run of @op on a scratch volume."""
        tb = self.tb
        sc = "renameat"
        reset_clean(tb, "scount")
        if op == "remove":
            tb.ok("/VolumeDriver.Create", {"Name": "scount", "Opts": OPTS})
            write_data(tb, "scount")
        out = os.path.join(tb.base, "kill-%s.trace" % op)
        st = Strace(tb.pid, ["-e", "trace=" + sc], out)
        tb.ok("/VolumeDriver.%s" % op.capitalize(),
              {"Name": "scount", "Opts": OPTS} if op == "create" else {"Name": "scount"})
        time.sleep(0.2)
        st.detach()
        reset_clean(tb, "scount")
        cand = [c for c in st.events() if c["name"] == sc and c["pid"] != tb.pid and pick(c)]
        if not cand:
            raise RuntimeError("no %s in a traced %s to kill at" % (sc, op))
        if len(cand) < (which + 1 if which >= 0 else -which):
            raise RuntimeError("only %d matching %s in a traced %s" % (len(cand), sc, op))
        return sc, cand[which]["seq"]

    def kill_during(self, op, name, sc, n):
        tb = self.tb
        st = Strace(tb.pid, ["-e", "trace=" + sc, "-e", "inject=%s:signal=KILL:when=%d" % (sc, n)],
                    os.path.join(tb.base, "kill.trace"))
        try:
            tb.call("/VolumeDriver.%s" % op.capitalize(),
                    {"Name": name, "Opts": OPTS} if op == "create" else {"Name": name}, timeout=10)
        except Exception:
            pass
        try:
            tb.proc.wait(timeout=10)
        finally:
            st.detach()
        tb.kill()

    def prepare(self):
        tb = self.tb
        hard_reset(tb)
        root = tb.fs_roots()[0]
        for name in SURVIVORS:
            tb.ok("/VolumeDriver.Create", {"Name": name, "Opts": OPTS})
            self.data[name] = write_data(tb, name)
        for name in ("smnt", "sstale", "snocnt"):
            tb.ok("/VolumeDriver.Mount", {"Name": name, "ID": SMID})
        # The record commit of a create (its second rename of scount.json: after the index entry "pending",
        # before the index entry "committed"), and the move of a removed volume's directory to the trash.
        csc, cn = self.kill_point("create", lambda c: '"scount.json"' in c["args"], which=1)
        rsc, rn = self.kill_point("remove", lambda c: re.match(r'\s*\d+, "scount",', c["args"]))
        self.kill_during("create", "sic", csc, cn)
        art = os.path.join(tb.base, "art")
        os.makedirs(art)
        sic_dir = os.path.join(root, "nvmevol", "volumes", "sic")
        sic_index = os.path.join(tb.state, "index", "sic.json")
        if not os.path.isdir(sic_dir) or not os.path.exists(sic_index) or \
                os.path.exists(os.path.join(root, "nvmevol", "meta", "sic.json")):
            raise RuntimeError("kill at create %s#%d did not leave an interrupted create" % (csc, cn))
        run(["cp", "-a", sic_dir, sic_index, art])
        tb.start()
        tb.ok("/VolumeDriver.Create", {"Name": "sir", "Opts": OPTS})
        write_data(tb, "sir")
        self.kill_during("remove", "sir", rsc, rn)
        rec = tb.record("sir")[1]
        if not tb.volume_dir("sir") or (rec and rec.get("state") == "ready"):
            # Interrupted: the directory is still there, its record says "removing" or is gone.
            raise RuntimeError("kill at remove %s#%d did not leave an interrupted remove (record %s)" %
                               (rsc, rn, rec))
        run(["cp", "-a", os.path.join(art, "sic"), os.path.join(root, "nvmevol", "volumes")])
        run(["cp", "-a", os.path.join(art, "sic.json"), os.path.join(tb.state, "index")])
        os.unlink(os.path.join(tb.state, "index", "snoidx.json"))
        os.unlink(os.path.join(tb.state, "mounts", "snocnt.json"))
        run(["umount", os.path.join(tb.prop, "sstale")])
        os.rmdir(os.path.join(tb.prop, "sstale"))
        trash = os.path.join(root, "nvmevol", "trash", "old.1")
        for i in range(3):
            d = os.path.join(trash, *["t%d" % j for j in range(i * 5 + 1)])
            os.makedirs(d)
            with open(os.path.join(d, "f"), "w") as f:
                f.write("trash %d\n" % i)
        os.makedirs(self.stray_src)
        open(os.path.join(self.stray_src, "keep"), "w").close()
        os.makedirs(self.snap)
        for sub in ("volumes", "meta", "trash"):
            run(["cp", "-a", os.path.join(root, "nvmevol", sub), os.path.join(self.snap, sub)])
        for sub in ("index", "mounts"):
            run(["cp", "-a", os.path.join(tb.state, sub), os.path.join(self.snap, sub)])
        self.root = root
        self.device = tb.loops[0]
        self.restore(unmount=False)

    def binds(self):
        vols = os.path.join(self.root, "nvmevol", "volumes")
        return [(os.path.join(vols, "smnt"), "smnt", True), (os.path.join(vols, "snocnt"), "snocnt", True),
                (self.stray_src, "stray", False)]

    def restore(self, unmount=True, fresh=False):
        """The prepared world again (the daemon is not running); @fresh: with the partition not
        mounted, as in a new mount namespace (a plugin restart), the binds still there."""
        tb = self.tb
        assert not tb.alive()
        if not any(m["target"] == self.root for m in tb.our_mounts()):
            os.makedirs(self.root, exist_ok=True)
            run(["mount", "-o", "noatime,nodiratime", self.device, self.root])
            run(["mount", "--make-private", self.root])
        if unmount:
            for m in sorted((m for m in tb.our_mounts() if m["target"].startswith(tb.prop + "/")),
                            key=lambda m: -len(m["target"])):
                run(["umount", m["target"]])
            wipe_children(tb.prop)
            for sub in ("volumes", "meta", "trash", "quarantine"):
                wipe_children(os.path.join(self.root, "nvmevol", sub))
            for sub in ("index", "mounts"):
                wipe_children(os.path.join(tb.state, sub))
            # One cp for all (owners, modes and times kept): a process per file would cost a minute in CI.
            run(["sh", "-c", 'for d in volumes meta trash; do cp -a "$0/$d/." "$1/nvmevol/$d/"; done; '
                 'for d in index mounts; do cp -a "$0/$d/." "$2/$d/"; done', self.snap, self.root, tb.state])
        for src, name, flags in self.binds():
            target = os.path.join(tb.prop, name)
            if any(m["target"] == target for m in tb.our_mounts()):
                continue
            os.makedirs(target, exist_ok=True)
            run(["mount", "--bind", src, target])
            if flags:
                run(["mount", "-o", "remount,bind,noatime,nodiratime", target])
        if fresh:
            run(["umount", self.root])

    def degraded_now(self):
        """(volumes listed as partition-missing, volumes listed as record-unreadable)."""
        views = {n: VolumeView(self.tb, n) for n in SURVIVORS + EPHEMERAL}
        return (sorted(n for n, v in views.items() if v.status.get("state") == "partition-missing"),
                sorted(n for n, v in views.items() if v.status.get("state") == "record-unreadable"))

    def problems(self, final, degraded=None):
        """What is wrong with the world now; @final: after a clean start, everything must be repaired;
        @degraded: degraded_now() as it was before a sabotage (what the injection, not the break, did)."""
        tb = self.tb
        bad = []
        views = {n: VolumeView(tb, n, True) for n in SURVIVORS + EPHEMERAL}
        # A partition that was not attached: its volumes are listed from the index only, its records are not
        # in use (one problem, not one per volume; a volume that vanished is still reported below).
        # A record that could not be read (the injected EIO) is listed as record-unreadable and not mounted:
        # the documented mode for one bad record, accepted until the next clean start.
        missing, unreadable = degraded or self.degraded_now()
        if (missing or unreadable) and final:
            bad.append("not repaired: %s" % ", ".join(
                ["%s %s" % (n, views[n].status.get("state")) for n in missing + unreadable]))
        elif missing or unreadable:
            self.degraded += 1
        for n, v in views.items():
            if not missing and n not in unreadable:
                bad += ["%s: %s" % (n, p) for p in consistency_problems(tb, v, OWNER)]
        for n in SURVIVORS:
            v = views[n]
            if not v.present and missing and n == "snoidx" and not final:
                # Without its index entry and with its partition not attached, nothing can know it yet:
                # the clean start that follows must bring it back (checked then).
                continue
            if not v.present:
                bad.append("%s: lost (a volume that must survive start-up is gone; dirs=%d records=%d)" %
                           (n, len(v.dirs), len(v.records)))
            elif v.data != self.data[n] and not missing:
                bad.append("%s: data file changed or gone" % n)
        if len(views["smnt"].binds) != 1:
            bad.append("smnt: a volume in use was unmounted by start-up (binds: %d)" % len(views["smnt"].binds))
        if views["smnt"].present and views["smnt"].counts != {SMID: 1}:
            bad.append("smnt: still-mounted volume has counts %s, expected {%s: 1}" % (views["smnt"].counts, SMID))
        if final:
            for n in EPHEMERAL:
                if views[n].present:
                    bad.append("%s: interrupted operation not repaired: still present" % n)
            for n in ("sstale", "snocnt", "sok", "snoidx"):
                if views[n].counts or views[n].binds:
                    bad.append("%s: counts %s binds %d, expected none" % (n, views[n].counts, len(views[n].binds)))
            if wait_trash_empty(tb, 3):
                bad.append("trash not emptied: %s" % trash_entries(tb))
        bad += ["leftover %s" % p for p in leftovers(tb)]
        bad += ["stray mount %s" % p for p in stray_mounts(tb, SURVIVORS + EPHEMERAL)]
        if not missing:
            bad += partition_mount_problems(tb)
        return bad


def run_startup(tb, rep, args, world, fresh, sab, chosen):
    part = "startns" if fresh else "start"
    world.restore(fresh=fresh)
    out = os.path.join(tb.base, "count-%s.trace" % part)
    served, st = tb.start_traced(["-e", "trace=" + ",".join(MUTATING_SYSCALLS)], out,
                                 settled=lambda: not trash_entries(tb))
    if not served:
        rep.bad(part + "/clean", "the daemon did not start on the prepared world: %s" % tb.log_tail(5))
        return
    for p in world.problems(final=True):
        rep.bad(part + "/clean", "a clean start does not repair the prepared world: %s" % p)
    tb.stop()
    pts = points_of(st.events(), full=not (args.quick or args.ci), reads=True)
    pts = chosen(pts, part)
    log("%s: %d points" % (part, len(pts)))
    for err, target in pts:
        label = "%s/%s#%d/%s" % (part, target["name"], target["seq"], err)

        def attempt(n):
            sc = target["name"]
            world.restore(fresh=fresh)
            served, st = tb.start_traced(["-e", "trace=" + sc, "-e", "inject=%s:error=%s:when=%d" % (sc, err, n)],
                                         os.path.join(tb.base, "point.trace"), settled=lambda: not trash_entries(tb))
            result = injected_where(st.events(), target)
            rep.failed_now = result[2]
            log("%s (when=%d): failed %s -> %s" % (label, n, result[2],
                                                   "served" if served else "exit %s" % tb.proc.returncode))
            if served:
                degraded = world.degraded_now()
                if sab:
                    sab.plant(rep, label, "sok", "now", bound_name="smnt")
                for p in world.problems(final=False, degraded=degraded):
                    rep.bad(label, "right away: %s" % p)
                if sab:
                    sab.judge(rep)
                tb.stop()
            else:
                rc = tb.proc.returncode
                tb.kill()
                if rc <= 0 or rc >= 128:
                    rep.bad(label, "start-up died instead of refusing cleanly (exit %s): %s" %
                            (rc, tb.log_tail(3)))
            try:
                tb.start()
                degraded = world.degraded_now()
                if sab and not served:
                    sab.plant(rep, label, "sok", "now", bound_name="smnt")
                if sab:
                    sab.plant(rep, label, "sok", "late")
                for p in world.problems(final=True, degraded=degraded):
                    rep.bad(label, "after a clean start: %s" % p)
                if sab:
                    sab.judge(rep)
                tb.stop()
            except RuntimeError as e:
                rep.bad(label, "a clean start after it fails: %s" % e)
                tb.kill()
            check_sanitizers(tb, rep, label)
            return result

        each_point(rep, label, target, attempt)


def clean_both_on_signal(tb, tb2):
    """The second testbed took the signal handlers (each cleans only itself): a signal cleans both."""
    def on_signal(sig, frame):
        tb2.cleanup()
        tb.cleanup()
        os._exit(128 + sig)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary")
    ap.add_argument("--quick", action="store_true", help="EIO only (for development)")
    ap.add_argument("--ci", action="store_true", help="the CI size: start-up points with EIO only")
    ap.add_argument("--ops", default=None,
                    help="operations to inject into (default: all; with --sabotage: the Docker API's)")
    ap.add_argument("--sample", type=int, default=0,
                    help="run this many points per operation and start-up variant, drawn at random (one syscall "
                         "after the other) from all of them (0 = all)")
    ap.add_argument("--seed", type=int, default=None, help="the draw's seed (default: a new one, printed)")
    ap.add_argument("--match", default=None,
                    help="only the points whose label (OP/SYSCALL#N/ERRNO, as printed) matches this regular expression")
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument("--only-startup", action="store_true")
    ap.add_argument("--max-points", type=int, default=0, help="at most this many points per part (0 = all)")
    ap.add_argument("--show", type=int, default=4, help="points listed per kind of violation")
    ap.add_argument("--sabotage", action="store_true",
                    help="play a broken daemon after each request: every point must be reported")
    args = ap.parse_args()
    if strace_missing("errinject"):
        return 1

    ops = (args.ops or ",".join(list(OPS) + ([] if args.sabotage else list(ADMIN_OPS)))).split(",")
    unknown = [op for op in ops if op not in OPS and op not in ADMIN_OPS]
    if unknown:
        ap.error("unknown operation(s) %s (known: %s)" % (", ".join(unknown), ", ".join(list(OPS) + list(ADMIN_OPS))))
    if args.sabotage and set(ops) & set(ADMIN_OPS):
        ap.error("--sabotage plays a broken daemon for the Docker API's operations only")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    draw = random.Random(seed)
    if args.sample:
        log("sampling %d points per operation, seed %d (--seed %d draws the same points)" % (args.sample, seed, seed))

    def chosen(pts, op):
        if args.match:
            pts = [(e, c) for e, c in pts if re.search(args.match, "%s/%s#%d/%s" % (op, c["name"], c["seq"], e))]
        pts = sample_points(pts, args.sample, draw, syscall=lambda p: p[1]["name"]) if args.sample else pts
        return pts[:args.max_points] if args.max_points else pts

    tb = Testbed(nparts=1, tag="einj", binary=args.binary, env={"NVMEVOL_SELFTEST": "off"})
    tb2 = None   # two partitions, for an evacuation
    rep = Report()
    sab = Saboteur(tb) if args.sabotage else None
    degraded = 0
    t0 = time.time()
    try:
        tb.start_until_attached()
        if not args.only_startup:
            for op in ops:
                if op in ADMIN_OPS:
                    where = tb
                    if op in TWO_PARTITION_OPS:
                        if tb2 is None:
                            tb2 = Testbed(nparts=2, tag="einj2", binary=args.binary, env={"NVMEVOL_SELFTEST": "off"})
                            clean_both_on_signal(tb, tb2)
                            tb2.start_until_attached()
                        where = tb2
                    prepare_admin(where, [op])
                    pts = chosen(points_of(trace_admin_op(where, op), full=not args.quick), op)
                else:
                    where = tb
                    pts = chosen(points_of(trace_op(tb, op), full=not args.quick), op)
                log("%s: %d points" % (op, len(pts)))
                for err, target in pts:
                    try:
                        if op in ADMIN_OPS:
                            run_admin_point(where, rep, op, target, err)
                        else:
                            run_op_point(tb, rep, op, target, err, args, sab)
                    except (ApiError, RuntimeError, OSError) as e:
                        rep.bad("%s/%s#%d/%s" % (op, target["name"], target["seq"], err),
                                "%s: %s" % (type(e).__name__, e))
                        hard_reset(where)
                        if op in ADMIN_OPS:
                            prepare_admin(where, [op])
                if tb2 is not None and where is tb2:
                    tb2.cleanup()
                    tb2 = None
        if not args.no_startup:
            world = StartWorld(tb)
            world.prepare()
            for fresh in (False, True):
                run_startup(tb, rep, args, world, fresh, sab, chosen)
            degraded = world.degraded
    except Exception as e:
        rep.bad("harness", "%s: %s" % (type(e).__name__, e))
        log(traceback.format_exc())
        log(tb.log_tail(40))
    finally:
        if tb2 is not None:
            tb2.cleanup()
        tb.cleanup()
    failed = len(rep.bad_points & rep.point_labels)
    other = len(rep.bad_points - rep.point_labels)   # the harness, a prepared world that a clean start cannot repair
    if sab:
        # Every kind planted, every plant reported, every point reported: the checker can fail.
        # (This line first: it is the figure.) A harness error is never a pass.
        never, line = sab.figures()
        print("%s points=%d reported_points=%d harness_errors=%d seconds=%.0f" %
              (line, rep.points, failed, other, time.time() - t0))
    print("errinject: points=%d reached=%d violations=%d seconds=%.0f%s" %
          (rep.points, rep.reached, len(rep.violations), time.time() - t0,
           " sampled=%d seed=%d" % (args.sample, seed) if args.sample else ""))
    if rep.rolled_forward:
        print("  (%d points past a commit point said that the next start finishes the operation (a snapshot removal's "
              "Err, an evacuation's clean-up of its old copy); it did)" % rep.rolled_forward)
    if rep.degraded:
        print("  (%d admin points failed a rescan's probe of the devices too: the partition listed as missing right "
              "away, the documented degraded mode; accepted, and whole after the restart)" % rep.degraded)
    if degraded:
        print("  (%d start-up points served with the partition not attached or a record unreadable: volumes "
              "listed as partition-missing or record-unreadable, the documented degraded modes; accepted)" % degraded)
    for kind, (example, where) in rep.groups():
        where = sorted(where)
        print("  [%d] %s" % (len(where), kind))
        print("      e.g. %s" % example[:300])
        for lb, call in where[:args.show]:
            print("      at %s: failed %s" % (lb, call))
        if len(where) > args.show:
            print("      ... and %d more" % (len(where) - args.show))
    if rep.points == 0:
        print("  FAILED no point was run")
    if sab:
        for lb, kind in sab.missed:
            print("  NOT REPORTED %s at %s" % (kind, lb))
        for kind in never:
            print("  NEVER PLANTED %s (no point where it applies: run more points)" % kind)
        bad = sab.missed or never or other or rep.points == 0 or failed < rep.points
        print("%d passed, %d failed" % (0 if bad else 1, 1 if bad else 0))
        return 1 if bad else 0
    print("%d passed, %d failed" % (rep.points - failed, failed + other + (rep.points == 0)))
    return 1 if failed + other or rep.points == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
