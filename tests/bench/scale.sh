#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scale.sh: memory and latency of the daemon at N volumes (issue 23), the daemon
# run directly (self-test off, one loop-XFS partition), one binary or two side
# by side. Prints each figure, its ratio to the goal and met/missed. A
# benchmark, not a test: nothing here fails on a figure.
#
#   tests/bench/scale.sh [--n N] [--samples S] [--binary NEW] [--compare OLD] [--work DIR] [--keep]
#
#   --n N         volumes (default 10000; --n 100000 for the issue's second point, --n 2000 for a quick run)
#   --samples S   requests per endpoint in the latency rounds (default 400: S Gets, S/4 Creates, S/4 Lists)
#   --binary NEW  the binary measured (default build/src/nvmevol)
#   --compare OLD a second binary measured on the same volumes (e.g. /work/base/build/src/nvmevol)
#   --work DIR    where the loop image, state and logs go (default /var/tmp/nvmevol-scale)
#
# For each binary: VmRSS, RssAnon and Pss (/proc/PID/smaps_rollup) with no
# volumes (the base), after a restart with N volumes, and after a load of
# Creates, Mounts, Unmounts and Removes (the lowest of 25 samples over 2.5 s,
# and RssAnon's highest: a metrics write's snapshot is transient); anonymous bytes per volume over the
# base; the metrics file's size and each write's CPU time (the process's CPU
# over an idle window at a 1 s interval, divided by the writes seen there: it
# includes the rescan thread's 0.5 s poll, which is small); List p50/p99, Get
# p99, Create p50/p99 at 1,000 and at N volumes; exec to the first answered
# Plugin.Activate (what Docker's activation timeout waits for) and to the
# first answered List (the state loaded), the daemon's CPU time to get there, and the system calls
# of a start under strace -f -c (another start, untimed); the floor of a start-up that reads every
# volume's two files (tests/bench/readfloor.c: open, one read, close, no parsing); what the base's
# anonymous memory is made of (/proc/PID/smaps by mapping). The volumes are made by a daemon run
# with tests/bench/nofsync.c (no flushes), never one that is measured. Needs root (loop device,
# mounts), gcc, xfsprogs, strace.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$REPO/tests/bench
N=10000
SAMPLES=400
NEW=$REPO/build/src/nvmevol
OLD=
WORK=/var/tmp/nvmevol-scale
KEEP=0
IDLE_S=10

while [ $# -gt 0 ]; do
    case $1 in
    --n) N=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --binary) NEW=$2; shift 2 ;;
    --compare) OLD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '3,31p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$N" -ge 1000 ] || { echo "scale.sh: --n must be at least 1000 (Create is compared at 1,000)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "scale.sh: needs root (loop device, XFS mounts)" >&2; exit 2; }

RUN_ID=$(printf '%04x' $((RANDOM)))
PFX=nvs$RUN_ID
W=$WORK/$RUN_ID
LOOP=
PID=
mkdir -p "$W/state" "$W/prop" "$W/parts" "$W/bin"
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

