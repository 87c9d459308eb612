#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The NVMe part of the "qemu" stage: boots the qemu guest with two emulated
# NVMe controllers (one healthy, one with a SMART critical warning set), a
# virtio disk and a USB stick on an xHCI controller (its second half under a
# device-mapper target, as LVM would put it), and runs
# tests/qemu/nvme-guest.sh there. Everything qemu is told is passed to the
# guest as NVQ_* variables, so the suite checks each reported fact against it.
# The same boot runs test-selftest-guest (the self-test against a disk that
# stores wrong bytes, dm-flakey, and one that fails reads, qemu's blkdebug) on
# three more virtio disks, found by their serials NVSPOOL, NVSEIO, NVSCLEAN.
# Ends with one line "N passed, N failed"; nothing may skip in the guest.
#
# usage: tests/qemu/run-nvme-tests.sh [BUILD_DIR]   (default: build, or $NVMEVOL_BUILD_DIR)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-${NVMEVOL_BUILD_DIR:-build}}
SUITE=run-nvme-tests.sh
. tests/qemu/lib.sh
BINS=("$BUILD/tests/test-nvme-guest" "$BUILD/src/nvmevol" "$BUILD/tests/test-selftest-guest")

qemu_require_built "${BINS[@]}"
command -v sfdisk >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fdisk >/dev/null 2>&1
SFDISK=$(command -v sfdisk) || { echo "run-nvme-tests.sh: sfdisk (package fdisk) missing" >&2; echo "0 passed, 1 failed"; exit 1; }
command -v dmsetup >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dmsetup >/dev/null 2>&1
DMSETUP=$(command -v dmsetup) || { echo "run-nvme-tests.sh: dmsetup (package dmsetup) missing" >&2; echo "0 passed, 1 failed"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nvmevol-nvme-qemu.XXXXXX")
log=$work/guest.log
trap 'rm -rf "$work"' EXIT
for d in nvme0:700 nvme1:400 virt:400 usb:800 nvs-pool:400 nvs-eio:448 nvs-clean:448; do
	truncate -s "${d#*:}M" "$work/${d%%:*}.img"
done

# What qemu is told (and the guest checks).
SERIAL0=NVQTEST0001
SERIAL1=NVQTEST0002
CRIT=4          # SMART critical warning bit 2: NVM subsystem reliability degraded
VIRT_SERIAL=NVQVIRT01
USB_SERIAL=NVQUSB01
QEMU_FW=$(qemu-system-x86_64 --version | sed -n 's/^QEMU emulator version \([0-9.]*\).*/\1/p')

q=()
qarg() { for a in "$@"; do q+=(--qemu-arg "$a"); done; }
qarg -drive "if=none,id=n0,format=raw,file=$work/nvme0.img"
qarg -device "nvme,serial=$SERIAL0,drive=n0,logical_block_size=512,physical_block_size=4096,write-cache=on"
qarg -drive "if=none,id=n1,format=raw,file=$work/nvme1.img"
qarg -device "nvme,serial=$SERIAL1,drive=n1,smart_critical_warning=$CRIT,write-cache=off"
qarg -drive "if=none,id=v0,format=raw,file=$work/virt.img"
qarg -device "virtio-blk-pci,drive=v0,serial=$VIRT_SERIAL,physical_block_size=4096,min_io_size=8192,opt_io_size=65536,write-cache=off"
qarg -drive "if=none,id=u0,format=raw,file=$work/usb.img"
qarg -device qemu-xhci
qarg -device "usb-storage,drive=u0,serial=$USB_SERIAL,removable=on"
# test-selftest-guest: the pool disk, a disk whose reads touching any 1 MiB boundary past its first
# 32 MiB fail with EIO (blkdebug; the kernel's and blkid's probes stay quiet; the test remaps the
# pool's free space to 32 MiB on), a plain disk.
for s in $(seq 65536 2048 $((440 * 2048))); do
	printf '[inject-error]\nevent = "read_aio"\niotype = "read"\nerrno = "5"\nsector = "%d"\nonce = "off"\n\n' "$s"
done >"$work/blkdebug.conf"
qarg -drive "if=none,id=s0,format=raw,file=$work/nvs-pool.img"
qarg -device "virtio-blk-pci,drive=s0,serial=NVSPOOL"
qarg -drive "if=none,id=s1,format=raw,file=blkdebug:$work/blkdebug.conf:$work/nvs-eio.img"
qarg -device "virtio-blk-pci,drive=s1,serial=NVSEIO"
qarg -drive "if=none,id=s2,format=raw,file=$work/nvs-clean.img"
qarg -device "virtio-blk-pci,drive=s2,serial=NVSCLEAN"

qemu_boot "$log" --timeout 240 \
	--module nvme --module virtio_pci --module virtio_blk --module xhci_pci --module usb_storage --module sd_mod \
	--module dm_mod --module dm_flakey \
	--file "${BINS[0]}" --file "${BINS[1]}" --file "${BINS[2]}" --file "$SFDISK:/usr/sbin/sfdisk" --file "$DMSETUP:/usr/sbin/dmsetup" \
	--file "$(command -v xfs_spaceman):/usr/sbin/xfs_spaceman" --file "$(command -v xfs_repair):/usr/sbin/xfs_repair" \
	--env NVQ_SERIAL0=$SERIAL0 --env NVQ_SERIAL1=$SERIAL1 --env NVQ_CRIT=$CRIT --env NVQ_FW="$QEMU_FW" \
	--env NVQ_VIRT_SERIAL=$VIRT_SERIAL --env NVQ_USB_SERIAL=$USB_SERIAL \
	"${q[@]}" --script tests/qemu/nvme-guest.sh
qemu_result "$log" $?
