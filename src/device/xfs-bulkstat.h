/* SPDX-License-Identifier: MIT */
/*
 * Bulk inode stats of a mounted XFS filesystem (XFS_IOC_BULKSTAT, the v5
 * interface of Linux >= 5.2): the allocated inodes from a given number on, in
 * inode order, each with its change time, generation, link count, mode and
 * size, read from the in-core inode (what stat() would say) without a path
 * or an open. Needs CAP_SYS_ADMIN. No policy, no logging.
 */
#pragma once

#include <stdint.h>

/* What the clone engine compares of an inode. */
typedef struct XfsInodeStat {
	uint64_t ino;
	int64_t ctime_sec, atime_sec;
	uint32_t ctime_nsec, atime_nsec;
	uint32_t gen;   /* changes when the inode number is reused */
	uint32_t nlink;
	uint16_t mode;  /* type and permission bits */
	uint64_t size;
} XfsInodeStat;

typedef struct XfsBulkstat {
	void *req;    /* the kernel's request: a header and room for cap records */
	uint32_t cap;
	uint32_t n;   /* records in it after the last xfs_bulkstat_next() */
} XfsBulkstat;

/* Room for @batch inodes per call. -ENOMEM. */
int xfs_bulkstat_init(XfsBulkstat *b, uint32_t batch);
void xfs_bulkstat_done(XfsBulkstat *b);

/*
 * Reads up to @want (at most the batch) allocated inodes numbered *@ino or
 * higher from the filesystem of @fd (any descriptor in it); *@ino moves past
 * the last one read. 0 with b->n == 0 past the last inode. -ENOTTY (not XFS,
 * or a kernel without the v5 call), -EPERM, -EINVAL or another -errno.
 */
int xfs_bulkstat_next(XfsBulkstat *b, int fd, uint64_t *ino, uint32_t want);

/* Record @i (< b->n) of the last call. */
void xfs_bulkstat_get(const XfsBulkstat *b, uint32_t i, XfsInodeStat *ret);
