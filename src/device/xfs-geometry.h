/* SPDX-License-Identifier: MIT */
/*
 * The geometry and features of a mounted XFS filesystem, from the
 * XFS_IOC_FSGEOMETRY ioctl on any fd inside it (no helper binaries, no
 * xfsprogs headers). No policy, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct XfsGeometry {
	uint32_t block_size;        /* filesystem block, bytes */
	uint32_t sector_size;       /* data sector size, bytes */
	uint32_t log_sector_size;
	uint32_t sunit_bytes;       /* stripe unit, 0 = none */
	uint32_t swidth_bytes;      /* stripe width, 0 = none */
	uint32_t ag_count;
	uint64_t data_blocks;
	uint32_t log_blocks;        /* the internal log's size, filesystem blocks */
	uint32_t flags;             /* XFS_FSOP_GEOM_FLAGS_* as the kernel gave them */
	bool crc;                   /* v5 superblock: metadata checksums */
	bool reflink;
	bool bigtime;               /* timestamps beyond 2038 */
	bool ftype;
	bool finobt;
	bool rmapbt;
	bool inobtcount;
} XfsGeometry;

/* Decodes the feature bits of XFS_FSOP_GEOM_FLAGS into @g. Pure. */
void xfs_geometry_decode_flags(uint32_t flags, XfsGeometry *g);

/* Queries the filesystem that holds @fd. -ENOTTY if it is not XFS. */
int xfs_geometry_read(int fd, XfsGeometry *ret);
