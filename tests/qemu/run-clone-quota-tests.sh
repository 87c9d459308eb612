#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Part of the "qemu" stage of tests/run-all.sh: clones under XFS project
# quota (tests/test-daemon-clone-quota.c: a clone charged to its own
# project, inheriting and held to its limits, refused when it cannot fit)
# and the clone engine's tests (tests/test-clone.c) on the guest's older
# Debian kernel, inside the qemu guest (tests/qemu/run.sh). Ends with one line
# "N passed, N failed"; a skipped test in the guest counts as a failure.
#
# usage: tests/qemu/run-clone-quota-tests.sh [BUILD_DIR]   (default: build, or $NVMEVOL_BUILD_DIR)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-${NVMEVOL_BUILD_DIR:-build}}
SUITE=run-clone-quota-tests.sh
. tests/qemu/lib.sh
BINS=("$BUILD/tests/test-daemon-clone-quota" "$BUILD/tests/test-clone" "$BUILD/src/nvmevol")

qemu_require_built "${BINS[@]}"

# The engine's tests need setfacl/getfacl; the writer and deep-tree ones are
# left to the host (slow under TCG, and nothing kernel-specific). The frozen
# pass's change detection runs here too: Debian's 6.1 has no multigrain
# timestamps, so a change in the tick of the live pass's read keeps its
# change time, and only the racy rule catches it; of the changes it must see,
# those where the kernel's behaviour matters (a page fault setting the change
# time, an inode freed and reused, RENAME_EXCHANGE leaving change times alone).
script=$(mktemp "${TMPDIR:-/tmp}/nvmevol-clone-script.XXXXXX")
cat > "$script" <<'SH'
rc=0
NVMEVOL_BINARY=/work/nvmevol /work/test-daemon-clone-quota --color=never --verbose -j1 || rc=1
uname -r
CLONE_TEST_CASES='write through mmap,inode number reused,files exchanged' NVMEVOL_TEST_TMPDIR=/tmp /work/test-clone \
	--color=never --verbose -j1 \
	--filter '@(clone/every_file_type*|clone/both_sides*|clone/changes_before*|clone/a_mount_inside*|clone_noreflink/*|clone/each_change_after*)' || rc=1
# A kernel without multigrain timestamps: a write in the tick of the live read keeps the change time, for real.
CLONE_TEST_REAL_TICK=1 NVMEVOL_TEST_TMPDIR=/tmp /work/test-clone --color=never --verbose -j1 \
	--filter 'clone/a_write_in_the_tick*' || rc=1
exit $rc
SH

log=$(mktemp "${TMPDIR:-/tmp}/nvmevol-clone-guest.XXXXXX")
trap 'rm -f "$log" "$script"' EXIT
qemu_boot "$log" --timeout 600 --mem 1536 \
	--file "${BINS[0]}" --file "${BINS[1]}" --file "${BINS[2]}" \
	--file "$(command -v setfacl):/usr/bin/setfacl" --file "$(command -v getfacl):/usr/bin/getfacl" \
	--script "$script"
qemu_result "$log" $? "it has no project quota support"
