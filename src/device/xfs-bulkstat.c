/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/ioctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "device/xfs-bulkstat.h"
#include "util/macro.h"

/*
 * The kernel ABI of XFS_IOC_BULKSTAT (struct xfs_bulkstat_req with struct
 * xfs_bulkstat records, Linux >= 5.2), written out as xfs-geometry.c does so
 * that the build needs no xfslibs-dev. The header's size is part of the ioctl
 * number, each record's size is checked below.
 */
struct xfs_bulk_ireq_v5 {
	uint64_t ino;    /* in: the first inode; out: where to go on */
	uint32_t flags;
	uint32_t icount; /* in: room for this many records */
	uint32_t ocount; /* out: records filled */
	uint32_t agno;
	uint64_t reserved[5];
};
_Static_assert(sizeof(struct xfs_bulk_ireq_v5) == 64, "struct xfs_bulk_ireq is 64 bytes");

struct xfs_bulkstat_v5 {
	uint64_t bs_ino;
	uint64_t bs_size;
	uint64_t bs_blocks;
	uint64_t bs_xflags;
	int64_t bs_atime;
	int64_t bs_mtime;
	int64_t bs_ctime;
	int64_t bs_btime;
	uint32_t bs_gen;
	uint32_t bs_uid;
	uint32_t bs_gid;
	uint32_t bs_projectid;
	uint32_t bs_atime_nsec;
	uint32_t bs_mtime_nsec;
	uint32_t bs_ctime_nsec;
	uint32_t bs_btime_nsec;
	uint32_t bs_blksize;
	uint32_t bs_rdev;
	uint32_t bs_cowextsize_blks;
	uint32_t bs_extsize_blks;
	uint32_t bs_nlink;
	uint32_t bs_extents;
	uint32_t bs_aextents;
	uint16_t bs_version;
	uint16_t bs_forkoff;
	uint16_t bs_sick;
	uint16_t bs_checked;
	uint16_t bs_mode;
	uint16_t bs_pad2;
	uint64_t bs_extents64;
	uint64_t bs_pad[6];
};
_Static_assert(sizeof(struct xfs_bulkstat_v5) == 192, "struct xfs_bulkstat is 192 bytes");

struct xfs_bulkstat_req_v5 {
	struct xfs_bulk_ireq_v5 hdr;
	struct xfs_bulkstat_v5 bulkstat[];
};

#define XFS_IOC_BULKSTAT_V5 _IOR('X', 127, struct xfs_bulkstat_req_v5)

int xfs_bulkstat_init(XfsBulkstat *b, uint32_t batch)
{
	*b = (XfsBulkstat){ 0 };
	if (batch == 0)
		return -EINVAL;
	b->req = calloc(1, sizeof(struct xfs_bulkstat_req_v5) + (size_t)batch * sizeof(struct xfs_bulkstat_v5));
	if (!b->req)
		return -ENOMEM;
	b->cap = batch;
	return 0;
}

void xfs_bulkstat_done(XfsBulkstat *b)
{
	free(b->req);
	*b = (XfsBulkstat){ 0 };
}

int xfs_bulkstat_next(XfsBulkstat *b, int fd, uint64_t *ino, uint32_t want)
{
	struct xfs_bulkstat_req_v5 *req = b->req;

	b->n = 0;
	/* The reserved words and the flags must be zero, or the kernel refuses the call. */
	req->hdr = (struct xfs_bulk_ireq_v5){ .ino = *ino, .icount = want > 0 && want < b->cap ? want : b->cap };
	if (ioctl(fd, XFS_IOC_BULKSTAT_V5, req) < 0)
		return negative_errno();
	if (req->hdr.ocount > b->cap)
		return -EIO;
	b->n = req->hdr.ocount;
	*ino = req->hdr.ino;
	return 0;
}

void xfs_bulkstat_get(const XfsBulkstat *b, uint32_t i, XfsInodeStat *ret)
{
	const struct xfs_bulkstat_v5 *s = &((const struct xfs_bulkstat_req_v5 *)b->req)->bulkstat[i];

	*ret = (XfsInodeStat){
		.ino = s->bs_ino,
		.ctime_sec = s->bs_ctime,
		.ctime_nsec = s->bs_ctime_nsec,
		.atime_sec = s->bs_atime,
		.atime_nsec = s->bs_atime_nsec,
		.gen = s->bs_gen,
		.nlink = s->bs_nlink,
		.mode = s->bs_mode,
		.size = s->bs_size,
	};
}
