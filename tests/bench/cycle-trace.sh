#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cycle-trace.sh: the daemon's share of one Docker control-plane cycle
# (docker volume create + docker run --rm -v + docker volume rm), on the
# daemon run directly: the plugin calls Docker makes for it (Create, Get,
# Mount, Get, Unmount, Get, Remove, each on a new connection), C cycles under
# `strace -f` (system calls and fsyncs per cycle; also those of the
# connections' threads alone: on a machine whose block devices keep changing,
# the rescan thread's probes are in the first figure and not in the second),
# then C cycles without strace (the daemon's CPU
# per cycle from /proc/PID/stat, that of an idle window as long taken off, and
# wall time). One binary or two side by side. A benchmark: nothing fails on a figure.
#
#   tests/bench/cycle-trace.sh [--cycles C] [--binary NEW] [--compare OLD] [--work DIR]
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
C=40
NEW=$REPO/build/src/nvmevol
OLD=
WORK=/var/tmp/nvmevol-cycle
while [ $# -gt 0 ]; do
    case $1 in
    --cycles) C=$2; shift 2 ;;
    --binary) NEW=$2; shift 2 ;;
    --compare) OLD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h | --help) sed -n '3,16p' "$0"; exit 0 ;;
    *) echo "cycle-trace.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "cycle-trace.sh: needs root (loop device, XFS mounts)" >&2; exit 2; }
command -v strace >/dev/null || { echo "cycle-trace.sh: needs strace" >&2; exit 2; }

RUN_ID=$(printf '%04x' $((RANDOM)))
PFX=nvc$RUN_ID
W=$WORK/$RUN_ID
LOOP= PID= SPID=
mkdir -p "$W/state" "$W/prop" "$W/parts"
cleanup() {
    set +e
    [ -n "$SPID" ] && kill -INT "$SPID"
    [ -n "$PID" ] && { kill -TERM "$PID"; wait "$PID" 2>/dev/null; }
    awk -v d="$W" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$(printf '%b' "$m")"; done
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -rf "$W"
}
trap cleanup EXIT
truncate -s 1G "$W/part.img"
LOOP=$(losetup --find --show "$W/part.img")
mkfs.xfs -q -f -L "${PFX}a" "$LOOP" >/dev/null
udevadm settle 2>/dev/null || true
export NVMEVOL_SOCKET=$W/s.sock NVMEVOL_STATE_DIR=$W/state NVMEVOL_PROPAGATED_MOUNT=$W/prop \
    NVMEVOL_PARTITION_ROOT=$W/parts NVMEVOL_LABEL_PREFIX=$PFX NVMEVOL_SELFTEST=off

call() { curl -sf --unix-socket "$W/s.sock" -X POST -d "$2" "http://p/VolumeDriver.$1" >/dev/null; }
cycles() { # FROM TO
    local i v
    for i in $(seq "$1" "$2"); do
        v=cv$i
        call Create "{\"Name\":\"$v\",\"Opts\":{\"selftest\":\"off\"}}"
        call Get "{\"Name\":\"$v\"}"
        call Mount "{\"Name\":\"$v\",\"ID\":\"c$i\"}"
        call Get "{\"Name\":\"$v\"}"
        call Unmount "{\"Name\":\"$v\",\"ID\":\"c$i\"}"
        call Get "{\"Name\":\"$v\"}"
        call Remove "{\"Name\":\"$v\"}"
    done
}
start() { # BIN [strace output]: strace attaches after start-up, so only the cycles are counted
    "$1" >/dev/null 2>>"$W/daemon.log" &
    PID=$!
    local i
    for i in $(seq 1 200); do
        curl -sf --unix-socket "$W/s.sock" -X POST -d '{}' http://p/VolumeDriver.List >/dev/null 2>&1 && break
        sleep 0.05
    done
    SPID=
    if [ -n "${2:-}" ]; then
        strace -f -qq -o "$2" -p "$PID" 2>/dev/null &
        SPID=$!
        sleep 1
    fi
}
stop() {
    if [ -n "$SPID" ]; then kill -INT "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=; fi
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

label() { [ "$1" = "$OLD" ] && echo old || echo new; }
printf '%-7s %6s %9s %12s %14s %14s %14s %11s\n' binary cycles fsync/cyc syscalls/cyc "of connections" "daemon CPU ms" "CPU ms, net" "wall ms/cyc"
for b in $OLD $NEW; do
    start "$b" "$W/strace.txt"
    cycles 1 "$C"
    stop
    # Every thread's calls (the trash worker's fsync included), counted once each (an
    # "<unfinished ...>" line and its "resumed>" line are one call); then those of the
    # connections' threads alone: the threads the accepting thread created (not the rescan's
    # probe workers, which a machine whose devices keep changing starts all the time).
    read -r fs all conn < <(awk '
        NR == FNR {
            if ($2 ~ /^accept4?\(/) listener[$1] = 1
            if ($0 ~ /clone3?(\(| resumed>)/ && match($0, /= [0-9]+$/)) parent[substr($0, RSTART + 2)] = $1
            next }
        $2 ~ /^(\+\+\+|---)/ || /resumed>/ { next }
        { all++; if (($1 in parent) && (parent[$1] in listener)) conn++; if ($2 ~ /^(fsync|fdatasync)\(/) fs++ }
        END { print fs + 0, all + 0, conn + 0 }' "$W/strace.txt" "$W/strace.txt")
    cp "$W/strace.txt" "$WORK/strace-$(label "$b").txt"
    start "$b"
    sleep 1
    t0=$(ticks "$PID") w0=$(date +%s%N)
    cycles $((C + 1)) $((2 * C))
    t1=$(ticks "$PID") w1=$(date +%s%N)
    # An idle window as long as the cycles: the background threads' CPU (rescans, metrics).
    sleep "$(awk -v d=$((w1 - w0)) 'BEGIN { printf "%.2f", d / 1e9 }')"
    t2=$(ticks "$PID")
    stop
    hz=$(getconf CLK_TCK)
    printf '%-7s %6s %9.1f %12.0f %14.0f %14.2f %14.2f %11.1f\n' "$(label "$b")" "$C" \
        "$(awk -v a="$fs" -v c="$C" 'BEGIN { print a / c }')" "$(awk -v a="$all" -v c="$C" 'BEGIN { print a / c }')" \
        "$(awk -v a="$conn" -v c="$C" 'BEGIN { print a / c }')" \
        "$(awk -v d=$((t1 - t0)) -v c="$C" -v hz="$hz" 'BEGIN { print d * 1000 / hz / c }')" \
        "$(awk -v d=$((t1 - t0 - (t2 - t1))) -v c="$C" -v hz="$hz" 'BEGIN { print d * 1000 / hz / c }')" \
        "$(awk -v d=$((w1 - w0)) -v c="$C" 'BEGIN { print d / 1e6 / c }')"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
