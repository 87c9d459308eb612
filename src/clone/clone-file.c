/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone-file.h"
#include "util/alloc-util.h"
#include "util/io-util.h"
#include "util/macro.h"

int clone_file_reflink(int src, int dst)
{
	/* FICLONE to a longer destination needs an aligned length: start from empty. */
	if (ftruncate(dst, 0) < 0)
		return negative_errno();
	if (ioctl(dst, FICLONE, src) < 0) {
		if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL)
			return -EOPNOTSUPP;
		return negative_errno();
	}
	return 0;
}

/*
 * [in, end) of @src to the same offsets of @dst with pread/pwrite: where
 * copy_file_range() does not reach (two filesystems: the kernel answers EXDEV).
 */
static int copy_range_rw(int src, int dst, off_t in, off_t end)
{
	_cleanup_free_ char *buf = malloc(1 << 20);

	if (!buf)
		return -ENOMEM;
	while (in < end) {
		ssize_t n = pread(src, buf, (size_t)(end - in < (1 << 20) ? end - in : (1 << 20)), in);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			break; /* the source shrank under us */
		int r = pwrite_all(dst, buf, (size_t)n, (uint64_t)in);
		if (r < 0)
			return r;
		in += n;
	}
	return 0;
}

int clone_file_copy(int src, int dst)
{
	struct stat st;
	off_t pos = 0;
	bool rw = false;

	if (fstat(src, &st) < 0)
		return negative_errno();
	if (ftruncate(dst, 0) < 0)
		return negative_errno();
	while (pos < st.st_size) {
		off_t data = lseek(src, pos, SEEK_DATA), hole;

		if (data < 0) {
			if (errno == ENXIO)
				break; /* only a hole is left */
			return negative_errno();
		}
		hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return negative_errno();
		if (hole > st.st_size)
			hole = st.st_size;
		for (off_t in = data, out = data; in < hole;) {
			ssize_t n;

			if (rw) {
				int r = copy_range_rw(src, dst, in, hole);
				if (r < 0)
					return r;
				break;
			}
			n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
			if (n < 0) {
				if (errno == EINTR)
					continue;
				if (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL) {
					rw = true;
					continue;
				}
				return negative_errno();
			}
			if (n == 0)
				break; /* the source shrank under us */
		}
		pos = hole;
	}
	if (ftruncate(dst, st.st_size) < 0)
		return negative_errno();
	return 0;
}

typedef struct Ext {
	uint64_t logical, physical, length;
	uint32_t flags;
} Ext;

typedef struct ExtList {
	Ext *v;
	size_t n, cap;
} ExtList;

int clone_file_first_block(int fd, uint64_t *ret)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext;
	} f = { .fm = { .fm_length = FIEMAP_MAX_OFFSET, .fm_extent_count = 1 } };

	*ret = 0;
	if (ioctl(fd, FS_IOC_FIEMAP, &f.fm) < 0)
		return negative_errno();
	if (f.fm.fm_mapped_extents == 1 && !(f.ext.fe_flags & (FIEMAP_EXTENT_UNWRITTEN | FIEMAP_EXTENT_UNKNOWN |
								FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_DELALLOC)))
		*ret = f.ext.fe_physical;
	return 0;
}

/* Every extent overlapping [start, end). */
static int read_extents(int fd, uint64_t start, uint64_t end, ExtList *l)
{
	_cleanup_free_ struct fiemap *fm = NULL;
	uint64_t pos = start;

	l->n = 0;
	fm = malloc(sizeof(*fm) + CLONE_FILE_FIEMAP_BATCH * sizeof(struct fiemap_extent));
	if (!fm)
		return -ENOMEM;
	while (pos < end) {
		struct fiemap_extent *last;

		memset(fm, 0, sizeof(*fm));
		fm->fm_start = pos;
		fm->fm_length = end - pos;
		fm->fm_extent_count = CLONE_FILE_FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0)
			return negative_errno();
		if (fm->fm_mapped_extents == 0)
			break;
		if (GROW_ARRAY(l->v, l->cap, l->n + fm->fm_mapped_extents, CLONE_FILE_FIEMAP_BATCH) < 0)
			return -ENOMEM;
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];
			l->v[l->n++] = (Ext){ e->fe_logical, e->fe_physical, e->fe_length, e->fe_flags };
		}
		last = &fm->fm_extents[fm->fm_mapped_extents - 1];
		if (last->fe_flags & FIEMAP_EXTENT_LAST)
			break;
		if (last->fe_logical + last->fe_length <= pos)
			return -EIO; /* no progress: a broken FIEMAP */
		pos = last->fe_logical + last->fe_length;
	}
	return 0;
}

