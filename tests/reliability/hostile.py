#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile and malformed requests over the real socket (reliability doc group A, B4, R7).

Generates N (default 12,000) requests that must all be refused: broken and
truncated JSON, wrong types, duplicate keys, deep nesting (2,049 to 100,000
levels), bodies from 64 KiB + 1 to 16 MiB (with and without Content-Length),
the hostile names of case B4 and ~250 more, control characters, NUL and
invalid UTF-8 in names, IDs and options, hostile mount IDs on an existing
volume, bad options, unknown endpoints, wrong methods, and protocol abuse
(garbage that is not HTTP, bad Content-Length, smuggling, oversized headers,
half-closed, slow and idle clients).

Expected: a JSON object with a non-empty "Err" and a 4xx/5xx status, except
that the body-less endpoints (Activate, Capabilities, List) may answer 200
with their normal reply, and protocol abuse may get libmicrohttpd's own
refusal or a clean close. The daemon must stay up and keep serving; the
prop/, partition and state trees, the CANARY, and the mounts below the test
directory must be unchanged; the fd count must be back to its baseline once every
connection is closed (a descriptor more is a leak: fails); RSS growth is reported.
--sabotage keeps 8 idle clients connected at the end: the run must fail on the fd count.
"""

import argparse
import json
import os
import random
import re
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvtlib import Testbed, Counter, tree_digest, rss_kib, fd_count, log, parse_http_response  # noqa: E402

NAMED = ["/VolumeDriver.Create", "/VolumeDriver.Remove", "/VolumeDriver.Mount",
         "/VolumeDriver.Unmount", "/VolumeDriver.Path", "/VolumeDriver.Get"]
BODYLESS = ["/Plugin.Activate", "/VolumeDriver.Capabilities", "/VolumeDriver.List"]
EXISTING = "hv-existing"
MOUNTED = "hv-mounted"

B4 = ["a", ".", "..", "...", "./x", "../x", "x/../../y", "/abs", "/", "a/b", "~", ".hidden", "-x", "a b",
      "a\tb", "a\nb", "a:b", "a\\b", "%2e%2e", "\u00fc1", "\uff21b", "a" * 129, "a" * 4096]


def hostile_names():
    names = list(B4)
    names += ["", "_x", "x\x7f", "ab/", "ab\r", " ab", "ab ", "..a", "a" * 200, "\uff41\uff42", "ab\u00a0",
              "ab\u202e", "a\u0301b", "\u0430b", "../../../../etc", "ab/..", "ab/.", "./ab", "ab\\..\\..",
              "\u2024\u2024", "%00ab", "ab%2f..", "\ufeffab"]
    for c in range(0, 128):
        ch = chr(c)
        if ch.isalnum() or ch in "_.-":
            continue
        names.append("a" + ch + "b")
        names.append(ch + "ab")
    return names


def fd_targets(pid):
    """What the daemon's descriptors point at, counted (to tell a leaked socket from a file)."""
    c = Counter()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            c.add(re.sub(r"\[\d+\]", "[N]", os.readlink("/proc/%d/fd/%s" % (pid, fd))))
        except OSError:
            pass
    return dict(c)


def http(method, path, body=b"", headers=None, clen=True):
    h = [b"%s %s HTTP/1.1" % (method.encode(), path.encode("utf-8", "surrogateescape")),
         b"Host: localhost", b"Connection: close", b"Content-Type: application/json"]
    if clen:
        h.append(b"Content-Length: %d" % len(body))
    for k, v in (headers or {}).items():
        h.append(b"%s: %s" % (k.encode(), v.encode()))
    return b"\r\n".join(h) + b"\r\n\r\n" + body


def jb(obj):
    return json.dumps(obj).encode()