cleanup() {
    set +e
    [ -n "$PID" ] && stop_daemon
    [ "$KEEP" = 1 ] && { log "--keep: leaving $W (loop $LOOP)"; return; }
    awk -v d="$W" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$(printf '%b' "$m")"; done
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

gcc -O2 -Wall -o "$W/bin/sockbench" "$BENCH_DIR/sockbench.c"
gcc -O2 -Wall -pthread -o "$W/bin/readfloor" "$BENCH_DIR/readfloor.c"
gcc -O2 -Wall -shared -fPIC -o "$W/bin/nofsync.so" "$BENCH_DIR/nofsync.c"
SB=$W/bin/sockbench
truncate -s 4G "$W/part.img"
LOOP=$(losetup --find --show "$W/part.img")
mkfs.xfs -q -f -L "${PFX}a" "$LOOP" >/dev/null
udevadm settle 2>/dev/null || true

export NVMEVOL_SOCKET=$W/s.sock NVMEVOL_STATE_DIR=$W/state NVMEVOL_PROPAGATED_MOUNT=$W/prop \
    NVMEVOL_PARTITION_ROOT=$W/parts NVMEVOL_LABEL_PREFIX=$PFX NVMEVOL_SELFTEST=off \
    NVMEVOL_MAX_VOLUMES=1000000 NVMEVOL_METRICS_INTERVAL_SECONDS=1
PROM=$W/state/metrics/nvmevol.prom

declare -A R # R[binary-key,figure] = value

start_daemon() { # BIN: sets PID, ACTIVATE_MS (exec to Plugin.Activate answered), READY_MS (to the first List)
    local out
    out=$("$SB" ready-activate "$W/s.sock" 600000 sh -c "exec '$1' >/dev/null 2>>'$W/daemon.log'")
    read -r PID ACTIVATE_MS READY_MS <<<"$out"
}

stop_daemon() {
    kill -TERM "$PID" 2>/dev/null || true
    local i
    for i in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null || true
    PID=
}

smaps() { # KEY SUFFIX: VmRSS, RssAnon (status) and Pss (smaps_rollup), KiB: the lowest of 25 samples over
    # 2.5 s (more than two metrics writes at the 1 s interval), and RssAnon's highest as anon_peak: the
    # metrics snapshot (about 100 bytes per volume) lives only while a write runs
    local i rss anon pss
    R[$1,rss$2]= R[$1,anon$2]= R[$1,pss$2]= R[$1,anon_peak$2]=0
    for i in $(seq 1 25); do
        rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$PID/status")
        anon=$(awk '$1 == "RssAnon:" { print $2 }' "/proc/$PID/status")
        pss=$(awk '$1 == "Pss:" { print $2 }' "/proc/$PID/smaps_rollup")
        [ -z "${R[$1,rss$2]}" ] || [ "$rss" -lt "${R[$1,rss$2]}" ] && R[$1,rss$2]=$rss
        [ -z "${R[$1,anon$2]}" ] || [ "$anon" -lt "${R[$1,anon$2]}" ] && R[$1,anon$2]=$anon
        [ -z "${R[$1,pss$2]}" ] || [ "$pss" -lt "${R[$1,pss$2]}" ] && R[$1,pss$2]=$pss
        [ "$anon" -gt "${R[$1,anon_peak$2]}" ] && R[$1,anon_peak$2]=$anon
        sleep 0.1
    done
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$PID/stat"; }

base_breakdown() { # KEY: the anonymous KiB of each kind of mapping (/proc/PID/smaps), largest first;
    # of 10 samples, the one with the least in all (a thread that comes and goes is not the base)
    local i b best= best_total= total
    for i in $(seq 1 10); do
        b=$(smaps_by_mapping)
        total=$(awk '{ t += $1 } END { print t + 0 }' <<<"$b")
        if [ -z "$best" ] || [ "$total" -lt "$best_total" ]; then best=$b best_total=$total; fi
        sleep 0.1
    done
    R[$1,base_breakdown]=$best
    R[$1,threads]=$(awk '$1 == "Threads:" { print $2 }' "/proc/$PID/status")
}

smaps_by_mapping() {
    awk '
        /^[0-9a-f]+-[0-9a-f]+ / { n = $6
            if (n == "") c = "anonymous maps (thread stacks, mmap'"'"'ed allocations)"
            else if (n == "[heap]") c = "heap (brk)"
            else if (n == "[stack]") c = "main thread stack"
            else if (n ~ /^\//) { sub(/.*\//, "", n); c = "writable data of " n }
            else c = n
            next }
        $1 == "Anonymous:" && $2 > 0 { a[c] += $2 }
        END { for (k in a) printf "%6d KiB  %s\n", a[k], k }' "/proc/$PID/smaps" | sort -rn
}

startup_trace() { # KEY BIN: system calls of one start until the first List is answered, under strace -f -c
    local out=$W/strace-start-$1.txt spid dpid i
    read -r spid _ < <("$SB" ready "$W/s.sock" 900000 strace -f -c -o "$out" \
        sh -c "exec '$2' >/dev/null 2>>'$W/daemon.log'")
    dpid=$(pgrep -P "$spid" | head -1)
    kill -TERM "$dpid"
    for i in $(seq 1 600); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    R[$1,start_syscalls]=$(awk '$NF == "total" { print $4 }' "$out")
    R[$1,start_top]=$(awk '$NF != "total" && $4 ~ /^[0-9]+$/ && $4 > 1000 { printf "%s %d, ", $NF, $4 }' "$out" | sed 's/, $//')
    cp "$out" "$WORK/strace-start-$1-$N.txt"
}

metrics_cost() { # KEY: idle window; the writes are the file's inode changes (each write is a rename)
    local t0 t1 ino last writes=0 end
    sleep 2
    last=$(stat -c %i "$PROM" 2>/dev/null || echo 0)
    t0=$(cpu_ticks)
    end=$((SECONDS + IDLE_S))
    while [ $SECONDS -lt $end ]; do
        ino=$(stat -c %i "$PROM" 2>/dev/null || echo 0)
        [ "$ino" != "$last" ] && { writes=$((writes + 1)); last=$ino; }
        sleep 0.05
    done
    t1=$(cpu_ticks)
    R[$1,prom_bytes]=$(stat -c %s "$PROM")
    R[$1,prom_writes]=$writes
    local hz
    hz=$(getconf CLK_TCK)
    R[$1,prom_cpu_ms]=$(awk -v d=$((t1 - t0)) -v w=$writes -v hz="$hz" 'BEGIN { printf "%.1f", w ? d * 1000 / hz / w : -1 }')
}

endpoints() { # KEY N_LABEL VOLS
    "$SB" endpoints "$W/s.sock" sv "$3" 1 "$SAMPLES" >"$W/ep-$1-$2.tsv"
    local ep col
    for ep in List Get Create Mount Remove; do
        R[$1,${ep}_p50_$2]=$(awk -F'\t' -v e="$ep" '$1 == e { print $4 / 1000 }' "$W/ep-$1-$2.tsv")
        R[$1,${ep}_p99_$2]=$(awk -F'\t' -v e="$ep" '$1 == e { print $5 / 1000 }' "$W/ep-$1-$2.tsv")
    done
}

KEYS=(new)
BINS=("$NEW")
if [ -n "$OLD" ]; then KEYS=(old new); BINS=("$OLD" "$NEW"); fi

# 1. The base: no volumes.
for i in "${!KEYS[@]}"; do
    start_daemon "${BINS[$i]}"
    smaps "${KEYS[$i]}" _base
    base_breakdown "${KEYS[$i]}"
    R[${KEYS[$i]},ready_0]=$READY_MS
    stop_daemon
done

# The volumes are made by a daemon whose fsyncs are no-ops (tests/bench/nofsync.c; a shared loop
# device's flushes made 100,000 Creates take hours), then synced once; no measured daemon has it.
populate() { # FROM TO
    LD_PRELOAD=$W/bin/nofsync.so start_daemon "$NEW"
    log "populating to $2 volumes"
    "$SB" populate "$W/s.sock" sv "$1" "$2" >&2
    stop_daemon
    sync
}

# 2. 1,000 volumes: Create's reference figures.
populate 0 1000
for i in "${!KEYS[@]}"; do
    start_daemon "${BINS[$i]}"
    log "${KEYS[$i]}: latency at 1000 volumes"
    endpoints "${KEYS[$i]}" 1k 1000
    stop_daemon
done

# 3. N volumes.
populate 1000 "$N"
for i in "${!KEYS[@]}"; do
    k=${KEYS[$i]}
    start_daemon "${BINS[$i]}"
    R[$k,ready]=$READY_MS
    R[$k,activate]=$ACTIVATE_MS
    R[$k,start_cpu]=$(cpu_ms)
    sleep 3 # start-up's transient buffers, the first metrics write
    # Every file start-up reads (records on the partition, index entries), read once more, bare.
    read -r _ _ _ cpu1 < <("$W/bin/readfloor" -t 1 "$W"/parts/*/nvmevol/meta "$W/state/index")
    read -r FLOOR_FILES _ ms2 _ < <("$W/bin/readfloor" -t 2 "$W"/parts/*/nvmevol/meta "$W/state/index")
    R[$k,floor_cpu]=$cpu1 R[$k,floor2]=$ms2
    smaps "$k" _restart
    log "$k: $N volumes: ready in $READY_MS ms, RssAnon ${R[$k,anon_restart]} KiB; metrics writes over ${IDLE_S}s"
    metrics_cost "$k"
    log "$k: latency and load at $N volumes"
    endpoints "$k" N "$N"
    sleep 2
    smaps "$k" _load
    stop_daemon
done
for i in "${!KEYS[@]}"; do
    log "${KEYS[$i]}: system calls of a start at $N volumes (strace -f -c)"
    startup_trace "${KEYS[$i]}" "${BINS[$i]}"
done

# ---- The table.
ratio() { # VALUE GOAL [lower-is-better=1]: "x.xx met|missed"
    awk -v v="$1" -v g="$2" 'BEGIN { if (v == "" || v < 0) { print "-"; exit } r = v / g; printf "%.2f %s", r, r <= 1 ? "met" : "missed" }'
}
per_vol() { # KEY SUFFIX [FIGURE]: anonymous bytes per volume over the base
    awk -v a="${R[$1,${3:-anon}$2]}" -v b="${R[$1,anon_base]}" -v n="$N" 'BEGIN { printf "%.0f", (a - b) * 1024 / n }'
}
row() { # LABEL GOAL_TEXT GOAL FIGURE-FN...
    local label=$1 goaltext=$2 goal=$3 k v line
    shift 3
    line=$(printf '%-44s' "$label")
    for k in "${KEYS[@]}"; do
        v=$("$@" "$k")
        if [ -n "$goal" ]; then
            line+=$(printf ' | %10s %-12s' "$v" "$(ratio "$v" "$goal")")
        else
            line+=$(printf ' | %10s %-12s' "$v" "")
        fi
    done
    printf '%s | %s\n' "$line" "$goaltext"
}
fig() { local key=$2; echo "${R[$2,$1]:-}"; }
pv_restart() { per_vol "$1" _restart; }
pv_load() { per_vol "$1" _load; }
pv_load_peak() { per_vol "$1" _load anon_peak; }
create_ratio() { # p50 or p99 at N over at 1,000
    awk -v a="${R[$2,Create_$1_N]}" -v b="${R[$2,Create_$1_1k]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : -1) }'
}
c50() { create_ratio p50 "$1"; }
c99() { create_ratio p99 "$1"; }
mib() { awk -v b="${R[$2,$1]}" 'BEGIN { printf "%.2f", b / 1048576 }'; }
start_per_vol() { awk -v a="${R[$1,start_syscalls]}" -v n="$N" 'BEGIN { printf "%.1f", a / n }'; }

echo
echo "nvmevol at $N volumes (one loop-XFS partition, self-test off); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$OLD" ] && echo "old: $OLD" 
echo "new: $NEW"
hdr=$(printf '%-44s' "figure")
for k in "${KEYS[@]}"; do hdr+=$(printf ' | %10s %-12s' "$k" "ratio"); done
echo "$hdr | goal"
row "VmRSS, no volumes (KiB)" "" "" fig rss_base
row "RssAnon, no volumes: the base (KiB)" "" "" fig anon_base
row "Pss, no volumes (KiB)" "" "" fig pss_base
row "VmRSS after restart (KiB)" "" "" fig rss_restart
row "RssAnon after restart (KiB)" "" "" fig anon_restart
row "Pss after restart (KiB)" "" "" fig pss_restart
row "VmRSS after load (KiB)" "" "" fig rss_load
row "RssAnon after load (KiB)" "" "" fig anon_load
row "Pss after load (KiB)" "" "" fig pss_load
row "anon bytes/volume over base, restart" "<= 300" 300 pv_restart
row "anon bytes/volume over base, after load" "<= 300" 300 pv_load
row "RssAnon after load, highest sample (KiB)" "" "" fig anon_peak_load
row "  the same per volume (during a metrics write)" "" "" pv_load_peak
row "metrics file (MiB)" "" "" mib prom_bytes
row "metrics writes in ${IDLE_S} s idle (interval 1 s)" "" "" fig prom_writes
row "metrics CPU per write (ms)" "" "" fig prom_cpu_ms
row "List p50 (ms)" "" "" fig List_p50_N
row "List p99 (ms)" "<= 20 ms" 20 fig List_p99_N
row "Get p99 (ms)" "<= 1 ms" 1 fig Get_p99_N
row "Create p50 at 1,000 (ms)" "" "" fig Create_p50_1k
row "Create p99 at 1,000 (ms)" "" "" fig Create_p99_1k
row "Create p50 at N (ms)" "" "" fig Create_p50_N
row "Create p99 at N (ms)" "" "" fig Create_p99_N
row "Create p50 at N / at 1,000" "<= 1.2x" 1.2 c50
row "Create p99 at N / at 1,000" "<= 1.2x" 1.2 c99
row "Mount p50 at N (ms)" "" "" fig Mount_p50_N
row "Remove p50 at N (ms)" "" "" fig Remove_p50_N
row "first answer, no volumes (ms)" "" "" fig ready_0
row "Plugin.Activate answered after exec at N (ms)" "<= 300 ms" 300 fig activate
row "first List answered after exec at N (ms)" "" "" fig ready
row "  the daemon's CPU time until then (ms)" "" "" fig start_cpu
row "  system calls of that start (strace -f -c)" "" "" fig start_syscalls
row "  the same per volume" "" "" start_per_vol
row "floor: every file start-up reads, bare: CPU (ms)" "" "" fig floor_cpu
row "floor: the same on 2 threads, wall (ms)" "" "" fig floor2
echo
echo "files start-up reads (records and index entries): $FLOOR_FILES; readfloor: openat + one read + close each, no parsing"
for k in "${KEYS[@]}"; do
    echo "$k: start-up's system calls over 1,000: ${R[$k,start_top]}"
done
for k in "${KEYS[@]}"; do
    echo
    echo "$k: the base's anonymous memory (no volumes, ${R[$k,threads]} threads), by mapping (/proc/PID/smaps):"
    echo "${R[$k,base_breakdown]}"
done
