#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Fails when a test suite left a loop device attached, a filesystem mounted or
# a fixture directory behind. Fixtures are recognised by where they live: the
# temporary directories the helpers make, ROOT/nvmevol-*.XXXXXX (testbed,
# loopxfs, devices, quota, the reliability suites). It never detaches or
# unmounts anything: on a shared machine the devices may be another run's.
#
# usage: check-leftovers.sh [ROOT...]
#   ROOT defaults to $NVMEVOL_TEST_TMPDIR, else $NVMEVOL_TEST_TMPDIR_DEFAULT
#   (meson's per-build directory), else /tmp and /var/tmp; with /tmp and
#   /var/tmp, mounts of loop devices labelled like a testbed's (nvt*, nvd*,
#   nvlx*) count too.
set -u

roots=("$@")
if [ ${#roots[@]} -eq 0 ]; then
	if [ -n "${NVMEVOL_TEST_TMPDIR:-}" ]; then
		roots=("$NVMEVOL_TEST_TMPDIR")
	elif [ -n "${NVMEVOL_TEST_TMPDIR_DEFAULT:-}" ]; then
		roots=("$NVMEVOL_TEST_TMPDIR_DEFAULT")
	else
		roots=(/tmp /var/tmp)
	fi
fi
unscoped=0
[[ " ${roots[*]} " == *" /tmp "* || " ${roots[*]} " == *" /var/tmp "* ]] && unscoped=1

# Whether $1 is inside a fixture directory below one of the roots.
is_fixture_path() {
	local r
	for r in "${roots[@]}"; do
		[[ $1 == "${r%/}"/nvmevol-* ]] && return 0
	done
	return 1
}

left=0
devices=()
# Loop devices, from sysfs (busybox and util-linux losetup print differently).
for b in /sys/block/loop*/loop/backing_file; do
	[ -r "$b" ] || continue
	file=$(cat "$b" 2>/dev/null) || continue
	file=${file% (deleted)}
	dev=/dev/$(basename "$(dirname "$(dirname "$b")")")
	if is_fixture_path "$file"; then
		echo "leftover: $dev attached to $file"
		devices+=("$dev")
		left=$((left + 1))
	fi
done

# Mounts: below a fixture directory, or of a leftover device or one of its partitions.
while read -r target source; do
	target=$(printf '%b' "$target")
	hit=0
	is_fixture_path "$target" && hit=1
	for d in "${devices[@]}"; do
		[[ $source == "$d" || $source == "$d"p* ]] && hit=1
	done
	if [ $hit -eq 0 ] && [ $unscoped -eq 1 ] && [[ $source == /dev/loop* ]]; then
		label=$(blkid -p -o value -s LABEL "$source" 2>/dev/null)
		[[ $label == nvt* || $label == nvd* || $label == nvlx* ]] && hit=1
	fi
	if [ $hit -eq 1 ]; then
		echo "leftover: $source mounted on $target"
		left=$((left + 1))
	fi
done < <(awk '{ for (i = 7; $i != "-"; i++); print $5, $(i + 2) }' /proc/self/mountinfo)

# Fixture directories (an image of up to a few GB each).
for r in "${roots[@]}"; do
	for d in "${r%/}"/nvmevol-*.??????; do
		[ -d "$d" ] || continue
		echo "leftover: directory $d ($(du -sh "$d" 2>/dev/null | cut -f1))"
		left=$((left + 1))
	done
done

if [ $left -gt 0 ]; then
	echo "check-leftovers: $left leftover(s) below ${roots[*]}"
	exit 1
fi
echo "check-leftovers: nothing left below ${roots[*]}"
