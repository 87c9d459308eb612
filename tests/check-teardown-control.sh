#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The teardown checks can fail: runs tests/teardown-control.c (a loop device
# held open past its test) and requires (1) the test program to fail with the
# teardown's message, (2) check-leftovers.sh to report the device while it is
# still held, (3) the device to be gone once the holder lets go.
#
# usage: check-teardown-control.sh TEARDOWN-CONTROL-BINARY CHECK-LEFTOVERS
set -u
bin=${1:?usage: check-teardown-control.sh BINARY CHECK-LEFTOVERS}
check=${2:?usage: check-teardown-control.sh BINARY CHECK-LEFTOVERS}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (loop devices)"; exit 77; }
command -v mkfs.xfs >/dev/null || { echo "SKIP: needs mkfs.xfs (package xfsprogs)"; exit 77; }

root=$(mktemp -d "${TMPDIR:-/tmp}/teardown-control.XXXXXX") || exit 1
trap 'rmdir "$root" 2>/dev/null' EXIT
fail=0
out=$(NVMEVOL_TEST_TMPDIR=$root "$bin" 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
if [ $rc -eq 0 ]; then
	echo "FAIL: the test program passed although its loop device could not be released"
	fail=1
fi
if ! grep -q 'teardown FAILED: loop XFS .*still bound to' <<<"$out"; then
	echo "FAIL: no 'teardown FAILED ... still bound to' message"
	fail=1
fi
if leftovers=$("$check" "$root"); then
	echo "FAIL: check-leftovers.sh does not see the device still held:"
	fail=1
fi
echo "$leftovers" | sed 's/^/  | /'
for _ in $(seq 60); do
	"$check" "$root" >/dev/null && break
	sleep 0.5
done
if ! "$check" "$root"; then
	echo "FAIL: the device is still attached after its holder exited"
	fail=1
fi
[ $fail -eq 0 ] && echo "teardown control: the teardown and the leftover check both failed as they must"
exit $fail
