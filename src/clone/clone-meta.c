/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone-meta.h"
#include "util/macro.h"
#include "util/xattr-util.h"

int clone_meta_read(int dirfd, const char *name, int fd, const struct stat *st, CloneMeta *ret)
{
	XattrTarget t = { .fd = fd, .dirfd = dirfd, .name = name };
	int r;

	*ret = (CloneMeta){
		.mode = st->st_mode,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.atime = st->st_atim,
		.mtime = st->st_mtim,
	};
	r = xattr_blob_read(&t, &ret->xattrs, &ret->xattrs_len);
	/* A filesystem without extended attributes has none to copy. */
	return r == -EOPNOTSUPP ? 0 : r;
}

bool clone_meta_equal(const CloneMeta *a, const CloneMeta *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid && a->atime.tv_sec == b->atime.tv_sec &&
	       a->atime.tv_nsec == b->atime.tv_nsec && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       xattr_blob_equal(a->xattrs, a->xattrs_len, b->xattrs, b->xattrs_len);
}

int clone_meta_apply(int dirfd, const char *name, int fd, const CloneMeta *m)
{
	XattrTarget t = { .fd = fd, .dirfd = dirfd, .name = name };
	struct timespec ts[2] = { m->atime, m->mtime };
	bool link = S_ISLNK(m->mode);
	int r;

	if (fd >= 0) {
		if (fchown(fd, m->uid, m->gid) < 0 || fchmod(fd, m->mode & 07777) < 0)
			return negative_errno();
	} else {
		if (fchownat(dirfd, name, m->uid, m->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return negative_errno();
		/* A symlink has no permission bits of its own; fchmodat never opens a device node. */
		if (!link && fchmodat(dirfd, name, m->mode & 07777, 0) < 0)
			return negative_errno();
	}
	r = xattr_blob_apply(&t, m->xattrs, m->xattrs_len);
	if (r == -EOPNOTSUPP && m->xattrs_len == 0)
		r = 0;
	if (r < 0)
		return r;
	if (fd >= 0 ? futimens(fd, ts) < 0 : utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	return 0;
}

void clone_meta_done(CloneMeta *m)
{
	free(m->xattrs);
	m->xattrs = NULL;
	m->xattrs_len = 0;
}

void clone_meta_move(CloneMeta *dst, CloneMeta *src)
{
	clone_meta_done(dst);
	*dst = *src;
	src->xattrs = NULL;
	src->xattrs_len = 0;
}
