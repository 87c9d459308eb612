#!/bin/bash
# Day-2 operations against a real Docker engine (Debian's docker.io 20.10), a
# local registry and file-backed XFS loops:
#   - the README's install, upgrade and admin commands, extracted from
#     README.md and run exactly as written (build, push, install from the
#     registry with nothing prepared on the host);
#   - where the state lives, and what survives a plugin crash, disable/enable,
#     a daemon restart or crash, an upgrade, rm + reinstall;
#   - every admin subcommand through the managed plugin: status, volume
#     show/set/resize/release/forget, partition adopt, state import;
#   - release: refused while a container or another mount namespace uses the
#     volume, and clearing the over-count left by a crash in the reply window
#     (strace kills the plugin right after it saved the count);
#   - the upgrade from nvmevol 0.1 (built from git history) with its state
#     directory, by the README's commands and by plugin/install.sh --upgrade;
#   - errors: several plugins, not root, a plugin older than the admin socket.
#
# The README's commands run in a private mount namespace whose /usr/local/bin
# is a copy (the command they install lands there, never in the machine's) and
# whose /var/lib is empty but for this run's work directory (a host without
# /var/lib/nvmevol; a 0.1 state directory is put there when a step needs it).
#
# Usage: tests/e2e/admin.sh [--list] [scenario...]
# Environment: E2E_WORK, E2E_REGISTRY_ADDR (see lib.sh), E2E_KEEP=1.
# Prints "ok - ..." / "not ok - ..." lines, the wall time and "N passed, N failed".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=readme.sh
. "$HERE/readme.sh"

SCENARIOS=(readme_install survive admin_block release backup evacuate forget_adopt several_root migration)

