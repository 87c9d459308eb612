#!/bin/bash
# SPDX-License-Identifier: MIT
#
# nvmevol benchmarks (not CI tests): everything side by side in one run,
# contenders alternated, every figure repeated >= 5 times; medians, min-max
# and ratios as markdown tables in tests/bench/RESULTS.md, PNG plots in
# tests/bench/plots/, raw values in tests/bench/raw/.
#
# Usage: tests/bench/run.sh [--quick] [--reps N] [--only LIST] [--keep]
#   --quick      3 s fio runs, pgbench -T 5, fewer samples (about 20 minutes)
#   --reps N     repetitions (default 5, at least 5)
#   --only LIST  comma-separated subset of: data,copyup,control,endpoints,selftest,drift,postgres,volumes
#   --keep       leave dockerds, loops and mounts in place (debugging)
#
# Items (see RESULTS.md for what each measures):
#   data       fio in a container: nvmevol volume | host straight onto the same XFS |
#              a container with a plain bind of a directory on that XFS |
#              overlay2 on a daemon whose data-root is an identical XFS | Docker local volume there
#   copyup     first 4 KiB write into a 1 GiB image file: overlay2 on ext4 and on XFS, nvmevol volume
#   control    docker volume create + run --rm -v + volume rm: local vs a minimal reference plugin
#              (tests/bench/refplugin.c: what any managed plugin pays in dockerd) vs nvmevol (self-test
#              off / warn); the CPU time of dockerd, containerd and the plugin per cycle; then dockerd's
#              and the plugin's system calls per cycle (strace -f -c, untimed cycles)
#   endpoints  per-endpoint latency over the socket with 1,000 and 10,000 volumes, List, RSS,
#              exec-to-ready (daemon run directly, self-test off)
#   selftest   tests/bench/selftest-vs-fio.sh, when it exists
#   drift      tests/drift/drift.sh --plot: the self-test history against a throttled partition (plots/drift.png)
#   postgres   pgbench TPS: nvmevol volume | host bind on the same partition | overlay2 on XFS
#   volumes    docker volume ls and docker volume create with VOLS_N (default 10,000) volumes: Docker's
#              local driver (a third dockerd, data-root on the root disk like a's) and nvmevol side by side
#
# Needs root, Debian 12 packages (installed when missing), no network: dockerd runs with
# --bridge=none and no iptables, containers with --network none, nothing is pulled.
# Everything lives under $BENCH_WORK (default /var/lib/nvmevol-bench): two private dockerds
# (a: data-root on the root disk, hosts the plugin; b: data-root on an XFS loop), their own
# sockets, loop devices with per-run labels; all torn down at exit.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
QUICK=0
REPS=5
ONLY=data,copyup,control,endpoints,selftest,drift,postgres,volumes
: "${VOLS_N:=10000}"
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1; shift ;;
        --reps) REPS=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$REPS" -ge 5 ] || { echo "run.sh: --reps must be at least 5" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root" >&2; exit 2; }
want() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }

if [ "$QUICK" = 1 ]; then
    FIO_T=3; PG_T=5; CP_CYCLES=$REPS; EP_SAMPLES=200; ST_FIO_T=1
else
    FIO_T=10; PG_T=15; CP_CYCLES=$((REPS * 2)); EP_SAMPLES=1000; ST_FIO_T=2
fi
PG_SCALE=10
FIO_SIZE=256M

: "${BENCH_WORK:=/var/lib/nvmevol-bench}"
RUN_ID=$(printf '%04x' $((RANDOM)))
PFX=nvb$RUN_ID          # plugin's label prefix (daemon a)
CPFX=nvc$RUN_ID         # label prefix of the daemon run directly (endpoints)
XLABEL=nbx${RUN_ID}d    # daemon b's data-root partition: matches no prefix
PLUGIN=nvbench:latest
REFPLUGIN=nvbref:latest
FIO_IMG=nvbench/fio:1
BB_IMG=nvbench/busybox:1
PG_IMG=nvbench/postgres:15

# lib.sh: dockerd, images, loop devices, cleanup. Loops live under $BENCH_WORK;
# the two daemons are selected with use_daemon below.
export E2E_WORK=$BENCH_WORK
export E2E_REGISTRY_ADDR=127.0.0.1:5001     # never started; keeps away from :5000
# shellcheck source=../e2e/lib.sh
source "$REPO/tests/e2e/lib.sh"

OUT=$BENCH_WORK/results
RAW=$OUT/raw
LOG=$OUT/log
HOSTMNT=$BENCH_WORK/mnt/hostp
XMNT=$BENCH_WORK/b/data-root
BIN_DIR=$BENCH_WORK/bin
NVMEVOL_BIN=$BENCH_WORK/build-rel/src/nvmevol
CP_PIDS=()

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

