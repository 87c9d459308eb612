#!/bin/bash
# SPDX-License-Identifier: MIT
# The manual pages render, and say what the code offers:
#   - each page of src/man/ builds with scdoc and renders with man -l, with no
#     warning and a NAME section;
#   - nvmevol(8) names every command of src/cli/cli.c;
#   - nvmevol-plugin(7) names every setting of config.json, every volume
#     option src/volume/volume-options.c parses and every metrics family of
#     src/metrics/.
# check-manpages.sh SRCROOT            the check
# check-manpages.sh --control SRCROOT  the same check on pages with one setting,
#                                      one option, one family and one command
#                                      removed: each must be reported
set -u

control=false
if [ "${1:-}" = --control ]; then
	control=true
	shift
fi
root=${1:?usage: check-manpages.sh [--control] SRCROOT}
for tool in scdoc man jq; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: needs $tool (packages scdoc, man-db, jq: tests/run-all.sh deps installs them)"
		exit 77
	fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root"/src/man/*.scd "$work/"
if $control; then
	# One of each kind goes missing from the pages.
	sed -i 's/NVMEVOL_HEALTH_CACHE_SECONDS/REMOVED/g; s/clone_copy/REMOVED/g; s/nvmevol_volume_used_inodes/REMOVED/g' "$work/nvmevol-plugin.7.scd"
	sed -i 's/partition adopt/REMOVED/g' "$work/nvmevol.8.scd"
fi

problems=0
report() {
	echo "$*"
	problems=$((problems + 1))
}

for scd in "$work"/*.scd; do
	page=${scd%.scd}
	name=$(basename "$page")
	if ! scdoc <"$scd" >"$page" 2>"$work/err"; then
		report "$name: scdoc failed: $(cat "$work/err")"
		continue
	fi
	MANWIDTH=80 man --warnings -l "$page" >"$work/out" 2>"$work/err"
	[ -s "$work/err" ] && report "$name: man -l warns: $(head -3 "$work/err")"
	grep -q '^NAME' "$work/out" || report "$name: renders without a NAME section"
	echo "$name: $(wc -l <"$work/out") lines rendered"
done

# "mentions WORD PAGE WHAT": the rendered page names WORD (scdoc escapes nothing in these words).
mentions() {
	grep -qF -- "$1" "$work/$2.scd" || report "$2: does not mention $3 $1"
}

while read -r cmd; do
	mentions "$cmd" nvmevol.8 "the command"
done < <(sed -n 's/^\t{ "\([a-z][a-z ]*\)", ".*/\1/p' "$root/src/cli/cli.c" | sort -u)

while read -r setting; do
	mentions "$setting" nvmevol-plugin.7 "the setting"
done < <(jq -r '.. | objects | select(has("Env")) | .Env[] | .Name' "$root/config.json")

while read -r option; do
	mentions "$option" nvmevol-plugin.7 "the volume option"
done < <(grep -o 'streq(key, "[a-z_0-9]*")' "$root/src/volume/volume-options.c" | sed 's/.*"\(.*\)")/\1/' | sort -u)

while read -r family; do
	mentions "$family" nvmevol-plugin.7 "the metrics family"
done < <(grep -oh '"nvmevol_[a-z_]*[a-z]"' "$root"/src/metrics/*.c | tr -d '"' | sort -u)

if $control; then
	# Exactly the four planted omissions, nothing else.
	if [ "$problems" -ne 4 ]; then
		echo "control: FAILED: expected 4 reports, got $problems"
		exit 1
	fi
	echo "control: the 4 planted omissions were reported"
	exit 0
fi
echo "$problems problems"
[ "$problems" -eq 0 ]
