#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs the reliability tests (crash recovery, error injection, faults, hostile
# input, path safety, concurrency, and the ASan/LSan reruns) in CI mode and
# prints a table of their figures, ending with "N passed, N failed".
#
#   tests/reliability/run-all.sh            CI mode (about 5-6 minutes on 2 shared cores)
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

# name|what makes it pass|command. "ok": exit status 0. "fails:REGEX": a sabotage run, which must exit
# non-zero with a log line that matches REGEX (the checker reported the break it was shown, and
# nothing else made it fail, such as a harness error).
if [ "$MODE" = soak ]; then
	TESTS=(
		"crash|ok|$HERE/crash.py 10000"
		"crashpoints|ok|$HERE/crashpoints.py"
		"crashpoints-move|ok|$HERE/crashpoints.py --ops recvfull,recvincr,move"
		"crashpoints-evacuate|ok|$HERE/crashpoints.py --ops fence,evacuate,evacuatelive,evacuatefinal,evacuatesnap"
		"crashpoints-import|ok|$HERE/crashpoints.py --ops import,export"
		"errinject|ok|$HERE/errinject.py"
		"errinject-sabotage|ok|$HERE/errinject.py --sabotage --max-points 10"
		"errinject-asan|ok|$HERE/errinject.py --binary $NVMEVOL_ASAN_BINARY"
		"faults|ok|$HERE/faults.py"
		"hostile|ok|$HERE/hostile.py 100000"
		"hostile-asan|ok|$HERE/hostile.py 20000 --binary $NVMEVOL_ASAN_BINARY"
		"pathsafety|ok|$HERE/pathsafety.py 600"
		"concurrency|ok|$HERE/concurrency.py 600"
		"concurrency-lsan|ok|$HERE/concurrency.py 120 --binary $NVMEVOL_ASAN_BINARY"
	)
else
	# crash: at least CRASH_MIN_KILLS of the 500 kills within 150 s (it reaches all 500 in about
	# 90-110 s on 2 shared cores: a machine or daemon at less than 60 % of that speed fails).
	TESTS=(
		"crash|ok|$HERE/crash.py 500 --max-seconds 150 --min-kills ${CRASH_MIN_KILLS:-300}"
		# 60 points per operation, drawn one syscall after another (a new seed each run, printed): every
		# point took 218 s of a 56-minute CI run; the soak runs them all.
		"crashpoints|ok|$HERE/crashpoints.py --sample 60"
		# A sample of the receive and move points: the renames, syncs and ioctls (the commits and the
		# snapshots), the first and last of each; the soak runs every point.
		"crashpoints-move|ok|$HERE/crashpoints.py --ops recvfull,recvincr,move --syscalls renameat,renameat2,fsync,ioctl --spread 2"
		"crashpoints-evacuate|ok|$HERE/crashpoints.py --ops fence,evacuate,evacuatelive,evacuatefinal,evacuatesnap --sample 6"
		# Import and export killed at 20 points each, drawn one syscall after another.
		"crashpoints-import|ok|$HERE/crashpoints.py --ops import,export --sample 20"
		# The Docker API's operations and the admin ones (snapshot, its removal, rollback, export, import, receive,
		# fence, evacuate) with every errno, start-up with EIO: 20 points of each drawn one syscall after another (a
		# new seed each run, printed); the soak runs every point.
		"errinject|ok|$HERE/errinject.py --ci --sample 20"
		"errinject-sabotage|ok|$HERE/errinject.py --sabotage --max-points 4"
		"faults|ok|$HERE/faults.py"
		"hostile|ok|$HERE/hostile.py 12000"
		"hostile-asan|ok|$HERE/hostile.py 4000 --binary $NVMEVOL_ASAN_BINARY"
		"pathsafety|ok|$HERE/pathsafety.py 30"
		"concurrency|ok|$HERE/concurrency.py 30"
		"concurrency-lsan|ok|$HERE/concurrency.py 10 --binary $NVMEVOL_ASAN_BINARY"
	)
