#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Power loss (tests/reliability/powerloss.py) inside the qemu guest: Debian's
# kernel has dm-log-writes, dm-snapshot and XFS project quota. Per recording
# one data disk (the state directory's XFS and the pool partitions' XFS as
# device-mapper slices of it, made here with mkfs.xfs), its log disk, a copy
# of the data disk as it was before the recording (the base every replay
# starts from) and a scratch disk for the snapshots. The data disk also holds
# the other node of send/receive and move (a second daemon's state directory
# and pool partition). Recordings: two pool partitions, one, and (CI,
# --sabotage) the three sabotaged daemons'. One boot; ends with one line
# "N passed, N failed".
#
# The whole script is one function, read before it runs: bash reads a script
# as it goes, so an edit of this file during a long run (--full) would
# otherwise run the rest from a shifted offset (a failure no test reported).
#
# usage: tests/qemu/run-powerloss-tests.sh [--full] [--sabotage] [--seed N] [BUILD_DIR]
#   (default): CI mode (about 4 minutes): a seeded sample of the answers, the
#              flush/FUA points and the reordered epochs, then the sabotage
#   --full     every answer, every flush/FUA point, 200 reordered epochs and 100
#              with a torn write per recording (about 3-4 s a cut under TCG)
#   --sabotage the daemon skips the fsync of each state file before its rename
#              (NVMEVOL_TEST_SKIP_FSYNC=file, a test_hooks build), in a second
#              recording only that of the snapshot records (=snapshot), in a
#              third only that of a fence's record (=fence): each passes only if
#              the suite reports violations
# POWERLOSS_ARGS: more options of powerloss.py for every recording (the last one
# given wins), e.g. "--flush-sample 60 --reorders 30" between CI and --full.
# POWERLOSS_RECORDINGS: only these recordings ("2", "1", "s", "t", "f"), e.g. a
# --full run split over two boots.
# POWERLOSS_BUDGET: seconds each recording may run before the guest's watchdog
# reports it hung (default: budget_for below).
main() {
set -u
cd "$(dirname "$0")/../.." || exit 1
MODE=ci
SABOTAGE=0
SEED=
while [ $# -gt 0 ]; do
	case "$1" in
	--full) MODE=full; shift ;;
	--sabotage) SABOTAGE=1; shift ;;
	--seed) SEED=$2; shift 2 ;;
	-*) echo "usage: $0 [--full] [--sabotage] [--seed N] [BUILD_DIR]" >&2; exit 2 ;;
	*) break ;;
	esac
