#!/bin/bash
# nvmevol on a real three-node Docker Swarm on one machine (tests/swarm/lib.sh):
# the plugin installed on every node from the test's registry, services with
# nvmevol volumes checked on the node where they ran, a stack file, the
# wrong-node trap (Docker's behaviour) and nvmevol's guard against it, a
# worker's dockerd killed with -9, a plugin upgrade rolled across the nodes
# under a running service, and PostgreSQL under pgbench moved to another
# worker with `nvmevol volume move`.  All the while a sampler checks that no
# partition is ever mounted by another node's plugin.
#
# Usage: tests/swarm/run.sh [--list] [scenario...]
#   With no scenario, runs them all in order (later ones may rely on earlier
#   ones: install first).
# Environment: E2E_PLUGIN_BINARY, E2E_KEEP=1, E2E_VERBOSE=1 as in tests/e2e;
#   SWARM_WORK (default /var/lib/nvmevol-swarm), SWARM_NET (default 10.231.77,
#   a /24 nothing else uses), SWARM_REGISTRY_PORT (default 5012).
# Prints "ok - ..." / "not ok - ..." lines, the wall time and
# "N passed, N failed"; exits non-zero when anything failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

SCENARIOS=(install replicated global upgrade stack trap guard move pgmove node_failure)

M1=nvsw-m1 W1=nvsw-w1 W2=nvsw-w2
IMG=$SWARM_REGISTRY/nvmevol-swarm/busybox:latest
CACHE_IMG=$SWARM_REGISTRY/nvmevol-swarm/redis-standin:latest
PG_IMG=$SWARM_REGISTRY/nvmevol-swarm/postgres:15
DRIVER=$E2E_PLUGIN
STACK=nvst
# Every test service: no image lookup anywhere but our registry, a quick stop
# (sleep as PID 1 ignores SIGTERM), a quick retry after a failure.
SVC=(docker service create -q -d --no-resolve-image --stop-grace-period 1s --restart-delay 1s)

# Figures for tests/README.md (the swarm stage).
N_SERVICES=0
N_FAILURES=0
N_LOST=0

# ------------------------------------------------------------------ helpers

svc() { N_SERVICES=$((N_SERVICES + 1)); mgr "${SVC[@]}" "$@" >/dev/null; }

# wait_task SERVICE [NODE]: until a task of SERVICE runs (on NODE); prints its node.
wait_task() {
    local i line
    for i in $(seq 1 180); do
        line=$(mgr docker service ps "$1" --filter desired-state=running \
                   --format '{{.Node}} {{.CurrentState}}' 2>/dev/null | grep ' Running' |
               grep "^${2:-}" | head -n1)
        if [ -n "$line" ]; then
            echo "${line%% *}"
            return 0
        fi
        sleep 0.5
    done
    mgr docker service ps --no-trunc "$1" >&2
    return 1
}

# wait_tasks SERVICE COUNT: until COUNT tasks of SERVICE run.
wait_tasks() {
    local i
    for i in $(seq 1 180); do
        [ "$(mgr docker service ps "$1" --filter desired-state=running --format '{{.CurrentState}}' |
             grep -c '^Running')" -ge "$2" ] && return 0
        sleep 0.5
    done
    mgr docker service ps --no-trunc "$1" >&2
    return 1
}

# container NODE SERVICE: the running container of SERVICE on NODE.
container() {
    local i c
    for i in $(seq 1 40); do
        c=$(on "$1" docker ps -q --filter "label=com.docker.swarm.service.name=$2" | head -n1)
        [ -n "$c" ] && { echo "$c"; return 0; }
        sleep 0.25
    done
    return 1
}

# new_container NODE SERVICE OLD: wait for a running container of SERVICE on
# NODE other than OLD; prints it.
new_container() {
    local i c
    for i in $(seq 1 120); do
        c=$(on "$1" docker ps -q --filter "label=com.docker.swarm.service.name=$2" | grep -v "^$3\$" | head -n1)
        [ -n "$c" ] && { echo "$c"; return 0; }
        sleep 0.5
    done
    return 1
}

# svc_exec NODE SERVICE COMMAND...: run COMMAND in SERVICE's container on NODE.
svc_exec() {
    local n=$1 s=$2 c
    shift 2
    c=$(container "$n" "$s") || { echo "no container of $s on $n"; return 1; }
    on "$n" docker exec "$c" "$@" 2>&1
}

# rm_service SERVICE: remove it and wait until its containers are gone on every node.
rm_service() {
    local n i
    mgr docker service rm "$1" >/dev/null 2>&1
    for n in "${SWARM_NODES[@]}"; do
        for i in $(seq 1 60); do
            [ -z "$(on "$n" docker ps -aq --filter "label=com.docker.swarm.service.name=$1")" ] && break
            sleep 0.25
        done
    done
}

# rejected_on NODE SERVICE TRIES [STATES]: the first task of SERVICE in one of STATES (an ERE, default Rejected)
# on NODE ("NODE Rejected ... Err"),
# looked for every 0.5 s; empty if none.
rejected_on() {
    local i out states=${4:-Rejected}
    for i in $(seq 1 "$3"); do
        out=$(mgr docker service ps --no-trunc --format '{{.Node}} {{.CurrentState}} {{.Error}}' "$2" |
              grep -E "^$1 ($states)" | head -n1)
        [ -n "$out" ] && break
        sleep 0.5
    done
    echo "$out"
}

