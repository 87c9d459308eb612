#!/bin/bash
# Create and enable the nvmevol managed plugin from plugin/out/nvmevol, and
# install the `nvmevol` command on this host (the Docker host).
#
# Usage: plugin/install.sh [--build] [--replace] [--name NAME] [--no-enable]
#                          [--binary PATH] [--cli PATH | --no-cli] [--no-man]
#                          [--legacy-state DIR] [KEY=VALUE...]
#        plugin/install.sh --upgrade REF [--name NAME] [--cli PATH | --no-cli] [--no-man]
#                          [--legacy-state DIR] [KEY=VALUE...]
#        plugin/install.sh --host [--build] [--binary PATH] [--cli PATH] [--no-man]
#                          [--unit-dir DIR] [--no-enable] [NVMEVOL_KEY=VALUE...]
#        plugin/install.sh --uninstall [--unit-dir DIR]
#   --host        install nvmevol as a host service instead (for Podman, and for
#                 Docker without a managed plugin): the binary as the command
#                 (--cli, default /usr/local/bin/nvmevol; --binary PATH, else
#                 the one plugin/build.sh built), plugin/nvmevol.service in
#                 --unit-dir (default /etc/systemd/system), the settings as
#                 Environment= lines of the drop-in nvmevol.service.d/settings.conf,
#                 then systemctl enable --now (unless --no-enable, or systemd
#                 does not run). Refused while a managed plugin NAME exists.
#                 Docker finds the service by its socket under the name
#                 nvmevol, and by the spec file --spec-dir/nvmevol:latest.spec
#                 (default /etc/docker/plugins) under the managed plugin's
#                 name, which Docker keeps for the volumes made through it
#                 Volumes and their data stay where they are: see
#                 "As a host service" in README.md for the move between modes
#   --uninstall   stop and disable the host service, remove its unit,
#                 drop-in and spec file; the command, the state (/var/lib/nvmevol), the
#                 volumes and their data stay
#   --build       run plugin/build.sh first (with --binary PATH if given)
#   --replace     if NAME exists: docker plugin disable -f and rm -f it first
#                 (volumes and their data are kept: they live on the XFS
#                 partitions; see STATE in nvmevol-plugin(7))
#   --upgrade REF docker plugin upgrade NAME to REF (a registry reference,
#                 e.g. localhost:5000/nvmevol:0.2.1): disables NAME (-f),
#                 upgrades, sets again the mount sources Docker 20.10 reverts
#                 on upgrade (state.source), applies KEY=VALUE, enables
#   --name NAME   plugin name (default nvmevol:latest)
#   --no-enable   leave the plugin disabled after create/set
#   --cli PATH    where to install the nvmevol command, copied from the
#                 installed plugin's rootfs (default /usr/local/bin/nvmevol)
#   --no-cli      do not install the command (nor its manual pages)
#   --no-man      do not install the manual pages; by default nvmevol.8 and
#                 nvmevol-plugin.7 are built from src/man/*.scd with scdoc
#                 (skipped, with a note, when scdoc is not installed) into
#                 the share/man beside the command's bin/ directory
#                 (/usr/local/share/man/man8 and man7 by default)
#   --legacy-state DIR
#                 the state directory of nvmevol 0.1 (default /var/lib/nvmevol):
#                 if it holds an index and the plugin does not use it, it is
#                 imported into the plugin (nvmevol state import) and renamed
#   KEY=VALUE     docker plugin set before enabling, e.g.
#                 NVMEVOL_LABEL_PREFIX=fast state.source=/srv/nvmevol
# Uses whatever daemon DOCKER_HOST points at; run it on the Docker host.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NAME=nvmevol:latest
BUILD=0
REPLACE=0
ENABLE=1
UPGRADE=
CLI=/usr/local/bin/nvmevol
MAN=1
LEGACY=/var/lib/nvmevol
HOST=
UNIT_DIR=/etc/systemd/system
SPEC_DIR=/etc/docker/plugins
HOST_SOCKET=/run/docker/plugins/nvmevol/nvmevol.sock
BINARY=
BUILD_ARGS=()
SETTINGS=()

while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=1; shift ;;
        --replace) REPLACE=1; shift ;;
        --upgrade) UPGRADE=$2; shift 2 ;;
        --name) NAME=$2; shift 2 ;;
        --no-enable) ENABLE=0; shift ;;
        --binary) BUILD_ARGS+=(--binary "$2"); BINARY=$2; shift 2 ;;
        --host) HOST=install; shift ;;
        --uninstall) HOST=uninstall; shift ;;
        --unit-dir) UNIT_DIR=$2; shift 2 ;;
        --spec-dir) SPEC_DIR=$2; shift 2 ;;
        --cli) CLI=$2; shift 2 ;;
        --no-cli) CLI=; shift ;;
        --no-man) MAN=0; shift ;;
        --legacy-state) LEGACY=$(realpath -m "$2"); shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *=*) SETTINGS+=("$1"); shift ;;
        *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