enum { ST_HOLE, ST_DATA, ST_OPAQUE };

#define OPAQUE_FLAGS                                                                                   \
	(FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED | \
	 FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_DATA_TAIL)

/* The extent of @l covering @off, moving the cursor *i forward (offsets only grow). */
static const Ext *extent_at(const ExtList *l, size_t *i, uint64_t off)
{
	while (*i < l->n && l->v[*i].logical + l->v[*i].length <= off)
		(*i)++;
	if (*i < l->n && l->v[*i].logical <= off)
		return &l->v[*i];
	return NULL;
}

static int state_of(const Ext *e)
{
	if (!e || (e->flags & FIEMAP_EXTENT_UNWRITTEN))
		return ST_HOLE; /* reads as zeros */
	if (e->flags & OPAQUE_FLAGS)
		return ST_OPAQUE;
	return ST_DATA;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

typedef struct Pending {
	uint64_t off, len;
	bool hole, any;
	CloneFileRangeCallback cb;
	void *userdata;
} Pending;

static int pending_add(Pending *p, uint64_t off, uint64_t len, bool hole)
{
	int r;

	if (p->any && p->hole == hole && p->off + p->len == off) {
		p->len += len;
		return 0;
	}
	if (p->any) {
		r = p->cb(p->userdata, p->off, p->len, p->hole);
		if (r < 0)
			return r;
	}
	*p = (Pending){ .off = off, .len = len, .hole = hole, .any = true, .cb = p->cb, .userdata = p->userdata };
	return 0;
}

static int diff_window(const ExtList *s, const ExtList *c, uint64_t w0, uint64_t w1, Pending *p)
{
	_cleanup_free_ uint64_t *pts = NULL;
	size_t n = 0, si = 0, ci = 0;

	pts = malloc((2 * (s->n + c->n) + 2) * sizeof(*pts));
	if (!pts)
		return -ENOMEM;
	pts[n++] = w0;
	pts[n++] = w1;
	for (int k = 0; k < 2; k++) {
		const ExtList *l = k ? c : s;
		for (size_t i = 0; i < l->n; i++) {
			uint64_t a = l->v[i].logical, b = l->v[i].logical + l->v[i].length;
			if (a > w0 && a < w1)
				pts[n++] = a;
			if (b > w0 && b < w1)
				pts[n++] = b;
		}
	}
	qsort(pts, n, sizeof(*pts), cmp_u64);
	for (size_t k = 0; k + 1 < n; k++) {
		uint64_t a = pts[k], b = pts[k + 1];
		const Ext *se, *ce;
		int ss, cs, r = 0;

		if (a == b)
			continue;
		se = extent_at(s, &si, a);
		ce = extent_at(c, &ci, a);
		ss = state_of(se);
		cs = state_of(ce);
		if (ss == ST_HOLE) {
			if (cs != ST_HOLE)
				r = pending_add(p, a, b - a, true);
		} else if (ss == ST_OPAQUE || cs != ST_DATA ||
			   se->physical + (a - se->logical) != ce->physical + (a - ce->logical))
			r = pending_add(p, a, b - a, false);
		if (r < 0)
			return r;
	}
	return 0;
}

int clone_file_diff(int src, uint64_t src_size, int dst, CloneFileRangeCallback cb, void *userdata)
{
	ExtList s = { 0 }, c = { 0 };
	Pending p = { .cb = cb, .userdata = userdata };
	int r = 0;

	for (uint64_t w0 = 0; w0 < src_size && r == 0; w0 += CLONE_FILE_DIFF_WINDOW) {
		uint64_t w1 = src_size - w0 > CLONE_FILE_DIFF_WINDOW ? w0 + CLONE_FILE_DIFF_WINDOW : src_size;

		r = read_extents(src, w0, w1, &s);
		if (r == 0 && dst >= 0)
			r = read_extents(dst, w0, w1, &c);
		if (r == 0)
			r = diff_window(&s, &c, w0, w1, &p);
	}
	if (r == 0 && p.any)
		r = cb(userdata, p.off, p.len, p.hole);
	free(s.v);
	free(c.v);
	return r;
}

int clone_file_probe_reflink(int dirfd)
{
	_cleanup_close_ int a = -EBADF, b = -EBADF;

	a = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (a < 0)
		return negative_errno();
	b = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (b < 0)
		return negative_errno();
	if (write(a, "nvmevol", 7) != 7)
		return errno ? negative_errno() : -EIO;
	if (ioctl(b, FICLONE, a) == 0)
		return 1;
	if (errno == EOPNOTSUPP || errno == ENOTTY || errno == EINVAL || errno == EXDEV)
		return 0;
	return negative_errno();
}
