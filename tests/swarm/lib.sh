# shellcheck shell=bash
# A three-node Docker Swarm on one machine, for nvmevol's swarm tests.
#
# Each node is a network namespace (veth to a bridge this fixture creates,
# addresses in SWARM_NET.0/24, no route beyond the bridge), its own hostname
# (dockerd runs in its own UTS namespace) and its own dockerd (data root, exec
# root, socket, pidfile under $SWARM_WORK/<node>).  One manager, two workers.
# The registry runs in the root namespace on the bridge address; every dockerd
# has it as --insecure-registry.  Each node's plugin gets its own loop XFS
# partitions (its own NVMEVOL_LABEL_PREFIX) and its own state directory.
#
# Builds on tests/e2e/lib.sh: its assertions, dockerd start/stop (one node at
# a time: swarm_use sets the E2E_* variables of that node), registry, images,
# loop devices and plugin packaging.  Everything is torn down by swarm_cleanup
# (an EXIT trap), also after a failure.

SWARM_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

: "${SWARM_WORK:=/var/lib/nvmevol-swarm}"
: "${SWARM_NET:=10.231.77}"          # a private /24 that nothing else uses
: "${SWARM_REGISTRY_PORT:=5012}"
SWARM_BRIDGE=nvswbr0
SWARM_NODES=(nvsw-m1 nvsw-w1 nvsw-w2) # also the hostnames; the first is the manager
declare -A SWARM_ADDR=([nvsw-m1]=$SWARM_NET.11 [nvsw-w1]=$SWARM_NET.12 [nvsw-w2]=$SWARM_NET.13)
SWARM_REGISTRY=$SWARM_NET.1:$SWARM_REGISTRY_PORT

# tests/e2e/lib.sh reads these when it is sourced.
E2E_WORK=$SWARM_WORK
E2E_REGISTRY_ADDR=$SWARM_REGISTRY
# shellcheck source=../e2e/lib.sh
. "$SWARM_LIB_DIR/../e2e/lib.sh"

SWARM_RUN_ID=$(printf '%04x' $((RANDOM)))
declare -A SWARM_PREFIX  # node -> its plugin's NVMEVOL_LABEL_PREFIX
declare -A SWARM_LOOPS   # node -> its loop devices (space-separated)
for _n in "${!SWARM_ADDR[@]}"; do
    SWARM_PREFIX[$_n]=nvs$SWARM_RUN_ID${_n: -2}   # e.g. nvs1a2bm1: 9 of the 12 bytes of a label
done
unset _n

# ------------------------------------------------------------ node context

swarm_node_dir() { echo "$SWARM_WORK/$1"; }

# swarm_use NODE: point the e2e helpers (dockerd start/stop/kill, plugin pid,
# partition_roots, find_on_partitions) and the docker client at NODE.
swarm_use() {
    local d
    d=$(swarm_node_dir "$1")
    e2e_dockerd_dir "$d"
    E2E_STATE_DIR=$d/state
    # shellcheck disable=SC2206
    E2E_LOOP_DEVS=(${SWARM_LOOPS[$1]:-})
    # Inside the node's network namespace, with its own UTS namespace and
    # hostname.  Not `ip netns exec`: it remounts /sys and dockerd then fails
    # with "Devices cgroup isn't mounted".  The default bridge and iptables
    # stay on: they are the namespace's own.
    E2E_DOCKERD_WRAPPER=(nsenter "--net=/run/netns/$1" unshare --uts --
                         /bin/sh -c 'hostname "$0" && exec "$@"' "$1")
    E2E_DOCKERD_NET_ARGS=()
    export DOCKER_HOST=unix://$E2E_SOCK
}

# on NODE COMMAND...: run a command (docker ...) against NODE's dockerd.
on() {
    local n=$1
    shift
    DOCKER_HOST=unix://$(swarm_node_dir "$n")/docker.sock "$@"
}

# in_node NODE FUNCTION [ARGS...]: run a shell function with NODE's context,
# in a subshell (the caller's context is left alone).
in_node() {
    local n=$1
    shift
    ( swarm_use "$n" && "$@" )
}

# ---------------------------------------------------------------- network

