/* SPDX-License-Identifier: MIT */
/*
 * The metadata a clone copies for every inode: owner, permission bits,
 * access and modification times, and extended attributes (POSIX ACLs
 * included). Inodes are named by an open descriptor (regular files,
 * directories) or by (dirfd, name) without following a symlink; symlinks and
 * special files are never opened. Status change and birth times cannot be set
 * by anyone and are not copied; neither are inode flags (chattr), like cp -a.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

typedef struct CloneMeta {
	mode_t mode; /* type and permission bits */
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime;
	void *xattrs; /* xattr-util blob, NULL when none */
	size_t xattrs_len;
} CloneMeta;

/* Fills @ret from @st and the attributes of the inode (@fd if >= 0, else @dirfd/@name). */
int clone_meta_read(int dirfd, const char *name, int fd, const struct stat *st, CloneMeta *ret);
bool clone_meta_equal(const CloneMeta *a, const CloneMeta *b);
/*
 * Applies @m in the order that keeps it: owner (chown clears set-ID bits and
 * file capabilities), permission bits, attributes, then times.
 */
int clone_meta_apply(int dirfd, const char *name, int fd, const CloneMeta *m);
void clone_meta_done(CloneMeta *m);
/* Moves @src into *@dst (which is emptied first); @src becomes empty. */
void clone_meta_move(CloneMeta *dst, CloneMeta *src);
