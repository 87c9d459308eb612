/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool/quota.h"
#include "util/macro.h"

#ifndef __NR_quotactl_fd
#define __NR_quotactl_fd 443 /* same number on every architecture */
#endif

#define BASIC_BLOCK_SIZE 512U
#define FREE_ID_WINDOW 4096U

/* glibc 2.36 has no wrapper. Returns 0 or -errno. */
static int quotactl_fd_call(int fd, unsigned cmd, uint32_t id, void *addr)
{
	if (syscall(__NR_quotactl_fd, (unsigned)fd, cmd, (unsigned)id, addr) < 0)
		return negative_errno();
	return 0;
}

static bool errno_means_no_quota(int r)
{
	return r == -ENOSYS || r == -EINVAL || r == -EOPNOTSUPP || r == -ENOTTY || r == -ESRCH;
}

int quota_probe(int partition_root_fd, bool *ret_available)
{
	struct fs_quota_statv st = { .qs_version = FS_QSTATV_VERSION1 };
	const uint16_t want = FS_QUOTA_PDQ_ACCT | FS_QUOTA_PDQ_ENFD;
	int r;

	if (partition_root_fd < 0)
		return -EBADF;
	if (!ret_available)
		return -EINVAL;

	r = quotactl_fd_call(partition_root_fd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &st);
	if (r < 0) {
		if (!errno_means_no_quota(r))
			return r;
		*ret_available = false;
		return 0;
	}
	*ret_available = (st.qs_flags & want) == want;
	return 0;
}

static int get_fsxattr(int dirfd, struct fsxattr *ret)
{
	struct stat st;

	if (dirfd < 0)
		return -EBADF;
	if (fstat(dirfd, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;

	*ret = (struct fsxattr){ 0 };
	if (ioctl(dirfd, FS_IOC_FSGETXATTR, ret) < 0)
		return negative_errno();
	return 0;
}

int quota_set_project(int dirfd, uint32_t projid)
{
	struct fsxattr fa;
	int r;

	if (projid > QUOTA_PROJID_MAX)
		return -EINVAL;

	r = get_fsxattr(dirfd, &fa);
	if (r < 0)
		return r;

	fa.fsx_projid = projid;
	if (projid == 0)
		fa.fsx_xflags &= ~(uint32_t)FS_XFLAG_PROJINHERIT;
	else
		fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;

	if (ioctl(dirfd, FS_IOC_FSSETXATTR, &fa) < 0)
		return negative_errno();
	return 0;
}

int quota_set_file_project(int fd, uint32_t projid)
{
	struct fsxattr fa = { 0 };
	struct stat st;

	if (projid > QUOTA_PROJID_MAX)
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
		return negative_errno();
	fa.fsx_projid = projid;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0)
		return negative_errno();
	return 0;
}

int quota_get_project(int dirfd, uint32_t *ret_projid, bool *ret_inherit)
{
	struct fsxattr fa;
	int r;

	r = get_fsxattr(dirfd, &fa);
	if (r < 0)
		return r;

	if (ret_projid)
		*ret_projid = fa.fsx_projid;
	if (ret_inherit)
		*ret_inherit = (fa.fsx_xflags & FS_XFLAG_PROJINHERIT) != 0;
	return 0;
}

int quota_set_limit(int partition_root_fd, uint32_t projid, uint64_t bytes_hard, uint64_t inodes_hard)
{
	struct fs_disk_quota d;

	if (partition_root_fd < 0)
		return -EBADF;
	if (projid == 0 || projid > QUOTA_PROJID_MAX)
		return -EINVAL;
	if (bytes_hard > UINT64_MAX - (BASIC_BLOCK_SIZE - 1))
		return -EINVAL;

	d = (struct fs_disk_quota){
		.d_version = FS_DQUOT_VERSION,
		.d_flags = FS_PROJ_QUOTA,
		.d_fieldmask = FS_DQ_BHARD | FS_DQ_BSOFT | FS_DQ_IHARD | FS_DQ_ISOFT,
		.d_id = projid,
		.d_blk_hardlimit = (bytes_hard + BASIC_BLOCK_SIZE - 1) / BASIC_BLOCK_SIZE,
		.d_ino_hardlimit = inodes_hard,
	};
	return quotactl_fd_call(partition_root_fd, QCMD(Q_XSETQLIM, PRJQUOTA), projid, &d);
}

int quota_get(int partition_root_fd, uint32_t projid, QuotaUsage *ret)
{
	struct fs_disk_quota d = { 0 };
	int r;

	if (partition_root_fd < 0)
		return -EBADF;
	if (!ret || projid > QUOTA_PROJID_MAX)
		return -EINVAL;

	r = quotactl_fd_call(partition_root_fd, QCMD(Q_XGETQUOTA, PRJQUOTA), projid, &d);
	if (r == -ENOENT) {
		/* XFS has no dquot for this ID: nothing charged, no limits. */
		*ret = (QuotaUsage){ 0 };
		return 0;
	}
	if (r < 0)
		return r;

	*ret = (QuotaUsage){
		.used_bytes = d.d_bcount * BASIC_BLOCK_SIZE,
		.used_inodes = d.d_icount,
		.bytes_hard = d.d_blk_hardlimit * BASIC_BLOCK_SIZE,
		.inodes_hard = d.d_ino_hardlimit,
	};
	return 0;
}

uint32_t quota_next_free_id(const uint32_t *used, size_t n, uint32_t min_id)
{
	/* One bit per ID of the window [base, base + FREE_ID_WINDOW). */
	uint64_t taken[FREE_ID_WINDOW / 64];
	uint64_t base = min_id > 0 ? min_id : 1;

	while (base <= QUOTA_PROJID_MAX) {
		uint64_t span = QUOTA_PROJID_MAX - base + 1;

		if (span > FREE_ID_WINDOW)
			span = FREE_ID_WINDOW;

		memset(taken, 0, sizeof(taken));
		for (size_t i = 0; i < n; i++) {
			if (used[i] >= base && used[i] - base < span) {
				uint64_t off = used[i] - base;
				taken[off / 64] |= UINT64_C(1) << (off % 64);
			}
		}
		for (uint64_t off = 0; off < span; off++)
			if (!(taken[off / 64] & (UINT64_C(1) << (off % 64))))
				return (uint32_t)(base + off);

		base += span;
	}
	return 0;
}
