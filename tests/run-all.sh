#!/bin/bash
# Installs what nvmevol's tests need (Debian 12, as root) and runs them all:
#   unit Criterion suites, then those and the privileged ones (loop XFS, real
#   daemon) under ASan+UBSan, fuzz-corpus replay and a bounded libFuzzer run, reliability
#   figures (kill -9, faults, hostile input, path safety, concurrency), the
#   quota suite in a qemu guest, the end-to-end suite against a real dockerd,
#   registry and docker-compose, a PostgreSQL cloned under load, a three-node
#   Docker Swarm in network namespaces, the day-2 operations (install from a
#   registry, the admin command) against a real dockerd, the host service with
#   Docker and Podman, the self-test drift under a real throttle, and the
#   monitoring kit (alert rules, dashboard) against a real Prometheus and node_exporter.
# Usage: tests/run-all.sh [stage...]    stages: deps build unit asan fuzz reliability drift monitoring qemu e2e compose clone swarm admin host
# Ends with "N tests, M runs" (distinct tests; asan runs unit's again) and one line
# "N passed, N failed" summing every stage's tests. deps and build are steps, not tests: they count
# only when they fail. A stage that ran no test fails. With CI=true (.ci/run) a skipped test is a
# failure unless tests/allowed-skips.txt lists it with its reason. After each stage that makes loop
# devices, tests/check-leftovers.sh must find none of them left attached or mounted.
# The whole script is one block, read before it runs: bash reads a script as it goes, so an edit of
# this file during a run would otherwise go on from a shifted offset (it once ran every stage).
{
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
LOGDIR=${NVMEVOL_TEST_LOGS:-$REPO/build-logs}
mkdir -p "$LOGDIR"
rm -f "$LOGDIR"/*.ids "$LOGDIR"/*.skips
CI=${CI:-false}
ALLOWED_SKIPS=${NVMEVOL_ALLOWED_SKIPS:-$REPO/tests/allowed-skips.txt}
# This run's fixtures (loop images, testbeds) live here, so the leftover check sees only this run's.
NVMEVOL_TEST_TMPDIR=$(mktemp -d /var/tmp/nvmevol-run.XXXXXX) && chmod 755 "$NVMEVOL_TEST_TMPDIR" || exit 1
export NVMEVOL_TEST_TMPDIR

TOTAL_PASS=0
TOTAL_FAIL=0
TOTAL_SKIP=0
FAILED_STAGES= # the stages with a failure, for the failures section before the summary
OTHER_TESTS=0 # tests of the stages that report no test names (each stage's own)
STAGE_RESULTS=()
STEP_STAGES=" deps build "
PRIVILEGED_STAGES=" unit asan reliability drift monitoring "

note() { printf '\n=== %s ===\n' "$*"; }

# Adds a stage's counts.
record() {
	local stage=$1 pass=$2 fail=$3 skip=$4 secs=$5
	TOTAL_PASS=$((TOTAL_PASS + pass))
	TOTAL_FAIL=$((TOTAL_FAIL + fail))
	TOTAL_SKIP=$((TOTAL_SKIP + skip))
	[ "$fail" -eq 0 ] || FAILED_STAGES+=" $stage"
	STAGE_RESULTS+=("$(printf '%-12s %5d passed %4d failed %4d skipped %6ss' "$stage" "$pass" "$fail" "$skip" "$secs")")
}

# "P F S" from the last "N passed, N failed[, N skipped]" line in a log, or "0 1 0" if the stage printed none.
counts_from_log() {
	local line
	line=$(grep -E '^[A-Za-z]*:? ?[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
	if [ -z "$line" ]; then
		echo "0 1 0"
		return
	fi
	echo "$line" | sed -E 's/^[^0-9]*([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\1 \2 0\4/'
}

run_stage() {
	local stage=$1; shift
	local start end log=$LOGDIR/$stage.log p f s
	# The free space too: a full disk stalls what writes to it (a qemu guest pauses), silently.
	note "$stage ($(df -Pm "$NVMEVOL_TEST_TMPDIR" | awk 'NR == 2 { print $4 }') MiB free for fixtures)"
	start=$(date +%s)
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	end=$(date +%s)
	if [[ $STEP_STAGES == *" $stage "* ]]; then
		# Not a test: only a failure counts.
		p=0 s=0 f=$((rc != 0))
	else
		read -r p f s < <(counts_from_log "$log")
		s=$((10#$s))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
			echo "$stage: no test ran" | tee -a "$log"
			f=1
		fi
		[ -f "$LOGDIR/$stage.ids" ] || OTHER_TESTS=$((OTHER_TESTS + p + f))
	fi
	if [[ $PRIVILEGED_STAGES == *" $stage "* ]]; then
		tests/check-leftovers.sh "$NVMEVOL_TEST_TMPDIR" 2>&1 | tee -a "$log"
		if [ "${PIPESTATUS[0]}" -ne 0 ]; then
			echo "$stage: left loop devices, mounts or fixture directories behind (above)" | tee -a "$log"
			f=$((f + 1))
		fi
	fi
	record "$stage" "$p" "$f" "$s" $((end - start))
}

stage_deps() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || return 1
	apt-get install -y -qq --no-install-recommends \
		build-essential meson ninja-build pkg-config clang libclang-rt-14-dev \
		libmicrohttpd-dev libjansson-dev libmount-dev libblkid-dev libcriterion-dev libzstd-dev zstd \
		xfsprogs util-linux fdisk dmsetup acl attr fio strace valgrind python3 curl jq \
		qemu-system-x86 cpio kmod busybox-static \
		docker.io docker-registry docker-compose debootstrap iproute2 podman libcap2-bin \
		prometheus prometheus-node-exporter python3-prometheus-client python3-yaml gnuplot-nox scdoc man-db libarchive-tools >/dev/null || return 1
}

# meson_suite DIR STAGE [meson test args]: runs the suite and prints "P passed, F failed, S skipped"
# (tests/count-results.py: each Criterion test counts, skips are listed; in CI an unlisted skip fails).
meson_suite() {
	local dir=$1 stage=$2 counts allow=()
	shift 2
	rm -f "$dir"/tests/*.criterion.json "$LOGDIR/$stage.ids" "$LOGDIR/$stage.skips"
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
	local rc=$?
	[ "$CI" = true ] && allow=(--allow "$ALLOWED_SKIPS")
	counts=$(python3 tests/count-results.py "$dir/meson-logs/testlog.json" --ids "$LOGDIR/$stage.ids" \
		--skips "$LOGDIR/$stage.skips" "${allow[@]}") || counts="0 1 0"
	read -r p f s <<<"$counts"
	if [ -s "$LOGDIR/$stage.skips" ]; then
		echo "skipped tests ($LOGDIR/$stage.skips):"
		sed 's/^/  /' "$LOGDIR/$stage.skips"
	fi
	echo "$p passed, $f failed, $s skipped"
	return $rc
}

stage_build() {
	[ -d build ] || meson setup build -Dtest_hooks=true || return 1
	tests/ensure-test-hooks.sh build || return 1
	ninja -C build || return 1
}

# The privileged suites (loop XFS, the real daemon: most of the time) run once, in asan: under ASan+UBSan
# they find all that the release build's run finds and more, and the release binary itself is driven
# by reliability, e2e, compose, clone, swarm, admin and host. `meson test -C build` runs them all.
stage_unit() {
	tests/ensure-test-hooks.sh build || return 1
	meson_suite build unit --suite unit
}

stage_asan() {
	[ -d build-asan ] || meson setup --native-file .ci/build-asan.ini build-asan -Dtest_hooks=true || return 1
	tests/ensure-test-hooks.sh build-asan || return 1
	ninja -C build-asan || return 1
	meson_suite build-asan asan
}

# 15 s per target keeps the whole run within budget; tests/fuzz/run.sh N runs longer.
stage_fuzz() { tests/fuzz/run.sh "${NVMEVOL_FUZZ_SECONDS:-15}"; }
stage_reliability() { tests/reliability/run-all.sh; }
# The self-test history's drift check: a throttled partition turns pass into below-baseline (about 10 s).
stage_drift() { tests/drift/drift.sh; }
# The monitoring kit: the alert rules' promtool tests and their controls, then every query of the
# dashboard and the rules against a real Prometheus and node_exporter on two running nvmevol, one of them
# in the qemu guest for quota and NVMe (about 80 s).
stage_monitoring() { tests/monitoring/run.sh; }
# run_suites SCRIPT...: runs each, then one "N passed, N failed" line for all (a stage's count is its last such line).
run_suites() {
	local p=0 f=0 rc=0 out line suite
	for suite in "$@"; do
		out=$(mktemp)
		"$suite" 2>&1 | tee "$out"
		[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
		rm -f "$out"
		[ -n "$line" ] || line="0 passed, 1 failed"
		# A suite that ran nothing did not pass.
		[ "$line" != "0 passed, 0 failed" ] || { echo "$suite: no test ran"; line="0 passed, 1 failed"; }
		p=$((p + $(echo "$line" | cut -d' ' -f1)))
		f=$((f + $(echo "$line" | cut -d' ' -f3)))
	done
	echo "$p passed, $f failed"
	return $rc
}
# The qemu suites (quota, NVMe, clones under quota, power loss).
# NVMEVOL_QEMU_SUITES: other scripts in their place (to check this stage's counting on fakes).
# shellcheck disable=SC2086
stage_qemu() { run_suites ${NVMEVOL_QEMU_SUITES:-tests/qemu/run-quota-tests.sh tests/qemu/run-nvme-tests.sh tests/qemu/run-clone-quota-tests.sh tests/qemu/run-powerloss-tests.sh}; }
stage_e2e() { tests/e2e/run.sh; }
stage_compose() { tests/e2e/compose.sh; }
# PostgreSQL under pgbench: cloned (clone-pg.sh), snapshotted, exported and imported (snapshot-pg.sh).
stage_clone() { run_suites tests/e2e/clone-pg.sh tests/e2e/snapshot-pg.sh; }
stage_swarm() { tests/swarm/run.sh; }
stage_admin() { tests/e2e/admin.sh; }
stage_host() { tests/e2e/host.sh; }

STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(deps build unit asan fuzz reliability drift monitoring qemu e2e compose clone swarm admin host)
T0=$(date +%s)
for s in "${STAGES[@]}"; do
	run_stage "$s" "stage_$s"
done

rmdir "$NVMEVOL_TEST_TMPDIR" 2>/dev/null || echo "left in $NVMEVOL_TEST_TMPDIR: $(ls -A "$NVMEVOL_TEST_TMPDIR")"

# What failed, from each failing stage's log, next to the summary: CI shows only the end of a run.
if [ -n "$FAILED_STAGES" ]; then
	note "failures (the first lines of each failing stage's log that name one, with their detail lines and seeds)"
	for s in $FAILED_STAGES; do
		# A stage of runs ("== NAME: command" each) with a results table ("NAME FAIL ..."; the
		# reliability stage): each failed run's header and first lines. Its sabotage runs print
		# FAILED lines when they pass, so a grep for failure words would show those instead.
		lines=$(awk 'NR == FNR { if ($2 == "FAIL" && NF >= 3) bad[$1] = 1; next }
			/^== / { n = $2; sub(/:$/, "", n); p = (n in bad); c = 0 }
			p && c < 8 { print; c++ }' "$LOGDIR/$s.log" "$LOGDIR/$s.log")
		# Otherwise a failure line, the indented lines right after it (what a check found; 4 at
		# most) and any line that names a seed (a randomised suite's replay).
		[ -n "$lines" ] || lines=$(awk '/^\[FAIL\]|^not ok|FAILED|TIMEOUT|did not end|no test ran|left loop devices/ { print; d = 4; next }
			d > 0 && /^[ \t#]/ { print; d--; next } { d = 0 } /[Ss]eed [0-9]+/ { print }' "$LOGDIR/$s.log" |
			head -n 30)
		[ -n "$lines" ] || lines=$(tail -n 3 "$LOGDIR/$s.log") # none named: how the log ends
		printf '%s\n' "$lines" | cut -c1-300 | sed "s/^/$s: /"
	done
fi

note "summary ($(( $(date +%s) - T0 ))s)"
printf '%s\n' "${STAGE_RESULTS[@]}"
# Distinct tests: the meson stages' by name (asan runs unit's again), the others' as counted.
DISTINCT=$(( $(cat "$LOGDIR"/*.ids 2>/dev/null | sort -u | wc -l) + OTHER_TESTS ))
[ "$TOTAL_SKIP" -eq 0 ] || echo "$TOTAL_SKIP tests skipped (listed in each stage's log)"
echo "$DISTINCT tests, $((TOTAL_PASS + TOTAL_FAIL)) runs"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" -eq 0 ]
exit
}
