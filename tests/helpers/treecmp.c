/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "treecmp.h"

typedef struct InoPair {
	ino_t a, b;
} InoPair;

typedef struct Cmp {
	unsigned flags;
	char *why;
	size_t why_len;
	InoPair *pairs;
	size_t n_pairs, cap_pairs;
} Cmp;

static int differ(Cmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int differ(Cmp *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, c->why_len, fmt, ap);
	va_end(ap);
	return -1;
}

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Sorted, NUL-separated attribute names of @path (not following a symlink). */
static char *xattr_names(const char *path, ssize_t *ret_len)
{
	ssize_t n = llistxattr(path, NULL, 0);
	char *buf;

	if (n < 0)
		return NULL;
	buf = calloc(1, (size_t)n + 1);
	if (!buf)
		return NULL;
	n = llistxattr(path, buf, (size_t)n);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	*ret_len = n;
	return buf;
}

static int cmp_xattrs(Cmp *c, const char *pa, const char *pb)
{
	ssize_t la = 0, lb = 0;
	char *na = xattr_names(pa, &la), *nb = xattr_names(pb, &lb);
	char *va[256], *vb[256];
	size_t ca = 0, cb = 0;
	int r = 0;

	if (!na || !nb) {
		r = differ(c, "cannot list attributes of %s or %s: %s", pa, pb, strerror(errno));
		goto out;
	}
	for (ssize_t p = 0; p < la && ca < 256; p += (ssize_t)strlen(na + p) + 1)
		if (!((c->flags & TREECMP_SKIP_XFS_ACL_ALIAS) && strncmp(na + p, "trusted.SGI_ACL_", 16) == 0))
			va[ca++] = na + p;
	for (ssize_t p = 0; p < lb && cb < 256; p += (ssize_t)strlen(nb + p) + 1)
		if (!((c->flags & TREECMP_SKIP_XFS_ACL_ALIAS) && strncmp(nb + p, "trusted.SGI_ACL_", 16) == 0))
			vb[cb++] = nb + p;
	qsort(va, ca, sizeof(*va), cmp_str);
	qsort(vb, cb, sizeof(*vb), cmp_str);
	if (ca != cb) {
		r = differ(c, "%s has %zu attributes, %s has %zu", pa, ca, pb, cb);
		goto out;
	}
	for (size_t i = 0; i < ca && r == 0; i++) {
		char xa[65536], xb[65536];
		ssize_t sa, sb;

		if (strcmp(va[i], vb[i]) != 0) {
			r = differ(c, "attribute %s of %s is %s in %s", va[i], pa, vb[i], pb);
			break;
		}
		sa = lgetxattr(pa, va[i], xa, sizeof(xa));
		sb = lgetxattr(pb, vb[i], xb, sizeof(xb));
		if (sa < 0 || sb < 0 || sa != sb || memcmp(xa, xb, (size_t)sa) != 0)
			r = differ(c, "attribute %s differs between %s and %s", va[i], pa, pb);
	}
out:
	free(na);
	free(nb);
	return r;
}

/* Written extents as merged [start, length] pairs (FIEMAP with a sync first). */
static int written_ranges(int fd, uint64_t **ret, size_t *ret_n)
{
	struct fiemap *fm = malloc(sizeof(*fm) + 256 * sizeof(struct fiemap_extent));
	uint64_t *v = NULL, pos = 0;
	size_t n = 0, cap = 0;
	bool last = false;

	while (fm && !last) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = pos;
		fm->fm_length = ~0ull - pos;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = 256;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			free(fm);
			free(v);
			return -1;
		}
		if (fm->fm_mapped_extents == 0)
			break;
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];
			last = e->fe_flags & FIEMAP_EXTENT_LAST;
			pos = e->fe_logical + e->fe_length;
			if (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
				continue;
			if (n > 0 && v[2 * n - 2] + v[2 * n - 1] == e->fe_logical) {
				v[2 * n - 1] += e->fe_length;
				continue;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				v = realloc(v, cap * 2 * sizeof(*v));
			}
			v[2 * n] = e->fe_logical;
			v[2 * n + 1] = e->fe_length;
			n++;
		}
	}
	free(fm);
	*ret = v;
	*ret_n = n;
	return 0;
}

