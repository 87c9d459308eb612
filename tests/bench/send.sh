#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Incremental send and move benchmark (issue 20), on a real PostgreSQL 15
# data directory (Debian's postgresql, run on the host as the postgres user
# against the volume's mount) served by a real daemon on a loop XFS:
#
# 1. Incremental against full. pgbench -i fills the database (SCALE; about
#    4 GiB of data directory at the default, --quick a small one), snapshot
#    S1; pgbench then writes until what PostgreSQL wrote (WAL and data pages,
#    from its own counters) is CHANGE % of the data directory, CHECKPOINT,
#    snapshot S2. Then `volume send --snapshot S1` (full) and
#    `volume send --snapshot S2 --from S1` (incremental), each into a pipe,
#    side by side in one run: once cold (the snapshots' pages dropped from
#    the page cache with fadvise, so read from the loop device as a send
#    after a snapshot is), then REPS times each warm, alternated. Bytes,
#    seconds, CPU and the ratios against the goals (incremental <= 3 % of the
#    full stream's bytes and <= 10 % of its time). What changed is counted
#    three ways: PostgreSQL's bytes written, the stream's data bytes (the
#    FIEMAP ranges S2 no longer shares with S1), and the extents of both trees.
# 2. A move's downtime. A second daemon on its own loop XFS is the other
#    node, reached by a --via wrapper (as tests/test-daemon-move.c does);
#    `volume move` runs its live passes while pgbench writes at a fixed rate;
#    once it waits for the unmount, pgbench and PostgreSQL stop (timed apart:
#    the service's own part of the downtime), the volume is unmounted, and the
#    final pass runs. The final pass against the move's full pass (the time a
#    full copy to the other node takes); goal <= 5 %. PostgreSQL then starts
#    on the other node and pgbench's invariant must hold there.
#
# usage: tests/bench/send.sh [--quick] [--scale N] [--change PCT] [--reps N] [--rate TPS] [--no-move] [--hold]
# SEND_BENCH_LOGS=DIR keeps the logs (daemons, PostgreSQL, pgbench, the move's stderr) there.
# --hold: before the move (or the end, with --no-move), keep everything until $W/hold is removed,
# for profiling by hand (the daemons' sockets and the snapshots s1 and s2 are under $W).
# Needs root, xfsprogs, curl, jq, PostgreSQL 15 (postgresql, postgresql-client: pgbench).
# Raw figures: tests/bench/raw/send.tsv and send-move.json; the run's log on stderr.
# Disk: two sparse images in $BENCH_TMP (/var/tmp), about 3x the data directory
# written (the database, and the copy the move makes), removed at the end.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SCALE=190
CHANGE=1
REPS=3
RATE=200
MOVE=1
HOLD=0
while [ $# -gt 0 ]; do
    case $1 in
        --quick) SCALE=20; shift ;;
        --scale) SCALE=$2; shift 2 ;;
        --change) CHANGE=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --no-move) MOVE=0; shift ;;
        --hold) HOLD=1; shift ;;
        *) echo "usage: $0 [--quick] [--scale N] [--change PCT] [--reps N] [--rate TPS] [--no-move] [--hold]" >&2
           exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "send.sh: needs root" >&2; exit 2; }
BIN=${NVMEVOL_BINARY:-$REPO/build/src/nvmevol}
[ -x "$BIN" ] || { echo "send.sh: no $BIN (ninja -C build)" >&2; exit 1; }
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/postgres" ] && command -v pgbench >/dev/null ||
    { echo "send.sh: needs PostgreSQL (apt-get install postgresql postgresql-client)" >&2; exit 1; }
id postgres >/dev/null 2>&1 || { echo "send.sh: no postgres user" >&2; exit 1; }
RAW=$HERE/raw
mkdir -p "$RAW"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
bench_init send
A=$W/a
B=$W/b
PGSOCK=$W/pgsock
PG_PID=
PG_DIR=
log() { bench_log "$@"; }
calc() { awk "BEGIN { print $* }"; }

