#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Reads a built ELF executable with readelf and fails unless it carries the
# hardening a root daemon needs: full RELRO (a GNU_RELRO segment and BIND_NOW,
# so the GOT is read-only once the program runs), PIE (ELF type DYN with the
# PIE flag, so ASLR moves the code), the stack protector (__stack_chk_fail
# imported) and _FORTIFY_SOURCE (at least one __*_chk function imported).
#
# usage: check-hardening.sh [--no-fortify] [--expect-unhardened] ELF
#   --no-fortify         the build has no _FORTIFY_SOURCE (sanitizer or -O0
#                        builds): skip that one property
#   --expect-unhardened  negative control: pass only if EVERY property is
#                        reported missing (proves each check can fail)
set -u

fortify=1
expect=hardened
while [ $# -gt 1 ]; do
	case "$1" in
	--no-fortify) fortify=0 ;;
	--expect-unhardened) expect=unhardened ;;
	*) echo "check-hardening.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
elf=${1:?usage: check-hardening.sh [--no-fortify] [--expect-unhardened] ELF}
command -v readelf >/dev/null || { echo "check-hardening.sh: readelf not found (binutils)" >&2; exit 2; }
[ -f "$elf" ] || { echo "check-hardening.sh: no such file: $elf" >&2; exit 2; }

header=$(readelf -hW "$elf") || exit 2
dynamic=$(readelf -dW "$elf") || exit 2
segments=$(readelf -lW "$elf") || exit 2
# Undefined dynamic symbols: what the program imports from libc.
imports=$(readelf --dyn-syms -W "$elf" | awk '$7 == "UND" { sub(/@.*/, "", $8); print $8 }') || exit 2

present=0
missing=0
report() { # NAME OK(0/1) DETAIL
	if [ "$2" = 1 ]; then
		present=$((present + 1))
		printf 'present: %-16s %s\n' "$1" "$3"
	else
		missing=$((missing + 1))
		printf 'MISSING: %-16s %s\n' "$1" "$3"
	fi
}

ok=0; grep -Eq 'Type:[[:space:]]+DYN' <<<"$header" && grep -Eq 'FLAGS_1.*[[:space:]]PIE' <<<"$dynamic" && ok=1
report PIE "$ok" "$(grep -E 'Type:' <<<"$header" | tr -s ' '); $(grep -E 'FLAGS_1' <<<"$dynamic" | tr -s ' ' || echo 'no FLAGS_1')"

ok=0; grep -q 'GNU_RELRO' <<<"$segments" && ok=1
report RELRO "$ok" "GNU_RELRO segment $([ $ok = 1 ] && echo present || echo absent)"

# ld writes BIND_NOW as a FLAGS entry, FLAGS_1 NOW, or both.
ok=0; grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*[[:space:]]NOW|\(BIND_NOW\)' <<<"$dynamic" && ok=1
report BIND_NOW "$ok" "$(grep -E '\((FLAGS|FLAGS_1|BIND_NOW)\)' <<<"$dynamic" | tr -s ' ' | tr '\n' ';' || true)"

ok=0; grep -qx '__stack_chk_fail' <<<"$imports" && ok=1
report stack-protector "$ok" "__stack_chk_fail $([ $ok = 1 ] && echo imported || echo 'not imported')"

if [ "$fortify" = 1 ]; then
	chk=$(grep -E '^__.*_chk$' <<<"$imports" | grep -vx '__stack_chk_fail' | sort -u)
	if [ -n "$chk" ]; then
		report FORTIFY_SOURCE 1 "$(wc -l <<<"$chk") checked functions imported: $(echo $chk)"
	else
		report FORTIFY_SOURCE 0 "no __*_chk function imported"
	fi
else
	echo "skipped: FORTIFY_SOURCE (this build has no _FORTIFY_SOURCE: sanitizers or -O0)"
fi

echo "$elf: $present present, $missing missing"
if [ "$expect" = unhardened ]; then
	# The control must fail every check that ran.
	[ "$present" -eq 0 ] || { echo "negative control: a check passed on an unhardened binary" >&2; exit 1; }
	exit 0
fi
[ "$missing" -eq 0 ]
