/* SPDX-License-Identifier: MIT */
/*
 * Compares two directory trees the way a user would check a copy, written
 * independently of the clone engine (paths, lstat, l*xattr, read): names,
 * types, permission bits, owners, sizes, access and modification times in
 * nanoseconds, device numbers, symlink targets, every byte of content, the
 * layout of holes and allocated blocks, extended attributes (POSIX ACLs
 * included) and the hard-link structure (the same inodes are shared on both
 * sides, with the same link counts).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TREECMP_SKIP_ROOT_META 1u /* the roots' own owner, mode, times and attributes may differ */
#define TREECMP_SKIP_DIR_TIMES 2u /* directory times may differ */
#define TREECMP_SKIP_ATIME 4u     /* access times may differ (GNU tar leaves them at extraction time) */
/* XFS's own copies of an ACL (trusted.SGI_ACL_FILE, _DEFAULT, listed to root) are not compared; system.posix_acl_* are. */
#define TREECMP_SKIP_XFS_ACL_ALIAS 8u

/* 0 if equal; else -1 and the first difference in @why. */
int treecmp(const char *a, const char *b, unsigned flags, char *why, size_t why_len);

/* Counts the regular files under @path and how many of their allocated bytes are shared (FIEMAP). */
int tree_shared_bytes(const char *path, uint64_t *ret_allocated, uint64_t *ret_shared);
