#!/bin/bash
# Installs what nvmevol's tests need (Debian 12, as root) and runs them all:
#   unit + privileged Criterion suites (loop XFS, real daemon), the same under
#   ASan+UBSan, fuzz-corpus replay and a bounded libFuzzer run, reliability
#   figures (kill -9, faults, hostile input, path safety, concurrency), the
#   quota suite in a qemu guest, the end-to-end suite against a real dockerd,
#   registry and docker-compose, a PostgreSQL cloned under load, a three-node
#   Docker Swarm in network namespaces, the day-2 operations (install from a
#   registry, the admin command) against a real dockerd, and the self-test drift
#   under a real throttle.
# Usage: tests/run-all.sh [stage...]    stages: deps build unit asan fuzz reliability drift qemu e2e compose clone swarm admin
# Ends with one line "N passed, N failed" summing every stage's tests.
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
LOGDIR=${NVMEVOL_TEST_LOGS:-$REPO/build-logs}
mkdir -p "$LOGDIR"

TOTAL_PASS=0
TOTAL_FAIL=0
STAGE_RESULTS=()

note() { printf '\n=== %s ===\n' "$*"; }

# Adds a stage's counts; a stage that could not run at all counts as one failure.
record() {
	local stage=$1 pass=$2 fail=$3 secs=$4
	TOTAL_PASS=$((TOTAL_PASS + pass))
	TOTAL_FAIL=$((TOTAL_FAIL + fail))
	STAGE_RESULTS+=("$(printf '%-12s %5d passed %4d failed %6ss' "$stage" "$pass" "$fail" "$secs")")
}

# Counts from a "N passed, N failed" line in a log, or 0/1 if the stage printed none.
counts_from_log() {
	local line
	line=$(grep -E '^[A-Za-z]*:? ?[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
	if [ -z "$line" ]; then
		echo "0 1"
		return
	fi
	echo "$line" | sed -E 's/^[^0-9]*([0-9]+) passed, ([0-9]+) failed.*/\1 \2/'
}

# Counts from meson's testlog.json: one entry per test program.
counts_from_meson() {
	python3 - "$1" <<'PY'
import json, re, sys
p = f = 0
for line in open(sys.argv[1]):
    t = json.loads(line)
    ok = t["result"] in ("OK", "SKIP", "EXPECTEDFAIL")
    # Criterion prints one synthesis per program: count its tests, not the program.
    m = re.findall(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)",
                   (t.get("stdout") or "") + (t.get("stderr") or ""))
    if m:
        tested, passing, failing, crashing = map(int, m[-1])
        p += passing
        f += failing + crashing + (0 if ok or failing + crashing else 1)
    elif ok:
        p += 1
    else:
        f += 1
print(p, f)
PY
}

run_stage() {
	local stage=$1; shift
	local start end log=$LOGDIR/$stage.log
	note "$stage"
	start=$(date +%s)
	"$@" 2>&1 | tee "$log"
	local rc=${PIPESTATUS[0]}
	end=$(date +%s)
	read -r p f < <(counts_from_log "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	record "$stage" "$p" "$f" $((end - start))
}

stage_deps() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || return 1
	apt-get install -y -qq --no-install-recommends \
		build-essential meson ninja-build pkg-config clang libclang-rt-14-dev \
		libmicrohttpd-dev libjansson-dev libmount-dev libblkid-dev libcriterion-dev \
		xfsprogs util-linux fdisk acl attr fio strace valgrind python3 curl jq \
		qemu-system-x86 cpio kmod busybox-static \
		docker.io docker-registry docker-compose debootstrap iproute2 \
		prometheus python3-prometheus-client gnuplot-nox scdoc man-db >/dev/null || return 1
	echo "1 passed, 0 failed"
}

meson_suite() {
	local dir=$1; shift
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
	local rc=$?
	read -r p f < <(counts_from_meson "$dir/meson-logs/testlog.json")
	echo "$p passed, $f failed"
	return $rc
}

stage_build() {
	[ -d build ] || meson setup build -Dtest_hooks=true || return 1
	ninja -C build || return 1
	echo "1 passed, 0 failed"
}

stage_unit() {
	meson_suite build
}

stage_asan() {
	[ -d build-asan ] || meson setup --native-file .ci/build-asan.ini build-asan -Dtest_hooks=true || return 1
	ninja -C build-asan || return 1
	meson_suite build-asan
}

# 15 s per target keeps the whole run within budget; tests/fuzz/run.sh N runs longer.
stage_fuzz() { tests/fuzz/run.sh "${NVMEVOL_FUZZ_SECONDS:-15}"; }
stage_reliability() { tests/reliability/run-all.sh; }
# The self-test history's drift check: a throttled partition turns pass into below-baseline (about 10 s).
stage_drift() { tests/drift/drift.sh; }
# Both qemu suites; one "N passed, N failed" line for the stage.
stage_qemu() {
	local p=0 f=0 rc=0 out line
	for suite in tests/qemu/run-quota-tests.sh tests/qemu/run-nvme-tests.sh tests/qemu/run-clone-quota-tests.sh; do
		out=$(mktemp)
		"$suite" 2>&1 | tee "$out"
		[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
		rm -f "$out"
		[ -n "$line" ] || line="0 passed, 1 failed"
		p=$((p + $(echo "$line" | cut -d' ' -f1)))
		f=$((f + $(echo "$line" | cut -d' ' -f3)))
	done
	echo "$p passed, $f failed"
	return $rc
}
stage_e2e() { tests/e2e/run.sh; }
stage_compose() { tests/e2e/compose.sh; }
stage_clone() { tests/e2e/clone-pg.sh; }
stage_swarm() { tests/swarm/run.sh; }
stage_admin() { tests/e2e/admin.sh; }

STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(deps build unit asan fuzz reliability drift qemu e2e compose clone swarm admin)
T0=$(date +%s)
for s in "${STAGES[@]}"; do
	run_stage "$s" "stage_$s"
done

note "summary ($(( $(date +%s) - T0 ))s)"
printf '%s\n' "${STAGE_RESULTS[@]}"
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" -eq 0 ]