use_daemon() { # a | b
    E2E_SOCK=$BENCH_WORK/$1/docker.sock
    E2E_DATA_ROOT=$BENCH_WORK/$1/data-root
    E2E_EXEC_ROOT=$BENCH_WORK/$1/exec
    E2E_PIDFILE=$BENCH_WORK/$1/dockerd.pid
    E2E_DOCKERD_LOG=$BENCH_WORK/$1/dockerd.log
    export DOCKER_HOST=unix://$E2E_SOCK
}
DA() { DOCKER_HOST=unix://$BENCH_WORK/a/docker.sock docker "$@"; }
DB() { DOCKER_HOST=unix://$BENCH_WORK/b/docker.sock docker "$@"; }
DC() { DOCKER_HOST=unix://$BENCH_WORK/c/docker.sock docker "$@"; }

bench_cleanup() {
    set +e
    [ "$KEEP" = 1 ] && { log "--keep: leaving everything under $BENCH_WORK"; return; }
    log "cleanup"
    local p
    for p in "${CP_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${CP_PIDS[@]}"; do _e2e_wait_gone "$p" 10 || kill -KILL "$p" 2>/dev/null; done
    _e2e_unmount_under "$BENCH_WORK/cp"
    for d in c b a; do
        use_daemon $d
        if e2e_dockerd_alive; then
            local cs pl
            cs=$(docker ps -aq 2>/dev/null)
            [ -n "$cs" ] && docker rm -f $cs >/dev/null 2>&1
            for pl in "$PLUGIN" "$REFPLUGIN"; do
                if [ $d = a ] && docker plugin inspect "$pl" >/dev/null 2>&1; then
                    docker volume ls -q -f driver="$pl" | xargs -r docker volume rm -f >/dev/null 2>&1
                    docker plugin disable -f "$pl" >/dev/null 2>&1
                fi
            done
        fi
        e2e_stop_dockerd
    done
    E2E_HOST_MOUNTS+=("$HOSTMNT")
    e2e_cleanup
    rm -rf "$BENCH_WORK/a" "$BENCH_WORK/b" "$BENCH_WORK/c" "$BENCH_WORK/cp" "$BENCH_WORK/mnt" "$BENCH_WORK/plugin-state" \
        "$BENCH_WORK/refpkg"
}

# ------------------------------------------------------------------ setup

setup_common() {
    e2e_install_packages fio gnuplot-nox python3 gcc libc6-dev
    mkdir -p "$BENCH_WORK" "$RAW" "$LOG" "$BIN_DIR"
    rm -f "$RAW"/*.tsv
    # Leftovers of a run that died without its trap.
    KEEP_SAVED=$KEEP; KEEP=0; bench_cleanup; KEEP=$KEEP_SAVED
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    log "building nvmevol (release) and the bench tools in $BENCH_WORK"
    if [ ! -f "$BENCH_WORK/build-rel/build.ninja" ]; then
        meson setup "$BENCH_WORK/build-rel" "$REPO" -Dbuildtype=release -Dtests=disabled >"$LOG/meson.log" 2>&1
    fi
    ninja -C "$BENCH_WORK/build-rel" >>"$LOG/meson.log" 2>&1
    gcc -O2 -Wall -o "$BIN_DIR/sockbench" "$BENCH_DIR/sockbench.c"
    gcc -O2 -Wall -static -o "$BIN_DIR/firstwrite" "$BENCH_DIR/firstwrite.c"
    gcc -O2 -Wall -static -pthread -o "$BIN_DIR/refplugin" "$BENCH_DIR/refplugin.c"
}

# An image with busybox, fio (+ its shared libraries and the loader),
# firstwrite and a 1 GiB file /big/1g.dat (for copy-up). Built once.
fio_image_tar() {
    local tar=$BENCH_WORK/fio-image.tar root
    [ -s "$tar" ] && { echo "$tar"; return; }
    root=$BENCH_WORK/fio-root
    rm -rf "$root"
    mkdir -p "$root"/{bin,usr/bin,tmp,etc,root,data,work,big}
    chmod 1777 "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    local a lib
    for a in $("$root/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
    done
    cp /usr/bin/fio "$root/usr/bin/fio"
    cp "$BIN_DIR/firstwrite" "$root/usr/bin/firstwrite"
    for lib in $(ldd /usr/bin/fio | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/lib.*ld-linux/ { print $1 }'); do
        install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\n' >"$root/etc/group"
    dd if=/dev/zero of="$root/big/1g.dat" bs=1M count=1024 status=none
    tar -C "$root" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$root"
    echo "$tar"
}

setup_daemons() {
    log "daemon a (data-root on the root disk) and daemon b (data-root on XFS loop $XLABEL)"
    local xdev
    mkdir -p "$BENCH_WORK/a" "$BENCH_WORK/b" "$XMNT"
    LOOP_A=$(e2e_make_loop_xfs "${PFX}a" 6144)
    xdev=$(e2e_make_loop_xfs "$XLABEL" 6144)
    mount -o noatime "$xdev" "$XMNT"
    use_daemon a; e2e_start_dockerd
    use_daemon b; e2e_start_dockerd
    local tar
    tar=$(fio_image_tar)
    for d in a b; do
        use_daemon $d
        log "importing images into daemon $d"
        docker import -c 'ENV PATH=/bin:/usr/bin' -c 'CMD ["/bin/sh"]' - "$FIO_IMG" <"$tar" >/dev/null
        e2e_busybox_image "$BB_IMG"
    done
    use_daemon a
    log "installing the plugin ($PLUGIN, label prefix $PFX) into daemon a"
    rm -rf "$BENCH_WORK/pkg"
    mkdir -p "$BENCH_WORK/pkg/plugin" "$BENCH_WORK/plugin-state"
    cp "$REPO/plugin/install.sh" "$BENCH_WORK/pkg/plugin/install.sh"
    "$REPO/plugin/build.sh" --binary "$NVMEVOL_BIN" --out "$BENCH_WORK/pkg/plugin/out/nvmevol" >"$LOG/plugin-build.log" 2>&1
    "$BENCH_WORK/pkg/plugin/install.sh" --replace --no-cli --no-man --name "$PLUGIN" \
        "NVMEVOL_LABEL_PREFIX=$PFX" "state.source=$BENCH_WORK/plugin-state" >"$LOG/plugin-install.log" 2>&1 ||
        { cat "$LOG/plugin-install.log" >&2; exit 1; }
    # host-direct: the same partition, mounted on the host too (same superblock)
    mkdir -p "$HOSTMNT"
    mount -o noatime,nodiratime "$LOOP_A" "$HOSTMNT"
    E2E_HOST_MOUNTS+=("$HOSTMNT")
}

# ------------------------------------------------------------- 1. data path

# fio arguments per workload; the metric is IOPS except seqwrite (MiB/s).
WORKLOADS=(randwrite randread seqwrite fsyncwrite bufread)
declare -A WL_ARGS=(
    [randwrite]="--rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth=32"
    [randread]="--rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=32"
    [seqwrite]="--rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=8"
    [fsyncwrite]="--rw=write --bs=4k --direct=0 --ioengine=psync --fsync=1"
    [bufread]="--rw=randread --bs=4k --direct=0 --ioengine=psync --invalidate=0"
)
# host = the limit; bind = a container with a plain bind mount of a directory
# on the same partition (separates what any container costs from what
# nvmevol's bind costs).
DATA_CONTENDERS=(nvmevol host bind overlay2-xfs local-xfs)

# fio_on CONTENDER ARGS...: run fio where CONTENDER puts its file; JSON on stdout.
fio_on() {
    local c=$1
    shift
    case $c in
        nvmevol) DA exec fio-nvmevol fio --filename=/data/bench.dat "$@" ;;
        host) fio --filename="$HOSTMNT/bench-host/bench.dat" "$@" ;;
        bind) DA exec fio-bind fio --filename=/data/bench.dat "$@" ;;
        overlay2-xfs) DB exec fio-overlay fio --filename=/work/bench.dat "$@" ;;
        local-xfs) DB exec fio-local fio --filename=/data/bench.dat "$@" ;;
    esac
}

bench_data() {
    log "1. data path: preparing containers and 256 MiB files"
    DA volume create -d "$PLUGIN" nvb-fio >/dev/null
    DA run -d --network none --name fio-nvmevol -v nvb-fio:/data "$FIO_IMG" sleep 1000000 >/dev/null
    DB volume create nvb-fio-local >/dev/null
    DB run -d --network none --name fio-local -v nvb-fio-local:/data "$FIO_IMG" sleep 1000000 >/dev/null
    DB run -d --network none --name fio-overlay "$FIO_IMG" sleep 1000000 >/dev/null
    mkdir -p "$HOSTMNT/bench-host" "$HOSTMNT/bench-bind"
    DA run -d --network none --name fio-bind --mount "type=bind,src=$HOSTMNT/bench-bind,dst=/data" \
        "$FIO_IMG" sleep 1000000 >/dev/null
    {
        echo "nvmevol: $(DA exec fio-nvmevol grep ' /data ' /proc/self/mountinfo)"
        echo "host:    $(findmnt -no SOURCE,FSTYPE,OPTIONS "$HOSTMNT")"
        echo "bind:    $(DA exec fio-bind grep ' /data ' /proc/self/mountinfo)"
        echo "overlay: $(DB exec fio-overlay grep ' / / ' /proc/self/mountinfo | cut -c1-200)"
        echo "local:   $(DB exec fio-local grep ' /data ' /proc/self/mountinfo)"
    } >"$LOG/data-mounts.txt"
    local c
    for c in "${DATA_CONTENDERS[@]}"; do
        fio_on "$c" --name=prep --rw=write --bs=1M --direct=1 --size=$FIO_SIZE --output-format=json >/dev/null
    done
    sync
    local rep wl i n=${#DATA_CONTENDERS[@]} j v
    for rep in $(seq 1 "$REPS"); do
        for wl in "${WORKLOADS[@]}"; do
            for i in $(seq 0 $((n - 1))); do
                c=${DATA_CONTENDERS[$(((i + rep) % n))]}     # rotate who goes first
                # buffered random reads measure the page-cache path: warm it
                [ "$wl" = bufread ] && fio_on "$c" --name=warm --rw=read --bs=1M --direct=0 \
                    --invalidate=0 --size=$FIO_SIZE --output-format=json >/dev/null
                # shellcheck disable=SC2086
                j=$(fio_on "$c" --name="$wl" ${WL_ARGS[$wl]} --size=$FIO_SIZE --time_based \
                    --runtime="$FIO_T" --output-format=json)
                if [ "$wl" = seqwrite ]; then
                    v=$(jq '.jobs[0].write.bw / 1024' <<<"$j")
                elif [ "${wl%read}" != "$wl" ]; then
                    v=$(jq '.jobs[0].read.iops' <<<"$j")
                else
                    v=$(jq '.jobs[0].write.iops' <<<"$j")
                fi
                printf '%s\t%s\t%s\t%s\n' "$wl" "$c" "$rep" "$v" >>"$RAW/data.tsv"
                log "   rep $rep $wl $c: $v"
            done
        done
    done
    DA rm -f fio-nvmevol fio-bind >/dev/null; DB rm -f fio-local fio-overlay >/dev/null
    DA volume rm nvb-fio >/dev/null; DB volume rm nvb-fio-local >/dev/null
    rm -rf "$HOSTMNT/bench-host" "$HOSTMNT/bench-bind"
}

# ---------------------------------------------------------------- copy-up

bench_copyup() {
    log "1b. copy-up: first 4 KiB write into the image's 1 GiB file"
    # The nvmevol volume mounted over /big: Docker copies the image's 1 GiB
    # file into the empty volume once, when it is first mounted (not timed).
    DA volume create -d "$PLUGIN" nvb-big >/dev/null
    DA run --rm --network none -v nvb-big:/big "$FIO_IMG" true
    sync
    local rep c v order=(overlay2-ext4 overlay2-xfs nvmevol) i
    for rep in $(seq 1 "$REPS"); do
        for i in 0 1 2; do
            c=${order[$(((i + rep) % 3))]}
            case $c in
                overlay2-ext4) v=$(DA run --rm --network none "$FIO_IMG" firstwrite /big/1g.dat) ;;
                overlay2-xfs) v=$(DB run --rm --network none "$FIO_IMG" firstwrite /big/1g.dat) ;;
                nvmevol) v=$(DA run --rm --network none -v nvb-big:/big "$FIO_IMG" firstwrite /big/1g.dat) ;;
            esac
            printf '%s\t%s\t%s\n' "$c" "$rep" "$v" >>"$RAW/copyup.tsv"
            log "   rep $rep $c: $v us"
            sync
        done
    done
    DA volume rm nvb-big >/dev/null
}

# ------------------------------------------------------- 2. control plane

# The reference plugin (tests/bench/refplugin.c) as a managed plugin of daemon a:
# every request answered at once, a volume a directory of its rootfs bound
# under its propagated mount. What it costs is what dockerd charges any plugin.
setup_refplugin() {
    local d=$BENCH_WORK/refpkg
    rm -rf "$d"
    mkdir -p "$d/rootfs"/{usr/bin,run/docker/plugins,mnt/ref,var/lib/refvol,dev,proc,sys,tmp,etc}
    cp "$BIN_DIR/refplugin" "$d/rootfs/usr/bin/refplugin"
    # Docker 20.10 refuses a plugin whose content equals an installed one's.
    date +%s%N >"$d/rootfs/etc/refplugin-build"
    cat >"$d/config.json" <<'JSON'
{
  "Description": "nvmevol benchmark: the reference plugin (tests/bench/refplugin.c)",
  "Documentation": "tests/bench/refplugin.c",
  "Entrypoint": ["/usr/bin/refplugin", "/run/docker/plugins/ref.sock", "/var/lib/refvol", "/mnt/ref"],
  "Interface": { "Types": ["docker.volumedriver/1.0"], "Socket": "ref.sock" },
  "Network": { "Type": "none" },
  "PropagatedMount": "/mnt/ref",
  "Linux": { "Capabilities": ["CAP_SYS_ADMIN"] }
}
JSON
    DA plugin rm -f "$REFPLUGIN" >/dev/null 2>&1 || true
    DA plugin create "$REFPLUGIN" "$d" >/dev/null
    DA plugin enable "$REFPLUGIN" >/dev/null
}

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# What nvmevol's rescan compares: the kernel's block devices (/proc/partitions and each disk's
# diskseq). When they change (on a shared machine, other sessions' loop devices), the next Create
# of a new name, and Docker's Get before it, wait for a rescan: a cycle that saw a change says so.
devices_fingerprint() { cat /proc/partitions /sys/block/*/diskseq 2>/dev/null | md5sum | cut -c1-12; }
plugin_pid_of() { # PLUGIN
    local id
    id=$(DA plugin inspect -f '{{.Id}}' "$1") && jq -r '.init_process_pid' \
        "$BENCH_WORK/a/exec/runtime-runc/plugins.moby/$id/state.json"
}
# The long-lived processes whose CPU a cycle is charged: dockerd a, its containerd, the plugin.
cp_pids() { # CONTENDER: sets CP_DOCKERD CP_CONTAINERD CP_PLUGIN
    CP_DOCKERD=$(cat "$BENCH_WORK/a/dockerd.pid")
    CP_CONTAINERD=$(ps -o pid= --ppid "$CP_DOCKERD" -o comm= | awk '$2 == "containerd" { print $1; exit }')
    case $1 in
        local) CP_PLUGIN= ;;
        refplugin) CP_PLUGIN=$(plugin_pid_of "$REFPLUGIN") ;;
        *) CP_PLUGIN=$(plugin_pid_of "$PLUGIN") ;;
    esac
}

