#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs inside the qemu guest of tests/monitoring/live.sh (busybox sh): what the
# host's kernel cannot give the monitoring check. Debian's kernel has XFS
# project quota, and qemu emulates two NVMe controllers, the second with a
# SMART critical warning. nvmevol runs on one XFS per namespace and writes its
# metrics into the host directory shared over 9p (tag "shared"), which a
# second node_exporter on the host serves: volumes with size= and inodes=
# limits and their usage (60 of 64 MiB), and the devices' health, healthy and not.
# Stays up until the host creates shared/done (or 240 s).
set -u
fail() { echo "guest.sh: $*" >&2; exit 1; }
for i in $(seq 1 100); do [ -b /dev/nvme0n1 ] && [ -b /dev/nvme1n1 ] && break; sleep 0.1; done
[ -b /dev/nvme1n1 ] || fail "no NVMe namespaces (ls /sys/block: $(ls /sys/block | tr '\n' ' '))"
mkdir -p /mnt/shared /tmp/state /tmp/prop /tmp/parts
mount -t 9p -o trans=virtio,version=9p2000.L shared /mnt/shared || fail "cannot mount the shared directory"
mkfs.xfs -q -f -L nvgq0 /dev/nvme0n1 || fail "mkfs nvme0n1"
mkfs.xfs -q -f -L nvgq1 /dev/nvme1n1 || fail "mkfs nvme1n1"

S=/tmp/s.sock
NVMEVOL_SOCKET=$S NVMEVOL_STATE_DIR=/tmp/state NVMEVOL_PROPAGATED_MOUNT=/tmp/prop NVMEVOL_PARTITION_ROOT=/tmp/parts \
	NVMEVOL_LABEL_PREFIX=nvgq NVMEVOL_SELFTEST=off NVMEVOL_METRICS_DIR=/mnt/shared/metrics \
	NVMEVOL_METRICS_INTERVAL_SECONDS=1 /work/nvmevol >/tmp/daemon.log 2>&1 &
D=$!
for i in $(seq 1 300); do /work/plugin-call $S List >/dev/null 2>&1 && break; sleep 0.1; done
call() { /work/plugin-call $S "$@" || fail "$1 $2: $(/work/plugin-call $S "$@" 2>&1) (daemon log: $(tail -5 /tmp/daemon.log))"; }
call Create '{"Name":"limited","Opts":{"partition":"nvgq0","size":"64M","inodes":"1000"}}' >/dev/null
# The health policy cordons the critical controller's partition at start; a volume there is what
# the health panels and alerts are checked against, so the admin lets it take one.
/work/nvmevol partition uncordon nvgq1 --socket /tmp/nvmevol-admin.sock >/dev/null ||
	fail "uncordon nvgq1: $(/work/nvmevol partition uncordon nvgq1 --socket /tmp/nvmevol-admin.sock 2>&1)"
call Create '{"Name":"on-critical","Opts":{"partition":"nvgq1"}}' >/dev/null
MP=$(call Mount '{"Name":"limited","ID":"g1"}' | sed -n 's/.*"Mountpoint": *"\([^"]*\)".*/\1/p')
[ -d "$MP" ] || fail "no mount point for limited"
dd if=/dev/zero of="$MP/data" bs=1M count=60 2>/dev/null || fail "cannot write into limited"
for i in 1 2 3 4 5 6 7 8 9 10; do : >"$MP/f$i"; done
sync
call Mount '{"Name":"on-critical","ID":"g2"}' >/dev/null
echo "guest.sh: ready"
for i in $(seq 1 2400); do [ -e /mnt/shared/done ] && break; sleep 0.1; done
[ -e /mnt/shared/done ] || echo "guest.sh: the host never said done" >&2
kill $D
wait $D
echo "guest.sh: daemon exited with $?"
