/* SPDX-License-Identifier: MIT */
/*
 * A directory tree as a POSIX pax archive (ustar headers, each entry after
 * an extended header) that GNU tar and bsdtar restore: path and link names
 * of any length and encoding, owners as numbers (no user or group names),
 * permission bits with set-ID and sticky bits, atime and mtime to the
 * nanosecond, extended attributes as SCHILY.xattr.NAME (security.capability
 * included), POSIX ACLs as SCHILY.acl.access and SCHILY.acl.default (the
 * text GNU tar --acls and bsdtar read), hard links, symlinks, FIFOs, device
 * nodes, and files with holes in GNU's sparse format 1.0 (the holes stay
 * holes: SEEK_DATA/SEEK_HOLE). Sockets cannot be archived and are counted.
 *
 * The walk never follows a symlink or crosses a mount (dircursor), opens
 * only regular files and directories, keeps a bounded number of descriptors,
 * and lists each directory in name order, so the same tree gives the same
 * archive. Entries are named ./NAME; the first is ./, the root itself.
 */
#pragma once

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* The walk's memory: names of the directories being walked, first paths of hard-linked files. */
#define TAR_WRITE_MEM_MAX (512ull << 20)

typedef struct TarWriteStats {
	uint64_t entries;
	uint64_t bytes;   /* of file data, holes not counted */
	uint64_t sockets; /* skipped */
} TarWriteStats;

/* Writes the tree @dirfd to @out. @stop (may be NULL) is polled: once set, -EINTR. */
int tar_write_tree(int dirfd, int out, volatile sig_atomic_t *stop, TarWriteStats *ret_stats, char **reterr_msg);

/* Where the archive goes instead of an fd (a compressor): takes all @len bytes, 0 or -errno. */
typedef int (*TarWriteFn)(void *userdata, const void *data, size_t len);
int tar_write_tree_to(int dirfd, TarWriteFn fn, void *userdata, volatile sig_atomic_t *stop, TarWriteStats *ret_stats,
		      char **reterr_msg);