done
BUILD=${1:-${NVMEVOL_BUILD_DIR:-build}}
SUITE=run-powerloss-tests.sh
. tests/qemu/lib.sh
qemu_require_built "$BUILD/src/nvmevol"
for t in dmsetup:dmsetup xfs_repair:xfsprogs blockdev:util-linux /usr/bin/python3.11:python3.11-minimal; do
	command -v "${t%%:*}" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${t#*:}" >/dev/null 2>&1
	command -v "${t%%:*}" >/dev/null 2>&1 || { echo "$SUITE: ${t%%:*} (package ${t#*:}) missing" >&2; echo "0 passed, 1 failed"; exit 1; }
done

work=$(mktemp -d "${NVMEVOL_TEST_TMPDIR:-/var/tmp}/nvmevol-powerloss.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The data disks: at 1 MiB the state directory's XFS, then each pool partition's, then the other
# node's state directory and pool partition, 320 MiB each (the offsets of
# tests/reliability/powerloss.py's slices()).
make_data() { # make_data IMAGE NPARTS: the image, and IMAGE.base (the same bytes)
	local img=$1 n=$2 i labels=(pwlstate pwl-a)
	[ "$n" -gt 1 ] && labels+=(pwl-b)
	labels+=(pwnstate pwn-a)
	truncate -s $((1 + ${#labels[@]} * 320))M "$img"
	for ((i = 0; i < ${#labels[@]}; i++)); do
		truncate -s 320M "$work/slice"
		mkfs.xfs -q -f -K -L "${labels[i]}" "$work/slice" || return 1
		dd if="$work/slice" of="$img" bs=1M seek=$((1 + i * 320)) conv=notrunc,sparse status=none || return 1
		rm -f "$work/slice"
	done
	cp --sparse=always "$img" "$img.base"
}
# Recordings: "2" and "1" (two pool partitions, one), "s" (two, the daemon without the state
# files' fsync), "t" (two, without the snapshot records' fsync), "f" (two, without the fence
# record's fsync).
case "$MODE,$SABOTAGE" in
*,1) RECS="s t f" ;;
ci,0) RECS="2 1 s t f" ;;
full,0) RECS="2 1" ;;
esac
RECS=${POWERLOSS_RECORDINGS:-$RECS}
for r in $RECS; do
	n=$r; case $r in s | t | f) n=2 ;; esac
	make_data "$work/d$r.img" "$n" || { echo "$SUITE: making the disks failed" >&2; echo "0 passed, 1 failed"; exit 1; }
	truncate -s 3G "$work/l$r.img"
done
truncate -s 2G "$work/cow.img"

# Python for the guest: the interpreter and the part of its library the suite imports.
py=$work/py
mkdir -p "$py/lib"
cp -L /usr/bin/python3.11 "$py/python3"
tar -C /usr/lib -cf - --exclude='python3.11/test' --exclude='python3.11/config-*' --exclude='python3.11/idlelib' \
	--exclude='python3.11/tkinter' --exclude='python3.11/lib2to3' --exclude='python3.11/pydoc_data' \
	--exclude='python3.11/ensurepip' --exclude='python3.11/distutils' --exclude='python3.11/turtledemo' \
	--exclude='python3.11/site-packages' --exclude='python3.11/dist-packages' --exclude='*/__pycache__/*.opt-*' \
	python3.11 | tar -C "$py/lib" -xf -

q=()
# werror/rerror=report: a host disk that fills up fails the guest's write with EIO, where qemu's
# default (enospc) would pause the guest, silent until its timeout.
disk() { # disk SERIAL IMAGE
	q+=(--qemu-arg -drive --qemu-arg "if=none,id=$1,format=raw,cache=unsafe,werror=report,rerror=report,file=$2")
	q+=(--qemu-arg -device --qemu-arg "virtio-blk-pci,drive=$1,serial=$1")
}
for r in $RECS; do
	disk "pwld$r" "$work/d$r.img"
	disk "pwll$r" "$work/l$r.img"
	disk "pwlr$r" "$work/d$r.img.base"
done
disk pwlcow "$work/cow.img"

# What each recording replays: CI samples (seeded) the answers, flush points and epochs.
args_for() { # args_for RECORDING
	case "$MODE,$1" in
	*,s) echo "--parts 2 --sabotage file --ops 6 --mark-sample 5 --flush-sample 0 --reorders 0 --torn 0" ;;
	*,t) echo "--parts 2 --sabotage snapshot --sections snapshots --ops 4 --mark-sample 4 --flush-sample 0 --reorders 0 --torn 0" ;;
	*,f) echo "--parts 2 --sabotage fence --sections fence --ops 4 --mark-sample 4 --flush-sample 0 --reorders 0 --torn 0" ;;
	# The receives, the moves and the evacuation: each answer, and a flush point inside each.
	ci,2) echo "--parts 2 --mark-sample 1 --flush-sample 1 --reorders 1 --torn 1 --focus receive,move,evacuate" ;;
	ci,1) echo "--parts 1 --sections base,snapshots,move --mark-sample 2 --flush-sample 1 --reorders 1 --torn 1 --focus move" ;;
	full,*) echo "--parts $1 --reorders 200 --torn 100" ;;
	esac
}
# Seconds a recording may run in the guest (a CI run's take about a fifth of it, --full's a third).
budget_for() { # budget_for RECORDING
	[ -n "${POWERLOSS_BUDGET:-}" ] && { echo "$POWERLOSS_BUDGET"; return; }
	case "$MODE,$1" in
	full,*) echo 5400 ;;
	*,2 | *,1) echo 420 ;;
	*) echo 180 ;;
	esac
}
script=$work/guest.sh
{
	echo 'dev() { for d in /sys/block/vd*; do [ "$(cat $d/serial 2>/dev/null)" = "$1" ] && echo /dev/${d##*/}; done; }'
	echo 'for i in $(seq 1 100); do [ -n "$(dev pwlcow)" ] && break; sleep 0.1; done'
	# The watchdog: a recording past its budget is a failure that names where everything waits (the
	# tasks in D state with their kernel stacks, the script's threads, memory, the kernel's log), not
	# a silent guest until its timeout. One that SIGKILL cannot end (asleep in the kernel) powers the
	# guest off: nothing after it could use the device-mapper names it holds.
	cat <<-'EOF'
	watchdog() { # watchdog PID SECONDS RECORDING
		s=0
		while [ $s -lt $2 ]; do sleep 5; s=$((s + 5)); kill -0 $1 2>/dev/null || return 0; done
		: >/tmp/powerloss-hung
		echo "[FAIL] powerloss: recording $3 still running after $2 s (what it waits on follows)"
		echo 1 >/proc/sys/kernel/sysrq; echo w >/proc/sysrq-trigger
		kill -USR1 $1; sleep 3
		cat /tmp/powerloss-threads.txt
		# One pass over the tasks in D state: their top frames for the summary line, whole stacks after it.
		d=
		: >/tmp/powerloss-dstate.txt
		for t in /proc/[0-9]*; do
			[ "$(cut -d' ' -f3 $t/stat 2>/dev/null)" = D ] || continue
			d="$d $(cat $t/comm) in $(head -n 1 $t/stack | cut -c1-60);"
			{ echo "task ${t#/proc/} $(cat $t/comm) in D state:"; cat $t/stack; } >>/tmp/powerloss-dstate.txt
		done
		echo "powerloss: FAILED recording $3 hung: the script at powerloss.py lines $(grep -o 'powerloss.py", line [0-9]*' /tmp/powerloss-threads.txt | head -n 2 | sed 's/.* //' | tr '\n' ' ')(innermost first); tasks in D state:${d:- none}"
		grep -E '^(MemTotal|MemAvailable|Dirty|Writeback|Shmem):' /proc/meminfo
		cat /tmp/powerloss-dstate.txt
		dmesg | sed -n '/sysrq: Show Blocked State/,$p' | tail -n 200
		kill -9 $1; sleep 10
		if ! kill -0 $1 2>/dev/null; then
			# What it left for the next recording: its daemons, mounts and device-mapper names.
			killall -9 nvmevol 2>/dev/null; sleep 1
			grep -o ' /tmp/pwl[^ ]*' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
			DM_DISABLE_UDEV=1 dmsetup remove_all
			return 0
		fi
		echo "powerloss: recording $3 did not end on SIGKILL: powering off"
		echo "NVMEVOL-GUEST-EXIT=1"; sync; poweroff -f
	}
	EOF
	echo 'rc=0'
	for r in $RECS; do
		echo "/usr/bin/python3 /work/rel/powerloss.py --data \$(dev pwld$r) --log \$(dev pwll$r) --replay \$(dev pwlr$r)" \
			"--cow \$(dev pwlcow) --binary /work/nvmevol $(args_for "$r") ${SEED:+--seed $SEED} ${POWERLOSS_ARGS:-} &"
		echo "pid=\$!; watchdog \$pid $(budget_for "$r") $r & wd=\$!"
		echo 'wait $pid || rc=1; [ -e /tmp/powerloss-hung ] && wait $wd; kill $wd 2>/dev/null; rm -f /tmp/powerloss-hung'
	done
	echo 'exit $rc'
} >"$script"

