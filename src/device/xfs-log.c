/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "device/xfs-log.h"
#include "util/alloc-util.h"
#include "util/fs-util.h"
#include "util/macro.h"

int xfs_lsn_parse(const char *s, XfsLsn *ret)
{
	unsigned long long c, b;
	char *end;

	errno = 0;
	c = strtoull(s, &end, 10);
	if (end == s || *end != ':' || errno || c > UINT32_MAX || s[0] == '-')
		return -EINVAL;
	s = end + 1;
	b = strtoull(s, &end, 10);
	if (end == s || errno || b > UINT32_MAX || s[0] == '-' || (*end != '\0' && !(end[0] == '\n' && end[1] == '\0')))
		return -EINVAL;
	*ret = (XfsLsn){ .cycle = (uint32_t)c, .block = (uint32_t)b };
	return 0;
}

uint64_t xfs_lsn_distance(XfsLsn tail, XfsLsn head, uint64_t log_bb)
{
	if (tail.block >= log_bb || head.block >= log_bb)
		return UINT64_MAX;
	if (head.cycle == tail.cycle && head.block >= tail.block)
		return head.block - tail.block;
	/* The head is one pass ahead, before where the tail is (a log never holds more than one pass). */
	if (head.cycle == tail.cycle + 1 && head.block <= tail.block)
		return log_bb - tail.block + head.block;
	return UINT64_MAX;
}

bool xfs_lsn_reached(XfsLsn lsn, XfsLsn target)
{
	return lsn.cycle > target.cycle || (lsn.cycle == target.cycle && lsn.block >= target.block);
}

int xfs_log_open(int fd, int *ret_dirfd)
{
	char link[64], target[PATH_MAX], path[PATH_MAX];
	const char *name;
	struct stat st;
	ssize_t n;
	int d;

	if (fstat(fd, &st) < 0)
		return negative_errno();
	/* XFS names its sysfs directory after its block device, as the kernel names that. */
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return negative_errno();
	target[n] = '\0';
	name = strrchr(target, '/');
	name = name ? name + 1 : target;
	if (!name[0] || strchr(name, '.') == name)
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/fs/xfs/%s/log", name);
	d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d < 0)
		return negative_errno();
	*ret_dirfd = d;
	return 0;
}

static int read_lsn(int dirfd, const char *name, XfsLsn *ret)
{
	_cleanup_free_ char *s = NULL;
	int r = read_file_at(dirfd, name, 4096, &s, NULL); /* sysfs says 4096 bytes, whatever it holds */

	return r < 0 ? r : xfs_lsn_parse(s, ret);
}

int xfs_log_read(int log_dirfd, XfsLsn *ret_head, XfsLsn *ret_tail)
{
	int r = read_lsn(log_dirfd, "log_head_lsn", ret_head);

	return r < 0 ? r : read_lsn(log_dirfd, "log_tail_lsn", ret_tail);
}