# cycle CONTENDER NAME: volume create + run --rm -v + volume rm; prints µs.
cycle() {
    local c=$1 v=$2 t0 t1
    t0=$(date +%s%N)
    case $c in
        local) DA volume create "$v" >/dev/null ;;
        refplugin) DA volume create -d "$REFPLUGIN" "$v" >/dev/null ;;
        nvmevol-off) DA volume create -d "$PLUGIN" -o selftest=off "$v" >/dev/null ;;
        nvmevol-warn*) DA volume create -d "$PLUGIN" -o selftest=warn "$v" >/dev/null ;;
    esac
    DA run --rm --network none -v "$v:/d" "$BB_IMG" true
    DA volume rm "$v" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
}

cp_phase() { # PHASE CONTENDERS...
    local phase=$1 rep i c n v d0 k0 p0 f0 hz
    hz=$(getconf CLK_TCK)
    shift
    local cs=("$@")
    n=${#cs[@]}
    local -A plugin_pid
    for c in "${cs[@]}"; do
        cycle "$c" "nvbw-$c" >/dev/null     # warm-up, not counted
        cp_pids "$c"
        plugin_pid[$c]=$CP_PLUGIN
    done
    for rep in $(seq 1 "$CP_CYCLES"); do
        for i in $(seq 0 $((n - 1))); do
            c=${cs[$(((i + rep) % n))]}
            CP_PLUGIN=${plugin_pid[$c]}
            f0=$(devices_fingerprint)
            d0=$(ticks "$CP_DOCKERD") k0=$(ticks "$CP_CONTAINERD") p0=$([ -n "$CP_PLUGIN" ] && ticks "$CP_PLUGIN" || echo 0)
            v=$(cycle "$c" "nvbc-$phase-$rep-$i")
            printf '%s\t%s\t%s\t%s\n' "$phase" "$c" "$rep" "$v" >>"$RAW/control.tsv"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$c" "$rep" \
                $((($(ticks "$CP_DOCKERD") - d0) * 1000 / hz)) $((($(ticks "$CP_CONTAINERD") - k0) * 1000 / hz)) \
                $((($([ -n "$CP_PLUGIN" ] && ticks "$CP_PLUGIN" || echo 0) - p0) * 1000 / hz)) \
                "$(cut -d' ' -f1 /proc/loadavg)" "$([ "$f0" = "$(devices_fingerprint)" ] && echo 0 || echo 1)" \
                >>"$RAW/control-cpu.tsv"
        done
    done
}

# System calls per cycle of dockerd (all threads) and of the plugin, under strace -f -c: counts do
# not depend on the load. Untimed cycles, after the timed ones (strace slows dockerd down).
cp_strace() { # CONTENDERS...
    local c i n=5 sd sp
    for c in "$@"; do
        cp_pids "$c"
        strace -f -c -o "$LOG/strace-dockerd-$c.txt" -p "$CP_DOCKERD" 2>/dev/null &
        sd=$!
        sp=
        if [ -n "$CP_PLUGIN" ]; then
            # -w: wall time per call (an fsync's wait, not its CPU), for the plugin's time per cycle below.
            strace -f -c -w -o "$LOG/strace-plugin-$c.txt" -p "$CP_PLUGIN" 2>/dev/null &
            sp=$!
        fi
        sleep 2
        for i in $(seq 1 $n); do cycle "$c" "nvbs-$c-$i" >/dev/null; done
        kill -INT $sd $sp
        wait $sd $sp 2>/dev/null || true
        awk -v c="$c" -v n=$n -v who=dockerd '$NF == "total" { printf "%s\t%s\ttotal\t%.0f\n", c, who, $4 / n }
            $NF != "total" && $4 ~ /^[0-9]+$/ { printf "%s\t%s\t%s\t%.1f\n", c, who, $NF, $4 / n }' \
            "$LOG/strace-dockerd-$c.txt" >>"$RAW/control-strace.tsv"
        [ -n "$sp" ] && awk -v c="$c" -v n=$n -v who=plugin '$NF == "total" { printf "%s\t%s\ttotal\t%.0f\n", c, who, $4 / n }
            $NF != "total" && $4 ~ /^[0-9]+$/ { printf "%s\t%s\t%s\t%.1f\n", c, who, $NF, $4 / n }' \
            "$LOG/strace-plugin-$c.txt" >>"$RAW/control-strace.tsv"
        # The plugin's wall time per cycle in each call (column 2 under -w: seconds over all threads).
        [ -n "$sp" ] && awk -v c="$c" -v n=$n '$NF != "total" && $4 ~ /^[0-9]+$/ {
                printf "%s\t%s\t%.3f\n", c, $NF, $2 * 1000 / n }' \
            "$LOG/strace-plugin-$c.txt" >>"$RAW/control-wall.tsv"
    done
}

