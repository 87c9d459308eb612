#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The count of the qemu suites says what ran, and every failure it counts is a
# line of the log:
# (1) tests/qemu/run-powerloss-tests.sh edited in place while it runs (as a
#     --full run of 40 minutes meets an editor): bash reads a script as it
#     goes, so the rest of an unprotected one runs from a shifted offset and
#     fails with no test line (the "802 passed, 1 failed" of issue 21). Here a
#     stand-in for tests/qemu/run.sh rewrites the wrapper with 1 KiB more at its
#     top, then prints two passes and a guest status of 0: the wrapper must end
#     with "2 passed, 0 failed" and exit 0.
# (2) qemu_result with only passes and a non-zero status must print a [FAIL]
#     line that names the status (to its output and the log) and count it.
#
# usage: check-qemu-count.sh SOURCE_ROOT
set -u
src=${1:?usage: check-qemu-count.sh SOURCE_ROOT}
for t in mkfs.xfs dmsetup xfs_repair blockdev /usr/bin/python3.11; do
	command -v "$t" >/dev/null || { echo "SKIP: needs $t (tests/run-all.sh deps installs it)"; exit 77; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemu-count.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# (1) The wrapper, edited while it runs.
mkdir -p "$tmp/tree/tests/qemu" "$tmp/tree/build/src" "$tmp/tmp"
cp "$src/tests/qemu/run-powerloss-tests.sh" "$src/tests/qemu/lib.sh" "$tmp/tree/tests/qemu/"
printf '#!/bin/sh\nexit 0\n' >"$tmp/tree/build/src/nvmevol"
chmod 755 "$tmp/tree/build/src/nvmevol"
cat >"$tmp/tree/tests/qemu/run.sh" <<'EOF'
#!/bin/bash
# Stands for the guest: the wrapper is edited in place (same inode, 1 KiB more at its top) while
# it waits here, then two tests pass and the guest reports status 0.
w=$(dirname "$0")/run-powerloss-tests.sh
{ head -n 1 "$w"; for i in $(seq 16); do printf '# an edit made while the wrapper ran: %025d\n' "$i"; done
  tail -n +2 "$w"; } >"$w.new"
cat "$w.new" >"$w"
echo "[PASS] stand-in: one"
echo "[PASS] stand-in: two"
echo "NVMEVOL-GUEST-EXIT=0"
EOF
chmod 755 "$tmp/tree/tests/qemu/run.sh"
out=$(cd "$tmp/tree" && POWERLOSS_RECORDINGS=s NVMEVOL_TEST_TMPDIR=$tmp/tmp bash tests/qemu/run-powerloss-tests.sh build 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
if [ "$(echo "$out" | tail -n 1)" != "2 passed, 0 failed" ] || [ $rc -ne 0 ]; then
	echo "FAIL: the wrapper edited while it ran did not end with '2 passed, 0 failed' and status 0 (status $rc)"
	fail=1
fi

# (2) A failure without a test line gets one.
printf '[PASS] a\n[PASS] b\n' >"$tmp/guest.log"
out=$(cd "$src" && SUITE=stand-in && . tests/qemu/lib.sh && qemu_result "$tmp/guest.log" 125 2>/dev/null)
echo "$out" | sed 's/^/  | /'
if ! grep -q '^\[FAIL\] stand-in: exit status 125' <<<"$out" || [ "$(echo "$out" | tail -n 1)" != "2 passed, 1 failed" ]; then
	echo "FAIL: a status of 125 with only passes is not a [FAIL] line naming it, counted once"
	fail=1
fi
if [ "$(grep -c '^\[FAIL\]' "$tmp/guest.log")" != 1 ]; then
	echo "FAIL: the log does not hold the [FAIL] line of the failure counted"
	fail=1
fi
[ $fail -eq 0 ] && echo "PASS: qemu-count"
exit $fail
