/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/acl-text.h"
#include "cli/tar-write.h"
#include "util/alloc-util.h"
#include "util/dircursor.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/u64map.h"
#include "util/xattr-util.h"

#define BLOCK 512
#define OUT_BUF (256u << 10)
#define ACL_XATTR_ACCESS "system.posix_acl_access"
#define ACL_XATTR_DEFAULT "system.posix_acl_default"

typedef struct Buf {
	char *p;
	size_t n, cap;
} Buf;

typedef struct Level {
	char **names;
	size_t n, next;
	size_t path_len; /* of Writer.path when this directory was entered */
} Level;

typedef struct Writer {
	int out;
	TarWriteFn fn; /* if set, instead of out */
	void *fn_data;
	volatile sig_atomic_t *stop;
	char *obuf;
	size_t olen;
	DirCursor c;
	Level *levels;
	size_t depth, cap;
	Buf path;     /* "./a/b/" of the current directory */
	Buf pax;      /* the extended header being built */
	U64Map links; /* inode -> 1 + index in first_paths */
	char **first_paths;
	size_t n_first, cap_first;
	uint64_t mem;
	TarWriteStats st;
	char *why;
} Writer;

static int buf_add(Buf *b, const void *data, size_t len)
{
	if (GROW_ARRAY(b->p, b->cap, b->n + len + 1, 256) < 0)
		return -ENOMEM;
	memcpy(b->p + b->n, data, len);
	b->n += len;
	b->p[b->n] = '\0';
	return 0;
}

static int out_flush(Writer *w)
{
	int r;

	if (w->stop && *w->stop)
		return -EINTR;
	r = !w->olen ? 0 : w->fn ? w->fn(w->fn_data, w->obuf, w->olen) : write_all(w->out, w->obuf, w->olen);
	w->olen = 0;
	return r;
}

static int out_write(Writer *w, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		size_t k = len < OUT_BUF - w->olen ? len : OUT_BUF - w->olen;
		int r;

		memcpy(w->obuf + w->olen, p, k);
		w->olen += k;
		p += k;
		len -= k;
		if (w->olen == OUT_BUF && (r = out_flush(w)) < 0)
			return r;
	}
	return 0;
}

static int out_pad(Writer *w, uint64_t written)
{
	static const char zeros[BLOCK];
	size_t rest = (size_t)((BLOCK - written % BLOCK) % BLOCK);

	return rest ? out_write(w, zeros, rest) : 0;
}

/*
 * The numbers of headers and records are written by hand, not with snprintf: they are several per
 * entry, and snprintf was 70 % of the export's CPU on a tree of small files (callgrind).
 */