case ${NAME##*/} in *:*) ;; *) NAME=$NAME:latest ;; esac

# A state.source given here must exist: Docker does not create bind sources.
for s in "${SETTINGS[@]}"; do
    case $s in state.source=*) mkdir -p "${s#state.source=}" ;; esac
done

# The command on the host: the very binary of the installed plugin (its
# libraries are Debian's: libmicrohttpd12, libjansson4, libmount1, libblkid1).
install_cli() {
    [ -n "$CLI" ] || return 0
    local root id src=${1:-}
    if [ -z "$src" ]; then
        root=$(docker info -f '{{.DockerRootDir}}')
        id=$(docker plugin inspect -f '{{.Id}}' "$NAME")
        src=$root/plugins/$id/rootfs/usr/bin/nvmevol
    fi
    mkdir -p "$(dirname "$CLI")"
    install -m 0755 "$src" "$CLI.new"
    mv -f "$CLI.new" "$CLI"
    if ! "$CLI" --version >/dev/null 2>&1; then
        echo "install.sh: $CLI does not run here (missing libraries?):" >&2
        ldd "$CLI" | grep 'not found' >&2 || true
        echo "install.sh: apt-get install libmicrohttpd12 libjansson4 libmount1 libblkid1" >&2
        return 1
    fi
    echo "installed $CLI ($("$CLI" --version))"
}

# The manual pages of the command, beside it: <prefix>/bin/nvmevol gets
# <prefix>/share/man/man8/nvmevol.8 and man7/nvmevol-plugin.7.
install_man() {
    [ -n "$CLI" ] && [ "$MAN" = 1 ] || return 0
    if ! command -v scdoc >/dev/null; then
        echo "install.sh: scdoc is not installed: manual pages not installed (they read as text in $REPO/src/man/)"
        return 0
    fi
    local man page sec
    man=$(realpath -m "$(dirname "$CLI")/../share/man")
    for page in nvmevol.8 nvmevol-plugin.7; do
        sec=${page##*.}
        mkdir -p "$man/man$sec"
        scdoc <"$REPO/src/man/$page.scd" >"$man/man$sec/$page.new"
        chmod 0644 "$man/man$sec/$page.new"
        mv -f "$man/man$sec/$page.new" "$man/man$sec/$page"
    done
    echo "installed the manual pages nvmevol(8), nvmevol-plugin(7) in $man"
}

# nvmevol 0.1 kept its state in $LEGACY on the host; the plugin now keeps it
# in Docker's plugin directory unless state.source says otherwise.
import_legacy_state() {
    [ "$ENABLE" = 1 ] && [ -n "$CLI" ] && [ -d "$LEGACY/index" ] || return 0
    # Only into the default location: a plugin given a state.source keeps that.
    [ "$("$CLI" status --plugin "$NAME" --json | jq -r .state.location)" = plugin-directory ] || return 0
    echo "importing the volume index of $LEGACY (nvmevol 0.1) into $NAME"
    "$CLI" state import "$LEGACY" --plugin "$NAME"
}

# ------------------------------------------------------------ host service

systemd_runs() { [ -d /run/systemd/system ]; }

install_host() {
    local unit=$UNIT_DIR/nvmevol.service dropin=$UNIT_DIR/nvmevol.service.d s
    [ -n "$CLI" ] || { echo "install.sh: --host needs the command (--cli PATH): the unit runs it" >&2; exit 2; }
    # Docker would prefer a managed plugin of that name to the service's socket.
    if docker plugin inspect "$NAME" >/dev/null 2>&1; then
        echo "install.sh: the managed plugin $NAME is installed; move its volumes first (README.md, \"As a host service\")" >&2
        exit 1
    fi
    for s in "${SETTINGS[@]}"; do
        case $s in NVMEVOL_*=*) ;; *) echo "install.sh: --host takes NVMEVOL_KEY=VALUE settings, not $s" >&2; exit 2 ;; esac
    done
    if [ -z "$BINARY" ]; then
        [ "$BUILD" = 1 ] && "$REPO/plugin/build.sh"
        BINARY=$REPO/plugin/out/nvmevol/rootfs/usr/bin/nvmevol
        [ -x "$BINARY" ] || { echo "install.sh: $BINARY is not built; run plugin/build.sh (or pass --build)" >&2; exit 1; }
    fi
    install_cli "$BINARY"
    install_man
    mkdir -p "$dropin"
    sed "s|^ExecStart=.*|ExecStart=$CLI|" "$REPO/plugin/nvmevol.service" >"$unit.new"
    chmod 0644 "$unit.new"
    mv -f "$unit.new" "$unit"
    # The settings: those given now, else the drop-in stays as it is.
    if [ "${#SETTINGS[@]}" -gt 0 ] || [ ! -f "$dropin/settings.conf" ]; then
        {
            echo "# nvmevol settings (SETTINGS in nvmevol-plugin(7)); then: systemctl restart nvmevol"
            echo "[Service]"
            for s in "${SETTINGS[@]}"; do echo "Environment=$s"; done
        } >"$dropin/settings.conf.new"
        mv -f "$dropin/settings.conf.new" "$dropin/settings.conf"
    fi
    # Volumes made through the managed plugin are "nvmevol:latest" in Docker's
    # records: a spec file of that name leads Docker to the service after a move.
    mkdir -p "$SPEC_DIR"
    echo "unix://$HOST_SOCKET" >"$SPEC_DIR/nvmevol:latest.spec"
    echo "installed $unit, $dropin/settings.conf and $SPEC_DIR/nvmevol:latest.spec"
    if ! systemd_runs; then
        echo "install.sh: systemd does not run here: start $CLI with the unit's Environment= yourself"
    elif [ "$ENABLE" = 1 ]; then
        systemctl daemon-reload
        systemctl enable --now nvmevol.service
        systemctl --no-pager status nvmevol.service | head -n 3
    else
        systemctl daemon-reload
    fi
}

