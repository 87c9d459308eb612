#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Random kill -9 crash recovery test (reliability doc §6.4, figure R2).

Against two real loop XFS partitions, a client sends a random mix of
operations (40% Create with random options, a third of them clones with
from=NAME; 20% Mount, 20% Unmount, 20% Remove; a few names and mount IDs, so
they collide), with replies checked
against a model of what was acknowledged. Each cycle ends with one more
request after which the daemon is SIGKILLed at a uniform random 0-20 ms;
then it is restarted and invariants I1-I7 are checked:

  I1 every acknowledged volume is listed, Get OK, same options, directory with
     the recorded owner and mode (a clone's: its source's), and the sentinel
     file written after its Create still there with the same content; a clone
     held its source's sentinel when it was created;
  I2 nothing acknowledged as removed is listed or present on disk;
  I3 every record parses, is in state "ready", no temp files remain;
  I4 no orphan directory, no quarantine, no empty trash leftovers, no stray
     mount or mountpoint directory under prop/;
  I5 count > 0 <=> bound at prop/<name> from the right partition (the device
     number of the partition mount holding the directory) and directory, with
     noatime,nodiratime,nosuid,nodev (unless suid/dev=true), ro when the
     partition is; the partition mounts are the whole XFS of the testbed's
     devices, noatime,nodiratime,nosuid,nodev, private;
  I7 per mount ID: acknowledged mounts minus sent unmounts <= stored count
     <= sent mounts minus acknowledged unmounts. An over-count is the
     documented limitation (kill between persisting and replying) and is
     reported, not failed; an under-count is a violation.

