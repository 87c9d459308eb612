#!/bin/bash
# A snapshot and an export of a database in use are each one instant:
# PostgreSQL 15 (the debootstrap image of lib.sh) on an nvmevol volume under
# pgbench load; while pgbench writes, `nvmevol volume snapshot pgsrc mid`,
# then `nvmevol volume export pgsrc --snapshot mid` (plain) and
# `nvmevol volume export pgsrc --compress zstd` (its own temporary snapshot,
# a later instant), and `nvmevol volume snapshot pgsrc late` a little after
# mid; then the full stream of mid (`nvmevol volume send`) is received as
# volume pgrecv and the increment mid -> late received into it
# (`nvmevol volume receive`). Each archive is imported as a new volume
# (`nvmevol volume import`); on each import and on pgrecv a PostgreSQL must recover from
# its WAL (crash recovery from one instant), pass pg_amcheck (heap and every
# B-tree index), keep pgbench's invariant (the sums of abalance, bbalance,
# tbalance and history.delta are equal), have every account row, and show
# the middle of the run (history rows between those at the snapshot's start
# and the source's at the end; the later export and the received late at
# least the snapshot's).
#
# Usage: tests/e2e/snapshot-pg.sh   (E2E_WORK, E2E_REGISTRY_ADDR as for run.sh)
# Run by the clone stage of tests/run-all.sh.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${E2E_PART_MB:=3072}"   # the source, its snapshots, two imports, a received copy, their WAL (sparse loop files)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=pg.sh
. "$HERE/pg.sh"

IMAGE=nvmevol-e2e/postgres:15
SCALE=${SNAPSHOT_PG_SCALE:-5}     # pgbench scale: 500,000 accounts, ~80 MB
LOAD_S=${SNAPSHOT_PG_LOAD_S:-18}  # pgbench run; the snapshots and the exports are taken in it

nv() { "$E2E_WORK/bin/nvmevol" "$@" --plugin "$E2E_PLUGIN"; }

# A restored database: recovered from its WAL, amcheck clean, the invariant, every account.
check_restored() { # CONTAINER WHAT
    check_recovered "$1" "$1" "$2"
    e2e_eq "$2 has every account" $((SCALE * 100000)) "$(sql "$1" 'SELECT count(*) FROM pgbench_accounts')"
}

