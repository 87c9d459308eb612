/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes of one inode as a blob (POSIX ACLs included: they are
 * the system.posix_acl_* attributes): read, compare, apply. An inode is named
 * by an open descriptor (regular files, directories) or by (dirfd, name)
 * without following a symlink: symlinks and special files are never opened
 * (opening a device node runs its driver) but reached through an O_PATH
 * descriptor and /proc/self/fd, which needs /proc.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* XATTR_LIST_MAX and XATTR_SIZE_MAX of Linux: the most one inode can carry. */
#define XATTR_UTIL_LIST_MAX 65536
#define XATTR_UTIL_VALUE_MAX 65536

typedef struct XattrTarget {
	int fd;           /* >= 0: use it; else dirfd + name, never following a symlink at name */
	int dirfd;
	const char *name;
} XattrTarget;

/* Every attribute of @t, sorted by name, as one malloc'd blob (NULL, 0 when there is none). */
int xattr_blob_read(const XattrTarget *t, void **ret_blob, size_t *ret_len);

bool xattr_blob_equal(const void *a, size_t alen, const void *b, size_t blen);

/*
 * Walks @blob from *@pos (0 first), which advances: false at the end or on a
 * malformed entry. @key gets the NUL-terminated name; *@val points into @blob.
 */
bool xattr_blob_next(const void *blob, size_t len, size_t *pos, char *key, size_t keysize, const void **val,
		     size_t *vlen);

/* Makes @t carry exactly the attributes of @blob: removes the others, sets each. */
int xattr_blob_apply(const XattrTarget *t, const void *blob, size_t len);
