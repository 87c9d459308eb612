# SPDX-License-Identifier: MIT
"""Shared harness for the nvmevol reliability tests (root only, stdlib only).

A Testbed owns everything a test needs and removes all of it on exit, even
after a failure or a signal: a private base directory, N loop XFS partitions
with a unique label prefix, one nvmevol daemon at a time, and a CANARY
directory outside the daemon's trees. Nothing outside the base directory and
the loop devices it attached is touched.
"""

import atexit
import errno
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

ENDPOINTS = ["/Plugin.Activate", "/VolumeDriver.Capabilities", "/VolumeDriver.Create",
             "/VolumeDriver.Remove", "/VolumeDriver.Mount", "/VolumeDriver.Unmount",
             "/VolumeDriver.Path", "/VolumeDriver.Get", "/VolumeDriver.List"]

SAN_PATTERNS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                "ERROR: UndefinedBehaviorSanitizer", "SUMMARY: AddressSanitizer")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


def default_binary():
    return os.environ.get("NVMEVOL_BINARY") or os.path.join(REPO, "build", "src", "nvmevol")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class ApiError(Exception):
    pass


def mountinfo():
    """[(mount_id, parent, 'maj:min', root, target, vfs_opts, optional, fstype, source)]"""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            dec = lambda s: re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)
            out.append(dict(id=parts[0], parent=parts[1], dev=parts[2], root=dec(parts[3]),
                            target=dec(parts[4]), vfs=parts[5], optional=" ".join(parts[6:sep]),
                            fstype=parts[sep + 1], source=dec(parts[sep + 2])))
    return out


