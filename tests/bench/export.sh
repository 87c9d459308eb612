#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Export benchmark (issue 20): `nvmevol volume export` through the real
# daemon against GNU tar of the same tree on the same loop XFS partition,
# plain and with zstd level 1, side by side in one run (the methods
# alternate, REPS times each), printing the throughput of each and the
# ratio export / tar. Not a timed test: it fails only when a command fails.
#
# Two trees: "large" (16 files of SIZE/16) and "small" (FILES files of 4 KiB
# in directories of 1000). The data of each 1 MiB is half random, half text,
# so zstd has something to do (about 2:1), as a database's files would.
# Default SIZE=1G and FILES=100000 on this shared machine; --full is the
# issue's 4 GiB. The tree is in the page cache for both sides (no
# drop_caches on a shared machine): what is compared is the archiver.
#
# Methods, each into a pipe read by `wc -c` (which counts the bytes and
# throws them away): GNU tar notices an archive that is /dev/null itself and
# then reads no file data, so a pipe with one reader is the nearest to the
# issue's "to /dev/null". (Until 2026-12-02 the bytes were counted by
# `| tee >(wc -c) | cat >/dev/null`, which copies every byte three more times
# and so charged the export's larger archive of small files for it: 0.79x.)
#   tar          tar -cf - -C DIR .
#   export-snap  nvmevol volume export V --snapshot S (a snapshot taken once)
#   export       nvmevol volume export V (its own temporary snapshot included)
#   snapshot     nvmevol volume snapshot V T; snapshot-rm V T (what export adds to export-snap)
#   tar-zstd     tar -cf - -C DIR . | zstd -1
#   export-zstd  nvmevol volume export V --snapshot S --compress zstd
#
# usage: tests/bench/export.sh [--full] [--size SIZE] [--files N] [--reps N] [--methods LIST]
# (--methods: a comma-separated subset of the methods above, e.g. tar,export-snap for more reps of those)
# Raw figures: tests/bench/raw/export.tsv. Needs root, xfsprogs, curl, zstd.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SIZE=1G
FILES=100000
REPS=3
METHODS=tar,export-snap,export,snapshot,tar-zstd,export-zstd
while [ $# -gt 0 ]; do
    case $1 in
        --full) SIZE=4G; shift ;;
        --size) SIZE=$2; shift 2 ;;
        --files) FILES=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --methods) METHODS=$2; shift 2 ;;
        *) echo "usage: $0 [--full] [--size SIZE] [--files N] [--reps N] [--methods LIST]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "export.sh: needs root" >&2; exit 2; }
case $SIZE in *M) BYTES=$(( ${SIZE%M} << 20 )) ;; *G) BYTES=$(( ${SIZE%G} << 30 )) ;;
    *) echo "export.sh: --size takes NM or NG, not '$SIZE'" >&2; exit 2 ;; esac

BIN=${NVMEVOL_BINARY:-$REPO/build/src/nvmevol}
[ -x "$BIN" ] || { echo "export.sh: no $BIN (ninja -C build)" >&2; exit 1; }
RAW=$HERE/raw
mkdir -p "$RAW"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
bench_init export
log() { bench_log "$@"; }
api() { bench_api "$W" "$@" >/dev/null; }
admin() { bench_admin "$W" "$@"; }