A request whose reply was lost may or may not have happened; the check
accepts both outcomes but never a half one. The daemon runs with
NVMEVOL_TEST_FREEZE_NO_GUARDIAN=1 (as PID 1 of a plugin: no guardian outlives
it), so a kill during the freeze of a clone of a mounted volume leaves the
partition frozen for start-up to thaw. Prints one line of figures ("crash:
kills=N ...") and exits non-zero on any violation, or when --max-seconds stops
the run before --min-kills kills. --sabotage binds a mounted volume from the
other partition (or without nosuid) after each restart: the run must fail.
"""

import argparse
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import (Testbed, Counter, ApiError, log, parse_http_response, bind_problems,  # noqa: E402
                    partition_mount_problems)

NAMES = ["c%02d" % i for i in range(10)]
IDS = ["id-%d" % i for i in range(4)]
SENTINEL = ".nvt-sentinel"


class Vol:
    def __init__(self, req, opts, owner, clone_from=None):
        self.req = req          # the Create options, to send again
        self.opts = opts        # the options Status shows
        self.owner = owner      # (uid, gid, mode) of its directory, None if unknown
        self.clone_from = clone_from
        self.sentinel = None
        self.lo = {}   # acknowledged mounts - sent unmounts
        self.hi = {}   # sent mounts - acknowledged unmounts

    def lo_total(self):
        return sum(max(0, v) for v in self.lo.values())

    def hi_total(self):
        return sum(max(0, v) for v in self.hi.values())


def random_opts(rng, labels):
    o = {}
    if rng.random() < 0.5:
        o["partition"] = rng.choice(labels)
    if rng.random() < 0.4:
        o["uid"] = str(rng.choice([0, 999, 1000, 65534]))
    if rng.random() < 0.3:
        o["gid"] = str(rng.choice([0, 100, 999]))
    if rng.random() < 0.4:
        o["mode"] = rng.choice(["0700", "0750", "0755", "0770", "2775"])
    if rng.random() < 0.1:
        o["selftest"] = "off"
    if rng.random() < 0.05:
        o["size"] = "10M"   # no quota in this kernel: must fail cleanly
    return o


def http_request(endpoint, body):
    data = json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (endpoint.encode(), len(data))) + data


def parse_reply(raw):
    """(status, json) if raw is a complete HTTP response, else None."""
    r = parse_http_response(raw)
    if r is None:
        return None
    status, hdr, body = r
    try:
        if "content-length" not in hdr or len(body) < int(hdr["content-length"]):
            return None
    except ValueError:
        return None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


class CrashTest:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.tb = Testbed(nparts=2, tag="crsh", binary=args.binary,
                          env={"NVMEVOL_TEST_FREEZE_NO_GUARDIAN": "1"})
        self.model = {}
        self.maybe = {}   # name -> ("create", opts) | ("remove", None)
        self.v = Counter()   # violations by kind
        self.f = Counter()   # other figures
        self.restart_ms = []
        self.details = []

    def violation(self, kind, msg):
        self.v.add(kind)
        if len(self.details) < 40:
            self.details.append("%s: %s" % (kind, msg))
        log("VIOLATION %s: %s" % (kind, msg))

    # ---- operations ----

    def pick_op(self):
        r = self.rng.random()
        name = self.rng.choice(NAMES)
        if r < 0.4:
            if name in self.model and self.rng.random() < 0.7:
                opts = dict(self.model[name].req)
            elif self.rng.random() < 0.33:
                # Mostly an existing source (some mounted: the freeze path), sometimes a missing one.
                known = sorted(self.model) if self.rng.random() < 0.9 else []
                opts = {"from": self.rng.choice(known or NAMES)}
            else:
                opts = random_opts(self.rng, self.tb.labels)
            return "Create", {"Name": name, "Opts": opts}
        if r < 0.6:
            return "Mount", {"Name": name, "ID": self.rng.choice(IDS)}
        if r < 0.8:
            v = self.model.get(name)
            ids = [i for i, n in (v.lo.items() if v else []) if n > 0]
            return "Unmount", {"Name": name, "ID": self.rng.choice(ids or IDS)}
        return "Remove", {"Name": name}

    def expect_and_apply(self, op, body, status, reply):
        """Checks an acknowledged reply against the model and applies it."""
        name = body["Name"]
        v = self.model.get(name)
        ok = status == 200 and isinstance(reply, dict) and not reply.get("Err")
        isjson = isinstance(reply, dict)
        if not isjson:
            self.violation("bad_reply", "%s %s -> %s (not a JSON object)" % (op, name, status))
            return
        if op == "Create":
            src = body["Opts"].get("from")
            if v is not None:
                # from= is a request, not an option: the same SOURCE (or none) and the same options.
                rest = {k: x for k, x in body["Opts"].items() if k != "from"}
                want_ok = rest == v.opts and (src is None or src == v.clone_from)
            elif src:
                want_ok = src in self.model
            else:
                want_ok = "size" not in body["Opts"]
            if ok != want_ok:
                self.violation("unexpected_reply", "Create %s %s -> %s %s" % (name, body["Opts"], status, reply))
            if ok and v is None:
                self.add_volume(name, body["Opts"])
        elif op == "Mount":
            if ok != (v is not None):
                self.violation("unexpected_reply", "Mount %s -> %s %s" % (name, status, reply))
            if ok and v is not None:
                mp = reply.get("Mountpoint")
                if mp != os.path.join(self.tb.prop, name):
                    self.violation("bad_mountpoint", "%s -> %s" % (name, mp))
                i = body["ID"]
                v.lo[i] = v.lo.get(i, 0) + 1
                v.hi[i] = v.hi.get(i, 0) + 1
        elif op == "Unmount":
            if not ok:
                self.violation("unexpected_reply", "Unmount %s -> %s %s" % (name, status, reply))
            if ok and v is not None:
                i = body["ID"]
                if v.hi.get(i, 0) > 0:
                    v.hi[i] -= 1
                if v.lo.get(i, 0) > 0:
                    v.lo[i] -= 1
        elif op == "Remove":
            if v is None:
                want = True
            elif v.lo_total() > 0:
                want = False
            elif v.hi_total() == 0:
                want = True
            else:
                want = ok   # uncertain count: either answer is deserved
            if ok != want:
                self.violation("unexpected_reply", "Remove %s (counts %s) -> %s %s" % (name, v.lo if v else {},
                                                                                      status, reply))
            if ok and v is not None:
                del self.model[name]

    def apply_unacknowledged(self, op, body):
        name = body["Name"]
        v = self.model.get(name)
        self.f.add("unacknowledged")
        if op == "Create" and v is None:
            self.maybe[name] = ("create", body["Opts"])
        elif op == "Remove" and v is not None:
            self.maybe[name] = ("remove", None)
        elif op == "Mount" and v is not None:
            i = body["ID"]
            v.hi[i] = v.hi.get(i, 0) + 1
        elif op == "Unmount" and v is not None:
            i = body["ID"]
            if v.lo.get(i, 0) > 0:
                v.lo[i] -= 1

    def do_acked(self, op, body):
        st, j = self.tb.call("/VolumeDriver." + op, body, timeout=60)
        self.f.add("acked_ops")
        self.expect_and_apply(op, body, st, j)

    def do_killed(self, op, body):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.tb.sock)
        s.sendall(http_request("/VolumeDriver." + op, body))
        time.sleep(self.rng.uniform(0, 0.020))
        self.tb.kill(signal.SIGKILL)
        s.settimeout(5)
        raw = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                raw += d
        except OSError:
            pass
        s.close()
        rep = parse_reply(raw)
        if rep is not None:
            self.f.add("killed_after_reply")
            self.expect_and_apply(op, body, rep[0], rep[1])
        else:
            self.apply_unacknowledged(op, body)

    def add_volume(self, name, req):
        """A volume the daemon created: into the model, a clone's content checked, a fresh sentinel."""
        src = req.get("from")
        if not src:
            owner = (int(req.get("uid", 0)), int(req.get("gid", 0)), int(req.get("mode", "0755"), 8))
            self.model[name] = Vol(req, req, owner)
        else:
            s = self.model.get(src)
            self.model[name] = Vol(req, {}, s.owner if s else None, src)
            self.f.add("clones")
            d = self.tb.volume_dir(name)
            try:
                with open(os.path.join(d, SENTINEL)) as f:
                    got = f.read()
            except (OSError, TypeError):
                got = None
            if s is not None and s.sentinel is not None and got != s.sentinel:
                self.violation("clone_content", "%s: sentinel %r, its source %s had %r" % (name, got, src, s.sentinel))
        self.write_sentinel(name)

    def write_sentinel(self, name):
        d = self.tb.volume_dir(name)
        if d is None or not os.path.isdir(d) or os.path.islink(d):
            self.violation("lost_volume", "%s acknowledged but no directory" % name)
            return
        tok = "%s-%016x\n" % (name, self.rng.getrandbits(64))
        p = os.path.join(d, SENTINEL)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        os.write(fd, tok.encode())
        os.fsync(fd)
        os.close(fd)
        self.model[name].sentinel = tok

    def sabotage(self):
        """--sabotage: plays a daemon that bound a mounted volume wrongly (then the run must fail): from the
        other partition (a directory of the same name there), or without nosuid."""
        tb = self.tb
        for name, v in sorted(self.model.items()):
            target = os.path.join(tb.prop, name)
            if v.lo_total() == 0 or not os.path.ismount(target) or not tb.volume_dir(name):
                continue
            if self.args.sabotage == "suid":
                subprocess.run(["mount", "-o", "remount,bind,suid,nodev,noatime,nodiratime", target], check=True)
            else:
                other = [r for r in tb.fs_roots() if not tb.volume_dir(name).startswith(r + "/")][0]
                src = os.path.join(other, "nvmevol", "volumes", name)
                os.makedirs(src)
                subprocess.run(["umount", target], check=True)
                subprocess.run(["mount", "--bind", src, target], check=True)
                subprocess.run(["mount", "-o", "remount,bind,nosuid,nodev,noatime,nodiratime", target], check=True)
            log("sabotage: bind of %s %s" % (name, self.args.sabotage))
            self.f.add("sabotaged")
            return

    # ---- invariants ----

    def check(self):
        tb = self.tb
        st, j = tb.call("/VolumeDriver.List", {})
        if st != 200 or not isinstance(j, dict) or not isinstance(j.get("Volumes"), list):
            self.violation("list_failed", "%s %s" % (st, j))
            return
        listed = {e["Name"]: e for e in j["Volumes"]}
        for name in list(listed):
            if name not in self.model and name not in self.maybe:
                self.violation("phantom_volume", name)
        for name in list(self.model):
            if name not in listed:
                if self.maybe.get(name, ("",))[0] == "remove":
                    self.check_gone(name)
                    del self.model[name]
                    self.f.add("unacked_remove_happened")
                else:
                    self.violation("lost_volume", name)
                    del self.model[name]
        for name, (kind, opts) in list(self.maybe.items()):
            if kind == "create":
                if name in listed:
                    self.f.add("unacked_create_happened")
                    self.add_volume(name, opts)
                    self.check_volume(name, listed[name], adopt=True)
                else:
                    self.check_gone(name)
        self.maybe.clear()
        for name in sorted(self.model):
            if name in listed:
                self.check_volume(name, listed[name])
        self.check_global(listed)

    def check_gone(self, name):
        tb = self.tb
        st, j = tb.get(name)
        if st == 200:
            self.violation("half_removed_or_created", "%s answers Get but is not listed" % name)
        if tb.volume_dir(name):
            self.violation("half_removed_or_created", "%s: directory left on the partition" % name)
        if tb.record(name)[0]:
            self.violation("half_removed_or_created", "%s: record left on the partition" % name)
        if os.path.lexists(os.path.join(tb.state, "index", name + ".json")):
            self.violation("half_removed_or_created", "%s: index entry left" % name)

    def check_volume(self, name, listed, adopt=False):
        tb, v = self.tb, self.model[name]
        st, j = tb.get(name)
        if st != 200 or not isinstance(j, dict) or j.get("Err"):
            self.violation("lost_volume", "Get %s -> %s %s" % (name, st, j))
            return
        vol = j["Volume"]
        status = vol.get("Status", {})
        if status.get("state") not in ("ready", "mounted"):
            self.violation("bad_state", "%s state %s" % (name, status.get("state")))
        if status.get("options") != v.opts:
            self.violation("options_changed", "%s: %s != %s" % (name, status.get("options"), v.opts))
        path, rec, raw = tb.record(name)
        if rec is None:
            self.violation("bad_record", "%s: record %s unparsable: %r" % (name, path, raw[:80] if raw else raw))
            return
        if rec.get("state") != "ready":
            self.violation("half_created", "%s: record state %s" % (name, rec.get("state")))
        if not os.path.isfile(os.path.join(tb.state, "index", name + ".json")):
            self.violation("missing_index", name)
        d = tb.volume_dir(name)
        try:
            sd = os.lstat(d) if d else None
        except OSError:
            sd = None
        if sd is None or not stat.S_ISDIR(sd.st_mode):
            self.violation("lost_data", "%s: no directory" % name)
        else:
            if v.owner is not None and (sd.st_uid, sd.st_gid, stat.S_IMODE(sd.st_mode)) != v.owner:
                self.violation("owner_changed", "%s: %d:%d %o, want %s" % (name, sd.st_uid, sd.st_gid,
                                                                          stat.S_IMODE(sd.st_mode), v.owner))
            if v.clone_from and status.get("cloned_from") != v.clone_from:
                self.violation("clone_status", "%s: cloned_from %s, want %s" % (name, status.get("cloned_from"),
                                                                              v.clone_from))
            if v.sentinel is not None:
                try:
                    with open(os.path.join(d, SENTINEL)) as f:
                        got = f.read()
                except OSError:
                    got = None
                if got != v.sentinel:
                    self.violation("lost_data", "%s: sentinel %r != %r" % (name, got, v.sentinel))
        # I7: per-ID counts within [lo, hi]. They live in the host state directory
        # (<state>/mounts/<name>.json, absent at zero), never on the partition.
        counts = {}
        try:
            with open(os.path.join(tb.state, "mounts", name + ".json")) as f:
                counts = json.load(f).get("mounts", {}) or {}
        except FileNotFoundError:
            pass
        except ValueError:
            self.violation("bad_record", "%s: mount counts unparsable" % name)
        for i in set(counts) | set(v.lo) | set(v.hi):
            c = counts.get(i, 0)
            lo, hi = max(0, v.lo.get(i, 0)), max(0, v.hi.get(i, 0))
            if c < lo:
                self.violation("undercount", "%s id %s: stored %d < %d acknowledged" % (name, i, c, lo))
            elif c > hi:
                self.violation("overcount_unexplained", "%s id %s: stored %d > %d sent" % (name, i, c, hi))
            elif c > lo:
                self.f.add("overcount_after_kill")
        total = sum(counts.values())
        if status.get("mount_count") != total:
            self.violation("count_mismatch", "%s: Status %s, stored %d" % (name, status.get("mount_count"), total))
        # I5: total > 0 <=> a correct bind at prop/<name>.
        mp = os.path.join(tb.prop, name)
        binds = [m for m in tb.prop_mounts() if m["target"] == mp]
        if total > 0:
            if len(binds) != 1:
                self.violation("missing_mount", "%s: count %d, %d binds" % (name, total, len(binds)))
            else:
                # From the right partition (the device of the partition mount holding its directory) and
                # directory, with the flags its options ask for.
                part = tb.partition_entries().get(os.path.dirname(os.path.dirname(os.path.dirname(d)))) if d else None
                for p in bind_problems(name, binds[0], part, status.get("options")):
                    self.violation("bad_mount", p)
            if vol.get("Mountpoint") != mp:
                self.violation("bad_mountpoint", "%s: Get says %s" % (name, vol.get("Mountpoint")))
        elif binds:
            self.violation("orphan_mount", "%s: count 0 but %d bind(s)" % (name, len(binds)))
        # Resync: the stored counts are now known.
        v.lo = {i: n for i, n in counts.items()}
        v.hi = dict(v.lo)

    def check_global(self, listed):
        tb = self.tb
        for root in tb.fs_roots():
            tree = os.path.join(root, "nvmevol")
            for sub in ("meta",):
                for fn in os.listdir(os.path.join(tree, sub)):
                    if ".tmp." in fn:
                        self.violation("temp_file", "%s/%s" % (sub, fn))
                        continue
                    name = fn[:-5]
                    try:
                        with open(os.path.join(tree, sub, fn)) as f:
                            rec = json.load(f)
                    except ValueError:
                        self.violation("bad_record", fn)
                        continue
                    if rec.get("state") != "ready":
                        self.violation("half_created", "%s state %s" % (fn, rec.get("state")))
                    if name not in listed:
                        self.violation("phantom_volume", "record %s not listed" % fn)
            for fn in os.listdir(os.path.join(tree, "volumes")):
                if fn not in listed:
                    self.violation("orphan_dir", "volumes/%s" % fn)
            q = os.listdir(os.path.join(tree, "quarantine"))
            if q:
                self.violation("quarantined", "%s" % q)
            if os.listdir(os.path.join(tree, "trash")):
                self.f.add("trash_not_empty_at_check")
        for fn in os.listdir(os.path.join(tb.state, "index")):
            if ".tmp." in fn:
                self.violation("temp_file", "index/%s" % fn)
            elif fn[:-5] not in listed:
                self.violation("stale_index", fn)
        for fn in os.listdir(os.path.join(tb.state, "mounts")):
            if ".tmp." in fn:
                self.violation("temp_file", "mounts/%s" % fn)
            elif fn[:-5] not in listed:
                self.violation("stale_mount_counts", fn)
        for m in tb.prop_mounts():
            name = os.path.relpath(m["target"], tb.prop)
            if name not in listed or name not in self.model or sum(self.model[name].lo.values()) == 0:
                self.violation("orphan_mount", m["target"])
        for fn in os.listdir(tb.prop):
            if fn not in self.model or sum(self.model[fn].lo.values()) == 0:
                self.violation("stale_mountpoint_dir", fn)
        for p in partition_mount_problems(tb):
            self.violation("bad_partition_mount", p)
        if not tb.canary_intact():
            self.violation("canary_changed", tb.canary)

    # ---- main loop ----

    def run(self):
        t0 = time.monotonic()
        t_end = t0 + self.args.max_seconds if self.args.max_seconds else None
        kills = 0
        self.restart_ms.append(self.tb.start() * 1000)
        try:
            while kills < self.args.kills:
                if t_end and time.monotonic() > t_end:
                    log("time budget reached after %d kills" % kills)
                    break
                for _ in range(self.rng.randint(0, 3)):
                    self.do_acked(*self.pick_op())
                self.do_killed(*self.pick_op())
                kills += 1
                self.restart_ms.append(self.tb.start() * 1000)
                if self.args.sabotage:
                    self.sabotage()
                self.check()
                if kills % 100 == 0:
                    log("%d kills, %d volumes, %d violations" % (kills, len(self.model), sum(self.v.values())))
            # Final: unmount everything acknowledged, remove everything, nothing may remain.
            for name, v in sorted(self.model.items()):
                for i, n in v.lo.items():
                    for _ in range(n):
                        self.do_acked("Unmount", {"Name": name, "ID": i})
                self.do_acked("Remove", {"Name": name})
            st, j = self.tb.call("/VolumeDriver.List", {})
            if j.get("Volumes"):
                self.violation("remove_all_failed", "%s" % j)
            if self.tb.prop_mounts():
                self.violation("orphan_mount", "after removing everything: %s" % self.tb.prop_mounts())
            self.tb.stop()
            for rep in self.tb.sanitizer_reports():
                self.violation("sanitizer", rep[:2000])
        except (ApiError, OSError, RuntimeError) as e:
            import traceback
            self.violation("harness", repr(e) + "\n" + traceback.format_exc())
            log(self.tb.log_tail())
        try:
            with open(self.tb.logpath) as f:
                self.f.add("thawed_at_start", sum(1 for line in f if "was frozen" in line))
        except OSError:
            pass
        if kills < min(self.args.min_kills, self.args.kills):
            self.violation("too_few_kills", "%d kills within the budget of %.0f s, the stated minimum is %d" %
                           (kills, self.args.max_seconds, self.args.min_kills))
        self.restart_ms.sort()
        p = lambda q: self.restart_ms[min(len(self.restart_ms) - 1, int(q * len(self.restart_ms)))]
        fig = dict(kills=kills,
                   lost_volumes=self.v.get("lost_volume", 0) + self.v.get("lost_data", 0),
                   orphan_mounts=self.v.get("orphan_mount", 0) + self.v.get("stale_mountpoint_dir", 0),
                   half_created=self.v.get("half_created", 0) + self.v.get("half_removed_or_created", 0)
                   + self.v.get("orphan_dir", 0) + self.v.get("phantom_volume", 0),
                   undercounts=self.v.get("undercount", 0),
                   bad_records=self.v.get("bad_record", 0) + self.v.get("temp_file", 0),
                   unexpected_replies=self.v.get("unexpected_reply", 0),
                   violations=sum(self.v.values()),
                   overcounts_allowed=self.f.get("overcount_after_kill", 0),
                   unacked=self.f.get("unacknowledged", 0),
                   clones=self.f.get("clones", 0),
                   frozen_at_kill_thawed=self.f.get("thawed_at_start", 0),
                   clone_content=self.v.get("clone_content", 0),
                   acked_ops=self.f.get("acked_ops", 0),
                   restart_p50_ms=round(p(0.5)), restart_p99_ms=round(p(0.99)),
                   restart_max_ms=round(self.restart_ms[-1]), min_kills=self.args.min_kills,
                   seconds=round(time.monotonic() - t0))
        print("crash: " + " ".join("%s=%s" % kv for kv in fig.items()))
        if self.v:
            print("violations by kind: %s" % dict(self.v))
            for d in self.details:
                print("  " + d)
        return 1 if self.v else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kills", nargs="?", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--max-seconds", type=float, default=0, help="stop early after this long")
    ap.add_argument("--sabotage", choices=["wrong-partition", "suid"],
                    help="after each restart, bind one mounted volume wrongly (the run must fail)")
    ap.add_argument("--min-kills", type=int, default=0,
                    help="fail if the time budget stops the run before this many kills")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    log("crash: seed %d (rerun with --seed %d)" % (args.seed, args.seed))
    t = CrashTest(args)
    rc = t.run()
    # A failure while a partition was frozen must not leave it frozen to unmount.
    for root in t.tb.fs_roots():
        subprocess.run(["fsfreeze", "--unfreeze", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.tb.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