IMG=nvmevol-e2e/busybox:latest
RUN=(docker run --rm --network none)
REG=localhost:${E2E_REGISTRY_ADDR##*:}
PLUGIN=nvmevol:latest
NSBIN=$E2E_WORK/ns-usr-local-bin
NV=$NSBIN/nvmevol
# The README's variables. Labels are ${PREFIX}0 and ${PREFIX}1: at most 12 bytes.
export REGISTRY=$REG PREFIX=$E2E_PREFIX TAG DEVICE
LOOP_B=

# ------------------------------------------------------------------ helpers

plugin_id() { docker plugin inspect -f '{{.Id}}' "$PLUGIN" 2>/dev/null; }
state_dir() { echo "$E2E_DATA_ROOT/plugins/$(plugin_id)/propagated-mount/.state"; }
plugin_pid() { e2e_plugin_pid "$PLUGIN"; }
vjson() { "$NV" volume show "$1" --json 2>&1; }
mount_count() { vjson "$1" | jq -r '.Status.mount_count' 2>/dev/null; }

wait_plugin() {
    local i
    for i in $(seq 1 60); do
        "$NV" status --json >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}

# push_tag TAG: builds (a new build: its content differs) and pushes $REG/nvmevol:TAG with the README's build block.
push_tag() {
    TAG=$1
    run_readme build
    check_readme build
}

# A loop device with no filesystem yet (the README formats it).
raw_loop() {
    local file=$E2E_LOOP_DIR/$1.img dev
    mkdir -p "$E2E_LOOP_DIR"
    truncate -s 320M "$file"
    dev=$(losetup --find --show --direct-io=on "$file") || e2e_die "losetup $file failed"
    echo "$dev $file" >>"$E2E_WORK/loops.list"
    echo "$dev"
}

# ------------------------------------------------------------------- setup

setup() {
    e2e_init
    rm -rf "$E2E_DATA_ROOT" "$E2E_EXEC_ROOT" "$E2E_REGISTRY_DIR" "$NSBIN"
    mkdir -p "$NSBIN"
    cp -a /usr/local/bin/. "$NSBIN/"
    rm -f "$NV"
    e2e_start_dockerd
    e2e_start_registry
    e2e_busybox_image "$IMG"
    DEVICE=$(raw_loop "${E2E_PREFIX}0")
    HOST_CLI_BEFORE=$(stat -c '%i %Y' /usr/local/bin/nvmevol 2>/dev/null || echo absent)
    e2e_log "README variables: REGISTRY=$REGISTRY PREFIX=$PREFIX DEVICE=$DEVICE"
}

# --------------------------------------------------------------- scenarios

scenario_readme_install() {
    push_tag 0.2.0-e2e1
    # The privileges the install asks for (answered "no": nothing is installed).
    local prompt
    prompt=$(docker plugin install "$REG/nvmevol:0.2.0-e2e1" </dev/null 2>&1)
    e2e_eq "the install prompt asks to mount /dev twice (dev, and state's default), nothing else of the host" \
        "2 0" "$(grep -c 'mount: \[/dev\]' <<<"$prompt") $(grep -c '/var/lib' <<<"$prompt")"
    e2e_diag "$prompt"
    run_readme install
    check_readme install
    e2e_eq "the plugin is enabled, installed from the registry" "true $REG/nvmevol:0.2.0-e2e1" \
        "$(docker plugin inspect -f '{{.Enabled}} {{.PluginReference}}' "$PLUGIN" 2>&1)"
    e2e_no_match "no plugin mount needs /var/lib/nvmevol on the host" '/var/lib/nvmevol' \
        "$(docker plugin inspect "$PLUGIN" | jq -r '.[0].Settings.Mounts[].Source')"
    local st
    st=$(state_dir)
    e2e_check "the state is in Docker's directory of the plugin: $st/index/pgdata.json" test -f "$st/index/pgdata.json"
    e2e_eq "nvmevol status says so (JSON)" "plugin-directory $st" \
        "$("$NV" status --json | jq -r '"\(.state.location) \(.state.host_path)"' 2>&1)"
    e2e_match "nvmevol status (table) lists pgdata" '^pgdata +ready' "${OUTS[4]}"
    e2e_eq "the machine's /usr/local/bin/nvmevol was not touched" "$HOST_CLI_BEFORE" \
        "$(stat -c '%i %Y' /usr/local/bin/nvmevol 2>/dev/null || echo absent)"
    e2e_eq "the installed command is the plugin's version" "nvmevol 0.2.0" "$("$NV" --version 2>&1)"
    e2e_eq "pgdata is owned as asked" "999:999 700" "$("${RUN[@]}" -v pgdata:/data "$IMG" stat -c '%u:%g %a' /data 2>&1)"
}

# ls_check WHAT: the volumes and their data are there.
ls_check() {
    wait_plugin
    e2e_match "$1: pgdata listed" "^nvmevol:latest pgdata\$" "$(docker volume ls --format '{{.Driver}} {{.Name}}' 2>&1)"
    e2e_eq "$1: pgdata's data is readable" keep-me "$("${RUN[@]}" -v pgdata:/data "$IMG" cat /data/keep 2>&1)"
}

scenario_survive() {
    "${RUN[@]}" -v pgdata:/data "$IMG" sh -c 'echo keep-me >/data/keep'
    docker run -d --name e2e-adm-keep --network none -v pgdata:/data "$IMG" sleep 3600 >/dev/null
    sleep 1
    local st pid
    st=$(state_dir)
    e2e_eq "a running container: mount count 1" 1 "$(mount_count pgdata)"
    e2e_check "the count is in the state directory ($st/mounts/pgdata.json)" test -f "$st/mounts/pgdata.json"

    pid=$(plugin_pid)
    kill -KILL "$pid"
    for _ in $(seq 1 60); do
        [ -n "$(plugin_pid)" ] && [ "$(plugin_pid)" != "$pid" ] && wait_plugin && break
        sleep 0.5
    done
    e2e_eq "plugin killed (-9): Docker started a new process" yes "$([ "$(plugin_pid)" != "$pid" ] && echo yes)"
    e2e_eq "after the plugin crash: the count is kept (its bind stayed)" 1 "$(mount_count pgdata)"
    e2e_eq "after the plugin crash: the container still writes" ok \
        "$(docker exec e2e-adm-keep sh -c 'echo x >/data/x && echo ok' 2>&1)"
    ls_check "after the plugin crash"

    e2e_check "docker plugin disable -f" docker plugin disable -f "$PLUGIN"
    e2e_check "docker plugin enable" docker plugin enable "$PLUGIN"
    e2e_eq "after disable/enable: the count is reset (disable took the binds)" 0 "$(mount_count pgdata)"
    e2e_eq "after disable/enable: the container keeps its own bind" keep-me "$(docker exec e2e-adm-keep cat /data/keep 2>&1)"
    e2e_eq "after disable/enable: the same state directory" "$st" "$(state_dir)"
    ls_check "after disable/enable"
    docker rm -f e2e-adm-keep >/dev/null

    e2e_restart_dockerd
    ls_check "after a daemon restart"
    e2e_kill_restart_dockerd
    ls_check "after a daemon crash (SIGKILL) and start"
    e2e_check "the index survived all of it" test -f "$st/index/pgdata.json"

    # An upgrade keeps the plugin ID, hence the state directory.
    push_tag 0.2.0-e2e2
    run_readme upgrade
    check_readme upgrade
    e2e_eq "upgraded: the new reference, enabled" "true $REG/nvmevol:0.2.0-e2e2" \
        "$(docker plugin inspect -f '{{.Enabled}} {{.PluginReference}}' "$PLUGIN" 2>&1)"
    e2e_eq "after the upgrade: the same state directory" "$st" "$(state_dir)"
    e2e_check "after the upgrade: the index entry is there" test -f "$st/index/pgdata.json"
    ls_check "after the upgrade"

    # rm + install: a new ID and a new state directory; the records bring the volumes back.
    docker plugin disable -f "$PLUGIN" >/dev/null
    e2e_check "docker plugin rm -f" docker plugin rm -f "$PLUGIN"
    e2e_check "the old state directory went with the plugin" test ! -e "$st"
    e2e_check "docker plugin install again" docker plugin install --grant-all-permissions --alias nvmevol \
        "$REG/nvmevol:0.2.0-e2e2" "NVMEVOL_LABEL_PREFIX=$PREFIX"
    ls_check "after rm + install"
    e2e_check "after rm + install: the index is rebuilt from the records" test -f "$(state_dir)/index/pgdata.json"
}

scenario_admin_block() {
    run_readme admin
    local i
    for i in "${!LINES[@]}"; do
        if [ "${RCS[$i]}" = 0 ]; then
            e2e_ok "README (admin): ${LINES[$i]}"
        elif [[ ${LINES[$i]} == *"volume resize"* ]] && [ "${RCS[$i]}" = 1 ] &&
             grep -q 'without XFS project quota' <<<"${OUTS[$i]}"; then
            # Not a pass of the README line: a check that the plugin's refusal is the clear Err it documents.
            # The resize itself is tested where quota exists (qemu stage: test-admin-quota).
            e2e_ok "volume resize on a kernel without XFS quota is refused with the Err that says so: ${LINES[$i]}"
        else
            e2e_not_ok "README (admin): ${LINES[$i]} (exit ${RCS[$i]})"
            e2e_diag "${OUTS[$i]}"
        fi
    done
    e2e_match "status shows the partition ${PREFIX}0" "^${PREFIX}0 " "${OUTS[0]}"
    e2e_match "volume show shows pgdata's real options" 'Options: +uid=999 gid=999 mode=0700' "${OUTS[1]}"
    e2e_eq "volume set: the policy and threshold are in the volume's options" "enforce 50" \
        "$(vjson pgdata | jq -r '"\(.Status.options.selftest) \(.Status.options.min_write_mbps)"')"
    e2e_match "status --json | jq lists pgdata" '^pgdata (ready|mounted) [0-9]+$' "${OUTS[4]}"
    # Docker returns an existing volume without asking the plugin: what the README says.
    e2e_eq "volume create of an existing name with other options exits 0 (Docker does not call Create)" pgdata \
        "$(docker volume create -d nvmevol -o uid=5 pgdata 2>&1)"
    e2e_eq "... and the volume keeps its options" 999 "$(vjson pgdata | jq -r .Status.options.uid)"
    e2e_check "volume set back to the defaults" "$NV" volume set pgdata selftest=none min_write_mbps=none
    e2e_check "the plugin logged who changed pgdata" \
        grep -q 'admin: /Admin.VolumeSet pgdata by uid 0 .*command=volume set.* done: .*selftest.*enforce' "$E2E_DOCKERD_LOG"
}

scenario_release() {
    local st out
    st=$(state_dir)
    docker run -d --name e2e-adm-rel --network none -v pgdata:/data "$IMG" sleep 3600 >/dev/null
    sleep 1
    if e2e_check_fails "release refuses while a container uses the volume" "$NV" volume release pgdata; then
        e2e_match "... and names the container" 'container e2e-adm-rel \(running\) uses volume pgdata' "$E2E_LAST_OUTPUT"
    fi
    e2e_eq "... and changed nothing" 1 "$(mount_count pgdata)"
    # volume move asks Docker the same question: --final-now refuses, naming the container (the
    # other node is never reached: --node given, and the refusal comes first).
    if e2e_check_fails "volume move --final-now refuses while a container uses the volume" \
            "$NV" volume move pgdata --via /bin/false --node nowhere --final-now; then
        e2e_match "... and names the container Docker reports" \
            'volume pgdata is in use by container\(s\) e2e-adm-rel \(1 mount\(s\)\), and --final-now was given' \
            "$E2E_LAST_OUTPUT"
    fi
    e2e_eq "... in --json too" '["e2e-adm-rel"] 1' \
        "$("$NV" volume move pgdata --via /bin/false --node nowhere --final-now --json 2>/dev/null |
           jq -c '.holders.containers, .holders.mount_count' | tr '\n' ' ' | sed 's/ $//')"
    docker rm -f e2e-adm-rel >/dev/null

    local prop holder
    prop=$E2E_DATA_ROOT/plugins/$(plugin_id)/propagated-mount/pgdata
    mkdir -p "$E2E_WORK/holder"

    # The over-count of a crash in the reply window: the plugin dies after the
    # Mount's count file is in place and before the Mount is answered. strace
    # holds the Mount's thread at the exit of the rename that puts
    # mounts/pgdata.json in place (only syscalls naming pgdata.json, -P); once
    # that file is there, the plugin is killed. The count file is written
    # without fsync (src/README.md, State), so the point is the rename, never
    # an fsync; a test that waited for one would hang.
    "$NV" volume set pgdata selftest=off >/dev/null
    local pid spid runpid i
    e2e_check "before the crash: no count file for pgdata" test ! -e "$st/mounts/pgdata.json"
    pid=$(plugin_pid)
    strace -f -qq -p "$pid" -P pgdata.json -e trace=rename,renameat,renameat2 \
        -e inject=rename,renameat,renameat2:delay_exit=60s:when=1 -o /dev/null 2>/dev/null &
    spid=$!
    sleep 1
    "${RUN[@]}" -v pgdata:/data "$IMG" true >"$E2E_WORK/reply-window.out" 2>&1 &
    runpid=$!
    for i in $(seq 1 300); do
        [ -e "$st/mounts/pgdata.json" ] && break
        sleep 0.1
    done
    if e2e_check "the Mount's count file landed while its thread is held before the answer" \
        test -e "$st/mounts/pgdata.json"; then
        kill -KILL "$pid"
    fi
    wait "$runpid"
    kill "$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    out=$(cat "$E2E_WORK/reply-window.out")
    e2e_match "docker run fails: the plugin died before it answered the Mount" . "$out"
    wait_plugin
    e2e_eq "the plugin restarted and kept the saved count: an over-count (no container, count 1)" "1 0" \
        "$(mount_count pgdata) $(docker ps -q --filter volume=pgdata | wc -l)"
    e2e_check "the count is on disk: $st/mounts/pgdata.json" test -f "$st/mounts/pgdata.json"
    if e2e_check_fails "docker volume rm pgdata is refused by the plugin (in use)" docker volume rm pgdata; then
        e2e_match "... because of the over-count" 'in use' "$E2E_LAST_OUTPUT"
    fi

    # While another namespace holds the bind: refused.
    unshare --mount --propagation private sh -c "mount --bind '$prop' '$E2E_WORK/holder' && exec sleep 300" &
    holder=$!
    sleep 1
    if e2e_check_fails "release refuses while another mount namespace has the volume" "$NV" volume release pgdata; then
        e2e_match "... and names the process and where" "still mounted on this host.*at $E2E_WORK/holder" \
            "$(tr '\n' ' ' <<<"$E2E_LAST_OUTPUT")"
    fi
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    sleep 0.5

    run_readme release
    check_readme release
    e2e_match "release says what it checked and what it cleared" \
        'Docker reports no running container.*released volume pgdata: cleared 1 mount count\(s\).*bind was unmounted' \
        "$(tr '\n' ' ' <<<"${OUTS[0]}")"
    e2e_eq "after release: count 0, not mounted" "0 false" \
        "$(vjson pgdata | jq -r '"\(.Status.mount_count) \(.Admin.mounted)"')"
    e2e_check "after release: no count file" test ! -e "$st/mounts/pgdata.json"
    e2e_eq "after release: the volume mounts again" keep-me "$("${RUN[@]}" -v pgdata:/data "$IMG" cat /data/keep 2>&1)"
    e2e_check "the plugin logged the release" \
        grep -q 'admin: /Admin.VolumeRelease pgdata by uid 0 .*command=volume release.* done: .*cleared' "$E2E_DOCKERD_LOG"
}

