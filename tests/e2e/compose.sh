#!/bin/bash
# Runs examples/postgres/docker-compose.yml for real with Debian's
# docker-compose 1.29 on an image built with debootstrap (PostgreSQL 15):
# up, pgbench -i + pgbench -T 10 over the unix socket, down, up again, and
# checks that the data survived; then down -v removes the volume.
#
# Usage: tests/e2e/compose.sh      (same environment knobs as run.sh)
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

PROJECT=nvmevole2e
VOLUME=${PROJECT}_pgdata
export POSTGRES_IMAGE=nvmevol-e2e/postgres:15
DC=(docker-compose --ansi never -p "$PROJECT" -f "$E2E_REPO/examples/postgres/docker-compose.yml")
PSQL=(docker-compose --ansi never -p "$PROJECT" -f "$E2E_REPO/examples/postgres/docker-compose.yml"
      exec -T -u postgres db)

wait_ready() {
    local i
    for i in $(seq 1 120); do
        "${PSQL[@]}" pg_isready -q -h /var/run/postgresql >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    "${DC[@]}" logs --tail 30 db >&2
    return 1
}

sql() { "${PSQL[@]}" psql -h /var/run/postgresql -XAtq -c "$1" postgres 2>&1; }

main() {
    e2e_init
    e2e_setup_plugin_env
    local t0=$SECONDS
    e2e_postgres_image "$POSTGRES_IMAGE"
    e2e_log "postgres image ready in $((SECONDS - t0)) s (uid:gid of postgres: $(e2e_postgres_uid))"
    # The image's postgres user must match the example's driver_opts, or the
    # ownership checks below would not mean what they say (a fixture check: not counted).
    [ "$(e2e_postgres_uid)" = 999:999 ] || e2e_die "the e2e image's postgres user is $(e2e_postgres_uid), not 999:999"

    # The plugin's uid/gid/mode, read on the partition before PostgreSQL runs:
    # its entrypoint chowns and chmods PGDATA itself, which would hide them.
    e2e_check "docker-compose up --no-start (creates the volume)" "${DC[@]}" up --no-start
    local dir
    dir=$(find_on_partitions "nvmevol/volumes/$VOLUME")
    e2e_eq "the plugin created the volume directory owned 999:999 with mode 0700 (before PostgreSQL ran)" \
        "999:999 700" "$( [ -n "$dir" ] && stat -c '%u:%g %a' "$dir" 2>&1)"

    e2e_check "docker-compose up -d" "${DC[@]}" up -d
    if wait_ready; then e2e_ok "PostgreSQL accepts connections on its unix socket"
    else e2e_not_ok "PostgreSQL accepts connections on its unix socket"; fi

    e2e_eq "the compose volume uses driver nvmevol:latest" nvmevol:latest \
        "$(docker volume inspect -f '{{.Driver}}' "$VOLUME" 2>&1)"
    e2e_eq "the compose volume has the driver_opts" '{"gid":"999","mode":"0700","uid":"999"}' \
        "$(docker volume inspect -f '{{json .Options}}' "$VOLUME" 2>&1)"
    e2e_eq "PGDATA is owned 999:999 with mode 0700" "999:999 700" \
        "$("${PSQL[@]}" stat -c '%u:%g %a' /var/lib/postgresql/data 2>&1)"
    e2e_match "PGDATA is an xfs noatime mount" ' /var/lib/postgresql/data .*noatime.* - xfs ' \
        "$("${PSQL[@]}" grep ' /var/lib/postgresql/data ' /proc/self/mountinfo 2>&1)"
    e2e_eq "shm_size reached the container (/dev/shm is 1 GiB)" 1048576 \
        "$("${PSQL[@]}" df -k /dev/shm 2>&1 | awk 'NR == 2 { print $2 }')"

    local out
    out=$("${PSQL[@]}" pgbench -h /var/run/postgresql -i -s 5 -q postgres 2>&1)
    e2e_match "pgbench -i -s 5" 'done in' "$out"
    out=$("${PSQL[@]}" pgbench -h /var/run/postgresql -T 10 -c 4 -j 2 postgres 2>&1)
    e2e_match "pgbench -T 10 -c 4 -j 2" '^tps = ' "$out"
    grep -E '^(tps|latency average|number of transactions actually processed)' <<<"$out" | sed 's/^/# /'
    sql 'CHECKPOINT' >/dev/null
    local accounts history
    accounts=$(sql 'SELECT count(*) FROM pgbench_accounts')
    history=$(sql 'SELECT count(*) FROM pgbench_history')
    e2e_eq "pgbench_accounts has 500000 rows" 500000 "$accounts"
    e2e_match "pgbench_history has rows from the run" '^[1-9][0-9]*$' "$history"
    e2e_match "the data files are on the XFS partition (nvmevol/volumes/$VOLUME/PG_VERSION)" . \
        "$(find_on_partitions "nvmevol/volumes/$VOLUME/PG_VERSION")"

    e2e_check "docker-compose down" "${DC[@]}" down
    e2e_check "the volume survives docker-compose down" docker volume inspect "$VOLUME"
    e2e_check "docker-compose up -d again" "${DC[@]}" up -d
    wait_ready
    e2e_eq "after down/up: pgbench_accounts row count kept" "$accounts" \
        "$(sql 'SELECT count(*) FROM pgbench_accounts')"
    e2e_eq "after down/up: pgbench_history row count kept" "$history" \
        "$(sql 'SELECT count(*) FROM pgbench_history')"

    e2e_check "docker-compose down -v" "${DC[@]}" down -v
    e2e_check_fails "the volume is gone after down -v" docker volume inspect "$VOLUME"
    e2e_eq "its directory is gone from the partition" "" \
        "$(find_on_partitions "nvmevol/volumes/$VOLUME")"
    e2e_summary
}

main "$@"