# The host as the guest meets it (a CI run once went silent here): its load, free space, busiest tasks.
echo "$SUITE: host load $(cut -d' ' -f1-3 /proc/loadavg), $(df -Pm "$work" | awk 'NR == 2 { print $4 }') MiB free;" \
	"busiest: $(ps -eo pcpu=,comm= --sort=-pcpu | head -n 4 | awk '{ printf "%s %s%%, ", $2, $1 }')" >&2
log=$work/guest.log
timeout=${NVMEVOL_QEMU_TIMEOUT:-$([ "$MODE" = full ] && echo 14400 || echo 900)}
qemu_boot "$log" --timeout "$timeout" --mem 1536 \
	--module virtio_pci --module virtio_blk --module dm_mod --module dm_log_writes --module dm_snapshot \
	--file "$BUILD/src/nvmevol" --file "$(command -v dmsetup):/usr/sbin/dmsetup" \
	--file "$(command -v xfs_repair):/usr/sbin/xfs_repair" --file "$(command -v blockdev):/usr/sbin/blockdev" \
	--file "$py/python3:/usr/bin/python3" --file "$py/lib/python3.11:/usr/lib/python3.11" \
	--file tests/reliability/powerloss.py:/work/rel/powerloss.py --file tests/reliability/logwrites.py:/work/rel/logwrites.py \
	--file tests/reliability/nvtlib.py:/work/rel/nvtlib.py \
	"${q[@]}" --script "$script"
rc=$?
grep -a '^powerloss figures:' "$log" >&2
qemu_result "$log" "$rc"
}
main "$@"; exit