# The README's backup and rollback blocks through the managed plugin: the
# export is read through the plugin's propagated mount on the host.
scenario_backup() {
    # Not in a view: a mount namespace made before the plugin binds the
    # snapshot never sees the bind (and the export refuses it, tested in
    # test-daemon-snapshot).
    E2E_VIEW_NONE=1 run_readme backup
    check_readme backup
    e2e_match "snapshots lists before-upgrade" 'before-upgrade' "${OUTS[1]}"
    e2e_match "the export is a tar holding pgdata's file" '(^|/)keep$' "$(tar -tf /tmp/pgdata.tar 2>&1)"
    e2e_eq "docker volume ls lists the import" pgdata-copy "$(docker volume ls -q --filter name=pgdata-copy 2>&1)"
    e2e_eq "the import has pgdata's data" keep-me "$("${RUN[@]}" -v pgdata-copy:/data "$IMG" cat /data/keep 2>&1)"
    e2e_eq "the import kept the owner and mode" "999:999 700" \
        "$("${RUN[@]}" -v pgdata-copy:/data "$IMG" stat -c '%u:%g %a' /data 2>&1)"
    if e2e_check_fails "docker volume rm pgdata is refused while it has a snapshot" docker volume rm pgdata; then
        e2e_match "... and names the snapshot" 'before-upgrade' "$E2E_LAST_OUTPUT"
    fi
    "${RUN[@]}" -v pgdata:/data "$IMG" sh -c 'echo changed >/data/keep; echo new >/data/after'
    E2E_VIEW_NONE=1 run_readme rollback
    check_readme rollback
    e2e_eq "after rollback: pgdata as of the snapshot" "keep-me absent" \
        "$("${RUN[@]}" -v pgdata:/data "$IMG" sh -c 'cat /data/keep; [ -e /data/after ] && echo present || echo absent' 2>&1 | tr '\n' ' ' | sed 's/ $//')"
    e2e_eq "after snapshot-rm: no snapshot left" 0 \
        "$("$NV" volume snapshots pgdata --json | jq 'if type == "array" then length else (.snapshots | length) end' 2>&1)"
    e2e_check "docker volume rm pgdata-copy" docker volume rm pgdata-copy
    rm -f /tmp/pgdata.tar

    # Send and receive: a full stream, then the changes since.
    "${RUN[@]}" -v pgdata:/data "$IMG" sh -c 'echo monday >/data/day'
    E2E_VIEW_NONE=1 run_readme send
    check_readme send
    e2e_eq "the replica has the last sent state" "keep-me monday" \
        "$("${RUN[@]}" -v pgdata-replica:/data "$IMG" sh -c 'cat /data/keep /data/day' 2>&1 | tr '\n' ' ' | sed 's/ $//')"
    e2e_eq "the replica's tuesday has the sender's ID" \
        "$("$NV" volume snapshots pgdata --json | jq -r '.snapshots[] | select(.name == "tuesday") | .id')" \
        "$("$NV" volume snapshots pgdata-replica --json | jq -r '.snapshots[] | select(.name == "tuesday") | .id')"
    for s in monday tuesday; do
        "$NV" volume snapshot-rm pgdata "$s" >/dev/null
        "$NV" volume snapshot-rm pgdata-replica "$s" >/dev/null
    done
    e2e_check "docker volume rm pgdata-replica" docker volume rm pgdata-replica
    rm -f /tmp/pgdata-monday.stream
}

