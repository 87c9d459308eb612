#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# scale.sh: issue 23's scale benchmark, every figure side by side in one run, each with its goal,
# its ratio to the goal, met or missed and, when missed, why. The daemon run directly (self-test
# off, one loop-XFS partition) at one or more volume counts, one binary or two; with --docker, the
# same run then measures the control plane through Docker and `docker volume ls`/`create` against
# Docker's `local` driver (tests/bench/run.sh --quick --only control,volumes, under
# flock /tmp/nvmevol-docker.lock) and prints those figures in the same table. A benchmark, not a
# test: nothing here fails on a figure.
#
#   tests/bench/scale.sh [--n N[,N...]] [--samples S] [--binary NEW] [--compare OLD]
#                        [--docker [--docker-n N] [--docker-reps R]] [--save] [--work DIR] [--keep]
#
#   --n LIST      volume counts, comma-separated (default 10000; the issue's: --n 10000,100000;
#                 --n 2000 for a quick run). The volumes grow from one count to the next.
#   --samples S   requests per endpoint in the latency rounds (default 400: S Gets, S/4 Creates, S/4 Lists)
#   --binary NEW  the binary measured (default build/src/nvmevol)
#   --compare OLD a second binary measured on the same volumes (e.g. /work/base/build/src/nvmevol)
#   --docker      also the figures through Docker (needs dockerd; builds a release plugin of this tree)
#   --docker-n N  volumes for `docker volume ls`/`create` (default 10000, the issue's figure)
#   --docker-reps R  repetitions of run.sh (default 5: 5 control cycles per contender, 15 ls/create)
#   --save        the printed table to tests/bench/raw/scale.txt, then RESULTS.md regenerated (report.py)
#   --work DIR    where the loop image, state and logs go (default /var/tmp/nvmevol-scale)
#
# Per binary and volume count: VmRSS, RssAnon and Pss (/proc/PID/smaps_rollup) with no volumes (the
# base), after a restart and after a load of Creates, Mounts, Unmounts and Removes (the lowest of 25
# samples over 2.5 s, and RssAnon's highest: a metrics write's snapshot is transient); anonymous
# bytes per volume over the base; the metrics file's size, and each write's CPU time over an idle
# window at a 1 s interval (the process's, and the writer thread's own from its counters in
# Admin.Status); a burst of 1,000 Creates: the changes the writer was told of against the files it
# wrote (the file's replacements, polled); List p50/p99, Get p99,
# Create p50/p99 at 1,000 and at N; exec to the first answered Plugin.Activate (what Docker's
# activation timeout waits for) and to the first answered List (the state loaded), the daemon's CPU
# time to get there; at the largest count, the system calls of a start under strace -f -c (another
# start, untimed); the floor of a start-up that reads every volume's two files
# (tests/bench/readfloor.c: open, one read, close, no parsing); what the base's anonymous memory is
# made of (/proc/PID/smaps by mapping). The volumes are made by a daemon run with
# tests/bench/nofsync.c (no flushes), never one that is measured. Needs root (loop device, mounts),
# gcc, xfsprogs, strace, curl, jq.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$REPO/tests/bench
POINTS_ARG=10000
SAMPLES=400
NEW=$REPO/build/src/nvmevol
OLD=
WORK=/var/tmp/nvmevol-scale
KEEP=0
IDLE_S=10
BURST=1000
DOCKER=0
DOCKER_N=10000
DOCKER_REPS=5
SAVE=0
ARGS="$*"

while [ $# -gt 0 ]; do
    case $1 in
    --n) POINTS_ARG=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    --binary) NEW=$2; shift 2 ;;
    --compare) OLD=$2; shift 2 ;;
    --docker) DOCKER=1; shift ;;
    --docker-n) DOCKER_N=$2; shift 2 ;;
    --docker-reps) DOCKER_REPS=$2; shift 2 ;;
    --save) SAVE=1; shift ;;
    --work) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '3,/^set -euo/{/^set -euo/!p}' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
