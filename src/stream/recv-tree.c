/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stream/recv-tree.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/xattr-util.h"

#define RESOLVE_CONFINED (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

typedef struct Applier {
	int root;
	const RecvLimits *lim;
	RecvStats st;
	char *why;
	/* The file the last WRITE went to, kept open for the next one. */
	char open_path[SEND_PATH_MAX + 1];
	int open_fd;
} Applier;

static int openat2_confined(int dirfd, const char *name, uint64_t flags)
{
	struct open_how how = { .flags = flags | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_CONFINED };
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	return fd < 0 ? negative_errno() : (int)fd;
}

/* The directory holding @path (each component confined) and its last component. "" : the root and ".". */
static int open_parent(Applier *a, const char *path, int *ret_fd, const char **ret_leaf)
{
	const char *slash = strrchr(path, '/');
	int fd;

	if (!slash) {
		fd = fcntl(a->root, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return negative_errno();
		*ret_fd = fd;
		*ret_leaf = path[0] ? path : ".";
		return 0;
	}
	{
		_cleanup_free_ char *dir = strndup(path, (size_t)(slash - path));

		if (!dir)
			return -ENOMEM;
		fd = openat2_confined(a->root, dir, O_RDONLY | O_DIRECTORY);
	}
	if (fd < 0)
		return errmsg_set(&a->why, fd, "%s: a component on its way is not a directory of the volume (%s): names "
				  "may not pass through symlinks or leave the volume", path, errno_str(fd));
	*ret_fd = fd;
	*ret_leaf = slash + 1;
	return 0;
}

static void forget_open(Applier *a)
{
	if (a->open_fd >= 0)
		(void)close(a->open_fd);
	a->open_fd = -EBADF;
	a->open_path[0] = '\0';
}

/* The regular file @path, open for writing (the one of the last write if it is the same). */
static int file_fd(Applier *a, const char *path, int *ret)
{
	_cleanup_close_ int dirfd = -EBADF;
	const char *leaf;
	struct stat st;
	int fd, r;

	if (a->open_fd >= 0 && streq(a->open_path, path)) {
		*ret = a->open_fd;
		return 0;
	}
	forget_open(a);
	r = open_parent(a, path, &dirfd, &leaf);
	if (r < 0)
		return r;
	/* Looked at before it is opened: opening a device node or a FIFO would reach its driver or block. */
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return errmsg_set(&a->why, -EINVAL, "%s is not a regular file: a write goes only to one", path);
	fd = openat2_confined(dirfd, leaf, O_RDWR | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return errmsg_set(&a->why, fd, "cannot open %s to write it: %s (only regular files of the volume are "
				  "written, never through a symlink)", path, errno_str(fd));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		(void)close(fd);
		return errmsg_set(&a->why, -EINVAL, "%s is not a regular file: a write goes only to one", path);
	}
	a->open_fd = fd;
	snprintf(a->open_path, sizeof(a->open_path), "%s", path);
	*ret = fd;
	return 0;
}

static int set_meta(Applier *a, const SendRecord *rec)
{
	_cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
	const char *leaf;
	struct stat st;
	XattrTarget t;
	struct timespec ts[2] = { rec->atime, rec->mtime };
	int r;

	r = open_parent(a, rec->path, &dirfd, &leaf);
	if (r < 0)
		return r;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errmsg_set(&a->why, negative_errno(), "cannot set the attributes of %s: %s", rec->path,
				  errno_str(errno));
	/* Never opened: symlinks, and special files (opening a device runs its driver). */
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		fd = openat2_confined(dirfd, leaf, O_RDONLY | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			return errmsg_set(&a->why, fd, "cannot open %s: %s", rec->path, errno_str(fd));
	}
	/* chown first: it clears set-ID bits and capabilities, which come back after it. */
	if (fd >= 0 ? fchown(fd, rec->uid, rec->gid) : fchownat(dirfd, leaf, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW))
		return errmsg_set(&a->why, negative_errno(), "cannot set the owner of %s: %s", rec->path, errno_str(errno));
	if (!S_ISLNK(st.st_mode) && (fd >= 0 ? fchmod(fd, rec->mode) : fchmodat(dirfd, leaf, rec->mode, 0)))
		return errmsg_set(&a->why, negative_errno(), "cannot set the mode of %s: %s", rec->path, errno_str(errno));
	t = (XattrTarget){ .fd = fd, .dirfd = dirfd, .name = leaf };
	r = xattr_blob_apply(&t, rec->xattrs, rec->xattrs_len);
	if (r < 0 && !(r == -EOPNOTSUPP && rec->xattrs_len == 0))
		return errmsg_set(&a->why, r, "cannot set the extended attributes of %s: %s", rec->path, errno_str(r));
	if (fd >= 0 ? futimens(fd, ts) : utimensat(dirfd, leaf, ts, AT_SYMLINK_NOFOLLOW))
		return errmsg_set(&a->why, negative_errno(), "cannot set the times of %s: %s", rec->path, errno_str(errno));
	return 0;
}

/* LINK and RENAME: both paths confined. */
static int two_paths(Applier *a, const SendRecord *rec)
{
	_cleanup_close_ int dirfd = -EBADF, tdir = -EBADF;
	const char *leaf, *tleaf;
	struct stat st;
	int r;

	forget_open(a);
	r = open_parent(a, rec->path, &dirfd, &leaf);
	if (r == 0)
		r = open_parent(a, rec->target, &tdir, &tleaf);
	if (r < 0)
		return r;
	if (rec->type == SEND_LINK) {
		if (fstatat(tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			return errmsg_set(&a->why, -ENOENT, "hard link %s: %s is not a file of the volume", rec->path,
					  rec->target);
		if (linkat(tdir, tleaf, dirfd, leaf, 0) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot link %s to %s: %s", rec->path, rec->target,
					  errno_str(errno));
		return 0;
	}
	/* path -> target; never over anything (a directory or a file there is a stream's error). */
	if (renameat2(dirfd, leaf, tdir, tleaf, RENAME_NOREPLACE) < 0)
		return errmsg_set(&a->why, negative_errno(), "cannot rename %s to %s: %s (a rename never replaces "
				  "what is there)", rec->path, rec->target, errno_str(errno));
	return 0;
}

static int apply(Applier *a, const SendRecord *rec)
{
	_cleanup_close_ int dirfd = -EBADF;
	const char *leaf;
	struct stat st;
	int fd, r;

	switch (rec->type) {
	case SEND_WRITE:
		if (rec->length > a->lim->max_bytes - a->st.data_bytes)
			return errmsg_set(&a->why, -EFBIG, "%s: the stream writes more than the receive may (%" PRIu64
					  " bytes: the volume's size=, or the partition's free space)", rec->path,
					  a->lim->max_bytes);
		if ((r = file_fd(a, rec->path, &fd)) < 0)
			return r;
		if (pwrite_all(fd, rec->data, (size_t)rec->length, rec->offset) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot write %s: %s", rec->path, errno_str(errno));
		a->st.data_bytes += rec->length;
		return 0;
	case SEND_HOLE:
	case SEND_TRUNCATE:
		if ((r = file_fd(a, rec->path, &fd)) < 0)
			return r;
		if (rec->type == SEND_HOLE ? fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)rec->offset,
						       (off_t)rec->length)
					   : ftruncate(fd, (off_t)rec->offset))
			return errmsg_set(&a->why, negative_errno(), "cannot %s %s: %s",
					  rec->type == SEND_HOLE ? "punch a hole in" : "size", rec->path, errno_str(errno));
		return 0;
	case SEND_SETATTR:
		return set_meta(a, rec);
	case SEND_LINK:
	case SEND_RENAME:
		return two_paths(a, rec);
	default:
		break;
	}
	forget_open(a);
	r = open_parent(a, rec->path, &dirfd, &leaf);
	if (r < 0)
		return r;
	switch (rec->type) {
	case SEND_MKDIR:
		if (mkdirat(dirfd, leaf, rec->mode & 0700) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot make directory %s: %s", rec->path, errno_str(errno));
		return 0;
	case SEND_CREATE:
		fd = openat(dirfd, leaf, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot create %s: %s", rec->path, errno_str(errno));
		a->open_fd = fd;
		snprintf(a->open_path, sizeof(a->open_path), "%s", rec->path);
		return 0;
	case SEND_SYMLINK:
		if (symlinkat(rec->target, dirfd, leaf) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot make symlink %s: %s", rec->path, errno_str(errno));
		return 0;
	case SEND_MKNOD:
		if ((S_ISCHR(rec->mode) || S_ISBLK(rec->mode)) && !a->lim->allow_devices)
			return errmsg_set(&a->why, -EPERM, "%s is a device node: receive one only into a volume with -o "
					  "dev=true", rec->path);
		if (mknodat(dirfd, leaf, (rec->mode & S_IFMT) | 0600, (dev_t)rec->rdev) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot make %s: %s", rec->path, errno_str(errno));
		return 0;
	case SEND_UNLINK:
		if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			return errmsg_set(&a->why, S_ISDIR(st.st_mode) ? -EISDIR : negative_errno(),
					  "cannot delete %s: it is a directory, or not there", rec->path);
		if (unlinkat(dirfd, leaf, 0) < 0)
			return errmsg_set(&a->why, negative_errno(), "cannot delete %s: %s", rec->path, errno_str(errno));
		return 0;
	case SEND_RMDIR:
		if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			return errmsg_set(&a->why, -ENOTDIR, "cannot delete directory %s: it is not one, or not there",
					  rec->path);
		r = rm_rf_at(dirfd, leaf);
		if (r < 0)
			return errmsg_set(&a->why, r, "cannot delete directory %s: %s", rec->path, errno_str(r));
		return 0;
	default:
		return errmsg_set(&a->why, -EBADMSG, "a %s record in the middle of the stream",
				  send_record_type_name(rec->type));
	}
}

int recv_tree(SendReader *rd, int root_fd, const RecvLimits *lim, RecvStats *ret_stats, char **reterr_msg)
{
	Applier a = { .root = root_fd, .lim = lim, .open_fd = -EBADF };
	SendRecord rec = { 0 };
	int r;

	for (;;) {
		r = send_reader_next(rd, &rec, reterr_msg);
		if (r <= 0)
			break;
		if (rec.type == SEND_END) {
			send_record_done(&rec);
			r = 0;
			break;
		}
		if (++a.st.records > lim->max_records)
			r = errmsg_set(&a.why, -E2BIG, "the stream has more than %" PRIu64 " records", lim->max_records);
		else
			r = apply(&a, &rec);
		send_record_done(&rec);
		if (r < 0)
			break;
	}
	if (r == 0 && !rd->ended)
		r = errmsg_set(reterr_msg, -EPIPE, "the stream ends before its end record: it was cut short");
	if (r == 0 && a.open_fd >= 0 && fsync(a.open_fd) < 0)
		r = errmsg_set(reterr_msg, negative_errno(), "cannot sync: %s", errno_str(errno));
	forget_open(&a);
	if (r == 0 && syncfs(root_fd) < 0)
		r = errmsg_set(reterr_msg, negative_errno(), "cannot sync the volume's partition: %s", errno_str(errno));
	if (r < 0 && a.why && reterr_msg && !*reterr_msg)
		*reterr_msg = TAKE_PTR(a.why);
	free(a.why);
	a.st.bytes = rd->bytes;
	if (ret_stats)
		*ret_stats = a.st;
	return r;
}