static int cmp_content(Cmp *c, const char *pa, const char *pb, off_t size)
{
	int fa = open(pa, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), fb = open(pb, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	static char ba[1 << 16], bb[1 << 16];
	uint64_t *ra = NULL, *rb = NULL;
	size_t na = 0, nb = 0;
	int r = 0;

	if (fa < 0 || fb < 0) {
		r = differ(c, "cannot open %s or %s: %s", pa, pb, strerror(errno));
		goto out;
	}
	/* The same holes: the written extents (not holes, not unwritten preallocation) cover the same ranges. */
	if (written_ranges(fa, &ra, &na) < 0 || written_ranges(fb, &rb, &nb) < 0) {
		r = differ(c, "FIEMAP of %s or %s failed: %s", pa, pb, strerror(errno));
		goto out;
	}
	if (na != nb || (na && memcmp(ra, rb, na * 2 * sizeof(*ra)) != 0)) {
		r = differ(c, "%s has %zu written ranges, %s %zu (first at %llu+%llu vs %llu+%llu)", pa, na, pb, nb,
			   na ? (unsigned long long)ra[0] : 0, na ? (unsigned long long)ra[1] : 0,
			   nb ? (unsigned long long)rb[0] : 0, nb ? (unsigned long long)rb[1] : 0);
		goto out;
	}
	/* Outside them both read as zeros: compare the bytes inside them. */
	for (size_t i = 0; i < na && r == 0; i++) {
		off_t end = (off_t)(ra[2 * i] + ra[2 * i + 1]) < size ? (off_t)(ra[2 * i] + ra[2 * i + 1]) : size;

		for (off_t off = (off_t)ra[2 * i]; off < end && r == 0;) {
			size_t want = (size_t)(end - off) < sizeof(ba) ? (size_t)(end - off) : sizeof(ba);
			ssize_t xa = pread(fa, ba, want, off), xb = pread(fb, bb, want, off);
			if (xa <= 0 || xa != xb || memcmp(ba, bb, (size_t)xa) != 0)
				r = differ(c, "content of %s and %s differs near offset %lld", pa, pb, (long long)off);
			off += xa > 0 ? xa : 1;
		}
	}
out:
	free(ra);
	free(rb);
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return r;
}

/* The same inode on side a must be the same inode on side b, and the other way round. */
static int cmp_links(Cmp *c, const char *pa, ino_t a, ino_t b)
{
	for (size_t i = 0; i < c->n_pairs; i++) {
		if (c->pairs[i].a == a && c->pairs[i].b != b)
			return differ(c, "%s is not linked like its source", pa);
		if (c->pairs[i].b == b && c->pairs[i].a != a)
			return differ(c, "%s is linked to an inode its source is not", pa);
		if (c->pairs[i].a == a)
			return 0;
	}
	if (c->n_pairs == c->cap_pairs) {
		size_t cap = c->cap_pairs ? c->cap_pairs * 2 : 64;
		InoPair *np = realloc(c->pairs, cap * sizeof(*np));
		if (!np)
			return differ(c, "out of memory");
		c->pairs = np;
		c->cap_pairs = cap;
	}
	c->pairs[c->n_pairs++] = (InoPair){ a, b };
	return 0;
}

static int cmp_entry(Cmp *c, const char *pa, const char *pb, bool root);

static char **list_dir(const char *path, size_t *ret_n)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			v = realloc(v, cap * sizeof(*v));
		}
		v[n++] = strdup(de->d_name);
	}
	closedir(d);
	/* qsort's base is declared nonnull: an empty directory still gets an array. */
	if (!v)
		return *ret_n = 0, calloc(1, sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_str);
	*ret_n = n;
	return v;
}

static int cmp_dir(Cmp *c, const char *pa, const char *pb)
{
	size_t na = 0, nb = 0;
	char **la = list_dir(pa, &na), **lb = list_dir(pb, &nb);
	int r = 0;

	if (!la || !lb)
		r = differ(c, "cannot list %s or %s: %s", pa, pb, strerror(errno));
	else if (na != nb)
		r = differ(c, "%s has %zu entries, %s has %zu", pa, na, pb, nb);
	for (size_t i = 0; r == 0 && i < na; i++) {
		char *ca = NULL, *cb = NULL;

		if (strcmp(la[i], lb[i]) != 0) {
			r = differ(c, "%s has %s where %s has %s", pa, la[i], pb, lb[i]);
			break;
		}
		if (asprintf(&ca, "%s/%s", pa, la[i]) < 0 || asprintf(&cb, "%s/%s", pb, lb[i]) < 0)
			r = differ(c, "out of memory");
		else
			r = cmp_entry(c, ca, cb, false);
		free(ca);
		free(cb);
	}
	for (size_t i = 0; la && i < na; i++)
		free(la[i]);
	for (size_t i = 0; lb && i < nb; i++)
		free(lb[i]);
	free(la);
	free(lb);
	return r;
}

