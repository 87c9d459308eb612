#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs inside the qemu guest of tests/qemu/run-nvme-tests.sh: waits for the
# disks qemu was given, partitions the first NVMe namespace (GPT: one partition
# at 1 MiB, one at an odd sector), makes the XFS filesystems (one on the
# second half of the USB stick, through a device-mapper target as LVM would
# map it: the suite sets that target up only while it needs it, since it
# holds the stick), then runs the
# Criterion suite test-nvme-guest, which checks everything against what qemu
# was told (the NVQ_* variables), then test-selftest-guest. busybox sh.
set -u
fail() { echo "nvme-guest.sh: $*" >&2; exit 1; }

# Disks show up as their drivers probe (USB takes a second or two).
for i in $(seq 1 100); do
	[ -b /dev/nvme0n1 ] && [ -b /dev/nvme1n1 ] && [ -b /dev/vda ] && [ -b /dev/sda ] && break
	sleep 0.1
done
for d in nvme0n1 nvme1n1 vda sda; do
	[ -b /dev/$d ] || fail "/dev/$d did not appear (ls /sys/block: $(ls /sys/block | tr '\n' ' '))"
done

# GPT on the healthy namespace: p1 at 1 MiB (aligned), p2 at an odd 512-byte sector (misaligned).
printf 'label: gpt\nstart=2048, size=655360, name=aligned\nstart=657409, size=655360, name=misaligned\n' |
	/usr/sbin/sfdisk -q /dev/nvme0n1 || fail "sfdisk failed"
for i in $(seq 1 50); do [ -b /dev/nvme0n1p2 ] && break; sleep 0.1; done
[ -b /dev/nvme0n1p2 ] || fail "no /dev/nvme0n1p2 after sfdisk"

mkfs.xfs -q -f -L nvq-a -m crc=1,reflink=1,bigtime=1 /dev/nvme0n1p1 || fail "mkfs nvme0n1p1"
mkfs.xfs -q -f -L nvq-b -m crc=1,reflink=0,bigtime=0 /dev/nvme0n1p2 || fail "mkfs nvme0n1p2"
mkfs.xfs -q -f -L nvq-crit /dev/nvme1n1 || fail "mkfs nvme1n1"
mkfs.xfs -q -f -L nvq-virt /dev/vda || fail "mkfs vda"
# The stick's first 400 MiB hold its own XFS; a dm-linear target maps the rest (LVM's "vg-lv" shape).
mkfs.xfs -q -f -L nvq-usb -d size=400m /dev/sda || fail "mkfs sda"
export NVQ_DM_TABLE="0 $(($(cat /sys/block/sda/size) - 819200)) linear /dev/sda 819200"
DM_DISABLE_UDEV=1 /usr/sbin/dmsetup create nvd-usb --table "$NVQ_DM_TABLE" || fail "dmsetup create over sda"
[ -b /dev/dm-0 ] || fail "no /dev/dm-0 after dmsetup create"
mkfs.xfs -q -f -L nvd-usb /dev/dm-0 || fail "mkfs dm-0"
DM_DISABLE_UDEV=1 /usr/sbin/dmsetup remove nvd-usb || fail "dmsetup remove nvd-usb"

NVMEVOL_BINARY=/work/nvmevol /work/test-nvme-guest --color=never --verbose -j1
rc=$?
# What an operator sees (quoted in nvmevol(8), EXAMPLES).
NVMEVOL_LABEL_PREFIX=nvq /work/nvmevol devices --require-nvme enforce
# The self-test against disks that store wrong bytes or fail reads (makes its own device-mapper target).
NVMEVOL_BINARY=/work/nvmevol /work/test-selftest-guest --color=never --verbose -j1 || rc=1
exit $rc
