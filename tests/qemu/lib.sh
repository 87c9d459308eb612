# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# What the qemu suites (run-quota-tests.sh, run-nvme-tests.sh,
# run-clone-quota-tests.sh) share: the build check, the boot with its console
# log, and the count. Sourced by bash after "cd" to the top of the tree, with
# BUILD and SUITE (the script's name, for messages) set.

QEMU_T0=$(date +%s)

# Builds what is missing; without one of the files, says "0 passed, 1 failed" and exits.
qemu_require_built() {
	local b
	for b in "$@"; do
		[ -x "$b" ] || ninja -C "$BUILD" >/dev/null 2>&1 || true
		if [ ! -x "$b" ]; then
			echo "$SUITE: $b not built" >&2
			echo "0 passed, 1 failed"
			exit 1
		fi
	done
}

# qemu_boot LOG RUN.SH-ARGS...: boots the guest, the console to stdout and LOG; the guest's exit status.
qemu_boot() {
	local log=$1
	shift
	tests/qemu/run.sh "$@" 2>&1 | tee "$log"
	return "${PIPESTATUS[0]}"
}

# qemu_result LOG RC [SKIP_WHY]: prints "N passed, N failed" from Criterion's lines in LOG; 0 when all passed
# (and at least one ran).
# Nothing may skip in the guest: a skipped test counts as a failure (SKIP_WHY says what it likely means),
# except those left out by --filter ("[SKIP] ...: Test is disabled").
# A failure that no test line shows (a non-zero RC with only passes, or no test at all) gets a "[FAIL]"
# line of its own, to standard output and LOG: every failure counted is one the log names.
qemu_result() {
	local log=$1 rc=$2 why=${3:-} pass fail
	pass=$(grep -ac '^\[PASS\]' "$log")
	fail=$(grep -aE '^\[(FAIL|SKIP)\]' "$log" | grep -vc 'Test is disabled$') # a crash prints [FAIL] too
	if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
		# the guest failed without a test result (boot failure, devices, timeout, panic), or the wrapper did
		echo "[FAIL] $SUITE: exit status $rc after $pass passed test(s) and no failed one (run.sh's message above says why)" |
			tee -a "$log"
		fail=1
	fi
	if [ "$pass" -eq 0 ] && [ "$fail" -eq 0 ]; then
		echo "[FAIL] $SUITE: no test ran in the guest" | tee -a "$log"
		fail=1
	fi
	if grep -a '^\[SKIP\]' "$log" | grep -vq 'Test is disabled$'; then
		echo "$SUITE: tests were skipped inside the guest${why:+: $why}" >&2
	fi
	echo "$SUITE: $(($(date +%s) - QEMU_T0))s" >&2
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ] && [ "$rc" -eq 0 ]
}
