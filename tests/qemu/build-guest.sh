#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Builds the kernel + initramfs of the nvmevol qemu test guest (see
# reliability-and-security.md §0.1): Debian's stock kernel (it has
# CONFIG_XFS_QUOTA=y, the host kernel does not), busybox, the modules for XFS
# and loop devices, mkfs.xfs and xfs_quota, and any files given on the command
# line; ELF files bring their shared libraries (found with ldd) along.
#
# usage: build-guest.sh --out INITRD [--file SRC[:DEST]]... [--module NAME]... [BINARY...]
#
#   --out INITRD      where to write the gzip'ed cpio (newc) initramfs
#   --file SRC[:DEST] copy SRC into the guest at DEST (default /work/BASENAME);
#                     may be repeated. Directories are copied recursively.
#   --module NAME     load kernel module NAME too (after the default ones)
#   BINARY            same as --file BINARY
#
# On success it prints two lines, KERNEL=/path/vmlinuz and INITRD=/path, and
# exits 0. Downloads are cached in $NVMEVOL_QEMU_CACHE (/var/cache/nvmevol-qemu).
#
# Environment:
#   NVMEVOL_QEMU_CACHE       cache directory (default /var/cache/nvmevol-qemu)
#   NVMEVOL_QEMU_KERNEL_PKG  kernel package (default: what linux-image-amd64 depends on)
#
# The guest's /init mounts proc, sys, devtmpfs, devpts, /dev/shm and /tmp,
# loads the modules, runs /nvmevol/cmd.sh (if present) in /work, prints
# "NVMEVOL-GUEST-EXIT=<status>" and powers the machine off. run.sh writes cmd.sh.
set -euo pipefail

CACHE=${NVMEVOL_QEMU_CACHE:-/var/cache/nvmevol-qemu}
# Load order matters: crc32c_generic must be loaded before libcrc32c (whose
# "softdep pre: crc32c" busybox insmod does not resolve). Dependencies listed
# in modules.dep are added in front of each module automatically.
DEFAULT_MODULES=(crc32c_generic libcrc32c xfs loop)

die() {
	echo "build-guest.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '/^# usage:/,/^#   BINARY/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

OUT=
FILES=()
MODULES=("${DEFAULT_MODULES[@]}")
while [ $# -gt 0 ]; do
	case "$1" in
	--out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
	--out=*) OUT=${1#--out=}; shift ;;
	--file) [ $# -ge 2 ] || usage; FILES+=("$2"); shift 2 ;;
	--file=*) FILES+=("${1#--file=}"); shift ;;
	--module) [ $# -ge 2 ] || usage; MODULES+=("$2"); shift 2 ;;
	--module=*) MODULES+=("${1#--module=}"); shift ;;
	-h | --help) usage ;;
	--) shift; FILES+=("$@"); break ;;
	-*) usage ;;
	*) FILES+=("$1"); shift ;;
	esac
done
[ -n "$OUT" ] || usage

# ---- host packages -------------------------------------------------------

need_pkgs=()
need() { # need COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || need_pkgs+=("$2")
}
need qemu-system-x86_64 qemu-system-x86
need cpio cpio
need depmod kmod
need mkfs.xfs xfsprogs
need xfs_quota xfsprogs
need losetup mount
need ldd libc-bin
[ -x /bin/busybox ] || need_pkgs+=(busybox-static)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing packages (${need_pkgs[*]}) and not root"
	echo "build-guest.sh: installing ${need_pkgs[*]}" >&2
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2; then
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2
	fi
fi
# busybox must be static: the guest has no libc unless a binary brings one.
if ldd /bin/busybox >/dev/null 2>&1; then
	die "/bin/busybox is dynamically linked; install busybox-static"
fi

# ---- kernel: download once, keep vmlinuz and the modules we load ---------

