#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The monitoring kit against the real thing: Debian's prometheus and
# prometheus-node-exporter on loopback, in a network namespace of their own
# that has nothing but lo (tests/monitoring/run.sh starts this script under
# unshare --net), scraping two real nvmevol daemons' metrics directories, as
# two hosts:
# - this host: the daemon runs directly on two loop XFS partitions, as the
#   privileged tests do. Volumes on partition a, one mounted; six first mounts
#   of one volume (five make the baseline, the sixth a ratio to it); requests
#   that fail (an unknown volume, a bad option, a volume whose disk is gone);
#   partition b detached while the daemon was stopped, so its volume is
#   partition-missing.
# - a qemu guest (tests/qemu/run.sh, Debian's kernel: XFS project quota) with
#   two emulated NVMe controllers, the second with a SMART critical warning
#   (guest.sh): a volume with size= and inodes= filled to 94% of its limit,
#   and the devices' health. Its metrics directory is a host directory shared
#   over 9p, which a second node_exporter serves.
# Then check-queries.py evaluates every expression of dashboard.json and
# alerts.yml (the rules loaded by the server too), and two control runs with a
# metric name misspelled (one in the dashboard, one in the rules) must fail.
#
# Needs root, losetup, mkfs.xfs, curl, jq, prometheus, prometheus-node-exporter,
# python3-yaml, qemu-system-x86 and build/ (src/nvmevol, tests/tools/plugin-call;
# or NVMEVOL_BINARY). Ends with "N passed, N failed".
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${NVMEVOL_BUILD_DIR:-$REPO/build}
BIN=${NVMEVOL_BINARY:-$BUILD/src/nvmevol}
KIT=$REPO/examples/monitoring
. "$REPO/tests/helpers/tally.sh"

[ "$(id -u)" = 0 ] || { bad "needs root"; finish; }
for t in losetup mkfs.xfs blkid curl jq prometheus prometheus-node-exporter python3 qemu-system-x86_64; do
	command -v $t >/dev/null || { bad "missing $t"; finish; }
done
[ -x "$BIN" ] && [ -x "$BUILD/tests/tools/plugin-call" ] || { bad "no $BIN or $BUILD/tests/tools/plugin-call (build first)"; finish; }
# Only loopback: the namespace run.sh made.
if ip -o link show | grep -qv ': lo:'; then
	bad "not in a network namespace of its own (run tests/monitoring/run.sh)"
	finish
fi
ip link set lo up

PREFIX=nvm$((RANDOM % 100000))
WORK=$(mktemp -d "${NVMEVOL_TEST_TMPDIR:-/var/tmp}/nvmevol-monitoring.XXXXXX")
chmod 755 "$WORK"
SOCK=$WORK/s.sock
METRICS=$WORK/metrics
LOOPS=()
PIDS=()
DPID=
GPID=
SHARED=$WORK/guest-shared

cleanup() {
	set +e
	if [ -n "$GPID" ]; then
		: >"$SHARED/done"
		# run.sh stops qemu when it is stopped.
		for _ in $(seq 100); do kill -0 "$GPID" 2>/dev/null || break; sleep 0.1; done
		kill "$GPID" 2>/dev/null && wait "$GPID" 2>/dev/null
	fi
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	awk -v d="$WORK" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m"; done
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The guest first: it takes longest (it boots under TCG).
mkdir -p "$SHARED/metrics"
chmod 755 "$SHARED" "$SHARED/metrics"
truncate -s 512M "$WORK/nvme0.img" "$WORK/nvme1.img"
qa=()
for a in -drive "if=none,id=n0,format=raw,file=$WORK/nvme0.img" -device "nvme,serial=NVMON0001,drive=n0" \
	-drive "if=none,id=n1,format=raw,file=$WORK/nvme1.img" -device "nvme,serial=NVMON0002,drive=n1,smart_critical_warning=4" \
	-virtfs "local,path=$SHARED,mount_tag=shared,security_model=none"; do
	qa+=(--qemu-arg "$a")
done
"$REPO/tests/qemu/run.sh" --timeout 400 --module nvme --module virtio_pci --module 9pnet_virtio --module 9p \
	--file "$BIN" --file "$BUILD/tests/tools/plugin-call" "${qa[@]}" --script "$REPO/tests/monitoring/guest.sh" \
	>"$WORK/guest.log" 2>&1 &
GPID=$!

for p in a b; do
	truncate -s 512M "$WORK/img-$p"
	l=$(losetup --find --show --direct-io=on "$WORK/img-$p") || { bad "losetup"; finish; }
	LOOPS+=("$l")
	mkfs.xfs -q -L "${PREFIX}$p" "$l" || { bad "mkfs.xfs"; finish; }
done
mkdir -p "$WORK/state" "$WORK/prop" "$WORK/parts"

# A 1 s budget: the self-test reports a p99 only from 1000 samples or more, which 100 ms of
# 4 KiB QD1 I/O on a loaded machine does not reach, and the p99 panels and rule need one.
# A 3 s self-test: each QD1 phase then lasts ~680 ms, enough for the 1000 latencies a p99 needs
# (SELFTEST_P99_MIN_SAMPLES) on a loop device at up to 0.6 ms an I/O; at 1 s a loaded machine got
# fewer, the baseline had no p99 and the dashboard's p99 panel had no series (CI, stop 28).
start_daemon() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NVMEVOL_SOCKET="$SOCK" NVMEVOL_STATE_DIR="$WORK/state" \
		NVMEVOL_PROPAGATED_MOUNT="$WORK/prop" NVMEVOL_PARTITION_ROOT="$WORK/parts" NVMEVOL_LABEL_PREFIX="$PREFIX" \
		NVMEVOL_SELFTEST=warn NVMEVOL_SELFTEST_CACHE_SECONDS=0 NVMEVOL_SELFTEST_BUDGET_MS=3000 \
		NVMEVOL_METRICS_DIR="$METRICS" NVMEVOL_METRICS_INTERVAL_SECONDS=1 "$BIN" >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 150); do api List '{}' 2>/dev/null | jq -e .Volumes >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