fi
# The other checkers' sabotage runs, in both modes (about 45 s together on 2 shared cores).
TESTS+=(
	"crash-sabotage|fails:violations by kind: .*'bad_mount'|$HERE/crash.py 40 --sabotage wrong-partition"
	"crashpoints-sabotage|fails:crashes=[1-9]|$HERE/crashpoints.py --sabotage segv --ops mount --max-points 3"
	"crashpoints-hang|fails:hangs=[1-9]|$HERE/crashpoints.py --sabotage hang --ops mount --max-points 1 --request-timeout 5"
	"crashpoints-data|fails:the data written before the point changed|$HERE/crashpoints.py --sabotage data --ops unmount --max-points 2"
	"faults-sabotage|fails:FAILED missing: the volume mounts again once its partition is back, found by a rescan|$HERE/faults.py missing --sabotage"
	"hostile-sabotage|fails:FAILED fd count|$HERE/hostile.py 400 --sabotage"
	"pathsafety-sabotage|fails:FAILED Create succeeded 0 times|$HERE/pathsafety.py 5 --sabotage"
	"concurrency-sabotage|fails:transport_errors=[1-9]|$HERE/concurrency.py 8 --clients 8 --request-timeout 3 --sabotage"
)

declare -a NAMES RESULTS FIGURES TIMES
if [ -n "${FUZZ_SECONDS:-}" ]; then
	TESTS=("fuzz|ok|$REPO/tests/fuzz/run.sh $FUZZ_SECONDS" "${TESTS[@]}")
fi

T0=$(date +%s)
for t in "${TESTS[@]}"; do
	name=${t%%|*}
	rest=${t#*|}
	want=${rest%%|*}
	cmd=${rest#*|}
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
	# The figure line: the first "<suite>: key=value ..." line (every suite prints one).
	fig=$(grep -m1 -E '^[a-z]+: [a-z_]+=' "$LOGDIR/$name.log" | sed 's/^[a-z]*: //')
	[ "$name" = fuzz ] && fig=$(tail -1 "$LOGDIR/$name.log" | sed 's/^fuzz: //')
	cat "$LOGDIR/$name.log"
	if [ "$want" = ok ]; then
		result=$([ $rc -eq 0 ] && echo PASS || echo FAIL)
	elif [ $rc -ne 0 ] && grep -qE -- "${want#fails:}" "$LOGDIR/$name.log"; then
		result=PASS   # the sabotage was reported
	else
		result=FAIL
		echo "$name: a sabotage run must fail with a line matching '${want#fails:}' (exit $rc)"
	fi
	NAMES+=("$name")
	RESULTS+=("$result")
	FIGURES+=("${fig:-(no figures; see $LOGDIR/$name.stderr)}")
	TIMES+=("$secs")
done
TOTAL=$(($(date +%s) - T0))

summary() {
	printf '%-22s %-6s %6s  %s\n' TEST RESULT SECS FIGURES
	for i in "${!NAMES[@]}"; do
		printf '%-22s %-6s %6s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}" "${FIGURES[$i]}"
	done
}

echo
echo "Reliability summary ($MODE mode, $TOTAL s)"
summary
passed=0
failed=0
for r in "${RESULTS[@]}"; do
	if [ "$r" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done

# The figures RESULTS.md quotes are those of the last run: its block for this mode is rewritten
# (RELIABILITY_RESULTS= empty to leave the file alone, or another file).
RESULTS_FILE=${RELIABILITY_RESULTS-$HERE/RESULTS.md}
if [ -n "$RESULTS_FILE" ] && [ -f "$RESULTS_FILE" ]; then
	begin="<!-- BEGIN last-run $MODE (generated by tests/reliability/run-all.sh; do not edit) -->"
	end="<!-- END last-run $MODE -->"
	rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || rev="$rev + uncommitted changes in src/"
	block=$(
		echo "$begin"
		echo "$MODE mode, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $rev, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), $TOTAL s:"
		echo
		echo '```'
		summary
		echo "$passed passed, $failed failed"
		echo '```'
		echo "$end"
	)
	if grep -qF -- "$begin" "$RESULTS_FILE"; then
		BLOCK=$block BEGIN=$begin END=$end python3 - "$RESULTS_FILE" <<'PY' || echo "run-all.sh: could not update $RESULTS_FILE"
import os, sys
path = sys.argv[1]
text = open(path).read()
head, _, rest = text.partition(os.environ["BEGIN"])
_, sep, tail = rest.partition(os.environ["END"])
if not sep:
    sys.exit("no end marker")
open(path + ".new", "w").write(head + os.environ["BLOCK"] + tail)
os.replace(path + ".new", path)
PY
	else
		echo "run-all.sh: no '$begin' in $RESULTS_FILE: figures not recorded"
	fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
