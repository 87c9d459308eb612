# shellcheck shell=bash
# Helpers for nvmevol's end-to-end tests against a real Docker engine.
#
# Source this file from bash.  It never touches the machine's default dockerd:
# everything lives under $E2E_WORK (data root, exec root, socket, pidfile,
# registry storage, loop-device backing files) and is torn down by
# e2e_cleanup, which e2e_init installs as an EXIT trap.
#
# Network: dockerd runs with --bridge=none --iptables=false --ip-forward=false
# --ip-masq=false, containers run with --network none, and the registry
# listens on 127.0.0.1:5000 only.

E2E_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_REPO=$(cd "$E2E_LIB_DIR/../.." && pwd)

: "${E2E_WORK:=/var/lib/nvmevol-e2e}"
: "${E2E_CACHE:=/var/cache/nvmevol-e2e}"
: "${E2E_REGISTRY_ADDR:=127.0.0.1:5000}"
: "${E2E_PLUGIN:=nvmevol:latest}"
: "${E2E_VERBOSE:=0}"
: "${E2E_PART_MB:=320}"   # size of each loop partition (sparse files)

# e2e_dockerd_dir DIR: the dockerd that the helpers below start, stop and
# talk to keeps everything under DIR (the swarm fixture has one per node).
e2e_dockerd_dir() {
    E2E_SOCK=$1/docker.sock
    E2E_DATA_ROOT=$1/data-root
    E2E_EXEC_ROOT=$1/exec
    E2E_PIDFILE=$1/dockerd.pid
    E2E_DOCKERD_LOG=$1/dockerd.log
}
e2e_dockerd_dir "$E2E_WORK"
E2E_REGISTRY_DIR=$E2E_WORK/registry
E2E_REGISTRY_PIDFILE=$E2E_WORK/registry.pid
E2E_LOOP_DIR=$E2E_WORK/loops

# A second engine (tests/e2e/projid.sh: userns-remap) sets these around
# e2e_start_dockerd: a command the daemon runs under, and extra daemon flags.
E2E_DOCKERD_WRAPPER=()
E2E_DOCKERD_ARGS=()
# Functions e2e_cleanup calls first (things a scenario started on its own).
E2E_CLEANUP_HOOKS=()
# The network flags of e2e_start_dockerd: none at all (the swarm fixture's nodes
# have their own network namespaces and keep Docker's defaults).
E2E_DOCKERD_NET_ARGS=(--bridge=none --iptables=false --ip6tables=false
                      --ip-forward=false --ip-masq=false)

E2E_PASS=0
E2E_FAIL=0
E2E_FAILED_NAMES=()
E2E_DOCKERD_STARTED=0
E2E_REGISTRY_STARTED=0
E2E_START_NS=$(date +%s%N)