# ---- PostgreSQL on the host, as the postgres user, on a volume's mount ----

as_pg() { runuser -u postgres -- "$@"; }
psql_q() { psql -h "$PGSOCK" -U postgres -XAtq -c "$1" postgres; }

pg_start() { # DATADIR
    PG_DIR=$1
    # PostgreSQL 15's defaults otherwise (shared_buffers 128MB, max_wal_size 1GB, checkpoint_timeout 5min).
    as_pg "$PGBIN/postgres" -D "$1" -c listen_addresses= -c unix_socket_directories="$PGSOCK" >>"$W/postgres.log" 2>&1 &
    PG_PID=$!
    for _ in $(seq 1 600); do
        pg_isready -q -h "$PGSOCK" -U postgres && return 0
        kill -0 "$PG_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "PostgreSQL did not start: $(tail -5 "$W/postgres.log")"
    return 1
}

pg_stop() { # fast: a checkpoint, then exit
    [ -n "$PG_PID" ] || return 0
    as_pg "$PGBIN/pg_ctl" stop -D "$PG_DIR" -m fast -w -t 300 >>"$W/postgres.log" 2>&1
    wait "$PG_PID" 2>/dev/null
    PG_PID=
}

bench_cleanup_hook() {
    # SEND_BENCH_LOGS=DIR keeps the daemons', PostgreSQL's and the move's logs.
    [ -n "${SEND_BENCH_LOGS:-}" ] && mkdir -p "$SEND_BENCH_LOGS" &&
        for f in "$A/daemon.log" "$B/daemon.log" "$W/postgres.log" "$W/pgbench.log" "$W/move.err"; do
            [ -e "$f" ] && cp "$f" "$SEND_BENCH_LOGS/$(basename "$(dirname "$f")")-$(basename "$f")"
        done
    [ -n "${BENCH_PGBENCH:-}" ] && kill "$BENCH_PGBENCH" 2>/dev/null
    [ -n "$PG_PID" ] && kill -INT "$PG_PID" 2>/dev/null && wait "$PG_PID" 2>/dev/null
}

# What PostgreSQL has written since it started: WAL bytes and data pages (8 KiB).
pg_written() {
    psql_q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
                   + (buffers_checkpoint + buffers_clean + buffers_backend) * 8192 FROM pg_stat_bgwriter"
}

invariant() {
    psql_q "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(bbalance) FROM pgbench_branches)
            || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || (SELECT coalesce(sum(delta), 0) FROM pgbench_history)"
}

# Drops the page-cache pages of every file under DIR (fadvise DONTNEED: only these files, not the machine's).
evict() {
    python3 - "$1" <<'PY'
import os, sys
for root, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        if os.path.islink(p):
            continue
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}

# Extents (FIEMAP, filefrag) of the regular files of a tree: "files extents".
extents() {
    find "$1" -type f -print0 | xargs -0 -r filefrag 2>/dev/null |
        awk -F': ' '{ n++; split($2, a, " "); e += a[1] } END { print n + 0, e + 0 }'
}

# ---- 1. incremental against full ----

mkdir -p "$A" "$B" "$PGSOCK"
chown postgres:postgres "$PGSOCK"
chmod 0755 "$W" "$A" "$B"
est=$((SCALE * 16 << 20))   # the data directory, about 15 MiB per scale unit plus WAL
bench_partition "$W/a.img" $((est * 3 + (4 << 30))) "${PFX}a0" --direct-io=on || exit 1
bench_daemon "$A" "${PFX}a" NVMEVOL_CLONE_FREEZE_BUDGET_MS=60000 || exit 1
PARTS_A=$BENCH_PARTS
log "$(nproc) CPUs, kernel $(uname -r), $("$PGBIN/postgres" --version), load: $(cut -d' ' -f1-3 /proc/loadavg)"

