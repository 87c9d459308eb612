#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the hostile archives of tests/test-daemon-snapshot.c into DIR, one file each:
what an import must refuse with a clear Err and leave nothing of. OUTSIDE is a path
outside the volume that an escape would create or overwrite."""
import io
import os
import sys
import tarfile


def archive(path, members):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)


def reg(name, data=b"x\n"):
    i = tarfile.TarInfo(name)
    i.size = len(data)
    return i, data


def sym(name, target):
    i = tarfile.TarInfo(name)
    i.type = tarfile.SYMTYPE
    i.linkname = target
    return i, None


def hard(name, target):
    i = tarfile.TarInfo(name)
    i.type = tarfile.LNKTYPE
    i.linkname = target
    return i, None


def main():
    d, outside = sys.argv[1], sys.argv[2]
    rel_out = os.path.relpath(outside, "/")
    archive(os.path.join(d, "dotdot.tar"), [reg("ok"), reg("../../../../../../../../" + rel_out)])
    archive(os.path.join(d, "absolute.tar"), [reg("ok"), reg(outside)])
    archive(os.path.join(d, "symlink-write.tar"), [sym("esc", os.path.dirname(outside)),
                                                    reg("esc/" + os.path.basename(outside))])
    archive(os.path.join(d, "hardlink-out.tar"), [reg("ok"), hard("link", "../../../../../../../../" + rel_out)])
    dev = tarfile.TarInfo("null")
    dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
    archive(os.path.join(d, "device.tar"), [reg("ok"), (dev, None)])
    archive(os.path.join(d, "good.tar"), [reg("a", b"a" * 5000), reg("sub/b", b"b\n")])
    good = open(os.path.join(d, "good.tar"), "rb").read()
    open(os.path.join(d, "truncated.tar"), "wb").write(good[:len(good) // 3])
    flipped = bytearray(good)
    flipped[100 + 3] ^= 0x10     # a bit of the first header (its mode)
    open(os.path.join(d, "bitflip.tar"), "wb").write(bytes(flipped))
    # A header that says 1 TiB of data follows, and little does.
    big = tarfile.TarInfo("giant")
    big.size = 1 << 40
    buf = big.tobuf(format=tarfile.PAX_FORMAT)
    open(os.path.join(d, "giant.tar"), "wb").write(buf + b"\0" * 4096)
    open(os.path.join(d, "empty.tar"), "wb").write(b"")
    open(os.path.join(d, "garbage.tar"), "wb").write(os.urandom(4096))


if __name__ == "__main__":
    main()