e2e_log()  { printf '# %s\n' "$*" >&2; }
e2e_die()  { printf 'Bail out! %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- assertions

e2e_ok() {
    E2E_PASS=$((E2E_PASS + 1))
    printf 'ok - %s\n' "$*"
}

e2e_not_ok() {
    E2E_FAIL=$((E2E_FAIL + 1))
    E2E_FAILED_NAMES+=("$*")
    printf 'not ok - %s\n' "$*"
}

# e2e_check DESCRIPTION COMMAND...: passes when COMMAND exits 0; on failure its
# output is shown as diagnostics.
e2e_check() {
    local desc=$1 out
    shift
    if out=$("$@" 2>&1); then
        e2e_ok "$desc"
    else
        e2e_not_ok "$desc"
        e2e_diag "command: $*"
        e2e_diag "$out"
    fi
}

# e2e_check_fails DESCRIPTION COMMAND...: passes when COMMAND exits non-zero.
# The command's output is kept in E2E_LAST_OUTPUT.
e2e_check_fails() {
    local desc=$1
    shift
    if E2E_LAST_OUTPUT=$("$@" 2>&1); then
        e2e_not_ok "$desc (command unexpectedly succeeded)"
        e2e_diag "command: $*"
        e2e_diag "$E2E_LAST_OUTPUT"
        return 1
    fi
    e2e_ok "$desc"
    [ "$E2E_VERBOSE" = 1 ] && e2e_diag "$E2E_LAST_OUTPUT"
    return 0
}

# e2e_eq DESCRIPTION EXPECTED ACTUAL
e2e_eq() {
    if [ "$2" = "$3" ]; then
        e2e_ok "$1"
    else
        e2e_not_ok "$1"
        e2e_diag "expected: '$2'"
        e2e_diag "actual:   '$3'"
    fi
}

# e2e_match DESCRIPTION EXTENDED-REGEX TEXT
e2e_match() {
    # A here-string, not a pipe: grep -q exits at the first match, and with
    # pipefail a printf still writing a long text would fail with SIGPIPE.
    if grep -Eq -- "$2" <<<"$3"; then
        e2e_ok "$1"
    else
        e2e_not_ok "$1"
        e2e_diag "pattern: $2"
        e2e_diag "text:    $3"
    fi
}

# e2e_no_match DESCRIPTION EXTENDED-REGEX TEXT
e2e_no_match() {
    if grep -Eq -- "$2" <<<"$3"; then
        e2e_not_ok "$1"
        e2e_diag "pattern: $2"
        e2e_diag "text:    $3"
    else
        e2e_ok "$1"
    fi
}

e2e_diag() {
    [ -n "$*" ] || return 0
    printf '%s\n' "$*" | sed 's/^/#   /'
}

# e2e_summary: the closing line; returns non-zero when anything failed.
e2e_summary() {
    local ms
    ms=$(( ($(date +%s%N) - E2E_START_NS) / 1000000 ))
    if [ "${#E2E_FAILED_NAMES[@]}" -gt 0 ]; then
        printf '# failed:\n'
        printf '#   %s\n' "${E2E_FAILED_NAMES[@]}"
    fi
    printf '# wall time: %d.%01d s\n' $((ms / 1000)) $((ms % 1000 / 100))
    printf '%d passed, %d failed\n' "$E2E_PASS" "$E2E_FAIL"
    [ "$E2E_FAIL" -eq 0 ]
}

# --------------------------------------------------------------- scenarios

# e2e_select_scenarios [--list | NAME...]: E2E_SELECTED = the named scenarios
# (functions scenario_NAME), or all of SCENARIOS; --list prints them and exits.
e2e_select_scenarios() {
    local s
    E2E_SELECTED=()
    if [ "${1:-}" = --list ]; then
        printf '%s\n' "${SCENARIOS[@]}"
        exit 0
    fi
    for s in "$@"; do
        declare -F "scenario_$s" >/dev/null || e2e_die "unknown scenario '$s' (try --list)"
        E2E_SELECTED+=("$s")
    done
    [ "${#E2E_SELECTED[@]}" -gt 0 ] || E2E_SELECTED=("${SCENARIOS[@]}")
}

# e2e_run_scenarios: run E2E_SELECTED in order, each headed by its start time.
e2e_run_scenarios() {
    local s
    for s in "${E2E_SELECTED[@]}"; do
        printf '# --- %s (at %d s)\n' "$s" $(( ($(date +%s%N) - E2E_START_NS) / 1000000000 ))
        "scenario_$s"
    done
}

# e2e_main [--list | NAME...]: the usual script: select, `setup`, run, summary.
e2e_main() {
    e2e_select_scenarios "$@"
    setup
    e2e_run_scenarios
    printf '# dockerd log: %s\n' "$E2E_DOCKERD_LOG"
    e2e_summary
}

# ------------------------------------------------------------------ packages

# e2e_install_packages [EXTRA...]: apt-get install only what is missing.
e2e_install_packages() {
    local want=(docker.io docker-registry docker-compose busybox-static debootstrap
                xfsprogs jq util-linux curl meson ninja-build gcc pkg-config
                libmicrohttpd-dev libjansson-dev libmount-dev libblkid-dev "$@")
    local missing=() p
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    e2e_log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null &&
        apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null ||
        e2e_die "apt-get install ${missing[*]} failed"
}

# -------------------------------------------------------------------- dockerd

e2e_dockerd_alive() {
    [ -f "$E2E_PIDFILE" ] && kill -0 "$(cat "$E2E_PIDFILE")" 2>/dev/null
}

# e2e_start_dockerd: start a private dockerd and export DOCKER_HOST for it.
e2e_start_dockerd() {
    mkdir -p "$E2E_WORK" "$E2E_DATA_ROOT" "$E2E_EXEC_ROOT"
    export DOCKER_HOST=unix://$E2E_SOCK
    if e2e_dockerd_alive && docker info >/dev/null 2>&1; then
        return 0
    fi
    rm -f "$E2E_PIDFILE"
    local dockerd_bin
    dockerd_bin=$(command -v dockerd) || e2e_die "dockerd not installed"
    # setsid: its own session, so that a test's Ctrl-C does not reach it
    # before the EXIT trap stops it in order.
    # In a subshell, so that it is no job of the caller's shell (no "Killed"
    # notice when a test SIGKILLs it); setsid: its own session.
    ( setsid "${E2E_DOCKERD_WRAPPER[@]}" "$dockerd_bin" "${E2E_DOCKERD_ARGS[@]}" \
        --data-root "$E2E_DATA_ROOT" \
        --exec-root "$E2E_EXEC_ROOT" \
        --pidfile "$E2E_PIDFILE" \
        -H "unix://$E2E_SOCK" \
        "${E2E_DOCKERD_NET_ARGS[@]}" \
        --insecure-registry "$E2E_REGISTRY_ADDR" \
        --insecure-registry "localhost:${E2E_REGISTRY_ADDR##*:}" \
        >>"$E2E_DOCKERD_LOG" 2>&1 </dev/null & )
    E2E_DOCKERD_STARTED=1
    local i
    for i in $(seq 1 120); do
        if docker info >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    tail -n 30 "$E2E_DOCKERD_LOG" >&2
    e2e_die "dockerd did not answer on $E2E_SOCK"
}

# e2e_dockerd_pid: pid of our dockerd (empty if none).
e2e_dockerd_pid() {
    [ -f "$E2E_PIDFILE" ] && cat "$E2E_PIDFILE"
}

_e2e_wait_gone() { # PID TIMEOUT_S
    local i
    for i in $(seq 1 $(( $2 * 10 ))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

# e2e_stop_dockerd: graceful stop (SIGTERM), then unmount whatever it left.
e2e_stop_dockerd() {
    local pid
    pid=$(e2e_dockerd_pid)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        if ! _e2e_wait_gone "$pid" 60; then
            e2e_log "dockerd $pid ignored SIGTERM for 60 s; killing it"
            kill -KILL "$pid" 2>/dev/null
            _e2e_wait_gone "$pid" 10
        fi
    fi
    rm -f "$E2E_PIDFILE"
    _e2e_reap_orphans
    _e2e_unmount_under "$E2E_EXEC_ROOT"
    _e2e_unmount_under "$E2E_DATA_ROOT"
}

# e2e_kill_dockerd: SIGKILL, as in a daemon crash.  Its containerd-shims and
# the plugin keep running; the next e2e_start_dockerd finds them.
e2e_kill_dockerd() {
    local pid
    pid=$(e2e_dockerd_pid)
    [ -n "$pid" ] || return 0
    kill -KILL "$pid" 2>/dev/null
    _e2e_wait_gone "$pid" 10
    # dockerd's supervised containerd gets SIGKILL with it (Pdeathsig).  Wait
    # until it is really gone: while its pid still exists (a zombie not yet
    # reaped by init), a new dockerd "reuses" it and times out connecting
    # ("failed to start containerd: timeout waiting for containerd to start").
    local cpidfile=$E2E_EXEC_ROOT/containerd/containerd.pid cpid
    if [ -f "$cpidfile" ]; then
        cpid=$(cat "$cpidfile")
        local i
        for i in $(seq 1 100); do
            [ -d "/proc/$cpid" ] || break
            [ "$(awk '{ print $3 }' "/proc/$cpid/stat" 2>/dev/null)" = Z ] && break
            sleep 0.1
        done
        rm -f "$cpidfile"
    fi
}

e2e_restart_dockerd() {
    e2e_stop_dockerd
    e2e_start_dockerd
}

e2e_kill_restart_dockerd() {
    e2e_kill_dockerd
    e2e_start_dockerd
}

# Kill processes (containerd, shims, plugin and container processes) that
# belong to our exec root, after dockerd is gone.  Only processes whose
# command line names our work dir are touched, by pid.
_e2e_reap_orphans() {
    local pids p nsdir id
    # Containers and plugins first (their processes survive their shims and
    # would keep loop devices mounted in their namespaces): runc state lives
    # under <exec-root>/runtime-runc/<containerd namespace>/<id>.
    for nsdir in "$E2E_EXEC_ROOT"/runtime-runc/*; do
        [ -d "$nsdir" ] || continue
        for id in $(runc --root "$nsdir" list -q 2>/dev/null); do
            runc --root "$nsdir" kill --all "$id" KILL >/dev/null 2>&1
            runc --root "$nsdir" delete --force "$id" >/dev/null 2>&1
        done
    done
    pids=$(pgrep -f -- "$E2E_EXEC_ROOT" || true)
    [ -n "$pids" ] || return 0
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    for p in $pids; do _e2e_wait_gone "$p" 10 || kill -KILL "$p" 2>/dev/null; done
}

# _e2e_unmount_under DIR: lazily unmount every mount at or below DIR,
# deepest first.
_e2e_unmount_under() {
    local dir=$1 m
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
        sort -r | while read -r m; do
            m=$(printf '%b' "$m")   # mountinfo escapes spaces as \040
            umount -l "$m" 2>/dev/null
        done
}

# e2e_host_mounts_under DIR: print mount points below DIR (host namespace).
e2e_host_mounts_under() {
    awk -v d="$1" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -u
}

# ------------------------------------------------------------------- registry

e2e_start_registry() {
    mkdir -p "$E2E_REGISTRY_DIR/data"
    if [ -f "$E2E_REGISTRY_PIDFILE" ] && kill -0 "$(cat "$E2E_REGISTRY_PIDFILE")" 2>/dev/null; then
        return 0
    fi
    cat >"$E2E_REGISTRY_DIR/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $E2E_REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $E2E_REGISTRY_ADDR
YAML
    local bin
    bin=$(command -v docker-registry || echo /usr/bin/docker-registry)
    ( setsid "$bin" serve "$E2E_REGISTRY_DIR/config.yml" \
        >>"$E2E_REGISTRY_DIR/registry.log" 2>&1 </dev/null &
      echo $! >"$E2E_REGISTRY_PIDFILE" )
    E2E_REGISTRY_STARTED=1
    local i
    for i in $(seq 1 50); do
        if curl -fsS "http://$E2E_REGISTRY_ADDR/v2/" >/dev/null 2>&1 ||
           bash -c "exec 3<>/dev/tcp/${E2E_REGISTRY_ADDR%:*}/${E2E_REGISTRY_ADDR##*:}" 2>/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    tail -n 20 "$E2E_REGISTRY_DIR/registry.log" >&2
    e2e_die "registry did not start on $E2E_REGISTRY_ADDR"
}

e2e_stop_registry() {
    local pid
    [ -f "$E2E_REGISTRY_PIDFILE" ] || return 0
    pid=$(cat "$E2E_REGISTRY_PIDFILE")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        _e2e_wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$E2E_REGISTRY_PIDFILE"
}

# --------------------------------------------------------------------- images

# e2e_busybox_image [NAME [FILE=PATH...]]: a busybox-static root imported as
# an image, with each FILE copied to PATH in it (mode kept).
e2e_busybox_image() {
    local name=${1:-nvmevol-e2e/busybox:latest} extra
    [ $# -gt 0 ] && shift
    docker image inspect "$name" >/dev/null 2>&1 && return 0
    local bb root
    bb=$(command -v busybox || true)
    [ -x /bin/busybox ] && bb=/bin/busybox
    [ -n "$bb" ] || e2e_die "busybox not installed"
    if ldd "$bb" >/dev/null 2>&1; then
        e2e_die "$bb is dynamically linked; install busybox-static"
    fi
    root=$(mktemp -d "$E2E_WORK/busybox-root.XXXXXX")
    # No /data in the image: Docker copies the ownership and mode of an image
    # directory onto an empty volume mounted over it ("copy-up"), which would
    # hide the plugin's uid/gid/mode options.
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,tmp,etc,root}
    chmod 1777 "$root/tmp"
    cp "$bb" "$root/bin/busybox"
    local applet
    for applet in $("$root/bin/busybox" --list); do
        [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    for extra in "$@"; do
        install -D -m "$(stat -c %a "${extra%%=*}")" "${extra%%=*}" "$root/${extra#*=}"
    done
    tar -C "$root" -c . | docker import \
        -c 'ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin' -c 'CMD ["/bin/sh"]' \
        - "$name" >/dev/null || e2e_die "docker import $name failed"
    rm -rf "$root"
}

# e2e_postgres_tarball: print the path of a cached tarball of a Debian
# bookworm minbase root with PostgreSQL 15 (debootstrap, ~40 s the first time).
e2e_postgres_tarball() {
    local tarball=$E2E_CACHE/bookworm-postgresql.tar
    if [ -s "$tarball" ]; then
        echo "$tarball"
        return 0
    fi
    mkdir -p "$E2E_CACHE"
    local root=$E2E_CACHE/bookworm-postgresql.root
    rm -rf "$root"
    e2e_log "debootstrap bookworm + postgresql into $root (once; cached)"
    local mirror
    mirror=$(awk '/^deb / && $3 ~ /bookworm$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
    if [ -z "$mirror" ]; then
        mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
    fi
    debootstrap --variant=minbase --include=postgresql,postgresql-contrib bookworm \
        "$root" ${mirror:+"$mirror"} >"$E2E_CACHE/debootstrap.log" 2>&1 ||
        { tail -n 20 "$E2E_CACHE/debootstrap.log" >&2; e2e_die "debootstrap failed"; }
    _e2e_unmount_under "$root"   # debootstrap's /proc etc., if it was interrupted
    # debootstrap leaves the package cache and lists; not needed in the image.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # The Debian package creates a cluster in /var/lib/postgresql/15/main; the
    # image uses its own PGDATA on the volume instead.
    rm -rf "$root/var/lib/postgresql/15/main"
    # An entrypoint like the official image's: initdb on first start, then
    # postgres with the given arguments.  No network: the unix socket only.
    mkdir -p "$root/usr/local/bin"
    cat >"$root/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "$1" = postgres ] || [ "${1#-}" != "$1" ]; then
    [ "$1" = postgres ] && shift
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
        initdb --auth=trust --encoding=UTF8 --no-instructions -D "$PGDATA" >/dev/null
    fi
    exec postgres -D "$PGDATA" -c listen_addresses= \
        -c unix_socket_directories=/var/run/postgresql "$@"
fi
exec "$@"
SH
    chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"
    # Debian gives postgres a dynamic system uid (about 100); the official
    # postgres image and examples/postgres use 999:999.  Renumber so the image,
    # the example's driver_opts and the e2e tests agree.
    chroot "$root" groupmod -g 999 postgres
    chroot "$root" usermod -u 999 -g 999 postgres
    mkdir -p "$root/var/run/postgresql"
    chroot "$root" chown -R postgres:postgres /var/run/postgresql /var/lib/postgresql \
        /etc/postgresql /var/log/postgresql
    chmod 2775 "$root/var/run/postgresql"
    tar -C "$root" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
    echo "$tarball"
}

# e2e_postgres_uid: uid:gid of the postgres user in the cached root.
e2e_postgres_uid() {
    local tarball
    tarball=$(e2e_postgres_tarball) || return 1
    tar -xOf "$tarball" ./etc/passwd | awk -F: '$1 == "postgres" { print $3 ":" $4 }'
}

# e2e_postgres_image [NAME]: import the cached root as a PostgreSQL image.
e2e_postgres_image() {
    local name=${1:-nvmevol-e2e/postgres:15}
    docker image inspect "$name" >/dev/null 2>&1 && return 0
    local tarball
    tarball=$(e2e_postgres_tarball) || e2e_die "no postgres root"
    docker import \
        -c 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV PGDATA=/var/lib/postgresql/data' \
        -c 'ENV LANG=C.UTF-8' \
        -c 'USER postgres' \
        -c 'WORKDIR /var/lib/postgresql' \
        -c 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
        -c 'CMD ["postgres"]' \
        - "$name" <"$tarball" >/dev/null || e2e_die "docker import $name failed"
}

# ------------------------------------------------------------- loop devices

# e2e_make_loop_xfs LABEL SIZE_MB: a file-backed loop device (direct I/O)
# with an XFS filesystem labelled LABEL.  Prints the device.
e2e_make_loop_xfs() {
    local label=$1 size=${2:-256} file dev
    mkdir -p "$E2E_LOOP_DIR"
    file=$E2E_LOOP_DIR/$label.img
    rm -f "$file"
    truncate -s "${size}M" "$file"
    dev=$(losetup --find --show --direct-io=on "$file") || e2e_die "losetup $file failed"
    echo "$dev $file" >>"$E2E_WORK/loops.list"
    mkfs.xfs -q -f -L "$label" "$dev" >/dev/null || e2e_die "mkfs.xfs $dev failed"
    udevadm settle 2>/dev/null || true
    echo "$dev"
}

# --------------------------------------------------------------------- plugin

# e2e_plugin_pid [PLUGIN]: host pid of the plugin's process (empty if none).
e2e_plugin_pid() {
    local id
    id=$(docker plugin inspect -f '{{.Id}}' "${1:-$E2E_PLUGIN}" 2>/dev/null) || return 0
    # runc state for managed plugins lives in containerd namespace plugins.moby
    local state
    for state in "$E2E_EXEC_ROOT"/runtime-runc/plugins.moby/"$id"/state.json; do
        [ -f "$state" ] && jq -r '.init_process_pid' "$state" && return 0
    done
    return 0
}

e2e_plugin_id() {
    docker plugin inspect -f '{{.Id}}' "${1:-$E2E_PLUGIN}" 2>/dev/null
}

# e2e_propagated_mount [PLUGIN]: the host directory of its PropagatedMount.
e2e_propagated_mount() {
    local id
    id=$(e2e_plugin_id "$@") || return 1
    echo "$E2E_DATA_ROOT/plugins/$id/propagated-mount"
}

# ------------------------------------------------------- the common fixture

# XFS labels have at most 12 bytes, and the daemon limits the prefix to 12:
# a per-run prefix keeps the plugin away from every other nvmevol-labelled
# filesystem on the machine (another run's, a developer's).
: "${E2E_PREFIX:=nvt$(printf '%04x' $((RANDOM)))}"
E2E_STATE_DIR=$E2E_WORK/state
E2E_PARTITION_ROOT=/run/nvmevol/partitions
E2E_LOOP_DEVS=()

# e2e_setup_plugin_env [--registry]: a fresh private dockerd (and registry),
# two XFS loop partitions labelled ${E2E_PREFIX}a/b, and the plugin built and
# installed as $E2E_PLUGIN with that label prefix and a per-run state dir.
# E2E_PLUGIN_BINARY=PATH packages PATH instead of building with meson.
e2e_setup_plugin_env() {
    local t0=$SECONDS
    # A fresh engine each run: no volume DB or plugin left from a run that died.
    rm -rf "$E2E_DATA_ROOT" "$E2E_EXEC_ROOT" "$E2E_STATE_DIR" "$E2E_REGISTRY_DIR"
    mkdir -p "$E2E_STATE_DIR"
    e2e_start_dockerd
    [ "${1:-}" = --registry ] && e2e_start_registry
    E2E_LOOP_DEVS+=("$(e2e_make_loop_xfs "${E2E_PREFIX}a" "$E2E_PART_MB")")
    E2E_LOOP_DEVS+=("$(e2e_make_loop_xfs "${E2E_PREFIX}b" "$E2E_PART_MB")")
    e2e_log "partitions: ${E2E_LOOP_DEVS[*]} (labels ${E2E_PREFIX}a, ${E2E_PREFIX}b)"
    e2e_build_plugin
    # The command goes to the work directory, never to the shared /usr/local/bin.
    if ! "$E2E_REPO/plugin/install.sh" --replace --name "$E2E_PLUGIN" --cli "$E2E_WORK/bin/nvmevol" \
            --legacy-state "$E2E_WORK/no-legacy-state" \
            "NVMEVOL_LABEL_PREFIX=$E2E_PREFIX" "NVMEVOL_LOG_LEVEL=debug" \
            "state.source=$E2E_STATE_DIR" >"$E2E_WORK/install.log" 2>&1; then
        cat "$E2E_WORK/install.log" >&2
        tail -n 30 "$E2E_DOCKERD_LOG" >&2
        e2e_die "plugin/install.sh failed"
    fi
    e2e_log "setup done in $((SECONDS - t0)) s; plugin pid $(e2e_plugin_pid)"
}

# e2e_build_plugin: plugin/build.sh (incremental) into plugin/out/nvmevol.
# E2E_PLUGIN_BINARY=PATH packages PATH instead of building with meson.
e2e_build_plugin() {
    local build_args=()
    [ -n "${E2E_PLUGIN_BINARY:-}" ] && build_args=(--binary "$E2E_PLUGIN_BINARY")
    if ! "$E2E_REPO/plugin/build.sh" "${build_args[@]}" >"$E2E_WORK/build.log" 2>&1; then
        cat "$E2E_WORK/build.log" >&2
        e2e_die "plugin/build.sh failed"
    fi
    grep 'rootfs size' "$E2E_WORK/build.log" | sed 's/^/# /'
}

# e2e_plugin_dir_variant TAG: a copy of plugin/out/nvmevol whose rootfs
# differs by one file (20.10 refuses a second plugin with identical content:
# "content sha256:...: already exists").  Prints its path.
e2e_plugin_dir_variant() {
    local dir=$E2E_WORK/plugin-$1
    rm -rf "$dir"
    cp -a "$E2E_REPO/plugin/out/nvmevol" "$dir"
    echo "$1" >"$dir/rootfs/etc/nvmevol-e2e-tag"
    echo "$dir"
}

# e2e_push_plugin_variant TAG [REGISTRY]: create REGISTRY/nvmevol:TAG (default
# registry localhost:<port of E2E_REGISTRY_ADDR>) from a variant, push it, and
# drop the local copy.  Prints the reference.
e2e_push_plugin_variant() {
    local ref=${2:-localhost:${E2E_REGISTRY_ADDR##*:}}/nvmevol:$1 dir
    dir=$(e2e_plugin_dir_variant "$1")
    docker plugin rm -f "$ref" >/dev/null 2>&1
    docker plugin create "$ref" "$dir" >/dev/null &&
        docker plugin push "$ref" >/dev/null &&
        docker plugin rm "$ref" >/dev/null || return 1
    echo "$ref"
}

# partition_roots: the root of each of our XFS partitions, as the plugin has
# them mounted (seen through /proc/<plugin pid>/root/run/nvmevol/partitions).
partition_roots() {
    local pid dev uuid
    pid=$(e2e_plugin_pid)
    [ -n "$pid" ] || return 0
    for dev in "${E2E_LOOP_DEVS[@]}"; do
        uuid=$(blkid -s UUID -o value "$dev")
        [ -d "/proc/$pid/root$E2E_PARTITION_ROOT/$uuid" ] &&
            echo "/proc/$pid/root$E2E_PARTITION_ROOT/$uuid"
    done
}

# find_on_partitions RELPATH: print where RELPATH exists on our partitions.
find_on_partitions() {
    local r
    for r in $(partition_roots); do
        [ -e "$r/$1" ] && echo "$r/$1"
    done
}

# --------------------------------------------------------------------- cleanup

# e2e_cleanup [--force]: remove everything this run created; safe to call
# twice.  With E2E_KEEP=1 (and no --force) it leaves everything running.
e2e_cleanup() {
    set +e
    if [ "${E2E_KEEP:-0}" = 1 ] && [ "${1:-}" != --force ]; then
        e2e_log "E2E_KEEP=1: leaving dockerd ($E2E_SOCK), registry and loops; 'e2e_cleanup --force' removes them"
        return 0
    fi
    local hook
    for hook in "${E2E_CLEANUP_HOOKS[@]}"; do
        "$hook"
    done
    e2e_remove_containers
    e2e_stop_dockerd
    e2e_cleanup_common
}

# e2e_cleanup_common: what every fixture removes once its dockerds are
# stopped: the registry, the loop devices and the work files.
e2e_cleanup_common() {
    e2e_stop_registry
    e2e_detach_loops
    rm -rf "$E2E_LOOP_DIR" "$E2E_WORK"/plugin-* "$E2E_WORK"/busybox-root.*
    return 0
}

# e2e_remove_containers: remove every container of our dockerd (if it runs),
# so that their volume mounts go away before it stops.  Always names our
# socket: never the default daemon's containers.
e2e_remove_containers() {
    local cs
    e2e_dockerd_alive || return 0
    cs=$(docker -H "unix://$E2E_SOCK" ps -aq 2>/dev/null)
    [ -n "$cs" ] && docker -H "unix://$E2E_SOCK" rm -f $cs >/dev/null 2>&1
    return 0
}

# e2e_detach_loops: detach the loop devices of $E2E_WORK/loops.list (only if
# they still hold our backing file) and delete the files.  Mounts of them
# anywhere (e.g. left in a dead namespace's propagation) are gone once dockerd
# and the plugin are.
e2e_detach_loops() {
    local m dev file
    if [ -f "$E2E_WORK/loops.list" ]; then
        while read -r dev file; do
            [ -n "$dev" ] || continue
            # An image attached twice over a run is listed twice: the first
            # line's rm leaves the later device's backing file "(deleted)".
            if [ "$(losetup -nO BACK-FILE "$dev" 2>/dev/null | sed 's/ *$//; s/ (deleted)$//')" = "$file" ]; then
                # umount any host mount of it first
                awk -v d="$dev" '$1 == d { print $2 }' /proc/mounts | sort -r |
                    while read -r m; do umount -l "$m"; done
                # A plugin's mount namespace may still be going away: retry briefly.
                local try
                for try in 1 2 3 4 5 6 7 8 9 10; do
                    losetup -d "$dev" 2>/dev/null && break
                    sleep 0.5
                done
            fi
            rm -f "$file"
        done <"$E2E_WORK/loops.list"
        rm -f "$E2E_WORK/loops.list"
    fi
}

# e2e_init: install packages, trap EXIT, clean leftovers of a crashed run.
e2e_init() {
    [ "$(id -u)" = 0 ] || e2e_die "e2e tests need root"
    e2e_install_packages
    mkdir -p "$E2E_WORK" "$E2E_CACHE"
    # Leftovers from an earlier run that died without its trap (or was kept).
    e2e_cleanup --force
    trap 'e2e_cleanup' EXIT
    trap 'exit 130' INT TERM
}
