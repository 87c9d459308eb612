/* SPDX-License-Identifier: MIT */
/*
 * XFS project quotas: per-directory project IDs (FS_IOC_FSSETXATTR) and
 * per-project hard limits (quotactl_fd, the XFS "Q_X*" commands).
 * Non-logging: every function returns 0 or a negative errno.
 *
 * Only needs a file descriptor on the filesystem (quotactl_fd(2), Linux 5.14+);
 * no block device node is looked up. Any fd works for the quotactl calls,
 * including O_PATH; the FS_IOC_* ioctls need a real O_RDONLY|O_DIRECTORY fd.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * nvmevol allocates project IDs from QUOTA_PROJID_MIN upwards so that it stays
 * clear of IDs an administrator assigns by hand (/etc/projects conventionally
 * uses small numbers). 0 is the default project (never limited; limits set on
 * ID 0 would become the default limits of every project) and (uint32_t)-1 is
 * the kernel's invalid ID, so neither is ever allocated. IDs above 65535 need
 * the XFS projid32bit feature, which mkfs.xfs enables by default.
 */
#define QUOTA_PROJID_MIN 100000U
#define QUOTA_PROJID_MAX 0xfffffffeU

typedef struct QuotaUsage {
	uint64_t used_bytes;   /* space charged to the project, delayed allocations included */
	uint64_t used_inodes;
	uint64_t bytes_hard;   /* 0 = no limit */
	uint64_t inodes_hard;  /* 0 = no limit */
} QuotaUsage;

/*
 * Sets *ret_available to true only if project-quota accounting AND enforcement
 * are both on for the filesystem holding @partition_root_fd (XFS mounted with
 * prjquota/pquota; "pqnoenforce" counts as unavailable). A kernel or filesystem
 * without quota support (ENOSYS, EINVAL, EOPNOTSUPP, ENOTTY, ESRCH) gives
 * available=false and returns 0; other failures (EBADF, EPERM, ...) are returned.
 */
int quota_probe(int partition_root_fd, bool *ret_available);

/*
 * Assigns project @projid to the directory @dirfd and sets FS_XFLAG_PROJINHERIT,
 * so files and directories created below it inherit the ID. Entries that already
 * exist below it keep their old ID. @projid 0 puts the directory back into the
 * default project and clears PROJINHERIT. Works without quota being enabled
 * (the ID is stored in the inode). -ENOTDIR if @dirfd is not a directory,
 * -EINVAL for (uint32_t)-1 or a >16-bit ID on a filesystem without projid32bit,
 * -ENOTTY/-EOPNOTSUPP if the filesystem has no project IDs.
 */
int quota_set_project(int dirfd, uint32_t projid);

/* Assigns project @projid to the regular file @fd (its blocks and inode are charged to it from then on). */
int quota_set_file_project(int fd, uint32_t projid);

/* Reads the project ID and the PROJINHERIT flag of @dirfd (either out-parameter may be NULL). */
int quota_get_project(int dirfd, uint32_t *ret_projid, bool *ret_inherit);

/*
 * Sets the hard limits of project @projid: @bytes_hard (rounded up to 512-byte
 * basic blocks; XFS then rounds up to whole filesystem blocks) and @inodes_hard.
 * 0 clears a limit. Soft limits are always cleared (nvmevol uses hard limits
 * only, and this leaves no stale soft limit behind on a reused ID).
 * -EINVAL for @projid 0 or (uint32_t)-1 and for an unrepresentable size;
 * -ENOSYS/-ESRCH if project quota is not enabled on the filesystem.
 */
int quota_set_limit(int partition_root_fd, uint32_t projid, uint64_t bytes_hard, uint64_t inodes_hard);

/*
 * Usage and hard limits of project @projid. An ID the filesystem has no quota
 * record for (never used, or no usage and no limits: -ENOENT from XFS) yields
 * all zeros and returns 0. -ENOSYS/-ESRCH if project quota is not enabled.
 */
int quota_get(int partition_root_fd, uint32_t projid, QuotaUsage *ret);

/*
 * Pure: the smallest ID >= max(@min_id, 1) that is not in @used (unsorted,
 * duplicates allowed, @used may be NULL when @n is 0), or 0 if every ID up to
 * QUOTA_PROJID_MAX is taken. The caller must count as used the IDs of every
 * directory that still exists, including ones that are being removed, so that
 * an ID is only reused once nothing on disk is charged to it any more.
 * No allocation; O(n * (1 + n / 4096)).
 */
uint32_t quota_next_free_id(const uint32_t *used, size_t n, uint32_t min_id);