bench_control() {
    log "2a. control plane: docker volume create + run --rm -v + volume rm ($CP_CYCLES cycles each)"
    setup_refplugin
    # Phase 1: the plugin's defaults (NVMEVOL_SELFTEST_CACHE_SECONDS=300): a
    # warn volume's mount runs the self-test once per partition, then reuses it.
    cp_phase default local refplugin nvmevol-off nvmevol-warn
    log "2a. system calls per cycle (strace -f -c of dockerd and the plugin, 5 untimed cycles each)"
    cp_strace local refplugin nvmevol-off
    # Phase 2: no cache: every first mount of a warn volume runs the self-test
    # at the default 300 ms budget.
    DA plugin disable -f "$PLUGIN" >/dev/null
    DA plugin set "$PLUGIN" NVMEVOL_SELFTEST_CACHE_SECONDS=0
    DA plugin enable "$PLUGIN" >/dev/null
    cp_phase nocache local nvmevol-warn-nocache
    DA plugin disable -f "$PLUGIN" >/dev/null
    DA plugin set "$PLUGIN" NVMEVOL_SELFTEST_CACHE_SECONDS=300
    DA plugin enable "$PLUGIN" >/dev/null
}

# --------------------------------------------- 2b. endpoints (daemon run directly)

cp_start() { # prints "PID MS"
    "$BIN_DIR/sockbench" ready "$CPW/s.sock" 60000 sh -c "exec '$NVMEVOL_BIN' >/dev/null 2>>'$CPW/daemon.log'"
}

