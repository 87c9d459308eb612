#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Deterministic crash points: the daemon is killed at every occurrence of every
mutating syscall of Create, Mount, Unmount and Remove, of Create with from= (a
clone) of a volume not in use and of one in use, and of a snapshot (the admin
socket's /Admin.VolumeSnapshot), of a fence (/Admin.VolumeFence) and of an evacuation of the volume's
partition to the other one (/Admin.PartitionEvacuate, a run of its own on two partitions: evacuate, an
idle volume's final pass and switch; evacuatelive, an incremental live pass of a mounted volume after a
full one; evacuatefinal, the final incremental pass after a live one, and the switch; evacuatesnap, an
idle volume moved with its snapshot), ioctl included for the clones, the snapshot and the evacuation (FICLONE,
FIFREEZE, FIEMAP while frozen, FITHAW) (strace -e inject=SYSCALL:signal=KILL:when=N
on the running daemon), restarted, and checked; a snapshot is then either listed
with the files the volume had, or not listed and gone from the partition; an evacuated volume is whole on
exactly one partition, still mounted if it was, each snapshot listed once with its data next to it (a moved
one with the files it had). The daemon runs without a freeze
guardian (NVMEVOL_TEST_FREEZE_NO_GUARDIAN=1, as PID 1 of a plugin), so a kill while
frozen leaves the partition frozen and the restart must thaw it.

--ops recvfull,recvincr,move (a run of its own: the command's operations) kill the daemon at
every mutating syscall it makes while `nvmevol volume receive` applies a full stream and an
incremental one (prepared once from another volume), and while `nvmevol volume move` moves an
idle volume to a second daemon (its fence, final pass and clean-up). After the restart a
received volume is absent or as before, or holds the stream's files; its snapshot is listed
only with them and with the sender's ID, and a volume with them has that snapshot (committed
without it is a violation: the next incremental would be refused); a receive not committed leaves
no data or record of its snapshot. A moved volume is unchanged on the source, which is
either unfenced and serves a Mount, or fenced and refuses it naming the other node (never
stale data served); the other node's copy is absent or whole; then the move run again finishes
(continuing from what the other node holds) and leaves the source fenced and the copy served.

--ops import,export (a run of its own) kill the daemon at every mutating syscall it makes while
`nvmevol volume import` makes a new volume from an archive (made once by `volume export`) and while
`volume export` writes an idle volume (its temporary snapshot, the bind, the close). After the
restart an imported volume is absent or holds the archive's files, nothing is left in
nvmevol/imports/ (start-up deletes a killed import's directory) and no snapshot is there; an
exported volume is unchanged and its temporary snapshot is neither listed nor on disk (start-up
deletes it: `temporary` in its record); an export that exited 0 wrote the whole volume.

For each operation: count its syscalls once (strace -c), then for each syscall s
and each n <= count, bring the volume to the operation's precondition through
the API and write fresh data into it, attach strace with the injection, send the
request (which gets no answer), wait for the kill, start the daemon again and check
that the volume is either fully there (with the data written before the point, or
empty if it was just created) or fully gone, that records, index entries and mount
counts agree with each other and with mountinfo (binds and partition mounts with the
promised source device and flags), and that nothing is left half-done (no temp files,
no quarantined directory, no stray mount); a clone that is there holds its source's
files, link and hard link, and the source is unchanged (still mounted once for the
clone of a volume in use).

The daemon's exit status is read: only the injected SIGKILL is expected (a SIGSEGV, an
abort or an exit is a violation). A request that gets no answer within 20 s while the
daemon lives is a hang, a violation; a point is "not reached" only when the request was
answered and no kill followed. --sabotage plays a broken daemon (segv: a SIGSEGV at the
point; hang: the call blocks; data: the data file changes across the restart): the run
must fail.

--sample N runs N points per operation drawn at random (--seed, printed) from all of them, one syscall
after the other, for a run of bounded time; without it every point runs.

Prints "crashpoints: points=N reached=N violations=0 hangs=0 crashes=0 ..." and exits
non-zero on any violation.
"""
import argparse
import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import (Testbed, Strace, VolumeView, MUTATING_SYSCALLS, ApiError, log, strace_missing,  # noqa: E402
                    consistency_problems, leftovers, stray_mounts, ensure_clone_source, clone_problems,
                    CLONE_SOURCE, files_below, partition_mount_problems, COMMAND_TIMEOUT, Streams, command,
                    command_ok, make_streams, admin_socket, partition_of, receive, remove_fully, snapshot_dirs,
                    snapshot_files, snapshot_ids, Archive, make_archive, archive_files, import_leftovers, snapshot_names,
                    sample_points, killed_daemon_stuck)

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
    "snapshot": ("/Admin.VolumeSnapshot", {"Name": NAME, "Snapshot": "cps"}),
    "fence": ("/Admin.VolumeFence", {"Name": NAME, "Host": "cpnode2"}),
    # The partition is the one that holds the volume at the time (send() fills it in): two partitions.
    "evacuate": ("/Admin.PartitionEvacuate", {}),
    "evacuatelive": ("/Admin.PartitionEvacuate", {}),
    "evacuatefinal": ("/Admin.PartitionEvacuate", {}),
    "evacuatesnap": ("/Admin.PartitionEvacuate", {}),
    # The command runs them (send() starts it): every daemon call of a receive of a full stream, of
    # an incremental one, and of a move of an idle volume (its fence, final pass and what follows).
    "recvfull": None,
    # `nvmevol volume import` of an archive into a new volume, `volume export` of an idle volume (its
    # temporary snapshot, the bind, the close that removes both).
    "import": None,
    "export": None,
    "recvincr": None,
    "move": None,
}
EVACUATE_OPS = {"evacuate", "evacuatelive", "evacuatefinal", "evacuatesnap"}
ADMIN_OPS = {"snapshot", "fence"} | EVACUATE_OPS   # served on the admin socket
COMMAND_OPS = {"recvfull", "recvincr", "move", "import", "export"}  # `nvmevol volume ...` against the daemon
TWO_PARTITION_OPS = EVACUATE_OPS
# Their own runs (run-all.sh): fence and evacuate on two partitions, the command's on streams and a second daemon.
DEFAULT_OPS = [op for op in OPS if op != "fence" and op not in EVACUATE_OPS and op not in COMMAND_OPS]
RECV = "cprecv"      # the volume a receive makes or updates
STREAM_SRC = "cpsend"   # the volume the streams are sent from
NODE2 = "cpnode2"    # the other node of a move: a second daemon
SNAP = "cps"
Streams.via = Streams.tb2 = None   # a move's second daemon and its `--via` wrapper
CLONE_OPS = {"clone": False, "clonelive": True}   # op: the source is mounted
source_files = {}
# --sabotage: what strace does at the point instead of the SIGKILL
SABOTAGE = {"segv": "signal=SEGV", "hang": "delay_enter=%d" % 600_000_000, "data": "signal=KILL"}
REQUEST_TIMEOUT = 20   # longer than any request takes on a loaded machine: past it, the daemon hangs


def exit_text(rc):
    return "signal %s" % signal.Signals(-rc).name if rc < 0 else "status %d" % rc


def unmount_all(tb):
    for mid, n in VolumeView(tb, NAME).counts.items():
        for _ in range(n):
            tb.ok("/VolumeDriver.Unmount", {"Name": NAME, "ID": mid})


def exists(tb):
    st, _ = tb.call("/VolumeDriver.Get", {"Name": NAME})
    return st == 200


def write_data(tb):
    """Fresh contents in the volume before a point (a file rewritten, one in a subdirectory); returns
    what files_below() must read after the restart if the volume is still there."""
    d = tb.volume_dir(NAME)
    tag = ("%s %016x\n" % (NAME, random.getrandbits(64))).encode()
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    for rel, content in (("data.bin", tag * 300), ("sub/b", tag)):
        with open(os.path.join(d, rel), "wb") as f:
            f.write(content)
            os.fsync(f.fileno())
    return files_below(d)


def prepare_streams(tb, ops):
    """The streams for the receive points (sent once, without a point), the second daemon for a move."""
    if {"recvfull", "recvincr"} & set(ops):
        make_streams(tb, STREAM_SRC, OPTS)
    if "import" in ops:
        make_archive(tb, STREAM_SRC + "a", OPTS)
    if "move" in ops:
        Streams.tb2 = Testbed(nparts=1, tag="cpt2", binary=tb.binary, env={"NVMEVOL_SELFTEST": "off"})

        def on_signal(sig, frame):   # the second testbed took the handlers: clean up both
            Streams.tb2.cleanup()
            tb.cleanup()
            os._exit(128 + sig)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, on_signal)
        Streams.tb2.start()
        Streams.via = os.path.join(tb.base, "node2")
        with open(Streams.via, "w") as f:
            f.write("#!/bin/sh\nshift\nexec '%s' \"$@\" --socket '%s'\n" %
                    (tb.binary, admin_socket(Streams.tb2)))
        os.chmod(Streams.via, 0o755)


def run_command_op(tb, op, timeout):
    """The command of @op; True when it exited 0."""
    if op == "recvfull":
        rc = receive(tb, RECV, Streams.full, timeout)[0]
    elif op == "recvincr":
        rc = receive(tb, RECV, Streams.incr, timeout)[0]
    elif op == "import":
        with open(Archive.path, "rb") as f:
            rc = command(tb, ["volume", "import", NAME, "-o", "uid=7", "-o", "mode=0750"], stdin=f,
                         timeout=timeout)[0]
    elif op == "export":
        with open(os.path.join(tb.base, "export.tar"), "wb") as f:
            rc = command(tb, ["volume", "export", NAME], stdout=f, timeout=timeout)[0]
        export_status.append(rc)
    else:
        rc = command(tb, ["volume", "move", NAME, "--via", Streams.via, "--node", NODE2], timeout=timeout)[0]
    return rc == 0


export_status = []   # the exit status of the export command of this point (none: it did not end)


def send(tb, op, timeout):
    if op in COMMAND_OPS:
        ok = run_command_op(tb, op, max(timeout, COMMAND_TIMEOUT))
        return (200, {}) if ok else (500, {"Err": "the command failed"})
    endpoint, body = OPS[op]
    if op in EVACUATE_OPS:
        body = {"Partition": partition_of(tb, NAME)}
    return tb.admin_call(endpoint, body, timeout=timeout) if op in ADMIN_OPS else tb.call(endpoint, body,
                                                                                          timeout=timeout)


def snapshot_problems(tb, data):
    """A snapshot is listed with the volume's files of before the point, or gone: record and data together."""
    st, j = tb.admin_call("/Admin.VolumeSnapshots", {"Name": NAME})
    if st != 200:
        return ["volume snapshots answered %s %s" % (st, j)]
    listed = [s["name"] for s in j.get("snapshots", [])]
    recs, dirs = snapshot_dirs(tb, NAME)
    if listed == [SNAP]:
        bad = [] if (recs, dirs) == ([SNAP + ".json"], [SNAP]) else ["snapshot listed, on disk %s %s" % (recs, dirs)]
        for r in tb.fs_roots():
            d = os.path.join(r, "nvmevol", "snapshots", NAME, "data", SNAP)
            if os.path.isdir(d) and files_below(d) != data:
                bad.append("snapshot %s holds %s, the volume had %s" % (SNAP, sorted(files_below(d)), sorted(data)))
        return bad
    if listed:
        return ["snapshots listed: %s" % listed]
    return ["snapshot not listed but left on disk: %s %s" % (recs, dirs)] if recs or dirs else []


def evacuation_snapshots(tb):
    return [s["name"] for s in tb.admin_ok("/Admin.VolumeSnapshots", {"Name": NAME}).get("snapshots", [])
            if s.get("evacuation")]


def evacuate_problems(tb, op, snap_data):
    """Each snapshot listed once, with its data on the volume's partition; the moved one with its files; no
    snapshot data without a record there (the evacuation's stage excepted)."""
    st, j = tb.admin_call("/Admin.VolumeSnapshots", {"Name": NAME})
    if st != 200:
        return ["volume snapshots answered %s %s" % (st, j)]
    listed = [s["name"] for s in j.get("snapshots", [])]
    bad = ["snapshot %s listed %d times" % (n, listed.count(n)) for n in set(listed) if listed.count(n) > 1]
    d = tb.volume_dir(NAME)
    root = os.path.dirname(os.path.dirname(os.path.dirname(d))) if d else None
    for r in tb.fs_roots():
        base = os.path.join(r, "nvmevol", "snapshots", NAME)
        recs = sorted(f[:-5] for f in os.listdir(os.path.join(base, "meta"))) if os.path.isdir(
            os.path.join(base, "meta")) else []
        data = sorted(os.listdir(os.path.join(base, "data"))) if os.path.isdir(os.path.join(base, "data")) else []
        if r != root:
            if recs or data:
                bad.append("snapshots of %s left on the partition it is not on: %s %s" % (NAME, recs, data))
            continue
        if recs != sorted(listed) or data != sorted(listed):
            bad.append("snapshots listed %s, records %s, data %s" % (sorted(listed), recs, data))
    if op == "evacuatesnap":
        if SNAP not in listed:
            bad.append("snapshot %s of a moved volume is not listed: %s" % (SNAP, listed))
        elif root:
            got = files_below(os.path.join(root, "nvmevol", "snapshots", NAME, "data", SNAP))
            if got != snap_data:
                bad.append("snapshot %s holds %s, it had %s" % (SNAP, sorted(got), sorted(snap_data)))
    return bad


snap_files = {}   # evacuatesnap: what the snapshot holds


def precondition(tb, op):
    """The volume as the operation expects it: absent (create, clone), unmounted (mount, remove), mounted once
    (unmount), with fresh data; for a clone, its source with its files, mounted or not. Returns the data
    (None when the volume is absent)."""
    if op in CLONE_OPS:
        source_files.clear()
        source_files.update(ensure_clone_source(tb, OPTS, CLONE_OPS[op]))
    if op in ("recvfull", "recvincr"):
        remove_fully(tb, RECV)
        if op == "recvfull":
            return None
        rc, _, err = receive(tb, RECV, Streams.full)
        if rc != 0:
            raise ApiError("the full stream's receive -> %d %s" % (rc, err.strip()[-300:]))
        return Streams.r1
    if op == "move":
        remove_fully(Streams.tb2, NAME)
        if exists(tb):
            remove_fully(tb, NAME)
        tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
        return write_data(tb)
    if op == "export":
        export_status.clear()
        remove_fully(tb, NAME)
        tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
        return write_data(tb)
    if op == "create" or op in CLONE_OPS or op == "import":
        if exists(tb):
            remove_fully(tb, NAME)
        if exists(tb):
            unmount_all(tb)
            tb.ok("/VolumeDriver.Remove", {"Name": NAME})
        return None
    if not exists(tb):
        tb.ok("/VolumeDriver.Create", {"Name": NAME, "Opts": OPTS})
    unmount_all(tb)
    if op == "snapshot":
        j = tb.admin_ok("/Admin.VolumeSnapshots", {"Name": NAME})
        if any(s["name"] == SNAP for s in j.get("snapshots", [])):
            tb.admin_ok("/Admin.VolumeSnapshotRemove", {"Name": NAME, "Snapshot": SNAP})
    if op == "unmount":
        tb.ok("/VolumeDriver.Mount", {"Name": NAME, "ID": MID})
    if op == "fence":
        tb.admin_ok("/Admin.VolumeUnfence", {"Name": NAME})
    if op in EVACUATE_OPS:
        tb.admin_ok("/Admin.VolumeUnfence", {"Name": NAME})   # the fence op's, before it: mounts again
        # Evacuate cordons the partition it empties: both take volumes again, so it can move back.
        for p in tb.admin_ok("/Admin.Status", {}).get("partitions", []):
            tb.admin_ok("/Admin.PartitionUncordon", {"Partition": p["uuid"]})
        # No snapshot but the op's own: the user's of evacuatesnap, the evacuation's of a live pass.
        for s in tb.admin_ok("/Admin.VolumeSnapshots", {"Name": NAME}).get("snapshots", []):
            tb.admin_ok("/Admin.VolumeSnapshotRemove", {"Name": NAME, "Snapshot": s["name"]})
    if op == "evacuatesnap":
        snap_files.clear()
        snap_files.update(write_data(tb))
        tb.admin_ok("/Admin.VolumeSnapshot", {"Name": NAME, "Snapshot": SNAP})
    if op in ("evacuatelive", "evacuatefinal"):
        # A full live pass first (answered): the op's pass is the incremental one after it.
        tb.ok("/VolumeDriver.Mount", {"Name": NAME, "ID": MID})
        write_data(tb)
        j = tb.admin_ok("/Admin.PartitionEvacuate", {"Partition": partition_of(tb, NAME)})
        if not any(w.get("name") == NAME and w.get("pass") for w in j.get("waiting", [])):
            raise ApiError("no live pass before the point: %s" % j)
        if op == "evacuatefinal":
            data = write_data(tb)
            unmount_all(tb)
            return data
    return write_data(tb)


def syscalls_of(op):
    """A clone's ioctls are its FICLONE, FIFREEZE, FIEMAP and FITHAW: points too (a receive, a move and an
    evacuation take snapshots)."""
    return SYSCALLS + ["ioctl"] if op in CLONE_OPS or op == "snapshot" or op in EVACUATE_OPS or op in COMMAND_OPS \
        else SYSCALLS


def count_syscalls(tb, op):
    """{syscall: calls} that the daemon makes while serving @op (all threads together)."""
    st = Strace(tb.pid, ["-e", "trace=" + ",".join(syscalls_of(op))], os.path.join(tb.base, "count.trace"))
    st_, j = send(tb, op, 60)
    if st_ != 200 or not isinstance(j, dict) or j.get("Err"):
        raise ApiError("%s -> %s %s" % (op, st_, j))
    time.sleep(0.2)
    st.detach()
    counts = {}
    for c in st.events():
        # when=N counts per thread: a command's requests spread over threads reach the largest per-thread number.
        counts[c["name"]] = max(counts.get(c["name"], 0), c["seq"]) if op in COMMAND_OPS else \
            counts.get(c["name"], 0) + 1
    return counts


def receive_problems(tb, op, before, stats):
    """A receive is whole or not there: the volume absent (full) or as before (incremental) and the
    stream's snapshot not listed, else with the stream's files and its snapshot listed with those files
    and the sender's ID. Committed without its snapshot (once the window between the swap and the
    snapshot: the next incremental was refused, naming a full stream) is a violation."""
    v = VolumeView(tb, RECV, with_data=True)
    bad = ["%s: %s" % (RECV, p) for p in consistency_problems(tb, v, owner=(7, 0, 0o750))]
    new = Streams.r1 if op == "recvfull" else Streams.r2
    ids = snapshot_ids(tb, RECV)
    listed = sorted(ids)
    want_new = "r1" if op == "recvfull" else "r2"
    if not v.present or (op == "recvincr" and v.data == before):
        # Not committed: nothing of the stream's snapshot stays on the partition (data or record).
        for r in tb.fs_roots():
            for rel in (os.path.join("data", want_new), os.path.join("meta", want_new + ".json")):
                if os.path.lexists(os.path.join(r, "nvmevol", "snapshots", RECV, rel)):
                    bad.append("the receive was not committed, but nvmevol/snapshots/%s/%s is there" % (RECV, rel))
    if not v.present:
        if op == "recvincr":
            bad.append("the volume an incremental receive updates is gone")
        elif listed:
            bad.append("no volume, but snapshots listed: %s" % listed)
        return bad
    if v.data == new:
        if want_new not in listed:
            bad.append("the volume holds the stream's files but its snapshot %s is not listed (committed "
                       "without its snapshot)" % want_new)
        elif ids[want_new] != Streams.ids.get(want_new):
            bad.append("snapshot %s has ID %s, not the sender's %s" % (want_new, ids[want_new],
                                                                      Streams.ids.get(want_new)))
        stats["received"] = stats.get("received", 0) + 1
    elif op == "recvincr" and v.data == before:
        if want_new in listed:
            bad.append("snapshot r2 listed but the volume is still as before the stream")
    else:
        bad.append("the volume holds neither the state before nor the stream's: %s" % sorted(v.data or {}))
    if want_new in listed and snapshot_files(tb, RECV, want_new) != new:
        bad.append("snapshot %s does not hold the stream's files" % want_new)
    for r in tb.fs_roots():
        for sub in (os.path.join("nvmevol", "imports"), os.path.join("nvmevol", "snapshots", RECV)):
            d = os.path.join(r, sub)
            left = [fn for fn in (os.listdir(d) if os.path.isdir(d) else []) if sub.endswith("imports") or
                    fn.startswith("receive-")]
            if left:
                bad.append("left after the restart: %s/%s" % (sub, left))
    return bad


def import_problems(tb, stats):
    """After a kill in an import: the volume absent, or there with the archive's files (committed); no
    pending directory left in imports/ after the restart, no snapshot."""
    v = VolumeView(tb, NAME, with_data=True)
    bad = ["left after the restart: %s" % p for p in import_leftovers(tb)]
    if v.present:
        stats["imported"] = stats.get("imported", 0) + 1
        if v.data != Archive.files:
            bad.append("an imported volume without the archive's files: %s" % sorted(v.data or {}))
    if snapshot_names(tb, NAME) or any(snapshot_dirs(tb, NAME)):
        bad.append("an import left snapshots: %s %s" % (snapshot_names(tb, NAME), snapshot_dirs(tb, NAME)))
    return bad


def export_problems(tb, data, stats):
    """After a kill in an export (the volume's data is checked as for every op): its temporary snapshot gone
    after the restart (the plugin's start deletes it: `temporary` in its record), listed or on disk; an
    export that exited 0 wrote the whole volume (a kill must never give a cut archive and status 0)."""
    bad = []
    names, dirs = snapshot_names(tb, NAME), snapshot_dirs(tb, NAME)
    if names or any(dirs):
        bad.append("the export's temporary snapshot is still there after the restart: listed %s, on disk %s" %
                   (names, dirs))
    if export_status == [0]:
        stats["exported"] = stats.get("exported", 0) + 1
        got = archive_files(os.path.join(tb.base, "export.tar"))
        if got != data:
            bad.append("the export exited 0 but its archive is %s" % ("cut" if got is None else
                                                                       "not the volume: %s" % sorted(got)))
    return bad


def move_problems(tb, data, stats):
    """After a kill in a move: this copy as it was, fenced (and then refusing a Mount: never stale data
    served) or not (and then served); the other node's absent or whole; then the move run again
    finishes, and both sides are as a move leaves them."""
    bad = []
    tb2 = Streams.tb2
    v = VolumeView(tb, NAME, with_data=True)
    if not v.present or v.data != data:
        return ["the source is %s after the kill" % ("changed" if v.present else "gone")]
    _, rec, _ = tb.record(NAME)
    fenced = bool((rec or {}).get("moved_to"))
    st, j = tb.call("/VolumeDriver.Mount", {"Name": NAME, "ID": "cpcheck"})
    if fenced:
        stats["fenced"] = stats.get("fenced", 0) + 1
        if st == 200:
            bad.append("the source is fenced but a Mount was served")
        elif NODE2 not in (j or {}).get("Err", ""):
            bad.append("a fenced source's Mount Err does not name %s: %s" % (NODE2, j))
    else:
        if st != 200:
            bad.append("an unfenced source refused a Mount: %s" % j)
        else:
            tb.ok("/VolumeDriver.Unmount", {"Name": NAME, "ID": "cpcheck"})
    v2 = VolumeView(tb2, NAME, with_data=True)
    if v2.present:
        stats["arrived"] = stats.get("arrived", 0) + 1
        if v2.data != data:
            bad.append("the other node holds a copy that is not whole: %s" % sorted(v2.data or {}))
    rc, out, err = command(tb, ["volume", "move", NAME, "--via", Streams.via, "--node", NODE2])
    if rc != 0:
        return bad + ["the move run again after the kill failed (%d): %s" % (rc, err.strip()[-400:])]
    if "moved already" in out:
        stats["found_moved"] = stats.get("found_moved", 0) + 1
    v2 = VolumeView(tb2, NAME, with_data=True)
    if not v2.present or v2.data != data:
        bad.append("after the rerun the other node's copy is %s" % ("not whole" if v2.present else "missing"))
    st, j = tb.call("/VolumeDriver.Mount", {"Name": NAME, "ID": "cpcheck2"})
    if st == 200:
        bad.append("after the rerun the source still serves a Mount")
    st, j = tb2.call("/VolumeDriver.Mount", {"Name": NAME, "ID": "cpcheck2"})
    if st != 200:
        bad.append("after the rerun the other node refuses a Mount: %s" % j)
    else:
        tb2.ok("/VolumeDriver.Unmount", {"Name": NAME, "ID": "cpcheck2"})
    bad += ["node2: %s" % p for p in consistency_problems(tb2, v2, owner=(7, 0, 0o750))]
    return bad


class Checker:
    def __init__(self, tb):
        self.tb = tb
        self.violations = []
        self.stats = {}

    def bad(self, what):
        self.violations.append(what)
        log("VIOLATION " + what)

    def check(self, label, op, data):
        """@data: the files written before the point (None: the volume was absent)."""
        tb = self.tb
        v = VolumeView(tb, NAME, with_data=True)
        for p in consistency_problems(tb, v, owner=(7, 0, 0o750)):
            self.bad("%s: %s" % (label, p))
        for p in partition_mount_problems(tb):
            self.bad("%s: %s" % (label, p))
        if v.present and data is not None and v.data != data and op not in ("recvfull", "recvincr"):
            self.bad("%s: the data written before the point changed: %s, written %s" %
                     (label, sorted(v.data or {}), sorted(data)))
        if v.present and op == "create" and v.data:
            self.bad("%s: a new volume holds files: %s" % (label, sorted(v.data)))
        for p in leftovers(tb):
            self.bad("%s: leftover %s" % (label, p))
        for p in stray_mounts(tb, (NAME, CLONE_SOURCE, RECV)):
            self.bad("%s: stray mount %s" % (label, p))
        if op in CLONE_OPS:
            for p in clone_problems(tb, NAME, source_files, CLONE_OPS[op]):
                self.bad("%s: %s" % (label, p))
        if op == "snapshot":
            for p in snapshot_problems(tb, data):
                self.bad("%s: %s" % (label, p))
        if op == "import":
            for p in import_problems(tb, self.stats):
                self.bad("%s: %s" % (label, p))
        if op == "export":
            for p in export_problems(tb, data, self.stats):
                self.bad("%s: %s" % (label, p))
        if op in ("recvfull", "recvincr"):
            for p in receive_problems(tb, op, data, self.stats):
                self.bad("%s: %s" % (label, p))
        if op == "move":
            for p in move_problems(tb, data, self.stats):
                self.bad("%s: %s" % (label, p))
        if op in EVACUATE_OPS and v.present:
            for p in evacuate_problems(tb, op, snap_files):
                self.bad("%s: %s" % (label, p))
            if op == "evacuatelive" and v.total != 1:
                self.bad("%s: a volume in use is mounted %d times after a live pass" % (label, v.total))
        if not tb.canary_intact():
            self.bad("%s: canary changed" % label)
        return v.present


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary")
    ap.add_argument("--max-per-syscall", type=int, default=0, help="cap n per syscall (0 = all)")
    ap.add_argument("--syscalls", default="",
                    help="only these syscalls are points, e.g. renameat,renameat2,fsync,ioctl (default: every one)")
    ap.add_argument("--spread", type=int, default=0,
                    help="at most this many n per syscall, spread evenly from the first call to the last (0 = all)")
    ap.add_argument("--ops", default=",".join(DEFAULT_OPS),
                    help="operations to kill in (default: all but %s)" % ", ".join(sorted(set(OPS) - set(DEFAULT_OPS))))
    ap.add_argument("--max-points", type=int, default=0, help="stop after this many points (0 = all)")
    ap.add_argument("--sample", type=int, default=0,
                    help="run this many points per operation, drawn at random from all of them (0 = all)")
    ap.add_argument("--seed", type=int, default=None, help="the draw's seed (default: a new one, printed)")
    ap.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT,
                    help="a request without an answer for this long, the daemon alive, is a hang")
    ap.add_argument("--sabotage", choices=sorted(SABOTAGE),
                    help="play a broken daemon (the run must fail): segv: a SIGSEGV instead of the kill; "
                         "hang: the call blocks instead; data: the data file changes across the restart")
    args = ap.parse_args()
    if strace_missing("crashpoints"):
        return 1

    tb = Testbed(nparts=2 if TWO_PARTITION_OPS & set(args.ops.split(",")) else 1, tag="cpts", binary=args.binary,
                 env={"NVMEVOL_SELFTEST": "off", "NVMEVOL_TEST_FREEZE_NO_GUARDIAN": "1"})
    chk = Checker(tb)
    points = reached = thawed = hangs = crashes = 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    draw = random.Random(seed)
    if args.sample:
        log("sampling %d points per operation, seed %d (--seed %d draws the same points)" % (args.sample, seed, seed))
    t0 = time.time()
    try:
        tb.start()
        prepare_streams(tb, args.ops.split(","))
        for op in args.ops.split(","):
            precondition(tb, op)
            counts = count_syscalls(tb, op)
            log("%s: %s" % (op, counts))
            all_points = []
            for sc, n_calls in sorted(counts.items()):
                if args.syscalls and sc not in args.syscalls.split(","):
                    continue
                limit = n_calls if not args.max_per_syscall else min(n_calls, args.max_per_syscall)
                ns = range(1, limit + 1)
                if args.spread and limit > args.spread:
                    k = max(args.spread, 2)
                    ns = sorted({1 + round(i * (limit - 1) / (k - 1)) for i in range(k)})
                all_points += [(sc, n) for n in ns]
            if args.sample and len(all_points) > args.sample:
                all_points = sample_points(all_points, args.sample, draw)
            for sc, n in all_points:
                if args.max_points and points >= args.max_points:
                    break
                label = "%s/%s#%d" % (op, sc, n)
                data = precondition(tb, op)
                p = Strace(tb.pid, ["-e", "trace=" + sc, "-e", "inject=%s:%s:when=%d" %
                                    (sc, SABOTAGE.get(args.sabotage, "signal=KILL"), n)],
                           os.path.join(tb.base, "point.trace"))
                points += 1
                answered = hung = False
                try:
                    send(tb, op, args.request_timeout)
                    answered = True
                except (TimeoutError, socket.timeout) as e:
                    hung = tb.alive()
                    if hung and op in COMMAND_OPS:
                        log("%s: %s" % (label, e))
                except (OSError, http.client.HTTPException):
                    pass   # the kill closed the connection
                rc = None
                try:
                    rc = tb.proc.wait(timeout=5 if answered else 1)
                except subprocess.TimeoutExpired:
                    pass
                p.detach()
                if hung and rc is None:
                    chk.bad("%s: the request hung (no answer in %.0f s, daemon alive): a deadlock is not an "
                            "unreached point" % (label, args.request_timeout))
                    hangs += 1
                elif rc is None and not answered:
                    chk.bad("%s: no answer and no kill" % label)
                elif rc is not None and rc != -signal.SIGKILL:
                    chk.bad("%s: the daemon exited with %s, not the injected SIGKILL: %s" %
                            (label, exit_text(rc), tb.log_tail(3).strip()[-300:]))
                    crashes += 1
                elif rc is not None:
                    reached += 1
                # rc None and answered: this run made fewer calls than the count, the point was not reached
                stuck = killed_daemon_stuck(tb) if rc is None else None
                if stuck:
                    chk.bad("%s: the killed daemon did not exit in 10 s (its threads wait in: %s): one waited on "
                            "the partition it had frozen; thawed by hand" % (label, stuck))
                tb.kill()  # reaps the killed daemon, or kills one the point did not reach
                tb.start()
                if args.sabotage == "data" and tb.volume_dir(NAME) and data:
                    with open(os.path.join(tb.volume_dir(NAME), "data.bin"), "ab") as f:
                        f.write(b"lost a write")
                chk.check(label, op, data)
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
        if Streams.tb2:
            Streams.tb2.cleanup()
        tb.cleanup()
    extra = "".join(" %s=%d" % kv for kv in sorted(chk.stats.items()))
    print("crashpoints: points=%d reached=%d violations=%d hangs=%d crashes=%d thawed_at_start=%d seconds=%.0f%s%s" %
          (points, reached, len(chk.violations), hangs, crashes, thawed, time.time() - t0, extra,
           " sampled=%d seed=%d" % (args.sample, seed) if args.sample else ""))
    if points == 0:
        chk.bad("no point was run")
    for v in chk.violations[:20]:
        print("  " + v)
    print("%d passed, %d failed" % (1 if not chk.violations else 0, 1 if chk.violations else 0))
    return 1 if chk.violations else 0


if __name__ == "__main__":
    sys.exit(main())