def tree_digest(root, skip=()):
    """Hash of names, types, modes, owners, sizes, mtimes, link targets and contents below root."""
    h = hashlib.sha256()
    if not os.path.lexists(root):
        return "absent"
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        if any(dirpath.startswith(s) for s in skip):
            dirnames[:] = []
            continue
        for name in [""] + sorted(filenames) + dirnames:
            p = os.path.join(dirpath, name) if name else dirpath
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            h.update(("%s|%o|%d|%d|%d|%d\n" % (os.path.relpath(p, root), st.st_mode, st.st_uid, st.st_gid,
                                               st.st_size if not stat.S_ISDIR(st.st_mode) else 0,
                                               st.st_mtime_ns)).encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def parse_http_response(raw):
    """(status, headers, body) of the first HTTP response in raw, or None if its head is incomplete.

    headers: lower-case names to str values; body: cut to Content-Length when there is one
    (shorter than announced if raw is truncated: callers that need it whole compare lengths).
    """
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None
    hdr = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdr[k.strip().lower().decode(errors="replace")] = v.strip().decode(errors="replace")
    if "content-length" in hdr:
        try:
            body = body[:int(hdr["content-length"])]
        except ValueError:
            pass
    return status, hdr, body


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class Testbed:
    def __init__(self, nparts=2, size="512M", binary=None, tag="nvt", env=None, quiet=True):
        if os.geteuid() != 0:
            raise SystemExit("needs root (loop devices, mounts)")
        self.binary = binary or default_binary()
        if not os.access(self.binary, os.X_OK):
            raise SystemExit("no daemon binary at %s (build it, or set NVMEVOL_BINARY)" % self.binary)
        self.base = tempfile.mkdtemp(prefix="nvmevol-%s." % tag, dir="/var/tmp")
        self.prefix = ("%s%04x" % (tag[:4], random.getrandbits(16)))[:8] + "-"
        self.sock = os.path.join(self.base, "s.sock")
        self.state = os.path.join(self.base, "state")
        self.prop = os.path.join(self.base, "prop")
        self.parts = os.path.join(self.base, "parts")
        self.canary = os.path.join(self.base, "canary")
        self.loops = []
        self.labels = []
        self.proc = None
        self.logf = None
        self.logpath = os.path.join(self.base, "daemon.log")
        self.starts = 0
        self.extra_env = dict(env or {})
        self._cleaned = False
        atexit.register(self.cleanup)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self._on_signal)
        self._make_canary()
        for i in range(nparts):
            self.add_partition(size)

    # ---- setup and teardown ----

    def _on_signal(self, sig, frame):
        self.cleanup()
        os._exit(128 + sig)

    def _make_canary(self):
        os.makedirs(os.path.join(self.canary, "sub"))
        for i in range(3):
            with open(os.path.join(self.canary, "file%d" % i), "w") as f:
                f.write("canary %d\n" % i)
        os.chmod(self.canary, 0o755)
        self.canary_digest = tree_digest(self.canary)

    def canary_intact(self):
        return tree_digest(self.canary) == self.canary_digest and os.stat(self.canary).st_mode & 0o7777 == 0o755

    def add_partition(self, size="512M"):
        i = len(self.loops)
        img = os.path.join(self.base, "img%d" % i)
        run(["truncate", "-s", size, img])
        loop = run(["losetup", "--find", "--show", "--direct-io=on", img]).stdout.strip()
        self.loops.append(loop)
        label = self.prefix + chr(ord("a") + i)
        self.labels.append(label)
        run(["mkfs.xfs", "-q", "-f", "-L", label, loop])
        return loop, label

    def env(self):
        e = dict(os.environ)
        e.update(NVMEVOL_SOCKET=self.sock, NVMEVOL_STATE_DIR=self.state, NVMEVOL_PROPAGATED_MOUNT=self.prop,
                 NVMEVOL_PARTITION_ROOT=self.parts, NVMEVOL_LABEL_PREFIX=self.prefix,
                 NVMEVOL_SELFTEST="off")
        e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1:log_path=%s/asan" % self.base)
        e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1:log_path=%s/ubsan" % self.base)
        e.update(self.extra_env)
        return e

    def start(self, timeout=15, expect_fail=False):
        assert self.proc is None
        self.logf = open(self.logpath, "a")
        self.logf.write("---- start %d ----\n" % self.starts)
        self.logf.flush()
        self.starts += 1
        t0 = time.monotonic()
        self.proc = subprocess.Popen([self.binary], env=self.env(), stdout=self.logf, stderr=self.logf,
                                     stdin=subprocess.DEVNULL)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                if expect_fail:
                    return None
                raise RuntimeError("daemon exited with %s during start; log: %s\n%s" %
                                   (self.proc.returncode, self.logpath, self.log_tail()))
            try:
                st, _ = self.call("/Plugin.Activate", {}, timeout=2)
                if st == 200:
                    return time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.005)
        raise RuntimeError("daemon not ready after %ss" % timeout)

    def kill(self, sig=signal.SIGKILL):
        if self.proc is None:
            return None
        try:
            self.proc.send_signal(sig)
        except ProcessLookupError:
            pass
        rc = self.proc.wait(timeout=60)
        self.proc = None
        self.logf.close()
        return rc

    def stop(self):
        return self.kill(signal.SIGTERM)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid

    def log_tail(self, n=30):
        try:
            with open(self.logpath, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def sanitizer_reports(self):
        found = []
        for name in os.listdir(self.base):
            if name.startswith(("asan", "ubsan")):
                with open(os.path.join(self.base, name), errors="replace") as f:
                    found.append(f.read())
        with open(self.logpath, errors="replace") as f:
            text = f.read()
        if any(p in text for p in SAN_PATTERNS):
            found.append(text)
        return found

    def our_mounts(self):
        return [m for m in mountinfo() if m["target"].startswith(self.base + "/")]

    def cleanup(self):
        if self._cleaned:
            return
        self._cleaned = True
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
        except Exception:
            pass
        for _ in range(5):
            ms = self.our_mounts()
            if not ms:
                break
            for m in sorted(ms, key=lambda m: -len(m["target"])):
                r = subprocess.run(["umount", m["target"]], stderr=subprocess.DEVNULL)
                if r.returncode != 0:
                    subprocess.run(["umount", "-l", m["target"]], stderr=subprocess.DEVNULL)
        for loop in self.loops:
            subprocess.run(["losetup", "-d", loop], stderr=subprocess.DEVNULL)
        if not self.our_mounts() and not os.environ.get("NVT_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)
        elif self.our_mounts():
            log("cleanup: mounts left below %s" % self.base)

    # ---- API ----

    def call(self, endpoint, body=None, timeout=30, method="POST", raw=None):
        """(status, parsed JSON or None). Raises OSError/HTTPException on transport errors."""
        c = UnixHTTPConnection(self.sock, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
            c.request(method, endpoint, body=data,
                      headers={"Content-Type": "application/json",
                               "Accept": "application/vnd.docker.plugins.v1.2+json"})
            r = c.getresponse()
            payload = r.read()
            try:
                j = json.loads(payload)
            except ValueError:
                j = None
            return r.status, j
        finally:
            c.close()

    def ok(self, endpoint, body=None, timeout=60):
        st, j = self.call(endpoint, body, timeout=timeout)
        if st != 200 or not isinstance(j, dict) or j.get("Err"):
            raise ApiError("%s %s -> %s %s" % (endpoint, json.dumps(body)[:200], st, j))
        return j

    def get(self, name):
        return self.call("/VolumeDriver.Get", {"Name": name})

    # ---- on-disk views ----

    def partition_mounts(self):
        """{uuid: mountpoint} of partitions the daemon mounted under parts/."""
        out = {}
        for m in mountinfo():
            if os.path.dirname(m["target"]) == self.parts:
                out[os.path.basename(m["target"])] = m["target"]
        return out

    def fs_roots(self):
        return sorted(self.partition_mounts().values())

    def volume_dir(self, name):
        for root in self.fs_roots():
            p = os.path.join(root, "nvmevol", "volumes", name)
            if os.path.lexists(p):
                return p
        return None

    def record(self, name):
        """(path, parsed record or None, raw) of name's record on whichever partition holds it."""
        for root in self.fs_roots():
            p = os.path.join(root, "nvmevol", "meta", name + ".json")
            if os.path.lexists(p):
                with open(p, "rb") as f:
                    raw = f.read()
                try:
                    return p, json.loads(raw), raw
                except ValueError:
                    return p, None, raw
        return None, None, None

    def prop_mounts(self):
        return [m for m in mountinfo() if m["target"].startswith(self.prop + "/")]


class Counter(dict):
    def add(self, k, n=1):
        self[k] = self.get(k, 0) + n


def bytes_human(kib):
    return "%.1f MiB" % (kib / 1024.0)
