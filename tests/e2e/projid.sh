# shellcheck shell=bash
# Scenarios of tests/e2e/run.sh (sourced by it): can a container change the
# XFS project ID of files in its nvmevol volume, and so move them out of the
# volume's size= limit (plugin/README.md, "Size limits and container root")? And do the
# mitigations hold: --cap-drop FOWNER (not enough), the seccomp profile of
# examples/seccomp/ (EPERM), dockerd --userns-remap (EINVAL)?
#
# This host's kernel has no XFS quota, so size= cannot be used here; project
# IDs are stored in the inode all the same. Each volume gets project 4242 with
# the inherit flag from the host side, as size= gives it on a quota kernel,
# and the test reads the IDs back from the host after the container ran. The
# writes past a real limit are measured in the qemu guest
# (tests/qemu/guest-projid-escape.sh).

PJ_ID=4242
PJ_REMAP_ROOT=200000    # host uid of root in the userns-remap engine

# pj_tool NAME: path of a tests/tools program (static) from a build tree.
pj_tool() {
    local d
    for d in "$E2E_REPO/build-plugin" "$E2E_REPO/${NVMEVOL_BUILD_DIR:-build}"; do
        [ -x "$d/tests/tools/$1" ] && { echo "$d/tests/tools/$1"; return 0; }
    done
    for d in "$E2E_REPO/build-plugin" "$E2E_REPO/${NVMEVOL_BUILD_DIR:-build}"; do
        [ -f "$d/build.ninja" ] && ninja -C "$d" "tests/tools/$1" >/dev/null 2>&1 &&
            { echo "$d/tests/tools/$1"; return 0; }
    done
    return 1
}

# pj_setup: PROJID and DOCKERCAPS on the host, PJ_RUN to run a container with
# projid at /usr/bin/projid.
pj_setup() {
    PROJID=$(pj_tool projid) && DOCKERCAPS=$(pj_tool dockercaps) || {
        e2e_not_ok "tests/tools/projid and dockercaps are built (ninja -C build)"
        return 1
    }
    PJ_RUN=("${RUN[@]}" --mount "type=bind,src=$PROJID,dst=/usr/bin/projid,readonly")
}

# pj_vol_path VOLUME [REL]: the host path of a volume (or a file in it).
pj_vol_path() {
    find_on_partitions "nvmevol/volumes/$1${2:+/$2}" | head -n1
}

# pj_path_get PATH: "projid=N inherit=0|1" as the host reads it.
pj_path_get() {
    "$PROJID" get "$1" | sed 's/^.* projid=/projid=/; s/ flags=.*//'
}

# pj_host_get VOLUME [REL]: the same for a volume (or a file in it).
pj_host_get() {
    local p
    p=$(pj_vol_path "$@")
    [ -n "$p" ] || { echo "no such path: $1/${2:-}"; return 0; }
    pj_path_get "$p"
}

# pj_mark VOLUME|PATH: project PJ_ID with inheritance on the volume's
# directory, what size= sets on a quota kernel. Without it a change to
# project 0 would change nothing and prove nothing.
pj_mark() {
    local p=$1
    [ "${p#/}" != "$p" ] || p=$(pj_vol_path "$1")
    e2e_eq "host: $(basename "$p") gets project $PJ_ID with inheritance (as size= gives it)" \
        "$p: ok" "$("$PROJID" set "$PJ_ID" "$p" 2>&1)"
}

# pj_result OUTPUT PATH: "ok" or the errno name the container's projid printed for PATH.
pj_result() {
    sed -n "s|^$2: \\([A-Za-z]*\\).*|\\1|p" <<<"$1" | head -n1
}