IFS=, read -r -a POINTS <<<"$POINTS_ARG"
mapfile -t POINTS < <(printf '%s\n' "${POINTS[@]}" | sort -n -u)
for p in "${POINTS[@]}"; do
    [[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1000 ] ||
        { echo "scale.sh: each --n must be a number of at least 1000 (Create is compared at 1,000)" >&2; exit 2; }
done
N=${POINTS[-1]} # the largest count: start-up's system calls are traced there
[ "$(id -u)" = 0 ] || { echo "scale.sh: needs root (loop device, XFS mounts)" >&2; exit 2; }
for t in gcc mkfs.xfs strace curl jq; do
    command -v $t >/dev/null || { echo "scale.sh: needs $t" >&2; exit 2; }
done

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
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
DATE_START=$(date -u +%Y-%m-%dT%H:%M:%SZ)

declare -A R # R[binary,figure] (the base, Create at 1,000) and R[column,figure]; a column is binary@count

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
    cp "$out" "$WORK/strace-start-${1/@/-}.txt"
}

perf_start() { # KEY BIN: where a start's CPU goes until the first List is answered (perf record -g, when
    # perf is there): the daemon's own samples by symbol, self time, the top 15
    local data=$W/perf-start.data spid dpid i
    command -v perf >/dev/null || { R[$1,perf_top]="(perf not installed)"; return 0; }
    read -r spid _ < <("$SB" ready "$W/s.sock" 900000 perf record -q -F 499 --call-graph dwarf,16384 -o "$data" -- \
        sh -c "exec '$2' >/dev/null 2>>'$W/daemon.log'")
    dpid=$(pgrep -P "$spid" | head -1)
    kill -TERM "$dpid"
    for i in $(seq 1 600); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    R[$1,perf_dso]=$(perf report -i "$data" --no-children --comm nvmevol --sort dso --stdio -q -g none \
        --percent-limit 1 2>/dev/null | grep -v '^$' | head -10 || true)
    R[$1,perf_top]=$(perf report -i "$data" --no-children --comm nvmevol --sort dso,sym --stdio -q -g none \
        --percent-limit 1.5 2>/dev/null | grep -v '^$' | head -15 || true)
    # each function with what it calls (inclusive): which part of start-up the time is in
    R[$1,perf_incl]=$(perf report -i "$data" --children --comm nvmevol --sort sym --stdio -q -g none \
        --percent-limit 4 2>/dev/null | grep -v '^$' | head -40 || true)
}

admin_metrics() { # the metrics writer's counters (Admin.Status): "writes changes cpu_seconds last_write_bytes"
    curl -s --max-time 60 --unix-socket "$W/nvmevol-admin.sock" -X POST -d '{}' http://d/Admin.Status |
        jq -r '.metrics | "\(.writes) \(.changes) \(.cpu_seconds) \(.last_write_bytes)"'
}

# Admin.Status builds every volume's JSON (seconds of the daemon's CPU at 100,000 volumes), so it is
# called only outside the windows below; the writes in a window are counted from the file itself.
writes_during() { # CMD...: runs CMD; WRITES = the metrics file's replacements meanwhile (its inode changes:
    # each write is a rename of a new file, at most one per 250 ms; polled every 50 ms), SECS = the window
    local last ino p t0 t1
    last=$(stat -c %i "$PROM" 2>/dev/null || echo 0)
    WRITES=0
    t0=$(date +%s%N)
    "$@" >&2 &
    p=$!
    while kill -0 "$p" 2>/dev/null; do
        ino=$(stat -c %i "$PROM" 2>/dev/null || echo 0)
        [ "$ino" != "$last" ] && { WRITES=$((WRITES + 1)); last=$ino; }
        sleep 0.05
    done
    wait "$p"
    t1=$(date +%s%N)
    SECS=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1e9 }')
}

