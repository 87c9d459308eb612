#!/bin/bash
# End-to-end tests of the nvmevol managed plugin against a real Docker engine
# (Debian's docker.io 20.10), a local registry and file-backed XFS loops.
#
# Usage: tests/e2e/run.sh [--list] [scenario...]
#   With no scenario, runs them all in order.  Each scenario is independent
#   (its own volumes and containers) but shares the dockerd, registry, loop
#   partitions and plugin set up once per run.
# Environment:
#   E2E_PLUGIN_BINARY=PATH  package PATH instead of building with meson
#   E2E_KEEP=1              leave dockerd/registry running at exit (debugging)
#   E2E_VERBOSE=1           show expected error texts too
# Prints "ok - ..." / "not ok - ..." lines, the wall time and
# "N passed, N failed"; exits non-zero when anything failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source=projid.sh
. "$HERE/projid.sh"

SCENARIOS=(basic mount_flag suid_dev sharing inspect_ls remove hostile settings_registry
           disable_enable upgrade dockerd_kill
           projid_escape projid_capdrop projid_seccomp projid_userns)

IMG=nvmevol-e2e/busybox:latest
RUN=(docker run --rm --network none)
PLUGIN=$E2E_PLUGIN
PLUGIN_SHORT=${PLUGIN%:latest}

# ------------------------------------------------------------------ helpers

# listing of every partition's nvmevol/volumes (to check nothing was created)
partition_listing() {
    local r
    for r in $(partition_roots); do
        # the top two levels (where ../x would land) and every volume and
        # record; not the trash or self-test files, which change on their own
        (cd "$r" && { find . -maxdepth 2; find nvmevol/volumes nvmevol/meta -maxdepth 1; } 2>/dev/null | sort)
    done
}

volume_exists() { docker volume inspect "$1" >/dev/null 2>&1; }

# mountinfo_line VOLUME [EXTRA RUN ARGS]: the /data line of a container's
# /proc/self/mountinfo.
data_mountinfo() {
    "${RUN[@]}" "$@" "$IMG" sh -c "grep ' /data ' /proc/self/mountinfo"
}

# check_data_mount DESC MOUNTINFO-LINE
check_data_mount() {
    local desc=$1 line=$2 fstype opts optional
    fstype=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' <<<"$line")
    opts=$(awk '{ print $6 }' <<<"$line")
    optional=$(awk '{ s = ""; for (i = 7; i <= NF && $i != "-"; i++) s = s " " $i; print s }' <<<"$line")
    e2e_eq "$desc: /data is xfs" xfs "$fstype"
    e2e_match "$desc: /data is mounted noatime" '(^|,)noatime(,|$)' "$opts"
    e2e_match "$desc: /data is mounted nodiratime" '(^|,)nodiratime(,|$)' "$opts"
    e2e_match "$desc: /data is mounted nosuid" '(^|,)nosuid(,|$)' "$opts"
    e2e_match "$desc: /data is mounted nodev" '(^|,)nodev(,|$)' "$opts"
    e2e_no_match "$desc: /data has no shared: propagation tag" 'shared:' "$optional"
}

# check_no_stray_mounts DESC [VOLUME...]: on the host, every mount below any
# <data-root>/plugins/*/propagated-mount/, and every mount of one of our loop
# devices, must be the bind <propagated-mount>/<v> of a volume v in use.
# (Partition mounts live privately in the plugin's namespace.)
check_no_stray_mounts() {
    local desc=$1
    shift
    local inuse=" $* " stray=() dev src mp name
    local loops=" ${E2E_LOOP_DEVS[*]} "
    while read -r src mp; do
        case $mp in
            "$E2E_DATA_ROOT"/plugins/*/propagated-mount/*) ;;
            *) case $loops in *" $src "*) ;; *) continue ;; esac ;;
        esac
        case $mp in
            "$E2E_DATA_ROOT"/plugins/*/propagated-mount/*)
                name=${mp#*/propagated-mount/}
                case $inuse in *" $name "*) continue ;; esac ;;
        esac
        stray+=("$src $mp")
    done < <(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 2), $5; break } }' /proc/self/mountinfo)
    if [ "${#stray[@]}" -eq 0 ]; then
        e2e_ok "$desc: no stray mounts on the host (in use: ${*:-none})"
    else
        e2e_not_ok "$desc: no stray mounts on the host (in use: ${*:-none})"
        e2e_diag "$(printf '%s\n' "${stray[@]}")"
    fi
}

