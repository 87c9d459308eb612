#!/bin/bash
# A database cloned while it runs: PostgreSQL 15 (the debootstrap image of
# lib.sh) on an nvmevol volume under pgbench load, cloned mid-run with
# `docker volume create -d nvmevol:latest -o from=pgsrc pgclone`. A second
# PostgreSQL on the clone must recover from its WAL, pass pg_amcheck (heap
# and every B-tree index), and keep pgbench's invariant: the sums of
# abalance, bbalance, tbalance and history.delta are equal. Then both
# databases are written independently; the plugin is killed while a
# partition is frozen (Docker restarts it, its start-up thaws); and a clone of
# the stopped database starts without recovery.
#
# Usage: tests/e2e/clone-pg.sh   (E2E_WORK, E2E_REGISTRY_ADDR as for run.sh)
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${E2E_PART_MB:=3072}"   # three databases and their WAL (sparse loop files); before lib.sh
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=pg.sh
. "$HERE/pg.sh"

IMAGE=nvmevol-e2e/postgres:15
SCALE=${CLONE_PG_SCALE:-5}      # pgbench scale: 500,000 accounts, ~80 MB
LOAD_S=${CLONE_PG_LOAD_S:-12}   # pgbench run; the clone is taken in its middle

main() {
    e2e_init
    e2e_setup_plugin_env
    e2e_postgres_image "$IMAGE"

    pg_source pgsrc pgsrc "$SCALE"
    local out

    # Load in the background; the clone is taken while it runs.
    pg pgsrc pgbench -h /var/run/postgresql -T "$LOAD_S" -c 4 -j 2 postgres >"$E2E_WORK/pgbench.out" 2>&1 &
    local bench=$!
    sleep $((LOAD_S / 2))
    local before t0 t1
    before=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    t0=$(date +%s%N)
    e2e_check "docker volume create -o from=pgsrc pgclone while pgbench writes" \
        docker volume create -d "$E2E_PLUGIN" -o from=pgsrc pgclone
    t1=$(date +%s%N)
    e2e_log "clone took $(( (t1 - t0) / 1000000 )) ms (docker CLI to reply) with $before history rows at the start"
    if wait "$bench"; then e2e_ok "pgbench kept running through the clone"
    else e2e_not_ok "pgbench kept running through the clone"; e2e_diag "$(tail -5 "$E2E_WORK/pgbench.out")"; fi
    grep -E '^(tps|latency average|number of failed)' "$E2E_WORK/pgbench.out" | sed 's/^/# /'

    local status
    status=$(docker volume inspect -f '{{json .Status}}' pgclone 2>&1)
    e2e_eq "Status says cloned_from pgsrc" pgsrc "$(jq -r '.cloned_from' <<<"$status")"
    e2e_eq "Status says the source was in use (frozen for consistency)" true \
        "$(jq -r '.clone.source_in_use' <<<"$status")"
    e2e_match "Status has cloned_at" '^20[0-9-]+T[0-9:]+Z$' "$(jq -r '.cloned_at' <<<"$status")"
    e2e_log "clone Status: $(jq -c '.clone' <<<"$status")"
    e2e_eq "the clone keeps the source's owner and mode" "999:999 0700" \
        "$(jq -r '.owner + " " + .mode' <<<"$status")"

    # The second PostgreSQL: crash recovery from the clone's WAL.
    check_recovered pgclone pgclone "the clone"
    check_invariant "pgbench's invariant holds on the source" pgsrc

    local c_hist s_hist
    c_hist=$(sql pgclone 'SELECT count(*) FROM pgbench_history')
    s_hist=$(sql pgsrc 'SELECT count(*) FROM pgbench_history')
    e2e_log "history rows: $before when the clone started, $c_hist on the clone, $s_hist on the source at the end"
    if [ "$c_hist" -ge "$before" ] 2>/dev/null && [ "$c_hist" -lt "$s_hist" ]; then
        e2e_ok "the clone shows the middle of the run ($before <= $c_hist < $s_hist history rows)"
    else
        e2e_not_ok "the clone shows the middle of the run ($before <= $c_hist < $s_hist history rows)"
    fi

    # Written independently: the clone's transactions never reach the source.
    # (-n: no vacuum, which would truncate pgbench_history and break the sums.)
    out=$(pg pgclone pgbench -n -h /var/run/postgresql -T 3 -c 2 postgres 2>&1)
    e2e_match "pgbench on the clone" '^tps = ' "$out"
    e2e_eq "the source did not see the clone's transactions" "$s_hist" \
        "$(sql pgsrc 'SELECT count(*) FROM pgbench_history')"
    check_invariant "the invariant still holds on the clone after its own load" pgclone

    # The plugin dies while a partition is frozen (as it could inside a clone's freeze): it is PID 1
    # of its namespace, so no guardian outlives it. Docker restarts it, and its start-up thaws the
    # partition before anything else; the database that waited goes on. The freeze is made here
    # as the plugin makes its own: its marker (this boot's ID) in the state directory first, since
    # start-up thaws only what a marker says nvmevol froze (an admin's own fsfreeze stays).
    local root pid newpid i r uuid
    root=$(find_on_partitions nvmevol/volumes/pgclone)
    root=${root%/nvmevol/volumes/pgclone}
    uuid=${root##*/}   # partition_roots: .../partitions/<uuid> inside the plugin
    pid=$(e2e_plugin_pid)
    sql pgclone 'CREATE TABLE IF NOT EXISTS after_thaw (x int)' >/dev/null
    # The plugin's state is the state.source the e2e install set ($E2E_STATE_DIR on the host).
    mkdir -p "$E2E_STATE_DIR/freeze"
    printf 'boot %s\npid %s\n' "$(cat /proc/sys/kernel/random/boot_id)" "$pid" >"$E2E_STATE_DIR/freeze/$uuid"
    fsfreeze --freeze "$root"
    pg pgclone psql -h /var/run/postgresql -XAtq -c 'INSERT INTO after_thaw VALUES (1); CHECKPOINT' postgres \
        >"$E2E_WORK/insert.out" 2>&1 &
    local writer=$!
    sleep 2
    if kill -0 "$writer" 2>/dev/null; then e2e_ok "a write on the frozen partition waits"
    else e2e_not_ok "a write on the frozen partition waits"; fi
    local logline
    logline=$(wc -l <"$E2E_DOCKERD_LOG")   # the log outlives runs: look only at what follows
    kill -KILL "$pid"
    for i in $(seq 1 120); do
        newpid=$(e2e_plugin_pid)
        [ -n "$newpid" ] && [ "$newpid" != "$pid" ] && break
        sleep 0.25
    done
    e2e_log "plugin $pid killed; Docker started it again as $newpid after about $((i / 4)) s"
    for i in $(seq 1 120); do
        kill -0 "$writer" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$writer" 2>/dev/null; then
        e2e_not_ok "after the plugin's restart the write went through (still waiting after 30 s)"
        for r in $(partition_roots); do fsfreeze --unfreeze "$r" 2>/dev/null; done
        wait "$writer"
    elif wait "$writer"; then e2e_ok "after the plugin's restart the write went through"
    else e2e_not_ok "after the plugin's restart the write went through"; e2e_diag "$(cat "$E2E_WORK/insert.out")"; fi
    e2e_match "its start-up thawed the partition (plugin log)" 'was frozen .*thawed' \
        "$(tail -n +"$((logline + 1))" "$E2E_DOCKERD_LOG")"
    e2e_eq "the row is there" 1 "$(sql pgclone 'SELECT count(*) FROM after_thaw')"

    # A clone of the stopped database needs no recovery.
    e2e_check "docker stop pgsrc" docker stop -t 30 pgsrc
    e2e_check "clone the stopped database" docker volume create -d "$E2E_PLUGIN" -o from=pgsrc pgcold
    e2e_eq "it was not in use (it is frozen all the same: the plugin cannot see every bind)" false \
        "$(docker volume inspect -f '{{json .Status}}' pgcold | jq -r '.clone.source_in_use')"
    start_pg pgcold pgcold
    wait_ready pgcold
    e2e_no_match "PostgreSQL on the cold clone starts without recovery" 'automatic recovery in progress' \
        "$(docker logs pgcold 2>&1)"
    e2e_eq "and has the source's final history" "$s_hist" "$(sql pgcold 'SELECT count(*) FROM pgbench_history')"

    docker rm -f pgsrc pgclone pgcold >/dev/null 2>&1
    e2e_check "the clones are removed" docker volume rm pgclone pgcold
    e2e_check "then the source" docker volume rm pgsrc
    e2e_summary
}

main "$@"