static int cmp_entry(Cmp *c, const char *pa, const char *pb, bool root)
{
	struct stat a, b;
	bool meta = !(root && (c->flags & TREECMP_SKIP_ROOT_META));
	bool times;

	if (lstat(pa, &a) < 0 || lstat(pb, &b) < 0)
		return differ(c, "cannot stat %s or %s: %s", pa, pb, strerror(errno));
	times = meta && !(S_ISDIR(a.st_mode) && (c->flags & TREECMP_SKIP_DIR_TIMES));
	if ((a.st_mode & S_IFMT) != (b.st_mode & S_IFMT))
		return differ(c, "%s is of type %o, %s of %o", pa, a.st_mode & S_IFMT, pb, b.st_mode & S_IFMT);
	if (meta && (a.st_mode != b.st_mode || a.st_uid != b.st_uid || a.st_gid != b.st_gid))
		return differ(c, "%s is %o %u:%u, %s is %o %u:%u", pa, a.st_mode, a.st_uid, a.st_gid, pb, b.st_mode,
			      b.st_uid, b.st_gid);
	if (times && (a.st_mtim.tv_sec != b.st_mtim.tv_sec || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec))
		return differ(c, "mtime of %s %lld.%09ld, of %s %lld.%09ld", pa, (long long)a.st_mtim.tv_sec,
			      a.st_mtim.tv_nsec, pb, (long long)b.st_mtim.tv_sec, b.st_mtim.tv_nsec);
	if (times && !(c->flags & TREECMP_SKIP_ATIME) && (a.st_atim.tv_sec != b.st_atim.tv_sec || a.st_atim.tv_nsec != b.st_atim.tv_nsec))
		return differ(c, "atime of %s %lld.%09ld, of %s %lld.%09ld", pa, (long long)a.st_atim.tv_sec,
			      a.st_atim.tv_nsec, pb, (long long)b.st_atim.tv_sec, b.st_atim.tv_nsec);
	if (!S_ISDIR(a.st_mode) && (a.st_size != b.st_size || a.st_nlink != b.st_nlink))
		return differ(c, "%s has size %lld and %lu links, %s %lld and %lu", pa, (long long)a.st_size,
			      (unsigned long)a.st_nlink, pb, (long long)b.st_size, (unsigned long)b.st_nlink);
	if (S_ISDIR(a.st_mode) && a.st_nlink != b.st_nlink)
		return differ(c, "%s has %lu links, %s %lu", pa, (unsigned long)a.st_nlink, pb, (unsigned long)b.st_nlink);
	if ((S_ISCHR(a.st_mode) || S_ISBLK(a.st_mode)) && a.st_rdev != b.st_rdev)
		return differ(c, "%s and %s are different devices", pa, pb);
	if (meta && cmp_xattrs(c, pa, pb) < 0)
		return -1;
	if (!S_ISDIR(a.st_mode) && a.st_nlink > 1 && cmp_links(c, pa, a.st_ino, b.st_ino) < 0)
		return -1;
	if (S_ISLNK(a.st_mode)) {
		char ta[PATH_MAX], tb[PATH_MAX];
		ssize_t na = readlink(pa, ta, sizeof(ta)), nb = readlink(pb, tb, sizeof(tb));
		if (na < 0 || na != nb || memcmp(ta, tb, (size_t)na) != 0)
			return differ(c, "symlinks %s and %s point to different targets", pa, pb);
	}
	if (S_ISREG(a.st_mode)) {
		/*
		 * Holes are compared exactly below; allocated blocks may differ by what XFS
		 * reserves for later writes (preallocation, copy-on-write extents), never by a filled hole.
		 */
		if (b.st_blocks > a.st_blocks + 2048)
			return differ(c, "%s has %lld blocks, %s %lld", pa, (long long)a.st_blocks, pb, (long long)b.st_blocks);
		return cmp_content(c, pa, pb, a.st_size);
	}
	if (S_ISDIR(a.st_mode))
		return cmp_dir(c, pa, pb);
	return 0;
}

int treecmp(const char *a, const char *b, unsigned flags, char *why, size_t why_len)
{
	Cmp c = { .flags = flags, .why = why, .why_len = why_len };
	int r;

	why[0] = '\0';
	r = cmp_entry(&c, a, b, true);
	free(c.pairs);
	return r;
}

static int shared_walk(const char *path, uint64_t *alloc, uint64_t *shared)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		size_t n = 0;
		char **v = list_dir(path, &n);
		int r = 0;

		if (!v)
			return -errno;
		for (size_t i = 0; i < n; i++) {
			char *p = NULL;
			if (r == 0 && asprintf(&p, "%s/%s", path, v[i]) >= 0)
				r = shared_walk(p, alloc, shared);
			free(p);
			free(v[i]);
		}
		free(v);
		return r;
	}
	if (S_ISREG(st.st_mode)) {
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct fiemap *fm;
		uint64_t pos = 0;
		bool last = false;

		if (fd < 0)
			return -errno;
		fm = malloc(sizeof(*fm) + 128 * sizeof(struct fiemap_extent));
		while (!last && pos < (uint64_t)st.st_size) {
			memset(fm, 0, sizeof(*fm));
			fm->fm_start = pos;
			fm->fm_length = ~0ull - pos;
			fm->fm_flags = FIEMAP_FLAG_SYNC;
			fm->fm_extent_count = 128;
			if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0 || fm->fm_mapped_extents == 0)
				break;
			for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
				struct fiemap_extent *e = &fm->fm_extents[i];
				*alloc += e->fe_length;
				if (e->fe_flags & FIEMAP_EXTENT_SHARED)
					*shared += e->fe_length;
				if (e->fe_flags & FIEMAP_EXTENT_LAST)
					last = true;
				pos = e->fe_logical + e->fe_length;
			}
		}
		free(fm);
		close(fd);
	}
	return 0;
}

int tree_shared_bytes(const char *path, uint64_t *ret_allocated, uint64_t *ret_shared)
{
	*ret_allocated = *ret_shared = 0;
	return shared_walk(path, ret_allocated, ret_shared);
}