metrics_cost() { # KEY: an idle window at the 1 s interval: the writes, the process's CPU per write (the
    # rescan thread's 0.5 s poll included), and the writer's own CPU per write (its thread's CPU time,
    # counted by the writer, read from Admin.Status before and after: that span includes a Status call)
    local w0 c0 w1 c1 b t0
    sleep 2
    read -r w0 _ c0 _ < <(admin_metrics)
    t0=$(cpu_ms)
    writes_during sleep "$IDLE_S"
    R[$1,prom_writes]=$WRITES
    R[$1,prom_proc_cpu_ms]=$(awk -v a="$t0" -v b="$(cpu_ms)" -v w="$WRITES" 'BEGIN { printf "%.1f", w ? (b - a) / w : -1 }')
    read -r w1 _ c1 b < <(admin_metrics)
    R[$1,prom_bytes]=$b
    R[$1,prom_cpu_ms]=$(awk -v c0="$c0" -v c1="$c1" -v w=$((w1 - w0)) 'BEGIN { printf "%.1f", w ? (c1 - c0) * 1000 / w : -1 }')
}

burst() { # KEY: BURST Creates one after the other (the measured daemon, fsyncs and all): the changes the
    # metrics writer was told of (each a full rewrite without coalescing) and the files it wrote meanwhile
    local h0 h1
    read -r _ h0 _ _ < <(admin_metrics)
    writes_during "$SB" populate "$W/s.sock" sb 0 "$BURST"
    read -r _ h1 _ _ < <(admin_metrics)
    R[$1,burst_s]=$SECS
    R[$1,burst_changes]=$((h1 - h0))
    R[$1,burst_writes]=$WRITES
    # The writer's promise (src/metrics/metrics.h): a burst over T seconds is at most T + 2 writes.
    R[$1,burst_bound]=$(awk -v s="$SECS" 'BEGIN { printf "%d", int(s) + 2 }')
    "$SB" remove "$W/s.sock" sb 0 "$BURST" >/dev/null
}

endpoints() { # KEY N_LABEL VOLS
    "$SB" endpoints "$W/s.sock" sv "$3" 1 "$SAMPLES" >"$W/ep-${1/@/-}-$2.tsv"
    local ep
    for ep in List Get Create Mount Remove; do
        R[$1,${ep}_p50_$2]=$(awk -F'\t' -v e="$ep" '$1 == e { print $4 / 1000 }' "$W/ep-${1/@/-}-$2.tsv")
        R[$1,${ep}_p99_$2]=$(awk -F'\t' -v e="$ep" '$1 == e { print $5 / 1000 }' "$W/ep-${1/@/-}-$2.tsv")
    done
}

KEYS=(new)
declare -A BIN=([new]=$NEW)
if [ -n "$OLD" ]; then KEYS=(old new); BIN[old]=$OLD; fi
COLS=()
declare -A COLKEY COLN

# 1. The base: no volumes.
for k in "${KEYS[@]}"; do
    start_daemon "${BIN[$k]}"
    smaps "$k" _base
    base_breakdown "$k"
    R[$k,ready_0]=$READY_MS
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
for k in "${KEYS[@]}"; do
    start_daemon "${BIN[$k]}"
    log "$k: latency at 1000 volumes"
    endpoints "$k" 1k 1000
    stop_daemon
done

# 3. Each count, the volumes growing from one to the next.
TOP=1000
for n in "${POINTS[@]}"; do
    populate "$TOP" "$n"
    TOP=$n
    for k in "${KEYS[@]}"; do
        c=$k@$n
        COLS+=("$c")
        COLKEY[$c]=$k COLN[$c]=$n
        start_daemon "${BIN[$k]}"
        R[$c,ready]=$READY_MS
        R[$c,activate]=$ACTIVATE_MS
        R[$c,start_cpu]=$(cpu_ms)
        sleep 3 # start-up's transient buffers, the first metrics write
        # Every file start-up reads (records on the partition, index entries), read once more, bare.
        read -r _ _ _ cpu1 < <("$W/bin/readfloor" -t 1 "$W"/parts/*/nvmevol/meta "$W/state/index")
        read -r FLOOR_FILES _ ms2 _ < <("$W/bin/readfloor" -t 2 "$W"/parts/*/nvmevol/meta "$W/state/index")
        R[$c,floor_cpu]=$cpu1 R[$c,floor2]=$ms2 R[$c,floor_files]=$FLOOR_FILES
        smaps "$c" _restart
        log "$c: ready in $READY_MS ms, RssAnon ${R[$c,anon_restart]} KiB; metrics writes over ${IDLE_S}s"
        metrics_cost "$c"
        log "$c: latency and load"
        endpoints "$c" N "$n"
        sleep 2
        smaps "$c" _load
        log "$c: a burst of $BURST Creates"
        burst "$c"
        stop_daemon
    done
