#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "monitoring" stage of tests/run-all.sh: the alert rules' promtool tests
# with their sabotage controls (check-rules.py), then every query of the
# dashboard and the rules against a real Prometheus scraping a running nvmevol
# (live.sh, in a network namespace that has only loopback: nothing it starts
# can reach or be reached from any network). Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
P=0
F=0
run() {
	local out line
	out=$(mktemp)
	"$@" 2>&1 | tee "$out"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
	rm -f "$out"
	[ -n "$line" ] && [ "$line" != "0 passed, 0 failed" ] || line="0 passed, 1 failed"
	P=$((P + ${line%% *}))
	line=${line#* passed, }
	F=$((F + ${line%% *}))
}
run python3 tests/monitoring/check-rules.py
run unshare --net -- tests/monitoring/live.sh
echo "$P passed, $F failed"
[ "$F" -eq 0 ]
