/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/dircursor.h"
#include "util/macro.h"

#define DIR_OPEN_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

int dircursor_init(DirCursor *c, int root_fd)
{
	struct stat st;
	int fd;

	*c = (DirCursor){ 0 };
	if (fstat(root_fd, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	c->levels = malloc(64 * sizeof(*c->levels));
	if (!c->levels)
		return -ENOMEM;
	fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		free(c->levels);
		c->levels = NULL;
		return negative_errno();
	}
	c->cap = 64;
	c->depth = 1;
	c->levels[0] = (DirCursorLevel){ .dev = st.st_dev, .ino = st.st_ino, .fd = fd };
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
	DirCursorLevel *top = &c->levels[c->depth - 1];
	struct stat st;
	int fd;

	if (c->depth == c->cap) {
		size_t cap = c->cap * 2;
		DirCursorLevel *nl = realloc(c->levels, cap * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		c->levels = nl;
		c->cap = cap;
		top = &c->levels[c->depth - 1];
	}
	/* O_DIRECTORY is checked before the inode is opened: never a device's open(). */
	fd = openat(top->fd, name, DIR_OPEN_FLAGS);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0) {
		int r = negative_errno();
		(void)close(fd);
		return r;
	}
	if (st.st_dev != c->levels[0].dev) {
		(void)close(fd);
		return -EXDEV;
	}
	c->levels[c->depth++] = (DirCursorLevel){ .dev = st.st_dev, .ino = st.st_ino, .fd = fd };
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
