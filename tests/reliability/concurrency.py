#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""32 concurrent clients mixing every operation (reliability doc B11, E15, E16, R8, R11).

Each client works on 4 shared volumes and its own volumes, with an
expectation for every reply that follows from what the client itself knows:
  shared: Create again with the same options -> OK; Mount with a fresh ID ->
  OK at prop/<name>; Unmount of an ID it holds -> OK; Path while it holds a
  mount -> the mountpoint; Remove while it holds a mount -> Err (in use);
  own: Create -> Mount -> write through the mountpoint -> Unmount -> Remove
  -> Get is Err, all OK; plus Get, List (shared names present) and
  Capabilities.
An error the operation did not deserve, or a deserved error that did not
come, is counted. At the end every client releases its mounts and the
invariants are checked: shared volumes at count 0 and unmounted, no mount or
mountpoint left under prop/, no orphan directory, every record "ready",
nothing of the clients' own volumes left. A transport error, a reply slower
than --request-timeout (60 s) or one that is not a JSON object, and a client
thread that stops early, fail the run (--sabotage stops the daemon for longer
than the timeout halfway: the run must fail). RSS is sampled every second
(growth after a warm-up is reported); with an ASan build the daemon is
stopped with SIGTERM and LeakSanitizer must report nothing.
"""

import argparse
import http.client
import json
import os
import signal
import random
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import Testbed, Counter, rss_kib, fd_count, log  # noqa: E402

SHARED = ["sh%d" % i for i in range(4)]
SHARED_OPTS = {"uid": "999", "mode": "0750"}


def ok(st, j):
    return st == 200 and isinstance(j, dict) and not j.get("Err")


class Client(threading.Thread):
    def __init__(self, k, tb, t_end, seed, stats, lat, lock, timeout):
        super().__init__()
        self.timeout = timeout
        self.finished = False
        self.k, self.tb, self.t_end = k, tb, t_end
        self.rng = random.Random(seed)
        self.stats, self.lat, self.lock = stats, lat, lock
        self.held = []   # (name, id)
        self.n = 0
        self.bad = []

    def call(self, op, body):
        """(status, JSON object); a transport error, a timeout or a reply that is not a JSON object is
        counted as a failure and gives (0, {}), so that the client goes on and every expectation fails."""
        t0 = time.monotonic()
        try:
            st, j = self.tb.call("/VolumeDriver." + op if not op.startswith("/") else op, body,
                                 timeout=self.timeout)
        except (OSError, http.client.HTTPException) as e:
            self.failure("transport_errors", "%s %s: %r" % (op, json.dumps(body)[:80], e))
            return 0, {}
        dt = time.monotonic() - t0
        with self.lock:
            self.lat.setdefault(op, []).append(dt)
            self.stats.add(op)
        if not isinstance(j, dict):
            self.failure("bad_replies", "%s %s -> %s, not a JSON object: %r" % (op, json.dumps(body)[:80], st, j))
            return 0, {}
        return st, j

    def failure(self, kind, what):
        with self.lock:
            self.stats.add(kind)
        if len(self.bad) < 5:
            self.bad.append(what)
        log("client %d: %s" % (self.k, what))

    def expect(self, cond, what):
        if not cond:
            self.failure("undeserved", what)

    def fresh_id(self):
        self.n += 1
        return "c%d-%d" % (self.k, self.n)

    def own_cycle(self):
        name = "own%d-%d" % (self.k, self.n)
        self.n += 1
        st, j = self.call("Create", {"Name": name, "Opts": {"uid": str(1000 + self.k)}})
        self.expect(ok(st, j), "Create %s -> %s %s" % (name, st, j))
        i = self.fresh_id()
        st, j = self.call("Mount", {"Name": name, "ID": i})
        self.expect(ok(st, j) and j.get("Mountpoint") == os.path.join(self.tb.prop, name),
                    "Mount %s -> %s %s" % (name, st, j))
        if ok(st, j):
            try:
                with open(os.path.join(j["Mountpoint"], "data"), "w") as f:
                    f.write("client %d\n" % self.k)
            except OSError as e:
                self.expect(False, "write through %s: %r" % (j["Mountpoint"], e))
        st, j = self.call("Path", {"Name": name})
        self.expect(ok(st, j) and j.get("Mountpoint") == os.path.join(self.tb.prop, name), "Path %s -> %s" % (name, j))
        st, j = self.call("Remove", {"Name": name})
        self.expect(st >= 400 and j.get("Err"), "Remove of mounted %s -> %s %s" % (name, st, j))
        st, j = self.call("Unmount", {"Name": name, "ID": i})
        self.expect(ok(st, j), "Unmount %s -> %s %s" % (name, st, j))
        st, j = self.call("Remove", {"Name": name})
        self.expect(ok(st, j), "Remove %s -> %s %s" % (name, st, j))
        st, j = self.call("Get", {"Name": name})
        self.expect(st >= 400 and j.get("Err"), "Get of removed %s -> %s %s" % (name, st, j))

    def run(self):
        try:
            self.work()
            self.finished = True
        except Exception:   # a client that stops early is a failure, never a silent loss
            self.failure("lost_clients", "client %d stopped: %s" % (self.k, traceback.format_exc()[-600:]))

    def work(self):
        while time.monotonic() < self.t_end:
            r = self.rng.random()
            name = self.rng.choice(SHARED)
            if r < 0.2:
                i = self.fresh_id()
                st, j = self.call("Mount", {"Name": name, "ID": i})
                self.expect(ok(st, j) and j.get("Mountpoint") == os.path.join(self.tb.prop, name),
                            "Mount %s -> %s %s" % (name, st, j))
                if ok(st, j):
                    self.held.append((name, i))
            elif r < 0.4 and self.held:
                name, i = self.held.pop(self.rng.randrange(len(self.held)))
                st, j = self.call("Unmount", {"Name": name, "ID": i})
                self.expect(ok(st, j), "Unmount %s %s -> %s %s" % (name, i, st, j))
            elif r < 0.5:
                st, j = self.call("Create", {"Name": name, "Opts": SHARED_OPTS})
                self.expect(ok(st, j), "re-Create %s -> %s %s" % (name, st, j))
            elif r < 0.6:
                st, j = self.call("Get", {"Name": name})
                self.expect(ok(st, j) and j["Volume"]["Name"] == name, "Get %s -> %s %s" % (name, st, j))
                mine = sum(1 for n, _ in self.held if n == name)
                if ok(st, j):
                    self.expect(j["Volume"]["Status"].get("mount_count", 0) >= mine,
                                "Get %s count below my %d mounts" % (name, mine))
            elif r < 0.65:
                st, j = self.call("List", {})
                names = [v["Name"] for v in j.get("Volumes", [])] if ok(st, j) else []
                self.expect(ok(st, j) and all(n in names for n in SHARED), "List -> %s" % (st,))
            elif r < 0.7:
                st, j = self.call("/VolumeDriver.Capabilities", {})
                self.expect(ok(st, j) and j["Capabilities"]["Scope"] == "local", "Capabilities -> %s" % (j,))
            elif r < 0.75 and self.held:
                name = self.held[-1][0]
                st, j = self.call("Path", {"Name": name})
                self.expect(ok(st, j) and j.get("Mountpoint") == os.path.join(self.tb.prop, name),
                            "Path %s while held -> %s %s" % (name, st, j))
                st, j = self.call("Remove", {"Name": name})
                self.expect(st >= 400 and j.get("Err"), "Remove %s while held -> %s %s" % (name, st, j))
            elif r < 0.85:
                self.own_cycle()
            else:
                st, j = self.call("Unmount", {"Name": name, "ID": "never-mounted-%d" % self.k})
                self.expect(ok(st, j), "Unmount unknown ID -> %s %s" % (st, j))
        for name, i in self.held:
            st, j = self.call("Unmount", {"Name": name, "ID": i})
            self.expect(ok(st, j), "final Unmount %s %s -> %s %s" % (name, i, st, j))
        self.held = []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seconds", nargs="?", type=float, default=30)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--request-timeout", type=float, default=60, help="a reply slower than this is a failure")
    ap.add_argument("--sabotage", action="store_true",
                    help="stop the daemon (SIGSTOP) for longer than the request timeout halfway: the run must fail")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    log("concurrency: seed %d" % seed)
    tb = Testbed(nparts=2, tag="conc", binary=args.binary)
    problems = []
    rc = 1
    try:
        tb.start()
        for n in SHARED:
            tb.ok("/VolumeDriver.Create", {"Name": n, "Opts": SHARED_OPTS})
        stats, lat, lock = Counter(), {}, threading.Lock()
        t0 = time.monotonic()
        t_end = t0 + args.seconds
        clients = [Client(k, tb, t_end, seed + k, stats, lat, lock, args.request_timeout)
                   for k in range(args.clients)]
        for c in clients:
            c.start()
        rss = []
        fds = []
        stopped = False
        while any(c.is_alive() for c in clients):
            time.sleep(1)
            if args.sabotage and not stopped and time.monotonic() > t0 + args.seconds / 2:
                stopped = True
                os.kill(tb.pid, signal.SIGSTOP)
                time.sleep(args.request_timeout + 1)
                os.kill(tb.pid, signal.SIGCONT)
            if tb.alive():
                rss.append((time.monotonic() - t0, rss_kib(tb.pid)))
                fds.append(fd_count(tb.pid))
        for c in clients:
            c.join()
        alive = tb.alive()
        if not alive:
            problems.append("daemon died: " + tb.log_tail())
        # Invariants at the end.
        st, j = tb.call("/VolumeDriver.List", {})
        names = sorted(v["Name"] for v in j.get("Volumes", []))
        if names != sorted(SHARED):
            problems.append("List at the end: %s" % names)
        for n in SHARED:
            st, j = tb.get(n)
            s = j["Volume"]["Status"] if ok(st, j) else {}
            if s.get("mount_count") != 0 or s.get("state") != "ready" or "Mountpoint" in j.get("Volume", {}):
                problems.append("%s at the end: %s" % (n, json.dumps(s)[:300]))
        if tb.prop_mounts():
            problems.append("mounts left under prop: %s" % [m["target"] for m in tb.prop_mounts()])
        if os.listdir(tb.prop):
            problems.append("mountpoint dirs left: %s" % os.listdir(tb.prop))
        for root in tb.fs_roots():
            left = sorted(set(os.listdir(os.path.join(root, "nvmevol", "volumes"))) - set(SHARED))
            if left:
                problems.append("directories left: %s" % left)
            for fn in os.listdir(os.path.join(root, "nvmevol", "meta")):
                with open(os.path.join(root, "nvmevol", "meta", fn)) as f:
                    rec = json.load(f)
                if rec.get("state") != "ready" or fn[:-5] not in SHARED:
                    problems.append("record %s: %s" % (fn, rec.get("state")))
        if sorted(fn[:-5] for fn in os.listdir(os.path.join(tb.state, "index"))) != sorted(SHARED):
            problems.append("index: %s" % os.listdir(os.path.join(tb.state, "index")))
        if not tb.canary_intact():
            problems.append("CANARY changed")
        # A request that timed out may still land (a Mount after its client gave up, as in the
        # sabotage's stopped daemon): a refused Remove is a finding to report, not a harness crash.
        for n in SHARED:
            st, j = tb.call("/VolumeDriver.Remove", {"Name": n})
            if not ok(st, j):
                problems.append("Remove %s at the end: %s %s" % (n, st, json.dumps(j)[:200]))
        tb.stop()
        reports = tb.sanitizer_reports()
        for rep in reports:
            problems.append("sanitizer: " + rep[:3000])
        undeserved = stats.get("undeserved", 0)
        lost = stats.get("transport_errors", 0) + stats.get("bad_replies", 0) + stats.get("lost_clients", 0)
        unfinished = sum(1 for c in clients if not c.finished)
        total = sum(v for k, v in stats.items()
                    if k not in ("undeserved", "transport_errors", "bad_replies", "lost_clients"))
        warm = [r for t, r in rss if t >= min(5, args.seconds / 3)]
        growth = (warm[-1] - warm[0]) if len(warm) >= 2 else 0
        p99 = {}
        for op, ls in lat.items():
            ls.sort()
            p99[op.strip("/").replace("VolumeDriver.", "")] = round(1000 * ls[min(len(ls) - 1, int(0.99 * len(ls)))], 1)
        print("concurrency: clients=%d seconds=%.0f ops=%d undeserved_errors=%d transport_errors=%d bad_replies=%d "
              "lost_clients=%d invariant_failures=%d rss_start_kib=%d rss_end_kib=%d rss_growth_after_warmup_kib=%d "
              "fds_max=%d sanitizer_reports=%d" %
              (args.clients, args.seconds, total, undeserved, stats.get("transport_errors", 0),
               stats.get("bad_replies", 0), unfinished, len(problems) - len(reports),
               rss[0][1] if rss else -1, rss[-1][1] if rss else -1, growth, max(fds) if fds else -1, len(reports)))
        print("  p99_ms: " + " ".join("%s=%s" % kv for kv in sorted(p99.items())))
        print("  rss_kib_samples: %s" % [r for _, r in rss][::max(1, len(rss) // 10)])
        for c in clients:
            for b in c.bad:
                print("  UNDESERVED client %d: %s" % (c.k, b))
        for p in problems[:20]:
            print("  FAILED " + p)
        rc = 0 if undeserved == 0 and lost == 0 and unfinished == 0 and not problems else 1
    finally:
        tb.cleanup()
    sys.exit(rc)


if __name__ == "__main__":
    main()