cp_stop() {
    kill -TERM "$1" 2>/dev/null
    _e2e_wait_gone "$1" 30 || kill -KILL "$1"
}

rss_kib() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$1/status"; }

bench_endpoints() {
    log "2b. endpoints: daemon run directly (self-test off), label prefix $CPFX"
    CPW=$BENCH_WORK/cp
    rm -rf "$CPW"
    mkdir -p "$CPW/state" "$CPW/prop" "$CPW/parts"
    e2e_make_loop_xfs "${CPFX}a" 2048 >/dev/null
    export NVMEVOL_SOCKET=$CPW/s.sock NVMEVOL_STATE_DIR=$CPW/state NVMEVOL_PROPAGATED_MOUNT=$CPW/prop \
        NVMEVOL_PARTITION_ROOT=$CPW/parts NVMEVOL_LABEL_PREFIX=$CPFX NVMEVOL_SELFTEST=off
    local pid ms out n prev=0 r
    read -r pid ms < <(cp_start)
    CP_PIDS+=("$pid")
    printf 'ready_ms\t0\t%s\n' "$ms" >>"$RAW/daemon.tsv"
    printf 'rss_kib\t0\t%s\n' "$(rss_kib "$pid")" >>"$RAW/daemon.tsv"
    for n in 1000 10000; do
        out=$("$BIN_DIR/sockbench" populate "$CPW/s.sock" bv "$prev" "$n")
        log "   $out"
        echo "$n: $out" >>"$LOG/populate.txt"
        prev=$n
        printf 'rss_kib_loaded\t%s\t%s\n' "$n" "$(rss_kib "$pid")" >>"$RAW/daemon.tsv"
        "$BIN_DIR/sockbench" endpoints "$CPW/s.sock" bv "$n" "$REPS" "$EP_SAMPLES" |
            sed "s/^/$n\t/" >>"$RAW/endpoints.tsv"
        printf 'rss_kib_after_bench\t%s\t%s\n' "$n" "$(rss_kib "$pid")" >>"$RAW/daemon.tsv"
        printf 'hwm_kib_after_bench\t%s\t%s\n' "$n" "$(hwm_kib "$pid")" >>"$RAW/daemon.tsv"
        # exec -> first successful List, REPS restarts
        for r in $(seq 1 "$REPS"); do
            cp_stop "$pid"
            read -r pid ms < <(cp_start)
            CP_PIDS+=("$pid")
            printf 'ready_ms\t%s\t%s\n' "$n" "$ms" >>"$RAW/daemon.tsv"
            printf 'rss_kib\t%s\t%s\n' "$n" "$(rss_kib "$pid")" >>"$RAW/daemon.tsv"
            log "   $n volumes: ready in $ms ms, VmRSS $(rss_kib "$pid") KiB"
        done
    done
    cp_stop "$pid"
    unset NVMEVOL_SOCKET NVMEVOL_STATE_DIR NVMEVOL_PROPAGATED_MOUNT NVMEVOL_PARTITION_ROOT \
        NVMEVOL_LABEL_PREFIX NVMEVOL_SELFTEST
    _e2e_unmount_under "$CPW"
}

