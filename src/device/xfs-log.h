/* SPDX-License-Identifier: MIT */
/*
 * Where an XFS log stands, from sysfs (/sys/fs/xfs/DEV/log/log_head_lsn and
 * log_tail_lsn, Linux >= 4.1): the metadata logged but not yet written back
 * in place lies between the tail and the head. A freeze writes all of it back
 * while it holds every writer. No policy, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A log sequence number: the log's cycle (one pass over it) and a block in it (512 bytes). */
typedef struct XfsLsn {
	uint32_t cycle, block;
} XfsLsn;

/* "CYCLE:BLOCK" with an optional newline, as sysfs gives it. Pure. */
int xfs_lsn_parse(const char *s, XfsLsn *ret);
/* Basic blocks (512 bytes) from @tail to @head in a log of @log_bb of them; UINT64_MAX if that makes no sense. Pure. */
uint64_t xfs_lsn_distance(XfsLsn tail, XfsLsn head, uint64_t log_bb);
/* Whether @lsn is at or past @target. Pure. */
bool xfs_lsn_reached(XfsLsn lsn, XfsLsn target);

/* The log directory in sysfs of the filesystem that holds @fd (by its device's name). -ENOENT without one. */
int xfs_log_open(int fd, int *ret_dirfd);
/* Head and tail, read now from @log_dirfd. */
int xfs_log_read(int log_dirfd, XfsLsn *ret_head, XfsLsn *ret_tail);
