#!/bin/bash
# Create and enable the nvmevol managed plugin from plugin/out/nvmevol.
#
# Usage: plugin/install.sh [--build] [--replace] [--name NAME] [--no-enable]
#                          [--binary PATH] [KEY=VALUE...]
#   --build       run plugin/build.sh first (with --binary PATH if given)
#   --replace     if NAME exists: docker plugin disable -f and rm -f it first
#                 (volumes and their data are kept: they live on the XFS
#                 partitions and in the host state directory)
#   --upgrade REF docker plugin upgrade NAME to REF (a registry reference,
#                 e.g. localhost:5000/nvmevol:0.2): disables NAME (-f), upgrades,
#                 re-applies the mount sources (state.source) that Docker 20.10
#                 silently reverts on upgrade, applies KEY=VALUE, enables
#   --name NAME   plugin name (default nvmevol:latest)
#   --no-enable   leave the plugin disabled after create/set
#   KEY=VALUE     docker plugin set before enabling, e.g.
#                 NVMEVOL_LABEL_PREFIX=fast state.source=/srv/nvmevol
# Uses whatever daemon DOCKER_HOST points at.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NAME=nvmevol:latest
BUILD=0
REPLACE=0
ENABLE=1
UPGRADE=
BUILD_ARGS=()
SETTINGS=()

while [ $# -gt 0 ]; do
    case $1 in
        --build) BUILD=1; shift ;;
        --replace) REPLACE=1; shift ;;
        --upgrade) UPGRADE=$2; shift 2 ;;
        --name) NAME=$2; shift 2 ;;
        --no-enable) ENABLE=0; shift ;;
        --binary) BUILD_ARGS+=(--binary "$2"); shift 2 ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *=*) SETTINGS+=("$1"); shift ;;
        *) echo "install.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
case $NAME in *:*) ;; *) NAME=$NAME:latest ;; esac

if [ -n "$UPGRADE" ]; then
    docker plugin inspect "$NAME" >/dev/null || exit 1
    # `docker plugin set x.source=...` is stored in Config.Mounts, which the
    # upgrade replaces: the plugin would come back with the new config's
    # default source while `docker plugin inspect` still shows the old one in
    # Settings.Mounts.  Keep them and set them again.
    mapfile -t KEEP < <(docker plugin inspect "$NAME" |
        jq -r '.[0].Settings.Mounts[] | select(.Source != null and ((.Settable // []) | index("source"))) |
               "\(.Name).source=\(.Source)"')
    if [ "$(docker plugin inspect -f '{{.Enabled}}' "$NAME")" = true ]; then
        docker plugin disable -f "$NAME" >/dev/null
    fi
    docker plugin upgrade --grant-all-permissions --skip-remote-check "$NAME" "$UPGRADE"
    if [ "$((${#KEEP[@]} + ${#SETTINGS[@]}))" -gt 0 ]; then
        docker plugin set "$NAME" "${KEEP[@]}" "${SETTINGS[@]}"
    fi
    [ "$ENABLE" = 1 ] && docker plugin enable "$NAME" >/dev/null
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

# The state bind mount's source must exist on the host: Docker does not
# create missing bind sources of plugin mounts (enable fails otherwise).
STATE_SRC=/var/lib/nvmevol
for s in "${SETTINGS[@]}"; do
    case $s in state.source=*) STATE_SRC=${s#state.source=} ;; esac
done
mkdir -p "$STATE_SRC"

docker plugin create "$NAME" "$DIR" >/dev/null
if [ "${#SETTINGS[@]}" -gt 0 ]; then
    docker plugin set "$NAME" "${SETTINGS[@]}"
fi
if [ "$ENABLE" = 1 ]; then
    docker plugin enable "$NAME" >/dev/null
fi
docker plugin ls --filter "capability=volumedriver"