# -------------------------------------------------------------- 3. self-test

bench_selftest() {
    local s=$BENCH_DIR/selftest-vs-fio.sh
    if [ ! -x "$s" ] && [ ! -f "$s" ]; then
        echo "skipped: tests/bench/selftest-vs-fio.sh does not exist" >"$OUT/selftest.md"
        return
    fi
    log "3. self-test vs fio (tests/bench/selftest-vs-fio.sh -n $REPS -t $ST_FIO_T)"
    if ! bash "$s" -n "$REPS" -t "$ST_FIO_T" -d "$BENCH_WORK" -b "$BENCH_WORK/build-rel" \
            -o "$OUT/selftest.md" >"$LOG/selftest-vs-fio.log" 2>&1; then
        { echo "selftest-vs-fio.sh failed; last lines of its output:"; echo; echo '```';
          tail -n 15 "$LOG/selftest-vs-fio.log"; echo '```'; } >"$OUT/selftest.md"
    fi
}

# ------------------------------------------------------------- drift plot

bench_drift() {
    log "self-test history drift (tests/drift/drift.sh --plot)"
    if ! NVMEVOL_BINARY="$NVMEVOL_BIN" bash "$REPO/tests/drift/drift.sh" --plot "$BENCH_DIR/plots/drift.png" \
            --data "$BENCH_DIR/raw/drift.tsv" >"$LOG/drift.log" 2>&1; then
        log "drift.sh reported failures; see $LOG/drift.log"
    fi
}