stop_daemon() { kill "$DPID" && wait "$DPID"; DPID=; }
api() { curl -s --max-time 60 --unix-socket "$SOCK" -X POST -d "$2" "http://nvmevol/VolumeDriver.$1"; }
err() { api "$@" | jq -r '.Err // ""'; }

# Partition b gets a volume, then its disk goes away while the daemon is stopped.
check "daemon starts" start_daemon
check "a volume on partition b" '[ -z "$(err Create "{\"Name\":\"away\",\"Opts\":{\"partition\":\"${PREFIX}b\"}}")" ]'
stop_daemon
UUID_B=$(blkid -s UUID -o value "${LOOPS[1]}")
umount "$WORK/parts/$UUID_B" && losetup -d "${LOOPS[1]}" && unset 'LOOPS[1]'
check "partition b detached" '[ ! -e "$WORK/parts/$UUID_B/nvmevol" ]'

# node_exporter and Prometheus on loopback, random ports, their own storage, scraping every second.
port() { echo $((20000 + RANDOM % 40000)); }
NE_PORT=$(port)
NE2_PORT=$((NE_PORT + 1))
PROM_PORT=$((NE_PORT + 2))
mkdir -p "$METRICS" "$WORK/tsdb"
for ne in "$NE_PORT:$METRICS" "$NE2_PORT:$SHARED/metrics"; do
	prometheus-node-exporter --web.listen-address="127.0.0.1:${ne%%:*}" --collector.disable-defaults \
		--collector.textfile --collector.textfile.directory="${ne#*:}" >>"$WORK/node-exporter.log" 2>&1 &
	PIDS+=($!)
done
cp "$KIT/alerts.yml" "$WORK/alerts.yml"
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [ alerts.yml ]
scrape_configs:
  - job_name: node
    static_configs:
      - targets: [ "127.0.0.1:$NE_PORT", "127.0.0.1:$NE2_PORT" ]
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
	--web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
URL=http://127.0.0.1:$PROM_PORT

check "daemon starts again without partition b" start_daemon
for v in db cache; do
	check "create $v on partition a" '[ -z "$(err Create "{\"Name\":\"$v\",\"Opts\":{\"partition\":\"${PREFIX}a\"}}")" ]'
done
# Six first mounts: each runs a self-test; five make the baseline, the sixth has a ratio to it.
for i in 1 2 3 4 5 6; do
	e=$(err Mount "{\"Name\":\"db\",\"ID\":\"m$i\"}")
	[ -z "$e" ] || echo "  mount $i: $e"
	api Unmount "{\"Name\":\"db\",\"ID\":\"m$i\"}" >/dev/null
done
check "the baseline is established" \
	'[ "$(api Get "{\"Name\":\"db\"}" | jq -r ".Volume.Status.selftest.history.ratio.seq_write_mbps // empty")" != "" ]'
check "cache stays mounted" '[ -z "$(err Mount "{\"Name\":\"cache\",\"ID\":\"c1\"}")" ]'
# Requests that fail: counted as errors by kind and result.
check "Mount of an unknown volume fails" '[ -n "$(err Mount "{\"Name\":\"nope\",\"ID\":\"x\"}")" ]'
check "Create with a bad option fails" '[ -n "$(err Create "{\"Name\":\"bad\",\"Opts\":{\"nosuch\":\"1\"}}")" ]'
check "Mount of the volume on the missing partition fails" '[ -n "$(err Mount "{\"Name\":\"away\",\"ID\":\"y\"}")" ]'
api List '{}' >/dev/null