# plugin_state_source: the host directory bound at /var/lib/nvmevol in the
# running plugin.
plugin_state_source() {
    local pid
    pid=$(e2e_plugin_pid)
    [ -n "$pid" ] && awk '$5 == "/var/lib/nvmevol" { print $4 }' "/proc/$pid/mountinfo"
}

volume_options() { docker volume inspect -f '{{json .Options}}' "$1" 2>&1; }

wait_plugin_socket() {
    # a few Capabilities round trips via a cheap call
    local i
    for i in $(seq 1 30); do
        docker volume ls >/dev/null 2>&1 && return 0
        sleep 0.5
    done
}

# --------------------------------------------------------------------- setup

setup() {
    e2e_init
    e2e_setup_plugin_env --registry
    e2e_busybox_image "$IMG"
}

# ----------------------------------------------------------------- scenarios

scenario_basic() {
    e2e_check "volume create -d $PLUGIN_SHORT -o uid=999 -o gid=999 -o mode=0700 pgdata" \
        docker volume create -d "$PLUGIN_SHORT" -o uid=999 -o gid=999 -o mode=0700 pgdata
    local out line
    out=$("${RUN[@]}" -v pgdata:/data "$IMG" sh -c \
        "grep ' /data ' /proc/self/mountinfo; stat -c 'owner=%u:%g mode=%a' /data; echo hello-pgdata >/data/hello.txt && echo written" 2>&1)
    e2e_match "docker run -v pgdata:/data succeeds and writes" '^written$' "$out"
    line=$(grep ' /data ' <<<"$out" | head -n1)
    check_data_mount "pgdata" "$line"
    e2e_match "pgdata: owner is 999:999" '^owner=999:999 ' "$(grep '^owner=' <<<"$out")"
    e2e_match "pgdata: mode is 0700" ' mode=700$' "$(grep '^owner=' <<<"$out")"
    local f
    f=$(find_on_partitions nvmevol/volumes/pgdata/hello.txt)
    if [ -n "$f" ] && [ "$(cat "$f")" = hello-pgdata ]; then
        e2e_ok "pgdata: the file is on the XFS partition at nvmevol/volumes/pgdata/hello.txt"
    else
        e2e_not_ok "pgdata: the file is on the XFS partition at nvmevol/volumes/pgdata/hello.txt"
        e2e_diag "partition roots: $(partition_roots | tr '\n' ' ')"
    fi
    check_no_stray_mounts "after basic"
    # Docker's copy-up: an empty volume mounted over a directory that exists
    # in the image gets that directory's owner and mode (and contents), which
    # overrides uid/gid/mode; ":nocopy" (--mount ...,volume-nocopy) avoids it.
    docker volume create -d "$PLUGIN_SHORT" -o uid=999 -o gid=999 -o mode=0700 copyup1 >/dev/null
    docker volume create -d "$PLUGIN_SHORT" -o uid=999 -o gid=999 -o mode=0700 copyup2 >/dev/null
    e2e_eq "mounted :nocopy over the image's /root, the volume keeps uid/gid/mode" "999:999 700" \
        "$("${RUN[@]}" -v copyup1:/root:nocopy "$IMG" stat -c '%u:%g %a' /root 2>&1)"
    e2e_eq "(Docker behaviour) mounted over the image's /root without nocopy, copy-up sets root's 0:0 755" "0:0 755" \
        "$("${RUN[@]}" -v copyup2:/root "$IMG" stat -c '%u:%g %a' /root 2>&1)"
}