# The README's evacuate block: pgdata, in use by a container named pg that keeps writing,
# leaves ${PREFIX}0 for a second partition (a live pass, pg stopped, the final pass), then
# everything goes back so that the scenarios after this one find it where it was.
scenario_evacuate() {
    local i before after dev
    dev=$(e2e_make_loop_xfs "${PREFIX}2" 320)
    # Attached while the plugin runs: adopted first (it takes no volumes before).
    for i in $(seq 1 20); do
        "$NV" partition adopt "${PREFIX}2" >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker run -d --name pg --network none -v pgdata:/data "$IMG" \
        sh -c 'trap "exit 0" TERM; while :; do date >>/data/evac.log; sleep 0.1; done' >/dev/null
    sleep 1
    E2E_VIEW_NONE=1 run_readme evacuate
    check_readme evacuate
    e2e_match "first run: pgdata in use gets a live pass and waits" 'waiting for an unmount: pgdata: .*live pass full' \
        "${OUTS[0]}"
    e2e_match "second run: pgdata moved by an incremental final pass" 'moved pgdata to .*final pass incremental' \
        "${OUTS[1]}"
    e2e_eq "pgdata is served from the new partition" "${PREFIX}2" "$(vjson pgdata | jq -r .Status.partition.label)"
    e2e_eq "pgdata keeps its owner and mode" "999:999 700" "$("${RUN[@]}" -v pgdata:/data "$IMG" stat -c '%u:%g %a' /data 2>&1)"
    e2e_eq "pgdata keeps its data" keep-me "$("${RUN[@]}" -v pgdata:/data "$IMG" cat /data/keep 2>&1)"
    before=$("${RUN[@]}" -v pgdata:/data "$IMG" wc -l /data/evac.log 2>&1 | awk '{print $1}')
    sleep 1
    after=$("${RUN[@]}" -v pgdata:/data "$IMG" wc -l /data/evac.log 2>&1 | awk '{print $1}')
    e2e_check "pg writes to it again after docker start ($before then $after lines)" test "${after:-0}" -gt "${before:-0}"
    e2e_eq "nothing is left on ${PREFIX}0's volumes" "" \
        "$("$NV" status --json | jq -r --arg l "${PREFIX}0" '.volumes[] | select(.Status.partition.label == $l) | .Name')"
    docker rm -f pg >/dev/null
    # Back, and the second partition gone, for the scenarios after this one (as forget_adopt takes a disk away).
    "$NV" partition uncordon "${PREFIX}0" >/dev/null
    e2e_check "evacuated back to ${PREFIX}0" "$NV" partition evacuate "${PREFIX}2" --to "${PREFIX}0"
    docker plugin disable -f "$PLUGIN" >/dev/null
    losetup -d "$dev"
    docker plugin enable "$PLUGIN" >/dev/null
    wait_plugin
}

