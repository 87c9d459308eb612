# shellcheck shell=bash
# The README's command blocks, run as written (tests/e2e/admin.sh, host.sh):
# a block is the ```sh block after a line <!-- readme-test: NAME --> in
# README.md. Source after lib.sh; the caller sets NSBIN (the view's
# /usr/local/bin).

README=$E2E_REPO/README.md

# readme_block NAME: the lines of the ```sh block after <!-- readme-test: NAME -->.
readme_block() {
    awk -v name="$1" '
        $0 == "<!-- readme-test: " name " -->" { want = 1; next }
        want && /^```sh$/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }
    ' "$README"
}

# in_host_view SCRIPT [LEGACY_DIR]: runs SCRIPT (bash) in a private mount
# namespace with a copy of /usr/local/bin ($NSBIN) and a /var/lib that holds
# only $E2E_WORK (and LEGACY_DIR copied to /var/lib/nvmevol if given); with
# E2E_VIEW_UNIT_DIR set, that directory as /etc/systemd/system. With
# E2E_VIEW_NONE=1, SCRIPT runs in this mount namespace: a mount namespace made
# before the plugin mounts a volume never sees that mount.
in_host_view() {
    local script=$1 legacy=${2:-} hold
    # A block that installs nothing but must see mounts made after it started (Podman binds volumes itself).
    if [ "${E2E_VIEW_NONE:-0}" = 1 ]; then
        (cd "$E2E_REPO" && bash "$script")
        return
    fi
    hold=$(mktemp -d /tmp/nvmevol-e2e-admin.XXXXXX)
    unshare --mount --propagation private bash -s "$hold" "$legacy" "$script" "$NSBIN" "$E2E_WORK" "$E2E_REPO" \
        "${E2E_VIEW_UNIT_DIR:-}" <<'NS'
set -e
hold=$1 legacy=$2 script=$3 NSBIN=$4 E2E_WORK=$5 E2E_REPO=$6 UNIT_DIR=$7
mount --bind "$NSBIN" /usr/local/bin
[ -z "$UNIT_DIR" ] || mount --bind "$UNIT_DIR" /etc/systemd/system
mount --rbind /var/lib "$hold"
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mkdir -p "$E2E_WORK"
mount --rbind "$hold/${E2E_WORK#/var/lib/}" "$E2E_WORK"
[ -z "$legacy" ] || cp -a "$legacy" /var/lib/nvmevol
set +e
cd "$E2E_REPO"
bash "$script"
NS
    local rc=$?
    rmdir "$hold" 2>/dev/null
    return $rc
}

# run_readme NAME [POST]: runs block NAME line by line in the host view, each
# line as written; fills LINES, RCS, OUTS (stdout+stderr). POST runs after it
# (in the same view), its output in POST_OUT. LEGACY_DIR as in in_host_view.
run_readme() {
    local name=$1 post=${2:-} dir=$E2E_WORK/readme-$1 i=0 line
    rm -rf "$dir"
    mkdir -p "$dir"
    LINES=()
    while IFS= read -r line; do
        [ -n "$line" ] && LINES+=("$line")
    done < <(readme_block "$name")
    if [ "${#LINES[@]}" -eq 0 ]; then
        e2e_not_ok "README block '$name' found"
        return 1
    fi
    {
        # Outside the view, the view's /usr/local/bin ($NSBIN: the installed command) comes first.
        if [ "${E2E_VIEW_NONE:-0}" = 1 ]; then
            printf 'export PATH=%q:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n' "$NSBIN"
        else
            echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        fi
        for i in "${!LINES[@]}"; do
            printf '%s\n' "${LINES[$i]}" >"$dir/line.$i"
            printf 'bash -e -o pipefail %q >%q 2>&1; echo $? >%q\n' "$dir/line.$i" "$dir/out.$i" "$dir/rc.$i"
        done
        [ -z "$post" ] || printf '%s >%q 2>&1\n' "$post" "$dir/post"
    } >"$dir/script"
    in_host_view "$dir/script" "${LEGACY_DIR:-}"
    RCS=()
    OUTS=()
    for i in "${!LINES[@]}"; do
        RCS+=("$(cat "$dir/rc.$i" 2>/dev/null || echo none)")
        OUTS+=("$(cat "$dir/out.$i" 2>/dev/null)")
    done
    POST_OUT=$(cat "$dir/post" 2>/dev/null)
}

# check_readme NAME: every line of the block exited 0.
check_readme() {
    local i
    for i in "${!LINES[@]}"; do
        if [ "${RCS[$i]}" = 0 ]; then
            e2e_ok "README ($1): ${LINES[$i]}"
        else
            e2e_not_ok "README ($1): ${LINES[$i]} (exit ${RCS[$i]})"
            e2e_diag "$(tail -n 15 <<<"${OUTS[$i]}")"
        fi
    done
}

