#!/bin/bash
# The whole user path on a fresh Debian 12 machine, as root:
#   1. installs what is missing (docker.io, xfsprogs, build dependencies)
#   2. uses the dockerd that answers (DOCKER_HOST or the default socket), or
#      starts one of its own without network on /var/lib/nvmevol-demo/docker.sock
#   3. makes a 512 MiB file-backed loop XFS labelled nvmevol-demo, unless an
#      XFS labelled nvmevol* already exists
#   4. builds the plugin and installs it as nvmevol:latest (reinstalls it if
#      present; volumes and data are kept), and the `nvmevol` command as
#      /usr/local/bin/nvmevol
#   5. creates the volume nvmevol-demo, runs a container that writes to it, and
#      shows `docker volume inspect` and `nvmevol status`
# Usage: plugin/demo.sh            run (again: it is idempotent)
#        plugin/demo.sh --cleanup  undo what the demo made
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=/var/lib/nvmevol-demo
LABEL=nvmevol-demo
VOLUME=nvmevol-demo
IMAGE=nvmevol-demo/busybox:latest
PIDFILE=$WORK/dockerd.pid
OWN_SOCK=$WORK/docker.sock
CLI=/usr/local/bin/nvmevol

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
mkdir -p "$WORK"

own_dockerd_alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

pick_docker() {
    if own_dockerd_alive; then
        export DOCKER_HOST=unix://$OWN_SOCK
        return 0
    fi
    docker info >/dev/null 2>&1
}

install_packages() {
    local want=(docker.io xfsprogs busybox-static jq meson ninja-build gcc pkg-config
                libmicrohttpd-dev libjansson-dev libmount-dev libblkid-dev) missing=() p
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
}

start_own_dockerd() {
    say "no dockerd answers; starting one on $OWN_SOCK (no network)"
    mkdir -p "$WORK/data-root" "$WORK/exec"
    setsid dockerd --data-root "$WORK/data-root" --exec-root "$WORK/exec" \
        -H "unix://$OWN_SOCK" --pidfile "$PIDFILE" \
        --bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
        >>"$WORK/dockerd.log" 2>&1 </dev/null &
    export DOCKER_HOST=unix://$OWN_SOCK
    local i
    for i in $(seq 1 60); do
        docker info >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    tail -n 20 "$WORK/dockerd.log" >&2
    die "dockerd did not start"
}

nvmevol_xfs_exists() {
    blkid -t TYPE=xfs -o export 2>/dev/null | grep -q '^LABEL=nvmevol'
}

make_loop() {
    local file=$WORK/$LABEL.img dev
    if [ -f "$WORK/loop.dev" ] && dev=$(cat "$WORK/loop.dev") &&
       [ "$(losetup -nO BACK-FILE "$dev" 2>/dev/null | sed 's/ *$//')" = "$file" ]; then
        echo "using the demo's $dev ($LABEL) from an earlier run"
        return 0
    fi
    say "making a 512 MiB file-backed XFS labelled $LABEL"
    truncate -s 512M "$file"
    dev=$(losetup --find --show --direct-io=on "$file")
    echo "$dev" >"$WORK/loop.dev"
    # Format only a new file: an existing one keeps the demo's data.
    blkid -p "$dev" >/dev/null 2>&1 || mkfs.xfs -q -L "$LABEL" "$dev"
    echo "$dev: $(blkid -o export "$dev" | grep -E '^(LABEL|TYPE)=' | tr '\n' ' ')"
}

busybox_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    local root
    root=$(mktemp -d)
    mkdir -p "$root/bin" "$root/tmp" "$root/etc"
    cp /bin/busybox "$root/bin/busybox"
    for a in $("$root/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
    tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
    rm -rf "$root"
}

cleanup() {
    pick_docker || true
    if docker info >/dev/null 2>&1; then
        say "removing the demo container, volume, plugin and image"
        docker rm -f $(docker ps -aq --filter label=nvmevol-demo) >/dev/null 2>&1 || true
        docker volume rm "$VOLUME" >/dev/null 2>&1 || true
        if docker plugin inspect nvmevol:latest >/dev/null 2>&1; then
            docker plugin disable -f nvmevol:latest >/dev/null 2>&1 || true
            docker plugin rm -f nvmevol:latest >/dev/null
        fi
        docker image rm "$IMAGE" >/dev/null 2>&1 || true
    fi
    if own_dockerd_alive; then
        say "stopping the demo's dockerd"
        local pid
        pid=$(cat "$PIDFILE")
        kill -TERM "$pid"
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    # Unmount what that dockerd left (deepest first), then the loop device.
    awk -v d="$WORK/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
        while read -r m; do umount -l "$m" 2>/dev/null || true; done
    if [ -f "$WORK/loop.dev" ]; then
        local dev
        dev=$(cat "$WORK/loop.dev")
        if [ "$(losetup -nO BACK-FILE "$dev" 2>/dev/null | sed 's/ *$//')" = "$WORK/$LABEL.img" ]; then
            say "detaching $dev"
            awk -v d="$dev" '$1 == d { print $2 }' /proc/mounts | while read -r m; do umount -l "$m"; done
            losetup -d "$dev"
        fi
    fi
    if [ -f "$WORK/cli-installed" ] && [ -x "$CLI" ]; then
        say "removing $CLI"
        rm -f "$CLI"
        # and the manual pages plugin/install.sh put beside it
        local man
        man=$(realpath -m "$(dirname "$CLI")/../share/man")
        rm -f "$man/man8/nvmevol.8" "$man/man7/nvmevol-plugin.7"
    fi
    rm -rf "$WORK"
}

if [ "${1:-}" = --cleanup ]; then
    cleanup
    exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--cleanup]"

install_packages
pick_docker || start_own_dockerd
echo "docker: ${DOCKER_HOST:-default socket} ($(docker version -f '{{.Server.Version}}'))"

if nvmevol_xfs_exists && [ ! -f "$WORK/loop.dev" ]; then
    say "using the existing nvmevol-labelled XFS filesystems:"
    blkid -t TYPE=xfs -o device | while read -r d; do
        blkid -s LABEL -o value "$d" | grep -q '^nvmevol' && echo "  $d $(blkid -s LABEL -o value "$d")"
    done
else
    make_loop
fi

say "building the plugin"
"$REPO/plugin/build.sh" | tail -n 1
say "installing nvmevol:latest and $CLI"
"$REPO/plugin/install.sh" --replace --cli "$CLI"
touch "$WORK/cli-installed"

busybox_image
say "docker volume create -d nvmevol -o uid=1000 -o gid=1000 -o mode=0750 $VOLUME"
docker volume create -d nvmevol -o uid=1000 -o gid=1000 -o mode=0750 "$VOLUME"
say "a container writes to it"
docker run --rm --network none --label nvmevol-demo -v "$VOLUME:/data" "$IMAGE" sh -c \
    'date >>/data/runs.txt; echo "runs so far:"; cat /data/runs.txt; grep " /data " /proc/self/mountinfo'
say "docker volume inspect $VOLUME"
docker volume inspect "$VOLUME"
say "nvmevol status (the admin command, on the host)"
"$CLI" status

cat <<MSG

Done. Try:
  ${DOCKER_HOST:+DOCKER_HOST=$DOCKER_HOST }docker run --rm -it --network none -v $VOLUME:/data $IMAGE sh
Clean up everything the demo made:
  $0 --cleanup
MSG
