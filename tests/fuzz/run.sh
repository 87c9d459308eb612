#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz and
# runs each for SECONDS_PER_TARGET (default 45; CI), e.g. `run.sh 3600` for a
# nightly soak. Two targets run at a time (one per core).
#
# New corpus entries go to build-fuzz/fuzz-corpus/<target>/ and crash,
# timeout, OOM and leak inputs to build-fuzz/fuzz-artifacts/<target>/: never
# into tests/fuzz/<target>/. To keep a crash as a regression, minimize it
# (`build-fuzz/tests/fuzz/<target> -minimize_crash=1 -runs=10000 FILE`) and
# copy the result into tests/fuzz/<target>/ deliberately.
#
# Prints per target: execs, crashes, new corpus entries, libFuzzer's exit
# status; ends with "fuzz: N targets, E execs, C crashes" and exits non-zero
# when a target failed: an artifact (crash, timeout, OOM, leak) written by
# this run, a non-zero exit without one (bad flag, bad dictionary, loader
# error), or no executions at all.
#
# FUZZ_TARGETS="fuzz-api fuzz-admin" runs only those; FUZZ_EXTRA_ARGS are
# passed to every libFuzzer run (e.g. -jobs, or a sabotage: -dict=/nonexistent).
#
# Limits: -rss_limit_mb=512 (and malloc_limit_mb, which defaults to it) with
# ASan's quarantine at 64 MB: at its default 256 MB the quarantine alone
# reached the rss limit in a soak while the live heap was 24 MB. Leak
# detection stays on. -timeout=10 (FUZZ_TIMEOUT): with 1 s, a 40-minute soak
# of two targets on a shared 2-core machine ended with both "timing out" at
# the same instant on inputs that run in 2 and 20 ms: a stall of the machine,
# not of the code. An input that really hangs still fails in 10 s.
set -euo pipefail

SECS=${1:-45}
PAR=${FUZZ_PARALLEL:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${FUZZ_BUILD_DIR:-$REPO/build-fuzz}
ALL_TARGETS=(fuzz-api fuzz-options fuzz-record fuzz-mountinfo fuzz-nvme-health fuzz-admin fuzz-tar fuzz-send)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"
for t in "${TARGETS[@]}"; do
	[[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "unknown fuzz target '$t' (FUZZ_TARGETS): ${ALL_TARGETS[*]}"; exit 1; }
done
read -r -a EXTRA_ARGS <<<"${FUZZ_EXTRA_ARGS:-}"

if [ ! -f "$BUILD/build.ninja" ]; then
	CC=clang meson setup "$BUILD" "$REPO" -Dfuzz=true -Dtests=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fno-sanitize-recover=all >"$BUILD.setup.log" 2>&1 ||
		{ cat "$BUILD.setup.log"; exit 1; }
fi
ninja -C "$BUILD" >"$BUILD/fuzz-build.log" 2>&1 || { tail -40 "$BUILD/fuzz-build.log"; exit 1; }
for t in "${TARGETS[@]}"; do
	[ -x "$BUILD/tests/fuzz/$t" ] || {
		echo "no $BUILD/tests/fuzz/$t: the fuzz targets are not wired into meson (tests/fuzz/meson.build)"; exit 1; }
done

# The caller's ASAN_OPTIONS come last: ASan takes the last value of an option.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1:quarantine_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The seed corpora and regressions first (as `meson test --suite fuzz` does).
replay_failed=0
for t in "${TARGETS[@]}"; do
	if ! "$BUILD/tests/fuzz/$t-replay" "$HERE/$t" >/dev/null 2>"$BUILD/$t-replay.log"; then
		echo "$t: corpus replay FAILED (a regression input still crashes):"
		grep -m3 -E 'ERROR: |runtime error|property violated' "$BUILD/$t-replay.log" | sed 's/^/  /' || true
		replay_failed=$((replay_failed + 1))
	fi
done

run_one() {
	local t=$1 corpus=$BUILD/fuzz-corpus/$1 art=$BUILD/fuzz-artifacts/$1 logf=$BUILD/fuzz-$1.log
	local start=$BUILD/fuzz-$1.start rc=0
	mkdir -p "$corpus" "$art"
	local before
	before=$(find "$corpus" -type f | wc -l)
	# Artifacts newer than this are this run's; older ones were reported by their own run.
	: >"$start"
	# First corpus dir: where new inputs go. The seed dir is only read.
	"$BUILD/tests/fuzz/$t" "$corpus" "$HERE/$t" -dict="$HERE/$t.dict" \
		-max_total_time="$SECS" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=512 -max_len=131072 \
		-artifact_prefix="$art/" -print_final_stats=1 "${EXTRA_ARGS[@]}" >"$logf" 2>&1 || rc=$?
	local execs crashes after verdict=ok
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logf" | tail -1)
	execs=${execs:-0}
	crashes=$(find "$art" -type f -newer "$start" \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
	after=$(find "$corpus" -type f | wc -l)
	if [ "$crashes" -gt 0 ]; then
		verdict=crash
	elif [ "$rc" -ne 0 ]; then
		verdict="exit-$rc-without-artifact"
	elif [ "$execs" -eq 0 ]; then
		verdict=no-execs
	fi
	printf '%s execs=%s crashes=%s new_corpus=%s secs=%s exit=%s verdict=%s\n' "$t" "$execs" "$crashes" \
		"$((after - before))" "$SECS" "$rc" "$verdict" >"$BUILD/fuzz-$t.result"
}

pids=()
for t in "${TARGETS[@]}"; do
	run_one "$t" &
	pids+=($!)
	if [ "${#pids[@]}" -ge "$PAR" ]; then
		wait "${pids[0]}"
		pids=("${pids[@]:1}")
	fi
done
wait

total_execs=0
total_crashes=0
targets_failed=0
for t in "${TARGETS[@]}"; do
	line=$(cat "$BUILD/fuzz-$t.result")
	echo "$line"
	e=$(sed -n 's/.*execs=\([0-9]*\).*/\1/p' <<<"$line")
	c=$(sed -n 's/.*crashes=\([0-9]*\).*/\1/p' <<<"$line")
	total_execs=$((total_execs + ${e:-0}))
	total_crashes=$((total_crashes + ${c:-0}))
	if [[ $line != *" verdict=ok" ]]; then
		targets_failed=$((targets_failed + 1))
		echo "  $t FAILED (${line##*verdict=}): see $BUILD/fuzz-$t.log and $BUILD/fuzz-artifacts/$t/"
		{ grep -m3 -E 'ERROR: |runtime error|property violated|SUMMARY' "$BUILD/fuzz-$t.log" ||
			tail -3 "$BUILD/fuzz-$t.log"; } | sed 's/^/  /'
	fi
done
echo "fuzz: ${#TARGETS[@]} targets, $total_execs execs, $total_crashes crashes, $targets_failed failing targets, $replay_failed failing replays"
# One test per target (ran and did not fail) plus one per corpus replay that failed.
echo "$(( ${#TARGETS[@]} - targets_failed )) passed, $(( targets_failed + replay_failed )) failed"
[ "$targets_failed" -eq 0 ] && [ "$replay_failed" -eq 0 ]