scenario_projid_escape() {
    pj_setup || return
    docker volume create -d "$PLUGIN_SHORT" pjroot >/dev/null
    docker volume create -d "$PLUGIN_SHORT" -o uid=1000 -o gid=1000 pjuser >/dev/null
    pj_mark pjroot
    pj_mark pjuser
    e2e_eq "host reads pjroot back: project $PJ_ID with inheritance" "projid=$PJ_ID inherit=1" "$(pj_host_get pjroot)"

    # The capability set that tests/tools/dockercaps reproduces in the qemu guest.
    local caps='grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb)" /proc/self/status'
    e2e_eq "a container's capabilities (root) are the ones dockercaps gives in the qemu guest" \
        "$("$DOCKERCAPS" -- sh -c "$caps" 2>&1)" "$("${RUN[@]}" "$IMG" sh -c "$caps" 2>&1)"
    e2e_eq "a container's capabilities (--user 1000:1000) are the ones dockercaps --uid 1000 gives" \
        "$("$DOCKERCAPS" --uid 1000 --gid 1000 -- sh -c "$caps" 2>&1)" \
        "$("${RUN[@]}" --user 1000:1000 "$IMG" sh -c "$caps" 2>&1)"

    local out
    out=$("${PJ_RUN[@]}" -v pjroot:/data "$IMG" sh -c \
        'echo x >/data/f && projid get /data/f && projid set 0 /data/f /data' 2>&1)
    e2e_diag "container (root, default capabilities): $(tr '\n' ';' <<<"$out")"
    e2e_match "root container: a new file inherits project $PJ_ID" "^/data/f projid=$PJ_ID " "$out"
    e2e_eq "root container: FS_IOC_FSSETXATTR to project 0 succeeds on its file" ok "$(pj_result "$out" /data/f)"
    e2e_eq "root container: ... and on the volume's directory" ok "$(pj_result "$out" /data)"
    e2e_eq "host: the file is now in project 0 (out of the volume's limit)" "projid=0 inherit=0" "$(pj_host_get pjroot f)"
    e2e_eq "host: the volume's directory is project 0 without inheritance" "projid=0 inherit=0" "$(pj_host_get pjroot)"

    # The kernel reads the ioctl command as 32 bits: junk above them still works.
    out=$("${PJ_RUN[@]}" -v pjroot:/data "$IMG" projid set-high 77 /data/f 2>&1)
    e2e_eq "root container: the same ioctl with bit 32 set in the command succeeds" ok "$(pj_result "$out" /data/f)"
    e2e_eq "host: the file is in project 77" "projid=77 inherit=0" "$(pj_host_get pjroot f)"

    # chattr -P: clearing only the directory's inherit flag (FS_IOC_SETFLAGS).
    pj_mark pjroot
    out=$("${PJ_RUN[@]}" -v pjroot:/data "$IMG" sh -c 'projid noinherit /data && echo y >/data/g' 2>&1)
    e2e_eq "root container: FS_IOC_SETFLAGS clears the directory's project inheritance" ok "$(pj_result "$out" /data)"
    e2e_eq "host: a file created after that is in project 0" "projid=0 inherit=0" "$(pj_host_get pjroot g)"

    # file_setattr(2) (Linux 6.17) does the same as the ioctl. Docker 20.10's
    # profile does not list it: runc answers ENOSYS (what it gives syscalls
    # newer than the profile), the kernel is never asked.
    pj_mark pjroot
    out=$("${PJ_RUN[@]}" -v pjroot:/data "$IMG" projid set-syscall 0 /data 2>&1)
    e2e_match "root container: Docker's built-in seccomp profile refuses file_setattr(2)" '^(EPERM|ENOSYS)$' \
        "$(pj_result "$out" /data)"
    e2e_eq "host: the volume directory kept project $PJ_ID" "projid=$PJ_ID inherit=1" "$(pj_host_get pjroot)"
    out=$("${PJ_RUN[@]}" --security-opt seccomp=unconfined -v pjroot:/data "$IMG" projid set-syscall 0 /data 2>&1)
    if [ "$(pj_result "$out" /data)" = ENOSYS ]; then
        e2e_diag "file_setattr(2) is not in this kernel ($(uname -r)): the check without seccomp does not apply"
    else
        e2e_eq "root container without seccomp: file_setattr(2) changes the project" ok "$(pj_result "$out" /data)"
        e2e_eq "host: the volume directory is in project 0 after file_setattr(2)" "projid=0 inherit=0" \
            "$(pj_host_get pjroot)"
    fi

    out=$("${PJ_RUN[@]}" --user 1000:1000 -v pjuser:/data "$IMG" sh -c \
        'echo x >/data/f && projid set 0 /data/f /data' 2>&1)
    e2e_diag "container (--user 1000:1000, no effective capabilities): $(tr '\n' ';' <<<"$out")"
    e2e_eq "non-root container: project 0 on its own file succeeds (it owns the file)" ok "$(pj_result "$out" /data/f)"
    e2e_eq "non-root container: ... and on the volume's directory (uid=1000 made it the owner)" ok "$(pj_result "$out" /data)"
    e2e_eq "host: the non-root container's file is in project 0" "projid=0 inherit=0" "$(pj_host_get pjuser f)"
    docker volume rm pjroot pjuser >/dev/null
}