swarm_net_up() {
    ip link add "$SWARM_BRIDGE" type bridge || e2e_die "cannot create bridge $SWARM_BRIDGE"
    ip addr add "$SWARM_NET.1/24" dev "$SWARM_BRIDGE"
    ip link set "$SWARM_BRIDGE" up
    local n veth
    for n in "${SWARM_NODES[@]}"; do
        veth=v${n#nvsw-}                  # host side, e.g. vm1
        ip netns add "$n" || e2e_die "ip netns add $n failed"
        ip link add "$veth" type veth peer name eth0 netns "$n" || e2e_die "veth for $n failed"
        ip link set "$veth" master "$SWARM_BRIDGE" up
        ip -n "$n" addr add "${SWARM_ADDR[$n]}/24" dev eth0
        ip -n "$n" link set lo up
        ip -n "$n" link set eth0 up
        # No default route: nothing beyond the bridge is reachable.
    done
}

swarm_net_down() {
    local n
    for n in "${SWARM_NODES[@]}"; do
        [ -e "/run/netns/$n" ] && ip netns del "$n"
        ip link del "v${n#nvsw-}" 2>/dev/null
    done
    ip link show "$SWARM_BRIDGE" >/dev/null 2>&1 && ip link del "$SWARM_BRIDGE"
    return 0
}

# ------------------------------------------------------------ dockerd, swarm

swarm_start_node() {
    swarm_use "$1"
    mkdir -p "$E2E_STATE_DIR"
    e2e_start_dockerd
}

# swarm_form: init on the manager, join the workers, wait until all are Ready.
swarm_form() {
    local mgr=${SWARM_NODES[0]} token n i
    on "$mgr" docker swarm init --advertise-addr "${SWARM_ADDR[$mgr]}" \
        --listen-addr "${SWARM_ADDR[$mgr]}:2377" >/dev/null || e2e_die "docker swarm init failed"
    token=$(on "$mgr" docker swarm join-token -q worker) || e2e_die "no join token"
    for n in "${SWARM_NODES[@]:1}"; do
        on "$n" docker swarm join --token "$token" --advertise-addr "${SWARM_ADDR[$n]}" \
            "${SWARM_ADDR[$mgr]}:2377" >/dev/null || e2e_die "docker swarm join on $n failed"
    done
    for i in $(seq 1 60); do
        [ "$(on "$mgr" docker node ls --format '{{.Status}}' | grep -c Ready)" = "${#SWARM_NODES[@]}" ] &&
            return 0
        sleep 0.5
    done
    on "$mgr" docker node ls >&2
    e2e_die "the swarm nodes did not all become Ready"
}

# mgr COMMAND...: run against the manager.
mgr() { on "${SWARM_NODES[0]}" "$@"; }

# ---------------------------------------------------------------- plugin

# swarm_make_partitions: two loop XFS per node, labelled with its prefix.
swarm_make_partitions() {
    local n a b
    for n in "${SWARM_NODES[@]}"; do
        # 1 GiB (sparse): the pgmove scenario's database under pgbench, its live passes' snapshot
        # and PostgreSQL's checkpoint at the stop (every block rewritten beside the snapshot's)
        # filled 320 MiB, and the fence's record write then failed.
        a=$(e2e_make_loop_xfs "${SWARM_PREFIX[$n]}a" 1024) && b=$(e2e_make_loop_xfs "${SWARM_PREFIX[$n]}b" 1024) ||
            e2e_die "cannot make the partitions of $n"
        SWARM_LOOPS[$n]="$a $b"
        e2e_log "$n: partitions $a $b (label prefix ${SWARM_PREFIX[$n]})"
    done
}

# swarm_install_plugin NODE REF: docker plugin install from the registry, as
# nvmevol:latest, with the node's own label prefix and state directory.
swarm_install_plugin() {
    local n=$1 ref=$2 state
    state=$(swarm_node_dir "$n")/state
    mkdir -p "$state"
    on "$n" docker plugin install --grant-all-permissions --alias "$E2E_PLUGIN" "$ref" \
        "NVMEVOL_LABEL_PREFIX=${SWARM_PREFIX[$n]}" NVMEVOL_LOG_LEVEL=debug \
        "state.source=$state" >/dev/null
}

# swarm_plugin_pid NODE: host pid of NODE's plugin process.
swarm_plugin_pid() { in_node "$1" e2e_plugin_pid; }

# ------------------------------------------------------------------ cleanup

swarm_cleanup() {
    set +e
    if [ "${E2E_KEEP:-0}" = 1 ] && [ "${1:-}" != --force ]; then
        e2e_log "E2E_KEEP=1: leaving the swarm running; 'swarm_cleanup --force' removes it"
        return 0
    fi
    local n
    # Every node's containers first (their volume mounts go), then each dockerd.
    for n in "${SWARM_NODES[@]}"; do
        swarm_use "$n"
        e2e_remove_containers
    done
    for n in "${SWARM_NODES[@]}"; do
        swarm_use "$n"
        e2e_stop_dockerd
        # Images and layers (PostgreSQL: ~450 MB) go; the logs stay.  Never
        # through a mount that is still there (a volume's data).
        if [ -z "$(e2e_host_mounts_under "$(swarm_node_dir "$n")")" ]; then
            rm -rf --one-file-system "$E2E_DATA_ROOT" "$E2E_EXEC_ROOT"
        else
            e2e_log "$n: mounts left under $(swarm_node_dir "$n"); its data root is kept"
        fi
    done
    e2e_cleanup_common
    rm -rf "$E2E_REGISTRY_DIR/data"
    swarm_net_down
}

# swarm_init: root, packages, EXIT trap, leftovers of a run that died.
swarm_init() {
    [ "$(id -u)" = 0 ] || e2e_die "swarm tests need root"
    e2e_install_packages iproute2
    mkdir -p "$SWARM_WORK" "$E2E_CACHE"
    swarm_cleanup --force
    # A fresh engine per node each run: no swarm state, volume DB or plugin
    # left from a run that died.
    local n
    for n in "${SWARM_NODES[@]}"; do
        rm -rf "$(swarm_node_dir "$n")"
    done
    rm -rf "$E2E_REGISTRY_DIR"
    trap 'swarm_cleanup' EXIT
    trap 'exit 130' INT TERM
}
