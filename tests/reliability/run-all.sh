#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs the reliability tests (crash recovery, error injection, faults, hostile
# input, path safety, concurrency, and the ASan/LSan reruns) in CI mode and
# prints a table of their figures, ending with "N passed, N failed".
#
#   tests/reliability/run-all.sh            CI mode (about 8 minutes on 2 cores)
#   tests/reliability/run-all.sh --soak     nightly sizes (10,000 kills, ...)
#   FUZZ_SECONDS=45 tests/reliability/run-all.sh   also tests/fuzz/run.sh first
#
# Needs root, loop devices, xfsprogs, python3. Builds build/ and build-asan/
# (ninja is incremental) unless NVMEVOL_BINARY / NVMEVOL_ASAN_BINARY are set.
# Each test creates and destroys its own loop devices, daemon and directories;
# logs go to ${RELIABILITY_LOG_DIR:-build/reliability-logs}.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MODE=ci
[ "${1:-}" = "--soak" ] && MODE=soak
LOGDIR=${RELIABILITY_LOG_DIR:-$REPO/build/reliability-logs}

if [ "$(id -u)" != 0 ]; then
	echo "run-all.sh: needs root (loop devices, mounts)"
	exit 2
fi

build() {
	local dir=$1
	shift
	if [ ! -f "$REPO/$dir/build.ninja" ]; then
		meson setup "$@" "$REPO/$dir" "$REPO" >"$LOGDIR/setup-$dir.log" 2>&1 || return 1
	fi
	# A reused build without the hooks would ignore NVMEVOL_TEST_FREEZE_NO_GUARDIAN and the others.
	"$REPO/tests/ensure-test-hooks.sh" "$REPO/$dir" || return 1
	ninja -C "$REPO/$dir" src/nvmevol >"$LOGDIR/build-$dir.log" 2>&1
}

mkdir -p "$LOGDIR"
if [ -z "${NVMEVOL_BINARY:-}" ]; then
	build build -Dtest_hooks=true || { echo "build failed: $LOGDIR/build-build.log"; exit 1; }
	export NVMEVOL_BINARY=$REPO/build/src/nvmevol
fi
if [ -z "${NVMEVOL_ASAN_BINARY:-}" ]; then
	build build-asan --native-file "$REPO/.ci/build-asan.ini" -Dtest_hooks=true ||
		{ echo "ASan build failed: $LOGDIR/build-build-asan.log"; exit 1; }
	NVMEVOL_ASAN_BINARY=$REPO/build-asan/src/nvmevol
fi

if [ "$MODE" = soak ]; then
	TESTS=(
		"crash|$HERE/crash.py 10000"
		"crashpoints|$HERE/crashpoints.py"
		"errinject|$HERE/errinject.py"
		"errinject-sabotage|$HERE/errinject.py --sabotage --max-points 10"
		"errinject-asan|$HERE/errinject.py --binary $NVMEVOL_ASAN_BINARY"
		"faults|$HERE/faults.py"
		"hostile|$HERE/hostile.py 100000"
		"hostile-asan|$HERE/hostile.py 20000 --binary $NVMEVOL_ASAN_BINARY"
		"pathsafety|$HERE/pathsafety.py 600"
		"concurrency|$HERE/concurrency.py 600"
		"concurrency-lsan|$HERE/concurrency.py 120 --binary $NVMEVOL_ASAN_BINARY"
	)
else
	TESTS=(
		"crash|$HERE/crash.py 500 --max-seconds 150"
		"crashpoints|$HERE/crashpoints.py"
		"errinject|$HERE/errinject.py --ci"
		"errinject-sabotage|$HERE/errinject.py --sabotage --max-points 4"
		"faults|$HERE/faults.py"
		"hostile|$HERE/hostile.py 12000"
		"hostile-asan|$HERE/hostile.py 4000 --binary $NVMEVOL_ASAN_BINARY"
		"pathsafety|$HERE/pathsafety.py 30"
		"concurrency|$HERE/concurrency.py 30"
		"concurrency-lsan|$HERE/concurrency.py 10 --binary $NVMEVOL_ASAN_BINARY"
	)
fi

declare -a NAMES RESULTS FIGURES TIMES
if [ -n "${FUZZ_SECONDS:-}" ]; then
	TESTS=("fuzz|$REPO/tests/fuzz/run.sh $FUZZ_SECONDS" "${TESTS[@]}")
fi

for t in "${TESTS[@]}"; do
	name=${t%%|*}
	cmd=${t#*|}
	echo "== $name: $cmd"
	start=$(date +%s)
	# shellcheck disable=SC2086
	if [[ $cmd == *.py* ]]; then
		python3 $cmd >"$LOGDIR/$name.log" 2>"$LOGDIR/$name.stderr"
	else
		$cmd >"$LOGDIR/$name.log" 2>"$LOGDIR/$name.stderr"
	fi
	rc=$?
	secs=$(($(date +%s) - start))
	# The figure line: the one that starts with "<word>: key=value" or "kills=".
	fig=$(grep -m1 -E '^(kills=|[a-z]+: [a-z_]+=)' "$LOGDIR/$name.log" | sed 's/^[a-z]*: //')
	[ "$name" = fuzz ] && fig=$(tail -1 "$LOGDIR/$name.log" | sed 's/^fuzz: //')
	cat "$LOGDIR/$name.log"
	NAMES+=("$name")
	RESULTS+=("$([ $rc -eq 0 ] && echo PASS || echo FAIL)")
	FIGURES+=("${fig:-(no figures; see $LOGDIR/$name.stderr)}")
	TIMES+=("$secs")
done

echo
echo "Reliability summary ($MODE mode)"
printf '%-18s %-6s %6s  %s\n' TEST RESULT SECS FIGURES
passed=0
failed=0
for i in "${!NAMES[@]}"; do
	printf '%-18s %-6s %6s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}" "${FIGURES[$i]}"
	if [ "${RESULTS[$i]}" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