make_tree() { # DIR KIND
    python3 - "$1" "$2" "$BYTES" "$FILES" <<'PY'
import os, random, sys
d, kind, total, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(20)
text = b"".join(b"row %08d|%s|%d\n" % (i, b"abcdefghij"[i % 10:] * 3, i * 7) for i in range(20000))
chunk = rnd.randbytes(1 << 19) + text[: 1 << 19]
if kind == "large":
    for i in range(16):
        with open(os.path.join(d, "big%02d" % i), "wb") as f:
            for _ in range(total // 16 // len(chunk)):
                f.write(chunk)
else:
    for i in range(files):
        sub = os.path.join(d, "%03d" % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(sub)
        o = (i * 4096) % (len(chunk) - 4096)
        with open(os.path.join(sub, "f%06d" % i), "wb") as f:
            f.write(chunk[o:o + 4096])
PY
}

img_bytes=$((BYTES * 2 + FILES * 8192 + (2 << 30)))
bench_partition "$W/part.img" "$img_bytes" "${PFX}a" || exit 1
bench_daemon "$W" "$PFX" NVMEVOL_CLONE_FREEZE_BUDGET_MS=60000 || exit 1
PARTS=$BENCH_PARTS

out=$RAW/export.tsv
printf 'tree\tmethod\trep\tseconds\tcpu_seconds\tbytes_in\tbytes_out\n' >"$out"
for kind in large small; do
    api Create "{\"Name\":\"$kind\"}" || exit 1
    dir=$PARTS/nvmevol/volumes/$kind
    make_tree "$dir" "$kind" || exit 1
    sync -f "$PARTS"
    admin volume snapshot "$kind" s1 >/dev/null || exit 1
    data=$(du -sb "$dir" | cut -f1)
    log "tree $kind: $(find "$dir" -type f | wc -l) files, $data bytes"
    # Warm the page cache for both sides.
    tar -cf - -C "$dir" . | cat >/dev/null
    admin volume export "$kind" --snapshot s1 2>/dev/null | cat >/dev/null
    IFS=, read -r -a methods <<<"$METHODS"
    for rep in $(seq 1 "$REPS"); do
        order=("${methods[@]}")
        ((rep % 2)) || for ((i = ${#methods[@]} - 1, j = 0; i >= 0; i--, j++)); do order[j]=${methods[i]}; done
        for m in "${order[@]}"; do
            case $m in
            tar) cmd="tar -cf - -C '$dir' . | wc -c >'$W/n'" ;;
            export-snap) cmd="'$BIN' volume export $kind --snapshot s1 --socket '$W/nvmevol-admin.sock' | wc -c >'$W/n'" ;;
            export) cmd="'$BIN' volume export $kind --socket '$W/nvmevol-admin.sock' | wc -c >'$W/n'" ;;
            snapshot) cmd="'$BIN' volume snapshot $kind t$rep --socket '$W/nvmevol-admin.sock' && '$BIN' volume snapshot-rm $kind t$rep --socket '$W/nvmevol-admin.sock'; echo 0 >'$W/n'" ;;
            tar-zstd) cmd="tar -cf - -C '$dir' . | zstd -q -1 -c | wc -c >'$W/n'" ;;
            export-zstd) cmd="'$BIN' volume export $kind --snapshot s1 --compress zstd --socket '$W/nvmevol-admin.sock' | wc -c >'$W/n'" ;;
            esac
            t=$(bench_timed "$cmd") || { log "$m failed: $(cat "$W/err")"; exit 1; }
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$m" "$rep" "$t" "$data" "$(cat "$W/n")" | tee -a "$out" >&2
        done
    done
done

# The median of each method, MB/s of the tree's data, and the ratio to the tar it is measured against.
python3 - "$out" "$SIZE" "$FILES" "$REPS" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("export benchmark: large tree %s (16 files), small tree %s files of 4 KiB, %s reps, medians"
      % (sys.argv[2], sys.argv[3], sys.argv[4]))
print("%-6s %-12s %8s %8s %8s %12s %6s %6s  %s" % ("tree", "method", "seconds", "MB/s", "cpu s", "out bytes", "ratio",
                                                  "cpu", "against"))
against = {"export-snap": "tar", "export": "tar", "export-zstd": "tar-zstd"}
for tree in ("large", "small"):
    med, cpu = {}, {}
    for m in ("tar", "export-snap", "export", "snapshot", "tar-zstd", "export-zstd"):
        r = [x for x in rows if x["tree"] == tree and x["method"] == m]
        if not r:
            continue
        med[m] = statistics.median(float(x["seconds"]) for x in r)
        cpu[m] = statistics.median(float(x["cpu_seconds"]) for x in r)
        mbs = int(r[0]["bytes_in"]) / med[m] / 1e6
        ratio = "%.2fx" % (med[against[m]] / med[m]) if against.get(m) in med else ""
        cratio = "%.2fx" % (cpu[against[m]] / cpu[m]) if against.get(m) in cpu and cpu[m] > 0 else ""
        print("%-6s %-12s %8.3f %8.1f %8.3f %12s %6s %6s  %s" % (tree, m, med[m], mbs, cpu[m], r[0]["bytes_out"], ratio,
                                                           cratio, against.get(m, "")))
print("ratio: the throughput of export over that of the tar it is set against (>= 0.90 is the goal);")
print("cpu: the same for CPU time (user + system of the whole pipeline), steadier on a loaded machine")
PY