scenario_mount_flag() {
    local out
    out=$("${RUN[@]}" --mount type=volume,src=v2,dst=/data,volume-driver="$PLUGIN_SHORT",volume-opt=uid=1000,volume-opt=mode=0750 \
        "$IMG" sh -c "grep ' /data ' /proc/self/mountinfo; stat -c 'owner=%u:%g mode=%a' /data; echo v2 >/data/v2.txt && echo written" 2>&1)
    e2e_match "docker run --mount type=volume,...,volume-driver=$PLUGIN_SHORT,volume-opt=... succeeds" '^written$' "$out"
    check_data_mount "v2" "$(grep ' /data ' <<<"$out" | head -n1)"
    e2e_match "v2: owner uid is 1000" '^owner=1000:' "$(grep '^owner=' <<<"$out")"
    e2e_match "v2: mode is 0750" ' mode=750$' "$(grep '^owner=' <<<"$out")"
    e2e_eq "v2: driver is $PLUGIN" "$PLUGIN" "$(docker volume inspect -f '{{.Driver}}' v2 2>&1)"
    e2e_match "v2: the file is on the partition" . "$(find_on_partitions nvmevol/volumes/v2/v2.txt)"
}

# suid= and dev= as a container sees them: without them the volume is
# nosuid,nodev (a setuid binary planted there does not raise a user, a device
# node there cannot be opened); with them, both work as on any filesystem.
scenario_suid_dev() {
    local euid_tool vol out opts euid node path
    if ! euid_tool=$(pj_tool euid); then
        e2e_not_ok "tests/tools/euid is built (ninja -C build)"
        return
    fi
    docker volume create -d "$PLUGIN_SHORT" sdplain >/dev/null
    docker volume create -d "$PLUGIN_SHORT" -o suid=true -o dev=true sdallow >/dev/null
    for vol in sdplain sdallow; do
        # As root in the container: a /dev/null node on the volume.
        out=$("${RUN[@]}" -v "$vol:/data" "$IMG" sh -c \
            "grep ' /data ' /proc/self/mountinfo; mknod /data/null c 1 3 && echo prepared" 2>&1)
        e2e_match "$vol: a device node is made on the volume" '^prepared$' "$out"
        opts=$(grep ' /data ' <<<"$out" | head -n1 | awk '{ print $6 }')
        # A setuid-root program on the volume, planted on the partition itself.
        path=$(pj_vol_path "$vol")/euid
        install -o 0 -g 0 -m 4755 "$euid_tool" "$path"
        euid=$("${RUN[@]}" --user 1000 -v "$vol:/data" "$IMG" /data/euid 2>&1)
        node=$("${RUN[@]}" -v "$vol:/data" "$IMG" sh -c 'echo x >/data/null && echo opened' 2>&1)
        if [ "$vol" = sdplain ]; then
            e2e_match "$vol: /data is nosuid,nodev in the container" '(^|,)nosuid,nodev(,|$)' "$opts"
            e2e_eq "$vol: a setuid-root program runs as the user (1000), not root" 1000 "$euid"
            e2e_no_match "$vol: the device node cannot be opened" '^opened$' "$node"
        else
            e2e_no_match "$vol: suid=true: /data is not nosuid" '(^|,)nosuid(,|$)' "$opts"
            e2e_no_match "$vol: dev=true: /data is not nodev" '(^|,)nodev(,|$)' "$opts"
            e2e_eq "$vol: suid=true: a setuid-root program runs as root" 0 "$euid"
            e2e_match "$vol: dev=true: the device node opens" '^opened$' "$node"
        fi
    done
    docker volume rm sdplain sdallow >/dev/null
}

scenario_sharing() {
    docker volume create -d "$PLUGIN_SHORT" shared1 >/dev/null
    e2e_check "container A runs with shared1" \
        docker run -d --name e2e-share-a --network none -v shared1:/data "$IMG" \
        sh -c 'echo from-a >/data/a.txt; exec sleep 3600'
    sleep 1
    e2e_eq "a second container sees A's file" from-a \
        "$("${RUN[@]}" -v shared1:/data "$IMG" cat /data/a.txt 2>&1)"
    local tmp
    tmp=$(mktemp "$E2E_WORK/cp.XXXXXX")
    echo copied-in >"$tmp"
    e2e_check "docker cp into the running container's volume" docker cp "$tmp" e2e-share-a:/data/cp.txt
    rm -f "$tmp"
    e2e_eq "after docker cp, the running container still sees its files" "from-a copied-in" \
        "$(docker exec e2e-share-a sh -c 'cat /data/a.txt /data/cp.txt' 2>&1 | tr '\n' ' ' | sed 's/ $//')"
    e2e_check "after docker cp, the running container can still write" \
        docker exec e2e-share-a sh -c 'echo after-cp >/data/after.txt && sync'
    e2e_eq "after docker cp, the volume is still mounted for the container (a file is on the partition)" \
        after-cp "$(cat "$(find_on_partitions nvmevol/volumes/shared1/after.txt)" 2>&1)"
    e2e_match "after docker cp, the running container's /data is still xfs" ' - xfs ' \
        "$(docker exec e2e-share-a sh -c "grep ' /data ' /proc/self/mountinfo" 2>&1)"
    local pm
    pm=$(e2e_propagated_mount)
    e2e_match "after docker cp, the host-side bind of shared1 is still mounted" "^$pm/shared1\$" \
        "$(e2e_host_mounts_under "$pm")"
    check_no_stray_mounts "while A runs" shared1
    docker rm -f e2e-share-a >/dev/null 2>&1
}