done
for k in "${KEYS[@]}"; do
    log "$k: system calls of a start at $N volumes (strace -f -c)"
    startup_trace "$k@$N" "${BIN[$k]}"
    log "$k: a profile of a start at $N volumes (perf record)"
    perf_start "$k@$N" "${BIN[$k]}"
done
LOAD_DIRECT=$(cut -d' ' -f1-3 /proc/loadavg)

# 4. Through Docker: run.sh's control and volumes items, in its own work directory (a release build
# of this tree, its dockerds, loop devices), the docker lock held throughout.
DOCKER_OK=0
if [ "$DOCKER" = 1 ]; then
    DW=$WORK/docker-$(md5sum <<<"$REPO" | cut -c1-8)
    DRAW=$DW/results/raw
    log "through Docker: run.sh --quick --reps $DOCKER_REPS --only control,volumes, VOLS_N=$DOCKER_N (log: $WORK/docker.log; waits at most 30 min for the docker lock)"
    if flock -w 1800 /tmp/nvmevol-docker.lock env BENCH_WORK="$DW" VOLS_N="$DOCKER_N" \
        bash "$BENCH_DIR/run.sh" --quick --reps "$DOCKER_REPS" --only control,volumes >"$WORK/docker.log" 2>&1; then
        DOCKER_OK=1
    else
        log "run.sh failed; the last lines of $WORK/docker.log:"
        tail -n 15 "$WORK/docker.log" >&2
    fi
fi

# ---- The table.
ratio() { # VALUE GOAL: "x.xx met|missed" (lower is better)
    awk -v v="$1" -v g="$2" 'BEGIN { if (v == "" || v < 0) { print "-"; exit } r = v / g; printf "%.2f %s", r, r <= 1 ? "met" : "missed" }'
}
per_vol() { # COLUMN SUFFIX [FIGURE]: anonymous bytes per volume over the base
    awk -v a="${R[$1,${3:-anon}$2]}" -v b="${R[${COLKEY[$1]},anon_base]}" -v n="${COLN[$1]}" \
        'BEGIN { printf "%.0f", (a - b) * 1024 / n }'
}
row() { # LABEL GOAL_TEXT GOAL WHY FIGURE-FN...: one cell per column; WHY is printed when a column misses
    local label=$1 goaltext=$2 goal=$3 why=$4 c v r line missed=0
    shift 4
    line=$(printf '%-50s' "$label")
    for c in "${COLS[@]}"; do
        v=$("$@" "$c")
        r=
        [ -n "$goal" ] && r=$(ratio "$v" "$goal")
        [[ $r == *missed ]] && missed=1
        line+=$(printf ' | %10s %-11s' "$v" "$r")
    done
    line+=$(printf ' | %-9s' "$goaltext")
    [ "$missed" = 1 ] && line+=" | missed: $why"
    printf '%s\n' "$line"
}
fig() { echo "${R[$2,$1]:-${R[${COLKEY[$2]},$1]:-}}"; } # FIGURE COLUMN: the column's, else its binary's
pv_restart() { per_vol "$1" _restart; }
pv_load() { per_vol "$1" _load; }
pv_load_peak() { per_vol "$1" _load anon_peak; }
create_ratio() { # p50 or p99 at N over at 1,000
    awk -v a="${R[$2,Create_$1_N]}" -v b="${R[${COLKEY[$2]},Create_$1_1k]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : -1) }'
}
c50() { create_ratio p50 "$1"; }
c99() { create_ratio p99 "$1"; }
mib() { awk -v b="$(fig "$1" "$2")" 'BEGIN { printf "%.2f", b / 1048576 }'; }
start_per_vol() { [ -n "${R[$1,start_syscalls]:-}" ] && awk -v a="${R[$1,start_syscalls]}" -v n="${COLN[$1]}" 'BEGIN { printf "%.1f", a / n }' || true; }
ready_per_vol() { awk -v a="${R[$1,ready]}" -v b="${R[${COLKEY[$1]},ready_0]}" -v n="${COLN[$1]}" 'BEGIN { printf "%.1f", (a - b) * 1000 / n }'; }
burst_over_bound() { awk -v w="${R[$1,burst_writes]}" -v b="${R[$1,burst_bound]}" 'BEGIN { printf "%.2f", w / b }'; }
burst_saved() { awk -v w="${R[$1,burst_writes]}" -v h="${R[$1,burst_changes]}" 'BEGIN { printf "%.0f", w ? h / w : -1 }'; }

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# Through Docker, from run.sh's raw files: TSV FIELD-MATCH... (awk conditions) -> the median of the last column
dmed() { awk -F'\t' "$2 { print \$NF }" "$DRAW/$1" | median; }
drow() { # LABEL LOCAL NVMEVOL RATIO GOAL_TEXT GOAL WHY
    local r=
    [ -n "$6" ] && r=$(ratio "$4" "$6")
    printf '%-50s | %10s | %10s | %8s | %-11s | %-9s' "$1" "$2" "$3" "$4" "$r" "$5"
    [[ $r == *missed ]] && printf ' | missed: %s' "$7"
    printf '\n'
}
ms() { awk -v u="$1" 'BEGIN { if (u == "") print ""; else printf "%.0f", u / 1000 }'; }
div() { awk -v a="$1" -v b="$2" -v d="${3:-3}" 'BEGIN { if (a == "" || b == "" || b == 0) print ""; else printf "%.*f", d, a / b }'; }

