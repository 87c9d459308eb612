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
# Prints per target: execs, crashes, new corpus entries; ends with
# "fuzz: N targets, E execs, C crashes" and exits non-zero on any crash.
set -euo pipefail

SECS=${1:-45}
PAR=${FUZZ_PARALLEL:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${FUZZ_BUILD_DIR:-$REPO/build-fuzz}
TARGETS=(fuzz-api fuzz-options fuzz-record fuzz-mountinfo fuzz-nvme-health fuzz-admin)

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

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
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
	mkdir -p "$corpus" "$art"
	local before
	before=$(find "$corpus" -type f | wc -l)
	# First corpus dir: where new inputs go. The seed dir is only read.
	"$BUILD/tests/fuzz/$t" "$corpus" "$HERE/$t" -dict="$HERE/$t.dict" \
		-max_total_time="$SECS" -timeout=1 -rss_limit_mb=512 -max_len=131072 \
		-artifact_prefix="$art/" -print_final_stats=1 >"$logf" 2>&1 || true
	local execs crashes after
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logf" | tail -1)
	crashes=$(find "$art" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
	after=$(find "$corpus" -type f | wc -l)
	printf '%s execs=%s crashes=%s new_corpus=%s secs=%s\n' "$t" "${execs:-0}" "$crashes" \
		"$((after - before))" "$SECS" >"$BUILD/fuzz-$t.result"
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
	if [ "${c:-0}" -gt 0 ]; then
		targets_failed=$((targets_failed + 1))
		echo "  $t: see $BUILD/fuzz-$t.log and $BUILD/fuzz-artifacts/$t/"
		grep -m3 -E 'ERROR: |runtime error|property violated|SUMMARY' "$BUILD/fuzz-$t.log" | sed 's/^/  /' || true
	fi
done
echo "fuzz: ${#TARGETS[@]} targets, $total_execs execs, $total_crashes crashes, $replay_failed failing replays"
# One test per target (no crash) plus one per corpus replay that failed.
echo "$(( ${#TARGETS[@]} - targets_failed )) passed, $(( targets_failed + replay_failed )) failed"
[ "$total_crashes" -eq 0 ] && [ "$replay_failed" -eq 0 ]