# ------------------------------------------------------------- 4. postgres

PG_CONTENDERS=(nvmevol host overlay2-xfs)
pg_container() {
    case $1 in nvmevol) echo pg-nvmevol ;; host) echo pg-host ;; overlay2-xfs) echo pg-overlay ;; esac
}
pg_docker() { case $1 in overlay2-xfs) echo DB ;; *) echo DA ;; esac; }

bench_postgres() {
    log "4. PostgreSQL 15 + pgbench (scale $PG_SCALE, -c 4 -j 2 -T $PG_T)"
    use_daemon a; e2e_postgres_image "$PG_IMG"
    use_daemon b; e2e_postgres_image "$PG_IMG"
    DA volume create -d "$PLUGIN" -o uid=999 -o gid=999 -o mode=0700 nvb-pg >/dev/null
    mkdir -p "$HOSTMNT/pghost"
    chown 999:999 "$HOSTMNT/pghost"
    chmod 0700 "$HOSTMNT/pghost"
    DA run -d --network none --name pg-nvmevol -v nvb-pg:/var/lib/postgresql/data "$PG_IMG" >/dev/null
    DA run -d --network none --name pg-host \
        --mount "type=bind,src=$HOSTMNT/pghost,dst=/var/lib/postgresql/data" "$PG_IMG" >/dev/null
    DB run -d --network none --name pg-overlay "$PG_IMG" >/dev/null
    local c d name i
    for c in "${PG_CONTENDERS[@]}"; do
        d=$(pg_docker "$c"); name=$(pg_container "$c")
        for i in $(seq 1 120); do
            $d exec "$name" pg_isready -q -h /var/run/postgresql && break
            sleep 0.5
        done
        $d exec "$name" pgbench -h /var/run/postgresql -i -q -s "$PG_SCALE" postgres >"$LOG/pgbench-init-$c.log" 2>&1
        $d exec "$name" psql -h /var/run/postgresql -Atc 'CHECKPOINT' postgres >/dev/null
    done
    local rep n=${#PG_CONTENDERS[@]} out tps
    for rep in $(seq 1 "$REPS"); do
        for i in $(seq 0 $((n - 1))); do
            c=${PG_CONTENDERS[$(((i + rep) % n))]}
            d=$(pg_docker "$c"); name=$(pg_container "$c")
            out=$($d exec "$name" pgbench -h /var/run/postgresql -c 4 -j 2 -T "$PG_T" postgres 2>&1)
            tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
            [ -n "$tps" ] || { echo "$out" >&2; tps=0; }
            printf '%s\t%s\t%s\n' "$c" "$rep" "$tps" >>"$RAW/pgbench.tsv"
            log "   rep $rep $c: $tps tps"
        done
    done
    {
        for c in "${PG_CONTENDERS[@]}"; do
            d=$(pg_docker "$c"); name=$(pg_container "$c")
            echo "$c: $($d exec "$name" sh -c 'grep " /var/lib/postgresql/data " /proc/self/mountinfo || grep " / / " /proc/self/mountinfo' | cut -c1-200)"
        done
    } >"$LOG/pg-mounts.txt"
    DA rm -f pg-nvmevol pg-host >/dev/null; DB rm -f pg-overlay >/dev/null
    DA volume rm nvb-pg >/dev/null
    rm -rf "$HOSTMNT/pghost"
}

# ------------------------------------------- 5. docker volume ls / create at VOLS_N volumes

# api_batch FILE: one curl over one keep-alive connection for every request in FILE (a curl
# config: unix-socket, url, request, data, next); prints the seconds it took.
api_batch() {
    local t0 t1
    t0=$(date +%s%N)
    curl -s -K "$1" >/dev/null
    t1=$(date +%s%N)
    awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1e9 }'
}

vols_config() { # create|remove DRIVER PREFIX N SOCK: a curl config of N Docker API requests
    # awk, not a shell loop: a $(...) per line costs a fork, minutes for 10,000 lines on a busy machine.
    # `next` resets every per-transfer option, the socket too: each block names it; none after the last.
    awk -v kind="$1" -v driver="$2" -v prefix="$3" -v n="$4" -v sock="$5" 'BEGIN {
        opts = driver == "local" ? "{}" : "{\\\"selftest\\\":\\\"off\\\"}"
        for (i = 1; i <= n; i++) {
            if (i > 1)
                print "next"
            printf "unix-socket = \"%s\"\n", sock
            if (kind == "create") {
                print "url = \"http://d/volumes/create\""
                print "header = \"Content-Type: application/json\""
                printf "data = \"{\\\"Name\\\":\\\"%s%d\\\",\\\"Driver\\\":\\\"%s\\\",\\\"DriverOpts\\\":%s}\"\n", prefix, i, driver, opts
            } else {
                printf "url = \"http://d/volumes/%s%d\"\nrequest = \"DELETE\"\n", prefix, i
            }
        }
    }'
}

