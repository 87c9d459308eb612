/* SPDX-License-Identifier: MIT */
/*
 * Mounting and reading mounts back from the kernel: libmount for filesystem
 * mounts and /proc/self/mountinfo, the fd-based mount API (open_tree,
 * mount_setattr, move_mount) for volume binds. No policy, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct MountEntry {
	dev_t dev;         /* major:minor of the filesystem */
	char *target;      /* mount point */
	char *root;        /* path inside the filesystem that is mounted there */
	char *fstype;
	char *source;
	char *vfs_options; /* per-mount options, e.g. "rw,noatime,nodiratime" */
	char *fs_options;  /* superblock options, e.g. "rw,attr2,inode64,prjquota" */
	char *optional;    /* propagation fields, e.g. "shared:12 master:3" or "" */
} MountEntry;

void mount_entry_done(MountEntry *e);
void mount_entries_free(MountEntry *e, size_t n);

/* The topmost mount at @target (after canonicalisation of nothing: exact string). -ENOENT if none. */
int mountinfo_find_target(const char *target, MountEntry *ret);

/* The first mount of the whole filesystem on device @dev (root "/"). -ENOENT if none. */
int mountinfo_find_device(dev_t dev, MountEntry *ret);

/* Every mount whose target is strictly below @prefix + "/". */
int mountinfo_list_below(const char *prefix, MountEntry **ret, size_t *ret_n);

/* Parses mountinfo text (for tests and fuzzing); same results as the kernel file. */
int mountinfo_parse_buffer(const char *buf, size_t len, MountEntry **ret, size_t *ret_n);

/* True if the comma-separated @options contain @opt as a whole item. */
bool mount_options_contain(const char *options, const char *opt);

/* True if @optional has a "shared:" tag. */
bool mount_is_shared(const MountEntry *e);

/*
 * Mounts the filesystem on @device at @target with @options (libmount,
 * no helpers, no mtab), then makes the mount private so it never
 * propagates. On failure *reterr_msg says why (libmount's text if it has one).
 */
int mount_filesystem(const char *device, const char *target, const char *fstype, const char *options,
		     char **reterr_msg);

#define MOUNT_BIND_RDONLY (1u << 0)
#define MOUNT_BIND_NOSUID (1u << 1)
#define MOUNT_BIND_NODEV (1u << 2)

/*
 * Bind-mounts the directory @src_fd onto the directory @target_fd with
 * noatime,nodiratime and the MOUNT_BIND_* @flags set on the new mount before
 * it is attached (a classic bind silently drops them and a later remount does
 * not reach propagated copies). Flags not asked for are cleared.
 */
int mount_bind(int src_fd, int target_fd, unsigned flags);

/* umount2(UMOUNT_NOFOLLOW); falls back to a lazy detach if the mount is busy. */
int unmount_path(const char *path);
