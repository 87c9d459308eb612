#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "monitoring" stage of tests/run-all.sh: the alert rules' promtool tests
# with their sabotage controls (check-rules.py), and every query of the
# dashboard and the rules against a real Prometheus scraping running nvmevol
# daemons (live.sh, in a network namespace that has only loopback: nothing it
# starts can reach or be reached from any network). The two run side by side
# (live.sh mostly waits for its qemu guest to boot); their output follows,
# one after the other. Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
P=0
F=0
rules=$(mktemp)
live=$(mktemp)
trap 'rm -f "$rules" "$live"' EXIT
python3 tests/monitoring/check-rules.py >"$rules" 2>&1 &
rp=$!
unshare --net -- tests/monitoring/live.sh >"$live" 2>&1 &
lp=$!
wait "$rp"
wait "$lp"
for out in "$rules" "$live"; do
	cat "$out"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
	[ -n "$line" ] && [ "$line" != "0 passed, 0 failed" ] || line="0 passed, 1 failed"
	P=$((P + ${line%% *}))
	line=${line#* passed, }
	F=$((F + ${line%% *}))
done
echo "$P passed, $F failed"
[ "$F" -eq 0 ]
