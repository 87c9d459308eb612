#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads a dm-log-writes log and rebuilds the logged disk as it was at any entry.

The log format (the kernel's Documentation/admin-guide/device-mapper/log-writes.rst and
drivers/md/dm-log-writes.c): at byte 0 a super block (magic, version, nr_entries, sectorsize,
little endian); from byte sectorsize on, one entry after the other, each a one-sector header
(sector, nr_sectors, flags, data_len: four le64, in units of sectorsize) followed by the
nr_sectors sectors of data it wrote (none for a flush, a discard or a mark; a mark's name is in
the header's sector after the 32 bytes of the header). Writes are logged in the order they
completed, and only once a flush covers them: the writes logged before a FLUSH entry are what
that flush made durable, and a disk with a volatile cache may have persisted any subset of
them, in any order, if the power went before the flush completed.

As a tool (in the qemu guest of tests/qemu/run-powerloss-tests.sh):
  logwrites.py info LOG              the entries, flush points and marks
  logwrites.py replay LOG DEV N      writes entries 0..N-1 onto DEV (which holds the disk as
                                     it was when logging began)
"""

import os
import struct
import sys

FLUSH = 1 << 0
FUA = 1 << 1
DISCARD = 1 << 2
MARK = 1 << 3
METADATA = 1 << 4

MAGIC = 0x6a736677736872
VERSION = 1
_SUPER = struct.Struct("<QQQI")
_ENTRY = struct.Struct("<QQQQ")


class LogError(Exception):
    pass


class Entry:
    __slots__ = ("index", "sector", "nr_sectors", "flags", "data_len", "offset", "mark")

    def __init__(self, index, sector, nr_sectors, flags, data_len, offset, mark):
        self.index = index
        self.sector = sector          # on the logged disk, in sectorsize units
        self.nr_sectors = nr_sectors  # idem
        self.flags = flags
        self.data_len = data_len
        self.offset = offset          # byte offset of the data in the log (after the header)
        self.mark = mark              # the mark's name, or None

    def is_write(self):
        return not self.flags & (MARK | DISCARD) and self.nr_sectors > 0

    def describe(self):
        f = [n for b, n in ((FLUSH, "flush"), (FUA, "fua"), (DISCARD, "discard"), (MARK, "mark"),
                            (METADATA, "metadata")) if self.flags & b]
        what = "mark %s" % self.mark if self.mark is not None else "%d+%d" % (self.sector, self.nr_sectors)
        return "%d %s %s" % (self.index, ",".join(f) or "write", what)


class Log:
    """The entries of the log at @path (read once; the data stay in the file)."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        head = os.pread(self.fd, 4096, 0)
        if len(head) < _SUPER.size:
            raise LogError("%s: too short for a log super block" % path)
        magic, version, nr, sectorsize = _SUPER.unpack_from(head)
        if magic != MAGIC or version != VERSION:
            raise LogError("%s: not a dm-log-writes log (magic %#x, version %d)" % (path, magic, version))
        if sectorsize < 512 or sectorsize & (sectorsize - 1):
            raise LogError("%s: bad sector size %d" % (path, sectorsize))
        self.sectorsize = sectorsize
        self.entries = []
        off = sectorsize
        for i in range(nr):
            hdr = os.pread(self.fd, sectorsize, off)
            if len(hdr) < sectorsize:
                raise LogError("%s: entry %d of %d is cut off" % (path, i, nr))
            sector, nsec, flags, dlen = _ENTRY.unpack_from(hdr)
            mark = None
            if flags & MARK:
                if dlen > sectorsize - _ENTRY.size:
                    raise LogError("%s: entry %d: a mark of %d bytes" % (path, i, dlen))
                mark = hdr[_ENTRY.size:_ENTRY.size + dlen].decode(errors="replace")
            off += sectorsize
            self.entries.append(Entry(i, sector, nsec, flags, dlen, off, mark))
            if not flags & (DISCARD | MARK):
                off += nsec * sectorsize

    def close(self):
        os.close(self.fd)

    def data(self, e):
        n = e.nr_sectors * self.sectorsize
        b = os.pread(self.fd, n, e.offset)
        if len(b) != n:
            raise LogError("%s: entry %d: data cut off" % (self.path, e.index))
        return b

    def flush_points(self):
        """Indexes of the FLUSH and FUA entries: a cut just after one of them is what the disk had
        when it completed."""
        return [e.index for e in self.entries if e.flags & (FLUSH | FUA)]

    def marks(self):
        return [(e.index, e.mark) for e in self.entries if e.mark is not None]


class Replayer:
    """Applies the log's entries, in order, onto the block device (or image) @dev, which held the
    logged disk as it was when logging began. pos is the number of entries applied."""

    def __init__(self, log, dev):
        self.log = log
        self.dev = dev
        self.fd = os.open(dev, os.O_RDWR)
        self.pos = 0
        self.writes = 0

    def close(self):
        os.close(self.fd)

    def apply(self, e, fd=None, nr_sectors=None):
        """Writes entry @e; @nr_sectors: only its first ones (a torn write)."""
        fd = self.fd if fd is None else fd
        ss = self.log.sectorsize
        if e.flags & DISCARD:
            # What a discarded range reads back as is the device's choice: zeros here.
            zero = bytes(min(e.nr_sectors * ss, 1 << 20))
            done = 0
            while done < e.nr_sectors * ss:
                n = min(len(zero), e.nr_sectors * ss - done)
                os.pwrite(fd, zero[:n], e.sector * ss + done)
                done += n
        elif e.is_write():
            data = self.log.data(e)
            os.pwrite(fd, data if nr_sectors is None else data[:nr_sectors * ss], e.sector * ss)
            self.writes += 1

    def advance(self, n):
        """Applies entries pos..n-1, then syncs @dev, so that a device-mapper target over it reads them."""
        if n < self.pos:
            raise LogError("cannot go back from entry %d to %d (rebuild from the start)" % (self.pos, n))
        for e in self.log.entries[self.pos:n]:
            self.apply(e)
        self.pos = n
        os.fsync(self.fd)


def main(argv):
    if len(argv) >= 2 and argv[0] == "info":
        lg = Log(argv[1])
        fl = lg.flush_points()
        print("entries=%d sectorsize=%d writes=%d flush_points=%d marks=%d" %
              (len(lg.entries), lg.sectorsize, sum(e.is_write() for e in lg.entries), len(fl), len(lg.marks())))
        for e in lg.entries:
            if e.flags & (FLUSH | FUA | MARK):
                print(e.describe())
        return 0
    if len(argv) == 4 and argv[0] == "replay":
        lg = Log(argv[1])
        n = int(argv[3])
        if not 0 <= n <= len(lg.entries):
            print("logwrites.py: N must be 0..%d" % len(lg.entries), file=sys.stderr)
            return 2
        r = Replayer(lg, argv[2])
        r.advance(n)
        print("replayed %d entries (%d writes) onto %s" % (n, r.writes, argv[2]))
        return 0
    print(__doc__.split("As a tool")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
