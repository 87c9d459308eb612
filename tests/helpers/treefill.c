/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "helpers/treefill.h"

void tree_put_bytes(const char *dir, const char *rel, const void *data, size_t len)
{
	char path[1024];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
}

void tree_put(const char *dir, const char *rel, const char *data)
{
	tree_put_bytes(dir, rel, data, strlen(data));
}

void tree_fill_sample(const char *dir)
{
	char p[1024], q[1024];
	int fd;

	snprintf(p, sizeof(p), "%s/sub", dir);
	cr_assert_eq(mkdir(p, 0750), 0);
	snprintf(p, sizeof(p), "%s/sub/deeper", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	tree_put(dir, "top.txt", "top\n");
	tree_put(dir, "sub/deeper/data", "0123456789abcdef");
	snprintf(p, sizeof(p), "%s/top.txt", dir);
	snprintf(q, sizeof(q), "%s/sub/top.link", dir);
	cr_assert_eq(link(p, q), 0);
	snprintf(q, sizeof(q), "%s/sym", dir);
	cr_assert_eq(symlink("sub/deeper/data", q), 0);
	snprintf(q, sizeof(q), "%s/fifo", dir);
	cr_assert_eq(mkfifo(q, 0600), 0);
	cr_assert_eq(setxattr(p, "user.k", "v", 1, 0), 0);
	cr_assert_eq(chown(p, 70, 80), 0);
	snprintf(p, sizeof(p), "%s/sparse", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_eq(pwrite(fd, "end", 3, 200 << 20), 3);
	close(fd);
}

