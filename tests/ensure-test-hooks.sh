#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A build directory reused from before must have -Dtest_hooks=true, or the
# test-hook tests skip and the NVMEVOL_TEST_* hooks (for example
# NVMEVOL_TEST_FREEZE_NO_GUARDIAN) are silently ignored by the daemon. Turns
# the option on where it is off (meson configure) and fails unless it is on.
#
# usage: ensure-test-hooks.sh BUILD-DIR
set -u
dir=${1:?usage: ensure-test-hooks.sh BUILD-DIR}

test_hooks_of() {
	meson introspect "$dir" --buildoptions |
		python3 -c 'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "test_hooks"][0])'
}

v=$(test_hooks_of)
if [ "$v" != True ]; then
	echo "$dir: test_hooks is '$v': meson configure $dir -Dtest_hooks=true"
	meson configure "$dir" -Dtest_hooks=true >/dev/null || exit 1
	v=$(test_hooks_of)
fi
[ "$v" = True ] || { echo "$dir: test_hooks is still '$v'"; exit 1; }
