#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Writes Docker's default seccomp profile plus three rules that stop a
# container from moving its files out of an nvmevol volume's size limit
# (plugin/README.md, "Size limits and container root"): ioctl FS_IOC_FSSETXATTR (sets a
# file's XFS project ID) and FS_IOC_SETFLAGS / FS_IOC32_SETFLAGS (can clear a
# directory's project-inherit flag, `chattr -P`) fail with EPERM. Every other
# ioctl, and every other rule of the default profile, stays as it is.
#
# usage: make-profile.sh [--default FILE] [--docker-default] [OUT]   (OUT default: stdout)
#   docker run --security-opt seccomp=OUT ...
#   --docker-default  write Docker's default profile as found, unchanged
#
# `--security-opt seccomp=FILE` REPLACES Docker's built-in profile, so the
# result must start from the very profile this dockerd has built in. Debian
# ships it as a file in golang-github-docker-docker-dev, built from the same
# source package as docker.io. Without --default the script takes it from
# there: installed, or else that one file from `apt-get download` of the
# version that matches the installed docker.io (nothing gets installed).
# tests/e2e/ checks that the file equals the built-in profile (the OCI specs
# of two containers agree) and that the rules give EPERM.
set -euo pipefail

PKG_PATH=/usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
DEFAULT=
PLAIN=0
OUT=
while [ $# -gt 0 ]; do
	case "$1" in
	--default) DEFAULT=$2; shift 2 ;;
	--docker-default) PLAIN=1; shift ;;
	-h | --help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "make-profile.sh: unknown option $1" >&2; exit 2 ;;
	*) OUT=$1; shift ;;
	esac
done
command -v jq >/dev/null || { echo "make-profile.sh: needs jq (apt-get install jq)" >&2; exit 1; }

# The ioctl commands to refuse (from <linux/fs.h>; the same numbers for every
# architecture Docker's profile lists):
#   FS_IOC_FSSETXATTR = _IOW('X', 32, struct fsxattr) = 0x401c5820
#   FS_IOC_SETFLAGS   = _IOW('f', 2, long)            = 0x40086602
#   FS_IOC32_SETFLAGS = _IOW('f', 2, int)             = 0x40046602 (32-bit processes)
DENY=(0x401c5820 0x40086602 0x40046602)

# Why not one ERRNO rule per command: runc (libseccomp) lets the profile's
# unconditional ALLOW of ioctl win over a conditional ERRNO rule for the same
# syscall (tested: the ioctl went through). So ioctl leaves the unconditional
# list and is allowed by rules that each match a set of commands holding no
# denied one; the profile's default action (EPERM) takes the rest. Each rule
# is one masked compare, (cmd & MASK) == VALUE: runc turns two compares on the
# same argument into two rules (OR), so they cannot be combined. The masks
# cover the low 32 bits only: the kernel reads the command as 32 bits and
# ignores the rest of the register, which seccomp sees whole.
# The sets: for each denied D and bit i (31..0), the commands whose bits above
# i equal D's and whose bit i differs, unless the set holds another denied
# command. Any other command agrees with the nearest D on a longest prefix and
# differs at the next bit: it is in one of these sets. Prints a JSON array
# of [MASK, VALUE].
allow_sets() {
	local d c i mask value clash rules=()
	local -A seen=()
	for d in "${DENY[@]}"; do
		for ((i = 31; i >= 0; i--)); do
			mask=$(( (0xffffffff << i) & 0xffffffff ))
			value=$(( (((d >> i) ^ 1) << i) & 0xffffffff ))
			clash=0
			for c in "${DENY[@]}"; do
				[ $(( c & mask )) -eq "$value" ] && clash=1
			done
			[ "$clash" = 0 ] && [ -z "${seen[$mask/$value]:-}" ] || continue
			seen[$mask/$value]=1
			rules+=("[$mask,$value]")
		done
	done
	(IFS=,; echo "[${rules[*]}]")
}

# Docker's default profile -> the same with ioctl allowed only by the sets
# above. file_setattr (Linux 6.17) sets project IDs too: not in Docker
# 20.10's list, and kept out should a newer default list it.
add_rules() {
	jq --argjson allow "$(allow_sets)" '
		.syscalls |= map(.names -= ["ioctl", "file_setattr"] | select(.names != []))
		| .syscalls += [$allow[] | {
			names: ["ioctl"],
			action: "SCMP_ACT_ALLOW",
			args: [{ index: 1, value: .[0], valueTwo: .[1], op: "SCMP_CMP_MASKED_EQ" }],
			comment: "nvmevol: every ioctl but FS_IOC_FSSETXATTR and FS_IOC_SETFLAGS (XFS project quota, size=)",
			includes: {},
			excludes: {}
		}]' "$1"
}

# Docker's default profile, as this dockerd has it built in.
find_default() {
	local src have
	src=$(dpkg-query -W -f='${source:Version}' docker.io 2>/dev/null) || {
		echo "make-profile.sh: docker.io is not installed; give the engine's default profile with --default FILE" >&2
		return 1
	}
	have=$(dpkg-query -W -f='${Version}' golang-github-docker-docker-dev 2>/dev/null || true)
	if [ "$have" = "$src" ] && [ -f "$PKG_PATH" ]; then
		echo "$PKG_PATH"
		return 0
	fi
	# apt drops privileges for downloads: a directory it may write to.
	chmod 0755 "$tmp"
	chown _apt "$tmp" 2>/dev/null || true
	(cd "$tmp" && apt-get download -qq "golang-github-docker-docker-dev=$src" >/dev/null 2>&1) || {
		echo "make-profile.sh: apt-get download golang-github-docker-docker-dev=$src failed (apt-get update first?)" >&2
		return 1
	}
	dpkg-deb --fsys-tarfile "$tmp"/golang-github-docker-docker-dev_*.deb | tar -xO ".$PKG_PATH" >"$tmp/default.json"
	echo "$tmp/default.json"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$DEFAULT" ] || DEFAULT=$(find_default)
jq -e '.defaultAction == "SCMP_ACT_ERRNO" and (.syscalls | map(.names) | flatten | index("ioctl"))' "$DEFAULT" >/dev/null ||
	{ echo "make-profile.sh: $DEFAULT does not look like Docker's default profile" >&2; exit 1; }
if [ "$PLAIN" = 1 ]; then
	cp "$DEFAULT" "$tmp/out.json"
else
	add_rules "$DEFAULT" >"$tmp/out.json"
fi
if [ -n "$OUT" ]; then
	mv "$tmp/out.json" "$OUT"
	chmod 0644 "$OUT"
else
	cat "$tmp/out.json"
fi