/* @v in octal, zero-padded, in a field of @len bytes ending in NUL; false if it does not fit. */
static bool octal(char *field, size_t len, uint64_t v)
{
	for (size_t i = len - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
	field[len - 1] = '\0';
	return v == 0;
}

/* @v in decimal at @out (room for 20 digits), no NUL; its length. */
static size_t decimal(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

/* At most @len - 1 bytes of @s into a zeroed field of @len bytes (as snprintf("%s") would). */
static void field_str(char *field, size_t len, const char *s)
{
	memcpy(field, s, strnlen(s, len - 1));
}

/* One pax record, "LEN KEY=VALUE\n", LEN counting itself. */
static int pax_add(Writer *w, const char *key, const void *val, size_t vlen)
{
	size_t body = strlen(key) + vlen + 3, len = body + 1, nl; /* " ", "=", "\n" */
	char num[24];

	/* The length counts its own digits. */
	while ((nl = decimal(num, len)) + body != len)
		len = nl + body;
	if (buf_add(&w->pax, num, nl) < 0 || buf_add(&w->pax, " ", 1) < 0 ||
	    buf_add(&w->pax, key, strlen(key)) < 0 || buf_add(&w->pax, "=", 1) < 0 || buf_add(&w->pax, val, vlen) < 0 ||
	    buf_add(&w->pax, "\n", 1) < 0)
		return -ENOMEM;
	return 0;
}

static int pax_add_str(Writer *w, const char *key, const char *val)
{
	return pax_add(w, key, val, strlen(val));
}

static int pax_add_u64(Writer *w, const char *key, uint64_t v)
{
	char num[24];

	return pax_add(w, key, num, decimal(num, v));
}

/* A time as pax writes it: seconds, a dot, nine digits of nanoseconds; "-1.5" is half a second before -1. */
static int pax_add_time(Writer *w, const char *key, const struct timespec *ts)
{
	char v[48];
	size_t n = 0;
	long ns = ts->tv_nsec;

	if (ts->tv_sec < 0) {
		v[n++] = '-';
		/* -S.N with N > 0 is -(S+1) + N: the magnitude is -(S+1) seconds and 1e9 - N. */
		n += decimal(v + n, (uint64_t)0 - (uint64_t)ts->tv_sec - (ns > 0));
		ns = ns > 0 ? 1000000000L - ns : 0;
	} else
		n += decimal(v + n, (uint64_t)ts->tv_sec);
	v[n++] = '.';
	for (int i = 8; i >= 0; i--, ns /= 10)
		v[n + (size_t)i] = (char)('0' + ns % 10);
	return pax_add(w, key, v, n + 9);
}

static int add_xattrs(Writer *w, int fd, const char *name)
{
	XattrTarget t = { .fd = fd, .dirfd = dircursor_fd(&w->c), .name = name };
	_cleanup_free_ void *blob = NULL;
	char key[XATTR_NAME_MAX + 1], pk[XATTR_NAME_MAX + 16];
	const void *val;
	size_t len = 0, pos = 0, vlen;
	int r;

	r = xattr_blob_read(&t, &blob, &len);
	if (r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return r;
	while (xattr_blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen)) {
		bool access = streq(key, ACL_XATTR_ACCESS);

		/* XFS shows root its ACLs a second time, in its own format: the ACL itself is carried. */
		if (streq(key, "trusted.SGI_ACL_FILE") || streq(key, "trusted.SGI_ACL_DEFAULT"))
			continue;
		/* An ACL both ways, as GNU tar writes it: the text for --acls, the attribute for --xattrs. */
		if (access || streq(key, ACL_XATTR_DEFAULT)) {
			_cleanup_free_ char *text = NULL;

			r = acl_xattr_to_text(val, vlen, &text);
			if (r == 0)
				r = pax_add(w, access ? "SCHILY.acl.access" : "SCHILY.acl.default", text, strlen(text));
		}
		if (r == 0) {
			snprintf(pk, sizeof(pk), "SCHILY.xattr.%s", key);
			r = pax_add(w, pk, val, vlen);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The ustar header of an entry (after its pax header, which carries what does not fit). */
static int header(Writer *w, const char *name, const struct stat *st, char type, uint64_t size, const char *link)
{
	char h[BLOCK] = { 0 };
	unsigned sum = 0;

	field_str(h, 100, name);
	octal(h + 100, 8, st->st_mode & 07777);
	if (!octal(h + 108, 8, st->st_uid))
		octal(h + 108, 8, 0);
	if (!octal(h + 116, 8, st->st_gid))
		octal(h + 116, 8, 0);
	if (!octal(h + 124, 12, size))
		octal(h + 124, 12, 0);
	if (st->st_mtim.tv_sec < 0 || !octal(h + 136, 12, (uint64_t)st->st_mtim.tv_sec))
		octal(h + 136, 12, 0);
	h[156] = type;
	if (link)
		field_str(h + 157, 100, link);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	if (type == '3' || type == '4') {
		octal(h + 329, 8, major(st->st_rdev));
		octal(h + 337, 8, minor(st->st_rdev));
	}
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < BLOCK; i++)
		sum += (unsigned char)h[i];
	octal(h + 148, 7, sum);
	h[155] = ' ';
	return out_write(w, h, BLOCK);
}

/* The extended header with w->pax's records, then resets them. */
static int flush_pax(Writer *w, const char *name)
{
	struct stat st = { .st_mode = 0644 };
	char n[100];
	int r;

	snprintf(n, sizeof(n), "./PaxHeaders/%.80s", name[0] == '.' && name[1] == '/' ? name + 2 : name);
	r = header(w, n, &st, 'x', w->pax.n, NULL);
	if (r == 0)
		r = out_write(w, w->pax.p, w->pax.n);
	if (r == 0)
		r = out_pad(w, w->pax.n);
	w->pax.n = 0;
	return r;
}

/* The common records of an entry: times, large owners and sizes, attributes. */
static int common_records(Writer *w, const struct stat *st, uint64_t size, int fd, const char *name)
{
	int r;

	r = pax_add_time(w, "mtime", &st->st_mtim);
	if (r == 0)
		r = pax_add_time(w, "atime", &st->st_atim);
	if (r == 0 && st->st_uid > 07777777)
		r = pax_add_u64(w, "uid", st->st_uid);
	if (r == 0 && st->st_gid > 07777777)
		r = pax_add_u64(w, "gid", st->st_gid);
	if (r == 0 && size > 077777777777ull)
		r = pax_add_u64(w, "size", size);
	if (r == 0)
		r = add_xattrs(w, fd, name);
	return r;
}

typedef struct Region {
	uint64_t off, len;
} Region;

/* The data regions of @fd (SEEK_DATA/SEEK_HOLE); *ret_sparse if any hole. */
static int regions_of(int fd, uint64_t size, Region **ret, size_t *ret_n, bool *ret_sparse)
{
	Region *v = NULL;
	size_t n = 0, cap = 0;
	off_t pos = 0;

	*ret_sparse = false;
	while ((uint64_t)pos < size) {
		off_t data = lseek(fd, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (data < 0) {
			free(v);
			return negative_errno();
		}
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0) {
			free(v);
			return negative_errno();
		}
		if ((uint64_t)hole > size)
			hole = (off_t)size;
		if (data > pos)
			*ret_sparse = true;
		if (hole > data) {
			if (GROW_ARRAY(v, cap, n + 1, 16) < 0) {
				free(v);
				return -ENOMEM;
			}
			v[n++] = (Region){ (uint64_t)data, (uint64_t)(hole - data) };
		}
		pos = hole;
	}
	if ((uint64_t)pos < size)
		*ret_sparse = true;
	*ret = v;
	*ret_n = n;
	return 0;
}

/* File data is read straight into the output buffer: no copy between the two. */
static int copy_range(Writer *w, int fd, uint64_t off, uint64_t len)
{
	while (len > 0) {
		size_t room = OUT_BUF - w->olen, k;
		int r;

		if (room == 0) {
			r = out_flush(w);
			if (r < 0)
				return r;
			room = OUT_BUF;
		}
		k = len < room ? (size_t)len : room;
		r = pread_all(fd, w->obuf + w->olen, k, off);
		if (r == -ENODATA)
			return errmsg_set(&w->why, -EIO, "a file got shorter while it was read");
		if (r < 0)
			return r;
		w->olen += k;
		off += k;
		len -= k;
		w->st.bytes += k;
	}
	return 0;
}

static int write_file(Writer *w, const char *path, const char *name, const struct stat *st)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ Region *reg = NULL;
	struct stat fst;
	size_t n = 0;
	bool sparse;
	int r;

	/* O_NONBLOCK: a lease (nobody should hold one on a snapshot) never holds the export. */
	fd = openat(dircursor_fd(&w->c), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errmsg_set(&w->why, negative_errno(), "cannot open %s: %s", path, errno_str(errno));
	if (fstat(fd, &fst) < 0 || fst.st_ino != st->st_ino || !S_ISREG(fst.st_mode))
		return errmsg_set(&w->why, -ESTALE, "%s changed while it was read", path);
	/*
	 * Holes are looked for only in a file with fewer blocks than its size (GNU tar's test): two
	 * lseeks less per file. Exact on a snapshot, whose clones have no blocks beyond the end;
	 * an allocated but unwritten range goes out as zeros.
	 */
	if ((uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size)
		r = regions_of(fd, (uint64_t)st->st_size, &reg, &n, &sparse);
	else if (st->st_size > 0 && !(reg = malloc(sizeof(*reg))))
		r = -ENOMEM;
	else {
		r = 0;
		sparse = false;
		n = st->st_size > 0;
		if (n)
			reg[0] = (Region){ 0, (uint64_t)st->st_size };
	}
	if (r < 0)
		return errmsg_set(&w->why, r, "cannot map the data of %s: %s", path, errno_str(r));
	if (!sparse) {
		r = pax_add_str(w, "path", path);
		if (r == 0)
			r = common_records(w, st, (uint64_t)st->st_size, fd, name);
		if (r == 0)
			r = flush_pax(w, path);
		if (r == 0)
			r = header(w, path, st, '0', (uint64_t)st->st_size, NULL);
		for (size_t i = 0; r == 0 && i < n; i++)
			r = copy_range(w, fd, reg[i].off, reg[i].len);
		return r == 0 ? out_pad(w, (uint64_t)st->st_size) : r;
	}

	/* GNU sparse 1.0: the map ("COUNT\nOFFSET\nLENGTH\n...", padded) leads the data; the last entry ends at the size. */
	{
		Buf map = { 0 };
		uint64_t data = 0, total;
		char num[48], hname[100];
		bool ends = n > 0 && reg[n - 1].off + reg[n - 1].len == (uint64_t)st->st_size;
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

		snprintf(num, sizeof(num), "%zu\n", n + (ends ? 0 : 1));
		r = buf_add(&map, num, strlen(num));
		for (size_t i = 0; r == 0 && i < n; i++) {
			snprintf(num, sizeof(num), "%" PRIu64 "\n%" PRIu64 "\n", reg[i].off, reg[i].len);
			r = buf_add(&map, num, strlen(num));
			data += reg[i].len;
		}
		if (r == 0 && !ends) {
			snprintf(num, sizeof(num), "%" PRIu64 "\n0\n", (uint64_t)st->st_size);
			r = buf_add(&map, num, strlen(num));
		}
		total = (map.n + BLOCK - 1) / BLOCK * BLOCK + data;
		if (r == 0)
			r = pax_add_str(w, "GNU.sparse.major", "1");
		if (r == 0)
			r = pax_add_str(w, "GNU.sparse.minor", "0");
		if (r == 0)
			r = pax_add_str(w, "GNU.sparse.name", path);
		if (r == 0)
			r = pax_add_u64(w, "GNU.sparse.realsize", (uint64_t)st->st_size);
		if (r == 0)
			r = common_records(w, st, total, fd, name);
		if (r == 0)
			r = flush_pax(w, path);
		snprintf(hname, sizeof(hname), "./GNUSparseFile.0/%.70s", base);
		if (r == 0)
			r = header(w, hname, st, '0', total, NULL);
		if (r == 0)
			r = out_write(w, map.p, map.n);
		if (r == 0)
			r = out_pad(w, map.n);
		for (size_t i = 0; r == 0 && i < n; i++)
			r = copy_range(w, fd, reg[i].off, reg[i].len);
		if (r == 0)
			r = out_pad(w, data);
		free(map.p);
		return r;
	}
}

/* An entry but a regular file's data: directories, links, specials. */
static int write_other(Writer *w, const char *path, const char *name, const struct stat *st, char type,
		       const char *link, int fd)
{
	int r;

	r = pax_add_str(w, "path", path);
	if (r == 0 && link)
		r = pax_add_str(w, "linkpath", link);
	if (r == 0 && type == '1') {
		/* The inode's attributes came with its first name; its times again, as bsdtar sets them on the inode. */
		r = pax_add_time(w, "mtime", &st->st_mtim);
		if (r == 0)
			r = pax_add_time(w, "atime", &st->st_atim);
	} else if (r == 0)
		r = common_records(w, st, 0, fd, name);
	if (r == 0)
		r = flush_pax(w, path);
	if (r == 0)
		r = header(w, path, st, type, 0, link);
	return r;
}

static void level_free(Level *l)
{
	names_free(l->names, l->n);
}

/* The current directory's names, sorted, as a new level. */
static int push_level(Writer *w)
{
	Level l = { .path_len = w->path.n };
	int r;

	r = dir_read_names(dircursor_fd(&w->c), true, &w->mem, TAR_WRITE_MEM_MAX, &l.names, &l.n);
	if (r == 0 && GROW_ARRAY(w->levels, w->cap, w->depth + 1, 16) < 0)
		r = -ENOMEM;
	if (r < 0) {
		level_free(&l);
		return r;
	}
	w->levels[w->depth++] = l;
	return 0;
}

/* A hard-linked file seen before: its first path; else remembers @path as its first. */
static int first_link(Writer *w, const struct stat *st, const char *path, const char **ret)
{
	uint64_t idx;
	char *copy;

	*ret = NULL;
	if (u64map_get(&w->links, (uint64_t)st->st_ino, &idx)) {
		*ret = w->first_paths[idx - 1];
		return 0;
	}
	w->mem += strlen(path) + 32;
	if (w->mem > TAR_WRITE_MEM_MAX)
		return -ENOBUFS;
	copy = strdup(path);
	if (!copy || GROW_ARRAY(w->first_paths, w->cap_first, w->n_first + 1, 64) < 0) {
		free(copy);
		return -ENOMEM;
	}
	w->first_paths[w->n_first++] = copy;
	return u64map_put(&w->links, (uint64_t)st->st_ino, w->n_first);
}

static int entry(Writer *w, const char *name)
{
	_cleanup_free_ char *target = NULL;
	_cleanup_close_ int dfd = -EBADF;
	const char *first;
	struct stat st;
	int r;

	r = dircursor_stat(&w->c, name, &st);
	if (r == -ENOENT || r == -EXDEV)
		return 0; /* gone, or a mount point: not the tree's */
	if (r < 0)
		return errmsg_set(&w->why, r, "cannot stat %s%s: %s", w->path.p, name, errno_str(r));
	w->path.n = w->levels[w->depth - 1].path_len;
	if (buf_add(&w->path, name, strlen(name)) < 0)
		return -ENOMEM;
	w->st.entries++;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		r = first_link(w, &st, w->path.p, &first);
		if (r < 0)
			return r;
		if (first)
			return write_other(w, w->path.p, name, &st, '1', first, -EBADF);
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return write_file(w, w->path.p, name, &st);
	case S_IFLNK: {
		size_t cap = 256;

		for (;;) {
			ssize_t k;

			free(target);
			target = malloc(cap);
			if (!target)
				return -ENOMEM;
			k = readlinkat(dircursor_fd(&w->c), name, target, cap);
			if (k < 0)
				return errmsg_set(&w->why, negative_errno(), "cannot read link %s: %s", w->path.p, errno_str(errno));
			if ((size_t)k < cap) {
				target[k] = '\0';
				break;
			}
			cap *= 2;
		}
		return write_other(w, w->path.p, name, &st, '2', target, -EBADF);
	}
	case S_IFCHR:
		return write_other(w, w->path.p, name, &st, '3', NULL, -EBADF);
	case S_IFBLK:
		return write_other(w, w->path.p, name, &st, '4', NULL, -EBADF);
	case S_IFIFO:
		return write_other(w, w->path.p, name, &st, '6', NULL, -EBADF);
	case S_IFSOCK:
		w->st.sockets++;
		w->st.entries--;
		return 0;
	case S_IFDIR:
		r = dircursor_push(&w->c, name);
		if (r == -EXDEV)
			return 0;
		if (r < 0)
			return errmsg_set(&w->why, r, "cannot enter %s: %s", w->path.p, errno_str(r));
		if (buf_add(&w->path, "/", 1) < 0)
			return -ENOMEM;
		dfd = fcntl(dircursor_fd(&w->c), F_DUPFD_CLOEXEC, 3);
		r = dfd < 0 ? negative_errno() : write_other(w, w->path.p, ".", &st, '5', NULL, dfd);
		if (r == 0)
			r = push_level(w);
		return r;
	default:
		return 0;
	}
}

static int write_tree(Writer w, int dirfd, TarWriteStats *ret_stats, char **reterr_msg)
{
	static const char end[2 * BLOCK];
	struct stat st;
	int r;

	w.obuf = malloc(OUT_BUF);
	if (!w.obuf)
		return -ENOMEM;
	r = dircursor_init(&w.c, dirfd);
	if (r < 0) {
		free(w.obuf);
		return errmsg_set(reterr_msg, r, "cannot open the tree: %s", errno_str(r));
	}
	if (fstat(dirfd, &st) < 0)
		r = negative_errno();
	if (r == 0)
		r = buf_add(&w.path, "./", 2);
	if (r == 0) {
		w.st.entries++;
		r = write_other(&w, "./", ".", &st, '5', NULL, dirfd);
	}
	if (r == 0)
		r = push_level(&w);
	while (r == 0 && w.depth > 0) {
		Level *l = &w.levels[w.depth - 1];

		if (w.stop && *w.stop) {
			r = -EINTR;
			break;
		}
		if (l->next == l->n) {
			level_free(l);
			w.depth--;
			if (w.depth > 0)
				r = dircursor_pop(&w.c);
			continue;
		}
		r = entry(&w, l->names[l->next++]);
	}
	if (r == 0)
		r = out_write(&w, end, sizeof(end));
	if (r == 0)
		r = out_flush(&w);
	for (size_t i = 0; i < w.depth; i++)
		level_free(&w.levels[i]);
	free(w.levels);
	for (size_t i = 0; i < w.n_first; i++)
		free(w.first_paths[i]);
	free(w.first_paths);
	u64map_done(&w.links);
	dircursor_done(&w.c);
	free(w.path.p);
	free(w.pax.p);
	free(w.obuf);
	if (r < 0) {
		if (w.why) {
			free(*reterr_msg);
			*reterr_msg = w.why;
			return r;
		}
		return errmsg_set(reterr_msg, r, "%s", r == -EINTR ? "interrupted" : r == -ENOBUFS ?
				  "the tree has more names than the export may hold in memory" : errno_str(r));
	}
	*ret_stats = w.st;
	return 0;
}

int tar_write_tree(int dirfd, int out, volatile sig_atomic_t *stop, TarWriteStats *ret_stats, char **reterr_msg)
{
	return write_tree((Writer){ .out = out, .stop = stop }, dirfd, ret_stats, reterr_msg);
}

int tar_write_tree_to(int dirfd, TarWriteFn fn, void *userdata, volatile sig_atomic_t *stop, TarWriteStats *ret_stats,
		      char **reterr_msg)
{
	return write_tree((Writer){ .out = -EBADF, .fn = fn, .fn_data = userdata, .stop = stop }, dirfd, ret_stats,
			  reterr_msg);
}