class Gen:
    """Yields (category, expect, payload) where payload is raw bytes or a callable(sock)."""

    def __init__(self, rng):
        self.rng = rng

    def valid_bodies(self):
        return [("/VolumeDriver.Create", jb({"Name": "hv-new", "Opts": {"uid": "1"}})),
                ("/VolumeDriver.Remove", jb({"Name": EXISTING})),
                ("/VolumeDriver.Mount", jb({"Name": EXISTING, "ID": "abcdef"})),
                ("/VolumeDriver.Unmount", jb({"Name": MOUNTED, "ID": "holder"})),
                ("/VolumeDriver.Path", jb({"Name": EXISTING})),
                ("/VolumeDriver.Get", jb({"Name": EXISTING}))]

    def all(self, n_random):
        rng = self.rng
        out = []
        add = lambda cat, exp, p: out.append((cat, exp, p))
        # Truncations of valid requests at every byte: never valid JSON.
        for path, body in self.valid_bodies():
            for i in range(0, len(body)):
                add("truncated_json", "err", http("POST", path, body[:i]))
        # Scalars, arrays, trailing garbage, invalid UTF-8, for every endpoint with a body.
        for path in NAMED:
            for b in [b"[]", b'"x"', b"1", b"null", b"true", b"{} x", b'{"Name":"hv-x"} x', b"{", b"}",
                      b"\xff\xfe", b'{"Name":"a\xffb"}', b'{"Name":"\xc0\xaf\xc0\xaf"}', b"\x00",
                      b'{"Name":"hv-x"}\x00', b"{'Name':'hv-x'}", b'{"Name":hv-x}', b'{Name:"hv-x"}',
                      b'{"Name":"hv-x",}', b'{"Name":"\\ud800"}', b'{"Name":"\\u0000ab"}', b"{}",
                      b'{"Name":""}', b' ', b'\t\n', b'[{"Name":"hv-x"}]']:
                add("broken_json", "err", http("POST", path, b))
        # Wrong types.
        for path in NAMED:
            for name in [1, 1.5, None, True, {}, [], ["hv-x"], {"a": "b"}, -1, 10 ** 30]:
                add("wrong_type", "err", http("POST", path, jb({"Name": name, "ID": "x", "Opts": {}})))
        for opts in [[], "uid=1", 1, True, ["uid", "1"], {"uid": 1}, {"uid": None}, {"uid": ["1"]},
                     {"uid": {"x": "1"}}, {"mode": 755}, {"size": 10}]:
            add("wrong_type", "err", http("POST", "/VolumeDriver.Create", jb({"Name": "hv-new", "Opts": opts})))
        for idv in [1, None, True, [], {}, ["a"], 1.0]:
            for path in ("/VolumeDriver.Mount", "/VolumeDriver.Unmount"):
                add("wrong_type", "err", http("POST", path, jb({"Name": EXISTING, "ID": idv})))
        # Duplicate keys (the second one hostile).
        for path in NAMED:
            for dup in [b'{"Name":"hv-existing","Name":"../x"}', b'{"Name":"ab","Name":"ab"}',
                        b'{"Name":"hv-new","Opts":{},"Opts":{}}', b'{"Name":"hv-new","Opts":{"uid":"1","uid":"2"}}',
                        b'{"Name":"hv-existing","ID":"a","ID":"b"}']:
                add("duplicate_keys", "err", http("POST", path, dup))
        # Hostile names on every named endpoint.
        for name in hostile_names():
            for path in NAMED:
                add("hostile_name", "err", http("POST", path, jb({"Name": name, "ID": "x", "Opts": {}})))
        # Control characters, NUL, invalid UTF-8 in names, IDs and options (raw bytes).
        for c in list(range(0, 32)) + [127]:
            esc = b"\\u%04x" % c
            raw = bytes([c])
            for path in NAMED:
                add("control_chars", "err", http("POST", path, b'{"Name":"hv' + esc + b'x","ID":"x"}'))
                add("control_chars", "err", http("POST", path, b'{"Name":"hv' + raw + b'x","ID":"x"}'))
            for path in ("/VolumeDriver.Mount", "/VolumeDriver.Unmount"):
                add("hostile_id", "err", http("POST", path, b'{"Name":"' + EXISTING.encode() + b'","ID":"a' + esc + b'"}'))
            add("control_chars", "err", http("POST", "/VolumeDriver.Create",
                                             b'{"Name":"hv-new","Opts":{"uid":"1' + esc + b'"}}'))
            add("control_chars", "err", http("POST", "/VolumeDriver.Create",
                                             b'{"Name":"hv-new","Opts":{"u' + esc + b'id":"1"}}'))
        for bad in [b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xfe", b"\xc0\x80", b"\xe0\x80\xaf"]:
            for path in NAMED:
                add("invalid_utf8", "err", http("POST", path, b'{"Name":"hv' + bad + b'x","ID":"x"}'))
            add("invalid_utf8", "err", http("POST", "/VolumeDriver.Mount",
                                            b'{"Name":"' + EXISTING.encode() + b'","ID":"a' + bad + b'"}'))
            add("invalid_utf8", "err", http("POST", "/VolumeDriver.Create",
                                            b'{"Name":"hv-new","Opts":{"partition":"' + bad + b'"}}'))
        # Hostile mount IDs on an existing volume (a valid ID would mount: never sent).
        for idv in ["", "a" * 129, "a" * 4096, "\u00e9", "a\u0000b", "a\nb", "\t", "\x7f", "\u202e",
                    "a\u00a0b", "\ud7ff"] + ["a%sb" % chr(c) for c in range(0, 32)]:
            for path in ("/VolumeDriver.Mount", "/VolumeDriver.Unmount"):
                add("hostile_id", "err", http("POST", path, jb({"Name": EXISTING, "ID": idv})))
        for path in ("/VolumeDriver.Mount", "/VolumeDriver.Unmount"):
            add("hostile_id", "err", http("POST", path, jb({"Name": EXISTING})))
        # Bad options (case B6, B7, B8, B9).
        for opts in [{"bogus": "1"}, {"size": "abc"}, {"size": "-1"}, {"size": "1.5.5G"},
                     {"size": "99999999999999999999T"}, {"size": ""}, {"size": "10M"}, {"size": "1K"},
                     {"uid": "-1"}, {"uid": "4294967295"}, {"uid": "1e3"}, {"uid": "0x10"}, {"uid": " 1"},
                     {"uid": "1 "}, {"uid": "+1"}, {"uid": ""}, {"mode": "999"}, {"mode": "07777777"},
                     {"mode": "abc"}, {"mode": "-0755"}, {"partition": "../x"}, {"partition": "a/b"},
                     {"partition": ""}, {"partition": "x" * 300}, {"partition": "no-such-label-xyz"},
                     {"selftest": "maybe"}, {"min_iops": "-1"}, {"min_iops": "0"}, {"min_iops": "abc"},
                     {"inodes": "0"}, {"inodes": "-5"}, {"k%d" % 0: "v"},
                     {"k%d" % i: "v" for i in range(40)}, {"uid": "1" * 300},
                     {"x" * 5000: "1"}, {"uid": "1", "Uid": "1"}, {"UID": "1"}, {"": "1"}]:
            add("bad_options", "err", http("POST", "/VolumeDriver.Create", jb({"Name": "hv-new", "Opts": opts})))
        # Deep nesting: under the 64 KiB cap (jansson's depth limit), and over it (413).
        for depth in (2049, 3000, 20000, 32000, 65535, 100000):
            for path in ("/VolumeDriver.Create", "/VolumeDriver.Get"):
                add("deep_nesting", "err", http("POST", path, b"[" * depth + b"]" * depth))
                add("deep_nesting", "err", http("POST", path, b"[" * depth))
            add("deep_nesting", "err", http("POST", "/VolumeDriver.Create",
                                            b'{"Name":"hv-new","Opts":' + b'{"a":' * min(depth, 10000) + b"1" +
                                            b"}" * min(depth, 10000) + b"}"))
        # Huge bodies, with and without Content-Length.
        for size in (64 * 1024 + 1, 65 * 1024, 1 << 20, 16 << 20):
            head = b'{"Name":"hv-new","Opts":{}}'
            body = head + b" " * (size - len(head))
            assert len(body) == size
            add("huge_body", "err", http("POST", "/VolumeDriver.Create", body))
            add("huge_body", "err", http("POST", "/VolumeDriver.Remove", b'{"Name":"' + EXISTING.encode() +
                                         b'","x":"' + b"a" * size + b'"}'))
            add("huge_body_chunked", "err_or_close", self.chunked("/VolumeDriver.Create", body))
        # Unknown endpoints and path tricks.
        for p in ["/VolumeDriver.Nope", "/", "", "/Plugin.activate", "/volumedriver.create", "/VolumeDriver.Create/",
                  "//VolumeDriver.Get", "/./VolumeDriver.Get", "/../VolumeDriver.Get", "/VolumeDriver.Get/..",
                  "/VolumeDriver.Get\x7f", "/VolumeDriver.CreateX",
                  "/" + "A" * 4000, "/VolumeDriver.Get;x", "*", "/VolumeDriver.Capabilities/../Create",
                  "/NetworkDriver.CreateNetwork", "/IpamDriver.RequestPool", "/Plugin.Activate.", "/VolumeDriver."]:
            add("unknown_endpoint", "err_or_close", http("POST", p, jb({"Name": EXISTING})))
        # Percent-encoded paths: libmicrohttpd decodes them (RFC 3986), so a read-only answer is fine.
        for p in ["/VolumeDriver.Get%00", "/VolumeDriver%2EGet", "/VolumeDriver.Get%00/../Create",
                  "/VolumeDriver%2ECreate"]:
            add("percent_encoded_path", "err_or_readonly", http("POST", p, jb({"Name": EXISTING})))
        # Wrong methods on every endpoint.
        for p in NAMED + BODYLESS:
            for m in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "BREW", "post", "POSTX"):
                add("wrong_method", "err_or_close", http(m, p, jb({"Name": EXISTING, "ID": "a"})))
            add("wrong_method_head", "status_only", http("HEAD", p, b""))
        # Protocol abuse.
        for _ in range(200):
            n = rng.randrange(1, 400)
            add("garbage", "close_or_refusal", bytes(rng.randrange(256) for _ in range(n)))
        for raw in [b"\r\n\r\n", b"GET\r\n\r\n", b"GET /\r\n\r\n", b"POST /VolumeDriver.Get\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/9.9\r\nContent-Length: 2\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 40000 + b"\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\n" + b"X-a: b\r\n" * 5000 + b"\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n" + b"x" * 100000,
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" +
                    b"GARBAGE / HTTP/1.1\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\r\n",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\nContent-Length: 2\n\n{}",
                    b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\n Content-Length: 2\r\n\r\n{}",
                    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 100,
                    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]:
            add("protocol_abuse", "close_or_refusal", raw)
        # Pad to the requested count with random mutations of valid requests to stateful endpoints.
        while len(out) < n_random:
            path, body = rng.choice(self.valid_bodies())
            b = bytearray(body)
            # Mutate, then make sure the result is not valid JSON (a valid one could act).
            for _ in range(rng.randrange(1, 4)):
                i = rng.randrange(len(b))
                b[i] = rng.randrange(256)
            try:
                json.loads(bytes(b))
                b = b[:-1]   # strictly shorter than a complete object: never valid
            except ValueError:
                pass
            add("mutated_json", "err", http("POST", path, bytes(b)))
        return out

    def chunked(self, path, body):
        h = (b"POST %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n" %
             path.encode())
        parts = [h]
        for i in range(0, len(body), 1 << 16):
            c = body[i:i + (1 << 16)]
            parts.append(b"%x\r\n%s\r\n" % (len(c), c))
        parts.append(b"0\r\n\r\n")
        return b"".join(parts)