# Ready when Prometheus has the last changes of both hosts (this one's ratio and mounted volume,
# the guest's usage and device health) and a few more scrapes of each. The guest may take a
# minute or two to boot under TCG.
q() { curl -s --max-time 10 "$URL/api/v1/query" --data-urlencode "query=$1" | jq -r '.data.result | length'; }
ready=false
for _ in $(seq 360); do
	if [ "$(q 'nvmevol_partition_selftest_baseline_ratio')" -gt 0 ] 2>/dev/null &&
		[ "$(q 'nvmevol_volume_mounts > 0')" -gt 1 ] 2>/dev/null &&
		[ "$(q 'nvmevol_volume_used_bytes / nvmevol_volume_size_limit_bytes > 0.9')" -gt 0 ] 2>/dev/null &&
		[ "$(q 'nvmevol_partition_device_healthy == 0')" -gt 0 ] 2>/dev/null &&
		[ "$(q 'count_over_time(nvmevol_up[1m]) >= 5')" -gt 1 ] 2>/dev/null; then
		ready=true
		break
	fi
	kill -0 "$GPID" 2>/dev/null || break
	sleep 0.5
done
check "Prometheus scrapes both daemons' metrics through node_exporter" '$ready'
if ! $ready; then
	echo "--- prometheus.log"; tail -20 "$WORK/prometheus.log"; echo "--- node-exporter.log"; tail -20 "$WORK/node-exporter.log"
	echo "--- daemon.log"; tail -20 "$WORK/daemon.log"; echo "--- guest.log"; tail -30 "$WORK/guest.log"
	finish
fi
# The rules' first evaluation (evaluation_interval 1 s).
sleep 2

EXPECT=(--expect NvmevolPartitionMissing --expect NvmevolVolumesUnavailable --expect NvmevolDeviceHealthWarning
	--expect NvmevolVolumeNearSizeLimit)
python3 "$REPO/tests/monitoring/check-queries.py" --url "$URL" --dashboard "$KIT/dashboard.json" \
	--rules "$KIT/alerts.yml" "${EXPECT[@]}" | tee "$WORK/queries.out"
read -r p f < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$WORK/queries.out" | tail -1)
PASS=$((PASS + ${p:-0}))
FAIL=$((FAIL + ${f:-1}))

# Controls: one metric name misspelled must fail the check, in either file.
sed '0,/nvmevol_partition_free_bytes/s//nvmevol_partition_fre_bytes/' "$KIT/dashboard.json" >"$WORK/bad-dashboard.json"
sed '0,/nvmevol_partition_present ==/s//nvmevol_partition_presnt ==/' "$KIT/alerts.yml" >"$WORK/bad-alerts.yml"
check "control: the misspelled metric is in the copies" \
	'grep -q nvmevol_partition_fre_bytes "$WORK/bad-dashboard.json" && grep -q nvmevol_partition_presnt "$WORK/bad-alerts.yml"'
python3 "$REPO/tests/monitoring/check-queries.py" --url "$URL" --dashboard "$WORK/bad-dashboard.json" \
	--rules "$KIT/alerts.yml" "${EXPECT[@]}" >"$WORK/control-dashboard.out" 2>&1
rc=$?
check "control: a misspelled metric in the dashboard fails the check" \
	'[ $rc -ne 0 ] && grep -q "^FAIL .*nvmevol_partition_fre_bytes" "$WORK/control-dashboard.out"'
python3 "$REPO/tests/monitoring/check-queries.py" --url "$URL" --dashboard "$KIT/dashboard.json" \
	--rules "$WORK/bad-alerts.yml" "${EXPECT[@]}" >"$WORK/control-rules.out" 2>&1
rc=$?
check "control: a misspelled metric in the rules fails the check" \
	'[ $rc -ne 0 ] && grep -A2 "^FAIL alert NvmevolPartitionMissing" "$WORK/control-rules.out" | grep -q nvmevol_partition_presnt'
grep '^FAIL' "$WORK/control-dashboard.out" "$WORK/control-rules.out" | sed 's/^/  (control) /'

check "daemon stops cleanly" 'stop_daemon'
: >"$SHARED/done"
wait "$GPID"
grc=$?
GPID=
check "the guest's daemon stops cleanly, the guest exits 0" '[ $grc -eq 0 ] && grep -q "daemon exited with 0" "$WORK/guest.log"'
[ $grc -eq 0 ] || tail -30 "$WORK/guest.log"
finish