# vstatus NODE VOLUME KEY: a field of the plugin's Status on NODE.
vstatus() { on "$1" docker volume inspect -f '{{json .Status}}' "$2" 2>/dev/null | jq -r ".$3"; }

# holders RELPATH: the nodes whose own partitions hold nvmevol/volumes/RELPATH.
holders() {
    local n out=()
    for n in "${SWARM_NODES[@]}"; do
        [ -n "$(in_node "$n" find_on_partitions "nvmevol/volumes/$1")" ] && out+=("$n")
    done
    echo "${out[*]}"
}

# on_partition NODE RELPATH: contents of nvmevol/volumes/RELPATH on NODE's partitions.
on_partition() {
    local f
    f=$(in_node "$1" find_on_partitions "nvmevol/volumes/$2" | head -n1)
    [ -n "$f" ] && cat "$f"
}

volumes_of() { on "$1" docker volume ls -q --filter "driver=$DRIVER" | sort | tr '\n' ' ' | sed 's/ $//'; }

set_availability() { mgr docker node update --availability "$2" "$1" >/dev/null; }

# ---------------------------------------------- partitions: one node's only

# MAJ:MIN of each node's loop devices.
declare -A NODE_DEVNUMS
partition_devnums() {
    local n d
    for n in "${SWARM_NODES[@]}"; do
        NODE_DEVNUMS[$n]=""
        for d in ${SWARM_LOOPS[$n]}; do
            NODE_DEVNUMS[$n]+=" $(lsblk -dno MAJ:MIN "$d" | tr -d ' ')"
        done
    done
}