scenario_forget_adopt() {
    # A disk attached while the plugin runs: read-only until adopted.
    LOOP_B=$(e2e_make_loop_xfs "${PREFIX}1" 320)
    if e2e_check_fails "a volume on the new partition is refused before adopt" \
        docker volume create -d nvmevol -o partition="${PREFIX}1" olddata; then
        e2e_match "... and the error says to adopt it" "nvmevol partition adopt" "$E2E_LAST_OUTPUT"
    fi
    run_readme adopt
    check_readme adopt
    e2e_check "after adopt: a volume on it" docker volume create -d nvmevol -o partition="${PREFIX}1" olddata
    "${RUN[@]}" -v olddata:/data "$IMG" sh -c 'echo old >/data/f'

    # The disk goes away (plugin stopped meanwhile, as a host would lose it).
    docker plugin disable -f "$PLUGIN" >/dev/null
    losetup -d "$LOOP_B"
    docker plugin enable "$PLUGIN" >/dev/null
    wait_plugin
    e2e_eq "its disk gone: olddata is listed as partition-missing" partition-missing \
        "$(vjson olddata | jq -r .Status.state)"
    e2e_check_fails "docker volume rm of it is refused" docker volume rm olddata
    e2e_match "... and the error names nvmevol volume forget" 'nvmevol volume forget olddata' "$E2E_LAST_OUTPUT"
    run_readme forget
    check_readme forget
    e2e_no_match "after forget: docker volume ls does not list olddata" '^olddata$' "$(docker volume ls -q 2>&1)"
    # Back: a new loop device on the same image; Get of the name finds its record.
    LOOP_B=$(losetup --find --show --direct-io=on "$E2E_LOOP_DIR/${PREFIX}1.img")
    echo "$LOOP_B $E2E_LOOP_DIR/${PREFIX}1.img" >>"$E2E_WORK/loops.list"
    e2e_eq "the disk is back: so is olddata, with its data" old "$("${RUN[@]}" -v olddata:/data "$IMG" cat /data/f 2>&1)"
}