def exchange(sockpath, payload, timeout=20, half_close=True):
    """Sends payload, reads until close. Returns (raw reply, error or None)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    raw = b""
    try:
        s.connect(sockpath)
        try:
            s.sendall(payload)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass   # the server refused early (413 before reading the body): read its answer
        while True:
            d = s.recv(1 << 16)
            if not d:
                break
            raw += d
        return raw, None
    except socket.timeout:
        return raw, "timeout"
    except ConnectionResetError:
        return raw, None
    finally:
        s.close()


def classify(expect, raw, err):
    """'pass' / 'violation:<why>' and the kind of answer."""
    if err == "timeout":
        return "violation:no answer within 20 s", "timeout"
    r = parse_http_response(raw)
    if r is None:
        if expect in ("close_or_refusal", "err_or_close") and not raw:
            return "pass", "closed"
        if expect == "close_or_refusal":
            return "pass", "closed_partial"
        return "violation:no HTTP response", "closed"
    status, hdr, body = r
    if expect == "status_only":
        return ("pass", "status") if status >= 400 else ("violation:HEAD got %d" % status, "accepted")
    try:
        j = json.loads(body)
    except ValueError:
        j = None
    json_err = isinstance(j, dict) and isinstance(j.get("Err"), str) and j["Err"] != ""
    if status >= 400 and json_err:
        return "pass", "json_err"
    if expect in ("close_or_refusal", "err_or_close") and status >= 400:
        return "pass", "http_refusal"   # libmicrohttpd's own answer to broken HTTP
    if status == 200 and expect == "err_body_less":
        return "pass", "accepted"
    if status == 200 and expect == "err_or_readonly" and isinstance(j, dict) and set(j) <= {"Volume", "Err"}:
        return "pass", "decoded_path_read_only"
    return "violation:status %d body %r" % (status, body[:120]), "accepted" if status < 400 else "non_json_err"


def snapshot(tb):
    # The metrics file counts every request by design (nvmevol_requests_total): not a side effect to forbid.
    d = {"prop": tree_digest(tb.prop), "state": tree_digest(tb.state, skip=(os.path.join(tb.state, "metrics"),)),
         "canary": tree_digest(tb.canary)}
    for root in tb.fs_roots():
        d["fs:" + os.path.basename(root)] = tree_digest(root)
    d["mounts"] = sorted((m["target"], m["root"], m["vfs"], m["dev"]) for m in tb.our_mounts())
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("count", nargs="?", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--binary", default=None)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="send the generated set this many times (RSS per round)")
    ap.add_argument("--slow-clients", type=int, default=64)
    ap.add_argument("--sabotage", action="store_true",
                    help="keep 8 idle clients connected at the end: the fd count stays up, the run must fail")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    log("hostile: seed %d" % seed)
    rng = random.Random(seed)
    tb = Testbed(nparts=2, tag="host", binary=args.binary)
    fails = []
    counts = Counter()
    kinds = Counter()
    try:
        tb.start()
        tb.ok("/VolumeDriver.Create", {"Name": EXISTING, "Opts": {"uid": "999"}})
        tb.ok("/VolumeDriver.Create", {"Name": MOUNTED, "Opts": {}})
        tb.ok("/VolumeDriver.Mount", {"Name": MOUNTED, "ID": "holder"})
        for _ in range(200):   # warm-up: thread stacks, allocator arenas
            tb.ok("/VolumeDriver.Get", {"Name": EXISTING})
        time.sleep(0.5)
        rss0, fds0 = rss_kib(tb.pid), fd_count(tb.pid)
        before = snapshot(tb)
        items = Gen(rng).all(args.count // args.rounds)
        rng.shuffle(items)
        items = items * args.rounds
        rss_rounds = []
        log("hostile: %d requests in %d categories" % (len(items), len(set(c for c, _, _ in items))))
        lock = threading.Lock()
        idx = [0]
        t0 = time.monotonic()

        def worker():
            while True:
                with lock:
                    if idx[0] >= len(items):
                        return
                    cat, exp, payload = items[idx[0]]
                    idx[0] += 1
                first = payload.split(b" ", 2)[1:2]
                path = first[0].decode(errors="replace") if first else ""
                if exp == "err" and path in BODYLESS:
                    exp = "err_body_less"
                raw, err = exchange(tb.sock, payload)
                verdict, kind = classify(exp, raw, err)
                with lock:
                    counts.add(cat)
                    kinds.add(kind)
                    if verdict != "pass":
                        fails.append("%s: %s: %r" % (cat, verdict[10:], payload[:100]))

        # Slow and idle clients held open during the whole run.
        slow = []
        for i in range(args.slow_clients):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(tb.sock)
            s.sendall(b"POST /VolumeDriver.Get HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"P")
            slow.append(s)
        threads = [threading.Thread(target=worker) for _ in range(args.threads)]
        for t in threads:
            t.start()
        lat = []
        rss_max = rss0
        while any(t.is_alive() for t in threads):
            time.sleep(0.25)
            t1 = time.monotonic()
            st, j = tb.call("/VolumeDriver.Get", {"Name": EXISTING}, timeout=10)
            lat.append(time.monotonic() - t1)
            if st != 200:
                fails.append("valid Get during the run: %s %s" % (st, j))
            for s in slow[:8]:
                try:
                    s.send(b"X")   # trickle: slowloris
                except OSError:
                    pass
            if tb.alive():
                rss_max = max(rss_max, rss_kib(tb.pid))
                if idx[0] >= (len(rss_rounds) + 1) * len(items) // args.rounds:
                    rss_rounds.append(rss_kib(tb.pid))
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        # Half-closed after a partial request, then the slow ones give up.
        for s in slow:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        for s in slow:
            s.close()
        held = []
        for _ in range(8 if args.sabotage else 0):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(tb.sock)
            s.sendall(b"POST /VolumeDriver.Get HTTP/1.1\r\n")
            held.append(s)
        alive = tb.alive()
        if not alive:
            fails.append("daemon died: %s" % tb.log_tail())
        else:
            st, j = tb.call("/VolumeDriver.Get", {"Name": EXISTING})
            if st != 200 or j["Volume"]["Name"] != EXISTING:
                fails.append("valid Get after the run failed: %s %s" % (st, j))
            time.sleep(1.0)
            rss1, fds1 = rss_kib(tb.pid), fd_count(tb.pid)
            for _ in range(20):
                if fds1 <= fds0:
                    break
                time.sleep(0.5)
                fds1 = fd_count(tb.pid)
            if fds1 > fds0:
                # Every connection of the run is closed: a descriptor more than before is a leak.
                fails.append("fd count %d after the run, %d before (10 s to settle): %s" %
                             (fds1, fds0, fd_targets(tb.pid)))
        for s in held:
            s.close()
        after = snapshot(tb)
        side = [k for k in before if before[k] != after.get(k)]
        for k in side:
            fails.append("side effect in %s" % k)
        if not tb.canary_intact():
            fails.append("CANARY changed")
        tb.ok("/VolumeDriver.Unmount", {"Name": MOUNTED, "ID": "holder"})
        tb.ok("/VolumeDriver.Remove", {"Name": MOUNTED})
        tb.ok("/VolumeDriver.Remove", {"Name": EXISTING})
        rc = tb.stop()
        for rep in tb.sanitizer_reports():
            fails.append("sanitizer: " + rep[:1500])
        lat.sort()
        crashes = 0 if alive else 1
        print("hostile: requests=%d crashes=%d side_effects=%d violations=%d rss_growth_kib=%d rss_peak_kib=%d "
              "fds_before=%d fds_after=%d valid_get_p99_ms=%.1f elapsed_s=%.1f" %
              (len(items), crashes, len(side), len(fails), rss1 - rss0 if alive else -1, rss_max, fds0,
               fds1 if alive else -1, 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else -1, elapsed))
        print("  rss_kib: baseline=%d after each round=%s final=%d" % (rss0, rss_rounds, rss1 if alive else -1))
        print("  categories: " + " ".join("%s=%d" % kv for kv in sorted(counts.items())))
        print("  answers: " + " ".join("%s=%d" % kv for kv in sorted(kinds.items())))
        for f in fails[:40]:
            print("  FAILED " + f)
        status = 1 if fails else 0
    except Exception as e:
        print("hostile: harness error %r" % (e,))
        print(tb.log_tail())
        status = 1
    finally:
        tb.cleanup()
    sys.exit(status)


if __name__ == "__main__":
    main()
