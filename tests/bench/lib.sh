# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# What the benchmarks that run the daemon directly share (clone.sh,
# export.sh, send.sh): a work directory under $BENCH_TMP (/var/tmp) that is
# taken apart on exit, whatever happens (daemons stopped, mounts under it
# thawed and unmounted, loop devices detached); sparse loop XFS partitions
# with a label prefix of this run; daemons started on them (self-test off);
# the plugin API over curl and the admin command.
#
#   bench_init NAME            W: the work directory; PFX: this run's label prefix
#   bench_partition FILE BYTES LABEL [losetup options]
#                              a loop XFS of BYTES on FILE (sparse); BENCH_DEV: its device
#                              (not in $(...): the device must be known to the cleanup)
#   bench_daemon DIR PREFIX [NAME=VALUE...]
#                              a daemon whose sockets, state, propagated mount and partition
#                              mounts are under DIR, serving the XFS labelled PREFIX*; waits
#                              until it answers; BENCH_PARTS: where its first partition is mounted
#   bench_api DIR ENDPOINT JSON
#                              VolumeDriver.ENDPOINT on DIR's daemon: the reply on stdout;
#                              fails (and logs the Err) on an Err
#   bench_admin DIR ARGS...    the nvmevol command against DIR's daemon
#   bench_timed 'COMMAND LINE' wall and CPU seconds (user + system of the whole pipeline),
#                              tab-separated; its stderr in $W/err; fails when it fails
#   bench_log TEXT...          "# TEXT" on stderr
# A script may define bench_cleanup_hook (called first on exit: stop what it started on
# the partitions, e.g. a database). Source after setting BIN (the nvmevol binary).

BENCH_PIDS=()
BENCH_DEVS=()
# shellcheck disable=SC2034 # W and PFX are for the scripts that source this
W=
PFX=

bench_log() { printf '# %s\n' "$*" >&2; }

bench_cleanup() {
    set +e
    declare -F bench_cleanup_hook >/dev/null && bench_cleanup_hook
    local p m d
    for p in "${BENCH_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    [ -n "$W" ] || return 0
    for m in $(awk -v d="$W" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
        fsfreeze --unfreeze "$m" 2>/dev/null
        umount -l "$m"
    done
    for d in "${BENCH_DEVS[@]}"; do losetup -d "$d"; done
    rm -rf "$W"
}

bench_init() { # NAME
    W=$(mktemp -d "${BENCH_TMP:-/var/tmp}/nvmevol-bench-$1.XXXXXX") || exit 1
    PFX=nvb$(printf '%s' "$1" | cut -c1)$(printf '%04x' $((RANDOM)))
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

bench_partition() { # FILE BYTES LABEL [losetup options]
    local file=$1 bytes=$2 label=$3
    shift 3
    truncate -s "$bytes" "$file" || return 1
    BENCH_DEV=$(losetup --find --show "$@" "$file") || return 1
    BENCH_DEVS+=("$BENCH_DEV")
    mkfs.xfs -q -f -L "$label" "$BENCH_DEV"
}

bench_daemon() { # DIR PREFIX [NAME=VALUE...]
    local dir=$1 prefix=$2
    shift 2
    mkdir -p "$dir/state" "$dir/prop" "$dir/parts"
    env NVMEVOL_SOCKET="$dir/s.sock" NVMEVOL_STATE_DIR="$dir/state" NVMEVOL_PROPAGATED_MOUNT="$dir/prop" \
        NVMEVOL_PARTITION_ROOT="$dir/parts" NVMEVOL_LABEL_PREFIX="$prefix" NVMEVOL_SELFTEST=off "$@" \
        "$BIN" >>"$dir/daemon.log" 2>&1 &
    BENCH_PIDS+=($!)
    for _ in $(seq 1 300); do
        bench_api "$dir" List '{}' >/dev/null 2>&1 && break
        sleep 0.1
    done
    BENCH_PARTS=$(ls -d "$dir"/parts/*/ 2>/dev/null | head -1)
    BENCH_PARTS=${BENCH_PARTS%/}
    [ -n "$BENCH_PARTS" ] || { bench_log "the daemon in $dir serves no partition: $(tail -3 "$dir/daemon.log")"; return 1; }
}

bench_api() { # DIR ENDPOINT JSON
    local out
    out=$(curl -s --unix-socket "$1/s.sock" -X POST -d "$3" "http://nvmevol/VolumeDriver.$2") || return 1
    printf '%s\n' "$out"
    ! grep -q '"Err":"[^"]' <<<"$out" || { bench_log "$2: $out"; return 1; }
}

bench_admin() { # DIR ARGS...
    local dir=$1
    shift
    "$BIN" "$@" --socket "$dir/nvmevol-admin.sock"
}

bench_timed() { # 'COMMAND LINE'
    local TIMEFORMAT='%R %U %S' t
    t=$({ time bash -c "set -o pipefail; $1" >/dev/null 2>"$W/err"; } 2>&1) || return 1
    awk '{ printf "%s\t%.3f\n", $1, $2 + $3 }' <<<"$t"
}