scenario_several_root() {
    mkdir -p "$E2E_WORK/nvother-state"
    docker plugin install --grant-all-permissions --alias nvother "$REG/nvmevol:0.2.0-e2e1" \
        NVMEVOL_LABEL_PREFIX=nvnone "state.source=$E2E_WORK/nvother-state" >/dev/null
    if e2e_check_fails "two enabled nvmevol plugins: status refuses to guess" "$NV" status; then
        e2e_match "... and says to choose with --plugin" 'several nvmevol plugins are enabled \(.*nvother:latest.*\): choose one with --plugin NAME' "$E2E_LAST_OUTPUT"
    fi
    e2e_eq "--plugin nvother: its state is the state.source set" "state.source $E2E_WORK/nvother-state" \
        "$("$NV" status --plugin nvother --json | jq -r '"\(.state.location) \(.state.host_path)"' 2>&1)"
    e2e_check "--plugin nvmevol (short name)" "$NV" status --plugin nvmevol
    docker plugin disable nvother >/dev/null
    e2e_check "with the other disabled, one is found again" "$NV" status
    if e2e_check_fails "--plugin of a disabled plugin fails" "$NV" status --plugin nvother; then
        e2e_match "... and says how to enable it" 'disabled: docker plugin enable nvother:latest' "$E2E_LAST_OUTPUT"
    fi
    docker plugin rm -f nvother >/dev/null
    if e2e_check_fails "not root: refused" setpriv --reuid=65534 --regid=65534 --clear-groups "$NV" status; then
        e2e_match "... and the error says to run as root" 'permission denied.*run as root' "$E2E_LAST_OUTPUT"
    fi
}

