#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Freeze stall benchmark (issue 20): how long a clone of a volume in use
# freezes its partition, and the worst write a neighbour on that partition
# sees meanwhile, before and after the frozen pass learned to compare only
# what changed since the live pass (bulk inode stats, src/clone/clone-seen.h).
#
# One loop XFS partition; for each source size (17,000 and 100,000 entries:
# directories of 64 files of 4 KiB, one in eight 64 KiB), while
#  - a writer rewrites 8 KiB of 16 files of the source 200 times a second and
#    creates and deletes 10 files a second there (the source in use), and
#  - a neighbour directory on the same partition writes 4 KiB + fdatasync in
#    a loop, logging each write's latency,
# the clone engine (tests/bench/clonetool, as the daemon runs it) clones the
# source REPS times with each binary, alternating: "before" is clonetool built
# from BEFORE_REF (default main) in a scratch directory, "after" this tree's.
# Prints, and writes to tests/bench/raw/freeze-stall.tsv and a Markdown table
# to stdout: frozen ms, FIFREEZE's own ms, entries compared while frozen, the
# neighbour's worst write during the clone, and the ratios (after ÷ before,
# frozen ÷ the 50 ms goal).
#
# usage: tests/bench/freeze-stall.sh [--reps N] [--sizes "17000 100000"] [--before-switch | --before-env VAR=VALUE]
#   --before-switch: "before" is this tree's clonetool with
#   NVMEVOL_TEST_CLONE_SABOTAGE=full (every entry compared; needs a build
#   with -Dtest_hooks=true) instead of a build of BEFORE_REF.
#   --before-env VAR=VALUE: "before" is this tree's clonetool with that
#   variable set, e.g. NVMEVOL_TEST_CLONE_WRITEBACK_WAIT_MS=0 (no wait for
#   XFS's writeback before the freeze; a -Dtest_hooks=true build).
# Needs root, xfsprogs, python3, meson, ninja. About 2 GiB of sparse disk in
# $BENCH_TMP (/var/tmp), removed at the end; 6-10 minutes.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
REPS=5
SIZES="17000 100000"
BEFORE_SWITCH=0
BEFORE_ENV=
BEFORE_REF=${BEFORE_REF:-main}
BUDGET_MS=60000 # the before binary needs seconds for 100,000 entries (10 s did not suffice at load 19)
while [ $# -gt 0 ]; do
    case $1 in
        --reps) REPS=$2; shift 2 ;;
        --sizes) SIZES=$2; shift 2 ;;
        --before-switch) BEFORE_SWITCH=1; BEFORE_ENV=NVMEVOL_TEST_CLONE_SABOTAGE=full; shift ;;
        --before-env) BEFORE_SWITCH=1; BEFORE_ENV=$2; shift 2 ;;
        *) echo "usage: $0 [--reps N] [--sizes \"17000 100000\"] [--before-switch | --before-env VAR=VALUE]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "freeze-stall.sh: needs root" >&2; exit 2; }

log() { printf '# %s\n' "$*" >&2; }

W=$(mktemp -d "${BENCH_TMP:-/var/tmp}/nvmevol-bench-freeze.XXXXXX")
DEV=
MNT=$W/mnt
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    if mountpoint -q "$MNT"; then
        fsfreeze --unfreeze "$MNT" 2>/dev/null
        umount -l "$MNT"
    fi
    [ -n "$DEV" ] && losetup -d "$DEV"
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

AFTER=$REPO/build/tests/clonetool
[ -x "$AFTER" ] || ninja -C "$REPO/build" tests/clonetool >/dev/null || { log "cannot build $AFTER"; exit 1; }
if [ "$BEFORE_SWITCH" = 1 ]; then
    BEFORE=$AFTER
    BEFORE_NAME="this tree, $BEFORE_ENV"
else
    log "building clonetool of $BEFORE_REF ($(git -C "$REPO" rev-parse --short "$BEFORE_REF"))"
    mkdir -p "$W/before-src"
    git -C "$REPO" archive "$BEFORE_REF" | tar -x -C "$W/before-src" || exit 1
    { meson setup "$W/before-build" "$W/before-src" && ninja -C "$W/before-build" tests/clonetool; } >"$W/before-build.log" 2>&1 ||
        { log "cannot build $BEFORE_REF: $(tail -3 "$W/before-build.log")"; exit 1; }
    BEFORE=$W/before-build/tests/clonetool
    BEFORE_NAME="$BEFORE_REF ($(git -C "$REPO" rev-parse --short "$BEFORE_REF"))"
fi
AFTER_NAME="$(git -C "$REPO" rev-parse --abbrev-ref HEAD) ($(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet || echo '+changes'))"

truncate -s 16G "$W/part.img"
DEV=$(losetup --find --show --direct-io=on "$W/part.img") || exit 1
mkfs.xfs -q -f "$DEV" || exit 1
mkdir -p "$MNT"
mount -o noatime "$DEV" "$MNT" || exit 1
mkdir -p "$MNT/neighbour"