scenario_inspect_ls() {
    volume_exists pgdata || docker volume create -d "$PLUGIN_SHORT" -o uid=999 -o gid=999 -o mode=0700 pgdata >/dev/null
    # Status is filled after the volume has been used at least once
    "${RUN[@]}" -v pgdata:/data "$IMG" true >/dev/null 2>&1
    local js status
    js=$(docker volume inspect pgdata 2>&1)
    status=$(jq -c '.[0].Status' <<<"$js" 2>/dev/null)
    e2e_eq "volume inspect: Status is an object" object "$(jq -r '.[0].Status | type' <<<"$js" 2>/dev/null)"
    e2e_match "volume inspect: Status names the partition label (${E2E_PREFIX}a or b)" \
        "\"${E2E_PREFIX}[ab]\"" "$(jq -c '[.[0].Status | .. | strings]' <<<"$js" 2>/dev/null)"
    e2e_match "volume inspect: Status shows mount options with noatime" 'noatime' \
        "$(jq -r '.[0].Status | .. | strings' <<<"$js" 2>/dev/null)"
    e2e_eq "volume inspect: Options are the ones given" '{"gid":"999","mode":"0700","uid":"999"}' \
        "$(jq -c '.[0].Options' <<<"$js" 2>/dev/null)"
    e2e_diag "Status: $status"
    # The metrics reach the host through the plugin's state mount, where node_exporter reads them.
    local prom
    prom="$(plugin_state_source)/metrics/nvmevol.prom"
    for _ in $(seq 30); do grep -q 'volume="pgdata"' "$prom" 2>/dev/null && break; sleep 0.2; done
    e2e_match "metrics file on the host ($prom) lists pgdata" 'nvmevol_volume_info\{volume="pgdata"' \
        "$(cat "$prom" 2>&1)"
    if command -v promtool >/dev/null; then
        e2e_check "promtool check metrics accepts the plugin's file" sh -c "promtool check metrics < '$prom'"
    fi
    e2e_match "volume inspect: Status shows the partition's self-test history" '"history":\{' "$status"
    e2e_match "volume ls: pgdata listed with driver $PLUGIN" "^$PLUGIN pgdata\$" \
        "$(docker volume ls --format '{{.Driver}} {{.Name}}' 2>&1)"
    e2e_match "volume ls --filter driver=$PLUGIN_SHORT lists pgdata" '^pgdata$' \
        "$(docker volume ls -q --filter driver="$PLUGIN" 2>&1)"
}

scenario_remove() {
    docker volume create -d "$PLUGIN_SHORT" rmvol >/dev/null
    docker run -d --name e2e-rm-run --network none -v rmvol:/data "$IMG" \
        sh -c 'echo x >/data/x; exec sleep 3600' >/dev/null
    docker create --name e2e-rm-stopped --network none -v rmvol:/data "$IMG" true >/dev/null
    sleep 1
    e2e_match "rmvol: its directory is on the partition" . "$(find_on_partitions nvmevol/volumes/rmvol)"
    if e2e_check_fails "volume rm of a volume in use (running + stopped container) fails" docker volume rm rmvol; then
        e2e_match "volume rm error says it is in use" 'in use' "$E2E_LAST_OUTPUT"
    fi
    docker rm -f e2e-rm-run >/dev/null
    e2e_check_fails "volume rm while a stopped container still references it fails" docker volume rm rmvol
    docker rm -f e2e-rm-stopped >/dev/null
    e2e_check "volume rm after the containers are gone succeeds" docker volume rm rmvol
    e2e_eq "rmvol: gone from docker volume ls" "" "$(docker volume ls -q --filter name='^rmvol$')"
    e2e_eq "rmvol: its directory is gone from the partition" "" "$(find_on_partitions nvmevol/volumes/rmvol)"
    e2e_check_fails "volume inspect rmvol fails after removal" docker volume inspect rmvol
}

