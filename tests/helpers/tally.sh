# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# The count of a shell test script: ok/bad print a line and count it, check NAME EXPR
# evaluates EXPR, finish prints "N passed, N failed" and exits (0 only if none failed).
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; exit $?; }