uid=$(id -u postgres)
gid=$(id -g postgres)
bench_api "$A" Create "{\"Name\":\"pg\",\"Opts\":{\"uid\":\"$uid\",\"gid\":\"$gid\",\"mode\":\"0700\"}}" >/dev/null || exit 1
MP=$(bench_api "$A" Mount '{"Name":"pg","ID":"bench"}' | jq -r .Mountpoint) || exit 1
chmod 0755 "$A/prop"
as_pg "$PGBIN/initdb" -D "$MP" -A trust -U postgres -E UTF8 --locale=C >>"$W/postgres.log" 2>&1 ||
    { log "initdb failed: $(tail -5 "$W/postgres.log")"; exit 1; }
pg_start "$MP" || exit 1
t0=$SECONDS
pgbench -h "$PGSOCK" -U postgres -i -q -s "$SCALE" postgres >>"$W/pgbench.log" 2>&1 ||
    { log "pgbench -i failed: $(tail -5 "$W/pgbench.log")"; exit 1; }
psql_q CHECKPOINT >/dev/null
VOLDIR=$PARTS_A/nvmevol/volumes/pg
DATA=$(du -sb "$VOLDIR" | cut -f1)
log "pgbench -i -s $SCALE: $((SECONDS - t0)) s; data directory $DATA bytes ($(find "$VOLDIR" -type f | wc -l) files," \
    "pg_wal $(du -sb "$VOLDIR/pg_wal" | cut -f1) bytes)"

t0=$(date +%s.%N)
bench_admin "$A" volume snapshot pg s1 >/dev/null || exit 1
log "snapshot s1 (PostgreSQL running): $(calc "$(date +%s.%N) - $t0") s"

# pgbench until what PostgreSQL wrote since s1 is CHANGE % of the data directory.
target=$(calc "int($DATA * $CHANGE / 100)")
w0=$(pg_written)
tx=$((target / 32768 / 4 + 1))  # a first guess: about 32 KiB written per transaction
done_tx=0
for round in 1 2 3 4 5 6 7 8; do
    pgbench -h "$PGSOCK" -U postgres -n -c 4 -j 2 -t "$tx" postgres >>"$W/pgbench.log" 2>&1 ||
        { log "pgbench failed: $(tail -5 "$W/pgbench.log")"; exit 1; }
    done_tx=$((done_tx + tx * 4))
    psql_q CHECKPOINT >/dev/null
    written=$(( $(pg_written) - w0 ))
    log "round $round: $done_tx transactions, PostgreSQL wrote $written bytes (target $target)"
    [ "$written" -ge $((target * 95 / 100)) ] && break
    per=$((written / done_tx + 1))
    tx=$(( (target - written) / per / 4 + 1 ))
done
bench_admin "$A" volume snapshot pg s2 >/dev/null || exit 1
S1=$PARTS_A/nvmevol/snapshots/pg/data/s1
S2=$PARTS_A/nvmevol/snapshots/pg/data/s2
cost=$(bench_admin "$A" volume snapshots pg --json |
    jq -r '(if type == "array" then . else .snapshots end)[] | select(.name == "s1") | .cost_bytes')
read -r f1 e1 <<<"$(extents "$S1")"
read -r f2 e2 <<<"$(extents "$S2")"
log "changed: PostgreSQL wrote $written bytes ($(calc "100 * $written / $DATA") % of $DATA);" \
    "s1 no longer shares $cost bytes with the volume; extents: s1 $e1 in $f1 files, s2 $e2 in $f2 files"