scenario_hostile() {
    local before after name long
    long=$(printf 'a%.0s' $(seq 1 300))
    before=$(partition_listing)
    for name in '../x' 'a/b' "$long" '.hidden' 'has space'; do
        local shown=$name
        [ "${#name}" -gt 40 ] && shown="<${#name}-character name>"
        if e2e_check_fails "volume create '$shown' fails" docker volume create -d "$PLUGIN_SHORT" "$name"; then
            e2e_match "volume create '$shown': the error mentions the name rule" '[Nn]ame' "$E2E_LAST_OUTPUT"
            e2e_diag "error: $(head -c 300 <<<"$E2E_LAST_OUTPUT")"
        fi
        e2e_check_fails "volume '$shown' does not exist afterwards" docker volume inspect "$name"
    done
    if e2e_check_fails "volume create -o bogus=1 fails" docker volume create -d "$PLUGIN_SHORT" -o bogus=1 okname; then
        e2e_match "the unknown option error names the option" 'bogus' "$E2E_LAST_OUTPUT"
        e2e_diag "error: $(head -c 300 <<<"$E2E_LAST_OUTPUT")"
    fi
    e2e_check_fails "volume okname does not exist afterwards" docker volume inspect okname
    for opt in uid=-1 mode=9999 size=lots selftest=maybe partition=nosuchlabel; do
        e2e_check_fails "volume create -o $opt fails" docker volume create -d "$PLUGIN_SHORT" -o "$opt" badopt
        e2e_diag "error: $(head -c 300 <<<"$E2E_LAST_OUTPUT")"
    done
    e2e_check_fails "volume badopt does not exist afterwards" docker volume inspect badopt
    after=$(partition_listing)
    if [ "$before" = "$after" ]; then
        e2e_ok "nothing was created on the partitions"
    else
        e2e_not_ok "nothing was created on the partitions"
        e2e_diag "$(diff <(echo "$before") <(echo "$after"))"
    fi
    local stray
    stray=$(ls "$E2E_DATA_ROOT/plugins/$(e2e_plugin_id)/propagated-mount" 2>/dev/null | grep -Ev '^(pgdata|v2|shared1|lc1|lc2|copyup1|copyup2)$' || true)
    e2e_eq "nothing was created under propagated-mount" "" "$stray"
}

