# shellcheck shell=bash
# PostgreSQL in the e2e tests (clone-pg.sh, snapshot-pg.sh): the image of
# lib.sh (e2e_postgres_image), a container on a volume, readiness, and
# pgbench's invariant. Source after lib.sh; IMAGE names the image.

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
