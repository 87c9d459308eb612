# shellcheck shell=bash
# PostgreSQL in the e2e tests (clone-pg.sh, snapshot-pg.sh): the image of
# lib.sh (e2e_postgres_image), a container on a volume, readiness, a source
# database with pgbench's tables, the checks of a copy taken while it ran,
# and pgbench's invariant. Source after lib.sh; IMAGE names the image.

pg() { docker exec -u postgres "$@"; }
sql() { pg "$1" psql -h /var/run/postgresql -XAtq -c "$2" postgres 2>&1; }

wait_ready() { # CONTAINER
    local i
    for i in $(seq 1 240); do
        pg "$1" pg_isready -q -h /var/run/postgresql >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    docker logs --tail 30 "$1" >&2
    return 1
}

start_pg() { # CONTAINER VOLUME
    docker run -d --name "$1" --network none --shm-size 256m \
        -v "$2":/var/lib/postgresql/data "$IMAGE" \
        postgres -c max_wal_size=1GB -c checkpoint_timeout=30s >/dev/null
}

# The pgbench invariant: every transaction adds the same delta to one
# account, teller, branch and a history row.
invariant() { # CONTAINER
    sql "$1" "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' ||
                     (SELECT sum(bbalance) FROM pgbench_branches) || ' ' ||
                     (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' ||
                     (SELECT coalesce(sum(delta), 0) FROM pgbench_history)"
}

check_invariant() { # DESCRIPTION CONTAINER
    local sums
    sums=$(invariant "$2")
    # shellcheck disable=SC2086
    set -- "$1" "$2" $sums
    if [ $# -eq 6 ] && [ "$3" = "$4" ] && [ "$4" = "$5" ] && [ "$5" = "$6" ]; then
        e2e_ok "$1 (sum = $3)"
    else
        e2e_not_ok "$1"
        e2e_diag "sums of abalance, bbalance, tbalance, history.delta: $sums"
    fi
}

# The source database: volume VOLUME (999:999, 0700), PostgreSQL in container CONTAINER, pgbench's tables.
pg_source() { # CONTAINER VOLUME SCALE
    local out
    e2e_check "create the source volume (999:999, 0700)" \
        docker volume create -d "$E2E_PLUGIN" -o uid=999 -o gid=999 -o mode=0700 "$2"
    start_pg "$1" "$2"
    if wait_ready "$1"; then e2e_ok "PostgreSQL runs on the source volume"
    else e2e_not_ok "PostgreSQL runs on the source volume"; fi
    out=$(pg "$1" pgbench -h /var/run/postgresql -i -s "$3" -q postgres 2>&1)
    e2e_match "pgbench -i -s $3" 'done in' "$out"
}

# A copy of a database taken while it ran (a clone, an imported snapshot, a received stream), started in
# CONTAINER on VOLUME: it recovers from its WAL (one instant, crash-consistent), pg_amcheck finds nothing
# in the heap or any B-tree index, and pgbench's invariant holds.
check_recovered() { # CONTAINER VOLUME WHAT
    local logs out
    start_pg "$1" "$2"
    if wait_ready "$1"; then e2e_ok "PostgreSQL starts on $3"
    else e2e_not_ok "PostgreSQL starts on $3"; fi
    logs=$(docker logs "$1" 2>&1)
    e2e_match "it recovered from the WAL of $3 (crash-consistent: one instant)" \
        'not properly shut down; automatic recovery in progress' "$logs"
    e2e_match "recovery of $3 finished" 'redo done at|database system is ready to accept connections' "$logs"
    grep -E 'redo (starts|done)|ready to accept' <<<"$logs" | sed 's/^/# /'
    out=$(pg "$1" pg_amcheck -h /var/run/postgresql --install-missing --heapallindexed --rootdescend postgres 2>&1)
    if [ $? -eq 0 ]; then e2e_ok "pg_amcheck --heapallindexed --rootdescend finds nothing on $3"
    else e2e_not_ok "pg_amcheck on $3"; e2e_diag "$out"; fi
    check_invariant "pgbench's invariant holds on $3" "$1"
}