scenario_settings_registry() {
    local ref alias=nvmevol-e2e-installed:latest
    if ref=$(e2e_push_plugin_variant e2e-install); then
        e2e_ok "docker plugin push $ref to the local registry"
    else
        e2e_not_ok "docker plugin push to the local registry"
        return
    fi
    # An isolated second instance: its own state dir and a label prefix that
    # matches no partition, so it cannot touch the main instance's pool.
    mkdir -p "$E2E_WORK/state-installed"
    e2e_check "docker plugin install --grant-all-permissions $ref" \
        docker plugin install --grant-all-permissions --alias "$alias" "$ref" \
        "NVMEVOL_LABEL_PREFIX=nvnone" "state.source=$E2E_WORK/state-installed"
    e2e_eq "installed plugin is enabled" true "$(docker plugin inspect -f '{{.Enabled}}' "$alias" 2>&1)"
    e2e_match "installed plugin shows in plugin ls" "$alias" "$(docker plugin ls --format '{{.Name}} {{.Enabled}}' 2>&1)"
    e2e_eq "installed plugin keeps its PluginReference" "$ref" "$(docker plugin inspect -f '{{.PluginReference}}' "$alias" 2>&1)"
    if docker plugin set "$alias" NVMEVOL_LOG_LEVEL=debug >/dev/null 2>&1; then
        e2e_not_ok "plugin set while enabled fails"
    else
        e2e_ok "plugin set while enabled fails"
    fi
    e2e_check "docker plugin disable $alias" docker plugin disable "$alias"
    # Every setting, set with docker plugin set, must reach the plugin: the
    # plugin's own report of what it runs with (nvmevol status --json) is
    # compared, not Docker's copy in plugin inspect. NVMEVOL_DEVICES names no
    # real device; the prefix matches no partition.
    local kv name value got settings_json
    local -a kvs=(NVMEVOL_LABEL_PREFIX=nvsetp NVMEVOL_DEVICES=LABEL=foo,/dev/nvmevol-e2e-none NVMEVOL_LOG_LEVEL=warning
              NVMEVOL_SELFTEST=enforce NVMEVOL_SELFTEST_BUDGET_MS=450 NVMEVOL_SELFTEST_CACHE_SECONDS=60
              NVMEVOL_MAX_VOLUMES=500 NVMEVOL_SELFTEST_MIN_WRITE_RATIO=0.7 NVMEVOL_SELFTEST_MIN_READ_RATIO=0.6
              NVMEVOL_SELFTEST_MIN_IOPS_RATIO=0.5 NVMEVOL_METRICS_INTERVAL_SECONDS=30
              NVMEVOL_REQUIRE_NVME=off NVMEVOL_HEALTH=enforce NVMEVOL_HEALTH_CACHE_SECONDS=120
              NVMEVOL_CLONE_FREEZE_BUDGET_MS=2000 NVMEVOL_METRICS_DIR=off NVMEVOL_SELFTEST_MAX_P99_RATIO=3
              NVMEVOL_CLONE_MEMORY_MB=256)
    # The list above must name every setting config.json offers.
    local missing
    missing=$(jq -r '.Env[].Name' "$E2E_REPO/config.json" | while read -r name; do
        [[ " ${kvs[*]} " == *" $name="* ]] || echo "$name"; done)
    e2e_eq "every setting of config.json is set and read back here" "" "$missing"
    for kv in "${kvs[@]}"; do
        docker plugin set "$alias" "$kv" >/dev/null 2>&1 || { e2e_not_ok "plugin set $kv"; e2e_diag "$(docker plugin set "$alias" "$kv" 2>&1)"; }
    done
    mkdir -p "$E2E_WORK/state-installed2"
    e2e_check "plugin set state.source=$E2E_WORK/state-installed2" \
        docker plugin set "$alias" "state.source=$E2E_WORK/state-installed2"
    e2e_check "docker plugin enable $alias with every setting changed" docker plugin enable "$alias"
    settings_json=$("$E2E_WORK/bin/nvmevol" status --json --plugin "$alias" 2>&1)
    jq -e .settings <<<"$settings_json" >/dev/null 2>&1 || e2e_diag "nvmevol status --json --plugin $alias: $settings_json"
    for kv in "${kvs[@]}"; do
        name=${kv%%=*}
        value=${kv#*=}
        got=$(jq -r --arg n "$name" '.settings[$n] | if type == "array" then join(",") else tostring end' \
            <<<"$settings_json" 2>&1)
        e2e_eq "the plugin runs with $kv (its own status)" "$value" "$got"
    done
    e2e_eq "the plugin keeps its state in the state.source set (its own status)" state.source \
        "$(jq -r .state.location <<<"$settings_json" 2>&1)"
    e2e_check "the plugin wrote its state into the state.source set" test -d "$E2E_WORK/state-installed2/index"
    e2e_check "docker plugin disable $alias" docker plugin disable "$alias"
    if e2e_check_fails "plugin set dev.source (not settable) fails" docker plugin set "$alias" dev.source=/tmp; then
        e2e_diag "error: $E2E_LAST_OUTPUT"
    fi
    # Internal paths are not settings: they must match config.json's PropagatedMount and mounts.
    for kv in NVMEVOL_STATE_DIR=/tmp NVMEVOL_PROPAGATED_MOUNT=/tmp NVMEVOL_PARTITION_ROOT=/tmp; do
        e2e_check_fails "plugin set ${kv%%=*} (not a setting) fails" docker plugin set "$alias" "$kv" || true
    done
    e2e_check "docker plugin rm $alias" docker plugin rm -f "$alias"
}

# Volumes that survive lifecycle events; lc1 is used by a running container.
lifecycle_prepare() {
    if ! volume_exists lc1; then
        docker volume create -d "$PLUGIN_SHORT" -o uid=1000 -o gid=1000 -o mode=0750 lc1 >/dev/null
        docker volume create -d "$PLUGIN_SHORT" -o mode=0700 lc2 >/dev/null
        "${RUN[@]}" -v lc2:/data "$IMG" sh -c 'echo lc2-data >/data/f' >/dev/null
    fi
    if [ "$(docker inspect -f '{{.State.Running}}' e2e-lc 2>/dev/null)" != true ]; then
        docker rm -f e2e-lc >/dev/null 2>&1
        docker run -d --name e2e-lc --network none -v lc1:/data "$IMG" \
            sh -c 'echo lc1-data >/data/f; exec sleep 3600' >/dev/null
        sleep 1
    fi
    LC_OPTS1=$(volume_options lc1)
    LC_OPTS2=$(volume_options lc2)
}

# lifecycle_check WHAT IN_USE...: volumes, options and data survived.
lifecycle_check() {
    local what=$1
    shift
    wait_plugin_socket
    local ls
    ls=$(docker volume ls --format '{{.Driver}} {{.Name}}' 2>&1)
    e2e_match "$what: lc1 still in volume ls" "^$PLUGIN lc1\$" "$ls"
    e2e_match "$what: lc2 still in volume ls" "^$PLUGIN lc2\$" "$ls"
    e2e_eq "$what: lc1 options kept" "$LC_OPTS1" "$(volume_options lc1)"
    e2e_eq "$what: lc2 options kept" "$LC_OPTS2" "$(volume_options lc2)"
    e2e_eq "$what: lc1 data readable by a new container" lc1-data \
        "$("${RUN[@]}" -v lc1:/data "$IMG" cat /data/f 2>&1)"
    e2e_eq "$what: lc2 data readable by a new container" lc2-data \
        "$("${RUN[@]}" -v lc2:/data "$IMG" cat /data/f 2>&1)"
    e2e_eq "$what: lc1 owner/mode kept" "1000:1000 750" \
        "$("${RUN[@]}" -v lc1:/data "$IMG" stat -c '%u:%g %a' /data 2>&1)"
    check_no_stray_mounts "$what" "$@"
}

scenario_disable_enable() {
    lifecycle_prepare
    e2e_check_fails "plugin disable (without -f) fails while volumes exist" docker plugin disable "$PLUGIN"
    e2e_check "plugin disable -f with volumes in use" docker plugin disable -f "$PLUGIN"
    check_no_stray_mounts "after disable" # none at all: the plugin is off
    e2e_eq "a running container keeps its data while the plugin is disabled" lc1-data \
        "$(docker exec e2e-lc cat /data/f 2>&1)"
    e2e_check "plugin enable" docker plugin enable "$PLUGIN"
    e2e_eq "the plugin runs with the state dir $E2E_STATE_DIR" "$E2E_STATE_DIR" "$(plugin_state_source)"
    lifecycle_check "disable -f/enable" lc1
    e2e_eq "after disable/enable: running container still reads its volume" lc1-data \
        "$(docker exec e2e-lc cat /data/f 2>&1)"
}

scenario_upgrade() {
    lifecycle_prepare
    local ref
    if ! ref=$(e2e_push_plugin_variant e2e-upgrade); then
        e2e_not_ok "push of the upgrade to the local registry"
        return
    fi
    e2e_check "plugin disable -f before upgrade" docker plugin disable -f "$PLUGIN"
    e2e_check "plugin upgrade --grant-all-permissions --skip-remote-check $PLUGIN $ref" \
        docker plugin upgrade --grant-all-permissions --skip-remote-check "$PLUGIN" "$ref"
    e2e_eq "upgraded plugin's reference is $ref" "$ref" \
        "$(docker plugin inspect -f '{{.PluginReference}}' "$PLUGIN" 2>&1)"
    e2e_match "upgrade kept the plugin settings (label prefix)" "\"NVMEVOL_LABEL_PREFIX=$E2E_PREFIX\"" \
        "$(docker plugin inspect -f '{{json .Settings.Env}}' "$PLUGIN" 2>&1)"
    # Docker 20.10 keeps Settings.Mounts but runs the plugin with the new
    # Config.Mounts, where `plugin set state.source` had been stored: the
    # effective state dir reverts to the default.  plugin/install.sh
    # --upgrade sets it again; do the same here.
    local cfg_src
    cfg_src=$(docker plugin inspect "$PLUGIN" | jq -r '.[0].Config.Mounts[] | select(.Name == "state") | .Source')
    e2e_diag "after upgrade: Config.Mounts state source = $cfg_src, Settings.Mounts state source =" \
        "$(docker plugin inspect "$PLUGIN" | jq -r '.[0].Settings.Mounts[] | select(.Name == "state") | .Source')"
    e2e_check "re-apply state.source after upgrade" docker plugin set "$PLUGIN" "state.source=$E2E_STATE_DIR"
    e2e_check "plugin enable after upgrade" docker plugin enable "$PLUGIN"
    e2e_eq "the upgraded plugin runs with the state dir $E2E_STATE_DIR" "$E2E_STATE_DIR" "$(plugin_state_source)"
    lifecycle_check "upgrade"
    # The same with plugin/install.sh --upgrade, which does all of it.
    if ref=$(e2e_push_plugin_variant e2e-upgrade2); then
        e2e_check "plugin/install.sh --upgrade $ref" \
            "$E2E_REPO/plugin/install.sh" --name "$PLUGIN" --upgrade "$ref" --cli "$E2E_WORK/bin/nvmevol" \
            --legacy-state "$E2E_WORK/no-legacy-state"
        e2e_eq "after install.sh --upgrade: reference is $ref" "$ref" \
            "$(docker plugin inspect -f '{{.PluginReference}}' "$PLUGIN" 2>&1)"
        e2e_eq "after install.sh --upgrade: the plugin runs with the state dir $E2E_STATE_DIR" \
            "$E2E_STATE_DIR" "$(plugin_state_source)"
        lifecycle_check "install.sh --upgrade"
    else
        e2e_not_ok "push of the second upgrade to the local registry"
    fi
}

scenario_dockerd_kill() {
    lifecycle_prepare
    # lc2 is also used by a container with a restart policy: the restarted
    # daemon mounts it again with the persisted mount ID.
    docker rm -f e2e-lc-always >/dev/null 2>&1
    docker run -d --name e2e-lc-always --restart always --network none -v lc2:/data "$IMG" \
        sh -c 'exec sleep 3600' >/dev/null
    sleep 1
    local old_pid
    old_pid=$(e2e_plugin_pid)
    local old_dockerd new_dockerd
    old_dockerd=$(e2e_dockerd_pid)
    e2e_kill_dockerd
    e2e_eq "dockerd $old_dockerd was killed" gone "$( [ -n "$old_dockerd" ] && ! kill -0 "$old_dockerd" 2>/dev/null && echo gone)"
    e2e_start_dockerd
    new_dockerd=$(e2e_dockerd_pid)
    e2e_eq "a new dockerd runs" yes "$( [ -n "$new_dockerd" ] && [ "$new_dockerd" != "$old_dockerd" ] && echo yes)"
    wait_plugin_socket
    local i
    for i in $(seq 1 20); do
        [ "$(docker inspect -f '{{.State.Running}}' e2e-lc-always 2>/dev/null)" = true ] && break
        sleep 0.5
    done
    e2e_eq "restart-policy container is running again" true \
        "$(docker inspect -f '{{.State.Running}}' e2e-lc-always 2>&1)"
    e2e_eq "restart-policy container reads lc2" lc2-data "$(docker exec e2e-lc-always cat /data/f 2>&1)"
    e2e_eq "plugin process is a new one" yes \
        "$([ -n "$(e2e_plugin_pid)" ] && [ "$(e2e_plugin_pid)" != "$old_pid" ] && echo yes || echo "no (old $old_pid, new $(e2e_plugin_pid))")"
    lifecycle_check "dockerd SIGKILL+restart" lc2
    docker rm -f e2e-lc-always e2e-lc >/dev/null 2>&1
    check_no_stray_mounts "after removing all containers"
}

# ---------------------------------------------------------------------- main

e2e_main "$@"