out=$RAW/send.tsv
printf 'scale\tmethod\trep\tcache\tseconds\tcpu_seconds\tbytes\tdata_bytes\trecords\n' >"$out"
send_cmd() { # full|incremental
    local from=
    [ "$1" = incremental ] && from="--from s1"
    echo "'$BIN' volume send pg --snapshot $([ "$1" = full ] && echo s1 || echo s2) $from --json \
        --socket '$A/nvmevol-admin.sock' 2>'$W/send.json' | wc -c >'$W/n'"
}
one_send() { # METHOD REP CACHE
    local t
    t=$(bench_timed "$(send_cmd "$1")") || { log "send $1 failed: $(cat "$W/err" "$W/send.json")"; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SCALE" "$1" "$2" "$3" "$t" "$(cat "$W/n")" \
        "$(jq -r .data_bytes "$W/send.json")" "$(jq -r .records "$W/send.json")" | tee -a "$out" >&2
}
# Cold: as a send right after its snapshot reads it (from the loop device, direct I/O to its image).
evict "$S1"; evict "$S2"
one_send full 0 cold
evict "$S1"; evict "$S2"
one_send incremental 0 cold
for rep in $(seq 1 "$REPS"); do
    if ((rep % 2)); then one_send full "$rep" warm; one_send incremental "$rep" warm
    else one_send incremental "$rep" warm; one_send full "$rep" warm; fi
done

if [ "$HOLD" = 1 ]; then
    touch "$W/hold"
    log "holding: daemon A's admin socket $A/nvmevol-admin.sock, PostgreSQL at $PGSOCK; rm $W/hold to go on"
    while [ -e "$W/hold" ]; do sleep 1; done
fi

# ---- 2. a move's downtime ----

if [ "$MOVE" = 1 ]; then
    bench_partition "$W/b.img" $((est * 2 + (4 << 30))) "${PFX}b0" --direct-io=on || exit 1
    bench_daemon "$B" "${PFX}b" NVMEVOL_CLONE_FREEZE_BUDGET_MS=60000 || exit 1
    printf '#!/bin/sh\nshift\nexec %q "$@" --socket %q\n' "$BIN" "$B/nvmevol-admin.sock" >"$W/node-b"
    chmod 0755 "$W/node-b"
    # The service in use while the live passes run: pgbench at a fixed rate.
    pgbench -h "$PGSOCK" -U postgres -n -c 2 -j 1 -R "$RATE" -T 3600 postgres >>"$W/pgbench.log" 2>&1 &
    BENCH_PGBENCH=$!
    w0=$(pg_written)
    t_move=$(date +%s.%N)
    "$BIN" volume move pg --via "$W/node-b" --json --socket "$A/nvmevol-admin.sock" >"$W/move.json" 2>"$W/move.err" &
    move=$!
    while kill -0 "$move" 2>/dev/null && ! grep -q 'is in use' "$W/move.err"; do sleep 0.2; done
    t_wait=$(date +%s.%N)
    kill "$BENCH_PGBENCH" 2>/dev/null
    wait "$BENCH_PGBENCH" 2>/dev/null
    BENCH_PGBENCH=
    live_written=$(( $(pg_written) - w0 ))
    t0=$(date +%s.%N)
    pg_stop
    t_stop=$(calc "$(date +%s.%N) - $t0")
    bench_api "$A" Unmount '{"Name":"pg","ID":"bench"}' >/dev/null || exit 1
    t_unmounted=$(date +%s.%N)
    wait "$move" || { log "volume move failed: $(cat "$W/move.err")"; exit 1; }
    t_end=$(date +%s.%N)
    cp "$W/move.json" "$RAW/send-move.json"
    log "move: live passes for $(calc "$t_wait - $t_move") s while pgbench -R $RATE wrote $live_written bytes;" \
        "PostgreSQL stopped in $t_stop s; from the unmount to the end $(calc "$t_end - $t_unmounted") s"
    jq -r '.passes[] | "# pass \(.kind): \(.bytes) bytes (\(.data_bytes) of file data) in \(.seconds) s"' "$W/move.json" >&2

    # The database on the other node: it starts, and pgbench's invariant holds there.
    MPB=$(bench_api "$B" Mount '{"Name":"pg","ID":"bench"}' | jq -r .Mountpoint) || exit 1
    chmod 0755 "$B/prop"
    pg_start "$MPB" || exit 1
    sums=$(invariant)
    # shellcheck disable=SC2086
    set -- $sums
    if [ $# -eq 4 ] && [ "$1" = "$2" ] && [ "$2" = "$3" ] && [ "$3" = "$4" ]; then
        log "on the other node: PostgreSQL started, pgbench's invariant holds (sum = $1)"
        MOVED_OK=yes
    else
        log "on the other node: pgbench's invariant does NOT hold: $sums"
        MOVED_OK=no
    fi
    pg_stop
    bench_api "$B" Unmount '{"Name":"pg","ID":"bench"}' >/dev/null
fi

# ---- the figures ----

python3 - "$out" "$RAW/send-move.json" "$MOVE" "$SCALE" "$DATA" "$written" "$cost" "$REPS" "${MOVED_OK:-}" \
    "${t_stop:-0}" <<'PY'
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
move, scale, data, written, cost, reps, moved_ok, t_stop = (sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
                                                           sys.argv[7], sys.argv[8], sys.argv[9], float(sys.argv[10]))
print("send benchmark: pgbench scale %s, data directory %d bytes; PostgreSQL wrote %d bytes (%.2f %%) between s1 and s2"
      % (scale, data, written, 100.0 * written / data))
print("%-12s %-5s %9s %9s %14s %14s" % ("send", "cache", "seconds", "cpu s", "stream bytes", "data bytes"))
med = {}
for cache in ("cold", "warm"):
    for m in ("full", "incremental"):
        r = [x for x in rows if x["method"] == m and x["cache"] == cache]
        if not r:
            continue
        s = statistics.median(float(x["seconds"]) for x in r)
        c = statistics.median(float(x["cpu_seconds"]) for x in r)
        med[(m, cache)] = (s, c, int(r[0]["bytes"]))
        print("%-12s %-5s %9.3f %9.3f %14s %14s" % (m, cache, s, c, r[0]["bytes"], r[0]["data_bytes"]))
ok = lambda v, goal: "met" if v <= goal else "MISSED"
f, i = med[("full", "cold")], med[("incremental", "cold")]
print("incremental / full, bytes: %.2f %% (goal <= 3 %%: %s)" % (100.0 * i[2] / f[2], ok(100.0 * i[2] / f[2], 3)))
for cache in ("cold", "warm"):
    if ("full", cache) in med and ("incremental", cache) in med:
        f, i = med[("full", cache)], med[("incremental", cache)]
        print("incremental / full, time (%s%s): %.2f %% (goal <= 10 %%: %s); cpu %.2f %%"
              % (cache, "" if cache == "cold" else ", median of %s" % reps, 100.0 * i[0] / f[0],
                 ok(100.0 * i[0] / f[0], 10), 100.0 * i[1] / f[1] if f[1] else 0))
if move == "1":
    mv = json.load(open(sys.argv[2]))
    passes = mv["passes"]
    full = [p for p in passes if p["kind"] == "full"][0]
    final = [p for p in passes if p["kind"] == "final"][0]
    print("move: %d passes (%s)" % (len(passes), ", ".join("%s %d bytes %.3f s" % (p["kind"], p["bytes"], p["seconds"])
                                                        for p in passes)))
    print("move: downtime (final pass) %.3f s against the full pass %.3f s: %.2f %% (goal <= 5 %%: %s);"
          " PostgreSQL's own stop took %.3f s more" % (mv["downtime_seconds"], full["seconds"],
                                                       100.0 * mv["downtime_seconds"] / full["seconds"],
                                                       ok(100.0 * mv["downtime_seconds"] / full["seconds"], 5), t_stop))
    print("move: the database on the other node: %s" % ("starts, pgbench's invariant holds" if moved_ok == "yes"
                                                        else "FAILED"))
PY
log "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
