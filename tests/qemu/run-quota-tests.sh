#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "qemu" stage of tests/run-all.sh: runs the quota tests, which need
# CONFIG_XFS_QUOTA, inside the qemu guest (tests/qemu/run.sh) and ends with
# one line "N passed, N failed". In the guest nothing may skip: a skipped test
# there means the guest lacks quota support, and counts as a failure.
#
# usage: tests/qemu/run-quota-tests.sh [BUILD_DIR]   (default: build, or $NVMEVOL_BUILD_DIR)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-${NVMEVOL_BUILD_DIR:-build}}
SUITE=run-quota-tests.sh
. tests/qemu/lib.sh
BINS=("$BUILD/tests/test-quota" "$BUILD/tests/test-daemon-quota" "$BUILD/tests/test-admin-quota"
	"$BUILD/tests/test-quota-faults" "$BUILD/tests/test-daemon-send" "$BUILD/tests/test-daemon-evacuate"
	"$BUILD/src/nvmevol")
# The project-ID escape check (guest-projid-escape.sh) and its tools.
BINS+=("$BUILD/tests/tools/plugin-call" "$BUILD/tests/tools/projid" "$BUILD/tests/tools/dockercaps")

qemu_require_built "${BINS[@]}"
# test-quota-faults injects its faults with strace (it comes with its shared libraries).
STRACE=$(command -v strace) || { echo "$SUITE: strace is not installed (apt-get install strace)" >&2; echo "0 passed, 1 failed"; exit 1; }

# One boot runs every level: quota.c against the kernel, the real daemon (size=, inodes=),
# `nvmevol volume resize` through the admin socket, limits under failure (strace's fault
# injection at each call of create, resize, remove and the repair at start; a sample, or all
# with NVMEVOL_QUOTA_FAULTS=full), then whether a process with Docker's capabilities escapes
# size= (guest-projid-escape.sh).
script=$(mktemp "${TMPDIR:-/tmp}/nvmevol-quota-script.XXXXXX")
cat > "$script" <<'SH'
rc=0
/work/test-quota --color=never --verbose -j1 || rc=1
NVMEVOL_BINARY=/work/nvmevol /work/test-daemon-quota --color=never --verbose -j1 || rc=1
NVMEVOL_BINARY=/work/nvmevol /work/test-admin-quota --color=never --verbose -j1 || rc=1
NVMEVOL_BINARY=/work/nvmevol /work/test-quota-faults --color=never --verbose -j1 || rc=1
NVMEVOL_BINARY=/work/nvmevol /work/test-daemon-send --filter 'daemon_send_quota/*' --color=never --verbose -j1 || rc=1
NVMEVOL_BINARY=/work/nvmevol /work/test-daemon-evacuate --filter 'daemon_evacuate_quota/*' --color=never --verbose -j1 || rc=1
sh /work/guest-projid-escape.sh || rc=1
exit $rc
SH

log=$(mktemp "${TMPDIR:-/tmp}/nvmevol-quota-guest.XXXXXX")
trap 'rm -f "$log" "$script"' EXIT
files=()
for b in "${BINS[@]}" tests/qemu/guest-projid-escape.sh; do files+=(--file "$b"); done
files+=(--file "$STRACE:/usr/bin/strace")
for e in NVMEVOL_QUOTA_FAULTS NVMEVOL_QUOTA_FAULTS_SABOTAGE NVMEVOL_QUOTA_FAULTS_OPS; do
	[ -z "${!e:-}" ] || files+=(--env "$e=${!e}")
done
qemu_boot "$log" --timeout "${NVMEVOL_QEMU_TIMEOUT:-600}" "${files[@]}" --script "$script"
qemu_result "$log" $? "it has no project quota support"