RAW=$HERE/raw
mkdir -p "$RAW"
OUT=$RAW/freeze-stall.tsv
printf 'entries\tmethod\trep\tfrozen_ms\tfreeze_call_ms\tcompared\tchecked\tcarried_bytes\tclone_ms\tworst_neighbour_ms\tneighbour_p99_before_ms\tloadavg\tcheck_ms\twriteback_wait_ms\tfrozen_cpu_ms\tresult\tworst_from_freeze_ms\tneighbour_worst_before_ms\tlog_backlog_mib\n' >"$OUT"
UPTIME_START=$(uptime)
log "start: $UPTIME_START; kernel $(uname -r), $(nproc) CPUs; before: $BEFORE_NAME; after: $AFTER_NAME"

# DIR ENTRIES: directories of 64 files (one in eight 64 KiB, the rest 4 KiB); files + directories = ENTRIES.
make_tree() {
    python3 - "$1" "$2" <<'PY'
import os, sys
d, entries = sys.argv[1], int(sys.argv[2])
small, big = os.urandom(4096), os.urandom(65536)
n, i = 0, 0
while n < entries:
    sub = os.path.join(d, "d%05d" % (i // 64))
    if i % 64 == 0:
        os.makedirs(sub)
        n += 1
        if n >= entries:
            break
    with open(os.path.join(sub, "f%07d" % i), "wb") as f:
        f.write(big if i % 8 == 0 else small)
    n += 1
    i += 1
PY
}

# The source in use: 200 writes of 8 KiB a second into 16 files, 10 creates and 10 deletes a second.
start_writer() {
    python3 - "$1" <<'PY' &
import os, sys, time
d = os.path.join(sys.argv[1], "busy")
os.makedirs(d, exist_ok=True)
fds = [os.open(os.path.join(d, "w%02d" % k), os.O_RDWR | os.O_CREAT, 0o644) for k in range(16)]
buf, i = b"w" * 8192, 0
while True:
    t = time.monotonic()
    os.pwrite(fds[i % 16], buf, (i * 7919 % 512) * 8192)
    if i % 20 == 0:
        open(os.path.join(d, "n%d" % i), "wb").write(b"x" * 4096)
        if i >= 100:
            try:
                os.unlink(os.path.join(d, "n%d" % (i - 100)))
            except FileNotFoundError:
                pass
    i += 1
    time.sleep(max(0, 0.005 - (time.monotonic() - t)))
PY
    PIDS+=($!)
}

# The neighbour: 4 KiB + fdatasync in a loop; each write's start and latency to FILE until it is killed.
start_neighbour() {
    python3 - "$MNT/neighbour/probe" "$1" <<'PY' &
import os, signal, sys, time
p = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
out = open(sys.argv[2], "w", buffering=1) # a line at a time: the clone's rows are read while this runs
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
buf, i = b"n" * 4096, 0
while True:
    t0 = time.monotonic()
    os.pwrite(p, buf, (i % 256) * 4096)
    os.fdatasync(p)
    out.write("%.6f\t%.6f\n" % (t0, time.monotonic() - t0))
    i += 1
PY
    PIDS+=($!)
}

now() { python3 -c 'import time; print("%.6f" % time.monotonic())'; }

# ENTRIES METHOD REP: one clone of $MNT/src into $MNT/dst, its row on stdout.
one_clone() {
    local entries=$1 method=$2 rep=$3 bin env t0 t1 json
    bin=$AFTER; env=()
    if [ "$method" = before ]; then
        bin=$BEFORE
        [ "$BEFORE_SWITCH" = 1 ] && env=("$BEFORE_ENV")
    fi
    mkdir "$MNT/dst"
    sleep 1 # a baseline for the neighbour
    t0=$(now)
    # The last line: the engine logs at info level to stdout (as the daemon does for dockerd) before it.
    json=$(env "${env[@]}" "$bin" "$MNT/src" "$MNT/dst" "$MNT" "$BUDGET_MS" | tail -n 1)
    t1=$(now)
    sleep 0.3
    python3 - "$W/probe.tsv" "$t0" "$t1" "$json" "$entries" "$method" "$rep" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
rows = []
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) == 2:
        rows.append((float(f[0]), float(f[1])))
t0, t1, j = float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
entries, method, rep, load = sys.argv[5:9]
# A failed clone (its freeze budget passed) is a row too: what it froze is what the neighbour waited.
result = "ok" if j["result"] == 0 else "failed: " + j["error"].replace("\t", " ")
base = sorted(l for t, l in rows if t0 - 1.0 <= t < t0)
during = [l for t, l in rows if t0 <= t + l and t <= t1]
p99 = base[min(len(base) - 1, int(0.99 * len(base)))] * 1000 if base else float("nan")
worst = max(during) * 1000 if during else float("nan")
# From the freeze on: this tree's clonetool says when it froze; for one that does not, the freeze's own
# length plus half a second before the end (the thaw's apply and flush are short).
fz = j.get("before_freeze_at") or t1 - j["frozen_ms"] / 1000 - 0.5
from_freeze = [l for t, l in rows if fz <= t + l and t <= t1]
worst_fz = max(from_freeze) * 1000 if from_freeze else float("nan")
worst_base = base[-1] * 1000 if base else float("nan")
print("%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%d\t%.0f\t%.1f\t%.1f\t%s\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%.1f" % (entries, method, rep, j["frozen_ms"],
      j["freeze_call_ms"], j.get("frozen_compared", "all"), j.get("frozen_checked", 0), j["delta_bytes"], (t1 - t0) * 1000, worst,
      p99, load, j.get("frozen_check_ms", 0), j.get("writeback_wait_ms", 0),
      "%.1f" % j["frozen_cpu_ms"] if "frozen_cpu_ms" in j else "-", result, "%.1f" % worst_fz, "%.1f" % worst_base,
      j.get("writeback_backlog_bytes", 0) / 1048576))
PY
    rm -rf "$MNT/dst"
}

for entries in $SIZES; do
    rm -rf "$MNT/src"
    mkdir "$MNT/src"
    log "source of $entries entries"
    make_tree "$MNT/src" "$entries" || exit 1
    sync -f "$MNT"
    : >"$W/probe.tsv"
    start_writer "$MNT/src"
    start_neighbour "$W/probe.tsv"
    sleep 2
    for rep in $(seq 1 "$REPS"); do
        for method in $( ((rep % 2)) && echo "before after" || echo "after before"); do
            row=$(one_clone "$entries" "$method" "$rep") || { log "$row"; exit 1; }
            printf '%s\n' "$row" | tee -a "$OUT" >&2
        done
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    PIDS=()
done
UPTIME_END=$(uptime)
log "end: $UPTIME_END"

python3 - "$OUT" "$BEFORE_NAME" "$AFTER_NAME" "$UPTIME_START" "$UPTIME_END" "$REPS" <<'PY'
import statistics, sys
rows = [r for r in (l.rstrip("\n").split("\t") for l in open(sys.argv[1])) if len(r) >= 18][1:]
before, after, up0, up1, reps = sys.argv[2:7]
def med(v):
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))
print("Run: %s to %s; before = %s, after = %s; %s reps each, alternating." % (up0.strip(), up1.strip(), before, after, reps))
print()
print("| entries | binary | frozen ms | of it FIFREEZE ms | of it bulk stats ms | the engine's CPU while frozen ms | compared while frozen | worst neighbour write from the freeze on ms | worst during the whole clone ms | neighbour worst / p99 in the second before ms | XFS log not written back MiB | waited for writeback s | whole clone s | failed (budget) | frozen ÷ 50 ms goal |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
summary = {}
for entries in sorted({r[0] for r in rows}, key=int):
    for method in ("before", "after"):
        rs = [r for r in rows if r[0] == entries and r[1] == method]
        fz = [float(r[3]) for r in rs]
        call = [float(r[4]) for r in rs]
        worst = [float(r[9]) for r in rs]
        p99 = [float(r[10]) for r in rs]
        chk = [float(r[12]) for r in rs]
        wb = [float(r[13]) / 1000 for r in rs]
        whole = [float(r[8]) / 1000 for r in rs]
        cpu = [float(r[14]) for r in rs if r[14] != "-"]
        failed = sum(1 for r in rs if r[15] != "ok")
        wfz = [float(r[16]) for r in rs]
        wbase = [float(r[17]) for r in rs]
        backlog = [float(r[18]) if len(r) > 18 else float("nan") for r in rs]
        cmp_ = sorted({r[5] for r in rs}, key=lambda x: (x == "all", int(x) if x.isdigit() else 0))
        summary[(entries, method)] = (statistics.median(fz), statistics.median(wfz))
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f / %.0f | %s | %s | %s | %d of %d | %.2f× |" % (entries, method, med(fz),
              med(call), med(chk), med(cpu) if cpu else "–",
              "every entry" if cmp_ == ["all"] else "%s–%s" % (cmp_[0], cmp_[-1]) if len(cmp_) > 1 else cmp_[0],
              med(wfz), med(worst), statistics.median(wbase), statistics.median(p99), med(backlog), med(wb), med(whole), failed, len(rs),
              statistics.median(fz) / 50))
print()
for entries in sorted({k[0] for k in summary}, key=int):
    b, a = summary[(entries, "before")], summary[(entries, "after")]
    print("- %s entries: frozen %.1f → %.1f ms (after ÷ before %.3f×), worst neighbour write from the freeze on %.1f → %.1f ms (%.3f×); goal ≤ 50 ms: %s" %
          (entries, b[0], a[0], a[0] / b[0], b[1], a[1], a[1] / b[1], "met" if a[0] <= 50 else "missed"))
PY
