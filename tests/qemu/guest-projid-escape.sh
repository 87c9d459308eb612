#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs INSIDE the qemu guest (tests/qemu/run-quota-tests.sh copies it in with
# nvmevol, plugin-call, projid and dockercaps): can a process with exactly
# Docker's default capabilities move its files out of a size= volume's XFS
# project quota, and so write past the limit? The real daemon creates each
# volume with size=10M on a loop XFS mounted with prjquota; the "container"
# is dockercaps (Docker 20.10's 14 default capabilities, initial user
# namespace unless --userns) running busybox sh in the volume.
#
# Each case: fill the volume until the quota stops dd, change the project
# (FS_IOC_FSSETXATTR to 0, or only clear the directory's inherit flag with
# FS_IOC_SETFLAGS), write 20 MiB more, count the bytes in the volume.
# Prints one "[PASS] ..." or "[FAIL] ..." line per check (counted like
# Criterion's by run-quota-tests.sh) and the figures; exits 1 if any failed.
set -u
W=/tmp/projid-escape
LIMIT=10485760
SOCK=$W/sock
pass=0
fail=0
dev=
daemon=

ok() { echo "[PASS] projid-escape: $*"; pass=$((pass + 1)); }
bad() { echo "[FAIL] projid-escape: $*"; fail=$((fail + 1)); }

cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	for m in $(awk -v d="$W" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount "$m" 2>/dev/null
	done
	[ -n "$dev" ] && losetup -d "$dev"
	rm -rf "$W"
}
trap cleanup EXIT

mkdir -p "$W/prop" "$W/parts" "$W/state"
truncate -s 320M "$W/disk.img" # sparse, in the guest's tmpfs; XFS needs 300 MB
# util-linux losetup: busybox sh runs its own applet of that name first.
dev=$(/usr/sbin/losetup --find --show "$W/disk.img") || { bad "losetup failed"; exit 1; }
mkfs.xfs -q -L pjesc0 "$dev" || { bad "mkfs.xfs failed"; exit 1; }
NVMEVOL_SOCKET=$SOCK NVMEVOL_STATE_DIR=$W/state NVMEVOL_PROPAGATED_MOUNT=$W/prop \
	NVMEVOL_PARTITION_ROOT=$W/parts NVMEVOL_LABEL_PREFIX=pjesc NVMEVOL_SELFTEST=off \
	nvmevol >"$W/daemon.log" 2>&1 &
daemon=$!
i=0
until plugin-call "$SOCK" List >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { bad "the daemon did not answer"; cat "$W/daemon.log"; exit 1; }
	sleep 0.2
done

# used_bytes of the volume's project, from the daemon's Status (quota accounting).
used_bytes() {
	plugin-call "$SOCK" Get "{\"Name\":\"$1\"}" | sed -n 's/.*"used_bytes": *\([0-9]*\).*/\1/p'
}

# What the "container" runs, in the volume $1, with method $2 (set0, noinherit, none).
# Prints "first=<bytes> change=<ok|ERRNO> total=<bytes>".
cat >"$W/escape.sh" <<'SH'
v=$1
dd if=/dev/zero of="$v/a" bs=64k count=480 2>/dev/null
sync
first=$(stat -c %s "$v/a")
case $2 in
set0) r=$(projid set 0 "$v" "$v/a" | grep -v ': ok$' | head -n1) ;;
noinherit) r=$(projid noinherit "$v" | grep -v ': ok$' | head -n1) ;;
none) r= ;;
esac
change=ok
[ -n "$r" ] && change=${r#*: } && change=${change%% *}
dd if=/dev/zero of="$v/b" bs=64k count=320 2>/dev/null
sync
second=$(stat -c %s "$v/b" 2>/dev/null || echo 0) # no b at all when the quota refuses its inode
echo "first=$first change=$change total=$(( first + second ))"
SH

# case NAME METHOD EXPECT(escape|held) DOCKERCAPS-ARGS... [-- uid=N]
run_case() {
	name=$1 method=$2 expect=$3
	shift 3
	opts='"size":"10M"'
	uid=0
	case " $* " in *" --uid 1000 "*) opts="$opts,\"uid\":\"1000\",\"gid\":\"1000\"" uid=1000 ;; esac
	plugin-call "$SOCK" Create "{\"Name\":\"$name\",\"Opts\":{$opts}}" >/dev/null ||
		{ bad "$name: Create failed"; return; }
	plugin-call "$SOCK" Mount "{\"Name\":\"$name\",\"ID\":\"c1\"}" >/dev/null ||
		{ bad "$name: Mount failed"; return; }
	v=$W/prop/$name
	caps=$(dockercaps "$@" -- sh -c 'grep -E "^Cap(Eff|Bnd)" /proc/self/status | tr -s "\t\n" "  "')
	out=$(dockercaps "$@" -- sh "$W/escape.sh" "$v" "$method")
	first=$(echo "$out" | sed -n 's/.*first=\([0-9]*\).*/\1/p')
	change=$(echo "$out" | sed -n 's/.*change=\([^ ]*\).*/\1/p')
	total=$(echo "$out" | sed -n 's/.*total=\([0-9]*\).*/\1/p')
	used=$(used_bytes "$name")
	case "$first/$total/$change" in
	[0-9]*/[0-9]*/?*) ;;
	*) bad "$name: the container script gave no figures: $out"; return ;;
	esac
	past=$(( total - LIMIT ))
	echo "projid-escape: $name (dockercaps $*; uid $uid; $caps): filled to ${first:-?} bytes," \
		"$method: ${change:-?}, then $total bytes in the volume, $past past the 10M limit;" \
		"quota used_bytes now ${used:-?}"
	# The quota must have stopped the first write, in every case.
	if [ -n "$first" ] && [ "$first" -le "$LIMIT" ] && [ "$first" -gt $((LIMIT - 1048576)) ]; then
		ok "$name: the 10M limit stops the first write at $first bytes"
	else
		bad "$name: the first write reached ${first:-?} bytes (limit $LIMIT)"
	fi
	if [ "$expect" = escape ]; then
		if [ "$change" = ok ] && [ "$past" -gt 0 ]; then
			ok "$name: ESCAPE: $method succeeded and $past bytes landed past the limit"
		else
			bad "$name: expected the escape to work (change=$change, past=$past)"
		fi
	else
		if { [ "$method" = none ] || [ "$change" != ok ]; } && [ "$past" -le 0 ]; then
			ok "$name: held: $method ${change:+($change)}, nothing past the limit ($total bytes)"
		else
			bad "$name: expected the limit to hold (change=$change, past=$past)"
		fi
	fi
	plugin-call "$SOCK" Unmount "{\"Name\":\"$name\",\"ID\":\"c1\"}" >/dev/null
}

# The capability set dockercaps gives is Docker's (e2e compares it with a container's).
want=00000000a80425fb
got=$(dockercaps -- sh -c 'sed -n "s/^CapEff:\t//p" /proc/self/status')
[ "$got" = "$want" ] && ok "dockercaps gives CapEff $got (Docker 20.10's default)" ||
	bad "dockercaps gives CapEff $got, Docker's default is $want"

run_case control none held
run_case root set0 escape
run_case user set0 escape --uid 1000 --gid 1000
run_case rootnofowner set0 escape --drop FOWNER
run_case rootnoinherit noinherit escape
run_case usernoinherit noinherit escape --uid 1000 --gid 1000
run_case rootuserns set0 held --userns
run_case rootusernsnoinh noinherit held --userns

echo "projid-escape: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
