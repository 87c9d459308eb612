/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/alloc-util.h"
#include "util/dircursor.h"
#include "util/macro.h"

#define DIR_OPEN_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* statx() as a struct stat plus the mount ID. */
static int stat_at(int dirfd, const char *name, int flags, struct stat *st, uint64_t *ret_mnt_id)
{
	struct statx sx;

	if (statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | STATX_MNT_ID, &sx) < 0)
		return negative_errno();
	*st = (struct stat){
		.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor),
		.st_ino = sx.stx_ino,
		.st_mode = sx.stx_mode,
		.st_nlink = sx.stx_nlink,
		.st_uid = sx.stx_uid,
		.st_gid = sx.stx_gid,
		.st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor),
		.st_size = (off_t)sx.stx_size,
		.st_blksize = (blksize_t)sx.stx_blksize,
		.st_blocks = (blkcnt_t)sx.stx_blocks,
		.st_atim = { sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec },
		.st_mtim = { sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec },
		.st_ctim = { sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec },
	};
	*ret_mnt_id = (sx.stx_mask & STATX_MNT_ID) ? sx.stx_mnt_id : 0;
	return 0;
}

static bool same_mount(const DirCursorLevel *root, const struct stat *st, uint64_t mnt_id)
{
	return st->st_dev == root->dev && mnt_id == root->mnt_id;
}

int dircursor_init(DirCursor *c, int root_fd)
{
	struct stat st;
	uint64_t mnt_id;
	int fd, r;

	*c = (DirCursor){ 0 };
	r = stat_at(root_fd, "", AT_EMPTY_PATH, &st, &mnt_id);
	if (r < 0)
		return r;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (GROW_ARRAY(c->levels, c->cap, 1, 64) < 0)
		return -ENOMEM;
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		r = negative_errno();
		dircursor_done(c);
		return r;
	}
	c->depth = 1;
	c->levels[0] = (DirCursorLevel){ .dev = st.st_dev, .ino = st.st_ino, .mnt_id = mnt_id, .fd = fd };
	return 0;
}

void dircursor_done(DirCursor *c)
{
	for (size_t i = 0; i < c->depth; i++)
		if (c->levels[i].fd >= 0)
			(void)close(c->levels[i].fd);
	free(c->levels);
	*c = (DirCursor){ 0 };
}

int dircursor_fd(const DirCursor *c)
{
	return c->depth > 0 ? c->levels[c->depth - 1].fd : -EBADF;
}

size_t dircursor_depth(const DirCursor *c)
{
	return c->depth > 0 ? c->depth - 1 : 0;
}

int dircursor_push(DirCursor *c, const char *name)
{
	struct stat st;
	uint64_t mnt_id;
	int fd, r;

	if (GROW_ARRAY(c->levels, c->cap, c->depth + 1, 64) < 0)
		return -ENOMEM;
	/* O_DIRECTORY is checked before the inode is opened: never a device's open(). */
	fd = openat(c->levels[c->depth - 1].fd, name, DIR_OPEN_FLAGS);
	if (fd < 0)
		return negative_errno();
	r = stat_at(fd, "", AT_EMPTY_PATH, &st, &mnt_id);
	if (r < 0) {
		(void)close(fd);
		return r;
	}
	if (!same_mount(&c->levels[0], &st, mnt_id)) {
		(void)close(fd);
		return -EXDEV;
	}
	c->levels[c->depth++] = (DirCursorLevel){ .dev = st.st_dev, .ino = st.st_ino, .mnt_id = mnt_id, .fd = fd };
	/* Keep the window: the level DIRCURSOR_OPEN_MAX above is reopened through ".." when needed. */
	if (c->depth > DIRCURSOR_OPEN_MAX) {
		DirCursorLevel *old = &c->levels[c->depth - 1 - DIRCURSOR_OPEN_MAX];
		if (old->fd >= 0 && old != &c->levels[0]) {
			(void)close(old->fd);
			old->fd = -EBADF;
		}
	}
	return 0;
}

int dircursor_stat(const DirCursor *c, const char *name, struct stat *ret)
{
	uint64_t mnt_id;
	int r;

	r = stat_at(dircursor_fd(c), name, 0, ret, &mnt_id);
	if (r < 0)
		return r;
	return same_mount(&c->levels[0], ret, mnt_id) ? 0 : -EXDEV;
}

int dircursor_pop(DirCursor *c)
{
	DirCursorLevel *top, *parent;
	struct stat st;

	if (c->depth <= 1)
		return -EINVAL;
	top = &c->levels[c->depth - 1];
	parent = &c->levels[c->depth - 2];
	if (parent->fd < 0) {
		int fd = openat(top->fd, "..", DIR_OPEN_FLAGS);
		if (fd < 0)
			return negative_errno();
		if (fstat(fd, &st) < 0 || st.st_dev != parent->dev || st.st_ino != parent->ino) {
			(void)close(fd);
			return -ESTALE;
		}
		parent->fd = fd;
	}
	(void)close(top->fd);
	c->depth--;
	return 0;
}