scenario_projid_capdrop() {
    pj_setup || return
    docker volume create -d "$PLUGIN_SHORT" -o uid=1000 -o gid=1000 pjcap >/dev/null
    pj_mark pjcap
    "${RUN[@]}" --user 1000:1000 -v pjcap:/data "$IMG" sh -c 'echo u >/data/u' >/dev/null 2>&1
    local out
    # Root keeps DAC_OVERRIDE: it may create files in the uid 1000 directory.
    out=$("${PJ_RUN[@]}" --cap-drop FOWNER -v pjcap:/data "$IMG" sh -c \
        'echo r >/data/r && projid set 0 /data/u /data /data/r' 2>&1)
    e2e_diag "container (root, --cap-drop FOWNER): $(tr '\n' ';' <<<"$out")"
    e2e_eq "--cap-drop FOWNER: root cannot change the project of uid 1000's file" EPERM "$(pj_result "$out" /data/u)"
    e2e_eq "--cap-drop FOWNER: ... nor of the uid 1000 volume directory" EPERM "$(pj_result "$out" /data)"
    e2e_eq "--cap-drop FOWNER: but root still moves its OWN new file to project 0" ok "$(pj_result "$out" /data/r)"
    e2e_eq "host: root's file is in project 0 despite --cap-drop FOWNER" "projid=0 inherit=0" "$(pj_host_get pjcap r)"
    e2e_eq "host: uid 1000's file kept project $PJ_ID" "projid=$PJ_ID inherit=0" "$(pj_host_get pjcap u)"
    docker volume rm pjcap >/dev/null
}

# pj_oci_seccomp CONTAINER: the seccomp section of its OCI spec, sorted.
pj_oci_seccomp() {
    local id cfg
    id=$(docker inspect -f '{{.Id}}' "$1") || return 1
    cfg=$(find "$E2E_EXEC_ROOT/containerd" -path "*/$id/config.json" | head -n1)
    [ -n "$cfg" ] && jq -S '.linux.seccomp' "$cfg"
}