# partition_violations: one line for each XFS mount that some node's plugin
# holds of a partition that is not that node's, and for each volume bind under
# a node's propagated mount that comes from another node's partition.  Reads
# runc's state files and mountinfo only (no docker call: it runs as a sampler).
partition_violations() {
    local n st pid mine dev mp
    for n in "${SWARM_NODES[@]}"; do
        mine=" ${NODE_DEVNUMS[$n]} "
        for st in "$(swarm_node_dir "$n")"/exec/runtime-runc/plugins.moby/*/state.json; do
            [ -f "$st" ] || continue
            pid=$(jq -r .init_process_pid "$st" 2>/dev/null)
            [ -r "/proc/$pid/mountinfo" ] || continue
            while read -r dev mp; do
                case $mine in *" $dev "*) ;; *) echo "$n's plugin (pid $pid) has $dev mounted at $mp" ;; esac
            done < <(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "xfs") print $3, $5; break } }' \
                         "/proc/$pid/mountinfo" 2>/dev/null)
        done
        while read -r dev mp; do
            case $mine in *" $dev "*) ;; *) echo "host: $mp (a volume of $n) is on $dev" ;; esac
        done < <(awk -v p="$(swarm_node_dir "$n")/data-root/plugins/" \
                     'index($5, p) == 1 && $5 ~ /\/propagated-mount\/./ { print $3, $5 }' /proc/self/mountinfo)
    done
}

SAMPLER_PID=
SAMPLES=$SWARM_WORK/partition-samples
sampler_start() {
    partition_devnums
    : >"$SAMPLES"
    ( while :; do
          v=$(partition_violations)
          printf '%s\n' "sample${v:+ $v}" >>"$SAMPLES"
          sleep 0.5
      done ) &
    SAMPLER_PID=$!
}

sampler_stop() {
    [ -n "$SAMPLER_PID" ] || return 0
    kill "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID" 2>/dev/null
    SAMPLER_PID=
}

# check_partitions DESC: no partition of one node mounted by another node's plugin, now.
check_partitions() {
    local v
    v=$(partition_violations)
    if [ -z "$v" ]; then
        e2e_ok "$1: every node's plugin mounts only its own partitions, every volume bind is on its node's partition"
    else
        e2e_not_ok "$1: every node's plugin mounts only its own partitions"
        e2e_diag "$v"
    fi
}

# -------------------------------------------------------------------- setup

setup() {
    local t0=$SECONDS ref n
    swarm_init
    trap 'sampler_stop; swarm_cleanup' EXIT
    swarm_net_up
    e2e_start_registry
    for n in "${SWARM_NODES[@]}"; do
        swarm_start_node "$n"
    done
    swarm_form
    swarm_make_partitions
    e2e_log "swarm of ${#SWARM_NODES[@]} nodes up in $((SECONDS - t0)) s"
    e2e_build_plugin
    # Build once, push once, install on every node from the registry.
    swarm_use "$M1"
    ref=$(e2e_push_plugin_variant v1 "$SWARM_REGISTRY") || e2e_die "cannot push the plugin to $SWARM_REGISTRY"
    PLUGIN_REF=$ref
    for n in "${SWARM_NODES[@]}"; do
        swarm_install_plugin "$n" "$ref" || e2e_die "docker plugin install $ref on $n failed"
    done
    e2e_busybox_image "$IMG"
    e2e_busybox_image "$CACHE_IMG" "$HERE/redis-server-standin=usr/bin/redis-server"
    docker push -q "$IMG" >/dev/null && docker push -q "$CACHE_IMG" >/dev/null ||
        e2e_die "docker push to $SWARM_REGISTRY failed"
    # Only the database's node needs PostgreSQL: import it there and push it
    # to our registry (so that the task's pull finds it there).
    in_node "$W2" e2e_postgres_image "$PG_IMG"
    on "$W2" docker push -q "$PG_IMG" >/dev/null || e2e_die "docker push $PG_IMG failed"
    e2e_log "plugin $ref installed on every node, images pushed, at $((SECONDS - t0)) s"
    # The scheduler places a task that needs a volume plugin only on nodes
    # that report it, and a node refreshes its report periodically (~20 s).
    local i ready
    for i in $(seq 1 90); do
        ready=0
        for n in "${SWARM_NODES[@]}"; do
            mgr docker node inspect -f '{{json .Description.Engine.Plugins}}' "$n" |
                grep -qF "{\"Type\":\"Volume\",\"Name\":\"$DRIVER\"}" && ready=$((ready + 1))
        done
        [ "$ready" = "${#SWARM_NODES[@]}" ] && break
        sleep 0.5
    done
    e2e_log "every node reports the plugin to the managers at $((SECONDS - t0)) s"
    sampler_start
}

# ---------------------------------------------------------------- scenarios

scenario_install() {
    local n pid
    for n in "${SWARM_NODES[@]}"; do
        e2e_eq "$n: plugin installed from the registry ($PLUGIN_REF) as $DRIVER, enabled" "$PLUGIN_REF true" \
            "$(on "$n" docker plugin inspect -f '{{.PluginReference}} {{.Enabled}}' "$DRIVER" 2>&1)"
        e2e_match "$n: the plugin has its own label prefix ${SWARM_PREFIX[$n]}" \
            "NVMEVOL_LABEL_PREFIX=${SWARM_PREFIX[$n]} " \
            "$(on "$n" docker plugin inspect -f '{{range .Settings.Env}}{{.}} {{end}}' "$DRIVER" 2>&1)"
        e2e_match "$n: the node reports the volume plugin to the managers" '"Type":"Volume","Name":"nvmevol:latest"' \
            "$(mgr docker node inspect -f '{{json .Description.Engine.Plugins}}' "$n" 2>&1)"
        # The guard's node identity: the managed plugin runs in its own UTS
        # namespace, a copy of its dockerd's (runc sets no hostname for plugins).
        pid=$(swarm_plugin_pid "$n")
        e2e_eq "$n: the plugin process sees the host name that swarm shows (node.hostname)" \
            "$(mgr docker node inspect -f '{{.Description.Hostname}}' "$n") $n" \
            "$(nsenter -t "$pid" -u hostname 2>&1) $(on "$n" docker info -f '{{.Name}}')"
        e2e_eq "$n: no route beyond the test bridge" "" "$(ip -n "$n" route show default)"
    done
    check_partitions "after install"
}

scenario_replicated() {
    local node c1 c2 out
    svc --name sw-one --constraint "node.hostname==$W1" --user 999:999 \
        --mount "type=volume,source=sw-one,target=/d,volume-driver=$DRIVER,volume-opt=uid=999,volume-opt=gid=999,volume-opt=mode=0700" \
        "$IMG" sh -c 'echo start >>/d/starts && exec sleep 86400'
    node=$(wait_task sw-one)
    e2e_eq "service create --mount ...,volume-driver=$DRIVER,volume-opt=...: the task runs on $W1" "$W1" "$node"
    e2e_eq "the volume exists on $W1 only" "sw-one||" \
        "$(volumes_of "$W1" | grep -ow sw-one)|$(volumes_of "$M1" | grep -ow sw-one)|$(volumes_of "$W2" | grep -ow sw-one)"
    e2e_eq "it was created with the service's volume-opts" '{"gid":"999","mode":"0700","uid":"999"}' \
        "$(on "$W1" docker volume inspect -f '{{json .Options}}' sw-one 2>&1)"
    e2e_eq "its directory on $W1's partition is 999:999 mode 0700" "999:999 700" \
        "$(in_node "$W1" find_on_partitions nvmevol/volumes/sw-one | xargs -r stat -c '%u:%g %a')"
    out=$(svc_exec "$W1" sw-one sh -c 'echo payload-one >/d/data && cat /d/data')
    e2e_eq "the task writes its volume as uid 999" payload-one "$out"
    e2e_eq "the data is on $W1's partition and on no other node's" "$W1" "$(holders sw-one/data)"
    c1=$(container "$W1" sw-one)
    e2e_check "docker service update --force sw-one" mgr docker service update -q -d --force sw-one
    c2=$(new_container "$W1" sw-one "$c1")
    e2e_match "update --force: a new container on $W1" "^[0-9a-f]+$" "$c2"
    # the old one is gone before the new one starts (stop-first)
    sleep 1
    e2e_eq "update --force: the new task reads the data and its second start was recorded" \
        "payload-one start start" "$(svc_exec "$W1" sw-one sh -c 'cat /d/data /d/starts' | tr '\n' ' ' | sed 's/ $//')"
    e2e_eq "the plugin counts one mount of sw-one (one running task)" "1 mounted" \
        "$(vstatus "$W1" sw-one mount_count) $(vstatus "$W1" sw-one state)"
    rm_service sw-one
    e2e_eq "service rm: sw-one is no longer mounted, its data stays on $W1" "0 ready payload-one" \
        "$(vstatus "$W1" sw-one mount_count) $(vstatus "$W1" sw-one state) $(on_partition "$W1" sw-one/data)"
    check_partitions "after the replicated service"
}

scenario_global() {
    local n
    svc --name sw-cache --mode global --hostname '{{.Node.Hostname}}' \
        --mount "type=volume,source=sw-cache,target=/d,volume-driver=$DRIVER,volume-opt=mode=0750" \
        "$IMG" sh -c 'hostname >/d/who && exec sleep 86400'
    if wait_tasks sw-cache "${#SWARM_NODES[@]}"; then
        e2e_ok "global service: a task runs on each of the ${#SWARM_NODES[@]} nodes"
    else
        e2e_not_ok "global service: a task runs on each of the ${#SWARM_NODES[@]} nodes"
    fi
    for n in "${SWARM_NODES[@]}"; do
        e2e_match "$n: docker volume ls shows its own sw-cache" '(^| )sw-cache( |$)' "$(volumes_of "$n")"
        e2e_eq "$n: its partition's sw-cache holds what its own task wrote" "$n" "$(on_partition "$n" sw-cache/who)"
    done
    e2e_eq "three volumes of one name, each on its own node's partition" "${SWARM_NODES[*]}" "$(holders sw-cache/who)"
    check_partitions "after the global service"
}

# The global service keeps running while each node in turn upgrades its
# plugin (disable -f, upgrade from the registry, enable: plugin/install.sh
# --upgrade).
scenario_upgrade() {
    local ref n c before after
    swarm_use "$M1"
    ref=$(e2e_push_plugin_variant v2 "$SWARM_REGISTRY") || { e2e_not_ok "push of the upgrade"; return; }
    for n in "${SWARM_NODES[@]}"; do
        c=$(container "$n" sw-cache)
        before=$(volumes_of "$n")
        e2e_check "$n: plugin/install.sh --upgrade $ref with the sw-cache task running" \
            env "DOCKER_HOST=unix://$(swarm_node_dir "$n")/docker.sock" \
            "$E2E_REPO/plugin/install.sh" --name "$DRIVER" --upgrade "$ref"
        e2e_eq "$n: the plugin is $ref, with its own label prefix and state directory" \
            "$ref NVMEVOL_LABEL_PREFIX=${SWARM_PREFIX[$n]} $(swarm_node_dir "$n")/state" \
            "$(on "$n" docker plugin inspect -f '{{.PluginReference}}' "$DRIVER") $(on "$n" docker plugin inspect -f '{{range .Settings.Env}}{{.}} {{end}}' "$DRIVER" | grep -o 'NVMEVOL_LABEL_PREFIX=[^ ]*') $(awk '$5 == "/var/lib/nvmevol" { print $4 }' "/proc/$(swarm_plugin_pid "$n")/mountinfo")"
        after=$(volumes_of "$n")
        e2e_eq "$n: the same volumes after the upgrade ($before)" "$before" "$after"
        [ "$before" = "$after" ] || N_LOST=$((N_LOST + 1))
        e2e_eq "$n: the task's container kept running through the upgrade" "$c" "$(container "$n" sw-cache)"
        e2e_eq "$n: it still reads and writes its volume" "$n upgraded" \
            "$(svc_exec "$n" sw-cache sh -c 'echo upgraded >/d/after && cat /d/who /d/after' | tr '\n' ' ' | sed 's/ $//')"
        # Docker's own reference count still protects the volume.
        e2e_check_fails "$n: docker volume rm sw-cache is refused while the task runs" \
            on "$n" docker volume rm sw-cache
        # disable -f made Docker unmount the plugin's binds (the container
        # keeps its own mount); the new plugin found no bind and reset the
        # count: Status says 0 until the next Mount (nvmevol-plugin(7), KNOWN LIMITATIONS).
        e2e_diag "$n: after the upgrade the plugin counts $(vstatus "$n" sw-cache mount_count) mount(s) of sw-cache, state $(vstatus "$n" sw-cache state)"
    done
    check_partitions "after the rolling upgrade"
    declare -A old
    for n in "${SWARM_NODES[@]}"; do
        old[$n]=$(container "$n" sw-cache)
    done
    e2e_check "service update --force sw-cache: new tasks on the upgraded plugins" \
        mgr docker service update -q -d --force sw-cache
    for n in "${SWARM_NODES[@]}"; do
        new_container "$n" sw-cache "${old[$n]}" >/dev/null
        e2e_eq "$n: the new task counts 1 mount, reads its data" "1 mounted $n upgraded" \
            "$(vstatus "$n" sw-cache mount_count) $(vstatus "$n" sw-cache state) $(svc_exec "$n" sw-cache sh -c 'cat /d/who /d/after' | tr '\n' ' ' | sed 's/ $//')"
    done
    rm_service sw-cache
    for n in "${SWARM_NODES[@]}"; do
        e2e_eq "$n: sw-cache unmounted after service rm" "0" "$(vstatus "$n" sw-cache mount_count)"
    done
}

scenario_stack() {
    local node out n i
    mgr docker node update --label-add nvmevol.db=true "$W2" >/dev/null
    N_SERVICES=$((N_SERVICES + 2))
    e2e_check "docker stack deploy -c examples/swarm/docker-compose.yml (DB_NODE=$W2)" \
        env DB_NODE="$W2" POSTGRES_PASSWORD=swarm-test POSTGRES_IMAGE="$PG_IMG" CACHE_IMAGE="$CACHE_IMG" \
        DOCKER_HOST="unix://$(swarm_node_dir "$M1")/docker.sock" \
        docker stack deploy --resolve-image never -c "$E2E_REPO/examples/swarm/docker-compose.yml" "$STACK"
    node=$(wait_task "${STACK}_db")
    e2e_eq "the database runs on the labelled node" "$W2" "$node"
    for i in $(seq 1 60); do
        svc_exec "$W2" "${STACK}_db" pg_isready -q -h /var/run/postgresql >/dev/null && break
        sleep 0.5
    done
    out=$(svc_exec "$W2" "${STACK}_db" psql -h /var/run/postgresql -XAtq -c \
        "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 10000) g; CHECKPOINT; SELECT count(*) FROM t" postgres)
    e2e_eq "PostgreSQL on $W2 writes 10000 rows" 10000 "$out"
    e2e_eq "its volume has the stack's driver_opts, node=$W2 included" \
        '{"gid":"999","mode":"0700","node":"nvsw-w2","uid":"999"}' \
        "$(on "$W2" docker volume inspect -f '{{json .Options}}' "${STACK}_pgdata" 2>&1)"
    e2e_eq "PGDATA is on $W2's partition and on no other node's" "$W2" "$(holders "${STACK}_pgdata/PG_VERSION")"
    if wait_tasks "${STACK}_cache" "${#SWARM_NODES[@]}"; then e2e_ok "the global cache runs on every node"
    else e2e_not_ok "the global cache runs on every node"; fi
    for n in "${SWARM_NODES[@]}"; do
        e2e_eq "$n: its own ${STACK}_cache volume, written by its own task" "$(container "$n" "${STACK}_cache")" \
            "$(on_partition "$n" "${STACK}_cache/who")"
    done
    check_partitions "after stack deploy"

    # The label moves to another node: the constraint sends the task there,
    # the guard keeps it from starting on an empty volume.
    mgr docker node update --label-rm nvmevol.db "$W2" >/dev/null
    mgr docker node update --label-add nvmevol.db=true "$W1" >/dev/null
    N_FAILURES=$((N_FAILURES + 1))
    for i in $(seq 1 60); do
        out=$(mgr docker service ps --no-trunc --format '{{.Node}} {{.Error}}' "${STACK}_db" | grep "^$W1 .*pinned" | head -n1)
        [ -n "$out" ] && break
        sleep 0.5
    done
    e2e_match "label moved to $W1: the task fails there with the guard's Err" \
        "^$W1 .*volume ${STACK}_pgdata is pinned to node $W2 .* this is node $W1" "$out"
    e2e_eq "no ${STACK}_pgdata was created on $W1" "" "$(volumes_of "$W1" | grep -ow "${STACK}_pgdata")"
    mgr docker node update --label-rm nvmevol.db "$W1" >/dev/null
    mgr docker node update --label-add nvmevol.db=true "$W2" >/dev/null
    node=$(wait_task "${STACK}_db" "$W2")
    for i in $(seq 1 60); do
        svc_exec "$W2" "${STACK}_db" pg_isready -q -h /var/run/postgresql >/dev/null && break
        sleep 0.5
    done
    e2e_eq "label back on $W2: PostgreSQL runs there again with its 10000 rows" "$W2 10000" \
        "$node $(svc_exec "$W2" "${STACK}_db" psql -h /var/run/postgresql -XAtq -c 'SELECT count(*) FROM t' postgres)"
    mgr docker stack rm "$STACK" >/dev/null
    rm_service "${STACK}_db"
    rm_service "${STACK}_cache"
    e2e_eq "docker stack rm keeps the database's volume and data on $W2" "$W2" \
        "$(holders "${STACK}_pgdata/PG_VERSION")"
}

# trap_setup NAME EXTRA-VOLUME-OPT: a one-replica service that may run on
# either worker, started on W1 (W2 paused meanwhile), with data written.
trap_setup() {
    local name=$1 opt=$2 node
    set_availability "$W2" pause
    svc --name "$name" --constraint node.role==worker \
        --mount "type=volume,source=$name,target=/d,volume-driver=$DRIVER$opt" \
        "$IMG" sh -c 'echo start >>/d/starts && exec sleep 86400'
    node=$(wait_task "$name")
    set_availability "$W2" active
    e2e_eq "$name: first task on $W1" "$W1" "$node"
    svc_exec "$W1" "$name" sh -c 'echo precious >/d/data' >/dev/null
    e2e_eq "$name: data written on $W1's partition" "$W1 precious" \
        "$(holders "$name/data") $(on_partition "$W1" "$name/data")"
}

# Docker's behaviour without the guard: drain the node, and the task starts
# on the other worker with a new, EMPTY volume of the same name.
scenario_trap() {
    local node
    trap_setup sw-trap ""
    N_FAILURES=$((N_FAILURES + 1))
    set_availability "$W1" drain
    node=$(wait_task sw-trap "$W2")
    e2e_eq "(Docker behaviour, no guard) drain $W1: the task runs on $W2" "$W2" "$node"
    e2e_eq "(Docker behaviour, no guard) ... on a new, EMPTY sw-trap volume there: /d holds only its own start" \
        "starts" "$(svc_exec "$W2" sw-trap ls /d | tr '\n' ' ' | sed 's/ $//')"
    e2e_eq "(Docker behaviour, no guard) the data is still on $W1 only, where no task runs" "$W1" \
        "$(holders sw-trap/data)"
    rm_service sw-trap
    set_availability "$W1" active
    on "$W1" docker volume rm sw-trap >/dev/null
    on "$W2" docker volume rm sw-trap >/dev/null
    check_partitions "after the trap"
}

# The same with volume-opt=node=W1: the task fails on W2 and returns to W1.
scenario_guard() {
    local node out i
    trap_setup sw-guard ",volume-opt=node=$W1"
    N_FAILURES=$((N_FAILURES + 1))
    set_availability "$W1" drain
    out=$(rejected_on "$W2" sw-guard 60)
    e2e_match "guard: drain $W1, the task is rejected on $W2 with an Err naming both nodes (docker service ps --no-trunc)" \
        "^$W2 Rejected .*volume sw-guard is pinned to node $W1 \(option node=$W1\) and this is node $W2" "$out"
    e2e_match "guard: the Err says what to do" \
        "placement constraint node.hostname==$W1, or make $W1 available again \(docker node update --availability active $W1\)" \
        "$out"
    [ "$E2E_VERBOSE" = 1 ] && e2e_diag "$out"
    e2e_eq "guard: no sw-guard volume on $W2, nothing on its partitions" "|" \
        "$(volumes_of "$W2" | grep -ow sw-guard)|$(in_node "$W2" find_on_partitions nvmevol/volumes/sw-guard)"
    e2e_eq "guard: no task of sw-guard runs anywhere meanwhile" "" \
        "$(mgr docker service ps sw-guard --filter desired-state=running --format '{{.CurrentState}}' | grep '^Running')"
    set_availability "$W1" active
    node=$(wait_task sw-guard "$W1")
    e2e_eq "guard: $W1 back, the task runs there" "$W1" "$node"
    e2e_eq "guard: ... with its data (and its second start)" "precious start start" \
        "$(svc_exec "$W1" sw-guard sh -c 'cat /d/data /d/starts' | tr '\n' ' ' | sed 's/ $//')"
    rm_service sw-guard
    check_partitions "after the guard"
}

# Data does not move with a task: move a volume by hand, as examples/swarm/README.md says
# (tar out on the old node, a volume pinned to the new node, tar in), then
# run the service there.
scenario_move() {
    local tarball=$SWARM_WORK/sw-guard.tar node
    e2e_check "tar the volume out on $W1" \
        sh -c "DOCKER_HOST=unix://$(swarm_node_dir "$W1")/docker.sock docker run --rm --network none \
               -v sw-guard:/from:ro $IMG tar -C /from -cf - . >$tarball"
    e2e_check "create sw-guard on $W2, pinned there (-o node=$W2)" \
        on "$W2" docker volume create -d "$DRIVER" -o "node=$W2" sw-guard
    e2e_check "tar it in on $W2" \
        sh -c "DOCKER_HOST=unix://$(swarm_node_dir "$W2")/docker.sock docker run --rm -i --network none \
               -v sw-guard:/to $IMG tar -C /to -xpf - <$tarball"
    svc --name sw-moved --constraint "node.hostname==$W2" \
        --mount "type=volume,source=sw-guard,target=/d,volume-driver=$DRIVER,volume-opt=node=$W2" \
        "$IMG" sh -c 'echo start >>/d/starts && exec sleep 86400'
    node=$(wait_task sw-moved)
    e2e_eq "the service, now pinned to $W2, runs there with the moved data" "$W2 precious start start start" \
        "$node $(svc_exec "$W2" sw-moved sh -c 'cat /d/data /d/starts' | tr '\n' ' ' | sed 's/ $//')"
    rm_service sw-moved
    e2e_check "the old copy removed on $W1" on "$W1" docker volume rm sw-guard
    e2e_eq "sw-guard's data is now on $W2 only" "$W2" "$(holders sw-guard/data)"
    rm -f "$tarball"
}

# pgsql_on NODE SQL: one value from PostgreSQL in sw-pg's container on NODE.
pgsql_on() { svc_exec "$1" sw-pg psql -h /var/run/postgresql -XAtq -c "$2" postgres; }

# pg_ready NODE: until sw-pg's PostgreSQL on NODE answers (60 s at most).
pg_ready() {
    # A deadline, not a count: with no container each try waits 10 s in container(), and 120 tries
    # held the stage for 20 minutes after a failed move.
    local end=$((SECONDS + 60))
    while [ $SECONDS -lt $end ]; do
        svc_exec "$1" sw-pg pg_isready -q -h /var/run/postgresql >/dev/null && return 0
        sleep 0.5
    done
    return 1
}

# pgbench's invariant: every transaction adds one delta to an account, its
# teller, its branch and the history, so the four sums are equal.
pg_invariant() {
    pgsql_on "$1" "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(bbalance) FROM
        pgbench_branches) || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || (SELECT sum(delta) FROM
        pgbench_history)"
}

# PostgreSQL pinned to W2 (constraint and node=), pgbench running: its volume
# moved to W1 with `nvmevol volume move` (live passes under load, the wait
# naming the task's container, scale 0, the final pass), the constraint
# changed and scaled back to 1: the task runs on W1 with its data, and a task
# forced back to W2 is rejected there by the fence, naming W1.
scenario_pgmove() {
    local cli=$SWARM_WORK/cli via out err pid c node inv history i a b t h t0=$SECONDS
    local mnt="type=volume,source=sw-pg,target=/var/lib/postgresql/data,volume-driver=$DRIVER"
    mnt+=",volume-opt=uid=999,volume-opt=gid=999,volume-opt=mode=0700"
    # The command beside the plugin that runs it: the binary of its rootfs.
    mkdir -p "$cli"
    ln -sf "$E2E_REPO/plugin/out/nvmevol/rootfs/usr/bin/nvmevol" "$cli/nvmevol"
    via="env PATH=$cli:/usr/sbin:/usr/bin:/sbin:/bin DOCKER_HOST=unix://$(swarm_node_dir "$W1")/docker.sock"
    svc --name sw-pg --constraint "node.hostname==$W2" --env POSTGRES_PASSWORD=swarm-test \
        --stop-signal SIGINT --stop-grace-period 60s --mount "$mnt,volume-opt=node=$W2" "$PG_IMG"
    node=$(wait_task sw-pg)
    pg_ready "$W2" || e2e_diag "PostgreSQL on $W2 did not answer"
    e2e_match "sw-pg on $W2: pgbench -i -s 5" 'done in' \
        "$(svc_exec "$W2" sw-pg pgbench -h /var/run/postgresql -i -s 5 -q postgres)"
    c=$(container "$W2" sw-pg)
    on "$W2" docker exec "$c" pgbench -h /var/run/postgresql -T 12 -c 2 postgres >"$SWARM_WORK/pgbench.out" 2>&1 &
    local bench=$!
    sleep 2
    # The move, from W2 to W1 (reached as its dockerd), while pgbench writes.
    out=$SWARM_WORK/move.out err=$SWARM_WORK/move.err
    on "$W2" "$cli/nvmevol" volume move sw-pg --via "$via" --small-seconds 2 --timeout 180 --json >"$out" 2>"$err" &
    pid=$!
    for i in $(seq 1 240); do
        grep -q 'waiting up to' "$err" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    e2e_match "volume move, live passes done: it names the task's container that holds sw-pg and waits" \
        "in use by container\(s\) sw-pg\.1\.[a-z0-9]+ \(1 mount\(s\)\)" "$(cat "$err")"
    wait "$bench"
    e2e_match "pgbench ran through the live passes" '^tps = ' "$(cat "$SWARM_WORK/pgbench.out")"
    history=$(pgsql_on "$W2" 'SELECT count(*) FROM pgbench_history')
    e2e_check "docker service scale sw-pg=0" mgr docker service scale -d sw-pg=0
    if wait "$pid"; then e2e_ok "volume move sw-pg to $W1 finished once the task stopped"
    else e2e_not_ok "volume move sw-pg to $W1 finished once the task stopped"; e2e_diag "$(cat "$err")"; fi
    e2e_match "it made live passes while pgbench ran, then the final pass" \
        '^full( incremental)* final$' "$(jq -r '[.passes[].kind] | join(" ")' "$out" 2>&1)"
    e2e_match "it printed the downtime (the final pass)" '^[0-9.]+$' "$(jq -r .downtime_seconds "$out" 2>&1)"
    e2e_diag "move of sw-pg: $(jq -c '{passes: [.passes[] | {kind, bytes, seconds}], downtime_seconds, live_passes_ended}' "$out" 2>&1)"
    # The plugin's own record (Docker's Options are what Docker was asked at a create it did not make).
    e2e_eq "the copy on $W1 carries the node= pin rewritten to $W1" "$W1" "$(vstatus "$W1" sw-pg options.node)"
    e2e_match "... and PostgreSQL's data (PG_VERSION on $W1's partition)" "$W1" "$(holders sw-pg/PG_VERSION)"
    # Two updates: one with --mount-rm and --mount-add of the same target ends with no mount at all
    # (the CLI applies the removal after the addition), and PostgreSQL would initdb in the container.
    mgr docker service update -q -d --mount-rm /var/lib/postgresql/data sw-pg >/dev/null
    mgr docker service update -q -d --constraint-rm "node.hostname==$W2" --constraint-add "node.hostname==$W1" \
        --mount-add "$mnt,volume-opt=node=$W1" sw-pg >/dev/null
    e2e_eq "the service mounts sw-pg with node=$W1 now" "sw-pg $W1" \
        "$(mgr docker service inspect -f '{{range .Spec.TaskTemplate.ContainerSpec.Mounts}}{{.Source}} {{index .VolumeOptions.DriverConfig.Options "node"}}{{end}}' sw-pg 2>&1)"
    e2e_check "constraint changed to $W1, docker service scale sw-pg=1" mgr docker service scale -d sw-pg=1
    node=$(wait_task sw-pg "$W1")
    pg_ready "$W1" || e2e_diag "PostgreSQL on $W1 did not answer"
    inv=$(pg_invariant "$W1")
    read -r a b t h <<<"$inv"
    e2e_eq "the task runs on $W1, and pgbench's invariant holds there ($inv)" "$W1 equal" \
        "$node $([ -n "$h" ] && [ "$a" = "$b" ] && [ "$b" = "$t" ] && [ "$t" = "$h" ] && echo equal || echo unequal)"
    e2e_eq "... with every transaction pgbench committed on $W2" "$history" \
        "$(pgsql_on "$W1" 'SELECT count(*) FROM pgbench_history')"
    # Forced back to the old worker: its copy is fenced.
    mgr docker service update -q -d --constraint-rm "node.hostname==$W1" --constraint-add "node.hostname==$W2" \
        sw-pg >/dev/null
    # The fenced copy exists there, so Docker's Create of it succeeds and the Mount is what refuses:
    # the task is Failed (Rejected when a Create refuses, as the node= guard's), with the fence's Err.
    out=$(rejected_on "$W2" sw-pg 120 'Rejected|Failed')
    e2e_match "a task forced back onto $W2 is refused (Rejected or Failed) with the Err naming $W1" \
        "^$W2 (Rejected|Failed) .*volume sw-pg was moved to $W1 .*unfence" "$out"
    rm_service sw-pg
    e2e_check "docker volume rm of the fenced copy on $W2 (with the move's snapshot)" on "$W2" docker volume rm sw-pg
    e2e_check "docker volume rm of the moved volume on $W1 (with the move's snapshot)" on "$W1" docker volume rm sw-pg
    e2e_eq "nothing of sw-pg is left on any node's partitions" "" "$(holders sw-pg)"
    check_partitions "after the move"
    e2e_log "pgmove took $((SECONDS - t0)) s"
}

# kill -9 a worker's dockerd while its task runs with an nvmevol volume.
scenario_node_failure() {
    local node c old_plugin i
    svc --name sw-fail --constraint "node.hostname==$W2" \
        --mount "type=volume,source=sw-fail,target=/d,volume-driver=$DRIVER,volume-opt=node=$W2" \
        "$IMG" sh -c 'echo start >>/d/starts && exec sleep 86400'
    node=$(wait_task sw-fail)
    svc_exec "$W2" sw-fail sh -c 'echo survives >/d/data' >/dev/null
    c=$(container "$W2" sw-fail)
    old_plugin=$(swarm_plugin_pid "$W2")
    N_FAILURES=$((N_FAILURES + 1))
    in_node "$W2" e2e_kill_dockerd
    e2e_ok "kill -9 of $W2's dockerd while sw-fail runs there"
    in_node "$W2" e2e_start_dockerd
    e2e_ok "$W2's dockerd started again (same host name, new UTS namespace)"
    for i in $(seq 1 120); do
        [ "$(mgr docker node inspect -f '{{.Status.State}}' "$W2")" = ready ] &&
            [ -n "$(on "$W2" docker ps -q --filter label=com.docker.swarm.service.name=sw-fail)" ] && break
        sleep 0.5
    done
    node=$(wait_task sw-fail "$W2")
    e2e_eq "the task runs on $W2 again" "$W2" "$node"
    e2e_match "a new plugin process" "^new " \
        "$([ "$(swarm_plugin_pid "$W2")" != "$old_plugin" ] && echo new) ($old_plugin -> $(swarm_plugin_pid "$W2"))"
    e2e_eq "the task reads its data after the node came back" "survives start start" \
        "$(svc_exec "$W2" sw-fail sh -c 'cat /d/data /d/starts' | tr '\n' ' ' | sed 's/ $//')"
    e2e_match "its /d is still the XFS volume" ' /d .* - xfs ' \
        "$(svc_exec "$W2" sw-fail grep ' /d ' /proc/self/mountinfo)"
    e2e_eq "mount count right: 1 running task, 1 mount" "1 1 mounted" \
        "$(on "$W2" docker ps -q --filter label=com.docker.swarm.service.name=sw-fail | wc -l) $(vstatus "$W2" sw-fail mount_count) $(vstatus "$W2" sw-fail state)"
    e2e_eq "(old container $c is gone)" "" "$(on "$W2" docker ps -q --filter "id=$c")"
    check_partitions "after the node failure"
    rm_service sw-fail
    e2e_eq "service rm: the count drops to 0" "0 ready" \
        "$(vstatus "$W2" sw-fail mount_count) $(vstatus "$W2" sw-fail state)"
    e2e_check "no volume stuck in use: docker volume rm sw-fail on $W2" on "$W2" docker volume rm sw-fail
    e2e_eq "its directory is gone from $W2's partition" "" "$(holders sw-fail)"
}

# ----------------------------------------------------------------- summary

# Every volume the run created, on its node, still there with its data.
check_nothing_lost() {
    local expect n v
    # node:volume:file that must still be there at the end
    expect=("$W1:sw-one:data" "$W2:${STACK}_pgdata:PG_VERSION" "$W2:sw-guard:data")
    for n in "${SWARM_NODES[@]}"; do
        expect+=("$n:sw-cache:who" "$n:${STACK}_cache:who")
    done
    for v in "${expect[@]}"; do
        IFS=: read -r n vol file <<<"$v"
        if [ -n "$(in_node "$n" find_on_partitions "nvmevol/volumes/$vol/$file")" ] &&
           volumes_of "$n" | grep -qw -- "$vol"; then
            :
        else
            N_LOST=$((N_LOST + 1))
            e2e_diag "lost: $vol on $n"
        fi
    done
    e2e_eq "no volume lost (${#expect[@]} volumes checked on their nodes)" 0 "$N_LOST"
}

main() {
    e2e_select_scenarios "$@"
    setup
    e2e_run_scenarios
    sampler_stop
    local samples bad
    samples=$(wc -l <"$SAMPLES")
    bad=$(grep -v '^sample$' "$SAMPLES" | sort -u)
    if [ -z "$bad" ] && [ "$samples" -gt 0 ]; then
        e2e_ok "sampled every 0.5 s ($samples samples): no partition ever mounted by another node's plugin"
    else
        e2e_not_ok "sampled every 0.5 s ($samples samples): no partition ever mounted by another node's plugin"
        e2e_diag "$bad"
    fi
    [ "${#E2E_SELECTED[@]}" = "${#SCENARIOS[@]}" ] && check_nothing_lost
    printf '# figures: nodes %d, services %d, scenarios %d, failures injected %d, volumes lost %d\n' \
        "${#SWARM_NODES[@]}" "$N_SERVICES" "${#E2E_SELECTED[@]}" "$N_FAILURES" "$N_LOST"
    e2e_summary
}

main "$@"