main() {
    e2e_init
    e2e_setup_plugin_env
    e2e_postgres_image "$IMAGE"

    pg_source pgsrc pgsrc "$SCALE"

    # -n: no vacuum, which would truncate pgbench_history and break the sums.
    pg pgsrc pgbench -n -h /var/run/postgresql -T "$LOAD_S" -c 4 -j 2 postgres >"$E2E_WORK/pgbench.out" 2>&1 &
    local bench=$!
    sleep $((LOAD_S / 4))
    local before t0 t1
    before=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    t0=$(date +%s%N)
    e2e_check "nvmevol volume snapshot pgsrc mid while pgbench writes" nv volume snapshot pgsrc mid
    t1=$(date +%s%N)
    e2e_log "the snapshot took $(( (t1 - t0) / 1000000 )) ms with $before history rows at its start"
    # The base of an incremental send and its end, both while pgbench writes; sent below.
    local before_late
    sleep 2
    before_late=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    e2e_check "nvmevol volume snapshot pgsrc late while pgbench writes" nv volume snapshot pgsrc late
    if kill -0 "$bench" 2>/dev/null; then e2e_ok "pgbench was still writing when late was taken"
    else e2e_not_ok "pgbench was still writing when late was taken (raise SNAPSHOT_PG_LOAD_S)"; fi
    e2e_check "nvmevol volume export pgsrc --snapshot mid while pgbench writes" \
        sh -c '"$0" volume export pgsrc --snapshot mid --plugin "$1" >"$2"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/mid.tar"
    local before_live
    before_live=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    e2e_check "nvmevol volume export pgsrc --compress zstd (a temporary snapshot) while pgbench writes" \
        sh -c '"$0" volume export pgsrc --compress zstd --plugin "$1" >"$2"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/live.tar.zst"
    if kill -0 "$bench" 2>/dev/null; then e2e_ok "pgbench was still writing when the exports ended"
    else e2e_not_ok "pgbench was still writing when the exports ended (raise SNAPSHOT_PG_LOAD_S)"; fi
    # The incremental send: the full stream of mid, then the changes up to late.
    e2e_check "nvmevol volume send pgsrc --snapshot mid | nvmevol volume receive pgrecv" \
        sh -c '"$0" volume send pgsrc --snapshot mid --plugin "$1" 2>"$2.err" | "$0" volume receive pgrecv --plugin "$1"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/full.send"
    e2e_check "nvmevol volume send pgsrc --snapshot late --from mid" \
        sh -c '"$0" volume send pgsrc --snapshot late --from mid --plugin "$1" >"$2" 2>"$2.err"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/incr.send"
    e2e_check "nvmevol volume receive pgrecv < the increment" \
        sh -c '"$0" volume receive pgrecv --plugin "$1" <"$2"' "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/incr.send"
    e2e_log "full stream: $(cat "$E2E_WORK/full.send.err"); increment: $(cat "$E2E_WORK/incr.send.err")"
    local late_id
    late_id=$(nv volume snapshots pgsrc --json | jq -r '(if type == "array" then . else .snapshots end)[] | select(.name == "late") | .id')
    e2e_match "the source's snapshot late has an ID" '^[0-9a-f]{32}$' "$late_id"
    e2e_eq "pgrecv's snapshot late is the source's (by ID)" "$late_id" \
        "$(nv volume snapshots pgrecv --json | jq -r '(if type == "array" then . else .snapshots end)[] | select(.name == "late") | .id')"
    if wait "$bench"; then e2e_ok "pgbench kept running through the snapshots and the exports"
    else e2e_not_ok "pgbench kept running through the snapshots and the exports"; e2e_diag "$(tail -5 "$E2E_WORK/pgbench.out")"; fi
    grep -E '^(tps|latency average|number of failed)' "$E2E_WORK/pgbench.out" | sed 's/^/# /'
    e2e_log "archives: mid.tar $(stat -c %s "$E2E_WORK/mid.tar") bytes, live.tar.zst $(stat -c %s "$E2E_WORK/live.tar.zst") bytes"
    e2e_eq "only the snapshots late and mid are left (the export's temporary one is gone)" late,mid \
        "$(nv volume snapshots pgsrc --json | jq -r 'if type == "array" then . else .snapshots end | map(.name // .Name) | sort | join(",")' 2>&1)"

    e2e_check "nvmevol volume import pgmid < mid.tar" sh -c '"$0" volume import pgmid --plugin "$1" <"$2"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/mid.tar"
    e2e_check "nvmevol volume import pglive < live.tar.zst" sh -c '"$0" volume import pglive --plugin "$1" <"$2"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN" "$E2E_WORK/live.tar.zst"
    check_restored pgmid "the import of the snapshot"
    check_restored pglive "the import of the live zstd export"
    check_restored pgrecv "the volume received from the incremental send"
    check_invariant "pgbench's invariant holds on the source" pgsrc

    local m_hist l_hist r_hist s_hist
    m_hist=$(sql pgmid 'SELECT count(*) FROM pgbench_history')
    l_hist=$(sql pglive 'SELECT count(*) FROM pgbench_history')
    r_hist=$(sql pgrecv 'SELECT count(*) FROM pgbench_history')
    s_hist=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    e2e_log "history rows: $before at the snapshot's start, $m_hist in it; $before_live at the live export's start," \
        "$l_hist in it; $before_late at late's start, $r_hist received; $s_hist on the source at the end"
    if [ "$m_hist" -ge "$before" ] 2>/dev/null && [ "$m_hist" -lt "$s_hist" ]; then
        e2e_ok "the snapshot shows the middle of the run ($before <= $m_hist < $s_hist history rows)"
    else e2e_not_ok "the snapshot shows the middle of the run ($before <= $m_hist < $s_hist history rows)"; fi
    if [ "$l_hist" -ge "$before_live" ] 2>/dev/null && [ "$l_hist" -ge "$m_hist" ] && [ "$l_hist" -lt "$s_hist" ]; then
        e2e_ok "the live export is a later instant of the run ($m_hist, $before_live <= $l_hist < $s_hist)"
    else e2e_not_ok "the live export is a later instant of the run ($m_hist, $before_live <= $l_hist < $s_hist)"; fi
    if [ "$r_hist" -ge "$before_late" ] 2>/dev/null && [ "$r_hist" -gt "$m_hist" ] && [ "$r_hist" -lt "$s_hist" ]; then
        e2e_ok "the received volume is late, an instant after mid ($m_hist < $r_hist, $before_late <= $r_hist < $s_hist)"
    else e2e_not_ok "the received volume is late, an instant after mid ($m_hist < $r_hist, $before_late <= $r_hist < $s_hist)"; fi

    docker rm -f pgsrc pgmid pglive pgrecv >/dev/null 2>&1
    e2e_check "the imports are removed" docker volume rm pgmid pglive
    e2e_check "the received volume's snapshots are removed" sh -c \
        '"$0" volume snapshot-rm pgrecv mid --plugin "$1" && "$0" volume snapshot-rm pgrecv late --plugin "$1"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN"
    e2e_check "then the received volume" docker volume rm pgrecv
    e2e_check "the snapshots are removed" sh -c \
        '"$0" volume snapshot-rm pgsrc mid --plugin "$1" && "$0" volume snapshot-rm pgsrc late --plugin "$1"' \
        "$E2E_WORK/bin/nvmevol" "$E2E_PLUGIN"
    e2e_check "then the source" docker volume rm pgsrc
    rm -f "$E2E_WORK/mid.tar" "$E2E_WORK/live.tar.zst" "$E2E_WORK"/*.send "$E2E_WORK"/*.send.err
    e2e_summary
}

main "$@"
