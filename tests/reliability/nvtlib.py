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

SERVING_LINE = "serving the Docker volume API"   # the daemon logs it when start-up is done

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
    """Hash of names, types, modes, owners, sizes, mtimes, link targets and contents below root,
    leaving out the paths in skip (the entries themselves and everything below them)."""
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
            if any(p == s for s in skip):
                continue
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


def release_loop(dev, image, wait=10.0):
    """Detaches dev while it is bound to image (losetup -d again each second: the kernel may still hold it).
    None once released, else what is wrong."""
    sysfs = "/sys/block/%s/loop/backing_file" % os.path.basename(dev)
    real = os.path.realpath(image)
    said = ""
    deadline = time.monotonic() + wait
    next_try = 0.0
    while True:
        try:
            with open(sysfs) as f:
                backing = f.read().strip()
        except OSError:
            return None
        if backing.removesuffix(" (deleted)") != real:
            return None  # free, or another run's by now
        if time.monotonic() >= deadline:
            return "%s still bound to %s after %.0f s (losetup -d: %s)" % (dev, image, wait, said or "exit 0, autoclear")
        if time.monotonic() >= next_try:
            r = subprocess.run(["losetup", "-d", dev], stderr=subprocess.PIPE, text=True)
            said = r.stderr.strip() if r.returncode else ""
            next_try = time.monotonic() + 1.0
        time.sleep(0.1)


