/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <string.h>
#include <sys/ioctl.h>

#include "device/xfs-geometry.h"
#include "util/macro.h"

/*
 * The kernel ABI of XFS_IOC_FSGEOMETRY (struct xfs_fsop_geom, version 5,
 * Linux >= 5.1), written out here so that the build needs no xfslibs-dev.
 * The size is part of the ioctl number: a wrong layout fails with ENOTTY,
 * it can never be misread.
 */
struct xfs_fsop_geom_v5 {
	__u32 blocksize;
	__u32 rtextsize;
	__u32 agblocks;
	__u32 agcount;
	__u32 logblocks;
	__u32 sectsize;
	__u32 inodesize;
	__u32 imaxpct;
	__u64 datablocks;
	__u64 rtblocks;
	__u64 rtextents;
	__u64 logstart;
	unsigned char uuid[16];
	__u32 sunit;       /* fs blocks */
	__u32 swidth;      /* fs blocks */
	__s32 version;
	__u32 flags;
	__u32 logsectsize;
	__u32 rtsectsize;
	__u32 dirblocksize;
	__u32 logsunit;
	__u32 sick;
	__u32 checked;
	__u64 reserved[17];
};
_Static_assert(sizeof(struct xfs_fsop_geom_v5) == 256, "struct xfs_fsop_geom is 256 bytes");

#define XFS_IOC_FSGEOMETRY_V5 _IOR('X', 126, struct xfs_fsop_geom_v5)

#define GEOM_FLAG_V5SB (1u << 15)
#define GEOM_FLAG_FTYPE (1u << 16)
#define GEOM_FLAG_FINOBT (1u << 17)
#define GEOM_FLAG_RMAPBT (1u << 19)
#define GEOM_FLAG_REFLINK (1u << 20)
#define GEOM_FLAG_BIGTIME (1u << 21)
#define GEOM_FLAG_INOBTCNT (1u << 22)

void xfs_geometry_decode_flags(uint32_t flags, XfsGeometry *g)
{
	g->flags = flags;
	g->crc = flags & GEOM_FLAG_V5SB;
	g->ftype = flags & GEOM_FLAG_FTYPE;
	g->finobt = flags & GEOM_FLAG_FINOBT;
	g->rmapbt = flags & GEOM_FLAG_RMAPBT;
	g->reflink = flags & GEOM_FLAG_REFLINK;
	g->bigtime = flags & GEOM_FLAG_BIGTIME;
	g->inobtcount = flags & GEOM_FLAG_INOBTCNT;
}

static uint32_t blocks_to_bytes(uint32_t blocks, uint32_t block_size)
{
	uint64_t b = (uint64_t)blocks * block_size;
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

int xfs_geometry_read(int fd, XfsGeometry *ret)
{
	struct xfs_fsop_geom_v5 geo;
	XfsGeometry g = { 0 };

	memset(&geo, 0, sizeof(geo));
	if (ioctl(fd, XFS_IOC_FSGEOMETRY_V5, &geo) < 0)
		return negative_errno();
	g.block_size = geo.blocksize;
	g.sector_size = geo.sectsize;
	g.log_sector_size = geo.logsectsize;
	/* sunit and swidth come in filesystem blocks; bytes compare with the device's sizes. */
	g.sunit_bytes = blocks_to_bytes(geo.sunit, geo.blocksize);
	g.swidth_bytes = blocks_to_bytes(geo.swidth, geo.blocksize);
	g.ag_count = geo.agcount;
	g.data_blocks = geo.datablocks;
	g.log_blocks = geo.logblocks;
	xfs_geometry_decode_flags(geo.flags, &g);
	*ret = g;
	return 0;
}