uninstall_host() {
    local unit=$UNIT_DIR/nvmevol.service dropin=$UNIT_DIR/nvmevol.service.d
    if systemd_runs && [ -f "$unit" ]; then
        systemctl disable --now nvmevol.service
    fi
    rm -f "$unit" "$dropin/settings.conf" "$SPEC_DIR/nvmevol:latest.spec"
    rmdir "$dropin" 2>/dev/null || true
    systemd_runs && systemctl daemon-reload
    echo "removed $unit; kept $CLI, the state in /var/lib/nvmevol and every volume on its partition"
}

case $HOST in
    install) install_host; exit 0 ;;
    uninstall) uninstall_host; exit 0 ;;
esac

if [ -n "$UPGRADE" ]; then
    docker plugin inspect "$NAME" >/dev/null || exit 1
    # `docker plugin set x.source=...` is stored in Config.Mounts, which the
    # upgrade replaces: the plugin would come back with the new config's
    # default source while `docker plugin inspect` still shows the old one in
    # Settings.Mounts.  Keep them and set them again, except the old default
    # (the state directory of 0.1, imported below) and the new one.
    mapfile -t KEEP < <(docker plugin inspect "$NAME" |
        jq -r --arg legacy "$LEGACY" '.[0].Settings.Mounts[] |
               select(.Source != null and ((.Settable // []) | index("source"))) |
               select(.Source != $legacy and .Source != "/dev") |
               "\(.Name).source=\(.Source)"')
    if [ "$(docker plugin inspect -f '{{.Enabled}}' "$NAME")" = true ]; then
        docker plugin disable -f "$NAME" >/dev/null
    fi
    docker plugin upgrade --grant-all-permissions --skip-remote-check "$NAME" "$UPGRADE"
    if [ "$((${#KEEP[@]} + ${#SETTINGS[@]}))" -gt 0 ]; then
        docker plugin set "$NAME" "${KEEP[@]}" "${SETTINGS[@]}"
    fi
    [ "$ENABLE" = 1 ] && docker plugin enable "$NAME" >/dev/null
    install_cli
    install_man
    import_legacy_state
    docker plugin ls --filter "capability=volumedriver"
    exit 0
fi

[ "$BUILD" = 1 ] && "$REPO/plugin/build.sh" "${BUILD_ARGS[@]}"
DIR=$REPO/plugin/out/nvmevol
[ -f "$DIR/config.json" ] && [ -x "$DIR/rootfs/usr/bin/nvmevol" ] ||
    { echo "install.sh: $DIR is not built; run plugin/build.sh (or pass --build)" >&2; exit 1; }

if docker plugin inspect "$NAME" >/dev/null 2>&1; then
    if [ "$REPLACE" != 1 ]; then
        echo "install.sh: plugin $NAME already exists; pass --replace to replace it" >&2
        exit 1
    fi
    if [ "$(docker plugin inspect -f '{{.Enabled}}' "$NAME")" = true ]; then
        docker plugin disable -f "$NAME" >/dev/null
    fi
    docker plugin rm -f "$NAME" >/dev/null
fi

docker plugin create "$NAME" "$DIR" >/dev/null
if [ "${#SETTINGS[@]}" -gt 0 ]; then
    docker plugin set "$NAME" "${SETTINGS[@]}"
fi
if [ "$ENABLE" = 1 ]; then
    docker plugin enable "$NAME" >/dev/null
fi
install_cli
install_man
import_legacy_state
docker plugin ls --filter "capability=volumedriver"