class Testbed:
    def __init__(self, nparts=2, size="512M", binary=None, tag="nvt", env=None, quiet=True):
        if os.geteuid() != 0:
            raise SystemExit("needs root (loop devices, mounts)")
        self.binary = binary or default_binary()
        if not os.access(self.binary, os.X_OK):
            raise SystemExit("no daemon binary at %s (build it, or set NVMEVOL_BINARY)" % self.binary)
        # tests/run-all.sh gives each run its own directory: its leftover check sees only that run's.
        tmp = os.environ.get("NVMEVOL_TEST_TMPDIR") or "/var/tmp"
        os.makedirs(tmp, exist_ok=True)
        self.base = tempfile.mkdtemp(prefix="nvmevol-%s." % tag, dir=tmp)
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
                # List waits for the state; Activate is answered before it is loaded.
                st, _ = self.call("/VolumeDriver.List", {}, timeout=2)
                if st == 200:
                    return time.monotonic() - t0
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.005)
        raise RuntimeError("daemon not ready after %ss" % timeout)

    def start_traced(self, strace_args, out, timeout=30, settled=None):
        """Starts the daemon with strace attached before its first instruction (a shell that stops
        itself, then execs it), waits until it serves or exits, detaches strace.

        Returns (serves, the Strace). No request is sent while strace is attached, so an injection
        only hits start-up; @settled (a function) says when the work it left to threads is done."""
        assert self.proc is None
        self.logf = open(self.logpath, "a")
        self.logf.write("---- start %d (traced) ----\n" % self.starts)
        self.logf.flush()
        self.starts += 1
        mark = os.path.getsize(self.logpath)
        env = self.env()
        # LeakSanitizer cannot run under ptrace: a start that exits while traced would abort in it.
        env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")
        self.proc = subprocess.Popen(["/bin/sh", "-c", 'kill -STOP $$; exec "$0"', self.binary],
                                     env=env, stdout=self.logf, stderr=self.logf, stdin=subprocess.DEVNULL)
        t0 = time.monotonic()
        while open("/proc/%d/stat" % self.pid).read().split(") ")[1][0] != "T":
            if time.monotonic() - t0 > 10:
                raise RuntimeError("the start shell did not stop")
            time.sleep(0.002)
        st = Strace(self.pid, strace_args, out)
        os.kill(self.pid, signal.SIGCONT)
        served = False
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                break
            with open(self.logpath, errors="replace") as f:
                f.seek(mark)
                if SERVING_LINE in f.read():
                    served = True
                    break
            time.sleep(0.01)
        # Work that start-up left to a thread (the trash) is traced too, until settled() or 1 s.
        t1 = time.monotonic()
        while served and settled and not settled() and time.monotonic() - t1 < 1 and self.proc.poll() is None:
            time.sleep(0.005)
        st.detach()
        if served:
            while time.monotonic() - t0 < timeout:
                try:
                    if self.call("/VolumeDriver.List", {}, timeout=5)[0] == 200:
                        return True, st
                except OSError:
                    pass
                time.sleep(0.01)
            raise RuntimeError("the daemon said it serves but does not answer")
        if self.proc.poll() is None:
            raise RuntimeError("the traced start neither served nor exited in %ds" % timeout)
        return False, st

    def start_until_attached(self, tries=5):
        """start(), restarted until the daemon has mounted every partition of the testbed: right after
        mkfs, libblkid may still trust a cached entry (up to 2 s old) for a reused loop device."""
        for i in range(tries):
            self.start()
            if len(self.partition_mounts()) >= len(self.loops):
                return
            log("daemon found %d of %d partitions; restarting it" % (len(self.partition_mounts()), len(self.loops)))
            self.stop()
            time.sleep(1)
        raise RuntimeError("the daemon did not find the testbed's partitions")

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
        left = []
        for i, loop in enumerate(self.loops):
            why = release_loop(loop, os.path.join(self.base, "img%d" % i))
            if why:
                left.append(why)
        mounts = self.our_mounts()
        if mounts:
            left.append("%d mount(s) below %s, e.g. %s" % (len(mounts), self.base, mounts[0]["target"]))
        elif not os.environ.get("NVT_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)
        if left:
            # A teardown that cannot release what it made fails the suite.
            raise RuntimeError("cleanup: " + "; ".join(left))

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

    def admin_call(self, endpoint, body=None, timeout=30):
        """(status, parsed JSON or None) from the root-only admin socket next to the plugin socket."""
        c = UnixHTTPConnection(os.path.join(os.path.dirname(self.sock), "nvmevol-admin.sock"), timeout=timeout)
        try:
            c.request("POST", endpoint, body=json.dumps(body or {}).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            payload = r.read()
            try:
                return r.status, json.loads(payload)
            except ValueError:
                return r.status, None
        finally:
            c.close()

    def admin_ok(self, endpoint, body=None, timeout=60):
        st, j = self.admin_call(endpoint, body, timeout=timeout)
        if st != 200 or not isinstance(j, dict) or j.get("Err"):
            raise ApiError("%s %s -> %s %s" % (endpoint, json.dumps(body)[:200], st, j))
        return j

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

    def partition_entries(self):
        """{mountpoint: mountinfo entry} of the partitions the daemon mounted under parts/."""
        return {m["target"]: m for m in mountinfo() if os.path.dirname(m["target"]) == self.parts}

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


# ---- strace: attach, trace files, which calls change state ----

# The syscalls through which nvmevol changes files, directories and mounts.
MUTATING_SYSCALLS = ["openat", "write", "fsync", "fdatasync", "renameat", "renameat2", "mkdirat", "unlinkat",
                     "fchown", "fchmod", "open_tree", "mount_setattr", "move_mount", "umount2", "mount", "ioctl",
                     # a clone's (Create with from=): links, special files, times, attributes, size, flush
                     "symlinkat", "linkat", "mknodat", "utimensat", "fsetxattr", "setxattr", "fchownat",
                     "fchmodat", "ftruncate", "pwrite64", "fallocate", "syncfs"]
_ALWAYS_MUTATING = {"fsync", "fdatasync", "renameat", "renameat2", "mkdirat", "unlinkat", "fchown", "fchmod",
                    "open_tree", "mount_setattr", "move_mount", "umount2", "mount", "symlinkat", "linkat",
                    "mknodat", "utimensat", "fsetxattr", "setxattr", "fchownat", "fchmodat", "ftruncate",
                    "fallocate", "syncfs"}


def strace_missing(test):
    """True (after saying so, as a failed test) when strace is not installed."""
    if shutil.which("strace"):
        return False
    print("%s: strace is not installed (apt-get install strace)" % test)
    print("0 passed, 1 failed")
    return True


class Strace:
    """strace -f on a running process (all threads), trace to @out; the constructor returns once it is attached.

    Injections (-e inject=...:when=N) count calls per thread: every thread, including one that
    starts later, gets its own N-th call of the syscall failed.
    """

    def __init__(self, pid, args, out, timeout=10):
        self.out = out
        self.err = out + ".stderr"
        with open(self.err, "w") as ef:
            self.p = subprocess.Popen(["strace", "-f", "-o", out] + args + ["-p", str(pid)],
                                      stdout=subprocess.DEVNULL, stderr=ef, stdin=subprocess.DEVNULL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with open(self.err, errors="replace") as f:
                if "attached" in f.read():
                    return
            if self.p.poll() is not None:
                break
            time.sleep(0.005)
        self.detach()
        raise RuntimeError("strace did not attach to %d: %s" % (pid, open(self.err).read()[-500:]))

    def detach(self):
        """Stops tracing; the traced process goes on (it is not strace's child)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def events(self):
        return parse_strace(self.out)


_STRACE_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_RET = re.compile(r"\)\s+= (-?\d+|\?|0x[0-9a-f]+)(?: (E[A-Z0-9]+) \(.*?\))?(.*)$")


def parse_strace(path):
    """Calls of a `strace -f -o` file in entry order: dicts pid, name, args, ret, errno, injected, seq.

    seq is the call's 1-based number among the calls of that syscall in that thread (what
    -e inject=...:when=N counts).
    """
    calls, pending, seqs = [], {}, {}
    try:
        f = open(path, errors="replace")
    except FileNotFoundError:
        return calls
    with f:
        for line in f:
            m = _STRACE_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            pid, rest = int(m.group(1)), m.group(2)
            r = _RESUMED.match(rest)
            if r:
                c = pending.pop(pid, None)
                if c is None:
                    continue
                tail = r.group(2)
            else:
                cm = _CALL.match(rest)
                if not cm:
                    continue  # +++ exited, --- SIG..., and the like
                name, tail = cm.group(1), cm.group(2)
                seqs[(pid, name)] = seqs.get((pid, name), 0) + 1
                c = dict(pid=pid, name=name, args="", ret=None, errno=None, injected=False,
                         seq=seqs[(pid, name)])
                calls.append(c)
            if tail.endswith("<unfinished ...>"):
                c["args"] += tail[:-len("<unfinished ...>")]
                pending[pid] = c
                continue
            rm = _RET.search(tail)
            if rm:
                c["args"] += tail[:rm.start()]
                c["ret"] = rm.group(1)
                c["errno"] = rm.group(2)
                c["injected"] = "(INJECTED)" in rm.group(3)
            else:
                c["args"] += tail
    return calls


def mark_mutating(calls):
    """Sets c["mutating"] on each call: it writes to a file, a directory or the mount table.

    openat counts when it opens for writing or creating; write when its fd came from such an
    openat (not the log on stdout, not an eventfd); ioctl when it sets file attributes.
    """
    write_fds = set()
    for c in calls:
        name, args = c["name"], c["args"]
        if name == "openat":
            flags = args.split(", ")[2] if args.count(", ") >= 2 else ""
            c["mutating"] = any(f in flags for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_TMPFILE"))
            if c["ret"] and c["ret"].isdigit():
                (write_fds.add if c["mutating"] else write_fds.discard)(c["ret"])
        elif name in ("write", "pwrite64"):
            c["mutating"] = args.split(",")[0] in write_fds
        elif name == "ioctl":
            # FICLONE shares blocks into a clone's file; FIFREEZE/FITHAW hold and release the partition.
            c["mutating"] = any(x in args for x in ("SETXATTR", "SETFLAGS", "FICLONE", "FIFREEZE", "FITHAW"))
        else:
            c["mutating"] = name in _ALWAYS_MUTATING
    return calls


def annotate_calls(calls):
    """Sets c["sig"] (the call with numbers and random names folded) and c["k"] (its occurrence
    number among the same sig in its thread): a call's identity when optional calls (a cache
    that expired, a retry) shift the per-thread numbers from one run to the next."""
    occ = {}
    for c in calls:
        args = re.sub(r"\s+", "", c["args"])   # a call split by another thread's comes back with spaces
        # A volume's record and its index entry have the same file name: the directory's fd (one of the
        # long-lived meta/, index/, mounts/ fds) tells them apart, so it is not folded for a state file.
        state_dir = re.match(r'(\d+),"[^"]*\.json"', args)
        c["sig"] = c["name"] + "(" + ("fd%s:" % state_dir.group(1) if state_dir else "") + \
            re.sub(r"\d+", "N", re.sub(r"[0-9a-f]{16}", "X", args))[:200]
        key = (c["pid"], c["sig"])
        occ[key] = occ.get(key, 0) + 1
        c["k"] = occ[key]
    return calls


def short_call(c, width=90):
    s = "%s(%s)" % (c["name"], c["args"].strip())
    return s if len(s) <= width else s[:width - 3] + "..."


# ---- one volume as the kernel, the partitions, the state directory and the API see it ----

class VolumeView:
    """Everything about volume @name, read without the daemon's help (plus its Get answer);
    @with_data: also the files in its directory."""

    def __init__(self, tb, name, with_data=False):
        self.name = name
        try:
            self.get_status, self.get = tb.call("/VolumeDriver.Get", {"Name": name}, timeout=30)
        except (OSError, http.client.HTTPException) as e:
            self.get_status, self.get = None, {"transport": str(e)}
        self.present = self.get_status == 200
        self.status = (self.get or {}).get("Volume", {}).get("Status", {}) if self.present else {}
        self.roots = tb.fs_roots()
        self.records = []
        for r in self.roots:
            p = os.path.join(r, "nvmevol", "meta", name + ".json")
            if os.path.lexists(p):
                with open(p, "rb") as f:
                    self.records.append(f.read())
        self.dirs = [d for d in (os.path.join(r, "nvmevol", "volumes", name) for r in self.roots)
                     if os.path.isdir(d) and not os.path.islink(d)]
        self.index = _read_or_none(os.path.join(tb.state, "index", name + ".json"))
        raw = self.counts_raw = _read_or_none(os.path.join(tb.state, "mounts", name + ".json"))
        try:
            self.counts = (json.loads(raw).get("mounts") or {}) if raw else {}
        except ValueError:
            self.counts = {"<unreadable>": 1}
        self.total = sum(self.counts.values())
        self.bind_entries = [m for m in tb.our_mounts() if m["target"] == os.path.join(tb.prop, name)]
        self.binds = [(m["target"], m["root"], m["vfs"]) for m in self.bind_entries]
        # The partition mount that holds the directory: its device is the one a bind must come from.
        self.partition = None
        if len(self.dirs) == 1:
            self.partition = tb.partition_entries().get(os.path.dirname(os.path.dirname(os.path.dirname(
                self.dirs[0]))))
        self.owner = self.data = None
        if len(self.dirs) == 1:
            st = os.stat(self.dirs[0])
            self.owner = (st.st_uid, st.st_gid, st.st_mode & 0o7777)
            if with_data:
                self.data = files_below(self.dirs[0])

    def record_state(self):
        try:
            return json.loads(self.records[0]).get("state") if len(self.records) == 1 else None
        except ValueError:
            return "<unparsable>"

    def essence(self):
        """What an operation that failed must leave exactly as it was."""
        return dict(present=self.present, records=self.records, dirs=len(self.dirs), index=self.index,
                    counts=self.counts, binds=[(m["target"], m["root"], m["dev"], sorted(m["vfs"].split(",")))
                                               for m in self.bind_entries], owner=self.owner,
                    data=self.data)


def files_below(root):
    """{relative path: content} of the regular files below @root (a small test tree)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = f.read()
    return out


CLONE_SOURCE = "srcvol"
CLONE_SOURCE_ID = "src-id"


def ensure_clone_source(tb, opts, mounted):
    """The source of the clone operations: volume CLONE_SOURCE with a small tree (a file, a
    subdirectory, a symlink, a hard link), mounted once (CLONE_SOURCE_ID) or not; returns its files."""
    st, _ = tb.call("/VolumeDriver.Get", {"Name": CLONE_SOURCE})
    if st != 200:
        tb.ok("/VolumeDriver.Create", {"Name": CLONE_SOURCE, "Opts": opts})
        d = tb.volume_dir(CLONE_SOURCE)
        os.mkdir(os.path.join(d, "sub"))
        for rel, content in (("data.bin", b"source data\n" * 400), ("sub/a", b"a")):
            with open(os.path.join(d, rel), "wb") as f:
                f.write(content)
                os.fsync(f.fileno())
        os.symlink("data.bin", os.path.join(d, "link"))
        os.link(os.path.join(d, "sub", "a"), os.path.join(d, "a.hard"))
    counts = VolumeView(tb, CLONE_SOURCE).counts
    if mounted and not counts:
        tb.ok("/VolumeDriver.Mount", {"Name": CLONE_SOURCE, "ID": CLONE_SOURCE_ID})
    elif not mounted:
        for mid, n in counts.items():
            for _ in range(n):
                tb.ok("/VolumeDriver.Unmount", {"Name": CLONE_SOURCE, "ID": mid})
    return files_below(tb.volume_dir(CLONE_SOURCE))


def clone_problems(tb, name, source_files, mounted):
    """Why clone @name (if present) does not hold its source's files, or the source changed."""
    bad = []
    d = tb.volume_dir(CLONE_SOURCE)
    if not d or files_below(d) != source_files:
        bad.append("the clone's source changed")
    if mounted and VolumeView(tb, CLONE_SOURCE).total != 1:
        bad.append("the clone's source is not mounted once any more")
    v = VolumeView(tb, name, True)
    if v.present and v.data != source_files:
        bad.append("clone %s holds %s, its source %s" % (name, sorted(v.data or {}), sorted(source_files)))
    if v.present and len(v.dirs) == 1:
        c = v.dirs[0]
        try:
            if os.readlink(os.path.join(c, "link")) != "data.bin":
                bad.append("clone %s: its symlink changed" % name)
            if os.stat(os.path.join(c, "a.hard")).st_ino != os.stat(os.path.join(c, "sub", "a")).st_ino:
                bad.append("clone %s: its hard link is two files" % name)
        except OSError as e:
            bad.append("clone %s: %s" % (name, e))
    return bad


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


_CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _CRC32C[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def crc_trailer_ok(raw):
    """True if @raw (a state file: record, index entry, mount counts) ends with the member "crc":N
    that is the CRC32C of the body before it, closed by "}" (the format of src/volume/volume.c)."""
    body = raw.rstrip(b" \t\r\n")
    m = re.search(rb',"crc":(\d{1,10})\}$', body)
    return bool(m) and int(m.group(1)) == crc32c(body[:m.start()] + b"}")


def _read_or_none(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def leftovers(tb):
    """Temp files, quarantined directories and (when asked) trash entries the daemon left."""
    found = []
    for r in tb.fs_roots():
        for sub in ("meta", "quarantine"):
            d = os.path.join(r, "nvmevol", sub)
            for fn in os.listdir(d) if os.path.isdir(d) else []:
                if sub == "quarantine" or ".tmp." in fn:
                    found.append("nvmevol/%s/%s" % (sub, fn))
    for sub in ("index", "mounts"):
        d = os.path.join(tb.state, sub)
        for fn in os.listdir(d) if os.path.isdir(d) else []:
            if ".tmp." in fn:
                found.append("state/%s/%s" % (sub, fn))
    return found


def entries_in(tb, sub):
    """["nvmevol/SUB/NAME"] of what is in nvmevol/@sub/ on every partition."""
    out = []
    for r in tb.fs_roots():
        d = os.path.join(r, "nvmevol", sub)
        out += ["nvmevol/%s/%s" % (sub, fn) for fn in (os.listdir(d) if os.path.isdir(d) else [])]
    return out


def trash_entries(tb):
    return entries_in(tb, "trash")


def consistency_problems(tb, v, owner=None):
    """Why @v is not 'fully there' or 'fully gone', with records, index, counts and binds agreeing."""
    bad = []
    if v.get_status not in (200, 500) or (v.get_status == 500 and not (v.get or {}).get("Err")):
        bad.append("Get answered %s %s" % (v.get_status, v.get))
    if v.present:
        if v.status.get("state") not in ("ready", "mounted", "fenced"):
            bad.append("Status state %s" % v.status.get("state"))
        if len(v.records) != 1 or len(v.dirs) != 1 or v.index is None:
            bad.append("present but records=%d dirs=%d index=%s" % (len(v.records), len(v.dirs), v.index is not None))
        elif v.record_state() != "ready":
            bad.append("record state %s" % v.record_state())
        elif owner and v.owner and v.owner != owner:
            bad.append("owner/mode %s, asked %s" % (v.owner, owner))
        for what, raw in [("record", r) for r in v.records] + [("index entry", v.index),
                                                               ("mount counts", v.counts_raw)]:
            if raw is not None and not crc_trailer_ok(raw):
                bad.append("%s fails its CRC: %s" % (what, raw[:120]))
        if v.status.get("mount_count") != v.total:
            bad.append("Status mount_count %s, stored %d" % (v.status.get("mount_count"), v.total))
        if v.total > 0 and len(v.binds) != 1:
            bad.append("count %d but %d binds" % (v.total, len(v.binds)))
        if v.total > 0 and v.binds:
            bad += bind_problems(v.name, v.bind_entries[0], v.partition, v.status.get("options"))
        if v.total == 0 and v.binds:
            bad.append("count 0 but bound")
    else:
        if v.records or v.dirs or v.index is not None or v.counts or v.binds:
            bad.append("absent but records=%d (state %s) dirs=%d index=%s counts=%s binds=%d" %
                       (len(v.records), v.record_state(), len(v.dirs), v.index is not None, v.counts,
                        len(v.binds)))
    return bad


def bind_problems(name, m, part, options=None):
    """Why mountinfo entry @m is not the bind of volume @name as the README promises: the volume's
    directory, from the device of @part (the partition mount holding it, None if not found),
    noatime,nodiratime, nosuid and nodev unless the volume's @options (Status) say suid/dev=true,
    read-only exactly when the partition is."""
    bad = []
    vfs = set(m["vfs"].split(","))
    options = options or {}
    if m["root"] != "/nvmevol/volumes/" + name:
        bad.append("bind of %s has root %s, not its directory" % (name, m["root"]))
    if part is None:
        bad.append("bind of %s: the partition holding its directory is not mounted" % name)
    elif m["dev"] != part["dev"]:
        bad.append("bind of %s comes from device %s, its partition is %s" % (name, m["dev"], part["dev"]))
    want = {"noatime": True, "nodiratime": True, "nosuid": options.get("suid") != "true",
            "nodev": options.get("dev") != "true"}
    if part is not None:
        want["ro"] = "ro" in part["vfs"].split(",")
    for flag, on in sorted(want.items()):
        if (flag in vfs) != on:
            bad.append("bind of %s %s %s (options %s)" % (name, "lacks" if on else "has", flag, m["vfs"]))
    return bad


def partition_mount_problems(tb):
    """Why the partition mounts under parts/ are not what the README promises: XFS, the whole filesystem,
    from the testbed's loop device whose maj:min mountinfo shows, noatime,nodiratime,nosuid,nodev,
    private (no propagation peer group)."""
    bad = []
    rdevs = {}
    for loop in tb.loops:
        try:
            rd = os.stat(loop).st_rdev
            rdevs["%d:%d" % (os.major(rd), os.minor(rd))] = loop
        except OSError:
            pass
    for target, m in sorted(tb.partition_entries().items()):
        vfs = set(m["vfs"].split(","))
        if m["fstype"] != "xfs" or m["root"] != "/":
            bad.append("partition mount %s is %s root %s, not the whole XFS" % (target, m["fstype"], m["root"]))
        if m["dev"] not in rdevs:
            bad.append("partition mount %s is device %s, none of the testbed's %s" % (target, m["dev"], tb.loops))
        missing = {"noatime", "nodiratime", "nosuid", "nodev"} - vfs
        if missing:
            bad.append("partition mount %s lacks %s (options %s)" % (target, ",".join(sorted(missing)), m["vfs"]))
        if "shared:" in m["optional"] or "master:" in m["optional"]:
            bad.append("partition mount %s is not private (%s)" % (target, m["optional"]))
    return bad


def stray_mounts(tb, owned):
    """Mounts under prop/ that are not the bind of a volume in @owned."""
    return [m["target"] for m in tb.our_mounts()
            if m["target"].startswith(tb.prop + "/") and os.path.basename(m["target"]) not in owned]


# ---- the nvmevol command against a testbed's daemon (export, import, send, receive, move) ----

COMMAND_TIMEOUT = 60


def admin_socket(tb):
    return os.path.join(os.path.dirname(tb.sock), "nvmevol-admin.sock")


def command(tb, args, stdin=None, timeout=COMMAND_TIMEOUT, admin=None, stdout=subprocess.PIPE):
    """`nvmevol ARGS --socket ADMIN` (@tb's daemon's by default): (exit status, stdout, stderr); stdout
    is "" when @stdout is a file. No Docker to ask (a move names the mount count then)."""
    env = dict(os.environ, DOCKER_HOST="unix://%s/no-docker.sock" % tb.base)
    p = subprocess.Popen([tb.binary] + args + ["--socket", admin or admin_socket(tb)], stdin=stdin, stdout=stdout,
                         stderr=subprocess.PIPE, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Where it waits, and where the daemon's threads are: the violation says it, the log has the stacks.
        where = "command: %s; daemon: %s" % (waits(p.pid), waits(tb.pid) if tb.alive() else "not running")
        log("`nvmevol %s` did not end: kernel stacks\n  command %d:\n%s\n  daemon %s:\n%s\n  daemon log:\n%s" %
            (" ".join(args[:3]), p.pid, stacks(p.pid), tb.pid, stacks(tb.pid) if tb.alive() else "not running",
             tb.log_tail(15)))
        p.kill()
        p.communicate()
        raise TimeoutError("`nvmevol %s` did not end in %.0f s (%s)" % (" ".join(args[:3]), timeout, where))
    return p.returncode, (out or b"").decode(errors="replace"), err.decode(errors="replace")


def waits(pid):
    """The kernel function each thread of @pid sleeps in (wchan), counted."""
    seen = {}
    for t in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d/task" % pid) else []:
        try:
            w = open("/proc/%d/task/%s/wchan" % (pid, t)).read().strip() or "running"
        except OSError:
            continue
        seen[w] = seen.get(w, 0) + 1
    return ", ".join("%s x%d" % kv for kv in sorted(seen.items())) or "?"


def stacks(pid):
    """Each thread's kernel stack (as root), its name and wchan first: where a hang waits, and on what."""
    out = []
    for t in sorted(os.listdir("/proc/%d/task" % pid)) if os.path.isdir("/proc/%d/task" % pid) else []:
        d = "/proc/%d/task/%s/" % (pid, t)
        try:
            name = open(d + "comm").read().strip()
            st = open(d + "stack").read().strip().replace("\n", "\n      ")
        except OSError:
            continue
        out.append("    %s %s:\n      %s" % (t, name, st or "(running)"))
    return "\n".join(out) or "    ?"


def killed_daemon_stuck(tb):
    """SIGKILL; None when the daemon is gone within 10 s, else where its threads wait. A thread waiting inside
    the kernel on a partition it had frozen keeps a killed process from exiting: the partitions are then
    thawed by hand, so that it ends."""
    tb.proc.send_signal(signal.SIGKILL)
    try:
        tb.proc.wait(timeout=10)
        return None
    except subprocess.TimeoutExpired:
        where = waits(tb.pid)
        log("the killed daemon did not exit: kernel stacks\n%s" % stacks(tb.pid))
        for root in tb.fs_roots():
            subprocess.run(["fsfreeze", "--unfreeze", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return where


def command_ok(tb, args, stdin=None, admin=None):
    rc, out, err = command(tb, args, stdin, admin=admin)
    if rc != 0:
        raise ApiError("nvmevol %s -> %d %s" % (" ".join(args), rc, err.strip()[-300:]))
    return out


def snapshot_files(tb, name, snap):
    """The files snapshot @snap of @name holds on whichever partition has it (None: no such directory)."""
    for r in tb.fs_roots():
        d = os.path.join(r, "nvmevol", "snapshots", name, "data", snap)
        if os.path.isdir(d):
            return files_below(d)
    return None


def snapshot_names(tb, name):
    """The snapshots of @name the daemon lists ([] when it answers an Err: no such volume)."""
    st, j = tb.admin_call("/Admin.VolumeSnapshots", {"Name": name})
    return sorted(s["name"] for s in (j or {}).get("snapshots", [])) if st == 200 else []


def snapshot_dirs(tb, name):
    """(records, data directories) of @name's snapshots on every partition."""
    recs, data = [], []
    for r in tb.fs_roots():
        base = os.path.join(r, "nvmevol", "snapshots", name)
        for sub, out in (("meta", recs), ("data", data)):
            d = os.path.join(base, sub)
            out += os.listdir(d) if os.path.isdir(d) else []
    return sorted(recs), sorted(data)


def import_leftovers(tb):
    """What is in nvmevol/imports/ on any partition (an import's or a full receive's pending directory)."""
    return entries_in(tb, "imports")


def partition_of(tb, name):
    """The UUID of the partition whose volumes/ holds @name."""
    d = tb.volume_dir(name)
    return os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(d)))) if d else None


def remove_fully(tb, name):
    """@name gone from @tb's daemon: unmounted, unfenced, its snapshots removed, removed."""
    st, _ = tb.call("/VolumeDriver.Get", {"Name": name})
    if st != 200:
        return
    for mid, n in VolumeView(tb, name).counts.items():
        for _ in range(n):
            tb.ok("/VolumeDriver.Unmount", {"Name": name, "ID": mid})
    tb.admin_ok("/Admin.VolumeUnfence", {"Name": name})
    for s in tb.admin_ok("/Admin.VolumeSnapshots", {"Name": name}).get("snapshots", []):
        tb.admin_ok("/Admin.VolumeSnapshotRemove", {"Name": name, "Snapshot": s["name"]})
    tb.ok("/VolumeDriver.Remove", {"Name": name})


def volume_with_files(tb, name, opts, files):
    """Creates volume @name with @files {relative path: content}; returns its directory."""
    tb.ok("/VolumeDriver.Create", {"Name": name, "Opts": opts})
    d = tb.volume_dir(name)
    for rel, content in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        with open(os.path.join(d, rel), "wb") as f:
            f.write(content)
    return d


class Streams:
    """A full send stream (snapshot r1 of a source volume) and an incremental one (r2 since r1) in files,
    and the files each snapshot holds and its ID (the receiver's snapshot takes it); made once by make_streams()."""
    full = incr = None
    r1 = r2 = None
    ids = {}


def make_streams(tb, source, opts):
    """Creates volume @source with a small tree, snapshots r1 and r2 of it (a file changed, one deleted,
    one made between them) and sends both into files under @tb's base: fills Streams."""
    d = volume_with_files(tb, source, opts, {"data.bin": b"first\n" * 2000, "sub/a": b"a", "gone": b"deleted in r2"})
    command_ok(tb, ["volume", "snapshot", source, "r1"])
    with open(os.path.join(d, "data.bin"), "r+b") as f:
        f.write(b"SECOND")
    os.unlink(os.path.join(d, "gone"))
    with open(os.path.join(d, "sub", "new"), "wb") as f:
        f.write(b"made in r2")
    command_ok(tb, ["volume", "snapshot", source, "r2"])
    Streams.full, Streams.incr = os.path.join(tb.base, "full.stream"), os.path.join(tb.base, "incr.stream")
    for path, extra in ((Streams.full, ["--snapshot", "r1"]), (Streams.incr, ["--snapshot", "r2", "--from", "r1"])):
        with open(path, "wb") as f:
            rc, _, err = command(tb, ["volume", "send", source] + extra, stdout=f)
        if rc != 0:
            raise ApiError("volume send %s -> %s" % (extra, err))
    Streams.r1, Streams.r2 = snapshot_files(tb, source, "r1"), snapshot_files(tb, source, "r2")
    Streams.ids = snapshot_ids(tb, source)


def snapshot_ids(tb, name):
    """{snapshot: ID} of volume @name, as /Admin.VolumeSnapshots lists them ({} if it answers none)."""
    st, j = tb.admin_call("/Admin.VolumeSnapshots", {"Name": name})
    return {s["name"]: s.get("id") for s in (j or {}).get("snapshots", [])} if st == 200 else {}


def receive(tb, name, path, timeout=COMMAND_TIMEOUT):
    """`nvmevol volume receive NAME < PATH`: (exit status, stdout, stderr)."""
    with open(path, "rb") as f:
        return command(tb, ["volume", "receive", name], stdin=f, timeout=timeout)


class Archive:
    """A tar archive that `volume export` wrote of a small tree (made once by make_archive()), and its files."""
    path = None
    files = None


def make_archive(tb, source, opts):
    """Creates volume @source with a small tree, exports it into a file under @tb's base and removes it
    again: fills Archive (what a `volume import` of it must give)."""
    d = volume_with_files(tb, source, opts, {"data.bin": b"archived\n" * 3000, "sub/a": b"a", "sub/empty": b""})
    Archive.path = os.path.join(tb.base, "volume.tar")
    with open(Archive.path, "wb") as f:
        rc, _, err = command(tb, ["volume", "export", source], stdout=f)
    if rc != 0:
        raise ApiError("volume export %s -> %d %s" % (source, rc, err))
    Archive.files = files_below(d)
    remove_fully(tb, source)
    if archive_files(Archive.path) != Archive.files:
        raise ApiError("the archive of %s does not hold its files" % source)


def archive_files(path):
    """{relative path: content} of the regular files in tar archive @path (None: not a whole archive)."""
    import tarfile
    out = {}
    try:
        with tarfile.open(path, "r:") as t:
            for m in t:
                if m.isfile():
                    out[os.path.normpath(m.name)] = t.extractfile(m).read()
    except (tarfile.TarError, EOFError, OSError):
        return None
    return out


def sample_points(points, n, draw, syscall=lambda p: p[0]):
    """@n of @points, drawn one syscall (@syscall(point)) after the other, each in random order (@draw, a
    random.Random), so that a rare syscall (a rename, an fsync, a FIFREEZE) is drawn as surely as the
    hundreds of opens; in their order in @points."""
    by_sc = {}
    for i, p in enumerate(points):
        by_sc.setdefault(syscall(p), []).append(i)
    for idx in by_sc.values():
        draw.shuffle(idx)
    picked = []
    while len(picked) < min(n, len(points)):
        for sc in sorted(by_sc):
            if by_sc[sc] and len(picked) < n:
                picked.append(by_sc[sc].pop())
    return [points[i] for i in sorted(picked)]
