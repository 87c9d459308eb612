#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Clone benchmark: `Create -o from=SOURCE` through the real daemon against
# `cp -a` (and `cp -a --reflink=always`) of the same tree on the same loop
# XFS partition, for trees of 100 MiB, 1 GiB and 8 GiB; then the write stall
# that the freeze of a clone of a volume in use causes for a neighbour
# volume on the same partition. Alternates the methods, REPS times each, and
# writes raw TSVs to tests/bench/raw/clone-*.tsv, tables to
# tests/bench/clone.md and PNG plots to tests/bench/plots/clone-*.png
# (tests/bench/clone-report.py, gnuplot).
#
# Two shapes of tree: "mixed", half large files (16 MiB) and half small ones
# (256 KiB), in directories of 64 files: 100 MiB = 3 + 200 files, 1 GiB =
# 32 + 2048, 8 GiB = 256 + 16384; and "large", 64 files of a 64th of the size.
# Disk: a sparse image of 24 GiB in $BENCH_TMP (/var/tmp), removed at the end;
# an 8 GiB tree and its cp -a copy use about 17 GiB while it runs.
#
# usage: tests/bench/clone.sh [--quick] [--reps N]   (--quick: 100 MiB and 1 GiB only)
# Needs root, xfsprogs, curl, python3, gnuplot; builds build/ if needed.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SIZES=(100M 1G 8G)
REPS=3
while [ $# -gt 0 ]; do
    case $1 in
        --quick) SIZES=(100M 1G); shift ;;
        --reps) REPS=$2; shift 2 ;;
        *) echo "usage: $0 [--quick] [--reps N]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "clone.sh: needs root" >&2; exit 2; }

BIN=$REPO/build/src/nvmevol
[ -x "$BIN" ] || { meson setup "$REPO/build" "$REPO" >/dev/null && ninja -C "$REPO/build" >/dev/null; } ||
    { echo "clone.sh: build failed" >&2; exit 1; }
RAW=$HERE/raw
mkdir -p "$RAW"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
bench_init clone
IMG=$W/part.img
log() { bench_log "$@"; }
api() { bench_api "$W" "$@"; } # prints the reply; fails on an Err

# Seconds that a Create takes, request to reply.
api_timed() {
    curl -s -o "$W/reply" -w '%{time_total}\n' --unix-socket "$W/s.sock" -X POST -d "$2" \
        "http://nvmevol/VolumeDriver.$1" && ! grep -q '"Err":"[^"]' "$W/reply"
}

vol_dir() { echo "$PARTS/nvmevol/volumes/$1"; }

wait_trash_empty() {
    local i
    for i in $(seq 1 600); do
        [ -z "$(ls -A "$PARTS/nvmevol/trash")" ] && return 0
        sleep 0.1
    done
    log "the trash did not empty"
}

