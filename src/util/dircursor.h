/* SPDX-License-Identifier: MIT */
/*
 * A position in a directory tree for walks of any depth with a bounded number
 * of open descriptors: the stack remembers (dev, ino) of every level but keeps
 * only the deepest DIRCURSOR_OPEN_MAX levels open. Going down opens a child
 * with O_NOFOLLOW|O_DIRECTORY and refuses a mount inside the tree (another
 * device, or another mount ID: a bind mount of the same filesystem); going up
 * to a level whose descriptor was closed reopens it through ".." and checks it
 * is still the same directory (-ESTALE if the tree was reshaped under the walk).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define DIRCURSOR_OPEN_MAX 16

typedef struct DirCursorLevel {
	dev_t dev;
	ino_t ino;
	uint64_t mnt_id; /* 0 when the kernel does not say (before Linux 5.8) */
	int fd; /* -EBADF when closed to stay within DIRCURSOR_OPEN_MAX */
} DirCursorLevel;

typedef struct DirCursor {
	DirCursorLevel *levels;
	size_t depth; /* levels in use: 1 = at the root */
	size_t cap;
} DirCursor;

/* Starts at a duplicate of @root_fd, a directory. */
int dircursor_init(DirCursor *c, int root_fd);
void dircursor_done(DirCursor *c);

/* The directory the cursor is at (borrowed; valid until the next push or pop). */
int dircursor_fd(const DirCursor *c);
/* 0 at the root. */
size_t dircursor_depth(const DirCursor *c);

/*
 * Enters the subdirectory @name: -ENOTDIR/-ELOOP for anything but a real
 * directory (a symlink is never followed), -EXDEV for a mount point.
 */
int dircursor_push(DirCursor *c, const char *name);
/*
 * lstat() of an entry of the current directory; -EXDEV if it is a mount
 * point (what it shows is another filesystem or another mount).
 */
int dircursor_stat(const DirCursor *c, const char *name, struct stat *ret);

/* Back to the parent; -EINVAL at the root, -ESTALE if the parent is not the one entered from. */
int dircursor_pop(DirCursor *c);