bench_volumes() {
    log "5. docker volume ls / create with $VOLS_N volumes: local (daemon c) and nvmevol (daemon a), side by side"
    mkdir -p "$BENCH_WORK/c"
    use_daemon c
    e2e_start_dockerd
    use_daemon a
    vols_config create local lv "$VOLS_N" "$BENCH_WORK/c/docker.sock" >"$BENCH_WORK/c/create.cfg"
    vols_config create "$PLUGIN" nv "$VOLS_N" "$BENCH_WORK/a/docker.sock" >"$BENCH_WORK/a/create.cfg"
    local s
    s=$(api_batch "$BENCH_WORK/c/create.cfg")
    printf 'populate\tlocal\t%s\t%s\n' "$VOLS_N" "$s" >>"$RAW/volumes.tsv"
    log "   $VOLS_N local volumes created through the API in $s s"
    s=$(api_batch "$BENCH_WORK/a/create.cfg")
    printf 'populate\tnvmevol\t%s\t%s\n' "$VOLS_N" "$s" >>"$RAW/volumes.tsv"
    log "   $VOLS_N nvmevol volumes created through the API in $s s"
    [ "$(DC volume ls -q | wc -l)" -ge "$VOLS_N" ] || { log "daemon c lists fewer than $VOLS_N volumes"; exit 1; }
    [ "$(DA volume ls -q -f driver="$PLUGIN" | wc -l)" -ge "$VOLS_N" ] || { log "daemon a lists fewer than $VOLS_N nvmevol volumes"; exit 1; }
    # Alternated: ls, then create + rm of one more volume (the rm untimed), each timed by itself.
    local rep i c t0 t1 n=2 cs=(local nvmevol)
    for rep in $(seq 1 $((REPS * 3))); do
        for i in 0 1; do
            c=${cs[$(((i + rep) % n))]}
            t0=$(date +%s%N)
            if [ "$c" = local ]; then DC volume ls >/dev/null; else DA volume ls >/dev/null; fi
            t1=$(date +%s%N)
            printf 'ls\t%s\t%s\t%s\n' "$c" "$rep" $(((t1 - t0) / 1000)) >>"$RAW/volumes.tsv"
            t0=$(date +%s%N)
            if [ "$c" = local ]; then DC volume create "lvx$rep" >/dev/null
            else DA volume create -d "$PLUGIN" -o selftest=off "nvx$rep" >/dev/null; fi
            t1=$(date +%s%N)
            printf 'create\t%s\t%s\t%s\n' "$c" "$rep" $(((t1 - t0) / 1000)) >>"$RAW/volumes.tsv"
            if [ "$c" = local ]; then DC volume rm "lvx$rep" >/dev/null; else DA volume rm "nvx$rep" >/dev/null; fi
        done
    done
    vols_config remove local lv "$VOLS_N" "$BENCH_WORK/c/docker.sock" >"$BENCH_WORK/c/remove.cfg"
    vols_config remove "$PLUGIN" nv "$VOLS_N" "$BENCH_WORK/a/docker.sock" >"$BENCH_WORK/a/remove.cfg"
    s=$(api_batch "$BENCH_WORK/a/remove.cfg")
    printf 'remove\tnvmevol\t%s\t%s\n' "$VOLS_N" "$s" >>"$RAW/volumes.tsv"
    s=$(api_batch "$BENCH_WORK/c/remove.cfg")
    printf 'remove\tlocal\t%s\t%s\n' "$VOLS_N" "$s" >>"$RAW/volumes.tsv"
    use_daemon c
    e2e_stop_dockerd
    use_daemon a
}

# ------------------------------------------------------------------ main

T_START=$SECONDS
setup_common
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode: $([ "$QUICK" = 1 ] && echo quick || echo full), reps $REPS, fio runtime ${FIO_T}s, pgbench -T $PG_T, items: $ONLY"
    echo "(tables of items not in this run come from the raw files of an earlier run left in tests/bench/raw/)"
    echo "kernel: $(uname -r), cpus: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null) (working tree may differ)"
    echo "docker: $(dockerd --version), fio: $(fio --version)"
    echo "fio: 256 MiB file per contender; bufread warmed first (--invalidate=0): page-cache hits"
} >"$OUT/meta.txt"
if want data || want copyup || want control || want postgres || want volumes; then
    setup_daemons
fi
want data && bench_data
want copyup && bench_copyup
want control && bench_control
want endpoints && bench_endpoints
want selftest && bench_selftest
want drift && bench_drift
want postgres && bench_postgres
want volumes && bench_volumes
echo "wall time: $((SECONDS - T_START)) s" >>"$OUT/meta.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

log "report"
mkdir -p "$BENCH_DIR/raw" "$BENCH_DIR/plots"
cp "$RAW"/*.tsv "$OUT/meta.txt" "$BENCH_DIR/raw/" 2>/dev/null || true
[ -f "$OUT/selftest.md" ] && cp "$OUT/selftest.md" "$BENCH_DIR/raw/selftest.md"
python3 "$BENCH_DIR/report.py" "$BENCH_DIR/raw" "$BENCH_DIR/RESULTS.md" "$BENCH_DIR/plots"
log "done: $BENCH_DIR/RESULTS.md, $BENCH_DIR/plots/"