# Writes a tree of BYTES into DIR: "mixed" (half in 16 MiB files, half in
# 256 KiB files, 64 per directory) or "large" (64 files). Prints the file counts.
make_tree() { # DIR BYTES SHAPE
    python3 - "$1" "$2" "$3" <<'PY'
import os, sys
d, total, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
chunk = os.urandom(1 << 20)
def write(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(chunk))
            f.write(chunk[:n])
            left -= n
if shape == "large":
    kinds = (("big", 64, total // 64),)
else:
    big, small = 16 << 20, 256 << 10
    kinds = (("big", max(1, (total // 2) // big), big), ("small", max(1, (total // 2) // small), small))
for kind, n, size in kinds:
    for i in range(n):
        sub = os.path.join(d, kind, "%04d" % (i // 64))
        os.makedirs(sub, exist_ok=True)
        write(os.path.join(sub, "f%05d" % i), size)
print(" + ".join(str(n) for _, n, _ in kinds))
PY
}

size_bytes() { case $1 in *M) echo $(( ${1%M} << 20 )) ;; *G) echo $(( ${1%G} << 30 )) ;; esac; }

start_daemon() {
    bench_daemon "$W" "$PFX" NVMEVOL_CLONE_FREEZE_BUDGET_MS=10000 || return 1
    PID=${BENCH_PIDS[-1]}
    PARTS=$BENCH_PARTS
}

bench_times() {
    local out=$RAW/clone-times.tsv shape size bytes counts rep m t src
    : >"$out"
    for shape in large mixed; do
        for size in "${SIZES[@]}"; do
            bytes=$(size_bytes "$size")
            src=$shape$size
            api Create "{\"Name\":\"$src\"}" >/dev/null || { log "Create $src failed"; return 1; }
            counts=$(make_tree "$(vol_dir "$src")" "$bytes" "$shape")
            sync -f "$PARTS"
            log "tree $src: $counts files, $(du -sh "$(vol_dir "$src")" | cut -f1)"
            for rep in $(seq 1 "$REPS"); do
                for m in $( ((rep % 2)) && echo "nvmevol cp-reflink cp-a" || echo "cp-a cp-reflink nvmevol"); do
                    # No drop_caches (a shared machine): cp -a reads a source still in the page cache, its best case.
                    sync -f "$PARTS"
                    case $m in
                    nvmevol)
                        t=$(api_timed Create "{\"Name\":\"c$src\",\"Opts\":{\"from\":\"$src\"}}") ||
                            { log "clone failed: $(cat "$W/reply")"; return 1; }
                        api Remove "{\"Name\":\"c$src\"}" >/dev/null
                        wait_trash_empty ;;
                    cp-a | cp-reflink)
                        local flag=--reflink=never
                        [ $m = cp-reflink ] && flag=--reflink=always
                        # Until the copy is on disk, as the clone's is when Create answers.
                        t=$( { TIMEFORMAT=%R; time { cp -a $flag "$(vol_dir "$src")" "$PARTS/copy" && sync -f "$PARTS/copy"; }; } 2>&1)
                        rm -rf "$PARTS/copy"
                        sync -f "$PARTS" ;;
                    esac
                    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$size" "$m" "$rep" "$t" "$counts" | tee -a "$out" >&2
                done
            done
            # The largest mixed tree stays for the stall measurement.
            [ "$src" = "mixed${SIZES[-1]}" ] || { api Remove "{\"Name\":\"$src\"}" >/dev/null; wait_trash_empty; }
        done
    done
}

# The stall: a neighbour volume writes 4 KiB + fdatasync in a loop and logs
# each write's latency while the source (mounted, written) is cloned.
bench_stall() {
    local size=${SIZES[-1]} src=mixed${SIZES[-1]} out=$RAW/clone-stall.tsv trace=$RAW/clone-stall-trace.tsv rep mp
    : >"$out"
    : >"$trace"
    api Create '{"Name":"neighbour"}' >/dev/null
    api Mount "{\"Name\":\"$src\",\"ID\":\"bench\"}" >/dev/null || { log "Mount failed"; return 1; }
    mp=$W/prop/$src
    for rep in $(seq 1 "$REPS"); do
        touch "$W/go" # the probe runs while it exists, and 3 s more
        python3 - "$mp/busy" "$(vol_dir neighbour)/probe" "$W/probe.tsv" "$W/go" <<'PY' &
import os, sys, time
busy, probe, out, go = sys.argv[1:5]
# The source is written too (8 KiB pages, 200 per second): the clone carries those over under the freeze.
b = os.open(busy, os.O_WRONLY | os.O_CREAT, 0o644)
p = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o644)
buf = b"n" * 4096
t_end = None
rows = []
i = 0
while True:
    if t_end is None and not os.path.exists(go):
        t_end = time.monotonic() + 3.0
    if t_end is not None and time.monotonic() > t_end:
        break
    t0 = time.monotonic()
    os.pwrite(p, buf, (i % 256) * 4096)
    os.fdatasync(p)
    t1 = time.monotonic()
    rows.append((t0, t1 - t0))
    if i % 5 == 0:
        os.pwrite(b, buf * 2, (i % 4096) * 8192)
    i += 1
with open(out, "w") as f:
    for t0, lat in rows:
        f.write("%.6f\t%.6f\n" % (t0, lat))
PY
        local probe=$!
        sleep 3
        local t0 t1
        t0=$(python3 -c 'import time; print("%.6f" % time.monotonic())')
        api Create "{\"Name\":\"stall\",\"Opts\":{\"from\":\"$src\"}}" >"$W/reply" ||
            { log "clone failed: $(cat "$W/reply")"; rm -f "$W/go"; wait $probe; return 1; }
        t1=$(python3 -c 'import time; print("%.6f" % time.monotonic())')
        rm -f "$W/go"
        wait $probe
        local frozen line
        frozen=$(api Get '{"Name":"stall"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["Volume"]["Status"]["clone"]["frozen_ms"])')
        line=$(grep 'cloned from' "$W/daemon.log" | tail -1)
        python3 - "$W/probe.tsv" "$t0" "$t1" "$frozen" "$rep" "$size" "$trace" "$line" <<'PY' | tee -a "$out" >&2
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
t0, t1, frozen, rep, size, trace, line = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
base = sorted(l for t, l in rows if t < t0 - 0.2)
during = [l for t, l in rows if t0 <= t + l and t <= t1]
p = lambda v, q: v[min(len(v) - 1, int(q * len(v)))] * 1000 if v else float("nan")
worst = max(during) * 1000 if during else float("nan")
print("%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s" % (size, rep, p(base, 0.5), p(base, 0.99), worst, (t1 - t0) * 1000,
                                                  frozen, sum(1 for l in during if l > 0.05), line.split("cloned from ")[-1]))
# The plot's data (run 1, from 1.5 s before the request to 1.5 s after the reply): every write
# over 1 ms, one in ten of the others (they only draw the band).
if rep == "1":
    with open(trace, "a") as f:
        for i, (t, l) in enumerate(rows):
            if t0 - 1.5 <= t <= t1 + 1.5 and (l >= 0.001 or i % 10 == 0):
                f.write("%s\t%.1f\t%.3f\n" % (rep, (t - t0) * 1000, l * 1000))
PY
        api Remove '{"Name":"stall"}' >/dev/null
        wait_trash_empty
    done
    api Unmount "{\"Name\":\"$src\",\"ID\":\"bench\"}" >/dev/null
}

main() {
    local t0=$SECONDS
    bench_partition "$IMG" 24G "${PFX}a" --direct-io=on || exit 1
    DEV=$BENCH_DEV
    start_daemon || exit 1
    log "daemon $PID, partition $DEV at $PARTS; $(nproc) CPUs, kernel $(uname -r)"
    { echo "date=$(date -u +%FT%TZ) kernel=$(uname -r) cpus=$(nproc) reps=$REPS sizes=${SIZES[*]}"; } >"$RAW/clone-meta.txt"
    bench_times || exit 1
    bench_stall || exit 1
    log "done in $((SECONDS - t0)) s"
    python3 "$HERE/clone-report.py" "$RAW" "$HERE/clone.md" "$HERE/plots"
}

main