print_table() {
    local k c hdr L
    L="load $LOAD_START at the start, $LOAD_DIRECT after the daemon-direct part"
    echo "tests/bench/scale.sh $ARGS"
    echo "$DATE_START to $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null) (working tree may differ); $(nproc) cores; $L"
    for k in "${KEYS[@]}"; do echo "$k: ${BIN[$k]}"; done
    echo
    echo "The daemon run directly (one 4 GiB loop-XFS partition, self-test off, metrics interval 1 s); a column is binary@volumes."
    hdr=$(printf '%-50s' "figure")
    for c in "${COLS[@]}"; do hdr+=$(printf ' | %10s %-11s' "$c" "ratio"); done
    echo "$hdr | goal      | why, when missed"
    local NOISE="latency at load $LOAD_DIRECT on $(nproc) shared cores: one slow sample in 100 is the scheduler; compare p50 and the CPU figures"
    echo "-- memory"
    row "VmRSS, no volumes (KiB)" "" "" "" fig rss_base
    row "RssAnon, no volumes: the base (KiB)" "" "" "" fig anon_base
    row "Pss, no volumes (KiB)" "" "" "" fig pss_base
    row "VmRSS after restart (KiB)" "" "" "" fig rss_restart
    row "RssAnon after restart (KiB)" "" "" "" fig anon_restart
    row "Pss after restart (KiB)" "" "" "" fig pss_restart
    row "VmRSS after load (KiB)" "" "" "" fig rss_load
    row "RssAnon after load (KiB)" "" "" "" fig anon_load
    row "Pss after load (KiB)" "" "" "" fig pss_load
    row "anon bytes/volume over base, restart" "<= 300" 300 "the per-volume structures; the base is below" pv_restart
    row "anon bytes/volume over base, after load" "<= 300" 300 "the per-volume structures; the base is below" pv_load
    row "RssAnon after load, highest sample (KiB)" "" "" "" fig anon_peak_load
    row "  the same per volume (during a metrics write)" "" "" "" pv_load_peak
    echo "-- metrics file"
    row "metrics file (MiB)" "" "" "" mib prom_bytes
    row "metrics writes in ${IDLE_S} s idle (interval 1 s)" "" "" "" fig prom_writes
    row "metrics CPU per write: the process's, idle (ms)" "" "" "" fig prom_proc_cpu_ms
    row "  the writer thread's own (ms)" "" "" "" fig prom_cpu_ms
    row "burst of $BURST Creates: seconds (T)" "" "" "" fig burst_s
    row "  changes notified (a rewrite each, uncoalesced)" "" "" "" fig burst_changes
    row "  metrics files written during it" "" "" "" fig burst_writes
    row "  files written over the bound T + 2" "<= 1" 1 "the writer wrote more often than its settle/min-gap rule allows" burst_over_bound
    row "  changes per file written (coalescing)" "" "" "" burst_saved
    echo "-- latency over the plugin socket (one keep-alive connection)"
    row "List p50 (ms)" "" "" "" fig List_p50_N
    row "List p99 (ms)" "<= 20 ms" 20 "$NOISE" fig List_p99_N
    row "Get p99 (ms)" "<= 1 ms" 1 "$NOISE" fig Get_p99_N
    row "Create p50 at 1,000 (ms)" "" "" "" fig Create_p50_1k
    row "Create p99 at 1,000 (ms)" "" "" "" fig Create_p99_1k
    row "Create p50 at N (ms)" "" "" "" fig Create_p50_N
    row "Create p99 at N (ms)" "" "" "" fig Create_p99_N
    row "Create p50 at N / at 1,000" "<= 1.2x" 1.2 "$NOISE" c50
    row "Create p99 at N / at 1,000" "<= 1.2x" 1.2 "$NOISE" c99
    row "Mount p50 at N (ms)" "" "" "" fig Mount_p50_N
    row "Remove p50 at N (ms)" "" "" "" fig Remove_p50_N
    echo "-- start-up"
    row "first answer, no volumes (ms)" "" "" "" fig ready_0
    row "Plugin.Activate answered after exec (ms)" "<= 300 ms" 300 "start-up answers Activate before loading; a slow exec" fig activate
    row "first List answered after exec (ms)" "<= 300 ms" 300 \
        "every request but Activate/Capabilities waits until each volume's index entry and record are read and checked: linear in volumes (next row); Docker's activation waits for Activate only" fig ready
    row "  per volume over no volumes (us)" "" "" "" ready_per_vol
    row "  the daemon's CPU time until then (ms)" "" "" "" fig start_cpu
    row "  system calls of that start (strace -f -c)" "" "" "" fig start_syscalls
    row "  the same per volume" "" "" "" start_per_vol
    row "floor: every file start-up reads, bare: CPU (ms)" "" "" "" fig floor_cpu
    row "floor: the same on 2 threads, wall (ms)" "" "" "" fig floor2
    row "  files read (records and index entries)" "" "" "" fig floor_files
    echo
    echo "readfloor: openat + one read + close of each file start-up reads, no parsing"
    for k in "${KEYS[@]}"; do
        echo "$k@$N: start-up's system calls over 1,000: ${R[$k@$N,start_top]}"
    done
    for k in "${KEYS[@]}"; do
        echo
        echo "$k@$N: where a start's CPU goes until the first List (perf record -g; the daemon's samples, self time) by library, >= 1 %:"
        echo "${R[$k@$N,perf_dso]}"
        echo "by symbol, >= 1.5 %:"
        echo "${R[$k@$N,perf_top]}"
        echo "inclusive (children, with what they call; percent, self percent), >= 4 %, the top 40:"
        echo "${R[$k@$N,perf_incl]}"
    done
    for k in "${KEYS[@]}"; do
        echo
        echo "$k: the base's anonymous memory (no volumes, ${R[$k,threads]} threads), by mapping (/proc/PID/smaps):"
        echo "${R[$k,base_breakdown]}"
    done
    [ "$DOCKER" = 1 ] || return 0
    echo
    if [ "$DOCKER_OK" != 1 ]; then
        echo "Through Docker: run.sh failed, no figures (its log: $WORK/docker.log)"
        return 0
    fi
    local lo nv rf pr lsl lsn crl crn n_cyc
    echo "Through Docker (tests/bench/run.sh --quick --reps $DOCKER_REPS --only control,volumes, VOLS_N=$DOCKER_N; the plugin a release build of this tree, self-test off); $(sed -n "s/^load after: /load after it: /p" "$DW/results/meta.txt")"
    printf '%-50s | %10s | %10s | %8s | %-11s | %-9s | %s\n' "figure" "local" "nvmevol" "/ local" "ratio" "goal" "why, when missed"
    lo=$(dmed control.tsv '$1 == "default" && $2 == "local"')
    nv=$(dmed control.tsv '$1 == "default" && $2 == "nvmevol-off"')
    rf=$(dmed control.tsv '$1 == "default" && $2 == "refplugin"')
    n_cyc=$(awk -F'\t' '$1 == "default" && $2 == "local"' "$DRAW/control.tsv" | wc -l)
    # paired: each cycle over local's in the same repetition (they ran next to each other)
    pr=$(awk -F'\t' '$1 == "default" && $2 == "local" { l[$3] = $4 } $1 == "default" && $2 == "nvmevol-off" { n[$3] = $4 }
        END { for (r in n) if (l[r] > 0) print n[r] / l[r] }' "$DRAW/control.tsv" | median)
    local CPWHY="moves by more than 5 % from run to run at this load with $n_cyc cycles (RESULTS 2a: CPU and system calls per cycle, which do not)"
    drow "control cycle, median ms ($n_cyc cycles each)" "$(ms "$lo")" "$(ms "$nv")" "$(div "$nv" "$lo")" "<= 1.05x" 1.05 "$CPWHY"
    drow "  the same, paired: median of per-repetition ratios" "" "" "$(div "$pr" 1)" "<= 1.05x" 1.05 "$CPWHY"
    drow "  the reference plugin instead, median ms" "$(ms "$lo")" "$(ms "$rf")" "$(div "$rf" "$lo")" "" "" ""
    lsl=$(dmed volumes.tsv '$1 == "ls" && $2 == "local"')
    lsn=$(dmed volumes.tsv '$1 == "ls" && $2 == "nvmevol"')
    crl=$(dmed volumes.tsv '$1 == "create" && $2 == "local"')
    crn=$(dmed volumes.tsv '$1 == "create" && $2 == "nvmevol"')
    drow "docker volume ls at $DOCKER_N volumes, median ms" "$(ms "$lsl")" "$(ms "$lsn")" "$(div "$lsn" "$lsl" 2)" "" "" ""
    drow "docker volume create at $DOCKER_N volumes, median ms" "$(ms "$crl")" "$(ms "$crn")" "$(div "$crn" "$crl" 2)" "" "" ""
    local kind pl pn
    for kind in populate remove; do
        pl=$(awk -F'\t' -v k=$kind '$1 == k && $2 == "local" { printf "%.0f", $3 / $4 }' "$DRAW/volumes.tsv")
        pn=$(awk -F'\t' -v k=$kind '$1 == k && $2 == "nvmevol" { printf "%.0f", $3 / $4 }' "$DRAW/volumes.tsv")
        drow "${kind/populate/create}s per second through the API (one by one)" "$pl" "$pn" "$(div "$pl" "$pn" 2)" "" "" ""
    done
    echo "(a control cycle: docker volume create + docker run --rm -v + docker volume rm, alternated with local's and
the reference plugin's (tests/bench/refplugin.c, what any managed plugin costs); for the rates, / local is the
time taken, local's rate over nvmevol's; the issue sets no goal for ls, create and the rates: a reference)"
}

echo
if [ "$SAVE" = 1 ]; then
    print_table | tee "$BENCH_DIR/raw/scale.txt"
    python3 "$BENCH_DIR/report.py" "$BENCH_DIR/raw" "$BENCH_DIR/RESULTS.md" "$BENCH_DIR/plots" >&2
else
    print_table
fi
