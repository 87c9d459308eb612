#!/bin/bash
# Build the nvmevol managed-plugin directory: plugin/out/nvmevol/
#   config.json            (copied from the top of the repo)
#   rootfs/                (skeleton from rootfs/ + /usr/bin/nvmevol + the
#                           shared libraries it needs + the dynamic loader
#                           + /etc/nvmevol-build: version, commit, build time)
#
# Usage: plugin/build.sh [--binary PATH] [--out DIR] [--no-strip]
#   --binary PATH  package PATH instead of building with meson (testing only)
#   --out DIR      where to assemble (default plugin/out/nvmevol)
#   --no-strip     keep the binary's symbols
# Idempotent: re-running rebuilds incrementally and replaces DIR atomically.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$REPO/plugin/out/nvmevol
BUILD_DIR=$REPO/build-plugin
BIN=
BUILT=0
STRIP=1

while [ $# -gt 0 ]; do
    case $1 in
        --binary) BIN=$(realpath "$2"); shift 2 ;;
        --out) OUT=$(realpath -m "$2"); shift 2 ;;
        --no-strip) STRIP=0; shift ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done

if [ -z "$BIN" ]; then
    if [ -f "$BUILD_DIR/build.ninja" ]; then
        meson configure "$BUILD_DIR" -Dbuildtype=release -Dtests=disabled >/dev/null
    else
        meson setup "$BUILD_DIR" "$REPO" -Dbuildtype=release -Dtests=disabled
    fi
    ninja -C "$BUILD_DIR"
    BIN=$BUILD_DIR/src/nvmevol
    BUILT=1
fi
[ -x "$BIN" ] || { echo "build.sh: no executable at $BIN" >&2; exit 1; }
jq -e '.Entrypoint[0] == "/usr/bin/nvmevol"' "$REPO/config.json" >/dev/null ||
    { echo "build.sh: config.json is not valid JSON or has another Entrypoint" >&2; exit 1; }

STAGE=$OUT.new
rm -rf "$STAGE"
mkdir -p "$STAGE/rootfs"
cp "$REPO/config.json" "$STAGE/config.json"

# Skeleton, without the .keep placeholders that exist only for git.
(cd "$REPO/rootfs" && find . -type d -print0) |
    (cd "$STAGE/rootfs" && xargs -0 mkdir -p)
chmod 1777 "$STAGE/rootfs/tmp"

install -D -m 0755 "$BIN" "$STAGE/rootfs/usr/bin/nvmevol"
# Which build this is; it also makes every build's content unique, which
# Docker 20.10 needs to create a new version next to an installed one
# ("content sha256:...: already exists" otherwise).
{
    echo "version=$("$BIN" --version | sed 's/^nvmevol //')"
    echo "commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
} >"$STAGE/rootfs/etc/nvmevol-build"
[ "$STRIP" = 1 ] && strip --strip-unneeded "$STAGE/rootfs/usr/bin/nvmevol"
# What ships is hardened (full RELRO, PIE, stack protector, _FORTIFY_SOURCE);
# a --binary given for testing may be a sanitizer build and is not checked.
if [ "$BUILT" = 1 ] && ! "$REPO/tests/check-hardening.sh" "$STAGE/rootfs/usr/bin/nvmevol" >"$STAGE/.hardening" 2>&1; then
    echo "build.sh: the binary lacks build hardening:" >&2
    cat "$STAGE/.hardening" >&2
    exit 1
fi
rm -f "$STAGE/.hardening"

# The ELF interpreter, at the path the binary names.
INTERP=$(readelf -p .interp "$BIN" 2>/dev/null | sed -n 's/.*\]  *\(\/.*\)$/\1/p')
[ -n "$INTERP" ] || { echo "build.sh: $BIN has no ELF interpreter (static?)" >&2; exit 1; }
install -D -m 0755 "$(readlink -f "$INTERP")" "$STAGE/rootfs$INTERP"

# Every shared library ldd resolves (the transitive closure), at the path ldd
# shows.  A library ldd cannot find is an error.
LDD_OUT=$(ldd "$BIN")
if grep -q 'not found' <<<"$LDD_OUT"; then
    echo "build.sh: unresolved libraries:" >&2
    grep 'not found' <<<"$LDD_OUT" >&2
    exit 1
fi
LIBS=$(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$LDD_OUT")
for lib in $LIBS; do
    install -D -m 0644 "$(readlink -f "$lib")" "$STAGE/rootfs$lib"
done

# Check, without running the daemon, that the loader resolves every library
# from inside the rootfs alone.
if ! chroot "$STAGE/rootfs" "$INTERP" --list /usr/bin/nvmevol >"$STAGE/.ldd-check" 2>&1 ||
   grep -q 'not found' "$STAGE/.ldd-check"; then
    echo "build.sh: the rootfs does not resolve the binary's libraries:" >&2
    cat "$STAGE/.ldd-check" >&2
    exit 1
fi
rm -f "$STAGE/.ldd-check"

rm -rf "$OUT"
mv "$STAGE" "$OUT"

echo "plugin directory: $OUT"
echo "libraries:"
(cd "$OUT/rootfs" && find . -type f ! -path ./usr/bin/nvmevol | sed 's/^\./  /' | sort)
echo "rootfs size: $(du -sh --apparent-size "$OUT/rootfs" | cut -f1) ($(du -sb "$OUT/rootfs" | cut -f1) bytes)"
