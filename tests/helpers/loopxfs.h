/* SPDX-License-Identifier: MIT */
/*
 * Loop-backed XFS filesystems for privileged tests: a sparse image in a fresh
 * temporary directory, attached with `losetup --direct-io=on`, formatted with
 * `mkfs.xfs -L LABEL`, optionally mounted. Tools are run with posix_spawn(),
 * never through a shell. Needs root; callers skip their test otherwise.
 *
 * Loop devices and mounts outlive the test process: always pair
 * loopxfs_create*() with loopxfs_destroy() (in a Criterion .fini).
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOPXFS_LABEL_MAX 12 /* XFS labels hold at most 12 bytes */
#define LOOPXFS_DEFAULT_MOUNT_OPTIONS "noatime,nodiratime"

typedef struct LoopXfs {
	char dir[PATH_MAX - 64];   /* temporary directory holding the image and the mountpoint */
	char image[PATH_MAX];      /* <dir>/image */
	char device[64];           /* /dev/loopN, "" when not attached */
	char mountpoint[PATH_MAX]; /* <dir>/mnt, "" when not mounted */
	char label[LOOPXFS_LABEL_MAX + 1];
	uint64_t size_mb;
} LoopXfs;

/*
 * Creates, formats and mounts (LOOPXFS_DEFAULT_MOUNT_OPTIONS) an XFS of
 * @size_mb MiB (>= 300: mkfs.xfs refuses smaller) labelled @label (at most
 * 12 bytes; NULL = a unique "nvlx<hex>" label). The temporary directory is
 * made under teardown_tmpdir("/var/tmp"). On failure everything
 * done so far is undone and -errno (or -EIO when a tool failed) is returned.
 */
int loopxfs_create(LoopXfs *ret, const char *label, uint64_t size_mb);

/* The same with mount options of your own; @mount_options NULL = attach and format, do not mount. */
int loopxfs_create_full(LoopXfs *ret, const char *label, uint64_t size_mb, const char *mount_options);

/* Mounts on <dir>/mnt with @mount_options (NULL = default); the device must not be mounted. */
int loopxfs_mount(LoopXfs *l, const char *mount_options);

/* Unmounts (retrying briefly while busy). A no-op when not mounted. */
int loopxfs_umount(LoopXfs *l);

/* Unmounts @path, retrying for up to 2 s while busy: 0 when unmounted or not a mount point, else -errno. */
int loopxfs_umount_path(const char *path);

/*
 * Unmounts, detaches, removes the image and the directory; safe on a
 * zero-initialised or half-created LoopXfs and when called twice. A busy
 * mount is detached lazily. What cannot be released (the loop device still
 * bound after loopxfs_detach()'s wait, the image or directory not removable)
 * fails the test through teardown_fail(). A LoopXfs made by loopxfs_create*()
 * is destroyed at the test process's exit if no .fini did it (a skip).
 */
void loopxfs_destroy(LoopXfs *l);

/*
 * Detaches @device while it is still bound to @image (by device and inode:
 * once released, the device may be handed to another test at once): runs
 * `losetup -d` and waits, asking again each second for up to 10 s while the
 * kernel still holds the device (a lazily unmounted filesystem, a partition
 * being probed; losetup -d then only sets autoclear). 0 when released, else
 * -errno with what losetup said in @why.
 */
int loopxfs_detach(const char *device, const char *image, char *why, size_t why_len);

/*
 * Runs @argv (NULL-terminated, looked up in PATH) with stdin and stderr
 * inherited; stdout goes to @out (NUL-terminated, trailing newlines removed)
 * if @out is not NULL, else to /dev/null. Returns the exit status (128 + signal
 * number when killed) or -errno when it could not be started.
 */
int loopxfs_spawn(const char *const *argv, char *out, size_t out_len);
/* The same, with stderr in @err (NUL-terminated, trailing newlines removed) if @err is not NULL, else inherited. */
int loopxfs_spawn_capture(const char *const *argv, char *out, size_t out_len, char *err, size_t err_len);