# The commit whose meson.build still says 0.1.0: the last nvmevol 0.1.
old_rev() {
    local c
    c=$(git -C "$E2E_REPO" log -1 --format=%H -G"version : '0.1.0'" -- meson.build 2>/dev/null) || return 1
    [ -n "$c" ] && git -C "$E2E_REPO" rev-parse --verify -q "$c^" 2>/dev/null
}

scenario_migration() {
    local rev src=$E2E_WORK/old-src legacy=$E2E_WORK/legacy
    if ! rev=$(old_rev); then
        e2e_not_ok "nvmevol 0.1 found in git history (a shallow clone? fetch the history to run this scenario)"
        return
    fi
    rm -rf "$src" "$legacy" "$legacy".imported-*
    mkdir -p "$src" "$legacy"
    git -C "$E2E_REPO" archive "$rev" | tar -x -C "$src"
    e2e_log "building nvmevol 0.1 ($rev)"
    if ! "$src/plugin/build.sh" --out "$E2E_WORK/old-plugin" >"$E2E_WORK/old-build.log" 2>&1; then
        e2e_not_ok "build nvmevol 0.1"
        e2e_diag "$(tail -n 20 "$E2E_WORK/old-build.log")"
        return
    fi
    docker plugin create "$REG/nvmevol:0.1.0-e2e" "$E2E_WORK/old-plugin" >/dev/null &&
        docker plugin push "$REG/nvmevol:0.1.0-e2e" >/dev/null &&
        docker plugin rm "$REG/nvmevol:0.1.0-e2e" >/dev/null
    # 0.1 as its README installed it: a state directory on the host.
    docker plugin disable -f "$PLUGIN" >/dev/null
    docker plugin rm -f "$PLUGIN" >/dev/null
    e2e_check "install nvmevol 0.1 (state.source=$legacy)" docker plugin install --grant-all-permissions \
        --alias nvmevol "$REG/nvmevol:0.1.0-e2e" "NVMEVOL_LABEL_PREFIX=$PREFIX" "state.source=$legacy"
    e2e_check "0.1 indexes olddata in its state directory" test -f "$legacy/index/olddata.json"
    if e2e_check_fails "the admin command on 0.1 fails" "$NV" status; then
        e2e_match "... and says the plugin is too old and how to upgrade" \
            'has no admin socket: it is older than nvmevol 0.2.*docker plugin upgrade' "$E2E_LAST_OUTPUT"
    fi
    # Upgraded while the disk of olddata is away: only the 0.1 index knows it.
    docker plugin disable -f "$PLUGIN" >/dev/null
    losetup -d "$LOOP_B"
    docker plugin enable "$PLUGIN" >/dev/null
    push_tag 0.2.0-e2e3
    run_readme upgrade
    check_readme upgrade
    e2e_eq "after the upgrade from 0.1: the state is in Docker's directory" plugin-directory \
        "$("$NV" status --json | jq -r .state.location 2>&1)"
    e2e_check_fails "olddata is not known before the import" docker volume inspect olddata
    LEGACY_DIR=$legacy run_readme upgrade-from-0.1 'ls -d /var/lib/nvmevol /var/lib/nvmevol.imported-*'
    check_readme upgrade-from-0.1
    e2e_match "state import says what it imported" '1 imported.*imported: olddata' "$(tr '\n' ' ' <<<"${OUTS[0]}")"
    e2e_match "/var/lib/nvmevol was renamed" '^/var/lib/nvmevol\.imported-[0-9T]+$' "$POST_OUT"
    e2e_eq "olddata is listed again, its disk missing" partition-missing "$(vjson olddata | jq -r .Status.state)"

    # The same with plugin/install.sh --upgrade, which imports by itself.
    "$NV" volume forget olddata >/dev/null
    push_tag 0.2.0-e2e4
    e2e_check "plugin/install.sh --upgrade (with the 0.1 state directory)" "$E2E_REPO/plugin/install.sh" \
        --upgrade "$REG/nvmevol:0.2.0-e2e4" --cli "$NV" --legacy-state "$legacy"
    e2e_eq "install.sh imported olddata" partition-missing "$(vjson olddata | jq -r .Status.state)"
    e2e_check "install.sh renamed the 0.1 state directory" test ! -e "$legacy"
    e2e_eq "install.sh did not keep state.source=$legacy" plugin-directory \
        "$("$NV" status --json | jq -r .state.location 2>&1)"
    LOOP_B=$(losetup --find --show --direct-io=on "$E2E_LOOP_DIR/${PREFIX}1.img")
    echo "$LOOP_B $E2E_LOOP_DIR/${PREFIX}1.img" >>"$E2E_WORK/loops.list"
    e2e_eq "its disk back: olddata's data" old "$("${RUN[@]}" -v olddata:/data "$IMG" cat /data/f 2>&1)"
}

# ---------------------------------------------------------------------- main

e2e_main "$@"