mkdir -p "$CACHE/debs"
KPKG=${NVMEVOL_QEMU_KERNEL_PKG:-}
if [ -z "$KPKG" ]; then
	KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
	if [ -z "$KPKG" ]; then
		apt-get update >&2
		KPKG=$(apt-cache depends linux-image-amd64 |
			awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
	fi
	[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 to a kernel package"
fi

# One directory per kernel package and module list.
modkey=$(printf '%s\n' "${MODULES[@]}" | sha256sum | cut -c1-12)
KDIR="$CACHE/$KPKG"
MODDIR="$KDIR/modules-$modkey"

# Concurrent runs on a cold cache: one downloads and extracts, the others wait.
exec 9>"$CACHE/.lock"
flock 9
if [ ! -f "$KDIR/vmlinuz" ] || [ ! -f "$MODDIR/order" ]; then
	deb=$(ls "$CACHE"/debs/"${KPKG}"_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		echo "build-guest.sh: downloading $KPKG" >&2
		# apt drops privileges to _apt for downloads; let it write there.
		chmod 0755 "$CACHE" "$CACHE/debs"
		chown _apt "$CACHE/debs" 2>/dev/null || true
		(cd "$CACHE/debs" && apt-get download "$KPKG" >&2) ||
			{ apt-get update >&2 && (cd "$CACHE/debs" && apt-get download "$KPKG" >&2); } ||
			die "apt-get download $KPKG failed"
		deb=$(ls "$CACHE"/debs/"${KPKG}"_*.deb | head -n1)
	fi

	x=$(mktemp -d "$CACHE/extract.XXXXXX")
	trap 'rm -rf "$x"' EXIT
	dpkg -x "$deb" "$x"
	kver=$(ls "$x/lib/modules" | head -n1)
	[ -n "$kver" ] && [ -f "$x/boot/vmlinuz-$kver" ] || die "unexpected layout in $deb"
	depmod -b "$x" "$kver"
	mroot="$x/lib/modules/$kver"

	# Resolve each module to its file and its modules.dep dependencies.
	declare -A added=()
	order=()
	add_module() { # add_module NAME-or-RELPATH
		local rel line
		if [[ $1 == */* ]]; then
			rel=$1
		else
			local pat=${1//[-_]/[-_]}
			rel=$(grep -E "(^|/)${pat}\.ko(\.(xz|zst|gz))?:" "$mroot/modules.dep" | head -n1 | cut -d: -f1 || true)
			if [ -z "$rel" ]; then
				grep -qE "/${pat}\.ko" "$mroot/modules.builtin" && return 0
				die "module $1 not found in $KPKG"
			fi
		fi
		[ -z "${added[$rel]:-}" ] || return 0
		added[$rel]=1
		line=$(awk -F: -v m="$rel" '$1 == m { print $2; exit }' "$mroot/modules.dep")
		# modules.dep lists dependencies so that the last one must be loaded first.
		local deps i
		read -r -a deps <<<"$line"
		for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
			add_module "${deps[i]}"
		done
		order+=("$rel")
	}
	for m in "${MODULES[@]}"; do
		add_module "$m"
	done

	stage="$x/out"
	mkdir -p "$stage"
	: >"$stage/order"
	for rel in "${order[@]}"; do
		base=$(basename "$rel")
		name=${base%%.ko*}
		case "$base" in
		*.ko.xz) xz -dc "$mroot/$rel" >"$stage/$name.ko" ;;
		*.ko.zst) zstd -qdc "$mroot/$rel" >"$stage/$name.ko" ;;
		*.ko.gz) gzip -dc "$mroot/$rel" >"$stage/$name.ko" ;;
		*) cp "$mroot/$rel" "$stage/$name.ko" ;;
		esac
		echo "$name" >>"$stage/order"
	done
	mkdir -p "$KDIR"
	cp "$x/boot/vmlinuz-$kver" "$KDIR/vmlinuz.tmp" && mv "$KDIR/vmlinuz.tmp" "$KDIR/vmlinuz"
	echo "$kver" >"$KDIR/release"
	rm -rf "$MODDIR"
	mv "$stage" "$MODDIR"
	rm -rf "$x"
	trap - EXIT
fi
flock -u 9
exec 9>&-

# ---- initramfs -----------------------------------------------------------

root=$(mktemp -d "${TMPDIR:-/tmp}/nvmevol-initramfs.XXXXXX")
chmod 0755 "$root" # the guest's /: mktemp made it 0700, which locks out non-root users
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,root,work,nvmevol,lib/nvmevol-modules}
cp /bin/busybox "$root/bin/busybox"
cp "$MODDIR"/*.ko "$MODDIR/order" "$root/lib/nvmevol-modules/"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
: >"$root/etc/mtab" # replaced by a symlink at boot

# The magic read by bash itself: three processes per file made the copy of Python's library (about
# 1,400 files, run-powerloss-tests.sh) take 12 minutes at a load of 20.
is_elf() {
	local magic
	[ -f "$1" ] || return 1
	LC_ALL=C IFS= read -r -n 4 -d '' magic <"$1" 2>/dev/null
	[ "$magic" = $'\x7fELF' ]
}

# copy_in SRC DEST: copies SRC (file or directory) to DEST inside the guest,
# and the shared libraries of every ELF file among them.
copy_in() {
	local src=$1 dest=$2 f lib
	[ -e "$src" ] || die "no such file: $src"
	case "$dest" in /*) ;; *) die "guest path must be absolute: $dest" ;; esac
	mkdir -p "$root$(dirname "$dest")"
	cp -a -L "$src" "$root$dest"
	while IFS= read -r -d '' f; do
		is_elf "$f" || continue
		# "libx.so => /path (addr)", "/lib64/ld-linux-x86-64.so.2 (addr)"
		for lib in $(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
		if ldd "$f" 2>/dev/null | grep -q 'not found'; then
			die "$f: missing shared libraries: $(ldd "$f" | grep 'not found' | tr -s ' \t\n' ' ')"
		fi
	done < <(find "$src" -type f -print0)
}

copy_in "$(command -v mkfs.xfs)" /usr/sbin/mkfs.xfs
copy_in "$(command -v xfs_quota)" /usr/sbin/xfs_quota
# util-linux losetup (--find --show --direct-io=on), ahead of busybox's in PATH.
copy_in "$(command -v losetup)" /usr/sbin/losetup
for spec in "${FILES[@]}"; do
	if [[ $spec == *:* ]]; then
		copy_in "${spec%%:*}" "${spec#*:}"
	else
		copy_in "$spec" "/work/$(basename "$spec")"
	fi
done

cat >"$root/init" <<'EOF'
#!/bin/busybox sh
# nvmevol qemu guest init (generated by tests/qemu/build-guest.sh)
/bin/busybox --install -s
export PATH=/work:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp NVMEVOL_QEMU_GUEST=1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
ln -sf /proc/self/mounts /etc/mtab
for m in $(cat /lib/nvmevol-modules/order); do
	insmod "/lib/nvmevol-modules/$m.ko" || echo "NVMEVOL-GUEST: insmod $m failed" >&2
done
rc=0
if [ -f /nvmevol/cmd.sh ]; then
	cd /work
	sh /nvmevol/cmd.sh </dev/null
	rc=$?
fi
echo "NVMEVOL-GUEST-EXIT=$rc"
sync
poweroff -f
sleep 5
EOF
chmod 0755 "$root/init"

mkdir -p "$(dirname "$OUT")"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --owner=0:0 --quiet) | gzip -1 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "KERNEL=$KDIR/vmlinuz"
echo "INITRD=$OUT"