scenario_projid_seccomp() {
    pj_setup || return
    local prof=$E2E_WORK/nvmevol-seccomp.json plain=$E2E_WORK/docker-default-seccomp.json
    if ! "$E2E_REPO/examples/seccomp/make-profile.sh" "$prof" ||
       ! "$E2E_REPO/examples/seccomp/make-profile.sh" --docker-default "$plain"; then
        e2e_not_ok "examples/seccomp/make-profile.sh writes the profile"
        return
    fi
    e2e_ok "examples/seccomp/make-profile.sh writes the profile"

    # The packaged file is the engine's built-in profile, and the generated
    # one differs from it by the ioctl rules alone (compared in the OCI specs
    # dockerd hands to runc, after Docker applied capabilities and arches).
    docker rm -f pj-sec-builtin pj-sec-file pj-sec-ours >/dev/null 2>&1
    docker run -d --network none --name pj-sec-builtin "$IMG" sleep 60 >/dev/null
    docker run -d --network none --name pj-sec-file --security-opt "seccomp=$plain" "$IMG" sleep 60 >/dev/null
    docker run -d --network none --name pj-sec-ours --security-opt "seccomp=$prof" "$IMG" sleep 60 >/dev/null
    local builtin file ours
    builtin=$(pj_oci_seccomp pj-sec-builtin)
    file=$(pj_oci_seccomp pj-sec-file)
    ours=$(pj_oci_seccomp pj-sec-ours)
    docker rm -f pj-sec-builtin pj-sec-file pj-sec-ours >/dev/null 2>&1
    if [ -n "$builtin" ] && [ "$builtin" = "$file" ]; then
        e2e_ok "the packaged default.json gives the same OCI seccomp as dockerd's built-in profile"
    else
        e2e_not_ok "the packaged default.json gives the same OCI seccomp as dockerd's built-in profile"
        e2e_diag "$(diff <(echo "$builtin") <(echo "$file") | head -n 20)"
    fi
    local strip='.syscalls |= map(.names -= ["ioctl"] | select(.names != []))'
    e2e_eq "the generated profile is the built-in one except for ioctl" \
        "$(jq -S "$strip" <<<"$builtin")" "$(jq -S "$strip" <<<"$ours")"
    e2e_eq "in the generated profile every ioctl rule is one masked compare of the command" yes \
        "$(jq -r '[.syscalls[] | select(.names | index("ioctl"))] | if length > 0 and
            all(.names == ["ioctl"] and .action == "SCMP_ACT_ALLOW" and (.args | length) == 1 and
                .args[0].index == 1 and .args[0].op == "SCMP_CMP_MASKED_EQ") then "yes" else "no" end' <<<"$ours")"

    docker volume create -d "$PLUGIN_SHORT" pjsec >/dev/null
    docker volume create -d "$PLUGIN_SHORT" -o uid=1000 -o gid=1000 pjsecu >/dev/null
    pj_mark pjsec
    pj_mark pjsecu
    local out
    out=$("${PJ_RUN[@]}" --security-opt "seccomp=$prof" -v pjsec:/data "$IMG" sh -c \
        'echo x >/data/f; mkdir /data/d; projid get /data/f; projid set 0 /data/f /data;
         projid set-high 0 /data/f; projid noinherit /data/d; projid set-syscall 0 /data/d' 2>&1)
    e2e_diag "container (root, nvmevol seccomp profile): $(tr '\n' ';' <<<"$out")"
    e2e_match "seccomp profile: FS_IOC_FSGETXATTR and FS_IOC_GETFLAGS (reading) still work" \
        "^/data/f projid=$PJ_ID inherit=0 flags=(0|0x[0-9a-f]+)\$" "$out"
    e2e_eq "seccomp profile: FS_IOC_FSSETXATTR on a file gets EPERM" EPERM \
        "$(sed -n 's|^/data/f: \([A-Z]*\).*|\1|p' <<<"$out" | head -n1)"
    e2e_eq "seccomp profile: FS_IOC_FSSETXATTR on the volume directory gets EPERM" EPERM "$(pj_result "$out" /data)"
    e2e_eq "seccomp profile: FS_IOC_FSSETXATTR with bit 32 set in the command gets EPERM" EPERM \
        "$(sed -n 's|^/data/f: \([A-Z]*\).*|\1|p' <<<"$out" | sed -n 2p)"
    e2e_eq "seccomp profile: FS_IOC_SETFLAGS (chattr -P) gets EPERM" EPERM "$(pj_result "$out" /data/d)"
    e2e_match "seccomp profile: file_setattr(2) is refused" '^(EPERM|ENOSYS)$' \
        "$(sed -n 's|^/data/d: \([A-Z]*\).*|\1|p' <<<"$out" | sed -n 2p)"
    e2e_eq "host: the file kept project $PJ_ID" "projid=$PJ_ID inherit=0" "$(pj_host_get pjsec f)"
    e2e_eq "host: the volume directory kept project $PJ_ID with inheritance" "projid=$PJ_ID inherit=1" "$(pj_host_get pjsec)"
    e2e_eq "host: the subdirectory kept its inheritance" "projid=$PJ_ID inherit=1" "$(pj_host_get pjsec d)"
    out=$("${PJ_RUN[@]}" --security-opt "seccomp=$prof" --user 1000:1000 -v pjsecu:/data "$IMG" sh -c \
        'echo x >/data/f; projid set 0 /data/f' 2>&1)
    e2e_eq "seccomp profile: a non-root container gets EPERM too" EPERM "$(pj_result "$out" /data/f)"

    # An ordinary workload runs the same under both profiles: files, fsync,
    # directory listing, statfs, terminal ioctls.
    local work='dd if=/dev/zero of=/data/w bs=1M count=8 conv=fsync 2>/dev/null && stat -c %s /data/w &&
        ls /data | wc -l && df -P /data | tail -n 1 | cut -c1-12 && stty rows 40 cols 100 && stty size && echo done'
    local a b
    a=$(docker run --rm -t --network none -v pjsec:/data "$IMG" sh -c "$work" </dev/null 2>&1 | tr -d '\r')
    b=$(docker run --rm -t --network none --security-opt "seccomp=$prof" -v pjsec:/data "$IMG" sh -c "$work" \
        </dev/null 2>&1 | tr -d '\r')
    e2e_match "busybox workload under the built-in profile" 'done$' "$a"
    e2e_eq "busybox workload (dd conv=fsync, ls, df, stty on a tty) gives the same output under the nvmevol profile" "$a" "$b"
    pj_postgres_workload "$prof"

    # Engine-wide instead of per container: dockerd --seccomp-profile.
    e2e_stop_dockerd
    E2E_DOCKERD_ARGS=(--seccomp-profile "$prof")
    e2e_start_dockerd
    E2E_DOCKERD_ARGS=()
    wait_plugin_socket
    e2e_match "dockerd --seccomp-profile: docker info names the profile" "profile=$prof" \
        "$(docker info -f '{{.SecurityOptions}}' 2>&1)"
    out=$("${PJ_RUN[@]}" -v pjsec:/data "$IMG" sh -c 'projid set 0 /data/f' 2>&1)
    e2e_eq "dockerd --seccomp-profile: a container without --security-opt gets EPERM" EPERM \
        "$(pj_result "$out" /data/f)"
    e2e_restart_dockerd
    wait_plugin_socket
    docker volume rm pjsec pjsecu >/dev/null
}

# PostgreSQL (initdb, server, a table of 10,000 rows) under the profile.
pj_postgres_workload() {
    local prof=$1 out
    e2e_postgres_image nvmevol-e2e/postgres:15
    docker volume create -d "$PLUGIN_SHORT" -o uid=999 -o gid=999 -o mode=0700 pjpg >/dev/null
    out=$(docker run --rm --network none --security-opt "seccomp=$prof" -v pjpg:/var/lib/postgresql/data \
        --entrypoint sh nvmevol-e2e/postgres:15 -c '
        initdb --auth=trust -D "$PGDATA" >/dev/null &&
        pg_ctl -D "$PGDATA" -w -o "-c listen_addresses= -c unix_socket_directories=/tmp" start >/dev/null &&
        psql -h /tmp -d postgres -Atc "create table t (i int primary key); insert into t select generate_series(1, 10000); checkpoint; select count(*) from t" &&
        pg_ctl -D "$PGDATA" -w stop >/dev/null' 2>&1)
    e2e_eq "PostgreSQL 15 (initdb, start, 10,000 rows, checkpoint, stop) runs under the nvmevol profile" 10000 \
        "$(tail -n 1 <<<"$out")"
    [ "$(tail -n 1 <<<"$out")" = 10000 ] || e2e_diag "$out"
    docker volume rm pjpg >/dev/null
}

# ------------------------------------------------------- userns-remap engine

# A second dockerd with --userns-remap, in its own mount namespace (slave: it
# sees the host's mounts, the host sees none of its) where a bind-mounted
# /etc/passwd, group, subuid and subgid define the remap user, so the host's
# files are not touched. Its own loop partition, with a label prefix the main
# plugin does not take.
PJ_REMAP_DIR=$E2E_WORK/remap
PJ_REMAP_PREFIX=nvr$(printf '%04x' $((RANDOM)))

# pj_remap_env / pj_main_env: point lib.sh's engine variables at the remap
# engine, and back to the main one (under $E2E_WORK).
pj_remap_env() {
    e2e_dockerd_dir "$PJ_REMAP_DIR"
    E2E_DOCKERD_WRAPPER=(unshare -m --propagation slave "$PJ_REMAP_DIR/with-remap-user.sh")
    E2E_DOCKERD_ARGS=(--userns-remap=nvremap:nvremap)
    export DOCKER_HOST=unix://$E2E_SOCK
}

pj_main_env() {
    e2e_dockerd_dir "$E2E_WORK"
    E2E_DOCKERD_WRAPPER=()
    E2E_DOCKERD_ARGS=()
    export DOCKER_HOST=unix://$E2E_SOCK
}

# Also an e2e_cleanup hook (a run that died half-way): in a subshell, so the
# main engine's variables stay as they are.
pj_remap_stop() {
    [ -d "$PJ_REMAP_DIR" ] || return 0
    ( pj_remap_env; e2e_stop_dockerd )
    rm -rf "$PJ_REMAP_DIR"
}
E2E_CLEANUP_HOOKS+=(pj_remap_stop)

pj_remap_start() {
    pj_remap_stop
    mkdir -p "$PJ_REMAP_DIR/etc" "$PJ_REMAP_DIR/state"
    { cat /etc/passwd; echo "nvremap:x:3999:3999::/nonexistent:/usr/sbin/nologin"; } >"$PJ_REMAP_DIR/etc/passwd"
    { cat /etc/group; echo "nvremap:x:3999:"; } >"$PJ_REMAP_DIR/etc/group"
    echo "nvremap:$PJ_REMAP_ROOT:65536" >"$PJ_REMAP_DIR/etc/subuid"
    echo "nvremap:$PJ_REMAP_ROOT:65536" >"$PJ_REMAP_DIR/etc/subgid"
    cat >"$PJ_REMAP_DIR/with-remap-user.sh" <<SH
#!/bin/sh
set -e
for f in passwd group subuid subgid; do mount --bind "$PJ_REMAP_DIR/etc/\$f" "/etc/\$f"; done
exec "\$@"
SH
    chmod 0755 "$PJ_REMAP_DIR/with-remap-user.sh"
    pj_remap_env
    e2e_start_dockerd
}

scenario_projid_userns() {
    pj_setup || return
    case $PJ_REMAP_PREFIX in "$E2E_PREFIX"*)
        e2e_not_ok "the userns-remap engine's label prefix $PJ_REMAP_PREFIX is outside $E2E_PREFIX"; return ;;
    esac
    e2e_make_loop_xfs "${PJ_REMAP_PREFIX}a" 320 >/dev/null
    pj_remap_start
    pj_userns_checks
    pj_main_env
    pj_remap_stop
}

# Runs against the remap engine.
pj_userns_checks() {
    e2e_match "dockerd --userns-remap runs" 'name=userns' "$(docker info -f '{{.SecurityOptions}}' 2>&1)"
    if ! "$E2E_REPO/plugin/install.sh" --replace --name "$E2E_PLUGIN" \
            "NVMEVOL_LABEL_PREFIX=$PJ_REMAP_PREFIX" "state.source=$PJ_REMAP_DIR/state" \
            >"$PJ_REMAP_DIR/install.log" 2>&1; then
        e2e_not_ok "the managed plugin installs and enables under --userns-remap"
        e2e_diag "$(tail -n 20 "$PJ_REMAP_DIR/install.log")"
        return
    fi
    e2e_ok "the managed plugin installs and enables under --userns-remap"
    local ppid
    ppid=$(e2e_plugin_pid)
    e2e_eq "the plugin itself runs in the host's user namespace (it mounts and sets quotas)" \
        "0 0 4294967295" "$(awk '{ print $1, $2, $3 }' "/proc/$ppid/uid_map" 2>&1)"
    e2e_busybox_image "$IMG"
    # Container root is host uid PJ_REMAP_ROOT: the volume must belong to it.
    docker volume create -d "$PLUGIN_SHORT" -o uid=$PJ_REMAP_ROOT -o gid=$PJ_REMAP_ROOT pjns >/dev/null
    local vdir
    vdir=$(find "/proc/$ppid/root$E2E_PARTITION_ROOT" -mindepth 4 -maxdepth 4 -path '*/nvmevol/volumes/pjns' | head -n1)
    [ -n "$vdir" ] || { e2e_not_ok "the host finds pjns on the remap engine's partition"; return; }
    pj_mark "$vdir"
    local out
    out=$("${PJ_RUN[@]}" -v pjns:/data "$IMG" sh -c \
        'cat /proc/self/uid_map; echo x >/data/f && echo written; projid set 0 /data/f /data; projid noinherit /data' 2>&1)
    e2e_diag "container (root, userns-remap): $(tr '\n' ';' <<<"$out")"
    e2e_match "container root is host uid $PJ_REMAP_ROOT" "^ *0 +$PJ_REMAP_ROOT +65536" "$out"
    e2e_match "the container writes to its volume (-o uid=$PJ_REMAP_ROOT)" '^written$' "$out"
    e2e_eq "userns-remap: FS_IOC_FSSETXATTR on its own file gets EINVAL" EINVAL "$(pj_result "$out" /data/f)"
    e2e_eq "userns-remap: FS_IOC_FSSETXATTR on the volume directory gets EINVAL" EINVAL \
        "$(sed -n 's|^/data: \([A-Z]*\).*|\1|p' <<<"$out" | head -n1)"
    e2e_eq "userns-remap: FS_IOC_SETFLAGS clearing inheritance gets EINVAL" EINVAL \
        "$(sed -n 's|^/data: \([A-Z]*\).*|\1|p' <<<"$out" | sed -n 2p)"
    e2e_eq "host: the file stayed in project $PJ_ID" "projid=$PJ_ID inherit=0" \
        "$(pj_path_get "$vdir/f")"
    e2e_eq "host: the volume directory kept project $PJ_ID with inheritance" "projid=$PJ_ID inherit=1" \
        "$(pj_path_get "$vdir")"
    docker volume rm pjns >/dev/null
}
